"""Every kernel compiles for gfx942 and gfx950 with clang (no ROCm), with the resources its schedule allows."""
import re

import numpy as np
import pytest

import tiles as tl
from tiles import targets
from tiles.backends.hip import launch, swizzle, toolchain
from tiles.dsl import ArgSpec
from tiles.kernels.attention import attention_fwd
from tiles.kernels.attention_bwd import attention_bwd, attention_bwd_dq, attention_bwd_pre
from tiles.kernels.gemm import gemm
from tiles.kernels.gemm_fp8 import gemm_fp8
from tiles.kernels.layernorm import layernorm_fwd
from tiles.kernels.rmsnorm import rmsnorm_fwd
from tiles.kernels.rotary import rotary_half, rotary_interleaved
from tiles.kernels.softmax import softmax_fwd
from tiles.testing import random_array


def G(dtype, rank):
    return ArgSpec("gl", tl.dtypes.of(dtype), rank)


F32, I32 = ArgSpec("scalar", tl.f32), ArgSpec("scalar", tl.i32)


def _gemm(target, trans_b):
    return gemm.trace([G("f32", 2), G("bf16", 2), G("bf16", 2)], target, trans_b=trans_b)


def _gemm_fp8(target, **over):
    return gemm_fp8.trace([G("bf16", 2), G("fp8e4m3", 2), G("fp8e4m3", 2), F32, F32], target, **over)


def _attention(target, d):
    return attention_fwd.trace([G("bf16", 4), G("f32", 3), G("bf16", 4), G("bf16", 4), G("bf16", 4), F32], target,
                               D=d, causal=True)


def _attention_bwd(target, causal):
    return attention_bwd.trace([G("bf16", 4), G("bf16", 4), G("f32", 4)] + [G("bf16", 4)] * 4 + [G("f32", 3)] * 2
                               + [F32], target, D=128, causal=causal)


# every kernel in kernels/, with its target configuration (the GEMM also transposed)
KERNELS = {
    "gemm_AB": lambda t: _gemm(t, False),
    "gemm_ABt": lambda t: _gemm(t, True),
    "gemm_fp8": _gemm_fp8,
    "attention_d64": lambda t: _attention(t, 64),
    "attention_d128": lambda t: _attention(t, 128),
    "softmax": lambda t: softmax_fwd.trace([G("bf16", 2), G("bf16", 2)], t),
    "layernorm": lambda t: layernorm_fwd.trace([G("bf16", 2)] * 4 + [G("bf16", 1)] * 2 + [F32, F32, I32, I32], t),
    "layernorm_dropout": lambda t: layernorm_fwd.trace([G("bf16", 2)] * 4 + [G("bf16", 1)] * 2 + [F32, F32, I32, I32],
                                                       t, dropout=True),
    "rmsnorm": lambda t: rmsnorm_fwd.trace([G("bf16", 2), G("f32", 1), G("bf16", 2), G("bf16", 1), F32], t),
    "rotary_half": lambda t: rotary_half.trace([G("bf16", 4)] * 4 + [G("bf16", 2)] * 2, t, W=64),
    "rotary_interleaved": lambda t: rotary_interleaved.trace([G("bf16", 4)] * 4 + [G("bf16", 2)] * 4, t),
    "attention_bwd_pre": lambda t: attention_bwd_pre.trace([G("f32", 3), G("f32", 4), G("bf16", 4), G("bf16", 4)],
                                                           t, D=128),
    # MHA and GQA are one kernel (the group size is a runtime number); causal adds the masked loop
    "attention_bwd": lambda t: _attention_bwd(t, causal=True),
    "attention_bwd_noncausal": lambda t: _attention_bwd(t, causal=False),
    "attention_bwd_dq": lambda t: attention_bwd_dq.trace([G("bf16", 4), G("f32", 4)], t, D=128),
}


@pytest.mark.parametrize("target", toolchain.TARGETS)
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_compiles_within_budget(target, kernel):
    g = launch.generated(KERNELS[kernel](target), target)
    r = toolchain.compile_kernel(g)
    # the intended MFMA, and only it, in the main loop (kernels without an MMA: none anywhere)
    assert set(r.loop_mfma) == set(g.mfma), (r.loop_mfma, g.mfma)
    if not any(op.name == "mma" for op, _ in g.kernel.walk()):
        assert "v_mfma" not in r.assembly
    assert r.lds <= targets.target(target).shared_bytes
    assert r.registers <= 512 // g.plan.waves_per_simd, r   # ping-pong / 8 waves: 2 waves per SIMD
    assert r.waves_per_simd >= g.plan.waves_per_simd, r
    assert r.scratch == 0 and r.spills == 0, str(r)   # SGPR spills go to VGPR lanes, not memory


def test_interleave_spreads_work_under_the_mfmas():
    """Under the interleave every MMA asks for its pattern (mma.hpp's interleaved<VALU, VM>, counted from the loop
    body), and the compiled backward's main loop on gfx950 (5 MMAs of 16 MFMAs a step, 80) holds it: before, each
    MMA's 16 MFMAs ran back to back after one wait, 5 of 80 MFMAs had anything issued before them."""
    g = launch.generated(KERNELS["attention_bwd_noncausal"]("gfx950"), "gfx950")
    assert g.plan.schedule == "interleave"
    assert len(re.findall(r"mma<\w+, \w+, \d+, \w+, interleaved<[1-9]\d*, \d+>>", g.source)) == 5, g.source
    c = toolchain.compile_kernel(g)
    assert "sched_group_barrier mask(0x00000008) size(1)" in c.assembly   # LLVM took the pattern
    r = c.loop
    mixed, longest = r.mfma_runs()
    assert r.mfma == 80 and mixed >= 40 and longest <= 8, r.text()
    # the same MMAs outside the interleave keep their fenced clusters
    fenced = launch.generated(_gemm("gfx950", True), "gfx950")
    assert "interleaved<" not in fenced.source


INTENDED = {("gfx942", "bf16"): "v_mfma_f32_16x16x16_bf16", ("gfx950", "bf16"): "v_mfma_f32_16x16x32_bf16",
            ("gfx942", "fp8"): "v_mfma_f32_16x16x32_fp8_fp8", ("gfx950", "fp8"): "v_mfma_scale_f32_16x16x128_f8f6f4"}


@pytest.mark.parametrize("target", toolchain.TARGETS)
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_mfma_shapes_per_target(target, dtype):
    """bf16 GEMM: 16x16x16 on CDNA3, the doubled-K 16x16x32 on CDNA4; fp8: 16x16x32 on CDNA3, the block-scaled
    16x16x128 on CDNA4; in the main loop of the compiled code."""
    g = launch.generated(_gemm(target, True) if dtype == "bf16" else _gemm_fp8(target, BM=128, BN=128), target)
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


@pytest.mark.parametrize("target", toolchain.TARGETS)
def test_a_deep_pipeline_of_narrow_tiles_waits_within_vmcnt(target):
    """8 stages of 64x32 B tiles with one wave put more loads in flight than vmcnt's 6 bits count (72 on gfx950):
    the wait for the oldest tile asks for 63 at most, and clang compiles it (it refused the 72 once)."""
    k = gemm.trace([G("f32", 2), G("bf16", 2), G("bf16", 2)], target, BM=64, BN=32, BK=64, stages=8, workers=1)
    g = launch.generated(k, target)
    assert "arch::waitcnt<arch::vm_cap(" in g.source
    r = toolchain.compile_kernel(g)
    assert r.scratch == 0 and r.spills == 0, str(r)
