"""IR -> HIP C++ over the tiles_hip header library (HipKittens style), for gfx942 and gfx950.

The generated kernel reads like a hand-written one: layouts and LDS tile types at the top, the kernel's
globals as (pointer, extents) pairs, LDS tiles carved from one dynamic arena, register tiles as this wave's
rows, one header call per IR op, the schedule's loop around a pipelined body, and a block barrier wherever
LDS changes hands between waves.

Launch interface (shared by the HIP runtime and the CPU emulator), in order: per global ``T* NAME_data``
and ``tiles_hip::gl_dims NAME_dims`` (batch, depth, rows, cols, then the strides of batch, depth and rows
in elements, 7 ints), per scalar an ``int`` or ``float``; dynamic LDS of ``lds_bytes``; ``threads`` per block.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tiles import cgen, column_order, dtypes, ir, rewrites
from tiles.dsl import TileError
from tiles.types import ALIGN, GL, RT, RV, ST, SV

from . import schedules, swizzle

DIRECT_LDS_BYTES = {"gfx942": 4, "gfx950": 16}   # a direct global->LDS load's bytes per lane (arch.hpp)
CTYPE = {"bf16": "bf16", "f16": "f16", "f32": "float", "i32": "int", "fp8e4m3": "fp8e4m3", "fp8e5m2": "fp8e5m2"}
_RESERVED = {"WAVES", "VM_PER_STAGE", "block_x", "block_y", "block_z", "blk", "gl", "st", "rt", "rv", "cv", "acc",
             "opa", "red_scratch", "xpose_scratch", "n_iter", "zero", "fill", "copy", "load", "store", "mma", "exp", "exp2", "log",
             "log2", "abs", "neg", "add", "sub", "mul", "div", "max", "min", "arch", "int", "float", "bf16", "f16",
             "for", "if", "else", "const", "auto", "do", "while", "return", "struct", "template", "using",
             "namespace", "new", "delete", "this", "true", "false", "default", "case", "switch", "char", "long",
             "short", "double", "void", "signed", "unsigned", "static", "operator", "union", "enum", "inline",
             *ir.UNARY, *ir.BINARY, "where", "elem_at"}
_UNARY = set(ir.UNARY)
_BINARY = set(ir.BINARY)


@dataclass
class Generated:
    name: str
    source: str
    kernel: ir.Kernel
    target: str
    plan: schedules.Plan
    lds_bytes: int
    params: list                    # (ctype, name, kind, ir param): kind "data" | "dims" | "scalar"
    mfma: dict = field(default_factory=dict)   # intended instruction -> MFMAs per iteration of the main loop

    @property
    def threads(self) -> int:
        return self.plan.threads


def mfma_k(target: str, dtype: dtypes.DType, m: int) -> int:
    if dtype.name.startswith("fp8"):
        return 32 if m == 16 else 16
    return (32 if m == 16 else 16) if target == "gfx950" else (16 if m == 16 else 8)


def op_k(target: str, op: ir.Op, m: int) -> int:
    """K of the MFMA an mma op runs on: CDNA4's block-scaled 16x16x128 for fp8 from LDS when K allows."""
    a = op.srcs[0]
    kdim = a.rows if op.attrs["trans_a"] else a.cols
    if target == "gfx950" and a.dtype.name.startswith("fp8") and m == 16 and isinstance(a, ST) and kdim % 128 == 0:
        return 128
    return mfma_k(target, a.dtype, m)


def mfma_name(target: str, dtype: dtypes.DType, m: int, k: int | None = None) -> str:
    k = k or mfma_k(target, dtype, m)
    if k == 128:
        return "v_mfma_scale_f32_16x16x128_f8f6f4"
    suffix = {"fp8e4m3": "fp8_fp8", "fp8e5m2": "bf8_bf8"}.get(dtype.name, dtype.name)
    return f"v_mfma_f32_{m}x{m}x{k}_{suffix}"


def generate(k: ir.Kernel, target: str) -> Generated:
    return _Emitter(_row_copies(k, target), target).run()


def _row_copies(k: ir.Kernel, target: str) -> ir.Kernel:
    """CDNA3: a 16-bit shared tile loaded once from global memory outside every loop, read by MMAs both along its
    rows and down its columns, would be stored in row pairs (_Emitter._paired: a row run is a 16-byte read and a
    v_perm per two elements). Where its row reads are all the A operand over the MMA's own rows (attention
    backward's K in S^T = K Q^T), those MMAs take a register copy in the A layout instead (loaded once, as
    _register_operands does for a tile read only so), and the shared tile, then read only down its columns, is
    stored transposed: one ds_read per K run for both. The kernel is rebuilt with the copy; k is left as it is."""
    if target != "gfx942":
        return k
    ops = list(k.walk())
    swap, after = {}, {}   # mma op -> its copy of A; top-level load op -> the copy's load
    for t in k.tiles:
        if not isinstance(t, ST) or t.dtype.bits != 16:
            continue
        writers = [(op, loops) for op, loops in ops if op.dst is t]
        readers = [op for op, _ in ops if t in op.srcs]
        if (len(writers) != 1 or writers[0][1] or writers[0][0].name != "load" or not isinstance(writers[0][0].srcs[0], GL)
                or not all(op.name == "mma" for op in readers)):
            continue
        rows = [op for op in readers if (op.srcs[0] is t and not op.attrs["trans_a"]) or (op.srcs[1] is t and op.attrs["trans_b"])]
        a_rows = [op for op in rows if op.srcs[0] is t and op.srcs[1] is not t and op.dst.rows == t.rows]
        if not a_rows or len(a_rows) != len(rows) or len(rows) == len(readers):
            continue
        copy = RT(name=f"{t.name}_a", dtype=t.dtype, rows=t.rows, cols=t.cols)
        w = writers[0][0]
        after[w] = ir.Op("load", copy, w.srcs, dict(w.attrs), w.loc)
        swap.update({op: copy for op in a_rows})
    if not swap:
        return k

    def rebuild(stmts):
        out = []
        for s in stmts:
            if isinstance(s, ir.Loop):
                out.append(ir.Loop(s.kind, s.var, s.count, rebuild(s.body), s.stages, s.loc))
            elif s in swap:
                out.append(ir.Op(s.name, s.dst, (swap[s], *s.srcs[1:]), s.attrs, s.loc))
            else:
                out += [s] + ([after[s]] if s in after else [])
        return out
    return ir.Kernel(k.name, k.params, k.consts, k.options, k.grid, k.tiles + [a.dst for a in after.values()],
                     rebuild(k.body), k.checks, k.loc, k.broadcast, k.group)


class _Emitter:
    def __init__(self, k: ir.Kernel, target: str):
        self.k, self.target = k, target
        self.names = {}
        for t in list(k.params) + list(k.tiles):
            n = t.name
            self.names[id(t)] = n + "_" if n in _RESERVED else n
        self.staged = {t for lp in schedules._pipelines(k.body) for t in schedules.staged_tiles(lp)}
        self.in_regs = self._register_operands()
        self.layout = self._layouts()
        self.plan = schedules.plan(k, target, self.lds_bytes)
        self.quarter = self._quarter_accumulators()
        self.m = self.plan.mfma_m
        self.wave_cols = self._wave_grid()
        self._check_fragments()
        # tiles/rewrites.py: a positive scale folded into exp2's argument (one v_pk_fma_f32 a pair of elements)
        self.scaled = rewrites.scaled_exp2(k.body, k.checks) if k.options.get("rewrites", True) else {}
        self.mfma_count = None   # MFMA instruction -> count per iteration of the last pipelined loop
        self.mix = None          # the MMAs' cluster policy while the interleave's loop body is emitted

    # ------------------------------------------------------------ names and types
    def n(self, t) -> str:
        return self.names[id(t)]

    def expr(self, e, loop_shift: dict | None = None) -> str:
        def names(x):
            if isinstance(x, ir.LoopVar) and loop_shift and x.name in loop_shift:
                return loop_shift[x.name]
            if isinstance(x, ir.Dim):
                return f"{self.names.get(id(self._param(x.arg)), x.arg)}.{ir.Dim.NAMES[x.axis]}"
            if isinstance(x, ir.ScalarArg):
                return self.names.get(id(self._param(x.name)), x.name)
            return cgen.default_names(x)
        return cgen.c_expr(ir.as_expr(e), names)

    def _param(self, name):
        return next((p for p in self.k.params if getattr(p, "name", None) == name), None)

    def _register_operands(self) -> set:
        """Shared tiles held in registers instead (attention's Q): loaded once from global memory outside any
        loop and read only as the A operand of MMAs along their rows, over the MMA's own rows (so each wave
        keeps its rows in the A layout), so that no MMA re-reads them from LDS every step."""
        keep = set()
        ops = list(self.k.walk())
        for t in self.k.tiles:
            if not isinstance(t, ST) or t in self.staged or t.dtype.bits != 16:
                continue
            writers = [(op, loops) for op, loops in ops if op.dst is t]
            readers = [op for op, _ in ops if t in op.srcs]
            if (len(writers) == 1 and not writers[0][1] and writers[0][0].name == "load"
                    and isinstance(writers[0][0].srcs[0], GL) and readers
                    and all(op.name == "mma" and op.srcs[0] is t and op.srcs[1] is not t and not op.attrs["trans_a"]
                            and op.dst.rows == t.rows for op in readers)):
                keep.add(t)
        return keep

    def _layouts(self) -> dict:
        """Register tiles that feed an MMA's A take the MFMA A-operand layout ("a"); everything else the
        accumulator's ("c"), the accumulator of the transpose ("t", _acc_transposed) or, where no MMA is in their
        class, runs along the rows ("r4", "r8": _row_runs); A operands copied from a "t" tile take its K order
        ("a+"). A vector takes the layout of the tiles it meets."""
        lay = {}
        for op, _ in self.k.walk():
            if op.name == "mma" and (isinstance(op.srcs[0], RT) or op.srcs[0] in self.in_regs):
                lay[id(op.srcs[0])] = "a"
        for tid in self._acc_transposed(lay):
            lay[tid] = "t"
        if self.k.options.get("runs", True):
            lay.update(self._row_runs(lay))
        for op, _ in self.k.walk():
            if op.name == "copy" and lay.get(id(op.dst)) == "a" and lay.get(id(op.srcs[0])) == "t":
                lay[id(op.dst)] = "a+"
        for _ in range(2):
            for op, _ in self.k.walk():
                tiles = [t for t in (op.dst, *op.srcs) if isinstance(t, (RT, RV))]
                rts = [lay.get(id(t), "c") for t in tiles if isinstance(t, RT)]
                for t in tiles:
                    if isinstance(t, RV) and rts and op.name != "copy":
                        lay[id(t)] = rts[0]
        return lay

    def _fragment_cols(self, t) -> int:
        """Columns of one fragment of t's layout: the MFMA's M (accumulators), its K (A operands)."""
        kind = self.layout.get(id(t), "c")
        if kind in ("r4", "r8"):
            return 4 * int(kind[1])
        if kind in ("a", "a+"):
            dt = next((op.srcs[1].dtype for op, _ in self.k.walk() if op.name == "mma" and op.srcs[0] is t), None)
            return mfma_k(self.target, dt, self.m) if dt is not None else self.m
        return self.m

    def _check_fragments(self):
        """Every register tile (and column vector) a whole number of its layout's fragments along its columns, as
        the header's rt<> asserts (the plan checked the rows): mfma=32 makes 32-column fragments, which a tile of
        48 columns that 16x16 MFMAs take is not."""
        for t in self.k.tiles:
            if isinstance(t, RT) or t in self.in_regs:
                wc = self.wave_cols.get(id(t), 1)
                cols, what = t.cols // wc, f"its {t.cols // wc} columns" + (f" a wave ({wc} waves across)" if wc > 1 else "")
            elif isinstance(t, RV) and t.axis == "cols":
                cols, what = t.length, f"its {t.length} columns"
            else:
                continue
            frag = self._fragment_cols(t)
            if cols % frag:
                raise TileError(f"{t.name} ({t.type_str()}): {what} must be a multiple of the {frag}-column fragment of "
                                f"the {self.m}x{self.m} MFMA on {self.target} (mfma={self.m}); use mfma=16 or tiles of "
                                f"{frag}-column multiples", self.k.loc)

    def _wave_grid(self) -> dict:
        """Accumulators split over the waves in two dimensions: id -> waves along the columns (WC > 1). A
        register tile that MMAs write (A and B from LDS) and only fills, elementwise maps among such tiles and
        stores to global memory otherwise touch needs no wave's rows whole: each wave takes a (rows / WR) x
        (cols / WC) block, WR x WC = waves, the one with the fewest fragments per side, since an MMA reads
        one A fragment per row fragment and one B fragment per column fragment every K step (256 x 256 over
        8 waves: 64 x 128, 12 reads per 32 MFMAs, where 32 x 256 needs 18)."""
        ops = [op for op, _ in self.k.walk()]
        ok = {id(t) for t in self.k.tiles if isinstance(t, RT) and self.layout.get(id(t), "c") == "c"
              and any(op.name == "mma" and op.dst is t for op in ops)}

        def allowed(op, t) -> bool:
            tiles = [x for x in (op.dst, *op.srcs) if isinstance(x, (RT, RV, ST, SV)) or x in self.in_regs]
            if op.name == "mma":
                a, b, c = op.srcs
                return (t is op.dst or t is c) and all(isinstance(x, ST) and x not in self.in_regs for x in (a, b)) \
                    and id(op.dst) in ok and id(c) in ok
            if op.name in ("zero", "fill"):
                return True
            if op.name in ("store", "atomic_add", "store_sum"):
                return isinstance(op.dst, GL)
            if op.name in _UNARY or op.name in _BINARY or op.name == "where":
                return all(isinstance(x, RT) and id(x) in ok for x in tiles)
            return False
        changed = True
        while changed:
            changed = False
            for t in self.k.tiles:
                if id(t) in ok and not all(allowed(op, t) for op in ops if t is op.dst or t in op.srcs):
                    ok.discard(id(t))
                    changed = True
        out, w, m = {}, self.plan.waves, self.plan.mfma_m
        for t in self.k.tiles:
            if id(t) in ok:
                fits = [c for c in range(1, w + 1) if w % c == 0 and t.rows % (w // c * m) == 0 and t.cols % (c * m) == 0]
                if not fits:   # not whole fragments however the waves split it: _check_fragments says so
                    continue
                wc = min(fits, key=lambda c: (t.rows * c // w + t.cols // c, c))
                if wc > 1:
                    out[id(t)] = wc
        return out

    def _row_runs(self, lay) -> dict:
        """Tiles held as runs along their rows (row_runs<16, RUN>, layout.hpp: lane l holds row l % 16 and RUN
        consecutive columns): each class of tiles and vectors that ops tie together, copies included, that a load
        or a store touches and no MMA does (option runs, default on). A row kernel's tile in the accumulator
        layout holds one column a lane, so a 16-bit element is a dword load (or an LDS read) of its own and a row
        reduction crosses four lane bits; in runs a lane moves 16 bytes an access (global.hpp, runs; a ds_read_b128
        from a shared tile) and a row reduction crosses two. RUN 8 (16 bytes of a 16-bit global) where every
        tile's and column vector's columns are whole 32-column fragments, else 4."""
        classes = column_order.Classes()
        for op, _ in self.k.walk():
            classes.join(id(t) for t in (op.dst, *op.srcs) if isinstance(t, (RT, RV)))
        members = classes.members(t for t in self.k.tiles if isinstance(t, (RT, RV)))
        accessed, bad = set(), set()
        for op, _ in self.k.walk():
            operands = (op.dst, *op.srcs)
            tiles = [t for t in operands if isinstance(t, (RT, RV))]
            if not tiles:
                continue
            root = classes.find(id(tiles[0]))
            if op.name == "mma":
                bad.add(root)
            elif op.name in ("load", "store") and isinstance(tiles[0], RT):
                accessed.add(root)
        out = {}
        for root in accessed - bad:
            ts = members[root]
            if any(lay.get(id(t), "c") != "c" for t in ts):
                continue
            cols = [t.cols for t in ts if isinstance(t, RT)] + [t.length for t in ts if isinstance(t, RV) and t.axis == "cols"]
            run = next((r for r in (8, 4) if all(c % (4 * r) == 0 for c in cols)), None)
            if run:
                out.update({id(t): f"r{run}" for t in ts})
        return out

    def _acc_transposed(self, lay) -> set:
        """Register tiles held as the accumulator of their transpose: each group of tiles and vectors that ops
        other than copies tie together, where one of them is copied into an A operand (attention's S into P).
        Computed as D^T = B^T A^T, a 16-bit MMA's accumulator holds in each lane one row and columns in runs of
        four, which is the A operand's map: the copy then stays in the lane (no ds_bpermute) where the
        accumulator's map would need a 4x4 transpose across lanes. Groups holding an A operand, or the
        accumulator of an fp8 MMA, keep the plain layout."""
        classes = column_order.Classes()
        for op, _ in self.k.walk():
            if op.name != "copy":
                classes.join(id(t) for t in ((op.dst, op.srcs[2]) if op.name == "mma" else (op.dst, *op.srcs))
                             if isinstance(t, (RT, RV)))
        find = classes.find
        members = classes.members(t for t in self.k.tiles if isinstance(t, (RT, RV)))
        wanted = {find(id(op.srcs[0])) for op, _ in self.k.walk() if op.name == "copy"
                  and isinstance(op.srcs[0], RT) and lay.get(id(op.dst)) == "a" and lay.get(id(op.srcs[0]), "c") == "c"}
        bad = {find(id(op.dst)) for op, _ in self.k.walk() if op.name == "mma" and op.srcs[0].dtype.bits != 16}
        out = set()
        for root in wanted - bad:
            if all(lay.get(id(t), "c") == "c" for t in members[root]):
                out |= {id(t) for t in members[root]}
        return out

    def lay(self, t) -> str:
        kind = self.layout.get(id(t), "c")
        if kind in ("a", "a+"):
            dt = next(op.srcs[1].dtype for op, _ in self.k.walk() if op.name == "mma" and op.srcs[0] is t)
            order = ", true" if kind == "a+" else ""
            return f"opa<{self.m}, {mfma_k(self.target, dt, self.m)}{order}>"
        if kind in ("r4", "r8"):
            return f"row_runs<16, {kind[1]}>"
        return f"acc_t<{self.m}>" if kind == "t" else f"acc<{self.m}>"

    def st_type(self, t) -> str:
        return f"{self.n(t)}_st"

    def lds_bytes(self, stages: int) -> int:
        total = 0
        for t in self.k.tiles:
            if isinstance(t, (ST, SV)) and t not in self.in_regs:
                total += self._bytes(t) * (stages if t in self.staged else 1)
        return total + self._scratch_bytes()

    @staticmethod
    def _bytes(t) -> int:
        """LDS bytes of one buffer of a shared tile or vector, rounded to 16 (as ring<> strides them)."""
        n = t.rows * t.cols if isinstance(t, ST) else t.length
        return -(-n * t.dtype.bits // 8 // 16) * 16

    def _scratch_floats(self) -> int:
        """Floats of one half of the reduction scratch: a float per column and wave (column reductions), a (max,
        sum) pair per wave (logsumexp2 of row vectors), a float per wave (whole-tile reductions)."""
        floats = max((ir.exchange_floats(op) for op, _ in self.k.walk()), default=0)
        return int(self.k.options.get("workers", schedules.WAVES[self.k.options.get("schedule", "plain")])) * floats

    def _scratch_bytes(self) -> int:
        """LDS of the exchanges across waves: two halves where exchanges take turns (_BarrierPlan), else one."""
        halves = 2 if any(_takes_turns(op) for op, _ in self.k.walk()) else 1
        return -(-4 * halves * self._scratch_floats() // 16) * 16 + self._xpose_bytes()

    def _scratch_of(self, op) -> str:
        """The reduction scratch, or the half of it the barrier plan gave op."""
        half = self.barriers.halves.get(id(op), 0) if _takes_turns(op) else 0
        return f"red_scratch + {half * self._scratch_floats()}" if half else "red_scratch"

    def _lds_copy(self, op) -> bool:
        """A copy into a 16-bit A operand from an accumulator-layout tile that goes through the wave's LDS and
        CDNA4's transposing read instead of ds_bpermute (16x16 fragments)."""
        d, src = op.dst, op.srcs[0] if op.srcs else None
        return (op.name == "copy" and self.target == "gfx950" and isinstance(d, RT) and isinstance(src, RT) and
                self.layout.get(id(d)) == "a" and self.layout.get(id(src), "c") == "c" and d.dtype.bits == 16 and
                int(self.k.options.get("mfma", 16)) == 16)

    def _xpose_bytes(self) -> int:
        """LDS of the layout-changing copies (each wave's copy of the tile; one copy at a time reuses it)."""
        return max((op.dst.rows * op.dst.cols * 2 for op, _ in self.k.walk() if self._lds_copy(op)), default=0)

    def _swizzle(self, t: ST) -> str:
        """Swizzle for the MFMA operand read the tile serves. Tiles read down their columns (B of mma_AB, A of
        mma_AtB: one element per read) stay unswizzled, so the reads' addresses are one base plus immediate
        offsets instead of an XOR per element; tiles no MMA reads stay unswizzled too. A stored row of more
        than one MFMA K step is kept in panels of one step (shared.hpp), each swizzled for the read."""
        elem = t.dtype.bits // 8
        e = self.m * mfma_k(self.target, t.dtype, self.m) // 64
        if self._paired(t):   # a stored row per two rows
            g, s, mask = swizzle.choose(self.target, t.rows // 2, 2 * t.cols * elem, self.m, e, elem, paired=True)
            return f"paired<{g}, {s}, {mask}>"
        tr = self._transposed(t)   # its stored rows are the columns the MMA reads
        if not tr and not self._mma_reads(t)[0]:
            return f"swizzle<{swizzle.granule(self.target, 16)}, 0, 0>"
        rows, row_bytes = (t.cols, t.rows * elem) if tr else (t.rows, t.cols * elem)
        panel = self._panel(t)
        g, s, mask = swizzle.choose(self.target, rows, panel or row_bytes, self.m, e, elem)
        return f"{'transposed' if tr else 'swizzle'}<{g}, {s}, {mask}{f', {panel}' if panel else ''}>"

    def _panel(self, t: ST) -> int:
        """Bytes of a stored row per panel (shared.hpp), 0 for whole rows: one MFMA K step of a tile MMAs read
        along its stored rows, where a row holds more."""
        elem = t.dtype.bits // 8
        tr = self._transposed(t)
        if self._paired(t) or not tr and not self._mma_reads(t)[0]:   # paired tiles keep whole stored rows
            return 0
        ks = [op_k(self.target, op, self.m) for op, _ in self.k.walk() if op.name == "mma" and t in op.srcs[:2]]
        if not ks:   # transposed for register loads only (_transposed): no K step to panel by
            return 0
        row_bytes, step = (t.rows if tr else t.cols) * elem, min(ks) * elem
        return step if row_bytes > step and row_bytes % step == 0 else 0

    def _mma_reads(self, t) -> tuple[bool, bool]:
        """Whether an MMA reads shared tile t along its rows (K contiguous), and down its columns."""
        rows = cols = False
        for op, _ in self.k.walk():
            if op.name == "mma":
                if op.srcs[0] is t:
                    cols, rows = cols or op.attrs["trans_a"], rows or not op.attrs["trans_a"]
                if op.srcs[1] is t:
                    cols, rows = cols or not op.attrs["trans_b"], rows or op.attrs["trans_b"]
        return rows, cols

    def _transposed(self, t) -> bool:
        """CDNA3 has no transposing LDS read: a tile only read down its columns by MMAs (B of mma_AB, A of
        mma_AtB) and only written by loads from global memory (filled through registers) or stores of register
        tiles (element by element: attention backward's dS^T) is stored transposed, its layout chosen at store
        time (tiles_hip::transposed), so the read is one ds_read per K run instead of one ds_read_u16 per element
        (writes are rarer than reads: each MMA wave reads every element)."""
        if self.target != "gfx942" or not isinstance(t, ST) or t.rows % 4 or t.cols % 4:
            return False
        if any(op.dst is t and not (op.name == "load" and isinstance(op.srcs[0], GL)
                                    or op.name == "store" and isinstance(op.srcs[0], RT)) for op, _ in self.k.walk()):
            return False
        rows, cols = self._mma_reads(t)
        # loads into registers: the accumulator layout reads four rows of a column per quad (the row kernels'
        # tiles, e.g. softmax), the others runs along a row. Only 16- and 8-bit tiles: f32 reads are whole words
        for op, _ in self.k.walk():
            if op.name == "load" and op.srcs[0] is t and isinstance(op.dst, RT):
                down = self.layout.get(id(op.dst), "c") == "c" and t.dtype.bits < 32
                cols, rows = cols or down, rows or not down
        return cols and not rows

    def _paired(self, t) -> bool:
        """CDNA3, a 16-bit tile read by MMAs both along its rows and down its columns (attention backward's Q and
        dO) and written only by loads from global memory: stored in row pairs (tiles_hip::paired), so that
        neither read is one ds_read_u16 per element; one copy, where a transposed second would not fit the LDS."""
        if self.target != "gfx942" or not isinstance(t, ST) or t.dtype.bits != 16 or t.rows % 4 or t.cols % 8:
            return False
        if any(op.dst is t and not (op.name == "load" and isinstance(op.srcs[0], GL)) for op, _ in self.k.walk()):
            return False
        return all(self._mma_reads(t))

    def _quarter_accumulators(self) -> dict:
        """CDNA3's fp8 MFMAs compute a quarter of each product (FNUZ, types.hpp): accumulators of a pipelined
        K loop stay in quarter units through it, scaled back once after the loop, instead of twice in every
        mma. tile id -> that loop, for an f32 tile written in the loop only by fp8 MMAs accumulating into it,
        zeroed before it at its level and written before it by nothing else, read by nothing else in it."""
        if self.target != "gfx942":
            return {}
        out = {}
        ops = list(self.k.walk())
        for t in self.k.tiles:
            if not isinstance(t, RT) or t.dtype.bits != 32:
                continue
            acc = [i for i, (op, _) in enumerate(ops) if op.dst is t and op.name == "mma"]
            if not acc or not ops[acc[0]][1] or ops[acc[0]][1][-1].kind != "pipeline":
                continue
            lp, outer = ops[acc[0]][1][-1], ops[acc[0]][1][:-1]
            inside = [i for i, (_, loops) in enumerate(ops) if lp in loops]
            if any(ops[i][1] != outer + (lp,) or ops[i][0].srcs[2] is not t
                   or not ops[i][0].srcs[0].dtype.name.startswith("fp8") for i in acc):
                continue
            if any(t in op.srcs or op.dst is t for i, (op, _) in enumerate(ops) if i in inside and i not in acc):
                continue
            before = [(op, loops) for op, loops in ops[:inside[0]] if op.dst is t]
            if not before or any(op.name != "zero" or loops != outer for op, loops in before):
                continue
            out[id(t)] = lp
        return out

    def _via_registers(self, t) -> bool:
        """Whether a pipelined tile's fill goes through registers and is written to LDS at land() (global.hpp
        lds_load::PATH): a transposed or paired tile, or any whose stored rows are whole 16-byte runs where direct
        loads move fewer bytes a lane (gfx942: 4; its fp8 is then cleared of -0 on the way in)."""
        return self._transposed(t) or self._paired(t) or (DIRECT_LDS_BYTES[self.target] < 16 and isinstance(t, ST)
                                       and (self._panel(t) or t.cols * t.dtype.bits // 8) % 16 == 0)

    def tile_decl(self, t) -> str:
        c = CTYPE[t.dtype.name]
        wc = self.wave_cols.get(id(t))
        if wc:   # a grid of waves (_wave_grid)
            return f"rt<{c}, {t.rows} / (WAVES / {wc}), {t.cols} / {wc}, {self.lay(t)}, {wc}> {self.n(t)};"
        if isinstance(t, RT) or t in self.in_regs:
            return f"rt<{c}, {t.rows} / WAVES, {t.cols}, {self.lay(t)}> {self.n(t)};"
        if isinstance(t, RV):
            if t.axis == "rows":
                return f"rv<{c}, {t.length} / WAVES, {self.lay(t)}> {self.n(t)};"
            return f"cv<{c}, {t.length}, {self.lay(t)}> {self.n(t)};"
        raise TileError(f"{t.name}: no register declaration for {t.type_str()}", self.k.loc)

    # ------------------------------------------------------------ the kernel
    def run(self) -> Generated:
        k, w, p = self.k, cgen.Writer("  "), self.plan
        w(f"// {k.name} for {self.target}: generated by tiles from {k.loc.file}:{k.loc.line}")
        stages = f"{p.stages} LDS stage(s)" if self.staged else "no staged loads"
        mfma = f", MFMA {self.m}x{self.m}" if any(op.name == "mma" for op, _ in k.walk()) else ""
        w(f"// schedule: {p.schedule} ({p.waves} waves, {stages}){mfma}"
          + (f", requested {p.requested}" if p.requested != p.schedule else ""))
        for note in p.notes:
            w(f"// note: {note}")
        w('#include "tiles_hip/tiles.hpp"')
        w("using namespace tiles_hip;")
        w()
        w(f"constexpr int WAVES = {p.waves};")
        for t in k.tiles:
            if isinstance(t, ST) and t not in self.in_regs:
                w(f"using {self.st_type(t)} = st<{CTYPE[t.dtype.name]}, {t.rows}, {t.cols}, {self._swizzle(t)}>;")
            elif isinstance(t, SV):
                w(f"using {self.st_type(t)} = sv<{CTYPE[t.dtype.name]}, {t.length}>;")
        w()
        params, sig = [], []
        for prm in k.params:
            if isinstance(prm, GL):
                c = CTYPE[prm.dtype.name]
                params += [(f"tiles_hip::{c}*" if c not in ("float", "int") else f"{c}*", f"{self.n(prm)}_data", "data", prm),
                           ("tiles_hip::gl_dims", f"{self.n(prm)}_dims", "dims", prm)]
                sig += [f"{c}* {self.n(prm)}_data", f"gl_dims {self.n(prm)}_dims"]
            else:
                c = "float" if prm.dtype == dtypes.f32 else "int"
                params.append((c, self.n(prm), "scalar", prm))
                sig.append(f"{c} {self.n(prm)}")
        w(f'extern "C" __global__ __launch_bounds__({p.threads}) void {cgen.symbol(k)}(')
        w("    " + ",\n    ".join(sig) + ") {")
        w.depth += 1
        for prm in k.params:
            if isinstance(prm, GL):
                w(f"const gl<{CTYPE[prm.dtype.name]}> {self.n(prm)}{{{self.n(prm)}_dims, {self.n(prm)}_data}};")
        self.given(w)
        self.grid(w)
        self.declare(w)
        self.barriers = _BarrierPlan(self.staged, self.in_regs)
        self.stmts(w, k.body)
        w.depth -= 1
        w("}")
        lds = self.lds_bytes(p.stages)
        if self.mfma_count is None:   # no pipelined loop: the MMAs of the whole body
            self.count_mfma(k.body)
        return Generated(cgen.symbol(k), w.text(), k, self.target, p, lds, params, self.mfma_count)

    def given(self, w):
        """What the launch checked on the host, as facts clang may use (cgen.facts): the tests of whole tiles that
        they decide are not compiled."""
        facts = cgen.facts(self.k, lambda p: f"{self.n(p)}.aligned({ALIGN})", self.expr)
        if facts:
            w("// checked before the launch")
        for f in facts:
            w(f"TH_ASSUME({f});")

    def grid(self, w):
        g = self.k.grid
        ids = tuple(f"arch::block_id({i})" for i in range(len(g)))
        if self.k.group is not None:   # the kernel's order, its blocks dealt to the XCDs in chunks (chiplet)
            order = (f"xcd_order<{schedules.XCDS}>({ids[1]} * {self.expr(g[0])} + {ids[0]}, "
                     f"{self.expr(g[0])} * {self.expr(g[1])})") if self.plan.grid_order == "chiplet" else None
            for line in cgen.block_indices(ids, self.expr(self.k.group), [self.expr(e) for e in g], order):
                w(line)
        elif self.plan.grid_order == "chiplet" and len(g) >= 2:
            w(f"// chiplet-aware order: contiguous ids per XCD, output tiles in windows of {self.plan.window} rows")
            w(f"const grid_pos blk = chiplet_order<{schedules.XCDS}, {self.plan.window}>(arch::block_id(0), "
              f"arch::block_id(1), {self.expr(g[0])}, {self.expr(g[1])});")
            w("const int block_x = blk.x, block_y = blk.y;")
            if len(g) == 3:
                w("const int block_z = arch::block_id(2);")
        else:
            for line in cgen.block_indices(ids):
                w(line)

    def declare(self, w):
        off = 0
        for t in self.k.tiles:
            if isinstance(t, (ST, SV)) and t not in self.in_regs:
                size = self._bytes(t)
                if t in self.staged:
                    w(f"const ring<{self.st_type(t)}, {self.plan.stages}> {self.n(t)}{{{off}}};")
                    off += size * self.plan.stages
                else:
                    w(f"const {self.st_type(t)} {self.n(t)} = st_at<{self.st_type(t)}>({off});")
                    off += size
        xpose = self._xpose_bytes()
        if self._scratch_bytes() - xpose:
            w(f"float* const red_scratch = (float*)(arch::lds_base() + {off});  // reductions across waves")
        if xpose:
            w(f"uint8_t* const xpose_scratch = arch::lds_base() + {off + self._scratch_bytes() - xpose};"
              "  // layout changes, a copy per wave")
        for t in self.k.tiles:
            if isinstance(t, (RT, RV)) or t in self.in_regs:
                w(self.tile_decl(t))

    # ------------------------------------------------------------ statements
    def stmts(self, w, body, slot: str | None = None):
        for s in body:
            if isinstance(s, ir.Loop):
                self.loop(w, s)
            else:
                need = self.barriers.before(s)
                if need:
                    w("arch::barrier();" if need == "vm" else "arch::lds_barrier();")
                w(self.op(s, slot))

    def _clean_steps(self, masks, v: str) -> str | None:
        """How many leading steps of loop v every in-place mask keeps its whole block tile, as an expression, where
        each mask's test is linear in v and holds for a prefix of the steps; else None. A bounds mask keeps every
        column while its bound, a - b v (b > 0), is at least the tile's width; a causal one while row0 - col0 - (C - 1)
        stays >= 0 as col0 grows. Peeling those steps into a loop of their own leaves mask()'s branch and its join,
        where clang copied the S tile's registers every step, out of the steps that need no mask."""
        counts = []
        for op in masks:
            t = op.dst
            if op.name == "bounds_mask":
                rows, cols = ir.bounds_tested(op)
                for tested, bound, extent in ((rows, op.srcs[1], t.rows), (cols, op.srcs[2], t.cols)):
                    if tested:
                        counts.append(self._prefix(ir.as_expr(bound) - extent, v))
            else:   # keep (i, j) where col0 + j <= row0 + i: all of it while row0 - col0 - (C - 1) >= 0
                counts.append(self._prefix(ir.as_expr(op.srcs[1]) - ir.as_expr(op.srcs[2]) - (t.cols - 1), v))
        if any(c is None for c in counts):
            return None
        if not counts:   # constant bounds that keep the whole tile: every step
            return f"n_{v}"
        out = counts[0]
        for c in counts[1:]:
            out = f"tiles_min({out}, {c})"
        return out

    def _prefix(self, f, v: str) -> str | None:
        """The count of leading steps k = 0, 1, .. of loop v with f(k) >= 0, f = f(0) + d k and d <= 0; None otherwise."""
        d = _per_step(f, v)
        if d is None or d > 0:
            return None
        f0 = self.expr(f, {v: "0"})
        if d == 0:
            return f"(({f0}) >= 0 ? n_{v} : 0)"
        return f"(({f0}) >= 0 ? ({f0}) / {-d} + 1 : 0)"

    def loop(self, w, lp: ir.Loop):
        v = lp.var.name
        staged_ops = [s for s in lp.body if isinstance(s, ir.Op) and s.dst in self.staged]
        # a pipeline with nothing to stage is a plain loop: its waits would hold each step's loads (and, vmcnt
        # counting stores too, the last step's stores) back for nothing
        if lp.kind == "range" or not staged_ops:
            if lp.kind == "pipeline":   # still the kernel's main loop, whose MFMAs the report counts
                self.count_mfma(lp.body)
            with w.block(f"for (int {v} = 0; {v} < {self.expr(lp.count)}; ++{v}) {{"):
                self.barriers.enter_loop(lp, self._sim)
                self.stmts(w, lp.body)
            return
        compute = [s for s in lp.body if not (isinstance(s, ir.Op) and s.dst in self.staged)]
        S, p = self.plan.stages, self.plan
        vm = " + ".join(f"lds_load<WAVES, {self.st_type(s.dst)}>::VM_OPS" for s in staged_ops) or "0"

        fills = [f"{self.n(s.dst)}_fill" if isinstance(s.dst, ST) else None for s in staged_ops]

        staged_regs = [(s, fill) for s, fill in zip(staged_ops, fills) if fill and self._via_registers(s.dst)]

        def issue(shift: str, slot: str, land: bool = False):
            for s, fill in zip(staged_ops, fills):
                line = f"  // {s.loc.file}:{s.loc.line}" if s.loc else ""
                w(f"{fill}({self.ref(s.dst, slot)}, {self.idx(s, s.dst, {v: shift})});{line}" if fill
                  else self.op(s, slot, {v: shift}))
            if land:
                land_regs(slot)

        ring = 3 if p.schedule == "pingpong" else S   # buffers: tile v is in slot v % ring, counted, not divided
        ahead = 1 if p.schedule == "pingpong" else S - 1   # the tile this iteration fills: v + ahead
        moves = self._fill_moves(lp, staged_ops) if all(fills) else None

        def fill_step(slot: str):
            """The fill of tile v + ahead: where the tiles move forward a fixed amount each step, one compare
            against the steps whose every fill is a full tile picks all of the step's unchecked loads."""
            shift = f"({v} + {ahead})"
            if moves is None:
                with w.block(f"if ({shift[1:-1]} < n_{v}) {{"):
                    issue(shift, slot)
                return
            with w.block(f"if (__builtin_expect({shift[1:-1]} < {v}_full, 1)) {{  // every tile of the step full: unchecked loads",
                         f"}} else if ({shift[1:-1]} < n_{v}) {{  // a tile crosses an edge: every lane checked"):
                for s, fill in zip(staged_ops, fills):
                    line = f"  // {s.loc.file}:{s.loc.line}" if s.loc else ""
                    at = f"{fill}_at + {shift} * {fill}_step" if cursors else self.idx(s, s.dst, {v: shift})
                    w(f"{fill}.full_tile{'_at' if cursors else ''}({self.ref(s.dst, slot)}, {at});{line}")
            w.depth += 1
            for s, fill in zip(staged_ops, fills):
                w(f"{fill}.edge({self.ref(s.dst, slot)}, {self.idx(s, s.dst, {v: shift})});")
            w.depth -= 1
            w("}")

        def land_regs(slot: str):
            for s, fill in staged_regs:
                how = ("transposed" if self._transposed(s.dst) else "in row pairs" if self._paired(s.dst)
                       else "16 bytes a lane")
                w(f"{fill}.land({self.ref(s.dst, slot)});  // through registers, {how}")
        w(f"{{  // pipelined loop over {v}: {p.schedule}, {S} LDS stage(s)")
        w.depth += 1
        w(f"const int n_{v} = {self.expr(lp.count)};")
        for s, fill in zip(staged_ops, fills):
            if not fill:
                continue
            g = s.srcs[0]
            w(f"const lds_fill<WAVES, {self.st_type(s.dst)}, {CTYPE[g.dtype.name]}> {fill}{{{self.n(g)}}};"
              f"  // lanes' offsets in a tile of {self.n(g)}, once")
        # where every fill's batch and depth stay put, a full tile's byte offset is its offset at step 0 plus the
        # step's: both made here, so that the loop pays a multiply and an add a fill (clang left the invariant
        # part of each offset in the loop, recomputed every step)
        cursors = moves is not None and all(_per_step(i, v) == 0 for s in staged_ops for i in s.attrs["idx"][:-2])
        if moves is not None:
            w(f"int {v}_full = n_{v};  // leading tiles of {v} whose every fill is a full tile (a prefix: they move forward)")
            for fill, (r0, c0, dr, dc) in zip(fills, moves):
                w(f"{v}_full = {fill}.full_steps({v}_full, {r0}, {c0}, {dr}, {dc});")
        if cursors:
            for s, fill, (_, _, dr, dc) in zip(staged_ops, fills, moves):
                g = self.n(s.srcs[0])
                w(f"const uint32_t {fill}_at = {g}.unchecked({self.idx(s, s.dst, {v: '0'})}), "
                  f"{fill}_step = {g}.unchecked(0, 0, {dr}, {dc});  // a full tile's bytes at step 0, a step's")
        if self.barriers.pipeline_entry(staged_ops):
            w("arch::barrier();")
        if p.schedule == "pingpong" or S == 1:
            pass
        else:
            if S > 2:
                w(f"constexpr int VM_PER_STAGE = {vm};  // vm loads one wave issues per stage: what s_waitcnt may leave in flight")
            for i in range(S - 1):
                with w.block(f"if ({i} < n_{v}) {{"):
                    issue(str(i), str(i), land=True)
        if p.schedule == "pingpong":
            with w.block(f"if (0 < n_{v}) {{"):
                issue("0", "0", land=True)
            w("pingpong_enter();  // group 1 runs one barrier behind group 0")
        def wrap(x):   # (x + 1) % ring, one compare and a select
            return f"{x} == {ring - 1} ? 0 : {x} + 1"
        carried = ring > 2 and ahead in (1, ring - 1)   # the slot and the fill's carried: one steps, the other copies
        state = [f"{v} = 0"] + ([f"{v}_slot = 0"] if ring > 1 else []) + ([f"{v}_fill = {ahead}"] if carried else [])
        if ring == 1:
            step = f"++{v}"
        elif ring == 2:   # one scalar xor each, where the wrap-around test is a compare and a select
            step = f"++{v}, {v}_slot ^= 1"
        elif carried:
            step = (f"++{v}, {v}_slot = {v}_fill, {v}_fill = {wrap(f'{v}_fill')}" if ahead == 1 else
                    f"++{v}, {v}_fill = {v}_slot, {v}_slot = {wrap(f'{v}_slot')}")
        else:
            step = f"++{v}, {v}_slot = {wrap(f'{v}_slot')}"
        masks = [s for s in compute if isinstance(s, ir.Op) and s.name in ("bounds_mask", "causal_mask")
                 and s.dst is s.srcs[0]]
        clean = self._clean_steps(masks, v) if masks else None
        if clean is None:
            loops = [(f"for (int {', '.join(state)}; {v} < n_{v}; {step}) {{", compute)]
        else:   # peeled: the leading steps whose masks keep the whole tile, then the rest with them
            w(f"int {', '.join(state)};")
            w(f"const int {v}_clean = tiles_min(n_{v}, {clean});  // leading steps every mask keeps whole")
            loops = [(f"for (; {v} < {v}_clean; {step}) {{  // the masks keep every element: left out",
                      [s for s in compute if not any(s is m for m in masks)]),
                     (f"for (; {v} < n_{v}; {step}) {{", compute)]
        barriers = self.barriers.state()
        for head, body in loops:
            self.barriers.restore(barriers)   # the masks touch no shared tile: each loop leaves the same state
            with w.block(head):
                if ring == 2:
                    w(f"const int {v}_fill = {v}_slot ^ 1;  // ({v} + 1) % 2")
                elif carried:
                    w(f"// {v}_slot = {v} % {ring}, {v}_fill = ({v} + {ahead}) % {ring}")
                elif ring > 1:
                    nxt = f"{v}_slot + {ahead}"
                    w(f"const int {v}_fill = {nxt} >= {ring} ? {nxt} - {ring} : {nxt};  // ({v} + {ahead}) % {ring}")
                self.barriers.reset_pipeline(body, self._sim)
                if p.schedule == "pingpong":
                    w("// memory cluster: this group's share of the next tile, straight into LDS")
                    w(f"arch::waitcnt<0, 0>();  // tile {v}, the only one this wave has in flight, has landed")
                    w("arch::meet();")
                    fill_step(f"{v}_fill")
                    w(f"arch::meet();  // tile {v} + 1 stays in flight through the MFMA cluster")
                    w("// MFMA cluster")
                    w("mfma_cluster_begin();")
                    self.count_mfma(body)
                    self.stmts(w, body, f"{v}_slot")
                    w("mfma_cluster_end();")
                    if staged_regs:
                        with w.block(f"if ({v} + 1 < n_{v}) {{"):
                            land_regs(f"{v}_fill")
                elif S == 1:
                    w("arch::lds_barrier();")
                    issue(v, "0", land=True)
                    w("arch::waitcnt<0, 0>();")
                    w("arch::meet();")
                    self.count_mfma(body)
                    self.mix = self.interleaved(body)
                    self.stmts(w, body, "0")
                    self.mix = None
                else:
                    if S == 2:
                        w(f"arch::waitcnt<0, 0>();  // tile {v}, the only one in flight, has landed")
                    else:
                        w(f"// tile {v} has landed once at most the later stages' loads are in flight")
                        with w.block(f"if ({v} + {S - 2} < n_{v}) {{", "} else {"):
                            w(f"arch::waitcnt<arch::vm_cap({S - 2} * VM_PER_STAGE), 0>();")
                        w.depth += 1
                        w("arch::waitcnt<0, 0>();")
                        w.depth -= 1
                        w("}")
                    w("arch::meet();")
                    fill_step(f"{v}_fill")
                    self.count_mfma(body)
                    self.mix = self.interleaved(body)
                    self.stmts(w, body, f"{v}_slot")
                    self.mix = None
                    if staged_regs:
                        with w.block(f"if ({v} + {S - 1} < n_{v}) {{"):
                            land_regs(f"{v}_fill")
        if p.schedule == "pingpong":
            w("pingpong_leave();")
        w.depth -= 1
        w("}")
        for t in self.k.tiles:
            if self.quarter.get(id(t)) is lp:
                w(f"mul({self.n(t)}, {self.n(t)}, 4.0f);  // the fp8 MFMAs accumulated it in quarter units (FNUZ)")
        self.barriers.after_pipeline(staged_ops)

    def _fill_moves(self, lp: ir.Loop, staged_ops) -> list | None:
        """Per fill of the loop's step: its tile's (r0, c0) at step 0 and how far it moves a step, elements, where
        every tile moves forward by a constant (an index v times a constant plus terms without v); else None."""
        moves = []
        for s in staged_ops:
            r, c = s.attrs["idx"][-2:]
            dr, dc = _per_step(r, lp.var.name), _per_step(c, lp.var.name)
            if dr is None or dc is None or dr < 0 or dc < 0:
                return None
            moves.append((f"({self.expr(r, {lp.var.name: '0'})}) * {s.dst.rows}",
                          f"({self.expr(c, {lp.var.name: '0'})}) * {s.dst.cols}", dr * s.dst.rows, dc * s.dst.cols))
        return moves

    def _sim(self, body):
        """Shared-memory effects of a body, for the barrier planner: [(op, reads, writes)]."""
        return [(op, *_effects(op)) for op, _ in ir.walk(body)]

    def count_mfma(self, body):
        counts = {}
        for op, _ in ir.walk(body):
            if op.name == "mma":
                d, a = op.dst, op.srcs[0]
                kdim = a.rows if op.attrs["trans_a"] else a.cols
                ks = op_k(self.target, op, self.m)
                name = mfma_name(self.target, a.dtype, self.m, ks)
                counts[name] = counts.get(name, 0) + (d.rows // self.plan.waves // self.m) * (d.cols // self.m) * (kdim // ks)
        self.mfma_count = counts

    def interleaved(self, body) -> str | None:
        """The MMAs' cluster policy in a pipelined loop under the interleave (mma.hpp's interleaved<VALU, VM>): the
        vector ops (one per register element a lane holds, per element-wise op on a register tile) and the global
        loads into registers (one per element a lane holds) of the loop body, each over its MFMAs, rounded up."""
        mfmas = sum(self.mfma_count.values())
        if self.plan.schedule != "interleave" or not mfmas:
            return None

        def per_lane(t):
            return -(-(t.rows * t.cols if isinstance(t, RT) else t.length) // (64 * self.plan.waves))
        ops = [op for op, _ in ir.walk(body) if isinstance(op.dst, (RT, RV))]
        work = sum(per_lane(op.dst) for op in ops
                   if isinstance(op.dst, RT) and op.name not in ("mma", "load", "zero", "fill"))
        loads = sum(per_lane(op.dst) for op in ops if op.name == "load" and isinstance(op.srcs[0], GL))
        return f"interleaved<{-(-work // mfmas)}, {-(-loads // mfmas)}>"

    # ------------------------------------------------------------ ops
    def idx(self, op, tile, shift=None) -> str:
        """(b, d, r0, c0) element offsets of a tile (or (b, d, r, c0) of a vector) from tile coordinates."""
        idx = [self.expr(i, shift) for i in op.attrs["idx"]]
        if isinstance(tile, (RT, ST)):
            r, c = idx[-2:]
            lead = ["0"] * (4 - len(idx)) + idx[:-2]
            return ", ".join(lead + [f"({r}) * {tile.rows}", f"({c}) * {tile.cols}"])
        lead = ["0"] * (4 - len(idx)) + idx[:-1]
        return ", ".join(lead + [f"({idx[-1]}) * {tile.length}"])

    def ref(self, t, slot) -> str:
        """A shared tile; a pipelined one by its buffer (outside its pipelined loop: buffer 0)."""
        if t not in self.staged:
            return self.n(t)
        return f"{self.n(t)}[{slot if slot is not None else 0}]"

    def op(self, op: ir.Op, slot=None, shift=None) -> str:
        name, d, srcs = op.name, op.dst, op.srcs

        def r(t):
            return self.ref(t, slot) if isinstance(t, (ST, SV)) else self.n(t)

        def val(x):
            return r(x) if not isinstance(x, ir.Expr) else self.expr(x, shift)
        line = f"  // {op.loc.file}:{op.loc.line}" if op.loc else ""
        if name == "load":
            s = srcs[0]
            if isinstance(s, GL) and isinstance(d, (ST, SV)) and d not in self.in_regs:
                return f"load<WAVES>({r(d)}, {self.n(s)}, {self.idx(op, d, shift)});{line}"
            if isinstance(s, GL):
                return f"load({self.n(d)}, {self.n(s)}, {self.idx(op, d, shift)});{line}"
            return f"load({self.n(d)}, {r(s)});{line}"
        if name in ("store", "atomic_add"):
            s = srcs[0]
            if isinstance(d, GL):
                wv = "<WAVES>" if isinstance(s, (ST, SV)) else ""
                fn = "store" if name == "store" else "atomic_add"
                return f"{fn}{wv}({self.n(d)}, {r(s)}, {self.idx(op, s, shift)});{line}"
            return f"store({r(d)}, {self.n(s)});{line}"
        if name == "store_sum":
            s, parts, arrivals, part = srcs
            return (f"store_sum<{op.attrs['count']}, WAVES>({self.n(d)}, {self.n(s)}, {self.idx(op, s, shift)}, "
                    f"{self.n(parts)}, {self.n(arrivals)}, {self.expr(part, shift)}, {self._scratch_of(op)});{line}")
        if name == "mma":
            a, b, c = srcs
            if (isinstance(a, RT) or a in self.in_regs) and self.layout.get(id(a)) not in ("a", "a+"):
                raise TileError("internal: A operand not in the MFMA layout", op.loc)
            ta, tb = ("true" if op.attrs[x] else "false" for x in ("trans_a", "trans_b"))
            ks = op_k(self.target, op, self.m)
            k_arg = f", {ks}" if ks != mfma_k(self.target, a.dtype, self.m) else ""
            if id(d) in self.quarter or self.mix:
                k_arg = f", {ks if k_arg else 0}, {'true' if id(d) in self.quarter else 'false'}"
            if self.mix:
                k_arg += f", {self.mix}"
            return f"mma<{ta}, {tb}{k_arg}>({self.n(d)}, {r(a)}, {r(b)}, {self.n(c)});{line}"
        if name == "zero":
            self._regs_only(op)
            return f"zero({self.n(d)});{line}"
        if name == "fill":
            self._regs_only(op)
            return f"fill({self.n(d)}, {self.expr(srcs[0], shift)});{line}"
        if name == "copy":
            self._same_layout(op, allow_change=True)
            via = ", xpose_scratch" if self._lds_copy(op) else ""
            return f"copy({self.n(d)}, {self.n(srcs[0])}{via});{line}"
        if name == "swap_pairs":
            self._same_layout(op)
            return f"swap_pairs({self.n(d)}, {self.n(srcs[0])});{line}"
        if id(op) in self.scaled:   # rewrites.scaled_exp2: on the unscaled tile, the scale folded in
            role, c = self.scaled[id(op)]
            if role in ("drop", "done"):
                return f"// {name}({self.n(d)}, ...): folded into exp2_scaled_sub_row{line}"
            self._same_layout(op)
            if role == "max":
                acc = f", &{self.n(srcs[1])}" if srcs[1] is not None else ""
                return f"row_max_scaled({self.n(d)}, {self.n(srcs[0])}, {self.expr(c, shift)}{acc});{line}"
            return f"exp2_scaled_sub_row({self.n(d)}, {self.n(srcs[0])}, {self.expr(c, shift)}, {self.n(srcs[1])});{line}"
        if name in _UNARY or name in _BINARY or name == "where":
            self._same_layout(op)
            return f"{name}({self.n(d)}, {', '.join(val(x) for x in srcs)});{line}"
        if name.startswith("row_"):
            acc = f", &{self.n(srcs[1])}" if srcs[1] is not None else ""
            return f"{name}({self.n(d)}, {self.n(srcs[0])}{acc});{line}"
        if name.startswith(("col_", "tile_")):   # across the waves, through red_scratch
            acc = f"&{self.n(srcs[1])}" if srcs[1] is not None else "nullptr"
            return f"{name}<WAVES>({self.n(d)}, {self.n(srcs[0])}, {acc}, {self._scratch_of(op)});{line}"
        if name == "logsumexp2":
            self._same_layout(op)
            scratch = self._scratch_of(op) if _exchanges(op) else "nullptr"   # a column vector is whole in every wave
            return f"logsumexp2<WAVES>({self.n(d)}, {self.n(srcs[0])}, {self.n(srcs[1])}, {scratch});{line}"
        if name.endswith("_row") or name.endswith("_col"):
            self._same_layout(op)
            return f"{name}({self.n(d)}, {self.n(srcs[0])}, {self.n(srcs[1])});{line}"
        if name == "bounds_mask" and ir.bounds_tested(op) != (True, True):   # a bound that keeps the whole tile
            self._same_layout(op)
            rows, cols = ir.bounds_tested(op)
            if not (rows or cols):
                keep = "" if d is srcs[0] else f"copy({self.n(d)}, {self.n(srcs[0])});  "
                return f"{keep}// bounds_mask: its bounds keep the whole tile{line}"
            which, bound = ("rows", srcs[1]) if rows else ("cols", srcs[2])
            return (f"bounds_mask_{which}({self.n(d)}, {self.n(srcs[0])}, {self.expr(bound, shift)}, "
                    f"{self.expr(srcs[3], shift)});{line}")
        if name in ("causal_mask", "bounds_mask", "dropout"):
            self._same_layout(op)
            args = ", ".join(self.expr(x, shift) for x in srcs[1:])
            return f"{name}({self.n(d)}, {self.n(srcs[0])}, {args});{line}"
        raise TileError(f"{name}: not supported by the HIP backend", op.loc)

    def _regs_only(self, op):
        if not isinstance(op.dst, (RT, RV)):
            raise TileError(f"{op.name} of a shared tile is not supported by the HIP backend; fill registers and store",
                            op.loc)

    def _same_layout(self, op, allow_change=False):
        tiles = [t for t in (op.dst, *op.srcs) if isinstance(t, (RT, RV))]
        lays = {self.layout.get(id(t), "c") for t in tiles}
        if len(lays) > 1 and not (allow_change and all(isinstance(t, RT) for t in tiles)):
            raise TileError(f"{op.name}: mixes a register tile that feeds an MMA's A operand with ones in the "
                            "accumulator layout; on CDNA copy it into a separate tile first", op.loc)


def _per_step(e, v: str) -> int | None:
    """How much index e grows a step of loop variable v, where e is v times a constant plus terms without v."""
    e = ir.as_expr(e)
    if ("loop", v) not in ir.free_vars(e):
        return 0
    if isinstance(e, ir.LoopVar):
        return 1
    if isinstance(e, ir.BinOp) and e.op in ("+", "-"):
        a, b = _per_step(e.a, v), _per_step(e.b, v)
        return None if a is None or b is None else a + b if e.op == "+" else a - b
    if isinstance(e, ir.BinOp) and e.op == "*":
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(y, ir.Const) and isinstance(y.value, int):
                a = _per_step(x, v)
                return None if a is None else a * y.value
    return None


def _exchanges(op: ir.Op) -> bool:
    """Ops that combine the waves' values through red_scratch, with barriers of their own."""
    return ir.exchange_floats(op) > 0


def _takes_turns(op: ir.Op) -> bool:
    """Exchanges with one barrier (whole-tile reductions, logsumexp2 of row vectors, store_sum's flag): each writes
    one of the scratch's two halves, one no wave may still be reading (_BarrierPlan); column reductions keep two
    barriers."""
    return _exchanges(op) and (op.name.startswith("tile_") or op.name in ("logsumexp2", "store_sum"))


HALVES = ("scratch half 0", "scratch half 1")   # the read set's names for them (no tile name has a space)


def _effects(op: ir.Op):
    """(shared tiles read, shared tiles written) by one op."""
    reads, writes = set(), set()
    for s in op.srcs:
        if isinstance(s, (ST, SV)):
            reads.add(s)
    if isinstance(op.dst, (ST, SV)):
        writes.add(op.dst)
    if _exchanges(op):
        reads.add("scratch")
        writes.add("scratch")
    return reads, writes


class _BarrierPlan:
    """Where block barriers go: before reading a shared tile written since the last barrier, and before
    writing one read or written since it. Loops are entered with what their own end leaves pending."""

    def __init__(self, staged, in_regs=frozenset()):
        self.staged, self.in_regs = staged, in_regs
        self.reads, self.writes = set(), set()
        self.halves = {}   # id(op) -> the scratch half an exchange that takes turns writes
        self.direct = set()   # tiles written since the last barrier by global -> LDS loads (vmcnt, not lgkmcnt)

    def _clear(self):
        self.reads, self.writes, self.direct = set(), set(), set()

    def _step(self, op):
        """None, or the barrier needed before op: "vm" where a tile it touches came from global memory straight
        into LDS (arch::barrier(), which waits for every load), else "lds" (arch::lds_barrier(): global loads
        in flight stay so)."""
        r, wr = (x - self.in_regs for x in _effects(op))
        if _takes_turns(op):   # write a half, one barrier (the header's), read it: the half must be free before
            free = [i for i, h in enumerate(HALVES) if h not in self.reads]
            self._clear()
            self.halves[id(op)] = (free or [0])[0]
            self.reads = {HALVES[self.halves[id(op)]]}
            return None if free else "lds"
        if _exchanges(op):   # barriers of their own around a write from the scratch's start: a half may be read
            need = "lds" if self.reads & set(HALVES) else None
            self._clear()
            return need
        touched = (r & self.writes) | (wr & (self.reads | self.writes))
        need = ("vm" if touched & self.direct else "lds") if touched else None
        if need:
            self._clear()
        self.reads |= r
        self.writes |= wr
        if op.name == "load" and isinstance(op.srcs[0], GL):
            self.direct |= wr
        return need

    def before(self, op):
        return self._step(op)

    def state(self):
        return set(self.reads), set(self.writes), set(self.direct)

    def restore(self, state):
        self.reads, self.writes, self.direct = (set(x) for x in state)

    def enter_loop(self, lp, sim):
        """Pending state at a loop's head: what precedes it plus what one pass of its body leaves."""
        saved = (set(self.reads), set(self.writes))
        for op, _, _ in sim(lp.body):
            self._step(op)
        # the halves the body's exchanges read, as written, may differ from this simulation's: either may be read
        self.reads |= saved[0] | set(HALVES)
        self.writes |= saved[1]

    def pipeline_entry(self, staged_ops) -> bool:
        tiles = {s.dst for s in staged_ops}
        need = bool(tiles & (self.reads | self.writes))
        if need:
            self._clear()
        return need

    def reset_pipeline(self, compute, sim):
        """Inside the loop the schedule's barrier precedes the compute: staged tiles are in sync there."""
        # after the schedule's barrier, what the previous iteration's compute left is settled
        self._clear()

    def after_pipeline(self, staged_ops):
        self.reads |= {s.dst for s in staged_ops}
