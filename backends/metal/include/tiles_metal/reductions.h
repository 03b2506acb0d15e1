// tiles_metal/reductions.h - row/column reductions, row/column broadcasts and masks. They need element positions
// (elements.h); partial results are combined with simd shuffles between the lanes that share a row or columns.
#pragma once
#include "elements.h"

namespace tiles_metal {

// dst[r] = op over the row r of src (the simdgroup's rows), combined with acc[r] when has_acc.
template <typename Op, typename V, typename W, typename T, int R, int C>
inline void row_reduce(thread rv<V, R>& dst, const thread rt<T, R, C>& src, const thread rv<W, R>& acc, bool has_acc,
                       const thread block& b) {
    const Op op;
    for (int i = 0; i < R / BASE; ++i) {
        float part = identity<Op>::value();
        for (int j = 0; j < C / BASE; ++j) {
            float x0, x1;
            get_elements(src.m[i][j], b, x0, x1);
            part = op(part, op(x0, x1));
        }
        // combine the partials of the lanes that hold the same row (elements.h)
        for (int k = 0; k < 2; ++k) part = op(part, simd_shuffle_xor(part, ROW_PEERS[k]));
        for (int r = 0; r < BASE; ++r) {
            const float x = simd_shuffle(part, row_owner(r));
            dst.v[i * BASE + r] = V(has_acc ? op(float(acc.v[i * BASE + r]), x) : x);
        }
    }
}

template <typename Op, typename V, typename T, int R, int C>
inline void row_reduce(thread rv<V, R>& dst, const thread rt<T, R, C>& src, const thread block& b) {
    row_reduce<Op>(dst, src, dst, false, b);
}

template <typename Op, typename V, typename W, typename T, int R, int C>
inline void row_reduce(thread rv<V, R>& dst, const thread rt<T, R, C>& src, const thread rv<W, R>& acc,
                       const thread block& b) {
    row_reduce<Op>(dst, src, acc, true, b);
}

// dst[c] = op over the column c of src, over all the block's rows: each simdgroup reduces its own rows, then the
// simdgroups combine through `exchange` (nsg * C floats of threadgroup memory). Called by the whole threadgroup.
template <typename Op, typename V, typename W, typename T, int R, int C>
inline void col_reduce(thread rv<V, C>& dst, const thread rt<T, R, C>& src, const thread rv<W, C>& acc, bool has_acc,
                       threadgroup float* exchange, const thread block& b) {
    const Op op;
    const int c = elem_col(b.lane);
    for (int j = 0; j < C / BASE; ++j) {
        float p0 = identity<Op>::value(), p1 = p0;
        for (int i = 0; i < R / BASE; ++i) {
            float x0, x1;
            get_elements(src.m[i][j], b, x0, x1);
            p0 = op(p0, x0);
            p1 = op(p1, x1);
        }
        // combine over the lanes that hold the same two columns (elements.h): the eight rows
        for (int k = 0; k < 3; ++k) {
            p0 = op(p0, simd_shuffle_xor(p0, COL_PEERS[k]));
            p1 = op(p1, simd_shuffle_xor(p1, COL_PEERS[k]));
        }
        if (b.lane == cols_owner(c / 2)) {
            exchange[b.sg * C + j * BASE + c] = p0;
            exchange[b.sg * C + j * BASE + c + 1] = p1;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const int nsg = b.nthreads / SIMD;
    for (int c = 0; c < C; ++c) {
        float x = exchange[c];
        for (int g = 1; g < nsg; ++g) x = op(x, exchange[g * C + c]);
        dst.v[c] = V(has_acc ? op(float(acc.v[c]), x) : x);
    }
    // the exchange may be reused by the next reduction only after every thread has read it
    threadgroup_barrier(mem_flags::mem_threadgroup);
}

template <typename Op, typename V, typename T, int R, int C>
inline void col_reduce(thread rv<V, C>& dst, const thread rt<T, R, C>& src, threadgroup float* exchange,
                       const thread block& b) {
    col_reduce<Op>(dst, src, dst, false, exchange, b);
}

template <typename Op, typename V, typename W, typename T, int R, int C>
inline void col_reduce(thread rv<V, C>& dst, const thread rt<T, R, C>& src, const thread rv<W, C>& acc,
                       threadgroup float* exchange, const thread block& b) {
    col_reduce<Op>(dst, src, acc, true, exchange, b);
}

// Every element of dst (a row or a column vector) <- op over the whole tile: the lane's elements, the simdgroup's 32
// lanes by a butterfly, then the simdgroups through `exchange` (a float a simdgroup), each one's value once: one
// exchange where a row reduction and a column one would take two. Called by the whole threadgroup.
template <typename Op, typename W, typename T, int R, int C, int N>
inline void tile_reduce(thread rv<float, N>& dst, const thread rt<T, R, C>& src, const thread rv<W, N>& acc,
                        bool has_acc, threadgroup float* exchange, const thread block& b) {
    const Op op;
    float part = identity<Op>::value();
    for (int i = 0; i < R / BASE; ++i)
        for (int j = 0; j < C / BASE; ++j) {
            float x0, x1;
            get_elements(src.m[i][j], b, x0, x1);
            part = op(part, op(x0, x1));
        }
    for (ushort k = 1; k < SIMD; k *= 2) part = op(part, simd_shuffle_xor(part, k));
    if (b.lane == 0) exchange[b.sg] = part;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    part = exchange[0];
    for (int g = 1; g < b.nthreads / SIMD; ++g) part = op(part, exchange[g]);
    // the exchange may be reused by the next reduction only after every thread has read it
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int i = 0; i < N; ++i) dst.v[i] = has_acc ? op(float(acc.v[i]), part) : part;
}

template <typename Op, typename T, int R, int C, int N>
inline void tile_reduce(thread rv<float, N>& dst, const thread rt<T, R, C>& src, threadgroup float* exchange,
                        const thread block& b) {
    tile_reduce<Op>(dst, src, dst, false, exchange, b);
}

template <typename Op, typename W, typename T, int R, int C, int N>
inline void tile_reduce(thread rv<float, N>& dst, const thread rt<T, R, C>& src, const thread rv<W, N>& acc,
                        threadgroup float* exchange, const thread block& b) {
    tile_reduce<Op>(dst, src, acc, true, exchange, b);
}

// (m, s) <- (m, s) merged with (m2, s2): the larger max, each sum rescaled to it. The pair that holds the max keeps
// its sum as is: no exp2((-inf) - (-inf)) when two empty pairs (-inf, 0) meet (NaN, whose handling fast math leaves
// open).
inline void merge_max_sum(thread float& m, thread float& s, float m2, float s2) {
    const float top = metal::max(m, m2);
    s = (m == top ? s : s * metal::exp2(m - top)) + (m2 == top ? s2 : s2 * metal::exp2(m2 - top));
    m = top;
}

// The simdgroup's pairs merged (every lane holds all of them; s = 0 counts as empty, so that it cannot pull the
// max up).
template <int N>
inline void merge_own(thread float& top, thread float& sum, const thread rv<float, N>& m,
                      const thread rv<float, N>& s) {
    top = -INFINITY;
    sum = 0.0f;
    for (int i = 0; i < N; ++i) merge_max_sum(top, sum, s.v[i] > 0.0f ? m.v[i] : -INFINITY, s.v[i]);
}

// Every element of dst <- log2(sum_j s[j] 2^m[j]) over the whole vectors: a column vector, whole in every simdgroup.
template <int N>
inline void logsumexp2(thread rv<float, N>& dst, const thread rv<float, N>& m, const thread rv<float, N>& s,
                       const thread block& b) {
    float top, sum;
    merge_own(top, sum, m, s);
    for (int i = 0; i < N; ++i) dst.v[i] = top + metal::log2(sum);
}

// The same for a row vector, split over the simdgroups: their pairs meet in `exchange` (2 floats a simdgroup), the
// max and the sum in one exchange. Called by the whole threadgroup.
template <int N>
inline void logsumexp2(thread rv<float, N>& dst, const thread rv<float, N>& m, const thread rv<float, N>& s,
                       threadgroup float* exchange, const thread block& b) {
    float top, sum;
    merge_own(top, sum, m, s);
    if (b.lane == 0) {
        exchange[2 * b.sg] = top;
        exchange[2 * b.sg + 1] = sum;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    top = -INFINITY;
    sum = 0.0f;
    for (int g = 0; g < b.nthreads / SIMD; ++g) merge_max_sum(top, sum, exchange[2 * g], exchange[2 * g + 1]);
    // the exchange may be reused by the next reduction only after every thread has read it
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int i = 0; i < N; ++i) dst.v[i] = top + metal::log2(sum);
}

// Positional functors for map_positions.
template <typename Op, typename V>
struct with_row {
    const thread V* v;
    float operator()(float x, int r, int) const { return Op()(x, float(v[r])); }
};

template <typename Op, typename V>
struct with_col {
    const thread V* v;
    float operator()(float x, int, int c) const { return Op()(x, float(v[c])); }
};

// keep (r, c) where col0 + c <= row0 + r, else fill
struct causal {
    int row0, col0;
    float fill;
    float operator()(float x, int r, int c) const { return col0 + c <= row0 + r ? x : fill; }
};

// keep (r, c) where row0 + r < rows and c < cols, else fill (row0: the simdgroup's first row in the block tile)
struct in_bounds {
    int row0, rows, cols;
    float fill;
    float operator()(float x, int r, int c) const { return (row0 + r < rows && c < cols) ? x : fill; }
};

// dst = op(src[r, c], v[r])
template <typename Op, typename T, typename V, int R, int C>
inline void broadcast_row(thread rt<T, R, C>& dst, const thread rt<T, R, C>& src, const thread rv<V, R>& v,
                          const thread block& b) {
    with_row<Op, V> f;
    f.v = v.v;
    map_positions(dst, src, f, b);
}

// dst = op(src[r, c], v[c])
template <typename Op, typename T, typename V, int R, int C>
inline void broadcast_col(thread rt<T, R, C>& dst, const thread rt<T, R, C>& src, const thread rv<V, C>& v,
                          const thread block& b) {
    with_col<Op, V> f;
    f.v = v.v;
    map_positions(dst, src, f, b);
}

template <typename T, int R, int C>
inline void causal_mask(thread rt<T, R, C>& dst, const thread rt<T, R, C>& src, int row0, int col0, float fill,
                        const thread block& b) {
    causal f;
    f.row0 = row0;
    f.col0 = col0;
    f.fill = fill;
    map_positions(dst, src, f, b);
}

template <typename T, int R, int C>
inline void bounds_mask(thread rt<T, R, C>& dst, const thread rt<T, R, C>& src, int row0, int rows, int cols,
                        float fill, const thread block& b) {
    in_bounds f;
    f.row0 = row0;
    f.rows = rows;
    f.cols = cols;
    f.fill = fill;
    map_positions(dst, src, f, b);
}

}  // namespace tiles_metal
