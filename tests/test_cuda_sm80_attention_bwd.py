"""Attention backward on sm_80 (the mma.sync warp schedule A100s get) compiles without spills or a stack frame:
its three kernels, D 64 and 128, causal or not, bf16 and f16, NVRTC and nvcc (GQA changes no generated line:
the group size is a runtime value). Before (NVRTC 13.0): the main kernel spilled 76-272 bytes at D 128 and the
preprocessing kernel 4 bytes at D 64 (docs/backends/cuda.md). ptxas takes nearly every register at D 128 (253-255)
whatever the live values need, so these are checked per compiler, not inferred."""
import functools

import numpy as np
import pytest

from tiles import targets
from tiles.backends.cuda import codegen, schedules, toolchain
from tiles.kernels import attention_bwd as ab
from tiles.testing import random_array

pytestmark = pytest.mark.skipif(toolchain.available("nvrtc") is not None, reason=str(toolchain.available("nvrtc")))


@functools.lru_cache(maxsize=None)
def build(kernel: str, d: int, dtype: str, compiler: str, causal: bool = False):
    x = random_array((1, 4, 128, d), dtype)
    f = lambda *s: np.zeros(s, np.float32)  # noqa: E731
    kfn, args, consts = {
        "pre": (ab.attention_bwd_pre, [f(1, 4, 128), f(1, 4, 128), f(1, 4, 128, d), x, x, f(1, 4, 128), 0.1],
                {}),
        "main": (ab.attention_bwd, [x, x, f(1, 4, 128, d), x, x, x, x, f(1, 4, 128), f(1, 4, 128), 0.1],
                 {"causal": causal}),
        "dq": (ab.attention_bwd_dq, [x, f(1, 4, 128, d)], {}),
    }[kernel]
    consts = {**consts, **kfn.shape_config("sm_80", args, dict(D=d, **consts))}   # what a launch runs
    k = kfn.trace(args, "sm_80", D=d, **consts)
    gen = codegen.generate_for(k, "sm_80")
    return gen, toolchain.compile(gen.source, "sm_80", compiler=compiler).resources[gen.name]


# every combination under NVRTC (what the runtime compiles with); nvcc where the margin is thinnest (D 128
# causal: 255 registers)
CASES = [("nvrtc", d, dt, c) for d in (64, 128) for dt in ("bf16", "f16") for c in (False, True)] + \
        [("nvcc", 128, dt, True) for dt in ("bf16", "f16")]


@pytest.mark.parametrize("compiler,d,dtype,causal", CASES)
def test_main_kernel_has_no_spills(compiler, d, dtype, causal):
    if toolchain.available(compiler):
        pytest.skip(toolchain.available(compiler))
    gen, r = build("main", d, dtype, compiler, causal)
    assert r.spills == 0 and r.stack_frame == 0, r
    # dQ's partial goes out from the mma a slice at a time (schedules.sliced_adds), never whole in registers
    assert "tc::atomic_add_mma<true, false, NUM_WARPS>(DQacc, ds_s, k, {" in gen.source
    assert " dq;" not in gen.source and "tc::atomic_add(DQacc" not in gen.source


def test_sliced_product_deals_rows_then_columns_to_the_warps():
    """sm_80's 32 query rows a step are two 16-row tiles for 4 warps: dQ's product splits its columns too, so the
    block keeps 4 warps (s and dS^T: 64 kv rows); a product whose row tiles neither divide nor are divided by the
    warps stays a register tile, and the warps drop to what every tile splits into (48 rows: 3). Not on wgmma."""
    x = random_array((1, 4, 128, 128), "bf16")
    f = lambda *s: np.zeros(s, np.float32)  # noqa: E731
    args = [x, x, f(1, 4, 128, 128), x, x, x, x, f(1, 4, 128), f(1, 4, 128), 0.1]
    smem = targets.target("sm_80").shared_bytes
    s = schedules.plan(ab.attention_bwd.trace(args, "sm_80", D=128), "sm_80", smem)
    assert (s.warps, s.sliced) == (4, ("dq",))
    s = schedules.plan(ab.attention_bwd.trace(args, "sm_80", D=128, BM=48, BN=48, workers=4), "sm_80", smem)
    assert (s.warps, s.sliced) == (3, ())
    assert schedules.plan(ab.attention_bwd.trace(args, "sm_90a", D=128), "sm_90a", 227 * 1024).sliced == ()


@pytest.mark.parametrize("compiler,d", [("nvrtc", 64), ("nvrtc", 128), ("nvcc", 64)])
def test_row_kernels_have_no_spills(compiler, d):
    if toolchain.available(compiler):
        pytest.skip(toolchain.available(compiler))
    for kernel in ("pre", "dq"):
        gen, r = build(kernel, d, "bf16", compiler)
        assert r.spills == 0 and r.stack_frame == 0, (kernel, r)
        # a cap of 168 registers (3 blocks an SM): without it ptxas kept pre at 80 registers and spilled (D 64)
        assert "__maxnreg__(168)" in gen.source
