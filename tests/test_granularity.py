"""The verifier knows every target's tile granularity (issue 16): a configuration is refused with a TileError
before anything compiles, or it compiles in that target's own compiler (NVRTC for sm_80/sm_90a, clang for
gfx942/gfx950, the MSL host check for apple). Odd head dims, odd block sizes and dtypes, sampled with a fixed seed;
the marked-slow test drives many more."""
import random

import pytest

from tiles import TileError, dtypes, targets, toolchains
from tiles.backends.hip.codegen import mfma_k
from tiles.dsl import ArgSpec
from tiles.kernels.attention import attention_fwd
from tiles.kernels.gemm import gemm

TARGETS = tuple(targets.TARGETS)


def _gl(dtype, rank):
    return ArgSpec("gl", dtypes.of(dtype), rank)


def _attention(dtype, D, BM, BN):
    args = [_gl(dtype, 4), _gl("f32", 3), _gl(dtype, 4), _gl(dtype, 4), _gl(dtype, 4), ArgSpec("scalar", dtypes.f32)]
    return attention_fwd, args, dict(D=D, BM=BM, BN=BN)


def _gemm(dtype, BM, BN, BK):
    return gemm, [_gl("f32", 2), _gl(dtype, 2), _gl(dtype, 2)], dict(BM=BM, BN=BN, BK=BK)


def cases(n: int, seed: int):
    """n configurations: attention head dims in steps of 8 up to 256, block sizes off the shipped ones."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        dtype = rng.choice(("bf16", "f16", "fp8e4m3"))
        if rng.random() < 0.5:
            out.append(("attention_fwd", dtype, _attention(dtype, rng.randrange(8, 257, 8), rng.choice((32, 64, 128)),
                                                           rng.choice((16, 32, 48, 64)))))
        else:
            out.append(("gemm", dtype, _gemm(dtype, rng.choice((16, 32, 48, 64, 96, 128, 256)),
                                             rng.choice((16, 32, 48, 64, 80, 128, 256)),
                                             rng.choice((8, 16, 24, 32, 48, 64, 80, 128)))))
    return out


def refused_or_compiles(kfn, args, consts, target):
    """'refused' or 'compiles'; anything else (a compiler error, a crash in a code generator) fails the test."""
    why = toolchains.cannot_compile(target)
    if why and targets.target(target).backend != "metal":   # the MSL host check runs everywhere
        pytest.skip(why)
    try:
        kfn.trace(args, target, **consts)
    except TileError:
        return "refused"
    try:
        toolchains.static(kfn, args, target, **consts)
    except TileError:
        return "refused"   # a backend's own planning rule (workers, shared memory), still before compiling
    return "compiles"


def test_attention_head_dim_80_on_gfx950_is_refused_before_compiling():
    """Issue 16: D = 80 failed inside g++/clang (static assertion in tiles_hip/mma.hpp)."""
    kfn, args, consts = _attention("bf16", 80, 128, 64)
    with pytest.raises(TileError) as e:
        kfn.trace(args, "gfx950", **consts)
    msg = str(e.value)
    assert "K = 80 of q (st<bf16, 128x80>) and k (st<bf16, 64x80>)" in msg
    assert "mfma_f32_16x16x32_bf16 steps K by 32" in msg and "attention.py" in msg
    kfn.trace(args, "gfx942", **consts)   # 16x16x16 there: fits


def test_fp8_gemm_with_k16_on_sm90a_compiles():
    """The planner crashed (StopIteration): an fp8 tile of 16 columns has 16-byte rows, no TMA swizzle mode; it
    now takes the warp schedule (fp8 as f16 on mma.sync)."""
    kfn, args, consts = _gemm("fp8e4m3", 128, 128, 16)
    assert refused_or_compiles(kfn, args, consts, "sm_90a") == "compiles"


def test_fp8_register_A_on_cuda_is_refused():
    """attention_fwd in fp8 on sm_90a: P (fp8 registers) @ V failed a static assertion in tiles_cuda/mma.cuh."""
    kfn, args, consts = _attention("fp8e4m3", 64, 64, 32)
    with pytest.raises(TileError, match=r"on sm_90a an A operand in registers must be bf16/f16, p is rt<fp8e4m3"):
        kfn.trace(args, "sm_90a", **consts)


@pytest.mark.parametrize("target", ["gfx942", "gfx950"])
def test_mma_step_is_the_hip_backends_mfma_k(target):
    """The granularity data and the HIP code generator agree on the K each dtype's MFMA takes (16-row fragments)."""
    t = targets.target(target)
    for d in ("bf16", "f16", "fp8e4m3", "fp8e5m2"):
        atom = t.mma_atom(d)
        assert (atom.m, atom.k) == (16, mfma_k(target, dtypes.of(d), 16)) and atom.in_dtypes == (d, d)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", cases(4, seed=16), ids=lambda c: f"{c[0]}-{c[1]}-{c[2][2]}")
def test_refused_or_compiles(target, case):
    refused_or_compiles(*case[2], target)


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", cases(40, seed=1616), ids=lambda c: f"{c[0]}-{c[1]}-{c[2][2]}")
def test_refused_or_compiles_many(target, case):
    refused_or_compiles(*case[2], target)
