"""The generated HIP, executed on the CPU (hip-emu): focused checks beyond the shared kernel tests."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tiles as tl
from tiles.backends.hip import emu, launch
from tiles.emu.runner import LaunchError
from tiles import dtypes
from tiles.kernels.attention_bwd import attention_backward
from tiles.kernels.gemm import gemm
from tiles.testing import assert_close, poisoned, random_array
from test_kernel_attention_bwd import reference_attention_grads

TARGETS = ("gfx942", "gfx950")


# the lead's GEMM configuration (plain, 2 LDS buffers), and ones where each schedule runs
SCHEDULES = {"config": {}, "pingpong": dict(BM=128, BN=128, BK=32, schedule="pingpong"),
             "interleave": dict(BM=64, BN=128, BK=32, workers=4, schedule="interleave"),
             "plain3": dict(BM=64, BN=64, BK=32, workers=2, schedule="plain", stages=3),
             "plain4": dict(BM=64, BN=64, BK=32, workers=2, schedule="plain", stages=4)}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("schedule", ["config", "pingpong"])
def test_deleted_barrier_breaks_the_result(target, schedule):
    """Delete the barriers between the loop's head and the MFMAs, which publish the pipelined tile: lanes then
    read LDS that other waves have not filled yet (still the engine's NaN poison, or an older tile), and the
    result is wrong. The unedited text passes on the same inputs. (Ping-pong has two there: with the groups a
    barrier apart, the other group's share of a tile filled through registers is published by one or the other,
    and deleting one alone leaves a race the engine's fiber order does not expose.)"""
    a, b = random_array((96, 64), "bf16"), random_array((64, 80), "bf16")
    c = poisoned((96, 80), "f32")
    g = launch.generated(gemm.trace([c, a, b], target, **SCHEDULES[schedule]), target)
    if schedule != "config":
        assert f"schedule: {schedule} " in g.source
    ref = a.astype(np.float64) @ b.astype(np.float64)
    emu.run_emu(g, [c, a, b])
    assert_close(c, ref, "f32")
    lines = g.source.splitlines()
    loop = next(i for i, l in enumerate(lines) if l.strip().startswith("for (int k = 0"))
    mma = next(i for i in range(loop, len(lines)) if lines[i].strip().startswith("mma<"))
    barriers = ("arch::barrier();", "arch::lds_barrier();", "arch::meet();")
    gone = [i for i in range(loop, mma) if lines[i].strip().startswith(barriers)]
    assert gone
    broken = "\n".join(line for i, line in enumerate(lines) if i not in gone) + "\n"
    c2 = poisoned((96, 80), "f32")
    try:
        emu.run_emu(g, [c2, a, b], source=broken)
    except LaunchError as e:  # ping-pong: one barrier fewer in one loop and the groups no longer meet
        assert "deadlock" in str(e)
        return
    with pytest.raises(AssertionError):
        assert_close(c2, ref, "f32")


@settings(max_examples=3)
@given(m=st.integers(1, 150), n=st.integers(1, 150), k=st.integers(1, 100), trans_b=st.booleans(),
       target=st.sampled_from(TARGETS), schedule=st.sampled_from(["pingpong", "interleave", "plain3", "plain4"]))
def test_gemm_schedules(m, n, k, trans_b, target, schedule):
    """GEMM under each CDNA schedule (the ping-pong group offset, 3 LDS buffers; the 4-wave interleave; the plain
    pipeline 3 and 4 deep, whose loop carries the slot it fills S - 1 steps ahead)."""
    a = random_array((m, k), "bf16")
    b = random_array((n, k) if trans_b else (k, n), "bf16")
    c = poisoned((m, n), "f32")
    gemm(c, a, b, backend=f"hip-emu:{target}", trans_b=trans_b, **SCHEDULES[schedule])
    assert_close(c, a.astype(np.float64) @ (b.astype(np.float64).T if trans_b else b.astype(np.float64)), "f32")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("schedule", ["plain3", "plain4"])
def test_deep_plain_pipeline(target, schedule):
    """The plain pipeline 3 and 4 deep on fresh inputs, ragged in every dim (K over 10 steps: every slot wraps)."""
    m, n, k = 70, 66, 300
    a, b, c = random_array((m, k), "bf16"), random_array((k, n), "bf16"), poisoned((m, n), "f32")
    gemm(c, a, b, backend=f"hip-emu:{target}", **SCHEDULES[schedule])
    assert_close(c, a.astype(np.float64) @ b.astype(np.float64), "f32")


@settings(max_examples=3)
@given(m=st.integers(1, 150), n=st.integers(1, 150), k=st.integers(1, 300), trans_b=st.booleans(),
       target=st.sampled_from(TARGETS), dtype=st.sampled_from(["fp8e4m3", "fp8e5m2"]))
def test_gemm_fp8(m, n, k, trans_b, target, dtype):
    """fp8 GEMM: CDNA3 reads fp8 as FNUZ (the library rescales), CDNA4 runs the block-scaled 16x16x128 MFMA when
    the K tile allows (BK=128) — the engine models both encodings."""
    a = random_array((m, k), dtype)
    b = random_array((n, k) if trans_b else (k, n), dtype)
    # OCP -0 is NaN to CDNA3's matrix cores: in both operands (B also down its columns: the transposed fill)
    a.reshape(-1)[::7] = np.float32(-0.0)
    b.reshape(-1)[::5] = np.float32(-0.0)
    c = poisoned((m, n), "f32")
    gemm(c, a, b, backend=f"hip-emu:{target}", trans_b=trans_b, BM=128, BN=128, BK=128)
    assert_close(c, a.astype(np.float64) @ (b.astype(np.float64).T if trans_b else b.astype(np.float64)), "f32")


CONFIGS = {t: dict(workers=4) for t in TARGETS}


@tl.kernel(configs=CONFIGS)
def softmax_stats(Y, CS, X, *, BR=64, BC=32):
    """Row softmax of each BR x BC block (padding reads 0), its column sums, causal-masked."""
    br, bc = tl.grid(tl.cdiv(X.rows, BR), tl.cdiv(X.cols, BC))
    x = tl.regs(tl.f32, BR, BC)
    mx = tl.rvec(tl.f32, BR)
    sm = tl.rvec(tl.f32, BR)
    cs = tl.rvec(tl.f32, BC, axis="cols")
    tl.load(x, X, (br, bc))
    tl.row_max(mx, x)
    tl.sub_row(x, x, mx)
    tl.exp(x, x)
    tl.row_sum(sm, x)
    tl.div_row(x, x, sm)
    tl.col_sum(cs, x)
    tl.store(CS, cs, (br, bc))
    tl.causal_mask(x, x, br * BR, bc * BC, 0.0)
    tl.store(Y, x, (br, bc))


def _reference(x, br_, bc_):
    r, c = x.shape
    pr, pc = -(-r // br_) * br_, -(-c // bc_) * bc_
    xp = np.zeros((pr, pc))
    xp[:r, :c] = x
    y = np.zeros_like(xp)
    cs = np.zeros((pr // br_, pc))
    for i in range(0, pr, br_):
        for j in range(0, pc, bc_):
            blk = xp[i:i + br_, j:j + bc_]
            e = np.exp(blk - blk.max(1, keepdims=True))
            p = e / e.sum(1, keepdims=True)
            cs[i // br_, j:j + bc_] = p.sum(0)
            y[i:i + br_, j:j + bc_] = p
    rows, cols = np.indices(y.shape)
    y = np.where(cols <= rows, y, 0.0)
    return y[:r, :c], cs[:, :c]


@settings(max_examples=3)
@given(rows=st.integers(1, 130), cols=st.integers(1, 70), target=st.sampled_from(TARGETS))
def test_reductions_broadcasts_masks(rows, cols, target):
    """Row reductions (DPP/bpermute butterflies), column sums across waves (LDS + barriers), broadcasts and
    the causal mask, against float64."""
    x = random_array((rows, cols), "f32")
    y, cs = poisoned((rows, cols), "f32"), poisoned((-(-rows // 64), cols), "f32")
    softmax_stats(y, cs, x, backend=f"hip-emu:{target}")
    ref_y, ref_cs = _reference(x.astype(np.float64), 64, 32)
    assert_close(y, ref_y, "f32", what="Y")
    assert_close(cs, ref_cs, "f32", what="column sums")


@pytest.mark.parametrize("group,causal", [(1, False), (1, True), (2, False), (2, True)])
def test_attention_backward_d128_gfx942(group, causal):
    """Attention backward at head dim 128 under gfx942's configuration (V in registers, the interleave's 4
    waves, one LDS stage), MHA and GQA, causal and not, ragged query and key blocks, against float64. The
    shared property test draws D from {64, 128}; this pins the case whose registers were the tightest."""
    n, d = 80, 128
    n_kv = n if causal else 100
    q, do = (random_array((1, 2 * group, n, d), "bf16") for _ in range(2))
    k, v = (random_array((1, 2, n_kv, d), "bf16") for _ in range(2))
    scale = 1 / math.sqrt(d)
    o, lse, *_ = reference_attention_grads(q, k, v, do, causal, scale)
    o = dtypes.bf16.round(o).astype(q.dtype)
    _, _, ref_dq, ref_dk, ref_dv = reference_attention_grads(q, k, v, do, causal, scale, o)
    dq, dk, dv = attention_backward(q, k, v, o, lse.astype(np.float32), do, causal=causal, backend="hip-emu:gfx942")
    assert_close(dq, ref_dq, "bf16", what="dQ")
    assert_close(dk, ref_dk, "bf16", what="dK")
    assert_close(dv, ref_dv, "bf16", what="dV")


@tl.kernel
def masked_rows(Y, X, *, BR, BC, ROWS, COLS, TAIL):
    """Row sums of X over column blocks through a pipelined shared tile, each block masked in place by constant
    bounds and by the row's end: the peeled loop's count (codegen _clean_steps) from every kind of bound."""
    br = tl.grid(tl.cdiv(X.rows, BR))
    xs = tl.shared(X.dtype, BR, BC)
    x = tl.regs(tl.f32, BR, BC)
    s = tl.rvec(tl.f32, BR)
    tl.zero(s)
    for c in tl.pipeline(tl.cdiv(X.cols, BC)):
        tl.load(xs, X, (br, c))
        tl.load(x, xs)
        tl.bounds_mask(x, x, ROWS, COLS, 0.0)
        if TAIL:   # the row's end (the shared tile reads zeros past it either way)
            tl.bounds_mask(x, x, BR, X.cols - c * BC, 0.0)
        tl.row_sum(s, x, s)
    tl.store(Y, s, (br,))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("rows, cols, tail", [(64, 64, False), (64, 64, True), (64, 200, True), (5, 64, True),
                                             (5, 9, False)])
def test_peeled_masks(target, rows, cols, tail):
    """Constant bounds that keep the whole tile (none to count: every step peeled) or cut it (no prefix: no peel),
    with and without the row's end."""
    x = random_array((40, 300), "f32")
    y = poisoned((40,), "f32")
    masked_rows(y, x, backend=f"hip-emu:{target}", BR=64, BC=64, ROWS=rows, COLS=cols, TAIL=tail)
    i, j = np.indices(x.shape)
    want = np.where((i % 64 < rows) & (j % 64 < cols), x.astype(np.float64), 0.0).sum(1)
    assert_close(y, want, "f32")
