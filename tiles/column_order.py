"""Register tiles whose column order no op observes.

A row kernel (a norm, a softmax, an elementwise epilogue) loads tiles from global memory, combines them element by
element, reduces their rows and scales rows by vectors, and stores them back. None of that depends on which
register holds which column of a row, so long as every tile that meets another element by element holds them in
the same order. A backend may then give such tiles a layout of its own for their global loads and stores (CUDA:
runs of contiguous columns a lane, `tc::load_runs`, for 16-byte accesses where the MMA fragment order takes 4-byte
ones). What observes the order and so keeps a tile in the fragment order: a matrix product, a shared tile (the
ldmatrix path), column vectors and column reductions, causal masks and dropout (they compute each element's
column), swapping pairs, atomics and split sums. A bounds mask does not: the backend tests each element's column in
its class's order (CUDA: `tc::bounds_mask<tc::runs_order>`), so that a norm's last column block, masked past the
row's end, keeps the runs. (HIP's layouts are data that every op reads, so there only a matrix product
fixes a class: backends/hip/codegen.py, _row_runs, on Classes below.)
"""
from __future__ import annotations

from . import ir
from .types import GL, RT, RV

# ops that combine tiles element by element, or whose result is the same whatever the order within a row
ELEMENTWISE = frozenset(ir.UNARY + ir.BINARY + ("copy", "where", "zero", "fill"))
ROW_WISE = frozenset([f"{over}_{r}" for over in ("row", "tile") for r in ir.REDUCE] +
                     [f"{b}_row" for b in ir.BROADCAST])
COL_BROADCAST = frozenset(f"{b}_col" for b in ir.BROADCAST)


class Classes:
    """Tiles (by any key: a name, an id) in classes that ops tie together: union-find."""

    def __init__(self):
        self.parent: dict = {}

    def find(self, x):
        while self.parent.setdefault(x, x) != x:
            x = self.parent[x]
        return x

    def join(self, xs):
        xs = list(xs)
        for x in xs[1:]:
            self.parent[self.find(x)] = self.find(xs[0])

    def members(self, items, key=id) -> dict:
        """items grouped by class: the class's representative -> its items."""
        out: dict = {}
        for x in items:
            out.setdefault(self.find(key(x)), []).append(x)
        return out


def free_tiles(k: ir.Kernel) -> set[str]:
    """Names of the register tiles and column vectors of k that may hold each row's columns in any order shared by
    their class (tiles joined by elementwise ops, row-wise ops, bounds masks and column broadcasts), in the classes
    that a load from or a store to a global touches (where the order pays; a column vector only by a load, in the
    tiles' order). A column vector met otherwise (a column reduction, a shared vector, a store) keeps its class in
    the fragment order."""
    classes = Classes()
    fixed, accessed = set(), set()
    for op, _ in k.walk():
        operands = (op.dst, *op.srcs)
        tiles = [x for x in operands if isinstance(x, RT)]
        cols = [x for x in operands if isinstance(x, RV) and x.axis == "cols"]
        if not tiles and not cols:
            continue
        names = [t.name for t in tiles + cols]
        to_global = any(isinstance(x, GL) for x in operands)
        if any(t.layout != "row" for t in tiles):   # an mma operand's transposed fragments
            fixed.update(names)
        elif op.name in ("load", "store") and to_global and len(names) == 1 and (tiles or op.name == "load"):
            accessed.update(names)
        elif op.name in ELEMENTWISE or op.name in ROW_WISE or op.name in COL_BROADCAST or op.name == "bounds_mask":
            if (any((t.rows, t.cols) != (tiles[0].rows, tiles[0].cols) for t in tiles)
                    or tiles and any(c.length != tiles[0].cols for c in cols)):
                fixed.update(names)
            classes.join(names)
        else:
            fixed.update(names)
    fixed_roots = {classes.find(n) for n in fixed}
    free = {classes.find(n) for n in accessed} - fixed_roots
    return {n for n in list(classes.parent) if classes.find(n) in free}
