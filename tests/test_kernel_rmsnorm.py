"""RMSNorm on every backend against float64."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tiles.kernels.rmsnorm import rmsnorm
from tiles.testing import assert_close, random_array


def reference_rmsnorm(x, weight, eps):
    """float64 (Y, RSTD)."""
    xf = np.asarray(x, np.float64)
    rstd = 1.0 / np.sqrt((xf * xf).mean(-1, keepdims=True) + eps)
    return xf * rstd * np.asarray(weight, np.float64), rstd.reshape(-1)


@settings(max_examples=6)
@given(rows=st.integers(1, 80), cols=st.integers(1, 300), dtype=st.sampled_from(["bf16", "f16", "f32"]),
       wdtype=st.sampled_from(["bf16", "f32"]), scale=st.sampled_from([1.0, 1e-3, 30.0]))
def test_rmsnorm(backend, rows, cols, dtype, wdtype, scale):
    x = random_array((rows, cols), dtype, scale=scale)
    weight = random_array((cols,), wdtype)
    y, rstd = rmsnorm(x, weight, eps=1e-6, backend=backend)
    ref_y, ref_rstd = reference_rmsnorm(x, weight, 1e-6)
    assert_close(rstd, ref_rstd, "f32", tol=1e-5, what="RSTD")
    assert_close(y, ref_y, dtype, what="Y")


def test_rmsnorm_leading_dims():
    x = random_array((2, 3, 40), "bf16")
    w = random_array((40,), "bf16")
    y, rstd = rmsnorm(x, w)
    ref_y, ref_rstd = reference_rmsnorm(x, w, 1e-6)
    assert y.shape == x.shape and rstd.shape == (6,)
    assert_close(y, ref_y, "bf16")


def test_rmsnorm_bad_input():
    x = random_array((4, 8), "bf16")
    with pytest.raises(ValueError, match="expected x"):
        rmsnorm(x, random_array((7,), "bf16"))

