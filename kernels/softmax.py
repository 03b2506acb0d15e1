"""Row softmax: Y = softmax(X) along the last dim, for rows of any length.

Rows that fit on chip (C a multiple of 16, up to ROW_MAX) take one pass, `softmax_rows`: X is read once and
Y written once, the least traffic there is. The row is viewed as a (C/K, K) tile, so that its elements
spread over every worker of the block (a register tile splits its rows over the workers). Each tile row
takes its own max m and sum s of 2^(x - m), within its worker; `tl.logsumexp2` then merges the tile rows'
(m, s) pairs into the row's log-sum-exp2 in one exchange across the workers, and each element becomes
2^(x - m) * 2^(m - lse).

Other rows take two passes over column blocks, `softmax_fwd`: the first keeps a running max and a running
sum rescaled as the max grows (the online softmax of attention), the second reads the row again and
normalizes. Rows and columns need not be multiples of the block. Where the rows are too few to fill the GPU (a
decode step's softmax over a vocabulary: 16 rows of 128256, one block), each row's columns are split SPLIT ways
over as many blocks (`split_columns`, which the norms' two passes take too): softmax_fwd keeps each part's
(max, sum) pair per row, `softmax_apply` merges a row's pairs and normalizes its part.
"""
from __future__ import annotations

import math

import numpy as np

import tiles as tl
from tiles.tune.model import model_device

LOG2E = 1.4426950408889634
F32_LOWEST = float(np.finfo(np.float32).min)

# BR rows per block (split over the workers), BC columns per step of the loop over a row.
CONFIGS = {
    "default": dict(BR=32, BC=64),
    "sm_80": dict(BR=64, BC=128, stages=2, workers=4),
    "sm_90a": dict(BR=64, BC=128, stages=2, workers=4, schedule="warp"),
    "gfx942": dict(BR=64, BC=128, workers=4),
    "gfx950": dict(BR=64, BC=128, workers=4),
    "apple": dict(BR=32, BC=64, stages=2, workers=4),
}


# Search spaces (tiles tune softmax, docs/tuning.md). Two passes: rows per block, the column step, workers.
TUNE = {
    "default": dict(BR=[16, 32], BC=[32, 64]),
    "sm_80": dict(BR=[16, 32, 64], BC=[64, 128, 256], workers=[4, 8]),
    "sm_90a": dict(BR=[16, 32, 64], BC=[64, 128, 256], workers=[4, 8]),
    "gfx942": dict(BR=[16, 32, 64], BC=[64, 128, 256], workers=[1, 2, 4, 8]),
    "gfx950": dict(BR=[16, 32, 64], BC=[64, 128, 256], workers=[1, 2, 4, 8]),
    "apple": dict(BR=[16, 32], BC=[32, 64, 128]),
}
# the two-pass kernels (softmax's, the norms') also split each row's columns over blocks (split_columns)
SPLIT_TUNE = {t: {**space, "SPLIT": [1, 2, 8, 32, 128, 512]} for t, space in TUNE.items()}


def row_bucket(Y, X, *rest):
    """Rows in powers of two, the row's length exactly (a (R, C) array or its (R, C/K, K) view)."""
    rows, cols = (X.shape[0], X.shape[1] * X.shape[2]) if len(X.shape) == 3 else X.shape
    return tl.tune.pow2(rows), cols


# Past one block a unit, a split goes on up to BLOCKS_PER_UNIT blocks a unit while each part keeps LONG_PART column
# blocks: the passes wait on their loads with little else to run (the apply pass has no pipeline), and one block of
# 4 warps an SM left them latency-bound. H100, 12-07: softmax 4096x50257 (128 blocks, 6% occupancy under ncu) 2.82
# ms at SPLIT 2 against 2.28 at 8 (8 parts of 49 column blocks), 4096x50256 624 against 566 us; but 64x151936 at
# 256 parts of ~5 column blocks 51.8 us against 47.3 at 128 (its merge reads twice the parts).
BLOCKS_PER_UNIT, LONG_PART = 4, 32


def split_columns(configs: dict, x: int = 1):
    """The heuristic of a two-pass row kernel (its `configs`, X its argument `x`) for rows too few to fill the GPU:
    each row's columns split over up to as many blocks as the target's usual device has units, each part 4
    column blocks at least, and on up to BLOCKS_PER_UNIT blocks a unit while each part keeps LONG_PART; where the
    rows do not fill the configured row block, blocks of 16 rows and one worker (every target takes that tile).
    Only rows of 64 column blocks or more: a split costs a second launch (~3 us), which a block's walk down a
    shorter row (a one-warp block streams ~8 KB a block of 16 x 128 columns, a few tens of GB/s) does not repay.
    softmax 16 x 128256 on sm_90a: 128 parts of 8 column blocks, 128 one-warp blocks on 132 SMs, where one block of
    64 rows read all of it (29.1 us on the H100, 12-07 14:17); 4096x50257: 8 parts."""
    def heuristic(target, *args, **keywords):
        if target is None or target not in configs:
            return {}
        cfg, units, shape = configs[target], model_device(target).units, args[x].shape
        rows, steps = shape[0], -(-shape[1] // cfg["BC"])
        if steps < 64:
            return {}
        small = dict(BR=16, workers=1) if rows < cfg["BR"] else {}
        blocks = -(-rows // small.get("BR", cfg["BR"]))
        split = 1
        while steps >= 4 * split * 2 and (blocks * split * 2 <= units or (
                blocks * split * 2 <= BLOCKS_PER_UNIT * units and steps >= LONG_PART * split * 2)):
            split *= 2
        return dict(SPLIT=split, **small) if split > 1 else {}
    return heuristic


def split_fits(cfg, X) -> bool:
    """A two-pass row kernel's candidate: row blocks no taller than twice the rows, no part without columns."""
    return cfg["BR"] <= max(16, 2 * tl.tune.pow2(X.shape[0])) and cfg["SPLIT"] <= -(-X.shape[1] // cfg["BC"])


def split_plan(cfg, Y, X, M=None, L=None, *, target=None):
    """softmax_fwd with each row's columns split SPLIT ways: softmax_fwd writes each part's running max (log2
    domain) and sum to a (SPLIT, rows) pair of f32 temporaries, softmax_apply merges them and normalizes. None: one
    launch as called."""
    if cfg["SPLIT"] == 1 or M is not None:
        return None
    m, l = (tl.tune.Shaped((cfg["SPLIT"], X.shape[0]), tl.f32) for _ in range(2))
    return [(softmax_fwd, [Y, X, m, l], {}), (softmax_apply, [Y, X, m, l], alike(cfg))]


def alike(cfg) -> dict:
    """A split plan's second launch's configuration: it tiles as the first."""
    return {k: cfg[k] for k in ("BR", "BC", "SPLIT", "workers") if k in cfg}


def _part(X, BC, SPLIT, part):
    """The first column block of this block's part of each row, and how many it takes (0 past the row's end)."""
    steps = tl.cdiv(X.cols, BC)
    per = tl.cdiv(steps, SPLIT)
    return part * per, tl.minimum(per, tl.maximum(steps - part * per, 0))


def split_walk(name, X, BR, BC, SPLIT, parts):
    """A two-pass row kernel's grid and its first pass's walk: (row block, part, first column block, column blocks).
    SPLIT > 1, split_plan's first launch: a grid dim of parts, and `parts` given, the plan's (SPLIT, rows) f32
    temporaries of each part's statistics; SPLIT 1: one part, and none of them."""
    if any(v is None for v in parts) != (SPLIT == 1) or any(v is None for v in parts) != all(v is None for v in parts):
        raise tl.TileError(f"{name}: SPLIT={SPLIT} takes the parts' statistics from split_plan, all or none: launch "
                           f"{name} itself, not its trace")
    if SPLIT == 1:
        return tl.grid(tl.cdiv(X.rows, BR)), None, 0, tl.cdiv(X.cols, BC)
    br, part = tl.grid(tl.cdiv(X.rows, BR), SPLIT)
    for v in parts:
        tl.check_eq(v.rows, SPLIT)
        tl.check_eq(v.cols, X.rows)
    return (br, part, *_part(X, BC, SPLIT, part))


def part_chunk(SPLIT: int) -> int:
    """How many parts' statistics a merge loads at once: the largest power of two up to 8 that divides SPLIT. Their
    loads are then in flight together, one round trip to L2 a chunk where each part took one (softmax 16x128256,
    128 parts: 49.5 -> 32.7 us on the H100, 12-07)."""
    g = 1
    while g < 8 and SPLIT % (2 * g) == 0:
        g *= 2
    return g


def load_parts(vecs, V, q, br):
    """Chunk q of a merge: vecs[g] <- part q * len(vecs) + g of row block br's statistics in V (SPLIT, rows)."""
    for g, v in enumerate(vecs):
        tl.load(v, V, (q * len(vecs) + g, br))


def _running(x, m, m_new, corr, l):
    """One column block x (scaled to log2, masked) into the running max m and the running sum l rescaled to it."""
    tl.row_max(m_new, x, m)
    tl.sub(corr, m, m_new)
    tl.exp2(corr, corr)
    tl.sub_row(x, x, m_new)
    tl.exp2(x, x)
    tl.mul(l, l, corr)
    tl.row_sum(l, x, l)
    tl.copy(m, m_new)


@tl.kernel(configs=CONFIGS)
def softmax_apply(Y, X, M, L, *, BR, BC, SPLIT):
    """Y's part p of each row: 2^(x log2(e) - lse), lse the log2 of the row's sum merged from its SPLIT pairs, a
    chunk of parts at a time (part_chunk): the running max m moves to the chunk's largest, the running sum is
    rescaled to it once, and each part's sum is added scaled by 2^(its max - m). One round trip to L2 a chunk: the
    max over every part first and the sums after (12-07 08:35) made two (softmax 1x128256, 128 parts in chunks of 8:
    32 round trips, 45.4 us on the H100 at 11:25)."""
    br, part, c0, n = split_walk("softmax_apply", X, BR, BC, SPLIT, (M, L))
    tl.check_eq(Y.rows, X.rows)
    tl.check_eq(Y.cols, X.cols)
    x = tl.regs(tl.f32, BR, BC, name="x")
    m, l = tl.rvec(tl.f32, BR, name="m"), tl.rvec(tl.f32, BR, name="l")
    m_new, corr = tl.rvec(tl.f32, BR, name="m_new"), tl.rvec(tl.f32, BR, name="corr")
    chunk = part_chunk(SPLIT)
    mp = [tl.rvec(tl.f32, BR, name=f"mp{g}") for g in range(chunk)]
    lp = [tl.rvec(tl.f32, BR, name=f"lp{g}") for g in range(chunk)]
    tl.fill(m, F32_LOWEST)
    tl.zero(l)
    for q in tl.range(SPLIT // chunk, name="q"):
        load_parts(mp, M, q, br)
        load_parts(lp, L, q, br)
        tl.copy(m_new, m)
        for v in mp:
            tl.max(m_new, m_new, v)
        tl.sub(corr, m, m_new)
        tl.exp2(corr, corr)
        tl.mul(l, l, corr)
        for a, b in zip(mp, lp):
            tl.sub(a, a, m_new)
            tl.exp2(a, a)
            tl.mul(b, b, a)
            tl.add(l, l, b)
        tl.copy(m, m_new)
    for c in tl.range(n, name="c"):
        tl.load(x, X, (br, c0 + c))
        tl.mul(x, x, LOG2E)
        tl.sub_row(x, x, m)
        tl.exp2(x, x)
        tl.div_row(x, x, l)
        tl.store(Y, x, (br, c0 + c))


@tl.kernel(configs=CONFIGS, tune=SPLIT_TUNE, tune_key=row_bucket, plan=split_plan,
           heuristic=split_columns(CONFIGS), tune_where=lambda cfg, Y, X, *rest: split_fits(cfg, X))
def softmax_fwd(Y, X, M=None, L=None, *, BR, BC, SPLIT=1):
    """Y = softmax(X) by rows, two passes over column blocks. With SPLIT > 1 the first launch of split_plan's two:
    block (br, part) takes part `part` of its rows' columns and writes the part's max (log2 domain, at least
    F32_LOWEST) and its sum of 2^(x - max) to M and L (SPLIT, rows); softmax_apply writes Y."""
    br, part, c0, n = split_walk("softmax_fwd", X, BR, BC, SPLIT, (M, L))
    tl.check_eq(Y.rows, X.rows)   # both launches of a split check Y, so that a bad call stops before the first
    tl.check_eq(Y.cols, X.cols)
    xs = tl.shared(X.dtype, BR, BC, name="xs")
    x = tl.regs(tl.f32, BR, BC, name="x")
    m = tl.rvec(tl.f32, BR, name="m")          # running row max (log2 domain)
    m_new = tl.rvec(tl.f32, BR, name="m_new")
    corr = tl.rvec(tl.f32, BR, name="corr")
    l = tl.rvec(tl.f32, BR, name="l")          # running sum of exp2(x - m)  # noqa: E741

    # the running max starts at the lowest finite value: a column block of only -inf then rescales the sum by
    # 2^0, where from -inf it took 2^(-inf - -inf), NaN, and every element after it was NaN (a row's first 128
    # columns masked); a part with no columns, or only -inf ones, merges as (lowest, 0) and so weighs nothing
    tl.fill(m, F32_LOWEST)
    tl.zero(l)
    for c in tl.pipeline(n, name="c"):
        cc = c if SPLIT == 1 else c0 + c
        tl.load(xs, X, (br, cc))
        tl.load(x, xs)
        tl.mul(x, x, LOG2E)
        tl.bounds_mask(x, x, BR, X.cols - cc * BC, -math.inf)  # columns past the row's end weigh nothing
        _running(x, m, m_new, corr, l)
    if SPLIT > 1:
        tl.store(M, m, (part, br))
        tl.store(L, l, (part, br))
        return
    for c in tl.range(n, name="c"):
        tl.load(x, X, (br, c))  # a second read of the block's rows: from L2 while the grid is small enough
        tl.mul(x, x, LOG2E)
        tl.sub_row(x, x, m)
        tl.exp2(x, x)
        tl.div_row(x, x, l)
        tl.store(Y, x, (br, c))


# One pass: a block normalizes RPB rows in turn, each one TR x K tile (TR a multiple of 64: whole 16-row
# slices for up to 4 workers on every backend; CUDA takes fewer warps, or more, as TR's slices allow, up to
# `workers`, which sm_90a counts in warpgroups). Where `staged`, rows go global -> shared -> registers and
# back through shared, so that global memory sees whole 16-byte chunks per lane (cp.async or direct-to-LDS
# loads, 16-byte stores) and the loads of the next rows run ahead of the compute. sm_90a keeps the warp
# schedule: a TMA producer warpgroup would hold the SM for one block of few warps; and without wgmma (there is
# no matrix product here) its block barriers need no async-proxy fence. Up to 16 warps: 32 (workers=8) ran
# softmax 4096x32768 in 209 us against 162 us on the H200 (2026-11-30, docs/benchmarks.md). sm_90a's rows go
# straight to registers since their runs are whole (a bounds mask leaves them in runs, 16-byte stores): H100, 12-07, one
# process, staged / unstaged, softmax 16x4096 5.1 / 4.9 us, 4096x4096 27.5 / 27.0, 16384x4096 94.5 / 93.9, 4096x8192
# 53.8 / 51.6, 4096x14336 96.3 / 94.6; layernorm (which takes these) 6.1 / 5.4, 53.7 / 52.6, 186.7 / 185.3,
# 101.5 / 100.2, 179.2 / 171.2. rmsnorm stages past 8192 columns (its staged_past_8192).
ROW_CONFIGS = {
    "default": dict(staged=False),
    "sm_80": dict(staged=True, stages=2, workers=16),
    "sm_90a": dict(staged=False, stages=2, workers=4, schedule="warp", wgmma=False),
    "gfx942": dict(staged=False, workers=4),
    "gfx950": dict(staged=True, stages=2, workers=4),
    "apple": dict(staged=False, workers=4),
}


# One pass: rows per block (the plan's is the default), workers, and whether rows go through shared memory.
RPB_CHOICES = (1, 2, 4, 8, 16, 32)
ROW_TUNE = {
    "default": dict(RPB=RPB_CHOICES),
    "sm_80": dict(RPB=RPB_CHOICES, workers=[4, 8, 16], staged=[False, True]),
    "sm_90a": dict(RPB=RPB_CHOICES, workers=[2, 4, 8], staged=[False, True], stages=[2, 3], blocks_per_sm=[1, 2]),
    "gfx942": dict(RPB=RPB_CHOICES, workers=[4, 8], staged=[False, True]),
    "gfx950": dict(RPB=RPB_CHOICES, workers=[4, 8], staged=[False, True]),
    "apple": dict(RPB=RPB_CHOICES, workers=[2, 4]),
}


def rows_fit(cfg, Y, X, *rest):
    """No more rows per block than a 128th of the rows (a grid of at least ~128 blocks), beyond one."""
    return cfg["RPB"] <= max(1, X.shape[0] // 128)


def planned_rpb(plan):
    """tune_defaults of a one-pass row kernel: the rows per block its plan gives for the arguments' shape."""
    def defaults(Y, X, *rest):
        p = plan(X.shape[0], X.shape[1] * X.shape[2])
        return {"RPB": p["RPB"]} if p else {}
    return defaults


@tl.kernel(configs=ROW_CONFIGS, tune=ROW_TUNE, tune_key=row_bucket, tune_where=rows_fit,
           tune_defaults=planned_rpb(lambda r, c: row_plan(r, c)))
def softmax_rows(Y, X, *, TR, K, RPB, staged):
    """X, Y: (R, C/K, K) views of the (R, C) rows, C/K <= TR; tile rows past C/K read as 0 and are masked."""
    blk = tl.grid(tl.cdiv(X.depth, RPB))
    tl.check_eq(Y.depth, X.depth)
    tl.check_eq(Y.rows, X.rows)
    tl.check_eq(tl.minimum(X.rows, TR), X.rows)
    tl.check_eq(X.cols, K)
    tl.check_eq(Y.cols, K)
    xs = tl.shared(X.dtype, TR, K, name="xs") if staged else None
    ys = tl.shared(Y.dtype, TR, K, name="ys") if staged else None
    x = tl.regs(tl.f32, TR, K, name="x")
    m = tl.rvec(tl.f32, TR, name="m")       # each tile row's max (log2 domain), then its scale 2^(m - lse)
    s = tl.rvec(tl.f32, TR, name="s")       # each tile row's sum of 2^(x - m)
    lse = tl.rvec(tl.f32, TR, name="lse")   # the whole row's log2 of the sum of 2^x, in every element

    for i in tl.pipeline(RPB, name="i"):
        row = tl.minimum(blk * RPB + i, X.depth - 1)   # the last block repeats the last row past the end
        tl.load(x, X, (row, 0, 0), via=xs)
        tl.bounds_mask(x, x, X.rows, K, -math.inf)   # the tile rows past the row's end weigh nothing
        tl.row_max(m, x)
        tl.mul(m, m, LOG2E)
        tl.max(m, m, F32_LOWEST)                     # a tile row of -inf alone: 2^(x - m) is then 0, not NaN
        tl.mul(x, x, LOG2E)                          # with the next: one fused multiply-add per element
        tl.sub_row(x, x, m)
        tl.exp2(x, x)
        tl.row_sum(s, x)
        tl.logsumexp2(lse, m, s)                     # the one exchange across the workers
        tl.sub(m, m, lse)
        tl.exp2(m, m)
        tl.mul_row(x, x, m)
        tl.store(Y, x, (row, 0, 0), via=ys)


ROW_MAX = 32768   # the longest row held on chip: 128 f32 registers per lane at 16 warps


def row_plan(rows: int, cols: int, cols_per_rpb: int = 2048, one_block_rpb: int = 0) -> dict | None:
    """The constants of `softmax_rows` for (rows, cols), or None where the two-pass kernel applies: K the
    widest of 64, 32, 16 that makes C/K a multiple of 64 (else 16), TR = C/K rounded up to one. one_block_rpb:
    the rows per block past 8192 columns of a kernel that fits one block an SM there (0: as below)."""
    if cols % 16 or cols > ROW_MAX:
        return None
    k = next((k for k in (64, 32) if cols % (64 * k) == 0), 16)
    # Rows per block, one more per `cols_per_rpb` columns: long rows leave room for one block per SM, whose
    # first load is exposed once per RPB rows (up to 16 per block); short rows have several blocks per SM hide
    # it, and small blocks keep the last wave of the grid short and the resident blocks out of step. Measured
    # on the H200 (2026-11-30): softmax 16384x4096 took 71.9 / 74.9 / 79.2 / 85.3 us at RPB 2 / 4 / 8 / 16.
    rpb = min(16, cols // cols_per_rpb, rows // 256)
    if one_block_rpb and cols > 8192:
        # One block an SM: the grid should make whole waves. H200 (2026-12-04, 4096x14336): rmsnorm 78.3 / 68.6 /
        # 67.5 us at RPB 7 / 16 / 32 (586 blocks, 4.4 waves of 132; 256, 1.9; 128, 0.97), layernorm 157.3 / 132.0
        # / 135.2 at 14 / 16 / 32. softmax_rows holds two blocks an SM there: 76.6 us at 7, 88.2 at 32 (half the
        # SM's slots idle), and keeps the rule above.
        rpb = min(one_block_rpb, rows // 256)
    if cols > ROW_MAX // 2:
        # A block's stages fill an SM's shared memory, so the grid should not outnumber the SMs: up to 32 rows a
        # block, 4096 rows in 128 blocks, one wave on the H200's 132 SMs instead of two of 256. On the H200
        # (2026-11-30, 4096x32768) a 3-stage variant took 148.3 us at RPB 32 against 153.8 at 16; this kernel
        # 148.6 against 148.7, the same (docs/benchmarks.md).
        rpb = min(32, rows // 128)
    return dict(TR=-(-cols // k // 64) * 64, K=k, RPB=max(1, rpb))


def softmax(x, *, backend=None, **config):
    """softmax over the last axis of a numpy array (bf16, f16 or f32), returned in x's dtype."""
    if x.ndim < 1 or x.size == 0:
        raise ValueError(f"softmax needs a non-empty array, got shape {x.shape}")
    rows = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    y = np.full(rows.shape, np.nan, dtype=x.dtype)
    plan = row_plan(*rows.shape)
    if plan is None:
        softmax_fwd(y, rows, backend=backend, **config)
    else:
        view = (rows.shape[0], rows.shape[1] // plan["K"], plan["K"])
        softmax_rows(y.reshape(view), rows.reshape(view), backend=backend, **{**plan, **config})
    return y.reshape(x.shape)


def bytes_moved(rows: int, cols: int, itemsize: int = 2) -> float:
    """The least traffic: read X once, write Y once (what the one-pass kernel moves; the two-pass one also
    reads X a second time, from L2 at best)."""
    return 2.0 * rows * cols * itemsize
