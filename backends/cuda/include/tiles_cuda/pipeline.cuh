// tiles_cuda/pipeline.cuh: dynamic shared memory and the pipelined loop (sm_80: cp.async).
#pragma once
#include "memory.cuh"

namespace tc {

// Carves shared tiles out of the kernel's dynamic shared memory. Each tile
// starts on a 1024-byte boundary of the shared address space, which the
// 128-byte swizzle (and TMA/wgmma, which read it) assume; the launch reserves
// 1024 bytes beyond the tiles so the first one can be aligned.
struct smem_allocator {
    unsigned char* next;
    __device__ explicit smem_allocator(unsigned char* base) : next(base) {}
    template <typename S> __device__ S* alloc(int count = 1) {
        const unsigned pad = (1024 - smem_addr(next) % 1024) % 1024;
        S* s = reinterpret_cast<S*>(next + pad);
        next += pad + count * sizeof(S);
        return s;
    }
};

// The software pipeline: load(k, slot) issues the global->shared copies of
// iteration k into stage `slot` (load_async only), compute(k, slot) consumes
// them. STAGES-1 iterations are in flight while one is computed: before
// compute(k) the copies of k are waited for (cp.async groups complete in
// order) and a barrier publishes them; the same barrier tells every warp that
// compute(k-1) is done, so its stage can be refilled with iteration k+STAGES-1.
// One stage (stages=1) runs ahead of nothing: each iteration's copies are issued once every warp is done with
// the last one's, and waited for before its compute.
template <int STAGES, typename Load, typename Compute>
__device__ inline void pipeline(int n, Load load, Compute compute) {
    static_assert(STAGES >= 1, "a pipeline needs at least one stage");
    if constexpr (STAGES == 1) {
        for (int k = 0; k < n; ++k) {
            if (k > 0) sync();  // compute(k-1) is done in every warp: its stage may be refilled
            load(k, 0);
            cp_async_commit();
            cp_async_wait<0>();
            sync();
            compute(k, 0);
        }
        sync();  // the stage may be reused after the loop
        return;
    } else {
#pragma unroll
        for (int k = 0; k < STAGES - 1; ++k) {
            if (k < n) load(k, k);
            cp_async_commit();  // empty groups keep the count uniform
        }
        for (int k = 0; k < n; ++k) {
            cp_async_wait<STAGES - 2>();
            sync();
            const int next = k + STAGES - 1;
            if (next < n) load(next, next % STAGES);
            cp_async_commit();
            compute(k, k % STAGES);
        }
        cp_async_wait<0>();
        sync();  // the stages may be reused after the loop
    }
}

}  // namespace tc
