"""docs/examples.md's add_rmsnorm at a decode step's rows against torch.compile's kernel, for a profiler: each
run `--runs` times, configurations in turn, then the compiled PyTorch. Timed too (tiles.bench, device events).
Under ncu, filter the kernels by name: "regex:add_rmsnorm|triton".

    python3 scripts/probe_add_rmsnorm.py [--rows 16] [--cols 4096] [--runs 20] [--K 16] [--torch yes|no|only] ['RPB=1 staged=False' ...]"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_examples as ex  # noqa: E402

from tiles import bench  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=16)
    p.add_argument("--cols", type=int, default=4096)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--K", type=int, help="the row's tile width (docs/examples.md's row_tile: the widest of 64, 32, 16)")
    p.add_argument("--torch", choices=["yes", "no", "only"], default="yes", help="torch.compile's kernel too")
    p.add_argument("configs", nargs="*", default=["default"])
    a = p.parse_args()
    if a.K:   # a narrower tile spreads a row over more warps: TR / 16 of them, up to 16
        ex.EX["row_tile"] = lambda cols: dict(TR=-(-cols // a.K // 16) * 16, K=a.K)
    label, ins, run, eager, ref, _ = ex.add_rmsnorm(a.rows, a.cols)
    label += f" K={a.K}" if a.K else ""
    sets = [ins() for _ in range(4)]
    compiled = torch.compile(eager)
    config = lambda c: {} if c == "default" else eval(f"dict({c.replace(' ', ',')})")  # noqa: E731
    cases = [(c, lambda *s, c=c: run(*s, tune=False, **config(c)))
             for c in (a.configs if a.torch != "only" else [])] + [("torch.compile", compiled)] * (a.torch != "no")
    for name, fn in cases:
        want = ref(*sets[0])
        got = fn(*sets[0])
        got = got[0] if isinstance(got, tuple) else got
        err = float((got.double() - want).norm() / want.norm())
        for i in range(a.runs):
            fn(*sets[i % len(sets)])
        torch.cuda.synchronize()
        t = ex.timed(fn, sets)
        print(f"{label} {name}: {t * 1e6:.2f} us, rel err {err:.2g}", flush=True)


if __name__ == "__main__":
    main()
