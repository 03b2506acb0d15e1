"""The reference interpreter: what every op means, in numpy.

Tiles hold float64 arrays whose values are already rounded to the tile's dtype; every op rounds its
result to its destination's dtype, the way the hardware rounds when it writes a register. Blocks run one
after another; tiles start as NaN so that reading what nothing wrote shows up in the output.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from . import dtypes, ir, philox
from .types import GL, RT, RV, ST, SV

_erf = np.frompyfunc(math.erf, 1, 1)


def _sigmoid(z):
    """1 / (1 + e^-z) as e^-log(1 + e^-z): no overflow, and the tail kept (0.5 + 0.5 tanh(z/2) is 0 below -37)."""
    return np.exp(-np.logaddexp(0.0, -z))


def _times_sigmoid(x, z):
    """x sigmoid(z): silu (z = x) and gelu's tanh form, 0.5 x (1 + tanh u) = x sigmoid(2u); 0 where x = -inf, their
    limit, not -inf * 0."""
    return np.where(np.isneginf(x), -0.0, x) * _sigmoid(z)


_UNARY = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "abs": np.abs, "neg": np.negative,
          "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "tanh": np.tanh, "sigmoid": _sigmoid,
          "silu": lambda x: _times_sigmoid(x, x),
          "gelu": lambda x: _times_sigmoid(x, math.sqrt(8 / math.pi) * (x + 0.044715 * x**3)),
          "erf": lambda x: _erf(x).astype(np.float64),
          "relu": lambda x: np.where(x < 0, 0.0, x), "sin": np.sin, "cos": np.cos}
_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
           "max": np.maximum, "min": np.minimum, "pow": np.power,
           "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
           "ne": np.not_equal}   # comparisons: booleans, which put() stores as 1.0 and 0.0
_REDUCE = {"max": np.max, "min": np.min, "sum": np.sum}
_COMBINE = {"max": np.maximum, "min": np.minimum, "sum": np.add}


def view4(a: np.ndarray) -> np.ndarray:
    """The 4-D view (batch, depth, rows, cols) of an array of rank 1 to 4; writes go through to `a`."""
    return a.reshape((1,) * (4 - a.ndim) + a.shape)


def bind(k: ir.Kernel, args) -> dict:
    """The scalar environment of a launch: argument extents and scalar values."""
    env = {}
    for p, a in zip(k.params, args):
        if isinstance(p, GL):
            for ax, n in enumerate((1,) * (4 - len(a.shape)) + tuple(a.shape)):
                env[("dim", p.name, ax)] = int(n)
        else:
            env[("arg", p.name)] = float(np.float32(a)) if p.dtype == dtypes.f32 else int(a)
    return env


def run(k: ir.Kernel, args) -> None:
    """Execute the kernel over its whole grid; numpy arrays in args are updated in place."""
    env = bind(k, args)
    globals_ = {p: view4(a) for p, a in zip(k.params, args) if isinstance(p, GL)}
    sizes = [int(ir.evaluate(g, env)) for g in k.grid]
    for block in itertools.product(*(range(n) for n in sizes)):
        benv = dict(env)
        benv.update({("block", i): b for i, b in enumerate(block)})
        _Block(k, globals_, benv).run(k.body)


class _Block:
    def __init__(self, k, globals_, env):
        self.g, self.env = globals_, env
        self.t = {t: np.full(t.shape, np.nan) for t in k.tiles}

    def val(self, x):
        if isinstance(x, ir.Expr):
            return ir.evaluate(x, self.env)
        if isinstance(x, GL):
            raise TypeError("globals are not values")
        return self.t[x]

    def put(self, dst, value):
        self.t[dst] = dst.dtype.round(np.broadcast_to(value, dst.shape)).astype(np.float64)

    def run(self, stmts):
        for s in stmts:
            if isinstance(s, ir.Loop):
                for i in range(int(ir.evaluate(s.count, self.env))):
                    self.env[ir.key(s.var)] = i
                    self.run(s.body)
            else:
                getattr(self, "op_" + s.name, self.generic)(s)

    # -------------------------------------------------------- memory

    def region(self, g: GL, tile, idx):
        """Index expressions -> (b, d, row slice, col slice) of the global, clipped, the tile's valid part, and
        whether any of it lies inside (past the last batch or depth nothing does: loads read zeros, stores skip)."""
        idx = [int(self.val(i)) for i in idx]
        idx = [0] * (4 - len(idx)) + idx
        shape = self.g[g].shape
        b, d, r, c = idx
        inside = 0 <= b < shape[0] and 0 <= d < shape[1]
        if isinstance(tile, (RV, SV)):
            c0 = c * tile.length
            n = max(0, min(tile.length, shape[3] - c0))
            return (b, d, r, slice(c0, c0 + n)), (slice(0, n),), inside and 0 <= r < shape[2]
        r0, c0 = r * tile.rows, c * tile.cols
        nr, nc = max(0, min(tile.rows, shape[2] - r0)), max(0, min(tile.cols, shape[3] - c0))
        return (b, d, slice(r0, r0 + nr), slice(c0, c0 + nc)), (slice(0, nr), slice(0, nc)), inside

    def op_load(self, op):
        dst, src = op.dst, op.srcs[0]
        if isinstance(src, GL):
            gsel, tsel, ok = self.region(src, dst, op.attrs["idx"])
            out = np.zeros(dst.shape)
            if ok:
                out[tsel] = self.g[src][gsel].astype(np.float64)
            self.put(dst, out)
        else:
            self.put(dst, self.t[src])

    def op_store(self, op):
        dst, src = op.dst, op.srcs[0]
        if isinstance(dst, GL):
            gsel, tsel, ok = self.region(dst, src, op.attrs["idx"])
            if ok:
                self.g[dst][gsel] = dst.dtype.round(self.t[src][tsel]).astype(dst.dtype.np)
        else:
            self.put(dst, self.t[src])

    def op_atomic_add(self, op):
        gsel, tsel, ok = self.region(op.dst, op.srcs[0], op.attrs["idx"])
        if ok:
            g = self.g[op.dst]
            g[gsel] = (g[gsel].astype(np.float64) + self.t[op.srcs[0]][tsel]).astype(np.float32)

    def op_store_sum(self, op):
        """The block's part to its slice; the last of the tile's parts to arrive adds them in part order."""
        src, parts, arrivals, part = op.srcs
        count, idx = op.attrs["count"], [int(self.val(i)) for i in op.attrs["idx"]]
        b, d, r, c = [0] * (4 - len(idx)) + idx

        def at(*ix):
            return tuple(ir.as_expr(i) for i in ix)
        mine = at(b, d * count + int(self.val(part)), r, c)
        gsel, tsel, ok = self.region(parts, src, mine)
        rows, cols = self.g[op.dst].shape[2:]
        if not ok or r * src.rows >= rows or c * src.cols >= cols:   # no tile of dst: nothing to count
            return
        self.g[parts][gsel] = self.t[src][tsel].astype(np.float32)
        counter = self.g[arrivals][b, d, r, c:c + 1]
        counter += 1
        if counter[0] < count:
            return
        counter[0] = 0
        slices = [self.g[parts][self.region(parts, src, at(b, d * count + p, r, c))[0]] for p in range(count)]
        total = slices[0].copy()
        for x in slices[1:]:
            total += x   # in f32, in part order, as the devices add
        gsel, _, _ = self.region(op.dst, src, at(b, d, r, c))
        self.g[op.dst][gsel] = op.dst.dtype.round(total).astype(op.dst.dtype.np)

    # -------------------------------------------------------- compute

    def op_mma(self, op):
        a, b, c = (self.t[x] for x in op.srcs)
        a = a.T if op.attrs["trans_a"] else a
        b = b.T if op.attrs["trans_b"] else b
        self.put(op.dst, a @ b + c)

    def op_zero(self, op):
        self.put(op.dst, 0.0)

    def op_fill(self, op):
        self.put(op.dst, self.val(op.srcs[0]))

    def op_copy(self, op):
        self.put(op.dst, self.t[op.srcs[0]])

    def op_swap_pairs(self, op):
        src = self.t[op.srcs[0]]
        out = np.empty_like(src)
        out[:, 0::2], out[:, 1::2] = src[:, 1::2], src[:, 0::2]
        self.put(op.dst, out)

    def op_causal_mask(self, op):
        src, row0, col0, fill = (self.val(x) for x in op.srcs)
        i, j = np.indices(op.dst.shape)
        self.put(op.dst, np.where(col0 + j <= row0 + i, src, fill))

    def op_bounds_mask(self, op):
        src, rows, cols, fill = (self.val(x) for x in op.srcs)
        i, j = np.indices(op.dst.shape)
        self.put(op.dst, np.where((i < rows) & (j < cols), src, fill))

    def op_dropout(self, op):
        src, p, seed, offset, row0, col0 = (self.val(x) for x in op.srcs)
        i, j = np.indices(op.dst.shape)
        keep = philox.keep_mask(int(seed), int(offset), row0 + i, col0 + j, p)
        scale = np.float32(1) / (np.float32(1) - np.float32(p))  # in float32, as the devices compute it
        self.put(op.dst, np.where(keep, src * np.float64(scale), 0.0))

    def op_logsumexp2(self, op):
        """log2(sum_j s_j 2^m_j), with the backends' rule that a pair whose sum is not positive is empty: it cannot
        pull the max up. A max taken over every m would make the pairs that do count underflow against an empty
        pair's larger m (by 1075 or more: -inf where the sum is finite; fuzz seed 20261204)."""
        m, s = (self.t[x] for x in op.srcs)
        live = (s > 0) & (m != -np.inf)
        if not live.any():   # every pair empty: -inf, or NaN where a negative sum makes the log undefined
            self.put(op.dst, -np.inf if not (s < 0).any() else np.nan)
            return
        top = np.max(m[live])
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):   # the empty pairs' terms, dropped
            self.put(op.dst, top + np.log2(np.sum(np.where(live, s * np.exp2(m - top), 0.0))))

    def op_where(self, op):
        mask, a, b = (self.val(x) for x in op.srcs)
        self.put(op.dst, np.where(mask != 0, a, b))

    def generic(self, op):
        name = op.name
        with np.errstate(all="ignore"):
            if name in _UNARY:
                self.put(op.dst, _UNARY[name](self.t[op.srcs[0]]))
            elif name in _BINARY:
                self.put(op.dst, _BINARY[name](self.t[op.srcs[0]], self.val(op.srcs[1])))
            elif name.split("_")[0] in ir.REDUCE_OVER:
                src, acc = op.srcs
                over, how = name.split("_")
                r = _REDUCE[how](self.t[src], axis={"row": 1, "col": 0, "tile": None}[over])   # tile: put broadcasts
                if acc is not None:
                    r = _COMBINE[how](r, self.t[acc])
                self.put(op.dst, r)
            elif name.endswith(("_row", "_col")):
                src, vec = op.srcs
                v = self.t[vec]
                self.put(op.dst, _BINARY[name[:3]](self.t[src], v[:, None] if name.endswith("_row") else v[None, :]))
            else:
                raise NotImplementedError(f"reference interpreter: no rule for op {name}")
