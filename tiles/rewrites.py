"""Algebraic rewrites of a statement list that a backend's codegen applies (option `rewrites`, on by default where
the backend takes them: CUDA on sm_90a, all three; HIP, scaled_exp2): each gives the same values up to f32
rounding, with fewer instructions in a loop.

- `scaled_exp2`: `mul(t, t, c)` with c > 0 (ir.positive), then only -inf masks of t and row maxes of t, then
  `sub_row(t, t, m); exp2(t, t)`. A positive factor commutes with the masks' -inf fill and with max (rounding is
  monotone: max round(c x) = round(c max x)), so the masks and maxes run on the unscaled t, each max scaled once
  per row, and the multiply folds into the exponent's argument: exp2(fma(x, c, -m)), one FFMA per element where
  there were a multiply and a subtraction (attention's online softmax: 64 instructions a block per thread at
  BN = 128).
- `partial_sums`: a rows vector that a loop only scales (`mul(v, v, y)`, y a rows vector or a scalar) and
  accumulates row sums into (`row_sum(v, x, v)`), zero when the loop starts: each lane keeps the sum of its own
  columns through the loop, and the lanes of a row are added once after it (attention's running row sum: the
  4 shuffles and adds per block leave the softmax's chain). Scaling is linear, so scaling the partials scales
  their sum.
- `unit_factors`: `mul_row(t, t, y)` where y is a running max's correction, `exp2(sub(a, b))` with b a row max
  accumulated onto a (`row_max(b, x, a)`): y is exactly 1 in every row whose max held, which past the first few
  blocks of an online softmax is most rows. A warp whose factors are all 1 skips the multiply (`x * 1 == x`, so
  the values are the same whatever y is; the rule only picks where skipping is likely): attention's rescale of O,
  D floats a thread, every block.
"""
from __future__ import annotations

import math

from . import ir
from .ir import touches
from .types import RT, RV


def _neg_inf_mask(s, t) -> bool:
    fill = s.srcs[-1]
    return s.name in ("bounds_mask", "causal_mask") and s.dst is t and s.srcs[0] is t and \
        isinstance(fill, ir.Const) and fill.value == -math.inf


def scaled_exp2(body, checks) -> dict:
    """{id(op): (role, c)} for every op of a scaled_exp2 match in body (loops included, each list on its own):
    role "drop" (the multiply), "max" (a row max of t, scaled by c), "exp" (the sub_row, which becomes
    exp2(fma(x, c, -m))) or "done" (the exp2 it absorbs)."""
    out = {}
    for i, m in enumerate(body):
        if isinstance(m, ir.Loop):
            out.update(scaled_exp2(m.body, checks))
            continue
        t = m.dst
        if not (m.name == "mul" and isinstance(t, RT) and t.dtype.name == "f32" and m.srcs[0] is t
                and isinstance(m.srcs[1], ir.Expr) and ir.positive(m.srcs[1], checks)):
            continue
        c, roles = m.srcs[1], {id(m): "drop"}
        for s, after in zip(body[i + 1:], body[i + 2:] + [None]):
            if isinstance(s, ir.Loop):
                break
            if not touches(s, t) or _neg_inf_mask(s, t):
                continue
            if s.name == "row_max" and s.srcs[0] is t and s.dst is not t:
                roles[id(s)] = "max"
                continue
            if s.name == "sub_row" and s.dst is t and s.srcs[0] is t and isinstance(after, ir.Op) \
                    and after.name == "exp2" and after.dst is t and after.srcs[0] is t:
                roles.update({id(s): "exp", id(after): "done"})
                out.update({k: (r, c) for k, r in roles.items()})
            break
    return out


def partial_sums(body) -> dict:
    """{id(loop): [vectors]}: the rows vectors each loop of body (nested lists too) keeps as per-lane partial
    sums."""
    out = {}
    last = {}   # vector -> the last statement before here that touched it
    for s in body:
        if isinstance(s, ir.Loop):
            out.update(partial_sums(s.body))
            found = [v for v, w in last.items() if isinstance(w, ir.Op) and w.name == "zero" and _sums_only(s, v)]
            if found:
                out[id(s)] = found
        for v in _vectors(s):
            last[v] = s
    return out


def _vectors(s) -> list:
    if isinstance(s, ir.Loop):
        return [v for x in s.body for v in _vectors(x)]
    return [x for x in (s.dst, *s.srcs) if isinstance(x, RV)]


def _sums_only(lp: ir.Loop, v) -> bool:
    """Whether lp only scales v and adds row sums into it (at least once), and nothing in it reads v otherwise."""
    uses = [s for s in lp.body if v in _vectors(s)]
    if any(isinstance(s, ir.Loop) for s in uses):
        return False
    ok = lambda s: s.dst is v and (  # noqa: E731
        (s.name == "row_sum" and len(s.srcs) == 2 and s.srcs[1] is v and s.srcs[0] is not v) or
        (s.name == "mul" and s.srcs[0] is v and s.srcs[1] is not v
         and (isinstance(s.srcs[1], ir.Expr) or (isinstance(s.srcs[1], RV) and s.srcs[1].axis == "rows"))))
    return v.axis == "rows" and v.dtype.name == "f32" and all(ok(s) for s in uses) and \
        any(s.name == "row_sum" for s in uses)


def unit_factors(body) -> set:
    """ids of the `mul_row(t, t, y)` ops of body (loops included) whose factor y is a running max's correction:
    y's last writer is `exp2(y, y)`, the writer before it `sub(y, a, b)`, and b's last writer before that
    `row_max(b, x, a)`."""
    out = set()
    for i, s in enumerate(body):
        if isinstance(s, ir.Loop):
            out |= unit_factors(s.body)
        elif s.name == "mul_row" and s.srcs[0] is s.dst and isinstance(s.srcs[1], RV):
            y, before = s.srcs[1], body[:i]
            e = _last_writer(before, y)
            if not (e is not None and e.name == "exp2" and e.srcs[0] is y):
                continue
            sub = _last_writer(before[:before.index(e)], y)
            if not (sub is not None and sub.name == "sub" and isinstance(sub.srcs[1], RV)):
                continue
            a, b = sub.srcs
            mx = _last_writer(before[:before.index(sub)], b)
            if mx is not None and mx.name == "row_max" and len(mx.srcs) == 2 and mx.srcs[1] is a:
                out.add(id(s))
    return out


def _last_writer(body, v):
    """The last op of the statement list body that writes v (None if none, or if a loop in it touches v)."""
    for s in reversed(body):
        if isinstance(s, ir.Loop):
            if v in _vectors(s):
                return None
        elif s.dst is v:
            return s
    return None
