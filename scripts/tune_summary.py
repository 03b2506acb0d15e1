"""The summary of scripts/gpu_tune.sh: for every tuned GEMM shape, cuBLAS timed as `tiles compare` times it
(the workload's baseline, rotating inputs, device events), beside the tuned winner and the configured default
that `tiles tune` timed in the same way; and how often the static model's first choice was within 10% of the
timed winner. Writes OUT/summary.md and OUT/summary.json."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from tiles import bench


def cublas_s(w, text: str) -> tuple[str, float] | None:
    s = w.parse(text)
    libs = w.baselines("nvidia")
    if not libs:
        return None
    m, n, k = s["M"], s["N"], s["K"]
    sets = bench.input_sets(2 * s.get("B", 1) * (m * k + k * n + m * n))
    label, step, _ = libs[0](s, sets)
    return label, bench.measure(step, sets=sets, clock=bench.EventClock(), budget_s=0.2).median_s


def main(out: str) -> int:
    out = Path(out)
    rows = []
    for name, w in (("tune_gemm.json", bench.workload("gemm")), ("tune_gemm_acc.json", bench.workload("gemm")),
                    ("tune_bmm.json", bench.workload("bmm"))):
        path = out / name
        if not path.is_file():
            continue
        for r in json.loads(path.read_text()):
            lib = cublas_s(w, r["shape"])
            mf = r["model_first_s"]
            rows.append({"shape": r["shape"], "default_s": r["default_s"], "tuned_s": r["winner_s"],
                         "cublas": lib[0] if lib else None, "cublas_s": lib[1] if lib else None,
                         "winner": r["winner"], "model_first": r["model_first"],
                         "model_first_vs_winner": mf / r["winner_s"] if mf and r["winner_s"] else None,
                         "model_within_10pct": r["model_within_10pct"],
                         "pruned": sum(c["dropped"] is not None for c in r["candidates"]),
                         "candidates": len(r["candidates"])})
    ratio = lambda a, b: b / a if a and b else None  # noqa: E731  library time / ours: above 1, ours is faster
    for r in rows:
        r["tuned_vs_cublas"], r["default_vs_cublas"] = ratio(r["tuned_s"], r["cublas_s"]), ratio(r["default_s"], r["cublas_s"])
    plain = [r for r in rows if not r["shape"].endswith(",acc") and r["shape"].count("x") == 2]   # the issue's grid

    def geomean(xs):
        xs = [x for x in xs if x]
        return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None
    agree = [r["model_within_10pct"] for r in rows if r["model_within_10pct"] is not None]
    summary = {"shapes": len(rows), "geomean_tuned_vs_cublas": geomean(r["tuned_vs_cublas"] for r in plain),
               "geomean_default_vs_cublas": geomean(r["default_vs_cublas"] for r in plain),
               "min_tuned_vs_cublas": min((r["tuned_vs_cublas"] for r in plain if r["tuned_vs_cublas"]), default=None),
               "model_within_10pct": f"{sum(agree)} of {len(agree)}"}
    (out / "summary.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    fmt = lambda x, f: "-" if x is None else format(x, f)  # noqa: E731
    lines = ["# tiles tune gemm on the H200 (scripts/gpu_tune.sh)", "",
             f"bf16 GEMM over the grid (not ,acc, not batched): geometric mean tuned {fmt(summary['geomean_tuned_vs_cublas'], '.3f')}x "
             f"cuBLAS (default {fmt(summary['geomean_default_vs_cublas'], '.3f')}x), lowest tuned "
             f"{fmt(summary['min_tuned_vs_cublas'], '.3f')}x; the static model's first choice within 10% of the "
             f"timed winner at {summary['model_within_10pct']} shapes.", "",
             "| shape | default us | tuned us | cuBLAS us | default/cuBLAS | tuned/cuBLAS | winner | model's first: time / winner's |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        us = lambda x: fmt(x and x * 1e6, ".1f")  # noqa: E731
        lines.append(f"| {r['shape']} | {us(r['default_s'])} | {us(r['tuned_s'])} | {us(r['cublas_s'])} | "
                     f"{fmt(r['default_vs_cublas'], '.2f')}x | {fmt(r['tuned_vs_cublas'], '.2f')}x | "
                     f"{','.join(f'{k}={v}' for k, v in r['winner'].items())} | "
                     f"{fmt(r['model_first_vs_winner'], '.2f')} |")
    lines.append("")
    lines.append("ratios: cuBLAS time / ours (above 1: ours faster). ,acc rows: C (f32) += A @ B, split K allowed; "
                 "their cuBLAS row is the plain bf16 GEMM (no accumulate). BxMxNxK: the batched GEMM against torch.bmm.")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
