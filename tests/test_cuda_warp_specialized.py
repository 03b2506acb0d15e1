"""The sm_90a warp-specialized schedule without a GPU: the generated GEMM and attention compile (NVRTC, nvcc)
with no spills and the Hopper machinery in their SASS (HGMMA, UTMALDG, USETMAXREG, SYNCS); kernels that do
not fit keep the warp schedule and say why; the tensor maps the runtime builds describe the arrays exactly
and bad strides are refused before any launch. tests/test_cuda_gpu.py runs the schedule against float64."""
import functools
import itertools
import re
import shutil
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tiles as tl
from tiles import dtypes, targets
from tiles.backends.cuda import codegen, runtime, schedules, toolchain
from tiles.dsl import TileError
from tiles.kernels.attention import attention_fwd
from tiles.kernels.attention_bwd import attention_bwd
from tiles.kernels.gemm import gemm
from tiles.kernels.gemm_fp8 import gemm_fp8
from tiles.kernels.rmsnorm import rmsnorm_rows
from tiles.kernels.softmax import softmax_fwd
from tiles.testing import random_array

WS = dict(schedule="warp_specialized")
SMEM = targets.target("sm_90a").shared_bytes


def trace(kernel: str, **extra):
    x2 = random_array((256, 256), "bf16")
    lse = np.zeros((1, 2, 256), np.float32)
    x4 = {d: random_array((1, 2, 256, d), "bf16") for d in (64, 128)}
    kfn, args, consts = {
        "gemm": (gemm, [x2, x2, x2], {}),
        "gemm_bt": (gemm, [x2, x2, x2], dict(trans_b=True)),
        "bmm": (gemm, [random_array((3, 256, 256), "bf16")] * 2 + [x2], {}),   # a batch of 3, B shared
        "gemm_fp8": (gemm_fp8, [x2, random_array((256, 256), "fp8e4m3"), random_array((256, 256), "fp8e4m3"),
                                1.0, 1.0], {}),
        "attention": (attention_fwd, [x4[128], lse, x4[128], x4[128], x4[128], 0.1], dict(D=128, causal=True)),
        "attention_d64": (attention_fwd, [x4[64], lse, x4[64], x4[64], x4[64], 0.1], dict(D=64)),
        # head dim 64's 192-row query block over three consumer warpgroups (sm_90a's heuristic from 2048 queries)
        "attention_d64_bm192": (attention_fwd, [x4[64], lse, x4[64], x4[64], x4[64], 0.1],
                                dict(D=64, BM=192, workers=3, exp2_poly=8)),
        # GQA (2 query heads per kv head): the pipeline loops sit inside a loop over the group's heads
        # dV issued early at both head dims (sm_90a's heuristic takes it at 128 only: it lost at 64 on the H200)
        "attention_bwd": (attention_bwd, bwd_args(128), dict(D=128, causal=True, dv_early=True)),
        "attention_bwd_d64": (attention_bwd, bwd_args(64), dict(D=64, dv_early=True)),
    }[kernel]
    return kfn.trace(args, "sm_90a", **consts, **WS, **extra)


def bwd_args(d: int) -> list:
    x = lambda heads: random_array((1, heads, 256, d), "bf16")  # noqa: E731
    return [x(1), x(1), np.zeros((1, 2, 256, d), np.float32), x(2), x(1), x(1), x(2),
            np.zeros((1, 2, 256), np.float32), np.zeros((1, 2, 256), np.float32), 0.1]


def generate(k):
    return codegen.generate(k, schedules.plan(k, "sm_90a", SMEM))


@functools.lru_cache(maxsize=None)
def compiled(kernel: str, compiler: str = "nvrtc", persistent: bool = False):
    gen = generate(trace(kernel, persistent=persistent))
    return gen, toolchain.compile(gen.source, "sm_90a", compiler=compiler)


needs_nvrtc = pytest.mark.skipif(toolchain.available("nvrtc") is not None, reason=str(toolchain.available("nvrtc")))


@needs_nvrtc
@pytest.mark.parametrize("kernel,persistent", [("gemm", False), ("gemm_bt", False), ("gemm_fp8", False),
                                               ("attention", False), ("attention_d64", False),
                                               ("attention_d64_bm192", True), ("gemm", True), ("bmm", True),
                                               ("attention", True), ("attention_bwd", False),
                                               ("attention_bwd_d64", False)])
def test_generated_kernel_is_warp_specialized_in_its_sass(kernel, persistent):
    gen, c = compiled(kernel, persistent=persistent)
    s = gen.schedule
    assert s.warp_specialized and s.threads == 32 * s.warps + 128 and s.persistent == persistent
    # persistent: both roles walk the same tiles, the ring's cursor carrying on from one tile to the next
    assert gen.source.count("for (int round = 0, tile = tc::persistent_tile(0); tile < tiles; "
                            "tile = tc::persistent_tile(++round)) {") == 2 * persistent
    assert gen.name in c.resources, f"no ptxas report for {gen.name} in the log:\n{c.log}"
    res = c.resources[gen.name]
    assert res.spills == 0 and res.stack_frame == 0, res
    assert "C7511" not in c.log and "C7515" not in c.log   # ptxas says so when it serializes the wgmma sequence
    sass = c.sass()
    # the consumers' main loop: wait on a stage's full mbarrier, wgmma, hand the stage back; no cp.async left
    gmma = "QGMMA" if kernel == "gemm_fp8" else "HGMMA"
    consumer = loop_with(sass, gmma, "SYNCS.PHASECHK")
    want = r"QGMMA\.64x\d+x32\.F32\.E4M3\.E4M3" if gmma == "QGMMA" else r"HGMMA\.64x\d+x16\.F32\.BF16"
    assert re.search(want, consumer) and "HMMA" not in sass
    assert "SYNCS.ARRIVE" in consumer and "LDGSTS" not in consumer and "UTMALDG" not in consumer
    if kernel.startswith(("gemm", "bmm")):
        # step k's group issued while k-1's runs, and only k-1's waited for: no full wait inside the loop (the
        # last step's wait<0> inside it had made ptxas add one to every step, draining the tensor cores)
        assert re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x\d", consumer) == ["WARPGROUP.DEPBAR.LE gsb0, 0x1"]
    if kernel in ("attention", "attention_d64"):
        # the stages' descriptors on the uniform datapath: the persistent attention's loop had moved each with
        # R2UR (33 a step at D 128, 474 instructions against 440) until consume_deferred broadcast the slots
        assert consumer.count("R2UR ") <= 4, consumer.count("R2UR ")
    # the producer's: wait on a stage's empty mbarrier, announce its bytes, issue the TMA loads
    producer = loop_with(sass, "UTMALDG", "SYNCS.PHASECHK")
    assert "SYNCS.ARRIVE" in producer and gmma not in producer
    assert sass.count("USETMAXREG") == 2     # producer gives registers up, consumers take them
    if kernel.startswith("attention_bwd"):
        # dQ's 64 query rows: each consumer warpgroup its half of the columns (rt_cols), added into the
        # f32 accumulator by TMA; the producer walks the same loop nest (head, then the causal kernel's two
        # pipeline loops), the ring's cursor carrying on
        assert s.col_split == ("dq",) and s.warps == 8
        # the mma batches are waited for only as far as the next op needs, one group in flight at each wait
        # (FlashAttention-3's order, dv_early): S^T before its softmax; dP^T after it, with dV (issued as soon
        # as P^T is there) left in flight through dS^T's arithmetic, its store and the barriers around it; dQ
        # before its reduce-adds, with dK in flight; the whole step at its end
        d = 128 if kernel == "attention_bwd" else 64
        # (3 a step; causal, the masked step's S^T is waited for whole before its mask: 2 there)
        assert gen.source.count("tc::mma_wait<1>();\n") in (3, 5) and "tc::mma_wait<2>();" not in gen.source
        dv = gen.source.index("tc::mma_AB(dv, p, dout, dv, tc::no_wait);")
        assert dv < gen.source.index("tc::store(ds_s, ds);") < gen.source.index("tc::mma_AtB(dq, ds_s, k")
        assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in sass and "WARPGROUP.DEPBAR.LE gsb0, 0x2" not in sass
        # in the SASS too: dV's register-A wgmma (64 x D) comes after the step's exp2s and before the named
        # barrier around dS^T's shared tile
        step = consumer[consumer.index("MUFU.EX2"):]
        assert re.search(rf"HGMMA\.64x{d}x16\.F32\.BF16 R\d+, R\d+, ", step[:step.index("BAR.SYNC")])
        assert re.search(r"HGMMA\.64x(32|64)x16\.F32\.BF16", sass)
        # dQ's partial: each thread's pairs (4 per 16 of its warpgroup's columns) stored to the staging tile of
        # this turn (a uniform register) at constant offsets from 4 addresses, then one TMA reduce-add per
        # 32-column panel of its warpgroup from each warp, no barrier across warps, and no reduction of the
        # thread's own (edge tiles too: TMA adds only what lies inside the accumulator)
        assert len(re.findall(r"STS\.64 \[R\d+\+UR\d+(\+0x[0-9a-f]+)?\]", consumer)) == 4 * d // 2 // 16
        assert consumer.count("UTMAREDG.4D.ADD") == d // 2 // 32 and not re.search(r"\bREDG", consumer)
        assert (s.reduce.map, s.reduce.gl, s.reduce.rows, s.reduce.cols, s.reduce.panel_cols, s.reduce.swizzle_bytes,
                s.reduce_src, s.reduce_buffers) == ("DQacc_tma", "DQacc", 16, d, 32, 128, "dq", 2)
        assert f"auto* dq_staging = smem.alloc<tc::st<float, 64, {d}>>(2);" in gen.source
        assert "tc::atomic_add_tma<2>(&DQacc_tma, dq_staging, dq_turn, dq, {" in gen.source
        assert "tc::atomic_add(" not in gen.source
        assert gen.source.rstrip().endswith("tc::store_tma_wait();\n    }\n}")
        # LSE2 and Delta come through the ring (sm_90a's default, shared_vectors): the producer's bulk copies into
        # the stage's shared vectors (UBLKCP), which the consumers' broadcasts read where they are used, as 8-byte
        # shared reads (each thread's 4 pairs of its 64 rows, each vector); no global load in their loop
        assert s.vectors == ("lse", "delta") and "UBLKCP.S.G" in producer_sass(sass)
        for v, t in (("lse", "s"), ("delta", "dp")):
            assert f"tc::sub_col({t}, {t}, {v}_stages[stage]);" in gen.source
            assert gen.source.count(f"tc::load_bulk({v}_stages[stage], ") == gen.source.count("tc::produce<")
        assert len(re.findall(r"LDS\.64 ", consumer)) == 16 and not re.search(r"\bLDG", consumer)
        assert "tc::rt_cols<float, 64, " in gen.source
        producer_src = gen.source[gen.source.index("if (tc::is_producer_leader())"):gen.source.index("} else {")]
        assert "for (int g = 0; g < (Q.depth() / K.depth()); ++g) {" in producer_src
        assert producer_src.count("tc::produce<STAGES>(ring,") == (2 if "causal=True" in gen.source
                                                                               else 1)
    # readable: the roles and the ring (or rings) are written out
    gemm_like = kernel.startswith(("gemm", "bmm"))   # a body that only accumulates keeps mma groups in flight
    rings = kernel.startswith("attention") and not kernel.startswith("attention_bwd")
    for line in ("tc::regs_release<PRODUCER_REGS>();", "tc::regs_acquire<CONSUMER_REGS>();",
                 "__launch_bounds__(NUM_WARPS * 32 + 128, 1)") + (
            ("tc::each_stage<STAGES>(cursor,",) if rings else ("tc::produce<STAGES>(ring,",
             "tc::consume_overlapped<STAGES>(ring," if gemm_like else "tc::consume<STAGES>(ring,")):
        assert line in gen.source, line
    if rings:   # attention forward: K and V a ring each, K's slot freed once S = Q K^T is done (tile_rings)
        assert s.rings == ("k", "v")
        for t in s.rings:   # deferred (the default): V's slot is freed inside tc::consume_deferred, after P V
            assert f"tc::refill({t}_ring, cursor, " in gen.source and f"tc::stage_wait({t}_ring, cursor);" in \
                gen.source and (f"tc::stage_release({t}_ring, stage);" in gen.source or s.deferred and t == "v")
        assert ("tc::consume_deferred<STAGES, false>(cursor, " in gen.source) == s.deferred
        body = gen.source[gen.source.index("tc::stage_wait(k_ring"):]
        assert body.index("tc::stage_release(k_ring") < body.index("tc::exp2") < body.index("tc::stage_wait(v_ring")
        assert consumer.count("SYNCS.ARRIVE") == 2 and producer.count("SYNCS.PHASECHK") >= 2
    if gemm_like:   # wait for all but the newest group: the tensor cores never idle between steps
        assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in consumer and "tc::mma_fence(acc);" in gen.source
    # a persistent GEMM's bf16 epilogue leaves through TMA, overlapping the next tile's main loop; batched too,
    # the batch the store's depth coordinate
    assert ("UTMASTG" in sass and "tc::store_tma<2>(&C_tma, acc_staging, acc," in gen.source) == \
        (persistent and kernel in ("gemm", "bmm"))
    assert ("tc::store_tma<2>(&C_tma, acc_staging, acc, {0, block_z, block_x, block_y});" in gen.source) == \
        (persistent and kernel == "bmm")
    # and the tiles loaded outside the pipeline loops, by the producer too (resident_loads): attention's Q, its
    # backward's K (and V at D 128, where V is a shared tile)
    assert [m.map for m in s.resident] == (["q_tma"] if rings else ["k_tma", "v_tma"] if kernel == "attention_bwd"
                                           else ["k_tma"] if kernel == "attention_bwd_d64" else [])
    assert gen.source.count("tc::load_tma(") == len(s.tma) * (gen.source.count("tc::produce<") + rings) + \
        len(s.resident) and "tc::load_async" not in gen.source
    assert not any(f"tc::load({m.map[:-len('_tma')]}, " in gen.source for m in s.resident)


def producer_sass(sass: str) -> str:
    """The producer's SASS: from the kernel's start to the consumers' setmaxnreg."""
    return sass[:sass.index("USETMAXREG.TRY_ALLOC")]


@needs_nvrtc
@pytest.mark.parametrize("d", [32, 96, 256])
@pytest.mark.parametrize("kernel", ["attention_fwd", "attention_bwd"])
def test_head_dims_32_96_and_256_run_on_wgmma(kernel, d):
    """32 and 96: their shared tiles' rows (64 and 192 bytes) are 64-byte swizzle panels, which the wgmma
    descriptors describe (mode 2); 256: the forward's 64 kv rows, the backward's chunks of 64 columns of dK, dV
    and dQ. Every matrix product of both kernels, as a launch configures them (the heuristics), is an HGMMA,
    with no spills."""
    from tiles.tune.search import defaults
    x = lambda heads: random_array((1, heads, 256, d), "bf16")  # noqa: E731
    lse = np.zeros((1, 2, 256), np.float32)
    kfn, args = ((attention_fwd, [x(2), lse, x(2), x(1), x(1), 0.1]) if kernel == "attention_fwd" else
                 (attention_bwd, [x(1), x(1), np.zeros((1, 2, 256, d), np.float32), x(2), x(1), x(1), x(2), lse, lse,
                                  0.1]))
    for causal in (False, True):
        k = kfn.trace(args, "sm_90a", **defaults(kfn, "sm_90a", args, dict(D=d, causal=causal)))
        gen = generate(k)
        c = toolchain.compile(gen.source, "sm_90a", compiler="nvrtc")
        res = c.resources[gen.name]
        assert res.spills == 0 and res.stack_frame == 0, res
        sass = c.sass()
        assert re.search(r"HGMMA\.64x\d+x16\.F32\.BF16", sass) and "HMMA" not in sass, (kernel, d, causal)


def loop_with(sass: str, *ops: str) -> str:
    """The SASS of the innermost loop (a backward branch's target to the branch) that holds all of `ops`."""
    code = [(int(m.group(1), 16), m.group(2)) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*;)", sass)]
    loops = []
    for addr, ins in code:
        m = re.search(r"\bBRA(?:\.\w+)*\s+(0x[0-9a-f]+)", ins)
        if m and int(m.group(1), 16) < addr:
            body = "\n".join(i for a, i in code if int(m.group(1), 16) <= a <= addr)
            if all(op in body for op in ops):
                loops.append(body)
    assert loops, f"no loop holds {ops} in the SASS"
    return min(loops, key=len)


@needs_nvrtc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("kernel", ["gemm", "attention", "attention_bwd"])
def test_nvcc_compiles_the_same_source(kernel):
    gen, c = compiled(kernel, "nvcc")
    sass = c.sass()
    assert c.resources[gen.name].spills == 0 and "UTMALDG" in sass and "HGMMA" in sass


@needs_nvrtc
@pytest.mark.parametrize("kernel,small", [
    ("attention", dict(BM=64, BN=64, workers=1)), ("attention_d64", dict(BM=64, BN=128, workers=1)),
    ("gemm", dict(BM=64, BN=128, BK=64, stages=4, workers=1))])
def test_blocks_per_sm_splits_registers_and_shared_memory(kernel, small):
    """blocks_per_sm=2: the launch bound asks ptxas for two blocks an SM, each role's setmaxnreg count comes from
    half the register file, the shared memory of both fits the SM, and ptxas spills nothing."""
    gen = generate(trace(kernel, blocks_per_sm=2, **small))
    s = gen.schedule
    assert s.blocks == 2 and "__launch_bounds__(NUM_WARPS * 32 + 128, 2)" in gen.source
    assert 128 * schedules.PRODUCER_REGS + 32 * s.warps * s.consumer_regs <= 65536 // 2
    assert 65536 // 2 // s.threads // 8 * 8 <= s.consumer_regs and 2 * (s.smem_bytes + 1024) <= schedules.SM_SHARED
    assert s.stages >= 2
    c = toolchain.compile(gen.source, "sm_90a")
    res = c.resources[gen.name]
    assert res.registers <= 65536 // 2 // s.threads and res.spills == 0 and res.stack_frame == 0, res


@needs_nvrtc
@pytest.mark.parametrize("kernel", ["gemm", "bmm"])
def test_consumer_groups_take_the_tiles_in_turn(kernel):
    """consumer_groups=2: two consumer warpgroups, each a whole 64-row tile, take the persistent walk's rounds in
    turn (the other group's ring slots skipped), each with its own staging tile and barriers; the block holds both
    and the producer, the ring's stages are freed by one group's 4 warps, a group's main loop waits for its turn
    and passes the ring on after its last wait (parity waits cannot tell a slot's phase k from k + 2: without the
    turns the first GPU run hung), and ptxas spills nothing and serializes no wgmma."""
    gen = generate(trace(kernel, persistent=True, consumer_groups=2, BM=64, BN=256, workers=1, stages=4))
    s, src = gen.schedule, gen.source
    assert (s.groups, s.warps, s.threads) == (2, 4, 384)
    for line in ("#define TILES_CUDA_CONSUMER_THREADS 256", "#define TILES_CUDA_GROUPS 2",
                 "__launch_bounds__(NUM_WARPS * TILES_CUDA_GROUPS * 32 + 128, 1)", "ring.init(NUM_WARPS)",
                 "smem.alloc<tc::st<tc::bf16, 64, 64>>(TILES_CUDA_GROUPS * 4)",
                 "auto* acc_staging = acc_stagings + tc::consumer_group() * 4;",
                 "if ((round & 1) != tc::consumer_group()) {", "cursor.skip(tiles_cdiv(A.cols(), 64));",
                 "if (tc::consumer_group() == TILES_CUDA_GROUPS - 1 && tc::persistent_tile(0) < tiles)",
                 "tc::group_turn_wait();", "if (tc::persistent_tile(round + 1) < tiles) tc::group_turn_pass();"):
        assert line in src, line
    turn = src.index("tc::group_turn_wait();")
    assert turn < src.index("tc::consume_overlapped") < src.index("tc::group_turn_pass();\n", turn)
    c = toolchain.compile(src, "sm_90a")
    res = c.resources[gen.name]
    assert res.spills == 0 and res.stack_frame == 0 and "C751" not in c.log, (res, c.log)
    plain = generate(trace(kernel, persistent=True, BM=64, BN=256, workers=1, stages=4))
    assert plain.schedule.groups == 1 and "TILES_CUDA_GROUPS" not in plain.source and "skip" not in plain.source


@needs_nvrtc
@pytest.mark.parametrize("kernel,extra,by_rows", [("gemm", {}, False), ("bmm", {}, False),
                                                  ("gemm", dict(BM=128, BN=128, stages=4), False),
                                                  ("gemm_bt", {}, True),
                                                  ("gemm", dict(BM=64, BN=64, workers=1, stages=8), True)])
def test_cluster_shares_b_by_multicast(kernel, extra, by_rows):
    """cluster=2: two blocks on rows of tiles next to each other each load half of B's tile into both blocks' slots
    (the only load that does not depend on the grid's axis 0): half its swizzle panels, or, where it is one panel
    wide (trans_b's 256x64, a 64x64 tile), half its rows through a box of that many rows, announced whole and never
    fitted; the ring's empty barriers count both blocks' consumer warps and are freed in both; the blocks sync as a
    cluster after the rings' init and before the exit; the walk is over pairs of tiles, the block's row of the pair
    its rank; the producer keeps 48 registers (ptxas spilled in 24 and, K split, in 40), and nothing spills or
    serializes the wgmma."""
    gen = generate(trace(kernel, persistent=True, cluster=2, **extra))
    s, src = gen.schedule, gen.source
    assert (s.cluster, s.multicast, s.multicast_rows, s.producer_regs) == (2, ("b",), ("b",) * by_rows, 48)
    assert 128 * s.producer_regs + 32 * s.warps * s.consumer_regs <= 65536
    load = "tc::load_tma_multicast_rows<CLUSTER>" if by_rows else "tc::load_tma_multicast<CLUSTER>"
    bytes_line = "const unsigned b_bytes = " + (f"{64 * (256 if kernel == 'gemm_bt' else 64) * 2};" if by_rows else
                                               "tc::box_bytes(b_stages, B.rows());")
    assert ("tc::zero_past_box(b_stages" in src) != by_rows
    for line in ("__cluster_dims__(CLUSTER, 1, 1)", "ring.init(NUM_WARPS * CLUSTER)", "tc::cluster_sync();  // every block",
                 f"{load}(b_stages[stage], &b_tma, full,", "tc::load_tma(a_stages[stage]", bytes_line,
                 "tc::consume_overlapped<STAGES, CLUSTER>(", "tc::persistent_tile<CLUSTER>(0)",
                 "const int block_x = cluster_x * CLUSTER + tc::cluster_rank();", "tc::cluster_sync();  // no block leaves"):
        assert line in src, line
    assert "__syncthreads();  // the whole block" not in src
    c = toolchain.compile(src, "sm_90a")
    res = c.resources[gen.name]
    assert res.spills == 0 and res.stack_frame == 0 and "C751" not in c.log, (res, c.log)
    plain = generate(trace(kernel, persistent=True, **extra))
    assert plain.schedule.cluster == 1 and "CLUSTER" not in plain.source and plain.schedule.producer_regs == 24


@pytest.mark.parametrize("kernel,extra,why", [
    ("gemm", dict(persistent=False), "the persistent grid"),
    ("gemm", dict(consumer_groups=2, BM=64, workers=1), "one consumer group"),
    ("attention", dict(BM=64, workers=1), "one tl.pipeline loop"),
    ("gemm", dict(cluster=3), "must be 1 or 2")])
def test_cluster_refusals(kernel, extra, why):
    """What a cluster cannot share is refused before anything compiles, with the reason."""
    k = trace(kernel, **{"cluster": 2, "persistent": True, **extra})
    with pytest.raises(TileError, match=why):
        schedules.plan(k, "sm_90a", SMEM)


@pytest.mark.parametrize("kernel,extra,why", [
    ("gemm", dict(persistent=False), "the persistent grid"),
    ("gemm", dict(persistent=True, BM=128, workers=2), "one consumer warpgroup a tile"),
    ("attention", dict(persistent=True, BM=64, workers=1), "one tl.pipeline loop that accumulates"),
    ("gemm", dict(persistent=True, BM=64, workers=1, consumer_groups=3), "must be 1 or 2")])
def test_consumer_groups_refusals(kernel, extra, why):
    """What two groups cannot share is refused before anything compiles, with the reason."""
    k = trace(kernel, **{"consumer_groups": 2, **extra})
    with pytest.raises(TileError, match=why):
        schedules.plan(k, "sm_90a", SMEM)


def warp_traced(kernel: str, **extra):
    """A kernel traced for sm_90a's warp schedule: gemm at 256^3, or rmsnorm_rows at 8 rows of 14336 (448 x 32)."""
    if kernel == "gemm":
        x2 = random_array((256, 256), "bf16")
        return gemm.trace([x2, x2, x2], "sm_90a", schedule="warp", **extra)
    rows = random_array((8, 448, 32), "bf16")
    return rmsnorm_rows.trace([rows, np.zeros((8, 1), np.float32), rows, rows[0], 1e-6], "sm_90a", TR=448, K=32,
                              RPB=1, staged=True, **extra)


@needs_nvrtc
@pytest.mark.parametrize("kernel,config", [("gemm", dict(BM=128, BN=64, workers=2)), ("rmsnorm_rows", {}),
                                           ("rmsnorm_rows", dict(max_registers=64))])
def test_blocks_per_sm_on_the_warp_schedule_caps_registers(kernel, config):
    """blocks_per_sm under the warp schedule: the cap is the register file's share of a thread at that many blocks
    (or max_registers, where lower), and ptxas keeps to it (spilling if it must: rmsnorm_rows' tiles want 94
    registers at 448 threads, two blocks leave 72)."""
    gen = generate(warp_traced(kernel, blocks_per_sm=2, **config))
    s = gen.schedule
    share = 65536 // 2 // s.threads // 8 * 8
    assert s.max_registers == min(config.get("max_registers") or share, share) and s.min_blocks >= 2
    assert f"__maxnreg__({s.max_registers})" in gen.source
    assert toolchain.compile(gen.source, "sm_90a").resources[gen.name].registers <= s.max_registers


def test_blocks_per_sm_on_the_warp_schedule_where_they_fit_anyway():
    """Two blocks of 4 warps fit at 255 registers a thread: no cap, the same code as one block (the search drops it
    as such)."""
    one, two = (generate(warp_traced("gemm", BM=64, BN=64, workers=1, blocks_per_sm=n)) for n in (1, 2))
    assert two.schedule.max_registers == 0 and two.source == one.source


def test_blocks_per_sm_refusals():
    with pytest.raises(TileError, match=r"more than the 115712 a block can have with 2 blocks an SM"):
        generate(trace("attention", blocks_per_sm=2))   # 128-row Q, 2 stages of 128-row K and V: 162 KB a block
    # 128x64 S, P and 128x128 O over 8 consumer warps: 112 registers a thread, where two blocks of 384 threads
    # start with 80 (ptxas: "C7602 Insufficient registers (80) to compile instruction"); one Q slot (the
    # persistent grid's second one would not fit the shared memory of two blocks first)
    with pytest.raises(TileError, match="a thread starts with 80 registers.*register tiles alone take 112"):
        generate(trace("attention", BM=128, BN=64, workers=2, blocks_per_sm=2, persistent=False))
    with pytest.raises(TileError, match="blocks_per_sm must be an int from 1 to 4"):
        generate(trace("gemm", blocks_per_sm=0))


@needs_nvrtc
@pytest.mark.parametrize("config", [dict(BM=128, BN=64, workers=2, blocks_per_sm=2), dict(BM=192, BN=128, workers=3),
                                    dict(BM=64, BN=128, workers=1, blocks_per_sm=2)])
def test_setmaxnreg_pool_is_the_launch_count(config):
    """The consumers' setmaxnreg count is drawn from the block's launch registers, so ptxas must give the kernel
    exactly the launch count (it does where setmaxnreg is used): fewer, and the pool would be short. The first
    configuration asked 112 registers of a pool that held 104 and hung on the H200 (12-04); it asks 104 now."""
    gen = generate(trace("gemm", BK=64, stages=3, **config))
    s = gen.schedule
    launch = schedules.launch_registers(s.warps, s.blocks, True, 0)
    assert f"CONSUMER_REGS = {s.consumer_regs};" in gen.source
    assert 32 * s.warps * (s.consumer_regs - launch) <= 128 * (launch - schedules.PRODUCER_REGS)
    res = toolchain.compile(gen.source, "sm_90a").resources[gen.name]
    assert res.registers == launch and res.spills == 0, res


def test_register_split_and_ring_bytes():
    # 128x256x64, 2 consumer warpgroups, persistent; its bf16 epilogue's whole 64 KB tile would leave room for 3
    # of the 4 stages the configuration asks for, two of its four 128-byte panels in turn (32 KB) leave 4
    s = generate(trace("gemm")).schedule
    assert (s.warps, s.stages, s.stage_bytes, s.store_buffers) == (8, 4, (128 * 64 + 64 * 256) * 2, 2)
    assert s.consumer_regs == 240
    for warps, blocks in itertools.product((4, 8, 12, 16), (1, 2)):   # 1-4 consumer warpgroups, 1-2 blocks an SM
        r = replace(s, warps=warps, blocks=blocks)
        launch = schedules.launch_registers(warps, blocks, True, 0)
        # setmaxnreg.inc may only grow a warp's registers past what ptxas gave it at launch, and draws on the
        # CTA's own pool, which only the producer's setmaxnreg.dec fills: asking more than it holds never returns
        assert launch <= r.consumer_regs <= 256 and r.consumer_regs % 8 == 0
        assert 32 * warps * (r.consumer_regs - launch) <= 128 * (launch - schedules.PRODUCER_REGS)
        assert launch * r.threads * blocks <= 65536
    # stages + staging tiles + alignment slack + the mbarrier ring
    assert s.smem_bytes == 4 * (16384 + 32768) + 2 * 128 * 64 * 2 + 2 * 1024 <= SMEM
    three = generate(trace("gemm", stages=3)).schedule   # where the whole tile fits beside them, it is staged whole
    assert (three.stages, three.store_buffers, three.smem_bytes) == (3, 4, 3 * (16384 + 32768) + 128 * 256 * 2 + 2048)
    assert (s.store.map, s.store.gl, s.store.rows, s.store.panel_cols, s.store_src) == ("C_tma", "C", 64, 64, "acc")
    assert [(t.map, t.gl, t.rows, t.panel_cols, t.swizzle_bytes) for t in s.tma] == [
        ("a_tma", "A", 128, 64, 128), ("b_tma", "B", 64, 64, 128)]


@pytest.mark.parametrize("kernel,extra,why", [
    ("gemm", dict(wgmma=False), "wgmma=False"),
    ("gemm", dict(BM=16, workers=1), "not whole warpgroups"),
])
def test_kernels_that_do_not_fit_keep_the_warp_schedule(kernel, extra, why):
    gen = generate(trace(kernel, **extra))
    assert not gen.schedule.warp_specialized and why in gen.schedule.note
    assert f"// not warp-specialized: {gen.schedule.note}" in gen.source and "tc::pipeline<STAGES>" in gen.source


def test_kernel_with_f32_pipelined_tiles_keeps_the_warp_schedule():
    x = random_array((128, 256), "f32")
    k = softmax_fwd.trace([x, x], "sm_90a", **WS)
    s = schedules.plan(k, "sm_90a", SMEM)
    assert not s.warp_specialized and "1- or 2-byte tiles" in s.note


# ---- the tensor maps (host side; the driver call itself needs a GPU machine) -------------------------------

@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 70), min_size=2, max_size=4), pad=st.integers(0, 3),
       dtype=st.sampled_from(["bf16", "f16"]), tile=st.sampled_from([(128, 64), (64, 256), (128, 32), (64, 16)]))
def test_tensor_map_spec_addresses_every_element_as_the_array_does(shape, pad, dtype, tile):
    """For any array whose rows are padded to 16 bytes: the map's dims are the array's (innermost first), its
    byte strides step exactly as the array's do, and the box is one swizzle panel of the tile."""
    rows, cols = tile
    dt = dtypes.of(dtype)
    pitch = -(-shape[-1] // 8) * 8 + 8 * pad
    store = np.zeros((*shape[:-1], pitch), dt.np)
    a = store[..., :shape[-1]]
    load = schedules.TmaMap("t_tma", "X", rows, cols, *_panel(cols, dt.itemsize), dt.itemsize)
    k = gemm.trace([random_array((64, 64), "bf16")] * 3, "sm_90a")
    spec = runtime.tensor_map_spec(k, load, dt, a.shape, runtime._strides(a))
    full = (1,) * (4 - a.ndim) + a.shape
    assert spec.dims == tuple(reversed(full))
    byte_strides = (0,) * (4 - a.ndim) + a.strides
    for n, want, got in zip(reversed(full[:3]), reversed(byte_strides[:3]), spec.strides):
        assert got % 16 == 0 and (n == 1 or got == want)
    assert spec.box == (load.panel_cols, rows, 1, 1) and spec.box[0] * dt.itemsize == load.swizzle_bytes
    assert spec.swizzle == f"CU_TENSOR_MAP_SWIZZLE_{load.swizzle_bytes}B"
    assert spec.dtype == {"bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", "f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16"}[dtype]


def _panel(cols: int, itemsize: int) -> tuple[int, int]:
    swz = next(b for b in (128, 64, 32) if cols * itemsize % b == 0)
    return swz // itemsize, swz


def test_tensor_maps_follow_the_schedule_and_refuse_unaddressable_rows():
    k = trace("gemm")
    s = schedules.plan(k, "sm_90a", SMEM)
    a = np.zeros((300, 200), dtypes.bf16.np)
    b = np.zeros((200, 520), dtypes.bf16.np)
    c = np.zeros((300, 520), dtypes.bf16.np)
    specs = [spec for spec, _ in runtime.tensor_map_specs(k, s, [c, a, b], pointer=lambda x: 0)]
    # A's and B's loads, then C's store (64 rows: one consumer warpgroup's part)
    assert [sp.dims for sp in specs] == [(200, 300, 1, 1), (520, 200, 1, 1), (520, 300, 1, 1)]
    assert [sp.box for sp in specs] == [(64, 128, 1, 1), (64, 64, 1, 1), (64, 64, 1, 1)]
    odd = np.zeros((300, 60), dtypes.bf16.np)        # 120-byte rows
    with pytest.raises(TileError, match="multiples of 16 bytes"):
        runtime.tensor_map_specs(k, s, [c, odd, b], pointer=lambda x: 0)


def test_cluster_row_boxes_are_half_the_tile_and_never_fitted():
    """A B tile the cluster's blocks load by rows (trans_b's 256x64, one swizzle panel) gets a box of 128 rows,
    whole even where B has fewer rows than a tile (no fitted box: the kernel announces the whole tile, its two
    halves); a tile split by panels keeps its fitted box."""
    for trans_b, rows, box in ((True, 40, (64, 128, 1, 1)), (True, 600, (64, 128, 1, 1)), (False, 40, (64, 40, 1, 1))):
        k = trace("gemm_bt" if trans_b else "gemm", persistent=True, cluster=2)
        s = schedules.plan(k, "sm_90a", SMEM)
        b = np.zeros((rows, 256) if trans_b else (rows, 512), dtypes.bf16.np)
        a = np.zeros((300, 256 if trans_b else rows), dtypes.bf16.np)
        c = np.zeros((300, rows if trans_b else 512), dtypes.bf16.np)
        specs = dict(zip((m.map for m in s.maps), (sp for sp, _ in runtime.tensor_map_specs(k, s, [c, a, b],
                                                                                           pointer=lambda x: 0))))
        assert specs["b_tma"].box == box, (trans_b, rows, specs["b_tma"])


@pytest.mark.parametrize("d", [64, 128])
def test_dq_reduce_map_and_where_it_does_not_apply(d):
    """Attention backward's dQ accumulator gets an f32 map whose box is one 128-byte panel (32 floats) by one
    warp's 16 query rows, the staging tiles' 128-byte swizzle; two staging tiles where they fit, else one; where
    none does, or under the warp schedule, dQ keeps the vector reductions."""
    k = attention_bwd.trace(bwd_args(d), "sm_90a", D=d, **WS)
    s = schedules.plan(k, "sm_90a", SMEM)
    args = bwd_args(d)
    maps = runtime.tensor_map_specs(k, s, args, pointer=lambda x: 0)
    assert [m.map for m in s.maps] == ["q_tma", "dout_tma", "k_tma"] + ["v_tma"] * (d == 128) + ["DQacc_tma"]
    dq = maps[-1][0]
    # below: the staging tiles alone (K and V through TMA take a ring's 1 KB of mbarriers, and go first where short)
    k = attention_bwd.trace(bwd_args(d), "sm_90a", D=d, resident=False, **WS)
    s = schedules.plan(k, "sm_90a", SMEM)
    assert (dq.dtype, dq.dims, dq.strides, dq.box, dq.swizzle) == (
        "CU_TENSOR_MAP_DATA_TYPE_FLOAT32", (d, 256, 2, 1), (4 * d, 4 * d * 256, 4 * d * 256 * 2), (32, 16, 1, 1),
        "CU_TENSOR_MAP_SWIZZLE_128B")
    one = schedules.plan(k, "sm_90a", s.smem_bytes - 1)
    assert s.reduce_buffers == 2 and one.reduce_buffers == 1 and one.smem_bytes == s.smem_bytes - 64 * d * 4
    assert "tc::atomic_add_tma<1>(&DQacc_tma, dq_staging, dq_turn, dq, {" in codegen.generate(k, one).source
    tight = schedules.plan(k, "sm_90a", one.smem_bytes - 1)
    warp = schedules.plan(k, "sm_90a", SMEM, "warp")
    for other in (tight, warp):
        assert other.reduce is None and other.smem_bytes <= one.smem_bytes - 64 * d * 4
        assert "tc::atomic_add(DQacc, dq, {" in codegen.generate(k, other).source
    assert tight.warp_specialized and "DQacc_tma" not in codegen.generate(k, tight).source


def test_tensor_map_parameter_is_128_bytes():
    assert runtime.TENSOR_MAP.itemsize == 128


@pytest.mark.parametrize("dtype,cols", [("bf16", 128), ("f16", 32), ("bf16", 16)])
def test_encoding_marshals_every_argument_for_the_driver(dtype, cols):
    """cuTensorMapEncodeTiled through cuda.bindings: every argument converts (a wrong type fails before the
    driver is looked up); where a driver is installed the map comes back as one 128-byte parameter."""
    pytest.importorskip("cuda.bindings.driver")
    dt = dtypes.of(dtype)
    load = schedules.TmaMap("t_tma", "X", 64, cols, *_panel(cols, dt.itemsize), dt.itemsize)
    k = gemm.trace([random_array((64, 64), "bf16")] * 3, "sm_90a")
    spec = runtime.tensor_map_spec(k, load, dt, (3, 100, 200), (200 * 100, 200, 1))
    try:
        m = runtime.encode_tensor_map(spec, 1 << 20)
    except Exception as e:  # noqa: BLE001 - no driver here: cuda.pathfinder's own error, raised at the call
        assert not isinstance(e, (TypeError, ValueError)) and "driver" in str(e), e
        return
    assert m.shape == (1,) and m.dtype == runtime.TENSOR_MAP


@tl.kernel
def nested_pipelines(C, A, *, BM=64, BK=64):
    """Sums column blocks of A's rows in a pipeline loop inside another pipeline loop: a shape the producer's walk
    does not take (the outer loop's slot would stay taken while the inner one cycles the ring)."""
    bm = tl.grid(tl.cdiv(A.rows, BM))
    a = tl.shared(A.dtype, BM, BK)
    b = tl.shared(A.dtype, BM, BK)
    acc = tl.regs(tl.f32, BM, BK)
    x = tl.regs(tl.f32, BM, BK)
    tl.zero(acc)
    for i in tl.pipeline(2, name="i"):
        tl.load(b, A, (bm, i))
        tl.load(x, b)
        tl.add(acc, acc, x)
        for j in tl.pipeline(tl.cdiv(A.cols, BK), name="j"):
            tl.load(a, A, (bm, j))
            tl.load(x, a)
            tl.add(acc, acc, x)
    tl.store(C, acc, (bm, 0))


def test_nested_pipeline_loops_keep_the_warp_schedule():
    x = random_array((128, 256), "bf16")
    k = nested_pipelines.trace([np.zeros((128, 64), np.float32), x], "sm_90a", workers=1, **WS)
    s = schedules.plan(k, "sm_90a", SMEM)
    assert not s.warp_specialized and "holds another loop that pipelines" in s.note


@needs_nvrtc
@pytest.mark.parametrize("kernel,turns", [("attention", False), ("attention_d64", True)])
def test_deferred_option_batches_s_and_the_previous_p_v(kernel, turns):
    """deferred=True (with the per-tile rings): S_j and P_{j-1} V_{j-1} issued as one batch, waited for as the hand
    kernel's are (ptxas puts the wait for P V a few instructions after the one for S_j, as it does there); with
    turns=True the two consumer warpgroups issue their batches in turns (BAR.SYNC before, BAR.ARV after), each
    turn opening with P V, whose operands are ready: K's wait and S's descriptors (a SHFL) come after its
    HGMMAs, not between the barrier and the tensor cores' first work; the barrier ids are computed once."""
    gen = generate(trace(kernel, deferred=True, turns=turns))
    c = toolchain.compile(gen.source, "sm_90a")
    res = c.resources[gen.name]
    assert res.spills == 0 and res.stack_frame == 0 and "C751" not in c.log, (res, c.log)
    assert f"tc::consume_deferred<STAGES, {str(turns).lower()}>(cursor, " in gen.source and \
        "tc::each_stage<STAGES>(cursor," in gen.source
    consumer = loop_with(c.sass(), "HGMMA", "SYNCS.PHASECHK")
    first_wait = consumer.index("WARPGROUP.DEPBAR")
    assert consumer[:first_wait].count("HGMMA") == consumer.count("HGMMA") == (16 if kernel == "attention" else 12)
    # turns: S_j and P V both waited for at once (S_j is issued last)
    assert consumer[first_wait:].startswith(f"WARPGROUP.DEPBAR.LE gsb0, {'0x0' if turns else '0x1'}")
    assert consumer.count("SYNCS.ARRIVE") == 2
    assert (consumer.count("BAR.SYNC"), consumer.count("BAR.ARV")) == ((1, 1) if turns else (0, 0))
    if turns:
        sync, first = consumer.index("BAR.SYNC"), consumer.index("HGMMA")
        assert sync < first and consumer.rindex("HGMMA") < consumer.index("BAR.ARV") < first_wait
        assert re.match(r"HGMMA\S* R\d+, R\d+, gdesc", consumer[first:])   # P V: A from registers
        assert not re.search(r"SYNCS\.PHASECHK|SHFL", consumer[sync:first])
        # the barrier ids stay in registers: the thread index is not read again in front of the turn
        assert "SR_TID" not in consumer[:sync]


@tl.kernel
def row_panels(C, A, B, *, BM=64, BN=64, K=64, per_block=0):
    """C = A B for A of K columns, a row block of A held in shared memory against every column block of B (the
    pipeline loop), as attention holds Q against K; per_block > 0: each block takes that many row blocks in turn
    (a tl.range loop)."""
    g = tl.grid(tl.cdiv(A.rows, BM * max(per_block, 1)))
    tl.check_eq(A.cols, K)
    a = tl.shared(A.dtype, BM, K, name="a")
    b = tl.shared(B.dtype, K, BN, name="b")
    acc = tl.regs(tl.f32, BM, BN, name="acc")

    def panel(row):
        tl.load(a, A, (row, 0))
        for j in tl.pipeline(tl.cdiv(B.cols, BN), name="j"):
            tl.load(b, B, (0, j))
            tl.zero(acc)
            tl.mma_AB(acc, a, b, acc)
            tl.store(C, acc, (row, j))

    if per_block:
        for r in tl.range(per_block, name="r"):
            panel(g * per_block + r)
    else:
        panel(g)


def row_panels_args():
    return [np.zeros((256, 256), np.float32), random_array((256, 64), "bf16"), random_array((64, 256), "bf16")]


@needs_nvrtc
@pytest.mark.parametrize("extra,slots", [({}, 1), (dict(per_block=2), 2), (dict(persistent=True), 2)])
def test_out_of_loop_shared_load_is_the_producers_tma(extra, slots):
    """A shared tile loaded outside the pipeline loops (attention's Q) comes through the producer's TMA into a ring
    of its own, issued ahead of the pipelined loads after it: the consumers wait on its slot's full mbarrier before
    its first reader instead of loading it between two block barriers, and where the load repeats in a block (a
    tl.range loop, a persistent grid) free the slot after its last reader, the next slot's load in flight."""
    k = row_panels.trace(row_panels_args(), "sm_90a", workers=1, **WS, **extra)
    gen = generate(k)
    s = gen.schedule
    assert [m.map for m in s.resident] == ["a_tma"] and s.resident_slots == slots
    assert f"constexpr int RESIDENT_SLOTS = {slots};" in gen.source
    producer, consumer = gen.source.split("} else {", 1)
    load = producer.index("tc::load_tma(a_slots[a_cursor.slot], &a_tma, tc::refill(a_ring, a_cursor, a_bytes), {")
    assert load < producer.index("tc::produce<STAGES>(ring, cursor,")
    assert "tc::load(a, A" not in consumer and "tc::sync();" not in consumer
    assert consumer.index("auto& a = a_slots[a_cursor.slot];") < consumer.index("tc::stage_wait(a_ring, a_cursor);") \
        < consumer.index("tc::consume<STAGES>(ring, cursor,")
    release = "tc::stage_release(a_ring, a_cursor.slot);  // its last reader is done\n"
    assert (release in consumer) == (slots == 2)   # loaded once a block, the slot is never refilled
    # the runtime's tensor maps: the pipelined tile's, then the resident one's (box: its one 128-byte panel)
    specs = runtime.tensor_map_specs(k, s, row_panels_args(), pointer=lambda x: 0)
    assert [spec.box for spec, _ in specs] == [(64, 64, 1, 1), (64, 64, 1, 1)] and specs[1][0].dims == (64, 256, 1, 1)
    c = toolchain.compile(gen.source, "sm_90a")
    res = c.resources[gen.name]
    assert res.spills == 0 and res.stack_frame == 0 and "C751" not in c.log, (res, c.log)
    sass = c.sass()
    consumer_sass = sass[sass.index("USETMAXREG.TRY_ALLOC"):]
    assert "UTMALDG" in producer_sass(sass) and "UTMALDG" not in consumer_sass
    assert not re.search(r"\bLDG", consumer_sass)   # the consumers read no global: C's stores only


def test_out_of_loop_shared_load_falls_back_where_tma_cannot_take_it():
    """Where TMA cannot fill the tile (a box of more than 256 rows), the option asks otherwise, or shared memory
    is short, the consumers load it as before, between two barriers; a second slot is given up first."""
    args = row_panels_args()
    for extra in (dict(BM=512), dict(resident=False)):
        gen = generate(row_panels.trace(args, "sm_90a", workers=1, **WS, **extra))
        assert gen.schedule.warp_specialized and not gen.schedule.resident and "a_tma" not in gen.source
        assert "tc::load(a, A, {0, 0, block_x, 0});\n        tc::sync();" in gen.source
    k = row_panels.trace(args, "sm_90a", workers=1, per_block=2, **WS)
    two = schedules.plan(k, "sm_90a", SMEM)
    one = schedules.plan(k, "sm_90a", two.smem_bytes - 1)
    none = schedules.plan(k, "sm_90a", one.smem_bytes - 1)
    assert (two.resident_slots, one.resident_slots, none.resident_slots) == (2, 1, 0) and not none.resident
    assert two.smem_bytes - one.smem_bytes == 64 * 64 * 2 and one.smem_bytes - none.smem_bytes == 1024
    assert "tc::load(a, A, {0, 0, ((block_x * 2) + r), 0});" in codegen.generate(k, none).source


# ---- fitted boxes: a global shorter than its tile ---------------------------------------------------------

@needs_nvrtc
def test_box_rows_agree_between_the_host_and_the_kernel():
    """The host's box (schedules.box_rows: what cuTensorMapEncodeTiled is given) and the kernel's (tc::box_rows:
    what each slot's mbarrier expects) must agree to the byte, or the ring waits forever: compared at compile
    time for every tile height and every extent up to past the tallest tile."""
    checks = "".join(f"static_assert(tc::box_rows<{r}>({e}) == {schedules.box_rows(r, e)});\n"
                     for r in (16, 32, 64, 128, 192, 256) for e in range(1, 300))
    toolchain.compile("#include <tiles_cuda/tiles.cuh>\n#include <tiles_cuda/warp_specialized.cuh>\n" + checks,
                      "sm_90a")
    assert [schedules.box_rows(64, e) for e in (1, 8, 9, 16, 20, 57, 64, 65, 4096)] == [8, 8, 16, 16, 24, 64, 64, 64,
                                                                                           64]


@pytest.mark.parametrize("m,rows", [(1, 8), (16, 16), (20, 24), (63, 64), (64, 64), (300, 64)])
def test_decode_gemm_loads_a_box_fitted_to_its_rows(m, rows):
    """A decode step's A (1 to 16 rows) in a 64-row tile: its map's box holds the rows rounded up to 8, B's and the
    epilogue store's boxes are whole; the kernel announces each load's box bytes (tc::box_bytes, which the
    agreement test above ties to the host's) and zeroes every slot's rows past the box before the rings start, so
    a slot reads as the whole box would have filled it."""
    shapes = [np.zeros((m, 512), dtypes.bf16.np), np.zeros((m, 256), dtypes.bf16.np),
              np.zeros((256, 512), dtypes.bf16.np)]
    def planned(**option):
        k = gemm.trace(shapes, "sm_90a", BM=64, BN=128, BK=64, stages=4, workers=1, persistent=True, **option)
        gen = generate(k)
        s = gen.schedule
        maps = runtime.tensor_map_specs(k, s, shapes, pointer=lambda x: 0)
        return gen.source, {m.map: spec.box for m, (spec, _) in zip(s.maps, maps)}
    src, boxes = planned()
    assert boxes == {"a_tma": (64, rows, 1, 1), "b_tma": (64, 64, 1, 1), "C_tma": (64, 64, 1, 1)}
    for t, g in (("a", "A"), ("b", "B")):
        assert f"const unsigned {t}_bytes = tc::box_bytes({t}_stages, {g}.rows());" in src
        assert src.index(f"tc::zero_past_box({t}_stages, STAGES, {g}.rows());") < src.index("__syncthreads();")
    assert "tc::produce<STAGES>(ring, cursor, tiles_cdiv(A.cols(), 64), a_bytes + b_bytes," in src
    # boxes=False: every box the tile's, its bytes a constant, nothing zeroed
    src, boxes = planned(boxes=False)
    assert boxes == {"a_tma": (64, 64, 1, 1), "b_tma": (64, 64, 1, 1), "C_tma": (64, 64, 1, 1)}
    assert "const unsigned a_bytes = 8192, b_bytes = 16384;" in src and "zero_past_box" not in src


# ---- the persistent epilogue's store ------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", ["attention", "attention_d64"])
def test_persistent_attention_stores_o_through_tma_before_its_lse(kernel):
    """The epilogue's tile store goes through TMA where only work on other values follows it (attention: the
    log-sum-exp's vector ops and store): O is handed to TMA and the consumers go on to LSE and the next tile."""
    k = trace(kernel, persistent=True)
    gen = generate(k)
    s = gen.schedule
    assert (s.store.map, s.store_src) == ("O_tma", "o") and schedules.epilogue_store(k) is k.body[-5]
    src = gen.source
    assert src.index(f"tc::store_tma<{s.store_buffers}>(&O_tma, o_staging, o, {{") < src.index("tc::store(LSE, l, {")
    assert "tc::store(O," not in src and src.rstrip().endswith("tc::store_tma_wait();\n    }\n}")
    assert s.smem_bytes <= SMEM


def test_epilogue_store_is_refused_where_later_work_touches_its_tile():
    """A store followed by an op that reads its tile stays a plain store (the staging tile holds a copy, but the
    rule keeps to the plain case: what follows the epilogue's store leaves its tile and its global alone)."""
    @tl.kernel
    def twice(Y, X, *, BM=64, BN=64):
        bm, bn = tl.grid(tl.cdiv(X.rows, BM), tl.cdiv(X.cols, BN))
        x = tl.shared(X.dtype, BM, BN)
        acc = tl.regs(tl.f32, BM, BN)
        tl.zero(acc)
        for _ in tl.pipeline(2):
            tl.load(x, X, (bm, bn))
            tl.mma_AB(acc, x, x, acc)
        tl.store(Y, acc, (bm, bn))
        tl.mul(acc, acc, 2.0)

    x = random_array((128, 64), "bf16")
    k = twice.trace([x, x], "sm_90a", workers=1, persistent=True, **WS)
    assert schedules.epilogue_store(k) is None and generate(k).schedule.store is None
    k.body = k.body[:-1]                                # without the multiply: the store is the epilogue's
    assert schedules.epilogue_store(k) is k.body[-1] and generate(k).schedule.store.map == "Y_tma"


def test_short_attention_fits_q_k_and_v_boxes_and_announces_them():
    """Attention at N below its 128-row tiles: Q's box (resident, the producer's) and K's and V's (pipelined, a ring
    each) hold N rounded up to 8 rows; the kernel announces each from its global's rows, and Q's refill uses its
    own bytes."""
    n = 40
    x = random_array((1, 2, n, 128), "bf16")
    args = [x, np.zeros((1, 2, n), np.float32), x, x, x, 0.1]
    k = attention_fwd.trace(args, "sm_90a", D=128, **WS)
    gen = generate(k)
    s = gen.schedule
    boxes = {m.map: spec.box for m, (spec, _) in zip(s.maps, runtime.tensor_map_specs(k, s, args, pointer=lambda a: 0))}
    assert boxes["q_tma"] == boxes["k_tma"] == boxes["v_tma"] == (64, 40, 1, 1)
    for t, g, slots in (("q", "Q", "RESIDENT_SLOTS"), ("k", "K", "STAGES"), ("v", "V", "STAGES")):
        assert f"const unsigned {t}_bytes = tc::box_bytes({t}_{'slots' if t == 'q' else 'stages'}, {g}.rows());" \
            in gen.source
        assert f"tc::zero_past_box({t}_{'slots' if t == 'q' else 'stages'}, {slots}, {g}.rows());" in gen.source
    assert "tc::refill(q_ring, q_cursor, q_bytes)" in gen.source


@needs_nvrtc
@pytest.mark.parametrize("v_shared_from", [0, 128])
def test_shared_vectors_are_read_where_they_are_used(v_shared_from):
    """shared_vectors: attention backward's LSE and Delta, which only sub_col reads, come through the ring (Delta
    too, though it is loaded after the step's first mma) and stay in their stage's shared vectors; the broadcasts
    read them there, no register vector is declared, no wgmma is serialized, and at 128 query rows a step (head
    dim 64, V in shared memory) ptxas spills nothing where the whole vectors spilled 104+104 bytes. Without the
    option LSE is loaded into registers at the head and Delta from global memory."""
    k = attention_bwd.trace(bwd_args(64), "sm_90a", D=64, BM=128, v_shared_from=v_shared_from, shared_vectors=True,
                            **WS)
    assert {t.name for t in schedules.shared_vectors(k)} == {"lse", "delta"}
    gen = generate(k)
    for v, t in (("lse", "s"), ("delta", "dp")):
        assert f"tc::sub_col({t}, {t}, {v}_stages[stage]);" in gen.source and f"tc::load_stage({v}" not in gen.source
        assert not re.search(rf"tc::rv<[^>]*> {v};", gen.source)
    c = toolchain.compile(gen.source, "sm_90a")
    assert "C7511" not in c.log and "C7512" not in c.log and "C7515" not in c.log   # no wgmma serialized
    if v_shared_from == 0:   # (V in registers too: 12 bytes spill)
        assert c.resources[gen.name].spills == 0 and c.resources[gen.name].stack_frame == 0, c.resources[gen.name]
    plain = attention_bwd.trace(bwd_args(64), "sm_90a", D=64, BM=128, v_shared_from=v_shared_from,
                                shared_vectors=False, **WS)
    assert schedules.shared_vectors(plain) == set() and [op.dst.name for op in schedules.pipelined_vectors(plain)] \
        == ["lse"] and "tc::load(delta, Delta," in generate(plain).source


@tl.kernel
def _shifted_products(C, A, B, V, *, BM=64, BN=64, BK=64, scaled=False, after=False):
    """C = sum over K steps of (A B)_step - V[step] per column: a ring vector that only sub_col reads, or not
    (scaled: written in the body; after: read once more past the loop, where no stage is at hand)."""
    bm, bn = tl.grid(tl.cdiv(C.rows, BM), tl.cdiv(C.cols, BN))
    a, b = tl.shared(A.dtype, BM, BK, name="a"), tl.shared(B.dtype, BK, BN, name="b")
    c, t = tl.regs(tl.f32, BM, BN, name="c"), tl.regs(tl.f32, BM, BN, name="t")
    v = tl.rvec(tl.f32, BN, axis="cols", name="v")
    tl.zero(c)
    for it in tl.pipeline(tl.cdiv(A.cols, BK), name="it"):
        tl.load(a, A, (bm, it))
        tl.load(b, B, (it, bn))
        tl.load(v, V, (it, bn))
        if scaled:   # written in the body: it must be whole in registers
            tl.mul(v, v, 2.0)
        tl.zero(t)
        tl.mma_AB(t, a, b, t)
        tl.sub_col(t, t, v)
        tl.add(c, c, t)
    if after:
        tl.sub_col(c, c, v)
    tl.store(C, c, (bm, bn))


@needs_nvrtc
@pytest.mark.parametrize("scaled, after", [(False, False), (True, False), (False, True)])
def test_shared_vectors_take_only_vectors_that_broadcasts_alone_read(scaled, after):
    x = random_array((256, 256), "bf16")
    k = _shifted_products.trace([x, x, x, np.zeros((4, 256), np.float32)], "sm_90a", scaled=scaled, after=after,
                                shared_vectors=True, **WS)
    assert [op.dst.name for op in schedules.pipelined_vectors(k)] == ["v"]
    taken = not (scaled or after)
    assert {t.name for t in schedules.shared_vectors(k)} == ({"v"} if taken else set())
    gen = generate(k)
    assert ("tc::sub_col(t, t, v_stages[stage]);" if taken else "tc::sub_col(t, t, v);") in gen.source
    assert gen.name in toolchain.compile(gen.source, "sm_90a").resources   # the broadcast from shared compiles


def test_epilogue_staging_in_panels_where_the_whole_tile_costs_a_stage():
    """The persistent epilogue stages its tile in 128-byte panels: one staging tile a panel where they all fit
    beside the configured stages, else two taken in turn, else (an odd number of panels, or two still too many)
    the whole set, paid for with stages."""
    m = schedules.TmaMap("C_tma", "C", 64, 256, 64, 128, 2)
    assert schedules.store_buffers(m, lambda n: True) == 4
    assert schedules.store_buffers(m, lambda n: n <= 2) == 2
    assert schedules.store_buffers(m, lambda n: False) == 4
    odd = schedules.TmaMap("C_tma", "C", 64, 192, 64, 128, 2)
    assert schedules.store_buffers(odd, lambda n: n <= 2) == 3
    src = generate(trace("gemm")).source   # 128x256 at 4 stages: the second pair of panels waits on the first's reads
    assert "auto* acc_staging = smem.alloc<tc::st<tc::bf16, 128, 64>>(2);" in src and "tc::store_tma<2>(" in src
