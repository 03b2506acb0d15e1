"""Autotuning (tiles.tune): the space, static pruning, the static model, the cache, the launch's lookup, `tiles tune`.
Cheap: the timed searches run on the reference interpreter at small shapes; one real compile prunes for sm_90a."""
import importlib
import json
import re
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tiles as tl
from tiles import backend as registry
from tiles import cli, toolchains, tune
from tiles.kernels.gemm import TUNE, gemm
from tiles.testing import assert_close, poisoned, random_array, run as run_host
from tiles.tune import Shaped


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILES_CACHE", str(tmp_path))
    monkeypatch.delenv("TILES_AUTOTUNE", raising=False)
    tune.forget()
    yield tmp_path / "tune"
    tune.forget()


@tl.kernel(configs={"default": dict(BR=16, BC=16)},
           tune={"default": dict(BR=[16, 32], BC=lambda Y, X: [16, 32, 64] if X.shape[1] > 32 else [16]),
                 "sm_90a": dict(BR=[64, 128], workers=[1, 2])},
           tune_key=lambda Y, X: (tune.pow2(X.shape[0]), X.shape[1]),
           tune_where=lambda cfg, Y, X: cfg["BR"] * cfg["BC"] <= 1024)
def scale(Y, X, *, BR, BC):
    br, bc = tl.grid(tl.cdiv(X.rows, BR), tl.cdiv(X.cols, BC))
    x = tl.regs(tl.f32, BR, BC)
    tl.load(x, X, (br, bc))
    tl.mul(x, x, 2.0)
    tl.store(Y, x, (br, bc))


def args(rows=40, cols=48, dtype="f32"):
    return [poisoned((rows, cols), dtype), random_array((rows, cols), dtype)]


# ---------------------------------------------------------------- the space

def test_space_expands_with_shape_dependent_values_and_the_constraint():
    wide = tune.candidates(scale, None, args(cols=48), {})
    assert wide[0].default and wide[0].config == {"BR": 16, "BC": 16}
    got = {(c.config["BR"], c.config["BC"]) for c in wide}
    assert got == {(16, 16), (16, 32), (16, 64), (32, 16), (32, 32)}   # 32x64 = 2048 > 1024: pruned by tune_where
    assert len(wide) == len(got)                                        # the default is not repeated
    narrow = tune.candidates(scale, None, args(cols=24), {})
    assert {(c.config["BR"], c.config["BC"]) for c in narrow} == {(16, 16), (32, 16)}
    assert set(tune.candidates(scale, "sm_90a", args(), {})[1].config) == {"BR", "workers"}


def test_space_refuses_what_it_cannot_mean():
    with pytest.raises(KeyError, match="unknown target 'sm90'"):
        tune.Space({"sm90": dict(BR=[16])})
    with pytest.raises(TypeError, match="non-empty list"):
        tune.Space({"default": dict(BR=[])})
    bad = tl.kernel(scale.fn, configs=scale.configs, tune={"default": dict(BRR=[16])})
    with pytest.raises(TypeError, match="'BRR' is neither a constant"):
        tune.candidates(bad, None, args(), {})


def test_gemm_space_declares_what_skinny_m_needs():
    """Split K where the output tiles are too few to fill a GPU, into any C; no block taller than twice the rows
    (beyond 64)."""
    shapes = [Shaped((16, 4096), "bf16"), Shaped((16, 4096), "bf16"), Shaped((4096, 4096), "bf16")]
    plain = tune.candidates(gemm, "sm_90a", shapes, {})
    assert {c.config["SPLIT"] for c in plain} == set(TUNE["sm_90a"]["SPLIT"])
    assert all(c.config["BM"] == 64 for c in plain[1:])
    acc = tune.candidates(gemm, "sm_90a", [Shaped((16, 4096), "f32")] + shapes[1:], {"accumulate": True})
    assert {c.config["SPLIT"] for c in acc} == set(TUNE["sm_90a"]["SPLIT"])
    big = tune.candidates(gemm, "sm_90a", [Shaped((4096, 4096), "bf16")] * 3, {})
    assert {c.config["BM"] for c in big} == {64, 128, 256}
    # 4096^2 in 256x256 tiles is 256 of them, under the 512 that fill an H200: the split is searched there only
    assert {c.config["SPLIT"] for c in big if c.config["BM"] * c.config["BN"] < 256 * 256} == {1}


def test_what_the_heuristic_sets_outside_the_space_every_candidate_keeps():
    """Attention backward past head dim 128: the heuristic's DC (chunks of dK, dV and dQ's columns, outside the
    search space) is in every candidate, without which none fits; below it, no candidate has one; the caller's
    own DC wins."""
    from tiles.kernels.attention_bwd import attention_bwd

    def shapes(d):
        x, kv, f = Shaped((1, 4, 1024, d), "bf16"), Shaped((1, 2, 1024, d), "bf16"), Shaped((1, 4, 1024), "f32")
        return [kv, kv, Shaped((1, 4, 1024, d), "f32"), x, kv, kv, x, f, f, 0.1]
    wide = tune.candidates(attention_bwd, "sm_90a", shapes(256), {"D": 256})
    assert len(wide) > 1 and all(c.config["DC"] == 64 for c in wide)
    assert not any("DC" in c.config for c in tune.candidates(attention_bwd, "sm_90a", shapes(128), {"D": 128}))
    own = tune.candidates(attention_bwd, "sm_90a", shapes(256), {"D": 256, "DC": 128})
    assert not any("DC" in c.config for c in own)


# ---------------------------------------------------------------- static pruning

def test_prune_drops_what_fails_to_verify_spills_overflows_or_starves(monkeypatch):
    ok = toolchains.Static("sm_90a", "fake", 128, shared_bytes=1024, spill_bytes=0, blocks_per_unit=4)
    spill = toolchains.Static("sm_90a", "fake", 128, spills="8+8 B", shared_bytes=1024, spill_bytes=16,
                              blocks_per_unit=4)
    big = toolchains.Static("sm_90a", "fake", 128, shared_bytes=300 * 1024, spill_bytes=0, blocks_per_unit=1)
    low = toolchains.Static("sm_90a", "fake", 128, occupancy="1 blk/SM", shared_bytes=1024, spill_bytes=0,
                            blocks_per_unit=1)
    monkeypatch.setattr(toolchains, "emit", lambda kfn, a, t, what, **c: repr(sorted(c.items())))
    monkeypatch.setattr(toolchains, "static", lambda kfn, a, t, **c: {64: ok, 128: spill, 192: big, 256: low}[c["BR"]])
    cands = [tune.Candidate({"BR": br, "BC": 16}) for br in (64, 128, 192, 256, 24)]
    tune.prune(scale, "sm_90a", args(), cands, {}, min_blocks=2)
    why = {c.config["BR"]: c.dropped for c in cands}
    assert why[64] is None
    assert why[128].startswith("spills: 8+8 B")
    assert why[192].startswith("shared memory: 300.0 KB > 227 KB")
    assert why[256].startswith("occupancy: 1 blk/SM")
    assert why[24].startswith("refused: TileError")   # 24 rows: not a multiple of the 16-row base tile


def test_prune_compiles_for_real_and_drops_duplicates():
    """sm_90a through NVRTC (skipped without it): a 300 KB shared-memory plan cannot exist; BM=64 with two consumer
    warpgroups is the same program as with one, or different and compiled."""
    if toolchains.cannot_compile("sm_90a"):
        pytest.skip(toolchains.cannot_compile("sm_90a"))
    shapes = [Shaped((64, 256), "bf16"), Shaped((64, 512), "bf16"), Shaped((512, 256), "bf16")]
    cands = [tune.Candidate({"BM": 64, "BN": 64, "BK": 64, "stages": 2, "workers": 1}),
             tune.Candidate({"BM": 24, "BN": 64, "BK": 64, "stages": 2, "workers": 1}),
             tune.Candidate({"BM": 64, "BN": 64, "BK": 64, "stages": 2, "workers": 1, "SPLIT": 1})]
    tune.prune(gemm, "sm_90a", shapes, cands, {})
    assert cands[0].dropped is None and cands[0].static.blocks_per_unit >= 1 and cands[0].static.spill_bytes == 0
    assert cands[1].dropped.startswith("refused: TileError")
    assert cands[2].dropped.startswith("same code: as BM=64")


@pytest.mark.parametrize("m", [16, 2048])
def test_prune_with_top_compiles_only_what_the_ranking_needs(monkeypatch, m):
    """The model's estimate before compiling bounds the one after (registers only lower the resident blocks): the
    best `top` come out as compiling every candidate ranks them, a spilling one never among them, with fewer
    compiles; what was not compiled is dropped as ranked out."""
    shapes = [Shaped((m, 4096), "bf16"), Shaped((m, 4096), "bf16"), Shaped((4096, 4096), "bf16")]
    compiled = []

    def fake(kfn, a, t, sass=True, **c):   # an f32 accumulator of BM x BN over 128 x workers threads
        compiled.append(c)
        regs = c["BM"] * c["BN"] // (128 * c["workers"])
        return toolchains.Static(t, "fake", 128, shared_bytes=1024, spill_bytes=64 if regs > 128 else 0,
                                 blocks_per_unit=1 if regs >= 64 else 2)
    monkeypatch.setattr(toolchains, "static", fake)
    dev = tune.model_device("sm_90a")
    full = tune.candidates(gemm, "sm_90a", shapes, {})
    tune.prune(gemm, "sm_90a", shapes, full, {}, device=dev)
    every = len(compiled)
    compiled.clear()
    lazy = tune.candidates(gemm, "sm_90a", shapes, {})
    tune.prune(gemm, "sm_90a", shapes, lazy, {}, top=4, device=dev, jobs=2)
    want = [c.config for c in tune.rank(gemm, "sm_90a", shapes, full, {}, dev)[:4]]
    got = tune.rank(gemm, "sm_90a", shapes, lazy, {}, dev)
    assert [c.config for c in got[:4]] == want and len(compiled) < every
    assert lazy[0].default and lazy[0].static is not None   # the baseline always compiles
    assert not any(c.static.spill_bytes for c in got)
    assert {c.dropped.split(":")[0] for c in lazy if c.dropped} <= {"refused", "same code", "spills", "ranked out"}
    assert all(c.static is None for c in lazy if c.dropped and c.dropped.startswith("ranked out"))


def test_a_certain_spill_is_known_before_compiling():
    """sm_90a: a 256 x 256 f32 accumulator over one consumer warpgroup is 512 registers a thread (the cap: 255);
    over two, 256 (above their cap after setmaxnreg); the shipped default's 128 x 256 over two fits. The source is
    generated, nothing compiled."""
    shapes = [Shaped((4096, 4096), "bf16")] * 3
    big = dict(BM=256, BN=256, BK=64, stages=3)
    assert "need 512 registers a thread, over the cap of 255" in toolchains.spills_surely(gemm, shapes, "sm_90a", **big,
                                                                                          workers=1)
    two = re.search(r"need 256 registers a thread, over the cap of (\d+)",
                    toolchains.spills_surely(gemm, shapes, "sm_90a", **big, workers=2))
    assert two and int(two.group(1)) < 256
    assert toolchains.spills_surely(gemm, shapes, "sm_90a") is None
    assert toolchains.spills_surely(gemm, shapes, "gfx950", **big, workers=1) is None   # known on CUDA only


# ---------------------------------------------------------------- the static model

def model_choice(m, n, k, target, acc=False):
    shapes = [Shaped((m, n), "f32" if acc else "bf16"), Shaped((m, k), "bf16"), Shaped((k, n), "bf16")]
    fixed = {"accumulate": True} if acc else {}
    cands = tune.candidates(gemm, target, shapes, fixed)
    return tune.rank(gemm, target, shapes, cands, fixed), cands


@pytest.mark.parametrize("target", ["sm_90a", "gfx950", "apple"])
def test_static_model_is_deterministic_and_chooses_from_the_space(target):
    first, cands = model_choice(2048, 4096, 4096, target)
    again, _ = model_choice(2048, 4096, 4096, target)
    assert [c.config for c in first] == [c.config for c in again]
    assert first[0].config in [c.config for c in cands]
    assert all(first[i].model_s <= first[i + 1].model_s for i in range(len(first) - 1))
    t = first[0].terms
    assert t["bound"] in ("matrix", "memory", "vector") and first[0].model_s >= max(t["matrix_s"], t["memory_s"])


@pytest.mark.parametrize("acc", [True, False])
def test_static_model_reasons_about_skinny_m(acc):
    """M = 16 at K = 14336: the matrix work of a 64-row tile is 4x the useful one, and 64 output tiles leave half
    the SMs idle: splitting K is modelled faster than any unsplit tile, into an accumulating C (atomic_add) or a
    bf16 one (one launch whose last block of a tile adds the parts, their traffic included)."""
    ranked, _ = model_choice(16, 4096, 14336, "sm_90a", acc=acc)
    assert ranked[0].config["SPLIT"] > 1
    assert ranked[0].terms.get("launches", 1) == 1
    best_unsplit = min(c.model_s for c in ranked if c.config["SPLIT"] == 1)
    assert ranked[0].model_s < best_unsplit
    big, _ = model_choice(4096, 4096, 4096, "sm_90a")
    assert big[0].config["BM"] == 128 and big[0].terms["bound"] == "matrix"


def test_static_model_wants_two_warpgroups_issuing_on_sm90a():
    """A 128-row tile with one consumer warpgroup leaves the tensor cores idle while it waits between steps: at
    512x4096x4096 the model's first choice has two (on the H200 its one-warpgroup pick lost 1.84x). Two such
    blocks resident on an SM do not stand in for the second warpgroup (H200, 12-02 17:45 UTC: 1.63-1.96x the
    two-warpgroup tile's time at every shape of 512 rows and more), so they are stretched as one is."""
    ranked, _ = model_choice(512, 4096, 4096, "sm_90a")
    assert ranked[0].config["BM"] == 128 and ranked[0].config["workers"] == 2
    tile = dict(BM=128, BN=128, BK=64, stages=4, SPLIT=1, blocks_per_sm=1, cluster=1, swap=False)   # 128 blocks
    one, two = (next(c for c in ranked if c.config == {**tile, "workers": w}) for w in (1, 2))
    assert one.terms["matrix_s"] == pytest.approx(2 * two.terms["matrix_s"])
    shapes = [Shaped((2048, 4096), "bf16"), Shaped((2048, 4096), "bf16"), Shaped((4096, 4096), "bf16")]
    pair = toolchains.Static("sm_90a", "fake", 256, shared_bytes=98 * 1024, blocks_per_unit=2)
    alone = toolchains.Static("sm_90a", "fake", 384, shared_bytes=130 * 1024, blocks_per_unit=1)
    _, t1 = tune.model(gemm.trace(shapes, "sm_90a", **{**tile, "workers": 1, "stages": 3}), shapes, "sm_90a", pair)
    _, t2 = tune.model(gemm.trace(shapes, "sm_90a", **{**tile, "workers": 2}), shapes, "sm_90a", alone)
    assert t1["matrix_s"] == pytest.approx(2 * t2["matrix_s"])


def test_static_model_waits_for_loads_into_registers():
    """A pipeline runs its shared tiles' loads ahead, not its loads into registers: rmsnorm's rows loaded straight
    into registers (staged=False) timed 1.9-2.2x the staged ones on the H200 (12-04 19:59 UTC, 4096x4096), where
    the model had them level at DRAM's floor and picked them first at every rmsnorm shape."""
    from tiles.kernels.rmsnorm import launch_plan, rmsnorm_rows
    plan = launch_plan(4096, 4096)
    k = plan["K"]
    shapes = [Shaped((4096, 4096 // k, k), "bf16"), Shaped((4096, 1), "f32"), Shaped((4096, 4096 // k, k), "bf16"),
              Shaped((4096 // k, k), "bf16")]
    row_bytes = 4096 * 2
    traced = {s: rmsnorm_rows.trace(shapes + [1e-6], "sm_90a", **{**plan, "staged": s}) for s in (False, True)}
    work = {s: tune.work(t, shapes + [1e-6]) for s, t in traced.items()}
    assert (work[True]["step_bytes"], work[True]["step_sync"]) == (row_bytes, 0)
    assert (work[False]["step_bytes"], work[False]["step_sync"]) == (0, row_bytes)
    static = toolchains.Static("sm_90a", "fake", 128, shared_bytes=33 * 1024, blocks_per_unit=4)
    memory = {s: tune.model(t, shapes + [1e-6], "sm_90a", static)[1]["memory_s"] for s, t in traced.items()}
    assert memory[False] > 1.5 * memory[True]


def test_static_model_charges_sm90a_zero_fill_of_the_fitted_box():
    """TMA's zero fill beyond the array's edge cost what reading it would on the H200 (12-02: at 1x14336x4096,
    64x64 tiles two an SM, 54.3 us, lost to 64x128 one an SM, 41.2 us, which fill half as much; at M = 64, no
    fill, they tied). The runtime now fits A's box to the rows rounded up to 8 (schedules.box_rows): the model
    charges 7 rows of fill a step at M = 1 (63 before), 4 at M = 20, none at M = 8 or 64, and on sm_90a only."""
    from tiles.backends.cuda import schedules

    def shapes(m):
        return [Shaped((m, 14336), "bf16"), Shaped((m, 4096), "bf16"), Shaped((4096, 14336), "bf16")]

    def traced(m, bn, resident=1):
        return gemm.trace(shapes(m), "sm_90a", BM=64, BN=bn, BK=64, stages=5, workers=1, blocks_per_sm=resident)
    for m, rows in ((1, 7), (8, 0), (20, 4), (64, 0)):
        assert tune.work(traced(m, 128), shapes(m), schedules.box_rows)["fill"] == rows * 64 * 2 * (4096 // 64)
        assert tune.work(traced(m, 128), shapes(m))["fill"] == (64 - m) * 64 * 2 * (4096 // 64)

    def memory(m, bn, resident, target="sm_90a"):
        static = toolchains.Static("sm_90a", "fake", 256, shared_bytes=90 * 1024, blocks_per_unit=resident)
        return tune.model(traced(m, bn, resident), shapes(m), target, static)[1]["memory_s"]
    # the fill left at M = 1 is an eighth of the tile's: 64x64 tiles no longer lose a fifth to it (5% left)
    assert memory(1, 64, 2) < 1.1 * memory(1, 128, 1)
    assert memory(64, 64, 2) == pytest.approx(memory(64, 128, 1))


# ---------------------------------------------------------------- the cache

def entry(**change):
    ref = registry.get("reference")
    target, device, tk = tune.identity(ref)
    e = tune.Entry("scale", tune.source_hash(scale), target, device, tk, ["f32", "f32"], [64, 48], [],
                   {"BR": 32, "BC": 16}, 1e-3)
    for k, v in change.items():
        setattr(e, k, v)
    return e


def test_cache_hit_and_miss():
    ref = registry.get("reference")
    tune.store(scale, entry())
    assert tune.resolve(scale, ref, args(40, 48), {}) == {"BR": 32, "BC": 16}            # 40 rows: bucket 64
    assert tune.resolve(scale, ref, args(100, 48), {}) == {}                             # another bucket: a miss
    assert tune.resolve(scale, ref, args(40, 48, "bf16"), {}) == {}                      # other dtypes
    assert tune.resolve(scale, ref, args(40, 48), {"BR": 16}) == {"BR": 16}              # the caller chose
    assert tune.resolve(scale, ref, args(40, 48), {"tune": False}) == {}                 # the default, asked for
    y, x = args(40, 48)
    k = scale(y, x, backend="reference")
    assert k.consts == {"BR": 32, "BC": 16}
    assert_close(y, 2.0 * x.astype(np.float64), "f32")


def store_winner(kfn, b, a, config):
    """A tuned entry for kfn's launch on backend b with arguments a."""
    target, device, tk = tune.identity(b)
    key = tune.key_of(kfn, b, a, {})
    tune.store(kfn, tune.Entry("scale", tune.source_hash(kfn), target, device, tk, list(key[3]),
                               [list(x) if isinstance(x, tuple) else x for x in key[4]], [], config, 1e-3))


# scale's body, with a heuristic: 32 rows a block for arrays of 8 rows or fewer
few_rows = tl.kernel(scale.fn, configs={"default": dict(BR=16, BC=16)},
                     tune={"default": dict(BR=[16, 32], BC=[16, 32])},
                     tune_key=lambda Y, X: (tune.pow2(X.shape[0]), X.shape[1]),
                     heuristic=lambda target, Y, X, **kw: dict(BR=32) if X.shape[0] <= 8 else {})


def test_heuristic_sets_the_default_for_a_shape_below_the_cache_and_the_caller():
    """With no tuned entry a launch runs the kernel's heuristic for its shapes (over configs); a tuned entry, or
    the caller's own value of one of the heuristic's names, replaces it; tune=False still takes it (it is the
    default for that shape); the search's default candidate is it, so tuning never loses to it."""
    ref = registry.get("reference")
    few, many = args(5, 48), args(40, 48)
    assert tune.resolve(few_rows, ref, few, {}) == {"BR": 32}
    assert tune.resolve(few_rows, ref, many, {}) == {}
    assert tune.resolve(few_rows, ref, few, {"tune": False}) == {"BR": 32}
    assert tune.resolve(few_rows, ref, few, {"BR": 16}) == {"BR": 16}
    assert tune.resolve(few_rows, ref, few, {"BC": 32}) == {"BR": 32, "BC": 32}   # BC: not one the heuristic sets
    assert tune.candidates(few_rows, None, few, {})[0].config == {"BR": 32, "BC": 16}
    store_winner(few_rows, ref, few, {"BR": 16, "BC": 32})
    assert tune.resolve(few_rows, ref, few, {}) == {"BR": 16, "BC": 32}
    y, x = few
    assert few_rows(y, x, backend="reference", tune=False).consts == {"BR": 32, "BC": 16}
    assert_close(y, 2.0 * x.astype(np.float64), "f32")


def test_a_launch_resolves_its_keywords_once_per_signature():
    """A model's repeated launches (the same shapes, dtypes, scalars and keywords) take what the first one
    resolved: the heuristic runs once; a new shape or other keywords resolve again, and so does every launch
    after the cache changes, which then takes the new winner."""
    ref = registry.get("reference")
    seen = []
    counted = tl.kernel(scale.fn, configs={"default": dict(BR=16, BC=16)},
                        tune={"default": dict(BR=[16, 32], BC=[16, 32])},
                        tune_key=lambda Y, X: (tune.pow2(X.shape[0]), X.shape[1]),
                        heuristic=lambda target, Y, X, **kw: seen.append(X.shape) or (
                            dict(BR=32) if X.shape[0] <= 8 else {}))
    few = args(5, 48)
    for _ in range(3):
        assert tune.resolve(counted, ref, few, {}) == {"BR": 32}
    assert len(seen) == 1
    assert tune.resolve(counted, ref, args(6, 48), {}) == {"BR": 32} and len(seen) == 2
    assert tune.resolve(counted, ref, few, {"BC": 32}) == {"BR": 32, "BC": 32} and len(seen) == 3
    store_winner(counted, ref, few, {"BR": 16, "BC": 32})
    assert tune.resolve(counted, ref, few, {}) == {"BR": 16, "BC": 32}
    assert tune.resolve(counted, ref, few, {"tune": False}) == {"BR": 32}   # the default, asked for


def test_heuristic_naming_no_constant_is_refused():
    bad = tl.kernel(few_rows.fn, configs={"default": dict(BR=16, BC=16)}, heuristic=lambda t, Y, X, **kw: dict(BQ=8))
    with pytest.raises(TypeError, match="'BQ' is neither a constant"):
        bad.shape_config(None, args(5, 48))


@pytest.mark.parametrize("n, causal", [(2048, True), (8192, True), (8192, False)])
def test_attention_runs_the_persistent_grid_on_sm90a_by_default(n, causal):
    """sm_90a's configured attention walks its tiles on a persistent grid (it won on every row of issue 20's table);
    no heuristic overrides it, and the caller's own persistent= stands."""
    from tiles.kernels.attention import attention_fwd
    q = Shaped((2, 4, n, 128), "bf16")
    a = [q, Shaped((2, 4, n), "f32"), q, q, q, 0.125]
    assert attention_fwd.configs["sm_90a"]["persistent"] is True and "persistent" not in attention_fwd.configs["sm_80"]
    assert attention_fwd.shape_config("sm_90a", a, dict(D=128, causal=causal)) == {}
    kw = dict(D=128, causal=causal, persistent=False)
    assert tune.defaults(attention_fwd, "sm_90a", a, kw) == kw


@pytest.mark.parametrize("d, n", [(64, 512), (64, 4096), (128, 512), (128, 4096)])
def test_attention_heuristics_by_head_dim(d, n):
    """sm_90a's per-head-dim defaults, timed on the H200 (12-04): the forward's polynomial exponentials at 64 (and
    from 2048 queries its 192-row query block over three warpgroups), the backward's early dV at 128; nothing
    elsewhere, and the caller's own value stands."""
    from tiles.kernels.attention import attention_fwd
    from tiles.kernels.attention_bwd import attention_bwd
    q, v = Shaped((2, 4, n, d), "bf16"), Shaped((2, 4, n), "f32")
    fwd = [q, v, q, q, q, 0.125]
    bwd = [Shaped((2, 4, n, d), "f32")] * 3 + [q] * 4 + [v, v, 0.125]
    want = {} if d == 128 else dict(exp2_poly=8, BM=192, workers=3) if n >= 2048 else dict(exp2_poly=8)
    assert attention_fwd.shape_config("sm_90a", fwd, dict(D=d)) == want
    causal = {**want, "exp2_poly": 16} if want.get("BM") == 192 else want   # the masks' work on the FMA pipe
    assert attention_fwd.shape_config("sm_90a", fwd, dict(D=d, causal=True)) == causal
    assert attention_bwd.shape_config("sm_90a", bwd, dict(D=d)) == ({"dv_early": True} if d == 128 else {})
    assert attention_fwd.shape_config("sm_80", fwd, dict(D=d)) == attention_bwd.shape_config("sm_80", bwd, dict(D=d))
    assert attention_bwd.shape_config("sm_80", bwd, dict(D=d)) == {}
    kw = dict(D=d, exp2_poly=0)
    assert tune.defaults(attention_fwd, "sm_90a", fwd, kw) == kw
    for f, a in ((attention_fwd, fwd), (attention_bwd, bwd)):   # each traces and verifies with its default
        f.trace(a, "sm_90a", D=d, **f.shape_config("sm_90a", a, dict(D=d)))


@pytest.mark.parametrize("shape, want", [
    ("1x4096x4096", dict(swap=True, BM=64, BN=16, BK=128, stages=8, workers=1, SPLIT=1)),
    ("1x4096x14336", dict(swap=True, BM=64, BN=16, BK=128, stages=8, workers=1, SPLIT=2)),
    ("64x4096x4096", dict(BM=64, BN=64, BK=128, stages=6, workers=1, SPLIT=1)),
    ("128x4096x4096", dict(BM=64, BN=64, BK=128, stages=6, workers=1, SPLIT=1)),
    ("16x4096x14336", dict(BM=64, BN=64, stages=8, workers=1, SPLIT=2)),
    ("16x2048x14336", dict(BM=64, BN=128, stages=4, workers=1, SPLIT=4, blocks_per_sm=2)),
    ("1x14336x4096", dict(BM=64, BN=128, stages=5, workers=1, SPLIT=1)),
    ("16x28672x8192", dict(BM=64, BN=256, stages=3, workers=1, SPLIT=1)),
    ("256x4096x4096", dict(BM=128, BN=128, stages=5, workers=2, SPLIT=2)),
    ("128x4096x14336", dict(BM=128, BN=64, stages=8, workers=2, SPLIT=1)),
    ("512x4096x4096", dict(BM=128, BN=128, stages=5, workers=2, SPLIT=1)),
    ("512x14336x4096", {}), ("4096x4096x4096", {}),
    ("128x28672x8192", dict(BM=128, BN=256, stages=3, workers=2)),
    ("2048x28672x8192", dict(BM=128, BN=256, stages=3, workers=2)),
    ("4096x4096x14336", dict(BM=128, BN=256, stages=3, workers=2))])
def test_gemm_heuristic_restates_the_timed_winners_of_skinny_m(shape, want):
    """gemm's sm_90a heuristic at the LLM grid's skinny shapes: the tile, warpgroups and split of K that won the
    H200 grids there (docs/benchmarks.md: 12-02, stages from 12-04; 128-row tiles from the H100's, 12-06; steps of
    128 where K stays whole, the H100's, 12-07; one row swapped, C^T, 12-07), nothing
    where the configured 128x256 tiles won, but 3 stages past 64 steps of K (LONG_K: 4 with the epilogue staged two
    panels at a time lost there on the H100, 12-06); each traces and verifies for sm_90a, and no other target has
    one."""
    m, n, k = map(int, shape.split("x"))
    a = [Shaped((m, n), "bf16"), Shaped((m, k), "bf16"), Shaped((k, n), "bf16")]
    got = gemm.shape_config("sm_90a", a)
    assert got == ({"BK": 64, **want} if want else {})
    for f, sub, kw in gemm.steps(a, "sm_90a", **got):
        f.trace(sub, "sm_90a", **kw)
    assert all(gemm.shape_config(t, a) == {} for t in ("apple", None))


@pytest.mark.parametrize("target, splits", [("gfx942", (8, 4, 2)), ("gfx950", (8, 4, 2)), ("sm_80", (2, 1, 1))])
def test_gemm_heuristic_without_a_device_is_the_models_choice_for_skinny_m(target, splits):
    """sm_80 and CDNA at M <= 64: the static model's first choice at the decode shapes (gemm.MODELLED: 64x64
    tiles, K split up to the blocks its choices held; not timed, no such GPU here), where the configured tiles
    are modelled 1.5-10x slower; nothing at M > 64."""
    from tiles.kernels.gemm import MODELLED

    def config(m, n, k):
        a = [Shaped((m, n), "bf16"), Shaped((m, k), "bf16"), Shaped((k, n), "bf16")]
        return a, gemm.shape_config(target, a)
    for (m, n, k), split in zip(((1, 4096, 4096), (16, 14336, 4096), (16, 28672, 8192)), splits):
        a, got = config(m, n, k)
        assert got == {**MODELLED[target][0], "SPLIT": split}
        steps = lambda cfg: [(f.trace(sub, target, **kw), sub) for f, sub, kw in gemm.steps(a, target, **cfg)]  # noqa
        modelled = lambda cfg: sum(tune.model(kk, sub, target)[0] for kk, sub in steps(cfg))  # noqa: E731
        assert 1.4 * modelled(got) < modelled({})
    assert config(128, 4096, 4096)[1] == {}


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 600), n=st.integers(1, 300).map(lambda x: 8 * x), k=st.integers(1, 300).map(lambda x: 8 * x),
       batch=st.sampled_from([0, 1, 3]), trans_b=st.booleans(), acc=st.booleans(), f16=st.booleans(),
       target=st.sampled_from(["sm_90a", "sm_80", "gfx942", "gfx950"]))
def test_gemm_heuristic_always_gives_a_launchable_configuration(m, n, k, batch, trans_b, acc, f16, target):
    """Whatever the shapes, what the heuristic sets traces, verifies and generates on its target (every step of its
    plan): a default that the verifier or the backend refused would fail a launch that ran before it existed."""
    from tiles import toolchains as tc
    dt = "f16" if f16 else "bf16"
    lead = (batch,) if batch else ()
    c = Shaped(lead + (m, n), "f32" if acc else dt)
    a = [c, Shaped(lead + (m, k), dt), Shaped(((batch,) if batch == 3 else ()) + ((n, k) if trans_b else (k, n)), dt)]
    kw = dict(trans_b=trans_b, accumulate=acc)
    cfg = tune.defaults(gemm, target, a, kw)
    for f, sub, step_kw in gemm.steps(a, target, **cfg):
        tc.emit(f, sub, target, "source", **step_kw)


def test_lookup_takes_microseconds():
    """Not a timed test of speed (that is docs/tuning.md's measurement): a bound that only a disk read or a
    search per launch could break."""
    ref = registry.get("reference")
    tune.store(scale, entry())
    a = args(40, 48)
    tune.resolve(scale, ref, a, {})
    t0 = time.perf_counter()
    for _ in range(1000):
        tune.resolve(scale, ref, a, {})
    assert (time.perf_counter() - t0) / 1000 < 200e-6


def test_corrupt_cache_is_ignored(cache):
    ref = registry.get("reference")
    cache.mkdir(parents=True)
    (cache / "scale.json").write_text("{not json")
    with pytest.warns(UserWarning, match="ignoring the tune cache"):
        assert tune.resolve(scale, ref, args(), {}) == {}
    tune.forget()
    good = entry().to_json()
    tampered = {**entry().to_json(), "config": {"BR": 64, "BC": 16}}        # edited by hand: checksum mismatch
    wrong_type = entry(bucket="64x48").to_json()
    (cache / "scale.json").write_text(json.dumps({"entries": [tampered, wrong_type, "junk", good]}))
    assert tune.resolve(scale, ref, args(), {}) == {"BR": 32, "BC": 16}
    verdicts = [tune.judge(r, scale)[1].split(":")[0] for r in (tampered, wrong_type, "junk", good)]
    assert verdicts == ["corrupt", "corrupt", "corrupt", "ok"]
    assert [r[1:4] for r in tune.summary() if r[0] == "scale"] == [(1, 0, 3)]
    tune.store(scale, entry(config={"BR": 16, "BC": 16}))                   # a store drops the corrupt ones
    assert len(json.loads((cache / "scale.json").read_text())["entries"]) == 1


def test_stale_cache_is_ignored(cache):
    ref = registry.get("reference")
    stale = [entry(source="0" * 16).to_json(),                              # the kernel's source changed since
             entry(config={"BR": 48, "BC": 16}).to_json(),                  # a value the space no longer has
             entry(config={"BR": 32, "XX": 1}).to_json(),                   # a name it no longer has
             {**entry().to_json(), "format": 0}]                            # another format
    cache.mkdir(parents=True)
    (cache / "scale.json").write_text(json.dumps({"entries": stale}))
    assert tune.resolve(scale, ref, args(), {}) == {}
    assert [tune.judge(r, scale)[1].split(":")[0] for r in stale] == ["stale"] * 4


def test_cache_info_and_clear(capsys, cache):
    y, x = random_array((40, 40), "bf16"), random_array((40, 40), "bf16")
    tune.search(gemm, registry.get("reference"), [poisoned((40, 40), "bf16"), y, x], {}, top=2)
    rc = cli.main(["cache", "info"])
    out = capsys.readouterr().out
    assert rc == 0 and "tuned configurations" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("gemm "))
    assert line.split()[1:4] == ["1", "0", "0"]
    assert cli.main(["cache", "clear", "tune"]) == 0
    assert not cache.exists() and tune.entries(gemm) == {}


# ---------------------------------------------------------------- searching

def test_tuned_launch_on_the_reference_matches_the_reference(monkeypatch):
    """tune=True searches (timed on the reference), stores the winner, and the launch runs it; the next launch
    in the bucket finds it without searching; a miss without tune=True never searches."""
    a, b = random_array((40, 72), "bf16"), random_array((72, 24), "bf16")
    c = poisoned((40, 24), "bf16")
    k = gemm(c, a, b, backend="reference", tune=True)
    assert_close(c, a.astype(np.float64) @ b.astype(np.float64), "bf16")
    stored = tune.entries(gemm)
    assert len(stored) == 1 and {n: k.consts[n] for n in ("BM", "BN", "BK", "SPLIT")} == next(iter(stored.values()))
    monkeypatch.setattr(tune, "search", lambda *a, **k: pytest.fail("searched without being asked"))
    c2 = poisoned((33, 24), "bf16")   # 33 rows: the same bucket (64)
    k2 = gemm(c2, a[:33].copy(), b, backend="reference")
    assert k2 is k or k2.consts == k.consts
    assert_close(c2, a[:33].astype(np.float64) @ b.astype(np.float64), "bf16")
    gemm(poisoned((100, 24), "bf16"), random_array((100, 72), "bf16"), b, backend="reference")   # a miss: default


def test_autotune_env_searches(monkeypatch):
    monkeypatch.setenv("TILES_AUTOTUNE", "1")
    y, x = args(40, 48)
    k = scale(y, x, backend="reference")
    assert_close(y, 2.0 * x.astype(np.float64), "f32")
    assert tune.entries(scale) and {n: k.consts[n] for n in ("BR", "BC")} in tune.entries(scale).values()


def test_a_candidate_with_wrong_output_is_not_chosen(monkeypatch):
    """The check before timing: a candidate whose output differs from the default's is marked, never the winner."""
    real = registry.Backend.run

    def broken(self, k, a):
        real(self, k, a)
        if k.consts["BR"] == 32:
            a[0][...] = 0
    monkeypatch.setattr(registry.Backend, "run", broken)
    r = tune.search(scale, registry.get("reference"), args(40, 48), {})
    bad = [c for c in r.candidates if c.config["BR"] == 32]
    assert bad and all(c.error and "differs" in c.error for c in bad)
    assert r.winner.config["BR"] == 16


def test_the_default_is_kept_unless_a_candidate_beats_it_by_the_margin():
    """Timings a few percent apart across processes (H200, 12-04) do not replace the default: a candidate must
    time more than search.MARGIN faster, and the report says when the default was kept."""
    s = importlib.import_module("tiles.tune.search")   # the module (tiles.tune.search is also the function)
    b, a = registry.get("reference"), args(40, 48)

    def result(other_s):
        default = s.Candidate(dict(BR=16, BC=16), default=True, time_s=1.0)
        other = s.Candidate(dict(BR=32, BC=16), time_s=other_s)
        return s.finish(scale, b, a, {}, [default, other], [default, other], "40x48", save=False)
    kept = result(1 - s.MARGIN / 2)
    assert kept.winner.default and kept.entry.config == dict(BR=16, BC=16)
    assert kept.notes == [f"BR=32,BC=16 timed {1 / (1 - s.MARGIN / 2):.3f}x the default, within the 3% margin: "
                          "the default kept"]
    beaten = result(1 - 2 * s.MARGIN)
    assert beaten.winner.config == dict(BR=32, BC=16) and not beaten.notes
    assert result(2.0).winner.default


def test_a_launch_that_hangs_stops_the_search_naming_it(monkeypatch):
    """A candidate whose launch never ends (four consumer warpgroups did on the H200, 12-04) stops the search with
    LaunchHung naming its configuration, instead of the search waiting on it forever; a launch with host arrays
    (tiles.testing.run, compare's check) stops the same way."""
    real = registry.Backend.run
    last = {}

    def run(self, k, a):
        last["BR"] = k.consts["BR"]
        real(self, k, a)
    monkeypatch.setattr(registry.Backend, "run", run)
    monkeypatch.setattr(registry.Backend, "finished", lambda self, timeout_s: last["BR"] != 32)
    with pytest.raises(registry.LaunchHung, match=r"scale with \{.*'BR': 32.*\} did not finish within 60 s on "
                                                  r"reference: the launch hangs"):
        tune.search(scale, registry.get("reference"), args(40, 48), {})
    y, x = args(40, 48)
    with pytest.raises(registry.LaunchHung, match="did not finish"):
        run_host("reference", scale, y, x, BR=32, BC=16)
    run_host("reference", scale, y, x, BR=16, BC=16)
    assert_close(y, 2.0 * x.astype(np.float64), "f32")


def test_tiles_tune_on_the_reference_and_compare_shows_the_tuned_row(capsys, cache):
    rc = cli.main(["tune", "gemm", "--backend", "reference", "--shapes", "40x40x72", "--json",
                   str(cache.parent / "t.json")])
    out = capsys.readouterr().out
    assert rc == 0 and "winner:" in out and "stored in" in out
    saved = json.loads((cache.parent / "t.json").read_text())
    assert saved[0]["timed"] and saved[0]["winner"] and saved[0]["winner_s"] > 0
    rc = cli.main(["compare", "gemm", "--backends", "reference", "--shapes", "40x40x72", "--no-compile"])
    out = capsys.readouterr().out
    assert rc == 0
    tuned = [ln for ln in out.splitlines() if "[tuned:" in ln]
    assert len(tuned) == 1 and " ok " in tuned[0]


def test_tiles_tune_without_a_device_says_it_was_not_timed(capsys, monkeypatch):
    """The static path, its compiles faked (the model and the report are what is tested)."""
    ok = toolchains.Static("gfx950", "fake", 256, shared_bytes=32 * 1024, spill_bytes=0, blocks_per_unit=2)
    monkeypatch.setattr(toolchains, "static", lambda *a, **k: ok)
    monkeypatch.setattr(toolchains, "emit", lambda kfn, a, t, what, **c: repr(sorted(c.items())))
    rc = cli.main(["tune", "gemm", "--static", "--target", "gfx950", "--shapes", "16x4096x4096"])
    out = capsys.readouterr().out
    assert rc == 0 and "NOT TIMED" in out and "choice (not timed): BM=64" in out
    assert not tune.cache_dir().exists()


def test_tiles_tune_with_every_candidate_pruned_says_why_in_one_line(capsys, monkeypatch):
    """Every candidate spills (faked): the CLI names the kernel, the target and each candidate's reason, exit 2,
    no traceback."""
    spills = toolchains.Static("gfx950", "fake", 256, shared_bytes=32 * 1024, spills="12", spill_bytes=48,
                               blocks_per_unit=2)
    monkeypatch.setattr(toolchains, "static", lambda *a, **k: spills)
    monkeypatch.setattr(toolchains, "emit", lambda kfn, a, t, what, **c: repr(sorted(c.items())))
    rc = cli.main(["tune", "gemm", "--static", "--target", "gfx950", "--shapes", "16x4096x4096"])
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]   # after the search's progress lines
    assert rc == 2 and "Traceback" not in err and last.startswith("tiles tune: tuning gemm for gfx950: every "
                                                                     "candidate was pruned: ")
    assert "(default): spills: 12" in last


@pytest.mark.skipif(toolchains.cannot_compile("gfx942") is not None, reason="no clang for AMDGPU")
def test_an_untouched_private_segment_is_not_a_spill():
    """clang reserves 36 B of private segment in attention backward on gfx942 (beside SGPRs spilled into VGPR
    lanes) and no instruction reads or writes it: the configured default is not pruned as spilling, where a
    kernel that spills VGPRs to scratch still is."""
    from tiles.backends.hip import toolchain as hip_toolchain
    from tiles.kernels.attention_bwd import attention_bwd
    x = lambda heads: Shaped((1, heads, 256, 128), "bf16")  # noqa: E731
    args = [x(1), x(1), Shaped((1, 2, 256, 128), "f32"), x(2), x(1), x(1), x(2), Shaped((1, 2, 256), "f32"),
            Shaped((1, 2, 256), "f32"), 0.1]
    st = toolchains.static(attention_bwd, args, "gfx942", D=128)
    assert st.spills.endswith("scratch 36 B untouched") and st.spill_bytes == 0
    assert hip_toolchain.SCRATCH_ACCESS.search("\tscratch_store_dwordx4 off, v[4:7], off  ; 16-byte Folded Spill")
    assert hip_toolchain.SCRATCH_ACCESS.search("\tbuffer_store_dword v1, off, s[0:3], 0 offset:4")
    assert not hip_toolchain.SCRATCH_ACCESS.search("\tbuffer_load_dwordx4 v[0:3], v4, s[8:11], 0 offen")


def test_the_amd_model_reads_the_main_loop_report():
    """Where the main loop's count says another unit needs twice the matrix core's clocks per MFMA, the matrix
    term doubles and names that unit."""
    class Loop:
        def bound(self):
            return {"matrix core": 8.0, "LDS bandwidth": 16.0, "VALU issue": 4.0}
    shapes = [Shaped((4096, 4096), "bf16")] * 3
    k = gemm.trace(shapes, "gfx950")
    plain = toolchains.Static("gfx950", "fake", 512, shared_bytes=96 * 1024, blocks_per_unit=1)
    looped = toolchains.Static("gfx950", "fake", 512, shared_bytes=96 * 1024, blocks_per_unit=1, loop=Loop())
    _, a = tune.model(k, shapes, "gfx950", plain)
    _, b = tune.model(k, shapes, "gfx950", looped)
    assert b["matrix_s"] == pytest.approx(2 * a["matrix_s"]) and b["loop_limit"] == "LDS bandwidth"


def test_a_planned_default_gives_way_to_the_tuned_value():
    """The one-pass softmax is passed its plan's rows per block (tune_defaults): the cache's RPB runs instead;
    an RPB the plan would not give is the caller's choice and stands."""
    from tiles.kernels.softmax import row_plan, softmax_rows
    ref = registry.get("reference")
    x = random_array((512, 256), "bf16")
    plan = row_plan(512, 256)
    view = (512, 256 // plan["K"], plan["K"])
    a = [poisoned(view, "bf16"), x.reshape(view)]
    target, device, tk = tune.identity(ref)
    key = tune.key_of(softmax_rows, ref, a, plan)
    other = 4 if plan["RPB"] != 4 else 2
    tune.store(softmax_rows, tune.Entry("softmax_rows", tune.source_hash(softmax_rows), target, device, tk,
                                        list(key[3]), list(key[4]), [list(f) for f in key[5]], {"RPB": other}))
    assert tune.resolve(softmax_rows, ref, a, dict(plan))["RPB"] == other
    assert tune.resolve(softmax_rows, ref, a, {**plan, "RPB": 8 if other != 8 else 16})["RPB"] != other
    k = softmax_rows(*a, backend="reference", **plan)
    e = np.exp(x.astype(np.float64) - x.astype(np.float64).max(-1, keepdims=True))
    assert k.consts["RPB"] == other
    assert_close(a[0].reshape(512, 256), e / e.sum(-1, keepdims=True), "bf16")


SHIPPED_SPACES = [("gemm", "16x4096x4096"), ("gemm_fp8", "256x512x256"), ("attention", "1x2x256x64"),
                  ("attention_bwd", "1x2x256x64"), ("softmax", "300x256"), ("layernorm", "300x256"),
                  ("rmsnorm", "300x256"), ("rotary", "1x2x40x64"), ("rotary", "1x2x40x64,interleaved")]


@pytest.mark.parametrize("workload, shape", SHIPPED_SPACES)
def test_every_shipped_space_expands_for_each_of_its_targets(workload, shape):
    """Each shipped kernel's search space names only its constants and launch options, for every target it
    lists, at a shape of its workload; the configured default comes first and is not repeated."""
    from tiles import bench
    w = bench.WORKLOADS[workload]
    s = w.parse(shape)
    kfn = w.kernel(s)
    assert kfn.tune is not None, f"{kfn.__name__} declares no search space"
    _, args, fixed = w.main(s, w.inputs(s, np.random.default_rng(0)))
    fixed = {k: v for k, v in fixed.items() if k != "tune"}
    for target in kfn.tune.per_target:
        if target != "default" and w.supports(target):
            continue
        cands = tune.candidates(kfn, None if target == "default" else target, args, fixed)
        assert cands and cands[0].default, (target, cands[:1])
        assert len({tuple(sorted(c.config.items())) for c in cands}) == len(cands), target
