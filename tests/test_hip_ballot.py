"""The wave vote hip-emu models for arch::wave_all (mul_row's skip when every multiplier is 1), against the
CDNA3/CDNA4 ISA guides' VOPC description: a compare writes one bit per lane into an SGPR pair (VCC), bit i
for lane i, and inactive lanes (here: lanes that returned) write 0. Also arch::max3 (v_max3_f32) on the CPU."""
import numpy as np

from tiles.backends.hip.emu import INCLUDE
from tiles.backends.hip.toolchain import SHARED_INCLUDE
from tiles.emu.runner import Param, compile

KERNEL = r"""
#include "tiles_hip/tiles.hpp"
using namespace tiles_hip;
extern "C" __global__ void vote(const uint32_t* p, uint32_t* out, const float* x, float* m) {
  const int l = arch::lane_id();
  const uint64_t b = hip_emu::ballot(p[l] != 0);
  out[2 * l] = (uint32_t)b, out[2 * l + 1] = (uint32_t)(b >> 32);
  out[128 + l] = arch::wave_all(p[l] != 0);
  out[192 + l] = arch::wave_all(true);
  m[l] = arch::max3(x[3 * l], x[3 * l + 1], x[3 * l + 2]);
  if (l >= 40) return;                               // lanes 40..63 leave: their bits read 0
  const uint64_t c = hip_emu::ballot(true);
  out[256 + 2 * l] = (uint32_t)c, out[256 + 2 * l + 1] = (uint32_t)(c >> 32);
}
"""


def test_ballot_is_one_bit_per_lane():
    mod = compile(KERNEL, kernel="vote", params=[Param("const uint32_t*", "p"), Param("uint32_t*", "out"),
                                                 Param("const float*", "x"), Param("float*", "m")],
                  shim="hip", defines={"TILES_EMU": None, "TILES_EMU_GFX": "942"},
                  include_dirs=[INCLUDE, SHARED_INCLUDE], atoms=("gfx942",))
    rng = np.random.default_rng(0)
    p = (rng.random(64) < 0.5).astype(np.uint32)
    out = np.zeros(384, np.uint32)
    x = rng.standard_normal(192).astype(np.float32)
    x[[0, 4, 8]] = np.nan                               # a quiet NaN loses (IEEE maxNum), as in fmaxf
    x[[9, 10, 11]] = [-np.inf, np.nan, -np.inf]
    m = np.zeros(64, np.float32)
    mod.launch(1, 64, [p, out, x, m])
    want = sum(int(p[i]) << i for i in range(64))
    got = out[:128].astype(np.uint64).reshape(64, 2)
    assert all(int(lo) | int(hi) << 32 == want for lo, hi in got)           # the same mask in every lane
    np.testing.assert_array_equal(out[128:192], np.full(64, int(p.all())))
    np.testing.assert_array_equal(out[192:256], np.ones(64))
    live = out[256:336].astype(np.uint64).reshape(40, 2)
    assert all(int(lo) | int(hi) << 32 == (1 << 40) - 1 for lo, hi in live)
    np.testing.assert_array_equal(m, np.fmax(np.fmax(x[0::3], x[1::3]), x[2::3]))
    assert m[3] == -np.inf
