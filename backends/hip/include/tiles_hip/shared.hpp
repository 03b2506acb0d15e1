// tiles_hip/shared.hpp: LDS tiles, swizzled for the instruction that reads them.
//
// LDS has 32 banks of 4 bytes on gfx942 and 64 on gfx950; an instruction is served in phases (a
// ds_read_b128 serves 64 lanes x 16 bytes in phases of banks*4/16 lanes) and lanes of one phase that
// hit one bank in different words serialize. An MFMA operand read has the lanes of a phase walk down
// rows at the same column, which, unswizzled, lands them all on the same banks whenever a row is a
// multiple of the bank line. The swizzle XORs the index of a G-byte granule within the row with bits
// of the row number; backends/hip/swizzle.py picks (G, S, MASK) per tile from a model of the read that
// tile serves, and the same function places direct global->LDS loads (applied to the global side).
#pragma once
#include "types.hpp"

namespace tiles_hip {
template <int G, int S, int MASK> struct swizzle {
  static_assert(G == 4 || G == 8 || G == 16, "swizzle granule is 4, 8 or 16 bytes");
  static constexpr int GRANULE = G;
  static constexpr int PERIOD = (MASK + 1) << S;  // rows after which the XOR pattern repeats
  TILES_DEV static constexpr int unit(int row, int u) { return u ^ ((row >> S) & MASK); }  // its own inverse
};
using no_swizzle = swizzle<16, 0, 0>;

template <class T, int R, int C, class SW = no_swizzle> struct st {
  static constexpr int ROWS = R, COLS = C, ROW_BYTES = C * (int)sizeof(T), BYTES = R * ROW_BYTES;
  static_assert(ROW_BYTES % SW::GRANULE == 0, "a shared tile row must be whole swizzle granules");
  using dtype = T;
  using swz = SW;
  uint8_t* base;
  TILES_DEV static constexpr uint32_t offset(int r, int c) {
    const int b = c * (int)sizeof(T);
    return r * ROW_BYTES + SW::unit(r, b / SW::GRANULE) * SW::GRANULE + b % SW::GRANULE;
  }
  TILES_DEV T& at(int r, int c) const { return *(T*)(base + offset(r, c)); }
  // (r0 + r, c) with r0 a multiple of the swizzle's period: row r0 is a plain byte offset, so an
  // unrolled walk down the rows keeps one address per (r, c) and the steps become immediate offsets.
  TILES_DEV T& at(int r0, int r, int c) const { return *(T*)(base + r0 * ROW_BYTES + offset(r, c)); }
  // N consecutive elements of row r from column c (c a multiple of N): one ds_read (ds_write) of
  // N*sizeof(T) bytes per granule.
  template <int N> TILES_DEV void read_run(int r, int c, T* out) const { move_run<N, false>(r, c, (uint8_t*)out); }
  template <int N> TILES_DEV void write_run(int r, int c, const T* in) const {
    move_run<N, true>(r, c, (uint8_t*)const_cast<T*>(in));
  }

 private:
  template <int N, bool TO_LDS> TILES_DEV void move_run(int r, int c, uint8_t* regs) const {
    constexpr int bytes = N * (int)sizeof(T), piece = bytes < SW::GRANULE ? bytes : SW::GRANULE;
    TILES_UNROLL for (int i = 0; i < bytes / piece; ++i) {
      uint8_t* p = base + offset(r, c + i * piece / (int)sizeof(T));
      uint8_t* q = regs + i * piece;
#if !defined(TILES_EMU)
      if constexpr (piece >= 8) {  // the aligned vector type is what makes this one ds_read/ds_write_b64/b128
        typedef uint32_t word __attribute__((ext_vector_type(piece / 4)));
        word x;
        if constexpr (TO_LDS) __builtin_memcpy(&x, q, piece), *(word*)p = x;
        else x = *(const word*)p, __builtin_memcpy(q, &x, piece);
        continue;
      }
#endif
      if constexpr (TO_LDS) __builtin_memcpy(p, q, piece);
      else __builtin_memcpy(q, p, piece);
    }
  }
};
// A shared vector: N elements, contiguous.
template <class T, int N_> struct sv {
  static constexpr int N = N_, BYTES = N * (int)sizeof(T);
  using dtype = T;
  uint8_t* base;
  TILES_DEV T& at(int i) const { return ((T*)base)[i]; }
};

// Shared tiles live in one dynamic LDS arena; the generated kernel places each at a fixed offset.
template <class S> TILES_DEV S st_at(int offset) { return S{arch::lds_base() + offset}; }
// N buffers of one pipelined tile, back to back: ring[i] computes the address (an array of tiles
// indexed by a loop counter would live in scratch memory).
template <class S, int N> struct ring {
  static constexpr int STRIDE = (S::BYTES + 15) / 16 * 16;
  int offset;
  TILES_DEV S operator[](int i) const { return st_at<S>(offset + i * STRIDE); }
};
}  // namespace tiles_hip
