"""Autotuning: a search space per kernel and target, pruned by the offline toolchains, ranked by a static cost
model, timed on a device, and the winners kept in a persistent cache that every launch reads (docs/tuning.md).

    @tl.kernel(configs=CONFIGS,
               tune={"sm_90a": dict(BM=[64, 128], BN=[128, 256], stages=[3, 4], workers=[1, 2])},
               tune_key=lambda C, A, B: (tl.tune.pow2(A.shape[0]), B.shape[-1], A.shape[-1]),
               tune_where=lambda cfg, C, A, B: cfg["BM"] <= 2 * tl.tune.pow2(A.shape[0]))

A space maps a target (or "default", for every target without its own) to lists of values of constants and
launch options; a value may instead be a function of the kernel's arguments (anything with .shape and
.dtype) returning the list. `tune_where(cfg, *args)` sees the whole configuration (constants and options)
and prunes what cannot or need not run. `tune_key(*args)` is the shape bucket: launches whose arguments fall in
one bucket share one cache entry.

A launch (`Backend.launch`) looks its bucket up in the cache (a dict in memory, read from disk once per process)
and runs the winner under the caller's keywords; with no entry it runs the configured default. It never
searches unless asked: `tune=True` at the call, or TILES_AUTOTUNE=1. `tune=False` runs the default even where an
entry exists; a caller who sets one of the tuned names chooses for themselves, and the cache is not read.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import inspect
import itertools
import json
import math
import os
import shutil
import subprocess
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import dtypes, ir, targets
from .types import GL

FORMAT = 1   # of a cache entry; an entry of another format is stale


def pow2(n: int) -> int:
    """The smallest power of two >= n (the usual shape bucket of a dim: 1, 2, 4, ..., 16384)."""
    return 1 << max(0, int(n) - 1).bit_length()


class Space:
    """What `@tl.kernel(tune=..., tune_key=..., tune_where=...)` declares."""

    def __init__(self, per_target: dict, key=None, where=None, defaults=None):
        for t, space in per_target.items():
            if t != "default":
                targets.target(t)   # a misspelt target must not be ignored silently
            for name, values in space.items():
                if not (callable(values) or (isinstance(values, (list, tuple)) and values)):
                    raise TypeError(f"tune[{t!r}][{name!r}]: a non-empty list of values or a function of the "
                                    f"arguments returning one, got {values!r}")
        self.per_target, self.key, self.where, self.defaults = dict(per_target), key, where, defaults
        self._base: dict = {}
        self._names: dict = {}

    def for_target(self, target: str | None) -> dict:
        return self.per_target.get(target or "", self.per_target.get("default", {}))

    def names(self, target: str | None) -> frozenset:
        names = self._names.get(target)
        if names is None:
            names = self._names[target] = frozenset(self.for_target(target))
        return names

    def chosen(self, target: str | None, args, overrides: dict) -> bool:
        """Whether the caller set a tuned name to a value of its own: not one of `defaults(*args)`, what a
        caller with no opinion passes for the shape (the row kernels' plan passes rows per block)."""
        named = self.names(target).intersection(overrides)
        if not named:
            return False
        usual = self.defaults(*args) if self.defaults else {}
        return any(n not in usual or usual[n] != overrides[n] for n in named)

    def bucket(self, args) -> tuple:
        """The shape bucket of these arguments (every array's exact shape where the kernel declares none)."""
        if self.key is not None:
            return tuple(self.key(*args))
        return tuple(tuple(a.shape) if hasattr(a, "shape") else None for a in args)

    def base(self, kfn, target: str | None) -> dict:
        """The configuration a launch with no keywords has for target (function defaults < configs)."""
        if target not in self._base:
            defaults = {k: v for k, v in kfn.const_defaults.items() if v is not inspect.Parameter.empty}
            self._base[target] = {**defaults, **kfn.configs.get("default", {}), **kfn.configs.get(target or "", {})}
        return self._base[target]


class Shaped:
    """An argument as the static steps see it: a shape and a dtype, no memory (tracing reads only those)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(int(n) for n in shape), np.dtype(dtypes.of(dtype).np)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize

    def __repr__(self):
        return f"Shaped({self.shape}, {dtypes.of(self.dtype)})"


def shapes_of(args) -> list:
    """Every array among args as a Shaped; numbers as they are."""
    return [Shaped(a.shape, dtypes.of(a)) if hasattr(a, "shape") else a for a in args]


# ---------------------------------------------------------------- the cache

def cache_dir() -> Path:
    """$TILES_CACHE/tune (default ~/.cache/tiles/tune): one JSON file per kernel name."""
    return Path(os.environ.get("TILES_CACHE") or Path.home() / ".cache" / "tiles") / "tune"


def source_hash(kfn) -> str:
    """The kernel's module source (its body may call the module's helpers) and tiles' version, digested."""
    h = getattr(kfn, "_tune_source", None)
    if h is None:
        from . import __version__
        try:
            text = Path(inspect.getsourcefile(kfn.fn)).read_bytes()
        except (TypeError, OSError):   # defined where no file holds it (a REPL): its bytecode
            text = kfn.fn.__code__.co_code
        h = hashlib.sha256(text + kfn.__qualname__.encode() + __version__.encode()).hexdigest()[:16]
        kfn._tune_source = h
    return h


_IDENTITY: dict = {}   # backend name -> (target, device, toolkit)


def identity(b) -> tuple[str, str, str]:
    """(target, device name, toolkit version) of a backend: three parts of every cache key, found once."""
    ident = _IDENTITY.get(b.name)
    if ident is None:
        ident = _IDENTITY[b.name] = (b.target or "reference", str(b.device), toolkit(b))
    return ident


def toolkit(b) -> str:
    """The compiler versions whose code a backend runs: a cubin built by another NVRTC is another program."""
    from . import __version__
    parts = [f"tiles {__version__}"]
    if getattr(b, "toolkit", None):
        parts.append(str(b.toolkit))
    elif b.kind == "reference":
        parts.append(f"numpy {np.__version__}")
    elif b.kind == "emulator":
        parts.append(_host_compiler())
    elif b.target in ("sm_80", "sm_90a"):
        from .backends.cuda import toolchain
        import cupy
        parts += [f"nvrtc {toolchain.versions().get('nvrtc', '?')}", f"driver {cupy.cuda.runtime.driverGetVersion()}"]
    return ", ".join(parts)


def _host_compiler() -> str:
    cxx = os.environ.get("CXX") or "g++"
    if not shutil.which(cxx):
        return f"{cxx} (absent)"
    p = subprocess.run([cxx, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True)
    return f"{cxx} {p.stdout.strip()}"


_DTYPE_NAMES: dict = {}   # an array's dtype object (numpy, torch, ...) -> the tiles name


def _dtypes(args) -> tuple:
    out = []
    for a in args:
        d = getattr(a, "dtype", None)
        if d is None:
            out.append(type(a).__name__)
            continue
        name = _DTYPE_NAMES.get(d)
        if name is None:
            name = _DTYPE_NAMES[d] = dtypes.of(a).name
        out.append(name)
    return tuple(out)


def _fixed(space: Space, kfn, target, overrides: dict) -> tuple:
    """The caller's keywords that differ from the configuration, tuned names aside: a part of the key (B
    transposed or not; a row kernel's tile shape)."""
    if not overrides:
        return ()
    base, names = space.base(kfn, target), space.names(target)
    return tuple(sorted((k, repr(v)) for k, v in overrides.items()
                        if k not in names and (k not in base or base[k] != v)))


@dataclass
class Entry:
    """One winner: the configuration and how it was found."""
    kernel: str
    source: str
    target: str
    device: str
    toolkit: str
    dtypes: list
    bucket: list
    fixed: list
    config: dict
    time_s: float | None = None        # the winner's median, where timed
    default_s: float | None = None     # the configured default's, in the same run
    model_s: float | None = None       # the static model's estimate of the winner
    shape: str = ""                    # the shape it was tuned at
    when: str = ""

    FIELDS = ("kernel", "source", "target", "device", "toolkit", "dtypes", "bucket", "fixed", "config")

    def key(self) -> tuple:
        return (self.target, self.device, self.toolkit, _tupled(self.dtypes), _tupled(self.bucket),
                _tupled(self.fixed))

    def to_json(self) -> dict:
        d = {"format": FORMAT, **{k: v for k, v in vars(self).items()}}
        d["checksum"] = _checksum(d)
        return d


def _tupled(x):
    return tuple(_tupled(v) for v in x) if isinstance(x, (list, tuple)) else x


def _checksum(d: dict) -> str:
    body = {k: v for k, v in d.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def read_file(path: Path) -> tuple[list[dict], str | None]:
    """The raw entries of one cache file, and why the file as a whole is unreadable (None: it is fine)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return [], None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return [], f"unreadable ({type(e).__name__}: {e})"
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        return [], "not a tiles tune cache (no 'entries' list)"
    return data["entries"], None


def judge(raw, kfn=None) -> tuple[Entry | None, str]:
    """(the entry, "ok") or (None, "corrupt: why" / "stale: why"). Corrupt: not what tiles writes (a field
    missing or of the wrong type, the checksum wrong). Stale: well-formed, but for another version of the
    kernel (source), another format, or a configuration the kernel's current space no longer has."""
    if not isinstance(raw, dict):
        return None, "corrupt: not an object"
    if raw.get("format") != FORMAT:
        return None, f"stale: format {raw.get('format')!r}, this tiles writes {FORMAT}"
    if raw.get("checksum") != _checksum(raw):
        return None, "corrupt: checksum does not match"
    try:
        e = Entry(**{k: v for k, v in raw.items() if k not in ("format", "checksum")})
    except TypeError as err:
        return None, f"corrupt: {err}"
    if not (all(isinstance(getattr(e, f), str) for f in Entry.FIELDS[:5]) and isinstance(e.config, dict)
            and all(isinstance(getattr(e, f), list) for f in ("dtypes", "bucket", "fixed"))):
        return None, "corrupt: a field of the wrong type"
    if kfn is not None:
        if e.source != source_hash(kfn):
            return None, "stale: the kernel's source changed since"
        space = kfn.tune.for_target(None if e.target == "reference" else e.target)
        for name, v in e.config.items():
            values = space.get(name)
            if values is None:
                return None, f"stale: {name} is no longer in the search space"
            if not callable(values) and v not in values:
                return None, f"stale: {name}={v!r} is no longer among {list(values)}"
    return e, "ok"


_MEMORY: dict = {}   # (kernel, $TILES_CACHE) -> {key: config} of the valid entries: launches read this, not the disk


def entries(kfn) -> dict:
    """{key: config} of the kernel's valid entries, read from disk once per process and cache folder."""
    mem = _MEMORY.get((kfn, os.environ.get("TILES_CACHE")))
    if mem is None:
        path = cache_dir() / f"{kfn.__name__}.json"
        mem = {}
        raw, why = read_file(path)
        if why:
            warnings.warn(f"tiles: ignoring the tune cache {path}: {why}", stacklevel=3)
        for r in raw:
            e, verdict = judge(r, kfn)
            if e is not None and e.kernel == kfn.__name__:
                mem[e.key()] = e.config
        _MEMORY[kfn, os.environ.get("TILES_CACHE")] = mem
    return mem


def store(kfn, entry: Entry) -> Path:
    """Add or replace the entry of its key (corrupt and stale entries of the file are dropped on the way)."""
    path = cache_dir() / f"{kfn.__name__}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    raw, _ = read_file(path)
    keep = []
    for r in raw:
        e, verdict = judge(r, kfn)
        if e is not None and e.key() != entry.key():
            keep.append(r)
    keep.append(entry.to_json())
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"entries": keep}, indent=1))
    tmp.replace(path)   # atomic: a concurrent reader sees the old file or the new one
    _MEMORY.pop((kfn, os.environ.get("TILES_CACHE")), None)
    return path


def forget() -> None:
    """Drop what this process read from the cache (after another process wrote it, or `tiles cache clear`)."""
    _MEMORY.clear()


# ---------------------------------------------------------------- the launch's lookup

_MISS = object()


def key_of(kfn, b, args, overrides: dict) -> tuple:
    target, device, tk = identity(b)
    space = kfn.tune
    t = None if target == "reference" else target
    return (target, device, tk, _dtypes(args), space.bucket(args), _fixed(space, kfn, t, overrides))


def resolve(kfn, b, args, overrides: dict) -> dict:
    """The keywords a launch of kfn on backend b runs with: the cache's winner for these arguments under the
    caller's keywords, or the caller's alone. Pops the call's `tune` switch."""
    mode = overrides.pop("tune", None)
    space = kfn.tune
    if space is None or mode is False:
        return overrides
    target = b.target
    if space.chosen(target, args, overrides):   # the caller chose a tuned value: theirs stands
        return overrides
    key = key_of(kfn, b, args, overrides)
    cfg = entries(kfn).get(key, _MISS)
    if cfg is _MISS:
        if not (mode or os.environ.get("TILES_AUTOTUNE") == "1"):
            return overrides
        result = search(kfn, b, args, overrides)
        cfg = result.winner.config
    return {**cfg, **overrides}


# ---------------------------------------------------------------- candidates and static pruning

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
    configured default first."""
    space = kfn.tune
    if space is None:
        raise TypeError(f"{kfn.__name__} declares no search space (@tl.kernel(tune=...))")
    dims = {n: list(v(*args) if callable(v) else v) for n, v in space.for_target(target).items()}
    if not dims:
        raise TypeError(f"{kfn.__name__} has no search space for {target or 'the reference'}: "
                        f"it declares {', '.join(space.per_target)}")
    base = {**space.base(kfn, target), **fixed}
    default = {n: base[n] for n in dims if n in base}
    out, seen = [Candidate(default, default=True)], {_ident(default)}
    for combo in itertools.product(*dims.values()):
        cfg = dict(zip(dims, combo))
        full = {**base, **cfg}
        kfn.config(target, **full)   # a name that is neither a constant nor an option is refused here
        if space.where is not None and not space.where(full, *args):
            continue
        if _ident(cfg) not in seen:
            seen.add(_ident(cfg))
            out.append(Candidate(cfg))
    return out


def _ident(cfg: dict) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in cfg.items()))


def prune(kfn, target: str, args, cands: list[Candidate], fixed: dict, *, min_blocks: int = 1,
          jobs: int | None = None, progress=None) -> None:
    """Mark the candidates that cannot be worth timing, from what the offline toolchain says (`dropped` is
    "KIND: detail"): the verifier or the backend refuses it ("refused"), it generates the source of an earlier
    candidate ("same code"), it does not compile, it spills, its shared memory/LDS/threadgroup memory exceeds the
    target's, or fewer than min_blocks blocks fit a unit ("occupancy"). Compiles run in parallel, each in its own
    child process."""
    from . import toolchains as tc
    from .dsl import TileError
    shaped = shapes_of(args)
    live, sources = [], {}
    for c in cands:
        try:
            kfn.trace(shaped, target, **{**fixed, **c.config})
            source = tc.emit(kfn, shaped, target, "source", **{**fixed, **c.config})
        except (TileError, TypeError, ValueError) as e:
            c.dropped = f"refused: {_first_line(e)}"
            continue
        if source in sources:   # the backend made the same program of it (a worker count it cannot use)
            c.dropped = f"same code: as {sources[source].label()}"
            continue
        sources[source] = c
        live.append(c)
    jobs = jobs or max(1, os.cpu_count() or 1)

    def compile_one(c):
        return tc.static(kfn, shaped, target, **{**fixed, **c.config})
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:   # each compile is a child process: threads wait
        futures = {pool.submit(compile_one, c): c for c in live}
        for f in concurrent.futures.as_completed(futures):
            c = futures[f]
            try:
                c.static = f.result()
            except tc.NoToolchain as e:
                c.static, c.terms["not compiled"] = None, str(e)
            except Exception as e:  # noqa: BLE001 - a compile failure prunes this candidate, not the search
                c.dropped = f"does not compile: {_first_line(e)}"
            if progress:
                progress()
    limit = targets.target(target).shared_bytes
    for c in live:
        st = c.static
        if c.dropped or st is None:
            continue
        if st.spill_bytes:
            c.dropped = f"spills: {st.spills}"
        elif st.shared_bytes is not None and st.shared_bytes > limit:
            c.dropped = f"shared memory: {st.shared_bytes / 1024:.1f} KB > {limit / 1024:.0f} KB"
        elif st.blocks_per_unit is not None and st.blocks_per_unit < min_blocks:
            c.dropped = f"occupancy: {st.occupancy}, below {min_blocks} block(s) per unit"


def _first_line(e: Exception) -> str:
    text = (getattr(e, "problem", None) or str(e)).strip()
    return f"{type(e).__name__}: {text.splitlines()[-1] if text else ''}"


# ---------------------------------------------------------------- the static cost model

# Assumptions of the model (docs/tuning.md), to be calibrated against the timed runs:
LATENCY_S = 1.0e-6       # a global load's latency under load: a unit's bandwidth is at most its bytes in flight / it
UNIT_SHARE = 3.0         # one SM/CU can draw up to this many times its fair share (bandwidth / units) of DRAM
L2_FACTOR = 2.5          # the L2 (Infinity Cache) serves the blocks' repeated reads this many times faster than DRAM
BLOCK_S = 1.5e-6         # a block's fixed cost (prologue, pipeline fill, epilogue) per wave of resident blocks
LAUNCH_S = 3.0e-6        # one launch
TRANSCENDENTAL = 4       # exp/exp2/log/log2 cost this many vector operations


# A representative device per target for the model where none is present (`--device` picks another)
MODEL_DEVICE = {"sm_80": "A100 SXM", "sm_90a": "H200 SXM", "gfx942": "MI300X", "gfx950": "MI355X",
                "apple": "M4 Max"}


def model_device(target: str, device: str | None = None) -> targets.Device:
    if device:
        d = targets.DEVICES.get(device) or targets.device_for(device)
        if d is None:
            raise KeyError(f"unknown device {device!r}; known: {', '.join(targets.DEVICES)}")
        return d
    return targets.DEVICES[MODEL_DEVICE[target]]


def work(k: ir.Kernel, args) -> dict:
    """What one launch of k on these arguments does, per block (averaged over blocks where loop counts depend
    on the block, as causal attention's do): matrix FLOPs, vector operations, global bytes, and the bytes one
    step of the pipelined loop loads (what runs ahead); and the grid's size and the arrays' total bytes."""
    from .interp import bind
    env = bind(k, args)
    grid = [max(1, int(ir.evaluate(g, env))) for g in k.grid] or [1]
    blocks = int(np.prod(grid))
    samples = sorted({0, grid[0] // 2, grid[0] - 1})
    total = {"flops": 0.0, "vector": 0.0, "bytes": 0.0, "step_bytes": 0.0}
    for b0 in samples:
        benv = {**env, **{("block", i): 0 for i in range(len(grid))}, ("block", 0): b0}
        _work(k.body, benv, 1.0, total, False)
    per_block = {n: v / len(samples) for n, v in total.items()}
    per_block["step_bytes"] = total["step_bytes"]   # a maximum, not a sum over the samples
    unique = 0.0
    for p, a in zip(k.params, args):
        if isinstance(p, GL):
            unique += np.prod(a.shape) * p.dtype.itemsize
    return {**per_block, "blocks": blocks, "unique_bytes": unique}


def _work(stmts, env, mult, acc, in_pipeline):
    for s in stmts:
        if isinstance(s, ir.Loop):
            n = max(0, int(ir.evaluate(s.count, env)))
            inner = {**env, ir.key(s.var): 0}
            if s.kind == "pipeline":   # one step's loads are what the pipeline keeps in flight
                step = {"flops": 0.0, "vector": 0.0, "bytes": 0.0, "step_bytes": 0.0}
                _work(s.body, inner, 1.0, step, True)
                acc["step_bytes"] = max(acc["step_bytes"], step["bytes"])
            _work(s.body, inner, mult * n, acc, in_pipeline or s.kind == "pipeline")
            continue
        dst, srcs = s.dst, s.srcs
        if s.name == "mma":
            a = srcs[0]
            depth = a.shape[0] if s.attrs.get("trans_a") else a.shape[1]
            acc["flops"] += mult * 2.0 * dst.shape[0] * dst.shape[1] * depth
        elif s.name == "load" and isinstance(srcs[0], GL):
            acc["bytes"] += mult * np.prod(dst.shape) * srcs[0].dtype.itemsize
        elif s.name in ("store", "atomic_add") and isinstance(dst, GL):
            acc["bytes"] += mult * np.prod(srcs[0].shape) * dst.dtype.itemsize * (2 if s.name == "atomic_add" else 1)
        elif dst is not None and hasattr(dst, "shape") and not isinstance(dst, GL) and s.name not in ("load", "store"):
            weight = TRANSCENDENTAL if s.name in ("exp", "exp2", "log", "log2") else 1
            acc["vector"] += mult * weight * np.prod(dst.shape)


def model(k: ir.Kernel, args, target: str, static=None, device: targets.Device | None = None,
          launches: int = 1) -> tuple[float, dict]:
    """Estimated seconds of one launch and the terms behind it (docs/tuning.md, "The static model"):

      matrix   = ceil(blocks / units) x FLOPs per block / (matrix peak / units)   (blocks quantized over units)
      vector   = the same with vector operations against the vector (f32) rate
      memory   = the largest of: the arrays' bytes from DRAM, every block's bytes through the L2 (L2_FACTOR x
                 DRAM's rate), both at the share of the bandwidth the busy units can draw (UNIT_SHARE x theirs,
                 at most all of it); and per unit, its blocks' bytes at what its resident blocks keep in flight
                 (stages x a pipeline step's loads) per LATENCY_S
      fixed    = waves x BLOCK_S + launches x LAUNCH_S, waves = ceil(blocks / (units x resident blocks per unit))
      estimate = max(matrix, vector, memory) + fixed
    """
    dev = device or model_device(target)
    w = work(k, args)
    units, blocks = dev.units, w["blocks"]
    resident = _resident(k, target, static)
    mma_dtype = _mma_dtype(k)
    peak = dev.peak_tflops.get(mma_dtype, dev.peak_tflops.get("bf16", 1.0)) * 1e12
    vec = dev.peak_tflops.get("f32", peak / 1e12) * 1e12
    bw = dev.mem_bw_tbs * 1e12
    per_unit = math.ceil(blocks / units)
    matrix = per_unit * w["flops"] * units / peak
    vector = per_unit * w["vector"] * units / vec
    in_flight = max(1, k.options.get("stages") or 2) * w["step_bytes"] or w["bytes"]
    share = bw * min(1.0, min(blocks, units) * UNIT_SHARE / units)
    latency_bw = max(1, min(resident, per_unit)) * in_flight / LATENCY_S
    memory = max(w["unique_bytes"] / share, blocks * w["bytes"] / (L2_FACTOR * share),
                 per_unit * w["bytes"] / latency_bw)
    waves = math.ceil(blocks / (units * resident))
    fixed = waves * BLOCK_S + launches * LAUNCH_S
    terms = {"matrix_s": matrix, "vector_s": vector, "memory_s": memory, "fixed_s": fixed, "blocks": blocks,
             "resident": resident, "waves": waves, "device": dev.name}
    terms["bound"] = max(("matrix", matrix), ("vector", vector), ("memory", memory), key=lambda x: x[1])[0]
    terms.update(_loop_report(target, static))
    return max(matrix, vector, memory) + fixed, terms


def _resident(k, target, static) -> int:
    """Blocks per SM/CU: the toolchain's figure, else what shared memory allows (at least 1)."""
    if static is not None and static.blocks_per_unit:
        return static.blocks_per_unit
    smem = static.shared_bytes if static is not None and static.shared_bytes else None
    if smem is None:
        smem = sum(np.prod(t.shape) * t.dtype.itemsize for t in k.tiles if type(t).__name__ in ("ST", "SV"))
    return max(1, targets.target(target).shared_bytes // max(int(smem), 1))


def _mma_dtype(k) -> str:
    for op, _ in k.walk():
        if op.name == "mma":
            name = op.srcs[1].dtype.name
            return "fp8" if name.startswith("fp8") else name
    return "bf16"


def _loop_report(target: str, static) -> dict:
    """The hook for a per-MFMA main-loop report (issue 10's backends/hip/loopreport.py): where that module
    exists and reports a main-loop cycle estimate for the compiled kernel, the model shows it beside its own
    terms. Not yet on main: nothing is added."""
    if targets.target(target).backend != "hip" or static is None:
        return {}
    try:
        from .backends.hip import loopreport  # noqa: F401
    except ImportError:
        return {}
    cycles = getattr(loopreport, "main_loop_cycles", None)
    return {"loop_cycles": cycles(static)} if cycles else {}


def rank(kfn, target: str, args, cands: list[Candidate], fixed: dict, device=None, launches: int = 1) -> list:
    """The survivors, each with its model estimate, fastest first (ties: the order of the space)."""
    shaped = shapes_of(args)
    live = [c for c in cands if not c.dropped]
    for c in live:
        k = kfn.trace(shaped, target, **{**fixed, **c.config})
        c.model_s, terms = model(k, shaped, target, c.static, device, launches)
        c.terms.update(terms)
    return sorted(live, key=lambda c: c.model_s)


# ---------------------------------------------------------------- timed search

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

    @property
    def default(self) -> Candidate:
        return next(c for c in self.candidates if c.default)

    def model_within(self, frac: float = 0.10) -> bool | None:
        """Whether the static model's first choice timed within frac of the timed winner (None: not timed)."""
        if not self.timed or self.model_first is None or self.model_first.time_s is None:
            return None
        return self.model_first.time_s <= (1 + frac) * self.winner.time_s


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
        except Exception as e:  # noqa: BLE001 - a candidate that fails to launch is reported, not fatal
            c.error = _first_line(e)
        if progress:
            progress()


def search(kfn, b, args, overrides: dict, *, top: int = 8, min_blocks: int = 1, progress=None,
           budget_s: float = 0.2) -> Result:
    """The search a launch with tune=True (or TILES_AUTOTUNE=1) runs on its own arguments: expand, prune, rank,
    then time the model's best `top` (and the default) on copies of the arguments, each checked first against the
    configured default's output; the winner goes to the cache. The caller's arrays are left as they were."""
    from . import bench
    from .testing import errors, tolerance
    target = b.target
    fixed = dict(overrides)
    cands = candidates(kfn, target, args, fixed)
    if target is not None:
        prune(kfn, target, args, cands, fixed, min_blocks=min_blocks)
        ranked = rank(kfn, target, args, cands, fixed)
    else:
        ranked = [c for c in cands if not c.dropped]
    chosen = _to_time(ranked, cands, top)
    host = [b.numpy(a).copy() if hasattr(a, "shape") else a for a in args]
    sets = bench.input_sets(sum(a.nbytes for a in host if hasattr(a, "nbytes")))

    def fresh():
        return [b.asarray(a.copy()) if isinstance(a, np.ndarray) else a for a in host]

    def outputs(cfg):
        dev = fresh()
        b.launch(kfn, dev, tune=False, **{**fixed, **cfg})
        return [b.numpy(d) for d, a in zip(dev, host) if isinstance(a, np.ndarray)]
    want = outputs(next(c for c in cands if c.default).config)

    def check(cfg):
        for got, ref, a in zip(outputs(cfg), want, [a for a in host if isinstance(a, np.ndarray)]):
            dt = dtypes.of(a)
            if dt.is_float and not errors(got, ref)[1] <= 2 * tolerance(dt):
                return f"differs from the default's output (rel err {errors(got, ref)[1]:.3g})"
        return None

    def run(cfg):
        copies = [fresh() for _ in range(sets)]
        step = lambda i: b.launch(kfn, copies[i], tune=False, **{**fixed, **cfg})  # noqa: E731
        return bench.measure(step, sets=sets, clock=clock_for(b), budget_s=budget_s).median_s
    time_candidates(chosen, run, check, progress=progress)
    result = finish(kfn, b, args, fixed, cands, ranked, shape=_shape_text(args))
    return result


def _to_time(ranked: list[Candidate], cands: list[Candidate], top: int) -> list[Candidate]:
    """The model's best `top` survivors, and the default (the baseline) whether or not it made the cut."""
    chosen = ranked[:top]
    default = next(c for c in cands if c.default)
    if default not in chosen and not default.dropped:
        chosen.append(default)
    return chosen


def clock_for(b):
    """compare's clock for a backend: device events on NVIDIA and AMD GPUs, the host clock elsewhere."""
    from . import bench
    if b.kind == "device" and b.target in targets.TARGETS and targets.TARGETS[b.target].vendor in ("nvidia", "amd"):
        return bench.EventClock()
    return bench.HostClock(getattr(b, "synchronize", None) or (lambda: None))


def _shape_text(args) -> str:
    return " ".join("x".join(map(str, a.shape)) for a in args if hasattr(a, "shape"))


def finish(kfn, b, args, fixed: dict, cands: list[Candidate], ranked: list[Candidate], shape: str,
           save: bool = True) -> Result:
    """The result of a timed search; its winner (fastest checked candidate) stored in the cache."""
    timed = [c for c in cands if c.time_s is not None]
    if not timed:
        raise RuntimeError(f"tuning {kfn.__name__}: no candidate ran: " +
                           "; ".join(f"{c.label()}: {c.error or c.dropped}" for c in cands)[:2000])
    winner = min(timed, key=lambda c: c.time_s)
    target, device, tk = identity(b)
    key = key_of(kfn, b, args, fixed)
    entry = Entry(kfn.__name__, source_hash(kfn), target, device, tk, list(key[3]), _listed(key[4]),
                  _listed(key[5]), winner.config, winner.time_s, next(c for c in cands if c.default).time_s,
                  winner.model_s, shape, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    res = Result(kfn.__name__, target, shape, True, cands, winner, ranked[0] if ranked and ranked[0].model_s
                 is not None else None, device, entry)
    if save:
        store(kfn, entry)
    return res


def _listed(x):
    return [_listed(v) for v in x] if isinstance(x, (list, tuple)) else x


def summary() -> list[tuple[str, int, int, int, str]]:
    """(kernel, valid, stale, corrupt, path) per cache file, for `tiles cache info`. Whether an entry is stale
    needs its kernel: the shipped kernels are found by name, other files' entries count as valid if well-formed."""
    out = []
    d = cache_dir()
    kernels = _shipped_kernels()
    for path in sorted(d.glob("*.json")) if d.is_dir() else []:
        raw, why = read_file(path)
        if why:
            out.append((path.stem, 0, 0, 1, str(path)))
            continue
        counts = {"ok": 0, "stale": 0, "corrupt": 0}
        for r in raw:
            _, verdict = judge(r, kernels.get(path.stem))
            counts[verdict.split(":")[0]] += 1
        out.append((path.stem, counts["ok"], counts["stale"], counts["corrupt"], str(path)))
    return out


def _shipped_kernels() -> dict:
    import importlib
    import pkgutil

    from . import kernels
    from .dsl import KernelFn
    out = {}
    for m in pkgutil.iter_modules(kernels.__path__):
        mod = importlib.import_module(f"tiles.kernels.{m.name}")
        out.update({v.__name__: v for v in vars(mod).values() if isinstance(v, KernelFn) and v.tune is not None})
    return out



# ---------------------------------------------------------------- a shipped kernel at a shape (`tiles tune`)

def tune_workload(w, text: str, b=None, target: str | None = None, *, top: int = 8, device: str | None = None,
                  min_blocks: int = 1, seed: int | None = None, budget_s: float = 0.2, progress=None,
                  save: bool = True) -> Result:
    """Tune a workload's main kernel (tiles.bench) at one shape: on backend b (timed as `tiles compare` times,
    each candidate checked once against the float64 reference first), or, with b None, for target by the
    static model alone. `progress(n)` is told how many steps there are, then called once per step."""
    from . import bench
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
    launches = len(w.launches(s, host))
    cands = candidates(kfn, target, args, fixed)
    if target is None:   # the reference: nothing to compile or model
        ranked = list(cands)
    else:
        tick = progress(len(cands)) if progress else None
        prune(kfn, target, args, cands, fixed, min_blocks=min_blocks, progress=tick)
        ranked = rank(kfn, target, args, cands, fixed, model_device(target, device) if b is None or device else
                      _device_of(b, target), launches)
    if b is None:
        if not ranked:
            raise RuntimeError(f"tuning {kfn.__name__} for {target}: every candidate was pruned: " +
                               "; ".join(f"{c.label()}: {c.dropped}" for c in cands)[:2000])
        dev = model_device(target, device)
        return Result(kfn.__name__, target, text, False, cands, ranked[0], ranked[0], f"{dev.name} (model)")
    chosen = _to_time(ranked, cands, top)
    tick = progress(len(chosen)) if progress else None
    precompile(b, kfn, args, fixed, chosen)
    n_sets = bench.input_sets(sum(a.nbytes for a in host if isinstance(a, np.ndarray)))
    sets = [[b.asarray(a) if isinstance(a, np.ndarray) else a for a in host] for _ in range(n_sets)]
    clock = clock_for(b)

    def run(cfg):
        planned = [w.runs({**s, "set": cfg}, a) for a in sets]

        def step(i):
            for k, a, c in planned[i]:
                b.launch(k, a, **c)
        return bench.measure(step, sets=n_sets, clock=clock, budget_s=budget_s).median_s
    time_candidates(chosen, run, lambda cfg: check_once(w, s, kfn, b, cfg, rng), progress=tick)
    del sets
    return finish(kfn, b, args, fixed, cands, ranked, text, save)


def _device_of(b, target):
    return targets.device_for(identity(b)[1]) or model_device(target)


def precompile(b, kfn, args, fixed: dict, chosen: list[Candidate], jobs: int | None = None) -> None:
    """Compile the candidates' device code in parallel before timing (a backend that can: `precompile(k)`),
    so that the first timed launch of each does not compile alone. A failure is left to the timed launch."""
    pre = getattr(b, "precompile", None)
    if pre is None or not chosen:
        return
    shaped = shapes_of(args)
    kernels = [kfn.trace(shaped, b.target, **{**fixed, **c.config}) for c in chosen]

    def one(k):
        try:
            pre(k)
        except Exception:  # noqa: BLE001
            pass
    one(kernels[0])   # alone: it sets up what the backend's compiles share (CUDA: its runtime)
    with concurrent.futures.ThreadPoolExecutor(jobs or max(1, os.cpu_count() or 1)) as pool:
        list(pool.map(one, kernels[1:]))


_CHECKED: dict = {}   # (kernel, backend, configuration, flags) -> None or why its output was wrong


def check_once(w, s: dict, kfn, b, cfg: dict, rng) -> str | None:
    """Run cfg once at a small shape of the workload that takes the same kernel (flags and dtype as s), against
    the float64 reference: None, or why not. A configuration is checked once per process."""
    from . import cli
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
