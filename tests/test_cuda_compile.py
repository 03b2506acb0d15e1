"""The CUDA backend without a GPU: every shipped kernel compiles for sm_80 and sm_90a with NVRTC, with no
spills and tensor-core instructions in its SASS; compiler failures and crashes surface as exceptions; the
checks before a launch refuse bad arguments with clear messages."""
import ctypes
import functools
import re
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

import tiles as tl
from tiles import bench, targets
from tiles.backend import DevicePrepared
from tiles.backends.cuda import CudaBackend, codegen, runtime, schedules, toolchain
from tiles.dsl import TileError
from tiles.kernels.gemm import gemm
from tiles.testing import random_array

pytestmark = pytest.mark.skipif(toolchain.available("nvrtc") is not None, reason=str(toolchain.available("nvrtc")))

TARGETS = ("sm_80", "sm_90a")
CASES = [(w, shape) for w in bench.WORKLOADS.values() for shape in w.small_shapes]


@functools.lru_cache(maxsize=None)
def _compiled(source: str, target: str) -> toolchain.Compiled:
    return toolchain.compile(source, target)


def build(kfn, args, target, **consts):
    k = kfn.trace(args, target, **consts)
    gen = codegen.generate_for(k, target)
    return gen, _compiled(gen.source, target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("workload,shape", CASES, ids=[f"{w.name}-{s}" for w, s in CASES])
def test_every_kernel_compiles(workload, shape, target):
    why = workload.supports(target)
    if why:
        pytest.skip(why)
    s = workload.parse(shape)
    kfn, args, consts = workload.main(s, workload.inputs(s, np.random.default_rng(0)))
    gen, c = build(kfn, args, target, **consts)
    res = c.resources[gen.name]
    assert res.spills == 0 and res.stack_frame == 0, f"{gen.name} on {target}: {res}"
    assert 0 < res.registers <= 255
    assert gen.schedule.smem_bytes <= targets.target(target).shared_bytes
    # a kernel that multiplies matrices does it on the tensor cores
    if any(op.name == "mma" for op, _ in kfn.trace(args, target, **consts).walk()):
        assert re.search(r"\b(HMMA|HGMMA|QGMMA)\.", c.sass()), f"{gen.name} on {target}: no HMMA/HGMMA/QGMMA in SASS"


@pytest.mark.parametrize("shape,regs,blocks", [("64x4096", 128, 4), ("64x4096", 96, 5), ("16x16384", 128, 0)])
def test_max_registers_caps_registers(shape, regs, blocks):
    """max_registers=n: the kernel is compiled with exactly n registers a thread at most (__maxnreg__), which
    lets the blocks an SM's 64K registers hold at n fit (one: 16 warps at 16384 columns); layernorm's row kernel."""
    w = bench.WORKLOADS["layernorm"]
    s = w.parse(shape)
    kfn, args, consts = w.main(s, w.inputs(s, np.random.default_rng(0)))
    gen, c = build(kfn, args, "sm_90a", **consts, max_registers=regs)
    assert gen.schedule.min_blocks == (blocks or 1)
    assert f"__maxnreg__({regs})" in gen.source and "__launch_bounds__" not in gen.source
    assert c.resources[gen.name].registers <= regs


def test_max_registers_refused_where_it_cannot_hold():
    a = random_array((128, 128), "bf16")
    with pytest.raises(TileError, match="max_registers is for the warp schedule"):
        build(gemm, [a, a, a], "sm_90a", max_registers=128)
    with pytest.raises(TileError, match="max_registers must be an int"):
        build(gemm, [a, a, a], "sm_90a", schedule="warp", max_registers=8)


@pytest.mark.parametrize("target", TARGETS)
def test_gemm_main_loop_uses_ldmatrix_cp_async_and_hmma(target):
    a = random_array((256, 256), "bf16")
    gen, c = build(gemm, [a, a, a], target, wgmma=False)   # the warp schedule on mma.sync (sm_90a's option)
    sass = c.sass()
    assert sass.count("LDGSTS") >= 2        # cp.async: the pipelined global->shared copies
    assert "LDSM" in sass                    # ldmatrix
    assert sass.count("HMMA.16816.F32.BF16") >= 64
    # the source is the readable kind: one header call per op, the pipeline written out
    assert "tc::pipeline<STAGES>" in gen.source and "tc::mma_AB(acc, a, b, acc);" in gen.source


@tl.kernel
def vector_through_shared(Y, X):
    tl.grid(1)
    v, r = tl.shared_vec(X.dtype, 4096), tl.rvec(tl.f32, 4096, axis="cols")
    tl.load(v, X, (0, 0))
    tl.load(r, v)
    tl.store(Y, r, (0, 0))


def test_shared_memory_accounting():
    a = random_array((256, 256), "bf16")
    k = gemm.trace([a, a, a], "sm_80")    # 128x32 and 32x128 bf16 tiles, 3 stages, + 1 KB alignment slack
    assert schedules.plan(k, "sm_80", 163 * 1024).smem_bytes == 3 * (8192 + 8192) + 1024
    x = random_array((4096,), "f32")
    k = vector_through_shared.trace([x, x], "sm_80")
    assert schedules.plan(k, "sm_80", 163 * 1024).smem_bytes == 4096 * 4 + 1024
    with pytest.raises(TileError, match="needs 50176 bytes of shared memory"):
        schedules.plan(gemm.trace([a, a, a], "sm_80"), "sm_80", 48 * 1024)
    with pytest.raises(TileError, match="multiples of 16, got st<bf16, 64x40>"):   # the planner's own rule (default config)
        schedules.plan(gemm.trace([a, a, a], None, BK=40), "sm_80", 163 * 1024)
    with pytest.raises(TileError, match="K = 40 of a .st<bf16, 128x40>.*steps K by 16"):   # the verifier's, first
        gemm.trace([a, a, a], "sm_80", BK=40)


@tl.kernel
def through_shared(Y, X):
    tl.grid(1)
    x, y, s = tl.regs(tl.f32, 64, 64), tl.regs(Y.dtype, 64, 64), tl.shared(Y.dtype, 64, 64)
    tl.load(x, X, (0, 0))
    tl.copy(y, x)
    tl.store(s, y)
    tl.load(y, s)
    tl.store(Y, y, (0, 0))


@tl.kernel
def reload_in_loop(Y, X):
    tl.grid(1)
    s, x = tl.shared(X.dtype, 64, 64), tl.regs(tl.f32, 64, 64)
    tl.zero(x)
    for i in tl.range(4):
        tl.load(s, X, (0, i))
        tl.load(x, s)
    tl.store(Y, x, (0, 0))


def test_barriers_around_shared_writes_in_loops():
    """A shared tile rewritten every iteration: a barrier before the write (the last iteration's readers) and
    one after it (this iteration's)."""
    k = reload_in_loop.trace([random_array((64, 64), "f32"), random_array((64, 256), "bf16")], "sm_80")
    src = codegen.generate(k, schedules.plan(k, "sm_80", 100_000)).source
    body = src[src.index("for (int i"):].splitlines()[1:5]
    assert [ln.strip() for ln in body] == ["tc::sync();", "tc::load(s, X, {0, 0, 0, i});", "tc::sync();",
                                           "tc::load(r, s);"]


@tl.kernel
def sums_of_rows(Y, S, X, *, loop):
    """Each step: a (64, 64) slice of X, the sum of its squares and the larger of that and its max (two exchanges
    across the warps), and the slice scaled by the latter through shared memory."""
    tl.grid(1)
    xs = tl.shared(X.dtype, 64, 64, name="xs") if loop == "pipeline" else None
    ys = tl.shared(Y.dtype, 64, 64, name="ys")
    x, t = tl.regs(tl.f32, 64, 64, name="x"), tl.regs(tl.f32, 64, 64, name="t")
    a, b = tl.rvec(tl.f32, 64, name="a"), tl.rvec(tl.f32, 64, name="b")
    for i in (tl.pipeline if loop == "pipeline" else tl.range)(X.depth, name="i"):
        if loop == "pipeline":   # through shared memory
            tl.load(xs, X, (i, 0, 0))
            tl.load(x, xs)
        else:                    # straight into registers: no barrier in the step before its first exchange
            tl.load(x, X, (i, 0, 0))
        tl.mul(t, x, x)
        tl.tile_sum(a, t)
        tl.tile_max(b, x, a)
        tl.store(S, a, (i, 0))
        tl.store(S, b, (i + X.depth, 0))
        tl.mul_row(x, x, b)
        tl.store(ys, x)
        tl.store(Y, ys, (i, 0, 0))


def _sums_of_rows_source(loop):
    args = [random_array((3, 64, 64), "bf16"), random_array((6, 64), "f32"), random_array((3, 64, 64), "bf16")]
    k = sums_of_rows.trace(args, "sm_80", loop=loop, workers=4)
    src = codegen.generate(k, schedules.plan(k, "sm_80", 100_000)).source
    return [ln.strip() for ln in src[src.index("compute on iteration" if loop == "pipeline" else "for (int i"):]
            .splitlines()[1:]]


def test_exchanges_take_turns_between_two_buffers():
    """An exchange across the warps writes one of two buffers and holds one barrier: the next exchange takes the
    other buffer, so neither waits for a barrier of its own after reading; a write to a shared tile waits only
    where a warp may still read it. In a pipeline step (the pipeline's barrier before it) nothing is pending; in a
    tl.range loop the last step's reads may be, so its first exchange has a barrier before it."""
    piped = _sums_of_rows_source("pipeline")
    assert piped[piped.index("tc::mul(t, x, x);") + 1:][:2] == ["tc::tile_sum<0>(a, t);", "tc::tile_max<1>(b, x, a);"]
    # the exchanges' barriers saw every read of ys since the last step: its write needs none before it
    at = piped.index("tc::store(ys, x);")
    assert piped[at - 1] != "tc::sync();" and piped[at + 1] == "tc::sync();"
    looped = _sums_of_rows_source("range")
    at = looped.index("tc::tile_sum<0>(a, t);")
    assert looped[at - 1] == "tc::sync();" and looped[at + 1] == "tc::tile_max<1>(b, x, a);"


@pytest.mark.parametrize("loop", ["pipeline", "range"])
def test_exchanges_taking_turns_give_every_step_its_own_sums(loop):
    """The sums above on the CPU engine, against float64, in either loop. (A buffer written again before every warp
    read it is the codegen test's to catch: here the collectives between the read and the next write keep the
    engine's warps in step.)"""
    from tiles.testing import assert_close, poisoned, run
    x = random_array((3, 64, 64), "bf16")
    y, sums = poisoned((3, 64, 64), "bf16"), poisoned((6, 64), "f32")
    run("cuda-emu:sm_80", sums_of_rows, y, sums, x, loop=loop, workers=4)
    f = x.astype(np.float64)
    a = (f * f).sum(axis=(1, 2))
    b = np.maximum(f.max(axis=(1, 2)), a)
    assert_close(sums[:3], np.repeat(a[:, None], 64, 1), "f32")
    assert_close(sums[3:], np.repeat(b[:, None], 64, 1), "f32")
    assert_close(y, f * b[:, None, None], "bf16")


@pytest.mark.parametrize("target", TARGETS)
def test_register_shared_moves_use_ldmatrix_and_stmatrix(target):
    x = random_array((64, 64), "f32")
    gen, c = build(through_shared, [random_array((64, 64), "bf16"), x], target)
    sass = c.sass()
    assert "LDSM" in sass
    assert ("STSM" in sass) == (target == "sm_90a")   # stmatrix exists from sm_90 on


@pytest.mark.parametrize("kernel", ["gemm", "gemm_bt", "attention", "attention_d64"])
def test_sm90a_wgmma_option_puts_hgmma_in_the_main_loop(kernel):
    """wgmma (the sm_90a default): every block-level mma of the bf16 GEMM and attention is a warpgroup wgmma."""
    from tiles.kernels.attention import attention_fwd
    x2, x4, lse = random_array((256, 256), "bf16"), random_array((1, 2, 256, 128), "bf16"), np.zeros((1, 2, 256))
    x4_64 = random_array((1, 2, 256, 64), "bf16")
    kfn, args, consts = {
        "gemm": (gemm, [x2, x2, x2], {}),
        "gemm_bt": (gemm, [x2, x2, x2], dict(trans_b=True)),
        "attention": (attention_fwd, [x4, lse.astype(np.float32), x4, x4, x4, 0.1], dict(D=128, causal=True)),
        "attention_d64": (attention_fwd, [x4_64, lse.astype(np.float32), x4_64, x4_64, x4_64, 0.1], dict(D=64)),
    }[kernel]
    gen, c = build(kfn, args, "sm_90a", wgmma=True, **consts)
    assert "#define TILES_CUDA_WGMMA 1" in gen.source
    sass = c.sass()
    assert re.search(r"HGMMA\.64x\d+x16\.F32\.BF16", sass) and "HMMA" not in sass
    res = c.resources[gen.name]
    assert res.spills == 0 and res.stack_frame == 0, res
    assert "C7511" not in c.log     # ptxas would say so if it serialized the wgmma sequence


# SASS of griddepcontrol: .wait is ACQBULK, .launch_dependents PREEXIT; what touches global memory
GLOBAL_ACCESS = re.compile(r"\b(LDG|STG|LDGSTS|RED|ATOMG|UTMALDG|UTMASTG|UTMAREDG|UBLKCP)\b")


@pytest.mark.parametrize("target", TARGETS)
def test_sm90a_code_waits_for_the_grid_before_it_ahead_of_any_global_access(target):
    """Programmatic dependent launch (runtime.Launch): the warp-specialized gemm (the producer's TMA loads, the
    consumers' stores) and sum_parts (the warp schedule, Apple's second step of a split of K, compiled here for
    CUDA all the same) wait for the grids before them and let the next be scheduled once, every thread, before
    any global memory access; sm_80 code does neither."""
    from tiles.kernels.gemm import sum_parts
    c, a, b = random_array((1, 256), "bf16"), random_array((1, 512), "bf16"), random_array((512, 256), "bf16")
    steps = gemm.steps([c, a, b], "apple", BM=64, BN=128, BK=64, stages=5, workers=1 if target == "sm_90a" else 4,
                       SPLIT=4)
    assert [f for f, _, _ in steps] == [gemm, sum_parts]
    for f, args, kw in steps:
        gen, compiled = build(f, args, target, **kw)
        sass = compiled.sass()
        first_access = GLOBAL_ACCESS.search(sass).start()
        assert gen.schedule.warp_specialized == (target == "sm_90a" and f is gemm)
        if target == "sm_80":
            assert not gen.schedule.pdl and "wait_prior_grids" not in gen.source and "ACQBULK" not in sass
            continue
        assert gen.schedule.pdl and sass.count("ACQBULK") == sass.count("PREEXIT") == 1, f.name
        assert sass.index("ACQBULK") < first_access and sass.index("PREEXIT") < first_access, f.name
        if gen.schedule.warp_specialized:   # before the roles split: the whole block waits
            assert gen.source.index("tc::wait_prior_grids();") < gen.source.index("if (tc::is_producer())")


@pytest.mark.parametrize("target", TARGETS)
def test_split_of_k_is_one_launch_that_fences_counts_and_reads_the_parts_from_l2(target):
    """gemm's split of K into a bf16 C, one launch (tl.store_sum): its SASS releases the block's parts device-wide
    (MEMBAR.SC.GPU) before the count (ATOMG on the tile's counter), and the last block reads the parts with strong
    device-scope loads (ld.global.cg), not through its SM's L1; no spills."""
    c, a, b = random_array((16, 256), "bf16"), random_array((16, 512), "bf16"), random_array((512, 256), "bf16")
    ((f, args, kw),) = gemm.steps([c, a, b], target, BM=64, BN=128, BK=64, stages=4,
                                  workers=1 if target == "sm_90a" else 4, SPLIT=4)
    assert f is gemm and len(args) == 5
    gen, compiled = build(f, args, target, **kw)
    sass = compiled.sass()
    assert "tc::store_sum<4>(C, acc" in gen.source
    fence, count = sass.index("MEMBAR.SC.GPU"), sass.index("ATOMG.E.ADD.STRONG.GPU")
    assert fence < count < sass.index("LDG.E.64.STRONG.GPU")
    assert compiled.resources[gen.name].spills == 0 and compiled.resources[gen.name].stack_frame == 0


@tl.kernel
def drop(Y, X, p, seed, offset):
    br, bc = tl.grid(tl.cdiv(X.rows, 64), tl.cdiv(X.cols, 128))
    x = tl.regs(tl.f32, 64, 128)
    tl.load(x, X, (br, bc))
    tl.dropout(x, x, p, seed, offset, br * 64, bc * 128)
    tl.store(Y, x, (br, bc))


@pytest.mark.parametrize("target", TARGETS)
def test_dropout_compiles_without_spills(target):
    x = random_array((64, 128), "f32")
    gen, c = build(drop, [x, x, 0.25, 7, 3], target)
    assert c.resources[gen.name].spills == 0 and c.resources[gen.name].stack_frame == 0


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
def test_philox_matches_the_python_definition(tmp_path):
    """tc::philox4x32_10 built for the host, against tiles.philox on random counters and keys."""
    from tiles import philox
    rng = np.random.default_rng()
    words = rng.integers(0, 2**32, size=(16, 6), dtype=np.uint64)
    rows = ",".join("{" + ",".join(f"{int(w)}u" for w in row) + "}" for row in words)
    (tmp_path / "philox.cu").write_text(
        "#include <cstdio>\n#include <tiles_cuda/tiles.cuh>\n"
        f"unsigned in[][6] = {{{rows}}};\n"
        "int main() { for (auto& v : in) { uint4 w = tc::philox4x32_10(make_uint4(v[0], v[1], v[2], v[3]), v[4], v[5]);"
        " printf(\"%u %u %u %u\\n\", w.x, w.y, w.z, w.w); } }\n")
    exe = tmp_path / "philox"
    subprocess.run(["nvcc", "-std=c++17", f"-I{toolchain.HEADERS}", f"-I{toolchain.cuda_include()}",
                    "-o", str(exe), str(tmp_path / "philox.cu")], check=True, capture_output=True)
    got = [[int(x) for x in ln.split()] for ln in subprocess.run([str(exe)], capture_output=True, text=True,
                                                                 check=True).stdout.splitlines()]
    want = np.stack(philox.philox4x32(words[:, :4].T, words[:, 4:].T), axis=1).tolist()
    assert got == want


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
def test_nvcc_compiles_the_same_source():
    a = random_array((64, 64), "f16")
    gen, c = build(gemm, [a, a, a], "sm_90a")
    by_nvcc = toolchain.compile(gen.source, "sm_90a", compiler="nvcc")
    assert by_nvcc.resources[gen.name].spills == 0
    assert "HMMA" in by_nvcc.sass()


def test_compile_error_names_the_line():
    src = '#include <tiles_cuda/tiles.cuh>\nextern "C" __global__ void k(float* x) {\n    x[0] = undefined_name;\n}\n'
    with pytest.raises(toolchain.CompileError, match=r"undefined_name") as e:
        toolchain.compile(src, "sm_80")
    assert "> x[0] = undefined_name;" in str(e.value)


def test_unknown_target_is_refused():
    with pytest.raises(ValueError, match="unknown CUDA target"):
        toolchain.compile("", "sm_75")


def test_compiler_crash_is_an_exception(monkeypatch):
    crash = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]
    monkeypatch.setattr(toolchain, "_worker_cmd", lambda: crash)
    with pytest.raises(toolchain.CompilerCrash, match="SIGSEGV"):
        toolchain.compile("__global__ void k() {}", "sm_90a")


def test_compiler_hang_is_an_exception(monkeypatch):
    monkeypatch.setattr(toolchain, "_worker_cmd", lambda: [sys.executable, "-c", "import time; time.sleep(30)"])
    with pytest.raises(toolchain.CompilerCrash, match="did not finish"):
        toolchain.compile("__global__ void k() {}", "sm_80", timeout=1)


def test_resources_parse_ptxas_report():
    log = ("ptxas info    : Compiling entry function 'gemm' for 'sm_90a'\n"
           "ptxas info    : Function properties for gemm\n"
           "    8 bytes stack frame, 16 bytes spill stores, 12 bytes spill loads\n"
           "ptxas info    : Used 168 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]\n")
    r = toolchain.parse_resources(log)["gemm"]
    assert (r.registers, r.barriers, r.shared_static, r.stack_frame, r.spills) == (168, 1, 2048, 8, 28)


def test_resources_from_the_cubin_where_the_log_has_no_report(monkeypatch):
    """A log of the front end's warnings only (seen from NVRTC on the H200): the cubin's own record answers."""
    src = ('extern "C" __global__ void k(float* x, int n) { float unused;\n'
           '  for (int i = threadIdx.x; i < n; i += 32) x[i] = x[i] * 2.f; }\n')
    real = toolchain.compile(src, "sm_90a")
    monkeypatch.setattr(toolchain, "parse_resources", lambda log: {})
    c = toolchain.compile(src, "sm_90a")
    if toolchain._tool("cuobjdump") is None:
        pytest.skip("no cuobjdump")
    assert (c.resources["k"].registers, c.resources["k"].spills, c.resources["k"].stack_frame) == \
        (real.resources["k"].registers, 0, 0) and c.resources["k"].registers > 0


@pytest.fixture
def compiles(tmp_path, monkeypatch) -> list:
    """Every real compile from here on, with the disk cache in a fresh folder."""
    monkeypatch.setenv("TILES_CACHE", str(tmp_path))
    calls, real = [], toolchain.compile
    monkeypatch.setattr(toolchain, "compile", lambda *a, **k: calls.append(a) or real(*a, **k))
    return calls


def test_disk_cache_compiles_once(compiles, monkeypatch):
    calls = compiles
    src = '#include <tiles_cuda/tiles.cuh>\nextern "C" __global__ void k(float* x) { x[0] = 1.f; }\n'
    p1 = runtime.cached_cubin(src, "sm_80", driver="13000")
    p2 = runtime.cached_cubin(src, "sm_80", driver="13000")
    # a new driver: a file of its own, from the one compile of the source (NVRTC's output does not depend on it)
    p3 = runtime.cached_cubin(src, "sm_80", driver="13010")
    assert p1 == p2 != p3 and len(calls) == 1 and p1.read_bytes()[:4] == b"\x7fELF" == p3.read_bytes()[:4]
    # other header contents (another tiles version), same source: compiled again, never the old cubin
    monkeypatch.setattr(toolchain, "headers_digest", lambda: "other headers")
    assert runtime.cached_cubin(src, "sm_80", driver="13000") not in (p1, p3) and len(calls) == 2


def test_compile_cache_is_shared_by_the_static_report_and_the_runtime(compiles):
    """The tuner's pruning (toolchains.static) compiles a candidate once; its timed launch loads that cubin."""
    calls = compiles
    src = '#include <tiles_cuda/tiles.cuh>\nextern "C" __global__ void k(float* x) { x[0] = 2.f; }\n'
    c = toolchain.cached_compile(src, "sm_90a")
    again = toolchain.cached_compile(src, "sm_90a")
    assert runtime.cached_cubin(src, "sm_90a", driver="13000").read_bytes() == c.cubin == again.cubin
    assert len(calls) == 1 and again.log == c.log and again.resources == c.resources


def test_headers_digest_follows_every_header(tmp_path, monkeypatch):
    import shutil
    shutil.copytree(toolchain.HEADERS, tmp_path / "include")
    monkeypatch.setattr(toolchain, "HEADERS", tmp_path / "include")
    digests = []
    for edit in (None, "tiles_cuda/memory.cuh", "tiles_cuda/philox.h", "tiles_cuda/sm90/wgmma_ops.cuh"):
        if edit:
            with open(tmp_path / "include" / edit, "a") as f:
                f.write("// edited\n")
        toolchain.headers_digest.cache_clear()
        digests.append(toolchain.headers_digest())
    toolchain.headers_digest.cache_clear()
    assert len(set(digests)) == 4


# ---- checks before a launch, on stand-ins for device arrays ----------------------------------------------------

class FakeDeviceArray:
    """Looks like a CUDA array (shape, dtype, strides, __cuda_array_interface__) without a GPU."""

    def __init__(self, shape, dtype, *, ptr=1 << 20, strides=None, device=0):
        self.dtype = np.dtype(random_array((1,), dtype).dtype)
        self.shape, self.itemsize, self.device = tuple(shape), self.dtype.itemsize, device
        dense = [self.itemsize * int(np.prod(shape[i + 1:])) for i in range(len(shape))]
        self.strides = tuple(strides) if strides else tuple(dense)
        self.__cuda_array_interface__ = {"shape": self.shape, "typestr": self.dtype.str, "data": (ptr, False),
                                         "strides": self.strides, "version": 3}


def gemm_args(m=64, n=48, k=32, **over):
    c, a, b = FakeDeviceArray((m, n), "f32"), FakeDeviceArray((m, k), "bf16"), FakeDeviceArray((k, n), "bf16")
    args = dict(C=c, A=a, B=b)
    args.update(over)
    return [args["C"], args["A"], args["B"]]


def check(args):
    return runtime.check_launch(gemm.trace(args, "sm_90a"), args, device=0)


def test_good_arguments_pass_and_pack():
    args = gemm_args()
    env = check(args)
    assert env[("dim", "A", 2)] == 64
    params = runtime.pack(gemm.trace(args, "sm_90a"), args)
    # per global: pointer, 4 dims, 3 strides (elements; the unit dims of a 2-D array stride 0)
    assert [int(x) for x in params[:8]] == [1 << 20, 1, 1, 64, 48, 0, 0, 48]
    assert [x.dtype for x in params[:8]] == [np.uint64] + [np.int32] * 4 + [np.int64] * 3
    assert len(params) == 24


class FakeDriver:
    """cuLaunchKernel as the driver sees it: reads every parameter back through the pointer array."""

    def __init__(self, sizes, result=0):
        self.sizes, self.result, self.calls = sizes, result, []

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        table = (ctypes.c_uint64 * len(self.sizes)).from_address(params)
        values = [ctypes.string_at(table[i], n) for i, n in enumerate(self.sizes)]
        self.calls.append(((f, gx, gy, gz, bx, by, bz, smem, stream, extra), values))
        return self.result

    def cuLaunchKernelEx(self, config, f, params, extra):
        """Reads the launch configuration where cuda.h puts it, byte by byte: CUlaunchConfig's seven unsigned ints
        (grid, block, shared memory bytes), then at byte 32 the stream, 40 the attributes, 48 their count; each
        CUlaunchAttribute 72 bytes, its id first and its value at byte 8."""
        *dims, stream, attrs, count = struct.unpack("<7I4xQQI4x", ctypes.string_at(ctypes.addressof(config._obj), 56))
        attributes = [struct.unpack("<i4xi60x", ctypes.string_at(attrs + 72 * i, 72)) for i in range(count)]
        table = (ctypes.c_uint64 * len(self.sizes)).from_address(params)
        values = [ctypes.string_at(table[i], n) for i, n in enumerate(self.sizes)]
        self.calls.append(((f, *dims, stream, extra), attributes, values))
        return self.result

    def cuGetErrorName(self, err, out):
        out._obj.value = b"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"
        return 0


def test_launch_packs_parameters_once_for_the_driver(monkeypatch):
    args = gemm_args()
    params = runtime.pack(gemm.trace(args, "sm_90a"), args)
    tmap = np.arange(16, dtype="<u8").view(runtime.TENSOR_MAP)   # a struct parameter, 128 bytes
    launch = runtime.Launch(0xF00, (3, 2), (128,), 4096, params + [tmap])
    sizes = [p.dtype.itemsize for p in params] + [128]
    fake = FakeDriver(sizes)
    monkeypatch.setattr(runtime, "driver", lambda: fake)
    assert launch(stream=0x57) == launch(stream=0x58) == 0   # the same packed parameters, another stream
    (call1, values1), (call2, values2) = fake.calls
    assert call1 == (0xF00, 3, 2, 1, 128, 1, 1, 4096, 0x57, None) and call2[8] == 0x58
    assert values1 == values2 == [p.tobytes() for p in params] + [tmap.tobytes()]


def test_programmatic_launch_hands_the_driver_the_documented_structs(monkeypatch):
    """cuLaunchKernelEx: the same grid, block, shared memory and packed parameters as cuLaunchKernel, the stream,
    and one attribute, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (6) with value 1."""
    args = gemm_args()
    params = runtime.pack(gemm.trace(args, "sm_90a"), args)
    launch = runtime.Launch(0xF00, (3, 2), (384,), 4096, params, programmatic=True)
    fake = FakeDriver([p.dtype.itemsize for p in params])
    monkeypatch.setattr(runtime, "driver", lambda: fake)
    assert launch(stream=0x57) == launch(stream=0x58) == launch(stream=0x57) == 0
    assert [call for call, _, _ in fake.calls] == [(0xF00, 3, 2, 1, 384, 1, 1, 4096, s, None)
                                                   for s in (0x57, 0x58, 0x57)]
    assert all(attributes == [(6, 1)] for _, attributes, _ in fake.calls)
    assert all(values == [p.tobytes() for p in params] for _, _, values in fake.calls)
    assert sorted(launch.configs) == [0x57, 0x58]   # one configuration per stream, made once


def test_launch_structs_have_the_documented_layout(tmp_path):
    """CUlaunchConfig and CUlaunchAttribute (cuda.h, CUDA 12.0 on): sizes and offsets as documented, and as a C
    compiler lays out the header's own structs where a compiler and cuda.h are here."""
    config, attribute = runtime.LaunchConfig, runtime.LaunchAttribute
    offsets = {name: getattr(config, name).offset for name, _ in config._fields_}
    want = dict(gridDimX=0, gridDimY=4, gridDimZ=8, blockDimX=12, blockDimY=16, blockDimZ=20, sharedMemBytes=24,
                hStream=32, attrs=40, numAttrs=48)
    assert offsets == want and ctypes.sizeof(config) == 56
    assert (ctypes.sizeof(attribute), attribute.id.offset, attribute.value.offset) == (72, 0, 8)
    assert ctypes.sizeof(runtime.LaunchAttributeValue) == 64 and ctypes.alignment(attribute) == 8
    assert bytes(runtime.PROGRAMMATIC)[:12] == bytes([6, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0])
    cc = shutil.which("cc") or shutil.which("gcc")
    header = toolchain.cuda_include() / "cuda.h"
    if cc is None or not header.is_file():
        pytest.skip("no C compiler or cuda.h to check the layout against")
    fields = ", ".join(f'(int)offsetof(CUlaunchConfig, {n})' for n in want)
    (tmp_path / "layout.c").write_text(
        "#include <stddef.h>\n#include <stdio.h>\n#include <cuda.h>\nint main(void) {\n"
        f'  int v[] = {{{fields}, (int)sizeof(CUlaunchConfig), (int)sizeof(CUlaunchAttribute),\n'
        "    (int)offsetof(CUlaunchAttribute, value), (int)sizeof(CUlaunchAttributeValue),\n"
        "    CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION};\n"
        '  for (int i = 0; i < (int)(sizeof v / sizeof v[0]); ++i) printf("%d ", v[i]);\n  return 0;\n}\n')
    subprocess.run([cc, f"-I{header.parent}", "-o", str(tmp_path / "layout"), str(tmp_path / "layout.c")],
                   check=True, capture_output=True)
    got = [int(x) for x in subprocess.run([str(tmp_path / "layout")], capture_output=True, text=True).stdout.split()]
    assert got == list(want.values()) + [56, 72, 8, 64, runtime.PROGRAMMATIC_STREAM_SERIALIZATION]


@pytest.mark.parametrize("capability,driver,env,want", [
    ((9, 0), 13000, None, True), ((9, 0), 13000, "0", False), ((9, 0), 13000, "1", True),
    ((8, 6), 13000, None, False), ((9, 0), 12020, None, False), ((10, 0), 12080, None, True)])
def test_programmatic_launches_on_hopper_unless_turned_off(capability, driver, env, want, monkeypatch):
    """From sm_90 on (griddepcontrol), under a driver whose stream capture keeps them (12.3 on); TILES_PDL=0: none."""
    if env is None:
        monkeypatch.delenv("TILES_PDL", raising=False)
    else:
        monkeypatch.setenv("TILES_PDL", env)
    assert runtime.programmatic_launches(capability, driver) == want


@pytest.mark.parametrize("target", TARGETS)
def test_a_launch_is_programmatic_where_its_code_waits(target, monkeypatch):
    """On a Hopper device, sm_90a code (the 'cuda' backend) launches programmatically; sm_80 code ('cuda:sm_80',
    as PTX the driver compiles) has no griddepcontrol.wait, and launches as an ordinary launch."""
    rt = object.__new__(runtime.Runtime)
    rt.target, rt.max_smem, rt.sms, rt.tensor_maps, rt.programmatic = target, 227 * 1024, 132, {}, True
    rt.compiled = lambda k, device, schedule=None: (rt.generate(k, schedule), 0xF00)
    rt.tensor_map = lambda spec, address: np.zeros(1, runtime.TENSOR_MAP)
    args = gemm_args()
    launch = rt.plan_launch(gemm.trace(args, target), args, device=0)
    assert launch.programmatic == (target == "sm_90a")


class FakeGpu(CudaBackend):
    """The cuda backend on fake_runtime, its temporaries (Backend.workspace) fake arrays, one per (shape, dtype,
    fill, nth), kept, at addresses of their own."""

    def __init__(self, target="sm_90a"):
        super().__init__()
        self._runtime, self.arrays = fake_runtime(target), {}

    @property
    def target(self):
        return self._runtime.target

    def workspace(self, spec, like, nth=0):
        key = (spec.shape, spec.dtype, spec.fill, nth)
        if key not in self.arrays:
            address = (3 + len(self.arrays)) << 32
            self.arrays[key] = FakeDeviceArray(spec.shape, tl.dtypes.of(spec.dtype).name, ptr=address)
        return self.arrays[key]


def fake_runtime(target: str) -> runtime.Runtime:
    """A Runtime that plans and packs as on a Hopper GPU: no cubins (a fake function), tensor maps whose bytes
    are their address and a digest of their spec, launches kept (`issued`: function, grid, block and the
    parameter bytes as the driver would read them)."""
    import types
    rt = object.__new__(runtime.Runtime)
    rt.target, rt.max_smem, rt.sms, rt.tensor_maps, rt.programmatic = target, 227 * 1024, 132, {}, True
    rt.compiled = lambda k, device, schedule=None: (rt.generate(k, schedule), 0xF00)
    rt.tensor_map = lambda spec, address: np.array([address, hash(spec) & (2**63 - 1)] + [0] * 14, "<u8").view(
        runtime.TENSOR_MAP)
    rt.cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0),
                                                               get_current_stream=lambda: types.SimpleNamespace(ptr=7)))
    rt.issued = []
    rt.issue = lambda launch, stream: rt.issued.append((launch.args, bytes(launch.buffer)))
    return rt


def moved(args, by: int):
    """The arguments again, each array at an address `by` further on (the same shapes, strides and dtypes)."""
    return [FakeDeviceArray(a.shape, a.dtype, ptr=a.__cuda_array_interface__["data"][0] + by, strides=a.strides)
            if isinstance(a, FakeDeviceArray) else a for a in args]


def prepared_cases():
    from tiles.kernels import attention, rmsnorm, softmax
    q, lse = FakeDeviceArray((2, 4, 256, 128), "bf16", ptr=1 << 24), FakeDeviceArray((2, 4, 256), "f32", ptr=2 << 24)
    kv = [FakeDeviceArray((2, 2, 256, 128), "bf16", ptr=(3 + i) << 24) for i in range(2)]
    rows = [FakeDeviceArray((16, 128, 64), "bf16", ptr=(5 + i) << 24) for i in range(2)]   # (rows, C/K, K)
    wide = [FakeDeviceArray((16, 8192), "bf16", ptr=(7 + i) << 24) for i in range(2)]
    def distinct(m, n, k):   # gemm_args puts every array at one address
        return [FakeDeviceArray(a.shape, a.dtype, ptr=(11 + i) << 24) for i, a in enumerate(gemm_args(m, n, k))]
    yield "gemm", gemm, distinct(256, 512, 1024), {}, True
    yield "gemm, K split", gemm, distinct(64, 256, 4096), dict(SPLIT=4, BM=64, BN=128), True
    yield "attention", attention.attention_fwd, [q, lse, q, *kv, 0.125], dict(D=128, causal=True), True
    yield "softmax, split in two steps", softmax.softmax_fwd, wide, dict(SPLIT=4), False
    yield "rmsnorm rows", rmsnorm.rmsnorm_rows, [rows[0], FakeDeviceArray((16, 1), "f32", ptr=9 << 24), rows[1],
                                                 FakeDeviceArray((128, 64), "bf16", ptr=10 << 24), 1e-6], \
        rmsnorm.launch_plan(16, 8192), False


@pytest.mark.parametrize("name,kfn,args,kw,maps", list(prepared_cases()), ids=[c[0] for c in prepared_cases()])
def test_a_prepared_launch_packs_what_a_fresh_plan_packs_for_the_new_addresses(name, kfn, args, kw, maps):
    """Backend.prepare on the GPU (tiles.backend.DevicePrepared): called with every array 16 MB further on, each
    step's parameter bytes (addresses, shapes, strides, scalars, tensor maps re-made for the new addresses) are
    those a fresh plan of the moved arrays packs; the temporaries keep theirs (kept workspaces)."""
    ws = FakeGpu()
    rt = ws.runtime
    prepared = DevicePrepared.of(ws, kfn, args, dict(kw))
    assert prepared is not None
    new = moved(args, 1 << 24)
    prepared([a.__cuda_array_interface__["data"][0] if isinstance(a, FakeDeviceArray) else 0 for a in new])
    from tiles.backend import placed, temporaries
    steps = kfn.steps(new, "sm_90a", **kw)
    fresh = [rt.plan_launch(f.trace(a, "sm_90a", **k), a, 0) for f, a, k in
             placed(steps, {t: ws.workspace(t, None, nth) for t, nth in temporaries(steps)})]
    assert len(rt.issued) == len(fresh) >= 1
    for (launch_args, got), want in zip(rt.issued, fresh):
        assert launch_args == want.args and got == bytes(want.buffer)
    assert any(spec is not None for _, slots in prepared.steps for _, _, spec in slots) == maps


def test_a_prepared_launch_refuses_an_address_off_alignment_before_any_step():
    gpu = FakeGpu()
    rt = gpu.runtime
    args = gemm_args(64, 256, 4096)
    prepared = DevicePrepared.of(gpu, gemm, args, dict(SPLIT=4, BM=64, BN=128))
    with pytest.raises(TileError, match="argument A: data must start on a 16-byte boundary"):
        prepared([1 << 30, (1 << 30) + 8, 1 << 31])
    assert rt.issued == []


def test_launch_errors_name_the_driver_error(monkeypatch):
    fake = FakeDriver([4], result=701)
    monkeypatch.setattr(runtime, "driver", lambda: fake)
    with pytest.raises(RuntimeError, match=r"cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES \(701\)"):
        runtime.check(runtime.Launch(1, (1,), (32,), 0, [np.int32(7)])(stream=0), "cuLaunchKernel")


@pytest.mark.parametrize("bad,message", [
    (dict(A=FakeDeviceArray((64, 32), "bf16", ptr=(1 << 20) + 2)), "16-byte boundary"),
    (dict(A=FakeDeviceArray((64, 32), "bf16", device=1)), "on device 1"),
    (dict(A=random_array((64, 32), "bf16")), "not on the GPU"),
    (dict(A=FakeDeviceArray((64, 32), "bf16", strides=(2, 128))), "last dim must be contiguous"),
    (dict(A=FakeDeviceArray((64, 40), "bf16")), "argument check failed"),
    (dict(A=FakeDeviceArray((64, 32), "f16")), "expected dtype bf16, got f16"),
    (dict(A=FakeDeviceArray((2, 64, 32), "bf16")), "expected rank 2"),
])
def test_bad_arguments_are_refused(bad, message):
    kernel = gemm.trace(gemm_args(), "sm_90a")    # compiled for good arguments, launched with bad ones
    with pytest.raises(TileError, match=message):
        runtime.check_launch(kernel, gemm_args(**bad), device=0)


@pytest.mark.parametrize("bad", [k for k, _ in test_bad_arguments_are_refused.pytestmark[0].args[1]])
def test_a_remembered_launch_is_only_reused_for_arguments_that_would_pass_the_same_checks(bad):
    """The runtime skips the checks for a launch whose arguments sign the same as an earlier one's: every
    argument a check refuses must sign differently from the good one it replaces."""
    good = gemm_args()
    assert [runtime.launch_signature(a) for a in good] == [runtime.launch_signature(a) for a in gemm_args()]
    changed = gemm_args(**bad)
    assert runtime.launch_signature(changed[1]) != runtime.launch_signature(good[1])
    assert runtime.launch_signature(0.5) != runtime.launch_signature(0.25) != runtime.launch_signature(1)


def test_grid_beyond_cuda_limits_is_refused():
    from tiles.kernels.attention import attention_fwd
    q = FakeDeviceArray((70000, 1, 64, 64), "bf16")          # batch is grid dim z, at most 65535
    lse = FakeDeviceArray((70000, 1, 64), "f32")
    args = [q, lse, q, q, q, 0.125]
    with pytest.raises(TileError, match="grid dim z is 70000 blocks"):
        runtime.check_launch(attention_fwd.trace(args, "sm_90a", D=64), args, device=0)


def test_target_of_compute_capability():
    assert runtime.target_of((9, 0)) == "sm_90a"
    assert runtime.target_of((8, 6)) == "sm_80"
    assert runtime.target_of((7, 5)) is None and runtime.target_of((10, 0)) is None


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not on the PATH")
def test_sm80_code_as_ptx_compiles_for_hopper(tmp_path, monkeypatch):
    """cuda:sm_80 on a Hopper GPU hands the driver sm_80 PTX: the same source's PTX for compute_80, cached apart
    from its cubin, which ptxas (what the driver runs when the module loads) compiles for sm_90a."""
    monkeypatch.setenv("TILES_CACHE", str(tmp_path))
    a = random_array((64, 64), "bf16")
    gen, _ = build(gemm, [a, a, a], "sm_80")
    ptx = runtime.cached_cubin(gen.source, "sm_80", driver="13000", ptx=True)
    cubin = runtime.cached_cubin(gen.source, "sm_80", driver="13000")
    text = ptx.read_bytes()
    assert ptx != cubin and ptx.suffix == ".ptx" and text.endswith(b"\0") and b"\0" not in text[:-1]
    assert re.search(rb"\.target sm_80\b", text) and b"mma.sync.aligned.m16n8k16" in text
    (tmp_path / "k.ptx").write_bytes(text[:-1])
    p = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert toolchain.parse_resources(p.stderr)[gen.name].spills == 0


def test_cuda_sm80_backend_runs_only_where_the_device_is_newer(monkeypatch):
    from tiles.backend import get
    b = get("cuda:sm_80")
    assert b.target == "sm_80" and b.kind == "device"
    probe = {"hopper": ("sm_90a", None), "ampere": ("sm_80", None), "none": (None, "no CUDA device")}
    for device, want in [("hopper", None), ("ampere", "as the 'cuda' backend"), ("none", "no CUDA device")]:
        monkeypatch.setattr(runtime, "probe", lambda d=device: probe[d])
        why = b.available()
        assert why is None if want is None else want in why, (device, why)
