"""Every op of the vocabulary against numpy float64, on every backend that can run here.

Each kernel applies a whole family of ops (one result per depth slice of the output), so that the
emulated backends compile a handful of kernels rather than one per op.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tiles as tl
from tiles import TileError, dtypes, targets
from tiles.testing import assert_close, poisoned, random_array, run, tolerance

BR, BC = 32, 64
extent = st.integers(1, 100)  # not multiples of the tile: bounds handling is part of every op test

UNARY = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "abs": np.abs, "neg": np.negative}
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum,
          "min": np.minimum}
BROADCASTS = ("add", "sub", "mul", "div")
REDUCE = {"max": (np.max, np.maximum, -math.inf), "min": (np.min, np.minimum, math.inf), "sum": (np.sum, np.add, 0.0)}


def up(x):
    return np.asarray(x).astype(np.float64)


def grid2(X):
    return tl.grid(tl.cdiv(X.rows, BR), tl.cdiv(X.cols, BC))


@tl.kernel
def unary(Y, X):
    br, bc = grid2(X)
    x = tl.regs(tl.f32, BR, BC)
    y = tl.regs(tl.f32, BR, BC)
    tl.load(x, X, (br, bc))
    for i, op in enumerate(UNARY):
        getattr(tl, op)(y, x)
        tl.store(Y, y, (i, br, bc))


@settings(max_examples=4)
@given(m=extent, n=extent)
def test_unary(backend, m, n):
    x = np.abs(random_array((m, n), "f32")) + np.float32(0.1)  # positive, for the logs
    x[0, 0] = -x[0, 0]  # and one negative for abs and neg; the logs skip it below
    y = poisoned((len(UNARY), m, n), "f32")
    run(backend, unary, y, x)
    for i, (op, f) in enumerate(UNARY.items()):
        keep = np.ones((m, n), bool)
        if op.startswith("log"):
            keep[0, 0] = False
        with np.errstate(invalid="ignore"):
            ref = f(up(x))
        assert_close(y[i][keep], ref[keep], "f32", what=op)


@tl.kernel
def binary(Y, X, Z, s):
    br, bc = grid2(X)
    x = tl.regs(tl.f32, BR, BC)
    z = tl.regs(tl.f32, BR, BC)
    y = tl.regs(tl.f32, BR, BC)
    tl.load(x, X, (br, bc))
    tl.load(z, Z, (br, bc))
    for i, op in enumerate(BINARY):
        getattr(tl, op)(y, x, z)
        tl.store(Y, y, (2 * i, br, bc))
        getattr(tl, op)(y, x, s)
        tl.store(Y, y, (2 * i + 1, br, bc))


@settings(max_examples=4)
@given(m=extent, n=extent, s=st.floats(-4, 4).filter(lambda v: abs(v) > 0.1))
def test_binary(backend, m, n, s):
    x, z = random_array((m, n), "f32"), random_array((m, n), "f32") + np.float32(4.0)
    y = poisoned((2 * len(BINARY), m, n), "f32")
    run(backend, binary, y, x, z, float(s))
    s32 = float(np.float32(s))
    for i, (op, f) in enumerate(BINARY.items()):
        assert_close(y[2 * i], f(up(x), up(z)), "f32", what=f"{op} tile")
        assert_close(y[2 * i + 1], f(up(x), s32), "f32", what=f"{op} scalar")


@tl.kernel
def reduce(Out, X, Acc, *, axis):
    """One block covers the input; bounds_mask fills the rest of the tile with each reduction's neutral value."""
    tl.grid(1)
    rows = axis == "rows"
    n = BR if rows else BC
    x = tl.regs(tl.f32, BR, BC)
    masked = tl.regs(tl.f32, BR, BC)
    v = tl.rvec(tl.f32, n, axis=axis)
    acc = tl.rvec(tl.f32, n, axis=axis)
    tl.load(x, X, (0, 0))
    tl.load(acc, Acc, (0, 0))
    for i, (op, (_, _, neutral)) in enumerate(REDUCE.items()):
        tl.bounds_mask(masked, x, X.rows, X.cols, neutral)
        reduce_op = getattr(tl, f"{'row' if rows else 'col'}_{op}")
        reduce_op(v, masked)
        tl.store(Out, v, (2 * i, 0))
        reduce_op(v, masked, acc)
        tl.store(Out, v, (2 * i + 1, 0))


@pytest.mark.parametrize("axis", ["rows", "cols"])
@settings(max_examples=4)
@given(m=st.integers(1, BR), n=st.integers(1, BC))
def test_reduce(backend, axis, m, n):
    x = random_array((m, n), "f32")
    length = m if axis == "rows" else n
    acc = random_array((1, length), "f32")
    out = poisoned((2 * len(REDUCE), length), "f32")
    run(backend, reduce, out, x, acc, axis=axis)
    ax = 1 if axis == "rows" else 0
    for i, (op, (f, combine, _)) in enumerate(REDUCE.items()):
        r = f(up(x), axis=ax)
        with_acc = combine(r, up(acc[0]))
        assert_close(out[2 * i], r, "f32", tol=sum_tolerance(op, r, np.abs(up(x)).sum(axis=ax)), what=f"{op}")
        assert_close(out[2 * i + 1], with_acc, "f32", what=f"{op} with accumulator",
                     tol=sum_tolerance(op, with_acc, np.abs(up(x)).sum(axis=ax) + np.abs(up(acc[0]))))


@tl.kernel
def reduce_tile(Out, X, Acc, *, TR, axis):
    """A TR x 64 tile over the block's workers (TR 128: every worker holds rows), its max, min and sum in every
    element of a 64-long vector along `axis`; past the input the tile holds each reduction's neutral value."""
    tl.grid(1)
    x = tl.regs(tl.f32, TR, BC)
    masked = tl.regs(tl.f32, TR, BC)
    v = tl.rvec(tl.f32, 64, axis=axis)
    acc = tl.rvec(tl.f32, 64, axis=axis)
    tl.load(x, X, (0, 0))
    tl.load(acc, Acc, (0, 0))
    for i, (op, (_, _, neutral)) in enumerate(REDUCE.items()):
        tl.bounds_mask(masked, x, X.rows, X.cols, neutral)
        getattr(tl, f"tile_{op}")(v, masked)
        tl.store(Out, v, (2 * i, 0))
        getattr(tl, f"tile_{op}")(v, masked, acc)
        tl.store(Out, v, (2 * i + 1, 0))


@pytest.mark.parametrize("axis", ["rows", "cols"])
@settings(max_examples=4)
@given(tr=st.sampled_from([32, 128]), data=st.data())
def test_reduce_tile(backend, axis, tr, data):
    m, n = data.draw(st.integers(1, tr)), data.draw(st.integers(1, BC))
    x = random_array((m, n), "f32")
    acc = random_array((1, 64), "f32")
    out = poisoned((2 * len(REDUCE), 64), "f32")
    run(backend, reduce_tile, out, x, acc, TR=tr, axis=axis)
    for i, (op, (f, combine, _)) in enumerate(REDUCE.items()):
        r = f(up(x))
        tol = sum_tolerance(op, np.atleast_1d(r), np.abs(up(x)).sum())
        assert_close(out[2 * i], np.full(64, r), "f32", tol=tol, what=op)
        with_acc = combine(r, up(acc[0]))
        assert_close(out[2 * i + 1], with_acc, "f32", what=f"{op} with accumulator",
                     tol=sum_tolerance(op, with_acc, np.abs(up(x)).sum() + np.abs(up(acc[0]))))


def test_reduce_tile_refuses_a_16_bit_destination():
    @tl.kernel
    def to_bf16(Out, X):
        tl.grid(1)
        x = tl.regs(tl.f32, 32, 64)
        v = tl.rvec(tl.bf16, 32)
        tl.load(x, X, (0, 0))
        tl.tile_sum(v, x)

    with pytest.raises(TileError, match=r"test_ops.py:\d+: tl.tile_sum\(v, x\)\n.*destination dtype: expected f32"):
        to_bf16.trace([np.zeros((1, 32), np.float32), np.zeros((32, 64), np.float32)])


@tl.kernel
def split_sum(C, X, P, L, *, S):
    """S blocks a tile of C (depth C.depth), block z passing slice z of X: store_sum adds the S slices into C."""
    br, bc, z = tl.grid(tl.cdiv(C.rows, BR), tl.cdiv(C.cols, BC), C.depth * S)
    x = tl.regs(tl.f32, BR, BC)
    tl.load(x, X, (z, br, bc))
    tl.store_sum(C, x, (z // S, br, bc), parts=P, part=z % S, count=S, arrivals=L)


@settings(max_examples=4)
@given(m=extent, n=extent, depth=st.integers(1, 2), s=st.integers(2, 4), out=st.sampled_from(["f32", "bf16", "f16"]))
def test_store_sum(backend, m, n, depth, s, out):
    """Twice, with fresh inputs: the sum of the S parts in C (exactly the f32 sum in part order, rounded to C's
    dtype, whichever block came last), nothing past C's edge, and the counters back at zero. On Apple the
    verifier refuses the op (no fence between threadgroups)."""
    tiles = (depth, -(-m // BR), -(-n // BC))
    arrivals = np.zeros(tiles, np.int32)
    parts = poisoned((depth * s, m, n), "f32")
    if backend.target is not None and not targets.target(backend.target).grid_fence:
        with pytest.raises(TileError, match="no fence that orders"):
            run(backend, split_sum, poisoned((depth, m, n), out), parts, parts, arrivals, S=s)
        return
    for _ in range(2):
        x = random_array((depth * s, m, n), "f32")
        c = poisoned((depth, m, n), out)
        run(backend, split_sum, c, x, parts, arrivals, S=s)
        in_order = x.reshape(depth, s, m, n)[:, 0].copy()
        for p in range(1, s):
            in_order += x.reshape(depth, s, m, n)[:, p]   # f32 adds, part by part
        np.testing.assert_array_equal(up(c), dtypes.of(out).round(in_order))
        assert_close(c, up(x).reshape(depth, s, m, n).sum(1), out)
        np.testing.assert_array_equal(arrivals, 0)


def test_store_sum_refuses_bad_arguments():
    """Counters that are not i32, host counters not all 0 (a sum silently short of parts otherwise), and arguments
    whose shapes do not match dst's tiles, each named before a launch."""
    c, x = np.zeros((40, 70), np.float32), np.zeros((3, 40, 70), np.float32)
    with pytest.raises(TileError, match=r"arrivals \(L\) dtype \(one counter per tile\): expected i32, got f32"):
        split_sum.trace([c[None], x, x, np.zeros((1, 2, 2), np.float32)], S=3)
    with pytest.raises(TileError, match=r"argument check failed: L.cols is 1 but cdiv\(C.cols, 64\) is 2"):
        run("reference", split_sum, c[None], x, x, np.zeros((1, 2, 1), np.int32), S=3)
    with pytest.raises(TileError, match=r"argument check failed: P.depth is 3 but \(C.depth \* 2\) is 2"):
        run("reference", split_sum, c[None], x, x, np.zeros((1, 2, 2), np.int32), S=2)
    left = np.zeros((1, 2, 2), np.int32)
    left[0, 1, 1] = 2   # a launch that stopped after two of the tile's three parts
    with pytest.raises(TileError, match=r"test_ops.py:\d+: tl.store_sum(?s:.*)the counters in L must all be 0 before "
                                        r"the launch \(each launch leaves them so\); 1 of 4 are not"):
        run("reference", split_sum, c[None], x, x, left, S=3)


def sum_tolerance(op, ref, magnitude):
    """f32's tolerance, widened for a sum by its condition number ‖Σ|x|‖ / ‖Σx‖: terms that cancel leave a small
    result whose rounding error is still relative to the terms (CI once drew a sum of -0.0083 off 1.44e-5)."""
    if op != "sum":
        return tolerance("f32")
    return tolerance("f32") * max(1.0, float(np.linalg.norm(magnitude) / max(np.linalg.norm(ref), 1e-30)))


@tl.kernel
def merge_pairs(Out, M, S, *, axis):
    """One vector of (max, sum) pairs, 64 long: a rows vector splits over the workers, a cols one does not."""
    tl.grid(1)
    m = tl.rvec(tl.f32, 64, axis=axis, name="m")
    s = tl.rvec(tl.f32, 64, axis=axis, name="s")
    lse = tl.rvec(tl.f32, 64, axis=axis, name="lse")
    tl.load(m, M, (0, 0))
    tl.load(s, S, (0, 0))
    tl.logsumexp2(lse, m, s)
    tl.store(Out, lse, (0, 0))


@pytest.mark.parametrize("axis", ["rows", "cols"])
@settings(max_examples=4)
@given(n=st.integers(2, 64), scale=st.sampled_from([1.0, 100.0]), empty=st.integers(0, 63), far=st.booleans())
def test_logsumexp2(backend, axis, n, scale, empty, far):
    """Maxima far apart (2**m alone overflows f32 at scale 100), one empty pair among them: (-inf, 0), or (m, 0)
    with m 2000 above the others, which must not pull the max up (the reference did, and its live pairs then
    underflowed to -inf: fuzz seed 20261204); the elements past n read as (0, 0), which must not count either."""
    m = random_array((1, n), "f32", scale=scale)
    s = np.abs(random_array((1, n), "f32")) + np.float32(0.5)
    m[0, empty % n], s[0, empty % n] = (m.max() + 2000 if far else -np.inf), 0.0
    out = poisoned((1, 64), "f32")
    run(backend, merge_pairs, out, m, s, axis=axis)
    keep = np.arange(n) != empty % n
    top = up(m[0][keep]).max()
    rest = np.log2(np.sum(up(s[0][keep]) * np.exp2(up(m[0][keep]) - top)))
    ref = top + rest
    # the f32 sum top + rest rounds relative to its terms: where they cancel (CI drew 0.0029 off terms near 1),
    # the tolerance widens by the condition number (|top| + |rest|) / |ref|
    tol = tolerance("f32") * max(1.0, (abs(top) + abs(rest)) / max(abs(ref), 1e-30))
    assert_close(out[0], np.full(64, ref), "f32", tol=tol)


def test_logsumexp2_refuses_vectors_of_another_shape():
    @tl.kernel
    def mixed(Out, M):
        tl.grid(1)
        m = tl.rvec(tl.f32, 64, axis="rows")
        s = tl.rvec(tl.f32, 64, axis="cols")
        tl.load(m, M, (0, 0))
        tl.logsumexp2(m, m, s)

    with pytest.raises(TileError, match=r"test_ops.py:\d+: tl.logsumexp2\(m, m, s\)\n.*s: expected 64 along rows"):
        mixed.trace([np.zeros((1, 64), np.float32)] * 2)


@tl.kernel
def broadcast(Y, X, V, *, axis):
    br, bc = grid2(X)
    rows = axis == "rows"
    x = tl.regs(tl.f32, BR, BC)
    y = tl.regs(tl.f32, BR, BC)
    v = tl.rvec(tl.f32, BR if rows else BC, axis=axis)
    tl.load(x, X, (br, bc))
    tl.load(v, V, (0, br if rows else bc))
    for i, op in enumerate(BROADCASTS):
        getattr(tl, f"{op}_{'row' if rows else 'col'}")(y, x, v)
        tl.store(Y, y, (i, br, bc))


@pytest.mark.parametrize("axis", ["rows", "cols"])
@settings(max_examples=4)
@given(m=extent, n=extent)
def test_broadcast(backend, axis, m, n):
    x = random_array((m, n), "f32")
    v = random_array((1, m if axis == "rows" else n), "f32") + np.float32(4.0)
    y = poisoned((4, m, n), "f32")
    run(backend, broadcast, y, x, v, axis=axis)
    vv = up(v[0])[:, None] if axis == "rows" else up(v[0])[None, :]
    for i, op in enumerate(BROADCASTS):
        assert_close(y[i], BINARY[op](up(x), vv), "f32", what=op)


@pytest.mark.parametrize("axis", ["rows", "cols"])
def test_broadcast_division_keeps_ieee_answers_at_the_edges(backend, axis):
    """div_row / div_col may multiply by reciprocals (the CUDA header does, where every reciprocal a lane holds is
    a normal number): zeros, infinities, NaNs, subnormal divisors and divisors beyond 2^126 (subnormal
    reciprocals) must still give the division's answers, e.g. 1e-39 / 1e-39 = 1, not 1e-39 * inf."""
    edge = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-39, -3e38, 2.5e38, 1e-38], np.float32)
    m, n = (40, 33) if axis == "rows" else (33, 40)
    x = random_array((m, n), "f32")
    v = random_array((1, 40), "f32") + np.float32(4.0)
    v[0, 3:3 + len(edge)] = edge               # lanes with an edge among their divisors, lanes without
    along = (slice(None), 0) if axis == "rows" else (0, slice(None))
    x[along] = np.float32(1e-39)               # the element a subnormal divisor must give 1 for
    x[(slice(None), 1) if axis == "rows" else (1, slice(None))] = np.inf
    y = poisoned((4, m, n), "f32")
    run(backend, broadcast, y, x, v, axis=axis)
    vv = v[0][:, None] if axis == "rows" else v[0][None, :]
    with np.errstate(all="ignore"):
        ref = (x / vv).astype(np.float64)      # IEEE f32 division, as the reference interpreter computes it
    out = up(y[3])
    assert (np.isnan(out) == np.isnan(ref)).all(), "NaN where the division gives none, or the reverse"
    fin = np.isfinite(ref)
    assert (out[~fin & ~np.isnan(ref)] == ref[~fin & ~np.isnan(ref)]).all(), "infinities differ"
    assert np.allclose(out[fin], ref[fin], rtol=1e-6, atol=1e-44), np.abs(out[fin] - ref[fin]).max()


@tl.kernel
def masks(Y, X, r0, c0):
    br, bc = grid2(X)
    x = tl.regs(tl.f32, BR, BC)
    y = tl.regs(tl.f32, BR, BC)
    tl.load(x, X, (br, bc))
    tl.causal_mask(y, x, r0 + br * BR, c0 + bc * BC, -1e4)
    tl.store(Y, y, (0, br, bc))
    tl.bounds_mask(y, x, r0 - br * BR, c0 - bc * BC, 7.5)
    tl.store(Y, y, (1, br, bc))


@settings(max_examples=6)
@given(m=extent, n=extent, r0=st.integers(0, 80), c0=st.integers(0, 80))
def test_masks(backend, m, n, r0, c0):
    x = random_array((m, n), "f32")
    y = poisoned((2, m, n), "f32")
    run(backend, masks, y, x, r0, c0)
    i, j = np.indices((m, n))
    assert_close(y[0], np.where(c0 + j <= r0 + i, up(x), -1e4), "f32", tol=0.0, what="causal")
    assert_close(y[1], np.where((i < r0) & (j < c0), up(x), 7.5), "f32", tol=0.0, what="bounds")


@tl.kernel
def const_masks(Y, X, *, ROWS, COLS):
    """Bounds that are constants: a backend may drop a test whose bound keeps the whole tile (ir.bounds_tested)."""
    br, bc = grid2(X)
    x = tl.regs(tl.f32, BR, BC)
    y = tl.regs(tl.f32, BR, BC)
    tl.load(x, X, (br, bc))
    tl.bounds_mask(y, x, ROWS, COLS, 7.5)
    tl.store(Y, y, (0, br, bc))
    tl.bounds_mask(x, x, ROWS, COLS, 7.5)   # in place
    tl.store(Y, x, (1, br, bc))


@settings(max_examples=6)
@given(m=extent, n=extent, rows=st.sampled_from([5, BR - 1, BR, BR + 7]), cols=st.sampled_from([9, BC - 1, BC, 2 * BC]))
def test_const_masks(backend, m, n, rows, cols):
    x = random_array((m, n), "f32")
    y = poisoned((2, m, n), "f32")
    run(backend, const_masks, y, x, ROWS=rows, COLS=cols)
    i, j = np.indices((m, n))
    want = np.where((i % BR < rows) & (j % BC < cols), up(x), 7.5)
    assert_close(y[0], want, "f32", tol=0.0, what="out of place")
    assert_close(y[1], want, "f32", tol=0.0, what="in place")


@tl.kernel
def convert(Y, X):
    """f32 -> register tile of Y's dtype (rounding) -> Y, directly and staged through shared memory."""
    br, bc = grid2(X)
    x = tl.regs(tl.f32, BR, BC)
    y = tl.regs(Y.dtype, BR, BC)
    s = tl.shared(Y.dtype, BR, BC)
    tl.load(x, X, (br, bc))
    tl.copy(y, x)
    tl.store(Y, y, (0, br, bc))
    tl.store(s, y)
    tl.zero(y)
    tl.load(y, s)
    tl.store(Y, y, (1, br, bc))


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@settings(max_examples=4)
@given(m=extent, n=extent)
def test_copy_converts(backend, dtype, m, n):
    x = random_array((m, n), "f32")
    y = poisoned((2, m, n), dtype)
    run(backend, convert, y, x)
    rounded = dtypes.of(dtype).round(up(x))  # round to nearest even, exactly
    assert_close(y[0], rounded, dtype, tol=0.0, what="copy")
    assert_close(y[1], rounded, dtype, tol=0.0, what="through shared")


@tl.kernel
def through_shared(Y, X):
    """X -> registers through a shared f32 tile -> Y through a shared tile of Y's dtype (tl.load / tl.store via=)."""
    br, bc = grid2(X)
    x = tl.regs(tl.f32, BR, BC)
    tl.load(x, X, (br, bc), via=tl.shared(tl.f32, BR, BC))
    tl.store(Y, x, (br, bc), via=tl.shared(Y.dtype, BR, BC))


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@settings(max_examples=3)
@given(m=extent, n=extent)
def test_load_and_store_via_a_shared_tile(backend, dtype, m, n):
    """Edge tiles included: what lies past X reads as 0 and is never written to Y."""
    x = random_array((m, n), "f32")
    y = poisoned((m, n), dtype)
    run(backend, through_shared, y, x)
    assert_close(y, dtypes.of(dtype).round(up(x)), dtype, tol=0.0)


@tl.kernel
def rows_anywhere(Y, X, *, BC):
    """X -> Y twice: through a register tile (in runs on CUDA) and through a shared tile, 16 rows by BC a block."""
    br, bc = tl.grid(tl.cdiv(X.rows, 16), tl.cdiv(X.cols, BC))
    x = tl.regs(tl.f32, 16, BC)
    tl.load(x, X, (br, bc))
    tl.store(Y, x, (0, br, bc))
    staged = tl.regs(tl.f32, 16, BC)
    tl.load(staged, X, (br, bc), via=tl.shared(X.dtype, 16, BC))
    tl.store(Y, staged, (1, br, bc))


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
@settings(max_examples=3)
@given(m=st.integers(16, 40), n=st.integers(129, 300), bc=st.sampled_from([32, 64, 128]))
def test_rows_off_alignment(backend, dtype, m, n, bc):
    """Rows that start anywhere on their elements (n not a multiple of a 16-byte unit): tiles whose columns lie
    inside the global read whole aligned words and shift them into place on CUDA (read16_shifted; those whose rows
    run past its end each row behind a test), tiles past the columns' end element by element; every element arrives
    exactly, nothing past X is read into Y. Whole tiles and edge tiles in every draw."""
    x = random_array((m, n), dtype)
    y = poisoned((2, m, n), "f32")
    run(backend, rows_anywhere, y, x, BC=bc)
    assert_close(y[0], up(x), "f32", tol=0.0, what="registers")
    assert_close(y[1], up(x), "f32", tol=0.0, what="through shared")



@tl.kernel
def odd_blocks(Y, X, *, BC):
    """X's odd column blocks (16 rows by BC) -> the same blocks of Y, through a register tile (in runs on CUDA)."""
    br, bc = tl.grid(tl.cdiv(X.rows, 16), tl.cdiv(X.cols, 2 * BC))
    x = tl.regs(tl.f32, 16, BC)
    tl.load(x, X, (br, 2 * bc + 1))
    tl.store(Y, x, (br, 2 * bc + 1))


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
@settings(max_examples=3)
@given(m=st.integers(9, 40), n=st.integers(129, 300), bc=st.sampled_from([32, 64, 128]))
def test_stores_to_rows_off_alignment(backend, dtype, m, n, bc):
    """Rows of Y that start anywhere on their elements (9 rows or more: every offset from a 16-byte boundary that
    the dtype allows): a register tile stores into its column block and nowhere else (on CUDA as aligned 16-byte
    words, its quad's neighbour's bytes shifted in, a row's first and last words element by element), whole tiles,
    tiles past the rows' end and past the columns' end alike; the even blocks keep their poison."""
    x = random_array((m, n), dtype)
    y = poisoned((m, n), dtype)
    run(backend, odd_blocks, y, x, BC=bc)
    odd = (np.arange(n) // bc) % 2 == 1
    assert_close(y[:, odd], up(x)[:, odd], dtype, tol=0.0, what="odd blocks")
    assert np.isnan(up(y)[:, ~odd]).all(), "a store reached a column outside its tile"

def swapped(x, n_pad):
    """float64 column pairs of x exchanged; x padded with zero columns to n_pad first (loads past the end read 0)."""
    z = np.zeros((x.shape[0], n_pad))
    z[:, :x.shape[1]] = x
    out = np.empty_like(z)
    out[:, 0::2], out[:, 1::2] = z[:, 1::2], z[:, 0::2]
    return out[:, :x.shape[1]]


@tl.kernel
def swaps(Y, X):
    """Y[0]: the pairs of x exchanged into another tile; Y[1]: in place. Tiles of Y's dtype."""
    br, bc = grid2(X)
    x = tl.regs(Y.dtype, BR, BC)
    y = tl.regs(Y.dtype, BR, BC)
    tl.load(x, X, (br, bc))
    tl.swap_pairs(y, x)
    tl.store(Y, y, (0, br, bc))
    tl.swap_pairs(x, x)
    tl.store(Y, x, (1, br, bc))


def check_swaps(backend, m, n, dtype):
    x = random_array((m, n), "f32")
    y = poisoned((2, m, n), dtype)
    run(backend, swaps, y, x)
    ref = swapped(dtypes.of(dtype).round(up(x)), -(-n // 2) * 2)
    assert_close(y[0], ref, dtype, tol=0.0, what="swap_pairs")
    assert_close(y[1], ref, dtype, tol=0.0, what="swap_pairs in place")


@settings(max_examples=4)
@given(m=extent, n=extent, dtype=st.sampled_from(["f32", "bf16", "f16"]))
def test_swap_pairs(backend, m, n, dtype):
    check_swaps(backend, m, n, dtype)


@settings(max_examples=2)
@given(m=extent, n=extent)
def test_swap_pairs_fp8(backend, m, n):
    """Apart from the others: it also takes the targets' fp8 register-tile loads and stores, which little else does."""
    if backend.target and "fp8e4m3" not in targets.target(backend.target).dtypes:
        pytest.skip(f"{backend.target} has no fp8 register tiles")
    check_swaps(backend, m, n, "fp8e4m3")


@tl.kernel
def swaps_operand(C, A, I):
    """C = swap_pairs(a) @ I: the exchange on a register tile that is an MMA's A operand (its own layout on CDNA)."""
    br, bc = tl.grid(tl.cdiv(A.rows, BR), tl.cdiv(A.cols, 32))
    a = tl.regs(A.dtype, BR, 32)
    eye = tl.shared(A.dtype, 32, 32)
    c = tl.regs(tl.f32, BR, 32)
    tl.load(a, A, (br, bc))
    tl.load(eye, I, (0, 0))
    tl.swap_pairs(a, a)
    tl.zero(c)
    tl.mma_AB(c, a, eye, c)
    tl.store(C, c, (br, bc))


@settings(max_examples=3)
@given(m=extent, n=extent, dtype=st.sampled_from(["bf16", "f16"]))
def test_swap_pairs_of_an_mma_operand(backend, m, n, dtype):
    a = random_array((m, n), dtype)
    c = poisoned((m, n), "f32")
    run(backend, swaps_operand, c, a, np.eye(32).astype(a.dtype))
    assert_close(c, swapped(up(a), -(-n // 2) * 2), "f32", tol=0.0, what="swap_pairs of an mma operand")


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


MMA_VARIANTS = [(False, False, False), (False, True, False), (True, False, False), (True, True, False),
                (False, False, True), (False, True, True)]  # (a transposed, b transposed, a from registers)
M, N, K = 64, 32, 32


@tl.kernel
def mma(C, A, At, B, Bt, Cin):
    """C[i] = op_i(A) @ op_i(B) + Cin for every mma variant, a from shared or from registers."""
    tl.grid(1)
    a, at = tl.shared(A.dtype, M, K), tl.shared(A.dtype, K, M)
    b, bt = tl.shared(B.dtype, K, N), tl.shared(B.dtype, N, K)
    ar = tl.regs(A.dtype, M, K)
    cin, c = tl.regs(tl.f32, M, N), tl.regs(tl.f32, M, N)
    tl.load(a, A, (0, 0))
    tl.load(at, At, (0, 0))
    tl.load(b, B, (0, 0))
    tl.load(bt, Bt, (0, 0))
    tl.load(ar, a)
    tl.load(cin, Cin, (0, 0))
    for i, (ta, tb, in_regs) in enumerate(MMA_VARIANTS):
        f = getattr(tl, f"mma_{'At' if ta else 'A'}{'Bt' if tb else 'B'}")
        f(c, ar if in_regs else at if ta else a, bt if tb else b, cin)
        tl.store(C, c, (i, 0, 0))


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_mma(backend, dtype):
    a, b = random_array((M, K), dtype), random_array((K, N), dtype)
    cin = random_array((M, N), "f32")
    c = poisoned((len(MMA_VARIANTS), M, N), "f32")
    run(backend, mma, c, a, np.ascontiguousarray(a.T), b, np.ascontiguousarray(b.T), cin)
    ref = up(a) @ up(b) + up(cin)
    for i, variant in enumerate(MMA_VARIANTS):
        assert_close(c[i], ref, "f32", tol=1e-5, what=f"mma (At, Bt, A in registers) = {variant}")


@tl.kernel
def accumulate(Out, X):
    """Out += X block by block through atomics; a range loop adds each block twice."""
    br, bc = grid2(X)
    x = tl.regs(tl.f32, BR, BC)
    tl.load(x, X, (br, bc))
    for _ in tl.range(2):
        tl.atomic_add(Out, x, (br, bc))


@settings(max_examples=4)
@given(m=extent, n=extent)
def test_atomic_add_and_range(backend, m, n):
    x, out = random_array((m, n), "f32"), random_array((m, n), "f32")
    ref = up(out) + 2 * up(x)
    run(backend, accumulate, out, x)
    assert_close(out, ref, "f32")


@tl.kernel
def vectors(Y, X, *, n):
    (bi,) = (tl.grid(tl.cdiv(X.cols, n)),)
    v = tl.rvec(tl.f32, n, axis="cols")
    sv = tl.shared_vec(X.dtype, n)
    tl.load(sv, X, (0, bi))
    tl.load(v, sv)
    tl.exp(v, v)
    tl.store(Y, v, (0, bi))


@settings(max_examples=4)
@given(n=st.integers(1, 300))
def test_vectors(backend, n):
    x = random_array((n,), "f32")
    y = poisoned((n,), "f32")
    run(backend, vectors, y, x, n=64)
    assert_close(y, np.exp(up(x)), "f32")


@tl.kernel
def past_the_last_depth(Y, X):
    d, br, bc = tl.grid(2 * X.depth, tl.cdiv(X.rows, BR), tl.cdiv(X.cols, BC))
    x = tl.regs(tl.f32, BR, BC)
    tl.load(x, X, (d, br, bc))   # depth d >= X.depth: past the end of X, so zeros
    tl.add(x, x, 1.0)
    tl.store(Y, x, (d, br, bc))


@settings(max_examples=2)
@given(depth=st.integers(1, 3), m=extent, n=extent)
def test_tiles_past_the_last_depth_read_zeros(backend, depth, m, n):
    """Bounds cover every dim, not only rows and columns (docs/design.md: loads past the end read zeros)."""
    x = random_array((depth, m, n), "f32")
    y = poisoned((2 * depth, m, n), "f32")
    run(backend, past_the_last_depth, y, x)
    assert_close(y, np.concatenate([up(x), np.zeros((depth, m, n))]) + 1.0, "f32")


@tl.kernel
def _grouped_blocks(Out, group):
    """Each block fills its 16x16 tile of Out with a number naming the tile it took (tl.grid's group order)."""
    bx, by, bz = tl.grid(tl.cdiv(Out.cols, 16), tl.cdiv(Out.rows, 16), Out.depth, group=group)
    t = tl.regs(tl.f32, 16, 16, name="t")
    tl.fill(t, bz * 10000 + by * 100 + bx)
    tl.store(Out, t, (bz, by, bx))


@settings(max_examples=4)
@given(cols=st.integers(1, 7), rows=st.integers(1, 9), depth=st.integers(1, 2), group=st.integers(1, 10))
def test_grid_group_gives_every_block_one_tile(backend, cols, rows, depth, group):
    """tl.grid(group=g) reorders which tile a block takes, never the set: each tile is filled once, with its own
    number (poisoned first: a tile no block took stays NaN), whether g divides the rows or leaves a short group."""
    out = poisoned((depth, 16 * rows, 16 * cols), "f32")
    run(backend, _grouped_blocks, out, group)
    z, y, x = np.meshgrid(np.arange(depth), np.arange(rows), np.arange(cols), indexing="ij")
    want = np.kron(z * 10000 + y * 100 + x, np.ones((1, 16, 16)))
    np.testing.assert_array_equal(np.asarray(out, dtype=np.float64), want)


def test_grid_group_is_refused_on_a_one_dim_grid_and_where_it_is_no_whole_number_of_rows():
    @tl.kernel
    def one_dim(Out):
        b = tl.grid(Out.rows, group=2)
        tl.store(Out, tl.regs(tl.f32, 16, 16), (b, 0))
    with pytest.raises(TileError, match="groups the rows of a 2-D or 3-D grid"):
        one_dim.trace((np.zeros((16, 16), np.float32),), None)
    out = poisoned((1, 32, 32), "f32")
    with pytest.raises(TileError, match="takes a whole number of rows; got a f32"):
        run("reference", _grouped_blocks, out, 2.5)
    with pytest.raises(TileError, match="group"):   # 0 rows a group: refused before the launch, not divided by
        run("reference", _grouped_blocks, out, 0)
    assert np.isnan(out).all()
