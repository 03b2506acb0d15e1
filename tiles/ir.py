"""The typed IR: scalar expressions, statements (ops and loops), kernels, and the printer.

Scalar expressions are also what a kernel author manipulates while tracing (block indices, dims, loop
variables): they overload arithmetic, the way Triton's tensors do, and every backend prints them as C.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from . import dtypes


# ---------------------------------------------------------------- scalar expressions

class Expr:
    dtype: dtypes.DType = dtypes.i32

    def _bin(self, op, other, swap=False):
        other = as_expr(other)
        a, b = (other, self) if swap else (self, other)
        return BinOp(op, a, b)

    def __add__(self, o): return self._bin("+", o)
    def __radd__(self, o): return self._bin("+", o, True)
    def __sub__(self, o): return self._bin("-", o)
    def __rsub__(self, o): return self._bin("-", o, True)
    def __mul__(self, o): return self._bin("*", o)
    def __rmul__(self, o): return self._bin("*", o, True)
    def __floordiv__(self, o): return self._bin("//", o)
    def __rfloordiv__(self, o): return self._bin("//", o, True)
    def __mod__(self, o): return self._bin("%", o)
    def __truediv__(self, o): return self._bin("/", o)
    def __rtruediv__(self, o): return self._bin("/", o, True)
    def __neg__(self): return BinOp("-", Const(0, self.dtype), self)

    def __bool__(self):
        raise TypeError("a traced scalar has no Python truth value: its value is known only when the kernel runs; "
                        "use tl.minimum/tl.maximum/masks instead of if/while on it")

    __lt__ = __le__ = __gt__ = __ge__ = lambda self, other: self.__bool__()

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: Any
    dtype: dtypes.DType = dtypes.i32


@dataclass(frozen=True, eq=False)
class Dim(Expr):
    """A runtime extent of a global argument: dim 0..3 = batch, depth, rows, cols."""
    arg: str
    axis: int

    NAMES = ("batch", "depth", "rows", "cols")


@dataclass(frozen=True, eq=False)
class ScalarArg(Expr):
    name: str
    dtype: dtypes.DType = dtypes.f32


@dataclass(frozen=True, eq=False)
class BlockIdx(Expr):
    axis: int


@dataclass(frozen=True, eq=False)
class LoopVar(Expr):
    name: str


@dataclass(frozen=True, eq=False)
class BinOp(Expr):
    op: str
    a: Expr
    b: Expr

    @property
    def dtype(self):
        return dtypes.f32 if dtypes.f32 in (self.a.dtype, self.b.dtype) or self.op == "/" else dtypes.i32


@dataclass(frozen=True, eq=False)
class Call(Expr):
    fn: str  # min, max, cdiv
    args: tuple

    @property
    def dtype(self):
        return dtypes.f32 if any(a.dtype == dtypes.f32 for a in self.args) else dtypes.i32


def as_expr(x) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, bool):
        raise TypeError("booleans are not scalars")
    if isinstance(x, int):
        return Const(x, dtypes.i32)
    if isinstance(x, float):
        return Const(x, dtypes.f32)
    raise TypeError(f"expected a scalar (int, float or traced scalar), got {type(x).__name__}")


def evaluate(e: Expr, env: dict) -> Any:
    """Value of an expression; env maps Dim/ScalarArg/BlockIdx/LoopVar nodes' keys (see `key`) to numbers."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, (Dim, ScalarArg, BlockIdx, LoopVar)):
        return env[key(e)]
    if isinstance(e, BinOp):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        if e.op == "+": return a + b
        if e.op == "-": return a - b
        if e.op == "*": return a * b
        if e.op == "/": return a / b
        if e.op == "//": return int(a) // int(b)
        if e.op == "%": return int(a) % int(b)
    if isinstance(e, Call):
        args = [evaluate(a, env) for a in e.args]
        if e.fn == "min": return min(args)
        if e.fn == "max": return max(args)
        if e.fn == "cdiv": return -(-int(args[0]) // int(args[1]))
    raise TypeError(f"cannot evaluate {e!r}")


def key(e: Expr):
    if isinstance(e, Dim): return ("dim", e.arg, e.axis)
    if isinstance(e, ScalarArg): return ("arg", e.name)
    if isinstance(e, BlockIdx): return ("block", e.axis)
    if isinstance(e, LoopVar): return ("loop", e.name)
    raise TypeError(e)


def free_vars(e: Expr) -> set:
    if isinstance(e, (Dim, ScalarArg, BlockIdx, LoopVar)):
        return {key(e)}
    if isinstance(e, BinOp):
        return free_vars(e.a) | free_vars(e.b)
    if isinstance(e, Call):
        return set().union(*(free_vars(a) for a in e.args))
    return set()


def fmt(e: Expr) -> str:
    """Human-readable form, used by the printer and in error messages."""
    if isinstance(e, Const):
        v = e.value
        return ("-inf" if v < 0 else "inf") if isinstance(v, float) and math.isinf(v) else repr(v)
    if isinstance(e, Dim): return f"{e.arg}.{Dim.NAMES[e.axis]}"
    if isinstance(e, ScalarArg): return e.name
    if isinstance(e, BlockIdx): return "block." + "xyz"[e.axis]
    if isinstance(e, LoopVar): return e.name
    if isinstance(e, BinOp): return f"({fmt(e.a)} {e.op} {fmt(e.b)})"
    if isinstance(e, Call): return f"{e.fn}({', '.join(fmt(a) for a in e.args)})"
    return repr(e)


# ---------------------------------------------------------------- statements

@dataclass(frozen=True)
class Loc:
    """Where in the user's kernel an op was written."""
    file: str
    line: int
    text: str

    def __str__(self):
        return f"{self.file}:{self.line}: {self.text.strip()}"


@dataclass(eq=False)
class Op:
    name: str              # see OPS
    dst: Any               # a tile (types.Tile) or None
    srcs: tuple            # tiles, scalars (Expr) or None
    attrs: dict = field(default_factory=dict)
    loc: Loc | None = None


@dataclass(eq=False)
class Loop:
    kind: str              # "range" | "pipeline"
    var: LoopVar
    count: Expr
    body: list = field(default_factory=list)
    stages: int | None = None
    loc: Loc | None = None


@dataclass(eq=False)
class Check:
    """A precondition on the arguments, tested before every launch: a == b (tl.check_eq) or a > b (tl.check_gt)."""
    a: Expr
    b: Expr
    loc: Loc | None = None
    op: str = "=="

    def holds(self, va, vb) -> bool:
        return va == vb if self.op == "==" else va > vb


def positive(e: Expr, checks) -> bool:
    """Whether e > 0 wherever the kernel runs: positive constants, scalars a check declares greater than a
    non-negative constant, and products and quotients of those. (A backend may then move a multiplication by e
    across a max or a -inf fill, which commute only with a positive factor.)"""
    if isinstance(e, Const):
        return e.value > 0
    if isinstance(e, BinOp) and e.op in ("*", "/"):
        return positive(e.a, checks) and positive(e.b, checks)
    return isinstance(e, ScalarArg) and any(
        c.op == ">" and isinstance(c.a, ScalarArg) and c.a.name == e.name and isinstance(c.b, Const)
        and c.b.value >= 0 for c in checks)


def given(k) -> list[Check]:
    """The facts about the arguments that every launch of k has checked on the host before the kernel runs, which
    device code may take as given (a backend's compiler then drops the paths they rule out): the kernel's checks
    over 32-bit integers that cannot overflow there (dims, integer scalars, constants, and min / max of them: the
    host evaluates in Python's unbounded integers), and that each dim a global's rank leaves out is 1."""
    def exact(e):
        return e.dtype == dtypes.i32 and (isinstance(e, (Const, Dim, ScalarArg)) or
                                          isinstance(e, Call) and e.fn in ("min", "max") and all(map(exact, e.args)))
    out = [c for c in k.checks if exact(c.a) and exact(c.b)]
    for p in k.params:
        if getattr(p, "kind", "") == "gl":
            out += [Check(Dim(p.name, ax), Const(1)) for ax in range(4 - p.rank)]
    return out


UNARY = ("exp", "exp2", "log", "log2", "abs", "neg", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "gelu", "erf", "relu",
         "sin", "cos")
COMPARE = ("lt", "le", "gt", "ge", "eq", "ne")   # 1.0 where the comparison holds, else 0.0: a mask for `where`
BINARY = ("add", "sub", "mul", "div", "max", "min", "pow") + COMPARE   # pow: by a scalar only
REDUCE = ("max", "min", "sum")
REDUCE_OVER = ("row", "col", "tile")   # each row to a rows vector, each column to a cols vector, the whole tile to every
#                                        element of a vector of either axis
BROADCAST = ("add", "sub", "mul", "div")
OPS = (("load", "store", "atomic_add", "store_sum", "mma", "zero", "fill", "copy", "swap_pairs", "causal_mask", "bounds_mask",
        "dropout", "logsumexp2", "where")
       + UNARY + BINARY
       + tuple(f"{a}_{r}" for a in REDUCE_OVER for r in REDUCE)
       + tuple(f"{b}_row" for b in BROADCAST) + tuple(f"{b}_col" for b in BROADCAST))


def exchange_floats(op: "Op") -> int:
    """Floats per worker an op hands to the block's other workers through shared memory: one per column for a
    column reduction (the rows are split over the workers), one for a whole-tile reduction, a (max, sum) pair for
    logsumexp2 of a rows vector; 0 for ops that stay within each worker. Backends size their exchange areas from
    it, and an op that exchanges synchronizes the whole block."""
    if op.name.startswith("col_"):
        return op.srcs[0].cols
    if op.name.startswith("tile_"):
        return 1
    if op.name == "logsumexp2" and op.dst.axis == "rows":
        return 2
    if op.name == "store_sum":   # whether the block is the last of its tile's parts, from the worker that counted
        return 1
    return 0


def touches(s: "Op", t) -> bool:
    """Whether op s writes or reads tile t."""
    return s.dst is t or any(x is t for x in s.srcs)


def bounds_tested(op: "Op") -> tuple[bool, bool]:
    """Which of a bounds mask's two tests (rows, columns) can cut its tile: a constant bound no smaller than the
    tile's extent keeps every row (column), so that test need not run (attention's rows, softmax's columns)."""
    rows, cols = op.srcs[1], op.srcs[2]
    return (not (isinstance(rows, Const) and rows.value >= op.dst.rows),
            not (isinstance(cols, Const) and cols.value >= op.dst.cols))


def walk(stmts, loops=()):
    """Every op under stmts, depth first, with the loops that enclose it."""
    for s in stmts:
        if isinstance(s, Loop):
            yield from walk(s.body, loops + (s,))
        else:
            yield s, loops


@dataclass(eq=False)
class Kernel:
    name: str
    params: list           # types.GL and ScalarArg, in call order
    consts: dict           # the compile-time constants the body was traced with
    options: dict          # per-target launch options (workers, stages, ...) not seen by the body
    grid: tuple            # Exprs
    tiles: list            # every shared/register tile and vector, in allocation order
    body: list             # Op | Loop
    checks: list           # Check
    loc: Loc | None = None
    broadcast: dict = field(default_factory=dict)   # global's name -> axes (0..3) it is declared broadcast over
    group: Expr | None = None   # tl.grid(group=g): blocks start column by column in groups of g rows (axis 0)

    def indexed_axes(self) -> dict:
        """For each global the kernel accesses: the 4-D axes some access indexes (a tile coordinate of length n
        indexes the trailing n axes) or that tl.broadcast_over declares, and the first access that leaves
        each other axis at 0."""
        out = {}
        for op, _ in self.walk():
            for g in (op.dst, *op.srcs):
                if getattr(g, "kind", None) == "gl" and "idx" in op.attrs:
                    axes, first = out.setdefault(g.name, (set(self.broadcast.get(g.name, ())), {}))
                    n = len(op.attrs["idx"])
                    if op.name == "store_sum" and g is op.srcs[1]:
                        n = max(n, 3)   # the parts: depth holds each tile's count of slices
                    axes.update(range(4 - n, 4))
                    for ax in range(4 - n):
                        first.setdefault(ax, op)
        return out

    def walk(self):
        return walk(self.body)

    def __str__(self):
        from .printer import format_kernel
        return format_kernel(self)
