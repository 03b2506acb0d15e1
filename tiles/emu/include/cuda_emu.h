// cuda_emu.h: the CUDA side of the CPU engine. Under TILES_EMU the tiles_cuda headers (base.cuh) include this
// instead of CUDA's fp16/bf16/fp8 headers, and each of their inline-PTX functions calls the function here that
// gives its instruction's meaning over simt.h: lanes as fibers, warps of 32 as real collectives, mma.sync
// computed from the lane maps of tiles/targets.py (atoms_gen.h). TILES_EMU_SM picks the architecture the
// headers see as __CUDA_ARCH__; only sm_80 is modelled (sm_90a's wgmma, TMA, mbarriers and setmaxnreg are not).
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "simt.h"
#include "atoms_gen.h"  // emu::atoms::sm_80::mma_sync_m16n8k16_{bf16,f16}: compile with atoms=("sm_80",)

#if !defined(TILES_EMU_SM) || TILES_EMU_SM != 80
#error "cuda_emu.h: define TILES_EMU_SM as 80 (sm_90a is not emulated)"
#endif
// The headers pick their sm_80 code paths by it, exactly as nvcc's device pass does.
#define __CUDA_ARCH__ (TILES_EMU_SM * 10)

// Qualifiers that mean nothing to the host compiler.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __maxnreg__(...)
// A block's __shared__ variable is one object that all its lanes see: a block-scope static. thread_local is
// the one storage class that also fits `extern __shared__ unsigned char smem_base[]` (the generated kernel's
// dynamic shared memory, defined below); blocks run one after another on one OS thread, so one copy serves.
#define __shared__ thread_local

// ---- the builtins a lane reads
#define threadIdx (::emu::thread_idx())
#define blockIdx (::emu::block_idx())
#define blockDim (::emu::block_dim())
#define gridDim (::emu::grid_dim())

// ---- vector types of the CUDA runtime that the headers use
struct float2 {
  float x, y;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
// hi:lo shifted right by shift & 31, the low word (CUDA's clamp-free funnel shift)
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  return unsigned(((uint64_t(hi) << 32) | lo) >> (shift & 31u));
}

// ---- 16-bit floats. bf16: the upper half of an IEEE float, float -> bf16 rounds to nearest even and keeps a NaN
// a (quiet) NaN, as __float2bfloat16_rn does. f16 is the host's _Float16, whose conversions round the same way.
struct __nv_bfloat16 {
  uint16_t bits;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    bits = nan ? uint16_t((u >> 16) | 0x40u) : uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  operator float() const {
    const uint32_t u = uint32_t(bits) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return float(h); }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__nv_bfloat16(a), __nv_bfloat16(b)}; }

typedef _Float16 __half;
struct __half2 {
  __half x, y;
};
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return float(h); }
inline __half2 __floats2half2_rn(float a, float b) { return {__half(a), __half(b)}; }

// fp8: storage only. sm_80 takes no fp8 dtype (tiles/targets.py), so no conversion of it is reached or modelled.
struct __nv_fp8_e4m3 {
  uint8_t bits;
};
struct __nv_fp8_e5m2 {
  uint8_t bits;
};

// The block's dynamic shared memory. Its name is the generated kernels' (codegen's `extern __shared__`); the engine
// takes it as every block's arena (emu::shared_arena), NaN-filled before each block. sm_80 allows 163 KB a block.
alignas(4096) inline thread_local unsigned char smem_base[164 * 1024];

namespace cuda_emu {
inline unsigned char* arena(size_t bytes) {
  if (bytes > sizeof smem_base) emu::fail("%zu bytes of dynamic shared memory; sm_80 has %zu", bytes, sizeof smem_base);
  return smem_base;
}
inline const bool arena_given = (emu::shared_arena = arena, true);

inline bool in_shared(const void* p, size_t n) {
  const uintptr_t a = uintptr_t(p), base = uintptr_t(emu::shared_mem());
  return a >= base && a - base + n <= emu::shared_bytes();
}

// ---- warp collectives. Only full-warp masks: tiles never shuffles inside divergent code.
inline void full_mask(unsigned mask, const char* what) {
  if (mask != 0xffffffffu) emu::fail("%s with mask %#x: only full warps are modelled", what, mask);
}
}  // namespace cuda_emu

// Lane i gets v of lane (i ^ m) / of lane src, within the warp (the hardware masks the lane index to the warp).
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int m) {
  cuda_emu::full_mask(mask, "__shfl_xor_sync");
  return emu::wave_exchange(v)[(emu::lane_id() ^ unsigned(m)) & 31];
}
template <class T> inline T __shfl_sync(unsigned mask, T v, int src) {
  cuda_emu::full_mask(mask, "__shfl_sync");
  return emu::wave_exchange(v)[unsigned(src) & 31];
}
template <class T> inline void __stwb(T* p, T v) { *p = v; }   // a store (write-back: what a plain one does)
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
// Whether p holds in every lane of the warp.
inline bool __all_sync(unsigned mask, bool p) {
  cuda_emu::full_mask(mask, "__all_sync");
  const int* all = emu::wave_exchange(int(p));
  for (int lane = 0; lane < 32; ++lane)
    if (!all[lane]) return false;
  return true;
}
inline void __syncthreads() { emu::barrier(); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }   // CUDA's math library; the host has none
// x times the reciprocal of y, as CUDA's fast division (programming guide, intrinsic functions): 0 for
// 2^126 < |y| (NaN for an infinite x), within 2 ulp elsewhere
inline float __fdividef(float x, float y) { return fabsf(y) > 0x1p126f ? x * 0.0f : x / y; }
inline float atomicAdd(float* p, float v) { return emu::atomic_add(p, v); }
inline int atomicAdd(int* p, int v) { return emu::atomic_add(p, v); }
// Blocks run one after another here: every write of an earlier block is visible to a later one without a fence.
inline void __threadfence() {}
// The offset of a shared-memory address in the block's arena: what the PTX instructions below take as [addr].
inline size_t __cvta_generic_to_shared(const void* p) {
  if (!cuda_emu::in_shared(p, 0))
    emu::fail("__cvta_generic_to_shared(%p): not in the block's dynamic shared memory", p);
  return size_t(static_cast<const unsigned char*>(p) - emu::shared_mem());
}

// ---- the meaning of each PTX instruction the sm_80 headers issue (memory.cuh, mma.cuh)
namespace cuda_emu {
inline void check_shared16(const void* p, const char* what) {
  if (uintptr_t(p) % 16 || !in_shared(p, 16))
    emu::fail("%s: shared address %p is not a 16-byte aligned row inside the block's shared memory", what, p);
}

// cp.async.cg.shared.global [dst], [src], 16, src_bytes: 16 bytes land at dst, the first src_bytes from src and
// the rest zeros. Copied at once: the copy group it joins is already complete, so commit_group and wait_group
// have nothing to do (a missing wait is not detected; a missing barrier is).
inline void cp_async16(void* dst, const void* src, int src_bytes) {
  check_shared16(dst, "cp.async");
  if (src_bytes < 0 || src_bytes > 16 || uintptr_t(src) % 16)
    emu::fail("cp.async: src-size %d (0..16) from %p (16-byte aligned)", src_bytes, src);
  memcpy(dst, src, size_t(src_bytes));
  memset(static_cast<unsigned char*>(dst) + src_bytes, 0, size_t(16 - src_bytes));
}

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lane 8i + r gives the address of row r of 8x8 matrix i
// (16 bytes); register i of lane l receives the 32-bit word (l % 4) of row l / 4 of matrix i, or with .trans
// the two elements at column l / 4 of rows 2 (l % 4) and 2 (l % 4) + 1. The rows travel through the warp.
struct row16 {
  uint16_t e[8];
};
inline void ldmatrix_x4(unsigned (&r)[4], const void* p, bool trans) {
  check_shared16(p, trans ? "ldmatrix.trans" : "ldmatrix");
  row16 mine;
  memcpy(&mine, p, 16);
  const row16* rows = emu::wave_exchange(mine);
  const unsigned l = emu::lane_id();
  for (int i = 0; i < 4; ++i) {
    const row16* m = rows + 8 * i;
    const uint16_t lo = trans ? m[2 * (l % 4)].e[l / 4] : m[l / 4].e[2 * (l % 4)];
    const uint16_t hi = trans ? m[2 * (l % 4) + 1].e[l / 4] : m[l / 4].e[2 * (l % 4) + 1];
    r[i] = unsigned(lo) | unsigned(hi) << 16;
  }
}

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32 {c0..c3}, {a0..a3}, {b0, b1}, {c0..c3}: each
// 32-bit A and B register holds two elements, the lower half first (a0 a1 | a2 a3 | ...), in the order of the
// atom's lane map; D = A B + C over the warp, through emu::mma_atom.
template <class T> inline float unpack(unsigned reg, int half) {
  const uint16_t bits = uint16_t(reg >> (16 * half));
  T x;
  memcpy(&x, &bits, 2);
  return float(x);
}
template <class T>
inline void mma_m16n8k16(float& c0, float& c1, float& c2, float& c3, const unsigned (&a)[4], unsigned b0,
                         unsigned b1) {
  constexpr bool bf16 = std::is_same<T, __nv_bfloat16>::value;
  static_assert(bf16 || std::is_same<T, __half>::value, "mma.sync m16n8k16 takes bf16 or f16");
  const emu::AtomTable& atom =
      bf16 ? emu::atoms::sm_80::mma_sync_m16n8k16_bf16 : emu::atoms::sm_80::mma_sync_m16n8k16_f16;
  float fa[8], fb[4] = {unpack<T>(b0, 0), unpack<T>(b0, 1), unpack<T>(b1, 0), unpack<T>(b1, 1)};
  for (int i = 0; i < 8; ++i) fa[i] = unpack<T>(a[i / 2], i % 2);
  const float c[4] = {c0, c1, c2, c3};
  float d[4];
  emu::mma_atom(atom, fa, fb, c, d);
  c0 = d[0], c1 = d[1], c2 = d[2], c3 = d[3];
}

// What the headers issue only on sm_90 (stmatrix, fp8 mma, named barriers): never reached under TILES_EMU_SM 80.
[[noreturn]] inline void not_sm80(const char* what) { emu::fail("%s is not modelled (sm_80 only)", what); }
}  // namespace cuda_emu
