"""The codegens' algebraic rewrites (tiles/rewrites.py): where they apply, where they must not, and the rewritten
kernels executed on the CPU engines against float64. CUDA's sm_90a takes them (its code runs only on a GPU); here
they are forced onto sm_80's source, which cuda-emu runs, so the header functions they call are checked. HIP takes
scaled_exp2 on both targets, and hip-emu runs it as generated."""
import dataclasses
import math

import numpy as np
import pytest

import tiles as tl
from tiles import ir
from tiles.backend import check_args
from tiles.dsl import TileError
from tiles.kernels.attention import attention_fwd, reference
from tiles.testing import assert_close, random_array


def _attention_args(n, d, causal=False, scale=None):
    q, k, v = (random_array((1, 2, n, d), "bf16") for _ in range(3))
    o = np.full(q.shape, np.nan, q.dtype)
    lse = np.full((1, 2, n), np.nan, np.float32)
    return [o, lse, q, k, v, 1 / math.sqrt(d) if scale is None else scale]


@pytest.mark.parametrize("d, causal", [(64, False), (128, True)])
def test_attention_rewritten_on_cuda_emu(d, causal):
    from tiles.backends.cuda import codegen
    args = _attention_args(150, d, causal)
    assert "tc::row_sum(l, s, l);" in codegen.generate_for(attention_fwd.trace(args, "sm_80", D=d, causal=causal),
                                                           "sm_80").source   # sm_80's own source stays as it was
    _rewritten_on_cuda_emu(attention_fwd, args, ("row_max_scaled", "exp2_scaled_sub_row", "row_sum_partial",
                                                 "row_sum_lanes", "mul_row_unless_ones"), D=d, causal=causal)
    ref_o, ref_lse = reference(*args[2:5], causal=causal)
    assert_close(args[0], ref_o, "bf16", what="O")
    assert_close(args[1], ref_lse, "f32", tol=1e-4, what="LSE")


def test_attention_skips_the_rescale_where_every_max_held_on_cuda_emu():
    """Key 0 scores highest in every row, so from the second block on every correction is exactly 1 and every warp
    skips O's rescale (tc::mul_row_unless_ones); the random keys of the test above take the multiply."""
    args = _attention_args(200, 64)
    q, k = args[2], args[3]
    q[:] = np.abs(q) + 0.5
    k[:, :, 0, :] = 3.0
    _rewritten_on_cuda_emu(attention_fwd, args, ("mul_row_unless_ones",), D=64)
    ref_o, ref_lse = reference(*args[2:5])
    assert_close(args[0], ref_o, "bf16", what="O")
    assert_close(args[1], ref_lse, "f32", tol=1e-4, what="LSE")


def test_only_a_running_max_correction_is_skipped_when_one():
    """A rescale by any other vector keeps its multiply (skipping would be exact, but rarely taken)."""
    from tiles import rewrites

    @tl.kernel
    def rescale(Y, X, V):
        tl.grid(1)
        x = tl.regs(tl.f32, 16, 64)
        v = tl.rvec(tl.f32, 16)
        m = tl.rvec(tl.f32, 16)
        tl.load(x, X, (0, 0))
        tl.load(v, V, (0,))
        tl.row_max(m, x, v)
        tl.sub(v, m, v)   # the operands the other way round: exp2(max - v) >= 1
        tl.exp2(v, v)
        tl.mul_row(x, x, v)
        tl.store(Y, x, (0, 0))

    a = np.zeros((16, 64), np.float32)
    k = rescale.trace([a, a, np.zeros(16, np.float32)], "sm_90a")
    assert rewrites.unit_factors(k.body) == set()
    k = attention_fwd.trace(_attention_args(256, 64), "sm_90a", D=64)
    assert len(rewrites.unit_factors(k.body)) == 1


@pytest.mark.parametrize("d, causal", [(64, False), (128, True)])
def test_attention_exponentials_by_polynomial_on_cuda_emu(d, causal):
    """exp2_poly=1: every exponential of the softmax by tc::exp2_poly (the FMA pipe's 2^x), -inf masks included."""
    args = _attention_args(150, d, causal)
    _rewritten_on_cuda_emu(attention_fwd, args, ("exp2_scaled_sub_row<1>",), schedule={"exp2_poly": 1}, D=d,
                           causal=causal)
    ref_o, ref_lse = reference(*args[2:5], causal=causal)
    assert_close(args[0], ref_o, "bf16", what="O")
    assert_close(args[1], ref_lse, "f32", tol=1e-4, what="LSE")


def test_exp2_poly_takes_one_pair_in_n():
    from tiles.backends.cuda import codegen
    args = _attention_args(256, 64)
    src = codegen.generate_for(attention_fwd.trace(args, "sm_90a", D=64, exp2_poly=8), "sm_90a").source
    assert "tc::exp2_scaled_sub_row<8>(s, s, " in src
    src = codegen.generate_for(attention_fwd.trace(args, "sm_80", D=64, exp2_poly=8), "sm_80").source
    assert "exp2_scaled_sub_row" not in src   # sm_80 takes no rewrites


def _rewritten_on_cuda_emu(kfn, args, calls, schedule=None, **consts):
    """kfn's sm_80 source with the rewrites (and `schedule`'s other fields) forced on, checked to call `calls` and
    run on the CPU engine."""
    from tiles.backends.cuda import codegen, emu, schedules
    from tiles.targets import target
    if emu.CudaEmu("sm_80").available() is not None:
        pytest.skip("no host C++ compiler")
    k = kfn.trace(args, "sm_80", **consts)
    src = codegen.generate(k, dataclasses.replace(schedules.plan(k, "sm_80", target("sm_80").shared_bytes),
                                                  rewrites=True, **(schedule or {}))).source
    for call in calls:
        assert f"tc::{call}(" in src
    emu.run_emu(k, args, source=src)


def test_softmax_and_rmsnorm_rewritten_on_cuda_emu():
    """softmax (LOG2E folded, its -inf bounds mask on the unscaled tile, the row sum per lane through a pipeline
    loop) and rmsnorm (the sum of squares per lane through a range loop), on rows that end inside a block."""
    from tiles.kernels.rmsnorm import rmsnorm_fwd
    from tiles.kernels.softmax import softmax_fwd
    x = random_array((37, 300), "f32")
    y = np.full(x.shape, np.nan, np.float32)
    _rewritten_on_cuda_emu(softmax_fwd, [y, x], ("row_max_scaled", "exp2_scaled_sub_row", "row_sum_lanes"))
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    assert_close(y, e / e.sum(-1, keepdims=True), "f32")
    w = random_array((300,), "f32")
    rstd = np.full((37,), np.nan, np.float32)
    _rewritten_on_cuda_emu(rmsnorm_fwd, [y, rstd, x, w, 1e-6], ("row_sum_partial", "row_sum_lanes"))
    ref = 1 / np.sqrt((x.astype(np.float64) ** 2).mean(-1) + 1e-6)
    assert_close(rstd, ref, "f32")
    assert_close(y, x * ref[:, None] * w, "f32")


def test_sm90a_attention_takes_both_rewrites():
    from tiles.backends.cuda import codegen
    args = _attention_args(256, 128)
    src = codegen.generate_for(attention_fwd.trace(args, "sm_90a", D=128), "sm_90a").source
    assert "tc::exp2_scaled_sub_row(s, s, (scale * 1.4426950408889634f), m_new);" in src
    assert "tc::row_max_scaled(m_new, s, (scale * 1.4426950408889634f), m);" in src
    assert src.index("tc::row_sum_lanes(l);") < src.index("tc::div_row(o, o, l);")


def test_a_scale_not_declared_positive_is_not_moved():
    """Without check_gt the multiply may be negative: max and the -inf fill do not commute with it."""
    from tiles.backends import cuda  # noqa: F401 - registers the CUDA backends
    from tiles import rewrites

    @tl.kernel
    def softmax_rows(Y, X, c, *, N=64):
        tl.grid(1)
        x = tl.regs(tl.f32, 16, N)
        m = tl.rvec(tl.f32, 16)
        tl.load(x, X, (0, 0))
        tl.mul(x, x, c)
        tl.row_max(m, x)
        tl.sub_row(x, x, m)
        tl.exp2(x, x)
        tl.store(Y, x, (0, 0))

    a = np.zeros((16, 64), np.float32)
    k = softmax_rows.trace([a, a, 0.5], "sm_90a")
    assert rewrites.scaled_exp2(k.body, k.checks) == {}
    positive = ir.Check(k.params[2], ir.Const(0.0, tl.f32), None, ">")
    roles = sorted(r for r, _ in rewrites.scaled_exp2(k.body, [positive]).values())
    assert roles == ["done", "drop", "exp", "max"]


def test_a_sum_read_in_the_loop_stays_whole():
    from tiles import rewrites

    @tl.kernel
    def sums(Y, X):
        tl.grid(1)
        x = tl.regs(tl.f32, 16, 64)
        s = tl.rvec(tl.f32, 16)
        t = tl.rvec(tl.f32, 16)
        tl.zero(s)
        for i in tl.range(4):
            tl.load(x, X, (i, 0))
            tl.row_sum(s, x, s)
            tl.exp(t, s)   # reads the running sum inside the loop: per-lane partials would be wrong here
        tl.store(Y, t, (0,))

    a = np.zeros((64, 64), np.float32)
    k = sums.trace([np.zeros(16, np.float32), a], "sm_90a")
    assert rewrites.partial_sums(k.body) == {}


def test_check_gt_refuses_a_scale_that_is_not_positive():
    args = _attention_args(16, 64, scale=0.0)
    k = attention_fwd.trace(args, "sm_90a", D=64)
    with pytest.raises(TileError, match="scale is 0.0 but must be greater than 0"):
        check_args(k, args)
    assert "check scale > 0" in str(k)
    check_args(k, _attention_args(16, 64))


def test_options_turn_the_rewrites_and_the_rings_off():
    from tiles.backends.cuda import codegen
    args = _attention_args(256, 64)
    src = lambda **o: codegen.generate_for(attention_fwd.trace(args, "sm_90a", D=64, **o), "sm_90a").source  # noqa: E731
    on, off = src(), src(rewrites=False, rings=False)
    assert "tc::exp2_scaled_sub_row(" in on and "tc::stage_release(k_ring, stage);" in on
    assert "tc::mul(s, s, (scale * 1.4426950408889634f));" in off and "tc::row_sum(l, s, l);" in off
    # one ring for K and V together (Q keeps its own: resident tiles, test_cuda_warp_specialized)
    assert "tc::consume<STAGES>(ring, cursor," in off and "k_ring" not in off and "v_ring" not in off


@pytest.mark.parametrize("target", ["gfx942", "gfx950"])
def test_hip_folds_the_scale_into_the_exponent(target):
    """HIP's attention and two-pass softmax take scaled_exp2 (the multiply gone, the row max scaled, one fused
    multiply-add an element), and rewrites=False writes every op as traced; both run on hip-emu against float64."""
    from tiles.backend import get
    from tiles.backends.hip import codegen
    from tiles.kernels.softmax import softmax_fwd
    engine = f"hip-emu:{target}"
    if get(engine).available() is not None:
        pytest.skip(get(engine).available())
    for causal in (False, True):
        for rewrites in (True, False):
            args = _attention_args(150, 64, causal)
            src = codegen.generate(attention_fwd.trace(args, target, D=64, causal=causal, rewrites=rewrites),
                                   target).source
            assert ("exp2_scaled_sub_row(s, s, " in src) == rewrites
            assert ("row_max_scaled(m_new, s, " in src) == rewrites
            assert ("mul(s, s, " in src) != rewrites
            attention_fwd(*args, backend=engine, D=64, causal=causal, rewrites=rewrites)
            ref_o, ref_lse = reference(*args[2:5], causal=causal)
            assert_close(args[0], ref_o, "bf16", what="O")
            assert_close(args[1], ref_lse, "f32", tol=1e-4, what="LSE")
    x = random_array((37, 300), "f32")
    y = np.full(x.shape, np.nan, np.float32)
    assert "exp2_scaled_sub_row(x, x, " in codegen.generate(softmax_fwd.trace([y, x], target), target).source
    softmax_fwd(y, x, backend=engine)
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    assert_close(y, e / e.sum(-1, keepdims=True), "f32")
