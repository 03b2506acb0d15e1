"""Programmatic dependent launch on the H200 (issue 18): the split-K GEMM of a decode step (gemm, then sum_parts)
and the unsplit one, called back to back with no event between the calls, as a model's step calls them, on
torch's default (legacy) stream and on a stream of its own, with cuBLAS beside them. `tiles compare` puts events
around each call; this shows what PDL gives a chain of launches. The runtime reads TILES_PDL once, so run it once
each way:

    for p in 0 1; do TILES_PDL=$p python3 scripts/gpu_pdl.py; done
"""
import os

import torch

from tiles.backend import get
from tiles.kernels.gemm import gemm

SPLIT = dict(BM=64, BN=128, BK=64, stages=5, workers=1, SPLIT=4)   # the tuned decode configuration
CALLS = 200
SETS = 4   # weight sets in turn: 4 x 4096 x 4096 bf16 is over twice the 60 MB L2


def per_call_us(fn, stream) -> float:
    """GPU time per call of CALLS calls queued back to back behind a spin kernel (so the host keeps ahead)."""
    with torch.cuda.stream(stream):
        for i in range(SETS):
            fn(i)
        torch.cuda._sleep(int(2e9 * CALLS * 150e-6))
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(CALLS):
            fn(i % SETS)
        end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / CALLS


def main():
    rt = get("cuda").runtime
    pdl = f"TILES_PDL={os.environ.get('TILES_PDL', '1')} (programmatic launches: {rt.programmatic})"
    streams = {"default stream": torch.cuda.default_stream(), "own stream": torch.cuda.Stream()}
    for n, k in ((4096, 4096), (4096, 14336)):
        x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
        ws = [torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / k ** 0.5 for _ in range(SETS)]
        out = torch.empty(1, n, device="cuda", dtype=torch.bfloat16)
        ways = {"tiles SPLIT=4": lambda i: gemm(out, x, ws[i], **SPLIT),
                "tiles SPLIT=1": lambda i: gemm(out, x, ws[i], **{**SPLIT, "SPLIT": 1}),
                "cuBLAS": lambda i: torch.matmul(x, ws[i], out=out)}
        for where, stream in streams.items():
            times = "  ".join(f"{name} {per_call_us(fn, stream):6.1f} us" for name, fn in ways.items())
            print(f"1x{n}x{k} {where:14s} {times}   {pdl}")


if __name__ == "__main__":
    main()
