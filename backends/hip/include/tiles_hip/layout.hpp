// tiles_hip/layout.hpp: register-tile layouts. The MFMA shape is part of the type.
//
// A layout says where element e of lane l of one fragment sits (row, col), and back. The formulas
// are those of tiles/targets.py (AMD's MFMA operand maps), so the CPU engine and this library agree
// on one source of truth:
//   acc<M>     the C/D operand of an M x M MFMA: lane l holds column l % M, rows in groups of 4
//   opa<M, K>  the A operand of an M x M x K MFMA: lane l holds row l % M, K-run E*(l / M) .. +E-1
//              (B uses the same map with rows and columns swapped; it is read from LDS, see mma.hpp)
//   opa<M, K, true>  the same lanes and rows, K in the order acc_t holds its columns (runs of 4)
//   acc_t<M>   the accumulator of the transpose: the tile is computed as D^T (mma.hpp), so lane l holds
//              row l % M and columns in runs of 4 -- the A operand's map, so copying it into opa<M, K, true>
//              moves no data between lanes (attention's P)
#pragma once
#include "types.hpp"

namespace tiles_hip {
template <int M> struct acc {
  static_assert(M == 16 || M == 32, "MFMA accumulators are 16x16 or 32x32");
  static constexpr int FR = M, FC = M, E = M * M / 64, GROUPS = 64 / M;
  TILES_DEV static constexpr int row(int l, int e) { return 4 * GROUPS * (e / 4) + 4 * (l / M) + e % 4; }
  TILES_DEV static constexpr int col(int l, int) { return l % M; }
  TILES_DEV static constexpr int lane_of(int r, int c) { return c + M * ((r / 4) % GROUPS); }
  TILES_DEV static constexpr int e_of(int r, int) { return 4 * (r / (4 * GROUPS)) + r % 4; }
  // lanes holding the same rows differ in lane bits [ROW_LO, ROW_HI); the same columns in [COL_LO, COL_HI)
  static constexpr int ROW_LO = 1, ROW_HI = M, COL_LO = M, COL_HI = 64;
  static constexpr bool ROW_BY_LANE = false, COL_BY_LANE = true;  // does (row / col) depend on the lane only?
  static constexpr int RUN = 1;  // a lane's elements that are consecutive columns of one row
};

// K order of an operand fragment: where element e of lane l sits along the MFMA's K. ACC_K: in runs of 4,
// lane groups interleaved as the accumulator's rows are (4 GROUPS (e / 4) + 4 (l / M) + e % 4); the sum over
// K does not care, as long as both operands of one MFMA take the same order (mma.hpp).
template <int M, int E, bool ACC_K> struct k_order {
  static constexpr int GROUPS = 64 / M, RUN = ACC_K && E > 4 ? 4 : E;
  TILES_DEV static constexpr int at(int l, int e) {
    return RUN == E ? E * (l / M) + e : 4 * GROUPS * (e / 4) + 4 * (l / M) + e % 4;
  }
  TILES_DEV static constexpr int group_of(int c) { return RUN == E ? c / E : (c / 4) % GROUPS; }
  TILES_DEV static constexpr int e_of(int c) { return RUN == E ? c % E : 4 * (c / (4 * GROUPS)) + c % 4; }
};
template <int M, int K, bool ACC_K = false> struct opa {
  static constexpr int FR = M, FC = K, E = M * K / 64;
  using order = k_order<M, E, ACC_K>;
  TILES_DEV static constexpr int row(int l, int) { return l % M; }
  TILES_DEV static constexpr int col(int l, int e) { return order::at(l, e); }
  TILES_DEV static constexpr int lane_of(int r, int c) { return r + M * order::group_of(c); }
  TILES_DEV static constexpr int e_of(int, int c) { return order::e_of(c); }
  static constexpr int ROW_LO = M, ROW_HI = 64, COL_LO = 1, COL_HI = M;
  static constexpr bool ROW_BY_LANE = true, COL_BY_LANE = false;
  static constexpr int RUN = order::RUN;  // a lane's elements that are consecutive columns of one row
};

// row_runs<M, RUN>: a tile no MMA touches, held for its global accesses: lane l holds row l % M and RUN consecutive
// columns, the 64 / M lanes of a row on neighbouring runs (the A operand's map at K = 64 RUN / M). A 16-bit
// global's row moves 16 bytes a lane an access at RUN 8 (global.hpp, runs); lanes sharing rows differ in lane
// bits [M, 64), two butterfly steps for a row reduction at M = 16.
// A type of its own (the operand's map by inheritance), so that a global access can tell a row kernel's tile
// (`streams_rows`: global.hpp moves its rows past an array's end as runs) from an MMA operand, whose kernels sit at
// the register limit (attention backward's K and V on gfx942, 256 VGPRs: that path's code spilled it to scratch)
template <int M, int RUN> struct row_runs : opa<M, 64 / M * RUN> {};
template <class L> constexpr bool streams_rows = false;
template <int M, int RUN> constexpr bool streams_rows<row_runs<M, RUN>> = true;

template <int M> struct acc_t {
  using T = acc<M>;
  static constexpr int FR = M, FC = M, E = T::E, GROUPS = T::GROUPS;
  TILES_DEV static constexpr int row(int l, int e) { return T::col(l, e); }
  TILES_DEV static constexpr int col(int l, int e) { return T::row(l, e); }
  TILES_DEV static constexpr int lane_of(int r, int c) { return T::lane_of(c, r); }
  TILES_DEV static constexpr int e_of(int r, int c) { return T::e_of(c, r); }
  static constexpr int ROW_LO = T::COL_LO, ROW_HI = T::COL_HI, COL_LO = T::ROW_LO, COL_HI = T::ROW_HI;
  static constexpr bool ROW_BY_LANE = true, COL_BY_LANE = false;
  static constexpr int RUN = 4;
};

// A register tile: the R x C part of a block tile one wave owns. WC = 1: the block's rows split over the
// waves (R = block rows / waves), every column; WC > 1: the waves a grid of (waves / WC) x WC, wave w
// owning rows (w / WC) R .. and columns (w % WC) C .. (an accumulator only MMAs, fills, maps and stores touch:
// wider wave tiles read fewer operand fragments per MFMA).
template <class T, int R, int C, class L, int WC = 1> struct rt {
  static_assert(R % L::FR == 0 && C % L::FC == 0, "register tile is not a whole number of fragments");
  using dtype = T;
  using layout = L;
  static constexpr int ROWS = R, COLS = C, FM = R / L::FR, FN = C / L::FC, E = L::E, WAVE_COLS = WC;
  T v[FM][FN][E];
  // this wave's first row and column in the block tile; of wave w (a VGPR value where w is one: LDS
  // addresses then fold it into the lanes' loop-invariant offsets instead of rebuilding it every iteration)
  TILES_DEV static int row0(int w = arch::wave_id()) { return w / WC * R; }
  TILES_DEV static int col0(int w = arch::wave_id()) { return w % WC * C; }
};
// A row vector (one value per row of a tile of layout L, split over waves like its rows) and a column
// vector (one per column, every wave holds all of it). Each lane keeps the values of the rows / columns
// its E elements touch, so broadcasts are register-only: one per element, or a single one where all of
// a lane's elements share their row (column); at(i, e) is the value element e of fragment i meets.
template <class T, int R, class L> struct rv {
  using dtype = T;
  using layout = L;
  static constexpr int N = R, FM = R / L::FR, E = L::E, VE = L::ROW_BY_LANE ? 1 : E;
  T v[FM][VE];
  TILES_DEV T& at(int m, int e) { return v[m][VE == 1 ? 0 : e]; }
  TILES_DEV const T& at(int m, int e) const { return v[m][VE == 1 ? 0 : e]; }
};
template <class T, int C, class L> struct cv {
  using dtype = T;
  using layout = L;
  static constexpr int N = C, FN = C / L::FC, E = L::E, VE = L::COL_BY_LANE ? 1 : E;
  T v[FN][VE];
  TILES_DEV T& at(int n, int e) { return v[n][VE == 1 ? 0 : e]; }
  TILES_DEV const T& at(int n, int e) const { return v[n][VE == 1 ? 0 : e]; }
};
// An MFMA operand read from LDS stored with M (N) contiguous, through CDNA4's transposing read (A of
// mma_AtB, B of mma_AB, attention's P on its way to the A layout): the lane's fragment (column l % M,
// K run E (l / M) ..) is E / 4 reads of 4 K elements; in read h the 16 lanes of a group read the 4 x 16 block at K rows E (l / M) + 4 h .., columns (l % M) - (l % 16) ..,
// lane p of the group row p / 4, columns 4 (p % 4) .. + 3 (arch::ds_read_tr16_b64).
// FK: the fragment's K order (k_order's), whose runs of 4 each read h fetches.
template <int M, int E, class FK = k_order<M, E, false>> struct tr_frag {
  TILES_DEV static constexpr int k(int lane, int h) { return FK::at(lane, 4 * h) + (lane % 16) / 4; }
  TILES_DEV static constexpr int c(int lane) { return lane % M - lane % 16 + 4 * (lane % 4); }
  // read h's K rows are read 0's plus a lane-independent step (a linear tile: an immediate offset)
  static constexpr bool linear_in_h() {
    for (int l = 0; l < 64; ++l)
      for (int h = 0; h < E / 4; ++h)
        if (k(l, h) - k(l, 0) != k(0, h) - k(0, 0)) return false;
    return true;
  }
};
}  // namespace tiles_hip
