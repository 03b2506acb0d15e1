// Host side of gemm.cuh: tensor maps, launch configuration, and the C entry point the benchmark calls.
#include "tiles_cuda/sm90/tensor_map.h"
#include "tiles_cuda/sm90/hand/gemm.cuh"

using namespace tiles::sm90;
using namespace tiles::sm90::hand_gemm;

namespace {

template <int BN, int STAGES, int CLUSTER, typename OutT>
const char* launch(const void* a, const void* b, void* c, int M, int N, int K, int sms, cudaStream_t stream) {
    tensor_map a_map, b_map, c_map = {};
    const cuuint64_t a_dims[2] = {cuuint64_t(K), cuuint64_t(M)}, a_strides[1] = {cuuint64_t(K) * 2};
    const cuuint64_t b_dims[2] = {cuuint64_t(N), cuuint64_t(K)}, b_strides[1] = {cuuint64_t(N) * 2};
    const cuuint32_t a_box[2] = {64, BM}, b_box[2] = {64, BK};
    if (const char* e = make_tensor_map_bf16(&a_map, a, 2, a_dims, a_strides, a_box)) return e;
    if (const char* e = make_tensor_map_bf16(&b_map, b, 2, b_dims, b_strides, b_box)) return e;
    if constexpr (TMA_EPILOGUE<OutT>) {
        const cuuint64_t c_dims[2] = {cuuint64_t(N), cuuint64_t(M)}, c_strides[1] = {cuuint64_t(N) * 2};
        const cuuint32_t c_box[2] = {64, 64};
        if (const char* e = make_tensor_map_bf16(&c_map, c, 2, c_dims, c_strides, c_box)) return e;
    }
    auto kernel = gemm_kernel<BN, STAGES, CLUSTER, OutT>;
    const int smem = sizeof(gemm_smem<BN, STAGES, TMA_EPILOGUE<OutT>>) + 1024;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess)
        return "cudaFuncSetAttribute(max dynamic shared memory) failed";

    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = CLUSTER;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    // Persistent grid: as many clusters as can be resident at once (a GPC may leave an SM unpaired).
    int resident = sms / CLUSTER;
    cfg.gridDim = dim3(resident * CLUSTER);
    if (CLUSTER > 1 && cudaOccupancyMaxActiveClusters(&resident, kernel, &cfg) != cudaSuccess)
        return "cudaOccupancyMaxActiveClusters failed";
    const int ctiles = ((M + BM * CLUSTER - 1) / (BM * CLUSTER)) * ((N + BN - 1) / BN);
    cfg.gridDim = dim3(min(ctiles, resident) * CLUSTER);
    cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, a_map, b_map, c_map, static_cast<OutT*>(c), M, N, K);
    if (err == cudaSuccess) err = cudaGetLastError();
    return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace

// C = A @ B. A: M x K, B: K x N, C: M x N, all row-major and contiguous; c_f32 selects f32 output (else bf16).
// Returns nullptr on success or a message. Needs K and N multiples of 8 (TMA: 16-byte row strides).
extern "C" const char* tiles_sm90_gemm(const void* a, const void* b, void* c, int M, int N, int K, int c_f32,
                                       int sms, cudaStream_t stream) {
    if (M <= 0 || N <= 0 || K <= 0) return "gemm: M, N, K must be positive";
    if (K % 8 || N % 8) return "gemm: K and N must be multiples of 8 (16-byte row strides for TMA)";
    if ((reinterpret_cast<u64>(a) | reinterpret_cast<u64>(b) | reinterpret_cast<u64>(c)) % 16)
        return "gemm: A, B and C must be 16-byte aligned";
    return c_f32 ? launch<256, DEFAULT_STAGES, DEFAULT_CLUSTER, float>(a, b, c, M, N, K, sms, stream)
                 : launch<256, DEFAULT_STAGES, DEFAULT_CLUSTER, bf16>(a, b, c, M, N, K, sms, stream);
}
