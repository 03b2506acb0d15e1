"""RMSNorm over the last dim (Llama's): Y = X / sqrt(mean(X^2) + eps) * W, and 1 / sqrt(mean(X^2) + eps) per
row (RSTD, float32) for the backward pass.

Rows that fit on chip (C a multiple of 16, up to ROW_MAX) take one pass, `rmsnorm_rows`, as kernels/layernorm.py's
`layernorm_rows`: X read once and Y written once, the least traffic there is. The row is a (C/K, K) tile over
the block's workers; its sum of squares is reduced over the whole tile (tl.tile_sum, one exchange), every element
then scaled by RSTD and W. W is read once per block, before its RPB rows, and stays in registers in its own
dtype. 16 rows of 4096 columns are 16 blocks of one row each (two passes: one block looping over the columns).
H200, 2026-12-04 (docs/benchmarks.md): 0.98x / 1.04x torch.compile at 4096x4096 / 16384x4096 with three stages,
0.87x at 4096x8192, 0.94x at 4096x14336 with 16 rows a block (a 14-warp block an SM, four barriers a row, issue
slots 44% busy); compiled offline without spills for sm_80, sm_90a, gfx942 and gfx950.

Other rows take two passes over column blocks, `rmsnorm_fwd`, as layernorm's `layernorm_fwd`: the first sums
the squares of the row (columns past the end load as 0 and add nothing), the second reads the row again (from
L2 at best) and scales it. BR rows per block, split over its workers; rows and columns need not be multiples
of the block. W is read once per block and column block, in its own dtype, into an f32 column vector. Rows too
few to fill the GPU split their columns over blocks as softmax's do (softmax.split_columns, `split_plan`):
rmsnorm_fwd writes each part's sum of squares, `rmsnorm_apply` adds a row's parts and normalizes its part.
Tuned over softmax's spaces: two passes (rows per block, column step, workers, the split) and one pass (rows
per block, workers, staging through shared memory).
"""
from __future__ import annotations

import numpy as np

import tiles as tl

from . import softmax
from .layernorm import CONFIGS, rstd_of_sum
from .softmax import (ROW_TUNE, SPLIT_TUNE, alike, load_parts, part_chunk, planned_rpb, row_bucket, row_plan,
                      rows_fit, split_columns, split_fits, split_walk)

# sm_90a: rows three deep through shared memory where staged (past 8192 columns, staged_past_8192). H200 (12-04,
# 4096 and 16384 rows of 4096): 25.2 / 79.2 us against 27.9 / 87.8 at two stages (+10%); the same at 8192 and 14336
# columns; layernorm's rows lost 6-12% at three.
# Registers capped at 128 on CUDA, as layernorm's on sm_90a: with W converted where the rows use it (to_floats,
# tiles_cuda/base.cuh), ptxas fitted 14336 columns (14 warps) into 72 registers for two blocks an SM, which their
# shared memory does not allow, and spilled 4-12 bytes to do it; capped, 118-125 registers and one block an SM, as
# before that change (98-102 registers then)
ROW_CONFIGS = {**softmax.ROW_CONFIGS,
               "sm_80": {**softmax.ROW_CONFIGS["sm_80"], "max_registers": 128},
               "sm_90a": {**softmax.ROW_CONFIGS["sm_90a"], "staged": True, "stages": 3, "max_registers": 128}}


def _check_shapes(Y, RSTD, X, W):
    """The two-pass kernels' arguments: Y as X, RSTD a value per row, W one per column (both launches of a split
    check them, so that a bad call stops before the first)."""
    tl.check_eq(Y.rows, X.rows)
    tl.check_eq(Y.cols, X.cols)
    tl.check_eq(RSTD.cols, X.rows)
    tl.check_eq(W.cols, X.cols)


def split_plan(cfg, Y, RSTD, X, W, eps, S=None, *, target=None):
    """rmsnorm_fwd with each row's columns split SPLIT ways: rmsnorm_fwd writes each part's sum of squares to a
    (SPLIT, rows) f32 temporary, rmsnorm_apply adds a row's parts and normalizes its part. None: one launch."""
    if cfg["SPLIT"] == 1 or S is not None:
        return None
    s = tl.tune.Shaped((cfg["SPLIT"], X.shape[0]), tl.f32)
    return [(rmsnorm_fwd, [Y, RSTD, X, W, eps, s], {}), (rmsnorm_apply, [Y, RSTD, X, W, eps, s], alike(cfg))]


@tl.kernel(configs=CONFIGS, tune=SPLIT_TUNE, tune_key=lambda Y, RSTD, X, *rest: row_bucket(Y, X), plan=split_plan,
           heuristic=split_columns(CONFIGS, x=2), tune_where=lambda cfg, Y, RSTD, X, *rest: split_fits(cfg, X))
def rmsnorm_fwd(Y, RSTD, X, W, eps, S=None, *, BR, BC, SPLIT=1):
    """Y = X / sqrt(mean(X^2) + eps) * W and RSTD by rows, two passes over column blocks. With SPLIT > 1 the first
    launch of split_plan's two: block (br, part) writes the sum of squares of part `part` of its rows to S (SPLIT,
    rows); rmsnorm_apply writes Y and RSTD."""
    br, part, c0, n = split_walk("rmsnorm_fwd", X, BR, BC, SPLIT, (S,))
    _check_shapes(Y, RSTD, X, W)
    x = tl.regs(tl.f32, BR, BC, name="x")
    w = tl.rvec(tl.f32, BC, axis="cols", name="w")
    rstd = tl.rvec(tl.f32, BR, name="rstd")     # the sum of squares, then 1 / sqrt(mean + eps)

    tl.zero(rstd)
    for c in tl.range(n, name="c"):
        tl.load(x, X, (br, c if SPLIT == 1 else c0 + c))
        tl.mul(x, x, x)
        tl.row_sum(rstd, x, rstd)
    if SPLIT > 1:
        tl.store(S, rstd, (part, br))
        return
    rstd_of_sum(rstd, X.cols, eps)
    tl.store(RSTD, rstd, (br,))
    for c in tl.range(n, name="c"):
        tl.load(x, X, (br, c))
        tl.load(w, W, (c,))
        tl.mul_row(x, x, rstd)
        tl.mul_col(x, x, w)
        tl.store(Y, x, (br, c))


@tl.kernel(configs=CONFIGS)
def rmsnorm_apply(Y, RSTD, X, W, eps, S, *, BR, BC, SPLIT):
    """Y's part p of each row and RSTD, from the row's sum of squares added up from its SPLIT parts in S."""
    br, part, c0, n = split_walk("rmsnorm_apply", X, BR, BC, SPLIT, (S,))
    _check_shapes(Y, RSTD, X, W)
    x = tl.regs(tl.f32, BR, BC, name="x")
    w = tl.rvec(tl.f32, BC, axis="cols", name="w")
    rstd = tl.rvec(tl.f32, BR, name="rstd")
    sp = [tl.rvec(tl.f32, BR, name=f"sp{g}") for g in range(part_chunk(SPLIT))]
    tl.zero(rstd)
    for q in tl.range(SPLIT // len(sp), name="q"):
        load_parts(sp, S, q, br)
        for v in sp:
            tl.add(rstd, rstd, v)
    rstd_of_sum(rstd, X.cols, eps)
    # part 0 writes RSTD: the other parts' block index lands past its end, where a store writes nothing
    tl.store(RSTD, rstd, (br + part * tl.cdiv(X.rows, BR),))
    for c in tl.range(n, name="c"):
        tl.load(x, X, (br, c0 + c))
        tl.load(w, W, (c0 + c,))
        tl.mul_row(x, x, rstd)
        tl.mul_col(x, x, w)
        tl.store(Y, x, (br, c0 + c))


def staged_past_8192(target, Y, RSTD, X, *rest, **keywords):
    """sm_90a stages rows through shared memory past 8192 columns only. With runs stored whole (16-byte stores,
    tiles_cuda/memory.cuh) the direct path caught up: H100, 12-07, one process, unstaged against staged: 16x4096
    4.7 / 5.3 us, 4096x4096 27.7 / 28.4, 16384x4096 94.3 / 94.6, 4096x8192 51.2 / 51.7; 4096x14336 96.4 / 92.1."""
    return dict(staged=False) if target == "sm_90a" and X.shape[1] * X.shape[2] <= 8192 else {}


@tl.kernel(configs=ROW_CONFIGS, tune=ROW_TUNE, tune_key=lambda Y, RSTD, X, *rest: row_bucket(Y, X),
           tune_where=lambda cfg, Y, RSTD, X, *rest: rows_fit(cfg, Y, X),
           tune_defaults=lambda Y, RSTD, X, *rest: planned_rpb(lambda r, c: launch_plan(r, c))(Y, X),
           heuristic=staged_past_8192)
def rmsnorm_rows(Y, RSTD, X, W, eps, *, TR, K, RPB, staged):
    """X, Y: (rows, C/K, K) views of the (rows, C) arrays, C/K <= TR; W: the (C/K, K) view of (C,); RSTD: the
    (rows, 1) view of (rows,)."""
    blk = tl.grid(tl.cdiv(X.depth, RPB))
    tl.check_eq(Y.depth, X.depth)
    tl.check_eq(Y.rows, X.rows)
    tl.check_eq(Y.cols, K)
    tl.check_eq(RSTD.cols, 1)                   # first: a (rows,) RSTD fails here, by its length
    tl.check_eq(RSTD.rows, X.depth)
    tl.check_eq(W.rows, X.rows)
    tl.check_eq(W.cols, K)
    tl.check_eq(tl.minimum(X.rows, TR), X.rows)
    tl.check_eq(X.cols, K)
    xs = tl.shared(X.dtype, TR, K, name="xs") if staged else None
    ys = tl.shared(Y.dtype, TR, K, name="ys") if staged else None
    x = tl.regs(tl.f32, TR, K, name="x")
    t = tl.regs(tl.f32, TR, K, name="t")        # X^2, then W in f32
    w = tl.regs(W.dtype, TR, K, name="w")       # W in its own dtype, read once per block
    rstd = tl.rvec(tl.f32, TR, name="rstd")     # the row's sum of squares, then 1 / sqrt(mean + eps), in every element

    tl.load(w, W, (0, 0))
    for i in tl.pipeline(RPB, name="i"):
        row = tl.minimum(blk * RPB + i, X.depth - 1)   # the last block repeats the last row past the end
        tl.load(x, X, (row, 0, 0), via=xs)
        tl.mul(t, x, x)
        tl.tile_sum(rstd, t)                            # tile rows past the row's end read as 0, add nothing
        rstd_of_sum(rstd, X.rows * K, eps)
        tl.store(RSTD, rstd, (row, 0))                  # its first element: RSTD's one column
        tl.mul_row(x, x, rstd)
        tl.copy(t, w)
        tl.mul(x, x, t)
        tl.store(Y, x, (row, 0, 0), via=ys)


ROW_MAX = 16384   # the longest row held on chip: at 32768 sm_90a spills (X, its square and W in registers)


def launch_plan(rows: int, cols: int) -> dict | None:
    """The constants of `rmsnorm_rows` for (rows, cols), or None where the two-pass kernel applies. Rows per
    block as softmax's plan: the same traffic a row (X in, Y out; W once per block)."""
    return row_plan(rows, cols, one_block_rpb=16) if cols <= ROW_MAX else None


def rmsnorm(x, weight, *, eps=1e-6, backend=None, **config):
    """(Y, RSTD) for a numpy x (..., C) and weight (C,): Y in x's dtype, RSTD (rows,) float32."""
    if x.ndim < 1 or weight.shape != (x.shape[-1],):
        raise ValueError(f"expected x (..., C) and weight (C,), got {x.shape} and {weight.shape}")
    rows = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    y = np.full(rows.shape, np.nan, dtype=x.dtype)
    rstd = np.full(rows.shape[:1], np.nan, dtype=np.float32)
    weight = np.ascontiguousarray(weight)
    plan = launch_plan(*rows.shape)
    if plan is None:
        rmsnorm_fwd(y, rstd, rows, weight, float(eps), backend=backend, **config)
    else:
        k = plan["K"]
        view = lambda a: a.reshape(a.shape[0], -1, k)   # noqa: E731
        rmsnorm_rows(view(y), rstd.reshape(-1, 1), view(rows), weight.reshape(-1, k), float(eps), backend=backend,
                     **{**plan, **config})
    return y.reshape(x.shape), rstd


def bytes_moved(rows: int, cols: int, itemsize: int = 2) -> float:
    """The least traffic: read X once, write Y once (what the one-pass kernel moves; the two-pass one also reads
    X a second time, from L2 at best)."""
    return 2.0 * rows * cols * itemsize
