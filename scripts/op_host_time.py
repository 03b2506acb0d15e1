"""Host time per call of the tiles.torch ops at tiny shapes (the GPU never the limit), beside torch's own op for
the same job, and the layers of one rmsnorm call apart: the whole op (replayed, where the tree has replay.py), its
body without the dispatcher, the backend's launch (tune.resolve, the plan's steps, the runtime), the runtime's
launch alone, and the launch prepared once (Backend.prepare: what a replay calls). Median of 7 rounds of 500
calls, one sync at each round's end; on a GPU the queue never fills (500 launches).

    python3 scripts/op_host_time.py [cuda|cpu|stub]   # stub: CPU tensors with every kernel launch a no-op, 5000 calls
                                                        # a round (the host's share on a machine without a GPU)"""
from __future__ import annotations

import statistics
import sys
import time

import torch
import torch.nn.functional as F

import tiles.torch as tt
from tiles import backend as backends
from tiles.kernels import rmsnorm as R
from tiles.torch import dispatch, ops

MODE = sys.argv[1] if len(sys.argv) > 1 else "cuda"
DEV = "cpu" if MODE == "stub" else MODE
CALLS = {"cuda": 500, "stub": 5000}.get(MODE, 3)
bf = torch.bfloat16
if MODE == "stub":
    backends.Backend.launch = lambda self, *args, **consts: None
    backends.HostPrepared.__call__ = lambda self, addresses: None


def per_call_us(f, n=CALLS, rounds=7) -> float:
    for _ in range(50 if CALLS > 3 else 1):
        f()
    out = []
    for _ in range(rounds):
        if DEV == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        out.append((time.perf_counter() - t0) / n)
        if DEV == "cuda":
            torch.cuda.synchronize()
    return statistics.median(out) * 1e6


def main():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 1024, generator=g).to(DEV, bf)
    w = torch.randn(1024, generator=g).to(DEV, bf)
    q = torch.randn(1, 4, 128, 64, generator=g).to(DEV, bf)
    k = torch.randn(1, 2, 128, 64, generator=g).to(DEV, bf)
    cos, sin = torch.randn(128, 32, generator=g).to(DEV, bf), torch.randn(128, 32, generator=g).to(DEV, bf)
    qg, kg, xg = q.clone().requires_grad_(), k.clone().requires_grad_(), x.clone().requires_grad_()
    do = torch.randn_like(q)

    def backward(attend):   # forward, then autograd's backward of it: the backward op's host time and autograd's
        return lambda: torch.autograd.grad(attend(), (qg, kg), do)
    rows = [
        ("rmsnorm", lambda: tt.rmsnorm(x, w), "F.rms_norm", lambda: F.rms_norm(x, (1024,), w, 1e-6)),
        ("rms (grad)", lambda: tt.rmsnorm(xg, w), "F.rms_norm (grad)", lambda: F.rms_norm(xg, (1024,), w, 1e-6)),
        ("softmax", lambda: tt.softmax(x), "torch.softmax", lambda: torch.softmax(x, -1)),
        ("attention", lambda: tt.attention(q, k, k, causal=True), "F.scaled_dot_product_attention",
         lambda: F.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True)),
        ("attn fwd+bwd", backward(lambda: tt.attention(qg, kg, kg, causal=True)), "SDPA fwd+bwd",
         backward(lambda: F.scaled_dot_product_attention(qg, kg, kg, is_causal=True, enable_gqa=True))),
        ("rotary", lambda: tt.rotary(q, k, cos, sin), "torch (4 muls, 2 adds, cat)",
         lambda: (torch.cat((q[..., :32] * cos - q[..., 32:] * sin, q[..., 32:] * cos + q[..., :32] * sin), -1))),
    ]
    print(f"host us per call, {DEV}, torch {torch.__version__}")
    for name, f, tname, tf in rows:
        print(f"  tiles.torch.{name:<10} {per_call_us(f):8.1f}    {tname:<32} {per_call_us(tf):8.1f}")
    if DEV != "cuda":   # the reference interpreter takes numpy views (dispatch.launch): its layers are not these
        return
    # one rmsnorm call's layers
    b = backends.get(dispatch.backend_name(x.device))
    y, rstd = torch.empty_like(x), torch.empty(16, 1, dtype=torch.float32, device=DEV)
    plan = R.launch_plan(16, 1024)
    kk = plan["K"]
    v = lambda t: t.view(t.shape[0], -1, kk)  # noqa: E731
    args = [v(y), rstd, v(x), w.reshape(-1, kk), 1e-6]
    # the op's body without the dispatcher around it (replayed from its second call)
    body = per_call_us(lambda: ops.rmsnorm_fwd.__wrapped__(x, w, 1e-6, ""))
    print(f"  rmsnorm's layers: the op {per_call_us(lambda: tt.rmsnorm(x, w)):.1f}, its body alone {body:.1f}, "
          f"dispatch.launch {per_call_us(lambda: dispatch.launch(R.rmsnorm_rows, args, **plan)):.1f}, "
          f"Backend.launch {per_call_us(lambda: b.launch(R.rmsnorm_rows, args, **plan)):.1f}, "
          f"runtime.launch {per_call_us(lambda: b.runtime.launch(R.rmsnorm_rows, args, dict(plan))):.1f}")
    if hasattr(b, "prepare"):
        prepared = b.prepare(R.rmsnorm_rows, args, **plan)
        addresses = [a.data_ptr() if isinstance(a, torch.Tensor) else 0 for a in args]
        print(f"  the prepared launch {per_call_us(lambda: prepared(addresses)):.1f}, torch.empty x2 "
              f"{per_call_us(lambda: (torch.empty_like(x), torch.empty(16, device=DEV))):.1f}")


if __name__ == "__main__":
    main()
