"""The tune cache: $TILES_CACHE/tune/<kernel>.json, one entry per (kernel source, target, device, toolkit, dtypes,
shape bucket, other keywords); corrupt and stale entries are detected and ignored (docs/tuning.md)."""
from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import dtypes

FORMAT = 1   # of a cache entry; an entry of another format is stale


def cache_dir() -> Path:
    """$TILES_CACHE/tune (default ~/.cache/tiles/tune): one JSON file per kernel name."""
    return Path(os.environ.get("TILES_CACHE") or Path.home() / ".cache" / "tiles") / "tune"


def source_hash(kfn) -> str:
    """The kernel's module source (its body may call the module's helpers) and tiles' version, digested."""
    h = getattr(kfn, "_tune_source", None)
    if h is None:
        from .. import __version__
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
    from .. import __version__
    parts = [f"tiles {__version__}"]
    if getattr(b, "toolkit", None):
        parts.append(str(b.toolkit))
    elif b.kind == "reference":
        parts.append(f"numpy {np.__version__}")
    elif b.kind == "emulator":
        parts.append(_host_compiler())
    elif b.target in ("sm_80", "sm_90a"):
        from ..backends.cuda import toolchain
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


def _fixed(space, kfn, target, overrides: dict) -> tuple:
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
_GENERATION = [0]    # counts the changes to what this process holds of the cache (store, forget)


def generation() -> int:
    """A number that changes whenever an entry this process holds may have changed: what a launch resolved
    before is stale then (tune.resolve)."""
    return _GENERATION[0]


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
    _GENERATION[0] += 1
    return path


def forget() -> None:
    """Drop what this process read from the cache (after another process wrote it, or `tiles cache clear`)."""
    _MEMORY.clear()
    _GENERATION[0] += 1


def key_of(kfn, b, args, overrides: dict) -> tuple:
    target, device, tk = identity(b)
    space = kfn.tune
    t = None if target == "reference" else target
    return (target, device, tk, _dtypes(args), space.bucket(args), _fixed(space, kfn, t, overrides))


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

    from .. import kernels
    from ..dsl import KernelFn
    out = {}
    for m in pkgutil.iter_modules(kernels.__path__):
        mod = importlib.import_module(f"tiles.kernels.{m.name}")
        out.update({v.__name__: v for v in vars(mod).values() if isinstance(v, KernelFn) and v.tune is not None})
    return out
