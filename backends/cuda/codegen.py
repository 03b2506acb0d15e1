"""IR -> CUDA C++ that calls the tiles_cuda header library (include/tiles_cuda/API.md).

The generated kernel reads like a hand-written ThunderKittens one: typed tiles declared up front, one header
call per op, the pipelined loop as two lambdas (issue the loads of iteration k into a stage; compute on it),
and the block barriers (tc::sync) written out where shared tiles change hands.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

from tiles import cgen, dtypes, ir, rewrites, targets
from tiles.dsl import TileError
from tiles.types import ALIGN, GL, RT, RV, ST, SV

from . import schedules
from .schedules import Schedule, pipelined_tiles

C_TYPES = {"bf16": "tc::bf16", "f16": "tc::f16", "f32": "float", "fp8e4m3": "tc::fp8e4m3",
           "fp8e5m2": "tc::fp8e5m2", "i32": "int"}


@dataclass
class Generated:
    name: str
    source: str
    schedule: Schedule


def ctype(d: dtypes.DType) -> str:
    return C_TYPES[d.name]


def _name(e: ir.Expr) -> str:
    if isinstance(e, ir.Dim):
        return f"{e.arg}.{ir.Dim.NAMES[e.axis]}()"
    return cgen.default_names(e)


def expr(e) -> str:
    return cgen.c_expr(ir.as_expr(e), _name)


def tile_type(t) -> str:
    if isinstance(t, ST):
        return f"tc::st<{ctype(t.dtype)}, {t.rows}, {t.cols}>"
    if isinstance(t, SV):
        return f"tc::sv<{ctype(t.dtype)}, {t.length}>"
    if isinstance(t, RT):
        if t.layout != "row":
            raise TileError(f"the CUDA backend keeps register tiles in row layout; {t.name} asks for "
                            f"{t.layout!r} (use it through shared memory instead)")
        return f"tc::rt<{ctype(t.dtype)}, {t.rows}, {t.cols}, NUM_WARPS>"
    return f"tc::rv<{ctype(t.dtype)}, {t.length}, tc::axis::{t.axis}, NUM_WARPS>"


def generate(k: ir.Kernel, sched: Schedule) -> Generated:
    return Generated(cgen.symbol(k), _Emitter(k, sched).emit(), sched)


def generate_for(k: ir.Kernel, target: str) -> Generated:
    """k's source for the target's own GPUs, planned within their shared memory (what the static reports, the CPU
    engine and `cuda:sm_80` take; the device runtime plans within the device's own)."""
    return generate(k, schedules.plan(k, target, targets.target(target).shared_bytes))


class _Emitter:
    def __init__(self, k: ir.Kernel, sched: Schedule):
        self.k, self.s = k, sched
        self.w = cgen.Writer()
        self.piped = pipelined_tiles(k)
        # register vectors the producer brings through the ring (schedules.pipelined_vectors): their loads
        self.ring_vectors = [op for op in schedules.pipelined_vectors(k) if op.dst.name in sched.vectors]
        # those of them read where they are used, from the stage's shared vector (schedules.shared_vectors)
        self.at_use = {op.dst for op in self.ring_vectors} & schedules.shared_vectors(k)
        # the shared tiles read since the last barrier (None: not known, any of them); a write to one of them waits
        self.reads: set | None = set()
        self.in_flight = False         # mma ops leave their wgmma group in flight (consume_overlapped)
        # mma.sync: a product only added into a global is computed where it is added, a slice at a time
        self.fused = {add: m for add, m in schedules.sliced_adds(k.body).items() if m.dst.name in sched.sliced}
        # tiles/rewrites.py: exp2(fma(x, c, -m)) for a positive scale folded into the exponent; row sums kept per lane
        self.scaled = rewrites.scaled_exp2(k.body, k.checks) if sched.rewrites else {}
        self.partial = rewrites.partial_sums(k.body) if sched.rewrites else {}
        self.unit = rewrites.unit_factors(k.body) if sched.rewrites else set()   # rescales a warp may skip
        self.partial_now = []   # the vectors the loop being written keeps as per-lane partial sums
        self.ring_reads = {}   # per-tile rings (Schedule.rings, and the resident tiles'): tile -> the statements
        #                        that read it, while they remain to be written; and the tiles whose slot was waited for
        self.ring_waited = set()
        # shared tiles loaded outside the pipeline loops by the producer's TMA, a ring each (schedules.resident_loads)
        self.resident = [op for op in schedules.resident_loads(k) if schedules.tma_map(op) in sched.resident]
        self.epilogue = schedules.epilogue_store(k) if sched.store else None
        # those whose load repeats in a block (a persistent grid's tiles, a tl.range loop): their slots go back
        self.refilled = [op.dst for op in self.resident if schedules.repeats(k, op, sched.persistent)]
        self.resident_tiles = [op.dst for op in self.resident]
        # loads of tiles in runs whose bytes are converted later, where the tile is first touched (schedules.raw_loads):
        # id(load) -> the rt_raw it reads into; id(first touch) -> the (tile, rt_raw) to convert before it
        raw = [] if sched.warp_specialized else schedules.raw_loads(k.body, sched.runs)
        taken = {x.name for x in [*k.params, *k.tiles]}
        self.raw_tiles = {}   # tile -> (its rt_raw's name, the global's dtype)
        self.raw_load, self.raw_copy = {}, {}
        for load, first in raw:
            if load.dst not in self.raw_tiles:
                self.raw_tiles[load.dst] = (cgen.fresh_name(f"{load.dst.name}_raw", taken), load.srcs[0].dtype)
            self.raw_load[id(load)] = self.raw_tiles[load.dst][0]
            self.raw_copy.setdefault(id(first), []).append(load.dst)

    # ---- whole kernel ---------------------------------------------------------------------------------------

    def emit(self) -> str:
        k, w = self.k, self.w
        w(f"// {k.name}: generated by tiles for {self.s.target} from {k.loc.file if k.loc else '?'}"
          f"{':' + str(k.loc.line) if k.loc else ''}")
        warps = f"{self.s.warps} consumer warps + a TMA producer warpgroup" if self.s.warp_specialized else \
            f"{self.s.warps} warps"
        staged = self.piped or self.ring_vectors or self.s.warp_specialized
        w(f"// {warps}, {f'{self.s.stages}-stage pipeline' if staged else 'no staged loads'}, {self.s.smem_bytes} "
          f"bytes of dynamic shared memory")
        consts = ", ".join(f"{n}={v!r}" for n, v in k.consts.items())
        if consts:
            w(f"// constants: {consts}")
        if self.s.note:
            w(f"// not warp-specialized: {self.s.note}")
        ws = self.s.warp_specialized
        if self.s.wgmma:
            w("#define TILES_CUDA_WGMMA 1  // block-level mma on warpgroup wgmma where the operands allow")
        if ws:
            w("// block-level ops run on the consumer warps only; the producer warpgroup follows them")
            w(f"#define TILES_CUDA_CONSUMER_THREADS {32 * self.s.consumer_warps}")
        if self.s.groups > 1:
            w(f"#define TILES_CUDA_GROUPS {self.s.groups}  // consumer groups of NUM_WARPS warps, taking the tiles in "
              f"turn")
        w("#include <tiles_cuda/tiles.cuh>")
        if ws:
            w("#include <tiles_cuda/warp_specialized.cuh>")
        w()
        who = "  // consumer warps" + (" a group" if self.s.groups > 1 else "") if ws else ""
        w(f"constexpr int NUM_WARPS = {self.s.warps};{who}")
        w(f"constexpr int STAGES = {self.s.stages};")
        if ws:
            w(f"constexpr int PRODUCER_REGS = {self.s.producer_regs}, CONSUMER_REGS = {self.s.consumer_regs};")
        if self.s.cluster > 1:
            w(f"constexpr int CLUSTER = {self.s.cluster};  // blocks a cluster, on neighbouring tiles along the grid's "
              f"axis 0, sharing {', '.join(self.s.multicast)} by multicast")
        if self.resident:
            w(f"constexpr int RESIDENT_SLOTS = {self.s.resident_slots};  // of each shared tile the producer loads "
              f"outside the pipeline loops")
        w()
        params = []
        for p in k.params:
            if isinstance(p, GL):
                params.append(f"TC_GL_PARAMS({ctype(p.dtype)}, {p.name})")
            else:
                params.append(f"{ctype(p.dtype)} {p.name}")
        params += [f"const __grid_constant__ tc::tma_map {t.map}" for t in self.s.maps]
        blocks, cap = self.s.min_blocks, self.s.max_registers
        per_sm = f"  // {blocks} blocks an SM" if blocks > 1 else ""
        # the warp schedule's cap exactly (__maxnreg__: a launch bound's block count rounds it to the SM's share,
        # 72 for 64 at 448 threads); a kernel takes one of the two qualifiers, not both
        consumers = "NUM_WARPS * TILES_CUDA_GROUPS" if self.s.groups > 1 else "NUM_WARPS"
        bound = (f"__launch_bounds__({consumers} * 32 + 128, {blocks}){per_sm}" if ws else
                 f"__maxnreg__({cap})  // at most {cap} registers a thread{per_sm.replace('  //', ':')}" if cap else
                 "__launch_bounds__(NUM_WARPS * 32)")
        if self.s.cluster > 1:
            bound += " __cluster_dims__(CLUSTER, 1, 1)"
        w(f"extern \"C\" __global__ void {bound}")
        with w.block(f"{cgen.symbol(k)}({', '.join(params)}) {{"):
            for p in k.params:
                if isinstance(p, GL):
                    w(f"const tc::gl<{ctype(p.dtype)}> {p.name} = TC_GL({p.name});")
            self.given()
            if not self.s.persistent:
                ids = ("blockIdx.x", "blockIdx.y", "blockIdx.z")[:len(k.grid)]
                group = None if k.group is None else expr(k.group)
                for line in cgen.block_indices(ids, group, [expr(g) for g in k.grid]):
                    w(line)
            self.declare_shared()
            if ws:
                self.warp_specialized()
            else:
                self.declare_regs()
                self.grid_dependency()
                w()
                self.stmts(k.body)
        return w.text()

    def given(self):
        """What the launch checked on the host, as facts the compiler may use (cgen.facts): the whole-tile paths'
        bounds and alignment tests that they decide are not compiled."""
        facts = cgen.facts(self.k, lambda p: f"{p.name}.aligned<{ALIGN}>()", expr)
        if facts:
            self.w("// checked before the launch")
        for f in facts:
            self.w(f"TC_ASSUME({f});")

    def grid_dependency(self):
        """sm_90a: programmatic dependent launch (runtime.Launch; tc::wait_prior_grids says why it is safe),
        written where the prologue ends (it touches only parameters, shared memory and registers: the ring's
        mbarriers are set up meanwhile) and before the first global memory access. Under the warp-specialized
        schedule that is before the roles split, and every thread waits: the producer's TMA loads read global
        memory, and so do the consumers' own loads (tiles not pipelined) and stores (which must not overtake the
        reads of the grid before); what the consumers would do first waits on the producer's loads anyway."""
        if self.s.pdl:
            self.w("tc::wait_prior_grids();   // the grids before this one are done and their writes visible")
            self.w("tc::launch_dependents();  // the next grid may be scheduled now: its wait waits for this one")

    def warp_specialized(self):
        """Producer warpgroup: the pipelined loads as TMA. Consumers: everything else, as the warp schedule."""
        w = self.w
        st = self.s.store
        if st:
            src = next(t for t in self.k.tiles if t.name == self.s.store_src)
            gl = next(p for p in self.k.params if p.name == st.gl)
            tile, n = f"tc::st<{ctype(gl.dtype)}, {src.rows}, {st.panel_cols}>", self.s.store_buffers
            panels = src.cols // st.panel_cols
            what = (f"the tile's {n} 128-byte panel{'s' * (n > 1)}" if n == panels else
                    f"{n} of the tile's {panels} 128-byte panels, in turn")
            if self.s.groups > 1:   # the consumers take theirs once the roles split
                w(f"auto* {src.name}_stagings = smem.alloc<{tile}>(TILES_CUDA_GROUPS * {n});  // what the epilogue's "
                  f"TMA store reads, {what}, a set a consumer group")
            else:
                w(f"auto* {src.name}_staging = smem.alloc<{tile}>({n});  // what the epilogue's TMA store reads, {what}")
        red = self.s.reduce
        if red:
            t, n = self.s.reduce_src, self.s.reduce_buffers
            rows = next(x.rows for x in self.k.tiles if x.name == t)
            w(f"auto* {t}_staging = smem.alloc<tc::st<float, {rows}, {red.cols}>>({n});  // what TMA adds into "
              f"{red.gl}, {'two tiles in turn' if n == 2 else 'one tile'}")
            w(f"int {t}_turn = 0;  // the staging tile of the next reduce-add")
        rings = self.s.rings
        if rings:
            w(f"auto* rings = smem.alloc<tc::stage_ring<STAGES>>({len(rings)});  // full/empty mbarriers per stage, "
              f"a ring per pipelined tile")
            for i, t in enumerate(rings):
                w(f"auto& {t}_ring = rings[{i}];")
            w(f"if (threadIdx.x == 0) for (int r = 0; r < {len(rings)}; ++r) rings[r].init(NUM_WARPS);"
              f"  // every consumer warp frees a stage once")
        else:
            w("auto& ring = *smem.alloc<tc::stage_ring<STAGES>>();  // full/empty mbarriers per stage")
            if self.s.cluster > 1:
                w("if (threadIdx.x == 0) ring.init(NUM_WARPS * CLUSTER);  // every consumer warp of the cluster frees "
                  "a stage once")
            else:
                w("if (threadIdx.x == 0) ring.init(NUM_WARPS);  // every consumer warp frees a stage once")
        if self.resident:
            n = len(self.resident)
            w(f"auto* resident = smem.alloc<tc::stage_ring<RESIDENT_SLOTS>>({n});  // full/empty mbarriers per slot, "
              f"a ring per tile loaded outside the pipeline loops")
            for i, op in enumerate(self.resident):
                w(f"auto& {op.dst.name}_ring = resident[{i}];")
            w(f"if (threadIdx.x == 0) {f'for (int r = 0; r < {n}; ++r) resident[r]' if n > 1 else 'resident[0]'}"
              f".init(NUM_WARPS);")
        self.boxes()
        if self.s.cluster > 1:
            w("tc::cluster_sync();  // every block of the cluster, producers included: the rings are ready")
        else:
            w("__syncthreads();  // the whole block, producer included: the ring is ready")
        self.grid_dependency()
        w()
        if self.s.persistent:
            sizes = [expr(g) for g in self.k.grid]
            if self.s.cluster > 1:   # axis 0 in the clusters' tiles: CLUSTER of the grid's each
                sizes[0] = f"tiles_cdiv({sizes[0]}, CLUSTER)"
            w(f"const int grid[{len(sizes)}] = {{{', '.join(sizes)}}};  // tl.grid: the tiles this grid walks"
              f"{', axis 0 in clusters' if self.s.cluster > 1 else ''}")
            w(f"const int tiles = {' * '.join(f'grid[{i}]' for i in range(len(sizes)))};")
        with w.block("if (tc::is_producer()) {", "} else {"):
            w("tc::regs_release<PRODUCER_REGS>();")
            with w.block("if (tc::is_producer_leader()) {"):
                self.cursors()
                with self.tiles():
                    self.produce(self.k.body)
            if self.s.cluster > 1:
                w("__syncwarp();  // the leader rejoins its warp for the cluster's barrier")
        w.depth += 1
        w("tc::regs_acquire<CONSUMER_REGS>();")
        if st and self.s.groups > 1:
            w(f"auto* {self.s.store_src}_staging = {self.s.store_src}_stagings + tc::consumer_group() * "
              f"{self.s.store_buffers};")
        self.cursors()
        self.declare_regs()
        self.reads = set()   # the block just synchronized
        if self.s.groups > 1:
            w("if (tc::consumer_group() == TILES_CUDA_GROUPS - 1 && tc::persistent_tile(0) < tiles)")
            w("    tc::group_turn_pass();  // the ring's first turn is the first group's")
        with self.tiles():
            if self.s.groups > 1:
                with w.block("if ((round & 1) != tc::consumer_group()) {  // the other group's tile: "
                             "past its ring slots"):
                    self.skip(self.k.body)
                    w("continue;")
                w("tc::group_turn_wait();  // the other group has waited for all of its slots")
            if self.s.persistent:
                self.reads = None   # the last tile's readers of shared tiles precede this one
            self.stmts(self.k.body)
        if st or red:
            w("tc::store_tma_wait();")
        w.depth -= 1
        w("}")
        if self.s.cluster > 1:
            w("tc::cluster_sync();  // no block leaves while a peer may still multicast into it or free its stages")

    def skip(self, body):
        """A consumer group's cursor past the ring slots of a tile another group takes: each pipeline loop's count,
        over the nest the producer walks."""
        self.ring_nest(body, lambda lp: self.w(f"cursor.skip({expr(lp.count)});"))

    def boxes(self):
        """What each TMA load announces: its box in bytes, fitted to its global's rows (option boxes: tc::box_rows,
        the runtime encoding the same box), the rows past a fitted box, which TMA never writes, zeroed in every
        slot; or the whole tile's."""
        w = self.w
        tiles = [(m, "_stages", "STAGES") for m in self.s.tma] + [(m, "_slots", "RESIDENT_SLOTS")
                                                                 for m in self.s.resident]
        if not self.s.boxes:
            w("const unsigned " + ", ".join(f"{m.tile}_bytes = {m.bytes}" for m, _, _ in tiles) +
              ";  // TMA bytes of each tile's box")
            return
        w("// TMA boxes fitted to their globals' rows: a global shorter than its tile loads its rows rounded up to 8,")
        w("// the rest of the tile is zeroed here once")
        for m, slots, n in tiles:
            if m.tile in self.s.multicast_rows:   # the cluster's row boxes together: the whole tile, never fitted
                w(f"const unsigned {m.tile}_bytes = {m.bytes};  // the cluster's boxes of its rows: the whole tile")
                continue
            w(f"const unsigned {m.tile}_bytes = tc::box_bytes({m.tile}{slots}, {m.gl}.rows());")
            w(f"tc::zero_past_box({m.tile}{slots}, {n}, {m.gl}.rows());")

    def cursors(self):
        """Each role's place in the rings: one cursor for the pipelined tiles, one per resident tile."""
        self.w("tc::stage_cursor<STAGES> cursor;")
        for op in self.resident:
            self.w(f"tc::stage_cursor<RESIDENT_SLOTS> {op.dst.name}_cursor;")

    def produce(self, body):
        """The producer walks the consumers' loop nest, keeping only what leads to a pipeline loop, and issues
        each pipeline iteration's loads as TMA into the next ring slot: the slot and its phase carry on from one
        pipeline loop to the next, exactly as the consumers' cursor does. A resident tile's load goes into its
        own ring's next slot where the walk meets it, ahead of the pipelined loads after it."""
        self.ring_nest(body, self.produce_loop, self.produce_resident)

    def ring_nest(self, body, pipeline, resident=None):
        """The loop nest as the ring's other walkers take it (the producer; a consumer group stepping past another
        group's tile): the tl.range loops that hold a pipeline loop, written as C loops; pipeline(loop) at each
        pipeline loop, resident(load) at each resident tile's load where given; nothing else."""
        for lp in body:
            if resident and any(lp is op for op in self.resident):
                resident(lp)
                continue
            if not isinstance(lp, ir.Loop) or not any(x.kind == "pipeline" for x in [lp, *schedules.loops(lp.body)]):
                continue
            if lp.kind == "range":
                v = lp.var.name
                with self.w.block(f"for (int {v} = 0; {v} < {expr(lp.count)}; ++{v}) {{"):
                    self.ring_nest(lp.body, pipeline, resident)
                continue
            pipeline(lp)

    def produce_resident(self, op):
        t = op.dst.name
        self.w(f"tc::load_tma({t}_slots[{t}_cursor.slot], &{t}_tma, tc::refill({t}_ring, {t}_cursor, {t}_bytes), "
               f"{self.idx(op)});")
        self.w(f"{t}_cursor.advance();")

    def produce_loop(self, lp):
        """One pipeline loop's loads, iteration by iteration into the ring."""
        w, v = self.w, lp.var.name
        loads = self.loads(lp)
        if self.s.rings:   # each tile into its own ring, once the consumers have freed that slot
            with w.block(f"tc::each_stage<STAGES>(cursor, {expr(lp.count)}, [&](int {v}, int stage) {{"
                         f"  // the loads of iteration {v}", "});"):
                for op in loads:
                    t = op.dst.name
                    w(f"tc::load_tma({t}_stages[stage], &{t}_tma, tc::refill({t}_ring, cursor, {t}_bytes), "
                      f"{self.idx(op)});")
            return
        nbytes = " + ".join(f"{op.dst.name}_bytes" for op in loads)
        w(f"tc::produce<STAGES>(ring, cursor, {expr(lp.count)}, {nbytes},")
        w.depth += 1
        vectors = self.vector_loads(lp)
        if vectors:
            with w.block(f"[&](int {v}, int stage, tc::mbarrier& full) {{  // its vectors, before the tiles' "
                         f"bytes are announced", "},"):
                for op in vectors:
                    w(f"tc::load_bulk({op.dst.name}_stages[stage], {op.srcs[0].name}, full, {self.idx(op)});")
        with w.block(f"[&](int {v}, int stage, tc::mbarrier& full) {{  // the loads of iteration {v}", "});"):
            for op in loads:
                t = op.dst.name
                load = ("tc::load_tma_multicast_rows<CLUSTER>" if t in self.s.multicast_rows else
                        "tc::load_tma_multicast<CLUSTER>" if t in self.s.multicast else "tc::load_tma")
                w(f"{load}({t}_stages[stage], &{t}_tma, full, {self.idx(op)});")
        w.depth -= 1

    @contextlib.contextmanager
    def tiles(self):
        """The persistent grid's walk over tl.grid's tiles in the order a launch of them would start (tl.grid's
        group; a 2-D grid without one in groups of GROUP_ROWS rows, so that concurrent tiles share A rows and B
        columns in L2), the blocks taking each round's tiles in reverse every other round (tc::persistent_tile);
        or the block's one tile."""
        w = self.w
        if not self.s.persistent:
            yield
            return
        walk = "tc::persistent_tile<CLUSTER>" if self.s.cluster > 1 else "tc::persistent_tile"
        with w.block(f"for (int round = 0, tile = {walk}(0); tile < tiles; tile = {walk}(++round)) {{"):
            n = len(self.k.grid)
            group = expr(self.k.group) if self.k.group is not None else str(schedules.GROUP_ROWS) if n == 2 else None
            # without a group (1-D, or 3-D) x fastest; with one, the tile's place within its z slice is the order
            ids = ("tile",) if n == 1 else ("tile % grid[0]", "tile / grid[0] % grid[1]", "tile / (grid[0] * grid[1])")
            order = "tile % (grid[0] * grid[1])" if n == 3 else "tile"
            cluster = self.s.cluster > 1   # the walk's tile is the cluster's: its blocks take rows of tiles in turn
            for line in cgen.block_indices(ids[:n], group, ["grid[0]", "grid[1]"], order,
                                           x="cluster_x" if cluster else "block_x"):
                w(line)
            if cluster:
                w("const int block_x = cluster_x * CLUSTER + tc::cluster_rank();")
            yield

    def loads(self, lp: ir.Loop) -> list[ir.Op]:
        return [s for s in lp.body if isinstance(s, ir.Op) and s.name == "load" and s.dst in self.piped]

    def vector_loads(self, lp: ir.Loop) -> list[ir.Op]:
        return [s for s in lp.body if any(s is op for op in self.ring_vectors)]

    def declare_shared(self):
        w = self.w
        shared = [t for t in self.k.tiles if isinstance(t, (ST, SV))]
        if shared:
            w("extern __shared__ unsigned char smem_base[];")
            w("tc::smem_allocator smem(smem_base);")
        for t in shared:
            if t in self.piped:
                w(f"auto* {t.name}_stages = smem.alloc<{tile_type(t)}>(STAGES);  // one per pipeline stage")
            elif t in self.resident_tiles:
                w(f"auto* {t.name}_slots = smem.alloc<{tile_type(t)}>(RESIDENT_SLOTS);  // the producer's TMA fills "
                  f"them in turn")
            else:
                w(f"auto& {t.name} = *smem.alloc<{tile_type(t)}>();")
        for t, gl in {op.dst: op.srcs[0] for op in self.ring_vectors}.items():
            w(f"auto* {t.name}_stages = smem.alloc<tc::sv<{ctype(gl.dtype)}, {t.length}>>(STAGES);"
              f"  // {t.name}, brought through the ring")

    def declare_regs(self):
        for t in self.k.tiles:
            if t.name in self.s.col_split:
                self.w(f"tc::rt_cols<{ctype(t.dtype)}, {t.rows}, {t.cols}, NUM_WARPS> {t.name};"
                       f"  // too few rows for every warpgroup: each takes {t.cols * 4 // self.s.warps} of its columns")
            elif isinstance(t, (RT, RV)) and t not in self.at_use and not any(t is m.dst for m in self.fused.values()):
                self.w(f"{tile_type(t)} {t.name};")
        for t, (raw, dtype) in self.raw_tiles.items():
            self.w(f"tc::rt_raw<{ctype(dtype)}, {t.rows}, {t.cols}, NUM_WARPS> {raw};  // {t.name} "
                   f"as loaded, converted where first used: the loads after it go out first")

    # ---- statements -----------------------------------------------------------------------------------------

    def stmts(self, body):
        units, skip = [], None   # (statement, fresh)
        for s, after in zip(body, list(body[1:]) + [None]):
            if s is skip:
                continue
            if isinstance(s, ir.Op) and s.name == "zero" and isinstance(after, ir.Op) and after.name == "mma" \
                    and after.dst is s.dst and after.srcs[2] is s.dst:
                units.append((after, True))   # zero then accumulate: the mma ignores the old contents
                skip = after
            else:
                units.append((s, False))
        units = [(s, fresh) for s, fresh in units if self.written(s)]
        # Adjacent independent mma ops are issued back to back (the tensor cores run them in a row) and each is
        # waited for only where a later statement needs it: the ops in between overlap the rest of the batch.
        pending = []   # mma ops in flight, oldest first (their wgmma groups complete in order)

        def settle(n):   # wait for the oldest n
            if not n:
                return
            self.w(f"tc::mma_wait<{len(pending) - n}>();")
            for op in pending[:n]:
                self.w(f"tc::mma_fence({op.dst.name});")
            del pending[:n]
            self.ring_release(pending)

        i = 0
        while i < len(units):
            s, fresh = units[i]
            group = [] if self.in_flight else _independent_mmas(units[i:], pending)
            if pending and not group:   # (a group that touches none of those in flight joins them unwaited)
                if isinstance(s, ir.Loop) or s.name == "mma":
                    settle(len(pending))   # (a block-level mma waits for every group of its warpgroup)
                else:
                    settle(max((j + 1 for j, m in enumerate(pending) if _needs(s, m)), default=0))
            self.ring_wait(group if len(group) > 1 else [s])
            if isinstance(s, ir.Loop):
                outer, self.partial_now = self.partial_now, self.partial.get(id(s), [])
                self.loop(s)
                for v in self.partial_now:
                    self.w(f"tc::row_sum_lanes({v.name});  // the loop kept per-lane partial sums: add a row's lanes")
                self.partial_now = outer
            elif len(group) > 1 or group and (pending or _stays_in_flight(group[0][0], units[i + 1:])):
                for op, fr in group:
                    self.op(op, fresh=fr, wait=False)
                pending += [op for op, _ in group]
                self.ring_release(pending, [op for op, _ in group])
                i += len(group)
                continue
            elif any(s is op for op in self.resident):   # the producer loads it: this tile's slot, read from here on
                t = s.dst
                self.w(f"auto& {t.name} = {t.name}_slots[{t.name}_cursor.slot];  // the producer's TMA fills it")
                self.ring_reads[t] = [u for u, _ in units[i + 1:] if _reads(u, t)]
            else:
                self.op(s, fresh)
            self.ring_release(pending, [s])
            i += 1
        if pending:
            settle(len(pending))

    def written(self, s) -> bool:
        """Whether statement s is written out as itself (not computed inside another op, or folded away)."""
        return not any(s is m for m in self.fused.values()) and \
            self.scaled.get(id(s), ("",))[0] not in ("drop", "done")

    def ring_wait(self, stmts):
        """Per-tile rings: before the first statement that reads a tile, wait for its slot's bytes."""
        for t, readers in self.ring_reads.items():
            if t not in self.ring_waited and any(r is s for r in readers for s in stmts):
                own = t in self.resident_tiles   # a resident tile's ring has a cursor of its own
                self.w(f"tc::stage_wait({t.name}_ring, {t.name + '_' if own else ''}cursor);")
                self.ring_waited.add(t)

    def ring_release(self, pending, written=()):
        """Per-tile rings: once the last statement reading a tile is written and no mma in flight reads it, every
        warp frees the tile's slot (a resident tile's cursor then moves on to its next slot; one loaded once a block
        keeps it)."""
        for t, readers in list(self.ring_reads.items()):
            readers[:] = [r for r in readers if not any(r is s for s in written)]
            if not readers and not any(x is t for op in pending for x in op.srcs):
                if t in self.refilled:
                    self.w(f"tc::stage_release({t.name}_ring, {t.name}_cursor.slot);  // its last reader is done")
                    self.w(f"{t.name}_cursor.advance();")
                elif t not in self.resident_tiles:
                    self.w(f"tc::stage_release({t.name}_ring, stage);  // its last reader is done: refill it")
                del self.ring_reads[t]
                self.ring_waited.discard(t)

    def loop(self, lp: ir.Loop):
        w, v = self.w, lp.var.name
        loads = self.loads(lp)
        # a pipeline with nothing to stage (its tiles loaded straight into registers) is a plain loop: tc::pipeline's
        # cp.async waits and barriers would hold every step's loads back for nothing
        if lp.kind == "range" or not (loads or self.s.warp_specialized or self.vector_loads(lp)):
            with w.block(f"for (int {v} = 0; {v} < {expr(lp.count)}; ++{v}) {{"):
                self.reads = None  # from the second iteration on, the last one's reads precede
                self.stmts(lp.body)
            self.reads = None
            return
        rest = [s for s in lp.body if not any(s is op for op in loads)]
        if not self.s.warp_specialized:   # (there the ring orders the stages, and every other write to shared
            self.sync()                   # memory is followed by a barrier already: op below)
        accumulators = schedules.accumulators(rest) if self.s.warp_specialized else None
        ringed = [t for t in {op.dst: None for op in loads} if t.name in self.s.rings]
        split = schedules.deferred(rest, ringed) if self.s.deferred and ringed else None
        if split:
            self.consume_deferred(lp, split)
            return
        if accumulators:   # mma groups stay in flight across steps (warp_specialized.cuh)
            cluster = ", CLUSTER" if self.s.cluster > 1 else ""
            w(f"tc::consume_overlapped<STAGES{cluster}>(ring, cursor, {expr(lp.count)},")
        elif self.s.rings:   # a ring per tile: the body waits for and frees each tile's slot (stmts)
            w(f"tc::each_stage<STAGES>(cursor, {expr(lp.count)},")
        elif self.s.warp_specialized:   # the producer issues the loads (warp_specialized above)
            w(f"tc::consume<STAGES>(ring, cursor, {expr(lp.count)},")
        else:
            w(f"tc::pipeline<STAGES>({expr(lp.count)},")
        w.depth += 1
        if not self.s.warp_specialized:
            with w.block(f"[&](int {v}, int stage) {{  // issue the loads of iteration {v}", "},"):
                for op in loads:
                    w(f"tc::load_async({op.dst.name}_stages[stage], {op.srcs[0].name}, {self.idx(op)});")
        turns = bool(accumulators) and self.s.groups > 1   # consumer groups: the ring passes on after the waits
        with w.block(f"[&](int {v}, int stage) {{  // compute on iteration {v}",
                     "}, [&] {  // every slot waited for: the next round's group may take the ring" if turns else "});"):
            for t in {op.dst: None for op in loads}:
                w(f"auto& {t.name} = {t.name}_stages[stage];")
            # tc::pipeline's barrier precedes every compute step; tc::consume's steps have none (the ring's
            # mbarriers order its stages alone): an exchange's buffers may still be read there
            self.reads = set(EXCHANGE_BUFFERS) if self.s.warp_specialized else set()
            self.in_flight = bool(accumulators)
            self.ring_reads.update({t: [op for op in rest if isinstance(op, ir.Op) and self.written(op)
                                        and any(x is t for x in op.srcs)]
                                    for t in {op.dst: None for op in loads} if t.name in self.s.rings})
            self.stmts(rest)
            self.in_flight = False
        if turns:
            w("    if (tc::persistent_tile(round + 1) < tiles) tc::group_turn_pass();")
            w("});")
        w.depth -= 1
        for t in accumulators or ():
            w(f"tc::mma_fence({t.name});  // its last mma group is done: it may be read")
        # tc::pipeline ends with a barrier; tc::consume does not (warps leave it at their own pace)
        self.reads = None if self.s.warp_specialized else set()

    def consume_deferred(self, lp: ir.Loop, split: schedules.Deferred):
        """The attention-shaped body as four lambdas (schedules.Deferred), its last mma behind the next step's
        first: first and last issue without waiting; early runs once first's group is done (its tile's slot freed
        first), late once last's is (it waits for last's tile of this step, which the next step's last reads)."""
        w, v = self.w, lp.var.name
        a, b = split.first[1].srcs[1], split.last.srcs[1]   # the tiles of the two rings
        w(f"tc::consume_deferred<STAGES, {'true' if self.s.turns else 'false'}>(cursor, {expr(lp.count)}, "
          f"{b.name}_ring,{'  // the two consumer warpgroups issue in turns' if self.s.turns else ''}")
        w.depth += 1
        parts = [(f"the first mma of iteration {v}", split.first, [f"tc::stage_wait({a.name}_ring, cursor);"], [],
                  a, "},"),
                 (f"the last mma of iteration {v} (stage: that iteration's)", (split.last,), [], [], b, "},"),
                 (f"once the first is done: what needs neither the last's accumulator nor its A, on iteration {v}",
                  split.early, [f"tc::mma_fence({split.first[1].dst.name});",
                                f"tc::stage_release({a.name}_ring, stage);"], [], None, "},"),
                 (f"once the last mma of iteration {v} - 1 is done: the rest of iteration {v}", split.late,
                  [f"tc::mma_fence({split.last.dst.name});"], [f"tc::stage_wait({b.name}_ring, cursor);"], None,
                  "});")]
        for what, ops, head, tail, tile, close in parts:
            with w.block(f"[&](int {v}, int stage) {{  // {what}", close):
                if tile is not None:
                    w(f"auto& {tile.name} = {tile.name}_stages[stage];")
                for line in head:
                    w(line)
                self.reads = set(EXCHANGE_BUFFERS)   # no block barrier between the consumers' steps
                self.in_flight = tile is not None   # the two mma lambdas issue and do not wait
                self.stmts(list(ops))
                self.in_flight = False
                for line in tail:
                    w(line)
        w.depth -= 1
        w(f"tc::mma_fence({split.last.dst.name});  // its last mma group is done: it may be read")
        self.reads = None

    def sync(self, tile=None, always=False):
        """A block barrier, where one is needed: before a write to `tile` (None: to any shared tile) that a warp may
        still be reading, and always after a write, which every warp must see."""
        if always or self.reads is None or (tile.name in self.reads if tile is not None else self.reads):
            self.w("tc::sync();")
            self.reads = set()

    def exchange_slot(self, op: ir.Op) -> int:
        """Which of the two buffers of a whole-tile reduction or logsumexp2 (ops.cuh) op writes: one that no warp
        may still be reading (not read since the last barrier), after a barrier where both may be."""
        if not (ir.exchange_floats(op) and self.s.warps > 1):
            return 0   # no exchange across the warps: no buffer
        free = [i for i, b in enumerate(EXCHANGE_BUFFERS) if self.reads is not None and b not in self.reads]
        if not free:
            self.sync(always=True)
            free = [0]
        return free[0]

    def idx(self, op) -> str:
        idx = ["0"] * (4 - len(op.attrs["idx"])) + [expr(i) for i in op.attrs["idx"]]
        return "{" + ", ".join(idx) + "}"

    def op(self, op: ir.Op, fresh: bool = False, wait: bool = True):
        w = self.w
        dst, srcs = op.dst, op.srcs
        writes_shared = isinstance(dst, (ST, SV))
        if writes_shared:
            self.sync(dst)  # no warp may still be reading the tile's old contents
        for t in self.raw_copy.get(id(op), ()):
            w(f"tc::copy({t.name}, {self.raw_tiles[t][0]});")
        name = op.name
        st = self.s.store
        slot = self.exchange_slot(op) if name.startswith("tile_") or name == "logsumexp2" else None
        tmpl = "" if slot is None else f"<{slot}>"
        staged = False   # set where the op goes through a shared tile of its own (staging, a ring's stage)
        if st and op is self.epilogue:   # the epilogue's store (schedules.tma_store)
            w(f"tc::store_tma<{self.s.store_buffers}>(&{st.map}, {srcs[0].name}_staging, {srcs[0].name}, "
              f"{self.idx(op)});")
            staged = True
        elif name == "atomic_add" and self.s.reduce and srcs[0].name == self.s.reduce_src:
            t = srcs[0].name   # through its staging tile and TMA (schedules.tma_reduce)
            w(f"tc::atomic_add_tma<{self.s.reduce_buffers}>(&{self.s.reduce.map}, {t}_staging, {t}_turn, {t}, "
              f"{self.idx(op)});")
            staged = True
        elif id(op) in self.fused:   # its product, computed here a slice at a time (schedules.sliced_adds)
            m = self.fused[id(op)]
            ta, tb = ("true" if m.attrs[x] else "false" for x in ("trans_a", "trans_b"))
            w(f"tc::atomic_add_mma<{ta}, {tb}, NUM_WARPS>({dst.name}, {m.srcs[0].name}, {m.srcs[1].name}, "
              f"{self.idx(op)});  // {srcs[0].name}, never whole in registers")
            staged = True
        elif any(op is x for x in self.ring_vectors):   # the producer brought it into this stage
            at_use = f"// {dst.name}: read from {dst.name}_stages[stage] where it is used (shared_vectors)"
            w(at_use if dst in self.at_use else f"tc::load_stage({dst.name}, {dst.name}_stages[stage]);")
            staged = True
        elif name == "store_sum":
            src, parts, arrivals, part = srcs
            w(f"tc::store_sum<{op.attrs['count']}>({dst.name}, {src.name}, {self.idx(op)}, {parts.name}, "
              f"{arrivals.name}, {expr(part)});")
        elif name in ("load", "store", "atomic_add"):
            src = srcs[0]
            args = [dst.name, src.name] + ([self.idx(op)] if isinstance(dst, GL) or isinstance(src, GL) else [])
            runs = name != "atomic_add" and {dst.name, src.name} & set(self.s.runs)   # column_order.free_tiles
            args[0] = self.raw_load.get(id(op), args[0])
            w(f"tc::{name}{'_runs' if runs else ''}({', '.join(args)});")
        elif name == "mma":
            ta, tb = op.attrs["trans_a"], op.attrs["trans_b"]
            args = [dst.name, srcs[0].name, srcs[1].name, "tc::zeros" if fresh else srcs[2].name]
            args += ["tc::no_wait"] if self.in_flight or not wait else []
            w(f"tc::mma_{'At' if ta else 'A'}{'Bt' if tb else 'B'}({', '.join(args)});")
        elif name == "zero":
            w(f"tc::zero({dst.name});")
        elif name == "fill":
            w(f"tc::fill({dst.name}, {expr(srcs[0])});")
        elif name in ("causal_mask", "bounds_mask"):
            order = "<tc::runs_order>" if name == "bounds_mask" and dst.name in self.s.runs else ""
            w(f"tc::{name}{order}({dst.name}, {srcs[0].name}, {', '.join(expr(s) for s in srcs[1:])});")
        elif id(op) in self.scaled:   # rewrites.scaled_exp2: on the unscaled tile, the scale folded in
            role, c = self.scaled[id(op)]
            args = [dst.name, srcs[0].name, expr(c)] + [x.name for x in srcs[1:] if x is not None]
            poly = f"<{self.s.exp2_poly}>" if role == "exp" and self.s.exp2_poly else ""   # part on the FMA pipe
            w(f"tc::{'row_max_scaled' if role == 'max' else 'exp2_scaled_sub_row' + poly}({', '.join(args)});")
        elif id(op) in self.unit:
            w(f"tc::mul_row_unless_ones({dst.name}, {srcs[1].name});  // a warp whose rows kept their max skips it")
        elif name == "row_sum" and any(dst is v for v in self.partial_now):
            w(f"tc::row_sum_partial({dst.name}, {srcs[0].name}, {srcs[1].name});  // this lane's columns only")
        elif name.startswith(("row_", "col_", "tile_")) and srcs[1:] and srcs[1] is None:
            w(f"tc::{name}{tmpl}({dst.name}, {srcs[0].name});")
        else:  # maps, reductions with an accumulator, broadcasts, copy
            args = [f"{s.name}_stages[stage]" if any(s is t for t in self.at_use) else
                    s.name if hasattr(s, "name") and not isinstance(s, ir.Expr) else expr(s) for s in srcs]
            w(f"tc::{name}{tmpl}({dst.name}, {', '.join(args)});")
        # An exchange across the warps holds a block barrier (ops.cuh): past it every warp's earlier reads are
        # done; a two-buffer one's reads of its buffer come after it
        if ir.exchange_floats(op) and self.s.warps > 1:
            self.reads = set() if slot is None else {EXCHANGE_BUFFERS[slot]}
        elif staged:
            self.reads = None
        elif self.reads is not None:
            self.reads |= {x.name for x in srcs if isinstance(x, (ST, SV))}
        if writes_shared:
            self.sync(always=True)  # the new contents are visible to every warp


# The two shared buffers of the exchanges that take turns (ops.cuh, tile_reduce), as the emitter's read set
# names them beside the tiles (no tile name has a space)
EXCHANGE_BUFFERS = ("exchange buffer 0", "exchange buffer 1")


def _reads(s, t) -> bool:
    """Whether statement s (a loop: any op in it) reads tile t."""
    return any(x is t for op in schedules.ops([s]) for x in op.srcs)


def _needs(s: ir.Op, m: ir.Op) -> bool:
    """Whether s must wait for mma m: it touches m's result or overwrites one of m's operands."""
    return any(x is m.dst for x in (s.dst, *s.srcs)) or any(s.dst is x for x in m.srcs[:2])


def _independent_mmas(units, pending=()) -> list:
    """The mma ops at the head of units that touch none of one another's results, nor those of the mma ops in
    flight (pending): their wgmma groups may be in flight together (accumulators differ, no operand is another's
    result)."""
    group = []
    for op, fresh in units:
        if not (isinstance(op, ir.Op) and op.name == "mma") or \
                any(_needs(op, g) for g in (*pending, *(g for g, _ in group))):
            break
        group.append((op, fresh))
    return group


def _stays_in_flight(m: ir.Op, rest) -> bool:
    """Whether a lone mma is left in flight: more mma ops follow in the same statement list, and the statements up
    to the next one neither read its result nor overwrite its operands (attention backward's dV, issued before
    the dS^T arithmetic and the barrier around dS^T's shared tile, as FlashAttention-3 does). A last mma, or one
    that the next statements need, waits for its own group at once, as before."""
    for s, _ in rest:
        if isinstance(s, ir.Loop):
            return False
        if s.name == "mma":
            return True
        if _needs(s, m):
            return False
    return False
