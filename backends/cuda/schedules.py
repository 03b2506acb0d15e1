"""How a kernel's block-level work maps onto CUDA warps, per target.

The warp schedule (both targets): every warp of the block owns a slice of the rows of each register tile
(ldmatrix, cp.async pipeline of `stages` slots); the block-level mma is mma.sync m16n8k16, or on sm_90a
warpgroup wgmma where the operands allow (include/tiles_cuda/mma_block.cuh; option `wgmma`, on by default,
`wgmma=False` turns it off). On sm_90a a configuration's `workers` count consumer warpgroups, so the block
gets 4 warps per worker.

The warp-specialized schedule (sm_90a's default wherever the kernel fits; option `schedule="warp"` asks for
the warp schedule instead): the same consumer warps, plus one producer warpgroup that issues the pipelined
loop's global->shared loads as TMA into an mbarrier ring (include/tiles_cuda/warp_specialized.cuh), with
setmaxnreg moving registers from the producer to the consumers. `persistent=True` adds a persistent grid
(the default where every tile costs the same: a pipeline body that only accumulates, as in a GEMM; where
tiles differ, as in causal attention, the hardware's dynamic block scheduling balances better).
A kernel that does not fit (`ws_misfit` says why) keeps the warp schedule and its source says why; so does a
launch whose arrays TMA cannot address (runtime.py), unless `schedule="warp_specialized"` was asked for, which
then refuses them before launching.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from tiles import column_order, ir
from tiles.ir import touches
from tiles.dsl import TileError
from tiles.types import GL, RT, RV, ST, SV

WARPS_PER_WORKER = {"sm_80": 1, "sm_90a": 4}
DEFAULT_WORKERS = {"sm_80": 4, "sm_90a": 1}
DEFAULT_STAGES = 2
SMEM_ALIGN = 1024  # every shared tile and vector starts on a 1024-byte boundary (128-byte swizzle, TMA, wgmma)


REGISTER_FILE = 65536     # 32-bit registers per SM, split evenly over the blocks an SM holds (launch_registers)
SM_SHARED = 228 * 1024    # shared memory per SM, of which the runtime reserves 1 KB per block
PRODUCER_REGS = 24        # what the TMA-issuing warpgroup keeps (setmaxnreg.dec's floor), persistent or not:
                          # 240 per consumer thread with two consumer warpgroups (as FlashAttention-3 gives them),
                          # which attention backward needs. A persistent producer kept 40 until 12-02 (CUTLASS's
                          # count), yet ptxas fits its walk in 24 (the highest register it uses after the
                          # setmaxnreg: R11 in the attention forward, R13 in the GEMM; no spills, no C7508)
CLUSTER_PRODUCER_REGS = 48   # a producer that multicasts its share of a tile: its rank's panels, the mask; ptxas
                             # spilled 100-216 B in 24 (gemm and bmm, cluster=2, 12-06), 4 B in 40 where K is split
                             # and added into C; the consumers keep 224 (no spills at 128x256)
# Consumer warpgroups the warp-specialized schedule takes: up to four (640 threads), the most run on the H200
# (12-04: the docs' batched GEMM at BM=256, persistent or not, once setmaxnreg asked no more than the CTA's pool
# holds; before that fix four hung, see consumer_regs). Five or more were never run, so they are refused.
MAX_CONSUMER_GROUPS = 4
MAX_CONSUMER_REGS = 256   # setmaxnreg's ceiling. Never below the launch-time count (the register file over
                          # the block's threads): setmaxnreg.inc may not shrink a warp's registers
TMA_SWIZZLE = {128: "SWIZZLE_128B", 64: "SWIZZLE_64B", 32: "SWIZZLE_32B"}
GROUP_ROWS = 8            # a persistent 2-D grid walks its tiles in column-major groups of this many rows


@dataclass(frozen=True)
class TmaMap:
    """One tile moved by TMA, a pipelined GL->ST load or the epilogue's store: its tensor map is the kernel
    parameter `map`."""
    map: str          # parameter name, "<tile>_tma"
    gl: str           # the global argument it reads or writes
    rows: int         # TMA's box: this many rows by one swizzle panel of columns
    cols: int         # the tile's columns
    panel_cols: int
    swizzle_bytes: int
    itemsize: int

    @property
    def bytes(self) -> int:   # TMA counts every box in full, zero-filled parts included
        return self.rows * self.cols * self.itemsize

    @property
    def tile(self) -> str:
        return self.map.removesuffix("_tma")


def box_rows(rows: int, extent: int) -> int:
    """The rows of a load's TMA box over a global of `extent` rows: the tile's, or the global's rounded up to 8
    where it is shorter (tc::box_rows, which the kernel announces: the two must agree)."""
    return min(rows, max(8, -(-extent // 8) * 8))


@dataclass(frozen=True)
class Schedule:
    target: str
    warps: int            # warps that own the register tiles (the consumers, when warp-specialized)
    stages: int           # pipeline depth (slots per pipelined shared tile)
    smem_bytes: int       # dynamic shared memory to launch with
    wgmma: bool = False   # sm_90a: block-level mma on warpgroup wgmma where the operands allow
    tma: tuple[TmaMap, ...] = ()   # non-empty: the warp-specialized schedule, one TMA producer warpgroup
    stage_bytes: int = 0  # TMA bytes that fill one ring slot (all pipelined tiles of an iteration)
    note: str = ""        # why a requested schedule was not taken
    persistent: bool = False   # warp-specialized: one block per SM walks tl.grid's tiles, the ring running on
    store: TmaMap | None = None   # the epilogue's store through a staging tile and TMA (persistent only)
    store_src: str = ""           # the register tile it stores
    store_buffers: int = 0        # its staging tiles, one 128-byte panel of its rows each (store_buffers)
    col_split: tuple[str, ...] = ()   # register tiles of 64 rows whose columns split over the warpgroups (rt_cols)
    vectors: tuple[str, ...] = ()     # warp-specialized: register vectors the producer brings through the ring
    reduce: TmaMap | None = None      # warp-specialized: an rt_cols' atomic_add as TMA reduce-adds (tma_reduce)
    reduce_src: str = ""              # the rt_cols tile it adds
    reduce_buffers: int = 0           # staging tiles it takes in turn (2 where they fit)
    max_registers: int = 0   # a thread's register cap (the launch bound asks for the blocks it lets fit); 0: none
    sliced: tuple[str, ...] = ()   # mma.sync: register tiles only added into a global, computed where added in
    #                               slices (sliced_adds; tc::atomic_add_mma) and never declared
    rewrites: bool = False   # sm_90a: the codegen's algebraic rewrites (tiles/rewrites.py); other targets' sources stay
    rings: tuple[str, ...] = ()   # warp-specialized: pipelined tiles with a ring each (tile_rings), else one ring
    deferred: bool = False   # with rings: an attention-shaped body's last mma runs behind the next step's first
    #                          (on unless deferred=False: H200 12-02, +9% at D128 and +4% at D64 in attention)
    turns: bool = False      # deferred, two consumer warpgroups: they take turns issuing their wgmma batches
    exp2_poly: int = 0       # rewrites: 1 in N of a scaled softmax's exponentials on the FMA pipe (0: none)
    blocks: int = 1          # blocks an SM holds (option blocks_per_sm), so that one block's prologue and epilogue
    #                          (warp-specialized) or barriers and loads (warp) run under another's work; registers
    #                          (the warp schedule: as max_registers) and shared memory split
    pdl: bool = False        # sm_90a: the kernel waits for the grids before it (tc::wait_prior_grids) and lets the
    #                          next be scheduled early: the runtime may launch it programmatically (runtime.py)
    resident: tuple[TmaMap, ...] = ()   # warp-specialized: the loads outside the pipeline loops that the producer
    #                                     issues as TMA (resident_loads; option resident, on by default)
    boxes: bool = False      # warp-specialized: each TMA load's box fitted to a global shorter than its tile (box_rows;
    #                          option boxes, on by default), its bytes a runtime value, the rows past it zeroed
    resident_slots: int = 0  # each resident tile's ring: 2 slots where its load repeats in a block (a persistent
    #                          grid, a tl.range loop) and shared memory allows, so that the next one lands while
    #                          this one is read; else 1
    groups: int = 1          # persistent, option consumer_groups: groups of `warps` consumer warps each, taking the
    #                          block's tiles in turn (groups_misfit), so that one's epilogue runs under another's loop
    cluster: int = 1         # persistent, option cluster: blocks a cluster, on tiles next to each other along the
    #                          grid's axis 0, sharing the `multicast` tiles (cluster_misfit)
    multicast: tuple[str, ...] = ()   # pipelined tiles whose loads do not depend on the grid's axis 0: each block
    #                          of a cluster loads its share of their panels into every block's slot
    multicast_rows: tuple[str, ...] = ()   # those of them split by rows instead (one swizzle panel, or panels that
    #                          do not split evenly): each block's share a box of rows / cluster, never fitted
    runs: tuple[str, ...] = ()   # register tiles whose column order no op observes (tiles/column_order.py), loaded
    #                          and stored in runs of contiguous columns a lane (tc::load_runs; option runs, on by
    #                          default)

    @property
    def warp_specialized(self) -> bool:
        return bool(self.tma)

    @property
    def min_blocks(self) -> int:
        """Blocks per SM: warp-specialized, what the launch bound asks for (ptxas keeps within the block's share of
        the register file); under the warp schedule, what its max_registers cap (`__maxnreg__`) lets an SM's 64K
        registers hold."""
        if self.warp_specialized:
            return self.blocks
        return 65536 // (self.threads * self.max_registers) if self.max_registers else 0

    @property
    def maps(self) -> tuple[TmaMap, ...]:
        """Every tensor map parameter, in parameter order."""
        return self.tma + self.resident + tuple(m for m in (self.store, self.reduce) if m)

    @property
    def threads(self) -> int:
        return 32 * self.consumer_warps + (128 if self.warp_specialized else 0)

    @property
    def consumer_warps(self) -> int:
        """Every warp that is not the producer's: `groups` groups of `warps`."""
        return self.warps * self.groups

    @property
    def producer_regs(self) -> int:
        return CLUSTER_PRODUCER_REGS if self.cluster > 1 else PRODUCER_REGS

    @property
    def consumer_regs(self) -> int:
        """Registers per consumer thread after setmaxnreg, in steps of 8: what the block starts with (every thread
        the launch count, which ptxas takes whole where setmaxnreg is used) less what the producer keeps, over the
        consumers. setmaxnreg.inc draws on a pool per CTA that only the CTA's own setmaxnreg.dec fills (PTX ISA,
        setmaxnreg), not on the SM's unallocated registers: a count above this one blocks the consumers forever.
        Counted from the register file instead, 4 consumer warpgroups (96 at launch) asked 120 and 2 of them at 2
        blocks an SM (80) asked 112, and hung on the H200 (12-04, scripts/probe_hang.py)."""
        launch = launch_registers(self.consumer_warps, self.blocks, True, 0)
        spare = launch * self.threads - 128 * self.producer_regs
        return min(MAX_CONSUMER_REGS, spare // (32 * self.consumer_warps) // 8 * 8)


def tile_registers(k: ir.Kernel, warps: int, skip=()) -> float:
    """32-bit registers a thread that the register tiles (but those named in skip) take, split over `warps`."""
    return sum(t.rows * t.cols * t.dtype.itemsize for t in k.tiles if isinstance(t, RT) and t.name not in skip) \
        / 4 / (32 * warps)


def row_tiles(k: ir.Kernel, skip=()) -> list[int]:
    """Row counts that the warps split: register tiles (but those in skip) and row-axis register vectors."""
    return [t.rows for t in k.tiles if isinstance(t, RT) and t not in skip] + \
           [t.length for t in k.tiles if isinstance(t, RV) and t.axis == "rows"]


def ops(stmts):
    for s in stmts:
        if isinstance(s, ir.Loop):
            yield from ops(s.body)
        else:
            yield s


def col_split(k: ir.Kernel, groups: int) -> list:
    """sm_90a with wgmma, `groups` consumer warpgroups: the f32 register tiles of exactly 64 rows (too few to give
    each warpgroup 64) that can be split by columns instead, 32 or more per warpgroup (tc::rt_cols): every op
    on them is a zero, an mma into them from two bf16 shared tiles, or an atomic_add of them into a global.
    Attention backward's dQ partial (BM = 64 query rows) is one: its kv rows (BN = 128) split over two
    warpgroups as FlashAttention-3 does, dQ's head dim over the same two."""
    if groups < 2:
        return []
    out = []
    body = list(ops(k.body))
    for t in k.tiles:
        if not (isinstance(t, RT) and t.dtype.name == "f32" and t.rows == 64 and t.cols % (32 * groups) == 0
                and t.cols // groups in (32, 64, 128, 192, 256)):
            continue
        uses = [op for op in body if op.dst is t or any(x is t for x in op.srcs)]
        if uses and all(
                (op.name == "zero" and op.dst is t) or
                (op.name == "mma" and op.dst is t and op.srcs[2] is t and
                 all(isinstance(x, ST) and x.dtype.name == "bf16" for x in op.srcs[:2])) or
                (op.name == "atomic_add" and op.srcs[0] is t and isinstance(op.dst, GL))
                for op in uses):
            out.append(t)
    return out


def pipelined_tiles(k: ir.Kernel) -> set:
    """Shared tiles that a pipeline loop loads from global in its own body (they get one slot per stage)."""
    return {s.dst for lp in loops(k.body) if lp.kind == "pipeline" for s in lp.body
            if isinstance(s, ir.Op) and s.name == "load" and isinstance(s.dst, ST) and isinstance(s.srcs[0], GL)}


def _pipeline_loads(k: ir.Kernel) -> list[ir.Op]:
    return [s for lp in loops(k.body) if lp.kind == "pipeline" for s in lp.body
            if isinstance(s, ir.Op) and s.name == "load" and s.dst in pipelined_tiles(k)]


def pipelined_vectors(k: ir.Kernel) -> list[ir.Op]:
    """GL->RV loads at the head of a pipeline body (before its first mma) that the warp-specialized producer
    issues ahead of the consumers, into one shared vector per stage filled by a bulk copy. Attention backward's
    LSE: read from global by the consumers, each step's softmax waited for it (ncu, H200: the most stalled
    instruction, ~9% of the consumers' samples). Later loads (its Delta) stay global loads: the mma in flight
    hides part of their latency (Delta's still took ~4% of the samples at 04:26 UTC, 11-30), and loaded at the
    head instead, from shared memory, ptxas serialized the wgmma for want of registers (C7512, D 128; checked
    again at 04:50 with Delta read before and after dP^T's wait). Under the `shared_vectors` option a later load
    is taken too when only broadcasts read its vector (shared_vectors: it then holds no registers). Taken: a
    vector loaded once per body, from a global nothing in the kernel writes, in whole 16-byte pieces."""
    written = {op.dst for op in ops(k.body) if op.name in ("store", "atomic_add", "store_sum")}
    written |= {g for op in ops(k.body) if op.name == "store_sum" for g in op.srcs[1:3]}
    later = k.options.get("shared_vectors")
    out = []
    for lp in loops(k.body):
        if lp.kind != "pipeline":
            continue
        head = list(itertools.takewhile(lambda s: isinstance(s, ir.Op) and s.name != "mma", lp.body))
        head += [s for s in lp.body[len(head):] if later and isinstance(s, ir.Op) and _broadcast_only(k, s.dst)]
        vecs = [s for s in head if s.name == "load" and isinstance(s.dst, RV) and isinstance(s.srcs[0], GL)
                and s.srcs[0] not in written and (s.dst.length * s.srcs[0].dtype.itemsize) % 16 == 0]
        out += [s for s in vecs if sum(isinstance(x, ir.Op) and x.name == "load" and x.dst is s.dst
                                       for x in ops(lp.body)) == 1]
    # one shared vector type per register vector: its loads in every pipeline loop read one dtype
    return [s for s in out if all(x.srcs[0].dtype == s.srcs[0].dtype for x in out if x.dst is s.dst)]


def shared_vectors(k: ir.Kernel) -> set:
    """The pipelined vectors (pipelined_vectors) that stay in their stage's shared vector, read where used (the
    `shared_vectors` option): those only broadcasts read and nothing but their ring load writes. A broadcast then
    reads each pair of its vector once per step from shared memory where the registers held the whole vector for
    the step: at 128 query rows, attention backward's LSE and Delta took 32 registers a thread each and the
    consumers spilled. Every use must lie in a pipeline body, where a stage is at hand."""
    if not k.options.get("shared_vectors"):
        return set()
    inside = {id(op) for lp in loops(k.body) if lp.kind == "pipeline" for op in ops(lp.body)}
    return {op.dst for op in pipelined_vectors(k) if _broadcast_only(k, op.dst) and
            all(id(x) in inside for x in ops(k.body) if any(y is op.dst for y in (x.dst, *x.srcs)))}


_BROADCASTS = {f"{b}_{a}" for a in ("row", "col") for b in ("add", "sub", "mul")}   # (div takes reciprocals)


def _broadcast_only(k: ir.Kernel, t) -> bool:
    """Whether register vector t is written by loads alone and read by add/sub/mul broadcasts alone."""
    if not isinstance(t, RV):
        return False
    for op in ops(k.body):
        if any(x is t for x in (op.dst, *op.srcs)):
            read = op.name in _BROADCASTS and op.srcs[1] is t and op.dst is not t and op.srcs[0] is not t
            if not (read or op.name == "load" and op.dst is t):
                return False
    return True


def accumulators(body) -> list | None:
    """The accumulators when a pipeline body (its loads left out) is only mma ops, each adding into a register
    tile that nothing else in the body reads or writes: then its wgmma may still run when the next step starts
    (consume_overlapped), and every tile of the grid costs the same. Else None."""
    if not body or not all(isinstance(s, ir.Op) and s.name == "mma" and s.srcs[2] is s.dst for s in body):
        return None
    accs = [s.dst for s in body]
    if any(t in s.srcs[:2] for s in body for t in accs):
        return None
    return list(dict.fromkeys(accs))


def _accumulate_only(k: ir.Kernel) -> bool:
    piped = pipelined_tiles(k)
    return any(accumulators([s for s in lp.body if not (isinstance(s, ir.Op) and s.name == "load" and s.dst in piped)])
               for lp in loops(k.body) if lp.kind == "pipeline")


def tile_rings(k: ir.Kernel) -> list:
    """The pipelined tiles that get a ring each (full and empty mbarriers per slot, one cursor for all): a kernel
    with one pipeline loop that does more than accumulate and loads two or more tiles, each read only by statements
    of the body itself. The consumers then wait for a tile's slot right before its first reader and free it right
    after its last (its mma waited for), so the producer refills it while the rest of the step runs: attention's
    K slot goes back once S = Q K^T is done, its next K in flight through the softmax and P V, where one shared
    slot went back only at the step's end (the hand kernel's two rings, docs/backends/cuda.md). Loops that also
    bring vectors through the ring keep the one ring (pipelined_vectors: their copies complete on it)."""
    pipes = [lp for lp in loops(k.body) if lp.kind == "pipeline"]
    if len(pipes) != 1 or pipelined_vectors(k):
        return []
    lp = pipes[0]
    piped = pipelined_tiles(k)
    loads = [s for s in lp.body if isinstance(s, ir.Op) and s.name == "load" and s.dst in piped]
    tiles = list(dict.fromkeys(s.dst for s in loads))
    rest = [s for s in lp.body if not any(s is x for x in loads)]
    if len(tiles) < 2 or accumulators(rest):
        return []
    nested = [op for s in rest if isinstance(s, ir.Loop) for op in ops(s.body)]
    read = [op for op in rest if isinstance(op, ir.Op)]
    if any(x is t for op in nested for x in op.srcs for t in tiles) or \
            not all(any(x is t for op in read for x in op.srcs) for t in tiles):
        return []
    return tiles


def resident_loads(k: ir.Kernel) -> list[ir.Op]:
    """GL->ST loads outside every pipeline loop that the warp-specialized producer issues as TMA, each tile into a
    ring of its own (Schedule.resident_slots slots): attention's Q, attention backward's K and V. The consumers
    loaded them themselves before (a DRAM round trip between two block barriers ahead of the tile's main loop,
    while only the pipelined tiles ran ahead); now they wait on the slot's full mbarrier before the first statement
    that reads the tile and free the slot after the last, and the producer issues the load ahead of the pipelined
    loads that follow it (a persistent block: the next tile's Q while this tile's loop runs). Taken: the tile's only
    write, from a global of its dtype, in a statement list the producer walks (the kernel's body, or that of a
    tl.range loop leading to a pipeline loop), read only by statements after it in that list (where the slot's
    reference is in scope), a tile TMA can fill (tma_misfit). Others stay the consumers' loads."""
    piped = pipelined_tiles(k)
    every = list(ops(k.body))
    out = []

    def walk(stmts):
        for i, s in enumerate(stmts):
            if isinstance(s, ir.Loop):
                if s.kind == "range" and any(lp.kind == "pipeline" for lp in loops(s.body)):
                    walk(s.body)
                continue
            t = s.dst
            if s.name != "load" or not isinstance(t, ST) or not isinstance(s.srcs[0], GL) or t in piped \
                    or s.srcs[0].dtype != t.dtype or tma_misfit(t):
                continue
            later = {id(op) for op in ops(stmts[i + 1:])}
            if all(op is s or (op.dst is not t and (id(op) in later or not any(x is t for x in op.srcs)))
                   for op in every):
                out.append(s)
    walk(k.body)
    return out


def repeats(k: ir.Kernel, load: ir.Op, persistent: bool) -> bool:
    """Whether a resident load runs more than once a block: on a persistent grid's tiles, or in a tl.range loop."""
    return persistent or not any(load is s for s in k.body)


@dataclass(frozen=True)
class Deferred:
    """A pipeline body shaped like attention's, split so that its last mma runs behind the next step's first
    (option deferred=True, with a ring per tile): `first` (zero, mma: S = Q K^T), `early` (what needs neither the
    last mma's accumulator nor its A: the softmax), `late` (the rest: rescaling O, writing P), `last` (O += P V).
    Step j issues first(j) and last(j-1) as one batch, waits for first(j) only, runs early(j) while last(j-1) may
    still run, then waits for that too (warp_specialized.cuh: consume_deferred)."""
    first: tuple     # (zero, mma)
    early: tuple
    late: tuple
    last: ir.Op


def deferred(body, rings) -> Deferred | None:
    """The split above, where the body (its loads left out) has that shape: plain ops, none writing to memory;
    first a zero of a register tile and an mma into it whose B has a ring and whose A nothing in the body writes;
    last an mma accumulating into a register tile from a register A and a B with another ring; no other op reading
    those two tiles, and none after the last mma touching its accumulator or A. Else None."""
    if len(body) < 4 or not all(isinstance(s, ir.Op) for s in body):
        return None
    ring = lambda x: any(x is t for t in rings)  # noqa: E731
    zero, first = body[0], body[1]
    if not (zero.name == "zero" and first.name == "mma" and first.dst is zero.dst and first.srcs[2] is zero.dst
            and ring(first.srcs[1]) and isinstance(first.srcs[0], (ST, RT))):
        return None
    i = max(n for n, s in enumerate(body) if s.name == "mma")
    last = body[i]
    if i < 2 or last.srcs[2] is not last.dst or not isinstance(last.srcs[0], RT) or not ring(last.srcs[1]) \
            or last.srcs[1] is first.srcs[1]:
        return None
    held = {id(last.dst), id(last.srcs[0])}
    touches = lambda s: any(id(x) in held for x in (s.dst, *s.srcs))  # noqa: E731
    rest, after = body[2:i], body[i + 1:]
    if id(first.dst) in held or any(touches(s) for s in after) or any(isinstance(s.dst, (ST, SV, GL)) for s in body) \
            or any(s.dst is first.srcs[0] for s in body) or any(ring(x) for s in rest + after for x in s.srcs):
        return None
    split = next((n for n, s in enumerate(rest) if touches(s)), len(rest))
    return Deferred((zero, first), tuple(rest[:split]), tuple(rest[split:]) + tuple(after), last)


def ws_misfit(k: ir.Kernel, warps: int) -> str | None:
    """Why the warp-specialized schedule cannot take k (None: it can). Its pipeline loops may sit inside
    tl.range loops and follow one another: the producer walks the same loop nest (codegen)."""
    pipes = [lp for lp in loops(k.body) if lp.kind == "pipeline"]
    if not pipes:
        return "it has no tl.pipeline loop"
    if any(inner.kind == "pipeline" for lp in pipes for inner in loops(lp.body)):
        return "a tl.pipeline loop holds another loop that pipelines"
    if not _pipeline_loads(k):
        return "its pipeline loop loads nothing from global into shared memory"
    if warps % 4:
        return f"its register tiles split over {warps} warps, not whole warpgroups"
    sources = {}
    for op in _pipeline_loads(k):
        t = op.dst
        why = tma_misfit(t)
        if why:
            return why
        if sources.setdefault(t, op.srcs[0]) is not op.srcs[0]:   # one tensor map per pipelined tile
            return f"its pipelined tile {t.name} is loaded from two globals"
    return None


def groups_misfit(k: ir.Kernel, warps: int, persistent: bool) -> str | None:
    """Why two consumer groups cannot take k's tiles in turn (None: they can). Each group runs the block-level ops
    of its own tiles with warp ids of its own (TILES_CUDA_GROUPS), so nothing in a tile may be shared between the
    groups but the ring: no shared tile but the pipelined ones (each group would write the one tile; a resident
    load's tile is one of those), one pipeline loop that only accumulates (ring vectors and per-tile rings come with
    bodies that do more), no sum across blocks (store_sum counts a block once). The tile is one group's: workers=1."""
    if not persistent:
        return "the persistent grid (persistent=True): the groups take the block's tiles of the walk in turn"
    if warps != 4:
        return f"one consumer warpgroup a tile (workers=1, 64 rows), not {warps} warps"
    if not _one_accumulating_loop(k):
        return "one tl.pipeline loop that accumulates (a GEMM's main loop)"
    piped = pipelined_tiles(k)
    for op, _ in k.walk():
        if op.name == "store_sum":
            return "no tl.store_sum (its count of arrivals is a block's)"
        if isinstance(op.dst, ST) and op.dst not in piped:
            return f"no shared tile written by the consumers ({op.dst.name}: each group would write the one tile)"
    return None


def _one_accumulating_loop(k: ir.Kernel) -> bool:
    return len([lp for lp in loops(k.body) if lp.kind == "pipeline"]) == 1 and _accumulate_only(k)


def shared_loads(k: ir.Kernel, cluster: int) -> dict[str, str]:
    """The pipelined tiles the blocks of a cluster share, each with how it splits over them: their loads' index
    does not depend on the grid's axis 0, along which the cluster's blocks lie, and the tile splits evenly by
    swizzle panels ("panels"), or else by rows in whole 8-row swizzle atoms ("rows": a 64-column tile, as
    `trans_b`'s B)."""
    out = {}
    for op in _pipeline_loads(k):
        if ("block", 0) in set().union(*map(ir.free_vars, op.attrs["idx"])):
            continue
        if (op.dst.cols // tma_map(op).panel_cols) % cluster == 0:
            out[op.dst.name] = "panels"
        elif op.dst.rows % (8 * cluster) == 0:
            out[op.dst.name] = "rows"
    return out


def cluster_misfit(k: ir.Kernel, cluster: int, persistent: bool, groups: int, blocks: int) -> str | None:
    """Why `cluster` blocks cannot share k's loads (None: they can). Each block's producer fills its share of every
    block's slot, so the blocks walk the same ring in step: one pipeline loop, at the body's top level, that only
    accumulates and whose trip count does not depend on the grid's axis 0; at least one load to share; no sum
    across blocks (a tile past the grid's end, the pair of the last odd one, is computed and never stored)."""
    if not persistent:
        return "the persistent grid (persistent=True): a cluster walks pairs of tiles"
    if groups > 1 or blocks > 1:
        return "one consumer group and one block an SM (consumer_groups=1, blocks_per_sm=1)"
    top = [s for s in k.body if isinstance(s, ir.Loop) and s.kind == "pipeline"]
    if len(top) != 1 or not _one_accumulating_loop(k):
        return "one tl.pipeline loop, outside any other loop, that accumulates (a GEMM's main loop)"
    if ("block", 0) in ir.free_vars(top[0].count):
        return "a pipeline loop whose trip count does not depend on the grid's axis 0 (the cluster's blocks step together)"
    if len(k.grid) < 2:
        return "a grid of 2 or 3 dims (the cluster's blocks lie along axis 0)"
    if any(op.name == "store_sum" for op, _ in k.walk()):
        return "no tl.store_sum (a tile past the grid's end would be counted)"
    if not shared_loads(k, cluster):
        return (f"a pipelined load that does not depend on the grid's axis 0, whose tile's swizzle panels or rows "
                f"(in 8-row atoms) split {cluster} ways (a GEMM's B tile)")
    return None


def _one_or_two(k: ir.Kernel, option: str, misfit) -> int:
    """Option `option`'s value, 1 (default) or 2, refused with misfit(2)'s reason where the kernel cannot take 2."""
    n = k.options.get(option, 1)
    if n not in (1, 2) or isinstance(n, bool):
        raise TileError(f"{k.name}: {option} must be 1 or 2, got {n!r}", k.loc)
    why = n > 1 and misfit(n)
    if why:
        raise TileError(f"{k.name}: {option}={n} needs {why}", k.loc)
    return n


def tma_misfit(t: ST) -> str | None:
    """Why TMA cannot fill shared tile t here (None: it can)."""
    if t.dtype.itemsize not in (1, 2) or t.rows > 256:
        return f"TMA here fills 1- or 2-byte tiles of at most 256 rows; {t.name} is {t.type_str()}"
    if t.cols * t.dtype.itemsize % 32:   # st's rule (types.cuh): no swizzle mode, which TMA's box needs
        return f"TMA's swizzle modes need rows of a multiple of 32 bytes; {t.name} is {t.type_str()}"
    return None


def tma_map(op: ir.Op) -> TmaMap:
    """The tensor map of a pipelined load (one per pipelined tile: ws_misfit) or of a resident one."""
    t = op.dst
    row_bytes = t.cols * t.dtype.itemsize
    swz = next(b for b in (128, 64, 32) if row_bytes % b == 0)   # st's rule (types.cuh)
    return TmaMap(f"{t.name}_tma", op.srcs[0].name, t.rows, t.cols, swz // t.dtype.itemsize, swz, t.dtype.itemsize)


def _tma_loads(k: ir.Kernel) -> tuple[TmaMap, ...]:
    return tuple(dict.fromkeys(tma_map(op) for op in _pipeline_loads(k)))


SCHEDULES = ("warp_specialized", "warp")


def plan(k: ir.Kernel, target: str, max_smem: int, schedule: str | None = None) -> Schedule:
    """schedule: "warp_specialized" or "warp" (default: the kernel's option, else warp_specialized on sm_90a)."""
    if target not in WARPS_PER_WORKER:
        raise TileError(f"the CUDA backend has no schedule for target {target!r} (sm_80, sm_90a)", k.loc)
    want = k.options.get("workers", DEFAULT_WORKERS[target]) * WARPS_PER_WORKER[target]
    for t in k.tiles:   # the header library builds every tile from 16x16 base tiles (16-element vector slices)
        extents = t.shape if isinstance(t, (ST, RT)) else (t.length,) if isinstance(t, RV) else ()
        if any(n % 16 for n in extents):
            raise TileError(f"{t.name}: the CUDA backend needs tile extents that are multiples of 16, "
                            f"got {t.type_str()}", k.loc)
    wgmma = target == "sm_90a" and bool(k.options.get("wgmma", True))
    split = col_split(k, want // 4) if wgmma and want % 4 == 0 else []
    # A sliced product deals its 16-row tiles to the warps, and where there are fewer, its columns as well.
    deals = lambda t, w: (t.rows // 16) % w == 0 or (  # noqa: E731
        w % (t.rows // 16) == 0 and t.cols % (16 * w // (t.rows // 16)) == 0)
    sliced = [] if wgmma else [t for t in {id(m.dst): m.dst for m in sliced_adds(k.body).values()}.values()
                               if deals(t, want)]
    # Each warp needs whole 16-row base tiles of every other tile: use fewer warps when a tile is too short.
    fewest = lambda most, skip: next(w for w in range(most, 0, -1)  # noqa: E731
                                     if all(r % (16 * w) == 0 for r in row_tiles(k, skip=skip)))
    warps = fewest(want, split + sliced)
    if any(not deals(t, warps) for t in sliced):   # dealt out for more warps: a register tile after all
        sliced = [t for t in sliced if deals(t, warps)]
        warps = fewest(warps, split + sliced)
    if warps != want and split:   # the split tiles were for `want` warps: count them in again (wgmma: none sliced)
        split = []
        warps = fewest(want, [])
    blocks = k.options.get("blocks_per_sm", 1)
    if not isinstance(blocks, int) or isinstance(blocks, bool) or not 1 <= blocks <= 4:
        raise TileError(f"{k.name}: blocks_per_sm must be an int from 1 to 4, got {blocks!r}", k.loc)
    if blocks > 1:   # each block's share of the SM (the runtime reserves 1 KB a block)
        max_smem = min(max_smem, SM_SHARED // blocks - 1024)
    stage_counts = [lp.stages for lp in loops(k.body) if lp.kind == "pipeline" and lp.stages]
    stages = max(stage_counts or [k.options.get("stages", DEFAULT_STAGES)])
    piped = pipelined_tiles(k)
    aligned = lambda n: -(-n // SMEM_ALIGN) * SMEM_ALIGN  # noqa: E731
    piped_bytes = sum(aligned(t.rows * t.cols * t.dtype.itemsize) for t in piped)
    smem = SMEM_ALIGN  # slack to align the first tile
    for t in k.tiles:
        if isinstance(t, (ST, SV)) and t not in piped:
            smem += aligned((t.rows * t.cols if isinstance(t, ST) else t.length) * t.dtype.itemsize)
    tma, note, store, persistent, groups, cluster, shared = (), "", None, False, 1, 1, {}
    schedule = schedule or k.options.get("schedule", "warp_specialized")
    if schedule not in SCHEDULES:
        raise TileError(f"the CUDA backend has no schedule {schedule!r} ({', '.join(SCHEDULES)})", k.loc)
    if target == "sm_90a" and schedule == "warp_specialized":
        note = ws_misfit(k, warps) or ("" if wgmma else "its consumers run mma on wgmma; wgmma=False asks otherwise")
        if not note and warps > 4 * MAX_CONSUMER_GROUPS:
            raise TileError(f"{k.name}: the warp-specialized schedule takes 1 to {MAX_CONSUMER_GROUPS} consumer "
                            f"warpgroups, this configuration asks {warps // 4} (workers={warps // 4}), more than ever ran "
                            f"on the H200; schedule='warp' runs {warps} warps without a producer",
                            k.loc)
        if not note:
            tma = _tma_loads(k)
            smem += SMEM_ALIGN   # the ring's mbarriers (or the rings', together)
            persistent = bool(k.options.get("persistent", _accumulate_only(k)))
            groups = _one_or_two(k, "consumer_groups", lambda n: groups_misfit(k, warps, persistent))
            cluster = _one_or_two(k, "cluster", lambda n: cluster_misfit(k, n, persistent, groups, blocks))
            shared = shared_loads(k, cluster) if cluster > 1 else {}
            store = tma_store(k, warps) if persistent else None
            if store:   # its staging tiles (a set a group), paid for with pipeline stages where need be (never below 2)
                bufs = store_buffers(store[0], lambda n: smem + groups * n * 16 * warps * 128
                                     + stages * piped_bytes <= max_smem)
                smem += groups * aligned(bufs * 16 * warps * 128)
                while smem + stages * piped_bytes > max_smem and stages > 2:
                    stages -= 1
    smem += stages * piped_bytes
    regs = k.options.get("max_registers", 0)
    if not isinstance(regs, int) or isinstance(regs, bool) or not (regs == 0 or 16 <= regs <= 255):
        raise TileError(f"{k.name}: max_registers must be an int from 16 to 255 (0: no cap), got {regs!r}", k.loc)
    if tma and regs:   # its producer and consumers set their own counts (setmaxnreg)
        raise TileError(f"{k.name}: max_registers is for the warp schedule; the warp-specialized one sets "
                        f"its producer's and consumers' registers itself; use schedule='warp'", k.loc)
    vectors = {op.dst: op.srcs[0].dtype for op in pipelined_vectors(k)} if tma else {}
    smem += sum(aligned(stages * t.length * d.itemsize) for t, d in vectors.items())
    reduce = tma_reduce(k, split) if tma else None
    # its staging tiles: two in turn, else one, else the vector reductions
    staging = next((n for n in (2, 1) if reduce and smem + n * aligned(reduce[2]) <= max_smem), 0)
    smem += staging * aligned(reduce[2]) if staging else 0
    reduce = reduce if staging else None
    resident = resident_loads(k) if tma and k.options.get("resident", True) else []
    slots = 0
    if resident and smem + SMEM_ALIGN <= max_smem:   # their mbarriers; then a second slot each where it helps and fits
        smem += SMEM_ALIGN
        extra = sum(aligned(op.dst.rows * op.dst.cols * op.dst.dtype.itemsize) for op in resident)
        slots = 2 if any(repeats(k, op, persistent) for op in resident) and smem + extra <= max_smem else 1
        smem += (slots - 1) * extra
    else:
        resident = []
    if smem > max_smem:
        raise TileError(f"{k.name} needs {smem} bytes of shared memory on {target} "
                        f"({stages} pipeline stages), more than the {max_smem} a block can have"
                        f"{f' with {blocks} blocks an SM' if blocks > 1 else ''}; "
                        f"use smaller tiles or fewer stages", k.loc)
    if blocks > 1 and not tma:   # the warp schedule: the register cap that lets `blocks` fit (and max_registers, if lower)
        share = launch_registers(warps, blocks, False, 0)
        regs = min(regs or share, share) if share < 255 else regs   # no cap where the blocks fit anyway: same code
    launch = launch_registers(warps * groups, blocks, bool(tma), regs)
    if blocks > 1 and tma:   # ptxas fits every instruction in the launch count (C7602 where a wgmma's operands do not fit)
        need = int(tile_registers(k, warps))
        if need > launch:
            raise TileError(f"{k.name}: with {blocks} blocks an SM a thread starts with {launch} registers, the count "
                            f"ptxas must fit every instruction in, and the register tiles alone take {need} a "
                            f"consumer thread; use fewer blocks an SM or smaller tiles", k.loc)
    if wgmma:
        _check_wgmma_registers(k, warps, blocks, bool(tma), regs, launch)
    return Schedule(target, warps, stages, smem, wgmma=wgmma, tma=tma, stage_bytes=sum(t.bytes for t in tma),
                    note=note, persistent=persistent, store=store[0] if store else None,
                    store_src=store[1] if store else "", store_buffers=bufs if store else 0,
                    col_split=tuple(t.name for t in split),
                    vectors=tuple(t.name for t in vectors), reduce=reduce[0] if reduce else None,
                    reduce_src=reduce[1] if reduce else "", reduce_buffers=staging, max_registers=regs,
                    sliced=tuple(t.name for t in sliced),
                    rewrites=target == "sm_90a" and bool(k.options.get("rewrites", True)),
                    rings=tuple(t.name for t in tile_rings(k)) if tma and k.options.get("rings", True) else (),
                    deferred=bool(tma and k.options.get("deferred", True)),
                    turns=bool(tma and k.options.get("deferred", True) and k.options.get("turns", False)
                               and warps == 8),
                    exp2_poly=int(k.options.get("exp2_poly", 0)) if target == "sm_90a" else 0, blocks=blocks,
                    pdl=target == "sm_90a",
                    resident=tuple(tma_map(op) for op in resident), resident_slots=slots,
                    boxes=bool(tma and k.options.get("boxes", True)), groups=groups, cluster=cluster,
                    multicast=tuple(shared), multicast_rows=tuple(t for t, by in shared.items() if by == "rows"),
                    runs=tuple(sorted(column_order.free_tiles(k))) if k.options.get("runs", True) else ())


WGMMA_SPARE = 26  # registers past a wgmma's accumulators that ptxas needs to issue it (CUDA 13.0: C7602 asks for a
                  # target of 58 for n64 (32 a thread), 122 for n192 (96), 154 for n256 (128))
# the wgmma widths: gen_wgmma.py writes their wrappers from this, mma_block.cuh's wgmma_n repeats it (a test checks);
# other widths take mma.sync
WGMMA_N = (16, 32, 64, 96, 128, 176, 192, 256)


def _on_wgmma(op: ir.Op, warps: int) -> bool:
    """Whether tiles_cuda's mma() issues this op on wgmma (mma_block.cuh, use_wgmma): bf16, or e4m3 with B
    transposed and A in shared memory; whole warpgroups of 16 rows a warp; a wgmma width; shared operands swizzled
    by 128 bytes, or for bf16 by 64 (rows of a multiple of 32 elements: head dims 32 and 96)."""
    a, b = op.srcs[0], op.srcs[1]
    fp8 = a.dtype.name == b.dtype.name == "fp8e4m3" and op.attrs.get("trans_b") and not isinstance(a, RT)
    if not (fp8 or a.dtype.name == b.dtype.name == "bf16"):
        return False
    if op.attrs.get("trans_a") and (fp8 or isinstance(a, RT)):
        return False
    panel = 128 if fp8 else 64   # tc::st takes the widest swizzle its rows fill: 128 bytes, else 64
    wide = lambda t: isinstance(t, ST) and t.cols * t.dtype.itemsize % panel == 0   # noqa: E731
    return (warps % 4 == 0 and op.dst.rows == 16 * warps and op.dst.cols in WGMMA_N and wide(b)
            and (isinstance(a, RT) or wide(a)))


def launch_registers(warps: int, blocks: int, tma: bool, cap: int) -> int:
    """The registers a thread starts with, the count ptxas must fit every instruction in: the register file over
    the launch's threads (the producer warpgroup's among them) and blocks an SM, 8-aligned, at most 255; under the
    warp schedule, at most its max_registers cap."""
    launch = min(255, REGISTER_FILE // blocks // (32 * warps + (128 if tma else 0)) // 8 * 8)
    return min(launch, cap) if cap and not tma else launch


def _check_wgmma_registers(k: ir.Kernel, warps: int, blocks: int, tma: bool, cap: int, launch: int) -> None:
    """A wgmma keeps its accumulators (a warpgroup's 64 rows of the f32 tile) in registers at once, and ptxas fits
    every instruction in the count a thread starts with (the register file over the launch's threads, the producer's
    among them; or max_registers): where one does not fit, ptxas fails (C7602, "Insufficient registers ... to compile
    instruction") instead of spilling. Under a max_registers cap (the warp schedule) the register tiles together must
    fit it too where an mma runs on wgmma: its accumulators are not spilled (C7600)."""
    on_wgmma = [op for op, _ in k.walk() if op.name == "mma" and isinstance(op.dst, RT) and _on_wgmma(op, warps)]
    if cap and not tma and on_wgmma:   # a cap the warp schedule sets: C7600 instead of spills
        tiles = [t for t in k.tiles if isinstance(t, RT)]
        total = tile_registers(k, warps)
        if total > cap:
            each = ", ".join(f"{t.name} {t.rows * t.cols * t.dtype.itemsize / 4 / (32 * warps):.0f}" for t in tiles)
            raise TileError(f"{k.name}: its register tiles take {total:.0f} registers a thread over {warps} warps "
                            f"({each}), more than max_registers={cap}, and the wgmma accumulators among them cannot "
                            f"spill (ptxas: C7600, register allocation failed); raise max_registers, use smaller "
                            f"tiles or wgmma=False", k.loc)
    for op in on_wgmma:
        need = op.dst.cols // 2   # one wgmma: a warpgroup's 64 rows of f32 over its 128 threads
        if need + WGMMA_SPARE > launch:
            who = (f"{warps // 4} consumer warpgroup(s) and the producer" if tma else f"{warps} warps") + \
                (f", {blocks} blocks an SM" if blocks > 1 else "") + (f", max_registers={cap}" if cap and not tma else "")
            raise TileError(f"{k.name}: {op.dst.name} ({op.dst.type_str()}) takes {need} registers a thread in one "
                            f"wgmma, which with the {WGMMA_SPARE} it needs beside them is more than the {launch} a "
                            f"thread starts with ({who}); use smaller tiles (fewer rows or columns a block) or more "
                            f"registers a thread", op.loc or k.loc)


def epilogue_store(k: ir.Kernel) -> ir.Op | None:
    """The kernel's last store of a register tile to a global, at the top of its body, where what follows it is
    no loop and neither touches that tile nor that global (attention: the log-sum-exp's vector work and store)."""
    for i in range(len(k.body) - 1, -1, -1):
        s = k.body[i]
        if isinstance(s, ir.Loop):
            return None
        if s.name == "store" and isinstance(s.dst, GL) and isinstance(s.srcs[0], RT):
            later = k.body[i + 1:]
            touched = any(isinstance(x, ir.Loop) or any(y is s.dst or y is s.srcs[0] for y in (x.dst, *x.srcs))
                          for x in later)
            return None if touched else s
    return None


def tma_store(k: ir.Kernel, warps: int) -> tuple[TmaMap, str] | None:
    """(map, register tile) when the kernel's epilogue stores a register tile of its consumers (epilogue_store)
    to a 2-byte global in whole 128-byte swizzle panels: the persistent epilogue then hands it to TMA through a
    staging tile and goes on (to the ops after it, to the next tile's main loop) while the copy runs. Each consumer
    warpgroup stores its 64 rows. Any grid: a batched GEMM's third dim is the store's depth coordinate, and the 4-D
    tensor map clips each batch's rows (64 x 1024x1024x512 on the H200, 01:29 UTC 12-02: 171 us with the store
    from registers after each tile's 8 K steps, 0.66x torch.bmm)."""
    last = epilogue_store(k)
    if last is None:
        return None
    t, g = last.srcs[0], last.dst
    if g.dtype.itemsize != 2 or t.rows != 16 * warps or (t.cols * 2) % 128:
        return None
    return TmaMap(f"{g.name}_tma", g.name, 64, t.cols, 64, 128, 2), t.name


def store_buffers(store: TmaMap, fits) -> int:
    """The epilogue's staging tiles, one 128-byte swizzle panel of the stored tile's 16 x warps rows each: one for
    every panel of the tile where fits(n) says they fit beside the configured pipeline stages, else two taken in
    turn (a 128x256 bf16 tile: 32 KB where the whole tile's 64 KB would cost a stage of 48 KB), else the whole tile
    again, paid for with stages. A tile of an odd number of panels keeps its whole set."""
    panels = store.cols // store.panel_cols
    return next((n for n in (panels, 2) if panels % n == 0 and fits(n)), panels)


def tma_reduce(k: ir.Kernel, split) -> tuple[TmaMap, str, int] | None:
    """(map, register tile, bytes of its staging tile) when a column-split tile (col_split) is added into one
    f32 global: the consumers then stage it in shared memory and TMA adds it in 128-byte panels
    (warp_specialized.cuh atomic_add_tma). Attention backward's dQ: its 16 vector reductions per thread and step
    took 14% of the consumers' warp samples (ncu, H200, 02:18 UTC, 11-30), LG throttle and their address
    arithmetic; a reduce-add per row from one lane (02:43) took 34%; one per panel from each warpgroup, after
    a barrier of its 4 warps on one staging tile (04:26), 0.91x cuDNN where the vector reductions were 0.82x,
    with ~20% of the samples in waits for that barrier and the proxy fence. So each warp adds its own 16 rows:
    the map's box is one panel (32 floats) by 16 rows. TMA writes only what lies inside the global, so edge tiles
    need no other path."""
    adds = [op for op in ops(k.body) if op.name == "atomic_add" and op.srcs[0] in split]
    if not adds or len({(op.srcs[0].name, op.dst.name) for op in adds}) != 1 or adds[0].dst.dtype.name != "f32":
        return None
    t, g = adds[0].srcs[0], adds[0].dst
    return TmaMap(f"{g.name}_tma", g.name, 16, t.cols, 128 // 4, 128, 4), t.name, t.rows * t.cols * 4


def loops(stmts):
    for s in stmts:
        if isinstance(s, ir.Loop):
            yield s
            yield from loops(s.body)


def _register_load(s) -> bool:
    """A load from a global straight into registers: one whose whole-tile and edge paths branch (memory.cuh)."""
    return isinstance(s, ir.Op) and s.name == "load" and isinstance(s.srcs[0], GL) and isinstance(s.dst, (RT, RV))


def raw_loads(body, runs) -> list:
    """(load, the op before which its tile is converted) for each register load of a tile in runs that another
    register load follows before any op touches the tile. Such a load reads the tile's bytes into an rt_raw and
    tc::copy converts them where the tile is first touched (memory.cuh, rt_raw), so that the loads after it issue
    before its bytes arrive: add_rmsnorm's X and R each waited for their bytes in turn. The first touch must be an
    op of the load's own statement list. A loop that touches the tile first keeps the load as it is: converting
    there every iteration kept two more registers' worth of bytes live through the loop, and ptxas, bound only by
    __launch_bounds__, spilled add_rmsnorm's W to do it (12-07)."""
    out = []
    for lst in [body] + [lp.body for lp in loops(body)]:
        for i, load in enumerate(lst):
            if not (_register_load(load) and isinstance(load.dst, RT) and load.dst.name in runs):
                continue
            loaded = False
            for u in lst[i + 1:]:
                inner = list(ops([u]))
                if not any(touches(o, load.dst) for o in inner):
                    loaded |= any(_register_load(o) for o in inner)
                    continue
                if loaded and isinstance(u, ir.Op):
                    out.append((load, u))
                break
    return out


def sliced_adds(body) -> dict:
    """{id(atomic_add): mma} for each f32 register tile t used only in triples `zero(t); mma(t, a, b, t)` (a and b
    in shared memory) ... `atomic_add(global, t)` later in the same statement list, with nothing in between writing
    a or b. On mma.sync such a product then goes out from the atomic_add a slice of columns at a time
    (tc::atomic_add_mma) and never takes its M x N floats a thread: attention backward's dQ partial on sm_80, 64
    floats a thread at D 128 while dK and dV hold 128, with which ptxas spilled. Its rows need not split over
    the warps as a register tile's do: where it has fewer 16-row tiles than there are warps, its columns split
    too (plan)."""
    triples = []   # (zero, mma, atomic_add)

    def walk(stmts):
        for i, m in enumerate(stmts):
            if isinstance(m, ir.Loop):
                walk(m.body)
                continue
            t = m.dst
            if not (m.name == "mma" and m.srcs[2] is t and all(isinstance(x, ST) for x in m.srcs[:2]) and i > 0
                    and isinstance(stmts[i - 1], ir.Op) and stmts[i - 1].name == "zero" and stmts[i - 1].dst is t):
                continue
            for j in range(i + 1, len(stmts)):
                s = stmts[j]
                if isinstance(s, ir.Loop) or s.dst is m.srcs[0] or s.dst is m.srcs[1]:
                    break
                if s.name == "atomic_add" and s.srcs[0] is t and isinstance(s.dst, GL) and s.dst.dtype.name == "f32":
                    triples.append((stmts[i - 1], m, s))
                    break
    walk(body)
    covered = {id(op) for tr in triples for op in tr}
    every = list(ops(body))
    whole = {id(m.dst) for _, m, _ in triples
             if all(id(op) in covered for op in every if op.dst is m.dst or any(x is m.dst for x in op.srcs))}
    return {id(add): m for _, m, add in triples if id(m.dst) in whole}
