"""GEMM: C = A @ B (or A @ B^T), bf16/f16 inputs, f32 accumulation, bf16/f16/f32 output."""
from __future__ import annotations

import numpy as np

import tiles as tl
from tiles.backend import resolve

# Block tile and worker split per target. workers: warps (sm_80), consumer warpgroups (sm_90a), waves
# (CDNA: 8 = ping-pong), simdgroups (apple). stages: how far the pipelined loads run ahead.
CONFIGS = {
    "default": dict(BM=64, BN=64, BK=32),
    "sm_80": dict(BM=128, BN=128, BK=32, stages=3, workers=4),
    "sm_90a": dict(BM=128, BN=256, BK=64, stages=4, workers=2),
    # gfx950 ping-pong: 3 LDS buffers of A and B, 96 KB of 160 KB; gfx942: 256x256 in 2 buffers (64 KB), plain
    "gfx942": dict(BM=256, BN=256, BK=32, workers=8, schedule="pingpong"),
    "gfx950": dict(BM=256, BN=256, BK=32, workers=8, schedule="pingpong"),
    "apple": dict(BM=64, BN=64, BK=32, stages=2, workers=4),
}


@tl.kernel(configs=CONFIGS)
def gemm(C, A, B, *, BM, BN, BK, trans_b=False):
    bm, bn = tl.grid(tl.cdiv(C.rows, BM), tl.cdiv(C.cols, BN))
    tl.check_eq(A.rows, C.rows)
    tl.check_eq(B.rows if trans_b else B.cols, C.cols)
    tl.check_eq(B.cols if trans_b else B.rows, A.cols)
    a = tl.shared(A.dtype, BM, BK, name="a")
    b = tl.shared(B.dtype, BN, BK, name="b") if trans_b else tl.shared(B.dtype, BK, BN, name="b")
    acc = tl.regs(tl.f32, BM, BN, name="acc")
    tl.zero(acc)
    for k in tl.pipeline(tl.cdiv(A.cols, BK)):
        tl.load(a, A, (bm, k))
        if trans_b:
            tl.load(b, B, (bn, k))
            tl.mma_ABt(acc, a, b, acc)
        else:
            tl.load(b, B, (k, bn))
            tl.mma_AB(acc, a, b, acc)
    tl.store(C, acc, (bm, bn))


def matmul(a, b, *, out_dtype=None, trans_b=False, backend=None, **config):
    """C = a @ b (b given as (N, K) when trans_b) for host arrays, computed on a backend (default: reference)."""
    m = a.shape[0]
    n = b.shape[0] if trans_b else b.shape[1]
    c = np.full((m, n), np.nan, dtype=out_dtype or a.dtype)
    resolve(backend or "reference").call(gemm, c, a, b, trans_b=trans_b, **config)
    return c


def flops(m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k
