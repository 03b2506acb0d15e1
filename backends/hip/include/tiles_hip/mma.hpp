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

// How an MMA's clusters meet the code around them (the schedule's choice; codegen names it).
// fenced (plain, ping-pong): per group of K steps the wave reads all its fragments (A's unless A is in
// registers, every B), waits for them once (s_waitcnt lgkmcnt(0): the only LDS wait of the group), then issues
// the group's MFMAs back to back; sched_barriers keep the scheduler from pulling reads into the MFMA run (each
// read would bring its own wait) and anything else out of it.
// interleaved<VALU, VM> (the 4-wave interleave: one wave a SIMD, no other wave to fill the matrix core's idle
// issue slots): the fragments are read in parts, part p + 1's reads issued before part p's MFMAs, and each MFMA
// is followed by its share of those reads, up to VALU vector ops and VM global loads of the caller's (codegen
// counts them in the loop body), asked of LLVM's scheduler with sched_group_barrier. A pattern orders only the
// instructions before it in its scheduling region, and a full sched_barrier ends a region: so part p's region
// holds its wait, part p + 1's reads and part p's MFMAs; the last part's region runs on through the caller's
// code to the next MMA, whose pattern after its first reads spreads them and that code over it. The other
// fences let VALU, transcendentals, LDS reads and global loads cross; waits order memory operations, so each
// part still has its one wait, and MFMAs stay in their part.
struct fenced {
  static constexpr int CROSS = 0, VALU = 0, VM = 0;
  static constexpr bool AHEAD = false;
};
template <int VALU_, int VM_ = 0> struct interleaved {
  static constexpr int CROSS = arch::SCHED_VALU | arch::SCHED_TRANS | arch::SCHED_DS_READ | arch::SCHED_VMEM_READ;
  static constexpr int VALU = VALU_, VM = VM_;
  static constexpr bool AHEAD = true;
};

template <int V> struct constant { static constexpr int value = V; };
// f(constant<I>{}) for I = B .. E - 1: a loop whose counter is a constant in its body.
template <int B, int E, class F> TILES_DEV void unroll(F&& f) {
  if constexpr (B < E) {
    f(constant<B>{});
    unroll<B + 1, E>(f);
  }
}

// N times: one MFMA, then up to DS LDS reads, VALU vector ops and VM global loads (of the instructions before this
// point in its scheduling region).
template <int N, int DS, class X> TILES_DEV void mfma_pattern() {
  TILES_UNROLL for (int i = 0; i < N; ++i) {
    arch::sched_group<arch::SCHED_MFMA, 1, 0>();
    if constexpr (DS > 0) arch::sched_group<arch::SCHED_DS_READ, DS, 0>();
    if constexpr (X::VALU > 0) arch::sched_group<arch::SCHED_VALU | arch::SCHED_TRANS, X::VALU, 0>();
    if constexpr (X::VM > 0) arch::sched_group<arch::SCHED_VMEM_READ, X::VM, 0>();
  }
}

// KS_: the MFMA's K when not the default one for (M, T) (0), i.e. 128 for CDNA4's scaled fp8 MFMA.
// QUARTER: c and d are held in CDNA3's FNUZ quarter units by the caller (a K loop's accumulator, scaled back
// once after the loop), so this call does not scale them. X: fenced or interleaved<VALU, VM> (above).
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
template <bool TA, bool TB, int KS_ = 0, bool QUARTER = false, class X = fenced, int R, int N, class DL, int WC, class A,
          class T, int BR, int BC, class SW>
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
  // K steps read together, up to ~96 VGPRs of fragments: one wait for the group. Read ahead, two groups are
  // live: each at most half that, and half the steps, so that there is a next group to read. Rows of a paired
  // tile arrive as their pairs' words, twice the registers until the wait.
  constexpr bool AW = !TA && pair_rows<A, FK::RUN>::value, BW = TB && pair_rows<st<T, BR, BC, SW>, FK::RUN>::value;
  constexpr int STEPS = KDIM / KS,
                FRAG_VGPRS = ((is_rt<A>::value ? 0 : D::FM) * (AW ? 2 : 1) + D::FN * (BW ? 2 : 1)) * E * (int)sizeof(T) / 4;
  constexpr int GROUP = group_steps(STEPS, FRAG_VGPRS,
                                    X::AHEAD ? (STEPS / 2 * FRAG_VGPRS < 48 ? STEPS / 2 * FRAG_VGPRS : 48) : 96);
  // Read ahead, a single group (one K step: the 16x16x128 fp8 MFMA) is multiplied in two parts, each half the
  // column fragments (A is read with the first), so that there is a next part to read under the MFMAs.
  constexpr int GROUPS = STEPS / GROUP, HALVES = X::AHEAD && GROUPS == 1 && D::FN % 2 == 0 ? 2 : 1;
  constexpr int PARTS = GROUPS * HALVES, FNP = D::FN / HALVES, MFMAS = GROUP * D::FM * FNP;
  // LDS reads of part p, counted in 8-byte reads (a ds_read_b128 is two): the pattern's share per MFMA
  constexpr auto reads = [](int p) {
    return GROUP * ((is_rt<A>::value || p % HALVES ? 0 : D::FM) + FNP) * ((E * (int)sizeof(T) + 7) / 8);
  };
  constexpr int BUFS = X::AHEAD ? 2 : 1;  // fragment buffers: the part being multiplied, the one read ahead
  T af[BUFS][GROUP][D::FM][E], bf[BUFS][GROUP][D::FN][E];
  uint32_t aw[BUFS][GROUP][D::FM][AW ? E : 1], bw[BUFS][GROUP][D::FN][BW ? E : 1];
  // part p's fragments: A's into af[a_buf(p)] (with the first half), its column fragments' into bf[p % BUFS]
  constexpr auto a_buf = [](int p) { return HALVES == 2 ? 0 : p % BUFS; };
  auto read = [&](auto part) TILES_INLINE {
    constexpr int p = part.value, k0 = p / HALVES * GROUP, h = p % HALVES;
    TILES_UNROLL for (int g = 0; g < GROUP; ++g) {
      const int kk = k0 + g;
      if constexpr (h == 0) TILES_UNROLL for (int m = 0; m < D::FM; ++m) {
        T* out = af[a_buf(p)][g][m];
        if constexpr (is_rt<A>::value) {
          static_assert(sizeof(typename A::layout) && A::layout::FC == KS && A::layout::FR == M,
                        "register A operand is not in the MFMA's A layout");
          TILES_UNROLL for (int e = 0; e < E; ++e) out[e] = a.v[m][kk][e];
        } else if constexpr (TA) {
          read_col_frag<M, KS, E, FK>(a, kk, lane, r0 + m * M, out);
        } else if constexpr (AW) {
          TILES_UNROLL for (int e = 0; e < E; e += FK::RUN)
            a.template read_pairs<FK::RUN>(r0 + m * M + fr, kk * KS + FK::at(lane, e), aw[a_buf(p)][g][m] + e);
        } else {
          TILES_UNROLL for (int e = 0; e < E; e += FK::RUN)
            a.template read_run<FK::RUN>(r0 + m * M + fr, kk * KS + FK::at(lane, e), out + e);
        }
      }
      TILES_UNROLL for (int n = h * FNP; n < (h + 1) * FNP; ++n) {
        T* out = bf[p % BUFS][g][n];
        if constexpr (BW) {
          TILES_UNROLL for (int e = 0; e < E; e += FK::RUN)
            b.template read_pairs<FK::RUN>(c0 + n * M + fr, kk * KS + FK::at(lane, e), bw[p % BUFS][g][n] + e);
        } else if constexpr (TB) {
          TILES_UNROLL for (int e = 0; e < E; e += FK::RUN)
            b.template read_run<FK::RUN>(c0 + n * M + fr, kk * KS + FK::at(lane, e), out + e);
        } else {
          read_col_frag<M, KS, E, FK>(b, kk, lane, c0 + n * M, out);
        }
      }
    }
  };
  arch::sched_barrier<X::CROSS>();
  read(constant<0>{});
  // the previous cluster's last MFMAs (if any in this region) take these reads and the caller's VALU
  if constexpr (X::AHEAD) mfma_pattern<MFMAS, (reads(0) + MFMAS - 1) / MFMAS, X>();
  unroll<0, PARTS>([&](auto part) TILES_INLINE {  // parts by constants: fragment arrays stay in registers
    constexpr int p = part.value, h = p % HALVES, ai = a_buf(p), bi = p % BUFS;
    constexpr bool NEXT = p + 1 < PARTS;
    arch::sched_barrier();
    arch::waitcnt<arch::VM_ANY, 0>();
    arch::sched_barrier<X::CROSS>();  // else the first MFMA moves above the wait and brings a partial wait of its own
    TILES_UNROLL for (int g = 0; g < GROUP; ++g) TILES_UNROLL for (int e = 0; e < E; e += FK::RUN) {  // pairs' halves
      if constexpr (AW)
        if constexpr (h == 0)
          TILES_UNROLL for (int m = 0; m < D::FM; ++m) A::template keep_row<FK::RUN>(fr, aw[ai][g][m] + e, af[ai][g][m] + e);
      if constexpr (BW)
        TILES_UNROLL for (int n = h * FNP; n < (h + 1) * FNP; ++n)
          b.template keep_row<FK::RUN>(fr, bw[bi][g][n] + e, bf[bi][g][n] + e);
    }
    if constexpr (X::AHEAD && NEXT) read(constant<p + 1>{});  // under this part's MFMAs
    TILES_UNROLL for (int g = 0; g < GROUP; ++g) {
      if constexpr (FNUZ && is_rt<A>::value && h == 0)
        TILES_UNROLL for (int m = 0; m < D::FM; ++m) clear_negative_zero<E * (int)sizeof(T)>(af[ai][g][m]);
      TILES_UNROLL for (int n = h * FNP; n < (h + 1) * FNP; ++n)
        TILES_UNROLL for (int m = 0; m < D::FM; ++m) {
          if constexpr (DT) arch::mfma_op<M, KS, T>::run(bf[bi][g][n], af[ai][g][m], d.v[m][n]);
          else arch::mfma_op<M, KS, T>::run(af[ai][g][m], bf[bi][g][n], d.v[m][n]);
        }
    }
    if constexpr (X::AHEAD && NEXT) mfma_pattern<MFMAS, (reads(p + 1) + MFMAS - 1) / MFMAS, X>();
    arch::sched_barrier<X::CROSS>();
    if constexpr (!X::AHEAD && NEXT) read(constant<p + 1>{});
  });
  if constexpr (FNUZ && !QUARTER) mul(d, d, 4.0f);
}
}  // namespace tiles_hip
