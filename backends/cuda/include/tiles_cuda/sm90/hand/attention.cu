// Host side of attention.cuh: tensor maps, launch configuration, and the C entry point the benchmark calls.
#include "tiles_cuda/sm90/tensor_map.h"
#include "tiles_cuda/sm90/hand/attention.cuh"

using namespace tiles::sm90;
using namespace tiles::sm90::hand_attn;

namespace {

template <int D, bool CAUSAL>
const char* launch(const void* q, const void* k, const void* v, void* o, void* lse, int b, int hq, int hkv, int n,
                   cudaStream_t stream) {
    constexpr int BKV = CAUSAL ? TILES_ATTN_BKV_CAUSAL : D == 64 ? TILES_ATTN_BKV_D64 : TILES_ATTN_BKV_D128;
    tensor_map maps[3];
    const void* bases[3] = {q, k, v};
    const int heads[3] = {hq, hkv, hkv};
    for (int i = 0; i < 3; ++i) {
        const cuuint64_t dims[3] = {cuuint64_t(D), cuuint64_t(n), cuuint64_t(b) * heads[i]};
        const cuuint64_t strides[2] = {cuuint64_t(D) * 2, cuuint64_t(D) * 2 * n};
        const cuuint32_t box[3] = {64, cuuint32_t(i == 0 ? BQ : BKV), 1};
        if (const char* e = make_tensor_map_bf16(&maps[i], bases[i], 3, dims, strides, box)) return e;
    }
    auto kernel = attn_fwd_kernel<D, BKV, CAUSAL>;
    const int smem = sizeof(attn_smem<D, BKV>) + 1024;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess)
        return "cudaFuncSetAttribute(max dynamic shared memory) failed";
    attn_args args{static_cast<bf16*>(o), static_cast<float*>(lse), n, hq, hkv,
                   LOG2E / sqrtf(static_cast<float>(D))};
    dim3 grid((n + BQ - 1) / BQ, b * hq);
    kernel<<<grid, THREADS, smem, stream>>>(maps[0], maps[1], maps[2], args);
    cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace

// Attention forward; see the top of this file for shapes. Returns nullptr on success or a message.
extern "C" const char* tiles_sm90_attn_fwd(const void* q, const void* k, const void* v, void* o, void* lse, int b,
                                           int hq, int hkv, int n, int d, int causal, cudaStream_t stream) {
    if (b <= 0 || hq <= 0 || hkv <= 0 || n <= 0) return "attention: B, Hq, Hkv, N must be positive";
    if (hq % hkv) return "attention: Hq must be a multiple of Hkv (GQA)";
    if (b * hq > 65535) return "attention: B * Hq must be at most 65535 (grid y)";
    if ((reinterpret_cast<u64>(q) | reinterpret_cast<u64>(k) | reinterpret_cast<u64>(v) |
         reinterpret_cast<u64>(o)) % 16)
        return "attention: Q, K, V, O must be 16-byte aligned";
    if (d == 64) return causal ? launch<64, true>(q, k, v, o, lse, b, hq, hkv, n, stream)
                               : launch<64, false>(q, k, v, o, lse, b, hq, hkv, n, stream);
    if (d == 128) return causal ? launch<128, true>(q, k, v, o, lse, b, hq, hkv, n, stream)
                                : launch<128, false>(q, k, v, o, lse, b, hq, hkv, n, stream);
    return "attention: head dim must be 64 or 128";
}
