"""Row softmax on every backend against float64."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tiles import toolchains
from tiles.backend import get
from tiles.dsl import TileError
from tiles.kernels.softmax import row_plan, softmax, softmax_apply, softmax_fwd, softmax_rows
from tiles.testing import assert_close, poisoned, random_array
from tiles.tune import Shaped


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
    """Staged, rows reach shared memory as 16-byte cp.async copies and leave it as 16-byte stores (the unaligned
    fallback of the same functions compiles too, as element-wise accesses)."""
    why = toolchains.cannot_compile(target)
    if why:
        pytest.skip(why)
    plan = row_plan(16384, 4096)
    x = random_array((4, 4096 // plan["K"], plan["K"]), "bf16")
    sass = toolchains.emit(softmax_rows, [x, x], target, "sass", **{**plan, "staged": True})
    assert "LDGSTS.E.BYPASS.128" in sass and "STG.E.128" in sass


# a 16-byte load and store as each vendor's code spells them, and how many a decode step's softmax_apply holds:
# (what emit gives, load, store, count)
CUDA_16, HIP_16 = ("sass", "LDG.E.128", "STG.E.128", 16), ("asm", "buffer_load_dwordx4", "buffer_store_dwordx4", 8)
SIXTEEN_BYTES = {"sm_80": CUDA_16, "sm_90a": CUDA_16, "gfx942": HIP_16, "gfx950": HIP_16}


@pytest.mark.parametrize("target", list(SIXTEEN_BYTES))
def test_decode_rows_move_16_byte_runs(target):
    """softmax_apply at a decode step (one row of 128256 in a 16-row tile: every tile runs past the rows' end)
    reads and writes 16-byte runs in two paths, a whole tile's and that of one past the rows' end, half the count
    each: CUDA 8 LDG.E.128 and 8 STG.E.128 a path (tiles_cuda/memory.cuh read_inside, write_runs), CDNA 4
    buffer_load_dwordx4 and 4 buffer_store_dwordx4, a run past the rows' end at the OOB offset (tiles_hip/global.hpp,
    runs::fit_cols). Before, such tiles went element by element, and only the whole tile's path held runs."""
    why = toolchains.cannot_compile(target)
    if why:
        pytest.skip(why)
    what, load, store, count = SIXTEEN_BYTES[target]
    x, parts = Shaped((1, 128256), "bf16"), Shaped((128, 1), "f32")
    code = toolchains.emit(softmax_apply, [x, x, parts, parts], target, what, BR=16, BC=128, SPLIT=128, workers=1)
    assert code.count(load) == count and code.count(store) == count


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


@settings(max_examples=5)
@given(rows=st.integers(1, 70), cols=st.integers(1, 700), split=st.sampled_from([1, 2, 3, 4, 8, 12, 24]),
       dtype=st.sampled_from(["bf16", "f16", "f32"]), masked=st.sampled_from([False, True]),
       small=st.sampled_from([False, True]), rising=st.booleans())
def test_softmax_split_over_blocks(backend, rows, cols, split, dtype, masked, small, rising):
    """Each row's columns split over SPLIT blocks (split_plan: each part's (max, sum) pairs, then merged and
    normalized): parts with no columns past a short row's end, and rows whose first third is -inf (a part of only
    -inf must weigh nothing), against float64; the output poisoned first. small: split_columns' tile for few
    rows (16 rows, one worker). rising: each part's max above the last's, so that every chunk of a merge moves the
    running max and rescales the sum."""
    x = random_array((rows, cols), dtype, scale=8.0)
    if rising:
        x = (x.astype(np.float64) + np.linspace(0.0, 40.0, cols)).astype(x.dtype)
    if masked and cols >= 3:
        x[:, : cols // 3] = -np.inf
    y = poisoned((rows, cols), dtype)
    softmax_fwd(y, x, backend=backend, SPLIT=split, **(dict(BR=16, workers=1) if small else {}))
    assert_close(y, reference_softmax(x), dtype)


def test_softmax_split_needs_its_plan():
    """Traced alone with SPLIT > 1, softmax_fwd refuses: its parts' maxes and sums come from split_plan; and two
    temporaries of one shape are two arrays (the maxes must not land in the sums)."""
    x = random_array((4, 300), "f32")
    with pytest.raises(TileError, match="from split_plan"):
        softmax_fwd.trace([x, x], "sm_80", SPLIT=2)
    (_, (_, _, m, l), _), (_, (_, _, m2, l2), _) = get("reference").steps(softmax_fwd, [x.copy(), x], {"SPLIT": 4})
    assert m.shape == l.shape == (4, 4) and not np.shares_memory(m, l) and m is m2 and l is l2


@pytest.mark.parametrize("target, rows, cols, want", [
    # a decode step over Llama 3's vocabulary: one 64-row block without the split
    ("sm_90a", 16, 128256, dict(SPLIT=128, BR=16, workers=1)),
    ("sm_90a", 4096, 50257, dict(SPLIT=8)),   # 64 blocks of 64 rows: 8 parts of 49 column blocks, 4 blocks an SM
    ("sm_90a", 64, 151936, dict(SPLIT=128)),  # one row block: 128 parts; 256 would be parts of ~5 column blocks
    ("sm_80", 1, 128256, dict(SPLIT=64, BR=16, workers=1)),
    ("gfx950", 64, 151936, dict(SPLIT=256)),   # 256 CUs (MI355X); 64 rows fill a 64-row block
    ("apple", 16, 128256, dict(SPLIT=32, BR=16, workers=1)),
    ("sm_90a", 16, 600, {}),                   # five column blocks: no part of four
])
def test_softmax_splits_rows_too_few_to_fill_the_gpu(target, rows, cols, want):
    a = [Shaped((rows, cols), "bf16")] * 2
    assert softmax_fwd.shape_config(target, a) == want
    assert softmax_fwd.shape_config(None, a) == {}
