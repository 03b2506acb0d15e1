"""Wrong kernels fail before anything runs, with the user's line and the expected against the actual."""
import inspect

import numpy as np
import pytest

import tiles as tl
from tiles.testing import poisoned, random_array


def line_of(fn, text):
    src, first = inspect.getsourcelines(fn.fn)
    return first + next(i for i, s in enumerate(src) if text in s)


@tl.kernel
def bad_inner(C, A, B):
    tl.grid(1)
    a = tl.shared(A.dtype, 64, 32)
    b = tl.shared(B.dtype, 16, 64)
    c = tl.regs(tl.f32, 64, 64)
    tl.mma_AB(c, a, b, c)  # K mismatch


def test_mma_inner_dims_names_the_line():
    args = [poisoned((64, 64), "f32"), random_array((64, 32), "bf16"), random_array((16, 64), "bf16")]
    with pytest.raises(tl.TileError) as e:
        bad_inner.trace(args)
    msg = str(e.value)
    assert f"test_verify.py:{line_of(bad_inner, '# K mismatch')}" in msg
    assert "tl.mma_AB(c, a, b, c)" in msg
    assert "inner dimensions differ" in msg and "K=32" in msg and "K=16" in msg


@tl.kernel
def bad_shapes(Y, X):
    tl.grid(1)
    x = tl.regs(tl.f32, 32, 64)
    v = tl.rvec(tl.f32, 64)
    tl.row_sum(v, x)  # wrong length


def test_reduction_length():
    with pytest.raises(tl.TileError, match=r"row_sum: destination length: expected 32, got 64") as e:
        bad_shapes.trace([poisoned((4, 4), "f32"), random_array((4, 4), "f32")])
    assert "# wrong length" in str(e.value)


@tl.kernel
def bad_dtype(C, A, B):
    tl.grid(1)
    a = tl.shared(tl.bf16, 32, 32)
    b = tl.shared(tl.f16, 32, 32)
    c = tl.regs(tl.f32, 32, 32)
    tl.mma_AB(c, a, b, c)


def test_mma_dtypes():
    with pytest.raises(tl.TileError, match=r"b dtype \(same as a\): expected bf16, got f16"):
        bad_dtype.trace([poisoned((4, 4), "f32")] * 3)


@tl.kernel
def bad_move(Y, X):
    tl.grid(1)
    s = tl.shared(tl.f32, 32, 32)
    t = tl.shared(tl.f32, 32, 32)
    tl.load(s, t)


def test_memory_paths():
    with pytest.raises(tl.TileError, match=r"cannot move st -> st"):
        bad_move.trace([poisoned((4, 4), "f32")] * 2)


@tl.kernel
def bad_pipeline(Y, X):
    tl.grid(1)
    s = tl.shared(tl.f32, 32, 32)
    r = tl.regs(tl.f32, 32, 32)
    for k in tl.pipeline(4):
        tl.load(s, X, (0, k))
        tl.store(s, r)  # overwrites a tile that is loaded ahead


def test_pipeline_staged_tiles_are_load_only():
    with pytest.raises(tl.TileError, match=r"store: writes s, which the pipelined load at line \d+"):
        bad_pipeline.trace([poisoned((4, 4), "f32")] * 2)


@tl.kernel
def bad_swap(Y, X, *, case):
    tl.grid(1)
    x = tl.regs(tl.f32, 16, 32)
    if case == "odd":
        x = tl.regs(tl.f32, 16, 15)
        tl.swap_pairs(x, x)  # odd columns
    elif case == "shape":
        tl.swap_pairs(tl.regs(tl.f32, 16, 16), x)
    elif case == "dtype":
        tl.swap_pairs(tl.regs(tl.bf16, 16, 32), x)
    elif case == "shared":
        tl.swap_pairs(x, tl.shared(tl.f32, 16, 32))
    else:
        tl.swap_pairs(tl.rvec(tl.f32, 32, axis="cols"), tl.rvec(tl.f32, 32, axis="cols"))


@pytest.mark.parametrize("case, message", [
    ("odd", r"swap_pairs: column count \(pairs of columns are exchanged\): expected even, got 15"),
    ("shape", r"swap_pairs: source shape: expected 16x16, got 16x32"),
    ("dtype", r"swap_pairs: source dtype \(no conversion: tl.copy converts\): expected bf16, got f32"),
    ("shared", r"swap_pairs: source kind: expected rt, got st"),
    ("vector", r"swap_pairs: destination kind: expected rt, got rv"),
])
def test_swap_pairs_refusals(case, message):
    with pytest.raises(tl.TileError, match=message) as e:
        bad_swap.trace([poisoned((4, 4), "f32")] * 2, case=case)
    if case == "odd":
        assert f"test_verify.py:{line_of(bad_swap, '# odd columns')}" in str(e.value)


@tl.kernel
def no_grid(Y):
    tl.regs(tl.f32, 16, 16)


def named(name):
    @tl.kernel
    def k(Y, X):
        tl.grid(1)
        x = tl.regs(tl.f32, 16, 16, name=name)  # the name
        tl.load(x, X, (0, 0))
        tl.store(Y, x, (0, 0))
    return k


@pytest.mark.parametrize("name", ["signed", "half", "kernel", "2x", "a-b", "__x"])
def test_tile_names_the_generated_languages_cannot_take_are_refused(name):
    k = named(name)
    with pytest.raises(tl.TileError, match=f"tile name '{name}' cannot name a variable") as e:
        k.trace([poisoned((16, 16), "f32"), random_array((16, 16), "f32")])
    assert f"test_verify.py:{line_of(k, '# the name')}" in str(e.value)


def test_a_tile_named_like_an_argument_gets_its_own_name():
    k = named("X").trace([poisoned((16, 16), "f32"), random_array((16, 16), "f32")])
    assert [t.name for t in k.tiles] == ["X1"]


def test_grid_required():
    with pytest.raises(tl.TileError, match="never calls tl.grid"):
        no_grid.trace([poisoned((4, 4), "f32")])


def test_argument_checks_name_the_line():
    from tiles.kernels.gemm import gemm
    c, a, b = poisoned((64, 64), "f32"), random_array((64, 40), "bf16"), random_array((48, 64), "bf16")
    with pytest.raises(tl.TileError) as e:
        gemm(c, a, b)
    assert "gemm.py" in str(e.value) and "B.rows is 48 but A.cols is 40" in str(e.value)
    assert np.isnan(c.astype(np.float32)).all()  # nothing ran
    from tiles.kernels.layernorm import layernorm_rows   # against a constant: what it must be
    y, x = poisoned((4, 6, 16), "f32"), random_array((4, 6, 16), "f32")
    wb = random_array((6, 16), "f32")
    with pytest.raises(tl.TileError, match="Y.cols is 16 but must be 32") as e:
        layernorm_rows(y, y.copy(), x, x, wb, wb, 1e-5, TR=64, K=32, RPB=1, staged=False)
    assert "layernorm.py" in str(e.value) and np.isnan(y).all()


def test_argument_dtype_and_rank_checked_against_trace():
    from tiles import backend
    from tiles.kernels.gemm import gemm
    args = [poisoned((64, 64), "f32"), random_array((64, 64), "bf16"), random_array((64, 64), "bf16")]
    k = gemm.trace(args)
    with pytest.raises(tl.TileError, match=r"argument A: expected dtype bf16, got f16"):
        backend.check_args(k, [args[0], random_array((64, 64), "f16"), args[2]])
    with pytest.raises(tl.TileError, match=r"the last dim must be contiguous"):
        backend.check_args(k, [args[0], np.asfortranarray(args[1]), args[2]])


def test_traced_scalars_have_no_truth_value():
    @tl.kernel
    def branchy(Y):
        b = tl.grid(4)
        if b > 2:
            pass
    with pytest.raises(TypeError, match="no Python truth value"):
        branchy.trace([poisoned((4, 4), "f32")])


def test_target_rules():
    from tiles.kernels.gemm import gemm
    args = [poisoned((64, 64), "f32"), random_array((64, 64), "bf16"), random_array((64, 64), "bf16")]
    with pytest.raises(tl.TileError, match=r"multiples of 8, got 12x16"):
        gemm.trace(args, "apple", BM=12, BN=16, BK=8)
    fp8 = [poisoned((64, 64), "f32"), random_array((64, 64), "fp8e4m3"), random_array((64, 64), "fp8e4m3")]
    with pytest.raises(tl.TileError, match=r"apple does not support dtype fp8e4m3"):
        gemm.trace(fp8, "apple")
    assert gemm.trace(fp8, "gfx950") is not None


def test_printer_shows_the_program():
    from tiles.kernels.gemm import gemm
    text = str(gemm.trace([poisoned((8, 8), "f32"), random_array((8, 8), "bf16"), random_array((8, 8), "bf16")]))
    assert "pipeline k < cdiv(A.cols, 32):" in text
    assert "mma_AB acc <- a, b, acc" in text
    assert "store C[block.x, block.y] <- acc" in text
