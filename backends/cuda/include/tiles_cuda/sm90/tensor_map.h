// tiles_cuda/sm90/tensor_map.h -- host side of TMA: encode the tensor maps the sm90 kernels take.
// Host code (nvcc, or any C++ compiler with the CUDA toolkit headers); device code includes tma.cuh only.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstring>
#include "tma.cuh"

namespace tiles::sm90 {

static_assert(sizeof(tensor_map) == sizeof(CUtensorMap) && alignof(tensor_map) == alignof(CUtensorMap));

// A bf16 tensor map of rank 2..5 whose box is `box` elements per dim (innermost first) with the 128-byte
// swizzle the shared tiles of st.cuh use. `dims` innermost first, `strides` in bytes for dims 1..rank-1.
// Returns a CUDA error string on failure, nullptr on success.
inline const char* make_tensor_map_bf16(tensor_map* map, const void* base, int rank, const cuuint64_t* dims,
                                        const cuuint64_t* strides, const cuuint32_t* box) {
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
    CUtensorMap m;
    CUresult r = encode(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, const_cast<void*>(base), dims, strides, box,
                        elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return "cuTensorMapEncodeTiled rejected the tensor map";
    std::memcpy(map, &m, sizeof(m));
    return nullptr;
}

}  // namespace tiles::sm90
