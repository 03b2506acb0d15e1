"""What every C-family backend (CUDA C++, HIP C++, MSL) shares: scalar expressions as C, and a source writer."""
from __future__ import annotations

import math
import os
from typing import Callable, Sequence

from . import dtypes, ir


# The prefix of every generated kernel's symbol. A kernel's Python name may be any identifier, and as a symbol
# it would share one namespace with the C library (a kernel named `select` or `exp` in a CPU engine's build),
# the device math library, C++ and MSL words (`main`, `new`) and the header libraries: no name of any of
# them starts with this prefix, so nothing a user names a kernel can collide.
SYMBOL_PREFIX = "tiles_kernel_"


def fresh_name(base: str, taken: set) -> str:
    """base, or base with underscores appended, whichever first is not in taken (which it then joins)."""
    while base in taken:
        base += "_"
    taken.add(base)
    return base


def facts(k: ir.Kernel, aligned: Callable[[object], str], expr: Callable[[ir.Expr], str]) -> list[str]:
    """C conditions of what every launch of k checked on the host (ir.given; GL.aligned as aligned(param)), for a
    backend to state as facts its compiler may use; none under TILES_GIVEN=0 (to time a kernel without them)."""
    if os.environ.get("TILES_GIVEN", "1") == "0":
        return []
    return ([aligned(p) for p in k.params if getattr(p, "aligned", False)] +
            [f"{expr(c.a)} {c.op} {expr(c.b)}" for c in ir.given(k)])


def symbol(k: ir.Kernel) -> str:
    """The generated kernel's symbol (what a runtime, a CPU engine or a profiler looks up)."""
    return SYMBOL_PREFIX + k.name


def c_float(v: float) -> str:
    if math.isinf(v):
        return "-INFINITY" if v < 0 else "INFINITY"
    if math.isnan(v):
        return "NAN"
    return repr(float(v)) + "f"


def default_names(e: ir.Expr) -> str:
    """The C name of a leaf: dims as `A.rows`, scalars by name, block indices and loop variables."""
    if isinstance(e, ir.Dim):
        return f"{e.arg}.{ir.Dim.NAMES[e.axis]}"
    if isinstance(e, ir.ScalarArg):
        return e.name
    if isinstance(e, ir.BlockIdx):
        return f"block_{'xyz'[e.axis]}"
    if isinstance(e, ir.LoopVar):
        return e.name
    raise TypeError(e)


def c_expr(e: ir.Expr, names: Callable[[ir.Expr], str] = default_names) -> str:
    """C source of a scalar expression. cdiv/min/max become tiles_cdiv/min/max, which each header library
    defines; // and % are C's integer ones (operands are non-negative in kernels), / is exact."""
    if isinstance(e, ir.Const):
        return c_float(e.value) if e.dtype == dtypes.f32 else str(int(e.value))
    if isinstance(e, ir.BinOp):
        a, b = c_expr(e.a, names), c_expr(e.b, names)
        if e.op == "/" and e.a.dtype != dtypes.f32 and e.b.dtype != dtypes.f32:
            a = f"(float){a}"  # the IR's / divides exactly; C's / of two ints would truncate
        return f"({a} {'/' if e.op == '//' else e.op} {b})"
    if isinstance(e, ir.Call):
        return f"tiles_{e.fn}({', '.join(c_expr(a, names) for a in e.args)})"
    return names(e)


def block_indices(ids: Sequence[str], group: str | None = None, sizes: Sequence[str] = (),
                  order: str | None = None, x: str = "block_x") -> list[str]:
    """C lines naming the block's tl.grid indices block_x, block_y, block_z from ids, the block's position along
    each axis of the launch (blockIdx.x, ...). With a group (tl.grid(group=g), in C; sizes: the grid's sizes),
    rows and columns follow from the block's position in the launch order within its z slice: `order` where a
    backend walks or reorders the launch itself (a persistent walk, HIP's chiplets), else ids[1] * rows + ids[0];
    the header libraries' tiles_group_row/col map it. x: the name for axis 0's index (a backend that derives
    block_x from it)."""
    names = (x, "block_y", "block_z")
    if group is None:
        return [f"const int {names[a]} = {i};" for a, i in enumerate(ids)]
    rows, cols = sizes[0], sizes[1]
    lines = ["// the blocks in the order they start: column by column (y) within groups of block_group rows (x)",
             f"const int block_group = {group}, block_order = {order or f'{ids[1]} * {rows} + {ids[0]}'};",
             f"const int {x} = tiles_group_row(block_order, {rows}, {cols}, block_group);",
             f"const int block_y = tiles_group_col(block_order, {rows}, {cols}, block_group);"]
    return lines + [f"const int block_z = {i};" for i in ids[2:]]


class Writer:
    """Indented source text."""

    def __init__(self, indent: str = "    "):
        self.lines: list[str] = []
        self.depth, self.indent = 0, indent

    def __call__(self, line: str = "") -> "Writer":
        self.lines.append(self.indent * self.depth + line if line else "")
        return self

    def block(self, head: str, tail: str = "}"):
        """with w.block("for (...) {"): ... — writes head, indents the body, writes tail."""
        w = self

        class _Block:
            def __enter__(self):
                w(head)
                w.depth += 1

            def __exit__(self, *exc):
                w.depth -= 1
                w(tail)
        return _Block()

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
