"""The `tiles` command on a machine without a GPU: every command runs and prints the rows it promises."""
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from tiles import backend as registry
from tiles import bench, cli, report, toolchains
from tiles.report import Row
from tiles.testing import errors


def tiles(capsys, *argv) -> tuple[int, str]:
    rc = cli.main(list(argv))
    return rc, capsys.readouterr().out


def row_of(out: str, *words: str) -> str:
    """The one table line that has all these words."""
    hits = [ln for ln in out.splitlines() if all(w in ln.split() for w in words)]
    assert len(hits) == 1, f"{words}: {len(hits)} lines in\n{out}"
    return hits[0]


CPU = [b.name for b in cli.runnable(None) if b.kind in ("reference", "emulator")]
HAS_GPU = any(b.kind == "device" for b in cli.runnable(None))


def test_devices(capsys, monkeypatch):
    monkeypatch.setattr(registry, "_VENDORS", registry._VENDORS + ("nosuchvendor",))
    rc, out = tiles(capsys, "devices")
    assert rc == 0
    for b in registry._REGISTRY.values():
        assert re.search(rf"^{re.escape(b.name)}\s+{b.kind}\s", out, re.M), b.name
    assert "broken: tiles.backends.nosuchvendor does not import" in out
    for tool in ("NVRTC", "nvcc", "clang (AMDGPU)", "xcrun metal"):
        assert tool in out
    targets = out.split("Targets")[1]
    for t in ("sm_80", "sm_90a", "gfx942", "gfx950", "apple"):
        assert re.search(rf"^{t}\s", targets, re.M)
    if "hip-emu:gfx942" in CPU:
        assert "hip-emu:gfx942" in row_of(targets, "gfx942")


@pytest.mark.skipif(HAS_GPU, reason="the no-GPU table")
def test_compare_gemm_without_gpu(capsys, tmp_path):
    """Issue 7's check: rows for the reference and every CPU execution path, compile-only rows for the rest."""
    path = tmp_path / "gemm.json"
    rc, out = tiles(capsys, "compare", "gemm", "--shapes", "70x40x50", "--json", str(path))
    assert rc == 0, out
    for name in CPU:
        line = row_of(out, "gemm", "70x40x50", name)
        assert " ok " in line and "emulated" in line
    assert re.search(r"\bsm_80\b.*regs \d+, smem [\d.]+ KB, spills 0, occ \d+ blk/SM.*HMMA", out)
    assert re.search(r"\bsm_90a\b.*regs \d+", out)
    for t in ("gfx942", "gfx950"):
        assert re.search(rf"hip \(ziglang clang\)\s+{t}.*regs v\d+ a\d+.*v_mfma", out), t
    assert re.search(r"metal \(g\+\+ with metal_emu.h\)\s+apple", out)
    rows = report.load(str(path))
    assert {r.kind for r in rows} == {"reference", "emulator", "compile-only"} - ({"emulator"} if len(CPU) == 1 else set())
    assert all(r.ok for r in rows if r.kind in ("reference", "emulator"))
    assert json.loads(path.read_text())["machine"] == report.machine()


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU backend")
def test_compare_on_the_gpu(capsys, tmp_path):
    """The device row is checked and timed, beside the vendor library's row and the ratio between them."""
    dev = next(b for b in cli.runnable(None) if b.kind == "device")
    path = tmp_path / "gpu.json"
    rc, out = tiles(capsys, "compare", "gemm", "--backends", dev.name, "--shapes", "1000x520x260",
                    "--no-compile", "--json", str(path))
    assert rc == 0, out
    mine, lib = report.load(str(path))
    assert mine.ok and mine.time_s > 0 and mine.tflops > 0 and lib.kind == "library"
    assert mine.vs_lib == pytest.approx(lib.time_s / mine.time_s)
    if mine.peak_pct is not None:
        assert 0 < mine.peak_pct < 100


def test_plot_needs_timed_rows(capsys, tmp_path):
    p = tmp_path / "cpu.json"
    report.save([Row("gemm", "8x8x8", "reference", "reference", "CPU", ok=True)], str(p))
    assert cli.main(["compare", "--merge", str(p), "--plot", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert "nothing to plot" in err or "needs matplotlib" in err


def test_compare_logs_each_row_as_it_is_made_where_stderr_is_not_a_terminal(capsys):
    """A run cut short by a time limit (a batch job's log) keeps what it measured: every row also goes to
    stderr, one line each, as soon as it exists."""
    rc = cli.main(["compare", "softmax", "--backends", "reference,metal-emu", "--shapes", "20x96", "33x1000",
                   "--no-compile"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 0
    for shape in ("20x96", "33x1000"):
        for backend in ("reference", "metal-emu"):
            # (a row's label may name what the heuristic chose: metal-emu splits 33x1000's rows, SPLIT=4)
            assert any(re.match(rf"softmax  {shape}( \[heuristic: [^]]*\])?  {backend}  ", ln) and "check ok" in ln
                       for ln in err), (shape, err)


def test_compare_keeps_the_rows_done_before_a_time_limit_stops_it(monkeypatch, capsys, tmp_path):
    """A time limit's SIGTERM (or Ctrl-C) mid-run: the rows finished before it are printed as the table and saved
    with --json, and the exit status says it was stopped (130)."""
    import os
    import signal
    made, run_cpu = [], cli.run_cpu

    def stopped_at_the_second(w, s, label, b, host):
        made.append(label)
        if len(made) == 2:
            os.kill(os.getpid(), signal.SIGTERM)   # as `timeout` sends it
        return run_cpu(w, s, label, b, host)
    monkeypatch.setattr(cli, "run_cpu", stopped_at_the_second)
    saved = tmp_path / "rows.json"
    rc = cli.main(["compare", "softmax", "--backends", "reference", "--shapes", "20x96", "30x64", "--no-compile",
                   "--json", str(saved)])
    out, err = capsys.readouterr()
    assert rc == 130 and "interrupted; the 1 rows above finished before it" in err
    assert "20x96" in out and "30x64" not in out
    assert [r.shape for r in report.load(saved)] == ["20x96"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL   # the handler is put back


def test_compare_skips_what_the_cpu_cannot_afford(capsys):
    rc, out = tiles(capsys, "compare", "attention", "--backends", "reference", "--shapes", "1x1x4096x128",
                    "--no-compile")
    assert rc == 0
    assert "too much for CPU execution" in row_of(out, "attention", "1x1x4096x128", "reference")


def test_inspect_set_reaches_the_source(capsys):
    rc, out = tiles(capsys, "inspect", "attention", "--shape", "1x2x80x64", "--target", "sm_90a", "--emit",
                    "source", "--set", "BN=64", "deferred=True")
    assert rc == 0 and "BN=64" in out and "tc::consume_deferred<" in out
    with pytest.raises(SystemExit, match="one value a name"):
        tiles(capsys, "inspect", "attention", "--target", "sm_90a", "--emit", "source", "--set", "BN=64,128")


def test_compare_set_overrides_the_main_kernels_configuration(capsys):
    """--set reaches the main kernel (its rows are checked and compiled with it), names itself in the shape
    column, and refuses a name that is neither a constant nor an option rather than ignoring it."""
    threads = {}
    for extra in ([], ["--set", "workers=1", "schedule='warp'"]):
        rc, out = tiles(capsys, "compare", "gemm", "--shapes", "70x40x50", "--backends", "reference",
                        "--targets", "sm_90a", *extra)
        assert rc == 0, out
        shape = ("70x40x50", "[workers=1,schedule=warp]") if extra else ("70x40x50",)
        assert " ok " in row_of(out, "gemm", *shape, "reference")
        threads[bool(extra)] = int(re.search(r"(\d+) thr", row_of(out, "gemm", *shape, "cuda")).group(1))
    assert threads[True] < threads[False]
    rc, out = tiles(capsys, "compare", "gemm", "--shapes", "70x40x50", "--backends", "reference", "--no-compile",
                    "--set", "BMM=64")
    assert rc == 1 and "'BMM' is neither a constant (BM, BN, BK, trans_a, trans_b, accumulate, SPLIT, parts, swap) nor a launch option" in out
    w = bench.workload("attention_bwd")
    s = {**w.parse("1x2x80x64"), "set": {"BN": 32}}
    runs = w.runs(s, w.inputs(s, np.random.default_rng(0)))
    assert [c.get("BN") for k, _, c in runs] == [None if k is not w.kernel(s) else 32 for k, _, _ in runs]
    with pytest.raises(SystemExit, match="NAME=VALUE"):
        cli.main(["compare", "gemm", "--set", "BM"])


def test_compare_says_where_set_puts_the_heuristic_aside():
    """attention at head dim 64 from 2048 queries: sm_90a's heuristic sets BM=192, workers=3 and exp2_poly=8; a
    --set of exp2_poly alone chooses the configuration, so the row runs the configured 128-row block, and its
    label says what the heuristic would have set (a sweep that meant the 192-row block would otherwise not know)."""
    w = bench.workload("attention")
    for extra, want in (({}, " [heuristic: exp2_poly=8,BM=192,workers=3]"),
                        ({"exp2_poly": 0}, " [heuristic set aside: BM=192,workers=3]"),
                        ({"exp2_poly": 0, "BM": 192, "workers": 3}, "")):
        s = {**w.parse("1x1x2048x64"), "set": extra}
        inputs = w.inputs(s, np.random.default_rng(0))
        assert cli._heuristic_tag(w, s, "sm_90a", lambda: inputs) == want
    assert cli._heuristic_tag(w, {**w.parse("1x1x2048x64"), "set": {"exp2_poly": 0}}, "gfx950", lambda: inputs) == ""


def test_compare_bad_input(capsys):
    assert cli.main(["compare", "gemm", "--shapes", "64x64"]) == 2
    assert "bad shape '64x64'; expected MxNxK" in capsys.readouterr().err
    assert cli.main(["compare", "attention", "--shapes", "1x3/2x64x64"]) == 2
    assert "H=3 is not a multiple of Hkv=2" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="unknown backend 'nope'"):
        cli.main(["compare", "gemm", "--backends", "nope"])
    with pytest.raises(SystemExit, match="metal cannot run here"):
        cli.main(["compare", "gemm", "--backends", "metal"])


def _device_rows(machine, device, pct):
    tiles_row = Row("gemm", "4096x4096x4096", "cuda", "device", device, "sm_90a", 1.0, 1.7e-3, True, 1e-3,
                    137.4, None, pct, 0.5, machine=machine)
    lib = Row("gemm", "4096x4096x4096", "cuBLAS (torch.matmul)", "library", device, "sm_90a", time_s=5e-4,
              tflops=274.9, peak_pct=2 * pct, machine=machine)
    return [tiles_row, lib]


def test_merge_and_plot(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    a, b, png = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "cmp.png"
    report.save(_device_rows("h200-box", "NVIDIA H200", 14.0), str(a))
    report.save(_device_rows("mi300-box", "AMD Instinct MI300X", 10.0), str(b))
    rc, out = tiles(capsys, "compare", "--merge", str(a), str(b), "--plot", str(png))
    assert rc == 0
    assert "machine" in out.splitlines()[0]
    assert "h200-box" in row_of(out, "cuda", "NVIDIA", "H200") and "mi300-box" in row_of(out, "cuda", "MI300X")
    assert "0.50x" in row_of(out, "cuda", "MI300X")
    assert "plotted 4 bars" in out and png.read_bytes()[:4] == b"\x89PNG"


def test_merge_refuses_other_json(capsys, tmp_path):
    p = tmp_path / "x.json"
    p.write_text("[1, 2]")
    assert cli.main(["compare", "--merge", str(p)]) == 2
    assert "not a file written by `tiles compare --json`" in capsys.readouterr().err


@pytest.mark.skipif(any(toolchains.cannot_compile(t) for t in ("sm_90a", "gfx942", "gfx950")),
                    reason="needs NVRTC and ziglang's clang")
def test_inspect_table(capsys):
    rc, out = tiles(capsys, "inspect", "gemm", "--targets", "sm_90a,gfx942,gfx950")
    assert rc == 0, out
    # mma.sync (HMMA) or warpgroup wgmma (HGMMA), whichever the CUDA schedule picks for sm_90a
    assert re.search(r"^sm_90a\s+nvrtc\s+\d+\s+\d+\s+[\d.]+ KB\s+0\s+\d+ blk/SM.*HG?MMA\.\w+\.F32\.BF16 x\d+",
                     out, re.M)
    for t in ("gfx942", "gfx950"):
        assert re.search(rf"^{t}\s+ziglang clang\s+512\s+v\d+ a\d+.*v_mfma_f32_\w+_bf16 x\d+", out, re.M), t


@pytest.mark.parametrize("target, needle", [("sm_80", "tc::mma_AB"), ("gfx950", "mma<false, false>(acc_"), ("apple", "mma_AB")])
def test_emit_source(capsys, target, needle):
    rc, out = tiles(capsys, "inspect", "gemm", "--emit", "source", "--target", target)
    assert rc == 0 and needle in out and "gemm" in out


def test_emit_ir_sass_and_refusals(capsys):
    rc, out = tiles(capsys, "inspect", "attention", "--emit", "ir", "--target", "gfx942")
    assert rc == 0 and out.startswith("kernel attention_fwd(") and "mma_ABt" in out
    rc, out = tiles(capsys, "inspect", "softmax", "--emit", "sass", "--target", "sm_80")
    assert rc == 0 and "Function : tiles_kernel_softmax_fwd" in out
    assert cli.main(["inspect", "gemm", "--emit", "asm", "--target", "sm_80"]) == 2
    assert "choose one of source, ir, ptx, sass" in capsys.readouterr().err
    assert cli.main(["inspect", "gemm", "--emit", "source"]) == 2


def test_demo(capsys):
    rc, out = tiles(capsys, "demo", "--kernels", "softmax", "--backends", "reference")
    assert rc == 0
    for shape in bench.workload("softmax").small_shapes:
        assert " ok " in row_of(out, "softmax", shape, "reference")
    assert f"{len(bench.workload('softmax').small_shapes)} checked ok, 0 FAILED, 0 skipped" in out


def test_cache(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TILES_CACHE", str(tmp_path))
    rc, out = tiles(capsys, "cache", "info")
    assert rc == 0 and "none yet" in out
    (tmp_path / "cuda").mkdir()
    (tmp_path / "cuda" / "k.cubin").write_bytes(b"x" * 4096)
    (tmp_path / "emu").mkdir()
    rc, out = tiles(capsys, "cache", "info")
    assert re.search(r"^cuda\s+1\s+0\.0 MiB", out, re.M) and re.search(r"^emu\s+0\s", out, re.M)
    rc, out = tiles(capsys, "cache", "clear", "cuda")
    assert "cleared 1 cache folder(s)" in out and not (tmp_path / "cuda").exists() and (tmp_path / "emu").exists()


def test_bench_dispatches_to_the_cuda_benchmark(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "--help"])
    assert e.value.code == 0 and "--quick" in capsys.readouterr().out


def test_module_entry_point():
    p = subprocess.run([sys.executable, "-m", "tiles", "compare", "softmax", "--shapes", "5x7x9"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "bad shape '5x7x9'" in p.stderr


# ---------------------------------------------------------------- what compare relies on

def test_measure_rotates_inputs_after_warmup():
    calls = []

    class FakeClock:
        name = "fake"

        def times(self, step, indices):
            for i in indices:
                step(i)
            return [1e-3 * (i + 1) for i in indices]

    t = bench.measure(calls.append, sets=3, clock=FakeClock(), warmup=2, budget_s=0.02)
    assert calls[:3] == [0, 1, 2]                       # warm-up, then one run to size the loop
    assert calls[3:] == [i % 3 for i in range(t.runs)]  # every timed run takes the next input set
    assert t.runs == 6 and t.median_s == pytest.approx(2e-3) and t.clock == "fake"
    assert bench.input_sets(1 << 30) == 1 and bench.input_sets(1 << 20) == bench.MAX_SETS


def test_event_clock_holds_the_gpu_while_the_host_queues_the_runs(monkeypatch):
    """The spin before the runs covers twice the host time they took to queue the last time, so that no event
    pair brackets the host's launch overhead; the first time, a guess. The host's clock is a fake one that each
    launch advances by 0.5 ms (a real sleep runs long on a loaded machine and made a third batch)."""
    log, now = [], [0.0]
    monkeypatch.setattr(bench.time, "perf_counter", lambda: now[0])

    class Event:
        def record(self):
            log.append(("record", None))

        def synchronize(self):
            pass

    clock = bench.EventClock.__new__(bench.EventClock)
    clock._new, clock._ms, clock.name = Event, lambda a, b: 1.0, "fake"
    clock._spin = lambda cycles: log.append(("spin", cycles / bench.EventClock.CLOCK_HZ))
    clock.host_s = bench.EventClock.HOST_GUESS_S

    def step(i):   # each launch takes the host 0.5 ms
        now[0] += 5e-4
    assert clock.times(step, range(4)) == [1e-3] * 4
    assert log[0] == ("spin", pytest.approx(2 * 4 * bench.EventClock.HOST_GUESS_S + 1e-3))
    assert [k for k, _ in log[1:]] == ["record"] * 8
    assert clock.host_s >= 5e-4
    log.clear()
    clock.times(step, range(10))
    assert log[0][0] == "spin" and log[0][1] >= 2 * 10 * 5e-4

    # launches slower than the last batch's, kernels shorter than a launch: the GPU could have run the last runs
    # before they were queued, so the batch runs again behind a spin sized from its own host time
    log.clear()
    clock.host_s, clock._ms = 1e-5, lambda a, b: 0.01
    assert clock.times(step, range(4)) == [1e-5] * 4
    spins = [v for k, v in log if k == "spin"]
    assert len(spins) == 2 and spins[1] >= 2 * 4 * 5e-4 > spins[0]
    assert [k for k, _ in log].count("record") == 16
    # kernels longer than a launch keep the GPU busy past the spin: no second batch
    log.clear()
    clock.host_s, clock._ms = 1e-5, lambda a, b: 1.0
    clock.times(step, range(4))
    assert [k for k, _ in log].count("spin") == 1


@pytest.mark.parametrize("name, shape", [("gemm", "70x50x40,bt"), ("attention", "1x4/2x40x64,causal"),
                                         ("attention_bwd", "1x4/2x40x64,causal"), ("attention_bwd", "2x2x24x64"),
                                         ("softmax", "30x50"), ("softmax", "30x64"), ("rotary", "1x2/1x24x32"),
                                         ("rotary", "2x2x24x64,interleaved"),
                                         ("layernorm", "40x70"), ("layernorm", "40x96")])
def test_sampled_reference_rows_match_the_full_reference(name, shape, monkeypatch):
    w = bench.workload(name)
    s = w.parse(shape)
    rng = np.random.default_rng()
    args = w.inputs(s, rng)
    outs, fulls = w.outputs(s), w.reference(s, args)
    for o, full in zip(outs, fulls):   # an output near the reference, as a kernel would write it
        args[o.index][...] = full + rng.standard_normal(full.shape) * 1e-2
    monkeypatch.setattr(bench, "REFERENCE_COST", w.cost(s) / 4)
    rows = w.sample_rows(s, rng)
    assert rows is not None and rows[0] == 0 and rows[-1] == w.row_count(s) - 1 and len(rows) < w.row_count(s)
    for o, full, got in zip(outs, fulls, w.check_outputs(s, args, rows)):
        want = errors(np.take(args[o.index], rows, o.row_axis), np.take(full, rows, o.row_axis))
        assert got[1:3] == pytest.approx(want, rel=1e-9) and want[1] > 0


class _DeviceOnTheCpu(registry.Backend):
    """A 'device' backend that runs the reference interpreter: the device path of compare without a GPU."""
    name, kind, target, device = "fake-gpu", "device", "sm_90a", "NVIDIA H200"

    def synchronize(self):
        pass


@pytest.mark.parametrize("name, shape", [("softmax", "20x96"), ("attention_bwd", "1x2/1x40x64,causal")])
def test_device_rows_copy_and_several_libraries(name, shape, monkeypatch):
    """Our row is checked and timed (every launch of the workload), memory-bound work gets the copy of the same
    run and its % copy, and each library's row its own ratio; ours is against the fastest library."""
    w = bench.workload(name)
    monkeypatch.setattr(bench, "EventClock", bench.HostClock)
    monkeypatch.setattr(cli, "_COPY", {})
    monkeypatch.setattr(bench, "copy_bandwidth", lambda vendor, clock: ("copy", bench.Timing(1e-3, 5, 1, "fake"), 4e9))
    launches = []
    monkeypatch.setattr(_DeviceOnTheCpu, "launch", lambda self, kfn, args, **c: launches.append(kfn.__name__))

    def library(label, seconds):
        return lambda s, sets: (label, lambda i: __import__("time").sleep(seconds), lambda: None)
    monkeypatch.setattr(w, "baselines", lambda vendor: [library("slow", 2e-3), library("fast", 1e-3)])
    monkeypatch.setattr(w, "check_outputs", lambda s, args, rows=None: [("out", 0.0, 0.0, 1.0)])
    rows = cli.run_workload(w, [shape], [_DeviceOnTheCpu()], time_it=True, compile_targets=[], seed=0)
    mine, libs = rows[0], [r for r in rows if r.backend in ("slow", "fast")]
    assert mine.ok and mine.time_s > 0 and len(libs) == 2
    assert set(launches) == {k.__name__ for k, _, _ in w.launches(w.parse(shape), w.inputs(w.parse(shape), None))}
    for lib in libs:
        assert lib.vs_lib == pytest.approx(lib.time_s / mine.time_s)
    assert mine.vs_lib == pytest.approx(min(lib.time_s for lib in libs) / mine.time_s)
    copies = [r for r in rows if r.backend == "copy"]
    if w.flops(w.parse(shape)):
        assert not copies and mine.copy_pct is None and mine.tflops > 0
    else:
        assert len(copies) == 1 and copies[0].gbs == pytest.approx(4000.0)   # 4 GB in 1 ms
        assert mine.copy_pct == pytest.approx(100 * mine.gbs / 4000.0)
        assert libs[0].copy_pct == pytest.approx(100 * libs[0].gbs / 4000.0)


def test_set_sweeps_every_combination_and_times_the_libraries_once(monkeypatch):
    """--set NAME=V1,V2 is a sweep: one checked, timed row per combination, named in the shape column; the copy
    and each library once per shape, every row of ours with its ratio to the fastest library."""
    assert cli.variants(["HG=2,4", "schedule=warp"]) == [{"HG": 2, "schedule": "warp"}, {"HG": 4, "schedule": "warp"}]
    assert cli.variants(["BR=32,64", "stages=2,3"]) == [{"BR": 32, "stages": 2}, {"BR": 32, "stages": 3},
                                                         {"BR": 64, "stages": 2}, {"BR": 64, "stages": 3}]
    assert cli.variants([]) == [{}]
    with pytest.raises(SystemExit, match="NAME=V1,V2"):
        cli.variants(["BR=32,"])
    w = bench.workload("softmax")
    monkeypatch.setattr(bench, "EventClock", bench.HostClock)
    monkeypatch.setattr(cli, "_COPY", {})
    monkeypatch.setattr(bench, "copy_bandwidth", lambda vendor, clock: ("copy", bench.Timing(1e-3, 5, 1, "fake"), 4e9))
    seen, libs = [], []
    monkeypatch.setattr(_DeviceOnTheCpu, "launch", lambda self, kfn, args, **c: seen.append(c.get("RPB")))
    monkeypatch.setattr(w, "baselines", lambda vendor: [lambda s, sets: libs.append(s) or ("lib", lambda i: None,
                                                                                             lambda: None)])
    monkeypatch.setattr(w, "check_outputs", lambda s, args, rows=None: [("out", 0.0, 0.0, 1.0)])
    rows = cli.run_workload(w, ["20x96", "30x64"], [_DeviceOnTheCpu()], time_it=True, compile_targets=[],
                            variants=cli.variants(["RPB=1,2"]))
    assert [(r.shape, r.backend) for r in rows] == [
        (f"{shape}{tag}", backend) for shape in ("20x96", "30x64")
        for tag, backend in ((" [RPB=1]", "fake-gpu"), (" [RPB=2]", "fake-gpu"), ("", "copy"), ("", "lib"))]
    assert set(seen) == {1, 2} and len(libs) == 2 and all("set" not in s for s in libs)
    bare = cli.run_workload(w, ["20x96"], [_DeviceOnTheCpu()], time_it=True, compile_targets=[],
                            variants=cli.variants(["RPB=1,2"]), libraries=False)   # --no-libraries
    assert [r.backend for r in bare] == ["fake-gpu"] * 2 and len(libs) == 2 and all(r.vs_lib is None for r in bare)
    for mine in (r for r in rows if r.backend == "fake-gpu"):
        lib = next(r for r in rows if r.backend == "lib" and mine.shape.startswith(r.shape))
        assert mine.ok and mine.vs_lib == pytest.approx(lib.time_s / mine.time_s)
