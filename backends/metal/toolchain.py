"""Compiling generated MSL without launching it.

On macOS with Xcode's command-line tools, `xcrun metal` compiles the source for the GPU (to AIR, then a
metallib): that is the real offline compile. No Metal compiler exists for Linux, so elsewhere the only available
compile is the host check: the same text through g++ with tiles/emu/include/metal_emu.h (what the metal-emu
backend runs). It proves the MSL is well-formed C++ against our model of the Metal library, not that Apple's
compiler accepts it; `Report.device_compile` says which of the two happened.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .codegen import MetalKernel

INCLUDE = Path(__file__).parent / "include"
_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)


@dataclass
class Report:
    compiler: str          # what ran
    device_compile: bool   # True: Apple's Metal compiler; False: the host check only
    ok: bool
    log: str


def amalgamate(source: str) -> str:
    """The source with every tiles_metal header inlined once, in include order (for newLibraryWithSource,
    which has no include path). Includes that are not ours (metal_emu.h) are left as they are."""
    seen: set = set()

    def expand(text: str, here: Path) -> str:
        def one(m):
            path = (INCLUDE / m.group(1)) if m.group(1).startswith("tiles_metal/") else here / m.group(1)
            if not path.is_file():
                return m.group(0)
            if path in seen:
                return ""
            seen.add(path)
            body = path.read_text().replace("#pragma once\n", "")
            return f"// ---- {path.relative_to(INCLUDE)}\n" + expand(body, path.parent)
        return _INCLUDE_RE.sub(one, text)

    return expand(source, INCLUDE)


def has_xcrun_metal() -> bool:
    if sys.platform != "darwin" or not shutil.which("xcrun"):
        return False
    return subprocess.run(["xcrun", "-sdk", "macosx", "--find", "metal"], capture_output=True).returncode == 0


def compile(mk: MetalKernel) -> Report:  # noqa: A001 - the toolchain's verb
    if has_xcrun_metal():
        return _xcrun(mk)
    return _host_check(mk)


def _xcrun(mk: MetalKernel) -> Report:
    with tempfile.TemporaryDirectory() as d:
        src, air, lib = Path(d) / f"{mk.name}.metal", Path(d) / f"{mk.name}.air", Path(d) / f"{mk.name}.metallib"
        src.write_text(mk.source)
        steps = [["xcrun", "-sdk", "macosx", "metal", f"-std=metal{mk.language}", "-O2", f"-I{INCLUDE}", "-c",
                  str(src), "-o", str(air)],
                 ["xcrun", "-sdk", "macosx", "metallib", str(air), "-o", str(lib)]]
        log = []
        for cmd in steps:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            log.append(" ".join(cmd) + "\n" + out.stdout + out.stderr)
            if out.returncode != 0:
                return Report("xcrun metal", True, False, "\n".join(log))
        return Report("xcrun metal", True, True, "\n".join(log))


def _host_check(mk: MetalKernel) -> Report:
    from tiles.emu.runner import CompileError

    from .emulator import compile_host
    try:
        module = compile_host(mk)
    except CompileError as e:
        return Report("g++ with metal_emu.h (host check only: no Metal compiler on this OS)", False, False, str(e))
    return Report("g++ with metal_emu.h (host check only: no Metal compiler on this OS)", False, True,
                  f"built {module.path}")
