"""The shipped GEMM and attention forward, property-tested on every backend against float64."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tiles.kernels.attention import attention, reference
from tiles.backend import resolve
from tiles.kernels.gemm import gemm, matmul
from tiles.dsl import TileError
from tiles.testing import assert_close, random_array


def up(x):
    return np.asarray(x).astype(np.float64)


@settings(max_examples=6)
@given(m=st.integers(1, 200), n=st.integers(1, 200), k=st.integers(1, 160),
       dtype=st.sampled_from(["bf16", "f16"]), out=st.sampled_from(["f32", "bf16"]), trans_a=st.booleans(),
       trans_b=st.booleans())
def test_gemm(backend, m, n, k, dtype, out, trans_a, trans_b):
    a = random_array((k, m) if trans_a else (m, k), dtype)
    b = random_array((n, k) if trans_b else (k, n), dtype)
    out_np = {"f32": np.float32, "bf16": random_array((1,), "bf16").dtype}[out]
    c = matmul(a, b, out_dtype=out_np, trans_a=trans_a, trans_b=trans_b, backend=backend)
    ref = (up(a).T if trans_a else up(a)) @ (up(b).T if trans_b else up(b))
    assert_close(c, ref, out)


@settings(max_examples=6)
@given(n=st.integers(1, 300), k=st.integers(1, 700), split=st.sampled_from([1, 2, 3]), bk=st.sampled_from([32, 64]),
       out=st.sampled_from(["f32", "bf16", "acc"]), trans_b=st.booleans())
def test_gemm_swapped(backend, n, k, split, bk, out, trans_b):
    """A C of one row computed as its transpose (swap: the weights as the product's 64-row tiles, A's row as a
    16-column one), K whole or split, into any C or accumulated, against float64."""
    a = random_array((1, k), "bf16")
    b = random_array((n, k) if trans_b else (k, n), "bf16")
    ref = up(a) @ (up(b).T if trans_b else up(b))
    cfg = dict(swap=True, BM=64, BN=16, BK=bk, workers=1, SPLIT=split, trans_b=trans_b, backend=backend)
    if out == "acc":
        c0 = random_array((1, n), "f32").astype(np.float32)
        assert_close(matmul(a, b, out=c0.copy(), **cfg), up(c0) + ref, "f32")
    else:
        assert_close(matmul(a, b, out_dtype={"f32": np.float32, "bf16": a.dtype}[out], **cfg), ref, out)


def test_gemm_swap_needs_one_row():
    """swap computes a one-row C as its transpose; any other C is refused before anything runs, and so is a
    trace that asks for it (the swapped launch is the plan's)."""
    from tiles.tune import Shaped
    b = Shaped((64, 32), "bf16")
    with pytest.raises(TileError, match=r"swap=True computes a C of one row.*\(2, 32\)"):
        gemm.steps([Shaped((2, 32), "bf16"), Shaped((2, 64), "bf16"), b], "sm_90a", swap=True)
    c, a = Shaped((1, 32), "bf16"), Shaped((1, 64), "bf16")
    ((f, (ct, bb, aa), kw),) = gemm.steps([c, a, b], "sm_90a", swap=True)
    assert f is gemm and ct.shape == (32, 1) and (bb, aa) == (b, a) and kw["trans_a"] and kw["trans_b"]
    with pytest.raises(TileError, match="swap=True launches the transposed product"):
        gemm.trace([c, a, b], "sm_90a", swap=True)


def test_gemm_decode_row_is_swapped_on_sm90a():
    """sm_90a's heuristic computes one row against 4096 columns of weights as C^T: 64 blocks of 64 weight rows
    by A's row (wgmma m64n16), each of K's steps 20 KB of shared memory where unswapped A's row took 64 rows."""
    from tiles.tune import Shaped
    c, a, b = Shaped((1, 4096), "bf16"), Shaped((1, 4096), "bf16"), Shaped((4096, 4096), "bf16")
    cfg = gemm.shape_config("sm_90a", [c, a, b])
    assert cfg["swap"] and (cfg["BM"], cfg["BN"]) == (64, 16)
    assert not gemm.shape_config("sm_90a", [Shaped((2, 4096), "bf16"), Shaped((2, 4096), "bf16"), b]).get("swap")


@pytest.mark.parametrize("trans_b", [False, True])
def test_gemm_full_steps_then_tails(backend, trans_b):
    """Small blocks over arrays whose rows are whole 16-byte runs: inner blocks run full K steps (every fill of the
    step unchecked, at once) and then a K tail (every fill checked), blocks at the M and N edges check every step."""
    m, n, k = 150, 136, 3 * 32 + 8
    a = random_array((m, k), "bf16")
    b = random_array((n, k) if trans_b else (k, n), "bf16")
    c = matmul(a, b, out_dtype=np.float32, trans_b=trans_b, backend=backend, BM=64, BN=64, BK=32, workers=4)
    assert_close(c, up(a) @ (up(b).T if trans_b else up(b)), "f32")


@pytest.mark.parametrize("m", [1, 13])
def test_gemm_at_a_decode_step_runs_the_heuristic(backend, m):
    """A few rows and a long K: where the kernel's heuristic sets the configuration for the backend's target
    (sm_90a; CDNA, which this executes on the CPU), the launch runs it, K split included, against float64."""
    a = random_array((m, 6144), "bf16")
    b = random_array((6144, 72), "bf16")
    c = np.full((m, 72), np.nan, random_array((1,), "bf16").dtype)
    where = resolve(backend)
    k = where.launch(gemm, [c, a, b])
    if gemm.shape_config(where.target, [c, a, b]):   # 96 steps of 64 for 1 tile of C: K split
        assert k.consts["BM"] == 64 and k.consts["SPLIT"] > 1
    assert_close(c, up(a) @ up(b), "bf16")


@settings(max_examples=6)
@given(batch=st.integers(1, 2), kv_heads=st.integers(1, 2), group=st.sampled_from([1, 2]),
       n=st.integers(1, 150), d=st.sampled_from([64, 128]), causal=st.booleans(),
       dtype=st.sampled_from(["bf16", "f16"]), longest_first=st.booleans())
def test_attention_forward(backend, batch, kv_heads, group, n, d, causal, dtype, longest_first):
    check_attention_forward(backend, batch, kv_heads, group, n, d, causal, dtype, longest_first)


@settings(max_examples=2)
@given(n=st.integers(1, 150), group=st.sampled_from([1, 2]), causal=st.booleans(),
       dtype=st.sampled_from(["bf16", "f16"]))
@pytest.mark.parametrize("d", [32, 96, 256])
def test_attention_forward_head_dims(backend, d, n, group, causal, dtype):
    """The head dims configured from the resource reports alone (attention.HEAD_DIMS; 256 with the smaller
    blocks of WIDE_HEAD), on every backend against float64."""
    check_attention_forward(backend, 1, 2, group, n, d, causal, dtype, longest_first=False)


def check_attention_forward(backend, batch, kv_heads, group, n, d, causal, dtype, longest_first):
    heads = kv_heads * group
    q = random_array((batch, heads, n, d), dtype)
    k = random_array((batch, kv_heads, n, d), dtype)
    v = random_array((batch, kv_heads, n, d), dtype)
    o, lse = attention(q, k, v, causal=causal, backend=backend, longest_first=longest_first)
    ref_o, ref_lse = reference(q, k, v, causal=causal)
    assert_close(o, ref_o, dtype, what="O")
    assert_close(lse, ref_lse, "f32", tol=1e-4, what="LSE")


@settings(max_examples=4)
@given(m=st.integers(1, 80), n=st.integers(1, 140), k=st.integers(1, 300), split=st.sampled_from([1, 2, 4]),
       dtype=st.sampled_from(["bf16", "f16"]), trans_b=st.booleans())
def test_gemm_accumulate_split_k(backend, m, n, k, split, dtype, trans_b):
    """C += A @ B into an f32 C, its K loop split over `split` blocks per tile (atomic_add of the partials)."""
    a = random_array((m, k), dtype)
    b = random_array((n, k) if trans_b else (k, n), dtype)
    c0 = random_array((m, n), "f32")
    c = matmul(a, b, out=c0.copy(), trans_b=trans_b, backend=backend, SPLIT=split, BK=32)
    assert_close(c, up(c0) + up(a) @ (up(b).T if trans_b else up(b)), "f32")


@settings(max_examples=4)
@given(batch=st.sampled_from([0, 2]), m=st.integers(1, 70), n=st.integers(1, 140), k=st.integers(65, 300),
       split=st.sampled_from([2, 3, 4]), out=st.sampled_from(["bf16", "f16", "f32"]), trans_b=st.booleans())
def test_gemm_split_k_into_any_c(backend, batch, m, n, k, split, out, trans_b):
    """C = A @ B with K split over `split` blocks per tile into a C that does not accumulate (bf16, f16, f32;
    batched or not): the f32 partial products each to their own slice of a poisoned workspace, then their sum
    converted to C's dtype, by the last block of a tile (tl.store_sum) or, on Apple, a second launch (kernels/gemm.py
    split_plan). BK=32: the split rarely divides the steps."""
    lead = (batch,) if batch else ()
    dtype = "f16" if out == "f16" else "bf16"
    a = random_array((*lead, m, k), dtype)
    b = random_array((*lead, n, k) if trans_b else (*lead, k, n), dtype)
    out_np = random_array((1,), out).dtype
    c = matmul(a, b, out_dtype=out_np, trans_b=trans_b, backend=backend, SPLIT=split, BK=32)
    assert_close(c, up(a) @ (up(b).swapaxes(-1, -2) if trans_b else up(b)), out)


def test_gemm_split_is_one_launch_or_two_or_refused():
    """Split K into a C that does not accumulate is gemm's plan: where the target has a fence between blocks, one
    launch with an f32 workspace of parts and zeroed counters (tl.store_sum); on Apple two, gemm into the
    workspace and sum_parts. The kernel traced alone with that split and no workspace refuses, since its blocks
    would overwrite one another's tiles."""
    from tiles.kernels.gemm import gemm, sum_parts
    from tiles.tune import Shaped
    args = [Shaped((5, 40), "bf16"), Shaped((5, 300), "bf16"), Shaped((300, 40), "bf16")]
    for target in ("sm_90a", "gfx950", None):
        ((f, (c, a, b, parts, arrivals), kw),) = gemm.steps(args, target, SPLIT=3, BM=64, BN=32)
        assert f is gemm and kw == {"SPLIT": 3, "BM": 64, "BN": 32} and [c, a, b] == args
        assert parts.shape == (3, 5, 40) and parts.fill is None
        assert arrivals.shape == (1, 2) and arrivals.dtype == np.int32 and arrivals.fill == 0
    steps = gemm.steps(args, "apple", SPLIT=3)
    assert [f for f, _, _ in steps] == [gemm, sum_parts]
    assert steps[0][1][0].shape == (3, 5, 40) and steps[0][2] == {"SPLIT": 3, "parts": True}
    assert gemm.steps(args, "sm_90a") == [(gemm, args, {})]
    with pytest.raises(TileError, match="needs the parts' workspace"):
        gemm.trace(args, "sm_90a", SPLIT=3)


def test_gemm_split_sums_rows_of_a_contiguous_c():
    """sum_parts is elementwise: split_plan hands it a C with contiguous rows, and the workspace, as rows of its
    tile's width (C of one row fills the 16-row tiles) over the same memory; any other C as it is."""
    from tiles.kernels.gemm import gemm, sum_parts
    from tiles.tune import Shaped
    a, b = Shaped((1, 1024), "bf16"), Shaped((1024, 4096), "bf16")
    (_, (parts, _, _), _), (f, (c, p), kw) = gemm.steps([Shaped((1, 4096), "bf16"), a, b], "apple", SPLIT=4)
    assert f is sum_parts and kw == {"PARTS": 4}
    assert c.shape == (128, 32) and p.shape == (4, 128, 32) and p.base is parts and parts.shape == (4, 1, 4096)
    big = np.zeros((2, 128), np.float32)
    for view, rows in ((big, (8, 32)), (big[1:], (4, 32)), (big[:, :64], None), (big[:, :40], None)):
        c = gemm.steps([view, Shaped((view.shape[0], 64), "bf16"), Shaped((64, view.shape[1]), "bf16")], "apple",
                       SPLIT=2)[1][1][0]
        assert np.shares_memory(c, view) and c.shape == (rows or view.shape)


def test_gemm_split_steps_share_one_workspace():
    """A backend whose workspaces are fresh arrays each time (torch's allocator on CUDA) still gives both steps
    one workspace: sum_parts reads what gemm wrote, in its own shape."""
    from tiles.backend import Backend

    class Fresh(Backend):
        target = "apple"   # where the split is two launches

        def workspace(self, spec, like, nth=0):
            return np.full(spec.shape, np.nan, spec.dtype)
    c, a, b = np.zeros((1, 64), np.float32), random_array((1, 256), "bf16"), random_array((256, 64), "bf16")
    (_, (parts, _, _), _), (_, (_, p), _) = Fresh().steps(gemm, [c, a, b], {"SPLIT": 4})
    assert parts.shape == (4, 1, 64) and p.shape == (4, 2, 32) and np.shares_memory(parts, p)


@pytest.mark.parametrize("name", ["cuda", "hip", "metal"])
def test_a_gpu_backends_temporaries_for_torch_tensors_come_from_torch(name, monkeypatch):
    """A plan's temporaries for a launch on torch tensors, on every GPU backend: torch tensors on the tensors'
    device (a host array would not launch there), a fresh one each launch where the plan writes it before reading
    it, one kept per stream where it holds a fill (gemm's counters)."""
    torch = pytest.importorskip("torch")
    from tiles.backend import get
    from tiles.tune import Shaped
    b = get(name)
    monkeypatch.setattr(b, "torch_stream", lambda device: 0)
    like = torch.zeros(3, dtype=torch.bfloat16)
    parts, counters = Shaped((4, 2, 32), "f32"), Shaped((2, 3), "i32", fill=0)
    one, two = b.workspace(parts, like), b.workspace(parts, like)
    assert isinstance(one, torch.Tensor) and one.shape == (4, 2, 32) and one.dtype == torch.float32
    assert one.device == like.device and one is not two
    kept = b.workspace(counters, like)
    assert kept is b.workspace(counters, like) and kept.dtype == torch.int32 and not kept.any()


@pytest.mark.parametrize("rows", ["contiguous", "strided"])
def test_gemm_split_k_into_a_view(backend, rows):
    """A split of K into a view of a larger array, one row (viewed as rows of sum_parts's width) or rows with a
    stride (taken as they are): the sums land in the view and nowhere else."""
    m, n, k = (1, 96, 256) if rows == "contiguous" else (3, 40, 256)
    big = random_array((m + 2, 2 * n), "bf16")
    before = up(big)
    c = big[1:1 + m, :n] if rows == "strided" else big[1:2].reshape(2, n)[:1]
    a, b = random_array((m, k), "bf16"), random_array((k, n), "bf16")
    resolve(backend).call(gemm, c, a, b, SPLIT=4, BK=32)
    assert_close(c, up(a) @ up(b), "bf16")
    after = up(big)
    after[1:1 + m, :n] = before[1:1 + m, :n]
    np.testing.assert_array_equal(after, before)


def test_gemm_accumulate_needs_f32():
    with pytest.raises(TileError, match="needs an f32 C"):
        matmul(random_array((8, 8), "bf16"), random_array((8, 8), "bf16"), out=random_array((8, 8), "bf16"))


@settings(max_examples=4)
@given(batch=st.integers(1, 3), m=st.integers(1, 90), n=st.integers(1, 90), k=st.integers(1, 120),
       shared_b=st.booleans(), trans_a=st.booleans(), trans_b=st.booleans(), split=st.sampled_from([1, 2]),
       out=st.sampled_from(["f32", "bf16"]))
def test_gemm_batched(backend, batch, m, n, k, shared_b, trans_a, trans_b, split, out):
    """(batch, M, K) x (batch, K, N), or a (K, N) shared by the batch, either operand given transposed: the grid's
    third dim walks the batch (with a split of K on top, accumulating); a bf16 C is stored by TMA on sm_90a, each
    batch's rows clipped."""
    a = random_array((batch, k, m) if trans_a else (batch, m, k), "bf16")
    shape = (n, k) if trans_b else (k, n)
    b = random_array(shape if shared_b else (batch, *shape), "bf16")
    at = up(a).swapaxes(-1, -2) if trans_a else up(a)
    bt = up(b).swapaxes(-1, -2) if trans_b else up(b)
    layout = dict(trans_a=trans_a, trans_b=trans_b, backend=backend)
    if split == 1:
        c = matmul(a, b, out_dtype=random_array((1,), out).dtype, **layout)
        assert_close(c, at @ bt, out)
    else:
        c0 = random_array((batch, m, n), "f32")
        c = matmul(a, b, out=c0.copy(), SPLIT=split, BK=32, **layout)
        assert_close(c, up(c0) + at @ bt, "f32")
