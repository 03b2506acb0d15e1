"""How a kernel's block-level work maps onto CDNA waves: the named schedules and the plan of one kernel.

Named schedules (the kernel's `schedule` option):

* ``pingpong`` — 8 waves (512 threads, 2 per SIMD) in two groups of four; group 1 runs one block
  barrier behind group 0, so one group's MFMA cluster (at raised s_setprio) overlaps the other's
  memory cluster. Pipelined global->LDS tiles get 3 LDS buffers with loads one step ahead: with the
  groups a phase apart, three tiles are live at once (one read by each group, one being filled).
  Needs a pipelined loop whose compute part neither writes shared memory nor needs a block barrier.
* ``interleave`` — 4 waves (256 threads, one per SIMD owning all 512 registers), a double-buffered
  pipeline, and sched_group_barrier hints that interleave each MFMA with LDS reads, global loads
  and VALU work.
* ``plain`` — any number of waves, a `stages`-deep pipeline, one barrier per iteration.

A plan falls back (pingpong -> plain with 2 stages -> 1 stage) when the LDS does not hold the buffers
or the loop does not fit the schedule, and says why in ``notes``.

Grid policy (`grid_order` option, default "chiplet" on 2-D grids): workgroup ids remapped so each of
the 8 XCDs gets a contiguous chunk, then output tiles walked in windows of `window` (default 8) rows.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tiles import ir, targets
from tiles.dsl import TileError
from tiles.types import GL, RT, RV, ST, SV

SCHEDULES = ("pingpong", "interleave", "plain")
WAVES = {"pingpong": 8, "interleave": 4, "plain": 4}
XCDS = 8


@dataclass
class Plan:
    schedule: str          # what runs: pingpong | interleave | plain
    waves: int
    stages: int            # LDS buffers per pipelined tile
    mfma_m: int            # 16 or 32: the MFMA output fragment
    grid_order: str        # chiplet | linear
    window: int
    requested: str         # the schedule the configuration asked for
    notes: list = field(default_factory=list)

    @property
    def threads(self) -> int:
        return 64 * self.waves

    @property
    def waves_per_simd(self) -> int:
        """The occupancy the schedule is built for: its register budget is 512 / this per lane."""
        return 2 if self.waves == 8 else 1


def staged_tiles(loop: ir.Loop) -> list:
    """The shared tiles a pipelined loop fills from global memory (the loads a backend may run ahead)."""
    return [s.dst for s in loop.body
            if isinstance(s, ir.Op) and s.name == "load" and isinstance(s.srcs[0], GL) and isinstance(s.dst, (ST, SV))]


def _compute_needs_barrier(loop: ir.Loop) -> str | None:
    staged = set(staged_tiles(loop))
    for op, _ in ir.walk(loop.body):
        if op.dst in staged:
            continue
        if isinstance(op.dst, (ST, SV)):
            return f"its body writes shared tile {op.dst.name} (line {op.loc.line if op.loc else '?'})"
        if ir.exchange_floats(op):   # column and whole-tile reductions, logsumexp2 of a row vector
            return f"{op.name} needs block barriers (line {op.loc.line if op.loc else '?'})"
    return None


def _pipelines(body):
    for s in body:
        if isinstance(s, ir.Loop):
            if s.kind == "pipeline":
                yield s
            yield from _pipelines(s.body)


def plan(k: ir.Kernel, target: str, lds_bytes) -> Plan:
    """lds_bytes(stages) -> bytes of LDS the kernel needs with that many buffers per pipelined tile."""
    opts = k.options
    requested = opts.get("schedule", "plain")
    if requested not in SCHEDULES:
        raise TileError(f"unknown CDNA schedule {requested!r}; known: {', '.join(SCHEDULES)}", k.loc)
    mfma_m = int(opts.get("mfma", 16))
    split = [t.rows for t in k.tiles if isinstance(t, RT)] + [t.length for t in k.tiles
                                                              if isinstance(t, RV) and t.axis == "rows"]
    if "workers" in opts:
        waves = int(opts["workers"])
    else:   # the schedule's waves, fewer where the tiles have too few rows to give each a whole fragment
        waves = next((w for w in (WAVES[requested], 2, 1) if all(r % (w * mfma_m) == 0 for r in split)), 1)
    if requested == "pingpong" and waves != 8:
        raise TileError(f"the ping-pong schedule runs 8 waves, the configuration asks for workers={waves}", k.loc)
    if requested == "interleave" and waves != 4:
        raise TileError(f"the interleave schedule runs 4 waves, the configuration asks for workers={waves}", k.loc)
    if not 1 <= waves <= 16:
        raise TileError(f"workers={waves}: a CDNA workgroup has 1 to 16 waves", k.loc)
    if mfma_m not in (16, 32):
        raise TileError(f"mfma={mfma_m}: CDNA MFMA fragments are 16x16 or 32x32", k.loc)
    order = opts.get("grid_order", "chiplet" if len(k.grid) >= 2 else "linear")
    p = Plan(requested, waves, 1, mfma_m, order, int(opts.get("window", 8)), requested)
    limit = targets.target(target).shared_bytes
    loops = list(_pipelines(k.body))
    schedule, stages = requested, opts.get("stages")
    if requested == "pingpong":
        why = "no pipelined loop" if not loops else next(filter(None, map(_compute_needs_barrier, loops)), None)
        if why is None and lds_bytes(3) > limit:
            why = f"3 LDS buffers need {lds_bytes(3)} bytes, {target} has {limit}"
        if why:
            schedule = "plain"
            p.notes.append(f"ping-pong not used: {why}; 8 waves in a plain pipeline")
        stages = 3 if schedule == "pingpong" else stages
    stages = int(stages or 2)
    if schedule != "pingpong":
        while stages > 1 and lds_bytes(stages) > limit:
            p.notes.append(f"{stages} stages need {lds_bytes(stages)} bytes of LDS, {target} has {limit}")
            stages -= 1
    if lds_bytes(stages) > limit:
        raise TileError(f"the kernel needs {lds_bytes(stages)} bytes of LDS, {target} has {limit}: "
                        f"use smaller shared tiles in its {target} configuration", k.loc)
    p.schedule, p.stages = schedule, stages
    for t in k.tiles:
        rows = t.rows if isinstance(t, RT) else t.length if isinstance(t, RV) and t.axis == "rows" else None
        if rows is not None and rows % (waves * mfma_m):
            raise TileError(f"{t.name} ({t.type_str()}): its {rows} rows split over {waves} waves must be "
                            f"multiples of the {mfma_m}-row MFMA fragment", k.loc)
    return p
