"""tiles.torch on CPU tensors (the reference interpreter): every op's output and gradients against float64 torch,
torch.library.opcheck, torch.compile(fullgraph=True) without a graph break, the dispatch table, and the
checks that refuse bad input with a TileError. The same ops on a GPU: .ci/gpu_torch.py."""
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

torch = pytest.importorskip("torch")
F = torch.nn.functional

import tiles.torch as tt  # noqa: E402
from tiles import backend as backends, philox  # noqa: E402
from tiles.dsl import TileError  # noqa: E402
from tiles.testing import tolerance  # noqa: E402
from tiles.torch import dispatch, ops  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def rel(out, ref) -> float:
    out, ref = out.detach().double(), ref.detach().double()
    assert torch.isfinite(out).all(), "non-finite values"
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


def close(out, ref, dtype: str, factor: float = 1.0, what: str = "output", scale=None):
    """‖out − ref‖/‖ref‖ within the dtype's tolerance (times factor: gradients round more than once). Where ref is
    a difference of nearly equal terms, scale is the norm of those terms: the error is measured against it."""
    err, tol = rel(out, ref), tolerance(dtype) * factor
    if scale is not None:
        norm = float(ref.detach().double().norm())
        err *= norm / max(float(scale), norm, 1e-30)
    assert err <= tol, f"{what}: relative error {err:.3g} > {tol:.3g} ({dtype})"


def rand(*shape, dtype="bf16", grad=False, scale=1.0):
    t = (torch.randn(*shape, dtype=torch.float64) * scale).to(DTYPES[dtype])
    return t.requires_grad_(grad)


def grads(fn, inputs, dy):
    """fn's output and the gradients of <fn(inputs), dy> in the inputs."""
    out = fn(*inputs)
    out = out if isinstance(out, tuple) else (out,)
    dys = dy if isinstance(dy, tuple) else (dy,)
    g = torch.autograd.grad(out, inputs, dys)
    return out, g


def f64(*ts):
    return [t.detach().double().requires_grad_(True) for t in ts]


# ---- attention ------------------------------------------------------------------------------------------------

def sdpa64(q, k, v, causal, scale):
    group = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1),
                                          is_causal=causal, scale=scale)


@settings(max_examples=6)
@given(b=st.integers(1, 2), h_kv=st.integers(1, 2), group=st.sampled_from([1, 2]), n=st.integers(1, 80),
       d=st.sampled_from([64, 128]), causal=st.booleans(), dtype=st.sampled_from(["bf16", "f16"]))
def test_attention_forward_and_gradients(b, h_kv, group, n, d, causal, dtype):
    check_attention(b, h_kv, group, n, d, causal, dtype)


def check_attention(b, h_kv, group, n, d, causal, dtype):
    """O and the gradients of q, k, v against float64 SDPA."""
    q = rand(b, h_kv * group, n, d, dtype=dtype, grad=True)
    k, v = rand(b, h_kv, n, d, dtype=dtype, grad=True), rand(b, h_kv, n, d, dtype=dtype, grad=True)
    do = rand(b, h_kv * group, n, d, dtype=dtype)
    (o,), g = grads(lambda *x: tt.attention(*x, causal=causal), (q, k, v), do)
    scale = 1 / math.sqrt(d)
    (ref,), ref_g = grads(lambda *x: sdpa64(*x, causal, scale), f64(q, k, v), do.double())
    close(o, ref, dtype, what="O")
    for name, a, r in zip("qkv", g, ref_g):
        close(a, r, dtype, factor=2, what=f"d{name}")


@settings(max_examples=3)
@given(n=st.integers(1, 40), group=st.sampled_from([1, 2]), causal=st.booleans(),
       dtype=st.sampled_from(["bf16", "f16"]))
@pytest.mark.parametrize("d", [32, 96, 256])
def test_attention_head_dims_32_96_and_256(d, n, group, causal, dtype):
    """The head dims configured from the resource reports alone (kernels/attention.py HEAD_DIMS; the backward at
    256 in chunks of dK, dV and dQ's columns): forward and gradients against float64."""
    check_attention(1, 1, group, n, d, causal, dtype)


def test_attention_takes_strided_inputs_and_a_scale():
    """(B, N, H, D) tensors transposed to (B, H, N, D): read in place (last dim contiguous), not copied."""
    q = rand(2, 33, 4, 64).transpose(1, 2)
    k, v = rand(2, 33, 2, 64).transpose(1, 2), rand(2, 33, 2, 64).transpose(1, 2)
    assert not q.is_contiguous() and ops._operand(q) is q
    o = tt.attention(q, k, v, scale=0.3)
    close(o, sdpa64(*f64(q, k, v), False, 0.3), "bf16")
    # a last dim that is not contiguous is copied
    qt = rand(2, 4, 64, 33).transpose(2, 3)
    assert ops._operand(qt) is not qt and ops._operand(qt).stride(-1) == 1
    close(tt.attention(qt, k, v), sdpa64(*f64(qt, k, v), False, 1 / 8), "bf16")


@pytest.mark.parametrize("bad,message", [
    (lambda q, k, v: (q[0], k, v), "expected q"),
    (lambda q, k, v: (q.float(), k, v), "dtype torch.float32 is not supported"),
    (lambda q, k, v: (q, k.half(), v), "share a dtype"),
    (lambda q, k, v: (q[:, :3], k, v), "multiple of H_kv"),
    (lambda q, k, v: (q[..., :48], k[..., :48], v[..., :48]), "head dim 48"),
    (lambda q, k, v: (q, k[:, :, :5], v[:, :, :5]), "causal needs"),
])
def test_attention_bad_input(bad, message):
    q, k, v = rand(1, 4, 8, 64), rand(1, 2, 8, 64), rand(1, 2, 8, 64)
    with pytest.raises(TileError, match=message):
        tt.attention(*bad(q, k, v), causal=True)


# ---- layernorm ------------------------------------------------------------------------------------------------

def layernorm64(x, r, w, b, eps, keep=None, p=0.0):
    h = r + (x if keep is None else torch.where(keep, x / (1 - p), 0.0))
    return F.layer_norm(h, h.shape[-1:], w, b, eps), h


@settings(max_examples=5)
@given(rows=st.integers(1, 40), cols=st.sampled_from([16, 48, 100, 128]), dtype=st.sampled_from(["bf16", "f32"]),
       p=st.sampled_from([0.0, 0.3]), seed=st.integers(0, 2**31 - 1))
def test_layernorm_forward_and_gradients(rows, cols, dtype, p, seed):
    x, r = rand(2, rows, cols, dtype=dtype, grad=True), rand(2, rows, cols, dtype=dtype, grad=True)
    w, b = rand(cols, dtype="f32", grad=True), rand(cols, dtype="f32", grad=True)
    dy, dh = rand(2, rows, cols, dtype=dtype), rand(2, rows, cols, dtype=dtype)
    (y, h), g = grads(lambda *a: tt.layernorm(*a, eps=1e-5, p=p, seed=seed, offset=3), (x, r, w, b), (dy, dh))
    # the mask: Philox of (seed, offset, row, column) of the (rows, C) view, as tiles/philox.py defines it
    u = philox.uniform(seed, 3, np.arange(2 * rows)[:, None], np.arange(cols)[None, :])
    keep = torch.from_numpy(u >= p).reshape(2, rows, cols)
    (ref_y, ref_h), ref_g = grads(lambda *a: layernorm64(*a, 1e-5, keep, p), f64(x, r, w, b),
                                  (dy.double(), dh.double()))
    close(h, ref_h, dtype, what="H")
    close(y, ref_y, dtype, what="Y")
    for name, a, ref in zip(("dx", "dresidual", "dweight", "dbias"), g, ref_g):
        close(a, ref, dtype, factor=2, what=name)


def test_layernorm_bad_input():
    x, w = rand(4, 8), rand(8)
    with pytest.raises(TileError, match="expected x and residual"):
        tt.layernorm(x, x[:2], w, w)
    with pytest.raises(TileError, match="dropout probability"):
        tt.layernorm(x, x, w, w, p=1.0)
    with pytest.raises(TileError, match="residual dtype"):
        tt.layernorm(x, x.float(), w, w)


# ---- rmsnorm ----------------------------------------------------------------------------------------------------

def rmsnorm64(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


@settings(max_examples=6)
@given(rows=st.integers(1, 40), cols=st.sampled_from([16, 48, 128]) | st.integers(1, 200),
       dtype=st.sampled_from(["bf16", "f16", "f32"]))
def test_rmsnorm_forward_and_gradients(rows, cols, dtype):
    """Rows of a multiple of 16 columns take the one-pass kernel (its RSTD is what the backward uses), others two."""
    x, w = rand(3, rows, cols, dtype=dtype, grad=True), rand(cols, dtype=dtype, grad=True)
    dy = rand(3, rows, cols, dtype=dtype)
    (y,), g = grads(lambda *a: tt.rmsnorm(*a, eps=1e-6), (x, w), dy)
    (ref,), ref_g = grads(lambda *a: rmsnorm64(*a, 1e-6), f64(x, w), dy.double())
    close(y, ref, dtype, what="Y")
    # dx = (w dy − y mean(y w dy)) / rms cancels: at one column it is eps-sized, so its error is measured
    # against the terms' size ‖w dy / rms‖ (the bound of a backward-stable computation), not against dx's own
    x64, w64 = f64(x, w)
    terms = (w64 * dy.double() * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6)).norm().detach()
    close(g[0], ref_g[0], dtype, factor=2, what="dx", scale=terms)
    close(g[1], ref_g[1], dtype, factor=2, what="dweight")


def test_rmsnorm_bad_input():
    with pytest.raises(TileError, match="expected x"):
        tt.rmsnorm(rand(4, 8), rand(7))
    with pytest.raises(TileError, match="dtype torch.int32"):
        tt.rmsnorm(torch.ones(4, 8, dtype=torch.int32), rand(8))


# ---- rotary ---------------------------------------------------------------------------------------------------

def rotary64(x, cos, sin, interleaved):
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack((a * cos - b * sin, b * cos + a * sin), -1).flatten(-2)
    a, b = x.chunk(2, -1)
    return torch.cat((a * cos - b * sin, b * cos + a * sin), -1)


@settings(max_examples=5)
@given(n=st.integers(1, 70), d=st.sampled_from([32, 64, 128]), h_kv=st.integers(1, 2), group=st.sampled_from([1, 3]),
       interleaved=st.booleans(), dtype=st.sampled_from(["bf16", "f16"]))
def test_rotary_forward_and_gradients(n, d, h_kv, group, interleaved, dtype):
    q, k = rand(2, h_kv * group, n, d, dtype=dtype, grad=True), rand(2, h_kv, n, d, dtype=dtype, grad=True)
    ang = torch.arange(n, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    cos, sin = ang.cos().to(q.dtype), ang.sin().to(q.dtype)
    dq, dk = rand(*q.shape, dtype=dtype), rand(*k.shape, dtype=dtype)
    out, g = grads(lambda a, b: tt.rotary(a, b, cos, sin, interleaved=interleaved), (q, k), (dq, dk))
    ref, ref_g = grads(lambda a, b: (rotary64(a, cos.double(), sin.double(), interleaved),
                                     rotary64(b, cos.double(), sin.double(), interleaved)), f64(q, k),
                       (dq.double(), dk.double()))
    for name, a, r in zip(("q'", "k'", "dq", "dk"), out + g, ref + ref_g):
        close(a, r, dtype, what=name)


def test_rotary_bad_input():
    q, k = rand(1, 2, 8, 64), rand(1, 1, 8, 64)
    cos = torch.ones(8, 32, dtype=torch.bfloat16)
    with pytest.raises(TileError, match="cos and sin of shape"):
        tt.rotary(q, k, cos[:4], cos[:4])
    with pytest.raises(TileError, match="multiple of 32"):
        tt.rotary(q[..., :48], k[..., :48], cos[:, :24], cos[:, :24])


# ---- softmax, matmul, matmul_fp8 ------------------------------------------------------------------------------

@settings(max_examples=4)
@given(rows=st.integers(1, 40), cols=st.sampled_from([7, 64, 200, 256]), dtype=st.sampled_from(["bf16", "f32"]))
def test_softmax_forward_and_gradients(rows, cols, dtype):
    x, dy = rand(rows, cols, dtype=dtype, grad=True, scale=3.0), rand(rows, cols, dtype=dtype)
    (y,), (dx,) = grads(tt.softmax, (x,), dy)
    (ref,), (ref_dx,) = grads(lambda a: a.softmax(-1), f64(x), dy.double())
    close(y, ref, dtype, what="Y")
    # dX = Y dY - Y (dY . Y): its two terms nearly cancel in some rows (CI drew 1 x 7 at 0.0351 > 0.032 in bf16),
    # and the bf16 rounding of each is relative to the terms, not to their difference
    terms = (ref * dy.double()).norm() + (ref * (ref * dy.double()).sum(-1, keepdim=True)).norm()
    close(dx, ref_dx, dtype, factor=2, what="dx", scale=terms)


@settings(max_examples=4)
@given(m=st.integers(1, 80), n=st.integers(1, 80), k=st.integers(1, 80), trans_a=st.booleans(),
       trans_b=st.booleans(), out=st.sampled_from([None, torch.float32]))
def test_matmul_forward_and_gradients(m, n, k, trans_a, trans_b, out):
    """Every layout of the operands, forward and both gradients (which read the operands as they lie)."""
    a = rand(k, m, grad=True) if trans_a else rand(m, k, grad=True)
    b = rand(n, k, grad=True) if trans_b else rand(k, n, grad=True)
    dc = rand(m, n, dtype="f32" if out else "bf16")
    (c,), g = grads(lambda x, y: tt.matmul(x, y, trans_a=trans_a, trans_b=trans_b, out_dtype=out), (a, b), dc)
    (ref,), ref_g = grads(lambda x, y: (x.T if trans_a else x) @ (y.T if trans_b else y), f64(a, b), dc.double())
    assert c.dtype == (out or torch.bfloat16)
    close(c, ref, "bf16", what="C")
    close(g[0], ref_g[0], "bf16", factor=2, what="da")
    close(g[1], ref_g[1], "bf16", factor=2, what="db")


def test_matmul_fp8():
    a = rand(40, 64).to(torch.float8_e4m3fn)
    b = rand(24, 64).to(torch.float8_e4m3fn)
    c = tt.matmul_fp8(a, b, 0.5, 2.0)
    assert c.dtype == torch.bfloat16 and c.shape == (40, 24)
    close(c, a.double() @ b.double().T, "bf16")
    with pytest.raises(TileError, match="float8_e4m3fn"):
        tt.matmul_fp8(a.bfloat16(), b, 1.0, 1.0)


def test_matmul_bad_input():
    with pytest.raises(TileError, match="do not chain"):
        tt.matmul(rand(4, 8), rand(7, 4))
    with pytest.raises(TileError, match=r"a \(4, 8\) \(transposed\) and b \(8, 4\) do not chain"):
        tt.matmul(rand(4, 8), rand(8, 4), trans_a=True)
    with pytest.raises(TileError, match="share a dtype"):
        tt.matmul(rand(4, 8), rand(8, 4, dtype="f16"))


# ---- torch.library.opcheck, torch.compile -----------------------------------------------------------------------

def _opcheck_cases():
    q, k = rand(1, 2, 20, 64, grad=True), rand(1, 1, 20, 64, grad=True)
    v = rand(1, 1, 20, 64, grad=True)
    x, w = rand(3, 48, grad=True), rand(48, dtype="f32", grad=True)
    cos = torch.rand(20, 32).bfloat16()
    o, lse = ops.attention_fwd(q, k, v, True, 0.125, "")
    return {
        "attention_fwd": (ops.attention_fwd, (q, k, v, True, 0.125, "")),
        "attention_bwd": (ops.attention_bwd, (rand(1, 2, 20, 64), q.detach(), k.detach(), v.detach(), o.detach(),
                                              lse.detach(), True, 0.125, "")),
        "layernorm": (ops.layernorm_fwd, (x, rand(3, 48, grad=True), w, rand(48, dtype="f32", grad=True),
                                          1e-5, 0.2, 7, 0, "")),
        "rmsnorm": (ops.rmsnorm_fwd, (x, rand(48, grad=True), 1e-6, "")),
        "rotary": (ops.rotary_fwd, (q, k, cos, cos, False, "")),
        "softmax": (ops.softmax_fwd, (x, "")),
        "matmul": (ops.matmul_fwd, (x, rand(48, 16, grad=True), False, torch.float32, "")),
        "matmul_fp8": (ops.matmul_fp8, (rand(16, 64).to(torch.float8_e4m3fn), rand(16, 64).to(torch.float8_e4m3fn),
                                        1.0, 1.0, "")),
    }


@pytest.mark.parametrize("name", list(_opcheck_cases()))
def test_opcheck(name):
    op, args = _opcheck_cases()[name]
    # test_schema compares values through arithmetic CPU torch lacks for float8 (the GPU script runs it there)
    every = torch.library.opcheck.__kwdefaults__["test_utils"]
    utils = {"test_utils": [u for u in every if u != "test_schema"]} if name == "matmul_fp8" else {}
    torch.library.opcheck(op.overload, args, **utils)


def test_an_op_without_a_formula_refuses_a_gradient_through_it():
    """attention_bwd has no backward of its own: autograd records it (its inputs require grad) and the gradient
    raises, where an op with no autograd kernel would pass no gradient through, with a warning at most."""
    q, k = rand(1, 2, 20, 64, grad=True), rand(1, 1, 20, 64)
    o, lse = ops.attention_fwd(q.detach(), k, k, False, 0.125, "")
    dq, _, _ = ops.attention_bwd(rand(1, 2, 20, 64), q, k, k, o, lse, False, 0.125, "")
    assert dq.requires_grad
    with pytest.raises(TileError, match="tiles::attention_bwd has no backward"):
        dq.sum().backward()


def test_a_call_without_gradients_skips_autograd_only():
    """With no input requiring grad an op is called below autograd (Op.__call__), past nothing else: a dispatch
    mode (FakeTensor, a FLOP counter, functionalization's kin) still sees it, and with grad required autograd
    records it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))
    x, w = rand(3, 48), rand(48)
    with Seen() as seen:
        y = tt.rmsnorm(x, w)
    assert "tiles.rmsnorm.default" in seen.ops and y.grad_fn is None
    close(y, tt.rmsnorm(x, w), "bf16")
    assert tt.rmsnorm(x.requires_grad_(), w).grad_fn is not None


def test_an_op_defined_again_replaces_the_first():
    """A notebook cell run twice defines its op twice: the second body is what the op runs."""
    for scale in (2.0, 3.0):
        @tt.op("tiles_test::scaled")
        def scaled(x: torch.Tensor) -> torch.Tensor:
            return x * scale

        @scaled.register_fake
        def _(x):
            return torch.empty_like(x)
        scaled.register_autograd(lambda ctx, dy, s=scale: dy * s)
    x = rand(5, dtype="f32", grad=True)
    y = torch.ops.tiles_test.scaled(x)
    assert torch.equal(y, x * 3.0)
    (g,) = torch.autograd.grad(y, x, torch.ones(5))
    assert torch.equal(g, torch.full((5,), 3.0))


def test_compile_fullgraph_has_no_graph_break():
    """Dynamo traces every op (forward and backward, AOT autograd) into one graph; the aot_eager backend runs
    it without Inductor's C++ compile (the GPU script compiles with Inductor)."""
    def block(x, w, q, k, v, cos, sin):
        h = tt.rmsnorm(x, w)
        q2, k2 = tt.rotary(q, k, cos, sin)
        o = tt.attention(q2, k2, v, causal=True)
        y, r = tt.layernorm(h, h, w, w)
        c = tt.matmul(r, w[:, None].expand(-1, 16).contiguous())
        return o.float().sum() + tt.softmax(y).float().sum() + c.float().sum()

    args = [rand(4, 64, grad=True), rand(64, grad=True), rand(1, 2, 24, 64, grad=True), rand(1, 1, 24, 64, grad=True),
            rand(1, 1, 24, 64, grad=True), torch.rand(24, 32).bfloat16(), torch.rand(24, 32).bfloat16()]
    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    out = compiled(*args)
    out.backward()
    eager = [a.detach().clone().requires_grad_(True) for a in args]
    ref = block(*eager)
    ref.backward()
    assert torch.allclose(out, ref, rtol=1e-3)
    for a, e in zip(args, eager):
        if a.requires_grad:
            assert torch.allclose(a.grad.float(), e.grad.float(), rtol=1e-2, atol=1e-2)


# ---- dispatch ---------------------------------------------------------------------------------------------------

class FakeTensor:   # what tiles.backend.place reads: the class's module and device.type
    __module__ = "torch"

    def __init__(self, device_type):
        self.device = type("device", (), {"type": device_type})()


def test_dispatch_table(monkeypatch):
    names = {b: backends.place(FakeTensor(b)) for b in ("cuda", "mps", "cpu")}
    assert names == {"cuda": "cuda", "mps": "metal", "cpu": None}
    monkeypatch.setattr(torch.version, "hip", "6.2.0")   # torch built for ROCm: "cuda" tensors are AMD's
    assert backends.place(FakeTensor("cuda")) == "hip"
    assert dispatch.backend_name(torch.device("cuda")) == "hip"
    monkeypatch.setattr(torch.version, "hip", None)
    assert dispatch.backend_name(torch.device("cuda")) == "cuda"
    assert dispatch.backend_name(torch.device("mps")) == "metal"
    assert backends.for_arrays([np.zeros(3), FakeTensor("cpu")]).name == "reference"
    assert backends.for_arrays([np.zeros(3), FakeTensor("mps")]).name == "metal"


def test_cpu_backend_from_argument_and_environment(monkeypatch):
    assert dispatch.backend_name(torch.device("cpu")) == "reference"
    monkeypatch.setenv(dispatch.ENV, "hip-emu:gfx950")
    assert dispatch.backend_name(torch.device("cpu")) == "hip-emu:gfx950"
    assert dispatch.backend_name(torch.device("cpu"), "cuda-emu:sm_80") == "cuda-emu:sm_80"


def test_cpu_tensors_on_an_emulator():
    """backend= runs the generated code of a vendor on the CPU, on the tensors' own memory (rmsnorm's two-pass
    kernel at 100 columns, its one-pass kernel at 96)."""
    for x, w in ((rand(70, 100), rand(100)), (rand(70, 96), rand(96))):
        for name in ("cuda-emu:sm_80", "hip-emu:gfx942", "metal-emu"):
            close(tt.rmsnorm(x, w, backend=name), rmsnorm64(x.double(), w.double(), 1e-6), "bf16", what=name)


def test_dispatch_refuses_mixed_devices_and_misplaced_backends():
    with pytest.raises(TileError, match="different devices"):
        dispatch.resolve([torch.zeros(1), torch.zeros(1, device="meta")])
    if backends.get("metal").available() is None:
        pytest.skip("a Metal device is here")
    with pytest.raises(RuntimeError, match="cannot run here"):
        tt.rmsnorm(rand(4, 8), rand(8), backend="metal")


def test_numpy_view_shares_memory():
    for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float8_e4m3fn):
        t = torch.zeros(3, 5, dtype=dtype)[:, 1:]
        v = dispatch.numpy_view(t)
        assert v.shape == (3, 4) and str(v.dtype) in str(dtype).replace("torch.", "").replace("bfloat16", "bfloat16")
        v[...] = 1.0
        assert (t.float() == 1.0).all()


def test_import_tiles_does_not_import_torch():
    code = "import sys, tiles, tiles.backend, tiles.kernels.attention; tiles.backend.all_backends(); " \
           "assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
