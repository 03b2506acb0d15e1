"""Regression tests for what `tiles fuzz` found (issue 16), each named after its finding, on every backend."""
import numpy as np
import pytest

import tiles as tl
from tiles import targets, toolchains
from tiles.dsl import ArgSpec
from tiles.testing import assert_close, poisoned, random_array, run

R, C = 16, 64


@tl.kernel
def int_scalar_maps(Y, X):
    br, bc = tl.grid(tl.cdiv(X.rows, R), tl.cdiv(X.cols, C))
    x = tl.regs(tl.f32, R, C)
    y = tl.regs(tl.f32, R, C)
    tl.load(x, X, (br, bc))
    tl.max(y, x, 0)       # integer scalars: the HIP header's scalar overload took only float
    tl.mul(y, y, -3)
    tl.store(Y, y, (0, br, bc))
    tl.pow(y, x, 2)
    tl.store(Y, y, (1, br, bc))


def test_hip_binary_map_with_an_int_scalar(backend):
    """fuzz seed 2: `tl.max(t, t, 2)` failed to compile for gfx942/gfx950 ('int' is not a class)."""
    x = random_array((40, 70), "f32")
    y = poisoned((2, 40, 70), "f32")
    run(backend, int_scalar_maps, y, x)
    assert_close(y[0], np.maximum(x.astype(np.float64), 0) * -3, "f32")
    assert_close(y[1], x.astype(np.float64) ** 2, "f32")


@tl.kernel
def reads_an_unwritten_mask(Y, X, *, where_first):
    br, bc = tl.grid(tl.cdiv(X.rows, R), tl.cdiv(X.cols, C))
    x = tl.regs(tl.f32, R, C)
    mask = tl.regs(tl.f32, R, C, name="mask")
    tl.load(x, X, (br, bc))
    if not where_first:
        tl.gt(mask, x, 0.0)
    tl.where(x, mask, x, 0.0)
    tl.store(Y, x, (br, bc))


def test_a_tile_read_before_anything_wrote_it(backend):
    """fuzz seed 5002: a `where` whose mask no op wrote gave "infinities differ" on every CPU engine against the
    reference (each read what its registers held); the verifier now refuses the read, naming the tile and the
    line, and the same kernel with the mask written runs everywhere."""
    x = random_array((20, 70), "f32")
    with pytest.raises(tl.TileError, match=r"test_fuzz_findings.py:\d+: tl.where\(x, mask, x, 0.0\)\n.*"
                                           r"where: reads mask \(rt<f32, 16x64, row>\) before any operation "
                                           r"writes it"):
        run(backend, reads_an_unwritten_mask, poisoned((20, 70), "f32"), x, where_first=True)
    y = poisoned((20, 70), "f32")
    run(backend, reads_an_unwritten_mask, y, x, where_first=False)
    assert_close(y, np.maximum(x.astype(np.float64), 0), "f32")


def _named(name):
    """A kernel called `name` whose body calls the math library's exp (so a kernel that took exp's symbol would
    call itself) and keeps the libc name `select` among its tiles."""
    def body(Y, X, *, R=16, C=64):
        br, bc = tl.grid(tl.cdiv(X.rows, R), tl.cdiv(X.cols, C))
        select = tl.regs(tl.f32, R, C, name="select")
        tl.load(select, X, (br, bc))
        tl.exp(select, select)
        tl.store(Y, select, (br, bc))
    body.__name__ = body.__qualname__ = name
    return tl.kernel(body)


LIBC_NAMED = [_named(n) for n in ("select", "exp", "main", "printf")]


def test_kernel_named_like_a_libc_function(backend):
    """The kernel named `select` did not compile in hip-emu (and cuda-emu: `select` of <sys/select.h>); one named
    `exp` compiled there and silently left its output unwritten; `main` failed on every CPU engine. Generated
    symbols now carry a prefix nothing else uses (tiles.cgen.symbol)."""
    x = random_array((20, 70), "f32")
    for kfn in LIBC_NAMED:
        y = poisoned((20, 70), "f32")
        run(backend, kfn, y, x)
        assert_close(y, np.exp(x.astype(np.float64)), "f32")


@pytest.mark.parametrize("target", tuple(targets.TARGETS))
def test_kernel_named_like_a_libc_function_compiles_for_every_target(target):
    """The same kernels through each target's own compiler (NVRTC, clang for gfx9, the MSL host check)."""
    why = toolchains.cannot_compile(target)
    if why and targets.target(target).backend != "metal":   # the MSL host check runs everywhere
        pytest.skip(why)
    args = [ArgSpec("gl", tl.f32, 2), ArgSpec("gl", tl.f32, 2)]
    for kfn in LIBC_NAMED:
        toolchains.static(kfn, args, target)


@tl.kernel
def int_tile(Y, X, *, R=16, C=64):
    br, bc = tl.grid(tl.cdiv(X.rows, R), tl.cdiv(X.cols, C))
    x = tl.regs(tl.i32, R, C)
    tl.load(x, X, (br, bc))
    tl.add(x, x, 3)
    tl.store(Y, x, (br, bc))


def test_i32_register_tile_on_apple(backend):
    """Found probing the vocabulary the fuzzer does not draw: an i32 register tile passed the verifier for apple and
    failed in metal-emu (no simdgroup matrix of int: MSL has float, half and bfloat ones); Target.reg_dtypes now
    refuses it before anything compiles, and the other backends run it."""
    x = np.arange(20 * 70, dtype=np.int32).reshape(20, 70) - 700
    y = poisoned((20, 70), "i32")
    if backend.target == "apple":
        with pytest.raises(tl.TileError, match="register tiles on apple are bf16/f16/f32"):
            run(backend, int_tile, y, x)
        return
    run(backend, int_tile, y, x)
    assert np.array_equal(y, x + 3)


# ---------------------------------------------------------------- scripts/fuzz_configs.py (configurations)

GEMM_ARGS = [ArgSpec("gl", tl.f32, 2), ArgSpec("gl", tl.bf16, 2), ArgSpec("gl", tl.bf16, 2)]


def _compiles_here(target):
    why = toolchains.cannot_compile(target)
    if why and targets.target(target).backend != "metal":
        pytest.skip(why)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_cuda_warp_schedule_pipeline_of_one_stage(target):
    """fuzz_configs: `tiles inspect gemm --targets sm_80 --set BM=64 BN=64 BK=32 stages=1 workers=2` (and any kernel
    with a pipelined loop on the warp schedule, sm_90a's included) passed the planner and failed in NVRTC on
    tiles_cuda/pipeline.cuh's static_assert "a pipeline needs at least two stages"; attention_bwd's tune space has
    stages=1 on sm_80. One stage is now a loop that loads, waits and computes in turn."""
    _compiles_here(target)
    from tiles.kernels.gemm import gemm
    cfg = dict(BM=64, BN=64, BK=32, stages=1, workers=2, schedule="warp")
    assert "constexpr int STAGES = 1;" in toolchains.emit(gemm, GEMM_ARGS, target, "source", **cfg)
    st = toolchains.static(gemm, GEMM_ARGS, target, sass=False, **cfg)
    assert st.spill_bytes == 0, st.summary()


def test_cuda_pipeline_of_one_stage_runs():
    """The one-stage loop's results on cuda-emu:sm_80 (the generated CUDA executed on the CPU), K over 7 steps."""
    from tiles import backend as registry
    from tiles.kernels.gemm import gemm
    b = registry.resolve("cuda-emu:sm_80")
    if b.available() is not None:
        pytest.skip(b.available())
    a, bb = random_array((40, 100), "bf16"), random_array((100, 50), "bf16")
    c = poisoned((40, 50), "f32")
    run(b, gemm, c, a, bb, BM=32, BN=32, BK=16, stages=1, workers=2)
    assert_close(c, a.astype(np.float64) @ bb.astype(np.float64), "f32")


@pytest.mark.parametrize("target", ["gfx942", "gfx950"])
def test_hip_mfma32_register_tile_of_partial_fragments_is_refused(target):
    """fuzz_configs: `tiles inspect softmax --targets gfx942 --shape 33x1000,f16 --set BR=192 BC=48 workers=1 mfma=32`
    (and layernorm's 16-column tiles with mfma=32) passed the verifier and the plan, which checked rows only, then
    failed in clang: static_assert "register tile is not a whole number of fragments" (48 % acc<32>::FC). The
    backend now refuses it naming the tile, its columns and the 32-column fragment; mfma=16 still generates. Since
    softmax's tiles meet no MMA they take row_runs (16-column fragments at 48 columns) unless runs=False: that
    compiles with clang, and runs=False is what is refused."""
    from tiles.backends.hip import codegen
    from tiles.kernels.softmax import softmax_fwd
    args = [ArgSpec("gl", tl.f16, 2), ArgSpec("gl", tl.f16, 2)]
    k = softmax_fwd.trace(args, target, BR=64, BC=48, workers=1, mfma=32, runs=False)
    with pytest.raises(tl.TileError, match=r"x \(rt<f32, 64x48, row>\): its 48 columns must be a multiple of the "
                                           r"32-column fragment of the 32x32 MFMA on gfx9\d\d \(mfma=32\)"):
        codegen.generate(k, target)
    codegen.generate(softmax_fwd.trace(args, target, BR=64, BC=48, workers=1, mfma=16), target)
    codegen.generate(softmax_fwd.trace(args, target, BR=64, BC=64, workers=1, mfma=32), target)
    x = random_array((33, 1000), "f16")
    asm = toolchains.emit(softmax_fwd, [poisoned(x.shape, "f16"), x], target, "asm", BR=64, BC=48, workers=1, mfma=32)
    assert "v_exp_f32" in asm


def test_hip_loop_report_of_a_loop_deeper_than_the_recursion_limit():
    """fuzz_configs: `tiles inspect layernorm --targets gfx942 --shape 256x16384 --set RPB=16 workers=1` compiled,
    then the main-loop report crashed with RecursionError (loopreport._best walked the loop's blocks recursively, and
    that loop's per-lane edge code is a chain of more blocks than Python's recursion limit). The same shape here: a
    loop whose one branch leads into a chain of 3000 blocks."""
    from tiles.backends.hip import loopreport as lr
    n = 3000
    lines = ["\t.type\tk,@function", "k:", "\ts_mov_b32 s0, 0",
             ".LBB0_1:  ; =>This Inner Loop Header: Depth=1", "\ts_cmp_eq_u32 s0, 0", f"\ts_cbranch_scc1 .LBB0_{n}"]
    for i in range(2, n):
        lines += [f".LBB0_{i}:  ;   in Loop: Header=BB0_1 Depth=1", "\tv_mfma_f32_16x16x16_bf16 a[0:3], v[0:1], v[2:3], a[0:3]"]
    lines += [f".LBB0_{n}:  ;   in Loop: Header=BB0_1 Depth=1", "\ts_add_u32 s0, s0, 1", "\ts_cbranch_scc1 .LBB0_1",
              "; %bb.9999:", "\ts_endpgm", ".Lfunc_end0:"]
    r = lr.analyse("\n".join(lines) + "\n", "gfx942")
    assert r is not None and r.mfma == n - 2


@pytest.mark.parametrize("target", ["gfx942", "gfx950"])
def test_hip_wave_grid_of_an_accumulator_no_split_fits(target):
    """fuzz_configs: `tiles inspect bmm --targets gfx950 --set BM=256 BN=48 BK=64 SPLIT=2 workers=8 mfma=32` crashed in
    the HIP code generator (ValueError: min() arg is an empty sequence, _wave_grid: no split of 8 waves over a 256x48
    accumulator makes whole 32x32 fragments); it is now refused like any tile of partial fragments."""
    from tiles.backends.hip import codegen
    from tiles.kernels.gemm import gemm
    k = gemm.trace(GEMM_ARGS, target, BM=256, BN=48, BK=64, workers=8, mfma=32)
    with pytest.raises(tl.TileError, match=r"acc \(rt<f32, 256x48, row>\): its 48 columns must be a multiple of the "
                                           r"32-column fragment"):
        codegen.generate(k, target)


def test_sm90a_wgmma_accumulator_past_the_launch_registers_is_refused():
    """fuzz_configs: `tiles inspect bmm --targets sm_90a --shape 2x33x48x24,bt --set BM=256 SPLIT=8 trans_b=True stages=3
    workers=6` (four consumer warpgroups: 640 threads start with 96 registers), attention BM=256 BN=256, and gemm_fp8
    BN=64 workers=7 blocks_per_sm=3 (56 registers) passed the planner, then ptxas failed: C7602 "Insufficient
    registers (N) to compile instruction ... register target of T": a wgmma needs its accumulators (64 rows of the
    tile over a warpgroup: BN / 2 a thread) and 26 more (T = 58, 90, 122, 154 for n64, n128, n192, n256; gemm's
    tune space had 128x128 at two blocks an SM, 80, which never compiled). The planner now refuses those, naming the
    tile and both counts; mma.sync widths (BN
    176 of bf16: not 128-byte rows) and the shipped tiles still generate."""
    from tiles.kernels.gemm import gemm
    with pytest.raises(tl.TileError, match=r"acc \(rt<f32, 192x256, row>\) takes 128 registers a thread in one wgmma, "
                                           r"which with the 26 it needs beside them is more than the 128 a thread starts "
                                           r"with \(3 consumer warpgroup\(s\) and the producer\)"):
        toolchains.emit(gemm, GEMM_ARGS, "sm_90a", "source", BM=192, BN=256, BK=64, stages=3, workers=3)
    with pytest.raises(tl.TileError, match=r"takes 32 registers a thread in one wgmma, which with the 26 it needs beside "
                                           r"them is more than the 56 a thread starts with \(2 consumer warpgroup\(s\) "
                                           r"and the producer, 3 blocks an SM\)"):
        toolchains.emit(gemm, GEMM_ARGS, "sm_90a", "source", BM=128, BN=64, BK=64, stages=2, workers=2, blocks_per_sm=3)
    toolchains.emit(gemm, GEMM_ARGS, "sm_90a", "source", BM=192, BN=176, BK=64, stages=3, workers=3)
    toolchains.emit(gemm, GEMM_ARGS, "sm_90a", "source", BM=128, BN=256, BK=64, stages=4, workers=2)


def test_sm90a_four_consumer_warpgroups_ask_what_their_pool_holds(monkeypatch):
    """docs/examples.md's bmm at 64x1024x1024x512 with BM=256 and four consumer warpgroups (BN=64 or 128, 640 threads,
    persistent or not) passed every offline check and hung on the H200 (12-04, scripts/probe_hang.py: each launch
    alone in a child, killed after 20 s), stalling the tune=True search that timed it; so did gemm's 128x64 tiles over
    two warpgroups at two blocks an SM. Their consumers asked setmaxnreg for 120 (112) registers, counted from the
    register file, where the CTA's pool (96 (80) at launch a thread, the producer's 72 (56) given back) holds 112
    (104). Counted from the pool, all of them ran on the H200 against float64 (133 us for the first); more than
    four consumer warpgroups never ran and are refused."""
    from tiles.backends.cuda import schedules
    from tiles.kernels.gemm import gemm
    for bn in (64, 128):
        src = toolchains.emit(gemm, GEMM_ARGS, "sm_90a", "source", BM=256, BN=bn, BK=64, stages=3, workers=4)
        assert "CONSUMER_REGS = 112;" in src
    src = toolchains.emit(gemm, GEMM_ARGS, "sm_90a", "source", BM=128, BN=64, BK=64, stages=3, workers=2,
                          blocks_per_sm=2)
    assert "CONSUMER_REGS = 104;" in src
    # the cap (gemm's tiles cannot ask five: TMA boxes stop at 256 rows), checked below four here
    monkeypatch.setattr(schedules, "MAX_CONSUMER_GROUPS", 3)
    with pytest.raises(tl.TileError, match=r"takes 1 to 3 consumer warpgroups, this configuration asks 4 "
                                           r"\(workers=4\), more than ever ran on the H200"):
        toolchains.emit(gemm, GEMM_ARGS, "sm_90a", "source", BM=256, BN=64, BK=64, stages=3, workers=4)
    toolchains.emit(gemm, GEMM_ARGS, "sm_90a", "source", BM=256, BN=64, BK=64, stages=3, workers=16, schedule="warp")


def test_sm90a_wgmma_tiles_over_max_registers_are_refused():
    """fuzz_configs: `tiles inspect attention --targets sm_90a --shape 1x2x96x128,causal --set BM=64 BN=192 workers=3
    schedule=warp max_registers=128` passed the planner, then ptxas failed: C7600 "Register allocation failed with
    register count of '128'" (s, p and o take 208 registers a thread, and wgmma's accumulators do not spill); BN=128
    (160) failed the same way. The planner now refuses it naming the tiles and the cap; 128 of 128 (D 64) compiles,
    and so does wgmma=False (mma.sync, which spills)."""
    from tiles.kernels.attention import attention_fwd
    args = [ArgSpec("gl", tl.bf16, 4), ArgSpec("gl", tl.f32, 3)] + [ArgSpec("gl", tl.bf16, 4)] * 3 + \
        [ArgSpec("scalar", tl.f32)]
    cfg = dict(BM=64, BN=128, workers=1, schedule="warp", max_registers=128, causal=True)
    with pytest.raises(tl.TileError, match=r"attention_fwd: its register tiles take 160 registers a thread over 4 warps "
                                           r"\(s 64, p 32, o 64\), more than max_registers=128"):
        toolchains.emit(attention_fwd, args, "sm_90a", "source", D=128, **cfg)
    toolchains.emit(attention_fwd, args, "sm_90a", "source", D=64, **cfg)
    toolchains.emit(attention_fwd, args, "sm_90a", "source", D=128, wgmma=False, **cfg)
