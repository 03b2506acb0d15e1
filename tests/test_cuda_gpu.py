"""The CUDA backend on a real GPU: torch and cupy arrays, streams, the pre-launch checks, against float64.

Every kernel's own property tests (tests/test_kernels.py, test_ops.py, test_kernel_*.py) also run on the GPU
through the `backend` fixture; these cover what is CUDA-specific: framework arrays, strided views, streams,
and the refusals before launch.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tiles.backend import get
from tiles.dtypes import bf16
from tiles.dsl import TileError
from tiles.kernels.attention import attention_fwd
from tiles.kernels.gemm import gemm
from tiles.testing import assert_close, poisoned, random_array, run

pytestmark = pytest.mark.gpu

cuda = get("cuda")
if cuda.available() is not None:
    pytest.skip(f"no CUDA backend here: {cuda.available()}", allow_module_level=True)

torch = pytest.importorskip("torch")
cupy = pytest.importorskip("cupy")

TORCH = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def to_torch(x: np.ndarray, dtype: str):
    return torch.from_numpy(x.astype(np.float32)).to(TORCH[dtype]).cuda()


def up(t) -> np.ndarray:
    return t.float().cpu().numpy().astype(np.float64)


@settings(max_examples=4)
@given(m=st.integers(1, 300), n=st.integers(1, 300), k=st.integers(1, 300),
       dtype=st.sampled_from(["bf16", "f16"]), out=st.sampled_from(["bf16", "f32"]), trans_b=st.booleans())
def test_gemm_on_torch_tensors(m, n, k, dtype, out, trans_b):
    a = to_torch(random_array((m, k), dtype), dtype)
    b = to_torch(random_array((n, k) if trans_b else (k, n), dtype), dtype)
    c = torch.full((m, n), float("nan"), dtype=TORCH[out], device="cuda")
    gemm(c, a, b, trans_b=trans_b)   # the backend is chosen from where the arrays live
    torch.cuda.synchronize()
    ref = up(a) @ (up(b).T if trans_b else up(b))
    assert_close(up(c), ref, out)


@settings(max_examples=3)
@given(n=st.integers(1, 300), d=st.sampled_from([64, 128]), causal=st.booleans(), group=st.sampled_from([1, 4]))
def test_attention_on_torch_views(n, d, causal, group):
    """Q, K, V as strided views of one packed (B, N, 3, H, D)-like buffer: batch/head strides are not dense."""
    heads, kv_heads = 2 * group, 2
    qkv = torch.randn(2, heads + 2 * kv_heads, n, d, device="cuda").to(torch.bfloat16)
    q, k, v = qkv[:, :heads], qkv[:, heads:heads + kv_heads], qkv[:, heads + kv_heads:]
    o = torch.full_like(q, float("nan"))
    lse = torch.full((2, heads, n), float("nan"), device="cuda")
    scale = 1 / math.sqrt(d)
    attention_fwd(o, lse, q, k, v, scale, D=d, causal=causal)
    torch.cuda.synchronize()
    kf, vf = (up(x).repeat(group, axis=1) for x in (k, v))
    s = up(q) @ kf.transpose(0, 1, 3, 2) * scale
    if causal:
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ vf
    assert_close(up(o), ref, "bf16", what="O")
    ref_lse = np.log(p.sum(-1)) + s.max(-1)
    assert_close(up(lse), ref_lse, "f32", tol=1e-4, what="LSE")


def test_cupy_arrays_and_side_stream():
    a = cupy.asarray(random_array((96, 64), "f16"))
    b = cupy.asarray(random_array((64, 80), "f16"))
    c = cupy.full((96, 80), cupy.nan, dtype=cupy.float32)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:                              # the launch goes on the current stream
        gemm(c, a, b)
    s.synchronize()
    assert_close(c.get(), a.get().astype(np.float64) @ b.get().astype(np.float64), "f32")


def test_torch_current_stream():
    a = to_torch(random_array((128, 128), "bf16"), "bf16")
    b = to_torch(random_array((128, 128), "bf16"), "bf16")
    c = torch.full((128, 128), float("nan"), device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        gemm(c, a, b)
        out = c.clone()                  # ordered after the kernel only if it ran on s
    s.synchronize()
    assert_close(up(out), up(a) @ up(b), "f32")


def test_captured_in_a_torch_cuda_graph():
    """A launch (after one outside the graph: the first compiles, loads and plans) is one driver call on the
    current stream, so torch.cuda.graph captures it; each replay reads the inputs' current contents."""
    a, b = (to_torch(random_array((128, 96), "bf16"), "bf16"), to_torch(random_array((96, 64), "bf16"), "bf16"))
    c = torch.full((128, 64), float("nan"), device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):        # warm-up on a side stream, as torch asks before a capture
        gemm(c, a, b)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemm(c, a, b)
    for _ in range(2):
        a.copy_(to_torch(random_array((128, 96), "bf16"), "bf16"))   # new values at the captured address
        c.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(up(c), up(a) @ up(b), "f32")


SPLIT = dict(BM=64, BN=128, BK=64, stages=4, workers=1, SPLIT=4)   # the last block of a tile adds the parts (split_plan)


@pytest.mark.skipif(cuda.target != "sm_90a", reason="programmatic launches are for sm_90a code")
def test_programmatic_launches_see_what_the_launch_before_wrote():
    """Every launch of sm_90a code is programmatic (runtime.Launch): a chain of split GEMMs with nothing between
    them and no synchronization, each reading what the one before it wrote and writing where the one before it
    read (two buffers in turn, and one workspace and set of counters), then one after a torch kernel: against
    float64, each step rounded to bf16 as the kernels round it."""
    n = 512
    ws = [to_torch(random_array((n, n), "bf16", scale=n ** -0.5), "bf16") for _ in range(6)]
    x = to_torch(random_array((1, n), "bf16"), "bf16")
    a, b = x.clone(), torch.empty_like(x)
    for w in ws:
        gemm(b, a, w, **SPLIT)
        a, b = b, a
    out = torch.empty_like(x)
    gemm(out, a.clone(), ws[0], **SPLIT)
    torch.cuda.synchronize()
    ref = up(x)
    for w in ws + ws[:1]:
        ref = bf16.round(ref @ up(w))
    assert_close(up(out), ref, "bf16")
    rt = cuda.runtime
    assert all(launch.programmatic == rt.programmatic for _, launch in rt.launches.values())


@pytest.mark.skipif(cuda.target != "sm_90a", reason="programmatic launches are for sm_90a code")
def test_programmatic_pair_captured_in_a_torch_cuda_graph():
    """A split of K (its counters kept from launch to launch, one set per stream) between torch kernels, captured
    by torch.cuda.graph: stream capture keeps the programmatic launch (CUDA 12.3 on); every replay is right."""
    src, b = to_torch(random_array((4, 512), "bf16"), "bf16"), to_torch(random_array((512, 256), "bf16"), "bf16")
    a, c = torch.empty_like(src), torch.full((4, 256), float("nan"), dtype=torch.bfloat16, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        a.copy_(src)
        gemm(c, a, b, **SPLIT)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        a.copy_(src)             # a torch kernel the gemm reads after
        gemm(c, a, b, **SPLIT)
        out = c.float() * 2      # a torch kernel that reads what the split's last blocks wrote
    for _ in range(3):
        src.copy_(to_torch(random_array((4, 512), "bf16"), "bf16"))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(up(out) / 2, up(src) @ up(b), "bf16")


def test_rejected_before_launch():
    a = to_torch(random_array((64, 64), "bf16"), "bf16")
    c = torch.full((64, 64), float("nan"), device="cuda")
    with pytest.raises(TileError, match="last dim must be contiguous"):
        gemm(c, a.t(), a)
    flat = torch.zeros(64 * 64 + 1, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(TileError, match="16-byte boundary"):
        gemm(c, flat[1:].view(64, 64), a)
    with pytest.raises(TileError, match="not on the GPU"):
        cuda.launch(gemm, [c, a.cpu(), a])
    with pytest.raises(TileError, match="dtype"):
        gemm(c, a.float(), a)
    with pytest.raises(TileError, match="argument check failed"):
        gemm(c, a[:, :32].contiguous(), a)
    assert torch.isnan(c).all()          # nothing ran


def test_compiled_once_and_cached_on_disk(tmp_path, monkeypatch):
    from tiles.backends.cuda import runtime
    monkeypatch.setenv("TILES_CACHE", str(tmp_path))
    rt = runtime.Runtime(cuda.target)
    rt.launch(gemm, [runtime.DeviceArray(random_array((32, 32), "f16")) for _ in range(3)], {})
    assert len(list((tmp_path / "cuda").glob("*.cubin"))) == 1
    rt2 = runtime.Runtime(cuda.target)   # a new process would find the cubin on disk, not compile again
    monkeypatch.setattr(runtime.toolchain, "compile", lambda *a, **k: pytest.fail("compiled twice"))
    rt2.launch(gemm, [runtime.DeviceArray(random_array((32, 32), "f16")) for _ in range(3)], {})


def test_a_remembered_launch_follows_its_arguments_and_constants():
    """Repeated launches reuse their trace, checks and parameters; a new constant, scalar or array must not."""
    from tiles.kernels.gemm_fp8 import gemm_fp8, supports_fp8
    a, b = (to_torch(random_array((64, 64), "bf16"), "bf16") for _ in range(2))
    ref = up(a) @ up(b)
    for trans_b, want in ((False, ref), (True, up(a) @ up(b).T), (False, ref)):
        c = torch.full((64, 64), float("nan"), device="cuda")
        gemm(c, a, b, trans_b=trans_b)       # same arrays but c, another constant
        torch.cuda.synchronize()
        assert_close(up(c), want, "f32")
    if supports_fp8(cuda.target):
        a8, b8 = (torch.from_numpy(random_array((64, 64), "fp8e4m3", None, 8.0).view(np.uint8)).cuda()
                  .view(torch.float8_e4m3fn) for _ in range(2))
        c = torch.full((64, 64), float("nan"), dtype=torch.bfloat16, device="cuda")
        for scale in (0.5, 0.25, 0.5):       # same arrays, another scalar
            c.fill_(float("nan"))
            gemm_fp8(c, a8, b8, scale, 1.0)
            torch.cuda.synchronize()
            assert_close(up(c), up(a8) @ up(b8).T * scale, "bf16")


@pytest.mark.skipif(cuda.target != "sm_90a", reason="wgmma needs sm_90a")
@settings(max_examples=3)
@given(m=st.integers(1, 300), n=st.integers(1, 300), k=st.integers(1, 300), trans_b=st.booleans(),
       seq=st.integers(1, 300), d=st.sampled_from([64, 128]), causal=st.booleans())
def test_wgmma_option_matches_float64(m, n, k, trans_b, seq, d, causal):
    """The warp schedule's block-level mma on warpgroup wgmma (schedule="warp", wgmma=True): GEMM, attention."""
    a = to_torch(random_array((m, k), "bf16"), "bf16")
    b = to_torch(random_array((n, k) if trans_b else (k, n), "bf16"), "bf16")
    c = torch.full((m, n), float("nan"), device="cuda")
    gemm(c, a, b, trans_b=trans_b, schedule="warp", wgmma=True)
    q, kk, v = (to_torch(random_array((1, 2, seq, d), "bf16"), "bf16") for _ in range(3))
    o = torch.full_like(q, float("nan"))
    lse = torch.full((1, 2, seq), float("nan"), device="cuda")
    attention_fwd(o, lse, q, kk, v, 1 / math.sqrt(d), D=d, causal=causal, schedule="warp", wgmma=True)
    torch.cuda.synchronize()
    assert_close(up(c), up(a) @ (up(b).T if trans_b else up(b)), "f32", tol=1e-5)
    s = up(q) @ up(kk).transpose(0, 1, 3, 2) / math.sqrt(d)
    if causal:
        s = np.where(np.tril(np.ones((seq, seq), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    assert_close(up(o), (p / p.sum(-1, keepdims=True)) @ up(v), "bf16", what="O")


def padded(x: np.ndarray, dtype: str):
    """x on the GPU as a view whose rows are padded to a multiple of 8 elements (16 bytes, what TMA needs)."""
    cols = x.shape[-1]
    store = torch.zeros(*x.shape[:-1], -(-cols // 8) * 8, dtype=TORCH[dtype], device="cuda")
    store[..., :cols] = to_torch(x, dtype)
    return store[..., :cols]


@pytest.mark.skipif(cuda.target != "sm_90a", reason="the warp-specialized schedule needs sm_90a")
@settings(max_examples=8, deadline=None)
@given(m=st.integers(1, 300), n=st.integers(1, 600), k=st.integers(1, 300), trans_b=st.booleans(),
       seq=st.integers(1, 400), d=st.sampled_from([64, 128]), causal=st.booleans(), persistent=st.booleans(),
       blocks=st.sampled_from([1, 2]))
def test_warp_specialized_schedule_matches_float64(m, n, k, trans_b, seq, d, causal, persistent, blocks):
    """schedule="warp_specialized": TMA producer warpgroup, wgmma consumers, setmaxnreg. Ragged shapes lean on
    TMA's zero fill past the end; row pitches are padded to 16 bytes (TMA refuses others, see the CPU tests).
    blocks=2: two blocks an SM (blocks_per_sm) on tiles small enough to share it."""
    a = padded(random_array((m, k), "bf16"), "bf16")
    b = padded(random_array((n, k) if trans_b else (k, n), "bf16"), "bf16")
    c = torch.full((m, n), float("nan"), device="cuda")
    ws = dict(schedule="warp_specialized", persistent=persistent)
    two = blocks == 2
    gemm(c, a, b, trans_b=trans_b, **ws, **(dict(BM=64, BN=128, BK=64, stages=4, workers=1, blocks_per_sm=2) if two
                                            else {}))
    q, kk, v = (padded(random_array((2, 2, seq, d), "bf16"), "bf16") for _ in range(3))
    o = torch.full_like(q, float("nan"))
    lse = torch.full((2, 2, seq), float("nan"), device="cuda")
    attention_fwd(o, lse, q, kk, v, 1 / math.sqrt(d), D=d, causal=causal, **ws,
                  **(dict(BM=64, BN=64, workers=1, blocks_per_sm=2) if two else {}))
    torch.cuda.synchronize()
    assert_close(up(c), up(a) @ (up(b).T if trans_b else up(b)), "f32", tol=1e-5)
    s = up(q) @ up(kk).transpose(0, 1, 3, 2) / math.sqrt(d)
    if causal:
        s = np.where(np.tril(np.ones((seq, seq), dtype=bool)), s, -np.inf)
    mx = s.max(-1, keepdims=True)
    p = np.exp(s - mx)
    assert_close(up(o), (p / p.sum(-1, keepdims=True)) @ up(v), "bf16", what="O")
    assert_close(up(lse), (np.log(p.sum(-1)) + mx[..., 0]), "f32", tol=1e-4, what="LSE")


@pytest.mark.skipif(cuda.target != "sm_90a", reason="the warp-specialized schedule needs sm_90a")
@settings(max_examples=6, deadline=None)
@given(seq=st.integers(1, 700), causal=st.booleans(), persistent=st.booleans(), group=st.sampled_from([1, 2]))
def test_attention_d64_in_192_row_query_blocks_matches_float64(seq, causal, persistent, group):
    """Head dim 64's configuration from 2048 queries on sm_90a (the heuristic's): 192-row query blocks over three
    consumer warpgroups, one exponential in 8 as a polynomial; ragged ends of the 192 rows, GQA."""
    q, o = (padded(random_array((2, 2 * group, seq, 64), "bf16"), "bf16") for _ in range(2))
    kk, v = (padded(random_array((2, 2, seq, 64), "bf16"), "bf16") for _ in range(2))
    o.fill_(float("nan"))
    lse = torch.full((2, 2 * group, seq), float("nan"), device="cuda")
    attention_fwd(o, lse, q, kk, v, 0.125, D=64, causal=causal, BM=192, workers=3, exp2_poly=8, persistent=persistent)
    torch.cuda.synchronize()
    s = up(q) @ up(kk).repeat(group, axis=1).transpose(0, 1, 3, 2) * 0.125
    if causal:
        s = np.where(np.tril(np.ones((seq, seq), dtype=bool)), s, -np.inf)
    mx = s.max(-1, keepdims=True)
    p = np.exp(s - mx)
    assert_close(up(o), (p / p.sum(-1, keepdims=True)) @ up(v).repeat(group, axis=1), "bf16", what="O")
    assert_close(up(lse), np.log(p.sum(-1)) + mx[..., 0], "f32", tol=1e-4, what="LSE")


@pytest.mark.skipif(cuda.target != "sm_90a", reason="the warp-specialized schedule needs sm_90a")
@settings(max_examples=6, deadline=None)
@given(seq=st.integers(2, 300), causal=st.booleans(), group=st.sampled_from([1, 2]), d=st.sampled_from([64, 128]),
       wide=st.booleans())
def test_attention_backward_with_lse_read_from_shared_memory_matches_float64(seq, causal, group, d, wide):
    """shared_vectors (sm_90a's default): the backward's LSE and Delta read from their ring stage where sub_col
    uses them (never whole in registers), at the default block and, at head dim 64, at FlashAttention-3's 128 query
    rows a step (V in shared memory); ragged ends, GQA, causal, against float64 gradients."""
    from test_kernel_attention_bwd import reference_attention_grads
    from tiles.kernels.attention_bwd import attention_backward
    q, do = (random_array((1, 2 * group, seq, d), "bf16") for _ in range(2))
    k, v = (random_array((1, 2, seq, d), "bf16") for _ in range(2))
    o, lse, _, _, _ = reference_attention_grads(q, k, v, do, causal, 1 / math.sqrt(d))
    o = bf16.round(o).astype(q.dtype)
    _, _, ref_dq, ref_dk, ref_dv = reference_attention_grads(q, k, v, do, causal, 1 / math.sqrt(d), o)
    config = dict(BM=128, v_shared_from=0) if d == 64 and wide else {}
    dq, dk, dv = attention_backward(q, k, v, o, lse.astype(np.float32), do, causal=causal, backend="cuda",
                                    shared_vectors=True, **config)
    assert_close(dq, ref_dq, "bf16", what="dQ")
    assert_close(dk, ref_dk, "bf16", what="dK")
    assert_close(dv, ref_dv, "bf16", what="dV")


@pytest.mark.skipif(cuda.target != "sm_90a", reason="the warp-specialized schedule needs sm_90a")
def test_warp_specialized_schedule_refuses_rows_tma_cannot_address():
    a = to_torch(random_array((64, 60), "bf16"), "bf16")   # 120-byte rows: not a multiple of 16 bytes
    b = to_torch(random_array((60, 64), "bf16"), "bf16")
    c = torch.full((64, 64), float("nan"), device="cuda")
    with pytest.raises(TileError, match="multiples of 16 bytes"):
        gemm(c, a, b, schedule="warp_specialized")


@pytest.mark.skipif(cuda.target != "sm_90a", reason="the warp-specialized schedule needs sm_90a")
@settings(max_examples=6)
@given(m=st.integers(1, 200), n=st.integers(1, 300), k=st.integers(1, 200))
def test_default_schedule_is_warp_specialized_where_tma_can_read_the_arrays(m, n, k):
    """With no schedule asked for, a launch whose rows TMA cannot address (pitch not a multiple of 16 bytes)
    runs the warp schedule instead of refusing: both give the float64 result."""
    a = to_torch(random_array((m, k), "bf16"), "bf16")
    b = to_torch(random_array((k, n), "bf16"), "bf16")
    c = torch.full((m, n), float("nan"), device="cuda")
    from tiles.backends.cuda import runtime
    rt = runtime.Runtime(cuda.target)
    traced = rt.launch(gemm, [c, a, b], {})
    torch.cuda.synchronize()
    assert_close(up(c), up(a) @ up(b), "f32", tol=1e-5)
    # TMA steps over a row only where there are several: then its pitch must be a multiple of 16 bytes
    unaddressable = (m > 1 and (k * 2) % 16) or (k > 1 and (n * 2) % 16)
    assert ((id(traced), "warp", 0) in rt.compiles) == bool(unaddressable)


@pytest.mark.skipif(cuda.target != "sm_90a", reason="the warp-specialized schedule needs sm_90a")
@pytest.mark.parametrize("blocks", [1, 2])
def test_persistent_grid_walks_more_tiles_than_the_gpu_has_sms(blocks):
    """Each block takes several tiles, so the stage ring carries on from one tile to the next (what the small
    hypothesis shapes above never reach: they have fewer tiles than SMs); with blocks_per_sm=2, two such blocks
    share each SM (a grid of twice the SMs)."""
    ws = dict(schedule="warp_specialized", persistent=True)
    small = dict(BM=64, BN=128, BK=64, stages=4, workers=1, blocks_per_sm=2) if blocks == 2 else {}
    a = padded(random_array((4096 + 17, 136), "bf16"), "bf16")     # 33 x 5 = 165 tiles of 128 x 256 (65 x 9 of 64 x 128)
    b = padded(random_array((136, 1024 + 5), "bf16"), "bf16")
    c = torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda")
    gemm(c, a, b, **ws, **small)
    q, kk, v = (padded(random_array((4, 8, 1100, 64), "bf16"), "bf16") for _ in range(3))   # 288 tiles (576)
    o = torch.full_like(q, float("nan"))
    lse = torch.full((4, 8, 1100), float("nan"), device="cuda")
    attention_fwd(o, lse, q, kk, v, 0.125, D=64, causal=True, **ws,
                  **(dict(BM=64, BN=64, workers=1, blocks_per_sm=2) if blocks == 2 else {}))
    torch.cuda.synchronize()
    assert_close(up(c), up(a) @ up(b), "f32", tol=1e-5)
    s = up(q) @ up(kk).transpose(0, 1, 3, 2) * 0.125
    s = np.where(np.tril(np.ones((1100, 1100), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    assert_close(up(o), (p / p.sum(-1, keepdims=True)) @ up(v), "bf16", what="O")


@pytest.mark.skipif(cuda.target != "sm_90a", reason="the warp-specialized schedule needs sm_90a")
@pytest.mark.parametrize("cfg", [dict(BM=256, BN=128, workers=4), dict(BM=256, BN=64, workers=4, persistent=False),
                                 dict(BM=128, BN=64, workers=2, blocks_per_sm=2)])
def test_consumers_take_what_the_setmaxnreg_pool_holds(cfg):
    """These hung on the H200 (12-04) while the consumers asked setmaxnreg for more registers than the block's
    pool held (four warpgroups 120 of 112, two at two blocks an SM 112 of 104; schedules.Schedule.consumer_regs).
    Host arrays, so that a launch that never ends raises LaunchHung instead of stalling the run; more tiles than
    SMs, so that persistent blocks take several."""
    a, b = random_array((4096 + 37, 520), "bf16"), random_array((520, 1024 + 24), "bf16")   # 153 tiles of 256x128
    c = np.full((a.shape[0], b.shape[1]), np.nan, np.float32)
    run(cuda, gemm, c, a, b, BK=64, stages=3, schedule="warp_specialized", **cfg)
    assert_close(c, a.astype(np.float64) @ b.astype(np.float64), "bf16")


@pytest.mark.skipif(cuda.target != "sm_90a", reason="the warp-specialized schedule needs sm_90a")
@pytest.mark.parametrize("shape,out", [((4096 + 37, 520, 1024 + 24, 1), "bf16"), ((1000, 512, 1024, 5), "bf16"),
                                       ((70, 136, 264, 3), "f32")])
def test_consumer_groups_take_the_tiles_in_turn_against_float64(shape, out):
    """consumer_groups=2: the two consumer warpgroups take alternate tiles of each block's walk, more tiles than
    SMs (each group several), an odd count of tiles a block, a batch (the walk's third dim) and edge tiles; a bf16
    C through each group's staging tile and TMA store, an f32 one from registers; 12 tiles, fewer than the SMs: a
    block of one round, whose second group never takes the ring. Host arrays: a group that waits on a slot the
    producer never fills raises LaunchHung instead of stalling (as the first run did, before the groups' turns)."""
    m, k, n, z = shape
    a, b = random_array((z, m, k), "bf16"), random_array((z, k, n), "bf16")
    c = poisoned((z, m, n), out)
    run(cuda, gemm, c, a, b, BM=64, BN=256, BK=64, stages=4, workers=1, persistent=True, consumer_groups=2,
        schedule="warp_specialized")
    assert_close(c, a.astype(np.float64) @ b.astype(np.float64), "bf16")


@pytest.mark.skipif(cuda.target != "sm_90a", reason="the warp-specialized schedule needs sm_90a")
@pytest.mark.parametrize("shape,cfg", [((4096 + 37, 520, 1024 + 24, 1), dict()), ((1000, 512, 1024, 5), dict()),
                                       ((2 * 128 + 5, 136, 512, 3), dict(BM=128, BN=128, stages=4)),
                                       ((70, 1032, 264, 2), dict(BM=64, BN=256, workers=1)),
                                       ((4096 + 37, 520, 1024 + 24, 1), dict(trans_b=True)),
                                       ((200, 136, 136, 2), dict(BM=64, BN=64, workers=1, stages=8))])
def test_cluster_multicasts_b_against_float64(shape, cfg):
    """cluster=2: pairs of blocks on rows of tiles next to each other, each loading half of B's panels (or, one
    panel wide: trans_b's 256x64 tile, a 64x64 one, half its rows) into both: more tiles than SMs, an odd count of
    rows of tiles (the last pair's second tile lies past C: computed, never stored), a batch, edge tiles, K not a
    whole number of steps, 2 tiles a batch (fewer clusters than SMs), a B whose rows end inside a tile. A block
    that waited for bytes its peer never sent raises LaunchHung instead of stalling."""
    m, k, n, z = shape
    trans_b = cfg.get("trans_b", False)
    a, b = random_array((z, m, k), "bf16"), random_array((z, n, k) if trans_b else (z, k, n), "bf16")
    c = poisoned((z, m, n), "bf16")
    run(cuda, gemm, c, a, b, persistent=True, cluster=2, schedule="warp_specialized", **cfg)
    want = a.astype(np.float64) @ (np.swapaxes(b, 1, 2) if trans_b else b).astype(np.float64)
    assert_close(c, want, "bf16")


@pytest.mark.skipif(cuda.target != "sm_90a", reason="the warp-specialized schedule needs sm_90a")
@pytest.mark.parametrize("cfg", [dict(), dict(SPLIT=4), dict(persistent=True), dict(stages=4, trans_b=True)])
def test_decode_gemm_through_a_fitted_box_matches_float64(cfg):
    """A decode step's A, shorter than its 64-row tile, loads through a box of its rows rounded up to 8
    (schedules.box_rows), the slots' rows past it zeroed once per launch: one compiled kernel across M of 1 to 65
    (boxes of 8 to 64 rows), each launch checked (a box that disagreed with the kernel's expected bytes would
    hang the ring, not return), K long enough that every slot is refilled many times."""
    small = dict(BM=64, BN=128, BK=64, stages=8, workers=1, schedule="warp_specialized")
    trans_b = cfg.pop("trans_b", False)
    w = random_array((1024, 2048) if trans_b else (2048, 1024), "bf16")
    b = padded(w, "bf16")
    for m in (1, 5, 8, 16, 20, 63, 65, 1):
        a = padded(random_array((m, 2048), "bf16"), "bf16")
        c = torch.full((m, 1024), float("nan"), device="cuda", dtype=torch.bfloat16)
        gemm(c, a, b, trans_b=trans_b, **{**small, **cfg})
        torch.cuda.synchronize()
        assert_close(up(c), up(a) @ (up(b).T if trans_b else up(b)), "bf16", what=f"C at M={m}")
