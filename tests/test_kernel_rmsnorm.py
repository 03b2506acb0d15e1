"""RMSNorm on every backend against float64: the one-pass kernel where a row fits on chip, else two passes."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tiles import bench, toolchains
from tiles.dsl import TileError
from tiles.kernels.rmsnorm import ROW_MAX, launch_plan, rmsnorm, rmsnorm_fwd, rmsnorm_rows
from tiles.testing import assert_close, poisoned, random_array
from tiles.tune import Shaped


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


@settings(max_examples=6)
@given(rows=st.integers(1, 40), units=st.integers(1, 40), dtype=st.sampled_from(["bf16", "f16", "f32"]),
       wdtype=st.sampled_from(["bf16", "f32"]), scale=st.sampled_from([1.0, 1e-3, 30.0]),
       rows_per_block=st.sampled_from([1, 3]))
def test_rmsnorm_one_pass(backend, rows, units, dtype, wdtype, scale, rows_per_block):
    """Rows of a multiple of 16 columns (odd multiples too: C/K short of the tile's rows) take the one-pass kernel;
    several rows per block, the last block's past the end; outputs start as NaN (rmsnorm allocates them so)."""
    cols = 16 * units
    assert launch_plan(rows, cols) is not None
    x = random_array((rows, cols), dtype, scale=scale)
    weight = random_array((cols,), wdtype)
    y, rstd = rmsnorm(x, weight, eps=1e-6, backend=backend, RPB=rows_per_block)
    ref_y, ref_rstd = reference_rmsnorm(x, weight, 1e-6)
    assert_close(rstd, ref_rstd, "f32", tol=1e-5, what="RSTD")
    assert_close(y, ref_y, dtype, what="Y")


@pytest.mark.parametrize("rows", [7, 12])
def test_rmsnorm_rows_unstaged_several_rows_a_block(backend, rows):
    """Unstaged, three rows a block: the rows' loop stages nothing, so every backend writes it as a plain loop, and
    each row's whole-tile sum reuses the exchange the row before read (the last block's rows past the end repeat
    the last row)."""
    x, weight = random_array((rows, 80), "bf16"), random_array((80,), "bf16")
    src = toolchains.emit(rmsnorm_rows, [x.reshape(rows, 5, 16).copy(), np.zeros((rows, 1), np.float32),
                                         x.reshape(rows, 5, 16), weight.reshape(5, 16), 1e-6], "sm_90a", "source",
                          TR=16, K=16, RPB=3, staged=False)
    assert "tc::pipeline" not in src and "for (int i = 0; i < 3; ++i)" in src
    y, rstd = rmsnorm(x, weight, eps=1e-6, backend=backend, RPB=3, staged=False)
    ref_y, ref_rstd = reference_rmsnorm(x, weight, 1e-6)
    assert_close(rstd, ref_rstd, "f32", tol=1e-5, what="RSTD")
    assert_close(y, ref_y, "bf16", what="Y")


def test_plan_picks_one_pass_where_the_row_fits():
    """One pass for few rows (16 blocks of a row each, not one block looping over 16 rows' columns) and Llama's
    MLP width; two passes past ROW_MAX or off multiples of 16; `tiles compare rmsnorm` times the same choice."""
    assert launch_plan(16, 4096) == dict(TR=64, K=64, RPB=1)
    assert launch_plan(4096, 14336) is not None and launch_plan(4096, ROW_MAX) is not None
    # past 8192 columns one block an SM: 16 rows a block, 256 blocks (two waves of 132, not 4.4 of 7-row blocks)
    assert launch_plan(4096, 14336)["RPB"] == 16 and launch_plan(4096, 8192)["RPB"] == 4
    for rows, cols in ((4096, ROW_MAX + 16), (4096, 32768), (16, 4100)):
        assert launch_plan(rows, cols) is None
    w = bench.WORKLOADS["rmsnorm"]
    for shape, kfn in (("16x4096", rmsnorm_rows), ("4096x14336", rmsnorm_rows), ("4096x32768", rmsnorm_fwd)):
        assert w.kernel(w.parse(shape)) is kfn


def _rows_args(rows, cols):
    plan = launch_plan(rows, cols)
    x = Shaped((rows, cols // plan["K"], plan["K"]), "bf16")
    return [x, Shaped((rows, 1), "f32"), x, Shaped((cols // plan["K"], plan["K"]), "bf16"), 1e-6], plan


@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "gfx942", "gfx950"])
@pytest.mark.parametrize("cols", [4096, 14336, ROW_MAX])
def test_one_pass_compiles_without_spills(target, cols):
    """X, its square and W stay in registers up to ROW_MAX (at 32768 sm_90a spilled)."""
    why = toolchains.cannot_compile(target)
    if why:
        pytest.skip(why)
    args, plan = _rows_args(4096, cols)
    st = toolchains.static(rmsnorm_rows, args, target, **plan)
    assert st.spill_bytes == 0, st.summary()


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_one_pass_moves_16_byte_chunks_on_cuda(target):
    """Staged, X reaches shared memory as 16-byte cp.async copies and Y leaves it as 16-byte stores. Unstaged, X
    and W come in 16-byte runs a lane and Y leaves the same way: each run one 16-byte store (NVVM split the first
    run of a row into four 4-byte ones where the run was assigned, tiles_cuda/memory.cuh run::write), four in the
    whole tile's path and four in that of a tile whose rows run past the global's end; the one 4-byte store left
    is RSTD's."""
    why = toolchains.cannot_compile(target)
    if why:
        pytest.skip(why)
    args, plan = _rows_args(16384, 4096)
    sass = toolchains.emit(rmsnorm_rows, args, target, "sass", **plan, staged=True)
    assert "LDGSTS.E.BYPASS.128" in sass and "STG.E.128" in sass
    sass = toolchains.emit(rmsnorm_rows, args, target, "sass", **plan, staged=False)
    assert "LDGSTS" not in sass and sass.count("LDG.E.128") >= 4
    assert sass.count("STG.E.128") == 8 and sass.count("STG.E ") == 1


def test_sm90a_stages_rows_past_8192_columns():
    """The launch's default on sm_90a: rows straight into registers up to 8192 columns, through shared memory past
    them (H100, 12-07: unstaged 4.7 / 27.7 / 51.2 us against staged 5.3 / 28.4 / 51.7 at 16x4096, 4096x4096 and
    4096x8192, staged 92.1 against 96.4 at 4096x14336); every other target keeps its configuration."""
    for rows, cols, staged in ((16, 4096, False), (4096, 8192, False), (4096, 14336, True), (64, 16384, True)):
        args, _ = _rows_args(rows, cols)
        assert rmsnorm_rows.shape_config("sm_90a", args) == ({} if staged else {"staged": False})
        assert rmsnorm_rows.shape_config("sm_80", args) == rmsnorm_rows.shape_config("gfx950", args) == {}


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
    x, w = random_array((4, 6, 16), "bf16"), random_array((6, 16), "bf16")
    rstd = np.full((4,), np.nan, np.float32)   # RSTD must be the (rows, 1) column the kernel stores into
    with pytest.raises(TileError, match="RSTD.cols is 4 but must be 1"):
        rmsnorm_rows(x.copy(), rstd, x, w, 1e-6, TR=64, K=16, RPB=1, staged=False)
    assert np.isnan(rstd).all()



@settings(max_examples=5)
@given(rows=st.integers(1, 70), cols=st.integers(1, 700), split=st.sampled_from([1, 2, 3, 4, 8, 12, 24]),
       dtype=st.sampled_from(["bf16", "f16", "f32"]), small=st.sampled_from([False, True]))
def test_rmsnorm_split_over_blocks(backend, rows, cols, split, dtype, small):
    """Each row's columns split over SPLIT blocks (split_plan: each part's sum of squares, then added up, RSTD
    written by part 0 alone, and each part normalized), parts past a short row's end included, against float64;
    the outputs poisoned first. small: the tile split_columns takes for few rows (16 rows, one worker)."""
    x, w = random_array((rows, cols), dtype), random_array((cols,), "bf16")
    y, rstd = poisoned((rows, cols), dtype), poisoned((rows,), "f32")
    rmsnorm_fwd(y, rstd, x, w, 1e-6, backend=backend, SPLIT=split, **(dict(BR=16, workers=1) if small else {}))
    ref_y, ref_rstd = reference_rmsnorm(x, w, 1e-6)
    assert_close(rstd, ref_rstd, "f32", tol=1e-5, what="RSTD")
    assert_close(y, ref_y, dtype, what="Y")


def test_rmsnorm_splits_rows_too_few_to_fill_the_gpu():
    """Past ROW_MAX columns (two passes) at a decode step, each row over many blocks; short rows, or rows enough
    to fill the GPU, keep one launch; traced alone with SPLIT > 1 the kernel refuses (S comes from the plan)."""
    def args(r, c):
        return [Shaped((r, c), "bf16"), Shaped((r,), "f32"), Shaped((r, c), "bf16"), Shaped((c,), "bf16"), 1e-6]
    assert rmsnorm_fwd.shape_config("sm_90a", args(16, 32768)) == dict(SPLIT=64, BR=16, workers=1)
    assert rmsnorm_fwd.shape_config("sm_90a", args(100, 1000)) == {}
    assert rmsnorm_fwd.shape_config("sm_90a", args(16384, 20000)) == dict(SPLIT=2)   # 256 blocks: 4 an SM with two
    assert rmsnorm_fwd.shape_config("sm_90a", args(65536, 20000)) == {}
    assert rmsnorm_fwd.shape_config(None, args(16, 32768)) == {}
    x = random_array((4, 300), "f32")
    with pytest.raises(TileError, match="from split_plan"):
        rmsnorm_fwd.trace([x, x[:, 0].copy(), x, x[0], 1e-6], "sm_80", SPLIT=2)
