"""Which lane holds which element of a simdgroup_matrix: the check that tiles/targets.py's apple atom map (taken
from MLX, marked documented=False) is the one a device uses.

The tiles_metal headers do not rely on that map (position-dependent ops go through threadgroup memory), so a
wrong map costs nothing in correctness; the CPU engine, though, emulates the matrix units with it, and a future
header that reads thread_elements() at known positions would need it. Run `check(backend)` on a Mac
(backend "metal") to find out; on metal-emu it checks the engine against targets.py.
"""
from __future__ import annotations

import numpy as np

from tiles.targets import target

# Every lane reports the two values thread_elements() gives it of an 8x8 matrix whose element (r, c) is 8r + c,
# for float and half matrices.
SOURCE = """\
#include "tiles_metal/base.h"

kernel void tiles_lane_map(
    device float* out [[buffer(0)]],
    threadgroup float* tile TILES_ATTR(threadgroup(0)),
    ushort lane [[thread_index_in_simdgroup]])
{
    threadgroup half* tile_h = (threadgroup half*)(tile + 64);
    for (int i = lane; i < 64; i += 32) {
        tile[i] = float(i);
        tile_h[i] = half(i);
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
    simdgroup_float8x8 f;
    simdgroup_half8x8 h;
    simdgroup_load(f, tile, 8);
    simdgroup_load(h, tile_h, 8);
    for (int r = 0; r < 2; ++r) {
        out[2 * lane + r] = f.thread_elements()[r];
        out[64 + 2 * lane + r] = float(h.thread_elements()[r]);
    }
}
"""
NAME = "tiles_lane_map"
PARAMS = [("device float*", "out", "buffer(0)"), ("threadgroup float*", "tile", "threadgroup(0)"),
          ("ushort", "lane", "thread_index_in_simdgroup")]
SMEM_BYTES = 64 * 4 + 64 * 2


def expected() -> np.ndarray:
    """[2, 32, 2]: for float and half, the element index 8r + c that targets.py says (lane, reg) holds."""
    c = target("apple").atom("simdgroup_8x8.f32").c
    idx = (c[..., 0] * 8 + c[..., 1]).astype(np.float32)
    return np.stack([idx, idx])


def compare(out: np.ndarray) -> str | None:
    """None if the device's map is targets.py's, else what differs."""
    got, want = out.reshape(2, 32, 2), expected()
    if np.array_equal(got, want):
        return None
    lanes = sorted({int(l) for l in np.nonzero((got != want).any(-1))[1]})
    return f"simdgroup_matrix lane map differs from tiles/targets.py at lanes {lanes}: got {got[0, lanes[0]]} " \
           f"for lane {lanes[0]}, expected {want[0, lanes[0]]}"


def check(backend, **kw) -> str | None:
    """Run the check kernel on "metal" or "metal-emu"; None if the map is as targets.py says."""
    out = np.full(128, np.nan, dtype=np.float32)
    backend.run_raw(SOURCE, NAME, PARAMS, [out], (1, 1, 1), 32, SMEM_BYTES, **kw)
    return compare(out)
