"""CDNA4's transposing LDS read (ds_read_b64_tr_b16) as hip-emu models it, against the ISA guide's
description: each lane reads four 16-bit elements; per group of 16 lanes, lane i receives as element j the
element i % 4 that lane 4 j + i / 4 read. Used for an MFMA operand stored with M (or N) contiguous, two reads
give a lane its 8 consecutive K of the 16x16x32 bf16 B operand ("the first loads K=0..3 [of its K run] ...,
each lane holds 4 consecutive M or N values"), as tiles/targets.py maps that operand."""
import numpy as np
import pytest

from tiles import targets
from tiles.backends.hip.emu import INCLUDE
from tiles.backends.hip.toolchain import SHARED_INCLUDE
from tiles.emu.runner import Param, compile

# every lane reads 8 bytes at byte offset addr[lane] of an LDS block holding 0, 1, 2, ... (as uint16)
KERNEL = r"""
#include "tiles_hip/tiles.hpp"
using namespace tiles_hip;
extern "C" __global__ void tr(const int* addr, uint16_t* out, int words) {
  uint16_t* lds = (uint16_t*)arch::lds_base();
  for (int i = arch::thread_id(); i < words; i += 64) lds[i] = (uint16_t)i;
  arch::barrier();
  uint32_t r[2];
  arch::ds_read_tr16_b64(arch::lds_base() + addr[arch::lane_id()], r);
  __builtin_memcpy(out + 4 * arch::lane_id(), r, 8);
}
"""


def run(addr, words=1024):
    mod = compile(KERNEL, kernel="tr", params=[Param("const int*", "addr"), Param("uint16_t*", "out"),
                                               Param("int", "words")], shim="hip",
                  defines={"TILES_EMU": None, "TILES_EMU_GFX": "950"}, include_dirs=[INCLUDE, SHARED_INCLUDE],
                  atoms=("gfx950",))
    out = np.zeros((64, 4), np.uint16)
    mod.launch(1, 64, [np.asarray(addr, np.int32), out, np.int32(words)], shared_bytes=2 * words)
    return out


def test_definition_with_arbitrary_addresses():
    """The exchange is defined on lanes, whatever they read: a random permutation of 8-byte slots."""
    rng = np.random.default_rng(1)
    slots = rng.permutation(256)[:64]
    out = run(8 * slots)
    read = (4 * slots[:, None] + np.arange(4)[None, :])   # what each lane read: elements 4 s .. 4 s + 3
    for lane in range(64):
        g, i = lane & ~15, lane & 15
        assert list(out[lane]) == [read[g + 4 * j + i // 4, i % 4] for j in range(4)]


def test_b_operand_of_16x16x32_bf16():
    """A 32 x 16 B block stored K-major (row k, 16 contiguous N): lane l of group g = l / 16 reads, in read h,
    row 8 g + 4 h + (l % 16) / 4 at columns 4 (l % 4); the two reads are then the lane's B registers 0-3 and
    4-7 of mfma_f32_16x16x32_bf16, i.e. B[k][n] at the (k, n) targets.py gives for (lane, register)."""
    atom = targets.target("gfx950").atom("mfma_f32_16x16x32_bf16")
    lanes = np.arange(64)
    regs = np.zeros((64, 8), np.int64)
    for h in range(2):
        k = 8 * (lanes // 16) + 4 * h + (lanes % 16) // 4
        regs[:, 4 * h:4 * h + 4] = run(2 * (16 * k + 4 * (lanes % 4)))
    k_of, n_of = atom.b[:, :, 0], atom.b[:, :, 1]
    np.testing.assert_array_equal(regs, 16 * k_of + n_of)   # element value = its (k, n) position in B


def test_misaligned_address_fails():
    from tiles.emu.runner import LaunchError
    with pytest.raises(LaunchError, match="ds_read_b64_tr_b16"):
        run(8 * np.arange(64) + 2)
