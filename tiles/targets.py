"""Targets as data: matrix-instruction atoms with their lane layouts, targets, and a device table.

One source of truth for which lane holds which matrix element. An atom's maps are int arrays of
shape [lanes, regs, 2]: ``atom.a[lane, reg] == (row, col)`` of the element of A (m x k) that
register ``reg`` of lane ``lane`` holds; likewise ``b`` (k x n) and ``c`` (m x n, also D). Each map
is built from the vendor's formula (one function per instruction family), never typed out.
The CPU engine (tiles/emu) computes MFMA and simdgroup_matrix results from these same arrays.

Numerics of ``Atom.emulate`` follow the reference interpreter: inputs rounded to their dtype,
products exact, sum in float64, rounded to float32 once.

Checked against hardware: the mma.sync and wgmma maps (bf16, f16, fp8; N = 8, 16, 32, 64, 256) on an
H200 by tests/test_targets_gpu.py. The AMD maps are checked against the ISA guides only (no AMD GPU
here); Apple's is undocumented (see simdgroup_8x8) and backends/metal/lanemap.py checks it on a Mac.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

import numpy as np

from . import dtypes


@dataclass(frozen=True)
class Atom:
    name: str          # unique within a target, e.g. "mma.sync.m16n8k16.bf16", "mfma_f32_16x16x16_bf16"
    intrinsic: str     # the PTX instruction / clang builtin / MSL function it stands for
    m: int
    n: int
    k: int
    in_dtypes: tuple[str, str]   # (A dtype, B dtype), names as in tiles.dtypes
    acc_dtype: str
    lanes: int         # threads taking part: 32 warp, 128 warpgroup, 64 wave, 32 simdgroup
    a: np.ndarray = field(repr=False, compare=False)
    b: np.ndarray = field(repr=False, compare=False)
    c: np.ndarray = field(repr=False, compare=False)
    documented: bool = True   # False where the vendor does not document the lane order (Apple)
    b_in_shared: bool = False  # wgmma reads B through a shared-memory descriptor: `b` is then a
    #                            nominal row-major spread over the lanes, for emulation only
    notes: str = ""

    @property
    def regs(self) -> tuple[int, int, int]:
        """Registers (elements) per lane of A, B and C."""
        return self.a.shape[1], self.b.shape[1], self.c.shape[1]

    def emulate(self, a_regs, b_regs, c_regs) -> np.ndarray:
        """D registers from per-lane A, B, C registers (leading batch dims allowed).

        a_regs: [..., lanes, regs_a]; b_regs: [..., lanes, regs_b]; c_regs: [..., lanes, regs_c].
        Returns float32 [..., lanes, regs_c].
        """
        a_regs, b_regs, c_regs = (np.asarray(x) for x in (a_regs, b_regs, c_regs))
        for name, x, mp in (("a", a_regs, self.a), ("b", b_regs, self.b), ("c", c_regs, self.c)):
            if x.shape[-2:] != mp.shape[:2]:
                raise ValueError(f"{self.name}: {name}_regs has shape {x.shape}, "
                                 f"expected [..., {mp.shape[0]}, {mp.shape[1]}]")
        batch = np.broadcast_shapes(a_regs.shape[:-2], b_regs.shape[:-2], c_regs.shape[:-2])
        A = _gather(dtypes.of(self.in_dtypes[0]).round(a_regs), self.a, (self.m, self.k), batch)
        B = _gather(dtypes.of(self.in_dtypes[1]).round(b_regs), self.b, (self.k, self.n), batch)
        C = _gather(dtypes.of(self.acc_dtype).round(c_regs), self.c, (self.m, self.n), batch)
        D = (A @ B + C).astype(np.float32)
        return D[..., self.c[:, :, 0], self.c[:, :, 1]]


def _gather(regs, mp, shape, batch) -> np.ndarray:
    """Scatter per-lane registers into the float64 matrix they hold."""
    out = np.zeros(batch + shape, dtype=np.float64)
    out[..., mp[:, :, 0], mp[:, :, 1]] = np.broadcast_to(regs, batch + regs.shape[-2:])
    return out


def _map(lanes: int, regs: int, fn) -> np.ndarray:
    """Build a [lanes, regs, 2] map from fn(lane, reg) -> (row, col), vectorised over numpy ints."""
    lane, reg = np.meshgrid(np.arange(lanes), np.arange(regs), indexing="ij")
    row, col = fn(lane, reg)
    out = np.stack(np.broadcast_arrays(row, col), axis=-1).astype(np.int16)
    out.setflags(write=False)
    return out


# ---------------------------------------------------------------------------------------------
# NVIDIA. PTX ISA 9.0, section 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point
# type" gives the formulas (groupID = laneid >> 2, threadID_in_group = laneid % 4). wgmma
# (section 9.7.15.5.1.1.1 m64nNk16, 9.7.15.5.1.1.3 m64nNk32, Figures 148-153): each warp w of
# the warpgroup owns rows 16w..16w+15 and, within them, repeats the mma.m16n8 pattern; the
# accumulator repeats the 16x8 C fragment once per 8 columns of N.

_PTX = {"bf16": "bf16", "f16": "f16", "fp8e4m3": "e4m3", "fp8e5m2": "e5m2"}


def _mma_a_k16(lane, i):   # A of mma.m16n8k16 (16x16), 8 elements a0..a7 per lane
    g, t = lane >> 2, lane & 3
    return g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)


def _mma_a_k32(lane, i):   # A of the 8-bit k32 shapes (16x32), 16 elements a0..a15 per lane
    g, t = lane >> 2, lane & 3
    return g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3)


def _mma_c(lane, i):       # C/D 16x8 per 8 columns; i >> 2 selects the 8-column block (wgmma)
    g, t = lane >> 2, lane & 3
    return g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * t + (i & 1)


def mma_sync_m16n8k16(dtype: str) -> Atom:
    def b(lane, i):
        return 2 * (lane & 3) + (i & 1) + 8 * (i >> 1), lane >> 2
    p = _PTX[dtype]
    return Atom(f"mma.sync.m16n8k16.{dtype}", f"mma.sync.aligned.m16n8k16.row.col.f32.{p}.{p}.f32",
                16, 8, 16, (dtype, dtype), "f32", 32,
                _map(32, 8, _mma_a_k16), _map(32, 4, b), _map(32, 4, _mma_c))


def wgmma(n: int, a_dtype: str, b_dtype: str | None = None) -> Atom:
    """wgmma.mma_async m64nNk16 (bf16/f16) or m64nNk32 (fp8), A from registers, f32 accumulator."""
    b_dtype = b_dtype or a_dtype
    if n % 8 or not 8 <= n <= 256:
        raise ValueError(f"wgmma N must be a multiple of 8 in [8, 256], got {n}")
    fp8 = a_dtype.startswith("fp8")
    if fp8 != b_dtype.startswith("fp8") or (not fp8 and a_dtype != b_dtype):
        raise ValueError(f"wgmma has no {a_dtype} x {b_dtype} form")
    k = 32 if fp8 else 16
    a_fn = _mma_a_k32 if fp8 else _mma_a_k16

    def a(lane, i):
        row, col = a_fn(lane & 31, i)
        return row + 16 * (lane >> 5), col

    def c(lane, i):
        row, col = _mma_c(lane & 31, i)
        return row + 16 * (lane >> 5), col

    regs_b = k * n // 128

    def b(lane, i):            # not a register layout: B lives in shared memory (see Atom.b_in_shared)
        e = lane * regs_b + i
        return e // n, e % n

    name = f"wgmma.m64n{n}k{k}." + (a_dtype if a_dtype == b_dtype else f"{a_dtype}.{b_dtype}")
    return Atom(name, f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{_PTX[a_dtype]}.{_PTX[b_dtype]}",
                64, n, k, (a_dtype, b_dtype), "f32", 128,
                _map(128, k * 64 // 128, a), _map(128, regs_b, b), _map(128, n // 2, c),
                b_in_shared=True)


# ---------------------------------------------------------------------------------------------
# AMD CDNA3/CDNA4. AMD Instinct MI300 (CDNA3) ISA reference, chapter 7 "Matrix Arithmetic
# Instructions", and the CDNA4 ISA, same chapter; cross-checked with AMD's "Matrix Core
# Programming on CDNA3 and CDNA4" (ROCm blog, 2025), whose kernels index
# A[lane % M][kpl * (lane / M) + i] and C[rows_per_group * (lane / N) + ...][lane % N].
# For the non-scaled MFMA with a single block: lane l holds A row l % M and K elements
# kpl*(l // M) .. +kpl-1 (kpl = M*K/64 elements per lane), B the same with row/col swapped,
# and C/D column l % N, rows in groups of 4: row = 8*(i // 4) + 4*(l // 32) + i % 4 for 32x32,
# row = 4*(l // 16) + i for 16x16 (the same formula: 16x16 has one group).

def _mfma_maps(m: int, k: int):
    kpl = m * k // 64
    groups = 64 // m             # lane groups that split K

    def a(lane, i):
        return lane % m, kpl * (lane // m) + i

    def b(lane, i):
        return kpl * (lane // m) + i, lane % m

    def c(lane, i):
        return 4 * groups * (i // 4) + 4 * (lane // m) + i % 4, lane % m

    return _map(64, kpl, a), _map(64, kpl, b), _map(64, m * m // 64, c)


_AMD_FP8 = {"fp8e4m3": "fp8", "fp8e5m2": "bf8"}


def mfma(m: int, k: int, a_dtype: str, b_dtype: str | None = None, *, builtin: str | None = None) -> Atom:
    """A single-block v_mfma_f32_{m}x{m}x{k}_* atom (square M = N)."""
    b_dtype = b_dtype or a_dtype
    if a_dtype in _AMD_FP8:
        suffix = f"{_AMD_FP8[a_dtype]}_{_AMD_FP8[b_dtype]}"
    else:
        suffix = a_dtype
    name = f"mfma_f32_{m}x{m}x{k}_{suffix}"
    a, b, c = _mfma_maps(m, k)
    notes = "fp8: CDNA3 reads the FNUZ encodings (bias 8/16), CDNA4 the OCP ones" if a_dtype in _AMD_FP8 else ""
    return Atom(name, builtin or f"__builtin_amdgcn_{name}", m, m, k, (a_dtype, b_dtype), "f32", 64,
                a, b, c, notes=notes)


def mfma_scale_16x16x128(a_dtype: str, b_dtype: str | None = None) -> Atom:
    """gfx950 v_mfma_scale_f32_16x16x128_f8f6f4 with fp8 A and B.

    Modelled: fp8 (e4m3/e5m2) operands with unit block scales (E8M0 exponent 127), i.e. a plain
    16x16x128 fp8 MMA. Not modelled: the per-32-element E8M0 scales, fp6/fp4 operand formats
    (whose register layouts differ), OPSEL. Layout: each lane holds 32 fp8 of row l % 16 in two
    runs of 16 consecutive K, 64 apart: k = 64*(i // 16) + 16*(l // 16) + i % 16 (CDNA4 ISA
    chapter 7; HipKittens' gfx950 fp8 GEMM fills its operands with two ds_read_b128 per lane at
    exactly these offsets; the ROCm blog's 32x32x64 example has the same structure, runs 32 apart).
    """
    b_dtype = b_dtype or a_dtype

    def a(lane, i):
        return lane % 16, 64 * (i // 16) + 16 * (lane // 16) + i % 16

    def b(lane, i):
        row, col = a(lane, i)
        return col, row

    name = f"mfma_scale_f32_16x16x128_{_AMD_FP8[a_dtype]}_{_AMD_FP8[b_dtype]}"
    return Atom(name, "__builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4", 16, 16, 128,
                (a_dtype, b_dtype), "f32", 64, _map(64, 32, a), _map(64, 32, b), _mfma_maps(16, 16)[2],
                notes="block scales fixed to 1.0 (E8M0 127); fp6/fp4 formats not modelled")


# ---------------------------------------------------------------------------------------------
# Apple. Apple does not document which lane holds which element of a simdgroup_matrix
# (thread_elements()). The layout relied on in practice is the one in MLX's steel GEMM
# (mlx/backend/metal/kernels/steel/gemm/mma.h, BaseMMAFrag<T, 8, 8>::get_coord): lane l holds
# row (q & 4) + (l / 2) % 4 and columns c, c + 1 with c = (q & 2) * 2 + (l % 2) * 2, q = l / 4.
# Same map for A, B and C. documented=False: verify on hardware before trusting it.

def _apple(lane, i):
    q = lane // 4
    return (q & 4) + (lane // 2) % 4, (q & 2) * 2 + (lane % 2) * 2 + i


def simdgroup_8x8(dtype: str) -> Atom:
    msl = {"f16": "half", "bf16": "bfloat", "f32": "float"}[dtype]
    mp = _map(32, 2, _apple)
    return Atom(f"simdgroup_8x8.{dtype}", f"simdgroup_multiply_accumulate (simdgroup_{msl}8x8)",
                8, 8, 8, (dtype, dtype), "f32", 32, mp, mp, mp, documented=False)


# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    name: str          # "sm_80" "sm_90a" "gfx942" "gfx950" "apple"
    vendor: str        # "nvidia" "amd" "apple"
    backend: str       # "cuda" "hip" "metal"
    lanes: int         # warp 32 / wave 64 / simdgroup 32
    max_threads: int   # per block
    shared_bytes: int  # max shared / LDS / threadgroup memory per block
    banks: int
    bank_bytes: int
    registers: str
    dtypes: frozenset[str]
    atoms: tuple[Atom, ...] = field(repr=False)
    notes: str = ""
    # The granularity of every tile the verifier checks for this target, so that nothing it accepts fails in the
    # target's compiler: register tiles are built from `tile` x `tile` base tiles (the MMA fragments' edge), and
    # an mma's inner dimension K steps by the K of the atom the backend issues for its input dtype (`mma_step`:
    # dtype -> atom name; gfx950's 16-bit MFMA is 16x16x32, so K = 80 does not fit, where gfx942's 16x16x16 does)
    tile: int = 16
    mma_step: tuple[tuple[str, str], ...] = ()
    mma_a_regs: frozenset[str] | None = None   # dtypes an mma's A may hold in registers (None: every mma input)
    # dtypes a register tile may have (None: every dtype of the target); Apple's are simdgroup matrices, which
    # MSL has of float, half and bfloat only
    reg_dtypes: frozenset[str] | None = None
    # a fence that orders a block's global writes before another block's reads of them (CUDA __threadfence, AMDGPU
    # agent-scope fences), which tl.store_sum's count of arrivals rests on; MSL before 3.2 orders device memory
    # only within a threadgroup
    grid_fence: bool = True

    def mma_atom(self, dtype: str) -> Atom | None:
        """The atom whose K an mma of this input dtype steps by on this target (None: no mma of that dtype)."""
        name = dict(self.mma_step).get(dtype)
        return self.atom(name) if name else None

    def atom(self, name: str) -> Atom:
        for a in self.atoms:
            if a.name == name:
                return a
        close = difflib.get_close_matches(name, [a.name for a in self.atoms], n=5)
        raise KeyError(f"{self.name} has no atom {name!r}" + (f"; close: {', '.join(close)}" if close else ""))

    def atoms_for(self, a_dtype: str, b_dtype: str | None = None) -> tuple[Atom, ...]:
        """Atoms whose A and B are of these dtypes (B defaults to A's dtype)."""
        want = (dtypes.of(a_dtype).name, dtypes.of(b_dtype or a_dtype).name)
        return tuple(a for a in self.atoms if a.in_dtypes == want)


_FP8 = ("fp8e4m3", "fp8e5m2")
_FP8_PAIRS = tuple((x, y) for x in _FP8 for y in _FP8)
_BASE = frozenset({"bf16", "f16", "f32", "i32"})

_sm80_atoms = tuple(mma_sync_m16n8k16(d) for d in ("bf16", "f16"))
_gfx942_atoms = (
    tuple(mfma(m, k, d, builtin=f"__builtin_amdgcn_mfma_f32_{m}x{m}x{k}{'bf16_1k' if d == 'bf16' else 'f16'}")
          for d in ("bf16", "f16") for m, k in ((16, 16), (32, 8)))
    + tuple(mfma(m, k, x, y) for x, y in _FP8_PAIRS for m, k in ((16, 32), (32, 16))))

TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("sm_80", "nvidia", "cuda", 32, 1024, 163 * 1024, 32, 4,
           "64K 32-bit registers per SM, at most 255 per thread", _BASE, _sm80_atoms,
           mma_step=tuple((d, f"mma.sync.m16n8k16.{d}") for d in ("bf16", "f16")), mma_a_regs=frozenset({"bf16", "f16"})),
    Target("sm_90a", "nvidia", "cuda", 32, 1024, 227 * 1024, 32, 4,
           "64K 32-bit registers per SM, at most 255 per thread; setmaxnreg moves them between "
           "warpgroups", _BASE | set(_FP8),
           _sm80_atoms
           + tuple(wgmma(n, d) for d in ("bf16", "f16") for n in range(8, 257, 8))
           + tuple(wgmma(n, x, y) for x, y in _FP8_PAIRS for n in range(8, 257, 8)),
           # fp8 runs on wgmma (k32) or m16n8k32 where K allows it, else as f16 on m16n8k16 (exact): K steps by 16
           mma_step=tuple((d, f"mma.sync.m16n8k16.{d}") for d in ("bf16", "f16"))
           + tuple((d, "mma.sync.m16n8k16.f16") for d in _FP8), mma_a_regs=frozenset({"bf16", "f16"})),
    Target("gfx942", "amd", "hip", 64, 1024, 64 * 1024, 32, 4,
           "vgprs=512 per lane incl. AGPRs (256 arch VGPRs + 256 AGPRs) at one wave per SIMD",
           _BASE | set(_FP8), _gfx942_atoms,
           notes="fp8 is the FNUZ variant (e4m3fnuz/e5m2fnuz) on CDNA3",
           mma_step=(("bf16", "mfma_f32_16x16x16_bf16"), ("f16", "mfma_f32_16x16x16_f16"),
                     ("fp8e4m3", "mfma_f32_16x16x32_fp8_fp8"), ("fp8e5m2", "mfma_f32_16x16x32_bf8_bf8"))),
    Target("gfx950", "amd", "hip", 64, 1024, 160 * 1024, 64, 4,
           "vgprs=512 per lane incl. AGPRs (256 arch VGPRs + 256 AGPRs) at one wave per SIMD",
           _BASE | set(_FP8),
           _gfx942_atoms
           + tuple(mfma(m, k, d) for d in ("bf16", "f16") for m, k in ((16, 32), (32, 16)))
           + tuple(mfma_scale_16x16x128(x, y) for x, y in _FP8_PAIRS),
           notes="fp8 is OCP e4m3fn/e5m2 on CDNA4",
           mma_step=(("bf16", "mfma_f32_16x16x32_bf16"), ("f16", "mfma_f32_16x16x32_f16"),
                     ("fp8e4m3", "mfma_f32_16x16x32_fp8_fp8"), ("fp8e5m2", "mfma_f32_16x16x32_bf8_bf8"))),
    Target("apple", "apple", "metal", 32, 1024, 32 * 1024, 32, 4,
           "not documented by Apple; register pressure lowers occupancy",
           _BASE, tuple(simdgroup_8x8(d) for d in ("f16", "bf16", "f32")),
           notes="threadgroup-memory banking is not documented; 32 banks of 4 bytes assumed",
           tile=8, mma_step=tuple((d, f"simdgroup_8x8.{d}") for d in ("f16", "bf16")),
           reg_dtypes=frozenset({"f32", "f16", "bf16"}), grid_fence=False),
)}


def target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise KeyError(f"unknown target {name!r}; known: {', '.join(TARGETS)}") from None


# ---------------------------------------------------------------------------------------------
# CDNA per-CU rates, for the static main-loop bound of backends/hip/loopreport.py. Sources: AMD's
# ROCm Compute Profiler (rocprofiler-compute), "System Speed-of-Light" analysis configs for gfx942
# and gfx950 (dense MFMA FLOPs per clock per CU: peak = sclk x CUs x rate) and "Pipeline
# descriptions" (four 16-wide SIMDs per CU, so a wave64 VALU instruction holds its SIMD 4 cycles;
# the scheduler visits one SIMD per cycle, round-robin, and issues at most one instruction per wave
# and one per category -- VALU (MFMA included), VMEM, SALU/SMEM, LDS, branch -- per visit; the LDS
# moves 4 bytes per bank per clock). gfx950's fp8 rate, 8192, is the MI355X datasheet's 5.03 PFLOP/s dense
# fp8 (DEVICES below) = 256 CUs x 2.4 GHz x 8192 (the profiler's gfx950 config prints 4096 as its fp8 peak
# but divides by 8192 for the percentage); likewise MI300X 1307.4 TFLOP/s bf16 = 304 CUs x 2.1 GHz x 2048.
# Simplification: every MFMA of a target is counted at that target's peak rate for its operand
# type, including the CDNA3 shapes gfx950 keeps (those may run slower there; no source says).

@dataclass(frozen=True)
class CuRates:
    mfma_flops: dict[str, int]   # dense MFMA FLOPs per clock per CU, by operand type ("bf16", "fp8")
    lds_bytes: int               # LDS bytes per clock per CU: the target's banks x 4 bytes
    simds: int = 4
    issue_interval: int = 4      # clocks between two visits of the scheduler to one SIMD (= a wave64 VALU
    #                              instruction's clocks on a 16-wide SIMD)

    def mfma_clocks(self, m: int, n: int, k: int, operand: str) -> float:
        """Clocks one MFMA of m x n x k holds its SIMD's matrix core."""
        return 2 * m * n * k / (self.mfma_flops[operand] / self.simds)


CU_RATES: dict[str, CuRates] = {
    t: CuRates(mfma, TARGETS[t].banks * TARGETS[t].bank_bytes) for t, mfma in (
        ("gfx942", {"bf16": 2048, "f16": 2048, "fp8": 4096, "f32": 256}),
        ("gfx950", {"bf16": 4096, "f16": 4096, "fp8": 8192, "f32": 256}))
}


# ---------------------------------------------------------------------------------------------
# Devices. Peak rates are dense (no sparsity), in TFLOP/s, from the vendors' datasheets unless
# `source` says otherwise; "f32" is the non-tensor (vector) FP32 rate on NVIDIA and Apple and the
# matrix FP32 rate on AMD. Memory bandwidth in TB/s.

@dataclass(frozen=True)
class Device:
    name: str
    vendor: str
    target: str
    peak_tflops: dict[str, float] = field(compare=False)
    mem_bw_tbs: float
    units: int         # SMs / CUs / GPU cores
    source: str = "vendor datasheet"


def _nv(name, tgt, bf16, fp8, f32, bw, sms):
    peaks = {"bf16": bf16, "f16": bf16, "f32": f32} | ({"fp8": fp8} if fp8 else {})
    return Device(name, "nvidia", tgt, peaks, bw, sms)


def _amd(name, tgt, bf16, fp8, f32, bw, cus):
    return Device(name, "amd", tgt, {"bf16": bf16, "f16": bf16, "fp8": fp8, "f32": f32}, bw, cus)


def _apple_dev(name, f32, bw_gbs, cores, published):
    # Apple GPUs run f16 at the f32 rate; no separate bf16 rate is published, the f16 one is used.
    src = ("Apple (FP32 TFLOPS as announced)" if published else
           "estimate: cores x 128 FP32 lanes x 2 x GPU clock (Apple publishes no TFLOPS figure)")
    return Device(name, "apple", "apple", {"f32": f32, "f16": f32, "bf16": f32}, bw_gbs / 1000, cores, src)


DEVICES: dict[str, Device] = {d.name: d for d in (
    _nv("A100 SXM", "sm_80", 312.0, None, 19.5, 2.039, 108),
    _nv("H100 SXM", "sm_90a", 989.4, 1978.9, 66.9, 3.35, 132),
    _nv("H100 PCIe", "sm_90a", 756.5, 1513.0, 51.2, 2.0, 114),
    _nv("H200 SXM", "sm_90a", 989.4, 1978.9, 66.9, 4.8, 132),
    # Blackwell (sm_100) has no target here yet; its kernels run the sm_90a code path.
    _nv("B200", "sm_90a", 2250.0, 4500.0, 75.0, 8.0, 148),
    _amd("MI300X", "gfx942", 1307.4, 2614.9, 163.4, 5.3, 304),
    _amd("MI325X", "gfx942", 1307.4, 2614.9, 163.4, 6.0, 304),
    _amd("MI350X", "gfx950", 2306.9, 4613.7, 144.2, 8.0, 256),
    _amd("MI355X", "gfx950", 2516.6, 5033.2, 157.3, 8.0, 256),
    _apple_dev("M1", 2.6, 68.25, 8, True),
    _apple_dev("M1 Pro", 5.2, 200, 16, True),
    _apple_dev("M1 Max", 10.4, 400, 32, True),
    _apple_dev("M1 Ultra", 21.0, 800, 64, True),
    _apple_dev("M2", 3.6, 100, 10, True),
    _apple_dev("M2 Pro", 6.8, 200, 19, True),
    _apple_dev("M2 Max", 13.6, 400, 38, True),
    _apple_dev("M2 Ultra", 27.2, 800, 76, True),
    _apple_dev("M3", 3.5, 100, 10, False),
    _apple_dev("M3 Pro", 6.4, 150, 18, False),
    _apple_dev("M3 Max", 14.2, 400, 40, False),
    _apple_dev("M4", 3.8, 120, 10, False),
    _apple_dev("M4 Pro", 7.6, 273, 20, False),
    _apple_dev("M4 Max", 15.2, 546, 40, False),
)}


def _words(s: str) -> list[str]:
    return re.findall(r"[a-z]+\d*|\d+", s.lower())


def device_for(name: str) -> Device | None:
    """The device table entry for a name as a runtime reports it, or None.

    Matches "NVIDIA H200", "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X", "Apple M2 Max",
    "NVIDIA A100-SXM4-80GB": every word of the table name must appear in the reported name, and
    the longest such table name wins (so "Apple M2 Max" is the M2 Max, not the M2).
    """
    words = set(_words(name))
    best, best_len = None, 0
    for dev in DEVICES.values():
        need = [w for w in _words(dev.name) if w != "sxm"]   # runtimes rarely say SXM
        if all(w in words for w in need) and len(need) > best_len:
            best, best_len = dev, len(need)
    return best
