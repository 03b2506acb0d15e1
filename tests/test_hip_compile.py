"""Every kernel compiles for gfx942 and gfx950 with clang (no ROCm), with the resources its schedule allows."""
import re

import numpy as np
import pytest

import tiles as tl
from tiles import targets
from tiles.backends.hip import codegen, launch, runtime, swizzle, toolchain
from tiles.dsl import ArgSpec
from tiles.kernels.attention import attention_fwd
from tiles.kernels.attention_bwd import attention_bwd, attention_bwd_dq, attention_bwd_pre
from tiles.kernels.gemm import gemm
from tiles.kernels.gemm_fp8 import gemm_fp8
from tiles.kernels.layernorm import layernorm_fwd
from tiles.kernels.rmsnorm import rmsnorm_fwd
from tiles.kernels.rotary import rotary_half, rotary_interleaved
from tiles.kernels.softmax import softmax_fwd
from tiles.testing import assert_close, poisoned, random_array, run, tolerance


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


def _attention_bwd(target, causal, **config):
    return attention_bwd.trace([G("bf16", 4), G("bf16", 4), G("f32", 4)] + [G("bf16", 4)] * 4 + [G("f32", 3)] * 2
                               + [F32], target, D=128, causal=causal, **config)


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
    "attention_bwd_pre": lambda t: attention_bwd_pre.trace([G("f32", 3), G("f32", 3), G("f32", 4), G("bf16", 4),
                                                            G("bf16", 4), G("f32", 3), F32], t, D=128),
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
    # the argument buffer the runtime packs is the one the code object declares: offsets, sizes, pointers as
    # global buffers, and nothing (no hidden argument) past it for the runtime to fill
    declared, segment = toolchain.kernel_args(r.assembly)
    kinds = ["global_buffer" if kind == "data" else "by_value" for _, _, kind, _ in g.params]
    assert [(o, n, k) for (o, n), k in zip(runtime.kernarg_layout(g), kinds)] == declared
    assert segment == declared[-1][0] + declared[-1][1]


def test_interleave_spreads_work_under_the_mfmas():
    """Under the interleave every MMA asks for its pattern (mma.hpp's interleaved<VALU, VM>, counted from the loop
    body), and the compiled backward's main loop on gfx950 (5 MMAs of 16 MFMAs a step, 80) holds it: before, each
    MMA's 16 MFMAs ran back to back after one wait, 5 of 80 MFMAs had anything issued before them. At 64 kv rows a
    block (the configured 128 gives each MMA 32 MFMAs: 75 of 160 after other work, runs of 16)."""
    g = launch.generated(_attention_bwd("gfx950", causal=False, BN=64), "gfx950")
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


@tl.kernel
def two_sums_a_step(Y, S, X, *, loop):
    """Each step: a (64, 64) slice of X, the sum of its squares and the larger of that and its max (two exchanges
    across the waves), and the slice scaled by the latter."""
    tl.grid(1)
    x, t = tl.regs(tl.f32, 64, 64, name="x"), tl.regs(tl.f32, 64, 64, name="t")
    a, b = tl.rvec(tl.f32, 64, name="a"), tl.rvec(tl.f32, 64, name="b")
    xs = tl.shared(X.dtype, 64, 64, name="xs") if loop == "pipeline" else None   # staged: the pipeline's frame
    for i in (tl.pipeline if loop == "pipeline" else tl.range)(X.depth, name="i"):
        tl.load(x, X, (i, 0, 0), via=xs)
        tl.mul(t, x, x)
        tl.tile_sum(a, t)
        tl.tile_max(b, x, a)
        tl.store(S, a, (i, 0))
        tl.mul_row(x, x, b)
        tl.store(Y, x, (i, 0, 0))


@pytest.mark.parametrize("loop", ["pipeline", "range"])
def test_exchanges_take_turns_between_the_scratch_halves(loop):
    """A whole-tile reduction writes one half of the reduction scratch, one no wave may still be reading, and holds
    one barrier: two in a row take the two halves with no barrier between them. At a tl.range loop's head either
    half may still be read from the step before, so the first exchange of a step waits for a barrier; a pipeline
    that stages X has its own barrier before each step (one that stages nothing is a plain loop); on the CPU engine
    the sums are float64's."""
    args = [poisoned((3, 64, 64), "bf16"), poisoned((3, 64), "f32"), random_array((3, 64, 64), "bf16")]
    src = codegen.generate(two_sums_a_step.trace(args, "gfx950", loop=loop), "gfx950").source
    lines = [ln.split("//")[0].strip() for ln in src.splitlines()]
    first = next(i for i, ln in enumerate(lines) if ln.startswith("tile_sum<WAVES>(a, t"))
    assert lines[first].endswith("red_scratch);")
    assert lines[first + 1].startswith("tile_max<WAVES>(b, x, &a, red_scratch + ")   # the other half
    assert (lines[first - 1] == "arch::lds_barrier();") == (loop == "range")
    y, s, x = args
    run("hip-emu:gfx950", two_sums_a_step, y, s, x, loop=loop)
    f = x.astype(np.float64)
    total = (f * f).sum(axis=(1, 2))
    top = np.maximum(f.max(axis=(1, 2)), total)
    assert_close(s, np.repeat(total[:, None], 64, 1), "f32")
    assert_close(y, f * top[:, None, None], "bf16")


@tl.kernel
def tile_sum_then_col_max(S, C, X):
    tl.grid(1)
    x = tl.regs(tl.f32, 64, 64, name="x")
    a, c = tl.rvec(tl.f32, 64, name="a"), tl.rvec(tl.f32, 64, axis="cols", name="c")
    tl.load(x, X, (0, 0))
    tl.tile_sum(a, x)
    tl.col_max(c, x)
    tl.store(S, a, (0, 0))
    tl.store(C, c, (0, 0))


def test_a_column_reduction_waits_for_the_half_an_exchange_read():
    """A column reduction writes the scratch from its start, over a half a whole-tile reduction's waves may still
    be reading: a barrier goes between them (fuzz seed 16 found logsumexp2 then col_max racing on hip-emu)."""
    args = [poisoned((1, 64), "f32"), poisoned((1, 64), "f32"), random_array((64, 64), "f32")]
    src = codegen.generate(tile_sum_then_col_max.trace(args, "gfx950"), "gfx950").source
    lines = [ln.split("//")[0].strip() for ln in src.splitlines()]
    at = next(i for i, ln in enumerate(lines) if ln.startswith("col_max<WAVES>"))
    assert lines[at - 1] == "arch::lds_barrier();"
    assert lines[at - 2].startswith("tile_sum<WAVES>(a, x, nullptr, red_scratch)")
    s, c, x = args
    run("hip-emu:gfx942", tile_sum_then_col_max, s, c, x)
    cond = max(1.0, float(np.abs(x).sum() / abs(x.astype(np.float64).sum())))   # a sum's terms may cancel
    assert_close(s, np.full((1, 64), x.astype(np.float64).sum()), "f32", tol=tolerance("f32") * cond)
    assert_close(c, x.astype(np.float64).max(axis=0)[None], "f32")
