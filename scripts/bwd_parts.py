"""Where attention backward's time goes on the device: its three launches (attention_bwd_pre, the main kernel,
attention_bwd_dq) timed apart, each against the bytes it must move at the copy bandwidth torch reaches.

    python scripts/bwd_parts.py [--shapes 8x16x2048x128,causal 4x32x8192x128] [--reps 10] [--batch 10]
                                [--set KEY=VALUE ...] [--rows KEY=VALUE ...]

Each launch is timed alone: `batch` launches back to back between two CUDA events, so that the host's launch
time runs under the device's work, the median of `reps` such batches after a warm-up batch, the inputs of one
set (the row kernels' operands are larger than L2 at these shapes: 67 MB and up); then the three in turn.
--set goes to the main kernel, --rows to the two row kernels (staged=True).
"""
from __future__ import annotations

import argparse
import math
import statistics

import torch

from tiles import bench
from tiles.cli import variants
from tiles.kernels import attention_bwd as ab
from tiles.torch.dispatch import launch


def timed(fn, reps: int, batch: int) -> float:
    """Microseconds a call: the median over `reps` batches of `batch` calls."""
    times = []
    for rep in range(reps + 1):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(batch):
            fn()
        b.record()
        b.synchronize()
        if rep:   # the first batch warms up
            times.append(a.elapsed_time(b) * 1e3 / batch)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", nargs="+", default=["8x16x2048x128,causal", "4x32x8192x128"])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--set", nargs="*", default=[], help="the main kernel's constants and options")
    ap.add_argument("--rows", nargs="*", default=[], help="the row kernels' constants and options")
    args = ap.parse_args()
    (extra,), (rows_extra,) = variants(args.set), variants(args.rows)   # one value a name, as `tiles compare` reads it
    x = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")
    copy_gbs = 2 * x.numel() / timed(lambda: x.clone(), args.reps, args.batch) / 1e3
    print(f"{torch.cuda.get_device_name()}: copy {copy_gbs:.0f} GB/s")
    for text in args.shapes:
        shape = bench.workload("attention_bwd").parse(text)
        b, h, hk, n, d = (shape[x] for x in ("B", "H", "Hkv", "N", "D"))
        causal = bool(shape.get("causal"))
        bf, f32 = torch.bfloat16, torch.float32
        r = lambda *s: torch.randn(*s, dtype=bf, device="cuda")   # noqa: E731
        q, o, do = r(b, h, n, d), r(b, h, n, d), r(b, h, n, d)
        k, v = r(b, hk, n, d), r(b, hk, n, d)
        lse = torch.full((b, h, n), math.log(n), dtype=f32, device="cuda")
        delta, lse2 = torch.empty_like(lse), torch.empty_like(lse)
        acc = torch.empty(b, h, n, d, dtype=f32, device="cuda")
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        scale = 1.0 / math.sqrt(d)
        pre = lambda: launch(ab.attention_bwd_pre, (delta, lse2, acc, o, do, lse, scale), D=d,  # noqa: E731
                             **rows_extra)
        main_ = lambda: launch(ab.attention_bwd, (dk, dv, acc, q, k, v, do, lse2, delta, scale), D=d,  # noqa: E731
                               causal=causal, **extra)
        post = lambda: launch(ab.attention_bwd_dq, (dq, acc), D=d, **rows_extra)   # noqa: E731
        rows = b * h * n
        parts = [("pre", pre, rows * d * 2 * 2 + rows * d * 4 + rows * 12),   # O, dO read; acc zeroed; vectors
                 ("main", main_, None), ("dq", post, rows * d * (4 + 2))]
        total = timed(lambda: (pre(), main_(), post()), args.reps, args.batch)
        print(f"{text}{' ' + ' '.join(args.rows) if args.rows else ''}: all three {total:.1f} us")
        for name, fn, nbytes in parts:
            t = timed(fn, args.reps, args.batch)
            at_copy = f", {nbytes / t / 1e3:.0f} GB/s ({nbytes / copy_gbs / 1e3:.1f} us at copy speed)" if nbytes else ""
            print(f"  {name:5s} {t:9.1f} us  {100 * t / total:5.1f}%{at_copy}")


if __name__ == "__main__":
    main()
