"""tiles/targets.py's NVIDIA lane maps checked against the hardware: registers filled through the maps
from random matrices, one mma.sync / wgmma, and the D registers read back through the C map must
equal A @ B + C. A wrong map (a swapped index, a wrong warp offset) gives a different product."""
import numpy as np
import pytest

from tiles import dtypes
from tiles.targets import target

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")
try:
    CAPABILITY = cupy.cuda.Device(0).compute_capability
except Exception as e:   # no driver / no device
    pytest.skip(f"no CUDA device: {e}", allow_module_level=True)

_BITS = {"bf16": (np.uint16, 2), "f16": (np.uint16, 2), "fp8e4m3": (np.uint8, 4), "fp8e5m2": (np.uint8, 4)}


def _pack(regs: np.ndarray, dtype: str) -> np.ndarray:
    """Per-lane elements -> 32-bit registers, element 0 in the low bits ("low to high" in the PTX tables)."""
    store, per = _BITS[dtype]
    raw = regs.astype(dtypes.of(dtype).np).view(store)
    return raw.reshape(regs.shape[0], -1, per).copy().view(np.uint32).reshape(regs.shape[0], -1)


def _ops(start: int, n: int) -> str:
    return ", ".join(f"%{start + i}" for i in range(n))


def _mma_source(atom) -> str:
    ra, rb, rc = atom.regs[0] // 2, atom.regs[1] // 2, atom.regs[2]
    outs = ", ".join(f'"=f"(d[{i}])' for i in range(rc))
    ins = ", ".join([f'"r"(a[{i}])' for i in range(ra)] + [f'"r"(b[{i}])' for i in range(rb)]
                    + [f'"f"(c[{i}])' for i in range(rc)])
    return f"""
extern "C" __global__ void run(const unsigned* A, const unsigned* B, const float* C, float* D) {{
    const int l = threadIdx.x;
    unsigned a[{ra}], b[{rb}];
    float c[{rc}], d[{rc}];
    for (int i = 0; i < {ra}; i++) a[i] = A[l * {ra} + i];
    for (int i = 0; i < {rb}; i++) b[i] = B[l * {rb} + i];
    for (int i = 0; i < {rc}; i++) c[i] = C[l * {rc} + i];
    asm volatile("{atom.intrinsic} {{{_ops(0, rc)}}}, {{{_ops(rc, ra)}}}, {{{_ops(rc + ra, rb)}}}, "
                 "{{{_ops(rc + ra + rb, rc)}}};" : {outs} : {ins});
    for (int i = 0; i < {rc}; i++) D[l * {rc} + i] = d[i];
}}"""


def _wgmma_source(atom) -> str:
    per = _BITS[atom.in_dtypes[0]][1]
    ra, rc = atom.regs[0] // per, atom.regs[2]
    kbytes = atom.k * (4 // per)   # bytes of one column of B (K elements)
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(rc))
    ins = ", ".join([f'"r"(a[{i}])' for i in range(ra)] + ['"l"(desc)'])
    return f"""
// B (k x n) sits in shared memory K-major without swizzle: 8x16-byte core matrices, those along K
// 128 bytes apart (leading byte offset), groups of 8 columns of B {kbytes // 16 * 128} bytes apart
// (stride byte offset).
extern "C" __global__ void run(const unsigned* A, const unsigned char* Bsm, const float* C, float* D) {{
    __shared__ __align__(128) unsigned char sb[{atom.n * kbytes}];
    const int l = threadIdx.x;
    for (int i = l; i < {atom.n * kbytes}; i += 128) sb[i] = Bsm[i];
    __syncthreads();
    unsigned a[{ra}];
    float d[{rc}];
    for (int i = 0; i < {ra}; i++) a[i] = A[l * {ra} + i];
    for (int i = 0; i < {rc}; i++) d[i] = C[l * {rc} + i];
    unsigned long long addr = static_cast<unsigned long long>(__cvta_generic_to_shared(sb));
    unsigned long long desc = ((addr >> 4) & 0x3FFF) | (((128ull) >> 4) << 16)
                            | ((({kbytes // 16 * 128}ull) >> 4) << 32);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n"
                 "{atom.intrinsic} {{{_ops(0, rc)}}}, {{{_ops(rc, ra)}}}, %{rc + ra}, p, 1, 1{', 0' if per == 2 else ''};\\n}}"
                 : {outs} : {ins});
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    for (int i = 0; i < {rc}; i++) D[l * {rc} + i] = d[i];
}}"""


def _b_shared(B: np.ndarray, dtype: str) -> np.ndarray:
    """B (k x n) as bytes in the no-swizzle K-major layout of _wgmma_source."""
    k, n = B.shape
    esize = 4 // _BITS[dtype][1]
    per_core = 16 // esize                      # K elements in one 16-byte core-matrix row
    raw = B.astype(dtypes.of(dtype).np).view(_BITS[dtype][0]).view(np.uint8).reshape(k, n, esize)
    out = np.zeros(n * k * esize, np.uint8)
    kcores = k // per_core
    for j in range(n):
        for kk in range(k):
            off = ((j // 8) * kcores + kk // per_core) * 128 + (j % 8) * 16 + (kk % per_core) * esize
            out[off:off + esize] = raw[kk, j]
    return out


def _check(atom, source, b_dev, A, B, C):
    a_regs = A[atom.a[..., 0], atom.a[..., 1]]
    c_regs = C[atom.c[..., 0], atom.c[..., 1]].astype(np.float32)
    mod = cupy.RawModule(code=source, options=("-std=c++17", "-arch=sm_90a" if atom.lanes == 128 else "-arch=sm_80"))
    d = cupy.full(c_regs.shape, np.nan, cupy.float32)
    mod.get_function("run")((1,), (atom.lanes,), (cupy.asarray(_pack(a_regs, atom.in_dtypes[0])), b_dev,
                                                   cupy.asarray(c_regs), d))
    got = np.full((atom.m, atom.n), np.nan)
    got[atom.c[..., 0], atom.c[..., 1]] = d.get()
    want = A.astype(np.float64) @ B.astype(np.float64) + C
    # Hopper's fp8 wgmma adds its products with fewer bits than f32 (seen: 7e-5 relative on an H200);
    # a wrong map is off by O(1).
    bits = 13 if atom.in_dtypes[0].startswith("fp8") else 22
    bound = np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64)) + np.abs(C)
    assert np.all(np.abs(got - want) <= 2.0 ** -bits * bound), f"{atom.name}: the hardware disagrees with the lane maps"


def _inputs(atom, seed):
    rng = np.random.default_rng(seed)
    A = dtypes.of(atom.in_dtypes[0]).round(rng.standard_normal((atom.m, atom.k)))
    B = dtypes.of(atom.in_dtypes[1]).round(rng.standard_normal((atom.k, atom.n)))
    C = dtypes.f32.round(rng.standard_normal((atom.m, atom.n))).astype(np.float64)
    return A, B, C


@pytest.mark.parametrize("name", ["mma.sync.m16n8k16.bf16", "mma.sync.m16n8k16.f16"])
def test_mma_sync_maps_on_hardware(name):
    atom = target("sm_80").atom(name)
    A, B, C = _inputs(atom, 1)
    b_regs = B[atom.b[..., 0], atom.b[..., 1]]
    _check(atom, _mma_source(atom), cupy.asarray(_pack(b_regs, atom.in_dtypes[1])), A, B, C)


@pytest.mark.skipif(CAPABILITY != "90", reason="wgmma needs sm_90a")
@pytest.mark.parametrize("name", ["wgmma.m64n8k16.bf16", "wgmma.m64n64k16.f16", "wgmma.m64n256k16.bf16",
                                  "wgmma.m64n32k32.fp8e4m3", "wgmma.m64n16k32.fp8e5m2.fp8e4m3"])
def test_wgmma_maps_on_hardware(name):
    atom = target("sm_90a").atom(name)
    A, B, C = _inputs(atom, 2)
    _check(atom, _wgmma_source(atom), cupy.asarray(_b_shared(B, atom.in_dtypes[1])), A, B, C)
