"""Register tiles whose column order no op observes (tiles/column_order.py), CUDA's loads and stores of them in runs
of contiguous columns (tc::load_runs, tc::store_runs; column vectors with them) and HIP's row_runs layout (every class of tiles no MMA and no
shared tile touches): which tiles qualify, and the results of kernels built from them against float64 on every
backend, at tile widths that give runs of 4 and 8, edge tiles and globals whose rows break the 16-byte (HIP: the
dword) alignment (the element-by-element path)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tiles as tl
from tiles import column_order, toolchains
from tiles.testing import assert_close, dims, poisoned, random_array, run


@tl.kernel
def scaled_rows(Y, S, X, W, *, BR, BC):
    """Y = X * sum(X^2 over the row) + W, S = that sum: each row of X whole in one tile (BC >= its columns)."""
    br = tl.grid(tl.cdiv(X.rows, BR))
    tl.check_eq(tl.minimum(X.cols, BC), X.cols)
    tl.check_eq(W.cols, X.cols)
    x = tl.regs(tl.f32, BR, BC, name="x")
    w = tl.regs(tl.f32, BR, BC, name="w")
    y = tl.regs(tl.f32, BR, BC, name="y")
    s = tl.rvec(tl.f32, BR, name="s")
    tl.load(x, X, (br, 0))
    tl.load(w, W, (br, 0))
    tl.mul(y, x, x)
    tl.row_sum(s, y)
    tl.mul_row(y, x, s)
    tl.add(y, y, w)
    tl.store(Y, y, (br, 0))
    tl.store(S, s, (br,))


@tl.kernel
def column_scaled(Y, X, V, *, BR, BC):
    """Y = X * V[col]: the column vector, loaded from a global, holds the tile's columns in the tile's order."""
    br = tl.grid(tl.cdiv(X.rows, BR))
    x = tl.regs(tl.f32, BR, BC, name="x")
    v = tl.rvec(tl.f32, BC, axis="cols", name="v")
    tl.load(x, X, (br, 0))
    tl.load(v, V, (0,))
    tl.mul_col(x, x, v)
    tl.store(Y, x, (br, 0))


@tl.kernel
def column_sums(S, Y, X, *, BR, BC):
    """S = X's column sums, Y = X scaled by them: a column reduction computes each column's lanes, so its class
    keeps the fragment order."""
    tl.grid(1)
    x = tl.regs(tl.f32, BR, BC, name="x")
    s = tl.rvec(tl.f32, BC, axis="cols", name="s")
    tl.load(x, X, (0, 0))
    tl.col_sum(s, x)
    tl.mul_col(x, x, s)
    tl.store(Y, x, (0, 0))
    tl.store(S, s, (0,))


@tl.kernel
def product(C, A, B, *, BM, BN, BK):
    """C = A B + C, C's tile loaded into e and added element by element: an mma's operands and result keep the
    fragment order, and so does everything joined to them."""
    bm, bn = tl.grid(tl.cdiv(C.rows, BM), tl.cdiv(C.cols, BN))
    a = tl.regs(A.dtype, BM, BK, name="a")
    b = tl.shared(B.dtype, BK, BN, name="b")
    c = tl.regs(tl.f32, BM, BN, name="c")
    e = tl.regs(tl.f32, BM, BN, name="e")
    tl.load(a, A, (bm, 0))
    tl.load(b, B, (0, bn))
    tl.load(e, C, (bm, bn))
    tl.zero(c)
    tl.mma_AB(c, a, b, c)
    tl.add(c, c, e)
    tl.store(C, c, (bm, bn))


@tl.kernel
def weighted_blocks(Y, X, W, *, BR, BC):
    """Y[:, block c] = X[:, block c] * W for each column block c: W loaded once, before the loop over the blocks."""
    br = tl.grid(tl.cdiv(X.rows, BR))
    w = tl.regs(tl.f32, BR, BC, name="w")
    x = tl.regs(tl.f32, BR, BC, name="x")
    tl.load(w, W, (br, 0))
    for c in tl.range(tl.cdiv(X.cols, BC), name="c"):
        tl.load(x, X, (br, c))
        tl.mul(x, x, w)
        tl.store(Y, x, (br, c))


@tl.kernel
def rows_below(Y, X, lim, *, BR, BC, MASK_COLS=0):
    """Y = X + the row's sum where the row is below lim, else 0: a bounds mask on rows, which keeps every column
    where its column bound is BC (MASK_COLS 0) and observes the columns' order where it is MASK_COLS < BC."""
    br = tl.grid(tl.cdiv(X.rows, BR))
    tl.check_eq(tl.minimum(X.cols, BC), X.cols)
    x = tl.regs(tl.f32, BR, BC, name="x")
    s = tl.rvec(tl.f32, BR, name="s")
    tl.load(x, X, (br, 0))
    tl.bounds_mask(x, x, lim - br * BR, MASK_COLS or BC, 0.0)
    tl.row_sum(s, x)
    tl.add_row(x, x, s)
    tl.store(Y, x, (br, 0))


def test_a_load_before_a_loop_converts_at_once(backend):
    """A tile loaded before a loop that touches it first keeps the plain load (CUDA, schedules.raw_loads: a raw tile
    converted inside the loop kept its bytes live through it, and ptxas spilled); against float64, edge tiles."""
    m, n, bc = 37, 104, 32   # rows of whole 16-byte units (runs: an aligned global)
    x, w = random_array((m, n), "bf16"), random_array((m, bc), "bf16")
    src = toolchains.emit(weighted_blocks, [poisoned((m, n), "f32"), x, w], "sm_80", "source", BR=16, BC=bc)
    assert "tc::load_runs(w, W" in src and "_raw" not in src
    y = poisoned((m, n), "f32")
    run(backend, weighted_blocks, y, x, w, BR=16, BC=bc)
    w64 = np.concatenate([w.astype(np.float64)] * -(-n // bc), 1)[:, :n]
    assert_close(y, x.astype(np.float64) * w64, "bf16")


def trace(kfn, *args, **consts):
    return kfn.trace(list(args), "sm_80", **consts)


def test_free_tiles():
    x, w = random_array((5, 40), "f32"), random_array((5, 40), "bf16")
    k = trace(scaled_rows, poisoned((5, 40), "f32"), poisoned((5,), "f32"), x, w, BR=16, BC=64)
    assert column_order.free_tiles(k) == {"x", "w", "y"}
    k = trace(column_scaled, poisoned((5, 40), "f32"), x, random_array((40,), "f32"), BR=16, BC=64)
    assert column_order.free_tiles(k) == {"x", "v"}
    k = trace(column_sums, poisoned((40,), "f32"), poisoned((5, 40), "f32"), x, BR=16, BC=64)
    assert column_order.free_tiles(k) == set()
    a, b = random_array((32, 16), "bf16"), random_array((16, 32), "bf16")
    k = trace(product, poisoned((32, 32), "f32"), a, b, BM=32, BN=32, BK=16)
    assert column_order.free_tiles(k) == set()   # e meets c, which an mma writes
    x = random_array((5, 40), "bf16")
    k = trace(rows_below, poisoned((5, 40), "bf16"), x, 3, BR=16, BC=64)
    assert column_order.free_tiles(k) == {"x"}   # the mask's column bound keeps all 64 columns
    k = trace(rows_below, poisoned((5, 40), "bf16"), x, 3, BR=16, BC=64, MASK_COLS=32)
    assert column_order.free_tiles(k) == {"x"}   # it keeps 32 of them, each lane's tested in the runs' order
    src = toolchains.emit(rows_below, [poisoned((5, 40), "bf16"), x, 3], "sm_80", "source", BR=16, BC=64,
                          MASK_COLS=32)
    assert "tc::bounds_mask<tc::runs_order>(x, x," in src and "tc::load_runs(" in src


def test_runs_in_the_cuda_source():
    """The free tiles' global accesses take the runs form, the others the fragment order; option runs=False
    keeps every access in the fragment order."""
    args = [poisoned((5, 40), "bf16"), poisoned((5,), "f32"), random_array((5, 40), "bf16"),
            random_array((5, 40), "bf16")]
    src = toolchains.emit(scaled_rows, args, "sm_80", "source", BR=16, BC=64)
    assert src.count("tc::load_runs(") == 2 and src.count("tc::store_runs(") == 1
    assert "tc::store(S, s" in src
    # x's bytes stay as loaded until W's load is out (schedules.raw_loads); w, touched after no other load, converts
    assert "tc::rt_raw<tc::bf16, 16, 64, NUM_WARPS> x_raw;" in src
    assert src.index("tc::load_runs(x_raw, X") < src.index("tc::load_runs(w, W") < \
        src.index("tc::copy(x, x_raw);") < src.index("tc::mul(y, x, x);")
    src = toolchains.emit(scaled_rows, args, "sm_80", "source", BR=16, BC=64, runs=False)
    assert "_runs(" not in src and "_raw" not in src
    cols = [poisoned((5, 40), "bf16"), random_array((5, 40), "bf16"), random_array((40,), "bf16")]
    src = toolchains.emit(column_scaled, cols, "sm_80", "source", BR=16, BC=64)
    assert "tc::load_runs(v, V" in src and "tc::load_runs(x_raw, X" in src


def test_row_runs_in_the_hip_source():
    """HIP: the classes no MMA touches take row_runs (runs of 8 where every tile is whole 32-column fragments, else
    4), column vectors with them; an MMA's class keeps the accumulator layout; runs=False keeps every tile in it."""
    rows = [poisoned((5, 40), "bf16"), poisoned((5,), "f32"), random_array((5, 40), "bf16"),
            random_array((5, 40), "bf16")]
    for bc, run_ in ((64, 8), (16, 4)):
        src = toolchains.emit(scaled_rows, rows, "gfx950", "source", BR=16, BC=bc)
        assert src.count(f"row_runs<16, {run_}>") == 4 and "acc<" not in src
    assert "row_runs" not in toolchains.emit(scaled_rows, rows, "gfx942", "source", BR=16, BC=64, runs=False)
    cols = [poisoned((5, 40), "bf16"), random_array((5, 40), "bf16"), random_array((40,), "bf16")]
    src = toolchains.emit(column_scaled, cols, "gfx950", "source", BR=16, BC=64)
    assert "row_runs<16, 8>> x;" in src
    assert "cv<float, 64, row_runs<16, 8>> v;" in src
    a, b = random_array((32, 32), "bf16"), random_array((32, 32), "bf16")
    src = toolchains.emit(product, [poisoned((32, 32), "f32"), a, b], "gfx950", "source", BM=32, BN=32, BK=32)
    assert "row_runs" not in src


@settings(max_examples=6, deadline=None)
@given(m=dims(1, 70), n=dims(1, 128), bc=st.sampled_from([16, 32, 64]), vd=st.sampled_from(["f32", "bf16"]),
       offset=st.sampled_from([0, 0, 1]))
def test_column_scaled(backend, m, n, bc, vd, offset):
    """A column vector with the tiles it scales, in their order: on CUDA in runs (tc::load_runs of the vector), on
    HIP in row_runs; a bf16 vector's runs one 16-byte load (or, one element off alignment, element by element)."""
    n = min(n, bc)
    x = random_array((m, n + offset), "bf16")[:, offset:]
    v = random_array((n + offset,), vd)[offset:]
    y = poisoned((m, n), "bf16")
    run(backend, column_scaled, y, x, v, BR=16, BC=bc)
    assert_close(y, x.astype(np.float64) * v.astype(np.float64)[None, :], "bf16")


@settings(max_examples=6, deadline=None)
@given(m=dims(1, 70), n=dims(1, 128), bc=st.sampled_from([16, 32, 64, 128]), xd=st.sampled_from(["f32", "bf16"]),
       yd=st.sampled_from(["f32", "bf16"]), offset=st.sampled_from([0, 0, 1]))
def test_scaled_rows(backend, m, n, bc, xd, yd, offset):
    n = min(n, bc)
    # offset 1: every array a view one element into a wider one, so that no row keeps 16-byte alignment
    view = lambda a: a[:, offset:offset + n] if a.ndim == 2 else a   # noqa: E731
    x = view(random_array((m, n + offset), xd))
    w = view(random_array((m, n + offset), "bf16"))
    y_full = poisoned((m, n + offset), yd)
    y = view(y_full)
    s = poisoned((m,), "f32")
    run(backend, scaled_rows, y, s, x, w, BR=16, BC=bc)
    x64 = x.astype(np.float64)
    s64 = (x64 ** 2).sum(1)
    assert_close(s, s64, xd)
    assert_close(y, x64 * s.astype(np.float64)[:, None] + w.astype(np.float64), yd)


@settings(max_examples=6, deadline=None)
@given(m=dims(1, 70), n=dims(1, 128), bc=st.sampled_from([16, 64, 128]), lim=st.integers(-1, 72),
       mask_cols=st.sampled_from([0, 8, 8, 40]), offset=st.sampled_from([0, 0, 1]))
def test_rows_masked(backend, m, n, bc, lim, mask_cols, offset):
    """A bounds mask leaves the tile in runs (CUDA), one that cuts columns testing each element's column in the
    runs' order. The rows from lim on are zero, every row below it X plus its sum over the kept columns."""
    n = min(n, bc)
    x = random_array((m, n + offset), "bf16")[:, offset:]
    y = poisoned((m, n), "bf16")
    run(backend, rows_below, y, x, lim, BR=16, BC=bc, MASK_COLS=mask_cols)
    kept = x.astype(np.float64) * (np.arange(n) < (mask_cols or bc))[None, :]
    want = np.where((np.arange(m) < lim)[:, None], kept + kept.sum(1, keepdims=True), 0.0)
    assert_close(y, want, "bf16")


@pytest.mark.parametrize("runs", [True, False])
def test_scaled_rows_whole_tiles(backend, runs):
    """Whole 16-byte-aligned tiles: the vector path, bf16 in and out, a run of 8 (BC 64) and of 4 (BC 16), one
    base tile of rows a warp and two (BR 64 over 2 workers)."""
    for m, n, br, bc, workers in ((32, 64, 16, 64, {}), (48, 16, 16, 16, {}), (128, 128, 64, 128, dict(workers=2))):
        x, w = random_array((m, n), "bf16"), random_array((m, n), "bf16")
        y, s = poisoned((m, n), "bf16"), poisoned((m,), "f32")
        run(backend, scaled_rows, y, s, x, w, BR=br, BC=bc, runs=runs, **workers)
        x64 = x.astype(np.float64)
        assert_close(s, (x64 ** 2).sum(1), "bf16")
        assert_close(y, x64 * s.astype(np.float64)[:, None] + w.astype(np.float64), "bf16")


@pytest.mark.parametrize("cd", ["bf16", "f32"])
def test_product_whole_and_edge_tiles(backend, cd):
    """An mma's class keeps the fragment (accumulator) layout; its loads and stores of whole tiles take the runs
    path all the same (HIP: a 16-bit element alone in its dword, at an unchecked offset; 4-byte ones as runs of one),
    edge tiles the checked one. C = A B + C at 64x64 (whole 32x32 tiles) and 40x50 (edge tiles)."""
    for m, n in ((64, 64), (40, 50)):
        a, b = random_array((m, 32), "bf16"), random_array((32, n), "bf16")
        c0 = random_array((m, n), cd)
        c = c0.copy()
        run(backend, product, c, a, b, BM=32, BN=32, BK=32)
        ref = a.astype(np.float64) @ b.astype(np.float64) + c0.astype(np.float64)
        assert_close(c, ref, cd)
