"""The CPU SIMT engine (tiles/emu): hand-written kernels against simt.h only, no vendor shim."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tiles import dtypes
from tiles.emu import CompileError, LaunchError, Param, compile

SETTINGS = settings(max_examples=8, deadline=None)

REDUCE = r"""
// Sum of x over each block, through shared memory: the classic tree with a barrier per level.
void block_sum(const float* x, float* out, int n) {
    float* s = reinterpret_cast<float*>(emu::shared_mem());
    const unsigned t = emu::thread_linear(), nt = emu::block_dim().x;
    const unsigned i = emu::block_idx().x * nt + t;
    s[t] = i < unsigned(n) ? x[i] : 0.0f;
    emu::barrier();
    for (unsigned stride = nt / 2; stride > 0; stride /= 2) {
        if (t < stride) s[t] += s[t + stride];
        emu::barrier();
    }
    if (t == 0) out[emu::block_idx().x] = s[0];
}
"""
REDUCE_PARAMS = [Param("const float*", "x"), Param("float*", "out"), Param("int", "n")]


@pytest.fixture(scope="module")
def reduce_mod():
    return compile(REDUCE, kernel="block_sum", params=REDUCE_PARAMS, wave=64)


def _block_sums(x, nt, blocks):
    xp = np.zeros(blocks * nt)
    xp[:len(x)] = x
    return xp.reshape(blocks, nt).sum(axis=1)


@SETTINGS
@given(log_nt=st.integers(5, 10), n=st.integers(1, 3000), seed=st.integers(0, 2**64 - 1))
def test_block_reduction(reduce_mod, log_nt, n, seed):
    nt = 2 ** log_nt
    blocks = -(-n // nt)
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    out = np.full(blocks, np.nan, np.float32)
    reduce_mod.launch(blocks, nt, [x, out, n], shared_bytes=4 * nt, seed=seed)
    want = _block_sums(x.astype(np.float64), nt, blocks)
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-6 * log_nt * np.abs(x).sum())


def test_missing_barrier_gives_wrong_results(reduce_mod):
    """The same kernel with the barrier after the shared-memory store deleted goes wrong."""
    first = REDUCE.index("emu::barrier();")
    broken_src = REDUCE[:first] + REDUCE[first + len("emu::barrier();"):]
    broken = compile(broken_src, kernel="block_sum", params=REDUCE_PARAMS, wave=64)
    nt, blocks = 256, 4
    x = np.random.default_rng(0).standard_normal(nt * blocks).astype(np.float32)
    want = _block_sums(x.astype(np.float64), nt, blocks)
    wrong = 0
    for seed in range(4):
        for mod, ok in ((reduce_mod, True), (broken, False)):
            out = np.full(blocks, np.nan, np.float32)
            mod.launch(blocks, nt, [x, out, nt * blocks], shared_bytes=4 * nt, seed=seed)
            good = np.allclose(out, want, atol=1e-3)
            assert good or not ok
            wrong += not good
    assert wrong == 4, "the unsynchronised kernel passed for some seed"


SHUFFLE = r"""
// Butterfly sum over each wave through wave_exchange (what __shfl_xor / simd_shuffle_xor build on),
// then a broadcast from lane `src` of every wave.
void wave_sum(const float* x, float* sums, float* bcast, unsigned src) {
    const unsigned i = emu::block_idx().x * emu::block_dim().x + emu::thread_linear();
    float v = x[i];
    for (unsigned off = emu::wave_size() / 2; off > 0; off /= 2) v += emu::wave_exchange(v)[emu::lane_id() ^ off];
    sums[i] = v;
    bcast[i] = emu::wave_exchange(x[i])[src];
}
"""


@pytest.mark.parametrize("wave", [32, 64])
@SETTINGS
@given(waves=st.integers(1, 8), blocks=st.integers(1, 3), seed=st.integers(0, 2**32))
def test_wave_shuffle_reduction(wave, waves, blocks, seed):
    mod = compile(SHUFFLE, kernel="wave_sum", wave=wave, params=[
        Param("const float*", "x"), Param("float*", "sums"), Param("float*", "bcast"), Param("unsigned", "src")])
    rng = np.random.default_rng(seed)
    n = wave * waves * blocks
    x = rng.standard_normal(n).astype(np.float32)
    sums, bcast = np.full(n, np.nan, np.float32), np.full(n, np.nan, np.float32)
    src = int(rng.integers(wave))
    mod.launch(blocks, wave * waves, [x, sums, bcast, src], seed=seed)
    per_wave = x.astype(np.float64).reshape(-1, wave)
    np.testing.assert_allclose(sums.reshape(-1, wave), np.repeat(per_wave.sum(1, keepdims=True), wave, 1),
                               atol=1e-5 * np.abs(per_wave).sum(1, keepdims=True).max())
    assert np.array_equal(bcast.reshape(-1, wave), np.repeat(per_wave[:, src:src + 1], wave, 1).astype(np.float32))


GEMM = r"""
// C = A @ B with row-major f32 arrays holding values of the atom's input dtype. A block computes a
// BM x BN tile: it stages BM x BK of A and BK x BN of B in shared memory, and its waves take the
// atom-sized tiles of C round-robin, reading their registers through the atom's lane maps.
constexpr int MAX_TILES = 16, MAX_REGS = 32;

void gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    const emu::AtomTable& t = ATOM;
    float* sa = reinterpret_cast<float*>(emu::shared_mem());
    float* sb = sa + BM * BK;
    const int nt = emu::block_dim().x, tid = emu::thread_linear();
    const int lane = emu::lane_id(), wave = emu::wave_id(), nwaves = nt / emu::wave_size();
    const int tiles_n = BN / t.n, tiles = (BM / t.m) * tiles_n;
    const int row0 = emu::block_idx().y * BM, col0 = emu::block_idx().x * BN;
    float acc[MAX_TILES][MAX_REGS] = {};
    float a[MAX_REGS], b[MAX_REGS];
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = tid; i < BM * BK; i += nt) {
            int r = row0 + i / BK, c = k0 + i % BK;
            sa[i] = r < M && c < K ? A[r * K + c] : 0.0f;
        }
        for (int i = tid; i < BK * BN; i += nt) {
            int r = k0 + i / BN, c = col0 + i % BN;
            sb[i] = r < K && c < N ? B[r * N + c] : 0.0f;
        }
        emu::barrier();
        for (int tile = wave, slot = 0; tile < tiles; tile += nwaves, slot++) {
            const int tm = tile / tiles_n * t.m, tn = tile % tiles_n * t.n;
            for (int kk = 0; kk < BK; kk += t.k) {
                for (int r = 0; r < t.regs_a; r++) {
                    const uint16_t* e = t.a + 2 * (lane * t.regs_a + r);
                    a[r] = sa[(tm + e[0]) * BK + kk + e[1]];
                }
                for (int r = 0; r < t.regs_b; r++) {
                    const uint16_t* e = t.b + 2 * (lane * t.regs_b + r);
                    b[r] = sb[(kk + e[0]) * BN + tn + e[1]];
                }
                emu::mma_atom(t, a, b, acc[slot], acc[slot]);
            }
        }
        emu::barrier();
    }
    for (int tile = wave, slot = 0; tile < tiles; tile += nwaves, slot++) {
        for (int r = 0; r < t.regs_c; r++) {
            const uint16_t* e = t.c + 2 * (lane * t.regs_c + r);
            int row = row0 + tile / tiles_n * t.m + e[0], col = col0 + tile % tiles_n * t.n + e[1];
            if (row < M && col < N) C[row * N + col] = acc[slot][r];
        }
    }
}
"""
GEMM_PARAMS = [Param("const float*", "A"), Param("const float*", "B"), Param("float*", "C"),
               Param("int", "M"), Param("int", "N"), Param("int", "K")]
# (target, atom, input dtype, wave, lanes per block, BM, BN, BK)
GEMM_CONFIGS = {
    "gfx942": ("gfx942", "mfma_f32_16x16x16_bf16", "bf16", 64, 256, 64, 64, 32),
    "gfx942-32x32": ("gfx942", "mfma_f32_32x32x8_f16", "f16", 64, 128, 64, 64, 16),
    "apple": ("apple", "simdgroup_8x8_f16", "f16", 32, 128, 32, 32, 16),
}


def gemm_module(cfg):
    tgt, atom, _, wave, _, bm, bn, bk = GEMM_CONFIGS[cfg]
    return compile(GEMM, kernel="gemm", params=GEMM_PARAMS, atoms=(tgt,), wave=wave,
                   defines={"ATOM": f"emu::atoms::{tgt}::{atom}", "BM": bm, "BN": bn, "BK": bk})


def run_gemm(mod, cfg, A, B, seed):
    _, _, _, _, lanes, bm, bn, bk = GEMM_CONFIGS[cfg]
    (M, K), N = A.shape, B.shape[1]
    C = np.full((M, N), np.nan, np.float32)
    mod.launch((-(-N // bn), -(-M // bm)), lanes, [A, B, C, M, N, K], shared_bytes=4 * bk * (bm + bn), seed=seed)
    return C


@pytest.mark.parametrize("cfg", sorted(GEMM_CONFIGS))
@SETTINGS
@given(m=st.integers(1, 100), n=st.integers(1, 100), k=st.integers(1, 80), seed=st.integers(0, 2**32))
def test_mma_atom_gemm(cfg, m, n, k, seed):
    mod = gemm_module(cfg)
    dt = dtypes.of(GEMM_CONFIGS[cfg][2])
    rng = np.random.default_rng(seed)
    A = dt.round(rng.standard_normal((m, k))).astype(np.float32)
    B = dt.round(rng.standard_normal((k, n))).astype(np.float32)
    C = run_gemm(mod, cfg, A, B, seed)
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    # f32 accumulation, rounded once per atom: error below (K / atom_k) ulps of the magnitude
    np.testing.assert_allclose(C, A64 @ B64, rtol=0, atol=(k + 8) * 2**-23 * (np.abs(A64) @ np.abs(B64)).max())


def test_mma_atom_rejects_unrounded_inputs():
    """A shim that forgets the conversion to bf16 would compute more precisely than the hardware."""
    mod = gemm_module("gfx942")
    A = np.full((16, 16), 0.1, np.float32)   # 0.1 is no bf16 value
    with pytest.raises(LaunchError, match=r"mfma_f32_16x16x16_bf16: register \d of A in lane \d+ holds 0.1\d*, "
                                          r"not a bf16 value"):
        run_gemm(mod, "gfx942", A, np.ones((16, 16), np.float32), 0)


ORDER = r"""
// Each lane takes a ticket when it runs: the tickets record the order the scheduler chose.
void order(unsigned* counter, unsigned* ticket) {
    emu::barrier();
    ticket[emu::thread_linear()] = emu::atomic_add(counter, 1u);
}
"""


def test_schedule_depends_on_seed_only():
    mod = compile(ORDER, kernel="order", params=[Param("unsigned*", "counter"), Param("unsigned*", "ticket")],
                  wave=32)

    def run(seed):
        counter, ticket = np.zeros(1, np.uint32), np.full(128, 9999, np.uint32)
        mod.launch(1, 128, [counter, ticket], seed=seed)
        assert counter[0] == 128 and sorted(ticket) == list(range(128))
        return tuple(ticket)

    assert run(5) == run(5)
    assert len({run(s) for s in range(4)}) == 4


INDEX = r"""
void index(int* out, unsigned lin) {
    emu::dim3 t = emu::thread_idx(), b = emu::block_idx(), bd = emu::block_dim(), gd = emu::grid_dim();
    unsigned blk = (b.z * gd.y + b.y) * gd.x + b.x;
    int* o = out + 8 * (blk * bd.x * bd.y * bd.z + lin);
    o[0] = t.x; o[1] = t.y; o[2] = t.z; o[3] = b.x; o[4] = b.y; o[5] = b.z;
    o[6] = emu::lane_id(); o[7] = emu::wave_id();
}
"""


@settings(max_examples=5, deadline=None)
@given(block=st.tuples(st.integers(1, 8), st.integers(1, 5), st.integers(1, 3)),
       grid=st.tuples(st.integers(1, 3), st.integers(1, 2), st.integers(1, 2)))
def test_thread_and_block_indices(block, grid):
    mod = compile(INDEX, kernel="index", wave=32,
                  params=[Param("int*", "out"), Param("unsigned", "lin", value="emu::thread_linear()")])
    nt, nb = int(np.prod(block)), int(np.prod(grid))
    out = np.full((nb, nt, 8), -1, np.int32)
    mod.launch(grid, block, [out])
    tz, ty, tx = np.meshgrid(*(np.arange(d) for d in block[::-1]), indexing="ij")
    bz, by, bx = np.meshgrid(*(np.arange(d) for d in grid[::-1]), indexing="ij")
    lin = np.arange(nt)
    want = np.concatenate([
        np.broadcast_to(np.stack([tx.ravel(), ty.ravel(), tz.ravel()], -1), (nb, nt, 3)),
        np.broadcast_to(np.stack([bx.ravel(), by.ravel(), bz.ravel()], -1)[:, None, :], (nb, nt, 3)),
        np.broadcast_to(np.stack([lin % 32, lin // 32], -1), (nb, nt, 2))], axis=-1)
    assert np.array_equal(out, want)


def test_ucontext_fallback_runs_the_same_kernel():
    mod = compile(REDUCE, kernel="block_sum", params=REDUCE_PARAMS, wave=64, flags=("-DEMU_UCONTEXT",))
    x = np.random.default_rng(1).standard_normal(512).astype(np.float32)
    out = np.full(2, np.nan, np.float32)
    mod.launch(2, 256, [x, out, 512], shared_bytes=1024, seed=3)
    np.testing.assert_allclose(out, _block_sums(x.astype(np.float64), 256, 2), atol=1e-4)


def test_compile_error_carries_the_compiler_message():
    src = "void broken(float* x) {\n    x[0] = undeclared_name;\n}\n"
    with pytest.raises(CompileError) as e:
        compile(src, kernel="broken", params=[Param("float*", "x")], wave=32)
    assert "kernel.cpp:2" in str(e.value) and "undeclared_name" in str(e.value)


BAD = r"""
void bad(int* p, int mode) {
    const unsigned t = emu::thread_linear();
    if (mode == 0) {                       // half the wave at a block barrier, half at a wave barrier
        if (t < 32) emu::barrier(); else emu::wave_barrier();
    } else if (mode == 1) {                // one collective, two types
        if (t < 32) emu::wave_exchange(int(t)); else emu::wave_exchange(double(t));
    } else if (mode == 2) {
        if (t == 7) *reinterpret_cast<volatile int*>(p + (1L << 40)) = 1;
    } else if (mode == 3) {
        if (t == 0) while (*reinterpret_cast<volatile int*>(p) == 0) {}   // nobody else runs: hangs
    } else if (mode == 4) {
        if (t == 3) emu::fail("bad input %d", p[0]);
    }
}
"""


@pytest.fixture(scope="module")
def bad_mod():
    return compile(BAD, kernel="bad", params=[Param("int*", "p"), Param("int", "mode")], wave=64)


@pytest.mark.parametrize("mode,match", [
    (0, r"deadlock in block \(0,0,0\): 32 of 64 live lanes wait at barrier\(\); wave 0 has 32 of 64 live lanes at "
        r"wave_barrier"),
    (1, r"lanes diverged, one at wave_exchange\(\) while others are at wave_exchange\(\) with a different type"),
    (2, r"died of SIGSEGV"),
    (4, r"lane \(3,0,0\): bad input 0"),
])
def test_launch_errors_are_exceptions(bad_mod, mode, match):
    with pytest.raises(LaunchError, match=match):
        bad_mod.launch(1, 64, [np.zeros(4, np.int32), mode])


def test_hung_kernel_times_out(bad_mod):
    with pytest.raises(LaunchError, match="no result after 1"):
        bad_mod.launch(1, 64, [np.zeros(4, np.int32), 3], timeout=1)


def test_bad_arguments_fail_before_launch(reduce_mod):
    x, out = np.zeros(8, np.float32), np.zeros(1, np.float32)
    with pytest.raises(TypeError, match=r"takes 3 arguments \(x, out, n\), got 2"):
        reduce_mod.launch(1, 32, [x, out])
    with pytest.raises(TypeError, match="needs an integer"):
        reduce_mod.launch(1, 32, [x, out, 2.5])
    with pytest.raises(TypeError, match="needs a numpy array"):
        reduce_mod.launch(1, 32, [[1.0], out, 1])
    with pytest.raises(ValueError, match="not contiguous"):
        reduce_mod.launch(1, 32, [np.zeros((4, 4), np.float32)[:, 1], out, 4])
    with pytest.raises(ValueError, match="1025 threads"):
        reduce_mod.launch(1, 1025, [x, out, 8])
    with pytest.raises(TypeError, match="cannot pass"):
        reduce_mod.launch(1, 32, [x, out, 2**40])


STRUCT = r"""
struct Layout { int rows, cols; float scale; };
void scale(float* x, Layout l) {
    unsigned i = emu::thread_linear();
    if (i < unsigned(l.rows * l.cols)) x[i] *= l.scale;
}
"""


def test_struct_by_value_and_in_process_launch():
    mod = compile(STRUCT, kernel="scale", params=[Param("float*", "x"), Param("Layout", "l")], wave=32)
    layout = np.dtype([("rows", np.int32), ("cols", np.int32), ("scale", np.float32)])
    x = np.arange(12, dtype=np.float32)
    mod.launch(1, 32, [x, np.array((3, 4, 0.5), layout)[()]], isolate=False)
    assert np.array_equal(x, np.arange(12) * 0.5)
    with pytest.raises(TypeError, match=r"is 12 bytes, got 8"):
        mod.launch(1, 32, [x, b"\0" * 8])


def test_editing_a_header_of_the_precompiled_prelude_rebuilds(tmp_path, monkeypatch):
    """A kernel's leading #includes are precompiled with simt.h and the shim (runner._prelude), which g++'s -MMD
    then does not list: the kernel's build records the prelude's headers too, so editing one rebuilds both."""
    monkeypatch.setenv("TILES_CACHE", str(tmp_path / "cache"))
    inc = tmp_path / "inc"
    inc.mkdir()
    src = '#include "value.h"\nvoid put(float* x) { x[emu::thread_linear()] = VALUE; }\n'
    x = np.zeros(32, np.float32)
    for value in ("1.5f", "2.5f"):
        (inc / "value.h").write_text(f"#pragma once\n#define VALUE {value}\n")
        compile(src, kernel="put", params=[Param("float*", "x")], include_dirs=[inc], wave=32).launch(1, 32, [x])
        assert (x == float(value[:-1])).all(), value
    assert len(list((tmp_path / "cache" / "emu").glob("pch-*"))) == 1   # one prelude, rebuilt in place
