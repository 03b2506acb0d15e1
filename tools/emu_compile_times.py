"""Compile times of generated kernels under the CPU engines' g++ builds, with and without a precompiled prelude
(tiles/emu/runner.py) and at their own -O level or -O0: the figures in docs/emulation.md.

    python tools/emu_compile_times.py $TILES_CACHE/emu 4

reads up to N builds per language (kernel.hip for gfx942, kernel.cu, kernel.metal) from an emulator cache made
without the prelude (atoms_gen.h beside the kernel: a cache of a tiles older than the prelude, e.g. a `tiles fuzz`
run of commit 19f78d0), and prints the median compile time of each variant: CPU seconds (user + system) of the
g++ process, which other jobs on a loaded machine change far less than they change wall time.
"""
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EMU = ROOT / "tiles" / "emu" / "include"
LANG = {  # kernel file -> (shim, defines and include dirs, the backend's own -O level)
    ".hip": ("hip_emu.h", ["-DTILES_EMU", "-DTILES_EMU_GFX=942", f"-I{ROOT}/backends/hip/include",
                           f"-I{ROOT}/backends/cuda/include"], "-O2"),
    ".cu": ("cuda_emu.h", ["-DTILES_EMU", "-DTILES_EMU_SM=80", "-fno-strict-aliasing",
                           f"-I{ROOT}/backends/cuda/include"], "-O1"),
    ".metal": ("metal_emu.h", [f"-I{ROOT}/backends/metal/include"], "-O1"),
}
BASE = ["-std=c++17", "-fPIC", "-shared", "-fvisibility=hidden", "-fvisibility-inlines-hidden", "-fno-gnu-unique",
        f"-I{EMU}"]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def builds(cache: Path, ext: str, n: int) -> list[Path]:
    out = []
    for d in sorted(p for p in cache.iterdir() if (p / f"kernel{ext}").exists() and (p / "atoms_gen.h").exists()):
        if ext != ".hip" or "gfx950" not in (d / "atoms_gen.h").read_text():
            out.append(d)
    return out[:n]


def main(cache: Path, n: int):
    work = Path(tempfile.mkdtemp(prefix="emu-compile-times-"))
    for ext, (shim, flags, own) in LANG.items():
        for opt in (own, "-O0"):
            for prelude in (False, True):
                times = []
                for d in builds(cache, ext, n):
                    src = (d / f"kernel{ext}").read_text()
                    w = work / d.name
                    w.mkdir(exist_ok=True)
                    (w / f"kernel{ext}").write_text(src)
                    (w / "atoms_gen.h").write_text((d / "atoms_gen.h").read_text())
                    entry = (d / "entry.cpp").read_text()
                    cmd = ["g++", *BASE, *flags, opt]
                    if prelude:
                        pch = work / f"pch{ext}{opt}"
                        if not (pch / "prelude.h.gch").exists():
                            pch.mkdir()
                            lead = [ln for ln in src.splitlines() if ln.startswith("#include")][:1]
                            (pch / "prelude.h").write_text("\n".join(['#include "simt.h"', '#include "atoms_gen.h"',
                                                                      f'#include "{shim}"', *lead, ""]))
                            (pch / "atoms_gen.h").write_text((d / "atoms_gen.h").read_text())
                            subprocess.run([*cmd, f"-I{pch}", "-x", "c++-header", str(pch / "prelude.h"), "-o",
                                            str(pch / "prelude.h.gch")], check=True)
                        skip = ('#include "simt.h"', '#include "atoms_gen.h"', f'#include "{shim}"')
                        entry = "\n".join(['#include "prelude.h"',
                                           *(ln for ln in entry.splitlines() if not ln.startswith(skip))])
                        cmd.append(f"-I{pch}")
                    (w / "entry.cpp").write_text(entry)
                    before = _children_cpu()
                    subprocess.run([*cmd, f"-I{w}", str(w / "entry.cpp"), "-o", str(w / "k.so")], check=True)
                    times.append(_children_cpu() - before)
                print(f"{ext:<7} {opt:<4} {'prelude' if prelude else 'plain':<8} median {statistics.median(times):.2f} CPU s "
                      f"over {len(times)}", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 4)
