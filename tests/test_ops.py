"""Every op of the vocabulary against numpy float64, on every backend that can run here."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tiles as tl
from tiles.testing import assert_close, poisoned, random_array, run

BR, BC = 32, 64
extent = st.integers(1, 100)  # not multiples of the tile: bounds handling is part of every op test


def up(x):
    return np.asarray(x).astype(np.float64)


def grid2(X):
    return tl.grid(tl.cdiv(X.rows, BR), tl.cdiv(X.cols, BC))


@tl.kernel
def unary(Y, X, *, op):
    br, bc = grid2(X)
    x = tl.regs(tl.f32, BR, BC)
    tl.load(x, X, (br, bc))
    getattr(tl, op)(x, x)
    tl.store(Y, x, (br, bc))


UNARY = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "abs": np.abs, "neg": np.negative}


@pytest.mark.parametrize("op", sorted(UNARY))
@settings(max_examples=3)
@given(m=extent, n=extent)
def test_unary(backend, op, m, n):
    x = random_array((m, n), "f32")
    if op.startswith("log"):
        x = np.abs(x) + 0.1
    y = poisoned((m, n), "f32")
    run(backend, unary, y, x, op=op)
    assert_close(y, UNARY[op](up(x)), "f32", tol=1e-5)


@tl.kernel
def binary(Y, X, Z, *, op, scalar):
    br, bc = grid2(X)
    x = tl.regs(tl.f32, BR, BC)
    z = tl.regs(tl.f32, BR, BC)
    tl.load(x, X, (br, bc))
    tl.load(z, Z, (br, bc))
    if scalar is None:
        getattr(tl, op)(x, x, z)
    else:
        getattr(tl, op)(x, x, scalar)
    tl.store(Y, x, (br, bc))


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum,
          "min": np.minimum}


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("scalar", [None, -1.75])
@settings(max_examples=3)
@given(m=extent, n=extent)
def test_binary(backend, op, scalar, m, n):
    x, z = random_array((m, n), "f32"), random_array((m, n), "f32") + 4.0
    y = poisoned((m, n), "f32")
    run(backend, binary, y, x, z, op=op, scalar=scalar)
    assert_close(y, BINARY[op](up(x), up(z) if scalar is None else scalar), "f32")


@tl.kernel
def reduce(Out, X, Acc, *, op, axis, with_acc):
    # one block covers the whole input: a reduction over a tile that bounds fills with a neutral value
    tl.grid(1)
    rows = axis == "rows"
    x = tl.regs(tl.f32, BR, BC)
    v = tl.rvec(tl.f32, BR if rows else BC, axis=axis)
    acc = tl.rvec(tl.f32, BR if rows else BC, axis=axis)
    tl.load(x, X, (0, 0))
    neutral = {"max": -math.inf, "min": math.inf, "sum": 0.0}[op]
    tl.bounds_mask(x, x, X.rows, X.cols, neutral)
    tl.load(acc, Acc, (0, 0))
    getattr(tl, f"{'row' if rows else 'col'}_{op}")(v, x, acc if with_acc else None)
    tl.store(Out, v, (0, 0))


@pytest.mark.parametrize("op", ["max", "min", "sum"])
@pytest.mark.parametrize("axis", ["rows", "cols"])
@pytest.mark.parametrize("with_acc", [False, True])
@settings(max_examples=2)
@given(m=st.integers(1, BR), n=st.integers(1, BC))
def test_reduce(backend, op, axis, with_acc, m, n):
    x = random_array((m, n), "f32")
    length = m if axis == "rows" else n
    acc = random_array((1, length), "f32")
    out = poisoned((1, length), "f32")
    run(backend, reduce, out, x, acc, op=op, axis=axis, with_acc=with_acc)
    f = {"max": np.max, "min": np.min, "sum": np.sum}[op]
    ref = f(up(x), axis=1 if axis == "rows" else 0)
    if with_acc:
        ref = {"max": np.maximum, "min": np.minimum, "sum": np.add}[op](ref, up(acc[0]))
    assert_close(out[0], ref, "f32")


@tl.kernel
def broadcast(Y, X, V, *, op, axis):
    br, bc = grid2(X)
    x = tl.regs(tl.f32, BR, BC)
    v = tl.rvec(tl.f32, BR if axis == "rows" else BC, axis=axis)
    tl.load(x, X, (br, bc))
    tl.load(v, V, (0, br if axis == "rows" else bc))
    getattr(tl, f"{op}_{'row' if axis == 'rows' else 'col'}")(x, x, v)
    tl.store(Y, x, (br, bc))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("axis", ["rows", "cols"])
@settings(max_examples=2)
@given(m=extent, n=extent)
def test_broadcast(backend, op, axis, m, n):
    x = random_array((m, n), "f32")
    v = random_array((1, m if axis == "rows" else n), "f32") + 4.0
    y = poisoned((m, n), "f32")
    run(backend, broadcast, y, x, v, op=op, axis=axis)
    vv = up(v[0])[:, None] if axis == "rows" else up(v[0])[None, :]
    assert_close(y, BINARY[op](up(x), vv), "f32")


@tl.kernel
def masks(Y, X, r0, c0, *, kind):
    br, bc = grid2(X)
    x = tl.regs(tl.f32, BR, BC)
    tl.load(x, X, (br, bc))
    if kind == "causal":
        tl.causal_mask(x, x, r0 + br * BR, c0 + bc * BC, -1e4)
    else:
        tl.bounds_mask(x, x, r0 - br * BR, c0 - bc * BC, 7.5)
    tl.store(Y, x, (br, bc))


@pytest.mark.parametrize("kind", ["causal", "bounds"])
@settings(max_examples=3)
@given(m=extent, n=extent, r0=st.integers(0, 40), c0=st.integers(0, 40))
def test_masks(backend, kind, m, n, r0, c0):
    x = random_array((m, n), "f32")
    y = poisoned((m, n), "f32")
    run(backend, masks, y, x, r0, c0, kind=kind)
    i, j = np.indices((m, n))
    ref = np.where(c0 + j <= r0 + i, up(x), -1e4) if kind == "causal" else np.where((i < r0) & (j < c0), up(x), 7.5)
    assert_close(y, ref, "f32")


@tl.kernel
def convert(Y, X, *, via_shared):
    """f32 -> register tile of Y's dtype (rounding) -> Y, directly or staged through shared memory."""
    br, bc = grid2(X)
    x = tl.regs(tl.f32, BR, BC)
    y = tl.regs(Y.dtype, BR, BC)
    tl.load(x, X, (br, bc))
    tl.copy(y, x)
    if via_shared:
        s = tl.shared(Y.dtype, BR, BC)
        tl.store(s, y)
        tl.load(y, s)
    tl.store(Y, y, (br, bc))


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("via_shared", [False, True])
@settings(max_examples=3)
@given(m=extent, n=extent)
def test_copy_converts(backend, dtype, via_shared, m, n):
    x = random_array((m, n), "f32")
    y = poisoned((m, n), dtype)
    run(backend, convert, y, x, via_shared=via_shared)
    from tiles import dtypes
    assert_close(y, dtypes.of(dtype).round(up(x)), dtype, tol=0.0)  # round to nearest even, exactly


@tl.kernel
def fills(Y, X, *, value):
    br, bc = grid2(X)
    x = tl.regs(tl.f32, BR, BC)
    v = tl.rvec(tl.f32, BR)
    tl.load(x, X, (br, bc))
    tl.fill(v, value)
    tl.zero(x)
    tl.add_row(x, x, v)
    tl.store(Y, x, (br, bc))


def test_zero_fill(backend):
    x = random_array((40, 70), "f32")
    y = poisoned((40, 70), "f32")
    run(backend, fills, y, x, value=2.5)
    assert_close(y, np.full((40, 70), 2.5), "f32", tol=0.0)


@tl.kernel
def mma(C, A, B, *, ta, tb, a_in_regs, M, N, K):
    tl.grid(1)
    a = tl.shared(A.dtype, K if ta else M, M if ta else K)
    b = tl.shared(B.dtype, N if tb else K, K if tb else N)
    c = tl.regs(tl.f32, M, N)
    tl.load(a, A, (0, 0))
    tl.load(b, B, (0, 0))
    tl.load(c, C, (0, 0))
    f = getattr(tl, f"mma_{'At' if ta else 'A'}{'Bt' if tb else 'B'}")
    if a_in_regs:
        ar = tl.regs(A.dtype, M, K)
        tl.load(ar, a)
        f(c, ar, b, c)
    else:
        f(c, a, b, c)
    tl.store(C, c, (0, 0))


@pytest.mark.parametrize("ta,tb,a_in_regs", [(False, False, False), (False, True, False), (True, False, False),
                                             (True, True, False), (False, False, True), (False, True, True)])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_mma(backend, ta, tb, a_in_regs, dtype):
    M, N, K = 64, 32, 32
    a = random_array((K, M) if ta else (M, K), dtype)
    b = random_array((N, K) if tb else (K, N), dtype)
    c = random_array((M, N), "f32")
    ref = (up(a).T if ta else up(a)) @ (up(b).T if tb else up(b)) + up(c)
    run(backend, mma, c, a, b, ta=ta, tb=tb, a_in_regs=a_in_regs, M=M, N=N, K=K)
    assert_close(c, ref, "f32", tol=1e-5)


@tl.kernel
def accumulate(Out, X, *, BR2=32):
    """Out += X block by block through atomics; a range loop adds each block twice."""
    br, bc = tl.grid(tl.cdiv(X.rows, BR2), tl.cdiv(X.cols, BC))
    x = tl.regs(tl.f32, BR2, BC)
    tl.load(x, X, (br, bc))
    for _ in tl.range(2):
        tl.atomic_add(Out, x, (br, bc))


@settings(max_examples=3)
@given(m=extent, n=extent)
def test_atomic_add_and_range(backend, m, n):
    x, out = random_array((m, n), "f32"), random_array((m, n), "f32")
    ref = up(out) + 2 * up(x)
    run(backend, accumulate, out, x)
    assert_close(out, ref, "f32")


@tl.kernel
def vec_roundtrip(Y, X, *, n):
    (bi,) = (tl.grid(tl.cdiv(X.cols, n)),)
    v = tl.rvec(tl.f32, n, axis="cols")
    sv = tl.shared_vec(X.dtype, n)
    tl.load(sv, X, (0, bi))
    tl.load(v, sv)
    tl.exp(v, v)
    tl.store(Y, v, (0, bi))


@settings(max_examples=3)
@given(n=st.integers(1, 300))
def test_vectors(backend, n):
    x = random_array((n,), "f32")
    y = poisoned((n,), "f32")
    run(backend, vec_roundtrip, y, x, n=64)
    assert_close(y, np.exp(up(x)), "f32")
