"""The shipped kernels as torch operators (namespace "tiles"), each an `op` (library.py) with a fake
implementation for shape inference and, where it has one, an autograd formula.

Every op allocates its outputs with torch (so under CUDA graph capture they come from the graph's pool),
launches on the device its tensors live on (dispatch.py), and makes an input contiguous only where the kernel
needs it: a last dim that is not contiguous, or (on a GPU) a start not on a 16-byte boundary. Shapes, dtypes
and devices are checked, in the real and in the fake implementation alike, before anything launches: a bad
call raises TileError, in eager mode and while torch.compile traces.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

from tiles.dsl import TileError
from tiles.types import ALIGN
from tiles.kernels import attention as _attn, attention_bwd as _attn_bwd, gemm as _gemm, gemm_fp8 as _gemm_fp8
from tiles.kernels import layernorm as _ln, rmsnorm as _rms, rotary as _rot, softmax as _sm

from .dispatch import empty, launch
from .library import op
from .replay import keep, replayed

HALF = (torch.bfloat16, torch.float16)
FLOAT = (torch.bfloat16, torch.float16, torch.float32)


def _require(ok: bool, message):
    """message: a string, or a function that makes it (an f-string built on every call cost each op ~1 us a check)."""
    if not ok:
        raise TileError(message() if callable(message) else message)


def _dtype(name: str, t: Tensor, allowed):
    _require(t.dtype in allowed, lambda: f"{name}: dtype {t.dtype} is not supported; expected one of "
                                         f"{', '.join(str(d).removeprefix('torch.') for d in allowed)}")


def _operand(t: Tensor) -> Tensor:
    """t as a kernel reads it: copied only where its last dim is not contiguous or, off the CPU, its data does
    not start on a 16-byte boundary."""
    if t.dim() and t.shape[-1] > 1 and t.stride(-1) != 1:
        return t.contiguous()
    if t.device.type != "cpu" and t.data_ptr() % ALIGN:
        return t.clone(memory_format=torch.contiguous_format)
    return t


# ---- attention -----------------------------------------------------------------------------------------------

def _check_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool, head_dims=_attn.HEAD_DIMS, what="attention"):
    _require(q.dim() == 4 and k.dim() == 4 and v.dim() == 4,
             lambda: f"attention: expected q (B, H, N, D), k and v (B, H_kv, N_kv, D); got ranks "
                     f"{q.dim()}, {k.dim()}, {v.dim()}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        _dtype(f"attention {name}", t, HALF)
    _require(q.dtype == k.dtype == v.dtype,
             lambda: f"attention: q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    b, h, n, d = q.shape
    _require(k.shape == v.shape,
             lambda: f"attention: k and v must have one shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    _require(k.shape[0] == b and k.shape[3] == d and h % k.shape[1] == 0,
             lambda: f"attention: k and v (B, H_kv, N_kv, D) with B and D of q and H a multiple of H_kv; "
                     f"q {tuple(q.shape)}, "
                     f"k {tuple(k.shape)}")
    _require(d in head_dims, lambda: f"{what}: head dim {d} is not supported; expected one of {head_dims}")
    _require(not causal or k.shape[2] == n,
             lambda: f"attention: causal needs as many keys as queries, got N {n}, N_kv {k.shape[2]}")


@op("tiles::attention_fwd")
@replayed
def attention_fwd(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float, backend: str) -> tuple[Tensor, Tensor]:
    """(O, LSE): O = softmax(q k^T * scale) v per head (GQA: query head h reads kv head h // (H / H_kv)), LSE the
    natural-log log-sum-exp of each row of scores, float32 (B, H, N)."""
    _check_attention(q, k, v, causal)
    q, k, v = map(_operand, (q, k, v))
    o, lse = empty(q.shape, q), empty(q.shape[:3], q, torch.float32)
    launch(_attn.attention_fwd, (o, lse, q, k, v, float(scale)), backend, D=q.shape[3], causal=causal)
    return o, lse


@attention_fwd.register_fake
def _(q, k, v, causal, scale, backend):
    _check_attention(q, k, v, causal)
    return empty(q.shape, q), empty(q.shape[:3], q, torch.float32)


@op("tiles::attention_bwd")
@replayed
def attention_bwd(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, causal: bool, scale: float,
                  backend: str) -> tuple[Tensor, Tensor, Tensor]:
    """(dQ, dK, dV) through the shipped backward: Delta = rowsum(dO * O) scale and LSE in log2 units, then dK, dV
    (summed over a kv head's query heads) with dQ accumulated in float32, then dQ converted to q's dtype."""
    _check_attention(q, k, v, causal, _attn_bwd.HEAD_DIMS, "attention backward")
    do, q, k, v, o, lse = map(_operand, (do, q, k, v, o, lse))
    d = q.shape[3]
    delta, lse2, dq_acc = empty(lse.shape, lse), empty(lse.shape, lse), empty(q.shape, q, torch.float32)
    dq, dk, dv = empty(q.shape, q), empty(k.shape, k), empty(v.shape, v)
    launch(_attn_bwd.attention_bwd_pre, (delta, lse2, dq_acc, o, do, lse, float(scale)), backend, D=d)
    launch(_attn_bwd.attention_bwd, (dk, dv, dq_acc, q, k, v, do, lse2, delta, float(scale)), backend, D=d,
           causal=causal)
    launch(_attn_bwd.attention_bwd_dq, (dq, dq_acc), backend, D=d)
    return dq, dk, dv


@attention_bwd.register_fake
def _(do, q, k, v, o, lse, causal, scale, backend):
    return empty(q.shape, q), empty(k.shape, k), empty(v.shape, v)


def _attention_setup(ctx, inputs, output):
    q, k, v, ctx.causal, ctx.scale, ctx.backend = inputs
    ctx.save_for_backward(q, k, v, *output)


def _attention_backward(ctx, do, dlse):
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = attention_bwd(do, q, k, v, o, lse, ctx.causal, ctx.scale, ctx.backend)
    return dq, dk, dv, None, None, None


attention_fwd.register_autograd(_attention_backward, setup_context=_attention_setup)


def attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, scale: Optional[float] = None,
              backend: str = "") -> Tensor:
    """softmax(q k^T * scale) v for q (B, H, N, D), k and v (B, H_kv, N_kv, D), H a multiple of H_kv (GQA);
    scale defaults to 1/sqrt(D). bf16 or f16, D 32, 64, 96, 128 or 256. Differentiable in q, k and v."""
    d = q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    return attention_fwd(q, k, v, causal, float(scale), backend)[0]


# ---- layernorm (fused dropout + residual) -------------------------------------------------------------------

def _check_layernorm(x: Tensor, residual: Tensor, weight: Tensor, bias: Tensor, p: float, seed: int, offset: int):
    _dtype("layernorm x", x, FLOAT)
    _require(residual.dtype == x.dtype, lambda: f"layernorm: residual dtype {residual.dtype} is not x's {x.dtype}")
    _require(x.dim() >= 1 and residual.shape == x.shape and weight.shape == (x.shape[-1],) == bias.shape,
             lambda: f"layernorm: expected x and residual (..., C), weight and bias (C,); got {tuple(x.shape)}, "
                     f"{tuple(residual.shape)}, {tuple(weight.shape)}, {tuple(bias.shape)}")
    _dtype("layernorm weight", weight, FLOAT)
    _dtype("layernorm bias", bias, FLOAT)
    _require(0.0 <= p < 1.0, lambda: f"layernorm: dropout probability must be in [0, 1), got {p}")
    _require(0 <= seed < 2**31 and 0 <= offset < 2**31,
             lambda: f"layernorm: seed and offset must be in [0, 2**31), got {seed}, {offset}")


def _rows(t: Tensor) -> Tensor:
    """The (rows, C) view of t (..., C): a copy only where t's rows cannot be viewed as one strided axis."""
    return _operand(t.reshape(-1, t.shape[-1]) if t.dim() != 2 else t)


@op("tiles::layernorm")
@replayed
def layernorm_fwd(x: Tensor, residual: Tensor, weight: Tensor, bias: Tensor, eps: float, p: float, seed: int,
                  offset: int, backend: str) -> tuple[Tensor, Tensor]:
    """(Y, H): H = residual + dropout(x, p), Y = layernorm(H) * weight + bias, both in x's dtype."""
    _check_layernorm(x, residual, weight, bias, p, seed, offset)
    xr, rr = _rows(x), _rows(residual)
    weight, bias = _operand(weight), _operand(bias)
    y, h = empty(x.shape, x), empty(x.shape, x)
    plan = _ln.launch_plan(*xr.shape, p)
    if plan is None:
        launch(_ln.layernorm_fwd, (y.view(xr.shape), h.view(xr.shape), xr, rr, weight, bias, float(eps), float(p),
                                   int(seed), int(offset)), backend, dropout=p > 0)
    else:   # the one-pass kernel: (rows, C/K, K) views (the rows of xr and rr are contiguous: _operand)
        k = plan["K"]
        view = lambda t: t.view(xr.shape[0], -1, k)  # noqa: E731 - splits the contiguous last dim
        launch(_ln.layernorm_rows, (view(y), view(h), view(xr), view(rr), weight.reshape(-1, k), bias.reshape(-1, k),
                                    float(eps)), backend, **plan)
    return y, h


@layernorm_fwd.register_fake
def _(x, residual, weight, bias, eps, p, seed, offset, backend):
    _check_layernorm(x, residual, weight, bias, p, seed, offset)
    return empty(x.shape, x), empty(x.shape, x)


def _layernorm_setup(ctx, inputs, output):
    x, residual, weight, bias, ctx.eps, ctx.p, ctx.seed, ctx.offset, ctx.backend = inputs
    ctx.dtypes = (x.dtype, residual.dtype)
    ctx.save_for_backward(weight, bias, output[1])


def _layernorm_backward(ctx, dy, dh):
    """torch's layernorm backward in float32, its statistics recomputed from the saved H (one row reduction);
    the gradient of x goes through the kernel's own dropout (the same Philox mask, applied to dH)."""
    weight, bias, h = ctx.saved_tensors
    hf = h.float()
    mean = hf.mean(-1, keepdim=True)
    rstd = torch.rsqrt(hf.var(-1, unbiased=False, keepdim=True) + ctx.eps)
    xhat = (hf - mean) * rstd
    dyf = dy.float()
    g = dyf * weight.float()
    dh_total = rstd * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
    if dh is not None:
        dh_total = dh_total + dh.float()
    lead = tuple(range(h.dim() - 1))
    dweight, dbias = (dyf * xhat).sum(lead).to(weight.dtype), dyf.sum(lead).to(bias.dtype)
    dx = dh_total.to(ctx.dtypes[0])
    if ctx.p > 0:   # dX = dropout(dH) with the forward's mask: the kernel's H for X = dH, R = 0
        zeros = torch.zeros_like(dx)
        ones = torch.ones(h.shape[-1], dtype=torch.float32, device=h.device)
        dx = layernorm_fwd(dx, zeros, ones, torch.zeros_like(ones), ctx.eps, ctx.p, ctx.seed, ctx.offset,
                           ctx.backend)[1]
    return dx, dh_total.to(ctx.dtypes[1]), dweight, dbias, None, None, None, None, None


layernorm_fwd.register_autograd(_layernorm_backward, setup_context=_layernorm_setup)


def layernorm(x: Tensor, residual: Tensor, weight: Tensor, bias: Tensor, *, eps: float = 1e-5, p: float = 0.0,
              seed: int = 0, offset: int = 0, backend: str = "") -> tuple[Tensor, Tensor]:
    """(Y, H): H = residual + dropout(x, p) (the new residual stream), Y = layernorm(H) * weight + bias.
    x and residual (..., C) bf16/f16/f32 of one dtype; weight and bias (C,). The dropout mask is Philox 4x32-10
    of (seed, offset, row, column), the same on every backend. Differentiable in x, residual, weight, bias."""
    return tuple(layernorm_fwd(x, residual, weight, bias, float(eps), float(p), int(seed), int(offset), backend))


# ---- rmsnorm ------------------------------------------------------------------------------------------------

def _check_rmsnorm(x: Tensor, weight: Tensor):
    _dtype("rmsnorm x", x, FLOAT)
    _dtype("rmsnorm weight", weight, FLOAT)
    _require(x.dim() >= 1 and weight.shape == (x.shape[-1],),
             lambda: f"rmsnorm: expected x (..., C) and weight (C,), got {tuple(x.shape)} and {tuple(weight.shape)}")


@op("tiles::rmsnorm")
@replayed
def rmsnorm_fwd(x: Tensor, weight: Tensor, eps: float, backend: str) -> tuple[Tensor, Tensor]:
    """(Y, RSTD): Y = x / sqrt(mean(x^2) + eps) * weight in x's dtype; RSTD float32, one per row of x."""
    _check_rmsnorm(x, weight)
    xr, weight = _rows(x), _operand(weight)
    y, rstd = empty(x.shape, x), empty(x.shape[:-1], x, torch.float32)
    plan = _rms.launch_plan(*xr.shape)
    if plan is None:
        launch(_rms.rmsnorm_fwd, (y.view(xr.shape), rstd.view(-1), xr, weight, float(eps)), backend)
    else:   # the one-pass kernel: (rows, C/K, K) views as layernorm's, RSTD a (rows, 1) column
        k = plan["K"]
        view = lambda t: t.view(xr.shape[0], -1, k)  # noqa: E731 - splits the contiguous last dim
        launch(_rms.rmsnorm_rows, (view(y), rstd.view(-1, 1), view(xr), weight.reshape(-1, k), float(eps)), backend,
               **plan)
    return y, rstd


@rmsnorm_fwd.register_fake
def _(x, weight, eps, backend):
    _check_rmsnorm(x, weight)
    return empty(x.shape, x), empty(x.shape[:-1], x, torch.float32)


def _rmsnorm_setup(ctx, inputs, output):
    x, weight, _, _ = inputs
    ctx.save_for_backward(x, weight, output[1])


def _rmsnorm_backward(ctx, dy, drstd):
    """In torch, float32, with the forward's saved RSTD: dX = rstd (g - x̂ mean(g x̂)), g = dY W; dW = Σ dY x̂."""
    x, weight, rstd = ctx.saved_tensors
    xhat = x.float() * rstd.unsqueeze(-1)
    dyf = dy.float()
    g = dyf * weight.float()
    dx = rstd.unsqueeze(-1) * (g - xhat * (g * xhat).mean(-1, keepdim=True))
    dweight = (dyf * xhat).sum(tuple(range(x.dim() - 1)))
    return dx.to(x.dtype), dweight.to(weight.dtype), None, None


rmsnorm_fwd.register_autograd(_rmsnorm_backward, setup_context=_rmsnorm_setup)


def rmsnorm(x: Tensor, weight: Tensor, *, eps: float = 1e-6, backend: str = "") -> Tensor:
    """x / sqrt(mean(x^2, last dim) + eps) * weight (Llama's RMSNorm, without its rounding of x̂ to x's dtype
    before the weight). x (..., C) bf16/f16/f32, weight (C,). Differentiable in x and weight."""
    return rmsnorm_fwd(x, weight, float(eps), backend)[0]


# ---- rotary -------------------------------------------------------------------------------------------------

def _check_rotary(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, interleaved: bool):
    _require(q.dim() == 4 and k.dim() == 4 and q.shape[0] == k.shape[0] and q.shape[2:] == k.shape[2:],
             lambda: f"rotary: expected q (B, H, N, D) and k (B, H_kv, N, D), got {tuple(q.shape)} and "
                     f"{tuple(k.shape)}")
    n, d = q.shape[2:]
    _require(cos.shape == (n, d // 2) == sin.shape,
             lambda: f"rotary: expected cos and sin of shape {(n, d // 2)}, got {tuple(cos.shape)} and "
                     f"{tuple(sin.shape)}")
    _dtype("rotary q", q, HALF)
    _require(q.dtype == k.dtype == cos.dtype == sin.dtype,
             lambda: f"rotary: q, k, cos, sin must share a dtype, got {q.dtype}, {k.dtype}, {cos.dtype}, {sin.dtype}")
    unit = 2 * _rot.PAIRS if interleaved else 32
    _require(d % unit == 0, lambda: f"rotary: head dim {d} must be a multiple of {unit} "
                                    f"({'interleaved' if interleaved else 'half-split'})")


_SPREADS: dict = {}


def _spread(device: torch.device, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """The interleaved kernel's two 32x32 constants, made once per device and dtype (no host-to-device copy in
    a launch after the first, so none under CUDA graph capture)."""
    if (device, dtype) not in _SPREADS:
        _SPREADS[device, dtype] = tuple(keep(torch.from_numpy(c).to(device, dtype)) for c in _rot._constants("float32"))
    return _SPREADS[device, dtype]


@op("tiles::rotary")
@replayed
def rotary_fwd(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, interleaved: bool,
               backend: str) -> tuple[Tensor, Tensor]:
    """(q', k'): every pair of q and k rotated by its position's angle (cos, sin: (N, D/2))."""
    _check_rotary(q, k, cos, sin, interleaved)
    qo, ko = empty(q.shape, q), empty(k.shape, k)
    n, d = q.shape[2:]
    if interleaved:   # (B, H, N*D/32, 32) views: each head's (N, D) block contiguous
        rows = n * d // (2 * _rot.PAIRS)
        view = lambda t: t.contiguous().view(t.shape[0], t.shape[1], rows, 2 * _rot.PAIRS)  # noqa: E731
        spread, signed = _spread(q.device, q.dtype)
        tables = [t.contiguous().view(rows, _rot.PAIRS) for t in (cos, sin)]
        launch(_rot.rotary_interleaved, (view(qo), view(ko), view(q), view(k), *tables, spread, signed), backend)
    else:
        launch(_rot.rotary_half, (qo, ko, _operand(q), _operand(k), _operand(cos), _operand(sin)), backend, W=d // 2)
    return qo, ko


@rotary_fwd.register_fake
def _(q, k, cos, sin, interleaved, backend):
    _check_rotary(q, k, cos, sin, interleaved)
    return empty(q.shape, q), empty(k.shape, k)


def _rotary_setup(ctx, inputs, output):
    _, _, cos, sin, ctx.interleaved, ctx.backend = inputs
    ctx.save_for_backward(cos, sin)


def _rotary_backward(ctx, dqo, dko):
    """The rotation is orthogonal: its gradient is the rotation by the opposite angle (sin negated), through the
    same kernel. cos and sin take no gradient."""
    cos, sin = ctx.saved_tensors
    dq, dk = rotary_fwd(dqo, dko, cos, -sin, ctx.interleaved, ctx.backend)
    return dq, dk, None, None, None, None


rotary_fwd.register_autograd(_rotary_backward, setup_context=_rotary_setup)


def rotary(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, *, interleaved: bool = False,
           backend: str = "") -> tuple[Tensor, Tensor]:
    """(q', k') rotary embeddings of q (B, H, N, D) and k (B, H_kv, N, D), bf16/f16; cos and sin (N, D/2) are
    cast to q's dtype. Half-split pairs (x[i], x[i + D/2]) (GPT-NeoX, Llama) or interleaved (x[2i], x[2i+1])
    (GPT-J). Differentiable in q and k."""
    return tuple(rotary_fwd(q, k, cos.to(q.dtype), sin.to(q.dtype), interleaved, backend))


# ---- softmax ------------------------------------------------------------------------------------------------

@op("tiles::softmax")
@replayed
def softmax_fwd(x: Tensor, backend: str) -> Tensor:
    """softmax over the last dim, in x's dtype."""
    _dtype("softmax x", x, FLOAT)
    _require(x.dim() >= 1, "softmax: x must have at least one dim")
    xr = _rows(x)
    y = empty(x.shape, x)
    plan = _sm.row_plan(*xr.shape)
    if plan is None:
        launch(_sm.softmax_fwd, (y.view(xr.shape), xr), backend)
    else:
        view = (xr.shape[0], xr.shape[1] // plan["K"], plan["K"])
        launch(_sm.softmax_rows, (y.view(view), xr.view(view)), backend, **plan)   # splits the contiguous last dim
    return y


@softmax_fwd.register_fake
def _(x, backend):
    _dtype("softmax x", x, FLOAT)
    return empty(x.shape, x)


def _softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(output)


def _softmax_backward(ctx, dy):
    """torch's softmax backward on the saved output: dX = Y (dY - Σ dY Y)."""
    (y,) = ctx.saved_tensors
    return torch._softmax_backward_data(dy, y, -1, y.dtype), None


softmax_fwd.register_autograd(_softmax_backward, setup_context=_softmax_setup)


def softmax(x: Tensor, *, backend: str = "") -> Tensor:
    """softmax over the last dim of x (bf16/f16/f32), in x's dtype. Differentiable."""
    return softmax_fwd(x, backend)


# ---- matmul -------------------------------------------------------------------------------------------------

def _check_matmul(a: Tensor, b: Tensor, trans_b: bool, out_dtype, trans_a: bool = False):
    _require(a.dim() == 2 and b.dim() == 2,
             lambda: f"matmul: expected 2-D a and b, got {tuple(a.shape)} and {tuple(b.shape)}")
    _dtype("matmul a", a, HALF)
    _require(b.dtype == a.dtype, lambda: f"matmul: a and b must share a dtype, got {a.dtype} and {b.dtype}")
    _require((b.shape[1] if trans_b else b.shape[0]) == (a.shape[0] if trans_a else a.shape[1]),
             lambda: f"matmul: a {tuple(a.shape)}{' (transposed)' if trans_a else ''} and b {tuple(b.shape)}"
                     f"{' (transposed)' if trans_b else ''} do not chain")
    _require(out_dtype is None or out_dtype in FLOAT, lambda: f"matmul: out_dtype {out_dtype} is not supported")


def _matmul_shape(a: Tensor, b: Tensor, trans_b: bool, trans_a: bool = False):
    return a.shape[1] if trans_a else a.shape[0], b.shape[0] if trans_b else b.shape[1]


@op("tiles::matmul")
@replayed
def matmul_fwd(a: Tensor, b: Tensor, trans_b: bool, out_dtype: Optional[torch.dtype], backend: str,
               trans_a: bool = False) -> Tensor:
    """a @ b (a.T given a (K, M) where trans_a, b.T given b (N, K) where trans_b), float32 accumulation, in
    out_dtype (default a's)."""
    _check_matmul(a, b, trans_b, out_dtype, trans_a)
    c = empty(_matmul_shape(a, b, trans_b, trans_a), a, out_dtype)
    launch(_gemm.gemm, (c, _operand(a), _operand(b)), backend, trans_a=trans_a, trans_b=trans_b)
    return c


@matmul_fwd.register_fake
def _(a, b, trans_b, out_dtype, backend, trans_a=False):
    _check_matmul(a, b, trans_b, out_dtype, trans_a)
    return empty(_matmul_shape(a, b, trans_b, trans_a), a, out_dtype)


def _matmul_setup(ctx, inputs, output):
    a, b, ctx.trans_b, _, ctx.backend, ctx.trans_a = inputs
    ctx.save_for_backward(a, b)


def _matmul_backward(ctx, dc):
    """Both gradients through the same kernel, each operand read as it lies (trans_a, trans_b: no transposed
    copy): for C = A' B' (A' = a or a^T, B' = b or b^T), dA' = dC B'^T and dB' = A'^T dC, and a transposed
    operand's gradient is the transpose of that product, which the kernel computes with its operands swapped.
    dC cast to a's dtype."""
    a, b = ctx.saved_tensors
    ta, tb, dc = ctx.trans_a, ctx.trans_b, dc.to(a.dtype)
    da = (matmul_fwd(b, dc, True, a.dtype, ctx.backend, tb) if ta
          else matmul_fwd(dc, b, not tb, a.dtype, ctx.backend, False))
    db = (matmul_fwd(dc, a, ta, b.dtype, ctx.backend, True) if tb
          else matmul_fwd(a, dc, False, b.dtype, ctx.backend, not ta))
    return da, db, None, None, None, None


matmul_fwd.register_autograd(_matmul_backward, setup_context=_matmul_setup)


def matmul(a: Tensor, b: Tensor, *, trans_a: bool = False, trans_b: bool = False,
           out_dtype: Optional[torch.dtype] = None, backend: str = "") -> Tensor:
    """a (M, K) @ b (K, N): a given as (K, M) with trans_a, b as (N, K) with trans_b; bf16/f16 inputs of one dtype,
    float32 accumulation, the result in out_dtype (bf16, f16, f32; default a's dtype). Differentiable."""
    return matmul_fwd(a, b, trans_b, out_dtype, backend, trans_a)


def _check_matmul_fp8(a: Tensor, b: Tensor):
    _require(a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[1],
             lambda: f"matmul_fp8: expected a (M, K) and b (N, K), got {tuple(a.shape)} and {tuple(b.shape)}")
    for name, t in (("a", a), ("b", b)):
        _dtype(f"matmul_fp8 {name}", t, (torch.float8_e4m3fn,))


@op("tiles::matmul_fp8")
@replayed
def matmul_fp8(a: Tensor, b: Tensor, scale_a: float, scale_b: float, backend: str = "") -> Tensor:
    """bf16 (a @ b.T) * scale_a * scale_b for e4m3 a (M, K) and b (N, K), K contiguous (per-tensor scales).
    Runs where the target has fp8 MMAs (sm_90a, gfx942, gfx950) and on the CPU; no autograd."""
    _check_matmul_fp8(a, b)
    c = empty((a.shape[0], b.shape[0]), a, torch.bfloat16)
    launch(_gemm_fp8.gemm_fp8, (c, _operand(a), _operand(b), float(scale_a), float(scale_b)), backend)
    return c


@matmul_fp8.register_fake
def _(a, b, scale_a, scale_b, backend=""):
    _check_matmul_fp8(a, b)
    return empty((a.shape[0], b.shape[0]), a, torch.bfloat16)
