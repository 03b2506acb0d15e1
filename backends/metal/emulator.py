"""The "metal-emu" backend: the generated MSL, unchanged, compiled for the host against
tiles/emu/include/metal_emu.h and run by the CPU engine with simdgroups of 32 lanes as real collectives."""
from __future__ import annotations

import itertools
import os
import weakref
from pathlib import Path

from tiles import interp, ir
from tiles.backend import Emulator

from . import codegen

INCLUDE = Path(__file__).parent / "include"

# The values the engine gives the kernel's builtin parameters (see metal_emu.h).
BUILTINS = {
    "threadgroup(0)": "metal_emu::threadgroup_arena()",
    "threadgroup_position_in_grid": "metal_emu::threadgroup_position_in_grid()",
    "thread_index_in_threadgroup": "metal_emu::thread_index_in_threadgroup()",
    "simdgroup_index_in_threadgroup": "metal_emu::simdgroup_index_in_threadgroup()",
    "thread_index_in_simdgroup": "metal_emu::thread_index_in_simdgroup()",
}

_generated: "weakref.WeakKeyDictionary[ir.Kernel, codegen.MetalKernel]" = weakref.WeakKeyDictionary()


def generated(k: ir.Kernel) -> codegen.MetalKernel:
    """The MSL of a traced kernel (cached per kernel)."""
    if k not in _generated:
        _generated[k] = codegen.generate(k)
    return _generated[k]


def compile_host(mk: codegen.MetalKernel, defines: dict | None = None):
    """The exact MSL text as a host shared library (tiles.emu.runner caches it by content)."""
    return _compile(mk.source, mk.name, mk.params, defines)


def _compile(source: str, name: str, params: list, defines: dict | None = None):
    from tiles.emu import runner
    params = [runner.Param(ctype, pname, BUILTINS.get(attr)) for ctype, pname, attr in params]
    # -O1: the compile dominates a test (-O2 takes half as long again for no faster emulated run)
    return runner.compile(source, kernel=name, params=params, shim="metal", include_dirs=[INCLUDE],
                          atoms=("apple",), flags=("-O1",), defines=defines)


class MetalEmu(Emulator):
    language = "MSL"

    def __init__(self):
        super().__init__("metal-emu", "apple")
        # Lanes interleave in an order drawn from the seed; every launch takes the next one, so repeated runs
        # explore different interleavings. TILES_EMU_SEED fixes where the sequence starts.
        self._seeds = itertools.count(int(os.environ.get("TILES_EMU_SEED", "0")))

    def run(self, k: ir.Kernel, args) -> None:
        self.run_source(generated(k), args)

    def run_raw(self, source: str, name: str, params: list, arrays: list, grid, threads: int, smem_bytes: int,
                defines: dict | None = None) -> None:
        """Run a hand-written MSL kernel; params: its (C type, name, attribute) list, device buffers first."""
        _compile(source, name, params, defines).launch(grid, threads, arrays, shared_bytes=smem_bytes,
                                                       seed=next(self._seeds))

    def run_source(self, mk: codegen.MetalKernel, args, *, seed: int | None = None, defines=None) -> None:
        """Run generated MSL (possibly edited, as the tests do) with the launch interface of mk."""
        from tiles.emu.runner import launch_host
        env = interp.bind(mk.kernel, args)

        def buffers(host):
            arrays, ints, floats = mk.pack(host, env)
            return [*arrays, ints] + ([floats] if mk.float_args else [])
        launch_host(compile_host(mk, defines), mk.grid(env), mk.threads, args, buffers, shared_bytes=mk.smem_bytes,
                    seed=next(self._seeds) if seed is None else seed)
