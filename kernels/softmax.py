"""Row softmax: Y = softmax(X) along the last dim, for rows of any length.

Two passes over column blocks, so a row never has to fit on chip: the first keeps a running max and a
running sum rescaled as the max grows (the online softmax of attention), the second normalizes. Rows
and columns need not be multiples of the block.
"""
from __future__ import annotations

import math

import numpy as np

import tiles as tl

LOG2E = 1.4426950408889634

# BR rows per block (split over the workers), BC columns per step of the loop over a row.
CONFIGS = {
    "default": dict(BR=32, BC=64),
    "sm_80": dict(BR=64, BC=128, stages=2, workers=4),
    "sm_90a": dict(BR=64, BC=128, stages=2, workers=4),
    "gfx942": dict(BR=64, BC=128, workers=4),
    "gfx950": dict(BR=64, BC=128, workers=4),
    "apple": dict(BR=32, BC=64, stages=2, workers=4),
}


@tl.kernel(configs=CONFIGS)
def softmax_fwd(Y, X, *, BR, BC):
    br = tl.grid(tl.cdiv(X.rows, BR))
    tl.check_eq(Y.rows, X.rows)
    tl.check_eq(Y.cols, X.cols)
    xs = tl.shared(X.dtype, BR, BC, name="xs")
    x = tl.regs(tl.f32, BR, BC, name="x")
    m = tl.rvec(tl.f32, BR, name="m")          # running row max (log2 domain)
    m_new = tl.rvec(tl.f32, BR, name="m_new")
    corr = tl.rvec(tl.f32, BR, name="corr")
    l = tl.rvec(tl.f32, BR, name="l")          # running sum of exp2(x - m)  # noqa: E741
    n = tl.cdiv(X.cols, BC)

    tl.fill(m, -math.inf)
    tl.zero(l)
    for c in tl.pipeline(n, name="c"):
        tl.load(xs, X, (br, c))
        tl.load(x, xs)
        tl.mul(x, x, LOG2E)
        tl.bounds_mask(x, x, BR, X.cols - c * BC, -math.inf)  # columns past the row's end weigh nothing
        tl.row_max(m_new, x, m)
        tl.sub(corr, m, m_new)
        tl.exp2(corr, corr)
        tl.sub_row(x, x, m_new)
        tl.exp2(x, x)
        tl.mul(l, l, corr)
        tl.row_sum(l, x, l)
        tl.copy(m, m_new)
    for c in tl.range(n, name="c"):
        tl.load(x, X, (br, c))  # a second read of the block's rows: from L2 while the grid is small enough
        tl.mul(x, x, LOG2E)
        tl.sub_row(x, x, m)
        tl.exp2(x, x)
        tl.div_row(x, x, l)
        tl.store(Y, x, (br, c))


def softmax(x, *, backend=None, **config):
    """softmax over the last axis of a numpy array (bf16, f16 or f32), returned in x's dtype."""
    if x.ndim < 1 or x.size == 0:
        raise ValueError(f"softmax needs a non-empty array, got shape {x.shape}")
    rows = x.reshape(-1, x.shape[-1])
    y = np.full(rows.shape, np.nan, dtype=x.dtype)
    softmax_fwd(y, np.ascontiguousarray(rows), backend=backend, **config)
    return y.reshape(x.shape)


def bytes_moved(rows: int, cols: int, itemsize: int = 2) -> float:
    """The minimum traffic: read X once, write Y once (the second read is counted as free, as from L2)."""
    return 2.0 * rows * cols * itemsize
