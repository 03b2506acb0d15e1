"""docs/examples.md's add_rmsnorm at a decode step's rows against torch.compile's kernel, for a profiler: each
run `--runs` times, configurations in turn, then the compiled PyTorch. Timed too (tiles.bench, device events).
Under ncu, filter the kernels by name: "regex:add_rmsnorm|triton".

    python3 scripts/probe_add_rmsnorm.py [--rows 16] [--cols 4096] [--runs 20] [--K 16] [--torch yes|no|only]
                                         [--triton-warps 4 8 16] ['RPB=1 staged=False' ...]

--triton-warps: a Triton kernel of the same computation written by hand, one program a row with the whole row in
registers (the form of torch.compile's persistent reduction), at each warp count: how the peer's time moves with
the warps that hold a row."""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_examples as ex  # noqa: E402

from tiles import bench  # noqa: E402


def triton_add_rmsnorm(rows: int, cols: int, warps: int):
    """run(x, r, w) of a hand-written Triton kernel: H = X + R (rounded to bf16), Y = rmsnorm(H) * W."""
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(x_ptr, r_ptr, w_ptr, h_ptr, y_ptr, eps, COLS: tl.constexpr):
        offs = tl.program_id(0) * COLS + tl.arange(0, COLS)
        h = (tl.load(x_ptr + offs).to(tl.float32) + tl.load(r_ptr + offs).to(tl.float32)).to(tl.bfloat16)
        tl.store(h_ptr + offs, h)
        hf = h.to(tl.float32)
        rstd = tl.math.rsqrt(tl.sum(hf * hf, 0) / COLS + eps)
        w = tl.load(w_ptr + tl.arange(0, COLS)).to(tl.float32)
        tl.store(y_ptr + offs, (hf * rstd * w).to(tl.bfloat16))

    def run(x, r, w, **_):
        y, h = torch.empty_like(x), torch.empty_like(x)
        kernel[(rows,)](x, r, w, h, y, 1e-6, COLS=cols, num_warps=warps)
        return y
    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=16)
    p.add_argument("--cols", type=int, default=4096)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--K", type=int, help="the row's tile width (docs/examples.md's row_tile: the widest of 64, 32, 16)")
    p.add_argument("--torch", choices=["yes", "no", "only"], default="yes", help="torch.compile's kernel too")
    p.add_argument("--triton-warps", type=int, nargs="*", default=[])
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
    cases += [(f"triton, {w} warps", triton_add_rmsnorm(a.rows, a.cols, w)) for w in a.triton_warps]
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
