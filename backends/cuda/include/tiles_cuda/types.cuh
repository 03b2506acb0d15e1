// tiles_cuda/types.cuh: the tile types. gl (global), st (shared), rt (register), rv (register vector).
//
// Block-level tiles: an rt<T, R, C, NW> belongs to a block of NW warps; warp w
// holds rows [w*R/NW, (w+1)*R/NW). Each warp's slice is a grid of 16x16 base
// tiles in the mma.sync m16n8k16 fragment layout.
#pragma once
#include "base.cuh"

namespace tc {

// A tile's position, in units of the tile over the global's (batch, depth, rows, cols).
struct coord { int b, d, r, c; };

// 4-D global layout: runtime dims and strides (in elements); the last dim is contiguous.
template <typename T> struct gl {
    T* ptr;
    int dims[4];
    long long strides[3];

    __device__ int batch() const { return dims[0]; }
    __device__ int depth() const { return dims[1]; }
    __device__ int rows() const { return dims[2]; }
    __device__ int cols() const { return dims[3]; }
    // Row r of matrix (b, d): where a tile's rows start.
    __device__ T* row_ptr(int b, int d, int r) const {
        return ptr + b * strides[0] + d * strides[1] + r * strides[2];
    }
    // B-byte vector accesses (B a multiple of the element size) need the base and every stride to keep B-byte
    // alignment; 16-byte ones are the copies between global and shared memory.
    template <int B> __device__ bool aligned() const {
        constexpr long long V = B / sizeof(T);
        return (reinterpret_cast<unsigned long long>(ptr) % B == 0) && strides[0] % V == 0 &&
               strides[1] % V == 0 && strides[2] % V == 0;
    }
    __device__ bool vec_aligned() const { return aligned<16>(); }
};

// A gl crosses the kernel launch as eight plain parameters (pointer, four dims,
// three strides) that any launcher can pack, and is rebuilt inside the kernel:
//   __global__ void k(TC_GL_PARAMS(bf16, A)) { const tc::gl<bf16> A = TC_GL(A); ... }
#define TC_GL_PARAMS(T, name)                                                                 \
    T *__restrict__ name##_ptr, int name##_d0, int name##_d1, int name##_d2, int name##_d3,  \
        long long name##_s0, long long name##_s1, long long name##_s2
#define TC_GL(name) {name##_ptr, {name##_d0, name##_d1, name##_d2, name##_d3}, {name##_s0, name##_s1, name##_s2}}

// Shared tile, R x C. Rows wider than the swizzle span are stored as column
// panels of swizzle_bytes each (panel-major), and the 16-byte chunks of a row
// are XOR-swizzled with the row index inside each 8-row group: the
// 32/64/128-byte modes TMA and wgmma understand, and ldmatrix reads 8 rows of
// a chunk column without bank conflicts.
template <typename T, int R, int C> struct st {
    using dtype = T;
    static constexpr int rows = R, cols = C;
    static constexpr int row_bytes = C * int(sizeof(T));
    static constexpr int swizzle_bytes =
        row_bytes % 128 == 0 ? 128 : row_bytes % 64 == 0 ? 64 : row_bytes % 32 == 0 ? 32 : 0;
    static constexpr int panel_cols = swizzle_bytes ? swizzle_bytes / int(sizeof(T)) : C;
    static constexpr int bytes = R * C * int(sizeof(T));
    static_assert(R % 16 == 0 && C % 16 == 0, "shared tiles are made of 16x16 base tiles");

    alignas(1024) T data[R * C];

    // Byte offset of element (r, c) from the tile's start.
    __device__ static __forceinline__ unsigned offset(int r, int c) {
        unsigned b = ((c / panel_cols) * (R * panel_cols) + r * panel_cols + c % panel_cols) * sizeof(T);
        if (swizzle_bytes) b ^= ((b >> 7) & (swizzle_bytes / 16 - 1)) << 4;
        return b;
    }
    __device__ __forceinline__ T& at(int r, int c) {
        return *reinterpret_cast<T*>(reinterpret_cast<char*>(data) + offset(r, c));
    }
    __device__ __forceinline__ const T& at(int r, int c) const {
        return *reinterpret_cast<const T*>(reinterpret_cast<const char*>(data) + offset(r, c));
    }
};

// Shared vector of N elements.
template <typename T, int N> struct sv {
    using dtype = T;
    static constexpr int length = N;
    alignas(16) T data[N];
};

// Register tile of the block. Base tile (i, j) of the warp's slice holds, in
// lane 4g+t, four pairs: p=0 (row g, cols 2t,2t+1), p=1 (row g+8, same cols),
// p=2 (row g, cols 2t+8,2t+9), p=3 (row g+8, those cols): for 16-bit types the
// A operand of mma.sync m16n8k16, for f32 two of its accumulators side by side.
template <typename T, int R, int C, int NW> struct rt {
    using dtype = T;
    static constexpr int rows = R, cols = C, warps = NW;
    static constexpr int warp_rows = R / NW;
    static constexpr int height = warp_rows / 16, width = C / 16;  // base tiles per warp
    static_assert(R % (16 * NW) == 0, "register tile rows must be a multiple of 16 per warp");
    static_assert(C % 16 == 0, "register tile cols must be a multiple of 16");

    pair<T> d[height][width][4];

    // The block row and column of pair p's first element, in base tile (i, j).
    __device__ static __forceinline__ int row_of(int i, int p) {
        return warp_id() * warp_rows + i * 16 + lane_id() / 4 + 8 * (p & 1);
    }
    __device__ static __forceinline__ int col_of(int j, int p) {
        return j * 16 + 2 * (lane_id() % 4) + 8 * (p >> 1);
    }
    // f(i, j, p) for every pair the lane holds: base tile (i, j), pair p. Unrolled, so that d[i][j][p] stays
    // in registers (a runtime index would put the tile in local memory).
    template <typename F>
    __device__ static __forceinline__ void each(F&& f) {
#pragma unroll
        for (int i = 0; i < height; ++i)
#pragma unroll
            for (int j = 0; j < width; ++j)
#pragma unroll
                for (int p = 0; p < 4; ++p) f(i, j, p);
    }
};

// A register tile of the block with too few rows to give every warpgroup 64 of them (R = 64 rows, NW/4 > 1
// warpgroups): warpgroup g holds all R rows of columns [g C/G, (g+1) C/G) instead, as one wgmma m64
// accumulator in rt's layout (its warp w % 4 holds rows [16 (w % 4), 16 (w % 4) + 16)). The codegen gives this
// type to an f32 tile that only wgmma writes from shared operands and only atomic_add reads
// (schedules.col_split): attention backward's dQ partial, BM = 64 query rows against two warpgroups' kv rows.
template <typename T, int R, int C, int NW> struct rt_cols {
    using dtype = T;
    static constexpr int rows = R, cols = C, groups = NW / 4, part_cols = C / groups;
    static_assert(R == 64 && NW % 4 == 0 && C % (16 * groups) == 0, "64 rows, columns split over warpgroups");
    using part_t = rt<T, 64, part_cols, 4>;

    part_t part;   // this warpgroup's columns

    __device__ static __forceinline__ int group() { return warp_id() / 4; }
    __device__ static __forceinline__ int row_of(int p) { return (warp_id() % 4) * 16 + lane_id() / 4 + 8 * (p & 1); }
    __device__ static __forceinline__ int col_of(int j, int p) { return group() * part_cols + part_t::col_of(j, p); }
};

enum class axis { rows, cols };

// Register vector of the block, stored in the layout that meets a row-layout
// rt: axis::rows holds one value per tile row (split over the warps like the
// rows; lane 4g+t holds rows g and g+8 of each 16-row slice), axis::cols one
// value per tile column (every warp holds all; lane 4g+t holds cols 2t, 2t+1,
// 2t+8, 2t+9 of each 16-col slice). Values are replicated across the lanes
// that share them, so reductions leave every lane with the result.
template <typename T, int N, axis A, int NW> struct rv {
    using dtype = T;
    static constexpr int length = N, warps = NW;
    static constexpr axis ax = A;
    static constexpr int slice = A == axis::rows ? N / NW : N;  // elements one warp covers
    static constexpr int outer = slice / 16;
    static constexpr int inner = A == axis::rows ? 2 : 4;
    static_assert(slice % 16 == 0, "register vectors cover 16-element slices per warp");

    T d[outer][inner];

    // How far element (o, k) lies from the lane's first one (o = k = 0): the same for every lane.
    __host__ __device__ static constexpr int offset_of(int o, int k) {
        return A == axis::rows ? o * 16 + 8 * k : o * 16 + (k & 1) + 8 * (k >> 1);
    }
    // The vector index of element (o, k) held by this lane.
    __device__ static __forceinline__ int index_of(int o, int k) {
        if constexpr (A == axis::rows)
            return warp_id() * slice + lane_id() / 4 + offset_of(o, k);
        else
            return 2 * (lane_id() % 4) + offset_of(o, k);
    }
};

}  // namespace tc
