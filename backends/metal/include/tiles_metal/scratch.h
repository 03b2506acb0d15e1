// tiles_metal/scratch.h - the per-simdgroup 8x8 scratch through which every position-dependent op passes.
// Protocol: a matrix is stored into the scratch (to_scratch), each lane then works on the two elements we assign it,
// 2*lane and 2*lane+1 of the row-major 8x8 (row lane/4, columns 2*(lane%4) and +1), and every use ends with a
// simdgroup_barrier, so that the next to_scratch cannot overwrite what a slower lane still reads.
#pragma once
#include "types.h"

namespace tiles_metal {

template <typename T>
inline threadgroup T* scratch_as(const thread block& b) {
    return (threadgroup T*)b.scratch;
}

// Write a matrix to the scratch and make it visible to every lane of the simdgroup.
template <typename T>
inline void to_scratch(simdgroup_matrix<T, BASE, BASE> m, const thread block& b) {
    simdgroup_store(m, scratch_as<T>(b), BASE);
    simdgroup_barrier(mem_flags::mem_threadgroup);
}

// Read the scratch back into a matrix after the lanes have written their elements.
template <typename T>
inline void from_scratch(thread simdgroup_matrix<T, BASE, BASE>& m, const thread block& b) {
    simdgroup_barrier(mem_flags::mem_threadgroup);
    simdgroup_load(m, scratch_as<T>(b), BASE);
    simdgroup_barrier(mem_flags::mem_threadgroup);
}

// The lanes are done reading the scratch.
inline void release_scratch() {
    simdgroup_barrier(mem_flags::mem_threadgroup);
}

// dst = f(src, row, col) for every element, row and col counted within the tile.
template <typename T, int R, int C, typename F>
inline void map_positions(thread rt<T, R, C>& dst, const thread rt<T, R, C>& src, F f, const thread block& b) {
    const int r = scratch_row(b.lane), c = scratch_col(b.lane);
    threadgroup T* s = scratch_as<T>(b) + 2 * b.lane;
    for (int i = 0; i < R / BASE; ++i) {
        for (int j = 0; j < C / BASE; ++j) {
            to_scratch(src.m[i][j], b);
            s[0] = T(f(float(s[0]), i * BASE + r, j * BASE + c));
            s[1] = T(f(float(s[1]), i * BASE + r, j * BASE + c + 1));
            from_scratch(dst.m[i][j], b);
        }
    }
}

// One matrix converted to another element type (rounding to nearest even). Matrices of different element
// types need not share a lane layout, so the elements travel through the scratch.
template <typename T, typename U>
inline void convert(thread simdgroup_matrix<T, BASE, BASE>& dst, const thread simdgroup_matrix<U, BASE, BASE>& src,
                    const thread block& b) {
    threadgroup U* in = scratch_as<U>(b) + 2 * b.lane;
    threadgroup T* out = scratch_as<T>(b) + 2 * b.lane;
    to_scratch(src, b);
    const float x0 = float(in[0]), x1 = float(in[1]);
    release_scratch();  // every lane has read before any lane overwrites with the other type
    out[0] = T(x0);
    out[1] = T(x1);
    from_scratch(dst, b);
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
