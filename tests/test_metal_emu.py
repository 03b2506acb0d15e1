"""Metal-specific checks of the generated MSL on the CPU engine (metal-emu): the result does not depend on the
undocumented simdgroup_matrix lane map, a deleted barrier breaks a kernel, and the schedule's decisions."""
import dataclasses
import math

import numpy as np
from hypothesis import given, settings, strategies as st
import pytest

import tiles as tl
from tiles import TileError, dtypes
from tiles.backend import get
from tiles.backends.metal import codegen, lanemap, toolchain
from tiles.backends.metal.emulator import generated
from tiles.kernels.attention import attention_fwd
from tiles.kernels.gemm import gemm
from tiles.testing import assert_close, poisoned, random_array

EMU = get("metal-emu")
pytestmark = pytest.mark.skipif(EMU.available() is not None, reason=str(EMU.available()))


def up(x):
    return np.asarray(x).astype(np.float64)


def attention_case(rng, n=45, d=64, causal=True, dtype="f16"):
    q, k, v = (random_array((1, 2, n, d), dtype, rng) for _ in range(3))
    o, lse = poisoned(q.shape, dtype), poisoned(q.shape[:3], "f32")
    scale = 1 / math.sqrt(d)
    s = up(q) @ up(k).transpose(0, 1, 3, 2) * scale
    if causal:
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = p / p.sum(-1, keepdims=True) @ up(v)
    return [o, lse, q, k, v, scale], ref


OTHER_MAP = {"TILES_METAL_EMU_OTHER_LANE_MAP": None}   # metal_emu.h: another, equally valid lane map
LANE_MAP = {"TILES_METAL_LANE_MAP": None}               # tiles_metal: use targets.py's map, no scratch


@pytest.mark.parametrize("defines,right", [(OTHER_MAP, True), (LANE_MAP, True), ({**LANE_MAP, **OTHER_MAP}, False)],
                         ids=["scratch, other map", "lane map", "lane map, other map"])
def test_what_depends_on_the_lane_map(defines, right):
    """Attention (reductions, broadcasts, masks, conversions, edge blocks, both mma forms). By default nothing
    depends on Apple's undocumented lane order: another map in the shim gives the same numbers. With
    TILES_METAL_LANE_MAP the headers use targets.py's map instead of the scratch: right where the device has
    that map, wrong where it has another, which is why the runtime enables it only after lanemap.check."""
    args, ref = attention_case(np.random.default_rng(1))
    k = attention_fwd.trace(args, "apple", D=64, causal=True)
    EMU.run_source(generated(k), args, defines=defines)
    if right:
        assert_close(args[0], ref, "f16", what="O")
    else:
        assert not np.allclose(args[0].astype(np.float64), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("op", ["row_sum", "col_max", "add_col", "bounds_mask"])
def test_lane_map_mode_ops(op):
    """The ops whose lane arithmetic differs between the two modes, at ragged shapes, with targets.py's map."""
    x = random_array((37, 45), "f32")
    v = random_array((1, 64), "f32")
    y = poisoned((37, 64) if op in ("add_col", "bounds_mask") else (1, 64), "f32")
    args = [y, x, v]
    EMU.run_source(generated(lane_ops.trace(args, "apple", op=op)), args, defines=LANE_MAP)
    want = poisoned(y.shape, "f32")
    get("reference").launch(lane_ops, [want, x, v], op=op)
    assert_close(y, want, "f32")


@tl.kernel
def lane_ops(Y, X, V, *, op, BR=64, BC=64):
    tl.grid(1)
    x = tl.regs(tl.f32, BR, BC)
    tl.load(x, X, (0, 0))
    if op == "bounds_mask":
        tl.bounds_mask(x, x, X.rows - 3, X.cols - 5, 2.5)
        tl.store(Y, x, (0, 0))
        return
    v = tl.rvec(tl.f32, BR if op == "row_sum" else BC, axis="rows" if op == "row_sum" else "cols")
    if op == "add_col":
        tl.load(v, V, (0, 0))
        tl.add_col(x, x, v)
        tl.store(Y, x, (0, 0))
        return
    (tl.row_sum if op == "row_sum" else tl.col_max)(v, x)
    tl.store(Y, v, (0, 0))


def gemm_case(rng, m=70, n=60, kk=100):
    a, b = random_array((m, kk), "f16", rng), random_array((kk, n), "f16", rng)
    return [poisoned((m, n), "f32"), a, b], up(a) @ up(b)


@pytest.mark.parametrize("which", ["prologue", "end of step"])
def test_deleted_barrier_breaks_gemm(which):
    """Delete one barrier of the pipelined loop: the one that publishes the first tiles, or the one that ends a
    step (without it a simdgroup refills a copy another still reads). Some lane order then gives a wrong result,
    while the intact kernel is right for every order."""
    rng = np.random.default_rng(2)
    args, ref = gemm_case(rng)
    mk = generated(gemm.trace(args, "apple"))
    lines = mk.source.splitlines()
    barriers = [i for i, s in enumerate(lines) if s.strip().startswith(codegen.BARRIER)]
    assert len(barriers) == 2
    cut = barriers[0] if which == "prologue" else barriers[1]
    broken = dataclasses.replace(mk, source="\n".join(lines[:cut] + lines[cut + 1:]) + "\n")
    wrong = 0
    for seed in range(4):
        good = [poisoned(args[0].shape, "f32"), *args[1:]]
        EMU.run_source(mk, good, seed=seed)
        assert_close(good[0], ref, "f32")
        bad = [poisoned(args[0].shape, "f32"), *args[1:]]
        EMU.run_source(broken, bad, seed=seed)
        wrong += not np.allclose(bad[0], ref, rtol=1e-3, atol=1e-3)
    assert wrong > 0, "deleting the barrier went unnoticed for every lane order"


def test_bf16_gemm_needs_metal_31():
    args = [np.zeros((8, 8), np.float32), *(random_array((8, 8), "bf16") for _ in range(2))]
    mk = generated(gemm.trace(args, "apple"))
    assert mk.language == "3.1" and "Metal 3.1" in mk.source.splitlines()[0]


def test_fp8_is_refused_before_launch():
    a = random_array((16, 16), "fp8e4m3")
    with pytest.raises(TileError, match="apple does not support dtype fp8e4m3"):
        EMU.launch(gemm, [np.zeros((16, 16), np.float32), a, a])


def test_workers_follow_the_rows():
    """Simdgroups split rows in whole 8-row matrices: a 16-row block tile gets 2 simdgroups, not 4."""
    args = [np.zeros((20, 20), np.float32), random_array((20, 20), "f16"), random_array((20, 20), "f16")]
    mk = generated(gemm.trace(args, "apple", BM=16))
    assert mk.plan.workers == 2 and "rt<float, 8, 64> acc;" in mk.source
    EMU.run_source(mk, args)
    assert_close(args[0], up(args[1]) @ up(args[2]), "f32")


@pytest.mark.parametrize("d,stages", [(64, 2), (128, 1)])
def test_stages_fit_threadgroup_memory(d, stages):
    """Head dim 128 in half does not fit q plus double-buffered k and v in 32 KB: the loop falls back to one
    copy (two barriers per step) instead of failing."""
    args, _ = attention_case(np.random.default_rng(3), n=8, d=d)
    mk = generated(attention_fwd.trace(args, "apple", D=d))
    assert list(mk.plan.stages.values()) == [stages]
    assert mk.smem_bytes <= 32 * 1024


def test_too_much_threadgroup_memory_is_an_error():
    args = [np.zeros((8, 8), np.float32), random_array((8, 8), "f16"), random_array((8, 8), "f16")]
    with pytest.raises(TileError, match="threadgroup memory"):
        generated(gemm.trace(args, "apple", BM=128, BN=128, BK=64, stages=1))


def test_toolchain_reports_what_it_compiled():
    args, ref = gemm_case(np.random.default_rng(4), 30, 40, 50)
    mk = generated(gemm.trace(args, "apple"))
    report = toolchain.compile(mk)
    assert report.ok, report.log
    assert report.device_compile == toolchain.has_xcrun_metal()
    # what the runtime hands to newLibraryWithSource: one self-contained text that still computes the same
    flat = toolchain.amalgamate(mk.source)
    assert '#include "tiles_metal' not in flat and "simdgroup_multiply_accumulate" in flat
    EMU.run_source(dataclasses.replace(mk, source=flat), args)
    assert_close(args[0], ref, "f32")


def test_lane_map_check_kernel():
    """The check kernel a Mac runs against targets.py's (undocumented) apple map agrees with the engine, and
    notices a different map, which also shows that the test hook above really changes the map."""
    assert lanemap.check(EMU) is None
    assert "differs" in lanemap.check(EMU, defines={"TILES_METAL_EMU_OTHER_LANE_MAP": None})


@tl.kernel
def read_back(Y, H, X, *, BR=32, BC=32):
    """H <- X rounded to H's dtype, then Y <- H read back by the same block without a barrier."""
    br, bc = tl.grid(tl.cdiv(X.rows, BR), tl.cdiv(X.cols, BC))
    x = tl.regs(tl.f32, BR, BC)
    h = tl.regs(H.dtype, BR, BC)
    tl.load(x, X, (br, bc))
    tl.copy(h, x)
    tl.store(H, h, (br, bc))
    tl.load(x, H, (br, bc))
    tl.store(Y, x, (br, bc))


@pytest.mark.parametrize("m,n", [(64, 64), (37, 45)])
def test_a_block_reads_its_own_global_writes(m, n):
    """The lane that stores an element of a register tile to a global is the lane that loads it back, whole
    blocks or edges, whatever the two element types: reading back one's own writes needs no barrier (layernorm
    does it). The engine runs the lanes of a simdgroup in a new order each time."""
    x = random_array((m, n), "f32")
    for seed in range(3):
        y, h = poisoned((m, n), "f32"), poisoned((m, n), "bf16")
        args = [y, h, x]
        EMU.run_source(generated(read_back.trace(args, "apple")), args, seed=seed)
        assert_close(y, dtypes.bf16.round(up(x)), "bf16", tol=0.0)


@tl.kernel
def drop(Y, X, p, seed, offset, *, BR=32, BC=32):
    br, bc = tl.grid(tl.cdiv(X.rows, BR), tl.cdiv(X.cols, BC))
    x = tl.regs(tl.f32, BR, BC)
    tl.load(x, X, (br, bc))
    tl.dropout(x, x, p, seed, offset, br * BR, bc * BC)
    tl.store(Y, x, (br, bc))


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_drops_what_the_reference_drops(p):
    """The MSL Philox 4x32-10 gives the mask of tiles/philox.py, element for element."""
    x = random_array((45, 70), "f32")
    out = {}
    for name in ("reference", "metal-emu"):
        y = poisoned(x.shape, "f32")
        get(name).launch(drop, [y, x, p, 1234567, 89])
        out[name] = y
    kept = out["reference"] != 0
    assert 0.3 < kept.mean() / (1 - p) < 1.7
    np.testing.assert_array_equal(out["metal-emu"], out["reference"])


@settings(max_examples=4, deadline=None)
@given(m=st.integers(1, 90), n=st.integers(1, 90), k=st.integers(1, 130), workers=st.sampled_from([1, 2, 4]),
       stages=st.sampled_from([1, 2, 3]), trans_b=st.booleans())
def test_gemm_schedules(m, n, k, workers, stages, trans_b):
    """The pipelined loop with 1 (plain), 2 and 3 copies, and 1, 2 or 4 simdgroups, at ragged shapes."""
    a = random_array((m, k), "f16")
    b = random_array((n, k) if trans_b else (k, n), "f16")
    c = poisoned((m, n), "f32")
    EMU.launch(gemm, [c, a, b], trans_b=trans_b, BM=32, BN=32, BK=16, workers=workers, stages=stages)
    assert_close(c, up(a) @ (up(b).T if trans_b else up(b)), "f32")
