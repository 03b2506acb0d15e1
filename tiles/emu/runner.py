"""Compile GPU-style C++ (CUDA, HIP or MSL text plus a shim header) for the host and run it, lanes as fibers.

API::

    from tiles.emu import compile, Param

    mod = compile(source, kernel="gemm",
                  params=[Param("const float*", "A"), Param("float*", "C"), Param("int", "n")],
                  shim="hip",                       # "hip" -> hip_emu.h, "metal" -> metal_emu.h, "cuda" -> cuda_emu.h,
                                                    # "simt" -> simt.h only, or a header's path
                  defines={"BM": 64}, include_dirs=[...], atoms=("gfx942",), wave=None)
    mod.launch(grid=(4, 4), block=256, args=[a, c, 1024], shared_bytes=16384, seed=7)

``source`` is the exact text a backend would give hiprtc / the Metal compiler. ``kernel`` is the
C++ expression naming the function to call (``"gemm"``, ``"ns::gemm<64>"``). ``params`` is the
kernel's parameter list as data, in order: ``Param(c_type, name)`` for a value the host passes,
``Param(c_type, name, value="expr")`` for one the lane computes itself (a Metal
``[[thread_position_in_grid]]`` argument: ``value="metal_emu::thread_position_in_grid()"``).
A ``(c_type, name[, value])`` tuple works too. References (``constant int&``) bind to the host
value.

Host arguments: a pointer parameter takes a C- or F-contiguous numpy array (or None for a null
pointer); a scalar parameter of a known C type (int, unsigned, int64_t, size_t, float, double,
half, bool, ...) takes a Python or numpy number; any other type (a struct passed by value) takes
``bytes`` or a numpy structured scalar of exactly ``sizeof`` that type.

The translation unit is ``simt.h``, ``atoms_gen.h`` (the lane maps of the requested targets from
tiles/targets.py), the shim, ``#include "<kernel file>"`` (so compiler messages point at the
kernel's own lines) and a generated ``extern "C" tiles_emu_launch``. It is compiled by ``$CXX``
(default g++) in a subprocess, cached under ``$TILES_CACHE/emu`` (default ~/.cache/tiles/emu) by
a hash of the source, shim, headers, flags and compiler version. A compiler failure raises
CompileError carrying the compiler's message.

``launch`` runs every block of the grid, one after another; within a block the lanes interleave
on fibers in an order drawn from ``seed``. By default it runs in a forked child process working
on shared copies of the arrays (copied back on success), so that an out-of-bounds access or a
stack overflow raises LaunchError instead of killing the caller, and a hung kernel times out;
``isolate=False`` (or TILES_EMU_ISOLATE=0) runs in-process, e.g. under a debugger.
"""
from __future__ import annotations

import ctypes
import faulthandler
import functools
import hashlib
import json
import mmap
import os
import re
import select
import signal
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import diskcache
from .atoms import atoms_header

INCLUDE = Path(__file__).parent / "include"
SHIMS = {"simt": "simt.h", "hip": "hip_emu.h", "metal": "metal_emu.h", "cuda": "cuda_emu.h"}
SHIM_WAVE = {"hip": 64, "metal": 32, "cuda": 32}
SHIM_EXT = {"hip": ".hip", "metal": ".metal", "cuda": ".cu"}
DEFAULT_FLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
                 "-fvisibility-inlines-hidden", "-fno-gnu-unique")


class CompileError(RuntimeError):
    """The host compiler rejected the kernel; the message carries its output."""


class LaunchError(RuntimeError):
    """The kernel failed while running: a deadlock, divergent collectives, a crash, a timeout."""


@dataclass(frozen=True)
class Param:
    ctype: str
    name: str
    value: str | None = None   # a C++ expression evaluated by each lane instead of a host argument

    @property
    def is_pointer(self) -> bool:
        return "*" in self.ctype


# Scalar C types the host can pass by value, after qualifiers are stripped.
_SCALARS = {
    "bool": np.bool_, "char": np.int8, "signed char": np.int8, "int8_t": np.int8,
    "unsigned char": np.uint8, "uchar": np.uint8, "uint8_t": np.uint8,
    "short": np.int16, "int16_t": np.int16, "unsigned short": np.uint16, "ushort": np.uint16, "uint16_t": np.uint16,
    "int": np.int32, "signed": np.int32, "signed int": np.int32, "int32_t": np.int32,
    "unsigned": np.uint32, "unsigned int": np.uint32, "uint": np.uint32, "uint32_t": np.uint32,
    "long": np.int64, "long long": np.int64, "int64_t": np.int64, "ptrdiff_t": np.int64, "ssize_t": np.int64,
    "unsigned long": np.uint64, "unsigned long long": np.uint64, "ulong": np.uint64, "uint64_t": np.uint64,
    "size_t": np.uint64, "float": np.float32, "double": np.float64, "half": np.float16, "_Float16": np.float16,
}
_QUALIFIERS = re.compile(r"\b(const|volatile|constant|thread|device|restrict|__restrict__|std::)\b|&")


def _scalar_dtype(ctype: str):
    return _SCALARS.get(" ".join(_QUALIFIERS.sub(" ", ctype).split()))


class _Launch(ctypes.Structure):   # mirrors emu::Launch in simt.h
    _fields_ = [("grid", ctypes.c_uint32 * 3), ("block", ctypes.c_uint32 * 3), ("wave", ctypes.c_uint32),
                ("reserved", ctypes.c_uint32), ("shared_bytes", ctypes.c_uint64), ("seed", ctypes.c_uint64),
                ("stack_bytes", ctypes.c_uint64)]


def _cache_dir() -> Path:
    return diskcache.folder("emu")


@functools.lru_cache(maxsize=None)
def _compiler_version(cxx: str) -> str:
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise CompileError(f"no host C++ compiler {cxx!r} ({e}); set $CXX") from None
    return out.stdout.splitlines()[0] if out.stdout else cxx


_file_digests: dict = {}


def _digest(path: str) -> str | None:
    """Content hash of a file, re-read only when its stat changed; None if it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    memo = _file_digests.get(path)
    if memo is None or memo[0] != (st.st_mtime_ns, st.st_size):
        with open(path, "rb") as f:
            memo = ((st.st_mtime_ns, st.st_size), hashlib.sha256(f.read()).hexdigest())
        _file_digests[path] = memo
    return memo[1]


def _cached_lib(build: Path) -> Path | None:
    """The library built from the headers as they are now, if there is one (ccache's direct mode:
    the headers a compile read are recorded with their hashes after it)."""
    try:
        record = json.loads((build / "deps.json").read_text())
    except (OSError, ValueError):
        return None
    lib = build / record["lib"]
    if lib.exists() and all(_digest(p) == d for p, d in record["deps"].items()):
        return lib
    return None


def _recorded(build: Path) -> dict:
    """A build's recorded headers with their hashes, and its output's."""
    record = json.loads((build / "deps.json").read_text())
    return {**record["deps"], str(build / record["lib"]): _digest(str(build / record["lib"]))}


def _record_deps(build: Path, depfile: Path, own_files, more: dict) -> tuple[dict, str]:
    text = depfile.read_text().replace("\\\n", " ")
    paths = text.split(":", 1)[1].split()
    own = {str(build / n) for n in own_files}
    deps = {p: _digest(p) for p in (os.path.abspath(os.path.join(build, q)) for q in paths) if p not in own}
    deps.update(more)
    return deps, hashlib.sha256(json.dumps(deps, sort_keys=True).encode()).hexdigest()[:16]


def _entry(kernel: str, params: list[Param]) -> str:
    using = [f"using P{i} = {p.ctype};" for i, p in enumerate(params)]
    args, host = [], 0
    for i, p in enumerate(params):
        if p.value is not None:
            args.append(f"P{i}({p.value})")
        else:
            args.append(f"*static_cast<std::remove_reference_t<P{i}>*>(args[{host}])")
            host += 1
    sizes = [f"sizeof(std::remove_reference_t<P{i}>)" for i, p in enumerate(params) if p.value is None]
    export = 'extern "C" __attribute__((visibility("default")))'
    call = f"{kernel}({', '.join(args)});" if args else f"{kernel}();"
    return "\n".join([
        "", "// ---- generated by tiles.emu.runner: the launch entry point ----",
        "namespace tiles_emu_entry {", *using, "}", "using namespace tiles_emu_entry;",
        f"{export} int tiles_emu_launch(const emu::Launch* cfg, void** args, char* err, size_t errlen) {{",
        f"    auto body = [&] {{ {call} }};",
        "    (void)args;",
        "    return emu::launch(*cfg, body, err, errlen);",
        "}",
        f"{export} size_t tiles_emu_param_sizes(size_t* out) {{",
        *(f"    out[{i}] = {s};" for i, s in enumerate(sizes)),
        "    (void)out;",
        f"    return {len(sizes)};",
        "}", ""])


def _build(build: Path, cxx: str, flags: list, includes: list, files: dict, kernel: str,
           main: str = "entry.cpp", output=lambda tag: f"kernel-{tag}.so", deps_of: Path | None = None) -> Path:
    """Compile build/main (files written beside it first) to build/output(tag), tag a hash of the headers read
    (and, with deps_of, of those another build read: a precompiled header's, which -MMD does not list)."""
    build.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():   # replaced whole: another process may be compiling against them
        fd, tmp = tempfile.mkstemp(dir=build)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, build / name)
    fd, tmp = tempfile.mkstemp(suffix=".out", dir=build)
    os.close(fd)
    depfile = Path(tmp + ".d")
    cmd = [cxx, *flags, *(f"-I{d}" for d in includes), "-MMD", "-MF", str(depfile),
           *(("-x", "c++-header") if main.endswith(".h") else ()), str(build / main), "-o", tmp]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=build)
    except subprocess.TimeoutExpired:
        out = None
    if out is None or out.returncode != 0:
        Path(tmp).unlink(missing_ok=True)   # the compiler may have removed its failed output
        depfile.unlink(missing_ok=True)
        if out is None:
            raise CompileError(f"{cxx} timed out after 600 s compiling {kernel}")
        raise CompileError(f"{cxx} failed ({out.returncode}) compiling {kernel}:\n{out.stderr}{out.stdout}"
                           f"\ncommand: {' '.join(cmd)}")
    deps, tag = _record_deps(build, depfile, files, _recorded(deps_of) if deps_of else {})
    depfile.unlink()
    # Named by the headers' hash: a process that loaded an older build keeps it, dlopen of a new
    # name loads the new one. Library first, record second, each replaced atomically.
    lib = build / output(tag)
    os.replace(tmp, lib)
    fd, rec = tempfile.mkstemp(suffix=".json", dir=build)
    with os.fdopen(fd, "w") as f:
        json.dump({"lib": lib.name, "deps": deps}, f)
    os.replace(rec, build / "deps.json")
    return lib


def _leading_includes(source: str) -> list[str]:
    """The #include lines a source starts with (comments and blank lines between them), up to anything else."""
    out = []
    for line in source.splitlines():
        s = line.strip()
        if s.startswith("#include"):
            out.append(s)
        elif s and not s.startswith("//"):
            break
    return out


def _prelude(cxx: str, flags: list, includes: list, shim_path: Path, atoms_h: str, source: str) -> Path:
    """A precompiled header of what every kernel of this shim and these flags parses first (simt.h, the atoms,
    the shim, the kernel's own leading #includes: its header library), built once and cached like a kernel;
    the directory to put first on the include path. Half the compile time of a small kernel is that parse."""
    text = "\n".join(['#include "simt.h"', '#include "atoms_gen.h"', f'#include "{shim_path.name}"',
                      *_leading_includes(source), ""])
    h = hashlib.sha256()
    for part in (text, atoms_h, _compiler_version(cxx), " ".join(flags), *map(str, includes)):
        h.update(part.encode() + b"\0")
    pch = _cache_dir() / f"pch-{h.hexdigest()[:24]}"
    for attempt in (1, 2):
        if _cached_lib(pch) is not None:
            break
        try:
            _build(pch, cxx, flags, [pch, *includes], {"prelude.h": text, "atoms_gen.h": atoms_h}, "the prelude",
                   main="prelude.h", output=lambda tag: "prelude.h.gch")   # the name where g++ looks for it
        except FileNotFoundError:   # seen once with processes building it side by side (cause not found): again
            if attempt == 2:
                raise
    return pch


def compile(source: str, *, kernel: str, params, shim: str = "simt", defines: dict | None = None,
            include_dirs=(), atoms=(), wave: int | None = None, flags=(), cxx: str | None = None) -> "Module":
    params = [p if isinstance(p, Param) else Param(*p) for p in params]
    if shim in SHIMS:
        shim_path = INCLUDE / SHIMS[shim]
    else:
        shim_path = Path(shim)
    if not shim_path.is_file():
        raise FileNotFoundError(f"shim header {shim_path} not found (shims: {', '.join(SHIMS)} or a path)")
    wave = wave or SHIM_WAVE.get(shim)
    if not wave or not 1 <= wave <= 64:
        raise ValueError(f"wave width needed (1..64) for shim {shim!r}, got {wave}")
    for p in params:
        if not p.ctype.strip() or not p.name.strip():
            raise ValueError(f"parameter {p!r} needs a C type and a name")
    cxx = cxx or os.environ.get("CXX") or "g++"
    include_dirs = [Path(d).resolve() for d in include_dirs]
    defines = dict(defines or {})
    ext = SHIM_EXT.get(shim, ".cpp")
    kernel_file = "kernel" + ext
    atoms_h = atoms_header(atoms)
    entry = _entry(kernel, params)
    main = "\n".join(['#include "prelude.h"', f'#include "{kernel_file}"', entry])
    cmd_flags = [*DEFAULT_FLAGS, *(f"-D{k}={v}" if v is not None else f"-D{k}" for k, v in defines.items()),
                 *flags]
    opt = os.environ.get("TILES_EMU_OPT")   # e.g. -O0 for many short runs (tiles fuzz): a third of the compile time
    if opt:
        cmd_flags = [f for f in cmd_flags if not f.startswith("-O")] + [opt]

    h = hashlib.sha256()
    for part in (source, main, atoms_h, _compiler_version(cxx), " ".join(cmd_flags), str(shim_path),
                 *map(str, include_dirs)):
        h.update(part.encode() + b"\0")
    build = _cache_dir() / h.hexdigest()[:24]
    lib = _cached_lib(build)
    if lib is None:
        includes = [shim_path.parent, INCLUDE, *include_dirs]
        pch = _prelude(cxx, cmd_flags, includes, shim_path, atoms_h, source)
        lib = _build(build, cxx, cmd_flags, [pch, build, *includes], {kernel_file: source, "entry.cpp": main},
                     kernel, deps_of=pch)
    key = (lib, kernel, tuple(params), wave)
    if key not in _modules:
        _modules[key] = Module(lib, kernel, params, wave)
    return _modules[key]


_modules: dict = {}   # loaded once per process: dlopen of the same path returns the same library anyway


class Module:
    """A compiled kernel: ``launch`` runs it over a grid."""

    def __init__(self, path: Path, kernel: str, params: list[Param], wave: int):
        self.path, self.kernel, self.params, self.wave = path, kernel, params, wave
        self._lib = ctypes.CDLL(str(path))
        self._launch = self._lib.tiles_emu_launch
        self._launch.restype = ctypes.c_int
        self._launch.argtypes = [ctypes.POINTER(_Launch), ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p,
                                 ctypes.c_size_t]
        self.host_params = [p for p in params if p.value is None]
        sizes = (ctypes.c_size_t * max(1, len(self.host_params)))()
        self._lib.tiles_emu_param_sizes.restype = ctypes.c_size_t
        self._lib.tiles_emu_param_sizes(sizes)
        self.param_sizes = list(sizes)[:len(self.host_params)]

    def __repr__(self) -> str:
        return f"<tiles.emu.Module {self.kernel} at {self.path}>"

    def launch(self, grid, block, args, *, shared_bytes: int = 0, seed: int = 0, stack_bytes: int = 256 * 1024,
               isolate: bool | None = None, timeout: float | None = None) -> None:
        grid, block = _dims(grid, "grid"), _dims(block, "block")
        nthreads = block[0] * block[1] * block[2]
        if not 1 <= nthreads <= 1024:
            raise ValueError(f"block {block} has {nthreads} threads; need 1..1024")
        if any(g < 1 or g >= 2**31 for g in grid):
            raise ValueError(f"grid {grid}: every dimension must be in 1..2^31-1")
        if shared_bytes < 0 or stack_bytes < 16384:
            raise ValueError("shared_bytes must be >= 0 and stack_bytes >= 16384")
        args = list(args)
        if len(args) != len(self.host_params):
            names = ", ".join(p.name for p in self.host_params)
            raise TypeError(f"{self.kernel} takes {len(self.host_params)} arguments ({names}), got {len(args)}")
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        if isolate is None:
            isolate = os.environ.get("TILES_EMU_ISOLATE", "1") != "0"
        cfg = _Launch((ctypes.c_uint32 * 3)(*grid), (ctypes.c_uint32 * 3)(*block), self.wave, 0, shared_bytes,
                      seed % 2**64, stack_bytes)
        bufs = self._marshal(args, {})   # checks every argument before anything runs
        if not isolate:
            self._call(cfg, bufs, None)
            return
        shared = {id(a): _SharedCopy(a) for a in arrays}
        err = mmap.mmap(-1, 4096)
        buffers = self._marshal(args, {k: s.address for k, s in shared.items()})
        self._run_forked(cfg, buffers, err, timeout)
        for a in arrays:
            shared[id(a)].copy_back(a)

    def _marshal(self, args, addresses: dict) -> list:
        """One ctypes buffer per host argument holding its bytes (a pointer's value for arrays)."""
        bufs = []
        for p, size, a in zip(self.host_params, self.param_sizes, args):
            if p.is_pointer:
                if a is None:
                    bufs.append(ctypes.c_void_p(None))
                    continue
                if not isinstance(a, np.ndarray):
                    raise TypeError(f"{self.kernel}: argument {p.name} ({p.ctype}) needs a numpy array, "
                                    f"got {type(a).__name__}")
                if not (a.flags.c_contiguous or a.flags.f_contiguous):
                    raise ValueError(f"{self.kernel}: argument {p.name} is not contiguous; pass a copy")
                bufs.append(ctypes.c_void_p(addresses.get(id(a), a.ctypes.data)))
                continue
            raw = _scalar_bytes(p, a)
            if len(raw) != size:
                raise TypeError(f"{self.kernel}: argument {p.name} ({p.ctype}) is {size} bytes, got {len(raw)}")
            bufs.append(ctypes.create_string_buffer(raw, size))
        return bufs

    def _call(self, cfg, bufs, err_out) -> None:
        ptrs = (ctypes.c_void_p * max(1, len(bufs)))(*(ctypes.addressof(b) for b in bufs))
        err = ctypes.create_string_buffer(4096)
        rc = self._launch(ctypes.byref(cfg), ptrs, err, len(err))
        msg = err.value.decode(errors="replace")
        if err_out is not None:
            raw = msg.encode()[:len(err_out) - 1] + b"\0"
            err_out[:len(raw)] = raw
            return rc
        if rc:
            raise LaunchError(f"{self.kernel}: {msg}")
        return rc

    def _run_forked(self, cfg, bufs, err, timeout) -> None:
        timeout = timeout if timeout is not None else float(os.environ.get("TILES_EMU_TIMEOUT", "600"))
        with warnings.catch_warnings():
            # Python >= 3.12 warns about fork() in a process with threads (BLAS pools): the child
            # only runs the kernel's own code and exits, it takes none of their locks.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:   # child: run, report through the shared mappings, never return into the caller
            code = 70
            try:
                faulthandler.disable()   # a crash is reported by the parent, not as a Python traceback
                code = 1 if self._call(cfg, bufs, err) else 0
            finally:
                os._exit(code)
        if not _wait_exit(pid, timeout):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise LaunchError(f"{self.kernel}: no result after {timeout} s (a lane spinning on memory "
                              "another lane must write? lanes only switch at barriers and collectives)")
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            sig = signal.Signals(os.WTERMSIG(status)).name
            raise LaunchError(f"{self.kernel}: the kernel process died of {sig} (an out-of-bounds access, or a lane "
                              f"stack overflow: raise stack_bytes, now {cfg.stack_bytes})")
        code = os.WEXITSTATUS(status)
        if code:
            msg = err[:].split(b"\0", 1)[0].decode(errors="replace")
            raise LaunchError(f"{self.kernel}: {msg or f'exit status {code}'}")


def launch_host(module: Module, grid, block, args, pack, *, shared_bytes: int, seed: int | None = None) -> None:
    """A backend's launch over host arrays, in place: the engine takes contiguous arrays, so a strided one runs on
    a copy that is written back afterwards; pack(args, copies in place of strided ones) gives the module's
    arguments. seed: $TILES_EMU_SEED, else 1."""
    host = [np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a for a in args]
    seed = int(os.environ.get("TILES_EMU_SEED", "1")) if seed is None else seed
    module.launch(grid=grid, block=block, args=pack(host), shared_bytes=shared_bytes, seed=seed)
    for a, h in zip(args, host):
        if isinstance(a, np.ndarray) and h is not a:
            np.copyto(a, h)


def _wait_exit(pid: int, timeout: float) -> bool:
    """Wait until the child exits (True) or the timeout passes (False), without reaping it."""
    if hasattr(os, "pidfd_open"):
        try:
            fd = os.pidfd_open(pid)
        except OSError:   # kernels before Linux 5.3
            fd = None
        if fd is not None:
            try:
                return bool(select.select([fd], [], [], timeout)[0])
            finally:
                os.close(fd)
    deadline, pause = time.monotonic() + timeout, 0.0005
    while time.monotonic() < deadline:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        time.sleep(pause)
        pause = min(pause * 2, 0.02)
    return False


class _SharedCopy:
    """An array's bytes in a MAP_SHARED mapping, so a forked child's writes reach the parent."""

    def __init__(self, a: np.ndarray):
        self.map = mmap.mmap(-1, max(1, a.nbytes))
        self.view = np.frombuffer(self.map, dtype=np.uint8, count=a.nbytes)
        self.view[:] = _bytes_view(a)
        self.address = self.view.ctypes.data if a.nbytes else 0

    def copy_back(self, a: np.ndarray) -> None:
        if a.flags.writeable and a.nbytes:
            _bytes_view(a)[:] = self.view


def _bytes_view(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1, order="A").view(np.uint8)


def _scalar_bytes(p: Param, a) -> bytes:
    if isinstance(a, (bytes, bytearray)):
        return bytes(a)
    if isinstance(a, np.void) or (isinstance(a, np.ndarray) and a.dtype.fields):
        return a.tobytes()
    dt = _scalar_dtype(p.ctype)
    if dt is None:
        raise TypeError(f"argument {p.name}: C type {p.ctype!r} is not a known scalar; pass bytes or a numpy "
                        "structured scalar of its exact layout")
    if np.dtype(dt).kind in "iub" and isinstance(a, (float, np.floating)):
        raise TypeError(f"argument {p.name} ({p.ctype}) needs an integer, got {a!r}")
    try:
        return np.array(a, dtype=dt).tobytes()
    except (OverflowError, ValueError, TypeError) as e:
        raise TypeError(f"argument {p.name} ({p.ctype}): cannot pass {a!r} ({e})") from None


def _dims(d, what: str) -> tuple[int, int, int]:
    t = (int(d),) if np.isscalar(d) else tuple(int(x) for x in d)
    if not 1 <= len(t) <= 3:
        raise ValueError(f"{what} must have 1 to 3 dimensions, got {d!r}")
    return t + (1,) * (3 - len(t))
