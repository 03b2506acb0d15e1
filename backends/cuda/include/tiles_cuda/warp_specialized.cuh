// tiles_cuda/warp_specialized.cuh: the sm_90a warp-specialized schedule of a generated kernel.
//
// The block is NUM_WARPS consumer warps (whole warpgroups; they own the register tiles and run every
// block-level op, the loop body included, with mma on wgmma) followed by one producer warpgroup, whose
// first thread issues the pipelined loop's global->shared loads as TMA into a ring of STAGES slots
// (sm90/pipeline.cuh: a full mbarrier per slot completes when the bytes land, an empty one when every
// consumer warp is done reading). The source defines TILES_CUDA_CONSUMER_THREADS before including the library,
// so block barriers and block-wide loops cover the consumers only (base.cuh). The producer warpgroup goes last
// so that consumer warp w is warp w of the block, as the register tiles' row split expects.
#pragma once
#include "mma_block.cuh"
#include "pipeline.cuh"
#include "sm90/pipeline.cuh"
#include "sm90/tma.cuh"

namespace tc {

using tma_map = tiles::sm90::tensor_map;   // a CUtensorMap built by the runtime, one per pipelined tile
using tiles::sm90::mbarrier;
template <int STAGES> using stage_ring = tiles::sm90::stage_ring<STAGES>;
template <int STAGES> using stage_cursor = tiles::sm90::stage_cursor<STAGES>;   // slot and phase in the ring

#ifdef TILES_CUDA_CONSUMER_THREADS
__device__ __forceinline__ bool is_producer() { return threadIdx.x >= TILES_CUDA_CONSUMER_THREADS; }
// The one producer thread that issues the copies; the rest of its warpgroup has nothing to do.
__device__ __forceinline__ bool is_producer_leader() { return threadIdx.x == TILES_CUDA_CONSUMER_THREADS; }
#endif

// The persistent epilogue's store of a consumer register tile, through BUFS staging tiles of one 128-byte swizzle
// panel each: each warpgroup writes its 64 rows of a panel into the next staging tile (waiting first until the
// copy that last read it is done) and one of its threads hands them to TMA; TMA writes only what lies inside the
// global. Where a staging tile holds each of the tile's panels, the panels go in one round (one wait, two
// barriers, one bulk group a tile); where fewer fit beside the pipeline's stages (two for a 128x256 tile: 32 KB,
// where the whole tile's 64 KB would cost a stage), panel by panel, the next one written while the last is
// copied. The warpgroup goes on to the next tile's main loop while the copies run. Named barriers 2 + warpgroup
// (1 is the consumers' block barrier); with consumer groups (each one warpgroup, its own tiles and staging
// tiles) 2 + group.
template <int BUFS, typename T, int R, int PC, int C, int NW>
__device__ inline void store_tma(const tma_map* map, st<T, R, PC>* staging, const rt<float, R, C, NW>& src,
                                 coord idx) {
    using S = st<T, R, PC>;
    constexpr int panels = C / PC, step = BUFS == panels ? panels : 1;   // panels a round
    static_assert(R == 16 * NW && S::swizzle_bytes == 128 && PC == S::panel_cols && panels % BUFS == 0,
                  "a warpgroup stores 64 rows of whole 128-byte panels, its staging tiles taken in turn");
    const int group = warp_id() / 4, bar = 2 + group + consumer_group();
    const bool leader = threadIdx.x % 128 == 0;
#pragma unroll
    for (int p = 0; p < panels; p += step) {
        if (leader) tiles::sm90::tma_store_wait_read<BUFS / step - 1>();   // the round that last read them
        tiles::sm90::named_sync(bar, 128);
        if constexpr (step == panels) store(*reinterpret_cast<st<T, R, C>*>(staging), src);   // the tiles in order
        else store_cols(staging[p % BUFS], src, p * PC);                                     // are the whole tile
        tiles::sm90::fence_async_shared();
        tiles::sm90::named_sync(bar, 128);
        if (leader) {
#pragma unroll
            for (int q = p; q < p + step; ++q)
                tiles::sm90::tma_store(map, reinterpret_cast<const char*>(staging) + ((q % BUFS) * R + 64 * group) * 128,
                                       idx.c * C + q * PC, idx.r * R + 64 * group, idx.d, idx.b);
            tiles::sm90::tma_store_commit();
        }
    }
}
// f32 accumulation of an rt_cols into global memory through TMA: each warp writes its 16 rows of its
// warpgroup's columns into one of BUFS staging tiles in turn (128-byte swizzled, 32-column panels; waiting first
// until its reduce-adds of BUFS calls ago have read that tile) and its first lane hands each of its panels to TMA
// as one reduce-add of 16 rows (cp.reduce.async.bulk.tensor .add: per element atomic in L2, only the part
// inside the global). Per warp, so that no warp waits for the others of its warpgroup: a step issues a
// thread's pairs as 8-byte shared stores (part_cols / 4 of them: 16 at C = 128 over two warpgroups) and one TMA
// instruction per panel, where atomic_add(gl, rt_cols) issues as many vector reductions a thread, each its own
// request to L2. A warp's 16 rows of a panel are 2 KB at a 1024-byte aligned offset: the swizzle TMA reads
// there is the whole tile's.
template <int BUFS, int C, int NW>
__device__ inline void atomic_add_tma(const tma_map* map, st<float, 64, C>* staging, int& turn,
                                      const rt_cols<float, 64, C, NW>& src, coord idx) {
    using D = rt_cols<float, 64, C, NW>;
    using S = st<float, 64, C>;
    static_assert(S::swizzle_bytes == 128 && D::part_cols % S::panel_cols == 0,
                  "each warpgroup reduces whole 128-byte panels");
    const int row0 = (warp_id() % 4) * 16;
    const bool leader = lane_id() == 0;
    S& tile = staging[turn];
    turn = turn + 1 == BUFS ? 0 : turn + 1;
    if (leader) tiles::sm90::tma_store_wait_read<BUFS - 1>();
    __syncwarp();
    // The swizzle XORs a pair's 16-byte chunk with its row % 8, the same for rows g and g + 8: four addresses
    // (odd or even 16-column base tile j, left or right 8 columns) and constant offsets from them (one row of 8
    // rows, one panel of two base tiles) reach every pair.
    char* base[2][2];
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            base[j][h] = reinterpret_cast<char*>(&tile.at(D::row_of(0), D::col_of(j, 2 * h)));
#pragma unroll
    for (int j = 0; j < D::part_t::width; ++j)
#pragma unroll
        for (int p = 0; p < 4; ++p)
            *reinterpret_cast<pair<float>*>(base[j % 2][p >> 1] + (j / 2) * 64 * 128 + (p & 1) * 8 * 128) =
                src.part.d[0][j][p];
    tiles::sm90::fence_async_shared();
    __syncwarp();
    if (leader) {
        constexpr int panels = D::part_cols / S::panel_cols;
#pragma unroll
        for (int p = 0; p < panels; ++p) {
            const int panel = D::group() * panels + p;
            tiles::sm90::tma_reduce_add(map, reinterpret_cast<const char*>(tile.data) + (panel * 64 + row0) * 128,
                                        idx.c * C + panel * S::panel_cols, idx.r * 64 + row0, idx.d, idx.b);
        }
        tiles::sm90::tma_store_commit();
    }
}

// Before the block exits: its stores and reduce-adds have read the staging tiles (shared memory goes with the
// block). The first lane of each warp: it issued them (store_tma from a warpgroup's first, atomic_add_tma from
// every warp's).
__device__ __forceinline__ void store_tma_wait() {
    if (lane_id() == 0) tiles::sm90::tma_store_wait_read();
}

// The tile a persistent block takes in round `round` of its walk: the blocks in order on even rounds, in reverse
// on odd ones. Each round covers the same run of tiles either way (what shares L2 stays together); where the work
// per tile falls along the walk (causal attention: each head's longest query block first), a block that took a
// long tile in one round takes a short one in the next. A plain stride leaves block b the tiles b, b + grid, ...,
// which for 16 query blocks a head on 132 SMs gives some blocks 16+12+8+4 key blocks every 4 rounds and others
// 13+9+5+1: the longest block's share 1.21x the mean at 8x16x2048 causal, 1.03x with the reversal.
// With clusters of CLUSTER blocks (option cluster), the cluster's tile of the walk over the grid's clusters of tiles.
template <int CLUSTER = 1> __device__ __forceinline__ int persistent_tile(int round) {
    const int walkers = gridDim.x / CLUSTER, walker = blockIdx.x / CLUSTER;
    return round * walkers + (round & 1 ? walkers - 1 - walker : walker);
}

// Clusters (option cluster): CLUSTER blocks on neighbouring SMs take tiles that share an operand (a GEMM's B tile,
// for rows of tiles next to each other) and each loads 1/CLUSTER of that tile's swizzle panels, multicast into
// every block of the cluster, so that the operand crosses from L2 once for all of them (cuBLAS's 1x2 clusters;
// the hand GEMM's, sm90/hand/gemm.cuh). A slot is then written by every block's producer, so it may be refilled
// only once every block's consumers are done with it: the ring's empty barriers count every consumer warp of the
// cluster (free_stage), and each full barrier announces the whole tile's bytes, its share landing from each block.
__device__ __forceinline__ int cluster_rank() { return int(tiles::sm90::cluster_rank()); }
// Every thread of every block of the cluster: after the rings' init (no block multicasts into a peer's slots or
// arrives on its barriers before they exist) and before the exit (nor after the peer has gone).
__device__ __forceinline__ void cluster_sync() { tiles::sm90::cluster_sync(); }

// Producer (its leader thread): panels [p0, p0 + n) of st tile `idx`, from row r0 of each on, into the same slot
// of every block of the cluster, each completing on that block's `full` (the map's box: the rows each block loads).
template <int CLUSTER, typename T, int R, int C>
__device__ __forceinline__ void multicast_panels(st<T, R, C>& dst, const tma_map* map, mbarrier& full, coord idx,
                                                 int p0, int n, int r0) {
    using S = st<T, R, C>;
#pragma unroll
    for (int p = p0; p < p0 + n; ++p)
        tiles::sm90::tma_load_multicast(
            reinterpret_cast<char*>(dst.data) + (p * R + r0) * S::panel_cols * int(sizeof(T)), map, full,
            (1 << CLUSTER) - 1, idx.c * C + p * S::panel_cols, idx.r * R + r0, idx.d, idx.b);
}

// This block's share of st tile `idx`: panels [rank P / CLUSTER, (rank + 1) P / CLUSTER) of its P.
template <int CLUSTER, typename T, int R, int C>
__device__ __forceinline__ void load_tma_multicast(st<T, R, C>& dst, const tma_map* map, mbarrier& full, coord idx) {
    using S = st<T, R, C>;
    constexpr int panels = C / S::panel_cols, share = panels / CLUSTER;
    static_assert(S::swizzle_bytes != 0 && R <= 256 && panels % CLUSTER == 0,
                  "each block of the cluster loads whole swizzle panels of a TMA tile");
    multicast_panels<CLUSTER>(dst, map, full, idx, cluster_rank() * share, share, 0);
}

// The same split by rows, for a tile whose panels do not split evenly (one 64-column panel: trans_b's B): this
// block's R / CLUSTER rows of every panel, through a map whose box is that many rows (the host encodes it so,
// never fitted). The rows start on a whole 8-row swizzle atom, so TMA's swizzle of them is the whole tile's.
template <int CLUSTER, typename T, int R, int C>
__device__ __forceinline__ void load_tma_multicast_rows(st<T, R, C>& dst, const tma_map* map, mbarrier& full,
                                                        coord idx) {
    using S = st<T, R, C>;
    constexpr int share = R / CLUSTER;
    static_assert(S::swizzle_bytes != 0 && R <= 256 && share % 8 == 0,
                  "each block of the cluster loads whole 8-row swizzle atoms of a TMA tile");
    multicast_panels<CLUSTER>(dst, map, full, idx, 0, C / S::panel_cols, cluster_rank() * share);
}

// Consumers, once per warp: the slot may be refilled, in every block of the cluster that fills it.
template <int CLUSTER, int STAGES> __device__ __forceinline__ void free_stage(stage_ring<STAGES>& ring, int slot) {
    if constexpr (CLUSTER == 1)
        tiles::sm90::release(ring, slot);
    else
        tiles::sm90::release_cluster<CLUSTER>(ring, slot);
}

#if defined(TILES_CUDA_GROUPS) && TILES_CUDA_GROUPS > 1
// Consumer groups (option consumer_groups): their main loops take the ring in turns, in the walk's round order,
// while a group's epilogue runs beside the next group's loop. A wait on a slot's full mbarrier names the phase
// by its parity, which tells phase k from k + 1 but not from k + 2: a group that skipped the other's slots and
// waited at once would take the other's pending phase of the slot for its own (the first GPU run hung so, 12-06).
// So a group's loop starts only once the previous group's has waited for all of its slots (group_turn_pass
// after its last wait, its last mma still in flight): every phase a group waits for is then its slot's next.
// Named barriers 4 + group over the group that waits and the one that passes.
__device__ __forceinline__ void group_turn_wait() {
    tiles::sm90::named_sync(4 + consumer_group(), 2 * GROUP_THREADS);
}
__device__ __forceinline__ void group_turn_pass() {
    tiles::sm90::named_arrive(4 + (consumer_group() + 1) % TILES_CUDA_GROUPS, 2 * GROUP_THREADS);
}
#endif

// Register reallocation: the producer needs few, the consumers' accumulators many (setmaxnreg).
template <int N> __device__ __forceinline__ void regs_release() { tiles::sm90::regs_release<N>(); }
template <int N> __device__ __forceinline__ void regs_acquire() { tiles::sm90::regs_acquire<N>(); }

// TMA load of st tile `idx` (in units of the tile, as load_async takes it) from the 4-D map of a global
// (dims cols, rows, depth, batch; box panel_cols x R x 1 x 1): one copy per swizzle panel, completing on `full`.
// Rows and columns past the global's end are zero-filled by TMA and still count towards the slot's bytes.
template <typename T, int R, int C>
__device__ __forceinline__ void load_tma(st<T, R, C>& dst, const tma_map* map, mbarrier& full, coord idx) {
    using S = st<T, R, C>;
    static_assert(S::swizzle_bytes != 0 && R <= 256, "TMA fills swizzled tiles of at most 256 rows");
#pragma unroll
    for (int p = 0; p < C / S::panel_cols; ++p)
        tiles::sm90::tma_load(reinterpret_cast<char*>(dst.data) + p * R * S::panel_cols * int(sizeof(T)), map, full,
                              idx.c * C + p * S::panel_cols, idx.r * R, idx.d, idx.b);
}

// A TMA box fitted to a global shorter than its tile (a decode step's 1 to 16 rows of A in a 64-row tile): its
// rows rounded up to 8, one swizzle atom (at most R), so that TMA does not zero-fill rows no block can use, which
// costs as much as reading them (docs/backends/cuda.md, "Fitted boxes"). The host encodes the same box
// (schedules.box_rows); rows past it are never written by TMA, and zero_past_box zeroes them once per launch,
// so that every slot reads as a whole box would have filled it.
template <int R> __host__ __device__ constexpr int box_rows(int rows) {
    const int fit = rows < 8 ? 8 : (rows + 7) / 8 * 8;
    return fit < R ? fit : R;
}

// The bytes a load_tma of this tile announces (its slot's expect_tx) for a global of `rows` rows.
template <typename T, int R, int C> __device__ __forceinline__ unsigned box_bytes(const st<T, R, C>*, int rows) {
    return unsigned(box_rows<R>(rows)) * C * sizeof(T);
}

// Every thread of the block, before the barrier that readies the rings: the rows past the box of `n` slots,
// 16 bytes a store, published to the async proxy that TMA and wgmma use. Nothing where the box is the tile.
template <typename T, int R, int C> __device__ inline void zero_past_box(st<T, R, C>* slots, int n, int rows) {
    using S = st<T, R, C>;
    const int box = box_rows<R>(rows);
    if (box == R) return;
    constexpr int row_bytes = S::panel_cols * int(sizeof(T)), panels = C / S::panel_cols;
    const int chunks = (R - box) * row_bytes / 16;   // of each panel
    for (int i = threadIdx.x; i < n * panels * chunks; i += blockDim.x) {
        const int panel = i / chunks;   // over all slots
        char* past = reinterpret_cast<char*>(slots[panel / panels].data) + ((panel % panels) * R + box) * row_bytes;
        reinterpret_cast<uint4*>(past)[i % chunks] = make_uint4(0, 0, 0, 0);
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Producer (its leader thread): iterations 0..n-1, from the cursor on in ring order. load(k, slot, full) issues
// the TMA copies of iteration k, `bytes` in all (box_bytes of each), once the consumers have freed the slot. The
// cursor carries on across calls (a persistent block's next tile continues the ring), as the consumers' does.
template <int STAGES, typename Load>
__device__ inline void produce(stage_ring<STAGES>& ring, stage_cursor<STAGES>& cur, int n, unsigned bytes, Load load) {
    for (int k = 0; k < n; ++k, cur.advance()) load(k, cur.slot, tiles::sm90::produce(ring, cur, bytes));
}

// The same, for loops that also bring register vectors through the ring: vectors(k, slot, full) issues them
// (load_bulk) after the slot is free and before the tiles' bytes are announced, while the slot's
// pending arrival still holds its phase open.
template <int STAGES, typename Vectors, typename Load>
__device__ inline void produce(stage_ring<STAGES>& ring, stage_cursor<STAGES>& cur, int n, unsigned bytes,
                               Vectors vectors, Load load) {
    for (int k = 0; k < n; ++k, cur.advance()) {
        ring.empty[cur.slot].wait(cur.phase ^ 1);
        mbarrier& full = ring.full[cur.slot];
        vectors(k, cur.slot, full);
        full.arrive_expect_tx(bytes);
        load(k, cur.slot, full);
    }
}

// Producer (its leader thread): vector idx of a global row (idx.c counts vectors, as load(rv, gl) takes it)
// into a stage's shared vector, before the stage's arrival. A whole vector inside the row at a 16-byte aligned
// address is one bulk copy completing on `full` (its bytes announced first: the phase cannot complete while
// the producer's arrival is pending). Otherwise (the row's end, an unaligned row) this thread copies it,
// zeros past the end as tl.load means, and the arrival that follows publishes the stores.
template <typename T, int N>
__device__ inline void load_bulk(sv<T, N>& dst, const gl<T>& src, mbarrier& full, coord idx) {
    static_assert(N * sizeof(T) % 16 == 0, "bulk copies move 16-byte multiples");
    const bool row_ok = idx.b < src.batch() && idx.d < src.depth() && idx.r < src.rows();
    const T* g = row_ok ? src.row_ptr(idx.b, idx.d, idx.r) + idx.c * N : src.ptr;
    if (row_ok && (idx.c + 1) * N <= src.cols() && reinterpret_cast<unsigned long long>(g) % 16 == 0) {
        constexpr unsigned bytes = N * sizeof(T);
        asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(&full.word)),
                     "r"(bytes) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                     ::"r"(smem_addr(dst.data)), "l"(g), "r"(bytes), "r"(smem_addr(&full.word)) : "memory");
        return;
    }
    for (int i = 0; i < N; ++i)
        dst.data[i] = row_ok && idx.c * N + i < src.cols() ? g[i] : from_float<T>(0.f);
}

// Consumers: a register vector from the stage's shared vector. A column vector's lane holds pairs of
// neighbours: one 8-byte read each.
template <typename T, typename U, int N, axis A, int NW>
__device__ inline void load_stage(rv<T, N, A, NW>& dst, const sv<U, N>& src) {
    using vec = rv<T, N, A, NW>;
    if constexpr (A == axis::cols) {
        const U* s0 = src.data + vec::index_of(0, 0);
#pragma unroll
        for (int o = 0; o < vec::outer; ++o)
#pragma unroll
            for (int k = 0; k < vec::inner; k += 2) {
                const pair<U> v = *reinterpret_cast<const pair<U>*>(s0 + vec::offset_of(o, k));
                dst.d[o][k] = from_float<T>(to_float(v.x));
                dst.d[o][k + 1] = from_float<T>(to_float(v.y));
            }
    } else {
        load(dst, src);
    }
}

// A ring per pipelined tile (schedules.tile_rings), all walked by one cursor. Producer (its leader thread):
// load(k, slot) for iterations 0..n-1, which fills each tile's slot once that ring's consumers free it (refill).
// Consumers: compute(k, slot), which waits for each tile's slot before its first reader (stage_wait) and frees it
// after its last (stage_release), so a tile read early in the step is refilled while the rest of it runs.
template <int STAGES, typename F>
__device__ inline void each_stage(stage_cursor<STAGES>& cur, int n, F f) {
    for (int k = 0; k < n; ++k, cur.advance()) f(k, cur.slot);
}
template <int STAGES>
__device__ __forceinline__ mbarrier& refill(stage_ring<STAGES>& ring, const stage_cursor<STAGES>& cur, unsigned bytes) {
    return tiles::sm90::produce(ring, cur, bytes);
}
template <int STAGES>
__device__ __forceinline__ void stage_wait(stage_ring<STAGES>& ring, const stage_cursor<STAGES>& cur) {
    tiles::sm90::consume(ring, cur);
}
template <int STAGES>
__device__ __forceinline__ void stage_release(stage_ring<STAGES>& ring, int slot) {
    __syncwarp();
    tiles::sm90::release(ring, slot);
}

// Consumers, with a ring per tile, for an attention-shaped body (schedules.Deferred; option deferred=True): step
// j issues first(j) (S_j = Q K_j^T) and last(j-1) (O += P_{j-1} V_{j-1}) as one batch, waits for S_j only, runs
// early(j) (S_j's softmax) while P V may still run, then waits for that too, frees last's slot of step j-1 and
// runs late(j) (rescale O, write P_j, wait for V_j). The first step is peeled, so that no path through the loop
// ends with a group in flight (ptxas serializes the wgmma otherwise). The caller fences last's accumulator.
// TURNS (option turns=True, two consumer warpgroups): they take turns issuing their batches (named barriers 4 and
// 5; 1 is the consumers' barrier, 2 and 3 store_tma's), so that one's softmax runs while the other's batch does;
// a turn then issues last(j-1) before first(j) (below).
template <int STAGES, bool TURNS, typename First, typename Last, typename Early, typename Late>
__device__ inline void consume_deferred(stage_cursor<STAGES>& cur, int n, stage_ring<STAGES>& last_ring,
                                        First first, Last last, Early early, Late late) {
    if (n <= 0) return;
    // the broadcast id, not warp_id() / 4: ptxas then keeps the barrier ids in registers across the loop instead
    // of reading the thread index again in front of every turn (S2R, SHF, VIADD ahead of each BAR.SYNC)
    const int group = TURNS ? warpgroup_id() : 0;
    auto turn_wait = [&] { if (TURNS) tiles::sm90::named_sync(4 + group, 256); };
    auto turn_pass = [&] { if (TURNS) tiles::sm90::named_arrive(5 - group, 256); };
    // the slots from the lane-0 broadcast: warp-uniform to ptxas, so that the stages' descriptors stay on the
    // uniform datapath (a persistent grid's loop otherwise computed them per wgmma and moved each with R2UR)
    auto slot = [&] { return __shfl_sync(0xffffffffu, cur.slot, 0); };
    if (group == 1) turn_pass();   // the first warpgroup issues first
    turn_wait();
    first(0, slot());
    turn_pass();
    mma_wait<0>();
    early(0, slot());
    late(0, slot());
    int previous = slot();
    cur.advance();
    for (int j = 1; j < n; ++j, cur.advance()) {
        const int now = slot();
        turn_wait();
        if constexpr (TURNS) {
            // the turn opens with the mma whose operands are ready (last's slot was waited for in late(j - 1)),
            // so that first's slot wait and descriptors (attention: K's mbarrier, Q's rows from the broadcast
            // warpgroup id, a SHFL that cannot rise above the barrier) are paid while the tensor cores already
            // run, not while the other warpgroup waits for the turn. S_j now completes after P V, so both are
            // waited for at once: what ptxas made of the wait for S_j alone anyway (DEPBAR.LE 0 a few
            // instructions after the LE 1).
            last(j - 1, previous);
            first(j, now);
            turn_pass();
            mma_wait<0>();
            stage_release(last_ring, previous);
            early(j, now);
        } else {
            first(j, now);
            last(j - 1, previous);
            mma_wait<1>();
            early(j, now);
            mma_wait<0>();
            stage_release(last_ring, previous);
        }
        late(j, now);
        previous = now;
    }
    turn_wait();
    last(n - 1, previous);
    turn_pass();
    mma_wait<0>();
    stage_release(last_ring, previous);
    if (group == 0) turn_wait();   // the second warpgroup's last pass: every arrival is matched
}

// Consumers: compute(k, slot) once the slot's bytes have landed; then each warp hands the slot back. Every read
// of it is complete by then: ldmatrix is synchronous and the block-level wgmma waits for its own group.
template <int STAGES, typename Compute>
__device__ inline void consume(stage_ring<STAGES>& ring, stage_cursor<STAGES>& cur, int n, Compute compute) {
    for (int k = 0; k < n; ++k, cur.advance()) {
        tiles::sm90::consume(ring, cur);
        compute(k, cur.slot);
        __syncwarp();
        tiles::sm90::release(ring, cur.slot);
    }
}

// Consumers, when the body only accumulates (every op an mma issued with no_wait into an accumulator nothing
// else in the body touches): the tensor cores never wait for the warps. Step k's group is issued while step
// k-1's still runs; once only k's is in flight, k-1's slot goes back to the producer; after the last step,
// everything is waited for. No path skips the loop to that wait (an empty loop returns first): the join of a
// path with groups in flight and one without made ptxas serialize every wgmma (C7515), and a wait<0> for the
// last step inside the loop made it add a full wait to every step (12-04: `WARPGROUP.DEPBAR.LE gsb0, 0x0` before
// the back edge, the tensor cores drained between steps). The caller fences the accumulators (mma_fence).
// waited() runs once every slot of the loop has been waited for, before the last group is (a consumer group
// passes the ring to the next there).
struct nothing {
    __device__ void operator()() const {}
};
template <int STAGES, int CLUSTER = 1, typename Compute, typename Waited = nothing>
__device__ inline void consume_overlapped(stage_ring<STAGES>& ring, stage_cursor<STAGES>& cur, int n,
                                          Compute compute, Waited waited = {}) {
    if (n <= 0) {
        waited();
        return;
    }
    int previous = -1;
    // one step per iteration: ptxas unrolls a short body otherwise, and in the fp8 GEMM it then serialized every
    // wgmma (C7514: the injected waits of the two copies meet the accumulator)
#pragma unroll 1
    for (int k = 0; k < n; ++k, cur.advance()) {
        tiles::sm90::consume(ring, cur);
        compute(k, cur.slot);
        mma_wait<1>();
        __syncwarp();
        if (previous >= 0) free_stage<CLUSTER>(ring, previous);
        previous = cur.slot;
    }
    waited();
    mma_wait<0>();
    __syncwarp();
    free_stage<CLUSTER>(ring, previous);
}

}  // namespace tc
