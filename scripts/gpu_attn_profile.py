"""Attention forward on the H200, the generated sm_90a kernel against the hand one (sm90/hand/attention.cuh):
the pieces scripts/gpu_attn_profile.sh runs.

    python scripts/gpu_attn_profile.py launch gen 4x32x8192x128     # one launch (what ncu profiles)
    python scripts/gpu_attn_profile.py launch hand 4x32x8192x64 --warm   # also compile / build beforehand
    python scripts/gpu_attn_profile.py build                        # the hand libraries, every variant
    python scripts/gpu_attn_profile.py time 4x32x8192x128 4x32x8192x64 [--causal] [--json FILE]
    python scripts/gpu_attn_profile.py compare A.ncu-rep B.ncu-rep ...   # ncu reports side by side
    python scripts/gpu_attn_profile.py loop SUMMARY A_sass.csv ...   # the main loop's stalls, from compare's output

`loop` (also part of `compare`) turns the SASS page's warp samples into cycles a warp spends at each instruction
of the main loop per iteration: each SMSP samples one of its warps at a fixed interval, so samples x (SM active
cycles x active warps per SM x SMs / all samples) / executions. The main loop is the instructions of the execution
count that holds the most samples (a branched-around part, like a mask of the last block, drops out); each wait
(wgmma, mbarrier, named barrier) is listed on its own, the rest by opcode. A BAR.SYNC.DEFER_BLOCKING's wait shows
as barrier stalls of an instruction a few after it (the column `barrier` of that opcode's row).
`launch` makes the inputs, launches the kernel once and checks its output against cuDNN's (relative Frobenius
error), so under `ncu --kernel-name regex:attention_fwd|attn_fwd_kernel --launch-count 1` exactly one launch
matches: the generated kernel is `attention_fwd` (extern "C"), the hand one `attn_fwd_kernel<D, BKV, CAUSAL>`
(bench.Sm90Kernels, an nvcc-built shared library). `time` times generated, hand (and two of its variants:
HAND_VARIANTS), cuDNN SDPA and FlexAttention (torch.compile'd) in one process: triton do_bench medians over rotating inputs, as tiles.backends.cuda.bench does.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import subprocess
import sys
from collections import Counter, defaultdict


def shape(text: str) -> tuple[int, int, int, int]:
    b, h, n, d = (int(x) for x in text.split("x"))
    return b, h, n, d


# The hand kernel's knobs timed beside it (attention.cuh): without the consumers' turns, and at D 128 with the
# generated kernel's 128-row K/V blocks instead of 176.
HAND_VARIANTS = {"hand": [], "hand, no turns": ["TILES_ATTN_PINGPONG=0"], "hand, BKV 128": ["TILES_ATTN_BKV_D128=128"]}
# The generated kernel's options timed beside its default: the consumers' turns (turns=True, which the hand kernel's
# D 64 gains +12% from and the generated one does not), and the persistent grid.
# The hand kernels `launch` takes (one launch, what ncu profiles): with and without its consumers' turns
HAND_LAUNCHES = {"hand": [], "hand-noturns": HAND_VARIANTS["hand, no turns"]}
GEN_VARIANTS = {"gen": {}, "gen-turns": dict(turns=True), "gen-persistent": dict(persistent=True)}


def kernels(which: str, defines=()):
    from tiles.backends.cuda import bench

    if which in HAND_LAUNCHES:
        return bench.Sm90Kernels(defines=list(defines) or HAND_LAUNCHES[which])
    gen = bench.GeneratedKernels("default")
    gen.options = {**gen.options, **GEN_VARIANTS[which]}
    return gen


def build(a) -> int:
    """nvcc builds of the hand libraries (every variant) side by side, so that later processes find them cached."""
    from concurrent.futures import ThreadPoolExecutor

    from tiles.backends.cuda import bench

    jobs = [(lib, [f"-D{d}" for d in defs]) for defs in HAND_VARIANTS.values() for lib in ("gemm", "attention")]
    with ThreadPoolExecutor(len(jobs)) as pool:
        for path in pool.map(lambda j: bench.build(j[0], extra=j[1]), jobs):
            print(path)
    return 0


def inputs(torch, b, h, n, d, sets=1):
    return [tuple(torch.randn(b, h, n, d, device="cuda").bfloat16() for _ in range(3)) for _ in range(sets)]


def cudnn(torch, q, k, v, causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def launch(a) -> int:
    import torch

    from tiles.backends.cuda.bench import rel_err

    b, h, n, d = shape(a.shape)
    ker = kernels(a.kernel)
    if a.warm:   # compile (generated: NVRTC, cached on disk) or build (hand: nvcc) on a small shape first
        q, k, v = inputs(torch, 1, 2, 256, d)[0]
        ker.attention(q, k, v, a.causal)
        torch.cuda.synchronize()
    q, k, v = inputs(torch, b, h, n, d)[0]
    out = torch.full_like(q, math.nan)
    lse = torch.full((b, h, n), math.nan, device="cuda")
    ker.attention(q, k, v, a.causal, out, lse)   # the one launch ncu profiles
    torch.cuda.synchronize()
    e = rel_err(out, cudnn(torch, q, k, v, a.causal))
    print(f"{a.kernel} {a.shape}{' causal' if a.causal else ''}: O vs cuDNN rel err {e:.1e}")
    return 0 if e < 2e-2 else 1


def flex(torch, causal, n):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    fn = torch.compile(flex_attention, dynamic=False)
    mask = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, n, n) if causal else None
    return lambda q, k, v: fn(q, k, v, block_mask=mask)


def time(a) -> int:
    import torch

    from tiles.backends.cuda.bench import median_ms, rel_err

    hands = {name: kernels("hand", defs) for name, defs in HAND_VARIANTS.items()}
    gens = {("generated" if name == "gen" else f"generated, {name[4:]}"): kernels(name) for name in GEN_VARIANTS}
    rows = []
    for text in a.shapes:
        b, h, n, d = shape(text)
        sets = max(2, math.ceil(200e6 / (3 * b * h * n * d * 2)))
        ins = inputs(torch, b, h, n, d, sets)
        out, lse = torch.empty_like(ins[0][0]), torch.empty(b, h, n, device="cuda")
        flops = 4.0 * b * h * n * n * d / (2 if a.causal else 1)
        ref = cudnn(torch, *ins[0], a.causal)
        i = {"i": 0}

        def rotating(fn):
            def run():
                i["i"] += 1
                fn(*ins[i["i"] % sets])
            return run

        cands = {name: lambda q, k, v, gen=gen: gen.attention(q, k, v, a.causal, out, lse) for name, gen in gens.items()}
        for name, hand in hands.items():
            if "BKV" not in name or (d == 128 and not a.causal):
                cands[name] = lambda q, k, v, hand=hand: hand.attention(q, k, v, a.causal, out, lse)
        cands["cuDNN SDPA"] = lambda q, k, v: cudnn(torch, q, k, v, a.causal)
        try:
            cands["FlexAttention"] = flex(torch, a.causal, n)
        except Exception as err:   # an older torch, or inductor cannot build it here
            print(f"FlexAttention unavailable: {err}", flush=True)
        times = {}
        for name, fn in cands.items():
            try:
                o = fn(*ins[0])
                o = out if o is None or isinstance(o, tuple) else o
                err = rel_err(o, ref)
                times[name] = median_ms(rotating(fn))
            except Exception as e:  # noqa: BLE001 (one baseline failing must not lose the others' rows)
                print(f"{name} failed at {text}: {e}", flush=True)
                continue
            rows.append(dict(shape=text + (",causal" if a.causal else ""), kernel=name, ms=times[name],
                             tflops=flops / times[name] / 1e9, err=err))
            print(f"{rows[-1]['shape']:<24} {name:<14} {times[name]:8.3f} ms {rows[-1]['tflops']:7.1f} TFLOP/s"
                  f"  vs cuDNN {err:.1e}", flush=True)
        for r in rows:
            if r["shape"].startswith(text):
                r.update({f"x_{k}": times[k] / r["ms"] for k in ("cuDNN SDPA", "FlexAttention", "hand") if k in times})
    print("\n" + "\n".join(f"{r['shape']:<24} {r['kernel']:<14} {r['ms']:8.3f} ms  " +
                           "  ".join(f"{k[2:]} {v:.3f}x" for k, v in r.items() if k.startswith("x_")) for r in rows))
    if a.json:
        open(a.json, "w").write(json.dumps(dict(torch=torch.__version__, device=torch.cuda.get_device_name(0),
                                                rows=rows), indent=1))
    return 0


# ---- ncu reports side by side -----------------------------------------------------------------------------

RAW = re.compile(
    r"^(gpu__time_duration\.sum|launch__(registers_per_thread|shared_mem_per_block_dynamic|grid_size|block_size|"
    r"occupancy_limit_\w+)|sm__warps_active\.avg\.pct_of_peak_sustained_active|"
    r"sm__inst_executed_pipe_\w+\.avg\.pct_of_peak_sustained_active|sm__pipe_\w+_cycles_active\.avg\.pct_of_peak_"
    r"sustained_active|smsp__average_warps_issue_stalled_\w+_per_issue_active\.ratio|smsp__inst_executed\.sum|"
    r"smsp__issue_active\.avg\.pct_of_peak_sustained_active|smsp__warps_eligible\.avg\.per_cycle_active|"
    r"smsp__warps_active\.avg\.per_cycle_active|sm__throughput\.avg\.pct_of_peak_sustained_elapsed|"
    r"l1tex__throughput\.avg\.pct_of_peak_sustained_active|lts__t_sector_hit_rate\.pct|"
    r"gpu__compute_memory_throughput\.avg\.pct_of_peak_sustained_elapsed|dram__throughput\.avg\.pct_of_peak_"
    r"sustained_elapsed|smsp__inst_executed_op_\w+\.sum|sm__sass_thread_inst_executed_op_\w+_pred_on\.sum)$")


def ncu_csv(rep: str, *args: str) -> list[list[str]]:
    p = subprocess.run(["ncu", "-i", rep, "--csv", *args], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"ncu -i {rep} {' '.join(args)}: {p.stderr.strip()[:400]}")
        return []
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith('"')]
    return list(csv.reader(io.StringIO("\n".join(lines))))


def num(x: str) -> float | None:
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return None


def table(names, rows):
    width = max([len(r[0]) for r in rows] + [10])
    out = [f"{'':<{width}}  " + "  ".join(f"{n:>14}" for n in names)]
    out += [f"{r[0]:<{width}}  " + "  ".join(f"{v:>14}" for v in r[1:]) for r in rows]
    return "\n".join(out)


def compare(a) -> int:
    names = [re.sub(r"\.ncu-rep$", "", p.split("/")[-1]) for p in a.reports]
    # details page: every section's named values, side by side
    details, order = defaultdict(dict), []
    for i, rep in enumerate(a.reports):
        rows = ncu_csv(rep, "--page", "details")
        if not rows:
            continue
        head = rows[0]
        col = {c: head.index(c) for c in ("Section Name", "Metric Name", "Metric Unit", "Metric Value") if c in head}
        if len(col) < 4:
            print(f"{rep}: unexpected details header {head}")
            continue
        for r in rows[1:]:
            key = (r[col["Section Name"]], f"{r[col['Metric Name']]} [{r[col['Metric Unit']]}]")
            if key not in details:
                order.append(key)
            details[key][i] = r[col["Metric Value"]]
    section = None
    out = []
    for key in order:
        if key[0] != section:
            section = key[0]
            out.append((f"== {section}", *([""] * len(names))))
        out.append((key[1][:64], *(details[key].get(i, "-") for i in range(len(names)))))
    print(table(names, out))
    # raw page: the metrics the sections do not print (pipes, stall reasons per issued instruction)
    raw = defaultdict(dict)
    for i, rep in enumerate(a.reports):
        rows = ncu_csv(rep, "--page", "raw")
        if len(rows) >= 3:
            for m, unit, v in zip(rows[0], rows[1], rows[2]):
                if RAW.match(m):
                    raw[f"{m} [{unit}]"][i] = v
    keep = [(m[:64], *(vals.get(i, "-") for i in range(len(names)))) for m, vals in sorted(raw.items())
            if any((num(v) or 0) != 0 for v in vals.values())]
    print("\n== raw metrics (non-zero somewhere)\n" + table(names, keep))
    # source page: where the warps' samples fall, by SASS opcode, and the hottest instructions
    for i, (name, rep) in enumerate(zip(names, a.reports)):
        rows = ncu_csv(rep, "--page", "source", "--print-source", "sass")
        # the page opens with the kernel's name on a line of its own: the table starts at its header row
        start = next((i for i, r in enumerate(rows) if "Source" in r), None)
        if start is None:
            print(f"\n{name}: no SASS table on the source page ({rows[0][:6] if rows else 'empty'})")
            continue
        rows = rows[start:]
        if a.sass_csv:   # every instruction with its samples and stall reasons, to read where no ncu is
            with open(f"{a.sass_csv}/{name}_sass.csv", "w", newline="") as f:
                csv.writer(f).writerows(rows)
        head = rows[0]
        src = next((j for j, c in enumerate(head) if c == "Source"), None)
        smp = next((j for j, c in enumerate(head) if c.startswith("Warp Stall Sampling (All")), None)
        if src is None or smp is None:
            print(f"\n{name}: source page columns {head[:12]}...")
            continue
        total = sum(num(r[smp]) or 0 for r in rows[1:]) or 1
        by_op = Counter()
        for r in rows[1:]:
            text = re.sub(r"^@!?U?P\w+\s+", "", r[src].strip())
            by_op[text.split(" ")[0]] += num(r[smp]) or 0
        print(f"\n== {name}: warp samples by opcode ({total:.0f} samples)")
        print("  " + ", ".join(f"{op} {100 * v / total:.1f}%" for op, v in by_op.most_common(20)))
        addr = next((j for j, c in enumerate(head) if c == "Address"), None)
        stalls = [j for j, c in enumerate(head) if "stall" in c.lower() and not c.startswith("Warp Stall Sampling")]
        print("   hottest instructions:")
        for r in sorted(rows[1:], key=lambda r: -(num(r[smp]) or 0))[:a.top]:
            why = sorted(((num(r[j]) or 0, head[j]) for j in stalls), reverse=True)[:2]
            print(f"   {100 * (num(r[smp]) or 0) / total:5.1f}%  {r[addr] if addr is not None else ''}  "
                  f"{r[src].strip()[:60]:<60}  " + ", ".join(f"{h} {v:.0f}" for v, h in why if v))
        found = [next((num(v[i]) for (_, m), v in details.items() if m == label and i in v), None)
                 for label in ("SM Active Cycles [cycle]", "Achieved Active Warps Per SM [warp]", "# SMs [SM]")]
        if None not in found and "Instructions Executed" in head:
            loop_cycles(name, rows, math.prod(found))
    return 0


WAITS = re.compile(r"WARPGROUP\.DEPBAR|BAR\.(SYNC|ARV)|SYNCS\.PHASECHK")
REASONS = ("wait", "barrier", "mio", "long_sb", "short_sb", "dispatch", "not_selected", "selected", "math")


def loop_cycles(name: str, rows: list[list[str]], warp_cycles: float) -> None:
    """Print the main loop's cycles per warp and iteration (see `loop`); warp_cycles: SM active cycles x active
    warps per SM x SMs."""
    head, body = rows[0], rows[1:]
    col = {c: j for j, c in enumerate(head)}
    smp, exe, src = col["Warp Stall Sampling (All Samples)"], col["Instructions Executed"], col["Source"]
    total = sum(num(r[smp]) or 0 for r in body) or 1
    held = Counter()
    for r in body:
        held[num(r[exe])] += num(r[smp]) or 0
    n = max((c for c in held if c), key=held.__getitem__)   # the main loop's count: the most samples
    k = warp_cycles / total / n
    main = [r for r in body if num(r[exe]) == n]
    groups, order, wait = defaultdict(lambda: defaultdict(float)), [], (None, -9)
    for i, r in enumerate(main):
        text = re.sub(r"^@!?U?P\w+\s+", "", r[src].strip())
        # a try_wait's branch, a few instructions on, waits for its result: that time is the wait's own
        after_wait = text.startswith("BRA") and r[src].strip().startswith("@!P") and i - wait[1] <= 3
        key = f"{r[col['Address']][-5:]} {text[:44]}" if WAITS.match(text) else \
            (wait[0] if after_wait else text.split(" ")[0])
        if text.startswith("SYNCS.PHASECHK"):
            wait = (key, i)
        if key not in groups:
            order.append(key)
        g = groups[key]
        g["n"] += 1 if not after_wait else 0
        g["cycles"] += (num(r[smp]) or 0) * k
        for why in REASONS:
            if f"stall_{why}" in col:
                g[why] += (num(r[col[f"stall_{why}"]]) or 0) * k
    print(f"\n== {name}: main loop, {len(main)} instructions run {n:.0f} times; cycles a warp spends per iteration")
    print(f"  {'':<52} {'n':>4} {'cycles':>7}  " + " ".join(f"{w:>8}" for w in REASONS))
    for key in sorted(order, key=lambda x: -groups[x]["cycles"]):
        g = groups[key]
        print(f"  {key:<52} {g['n']:>4.0f} {g['cycles']:>7.1f}  " + " ".join(f"{g[w]:>8.1f}" for w in REASONS))
    print(f"  {'all':<52} {len(main):>4} {sum(g['cycles'] for g in groups.values()):>7.1f}")


def loop(a) -> int:
    summary = open(a.summary).read().splitlines()
    names = summary[1].split()

    def metric(label):   # one value per report, the line's last columns
        return [num(x) for x in next(ln for ln in summary if ln.startswith(label)).split()[-len(names):]]
    warp_cycles = [c * w * s for c, w, s in zip(metric("SM Active Cycles"), metric("Achieved Active Warps Per SM"),
                                                 metric("# SMs"))]
    for path in a.csvs:
        name = path.split("/")[-1].removesuffix("_sass.csv")
        with open(path, newline="") as f:
            loop_cycles(name, list(csv.reader(f)), warp_cycles[names.index(name)])
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("launch")
    p.add_argument("kernel", choices=(*HAND_LAUNCHES, *GEN_VARIANTS))
    p.add_argument("shape", help="BxHxNxD")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--warm", action="store_true", help="compile and run once on a small shape first")
    sub.add_parser("build", help="build the hand kernel's libraries, every variant, in parallel")
    p = sub.add_parser("time")
    p.add_argument("shapes", nargs="+")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--json")
    p = sub.add_parser("compare")
    p.add_argument("reports", nargs="+")
    p.add_argument("--top", type=int, default=25, help="hottest SASS instructions listed per report")
    p.add_argument("--sass-csv", metavar="DIR", help="also write each report's SASS source page as DIR/NAME_sass.csv")
    p = sub.add_parser("loop", help="the main loop's cycles per warp and iteration, from compare's summary and CSVs")
    p.add_argument("summary")
    p.add_argument("csvs", nargs="+")
    a = ap.parse_args(argv)
    return {"launch": launch, "build": build, "time": time, "compare": compare, "loop": loop}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
