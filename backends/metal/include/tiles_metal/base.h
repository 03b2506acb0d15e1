// tiles_metal/base.h - what every other header of the library needs: the Metal standard library (or, under
// TILES_EMU, the CPU shim that stands in for it), the block's worker coordinates, and the scalar helpers.
//
// Apple does not document which lane of a simdgroup holds which element of a simdgroup_matrix. Element-wise maps
// use thread_elements() only where position does not matter (the same function on every element, or two matrices
// of the same type, whose layouts are equal by construction); every op that needs positions is built on
// elements.h, which by default goes through threadgroup memory where the positions are ours.
#pragma once

#ifdef TILES_EMU
#include "metal_emu.h"
#else
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;
#endif

// A parameter attribute whose name is also an address-space word ([[threadgroup(0)]]): the CPU shim erases
// address-space words, so this one attribute is spelled through a macro that the shim defines as nothing.
#ifndef TILES_EMU
#define TILES_ATTR(a) [[a]]
#endif

// bfloat exists from Metal 3.1 (macOS 14): the runtime compiles kernels with bf16 tiles for that version.

namespace tiles_metal {

constant constexpr int BASE = 8;          // the simdgroup_matrix side
constant constexpr int SIMD = 32;         // lanes per simdgroup
constant constexpr int SCRATCH = BASE * BASE;  // floats of scratch per simdgroup (elements.h)

// Who this thread is within the block, plus the scratch its simdgroup owns. Made once at the top of a kernel.
struct block {
    ushort tid;                 // thread index in the threadgroup
    ushort sg;                  // simdgroup index
    ushort lane;                // lane in the simdgroup
    ushort nthreads;            // threads in the threadgroup
    threadgroup float* scratch; // this simdgroup's SCRATCH floats
};

inline block make_block(ushort tid, ushort sg, ushort lane, ushort nsg, threadgroup float* scratch_base) {
    block b;
    b.tid = tid;
    b.sg = sg;
    b.lane = lane;
    b.nthreads = ushort(nsg * SIMD);
    b.scratch = scratch_base + sg * SCRATCH;
    return b;
}

// The scalar operations the maps and reductions are made of, as functors (MSL has no lambdas).
struct op_add { template <typename T> T operator()(T a, T b) const { return a + b; } };
struct op_sub { template <typename T> T operator()(T a, T b) const { return a - b; } };
struct op_mul { template <typename T> T operator()(T a, T b) const { return a * b; } };
struct op_div { template <typename T> T operator()(T a, T b) const { return a / b; } };
struct op_max { template <typename T> T operator()(T a, T b) const { return metal::max(a, b); } };
struct op_min { template <typename T> T operator()(T a, T b) const { return metal::min(a, b); } };
struct op_exp { template <typename T> T operator()(T a) const { return T(metal::exp(float(a))); } };
struct op_exp2 { template <typename T> T operator()(T a) const { return T(metal::exp2(float(a))); } };
struct op_log { template <typename T> T operator()(T a) const { return T(metal::log(float(a))); } };
struct op_log2 { template <typename T> T operator()(T a) const { return T(metal::log2(float(a))); } };
struct op_abs { template <typename T> T operator()(T a) const { return T(metal::fabs(float(a))); } };
struct op_neg { template <typename T> T operator()(T a) const { return -a; } };
// MSL's math (fast math by default on the device: docs/design.md, Numerics); MSL has no erf: Abramowitz &
// Stegun 7.1.26, |error| <= 1.5e-7 plus f32 rounding. relu passes NaN on.
inline float erf_as(float a) {
    const float x = metal::fabs(a), t = 1.0f / (1.0f + 0.3275911f * x);
    const float p = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    return metal::copysign(1.0f - p * metal::exp(-x * x), a);
}
struct op_sqrt { template <typename T> T operator()(T a) const { return T(metal::sqrt(float(a))); } };
struct op_rsqrt { template <typename T> T operator()(T a) const { return T(metal::rsqrt(float(a))); } };
struct op_tanh { template <typename T> T operator()(T a) const { return T(metal::tanh(float(a))); } };
struct op_sigmoid { template <typename T> T operator()(T a) const { return T(1.0f / (1.0f + metal::exp(-float(a)))); } };
// silu and gelu (tanh form) are x sigmoid(z) = x / (1 + e^-z): z = x, and z = 2u for gelu's 0.5 x (1 + tanh u),
// u = sqrt(2/pi) (x + 0.044715 x^3), since 1 + tanh u = 2 / (1 + e^-2u) (no cancellation where tanh u nears -1).
// Below x = -100 e^-z is inf and the quotient -0 already; returning it keeps x = -inf from -inf / inf = NaN.
inline float times_sigmoid(float x, float z) { return x < -100.0f ? -0.0f : x / (1.0f + metal::exp(-z)); }
struct op_silu { template <typename T> T operator()(T a) const { return T(times_sigmoid(float(a), float(a))); } };
struct op_gelu {
    template <typename T> T operator()(T a) const {
        const float x = float(a);
        return T(times_sigmoid(x, x * (1.59576912f + 0.071354816f * x * x)));
    }
};
struct op_erf { template <typename T> T operator()(T a) const { return T(erf_as(float(a))); } };
struct op_relu { template <typename T> T operator()(T a) const { return float(a) < 0.0f ? T(0.0f) : a; } };
struct op_sin { template <typename T> T operator()(T a) const { return T(metal::sin(float(a))); } };
struct op_cos { template <typename T> T operator()(T a) const { return T(metal::cos(float(a))); } };
// x^p; MSL's pow is undefined for x < 0: a negative x takes an integer p's sign, else NaN, as powf does
inline float pow_as(float x, float p) {
    if (p == 0.0f) return 1.0f;
    const float r = metal::pow(metal::fabs(x), p);
    if (!(x < 0.0f)) return r;
    if (metal::floor(p) != p) return NAN;
    return metal::fmod(p, 2.0f) != 0.0f ? -r : r;
}
struct op_pow { template <typename T, typename U> T operator()(T a, U p) const { return T(pow_as(float(a), float(p))); } };
#define TILES_METAL_COMPARE(NAME, OP) \
    struct op_##NAME { template <typename T> T operator()(T a, T b) const { return T(float(a) OP float(b) ? 1.0f : 0.0f); } };
TILES_METAL_COMPARE(lt, <) TILES_METAL_COMPARE(le, <=) TILES_METAL_COMPARE(gt, >) TILES_METAL_COMPARE(ge, >=)
TILES_METAL_COMPARE(eq, ==) TILES_METAL_COMPARE(ne, !=)
#undef TILES_METAL_COMPARE

// What scalar expressions of the IR call (tiles/cgen.py).
inline int tiles_cdiv(int a, int b) { return (a + b - 1) / b; }
template <typename A, typename B> inline decltype(A() + B()) tiles_min(A a, B b) { return a < b ? a : b; }
template <typename A, typename B> inline decltype(A() + B()) tiles_max(A a, B b) { return a < b ? b : a; }
// tl.grid(group=g)'s order (tiles/cgen.py): the block at position `id` of the launch order takes row and column
// (axes 0 and 1) column by column within groups of `group` rows, the last group shorter where rows run out.
inline int tiles_group_row(int id, int rows, int cols, int group) {
    const int first = id / (group * cols) * group, height = tiles_min(rows - first, group);
    return first + id % (group * cols) % height;
}
inline int tiles_group_col(int id, int rows, int cols, int group) {
    const int first = id / (group * cols) * group, height = tiles_min(rows - first, group);
    return id % (group * cols) / height;
}

// The identity of a reduction, so a reduction can start from it.
template <typename Op> struct identity;
template <> struct identity<op_add> { static float value() { return 0.0f; } };
template <> struct identity<op_max> { static float value() { return -INFINITY; } };
template <> struct identity<op_min> { static float value() { return INFINITY; } };

}  // namespace tiles_metal
