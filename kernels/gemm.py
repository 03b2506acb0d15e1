"""GEMM: C = A @ B (A^T or B^T given with trans_a, trans_b), bf16/f16 inputs, f32 accumulation, bf16/f16/f32
output; or C += A @ B into an f32 C (`accumulate`). The K loop may split over several blocks per output tile
(`SPLIT`): the parallelism a skinny GEMM (a decode step's M of 1 to 64) lacks. Accumulating, the partial products
are added into C with atomic_add; otherwise each goes to its own slice of an f32 workspace and the last block of a
tile to finish adds them and converts to C's dtype (tl.store_sum; on Apple a second launch, `sum_parts`: the plan,
`split_plan`). A C of one row may be computed as its transpose (`swap`): the weights then fill the matrix
instruction's rows."""
from __future__ import annotations

import numpy as np

import tiles as tl
from tiles import targets
from tiles.backend import as_rows, resolve
from tiles.dsl import TileError
from tiles.tune import Shaped, pow2

# Block tile and worker split per target. workers: warps (sm_80), consumer warpgroups (sm_90a), waves
# (CDNA), simdgroups (apple). stages: how far the pipelined loads run ahead.
CONFIGS = {
    "default": dict(BM=64, BN=64, BK=32),
    "sm_80": dict(BM=128, BN=128, BK=32, stages=3, workers=4),
    "sm_90a": dict(BM=128, BN=256, BK=64, stages=4, workers=2),
    # CDNA: 8 waves, 64x128 of acc each, 2 LDS buffers (gfx950 BK 64: 128 of 160 KB, 64 MFMAs a step; gfx942: 64 KB)
    "gfx942": dict(BM=256, BN=256, BK=32, workers=8, schedule="plain"),
    "gfx950": dict(BM=256, BN=256, BK=64, workers=8, schedule="plain"),
    "apple": dict(BM=64, BN=64, BK=32, stages=2, workers=4),
}


# The search space (tiles tune gemm, docs/tuning.md): tile shapes, pipeline depth and workers per target, and the
# split of K where the output accumulates. Pruned by the toolchain (shared memory, spills) and by `fits` below.
TUNE = {
    "default": dict(BM=[32, 64], BN=[32, 64], BK=[32], SPLIT=[1, 2, 4]),
    "sm_80": dict(BM=[64, 128], BN=[64, 128, 256], BK=[32, 64], stages=[3, 4], workers=[4, 8], SPLIT=[1, 2, 4, 8]),
    "sm_90a": dict(BM=[64, 128, 256], BN=[16, 64, 128, 256], BK=[64], stages=[3, 4, 5, 8, 10], workers=[1, 2, 4],
                   SPLIT=[1, 2, 4, 8], blocks_per_sm=[1, 2], cluster=[1, 2], swap=[False, True]),
    "gfx942": dict(BM=[64, 128, 256], BN=[64, 128, 256], BK=[32, 64], workers=[2, 4, 8], SPLIT=[1, 2, 4, 8]),
    "gfx950": dict(BM=[64, 128, 256], BN=[64, 128, 256], BK=[32, 64], workers=[2, 4, 8], SPLIT=[1, 2, 4, 8]),
    "apple": dict(BM=[32, 64], BN=[32, 64], BK=[16, 32], SPLIT=[1, 2, 4]),
}


def bucket(C, A, B):
    """Launches share a tuned configuration per power of two of M at the same N and K (a model's weights), and
    of the batch."""
    m, n, k = mnk(C, A)
    return pow2(m), n, k, pow2(batch(C))


def batch(C) -> int:
    """C's batch: its first dim where it is (batch, M, N), else 1."""
    return C.shape[0] if len(C.shape) == 3 else 1


def mnk(C, A) -> tuple[int, int, int]:
    """A launch's M, N and K whether A is given transposed or not: C is M x N, and A holds M and K."""
    m, n = C.shape[-2], C.shape[-1]
    return m, n, A.shape[-2] + A.shape[-1] - m


def fits(cfg, C, A, B):
    """No block taller than twice the rows, beyond 64; a split of K with each part two steps of the loop at
    least, and only while the output tiles alone are too few to fill a GPU; clusters of two blocks (sm_90a) only
    where K is whole, one block an SM, and the tiles fill two rounds of the GPU's SMs (what they save is the B
    tile's second read from L2). A swap (C^T: BM tiles N, BN A's one row) only for one row, 16 wide, and a width of
    16 only swapped."""
    m, n, k = mnk(C, A)
    swap = cfg.get("swap", False)
    if swap != (cfg["BN"] == 16) or (swap and (len(C.shape) != 2 or m != 1 or cfg.get("trans_a"))):
        return False
    depth = batch(C)
    tiles = -(-n // cfg["BM"]) if swap else -(-m // cfg["BM"]) * -(-n // cfg["BN"]) * depth
    split = cfg.get("SPLIT", 1)
    if cfg.get("cluster", 1) > 1 and (split > 1 or cfg.get("blocks_per_sm", 1) > 1 or tiles < 2 * SMS):
        return False
    return (swap or cfg["BM"] <= max(64, 2 * pow2(m))) and (split == 1 or (-(-k // cfg["BK"]) >= 2 * split
                                                                         and tiles < 512))


SMS = 132   # an H100 / H200 SXM: what a skinny GEMM's blocks should cover
# Targets with no device here, at M <= 64: the static model's first choice at the LLM grid's decode shapes
# (`tiles tune gemm --target T --static`), and the blocks its split of K fills up to (SMs or CUs times what
# the model's choices held: A100 108 x 2, MI300X 304 x 4, MI355X 256 x 4). Not timed.
MODELLED = {"sm_80": (dict(BM=64, BN=64, BK=64, stages=3, workers=4), 2 * 108),
            "gfx942": (dict(BM=64, BN=64, BK=64, workers=2), 4 * 304),
            "gfx950": (dict(BM=64, BN=64, BK=64, workers=2), 4 * 256)}


def skinny(target, C, A, B, **keywords):
    """The configuration for a few rows, where the configured tiles (128x256 on sm_90a, 128x128 on sm_80, 256x256
    of 8 waves on CDNA) leave most of the GPU idle: 16 blocks at N = 4096 on sm_90a, 135.6 us against 37.7 tuned
    at 16x4096x14336 on the H200. A tuned entry, or the caller's own value of one of these names, replaces it
    (tiles.tune.defaults).

    sm_90a, M <= 512: the timed winners of the H200's grids (docs/benchmarks.md: 12-02 17:45 and 18:40 UTC, 12-04
    12:07 UTC) and the H100's (12-06). Where 64x64 tiles make one wave that fills half the SMs or more (N = 4096, up
    to 128 rows): with K whole up to K = 4096, where no partial sums beat the split's (16x4096x4096 18.6 against
    21.0 us split in two by tl.store_sum, on the H100), in steps of 128 at 6 stages (H100, 12-07, against steps of
    64 at 8: 1x4096x4096 17.9 / 18.1 us, 16x 18.0 / 18.5, 64x 17.3 / 18.4; cuBLAS 16.4, 18.7, 17.0), at 8 stages of
    64 where K is split, each part keeping
    PART_STEPS (16x4096x14336 in two: 47.5 us against cuBLAS's 44.9 and 64x128 tiles' 51.9); past 64 rows, where
    K is longer and too short to split, 128x64 tiles over two consumer warpgroups, whose 64-row halves share each
    B tile (128x4096x14336 49.4 us against 128x128 split 2's 55.0 and cuBLAS's 55.1 on the H100, 12-06; the static
    model's first choice there). Otherwise up to 64 rows, 64-row tiles with one consumer warpgroup, 64x128 at 5
    stages (4, two blocks an SM, where K is split), or 64x256 at 3 where those still make ~100 blocks (N =
    28672); up to 512 rows, 128x128 at 5 stages, unless 128x256 tiles make ~100 blocks already (then the configured
    default, which won there); K split while the blocks stay within the SMs (64-row tiles: up to eight ways;
    128-row tiles: two at most).
    One row there is swapped (C^T = B^T A^T, `swapped`): the weights fill wgmma's 64 rows and A's row its N of 16,
    a stage of 128 steps 20 KB where unswapped A's 64 rows took half of 32 (H100, 12-07: 1x4096x4096 16.9 us
    against 18.0 unswapped and cuBLAS's 16.5, at 8 stages; 9, 10 and 11 took 17.7, 18.2 and 18.4; tiles over 128
    or 256 of N with K split to keep 64 blocks 18.5-19.5).
    sm_80 and CDNA, M <= 64: MODELLED, the static model's choice, not timed (1x4096x4096 modelled at 25.5 us on an
    A100 against 68.5 for the configured tiles, at 15.0 us on an MI355X against 72.8, tl.store_sum's round trips
    counted).
    Either way each part of K keeps 8 steps of the loop at least (PART_STEPS on sm_90a's 64-row tiles).
    sm_90a, where the configured tile stays (past 512 rows, or where it makes ~100 blocks): long_k's depth."""
    m, n, k = mnk(C, A)
    if m > 512 or (m > 64 and target != "sm_90a"):   # first: every launch asks (a few microseconds of host time)
        return long_k(target, -(-k // 64))
    depth = batch(C)
    if target in MODELLED:
        cfg, blocks = MODELLED[target]
        tiles = -(-m // cfg["BM"]) * depth * -(-n // cfg["BN"])
        return {**cfg, "SPLIT": split_for(tiles, -(-k // 64), blocks)}
    if target != "sm_90a":
        return {}
    narrow = -(-m // 64) * depth * -(-n // 64)   # 64x64 tiles: one wave, at least half the SMs (64 at N = 4096)
    if m <= 128 and 64 <= narrow <= SMS:
        split = split_for(narrow, -(-k // 64), SMS, least=PART_STEPS)
        if m == 1 and depth == 1 and not keywords.get("trans_a"):   # swapped: 64 of the weights' rows x 16
            return dict(swap=True, BM=64, BN=16, BK=128, stages=8, workers=1, SPLIT=split)
        if split > 1:
            return dict(BM=64, BN=64, BK=64, stages=8, workers=1, SPLIT=split)
        if k <= 4096:   # K whole in steps of 128: half the steps' waits and arrivals, 192 KB of stages
            return dict(BM=64, BN=64, BK=128, stages=6, workers=1, SPLIT=1)
        if m > 64 and narrow >= 128:   # 128x64 tiles, half the SMs or more: each B tile read once, not twice
            return dict(BM=128, BN=64, BK=64, stages=8, workers=2, SPLIT=1)
    bm = 64 if m <= 64 else 128
    rows = -(-m // bm) * depth
    wide = rows * -(-n // 256) >= 100
    if wide and bm == 128:
        return long_k(target, -(-k // 64))
    bn = 256 if wide else 128
    # a 128-row tile's parts are 64 KB of f32 each, all read back through the one SM of the tile's last block:
    # two at most (128x4096x14336 split 2, 55.0 us against split 4's 58.3 on the H100), however short (the H200's
    # 256x4096x4096 took split 2's parts of 32 steps); 64-row tiles' parts keep PART_STEPS
    most, least = (2, 8) if bm == 128 else (8, PART_STEPS)
    split = split_for(rows * -(-n // bn), -(-k // 64), SMS, most=most, least=least)
    if bm == 128:
        return dict(BM=bm, BN=bn, BK=64, stages=5, workers=2, SPLIT=split)
    if split > 1:
        return dict(BM=bm, BN=bn, BK=64, stages=4, workers=1, SPLIT=split, blocks_per_sm=2)
    return dict(BM=bm, BN=bn, BK=64, stages=5 if bn == 128 else 3, workers=1, SPLIT=1)


# sm_90a's configured 128x256 tile runs 4 stages, its epilogue staged two 128-byte panels at a time (the whole
# tile's 64 KB would cost a stage), where the K loop has up to LONG_K steps; past that, 3 stages and the whole
# tile. On the H100 (12-06 18:30, one run, 3 against 4 stages): the batched 64x1024x1024x512 (8 steps) 128.0 against
# 116.9 us, x256 89.6 against 78.9; the grid's rows at K = 4096 (64 steps) 0.5% faster at 4 over six shapes; at
# K = 8192 and 14336, 2% slower (2048x28672x8192 1.270 against 1.410 ms, 16384x28672x8192 10.49 against 10.97,
# 4096x28672x8192 2.79 against 2.67). Why the deeper ring loses on the longest loops is not established.
LONG_K = 64


def long_k(target, steps: int) -> dict:
    """The configured tile at 3 stages where the K loop is longer than LONG_K steps (sm_90a), else nothing."""
    return dict(BM=128, BN=256, BK=64, stages=3, workers=2) if target == "sm_90a" and steps > LONG_K else {}


# sm_90a: the fewest steps of the K loop a part of a split keeps. On the H100 (12-06) every split into parts of 28
# steps or fewer lost to a coarser one: 1x4096x14336 split 8 77.1 us against split 4's 50.3, fp8 16x4096x14336
# split 4 34.6 against split 2's 33.5, fp8 1x4096x4096 split 2 17.4 against K whole's 15.2.
PART_STEPS = 48


def split_for(tiles: int, steps: int, blocks: int, most: int = 8, least: int = 8) -> int:
    """The split of K (1, 2, 4 or 8, `most` at most) that brings the output's tiles closest to `blocks` without
    passing it, each part `least` of the K loop's `steps` at least."""
    split = 1
    while split < most and tiles * split * 2 <= blocks and steps >= least * split * 2:
        split *= 2
    return split


def split_workspace(C, split: int, BM: int, BN: int) -> tuple[Shaped, Shaped]:
    """A split of K's temporaries: the f32 parts, `split` slices a batch of C, and one i32 counter per BM x BN
    tile of C, zero (tl.store_sum)."""
    depth = batch(C)
    parts = Shaped((depth * split, C.shape[-2], C.shape[-1]), tl.f32)
    return parts, Shaped((*C.shape[:-2], -(-C.shape[-2] // BM), -(-C.shape[-1] // BN)), tl.i32, fill=0)


def swapped(cfg, C, A, B):
    """swap: C (1, N) = A (1, K) @ B as C^T (N, 1) = B^T A^T, the same memory. The weights B become the product's
    rows, 64 a warpgroup's matrix instruction (wgmma's M), and A's one row its N of 16, where unswapped A's row
    would take the 64 rows and half of every stage of shared memory (kernels/gemm.py's skinny). Returns the
    swapped launch's arguments and keywords; BM then tiles N and BN the one row."""
    if len(C.shape) != 2 or C.shape[0] != 1 or cfg["trans_a"] or cfg["parts"]:
        raise TileError(f"gemm: swap=True computes a C of one row (M = 1, unbatched, A not transposed) as its "
                        f"transpose; got C of shape {tuple(C.shape)}" + (", trans_a" if cfg["trans_a"] else ""))
    n = C.shape[1]
    return [C.reshape((n, 1)), B, A], dict(swap=False, trans_a=not cfg["trans_b"], trans_b=True)


def split_plan(cfg, C, A, B, P=None, L=None, *, target=None):
    """A split of K into a C that does not accumulate. Where the target orders one block's writes before another's
    reads (targets.Target.grid_fence), one launch: each block's part goes to its own slice of an f32 workspace
    P, and the last of a tile's parts to arrive, as the counters in L count them, adds them into C (tl.store_sum).
    Elsewhere (Apple) two: gemm writes the slices (parts=True), then sum_parts adds them. A swap first turns the
    launch into its transpose's (swapped). None: one launch as called."""
    swap = {}
    if cfg["swap"] and P is None:
        (C, A, B), swap = swapped(cfg, C, A, B)
    split = cfg["SPLIT"]
    if split == 1 or cfg["accumulate"] or cfg["parts"] or P is not None:
        return [(gemm, [C, A, B], swap)] if swap else None
    parts, arrivals = split_workspace(C, split, cfg["BM"], cfg["BN"])
    if target is None or targets.target(target).grid_fence:
        return [(gemm, [C, A, B, parts, arrivals], swap)]
    depth = batch(C)
    # sum_parts is elementwise: where C's rows are contiguous it takes C and the parts as rows of its tile's
    # width, so that a skinny C (a decode step's M of 1) fills its 16-row tiles instead of masking 15 rows of 16
    width = sum_parts.config(PARTS=split)[0]["BC"]
    rows = as_rows(C, width)
    summed = [C, parts] if rows is None else [rows, parts.reshape((depth * split, *rows.shape[-2:]))]
    return [(gemm, [parts, A, B], {**swap, "parts": True}), (sum_parts, summed, {"PARTS": split})]


MMA = {(False, False): tl.mma_AB, (False, True): tl.mma_ABt, (True, False): tl.mma_AtB, (True, True): tl.mma_AtBt}


@tl.kernel(configs=CONFIGS, tune=TUNE, tune_key=bucket, tune_where=fits, plan=split_plan, heuristic=skinny)
def gemm(C, A, B, P=None, L=None, *, BM, BN, BK, trans_a=False, trans_b=False, accumulate=False, SPLIT=1,
         parts=False, swap=False):
    """C = A @ B (A given as (K, M) with trans_a, B as (N, K) with trans_b); C += A @ B into an f32 C with
    accumulate. K split SPLIT ways: added into C with atomic_add (accumulate), or summed in this launch through P,
    an f32 workspace of SPLIT slices a batch, and L, one i32 counter per tile of C, zero (split_plan passes them),
    or each part to its slice of C (parts). swap: C of one row computed as C^T = B^T A^T (split_plan, swapped)."""
    if swap:
        raise TileError("gemm: swap=True launches the transposed product (split_plan): launch gemm itself, not its "
                        "trace")
    if accumulate and C.dtype != tl.f32:
        raise TileError(f"gemm: accumulate adds into C with atomic_add, which needs an f32 C, got {C.dtype}")
    if parts and (accumulate or C.dtype != tl.f32 or C.rank != 3):
        raise TileError("gemm: parts=True writes each split of K to its own slice of an f32 C (batch x SPLIT, M, N)")
    if (P is None) != (L is None) or (P is not None and (SPLIT == 1 or accumulate or parts)):
        raise TileError("gemm: P and L (the parts and their counters) come together, with SPLIT > 1 into a C that "
                        "neither accumulates nor takes the parts itself (split_plan)")
    if SPLIT > 1 and not (accumulate or parts or P is not None):
        raise TileError(f"gemm: SPLIT={SPLIT} into a C that does not accumulate needs the parts' workspace "
                        "(split_plan): launch gemm itself, not its trace")
    if C.rank > 3:
        raise TileError(f"gemm: C of rank {C.rank}; batched GEMM takes (batch, M, N) arrays")
    batched = A.rank == 3 if parts else C.rank == 3   # (batch, M, N): the grid's third dim walks the batch
    steps = tl.cdiv(A.rows if trans_a else A.cols, BK)
    if batched or SPLIT > 1 or parts:   # block (bm, bn, zb): batch zb // SPLIT, the (zb % SPLIT)-th run of K steps
        bm, bn, zb = tl.grid(tl.cdiv(C.rows, BM), tl.cdiv(C.cols, BN), (A.depth if batched else 1) * SPLIT)
        z = zb % SPLIT if SPLIT > 1 else 0
        d = zb // SPLIT if SPLIT > 1 else zb
        per = tl.cdiv(steps, SPLIT)
        k0 = z * per if SPLIT > 1 else 0
        n = tl.minimum(per, tl.maximum(steps - k0, 0)) if SPLIT > 1 else steps
    else:
        bm, bn = tl.grid(tl.cdiv(C.rows, BM), tl.cdiv(C.cols, BN))
        d, k0, n = None, 0, steps
    on_a = (lambda *ix: (d, *ix)) if batched else (lambda *ix: ix)                          # noqa: E731
    on_b = (lambda *ix: (d, *ix)) if batched and B.rank == 3 else (lambda *ix: ix)          # noqa: E731
    if batched and B.rank == 3:
        tl.check_eq(B.depth, A.depth)
    if parts:
        tl.check_eq(C.depth, A.depth * SPLIT if batched else SPLIT)
    elif batched:
        tl.check_eq(A.depth, C.depth)
    tl.check_eq(A.cols if trans_a else A.rows, C.rows)
    tl.check_eq(B.rows if trans_b else B.cols, C.cols)
    tl.check_eq(B.cols if trans_b else B.rows, A.rows if trans_a else A.cols)
    a = tl.shared(A.dtype, BK, BM, name="a") if trans_a else tl.shared(A.dtype, BM, BK, name="a")
    b = tl.shared(B.dtype, BN, BK, name="b") if trans_b else tl.shared(B.dtype, BK, BN, name="b")
    acc = tl.regs(tl.f32, BM, BN, name="acc")
    mma = MMA[trans_a, trans_b]
    tl.zero(acc)
    for k in tl.pipeline(n):
        kk = k if isinstance(k0, int) and k0 == 0 else k0 + k   # the step along all of K
        tl.load(a, A, on_a(kk, bm) if trans_a else on_a(bm, kk))
        tl.load(b, B, on_b(bn, kk) if trans_b else on_b(kk, bn))
        mma(acc, a, b, acc)
    if parts:
        tl.store(C, acc, (zb, bm, bn))
    elif accumulate:
        tl.atomic_add(C, acc, on_a(bm, bn))
    elif P is not None:
        tl.store_sum(C, acc, on_a(bm, bn), parts=P, part=z, count=SPLIT, arrivals=L)
    else:
        tl.store(C, acc, on_a(bm, bn))


# One warp a block, 16 x 32 of each part: every part's load is issued before the first add, so that a block waits
# on memory once; 8 parts of 16 f32 a lane stay in registers. split_plan hands it C as rows of BC where it can.
@tl.kernel(configs={"default": dict(BR=16, BC=32, workers=1)})
def sum_parts(C, P, *, PARTS, BR, BC):
    """C (batch, M, N) or (M, N) = the sum of P's (batch x PARTS, M, N) slices in runs of PARTS, in C's dtype."""
    br, bc, d = tl.grid(tl.cdiv(C.rows, BR), tl.cdiv(C.cols, BC), C.depth if C.rank == 3 else 1)
    tl.check_eq(P.depth, (C.depth if C.rank == 3 else 1) * PARTS)
    tl.check_eq(P.rows, C.rows)
    tl.check_eq(P.cols, C.cols)
    parts = [tl.regs(tl.f32, BR, BC, name=f"part{p}") for p in range(PARTS)]
    for p, part in enumerate(parts):
        tl.load(part, P, (d * PARTS + p if p else d * PARTS, br, bc))
    for part in parts[1:]:
        tl.add(parts[0], parts[0], part)
    out = tl.regs(C.dtype, BR, BC, name="out")
    tl.copy(out, parts[0])
    tl.store(C, out, (d, br, bc) if C.rank == 3 else (br, bc))


def matmul(a, b, *, out_dtype=None, trans_a=False, trans_b=False, out=None, backend=None, **config):
    """C = a @ b (a given as (K, M) when trans_a, b as (N, K) when trans_b) for host arrays, computed on a backend
    (default: reference); a (batch, M, K) with b (batch, K, N) or a shared (K, N): a batched GEMM; given `out`
    (f32), out += a @ b instead (accumulate=True). SPLIT=... splits K either way."""
    m, n = a.shape[-1] if trans_a else a.shape[-2], b.shape[-2] if trans_b else b.shape[-1]
    shape = a.shape[:-2] + (m, n)
    c = np.full(shape, np.nan, dtype=out_dtype or a.dtype) if out is None else out
    resolve(backend or "reference").call(gemm, c, a, b, trans_a=trans_a, trans_b=trans_b, accumulate=out is not None,
                                         **config)
    return c


def flops(m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k
