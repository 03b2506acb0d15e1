// tiles_hip/mma.hpp: block-level matrix multiply on the matrix cores.
//
// d = op(a) @ op(b) + c over this wave's rows (wave_id * R ..): for every K step, the wave reads its A
// fragments (from registers, or LDS) and, per column fragment, one B fragment from LDS, then issues one
// MFMA per (row fragment, column fragment). op(a) = a^T reads a stored K x M; op(b) = b^T reads b stored
// N x K. A and B fragments hold E = M*K/64 consecutive K elements per lane: one ds_read of E*sizeof(T)
// bytes where K is contiguous in LDS (a, and b^T), E single reads where it is not.
#pragma once
#include "global.hpp"
#include "regs.hpp"

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
template <int E, class T> TILES_DEV void clear_negative_zero(T* x) {
  TILES_UNROLL for (int e = 0; e < E; ++e) if (x[e].bits == 0x80) x[e].bits = 0;
}
template <class X> struct is_rt { static constexpr bool value = false; };
template <class T, int R, int C, class L> struct is_rt<rt<T, R, C, L>> { static constexpr bool value = true; };

// Where element e of a lane's A/B fragment sits along K: one run of E (E*(lane/M) + e), except CDNA4's
// 16x16x128 fp8, whose 32 elements are two runs of 16, 64 apart (tiles/targets.py, mfma_scale_16x16x128).
template <int M, int KS, int E> struct frag_k {
  static constexpr int RUN = KS == 128 ? 16 : E;
  TILES_DEV static constexpr int at(int lane, int e) {
    return KS == 128 ? 64 * (e / 16) + 16 * (lane / 16) + e % 16 : E * (lane / M) + e;
  }
};

// The K order of an MMA's fragments: a register operand's own (its layout's), else frag_k's.
template <class A, int M, int KS, int E> struct operand_k { using type = frag_k<M, KS, E>; };
template <class T, int R, int C, class L, int M, int KS, int E> struct operand_k<rt<T, R, C, L>, M, KS, E> {
  using type = typename L::order;
};

// Element (kk * KS + k, c) of an operand read down its LDS columns (K runs down the rows), k < KS. Where
// KS is a whole number of swizzle periods, the K step is a plain row offset: one address register per
// (k, c) serves every step (immediate offsets), instead of one per element the compiler would otherwise
// compute, and hoist out of the caller's loop, for each step (attention backward: hundreds of VGPRs).
template <int KS, class S> TILES_DEV typename S::dtype col_elem(const S& s, int kk, int k, int c) {
  if constexpr (KS % S::swz::PERIOD == 0) return s.at(kk * KS, k, c);
  else return s.at(kk * KS + k, c);
}

// KS_: the MFMA's K when not the default one for (M, T) (0), i.e. 128 for CDNA4's scaled fp8 MFMA.
template <bool TA, bool TB, int KS_ = 0, int M, int R, int N, class A, class T, int BR, int BC, class SW>
TILES_DEV void mma(rt<float, R, N, acc<M>>& d, const A& a, const st<T, BR, BC, SW>& b,
                   const rt<float, R, N, acc<M>>& c) {
  constexpr int KDIM = TB ? BC : BR;
  using D = rt<float, R, N, acc<M>>;
  if (&d != &c) d = c;
#if defined(TILES_GFX950)
  constexpr bool FNUZ = false;
#else
  // CDNA3's matrix cores read fp8 as the FNUZ formats: every OCP value as half itself, 0x80 (OCP -0) as
  // NaN. So products come out a quarter of the OCP ones: the accumulator runs scaled by 1/4 through the
  // K loop and -0 is cleared on the way in; both exact (powers of two).
  constexpr bool FNUZ = is_fp8<T>::value;
#endif
  if constexpr (FNUZ) mul(d, d, 0.25f);
  constexpr int KS = KS_ ? KS_ : mfma_k<M, T>::K, E = M * KS / 64;
  using FK = typename operand_k<A, M, KS, E>::type;
  static_assert(KS != 128 || !is_rt<A>::value, "the 16x16x128 MFMA takes A from LDS only");
  static_assert(KDIM % KS == 0, "K of an mma must be a multiple of the MFMA's K");
  const int lane = arch::lane_id(), r0 = arch::wave_id() * R;
  const int fr = lane % M;  // this lane's row (A) / column (B) in a fragment
  // K steps stay a loop when A comes from LDS: unrolled, the scheduler hoists every step's LDS reads
  // and runs out of registers next to a large accumulator. A register A needs static indices: unrolled.
  // B read down its columns in E <= 4 single reads per fragment (gfx942's 16-bit MFMAs) unrolls too: the
  // sched_barrier per fragment bounds the hoisting, and each step's addresses become immediate offsets
  // of the registers other MMAs over tiles of that shape already hold (gfx942 attention backward:
  // 255 VGPR + 0 AGPR instead of 256 + 51). With E = 8 (gfx950) the unrolled steps cost more registers
  // than they share (256 + 37 -> 256 + 75): a loop. Measured in the compile report, not timed.
  constexpr bool UNROLL = is_rt<A>::value || (!TB && E <= 4);
#if !defined(TILES_EMU)
#pragma unroll(UNROLL ? KDIM / KS : 1)
#endif
  for (int kk = 0; kk < KDIM / KS; ++kk) {
    T af[D::FM][E];
    TILES_UNROLL for (int m = 0; m < D::FM; ++m) {
      if constexpr (is_rt<A>::value) {
        static_assert(sizeof(typename A::layout) && A::layout::FC == KS && A::layout::FR == M,
                      "register A operand is not in the MFMA's A layout");
        TILES_UNROLL for (int e = 0; e < E; ++e) af[m][e] = a.v[m][kk][e];
      } else if constexpr (TA) {
        TILES_UNROLL for (int e = 0; e < E; ++e) af[m][e] = col_elem<KS>(a, kk, FK::at(lane, e), r0 + m * M + fr);
      } else {
        TILES_UNROLL for (int e = 0; e < E; e += FK::RUN)
          a.template read_run<FK::RUN>(r0 + m * M + fr, kk * KS + FK::at(lane, e), af[m] + e);
      }
    }
    if constexpr (FNUZ) TILES_UNROLL for (int m = 0; m < D::FM; ++m) clear_negative_zero<E>(af[m]);
    TILES_UNROLL for (int n = 0; n < D::FN; ++n) {
      T bf[E];
      if constexpr (TB) {
        TILES_UNROLL for (int e = 0; e < E; e += FK::RUN)
          b.template read_run<FK::RUN>(n * M + fr, kk * KS + FK::at(lane, e), bf + e);
      } else {
        TILES_UNROLL for (int e = 0; e < E; ++e) bf[e] = col_elem<KS>(b, kk, FK::at(lane, e), n * M + fr);
      }
      if constexpr (FNUZ) clear_negative_zero<E>(bf);
      TILES_UNROLL for (int m = 0; m < D::FM; ++m) arch::mfma_op<M, KS, T>::run(af[m], bf, d.v[m][n]);
      // B read element by element (K down LDS columns) is E registers per fragment before packing; let
      // the scheduler hoist one fragment's reads, not every fragment's.
      if constexpr (!TB) arch::sched_barrier();
    }
  }
  if constexpr (FNUZ) mul(d, d, 4.0f);
  // one mma's loads stay with its MFMAs: hoisting the next op's loads above them only adds registers
  arch::sched_barrier();
}

// An operand fragment from LDS: the E elements of K step kk (in FK's order) that this lane holds for row or
// column `idx` of the stored tile, along K where K is contiguous in LDS (runs, one ds_read each), else
// down the columns (one read per element).
template <bool K_CONTIGUOUS, int KS, int E, class FK, class S>
TILES_DEV void read_frag(const S& s, int idx, int kk, int lane, typename S::dtype* out) {
  if constexpr (K_CONTIGUOUS) {
    TILES_UNROLL for (int e = 0; e < E; e += FK::RUN) s.template read_run<FK::RUN>(idx, kk * KS + FK::at(lane, e), out + e);
  } else {
    TILES_UNROLL for (int e = 0; e < E; ++e) out[e] = col_elem<KS>(s, kk, FK::at(lane, e), idx);
  }
}

// d stored transposed (acc_t): computed as D^T = op(b)^T op(a)^T, so b gives the MFMA's A fragments (a
// column fragment of D is a row fragment of D^T) and a its B fragments. A register a is in the A-operand
// layout, which is the B fragment's map: it goes in as it is; its K order is the one the LDS operand is
// read in.
template <bool TA, bool TB, int KS_ = 0, int M, int R, int N, class A, class T, int BR, int BC, class SW>
TILES_DEV void mma(rt<float, R, N, acc_t<M>>& d, const A& a, const st<T, BR, BC, SW>& b,
                   const rt<float, R, N, acc_t<M>>& c) {
  static_assert(sizeof(T) == 2 && KS_ == 0, "transposed accumulators take the 16-bit MFMAs");
  constexpr int KDIM = TB ? BC : BR, KS = mfma_k<M, T>::K, E = M * KS / 64;
  static_assert(KDIM % KS == 0, "K of an mma must be a multiple of the MFMA's K");
  using D = rt<float, R, N, acc_t<M>>;
  using FK = typename operand_k<A, M, KS, E>::type;
  if (&d != &c) d = c;
  const int lane = arch::lane_id(), r0 = arch::wave_id() * R, fr = lane % M;
  constexpr bool UNROLL = is_rt<A>::value || (!TB && E <= 4);   // as in mma above
#if !defined(TILES_EMU)
#pragma unroll(UNROLL ? KDIM / KS : 1)
#endif
  for (int kk = 0; kk < KDIM / KS; ++kk) {
    T bf[D::FM][E];  // op(a)^T: the MFMA's B
    TILES_UNROLL for (int m = 0; m < D::FM; ++m) {
      if constexpr (is_rt<A>::value) {
        static_assert(A::layout::FC == KS && A::layout::FR == M, "register A operand is not in the MFMA's A layout");
        TILES_UNROLL for (int e = 0; e < E; ++e) bf[m][e] = a.v[m][kk][e];
      } else {
        read_frag<!TA, KS, E, FK>(a, r0 + m * M + fr, kk, lane, bf[m]);
      }
    }
    TILES_UNROLL for (int n = 0; n < D::FN; ++n) {
      T af[E];       // op(b)^T: the MFMA's A
      read_frag<TB, KS, E, FK>(b, n * M + fr, kk, lane, af);
      TILES_UNROLL for (int m = 0; m < D::FM; ++m) arch::mfma_op<M, KS, T>::run(af, bf[m], d.v[m][n]);
      if constexpr (!TB) arch::sched_barrier();
    }
  }
  arch::sched_barrier();
}
}  // namespace tiles_hip
