// tiles_hip/global.hpp: global arrays and the moves between global, LDS and registers.
//
// Every global access goes through a buffer resource, whose range check makes "past the end reads 0,
// is not written" free: a lane whose element is outside the array's rows or columns uses an offset
// no buffer reaches (arch::OOB). Offsets are 32-bit: the runtime rejects arrays of 2 GiB or more.
#pragma once
#include "layout.hpp"
#include "shared.hpp"

namespace tiles_hip {
// The extents and strides of a global, passed by value next to its pointer.
struct gl_dims {
  int batch, depth, rows, cols;  // the 4-D view (batch, depth, rows, cols); cols contiguous
  int sb, sd, sr;                // strides of batch, depth, rows in elements
};
template <class T> struct gl : gl_dims {
  T* ptr;
  // the start and every stride in whole B-byte units: GL.aligned (its strides are the array's own, a rank's
  // leading dims 0). A dim past the end reads zeros through the buffer's range at its real stride, so strides of
  // extent-1 dims are kept, and count
  TILES_DEV bool aligned(uint32_t B) const {
    return ((uint32_t)(uintptr_t)ptr | (uint32_t)(sb | sd | sr) * (uint32_t)sizeof(T)) % B == 0;
  }
  TILES_DEV uint32_t bytes() const {
    return ((batch - 1) * sb + (depth - 1) * sd + (rows - 1) * sr + cols) * (uint32_t)sizeof(T);
  }
  TILES_DEV arch::buffer buffer() const { return arch::make_buffer(ptr, bytes()); }
  // byte offset of (b, d, r, c), or OOB outside the rows and columns
  TILES_DEV uint32_t offset(int b, int d, int r, int c) const {
    if (r >= rows || c >= cols) return arch::OOB;
    return unchecked(b, d, r, c);
  }
  TILES_DEV uint32_t unchecked(int b, int d, int r, int c) const {
    return (uint32_t)(b * sb + d * sd + r * sr + c) * (uint32_t)sizeof(T);
  }
  // a tile's row k: unchecked(b, d, r0, c0) + k * row_bytes(), the row's bytes opaque to clang, which would fold the
  // rows back into (r0 + k) * sr and redo each product and its scaling in full (one scalar shift-add or multiply and
  // an add a row instead: attention backward's dQ atomics, 8 rows a step)
  TILES_DEV uint32_t row_bytes() const { return (uint32_t)arch::opaque(sr * (int)sizeof(T)); }
};

// Where a lane's elements of a register tile (or vector) of layout L sit: element e of lane l at (row(l, 0),
// col(l, 0)) plus a step (dr(e), dc(e)) that is the same for every lane (every layout of layout.hpp). In a tile
// wholly inside the global an element's byte offset is then the lane's (one VGPR, loop-invariant) plus a
// wave-uniform part (the tile's and the element's rows: the SGPR offset) plus its columns (an immediate): no
// per-element range check, no per-element address arithmetic.
template <class L> struct lane_steps {
  TILES_DEV static constexpr int dr(int e) { return L::row(0, e) - L::row(0, 0); }
  TILES_DEV static constexpr int dc(int e) { return L::col(0, e) - L::col(0, 0); }
  static constexpr bool uniform() {
    for (int l = 0; l < 64; ++l)
      for (int e = 0; e < L::E; ++e)
        if (L::row(l, e) - L::row(l, 0) != dr(e) || L::col(l, e) - L::col(l, 0) != dc(e)) return false;
    return true;
  }
  static constexpr bool UNIFORM = uniform();
  template <class G> TILES_DEV static uint32_t lane_offset(const gl<G>& g, int lane) {
    return (uint32_t)(L::row(lane, 0) * g.sr + L::col(lane, 0)) * (uint32_t)sizeof(G);
  }
};

// One element: 8- and 16-bit ones as the dword that holds them (no buffer_load_ubyte / ushort), shifted.
template <class T> TILES_DEV T load_elem(arch::buffer buf, uint32_t off, uint32_t soff = 0) {
  const uint32_t w = arch::buffer_load<4>(buf, off & ~3u, soff).w[0];
  if constexpr (sizeof(T) == 1) return __builtin_bit_cast(T, (uint8_t)(w >> 8 * (off & 3)));
  else if constexpr (sizeof(T) == 2) return __builtin_bit_cast(T, (uint16_t)(w >> 8 * (off & 2)));
  else return __builtin_bit_cast(T, w);
}
template <class T> TILES_DEV void store_elem(arch::buffer buf, uint32_t off, T x, uint32_t soff = 0) {
  if constexpr (sizeof(T) == 1) arch::buffer_store_u8(buf, off, __builtin_bit_cast(uint8_t, x), soff);
  else if constexpr (sizeof(T) == 2) arch::buffer_store_u16(buf, off, __builtin_bit_cast(uint16_t, x), soff);
  else arch::buffer_store_u32(buf, off, __builtin_bit_cast(uint32_t, x), soff);
}

// N consecutive elements of a G array at byte offset off (+ soff, wave-uniform) into / from registers of type T: one
// buffer access where they are whole dwords, else (N = 1, a 16- or 8-bit element) the dword that holds it.
template <int N, class T, class G> TILES_DEV void load_run(T* dst, arch::buffer buf, uint32_t off, uint32_t soff) {
  if constexpr (N * sizeof(G) % 4 == 0) {
    const auto x = arch::buffer_load<N * (int)sizeof(G)>(buf, off, soff);
    G g[N];
    __builtin_memcpy(g, &x, sizeof g);
    TILES_UNROLL for (int i = 0; i < N; ++i) dst[i] = convert<T>(g[i]);
  } else {
    static_assert(N == 1, "a run of sub-dword elements is one element");
    dst[0] = convert<T>(load_elem<G>(buf, off, soff));
  }
}
template <int N, class G, class T> TILES_DEV void store_run(arch::buffer buf, uint32_t off, uint32_t soff, const T* src) {
  if constexpr (N * sizeof(G) % 4 == 0) {
    G g[N];
    TILES_UNROLL for (int i = 0; i < N; ++i) g[i] = convert<G>(src[i]);
    arch::bytes_t<N * (int)sizeof(G)> x;
    __builtin_memcpy(&x, g, sizeof g);
    arch::buffer_store(buf, off, x, soff);
  } else {
    static_assert(N == 1, "a run of sub-dword elements is one element");
    store_elem<G>(buf, off, convert<G>(src[0]), soff);
  }
}

// A run of N 16-bit elements at a byte offset that keeps 2-byte alignment only: `odd` 2 where the run's address is 2
// mod 4, else 0; off OOB for a run past the array's rows. Read as the 2N bytes from its dword boundary and the dword
// after, shifted by v_alignbit; written as its first and last element (16-bit stores) and the dwords between (one
// store of 2N - 4 bytes), or whole where it starts on a dword. Element by element, each took a dword load and a
// shift, and a 16-bit store.
template <int N, class T, class G>
TILES_DEV void load_run_halves(T* dst, arch::buffer buf, uint32_t off, uint32_t odd) {
  const uint32_t at = off == arch::OOB ? off : off - odd;
  const auto lo = arch::buffer_load<2 * N>(buf, at);
  const uint32_t hi = arch::buffer_load<4>(buf, at == arch::OOB ? at : at + 2 * N).w[0];
  uint32_t w[N / 2];
  TILES_UNROLL for (int i = 0; i < N / 2; ++i)
    w[i] = arch::alignbit(i + 1 < N / 2 ? lo.w[i + 1] : hi, lo.w[i], odd * 8);
  G g[N];
  __builtin_memcpy(g, w, sizeof g);
  TILES_UNROLL for (int i = 0; i < N; ++i) dst[i] = convert<T>(g[i]);
}
template <int N, class G, class T>
TILES_DEV void store_run_halves(arch::buffer buf, uint32_t off, uint32_t odd, const T* src) {
  G g[N];
  TILES_UNROLL for (int i = 0; i < N; ++i) g[i] = convert<G>(src[i]);
  arch::bytes_t<2 * N> x;
  __builtin_memcpy(&x, g, sizeof g);
  if (!odd) {
    arch::buffer_store(buf, off, x);
    return;
  }
  arch::buffer_store_u16(buf, off, (uint16_t)x.w[0]);
  if constexpr (N > 2) {
    arch::bytes_t<2 * N - 4> mid;
    TILES_UNROLL for (int i = 0; i < N / 2 - 1; ++i) mid.w[i] = arch::alignbit(x.w[i + 1], x.w[i], 16);
    arch::buffer_store(buf, off == arch::OOB ? off : off + 2, mid);
  }
  arch::buffer_store_u16(buf, off == arch::OOB ? off : off + 2 * N - 2, (uint16_t)(x.w[N / 2 - 1] >> 16));
}

// How a lane's elements of a tile of layout L move to and from a G array as runs: N consecutive columns of one row
// at a time, one buffer access of N sizeof(G) bytes (whole dwords, at most 16; every lane's runs start on a
// multiple of N columns, so a dword-aligned row keeps them dword-aligned). N = 1 where no longer run is whole
// dwords (a 16-bit element of the accumulator layout, alone in its dword: a GEMM's bf16 C): element by element,
// still at unchecked offsets. N = 0: the layout's steps differ by lane; every offset computed and checked.
template <class L, class G> struct runs {
  static constexpr int length() {
    if (!lane_steps<L>::UNIFORM) return 0;
    for (int n = 16 / (int)sizeof(G); n > 1 && n * (int)sizeof(G) >= 4; n /= 2) {
      bool ok = L::E % n == 0;
      for (int l = 0; l < 64; ++l)
        for (int e = 0; e < L::E; ++e)
          ok = ok && L::col(l, e) % n == e % n && L::row(l, e) == L::row(l, e - e % n) &&
               (e % n == 0 || L::col(l, e) == L::col(l, e - 1) + 1);
      if (ok) return n;
    }
    return 1;
  }
  static constexpr int N = length();
  // a tile C wide at column c0 inside the array's columns (its rows perhaps not: a grid's last row block, a decode
  // step's few rows in a 16-row tile), and the array's rows dword-aligned
  template <int C> TILES_DEV static bool fit_cols(const gl<G>& g, int c0) {
    const bool aligned = sizeof(G) >= 4 ||
                         ((uint32_t)(uintptr_t)g.ptr | (uint32_t)(g.sb | g.sd | g.sr | c0) * (uint32_t)sizeof(G)) % 4 == 0;
    return c0 + C <= g.cols && aligned;
  }
  // ... and wholly inside it
  template <int R, int C> TILES_DEV static bool fit(const gl<G>& g, int r0, int c0) {
    return r0 + R <= g.rows && fit_cols<C>(g, c0);
  }
  // whether the run of element e in fragment row m of such a tile, at (r0, c0), lies inside the array's rows
  TILES_DEV static bool row_inside(const gl<G>& g, int r0, int m, int e, int lane) {
    return r0 + m * L::FR + L::row(lane, e) < g.rows;
  }
  // a row kernel's tile (streams_rows) inside the array's columns whose rows keep 2-byte alignment only (16-bit
  // elements; rows of 50257 bf16): its runs move as the dword accesses around them (load_run_halves)
  template <int C> TILES_DEV static bool fit_halves(const gl<G>& g, int c0) {
    return sizeof(G) == 2 && N % 2 == 0 && c0 + C <= g.cols;
  }
  // f(m, n, e, off, soff) for each run of such a tile (FM x FN fragments): its first element v[m][n][e] and its
  // byte offset, the lane's part with the column folded in (a VGPR plus an immediate) and the row's (an SGPR)
  template <int FM, int FN, class F> TILES_DEV static void each(const gl<G>& g, int b, int d, int r0, int c0, F f) {
    using LS = lane_steps<L>;
    const uint32_t off = LS::lane_offset(g, arch::lane_id());
    TILES_UNROLL for (int m = 0; m < FM; ++m) TILES_UNROLL for (int n = 0; n < FN; ++n)
      TILES_UNROLL for (int e = 0; e < L::E; e += N)
        f(m, n, e, off + (n * L::FC + LS::dc(e)) * (uint32_t)sizeof(G), g.unchecked(b, d, r0 + m * L::FR + LS::dr(e), c0));
  }
};

// ---------------------------------------------------------------- global <-> registers
// (r0, c0): the block tile's first element; this wave's rows start wave_id * R below it. A tile wholly inside the
// array (one scalar branch) moves as runs (above): the lane's offset (one VGPR) plus the element's row (SGPR)
// plus its column (an immediate); edge tiles element by element, each offset checked.
template <class T, int R, int C, class L, int WC, class G>
TILES_DEV void load(rt<T, R, C, L, WC>& dst, const gl<G>& src, int b, int d, int r0, int c0) {
  const arch::buffer buf = src.buffer();
  const int lane = arch::lane_id();
  r0 += dst.row0();
  c0 += dst.col0();
  using A = runs<L, G>;
  if constexpr (A::N > 0) if (__builtin_expect(A::template fit<R, C>(src, r0, c0), 1)) {
    A::template each<R / L::FR, C / L::FC>(src, b, d, r0, c0, [&](int m, int n, int e, uint32_t off, uint32_t soff) {
      load_run<A::N, T, G>(&dst.v[m][n][e], buf, off, soff);
    });
    return;
  }
  // a row kernel's tile (streams_rows) past the array's rows, inside its columns: runs still, a run past the end
  // read at OOB (zeros), its row's offset folded into the lane's so that the buffer's range drops it whole; element
  // by element, a decode step's one row in a 16-row tile took a load and an offset check an element
  if constexpr (A::N > 0 && streams_rows<L>) if (A::template fit_cols<C>(src, c0)) {
    A::template each<R / L::FR, C / L::FC>(src, b, d, r0, c0, [&](int m, int n, int e, uint32_t off, uint32_t soff) {
      load_run<A::N, T, G>(&dst.v[m][n][e], buf, A::row_inside(src, r0, m, e, lane) ? off + soff : arch::OOB, 0u);
    });
    return;
  }
  if constexpr (A::N > 0 && streams_rows<L>) if (A::template fit_halves<C>(src, c0)) {
    const uint32_t base = (uint32_t)(uintptr_t)src.ptr;
    A::template each<R / L::FR, C / L::FC>(src, b, d, r0, c0, [&](int m, int n, int e, uint32_t off, uint32_t soff) {
      load_run_halves<A::N, T, G>(&dst.v[m][n][e], buf, A::row_inside(src, r0, m, e, lane) ? off + soff : arch::OOB,
                                  (base + off + soff) & 2u);
    });
    return;
  }
  TILES_UNROLL for (int m = 0; m < dst.FM; ++m) TILES_UNROLL for (int n = 0; n < dst.FN; ++n)
    TILES_UNROLL for (int e = 0; e < dst.E; ++e) {
      const uint32_t off = src.offset(b, d, r0 + m * L::FR + L::row(lane, e), c0 + n * L::FC + L::col(lane, e));
      dst.v[m][n][e] = convert<T>(load_elem<G>(buf, off));
    }
}
template <class G, class T, int R, int C, class L, int WC>
TILES_DEV void store(const gl<G>& dst, const rt<T, R, C, L, WC>& src, int b, int d, int r0, int c0) {
  const arch::buffer buf = dst.buffer();
  const int lane = arch::lane_id();
  r0 += src.row0();
  c0 += src.col0();
  using A = runs<L, G>;
  if constexpr (A::N > 0) if (__builtin_expect(A::template fit<R, C>(dst, r0, c0), 1)) {
    A::template each<R / L::FR, C / L::FC>(dst, b, d, r0, c0, [&](int m, int n, int e, uint32_t off, uint32_t soff) {
      store_run<A::N, G>(buf, off, soff, &src.v[m][n][e]);
    });
    return;
  }
  // as load's: a run past the array's rows at OOB, dropped whole
  if constexpr (A::N > 0 && streams_rows<L>) if (A::template fit_cols<C>(dst, c0)) {
    A::template each<R / L::FR, C / L::FC>(dst, b, d, r0, c0, [&](int m, int n, int e, uint32_t off, uint32_t soff) {
      store_run<A::N, G>(buf, A::row_inside(dst, r0, m, e, lane) ? off + soff : arch::OOB, 0u, &src.v[m][n][e]);
    });
    return;
  }
  if constexpr (A::N > 0 && streams_rows<L>) if (A::template fit_halves<C>(dst, c0)) {
    const uint32_t base = (uint32_t)(uintptr_t)dst.ptr;
    A::template each<R / L::FR, C / L::FC>(dst, b, d, r0, c0, [&](int m, int n, int e, uint32_t off, uint32_t soff) {
      store_run_halves<A::N, G>(buf, A::row_inside(dst, r0, m, e, lane) ? off + soff : arch::OOB,
                                (base + off + soff) & 2u, &src.v[m][n][e]);
    });
    return;
  }
  TILES_UNROLL for (int m = 0; m < src.FM; ++m) TILES_UNROLL for (int n = 0; n < src.FN; ++n)
    TILES_UNROLL for (int e = 0; e < src.E; ++e) {
      const uint32_t off = dst.offset(b, d, r0 + m * L::FR + L::row(lane, e), c0 + n * L::FC + L::col(lane, e));
      store_elem<G>(buf, off, convert<G>(src.v[m][n][e]));
    }
}
// f32 atomic accumulation (the gradients of attention backward).
template <class T, int R, int C, class L, int WC>
TILES_DEV void atomic_add(const gl<float>& dst, const rt<T, R, C, L, WC>& src, int b, int d, int r0, int c0) {
  const arch::buffer buf = dst.buffer();
  const int lane = arch::lane_id();
  r0 += src.row0();
  c0 += src.col0();
  using LS = lane_steps<L>;
  if (__builtin_expect(LS::UNIFORM && r0 + R <= dst.rows && c0 + C <= dst.cols, 1)) {  // one scalar branch
    const uint32_t off = LS::lane_offset(dst, lane), tile = dst.unchecked(b, d, r0, c0), row = dst.row_bytes();
    TILES_UNROLL for (int m = 0; m < src.FM; ++m) TILES_UNROLL for (int n = 0; n < src.FN; ++n)
      TILES_UNROLL for (int e = 0; e < src.E; ++e)
        arch::buffer_atomic_add(buf, off + (n * L::FC + LS::dc(e)) * 4u, cvt<T>::to(src.v[m][n][e]),
                                tile + (uint32_t)(m * L::FR + LS::dr(e)) * row);
    return;
  }
  TILES_UNROLL for (int m = 0; m < src.FM; ++m) TILES_UNROLL for (int n = 0; n < src.FN; ++n)
    TILES_UNROLL for (int e = 0; e < src.E; ++e) {
      const uint32_t off = dst.offset(b, d, r0 + m * L::FR + L::row(lane, e), c0 + n * L::FC + L::col(lane, e));
      arch::buffer_atomic_add(buf, off, cvt<T>::to(src.v[m][n][e]));
    }
}
// dst's block tile at (r0, c0) <- the sum of the COUNT f32 tiles that as many blocks pass for it (tl.store_sum),
// each as its `part`: its own to its slice of parts (depth d * COUNT + part); the block that the tile's counter in
// arrivals counts last reads every slice back, its own too (src's registers are then free for the loads), adds
// them in part order, so the sum does not depend on which came last, stores it and sets the counter back to zero
// for the next launch. `flag`: an LDS
// word that hands the count from the thread that took it to the block. Offsets past the globals' rows and columns
// are OOB: the buffer loads read zeros there and the stores drop them, as in load and store above.
template <int COUNT, int WAVES, class G, int R, int C, class L, int WC>
TILES_DEV void store_sum(const gl<G>& dst, const rt<float, R, C, L, WC>& src, int b, int d, int r0, int c0,
                         const gl<float>& parts, const gl<int>& arrivals, int part, float* flag) {
  if (b >= dst.batch || d >= dst.depth || r0 >= dst.rows || c0 >= dst.cols) return;   // no tile: nothing counted
  store(parts, src, b, d * COUNT + part, r0, c0);
  arch::release_to_grid();
  arch::barrier();
  if (arch::thread_id() == 0) {
    int* n = arrivals.ptr + (b * arrivals.sb + d * arrivals.sd + r0 / R * arrivals.sr + c0 / C);
    const bool last = arch::fetch_add(n, 1) == COUNT - 1;
    if (last) *n = 0;   // every part has arrived: nothing else counts this tile in this launch
    *flag = last ? 1.f : 0.f;
  }
  arch::lds_barrier();
  if (*flag == 0.f) return;
  arch::acquire_from_grid();
  // CHUNK of the lane's elements at a time: the chunk's loads, every part's, are in flight together, and its sums
  // are stored before the next chunk's loads, which holds them to 64 VGPRs whatever the tile (element by element,
  // with a store between, each waited one round trip; a whole 256x256 tile's parts spilled on gfx950).
  using T = rt<float, R, C, L, WC>;
  constexpr int ELEMS = T::FM * T::FN * T::E, CHUNK = 64 / COUNT > 0 ? 64 / COUNT : 1;
  const arch::buffer in = parts.buffer(), out = dst.buffer();
  const int lane = arch::lane_id();
  r0 += src.row0();
  c0 += src.col0();
  const auto place = [&](int k, int& r, int& c) {   // element k = (m * FN + n) * E + e: its row and column
    const int m = k / (T::FN * T::E), n = k / T::E % T::FN, e = k % T::E;
    r = r0 + m * L::FR + L::row(lane, e);
    c = c0 + n * L::FC + L::col(lane, e);
  };
  TILES_UNROLL for (int k0 = 0; k0 < ELEMS; k0 += CHUNK) {
    float sum[CHUNK];
    TILES_UNROLL for (int k = 0; k < CHUNK && k0 + k < ELEMS; ++k) {
      int r, c;
      place(k0 + k, r, c);
      TILES_UNROLL for (int q = 0; q < COUNT; ++q) {
        const float v = load_elem<float>(in, parts.offset(b, d * COUNT + q, r, c));
        sum[k] = q == 0 ? v : sum[k] + v;
      }
    }
    TILES_UNROLL for (int k = 0; k < CHUNK && k0 + k < ELEMS; ++k) {
      int r, c;
      place(k0 + k, r, c);
      store_elem<G>(out, dst.offset(b, d, r, c), convert<G>(sum[k]));
    }
  }
}
// Vectors run along the global's last dim: element i of a row vector is column c0 + (its row).
// Each row's value is held by several lanes; the one whose element sits in fragment column 0 writes.
// A vector wholly inside the global (one scalar branch) is loaded as a tile is (runs, above): a lane's values of
// fragment f at its first index plus lane-independent steps, consecutive ones as one access of whole dwords, at
// most 16 bytes (a row_runs tile's column vector of bf16: eight columns a lane, one buffer_load_dwordx4). At::at(l,
// e): the index within a fragment of lane l's value e (a row of a row vector, a column of a column vector).
template <int F, int VE, class At, class G> struct vec_runs {
  static constexpr int length() {
    for (int n = 16 / (int)sizeof(G); n > 1 && n * (int)sizeof(G) >= 4; n /= 2) {
      bool ok = VE % n == 0;
      for (int l = 0; l < 64; ++l)
        for (int e = 0; e < VE; ++e)
          ok = ok && (e % n == 0 ? At::at(l, e) * (int)sizeof(G) % 4 == 0 : At::at(l, e) == At::at(l, e - 1) + 1);
      if (ok) return n;
    }
    return 1;
  }
  static constexpr int N = length();
  // the vector's first element at byte `tile` of the array dword-aligned, where runs of 16-bit values need it
  TILES_DEV static bool aligned(const G* ptr, uint32_t tile) {
    return sizeof(G) >= 4 || N == 1 || ((uint32_t)(uintptr_t)ptr + tile) % 4 == 0;
  }
  template <class T, int FN>
  TILES_DEV static void load(T (&v)[FN][VE], arch::buffer buf, int lane, uint32_t tile) {
    const uint32_t lane_off = (uint32_t)At::at(lane, 0) * (uint32_t)sizeof(G);
    TILES_UNROLL for (int f = 0; f < FN; ++f) TILES_UNROLL for (int e = 0; e < VE; e += N) {
      load_run<N, T, G>(&v[f][e], buf, lane_off + (f * F + At::at(0, e) - At::at(0, 0)) * (uint32_t)sizeof(G), tile);
    }
  }
};
template <class L> struct rows_of {
  TILES_DEV static constexpr int at(int l, int e) { return L::row(l, e); }
};
template <class L> struct cols_of {
  TILES_DEV static constexpr int at(int l, int e) { return L::col(l, e); }
};
template <class T, int N, class L, class G>
TILES_DEV void load(rv<T, N, L>& dst, const gl<G>& src, int b, int d, int r, int c0) {
  const arch::buffer buf = src.buffer();
  const int lane = arch::lane_id();
  c0 += arch::wave_id() * N;
  using V = vec_runs<L::FR, rv<T, N, L>::VE, rows_of<L>, G>;
  const uint32_t tile = src.unchecked(b, d, r, c0);
  if (__builtin_expect(lane_steps<L>::UNIFORM && r < src.rows && c0 + N <= src.cols && V::aligned(src.ptr, tile), 1)) {
    V::load(dst.v, buf, lane, tile);
    return;
  }
  TILES_UNROLL for (int m = 0; m < dst.FM; ++m) TILES_UNROLL for (int e = 0; e < dst.VE; ++e)
    dst.at(m, e) = convert<T>(load_elem<G>(buf, src.offset(b, d, r, c0 + m * L::FR + L::row(lane, e))));
}
template <class G, class T, int N, class L>
TILES_DEV void store(const gl<G>& dst, const rv<T, N, L>& src, int b, int d, int r, int c0) {
  const arch::buffer buf = dst.buffer();
  const int lane = arch::lane_id();
  c0 += arch::wave_id() * N;
  TILES_UNROLL for (int m = 0; m < src.FM; ++m) TILES_UNROLL for (int e = 0; e < src.VE; ++e)
    if (L::col(lane, e) == 0) store_elem<G>(buf, dst.offset(b, d, r, c0 + m * L::FR + L::row(lane, e)), convert<G>(src.at(m, e)));
}
template <class T, int N, class L, class G>
TILES_DEV void load(cv<T, N, L>& dst, const gl<G>& src, int b, int d, int r, int c0) {
  const arch::buffer buf = src.buffer();
  const int lane = arch::lane_id();
  using V = vec_runs<L::FC, cv<T, N, L>::VE, cols_of<L>, G>;
  const uint32_t tile = src.unchecked(b, d, r, c0);
  if (__builtin_expect(lane_steps<L>::UNIFORM && r < src.rows && c0 + N <= src.cols && V::aligned(src.ptr, tile), 1)) {
    V::load(dst.v, buf, lane, tile);
    return;
  }
  TILES_UNROLL for (int n = 0; n < dst.FN; ++n) TILES_UNROLL for (int e = 0; e < dst.VE; ++e)
    dst.at(n, e) = convert<T>(load_elem<G>(buf, src.offset(b, d, r, c0 + n * L::FC + L::col(lane, e))));
}
template <class G, class T, int N, class L>
TILES_DEV void store(const gl<G>& dst, const cv<T, N, L>& src, int b, int d, int r, int c0) {
  const arch::buffer buf = dst.buffer();
  const int lane = arch::lane_id();
  if (arch::wave_id() != 0) return;  // every wave holds the whole vector
  TILES_UNROLL for (int n = 0; n < src.FN; ++n) TILES_UNROLL for (int e = 0; e < src.VE; ++e)
    if (L::row(lane, e) == 0) store_elem<G>(buf, dst.offset(b, d, r, c0 + n * L::FC + L::col(lane, e)), convert<G>(src.at(n, e)));
}

// ---------------------------------------------------------------- global -> LDS
// Two paths: direct (buffer_load ... lds, DIRECT_LDS_BYTES per lane with no registers in between; needs
// rows that are whole DIRECT_LDS_BYTES runs: cols and row stride multiples of it) and staged (through
// registers, element by element where a run crosses the array's edge).
// How a pipelined tile's fill travels (lds_fill): DIRECT (buffer_load ... lds), REGS (16 bytes a lane
// through registers, written to LDS at land(): where a direct load moves only 4 bytes a lane (CDNA3), each
// costing an m0 write and an s_nop besides, one 16-byte load and its writes are a third of the instructions),
// REGS_T (4 x 4 blocks through registers, written transposed: a transposed tile), REGS_PAIRED (2 x 8 blocks
// through registers, written interleaved: a paired tile). CDNA3's fp8 never goes direct: its -0 is cleared on
// the way in (types.hpp's fnuz), once per element rather than by every wave at every MFMA read.
enum fill_path { DIRECT, REGS, REGS_T, REGS_PAIRED };
template <int WAVES, class S> struct lds_load {
  using T = typename S::dtype;
  static constexpr int D = arch::DIRECT_LDS_BYTES, SPAN = 64 * D;
  static constexpr bool DIRECT_FITS = !S::TR && !S::PAIRED && !fnuz<T>::value && S::BYTES % SPAN == 0 &&
                                      D <= S::swz::GRANULE && S::PANEL_BYTES % D == 0;
  static constexpr fill_path PATH = S::TR       ? REGS_T
                                    : S::PAIRED ? REGS_PAIRED
                                    : D < 16 && S::PANEL_BYTES % 16 == 0 ? REGS : DIRECT;
  // vm instructions one wave issues per direct load (the fewest any wave issues): what s_waitcnt
  // vmcnt may leave outstanding when later tiles are already in flight (fills through registers have
  // landed by then: land() waits for its own loads).
  static constexpr int VM_OPS = PATH == DIRECT && DIRECT_FITS ? S::BYTES / SPAN / WAVES : 0;
};
// The direct path: one buffer_load ... lds per 64 lanes x D bytes of the tile (a span), spans dealt
// round-robin to the waves. Lane i of span s fills LDS byte s * SPAN + i * D, i.e. (row r, byte in row);
// the global element it reads is the swizzle applied to that position.
template <int WAVES, class S> struct direct_span {
  using LL = lds_load<WAVES, S>;
  static constexpr int SPANS = S::BYTES / LL::SPAN, PER_WAVE = (SPANS + WAVES - 1) / WAVES;
  TILES_DEV static bool mine(int i) { return SPANS % WAVES == 0 || arch::wave_id() + i * WAVES < SPANS; }
  TILES_DEV static int span(int i) { return arch::wave_id() + i * WAVES; }
  // (row, column) in the tile of the element lane `lane` moves in this wave's i-th span
  TILES_DEV static void at(int i, int lane, int& r, int& c) {
    int b;
    S::position(span(i) * LL::SPAN + lane * LL::D, r, b);
    c = b / (int)sizeof(typename S::dtype);
  }
};
// Edge tiles and ragged rows: direct loads with every lane's row and column checked (OOB past the array's
// edge), or staged through registers, one element at a time where a run could cross the edge.
template <int WAVES, class T, int R, int C, class SW, class G>
TILES_DEV void load_checked(const st<T, R, C, SW>& dst, const gl<G>& src, int b, int d, int r0, int c0) {
  using S = st<T, R, C, SW>;
  using LL = lds_load<WAVES, S>;
  using DS = direct_span<WAVES, S>;
  const arch::buffer buf = src.buffer();
  constexpr int V = LL::D / (int)sizeof(T);  // elements per lane per direct load
  if (LL::DIRECT_FITS && (src.cols | src.sr) % V == 0) {
    TILES_UNROLL for (int i = 0; i < DS::PER_WAVE; ++i) if (DS::mine(i)) {
      int r, c;
      DS::at(i, arch::lane_id(), r, c);
      arch::buffer_load_lds(buf, src.offset(b, d, r0 + r, c0 + c), 0, dst.base + DS::span(i) * LL::SPAN);
    }
    return;
  }
  constexpr int RUN = SW::GRANULE / (int)sizeof(T);  // elements per staged run
  for (int i = arch::thread_id(); i < R * C / RUN; i += WAVES * 64) {
    const int r = i / (C / RUN), c = i % (C / RUN) * RUN;
    T run[RUN];
    TILES_UNROLL for (int j = 0; j < RUN; ++j) run[j] = load_elem<T>(buf, src.offset(b, d, r0 + r, c0 + c + j));
    if constexpr (fnuz<T>::value) clear_negative_zero<sizeof(run)>(run);
    if constexpr (st<T, R, C, SW>::TR) TILES_UNROLL for (int j = 0; j < RUN; ++j) dst.at(r, c + j) = run[j];
    else __builtin_memcpy(&dst.at(r, c), run, sizeof(run));
  }
}
// What every fill path shares: which tiles take its unchecked loads (full: wholly inside an array whose rows are
// whole runs of its loads), and for a pipelined loop whose tiles move forward by (dr, dc) a step, how many
// leading steps of n do (a prefix: once a tile crosses an edge, every later one does), so that a loop can test
// all of a step's fills at once with one compare against a count made before it.
template <class F, class S, class G> struct fill_base {
  const gl<G>& src;
  bool runs;  // the array's rows are whole runs of the path's loads
  TILES_DEV bool full(int r0, int c0) const { return runs && r0 + S::ROWS <= src.rows && c0 + S::COLS <= src.cols; }
  TILES_DEV static int steps(int room, int delta, int n) { return room < 0 ? 0 : delta == 0 ? n : tiles_min(n, room / delta + 1); }
  TILES_DEV int full_steps(int n, int r0, int c0, int dr, int dc) const {
    return runs ? tiles_min(steps(src.rows - S::ROWS - r0, dr, n), steps(src.cols - S::COLS - c0, dc, n)) : 0;
  }
  // every lane checked; the coordinates opaque, so that a loop's full steps carry nothing for its edge steps
  TILES_DEV void edge(const S& dst, int b, int d, int r0, int c0) const {
    static_cast<const F&>(*this).edge_tile(dst, b, d, arch::opaque(r0), arch::opaque(c0));
  }
  // a full tile at (b, d, r0, c0), or at a byte offset (a loop's: its part outside the loop made once, the codegen's)
  TILES_DEV void full_tile(const S& dst, int b, int d, int r0, int c0) const {
    static_cast<const F&>(*this).full_tile_at(dst, src.unchecked(b, d, r0, c0));
  }
  TILES_DEV void operator()(const S& dst, int b, int d, int r0, int c0) const {
    if (__builtin_expect(full(r0, c0), 1)) full_tile(dst, b, d, r0, c0);  // the fall-through
    else edge(dst, b, d, r0, c0);
  }
};
// The loads of one pipelined tile from one global: the lanes' offsets within a tile are computed once,
// before the loop (a VGPR per span this wave moves), so an iteration's fill is its buffer_loads plus the
// tile's offset in an SGPR.
// A tile wholly inside an array whose rows are whole direct runs (every tile of a GEMM but the edge ones)
// takes the unchecked direct path; the choice is per tile and uniform (one scalar branch).
template <int WAVES, class S, class G, fill_path P = lds_load<WAVES, S>::PATH>
struct lds_fill : fill_base<lds_fill<WAVES, S, G, P>, S, G> {
  using T = typename S::dtype;
  using LL = lds_load<WAVES, S>;
  using DS = direct_span<WAVES, S>;
  using fill_base<lds_fill, S, G>::src;
  static_assert(sizeof(T) == sizeof(G), "global -> shared moves do not convert");
  uint32_t off[DS::PER_WAVE];
  int wave_lds;  // this wave's first span in the tile, bytes (uniform, kept in an SGPR through the loop)
  TILES_DEV explicit lds_fill(const gl<G>& g)
      : fill_base<lds_fill, S, G>{g, LL::DIRECT_FITS && (g.cols | g.sr) % (LL::D / (int)sizeof(T)) == 0},
        wave_lds(DS::span(0) * LL::SPAN) {
    TILES_UNROLL for (int i = 0; i < DS::PER_WAVE; ++i) {
      int r, c;
      DS::at(i, arch::lane_id(), r, c);
      off[i] = (uint32_t)(r * src.sr + c) * (uint32_t)sizeof(T);
    }
  }
  TILES_DEV void full_tile_at(const S& dst, uint32_t tile) const {
    const arch::buffer buf = src.buffer();
    TILES_UNROLL for (int i = 0; i < DS::PER_WAVE; ++i)
      if (DS::mine(i)) arch::buffer_load_lds(buf, off[i], tile, dst.base + wave_lds + i * WAVES * LL::SPAN);
  }
  TILES_DEV void edge_tile(const S& dst, int b, int d, int r0, int c0) const { load_checked<WAVES>(dst, src, b, d, r0, c0); }
  TILES_DEV void land(const S&) const {}  // the direct loads land by themselves
};
// A tile through registers, 16 bytes (a run) a lane: thread t moves runs t, t + threads, .. (row-major, so
// a wave's loads are contiguous in global memory): one buffer_load_dwordx4 each at the fill, kept in registers
// through the MFMA cluster, written to the (swizzled) LDS tile at land(), CDNA3's fp8 cleared of -0 on the way.
// Edge tiles check each run's row and column (whole runs: the array's columns a multiple of a run), ragged
// arrays load single elements.
template <int WAVES, class S, class G>
struct lds_fill<WAVES, S, G, REGS> : fill_base<lds_fill<WAVES, S, G, REGS>, S, G> {
  using fill_base<lds_fill, S, G>::src;
  using fill_base<lds_fill, S, G>::runs;
  using T = typename S::dtype;
  static_assert(sizeof(T) == sizeof(G), "global -> shared moves do not convert");
  static constexpr int RUN = 16 / (int)sizeof(T), PER_ROW = S::COLS / RUN, RUNS = S::ROWS * PER_ROW, THREADS = 64 * WAVES;
  static constexpr int PER = (RUNS + THREADS - 1) / THREADS;
  uint32_t off[PER];
  mutable arch::bytes_t<16> x[PER];
  TILES_DEV static bool mine(int j) { return RUNS % THREADS == 0 || arch::thread_id() + j * THREADS < RUNS; }
  TILES_DEV static int run(int j) { return arch::thread_id() + j * THREADS; }
  TILES_DEV explicit lds_fill(const gl<G>& g) : fill_base<lds_fill, S, G>{g, (g.cols | g.sr) % RUN == 0} {
    TILES_UNROLL for (int j = 0; j < PER; ++j)
      off[j] = (uint32_t)(run(j) / PER_ROW * g.sr + run(j) % PER_ROW * RUN) * (uint32_t)sizeof(T);
  }
  TILES_DEV void full_tile_at(const S&, uint32_t tile) const {
    const arch::buffer buf = src.buffer();
    TILES_UNROLL for (int j = 0; j < PER; ++j) if (mine(j)) x[j] = arch::buffer_load<16>(buf, off[j], tile);
  }
  TILES_DEV void edge_tile(const S&, int b, int d, int r0, int c0) const {
    const arch::buffer buf = src.buffer();
    TILES_UNROLL for (int j = 0; j < PER; ++j) if (mine(j)) {
      const int r = r0 + run(j) / PER_ROW, c = c0 + run(j) % PER_ROW * RUN;
      if (runs) {
        x[j] = arch::buffer_load<16>(buf, src.offset(b, d, r, c));
      } else {
        T e[RUN];
        TILES_UNROLL for (int q = 0; q < RUN; ++q) e[q] = load_elem<T>(buf, src.offset(b, d, r, c + q));
        __builtin_memcpy(&x[j], e, 16);
      }
    }
  }
  TILES_DEV void land(const S& dst) const {
    TILES_UNROLL for (int j = 0; j < PER; ++j) if (mine(j)) {
      T e[RUN];
      __builtin_memcpy(e, &x[j], 16);
      if constexpr (fnuz<T>::value) clear_negative_zero<16>(e);
      dst.template write_run<RUN>(run(j) / PER_ROW, run(j) % PER_ROW * RUN, e);
    }
  }
};
// A transposed tile (shared.hpp): through registers. Each lane moves 4 x 4 blocks: four loads of 4
// consecutive elements of a row at the fill (operator()), kept in registers through the MFMA cluster, and at
// land() four writes of a column's 4 consecutive rows, contiguous in the transposed storage. Edge tiles
// check each lane's rows and 4-column group (whole groups: the array's columns a multiple of 4), ragged
// arrays fall back to single elements.
template <int WAVES, class S, class G>
struct lds_fill<WAVES, S, G, REGS_T> : fill_base<lds_fill<WAVES, S, G, REGS_T>, S, G> {
  using fill_base<lds_fill, S, G>::src;
  using fill_base<lds_fill, S, G>::runs;
  using T = typename S::dtype;
  static_assert(sizeof(T) == sizeof(G), "global -> shared moves do not convert");
  static_assert(S::ROWS % 4 == 0 && S::COLS % 4 == 0, "a transposed tile is whole 4 x 4 blocks");
  static constexpr int BC = S::COLS / 4, BLOCKS = S::ROWS / 4 * BC, THREADS = 64 * WAVES;
  static constexpr int PER = (BLOCKS + THREADS - 1) / THREADS, RUN = 4 * (int)sizeof(T);
  uint32_t off[PER];
  mutable arch::bytes_t<RUN> x[PER][4];  // the blocks in flight, row by row
  TILES_DEV static bool mine(int j) { return BLOCKS % THREADS == 0 || arch::thread_id() + j * THREADS < BLOCKS; }
  TILES_DEV static int block(int j) { return arch::thread_id() + j * THREADS; }
  TILES_DEV explicit lds_fill(const gl<G>& g) : fill_base<lds_fill, S, G>{g, (g.cols | g.sr) % 4 == 0} {
    TILES_UNROLL for (int j = 0; j < PER; ++j)
      off[j] = (uint32_t)(4 * (block(j) / BC) * g.sr + 4 * (block(j) % BC)) * (uint32_t)sizeof(T);
  }
  TILES_DEV void full_tile_at(const S&, uint32_t tile) const {
    const arch::buffer buf = src.buffer();
    const uint32_t row = src.sr * (uint32_t)sizeof(T);
    TILES_UNROLL for (int j = 0; j < PER; ++j) if (mine(j))
      TILES_UNROLL for (int i = 0; i < 4; ++i) x[j][i] = arch::buffer_load<RUN>(buf, off[j] + i * row, tile);
  }
  TILES_DEV void edge_tile(const S&, int b, int d, int r0, int c0) const {
    const arch::buffer buf = src.buffer();
    TILES_UNROLL for (int j = 0; j < PER; ++j) if (mine(j)) {
      const int r = r0 + 4 * (block(j) / BC), c = c0 + 4 * (block(j) % BC);
      TILES_UNROLL for (int i = 0; i < 4; ++i) {
        if (runs) {
          x[j][i] = arch::buffer_load<RUN>(buf, src.offset(b, d, r + i, c));
        } else {
          T e[4];
          TILES_UNROLL for (int q = 0; q < 4; ++q) e[q] = load_elem<T>(buf, src.offset(b, d, r + i, c + q));
          __builtin_memcpy(&x[j][i], e, RUN);
        }
      }
    }
  }
  TILES_DEV void land(const S& dst) const {
    TILES_UNROLL for (int j = 0; j < PER; ++j) if (mine(j)) {
      T e[4][4], col[4];
      __builtin_memcpy(e, x[j], sizeof(e));
      TILES_UNROLL for (int q = 0; q < 4; ++q) {
        TILES_UNROLL for (int i = 0; i < 4; ++i) col[i] = e[i][q];
        if constexpr (fnuz<T>::value) clear_negative_zero<sizeof(col)>(col);
        dst.template write_col_run<4>(4 * (block(j) / BC), 4 * (block(j) % BC) + q, col);
      }
    }
  }
};
// A paired tile (shared.hpp): through registers. Each lane moves blocks of two rows by 8 columns: a 16-byte load
// of each row at the fill, and at land() the rows' elements interleaved into words (one v_perm per word),
// written as the stored row's 32 bytes. Edge tiles check each run (whole runs: the array's columns a multiple
// of 8), ragged arrays single elements.
template <int WAVES, class S, class G>
struct lds_fill<WAVES, S, G, REGS_PAIRED> : fill_base<lds_fill<WAVES, S, G, REGS_PAIRED>, S, G> {
  using fill_base<lds_fill, S, G>::src;
  using fill_base<lds_fill, S, G>::runs;
  using T = typename S::dtype;
  static_assert(sizeof(T) == sizeof(G), "global -> shared moves do not convert");
  static constexpr int N = 8, RUN = N * (int)sizeof(T), BC = S::COLS / N, BLOCKS = S::ROWS / 2 * BC,
                       THREADS = 64 * WAVES, PER = (BLOCKS + THREADS - 1) / THREADS;
  static_assert(S::COLS % N == 0, "a paired tile is whole 2 x 8 blocks");
  uint32_t off[PER];
  mutable arch::bytes_t<RUN> x[PER][2];  // the blocks in flight, row by row
  TILES_DEV static bool mine(int j) { return BLOCKS % THREADS == 0 || arch::thread_id() + j * THREADS < BLOCKS; }
  TILES_DEV static int row(int j) { return 2 * ((arch::thread_id() + j * THREADS) / BC); }
  TILES_DEV static int col(int j) { return N * ((arch::thread_id() + j * THREADS) % BC); }
  TILES_DEV explicit lds_fill(const gl<G>& g) : fill_base<lds_fill, S, G>{g, (g.cols | g.sr) % N == 0} {
    TILES_UNROLL for (int j = 0; j < PER; ++j) off[j] = (uint32_t)(row(j) * g.sr + col(j)) * (uint32_t)sizeof(T);
  }
  TILES_DEV void full_tile_at(const S&, uint32_t tile) const {
    const arch::buffer buf = src.buffer();
    const uint32_t next = src.sr * (uint32_t)sizeof(T);
    TILES_UNROLL for (int j = 0; j < PER; ++j) if (mine(j))
      TILES_UNROLL for (int i = 0; i < 2; ++i) x[j][i] = arch::buffer_load<RUN>(buf, off[j] + i * next, tile);
  }
  TILES_DEV void edge_tile(const S&, int b, int d, int r0, int c0) const {
    const arch::buffer buf = src.buffer();
    TILES_UNROLL for (int j = 0; j < PER; ++j) if (mine(j)) {
      TILES_UNROLL for (int i = 0; i < 2; ++i) {
        const int r = r0 + row(j) + i, c = c0 + col(j);
        if (runs) {
          x[j][i] = arch::buffer_load<RUN>(buf, src.offset(b, d, r, c));
        } else {
          T e[N];
          TILES_UNROLL for (int q = 0; q < N; ++q) e[q] = load_elem<T>(buf, src.offset(b, d, r, c + q));
          __builtin_memcpy(&x[j][i], e, RUN);
        }
      }
    }
  }
  TILES_DEV void land(const S& dst) const {
    TILES_UNROLL for (int j = 0; j < PER; ++j) if (mine(j)) {
      uint32_t w[N];  // word q: (row, col + q) low, (row + 1, col + q) high
      TILES_UNROLL for (int q = 0; q < N / 2; ++q) {
        w[2 * q] = arch::perm(x[j][1].w[q], x[j][0].w[q], 0x05040100u);
        w[2 * q + 1] = arch::perm(x[j][1].w[q], x[j][0].w[q], 0x07060302u);
      }
      dst.template write_pairs<N>(row(j), col(j), w);
    }
  }
};
// Cooperative over the block's WAVES waves.
template <int WAVES, class T, int R, int C, class SW, class G>
TILES_DEV void load(const st<T, R, C, SW>& dst, const gl<G>& src, int b, int d, int r0, int c0) {
  const lds_fill<WAVES, st<T, R, C, SW>, G> fill{src};
  fill(dst, b, d, r0, c0);
  fill.land(dst);
}
// A row-major tile of whole 16-byte runs is read from LDS a run per lane (one ds_read_b128, not one narrow read per
// element); the run goes out as one 16-byte buffer store where the array's rows are whole runs of the same type
// (a run past the edge is wholly past it: dropped), else element by element.
template <int WAVES, class G, class T, int R, int C, class SW>
TILES_DEV void store(const gl<G>& dst, const st<T, R, C, SW>& src, int b, int d, int r0, int c0) {
  const arch::buffer buf = dst.buffer();
  constexpr int N = 16 / (int)sizeof(T);
  if constexpr (!SW::TRANSPOSED && !SW::PAIRED && C % N == 0) {
    constexpr int RUNS = R * C / N, THREADS = WAVES * 64;
    // f(run's row, its column, its elements) for each of this thread's runs
    const auto each = [&](auto f) {
      TILES_UNROLL for (int j = 0; j < (RUNS + THREADS - 1) / THREADS; ++j) {
        const int i = arch::thread_id() + j * THREADS, r = i / (C / N), c = i % (C / N) * N;
        if (RUNS % THREADS && i >= RUNS) break;
        T x[N];
        src.template read_run<N>(r, c, x);
        f(r, c, x);
      }
    };
    if constexpr (__is_same(G, T)) {
      // scalar branches, out of the loop: the runs' stores straight-line, their offsets unchecked where the whole
      // tile lies inside the array
      if ((dst.cols | dst.sr | c0) % N == 0) {
        const auto store_runs = [&](auto offset) {
          each([&](int r, int c, const T (&x)[N]) {
            arch::bytes_t<16> w;
            __builtin_memcpy(&w, x, 16);
            arch::buffer_store<16>(buf, offset(r0 + r, c0 + c), w);
          });
        };
        if (r0 + R <= dst.rows && c0 + C <= dst.cols) store_runs([&](int r, int c) { return dst.unchecked(b, d, r, c); });
        else store_runs([&](int r, int c) { return dst.offset(b, d, r, c); });
        return;
      }
    }
    each([&](int r, int c, const T (&x)[N]) {
      TILES_UNROLL for (int q = 0; q < N; ++q) store_elem<G>(buf, dst.offset(b, d, r0 + r, c0 + c + q), convert<G>(x[q]));
    });
    return;
  }
  for (int i = arch::thread_id(); i < R * C; i += WAVES * 64)
    store_elem<G>(buf, dst.offset(b, d, r0 + i / C, c0 + i % C), convert<G>(src.at(i / C, i % C)));
}

// Shared vectors, cooperatively: element i is column c0 + i of row (b, d, r).
template <int WAVES, class T, int N, class G>
TILES_DEV void load(const sv<T, N>& dst, const gl<G>& src, int b, int d, int r, int c0) {
  const arch::buffer buf = src.buffer();
  for (int i = arch::thread_id(); i < N; i += WAVES * 64) dst.at(i) = convert<T>(load_elem<G>(buf, src.offset(b, d, r, c0 + i)));
}
template <int WAVES, class G, class T, int N>
TILES_DEV void store(const gl<G>& dst, const sv<T, N>& src, int b, int d, int r, int c0) {
  const arch::buffer buf = dst.buffer();
  for (int i = arch::thread_id(); i < N; i += WAVES * 64) store_elem<G>(buf, dst.offset(b, d, r, c0 + i), convert<G>(src.at(i)));
}

// ---------------------------------------------------------------- LDS <-> registers
// Vectors: a row vector takes this wave's rows (wave_id * N ..), a column vector all of them.
template <class T, int N, class L, class U, int SN>
TILES_DEV void load(rv<T, N, L>& dst, const sv<U, SN>& src) {
  const int lane = arch::lane_id(), r0 = arch::wave_id() * N;
  TILES_UNROLL for (int m = 0; m < dst.FM; ++m) TILES_UNROLL for (int e = 0; e < dst.VE; ++e)
    dst.at(m, e) = convert<T>(src.at(r0 + m * L::FR + L::row(lane, e)));
}
template <class T, int N, class L, class U>
TILES_DEV void load(cv<T, N, L>& dst, const sv<U, N>& src) {
  const int lane = arch::lane_id();
  TILES_UNROLL for (int n = 0; n < dst.FN; ++n) TILES_UNROLL for (int e = 0; e < dst.VE; ++e)
    dst.at(n, e) = convert<T>(src.at(n * L::FC + L::col(lane, e)));
}
template <class U, int SN, class T, int N, class L>
TILES_DEV void store(const sv<U, SN>& dst, const rv<T, N, L>& src) {
  const int lane = arch::lane_id(), r0 = arch::wave_id() * N;
  TILES_UNROLL for (int m = 0; m < src.FM; ++m) TILES_UNROLL for (int e = 0; e < src.VE; ++e)
    if (L::col(lane, e) == 0) dst.at(r0 + m * L::FR + L::row(lane, e)) = convert<U>(src.at(m, e));
}
template <class U, class T, int N, class L>
TILES_DEV void store(const sv<U, N>& dst, const cv<T, N, L>& src) {
  const int lane = arch::lane_id();
  if (arch::wave_id() != 0) return;  // every wave holds the whole vector
  TILES_UNROLL for (int n = 0; n < src.FN; ++n) TILES_UNROLL for (int e = 0; e < src.VE; ++e)
    if (L::row(lane, e) == 0) dst.at(n * L::FC + L::col(lane, e)) = convert<U>(src.at(n, e));
}
// Each wave moves its own rows (wave_id * R ..) of the block tile. A lane's run of consecutive columns (the
// A-operand layout's E) moves as one ds_read / ds_write.
template <class T, int R, int C, class L, class U, int SR, class SW>
TILES_DEV void load(rt<T, R, C, L>& dst, const st<U, SR, C, SW>& src) {
  const int lane = arch::lane_id(), r0 = arch::wave_id() * R;
#if defined(TILES_GFX950)
  // The accumulator layout holds four consecutive rows of one column per element quad, the 16 lanes of a
  // group consecutive columns: one ds_read_b64_tr_b16 per quad (lane p of the group reads row p / 4 of the
  // quad's 4 x 16 block), not four ds_read_u16.
  if constexpr (sizeof(U) == 2 && L::COL_BY_LANE && L::E % 4 == 0 && L::FC % 16 == 0) {
    TILES_UNROLL for (int m = 0; m < dst.FM; ++m) TILES_UNROLL for (int n = 0; n < dst.FN; ++n)
      TILES_UNROLL for (int q = 0; q < dst.E / 4; ++q) {
        U x[4];
        const int row = r0 + m * L::FR + L::row(lane, 4 * q) + (lane % 16) / 4;
        const int col = n * L::FC + L::col(lane, 0) - lane % 16 + 4 * (lane % 4);
        src.read_tr(0, row, col, x);
        TILES_UNROLL for (int j = 0; j < 4; ++j) dst.v[m][n][4 * q + j] = convert<T>(x[j]);
      }
    return;
  }
#endif
  // A tile stored transposed (CDNA3): the quad's four rows of one column are one contiguous run.
  if constexpr (SW::TRANSPOSED && L::COL_BY_LANE && L::E % 4 == 0) {
    TILES_UNROLL for (int m = 0; m < dst.FM; ++m) TILES_UNROLL for (int n = 0; n < dst.FN; ++n)
      TILES_UNROLL for (int q = 0; q < dst.E / 4; ++q) {
        U x[4];
        src.template read_col_run<4>(0, r0 + m * L::FR + L::row(lane, 4 * q), n * L::FC + L::col(lane, 0), x);
        TILES_UNROLL for (int j = 0; j < 4; ++j) dst.v[m][n][4 * q + j] = convert<T>(x[j]);
      }
  } else {
    TILES_UNROLL for (int m = 0; m < dst.FM; ++m) TILES_UNROLL for (int n = 0; n < dst.FN; ++n)
      TILES_UNROLL for (int e = 0; e < dst.E; e += L::RUN) {
        U run[L::RUN];
        src.template read_run<L::RUN>(r0 + m * L::FR + L::row(lane, e), n * L::FC + L::col(lane, e), run);
        TILES_UNROLL for (int i = 0; i < L::RUN; ++i) dst.v[m][n][e + i] = convert<T>(run[i]);
      }
  }
}
template <class U, int SR, int C, class SW, class T, int R, class L>
TILES_DEV void store(const st<U, SR, C, SW>& dst, const rt<T, R, C, L>& src) {
  const int lane = arch::lane_id(), r0 = arch::wave_id() * R;
  TILES_UNROLL for (int m = 0; m < src.FM; ++m) TILES_UNROLL for (int n = 0; n < src.FN; ++n)
    TILES_UNROLL for (int e = 0; e < src.E; e += L::RUN) {
      U run[L::RUN];
      TILES_UNROLL for (int i = 0; i < L::RUN; ++i) {
        run[i] = convert<U>(src.v[m][n][e + i]);
        if constexpr (fnuz<U>::value)  // LDS holds no -0 of CDNA3's fp8 (types.hpp)
          if (__builtin_bit_cast(uint8_t, run[i]) == 0x80) run[i] = __builtin_bit_cast(U, (uint8_t)0);
      }
      const int r = r0 + m * L::FR + L::row(lane, e), c = n * L::FC + L::col(lane, e);
      if constexpr (st<U, SR, C, SW>::TR) TILES_UNROLL for (int i = 0; i < L::RUN; ++i) dst.at(r, c + i) = run[i];
      else dst.template write_run<L::RUN>(r, c, run);
    }
}
}  // namespace tiles_hip
