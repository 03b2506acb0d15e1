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

// What scalar expressions of the IR call (tiles/cgen.py).
inline int tiles_cdiv(int a, int b) { return (a + b - 1) / b; }
template <typename A, typename B> inline decltype(A() + B()) tiles_min(A a, B b) { return a < b ? a : b; }
template <typename A, typename B> inline decltype(A() + B()) tiles_max(A a, B b) { return a < b ? b : a; }

// The identity of a reduction, so a reduction can start from it.
template <typename Op> struct identity;
template <> struct identity<op_add> { static float value() { return 0.0f; } };
template <> struct identity<op_max> { static float value() { return -INFINITY; } };
template <> struct identity<op_min> { static float value() { return INFINITY; } };

}  // namespace tiles_metal
