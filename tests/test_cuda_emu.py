"""The generated CUDA for sm_80, executed on the CPU (cuda-emu:sm_80): the PTX the headers issue, as the engine
models it, against the PTX ISA's description and tiles/targets.py; and a deleted barrier that the engine catches."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tiles import dtypes, targets
from tiles.backends.cuda import emu
from tiles.emu.runner import LaunchError, Param
from tiles.kernels.gemm import gemm
from tiles.kernels.rotary import rotary_half, tables
from tiles.testing import assert_close, poisoned, random_array
from test_kernel_rotary import reference_rotary

HEAD = "#include <tiles_cuda/tiles.cuh>\n"

LDMATRIX = HEAD + r"""
// Four 8x8 b16 matrices, stored as 32 rows of 16 bytes in shared memory; lane l points at stored row P[l], which
// ldmatrix takes as row l % 8 of matrix l / 8.
extern "C" __global__ void ldm(const unsigned short* M, const int* P, unsigned* out, int trans) {
    extern __shared__ unsigned char smem_base[];
    unsigned short* s = reinterpret_cast<unsigned short*>(smem_base);
    for (int i = threadIdx.x; i < 256; i += 32) s[i] = M[i];
    __syncthreads();
    const int l = threadIdx.x;
    unsigned r[4];
    if (trans) tc::ldmatrix_x4_trans(r, s + 8 * P[l]);
    else tc::ldmatrix_x4(r, s + 8 * P[l]);
    for (int i = 0; i < 4; ++i) out[4 * l + i] = r[i];
}
"""


@settings(max_examples=2)
@given(seed=st.integers(0, 2**32 - 1))
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_x4(trans, seed):
    """Register i of lane l: the word l % 4 of row l / 4 of matrix i; with .trans the elements at column l / 4 of
    rows 2 (l % 4) and 2 (l % 4) + 1 (PTX ISA, ldmatrix). Rows come from other lanes' addresses, in any order."""
    rng = np.random.default_rng(seed)
    m = rng.integers(0, 2**16, 256, dtype=np.uint16)
    perm = rng.permutation(32).astype(np.int32)
    out = np.zeros(128, np.uint32)
    mod = emu.compile_source(LDMATRIX, "ldm", [Param("const unsigned short*", "M"), Param("const int*", "P"),
                                               Param("unsigned*", "out"), Param("int", "trans")])
    mod.launch(1, 32, [m, perm, out, int(trans)], shared_bytes=512, seed=seed)
    mats = m.reshape(32, 8)[perm].reshape(4, 8, 8).astype(np.uint32)   # [matrix, row, col]
    lane = np.arange(32)[:, None]
    g, t, i = lane // 4, lane % 4, np.arange(4)[None, :]
    lo, hi = (mats[i, 2 * t, g], mats[i, 2 * t + 1, g]) if trans else (mats[i, g, 2 * t], mats[i, g, 2 * t + 1])
    np.testing.assert_array_equal(out.reshape(32, 4), lo | hi << 16)


MMA = HEAD + r"""
// One mma.sync m16n8k16 over the warp: lane l brings A registers A[4l..4l+3], B[2l], B[2l+1], C[4l..4l+3].
extern "C" __global__ void mma(const unsigned* A, const unsigned* B, const float* C, float* D, int f16) {
    const int l = threadIdx.x;
    const unsigned a[4] = {A[4 * l], A[4 * l + 1], A[4 * l + 2], A[4 * l + 3]};
    tc::pair<float> d0{C[4 * l], C[4 * l + 1]}, d1{C[4 * l + 2], C[4 * l + 3]};
    if (f16) tc::mma16816<tc::f16>(d0, d1, a, B[2 * l], B[2 * l + 1]);
    else tc::mma16816<tc::bf16>(d0, d1, a, B[2 * l], B[2 * l + 1]);
    D[4 * l] = d0.x, D[4 * l + 1] = d0.y, D[4 * l + 2] = d1.x, D[4 * l + 3] = d1.y;
}
"""


def _registers(values: np.ndarray) -> np.ndarray:
    """16-bit elements e0 e1 | e2 e3 | ... of each lane packed two to a 32-bit register, the lower half first."""
    bits = values.view(np.uint16).astype(np.uint32)
    return np.ascontiguousarray(bits[:, 0::2] | bits[:, 1::2] << 16)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_mma_sync_follows_the_atom_lane_maps(dtype):
    """The shim unpacks the registers in PTX's order and computes through the engine: lane by lane the same D as
    targets.py's description of the instruction (Atom.emulate)."""
    atom = targets.target("sm_80").atom(f"mma.sync.m16n8k16.{dtype}")
    a, b = random_array((32, 8), dtype), random_array((32, 4), dtype)
    c = random_array((32, 4), "f32")
    d = np.full((32, 4), np.nan, np.float32)
    mod = emu.compile_source(MMA, "mma", [Param("const unsigned*", "A"), Param("const unsigned*", "B"),
                                          Param("const float*", "C"), Param("float*", "D"), Param("int", "f16")])
    mod.launch(1, 32, [_registers(a), _registers(b), c, d, int(dtype == "f16")])
    np.testing.assert_allclose(d, atom.emulate(a.astype(np.float32), b.astype(np.float32), c), rtol=1e-6)


CP_ASYNC = HEAD + r"""
// Lane l copies 16 bytes into shared row l, l % 17 of them from G + 16 l + skew, the rest zeros; then reads its
// neighbour's row back (the arena starts as 0xFF bytes, so a zero there was written).
extern "C" __global__ void cpa(const unsigned char* G, unsigned char* out, int skew) {
    extern __shared__ unsigned char smem_base[];
    const int l = threadIdx.x;
    tc::cp_async16(smem_base + 16 * l, G + 16 * l + skew, l % 17);
    tc::cp_async_commit();
    tc::cp_async_wait<0>();
    __syncthreads();
    for (int i = 0; i < 16; ++i) out[16 * l + i] = smem_base[16 * ((l + 1) % 32) + i];
}
"""


def test_cp_async_zero_fills():
    """cp.async with a src-size: the bytes past it are zeros; a source off its 16-byte alignment is refused."""
    g = np.random.default_rng().integers(1, 256, 512, dtype=np.uint8)
    out = np.zeros(512, np.uint8)
    mod = emu.compile_source(CP_ASYNC, "cpa", [Param("const unsigned char*", "G"), Param("unsigned char*", "out"),
                                               Param("int", "skew")])
    mod.launch(1, 32, [g, out, 0], shared_bytes=512)
    rows = np.roll(g.reshape(32, 16), -1, axis=0)
    n = (np.arange(1, 33) % 32 % 17)[:, None]
    np.testing.assert_array_equal(out.reshape(32, 16), np.where(np.arange(16)[None, :] < n, rows, 0))
    with pytest.raises(LaunchError, match="cp.async"):
        mod.launch(1, 32, [g, out, 8], shared_bytes=512)


SHIFTED = HEAD + r"""
// Lane l reads the 16 bytes at G + 16 + l (l < 16: every offset from a 16-byte boundary) through read16_shifted.
extern "C" __global__ void shifted(const unsigned char* G, unsigned char* out) {
    const int l = threadIdx.x;
    if (l < 16) *reinterpret_cast<uint4*>(out + 16 * l) = tc::read16_shifted(G + 16 + l);
}
"""


def test_read16_shifted_at_every_offset():
    """The aligned words around 16 bytes at any byte offset, shifted into place (rows of 1-, 2- and 4-byte elements
    off 16-byte alignment): exactly those bytes at each of the 16 offsets."""
    g = np.random.default_rng().integers(0, 256, 64, dtype=np.uint8)
    out = np.zeros(256, np.uint8)
    mod = emu.compile_source(SHIFTED, "shifted", [Param("const unsigned char*", "G"), Param("unsigned char*", "out")])
    mod.launch(1, 32, [g, out])
    np.testing.assert_array_equal(out.reshape(16, 16), np.stack([g[16 + l:32 + l] for l in range(16)]))


def test_sm90a_is_not_emulated():
    with pytest.raises(ValueError, match="sm_90a"):
        emu.compile_source(CP_ASYNC, "cpa", [], target="sm_90a")


def test_deleted_barrier_breaks_the_result():
    """Rotary stages each output tile in shared memory: the warps write their rows (tc::store(outs, o1)), a barrier,
    then the block's threads copy 16-byte chunks of it out. Delete that barrier and lanes copy out chunks other
    warps have not written yet (the engine's NaN poison, or the previous head's values): wrong numbers. The
    unedited text passes on the same inputs."""
    q, k = random_array((1, 2, 40, 64), "bf16"), random_array((1, 1, 40, 64), "bf16")
    cos, sin = (dtypes.bf16.round(t).astype(q.dtype) for t in tables(40, 64))
    args = lambda: [np.full(q.shape, np.nan, q.dtype), np.full(k.shape, np.nan, k.dtype), q, k, cos, sin]  # noqa: E731
    first = args()
    kernel = rotary_half.trace(first, "sm_80", W=32)
    source = emu.generated(kernel).source
    emu.run_emu(kernel, first)
    assert_close(first[0], reference_rotary(q, cos, sin, False), "bf16")
    lines = source.splitlines()
    staged = next(i for i, line in enumerate(lines) if line.strip().startswith("tc::store(outs, "))
    assert lines[staged + 1].strip() == "tc::sync();"
    broken = args()
    emu.run_emu(kernel, broken, source="\n".join(lines[:staged + 1] + lines[staged + 2:]) + "\n")
    with pytest.raises(AssertionError):
        assert_close(broken[0], reference_rotary(q, cos, sin, False), "bf16")


# (BM, BN, BK, warps, stages): shared rows of 32, 64, 128 and 256 bytes (each swizzle mode, and two 128-byte
# panels), 1 to 8 warps, 2 to 5 stages
GEMM_CONFIGS = [(64, 64, 16, 4, 2), (32, 32, 32, 2, 3), (128, 64, 64, 8, 2), (16, 64, 128, 1, 5)]


@settings(max_examples=3)
@given(m=st.integers(1, 150), n=st.integers(1, 150), k=st.integers(1, 300), trans_b=st.booleans(),
       dtype=st.sampled_from(["bf16", "f16"]), config=st.sampled_from(GEMM_CONFIGS))
def test_gemm_configurations(m, n, k, trans_b, dtype, config):
    """GEMM under sm_80 configurations other than the shipped one: ldmatrix addressing every swizzle mode and
    column panels, warp counts, pipeline depths (the shared kernel test runs the shipped configuration)."""
    bm, bn, bk, warps, stages = config
    a = random_array((m, k), dtype)
    b = random_array((n, k) if trans_b else (k, n), dtype)
    c = poisoned((m, n), "f32")
    gemm(c, a, b, backend="cuda-emu:sm_80", trans_b=trans_b, BM=bm, BN=bn, BK=bk, workers=warps, stages=stages)
    assert_close(c, a.astype(np.float64) @ (b.astype(np.float64).T if trans_b else b.astype(np.float64)), "f32")


def test_deleted_barrier_before_a_collective_read_breaks_the_result():
    """Attention backward on sm_80: every warp stores its rows of dS^T, a barrier, then tc::atomic_add_mma reads
    all of dS^T through ldmatrix (a warp collective), after the dV and dK mma (more collectives). Without the barrier
    a warp that runs ahead reads rows a lagging warp has not written: the engine lets one wave lag a round while the
    others go on past their collectives in it (simt.h), so for most seeds dQ comes out wrong (before that engine
    change, for none of them). The unedited text gives the same dQ for every seed; attention backward's own tests
    check it against float64."""
    from tiles.kernels import attention_bwd as ab
    rng = np.random.default_rng(0)
    q, k, v, do = (random_array((1, 1, 64, 64), "bf16", rng) for _ in range(4))
    lse = (np.log(64) + rng.random((1, 1, 64))).astype(np.float32)
    delta = rng.standard_normal((1, 1, 64)).astype(np.float32)
    args = lambda: [poisoned(k.shape, "bf16"), poisoned(v.shape, "bf16"), np.zeros((1, 1, 64, 64), np.float32),  # noqa: E731
                    q, k, v, do, lse, delta, 0.125]
    good = args()
    kernel = ab.attention_bwd.trace(good, "sm_80", D=64, causal=False)
    lines = emu.generated(kernel).source.splitlines()
    add = next(i for i, line in enumerate(lines) if "tc::atomic_add_mma" in line)
    sync = max(i for i in range(add) if lines[i].strip() == "tc::sync();")
    assert any(lines[i].strip().startswith("tc::store(ds_s, ") for i in range(sync - 3, sync))
    emu.run_emu(kernel, good)
    assert np.isfinite(good[2]).all() and np.abs(good[2]).max() > 0
    broken_text = "\n".join(lines[:sync] + lines[sync + 1:]) + "\n"
    wrong = 0
    for seed in range(1, 5):
        same = args()
        emu.run_emu(kernel, same, seed=seed)
        assert np.array_equal(same[2], good[2])   # the order of the lanes alone changes nothing
        broken = args()
        emu.run_emu(kernel, broken, source=broken_text, seed=seed)
        wrong += not np.array_equal(broken[2], good[2])
    assert wrong >= 2, f"the missing barrier changed dQ for {wrong} of 4 seeds"
