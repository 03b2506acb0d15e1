// tiles_metal/memory.h - moving tiles between device memory, threadgroup memory and simdgroup registers.
// Global <-> threadgroup copies are cooperative over the whole threadgroup; register tiles move per simdgroup
// with simdgroup_load/simdgroup_store. Elements past the end of a global read as 0 and are never written.
#pragma once
#include "elements.h"

namespace tiles_metal {

constant constexpr int VEC = 4;  // elements per vectorized global access (8 bytes of half, 16 of float)

// ------------------------------------------------------------------ global <-> threadgroup (whole block)

// dst <- src[at], converting the element type if they differ.
template <typename T, typename U, int R, int C>
inline void load(const thread st<T, R, C>& dst, const thread gl<U>& src, coord at, const thread block& b) {
    const bool inside = at.b < src.batch && at.d < src.depth;
    const bool full = inside && at.r + R <= src.rows && at.c + C <= src.cols;
    if (full && src.stride_r % VEC == 0) {
        // Rows are whole and 4-element aligned (tile columns are multiples of 8): one vector per thread per step.
        for (int i = b.tid; i < R * C / VEC; i += b.nthreads) {
            const int r = i / (C / VEC), c = (i % (C / VEC)) * VEC;
            const vec<U, VEC> x = *(device const vec<U, VEC>*)src.at(at.b, at.d, at.r + r, at.c + c);
            *(threadgroup vec<T, VEC>*)dst.at(r, c) = vec<T, VEC>(x);
        }
    } else {
        for (int i = b.tid; i < R * C; i += b.nthreads) {
            const int r = i / C, c = i % C;
            const bool ok = inside && at.r + r < src.rows && at.c + c < src.cols;
            *dst.at(r, c) = ok ? T(*src.at(at.b, at.d, at.r + r, at.c + c)) : T(0);
        }
    }
}

// dst[at] <- src, converting the element type if they differ; only elements inside dst are written.
template <typename T, typename U, int R, int C>
inline void store(const thread gl<T>& dst, const thread st<U, R, C>& src, coord at, const thread block& b) {
    if (at.b >= dst.batch || at.d >= dst.depth) return;
    for (int i = b.tid; i < R * C; i += b.nthreads) {
        const int r = i / C, c = i % C;
        if (at.r + r < dst.rows && at.c + c < dst.cols) *dst.at(at.b, at.d, at.r + r, at.c + c) = T(*src.at(r, c));
    }
}

// Every element of a threadgroup tile or vector <- value (cooperative).
template <typename T, int R, int C>
inline void fill(const thread st<T, R, C>& dst, float value, const thread block& b) {
    for (int i = b.tid; i < R * C; i += b.nthreads) dst.data[i] = T(value);
}

template <typename T, int N>
inline void fill(const thread sv<T, N>& dst, float value, const thread block& b) {
    for (int i = b.tid; i < N; i += b.nthreads) dst.data[i] = T(value);
}

// ------------------------------------------------------------------ threadgroup <-> registers (per simdgroup)

// The simdgroup's register tile <- the rows row0.. and columns col0.. of a threadgroup tile.
template <typename T, int R, int C, int SR, int SC>
inline void load(thread rt<T, R, C>& dst, const thread st<T, SR, SC>& src, int row0, int col0, const thread block&) {
    for (int i = 0; i < R / BASE; ++i)
        for (int j = 0; j < C / BASE; ++j)
            simdgroup_load(dst.m[i][j], src.at(row0 + i * BASE, col0 + j * BASE), SC);
}

// The same with a conversion of the element type, element by element.
template <typename T, typename U, int R, int C, int SR, int SC>
inline void load(thread rt<T, R, C>& dst, const thread st<U, SR, SC>& src, int row0, int col0, const thread block& b) {
    const int r = elem_row(b.lane), c = elem_col(b.lane);
    for (int i = 0; i < R / BASE; ++i) {
        for (int j = 0; j < C / BASE; ++j) {
            threadgroup U* p = src.at(row0 + i * BASE + r, col0 + j * BASE + c);
            set_elements(dst.m[i][j], b, float(p[0]), float(p[1]));
        }
    }
}

// The rows row0.. and columns col0.. of a threadgroup tile <- the simdgroup's register tile.
template <typename T, int R, int C, int SR, int SC>
inline void store(const thread st<T, SR, SC>& dst, const thread rt<T, R, C>& src, int row0, int col0, const thread block&) {
    for (int i = 0; i < R / BASE; ++i) {
        for (int j = 0; j < C / BASE; ++j) {
            simdgroup_matrix<T, BASE, BASE> m = src.m[i][j];
            simdgroup_store(m, dst.at(row0 + i * BASE, col0 + j * BASE), SC);
        }
    }
}

template <typename T, typename U, int R, int C, int SR, int SC>
inline void store(const thread st<T, SR, SC>& dst, const thread rt<U, R, C>& src, int row0, int col0, const thread block& b) {
    const int r = elem_row(b.lane), c = elem_col(b.lane);
    for (int i = 0; i < R / BASE; ++i) {
        for (int j = 0; j < C / BASE; ++j) {
            float x0, x1;
            get_elements(src.m[i][j], b, x0, x1);
            threadgroup T* p = dst.at(row0 + i * BASE + r, col0 + j * BASE + c);
            p[0] = T(x0);
            p[1] = T(x1);
        }
    }
}

// ------------------------------------------------------------------ global <-> registers (per simdgroup)
// Which lane touches which element of a global is the same for a load and a store of the same tile position
// (whole 8x8 blocks: simdgroup_load/store; blocks at an edge: elements.h's positions), whatever the element
// types, so a block that reads back its own writes reads them in the lane that wrote them.

// The simdgroup's register tile <- src at (at.r.., at.c..), converted to the tile's type; zero past the end.
template <typename T, typename U, int R, int C>
inline void load(thread rt<T, R, C>& dst, const thread gl<U>& src, coord at, const thread block& b) {
    const bool inside = at.b < src.batch && at.d < src.depth;
    const int r = elem_row(b.lane), c = elem_col(b.lane);
    for (int i = 0; i < R / BASE; ++i) {
        for (int j = 0; j < C / BASE; ++j) {
            const int gr = at.r + i * BASE, gc = at.c + j * BASE;
            if (inside && gr + BASE <= src.rows && gc + BASE <= src.cols) {
                simdgroup_matrix<U, BASE, BASE> m;
                simdgroup_load(m, (device const U*)src.at(at.b, at.d, gr, gc), src.stride_r);
                convert(dst.m[i][j], m, b);
                continue;
            }
            float x[2];
            for (int e = 0; e < 2; ++e) {
                const bool ok = inside && gr + r < src.rows && gc + c + e < src.cols;
                x[e] = ok ? float(*src.at(at.b, at.d, gr + r, gc + c + e)) : 0.0f;
            }
            set_elements(dst.m[i][j], b, x[0], x[1]);
        }
    }
}

// dst at (at.r.., at.c..) <- the simdgroup's register tile, converted to the global's type.
template <typename T, typename U, int R, int C>
inline void store(const thread gl<T>& dst, const thread rt<U, R, C>& src, coord at, const thread block& b) {
    if (at.b >= dst.batch || at.d >= dst.depth) return;
    const int r = elem_row(b.lane), c = elem_col(b.lane);
    for (int i = 0; i < R / BASE; ++i) {
        for (int j = 0; j < C / BASE; ++j) {
            const int gr = at.r + i * BASE, gc = at.c + j * BASE;
            if (gr + BASE <= dst.rows && gc + BASE <= dst.cols) {
                simdgroup_matrix<T, BASE, BASE> m;
                convert(m, src.m[i][j], b);
                simdgroup_store(m, (device T*)dst.at(at.b, at.d, gr, gc), dst.stride_r);
                continue;
            }
            float x[2];
            get_elements(src.m[i][j], b, x[0], x[1]);
            for (int e = 0; e < 2; ++e)
                if (gr + r < dst.rows && gc + c + e < dst.cols) *dst.at(at.b, at.d, gr + r, gc + c + e) = T(x[e]);
        }
    }
}

// dst at (at.r.., at.c..) += the simdgroup's f32 register tile, atomically (tiles of several blocks may overlap).
template <int R, int C>
inline void atomic_add(const thread gl<float>& dst, const thread rt<float, R, C>& src, coord at, const thread block& b) {
    if (at.b >= dst.batch || at.d >= dst.depth) return;
    const int r = elem_row(b.lane), c = elem_col(b.lane);
    for (int i = 0; i < R / BASE; ++i) {
        for (int j = 0; j < C / BASE; ++j) {
            const int gr = at.r + i * BASE + r, gc = at.c + j * BASE + c;
            float x[2];
            get_elements(src.m[i][j], b, x[0], x[1]);
            for (int e = 0; e < 2; ++e)
                if (gr < dst.rows && gc + e < dst.cols)
                    atomic_fetch_add_explicit((device atomic_float*)dst.at(at.b, at.d, gr, gc + e), x[e],
                                              memory_order_relaxed);
        }
    }
}

// ------------------------------------------------------------------ vectors

// A register vector <- N consecutive elements of a global's last dim starting at at.c (every lane reads all).
template <typename T, typename U, int N>
inline void load(thread rv<T, N>& dst, const thread gl<U>& src, coord at) {
    const bool inside = at.b < src.batch && at.d < src.depth && at.r < src.rows;
    for (int i = 0; i < N; ++i)
        dst.v[i] = (inside && at.c + i < src.cols) ? T(float(*src.at(at.b, at.d, at.r, at.c + i))) : T(0);
}

// N consecutive elements of a global <- a register vector; the lanes of one simdgroup share the writes, and
// `writer` says whether this simdgroup writes at all (vectors held by every simdgroup are written by one).
template <typename T, typename U, int N>
inline void store(const thread gl<T>& dst, const thread rv<U, N>& src, coord at, bool writer, const thread block& b) {
    if (!writer || at.b >= dst.batch || at.d >= dst.depth || at.r >= dst.rows) return;
    for (int i = b.lane; i < N; i += SIMD)
        if (at.c + i < dst.cols) *dst.at(at.b, at.d, at.r, at.c + i) = T(src.v[i]);
}

// A threadgroup vector <- a global's elements (cooperative).
template <typename T, typename U, int N>
inline void load(const thread sv<T, N>& dst, const thread gl<U>& src, coord at, const thread block& b) {
    const bool inside = at.b < src.batch && at.d < src.depth && at.r < src.rows;
    for (int i = b.tid; i < N; i += b.nthreads)
        dst.data[i] = (inside && at.c + i < src.cols) ? T(float(*src.at(at.b, at.d, at.r, at.c + i))) : T(0);
}

// N consecutive elements of a global <- a threadgroup vector (cooperative).
template <typename T, int N>
inline void store(const thread gl<T>& dst, const thread sv<T, N>& src, coord at, const thread block& b) {
    if (at.b >= dst.batch || at.d >= dst.depth || at.r >= dst.rows) return;
    for (int i = b.tid; i < N; i += b.nthreads)
        if (at.c + i < dst.cols) *dst.at(at.b, at.d, at.r, at.c + i) = src.data[i];
}

// A register vector <- elements first.. of a threadgroup vector.
template <typename T, typename U, int N, int M>
inline void load(thread rv<T, N>& dst, const thread sv<U, M>& src, int first) {
    for (int i = 0; i < N; ++i) dst.v[i] = T(float(src.data[first + i]));
}

// Elements first.. of a threadgroup vector <- a register vector (one simdgroup writes, its lanes sharing).
template <typename T, typename U, int N, int M>
inline void store(const thread sv<T, M>& dst, const thread rv<U, N>& src, int first, bool writer, const thread block& b) {
    if (!writer) return;
    for (int i = b.lane; i < N; i += SIMD) dst.data[first + i] = T(src.v[i]);
}

}  // namespace tiles_metal
