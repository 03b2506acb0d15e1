"""Argument checks cover every dimension: an array longer than 1 along a dimension the kernel never indexes is
refused before the launch (issue 16), on every backend, unless the kernel declares tl.broadcast_over."""
import numpy as np
import pytest

import tiles as tl
from tiles import TileError
from tiles.kernels.gemm import gemm
from tiles.testing import assert_close, poisoned, random_array, run

R, C = 16, 32


@tl.kernel
def scale(Y, X, s):
    br, bc = tl.grid(tl.cdiv(X.rows, R), tl.cdiv(X.cols, C))
    x = tl.regs(tl.f32, R, C)
    tl.load(x, X, (br, bc))
    tl.mul(x, x, s)
    tl.store(Y, x, (br, bc))


@tl.kernel
def add_bias(Y, X, Bias):
    """Y = X + Bias[0]: Bias may be an expanded (stride-0) view over the rows, declared in the source."""
    tl.broadcast_over(Bias, "rows")
    br, bc = tl.grid(tl.cdiv(X.rows, R), tl.cdiv(X.cols, C))
    x = tl.regs(tl.f32, R, C)
    b = tl.rvec(tl.f32, C, axis="cols")
    tl.load(x, X, (br, bc))
    tl.load(b, Bias, (bc,))
    tl.add_col(x, x, b)
    tl.store(Y, x, (br, bc))


def test_gemm_3d_batch_computes_every_batch(backend):
    """gemm(C, A, B) with a 3-D A and C: batch 1 of C was never written, silently. gemm now walks the batch; the
    rule below is what keeps a kernel that does not from doing the same."""
    a, b = random_array((2, 64, 32), "bf16"), random_array((32, 48), "bf16")
    c = poisoned((2, 64, 48), "f32")
    run(backend, gemm, c, a, b)
    assert_close(c, a.astype(np.float64) @ b.astype(np.float64), "bf16")


def test_gemm_3d_A_with_2d_C_is_refused(backend):
    """A 3-D A with a 2-D C: batch 1 of A was ignored."""
    a, b = random_array((2, 64, 32), "bf16"), random_array((32, 48), "bf16")
    c = poisoned((64, 48), "f32")
    with pytest.raises(TileError, match=r"argument A: dimension 0 \(A.depth\) has size 2") as e:
        run(backend, gemm, c, a, b)
    msg = str(e.value)
    assert "never indexes" in msg and "gemm.py" in msg and "tl.load(a, A, on_a(" in msg   # the line
    assert np.isnan(c).all()   # nothing ran


def test_unindexed_dimension_refused_after_a_cached_launch(backend):
    """A launch the backend remembers (CUDA's launch memo) must not let a new shape skip the check."""
    x = random_array((20, 40), "f32")
    y = poisoned(x.shape, "f32")
    run(backend, scale, y, x, 2.0)
    assert_close(y, 2.0 * x.astype(np.float64), "f32")
    x3, y3 = random_array((3, 20, 40), "f32"), poisoned((3, 20, 40), "f32")
    scale.trace([y3, x3, 2.0])   # traceable: the rank is fine, the extent is not
    with pytest.raises(TileError, match=r"argument Y: dimension 0 \(Y.depth\) has size 3"):
        run(backend, scale, y3, x3, 2.0)
    assert np.isnan(y3).all()


def test_extent_one_dimensions_pass(backend):
    x = random_array((1, 1, 20, 40), "f32")
    y = poisoned(x.shape, "f32")
    run(backend, scale, y, x, -1.5)
    assert_close(y, -1.5 * x.astype(np.float64), "f32")


def test_broadcast_over_accepts_an_expanded_view(backend):
    x = random_array((20, 40), "f32")
    bias = np.broadcast_to(random_array((1, 40), "f32"), (20, 40))   # stride 0 over the rows
    y = poisoned(x.shape, "f32")
    run(backend, add_bias, y, x, np.ascontiguousarray(bias))
    assert_close(y, x.astype(np.float64) + bias[0].astype(np.float64), "f32")


def test_broadcast_over_names_axes():
    @tl.kernel
    def bad(Y, X):
        tl.broadcast_over(X, "batches")
        tl.grid(1)
    with pytest.raises(TileError, match="axes must be among batch, depth, rows, cols"):
        bad.trace([np.zeros((4, 4), np.float32)] * 2)
