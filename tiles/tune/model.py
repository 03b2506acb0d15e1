"""The static cost model: one launch estimated from the traced kernel, the arguments' shapes, the compiled
candidate's resources and the target's device-table entry, where nothing can be timed (docs/tuning.md)."""
from __future__ import annotations

import math

import numpy as np

from .. import ir, targets
from ..toolchains import _vendor_module
from ..types import GL, ST, SV

# Assumptions of the model (docs/tuning.md), to be calibrated against the timed runs:
LATENCY_S = 1.5e-6       # a global load's latency under load: a unit's bandwidth is at most its bytes in flight / it.
#                          The H200's skinny GEMM winners (01:29 UTC 12-02) drew their bytes at 1.2-1.7 us per pipeline
#                          of loads in flight (16x4096x4096, 64x64 tiles, 5 stages: 80 KB at 50 GB/s an SM, 1.6 us)
UNIT_SHARE = 3.0         # one SM/CU can draw up to this many times its fair share (bandwidth / units) of DRAM
L2_FACTOR = 2.5          # the L2 (Infinity Cache) serves the blocks' repeated reads this many times faster than DRAM
BLOCK_S = 1.5e-6         # a block's fixed cost (prologue, pipeline fill, epilogue) per wave of resident blocks
# Round trips to memory after the main loop that nothing overlaps, LATENCY_S each: tl.store_sum's part stored and
# fenced, its counter's atomic, the last block's reads of the parts. On the H100 (12-06) a split of K in two cost
# 2.4 us at 16x4096x4096 (21.0 against 18.6 us, 64x64 tiles) where the model without it saved 1.7 us
STORE_SUM_TRIPS = 3
LAUNCH_S = 3.0e-6        # one launch
MATRIX_SUSTAINED = 0.8   # the share of the table's matrix peak (quoted at the boost clock) a matrix-bound kernel keeps
#                          up: on the H200 (12-02 17:45 UTC) the matrix-bound 128x256 tiles ran at 1.16-1.37x the
#                          model's time at 1.0 from 2048 rows up (cuBLAS at 16384x28672x8192: 0.71 of it), while the
#                          L2-bound 128x128 ones ran at 0.94-1.12x theirs; 0.75-0.85 fit as well on half the grid
#                          (scripts/model_fit.py, docs/tuning.md)
TRANSCENDENTAL = 4       # exp/exp2/log/log2 cost this many vector operations
# Workers issuing matrix instructions that a block needs to keep its unit's matrix cores at their peak, where one is
# not enough: on sm_90a a consumer warpgroup waits on its stage's barrier and its wgmma fence between steps, so one
# warpgroup a block leaves them idle meanwhile (on the H200 every winner with 128-row tiles has two; the model's
# 128-row picks with one lost 1.84x and 1.88x at 512x4096x4096 and 512x4096x14336). A block's, not a unit's:
# two resident blocks of one warpgroup each do not stand in for it (128x128 tiles, one warpgroup, two blocks an
# SM: 1.63-1.96x the time of two warpgroups one block an SM at every shape of 512 rows and more, 12-02 17:45 UTC)
MATRIX_ISSUERS = {"sm_90a": 2}
# Targets where a tile's zero fill beyond the array's edge costs what loading those bytes from DRAM would. sm_90a
# loads tiles by TMA, which fills a box's rows past the edge with zeros: on the H200 at M = 1 and 16 (a 64-row A
# tile holding 1 or 16 rows) every memory-bound candidate timed at about (the arrays' bytes + the blocks' zero-filled
# bytes) / DRAM's rate (1x28672x8192: 64x256 tiles 119 us against 126.5 so modelled, 64x128 two an SM 157 against
# 151, 128x256 157 against 151), and 64x64 tiles, which fill the most, lost 1.3-2x there; at M = 64, nothing to
# fill, 64x64 and 64x128 tiles timed the same. Since 12-04 the runtime fits a box to a global shorter than the tile
# (the CUDA backend's schedules.box_rows: its rows rounded up to 8), so the fill stops there; not yet timed. Not
# charged elsewhere: sm_80's cp.async with a zero source size and AMD's buffer loads past their range fetch
# nothing (assumed; not timed here).
FILL_FROM_DRAM = {"sm_90a"}


# A representative device per target for the model where none is present (`--device` picks another)
MODEL_DEVICE = {"sm_80": "A100 SXM", "sm_90a": "H200 SXM", "gfx942": "MI300X", "gfx950": "MI355X",
                "apple": "M4 Max"}


def model_device(target: str, device: str | None = None) -> targets.Device:
    if device:
        d = targets.DEVICES.get(device) or targets.device_for(device)
        if d is None:
            raise KeyError(f"unknown device {device!r}; known: {', '.join(targets.DEVICES)}")
        return d
    return targets.DEVICES[MODEL_DEVICE[target]]


def work(k: ir.Kernel, args, box_rows=None) -> dict:
    """What one launch of k on these arguments does, per block (averaged over blocks where loop counts depend
    on the block, as causal attention's do): matrix FLOPs, vector operations, global bytes, and the bytes one
    step of the pipelined loop loads into shared memory (what runs ahead, `step_bytes`) and into registers (what
    each step waits for, `step_sync`); and the grid's size and the arrays' total bytes.
    box_rows(tile rows, array rows): the rows a shared tile's load fills, zeros included (default: the tile's)."""
    from ..interp import bind
    env = bind(k, args)
    grid = [max(1, int(ir.evaluate(g, env))) for g in k.grid] or [1]
    blocks = int(np.prod(grid))
    samples = sorted({0, grid[0] // 2, grid[0] - 1})
    total = dict.fromkeys(_WORK, 0.0)
    for b0 in samples:
        benv = {**env, **{("block", i): 0 for i in range(len(grid))}, ("block", 0): b0}
        _work(k.body, benv, 1.0, total, False, box_rows or (lambda rows, extent: rows))
    per_block = {n: v / len(samples) for n, v in total.items()}
    for n in ("step_bytes", "step_sync"):   # maxima, not sums over the samples
        per_block[n] = total[n]
    unique = 0.0
    for p, a in zip(k.params, args):
        if isinstance(p, GL):
            unique += np.prod(a.shape) * p.dtype.itemsize
    return {**per_block, "blocks": blocks, "unique_bytes": unique}


_WORK = ("flops", "vector", "bytes", "step_bytes", "step_sync", "fill", "ahead", "sync", "trips")


def _work(stmts, env, mult, acc, in_pipeline, box_rows):
    for s in stmts:
        if isinstance(s, ir.Loop):
            n = max(0, int(ir.evaluate(s.count, env)))
            inner = {**env, ir.key(s.var): 0}
            if s.kind == "pipeline":   # one step's loads into shared tiles are what the pipeline keeps in flight
                step = dict.fromkeys(_WORK, 0.0)
                _work(s.body, inner, 1.0, step, True, box_rows)
                acc["step_bytes"] = max(acc["step_bytes"], step["ahead"])
                acc["step_sync"] = max(acc["step_sync"], step["sync"])   # into registers: not run ahead
            _work(s.body, inner, mult * n, acc, in_pipeline or s.kind == "pipeline", box_rows)
            continue
        dst, srcs = s.dst, s.srcs
        if s.name == "mma":
            a = srcs[0]
            depth = a.shape[0] if s.attrs.get("trans_a") else a.shape[1]
            acc["flops"] += mult * 2.0 * dst.shape[0] * dst.shape[1] * depth
        elif s.name == "load" and isinstance(srcs[0], GL):
            inside = _inside(dst, srcs[0], env)
            acc["bytes"] += mult * inside * srcs[0].dtype.itemsize
            acc["ahead" if isinstance(dst, (ST, SV)) else "sync"] += mult * inside * srcs[0].dtype.itemsize
            if isinstance(dst, ST):   # a shared tile, where sm_90a loads by TMA (FILL_FROM_DRAM)
                rows = box_rows(dst.shape[0], _extent(srcs[0].rows, env))
                acc["fill"] += mult * (rows * dst.shape[1] - inside) * srcs[0].dtype.itemsize
        elif s.name in ("store", "atomic_add") and isinstance(dst, GL):
            twice = 2 if s.name == "atomic_add" else 1
            acc["bytes"] += mult * _inside(srcs[0], dst, env) * dst.dtype.itemsize * twice
        elif s.name == "store_sum":   # its f32 part out; one block in `count` reads them all back and writes dst
            count = s.attrs["count"]
            acc["bytes"] += mult * _inside(srcs[0], dst, env) * (4 + (4 * count + dst.dtype.itemsize) / count)
            acc["trips"] += mult * STORE_SUM_TRIPS
        elif dst is not None and hasattr(dst, "shape") and not isinstance(dst, GL) and s.name not in ("load", "store"):
            weight = TRANSCENDENTAL if s.name in ("exp", "exp2", "log", "log2") else 1
            acc["vector"] += mult * weight * np.prod(dst.shape)


def _inside(tile, g: GL, env) -> float:
    """The elements of a tile inside the array, where the array is narrower than the tile (a decode step's one
    row of A in a 64-row tile): no load fetches and no store writes beyond the edge (what a load fills there
    instead: `fill`, FILL_FROM_DRAM)."""
    if len(tile.shape) != 2:
        return float(np.prod(tile.shape))
    return float(min(tile.shape[0], _extent(g.rows, env)) * min(tile.shape[1], _extent(g.cols, env)))


def _extent(d, env) -> int:
    return d if isinstance(d, int) else int(ir.evaluate(d, env))


def model(k: ir.Kernel, args, target: str, static=None, device: targets.Device | None = None,
          launches: int = 1) -> tuple[float, dict]:
    """Estimated seconds of one launch and the terms behind it (docs/tuning.md, "The static model"):

      matrix   = ceil(blocks / units) x FLOPs per block / (MATRIX_SUSTAINED x matrix peak / units)   (blocks
                 quantized over units), stretched where fewer workers issue matrix instructions per block than it
                 needs (MATRIX_ISSUERS)
      vector   = the same with vector operations against the vector (f32) rate
      memory   = the largest of: the arrays' bytes (and, on FILL_FROM_DRAM targets, every block's zero fill beyond
                 the arrays' edges) from DRAM, every block's bytes through the L2 (L2_FACTOR x
                 DRAM's rate), both at the share of the bandwidth the busy units can draw (UNIT_SHARE x theirs,
                 at most all of it); and per unit, its blocks' bytes at what its resident blocks keep in flight
                 (stages x a pipeline step's loads into shared memory, plus its loads into registers, which
                 do not run ahead) per LATENCY_S
      fixed    = waves x (BLOCK_S + a block's unoverlapped round trips x LATENCY_S) + launches x LAUNCH_S,
                 waves = ceil(blocks / (units x resident blocks per unit))
      estimate = max(matrix, vector, memory) + fixed
    """
    dev = device or model_device(target)
    fitted = target in FILL_FROM_DRAM and k.options.get("boxes", True)
    w = work(k, args, _vendor_module(target, "schedules").box_rows if fitted else None)
    units, blocks = dev.units, w["blocks"]
    resident = _resident(k, target, static)
    mma_dtype = _mma_dtype(k)
    peak = dev.peak_tflops.get(mma_dtype, dev.peak_tflops.get("bf16", 1.0)) * 1e12
    vec = dev.peak_tflops.get("f32", peak / 1e12) * 1e12
    bw = dev.mem_bw_tbs * 1e12
    per_unit = math.ceil(blocks / units)
    loop = _loop_limit(static)
    # the matrix cores at their sustained rate, stretched where the main loop's own count says another unit (LDS, issue)
    # needs more clocks per MFMA than they do (AMD: backends/hip/loopreport.py)
    matrix = per_unit * w["flops"] * units / peak * (loop["loop_stretch"] if loop else 1.0)
    matrix *= max(1.0, MATRIX_ISSUERS.get(target, 1) / (k.options.get("workers") or 1)) / MATRIX_SUSTAINED
    vector = per_unit * w["vector"] * units / vec
    # a pipeline runs its shared tiles' loads `stages` steps ahead; its loads into registers, one step at a time
    in_flight = max(1, k.options.get("stages") or 2) * w["step_bytes"] + w["step_sync"] or w["bytes"]
    share = bw * min(1.0, min(blocks, units) * UNIT_SHARE / units)
    latency_bw = max(1, min(resident, per_unit)) * in_flight / LATENCY_S
    dram = w["unique_bytes"] + (blocks * w["fill"] if target in FILL_FROM_DRAM else 0.0)
    memory = max(dram / share, blocks * w["bytes"] / (L2_FACTOR * share), per_unit * w["bytes"] / latency_bw)
    waves = math.ceil(blocks / (units * resident))
    fixed = waves * (BLOCK_S + w["trips"] * LATENCY_S) + launches * LAUNCH_S
    terms = {"matrix_s": matrix, "vector_s": vector, "memory_s": memory, "fixed_s": fixed, "blocks": blocks,
             "resident": resident, "waves": waves, "device": dev.name}
    terms["bound"] = max(("matrix", matrix), ("vector", vector), ("memory", memory), key=lambda x: x[1])[0]
    terms.update(loop or {})
    return max(matrix, vector, memory) + fixed, terms


def _resident(k, target, static) -> int:
    """Blocks per SM/CU: the toolchain's figure, else what shared memory allows (at least 1)."""
    if static is not None and static.blocks_per_unit:
        return static.blocks_per_unit
    smem = static.shared_bytes if static is not None and static.shared_bytes else None
    if smem is None:
        smem = sum(np.prod(t.shape) * t.dtype.itemsize for t in k.tiles if type(t).__name__ in ("ST", "SV"))
    return max(1, targets.target(target).shared_bytes // max(int(smem), 1))


def _mma_dtype(k) -> str:
    for op, _ in k.walk():
        if op.name == "mma":
            name = op.srcs[1].dtype.name
            return "fp8" if name.startswith("fp8") else name
    return "bf16"


def _loop_limit(static) -> dict | None:
    """From the compiled kernel's main-loop report (AMD: tiles inspect's per-MFMA counts, Static.loop): the unit
    that bounds one iteration, its clocks per MFMA, and how many times the matrix core's own that is."""
    bound = static.loop.bound() if static is not None and getattr(static, "loop", None) is not None else None
    if not bound or not bound.get("matrix core"):
        return None
    unit, clocks = max(bound.items(), key=lambda kv: kv[1])
    return {"loop_limit": unit, "loop_clk_per_mfma": clocks, "loop_stretch": clocks / bound["matrix core"]}
