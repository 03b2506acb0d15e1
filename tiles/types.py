"""Tile types. A tile object is both the type and the variable: the IR refers to tiles by identity."""
from __future__ import annotations

from dataclasses import dataclass

from . import dtypes, ir


class Tile:
    kind = "?"
    name: str
    dtype: dtypes.DType

    @property
    def shape(self) -> tuple:
        raise NotImplementedError

    def __repr__(self):
        return self.name


ALIGN = 16   # bytes: the widest access any backend makes (16-byte vectors: cp.async, loads and stores in runs)


@dataclass(eq=False, repr=False)
class GL(Tile):
    """A global array argument, seen as 4-D (batch, depth, rows, cols). dims[i] is an int (static) or ir.Dim."""
    name: str
    dtype: dtypes.DType
    dims: tuple
    rank: int  # the rank the caller's array has (1..4); leading dims beyond it are 1
    # the traced-for array starts on an ALIGN-byte boundary and steps by whole ALIGN-byte units along every dim but
    # its last (dsl.ArgSpec): a launch on other arrays traces again, so the device code may take it as given
    aligned: bool = False
    kind = "gl"

    @property
    def shape(self):
        return self.dims

    batch = property(lambda s: s.dims[0])
    depth = property(lambda s: s.dims[1])
    rows = property(lambda s: s.dims[2])
    cols = property(lambda s: s.dims[3])

    def type_str(self):
        dims = ", ".join(str(d) if isinstance(d, int) else ir.fmt(d) for d in self.dims[4 - self.rank:])
        return f"gl<{self.dtype}>[{dims}]"


@dataclass(eq=False, repr=False)
class ST(Tile):
    """A shared-memory tile of the block."""
    name: str
    dtype: dtypes.DType
    rows: int
    cols: int
    kind = "st"

    @property
    def shape(self):
        return (self.rows, self.cols)

    def type_str(self):
        return f"st<{self.dtype}, {self.rows}x{self.cols}>"


@dataclass(eq=False, repr=False)
class RT(Tile):
    """A register tile of the block; its rows are split over the block's workers."""
    name: str
    dtype: dtypes.DType
    rows: int
    cols: int
    layout: str = "row"  # "row" | "col": which operand position of an mma it can take without a swap
    kind = "rt"

    @property
    def shape(self):
        return (self.rows, self.cols)

    def type_str(self):
        return f"rt<{self.dtype}, {self.rows}x{self.cols}, {self.layout}>"


@dataclass(eq=False, repr=False)
class SV(Tile):
    """A shared-memory vector."""
    name: str
    dtype: dtypes.DType
    length: int
    kind = "sv"

    @property
    def shape(self):
        return (self.length,)

    def type_str(self):
        return f"sv<{self.dtype}, {self.length}>"


@dataclass(eq=False, repr=False)
class RV(Tile):
    """A register vector. axis="rows": one value per row of a tile, split over the workers like the rows;
    axis="cols": one value per column, every worker holds all of it."""
    name: str
    dtype: dtypes.DType
    length: int
    axis: str = "rows"
    kind = "rv"

    @property
    def shape(self):
        return (self.length,)

    def type_str(self):
        return f"rv<{self.dtype}, {self.length}, {self.axis}>"


def is_tile(x) -> bool:
    return isinstance(x, (ST, RT, SV, RV))


def is_vector(x) -> bool:
    return isinstance(x, (SV, RV))
