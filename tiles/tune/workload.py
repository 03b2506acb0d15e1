"""`tiles tune`: a shipped kernel's workload (tiles.bench) tuned at one shape, timed as `tiles compare` times it,
each candidate checked once against the float64 reference; or ranked by the static model alone."""
from __future__ import annotations

import numpy as np

from .model import model_device
from .search import (NothingToTune, Phases, Result, _device_of, _ident, _to_time, candidates, clock_for, finish,
                     precompile, prune, rank, time_candidates)


def tune_workload(w, text: str, b=None, target: str | None = None, *, top: int = 8, device: str | None = None,
                  min_blocks: int = 1, seed: int | None = None, budget_s: float = 0.2, progress=None,
                  save: bool = True) -> Result:
    """Tune a workload's main kernel (tiles.bench) at one shape: on backend b (timed as `tiles compare` times,
    each candidate checked once against the float64 reference first), or, with b None, for target by the
    static model alone. `progress(n)` is told how many steps there are, then called once per step. The result
    keeps the seconds of each phase (`phases`), logged to tiles.tune as each ends."""
    from .. import bench
    phase = Phases(f"tune {w.name} {text}")
    s = w.parse(text)
    kfn = w.kernel(s)
    if kfn.tune is None:
        raise ValueError(f"{kfn.__name__} declares no search space (@tl.kernel(tune=...))")
    target = b.target if b is not None else target
    why = w.supports(target)
    if why:
        raise ValueError(f"{w.name} {text}: {why}")
    rng = np.random.default_rng(seed)
    host = w.inputs(s, rng)
    _, args, fixed = w.main(s, host)
    fixed = {k: v for k, v in fixed.items() if k != "tune"}
    phase("inputs")
    launches = len(w.launches(s, host))
    cands = candidates(kfn, target, args, fixed)
    if target is None:   # the reference: nothing to compile or model
        ranked = list(cands)
    else:
        tick = progress(len(cands)) if progress else None
        dev = model_device(target, device) if b is None or device else _device_of(b, target)
        prune(kfn, target, args, cands, fixed, min_blocks=min_blocks, progress=tick, top=top, device=dev,
              launches=launches)
        ranked = rank(kfn, target, args, cands, fixed, dev, launches)
        phase(f"prune ({sum(c.static is not None for c in cands)} compiled)")
    if b is None:
        if not ranked:
            raise NothingToTune(f"tuning {kfn.__name__} for {target}: every candidate was pruned", cands)
        dev = model_device(target, device)
        return Result(kfn.__name__, target, text, False, cands, ranked[0], ranked[0], f"{dev.name} (model)",
                      phases=phase)
    chosen = _to_time(ranked, cands, top)
    tick = progress(len(chosen)) if progress else None
    precompile(b, kfn, args, fixed, chosen)
    phase(f"precompile ({len(chosen)})")
    n_sets = bench.input_sets(sum(a.nbytes for a in host if isinstance(a, np.ndarray)))
    sets = [[b.asarray(a) if isinstance(a, np.ndarray) else a for a in host] for _ in range(n_sets)]
    clock = clock_for(b)

    def run(cfg):
        planned = [w.runs({**s, "set": cfg}, a) for a in sets]

        def step(i):
            for k, a, c in planned[i]:
                b.launch(k, a, **c)
        return bench.measure(step, sets=n_sets, clock=clock, budget_s=budget_s).median_s
    phase("device inputs")
    time_candidates(chosen, run, lambda cfg: check_once(w, s, kfn, b, cfg, rng), progress=tick)
    phase("check and time")
    del sets
    return finish(kfn, b, args, fixed, cands, ranked, text, save, phases=phase)


_CHECKED: dict = {}   # (kernel, backend, configuration, flags) -> None or why its output was wrong


def check_once(w, s: dict, kfn, b, cfg: dict, rng) -> str | None:
    """Run cfg once at a small shape of the workload that takes the same kernel (flags and dtype as s), against
    the float64 reference: None, or why not. A configuration is checked once per process."""
    from .. import cli
    flags = {k: s[k] for k in (*w.flags, "dtype") if k in s}
    key = (kfn, b.name, _ident(cfg), _ident(flags))
    if key not in _CHECKED:
        small = None
        for t in w.small_shapes:
            ss = {**w.parse(t), **flags}
            if w.kernel(ss) is kfn:
                small = ss
                break
        small = small or s   # no small shape takes this kernel: check at the tuned shape (sampled rows on a device)
        sv, label = {**small, "set": cfg}, "check"
        host = lambda: w.inputs(small, rng)  # noqa: E731
        row = cli.run_device(w, sv, label, b, host, rng, False)[0] if b.kind == "device" else \
            cli.run_cpu(w, sv, label, b, host)
        _CHECKED[key] = None if row.ok else (row.note or "wrong output")
    return _CHECKED[key]


def result_json(r: Result) -> dict:
    """A result as `tiles tune --json` saves it."""
    def cand(c):
        st = c.static
        return {"config": c.config, "default": c.default, "dropped": c.dropped, "model_s": c.model_s,
                "time_s": c.time_s, "error": c.error, "static": st.summary() if st is not None else None,
                "terms": {k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in c.terms.items()}}
    return {"kernel": r.kernel, "shape": r.shape, "target": r.target, "device": r.device, "timed": r.timed,
            "winner": r.winner.config, "winner_s": r.winner.time_s, "default": r.default.config,
            "default_s": r.default.time_s, "model_first": r.model_first.config if r.model_first else None,
            "model_first_s": r.model_first.time_s if r.model_first else None,
            "model_within_10pct": r.model_within(), "candidates": [cand(c) for c in r.candidates]}
