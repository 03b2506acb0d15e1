"""The `tiles` command: demo, devices, compare, inspect, tune, cache, fuzz, bench (docs/cli.md)."""
from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import importlib
import itertools
import math
import os
import shutil
import signal
import sys
from pathlib import Path

import numpy as np

from . import backend as registry
from . import bench, fuzz, report, targets, tune
from .report import Row
from .testing import run as run_on

# Beyond this many scalar operations (Workload.cost) a CPU row is skipped: the reference interpreter runs numpy
# per block, the emulators run every lane of the generated code as a fiber (orders of magnitude slower).
CPU_COST = {"reference": 5e9, "emulator": 5e7}


# ---------------------------------------------------------------- backends, toolchains, progress

def discover() -> tuple[list[registry.Backend], dict[str, str]]:
    """Every backend that registered, and the vendor packages that failed to import, with why."""
    broken = {}
    for v in registry._VENDORS:
        try:
            importlib.import_module(f"tiles.backends.{v}")
        except Exception as e:  # noqa: BLE001 - a broken vendor package is a row of the report, not a crash
            broken[v] = f"{type(e).__name__}: {e}"
    return list(registry._REGISTRY.values()), broken


def why_not(b: registry.Backend) -> str | None:
    """b.available(), with a crash in the check reported as the reason."""
    try:
        return b.available()
    except Exception as e:  # noqa: BLE001
        return f"availability check failed: {type(e).__name__}: {e}"


def _attr(b: registry.Backend, name: str) -> str:
    try:
        return str(getattr(b, name) or "")
    except Exception as e:  # noqa: BLE001 - e.g. a device property read without a device
        return f"? ({type(e).__name__})"


def runnable(names: str | None) -> list[registry.Backend]:
    """The backends to run: those named (each must run here), else every one that runs here."""
    found, broken = discover()
    if not names:
        return [b for b in found if why_not(b) is None]
    by_name = {b.name: b for b in found}
    out = []
    for n in (n.strip() for n in names.split(",") if n.strip()):
        if n not in by_name:
            hint = f"; broken vendor packages: {', '.join(broken)}" if broken else ""
            raise SystemExit(f"tiles: unknown backend {n!r}; known: {', '.join(by_name)}{hint}")
        why = why_not(by_name[n])
        if why is not None:
            raise SystemExit(f"tiles: backend {n} cannot run here: {why}")
        out.append(by_name[n])
    return out


class Progress:
    """A tqdm bar on stderr that appears only when the work takes more than a second and stderr is a terminal.
    Where it is not a terminal (a log, a batch job), each row is written there as soon as it is made instead, so
    that a run cut short by a time limit still leaves what it measured."""

    def __init__(self, total: int, desc: str):
        from tqdm import tqdm
        self.bar = tqdm(total=total, desc=desc, delay=1.0, disable=None, leave=False, file=sys.stderr)

    def doing(self, what: str):
        self.bar.set_postfix_str(what, refresh=False)

    def done(self, rows=()):
        if self.bar.disable:
            for r in rows:
                print(report.line(r), file=sys.stderr, flush=True)
        self.bar.update(1)

    def close(self):
        self.bar.close()


# ---------------------------------------------------------------- running a workload on backends

def _vendor(b: registry.Backend) -> str | None:
    t = _attr(b, "target")
    return targets.TARGETS[t].vendor if t in targets.TARGETS else None


def _checked(row: Row, checks) -> Row:
    row.max_abs = max(c[1] for c in checks)
    row.rel_err = max(c[2] for c in checks)
    row.ok = all(c[2] <= c[3] for c in checks)   # NaN compares False: unwritten outputs fail
    if not row.ok:
        row.note = "; ".join(f"{n}: rel err {r:.3g} > {t:.3g}" for n, _, r, t in checks if not r <= t)
    return row


def _failed(row: Row, e: Exception) -> Row:
    """A row for an exception: a backend refusing a kernel before launch (TileError: a target feature it lacks)
    is a skipped row; anything else, and any refusal by the reference interpreter, is a failure."""
    from .dsl import TileError
    text = getattr(e, "problem", None) or str(e)
    text = text.strip().splitlines()[-1].strip() if text.strip() else ""
    if isinstance(e, TileError) and row.kind != "reference":
        row.kind, row.note = "skipped", f"refused before launch: {text}"
        return row
    row.ok, row.note = False, f"{type(e).__name__}: {text}"
    return row


def _skipped(w: bench.Workload, s: dict, row: Row) -> Row | None:
    """The row marked skipped, if the kernel cannot run for its target or is too big for the CPU; else None."""
    why = w.supports(row.target or None)
    if why is None and row.kind in CPU_COST and w.cost(s) > CPU_COST[row.kind]:
        why = (f"{w.cost(s) / 1e9:.3g} G operations is too much for CPU execution "
               f"(limit {CPU_COST[row.kind] / 1e9:g}); give a smaller --shapes")
    if why is None:
        return None
    row.kind, row.note = "skipped", why
    return row


def run_cpu(w: bench.Workload, s: dict, label: str, b: registry.Backend, host) -> Row:
    row = Row(w.name, label, b.name, b.kind, "CPU", _attr(b, "target"))
    if _skipped(w, s, row):
        return row
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in host()]
    try:
        for kfn, a, consts in w.runs(s, args):
            run_on(b, kfn, *a, **consts)
    except Exception as e:  # noqa: BLE001 - a backend that cannot run a kernel is a failed row, not a crash
        return _failed(row, e)
    return _checked(row, w.check_outputs(s, args))


def run_device(w: bench.Workload, s: dict, label: str, b: registry.Backend, host, rng,
               time_it: bool) -> list[Row]:
    """The device row: checked, then timed over rotating inputs (for memory-bound work also against the device
    copy of the same run, whose row `run_libraries` adds)."""
    row = Row(w.name, label, b.name, b.kind, _attr(b, "device"), _attr(b, "target"))
    if _skipped(w, s, row):
        return [row]
    host = host()
    try:
        args = [a.copy() if isinstance(a, np.ndarray) else a for a in host]
        sample = w.sample_rows(s, rng)
        for kfn, a, consts in w.runs(s, args):
            run_on(b, kfn, *a, **consts)
        _checked(row, w.check_outputs(s, args, sample))
        if sample is not None:
            row.note = f"checked on {len(sample)} sampled rows"
    except registry.LaunchHung:   # the device is stuck: the next row would wait on it forever
        raise
    except Exception as e:  # noqa: BLE001
        return [_failed(row, e)]
    if not time_it:
        return [row]
    clock = _clock(b)
    t = _time_ours(w, s, b, host, rng, _sets(host), clock)
    copy = _copy_row(w, s, label, row, _vendor(b), clock)
    return [_timed(row, t, w, s, targets.device_for(row.device), copy)]


def run_libraries(w: bench.Workload, s: dict, label: str, b: registry.Backend, host, ours: list[Row]) -> list[Row]:
    """The device copy's row (memory-bound work) and each vendor library's row for the shape; on each timed row
    of ours (one per --set variant) its speed against the fastest library."""
    timed = [r for r in ours if r.time_s]
    vendor = _vendor(b)
    if not timed or not vendor:
        return []
    clock, n_sets = _clock(b), _sets(host())
    copy = _copy_row(w, s, label, timed[0], vendor, clock)
    rows = [copy] if copy else []
    for lib in w.baselines(vendor):
        lrow = Row(w.name, label, "vendor library", "library", timed[0].device, timed[0].target)
        try:
            lrow.backend, step, sync = lib(s, n_sets)
            tl = bench.measure(step, sets=n_sets, clock=clock if vendor != "apple" else bench.HostClock(sync))
        except Exception as e:  # noqa: BLE001 - a library that cannot do this shape leaves our rows standing
            lrow.kind, lrow.note = "skipped", f"{type(e).__name__}: {str(e).strip()[:200]}"
            rows.append(lrow)
            continue
        for r in timed:
            r.vs_lib = min(r.vs_lib or math.inf, tl.median_s / r.time_s)   # against the fastest library
        lrow.vs_lib = tl.median_s / timed[0].time_s
        rows.append(_timed(lrow, tl, w, s, targets.device_for(lrow.device), copy))
    return rows


def _clock(b: registry.Backend):
    if _vendor(b) in ("nvidia", "amd"):
        return bench.EventClock()
    return bench.HostClock(getattr(b, "synchronize", None) or (lambda: None))


def _sets(host: list) -> int:
    return bench.input_sets(sum(a.nbytes for a in host if isinstance(a, np.ndarray)))


_COPY: dict = {}   # the copy bandwidth measured once per device and process


def _copy_row(w: bench.Workload, s: dict, label: str, row: Row, vendor: str | None, clock) -> Row | None:
    """For a memory-bound workload on a GPU, the device-to-device copy of the same run: its bandwidth is what
    `% copy` compares with."""
    if w.flops(s) or vendor not in ("nvidia", "amd"):
        return None
    if row.device not in _COPY:
        _COPY[row.device] = bench.copy_bandwidth(vendor, clock)
    if _COPY[row.device] is None:
        return None
    name, t, nbytes = _COPY[row.device]
    return Row(w.name, label, name, "library", row.device, row.target, time_s=t.median_s,
               gbs=nbytes / t.median_s / 1e9, copy_pct=100.0,
               note=f"median of {t.runs}, {t.clock}; bytes read + written")


def _time_ours(w: bench.Workload, s: dict, b: registry.Backend, host: list, rng, n_sets: int, clock) -> bench.Timing:
    """Our kernel over n_sets device input sets (freed on return, before the library allocates its own)."""
    sets = [[b.asarray(a) if isinstance(a, np.ndarray) else a for a in (host if i == 0 else w.inputs(s, rng))]
            for i in range(n_sets)]
    launches = [w.runs(s, args) for args in sets]

    def step(i):
        for kfn, a, consts in launches[i]:
            b.launch(kfn, a, **consts)
    return bench.measure(step, sets=n_sets, clock=clock)


def _timed(row: Row, t: bench.Timing, w: bench.Workload, s: dict, dev, copy: Row | None = None) -> Row:
    """Time, rate and % of the device's peak: matrix TFLOP/s for compute-bound work, else memory GB/s, also
    as a share of the copy bandwidth measured in the same run."""
    row.time_s = t.median_s
    if w.flops(s):
        row.tflops = w.flops(s) / t.median_s / 1e12
        if dev is not None and s["dtype"] in dev.peak_tflops:
            row.peak_pct = 100 * row.tflops / dev.peak_tflops[s["dtype"]]
    else:
        row.gbs = w.bytes(s) / t.median_s / 1e9
        if dev is not None:
            row.peak_pct = 100 * row.gbs / (dev.mem_bw_tbs * 1e3)
        if copy is not None:
            row.copy_pct = 100 * row.gbs / copy.gbs
    timing = f"median of {t.runs}, {t.sets} input set{'s' * (t.sets > 1)}, {t.clock}"
    row.note = f"{row.note}; {timing}" if row.note else timing
    if dev is None:
        row.note += "; device not in the peak table"
    return row


class Interrupted(Exception):
    """A run stopped by Ctrl-C or SIGTERM (what a time limit's kill sends): the rows finished before it."""

    def __init__(self, rows: list[Row]):
        super().__init__(f"interrupted after {len(rows)} rows")
        self.rows = rows


@contextlib.contextmanager
def terminate_as_interrupt():
    """SIGTERM raises KeyboardInterrupt inside the block, as Ctrl-C does (in the main thread; elsewhere nothing)."""
    def stop(signum, frame):
        raise KeyboardInterrupt
    try:
        before = signal.signal(signal.SIGTERM, stop)
    except ValueError:   # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def run_workload(w: bench.Workload, shapes: list[str], backends: list[registry.Backend], *, time_it: bool,
                 compile_targets: list[str], seed: int | None = None, desc: str = "",
                 variants: list[dict] = ({},), tuned: bool = False, libraries: bool = True) -> list[Row]:
    """variants: constants and options of the main kernel instead of its configuration's (`--set`), one set of
    rows each, the shape column naming them; the copy and the vendor libraries are timed once per shape and
    device, after every variant (run_libraries), unless libraries is False. tuned: also a row of the tune cache's
    winner, per backend."""
    rng = np.random.default_rng(seed)
    parsed = [(text, w.parse(text)) for text in shapes]
    runs = [(text, s, [(text + _tag(v), {**s, "set": v} if v else s) for v in variants]) for text, s in parsed]
    if tuned:   # beside the default row, the cache's winner for each backend (tiles tune fills it)
        runs = [(text, s, each, s) for text, s, each in runs]
    else:
        runs = [(text, s, each, None) for text, s, each in runs]
    devices = sum(b.kind == "device" for b in backends) if time_it and libraries else 0   # one step of libraries each
    prog = Progress(len(parsed) * ((len(backends) + len(compile_targets)) * len(variants) + devices),
                    desc or w.name)
    rows: list[Row] = []
    ours: list[Row] = []
    try:
        for text, s, each, tuned_s in runs:
            host = functools.cache(lambda s=s: w.inputs(s, rng))   # made once, only if a row runs
            for b in backends:
                ours = []
                for label, sv in each + (_tuned_variant(w, tuned_s, text, b, host) if tuned_s else []):
                    label += _heuristic_tag(w, sv, b.target, host) if "[tuned" not in label else ""
                    prog.doing(f"{b.name} {label}")
                    made = run_device(w, sv, label, b, host, rng, time_it) if b.kind == "device" else \
                        [run_cpu(w, sv, label, b, host)]
                    ours += made
                    prog.done(made)
                if b.kind == "device" and time_it and libraries:
                    prog.doing(f"vendor libraries {text}")
                    ours += run_libraries(w, s, text, b, host, ours)
                    prog.done()
                rows += ours
                ours = []
            for t in compile_targets:
                for label, sv in each:
                    label += _heuristic_tag(w, sv, t, host)
                    prog.doing(f"compile {t} {label}")
                    rows.append(compile_row(w, sv, label, t, host))
                    prog.done(rows[-1:])
    except KeyboardInterrupt:
        raise Interrupted(rows + ours) from None
    finally:
        prog.close()
    return rows


def _tuned_variant(w: bench.Workload, s: dict, text: str, b: registry.Backend, host) -> list[tuple[str, dict]]:
    """(label, shape with the cache's winner as its --set) for backend b, or [] where the cache has none."""
    kfn = w.kernel(s)
    if kfn.tune is None:
        return []
    try:
        _, args, consts = w.main(s, host())
        cfg = tune.entries(kfn).get(tune.key_of(kfn, b, args, {k: v for k, v in consts.items() if k != "tune"}))
    except Exception:  # noqa: BLE001 - no tuned row is no reason to stop the comparison
        return []
    return [(text + _tag(cfg, "tuned"), {**s, "set": cfg})] if cfg else []


def _heuristic_tag(w: bench.Workload, s: dict, target: str | None, host) -> str:
    """' [heuristic: ...]' where the kernel's heuristic sets the row's configuration on target (tiles.tune.defaults:
    the caller, here --set, chose none of its names); ' [heuristic set aside: ...]' where --set named one of them,
    so that the rest of what the heuristic would set does not apply either (the row runs the configured default
    there); else ''."""
    try:
        kfn, args, consts = w.main(s, host())
        chosen = {k: v for k, v in tune.defaults(kfn, target, args, consts).items() if k not in consts}
        aside = {k: v for k, v in kfn.shape_config(target, args, consts).items() if k not in consts}
    except Exception:  # noqa: BLE001 - a row that fails says why in its own place
        return ""
    return _tag(chosen, "heuristic") or _tag(aside, "heuristic set aside")


def _tag(v: dict, what: str = "") -> str:
    """' [k=v,...]' (' [what: k=v,...]'), or '' for no values."""
    return f" [{what + ': ' if what else ''}" + ",".join(f"{k}={x}" for k, x in v.items()) + "]" if v else ""


def compile_row(w: bench.Workload, s: dict, label: str, target: str, host) -> Row:
    from . import toolchains as tc
    row = Row(w.name, label, f"{targets.TARGETS[target].backend} (compile only)", "compile-only", "", target)
    if _skipped(w, s, row):
        return row
    try:
        kfn, args, consts = w.main(s, host())
        st = tc.static(kfn, args, target, **tune.defaults(kfn, target, args, consts))
    except tc.NoToolchain as e:
        row.kind, row.note = "skipped", str(e)
        return row
    except Exception as e:  # noqa: BLE001 - a compile failure is what this row reports
        return _failed(row, e)
    row.backend = f"{targets.TARGETS[target].backend} ({st.compiler})"
    row.note = st.summary()
    return row


# ---------------------------------------------------------------- commands

def cmd_demo(a) -> int:
    backends = runnable(a.backends)
    rows = []
    for name in a.kernels or list(bench.WORKLOADS):
        w = bench.workload(name)
        rows += run_workload(w, list(w.small_shapes), backends, time_it=False, compile_targets=[], seed=a.seed,
                             desc=f"demo {name}")
    print(f"tiles demo: the shipped kernels on {', '.join(b.name for b in backends)}, "
          "checked against float64 numpy\n")
    print(report.table(rows))
    print("\n" + _summary(rows))
    missing = _kernels_without_workload()
    if missing and not a.kernels:
        print(f"not in the demo (no workload in tiles.bench): {', '.join(missing)}")
    return 1 if any(r.ok is False for r in rows) else 0


def _kernels_without_workload() -> list[str]:
    """Kernels in tiles.kernels that no workload runs, so that a new kernel is named rather than missed."""
    import pkgutil

    from . import kernels
    from .dsl import KernelFn
    rng = np.random.default_rng(0)
    covered = {kfn.__name__ for w in bench.WORKLOADS.values() for t in w.small_shapes
               for kfn, _, _ in w.launches(w.parse(t), w.inputs(w.parse(t), rng))}
    out = []
    for m in pkgutil.iter_modules(kernels.__path__):
        mod = importlib.import_module(f"tiles.kernels.{m.name}")
        out += [f"{m.name}.{n}" for n, v in vars(mod).items() if isinstance(v, KernelFn) and n not in covered]
    return out


def _summary(rows: list[Row]) -> str:
    ok = sum(r.ok is True for r in rows)
    failed = sum(r.ok is False for r in rows)
    skipped = sum(r.kind == "skipped" for r in rows)
    return f"{ok} checked ok, {failed} FAILED, {skipped} skipped (see notes)"


def _setting(text: str) -> tuple[str, list]:
    """--set NAME=VALUE[,VALUE...]: each VALUE a Python literal (64, True, "warp"), else the string it is."""
    name, eq, values = text.partition("=")
    if not (eq and name.isidentifier() and all(values.split(","))):
        raise SystemExit(f"tiles compare: --set takes NAME=VALUE or NAME=V1,V2,..., got {text!r}")
    out = []
    for v in values.split(","):
        try:
            out.append(ast.literal_eval(v))
        except (ValueError, SyntaxError):
            out.append(v)
    return name, out


def variants(settings: list[str]) -> list[dict]:
    """Every combination of the --set values, in the order given ([{}] without --set): a sweep."""
    pairs = dict(map(_setting, settings))
    return [dict(zip(pairs, combo)) for combo in itertools.product(*pairs.values())]


def cmd_compare(a) -> int:
    stopped = False
    if a.merge:
        rows = report.merge(a.merge)
        if a.kernel:
            rows = [r for r in rows if r.kernel == a.kernel]
    else:
        if not a.kernel:
            raise SystemExit("tiles compare: name a kernel (" + ", ".join(bench.WORKLOADS) + ") or give --merge")
        w = bench.workload(a.kernel)
        backends = runnable(a.backends)
        on_device = {_attr(b, "target") for b in backends if b.kind == "device"}
        shapes = a.shapes or list(w.default_shapes if on_device else w.small_shapes)
        for t in shapes:
            w.parse(t)   # every shape is checked before anything runs
        if a.no_compile:
            compile_targets = []
        else:
            compile_targets = [t for t in (a.targets.split(",") if a.targets else targets.TARGETS)
                               if t not in on_device]
        try:   # stopped (Ctrl-C, or a time limit's SIGTERM): the rows finished so far are printed and saved
            with terminate_as_interrupt():
                rows = run_workload(w, shapes, backends, time_it=True, compile_targets=compile_targets,
                                    seed=a.seed, variants=variants(a.set or []), tuned=not a.set,
                                    libraries=not a.no_libraries)
        except Interrupted as e:
            rows, stopped = e.rows, True
        for r in rows:
            r.machine = report.machine()
    print(report.table(rows))
    if a.json:
        report.save(rows, a.json)
        print(f"\nsaved {len(rows)} rows to {a.json}")
    if a.plot:
        try:
            n = report.plot(rows, a.plot)
        except RuntimeError as e:   # no matplotlib, or nothing timed to plot
            print(f"tiles compare: {e}", file=sys.stderr)
            return 2
        print(f"plotted {n} bars to {a.plot}")
    if stopped:
        print(f"tiles compare: interrupted; the {len(rows)} rows above finished before it", file=sys.stderr)
        return 130
    return 1 if any(r.ok is False for r in rows) else 0


def cmd_devices(a) -> int:
    from . import toolchains as tc
    found, broken = discover()
    rows = [("backend", "kind", "target", "device", "runs here")]
    for b in found:
        why = why_not(b)
        rows.append((b.name, b.kind, _attr(b, "target") or "-", _attr(b, "device") if why is None else "-",
                     "yes" if why is None else f"no: {why}"))
    for v, err in broken.items():
        rows.append((v, "?", "-", "-", f"broken: tiles.backends.{v} does not import ({err})"))
    print("Backends\n" + _grid(rows))
    tools = tc.toolchains()
    print("\nToolchains\n" + _grid([("toolchain", "found", "for")] +
                                   [(t.name, t.found, t.purpose) for t in tools]))
    rows = [("target", "vendor", "compile here", "run on a device", "execute on the CPU")]
    for t in targets.TARGETS.values():
        dev = [b.name for b in found if b.kind == "device" and why_not(b) is None and _attr(b, "target") == t.name]
        emu = [b.name for b in found if b.kind == "emulator" and why_not(b) is None and _attr(b, "target") == t.name]
        why = tc.cannot_compile(t.name)
        rows.append((t.name, t.vendor, "yes" if why is None else f"no: {why}", ", ".join(dev) or "no",
                     ", ".join(emu) or "no"))
    print("\nTargets\n" + _grid(rows))
    return 0


def cmd_inspect(a) -> int:
    from . import toolchains as tc
    if a.asm:
        return _inspect_asm(a.asm, a.target, a.emit)
    if not a.kernel:
        raise ValueError("name a kernel (" + ", ".join(bench.WORKLOADS) + ") or give --asm FILE.s")
    w = bench.workload(a.kernel)
    s = w.parse(a.shape or w.small_shapes[0])
    if a.set:   # one configuration: constants and launch options of the main kernel, as compare's --set
        sweep = variants(a.set)
        if len(sweep) != 1:
            raise SystemExit("tiles inspect: --set takes one value a name")
        s = {**s, "set": sweep[0]}
    # the main kernel's launch; tracing reads only dtypes and ranks of its arguments
    kfn, args, consts = w.main(s, w.inputs(s, np.random.default_rng(0)))
    if a.emit:
        if not a.target:
            raise ValueError(f"--emit {a.emit} needs --target (one of {', '.join(targets.TARGETS)})")
        target = targets.target(a.target).name
        print(tc.emit(kfn, args, target, a.emit, **tune.defaults(kfn, target, args, consts)))
        return 0
    names = [t.strip() for t in a.targets.split(",") if t.strip()]
    for t in names:
        targets.target(t)
    rows = [("target", "compiler", "threads", "registers", "shared", "spills/scratch", "occupancy",
             "matrix instr. in main loop", "code", "notes")]
    prog = Progress(len(names), f"inspect {w.name}")
    failed, loops = False, []
    for t in names:
        prog.doing(f"compile {t}")
        try:
            st = tc.static(kfn, args, t, **tune.defaults(kfn, t, args, consts))
            loops += [st.loop] if st.loop and st.loop.mfma else []
            rows.append((t, st.compiler, str(st.threads), st.registers,
                         "?" if st.shared_bytes is None else f"{st.shared_bytes / 1024:.1f} KB", st.spills,
                         st.occupancy, st.mma, "?" if st.code_bytes is None else f"{st.code_bytes / 1024:.1f} KB",
                         st.note))
        except tc.NoToolchain as e:
            rows.append((t, "-", "-", "-", "-", "-", "-", "-", "-", f"not here: {e}"))
        except Exception as e:  # noqa: BLE001 - one target failing to compile is a row, the others still run
            failed = True
            rows.append((t, "-", "-", "-", "-", "-", "-", "-", "-",
                         f"FAILED: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"))
        prog.done()
    prog.close()
    print(f"tiles inspect {w.name} {s and a.shape or w.small_shapes[0]}: static resources per target\n")
    print(_grid(rows))
    if loops:
        print("\nmain loop per MFMA along its hot path (--emit loop --target T: the path, the counts, the bound)\n")
        print(_grid([loops[0].HEADER] + [r.row(w.name) for r in loops]))
    return 1 if failed else 0


def _inspect_asm(files: list[str], target: str | None, emit: str | None) -> int:
    """The main-loop report of assembly files made elsewhere (e.g. HipKittens' kernels): a row each, or with
    --emit loop the whole report."""
    from . import toolchains as tc
    if emit not in (None, "loop"):
        raise ValueError("--asm takes --emit loop only")
    reports = [(Path(f).stem, tc.asm_loop(Path(f).read_text(), target)) for f in files]
    for name, r in reports:
        if r is None:
            raise ValueError(f"{name}: no loop in the assembly")
    if emit:
        print("\n\n".join(r.text(name) for name, r in reports))
    else:
        print(_grid([reports[0][1].HEADER] + [r.row(name) for name, r in reports]))
    return 0


def _grid(rows) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths)] + lines[1:])


def cache_root() -> Path:
    """$TILES_CACHE, else ~/.cache/tiles (as the CUDA runtime and the emulator use it); a folder per backend."""
    return Path(os.environ.get("TILES_CACHE") or Path.home() / ".cache" / "tiles")


def cmd_cache(a) -> int:
    root = cache_root()
    dirs = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    if a.only:
        dirs = [d for d in dirs if d.name in a.only]
    if a.action == "clear":
        freed = 0
        for d in dirs:
            freed += _size(d)[1]
            shutil.rmtree(d)
        tune.forget()
        print(f"cleared {len(dirs)} cache folder(s) under {root}, {freed / 2**20:.1f} MiB")
        return 0
    rows = [("backend", "files", "size", "path")]
    for d in dirs:
        n, size = _size(d)
        rows.append((d.name, str(n), f"{size / 2**20:.1f} MiB", str(d)))
    print(f"compile caches under {root}" + ("" if dirs else ": none yet"))
    if dirs:
        print(_grid(rows))
    found = tune.summary()
    if found and (not a.only or "tune" in a.only):
        print("\ntuned configurations (tiles tune; stale and corrupt entries are ignored by launches)")
        print(_grid([("kernel", "valid", "stale", "corrupt", "file")] + [tuple(map(str, r)) for r in found]))
    return 0


def _size(d: Path) -> tuple[int, int]:
    files = [p for p in d.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def cmd_tune(a) -> int:
    """Search a shipped kernel's space at each shape: timed on a device backend where one runs here for the
    target (the winner stored in the tune cache), else ranked by the static model alone, and said so."""
    import json

    w = bench.workload(a.kernel)
    for t in a.shapes:
        w.parse(t)
    if not sys.stderr.isatty():   # a log: each phase as it ends, so that a run cut short shows how far it got
        _log_to_stderr("tiles.tune")
    b = _tune_backend(a)
    target = _attr(b, "target") or None if b is not None else targets.target(a.target).name
    results = []
    for text in a.shapes:
        bar = [None]

        def progress(n, text=text):
            if bar[0] is not None:
                bar[0].close()
            bar[0] = Progress(n, f"tune {w.name} {text}")
            return lambda: bar[0].done()
        try:
            r = tune.tune_workload(w, text, b, target, top=a.top, device=a.device, min_blocks=a.min_blocks,
                                   seed=a.seed, progress=progress, save=not a.dry_run)
        finally:
            if bar[0] is not None:
                bar[0].close()
        results.append(r)
        print(_tune_report(r, b, a.dry_run) + "\n", flush=True)
        if a.json:   # after every shape: a run cut short by a time limit keeps what it measured
            Path(a.json).write_text(json.dumps([tune.result_json(x) for x in results], indent=1))
    timed = [r for r in results if r.model_within() is not None]
    if timed:
        agree = sum(r.model_within() for r in timed)
        print(f"static model's first choice within 10% of the timed winner: {agree} of {len(timed)} shapes")
    if a.json:
        print(f"saved {len(results)} results to {a.json}")
    return 0


def _log_to_stderr(name: str) -> None:
    import logging

    class Stderr(logging.StreamHandler):
        """sys.stderr as it is at each record: main() may run again in one process with stderr redirected since
        (a notebook, pytest's capture), and a stream kept from the first call may be closed by then."""
        stream = property(lambda self: sys.stderr, lambda self, value: None)

    log = logging.getLogger(name)
    if not log.handlers:
        log.addHandler(Stderr())
        log.setLevel(logging.INFO)


def _tune_backend(a) -> registry.Backend | None:
    """The backend to time on: --backend, else the device backend for --target (or any) that runs here; None:
    the static model only (no such device here, or --static)."""
    if a.static:
        if not a.target:
            raise SystemExit("tiles tune: --static needs --target")
        return None
    if a.backend:
        return runnable(a.backend)[0]
    devices = [b for b in runnable(None) if b.kind == "device"]
    if a.target:
        devices = [b for b in devices if _attr(b, "target") == a.target]
        return devices[0] if devices else None
    if not devices:
        raise SystemExit("tiles tune: no device backend runs here; give --target for the static model's choice, "
                         "or --backend reference (or an emulator) to time on the CPU")
    return devices[0]


def _tune_report(r, b, dry_run: bool) -> str:
    head = f"tiles tune {r.kernel} {r.shape}"
    if r.timed:
        head += f" on {b.name} ({r.device}, {r.target})"
    else:
        head += (f" for {r.target}: NOT TIMED (no {r.target} device here): the static model's choice for "
                 f"{r.device}")
    pruned = [c for c in r.candidates if c.dropped]
    head += f"\n{len(r.candidates)} candidates, {len(pruned)} pruned before timing"
    if r.phases:
        head += f"; {sum(r.phases.values()):.1f} s: " + ", ".join(f"{k} {v:.1f}" for k, v in r.phases.items())
    rows = [("config", "static", "model", "bound", "time", "vs default", "note")]
    live = sorted((c for c in r.candidates if not c.dropped),
                  key=lambda c: (c.time_s is None, c.time_s or 0, c.model_s or 0))
    base = r.default.time_s
    for c in live:
        rows.append((c.label(), c.static.summary().split(", mma")[0] if c.static else "not compiled",
                     "-" if c.model_s is None else f"{c.model_s * 1e6:.1f} us", str(c.terms.get("bound", "-")),
                     "-" if c.time_s is None else f"{c.time_s * 1e6:.1f} us",
                     f"{base / c.time_s:.2f}x" if base and c.time_s else "-", c.error or ""))
    out = [head, _grid(rows)]
    reasons: dict = {}
    for c in pruned:
        reasons.setdefault(c.dropped.split(":")[0], []).append(c.label())
    for why, labels in reasons.items():
        out.append(f"pruned, {why}: {len(labels)} ({'; '.join(labels[:3])}{'; ...' if len(labels) > 3 else ''})")
    if r.timed:
        gain = f", {base / r.winner.time_s:.2f}x the default" if base else ""
        mf, within = r.model_first, r.model_within()
        model = ("no static model for the reference" if within is None else
                 f"the static model's first choice {mf.label()} is {'within' if within else 'NOT within'} 10% of it")
        out.append(f"winner: {r.winner.label()} ({r.winner.time_s * 1e6:.1f} us{gain}); {model}")
        out.extend(r.notes)
        out.append("not stored (--dry-run)" if dry_run else f"stored in {r.entry and tune_file(r)}")
    else:
        out.append(f"choice (not timed): {r.winner.label()}, modelled at {r.winner.model_s * 1e6:.1f} us "
                   f"({r.winner.terms.get('bound')}-bound); not stored: launches use timed winners only")
    return "\n".join(out)


def tune_file(r) -> str:
    return str(tune.cache_dir() / f"{r.kernel}.json")


def cmd_bench(args: list[str]) -> int:
    try:
        mod = importlib.import_module("tiles.backends.cuda.bench")
    except ImportError as e:
        raise SystemExit(f"tiles bench: the CUDA benchmark module is not available ({e})") from None
    return mod.main(args)


def cmd_fuzz(a) -> int:
    # The CPU engines' builds at -O0: a fuzzed kernel runs once, briefly, and compiles in about half the time
    # (docs/testing.md); the caller's TILES_EMU_OPT wins
    os.environ.setdefault("TILES_EMU_OPT", "-O0")
    rep = fuzz.fuzz(a.budget, [b.strip() for b in a.backends.split(",") if b.strip()], a.seed)
    print(rep.summary())
    return 1 if rep.findings else 0


# ---------------------------------------------------------------- argument parsing

def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tiles", description="Run, compare and inspect tiles kernels across vendors.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    d = sub.add_parser("demo", help="run the shipped kernels everywhere they can run here, checked against numpy")
    d.add_argument("--kernels", nargs="+", choices=list(bench.WORKLOADS))
    d.add_argument("--backends", help="comma-separated backend names (default: every one that runs here)")
    d.add_argument("--seed", type=int)
    d.set_defaults(fn=cmd_demo)

    sub.add_parser("devices", help="backends, devices, toolchains, and what each target can do here"
                   ).set_defaults(fn=cmd_devices)

    c = sub.add_parser("compare", help="one kernel on every backend and target: error, time, %% of peak, "
                       "ratio to the vendor library, static resources")
    c.add_argument("kernel", nargs="?", choices=list(bench.WORKLOADS))
    c.add_argument("--shapes", nargs="+", metavar="SHAPE",
                   help="; ".join(f"{w.name}: {w.syntax}" for w in bench.WORKLOADS.values()))
    c.add_argument("--backends", help="comma-separated backend names (default: every one that runs here)")
    c.add_argument("--targets", help="comma-separated targets for compile-only rows (default: those with no "
                   "device here)")
    c.add_argument("--no-compile", action="store_true", help="no compile-only rows")
    c.add_argument("--no-libraries", action="store_true", help="no vendor-library, peer or copy rows (a sweep "
                   "where only our rows matter: saves their setup, e.g. FlexAttention's compile; no vs lib)")
    c.add_argument("--json", metavar="FILE", help="save the rows")
    c.add_argument("--merge", nargs="+", metavar="FILE", help="join saved rows from several machines instead")
    c.add_argument("--plot", metavar="FILE.png", help="grouped bars of %% of peak (needs matplotlib)")
    c.add_argument("--seed", type=int)
    c.add_argument("--set", nargs="+", metavar="NAME=VALUE",
                   help="the main kernel's constants or launch options instead of its configuration's "
                        "(e.g. RPB=2 workers=2 schedule=warp); NAME=V1,V2 sweeps the values, one row per "
                        "combination")
    c.set_defaults(fn=cmd_compare)

    i = sub.add_parser("inspect", help="static resources across targets, the generated source/assembly, or the "
                       "main loop of AMD assembly counted per MFMA")
    i.add_argument("kernel", nargs="?", choices=list(bench.WORKLOADS))
    i.add_argument("--targets", default=",".join(targets.TARGETS))
    i.add_argument("--shape", help="shape whose constants (dtype, flags, head dim) to compile for")
    i.add_argument("--emit", choices=("source", "ir", "ptx", "sass", "asm", "loop"))
    i.add_argument("--target", help="the one target of --emit (of --asm: instead of the file's .amdgcn_target)")
    i.add_argument("--asm", nargs="+", metavar="FILE.s", help="the main-loop report of AMDGPU assembly files "
                   "made elsewhere, instead of a kernel's")
    i.add_argument("--set", nargs="+", metavar="NAME=VALUE", help="a constant or launch option of the main kernel "
                   "(compare's --set, one value each), e.g. deferred=True")
    i.set_defaults(fn=cmd_inspect)

    t = sub.add_parser("tune", help="search a kernel's configurations at shapes: timed on a device (stored in "
                       "the tune cache), else the static model's choice")
    t.add_argument("kernel", choices=list(bench.WORKLOADS))
    t.add_argument("--shapes", nargs="+", metavar="SHAPE", required=True,
                   help="; ".join(f"{w.name}: {w.syntax}" for w in bench.WORKLOADS.values()))
    t.add_argument("--target", help="the target (default: the device's); without its device here: static model")
    t.add_argument("--backend", help="time on this backend (reference and emulators time on the CPU)")
    t.add_argument("--static", action="store_true", help="the static model only, even where a device runs")
    t.add_argument("--top", type=int, default=8, help="time the model's best N survivors and the default (8)")
    t.add_argument("--device", help="device table entry the static model assumes (default: the target's usual one)")
    t.add_argument("--min-blocks", type=int, default=1, help="occupancy floor: blocks per SM/CU (1)")
    t.add_argument("--dry-run", action="store_true", help="do not store the winners")
    t.add_argument("--json", metavar="FILE", help="save every candidate, its resources, model terms and time")
    t.add_argument("--seed", type=int)
    t.set_defaults(fn=cmd_tune)

    k = sub.add_parser("cache", help="the compile caches and the tune cache")
    k.add_argument("action", choices=("info", "clear"))
    k.add_argument("only", nargs="*", metavar="BACKEND", help="only these cache folders")
    k.set_defaults(fn=cmd_cache)

    f = sub.add_parser("fuzz", help="differential fuzzing: random kernels on the reference and every engine")
    f.add_argument("--budget", type=float, default=60.0, help="seconds of generating and checking (default 60)")
    f.add_argument("--backends", default=",".join(fuzz.CPU_ENGINES),
                   help="comma-separated backends to check against the reference (default: the CPU engines)")
    f.add_argument("--seed", type=int, default=0)
    f.set_defaults(fn=cmd_fuzz)

    # every argument after `bench` is the benchmark's own (main() passes them on before parsing)
    sub.add_parser("bench", help="the H200 benchmark of the CUDA backend: tiles bench --help for its options")
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:
        return cmd_bench(argv[1:])
    a = parser().parse_args(argv)
    try:
        return a.fn(a)
    except (ValueError, KeyError) as e:   # bad shapes, unknown names: one line, no traceback
        print(f"tiles {a.command}: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    except BrokenPipeError:               # `tiles inspect ... --emit sass | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
