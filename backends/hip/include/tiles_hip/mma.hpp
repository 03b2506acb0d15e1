// tiles_hip/mma.hpp: block-level matrix multiply on the matrix cores.
//
// d = op(a) @ op(b) + c over this wave's part of d (rt::row0, col0): for every K step, the wave reads its A
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
template <class X> struct is_rt { static constexpr bool value = false; };
template <class T, int R, int C, class L, int WC> struct is_rt<rt<T, R, C, L, WC>> { static constexpr bool value = true; };

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

template <class T, int E> struct use_tr {
#if defined(TILES_GFX950)
  static constexpr bool value = sizeof(T) == 2 && E % 4 == 0;
#else
  static constexpr bool value = false;
#endif
};

// One operand fragment read down the LDS columns: E / 4 transposing reads on CDNA4, one read of the K run
// where the tile is stored transposed (CDNA3), two 4-byte reads per 4 K where it is paired, else E single
// reads.
// FK: the K order the fragment is read in (the register operand's, when the MMA has one).
template <int M, int KS, int E, class FK, class S>
TILES_DEV void read_col_frag(const S& s, int kk, int lane, int c0, typename S::dtype* out) {
  using T = typename S::dtype;
  if constexpr (use_tr<T, E>::value) {
    static_assert(FK::RUN % 4 == 0, "a transposing read fetches runs of 4 K");
    using TR = tr_frag<M, E, FK>;
    static_assert(!S::LINEAR || TR::linear_in_h(), "read h's K rows are read 0's plus a constant");
    TILES_UNROLL for (int h = 0; h < E / 4; ++h) {
      if constexpr (S::LINEAR) s.read_tr(kk * KS + TR::k(0, h) - TR::k(0, 0), TR::k(lane, 0), c0 + TR::c(lane), out + 4 * h);
      else if constexpr (KS % S::swz::PERIOD == 0) s.read_tr(kk * KS, TR::k(lane, h), c0 + TR::c(lane), out + 4 * h);
      else s.read_tr(0, kk * KS + TR::k(lane, h), c0 + TR::c(lane), out + 4 * h);
    }
  } else if constexpr (S::TR) {  // stored transposed: a K run is contiguous
    TILES_UNROLL for (int e = 0; e < E; e += FK::RUN)
      s.template read_col_run<FK::RUN>(0, kk * KS + FK::at(lane, e), c0 + lane % M, out + e);
  } else if constexpr (S::PAIRED) {  // K step kk an immediate offset where it is whole swizzle periods
    constexpr bool STEP = KS % (2 * S::swz::PERIOD) == 0;
    TILES_UNROLL for (int e = 0; e < E; e += FK::RUN)
      s.template read_col_run<FK::RUN>(STEP ? kk * KS : 0, (STEP ? 0 : kk * KS) + FK::at(lane, e), c0 + lane % M, out + e);
  } else {
    TILES_UNROLL for (int e = 0; e < E; ++e) out[e] = col_elem<KS>(s, kk, FK::at(lane, e), c0 + lane % M);
  }
}

// The most K steps (a divisor of steps) whose fragments fit `budget` VGPRs, at least 1.
constexpr int group_steps(int steps, int per_step, int budget) {
  int g = 1;
  for (int c = 1; c <= steps; ++c) if (steps % c == 0 && c * per_step <= budget) g = c;
  return g;
}

// KS_: the MFMA's K when not the default one for (M, T) (0), i.e. 128 for CDNA4's scaled fp8 MFMA.
// QUARTER: c and d are held in CDNA3's FNUZ quarter units by the caller (a K loop's accumulator, scaled back
// once after the loop), so this call does not scale them.
//
// Per group of K steps the wave reads all its fragments (A's unless A is in registers, every B), waits for
// them once (s_waitcnt lgkmcnt(0): the only LDS wait of the group), then issues the step's MFMAs back to back, with
// nothing between them; sched_barriers keep the scheduler from pulling reads into the MFMA run (each read
// would bring its own wait). Global loads in flight are left alone (vmcnt is not waited for here).
//
// A transposed accumulator (DL = acc_t<M>) is computed as D^T = op(b)^T op(a)^T: the same fragments, b's
// as the MFMA's A (a column fragment of D is a row fragment of D^T) and a's as its B; a register a is in
// the A-operand layout, which is the B fragment's map, and its K order is the one b is read in.
template <class DL> struct acc_transposed { static constexpr bool value = false; };
// operands read along the rows of a paired tile: raw words until the group's wait (shared.hpp's read_pairs)
template <class X, int RUN> struct pair_rows { static constexpr bool value = false; };
template <class T, int R, int C, class SW, int RUN> struct pair_rows<st<T, R, C, SW>, RUN> {
  static constexpr bool value = SW::PAIRED && RUN % 2 == 0;
};
template <int M> struct acc_transposed<acc_t<M>> { static constexpr bool value = true; };
template <bool TA, bool TB, int KS_ = 0, bool QUARTER = false, int R, int N, class DL, int WC, class A, class T, int BR,
          int BC, class SW>
TILES_DEV void mma(rt<float, R, N, DL, WC>& d, const A& a, const st<T, BR, BC, SW>& b, const rt<float, R, N, DL, WC>& c) {
  constexpr int M = DL::FR, KDIM = TB ? BC : BR;
  constexpr bool DT = acc_transposed<DL>::value;
  static_assert(__is_same(DL, acc<M>) || (DT && sizeof(T) == 2), "an MMA accumulates in acc<M>, or acc_t<M> (16-bit inputs)");
  static_assert(WC == 1 || !is_rt<A>::value, "a register A operand holds the rows of waves split by rows only");
  using D = rt<float, R, N, DL, WC>;
  if (&d != &c) d = c;
  // CDNA3 reads fp8 as FNUZ (types.hpp): products come out a quarter of the OCP ones, so the accumulator
  // runs scaled by 1/4 through the K loop (exact: powers of two). LDS holds no -0 (cleared on the way in);
  // a register A operand is cleared here.
  constexpr bool FNUZ = fnuz<T>::value;
  if constexpr (FNUZ && !QUARTER) mul(d, d, 0.25f);
  constexpr int KS = KS_ ? KS_ : mfma_k<M, T>::K, E = M * KS / 64;
  using FK = typename operand_k<A, M, KS, E>::type;
  static_assert(KS != 128 || !is_rt<A>::value, "the 16x16x128 MFMA takes A from LDS only");
  static_assert(KDIM % KS == 0, "K of an mma must be a multiple of the MFMA's K");
  const int lane = arch::lane_id(), wave = arch::thread_id() / arch::WAVE;
  const int r0 = D::row0(wave), c0 = D::col0(wave);  // this wave's part of d
  const int fr = lane % M;  // this lane's row (A) / column (B) in a fragment
  // K steps read together, up to ~96 VGPRs of fragments: one wait for the group. Rows of a paired tile arrive as
  // their pairs' words, twice the registers until the wait.
  constexpr bool AW = !TA && pair_rows<A, FK::RUN>::value, BW = TB && pair_rows<st<T, BR, BC, SW>, FK::RUN>::value;
  constexpr int STEPS = KDIM / KS,
                FRAG_VGPRS = ((is_rt<A>::value ? 0 : D::FM) * (AW ? 2 : 1) + D::FN * (BW ? 2 : 1)) * E * (int)sizeof(T) / 4;
  constexpr int GROUP = group_steps(STEPS, FRAG_VGPRS, 96);
  arch::sched_barrier();
  TILES_UNROLL for (int k0 = 0; k0 < STEPS; k0 += GROUP) {
    T af[GROUP][D::FM][E], bf[GROUP][D::FN][E];
    uint32_t aw[GROUP][D::FM][AW ? E : 1], bw[GROUP][D::FN][BW ? E : 1];
    TILES_UNROLL for (int g = 0; g < GROUP; ++g) {
      const int kk = k0 + g;
      TILES_UNROLL for (int m = 0; m < D::FM; ++m) {
        if constexpr (is_rt<A>::value) {
          static_assert(sizeof(typename A::layout) && A::layout::FC == KS && A::layout::FR == M,
                        "register A operand is not in the MFMA's A layout");
          TILES_UNROLL for (int e = 0; e < E; ++e) af[g][m][e] = a.v[m][kk][e];
        } else if constexpr (TA) {
          read_col_frag<M, KS, E, FK>(a, kk, lane, r0 + m * M, af[g][m]);
        } else if constexpr (AW) {
          TILES_UNROLL for (int e = 0; e < E; e += FK::RUN)
            a.template read_pairs<FK::RUN>(r0 + m * M + fr, kk * KS + FK::at(lane, e), aw[g][m] + e);
        } else {
          TILES_UNROLL for (int e = 0; e < E; e += FK::RUN)
            a.template read_run<FK::RUN>(r0 + m * M + fr, kk * KS + FK::at(lane, e), af[g][m] + e);
        }
      }
      TILES_UNROLL for (int n = 0; n < D::FN; ++n) {
        if constexpr (BW) {
          TILES_UNROLL for (int e = 0; e < E; e += FK::RUN)
            b.template read_pairs<FK::RUN>(c0 + n * M + fr, kk * KS + FK::at(lane, e), bw[g][n] + e);
        } else if constexpr (TB) {
          TILES_UNROLL for (int e = 0; e < E; e += FK::RUN)
            b.template read_run<FK::RUN>(c0 + n * M + fr, kk * KS + FK::at(lane, e), bf[g][n] + e);
        } else {
          read_col_frag<M, KS, E, FK>(b, kk, lane, c0 + n * M, bf[g][n]);
        }
      }
    }
    arch::sched_barrier();
    arch::waitcnt<arch::VM_ANY, 0>();
    arch::sched_barrier();  // else the first MFMA moves above the wait and brings a partial wait of its own
    TILES_UNROLL for (int g = 0; g < GROUP; ++g) TILES_UNROLL for (int e = 0; e < E; e += FK::RUN) {
      if constexpr (AW)
        TILES_UNROLL for (int m = 0; m < D::FM; ++m) A::template keep_row<FK::RUN>(fr, aw[g][m] + e, af[g][m] + e);
      if constexpr (BW)
        TILES_UNROLL for (int n = 0; n < D::FN; ++n) b.template keep_row<FK::RUN>(fr, bw[g][n] + e, bf[g][n] + e);
    }
    TILES_UNROLL for (int g = 0; g < GROUP; ++g) {
      if constexpr (FNUZ && is_rt<A>::value)
        TILES_UNROLL for (int m = 0; m < D::FM; ++m) clear_negative_zero<E * (int)sizeof(T)>(af[g][m]);
      TILES_UNROLL for (int n = 0; n < D::FN; ++n)
        TILES_UNROLL for (int m = 0; m < D::FM; ++m) {
          if constexpr (DT) arch::mfma_op<M, KS, T>::run(bf[g][n], af[g][m], d.v[m][n]);
          else arch::mfma_op<M, KS, T>::run(af[g][m], bf[g][n], d.v[m][n]);
        }
    }
    arch::sched_barrier();
  }
  if constexpr (FNUZ && !QUARTER) mul(d, d, 4.0f);
}
}  // namespace tiles_hip
