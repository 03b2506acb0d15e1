"""RMSNorm over the last dim (Llama's): Y = X / sqrt(mean(X^2) + eps) * W, and 1 / sqrt(mean(X^2) + eps) per
row (RSTD, float32) for the backward pass.

Two passes over column blocks, as kernels/layernorm.py's `layernorm_fwd`: the first sums the squares of the
row (columns past the end load as 0 and add nothing), the second reads the row again (from L2 at best) and
scales it. BR rows per block, split over its workers; rows and columns need not be multiples of the block.
W is read once per block and column block, in its own dtype, into an f32 column vector.
Tuned over softmax's two-pass space (rows per block, column step, workers); no one-pass variant for rows that
fit on chip (layernorm_rows' scheme would apply).
"""
from __future__ import annotations

import numpy as np

import tiles as tl

from .layernorm import CONFIGS, rstd_of_sum
from .softmax import TUNE, row_bucket


@tl.kernel(configs=CONFIGS, tune=TUNE, tune_key=lambda Y, RSTD, X, *rest: row_bucket(Y, X),
           tune_where=lambda cfg, Y, RSTD, X, *rest: cfg["BR"] <= max(16, 2 * tl.tune.pow2(X.shape[0])))
def rmsnorm_fwd(Y, RSTD, X, W, eps, *, BR, BC):
    br = tl.grid(tl.cdiv(X.rows, BR))
    tl.check_eq(Y.rows, X.rows)
    tl.check_eq(Y.cols, X.cols)
    tl.check_eq(RSTD.cols, X.rows)
    tl.check_eq(W.cols, X.cols)
    x = tl.regs(tl.f32, BR, BC, name="x")
    w = tl.rvec(tl.f32, BC, axis="cols", name="w")
    rstd = tl.rvec(tl.f32, BR, name="rstd")     # the sum of squares, then 1 / sqrt(mean + eps)
    n = tl.cdiv(X.cols, BC)

    tl.zero(rstd)
    for c in tl.range(n, name="c"):
        tl.load(x, X, (br, c))
        tl.mul(x, x, x)
        tl.row_sum(rstd, x, rstd)
    rstd_of_sum(rstd, X.cols, eps)
    tl.store(RSTD, rstd, (br,))
    for c in tl.range(n, name="c"):
        tl.load(x, X, (br, c))
        tl.load(w, W, (c,))
        tl.mul_row(x, x, rstd)
        tl.mul_col(x, x, w)
        tl.store(Y, x, (br, c))


def rmsnorm(x, weight, *, eps=1e-6, backend=None, **config):
    """(Y, RSTD) for a numpy x (..., C) and weight (C,): Y in x's dtype, RSTD (rows,) float32."""
    if x.ndim < 1 or weight.shape != (x.shape[-1],):
        raise ValueError(f"expected x (..., C) and weight (C,), got {x.shape} and {weight.shape}")
    rows = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    y = np.full(rows.shape, np.nan, dtype=x.dtype)
    rstd = np.full(rows.shape[:1], np.nan, dtype=np.float32)
    rmsnorm_fwd(y, rstd, rows, np.ascontiguousarray(weight), float(eps), backend=backend, **config)
    return y.reshape(x.shape), rstd


def bytes_moved(rows: int, cols: int, itemsize: int = 2) -> float:
    """The least traffic: read X once, write Y once (this kernel reads X twice, the second time from L2 at best)."""
    return 2.0 * rows * cols * itemsize
