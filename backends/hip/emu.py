"""hip-emu:gfx942 / hip-emu:gfx950: the generated HIP text compiled for the host with hip_emu.h and run
on the CPU engine (tiles/emu), lanes as fibers, waves of 64 as collectives, MFMAs from the atom maps."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from tiles import backend, ir

from . import launch
from .toolchain import SHARED_INCLUDE

INCLUDE = Path(__file__).parent / "include"


def compile_emu(g, source: str | None = None):
    from tiles.emu.runner import Param, compile
    params = [Param(c, n) for c, n, _, _ in g.params]
    gfx = g.target.removeprefix("gfx")
    return compile(source or g.source, kernel=g.name, params=params, shim="hip",
                   defines={"TILES_EMU": None, "TILES_EMU_GFX": gfx}, include_dirs=[INCLUDE, SHARED_INCLUDE], atoms=(g.target,))


def run_emu(g, args, *, source: str | None = None, seed: int | None = None) -> None:
    """Launch the generated kernel (or an edited `source` of it) on the CPU over host arrays, in place."""
    from tiles.emu.runner import launch_host
    grid = launch.grid(g, launch.bind(g, args))
    if grid:
        launch_host(compile_emu(g, source), grid, g.threads, args, lambda host: _pack(g, host),
                    shared_bytes=max(g.lds_bytes, 16), seed=seed)


def _pack(g, args) -> list:
    """The module's arguments: each array, its gl_dims after it, the scalars."""
    host = []
    by_param = dict(zip([id(p) for p in g.kernel.params], args))
    for ctype, name, kind, p in g.params:
        a = by_param[id(p)]
        if kind == "data":
            host.append(a)
        elif kind == "dims":
            host.append(launch.dims_of(p, host[-1]).tobytes())
        else:
            host.append(np.float32(a) if ctype == "float" else np.int32(a))
    return host


class HipEmu(backend.Emulator):
    language = "HIP"

    def __init__(self, target: str):
        super().__init__(f"hip-emu:{target}", target)

    def run(self, k: ir.Kernel, args) -> None:
        run_emu(launch.generated(k, self.target), args)
