import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st

from tiles import dtypes


@given(st.floats(-1e4, 1e4, allow_nan=False, width=32))
def test_bf16_rounds_to_nearest_even(x):
    bits = np.array([x], np.float32).view(np.uint32)[0]
    lsb = (bits >> 16) & 1
    expect = np.array([(bits + 0x7FFF + lsb) & 0xFFFF0000], np.uint32).view(np.float32)[0]
    assert dtypes.bf16.round(x) == expect


def test_fp8_e4m3_saturates_instead_of_nan():
    assert dtypes.fp8e4m3.round(1e6) == 448.0 and dtypes.fp8e4m3.round(-1e6) == -448.0
    assert np.isnan(dtypes.fp8e4m3.round(np.nan))
    assert dtypes.fp8e5m2.round(3.3) == np.float32(ml_dtypes.float8_e5m2(3.3))


def test_of_accepts_names_numpy_and_torch_style():
    assert dtypes.of("bf16") is dtypes.bf16
    assert dtypes.of(np.zeros(2, ml_dtypes.bfloat16)) is dtypes.bf16
    assert dtypes.of("torch.float16") is dtypes.f16
    with pytest.raises(TypeError, match="no tiles equivalent"):
        dtypes.of(np.zeros(2, np.float64))
