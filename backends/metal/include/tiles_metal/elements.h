// tiles_metal/elements.h - how a lane reaches the elements of an 8x8 simdgroup_matrix at known positions, which
// every position-dependent op (reductions, broadcasts, masks, dropout, conversions, edge blocks) is built on.
//
// Lane l works on two elements of a matrix: row elem_row(l), columns elem_col(l) and elem_col(l) + 1.
// * By default the positions are our own: the matrix goes through the simdgroup's 8x8 scratch in threadgroup
//   memory (simdgroup_store, the lanes read/write elements 2l and 2l+1, simdgroup_load), a simdgroup_barrier at
//   each hand-over. Correct whatever Apple's undocumented lane order is.
// * With TILES_METAL_LANE_MAP defined, the positions are those of tiles/targets.py's apple atom (MLX's layout)
//   and a lane uses its own thread_elements(), no threadgroup memory. The runtime defines it only after the
//   lanemap.py check kernel has shown that this device lays out float and half matrices so, and never for
//   kernels with bfloat tiles (whose layout the check does not cover).
#pragma once
#include "types.h"

namespace tiles_metal {

#ifdef TILES_METAL_LANE_MAP
// MLX's layout: lane bits (b4 b3 b2 b1 b0) hold row 4 b4 + 2 b2 + b1, columns 4 b3 + 2 b0 (+1).
inline int elem_row(ushort l) { return (l / 4 & 4) + (l / 2) % 4; }
inline int elem_col(ushort l) { return (l / 4 & 2) * 2 + (l % 2) * 2; }
inline ushort row_owner(int r) { return ushort((r >> 2) << 4 | ((r >> 1) & 1) << 2 | (r & 1) << 1); }
inline ushort cols_owner(int c2) { return ushort((c2 >> 1) << 3 | (c2 & 1)); }
constant constexpr ushort ROW_PEERS[2] = {1, 8};      // lanes of one row differ in these bits
constant constexpr ushort COL_PEERS[3] = {2, 4, 16};  // lanes of one column pair differ in these bits
#else
// Our scratch layout: lane l holds elements 2l, 2l+1 of the row-major 8x8.
inline int elem_row(ushort l) { return l / 4; }
inline int elem_col(ushort l) { return 2 * (l % 4); }
inline ushort row_owner(int r) { return ushort(4 * r); }
inline ushort cols_owner(int c2) { return ushort(c2); }
constant constexpr ushort ROW_PEERS[2] = {1, 2};
constant constexpr ushort COL_PEERS[3] = {4, 8, 16};

template <typename T>
inline threadgroup T* scratch_as(const thread block& b) {
    return (threadgroup T*)b.scratch + 2 * b.lane;
}
#endif

// This lane's two elements of m.
template <typename T>
inline void get_elements(simdgroup_matrix<T, BASE, BASE> m, const thread block& b, thread float& x0, thread float& x1) {
#ifdef TILES_METAL_LANE_MAP
    const vec<T, 2> x = m.thread_elements();
    x0 = float(x[0]);
    x1 = float(x[1]);
#else
    simdgroup_store(m, (threadgroup T*)b.scratch, BASE);
    simdgroup_barrier(mem_flags::mem_threadgroup);  // the whole matrix is in before any lane reads
    threadgroup T* s = scratch_as<T>(b);
    x0 = float(s[0]);
    x1 = float(s[1]);
    simdgroup_barrier(mem_flags::mem_threadgroup);  // every lane has read before the scratch is reused
#endif
}

// Set this lane's two elements of m (rounded to T); every lane of the simdgroup calls it.
template <typename T>
inline void set_elements(thread simdgroup_matrix<T, BASE, BASE>& m, const thread block& b, float x0, float x1) {
#ifdef TILES_METAL_LANE_MAP
    m.thread_elements() = vec<T, 2>(T(x0), T(x1));
#else
    threadgroup T* s = scratch_as<T>(b);
    s[0] = T(x0);
    s[1] = T(x1);
    simdgroup_barrier(mem_flags::mem_threadgroup);  // every lane has written before the matrix is read
    simdgroup_load(m, (threadgroup T*)b.scratch, BASE);
    simdgroup_barrier(mem_flags::mem_threadgroup);  // ... and read before the scratch is reused
#endif
}

// dst = f(src, row, col) for every element, row and col counted within the tile.
template <typename T, int R, int C, typename F>
inline void map_positions(thread rt<T, R, C>& dst, const thread rt<T, R, C>& src, F f, const thread block& b) {
    const int r = elem_row(b.lane), c = elem_col(b.lane);
    for (int i = 0; i < R / BASE; ++i) {
        for (int j = 0; j < C / BASE; ++j) {
            float x0, x1;
            get_elements(src.m[i][j], b, x0, x1);
            set_elements(dst.m[i][j], b, f(x0, i * BASE + r, j * BASE + c), f(x1, i * BASE + r, j * BASE + c + 1));
        }
    }
}

// dst[:, 2j] = src[:, 2j+1], dst[:, 2j+1] = src[:, 2j]; dst may be src. A lane's two elements are columns
// elem_col(l) and elem_col(l) + 1 with elem_col(l) even, in both position modes: one column pair, exchanged
// in the lane.
template <typename T, int R, int C>
inline void swap_pairs(thread rt<T, R, C>& dst, const thread rt<T, R, C>& src, const thread block& b) {
    for (int i = 0; i < R / BASE; ++i) {
        for (int j = 0; j < C / BASE; ++j) {
            float x0, x1;
            get_elements(src.m[i][j], b, x0, x1);
            set_elements(dst.m[i][j], b, x1, x0);
        }
    }
}

// One matrix converted to another element type (rounding to nearest even), element by element at known
// positions: matrices of different element types need not share a lane layout.
template <typename T, typename U>
inline void convert(thread simdgroup_matrix<T, BASE, BASE>& dst, const thread simdgroup_matrix<U, BASE, BASE>& src,
                    const thread block& b) {
    float x0, x1;
    get_elements(src, b, x0, x1);
    set_elements(dst, b, x0, x1);
}

template <typename T>
inline void convert(thread simdgroup_matrix<T, BASE, BASE>& dst, const thread simdgroup_matrix<T, BASE, BASE>& src,
                    const thread block&) {
    dst = src;
}

// A register tile converted to another element type.
template <typename T, typename U, int R, int C>
inline void convert(thread rt<T, R, C>& dst, const thread rt<U, R, C>& src, const thread block& b) {
    for (int i = 0; i < R / BASE; ++i)
        for (int j = 0; j < C / BASE; ++j) convert(dst.m[i][j], src.m[i][j], b);
}

}  // namespace tiles_metal
