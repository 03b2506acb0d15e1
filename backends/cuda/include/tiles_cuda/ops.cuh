// tiles_cuda/ops.cuh: element-wise maps, reductions, broadcasts, masks, conversions.
//
// All arithmetic is f32 (values are converted on the way in and rounded to the
// destination type on the way out), so the results match the reference
// interpreter's f32 semantics up to the last ulp of the transcendental functions.
#pragma once
#include "memory.cuh"
#include "philox.h"

namespace tc {

// ---- visiting every element a lane holds ------------------------------------
// f(value, block_row, block_col) -> new value, for dst and src of one shape; Order<C>::col_of says which column
// a register holds (fragment_order, or runs_order for a tile in runs: tiles/column_order.py)
template <template <int> class Order, typename T, typename U, int R, int C, int NW, typename F>
__device__ __forceinline__ void map_rc_in(rt<T, R, C, NW>& dst, const rt<U, R, C, NW>& src, F f) {
    using tile = rt<T, R, C, NW>;
    tile::each([&](int i, int j, int p) {
        const int r = tile::row_of(i, p), c = Order<C>::col_of(j, p);
        if constexpr (sizeof(U) == 2) {   // a 16-bit pair read whole (to_floats)
            const pair<float> x = to_floats(src.d[i][j][p]);
            dst.d[i][j][p] = make_pair<T>(f(x.x, r, c), f(x.y, r, c + 1));
        } else {   // as attention's masked steps were timed: through to_floats their f32 code schedules otherwise
            dst.d[i][j][p] = make_pair<T>(f(to_float(src.d[i][j][p].x), r, c),
                                          f(to_float(src.d[i][j][p].y), r, c + 1));
        }
    });
}
template <typename T, typename U, int R, int C, int NW, typename F>
__device__ __forceinline__ void map_rc(rt<T, R, C, NW>& dst, const rt<U, R, C, NW>& src, F f) {
    map_rc_in<fragment_order>(dst, src, f);
}
template <typename T, typename U, int R, int C, int NW, typename F>
__device__ __forceinline__ void map(rt<T, R, C, NW>& dst, const rt<U, R, C, NW>& src, F f) {
    map_rc(dst, src, [&](float x, int, int) { return f(x); });
}
template <typename T, typename U, int N, axis A, int NW, typename F>
__device__ __forceinline__ void map(rv<T, N, A, NW>& dst, const rv<U, N, A, NW>& src, F f) {
#pragma unroll
    for (int o = 0; o < rv<T, N, A, NW>::outer; ++o)
#pragma unroll
        for (int k = 0; k < rv<T, N, A, NW>::inner; ++k) dst.d[o][k] = from_float<T>(f(to_float(src.d[o][k])));
}
// Two operands of one shape, element by element.
template <typename T, typename U, typename V, int R, int C, int NW, typename F>
__device__ __forceinline__ void zip(rt<T, R, C, NW>& dst, const rt<U, R, C, NW>& a, const rt<V, R, C, NW>& b, F f) {
    using tile = rt<T, R, C, NW>;
    tile::each([&](int i, int j, int p) {
        const pair<float> x = to_floats(a.d[i][j][p]), y = to_floats(b.d[i][j][p]);
        dst.d[i][j][p] = make_pair<T>(f(x.x, y.x), f(x.y, y.y));
    });
}
template <typename T, typename U, typename V, int N, axis A, int NW, typename F>
__device__ __forceinline__ void zip(rv<T, N, A, NW>& dst, const rv<U, N, A, NW>& a, const rv<V, N, A, NW>& b, F f) {
#pragma unroll
    for (int o = 0; o < rv<T, N, A, NW>::outer; ++o)
#pragma unroll
        for (int k = 0; k < rv<T, N, A, NW>::inner; ++k)
            dst.d[o][k] = from_float<T>(f(to_float(a.d[o][k]), to_float(b.d[o][k])));
}

// ---- the op vocabulary: unary and binary maps on rt and rv ------------------
// exp2 on sm_90 is the MUFU instruction alone: exp2f adds a fix-up for results below 2^-126 (subnormals, here
// flushed to 0, far below every tolerance) worth three instructions per element, and attention's softmax takes
// one exp2 per element, competing for issue slots with the wgmma that should overlap it. sm_80 keeps exp2f: there the shorter code schedules into more registers and the attention backward spills
// (seen in its compile report).
__device__ __forceinline__ float exp2_fast(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return exp2f(x);
#endif
}
#define TC_UNARY(name, expr)                                                      \
    template <typename D, typename S> __device__ inline void name(D& dst, const S& src) { \
        map(dst, src, [](float x) { return expr; });                               \
    }
TC_UNARY(exp, expf(x))
TC_UNARY(exp2, exp2_fast(x))
TC_UNARY(log, logf(x))
TC_UNARY(log2, log2f(x))
TC_UNARY(abs, fabsf(x))
TC_UNARY(neg, -x)
// The math library's f32 functions (within 1-2 ulp, CUDA's programming guide, table of single-precision
// functions; NVRTC compiles without fast math); sigmoid through expf, relu passes NaN on.
TC_UNARY(sqrt, sqrtf(x))
TC_UNARY(rsqrt, rsqrtf(x))
TC_UNARY(tanh, tanhf(x))
// sigmoid, silu and gelu (tanh form) divide by 1 + e^-z: silu and gelu are x sigmoid(z) = x / (1 + e^-z), z = x
// and z = 2u for gelu's 0.5 x (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3), since 1 + tanh u = 2 / (1 + e^-2u)
// (no cancellation where tanh u nears -1). The division is __fdividef's reciprocal and multiply (2 ulp): IEEE
// division puts a branch around each element (FCHK, a slow-path call), and the epilogue's 128 of them a thread then
// run one after another: silu cost linear_silu 4096x14336x4096 120 us over bias + relu on the H200 (12-04, 15%).
// Past 2^126 the reciprocal is 0 (sigmoid below z = -87.3: true values under 1e-38). x is floored at -100, where the
// quotient is -0 already, so that x = -inf gives -0, not -inf * 0 = NaN: a select, where a guard around the
// division compiles to a branch an element again (NaN compares false and passes through).
__device__ inline float floored(float x) { return x < -100.f ? -100.f : x; }
TC_UNARY(sigmoid, __fdividef(1.f, 1.f + expf(-x)))
TC_UNARY(silu, __fdividef(floored(x), 1.f + expf(-floored(x))))
TC_UNARY(gelu, __fdividef(floored(x), 1.f + expf(-floored(x) * (1.59576912f + 0.071354816f * x * x))))
TC_UNARY(erf, erff(x))
TC_UNARY(relu, x < 0.f ? 0.f : x)
TC_UNARY(sin, sinf(x))
TC_UNARY(cos, cosf(x))
#undef TC_UNARY

// b is a tile or vector of dst's shape, or a scalar (any arithmetic type, used as f32).
template <typename B> constexpr bool is_scalar = same<B, float> || same<B, double> || same<B, int>;
#define TC_BINARY(name, expr)                                                          \
    template <typename D, typename A, typename B>                                       \
    __device__ inline void name(D& dst, const A& a, const B& b) {                       \
        if constexpr (is_scalar<B>)                                                     \
            map(dst, a, [y = float(b)](float x) { return expr; });                      \
        else                                                                            \
            zip(dst, a, b, [](float x, float y) { return expr; });                      \
    }
TC_BINARY(add, x + y)
TC_BINARY(sub, x - y)
TC_BINARY(mul, x * y)
TC_BINARY(div, x / y)
TC_BINARY(max, fmaxf(x, y))
TC_BINARY(min, fminf(x, y))
TC_BINARY(pow, powf(x, y))
TC_BINARY(lt, x < y ? 1.f : 0.f)   // comparisons make masks: 1 where they hold, else 0
TC_BINARY(le, x <= y ? 1.f : 0.f)
TC_BINARY(gt, x > y ? 1.f : 0.f)
TC_BINARY(ge, x >= y ? 1.f : 0.f)
TC_BINARY(eq, x == y ? 1.f : 0.f)
TC_BINARY(ne, x != y ? 1.f : 0.f)
#undef TC_BINARY

// dst = a where mask is nonzero, else b; a and b tiles/vectors of dst's shape or scalars.
template <typename X> __device__ __forceinline__ float pair_elem(const X& x, int i, int j, int p, bool hi) {
    if constexpr (is_scalar<X>) return float(x);
    else return to_float(hi ? x.d[i][j][p].y : x.d[i][j][p].x);
}
template <typename X> __device__ __forceinline__ float vec_elem(const X& x, int o, int k) {
    if constexpr (is_scalar<X>) return float(x);
    else return to_float(x.d[o][k]);
}
template <typename T, typename M, int R, int C, int NW, typename A, typename B>
__device__ inline void where(rt<T, R, C, NW>& dst, const rt<M, R, C, NW>& mask, const A& a, const B& b) {
    rt<T, R, C, NW>::each([&](int i, int j, int p) {
        auto pick = [&](bool hi) {
            return to_float(hi ? mask.d[i][j][p].y : mask.d[i][j][p].x) != 0.f ? pair_elem(a, i, j, p, hi)
                                                                                : pair_elem(b, i, j, p, hi);
        };
        dst.d[i][j][p] = make_pair<T>(pick(false), pick(true));
    });
}
template <typename T, typename M, int N, axis Ax, int NW, typename A, typename B>
__device__ inline void where(rv<T, N, Ax, NW>& dst, const rv<M, N, Ax, NW>& mask, const A& a, const B& b) {
#pragma unroll
    for (int o = 0; o < rv<T, N, Ax, NW>::outer; ++o)
#pragma unroll
        for (int k = 0; k < rv<T, N, Ax, NW>::inner; ++k)
            dst.d[o][k] = from_float<T>(to_float(mask.d[o][k]) != 0.f ? vec_elem(a, o, k) : vec_elem(b, o, k));
}

template <typename D> __device__ inline void fill(D& dst, float value) { map(dst, dst, [value](float) { return value; }); }
template <typename D> __device__ inline void zero(D& dst) { fill(dst, 0.f); }
// Shared tiles are filled by the whole block.
template <typename T, int R, int C> __device__ inline void fill(st<T, R, C>& dst, float value) {
    for (int e = block_thread(); e < R * C; e += block_threads()) dst.data[e] = from_float<T>(value);
}
template <typename T, int R, int C> __device__ inline void zero(st<T, R, C>& dst) { fill(dst, 0.f); }

// ---- conversions --------------------------------------------------------------
template <typename T, typename U, int R, int C, int NW>
__device__ inline void copy(rt<T, R, C, NW>& dst, const rt<U, R, C, NW>& src) { map(dst, src, [](float x) { return x; }); }
template <typename T, typename U, int N, axis A, int NW>
__device__ inline void copy(rv<T, N, A, NW>& dst, const rv<U, N, A, NW>& src) { map(dst, src, [](float x) { return x; }); }
template <typename T, typename U, int R, int C, int NW>
__device__ inline void copy(rt<T, R, C, NW>& dst, const st<U, R, C>& src) { load(dst, src); }
template <typename T, typename U, int R, int C, int NW>
__device__ inline void copy(st<T, R, C>& dst, const rt<U, R, C, NW>& src) { store(dst, src); }

// ---- column-pair exchange ------------------------------------------------------------
// dst[:, 2j] = src[:, 2j+1], dst[:, 2j+1] = src[:, 2j]. Each pair<T> of the fragment holds columns 2t and 2t+1
// of one row (types.cuh), so the exchange stays in the lane: for f32 the compiler only renames registers (no
// instruction of its own in interleaved rotary's SASS), a 16-bit pair at most one byte permute. dst may be src.
template <typename T, int R, int C, int NW>
__device__ inline void swap_pairs(rt<T, R, C, NW>& dst, const rt<T, R, C, NW>& src) {
    using tile = rt<T, R, C, NW>;
    tile::each([&](int i, int j, int p) {
        const pair<T> v = src.d[i][j][p];
        dst.d[i][j][p] = pair<T>{v.y, v.x};
    });
}

// ---- reductions -----------------------------------------------------------------
struct sum_op { __device__ float operator()(float a, float b) const { return a + b; } };
struct max_op { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };
struct min_op { __device__ float operator()(float a, float b) const { return fminf(a, b); } };

// One value per row: within a lane over its columns, then (LANES) over the 4 lanes of a quad; times *scale
// if given (rewrites.py: a row max of x * c for c > 0, from the unscaled x), then combined with *acc.
template <typename Op, bool LANES = true, typename T, typename U, int R, int C, int NW>
__device__ inline void row_reduce(rv<T, R, axis::rows, NW>& dst, const rt<U, R, C, NW>& src,
                                  const rv<T, R, axis::rows, NW>* acc, const float* scale = nullptr) {
    using tile = rt<U, R, C, NW>;
    Op op;
#pragma unroll
    for (int i = 0; i < tile::height; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // rows g and g+8: pairs h and h+2
            float v = op(to_float(src.d[i][0][h].x), to_float(src.d[i][0][h].y));
            v = op(v, op(to_float(src.d[i][0][h + 2].x), to_float(src.d[i][0][h + 2].y)));
#pragma unroll
            for (int j = 1; j < tile::width; ++j) {
                v = op(v, op(to_float(src.d[i][j][h].x), to_float(src.d[i][j][h].y)));
                v = op(v, op(to_float(src.d[i][j][h + 2].x), to_float(src.d[i][j][h + 2].y)));
            }
            if constexpr (LANES) {
                v = op(v, __shfl_xor_sync(0xffffffffu, v, 1));
                v = op(v, __shfl_xor_sync(0xffffffffu, v, 2));
            }
            if (scale) v *= *scale;
            if (acc) v = op(v, to_float(acc->d[i][h]));
            dst.d[i][h] = from_float<T>(v);
        }
}

// One value per column: within a lane over its rows, over the 8 quads of the
// warp, then over the warps through shared memory (every warp holds the result).
// With 8 warps or more, the 8 lanes that hold the same columns (one per quad) split the warps' partials
// between them and combine them with three shuffles, instead of each reading all NW.
template <typename Op, typename T, typename U, int R, int C, int NW>
__device__ inline void col_reduce(rv<T, C, axis::cols, NW>& dst, const rt<U, R, C, NW>& src,
                                  const rv<T, C, axis::cols, NW>* acc) {
    using tile = rt<U, R, C, NW>;
    using vec = rv<T, C, axis::cols, NW>;
    __shared__ float partial[NW][C];
    Op op;
#pragma unroll
    for (int j = 0; j < tile::width; ++j)
#pragma unroll
        for (int k = 0; k < 4; ++k) {  // cols 2t+(k&1)+8(k>>1): pairs 2(k>>1) (row g) and 2(k>>1)+1 (row g+8)
            const int p = 2 * (k >> 1);
            auto elem = [&](int i, int q) { return to_float((k & 1) ? src.d[i][j][q].y : src.d[i][j][q].x); };
            float v = op(elem(0, p), elem(0, p + 1));
#pragma unroll
            for (int i = 1; i < tile::height; ++i) v = op(v, op(elem(i, p), elem(i, p + 1)));
            v = op(v, __shfl_xor_sync(0xffffffffu, v, 4));
            v = op(v, __shfl_xor_sync(0xffffffffu, v, 8));
            v = op(v, __shfl_xor_sync(0xffffffffu, v, 16));
            if (lane_id() < 4) partial[warp_id()][vec::index_of(j, k)] = v;
        }
    barrier();
#pragma unroll
    for (int o = 0; o < vec::outer; ++o)
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int c = vec::index_of(o, k);
            float v;
            if constexpr (NW % 8 == 0) {
                const int q = lane_id() / 4;
                v = partial[q][c];
#pragma unroll
                for (int i = 1; i < NW / 8; ++i) v = op(v, partial[q + 8 * i][c]);
                v = op(v, __shfl_xor_sync(0xffffffffu, v, 4));
                v = op(v, __shfl_xor_sync(0xffffffffu, v, 8));
                v = op(v, __shfl_xor_sync(0xffffffffu, v, 16));
            } else {
                v = partial[0][c];
#pragma unroll
                for (int w = 1; w < NW; ++w) v = op(v, partial[w][c]);
            }
            if (acc) v = op(v, to_float(acc->d[o][k]));
            dst.d[o][k] = from_float<T>(v);
        }
    barrier();  // partial is reused by the next reduction of this shape
}

// An exchange across the warps (a whole-tile reduction, logsumexp2 of a rows vector) writes one of two shared
// buffers, SLOT, then one barrier, then every warp reads it. The generated kernel picks the slot: one no warp may
// still be reading, i.e. one not read since the last barrier of any kind (codegen.py), else it places a barrier
// first. Alternating exchanges so need one barrier each where a single buffer took two (write, barrier, read,
// barrier).
//
// One value for the whole tile, in every element of dst (a vector of either axis): within the lane in four
// independent chains (one per pair slot, so that the adds need not wait on one another), over the warp's 32
// lanes by a butterfly, then over the warps through shared memory, each warp's value once. Where a row
// reduction and a column one would take two exchanges across the warps (a row's sum of squares, of a row held as
// a whole tile), this takes one.
template <typename Op, int SLOT, typename U, int R, int C, int NW, int N, axis A>
__device__ inline void tile_reduce(rv<float, N, A, NW>& dst, const rt<U, R, C, NW>& src,
                                   const rv<float, N, A, NW>* acc) {
    using tile = rt<U, R, C, NW>;
    using vec = rv<float, N, A, NW>;
    Op op;
    float part[4];
#pragma unroll
    for (int p = 0; p < 4; ++p) part[p] = op(to_float(src.d[0][0][p].x), to_float(src.d[0][0][p].y));
#pragma unroll
    for (int i = 0; i < tile::height; ++i)
#pragma unroll
        for (int j = 0; j < tile::width; ++j)
#pragma unroll
            for (int p = 0; p < 4; ++p)
                if (i || j) part[p] = op(part[p], op(to_float(src.d[i][j][p].x), to_float(src.d[i][j][p].y)));
    float v = op(op(part[0], part[1]), op(part[2], part[3]));
#pragma unroll
    for (int x = 1; x < 32; x *= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, x));
    if constexpr (NW > 1) {
        alignas(16) __shared__ float partial[2][NW];   // aligned: read as float4s
        if (lane_id() == 0) partial[SLOT][warp_id()] = v;
        barrier();
        v = partial[SLOT][0];
#pragma unroll
        for (int w = 1; w < NW; ++w) v = op(v, partial[SLOT][w]);
    }
#pragma unroll
    for (int o = 0; o < vec::outer; ++o)
#pragma unroll
        for (int k = 0; k < vec::inner; ++k) dst.d[o][k] = acc ? op(acc->d[o][k], v) : v;
}

#define TC_REDUCE(name, kind, op)                                                              \
    template <typename V, typename S> __device__ inline void name(V& dst, const S& src) {           \
        kind##_reduce<op>(dst, src, static_cast<const V*>(nullptr));                               \
    }                                                                                              \
    template <typename V, typename S> __device__ inline void name(V& dst, const S& src, const V& acc) { \
        kind##_reduce<op>(dst, src, &acc);                                                         \
    }
TC_REDUCE(row_max, row, max_op)
TC_REDUCE(row_min, row, min_op)
TC_REDUCE(row_sum, row, sum_op)
TC_REDUCE(col_max, col, max_op)
TC_REDUCE(col_min, col, min_op)
TC_REDUCE(col_sum, col, sum_op)
#undef TC_REDUCE
#define TC_TILE_REDUCE(name, op)                                                                      \
    template <int SLOT, typename V, typename S> __device__ inline void name(V& dst, const S& src) {   \
        tile_reduce<op, SLOT>(dst, src, static_cast<const V*>(nullptr));                              \
    }                                                                                                 \
    template <int SLOT, typename V, typename S>                                                       \
    __device__ inline void name(V& dst, const S& src, const V& acc) {                                 \
        tile_reduce<op, SLOT>(dst, src, &acc);                                                        \
    }
TC_TILE_REDUCE(tile_max, max_op)
TC_TILE_REDUCE(tile_min, min_op)
TC_TILE_REDUCE(tile_sum, sum_op)
#undef TC_TILE_REDUCE

// The codegen's rewrites (rewrites.py). row_max of src * c for c > 0, read from the unscaled src: c max(x) is
// max(c x) exactly, as rounding is monotone.
template <typename V, typename S> __device__ inline void row_max_scaled(V& dst, const S& src, float c) {
    row_reduce<max_op>(dst, src, static_cast<const V*>(nullptr), &c);
}
template <typename V, typename S> __device__ inline void row_max_scaled(V& dst, const S& src, float c, const V& acc) {
    row_reduce<max_op>(dst, src, &acc, &c);
}
// A loop's running row sum kept per lane (this lane's columns of each row), added across a row's 4 lanes once
// after the loop: acc + the sum of this lane's elements of each row, no shuffle.
template <typename V, typename S> __device__ inline void row_sum_partial(V& dst, const S& src, const V& acc) {
    row_reduce<sum_op, false>(dst, src, &acc);
}
template <typename T, int N, int NW> __device__ inline void row_sum_lanes(rv<T, N, axis::rows, NW>& v) {
    using vec = rv<T, N, axis::rows, NW>;
#pragma unroll
    for (int o = 0; o < vec::outer; ++o)
#pragma unroll
        for (int k = 0; k < vec::inner; ++k) {
            float x = to_float(v.d[o][k]);
            x += __shfl_xor_sync(0xffffffffu, x, 1);
            x += __shfl_xor_sync(0xffffffffu, x, 2);
            v.d[o][k] = from_float<T>(x);
        }
}

// ---- log-sum-exp2 of (max, sum) pairs -------------------------------------------------
// (m, s) <- (m, s) merged with (m2, s2): the larger max, each sum rescaled to it. fminf(NaN, 0) is 0, so two
// empty pairs (-inf, 0) merge into one without a NaN.
__device__ __forceinline__ void merge_max_sum(float& m, float& s, float m2, float s2) {
    const float top = fmaxf(m, m2);
    s = s * exp2_fast(fminf(m - top, 0.f)) + s2 * exp2_fast(fminf(m2 - top, 0.f));
    m = top;
}

// Every element of dst <- log2(sum_j s[j] 2^m[j]) over the whole vectors (pairs with s[j] = 0 count as empty, so
// that they cannot pull the max up): each lane merges the pairs it holds, then the lanes holding the vector's
// other elements by shuffles, then a rows vector's warps through shared memory, the max and the sum in one
// exchange (of the two buffers, SLOT's: tile_reduce). The row softmax's second cross-warp reduction, saved
// (kernels/softmax.py).
template <int SLOT, int N, axis A, int NW>
__device__ inline void logsumexp2(rv<float, N, A, NW>& dst, const rv<float, N, A, NW>& m,
                                  const rv<float, N, A, NW>& s) {
    using vec = rv<float, N, A, NW>;
    float top = -INFINITY, sum = 0.f;
#pragma unroll
    for (int o = 0; o < vec::outer; ++o)
#pragma unroll
        for (int k = 0; k < vec::inner; ++k)
            merge_max_sum(top, sum, s.d[o][k] > 0.f ? m.d[o][k] : -INFINITY, s.d[o][k]);
    // lane 4g+t: the rows of a rows vector change with g (lane bits 2-4), the columns of a cols vector with t
    constexpr int first = A == axis::rows ? 4 : 1, end = A == axis::rows ? 32 : 4;
#pragma unroll
    for (int x = first; x < end; x *= 2)
        merge_max_sum(top, sum, __shfl_xor_sync(0xffffffffu, top, x), __shfl_xor_sync(0xffffffffu, sum, x));
    if constexpr (A == axis::rows && NW > 1) {   // a cols vector is whole in every warp
        static_assert(NW <= 32, "a block has at most 32 warps");
        constexpr int lanes = NW <= 2 ? 2 : NW <= 4 ? 4 : NW <= 8 ? 8 : NW <= 16 ? 16 : 32;
        __shared__ float2 partial[2][NW];
        if (lane_id() == 0) partial[SLOT][warp_id()] = make_float2(top, sum);
        barrier();
        const int w = lane_id() % lanes;   // lane w takes warp w's pair; a butterfly merges them
        const float2 p = w < NW ? partial[SLOT][w] : make_float2(-INFINITY, 0.f);
        top = p.x;
        sum = p.y;
#pragma unroll
        for (int x = 1; x < lanes; x *= 2)
            merge_max_sum(top, sum, __shfl_xor_sync(0xffffffffu, top, x), __shfl_xor_sync(0xffffffffu, sum, x));
    }
    const float lse = top + log2f(sum);
#pragma unroll
    for (int o = 0; o < vec::outer; ++o)
#pragma unroll
        for (int k = 0; k < vec::inner; ++k) dst.d[o][k] = lse;
}

// ---- broadcasts: each row i with v[i], each column j with v[j] --------------------
template <typename T, typename U, typename V, int R, int C, int NW, typename F>
__device__ __forceinline__ void with_row(rt<T, R, C, NW>& dst, const rt<U, R, C, NW>& src,
                                         const rv<V, R, axis::rows, NW>& v, F f) {
    using tile = rt<T, R, C, NW>;
    tile::each([&](int i, int j, int p) {
        const float y = to_float(v.d[i][p & 1]);
        const pair<float> x = to_floats(src.d[i][j][p]);
        dst.d[i][j][p] = make_pair<T>(f(x.x, y), f(x.y, y));
    });
}
template <typename T, typename U, typename V, int R, int C, int NW, typename F>
__device__ __forceinline__ void with_col(rt<T, R, C, NW>& dst, const rt<U, R, C, NW>& src,
                                         const rv<V, C, axis::cols, NW>& v, F f) {
    using tile = rt<T, R, C, NW>;
    tile::each([&](int i, int j, int p) {
        const int k = 2 * (p >> 1);  // cols 2t, 2t+1 (+8 for p >= 2)
        const pair<float> x = to_floats(src.d[i][j][p]);
        dst.d[i][j][p] = make_pair<T>(f(x.x, to_float(v.d[j][k])), f(x.y, to_float(v.d[j][k + 1])));
    });
}
// The same with the vector in shared memory (a ring stage's, the `shared_vectors` option), read where it is
// used: a pair of columns (one 8-byte read) or a row's value, each read once and reused for every pair that
// shares it (no shared write in between: the compiler keeps the first read).
template <typename T, typename U, typename V, int R, int C, int NW, typename F>
__device__ __forceinline__ void with_col(rt<T, R, C, NW>& dst, const rt<U, R, C, NW>& src, const sv<V, C>& v, F f) {
    rt<T, R, C, NW>::each([&](int i, int j, int p) {
        const pair<float> x = to_floats(src.d[i][j][p]),
                          y = to_floats(*reinterpret_cast<const pair<V>*>(v.data + rt<T, R, C, NW>::col_of(j, p)));
        dst.d[i][j][p] = make_pair<T>(f(x.x, y.x), f(x.y, y.y));
    });
}
template <typename T, typename U, typename V, int R, int C, int NW, typename F>
__device__ __forceinline__ void with_row(rt<T, R, C, NW>& dst, const rt<U, R, C, NW>& src, const sv<V, R>& v, F f) {
    rt<T, R, C, NW>::each([&](int i, int j, int p) {
        const float y = to_float(v.data[rt<T, R, C, NW>::row_of(i, p)]);
        const pair<float> x = to_floats(src.d[i][j][p]);
        dst.d[i][j][p] = make_pair<T>(f(x.x, y), f(x.y, y));
    });
}
#define TC_BROADCAST(name, kind, expr)                                                  \
    template <typename D, typename S, typename V>                                       \
    __device__ inline void name(D& dst, const S& src, const V& v) {                     \
        with_##kind(dst, src, v, [](float x, float y) { return expr; });                \
    }
TC_BROADCAST(add_row, row, x + y)
TC_BROADCAST(sub_row, row, x - y)
TC_BROADCAST(mul_row, row, x * y)
TC_BROADCAST(add_col, col, x + y)
TC_BROADCAST(sub_col, col, x - y)
TC_BROADCAST(mul_col, col, x * y)
#undef TC_BROADCAST
// Division by a broadcast vector: one IEEE division per vector element a lane holds, then a multiply per tile
// element, where every divisor's reciprocal is a normal number (x * (1 / y) is then within 1.5 ulp of x / y) or the
// divisor is a zero, an infinity or a NaN (x * (1 / y) is then exactly IEEE's x / y: x * inf, x * 0, NaN). Otherwise
// (a subnormal divisor, or one beyond 2^126, whose reciprocal is subnormal, among them) the lane divides element by
// element. A division is a ~10-instruction sequence with a slow path, which a zero divisor takes: the attention's
// O / l was 64 of them a thread at the end of every block, and a split softmax's rows past the array's end (their
// sums 0) sent 15 of a 16-row tile's rows down it at every column step of a decode step's softmax.
template <typename T, int N, axis A, int NW>
__device__ __forceinline__ bool reciprocals(rv<float, N, A, NW>& r, const rv<T, N, A, NW>& v) {
    bool normal = true;
#pragma unroll
    for (int o = 0; o < rv<T, N, A, NW>::outer; ++o)
#pragma unroll
        for (int k = 0; k < rv<T, N, A, NW>::inner; ++k) {
            const float y = to_float(v.d[o][k]);
            r.d[o][k] = 1.f / y;
            const float a = fabsf(r.d[o][k]);
            // FLT_MIN, FLT_MAX; a zero, an infinity or a NaN (which fails both tests of |y|) is exact either way
            normal &= (a >= 1.17549435e-38f && a <= 3.40282347e38f) || !(fabsf(y) > 0.f && fabsf(y) <= 3.40282347e38f);
        }
    return normal;
}
template <typename D, typename S, typename T, int N, int NW>
__device__ inline void div_row(D& dst, const S& src, const rv<T, N, axis::rows, NW>& v) {
    rv<float, N, axis::rows, NW> r;
    if (reciprocals(r, v)) mul_row(dst, src, r);
    else with_row(dst, src, v, [](float x, float y) { return x / y; });
}
template <typename D, typename S, typename T, int N, int NW>
__device__ inline void div_col(D& dst, const S& src, const rv<T, N, axis::cols, NW>& v) {
    rv<float, N, axis::cols, NW> r;
    if (reciprocals(r, v)) mul_col(dst, src, r);
    else with_col(dst, src, v, [](float x, float y) { return x / y; });
}
// dst *= v per row, skipped by a warp whose factors are all exactly 1 (x * 1 == x: the values are the same either
// way). rewrites.py's unit_factors takes it for a running max's correction exp2(m - max(m, ...)), which is 1 in
// every row whose max held: an online softmax then skips the rescale of its accumulator in most blocks. The
// test is one vote a warp; the branch is uniform over the warp.
template <typename D, typename V>
__device__ inline void mul_row_unless_ones(D& dst, const V& v) {
    bool ones = true;
#pragma unroll
    for (int o = 0; o < V::outer; ++o)
#pragma unroll
        for (int k = 0; k < V::inner; ++k) ones &= to_float(v.d[o][k]) == 1.f;
    if (!__all_sync(0xffffffffu, ones)) mul_row(dst, dst, v);
}
// 2^x for x <= 0 on the FMA pipe (x below -125, -inf included, gives 2^-125): x = j + f with j an integer and
// |f| <= 1/2, 2^f by a cubic fitted here for the relative error on |f| <= 1/2 (at most 7.5e-5 in f32, against
// bf16's 3.9e-3), and j added into the exponent's bits. Nine FMA-pipe instructions where ex2.approx is one MUFU,
// which runs at 16 lanes a cycle per SM: where a softmax's exponentials are what limits, a few of them go here.
__device__ __forceinline__ float exp2_poly(float x) {
    x = fmaxf(x, -125.f);
    const float t = x + 12582912.f;   // 1.5 * 2^23: x rounded to an integer j, which t's low mantissa bits hold
    const float f = x - (t - 12582912.f);
    const float p = fmaf(fmaf(fmaf(0.0551716648f, f, 0.242611125f), f, 0.693260968f), f, 0.999928057f);
    return __int_as_float(int(unsigned(__float_as_int(p)) + (unsigned(__float_as_int(t)) << 23)));
}
// exp2(src * c - v) of each row (rewrites.py: the scale of a softmax folded into its exponent): one FFMA and the
// exponential per element where a multiply, a subtraction and the exponential were. POLY = N > 0: one pair of
// elements in N takes exp2_poly (the schedule's exp2_poly), so MUFU and the FMA pipe share the exponentials.
template <int POLY = 0, typename T, typename U, typename V, int R, int C, int NW>
__device__ inline void exp2_scaled_sub_row(rt<T, R, C, NW>& dst, const rt<U, R, C, NW>& src, float c,
                                           const rv<V, R, axis::rows, NW>& v) {
    using tile = rt<T, R, C, NW>;
    tile::each([&](int i, int j, int p) {
        const float y = to_float(v.d[i][p & 1]);
        const bool poly = POLY > 0 && ((i * tile::width + j) * 4 + p) % (POLY > 0 ? POLY : 1) == POLY - 1;
        const auto e = [&](float x) { return poly ? exp2_poly(fmaf(x, c, -y)) : exp2_fast(fmaf(x, c, -y)); };
        dst.d[i][j][p] = make_pair<T>(e(to_float(src.d[i][j][p].x)), e(to_float(src.d[i][j][p].y)));
    });
}

// ---- masks -------------------------------------------------------------------------
// In place, a mask that keeps every element is skipped: attention masks each block, and all but the last
// (bounds) or the diagonal ones (causal) keep everything. The test is uniform over the block.
template <typename D, typename S>
__device__ __forceinline__ bool in_place(const D& dst, const S& src) {
    return static_cast<const void*>(&dst) == static_cast<const void*>(&src);
}
// Keep (i, j) where col0 + j <= row0 + i, else fill.
template <typename D, typename S>
__device__ inline void causal_mask(D& dst, const S& src, int row0, int col0, float fill) {
    if (in_place(dst, src) && col0 + S::cols - 1 <= row0) return;
    // col0 + c <= row0 + r where (r, c) is the lane's first element plus an offset fixed per element: one compare
    // of that offset, an immediate, with the lane's margin (else ptxas keeps an index per element in registers)
    const int margin = row0 + S::row_of(0, 0) - col0 - S::col_of(0, 0);
    S::each([&](int i, int j, int p) {
        const int off = (j * 16 + 8 * (p >> 1)) - (i * 16 + 8 * (p & 1));
        dst.d[i][j][p] = make_pair<typename D::dtype>(off <= margin ? to_float(src.d[i][j][p].x) : fill,
                                                      off + 1 <= margin ? to_float(src.d[i][j][p].y) : fill);
    });
}
// Keep (i, j) where i < rows and j < cols, else fill (Order: the tiles' column order, as map_rc_in's).
template <template <int> class Order = fragment_order, typename D, typename S>
__device__ inline void bounds_mask(D& dst, const S& src, int rows, int cols, float fill) {
    if (in_place(dst, src) && rows >= S::rows && cols >= S::cols) return;
    map_rc_in<Order>(dst, src, [=](float x, int r, int c) { return r < rows && c < cols ? x : fill; });
}

// ---- dropout ----------------------------------------------------------------------
// Philox 4x32-10 on CUDA's vector type; the rounds are the shared tiles_philox core (philox.h), which
// the HIP headers use too. Host and device: the host build is how CI checks it against tiles/philox.py.
__host__ __device__ __forceinline__ uint4 philox4x32_10(uint4 c, unsigned k0, unsigned k1) {
    const tiles_philox::words w = tiles_philox::philox4x32_10({c.x, c.y, c.z, c.w}, k0, k1);
    return make_uint4(w.x, w.y, w.z, w.w);
}

// dst = src / (1 - p) where the uniform u of global element (row0 + i, col0 + j) is >= p, else 0:
// u = (word[col % 4] >> 8) * 2^-24 of Philox((col / 4, row, offset, 0), (seed, 0)). A lane's pair of
// columns (2t, 2t+1) lies in one group of four, so one Philox evaluation serves both. The keep bits are
// drawn first, one pair at a time in a rolled loop (unrolled, the independent Philox chains would be
// interleaved and spill), then applied to the tile with compile-time indices.
template <typename T, typename U, int R, int C, int NW>
__device__ inline void dropout(rt<T, R, C, NW>& dst, const rt<U, R, C, NW>& src, float p, unsigned seed,
                               unsigned offset, int row0, int col0) {
    using tile = rt<T, R, C, NW>;
    constexpr int pairs = tile::height * tile::width * 4, words = (pairs + 15) / 16;
    unsigned keep[words];  // 2 bits per pair
#pragma unroll
    for (int wd = 0; wd < words; ++wd) {
        unsigned m = 0;
#pragma unroll 1
        for (int k = 0; k < 16 && wd * 16 + k < pairs; ++k) {
            const int e = wd * 16 + k, i = e / (tile::width * 4), j = (e / 4) % tile::width, q = e % 4;
            const unsigned row = row0 + tile::row_of(i, q), col = col0 + tile::col_of(j, q);
            const uint4 w = philox4x32_10(make_uint4(col / 4, row, offset, 0u), seed, 0u);
            const unsigned w0 = col % 4 == 0 ? w.x : w.z, w1 = col % 4 == 0 ? w.y : w.w;  // col is even
            m |= unsigned(tiles_philox::keep(w0, p)) << (2 * k);
            m |= unsigned(tiles_philox::keep(w1, p)) << (2 * k + 1);
        }
        keep[wd] = m;
    }
    const float scale = 1.f / (1.f - p);
#pragma unroll
    for (int i = 0; i < tile::height; ++i)
#pragma unroll
        for (int j = 0; j < tile::width; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int e = (i * tile::width + j) * 4 + q;
                const unsigned bits = keep[e / 16] >> (2 * (e % 16));
                dst.d[i][j][q] = make_pair<T>(bits & 1 ? to_float(src.d[i][j][q].x) * scale : 0.f,
                                              bits & 2 ? to_float(src.d[i][j][q].y) * scale : 0.f);
            }
}

}  // namespace tc
