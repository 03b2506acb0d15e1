// tiles_cuda/sm90/common.cuh -- the pieces every Hopper (sm_90a) kernel of this library needs:
// warpgroup identity, register reallocation, named barriers, mbarriers and proxy fences.
//
// Device code only, and NVRTC-safe: no standard headers (NVRTC has none), CUDA's bf16 header alone.
#pragma once
#include <cuda_bf16.h>

namespace tiles::sm90 {

using u16 = unsigned short;
using u32 = unsigned int;
using u64 = unsigned long long;

using bf16 = __nv_bfloat16;
using bf16x2 = __nv_bfloat162;

constexpr int WARPGROUP_THREADS = 128;

__device__ __forceinline__ int warpgroup_id() { return threadIdx.x / WARPGROUP_THREADS; }
__device__ __forceinline__ int thread_in_warpgroup() { return threadIdx.x % WARPGROUP_THREADS; }
__device__ __forceinline__ int warp_in_warpgroup() { return (threadIdx.x / 32) % 4; }
__device__ __forceinline__ int lane_id() { return threadIdx.x % 32; }

__device__ __forceinline__ u32 smem_addr(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

// Register reallocation between warpgroups. Each warpgroup's role must be one branch of a single if/else
// and the kernel must have a register cap at entry (__launch_bounds__(threads, 1)), or ptxas ignores it.
template <int N> __device__ __forceinline__ void regs_release() {
    static_assert(N % 8 == 0 && N >= 24 && N <= 256);
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> __device__ __forceinline__ void regs_acquire() {
    static_assert(N % 8 == 0 && N >= 24 && N <= 256);
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

// Named barrier over `threads` threads (a multiple of 32); id 0 is __syncthreads, so callers use 1..15.
__device__ __forceinline__ void named_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- mbarriers: the semaphores TMA completes on and consumers hand stages back with ----

struct mbarrier {
    u64 word;

    __device__ __forceinline__ void init(int arrivals) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(&word)), "r"(arrivals));
    }
    // One arrival that also announces `bytes` of TMA traffic the current phase must wait for.
    __device__ __forceinline__ void arrive_expect_tx(u32 bytes) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(&word)), "r"(bytes)
                     : "memory");
    }
    __device__ __forceinline__ void arrive() {
        asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(&word)) : "memory");
    }
    // Wait until the phase with this parity has completed. A fresh barrier counts its "previous" phase
    // (parity 1) as complete, which is what lets a producer fill every stage once before waiting.
    __device__ __forceinline__ void wait(u32 parity) {
        asm volatile(
            "{\n"
            ".reg .pred done;\n"
            "WAIT_%=:\n"
            "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
            "@!done bra WAIT_%=;\n"
            "}\n" ::"r"(smem_addr(&word)),
            "r"(parity)
            : "memory");
    }
};

// ---- clusters: CTAs that share data through multicast TMA and signal each other's mbarriers ----

__device__ __forceinline__ u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
// Every thread of every CTA in the cluster; orders shared-memory writes (barrier inits included) before it.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// One arrival on the mbarrier at the same shared-memory offset in CTA `rank` of this cluster (this CTA included).
// CTA-scope release: it only announces that this CTA's wgmma reads are done. (.release.cluster would put a
// GPU-wide MEMBAR before every arrival, which cost a third of the GEMM's speed.)
__device__ __forceinline__ void arrive_cluster(mbarrier& bar, u32 rank) {
    asm volatile(
        "{\n.reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_addr(&bar.word)),
        "r"(rank)
        : "memory");
}

// Make mbarrier.init visible to the async proxy (TMA) before any copy signals the barrier.
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Order this thread's generic-proxy shared-memory writes before later async-proxy accesses (TMA store, wgmma).
__device__ __forceinline__ void fence_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
    bf16x2 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<u32*>(&v);
}

// -infinity without math.h (NVRTC has none).
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

__device__ __forceinline__ float exp2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

}  // namespace tiles::sm90
