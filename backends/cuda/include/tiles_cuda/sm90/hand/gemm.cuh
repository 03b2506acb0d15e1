// Hand-instantiated sm_90a GEMM written only against the tiles_cuda/sm90 headers, the way generated code uses
// them: C[M, N] = A[M, K] @ B[K, N], bf16 in (row-major), f32 accumulation, bf16 or f32 out (row-major).
//
// Block tile 128 x BN x 64 over a persistent grid. Warpgroup 0 is the producer (one thread issues the TMA
// copies into a STAGES-deep ring); warpgroups 1 and 2 are consumers, each owning 64 rows of the block tile and
// issuing wgmma m64nBNk16 with A (K-major) and B (MN-major) from shared memory. CTAs run in clusters of
// CLUSTER along M that share each B tile by multicast. bf16 results leave through a swizzled staging tile and
// TMA stores (whole 128-byte lines, issued by one thread, overlapping the next tile's main loop); f32 results
// are stored from registers. The knobs below are compile-time (-D...); their defaults are what measured
// fastest on the H200 (sm90/NOTES.md).
#pragma once
#include "tiles_cuda/sm90/sm90.cuh"

namespace tiles::sm90::hand_gemm {

constexpr int BM = 128, BK = 64, CONSUMERS = 2, THREADS = 128 * (1 + CONSUMERS);
// Output tiles (of a cluster) are walked in column-major groups of GROUP_M rows, for L2 reuse of B.
#ifndef TILES_GEMM_GROUP_M
#define TILES_GEMM_GROUP_M 8
#endif
constexpr int GROUP_M = TILES_GEMM_GROUP_M;
// CTAs per cluster along M; multicast halves B's L2-to-SM traffic (48 -> 32 KB per CTA and stage).
#ifndef TILES_GEMM_CLUSTER
#define TILES_GEMM_CLUSTER 2
#endif
constexpr int DEFAULT_CLUSTER = TILES_GEMM_CLUSTER;
// 3 stages of 48 KB leave room for the two 32 KB staging tiles of the bf16 epilogue (4 would need 256 KB).
#ifndef TILES_GEMM_STAGES
#define TILES_GEMM_STAGES 3
#endif
constexpr int DEFAULT_STAGES = TILES_GEMM_STAGES;
#ifndef TILES_GEMM_TMA_STORE
#define TILES_GEMM_TMA_STORE 1
#endif
template <typename OutT>
constexpr bool TMA_EPILOGUE = sizeof(OutT) == 2 && TILES_GEMM_TMA_STORE;

template <int BN, int STAGES, bool EPI>
struct gemm_smem {
    st<bf16, BM, BK> a[STAGES];
    st<bf16, BK, BN> b[STAGES];
    st<bf16, 64, BN> c[EPI ? CONSUMERS : 0];  // one staging tile per consumer
    stage_ring<STAGES> ring;
};

struct tile_coord {
    int m, n;
};
__device__ __forceinline__ tile_coord tile_at(int t, int tiles_m, int tiles_n) {
    int per_group = GROUP_M * tiles_n;
    int first_m = (t / per_group) * GROUP_M;
    int group_rows = min(tiles_m - first_m, GROUP_M);
    int r = t % per_group;
    return {first_m + r % group_rows, r / group_rows};
}

template <typename OutT>
__device__ __forceinline__ void store_pair(OutT* p, float x, float y) {
    if constexpr (sizeof(OutT) == 2)
        *reinterpret_cast<bf16x2*>(p) = __floats2bfloat162_rn(x, y);
    else
        *reinterpret_cast<float2*>(p) = {x, y};
}

template <int BN, int STAGES, int CLUSTER, typename OutT>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_kernel(const __grid_constant__ tensor_map a_map, const __grid_constant__ tensor_map b_map,
                const __grid_constant__ tensor_map c_map, OutT* c, int M, int N, int K) {
    constexpr bool EPI = TMA_EPILOGUE<OutT>;
    extern __shared__ char smem_raw[];
    auto& sm =
        *reinterpret_cast<gemm_smem<BN, STAGES, EPI>*>((reinterpret_cast<u64>(smem_raw) + 1023) & ~1023);
    constexpr int B_PANELS = st<bf16, BK, BN>::PANELS / CLUSTER;  // B panels each CTA loads for the cluster
    // A cluster owns CLUSTER vertically adjacent output tiles that share their B columns.
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN, k_blocks = (K + BK - 1) / BK;
    const int ctiles_m = (tiles_m + CLUSTER - 1) / CLUSTER, ctiles = ctiles_m * tiles_n;
    const int rank = CLUSTER > 1 ? cluster_rank() : 0;
    const int cluster = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;

    if (threadIdx.x == 0) sm.ring.init(CONSUMERS * 4 * CLUSTER);
    if (CLUSTER > 1)
        cluster_sync();  // the peer's barriers are initialized before anyone multicasts into it
    else
        __syncthreads();

    if (warpgroup_id() == 0) {
        regs_release<40>();
        if (threadIdx.x == 0) {
            tma_prefetch_map(&a_map);
            tma_prefetch_map(&b_map);
            stage_cursor<STAGES> cur;
            for (int t = cluster; t < ctiles; t += clusters) {
                tile_coord tc = tile_at(t, ctiles_m, tiles_n);
                const int m = tc.m * CLUSTER + rank;
                for (int kb = 0; kb < k_blocks; ++kb, cur.advance()) {
                    mbarrier& full = produce(sm.ring, cur, sizeof(sm.a[0]) + sizeof(sm.b[0]));
                    load_async(sm.a[cur.slot], &a_map, full, m * BM, kb * BK);
                    if constexpr (CLUSTER == 1)
                        load_async(sm.b[cur.slot], &b_map, full, kb * BK, tc.n * BN);
                    else
                        load_async_multicast(sm.b[cur.slot], &b_map, full, (1 << CLUSTER) - 1, kb * BK, tc.n * BN,
                                             rank * B_PANELS, B_PANELS);
                }
            }
        }
        __syncwarp();
    } else {
        regs_acquire<232>();
        const int row0 = 64 * (warpgroup_id() - 1);  // this consumer's rows inside the block tile
        auto release_slot = [&](int slot) {
            if constexpr (CLUSTER == 1)
                release(sm.ring, slot);
            else
                release_cluster<CLUSTER>(sm.ring, slot);
        };
        stage_cursor<STAGES> cur;
        rt_acc<BN> acc;
        zero(acc);
        for (int t = cluster; t < ctiles; t += clusters) {
            tile_coord tc = tile_at(t, ctiles_m, tiles_n);
            const int m = tc.m * CLUSTER + rank;
            int prev = -1;
            for (int kb = 0; kb < k_blocks; ++kb, cur.advance()) {
                consume(sm.ring, cur);
                mma_AB(acc, sm.a[cur.slot], row0, sm.b[cur.slot], kb > 0);
                // Keep one group in flight: the previous block's wgmma is done, its slot may be refilled.
                mma_wait<1>();
                if (prev >= 0) release_slot(prev);
                prev = cur.slot;
            }
            mma_wait<0>();
            fence_operands(acc);
            release_slot(prev);

            const int r0 = m * BM + row0, c0 = tc.n * BN;
            if constexpr (EPI) {
                // The staging tile may still be read by this consumer's previous TMA store.
                const int cons = warpgroup_id() - 1, bar = 1 + cons;
                if (thread_in_warpgroup() == 0) tma_store_wait_read();
                named_sync(bar, WARPGROUP_THREADS);
                store(sm.c[cons], acc);
                fence_async_shared();
                named_sync(bar, WARPGROUP_THREADS);
                if (thread_in_warpgroup() == 0) {
                    store_async(&c_map, sm.c[cons], r0, c0);
                    tma_store_commit();
                }
            } else {
#pragma unroll
                for (int j = 0; j < BN / 8; ++j) {
                    int col = c0 + rt_acc<BN>::col(j);
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        int row = r0 + rt_acc<BN>::row(h);
                        if (row < M && col < N)
                            store_pair(c + size_t(row) * N + col, acc.d[4 * j + 2 * h], acc.d[4 * j + 2 * h + 1]);
                    }
                }
            }
        }
    }
    if (EPI && warpgroup_id() > 0 && thread_in_warpgroup() == 0) tma_store_wait_read();
    // No CTA may exit while its peer can still multicast into it or arrive on its barriers.
    if (CLUSTER > 1) cluster_sync();
}

}  // namespace tiles::sm90::hand_gemm
