"""Rotary position embedding of q and k, both conventions, cos and sin given as (N, D/2) inputs.

half-split (GPT-NeoX): pair i is (x[i], x[i + D/2]); interleaved (GPT-J): pair i is (x[2i], x[2i+1]).
Each pair rotates by its position's angle: (a, b) -> (a cos - b sin, b cos + a sin).

q (B, H, N, D) and k (B, H_kv, N, D) go through one launch: a block owns BR positions of one batch
entry, loads their cos and sin once and rotates its heads of q and of k with them: all of them, or with
HG > 1 one of HG groups of consecutive heads (more, shorter blocks: see `_grid`).

The IR has no strided load, so the interleaved kernel views each run of 32 elements (16 pairs) as one
tile row: tl.swap_pairs exchanges each pair's members in registers, and cos and sin reach both members of
their pair through a product with a 0/1 spread matrix (signed for sin), once per block. Those products have
one nonzero term per output, so they are exact.
"""
from __future__ import annotations

import numpy as np

import tiles as tl

PAIRS = 16  # interleaved: pairs per tile row (32 elements: one K step of every bf16 MMA, gfx950 included)

# Where `staged`, q and k go global -> shared -> registers and back through shared, so that global memory
# sees whole 16-byte chunks per lane, and the loads of the next heads run ahead of the compute (a pipelined
# loop over heads). sm_90a keeps the warp schedule: its blocks are small, many per SM; and mma.sync for the
# interleaved kernel's small products (wgmma=False), so that block barriers need no async-proxy fence.
# HG and stages on sm_90a: H200, 2026-11-30, B16 H32/8 N4096 D128, `tiles compare rotary --set` sweeps (% of the
# copy measured in the same call): interleaved HG 1 -> 2 (stages 2) 84.8 -> 90.4%, stages 3 91.5% (HG 4: 88.0%);
# half-split HG 1 -> 2 82.7 -> 84.6%, HG 4 and stages 3 86.0% (BR 32: 85.4-86.1%, within the runs' spread).
CONFIGS = {
    "default": dict(BR=32, staged=False),
    "sm_80": dict(BR=64, staged=True, stages=2, workers=4),
    "sm_90a": dict(BR=64, staged=True, stages=3, workers=1, schedule="warp", wgmma=False, HG=2),
    "gfx942": dict(BR=64, staged=False, workers=4),
    "gfx950": dict(BR=64, staged=True, stages=2, workers=4),
    "apple": dict(BR=32, staged=False, workers=4),
}
HALF_CONFIGS = {**CONFIGS, "sm_90a": {**CONFIGS["sm_90a"], "HG": 4}}

# The search space (tiles tune rotary): rows per block, staging and its depth, head groups, workers; bucketed by
# the positions and batch x heads in powers of two and the head dim exactly.
TUNE = {
    "default": dict(BR=[16, 32, 64]),
    "sm_80": dict(BR=[32, 64, 128], staged=[False, True], workers=[2, 4]),
    "sm_90a": dict(BR=[32, 64, 128], stages=[2, 3], workers=[1, 2], HG=[1, 2, 4]),
    "gfx942": dict(BR=[32, 64, 128], staged=[False, True], workers=[2, 4]),
    "gfx950": dict(BR=[32, 64, 128], staged=[False, True], workers=[2, 4]),
    "apple": dict(BR=[16, 32, 64], staged=[False, True]),
}


def bucket(QO, KO, Q, K, *rest):
    b, h, n, d = Q.shape
    return tl.tune.pow2(n), tl.tune.pow2(b * (h + K.shape[1])), d


def _grid(Q, BR, HG):
    """(position block, batch entry, head group or None): the block's place in the grid. With HG > 1 the
    heads are split over HG groups of blocks, so that a device whose resident blocks the grid fills unevenly
    (B16 N4096 at BR 64: 1024 blocks on the H200's 528 slots, 1.94 waves) idles less in the last wave."""
    br, b, *g = tl.grid(tl.cdiv(Q.rows, BR), Q.batch, *([HG] if HG > 1 else []))
    return br, b, (g[0] if g else None)


def _heads(X, g, HG):
    """(the loop over this block's heads of X, head index of its step h). A group past the last head (HG not
    dividing the heads) reads zeros and writes nothing: loads past a global's end read 0, stores skip."""
    if g is None:
        return tl.pipeline(X.depth, name="h"), lambda h: h
    per = tl.cdiv(X.depth, HG)
    return tl.pipeline(per, name="h"), lambda h: g * per + h


def _checks(QO, KO, Q, K, Cos, Sin):
    for out, x in ((QO, Q), (KO, K)):
        tl.check_eq(out.rows, x.rows)
        tl.check_eq(out.depth, x.depth)
        tl.check_eq(out.batch, x.batch)
    tl.check_eq(K.rows, Q.rows)
    tl.check_eq(K.batch, Q.batch)
    tl.check_eq(Sin.rows, Cos.rows)


class _Staging:
    """Global <-> register tiles of one shape, through shared tiles where `staged` (see CONFIGS)."""

    def __init__(self, staged, dtype, rows, cols, halves):
        self.ins = [tl.shared(dtype, rows, cols, name=f"xs{i}") for i in range(halves)] if staged else None
        self.out = tl.shared(dtype, rows, cols, name="outs") if staged else None

    def load(self, dst, src, idx, half=0):
        if self.ins:
            tl.load(self.ins[half], src, idx)
            tl.load(dst, self.ins[half])
        else:
            tl.load(dst, src, idx)

    def store(self, dst, src, idx):
        if self.out:
            tl.store(self.out, src)
            tl.store(dst, self.out, idx)
        else:
            tl.store(dst, src, idx)


@tl.kernel(configs=HALF_CONFIGS, tune=TUNE, tune_key=bucket)
def rotary_half(QO, KO, Q, K, Cos, Sin, *, BR, W, staged, HG=1):
    """Q, K: (B, H, N, 2W); Cos, Sin: (N, W)."""
    br, b, g = _grid(Q, BR, HG)
    _checks(QO, KO, Q, K, Cos, Sin)
    tl.check_eq(Q.cols, 2 * W)
    tl.check_eq(Cos.cols, W)
    tl.check_eq(Cos.rows, Q.rows)
    io = _Staging(staged, Q.dtype, BR, W, 2)
    c = tl.regs(tl.f32, BR, W, name="c")
    s = tl.regs(tl.f32, BR, W, name="s")
    x1 = tl.regs(tl.f32, BR, W, name="x1")
    x2 = tl.regs(tl.f32, BR, W, name="x2")
    o1 = tl.regs(tl.f32, BR, W, name="o1")
    o2 = tl.regs(tl.f32, BR, W, name="o2")
    tl.load(c, Cos, (br, 0))
    tl.load(s, Sin, (br, 0))
    for OUT, X in ((QO, Q), (KO, K)):
        loop, head = _heads(X, g, HG)
        for h in loop:
            h = head(h)
            io.load(x1, X, (b, h, br, 0), 0)   # first half of the head dim
            io.load(x2, X, (b, h, br, 1), 1)   # second half
            tl.mul(o1, x1, c)
            tl.mul(o2, x2, s)
            tl.sub(o1, o1, o2)                 # x1 cos - x2 sin
            tl.mul(o2, x2, c)
            tl.mul(x1, x1, s)
            tl.add(o2, o2, x1)                 # x2 cos + x1 sin
            io.store(OUT, o1, (b, h, br, 0))
            io.store(OUT, o2, (b, h, br, 1))


@tl.kernel(configs=CONFIGS, tune=TUNE, tune_key=bucket)
def rotary_interleaved(QO, KO, Q, K, Cos, Sin, Spread, SignedSpread, *, BR, staged, HG=1):
    """Q, K: (B, H, N*D/32, 32) views; Cos, Sin: (N*D/32, 16) views; Spread, SignedSpread: 32x32 (`_constants`)."""
    br, b, g = _grid(Q, BR, HG)
    _checks(QO, KO, Q, K, Cos, Sin)
    tl.check_eq(Q.cols, 2 * PAIRS)
    tl.check_eq(Cos.cols, PAIRS)
    tl.check_eq(Cos.rows, Q.rows)
    io = _Staging(staged, Q.dtype, BR, 2 * PAIRS, 1)
    spread = tl.shared(Q.dtype, 2 * PAIRS, 2 * PAIRS, name="spread")
    spread_signed = tl.shared(Q.dtype, 2 * PAIRS, 2 * PAIRS, name="spread_signed")
    table = tl.regs(Q.dtype, BR, 2 * PAIRS, name="table")  # cos or sin, one per pair (columns 16.. read as 0)
    c = tl.regs(tl.f32, BR, 2 * PAIRS, name="c")
    s = tl.regs(tl.f32, BR, 2 * PAIRS, name="s")
    xin = tl.regs(Q.dtype, BR, 2 * PAIRS, name="xin")
    x = tl.regs(tl.f32, BR, 2 * PAIRS, name="x")
    xs = tl.regs(tl.f32, BR, 2 * PAIRS, name="xs")
    tl.load(spread, Spread, (0, 0))
    tl.load(spread_signed, SignedSpread, (0, 0))
    tl.load(table, Cos, (br, 0))
    tl.zero(c)
    tl.mma_AB(c, table, spread, c)         # c[:, 2i] = c[:, 2i+1] = cos_i
    tl.load(table, Sin, (br, 0))
    tl.zero(s)
    tl.mma_AB(s, table, spread_signed, s)  # s[:, 2i] = -sin_i, s[:, 2i+1] = sin_i
    for OUT, X in ((QO, Q), (KO, K)):
        loop, head = _heads(X, g, HG)
        for h in loop:
            h = head(h)
            io.load(xin, X, (b, h, br, 0))
            tl.copy(x, xin)
            tl.swap_pairs(xs, x)            # xs[:, 2i] = x[:, 2i+1], xs[:, 2i+1] = x[:, 2i]
            tl.mul(x, x, c)
            tl.mul(xs, xs, s)
            tl.add(x, x, xs)
            io.store(OUT, x, (b, h, br, 0))


def _constants(dtype) -> tuple[np.ndarray, np.ndarray]:
    """The pair spread (v @ spread, v's first PAIRS columns used) and the same with the first member negated."""
    n = 2 * PAIRS
    spread, signed = np.zeros((n, n)), np.zeros((n, n))
    for i in range(PAIRS):
        spread[i, 2 * i] = spread[i, 2 * i + 1] = 1.0
        signed[i, 2 * i], signed[i, 2 * i + 1] = -1.0, 1.0
    return spread.astype(dtype), signed.astype(dtype)


def rotary(q, k, cos, sin, *, interleaved=False, backend=None, **config):
    """(q', k') for numpy q (B, H, N, D), k (B, H_kv, N, D), cos and sin (N, D/2), all bf16 or f16."""
    if q.ndim != 4 or k.ndim != 4 or q.shape[0] != k.shape[0] or q.shape[2:] != k.shape[2:]:
        raise ValueError(f"expected q (B, H, N, D) and k (B, H_kv, N, D), got {q.shape} and {k.shape}")
    bsz, _, n, d = q.shape
    if cos.shape != (n, d // 2) or sin.shape != cos.shape:
        raise ValueError(f"expected cos and sin of shape {(n, d // 2)}, got {cos.shape} and {sin.shape}")
    if len({q.dtype, k.dtype, cos.dtype, sin.dtype}) != 1 or tl.dtypes.of(q) not in (tl.bf16, tl.f16):
        raise ValueError(f"q, k, cos, sin must share one dtype, bf16 or f16; got "
                         f"{q.dtype}, {k.dtype}, {cos.dtype}, {sin.dtype}")
    unit = 2 * PAIRS if interleaved else 32  # half-split: each half a whole number of 16-wide base tiles
    if d % unit:
        raise ValueError(f"head dim {d} must be a multiple of {unit} for the "
                         f"{'interleaved' if interleaved else 'half-split'} convention")
    qo = np.full(q.shape, np.nan, dtype=q.dtype)
    ko = np.full(k.shape, np.nan, dtype=k.dtype)
    if interleaved:
        rows = n * d // (2 * PAIRS)
        views = [x.reshape(x.shape[0], x.shape[1], rows, 2 * PAIRS) for x in (qo, ko, q, k)]
        tables = [np.ascontiguousarray(t).reshape(rows, PAIRS) for t in (cos, sin)]
        rotary_interleaved(*views, *tables, *_constants(q.dtype), backend=backend, **config)
    else:
        rotary_half(qo, ko, q, k, np.ascontiguousarray(cos), np.ascontiguousarray(sin), backend=backend,
                    W=d // 2, **config)
    return qo, ko


def bytes_moved(b: int, h: int, h_kv: int, n: int, d: int, itemsize: int = 2) -> float:
    """The least traffic: read and write q and k once, read the cos and sin tables (N x D/2 each) once. (Each
    batch entry's blocks read the tables again, from L2 at best.)"""
    return (2.0 * b * (h + h_kv) * n * d + n * d) * itemsize


def tables(n: int, d: int, base: float = 10000.0) -> tuple[np.ndarray, np.ndarray]:
    """float64 cos and sin (N, D/2) of the usual rotary frequencies, for tests and benchmarks."""
    inv = base ** (-np.arange(0, d, 2) / d)
    ang = np.arange(n)[:, None] * inv[None, :]
    return np.cos(ang), np.sin(ang)
