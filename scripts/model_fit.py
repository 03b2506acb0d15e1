"""The static model against a timed search (docs/tuning.md, "How far to trust it"): reads a `tiles tune gemm` log
(scripts/gpu_tune.sh: logs/tune.log), re-ranks each shape's compiled candidates with the model as it is now (their
resident blocks and shared memory as the log gives them) and says, per shape and over the grid, whether the model's
first choice among the timed candidates timed within 10% of the timed winner, and how its order of the timed
candidates correlates with the measured one (Spearman).

    python scripts/model_fit.py logs/tune.log [--table] [--half even|odd] [--set MATRIX_SUSTAINED=0.75 ...]
"""
from __future__ import annotations

import argparse
import ast
import importlib
import re
import sys
import types

import numpy as np

from tiles import dtypes
from tiles.kernels.gemm import gemm
from tiles.tune import Shaped
from tiles.tune.search import Candidate, _ident, candidates, estimate

model_module = importlib.import_module("tiles.tune.model")   # tiles.tune.model the name is the function

ROW = re.compile(r"^(?P<cfg>BM=\S+)(?P<default> \(default\))?\s+\d+ thr, regs \d+, smem (?P<smem>[\d.]+) KB, "
                 r"spills \d+, occ (?P<occ>\d+) blk/SM.*?(?P<model>[\d.]+) us\s+\w+\s+(?:(?P<time>[\d.]+) us|-)")


def parse(path: str) -> dict:
    """{shape: [(config, default, static, logged model s, measured s or None)]}, the log's compiled candidates."""
    out, shape = {}, None
    for line in open(path):
        m = re.match(r"tiles tune gemm (\S+) on", line)
        if m:   # the plain bf16 GEMM's shapes (MxNxK); others (,acc, batched) are skipped
            shape = m.group(1) if re.fullmatch(r"\d+x\d+x\d+", m.group(1)) else None
            if shape:
                out[shape] = []
            continue
        m = ROW.match(line)
        if m and shape:
            cfg = {k: int(v) for k, v in (kv.split("=") for kv in m.group("cfg").split(","))}
            static = types.SimpleNamespace(blocks_per_unit=int(m.group("occ")),
                                           shared_bytes=int(float(m.group("smem")) * 1024), loop=None)
            t = m.group("time")
            out[shape].append((cfg, bool(m.group("default")), static, float(m.group("model")) * 1e-6,
                               float(t) * 1e-6 if t else None))
    return out


def ranks(x) -> np.ndarray:
    """Ranks from 0, ties given the mean of theirs (the model ties often)."""
    x = np.asarray(x)
    r = np.empty(len(x))
    r[np.argsort(x, kind="stable")] = np.arange(len(x))
    for v in np.unique(x):
        r[x == v] = r[x == v].mean()
    return r


def spearman(a, b) -> float:
    ra, rb = ranks(a), ranks(b)
    # a model that ties every candidate orders nothing: 0
    return float(np.corrcoef(ra, rb)[0, 1]) if len(a) > 2 and ra.std() and rb.std() else 0.0


def evaluate(shape: str, rows: list) -> dict:
    """The model now over one shape's logged candidates: its first among the timed ones (ties: the space's order,
    as the search breaks them) against the winner, its first among all compiled ones, and Spearman over the timed."""
    m, n, k = (int(x) for x in shape.split("x"))
    args = [Shaped((m, n), dtypes.bf16), Shaped((m, k), dtypes.bf16), Shaped((k, n), dtypes.bf16)]
    fixed = {"trans_b": False}
    order = {_ident(c.config): i for i, c in enumerate(candidates(gemm, "sm_90a", args, fixed))}
    scored = []
    for cfg, default, static, logged, t in rows:
        s, terms = estimate(gemm, "sm_90a", args, Candidate(cfg, default=default), fixed, static)
        scored.append((s, order.get(_ident(cfg), -1 if default else 10**6), cfg, logged, t, terms))
    scored.sort(key=lambda x: x[:2])
    timed = [x for x in scored if x[4] is not None]
    best = min(x[4] for x in timed)
    first = timed[0]
    return {"shape": shape, "first": first[2], "ratio": first[4] / best, "within": first[4] <= 1.10 * best,
            "first_all": scored[0][2], "first_all_timed": scored[0][4] is not None,
            "rho": spearman([x[0] for x in timed], [x[4] for x in timed]), "points": timed}


def half(names: list, which: str) -> list:
    """A checkerboard over the grid (M against (N, K)): each half has every M and every (N, K)."""
    ms = sorted({int(n.split("x")[0]) for n in names})
    nks = sorted({n.split("x", 1)[1] for n in names})
    return [n for n in names if (ms.index(int(n.split("x")[0])) + nks.index(n.split("x", 1)[1])) % 2
            == (which == "odd")]


def label(cfg: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in cfg.items() if k != "BK")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("log")
    p.add_argument("--table", action="store_true", help="every timed point: shape, config, model (logged, now), time")
    p.add_argument("--half", choices=("even", "odd"), help="half the shapes, a checkerboard of M against (N, K) "
                   "(fit on one half, report on the other)")
    p.add_argument("--set", nargs="+", default=[], metavar="NAME=VALUE",
                   help="a constant of tiles/tune/model.py, for fitting it (a Python literal)")
    a = p.parse_args(argv)
    for kv in a.set:
        name, value = kv.split("=", 1)
        if not hasattr(model_module, name):
            raise SystemExit(f"tiles/tune/model.py has no {name}")
        setattr(model_module, name, ast.literal_eval(value))
    shapes = parse(a.log)
    names = list(shapes)
    if a.half:
        names = half(names, a.half)
    res = [evaluate(s, shapes[s]) for s in names]
    for r in res:
        if a.table:
            for s, _, cfg, logged, t, terms in r["points"]:
                print(f"  {r['shape']:>18} {label(cfg):<52} logged {logged * 1e6:8.1f}  now {s * 1e6:8.1f} "
                      f"[{terms['bound']:<6}]  timed {t * 1e6:8.1f} us")
        print(f"{r['shape']:>18}  first {label(r['first']):<52} {r['ratio']:.2f}x the winner"
              f"{'' if r['within'] else '  NOT within 10%'}  rho {r['rho']:+.2f}"
              f"{'' if r['first_all_timed'] else '  (first of all: ' + label(r['first_all']) + ', untimed)'}")
    rhos = [r["rho"] for r in res]
    print(f"within 10%: {sum(r['within'] for r in res)} of {len(res)}; mean Spearman over the timed points of a "
          f"shape {np.mean(rhos):+.2f} ({len(rhos)} shapes); first of all untimed at "
          f"{sum(not r['first_all_timed'] for r in res)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
