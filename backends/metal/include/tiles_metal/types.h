// tiles_metal/types.h - the tile types. Block-level tiles of the IR become per-simdgroup tiles here: a register
// tile of the block with R rows is, in each of its NW simdgroups, an rt of R/NW rows (the codegen does the split).
#pragma once
#include "base.h"

namespace tiles_metal {

// A register tile owned by one simdgroup: (R/8) x (C/8) simdgroup matrices. Layout "row"/"col" of the IR has no
// meaning here: simdgroup_load can transpose, so one type serves every operand position.
template <typename T, int R, int C>
struct rt {
    static_assert(R % BASE == 0 && C % BASE == 0, "register tiles are made of 8x8 simdgroup matrices");
    typedef T dtype;
    static constant constexpr int rows = R, cols = C, height = R / BASE, width = C / BASE;
    simdgroup_matrix<T, BASE, BASE> m[R / BASE][C / BASE];
};

// A register vector, every lane of the simdgroup holding all N values (the simdgroup's rows, or a block's columns).
template <typename T, int N>
struct rv {
    typedef T dtype;
    static constant constexpr int length = N;
    T v[N];
};

// A threadgroup tile, row-major with C elements per row.
template <typename T, int R, int C>
struct st {
    typedef T dtype;
    static constant constexpr int rows = R, cols = C;
    threadgroup T* data;
    threadgroup T* at(int r, int c) const { return data + r * C + c; }
};

// A threadgroup vector.
template <typename T, int N>
struct sv {
    typedef T dtype;
    static constant constexpr int length = N;
    threadgroup T* data;
};

// A global array seen as 4-D (batch, depth, rows, cols), last dim contiguous.
template <typename T>
struct gl {
    typedef T dtype;
    device T* data;
    int batch, depth, rows, cols;
    long stride_b, stride_d, stride_r;
    device T* at(int b, int d, int r, int c) const {
        return data + b * stride_b + d * stride_d + long(r) * stride_r + c;
    }
};

// A global array from its pointer and 7 ints of the launch: batch, depth, rows, cols, then the strides (in
// elements) of batch, depth and rows.
template <typename T>
inline gl<T> make_gl(device T* data, constant int* d) {
    gl<T> g;
    g.data = data;
    g.batch = d[0];
    g.depth = d[1];
    g.rows = d[2];
    g.cols = d[3];
    g.stride_b = d[4];
    g.stride_d = d[5];
    g.stride_r = d[6];
    return g;
}

// A threadgroup tile (or vector) at a place in the threadgroup arena.
template <typename T, int R, int C>
inline st<T, R, C> make_st(threadgroup uchar* at) {
    st<T, R, C> s;
    s.data = (threadgroup T*)at;
    return s;
}

template <typename T, int N>
inline sv<T, N> make_sv(threadgroup uchar* at) {
    sv<T, N> s;
    s.data = (threadgroup T*)at;
    return s;
}

// The position of a tile inside a global: batch and depth index, and the first row and column of the tile.
struct coord {
    int b, d, r, c;
};

inline coord make_coord(int b, int d, int r, int c) {
    coord x;
    x.b = b;
    x.d = d;
    x.r = r;
    x.c = c;
    return x;
}

}  // namespace tiles_metal
