"""Fused dropout + residual add + layernorm on every backend against float64, the mask from tiles/philox.py."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tiles import dtypes, philox, toolchains
from tiles.dsl import TileError
from tiles.kernels.layernorm import launch_plan, layernorm, layernorm_fwd, layernorm_rows
from tiles.testing import assert_close, poisoned, random_array
from tiles.tune import Shaped


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
    assert_close(y, ref_y, dtype, what="Y", tol=centering_tol(ref_h, dtype))


def centering_tol(h, dtype):
    """f32's tolerance, widened by the conditioning of centering: an f32 mean of a row carries an error of about
    2^-24 |mean|, which Y divides by the row's standard deviation (two columns 30 +- 0.05 apart: ~1e-5)."""
    if dtype != "f32":
        return None
    cond = (np.abs(h.mean(-1)) / np.maximum(h.std(-1), 1e-30)).max()
    return max(1e-5, 32 * 2.0 ** -24 * cond)


@settings(max_examples=4)
@given(rows=st.integers(1, 40), units=st.integers(1, 40), dtype=st.sampled_from(["bf16", "f16", "f32"]),
       rows_per_block=st.sampled_from([1, 3]), staged=st.sampled_from([True, False]))
def test_layernorm_one_pass(backend, rows, units, dtype, rows_per_block, staged):
    """Rows of a multiple of 16 without dropout take the one-pass kernel (the row held on chip as one tile);
    several rows per block, the last block's past the end; a large offset, as above; through shared memory or
    straight into registers (CUDA: in runs)."""
    cols = 16 * units
    assert launch_plan(rows, cols) is not None and launch_plan(rows, cols, p=0.1) is None
    x = random_array((rows, cols), dtype)
    residual = (random_array((rows, cols), "f32") + 30.0).astype(x.dtype)
    weight, bias = random_array((cols,), dtype), random_array((cols,), dtype)
    y, h = layernorm(x, residual, weight, bias, eps=1e-5, backend=backend, RPB=rows_per_block,
                     staged=staged)
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


def test_philox_known_answers():
    """Random123's known-answer vectors for Philox 4x32-10: the generator the dropout mask is defined by."""
    kat = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
           ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
           ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
            (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for counter, key, words in kat:
        assert tuple(int(w) for w in philox.philox4x32(counter, key)) == words
    u = philox.uniform(7, 3, np.arange(256)[:, None], np.arange(256)[None, :])
    assert u.dtype == np.float32 and 0.0 <= u.min() and u.max() < 1.0
    assert abs(float(u.mean()) - 0.5) < 0.01 and len(np.unique(u)) > 65000


@settings(max_examples=4)
@given(rows=st.integers(1, 80), cols=st.integers(1, 300), dtype=st.sampled_from(["bf16", "f32"]),
       p=st.sampled_from([0.1, 0.5]), seed=st.integers(0, 2**31 - 1), offset=st.integers(0, 2**20))
def test_dropout_residual_layernorm(backend, rows, cols, dtype, p, seed, offset):
    x = random_array((rows, cols), dtype)
    residual = random_array((rows, cols), dtype)
    weight = random_array((cols,), "f32")
    bias = random_array((cols,), "f32")
    y, h = layernorm(x, residual, weight, bias, p=p, seed=seed, offset=offset, backend=backend)
    keep = philox.keep_mask(seed, offset, np.arange(rows)[:, None], np.arange(cols)[None, :], p)
    ref_y, ref_h = reference_layernorm(x, residual, weight, bias, 1e-5, keep, np.float32(p))
    assert_close(h, ref_h, dtype, what="H")
    assert_close(y, ref_y, dtype, what="Y")


def test_dropout_mask_is_the_reference_mask(backend):
    """With a zero residual, H is nonzero exactly where the mask keeps: every element is checked."""
    rows, cols, p, seed, offset = 70, 200, 0.3, 1234567, 99
    x = random_array((rows, cols), "bf16")
    zero = np.zeros_like(x)
    _, h = layernorm(x, zero, random_array((cols,), "f32"), random_array((cols,), "f32"),
                     p=p, seed=seed, offset=offset, backend=backend)
    keep = philox.keep_mask(seed, offset, np.arange(rows)[:, None], np.arange(cols)[None, :], p)
    np.testing.assert_array_equal(h.astype(np.float64) != 0, keep)
    assert abs(keep.mean() - (1 - p)) < 0.02
    other = philox.keep_mask(seed, offset + 1, np.arange(rows)[:, None], np.arange(cols)[None, :], p)
    assert (other != keep).mean() > 0.3  # the offset moves the stream


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_one_pass_moves_16_byte_chunks_on_cuda(target):
    """X and R reach shared memory as 16-byte cp.async copies, H and Y leave it as 16-byte stores."""
    why = toolchains.cannot_compile(target)
    if why:
        pytest.skip(why)
    plan = launch_plan(16384, 4096)
    x = random_array((4, 4096 // plan["K"], plan["K"]), "bf16")
    sass = toolchains.emit(layernorm_rows, [x, x, x, x, x[0], x[0], 1e-5], target, "sass", **{**plan, "staged": True})
    assert "LDGSTS.E.BYPASS.128" in sass and "STG.E.128" in sass


@settings(max_examples=5)
@given(rows=st.integers(1, 60), cols=st.integers(1, 600), split=st.sampled_from([1, 2, 3, 4, 8, 12, 24]),
       dtype=st.sampled_from(["bf16", "f16", "f32"]), p=st.sampled_from([0.0, 0.3]), small=st.sampled_from([False, True]))
def test_layernorm_split_over_blocks(backend, rows, cols, split, dtype, p, small):
    """Each row's columns split over SPLIT blocks (split_plan: H and each part's mean and squared deviations, then
    merged by Chan's update and normalized), parts past a short row's end included: against the one-launch
    kernel on the same inputs, H bit for bit (the same dropout mask, element by element), Y to the dtype's
    tolerance, and without dropout against float64; the outputs poisoned first."""
    x = random_array((rows, cols), dtype)
    r = (random_array((rows, cols), "f32") + 30.0).astype(x.dtype)
    w, b = random_array((cols,), dtype), random_array((cols,), dtype)
    outs = []
    for s, kw in ((1, {}), (split, dict(BR=16, workers=1) if small else {})):
        y, h = poisoned((rows, cols), dtype), poisoned((rows, cols), dtype)
        layernorm_fwd(y, h, x, r, w, b, 1e-5, p, 7, 11, backend=backend, dropout=p > 0, SPLIT=s, **kw)
        outs.append((y, h))
    np.testing.assert_array_equal(outs[1][1], outs[0][1])
    assert_close(outs[1][0], outs[0][0].astype(np.float64), dtype, what="Y split against one launch")
    if p == 0:
        ref_y, ref_h = reference_layernorm(x, r, w, b, 1e-5)
        assert_close(outs[1][1], ref_h, dtype, what="H")
        assert_close(outs[1][0], ref_y, dtype, what="Y")


def test_layernorm_splits_rows_too_few_to_fill_the_gpu():
    """Past ROW_MAX columns at a decode step each row goes over many blocks; short rows, or rows enough to fill the
    GPU, keep one launch; traced alone with SPLIT > 1 the kernel refuses (its statistics come from the plan)."""
    def args(r, c):
        x, v = Shaped((r, c), "bf16"), Shaped((c,), "bf16")
        return [x, x, x, x, v, v, 1e-5, 0.0, 0, 0]
    assert layernorm_fwd.shape_config("sm_90a", args(16, 32768)) == dict(SPLIT=64, BR=16, workers=1)
    assert layernorm_fwd.shape_config("sm_90a", args(100, 1000)) == {}
    assert layernorm_fwd.shape_config("sm_90a", args(16384, 20000)) == dict(SPLIT=2)   # 256 blocks: 4 an SM with two
    assert layernorm_fwd.shape_config("sm_90a", args(65536, 20000)) == {}
    x, v = random_array((4, 300), "f32"), random_array((300,), "f32")
    with pytest.raises(TileError, match="from split_plan"):
        layernorm_fwd.trace([x, x, x, x, v, v, 1e-5, 0.0, 0, 0], "sm_80", SPLIT=2)
