// Hand-instantiated sm_90a attention forward written only against the tiles_cuda/sm90 headers, the way generated
// code uses them. O = softmax(Q K^T * scale (+ causal mask)) V and LSE = log(sum(exp(Q K^T * scale))) per row.
// Q, O: [B, Hq, N, D]; K, V: [B, Hkv, N, D]; LSE: [B, Hq, N] f32; bf16 tensors, contiguous. GQA: Hq % Hkv == 0,
// query head h reads kv head h / (Hq / Hkv).
//
// One block per (head, 128 query rows); the grid walks the query blocks of a head first, so the resident blocks
// share K and V in L2. Warpgroup 0 produces: Q once, then K and V blocks of BKV rows through two STAGES-deep
// rings (separate rings so Q K^T can start before V lands). Warpgroups 1 and 2 each own 64 query rows:
// S = Q K^T by wgmma from shared memory, online softmax (base 2) on the accumulator layout, P converted in
// registers to the A fragment, O += P V by wgmma with A from registers and V (MN-major) from shared memory.
// Inside each consumer the loop is software-pipelined: Q K_j^T is issued before P_{j-1} V_{j-1}, and the
// softmax of block j runs while that P V is still on the tensor cores; across the two consumers, named
// barriers make them take turns issuing, so one's softmax overlaps the other's matrix products.
#pragma once
#include "tiles_cuda/sm90/sm90.cuh"

namespace tiles::sm90::hand_attn {

// Tuning knobs (compile-time): the K/V block rows without the causal mask (D = 64 / 128) and with it, and
// whether the two consumers take turns issuing their wgmma (so that one's softmax runs while the other's matrix
// products do). Measured on the H200 (NOTES.md): 176 rows beat 128 at D = 128 without the mask, lost at D = 64.
#ifndef TILES_ATTN_BKV_D64
#define TILES_ATTN_BKV_D64 128
#endif
#ifndef TILES_ATTN_BKV_D128
#define TILES_ATTN_BKV_D128 176
#endif
#ifndef TILES_ATTN_BKV_CAUSAL
#define TILES_ATTN_BKV_CAUSAL 128
#endif
#ifndef TILES_ATTN_PINGPONG
#define TILES_ATTN_PINGPONG 1
#endif
constexpr int BQ = 128, CONSUMERS = 2, THREADS = 128 * (1 + CONSUMERS), STAGES = 2;
constexpr bool PINGPONG = TILES_ATTN_PINGPONG;
constexpr float LOG2E = 1.4426950408889634f;

template <int D, int BKV>
struct attn_smem {
    st<bf16, BQ, D> q;
    st<bf16, BKV, D> k[STAGES];
    st<bf16, BKV, D> v[STAGES];
    stage_ring<STAGES> k_ring, v_ring;
    mbarrier q_full;
};

struct attn_args {
    bf16* o;
    float* lse;
    int n, hq, hkv;
    float scale_log2;  // softmax scale * log2(e): the softmax runs in base 2
};

// Per-row running max (base-2 scaled) and partial sums of this thread's columns, for its two rows.
struct softmax_state {
    float m[2] = {neg_inf(), neg_inf()};
    float l[2] = {0.f, 0.f};
};

__device__ __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffff, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffff, x, 1);
    return x + __shfl_xor_sync(0xffffffff, x, 2);
}

// Ping-pong between the two consumers: named barrier 1 + c means "consumer c may issue its wgmma now".
// Consumer c waits for its turn, issues, and hands the turn to the other.
__device__ __forceinline__ void turn_wait(int c) {
    if (PINGPONG) named_sync(1 + c, 2 * WARPGROUP_THREADS);
}
__device__ __forceinline__ void turn_pass(int c) {
    if (PINGPONG) named_arrive(2 - c, 2 * WARPGROUP_THREADS);
}

// Columns at or past `kv_end`, or (causal) past the row's own position, become -inf.
template <bool CAUSAL, int BKV>
__device__ __forceinline__ void mask(rt_acc<BKV>& s, int q_row0, int kv0, int kv_end) {
#pragma unroll
    for (int j = 0; j < BKV / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                int kv = kv0 + rt_acc<BKV>::col(j) + e;
                int q = q_row0 + rt_acc<BKV>::row(h);
                if (kv >= kv_end || (CAUSAL && kv > q)) s.d[4 * j + 2 * h + e] = neg_inf();
            }
}

// Turns S (raw scores) into unnormalized probabilities in place; returns the factor by which each of this
// thread's two rows of O must be rescaled.
template <int BKV>
__device__ __forceinline__ void online_softmax(rt_acc<BKV>& s, softmax_state& st, float scale_log2, float alpha[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float mx = neg_inf();
#pragma unroll
        for (int j = 0; j < BKV / 8; ++j) mx = fmaxf(mx, fmaxf(s.d[4 * j + 2 * h], s.d[4 * j + 2 * h + 1]));
        float m_new = fmaxf(st.m[h], quad_max(mx) * scale_log2);
        alpha[h] = exp2_approx(st.m[h] - m_new);
        st.m[h] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < BKV / 8; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float p = exp2_approx(fmaf(s.d[4 * j + 2 * h + e], scale_log2, -m_new));
                s.d[4 * j + 2 * h + e] = p;
                sum += p;
            }
        st.l[h] = st.l[h] * alpha[h] + sum;
    }
}

template <int D>
__device__ __forceinline__ void rescale(rt_acc<D>& o, const float alpha[2]) {
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            o.d[4 * j + 2 * h] *= alpha[h];
            o.d[4 * j + 2 * h + 1] *= alpha[h];
        }
}

template <int D, int BKV, bool CAUSAL>
__global__ void __launch_bounds__(THREADS, 1)
    attn_fwd_kernel(const __grid_constant__ tensor_map q_map, const __grid_constant__ tensor_map k_map,
                    const __grid_constant__ tensor_map v_map, const attn_args args) {
    extern __shared__ char smem_raw[];
    auto& sm = *reinterpret_cast<attn_smem<D, BKV>*>((reinterpret_cast<u64>(smem_raw) + 1023) & ~1023);
    // x walks the query blocks of one head, so the blocks resident at a time share K and V in L2; causal
    // blocks are launched heaviest first.
    const int head = blockIdx.y, q_block = CAUSAL ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int kv_head = (head / args.hq) * args.hkv + (head % args.hq) / (args.hq / args.hkv);
    const int q0 = q_block * BQ;
    const int kv_end = CAUSAL ? min(args.n, q0 + BQ) : args.n;
    const int kv_blocks = (kv_end + BKV - 1) / BKV;

    if (threadIdx.x == 0) {
        sm.k_ring.init(CONSUMERS * 4);
        sm.v_ring.init(CONSUMERS * 4);
        sm.q_full.init(1);
    }
    __syncthreads();

    if (warpgroup_id() == 0) {
        regs_release<24>();
        if (threadIdx.x != 0) return;
        sm.q_full.arrive_expect_tx(sizeof(sm.q));
        load_async(sm.q, &q_map, sm.q_full, head, q0, 0);
        stage_cursor<STAGES> cur;
        for (int j = 0; j < kv_blocks; ++j, cur.advance()) {
            load_async(sm.k[cur.slot], &k_map, produce(sm.k_ring, cur, sizeof(sm.k[0])), kv_head, j * BKV, 0);
            load_async(sm.v[cur.slot], &v_map, produce(sm.v_ring, cur, sizeof(sm.v[0])), kv_head, j * BKV, 0);
        }
        return;
    }

    regs_acquire<240>();
    const int c = warpgroup_id() - 1, row0 = 64 * c;
    const int q_row0 = q0 + row0;
    rt_acc<D> o;
    rt_acc<BKV> s;
    rt_a<BKV> p;
    softmax_state sst;
    float alpha[2];
    zero(o);
    stage_cursor<STAGES> kc, vc;  // K runs one block ahead of V

    if (c == 1) turn_pass(1);  // consumer 0 goes first
    sm.q_full.wait(0);
    turn_wait(c);
    consume(sm.k_ring, kc);
    mma_ABt(s, sm.q, row0, sm.k[kc.slot], 0);
    turn_pass(c);
    mma_wait<0>();
    fence_operands(s);
    release(sm.k_ring, kc.slot);
    kc.advance();
    mask<CAUSAL, BKV>(s, q_row0, 0, kv_end);
    online_softmax(s, sst, args.scale_log2, alpha);
    copy(p, s);

    for (int j = 1; j < kv_blocks; ++j) {
        turn_wait(c);
        consume(sm.k_ring, kc);
        mma_ABt(s, sm.q, row0, sm.k[kc.slot], 0);
        consume(sm.v_ring, vc);
        mma_AB(o, p, sm.v[vc.slot], 1);
        turn_pass(c);
        mma_wait<1>();  // S_j is ready; P_{j-1} V_{j-1} may still run
        fence_operands(s);
        release(sm.k_ring, kc.slot);
        kc.advance();
        if (j * BKV + BKV > kv_end || (CAUSAL && j * BKV + BKV > q_row0)) mask<CAUSAL, BKV>(s, q_row0, j * BKV, kv_end);
        online_softmax(s, sst, args.scale_log2, alpha);
        mma_wait<0>();
        fence_operands(o);
        release(sm.v_ring, vc.slot);
        vc.advance();
        rescale(o, alpha);
        copy(p, s);
    }
    turn_wait(c);
    consume(sm.v_ring, vc);
    mma_AB(o, p, sm.v[vc.slot], 1);
    turn_pass(c);
    mma_wait<0>();
    fence_operands(o);
    release(sm.v_ring, vc.slot);
    if (c == 0) turn_wait(0);  // balances consumer 1's opening pass

    // Epilogue: finish the row sums across the quad, normalize, write O (bf16) and the log-sum-exp.
    const size_t head_row = size_t(head) * args.n;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float l = quad_sum(sst.l[h]);
        float inv = 1.f / l;
        int q = q_row0 + rt_acc<D>::row(h);
        if (q >= args.n) continue;
        bf16* orow = args.o + (head_row + q) * D;
#pragma unroll
        for (int j = 0; j < D / 8; ++j)
            *reinterpret_cast<bf16x2*>(orow + rt_acc<D>::col(j)) =
                __floats2bfloat162_rn(o.d[4 * j + 2 * h] * inv, o.d[4 * j + 2 * h + 1] * inv);
        if (lane_id() % 4 == 0) args.lse[head_row + q] = (sst.m[h] + __log2f(l)) / LOG2E;
    }
}

}  // namespace tiles::sm90::hand_attn
