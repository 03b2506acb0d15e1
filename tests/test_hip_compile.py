"""Every kernel compiles for gfx942 and gfx950 with clang (no ROCm), with the resources its schedule allows."""
import numpy as np
import pytest

from tiles import targets
from tiles.backends.hip import launch, swizzle, toolchain
from tiles.kernels.attention import attention_fwd
from tiles.kernels.gemm import gemm
from tiles.testing import random_array


def _gemm(target, trans_b):
    a, b = random_array((64, 48), "bf16"), random_array((80, 48) if trans_b else (48, 80), "bf16")
    return gemm.trace([np.zeros((64, 80), np.float32), a, b], target, trans_b=trans_b)


def _gemm_fp8(target):
    a, b = random_array((64, 256), "fp8e4m3"), random_array((80, 256), "fp8e4m3")
    return gemm.trace([np.zeros((64, 80), np.float32), a, b], target, trans_b=True, BM=128, BN=128, BK=128)


def _attention(target, d):
    q = random_array((1, 2, 70, d), "bf16")
    return attention_fwd.trace([q, np.zeros((1, 2, 70), np.float32), q, q, q, 0.1], target, D=d, causal=True)


KERNELS = {"gemm_AB": lambda t: _gemm(t, False), "gemm_ABt": lambda t: _gemm(t, True), "gemm_fp8": _gemm_fp8,
           "attention_d64": lambda t: _attention(t, 64), "attention_d128": lambda t: _attention(t, 128)}
@pytest.mark.parametrize("target", toolchain.TARGETS)
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_compiles_within_budget(target, kernel):
    g = launch.generated(KERNELS[kernel](target), target)
    r = toolchain.compile_kernel(g)
    # the intended MFMA, and only it, in the main loop
    assert set(r.loop_mfma) == set(g.mfma), (r.loop_mfma, g.mfma)
    assert r.lds <= targets.target(target).shared_bytes
    assert r.registers <= 512 // g.plan.waves_per_simd if g.plan.waves == 8 else 512
    assert r.waves_per_simd >= (2 if g.plan.waves == 8 else 1), r
    assert r.scratch == 0 and r.spills == 0, str(r)   # SGPR spills go to VGPR lanes, not memory


INTENDED = {("gfx942", "bf16"): "v_mfma_f32_16x16x16_bf16", ("gfx950", "bf16"): "v_mfma_f32_16x16x32_bf16",
            ("gfx942", "fp8"): "v_mfma_f32_16x16x32_fp8_fp8", ("gfx950", "fp8"): "v_mfma_scale_f32_16x16x128_f8f6f4"}


@pytest.mark.parametrize("target", toolchain.TARGETS)
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_mfma_shapes_per_target(target, dtype):
    """bf16 GEMM: 16x16x16 on CDNA3, the doubled-K 16x16x32 on CDNA4; fp8: 16x16x32 on CDNA3, the block-scaled
    16x16x128 on CDNA4; in the main loop of the compiled code."""
    g = launch.generated(_gemm(target, True) if dtype == "bf16" else _gemm_fp8(target), target)
    assert list(g.mfma) == [INTENDED[target, dtype]]
    assert set(toolchain.compile_kernel(g).loop_mfma) == {INTENDED[target, dtype]}


@pytest.mark.parametrize("target,e", [("gfx942", 4), ("gfx950", 8)])
@pytest.mark.parametrize("cols", [32, 64, 128])
def test_swizzle_removes_bank_conflicts(target, e, cols):
    """The chosen swizzle serves an MFMA operand read in the minimum cycles (one per phase); unswizzled rows
    that are a multiple of the bank line conflict."""
    row_bytes = cols * 2
    g, s, mask = swizzle.choose(target, 128, row_bytes, 16, e, 2)
    lanes = swizzle.operand_read(16, e, 2)
    width = e * 2
    plain = swizzle.cycles(target, [swizzle.offset(r, b, row_bytes, g, 0, 0) for r, b in lanes], width)
    chosen = swizzle.cycles(target, [swizzle.offset(r, b, row_bytes, g, s, mask) for r, b in lanes], width)
    t = targets.target(target)
    phases = 64 * width // (t.banks * t.bank_bytes)
    assert chosen == phases
    assert plain > chosen


def test_bad_schedule_is_refused():
    from tiles.dsl import TileError
    with pytest.raises(TileError, match="schedule"):
        launch.generated(gemm.trace([np.zeros((64, 80), np.float32), random_array((64, 48), "bf16"),
                                     random_array((48, 80), "bf16")], "gfx942", schedule="fastest"), "gfx942")
