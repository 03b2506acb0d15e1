// tiles_cuda/memory.cuh: moving tiles between global, shared and registers.
//
// Global accesses are bounds-checked against the gl's runtime dims: loads read
// zeros past the end, stores skip elements past the end. Shared-tile loads are
// block-cooperative (every thread takes 16-byte chunks) and asynchronous on
// sm_80+ (cp.async with zero-fill); the caller places the barriers.
#pragma once
#include "types.cuh"

namespace tc {

// ---- cp.async (sm_80+) ----------------------------------------------------
// Copies 16 bytes, of which the first src_bytes come from global and the rest are zeros. Each PTX function here
// has a second body under TILES_EMU: the instruction's meaning on the CPU engine (cuda_emu.h).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
#if defined(TILES_EMU)
    cuda_emu::cp_async16(dst, src, src_bytes);
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(src_bytes));
#endif
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
#if defined(TILES_EMU)
    cuda_emu::cp_async16(dst, src, 16);
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
#endif
}
// The CPU engine copies at once (cp_async16): every group is complete when it is committed.
__device__ __forceinline__ void cp_async_commit() {
#if !defined(TILES_EMU)
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
#if !defined(TILES_EMU)
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// ---- global <-> shared: which 16-byte chunks a thread moves ---------------
// Chunk id = r * (C / E) + c / E, dealt out to the block's threads in turn. When the thread count is a
// multiple of the chunks per row (every tile the kernels use), a thread keeps one chunk column and steps
// down the rows: its global address advances by a fixed stride and the column's bounds are settled once,
// so each chunk costs a few instructions instead of a division and a fresh 64-bit address.
// sm_80 loads keep the one loop: attention backward sits at its register limit there, and the longer code
// tips it into spills.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr bool walk_columns_in_loads = false;
#else
constexpr bool walk_columns_in_loads = true;
#endif
// The unchecked whole-tile paths of atomic_add(rt) and load(rv, gl) below are sm_90+ only for the same reason:
// on sm_80 their second copy of the code took attention backward's spills from 60 to 96 bytes (D 128, offline).
constexpr bool unchecked_whole_tiles = walk_columns_in_loads;
template <typename T, int R, int C> struct chunk_walk {
    static constexpr int E = 16 / int(sizeof(T));  // elements per chunk
    static constexpr int per_row = C / E;
    static __device__ __forceinline__ bool column_wise() { return block_threads() % per_row == 0; }
    static __device__ __forceinline__ int col() { return (block_thread() % per_row) * E; }
    static __device__ __forceinline__ int first_row() { return block_thread() / per_row; }
    static __device__ __forceinline__ int row_step() { return block_threads() / per_row; }
};

// ---- global -> shared -----------------------------------------------------
// Bytes off to off + 16 of the 32 bytes lo, hi (off < 16): off / 4 whole words dropped in two selects, then the
// rest by a funnel shift.
__device__ __forceinline__ uint4 shift16(uint4 lo, uint4 hi, unsigned off) {
    const unsigned w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    unsigned v[6], u[5];
#pragma unroll
    for (int i = 0; i < 6; ++i) v[i] = off & 8u ? w[i + 2] : w[i];
#pragma unroll
    for (int i = 0; i < 5; ++i) u[i] = off & 4u ? v[i + 1] : v[i];
    const unsigned bits = (off & 3u) * 8u;
    return make_uint4(__funnelshift_r(u[0], u[1], bits), __funnelshift_r(u[1], u[2], bits),
                      __funnelshift_r(u[2], u[3], bits), __funnelshift_r(u[3], u[4], bits));
}
// 16 bytes at g, off 16-byte alignment (a row of 50257 bf16 starts anywhere on 2 bytes): the two aligned 16-byte
// words around them, read whole and shifted into place. Element by element, each 2-byte read was a round trip of
// its own (ptxas reused one register for them: softmax 4096x50257's apply pass stalled on every conversion,
// ncu 12-07). The second word is read only where the bytes reach into it: nothing past the aligned 16-byte unit
// that holds their last byte, which lies inside any device allocation (whole units of 256 bytes and more).
__device__ __forceinline__ uint4 read16_shifted(const void* g) {
    const unsigned long long a = reinterpret_cast<unsigned long long>(g);
    const unsigned off = unsigned(a) & 15u;
    const uint4* q = reinterpret_cast<const uint4*>(a - off);
    return shift16(q[0], q[off ? 1 : 0], off);
}
// A tile of a global aligned to its elements only (rows of 50257 bf16): no cp.async; each whole chunk read as
// the two aligned 16-byte words around it (read16_shifted), a batch of a thread's chunks read before any is
// written, synchronously. Element by element, each 2-byte read waited for before its write (softmax 4096x50257's
// first pass stalled on those writes, 63% of its samples; ncu 12-07).
template <typename T, int R, int C>
__device__ inline void load_shifted(st<T, R, C>& dst, const gl<T>& src, coord idx) {
    using walk = chunk_walk<T, R, C>;
    constexpr int E = walk::E, CHUNKS = R * walk::per_row, BATCH = 4;
    const int row0 = idx.r * R, col0 = idx.c * C, step = block_threads();
    const bool in_matrix = idx.b < src.batch() && idx.d < src.depth();
    for (int id0 = block_thread(); id0 < CHUNKS; id0 += BATCH * step) {
        uint4 v[BATCH];
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {
            const int id = id0 + b * step, gr = row0 + id / walk::per_row, gc = col0 + (id % walk::per_row) * E;
            const bool row_ok = id < CHUNKS && in_matrix && gr < src.rows();
            const T* g = row_ok ? src.row_ptr(idx.b, idx.d, gr) + gc : src.ptr;
            if (row_ok && gc + E <= src.cols()) {
                v[b] = read16_shifted(g);
            } else {   // the row's last chunk, past its end: element by element, zero past the end
                T* e = reinterpret_cast<T*>(&v[b]);
#pragma unroll
                for (int k = 0; k < E; ++k) e[k] = row_ok && gc + k < src.cols() ? g[k] : from_float<T>(0.f);
            }
        }
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {
            const int id = id0 + b * step;
            if (id < CHUNKS) *reinterpret_cast<uint4*>(&dst.at(id / walk::per_row, (id % walk::per_row) * E)) = v[b];
        }
    }
}

// Issues the copy of tile idx of src into dst and returns without waiting.
template <typename T, int R, int C>
__device__ inline void load_async(st<T, R, C>& dst, const gl<T>& src, coord idx) {
    using walk = chunk_walk<T, R, C>;
    constexpr int E = walk::E;
    const int row0 = idx.r * R, col0 = idx.c * C;
    const bool in_matrix = idx.b < src.batch() && idx.d < src.depth();
    const bool vec = src.vec_aligned();
    if (walk_columns_in_loads && vec && walk::column_wise()) {
        const int c = walk::col(), step = walk::row_step(), r0 = walk::first_row();
        // elements of this thread's chunks inside the row (the same for every row it visits)
        const int n = in_matrix ? imax(0, imin(E, src.cols() - (col0 + c))) : 0;
        const int rows = src.rows() - row0;
        const long long jump = step * src.strides[2];
        const T* g = src.row_ptr(in_matrix ? idx.b : 0, in_matrix ? idx.d : 0, row0 + r0) + col0 + c;
        if (n == E && rows >= R) {  // the whole tile inside the global: plain copies
#pragma unroll 1
            for (int r = r0; r < R; r += step, g += jump) cp_async16(&dst.at(r, c), g);
            return;
        }
        for (int r = r0; r < R; r += step, g += jump) {
            const bool ok = n > 0 && r < rows;
            // A fully masked chunk still needs a valid address: use the tensor's base.
            cp_async16(&dst.at(r, c), ok ? g : src.ptr, ok ? n * int(sizeof(T)) : 0);
        }
        return;
    }
    if (!vec) {
        load_shifted(dst, src, idx);
        return;
    }
    for (int id = block_thread(); id < R * walk::per_row; id += block_threads()) {
        const int r = id / walk::per_row, c = (id % walk::per_row) * E;
        const int gr = row0 + r, gc = col0 + c;
        const int n = in_matrix && gr < src.rows() ? imax(0, imin(E, src.cols() - gc)) : 0;
        const T* g = n > 0 ? src.row_ptr(idx.b, idx.d, gr) + gc : src.ptr;
        cp_async16(&dst.at(r, c), g, n * int(sizeof(T)));
    }
}

template <typename T, int R, int C>
__device__ inline void load(st<T, R, C>& dst, const gl<T>& src, coord idx) {
    load_async(dst, src, idx);
    cp_async_commit();
    cp_async_wait<0>();
}

// ---- shared -> global -----------------------------------------------------
template <typename T, int R, int C>
__device__ inline void store(const gl<T>& dst, const st<T, R, C>& src, coord idx) {
    using walk = chunk_walk<T, R, C>;
    constexpr int E = walk::E;
    const int row0 = idx.r * R, col0 = idx.c * C;
    if (idx.b >= dst.batch() || idx.d >= dst.depth()) return;
    const bool vec = dst.vec_aligned();
    if (vec && walk::column_wise() && col0 + C <= dst.cols()) {   // whole chunks in every row
        const int c = walk::col(), step = walk::row_step(), r0 = walk::first_row();
        const int rows = imin(R, dst.rows() - row0);
        const long long jump = step * dst.strides[2];
        T* g = dst.row_ptr(idx.b, idx.d, row0 + r0) + col0 + c;
#pragma unroll 1
        for (int r = r0; r < rows; r += step, g += jump)
            *reinterpret_cast<int4*>(g) = *reinterpret_cast<const int4*>(&src.at(r, c));
        return;
    }
    for (int id = block_thread(); id < R * walk::per_row; id += block_threads()) {
        const int r = id / walk::per_row, c = (id % walk::per_row) * E;
        const int gr = row0 + r, gc = col0 + c;
        if (gr >= dst.rows()) continue;
        T* g = dst.row_ptr(idx.b, idx.d, gr) + gc;
        const T* s = &src.at(r, c);
        if (vec && gc + E <= dst.cols())
            *reinterpret_cast<int4*>(g) = *reinterpret_cast<const int4*>(s);
        else
            for (int e = 0; e < E && gc + e < dst.cols(); ++e) g[e] = s[e];
    }
}

// ---- shared -> registers --------------------------------------------------
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
#if defined(TILES_EMU)
    cuda_emu::ldmatrix_x4(r, p, false);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
#if defined(TILES_EMU)
    cuda_emu::ldmatrix_x4(r, p, true);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
#endif
}

// Each warp reads its rows. 16-bit shared tiles use ldmatrix: lanes 0-15 point at
// rows 0-15 of the base tile's left 8 columns, lanes 16-31 at the right 8,
// which returns the four pairs in rt's order (converted when the rt's type differs).
template <typename T, typename U, int R, int C, int NW>
__device__ inline void load(rt<T, R, C, NW>& dst, const st<U, R, C>& src) {
    using tile = rt<T, R, C, NW>;
#pragma unroll
    for (int i = 0; i < tile::height; ++i)
#pragma unroll
        for (int j = 0; j < tile::width; ++j) {
            const int lr = warp_id() * tile::warp_rows + i * 16 + lane_id() % 16;
            const int lc = j * 16 + (lane_id() / 16) * 8;
            if constexpr (sizeof(T) == 2 && same<T, U>) {
                ldmatrix_x4(*reinterpret_cast<unsigned(*)[4]>(dst.d[i][j]), &src.at(lr, lc));
            } else if constexpr (sizeof(U) == 2) {  // the same read, converted in registers
                unsigned q[4];
                ldmatrix_x4(q, &src.at(lr, lc));
#pragma unroll
                for (int p = 0; p < 4; ++p) {
                    const pair<U> v = *reinterpret_cast<const pair<U>*>(&q[p]);
                    dst.d[i][j][p] = make_pair<T>(to_float(v.x), to_float(v.y));
                }
            } else {
#pragma unroll
                for (int p = 0; p < 4; ++p) {
                    const int r = tile::row_of(i, p), c = tile::col_of(j, p);
                    dst.d[i][j][p] = make_pair<T>(to_float(src.at(r, c)), to_float(src.at(r, c + 1)));
                }
            }
        }
}

// ---- registers -> shared --------------------------------------------------
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
constexpr bool has_stmatrix = true;
#else
constexpr bool has_stmatrix = false;
#endif
// The inverse of ldmatrix_x4 (sm_90+): lane l points at row l%8 of matrix l/8, register i is matrix i.
__device__ __forceinline__ void stmatrix_x4(void* p, const unsigned (&r)[4]) {
#if defined(TILES_EMU)
    cuda_emu::not_sm80("stmatrix");
#else
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(smem_addr(p)), "r"(r[0]),
                 "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
#endif
}

// Each warp writes its rows, converting to the tile's type; 16-bit tiles on sm_90 with stmatrix (the
// addressing of load(rt, st) above), elsewhere one 2-element store per pair (contiguous in shared memory:
// swizzling moves 16-byte chunks only). store_cols writes the DC columns of src from col0 (a multiple of 16,
// known once the caller's loop is unrolled) into a DC-column tile: the epilogue's panel by panel.
template <typename T, typename U, int R, int DC, int C, int NW>
__device__ inline void store_cols(st<T, R, DC>& dst, const rt<U, R, C, NW>& src, int col0) {
    using tile = rt<U, R, C, NW>;
#pragma unroll
    for (int i = 0; i < tile::height; ++i)
#pragma unroll
        for (int dj = 0; dj < DC / 16; ++dj) {
            const int j = col0 / 16 + dj;
            // the tile's own pairs when the types match, no round trip through float (sm_90: on sm_80 attention
            // backward's spills went from 60 to 80 bytes without it)
            pair<T> q[4];
#pragma unroll
            for (int p = 0; p < 4; ++p) {
                if constexpr (same<T, U> && has_stmatrix) q[p] = src.d[i][j][p];
                else q[p] = make_pair<T>(to_float(src.d[i][j][p].x), to_float(src.d[i][j][p].y));
            }
            if constexpr (has_stmatrix && sizeof(T) == 2) {
                const int r = warp_id() * tile::warp_rows + i * 16 + lane_id() % 16;
                const int c = dj * 16 + (lane_id() / 16) * 8;
                stmatrix_x4(&dst.at(r, c), {as_u32(q[0]), as_u32(q[1]), as_u32(q[2]), as_u32(q[3])});
            } else {
#pragma unroll
                for (int p = 0; p < 4; ++p)
                    *reinterpret_cast<pair<T>*>(&dst.at(tile::row_of(i, p), tile::col_of(j, p) - col0)) = q[p];
            }
        }
}
template <typename T, typename U, int R, int C, int NW>
__device__ inline void store(st<T, R, C>& dst, const rt<U, R, C, NW>& src) {
    store_cols(dst, src, 0);
}

// ---- global <-> registers -------------------------------------------------
// A lane's elements come in pairs of neighbouring columns. Where the whole tile lies inside the global and
// every row start keeps pair alignment, each pair moves as one 4-byte (16-bit types) or 8-byte (f32) access;
// the four lanes of a quad then cover 16 or 32 contiguous bytes, and a warp's next access (p ^ 2) the rest
// of the row's 32-byte sectors. Edge tiles and unaligned globals go element by element, bounds-checked.
//
// Where a lane's pair p of base tile j sits in its row: the MMA fragment's column (rt::col_of), or, for a tile
// in runs (option runs, below), runs_order's.
template <int C> struct fragment_order {
    __device__ static __forceinline__ int col_of(int j, int p) { return rt<float, 16, C, 1>::col_of(j, p); }
};
template <int C> struct runs_order {
    static constexpr int width = C / 16;
    static constexpr int E = 4 * width < 8 ? 4 * width : 8;   // elements a run
    static constexpr int runs = 4 * width / E;                // a lane's runs a row
    __device__ static __forceinline__ int col_of(int j, int p) {
        const int s = 2 * j + (p >> 1);
        return (lane_id() % 4 + 4 * (s / (E / 2))) * E + 2 * (s % (E / 2));
    }
};

template <typename U> __device__ __forceinline__ bool pairs_aligned(const gl<U>& g) {
    return reinterpret_cast<unsigned long long>(g.ptr) % sizeof(pair<U>) == 0 && g.strides[0] % 2 == 0 &&
           g.strides[1] % 2 == 0 && g.strides[2] % 2 == 0;
}
// The tile's columns lie inside the global, its rows perhaps not (a grid's last row block; a decode step's few
// rows in a 16-row tile)
template <typename U, int R, int C> __device__ __forceinline__ bool cols_inside(const gl<U>& g, coord idx) {
    return idx.b < g.batch() && idx.d < g.depth() && (idx.c + 1) * C <= g.cols();
}
// The tile lies inside the global (runs check this and their own B-byte alignment, which implies the pairs')
template <typename U, int R, int C> __device__ __forceinline__ bool inside(const gl<U>& g, coord idx) {
    return cols_inside<U, R, C>(g, idx) && (idx.r + 1) * R <= g.rows();
}
template <typename U, int R, int C> __device__ __forceinline__ bool whole_tile(const gl<U>& g, coord idx) {
    return inside<U, R, C>(g, idx) && pairs_aligned(g);
}

// Every element of a register tile from the global, zero past its end, in the column order O: the edge tiles'
// and unaligned globals' path.
template <typename O, typename T, typename U, int R, int C, int NW>
__device__ __forceinline__ void load_in_bounds(rt<T, R, C, NW>& dst, const gl<U>& src, coord idx) {
    using tile = rt<T, R, C, NW>;
    const bool in_matrix = idx.b < src.batch() && idx.d < src.depth();
    tile::each([&](int i, int j, int p) {
        const int r = idx.r * R + tile::row_of(i, p), c = idx.c * C + O::col_of(j, p);
        float x = 0.f, y = 0.f;
        if (in_matrix && r < src.rows()) {
            const U* g = src.row_ptr(idx.b, idx.d, r);
            if (c < src.cols()) x = to_float(g[c]);
            if (c + 1 < src.cols()) y = to_float(g[c + 1]);
        }
        dst.d[i][j][p] = make_pair<T>(x, y);
    });
}

template <typename T, typename U, int R, int C, int NW>
__device__ inline void load(rt<T, R, C, NW>& dst, const gl<U>& src, coord idx) {
    using tile = rt<T, R, C, NW>;
    if (whole_tile<U, R, C>(src, idx)) {
        tile::each([&](int i, int j, int p) {
            const U* g = src.row_ptr(idx.b, idx.d, idx.r * R + tile::row_of(i, p)) + idx.c * C;
            const pair<U> v = *reinterpret_cast<const pair<U>*>(g + tile::col_of(j, p));   // one access
            dst.d[i][j][p] = convert_pair<T>(v);
        });
        return;
    }
    load_in_bounds<fragment_order<C>>(dst, src, idx);
}

// Every element of a register tile that lands inside the global, as write(address, value), in the column order O.
template <typename O, typename T, typename U, int R, int C, int NW, typename W>
__device__ __forceinline__ void write_in_bounds(const gl<T>& dst, const rt<U, R, C, NW>& src, coord idx, W write) {
    using tile = rt<U, R, C, NW>;
    if (idx.b >= dst.batch() || idx.d >= dst.depth()) return;
    tile::each([&](int i, int j, int p) {
        const int r = idx.r * R + tile::row_of(i, p), c = idx.c * C + O::col_of(j, p);
        if (r >= dst.rows()) return;
        T* g = dst.row_ptr(idx.b, idx.d, r);
        const pair<float> v = to_floats(src.d[i][j][p]);
        if (c < dst.cols()) write(g + c, v.x);
        if (c + 1 < dst.cols()) write(g + c + 1, v.y);
    });
}

template <typename T, typename U, int R, int C, int NW>
__device__ inline void store(const gl<T>& dst, const rt<U, R, C, NW>& src, coord idx) {
    using tile = rt<U, R, C, NW>;
    if (whole_tile<T, R, C>(dst, idx)) {  // one access per pair, as in load(rt, gl) above
        tile::each([&](int i, int j, int p) {
            T* g = dst.row_ptr(idx.b, idx.d, idx.r * R + tile::row_of(i, p)) + idx.c * C;
            *reinterpret_cast<pair<T>*>(g + tile::col_of(j, p)) = convert_pair<T>(src.d[i][j][p]);
        });
        return;
    }
    write_in_bounds<fragment_order<C>>(dst, src, idx, [](T* g, float v) { *g = from_float<T>(v); });
}

// ---- global <-> registers in runs (option runs) -----------------------------------------------------
// A register tile whose column order no op of the kernel observes (tiles/column_order.py: elementwise ops, row and
// whole-tile reductions and row broadcasts with tiles of its own class, global loads and stores in this form) may
// hold a row's elements in any order its class shares. In this one a lane keeps rt's rows and holds its 4 x width
// elements of each as runs of E contiguous columns, the quad's four lanes on neighbouring runs: a bf16 run of 8
// is one 16-byte access straight between registers and global memory, where the fragment order takes four
// 4-byte ones or a trip through shared memory and ldmatrix. Pair p of base tile j is the lane's pair
// s = 2 j + p / 2 of its row: pair s % (E / 2) of its run s / (E / 2).
template <int B> struct access;   // a B-byte access as one integer type
template <> struct access<4> { using type = unsigned; };
template <> struct access<8> { using type = uint2; };
template <> struct access<16> { using type = uint4; };
// One run of E elements of U as its E / 2 pairs, moved in accesses of up to 16 bytes (B: each access's bytes, the
// alignment the global must keep for them)
template <typename U, int E> struct run {
    static constexpr int BYTES = E * int(sizeof(U)), B = BYTES < 16 ? BYTES : 16;
    using V = typename access<B>::type;
    V v[BYTES / B];
    __device__ __forceinline__ void read(const U* g) {
#pragma unroll
        for (int b = 0; b < BYTES / B; ++b) v[b] = reinterpret_cast<const V*>(g)[b];
    }
    // a run of whole 16-byte accesses from a global aligned to its elements only
    __device__ __forceinline__ void read_shifted(const U* g) {
#pragma unroll
        for (int b = 0; b < BYTES / B; ++b) v[b] = read16_shifted(reinterpret_cast<const char*>(g) + 16 * b);
    }
    // through __stwb (st.global.wb.v4) the run stays one 16-byte store; assigned, NVVM split each row's first run into
    // four 4-byte stores, which cost rmsnorm 4096x4096 17% (docs/backends/cuda.md)
    __device__ __forceinline__ void write(U* g) const {
#pragma unroll
        for (int b = 0; b < BYTES / B; ++b) __stwb(reinterpret_cast<V*>(g) + b, v[b]);
    }
    // element by element, to a global aligned to its elements only
    __device__ __forceinline__ void write_elements(U* g) const {
#pragma unroll
        for (int t = 0; t < E / 2; ++t) {
            g[2 * t] = (*this)[t].x;
            g[2 * t + 1] = (*this)[t].y;
        }
    }
    __device__ __forceinline__ pair<U>& operator[](int t) { return reinterpret_cast<pair<U>*>(v)[t]; }
    __device__ __forceinline__ const pair<U>& operator[](int t) const { return reinterpret_cast<const pair<U>*>(v)[t]; }
};
// f(pairs of run k of the lane's row h in base row i, its global address) over a tile inside the global; ROWS:
// over one whose columns lie inside (cols_inside), f then only for the rows inside
template <bool ROWS = false, typename U, int R, int C, int NW, typename F>
__device__ __forceinline__ void each_run(const gl<U>& g, coord idx, F f) {
    using tile = rt<float, R, C, NW>;
#pragma unroll
    for (int i = 0; i < tile::height; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {   // the lane's rows of the base tile: lane / 4 and lane / 4 + 8
            const int r = idx.r * R + tile::row_of(i, h);
            if (ROWS && r >= g.rows()) continue;
            U* row = g.row_ptr(idx.b, idx.d, r) + idx.c * C;
#pragma unroll
            for (int k = 0; k < runs_order<C>::runs; ++k)
                f(i, h, k, row + (lane_id() % 4 + 4 * k) * runs_order<C>::E);
        }
}
// A register tile in runs as the global holds it: the words of its runs, not yet converted (codegen's
// deferred loads). A load that converts makes the lane wait for its bytes right there, and its edge path's
// branch keeps ptxas from moving the next load's requests above that wait: each load then costs a memory
// latency of its own. Loaded into an rt_raw and converted by copy() after the next loads, they are in flight
// together. rt_raw's words, unlike rt's pairs of 16-bit elements, stay whole 32-bit registers where the
// whole-tile and edge paths meet, so the join needs none of the loaded bytes.
template <typename U, int R, int C, int NW> struct rt_raw {
    using dtype = U;
    using tile = rt<float, R, C, NW>;
    static constexpr int E = runs_order<C>::E;
    run<U, E> r[tile::height][2][runs_order<C>::runs];   // base row i, the lane's row h of it, run k
};
// The runs of a tile whose columns lie inside src (ROWS: each_run's), whole where src keeps their alignment, else
// (16-byte runs) as the aligned words around each, shifted
template <bool ROWS, typename U, int R, int C, int NW>
__device__ __forceinline__ bool read_runs(rt_raw<U, R, C, NW>& dst, const gl<U>& src, coord idx) {
    constexpr int E = runs_order<C>::E;
    if (src.template aligned<run<U, E>::B>()) {
        each_run<ROWS, U, R, C, NW>(src, idx, [&](int i, int h, int k, U* g) { dst.r[i][h][k].read(g); });
        return true;
    }
    if constexpr (run<U, E>::B == 16) {
        each_run<ROWS, U, R, C, NW>(src, idx, [&](int i, int h, int k, U* g) { dst.r[i][h][k].read_shifted(g); });
        return true;
    }
    return false;
}
// A tile whose columns lie inside src read a run at a time (read_runs), the rows past src's end as zeros, each
// behind one test of its row: element by element (the edge path), a decode step's one row of 128256 took a test
// and a 2-byte access an element in both passes of the split softmax (1x128256 45.4 us against 33.1 for 16 rows
// on the H100, 12-07). false, reading nothing, where the edge path must take it.
template <typename U, int R, int C, int NW>
__device__ __forceinline__ bool read_inside(rt_raw<U, R, C, NW>& dst, const gl<U>& src, coord idx) {
    if (!cols_inside<U, R, C>(src, idx)) return false;
    if ((idx.r + 1) * R <= src.rows()) return read_runs<false>(dst, src, idx);
    dst = {};
    return read_runs<true>(dst, src, idx);
}
template <typename U, int R, int C, int NW>
__device__ inline void load_runs(rt_raw<U, R, C, NW>& dst, const gl<U>& src, coord idx) {
    constexpr int E = runs_order<C>::E;
    if (read_inside(dst, src, idx)) return;
    using tile = rt<float, R, C, NW>;   // tiles past the columns' end, narrow unaligned runs: element by element
    const bool in_matrix = idx.b < src.batch() && idx.d < src.depth();
#pragma unroll
    for (int i = 0; i < tile::height; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = idx.r * R + tile::row_of(i, h);
            const U* g = in_matrix && r < src.rows() ? src.row_ptr(idx.b, idx.d, r) : nullptr;
#pragma unroll
            for (int k = 0; k < runs_order<C>::runs; ++k)
#pragma unroll
                for (int t = 0; t < E / 2; ++t) {
                    const int c = idx.c * C + (lane_id() % 4 + 4 * k) * E + 2 * t;
                    dst.r[i][h][k][t] = pair<U>{g && c < src.cols() ? g[c] : U(0.f),
                                                g && c + 1 < src.cols() ? g[c + 1] : U(0.f)};
                }
        }
}
template <typename T, typename U, int R, int C, int NW>
__device__ inline void copy(rt<T, R, C, NW>& dst, const rt_raw<U, R, C, NW>& src) {
    constexpr int E = runs_order<C>::E;
#pragma unroll
    for (int i = 0; i < rt<T, R, C, NW>::height; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int k = 0; k < runs_order<C>::runs; ++k)
#pragma unroll
                for (int t = 0; t < E / 2; ++t) {
                    const int s = k * (E / 2) + t;
                    const pair<U>& v = src.r[i][h][k][t];
                    pair<T>& d = dst.d[i][s / 2][2 * (s % 2) + h];
                    if constexpr (same<T, U>) {
                        d = v;
                    } else {   // whole words (to_floats), which convert_pair's element-wise form is not
                        const pair<float> f = to_floats(v);
                        d = make_pair<T>(f.x, f.y);
                    }
                }
}
template <typename T, typename U, int R, int C, int NW>
__device__ inline void load_runs(rt<T, R, C, NW>& dst, const gl<U>& src, coord idx) {
    rt_raw<U, R, C, NW> raw;
    if constexpr (sizeof(T) == 2) {   // 16-bit elements: the paths meet on whole words, converted after the join
        load_runs(raw, src, idx);
        copy(dst, raw);
    } else if (read_inside(raw, src, idx)) {   // converted at once
        copy(dst, raw);
    } else {
        load_in_bounds<runs_order<C>>(dst, src, idx);
    }
}
// The S bytes of the 16-byte word a at byte p (a multiple of S) to g + p.
template <int S> __device__ __forceinline__ void write_piece(char* g, uint4 a, unsigned p) {
    const unsigned lo = p & 4u ? a.y : a.x, hi = p & 4u ? a.w : a.z, w = p & 8u ? hi : lo;
    if constexpr (S == 8) *reinterpret_cast<uint2*>(g + p) = p & 8u ? make_uint2(a.z, a.w) : make_uint2(a.x, a.y);
    if constexpr (S == 4) *reinterpret_cast<unsigned*>(g + p) = w;
    if constexpr (S == 2) *reinterpret_cast<unsigned short*>(g + p) = (unsigned short)(w >> ((p & 2u) * 8u));
    if constexpr (S == 1) *reinterpret_cast<unsigned char*>(g + p) = (unsigned char)(w >> ((p & 3u) * 8u));
}
// Bytes [off, 16) of a to the aligned 16 bytes at g (off > 0, a multiple of E): the widest aligned stores, rising.
template <int E> __device__ __forceinline__ void write_suffix(char* g, uint4 a, unsigned off) {
    unsigned p = off;
    if constexpr (E <= 1) if (p & 1u) { write_piece<1>(g, a, p); p += 1; }
    if constexpr (E <= 2) if (p & 2u) { write_piece<2>(g, a, p); p += 2; }
    if constexpr (E <= 4) if (p & 4u) { write_piece<4>(g, a, p); p += 4; }
    if (p & 8u) write_piece<8>(g, a, p);
}
// Bytes [0, off) of a to the aligned 16 bytes at g (off a multiple of E): the widest aligned stores, falling.
template <int E> __device__ __forceinline__ void write_prefix(char* g, uint4 a, unsigned off) {
    unsigned p = 0;
    if (off & 8u) { write_piece<8>(g, a, p); p += 8; }
    if constexpr (E <= 4) if (off & 4u) { write_piece<4>(g, a, p); p += 4; }
    if constexpr (E <= 2) if (off & 2u) { write_piece<2>(g, a, p); p += 2; }
    if constexpr (E <= 1) if (off & 1u) write_piece<1>(g, a, p);
}
// The 16-byte runs run_of(i, h, k) of a tile whose columns lie inside dst, a global aligned to its elements only
// (ROWS: only the rows inside), as aligned 16-byte stores: the aligned word that holds a run word's first byte takes
// the word before it (the run's own, or the last of the run before, from the quad's neighbour lane) shifted in.
// A row's first and last bytes share their aligned words with the columns outside: up to three stores each, the
// widest that fit (a row that happens to start on 16 bytes: its words as they are). A 2-byte store a lane an
// element left each 64 bytes of a warp's store in 8 rows' sectors: softmax 4096x50257's apply pass 1.77 -> 0.56 ms
// (H100, 12-07 15:52). Every lane shuffles, whether its row is inside or not.
template <bool ROWS, typename T, int R, int C, int NW, typename F>
__device__ __forceinline__ void write_shifted(const gl<T>& dst, coord idx, F run_of) {
    using tile = rt<float, R, C, NW>;
    using order = runs_order<C>;
    constexpr int W = run<T, order::E>::BYTES / 16, N = 16 / int(sizeof(T));   // words a run, elements a word
    const int q = lane_id() % 4, from = q == 0 ? lane_id() + 3 : lane_id() - 1;   // from: the run before's lane
#pragma unroll
    for (int i = 0; i < tile::height; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = idx.r * R + tile::row_of(i, h);
            const bool in = !ROWS || r < dst.rows();
            T* row = (in ? dst.row_ptr(idx.b, idx.d, r) : dst.ptr) + idx.c * C;
            const unsigned off = unsigned(reinterpret_cast<unsigned long long>(row)) & 15u;
            uint4 last{};   // this lane's run k - 1's last word
#pragma unroll
            for (int k = 0; k < order::runs; ++k) {
                const run<T, order::E> cur = run_of(i, h, k);
                const uint4 send = q == 3 ? last : cur.v[W - 1];   // lane q = 0 takes run k - 1 of lane q = 3
                const uint4 prev = make_uint4(__shfl_sync(~0u, send.x, from), __shfl_sync(~0u, send.y, from),
                                              __shfl_sync(~0u, send.z, from), __shfl_sync(~0u, send.w, from));
                last = cur.v[W - 1];
                char* g = reinterpret_cast<char*>(row + (q + 4 * k) * order::E) - off;   // the run's aligned word
                if (!in) continue;
#pragma unroll
                for (int b = 0; b < W; ++b) {
                    const uint4 a = off ? shift16(b ? cur.v[b - 1] : prev, cur.v[b], 16u - off) : cur.v[b];
                    if (k == 0 && q == 0 && b == 0 && off)   // the row's first word: columns before it share it
                        write_suffix<sizeof(T)>(g, a, off);
                    else
                        __stwb(reinterpret_cast<uint4*>(g + 16 * b), a);
                }
                if (k == order::runs - 1 && q == 3 && off)   // the row's last bytes, in the aligned word after its last
                    write_prefix<sizeof(T)>(g + 16 * W, shift16(cur.v[W - 1], cur.v[W - 1], 16u - off), off);
            }
        }
}
// The runs run_of(i, h, k) of a tile whose columns lie inside dst (ROWS: each_run's): whole, or where dst is aligned to
// its elements only as aligned words (16-byte runs: write_shifted), else a run's elements one by one, untested (each
// behind its own bounds test and branch, they were softmax 4096x50257's apply pass's stalls; ncu 12-07)
template <bool ROWS, typename T, int R, int C, int NW, typename F>
__device__ __forceinline__ void write_runs(const gl<T>& dst, coord idx, F run_of) {
    using order = runs_order<C>;
    if (dst.template aligned<run<T, order::E>::B>()) {
        each_run<ROWS, T, R, C, NW>(dst, idx, [&](int i, int h, int k, T* g) { run_of(i, h, k).write(g); });
    } else if constexpr (run<T, order::E>::B == 16) {
        write_shifted<ROWS, T, R, C, NW>(dst, idx, run_of);
    } else {
        each_run<ROWS, T, R, C, NW>(dst, idx, [&](int i, int h, int k, T* g) { run_of(i, h, k).write_elements(g); });
    }
}
template <typename T, typename U, int R, int C, int NW>
__device__ inline void store_runs(const gl<T>& dst, const rt<U, R, C, NW>& src, coord idx) {
    constexpr int E = runs_order<C>::E;
    const auto run_of = [&](int i, int h, int k) {   // the lane's run k of its row h in base row i, in T
        run<T, E> r;
#pragma unroll
        for (int t = 0; t < E / 2; ++t) {
            const int s = k * (E / 2) + t;
            r[t] = convert_pair<T>(src.d[i][s / 2][2 * (s % 2) + h]);
        }
        return r;
    };
    if (inside<T, R, C>(dst, idx)) {
        write_runs<false, T, R, C, NW>(dst, idx, run_of);
    } else if (cols_inside<T, R, C>(dst, idx)) {
        write_runs<true, T, R, C, NW>(dst, idx, run_of);
    } else {
        write_in_bounds<runs_order<C>>(dst, src, idx, [](T* g, float v) { *g = from_float<T>(v); });
    }
}

// A column vector that meets tiles in runs (through column broadcasts only) holds their columns in their order:
// element (o, k) is column col_of(o, 2 (k / 2)) + k % 2 of runs_order, which is what with_col's (j, p) pairs with,
// and the lane's values come as the same runs of E contiguous columns, one access each.
template <typename T, typename U, int N, int NW>
__device__ inline void load_runs(rv<T, N, axis::cols, NW>& dst, const gl<U>& src, coord idx) {
    using order = runs_order<N>;
    constexpr int E = order::E;
    const bool row_ok = idx.b < src.batch() && idx.d < src.depth() && idx.r < src.rows();
    const U* g = row_ok ? src.row_ptr(idx.b, idx.d, idx.r) + idx.c * N : src.ptr;
    // one row: its own address, not the global's row stride, says whether its runs are aligned
    if (row_ok && (idx.c + 1) * N <= src.cols() && reinterpret_cast<unsigned long long>(g) % run<U, E>::B == 0) {
#pragma unroll
        for (int k = 0; k < order::runs; ++k) {
            run<U, E> r;
            r.read(g + (lane_id() % 4 + 4 * k) * E);
#pragma unroll
            for (int t = 0; t < E / 2; ++t) {
                const int s = k * (E / 2) + t;
                dst.d[s / 2][2 * (s % 2)] = from_float<T>(to_float(r[t].x));
                dst.d[s / 2][2 * (s % 2) + 1] = from_float<T>(to_float(r[t].y));
            }
        }
        return;
    }
#pragma unroll
    for (int o = 0; o < N / 16; ++o)
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int c = order::col_of(o, 2 * (k / 2)) + k % 2;
            dst.d[o][k] = from_float<T>(row_ok && idx.c * N + c < src.cols() ? to_float(g[c]) : 0.f);
        }
}

// Two adjacent f32 added into global memory by one vector reduction (sm_90: red.global.add.v2.f32, half the
// L2 atomic requests of two scalar ones); g 8-byte aligned.
__device__ __forceinline__ void red_add2(float* g, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(g), "f"(x), "f"(y) : "memory");
#else
    atomicAdd(g, x);
    atomicAdd(g + 1, y);
#endif
}

// f32 accumulation into global memory: several blocks may add into one tile. A whole tile inside the global
// takes one test, then every pair goes at a constant offset from the thread's first pair (one row stride per
// 8 rows): a vector reduction each, no per-element checks. Edge tiles go element by element.
template <int R, int C, int NW>
__device__ inline void atomic_add(const gl<float>& dst, const rt<float, R, C, NW>& src, coord idx) {
    using tile = rt<float, R, C, NW>;
    if (unchecked_whole_tiles && whole_tile<float, R, C>(dst, idx)) {
        float* g = dst.row_ptr(idx.b, idx.d, idx.r * R + tile::row_of(0, 0)) + idx.c * C + tile::col_of(0, 0);
        const long long row8 = 8 * dst.strides[2];
        tile::each([&](int i, int j, int p) {
            red_add2(g + (2 * i + (p & 1)) * row8 + j * 16 + 8 * (p >> 1), src.d[i][j][p].x,
                     src.d[i][j][p].y);
        });
        return;
    }
    write_in_bounds<fragment_order<C>>(dst, src, idx, [](float* g, float v) { atomicAdd(g, v); });
}

// ---- a sum split over blocks (tl.store_sum) --------------------------------
// What another block wrote (a float or a float2), read from L2 (ld.global.cg), where its writes are, not from a
// line of this SM's L1.
template <typename V> __device__ __forceinline__ V load_l2(const V* g) {
#if defined(TILES_EMU)
    return *g;
#else
    return __ldcg(g);
#endif
}

// store_sum's last block: dst's tile idx <- the sum of the COUNT parts in parts' slices from first.d on, CHUNK of
// the thread's pairs at a time: the chunk's loads, every part's, are in flight together (one L2 round trip a
// chunk; pair by pair, one a pair cost a split of K 1.7x cuBLAS's time, docs/benchmarks.md 12-06), and its sums
// are stored before the next chunk's loads, which holds them to 64 registers whatever the tile (a whole 128x256
// tile's parts spilled on sm_90a and sm_80). WHOLE: the tile lies inside dst and parts (8-byte loads and stores).
// An edge tile's loads are unconditional too, each from its element's address clamped into parts (a value from
// outside is then dropped): a load behind a branch of its own was waited for before the next one's, one L2 round
// trip per element and part (SASS, sm_90a; a split of K 1.6x slower on the H200, docs/benchmarks.md 12-06).
template <bool WHOLE, int COUNT, typename T, int R, int C, int NW>
__device__ inline void add_parts(const gl<T>& dst, coord idx, const gl<float>& parts, coord first) {
    using tile = rt<float, R, C, NW>;
    constexpr int PAIRS = tile::height * tile::width * 4, CHUNK = 32 / COUNT > 0 ? 32 / COUNT : 1;
    const long long slice = parts.strides[1];
    const int last_r = parts.rows() - 1, last_c = parts.cols() - 1;
    const auto place = [&](int k, int& r, int& c) {   // pair k = (i * width + j) * 4 + p: its row and column
        const int i = k / (4 * tile::width), j = k / 4 % tile::width, p = k % 4;
        r = idx.r * R + tile::row_of(i, p);
        c = idx.c * C + tile::col_of(j, p);
    };
#pragma unroll
    for (int k0 = 0; k0 < PAIRS; k0 += CHUNK) {
        pair<float> sum[CHUNK];
#pragma unroll
        for (int k = 0; k < CHUNK && k0 + k < PAIRS; ++k) {
            int r, c;
            place(k0 + k, r, c);
            const float* g = parts.row_ptr(first.b, first.d, WHOLE ? r : imin(r, last_r));
            const int x = WHOLE ? c : imin(c, last_c), y = WHOLE ? c + 1 : imin(c + 1, last_c);
#pragma unroll
            for (int q = 0; q < COUNT; ++q) {
                const float* h = g + q * slice;
                const float2 w = WHOLE ? load_l2(reinterpret_cast<const float2*>(h + c))
                                       : float2{load_l2(h + x), load_l2(h + y)};
                const pair<float> v = {w.x, w.y};
                sum[k] = q == 0 ? v : pair<float>{sum[k].x + v.x, sum[k].y + v.y};
            }
        }
#pragma unroll
        for (int k = 0; k < CHUNK && k0 + k < PAIRS; ++k) {
            int r, c;
            place(k0 + k, r, c);
            T* out = dst.row_ptr(idx.b, idx.d, r) + c;
            if (WHOLE) {
                *reinterpret_cast<pair<T>*>(out) = make_pair<T>(sum[k].x, sum[k].y);
            } else if (r < dst.rows()) {
                if (c < dst.cols()) out[0] = from_float<T>(sum[k].x);
                if (c + 1 < dst.cols()) out[1] = from_float<T>(sum[k].y);
            }
        }
    }
}

// dst's tile idx <- the sum of the COUNT f32 tiles that as many blocks pass for it, each as its `part`. Each
// block writes its own to its slice of parts (depth idx.d * COUNT + part); the block that the tile's counter in
// arrivals counts last reads every slice back, its own too (src is then dead: its registers are free for the
// loads), adds them in part order, so the sum does not depend on which block came last, stores it and sets the
// counter back to zero for the next launch. The fences: a block's writes are visible device-wide before it is
// counted, and the last reads the others' after.
template <int COUNT, typename T, int R, int C, int NW>
__device__ inline void store_sum(const gl<T>& dst, const rt<float, R, C, NW>& src, coord idx, const gl<float>& parts,
                                 const gl<int>& arrivals, int part) {
    if (idx.b >= dst.batch() || idx.d >= dst.depth() || idx.r * R >= dst.rows() || idx.c * C >= dst.cols())
        return;   // no tile of dst (the same for the whole block): nothing to count
    const coord first = {idx.b, idx.d * COUNT, idx.r, idx.c};   // part 0's slice
    store(parts, src, {first.b, first.d + part, first.r, first.c});
    __threadfence();
    sync();
    __shared__ int last;
    if (threadIdx.x == 0) {
        int* n = arrivals.row_ptr(idx.b, idx.d, idx.r) + idx.c;
        last = atomicAdd(n, 1) == COUNT - 1;
        if (last) *n = 0;   // every part has arrived: nothing else counts this tile in this launch
    }
    sync();
    if (!last) return;
    __threadfence();
    if (whole_tile<T, R, C>(dst, idx) && whole_tile<float, R, C>(parts, first))
        add_parts<true, COUNT, T, R, C, NW>(dst, idx, parts, first);
    else
        add_parts<false, COUNT, T, R, C, NW>(dst, idx, parts, first);
}

// ---- global <-> register vectors ------------------------------------------
// A vector lies along the global's last dim: idx.c counts vectors, (b, d, r) pick the row.
// A whole vector inside the row loads without per-element checks, at constant offsets from the lane's first
// element; a column vector's lane holds pairs of neighbours (k = 0, 1 and 2, 3): one access each, which needs
// pair alignment (else the checked path).
template <typename T, typename U, int N, axis A, int NW>
__device__ inline void load(rv<T, N, A, NW>& dst, const gl<U>& src, coord idx) {
    using vec = rv<T, N, A, NW>;
    const bool row_ok = idx.b < src.batch() && idx.d < src.depth() && idx.r < src.rows();
    const U* g = row_ok ? src.row_ptr(idx.b, idx.d, idx.r) : src.ptr;
    if (unchecked_whole_tiles && row_ok && (idx.c + 1) * N <= src.cols() &&
        (A == axis::rows || pairs_aligned(src))) {
        const U* g0 = g + idx.c * N + vec::index_of(0, 0);
#pragma unroll
        for (int o = 0; o < vec::outer; ++o)
#pragma unroll
            for (int k = 0; k < vec::inner; ++k) {
                if constexpr (A == axis::cols) {
                    if (k % 2) continue;
                    const pair<U> v = *reinterpret_cast<const pair<U>*>(g0 + vec::offset_of(o, k));
                    dst.d[o][k] = from_float<T>(to_float(v.x));
                    dst.d[o][k + 1] = from_float<T>(to_float(v.y));
                } else {
                    dst.d[o][k] = from_float<T>(to_float(g0[vec::offset_of(o, k)]));
                }
            }
        return;
    }
#pragma unroll
    for (int o = 0; o < vec::outer; ++o)
#pragma unroll
        for (int k = 0; k < vec::inner; ++k) {
            const int c = idx.c * N + vec::index_of(o, k);
            dst.d[o][k] = from_float<T>(row_ok && c < src.cols() ? to_float(g[c]) : 0.f);
        }
}

template <typename T, typename U, int N, axis A, int NW>
__device__ inline void store(const gl<T>& dst, const rv<U, N, A, NW>& src, coord idx) {
    using vec = rv<U, N, A, NW>;
    if (idx.b >= dst.batch() || idx.d >= dst.depth() || idx.r >= dst.rows()) return;
    // One writer per element: the first lane of each quad (rows), lanes 0-3 of warp 0 (cols).
    const bool writer = A == axis::rows ? lane_id() % 4 == 0 : (warp_id() == 0 && lane_id() < 4);
    if (!writer) return;
    T* g = dst.row_ptr(idx.b, idx.d, idx.r);
#pragma unroll
    for (int o = 0; o < vec::outer; ++o)
#pragma unroll
        for (int k = 0; k < vec::inner; ++k) {
            const int c = idx.c * N + vec::index_of(o, k);
            if (c < dst.cols()) g[c] = from_float<T>(to_float(src.d[o][k]));
        }
}

// ---- shared vectors ---------------------------------------------------------
// Global <-> shared by the whole block, element by element (vectors are short).
template <typename T, int N>
__device__ inline void load(sv<T, N>& dst, const gl<T>& src, coord idx) {
    const bool row_ok = idx.b < src.batch() && idx.d < src.depth() && idx.r < src.rows();
    const T* g = row_ok ? src.row_ptr(idx.b, idx.d, idx.r) : src.ptr;
    for (int i = block_thread(); i < N; i += block_threads()) {
        const int c = idx.c * N + i;
        dst.data[i] = row_ok && c < src.cols() ? g[c] : from_float<T>(0.f);
    }
}
template <typename T, int N>
__device__ inline void store(const gl<T>& dst, const sv<T, N>& src, coord idx) {
    if (idx.b >= dst.batch() || idx.d >= dst.depth() || idx.r >= dst.rows()) return;
    T* g = dst.row_ptr(idx.b, idx.d, idx.r);
    for (int i = block_thread(); i < N && idx.c * N + i < dst.cols(); i += block_threads()) g[idx.c * N + i] = src.data[i];
}
// Shared <-> register vectors: each lane reads the elements it holds; one writer per element stores.
template <typename T, typename U, int N, axis A, int NW>
__device__ inline void load(rv<T, N, A, NW>& dst, const sv<U, N>& src) {
    using vec = rv<T, N, A, NW>;
#pragma unroll
    for (int o = 0; o < vec::outer; ++o)
#pragma unroll
        for (int k = 0; k < vec::inner; ++k) dst.d[o][k] = from_float<T>(to_float(src.data[vec::index_of(o, k)]));
}
template <typename T, typename U, int N, axis A, int NW>
__device__ inline void store(sv<T, N>& dst, const rv<U, N, A, NW>& src) {
    using vec = rv<U, N, A, NW>;
    const bool writer = A == axis::rows ? lane_id() % 4 == 0 : (warp_id() == 0 && lane_id() < 4);
    if (!writer) return;
#pragma unroll
    for (int o = 0; o < vec::outer; ++o)
#pragma unroll
        for (int k = 0; k < vec::inner; ++k) dst.data[vec::index_of(o, k)] = from_float<T>(to_float(src.d[o][k]));
}

}  // namespace tc
