"""Targets as data: lane maps are bijections, anchored to the vendors' documented elements, and
Atom.emulate equals a float64 matmul of the matrices the registers hold."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tiles import dtypes
from tiles.targets import DEVICES, TARGETS, device_for, target

ATOMS = {a.name: a for t in TARGETS.values() for a in t.atoms}


def _matrix_of(mp, regs, shape):
    """The matrix a set of per-lane registers holds, by explicit loops (independent of emulate)."""
    out = np.full(shape, np.nan)
    for lane in range(mp.shape[0]):
        for r in range(mp.shape[1]):
            out[tuple(mp[lane, r])] = regs[lane, r]
    return out


@pytest.mark.parametrize("name", sorted(ATOMS))
def test_maps_are_bijections(name):
    a = ATOMS[name]
    for mp, (rows, cols) in ((a.a, (a.m, a.k)), (a.b, (a.k, a.n)), (a.c, (a.m, a.n))):
        assert mp.shape[0] == a.lanes and mp.shape[2] == 2
        assert mp.shape[1] * a.lanes == rows * cols, "no replication is modelled: one owner per element"
        assert (mp[..., 0] >= 0).all() and (mp[..., 0] < rows).all()
        assert (mp[..., 1] >= 0).all() and (mp[..., 1] < cols).all()
        flat = mp[..., 0].astype(int) * cols + mp[..., 1]
        assert np.array_equal(np.sort(flat.ravel()), np.arange(rows * cols))


def _rand(rng, dtype, shape):
    scale = 4.0 if dtype.startswith("fp8") else 1.0
    return dtypes.of(dtype).round(rng.standard_normal(shape) * scale).astype(np.float64)


@pytest.mark.parametrize("name", sorted(ATOMS))
def test_emulate_is_matmul(name):
    a = ATOMS[name]
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    ra = _rand(rng, a.in_dtypes[0], a.a.shape[:2])
    rb = _rand(rng, a.in_dtypes[1], a.b.shape[:2])
    rc = _rand(rng, "f32", a.c.shape[:2])
    d = a.emulate(ra, rb, rc)
    assert d.dtype == np.float32 and d.shape == rc.shape
    A, B, C = _matrix_of(a.a, ra, (a.m, a.k)), _matrix_of(a.b, rb, (a.k, a.n)), _matrix_of(a.c, rc, (a.m, a.n))
    want = A @ B + C
    got = _matrix_of(a.c, d, (a.m, a.n))
    bound = np.abs(A) @ np.abs(B) + np.abs(C)
    assert np.all(np.abs(got - want) <= 2 ** -23 * bound + 1e-30)


@settings(max_examples=10, deadline=None)
@given(name=st.sampled_from(sorted(n for n in ATOMS if "wgmma" not in n or "n64k" in n)),
       batch=st.lists(st.integers(1, 3), max_size=2), seed=st.integers(0, 2**32 - 1))
def test_emulate_batched(name, batch, seed):
    a = ATOMS[name]
    rng = np.random.default_rng(seed)
    ra = _rand(rng, a.in_dtypes[0], (*batch, *a.a.shape[:2]))
    rb = _rand(rng, a.in_dtypes[1], (*batch, *a.b.shape[:2]))
    rc = _rand(rng, "f32", (*batch, *a.c.shape[:2]))
    d = a.emulate(ra, rb, rc)
    for idx in np.ndindex(*batch):
        assert np.array_equal(d[idx], a.emulate(ra[idx], rb[idx], rc[idx]))


def test_emulate_rejects_wrong_register_shape():
    a = target("gfx942").atom("mfma_f32_16x16x16_bf16")
    with pytest.raises(ValueError, match=r"a_regs has shape \(64, 8\)"):
        a.emulate(np.zeros((64, 8)), np.zeros((64, 4)), np.zeros((64, 4)))


# Anchors: single elements read off the vendors' documentation, so that a wrong formula that is
# still a bijection fails.
@pytest.mark.parametrize("tgt,atom,operand,lane,reg,rowcol", [
    # PTX 9.7.14.5.8: a_i row groupID (+8 for i in {2,3,6,7}), col 2*tid_in_group + (i&1) (+8 for i>=4)
    ("sm_80", "mma.sync.m16n8k16.bf16", "a", 5, 0, (1, 2)),
    ("sm_80", "mma.sync.m16n8k16.bf16", "a", 5, 3, (9, 3)),
    ("sm_80", "mma.sync.m16n8k16.f16", "a", 31, 7, (15, 15)),
    ("sm_80", "mma.sync.m16n8k16.f16", "b", 6, 2, (12, 1)),
    ("sm_80", "mma.sync.m16n8k16.f16", "c", 6, 3, (9, 5)),
    # wgmma: warp 2 of the warpgroup owns rows 32..47; D repeats the 16x8 fragment per 8 columns
    ("sm_90a", "wgmma.m64n32k16.bf16", "c", 64 + 5, 6, (32 + 1 + 8, 8 + 2)),
    ("sm_90a", "wgmma.m64n64k32.fp8e4m3", "a", 32 + 4, 9, (17, 17)),
    # CDNA3 16x16x16: lane 16 holds A[0][4..7]; B[k][n] in lane n + 16*(k//4); C row 4*(lane//16)+i
    ("gfx942", "mfma_f32_16x16x16_bf16", "a", 16, 0, (0, 4)),
    ("gfx942", "mfma_f32_16x16x16_f16", "b", 33, 2, (10, 1)),
    ("gfx942", "mfma_f32_16x16x16_f16", "c", 63, 3, (15, 15)),
    # CDNA3 32x32x8: C[l%32 + 32*(4*(l/32) + j + 8*i)] = c[4*i + j] (ROCm blog 32x32x2 example)
    ("gfx942", "mfma_f32_32x32x8_bf16", "c", 33, 5, (13, 1)),
    ("gfx942", "mfma_f32_32x32x16_fp8_fp8", "a", 40, 7, (8, 15)),
    ("gfx950", "mfma_f32_16x16x32_bf16", "a", 17, 7, (1, 15)),
    ("gfx950", "mfma_scale_f32_16x16x128_fp8_fp8", "a", 16, 16, (0, 80)),
    # MLX BaseMMAFrag get_coord: lane 2 -> row 1, cols 0-1; lane 12 (q=3) -> row 2, cols 4-5
    ("apple", "simdgroup_8x8.f16", "c", 2, 1, (1, 1)),
    ("apple", "simdgroup_8x8.f32", "a", 12, 0, (2, 4)),
    ("apple", "simdgroup_8x8.bf16", "b", 17, 1, (4, 3)),
])
def test_documented_elements(tgt, atom, operand, lane, reg, rowcol):
    mp = getattr(target(tgt).atom(atom), operand)
    assert tuple(int(x) for x in mp[lane, reg]) == rowcol


def test_targets_describe_hardware():
    assert {t: TARGETS[t].lanes for t in TARGETS} == {"sm_80": 32, "sm_90a": 32, "gfx942": 64, "gfx950": 64, "apple": 32}
    assert TARGETS["gfx950"].shared_bytes == 160 * 1024 and TARGETS["gfx950"].banks == 64
    assert "fp8e4m3" in TARGETS["sm_90a"].dtypes and "fp8e4m3" not in TARGETS["sm_80"].dtypes
    assert "fp8e4m3" not in TARGETS["apple"].dtypes
    for t in TARGETS.values():
        assert all(a.lanes in (t.lanes, 4 * t.lanes) for a in t.atoms)
        assert all(set(a.in_dtypes) <= t.dtypes for a in t.atoms)
        assert len({a.name for a in t.atoms}) == len(t.atoms)
    assert [a.n for a in TARGETS["sm_90a"].atoms_for("bf16") if a.name.startswith("wgmma")] == list(range(8, 257, 8))
    assert {a.name for a in TARGETS["gfx950"].atoms_for("bf16")} == {
        "mfma_f32_16x16x16_bf16", "mfma_f32_32x32x8_bf16", "mfma_f32_16x16x32_bf16", "mfma_f32_32x32x16_bf16"}
    assert TARGETS["gfx942"].atoms_for("fp8e4m3", "fp8e5m2")[0].name == "mfma_f32_16x16x32_fp8_bf8"
    assert not any(a.documented for a in TARGETS["apple"].atoms)


def test_lookup_errors_name_the_choices():
    with pytest.raises(KeyError, match="known: sm_80, sm_90a, gfx942, gfx950, apple"):
        target("gfx90a")
    with pytest.raises(KeyError, match="mfma_f32_16x16x16_bf16"):
        target("gfx942").atom("mfma_f32_16x16x16bf16")


@pytest.mark.parametrize("reported,name", [
    ("NVIDIA H200", "H200 SXM"), ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM"), ("NVIDIA B200", "B200"),
    ("AMD Instinct MI300X", "MI300X"), ("AMD Instinct MI325X", "MI325X"), ("AMD Instinct MI355X", "MI355X"),
    ("Apple M2 Max", "M2 Max"), ("Apple M1", "M1"), ("Apple M4 Pro", "M4 Pro"), ("Apple M3 Ultra", "M3"),
    ("Intel(R) Arc(TM) A770", None), ("NVIDIA GeForce RTX 4090", None),
])
def test_device_for(reported, name):
    dev = device_for(reported)
    assert (dev.name if dev else None) == name


def test_device_table():
    for d in DEVICES.values():
        assert d.target in TARGETS and d.vendor == TARGETS[d.target].vendor
        assert d.mem_bw_tbs > 0 and d.units > 0 and d.peak_tflops["bf16"] >= d.peak_tflops["f32"]
        assert ("fp8" in d.peak_tflops) == ("fp8e4m3" in TARGETS[d.target].dtypes) or d.name == "A100 SXM"
    assert DEVICES["MI355X"].peak_tflops["bf16"] == pytest.approx(2516.6)
