// tiles_cuda/mma_block.cuh: the block-level mma ops, on warpgroup wgmma (sm_90a: m64nNk16 bf16, m64nNk32 e4m3)
// or mma.sync.
//
// Taken when the codegen asks for it (TILES_CUDA_WGMMA) and the operands allow: every warp holds 16 rows, so
// warpgroup g (warps 4g..4g+3) owns rows [64g, 64g+64) of d, exactly one wgmma m64 accumulator, and rt's
// pair order within a 16-column base tile is wgmma's register order for two 8-column groups, so d's registers
// are passed as they are. bf16: A comes from a 128- or 64-byte-swizzled shared tile (rows of a multiple of 64
// or of 32 elements: attention at head dims 32 and 96), K-major (A) or MN-major (At), or from bf16 registers (the
// m64k16 A fragment is mma.sync's, per warp); B from such a shared tile, K-major (Bt) or MN-major (B). e4m3: both
// from 128-byte-swizzled shared tiles, K-major (ABt; fp8 wgmma reads no other layout). Everything else (f16,
// other fp8 pairs, transposed A in registers, narrow tiles) stays on mma.sync.
#pragma once
#include "mma.cuh"
#if defined(TILES_CUDA_WGMMA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "sm90/wgmma_ops.cuh"  // the generated wgmma.mma_async wrappers, m64nNk16 bf16, N in 16..256
#define TC_HAS_WGMMA 1
#else
#define TC_HAS_WGMMA 0
#endif

namespace tc {

// How a block-level mma ends: `wait` (the default) returns with d written; `no_wait` returns once wgmma has
// been issued and committed as a group, leaving it in flight. Then the caller waits (mma_wait<N>) before any
// other access to d or a rewrite of the operands' shared memory, and fences d (mma_fence) before reading it.
// mma.sync has no such state: on that path both modes are the same.
struct wait_t {};
struct no_wait_t {};
__device__ constexpr no_wait_t no_wait{};
// The c of d = a' @ b' + c when it is zero: wgmma then ignores d's old contents instead of d being zeroed.
struct zeros_t {};
__device__ constexpr zeros_t zeros{};

// 16: a decode step's few rows as the N of a swapped GEMM (kernels/gemm.py's swap), the weights as its 64 rows
template <int N>
constexpr bool wgmma_n = N == 16 || N == 32 || N == 64 || N == 96 || N == 128 || N == 176 || N == 192 || N == 256;

// The swizzle modes a wgmma descriptor describes here: 128 bytes, and 64 for bf16 (fp8 keeps 128).
template <bool FP8>
__host__ __device__ constexpr bool wgmma_swizzle(int bytes) { return bytes == 128 || (!FP8 && bytes == 64); }

// The operands wgmma can take here, decided at compile time.
template <bool A_T, bool B_T, int M, int N, int NW, typename AOp, typename TB, int BR, int BC>
__host__ __device__ constexpr bool use_wgmma() {
    using acc = rt<float, M, N, NW>;
    using b_tile = st<TB, BR, BC>;
    constexpr bool fp8 = same<TB, fp8e4m3> && same<typename AOp::dtype, fp8e4m3> && B_T && !is_rt_t<AOp>::value;
    if constexpr (!TC_HAS_WGMMA || !(fp8 || (same<TB, bf16> && same<typename AOp::dtype, bf16>))) return false;
    else if constexpr (A_T && (fp8 || is_rt_t<AOp>::value)) return false;   // a transposed A: bf16, from shared
    else if constexpr (NW % 4 != 0 || acc::warp_rows != 16 || !wgmma_n<N> ||
                       !wgmma_swizzle<fp8>(b_tile::swizzle_bytes)) return false;
    else if constexpr (is_rt_t<AOp>::value) return true;
    else return wgmma_swizzle<fp8>(AOp::swizzle_bytes);
}

#if TC_HAS_WGMMA
// Matrix descriptors (PTX ISA, "Matrix Descriptor Format") for st's swizzled panels of S = 128 or 64 bytes a
// row: 8-row groups 8 * S bytes apart (SBO); MN-major panels R * S bytes apart (LBO); the mode in bits 62-63
// (1: 128-byte, 2: 64-byte). A K step (32 bytes) moves the start 32 bytes, and so does an MN offset inside a
// panel (rt_cols' 32-column parts): the hardware swizzles the address it computes, so an offset inside a row
// reads what lies there.
template <int S>
__device__ __forceinline__ unsigned long long desc_bits(unsigned addr, unsigned lbo) {
    static_assert(S == 128 || S == 64, "wgmma descriptors here: 128- or 64-byte swizzle");
    auto f = [](unsigned x) { return (unsigned long long)((x & 0x3FFFF) >> 4); };
    return f(addr) | f(lbo) << 16 | f(8 * S) << 32 | (S == 128 ? 1ull : 2ull) << 62;
}
template <typename T, int R, int C>
__device__ __forceinline__ unsigned long long desc_kmajor(const st<T, R, C>& t, int mn0, int k0) {
    constexpr int S = st<T, R, C>::swizzle_bytes, panel = S / int(sizeof(T));   // a row's elements in one panel
    return desc_bits<S>(smem_addr(t.data) + (k0 / panel) * R * S + mn0 * S + (k0 % panel) * int(sizeof(T)), 16);
}
template <typename T, int R, int C>
__device__ __forceinline__ unsigned long long desc_mnmajor(const st<T, R, C>& t, int k0, int mn0) {
    constexpr int S = st<T, R, C>::swizzle_bytes, panel = S / int(sizeof(T));
    return desc_bits<S>(smem_addr(t.data) + (mn0 / panel) * R * S + (mn0 % panel) * int(sizeof(T)) + k0 * S, R * S);
}

// The bytes a k offset k0 moves an operand's start: across panels and inside one (K-major), or down the rows
// (MN-major). Multiples of 16.
template <bool K_MAJOR, typename T, int R, int C>
__host__ __device__ constexpr unsigned k_bytes(int k0) {
    constexpr int S = st<T, R, C>::swizzle_bytes, panel = S / int(sizeof(T));
    return K_MAJOR ? (k0 / panel) * R * S + (k0 % panel) * int(sizeof(T)) : k0 * S;
}
// Descriptor d moved by `bytes`: only the start address field (bits 0-13, address / 16) changes, and the sum
// stays inside it (shared addresses are below 2^18), so a k step costs one 32-bit add on the low word and the
// high word (stride, swizzle mode) is built once per operand instead of once per wgmma.
__device__ __forceinline__ unsigned long long desc_add(unsigned long long d, unsigned bytes) {
    unsigned long long moved;   // packed by mov.b64: NVVM would otherwise make it a 64-bit add and OR the high word
    asm("mov.b64 %0, {%1, %2};" : "=l"(moved) : "r"(unsigned(d) + (bytes >> 4)), "r"(unsigned(d >> 32)));
    return moved;
}

// wgmma wrote d behind the compiler's back: no read of it may move above the wait that made it valid.
template <int M, int N, int NW>
__device__ __forceinline__ void fence_registers(rt<float, M, N, NW>& d) {
    float* acc = &d.d[0][0][0].x;
#pragma unroll
    for (int i = 0; i < N / 2; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}

// d += a' @ b' (ACCUMULATE) or d = a' @ b' for this warpgroup's 64 rows; issues every k step as one group,
// then (WAIT) waits for it.
template <bool A_T, bool B_T, bool WAIT, bool ACCUMULATE, int M, int N, int NW, typename AOp, typename TB, int BR,
          int BC>
__device__ inline void wgmma_block(rt<float, M, N, NW>& d, const AOp& a, const st<TB, BR, BC>& b) {
    constexpr int K = B_T ? BC : BR, KS = 32 / int(sizeof(TB));   // the k of one wgmma: 32 bytes of a row
    float* acc = &d.d[0][0][0].x;  // 16-column base tiles in order: wgmma's accumulator registers
    const unsigned long long bd0 = B_T ? desc_kmajor(b, 0, 0) : desc_mnmajor(b, 0, 0);
    unsigned long long ad0 = 0;
    if constexpr (!is_rt_t<AOp>::value) {
        // this warpgroup's rows of a', from the lane-0 broadcast so that ptxas can keep the descriptor uniform
        // (12-02, against warp_id() / 4: attention forward's block 469 -> 439 instructions at D 128 under NVRTC,
        // the backward's causal step 627 -> 599, no spills; 12-01's build had spilled 12 bytes with it)
        const int m0 = warpgroup_id() * 64;
        ad0 = A_T ? desc_mnmajor(a, 0, m0) : desc_kmajor(a, m0, 0);
    }
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k = 0; k < K / KS; ++k) {
        const unsigned long long bd = desc_add(bd0, k_bytes<B_T, TB, BR, BC>(KS * k));
        if constexpr (is_rt_t<AOp>::value) {
            unsigned af[4];
            a_frag_rt(af, a, 0, k);
            tiles::sm90::detail::wgmma_op<N>::template rs<B_T ? 0 : 1>(acc, af, bd, ACCUMULATE || k > 0);
        } else {
            const unsigned long long ad =
                desc_add(ad0, k_bytes<!A_T, typename AOp::dtype, AOp::rows, AOp::cols>(KS * k));
            if constexpr (same<TB, fp8e4m3>)
                tiles::sm90::detail::wgmma_op_e4m3<N>::ss(acc, ad, bd, ACCUMULATE || k > 0);
            else
                tiles::sm90::detail::wgmma_op<N>::template ss<B_T ? 0 : 1, A_T ? 1 : 0>(acc, ad, bd,
                                                                                     ACCUMULATE || k > 0);
        }
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    if constexpr (WAIT) {
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        fence_registers(d);
    }
}
#endif

// Wait until at most PENDING of this warpgroup's no_wait groups are still in flight (they finish in order).
template <int PENDING>
__device__ __forceinline__ void mma_wait() {
#if TC_HAS_WGMMA
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
#endif
}
// After the last mma_wait: d may be read again.
template <int M, int N, int NW>
__device__ __forceinline__ void mma_fence(rt<float, M, N, NW>& d) {
#if TC_HAS_WGMMA
    fence_registers(d);
#endif
}

// d = a' @ b' + c (c: a register tile or zeros): wgmma where use_wgmma allows, else mma.sync.
template <bool A_T, bool B_T, typename Mode, int M, int N, int NW, typename AOp, typename TB, int BR, int BC,
          typename C>
__device__ inline void mma(rt<float, M, N, NW>& d, const AOp& a, const st<TB, BR, BC>& b, const C& c) {
    constexpr bool fresh = same<C, zeros_t>;
#if TC_HAS_WGMMA
    if constexpr (use_wgmma<A_T, B_T, M, N, NW, AOp, TB, BR, BC>()) {
        if constexpr (!fresh) if (&d != &c) d = c;
        wgmma_block<A_T, B_T, same<Mode, wait_t>, !fresh>(d, a, b);
        return;
    }
#endif
    if constexpr (fresh) zero(d);
    else if (&d != &c) d = c;
    mma_sync<A_T, B_T>(d, a, b);
}

template <int M, int N, int NW, typename AOp, typename TB, int BR, int BC, typename C, typename Mode = wait_t>
__device__ inline void mma_AB(rt<float, M, N, NW>& d, const AOp& a, const st<TB, BR, BC>& b,
                              const C& c, Mode = {}) { mma<false, false, Mode>(d, a, b, c); }
template <int M, int N, int NW, typename AOp, typename TB, int BR, int BC, typename C, typename Mode = wait_t>
__device__ inline void mma_ABt(rt<float, M, N, NW>& d, const AOp& a, const st<TB, BR, BC>& b,
                               const C& c, Mode = {}) { mma<false, true, Mode>(d, a, b, c); }
template <int M, int N, int NW, typename AOp, typename TB, int BR, int BC, typename C, typename Mode = wait_t>
__device__ inline void mma_AtB(rt<float, M, N, NW>& d, const AOp& a, const st<TB, BR, BC>& b,
                               const C& c, Mode = {}) { mma<true, false, Mode>(d, a, b, c); }
template <int M, int N, int NW, typename AOp, typename TB, int BR, int BC, typename C, typename Mode = wait_t>
__device__ inline void mma_AtBt(rt<float, M, N, NW>& d, const AOp& a, const st<TB, BR, BC>& b,
                                const C& c, Mode = {}) { mma<true, true, Mode>(d, a, b, c); }

// ---- rt_cols: a 64-row f32 tile whose columns are split over the warpgroups (types.cuh) --------------------
// Each warpgroup computes its columns of d = a' @ b' + c on wgmma m64 with both operands in shared memory: all of
// a' (its 64 rows), the warpgroup's columns of b'. A transposed a is read MN-major.
template <bool A_T, bool B_T, typename Mode, int M, int N, int NW, typename TA, int AR, int AC, typename TB, int BR,
          int BC, typename C>
__device__ inline void mma(rt_cols<float, M, N, NW>& d, const st<TA, AR, AC>& a, const st<TB, BR, BC>& b,
                           const C& c) {
    using D = rt_cols<float, M, N, NW>;
    constexpr int PC = D::part_cols, K = A_T ? AR : AC;
    static_assert(same<TA, bf16> && same<TB, bf16> && (PC == 32 || wgmma_n<PC>) && (A_T ? AC : AR) == 64 &&
                      (B_T ? BC : BR) == K && st<TA, AR, AC>::swizzle_bytes == 128 &&
                      st<TB, BR, BC>::swizzle_bytes == 128,
                  "rt_cols: bf16 operands in 128-byte swizzled shared tiles");
#if TC_HAS_WGMMA
    constexpr bool fresh = same<C, zeros_t>;
    if constexpr (!fresh) if (&d != &c) d = c;
    const int n0 = warpgroup_id() * PC;
    float* acc = &d.part.d[0][0][0].x;
    const unsigned long long ad0 = A_T ? desc_mnmajor(a, 0, 0) : desc_kmajor(a, 0, 0);
    const unsigned long long bd0 = B_T ? desc_kmajor(b, n0, 0) : desc_mnmajor(b, 0, n0);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k = 0; k < K / 16; ++k) {
        const unsigned long long ad = desc_add(ad0, k_bytes<!A_T, TA, AR, AC>(16 * k));
        const unsigned long long bd = desc_add(bd0, k_bytes<B_T, TB, BR, BC>(16 * k));
        tiles::sm90::detail::wgmma_op<PC>::template ss<B_T ? 0 : 1, A_T ? 1 : 0>(acc, ad, bd, !fresh || k > 0);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    if constexpr (same<Mode, wait_t>) {
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        fence_registers(d.part);
    }
#else
    static_assert(M < 0, "rt_cols needs wgmma (sm_90a, TILES_CUDA_WGMMA)");
#endif
}

#define TC_RT_COLS_MMA(NAME, A_T, B_T)                                                                         \
    template <int M, int N, int NW, typename TA, int AR, int AC, typename TB, int BR, int BC, typename C,      \
              typename Mode = wait_t>                                                                          \
    __device__ inline void NAME(rt_cols<float, M, N, NW>& d, const st<TA, AR, AC>& a, const st<TB, BR, BC>& b, \
                                const C& c, Mode = {}) {                                                       \
        mma<A_T, B_T, Mode>(d, a, b, c);                                                                       \
    }
TC_RT_COLS_MMA(mma_AB, false, false)
TC_RT_COLS_MMA(mma_ABt, false, true)
TC_RT_COLS_MMA(mma_AtB, true, false)
TC_RT_COLS_MMA(mma_AtBt, true, true)
#undef TC_RT_COLS_MMA

template <typename T, int R, int C, int NW>
__device__ inline void zero(rt_cols<T, R, C, NW>& d) { zero(d.part); }
template <int R, int C, int NW>
__device__ __forceinline__ void mma_fence(rt_cols<float, R, C, NW>& d) { mma_fence(d.part); }

// f32 accumulation of an rt_cols into global memory: each thread adds its pairs of adjacent columns with one
// vector reduction. A whole tile inside the global takes one test and then constant offsets from the thread's
// first pair (atomic_add of an rt, memory.cuh); edge tiles skip the elements past the global's end.
template <int R, int C, int NW>
__device__ inline void atomic_add(const gl<float>& dst, const rt_cols<float, R, C, NW>& src, coord idx) {
    using D = rt_cols<float, R, C, NW>;
    if (whole_tile<float, R, C>(dst, idx)) {
        float* g = dst.row_ptr(idx.b, idx.d, idx.r * R + D::row_of(0)) + idx.c * C + D::col_of(0, 0);
        const long long row8 = 8 * dst.strides[2];
#pragma unroll
        for (int j = 0; j < D::part_t::width; ++j)
#pragma unroll
            for (int p = 0; p < 4; ++p)
                red_add2(g + (p & 1) * row8 + j * 16 + 8 * (p >> 1), src.part.d[0][j][p].x, src.part.d[0][j][p].y);
        return;
    }
    if (idx.b >= dst.batch() || idx.d >= dst.depth()) return;
#pragma unroll
    for (int j = 0; j < D::part_t::width; ++j)
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const int r = idx.r * R + D::row_of(p), c = idx.c * C + D::col_of(j, p);
            if (r >= dst.rows()) continue;
            float* g = dst.row_ptr(idx.b, idx.d, r) + c;
            const pair<float> v = src.part.d[0][j][p];
            if (c + 1 < dst.cols() && reinterpret_cast<unsigned long long>(g) % 8 == 0) {
                red_add2(g, v.x, v.y);
            } else {
                if (c < dst.cols()) atomicAdd(g, v.x);
                if (c + 1 < dst.cols()) atomicAdd(g + 1, v.y);
            }
        }
}

}  // namespace tc
