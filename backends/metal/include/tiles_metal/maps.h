// tiles_metal/maps.h - element-wise ops. On register tiles they run on each lane's own thread_elements(): the
// result does not depend on which element a lane holds, because the same function is applied to every element
// and the operands of a binary map have the same matrix type, hence the same (if undocumented) layout.
#pragma once
#include "elements.h"

namespace tiles_metal {

template <typename T, int R, int C>
inline void fill(thread rt<T, R, C>& dst, float value) {
    for (int i = 0; i < R / BASE; ++i)
        for (int j = 0; j < C / BASE; ++j) dst.m[i][j] = make_filled_simdgroup_matrix<T, BASE, BASE>(T(value));
}

template <typename T, int R, int C>
inline void zero(thread rt<T, R, C>& dst) {
    fill(dst, 0.0f);
}

template <typename T, int N>
inline void fill(thread rv<T, N>& dst, float value) {
    for (int i = 0; i < N; ++i) dst.v[i] = T(value);
}

template <typename T, int N>
inline void zero(thread rv<T, N>& dst) {
    fill(dst, 0.0f);
}

// dst = op(src)
template <typename Op, typename T, int R, int C>
inline void map(thread rt<T, R, C>& dst, const thread rt<T, R, C>& src) {
    const Op op;
    for (int i = 0; i < R / BASE; ++i) {
        for (int j = 0; j < C / BASE; ++j) {
            simdgroup_matrix<T, BASE, BASE> a = src.m[i][j];  // thread_elements() needs a non-const matrix
            vec<T, 2> x = a.thread_elements();
            dst.m[i][j].thread_elements() = vec<T, 2>(op(x[0]), op(x[1]));
        }
    }
}

// dst = op(a, b), b a tile of the same type
template <typename Op, typename T, int R, int C>
inline void map(thread rt<T, R, C>& dst, const thread rt<T, R, C>& a, const thread rt<T, R, C>& b) {
    const Op op;
    for (int i = 0; i < R / BASE; ++i) {
        for (int j = 0; j < C / BASE; ++j) {
            simdgroup_matrix<T, BASE, BASE> ma = a.m[i][j], mb = b.m[i][j];
            vec<T, 2> x = ma.thread_elements(), y = mb.thread_elements();
            dst.m[i][j].thread_elements() = vec<T, 2>(op(x[0], y[0]), op(x[1], y[1]));
        }
    }
}

// dst = op(a, s), s a scalar
template <typename Op, typename T, int R, int C>
inline void map(thread rt<T, R, C>& dst, const thread rt<T, R, C>& a, float s) {
    const Op op;   // in float: the scalar is not rounded to T first (the reference rounds the result once)
    for (int i = 0; i < R / BASE; ++i) {
        for (int j = 0; j < C / BASE; ++j) {
            simdgroup_matrix<T, BASE, BASE> ma = a.m[i][j];
            vec<T, 2> x = ma.thread_elements();
            dst.m[i][j].thread_elements() = vec<T, 2>(T(op(float(x[0]), s)), T(op(float(x[1]), s)));
        }
    }
}

// Register vectors are plain per-lane arrays: any element types mix, computed in float, rounded to dst's type.
template <typename Op, typename T, typename U, int N>
inline void map(thread rv<T, N>& dst, const thread rv<U, N>& src) {
    const Op op;
    for (int i = 0; i < N; ++i) dst.v[i] = T(op(float(src.v[i])));
}

template <typename Op, typename T, typename U, typename V, int N>
inline void map(thread rv<T, N>& dst, const thread rv<U, N>& a, const thread rv<V, N>& b) {
    const Op op;
    for (int i = 0; i < N; ++i) dst.v[i] = T(op(float(a.v[i]), float(b.v[i])));
}

template <typename Op, typename T, typename U, int N>
inline void map(thread rv<T, N>& dst, const thread rv<U, N>& a, float s) {
    const Op op;
    for (int i = 0; i < N; ++i) dst.v[i] = T(op(float(a.v[i]), s));
}

// dst = a where mask is nonzero, else b: a and b register tiles of dst's type and shape, or scalars.
template <typename T, int R, int C> inline vec<float, 2> pair_at(const thread rt<T, R, C>& x, int i, int j) {
    simdgroup_matrix<T, BASE, BASE> m = x.m[i][j];
    vec<T, 2> e = m.thread_elements();
    return vec<float, 2>(float(e[0]), float(e[1]));
}
inline vec<float, 2> pair_at(float s, int, int) { return vec<float, 2>(s, s); }
template <typename T, int N> inline float elem_at(const thread rv<T, N>& x, int i) { return float(x.v[i]); }
inline float elem_at(float s, int) { return s; }

template <typename T, int R, int C, typename A, typename B>
inline void where(thread rt<T, R, C>& dst, const thread rt<T, R, C>& mask, const thread A& a, const thread B& b) {
    for (int i = 0; i < R / BASE; ++i) {
        for (int j = 0; j < C / BASE; ++j) {
            const vec<float, 2> m = pair_at(mask, i, j), x = pair_at(a, i, j), y = pair_at(b, i, j);
            dst.m[i][j].thread_elements() = vec<T, 2>(T(m[0] != 0.0f ? x[0] : y[0]), T(m[1] != 0.0f ? x[1] : y[1]));
        }
    }
}
template <typename T, typename M, int N, typename A, typename B>
inline void where(thread rv<T, N>& dst, const thread rv<M, N>& mask, const thread A& a, const thread B& b) {
    for (int i = 0; i < N; ++i) dst.v[i] = T(float(mask.v[i]) != 0.0f ? elem_at(a, i) : elem_at(b, i));
}

// A register vector converted to another element type.
template <typename T, typename U, int N>
inline void convert(thread rv<T, N>& dst, const thread rv<U, N>& src) {
    for (int i = 0; i < N; ++i) dst.v[i] = T(float(src.v[i]));
}

}  // namespace tiles_metal
