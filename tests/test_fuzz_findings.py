"""Regression tests for what `tiles fuzz` found (issue 16), each named after its finding, on every backend."""
import numpy as np

import tiles as tl
from tiles.testing import assert_close, poisoned, random_array, run

R, C = 16, 64


@tl.kernel
def int_scalar_maps(Y, X):
    br, bc = tl.grid(tl.cdiv(X.rows, R), tl.cdiv(X.cols, C))
    x = tl.regs(tl.f32, R, C)
    y = tl.regs(tl.f32, R, C)
    tl.load(x, X, (br, bc))
    tl.max(y, x, 0)       # integer scalars: the HIP header's scalar overload took only float
    tl.mul(y, y, -3)
    tl.store(Y, y, (0, br, bc))
    tl.pow(y, x, 2)
    tl.store(Y, y, (1, br, bc))


def test_hip_binary_map_with_an_int_scalar(backend):
    """fuzz seed 2: `tl.max(t, t, 2)` failed to compile for gfx942/gfx950 ('int' is not a class)."""
    x = random_array((40, 70), "f32")
    y = poisoned((2, 40, 70), "f32")
    run(backend, int_scalar_maps, y, x)
    assert_close(y[0], np.maximum(x.astype(np.float64), 0) * -3, "f32")
    assert_close(y[1], x.astype(np.float64) ** 2, "f32")
