"""Attention forward (FlashAttention-style online softmax): MHA and GQA, causal or not, head dims HEAD_DIMS.

O = softmax(Q K^T * scale) V per (batch, head), and the log-sum-exp of each row for the backward pass.
Q, O: (B, H, N, D); K, V: (B, H_kv, N_kv, D) with H a multiple of H_kv; LSE: (B, H, N) float32.
"""
from __future__ import annotations

import math

import numpy as np

import tiles as tl
from tiles.backend import resolve

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453

# The head dims the configurations are set for and tested at (tiles.torch and `tiles compare` take these): 64 and
# 128 tuned on the H100 and H200 (docs/benchmarks.md); 32, 96 and 256 set from the offline resource reports
# (`tiles inspect attention --shape 2x4x1024x256,causal`: no spills, within every target's shared memory), then
# timed once (H100, 12-07: 1.16x, 1.10x and 0.96x cuDNN at 8x16x4096x32 / x96, 4x16x4096x256). The kernel itself
# takes any head dim its target's verifier accepts (tests/test_granularity.py).
HEAD_DIMS = (32, 64, 96, 128, 256)

# Past head dim 128 (256): smaller blocks where the targets' shared memory or registers run out at the default ones.
# sm_90a's K and V stages at BN 128 and sm_80's at BN 64 pass the shared memory (395 and 198 KB; at BN 64 / 32:
# 227 and 129 KB); gfx950's 32 rows of O a wave (32 x 256 f32) spill 177 registers, 16 rows a wave on the 16x16
# MFMA none; apple's query block of 32 rows passes its 32 KB of threadgroup memory (33 KB; 16 x 16 blocks: 24.5 KB)
WIDE_HEAD = {
    "sm_90a": dict(BN=64),
    "sm_80": dict(BN=32),
    "gfx950": dict(BM=128, mfma=16),
    "apple": dict(BM=16, BN=16),
}

# workers own rows of the query block: consumer warpgroups (sm_90a), warps (sm_80), waves, simdgroups.
CONFIGS = {
    "default": dict(BM=64, BN=64),
    "sm_80": dict(BM=128, BN=64, stages=2, workers=8),
    # persistent: a grid of one block an SM walks the (batch, head, query block) tiles, its producer loading the
    # next tile's Q under this one's loop; it beat the one-tile-a-block grid on every row of issue 20's table
    # (H200, 12-04: by 0.4% at 2x32/8x16384x128 causal to 24% at 8x16x2048x128 causal; docs/benchmarks.md).
    # Its static walk takes the causal query blocks in order (longest_first=False: H100, 12-06, 1.5-2.1% faster
    # at 8192 and 16384 keys and at D 64, even at 2048).
    "sm_90a": dict(BM=128, BN=128, stages=2, workers=2, persistent=True, longest_first=False),
    "gfx942": dict(BM=128, BN=64, workers=8, schedule="pingpong"),
    "gfx950": dict(BM=256, BN=64, workers=8, schedule="pingpong", mfma=32),  # 32 rows a wave, HipKittens' shape
    "apple": dict(BM=32, BN=32, stages=2, workers=4),
}


# Search spaces (tiles tune attention, docs/tuning.md): the query and key block, pipeline depth, workers.
TUNE = {
    "default": dict(BM=[32, 64], BN=[32, 64]),
    "sm_80": dict(BM=[64, 128], BN=[32, 64, 128], stages=[2, 3], workers=[4, 8]),
    "sm_90a": dict(BM=[64, 128, 192], BN=[64, 128, 176], stages=[2, 3], workers=[1, 2, 3], blocks_per_sm=[1, 2],
               exp2_poly=[0, 8, 16], persistent=[False, True], longest_first=[False, True]),
    "gfx942": dict(BM=[64, 128, 256], BN=[32, 64, 128], schedule=["pingpong", "interleave"], workers=[4, 8]),
    "gfx950": dict(BM=[64, 128, 256], BN=[32, 64, 128], schedule=["pingpong", "interleave"], workers=[4, 8]),
    "apple": dict(BM=[16, 32, 64], BN=[16, 32, 64]),
}


def per_head_dim(target, O, LSE, Q, K, V, scale, *, D=None, causal=False, **keywords):
    """sm_90a at head dim 64, where the exponentials rather than the matmuls bound a step: 1 in 8 of them as a
    polynomial on the FMA pipe (H200, 12-04, persistent grid: 16x16x4096x64 2.551 -> 2.480 ms, causal 1.390 ->
    1.352; 1 in 4 gained less), and from 2048 queries FlashAttention-3's 192-row query block over three consumer
    warpgroups, more rows to each key block's loads and barriers (12-04 14:25: 2.472 -> 2.299 ms, causal
    1.354 -> 1.323; BN=192 spills). On that block a causal kernel's split is 1 in 16: its diagonal blocks' masks
    already load the FMA and ALU pipes (H100, 12-06, two runs: causal 1.320 -> 1.287 and 1.326 -> 1.306 ms,
    unmasked 2.218 -> 2.245 and 2.215 -> 2.244, so 1 in 8 stays there). Past head dim 128: WIDE_HEAD."""
    if D is not None and D > 128:
        return WIDE_HEAD.get(target, {})
    if target != "sm_90a" or D != 64:
        return {}
    if Q.shape[2] < 2048:
        return dict(exp2_poly=8)
    return dict(exp2_poly=16 if causal else 8, BM=192, workers=3)


def bucket(O, LSE, Q, K, V, scale):
    """Sequence lengths in powers of two (512 ... 32768), heads x batch in powers of two, the head dim exactly."""
    b, h, n, d = Q.shape
    return tl.tune.pow2(n), tl.tune.pow2(K.shape[2]), tl.tune.pow2(b * h), d


@tl.kernel(configs=CONFIGS, tune=TUNE, tune_key=bucket, heuristic=per_head_dim,
           tune_where=lambda cfg, O, LSE, Q, *rest: cfg["BM"] <= max(64, 2 * tl.tune.pow2(Q.shape[2])))
def attention_fwd(O, LSE, Q, K, V, scale, *, D, BM, BN, causal=False, longest_first=True):
    bm, h, b = tl.grid(tl.cdiv(Q.rows, BM), Q.depth, Q.batch)
    if causal and longest_first:
        # the longest query blocks (most key blocks under the diagonal) start first: a shorter tail where the
        # hardware hands out blocks. A persistent grid's static walk balances either way or not, by the
        # alignment of a head's blocks with the SMs (scripts/tail_model.py: in order 0.997 of the ideal at
        # 4x32x8192 causal on 132 SMs, longest first 0.971; the same at 2048 and at D 64). Timed on the H100
        # (12-06), in order was faster on every causal row: 4x32x8192x128 3.675 -> 3.615 ms, 2x32/8x16384x128
        # 7.071 -> 6.923, 16x16x4096x64 1.342 -> 1.318, 8x16x2048x128 254.0 -> 253.5 us
        bm = tl.cdiv(Q.rows, BM) - 1 - bm
    tl.check_eq(Q.cols, D)
    tl.check_eq(K.cols, D)
    tl.check_eq(V.cols, D)
    tl.check_eq(K.rows, V.rows)
    tl.check_eq(K.depth, V.depth)
    tl.check_eq(Q.depth % K.depth, 0)
    if causal:
        tl.check_eq(K.rows, Q.rows)
    hk = h // (Q.depth // K.depth)  # GQA: this query head reads kv head hk

    q = tl.shared(Q.dtype, BM, D, name="q")
    k = tl.shared(K.dtype, BN, D, name="k")
    v = tl.shared(V.dtype, BN, D, name="v")
    s = tl.regs(tl.f32, BM, BN, name="s")
    p = tl.regs(Q.dtype, BM, BN, name="p")
    o = tl.regs(tl.f32, BM, D, name="o")
    m = tl.rvec(tl.f32, BM, name="m")          # running row max (log2 domain)
    m_new = tl.rvec(tl.f32, BM, name="m_new")
    corr = tl.rvec(tl.f32, BM, name="corr")    # rescale of what was summed so far
    l = tl.rvec(tl.f32, BM, name="l")          # running row sum  # noqa: E741

    tl.load(q, Q, (b, h, bm, 0))
    tl.fill(m, -math.inf)
    tl.zero(l)
    tl.zero(o)
    n_kv = tl.cdiv(K.rows, BN)
    if causal:  # blocks entirely above the diagonal contribute nothing
        n_kv = tl.minimum(n_kv, tl.cdiv((bm + 1) * BM, BN))
    for j in tl.pipeline(n_kv, name="j"):
        tl.load(k, K, (b, hk, j, 0))
        tl.load(v, V, (b, hk, j, 0))
        tl.zero(s)
        tl.mma_ABt(s, q, k, s)
        tl.mul(s, s, scale * LOG2E)
        tl.bounds_mask(s, s, BM, K.rows - j * BN, -math.inf)
        if causal:
            tl.causal_mask(s, s, bm * BM, j * BN, -math.inf)
        tl.row_max(m_new, s, m)
        tl.sub(corr, m, m_new)
        tl.exp2(corr, corr)
        tl.sub_row(s, s, m_new)
        tl.exp2(s, s)
        tl.mul(l, l, corr)
        tl.row_sum(l, s, l)
        tl.mul_row(o, o, corr)
        tl.copy(p, s)
        tl.mma_AB(o, p, v, o)
        tl.copy(m, m_new)
    tl.div_row(o, o, l)
    tl.store(O, o, (b, h, bm, 0))
    tl.log2(l, l)
    tl.add(l, l, m)
    tl.mul(l, l, LN2)
    tl.store(LSE, l, (b, h, bm))
    # A positive scale commutes with the row max, so a backend may fold it into the exponent (tiles/rewrites.py).
    # Tested before the launch like every check; written last, where it moves no op's line (sources cite them).
    tl.check_gt(scale, 0)


def attention(q, k, v, *, causal=False, scale=None, backend=None, **config):
    """(O, LSE) for host arrays q (B, H, N, D), k and v (B, H_kv, N_kv, D), computed on a backend."""
    bsz, heads, n, d = q.shape
    o = np.full(q.shape, np.nan, dtype=q.dtype)
    lse = np.full((bsz, heads, n), np.nan, dtype=np.float32)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    resolve(backend or "reference").call(attention_fwd, o, lse, q, k, v, float(scale), D=d, causal=causal, **config)
    return o, lse


def scores(q, k, *, causal: bool, scale: float, rows=None) -> np.ndarray:
    """float64 q k^T * scale, kv heads repeated for GQA, -inf above the diagonal when causal.
    rows: the query rows q holds (default all), so that a sample of rows masks as the whole would."""
    group = q.shape[1] // k.shape[1]
    kf = np.repeat(np.asarray(k, np.float64), group, axis=1)
    s = np.asarray(q, np.float64) @ kf.transpose(0, 1, 3, 2) * scale
    if causal:
        rows = np.arange(q.shape[2]) if rows is None else np.asarray(rows)
        s = np.where(np.arange(k.shape[2])[None, :] <= rows[:, None], s, -np.inf)
    return s


def reference(q, k, v, *, causal: bool = False, scale: float | None = None, rows=None):
    """float64 (O, LSE): softmax(q k^T * scale) v and the natural-log log-sum-exp of each row."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = scores(q, k, causal=causal, scale=scale, rows=rows)
    mx = s.max(-1, keepdims=True)
    p = np.exp(s - mx)
    total = p.sum(-1, keepdims=True)
    vf = np.repeat(np.asarray(v, np.float64), q.shape[1] // v.shape[1], axis=1)
    return (p / total) @ vf, (np.log(total) + mx)[..., 0]


def flops(b: int, h: int, n: int, d: int, causal: bool, n_kv: int | None = None) -> float:
    f = 4.0 * b * h * n * (n_kv or n) * d
    return f / 2 if causal else f
