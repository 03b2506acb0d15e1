"""Compile generated HIP for gfx942 / gfx950 without ROCm, and report what the compiler made of it.

clang from the `ziglang` wheel has the AMDGPU target: ``-x hip --cuda-device-only -nogpulib -nogpuinc``
needs no ROCm install; TILES_HIP_BARE makes tiles.hpp supply the few HIP keywords itself. The compile
runs in a subprocess, so a compiler crash cannot take the caller down. The report comes from the
assembly and its metadata: VGPRs, AGPRs, SGPRs, spills, scratch, LDS (static + the kernel's dynamic
arena), waves per SIMD and occupancy, and the main loop counted per MFMA (loopreport.py).
"""
from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import codegen, loopreport

INCLUDE = Path(__file__).parent / "include"
# tiles_cuda/philox.h: the Philox rounds of tl.dropout, one copy shared with the CUDA headers
SHARED_INCLUDE = Path(__file__).parents[1] / "cuda" / "include"
TARGETS = ("gfx942", "gfx950")
LDS_PER_CU = {"gfx942": 64 * 1024, "gfx950": 160 * 1024}
MAX_WAVES_PER_SIMD = 8


class CompileError(RuntimeError):
    pass


@dataclass
class Report:
    target: str
    vgprs: int             # architectural VGPRs
    agprs: int             # accumulation VGPRs (AGPRs), allocated after the VGPRs rounded to 4
    sgprs: int
    spills: int            # VGPRs spilled to scratch memory
    sgpr_spills: int       # SGPRs spilled into VGPR lanes (no memory traffic)
    scratch: int
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
