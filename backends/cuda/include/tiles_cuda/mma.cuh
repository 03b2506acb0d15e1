// tiles_cuda/mma.cuh: d = a' @ b' + c with warp-level mma.sync m16n8k16, f32 accumulation.
//
// Each warp computes its own rows of d: its slice of a (registers, or its rows
// of a shared tile) against all of b (shared). bf16 runs the bf16 instruction,
// f16 the f16 one. fp8 runs m16n8k32 on sm_89+ when both operands are K-major
// (a [M][K], b [N][K]: the fp8 GEMM's layout); otherwise (sm_80, other
// layouts) the fragments are gathered element by element and converted to f16,
// which holds every fp8 value exactly.
#pragma once
#include "memory.cuh"

namespace tc {

// The instruction is picked by the operand type: bf16, or f16 for everything else.
template <typename T>
__device__ __forceinline__ void mma16816(pair<float>& d0, pair<float>& d1, const unsigned (&a)[4],
                                         unsigned b0, unsigned b1) {
#if defined(TILES_EMU)
    cuda_emu::mma_m16n8k16<T>(d0.x, d0.y, d1.x, d1.y, a, b0, b1);
#else
    if constexpr (same<T, bf16>)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d0.x), "+f"(d0.y), "+f"(d1.x), "+f"(d1.y)
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d0.x), "+f"(d0.y), "+f"(d1.x), "+f"(d1.y)
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Operand element pairs in the instruction's input type.
template <typename T> using mma_in = typename cond_t<same<T, bf16>, bf16, f16>::type;

// Element (row, col) of the logical operand, stored transposed or not.
template <bool TRANS, typename T, int R, int C>
__device__ __forceinline__ float operand_at(const st<T, R, C>& s, int row, int col) {
    return TRANS ? to_float(s.at(col, row)) : to_float(s.at(row, col));
}

// A fragment of rows [m0, m0+16) x k [k0, k0+16). TRANS: stored as [K][M].
template <bool TRANS, typename T, int R, int C>
__device__ __forceinline__ void a_frag(unsigned (&f)[4], const st<T, R, C>& a, int m0, int k0) {
    const int l = lane_id();
    if constexpr (sizeof(T) == 2) {
        if constexpr (TRANS)  // matrix q = l/8 holds k half q>>1 and m half q&1
            ldmatrix_x4_trans(f, &a.at(k0 + (l / 16) * 8 + l % 8, m0 + ((l / 8) % 2) * 8));
        else
            ldmatrix_x4(f, &a.at(m0 + l % 16, k0 + (l / 16) * 8));
    } else {
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const int m = m0 + l / 4 + 8 * (p & 1), k = k0 + 2 * (l % 4) + 8 * (p >> 1);
            f[p] = as_u32(make_pair<mma_in<T>>(operand_at<TRANS>(a, m, k), operand_at<TRANS>(a, m, k + 1)));
        }
    }
}

// B fragments of k [k0, k0+16) x columns [n0, n0+16): {b0, b1} of the left n8
// tile, then of the right one. TRANS: stored as [N][K].
template <bool TRANS, typename T, int R, int C>
__device__ __forceinline__ void b_frag(unsigned (&f)[4], const st<T, R, C>& b, int k0, int n0) {
    const int l = lane_id();
    if constexpr (sizeof(T) == 2) {
        if constexpr (TRANS)  // matrix q = l/8 holds n half q>>1 and k half q&1
            ldmatrix_x4(f, &b.at(n0 + (l / 16) * 8 + l % 8, k0 + ((l / 8) % 2) * 8));
        else
            ldmatrix_x4_trans(f, &b.at(k0 + ((l / 8) % 2) * 8 + l % 8, n0 + (l / 16) * 8));
    } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int n = n0 + 8 * (q >> 1) + l / 4, k = k0 + 2 * (l % 4) + 8 * (q & 1);
            // B(k, n) is stored at (k, n), or at (n, k) when transposed.
            f[q] = as_u32(make_pair<mma_in<T>>(operand_at<!TRANS>(b, n, k), operand_at<!TRANS>(b, n, k + 1)));
        }
    }
}

// Register A: the 16-bit row-layout base tile already is the A fragment.
template <typename T, int R, int C, int NW>
__device__ __forceinline__ void a_frag_rt(unsigned (&f)[4], const rt<T, R, C, NW>& a, int i, int kk) {
    static_assert(sizeof(T) == 2, "a register-tile A operand must be bf16 or f16");
#pragma unroll
    for (int p = 0; p < 4; ++p) f[p] = as_u32(a.d[i][kk][p]);
}

template <typename A> struct is_rt_t { static constexpr bool value = false; };
template <typename T, int R, int C, int NW> struct is_rt_t<rt<T, R, C, NW>> { static constexpr bool value = true; };

// ---- native fp8: mma.sync m16n8k32 (sm_89+), for K-major operands (a [M][K], b [N][K]) --------------
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
constexpr bool has_fp8_mma = true;
#else
constexpr bool has_fp8_mma = false;
#endif
template <typename TA, typename TB>
__device__ __forceinline__ void mma16832(pair<float>& d0, pair<float>& d1, const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
#if defined(TILES_EMU)
    cuda_emu::not_sm80("mma.sync m16n8k32 (fp8)");
#else
#define TC_MMA_FP8(A, B)                                                                                   \
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." A "." B ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "  \
                 "{%8,%9}, {%0,%1,%2,%3};\n"                                                              \
                 : "+f"(d0.x), "+f"(d0.y), "+f"(d1.x), "+f"(d1.y)                                          \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
    if constexpr (same<TA, fp8e4m3> && same<TB, fp8e4m3>) TC_MMA_FP8("e4m3", "e4m3");
    else if constexpr (same<TA, fp8e4m3>) TC_MMA_FP8("e4m3", "e5m2");
    else if constexpr (same<TB, fp8e4m3>) TC_MMA_FP8("e5m2", "e4m3");
    else TC_MMA_FP8("e5m2", "e5m2");
#undef TC_MMA_FP8
#endif
}

// An 8-bit 16x32 fragment is a 16x16 fragment of byte pairs: the same ldmatrix addressing in 16-byte rows.
template <int M, int N, int NW, typename TA, int AR, int AC, typename TB, int BR, int BC>
__device__ inline void mma_fp8(rt<float, M, N, NW>& d, const st<TA, AR, AC>& a, const st<TB, BR, BC>& b) {
    using acc = rt<float, M, N, NW>;
    const int l = lane_id();
#pragma unroll
    for (int kk = 0; kk < AC / 32; ++kk) {
        unsigned af[acc::height][4];
#pragma unroll
        for (int i = 0; i < acc::height; ++i)
            ldmatrix_x4(af[i], &a.at(warp_id() * acc::warp_rows + i * 16 + l % 16, kk * 32 + (l / 16) * 16));
#pragma unroll
        for (int j = 0; j < acc::width; ++j) {
            unsigned bf[4];
            ldmatrix_x4(bf, &b.at(j * 16 + (l / 16) * 8 + l % 8, kk * 32 + ((l / 8) % 2) * 16));
#pragma unroll
            for (int i = 0; i < acc::height; ++i) {
                mma16832<TA, TB>(d.d[i][j][0], d.d[i][j][1], af[i], bf[0], bf[1]);
                mma16832<TA, TB>(d.d[i][j][2], d.d[i][j][3], af[i], bf[2], bf[3]);
            }
        }
    }
}

// d += a' @ b' on mma.sync. A_T: a is stored transposed ([K][M]); B_T: b is stored as [N][K].
template <bool A_T, bool B_T, int M, int N, int NW, typename AOp, typename TB, int BR, int BC>
__device__ inline void mma_sync(rt<float, M, N, NW>& d, const AOp& a, const st<TB, BR, BC>& b) {
    using acc = rt<float, M, N, NW>;
    constexpr int K = B_T ? BC : BR;
    static_assert((B_T ? BR : BC) == N, "mma: b's N does not match d");
    static_assert(!is_rt_t<AOp>::value || !A_T, "mma: a transposed A must come from shared memory");
    using TA = typename AOp::dtype;
    static_assert(same<mma_in<TA>, mma_in<TB>>, "mma: a and b must both be bf16 or both f16/fp8");
    if constexpr (has_fp8_mma && sizeof(TA) == 1 && sizeof(TB) == 1 && !A_T && B_T && !is_rt_t<AOp>::value &&
                  K % 32 == 0) {
        mma_fp8(d, a, b);
        return;
    }
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
        unsigned af[acc::height][4];
#pragma unroll
        for (int i = 0; i < acc::height; ++i) {
            if constexpr (is_rt_t<AOp>::value)
                a_frag_rt(af[i], a, i, kk);
            else
                a_frag<A_T>(af[i], a, warp_id() * acc::warp_rows + i * 16, kk * 16);
        }
#pragma unroll
        for (int j = 0; j < acc::width; ++j) {
            unsigned bf[4];
            b_frag<B_T>(bf, b, kk * 16, j * 16);
#pragma unroll
            for (int i = 0; i < acc::height; ++i) {
                mma16816<mma_in<TA>>(d.d[i][j][0], d.d[i][j][1], af[i], bf[0], bf[1]);
                mma16816<mma_in<TA>>(d.d[i][j][2], d.d[i][j][3], af[i], bf[2], bf[3]);
            }
        }
    }
}

// dst[idx] += a' @ b' (an f32 global that several blocks add into), the M x N product never whole in registers:
// each warp computes its part a slice of columns at a time and adds each slice as soon as it is done. The codegen
// takes it for a register tile that is only zeroed, written by one mma and added into a global
// (schedules.sliced_adds), on the mma.sync path: attention backward's dQ partial on sm_80, whose 64 floats a
// thread at D 128 on top of dK's and dV's 128 made ptxas spill. The product's 16-row tiles are dealt to the
// warps; where there are fewer than warps (BM = 32 query rows over 4 warps), its columns split too: warp w takes
// row tile w % (M / 16) and column group w / (M / 16). idx is in units of the M x N product, as atomic_add(gl, rt)
// takes it; the adds are checked element by element, as that one's are on sm_80.
template <bool A_T, bool B_T, int NW, typename AOp, typename TB, int BR, int BC>
__device__ inline void atomic_add_mma(const gl<float>& dst, const AOp& a, const st<TB, BR, BC>& b, coord idx) {
    constexpr int M = A_T ? AOp::cols : AOp::rows, N = B_T ? BR : BC, K = B_T ? BC : BR, TILES = M / 16;
    constexpr int HEIGHT = TILES >= NW ? TILES / NW : 1, GROUPS = TILES >= NW ? 1 : NW / TILES, GN = N / GROUPS;
    // A warp's part of up to 32 columns goes in one piece (16 floats a thread at 16 rows), a wider one 16 columns
    // at a time: at D 128 (64-column parts) 32-column slices still spilled, causal, and at D 64 16-column slices
    // did, f16 causal (4 bytes; ptxas 13.0, NVRTC and nvcc, attention backward's sm_80 configuration).
    constexpr int NS = GN <= 32 ? GN : 16;
    static_assert(!is_rt_t<AOp>::value && M % 16 == 0 && (TILES % NW == 0 || NW % TILES == 0) && GN % NS == 0 &&
                  NS % 16 == 0, "atomic_add_mma: a shared A, and 16-row tiles and NS-column slices for every warp");
    using TA = typename AOp::dtype;
    const int w = warp_id(), l = lane_id();
    const int m0 = TILES >= NW ? w * HEIGHT * 16 : (w % TILES) * 16, n0 = TILES >= NW ? 0 : (w / TILES) * GN;
    const bool in_matrix = idx.b < dst.batch() && idx.d < dst.depth();
#pragma unroll
    for (int h = 0; h < GN / NS; ++h) {
        pair<float> acc[HEIGHT][NS / 16][4] = {};
#pragma unroll
        for (int kk = 0; kk < K / 16; ++kk) {
            unsigned af[HEIGHT][4];
#pragma unroll
            for (int i = 0; i < HEIGHT; ++i) a_frag<A_T>(af[i], a, m0 + i * 16, kk * 16);
#pragma unroll
            for (int j = 0; j < NS / 16; ++j) {
                unsigned bf[4];
                b_frag<B_T>(bf, b, kk * 16, n0 + h * NS + j * 16);
#pragma unroll
                for (int i = 0; i < HEIGHT; ++i) {
                    mma16816<mma_in<TA>>(acc[i][j][0], acc[i][j][1], af[i], bf[0], bf[1]);
                    mma16816<mma_in<TA>>(acc[i][j][2], acc[i][j][3], af[i], bf[2], bf[3]);
                }
            }
        }
        // element (i, j, p) of the slice in rt's layout: rows g and g + 8, columns 2t, 2t + 1 and 2t + 8, 2t + 9
#pragma unroll
        for (int i = 0; i < HEIGHT; ++i)
#pragma unroll
            for (int j = 0; j < NS / 16; ++j)
#pragma unroll
                for (int p = 0; p < 4; ++p) {
                    const int r = idx.r * M + m0 + i * 16 + l / 4 + 8 * (p & 1);
                    const int c = idx.c * N + n0 + h * NS + j * 16 + 2 * (l % 4) + 8 * (p >> 1);
                    if (!in_matrix || r >= dst.rows()) continue;
                    float* g = dst.row_ptr(idx.b, idx.d, r);
                    if (c < dst.cols()) atomicAdd(g + c, acc[i][j][p].x);
                    if (c + 1 < dst.cols()) atomicAdd(g + c + 1, acc[i][j][p].y);
                }
    }
}

}  // namespace tc
