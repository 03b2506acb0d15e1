"""The configurations a tune=True search would time for docs/examples.md's bmm at 64x1024x1024x512 (the model's
best 8 and the default, ranked as tiles.tune.search ranks them), each launched alone in a child process under a
time limit: which one, if any, does not finish (a hung launch stalls a whole search). The H200 run of 12-04 is in
docs/benchmarks.md."""
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_examples import namespace  # noqa: E402

from tiles.tune.search import _to_time, candidates, prune, rank  # noqa: E402
from tiles.tune.space import Shaped  # noqa: E402

CHILD = """
import sys, time, torch
sys.path.insert(0, "tests")
from test_examples import namespace
from tiles.torch.dispatch import launch
cfg = eval(sys.argv[1])
a = torch.randn(64, 1024, 512, device="cuda").bfloat16(); b = torch.randn(64, 512, 1024, device="cuda").bfloat16()
c = torch.full((64, 1024, 1024), float("nan"), device="cuda").bfloat16()
launch(namespace()["bmm"], [c, a, b], tune=False, **cfg); torch.cuda.synchronize()
err = ((c.double() - a.double() @ b.double()).norm() / (a.double() @ b.double()).norm()).item()
t = time.perf_counter()
for _ in range(20):
    launch(namespace()["bmm"], [c, a, b], tune=False, **cfg)
torch.cuda.synchronize()
print(f"ok rel err {err:.2g}, {(time.perf_counter() - t) / 20 * 1e6:.1f} us a launch")
"""


def main() -> None:
    kfn = namespace()["bmm"]
    args = [Shaped((64, 1024, 1024), "bf16"), Shaped((64, 1024, 512), "bf16"), Shaped((64, 512, 1024), "bf16")]
    cands = candidates(kfn, "sm_90a", args, {})
    prune(kfn, "sm_90a", args, cands, {}, top=8)
    for c in _to_time(rank(kfn, "sm_90a", args, cands, {}), cands, 8):
        t = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, "-c", CHILD, repr(c.config)], capture_output=True, text=True, timeout=25)
            out = p.stdout.strip() or (p.stderr.strip().splitlines() or ["?"])[-1]
            print(f"{c.label():60s} {time.perf_counter() - t:5.1f} s  {out}", flush=True)
        except subprocess.TimeoutExpired:
            print(f"{c.label():60s} TIMEOUT after 25 s", flush=True)


if __name__ == "__main__":
    main()
