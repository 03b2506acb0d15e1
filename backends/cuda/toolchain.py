"""Offline CUDA compilation (no GPU, no driver): NVRTC from the PyPI wheels, or nvcc.

Every compile runs in a child process: NVRTC 13.0 once segfaulted on a wgmma kernel (../shared/DESIGN.md),
and a compiler crash must reach the caller as an exception, never take its process down. The result is a
cubin plus the resource report ptxas prints (registers, shared memory, stack frame, spills) and, on demand,
the SASS (cuobjdump, which needs nvdisasm: both ship as wheels). With `ptx=True` the result is the PTX instead,
which the driver compiles for whatever device loads it (sm_80 code on a Hopper GPU).
"""
from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tiles import diskcache
from tiles.compiler import CompileError, CompilerCrash, run  # noqa: F401 - CompilerCrash: this module's API

HEADERS = Path(__file__).parent / "include"
TARGETS = ("sm_80", "sm_90a")
TIMEOUT_S = 300
WORKER = Path(__file__).with_name("nvrtc_worker.py")   # the child: NVRTC's bindings, not the tiles package


@dataclass
class Resources:
    registers: int = 0
    shared_static: int = 0     # bytes declared __shared__ (dynamic shared memory comes on top, at launch)
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    barriers: int = 0

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads


@dataclass
class Compiled:
    target: str
    compiler: str
    cubin: bytes       # the machine code; with ptx=True, the PTX text (NUL-terminated), for the driver to compile
    log: str
    resources: dict[str, Resources] = field(default_factory=dict)  # per kernel (mangled) name

    def sass(self) -> str:
        """The cubin's machine code, disassembled."""
        return disassemble(self.cubin)


# ---- where the tools are ------------------------------------------------------------------------------------

def _wheel_dirs(sub: str) -> list[Path]:
    """nvidia/cu13/<sub> folders of the installed NVIDIA wheels (a namespace package)."""
    try:
        import nvidia
    except ImportError:
        return []
    return [Path(p) / "cu13" / sub for p in getattr(nvidia, "__path__", []) if (Path(p) / "cu13" / sub).is_dir()]


@functools.lru_cache(maxsize=None)
def cuda_include() -> Path:
    """A folder with cuda_bf16.h: TILES_CUDA_INCLUDE, the nvidia-cuda-runtime wheel, or a CUDA toolkit."""
    cands = [os.environ.get("TILES_CUDA_INCLUDE")] + [str(p) for p in _wheel_dirs("include")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            cands.append(os.path.join(os.environ[var], "include"))
    nvcc = shutil.which("nvcc")
    if nvcc:
        cands.append(str(Path(os.path.realpath(nvcc)).parent.parent / "include"))
    cands.append("/usr/local/cuda/include")
    for c in cands:
        if c and (Path(c) / "cuda_bf16.h").is_file():
            return Path(c)
    raise CompileError("no CUDA headers (cuda_bf16.h) found: install the nvidia-cuda-runtime wheel "
                       "(pip install 'tiles[toolchains]'), or set TILES_CUDA_INCLUDE or CUDA_HOME")


def _tool(name: str) -> str | None:
    for d in _wheel_dirs("bin"):
        if (d / name).is_file():
            return str(d / name)
    return shutil.which(name)


def available(compiler: str = "nvrtc") -> str | None:
    """None if `compiler` can run here, else why not."""
    if compiler == "nvcc":
        return None if shutil.which("nvcc") else "nvcc is not on the PATH"
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError as e:
        return f"cuda.bindings.nvrtc cannot be imported ({e}): pip install cuda-bindings nvidia-cuda-nvrtc"
    return None


@functools.lru_cache(maxsize=None)
def versions() -> dict:
    """Compiler versions, part of every cache key."""
    out = {}
    try:
        from cuda.bindings import nvrtc
        _, major, minor = nvrtc.nvrtcVersion()
        out["nvrtc"] = f"{major}.{minor}"
    except Exception:  # noqa: BLE001 - absent NVRTC is reported by available()
        pass
    if shutil.which("nvcc"):
        m = re.search(r"release (\S+),", subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout)
        out["nvcc"] = m.group(1) if m else "?"
    return out


# ---- compiling -----------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def headers_digest() -> str:
    """The header library's contents, digested once per process: part of every cached cubin's key, so that a
    cubin built against other headers (an older tiles) is never loaded."""
    h = hashlib.sha256()
    for p in sorted(HEADERS.rglob("*")):
        if p.is_file() and p.suffix in (".cuh", ".h"):
            h.update(str(p.relative_to(HEADERS)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def options(target: str, compiler: str, ptx: bool = False) -> list[str]:
    if target not in TARGETS:
        raise ValueError(f"unknown CUDA target {target!r}; known: {', '.join(TARGETS)}")
    arch = target.removeprefix("sm_")
    common = ["-std=c++17", f"-I{HEADERS}", f"-I{cuda_include()}"]
    if ptx:   # no ptxas here: the driver runs it when the module loads
        return [f"-arch=compute_{arch}"] + common
    # -gencode, not -arch=sm_90a: with nvcc the shorthand adds a plain sm_90 pass that rejects wgmma/setmaxnreg
    gen = [f"-gencode=arch=compute_{arch},code=sm_{arch}"] if compiler == "nvcc" else [f"-arch=sm_{arch}"]
    return gen + common + ["-Xptxas=-v" if compiler == "nvcc" else "--ptxas-options=-v"]


def compile(source: str, target: str, *, compiler: str = "nvrtc", extra: tuple = (), name: str = "kernel.cu",
            timeout: float = TIMEOUT_S, ptx: bool = False) -> Compiled:
    """Compile CUDA C++ to a cubin (or its PTX) for `target` in a child process. Raises CompileError or
    CompilerCrash."""
    why = available(compiler)
    if why:
        raise CompileError(why)
    opts = options(target, compiler, ptx) + list(extra)
    with tempfile.TemporaryDirectory(prefix="tiles-cuda-") as tmp:
        src, out = Path(tmp) / name, Path(tmp) / "out.bin"
        src.write_text(source)
        if compiler == "nvcc":
            cmd = ["nvcc", "-ptx" if ptx else "-cubin", *opts, "-o", str(out), str(src)]
        else:
            cmd = _worker_cmd() + [str(src), str(out), json.dumps(opts), "ptx" if ptx else "cubin"]
        rc, log = run(cmd, f"{compiler} compiling {name} for {target}", timeout)
        if rc != 0 or not out.is_file():
            raise CompileError(f"{compiler} failed on {name} for {target}:\n{_source_context(log, source, name)}")
        return _compiled(target, compiler, out.read_bytes(), log, ptx)


def _compiled(target: str, compiler: str, image: bytes, log: str, ptx: bool) -> Compiled:
    if ptx:   # no ptxas ran: no resources
        return Compiled(target, compiler, image.rstrip(b"\0") + b"\0", log, {})
    return Compiled(target, compiler, image, log, parse_resources(log) or cubin_resources(image))


def cached_compile(source: str, target: str, *, compiler: str = "nvrtc", ptx: bool = False) -> Compiled:
    """compile(), once per (source, header library, options, compiler versions) on disk ($TILES_CACHE/cuda): the
    tuner's pruning, its timed launches (runtime.cached_cubin) and `tiles inspect` share one compile of a source.
    A refused source is not kept: it raises each time."""
    key = diskcache.key(source, headers_digest(), options(target, compiler, ptx), versions(), compiler)

    def build() -> bytes:
        c = compile(source, target, compiler=compiler, ptx=ptx)
        return json.dumps({"log": c.log, "image": base64.b64encode(c.cubin).decode()}).encode()
    kept = json.loads(diskcache.cached(diskcache.folder("cuda") / f"{key}.compiled", build).read_bytes())
    return _compiled(target, compiler, base64.b64decode(kept["image"]), kept["log"], ptx)


def _worker_cmd() -> list[str]:
    return [sys.executable, str(WORKER)]


def _source_context(log: str, source: str, name: str) -> str:
    """The log, with each reported line of the source (not of a header) quoted under it."""
    lines, out = source.splitlines(), []
    for ln in log.splitlines():
        out.append(ln)
        m = re.match(r"(.*?)\((\d+)\): (error|catastrophic error)", ln)
        if m and m.group(1).endswith(name) and 0 < int(m.group(2)) <= len(lines):
            out.append("    > " + lines[int(m.group(2)) - 1].strip())
    return "\n".join(out)


def parse_resources(log: str) -> dict[str, Resources]:
    """ptxas -v's report, per function."""
    res: dict[str, Resources] = {}
    cur = None
    for ln in log.splitlines():
        m = re.search(r"(?:Function properties for|Compiling entry function) '?([\w$]+)'?", ln)
        if m:
            cur = res.setdefault(m.group(1), Resources())
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", ln)
        if m:
            cur.stack_frame, cur.spill_stores, cur.spill_loads = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", ln)
        if m:
            cur.registers = int(m.group(1))
            b = re.search(r"used (\d+) barriers", ln)
            s = re.search(r"(\d+) bytes smem", ln)
            cur.barriers = int(b.group(1)) if b else 0
            cur.shared_static = int(s.group(1)) if s else 0
    return res


def cubin_resources(cubin: bytes) -> dict[str, Resources]:
    """What the cubin itself records per function (cuobjdump --dump-resource-usage), for a log without ptxas's
    report: NVRTC on the H200 (12-02, 03:16 and 14:20 UTC, under pytest -n 14) returned some programs' logs
    with the front end's warnings and none of ptxas's lines. LOCAL (local memory a thread) beyond the stack
    frame is counted as spill stores; ptxas's own split of stores and loads is not in the cubin. {} where
    cuobjdump is missing."""
    if _tool("cuobjdump") is None:
        return {}
    res = {}
    for name, body in re.findall(r"Function ([\w$]+):\s*\n(.*)", _cuobjdump(cubin, "--dump-resource-usage").stdout):
        n = {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", body)}
        res[name] = Resources(registers=n.get("REG", 0), stack_frame=n.get("STACK", 0),
                              spill_stores=max(0, n.get("LOCAL", 0) - n.get("STACK", 0)))
    return res


def disassemble(cubin: bytes) -> str:
    if _tool("cuobjdump") is None:
        raise RuntimeError("cuobjdump not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm")
    p = _cuobjdump(cubin, "-sass")
    if p.returncode != 0:
        raise RuntimeError(f"cuobjdump failed: {p.stderr.strip()}")
    return p.stdout


def _cuobjdump(cubin: bytes, flag: str) -> subprocess.CompletedProcess:
    """cuobjdump FLAG on the cubin (nvdisasm, which -sass runs, found beside its wheel)."""
    env = dict(os.environ)
    nvdisasm = _tool("nvdisasm")
    if nvdisasm:
        env["PATH"] = str(Path(nvdisasm).parent) + os.pathsep + env.get("PATH", "")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([_tool("cuobjdump"), flag, f.name], capture_output=True, text=True, env=env)
