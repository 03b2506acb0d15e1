// tiles_cuda/sm90/wgmma.cuh -- warpgroup register tiles and the warpgroup matrix multiply (wgmma m64nNk16).
//
// Every call here is made by all 128 threads of one warpgroup; the tile is that warpgroup's 64 rows.
#pragma once
#include "st.cuh"
#include "wgmma_ops.cuh"

namespace tiles::sm90 {

// A warpgroup's 64 x N f32 accumulator in the wgmma D layout. Thread t (warp w = t/32, lane l) holds rows
// 16w + l/4 and that + 8, columns 8j + 2(l%4) + {0, 1} for j < N/8, as
// d[4j+0], d[4j+1] -> (row, col), (row, col+1);  d[4j+2], d[4j+3] -> (row+8, col), (row+8, col+1).
template <int N>
struct rt_acc {
    static constexpr int cols = N;
    float d[N / 2];
    // The two rows this thread holds (0 or 1), relative to the warpgroup's first row.
    __device__ static __forceinline__ int row(int half) {
        return 16 * warp_in_warpgroup() + lane_id() / 4 + 8 * half;
    }
    __device__ static __forceinline__ int col(int j) { return 8 * j + 2 * (lane_id() % 4); }
};

// A warpgroup's 64 x K bf16 A operand in registers: for each 16-wide K step, the m64k16 A fragment
// (4 x bf16x2). Its element placement equals rt_acc's, so an accumulator converts without data movement.
template <int K>
struct rt_a {
    u32 a[K / 16][4];
};

template <int N>
__device__ __forceinline__ void copy(rt_a<N>& dst, const rt_acc<N>& src) {
#pragma unroll
    for (int k = 0; k < N / 16; ++k) {
        const float* s = src.d + 8 * k;
        dst.a[k][0] = pack_bf16x2(s[0], s[1]);  // (row,   16k + 2q)
        dst.a[k][1] = pack_bf16x2(s[2], s[3]);  // (row+8, 16k + 2q)
        dst.a[k][2] = pack_bf16x2(s[4], s[5]);  // (row,   16k + 8 + 2q)
        dst.a[k][3] = pack_bf16x2(s[6], s[7]);  // (row+8, 16k + 8 + 2q)
    }
}

template <int N>
__device__ __forceinline__ void zero(rt_acc<N>& t) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) t.d[i] = 0.f;
}

// Store the warpgroup's 64 x N accumulator into rows [0, 64) of a shared tile, rounded to bf16. Each warp writes
// 8 rows x 16 bytes per instruction, which the 128-byte swizzle spreads over all 32 banks. Callers that hand the
// tile to TMA next need fence_async_shared() and a barrier.
template <int N, typename ST>
__device__ __forceinline__ void store(ST& dst, const rt_acc<N>& src) {
    static_assert(ST::cols == N && ST::rows >= 64);
    char* base = reinterpret_cast<char*>(dst.data);
#pragma unroll
    for (int j = 0; j < N / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            *reinterpret_cast<u32*>(base + ST::offset(rt_acc<N>::row(h), rt_acc<N>::col(j))) =
                pack_bf16x2(src.d[4 * j + 2 * h], src.d[4 * j + 2 * h + 1]);
}

// ---- issue / completion ----

// Order earlier register writes (accumulators, A fragments) before the next wgmma reads them.
__device__ __forceinline__ void mma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void mma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Wait until at most `PENDING` committed groups of this warpgroup are still running.
template <int PENDING>
__device__ __forceinline__ void mma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}
// Tell the compiler the accumulator may have changed here (wgmma writes it asynchronously), so that no read of
// it is moved above the mma_wait that makes it valid.
template <int N>
__device__ __forceinline__ void fence_operands(rt_acc<N>& t) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) asm volatile("" : "+f"(t.d[i])::"memory");
}

// d = A * B^T (+ d if accumulate): A = rows [a_row0, a_row0+64) of shared tile `a` (K-major, K = a.cols);
// B^T from shared tile `b` holding B as N rows of K (K-major), N = b.rows.
template <int N, typename STA, typename STB>
__device__ __forceinline__ void mma_ABt(rt_acc<N>& d, const STA& a, int a_row0, const STB& b, int accumulate) {
    static_assert(STB::rows == N && STA::cols == STB::cols);
    mma_fence();
#pragma unroll
    for (int k = 0; k < STA::cols / 16; ++k)
        detail::wgmma_op<N>::template ss<0>(d.d, desc_kmajor(a, a_row0, 16 * k), desc_kmajor(b, 0, 16 * k),
                                            accumulate || k > 0);
    mma_commit();
}

// d = A * B (+ d): A as above, B from shared tile `b` holding K rows of N (MN-major), N = b.cols.
template <int N, typename STA, typename STB>
__device__ __forceinline__ void mma_AB(rt_acc<N>& d, const STA& a, int a_row0, const STB& b, int accumulate) {
    static_assert(STB::cols == N && STA::cols == STB::rows);
    mma_fence();
#pragma unroll
    for (int k = 0; k < STA::cols / 16; ++k)
        detail::wgmma_op<N>::template ss<1>(d.d, desc_kmajor(a, a_row0, 16 * k), desc_mnmajor(b, 16 * k, 0),
                                            accumulate || k > 0);
    mma_commit();
}

// d = A * B (+ d): A from registers (64 x K), B from shared tile `b` holding K rows of N (MN-major).
template <int N, int K, typename STB>
__device__ __forceinline__ void mma_AB(rt_acc<N>& d, const rt_a<K>& a, const STB& b, int accumulate) {
    static_assert(STB::cols == N && STB::rows == K);
    mma_fence();
#pragma unroll
    for (int k = 0; k < K / 16; ++k)
        detail::wgmma_op<N>::template rs<1>(d.d, a.a[k], desc_mnmajor(b, 16 * k, 0), accumulate || k > 0);
    mma_commit();
}

}  // namespace tiles::sm90
