// hip_emu.h: the HIP side of the CPU engine. tiles_hip/arch.hpp calls these under TILES_EMU; each is
// the C++ meaning of one CDNA instruction family, over the primitives of simt.h (lanes as fibers,
// waves of 64 as real collectives). TILES_EMU_GFX (942 or 950) picks the target whose atoms
// (atoms_gen.h, from tiles/targets.py) the MFMAs use.
#pragma once
#include <cstdint>
#include <cstring>

#include "simt.h"

#if !defined(TILES_EMU_GFX) || (TILES_EMU_GFX != 942 && TILES_EMU_GFX != 950)
#error "hip_emu.h: define TILES_EMU_GFX as 942 or 950"
#endif

// HIP's function and variable qualifiers mean nothing to the host compiler.
#define __global__
#define __device__
#define __host__
#define __shared__
#define __launch_bounds__(...)

namespace tiles_hip {
struct bf16;
struct fp8e4m3;
struct fp8e5m2;
}  // namespace tiles_hip

namespace hip_emu {
#if TILES_EMU_GFX == 950
namespace atoms = emu::atoms::gfx950;
#else
namespace atoms = emu::atoms::gfx942;
#endif

inline int thread_id() { return (int)emu::thread_linear(); }
inline int block_id(int axis) {
  const emu::dim3 b = emu::block_idx();
  return (int)(axis == 0 ? b.x : axis == 1 ? b.y : b.z);
}
inline void barrier() { emu::barrier(); }         // s_barrier: every lane of the block
inline void wave_barrier() { emu::wave_barrier(); }
inline uint8_t* lds_base() { return emu::shared_mem(); }

// ds_bpermute_b32: lane i receives `v` of lane src (mod 64, as the hardware masks the address).
inline uint32_t shfl(uint32_t v, int src) { return emu::wave_exchange(v)[src & 63]; }

// v_permlane16_swap_b32 / v_permlane32_swap_b32 (CDNA4 ISA), vdst = x, src0 = y, rows of 16 lanes: the 16
// variant swaps the odd rows of vdst with the even rows of src0, the 32 variant rows 2 and 3 of vdst with
// rows 0 and 1 of src0, lane for lane. Both registers are written: x and y come back swapped.
template <int M> inline void permlane_swap(uint32_t& x, uint32_t& y) {
  static_assert(M == 16 || M == 32, "permlane swaps move rows by 16 or 32 lanes");
  struct two { uint32_t x, y; };
  const two* all = emu::wave_exchange(two{x, y});
  const int lane = (int)emu::lane_id();
  const bool upper = lane & M;   // an odd row (16), rows 2-3 (32): its vdst is swapped in
  x = upper ? all[lane - M].y : all[lane].x;
  y = upper ? all[lane].y : all[lane + M].x;
}

// A ballot (v_cmp_ne_u32 of p against 0 into an SGPR pair): bit i holds lane i's p, 0 for lanes that exited.
inline uint64_t ballot(bool p) {
  const uint8_t* all = emu::wave_exchange((uint8_t)p);
  uint64_t mask = 0;
  for (int i = 0; i < 64; ++i) mask |= (uint64_t)(all[i] != 0) << i;
  return mask;
}

// ds_read_b64_tr_b16 (CDNA4): each lane reads 8 bytes (four 16-bit elements) at its LDS address, which
// must be 8-byte aligned and inside the arena; then, per group of 16 lanes, lane i receives as element j
// the element i % 4 that lane 4 j + i / 4 of its group read (a 4 x 16 block transposed to 16 x 4).
// As on the GPU, the instruction reads after every lane's earlier LDS writes and before any lane's later
// ones: the wave meets, each lane reads, and the reads travel in a second exchange.
inline void ds_read_tr16_b64(const uint8_t* p, uint32_t out[2]) {
  struct row { uint16_t e[4]; };
  const uint8_t* lds = emu::shared_mem();
  if (p < lds || p + 8 > lds + emu::shared_bytes() || (p - lds) % 8)
    emu::fail("ds_read_b64_tr_b16: lane %u reads LDS byte %lld: not an 8-byte aligned address in the arena",
              emu::lane_id(), (long long)(p - lds));
  emu::wave_barrier();
  row mine;
  std::memcpy(&mine, p, 8);
  const row* all = emu::wave_exchange(mine);
  const int lane = (int)emu::lane_id(), g = lane & ~15, i = lane & 15;
  uint16_t r[4];
  for (int j = 0; j < 4; ++j) r[j] = all[g + 4 * j + i / 4].e[i % 4];
  std::memcpy(out, r, 8);
}

// v_exp_f32: 2^x without subnormal results (below 2^-126 it returns +0).
inline float v_exp_f32(float x) {
  const float r = __builtin_exp2f(x);
  return r < 0x1p-126f ? 0.0f : r;
}

// v_rcp_f32: 1/x within 1 ULP (here the rounded quotient); 1/inf is 0, 1/0 is inf.
inline float v_rcp_f32(float x) { return 1.0f / x; }

// Buffer accesses: an access that does not lie wholly inside the resource's range reads 0 and is
// not written, per lane (the raw-buffer range check).
inline bool in_range(uint32_t bytes, uint32_t off, uint32_t n) { return off <= bytes && n <= bytes - off; }
// A dword that straddles the end reads the bytes before it (the device resource's range is the array's
// bytes rounded up to a dword, so the last elements of an array read as a dword come back; what the
// hardware returns past the end is never used) and 0 after.
template <class U> inline U load(const uint8_t* base, uint32_t bytes, uint32_t off) {
  U x = 0;
  if (off < bytes) std::memcpy(&x, base + off, bytes - off < sizeof(U) ? bytes - off : sizeof(U));
  return x;
}
template <class U> inline void store(const uint8_t* base, uint32_t bytes, uint32_t off, U v) {
  if (in_range(bytes, off, sizeof(U))) std::memcpy(const_cast<uint8_t*>(base) + off, &v, sizeof(U));
}
inline uint32_t load_u32(const uint8_t* b, uint32_t n, uint32_t off) { return load<uint32_t>(b, n, off); }
inline void store_u32(const uint8_t* b, uint32_t n, uint32_t off, uint32_t v) { store(b, n, off, v); }
inline void store_u16(const uint8_t* b, uint32_t n, uint32_t off, uint16_t v) { store(b, n, off, v); }
inline void store_u8(const uint8_t* b, uint32_t n, uint32_t off, uint8_t v) { store(b, n, off, v); }
inline void atomic_add_f32(float* p, float v) { emu::atomic_add(p, v); }
inline int atomic_add_i32(int* p, int v) { return emu::atomic_add(p, v); }

// ---- MFMA: which atom of tiles/targets.py each (M, K, input type) is on this target
template <int M, int K, class T> const emu::AtomTable& atom();
#define HIP_EMU_ATOM(M, K, T, NAME) \
  template <> inline const emu::AtomTable& atom<M, K, T>() { return atoms::NAME; }
HIP_EMU_ATOM(16, 16, tiles_hip::bf16, mfma_f32_16x16x16_bf16)
HIP_EMU_ATOM(32, 8, tiles_hip::bf16, mfma_f32_32x32x8_bf16)
HIP_EMU_ATOM(16, 16, _Float16, mfma_f32_16x16x16_f16)
HIP_EMU_ATOM(32, 8, _Float16, mfma_f32_32x32x8_f16)
HIP_EMU_ATOM(16, 32, tiles_hip::fp8e4m3, mfma_f32_16x16x32_fp8_fp8)
HIP_EMU_ATOM(16, 32, tiles_hip::fp8e5m2, mfma_f32_16x16x32_bf8_bf8)
HIP_EMU_ATOM(32, 16, tiles_hip::fp8e4m3, mfma_f32_32x32x16_fp8_fp8)
HIP_EMU_ATOM(32, 16, tiles_hip::fp8e5m2, mfma_f32_32x32x16_bf8_bf8)
#if TILES_EMU_GFX == 950
HIP_EMU_ATOM(16, 32, tiles_hip::bf16, mfma_f32_16x16x32_bf16)
HIP_EMU_ATOM(32, 16, tiles_hip::bf16, mfma_f32_32x32x16_bf16)
HIP_EMU_ATOM(16, 32, _Float16, mfma_f32_16x16x32_f16)
HIP_EMU_ATOM(32, 16, _Float16, mfma_f32_32x32x16_f16)
HIP_EMU_ATOM(16, 128, tiles_hip::fp8e4m3, mfma_scale_f32_16x16x128_fp8_fp8)
HIP_EMU_ATOM(16, 128, tiles_hip::fp8e5m2, mfma_scale_f32_16x16x128_bf8_bf8)
#endif
#undef HIP_EMU_ATOM

// The value the matrix core sees for an input register. CDNA3 reads fp8 bits as the FNUZ formats
// (exponent bias one larger: every value half the OCP one, 0x80 is NaN), CDNA4 as OCP.
template <class T> inline float mfma_input(float ocp_value, const T& x) {
#if TILES_EMU_GFX == 942
  if constexpr (sizeof(T) == 1) {
    uint8_t bits;
    std::memcpy(&bits, &x, 1);
    return bits == 0x80 ? __builtin_nanf("") : ocp_value * 0.5f;
  }
#endif
  (void)x;
  return ocp_value;
}

// D = A*B + C over the wave; c is this lane's accumulator registers, updated in place.
inline void mfma(const emu::AtomTable& t, const float* a, const float* b, float* c) {
  float d[16];
  emu::mma_atom(t, a, b, c, d);
  std::memcpy(c, d, sizeof(float) * t.regs_c);
}
}  // namespace hip_emu
