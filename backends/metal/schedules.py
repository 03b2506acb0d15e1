"""How a block-level kernel maps onto an Apple threadgroup: simdgroups own rows, and pipelined loops become a
double-buffered threadgroup loop.

* Workers: the block's register tiles are split by rows over ``workers`` simdgroups (config option, default 4);
  each simdgroup's share must be whole 8-row simdgroup matrices, so the count is lowered until every register
  tile and row vector divides evenly.
* Pipelined loops: every global->threadgroup load at the top level of a ``tl.pipeline`` body gets ``stages``
  copies of its threadgroup tile (default 2). Step k's loads are issued at the top of step k-1, into the copy
  step k-1 does not read; one threadgroup barrier closes each step, which both publishes the next step's tiles
  and tells every simdgroup that the copy about to be refilled is no longer read (the refilled copy was last
  read one step earlier). Metal has no asynchronous global->threadgroup copy, so the overlap comes from other
  simdgroups computing while one waits on its loads, and from one barrier per step instead of two.
* Threadgroup memory is a single arena (``[[threadgroup(0)]]``): the tiles, then the simdgroups' 8x8 scratch
  (see tiles_metal/elements.h), then the exchange area of column reductions and logsumexp2. If the copies do not
  fit the device's 32 KB, the stages are lowered (down to a plain loop) before anything is rejected.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tiles import ir
from tiles.dsl import TileError
from tiles.targets import target as get_target
from tiles.types import GL, RT, RV, ST, SV

BASE = 8          # simdgroup_matrix side
SIMD = 32         # lanes per simdgroup
ALIGN = 16        # bytes; tiles start 16-byte aligned so vector accesses are aligned
SCRATCH_BYTES = BASE * BASE * 4


@dataclass
class Plan:
    workers: int                                   # simdgroups per threadgroup
    stages: dict = field(default_factory=dict)     # pipeline Loop -> copies of its staged tiles (1 = plain loop)
    staged: dict = field(default_factory=dict)     # staged tile -> its Loop
    offsets: dict = field(default_factory=dict)    # shared tile -> byte offset of copy 0 in the arena
    copies: dict = field(default_factory=dict)     # shared tile -> number of copies
    scratch_offset: int = 0
    exchange_offset: int = 0
    exchange_floats: int = 0
    smem_bytes: int = 0

    @property
    def threads(self) -> int:
        return self.workers * SIMD


def align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def workers_for(k: ir.Kernel, wanted: int) -> int:
    """The most simdgroups, at most `wanted`, that split every register tile into whole 8-row pieces and every
    row vector evenly."""
    tile_rows = [t.rows for t in k.tiles if isinstance(t, RT)]
    vec_rows = [t.length for t in k.tiles if isinstance(t, RV) and t.axis == "rows"]
    for w in range(wanted, 1, -1):
        if all(r % (BASE * w) == 0 for r in tile_rows) and all(n % w == 0 for n in vec_rows):
            return w
    return 1


def staged_loads(loop: ir.Loop) -> list:
    """The top-level global->threadgroup loads of a pipeline body that can run a step ahead: each must come
    before every other use of its tile in the body (otherwise issuing it early would change what is read)."""
    seen: set = set()
    out = []
    for s in loop.body:
        if isinstance(s, ir.Op) and s.name == "load" and isinstance(s.srcs[0], GL) \
                and isinstance(s.dst, (ST, SV)) and s.dst not in seen:
            out.append(s)
        for op, _ in ir.walk([s]):
            seen.update(x for x in (op.dst, *op.srcs) if isinstance(x, (ST, SV)))
    return out


def nbytes(t) -> int:
    n = t.rows * t.cols if isinstance(t, ST) else t.length
    return n * t.dtype.itemsize


def plan(k: ir.Kernel, target: str = "apple") -> Plan:
    t = get_target(target)
    wanted = int(k.options.get("workers", 4))
    if not 1 <= wanted <= t.max_threads // SIMD:
        raise TileError(f"workers={wanted}: a threadgroup holds 1 to {t.max_threads // SIMD} simdgroups", k.loc)
    for tile in k.tiles:
        if isinstance(tile, (ST, RT)) and (tile.rows % BASE or tile.cols % BASE):
            raise TileError(f"{tile.name}: Metal tiles are made of 8x8 simdgroup matrices: expected multiples of 8, "
                            f"got {tile.rows}x{tile.cols}", k.loc)
    p = Plan(workers_for(k, wanted))
    loops = [s for s in _all_loops(k.body) if s.kind == "pipeline"]
    want_stages = {lp: max(1, int(lp.stages or k.options.get("stages", 2))) for lp in loops}
    for lp in loops:
        for op in staged_loads(lp):
            p.staged[op.dst] = lp
    p.exchange_floats = p.workers * max((ir.exchange_floats(op) for op, _ in k.walk()), default=0)
    # Lower the deepest pipelines first until the arena fits.
    while True:
        p.stages = {lp: want_stages[lp] for lp in loops}
        _layout(k, p)
        if p.smem_bytes <= t.shared_bytes or not any(v > 1 for v in want_stages.values()):
            break
        deepest = max(want_stages, key=want_stages.get)
        want_stages[deepest] -= 1
    if p.smem_bytes > t.shared_bytes:
        sizes = ", ".join(f"{x.name} {nbytes(x)} B" for x in k.tiles if isinstance(x, (ST, SV)))
        raise TileError(f"threadgroup memory: {p.smem_bytes} bytes needed, {t.name} has {t.shared_bytes} "
                        f"({sizes}; plus {p.workers} x {SCRATCH_BYTES} B scratch)", k.loc)
    return p


def _layout(k: ir.Kernel, p: Plan) -> None:
    off = 0
    for tile in k.tiles:
        if isinstance(tile, (ST, SV)):
            lp = p.staged.get(tile)
            n = p.stages[lp] if lp is not None and p.stages[lp] > 1 else 1
            p.offsets[tile], p.copies[tile] = off, n
            off += n * align(nbytes(tile))
    p.scratch_offset = off
    off += p.workers * SCRATCH_BYTES
    p.exchange_offset = off
    off += align(4 * p.exchange_floats)
    p.smem_bytes = off


def _all_loops(stmts):
    for s in stmts:
        if isinstance(s, ir.Loop):
            yield s
            yield from _all_loops(s.body)
