"""Compile-only fuzzer of kernel *configurations*: every shipped kernel (tiles.bench.WORKLOADS) on every target,
with constants and launch options drawn from a space wider than the declared tune spaces, traced, and every
configuration the verifier and the backend accept compiled by the vendor's own compiler (NVRTC for sm_80 and
sm_90a, clang for gfx942 and gfx950, the MSL host check for apple), as `tiles inspect` compiles it
(tiles.toolchains.static).

The product rule it checks: nothing the verifier accepts may fail in a vendor's compiler. A refusal (TileError, or
a TypeError/ValueError naming the configuration) is an answer; a finding is

  - COMPILE: an accepted configuration the vendor's compiler rejected, crashed on or timed out on;
  - CRASH:   an exception in tracing or code generation other than a TileError (TypeError, KeyError,
             AssertionError, IndexError ...), i.e. the library failed where it should have refused or generated.

Drawn per case: block extents from 16..256 (powers of two and 3x multiples: 48, 96, 192) for every block constant
the kernel has (BM, BN, BK, BR, BC, W ...), stages 1..8, workers 1..8 (16 on sm_80), SPLIT, blocks_per_sm,
schedule names of the target's backend, mfma, persistent, wgmma, max_registers, the sm_90a switches (rings,
deferred, turns, resident, boxes, rewrites, shared_vectors, exp2_poly), head dims (attention's D, also 32/96/256,
by rewriting the workload's shape) and the kernels' own switches (staged, HG, RPB, v_shared_from, trans_b);
accumulate, causal, bt, interleaved and f16 come from the shapes' flags. Shapes are the workloads' small shapes and
a few skinny/long ones: tracing reads only dtypes and ranks, but a shape picks the heuristic's configuration, gemm's
plan (SPLIT into sum_parts, whose launch is compiled too) and the row kernels' one-pass plan.

Not covered: the Metal compiler itself (off macOS only the MSL host check runs, so MSL that g++ takes and xcrun
metal would refuse goes unseen), hiprtc (clang stands in for it), launches (shared memory a device refuses at
launch, results), dtypes beyond the workloads' (bf16, f16, fp8 e4m3), and kernels other than the shipped ones
(tiles fuzz draws random kernels).

It is not run by CI (a few compiles a second at best; CI has 2 cores and 20 minutes). Run it by hand:

    PYTHONPATH=. python3 scripts/fuzz_configs.py --budget 1800 --jobs 2 --seed 1 --out /tmp/fuzz.jsonl
    PYTHONPATH=. python3 scripts/fuzz_configs.py --kernels gemm --targets gfx950 --budget 300
    PYTHONPATH=. python3 scripts/fuzz_configs.py --replay /tmp/fuzz.jsonl     # the findings of a run, again

Each result is a JSON line (kernel, shape, target, config, status, message); findings are printed as they come,
with the `tiles inspect` command that reproduces them where the workload's shape syntax can say it.
Compiles go to $TILES_CACHE (set it to a scratch folder to keep the fuzzer's CUDA cubins apart).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import signal
import sys
import time
import traceback

TARGETS = ("sm_80", "sm_90a", "gfx942", "gfx950", "apple")
BLOCK = (16, 32, 48, 64, 96, 128, 192, 256)
# Shapes per workload: the small ones, and some that select other plans (skinny gemm, one-pass rows).
SHAPES = {
    "gemm": ("200x136x72", "96x80x40,bt", "16x4096x4096", "1x4096x4096", "64x512x1024,acc", "300x200x520,f16"),
    "bmm": ("3x70x40x50", "2x33x48x24,bt"),
    "gemm_fp8": ("136x200x136", "16x1024x1024"),
    "attention": ("1x2x80x64,causal", "1x4/2x72x128", "1x2x200x64", "1x2x96x128,causal"),
    "attention_bwd": ("1x2x80x64,causal", "1x4/2x72x128", "1x2x130x64"),
    "softmax": ("100x300", "33x1000,f16", "20x96", "512x4096", "256x32768", "64x2048,f16"),
    "layernorm": ("100x300", "33x1000,f16", "20x96", "512x4096", "256x16384"),
    "rmsnorm": ("100x300", "33x1000,f16", "20x96", "512x4096"),
    "rotary": ("1x2/1x40x64", "2x2x24x32,interleaved", "1x4/2x64x128", "1x4x64x128,interleaved"),
}
HEAD_DIMS = (64, 128, 64, 128, 32, 96, 256)
BLOCK_NAMES = ("BM", "BN", "BK", "BR", "BC")
SCHEDULES = {"cuda": ("warp_specialized", "warp"), "hip": ("plain", "pingpong", "interleave"), "metal": (None,)}


def _backend(target: str) -> str:
    return {"sm_80": "cuda", "sm_90a": "cuda", "gfx942": "hip", "gfx950": "hip", "apple": "metal"}[target]


def draw(rng: random.Random, kernel: str, target: str) -> tuple[str, dict, dict]:
    """(shape, shape rewrites, configuration) of one case."""
    from tiles import bench
    w = bench.workload(kernel)
    shape = rng.choice(SHAPES[kernel])
    rewrite = {}
    if kernel in ("attention", "attention_bwd") and rng.random() < 0.4:
        rewrite["D"] = rng.choice(HEAD_DIMS)
    s = _parse(w, shape, rewrite)
    kfn = w.kernel(s)
    names = set(kfn.const_defaults)
    cfg: dict = {}
    for n in BLOCK_NAMES:
        if n in names and rng.random() < 0.8:
            cfg[n] = rng.choice(BLOCK)
    if "W" in names and rng.random() < 0.2:
        cfg["W"] = rng.choice((16, 32, 48, 64))
    if "SPLIT" in names and rng.random() < 0.5:
        cfg["SPLIT"] = rng.choice((1, 2, 3, 4, 8))
    if "HG" in names and rng.random() < 0.5:
        cfg["HG"] = rng.choice((1, 2, 3, 4, 8))
    if "RPB" in names and rng.random() < 0.5:
        cfg["RPB"] = rng.choice((1, 2, 3, 4, 8, 16, 32))
    if "staged" in names and rng.random() < 0.5:
        cfg["staged"] = rng.random() < 0.5
    if "v_shared_from" in names and rng.random() < 0.5:
        cfg["v_shared_from"] = rng.choice((None, 0, 64, 128, 256))
    if "trans_b" in names and rng.random() < 0.2:
        cfg["trans_b"] = rng.random() < 0.5
    if rng.random() < 0.7:
        cfg["stages"] = rng.randint(1, 8)
    if rng.random() < 0.8:
        cfg["workers"] = rng.randint(1, 16 if target == "sm_80" else 8)
    backend = _backend(target)
    if rng.random() < 0.5:
        sch = rng.choice(SCHEDULES[backend])
        if sch:
            cfg["schedule"] = sch
    if backend == "cuda":
        if rng.random() < 0.3:
            cfg["blocks_per_sm"] = rng.randint(1, 4)
        if rng.random() < 0.2:
            cfg["persistent"] = rng.random() < 0.5
        if rng.random() < 0.2:
            cfg["wgmma"] = rng.random() < 0.5
        if rng.random() < 0.15:
            cfg["max_registers"] = rng.choice((0, 64, 128, 168, 232, 255))
        for opt in ("rings", "deferred", "turns", "resident", "boxes", "rewrites", "shared_vectors"):
            if rng.random() < 0.05:
                cfg[opt] = rng.random() < 0.5
        if rng.random() < 0.05:
            cfg["exp2_poly"] = rng.choice((0, 1, 2, 3))
    if backend == "hip" and rng.random() < 0.3:
        cfg["mfma"] = rng.choice((16, 32))
    return shape, rewrite, cfg


def _parse(w, shape: str, rewrite: dict) -> dict:
    s = w.parse(shape)
    s.update(rewrite)
    return s


def _text(e: BaseException) -> str:
    return (getattr(e, "problem", None) or str(e)).strip()


class _Timeout(Exception):
    pass


def _alarm(*_):
    raise _Timeout()


def case(job: dict) -> dict:
    """Trace and compile one case (in a worker process); the job with status and message added."""
    import numpy as np

    from tiles import bench, toolchains as tc, tune
    from tiles.compiler import CompileError, CompilerCrash
    from tiles.dsl import TileError

    out = dict(job)
    w = bench.workload(job["kernel"])
    s = _parse(w, job["shape"], job["rewrite"])
    s["set"] = job["config"]
    t = job["target"]
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(job.get("timeout", 300))
    stage = "trace"
    try:
        if w.supports(t) is not None:
            out.update(status="unsupported", message=w.supports(t))
            return out
        kfn, args, consts = w.main(s, w.inputs(s, np.random.default_rng(0)))
        consts = tune.defaults(kfn, t, args, consts)
        steps = kfn.steps(args, t, **consts)
        for f, a, kw in steps:
            f.trace(a, t, **kw)
        stage = "codegen"
        for f, a, kw in steps:
            tc.emit(f, a, t, "source", **kw)
        stage = "compile"
        notes = []
        for f, a, kw in steps:
            st = tc.static(f, a, t, sass=False, **kw)
            notes.append(f"{f.__name__}: {st.summary()}")
        out.update(status="ok", message="; ".join(notes))
    except TileError as e:
        out.update(status="refused", stage=stage, message=(_text(e).splitlines() or [""])[-1][:400])
    except tc.NoToolchain as e:
        out.update(status="no toolchain", message=str(e)[:300])
    except _Timeout:
        out.update(status="COMPILE" if stage == "compile" else "CRASH", stage=stage,
                   message=f"no answer within {job.get('timeout', 300)} s")
    except (CompileError, CompilerCrash) as e:
        out.update(status="COMPILE", stage=stage, message=str(e)[-3000:])
    except Exception as e:  # noqa: BLE001 - the findings
        status = "COMPILE" if stage == "compile" and isinstance(e, RuntimeError) else "CRASH"
        if status == "CRASH" and stage == "trace" and isinstance(e, (TypeError, ValueError)) and \
                ("neither a constant" in str(e) or "missing constant" in str(e)):
            status = "refused"
        out.update(status=status, stage=stage, message=f"{type(e).__name__}: {str(e)[-2500:]}",
                   traceback=traceback.format_exc()[-3000:])
    finally:
        signal.alarm(0)
    return out


def inspect_command(r: dict) -> str:
    shape = r["shape"]
    if r.get("rewrite"):
        shape += f"  (D rewritten to {r['rewrite']['D']})"
    sets = " ".join(f"{k}={v}" for k, v in r["config"].items())
    return f"python3 -m tiles inspect {r['kernel']} --targets {r['target']} --shape {shape} --set {sets}"


def jobs_for(args) -> list[dict]:
    from tiles import bench
    rng = random.Random(args.seed)
    kernels = args.kernels.split(",") if args.kernels else list(bench.WORKLOADS)
    targets = args.targets.split(",") if args.targets else list(TARGETS)
    seen, jobs = set(), []
    for i in range(args.cases):
        kernel, target = kernels[i % len(kernels)], rng.choice(targets)
        shape, rewrite, cfg = draw(rng, kernel, target)
        key = (kernel, target, shape, json.dumps(rewrite, sort_keys=True), json.dumps(cfg, sort_keys=True))
        if key in seen:
            continue
        seen.add(key)
        jobs.append(dict(kernel=kernel, target=target, shape=shape, rewrite=rewrite, config=cfg,
                         timeout=args.timeout))
    return jobs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=600, help="seconds to run (default 600)")
    p.add_argument("--jobs", type=int, default=2, help="compiles in parallel (default 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cases", type=int, default=100000, help="cases drawn at most (default: until the budget)")
    p.add_argument("--kernels", help="comma-separated workloads (default: all of tiles.bench.WORKLOADS)")
    p.add_argument("--targets", help="comma-separated targets (default: sm_80,sm_90a,gfx942,gfx950,apple)")
    p.add_argument("--timeout", type=int, default=300, help="seconds a case may take (default 300)")
    p.add_argument("--out", help="append every result to this JSON-lines file")
    p.add_argument("--replay", help="rerun the findings (COMPILE/CRASH) of a JSON-lines file of an earlier run")
    p.add_argument("--verbose", action="store_true", help="print every result, not only findings")
    args = p.parse_args(argv)
    if args.replay:
        with open(args.replay) as f:
            jobs = [json.loads(ln) for ln in f if ln.strip()]
        jobs = [dict(kernel=j["kernel"], target=j["target"], shape=j["shape"], rewrite=j.get("rewrite", {}),
                     config=j["config"], timeout=args.timeout) for j in jobs if j["status"] in ("COMPILE", "CRASH")]
    else:
        jobs = jobs_for(args)
    deadline = time.time() + args.budget
    counts: dict = {}
    out = open(args.out, "a") if args.out else None
    ctx = mp.get_context("fork")
    with ctx.Pool(args.jobs, maxtasksperchild=40) as pool:
        it = pool.imap_unordered(case, jobs)
        while True:
            left = deadline - time.time()
            if left <= 0:
                print("budget spent", file=sys.stderr)
                break
            try:
                r = it.next(timeout=left)
            except StopIteration:
                break
            except mp.TimeoutError:
                print("budget spent", file=sys.stderr)
                break
            counts[r["status"]] = counts.get(r["status"], 0) + 1
            if out:
                out.write(json.dumps({k: v for k, v in r.items() if k != "timeout"}) + "\n")
                out.flush()
            if r["status"] in ("COMPILE", "CRASH") or args.verbose:
                msg = r["message"] if r["status"] in ("COMPILE", "CRASH") else r["message"][:200]
                print(f"[{r['status']}] {inspect_command(r)}\n    {msg[-1500:]}\n", flush=True)
        pool.terminate()
    print("results: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), flush=True)
    return 1 if counts.get("COMPILE") or counts.get("CRASH") else 0


if __name__ == "__main__":
    sys.exit(main())
