"""Compile generated HIP for gfx942 / gfx950 without ROCm, and report what the compiler made of it.

clang from the `ziglang` wheel has the AMDGPU target: ``-x hip --cuda-device-only -nogpulib -nogpuinc``
needs no ROCm install; TILES_HIP_BARE makes tiles.hpp supply the few HIP keywords itself. The compile
runs in a subprocess, so a compiler crash cannot take the caller down. The report comes from the
assembly and its metadata: VGPRs, AGPRs, SGPRs, spills, scratch, LDS (static + the kernel's dynamic
arena), waves per SIMD and occupancy, and the main loop counted per MFMA (loopreport.py).
"""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tiles.compiler import CompileError, CompilerCrash, run  # noqa: F401 - CompilerCrash: this module's API

from . import codegen, loopreport

INCLUDE = Path(__file__).parent / "include"
# tiles_cuda/philox.h: the Philox rounds of tl.dropout, one copy shared with the CUDA headers
SHARED_INCLUDE = Path(__file__).parents[1] / "cuda" / "include"
TARGETS = ("gfx942", "gfx950")
LDS_PER_CU = {"gfx942": 64 * 1024, "gfx950": 160 * 1024}
MAX_WAVES_PER_SIMD = 8


# an instruction that reads or writes the private segment (flat scratch, or the buffer resource in s[0:3])
SCRATCH_ACCESS = re.compile(r"^\s*(scratch_(load|store)_\w+|buffer_(load|store)_\w+ .*\bs\[0:3\])", re.M)


@dataclass
class Report:
    target: str
    vgprs: int             # architectural VGPRs
    agprs: int             # accumulation VGPRs (AGPRs), allocated after the VGPRs rounded to 4
    sgprs: int
    spills: int            # VGPRs spilled to scratch memory
    sgpr_spills: int       # SGPRs spilled into VGPR lanes (no memory traffic)
    scratch: int           # the private segment's bytes a lane
    lds: int
    threads: int
    waves_per_simd: int
    loop: loopreport.LoopReport | None = None   # the main loop, counted per MFMA along its hot path
    assembly: str = field(default="", repr=False)

    @property
    def loop_mfma(self) -> Counter:
        """MFMA mnemonics (with counts) of one iteration of the main loop's hot path."""
        return self.loop.counts["mfma"] if self.loop else Counter()

    @property
    def scratch_used(self) -> int:
        """The private segment's bytes where an instruction reads or writes it, else 0: clang reserves one it never
        touches beside SGPRs spilled into VGPR lanes (attention backward on gfx942, 36 B), which costs nothing."""
        return self.scratch if SCRATCH_ACCESS.search(self.assembly) else 0

    @property
    def occupancy(self) -> float:
        return self.waves_per_simd / MAX_WAVES_PER_SIMD

    @property
    def registers(self) -> int:
        """Unified register file use per lane (512 per SIMD lane): VGPRs rounded to 4, then AGPRs."""
        return (-(-self.vgprs // 4) * 4 + self.agprs) if self.agprs else self.vgprs

    def __str__(self):
        mf = ", ".join(f"{n} x{c}" for n, c in self.loop_mfma.items()) or "none"
        return (f"{self.target}: {self.vgprs} VGPR + {self.agprs} AGPR, {self.sgprs} SGPR, spills {self.spills} VGPR "
                f"{self.sgpr_spills} SGPR, "
                f"scratch {self.scratch} B, LDS {self.lds} B, {self.threads} threads, {self.waves_per_simd} waves/SIMD "
                f"(occupancy {self.occupancy:.0%}); main loop MFMA: {mf}")


def clang() -> list[str]:
    return [sys.executable, "-m", "ziglang", "clang"]


def compile_asm(source: str, target: str, extra=()) -> str:
    if target not in TARGETS:
        raise ValueError(f"unknown CDNA target {target!r}; known: {', '.join(TARGETS)}")
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "kernel.hip"
        src.write_text(source)
        out = Path(d) / "kernel.s"
        cmd = [*clang(), "-x", "hip", "--cuda-device-only", "-nogpulib", "-nogpuinc", f"--offload-arch={target}",
               "-O3", "-std=c++17", "-S", "-DTILES_HIP_BARE", f"-I{INCLUDE}", f"-I{SHARED_INCLUDE}", *extra, str(src), "-o", str(out)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            raise CompileError(f"clang timed out compiling for {target}") from None
        if r.returncode != 0:
            raise CompileError(f"clang failed ({r.returncode}) for {target}:\n{r.stderr[-6000:]}")
        return out.read_text()


def _meta(asm: str, key: str) -> int:
    """A number from the kernel's metadata: `.key: N` (msgpack notes), `.amdhsa_key N` or `.set name.key, N`."""
    m = re.search(rf"^\s*(?:- )?\.(?:amdhsa_)?{key}:?\s+(\d+)|^\s*\.set \w+\.{key}, (\d+)", asm, re.M)
    return int(m.group(1) or m.group(2)) if m else 0


def kernel_args(asm: str) -> tuple[list[tuple[int, int, str]], int]:
    """The kernel arguments the code object declares, (offset, size, value kind) each, and the kernarg segment's
    size: what the HIP runtime copies out of the launch's argument buffer."""
    meta = asm[asm.index(".amdgpu_metadata"):asm.index(".end_amdgpu_metadata")]
    block = meta[meta.index(".args:"):meta.index(".group_segment_fixed_size")]
    args = []
    for entry in re.split(r"^\s*- ", block, flags=re.M)[1:]:
        field = dict(re.findall(r"\.(\w+):\s+(\S+)", entry))
        args.append((int(field["offset"]), int(field["size"]), field["value_kind"]))
    return args, _meta(meta, "kernarg_segment_size")


def report(asm: str, target: str, threads: int, dynamic_lds: int) -> Report:
    vgpr, agpr = _meta(asm, "num_vgpr"), _meta(asm, "num_agpr")
    lds = _meta(asm, "group_segment_fixed_size") + dynamic_lds
    r = Report(target, vgpr, agpr, _meta(asm, "sgpr_count"), _meta(asm, "vgpr_spill_count"),
               _meta(asm, "sgpr_spill_count"), _meta(asm, "private_segment_fixed_size"), lds, threads, 0,
               assembly=asm)
    regs = -(-r.registers // 8) * 8 or 8
    by_regs = min(MAX_WAVES_PER_SIMD, 512 // regs)
    waves_per_block_per_simd = -(-threads // 64 // 4)
    blocks_by_lds = LDS_PER_CU[target] // lds if lds else 64
    by_lds = blocks_by_lds * waves_per_block_per_simd
    r.waves_per_simd = min(by_regs, by_lds) // waves_per_block_per_simd * waves_per_block_per_simd
    r.loop = loopreport.analyse(asm, target, r.waves_per_simd)
    return r


def compile_kernel(g: codegen.Generated) -> Report:
    """Compile a generated kernel for its target and report its resources."""
    return report(compile_asm(g.source, g.target), g.target, g.threads, g.lds_bytes)


# ---- hiprtc: the code objects the device runtime loads ------------------------------------------------------

HIPRTC_TIMEOUT_S = 600


def headers() -> list[Path]:
    """The headers a generated kernel includes, which hiprtc is handed by name (it has no include path)."""
    return sorted((INCLUDE / "tiles_hip").glob("*.hpp")) + [SHARED_INCLUDE / "tiles_cuda" / "philox.h"]


def headers_digest() -> str:
    h = hashlib.sha256()
    for p in headers():
        h.update(f"{p.parent.name}/{p.name}".encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def hiprtc_options(target: str) -> list[str]:
    if target not in TARGETS:
        raise ValueError(f"unknown CDNA target {target!r}; known: {', '.join(TARGETS)}")
    return [f"--offload-arch={target}", "-O3", "-std=c++17"]


def compile_hiprtc(source: str, target: str, *, name: str = "kernel.hip", timeout: float = HIPRTC_TIMEOUT_S) -> bytes:
    """The code object of source for target, from hiprtc in a child process (as NVRTC for CUDA: a compiler crash
    reaches the caller as CompilerCrash, never takes its process down). Needs ROCm's hiprtc and hip-python."""
    opts = hiprtc_options(target)
    with tempfile.TemporaryDirectory(prefix="tiles-hip-") as tmp:
        src, out = Path(tmp) / name, Path(tmp) / "out.hsaco"
        src.write_text(source)
        cmd = _worker_cmd() + [str(src), str(out), json.dumps(opts)]
        rc, log = run(cmd, f"hiprtc compiling {name} for {target}", timeout)
        if rc != 0 or not out.is_file():
            raise CompileError(f"hiprtc failed on {name} for {target}:\n{log[-6000:]}")
        return out.read_bytes()


def _worker_cmd() -> list[str]:
    return [sys.executable, "-m", __name__]


def _hiprtc_main(src_path: str, out_path: str, opts_json: str) -> int:
    """In the child: compile with hiprtc, the log to stdout, the code object to out_path."""
    from hip import hiprtc

    hs = headers()
    names = [f"{h.parent.name}/{h.name}".encode() for h in hs]
    prog = _ok(hiprtc.hiprtcCreateProgram(Path(src_path).read_bytes(), Path(src_path).name.encode(), len(hs),
                                          [h.read_bytes() for h in hs], names))
    opts = [o.encode() for o in json.loads(opts_json)]
    (rc,) = hiprtc.hiprtcCompileProgram(prog, len(opts), opts)
    size = _ok(hiprtc.hiprtcGetProgramLogSize(prog))
    log = bytearray(size)
    hiprtc.hiprtcGetProgramLog(prog, log)
    sys.stdout.write(log.rstrip(b"\0").decode(errors="replace"))
    if rc != hiprtc.hiprtcResult.HIPRTC_SUCCESS:
        return 1
    code = bytearray(_ok(hiprtc.hiprtcGetCodeSize(prog)))
    hiprtc.hiprtcGetCode(prog, code)
    Path(out_path).write_bytes(bytes(code))
    return 0


def _ok(result):
    """The value of a hiprtc call's (status, value) result; raises on a failed status."""
    err, value = result
    if getattr(err, "value", err) != 0:
        raise CompileError(f"hiprtc call failed: {err}")
    return value


if __name__ == "__main__":
    sys.exit(_hiprtc_main(*sys.argv[1:4]))
