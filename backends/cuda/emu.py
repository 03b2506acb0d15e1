"""cuda-emu:sm_80: the generated CUDA C++ for sm_80, unchanged, compiled for the host with tiles/emu/include/cuda_emu.h
and run on the CPU engine (tiles/emu): lanes as fibers, warps of 32 as real collectives, mma.sync computed from the
lane maps of tiles/targets.py, ldmatrix through the warp, cp.async as a plain copy. sm_90a (wgmma, TMA, mbarriers,
the warp-specialized schedule) is not emulated."""
from __future__ import annotations

from tiles import backend, interp, ir
from tiles.types import GL

from . import codegen
from .runtime import pack
from .toolchain import HEADERS

TARGETS = ("sm_80",)
_cache: dict = {}


def generated(k: ir.Kernel, target: str = "sm_80") -> codegen.Generated:
    """The CUDA source the GPU backend would compile for k on a device with the target's shared memory."""
    key = (id(k), target)
    if key not in _cache or _cache[key][0] is not k:
        _cache[key] = (k, codegen.generate_for(k, target))
    return _cache[key][1]


def params(k: ir.Kernel) -> list:
    """The kernel's C parameters as the engine's entry passes them: eight per global (TC_GL_PARAMS), one per scalar."""
    from tiles.emu.runner import Param
    out = []
    for p in k.params:
        t = codegen.ctype(p.dtype)
        if isinstance(p, GL):
            out += [Param(f"{t}*", f"{p.name}_ptr"), *(Param("int", f"{p.name}_d{i}") for i in range(4)),
                    *(Param("long long", f"{p.name}_s{i}") for i in range(3))]
        else:
            out.append(Param(t, p.name))
    return out


def compile_source(source: str, kernel: str, params: list, target: str = "sm_80"):
    """CUDA C++ that includes tiles_cuda (generated or hand-written) as a host library for the CPU engine."""
    from tiles.emu.runner import compile
    if target not in TARGETS:
        raise ValueError(f"the CPU engine runs CUDA for {', '.join(TARGETS)}, not {target}")
    # -fno-strict-aliasing: the headers reinterpret element pairs and 16-byte chunks, as nvcc allows. -O1: the
    # compile dominates a test (attention backward: 5.3-5.8 s at -O1, 6.8-7.0 s at -O2, the same 0.15-0.23 s a run)
    return compile(source, kernel=kernel, params=params, shim="cuda", include_dirs=[HEADERS], atoms=(target,),
                   defines={"TILES_EMU": None, "TILES_EMU_SM": target.removeprefix("sm_")},
                   flags=("-O1", "-fno-strict-aliasing"))


def run_emu(k: ir.Kernel, args, *, source: str | None = None, seed: int | None = None, target: str = "sm_80") -> None:
    """Launch the generated kernel (or an edited `source` of it) on the CPU over host arrays, in place."""
    from tiles.emu.runner import launch_host
    g = generated(k, target)
    grid = tuple(int(ir.evaluate(e, interp.bind(k, args))) for e in k.grid)
    if min(grid, default=1) < 1:
        return
    launch_host(compile_source(source or g.source, g.name, params(k), target), grid, g.schedule.threads, args,
                lambda host: pack(k, host, lambda a: a), shared_bytes=g.schedule.smem_bytes, seed=seed)


class CudaEmu(backend.Emulator):
    language = "CUDA"

    def __init__(self, target: str):
        super().__init__(f"cuda-emu:{target}", target)

    def run(self, k: ir.Kernel, args) -> None:
        run_emu(k, args, target=self.target)
