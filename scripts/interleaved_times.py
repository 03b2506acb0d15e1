"""Configurations timed in turns rather than one after another: whether an order effect (the clock a heavy GEMM
leaves behind) or the inputs' values (scale) move a GEMM's time on the GPU. 12-04: at 4096x14336x4096, `tiles
tune` timed 128x128 stages 5 at 642 us against the default's 661, and `tiles compare` right after timed them
742 and 705; docs/examples.md's linear_silu default ran 784 us in scripts/gpu_examples.py (weights scaled by
K^-1/2) and 993 in scripts/search_vs_bench.py (standard normal weights).

    python3 scripts/interleaved_times.py [--rounds N] [--backend B] [--shape MxNxK]"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_examples import namespace  # noqa: E402

from tiles import backend, bench  # noqa: E402
from tiles.kernels.gemm import gemm  # noqa: E402
from tiles.testing import poisoned, random_array  # noqa: E402
from tiles.tune.search import clock_for  # noqa: E402

GEMM = {"default": {}, "128x128 s5": dict(BM=128, BN=128, BK=64, stages=5, workers=2),
        "256x128 w4": dict(BM=256, BN=128, BK=64, stages=3, workers=4)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--backend", default="cuda")
    p.add_argument("--shape", default="4096x14336x4096")
    a = p.parse_args()
    b = backend.get(a.backend)
    m, n, k = (int(d) for d in a.shape.split("x"))
    clock = clock_for(b)

    def sets_of(host):
        return [[b.asarray(x.copy()) if isinstance(x, np.ndarray) else x for x in host]
                for _ in range(bench.input_sets(sum(x.nbytes for x in host if hasattr(x, "nbytes"))))]

    def time(kfn, sets, cfg):
        return bench.measure(lambda i: b.launch(kfn, sets[i], tune=False, **cfg), sets=len(sets), clock=clock,
                             budget_s=0.5).median_s * 1e6

    g = sets_of([poisoned((m, n), "bf16"), random_array((m, k), "bf16"), random_array((k, n), "bf16")])
    w = random_array((k, n), "bf16")
    x, bias = random_array((m, k), "bf16"), random_array((n,), "f32")
    silu = {f"linear_silu, weights x {s:g}": sets_of([poisoned((m, n), "bf16"), x, (w * s).astype(w.dtype), bias])
            for s in (1.0, k ** -0.5)}
    for r in range(a.rounds):
        order = list(GEMM) if r % 2 == 0 else list(GEMM)[::-1]
        print(f"round {r}: " + ", ".join(f"gemm {c} {time(gemm, g, GEMM[c]):.1f} us" for c in order), flush=True)
        print(f"round {r}: " + ", ".join(f"{c} {time(namespace()['linear_silu'], s, {}):.1f} us"
                                          for c, s in silu.items()), flush=True)


if __name__ == "__main__":
    main()
