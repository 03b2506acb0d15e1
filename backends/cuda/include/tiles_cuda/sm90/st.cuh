// tiles_cuda/sm90/st.cuh -- shared tiles in the layout that both TMA (SWIZZLE_128B) and wgmma (swizzle mode 1)
// understand, and the wgmma matrix descriptors that point into them.
//
// Layout of st<T, R, C> (2-byte T): the columns are cut into panels of 64 (128 bytes); each panel is R rows of
// 128 bytes, stored one after the other. Inside a panel, the 16-byte chunk index of a row (address bits 4-6) is
// XORed with the row's index inside its 8-row, 1024-byte atom (bits 7-9). That is exactly what one TMA box of
// {64, R} writes, and what wgmma reads when the descriptor says "128-byte swizzle".
#pragma once
#include "tma.cuh"

namespace tiles::sm90 {

template <typename T, int R, int C>
struct alignas(1024) st {
    static_assert(sizeof(T) == 2, "the 128-byte swizzled shared tile holds 2-byte elements");
    static constexpr int rows = R, cols = C;
    static constexpr int PANEL_COLS = 64;
    static constexpr int PANELS = C / PANEL_COLS;
    static constexpr int PANEL_BYTES = R * 128;
    static constexpr int BYTES = R * C * 2;
    static_assert(C % PANEL_COLS == 0, "shared tile width must be a multiple of 64 elements");
    static_assert(R % 8 == 0 && R <= 256, "shared tile rows: a multiple of 8, at most 256 (one TMA box)");

    T data[R * C];

    // Byte offset of element (r, c) from the start of the tile.
    __device__ static __forceinline__ u32 offset(int r, int c) {
        u32 o = (c / PANEL_COLS) * PANEL_BYTES + r * 128 + (c % PANEL_COLS) * 2;
        return o ^ ((r % 8) << 4);
    }
    __device__ __forceinline__ u32 addr() const { return smem_addr(data); }
};

// One TMA load per panel fills the tile from a 2-D map whose box is {64, R}: tile (row0, col0) of the tensor.
template <typename ST>
__device__ __forceinline__ void load_async(ST& dst, const tensor_map* map, mbarrier& bar, int row0, int col0) {
#pragma unroll
    for (int p = 0; p < ST::PANELS; ++p)
        tma_load(reinterpret_cast<char*>(dst.data) + p * ST::PANEL_BYTES, map, bar, col0 + p * 64, row0);
}
// Panels [first, first + count) of the tile, multicast to the CTAs of `cta_mask`: with a cluster of n CTAs
// that need the same tile, each loads 1/n of it for all.
template <typename ST>
__device__ __forceinline__ void load_async_multicast(ST& dst, const tensor_map* map, mbarrier& bar, u16 cta_mask,
                                                     int row0, int col0, int first, int count) {
    for (int p = first; p < first + count; ++p)
        tma_load_multicast(reinterpret_cast<char*>(dst.data) + p * ST::PANEL_BYTES, map, bar, cta_mask,
                           col0 + p * 64, row0);
}
// Same from a 3-D map {cols, rows, depth} whose box is {64, R, 1}.
template <typename ST>
__device__ __forceinline__ void load_async(ST& dst, const tensor_map* map, mbarrier& bar, int depth, int row0,
                                           int col0) {
#pragma unroll
    for (int p = 0; p < ST::PANELS; ++p)
        tma_load(reinterpret_cast<char*>(dst.data) + p * ST::PANEL_BYTES, map, bar, col0 + p * 64, row0, depth);
}
template <typename ST>
__device__ __forceinline__ void store_async(const tensor_map* map, const ST& src, int row0, int col0) {
#pragma unroll
    for (int p = 0; p < ST::PANELS; ++p)
        tma_store(map, reinterpret_cast<const char*>(src.data) + p * ST::PANEL_BYTES, col0 + p * 64, row0);
}

// ---- wgmma matrix descriptors (PTX ISA "Matrix Descriptor Format") ----

__device__ __forceinline__ u64 desc_field(u32 bytes) { return (bytes & 0x3FFFF) >> 4; }

// Operand stored K-major: tile rows are the M (or N) dimension, tile columns the K dimension.
// Rows [mn0, mn0+64 or N) starting at column k0 (a multiple of 16). 8-row atoms are 1024 bytes apart (SBO);
// stepping K inside a panel moves the start 32 bytes per 16 elements and the hardware swizzles the rest.
template <typename ST>
__device__ __forceinline__ u64 desc_kmajor(const ST& t, int mn0, int k0) {
    u32 a = t.addr() + (k0 / 64) * ST::PANEL_BYTES + mn0 * 128 + (k0 % 64) * 2;
    return desc_field(a) | desc_field(16) << 16 | desc_field(1024) << 32 | 1ull << 62;
}
// Operand stored MN-major: tile rows are the K dimension, tile columns the M (or N) dimension (e.g. V in P@V,
// B of a row-major A@B). Columns [mn0, ...) from row k0. LBO = distance between 64-wide panels, SBO = between
// 8-row groups of K. Use with the wgmma transpose flag set.
template <typename ST>
__device__ __forceinline__ u64 desc_mnmajor(const ST& t, int k0, int mn0) {
    u32 a = t.addr() + (mn0 / 64) * ST::PANEL_BYTES + k0 * 128;
    return desc_field(a) | desc_field(ST::PANEL_BYTES) << 16 | desc_field(1024) << 32 | 1ull << 62;
}

}  // namespace tiles::sm90
