// tiles_hip/regs.hpp: register-tile ops: fills, maps, reductions, broadcasts, masks, conversions.
// Every op is one lane's loop over its elements, plus wave shuffles where rows or columns span lanes.
#pragma once
#include "layout.hpp"
#include <tiles_cuda/philox.h>  // the one copy of the Philox rounds, shared with the CUDA headers

namespace tiles_hip {
// ---------------------------------------------------------------- fills and maps
template <class X> TILES_DEV void fill(X& x, float value) {
  auto* p = (typename X::dtype*)x.v;
  constexpr int n = sizeof(x.v) / sizeof(*p);
  TILES_UNROLL for (int i = 0; i < n; ++i) p[i] = cvt<typename X::dtype>::from(value);
}
template <class X> TILES_DEV void zero(X& x) { fill(x, 0.0f); }

// dst[i] = f(a[i]) or f(a[i], b[i]) in f32, rounded once into dst's type. Same layout required.
template <class D, class A, class F> TILES_DEV void map(D& dst, const A& a, F f) {
  static_assert(sizeof(dst.v) / sizeof(typename D::dtype) == sizeof(a.v) / sizeof(typename A::dtype),
                "operands differ in shape");
  auto* pd = (typename D::dtype*)dst.v;
  auto* pa = (const typename A::dtype*)a.v;
  constexpr int n = sizeof(dst.v) / sizeof(*pd);
  TILES_UNROLL for (int i = 0; i < n; ++i) pd[i] = cvt<typename D::dtype>::from(f(cvt<typename A::dtype>::to(pa[i])));
}
template <class D, class A, class B, class F> TILES_DEV void map(D& dst, const A& a, const B& b, F f) {
  auto* pd = (typename D::dtype*)dst.v;
  auto* pa = (const typename A::dtype*)a.v;
  auto* pb = (const typename B::dtype*)b.v;
  constexpr int n = sizeof(dst.v) / sizeof(*pd);
  TILES_UNROLL for (int i = 0; i < n; ++i)
    pd[i] = cvt<typename D::dtype>::from(f(cvt<typename A::dtype>::to(pa[i]), cvt<typename B::dtype>::to(pb[i])));
}
// add, sub and mul also take pairs (f32x2): two f32 elements in one v_pk_add_f32 / v_pk_mul_f32 (CDNA3 and
// CDNA4; a subtraction is the add with negated inputs). Clang pairs multiplies and adds by itself, not
// subtractions: a softmax's x - max was one v_sub_f32 an element.
typedef float f32x2 __attribute__((vector_size(8)));
struct op_add {
  TILES_DEV float operator()(float a, float b) const { return a + b; }
  TILES_DEV f32x2 operator()(f32x2 a, f32x2 b) const { return a + b; }
};
struct op_sub {
  TILES_DEV float operator()(float a, float b) const { return a - b; }
  TILES_DEV f32x2 operator()(f32x2 a, f32x2 b) const { return a - b; }
};
struct op_mul {
  TILES_DEV float operator()(float a, float b) const { return a * b; }
  TILES_DEV f32x2 operator()(f32x2 a, f32x2 b) const { return a * b; }
};
template <class T> constexpr bool is_f32 = false;
template <> constexpr bool is_f32<float> = true;
template <class F> constexpr auto pairwise(int) -> decltype(F{}(f32x2{}, f32x2{}), true) { return true; }
template <class F> constexpr bool pairwise(long) { return false; }
struct op_div { TILES_DEV float operator()(float a, float b) const { return a / b; } };
struct op_max {
  TILES_DEV float operator()(float a, float b) const { return arch::max2(a, b); }
  TILES_DEV float operator()(float a, float b, float c) const { return arch::max3(a, b, c); }  // for fold
};
struct op_min { TILES_DEV float operator()(float a, float b) const { return __builtin_fminf(a, b); } };
struct op_exp { TILES_DEV float operator()(float a) const { return __builtin_expf(a); } };
struct op_exp2 { TILES_DEV float operator()(float a) const { return arch::exp2(a); } };
struct op_log { TILES_DEV float operator()(float a) const { return __builtin_logf(a); } };
struct op_log2 { TILES_DEV float operator()(float a) const { return __builtin_log2f(a); } };
struct op_abs { TILES_DEV float operator()(float a) const { return __builtin_fabsf(a); } };
struct op_neg { TILES_DEV float operator()(float a) const { return -a; } };
// Bare clang links no device library (ocml), so every function here lowers to AMDGPU instructions: sqrt, exp2,
// log2, sin and cos are native (v_sqrt_f32, v_exp_f32, v_log_f32, v_sin_f32/v_cos_f32 after a scaling), the
// others are built from them. Accuracy per op: docs/design.md, Numerics.
struct op_sqrt { TILES_DEV float operator()(float a) const { return __builtin_sqrtf(a); } };
struct op_rsqrt { TILES_DEV float operator()(float a) const { return arch::rcp(__builtin_sqrtf(a)); } };
// sigmoid, silu and gelu (tanh form) take the reciprocal of 1 + e^-z (arch::rcp, 1 ULP: IEEE division is ten
// instructions an element): silu and gelu are x sigmoid(z), z = x, and z = 2u for gelu's 0.5 x (1 + tanh u),
// u = sqrt(2/pi) (x + 0.044715 x^3): op_tanh's construction, 1 + tanh u = 2 - 2 / (e^2u + 1) = 2 / (1 + e^-2u),
// with no cancellation where tanh u nears -1. x is floored at -100 (a select), where the result is -0 already
// (1 / inf = 0), so that x = -inf gives -0, not -inf * 0 = NaN; NaN compares false and passes through.
TILES_DEV float sigmoid_of(float z) { return arch::rcp(1.0f + __builtin_expf(-z)); }
TILES_DEV float floored(float x) { return x < -100.0f ? -100.0f : x; }
struct op_sigmoid { TILES_DEV float operator()(float a) const { return sigmoid_of(a); } };
struct op_silu { TILES_DEV float operator()(float a) const { return floored(a) * sigmoid_of(floored(a)); } };
struct op_gelu {
  TILES_DEV float operator()(float a) const {
    return floored(a) * sigmoid_of(floored(a) * (1.59576912f + 0.071354816f * a * a));
  }
};
struct op_tanh {  // 1 - 2 / (e^2|x| + 1) with x's sign: no overflow (e^2|x| = inf gives 1), exact at 0
  TILES_DEV float operator()(float a) const {
    const float t = 1.0f - 2.0f / (__builtin_expf(2.0f * __builtin_fabsf(a)) + 1.0f);
    return __builtin_fabsf(a) < 0.0625f ? a * (1.0f - a * a * (1.0f / 3.0f)) : __builtin_copysignf(t, a);
  }
};
struct op_erf {  // Abramowitz & Stegun 7.1.26: |error| <= 1.5e-7 (plus f32 rounding)
  TILES_DEV float operator()(float a) const {
    const float x = __builtin_fabsf(a), t = 1.0f / (1.0f + 0.3275911f * x);
    const float p = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    return __builtin_copysignf(1.0f - p * __builtin_expf(-x * x), a);
  }
};
struct op_relu { TILES_DEV float operator()(float a) const { return a < 0.0f ? 0.0f : a; } };
struct op_sin { TILES_DEV float operator()(float a) const { return __builtin_sinf(a); } };
struct op_cos { TILES_DEV float operator()(float a) const { return __builtin_cosf(a); } };
struct op_pow {  // x^p as 2^(p log2 |x|); a negative x takes an integer p's sign, else NaN, as powf does
  TILES_DEV float operator()(float x, float p) const {
    if (p == 0.0f) return 1.0f;
    const float r = __builtin_exp2f(p * __builtin_log2f(__builtin_fabsf(x)));
    if (!(x < 0.0f)) return r;
    if (__builtin_floorf(p) != p) return __builtin_nanf("");
    return __builtin_fmodf(p, 2.0f) != 0.0f ? -r : r;
  }
};
struct op_lt { TILES_DEV float operator()(float a, float b) const { return a < b ? 1.0f : 0.0f; } };
struct op_le { TILES_DEV float operator()(float a, float b) const { return a <= b ? 1.0f : 0.0f; } };
struct op_gt { TILES_DEV float operator()(float a, float b) const { return a > b ? 1.0f : 0.0f; } };
struct op_ge { TILES_DEV float operator()(float a, float b) const { return a >= b ? 1.0f : 0.0f; } };
struct op_eq { TILES_DEV float operator()(float a, float b) const { return a == b ? 1.0f : 0.0f; } };
struct op_ne { TILES_DEV float operator()(float a, float b) const { return a != b ? 1.0f : 0.0f; } };
template <class F> struct with_scalar {  // b is one runtime number
  float s;
  TILES_DEV float operator()(float a) const { return F{}(a, s); }
};
#define TILES_UNARY(NAME) \
  template <class D, class A> TILES_DEV void NAME(D& d, const A& a) { map(d, a, op_##NAME{}); }
#define TILES_BINARY(NAME)                                                                          \
  template <class D, class A, class B> TILES_DEV void NAME(D& d, const A& a, const B& b) {          \
    map(d, a, b, op_##NAME{});                                                                      \
  }                                                                                                 \
  template <class D, class A> TILES_DEV void NAME(D& d, const A& a, float s) { map(d, a, with_scalar<op_##NAME>{s}); } \
  template <class D, class A> TILES_DEV void NAME(D& d, const A& a, int s) { map(d, a, with_scalar<op_##NAME>{float(s)}); }
TILES_UNARY(exp) TILES_UNARY(exp2) TILES_UNARY(log) TILES_UNARY(log2) TILES_UNARY(abs) TILES_UNARY(neg)
TILES_UNARY(sqrt) TILES_UNARY(rsqrt) TILES_UNARY(tanh) TILES_UNARY(sigmoid) TILES_UNARY(silu) TILES_UNARY(gelu)
TILES_UNARY(erf) TILES_UNARY(relu) TILES_UNARY(sin) TILES_UNARY(cos)
TILES_BINARY(add) TILES_BINARY(sub) TILES_BINARY(mul) TILES_BINARY(div) TILES_BINARY(max) TILES_BINARY(min)
TILES_BINARY(pow) TILES_BINARY(lt) TILES_BINARY(le) TILES_BINARY(gt) TILES_BINARY(ge) TILES_BINARY(eq) TILES_BINARY(ne)
#undef TILES_UNARY
#undef TILES_BINARY

// dst = a where mask is nonzero, else b; a and b of dst's shape and layout, or scalars (float).
template <class X> TILES_DEV float elem_at(const X& x, int i) { return cvt<typename X::dtype>::to(((const typename X::dtype*)x.v)[i]); }
TILES_DEV float elem_at(float s, int) { return s; }
TILES_DEV float elem_at(int s, int) { return float(s); }
template <class D, class M, class A, class B> TILES_DEV void where(D& dst, const M& mask, const A& a, const B& b) {
  auto* pd = (typename D::dtype*)dst.v;
  constexpr int n = sizeof(dst.v) / sizeof(*pd);
  TILES_UNROLL for (int i = 0; i < n; ++i)
    pd[i] = cvt<typename D::dtype>::from(elem_at(mask, i) != 0.0f ? elem_at(a, i) : elem_at(b, i));
}

// ---------------------------------------------------------------- column-pair exchange
// dst[:, 2j] = src[:, 2j+1], dst[:, 2j+1] = src[:, 2j]; dst may be src. In the accumulator layout a lane holds
// one column (l % M), so the neighbour column of every element sits in lane l ^ 1 at the same register: one
// DPP quad_perm move per element. In the A-operand layout a lane holds runs of E consecutive columns that
// start at even columns, so the pair is two registers of the lane.
template <class T, int R, int C, class L> TILES_DEV void swap_pairs(rt<T, R, C, L>& dst, const rt<T, R, C, L>& src) {
  using X = rt<T, R, C, L>;
  TILES_UNROLL for (int m = 0; m < X::FM; ++m) TILES_UNROLL for (int n = 0; n < X::FN; ++n) {
    if constexpr (L::COL_BY_LANE) {
      static_assert(L::FC % 2 == 0, "column pairs must not straddle fragments");
      TILES_UNROLL for (int e = 0; e < X::E; ++e) {
        const uint32_t bits = __builtin_bit_cast(uint32_t, cvt<T>::to(src.v[m][n][e]));  // exact for every T
        dst.v[m][n][e] = cvt<T>::from(__builtin_bit_cast(float, arch::butterfly<1>(bits)));
      }
    } else {
      static_assert(L::RUN % 2 == 0, "a lane's column runs must hold whole pairs");
      TILES_UNROLL for (int e = 0; e < X::E; e += 2) {
        const T a = src.v[m][n][e], b = src.v[m][n][e + 1];
        dst.v[m][n][e] = b;
        dst.v[m][n][e + 1] = a;
      }
    }
  }
}

// ---------------------------------------------------------------- reductions
// Butterfly over lane bits [LO, HI): afterwards every lane of a group holds the group's result. CDNA4 takes
// lane bits 4 and 5 (the rows of a transposed accumulator) through permlane swaps, both lanes as f(lo, hi).
template <int LO, int HI, class F> TILES_DEV float lane_reduce(float x, F f) {
  if constexpr (LO < HI) {
#if defined(TILES_GFX950)
    if constexpr (LO >= 16) {
      const arch::lane_pair p = arch::halves<LO>(__builtin_bit_cast(uint32_t, x));
      return lane_reduce<LO * 2, HI>(f(__builtin_bit_cast(float, p.lo), __builtin_bit_cast(float, p.hi)), f);
    }
#endif
    x = f(x, __builtin_bit_cast(float, arch::butterfly<LO>(__builtin_bit_cast(uint32_t, x))));
    return lane_reduce<LO * 2, HI>(x, f);
  } else {
    return x;
  }
}
// A lane's N values folded by f as a balanced tree, three at a time where f takes three (max: v_max3_f32):
// the steps of a level are independent (the compiler pairs neighbours into packed adds), where a
// left-to-right fold is one dependency chain of N - 1 steps.
template <class F> constexpr auto ternary(int) -> decltype(F{}(0.0f, 0.0f, 0.0f), true) { return true; }
template <class F> constexpr bool ternary(long) { return false; }
template <class F> TILES_DEV auto apply3(F f, float a, float b, float c, int) -> decltype(f(a, b, c)) { return f(a, b, c); }
template <class F> TILES_DEV float apply3(F f, float a, float b, float c, long) { return f(f(a, b), c); }
template <int N, class F> TILES_DEV float fold(float (&x)[N], F f) {
  constexpr int A = ternary<F>(0) ? 3 : 2;
  TILES_UNROLL for (int w = N; w > 1; w = (w + A - 1) / A) {
    const int t = (w + A - 1) / A;
    TILES_UNROLL for (int i = 0; i < t; ++i) {
      if constexpr (A == 3) {
        if (i + 2 * t < w) x[i] = apply3(f, x[i], x[i + t], x[i + 2 * t], 0);
        else if (i + t < w) x[i] = f(x[i], x[i + t]);
      } else if constexpr (pairwise<F>(0)) {  // neighbours as one pair: x[i..i+1] with x[i+t..i+t+1]
        if (i % 2 == 0 && i + 1 + t < w) {
          const f32x2 r = f(f32x2{x[i], x[i + 1]}, f32x2{x[i + t], x[i + 1 + t]});
          x[i] = r[0], x[i + 1] = r[1];
        } else if (i % 2 == 0 && i + t < w) {
          x[i] = f(x[i], x[i + t]);
        }
      } else if (i + t < w) {
        x[i] = f(x[i], x[i + t]);
      }
    }
  }
  return x[0];
}
// dst[row] = f over the row of src, times *scale when given (f must commute with it), then with acc[row] when given.
template <class F, class V, class T, int R, int C, class L>
TILES_DEV void row_reduce(V& dst, const rt<T, R, C, L>& src, const V* acc, F f, const float* scale = nullptr) {
  using X = rt<T, R, C, L>;
  constexpr int G = L::ROW_BY_LANE ? X::E : 1;  // a fragment's elements of one row in a lane: all, or element e
  TILES_UNROLL for (int m = 0; m < X::FM; ++m) {
    TILES_UNROLL for (int e = 0; e < V::VE; ++e) {  // each of the vector's values once (dst may be acc)
      float part[X::FN * G];
      TILES_UNROLL for (int n = 0; n < X::FN; ++n)
        TILES_UNROLL for (int g = 0; g < G; ++g) part[n * G + g] = cvt<T>::to(src.v[m][n][G == 1 ? e : g]);
      float r = lane_reduce<L::ROW_LO, L::ROW_HI>(fold(part, f), f);
      if (scale) r *= *scale;
      if (acc) r = f(r, cvt<typename V::dtype>::to(acc->at(m, e)));
      dst.at(m, e) = cvt<typename V::dtype>::from(r);
    }
  }
}
// dst[col] = f over the column of src (all waves' rows): lanes first, then waves through LDS.
// scratch: WAVES * C floats of LDS; the two barriers make the op block-wide.
template <int WAVES, class F, class V, class T, int R, int C, class L>
TILES_DEV void col_reduce(V& dst, const rt<T, R, C, L>& src, const V* acc, F f, float* scratch) {
  using X = rt<T, R, C, L>;
  const int lane = arch::lane_id(), w = arch::wave_id();
  TILES_UNROLL for (int n = 0; n < X::FN; ++n) {
    float part[X::E];
    TILES_UNROLL for (int e = 0; e < X::E; ++e) {
      part[e] = cvt<T>::to(src.v[0][n][e]);
      TILES_UNROLL for (int m = 1; m < X::FM; ++m) part[e] = f(part[e], cvt<T>::to(src.v[m][n][e]));
    }
    if constexpr (L::COL_BY_LANE) {
      TILES_UNROLL for (int e = 1; e < X::E; ++e) part[0] = f(part[0], part[e]);
      TILES_UNROLL for (int e = 1; e < X::E; ++e) part[e] = part[0];
    }
    TILES_UNROLL for (int e = 0; e < X::E; ++e) {
      float r = lane_reduce<L::COL_LO, L::COL_HI>(part[e], f);
      if (L::row(lane, e) == 0) scratch[w * C + n * L::FC + L::col(lane, e)] = r;
    }
  }
  arch::barrier();
  TILES_UNROLL for (int n = 0; n < X::FN; ++n) {
    TILES_UNROLL for (int e = 0; e < V::VE; ++e) {  // each of the vector's values once (dst may be acc)
      const int c = n * L::FC + L::col(lane, e);
      float r = scratch[c];
      for (int i = 1; i < WAVES; ++i) r = f(r, scratch[i * C + c]);
      if (acc) r = f(r, cvt<typename V::dtype>::to(acc->at(n, e)));
      dst.at(n, e) = cvt<typename V::dtype>::from(r);
    }
  }
  arch::barrier();  // scratch may be reused right after
}
// Every element of dst (a row or a column vector) <- f over the whole tile: the lane's elements as a tree (fold),
// the wave's 64 lanes by butterflies, then the waves through `scratch` (a float a wave), each wave's value once:
// one exchange where a row reduction and a column one would take two. One barrier, between the write and the
// reads: the generated kernel hands each exchange one of two halves of the reduction scratch that no wave may
// still be reading (codegen.py, _BarrierPlan), so that the next exchange need not wait for this one's reads.
template <int WAVES, class F, class V, class T, int R, int C, class L, int WC>
TILES_DEV void tile_reduce(V& dst, const rt<T, R, C, L, WC>& src, const V* acc, F f, float* scratch) {
  using X = rt<T, R, C, L, WC>;
  float part[X::FM * X::FN * X::E];
  TILES_UNROLL for (int m = 0; m < X::FM; ++m)
    TILES_UNROLL for (int n = 0; n < X::FN; ++n)
      TILES_UNROLL for (int e = 0; e < X::E; ++e) part[(m * X::FN + n) * X::E + e] = cvt<T>::to(src.v[m][n][e]);
  float r = lane_reduce<1, 64>(fold(part, f), f);
  if constexpr (WAVES > 1) {
    if (arch::lane_id() == 0) scratch[arch::wave_id()] = r;
    arch::barrier();
    r = scratch[0];
    for (int w = 1; w < WAVES; ++w) r = f(r, scratch[w]);
  }
  static_assert(is_f32<typename V::dtype>, "a whole-tile reduction goes to an f32 vector");
  float* d = (float*)dst.v;
  const float* a = acc ? (const float*)acc->v : nullptr;
  TILES_UNROLL for (int i = 0; i < int(sizeof(dst.v) / sizeof(float)); ++i) d[i] = a ? f(a[i], r) : r;
}
template <class V> struct same { using type = V; };  // keeps `acc` out of template deduction (nullptr)
#define TILES_REDUCE(NAME, F)                                                                  \
  template <class V, class X> TILES_DEV void row_##NAME(V& d, const X& s, const V* acc = nullptr) { \
    row_reduce(d, s, acc, F{});                                                                \
  }                                                                                            \
  template <int WAVES, class V, class X>                                                       \
  TILES_DEV void col_##NAME(V& d, const X& s, const typename same<V>::type* acc, float* scratch) { \
    col_reduce<WAVES>(d, s, acc, F{}, scratch);                                                \
  }                                                                                            \
  template <int WAVES, class V, class X>                                                       \
  TILES_DEV void tile_##NAME(V& d, const X& s, const typename same<V>::type* acc, float* scratch) { \
    tile_reduce<WAVES>(d, s, acc, F{}, scratch);                                               \
  }
TILES_REDUCE(sum, op_add) TILES_REDUCE(max, op_max) TILES_REDUCE(min, op_min)
#undef TILES_REDUCE

// ---------------------------------------------------------------- log-sum-exp2 of (max, sum) pairs
// (m, s) <- (m, s) merged with (m2, s2): the larger max, each sum rescaled to it. fminf(NaN, 0) is 0, so two
// empty pairs (-inf, 0) merge into one without a NaN.
TILES_DEV void merge_max_sum(float& m, float& s, float m2, float s2) {
  const float top = __builtin_fmaxf(m, m2);
  s = s * arch::exp2(__builtin_fminf(m - top, 0.0f)) + s2 * arch::exp2(__builtin_fminf(m2 - top, 0.0f));
  m = top;
}
// The butterfly of lane_reduce over lane bits [LO, HI), on pairs.
template <int LO, int HI> TILES_DEV void lane_merge(float& m, float& s) {
  if constexpr (LO < HI) {
    const float m2 = __builtin_bit_cast(float, arch::butterfly<LO>(__builtin_bit_cast(uint32_t, m)));
    const float s2 = __builtin_bit_cast(float, arch::butterfly<LO>(__builtin_bit_cast(uint32_t, s)));
    merge_max_sum(m, s, m2, s2);
    lane_merge<LO * 2, HI>(m, s);
  }
}
// The lane's pairs merged (s = 0 counts as empty, so that it cannot pull the max up), then the lanes' over
// lane bits [LO, HI): those that hold the vector's other elements.
template <int LO, int HI, class V> TILES_DEV void merge_lanes(float& top, float& sum, const V& m, const V& s) {
  top = -__builtin_inff();
  sum = 0.0f;
  constexpr int n = sizeof(m.v) / sizeof(float);
  TILES_UNROLL for (int i = 0; i < n; ++i) {
    const float si = ((const float*)s.v)[i];
    merge_max_sum(top, sum, si > 0.0f ? ((const float*)m.v)[i] : -__builtin_inff(), si);
  }
  lane_merge<LO, HI>(top, sum);
}
template <class V> TILES_DEV void fill_lse(V& dst, float top, float sum) { fill(dst, top + __builtin_log2f(sum)); }
// Every element of dst <- log2(sum_j s[j] 2^m[j]) over the whole vectors. A row vector is split over the waves:
// after the lanes, the waves' pairs meet in `scratch` (2 floats a wave), the max and the sum in one exchange with
// one barrier (scratch: a half no wave may still be reading, as tile_reduce's). A column vector is whole in every
// wave.
template <int WAVES, class L, int R>
TILES_DEV void logsumexp2(rv<float, R, L>& dst, const rv<float, R, L>& m, const rv<float, R, L>& s, float* scratch) {
  float top, sum;
  merge_lanes<L::COL_LO, L::COL_HI>(top, sum, m, s);   // lanes of one column hold the other rows
  if (arch::lane_id() == 0) {
    scratch[2 * arch::wave_id()] = top;
    scratch[2 * arch::wave_id() + 1] = sum;
  }
  arch::barrier();
  top = -__builtin_inff();
  sum = 0.0f;
  for (int w = 0; w < WAVES; ++w) merge_max_sum(top, sum, scratch[2 * w], scratch[2 * w + 1]);
  fill_lse(dst, top, sum);
}
template <int WAVES, class L, int C>
TILES_DEV void logsumexp2(cv<float, C, L>& dst, const cv<float, C, L>& m, const cv<float, C, L>& s, float*) {
  float top, sum;
  merge_lanes<L::ROW_LO, L::ROW_HI>(top, sum, m, s);   // lanes of one row hold the other columns
  fill_lse(dst, top, sum);
}

// ---------------------------------------------------------------- broadcasts
// dst.v[m][n][e] = f(src.v[m][n][e], b(e)) for one fragment; two elements at a time where everything is f32
// and f takes pairs.
template <class F, class TD, class TS, int E, class B>
TILES_DEV void frag_apply(TD (&dst)[E], const TS (&src)[E], B b, F f) {
  if constexpr (is_f32<TD> && is_f32<TS> && is_f32<decltype(b(0))> && pairwise<F>(0) && E % 2 == 0) {
    TILES_UNROLL for (int e = 0; e < E; e += 2) {
      const f32x2 r = f(f32x2{src[e], src[e + 1]}, f32x2{b(e), b(e + 1)});
      dst[e] = r[0];
      dst[e + 1] = r[1];
    }
  } else {
    TILES_UNROLL for (int e = 0; e < E; ++e) dst[e] = cvt<TD>::from(f(cvt<TS>::to(src[e]), cvt<decltype(b(0))>::to(b(e))));
  }
}
template <class F, class D, class T, int R, int C, class L, class V>
TILES_DEV void row_broadcast(D& dst, const rt<T, R, C, L>& src, const V& v, F f) {
  TILES_UNROLL for (int m = 0; m < D::FM; ++m) TILES_UNROLL for (int n = 0; n < D::FN; ++n)
    frag_apply(dst.v[m][n], src.v[m][n], [&](int e) { return v.at(m, e); }, f);
}
template <class F, class D, class T, int R, int C, class L, class V>
TILES_DEV void col_broadcast(D& dst, const rt<T, R, C, L>& src, const V& v, F f) {
  TILES_UNROLL for (int m = 0; m < D::FM; ++m) TILES_UNROLL for (int n = 0; n < D::FN; ++n)
    frag_apply(dst.v[m][n], src.v[m][n], [&](int e) { return v.at(n, e); }, f);
}
#define TILES_BCAST(NAME)                                                                        \
  template <class D, class X, class V> TILES_DEV void NAME##_row(D& d, const X& s, const V& v) { \
    row_broadcast(d, s, v, op_##NAME{});                                                         \
  }                                                                                              \
  template <class D, class X, class V> TILES_DEV void NAME##_col(D& d, const X& s, const V& v) { \
    col_broadcast(d, s, v, op_##NAME{});                                                         \
  }
TILES_BCAST(add) TILES_BCAST(sub) TILES_BCAST(div)
#undef TILES_BCAST
// A positive scale c folded into the exponent (tiles/rewrites.py, scaled_exp2): the row max of the unscaled tile,
// times c (max(c x) = c max(x) for c > 0, rounding included), and exp2(x c - m) with one fused multiply-add a
// pair of elements (v_pk_fma_f32) where a multiply and a subtraction were.
template <class V, class X> TILES_DEV void row_max_scaled(V& d, const X& s, float c, const V* acc = nullptr) {
  row_reduce(d, s, acc, op_max{}, &c);
}
struct op_fma_neg {  // a c - m
  float c;
  TILES_DEV float operator()(float a, float m) const { return __builtin_fmaf(a, c, -m); }
  TILES_DEV f32x2 operator()(f32x2 a, f32x2 m) const {
#if defined(__clang__)
    return __builtin_elementwise_fma(a, f32x2{c, c}, -m);
#else  // hip-emu's g++: the same two fused multiply-adds
    return f32x2{__builtin_fmaf(a[0], c, -m[0]), __builtin_fmaf(a[1], c, -m[1])};
#endif
  }
};
// The arguments first, then the exponentials: v_exp_f32 reading a VGPR the instruction before it wrote costs an
// s_nop on CDNA4, and an exponential right behind each pair's fma paid one a pair.
template <class D, class X, class V> TILES_DEV void exp2_scaled_sub_row(D& d, const X& s, float c, const V& v) {
  row_broadcast(d, s, v, op_fma_neg{c});
  exp2(d, d);
}
// d = s * v by rows (columns). In place, a wave whose values of v are all 1 skips the multiplies (an online
// softmax's rescale of its output while no row maximum of the wave moved): a compare a value and a scalar
// branch, against a multiply per element. Exact either way (x * 1 = x). Only where the lane holds at most half as
// many values of v as elements of s: a column vector of a row_runs tile holds eight a fragment, as many as
// the tile's rows of 16 (the compares would cost more than the multiplies they might save).
template <class V, class X> TILES_DEV bool all_one(const V& v, const X&) {
  using T = typename V::dtype;
  constexpr int N = sizeof(v.v) / sizeof(T);
  if constexpr (2 * N > (int)(sizeof(X::v) / sizeof(typename X::dtype))) return false;
  bool one = true;
  TILES_UNROLL for (int i = 0; i < N; ++i) one &= cvt<T>::to(((const T*)v.v)[i]) == 1.0f;
  return arch::wave_all(one);
}
template <class D, class X, class V> TILES_DEV void mul_row(D& d, const X& s, const V& v) {
  if ((const void*)&d == (const void*)&s && all_one(v, s)) return;
  row_broadcast(d, s, v, op_mul{});
}
template <class D, class X, class V> TILES_DEV void mul_col(D& d, const X& s, const V& v) {
  if ((const void*)&d == (const void*)&s && all_one(v, s)) return;
  col_broadcast(d, s, v, op_mul{});
}

// ---------------------------------------------------------------- masks
// (i, j) are coordinates in the block tile: this wave owns rows wave_id * R .. + R - 1.
// A wave whose whole tile is kept (every one but the edge and diagonal tiles) only copies: one scalar
// branch, no compare per element.
template <class D, class T, int R, int C, class L, class Keep>
TILES_DEV void mask(D& dst, const rt<T, R, C, L>& src, Keep keep, float fill_value) {
  const int lane = arch::lane_id(), row0 = arch::wave_id() * R;
  if (__builtin_expect(keep.all(row0, R, C), 1)) {
    if ((const void*)&dst != (const void*)&src) copy(dst, src);
    return;
  }
  TILES_UNROLL for (int m = 0; m < D::FM; ++m) TILES_UNROLL for (int n = 0; n < D::FN; ++n)
    TILES_UNROLL for (int e = 0; e < D::E; ++e) {
      const int i = row0 + m * L::FR + L::row(lane, e), j = n * L::FC + L::col(lane, e);
      dst.v[m][n][e] = keep(i, j) ? convert<typename D::dtype>(src.v[m][n][e])
                                  : cvt<typename D::dtype>::from(fill_value);
    }
}
struct keep_causal {
  int row0, col0;
  TILES_DEV bool operator()(int i, int j) const { return col0 + j <= row0 + i; }
  TILES_DEV bool all(int i0, int n, int m) const { return col0 + m - 1 <= row0 + i0; }  // rows i0.., columns 0..m-1
};
// ROWS / COLS: whether that bound can cut the tile. The codegen drops a test whose bound is a constant no smaller
// than the block tile (ir.bounds_tested): the row test needs the wave's rows (a v_readfirstlane), and both
// together a scalar and of two compares, on every step of attention's KV loop.
template <bool ROWS = true, bool COLS = true> struct keep_bounds {
  int rows, cols;
  TILES_DEV bool operator()(int i, int j) const { return (!ROWS || i < rows) && (!COLS || j < cols); }
  TILES_DEV bool all(int i0, int n, int m) const { return (!ROWS || i0 + n <= rows) && (!COLS || m <= cols); }
};
template <class D, class X> TILES_DEV void causal_mask(D& d, const X& s, int row0, int col0, float fill_value) {
  mask(d, s, keep_causal{row0, col0}, fill_value);
}
template <class D, class X> TILES_DEV void bounds_mask(D& d, const X& s, int rows, int cols, float fill_value) {
  mask(d, s, keep_bounds<>{rows, cols}, fill_value);
}
template <class D, class X> TILES_DEV void bounds_mask_rows(D& d, const X& s, int rows, float fill_value) {
  mask(d, s, keep_bounds<true, false>{rows, 0}, fill_value);
}
template <class D, class X> TILES_DEV void bounds_mask_cols(D& d, const X& s, int cols, float fill_value) {
  mask(d, s, keep_bounds<false, true>{0, cols}, fill_value);
}

// ---------------------------------------------------------------- dropout
// dst = src / (1 - p) where tl.dropout keeps global element (row0 + i, col0 + j), else 0; (i, j) are
// block-tile coordinates as in mask(), so each element's (row, col) comes from the MFMA layout. In the
// accumulator layout a lane's elements share no group of four columns, so each draws its own Philox.
// The keep bits are drawn first in a rolled loop (unrolled, the independent Philox chains would be
// interleaved and spill), then applied with compile-time register indices.
template <class D, class T, int R, int C, class L>
TILES_DEV void dropout(D& dst, const rt<T, R, C, L>& src, float p, uint32_t seed, uint32_t offset, int row0, int col0) {
  using X = rt<T, R, C, L>;
  constexpr int N = X::FM * X::FN * X::E, WORDS = (N + 31) / 32;
  const int lane = arch::lane_id();
  row0 += arch::wave_id() * R;
  uint32_t keep[WORDS];
  TILES_UNROLL for (int w = 0; w < WORDS; ++w) {
    uint32_t bits = 0;
    for (int k = 0; k < 32 && 32 * w + k < N; ++k) {
      const int x = 32 * w + k, m = x / (X::FN * X::E), n = x / X::E % X::FN, e = x % X::E;
      const uint32_t row = row0 + m * L::FR + L::row(lane, e), col = col0 + n * L::FC + L::col(lane, e);
      bits |= uint32_t(tiles_philox::keep_at(row, col, p, seed, offset)) << k;
    }
    keep[w] = bits;
  }
  const float scale = 1.0f / (1.0f - p);
  TILES_UNROLL for (int m = 0; m < D::FM; ++m) TILES_UNROLL for (int n = 0; n < D::FN; ++n)
    TILES_UNROLL for (int e = 0; e < D::E; ++e) {
      const int x = (m * D::FN + n) * D::E + e;
      const float v = keep[x / 32] >> (x % 32) & 1 ? cvt<T>::to(src.v[m][n][e]) * scale : 0.0f;
      dst.v[m][n][e] = cvt<typename D::dtype>::from(v);
    }
}

// ---------------------------------------------------------------- conversions
// copy: same layout -> one conversion per element. Different layouts (e.g. an f32 accumulator into a
// bf16 A operand, the P of attention) -> each element fetched from the lane holding it with ds_bpermute;
// a lane cannot pick the register it is sent, so every candidate register of the source fragment is
// sent and the destination keeps the one it needs.
template <class TD, class TS, int R, int C, class L>
TILES_DEV void copy(rt<TD, R, C, L>& dst, const rt<TS, R, C, L>& src) { map(dst, src, [](float x) { return x; }); }
template <class TD, class TS, int R, class L> TILES_DEV void copy(rv<TD, R, L>& d, const rv<TS, R, L>& s) {
  map(d, s, [](float x) { return x; });
}
template <class TD, class TS, int C, class L> TILES_DEV void copy(cv<TD, C, L>& d, const cv<TS, C, L>& s) {
  map(d, s, [](float x) { return x; });
}
template <class TD, class TS, int R, int C, class LD, class LS>
TILES_DEV void copy(rt<TD, R, C, LD>& dst, const rt<TS, R, C, LS>& src) {
  static_assert(LD::FR == LS::FR, "layout change across fragment heights is not supported");
  using S = rt<TS, R, C, LS>;
  const int lane = arch::lane_id();
  TILES_UNROLL for (int m = 0; m < dst.FM; ++m) TILES_UNROLL for (int n = 0; n < dst.FN; ++n)
    TILES_UNROLL for (int e = 0; e < dst.E; ++e) {
      const int r = LD::row(lane, e), c = n * LD::FC + LD::col(lane, e);
      const int want_n = c / LS::FC, src_lane = LS::lane_of(r, c % LS::FC), want_e = LS::e_of(r, c % LS::FC);
      const int n_lo = n * LD::FC / LS::FC, n_hi = ((n + 1) * LD::FC - 1) / LS::FC;
      float x = 0;
      TILES_UNROLL for (int ns = n_lo; ns <= n_hi; ++ns) TILES_UNROLL for (int es = 0; es < S::E; ++es) {
        float y = cvt<TS>::to(src.v[m][ns][es]);
        y = __builtin_bit_cast(float, arch::shfl(__builtin_bit_cast(uint32_t, y), src_lane));
        if (ns == want_n && es == want_e) x = y;
      }
      dst.v[m][n][e] = cvt<TD>::from(x);
    }
}
// A transposed accumulator into the A operand in its K order: lane l holds row l % M in both, and the
// columns its elements hold are the same, so element e of A fragment n is a register of the same lane
// (source fragment and register known at compile time): one conversion per element, nothing crosses lanes.
template <class LD, class LS, int FN> constexpr bool lane_local() {
  for (int l = 0; l < 64; ++l) for (int n = 0; n < FN; ++n) for (int e = 0; e < LD::E; ++e) {
    const int c = n * LD::FC + LD::col(l, e), ns = c / LS::FC, es = LS::e_of(LD::row(l, e), c % LS::FC);
    if (LS::lane_of(LD::row(l, e), c % LS::FC) != l || ns != (n * LD::FC + LD::col(0, e)) / LS::FC ||
        es != LS::e_of(0, (n * LD::FC + LD::col(0, e)) % LS::FC))
      return false;
  }
  return true;
}
template <class TD, class TS, int R, int C, int M, int K>
TILES_DEV void copy(rt<TD, R, C, opa<M, K, true>>& dst, const rt<TS, R, C, acc_t<M>>& src) {
  using LD = opa<M, K, true>;
  using LS = acc_t<M>;
  static_assert(lane_local<LD, LS, C / K>(), "the A operand's K order is not the transposed accumulator's");
  TILES_UNROLL for (int m = 0; m < dst.FM; ++m) TILES_UNROLL for (int n = 0; n < dst.FN; ++n)
    TILES_UNROLL for (int e = 0; e < dst.E; ++e) {
      const int c = n * K + LD::col(0, e);
      dst.v[m][n][e] = cvt<TD>::from(cvt<TS>::to(src.v[m][c / M][LS::e_of(0, c % M)]));
    }
}
// The 16x16 accumulator into a 16 x K A operand (attention's P): 4x4 transposes in rounds. Lane
// (a, b, q) = 16a + 4b + q needs S[4b + q][K n + E a + e] for e < E, held as register q of lane
// 16b + (E a + e) % 16 in source fragment (K n + E a) / 16. Round j of element group h fetches
// e = 4h + (q + j) % 4 from that lane, which sends its register (its own lane % 4 - j) % 4 = q: one
// ds_bpermute per element and source fragment, instead of one per candidate register.
template <class TD, class TS, int R, int C, int K>
TILES_DEV void copy(rt<TD, R, C, opa<16, K>>& dst, const rt<TS, R, C, acc<16>>& src) {
  constexpr int E = K / 4, SRC_FRAGS = K / 16;
  const int lane = arch::lane_id(), a = lane / 16, b = (lane % 16) / 4, q = lane % 4, mine = E * a / 16;
  TILES_UNROLL for (int m = 0; m < dst.FM; ++m) TILES_UNROLL for (int n = 0; n < dst.FN; ++n)
    TILES_UNROLL for (int h = 0; h < E / 4; ++h) TILES_UNROLL for (int j = 0; j < 4; ++j) {
      const int send = (q - j) & 3, e = 4 * h + ((q + j) & 3), from = 16 * b + (E * a + e) % 16;
      float x = 0;
      TILES_UNROLL for (int f = 0; f < SRC_FRAGS; ++f) {
        float y = 0;
        TILES_UNROLL for (int i = 0; i < 4; ++i) if (i == send) y = cvt<TS>::to(src.v[m][n * SRC_FRAGS + f][i]);
        y = __builtin_bit_cast(float, arch::shfl(__builtin_bit_cast(uint32_t, y), from));
        if (f == mine) x = y;
      }
      TILES_UNROLL for (int i = 0; i < E; ++i) if (i == e) dst.v[m][n][i] = cvt<TD>::from(x);
    }
}
#if defined(TILES_GFX950)
// The same conversion through this wave's LDS, for 16-bit A operands on CDNA4 (no ds_bpermute): each lane
// writes its four rows of one column of a 16x16 accumulator fragment as one ds_write_b64 into the wave's
// copy of the tile stored transposed (a row per column, 16 elements: the fragment's rows), and the A
// fragment comes back with the transposing read (ds_read_b64_tr_b16, two per 32 K), which gives each lane
// its row's consecutive columns. One wave writes and reads its own copy, in order: no barrier.
// scratch: WAVES x R x C elements of TD.
template <class TD, class TS, int R, int C, int K>
TILES_DEV void copy(rt<TD, R, C, opa<16, K>>& dst, const rt<TS, R, C, acc<16>>& src, uint8_t* scratch) {
  static_assert(sizeof(TD) == 2 && K % 8 == 0, "the LDS route is for 16-bit A operands");
  using S = rt<TS, R, C, acc<16>>;
  const int lane = arch::lane_id();
  TD* t = (TD*)scratch + arch::wave_id() * R * C;  // t[m][c][r]: fragment row m, column c, row r < 16
  TILES_UNROLL for (int m = 0; m < S::FM; ++m) TILES_UNROLL for (int n = 0; n < S::FN; ++n) {
    TD run[4];
    TILES_UNROLL for (int i = 0; i < 4; ++i) run[i] = cvt<TD>::from(cvt<TS>::to(src.v[m][n][i]));
    TD* at = t + (m * C + n * 16 + lane % 16) * 16 + 4 * (lane / 16);
#if defined(TILES_EMU)
    __builtin_memcpy(at, run, 8);
#else
    typedef uint32_t w2 __attribute__((ext_vector_type(2)));  // one ds_write_b64
    w2 x;
    __builtin_memcpy(&x, run, 8);
    *(w2*)at = x;
#endif
  }
  using TR = tr_frag<16, K / 4>;
  TILES_UNROLL for (int m = 0; m < dst.FM; ++m) TILES_UNROLL for (int n = 0; n < dst.FN; ++n)
    TILES_UNROLL for (int h = 0; h < K / 16; ++h)
      arch::ds_read_tr16_b64((const uint8_t*)(t + (m * C + n * K + TR::k(lane, h)) * 16 + TR::c(lane)),
                             (uint32_t*)(dst.v[m][n] + 4 * h));
}
#endif
}  // namespace tiles_hip
