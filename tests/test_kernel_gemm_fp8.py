"""fp8 GEMM (e4m3, per-tensor scales, bf16 out) against float64 on every backend whose target has fp8."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tiles as tl
from tiles.kernels.gemm_fp8 import gemm_fp8, matmul_fp8, supports_fp8
from tiles.testing import assert_close, random_array


def needs_fp8(backend):
    if not supports_fp8(backend.target):
        pytest.skip(f"{backend.target} has no fp8 e4m3 (no fp8 MMA on this target)")


@settings(max_examples=6)
@given(m=st.integers(1, 200), n=st.integers(1, 200), k=st.integers(1, 200),
       scale_a=st.floats(0.01, 4.0), scale_b=st.floats(0.01, 4.0), spread=st.sampled_from([1.0, 60.0]))
def test_gemm_fp8(backend, m, n, k, scale_a, scale_b, spread):
    needs_fp8(backend)
    a = random_array((m, k), "fp8e4m3", scale=spread)
    b = random_array((n, k), "fp8e4m3", scale=spread)
    c = matmul_fp8(a, b, scale_a, scale_b, backend=backend)
    assert c.dtype == tl.bf16.np
    ref = a.astype(np.float64) @ b.astype(np.float64).T * np.float32(scale_a) * np.float32(scale_b)
    assert_close(c, ref, "bf16")


def test_gemm_fp8_refused_without_fp8():
    a = random_array((16, 32), "fp8e4m3")
    with pytest.raises(tl.TileError, match="does not support dtype fp8e4m3"):
        gemm_fp8.trace([np.zeros((16, 16), tl.bf16.np), a, a, 1.0, 1.0], "sm_80")


def test_gemm_fp8_shape_mismatch():
    a = random_array((16, 32), "fp8e4m3")
    b = random_array((16, 48), "fp8e4m3")
    with pytest.raises(ValueError, match="expected a"):
        matmul_fp8(a, b, 1.0, 1.0)
