// tiles_hip/mma.hpp: block-level matrix multiply on the matrix cores.
//
// d = op(a) @ op(b) + c over this wave's rows (wave_id * R ..): for every K step, the wave reads its A
// fragments (from registers, or LDS) and, per column fragment, one B fragment from LDS, then issues one
// MFMA per (row fragment, column fragment). op(a) = a^T reads a stored K x M; op(b) = b^T reads b stored
// N x K. A and B fragments hold E = M*K/64 consecutive K elements per lane: one ds_read of E*sizeof(T)
// bytes where K is contiguous in LDS (a, and b^T), E single reads where it is not.
#pragma once
#include "global.hpp"

namespace tiles_hip {
// K of the MFMA this library uses for an M x M output and input type T on the target being compiled:
// CDNA4 doubles it for 16-bit inputs (16x16x32, 32x32x16); fp8 is 16x16x32 / 32x32x16 on both.
template <int M, class T> struct mfma_k {
#if defined(TILES_GFX950)
  static constexpr int K = 2 * (M == 16 ? 16 : 8);
#else
  static constexpr int K = (is_fp8<T>::value ? 2 : 1) * (M == 16 ? 16 : 8);
#endif
};
template <class X> struct is_rt { static constexpr bool value = false; };
template <class T, int R, int C, class L> struct is_rt<rt<T, R, C, L>> { static constexpr bool value = true; };

template <bool TA, bool TB, int M, int R, int N, class A, class T, int BR, int BC, class SW>
TILES_DEV void mma(rt<float, R, N, acc<M>>& d, const A& a, const st<T, BR, BC, SW>& b,
                   const rt<float, R, N, acc<M>>& c) {
  constexpr int KDIM = TB ? BC : BR;
  using D = rt<float, R, N, acc<M>>;
  if (&d != &c) d = c;
  constexpr int KS = mfma_k<M, T>::K, E = M * KS / 64;
  static_assert(KDIM % KS == 0, "K of an mma must be a multiple of the MFMA's K");
  const int lane = arch::lane_id(), r0 = arch::wave_id() * R;
  const int fr = lane % M, fk = E * (lane / M);  // this lane's row / column in a fragment, its K-run
  // K steps stay a loop when A comes from LDS: unrolled, the scheduler hoists every step's LDS reads
  // and runs out of registers next to a large accumulator. A register A needs static indices: unrolled.
#if !defined(TILES_EMU)
#pragma unroll(is_rt<A>::value ? KDIM / KS : 1)
#endif
  for (int kk = 0; kk < KDIM / KS; ++kk) {
    T af[D::FM][E];
    TILES_UNROLL for (int m = 0; m < D::FM; ++m) {
      if constexpr (is_rt<A>::value) {
        static_assert(sizeof(typename A::layout) && A::layout::FC == KS && A::layout::FR == M,
                      "register A operand is not in the MFMA's A layout");
        TILES_UNROLL for (int e = 0; e < E; ++e) af[m][e] = a.v[m][kk][e];
      } else if constexpr (TA) {
        TILES_UNROLL for (int e = 0; e < E; ++e) af[m][e] = a.at(kk * KS + fk + e, r0 + m * M + fr);
      } else {
        a.template read_run<E>(r0 + m * M + fr, kk * KS + fk, af[m]);
      }
    }
    TILES_UNROLL for (int n = 0; n < D::FN; ++n) {
      T bf[E];
      if constexpr (TB) b.template read_run<E>(n * M + fr, kk * KS + fk, bf);
      else TILES_UNROLL for (int e = 0; e < E; ++e) bf[e] = b.at(kk * KS + fk + e, n * M + fr);
      TILES_UNROLL for (int m = 0; m < D::FM; ++m) arch::mfma_op<M, KS, T>::run(af[m], bf, d.v[m][n]);
      // B read element by element (K down LDS columns) is E registers per fragment before packing; let
      // the scheduler hoist one fragment's reads, not every fragment's.
      if constexpr (!TB) arch::sched_barrier();
    }
  }
}
}  // namespace tiles_hip
