"""Fused dropout + residual add + layernorm over the last dim.

    H = R + dropout(X)                    (the new residual stream, returned in its dtype)
    Y = (H - mean(H)) / sqrt(var(H) + eps) * W + Bias

Y normalizes H as returned (rounded to its dtype).

Rows that fit on chip, without dropout (C a multiple of 16, up to ROW_MAX), take one pass, `layernorm_rows`:
X and R read once, H and Y written once, the least traffic there is. As in kernels/softmax.py the row is
viewed as a (C/K, K) tile spread over the block's workers, reduced over the whole tile; mean and variance
come from the row on chip (two sums, no cancellation). W and Bias are read once per block, before its rows,
and stay in registers in their own dtype (`ROW_CONFIGS`: how many registers that takes on sm_90a).

Other rows take two passes over column blocks, `layernorm_fwd`: the first writes H and merges per-block
means and squared deviations (Chan et al.'s pairwise update, stable where sum and sum-of-squares cancel);
the second reads H back (one more read of the row, from L2 at best) and normalizes. Rows too few to fill the
GPU split their columns over blocks as softmax's do (softmax.split_columns, `split_plan`): layernorm_fwd writes
H and each part's statistics, `layernorm_apply` merges a row's parts by the same update and normalizes its
part. Dropout draws its mask
with `tl.dropout` from Philox 4x32-10 keyed by (seed, offset, row, column) of the (rows, C) view: the same
mask on every backend (tiles/philox.py). The one-pass kernel has no dropout: its tile rows are pieces of
one row, and `tl.dropout` keys elements by tile row and column.
"""
from __future__ import annotations

import numpy as np

import tiles as tl

from . import softmax
from .softmax import (ROW_TUNE, SPLIT_TUNE, alike, load_parts, part_chunk, planned_rpb, row_bucket, row_plan,
                      rows_fit, split_columns, split_fits, split_walk)

# BR rows per block (split over the workers), BC columns per step of the loop over a row.
CONFIGS = {
    "default": dict(BR=32, BC=64),
    "sm_80": dict(BR=64, BC=128, workers=4),
    "sm_90a": dict(BR=64, BC=128, workers=4),
    "gfx942": dict(BR=64, BC=128, workers=4),
    "gfx950": dict(BR=64, BC=128, workers=4),
    "apple": dict(BR=32, BC=64, workers=4),
}


def rstd_of_sum(v, n, eps):
    """v <- 1 / sqrt(v / n + eps) of a sum v of n squares. One rsqrt: exp2(-log2(.) / 2), as it was first written,
    compiles on CUDA to the library's log2f, ~15 instructions a value (rmsnorm_rows 4096x14336 spent 174 of its 855
    instructions a thread a row between the row's sum and its store, ncu 12-04)."""
    tl.mul(v, v, 1.0 / n)
    tl.add(v, v, eps)
    tl.rsqrt(v, v)


def split_plan(cfg, Y, H, X, R, W, Bias, eps, p, seed, offset, MEAN=None, M2=None, *, target=None):
    """layernorm_fwd with each row's columns split SPLIT ways: layernorm_fwd writes H and each part's mean and sum
    of squared deviations to two (SPLIT, rows) f32 temporaries, layernorm_apply merges a row's parts (Chan's
    pairwise update, as the blocks of one part merge) and normalizes its part of H. None: one launch."""
    if cfg["SPLIT"] == 1 or MEAN is not None:
        return None
    mean, m2 = (tl.tune.Shaped((cfg["SPLIT"], X.shape[0]), tl.f32) for _ in range(2))
    return [(layernorm_fwd, [Y, H, X, R, W, Bias, eps, p, seed, offset, mean, m2], {}),
            (layernorm_apply, [Y, H, W, Bias, eps, mean, m2], alike(cfg))]


@tl.kernel(configs=CONFIGS, tune=SPLIT_TUNE, tune_key=row_bucket, plan=split_plan,
           heuristic=split_columns(CONFIGS, x=2), tune_where=lambda cfg, Y, H, X, *rest: split_fits(cfg, X))
def layernorm_fwd(Y, H, X, R, W, Bias, eps, p, seed, offset, MEAN=None, M2=None, *, BR, BC, SPLIT=1,
                  dropout=False):
    """H = R + dropout(X) and Y = layernorm(H) * W + Bias by rows, two passes over column blocks. With SPLIT > 1 the
    first launch of split_plan's two: block (br, part) writes H over part `part` of its rows' columns, and the
    part's mean and sum of squared deviations to MEAN and M2 (SPLIT, rows); layernorm_apply writes Y."""
    br, part, c0, n = split_walk("layernorm_fwd", X, BR, BC, SPLIT, (MEAN, M2))
    for a in (Y, H, R):
        tl.check_eq(a.rows, X.rows)
        tl.check_eq(a.cols, X.cols)
    tl.check_eq(W.cols, X.cols)
    tl.check_eq(Bias.cols, X.cols)
    x = tl.regs(tl.f32, BR, BC, name="x")
    h = tl.regs(tl.f32, BR, BC, name="h")
    hr = tl.regs(H.dtype, BR, BC, name="hr")  # h rounded as H stores it
    w = tl.rvec(tl.f32, BC, axis="cols", name="w")
    bias = tl.rvec(tl.f32, BC, axis="cols", name="bias")
    mean = tl.rvec(tl.f32, BR, name="mean")     # of the columns seen so far
    m2 = tl.rvec(tl.f32, BR, name="m2")         # their sum of squared deviations from mean
    bmean = tl.rvec(tl.f32, BR, name="bmean")   # the same two of this column block
    bm2 = tl.rvec(tl.f32, BR, name="bm2")
    delta = tl.rvec(tl.f32, BR, name="delta")

    tl.zero(mean)
    tl.zero(m2)
    for c in tl.range(n, name="c"):
        cc = c if SPLIT == 1 else c0 + c         # the column block along the whole row
        seen = c * BC                            # columns merged before this block (of this part)
        nb = tl.minimum(BC, X.cols - cc * BC)    # columns in this block
        frac = 1.0 * nb / (seen + nb)            # its share of the columns merged so far (float division)
        tl.load(x, X, (br, cc))
        tl.load(h, R, (br, cc))
        if dropout:
            tl.dropout(x, x, p, seed, offset, br * BR, cc * BC)
        tl.add(h, h, x)
        tl.copy(hr, h)
        tl.copy(h, hr)
        tl.store(H, hr, (br, cc))
        tl.row_sum(bmean, h)                     # columns past the end loaded as 0
        tl.mul(bmean, bmean, 1.0 / nb)
        tl.sub_row(x, h, bmean)
        tl.bounds_mask(x, x, BR, nb, 0.0)        # ... but deviate from the mean: mask them
        tl.mul(x, x, x)
        tl.row_sum(bm2, x)
        _merge(mean, m2, bmean, bm2, delta, seen, frac)
    if SPLIT > 1:
        tl.store(MEAN, mean, (part, br))
        tl.store(M2, m2, (part, br))
        return
    _normalized(Y, H, W, Bias, eps, X.cols, br, 0, n, mean, m2, h, w, bias)


def _merge(mean, m2, bmean, bm2, delta, seen, frac):
    """(mean, m2) of the columns seen so far <- merged with a block's (bmean, bm2), frac its share of the columns
    merged (Chan et al.: the means' difference weighted by seen * frac adds to the squared deviations). bmean and
    delta are scratch."""
    tl.sub(delta, bmean, mean)
    tl.mul(bmean, delta, frac)
    tl.add(mean, mean, bmean)
    tl.mul(delta, delta, delta)
    tl.mul(delta, delta, seen * frac)
    tl.add(m2, m2, bm2)
    tl.add(m2, m2, delta)


def _normalized(Y, H, W, Bias, eps, cols, br, c0, n, mean, m2, h, w, bias):
    """Y over n column blocks from c0 of H's row block br: (h - mean) / sqrt(m2 / cols + eps) * W + Bias."""
    rstd = m2
    rstd_of_sum(rstd, cols, eps)
    for c in tl.range(n, name="c"):
        cc = c if isinstance(c0, int) and c0 == 0 else c0 + c
        tl.load(h, H, (br, cc))                  # what pass 1 wrote: a block reads its own global writes
        tl.load(w, W, (cc,))
        tl.load(bias, Bias, (cc,))
        tl.sub_row(h, h, mean)
        tl.mul_row(h, h, rstd)
        tl.mul_col(h, h, w)
        tl.add_col(h, h, bias)
        tl.store(Y, h, (br, cc))


@tl.kernel(configs=CONFIGS)
def layernorm_apply(Y, H, W, Bias, eps, MEAN, M2, *, BR, BC, SPLIT):
    """Y's part p of each row, from the row's statistics merged from its SPLIT parts (Chan's update: part q's
    columns join the seen ones with weight nq / (seen + nq), its deviations with seen * nq / (seen + nq))."""
    br, part, c0, n = split_walk("layernorm_apply", H, BR, BC, SPLIT, (MEAN, M2))
    tl.check_eq(Y.rows, H.rows)
    tl.check_eq(Y.cols, H.cols)
    tl.check_eq(W.cols, H.cols)
    tl.check_eq(Bias.cols, H.cols)
    h = tl.regs(tl.f32, BR, BC, name="h")
    w = tl.rvec(tl.f32, BC, axis="cols", name="w")
    bias = tl.rvec(tl.f32, BC, axis="cols", name="bias")
    mean, m2, delta = (tl.rvec(tl.f32, BR, name=v) for v in ("mean", "m2", "delta"))
    chunk = part_chunk(SPLIT)   # the parts' loads a chunk at a time, their merges in order
    pmean = [tl.rvec(tl.f32, BR, name=f"pmean{g}") for g in range(chunk)]
    pm2 = [tl.rvec(tl.f32, BR, name=f"pm2{g}") for g in range(chunk)]
    per = tl.cdiv(tl.cdiv(H.cols, BC), SPLIT) * BC   # columns a part
    tl.zero(mean)
    tl.zero(m2)
    for q in tl.range(SPLIT // chunk, name="q"):
        load_parts(pmean, MEAN, q, br)
        load_parts(pm2, M2, q, br)
        for g in range(chunk):
            seen = tl.minimum((q * chunk + g) * per, H.cols)   # columns of the parts before this one
            nq = tl.minimum(per, H.cols - seen)                # this part's (0 past the row's end: it weighs nothing)
            frac = 1.0 * nq / (seen + nq)
            _merge(mean, m2, pmean[g], pm2[g], delta, seen, frac)
    _normalized(Y, H, W, Bias, eps, H.cols, br, c0, n, mean, m2, h, w, bias)


# softmax's, with sm_90a's registers capped at 128: with W and Bias kept across rows CUDA 13.0's ptxas (the H200's
# NVRTC) took 168 registers at 4096 columns, 3 blocks of 4 warps per SM; capped, 4 blocks and no spills.
# H200, 2026-11-30 (one call, 16384x4096): 148.5 us (84.9% of copy) -> 145.4 us (86.7%). W and Bias read again
# for every row (128 registers without a cap) took 191.0 us. At 16 warps (16384 columns) the cap changes nothing.
ROW_CONFIGS = {**softmax.ROW_CONFIGS, "sm_90a": {**softmax.ROW_CONFIGS["sm_90a"], "max_registers": 128}}


@tl.kernel(configs=ROW_CONFIGS, tune=ROW_TUNE, tune_key=lambda Y, H, X, *rest: row_bucket(Y, X),
           tune_where=lambda cfg, Y, H, X, *rest: rows_fit(cfg, Y, X),
           tune_defaults=lambda Y, H, X, *rest: planned_rpb(lambda r, c: launch_plan(r, c))(Y, X))
def layernorm_rows(Y, H, X, R, W, Bias, eps, *, TR, K, RPB, staged):
    """X, R, H, Y: (rows, C/K, K) views of the (rows, C) arrays, C/K <= TR; W, Bias: (C/K, K) views of (C,)."""
    blk = tl.grid(tl.cdiv(X.depth, RPB))
    for a in (Y, H, R):
        tl.check_eq(a.depth, X.depth)
        tl.check_eq(a.rows, X.rows)
        tl.check_eq(a.cols, K)
    for a in (W, Bias):
        tl.check_eq(a.rows, X.rows)
        tl.check_eq(a.cols, K)
    tl.check_eq(tl.minimum(X.rows, TR), X.rows)
    tl.check_eq(X.cols, K)
    xs = tl.shared(X.dtype, TR, K, name="xs") if staged else None
    rs = tl.shared(R.dtype, TR, K, name="rs") if staged else None
    outs = tl.shared(Y.dtype, TR, K, name="outs") if staged else None   # H, then Y, on their way out
    x = tl.regs(tl.f32, TR, K, name="x")        # X, then squared deviations, then W and Bias in f32
    h = tl.regs(tl.f32, TR, K, name="h")
    w = tl.regs(W.dtype, TR, K, name="w")       # W and Bias in their own dtype
    bias = tl.regs(Bias.dtype, TR, K, name="bias")
    hr = tl.regs(H.dtype, TR, K, name="hr")     # h rounded as H stores it
    stat = tl.rvec(tl.f32, TR, name="stat")     # the row's mean, then 1 / its standard deviation

    tl.load(w, W, (0, 0))
    tl.load(bias, Bias, (0, 0))
    for i in tl.pipeline(RPB, name="i"):
        row = tl.minimum(blk * RPB + i, X.depth - 1)   # the last block repeats the last row past the end
        tl.load(x, X, (row, 0, 0), via=xs)
        tl.load(h, R, (row, 0, 0), via=rs)
        tl.add(h, h, x)
        tl.copy(hr, h)
        tl.copy(h, hr)
        tl.store(H, hr, (row, 0, 0), via=outs)
        tl.tile_sum(stat, h)                         # tile rows past the row's end read as 0
        tl.mul(stat, stat, 1.0 / (X.rows * K))
        tl.sub_row(h, h, stat)
        tl.bounds_mask(h, h, X.rows, K, 0.0)         # ... but deviate from the mean: mask them
        tl.mul(x, h, h)
        tl.tile_sum(stat, x)
        rstd_of_sum(stat, X.rows * K, eps)
        tl.mul_row(h, h, stat)
        tl.copy(x, w)
        tl.mul(h, h, x)
        tl.copy(x, bias)
        tl.add(h, h, x)
        tl.store(Y, h, (row, 0, 0), via=outs)


ROW_MAX = 16384   # the longest row held on chip: X, R (2 stages each) and the output tile in shared memory


def launch_plan(rows: int, cols: int, p: float = 0.0) -> dict | None:
    """The constants of `layernorm_rows` for (rows, cols), or None where the two-pass kernel applies. Rows per
    block as softmax's plan, one per 1024 columns (16384x4096 on the H200, 2026-11-30: 145.8 / 147.9 / 151.6 us
    at RPB 4 / 8 / 16)."""
    return row_plan(rows, cols, cols_per_rpb=1024, one_block_rpb=16) if p == 0.0 and cols <= ROW_MAX else None


def layernorm(x, residual, weight, bias, *, eps=1e-5, p=0.0, seed=0, offset=0, backend=None, **config):
    """(Y, H) for numpy x and residual (..., C), weight and bias (C,): H = residual + dropout(x, p),
    Y = layernorm(H) * weight + bias. Y and H take x's dtype."""
    if x.shape != residual.shape or x.ndim < 1 or weight.shape != (x.shape[-1],) or bias.shape != weight.shape:
        raise ValueError(f"expected x and residual (..., C), weight and bias (C,); got {x.shape}, "
                         f"{residual.shape}, {weight.shape}, {bias.shape}")
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if not (0 <= seed < 2**31 and 0 <= offset < 2**31):
        raise ValueError(f"seed and offset must be in [0, 2**31), got {seed} and {offset}")
    rows = lambda a: np.ascontiguousarray(a).reshape(-1, x.shape[-1])  # noqa: E731
    y = np.full(rows(x).shape, np.nan, dtype=x.dtype)
    h = np.full(rows(x).shape, np.nan, dtype=x.dtype)
    weight, bias = np.ascontiguousarray(weight), np.ascontiguousarray(bias)
    plan = launch_plan(*y.shape, p)
    if plan is None:
        layernorm_fwd(y, h, rows(x), rows(residual), weight, bias, float(eps), float(p), int(seed), int(offset),
                      backend=backend, dropout=p > 0, **config)
    else:
        k = plan["K"]
        view = lambda a: a.reshape(a.shape[0], -1, k)   # noqa: E731
        layernorm_rows(view(y), view(h), view(rows(x)), view(rows(residual)), weight.reshape(-1, k),
                       bias.reshape(-1, k), float(eps), backend=backend, **{**plan, **config})
    return y.reshape(x.shape), h.reshape(x.shape)


def bytes_moved(rows: int, cols: int, itemsize: int = 2) -> float:
    """The least traffic: read X and R, write H and Y (what the one-pass kernel moves; the two-pass one also
    reads H back, from L2 at best)."""
    return 4.0 * rows * cols * itemsize
