// tiles_hip/arch.hpp: the ONE layer where CDNA-only instructions appear.
//
// Every function here has two bodies: the device one (clang AMDGPU builtins) and, under TILES_EMU,
// a C++ equivalent over tiles/emu/include/hip_emu.h, where every lane is a fiber and waves are real
// collectives. The rest of the library is written once over these functions, so the CPU executes the
// same tile logic (layouts, swizzles, wait counts, barriers) that the GPU does.
#pragma once
#include <stdint.h>

#if defined(TILES_EMU)
#include "hip_emu.h"
#define TILES_DEV inline
#define TILES_INLINE
#define TILES_UNROLL  // the host compiler decides: full unrolling only matters for device registers
#else
#define TILES_DEV __device__ inline __attribute__((always_inline))
#define TILES_INLINE __attribute__((always_inline))  // a lambda's: inlined as TILES_DEV functions are
#define TILES_UNROLL _Pragma("unroll")
#endif

// A fact about the arguments that the launch checked on the host (the kernel's check_eq, an array's alignment):
// the compiler may drop the paths it rules out. The CPU engine tests it instead, so a fact that fails shows there.
#if defined(TILES_EMU)
#define TH_ASSUME(cond) ((cond) ? void(0) : ::emu::fail("%s, checked before the launch, does not hold", #cond))
#else
#define TH_ASSUME(cond) ((cond) ? void(0) : __builtin_unreachable())
#endif

#if defined(__gfx950__) || (defined(TILES_EMU) && TILES_EMU_GFX == 950)
#define TILES_GFX950 1
#endif

namespace tiles_hip {
#if defined(TILES_EMU)
struct bf16 { uint16_t bits; };  // host compilers without __bf16 arithmetic: converted in types.hpp
#else
typedef __bf16 bf16;
#endif
typedef _Float16 f16;
struct fp8e4m3 { uint8_t bits; };
struct fp8e5m2 { uint8_t bits; };

namespace arch {
constexpr int WAVE = 64;
#if defined(TILES_GFX950)
constexpr int LDS_BYTES = 160 * 1024, LDS_BANKS = 64, DIRECT_LDS_BYTES = 16;
#else
constexpr int LDS_BYTES = 64 * 1024, LDS_BANKS = 32, DIRECT_LDS_BYTES = 4;
#endif

// ---------------------------------------------------------------- ids and synchronization
#if defined(TILES_EMU)
TILES_DEV int thread_id() { return hip_emu::thread_id(); }
TILES_DEV int block_id(int axis) { return hip_emu::block_id(axis); }
TILES_DEV void barrier() { hip_emu::barrier(); }
TILES_DEV void wave_barrier() { hip_emu::wave_barrier(); }
TILES_DEV uint8_t* lds_base() { return hip_emu::lds_base(); }
#else
TILES_DEV int thread_id() { return __builtin_amdgcn_workitem_id_x(); }
TILES_DEV int block_id(int axis) {
  return axis == 0 ? __builtin_amdgcn_workgroup_id_x()
       : axis == 1 ? __builtin_amdgcn_workgroup_id_y() : __builtin_amdgcn_workgroup_id_z();
}
// LDS writes of this wave become visible to the workgroup, then every wave meets.
TILES_DEV void barrier() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
// A wave runs its lanes in lockstep: this only stops the compiler moving memory ops across it.
TILES_DEV void wave_barrier() { __builtin_amdgcn_wave_barrier(); }
TILES_DEV uint8_t* lds_base() {
  extern __shared__ uint8_t tiles_lds[];
  return tiles_lds;
}
#endif
// Ordering between blocks (tl.store_sum): a release makes this thread's global writes visible to every block of
// the device before what follows (on gfx942, its XCD's L2 written back), an acquire makes other blocks' released
// writes visible to what follows (stale cache lines dropped); agent scope. Blocks run one after another in hip-emu.
#if defined(TILES_EMU)
TILES_DEV void release_to_grid() {}
TILES_DEV void acquire_from_grid() {}
TILES_DEV int fetch_add(int* p, int v) { return hip_emu::atomic_add_i32(p, v); }
#else
TILES_DEV void release_to_grid() { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "agent"); }
TILES_DEV void acquire_from_grid() { __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "agent"); }
TILES_DEV int fetch_add(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
#endif
TILES_DEV int lane_id() { return thread_id() % WAVE; }
// Uniform across the wave; readfirstlane tells the compiler so (an SGPR: branches on it stay scalar).
#if defined(TILES_EMU)
TILES_DEV int wave_id() { return thread_id() / WAVE; }
#else
TILES_DEV int wave_id() { return __builtin_amdgcn_readfirstlane(thread_id() / WAVE); }
#endif
// Whether p holds in every lane of the wave: a ballot (v_cmp's lane mask, an SGPR pair) against exec, so
// a branch on it is scalar.
TILES_DEV bool wave_all(bool p) {
#if defined(TILES_EMU)
  return hip_emu::ballot(!p) == 0;
#else
  return __builtin_amdgcn_ballot_w64(!p) == 0;
#endif
}

// ---------------------------------------------------------------- scheduling hints (no CPU meaning)
// s_waitcnt immediates for gfx9: vmcnt bits [3:0] and [15:14], expcnt [6:4], lgkmcnt [11:8].
constexpr int VM_ANY = 63;  // a vmcnt no wave reaches: s_waitcnt leaves vector memory alone
// A wave with 63 vector memory ops in flight stalls at the next issue, so waiting until at most n remain, for
// an n past 63 (deep pipelines of many loads a stage), is waiting until at most 63 remain.
constexpr int vm_cap(int n) { return n < VM_ANY ? n : VM_ANY; }
constexpr int waitcnt_imm(int vm, int lgkm) {
  return (vm & 15) | ((vm >> 4) << 14) | (7 << 4) | ((lgkm & 15) << 8);
}
template <int VM, int LGKM> TILES_DEV void waitcnt() {
  static_assert(VM >= 0 && VM < 64 && LGKM >= 0 && LGKM < 16, "s_waitcnt counter out of range");
#if !defined(TILES_EMU)
  __builtin_amdgcn_s_waitcnt(waitcnt_imm(VM, LGKM));
#endif
}
#if defined(TILES_EMU)
TILES_DEV void lds_barrier() { hip_emu::barrier(); }
TILES_DEV void meet() { hip_emu::barrier(); }
#else
// barrier() for LDS handed over by ds_write: this wave's LDS ops complete (lgkmcnt), then every wave
// meets. Unlike barrier(), whose workgroup fence makes LLVM drain vmcnt(0) too, global loads (and
// direct-to-LDS loads) stay in flight: where those matter, the caller waits for them with waitcnt<VM, ..>
// first, counted. The asm's memory clobber keeps the compiler from moving memory ops across it.
TILES_DEV void lds_barrier() {
  waitcnt<VM_ANY, 0>();
  asm volatile("s_barrier" ::: "memory");
}
// The bare meeting: nothing waited for. For schedule points where this wave has no LDS write pending.
TILES_DEV void meet() { asm volatile("s_barrier" ::: "memory"); }
#endif
template <int P> TILES_DEV void setprio() {
#if !defined(TILES_EMU)
  __builtin_amdgcn_s_setprio(P);
#endif
}
// x, as a value the compiler cannot see through (an SGPR: x is uniform). Code that runs rarely (an edge tile's
// fill) is kept from loop strength reduction, which would carry its per-lane addresses as vector induction
// variables, added to every iteration of a loop whose steps take the other branch.
TILES_DEV int opaque(int x) {
#if !defined(TILES_EMU)
  asm("" : "+s"(x));
#endif
  return x;
}
// sched_group_barrier masks (LLVM AMDGPU): which instruction class a scheduling group takes.
enum sched : int { SCHED_VALU = 0x2, SCHED_SALU = 0x4, SCHED_MFMA = 0x8, SCHED_VMEM_READ = 0x20,
                   SCHED_VMEM_WRITE = 0x40, SCHED_DS_READ = 0x100, SCHED_DS_WRITE = 0x200, SCHED_TRANS = 0x400 };
template <int MASK, int N, int GROUP> TILES_DEV void sched_group() {
#if !defined(TILES_EMU)
  __builtin_amdgcn_sched_group_barrier(MASK, N, GROUP);
#endif
}

// Nothing is scheduled across this point but the instruction classes in CROSS (sched masks): bounds how far
// the scheduler hoists loads (and registers).
template <int CROSS = 0> TILES_DEV void sched_barrier() {
#if !defined(TILES_EMU)
  __builtin_amdgcn_sched_barrier(CROSS);
#endif
}

// ---------------------------------------------------------------- transcendentals
// 2^x as one v_exp_f32 (1 ULP): results below 2^-126 come out 0, where the library exp2 spends a range
// reduction on every call to produce them. The library's exp2 callers take values whose subnormal powers
// do not matter (a softmax's x - max, the logsumexp merges).
TILES_DEV float exp2(float x) {
#if defined(TILES_EMU)
  return hip_emu::v_exp_f32(x);
#else
  return __builtin_amdgcn_exp2f(x);
#endif
}

// 1/x as one v_rcp_f32 (1 ULP), where IEEE division is ten instructions (v_div_scale twice, v_rcp, four FMAs,
// v_div_fmas, v_div_fixup) per element: the sigmoid family's epilogues divide once per element.
TILES_DEV float rcp(float x) {
#if defined(TILES_EMU)
  return hip_emu::v_rcp_f32(x);
#else
  return __builtin_amdgcn_rcpf(x);
#endif
}

// v_perm_b32: byte i of the result is byte (sel >> 8 i) & 7 of the eight {lo (bytes 0-3), hi (4-7)}.
TILES_DEV uint32_t perm(uint32_t hi, uint32_t lo, uint32_t sel) {
#if defined(TILES_EMU)
  const uint64_t x = (uint64_t)hi << 32 | lo;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= (uint32_t)(x >> 8 * ((sel >> 8 * i) & 7) & 0xFF) << 8 * i;
  return r;
#else
  return __builtin_amdgcn_perm(hi, lo, sel);
#endif
}

// max(a, b, c) as one v_max3_f32 and max(a, b) as one v_max_f32 (IEEE maxNum: a quiet NaN loses, as in
// fmaxf). Inline asm because clang quiets each input of fmaxf first (v_max_f32 x, x) unless it can prove the
// input canonical, which it cannot for the elements of a packed multiply's result (a softmax's row max paid one
// extra VALU an element), a cross-lane swap's or the running max carried by a loop (5 of attention's 117 VALU a
// KV step at D 64 on gfx950, 2026-12-07).
TILES_DEV float max3(float a, float b, float c) {
#if defined(TILES_EMU)
  return __builtin_fmaxf(__builtin_fmaxf(a, b), c);
#else
  float r;
  asm("v_max3_f32 %0, %1, %2, %3" : "=v"(r) : "v"(a), "v"(b), "v"(c));
  return r;
#endif
}
TILES_DEV float max2(float a, float b) {
#if defined(TILES_EMU)
  return __builtin_fmaxf(a, b);
#else
  float r;
  asm("v_max_f32 %0, %1, %2" : "=v"(r) : "v"(a), "v"(b));
  return r;
#endif
}

// ---------------------------------------------------------------- cross-lane
// ds_bpermute: every lane reads `v` of lane `src` (a gather within the wave).
TILES_DEV uint32_t shfl(uint32_t v, int src) {
#if defined(TILES_EMU)
  return hip_emu::shfl(v, src);
#else
  return (uint32_t)__builtin_amdgcn_ds_bpermute(src * 4, (int)v);
#endif
}
// The butterfly partner of step `M` in a reduction: DPP quad_perm for 1 and 2, row_half_mirror and
// row_mirror for 4 and 8 (mirrors pair the same groups as xor once the smaller steps are done),
// ds_bpermute for 16 and 32. The CPU path takes the same partner, so sums add in the same order.
template <int M> constexpr int partner(int lane) {
  return M == 4 ? (lane & ~7) | (7 - (lane & 7)) : M == 8 ? (lane & ~15) | (15 - (lane & 15)) : lane ^ M;
}
template <int M> TILES_DEV uint32_t butterfly(uint32_t v) {
  static_assert(M == 1 || M == 2 || M == 4 || M == 8 || M == 16 || M == 32, "butterfly step");
#if defined(TILES_EMU)
  return hip_emu::shfl(v, partner<M>(lane_id()));
#else
  constexpr int ctrl = M == 1 ? 0xB1 : M == 2 ? 0x4E : M == 4 ? 0x141 : 0x140;  // quad_perm / mirrors
  if constexpr (M <= 8) return (uint32_t)__builtin_amdgcn_mov_dpp((int)v, ctrl, 0xF, 0xF, false);
  else return (uint32_t)__builtin_amdgcn_ds_bpermute((lane_id() ^ M) * 4, (int)v);
#endif
}

#if defined(TILES_GFX950)
// The values of lanes l & ~M and l | M (M = 16 or 32) in every lane l, as (lo, hi): one v_permlane16_swap /
// v_permlane32_swap of v with itself (VALU; ds_bpermute is an LDS instruction and an lgkmcnt wait).
struct lane_pair { uint32_t lo, hi; };
template <int M> TILES_DEV lane_pair halves(uint32_t v) {
  uint32_t x = v, y = v;
#if defined(TILES_EMU)
  hip_emu::permlane_swap<M>(x, y);
#else
  auto r = M == 16 ? __builtin_amdgcn_permlane16_swap(x, y, false, false)
                   : __builtin_amdgcn_permlane32_swap(x, y, false, false);
  x = r[0], y = r[1];
#endif
  return {x, y};
}

// ds_read_b64_tr_b16 (CDNA4 ISA, "MFMA transpose load from LDS"): every lane reads 8 bytes (four 16-bit
// elements, 8-byte aligned) at its own address, then each group of 16 lanes transposes: lane i of the
// group gets, as element j, element i % 4 of what lane 4 j + i / 4 of the group read. So if lane p reads
// row p / 4, columns 4 (p % 4) .. + 3 of a 4 x 16 block, lane i ends up with column i, rows 0..3: the
// MFMA operand layout (4 consecutive K per lane) out of a block stored with M / N contiguous.
TILES_DEV void ds_read_tr16_b64(const uint8_t* p, uint32_t out[2]) {
#if defined(TILES_EMU)
  hip_emu::ds_read_tr16_b64(p, out);
#else
  typedef short v4s __attribute__((ext_vector_type(4)));
  v4s v = __builtin_amdgcn_ds_read_tr16_b64_v4i16((__attribute__((address_space(3))) v4s*)p);
  __builtin_memcpy(out, &v, 8);
#endif
}
#endif

// ---------------------------------------------------------------- global memory
// A buffer resource: base, size in bytes; loads past the size return 0, stores past it are dropped.
// That is how tiles implements "elements past the end of a global read as 0".
struct buffer {
#if defined(TILES_EMU)
  const uint8_t* base;
  uint32_t bytes;
#else
  __amdgpu_buffer_rsrc_t rsrc;
  int desc[4];  // the same resource as 4 dwords, for inline asm
#endif
};
constexpr uint32_t OOB = 0x80000000u;  // an offset no buffer reaches: the lane's access is dropped
TILES_DEV buffer make_buffer(const void* p, uint32_t bytes) {
#if defined(TILES_EMU)
  return buffer{(const uint8_t*)p, bytes};
#else
  // dword 3 = 0x00020000: raw buffer, 32-bit data format, the CDNA default for untyped access
  // the range rounded up to a dword: 8- and 16-bit elements are read as the dword that holds them
  const uint64_t a = (uint64_t)p;
  const int n = (int)((bytes + 3) & ~3u);
  return buffer{__builtin_amdgcn_make_buffer_rsrc((void*)p, 0, n, 0x00020000),
                {(int)(uint32_t)a, (int)(uint32_t)(a >> 32) & 0xFFFF, n, 0x00020000}};
#endif
}
// The 32 bits of hi:lo from bit `shift` (< 32) up: v_alignbit_b32.
TILES_DEV uint32_t alignbit(uint32_t hi, uint32_t lo, uint32_t shift) {
#if defined(TILES_EMU)
  return (uint32_t)((((uint64_t)hi << 32) | lo) >> (shift & 31u));
#else
  return __builtin_amdgcn_alignbit(hi, lo, shift);
#endif
}
// N bytes (4, 8 or 16) at byte offset `off`; 0 where off + N is past the buffer.
template <int N> struct bytes_t { uint32_t w[N / 4]; };
// `soff`: a wave-uniform part of the offset (SGPR), as for buffer_load_lds.
template <int N> TILES_DEV bytes_t<N> buffer_load(buffer b, uint32_t off, uint32_t soff = 0) {
  bytes_t<N> r;
#if defined(TILES_EMU)
  for (int i = 0; i < N / 4; ++i) r.w[i] = hip_emu::load_u32(b.base, b.bytes, off == OOB ? OOB : off + soff + 4 * i);
#else
  if constexpr (N == 4) r.w[0] = __builtin_amdgcn_raw_buffer_load_b32(b.rsrc, off, soff, 0);
  else if constexpr (N == 8) {
    auto v = __builtin_amdgcn_raw_buffer_load_b64(b.rsrc, off, soff, 0);
    __builtin_memcpy(&r, &v, 8);
  } else {
    auto v = __builtin_amdgcn_raw_buffer_load_b128(b.rsrc, off, soff, 0);
    __builtin_memcpy(&r, &v, 16);
  }
#endif
  return r;
}
TILES_DEV void buffer_store_u32(buffer b, uint32_t off, uint32_t v, uint32_t soff = 0) {
#if defined(TILES_EMU)
  hip_emu::store_u32(b.base, b.bytes, off == OOB ? OOB : off + soff, v);
#else
  __builtin_amdgcn_raw_buffer_store_b32(v, b.rsrc, off, soff, 0);
#endif
}
// N bytes (4, 8, 12 or 16): dropped where off + N is past the buffer. `soff`: as for buffer_load.
template <int N> TILES_DEV void buffer_store(buffer b, uint32_t off, const bytes_t<N>& v, uint32_t soff = 0) {
#if defined(TILES_EMU)
  for (int i = 0; i < N / 4; ++i) hip_emu::store_u32(b.base, b.bytes, off == OOB ? OOB : off + soff + 4 * i, v.w[i]);
#else
  if constexpr (N == 4) __builtin_amdgcn_raw_buffer_store_b32(v.w[0], b.rsrc, off, soff, 0);
  else if constexpr (N == 8) {
    typedef uint32_t word __attribute__((ext_vector_type(2)));
    word x;
    __builtin_memcpy(&x, &v, 8);
    __builtin_amdgcn_raw_buffer_store_b64(x, b.rsrc, off, soff, 0);
  } else if constexpr (N == 12) {
    typedef uint32_t word __attribute__((ext_vector_type(3)));
    word x;
    __builtin_memcpy(&x, &v, 12);
    __builtin_amdgcn_raw_buffer_store_b96(x, b.rsrc, off, soff, 0);
  } else {
    typedef uint32_t word __attribute__((ext_vector_type(4)));
    word x;
    __builtin_memcpy(&x, &v, 16);
    __builtin_amdgcn_raw_buffer_store_b128(x, b.rsrc, off, soff, 0);
  }
#endif
}
TILES_DEV void buffer_store_u16(buffer b, uint32_t off, uint16_t v, uint32_t soff = 0) {
#if defined(TILES_EMU)
  hip_emu::store_u16(b.base, b.bytes, off == OOB ? OOB : off + soff, v);
#else
  __builtin_amdgcn_raw_buffer_store_b16(v, b.rsrc, off, soff, 0);
#endif
}
TILES_DEV void buffer_store_u8(buffer b, uint32_t off, uint8_t v, uint32_t soff = 0) {
#if defined(TILES_EMU)
  hip_emu::store_u8(b.base, b.bytes, off == OOB ? OOB : off + soff, v);
#else
  __builtin_amdgcn_raw_buffer_store_b8(v, b.rsrc, off, soff, 0);
#endif
}
// Global -> LDS without registers: the wave writes DIRECT_LDS_BYTES per lane, lane i at
// lds + i * DIRECT_LDS_BYTES (consecutive), each lane reading its own global offset. So a
// swizzled shared tile is filled by applying the swizzle to the global side.
// `soff` is a wave-uniform part of the offset (an SGPR: the tile's position, so the per-lane part is
// loop-invariant). Out-of-range lanes (voff = OOB) are only ever issued with soff = 0.
TILES_DEV void buffer_load_lds(buffer b, uint32_t voff, uint32_t soff, uint8_t* lds_wave_base) {
#if defined(TILES_EMU)
  uint8_t* dst = lds_wave_base + lane_id() * DIRECT_LDS_BYTES;
  for (int i = 0; i < DIRECT_LDS_BYTES / 4; ++i) {
    uint32_t w = hip_emu::load_u32(b.base, b.bytes, voff == OOB ? OOB : voff + soff + 4 * i);
    __builtin_memcpy(dst + 4 * i, &w, 4);
  }
#else
  // Inline asm, not __builtin_amdgcn_raw_ptr_buffer_load_lds: LLVM cannot tell which LDS bytes the builtin
  // writes, so it drains vmcnt(0) before every LDS read it cannot prove apart (ds_read_b64_tr_b16: all of
  // them), which would land the next tile before this one's MFMAs. The library counts these loads itself
  // (waitcnt<VM, ..> before each barrier that publishes a tile); the memory clobber keeps program order.
  typedef int i32x4 __attribute__((ext_vector_type(4)));
  const i32x4 r = {b.desc[0], b.desc[1], b.desc[2], b.desc[3]};
  const uint32_t m0 = (uint32_t)(uintptr_t)(__attribute__((address_space(3))) uint8_t*)lds_wave_base;
#if defined(TILES_GFX950)
  asm volatile("s_mov_b32 m0, %0\n\ts_nop 0\n\tbuffer_load_dwordx4 %1, %2, %3 offen lds" :: "s"(m0), "v"(voff), "s"(r), "s"(soff) : "memory", "m0");
#else
  asm volatile("s_mov_b32 m0, %0\n\ts_nop 0\n\tbuffer_load_dword %1, %2, %3 offen lds" :: "s"(m0), "v"(voff), "s"(r), "s"(soff) : "memory", "m0");
#endif
#endif
}
// f32 atomic add at byte offset `off`, dropped where it is past the buffer (as a store is): no branch
// per element, and the offset is one VGPR where a flat atomic takes a 64-bit address. `soff`: a wave-uniform
// part of the offset (SGPR), as for buffer_load.
TILES_DEV void buffer_atomic_add(buffer b, uint32_t off, float v, uint32_t soff = 0) {
#if defined(TILES_EMU)
  if (off != OOB && hip_emu::in_range(b.bytes, off + soff, 4))
    hip_emu::atomic_add_f32((float*)const_cast<uint8_t*>(b.base + off + soff), v);
#else
  __builtin_amdgcn_raw_ptr_buffer_atomic_fadd_f32(v, b.rsrc, (int)off, (int)soff, 0);
#endif
}
}  // namespace arch
}  // namespace tiles_hip

// ---------------------------------------------------------------- MFMA
// One matrix-core instruction per (shape, input type, arch); the lane layouts of the operands are
// in tiles/targets.py and in layout.hpp (the same formulas). On the CPU, the engine computes D from
// those maps (hip_emu::mfma), so a layout bug in this library shows as a wrong number there too.
namespace tiles_hip {
template <class T> struct cvt;
}
namespace tiles_hip::arch {
template <int M, int K, class T> struct mfma_op;  // M x M x K, inputs T, f32 accumulate

#if defined(TILES_EMU)
// The engine takes every lane's registers as floats (values of T) and computes D from the atom's maps.
template <int M, int K, class T> struct mfma_op {
  static constexpr int E_IN = M * K / 64, E_ACC = M * M / 64;
  static void run(const T* a, const T* b, float* c) {
    float fa[E_IN], fb[E_IN];
    for (int i = 0; i < E_IN; ++i) fa[i] = hip_emu::mfma_input(cvt<T>::to(a[i]), a[i]);
    for (int i = 0; i < E_IN; ++i) fb[i] = hip_emu::mfma_input(cvt<T>::to(b[i]), b[i]);
    hip_emu::mfma(hip_emu::atom<M, K, T>(), fa, fb, c);
  }
};
#else
typedef float f32x4 __attribute__((ext_vector_type(4)));
typedef float f32x16 __attribute__((ext_vector_type(16)));
template <class V, class T, int N> TILES_DEV V pack(const T* x) {
  V v;
  __builtin_memcpy(&v, x, sizeof(T) * N);
  return v;
}
#define TILES_MFMA(M_, K_, T_, IN_T, IN_N, ACC_T, CALL)                                     \
  template <> struct mfma_op<M_, K_, T_> {                                                  \
    static constexpr int E_IN = M_ * K_ / 64, E_ACC = M_ * M_ / 64;                         \
    TILES_DEV static void run(const T_* a, const T_* b, float* c) {                         \
      typedef IN_T in_t __attribute__((ext_vector_type(IN_N)));                             \
      in_t va = pack<in_t, T_, E_IN>(a), vb = pack<in_t, T_, E_IN>(b);                      \
      ACC_T vc = pack<ACC_T, float, E_ACC>(c);                                              \
      vc = CALL(va, vb, vc, 0, 0, 0);                                                       \
      __builtin_memcpy(c, &vc, sizeof(float) * E_ACC);                                      \
    }                                                                                       \
  };
#define TILES_MFMA8(M_, K_, T_, ACC_T, CALL)                                                \
  template <> struct mfma_op<M_, K_, T_> {                                                  \
    static constexpr int E_IN = M_ * K_ / 64, E_ACC = M_ * M_ / 64;                         \
    TILES_DEV static void run(const T_* a, const T_* b, float* c) {                         \
      long va, vb;                                                                          \
      __builtin_memcpy(&va, a, 8);                                                          \
      __builtin_memcpy(&vb, b, 8);                                                          \
      ACC_T vc = pack<ACC_T, float, E_ACC>(c);                                              \
      vc = CALL(va, vb, vc, 0, 0, 0);                                                       \
      __builtin_memcpy(c, &vc, sizeof(float) * E_ACC);                                      \
    }                                                                                       \
  };
// CDNA3 (and CDNA4): K = 16 / 8 for 16-bit inputs, 32 / 16 for fp8.
TILES_MFMA(16, 16, bf16, short, 4, f32x4, __builtin_amdgcn_mfma_f32_16x16x16bf16_1k)
TILES_MFMA(32, 8, bf16, short, 4, f32x16, __builtin_amdgcn_mfma_f32_32x32x8bf16_1k)
TILES_MFMA(16, 16, f16, _Float16, 4, f32x4, __builtin_amdgcn_mfma_f32_16x16x16f16)
TILES_MFMA(32, 8, f16, _Float16, 4, f32x16, __builtin_amdgcn_mfma_f32_32x32x8f16)
TILES_MFMA8(16, 32, fp8e4m3, f32x4, __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8)
TILES_MFMA8(16, 32, fp8e5m2, f32x4, __builtin_amdgcn_mfma_f32_16x16x32_bf8_bf8)
TILES_MFMA8(32, 16, fp8e4m3, f32x16, __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8)
TILES_MFMA8(32, 16, fp8e5m2, f32x16, __builtin_amdgcn_mfma_f32_32x32x16_bf8_bf8)
#if defined(TILES_GFX950)
// CDNA4's block-scaled fp8 MFMA, scales fixed at 1.0 (E8M0 127): cbsz / blgp 0 = E4M3, 1 = E5M2.
#define TILES_MFMA_SCALED(T_, FMT)                                                           \
  template <> struct mfma_op<16, 128, T_> {                                                 \
    static constexpr int E_IN = 32, E_ACC = 4;                                              \
    TILES_DEV static void run(const T_* a, const T_* b, float* c) {                         \
      typedef int i32x8 __attribute__((ext_vector_type(8)));                                \
      i32x8 va = pack<i32x8, T_, 32>(a), vb = pack<i32x8, T_, 32>(b);                       \
      f32x4 vc = pack<f32x4, float, 4>(c);                                                  \
      vc = __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(va, vb, vc, FMT, FMT, 0, 127, 0, 127); \
      __builtin_memcpy(c, &vc, sizeof(float) * 4);                                          \
    }                                                                                       \
  };
TILES_MFMA_SCALED(fp8e4m3, 0)
TILES_MFMA_SCALED(fp8e5m2, 1)
#undef TILES_MFMA_SCALED
// CDNA4 doubles K for 16-bit inputs.
TILES_MFMA(16, 32, bf16, __bf16, 8, f32x4, __builtin_amdgcn_mfma_f32_16x16x32_bf16)
TILES_MFMA(32, 16, bf16, __bf16, 8, f32x16, __builtin_amdgcn_mfma_f32_32x32x16_bf16)
TILES_MFMA(16, 32, f16, _Float16, 8, f32x4, __builtin_amdgcn_mfma_f32_16x16x32_f16)
TILES_MFMA(32, 16, f16, _Float16, 8, f32x16, __builtin_amdgcn_mfma_f32_32x32x16_f16)
#endif
#undef TILES_MFMA
#undef TILES_MFMA8
#endif
}  // namespace tiles_hip::arch
