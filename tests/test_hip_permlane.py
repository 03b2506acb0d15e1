"""CDNA4's v_permlane16_swap_b32 / v_permlane32_swap_b32 as hip-emu models them, against the ISA guide's
description (rows of 16 lanes; the 16 variant swaps the odd rows of vdst with the even rows of src0, the 32
variant rows 2-3 of vdst with rows 0-1 of src0), and arch::halves, the row reductions' use of them."""
import numpy as np

from tiles.backends.hip.emu import INCLUDE
from tiles.backends.hip.toolchain import SHARED_INCLUDE
from tiles.emu.runner import Param, compile

KERNEL = r"""
#include "tiles_hip/tiles.hpp"
using namespace tiles_hip;
extern "C" __global__ void swap(const uint32_t* x, const uint32_t* y, uint32_t* out) {
  const int l = arch::lane_id();
  uint32_t a = x[l], b = y[l];
  hip_emu::permlane_swap<16>(a, b);
  out[l] = a, out[64 + l] = b;
  a = x[l], b = y[l];
  hip_emu::permlane_swap<32>(a, b);
  out[128 + l] = a, out[192 + l] = b;
  const arch::lane_pair p = arch::halves<16>(x[l]), q = arch::halves<32>(x[l]);
  out[256 + l] = p.lo, out[320 + l] = p.hi, out[384 + l] = q.lo, out[448 + l] = q.hi;
}
"""


def test_permlane_swaps_follow_the_isa():
    mod = compile(KERNEL, kernel="swap", params=[Param("const uint32_t*", "x"), Param("const uint32_t*", "y"),
                                                 Param("uint32_t*", "out")], shim="hip",
                  defines={"TILES_EMU": None, "TILES_EMU_GFX": "950"}, include_dirs=[INCLUDE, SHARED_INCLUDE],
                  atoms=("gfx950",))
    rng = np.random.default_rng(0)
    x, y = (rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32) for _ in range(2))
    out = np.zeros(512, np.uint32)
    mod.launch(1, 64, [x, y, out])
    rows = lambda v: v.reshape(4, 16)  # noqa: E731
    vd, s0 = rows(x).copy(), rows(y).copy()
    vd[[1, 3]], s0[[0, 2]] = rows(y)[[0, 2]], rows(x)[[1, 3]]       # odd rows of vdst <-> even rows of src0
    np.testing.assert_array_equal(out[:64], vd.ravel())
    np.testing.assert_array_equal(out[64:128], s0.ravel())
    vd, s0 = rows(x).copy(), rows(y).copy()
    vd[[2, 3]], s0[[0, 1]] = rows(y)[[0, 1]], rows(x)[[2, 3]]       # rows 2-3 of vdst <-> rows 0-1 of src0
    np.testing.assert_array_equal(out[128:192], vd.ravel())
    np.testing.assert_array_equal(out[192:256], s0.ravel())
    lanes = np.arange(64)
    for i, m in enumerate((16, 32)):   # halves<M>: (value of lane l & ~M, value of lane l | M) in every lane
        np.testing.assert_array_equal(out[256 + 128 * i:320 + 128 * i], x[lanes & ~m])
        np.testing.assert_array_equal(out[320 + 128 * i:384 + 128 * i], x[lanes | m])
