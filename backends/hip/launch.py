"""What every HIP launch shares (device and CPU emulator): the generated kernel per traced IR, the grid,
and the checks and argument packing done before any launch."""
from __future__ import annotations

import numpy as np

from tiles import interp, ir
from tiles.dsl import TileError
from tiles.types import GL

from . import codegen

GL_DIMS = np.dtype([(f, np.int32) for f in ("batch", "depth", "rows", "cols", "sb", "sd", "sr")])
_cache: dict = {}


def generated(k: ir.Kernel, target: str) -> codegen.Generated:
    key = (id(k), target)
    if key not in _cache or _cache[key][0] is not k:
        _cache[key] = (k, codegen.generate(k, target))
    return _cache[key][1]


def grid(g: codegen.Generated, env: dict) -> tuple:
    dims = [int(ir.evaluate(e, env)) for e in g.kernel.grid]
    if any(d < 1 for d in dims):
        return ()
    return tuple(dims) + (1,) * (3 - len(dims))


def dims_of(p: GL, a) -> np.ndarray:
    """The gl_dims of an array (its 4-D view with leading 1s); buffer offsets are 32-bit, so < 2 GiB."""
    shape = (1,) * (4 - a.ndim) + tuple(a.shape)
    strides = (0,) * (4 - a.ndim) + tuple(s // a.itemsize for s in a.strides)
    if a.nbytes >= 2**31:
        raise TileError(f"argument {p.name}: {a.nbytes} bytes; the HIP backend addresses globals through 32-bit "
                        "buffer offsets (at most 2 GiB per array)")
    if any(s < 0 for s in strides):
        raise TileError(f"argument {p.name}: negative strides {strides} are not supported")
    return np.array(tuple(shape) + tuple(strides[:3]), dtype=GL_DIMS)


def bind(g: codegen.Generated, args) -> dict:
    """The scalar environment (extents, scalar arguments) the grid is evaluated in."""
    return interp.bind(g.kernel, args)
