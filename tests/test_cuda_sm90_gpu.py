"""The hand-instantiated sm_90a GEMM and attention on a Hopper GPU, against float64 references: fresh random
inputs, outputs poisoned with NaN, shapes and options drawn by hypothesis. Skipped without torch and an sm_90 GPU."""
import math

import pytest
from hypothesis import given, settings, strategies as hs

from tiles.backends.cuda import bench

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
                                 reason="needs an sm_90 GPU")]


@pytest.fixture(scope="module")
def ker():
    return bench.Sm90Kernels()


@settings(max_examples=12)
@given(M=hs.integers(1, 700), N=hs.integers(1, 80).map(lambda x: 8 * x), K=hs.integers(1, 100).map(lambda x: 8 * x),
       f32=hs.booleans(), seed=hs.integers(0, 2**31))
def test_gemm(ker, M, N, K, f32, seed):
    err = bench.check_gemm(ker, M, N, K, torch.float32 if f32 else torch.bfloat16, seed)
    assert err < (bench.TOL_F32 if f32 else bench.TOL_BF16)


@settings(max_examples=12)
@given(B=hs.integers(1, 2), Hkv=hs.integers(1, 3), group=hs.sampled_from([1, 2, 4]), N=hs.integers(1, 700),
       D=hs.sampled_from([64, 128]), causal=hs.booleans(), seed=hs.integers(0, 2**31))
def test_attention(ker, B, Hkv, group, N, D, causal, seed):
    err_o, err_lse = bench.check_attention(ker, B, Hkv * group, Hkv, N, D, causal, seed)
    assert err_o < bench.TOL_BF16 and err_lse < bench.TOL_LSE


def test_bad_input_is_refused_before_launch(ker):
    a = torch.randn(64, 64, device="cuda").bfloat16()
    with pytest.raises(TypeError, match="dtype"):
        ker.gemm(a.float(), a)
    with pytest.raises(ValueError, match="contiguous"):
        ker.gemm(a.t(), a)
    with pytest.raises(ValueError, match="do not chain"):
        ker.gemm(a, a[:32])
    with pytest.raises(RuntimeError, match="multiples of 8"):
        ker.gemm(a[:, :60].contiguous(), a[:60].contiguous()[:, :60].contiguous())
    with pytest.raises(ValueError, match="CUDA tensor"):
        ker.gemm(a.cpu(), a)
    q = torch.randn(1, 2, 128, 96, device="cuda").bfloat16()
    with pytest.raises(RuntimeError, match="head dim"):
        ker.attention(q, q, q)
    q = torch.randn(1, 3, 128, 64, device="cuda").bfloat16()
    with pytest.raises(ValueError, match="do not fit"):
        ker.attention(q, q[:, :2], q[:, :2])


def test_outputs_fully_written(ker):
    # every element of O and LSE written (poisoned NaN before), including ragged tails
    B, H, N, D = 1, 2, 333, 64
    q, k, v = (torch.randn(B, H, N, D, device="cuda").bfloat16() for _ in range(3))
    out, lse = torch.full_like(q, math.nan), torch.full((B, H, N), math.nan, device="cuda")
    ker.attention(q, k, v, True, out, lse)
    assert bool(out.isfinite().all()) and bool(lse.isfinite().all())
