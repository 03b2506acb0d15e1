"""tiles.torch's replay (tiles/torch/replay.py) on CPU tensors (and CUDA tensors where a GPU is): an op's second
call with a signature skips its body (no checks, views or plans; one prepared launch a kernel) and computes, on
fresh inputs at new addresses,
what the body computes, bit for bit, and what float64 torch computes within the dtype's tolerance. Every new
tensor comes from torch.empty poisoned with NaN (deterministic mode), so an output a replay fails to write fails.
The GPU's prepared launch itself: tests/test_cuda_compile.py (test_a_prepared_launch_packs_*)."""
import functools
import math

import pytest
from hypothesis import given, settings, strategies as st

torch = pytest.importorskip("torch")
F = torch.nn.functional

import tiles.torch as tt  # noqa: E402
from tiles import tune  # noqa: E402
from tiles.dsl import TileError  # noqa: E402
from tiles.testing import tolerance  # noqa: E402
from tiles.torch import ops, replay  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])   # cuda: the runtime's prepared launches


@pytest.fixture(autouse=True)
def poisoned_empties():
    """torch.empty fills with NaN: a replay that leaves an output unwritten returns NaN."""
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(was)


def rand(*shape, dtype="bf16", device="cpu"):
    return torch.randn(*shape, dtype=torch.float64).to(device, DTYPES[dtype])


def error64(got, ref, *inputs) -> float:
    """‖got − ref(inputs)‖ / ‖ref(inputs)‖, the float64 reference computed on the CPU (on a GPU, deterministic
    mode refuses cuBLAS without a workspace setting)."""
    want = ref(*(t.detach().cpu() for t in inputs))
    return float((got.detach().cpu().double() - want).norm() / want.norm())


def rmsnorm64(x, w):
    x = x.double()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()


def attention64(q, k, v, causal):
    g = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q.double(), k.double().repeat_interleave(g, 1),
                                          v.double().repeat_interleave(g, 1), is_causal=causal)


def rotary64(x, cos, sin):
    h = x.shape[-1] // 2
    x, cos, sin = x.double(), cos.double(), sin.double()
    return torch.cat((x[..., :h] * cos - x[..., h:] * sin, x[..., h:] * cos + x[..., :h] * sin), -1)


def case(name, dtype, n, device):
    """(inputs maker, the op on them, its float64 reference or None, the body's name) for an op at size n; ops
    of half precision only take bf16 where dtype is f32."""
    d = DTYPES[dtype]
    rand = functools.partial(globals()["rand"], device=device)
    if name == "rmsnorm":
        return lambda: [rand(3, n, dtype=dtype), rand(n, dtype=dtype)], tt.rmsnorm, rmsnorm64, "rmsnorm_fwd"
    if name == "softmax":
        return lambda: [rand(2, 3, n, dtype=dtype)], tt.softmax, lambda x: torch.softmax(x.double(), -1), "softmax_fwd"
    if name == "layernorm":
        return (lambda: [rand(4, n, dtype=dtype), rand(4, n, dtype=dtype), rand(n, dtype=dtype), rand(n, dtype=dtype)],
                lambda x, r, w, b: tt.layernorm(x, r, w, b, p=0.25, seed=7, offset=n)[1], None, "layernorm_fwd")
    half = "bf16" if dtype == "f32" else dtype
    if name == "attention":
        return (lambda: [rand(1, 4, n, 64, dtype=half), rand(1, 2, n, 64, dtype=half), rand(1, 2, n, 64, dtype=half)],
                lambda q, k, v: tt.attention(q, k, v, causal=True),
                lambda q, k, v: attention64(q, k, v, True), "attention_fwd")
    if name == "rotary":
        return (lambda: [rand(1, 2, n, 64, dtype=half), rand(1, 1, n, 64, dtype=half), rand(n, 32, dtype=half),
                         rand(n, 32, dtype=half)],
                lambda q, k, c, s: tt.rotary(q, k, c, s)[0], lambda q, k, c, s: rotary64(q, c, s), "rotary_fwd")
    if name == "rotary interleaved":   # the kernel's two constant tables (replay.keep)
        return (lambda: [rand(1, 2, n, 64, dtype=half), rand(1, 1, n, 64, dtype=half), rand(n, 32, dtype=half),
                         rand(n, 32, dtype=half)],
                lambda q, k, c, s: tt.rotary(q, k, c, s, interleaved=True)[1], None, "rotary_fwd")
    assert name == "matmul"
    return (lambda: [rand(n, 40, dtype=half), rand(48, 40, dtype=half)],
            lambda a, b: tt.matmul(a, b, trans_b=True, out_dtype=d), lambda a, b: a.double() @ b.double().T,
            "matmul_fwd")


OPS = ["rmsnorm", "softmax", "layernorm", "attention", "rotary", "rotary interleaved", "matmul"]


def launches(monkeypatch) -> list:
    """The op bodies' launches from now on (a replay makes none: it calls the prepared launches)."""
    seen = []
    real = ops.launch
    monkeypatch.setattr(ops, "launch", lambda *a, **k: seen.append(a[0]) or real(*a, **k))
    return seen


@settings(max_examples=14 * len(DEVICES), deadline=None)
@given(name=st.sampled_from(OPS), dtype=st.sampled_from(["bf16", "f16", "f32"]), n=st.sampled_from([16, 24, 64, 96]),
       device=st.sampled_from(DEVICES))
def test_a_second_call_replays_the_body_on_fresh_inputs(name, dtype, n, device):
    make, op, ref, body = case(name, dtype, n, device)
    memo = replay.MEMOS[body]
    memo.clear()
    op(*make())   # records the body
    ((key, recorded),) = memo.items()
    assert isinstance(recorded, replay.Replay), f"{name}: not replayed"
    with pytest.MonkeyPatch.context() as mp:
        seen = launches(mp)
        fresh = make()
        got = op(*fresh)
        assert seen == [], "the replay ran the op's body"
    if ref is not None:   # within the tolerance of the inputs' dtype (half-only ops took bf16 for f32)
        assert error64(got, ref, *fresh) <= 2 * tolerance(dtype if fresh[0].dtype == DTYPES[dtype] else "bf16")
    del memo[key]   # the body itself, on the same inputs: the same bits
    want = op(*fresh)
    assert torch.equal(got.isnan(), want.isnan()) and not got.isnan().any(), f"{name}: unwritten outputs"
    assert torch.equal(got, want), f"{name}: the replay and the body differ"


@pytest.mark.parametrize("device", DEVICES)
def test_arguments_that_share_memory_sign_apart(device):
    """attention(q, k, k) and attention(q, k, v): the same shapes, but v is k in one and not in the other. Each
    replays its own body; the second reads v, not k."""
    q, k, v = (rand(1, 2, 32, 64, device=device) for _ in range(3))
    for _ in range(2):
        same = tt.attention(q, k, k, causal=True)
        apart = tt.attention(q, k, v, causal=True)
    for out, vv in ((same, k), (apart, v)):
        assert error64(out, lambda *x: attention64(*x, True), q, k, vv) <= 2 * tolerance("bf16")
    assert replay.signature([q, k, k])[0] != replay.signature([q, k, v])[0]


def test_a_body_that_copies_an_argument_is_not_replayed(monkeypatch):
    """A strided last dim is copied contiguous inside the body: memory a replay could not find again. The body
    runs every call, and is right every call."""
    w = rand(64)
    replay.MEMOS["rmsnorm_fwd"].clear()
    for _ in range(2):
        x = rand(4, 128)[:, ::2]
        seen = launches(monkeypatch)
        y = tt.rmsnorm(x, w)
        assert seen, "the body did not run"
        ref = rmsnorm64(x, w)
        assert float((y.double() - ref).norm() / ref.norm()) <= 2 * tolerance("bf16")
    assert list(replay.MEMOS["rmsnorm_fwd"].values()) == [None]


def test_bad_input_is_refused_every_call_and_never_remembered():
    x, w = rand(4, 64), rand(32)
    before = len(replay.MEMOS["rmsnorm_fwd"])
    for _ in range(2):
        with pytest.raises(TileError, match="expected x"):
            tt.rmsnorm(x, w)
    assert len(replay.MEMOS["rmsnorm_fwd"]) == before


def test_what_the_body_reads_besides_its_arguments_is_in_the_key(monkeypatch):
    """A tuning store (the cache's generation), the cache's folder and the CPU backend choose differently: each
    records anew."""
    x, w = rand(4, 64), rand(64)
    tt.rmsnorm(x, w)
    memo = replay.MEMOS["rmsnorm_fwd"]
    n = len(memo)
    monkeypatch.setattr(tune, "generation", lambda: -1)
    tt.rmsnorm(x, w)
    monkeypatch.setenv("TILES_CACHE", "/nonexistent")
    tt.rmsnorm(x, w)
    monkeypatch.setenv("TILES_TORCH_BACKEND", "reference")
    tt.rmsnorm(x, w)
    assert len(memo) == n + 3


def test_a_replay_keeps_autograd():
    """The replay is the op's implementation: autograd still records it and runs its backward."""
    x, w = rand(4, 64).requires_grad_(), rand(64).requires_grad_()
    for _ in range(2):
        y = tt.rmsnorm(x, w)
        (gx,) = torch.autograd.grad(y.sum(), x)
    x64 = x.detach().double().requires_grad_()
    (g64,) = torch.autograd.grad(rmsnorm64(x64, w).sum(), x64)
    assert float((gx.double() - g64).norm() / g64.norm()) <= 4 * tolerance("bf16")
    assert math.isfinite(float(gx.double().sum()))


@pytest.mark.parametrize("device", DEVICES)
def test_a_backward_replays_its_temporaries_from_one_buffer(device):
    """attention's backward allocates three temporaries beside dQ, dK and dV (Delta, LSE in log2 units, the f32 dQ
    sums): a replay carves them from one scratch buffer. On fresh inputs its gradients are the body's bits, and
    float64 torch's within tolerance."""
    memo = replay.MEMOS["attention_bwd"]
    memo.clear()

    def inputs():
        make = functools.partial(rand, 1, 2, 32, 64, device=device)
        return [make().requires_grad_() for _ in range(3)] + [make()]

    def grads(q, k, v, do):
        return torch.autograd.grad(tt.attention(q, k, v, causal=True), (q, k, v), do)
    grads(*inputs())   # records
    ((_, recorded),) = memo.items()
    assert isinstance(recorded, replay.Replay) and len(recorded.offsets) == 3 and len(recorded.allocations) == 3
    fresh = inputs()
    got = grads(*fresh)   # replays
    memo.clear()
    want = grads(*fresh)   # the body
    q, k, v, do = (t.detach().cpu().double().requires_grad_(t.requires_grad) for t in fresh)
    ref = torch.autograd.grad(attention64(q, k, v, True), (q, k, v), do)   # on the CPU: error64's reason
    for name, g, w, r in zip("qkv", got, want, ref):
        assert torch.equal(g, w), f"d{name}: the replay and the body differ"
        assert float((g.cpu().double() - r).norm() / r.norm()) <= 4 * tolerance("bf16"), f"d{name}"
