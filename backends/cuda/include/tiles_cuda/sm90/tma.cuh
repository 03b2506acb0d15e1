// tiles_cuda/sm90/tma.cuh -- the bulk tensor copy engine (TMA): copies that complete on an mbarrier (loads)
// or in a bulk group (stores). Device code only (NVRTC-safe); tensor maps are made on the host (tensor_map.h).
#pragma once
#include "common.cuh"

namespace tiles::sm90 {

// The 128-byte tensor map TMA reads (CUtensorMap's layout), passed to kernels as a __grid_constant__ parameter.
// Built on the host by make_tensor_map_bf16 (tensor_map.h) or the driver's cuTensorMapEncodeTiled.
struct alignas(128) tensor_map {
    u64 opaque[16];
};

// ---- device: copies. Coordinates are in elements, innermost first; rows past the end read as zero. ----

__device__ __forceinline__ void tma_load(void* dst, const tensor_map* map, mbarrier& bar, int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
            smem_addr(dst)),
        "l"(map), "r"(smem_addr(&bar.word)), "r"(c0), "r"(c1)
        : "memory");
}
__device__ __forceinline__ void tma_load(void* dst, const tensor_map* map, mbarrier& bar, int c0, int c1, int c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::
            "r"(smem_addr(dst)),
        "l"(map), "r"(smem_addr(&bar.word)), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
}

// 4-D: the generated kernels' globals are (batch, depth, rows, cols), coordinates innermost first.
__device__ __forceinline__ void tma_load(void* dst, const tensor_map* map, mbarrier& bar, int c0, int c1, int c2,
                                         int c3) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::
            "r"(smem_addr(dst)),
        "l"(map), "r"(smem_addr(&bar.word)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
        : "memory");
}

// The same box written at this shared-memory offset in every CTA of `cta_mask` (bit i = cluster rank i), each
// CTA's mbarrier at `bar`'s offset receiving the bytes that landed in it.
__device__ __forceinline__ void tma_load_multicast(void* dst, const tensor_map* map, mbarrier& bar, u16 cta_mask,
                                                   int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%4, %5}], [%2], %3;\n" ::"r"(smem_addr(dst)),
        "l"(map), "r"(smem_addr(&bar.word)), "h"(cta_mask), "r"(c0), "r"(c1)
        : "memory");
}

// 4-D, as the generated kernels' globals are.
__device__ __forceinline__ void tma_load_multicast(void* dst, const tensor_map* map, mbarrier& bar, u16 cta_mask,
                                                   int c0, int c1, int c2, int c3) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%4, %5, %6, %7}], [%2], %3;\n" ::"r"(smem_addr(dst)),
        "l"(map), "r"(smem_addr(&bar.word)), "h"(cta_mask), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
        : "memory");
}

// Stores write only the part of the box inside the tensor.
__device__ __forceinline__ void tma_store(const tensor_map* map, const void* src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(map),
                 "r"(smem_addr(src)), "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void tma_store(const tensor_map* map, const void* src, int c0, int c1, int c2, int c3) {
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(map),
                 "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}
// The box added element-wise into the global (the map's dtype: f32 here), atomically per element, like a
// store otherwise: only the part inside the tensor is written, completion in the bulk group.
__device__ __forceinline__ void tma_reduce_add(const tensor_map* map, const void* src, int c0, int c1, int c2,
                                               int c3) {
    asm volatile("cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group"
                 " [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(map), "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Wait until all but the last PENDING committed groups of stores (and reduce-adds) of this thread have finished
// reading shared memory (their tiles may then be overwritten).
template <int PENDING = 0>
__device__ __forceinline__ void tma_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(PENDING) : "memory");
}

__device__ __forceinline__ void tma_prefetch_map(const tensor_map* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

}  // namespace tiles::sm90
