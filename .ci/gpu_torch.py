"""tiles.torch on an NVIDIA GPU (issue 19): run from the repo root as `python3 .ci/gpu_torch.py` (or `.ci/gpu torch`).

  1. torch.library.opcheck of every op on CUDA tensors;
  2. every op's output and gradients against float64 torch; attention: causal and not, MHA and GQA, head dim 64
     and 128 (32, 96 and 256: GQA, bf16), N not a multiple of any block (and N_kv != N);
  3. CUDA graph capture of the tiles model's forward and backward, replayed against eager;
  4. torch.compile(fullgraph=True) (Inductor) of the tiles model and of the stock one;
  5. a bf16 (autocast, float32 master weights) training run from one seed, tiles vs stock (SDPA), on a synthetic
     Markov language, and the step times of stock eager, stock compiled, tiles eager, tiles compiled.

Writes under $OUT/torch (default /tmp/tiles-gpu/torch): summary.json (every check, pass or fail, with its
numbers), loss_curves.json (+ loss_curves.png where matplotlib is installed), step_times.json. Exits 1 if a check
failed. Budget: --budget seconds in all (default 450); a section that would start past it is skipped, and said so.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import os
import pstats
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the checkout's tiles when run from the repo

import tiles.torch as tt  # noqa: E402
from tiles import philox  # noqa: E402
from tiles.testing import tolerance  # noqa: E402
from tiles.torch import ops  # noqa: E402
from tiles.torch.llama import Config, Llama  # noqa: E402

DEV = "cuda"
results: dict = {"checks": [], "skipped": []}
T0 = time.time()


def rel(out, ref) -> float:
    out, ref = out.detach().double(), ref.detach().double()
    if not torch.isfinite(out).all():
        return float("inf")
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


def record(name: str, ok: bool, **numbers):
    results["checks"].append({"name": name, "ok": bool(ok), **numbers})
    print(f"{'PASS' if ok else 'FAIL'} {name} {json.dumps(numbers, default=str)}", flush=True)


def section(name: str, budget: float):
    """Decorator: run a section unless past the budget; an exception is a failed check, not the end."""
    def wrap(fn):
        def run(*a, **k):
            if time.time() - T0 > budget:
                results["skipped"].append(name)
                print(f"SKIP {name}: past the budget", flush=True)
                return None
            t = time.time()
            try:
                return fn(*a, **k)
            except Exception as e:  # noqa: BLE001 - reported, and the next section runs
                record(f"{name}: raised", False, error=f"{type(e).__name__}: {e}", trace=traceback.format_exc()[-3000:])
            finally:
                print(f"== {name}: {time.time() - t:.1f} s", flush=True)
                save()   # what is done so far survives a kill at the step's time limit
        return run
    return wrap


OUT_DIR = Path("/tmp/tiles-gpu/torch")


def save():
    results["elapsed_s"] = round(time.time() - T0, 1)
    results["failed"] = [c["name"] for c in results["checks"] if not c["ok"]]
    (OUT_DIR / "summary.json").write_text(json.dumps(results, indent=1, default=str))


def rand(*shape, dtype=torch.bfloat16, grad=False, scale=1.0):
    return (torch.randn(*shape, device=DEV, dtype=torch.float32) * scale).to(dtype).requires_grad_(grad)


def f64(*ts):
    return [t.detach().double().requires_grad_(True) for t in ts]


def check_grads(name, fn, ref_fn, inputs, dys, dtype="bf16", factor=2.0):
    out = fn(*inputs)
    out = out if isinstance(out, tuple) else (out,)
    g = torch.autograd.grad(out, [t for t in inputs if t.requires_grad], dys)
    r_in = f64(*[t for t in inputs])
    ref = ref_fn(*r_in)
    ref = ref if isinstance(ref, tuple) else (ref,)
    rg = torch.autograd.grad(ref, [t for t, s in zip(r_in, inputs) if s.requires_grad], [d.double() for d in dys])
    errs = {f"out{i}": rel(o, r) for i, (o, r) in enumerate(zip(out, ref))}
    errs.update({f"grad{i}": rel(a, b) for i, (a, b) in enumerate(zip(g, rg))})
    tol = tolerance(dtype)
    ok = all(v <= tol for k, v in errs.items() if k.startswith("out")) and \
        all(v <= factor * tol for k, v in errs.items() if k.startswith("grad"))
    record(name, ok, tol_out=tol, tol_grad=factor * tol, **{k: round(v, 6) for k, v in errs.items()})


# ---- 1. opcheck ----------------------------------------------------------------------------------------------------

def opcheck_cases():
    q, k, v = rand(2, 4, 200, 64, grad=True), rand(2, 2, 200, 64, grad=True), rand(2, 2, 200, 64, grad=True)
    o, lse = ops.attention_fwd(q, k, v, True, 0.125, "")
    x, w = rand(300, 512, grad=True), rand(512, dtype=torch.float32, grad=True)
    cos = torch.rand(200, 32, device=DEV).bfloat16()
    fp8 = lambda *s: rand(*s).to(torch.float8_e4m3fn)  # noqa: E731
    return {
        "attention_fwd": (ops.attention_fwd, (q, k, v, True, 0.125, "")),
        "attention_bwd": (ops.attention_bwd, (rand(2, 4, 200, 64), q.detach(), k.detach(), v.detach(), o.detach(),
                                              lse.detach(), True, 0.125, "")),
        "layernorm": (ops.layernorm_fwd, (x, rand(300, 512, grad=True), w, rand(512, dtype=torch.float32, grad=True),
                                          1e-5, 0.1, 7, 0, "")),
        "layernorm_one_pass": (ops.layernorm_fwd, (x, rand(300, 512, grad=True), w, w.detach().clone().requires_grad_(),
                                                   1e-5, 0.0, 0, 0, "")),
        "rmsnorm": (ops.rmsnorm_fwd, (x, rand(512, grad=True), 1e-6, "")),
        "rotary": (ops.rotary_fwd, (q, k, cos, cos, False, "")),
        "rotary_interleaved": (ops.rotary_fwd, (q, k, cos, cos, True, "")),
        "softmax": (ops.softmax_fwd, (x, "")),
        "matmul": (ops.matmul_fwd, (x, rand(512, 256, grad=True), False, torch.float32, "")),
        "matmul_fp8": (ops.matmul_fp8, (fp8(256, 512), fp8(128, 512), 0.5, 2.0, "")),
    }


def opcheck_all(budget):
    @section("opcheck", budget)
    def run():
        for name, (op, args) in opcheck_cases().items():
            # test_schema compares values through float8 arithmetic torch does not have
            every = torch.library.opcheck.__kwdefaults__["test_utils"]
            utils = {"test_utils": [u for u in every if u != "test_schema"]} if name == "matmul_fp8" else {}
            try:
                torch.library.opcheck(op.overload, args, **utils)
                record(f"opcheck {name}", True)
            except Exception as e:  # noqa: BLE001
                record(f"opcheck {name}", False, error=f"{type(e).__name__}: {str(e)[:2000]}")
    run()


# ---- 2. every op against float64 -------------------------------------------------------------------------------------

def sdpa64(q, k, v, causal, scale):
    g = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), is_causal=causal,
                                          scale=scale)


def numerics(budget):
    @section("attention gradients vs float64", budget)
    def attention():
        # 64 and 128 in both dtypes, MHA and GQA; 32, 96 and 256 (configured from the resource reports alone) in
        # bf16, GQA
        for d in (32, 64, 96, 128, 256):
            for causal in (False, True):
                for h, h_kv in ((8, 8), (8, 2)) if d in (64, 128) else ((8, 2),):
                    for dtype in (torch.bfloat16, torch.float16) if d in (64, 128) else (torch.bfloat16,):
                        n, n_kv = 333, (333 if causal else 200)   # not a multiple of any block; N_kv != N
                        q = rand(2, h, n, d, dtype=dtype, grad=True)
                        k = rand(2, h_kv, n_kv, d, dtype=dtype, grad=True)
                        v = rand(2, h_kv, n_kv, d, dtype=dtype, grad=True)
                        do = rand(2, h, n, d, dtype=dtype)
                        name = "bf16" if dtype == torch.bfloat16 else "f16"
                        check_grads(f"attention D{d} {'causal' if causal else 'full'} H{h}/{h_kv} N{n}/{n_kv} {name}",
                                    lambda *x: tt.attention(*x, causal=causal),
                                    lambda *x: sdpa64(*x, causal, 1 / math.sqrt(d)), (q, k, v), (do,), name)

    @section("other ops vs float64", budget)
    def others():
        x, r = rand(4, 300, 1000, grad=True), rand(4, 300, 1000, grad=True)
        w, b = rand(1000, dtype=torch.float32, grad=True), rand(1000, dtype=torch.float32, grad=True)
        dy, dh = rand(4, 300, 1000), rand(4, 300, 1000)
        check_grads("layernorm (two-pass, no dropout)", lambda *a: tt.layernorm(*a), lambda x, r, w, b: (
            F.layer_norm(r + x, (1000,), w, b, 1e-5), r + x), (x, r, w, b), (dy, dh))
        u = philox.uniform(11, 5, np.arange(1200)[:, None], np.arange(1000)[None, :])
        keep = torch.from_numpy(u >= 0.2).to(DEV).view(4, 300, 1000)
        check_grads("layernorm with dropout 0.2", lambda *a: tt.layernorm(*a, p=0.2, seed=11, offset=5),
                    lambda x, r, w, b: (F.layer_norm(r + torch.where(keep, x / 0.8, 0.0), (1000,), w, b, 1e-5),
                                        r + torch.where(keep, x / 0.8, 0.0)), (x, r, w, b), (dy, dh))
        x2, r2 = rand(4, 300, 1024, grad=True), rand(4, 300, 1024, grad=True)
        w2, b2 = rand(1024, dtype=torch.float32, grad=True), rand(1024, dtype=torch.float32, grad=True)
        check_grads("layernorm (one pass)", lambda *a: tt.layernorm(*a), lambda x, r, w, b: (
            F.layer_norm(r + x, (1024,), w, b, 1e-5), r + x), (x2, r2, w2, b2),
            (rand(4, 300, 1024), rand(4, 300, 1024)))
        xs, ws = rand(4, 300, 4096, grad=True), rand(4096, grad=True)
        check_grads("rmsnorm", lambda *a: tt.rmsnorm(*a), lambda x, w: x * torch.rsqrt(
            x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, (xs, ws), (rand(4, 300, 4096),))
        q, k = rand(2, 16, 333, 128, grad=True), rand(2, 4, 333, 128, grad=True)
        ang = torch.arange(333, device=DEV, dtype=torch.float64)[:, None] * 1e4 ** (
            -torch.arange(0, 128, 2, device=DEV, dtype=torch.float64) / 128)
        cos, sin = ang.cos().bfloat16(), ang.sin().bfloat16()

        def rot64(x, inter):
            c, s = cos.double(), sin.double()
            if inter:
                a, bb = x[..., 0::2], x[..., 1::2]
                return torch.stack((a * c - bb * s, bb * c + a * s), -1).flatten(-2)
            a, bb = x.chunk(2, -1)
            return torch.cat((a * c - bb * s, bb * c + a * s), -1)
        for inter in (False, True):
            check_grads(f"rotary {'interleaved' if inter else 'half-split'}",
                        lambda a, bb: tt.rotary(a, bb, cos, sin, interleaved=inter),
                        lambda a, bb: (rot64(a, inter), rot64(bb, inter)), (q, k), (rand(*q.shape), rand(*k.shape)),
                        factor=1.0)
        for cols in (1000, 4096):
            xm = rand(300, cols, grad=True, scale=3.0)
            check_grads(f"softmax {cols}", tt.softmax, lambda a: a.softmax(-1), (xm,), (rand(300, cols),))
        a, bm = rand(1000, 700, grad=True), rand(700, 900, grad=True)
        check_grads("matmul", lambda x, y: tt.matmul(x, y), lambda x, y: x @ y, (a, bm), (rand(1000, 900),))
        check_grads("matmul trans_b f32 out", lambda x, y: tt.matmul(x, y, trans_b=True, out_dtype=torch.float32),
                    lambda x, y: x @ y.T, (a, rand(900, 700, grad=True)), (rand(1000, 900, dtype=torch.float32),))
        check_grads("matmul trans_a trans_b", lambda x, y: tt.matmul(x, y, trans_a=True, trans_b=True),
                    lambda x, y: x.T @ y.T, (rand(700, 1000, grad=True), rand(900, 700, grad=True)), (rand(1000, 900),))
        a8, b8 = rand(1000, 512).to(torch.float8_e4m3fn), rand(900, 512).to(torch.float8_e4m3fn)
        e = rel(tt.matmul_fp8(a8, b8, 0.5, 2.0), a8.double() @ b8.double().T)
        record("matmul_fp8", e <= tolerance("bf16"), rel=round(e, 6))

    attention()
    others()


# ---- the model ---------------------------------------------------------------------------------------------------

CONFIG = Config(vocab=4096, dim=1024, layers=4, heads=8, kv_heads=2, ffn=2752, max_seq=1024)   # head dim 128, GQA 4:1
BATCH, SEQ = 8, 1024


class Markov:
    """A synthetic language with something to learn: each token has 4 successors (a fixed random table), drawn
    uniformly, so the best loss is log 4 = 1.386 nats, from log(vocab) = 8.3 at the start."""

    def __init__(self, vocab: int, seed: int = 0):
        g = torch.Generator(device="cpu").manual_seed(seed)
        self.next = torch.randint(0, vocab, (vocab, 4), generator=g).to(DEV)
        self.gen = torch.Generator(device=DEV).manual_seed(seed + 1)
        self.vocab = vocab

    def batches(self, count: int, b: int, n: int) -> torch.Tensor:
        """count batches of b sequences of n + 1 tokens, (count, b, n + 1), made in one walk over the positions."""
        tok = torch.empty(count * b, n + 1, dtype=torch.long, device=DEV)
        tok[:, 0] = torch.randint(0, self.vocab, (count * b,), device=DEV, generator=self.gen)
        choice = torch.randint(0, 4, (count * b, n), device=DEV, generator=self.gen)
        for i in range(n):
            tok[:, i + 1] = self.next[tok[:, i], choice[:, i]]
        return tok.view(count, b, n + 1)


def make_models(seed=0):
    torch.manual_seed(seed)
    stock = Llama(CONFIG).to(DEV)
    tiles = Llama(CONFIG, tiles=True).to(DEV)
    tiles.load_state_dict(stock.state_dict())
    return stock, tiles


def forward_backward(model, tokens):
    # no autocast cache: a cached cast would be made once, outside a captured graph's replays
    with torch.autocast(DEV, dtype=torch.bfloat16, cache_enabled=False):
        _, loss = model(tokens[:, :-1], tokens[:, 1:])
    loss.backward()
    return loss.detach()


def train_step(model, opt, tokens):
    opt.zero_grad(set_to_none=True)
    loss = forward_backward(model, tokens)
    opt.step()
    return loss


def graphs(budget):
    @section("CUDA graph capture", budget)
    def run():
        _, model = make_models(1)
        tokens = Markov(CONFIG.vocab).batches(1, 2, 256)[0]
        params = list(model.parameters())
        fwd_bwd = lambda: forward_backward(model, tokens)  # noqa: E731

        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):   # warm-up: compiles and loads every kernel before the capture
            for _ in range(2):
                for p in params:
                    p.grad = None
                fwd_bwd()
        torch.cuda.current_stream().wait_stream(s)
        eager = [p.grad.clone() for p in params]
        for p in params:
            p.grad = None
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            loss = fwd_bwd()
        for p in params:   # the graph's gradients accumulate into these
            p.grad.zero_()
        g.replay()
        torch.cuda.synchronize()
        worst = max(rel(p.grad, e) for p, e in zip(params, eager))
        record("CUDA graph: tiles model forward+backward captured and replayed",
               worst <= 1e-2 and bool(torch.isfinite(loss)), worst_grad_rel_vs_eager=round(worst, 6), loss=float(loss))
    run()


def timed_steps(model, opt, batches, warm=3):
    for tok in batches[:warm]:
        train_step(model, opt, tok)
    torch.cuda.synchronize()
    times = []
    for tok in batches[warm:]:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        train_step(model, opt, tok)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def compiled_and_timed(budget, out: Path, n: int):
    @section("torch.compile(fullgraph=True) and step times", budget)
    def run():
        batches = Markov(CONFIG.vocab, seed=5).batches(n + 4, BATCH, SEQ)
        stock, tiles = make_models(2)
        times = {}
        for name, model in (("stock SDPA eager", stock), ("tiles eager", tiles)):
            opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
            times[name] = timed_steps(model, opt, batches)
        for name, model in (("stock SDPA compiled", stock), ("tiles compiled", tiles)):
            torch._dynamo.reset()
            cm = torch.compile(model, fullgraph=True)
            opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
            t = time.time()
            train_step(cm, opt, batches[0])   # compiles forward and backward: a graph break raises here
            torch.cuda.synchronize()
            record(f"torch.compile(fullgraph=True): {name.split()[0]} model", True, compile_s=round(time.time() - t, 1))
            times[name] = timed_steps(cm, opt, batches[1:])
        times = {k: round(v, 3) for k, v in times.items()}
        (out / "step_times.json").write_text(json.dumps({
            "unit": "ms per training step (median), forward + backward + fused AdamW, autocast bf16",
            "config": vars(CONFIG), "batch": BATCH, "seq": SEQ, "device": torch.cuda.get_device_name(), **times},
            indent=1))
        print("step times (ms):", times, flush=True)
        results["step_times_ms"] = times
    run()


def profile_steps(out: Path, n: int = 3, graphs: bool = True):
    """Where a step's time goes: torch.profiler over n steps of the tiles model, eager and compiled (host time and
    device time per op, top 20 each), and how often an op's body ran again in steady steps (a signature not seen
    before records anew: tiles/torch/replay.py) or the cuda runtime's launch memo missed (a miss traces, checks and
    packs the launch again)."""
    from torch.profiler import ProfilerActivity, profile
    from tiles import backend as backends
    from tiles.torch import replay
    rt = backends.get("cuda").runtime

    def signatures():   # (replayed, not replayable) signatures over every op
        kinds = [type(r).__name__ for m in replay.MEMOS.values() for r in m.values()]
        return kinds.count("Replay"), kinds.count("NoneType")
    batches = Markov(CONFIG.vocab, seed=9).batches(n + 8, BATCH, SEQ)
    _, tiles = make_models(3)
    report = []
    for name, model in (("tiles eager", tiles), ("tiles compiled", torch.compile(tiles, fullgraph=True))):
        opt = torch.optim.AdamW(tiles.parameters(), lr=3e-4, fused=True)
        for tok in batches[:4]:
            train_step(model, opt, tok)
        torch.cuda.synchronize()
        memo, recorded = len(rt.launches), signatures()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for tok in batches[4:4 + n]:
                train_step(model, opt, tok)
            torch.cuda.synchronize()
        avg = prof.key_averages()
        # the host's Python by function (torch.profiler sees ops, not the Python inside a custom op)
        py = cProfile.Profile()
        py.enable()
        for tok in batches[4:4 + n]:
            train_step(model, opt, tok)
        torch.cuda.synchronize()
        py.disable()
        calls = io.StringIO()
        pstats.Stats(py, stream=calls).sort_stats("tottime").print_stats(30)
        report += [f"# {name}: {n} steps; launch memo entries {memo} -> {len(rt.launches)}; op signatures (replayed, "
                   f"not replayable) {recorded} -> {signatures()}",
                   avg.table(sort_by="self_cpu_time_total", row_limit=20),
                   avg.table(sort_by="self_cuda_time_total", row_limit=20),
                   f"# {name}: the host's Python over {n} steps (cProfile, by own time)", calls.getvalue()]
    text = "\n".join(report)
    (out / "profile.txt").write_text(text)
    print(text[-6000:], flush=True)
    if not graphs:
        return
    # the same steps with the host out of the way: compiled with CUDA graphs (torch.compile's "reduce-overhead")
    times = {}
    for name, model in zip(("stock", "tiles"), make_models(4)):
        torch._dynamo.reset()
        cm = torch.compile(model, fullgraph=True, mode="reduce-overhead")
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
        times[f"{name} compiled, CUDA graphs"] = round(timed_steps(cm, opt, batches, warm=4), 3)
    (out / "step_times_graphs.json").write_text(json.dumps(times, indent=1))
    print("step times (ms):", times, flush=True)


def training(budget, out: Path, steps: int):
    @section("training run: tiles vs stock", budget)
    def run():
        curves = {}
        batches = Markov(CONFIG.vocab, seed=7).batches(steps, BATCH, SEQ)   # the same batches for both
        for name, model in zip(("stock", "tiles"), make_models(3)):
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0, fused=True)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
            losses = []
            for tok in batches:
                losses.append(train_step(model, opt, tok))
                sched.step()
            curves[name] = [float(x) for x in torch.stack(losses).cpu()]
        s, t = curves["stock"], curves["tiles"]
        diffs = [abs(a - b) for a, b in zip(s, t)]
        tail = min(50, steps)
        stats = dict(steps=steps, first=(round(s[0], 4), round(t[0], 4)), last=(round(s[-1], 4), round(t[-1], 4)),
                     mean_abs_diff=round(statistics.mean(diffs), 5), max_abs_diff=round(max(diffs), 5),
                     tail_mean_diff=round(abs(statistics.mean(s[-tail:]) - statistics.mean(t[-tail:])), 5))
        # tolerance: the curves within 0.05 nats on average over the run, their last 50 steps' means within 0.03
        ok = stats["mean_abs_diff"] <= 0.05 and stats["tail_mean_diff"] <= 0.03 and all(map(math.isfinite, t))
        record("training: tiles loss curve tracks stock's", ok, **stats)
        (out / "loss_curves.json").write_text(json.dumps({"config": vars(CONFIG), "batch": BATCH, "seq": SEQ,
                                                          "optimizer": "AdamW lr 1e-3, 20 warm-up steps, autocast bf16",
                                                          "stats": stats, **curves}))
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib is not installed: loss_curves.json only", flush=True)
            return
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(s, label="stock (SDPA)", lw=1)
        ax.plot(t, label="tiles (attention, RMSNorm, rotary)", lw=1, ls="--")
        ax.axhline(math.log(4), color="grey", lw=0.5, label="best possible (log 4)")
        ax.set_xlabel("step")
        ax.set_ylabel("loss (nats)")
        ax.set_title(f"Llama-style {CONFIG.layers}x{CONFIG.dim}, bf16, {torch.cuda.get_device_name()}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "loss_curves.png", dpi=120)
    run()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp/tiles-gpu"), "torch"))
    ap.add_argument("--budget", type=float, default=450.0)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--timed-steps", type=int, default=20)
    ap.add_argument("--profile", action="store_true", help="only profile_steps: where a step's time goes")
    ap.add_argument("--no-graphs", action="store_true", help="--profile without the CUDA-graph step times")
    ap.add_argument("--only", default="", help="comma-separated sections to run (opcheck, numerics, graphs, "
                                               "training, compiled); default: all")
    ap.add_argument("--device", default="cuda",
                    help="cpu: only the op checks, on the reference interpreter (a dry run)")
    a = ap.parse_args()
    global DEV, OUT_DIR
    DEV = a.device
    out = OUT_DIR = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    results.update(device=torch.cuda.get_device_name() if DEV == "cuda" else DEV, torch=torch.__version__,
                   backend=tt.backend_name(torch.device(DEV)))
    print(json.dumps({k: results[k] for k in ("device", "torch", "backend")}), flush=True)
    if a.profile:
        return profile_steps(out, graphs=not a.no_graphs)
    b = a.budget   # each section starts only before its share of the budget has gone
    run = set(a.only.split(",")) if a.only else {"opcheck", "numerics", "graphs", "training", "compiled"}
    if "opcheck" in run:
        opcheck_all(b * 0.2)
    if "numerics" in run:
        numerics(b * 0.35)
    if DEV == "cuda":
        if "graphs" in run:
            graphs(b * 0.45)
        if "training" in run:
            training(b * 0.55, out, a.steps)
        if "compiled" in run:
            compiled_and_timed(b * 0.7, out, a.timed_steps)
    save()
    failed = results["failed"]
    print(f"{len(results['checks']) - len(failed)} passed, {len(failed)} failed" +
          (f", skipped: {', '.join(results['skipped'])}" if results["skipped"] else ""), flush=True)
    sys.exit(1 if failed or results["skipped"] else 0)


if __name__ == "__main__":
    main()
