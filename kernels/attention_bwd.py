"""Attention backward (FlashAttention-2 scheme): dQ, dK, dV from the forward's O and log-sum-exp.

MHA and GQA, causal or not, head dims HEAD_DIMS. Three launches:
  1. attention_bwd_pre: per query row Delta = rowsum(dO * O) * scale and LSE2 = LSE * log2(e), the forms the
     step uses, and the f32 dQ accumulator zeroed;
  2. attention_bwd: a block owns BN rows of K and V of one kv head and walks every query block of every
     query head of its group, working transposed so that its kv rows are the tiles' rows:
         S^T = K Q^T,  P^T = exp2(S^T * scale * log2(e) - LSE2),  dV += P^T dO,
         dP^T = V dO^T,  dS^T = P^T * (dP^T * scale - Delta),  dK += dS^T Q,
         dQ += (dS^T)^T K   (added atomically into the f32 accumulator: other kv blocks add to it too);
     dK and dV sum over the group's query heads in registers and are stored once, without atomics;
     causal: the walk starts at the diagonal and masks only the query blocks that cross it, and the blocks start
     longest walk first within groups of heads (tl.grid(group=...)); past head dim 128 a block computes DC of
     dK, dV and dQ's columns, its neighbours along the grid the others (WIDE_HEAD);
  3. attention_bwd_dq: the f32 accumulator converted to dQ in q's dtype (through shared memory where `staged`).
Q, O, dO: (B, H, N, D); K, V: (B, H_kv, N_kv, D); LSE (natural log, as kernels/attention.py returns it),
LSE2 and Delta: (B, H, N) float32. The step reads LSE2 and Delta as they are, never rescaled (FlashAttention-3's
preprocessing): a backend may then leave them in shared memory and read them where used (`shared_vectors`).
"""
from __future__ import annotations

import math

import numpy as np

import tiles as tl

LOG2E = 1.4426950408889634
# The head dims the configurations are set for and tested at (tiles.torch takes these): 64 and 128 tuned, 32 and 96
# set from the offline resource reports (per_head_dim) and timed once (H100, 12-07: 0.86x and 0.62x cuDNN); 256 in
# chunks of dK, dV and dQ's columns (WIDE_HEAD), from the resource reports alone, never timed
HEAD_DIMS = (32, 64, 96, 128, 256)
WAVE = 128   # about the blocks one wave of a large GPU runs (132 SMs of an H100 or H200, one block each)

# BN kv rows per block (split over the workers), BM query rows per step of the loop.
# Shared memory at D=128: K (and V, from head dim v_shared_from on) BN x D, Q and dO BM x D per stage, dS^T
# BN x BM. Where two stages do not fit (gfx942's 64 KB, apple's 32 KB) the backends lower them. BM and BN: whole
# MMA row fragments per worker. Measured offline (resource reports): no spills at D=64 and 128, causal or not, on
# sm_80, sm_90a, gfx942 and gfx950 (the f32 accumulators take 3 x D floats per row; sm_80 and gfx942's figures in
# docs/backends/cuda.md and hip.md).
CONFIGS = {
    "default": dict(BM=64, BN=64),
    "sm_80": dict(BM=32, BN=64, v_shared_from=0, stages=2, workers=4),   # BM 32: registers (docs/backends/cuda.md)
    # FlashAttention-3's backward at D=128: 128 kv rows over 2 consumer warpgroups, 64 query rows a step; dQ's 64
    # rows split by columns over the two (backends/cuda: rt_cols); dV issued before dS^T at D=128 (dv_early,
    # per_head_dim below). V in registers at D=64: its shared reads compete with the wgmma's operands for
    # the busiest unit (H200, 2026-11-30: 0.82x -> 0.86x cuDNN); at D=128 they spill (0.73x). LSE2 and Delta
    # read from their ring stage where used (shared_vectors; H100, 12-06: D64 7.29 -> 6.58 ms, D128 20.82 -> 20.40)
    # The causal grid's longest kv walks first in groups of heads (longest_first, below; H100 12-06: 8x16x2048 -2.1%,
    # 4x32x8192 -1.2%); the other targets keep head order, where it is not timed (on gfx950 its block indices
    # cost the causal loop 0.1 instructions per MFMA: the static count, 9.39 -> 9.49)
    "sm_90a": dict(BM=64, BN=128, v_shared_from=128, stages=2, workers=2, shared_vectors=True, longest_first=True),
    "gfx942": dict(BM=64, BN=64, workers=4, schedule="interleave"),
    # gfx950: 128 kv rows a block, 32 a wave (HipKittens' backward: 256, 64 a wave, dK in AGPRs): each step's Q, dO
    # and LSE loads, its softmax row work and its dQ atomics over twice the MFMAs. Chosen statically, not timed
    # (2026-12-07, 16x64/8x2048x128; docs/backends/hip.md "Attention backward against HipKittens'"): per MFMA 5.36 ->
    # 4.46 instructions (HipKittens 4.23 per 16x16x32-equivalent), waits 0.17 -> 0.09, the loop's bound 21.4 -> 17.8
    # clocks; the static model 9249 -> 4641 us (its Q and dO re-read by half as many kv blocks)
    "gfx950": dict(BM=64, BN=128, v_shared_from=0, workers=4, schedule="interleave"),
    "apple": dict(BM=32, BN=32, workers=4),
}
# the two row-wise kernels around it: BM query rows per block
ROW_CONFIGS = {
    "default": dict(BM=64),
    "sm_80": dict(BM=64, workers=4, max_registers=168),   # 3 blocks an SM: unbounded, ptxas spilled pre (D 64)
    "sm_90a": dict(BM=64, workers=4),
    "gfx942": dict(BM=64, workers=4),
    "gfx950": dict(BM=64, workers=4),
    "apple": dict(BM=32, workers=4),
}
# dQ's conversion staged through shared memory on sm_90a: one bulk copy of the f32 tile in, whole lines of dQ out,
# where the register tile's 8-byte fragments drew ~2.0 TB/s (H100, 12-06, bwd_parts.py: 8x16x2048x128 100.9 ->
# 71.6 us, 4x32x8192x128 374.0 -> 268.4, at copy speed); the pre kernel stays unstaged (its staged form: +1-3%)
DQ_CONFIGS = {**ROW_CONFIGS, "sm_90a": {**ROW_CONFIGS["sm_90a"], "staged": True}}


@tl.kernel(configs=ROW_CONFIGS)
def attention_bwd_pre(Delta, LSE2, DQacc, O, dO, LSE, scale, *, D, BM, staged=False):
    bm, h, b = tl.grid(tl.cdiv(O.rows, BM), O.depth, O.batch)
    tl.check_eq(O.cols, D)
    tl.check_eq(dO.cols, D)
    tl.check_eq(dO.rows, O.rows)
    tl.check_eq(Delta.cols, O.rows)
    tl.check_eq(LSE.cols, O.rows)
    tl.check_eq(LSE2.cols, O.rows)
    o = tl.regs(tl.f32, BM, D, name="o")
    do = tl.regs(tl.f32, BM, D, name="dout")
    delta = tl.rvec(tl.f32, BM, name="delta")
    lse = tl.rvec(tl.f32, BM, name="lse")
    o_via, do_via, zero_via = ((tl.shared(O.dtype, BM, D), tl.shared(dO.dtype, BM, D), tl.shared(tl.f32, BM, D))
                               if staged else (None,) * 3)
    tl.load(o, O, (b, h, bm, 0), via=o_via)
    tl.load(do, dO, (b, h, bm, 0), via=do_via)
    tl.mul(o, o, do)
    tl.row_sum(delta, o)
    tl.mul(delta, delta, scale)
    tl.store(Delta, delta, (b, h, bm))
    tl.load(lse, LSE, (b, h, bm))
    tl.mul(lse, lse, LOG2E)
    tl.store(LSE2, lse, (b, h, bm))
    tl.zero(o)
    tl.store(DQacc, o, (b, h, bm, 0), via=zero_via)


# The search space (tiles tune attention_bwd): kv rows, query rows, V's home, depth, workers, dV's place; bucketed
TUNE = {  # as attention_fwd (sequence lengths and batch x heads in powers of two, the head dim exactly)
    "default": dict(BM=[32, 64], BN=[32, 64]),
    "sm_80": dict(BM=[32, 64], BN=[64, 128], stages=[1, 2], workers=[4, 8]),
    "sm_90a": dict(BM=[64, 128], BN=[64, 128, 192], v_shared_from=[0, 128], stages=[1, 2], workers=[1, 2, 3],
                   dv_early=[False, True], shared_vectors=[False, True], longest_first=[False, True]),
    "gfx942": dict(BM=[32, 64], BN=[64, 128], workers=[4], schedule=["plain", "interleave"]),
    "gfx950": dict(BM=[32, 64], BN=[64, 128], v_shared_from=[0, 128], workers=[4], schedule=["plain", "interleave"]),
    "apple": dict(BM=[16, 32], BN=[16, 32]),
}


def bucket(dK, dV, DQacc, Q, K, *rest):
    b, h, n, d = Q.shape
    return tl.tune.pow2(n), tl.tune.pow2(K.shape[2]), tl.tune.pow2(b * h), d


# Past head dim 128: dK, dV and dQ in chunks of DC = 64 columns a block (their f32 accumulators' registers), the
# shared tiles fitted to each target's memory. From `tiles inspect attention_bwd --shape 2x4x1024x256 --targets T`
# (2026-12-08; no spills anywhere): sm_90a 255 registers and 165 KB on one consumer warpgroup (two stages need
# 245 KB; DC 128 spills), sm_80 186 registers and 157 KB, gfx942 v254 and 46 KB (its 64 KB of LDS: 32-row blocks
# on two waves), gfx950 v256 a167 and 112 KB, apple 31 of its 32 KB. Not timed.
WIDE_HEAD = {
    "sm_90a": dict(DC=64, BN=64, stages=1, workers=1, v_shared_from=0),
    "sm_80": dict(DC=64),
    "gfx942": dict(DC=64, BN=32, BM=32, workers=2, schedule="plain"),
    "gfx950": dict(DC=64),
    "apple": dict(DC=64, BN=16, BM=16, workers=2),
}


def per_head_dim(target, dK, dV, DQacc, Q, K, *rest, D=None, causal=False, **keywords):
    """sm_90a at head dim 128: dV issued as soon as P^T is there, as FlashAttention-3 orders it, so that its
    wgmma run through dS^T's arithmetic and handoff (H200, 12-04: 4x32x8192x128 22.19 -> 21.74 ms); not at 64,
    where it lost (16x16x4096x64 7.30 -> 7.77 ms; docs/backends/cuda.md). sm_80 at head dim 128, causal: 16 query
    rows a step, where 32 sit at 255 registers and ptxas spills 52 bytes (12-06; not timed, no A100 here). sm_90a at
    head dims 32 and 96 (shared tiles of 64-byte swizzle panels): 64 kv rows a block, V in shared memory, every
    product on wgmma with no spills, where 128 rows left S^T and dP^T on mma.sync and spilled 2.1-4.4 KB at D 96
    (12-07, `tiles inspect attention_bwd --shape 2x4x1024x96,causal`). Timed once, H100 12-07: 0.86x cuDNN at
    8x16x4096x32, 0.62x at x96 (one consumer warpgroup; docs/benchmarks.md). Past head dim 128: WIDE_HEAD."""
    if D is not None and D > 128:
        return WIDE_HEAD.get(target, {})
    if target == "sm_90a" and D == 128:
        return dict(dv_early=True)
    if target == "sm_90a" and D is not None and D % 64:
        return dict(BN=64, v_shared_from=0)
    return dict(BM=16) if target == "sm_80" and D == 128 and causal else {}


@tl.kernel(configs=CONFIGS, tune=TUNE, tune_key=bucket, heuristic=per_head_dim,
           tune_where=lambda cfg, dK, dV, DQacc, Q, K, *rest: cfg["BN"] <= max(64, 2 * tl.tune.pow2(K.shape[2])))
def attention_bwd(dK, dV, DQacc, Q, K, V, dO, LSE2, Delta, scale, *, D, BM, BN, DC=None, v_shared_from=None,
                  dv_early=False, causal=False, longest_first=False):
    # DC: the columns of dK, dV and dQ a block computes (default all D). Below D, each kv block is D / DC blocks
    # side by side along grid axis 0, each recomputing S^T and dP^T over the whole head dim and accumulating its
    # own columns: the f32 accumulators take BN x DC, not BN x D (head dim 256), for 1.4 times the products at 128
    # columns and 2.2 times at 64
    DC = DC or D
    if D % DC:
        raise tl.TileError(f"attention_bwd: DC={DC} must divide the head dim D={D}")
    chunks = D // DC
    n_kv = tl.cdiv(K.rows, BN)
    if causal and longest_first:
        # kv block bn walks the query blocks from its diagonal on: the first walk longest. Started column by
        # column in groups of heads, about a wave of blocks a group, the longest of a group start first and the
        # last wave is left short walks (list scheduling, longest first), while the blocks in flight share a few
        # heads' Q, dO and dQ in L2 as in head order (H100, 12-06: 8x16x2048 causal -2.1%, 4x32x8192 -1.2%).
        # All kv blocks in order across every head was 1.7-2x slower: Q, dO and dQ's f32 sums out of L2.
        hk, bn, b = tl.grid(K.depth, n_kv * chunks, K.batch, group=tl.maximum(1, WAVE // (n_kv * chunks)))
    else:
        bn, hk, b = tl.grid(n_kv * chunks, K.depth, K.batch)
    bn, c = (bn // chunks, bn % chunks) if chunks > 1 else (bn, 0)   # a kv block's chunks side by side
    for a in (Q, K, V, dO, DQacc, dK, dV):
        tl.check_eq(a.cols, D)
    tl.check_eq(K.rows, V.rows)
    tl.check_eq(K.depth, V.depth)
    tl.check_eq(Q.depth % K.depth, 0)
    tl.check_eq(LSE2.rows, Q.depth)
    tl.check_eq(LSE2.cols, Q.rows)
    tl.check_eq(Delta.cols, Q.rows)
    if causal:
        tl.check_eq(K.rows, Q.rows)
    group = Q.depth // K.depth

    k = tl.shared(K.dtype, BN, D, name="k")          # A of S^T, and B of dQ: in shared
    # V is only ever the A operand: in registers where shared memory is short (gfx942, apple), in shared from
    # head dim v_shared_from on where registers are (NVIDIA, gfx950)
    v_shared = v_shared_from is not None and D >= v_shared_from
    v = (tl.shared if v_shared else tl.regs)(V.dtype, BN, D, name="v")
    q = tl.shared(Q.dtype, BM, D, name="q")
    do = tl.shared(dO.dtype, BM, D, name="dout")
    ds_s = tl.shared(Q.dtype, BN, BM, name="ds_s")   # dS^T again, for dQ's transposed mma
    # the B operands of dV, dK and dQ: the block's DC columns of dO, Q and K (the whole tiles where DC = D)
    k_c, q_c, do_c = ((tl.shared(K.dtype, BN, DC, name="k_c"), tl.shared(Q.dtype, BM, DC, name="q_c"),
                       tl.shared(dO.dtype, BM, DC, name="dout_c")) if chunks > 1 else (k, q, do))
    s = tl.regs(tl.f32, BN, BM, name="s")            # S^T, then P^T
    p = tl.regs(Q.dtype, BN, BM, name="p")
    dp = tl.regs(tl.f32, BN, BM, name="dp")          # dP^T, then dS^T
    ds = tl.regs(Q.dtype, BN, BM, name="ds")
    dv = tl.regs(tl.f32, BN, DC, name="dv")
    dk = tl.regs(tl.f32, BN, DC, name="dk")
    dq = tl.regs(tl.f32, BM, DC, name="dq")
    lse = tl.rvec(tl.f32, BM, axis="cols", name="lse")
    delta = tl.rvec(tl.f32, BM, axis="cols", name="delta")

    tl.load(k, K, (b, hk, bn, 0))
    tl.load(v, V, (b, hk, bn, 0))
    if chunks > 1:
        tl.load(k_c, K, (b, hk, bn, c))
    tl.zero(dk)
    tl.zero(dv)

    def step(i, h, masked):
        """Query block i of query head h against this block's K and V."""
        tl.load(q, Q, (b, h, i, 0))
        tl.load(do, dO, (b, h, i, 0))
        if chunks > 1:
            tl.load(q_c, Q, (b, h, i, c))
            tl.load(do_c, dO, (b, h, i, c))
        tl.load(lse, LSE2, (b, h, i))
        # the matrix products in two batches of independent ones (S^T and dP^T; dQ, dV and dK), which a backend
        # may keep in flight together, each waited for where its result is first needed: the softmax of S^T
        # while dP^T is computed, dQ's accumulation while dV and dK are
        tl.zero(s)
        tl.mma_ABt(s, k, q, s)
        if masked:  # -inf where kv row > query row: the complement of causal_mask's kept set, shifted by one
            tl.fill(dp, -math.inf)
            tl.causal_mask(dp, dp, bn * BN - 1, i * BM, 0.0)
            tl.add(s, s, dp)
        tl.zero(dp)
        tl.mma_ABt(dp, v, do, dp)
        tl.load(delta, Delta, (b, h, i))   # only now: registers are short while S^T and dP^T are in flight
        tl.mul(s, s, scale * LOG2E)
        tl.sub_col(s, s, lse)
        tl.exp2(s, s)
        tl.copy(p, s)
        if dv_early:
            # dV as soon as P^T is there (FlashAttention-3's order): a backend that keeps it in flight runs it on
            # the tensor cores through dS^T's arithmetic, its store and the barrier around its shared tile
            tl.mma_AB(dv, p, do_c, dv)
        # dS^T = P^T * (dP^T scale - Delta scale): scale folded here (dK and dQ need no rescale), Delta scaled by
        # attention_bwd_pre, so that the tile's multiply and subtract fuse (one FMA per element)
        tl.mul(dp, dp, scale)
        tl.sub_col(dp, dp, delta)
        tl.mul(dp, dp, s)
        tl.copy(ds, dp)
        tl.store(ds_s, ds)
        tl.zero(dq)
        tl.mma_AtB(dq, ds_s, k_c, dq)
        if not dv_early:
            tl.mma_AB(dv, p, do_c, dv)
        tl.mma_AB(dk, ds, q_c, dk)
        tl.atomic_add(DQacc, dq, (b, h, i, c))

    n_q = tl.cdiv(Q.rows, BM)
    for g in tl.range(group, name="g"):
        h = hk * group + g
        if causal:
            # query blocks before this kv block see none of it; those across its diagonal need the mask,
            # those after it do not
            first = (bn * BN) // BM
            split = tl.minimum(n_q, tl.cdiv((bn + 1) * BN, BM))
            for it in tl.pipeline(split - first, name="it"):
                step(first + it, h, masked=True)
            for it in tl.pipeline(n_q - split, name="it"):
                step(split + it, h, masked=False)
        else:
            for it in tl.pipeline(n_q, name="it"):
                step(it, h, masked=False)
    tl.store(dK, dk, (b, hk, bn, c))
    tl.store(dV, dv, (b, hk, bn, c))


@tl.kernel(configs=DQ_CONFIGS)
def attention_bwd_dq(dQ, DQacc, *, D, BM, staged=False):
    bm, h, b = tl.grid(tl.cdiv(dQ.rows, BM), dQ.depth, dQ.batch)
    tl.check_eq(dQ.cols, D)
    tl.check_eq(DQacc.rows, dQ.rows)
    x = tl.regs(tl.f32, BM, D, name="x")
    acc_via, dq_via = (tl.shared(tl.f32, BM, D), tl.shared(dQ.dtype, BM, D)) if staged else (None, None)
    tl.load(x, DQacc, (b, h, bm, 0), via=acc_via)
    tl.store(dQ, x, (b, h, bm, 0), via=dq_via)


def attention_backward(q, k, v, o, lse, do, *, causal=False, scale=None, backend=None, rows=None, **config):
    """(dQ, dK, dV) for numpy q, o, do (B, H, N, D), k, v (B, H_kv, N_kv, D), lse (B, H, N) float32.
    config overrides the main kernel's constants and launch options, rows (a dict) the two row kernels'."""
    rows = rows or {}
    bsz, heads, n, d = q.shape
    if o.shape != q.shape or do.shape != q.shape or lse.shape != q.shape[:3]:
        raise ValueError(f"expected o and do of q's shape {q.shape} and lse of {q.shape[:3]}; got "
                         f"{o.shape}, {do.shape}, {lse.shape}")
    if k.ndim != 4 or k.shape != v.shape or k.shape[0] != bsz or k.shape[3] != d or heads % k.shape[1]:
        raise ValueError(f"expected k and v (B, H_kv, N_kv, D) with H a multiple of H_kv; q {q.shape}, "
                         f"k {k.shape}, v {v.shape}")
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    delta = np.full(lse.shape, np.nan, dtype=np.float32)
    lse2 = np.full(lse.shape, np.nan, dtype=np.float32)
    dq_acc = np.full(q.shape, np.nan, dtype=np.float32)
    dq = np.full(q.shape, np.nan, dtype=q.dtype)
    dk = np.full(k.shape, np.nan, dtype=k.dtype)
    dv = np.full(v.shape, np.nan, dtype=v.dtype)
    attention_bwd_pre(delta, lse2, dq_acc, o, do, lse, float(scale), backend=backend, D=d, **rows)
    attention_bwd(dk, dv, dq_acc, q, k, v, do, lse2, delta, float(scale), backend=backend, D=d, causal=causal,
                  **config)
    attention_bwd_dq(dq, dq_acc, backend=backend, D=d, **rows)
    return dq, dk, dv


def flops(b: int, h: int, n: int, d: int, causal: bool, n_kv: int | None = None) -> float:
    """2.5 times the forward's: five N x N_kv x D matmuls against the forward's two."""
    f = 2.5 * 4.0 * b * h * n * (n_kv or n) * d
    return f / 2 if causal else f
