"""The generated (batched) GEMM and cuBLAS's on the same inputs, each run a few times, for a profiler: under ncu,
filter the kernels by name (`--kernel-name regex:"tiles_kernel_gemm|nvjet|sm90_xmma|cutlass"`).

    python3 scripts/gemm_pair.py [--shape 64x1024x1024x512] [--runs 3] [KEY=VALUE ...]   (B x M x N x K, or M x N x K)
    python3 scripts/gemm_pair.py --device cpu --shape 2x64x64x32      # the plumbing, on the reference backend"""
import argparse

import torch

from tiles.cli import variants
from tiles.kernels.gemm import gemm
from tiles.torch.dispatch import launch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="64x1024x1024x512")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--device", default="cuda")
    p.add_argument("set", nargs="*", help="gemm's constants or launch options (one value each)")
    a = p.parse_args()
    dims = [int(x) for x in a.shape.split("x")]
    lead, (m, n, k) = (dims[:1], dims[1:]) if len(dims) == 4 else ([], dims)
    x = torch.randn(*lead, m, k, device=a.device).to(torch.bfloat16)
    w = (torch.randn(*lead, k, n, device=a.device) * k ** -0.5).to(torch.bfloat16)
    c = torch.empty(*lead, m, n, device=a.device, dtype=torch.bfloat16)
    (cfg,) = variants(a.set)
    for _ in range(a.runs):
        launch(gemm, [c, x, w], **cfg)
        torch.matmul(x, w)
    if a.device == "cuda":
        torch.cuda.synchronize()
    want = x.double() @ w.double()
    print(f"{a.shape} {cfg or 'default'}: relative error {float((c.double() - want).norm() / want.norm()):.2e}")


if __name__ == "__main__":
    main()
