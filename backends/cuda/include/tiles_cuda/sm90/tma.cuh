// tiles_cuda/sm90/tma.cuh -- the bulk tensor copy engine (TMA): tensor maps on the host, copies that
// complete on an mbarrier (loads) or in a bulk group (stores) on the device.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include "common.cuh"

namespace tiles::sm90 {

// ---- host: tensor maps ----

// A bf16 tensor map of rank 2..5 whose box is `box` elements per dim (innermost first) with the 128-byte
// swizzle the shared tiles of st.cuh use. `dims` innermost first, `strides` in bytes for dims 1..rank-1.
// Returns a CUDA error string on failure, nullptr on success.
inline const char* make_tensor_map_bf16(CUtensorMap* map, const void* base, int rank, const uint64_t* dims,
                                        const uint64_t* strides, const uint32_t* box) {
    using encode_fn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
    // The driver entry point, looked up through the runtime, so that nothing links against libcuda.
    static encode_fn encode = nullptr;
    if (!encode) {
        cudaDriverEntryPointQueryResult status;
        void* fn = nullptr;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &status) !=
                cudaSuccess ||
            status != cudaDriverEntryPointSuccess)
            return "cuTensorMapEncodeTiled not found in the driver";
        encode = reinterpret_cast<encode_fn>(fn);
    }
    cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
    CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, const_cast<void*>(base), dims, strides, box,
                        elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? nullptr : "cuTensorMapEncodeTiled rejected the tensor map";
}

// ---- device: copies. Coordinates are in elements, innermost first; rows past the end read as zero. ----

__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, mbarrier& bar, int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
            smem_addr(dst)),
        "l"(map), "r"(smem_addr(&bar.word)), "r"(c0), "r"(c1)
        : "memory");
}
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, mbarrier& bar, int c0, int c1, int c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::
            "r"(smem_addr(dst)),
        "l"(map), "r"(smem_addr(&bar.word)), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
}

// The same box written at this shared-memory offset in every CTA of `cta_mask` (bit i = cluster rank i), each
// CTA's mbarrier at `bar`'s offset receiving the bytes that landed in it.
__device__ __forceinline__ void tma_load_multicast(void* dst, const CUtensorMap* map, mbarrier& bar, uint16_t cta_mask,
                                                   int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%4, %5}], [%2], %3;\n" ::"r"(smem_addr(dst)),
        "l"(map), "r"(smem_addr(&bar.word)), "h"(cta_mask), "r"(c0), "r"(c1)
        : "memory");
}

// Stores write only the part of the box inside the tensor.
__device__ __forceinline__ void tma_store(const CUtensorMap* map, const void* src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(map),
                 "r"(smem_addr(src)), "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void tma_store(const CUtensorMap* map, const void* src, int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(map),
                 "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Wait until the committed stores have finished reading shared memory (the tile may then be overwritten).
__device__ __forceinline__ void tma_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
__device__ __forceinline__ void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

}  // namespace tiles::sm90
