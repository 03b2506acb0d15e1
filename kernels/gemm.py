"""GEMM: C = A @ B (or A @ B^T), bf16/f16 inputs, f32 accumulation, bf16/f16/f32 output; or C += A @ B into an
f32 C (`accumulate`), which also lets the K loop split over several blocks per output tile (`SPLIT`): the
parallelism a skinny GEMM (a decode step's M of 1 to 64) lacks, its partial products added with atomic_add."""
from __future__ import annotations

import numpy as np

import tiles as tl
from tiles.backend import resolve
from tiles.dsl import TileError
from tiles.tune import pow2

# Block tile and worker split per target. workers: warps (sm_80), consumer warpgroups (sm_90a), waves
# (CDNA), simdgroups (apple). stages: how far the pipelined loads run ahead.
CONFIGS = {
    "default": dict(BM=64, BN=64, BK=32),
    "sm_80": dict(BM=128, BN=128, BK=32, stages=3, workers=4),
    "sm_90a": dict(BM=128, BN=256, BK=64, stages=4, workers=2),
    # CDNA: 8 waves, 64x128 of acc each, 2 LDS buffers (gfx950 BK 64: 128 of 160 KB, 64 MFMAs a step; gfx942: 64 KB)
    "gfx942": dict(BM=256, BN=256, BK=32, workers=8, schedule="plain"),
    "gfx950": dict(BM=256, BN=256, BK=64, workers=8, schedule="plain"),
    "apple": dict(BM=64, BN=64, BK=32, stages=2, workers=4),
}


# The search space (tiles tune gemm, docs/tuning.md): tile shapes, pipeline depth and workers per target, and the
# split of K where the output accumulates. Pruned by the toolchain (shared memory, spills) and by `fits` below.
TUNE = {
    "default": dict(BM=[32, 64], BN=[32, 64], BK=[32], SPLIT=[1, 2, 4]),
    "sm_80": dict(BM=[64, 128], BN=[64, 128, 256], BK=[32, 64], stages=[3, 4], workers=[4, 8], SPLIT=[1, 2, 4, 8]),
    "sm_90a": dict(BM=[64, 128], BN=[64, 128, 256], BK=[64], stages=[3, 4, 5], workers=[1, 2], SPLIT=[1, 2, 4, 8]),
    "gfx942": dict(BM=[64, 128, 256], BN=[64, 128, 256], BK=[32, 64], SPLIT=[1, 2, 4, 8]),
    "gfx950": dict(BM=[64, 128, 256], BN=[64, 128, 256], BK=[32, 64], SPLIT=[1, 2, 4, 8]),
    "apple": dict(BM=[32, 64], BN=[32, 64], BK=[16, 32], SPLIT=[1, 2, 4]),
}


def bucket(C, A, B):
    """Launches share a tuned configuration per power of two of M at the same N and K (a model's weights), and
    of the batch."""
    return pow2(A.shape[-2]), C.shape[-1], A.shape[-1], pow2(C.shape[0]) if len(C.shape) == 3 else 1


def fits(cfg, C, A, B):
    """No block taller than twice the rows, beyond 64; a split of K only where C accumulates, each part two
    steps of the loop at least, and only while the output tiles alone are too few to fill a GPU."""
    m, k = A.shape[-2], A.shape[-1]
    tiles = -(-m // cfg["BM"]) * -(-C.shape[-1] // cfg["BN"]) * (C.shape[0] if len(C.shape) == 3 else 1)
    split = cfg.get("SPLIT", 1)
    return (cfg["BM"] <= max(64, 2 * pow2(m))
            and (split == 1 or (cfg["accumulate"] and -(-k // cfg["BK"]) >= 2 * split and tiles < 512)))


@tl.kernel(configs=CONFIGS, tune=TUNE, tune_key=bucket, tune_where=fits)
def gemm(C, A, B, *, BM, BN, BK, trans_b=False, accumulate=False, SPLIT=1):
    if accumulate and C.dtype != tl.f32:
        raise TileError(f"gemm: accumulate adds into C with atomic_add, which needs an f32 C, got {C.dtype}")
    if SPLIT > 1 and not accumulate:
        raise TileError(f"gemm: SPLIT={SPLIT} adds partial products into C: only with accumulate=True")
    if C.rank > 3:
        raise TileError(f"gemm: C of rank {C.rank}; batched GEMM takes (batch, M, N) arrays")
    batched = C.rank == 3   # (batch, M, N): the grid's third dim walks the batch, B shared where it is 2-D
    steps = tl.cdiv(A.cols, BK)
    if batched or SPLIT > 1:   # block (bm, bn, zb): batch zb // SPLIT, the (zb % SPLIT)-th of SPLIT runs of K steps
        bm, bn, zb = tl.grid(tl.cdiv(C.rows, BM), tl.cdiv(C.cols, BN), (C.depth if batched else 1) * SPLIT)
        z = zb % SPLIT if SPLIT > 1 else 0
        d = zb // SPLIT if SPLIT > 1 else zb
        per = tl.cdiv(steps, SPLIT)
        k0 = z * per if SPLIT > 1 else 0
        n = tl.minimum(per, tl.maximum(steps - k0, 0)) if SPLIT > 1 else steps
    else:
        bm, bn = tl.grid(tl.cdiv(C.rows, BM), tl.cdiv(C.cols, BN))
        d, k0, n = None, 0, steps
    on_a = (lambda *ix: (d, *ix)) if batched else (lambda *ix: ix)                          # noqa: E731
    on_b = (lambda *ix: (d, *ix)) if batched and B.rank == 3 else (lambda *ix: ix)          # noqa: E731
    if batched:
        tl.check_eq(A.depth, C.depth)
        if B.rank == 3:
            tl.check_eq(B.depth, C.depth)
    tl.check_eq(A.rows, C.rows)
    tl.check_eq(B.rows if trans_b else B.cols, C.cols)
    tl.check_eq(B.cols if trans_b else B.rows, A.cols)
    a = tl.shared(A.dtype, BM, BK, name="a")
    b = tl.shared(B.dtype, BN, BK, name="b") if trans_b else tl.shared(B.dtype, BK, BN, name="b")
    acc = tl.regs(tl.f32, BM, BN, name="acc")
    tl.zero(acc)
    for k in tl.pipeline(n):
        kk = k if isinstance(k0, int) and k0 == 0 else k0 + k   # the step along all of K
        tl.load(a, A, on_a(bm, kk))
        if trans_b:
            tl.load(b, B, on_b(bn, kk))
            tl.mma_ABt(acc, a, b, acc)
        else:
            tl.load(b, B, on_b(kk, bn))
            tl.mma_AB(acc, a, b, acc)
    if accumulate:
        tl.atomic_add(C, acc, on_a(bm, bn))
    else:
        tl.store(C, acc, on_a(bm, bn))


def matmul(a, b, *, out_dtype=None, trans_b=False, out=None, backend=None, **config):
    """C = a @ b (b given as (N, K) when trans_b) for host arrays, computed on a backend (default: reference);
    a (batch, M, K) with b (batch, K, N) or a shared (K, N): a batched GEMM; given `out` (f32), out += a @ b
    instead (accumulate=True, which may split K: SPLIT=...)."""
    n = b.shape[-2] if trans_b else b.shape[-1]
    shape = a.shape[:-1] + (n,)
    c = np.full(shape, np.nan, dtype=out_dtype or a.dtype) if out is None else out
    resolve(backend or "reference").call(gemm, c, a, b, trans_b=trans_b, accumulate=out is not None, **config)
    return c


def flops(m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k
