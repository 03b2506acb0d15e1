"""IR -> Metal Shading Language that calls the tiles_metal header library.

The generated kernel reads like a hand-written ThunderMittens kernel: tiles are declared once at the top
(threadgroup tiles carved from one ``[[threadgroup(0)]]`` arena, register tiles as this simdgroup's rows), then
one header call per IR op, with the double-buffered loop of schedules.py around pipelined bodies and a
threadgroup barrier wherever threadgroup memory changes hands between simdgroups.

Launch interface (shared by the Metal runtime and the CPU emulator), in buffer order:
  * one ``device T*`` per global argument;
  * ``constant int* ints``: per global 7 ints (batch, depth, rows, cols, stride of batch, depth, rows, in
    elements), then the int scalar arguments;
  * ``constant float* floats``: the float scalar arguments (only if the kernel has any);
  * the threadgroup arena of ``smem_bytes`` bytes at threadgroup index 0.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tiles import cgen, dtypes, ir
from tiles.backend import _strides
from tiles.dsl import TileError
from tiles.types import GL, RT, RV, ST, SV

from . import schedules

MSL_TYPE = {"f32": "float", "f16": "half", "bf16": "bfloat", "i32": "int"}
INTS_PER_GL = 7

# Names the generated kernel uses for itself; a user's tile or argument of the same name gets a trailing "_".
_RESERVED = {"smem", "ints", "floats", "tgid", "tid", "sg", "lane", "self", "block_x", "block_y", "block_z",
             "make_gl", "make_st", "make_sv", "make_coord", "coord", "block", "gl", "st", "sv", "rt", "rv",
             "kernel", "device", "threadgroup", "constant", "thread", "half", "float", "bfloat", "int", "uint",
             "ushort", "uchar", "bool", "char", "short", "long", "for", "if", "else", "const", "auto", "do",
             "while", "return", "switch", "case", "default", "break", "continue", "struct", "union", "enum",
             "static", "template", "typename", "using", "namespace", "sizeof", "void", "signed", "unsigned",
             "double", "volatile", "inline", "operator", "this", "true", "false", "new", "delete", "metal",
             "tiles_metal", "exp", "exp2", "log", "log2", "abs", "min", "max", "fill", "zero", "load", "store",
             "map", "convert", "vec", "mma_AB", "mma_ABt", "mma_AtB", "mma_AtBt", "dropout", "where", "pair_at",
             "elem_at", "erf_as", "pow_as", "times_sigmoid", *ir.UNARY}

_UNARY = {n: f"op_{n}" for n in ir.UNARY}     # the functors of tiles_metal/base.h
_BINARY = {n: f"op_{n}" for n in ir.BINARY}
_REDUCE = {"max": "op_max", "min": "op_min", "sum": "op_add"}
BARRIER = "threadgroup_barrier(mem_flags::mem_threadgroup);"


@dataclass
class MetalKernel:
    """Generated MSL and what a launch needs to know about it."""
    name: str
    source: str
    kernel: ir.Kernel
    plan: schedules.Plan
    globals_: list                     # GL params, in buffer order
    int_args: list                     # ScalarArg (i32), in the order of the ints buffer after the extents
    float_args: list                   # ScalarArg (f32)
    language: str                      # Metal language version the source needs
    params: list = field(default_factory=list)  # (C type, name, attribute) of the kernel's parameters

    @property
    def threads(self) -> int:
        return self.plan.threads

    @property
    def smem_bytes(self) -> int:
        return self.plan.smem_bytes

    def grid(self, env: dict) -> tuple:
        sizes = tuple(int(ir.evaluate(g, env)) for g in self.kernel.grid)
        return sizes + (1,) * (3 - len(sizes))

    def pack(self, args, env: dict) -> tuple:
        """(global arrays, ints, floats) for a launch with these host arguments (already checked)."""
        by_param = dict(zip(map(id, self.kernel.params), args))
        ints = []
        for g in self.globals_:
            a = by_param[id(g)]
            shape = (1,) * (4 - len(a.shape)) + tuple(a.shape)
            strides = (0,) * (4 - len(a.shape)) + _strides(a)   # numpy arrays and torch tensors
            ints += [*shape, *strides[:3]]
        ints += [int(env[ir.key(s)]) for s in self.int_args]
        if any(abs(v) >= 2**31 for v in ints):
            raise TileError(f"{self.name}: an extent or stride does not fit in 32 bits: {ints}", self.kernel.loc)
        floats = [float(env[ir.key(s)]) for s in self.float_args]
        return ([by_param[id(g)] for g in self.globals_], np.asarray(ints or [0], dtype=np.int32),
                np.asarray(floats or [0.0], dtype=np.float32))


def msl_type(d: dtypes.DType, k: ir.Kernel | None = None) -> str:
    if d.name not in MSL_TYPE:
        raise TileError(f"Metal has no {d} type (fp8 is not supported on Apple GPUs)", k.loc if k else None)
    return MSL_TYPE[d.name]


def generate(k: ir.Kernel, target: str = "apple", static_arena: bool = False) -> MetalKernel:
    """static_arena: the threadgroup memory declared in the kernel, its size fixed in the source, instead of a
    [[threadgroup(0)]] parameter the launch sizes (torch.mps.compile_shader's kernels take no length)."""
    plan = schedules.plan(k, target)
    return _Gen(k, plan, static_arena).run()


class _Gen:
    def __init__(self, k: ir.Kernel, plan: schedules.Plan, static_arena: bool = False):
        self.k, self.p, self.static_arena = k, plan, static_arena
        self.w = cgen.Writer()
        taken: set = set()
        self.names: dict = {}
        for x in [*k.params, *k.tiles]:
            # a tile may share a name with an argument
            self.names[id(x)] = cgen.fresh_name(x.name + "_" if x.name in _RESERVED else x.name, taken)
        self.subst: dict = {}          # LoopVar key -> C text, while emitting a prefetch of a later step
        self.stage: dict = {}          # pipeline Loop -> the C name of its current copy index

    # ------------------------------------------------------------ names and expressions

    def name(self, x) -> str:
        return self.names[id(x)]

    def leaf(self, e: ir.Expr) -> str:
        if isinstance(e, ir.Dim):
            g = next(p for p in self.k.params if isinstance(p, GL) and p.name == e.arg)
            return f"{self.name(g)}.{ir.Dim.NAMES[e.axis]}"
        if isinstance(e, ir.ScalarArg):
            return self.name(next(p for p in self.k.params if isinstance(p, ir.ScalarArg) and p.name == e.name))
        if isinstance(e, ir.LoopVar):
            return self.subst.get(ir.key(e), e.name)
        return cgen.default_names(e)

    def expr(self, e) -> str:
        return cgen.c_expr(ir.as_expr(e), self.leaf)

    def ref(self, t) -> str:
        """A tile as an operand: threadgroup tiles with copies are indexed by their loop's current copy."""
        n = self.name(t)
        lp = self.p.staged.get(t)
        if lp is not None and self.p.copies.get(t, 1) > 1:
            return f"{n}[{self.stage.get(lp, '0')}]"
        return n

    def rows_per_sg(self, t) -> int:
        return (t.rows if isinstance(t, RT) else t.length) // self.p.workers

    def sg_row0(self, t) -> str:
        """This simdgroup's first row of a row-split tile or vector."""
        return f"sg * {self.rows_per_sg(t)}"

    def coord(self, g: GL, tile, idx, split: bool) -> str:
        """make_coord(...) of a tile at tile-unit index idx of global g; split: add this simdgroup's rows."""
        idx = [ir.Const(0)] * (4 - len(idx)) + list(idx)
        b, d = (self.expr(i) for i in idx[:2])
        if isinstance(tile, (RV, SV)):
            r, c = self.expr(idx[2]), self.scaled(idx[3], tile.length, tile if split else None)
        else:
            r, c = self.scaled(idx[2], tile.rows, tile if split else None), self.scaled(idx[3], tile.cols, None)
        return f"make_coord({b}, {d}, {r}, {c})"

    def scaled(self, i: ir.Expr, size: int, split) -> str:
        """Tile index i in elements (i * size), plus this simdgroup's first row when split is a row-split tile."""
        e = self.expr(i)
        text = str(int(e) * size) if e.isdigit() else f"{e} * {size}"
        if split is None:
            return text
        return self.sg_row0(split) if text == "0" else f"{text} + {self.sg_row0(split)}"

    def decl_type(self, t) -> str:
        ty = msl_type(t.dtype, self.k)
        if isinstance(t, ST):
            return f"st<{ty}, {t.rows}, {t.cols}>"
        if isinstance(t, SV):
            return f"sv<{ty}, {t.length}>"
        if isinstance(t, RT):
            return f"rt<{ty}, {self.rows_per_sg(t)}, {t.cols}>"
        n = self.rows_per_sg(t) if t.axis == "rows" else t.length
        return f"rv<{ty}, {n}>"

    # ------------------------------------------------------------ the kernel

    def run(self) -> MetalKernel:
        k, p, w = self.k, self.p, self.w
        globals_ = [x for x in k.params if isinstance(x, GL)]
        int_args = [x for x in k.params if isinstance(x, ir.ScalarArg) and x.dtype != dtypes.f32]
        float_args = [x for x in k.params if isinstance(x, ir.ScalarArg) and x.dtype == dtypes.f32]
        uses_bf16 = any(t.dtype == dtypes.bf16 for t in [*globals_, *k.tiles])
        src = f"{k.loc.file}:{k.loc.line}" if k.loc else "?"
        loops = ", ".join(f"{lp.var.name}: {n} stage{'s' if n > 1 else ''}" for lp, n in p.stages.items())
        w(f"// {k.name}: generated by tiles from {src} for Apple GPUs (Metal {'3.1' if uses_bf16 else '3.0'}).")
        w(f"// {p.workers} simdgroups of 32 lanes split the rows of every register tile"
          + (f"; pipelined loops: {loops}." if loops else "."))
        w(f"// Threadgroup memory: {p.smem_bytes} bytes (tiles, then {p.workers} x 256 B of per-simdgroup scratch"
          + (f", then {4 * p.exchange_floats} B for the exchanges across simdgroups)." if p.exchange_floats else ")."))
        w('#include "tiles_metal/tiles.h"')
        w("using namespace tiles_metal;")
        w()
        params = [(f"device {msl_type(g.dtype, k)}*", f"{self.name(g)}_ptr", f"buffer({i})")
                  for i, g in enumerate(globals_)]
        params.append(("constant int*", "ints", f"buffer({len(globals_)})"))
        if float_args:
            params.append(("constant float*", "floats", f"buffer({len(globals_) + 1})"))
        if not self.static_arena:
            params.append(("threadgroup uchar*", "smem", "threadgroup(0)"))
        params += [("uint3", "tgid", "threadgroup_position_in_grid"),
                   ("ushort", "tid", "thread_index_in_threadgroup"),
                   ("ushort", "sg", "simdgroup_index_in_threadgroup"),
                   ("ushort", "lane", "thread_index_in_simdgroup")]
        w(f"kernel void {cgen.symbol(k)}(")
        for i, (ctype, pname, attr) in enumerate(params):
            # [[threadgroup(0)]] is spelled through TILES_ATTR: the CPU shim erases the word `threadgroup`
            spelled = f"TILES_ATTR({attr})" if attr.startswith("threadgroup(") else f"[[{attr}]]"
            w(f"    {ctype} {pname} {spelled}{',' if i + 1 < len(params) else ')'}")
        with w.block("{"):
            if self.static_arena:
                w(f"threadgroup float4 tiles_arena[{max(1, -(-p.smem_bytes // 16))}];   // {p.smem_bytes} bytes")
                w("threadgroup uchar* smem = (threadgroup uchar*)tiles_arena;")
            for i, g in enumerate(globals_):
                w(f"const gl<{msl_type(g.dtype)}> {self.name(g)} = make_gl({self.name(g)}_ptr, ints + {INTS_PER_GL * i});")
            for i, s in enumerate(int_args):
                w(f"const int {self.name(s)} = ints[{INTS_PER_GL * len(globals_) + i}];")
            for i, s in enumerate(float_args):
                w(f"const float {self.name(s)} = floats[{i}];")
            ids = tuple(f"tgid.{'xyz'[a]}" for a in range(len(k.grid)))
            group = None if k.group is None else self.expr(k.group)
            for line in cgen.block_indices(ids, group, [self.expr(e) for e in k.grid]):
                w(line)
            w(f"const block self = make_block(tid, sg, lane, {p.workers}, (threadgroup float*)(smem + {p.scratch_offset}));")
            if p.exchange_floats:
                w(f"threadgroup float* exchange = (threadgroup float*)(smem + {p.exchange_offset});")
            self.declare_tiles()
            w()
            self.body(k.body, (frozenset(), frozenset()))
        return MetalKernel(cgen.symbol(k), w.text(), k, p, globals_, int_args, float_args, "3.1" if uses_bf16 else "3.0",
                           params)

    def declare_tiles(self):
        w, p = self.w, self.p
        for t in self.k.tiles:
            ty = self.decl_type(t)
            make = f"make_st<{ty[3:-1]}>" if isinstance(t, ST) else f"make_sv<{ty[3:-1]}>"
            if isinstance(t, (ST, SV)):
                n, off, size = p.copies[t], p.offsets[t], schedules.align(schedules.nbytes(t))
                if n == 1:
                    w(f"const {ty} {self.name(t)} = {make}(smem + {off});")
                else:
                    copies = ", ".join(f"{make}(smem + {off + i * size})" for i in range(n))
                    w(f"const {ty} {self.name(t)}[{n}] = {{{copies}}};  // one copy per pipeline stage")
            else:
                what = "this simdgroup's rows" if isinstance(t, RT) or t.axis == "rows" else "every column"
                w(f"{ty} {self.name(t)};  // {what} of {t.type_str()}")

    # ------------------------------------------------------------ statements and synchronization
    # state = (written, read): threadgroup tiles touched since the last barrier, by any simdgroup.

    def body(self, stmts, state):
        for s in stmts:
            state = self.loop(s, state) if isinstance(s, ir.Loop) else self.op(s, state)
        return state

    def sync(self, op, state, skip=frozenset()):
        """Emit a barrier if op touches a threadgroup tile another simdgroup may still be using."""
        written, read = state
        reads, writes = _accesses(op)
        reads, writes = reads - skip, writes - skip
        if (reads & written) or (writes & (written | read)):
            self.w(BARRIER)
            written, read = frozenset(), frozenset()
        return written | writes, read | reads

    def dry(self, fn, *a):
        """Run an emitter without keeping its text (to find the state a loop body ends in)."""
        saved, self.w = self.w, cgen.Writer()
        try:
            return fn(*a)
        finally:
            self.w = saved

    def loop(self, lp: ir.Loop, state):
        n = self.p.stages.get(lp, 1)
        staged = schedules.staged_loads(lp) if lp.kind == "pipeline" and n > 1 else []
        if staged:
            return self.pipelined(lp, n, staged, state)
        var, w = lp.var.name, self.w
        entry = state
        for _ in range(4):  # a step starts with what came before the loop or what the previous step left
            end = self.dry(self.body, lp.body, entry)
            nxt = _union(state, end)
            if nxt == entry:
                break
            entry = nxt
        with w.block(f"for (int {var} = 0; {var} < {self.expr(lp.count)}; ++{var}) {{"):
            end = self.body(lp.body, entry)
        return _union(entry, end)

    def pipelined(self, lp: ir.Loop, n: int, staged: list, state):
        w, var = self.w, lp.var.name
        count = f"{var}_steps"
        w(f"const int {count} = {self.expr(lp.count)};")
        w(f"// prologue: the tiles of step{'s 0..' + str(n - 2) if n > 2 else ' 0'}")
        for step in range(n - 1):
            self.subst[ir.key(lp.var)] = str(step)
            self.stage[lp] = str(step)
            for op in staged:
                if step == 0:  # later steps fill other copies: no hazard with step 0's
                    state = self.sync(op, state)
                self.op_load(op)
        self.subst.pop(ir.key(lp.var))
        w(BARRIER)
        staged_tiles = frozenset(op.dst for op in staged)
        with w.block(f"for (int {var} = 0; {var} < {count}; ++{var}) {{"):
            ahead = f"{var} + {n - 1}"
            w(f"const int {var}_copy = {var} % {n};")
            with w.block(f"if ({ahead} < {count}) {{  // step {ahead}'s tiles, into the copy no simdgroup reads now"):
                self.subst[ir.key(lp.var)] = f"({ahead})"
                self.stage[lp] = f"({ahead}) % {n}"
                for op in staged:
                    self.op_load(op)
                self.subst.pop(ir.key(lp.var))
            self.stage[lp] = f"{var}_copy"
            rest = [s for s in lp.body if s not in staged]
            st = (frozenset(), frozenset())
            for s in rest:
                st = self.loop(s, st) if isinstance(s, ir.Loop) else self.op(s, st, skip=staged_tiles)
            w(BARRIER + "  // the next step's tiles are in, and this step's copy is free again")
        del self.stage[lp]
        return frozenset(), frozenset()

    # ------------------------------------------------------------ ops

    def op(self, op: ir.Op, state, skip=frozenset()):
        state = self.sync(op, state, skip)
        name = op.name
        if name == "load":
            self.op_load(op)
        elif name == "store":
            self.op_store(op)
        elif name == "atomic_add":
            g, t = op.dst, op.srcs[0]
            self.w(f"atomic_add({self.name(g)}, {self.ref(t)}, {self.coord(g, t, op.attrs['idx'], True)}, self);")
        elif name == "mma":
            self.op_mma(op)
        elif name in ("zero", "fill"):
            value = "0.0f" if name == "zero" else self.expr(op.srcs[0])
            tail = ", self" if isinstance(op.dst, (ST, SV)) else ""
            self.w(f"fill({self.ref(op.dst)}, {value}{tail});")
        elif name == "copy":
            tail = ", self" if isinstance(op.dst, RT) else ""
            self.w(f"convert({self.ref(op.dst)}, {self.ref(op.srcs[0])}{tail});")
        elif name in _UNARY or name in _BINARY:
            self.op_map(op)
        elif name == "where":
            self.same_dtype(op, *op.srcs)
            args = [self.ref(x) if not isinstance(x, ir.Expr) else f"float({self.expr(x)})" for x in (op.dst, *op.srcs)]
            self.w(f"where({', '.join(args)});")
        elif name == "swap_pairs":
            self.w(f"swap_pairs({self.ref(op.dst)}, {self.ref(op.srcs[0])}, self);")
        elif name.split("_")[0] in ir.REDUCE_OVER:
            src, acc = op.srcs
            over, how = name.split("_")
            args = [self.ref(op.dst), self.ref(src)] + ([self.ref(acc)] if acc is not None else [])
            if over != "row":
                args.append("exchange")
                state = (frozenset(), frozenset())  # col_reduce and tile_reduce synchronize the whole threadgroup
            self.w(f"{over}_reduce<{_REDUCE[how]}>({', '.join(args)}, self);")
        elif name == "logsumexp2":
            args = [self.ref(x) for x in (op.dst, *op.srcs)]
            if op.dst.axis == "rows":   # split over the simdgroups: they meet in the exchange
                args.append("exchange")
                state = (frozenset(), frozenset())  # logsumexp2 synchronizes the whole threadgroup itself
            self.w(f"logsumexp2({', '.join(args)}, self);")
        elif name.endswith(("_row", "_col")):
            src, vec = op.srcs
            self.same_dtype(op, src)
            fn = "broadcast_row" if name.endswith("_row") else "broadcast_col"
            self.w(f"{fn}<{_BINARY[name[:3]]}>({self.ref(op.dst)}, {self.ref(src)}, {self.ref(vec)}, self);")
        elif name == "causal_mask":
            src, row0, col0, fill = op.srcs
            self.same_dtype(op, src)
            self.w(f"causal_mask({self.ref(op.dst)}, {self.ref(src)}, {self.expr(row0)} + {self.sg_row0(op.dst)}, "
                   f"{self.expr(col0)}, {self.expr(fill)}, self);")
        elif name == "bounds_mask":
            src, rows, cols, fill = op.srcs
            self.same_dtype(op, src)
            self.w(f"bounds_mask({self.ref(op.dst)}, {self.ref(src)}, {self.sg_row0(op.dst)}, {self.expr(rows)}, "
                   f"{self.expr(cols)}, {self.expr(fill)}, self);")
        elif name == "dropout":
            src, prob, seed, offset, row0, col0 = op.srcs
            self.same_dtype(op, src)
            self.w(f"dropout({self.ref(op.dst)}, {self.ref(src)}, {self.expr(prob)}, {self.expr(seed)}, "
                   f"{self.expr(offset)}, {self.expr(row0)} + {self.sg_row0(op.dst)}, {self.expr(col0)}, self);")
        else:
            raise TileError(f"Metal backend: no lowering for op {name}", op.loc)
        return state

    def same_dtype(self, op, *srcs):
        for s in srcs:
            if isinstance(s, RT) and s.dtype != op.dst.dtype:
                raise TileError(f"{op.name}: on Metal, register-tile operands must have the destination's dtype "
                                f"({op.dst.dtype}), got {s.dtype} for {s.name}; tl.copy it first", op.loc)

    def op_map(self, op):
        if isinstance(op.dst, RT):
            self.same_dtype(op, *op.srcs)
        fn = _UNARY.get(op.name) or _BINARY[op.name]
        args = [self.ref(op.dst)] + [self.ref(s) if not isinstance(s, ir.Expr) else self.expr(s) for s in op.srcs]
        self.w(f"map<{fn}>({', '.join(args)});")

    def op_load(self, op):
        dst, src = op.dst, op.srcs[0]
        w = self.w
        if isinstance(src, GL):
            split = isinstance(dst, RT) or (isinstance(dst, RV) and dst.axis == "rows")
            where = self.coord(src, dst, op.attrs["idx"], split)
            tail = "" if isinstance(dst, RV) else ", self"
            w(f"load({self.ref(dst)}, {self.name(src)}, {where}{tail});")
        elif isinstance(dst, RT):  # from a threadgroup tile: this simdgroup's rows
            w(f"load({self.ref(dst)}, {self.ref(src)}, {self.sg_row0(dst)}, 0, self);")
        else:  # register vector from a threadgroup vector
            first = self.sg_row0(dst) if dst.axis == "rows" else "0"
            w(f"load({self.ref(dst)}, {self.ref(src)}, {first});")

    def op_store(self, op):
        dst, src = op.dst, op.srcs[0]
        w = self.w
        if isinstance(dst, GL):
            split = isinstance(src, RT) or (isinstance(src, RV) and src.axis == "rows")
            where = self.coord(dst, src, op.attrs["idx"], split)
            if isinstance(src, RV):
                writer = "true" if src.axis == "rows" else "sg == 0"
                w(f"store({self.name(dst)}, {self.ref(src)}, {where}, {writer}, self);")
            else:
                w(f"store({self.name(dst)}, {self.ref(src)}, {where}, self);")
        elif isinstance(dst, ST):
            w(f"store({self.ref(dst)}, {self.ref(src)}, {self.sg_row0(src)}, 0, self);")
        else:  # threadgroup vector from a register vector
            if src.axis == "rows":
                w(f"store({self.ref(dst)}, {self.ref(src)}, {self.sg_row0(src)}, true, self);")
            else:
                w(f"store({self.ref(dst)}, {self.ref(src)}, 0, sg == 0, self);")

    def op_mma(self, op):
        d, (a, b, c) = op.dst, op.srcs
        fn = f"mma_{'At' if op.attrs['trans_a'] else 'A'}{'Bt' if op.attrs['trans_b'] else 'B'}"
        if isinstance(a, RT):
            self.w(f"{fn}({self.ref(d)}, {self.ref(a)}, {self.ref(b)}, {self.ref(c)});")
        else:
            self.w(f"{fn}({self.ref(d)}, {self.ref(a)}, {self.sg_row0(d)}, {self.ref(b)}, {self.ref(c)});")


def _accesses(op: ir.Op) -> tuple[frozenset, frozenset]:
    """(threadgroup tiles read, threadgroup tiles written) by an op, across simdgroups."""
    shared = (ST, SV)
    writes = frozenset([op.dst]) if isinstance(op.dst, shared) else frozenset()
    reads = frozenset(s for s in op.srcs if isinstance(s, shared))
    return reads, writes


def _union(a, b):
    return a[0] | b[0], a[1] | b[1]
