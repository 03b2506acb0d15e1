"""The tutorial-style kernels of docs/examples.md on a CUDA GPU against torch.compile of the same computation
(issue 18's target: >= 0.95x after `tiles tune`, no change to the source beyond its search space), at the shapes
of Llama 3 8B (hidden 4096, MLP 14336; the norm also at 70B's hidden, 8192) for a prefill of 4096 tokens and a decode step of 16:

  1. each kernel at its configured default, then tuned (`tune=True` at the call: the search compiles the space's
     survivors in child processes, checks and times the best on this device, stores the winner), then
     torch.compile'd PyTorch; all three timed in this process by tiles.bench (warm-up, median, device events,
     input sets rotated past the L2);
  2. each output checked against float64 torch on the first input set.

    python3 scripts/gpu_examples.py [--json FILE] [--only NAME ...]
    python3 scripts/gpu_examples.py --smoke      # tiny shapes on CPU tensors (the reference backend): the plumbing
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_examples import namespace  # noqa: E402  (docs/examples.md, executed)

from tiles import bench  # noqa: E402
from tiles.kernels.gemm import gemm  # noqa: E402
from tiles.testing import tolerance  # noqa: E402
from tiles.torch.dispatch import launch  # noqa: E402  (CPU tensors reach the reference backend as numpy views)

EX = namespace()
BF = torch.bfloat16
DEVICE = "cuda"


def rand(*shape, dtype=BF, scale=1.0):
    return (torch.randn(*shape, device=DEVICE) * scale).to(dtype)


POISON = [True]   # outputs filled with NaN before a checked run; a timed run allocates them as torch.compile does


def empty(*shape, dtype=BF):
    """An output: NaN-filled where it is checked, so that an element never written fails the check; unfilled where
    timed (a fill of 4096x14336 bf16 writes 117 MB, tens of microseconds that torch.compile's outputs do not pay)."""
    if POISON[0]:
        return torch.full(shape, float("nan"), device=DEVICE, dtype=dtype)
    return torch.empty(shape, device=DEVICE, dtype=dtype)


# name -> (shape label, inputs(), tiles(inputs, **kw) -> output, torch fn(inputs) -> output, float64 reference, FLOPs)
def linear_silu(m, n=14336, k=4096):
    ins = lambda: [rand(m, k), rand(k, n, scale=k ** -0.5), rand(n, dtype=torch.float32)]  # noqa: E731
    def run(x, w, b, **kw):
        y = empty(m, n)
        launch(EX["linear_silu"], [y, x, w, b], **kw)
        return y
    return (f"{m}x{n}x{k}", ins, run, lambda x, w, b: F.silu(torch.mm(x, w).float() + b).to(BF),
            lambda x, w, b: F.silu(x.double() @ w.double() + b.double()), 2.0 * m * n * k)


def bmm(z, m, n, k):
    ins = lambda: [rand(z, m, k), rand(z, k, n, scale=k ** -0.5)]  # noqa: E731
    def run(a, b, **kw):
        c = empty(z, m, n)
        launch(EX["bmm"], [c, a, b], **kw)
        return c
    return (f"{z}x{m}x{n}x{k}", ins, run, torch.bmm, lambda a, b: a.double() @ b.double(), 2.0 * z * m * n * k)


def mlp(m, hidden=4096, inner=14336):
    ins = lambda: [rand(m, hidden), rand(hidden, inner, scale=hidden ** -0.5),  # noqa: E731
                   rand(hidden, inner, scale=hidden ** -0.5), rand(inner, hidden, scale=inner ** -0.5)]
    def run(x, wg, wu, wd, **kw):
        h, y = empty(m, inner), empty(m, hidden)
        launch(EX["swiglu"], [h, x, wg, wu], **kw)
        launch(gemm, [y, h, wd], **kw)
        return y
    def eager(x, wg, wu, wd):
        return (F.silu(x @ wg) * (x @ wu)) @ wd
    def ref(x, wg, wu, wd):
        x, wg, wu, wd = (t.double() for t in (x, wg, wu, wd))
        return (F.silu(x @ wg) * (x @ wu)).to(BF).double() @ wd   # the intermediate rounds to bf16 in both
    return (f"{m}x{hidden}x{inner}", ins, run, eager, ref, 2.0 * m * hidden * inner * 3)


def add_rmsnorm(rows, cols=4096):
    ins = lambda: [rand(rows, cols), rand(rows, cols), rand(cols)]  # noqa: E731
    tile = EX["row_tile"](cols)
    view = lambda a: a.view(a.shape[0], -1, tile["K"])   # noqa: E731  (add_rmsnorm_rows's views)

    def run(x, r, w, **kw):
        y, h = empty(rows, cols), empty(rows, cols)
        launch(EX["add_rmsnorm"], [view(y), view(h), view(x), view(r), w.view(-1, tile["K"]), 1e-6], **tile, **kw)
        return y
    def eager(x, r, w):   # H as well: the residual stream goes on to the next layer (else compile skips its write)
        h = x + r
        return F.rms_norm(h, (cols,), w, 1e-6), h
    def ref(x, r, w):
        h = (x + r).double()
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
    return (f"{rows}x{cols}", ins, run, eager, ref, None)


CASES = {"linear_silu": [linear_silu(16), linear_silu(4096)],
         "bmm": [bmm(64, 1024, 1024, 512), bmm(32, 4096, 128, 4096)],
         "mlp": [mlp(16), mlp(4096)],
         "add_rmsnorm": [add_rmsnorm(16), add_rmsnorm(4096), add_rmsnorm(4096, 8192)]}
SMOKE = {"linear_silu": [linear_silu(5, 40, 24)], "bmm": [bmm(2, 5, 40, 24)], "mlp": [mlp(5, 24, 40)],
         "add_rmsnorm": [add_rmsnorm(5, 48)]}


def timed(fn, sets) -> float:
    clock = bench.EventClock() if DEVICE == "cuda" else bench.HostClock()
    POISON[0] = False
    try:
        return bench.measure(lambda i: fn(*sets[i]), sets=len(sets), clock=clock, budget_s=0.5).median_s
    finally:
        POISON[0] = True


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    p.add_argument("--only", nargs="+", choices=sorted(CASES))
    p.add_argument("--smoke", action="store_true")
    a = p.parse_args()
    logging.basicConfig(stream=sys.stderr, format="  %(message)s")   # the searches' phases as they end
    logging.getLogger("tiles.tune").setLevel(logging.INFO)
    global DEVICE
    cases = SMOKE if a.smoke else CASES
    DEVICE = "cpu" if a.smoke else "cuda"
    rows, ok = [], True   # ok: every row checked within tolerance, none cut
    print(f"{torch.cuda.get_device_name() if DEVICE == 'cuda' else 'CPU (reference backend)'}; torch {torch.__version__}")
    print("| kernel | shape | default us | tuned us | torch.compile us | tuned / compile | check |")
    print("|---|---|---|---|---|---|---|")
    try:
        measure(cases, a.only or list(cases), rows)
    except KeyboardInterrupt:   # a time limit's SIGINT: keep the rows measured so far
        print("  (interrupted: the rows so far)", file=sys.stderr)
        ok = False
    ok = ok and all(r["ok"] for r in rows)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0 if ok else 1


def measure(cases, names, rows) -> None:
    for name in names:
        for label, ins, run, eager, ref, flops in cases[name]:
            first = ins()
            per_set = sum(t.numel() * t.element_size() for t in first)
            sets = [first] + [ins() for _ in range(bench.input_sets(per_set) - 1)]
            compiled = torch.compile(eager)
            clock = time.perf_counter()
            run(*first, tune=True)                     # the search, at this shape's bucket, before any timing
            searched = time.perf_counter() - clock
            out, want = run(*first), ref(*first)
            err = float((out.double() - want).norm() / want.norm())
            good = err <= tolerance("bf16") * 2        # two roundings: the output, and the bf16 intermediate
            t_def = timed(lambda *s: run(*s, tune=False), sets)
            t_tuned = timed(run, sets)
            clock = time.perf_counter()
            t_torch = timed(compiled, sets)
            print(f"  ({name} {label}: search {searched:.1f} s, torch.compile and its timing "
                  f"{time.perf_counter() - clock:.1f} s)", file=sys.stderr, flush=True)
            row = dict(kernel=name, shape=label, default_us=t_def * 1e6, tuned_us=t_tuned * 1e6,
                       compile_us=t_torch * 1e6, ratio=t_torch / t_tuned, rel_err=err, ok=good,
                       tflops=flops / t_tuned / 1e12 if flops else None)
            rows.append(row)
            print(f"| {name} | {label} | {row['default_us']:.1f} | {row['tuned_us']:.1f} | {row['compile_us']:.1f} "
                  f"| {row['ratio']:.2f}x | {'ok' if good else 'FAIL'} {err:.2g} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
