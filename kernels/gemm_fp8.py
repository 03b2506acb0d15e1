"""fp8 GEMM: C = (A @ B^T) * scale_a * scale_b, e4m3 inputs with per-tensor scales, f32 accumulation,
bf16 output.

B is given as (N, K), K contiguous (the layout cuBLAS' fp8 GEMM and every fp8 MMA want: both operands
K-major). Only targets with fp8 MMAs run it (sm_90a, gfx942, gfx950); elsewhere the verifier refuses the
fp8 arguments before any launch.
"""
from __future__ import annotations

import numpy as np

import tiles as tl
from tiles.tune import pow2
from tiles import targets

# fp8 halves the bytes per K step, so BK doubles against the bf16 GEMM for the same shared memory.
CONFIGS = {
    "default": dict(BM=64, BN=64, BK=64),
    "sm_90a": dict(BM=128, BN=256, BK=128, stages=4, workers=2),
    "gfx942": dict(BM=128, BN=128, BK=64, workers=8, schedule="pingpong"),  # 3 LDS buffers: 48 KB of 64
    "gfx950": dict(BM=256, BN=256, BK=128, workers=4, schedule="interleave"),
}


# The search space (tiles tune gemm_fp8): tile shapes, pipeline depth and workers per target, bucketed as gemm
# (a power of two of M at each N and K).
TUNE = {
    "default": dict(BM=[32, 64], BN=[32, 64]),
    "sm_90a": dict(BM=[64, 128], BN=[64, 128, 256], stages=[3, 4, 5], workers=[1, 2]),
    "gfx942": dict(BM=[128, 256], BN=[128, 256], BK=[64, 128], workers=[4, 8], schedule=["plain", "pingpong"]),
    "gfx950": dict(BM=[128, 256], BN=[128, 256], BK=[64, 128], workers=[4, 8], schedule=["plain", "interleave"]),
}


@tl.kernel(configs=CONFIGS, tune=TUNE, tune_key=lambda C, A, *rest: (pow2(A.shape[0]), C.shape[1], A.shape[1]),
           tune_where=lambda cfg, C, A, *rest: cfg["BM"] <= max(64, 2 * pow2(A.shape[0])))
def gemm_fp8(C, A, B, scale_a, scale_b, *, BM, BN, BK):
    bm, bn = tl.grid(tl.cdiv(C.rows, BM), tl.cdiv(C.cols, BN))
    tl.check_eq(A.rows, C.rows)
    tl.check_eq(B.rows, C.cols)
    tl.check_eq(B.cols, A.cols)
    a = tl.shared(A.dtype, BM, BK, name="a")
    b = tl.shared(B.dtype, BN, BK, name="b")
    acc = tl.regs(tl.f32, BM, BN, name="acc")
    tl.zero(acc)
    for k in tl.pipeline(tl.cdiv(A.cols, BK)):
        tl.load(a, A, (bm, k))
        tl.load(b, B, (bn, k))
        tl.mma_ABt(acc, a, b, acc)
    tl.mul(acc, acc, scale_a * scale_b)  # once per output, after the sum: the scales are per tensor
    tl.store(C, acc, (bm, bn))


def supports_fp8(target: str | None) -> bool:
    """Whether a target has e4m3 (None is the reference interpreter, which has every dtype)."""
    return target is None or "fp8e4m3" in targets.target(target).dtypes


def matmul_fp8(a, b, scale_a: float, scale_b: float, *, backend=None, **config):
    """bf16 (a @ b.T) * scale_a * scale_b for e4m3 a (M, K) and b (N, K)."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"expected a (M, K) and b (N, K), got {a.shape} and {b.shape}")
    c = np.full((a.shape[0], b.shape[0]), np.nan, dtype=tl.bf16.np)
    gemm_fp8(c, a, b, float(scale_a), float(scale_b), backend=backend, **config)
    return c


def flops(m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k
