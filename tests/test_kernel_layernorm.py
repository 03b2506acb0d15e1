"""Residual add + layernorm (dropout with p = 0 until tl.dropout lands) on every backend against float64."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tiles import dtypes
from tiles.kernels.layernorm import has_dropout, layernorm
from tiles.testing import assert_close, random_array


def up(a):
    return np.asarray(a).astype(np.float64)


def reference_layernorm(x, residual, weight, bias, eps, keep=None, p=0.0):
    """float64 (Y, H); Y normalizes H rounded to x's dtype, as the kernel returns it."""
    dropped = up(x) if keep is None else np.where(keep, up(x) / (1 - p), 0.0)
    h = dtypes.of(x).round(up(residual) + dropped).astype(np.float64)
    mean = h.mean(-1, keepdims=True)
    var = ((h - mean) ** 2).mean(-1, keepdims=True)
    return (h - mean) / np.sqrt(var + eps) * up(weight) + up(bias), h


@settings(max_examples=6)
@given(rows=st.integers(1, 80), cols=st.integers(1, 300), dtype=st.sampled_from(["bf16", "f16", "f32"]),
       shift=st.sampled_from([0.0, 30.0]))
def test_residual_layernorm(backend, rows, cols, dtype, shift):
    x = random_array((rows, cols), dtype)
    # a large common offset: what sum/sum-of-squares variance would lose to cancellation
    residual = (random_array((rows, cols), "f32") + shift).astype(x.dtype)
    weight = random_array((cols,), "f32")
    bias = random_array((cols,), "f32")
    y, h = layernorm(x, residual, weight, bias, eps=1e-5, backend=backend)
    ref_y, ref_h = reference_layernorm(x, residual, weight, bias, 1e-5)
    assert_close(h, ref_h, dtype, what="H")
    assert_close(y, ref_y, dtype, what="Y")


def test_layernorm_bad_input():
    x = random_array((4, 8), "bf16")
    w = random_array((8,), "f32")
    with pytest.raises(ValueError, match="expected x and residual"):
        layernorm(x, x[:2], w, w)
    with pytest.raises(ValueError, match="dropout probability"):
        layernorm(x, x, w, w, p=1.0)


@pytest.mark.skipif(has_dropout(), reason="tl.dropout exists: the dropout tests run instead")
def test_dropout_needs_the_op():
    x = random_array((4, 8), "bf16")
    w = random_array((8,), "f32")
    with pytest.raises(NotImplementedError, match="tl.dropout"):
        layernorm(x, x, w, w, p=0.1)
