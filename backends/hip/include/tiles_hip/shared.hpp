// tiles_hip/shared.hpp: LDS tiles, swizzled for the instruction that reads them.
//
// LDS has 32 banks of 4 bytes on gfx942 and 64 on gfx950; an instruction is served in phases (a
// ds_read_b128 serves 64 lanes x 16 bytes in phases of banks*4/16 lanes) and lanes of one phase that
// hit one bank in different words serialize. An MFMA operand read has the lanes of a phase walk down
// rows at the same column, which, unswizzled, lands them all on the same banks whenever a row is a
// multiple of the bank line. The swizzle XORs the index of a G-byte granule within the row with bits
// of the row number; backends/hip/swizzle.py picks (G, S, MASK) per tile from a model of the read that
// tile serves, and the same function places direct global->LDS loads (applied to the global side).
//
// A stored row longer than one MFMA K step is kept in panels of PANEL bytes (one K step's run), panel after
// panel: each panel is a tile of its own, swizzled alike, so the fragments of every K step sit at the first
// step's addresses plus a constant (immediate offsets, one address register per operand), where an XOR over
// the whole row would give every (step, fragment) its own address.
#pragma once
#include "types.hpp"

namespace tiles_hip {
template <int G, int S, int MASK, int PANEL_ = 0> struct swizzle {
  static_assert(G == 4 || G == 8 || G == 16, "swizzle granule is 4, 8 or 16 bytes");
  static_assert(PANEL_ % G == 0, "a panel is whole granules");
  static constexpr int GRANULE = G, PANEL = PANEL_;  // PANEL: bytes of a stored row per panel (0: the whole row)
  static constexpr int PERIOD = (MASK + 1) << S;  // rows after which the XOR pattern repeats
  static constexpr bool TRANSPOSED = false, PAIRED = false;
  TILES_DEV static constexpr int unit(int row, int u) { return u ^ ((row >> S) & MASK); }  // its own inverse
};
using no_swizzle = swizzle<16, 0, 0>;
// The tile stored transposed (a stored row per column, swizzled as above): for an MFMA operand read down
// its columns on CDNA3, which has no transposing LDS read, so that the read is one ds_read of E
// consecutive K. Filled through registers (lds_fill), which transpose 4 x 4 blocks on the way.
template <int G, int S, int MASK, int PANEL = 0> struct transposed : swizzle<G, S, MASK, PANEL> {
  static constexpr bool TRANSPOSED = true;
};

// The tile stored in row pairs: 4-byte word (r / 2, c) holds the 16-bit elements (r, c) and (r + 1, c), r even
// (a stored row per two rows, swizzled as above). For a tile that MMAs read both along its rows and down its
// columns on CDNA3, where neither a transposed copy (no LDS for two) nor a transposing read exists: a row run
// of 4 is one 16-byte read of which the lane keeps one half of each word, a column run of 4 is two 4-byte
// reads, where the plain layout needs four ds_read_u16. Filled through registers (lds_fill).
template <int G, int S, int MASK> struct paired : swizzle<G, S, MASK> {
  static constexpr bool PAIRED = true;
};

template <class T, int R, int C, class SW = no_swizzle> struct st {
  static constexpr bool TR = SW::TRANSPOSED, PAIRED = SW::PAIRED;
  static_assert(!PAIRED || (sizeof(T) == 2 && R % 2 == 0), "a paired tile holds 16-bit elements, rows in pairs");
  // ROW_BYTES: of a stored row (a column of the tile when TR, two rows when PAIRED); PANEL_BYTES: of a stored
  // row within a panel
  static constexpr int ROWS = R, COLS = C, ROW_BYTES = (TR ? R : PAIRED ? 2 * C : C) * (int)sizeof(T),
                       BYTES = R * C * (int)sizeof(T);
  static constexpr int PANEL_BYTES = SW::PANEL ? SW::PANEL : ROW_BYTES, STORED_ROWS = TR ? C : PAIRED ? R / 2 : R;
  static_assert(ROW_BYTES % PANEL_BYTES == 0 && PANEL_BYTES % SW::GRANULE == 0,
                "a shared tile row must be whole panels of whole swizzle granules");
  // no swizzle, no panels, no pairs: every element's byte is linear in (row, column)
  static constexpr bool LINEAR = SW::PERIOD == 1 && PANEL_BYTES == ROW_BYTES && !PAIRED;
  using dtype = T;
  using swz = SW;
  uint8_t* base;
  // byte of element j of stored row i
  TILES_DEV static constexpr uint32_t stored(int i, int j) {
    const int b = j * (int)sizeof(T), p = b / PANEL_BYTES, in = b % PANEL_BYTES;
    return p * STORED_ROWS * PANEL_BYTES + i * PANEL_BYTES + SW::unit(i, in / SW::GRANULE) * SW::GRANULE + in % SW::GRANULE;
  }
  // (stored row, byte in the row) of LDS byte p of the tile: stored()'s inverse. Unsigned: p is never negative, and
  // a signed division or remainder by a power of two costs a sign fix-up of 3-4 VALU each (a fill's lane offsets,
  // an edge tile's checked loads)
  TILES_DEV static constexpr void position(uint32_t p, int& i, int& b) {
    constexpr uint32_t PANEL = STORED_ROWS * PANEL_BYTES, G = SW::GRANULE;
    const uint32_t q = p % PANEL, in = q % PANEL_BYTES;
    i = (int)(q / PANEL_BYTES);
    b = (int)(p / PANEL * PANEL_BYTES + SW::unit(i, in / G) * G + in % G);
  }
  TILES_DEV static constexpr uint32_t offset(int r, int c) {
    return TR ? stored(c, r) : PAIRED ? stored(r / 2, 2 * c + r % 2) : stored(r, c);
  }
  TILES_DEV T& at(int r, int c) const { return *(T*)(base + offset(r, c)); }
  // (r0 + r, c) with r0 a multiple of the swizzle's period: row r0 is a plain byte offset, so an
  // unrolled walk down the rows keeps one address per (r, c) and the steps become immediate offsets.
  TILES_DEV T& at(int r0, int r, int c) const {
    if constexpr (TR || PAIRED) return at(r0 + r, c);
    else return *(T*)(base + r0 * PANEL_BYTES + offset(r, c));
  }
#if defined(TILES_GFX950)
  // ds_read_b64_tr_b16 at (r0 + r, c), r0 a multiple of the swizzle's period (as at()): 4 elements of
  // column c .. read transposed across the lane's group of 16 (arch::ds_read_tr16_b64).
  TILES_DEV void read_tr(int r0, int r, int c, T* out) const {
    static_assert(sizeof(T) == 2, "the transposing LDS read is for 16-bit elements");
    arch::ds_read_tr16_b64(base + r0 * PANEL_BYTES + offset(r, c), (uint32_t*)out);
  }
#endif
  // N consecutive elements of row r from column c (c a multiple of N): one ds_read (ds_write) of
  // N*sizeof(T) bytes per granule.
  template <int N> TILES_DEV void read_run(int r, int c, T* out) const {
    static_assert(!TR, "a row run of a transposed tile is not contiguous");
    if constexpr (PAIRED && N % 2) {
      TILES_UNROLL for (int i = 0; i < N; ++i) out[i] = at(r, c + i);
    } else if constexpr (PAIRED) {
      uint32_t w[N];
      read_pairs<N>(r, c, w);
      keep_row<N>(r, w, out);
    } else {
      move_run<N, false>(r, c, (uint8_t*)out);
    }
  }
  // A paired tile's row run in two halves: the pairs' words (one 16-byte read per 4 elements), then this row's
  // halves of them (one v_perm per two elements). An MMA reads a group's words, waits once, then selects: a
  // v_perm right after its read waits for that read alone (one s_waitcnt per read, the reads serialized).
  template <int N> TILES_DEV void read_pairs(int r, int c, uint32_t* w) const {
    static_assert(PAIRED && N % 2 == 0, "a paired tile's row run is whole words");
    move_run<2 * N, false>(r / 2, 2 * c, (uint8_t*)w);
  }
  template <int N> TILES_DEV static void keep_row(int r, const uint32_t* w, T* out) {
    const uint32_t sel = r % 2 ? 0x07060302u : 0x05040100u;
    uint32_t o[N / 2];
    TILES_UNROLL for (int i = 0; i < N / 2; ++i) o[i] = arch::perm(w[2 * i + 1], w[2 * i], sel);
    __builtin_memcpy(out, o, sizeof(o));
  }
  template <int N> TILES_DEV void write_run(int r, int c, const T* in) const {
    static_assert(!TR && !PAIRED, "a row run of a transposed or paired tile is not contiguous");
    move_run<N, true>(r, c, (uint8_t*)const_cast<T*>(in));
  }
  // N consecutive elements of column c from row r0 + r (r a multiple of N) of a transposed tile: contiguous; of
  // a paired one, N / 2 words down the stored rows, r0 then a whole number of swizzle periods of them (a plain
  // byte offset: an immediate of the read).
  template <int N> TILES_DEV void read_col_run(int r0, int r, int c, T* out) const {
    static_assert(TR || PAIRED, "a column run is contiguous only in a transposed or paired tile");
    if constexpr (TR) {
      move_run<N, false>(c, r0 + r, (uint8_t*)out);
    } else {
      static_assert(N % 2 == 0, "a paired tile's column run is whole pairs");
      TILES_UNROLL for (int i = 0; i < N / 2; ++i) __builtin_memcpy(out + 2 * i, base + (r0 / 2) * PANEL_BYTES + stored(r / 2 + i, 2 * c), 4);
    }
  }
  // N elements of each of rows r, r + 1 (r even) from column c, as N words: the paired tile's fill.
  template <int N> TILES_DEV void write_pairs(int r, int c, const uint32_t* words) const {
    static_assert(PAIRED, "pairs of rows are words of a paired tile");
    move_run<2 * N, true>(r / 2, 2 * c, (uint8_t*)const_cast<uint32_t*>(words));
  }
  template <int N> TILES_DEV void write_col_run(int r, int c, const T* in) const {
    static_assert(TR, "a column run is contiguous only in a transposed tile");
    move_run<N, true>(c, r, (uint8_t*)const_cast<T*>(in));
  }

 private:
  // N elements of stored row i from element j, one ds_read (ds_write) per granule
  template <int N, bool TO_LDS> TILES_DEV void move_run(int i0, int j0, uint8_t* regs) const {
    constexpr int bytes = N * (int)sizeof(T), piece = bytes < SW::GRANULE ? bytes : SW::GRANULE;
    TILES_UNROLL for (int i = 0; i < bytes / piece; ++i) {
      uint8_t* p = base + stored(i0, j0 + i * piece / (int)sizeof(T));
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
