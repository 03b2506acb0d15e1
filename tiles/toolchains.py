"""One view over the vendors' offline toolchains, for `tiles devices`, `tiles inspect` and compare's
compile-only rows: what is installed, and a kernel's static resources per target (registers, shared memory,
spills/scratch, occupancy, matrix instructions in the main loop, code size), or its source/IR/assembly.

Each vendor's own modules do the work (tiles.backends.<vendor>.codegen / schedules / toolchain); this module
only calls them and reads their answers. Occupancy is the theoretical one: from the per-SM limits below for
CUDA, from the HIP toolchain's report for AMD.
"""
from __future__ import annotations

import importlib
import importlib.util
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import printer, targets


class NoToolchain(RuntimeError):
    """The compiler a target needs is not installed here."""


@dataclass
class Tool:
    name: str
    found: str       # version / path, or "no: why"
    purpose: str


@dataclass
class Static:
    target: str
    compiler: str
    threads: int
    registers: str = "?"        # per thread (NVIDIA) / per lane "v<VGPR> a<AGPR>" (AMD)
    shared_bytes: int | None = None
    spills: str = "?"
    occupancy: str = "?"
    mma: str = "?"               # matrix instructions of the main loop (CUDA: the innermost loop that has any;
    #                              AMD: one iteration of the main loop's hot path, backends/hip/loopreport.py)
    code_bytes: int | None = None
    note: str = ""
    loop: object = None          # AMD: the main loop counted per MFMA (backends/hip/loopreport.LoopReport)
    spill_bytes: int | None = None      # the same as numbers, for tiles.tune's pruning (None: not reported)
    blocks_per_unit: int | None = None  # theoretical resident blocks per SM / CU

    def summary(self) -> str:
        smem = "?" if self.shared_bytes is None else f"{self.shared_bytes / 1024:.1f} KB"
        parts = [f"{self.threads} thr", f"regs {self.registers}", f"smem {smem}", f"spills {self.spills}",
                 f"occ {self.occupancy}", f"mma {self.mma}"]
        return ", ".join(parts) + (f" ({self.note})" if self.note else "")


# Per-SM limits for the theoretical occupancy of CUDA kernels (the HIP toolchain reports its own).
_SM = {"sm_80": dict(regs=65536, warps=64, blocks=32, smem=164 * 1024),
       "sm_90a": dict(regs=65536, warps=64, blocks=32, smem=228 * 1024)}


def _vendor_module(target: str, name: str):
    backend = targets.target(target).backend
    try:
        return importlib.import_module(f"tiles.backends.{backend}.{name}")
    except ImportError as e:
        raise NoToolchain(f"tiles.backends.{backend}.{name} is not available ({e})") from None


# ---------------------------------------------------------------- what is installed

def toolchains() -> list[Tool]:
    out = []
    try:
        tc = importlib.import_module("tiles.backends.cuda.toolchain")
        vers = tc.versions()
        for comp in ("nvrtc", "nvcc"):
            why = tc.available(comp)
            out.append(Tool(comp.upper() if comp == "nvrtc" else "nvcc",
                            f"yes ({vers.get(comp, '?')})" if why is None else f"no: {why}",
                            "CUDA C++ -> cubin for sm_80, sm_90a (registers, spills from ptxas)"))
        sass = tc._tool("cuobjdump")
        out.append(Tool("cuobjdump", sass or "no: pip install nvidia-cuda-cuobjdump", "SASS of a cubin"))
    except ImportError as e:
        out.append(Tool("CUDA toolchain", f"no: {e}", "sm_80, sm_90a"))
    out += _hip_tools()
    try:
        mt = importlib.import_module("tiles.backends.metal.toolchain")
        out.append(Tool("xcrun metal", "yes" if mt.has_xcrun_metal() else "no: macOS with Xcode only",
                        "MSL -> metallib for Apple GPUs"))
    except ImportError as e:
        out.append(Tool("Metal toolchain", f"no: {e}", "apple"))
    out.append(Tool("PyObjC Metal", "yes" if importlib.util.find_spec("Metal") else "no: macOS, pip install "
                    "'tiles[metal]'", "launching on an Apple GPU"))
    out.append(Tool("C++ host compiler", shutil.which("g++") or shutil.which("c++") or "no",
                    "CPU execution of generated CUDA sm_80, HIP, MSL (emulators)"))
    return out


def _hip_tools() -> list[Tool]:
    try:
        ht = importlib.import_module("tiles.backends.hip.toolchain")
    except ImportError as e:
        return [Tool("clang (AMDGPU)", f"no: tiles.backends.hip.toolchain is not available ({e})", "gfx942, gfx950")]
    found = "no: pip install ziglang"
    if importlib.util.find_spec("ziglang"):
        p = subprocess.run([*ht.clang(), "--version"], capture_output=True, text=True)
        found = p.stdout.splitlines()[0] if p.returncode == 0 and p.stdout else f"no: {p.stderr.strip()[:200]}"
    return [Tool("clang (AMDGPU)", found, "HIP -> gfx942/gfx950 assembly (VGPR/AGPR, LDS, scratch, MFMA)")]


def cannot_compile(target: str) -> str | None:
    """None if `target` can be compiled here, else why not."""
    vendor = targets.target(target).backend
    try:
        tc = _vendor_module(target, "toolchain")
    except NoToolchain as e:
        return str(e)
    if vendor == "cuda":
        return tc.available("nvrtc") and tc.available("nvcc")
    if vendor == "hip":
        return None if importlib.util.find_spec("ziglang") else "no clang with the AMDGPU target: pip install ziglang"
    return None if tc.has_xcrun_metal() else "no Metal compiler off macOS (the host check still runs)"


# ---------------------------------------------------------------- static reports

_STATIC: dict = {}   # (traced kernel, target) -> Static: shapes that trace to the same kernel share one compile


def static(kfn, args, target: str, *, sass: bool = True, **consts) -> Static:
    """Compile kfn for target (configured for it, traced for these arguments; where a call launches several
    kernels, the one that is kfn: KernelFn.main_step) and read its resources. With sass=False (the tuner's
    pruning) a CUDA kernel's SASS is not disassembled: its matrix instructions and code size stay unknown, and the
    disassembly (a second of a few here) is not paid."""
    _, args, consts = kfn.main_step(args, target, **consts)
    k = kfn.trace(args, target, **consts)   # traces are cached, so equal traces are the same object
    backend = targets.target(target).backend
    if (id(k), target) not in _STATIC:
        fn = {"cuda": _cuda_static, "hip": _hip_static, "metal": _metal_static}[backend]
        _STATIC[id(k), target] = fn(k, target)
    st = _STATIC[id(k), target]
    if sass and backend == "cuda" and st.code_bytes is None and not st.note.startswith("no SASS"):
        _cuda_sass(st, k, target)
    return st


def spills_surely(kfn, args, target: str, **consts) -> str | None:
    """Why kfn spills on target, known before compiling, or None: on CUDA, where its register tiles alone need
    more 32-bit registers a thread (over the warps its schedule gives them) than a thread may have (255, or the
    schedule's cap: setmaxnreg, max_registers). Addresses, indices and the compiler's temporaries come on top;
    only tiles whose lives do not overlap could share registers (none did in the 194 sm_90a candidates of
    docs/examples.md's kernels and gemm that it was checked against: every one it names spilled)."""
    if targets.target(target).backend != "cuda":
        return None
    _, args, consts = kfn.main_step(args, target, **consts)
    k = kfn.trace(args, target, **consts)
    s = _cuda_generate(k, target).schedule
    need = _vendor_module(target, "schedules").tile_registers(k, s.warps, skip=s.sliced)
    cap = min(255, s.consumer_regs if s.warp_specialized else s.max_registers or 255)
    return f"register tiles need {need:.0f} registers a thread, over the cap of {cap}" if need > cap else None


def _cuda_generate(k, target):
    return _vendor_module(target, "codegen").generate_for(k, target)


def _cuda_compile(k, target):
    tc = _vendor_module(target, "toolchain")
    compiler = "nvrtc" if tc.available("nvrtc") is None else "nvcc"
    if tc.available(compiler):
        raise NoToolchain(f"no CUDA compiler here: {tc.available('nvrtc')}")
    gen = _cuda_generate(k, target)
    return gen, tc.cached_compile(gen.source, target, compiler=compiler)


def _cuda_static(k, target) -> Static:
    gen, c = _cuda_compile(k, target)
    res = c.resources.get(gen.name) or next(iter(c.resources.values()), None)
    if res is None:   # some NVRTC builds print no ptxas report into the program log
        st = Static(target, c.compiler, gen.schedule.threads, shared_bytes=gen.schedule.smem_bytes,
                    note=f"{c.compiler} printed no resource report")
    else:
        st = Static(target, c.compiler, gen.schedule.threads, str(res.registers),
                    gen.schedule.smem_bytes + res.shared_static,
                    f"{res.spill_stores}+{res.spill_loads} B" if res.spills else "0", spill_bytes=res.spills)
        _occupancy(st, target, gen.schedule.threads // 32, res.registers)
    return st


def _cuda_sass(st: Static, k, target) -> None:
    """st's code size and main-loop matrix instructions, from the SASS of its (cached) cubin."""
    try:
        sass = _cuda_compile(k, target)[1].sass()
    except RuntimeError as e:
        st.note = f"no SASS: {e}"
        return
    insts = [ln for ln in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/\s", ln)]
    st.code_bytes = 16 * len(insts)   # every Volta+ instruction is 16 bytes
    st.mma = _loop_mma(sass, _sass_loops(sass), r"\b((?:HMMA|HGMMA|IMMA|QGMMA)[\w.]*)")


def _occupancy(st: Static, target: str, warps: int, regs: int) -> None:
    lim = _SM[target]
    per_warp = -(-max(regs, 1) * 32 // 256) * 256          # registers are allocated per warp, by 256
    blocks = min(lim["regs"] // (per_warp * warps), lim["warps"] // warps, lim["blocks"],
                 lim["smem"] // (st.shared_bytes + 1024))   # the runtime reserves 1 KB per block
    st.occupancy = f"{blocks} blk/SM ({blocks * warps}/{lim['warps']} warps)"
    st.blocks_per_unit = blocks


def _hip_compile(k, target):
    if importlib.util.find_spec("ziglang") is None:
        raise NoToolchain("clang with the AMDGPU target comes from the ziglang wheel: pip install ziglang")
    g = _vendor_module(target, "codegen").generate(k, target)
    return g, _vendor_module(target, "toolchain").compile_kernel(g)


def _hip_static(k, target) -> Static:
    _, rep = _hip_compile(k, target)
    code = re.search(r"codeLenInByte = (\d+)", rep.assembly)
    scratch = rep.scratch_used   # spilled VGPRs and scratch the code reads or writes count; an untouched one not
    return Static(target, "ziglang clang", rep.threads, f"v{rep.vgprs} a{rep.agprs}", rep.lds,
                  f"{rep.spills}, scratch {rep.scratch} B{'' if scratch else ' untouched'}"
                  if rep.spills or rep.scratch else "0",
                  f"{rep.waves_per_simd}/8 waves/SIMD",
                  ", ".join(f"{n} x{c}" for n, c in rep.loop_mfma.items()) or "none in a loop",
                  int(code.group(1)) if code else None, loop=rep.loop, spill_bytes=4 * rep.spills + scratch,
                  # a block's waves spread over the CU's 4 SIMDs
                  blocks_per_unit=rep.waves_per_simd // -(-rep.threads // 256))


def asm_loop(asm: str, target: str | None = None):
    """The main-loop report of AMDGPU assembly from any compiler (e.g. HipKittens' kernels built with clang -S):
    the target from its .amdgcn_target unless given; waves per SIMD from its metadata (registers, threads,
    static LDS)."""
    m = re.search(r'\.amdgcn_target\s+"amdgcn-amd-amdhsa--(gfx\w+?)(?:[:"])', asm)
    target = target or (m.group(1) if m else None)
    if target not in ("gfx942", "gfx950"):
        raise ValueError(f"give --target gfx942 or gfx950 (the assembly names {target or 'no target'})")
    ht = _vendor_module(target, "toolchain")
    return ht.report(asm, target, ht._meta(asm, "max_flat_workgroup_size") or 64, 0).loop


def _metal_static(k, target) -> Static:
    codegen, mt = _vendor_module(target, "codegen"), _vendor_module(target, "toolchain")
    mk = codegen.generate(k, target)
    rep = mt.compile(mk)
    if not rep.ok:
        raise RuntimeError(f"{rep.compiler} rejected the generated MSL:\n{rep.log}")
    note = "" if rep.device_compile else "host check only, no Metal compiler here: registers, code unknown"
    return Static(target, rep.compiler.split(" (")[0], mk.threads, "?", mk.smem_bytes, note=note)


def _sass_loops(sass: str) -> list[tuple[int, int]]:
    """(first line, last line) of every loop in cuobjdump SASS: a branch back to a lower address."""
    lines, at, loops = sass.splitlines(), {}, []
    for i, ln in enumerate(lines):
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/", ln)
        if m:
            at[int(m.group(1), 16)] = i
        m = re.search(r"\bBRA\s+(?:`\()?0x([0-9a-f]+)", ln)
        if m and int(m.group(1), 16) in at:
            loops.append((at[int(m.group(1), 16)], i))
    return loops


def _loop_mma(asm: str, loops: list[tuple[int, int]], mma: str) -> str:
    """The matrix instructions of the innermost loop that has any: 'NAME xN, ...', or 'none in a loop'."""
    lines = asm.splitlines()
    for lo, hi in sorted(loops, key=lambda x: x[1] - x[0]):
        names = [m.group(1) for m in (re.search(mma, ln) for ln in lines[lo:hi + 1]) if m]
        if names:
            return ", ".join(f"{n} x{names.count(n)}" for n in dict.fromkeys(names))
    return "none in a loop"


# ---------------------------------------------------------------- source and assembly

def emit(kfn, args, target: str, what: str, **consts) -> str:
    _, args, consts = kfn.main_step(args, target, **consts)
    k = kfn.trace(args, target, **consts)
    if what == "ir":
        return printer.format_kernel(k)
    vendor = targets.target(target).backend
    if vendor == "cuda":
        if what == "source":
            return _cuda_generate(k, target).source
        if what == "sass":
            return _cuda_compile(k, target)[1].sass()
        if what == "ptx":
            return _ptx(_cuda_generate(k, target).source, target)
    elif vendor == "hip":
        if what == "source":
            return _vendor_module(target, "codegen").generate(k, target).source
        if what == "asm":
            return _hip_compile(k, target)[1].assembly
        if what == "loop":
            st = static(kfn, args, target, **consts)
            return st.loop.text(kfn.__name__) if st.loop else "no loop in the generated assembly"
    elif what == "source":
        return _vendor_module(target, "codegen").generate(k, target).source
    kinds = {"cuda": "source, ir, ptx, sass", "hip": "source, ir, asm, loop", "metal": "source, ir"}[vendor]
    raise ValueError(f"--emit {what} is not available for {target}; choose one of {kinds}")


def _ptx(source: str, target: str) -> str:
    """PTX through nvcc (the CUDA toolchain module compiles to cubins only)."""
    tc = _vendor_module(target, "toolchain")
    if not shutil.which("nvcc"):
        raise NoToolchain("PTX needs nvcc on the PATH")
    opts = [o for o in tc.options(target, "nvcc") if not o.startswith("-Xptxas")]
    with tempfile.TemporaryDirectory(prefix="tiles-ptx-") as d:
        src, out = Path(d) / "kernel.cu", Path(d) / "kernel.ptx"
        src.write_text(source)
        p = subprocess.run(["nvcc", "-ptx", *opts, "-o", str(out), str(src)], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"nvcc -ptx failed:\n{p.stderr}")
        return out.read_text()
