"""Host time per launch of a generated kernel on the cuda backend, next to torch's launch of the same op.

Launches of a tiny GEMM are queued back to back without synchronizing, so the host, not the GPU, sets the
pace: wall time / launches is what one launch costs the caller (the launch memo, parameters, cupy's
cuLaunchKernel). Run by `.ci/gpu host` on a GPU machine; prints one line per way of calling, and with
--profile where the host time of the torch-tensor launches goes (cProfile, the costliest functions).
"""
import cProfile
import pstats
import sys
import time

import numpy as np
import torch

from tiles.backend import get
from tiles.kernels.gemm import gemm

N = 2000


def per_launch_us(fn) -> float:
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(N):
        fn()
    elapsed = time.perf_counter() - t
    torch.cuda.synchronize()
    return elapsed / N * 1e6


cuda = get("cuda")
a, b = (torch.randn(64, 64, device="cuda", dtype=torch.bfloat16) for _ in range(2))
c = torch.empty(64, 64, device="cuda", dtype=torch.bfloat16)
host = [np.asarray(cuda.numpy(t)) for t in (c, a, b)]
dev = [cuda.asarray(h) for h in host]
print(f"gemm 64x64x64, tiles, torch tensors:     {per_launch_us(lambda: gemm(c, a, b)):6.1f} us per launch")
print(f"gemm 64x64x64, tiles, tiles DeviceArrays: {per_launch_us(lambda: cuda.launch(gemm, dev)):6.1f} us per launch")
print(f"gemm 64x64x64, torch.matmul (cuBLAS):     {per_launch_us(lambda: torch.matmul(a, b, out=c)):6.1f} us per launch")

if "--profile" in sys.argv:
    cProfile.run("for _ in range(N): gemm(c, a, b)", "/tmp/launch.prof")
    pstats.Stats("/tmp/launch.prof").sort_stats("tottime").print_stats(25)
