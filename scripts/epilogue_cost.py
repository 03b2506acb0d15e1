"""What an epilogue costs a GEMM: docs/examples.md's linear_silu (Y = silu(X @ W + bias)) against the same kernel
with less in its epilogue, the shipped gemm, torch.mm and torch.compile's linear+SiLU, all in one process on the
same inputs (weights scaled by K^-1/2, as scripts/gpu_examples.py draws them), in rounds that alternate the order.
12-04: linear_silu took 790-806 us at 4096x14336x4096 (0.85x torch.compile) where gemm takes ~660.

    python3 scripts/epilogue_cost.py [--shape MxNxK] [--rounds N] [--set NAME=VALUE ...]"""
import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_examples import namespace  # noqa: E402

import tiles as tl  # noqa: E402
from tiles import bench  # noqa: E402
from tiles.kernels.gemm import gemm  # noqa: E402
from tiles.torch.dispatch import launch  # noqa: E402

EX = namespace()
CFG = dict(configs=EX["GEMM_CONFIGS"])


def variant(epilogue):
    """linear_silu's body with `epilogue(acc, b, bias, bn)` between the K loop and the store."""
    def body(Y, X, W, bias, *, BM, BN, BK):
        bm, bn = tl.grid(tl.cdiv(Y.rows, BM), tl.cdiv(Y.cols, BN))
        x = tl.shared(X.dtype, BM, BK)
        w = tl.shared(W.dtype, BK, BN)
        acc = tl.regs(tl.f32, BM, BN)
        b = tl.rvec(tl.f32, BN, axis="cols")
        tl.zero(acc)
        for k in tl.pipeline(tl.cdiv(X.cols, BK)):
            tl.load(x, X, (bm, k))
            tl.load(w, W, (k, bn))
            tl.mma_AB(acc, x, w, acc)
        epilogue(acc, b, bias, bn)
        tl.store(Y, acc, (bm, bn))
    body.__name__ = f"epilogue_{epilogue.__name__}"
    return tl.kernel(**CFG)(body)


def nothing(acc, b, bias, bn):
    pass


def bias_only(acc, b, bias, bn):
    tl.load(b, bias, (bn,))
    tl.add_col(acc, acc, b)


def bias_relu(acc, b, bias, bn):
    bias_only(acc, b, bias, bn)
    tl.relu(acc, acc)


def bias_silu(acc, b, bias, bn):
    bias_only(acc, b, bias, bn)
    tl.silu(acc, acc)


def silu_only(acc, b, bias, bn):
    tl.silu(acc, acc)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="4096x14336x4096")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--set", nargs="*", default=[])
    a = p.parse_args()
    m, n, k = (int(d) for d in a.shape.split("x"))
    kw = {s.split("=")[0]: eval(s.split("=")[1]) for s in a.set}
    dev, bf = "cuda", torch.bfloat16
    sets = [(torch.randn(m, k, device=dev).to(bf), (torch.randn(k, n, device=dev) * k ** -0.5).to(bf),
             torch.randn(n, device=dev)) for _ in range(3)]
    y = torch.empty(m, n, device=dev, dtype=bf)
    compiled = torch.compile(lambda x, w, b: F.silu(torch.mm(x, w).float() + b).to(bf))
    cases = {"linear_silu (example)": lambda x, w, b: launch(EX["linear_silu"], [y, x, w, b], tune=False, **kw)}
    cases.update({f"epilogue: {e.__name__}": (lambda kf: lambda x, w, b: launch(kf, [y, x, w, b], **kw))(variant(e))
                  for e in (nothing, bias_only, bias_relu, silu_only, bias_silu)})
    cases["shipped gemm"] = lambda x, w, b: launch(gemm, [y, x, w])
    cases["torch.mm"] = lambda x, w, b: torch.mm(x, w, out=y)
    cases["torch.compile linear+silu"] = compiled
    clock = bench.EventClock()
    flops = 2.0 * m * n * k
    for r in range(a.rounds):
        order = list(cases) if r % 2 == 0 else list(cases)[::-1]
        for name in order:
            t = bench.measure(lambda i: cases[name](*sets[i]), sets=len(sets), clock=clock, budget_s=0.5).median_s
            print(f"round {r} {a.shape} {name:28s} {t * 1e6:8.1f} us {flops / t / 1e12:6.0f} TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
