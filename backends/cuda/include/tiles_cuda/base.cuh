// tiles_cuda/base.cuh: element types, packed pairs, conversions, block geometry.
//
// Works under nvcc and NVRTC alike: only CUDA's own fp16/bf16/fp8 headers are
// included (the toolchain points NVRTC at the nvidia-cuda-runtime wheel's copy
// when no toolkit is installed), no C++ standard library. Under TILES_EMU (the
// CPU engine, tiles/emu) the host compiler takes cuda_emu.h instead: those types,
// the builtins, and the meaning of every inline-PTX function of this library.
#pragma once
#if defined(TILES_EMU)
#include "cuda_emu.h"
#else
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#endif

// Generated code spells infinities and NaNs as in C (tiles/cgen.py); NVRTC has no math.h.
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif

namespace tc {

using bf16 = __nv_bfloat16;
using f16 = __half;
using f32 = float;
using fp8e4m3 = __nv_fp8_e4m3;
using fp8e5m2 = __nv_fp8_e5m2;
using i32 = int;

constexpr int WARP = 32;

template <typename A, typename B> constexpr bool same = false;
template <typename A> constexpr bool same<A, A> = true;
template <bool B, typename X, typename Y> struct cond_t { using type = X; };
template <typename X, typename Y> struct cond_t<false, X, Y> { using type = Y; };

// The threads that run the block-level ops. In the warp-specialized schedule (warp_specialized.cuh) the block
// also holds a producer warpgroup that only issues TMA, so the generated source defines
// TILES_CUDA_CONSUMER_THREADS: the ops split their work over the consumer threads alone, and block barriers
// become a named barrier over them (the producer never reaches a block-level op). Where it also defines
// TILES_CUDA_GROUPS (option consumer_groups), the consumers are that many groups, each running the block-level
// ops of its own tiles: every op sees the threads, warps and barrier of its group as the block's.
#ifdef TILES_CUDA_CONSUMER_THREADS
#ifndef TILES_CUDA_GROUPS
#define TILES_CUDA_GROUPS 1
#endif
constexpr int GROUP_THREADS = TILES_CUDA_CONSUMER_THREADS / TILES_CUDA_GROUPS;
__device__ __forceinline__ int block_threads() { return GROUP_THREADS; }
// this thread's place among the threads that run the block-level ops (its group's), and its group
__device__ __forceinline__ unsigned block_thread() {   // unsigned, as threadIdx.x: its divisions are shifts
    return TILES_CUDA_GROUPS == 1 ? threadIdx.x : threadIdx.x % GROUP_THREADS;
}
__device__ __forceinline__ int consumer_group() { return TILES_CUDA_GROUPS == 1 ? 0 : threadIdx.x / GROUP_THREADS; }
// named barrier 1 over all consumers; with groups, 6 + group over its own (2-5: store_tma's and the turns')
__device__ __forceinline__ void barrier() {
    if (TILES_CUDA_GROUPS == 1)
        asm volatile("bar.sync 1, %0;\n" ::"n"(TILES_CUDA_CONSUMER_THREADS) : "memory");
    else
        asm volatile("bar.sync %0, %1;\n" ::"r"(6 + consumer_group()), "n"(GROUP_THREADS) : "memory");
}
#else
__device__ __forceinline__ int block_threads() { return blockDim.x; }
__device__ __forceinline__ unsigned block_thread() { return threadIdx.x; }
__device__ __forceinline__ int consumer_group() { return 0; }
__device__ __forceinline__ void barrier() { __syncthreads(); }
#endif

__device__ __forceinline__ int lane_id() { return threadIdx.x % WARP; }
__device__ __forceinline__ int warp_id() { return block_thread() / WARP; }   // unsigned division, as before groups
// The warpgroup (4 warps) of this thread, broadcast from lane 0 so that the compiler knows every lane holds the
// same value: what is derived from it (wgmma's shared-memory descriptors) can live in uniform registers.
__device__ __forceinline__ int warpgroup_id() { return __shfl_sync(0xffffffffu, warp_id() / 4, 0); }

// Every conversion goes through float: round to nearest even, saturating for
// fp8 (the constructors of the fp8 types use __NV_SATFINITE).
template <typename T> __device__ __forceinline__ float to_float(T x) { return float(x); }
template <> __device__ __forceinline__ float to_float<bf16>(bf16 x) { return __bfloat162float(x); }
template <> __device__ __forceinline__ float to_float<f16>(f16 x) { return __half2float(x); }
template <> __device__ __forceinline__ float to_float<int>(int x) { return float(x); }

template <typename T> __device__ __forceinline__ T from_float(float x) { return T(x); }
template <> __device__ __forceinline__ bf16 from_float<bf16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ f16 from_float<f16>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ int from_float<int>(float x) { return int(x); }

// Two neighbouring elements of one row: the unit a lane holds in every mma
// fragment (columns 2t and 2t+1). 16-bit pairs are one 32-bit register, the
// operand format of mma.sync.
template <typename T> struct alignas(2 * sizeof(T)) pair { T x, y; };

template <typename T> __device__ __forceinline__ pair<T> make_pair(float x, float y) {
    return pair<T>{from_float<T>(x), from_float<T>(y)};
}
template <> __device__ __forceinline__ pair<bf16> make_pair<bf16>(float x, float y) {
    __nv_bfloat162 p = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<pair<bf16>*>(&p);
}
template <> __device__ __forceinline__ pair<f16> make_pair<f16>(float x, float y) {
    __half2 p = __floats2half2_rn(x, y);
    return *reinterpret_cast<pair<f16>*>(&p);
}

// A pair's two values in f32. A bf16 pair is one 32-bit register whose halves are a float's upper bits: a shift and
// a mask. Read element by element, the compiler splits the register into its 16-bit halves, moves each to the low
// half and shifts it back (three instructions where two do), and keeps the split where the pair is rebuilt
// (add_rmsnorm at a decode step, sm_90a: 610 -> 529 instructions on the whole-row path). The asm volatile keeps the
// conversion where the program has it: as plain arithmetic, the compiler hoisted a loop-invariant tile's out of
// the loop, holding two floats for each word the program chose to keep (add_rmsnorm's staged W spilled).
template <typename T> __device__ __forceinline__ pair<float> to_floats(const pair<T>& v) {
    return {to_float(v.x), to_float(v.y)};
}
template <> __device__ __forceinline__ pair<float> to_floats<bf16>(const pair<bf16>& v) {
    const unsigned w = *reinterpret_cast<const unsigned*>(&v);
#if defined(TILES_EMU)
    const unsigned lo = w << 16, hi = w & 0xffff0000u;
#else
    unsigned lo, hi;
    asm volatile("{shl.b32 %0, %2, 16;\n and.b32 %1, %2, 0xffff0000;}" : "=r"(lo), "=r"(hi) : "r"(w));
#endif
    return {__int_as_float(int(lo)), __int_as_float(int(hi))};
}

// A pair in element type T: the pair itself where the types match. The round trip through float is exact for
// them but the compiler keeps it for 16-bit types (an unpack and a repack per pair: 80 of add_rmsnorm's 920
// instructions for its bf16 weights, sm_90a). Its elements are read one by one, not as to_floats' whole word:
// ptxas keeps a 16-bit tile read that way packed until its uses (rotary's cos and sin, loaded once before its
// loops: 80 registers on sm_90a, 128 through to_floats).
template <typename T, typename U> __device__ __forceinline__ pair<T> convert_pair(const pair<U>& v) {
    if constexpr (same<T, U>) return v;
    else return make_pair<T>(to_float(v.x), to_float(v.y));
}

template <typename T> __device__ __forceinline__ unsigned as_u32(const pair<T>& p) {
    static_assert(sizeof(pair<T>) == 4, "only 16-bit pairs are mma operands");
    return *reinterpret_cast<const unsigned*>(&p);
}

__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int imax(int a, int b) { return a > b ? a : b; }


// A block barrier that also publishes shared-memory writes to the async proxy (sm_90: wgmma and TMA read
// shared memory through it, so ordinary and cp.async writes need fence.proxy.async before the barrier).
// Only kernels that use the async proxy pay for the fence (MEMBAR + FENCE.VIEW.ASYNC in SASS): those with
// block-level wgmma (TILES_CUDA_WGMMA) or a TMA producer (TILES_CUDA_CONSUMER_THREADS).
__device__ __forceinline__ void sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && (defined(TILES_CUDA_WGMMA) || defined(TILES_CUDA_CONSUMER_THREADS))
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
    barrier();
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Programmatic dependent launch (sm_90; runtime.py launches sm_90a code so on Hopper): the grid may be scheduled
// while the one before it in the stream still runs. Every sm_90a kernel calls both, every thread, before its first
// global memory access (codegen.py); elsewhere they are no-ops, and no sm_80 source calls them.
// wait_prior_grids: griddepcontrol.wait returns once the grids this one depends on have completed and their memory
// operations are performed and visible to it (at once where the launch was not programmatic). Reads and writes
// both wait: a write must not overtake a read of the grid before. And no thread may skip it, not even one that
// would exit early: a grid whose blocks all exit without waiting could complete before the grid it depends on,
// and the grid after it, which waits for this one alone, would run ahead of that one.
__device__ __forceinline__ void wait_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
// launch_dependents: griddepcontrol.launch_dependents lets the next programmatic grid be scheduled once every block
// of this one has issued it (or exited), so that its launch and prologue run under this grid's last blocks. Safe
// however early: it promises nothing about this grid's memory; the dependent's wait_prior_grids still waits for
// this grid's completion and memory flush. Once every block has issued it, every block of this grid is resident,
// so the dependent's blocks take only room this grid no longer needs.
__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace tc

// The scalar helpers generated expressions call (tiles/cgen.py): operands are non-negative.
__device__ __forceinline__ int tiles_cdiv(int a, int b) { return (a + b - 1) / b; }
__device__ __forceinline__ int tiles_min(int a, int b) { return a < b ? a : b; }

__device__ __forceinline__ int tiles_max(int a, int b) { return a > b ? a : b; }

// A fact about the arguments that the launch checked on the host (the kernel's check_eq, an array's alignment):
// the compiler may drop the paths it rules out, such as the bounds and alignment tests of a whole-tile load. The
// CPU engine tests it instead, so that a fact that does not hold fails there rather than going unnoticed.
#if defined(TILES_EMU)
#define TC_ASSUME(cond) ((cond) ? void(0) : ::emu::fail("%s, checked before the launch, does not hold", #cond))
#else
#define TC_ASSUME(cond) ((cond) ? void(0) : __builtin_unreachable())
#endif

// tl.grid(group=g)'s order (tiles/cgen.py): the block at position `id` of the launch order takes row and column
// (axes 0 and 1) column by column within groups of `group` rows, the last group shorter where rows run out.
__device__ __forceinline__ int tiles_group_row(int id, int rows, int cols, int group) {
    const int first = id / (group * cols) * group, height = tiles_min(rows - first, group);
    return first + id % (group * cols) % height;
}
__device__ __forceinline__ int tiles_group_col(int id, int rows, int cols, int group) {
    const int first = id / (group * cols) * group, height = tiles_min(rows - first, group);
    return id % (group * cols) / height;
}
