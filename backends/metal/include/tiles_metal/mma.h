// tiles_metal/mma.h - d = a' @ b' + c on the simdgroup matrix units. d and c are the simdgroup's f32 rows; a is
// either the simdgroup's register rows or a threadgroup tile (of which the simdgroup reads its rows), b is a
// threadgroup tile read whole. Transposes are done by simdgroup_load's transpose flag, so no layout swap is needed.
// Inputs of half or bfloat multiply into the f32 accumulator directly (simdgroup_multiply_accumulate takes mixed
// element types), so products are exact and only the accumulation rounds, as the IR's numerics say.
#pragma once
#include "types.h"

namespace tiles_metal {

// One 8x8 block of a threadgroup tile: rows r.., cols c.. of the stored matrix, or of its transpose.
template <typename T, int SR, int SC>
inline void load_block(thread simdgroup_matrix<T, BASE, BASE>& m, const thread st<T, SR, SC>& s, int r, int c,
                       bool transpose) {
    if (transpose)
        simdgroup_load(m, s.at(c, r), SC, ulong2(0, 0), true);
    else
        simdgroup_load(m, s.at(r, c), SC);
}

// d = a @ b' + c, with a the simdgroup's register rows (R x K); b is K x N (trans_b: N x K).
template <bool TransB, typename T, int R, int K, int N, int SR, int SC>
inline void mma_regs(thread rt<float, R, N>& d, const thread rt<T, R, K>& a, const thread st<T, SR, SC>& b,
                const thread rt<float, R, N>& c) {
    static_assert((TransB ? SR : SC) == N && (TransB ? SC : SR) == K, "mma: b does not match a and d");
    if (&d != &c) d = c;
    for (int k = 0; k < K / BASE; ++k) {
        for (int j = 0; j < N / BASE; ++j) {
            simdgroup_matrix<T, BASE, BASE> bm;
            load_block(bm, b, k * BASE, j * BASE, TransB);
            for (int i = 0; i < R / BASE; ++i) {
                simdgroup_matrix<T, BASE, BASE> am = a.m[i][k];
                simdgroup_multiply_accumulate(d.m[i][j], am, bm, d.m[i][j]);
            }
        }
    }
}

// d = a' @ b' + c, with a a threadgroup tile of which this simdgroup takes rows row0 .. row0+R of a' (M x K).
template <bool TransA, bool TransB, typename T, int R, int N, int AR, int AC, int SR, int SC>
inline void mma_shared(thread rt<float, R, N>& d, const thread st<T, AR, AC>& a, int row0, const thread st<T, SR, SC>& b,
                const thread rt<float, R, N>& c) {
    constexpr int K = TransA ? AR : AC;
    static_assert((TransB ? SR : SC) == N && (TransB ? SC : SR) == K, "mma: b does not match a and d");
    if (&d != &c) d = c;
    for (int k = 0; k < K / BASE; ++k) {
        simdgroup_matrix<T, BASE, BASE> am[R / BASE];
        for (int i = 0; i < R / BASE; ++i) load_block(am[i], a, row0 + i * BASE, k * BASE, TransA);
        for (int j = 0; j < N / BASE; ++j) {
            simdgroup_matrix<T, BASE, BASE> bm;
            load_block(bm, b, k * BASE, j * BASE, TransB);
            for (int i = 0; i < R / BASE; ++i) simdgroup_multiply_accumulate(d.m[i][j], am[i], bm, d.m[i][j]);
        }
    }
}

// ThunderKittens' names. a from registers:
template <typename T, int R, int K, int N, int SR, int SC>
inline void mma_AB(thread rt<float, R, N>& d, const thread rt<T, R, K>& a, const thread st<T, SR, SC>& b,
                   const thread rt<float, R, N>& c) { mma_regs<false>(d, a, b, c); }
template <typename T, int R, int K, int N, int SR, int SC>
inline void mma_ABt(thread rt<float, R, N>& d, const thread rt<T, R, K>& a, const thread st<T, SR, SC>& b,
                    const thread rt<float, R, N>& c) { mma_regs<true>(d, a, b, c); }

// a from threadgroup memory, this simdgroup's rows starting at row0 (of a, or of a transposed):
template <typename T, int R, int N, int AR, int AC, int SR, int SC>
inline void mma_AB(thread rt<float, R, N>& d, const thread st<T, AR, AC>& a, int row0, const thread st<T, SR, SC>& b,
                   const thread rt<float, R, N>& c) { mma_shared<false, false>(d, a, row0, b, c); }
template <typename T, int R, int N, int AR, int AC, int SR, int SC>
inline void mma_ABt(thread rt<float, R, N>& d, const thread st<T, AR, AC>& a, int row0, const thread st<T, SR, SC>& b,
                    const thread rt<float, R, N>& c) { mma_shared<false, true>(d, a, row0, b, c); }
template <typename T, int R, int N, int AR, int AC, int SR, int SC>
inline void mma_AtB(thread rt<float, R, N>& d, const thread st<T, AR, AC>& a, int row0, const thread st<T, SR, SC>& b,
                    const thread rt<float, R, N>& c) { mma_shared<true, false>(d, a, row0, b, c); }
template <typename T, int R, int N, int AR, int AC, int SR, int SC>
inline void mma_AtBt(thread rt<float, R, N>& d, const thread st<T, AR, AC>& a, int row0, const thread st<T, SR, SC>& b,
                     const thread rt<float, R, N>& c) { mma_shared<true, true>(d, a, row0, b, c); }

}  // namespace tiles_metal
