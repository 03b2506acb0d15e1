// tiles_cuda/sm90/pipeline.cuh -- the producer/consumer stage ring of a warp-specialized Hopper kernel.
//
// STAGES shared-memory slots, each guarded by two mbarriers: `full` completes when the producer's TMA bytes
// have landed, `empty` when every consumer warp has finished reading the slot. Producer and consumers walk the
// same sequence of slots; slot i of round r waits for parity r&1 (consumer, full) or (r&1)^1 (producer, empty),
// so the producer's first round never waits.
#pragma once
#include "common.cuh"

namespace tiles::sm90 {

template <int STAGES>
struct stage_ring {
    mbarrier full[STAGES];
    mbarrier empty[STAGES];

    // One thread, before the block-wide sync that precedes the role split.
    __device__ void init(int consumer_warps) {
        for (int s = 0; s < STAGES; ++s) {
            full[s].init(1);
            empty[s].init(consumer_warps);
        }
        fence_barrier_init();
    }
};

// Position in the ring: which slot, and the parity of the round we are in.
template <int STAGES>
struct stage_cursor {
    int slot = 0;
    u32 phase = 0;
    __device__ __forceinline__ void advance() {
        if (++slot == STAGES) {
            slot = 0;
            phase ^= 1;
        }
    }
    // past n slots another consumer group takes (consumer_groups): the phase flips once per lap of the ring
    __device__ __forceinline__ void skip(int n) {
        slot += n;
        phase ^= (slot / STAGES) & 1;
        slot %= STAGES;
    }
};

// Producer side: wait for the slot to be free, then announce the bytes the TMA copies into it will bring.
template <int STAGES>
__device__ __forceinline__ mbarrier& produce(stage_ring<STAGES>& ring, const stage_cursor<STAGES>& c, u32 bytes) {
    ring.empty[c.slot].wait(c.phase ^ 1);
    ring.full[c.slot].arrive_expect_tx(bytes);
    return ring.full[c.slot];
}
// Consumer side: wait for the slot's data.
template <int STAGES>
__device__ __forceinline__ void consume(stage_ring<STAGES>& ring, const stage_cursor<STAGES>& c) {
    ring.full[c.slot].wait(c.phase);
}
// Consumer side, once per warp: the slot may be overwritten (all reads of it, wgmma included, are complete).
template <int STAGES>
__device__ __forceinline__ void release(stage_ring<STAGES>& ring, int slot) {
    if (lane_id() == 0) ring.empty[slot].arrive();
}

// Same when the slot is filled by multicast from every CTA of a cluster of CLUSTER: each producer may refill it
// only when the consumers of all CTAs are done, so every consumer warp releases it in every CTA
// (init the ring with consumer_warps * CLUSTER arrivals).
template <int CLUSTER, int STAGES>
__device__ __forceinline__ void release_cluster(stage_ring<STAGES>& ring, int slot) {
    if (lane_id() == 0)
#pragma unroll
        for (int r = 0; r < CLUSTER; ++r) arrive_cluster(ring.empty[slot], r);
}

}  // namespace tiles::sm90
