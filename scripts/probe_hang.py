"""Which configurations of a kernel hang on a CUDA GPU: each launched alone in a child process under a time limit
(a hung launch cannot be recovered in its process), then checked against float64 torch on the same inputs.

    python3 scripts/probe_hang.py KERNEL SHAPE ['CONFIG' ...] [--ranked N] [--limit S] [--groups N]

KERNEL: docs/examples.md's linear_silu or bmm, or the shipped gemm; SHAPE: MxNxK (bmm: ZxMxNxK); CONFIG: a
dict's keywords (`BM=128, BN=64, workers=2`). --ranked N adds the configurations a tune=True search would time
on sm_90a (the static model's best N and the default, as tiles.tune.search ranks them). --groups lifts the
warp-specialized schedule's consumer-warpgroup cap (schedules.MAX_CONSUMER_GROUPS) in the children, to find out
what a refused count does."""
import argparse
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import sys, time, torch
sys.path.insert(0, "tests")
from tiles.torch.dispatch import launch
from tiles.backends.cuda import schedules
schedules.MAX_CONSUMER_GROUPS = int(sys.argv[4])
name, dims, cfg = sys.argv[1], [int(d) for d in sys.argv[2].split("x")], eval(f"dict({sys.argv[3]})")
r = lambda *s, scale=1.0: (torch.randn(*s, device="cuda") * scale).bfloat16()
nan = lambda *s, dtype=torch.bfloat16: torch.full(s, float("nan"), device="cuda", dtype=dtype)
if name == "bmm":
    z, m, n, k = dims
    ins, out = [r(z, m, k), r(z, k, n, scale=k ** -0.5)], nan(z, m, n)
    want = lambda: ins[0].double() @ ins[1].double()
else:
    m, n, k = dims
    ins = [r(m, k), r(k, n, scale=k ** -0.5)] + ([torch.randn(n, device="cuda")] if name == "linear_silu" else [])
    out = nan(m, n)
    want = (lambda: torch.nn.functional.silu(ins[0].double() @ ins[1].double() + ins[2].double())) \\
        if name == "linear_silu" else (lambda: ins[0].double() @ ins[1].double())
if name == "gemm":
    from tiles.kernels.gemm import gemm as kfn
else:
    from test_examples import namespace
    kfn = namespace()[name]
launch(kfn, [out] + ins, tune=False, **cfg); torch.cuda.synchronize()
err = ((out.double() - want()).norm() / want().norm()).item()
t = time.perf_counter()
for _ in range(20):
    launch(kfn, [out] + ins, tune=False, **cfg)
torch.cuda.synchronize()
print(f"ok rel err {err:.2g}, {(time.perf_counter() - t) / 20 * 1e6:.1f} us a launch (host clock)")
"""


def ranked(kernel: str, shape: str, top: int) -> list[str]:
    """The configurations a tune=True search times on sm_90a, best first, as CONFIG strings."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from test_examples import namespace

    from tiles.tune.search import _to_time, candidates, prune, rank
    from tiles.tune.space import Shaped
    dims = [int(d) for d in shape.split("x")]
    if kernel == "bmm":
        z, m, n, k = dims
        args = [Shaped((z, m, n), "bf16"), Shaped((z, m, k), "bf16"), Shaped((z, k, n), "bf16")]
    else:
        m, n, k = dims
        args = [Shaped((m, n), "bf16"), Shaped((m, k), "bf16"), Shaped((k, n), "bf16")] + (
            [Shaped((n,), "f32")] if kernel == "linear_silu" else [])
    if kernel == "gemm":
        from tiles.kernels.gemm import gemm as kfn
    else:
        kfn = namespace()[kernel]
    cands = candidates(kfn, "sm_90a", args, {})
    prune(kfn, "sm_90a", args, cands, {}, top=top)
    return [", ".join(f"{k}={v!r}" for k, v in c.config.items())
            for c in _to_time(rank(kfn, "sm_90a", args, cands, {}), cands, top)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kernel", choices=["linear_silu", "bmm", "gemm"])
    p.add_argument("shape")
    p.add_argument("configs", nargs="*")
    p.add_argument("--ranked", type=int, default=0)
    p.add_argument("--limit", type=float, default=20)
    p.add_argument("--groups", type=int, default=3)
    a = p.parse_args()
    for cfg in a.configs + (ranked(a.kernel, a.shape, a.ranked) if a.ranked else []):
        t = time.perf_counter()
        try:
            r = subprocess.run([sys.executable, "-c", CHILD, a.kernel, a.shape, cfg, str(a.groups)],
                               capture_output=True, text=True, timeout=a.limit)
            out = r.stdout.strip() or (r.stderr.strip().splitlines() or ["?"])[-1]
            print(f"{a.kernel} {a.shape} {cfg:55s} {time.perf_counter() - t:5.1f} s  {out}", flush=True)
        except subprocess.TimeoutExpired:
            print(f"{a.kernel} {a.shape} {cfg:55s} HANG (no end after {a.limit:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
