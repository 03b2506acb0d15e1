"""Candidates (the space expanded), their static pruning by the offline toolchains, the model's ranking, and
the timed search that picks the winner and stores it."""
from __future__ import annotations

import concurrent.futures
import itertools
import logging
import os
import time
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes, targets
from ..backend import LaunchHung
from .cache import Entry, identity, key_of, source_hash, store
from .model import model, model_device
from .space import shapes_of


@dataclass
class Candidate:
    config: dict
    default: bool = False          # the configured default (always a candidate: tuning never loses to it)
    static: object = None          # toolchains.Static, where compiled
    dropped: str | None = None     # why it was pruned
    model_s: float | None = None   # the static model's estimate
    terms: dict = field(default_factory=dict)
    time_s: float | None = None
    error: str | None = None       # a failed check or launch

    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.config.items()) + (" (default)" if self.default else "")


def candidates(kfn, target: str | None, args, fixed: dict) -> list[Candidate]:
    """The space expanded for target and these arguments: every combination that `tune_where` keeps, the
    configured default first. What the kernel's heuristic sets outside the space (attention backward's DC past
    head dim 128, without which nothing fits) every candidate keeps."""
    space = kfn.tune
    if space is None:
        raise TypeError(f"{kfn.__name__} declares no search space (@tl.kernel(tune=...))")
    dims = {n: list(v(*args) if callable(v) else v) for n, v in space.for_target(target).items()}
    if not dims:
        raise TypeError(f"{kfn.__name__} has no search space for {target or 'the reference'}: "
                        f"it declares {', '.join(space.per_target)}")
    chosen = defaults(kfn, target, args, fixed)
    base = {**space.base(kfn, target), **chosen}
    kept = {n: v for n, v in chosen.items() if n not in dims and n not in fixed}
    default = {**kept, **{n: base[n] for n in dims if n in base}}
    out, seen = [Candidate(default, default=True)], {_ident(default)}
    for combo in itertools.product(*dims.values()):
        cfg = {**kept, **dict(zip(dims, combo))}
        full = {**base, **cfg}
        kfn.config(target, **full)   # a name that is neither a constant nor an option is refused here
        if space.where is not None and not space.where(full, *args):
            continue
        if _ident(cfg) not in seen:
            seen.add(_ident(cfg))
            out.append(Candidate(cfg))
    return out


def defaults(kfn, target, args, overrides: dict) -> dict:
    """The caller's keywords over the kernel's heuristic for these shapes (KernelFn.shape_config), unless the
    caller set one of the heuristic's names: then the caller chose the configuration, and configs fill the rest."""
    chosen = kfn.shape_config(target, args, overrides)
    if not chosen or not chosen.keys().isdisjoint(overrides):
        return overrides
    return {**chosen, **overrides}


def _ident(cfg: dict) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in cfg.items()))


def prune(kfn, target: str, args, cands: list[Candidate], fixed: dict, *, min_blocks: int = 1,
          jobs: int | None = None, progress=None, top: int | None = None, device=None, launches: int = 1) -> None:
    """Mark the candidates that cannot be worth timing, from what the offline toolchain says (`dropped` is
    "KIND: detail"): the verifier or the backend refuses it ("refused"), it generates the source of an earlier
    candidate ("same code"), it does not compile, it spills, its shared memory/LDS/threadgroup memory exceeds the
    target's, or fewer than min_blocks blocks fit a unit ("occupancy"). A spill certain before compiling
    (toolchains.spills_surely: the register tiles alone exceed a thread's registers) is not compiled. Compiles run
    in parallel (one per core), each in its own child process.

    With `top`, only what the model's ranking needs is compiled: the model's estimate before compiling (shared
    memory alone bounds the resident blocks; registers can only lower that, and the estimate never falls with
    fewer resident blocks) is a lower bound of the one after, so candidates compile in the order of that bound
    until `top` survivors rank ahead of every bound left; the rest are dropped uncompiled ("ranked out"). The
    configured default always compiles."""
    from .. import toolchains as tc
    from ..dsl import TileError
    shaped = shapes_of(args)
    live, sources = [], {}
    for c in cands:
        try:
            for f, a, kw in kfn.steps(shaped, target, **{**fixed, **c.config}):
                f.trace(a, target, **kw)
            source = tc.emit(kfn, shaped, target, "source", **{**fixed, **c.config})
        except (TileError, TypeError, ValueError) as e:
            c.dropped = f"refused: {_first_line(e)}"
            continue
        if source in sources:   # the backend made the same program of it (a worker count it cannot use)
            c.dropped = f"same code: as {sources[source].label()}"
            continue
        sources[source] = c
        why = tc.spills_surely(kfn, shaped, target, **{**fixed, **c.config})
        if why:
            c.dropped = f"spills: {why} (not compiled)"
            continue
        live.append(c)
    order = {id(c): i for i, c in enumerate(cands)}
    bound = {id(c): (estimate(kfn, target, shaped, c, fixed, None, device, launches)[0], order[id(c)])
             for c in live} if top else {}
    queue = sorted(live, key=lambda c: (not c.default, bound.get(id(c), order[id(c)])))
    limit = targets.target(target).shared_bytes
    kept: list = []   # (estimate, order) of the compiled survivors

    def done() -> bool:   # the best `top` are known: compiled, and ahead of every bound not compiled yet
        if not queue:
            return True
        if not top or len(kept) < top:
            return False
        return sorted(kept)[top - 1] < min(bound[id(c)] for c in queue)

    def compile_one(c):
        return tc.static(kfn, shaped, target, sass=False, **{**fixed, **c.config})
    jobs = jobs or cores()
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:   # each compile is a child process: threads wait
        running: dict = {}
        while True:
            while len(running) < jobs and not done():
                c = queue.pop(0)
                running[pool.submit(compile_one, c)] = c
            if not running:
                break
            finished, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for f in finished:
                c = running.pop(f)
                _judge(c, f, tc, limit, min_blocks)
                if top and not c.dropped and c.static is not None:
                    kept.append((estimate(kfn, target, shaped, c, fixed, c.static, device, launches)[0],
                                 order[id(c)]))
                if progress:
                    progress()
    for c in queue:
        c.dropped = f"ranked out: not compiled, its bound {bound[id(c)][0] * 1e6:.1f} us is behind the best {top}"


def _judge(c: Candidate, f, tc, limit: int, min_blocks: int) -> None:
    """c's compile (future f): its Static, or why it is dropped."""
    try:
        c.static = f.result()
    except tc.NoToolchain as e:
        c.static, c.terms["not compiled"] = None, str(e)
        return
    except Exception as e:  # noqa: BLE001 - a compile failure prunes this candidate, not the search
        c.dropped = f"does not compile: {_first_line(e)}"
        return
    st = c.static
    if st.spill_bytes:
        c.dropped = f"spills: {st.spills}"
    elif st.shared_bytes is not None and st.shared_bytes > limit:
        c.dropped = f"shared memory: {st.shared_bytes / 1024:.1f} KB > {limit / 1024:.0f} KB"
    elif st.blocks_per_unit is not None and st.blocks_per_unit < min_blocks:
        c.dropped = f"occupancy: {st.occupancy}, below {min_blocks} block(s) per unit"


def cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's count): one compile each."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else max(1, os.cpu_count() or 1)


def _first_line(e: Exception) -> str:
    text = (getattr(e, "problem", None) or str(e)).strip()
    return f"{type(e).__name__}: {text.splitlines()[-1] if text else ''}"


def estimate(kfn, target: str, shaped, c: Candidate, fixed: dict, static, device=None, launches: int = 1):
    """The model's seconds for candidate c (static: its compiled kernel's, or None) and the main kernel's terms.
    Where a call launches several kernels (KernelFn.steps) the estimate is their sum."""
    total, terms = 0.0, {}
    steps = kfn.steps(shaped, target, **{**fixed, **c.config})
    for f, a, kw in steps:
        main = f is kfn
        s, t = model(f.trace(a, target, **kw), a, target, static if main else None, device, launches if main else 1)
        total += s
        if main:
            terms = t
    if len(steps) > 1:
        terms["launches"] = len(steps)
    return total, terms


def rank(kfn, target: str, args, cands: list[Candidate], fixed: dict, device=None, launches: int = 1) -> list:
    """The survivors, each with its model estimate, fastest first (ties: the order of the space)."""
    shaped = shapes_of(args)
    live = [c for c in cands if not c.dropped]
    for c in live:
        c.model_s, terms = estimate(kfn, target, shaped, c, fixed, c.static, device, launches)
        c.terms.update(terms)
    return sorted(live, key=lambda c: c.model_s)


@dataclass
class Result:
    kernel: str
    target: str
    shape: str
    timed: bool
    candidates: list
    winner: Candidate
    model_first: Candidate | None = None
    device: str = ""
    entry: Entry | None = None
    notes: list = field(default_factory=list)
    phases: dict = field(default_factory=dict)   # seconds the search spent in each phase, in order

    @property
    def default(self) -> Candidate:
        return next(c for c in self.candidates if c.default)

    def model_within(self, frac: float = 0.10) -> bool | None:
        """Whether the static model's first choice timed within frac of the timed winner (None: not timed)."""
        if not self.timed or self.model_first is None or self.model_first.time_s is None:
            return None
        return self.model_first.time_s <= (1 + frac) * self.winner.time_s


LOG = logging.getLogger("tiles.tune")   # each search's phases as they end (tiles tune shows them on a log)


class Phases(dict):
    """Seconds a search spends in each phase, in order; each logged to tiles.tune as it ends."""

    def __init__(self, what: str):
        super().__init__()
        self.what, self.t0 = what, time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self[name], self.t0 = now - self.t0, now
        LOG.info("%s: %s %.1f s", self.what, name, self[name])


def time_candidates(survivors: list[Candidate], run_one, check_one=None, *, progress=None) -> None:
    """Times each survivor with run_one(config) -> seconds (bench.measure underneath); check_one(config) -> None
    or why its output is wrong, once before timing. A candidate whose launch fails or whose check fails is
    marked and left untimed."""
    for c in survivors:
        try:
            why = check_one(c.config) if check_one else None
            if why:
                c.error = why
            else:
                c.time_s = run_one(c.config)
        except LaunchHung:   # the device is stuck: no later candidate can run
            raise
        except Exception as e:  # noqa: BLE001 - a candidate that fails to launch is reported, not fatal
            c.error = _first_line(e)
        if progress:
            progress()


def search(kfn, b, args, overrides: dict, *, top: int = 8, min_blocks: int = 1, progress=None,
           budget_s: float = 0.2) -> Result:
    """The search a launch with tune=True (or TILES_AUTOTUNE=1) runs on its own arguments: expand, prune, rank,
    then time the model's best `top` (and the default) on copies of the arguments, each checked first against the
    configured default's output; the winner goes to the cache. The caller's arrays are left as they were."""
    from .. import bench
    from ..testing import errors, tolerance
    target = b.target
    fixed = dict(overrides)
    phase = Phases(f"tune {kfn.__name__} {_shape_text(args)}")
    cands = candidates(kfn, target, args, fixed)
    if target is not None:
        device = _device_of(b, target)
        prune(kfn, target, args, cands, fixed, min_blocks=min_blocks, top=top, device=device)
        ranked = rank(kfn, target, args, cands, fixed, device)
        phase(f"prune ({sum(c.static is not None for c in cands)} compiled)")
    else:
        ranked = [c for c in cands if not c.dropped]
    chosen = _to_time(ranked, cands, top)
    precompile(b, kfn, args, fixed, chosen)
    phase(f"precompile ({len(chosen)})")
    host = [b.numpy(a).copy() if hasattr(a, "shape") else a for a in args]
    sets = bench.input_sets(sum(a.nbytes for a in host if hasattr(a, "nbytes")))

    def fresh():
        return [b.asarray(a.copy()) if isinstance(a, np.ndarray) else a for a in host]

    def outputs(cfg):
        dev = fresh()
        b.launch(kfn, dev, tune=False, **{**fixed, **cfg})
        b.expect_finished(kfn, cfg)
        return [b.numpy(d) for d, a in zip(dev, host) if isinstance(a, np.ndarray)]
    want = outputs(next(c for c in cands if c.default).config)

    def check(cfg):
        for got, ref, a in zip(outputs(cfg), want, [a for a in host if isinstance(a, np.ndarray)]):
            dt = dtypes.of(a)
            if dt.is_float and not errors(got, ref)[1] <= 2 * tolerance(dt):
                return f"differs from the default's output (rel err {errors(got, ref)[1]:.3g})"
        return None

    copies = []   # the timed input sets, made once for every candidate: what a run leaves in them is not read

    def run(cfg):
        copies.extend(fresh() for _ in range(sets - len(copies)))
        step = lambda i: b.launch(kfn, copies[i], tune=False, **{**fixed, **cfg})  # noqa: E731
        return bench.measure(step, sets=sets, clock=clock_for(b), budget_s=budget_s).median_s
    time_candidates(chosen, run, check, progress=progress)
    phase("check and time")
    return finish(kfn, b, args, fixed, cands, ranked, shape=_shape_text(args), phases=phase)


class NothingToTune(ValueError):
    """No candidate of the search space survived pruning, or none ran: each one's reason in the message (a
    ValueError, so the CLI says it in one line)."""

    def __init__(self, what: str, cands: list):
        super().__init__(f"{what}: " + "; ".join(f"{c.label()}: {c.error or c.dropped}" for c in cands)[:2000])


def _to_time(ranked: list[Candidate], cands: list[Candidate], top: int) -> list[Candidate]:
    """The model's best `top` survivors, and the default (the baseline) whether or not it made the cut."""
    chosen = ranked[:top]
    default = next(c for c in cands if c.default)
    if default not in chosen and not default.dropped:
        chosen.append(default)
    return chosen


def precompile(b, kfn, args, fixed: dict, chosen: list[Candidate], jobs: int | None = None) -> None:
    """Compile the candidates' device code in parallel before timing (a backend that can: `precompile(k)`),
    so that the first timed launch of each does not compile alone (pruning compiled each main kernel once already:
    what it adds is a plan's other kernels, or a device whose shared memory plans differently). A failure is left
    to the timed launch."""
    pre = getattr(b, "precompile", None)
    if pre is None or not chosen:
        return
    shaped = shapes_of(args)
    kernels = [f.trace(a, b.target, **kw) for c in chosen
               for f, a, kw in kfn.steps(shaped, b.target, **{**fixed, **c.config})]

    def one(k):
        try:
            pre(k)
        except Exception:  # noqa: BLE001
            pass
    one(kernels[0])   # alone: it sets up what the backend's compiles share (CUDA: its runtime)
    with concurrent.futures.ThreadPoolExecutor(jobs or cores()) as pool:
        list(pool.map(one, kernels[1:]))


def clock_for(b):
    """compare's clock for a backend: device events on NVIDIA and AMD GPUs, the host clock elsewhere."""
    from .. import bench
    if b.kind == "device" and b.target in targets.TARGETS and targets.TARGETS[b.target].vendor in ("nvidia", "amd"):
        return bench.EventClock()
    return bench.HostClock(getattr(b, "synchronize", None) or (lambda: None))


def _shape_text(args) -> str:
    return " ".join("x".join(map(str, a.shape)) for a in args if hasattr(a, "shape"))


# A candidate replaces the default only where it times more than this much faster: on the H200 (12-04) gemm's
# winner at 4096x14336x4096, 3% ahead in its search, ran 5% behind the default in the next process, and
# docs/examples.md's linear_silu's 9% behind (docs/benchmarks.md): a spread between processes the search cannot see.
MARGIN = 0.03


def finish(kfn, b, args, fixed: dict, cands: list[Candidate], ranked: list[Candidate], shape: str,
           save: bool = True, phases: dict | None = None) -> Result:
    """The result of a timed search; its winner (the fastest checked candidate, unless the default times within
    MARGIN of it) stored in the cache."""
    timed = [c for c in cands if c.time_s is not None]
    if not timed:
        raise NothingToTune(f"tuning {kfn.__name__}: no candidate ran", cands)
    default = next(c for c in cands if c.default)
    fastest = min(timed, key=lambda c: c.time_s)
    kept = default.time_s is not None and fastest.time_s > (1 - MARGIN) * default.time_s
    winner = default if kept else fastest
    target, device, tk = identity(b)
    key = key_of(kfn, b, args, fixed)
    entry = Entry(kfn.__name__, source_hash(kfn), target, device, tk, list(key[3]), _listed(key[4]),
                  _listed(key[5]), winner.config, winner.time_s, default.time_s,
                  winner.model_s, shape, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    res = Result(kfn.__name__, target, shape, True, cands, winner, ranked[0] if ranked and ranked[0].model_s
                 is not None else None, device, entry, phases=phases or {})
    if kept and fastest is not default:
        res.notes.append(f"{fastest.label()} timed {default.time_s / fastest.time_s:.3f}x the default, within the "
                         f"{MARGIN:.0%} margin: the default kept")
    if save:
        store(kfn, entry)
    return res


def _listed(x):
    return [_listed(v) for v in x] if isinstance(x, (list, tuple)) else x


def _device_of(b, target):
    return targets.device_for(identity(b)[1]) or model_device(target)
