"""How a kernel's block-level work maps onto CUDA warps, per target.

One schedule today on both targets: every warp of the block owns a slice of the rows of each register tile
(mma.sync m16n8k16, ldmatrix, cp.async pipeline of `stages` slots). On sm_90a a configuration's `workers`
count consumer warpgroups (the unit the Hopper template works in), so the block gets 4 warps per worker.
The option `wgmma=True` (sm_90a) runs the block-level mma on warpgroup wgmma (include/tiles_cuda/mma_block.cuh)
where the operands allow; it compiles (tests/test_cuda_compile.py) but has not run on a GPU yet, so it is off
by default.
"""
from __future__ import annotations

from dataclasses import dataclass

from tiles import ir
from tiles.dsl import TileError
from tiles.types import GL, RT, RV, ST, SV

WARPS_PER_WORKER = {"sm_80": 1, "sm_90a": 4}
DEFAULT_WORKERS = {"sm_80": 4, "sm_90a": 1}
DEFAULT_STAGES = 2
SMEM_ALIGN = 1024  # every shared tile and vector starts on a 1024-byte boundary (128-byte swizzle, TMA, wgmma)


@dataclass(frozen=True)
class Schedule:
    target: str
    warps: int
    stages: int           # pipeline depth (slots per pipelined shared tile)
    smem_bytes: int       # dynamic shared memory to launch with
    wgmma: bool = False   # sm_90a: block-level mma on warpgroup wgmma where the operands allow

    @property
    def threads(self) -> int:
        return 32 * self.warps


def row_tiles(k: ir.Kernel) -> list[int]:
    """Row counts that the warps split: register tiles and row-axis register vectors."""
    return [t.rows for t in k.tiles if isinstance(t, RT)] + \
           [t.length for t in k.tiles if isinstance(t, RV) and t.axis == "rows"]


def pipelined_tiles(k: ir.Kernel) -> set:
    """Shared tiles that a pipeline loop loads from global in its own body (they get one slot per stage)."""
    return {s.dst for lp in _loops(k.body) if lp.kind == "pipeline" for s in lp.body
            if isinstance(s, ir.Op) and s.name == "load" and isinstance(s.dst, ST) and isinstance(s.srcs[0], GL)}


def plan(k: ir.Kernel, target: str, max_smem: int) -> Schedule:
    if target not in WARPS_PER_WORKER:
        raise TileError(f"the CUDA backend has no schedule for target {target!r} (sm_80, sm_90a)", k.loc)
    want = k.options.get("workers", DEFAULT_WORKERS[target]) * WARPS_PER_WORKER[target]
    for t in k.tiles:   # the header library builds every tile from 16x16 base tiles (16-element vector slices)
        extents = t.shape if isinstance(t, (ST, RT)) else (t.length,) if isinstance(t, RV) else ()
        if any(n % 16 for n in extents):
            raise TileError(f"{t.name}: the CUDA backend needs tile extents that are multiples of 16, "
                            f"got {t.type_str()}", k.loc)
    rows = row_tiles(k) or [16 * want]
    # Each warp needs whole 16-row base tiles of every tile: use fewer warps when a tile is too short.
    warps = next(w for w in range(want, 0, -1) if all(r % (16 * w) == 0 for r in rows))
    stage_counts = [lp.stages for lp in _loops(k.body) if lp.kind == "pipeline" and lp.stages]
    stages = max(stage_counts or [k.options.get("stages", DEFAULT_STAGES)])
    piped = pipelined_tiles(k)
    smem = SMEM_ALIGN  # slack to align the first tile
    for t in k.tiles:
        if isinstance(t, (ST, SV)):
            elems = t.rows * t.cols if isinstance(t, ST) else t.length
            size = -(-elems * t.dtype.itemsize // SMEM_ALIGN) * SMEM_ALIGN
            smem += size * (stages if t in piped else 1)
    if smem > max_smem:
        raise TileError(f"{k.name} needs {smem} bytes of shared memory on {target} "
                        f"({stages} pipeline stages), more than the {max_smem} a block can have; "
                        f"use smaller tiles or fewer stages", k.loc)
    return Schedule(target, warps, stages, smem, wgmma=target == "sm_90a" and bool(k.options.get("wgmma", False)))


def _loops(stmts):
    for s in stmts:
        if isinstance(s, ir.Loop):
            yield s
            yield from _loops(s.body)
