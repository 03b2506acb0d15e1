// metal_emu.h: what the Metal Shading Language gives a kernel, rebuilt on the CPU engine (simt.h), so that the
// exact MSL text the Metal backend generates compiles with the host g++ (with -DTILES_EMU) and runs with
// simdgroups of 32 lanes as real collectives.
//
// * Address spaces (device, threadgroup, constant, thread) and `kernel` vanish: everything is host memory.
//   Parameter attributes ([[buffer(0)]], [[thread_position_in_grid]], ...) stay in the source; g++ ignores them
//   (the warning is silenced below), and the entry the backend appends passes the builtins' values.
// * half is _Float16 and bfloat a 16-bit struct; conversions from float round to nearest even, as the GPU's do.
// * simdgroup_matrix<T, 8, 8> holds each lane's two elements at the positions of the apple atom's lane map
//   (tiles/targets.py, through the engine's generated atom tables): simdgroup_load/store move them per lane, and
//   simdgroup_multiply_accumulate is the engine's mma_atom collective. Apple does not document this map; the
//   tiles_metal headers never depend on it, so the CPU result does not either.
// * simdgroup_barrier is a wave barrier and threadgroup_barrier a block barrier of the engine: both really wait,
//   and lanes run in a seeded order between them; after a threadgroup barrier the simdgroups also drift apart
//   by a few seeded rounds. So a missing barrier of either kind shows up as wrong numbers.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "simt.h"
#include "atoms_gen.h"  // emu::atoms::apple::simdgroup_8x8_{f16,bf16,f32}: compile with atoms=("apple",)

#pragma GCC diagnostic ignored "-Wattributes"

#ifndef TILES_EMU
#define TILES_EMU 1  // the tiles_metal headers then take this shim instead of <metal_stdlib>
#endif

#define TILES_ATTR(a)
#define kernel
#define device
#define threadgroup
#define constant
#define thread

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef _Float16 half;

// bfloat: the upper half of an IEEE float. float -> bfloat rounds to nearest even and keeps NaN a NaN.
struct bfloat {
    uint16_t bits;
    bfloat() = default;
    bfloat(float f) {
        uint32_t u;
        std::memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u)
            bits = uint16_t((u >> 16) | 0x40u);
        else
            bits = uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
    bfloat(double d) : bfloat(float(d)) {}
    bfloat(int i) : bfloat(float(i)) {}
    bfloat(half h) : bfloat(float(h)) {}
    operator float() const {
        uint32_t u = uint32_t(bits) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
    bfloat operator-() const { return bfloat(-float(*this)); }
};

// vec<T, N> and the named vectors the generated code and headers use.
template <typename T, int N>
struct vec {
    T v[N];
    vec() = default;
    template <typename... A, typename = typename std::enable_if<sizeof...(A) == N && (N > 1)>::type>
    vec(A... a) : v{T(a)...} {}
    template <typename U>
    explicit vec(const vec<U, N>& o) {
        for (int i = 0; i < N; ++i) v[i] = T(float(o.v[i]));
    }
    T& operator[](int i) { return v[i]; }
    const T& operator[](int i) const { return v[i]; }
};

typedef vec<float, 2> float2;
typedef vec<float, 4> float4;
typedef vec<half, 2> half2;
typedef vec<half, 4> half4;

struct uint3 {
    uint x, y, z;
};

struct ulong2 {
    ulong x, y;
    ulong2(ulong a = 0, ulong b = 0) : x(a), y(b) {}
};

namespace metal {

using std::is_same;

// ---- math: computed in float (half and bfloat convert on the way in and out)
inline float exp(float x) { return std::exp(x); }
inline float exp2(float x) { return std::exp2(x); }
inline float log(float x) { return std::log(x); }
inline float log2(float x) { return std::log2(x); }
inline float fabs(float x) { return std::fabs(x); }
inline float sqrt(float x) { return std::sqrt(x); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline float tanh(float x) { return std::tanh(x); }
inline float sin(float x) { return std::sin(x); }
inline float cos(float x) { return std::cos(x); }
inline float pow(float x, float y) { return std::pow(x, y); }
inline float floor(float x) { return std::floor(x); }
inline float fmod(float x, float y) { return std::fmod(x, y); }
inline float copysign(float x, float y) { return std::copysign(x, y); }
inline float fmax(float a, float b) { return std::fmax(a, b); }
inline float fmin(float a, float b) { return std::fmin(a, b); }
inline uint mulhi(uint a, uint b) { return uint((uint64_t(a) * b) >> 32); }
template <typename T> inline T max(T a, T b) { return a < b ? b : a; }
template <typename T> inline T min(T a, T b) { return b < a ? b : a; }

// ---- synchronization
enum mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };

namespace detail {

// On a GPU the simdgroups of a threadgroup drift apart between barriers; the engine moves every wave one
// synchronization point per round, which would keep them in step and hide a missing threadgroup barrier. So after
// each threadgroup barrier every simdgroup idles 0..3 extra rounds, drawn from the launch seed, the block, the
// simdgroup and the barrier's number (the same for all lanes of a simdgroup, as a collective needs).
struct drift_counts {
    uint64_t block = ~uint64_t(0);
    unsigned arrived[32] = {};  // lanes of each simdgroup that reached a threadgroup barrier in this block
};

inline unsigned drift_rounds() {
    static drift_counts st;
    const emu::dim3 b = emu::block_idx(), g = emu::grid_dim(), n = emu::block_dim();
    const uint64_t block = (uint64_t(b.z) * g.y + b.y) * g.x + b.x;
    if (st.block != block) {  // the first lane of a new block to get here
        st = drift_counts();
        st.block = block;
    }
    const unsigned w = emu::wave_id(), threads = n.x * n.y * n.z;
    const unsigned rest = threads - w * emu::wave_size();
    const unsigned lanes = rest < emu::wave_size() ? rest : emu::wave_size();
    const unsigned nth = st.arrived[w]++ / lanes;  // every lane of the simdgroup counts before any passes
    // the launch's seed (simt.h has no public accessor for it yet), mixed with where we are (splitmix64)
    uint64_t h = emu::detail::runner().cfg.seed ^ (block << 20) ^ (uint64_t(w) << 8) ^ nth;
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    return unsigned((h ^ (h >> 31)) % 4);
}

}  // namespace detail

inline void threadgroup_barrier(mem_flags) {
    const unsigned rounds = detail::drift_rounds();
    emu::barrier();
    for (unsigned i = 0; i < rounds; ++i) emu::wave_barrier();
}
inline void simdgroup_barrier(mem_flags) { emu::wave_barrier(); }

// ---- simd-group functions: every lane of the simdgroup deposits its value, then reads the one it asks for
template <typename T> inline T simd_shuffle(T x, ushort lane) { return emu::wave_exchange(x)[lane]; }
template <typename T> inline T simd_broadcast(T x, ushort lane) { return emu::wave_exchange(x)[lane]; }
template <typename T> inline T simd_shuffle_xor(T x, ushort mask) {
    return emu::wave_exchange(x)[(emu::lane_id() ^ mask) % emu::wave_size()];
}
template <typename T> inline T simd_shuffle_down(T x, ushort delta) {
    const unsigned src = emu::lane_id() + delta;
    const T* all = emu::wave_exchange(x);
    return src < emu::wave_size() ? all[src] : x;
}
template <typename T> inline T simd_shuffle_up(T x, ushort delta) {
    const unsigned l = emu::lane_id();
    const T* all = emu::wave_exchange(x);
    return l >= delta ? all[l - delta] : x;
}
template <typename T, typename Op> inline T simd_reduce(T x, Op op) {
    const T* all = emu::wave_exchange(x);
    T r = all[0];
    for (unsigned i = 1; i < emu::wave_size(); ++i) r = op(r, all[i]);
    return r;
}
template <typename T> inline T simd_sum(T x) { return simd_reduce(x, [](T a, T b) { return T(a + b); }); }
template <typename T> inline T simd_max(T x) { return simd_reduce(x, [](T a, T b) { return max(a, b); }); }
template <typename T> inline T simd_min(T x) { return simd_reduce(x, [](T a, T b) { return min(a, b); }); }

// ---- atomics on device memory
struct atomic_float {
    float value;
};
enum memory_order { memory_order_relaxed };
inline float atomic_fetch_add_explicit(atomic_float* p, float v, memory_order) {
    return emu::atomic_add(&p->value, v);
}

// ---- simdgroup_matrix
template <typename T, int Cols, int Rows>
struct simdgroup_matrix {
    static_assert(Cols == 8 && Rows == 8, "Apple GPUs have 8x8 simdgroup matrices only");
    vec<T, 2> e;  // this lane's elements, at the positions of the apple atom's lane map
    vec<T, 2>& thread_elements() { return e; }
    const vec<T, 2>& thread_elements() const { return e; }
};

typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;

namespace detail {

// The apple 8x8 atom of the element type (same lane map for A, B and C; tiles/targets.py).
template <typename T> inline const emu::AtomTable& apple_atom();
template <> inline const emu::AtomTable& apple_atom<float>() { return emu::atoms::apple::simdgroup_8x8_f32; }
template <> inline const emu::AtomTable& apple_atom<half>() { return emu::atoms::apple::simdgroup_8x8_f16; }
template <> inline const emu::AtomTable& apple_atom<bfloat>() { return emu::atoms::apple::simdgroup_8x8_bf16; }

#ifdef TILES_METAL_EMU_OTHER_LANE_MAP
// Test hook: another lane map, as valid as the atom's (lane l holds what lane (5l+3)%32 holds there, registers
// swapped). Code that does not depend on the undocumented map gives the same results with it.
struct other_map {
    uint16_t a[32 * 2 * 2], b[32 * 2 * 2], c[32 * 2 * 2];
    emu::AtomTable table;
    explicit other_map(const emu::AtomTable& t) : table(t) {
        for (int l = 0; l < 32; ++l)
            for (int r = 0; r < 2; ++r)
                for (int x = 0; x < 2; ++x) {
                    const int from = (((5 * l + 3) % 32) * 2 + (1 - r)) * 2 + x, to = (l * 2 + r) * 2 + x;
                    a[to] = t.a[from];
                    b[to] = t.b[from];
                    c[to] = t.c[from];
                }
        table.a = a;
        table.b = b;
        table.c = c;
    }
};
template <typename T> inline const emu::AtomTable& atom() {
    static const other_map m(apple_atom<T>());
    return m.table;
}
#else
template <typename T> inline const emu::AtomTable& atom() { return apple_atom<T>(); }
#endif

// (row, col) of this lane's register r.
template <typename T>
inline void position(int r, ulong& row, ulong& col) {
    const emu::AtomTable& t = atom<T>();
    const unsigned l = emu::lane_id();
    row = t.c[(l * t.regs_c + r) * 2];
    col = t.c[(l * t.regs_c + r) * 2 + 1];
}

// Offset in the source of matrix element (row, col); origin is (column, row) in the source, as in MSL.
inline ulong offset(ulong row, ulong col, ulong epr, ulong2 origin, bool transpose) {
    return transpose ? (origin.y + col) * epr + origin.x + row : (origin.y + row) * epr + origin.x + col;
}

}  // namespace detail

template <typename T, int C, int R>
inline simdgroup_matrix<T, C, R> make_filled_simdgroup_matrix(T value) {
    simdgroup_matrix<T, C, R> m;
    m.e = vec<T, 2>(value, value);
    return m;
}

template <typename T, int C, int R>
inline void simdgroup_load(simdgroup_matrix<T, C, R>& d, const T* src, ulong elements_per_row = C,
                           ulong2 origin = ulong2(0, 0), bool transpose = false) {
    for (int r = 0; r < 2; ++r) {
        ulong row, col;
        detail::position<T>(r, row, col);
        d.e[r] = src[detail::offset(row, col, elements_per_row, origin, transpose)];
    }
}

template <typename T, int C, int R>
inline void simdgroup_store(const simdgroup_matrix<T, C, R>& m, T* dst, ulong elements_per_row = C,
                            ulong2 origin = ulong2(0, 0), bool transpose = false) {
    for (int r = 0; r < 2; ++r) {
        ulong row, col;
        detail::position<T>(r, row, col);
        dst[detail::offset(row, col, elements_per_row, origin, transpose)] = m.e[r];
    }
}

// d = a * b + c over the simdgroup; element types may differ (half/bfloat inputs, float accumulator), as in MSL.
template <typename TD, typename TA, typename TB, typename TC>
inline void simdgroup_multiply_accumulate(simdgroup_matrix<TD, 8, 8>& d, const simdgroup_matrix<TA, 8, 8>& a,
                                          const simdgroup_matrix<TB, 8, 8>& b, const simdgroup_matrix<TC, 8, 8>& c) {
    const float fa[2] = {float(a.e[0]), float(a.e[1])};
    const float fb[2] = {float(b.e[0]), float(b.e[1])};
    const float fc[2] = {float(c.e[0]), float(c.e[1])};
    float fd[2];
    emu::mma_atom(detail::atom<TA>(), fa, fb, fc, fd);
    d.e = vec<TD, 2>(fd[0], fd[1]);
}

template <typename TD, typename TA, typename TB>
inline void simdgroup_multiply(simdgroup_matrix<TD, 8, 8>& d, const simdgroup_matrix<TA, 8, 8>& a,
                               const simdgroup_matrix<TB, 8, 8>& b) {
    simdgroup_multiply_accumulate(d, a, b, make_filled_simdgroup_matrix<TD, 8, 8>(TD(0)));
}

}  // namespace metal

using namespace metal;

// The values of Metal's kernel-parameter builtins for the running lane, for the launch entry to pass
// (tiles.emu.runner Param(..., value="metal_emu::thread_index_in_simdgroup()")).
namespace metal_emu {
inline uint3 threadgroup_position_in_grid() {
    const emu::dim3 b = emu::block_idx();
    return uint3{b.x, b.y, b.z};
}
inline uint3 thread_position_in_threadgroup() {
    const emu::dim3 t = emu::thread_idx();
    return uint3{t.x, t.y, t.z};
}
inline uint3 thread_position_in_grid() {
    const emu::dim3 b = emu::block_idx(), n = emu::block_dim(), t = emu::thread_idx();
    return uint3{b.x * n.x + t.x, b.y * n.y + t.y, b.z * n.z + t.z};
}
inline uint thread_index_in_threadgroup() { return emu::thread_linear(); }
inline uint simdgroup_index_in_threadgroup() { return emu::wave_id(); }
inline uint thread_index_in_simdgroup() { return emu::lane_id(); }
inline uchar* threadgroup_arena() { return emu::shared_mem(); }  // the [[threadgroup(0)]] buffer
}  // namespace metal_emu
