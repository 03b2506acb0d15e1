"""Each configuration a search would time for docs/examples.md's bmm (64x1024x1024x512), launched alone in a child
process under a time limit: which one, if any, does not finish (a hung launch stalls a whole search)."""
import subprocess
import sys
import time

CFGS = ["BM=128,BN=256,stages=3,workers=2,blocks_per_sm=1", "BM=256,BN=128,stages=3,workers=2,blocks_per_sm=1",
        "BM=256,BN=128,stages=3,workers=4,blocks_per_sm=1", "BM=256,BN=128,stages=4,workers=2,blocks_per_sm=1",
        "BM=128,BN=128,stages=5,workers=2,blocks_per_sm=1", "BM=128,BN=128,stages=4,workers=2",
        "BM=256,BN=64,stages=4,workers=2,blocks_per_sm=1", "BM=256,BN=64,stages=4,workers=4,blocks_per_sm=1"]
CHILD = """
import sys, time, torch
sys.path.insert(0, "tests")
from test_examples import namespace
from tiles.torch.dispatch import launch
cfg = dict((k, int(v)) for k, v in (p.split("=") for p in sys.argv[1].split(",")))
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
for cfg in CFGS:
    t = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, cfg], capture_output=True, text=True, timeout=25)
        out = (p.stdout.strip() or p.stderr.strip().splitlines()[-1:] or ["?"])
        print(f"{cfg:52s} {time.perf_counter() - t:5.1f} s  {out if isinstance(out, str) else out[0]}", flush=True)
    except subprocess.TimeoutExpired:
        print(f"{cfg:52s} TIMEOUT after 25 s", flush=True)
