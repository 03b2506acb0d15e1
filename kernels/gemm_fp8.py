"""fp8 GEMM: C = (A @ B^T) * scale_a * scale_b, e4m3 inputs with per-tensor scales, f32 accumulation,
bf16 output. K may split over SPLIT blocks a tile, summed in the same launch by the last block of each tile
(tl.store_sum; the plan passes the workspace), as gemm's.

B is given as (N, K), K contiguous (the layout cuBLAS' fp8 GEMM and every fp8 MMA want: both operands
K-major). Only targets with fp8 MMAs run it (sm_90a, gfx942, gfx950); elsewhere the verifier refuses the
fp8 arguments before any launch.
"""
from __future__ import annotations

import numpy as np

import tiles as tl
from tiles import targets
from tiles.dsl import TileError
from tiles.kernels.gemm import PART_STEPS, SMS, fits, split_for, split_workspace
from tiles.tune import pow2

# fp8 halves the bytes per K step, so BK doubles against the bf16 GEMM for the same shared memory. sm_90a: 4 stages,
# the epilogue staged two panels at a time (schedules.store_buffers); on the H100 (12-06 19:40, one run) 4096^3
# 94.6 us against 96.6 at 3 stages with the whole staging tile (cuBLASLt 101.2).
CONFIGS = {
    "default": dict(BM=64, BN=64, BK=64),
    "sm_90a": dict(BM=128, BN=256, BK=128, stages=4, workers=2),
    "gfx942": dict(BM=128, BN=128, BK=64, workers=8, schedule="pingpong"),  # 3 LDS buffers: 48 KB of 64
    "gfx950": dict(BM=256, BN=256, BK=128, workers=4, schedule="interleave"),
}


# The search space (tiles tune gemm_fp8): tile shapes, pipeline depth and workers per target, and a split of K
# while the output tiles are too few to fill the GPU (gemm.fits), bucketed as gemm (a power of two of M at each N
# and K).
TUNE = {
    "default": dict(BM=[32, 64], BN=[32, 64], SPLIT=[1, 2]),
    "sm_90a": dict(BM=[64, 128], BN=[64, 128, 256], stages=[3, 4, 5, 8], workers=[1, 2], SPLIT=[1, 2, 4, 8]),
    "gfx942": dict(BM=[128, 256], BN=[128, 256], BK=[64, 128], workers=[4, 8], schedule=["plain", "pingpong"],
                   SPLIT=[1, 2, 4]),
    "gfx950": dict(BM=[128, 256], BN=[128, 256], BK=[64, 128], workers=[4, 8], schedule=["plain", "interleave"],
                   SPLIT=[1, 2, 4]),
}


def skinny(target, C, A, B, *scalars, **keywords):
    """sm_90a, up to 128 rows: tiles of 64 rows (128 past 64), one consumer warpgroup a 64-row tile, where the
    configured 128x256 tiles make 16 blocks at N = 4096: up to 64 rows 64x64 at 8 stages where those make no more
    blocks than SMs, else 128 columns at 4 stages. K split while the blocks stay within the SMs and each part keeps
    gemm.PART_STEPS steps of 128. Timed on the H100 (12-06) against cuBLASLt (torch._scaled_mm), 64x64 at 8 stages
    against 64x128 at 4: 1x4096x4096 12.8 us against 15.2 (cuBLASLt 11.4), 64x4096x4096 12.6 against 15.7 (12.1),
    16x4096x14336 split 2 30.0 against 33.5 (27.9). A tuned entry or the caller's own values replace it."""
    m, n = A.shape[-2], C.shape[-1]
    if target != "sm_90a" or m > 128:
        return {}
    bm = 64 if m <= 64 else 128
    bn, stages = (64, 8) if m <= 64 and -(-n // 64) <= SMS else (128, 4)
    tiles = -(-m // bm) * -(-n // bn)
    return dict(BM=bm, BN=bn, BK=128, stages=stages, workers=bm // 64,
                SPLIT=split_for(tiles, -(-A.shape[-1] // 128), SMS, least=PART_STEPS))


def split_plan(cfg, C, A, B, scale_a, scale_b, P=None, L=None, *, target=None):
    """K split SPLIT ways: one launch with the parts' workspace and the tiles' counters (gemm.split_workspace)."""
    if cfg["SPLIT"] == 1 or P is not None:
        return None
    return [(gemm_fp8, [C, A, B, scale_a, scale_b, *split_workspace(C, cfg["SPLIT"], cfg["BM"], cfg["BN"])], {})]


@tl.kernel(configs=CONFIGS, tune=TUNE, tune_key=lambda C, A, *rest: (pow2(A.shape[0]), C.shape[1], A.shape[1]),
           tune_where=lambda cfg, C, A, B, *rest: fits(cfg, C, A, B), plan=split_plan, heuristic=skinny)
def gemm_fp8(C, A, B, scale_a, scale_b, P=None, L=None, *, BM, BN, BK, SPLIT=1):
    if (P is None) != (SPLIT == 1) or (P is None) != (L is None):
        raise TileError(f"gemm_fp8: SPLIT={SPLIT} with{'out' if P is None else ''} the parts' workspace: a split "
                        "of K takes P and L (split_plan passes them), and only a split does: launch gemm_fp8 itself, "
                        "not its trace")
    steps = tl.cdiv(A.cols, BK)
    if SPLIT > 1:   # block (bm, bn, z): the z-th run of K steps
        bm, bn, z = tl.grid(tl.cdiv(C.rows, BM), tl.cdiv(C.cols, BN), SPLIT)
        per = tl.cdiv(steps, SPLIT)
        k0, n = z * per, tl.minimum(per, tl.maximum(steps - z * per, 0))
    else:
        bm, bn = tl.grid(tl.cdiv(C.rows, BM), tl.cdiv(C.cols, BN))
        k0, n = 0, steps
    tl.check_eq(A.rows, C.rows)
    tl.check_eq(B.rows, C.cols)
    tl.check_eq(B.cols, A.cols)
    a = tl.shared(A.dtype, BM, BK, name="a")
    b = tl.shared(B.dtype, BN, BK, name="b")
    acc = tl.regs(tl.f32, BM, BN, name="acc")
    tl.zero(acc)
    for k in tl.pipeline(n):
        tl.load(a, A, (bm, k if SPLIT == 1 else k0 + k))
        tl.load(b, B, (bn, k if SPLIT == 1 else k0 + k))
        tl.mma_ABt(acc, a, b, acc)
    tl.mul(acc, acc, scale_a * scale_b)  # once per output (per part), not per step: the scales are per tensor
    if SPLIT == 1:
        tl.store(C, acc, (bm, bn))
    else:
        tl.store_sum(C, acc, (bm, bn), parts=P, part=z, count=SPLIT, arrivals=L)


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
