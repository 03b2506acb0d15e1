"""Row softmax on every backend against float64."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tiles import toolchains
from tiles.kernels.softmax import row_plan, softmax, softmax_rows
from tiles.testing import assert_close, random_array


def reference_softmax(x):
    x = np.asarray(x).astype(np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@settings(max_examples=6)
@given(rows=st.integers(1, 100), cols=st.integers(1, 300), dtype=st.sampled_from(["bf16", "f16", "f32"]),
       scale=st.sampled_from([1.0, 8.0]))
def test_softmax(backend, rows, cols, dtype, scale):
    x = random_array((rows, cols), dtype, scale=scale)
    y = softmax(x, backend=backend)
    assert y.dtype == x.dtype
    assert_close(y, reference_softmax(x), dtype)


def test_softmax_keeps_leading_dims(backend):
    x = random_array((2, 3, 17), "bf16")
    y = softmax(x, backend=backend)
    assert y.shape == x.shape
    assert_close(y, reference_softmax(x), "bf16")


@settings(max_examples=4)
@given(rows=st.integers(1, 40), units=st.integers(1, 40), dtype=st.sampled_from(["bf16", "f16", "f32"]),
       rows_per_block=st.sampled_from([1, 3]), staged=st.sampled_from([True, False]))
def test_softmax_one_pass(backend, rows, units, dtype, rows_per_block, staged):
    """Rows of a multiple of 16 take the one-pass kernel (the row held on chip as one tile); several rows
    per block, the last block's past the end; through shared memory or straight into registers (CUDA: in runs,
    the mask of the tile rows past the row's end testing rows only)."""
    cols = 16 * units
    assert row_plan(rows, cols) is not None
    x = random_array((rows, cols), dtype, scale=8.0)
    y = softmax(x, backend=backend, RPB=rows_per_block, staged=staged)
    assert_close(y, reference_softmax(x), dtype)


@settings(max_examples=3)
@given(rows=st.integers(1, 20), units=st.integers(2, 40), dtype=st.sampled_from(["bf16", "f32"]),
       staged=st.sampled_from([True, False]))
def test_softmax_one_pass_with_minus_infinity(backend, rows, units, dtype, staged):
    """-inf inputs (a mask applied before the softmax) weigh nothing, also where a whole tile row of the one-pass
    kernel holds nothing else: that row's max is -inf, and its pair must not turn the row's sum into NaN."""
    cols = 16 * units
    x = random_array((rows, cols), dtype, scale=8.0)
    x[:, : cols // 2] = -np.inf
    x[:, -1] = -np.inf
    y = softmax(x, backend=backend, staged=staged)
    with np.errstate(over="ignore", invalid="ignore"):
        assert_close(y, reference_softmax(x), dtype)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_one_pass_moves_16_byte_chunks_on_cuda(target):
    """Rows reach shared memory as 16-byte cp.async copies and leave it as 16-byte stores (the unaligned
    fallback of the same functions compiles too, as element-wise accesses)."""
    why = toolchains.cannot_compile(target)
    if why:
        pytest.skip(why)
    plan = row_plan(16384, 4096)
    x = random_array((4, 4096 // plan["K"], plan["K"]), "bf16")
    sass = toolchains.emit(softmax_rows, [x, x], target, "sass", **plan)
    assert "LDGSTS.E.BYPASS.128" in sass and "STG.E.128" in sass


def test_row_barriers_skip_the_async_proxy_fence_without_wgmma():
    """On sm_90a the row kernel's barriers are plain (no wgmma or TMA reads its shared tiles); asking for wgmma
    brings the fence back (MEMBAR + FENCE.VIEW.ASYNC before each barrier)."""
    why = toolchains.cannot_compile("sm_90a")
    if why:
        pytest.skip(why)
    plan = row_plan(16384, 4096)
    x = random_array((4, 4096 // plan["K"], plan["K"]), "bf16")
    plain = toolchains.emit(softmax_rows, [x, x], "sm_90a", "sass", **plan)
    fenced = toolchains.emit(softmax_rows, [x, x], "sm_90a", "sass", wgmma=True, **plan)
    assert "BAR.SYNC" in plain and "FENCE.VIEW.ASYNC" not in plain and "MEMBAR" not in plain
    assert "FENCE.VIEW.ASYNC" in fenced
