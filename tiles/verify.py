"""The verifier: every rule a kernel must satisfy before any backend sees it.

Errors are TileError, naming the line of the user's kernel and the expected against the actual shape,
dtype, layout or kind.
"""
from __future__ import annotations

from . import dtypes, ir
from .dsl import TileError
from .types import GL, RT, RV, ST, SV

MMA_INPUTS = (dtypes.bf16, dtypes.f16, dtypes.fp8e4m3, dtypes.fp8e5m2)

# (dst kind, src kind) pairs each memory op accepts, and whether it may convert dtypes on the way
LOADS = {("st", "gl"): False, ("sv", "gl"): False, ("rt", "gl"): True, ("rt", "st"): True,
         ("rv", "gl"): True, ("rv", "sv"): True}
STORES = {("gl", "rt"): True, ("gl", "st"): False, ("st", "rt"): True, ("gl", "rv"): True,
          ("gl", "sv"): False, ("sv", "rv"): True}


def _kind(x):
    return getattr(x, "kind", "scalar")


def _desc(x):
    return x.type_str() if hasattr(x, "type_str") else ir.fmt(x) if isinstance(x, ir.Expr) else repr(x)


class _Checker:
    def __init__(self, op):
        self.op = op

    def fail(self, msg):
        raise TileError(f"{self.op.name}: {msg}", self.op.loc)

    def expect(self, cond, what, expected, got):
        if not cond:
            self.fail(f"{what}: expected {expected}, got {got}")

    def kind(self, x, kinds, what):
        self.expect(_kind(x) in kinds, f"{what} kind", " or ".join(kinds), f"{_kind(x)} {_desc(x)}")

    def same_shape(self, a, b, what):
        self.expect(a.shape == b.shape, f"{what} shape", _shape(b.shape), _shape(a.shape))


def _shape(s):
    return "x".join(str(d) if isinstance(d, int) else ir.fmt(d) for d in s)


def verify(k: ir.Kernel, target: str | None = None) -> None:
    if not k.grid:
        raise TileError(f"kernel {k.name} never calls tl.grid(...): the launch grid is unknown", k.loc)
    for op, loops in k.walk():
        c = _Checker(op)
        _RULES.get(op.name, _dispatch_default)(c, op)
    for loop in _loops(k.body):
        if loop.kind == "pipeline":
            _check_pipeline(loop)
    _check_written_before_read(k)
    if target is not None:
        _check_target(k, target)


def _check_written_before_read(k: ir.Kernel):
    """A tile read before any op (in source order) writes it would hold whatever its registers or memory held:
    a different value on every backend, so it is refused."""
    written = set()
    for op, _ in k.walk():
        for src in op.srcs:
            if _kind(src) in ("rt", "rv", "st", "sv") and id(src) not in written:
                _Checker(op).fail(f"reads {src.name} ({_desc(src)}) before any operation writes it (tl.zero "
                                  f"or tl.fill it first)")
        written.add(id(op.dst))


def _loops(stmts):
    for s in stmts:
        if isinstance(s, ir.Loop):
            yield s
            yield from _loops(s.body)


# ---------------------------------------------------------------- per-op rules

def _memory(c, op, table, arrow):
    dst, src = op.dst, op.srcs[0]
    pair = (_kind(dst), _kind(src))
    if pair not in table:
        allowed = ", ".join(f"{d}{arrow}{s}" for d, s in table)
        c.fail(f"cannot move {pair[1]} -> {pair[0]} ({_desc(src)} -> {_desc(dst)}); allowed: {allowed}")
    if not table[pair]:
        c.expect(dst.dtype == src.dtype, "dtype (no conversion on this path)", src.dtype, dst.dtype)
    g, t = (src, dst) if isinstance(src, GL) else (dst, src) if isinstance(dst, GL) else (None, None)
    idx = op.attrs["idx"]
    if g is None:
        c.expect(not idx, "index", "none between on-chip tiles", len(idx))
        if _kind(dst) != "gl":
            c.same_shape(dst, src, "source")
        return
    need = 1 if isinstance(t, (RV, SV)) else 2
    c.expect(need <= len(idx) <= 4, "index length", f"{need} to 4 (tile coordinates over {g.name}'s trailing dims)",
             len(idx))
    if g.rank < need:
        c.fail(f"global {g.name} has rank {g.rank}; a {'vector' if need == 1 else 'tile'} needs rank >= {need}")


def _rule_load(c, op):
    _memory(c, op, LOADS, "<-")


def _rule_store(c, op):
    _memory(c, op, STORES, "<-")


def _rule_atomic(c, op):
    c.kind(op.dst, ("gl",), "destination")
    c.kind(op.srcs[0], ("rt",), "source")
    c.expect(op.dst.dtype == dtypes.f32, "destination dtype", "f32", op.dst.dtype)
    c.expect(2 <= len(op.attrs["idx"]) <= 4, "index length", "2 to 4", len(op.attrs["idx"]))


def _rule_store_sum(c, op):
    dst, (src, parts, arrivals, part) = op.dst, op.srcs
    c.kind(dst, ("gl",), "destination")
    c.kind(src, ("rt",), "source")
    c.expect(src.dtype == dtypes.f32, "source dtype (the parts are summed in f32)", "f32", src.dtype)
    c.expect(dst.dtype.is_float, "destination dtype", "a float type", dst.dtype)
    c.expect(parts.dtype == dtypes.f32, f"parts ({parts.name}) dtype", "f32", parts.dtype)
    c.expect(arrivals.dtype == dtypes.i32, f"arrivals ({arrivals.name}) dtype (one counter per tile)", "i32",
             arrivals.dtype)
    c.expect(part.dtype == dtypes.i32, "part dtype", "i32", part.dtype)
    c.expect(2 <= len(op.attrs["idx"]) <= 4, "index length", "2 to 4", len(op.attrs["idx"]))
    c.expect(dst.rank >= 2, f"destination ({dst.name}) rank", "2 to 4", dst.rank)
    c.expect(parts.rank == max(dst.rank, 3), f"parts ({parts.name}) rank (the destination's, with a depth of "
             f"count slices a tile)", max(dst.rank, 3), parts.rank)
    c.expect(arrivals.rank == dst.rank, f"arrivals ({arrivals.name}) rank (the destination's, in tiles)", dst.rank,
             arrivals.rank)


def _rule_mma(c, op):
    d, (a, b, acc) = op.dst, op.srcs
    ta, tb = op.attrs["trans_a"], op.attrs["trans_b"]
    c.kind(d, ("rt",), "d")
    c.kind(acc, ("rt",), "c")
    c.kind(a, ("rt", "st"), "a")
    c.kind(b, ("st",), "b (the second operand comes from shared memory)")
    c.expect(d.dtype == dtypes.f32, "d dtype", "f32", d.dtype)
    c.expect(acc.dtype == dtypes.f32, "c dtype", "f32", acc.dtype)
    c.expect(a.dtype in MMA_INPUTS, "a dtype", "/".join(map(str, MMA_INPUTS)), a.dtype)
    c.expect(b.dtype == a.dtype, "b dtype (same as a)", a.dtype, b.dtype)
    if isinstance(a, RT):
        c.expect(not ta, "a from registers", "not transposed (use mma_AB/mma_ABt, or stage a through shared)",
                 "transposed")
        c.expect(a.layout == "row", "a layout", "row", a.layout)
    m, ka = (a.cols, a.rows) if ta else (a.rows, a.cols)
    kb, n = (b.cols, b.rows) if tb else (b.rows, b.cols)
    if ka != kb:
        c.fail(f"inner dimensions differ: a{'ᵀ' if ta else ''} is {m}x{ka} (K={ka}), "
               f"b{'ᵀ' if tb else ''} is {kb}x{n} (K={kb})")
    c.expect(d.shape == (m, n), "d shape", f"{m}x{n}", _shape(d.shape))
    c.expect(acc.shape == (m, n), "c shape", f"{m}x{n}", _shape(acc.shape))


def _rule_fill(c, op):
    c.kind(op.dst, ("rt", "rv", "st", "sv"), "destination")


def _rule_copy(c, op):
    dst, src = op.dst, op.srcs[0]
    c.kind(dst, ("rt", "rv"), "destination")
    c.expect(_kind(src) == _kind(dst), "source kind", _kind(dst), _kind(src))
    c.same_shape(src, dst, "source")
    if isinstance(dst, RV):
        c.expect(src.axis == dst.axis, "vector axis", dst.axis, src.axis)


def _rule_swap_pairs(c, op):
    dst, src = op.dst, op.srcs[0]
    c.kind(dst, ("rt",), "destination")
    c.kind(src, ("rt",), "source")
    c.same_shape(src, dst, "source")
    c.expect(src.dtype == dst.dtype, "source dtype (no conversion: tl.copy converts)", dst.dtype, src.dtype)
    c.expect(dst.cols % 2 == 0, "column count (pairs of columns are exchanged)", "even", dst.cols)


def _rule_map(c, op):
    dst = op.dst
    c.kind(dst, ("rt", "rv"), "destination")
    for s in op.srcs:
        if isinstance(s, ir.Expr):
            continue
        c.expect(_kind(s) == _kind(dst), "operand kind", _kind(dst), f"{_kind(s)} {_desc(s)}")
        c.same_shape(s, dst, "operand")
        if isinstance(dst, RV):
            c.expect(s.axis == dst.axis, "vector axis", dst.axis, s.axis)
    if not isinstance(op.srcs[0], (RT, RV)):
        c.fail(f"first operand must be a tile or vector, got {_desc(op.srcs[0])}")


def _rule_pow(c, op):
    _rule_map(c, op)
    c.expect(isinstance(op.srcs[1], ir.Expr), "exponent", "a scalar (pow raises every element to one power)",
             _desc(op.srcs[1]))


def _rule_where(c, op):
    _rule_map(c, op)   # mask first: a tile or vector of dst's shape; a and b tiles of that shape or scalars


def _rule_reduce(c, op):
    dst, (src, acc) = op.dst, op.srcs
    c.kind(src, ("rt",), "source")
    c.kind(dst, ("rv",), "destination")
    if op.name.startswith("tile_"):   # one value for the whole tile, in every element of a vector of any shape
        for x, what in ((dst, "destination"), (acc, "accumulator")):
            if x is not None:
                c.expect(x.dtype == dtypes.f32, f"{what} dtype", "f32", x.dtype)
        if acc is not None:
            c.kind(acc, ("rv",), "accumulator")
            c.expect((acc.length, acc.axis) == (dst.length, dst.axis), "accumulator",
                     f"{dst.length} along {dst.axis} (as the destination)", f"{acc.length} along {acc.axis}")
        return
    axis = "rows" if op.name.startswith("row_") else "cols"
    n = src.rows if axis == "rows" else src.cols
    c.expect(dst.axis == axis, "destination axis", axis, dst.axis)
    c.expect(dst.length == n, "destination length", n, dst.length)
    if acc is not None:
        c.kind(acc, ("rv",), "accumulator")
        c.expect((acc.length, acc.axis) == (n, axis), "accumulator", f"{n} along {axis}",
                 f"{acc.length} along {acc.axis}")


def _rule_logsumexp2(c, op):
    dst, (m, s) = op.dst, op.srcs
    for x, what in ((dst, "destination"), (m, "m (the maxima)"), (s, "s (the sums)")):
        c.kind(x, ("rv",), what)
        c.expect(x.dtype == dtypes.f32, f"{what} dtype", "f32", x.dtype)
    for x, what in ((m, "m"), (s, "s")):
        c.expect((x.length, x.axis) == (dst.length, dst.axis), what,
                 f"{dst.length} along {dst.axis} (as the destination)", f"{x.length} along {x.axis}")


def _rule_broadcast(c, op):
    dst, (src, vec) = op.dst, op.srcs
    c.kind(src, ("rt",), "source")
    c.kind(dst, ("rt",), "destination")
    c.same_shape(src, dst, "source")
    c.kind(vec, ("rv",), "vector")
    axis = "rows" if op.name.endswith("_row") else "cols"
    n = src.rows if axis == "rows" else src.cols
    c.expect((vec.length, vec.axis) == (n, axis), "vector", f"{n} along {axis} (one per {axis[:-1]})",
             f"{vec.length} along {vec.axis}")


def _rule_mask(c, op):
    c.kind(op.dst, ("rt",), "destination")
    c.kind(op.srcs[0], ("rt",), "source")
    c.same_shape(op.srcs[0], op.dst, "source")


def _rule_dropout(c, op):
    src, p, *counters = op.srcs
    c.kind(op.dst, ("rt",), "destination")
    c.kind(src, ("rt",), "source")
    c.same_shape(src, op.dst, "source")
    for name, e in zip(("seed", "offset", "row0", "col0"), counters):
        c.expect(e.dtype == dtypes.i32, f"{name} dtype (a counter word of the generator)", "i32", e.dtype)


_RULES = {"load": _rule_load, "store": _rule_store, "atomic_add": _rule_atomic, "store_sum": _rule_store_sum,
          "mma": _rule_mma,
          "zero": _rule_fill, "fill": _rule_fill, "copy": _rule_copy, "swap_pairs": _rule_swap_pairs,
          "causal_mask": _rule_mask, "bounds_mask": _rule_mask, "dropout": _rule_dropout,
          "logsumexp2": _rule_logsumexp2, "pow": _rule_pow, "where": _rule_where}
_RULES.update({f"{a}_{r}": _rule_reduce for a in ir.REDUCE_OVER for r in ir.REDUCE})
_RULES.update({f"{b}_{a}": _rule_broadcast for a in ("row", "col") for b in ir.BROADCAST})
_rule_map_names = ir.UNARY + ir.BINARY


def _rule_unknown(c, op):
    c.fail("unknown op")


def _dispatch_default(c, op):
    (_rule_map if op.name in _rule_map_names else _rule_unknown)(c, op)


# ---------------------------------------------------------------- structure and target


def _check_pipeline(loop: ir.Loop):
    """Loads into shared tiles may run ahead of the compute only if nothing else in the loop writes those tiles."""
    staged = {}
    for s in loop.body:
        if isinstance(s, ir.Op) and s.name == "load" and isinstance(s.srcs[0], GL) and isinstance(s.dst, (ST, SV)):
            staged[s.dst] = s
    for s, _ in ir.walk(loop.body):
        if s.dst in staged and staged[s.dst] is not s:
            raise TileError(f"{s.name}: writes {s.dst.name}, which the pipelined load at line "
                            f"{staged[s.dst].loc.line} fills ahead of time; use another shared tile", s.loc)


def _check_target(k: ir.Kernel, target: str):
    """The target's dtypes and the granularity of every tile (tiles/targets.py: base tiles, the K step of the
    MMA atom the backend issues), so that what passes here compiles for the target."""
    from . import targets
    t = targets.target(target)
    unit = t.tile
    for tile in k.tiles:
        if tile.dtype.name not in t.dtypes:
            raise TileError(f"{tile.name}: {t.name} does not support dtype {tile.dtype}", k.loc)
        if isinstance(tile, RT) and t.reg_dtypes is not None and tile.dtype.name not in t.reg_dtypes:
            raise TileError(f"{tile.name}: register tiles on {t.name} are {'/'.join(sorted(t.reg_dtypes))}, "
                            f"got {tile.type_str()}", k.loc)
        if isinstance(tile, RT) and (tile.rows % unit or tile.cols % unit):
            raise TileError(f"{tile.name}: register tiles on {t.name} are built from {unit}x{unit} base tiles: "
                            f"expected multiples of {unit}, got {tile.rows}x{tile.cols}", k.loc)
    for p in k.params:
        if isinstance(p, GL) and p.dtype.name not in t.dtypes:
            raise TileError(f"argument {p.name}: {t.name} does not support dtype {p.dtype}", k.loc)
    for op, _ in k.walk():
        if op.name == "mma":
            _check_mma_step(op, t)
        if op.name == "store_sum" and not t.grid_fence:
            raise TileError(f"store_sum: {t.name} has no fence that orders one block's writes to device memory before "
                            f"another block's reads, which counting the parts as they arrive needs; split the sum "
                            f"over two launches instead (kernels/gemm.py: split_plan)", op.loc)


def _check_mma_step(op: ir.Op, t):
    a, b = op.srcs[0], op.srcs[1]
    kdim = a.rows if op.attrs["trans_a"] else a.cols
    atom = t.mma_atom(a.dtype.name)
    if atom is None:
        raise TileError(f"mma: {t.name} has no matrix instruction for {a.dtype} inputs", op.loc)
    if isinstance(a, RT) and t.mma_a_regs is not None and a.dtype.name not in t.mma_a_regs:
        raise TileError(f"mma: on {t.name} an A operand in registers must be {'/'.join(sorted(t.mma_a_regs))}, "
                        f"{a.name} is {a.type_str()}; stage it through a shared tile", op.loc)
    if kdim % atom.k:
        raise TileError(f"mma: the inner dimension K = {kdim} of {a.name} ({a.type_str()}) and {b.name} "
                        f"({b.type_str()}) does not fit {t.name}'s granularity: its {atom.name} steps K by {atom.k}, "
                        f"so K must be a multiple of {atom.k}", op.loc)
