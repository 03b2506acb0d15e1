"""backends/hip/loopreport.py: the main loop of gfx9 assembly found by itself, counted per MFMA, bounded."""
import re

import numpy as np
import pytest

from tiles import bench, cli, targets, toolchains
from tiles.backends.hip import loopreport as lr

# The function's start, as clang writes it, shared by the loops below
HEAD = """\
	.amdgcn_target "amdgcn-amd-amdhsa--gfx950"
	.globl	k
	.type	k,@function
k:                                      ; @k
; %bb.0:
	s_mov_b32 s4, 0
"""

# A tile loop as clang lays it out: the latch (MFMAs) first, the header (barrier, LDS reads) branching to
# the latch on the last tile, a direct-to-LDS prefetch in an inner loop of two trips (a scalar counter),
# and a fallback of 16-bit loads for ragged tiles.
TILE_LOOP = HEAD + """\
	s_branch .LBB0_2
.LBB0_1:                                ;   in Loop: Header=BB0_2 Depth=1
	s_waitcnt lgkmcnt(0)
	v_mfma_f32_16x16x32_bf16 v[0:3], v[4:7], v[8:11], v[0:3]
	v_mfma_f32_16x16x32_bf16 v[12:15], v[4:7], v[8:11], v[12:15]
	s_cmp_eq_u32 s4, s5
	s_cbranch_scc1 .LBB0_7
.LBB0_2:                                ; =>This Loop Header: Depth=1
                                        ;     Child Loop BB0_5 Depth 2
	s_add_i32 s4, s4, 1
	s_waitcnt vmcnt(0) lgkmcnt(0)
	s_barrier
	ds_read_b128 v[4:7], v1
	ds_read_b64_tr_b16 v[8:9], v2
	s_cmp_ge_i32 s4, s6
	s_cbranch_scc1 .LBB0_1
; %bb.3:                                ;   in Loop: Header=BB0_2 Depth=1
	s_mov_b32 s10, 0
	v_add_u32_e32 v3, s7, v3
	s_and_b64 vcc, exec, s[8:9]
	s_cbranch_vccnz .LBB0_4
.LBB0_5:                                ;   Parent Loop BB0_2 Depth=1
                                        ; =>  This Inner Loop Header: Depth=2
	buffer_load_dwordx4 v3, s[0:3], 0 offen lds
	s_add_i32 s10, s10, 1
	s_cmp_lg_u32 s10, 2
	s_cbranch_scc1 .LBB0_5
; %bb.6:                                ;   in Loop: Header=BB0_2 Depth=1
	s_branch .LBB0_1
.LBB0_4:                                ;   in Loop: Header=BB0_2 Depth=1
	buffer_load_ushort v20, v3, s[0:3], 0 offen
	buffer_load_ushort v21, v3, s[0:3], 0 offen offset:2
	ds_write_b16 v1, v20
	ds_write_b16 v1, v21 offset:2
	s_branch .LBB0_1
.LBB0_7:
	s_endpgm
.Lfunc_end0:
"""

# An MFMA loop that moves no tile (two trips, clang's flag shape) inside the loop that loads the tiles.
K_LOOP = """\
	.type	k2,@function
k2:
; %bb.0:
	s_branch .LBB1_1
.LBB1_1:                                ; =>This Loop Header: Depth=1
                                        ;     Child Loop BB1_2 Depth 2
	buffer_load_dwordx4 v1, s[0:3], 0 offen lds
	s_waitcnt vmcnt(0)
	s_barrier
	s_mov_b64 s[2:3], -1
.LBB1_2:                                ;   Parent Loop BB1_1 Depth=1
                                        ; =>  This Inner Loop Header: Depth=2
	ds_read_b64 v[4:5], v1
	s_and_b64 vcc, exec, s[2:3]
	s_mov_b64 s[2:3], 0
	s_waitcnt lgkmcnt(0)
	v_mfma_f32_16x16x16_bf16 v[0:3], v[4:5], v[4:5], v[0:3]
	s_cbranch_vccnz .LBB1_2
; %bb.3:                                ;   in Loop: Header=BB1_1 Depth=1
	s_add_i32 s4, s4, 1
	s_cmp_lg_u32 s4, s5
	s_cbranch_scc1 .LBB1_1
; %bb.4:
	s_endpgm
.Lfunc_end1:
"""


# A fill behind a full-tile test: the edge side (the fall-through) checks every lane's row and issues more
# loads of the same width, under an exec mask; the full side issues one. The hot path is the full tile's.
EDGE_LOOP = """\
	.type	k3,@function
k3:
; %bb.0:
	s_branch .LBB2_1
.LBB2_1:                                ; =>This Loop Header: Depth=1
	s_waitcnt vmcnt(0)
	s_barrier
	s_cmp_gt_i32 s8, s9
	s_cbranch_scc0 .LBB2_3
; %bb.2:                                ;   in Loop: Header=BB2_1 Depth=1
	v_cmp_gt_i32_e32 vcc, s9, v2
	s_and_saveexec_b64 s[4:5], vcc
	buffer_load_dwordx4 v[4:7], v1, s[0:3], 0 offen
	buffer_load_dwordx4 v[8:11], v1, s[0:3], 0 offen offset:16
	s_or_b64 exec, exec, s[4:5]
	ds_write_b128 v3, v[4:7]
	ds_write_b128 v3, v[8:11] offset:16
	s_branch .LBB2_4
.LBB2_3:                                ;   in Loop: Header=BB2_1 Depth=1
	buffer_load_dwordx4 v1, s[0:3], s10 offen lds
.LBB2_4:                                ;   in Loop: Header=BB2_1 Depth=1
	s_waitcnt lgkmcnt(0)
	v_mfma_f32_16x16x32_bf16 v[12:15], v[4:7], v[8:11], v[12:15]
	s_add_i32 s8, s8, 1
	s_cmp_lg_u32 s8, s11
	s_cbranch_scc1 .LBB2_1
; %bb.5:
	s_endpgm
.Lfunc_end2:
"""


def test_instruction_sizes():
    assert [lr.lds_bytes(m) for m in ("ds_read_b128", "ds_read2st64_b64", "ds_read2_b32", "ds_read_b64_tr_b16",
                                      "ds_read_u16_d16_hi", "ds_read_u8", "ds_write_b16", "ds_bpermute_b32")] == \
        [16, 16, 8, 8, 2, 1, 2, 4]
    assert [lr.global_bytes(m) for m in ("buffer_load_dwordx4", "buffer_load_ushort", "global_load_lds_dwordx4",
                                         "buffer_load_dword", "buffer_atomic_add_f32", "buffer_store_short",
                                         "buffer_atomic_pk_add_bf16")] == [16, 2, 16, 4, 4, 2, 4]
    assert lr.mfma_shape("v_mfma_scale_f32_16x16x128_f8f6f4") == (16, 16, 128, "fp8")
    assert lr.mfma_shape("v_mfma_f32_32x32x8_bf16") == (32, 32, 8, "bf16")
    assert lr.mfma_shape("v_mfma_f32_16x16x32_bf8_fp8") == (16, 16, 32, "fp8")
    assert lr.classify("buffer_load_dword v1, s[0:3], 0 offen lds") == ("global_load", "buffer_load_dword lds")
    assert lr.classify("global_load_lds_dwordx4 v[2:3], off") == ("global_load", "global_load_lds_dwordx4 lds")
    assert lr.classify("s_waitcnt vmcnt(4) lgkmcnt(0)") == ("wait", "vmcnt(4) lgkmcnt(0)")


def test_cu_rates_match_the_device_table():
    """The per-CU MFMA rates times CUs and engine clock give the datasheet peaks of tiles.targets.DEVICES."""
    for dev, ghz in (("MI300X", 2.1), ("MI355X", 2.4)):
        d = targets.DEVICES[dev]
        for dtype in ("bf16", "fp8"):
            peak = d.units * ghz * 1e9 * targets.CU_RATES[d.target].mfma_flops[dtype] / 1e12
            assert peak == pytest.approx(d.peak_tflops[dtype], rel=0.01)
    assert targets.CU_RATES["gfx942"].mfma_clocks(16, 16, 16, "bf16") == 16
    assert targets.CU_RATES["gfx950"].mfma_clocks(32, 32, 16, "bf16") == 32


def test_tile_loop_hot_path_and_counts():
    r = lr.analyse(TILE_LOOP, "gfx950", waves_per_simd=2)
    assert (r.function, r.header) == ("k", "BB0_2")
    assert r.path == ["BB0_2", "bb.3", "BB0_5", "bb.6", "BB0_1"]
    assert r.inner == {"BB0_5": 2}
    assert r.cold == ["BB0_4"]
    assert r.decisions == ["BB0_2 -> bb.3 over BB0_1 (more global loads, stores and LDS writes: the next tile issued, results written)",
                           "bb.3 -> BB0_5 over BB0_4 (no per-lane code (exec masks, vector compares, sub-dword loads): "
                           "full tiles)"]
    c = r.counts
    assert (r.mfma, r.instructions) == (2, 25)
    assert c["lds_read"] == {"ds_read_b128": 1, "ds_read_b64_tr_b16": 1} and not c["lds_write"]
    assert c["global_load"] == {"buffer_load_dwordx4 lds": 2}
    assert c["wait"] == {"lgkmcnt(0)": 1, "vmcnt(0) lgkmcnt(0)": 1}
    assert [sum(c[k].values()) for k in ("valu", "salu", "barrier", "branch")] == [1, 9, 1, 6]
    b = r.bound()
    # 2 x 16 clocks of matrix core; 16 + 8 + 2 x 16 bytes a lane through the LDS, 4 SIMDs x 64 lanes, 256 B/clock
    assert b["matrix core"] == 16 and b["LDS bandwidth"] == 4 * 64 * 56 / 256 / 2
    assert b["wave issue"] == 4 * 25 / 2 / 2
    assert r.limit() == ("LDS bandwidth", 28)
    assert "limited by LDS bandwidth: 28.0 clocks per MFMA" in r.text()
    # the first MFMA comes after the path's other work, the second right after it
    assert r.mfma_runs() == (1, 2) and "MFMAs after other work 1 of 2, longest run back to back 2" in r.text()


def test_edge_tile_branch_takes_the_full_tile():
    r = lr.analyse(EDGE_LOOP, "gfx950")
    assert r.path == ["BB2_1", "BB2_3", "BB2_4"] and r.cold == ["bb.2"]
    assert r.decisions == ["BB2_1 -> BB2_3 over bb.2 (no per-lane code (exec masks, vector compares, sub-dword "
                           "loads): full tiles)"]
    assert r.counts["global_load"] == {"buffer_load_dwordx4 lds": 1} and not r.counts["lds_write"]


def test_tile_loop_around_an_mfma_loop():
    r = lr.analyse(K_LOOP, "gfx942")
    assert (r.header, r.path, r.inner) == ("BB1_1", ["BB1_1", "BB1_2", "bb.3"], {"BB1_2": 2})
    assert (r.mfma, r.instructions) == (2, 4 + 2 * 6 + 3)
    assert r.counts["lds_read"] == {"ds_read_b64": 2}
    assert r.row("k2")[:5] == ("k2", "gfx942", "v_mfma_f32_16x16x16_bf16 2", "9.50", "1.00 read_b64")


def test_the_function_with_most_mfmas_is_reported():
    assert lr.analyse(K_LOOP + TILE_LOOP, "gfx950").function == "k"
    assert lr.analyse("\t.type f,@function\nf:\n\ts_endpgm\n.Lfunc_end0:\n", "gfx950") is None


def test_inspect_asm(tmp_path, capsys):
    f = tmp_path / "tile_loop.s"
    f.write_text(TILE_LOOP)
    assert cli.main(["inspect", "--asm", str(f)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"tile_loop\s+gfx950\s+v_mfma_f32_16x16x32_bf16 2\s+12.50", out)
    assert cli.main(["inspect", "--asm", str(f), "--emit", "loop"]) == 0
    assert "hot path: BB0_2 > bb.3 > BB0_5 (inner loop x2) > bb.6 > BB0_1" in capsys.readouterr().out


@pytest.mark.parametrize("shape", ["64x64x64,bt", "64x64x64"])
def test_generated_gemm_loop_has_every_mfma(shape):
    """On a kernel we generate (extents are runtime values: a small shape compiles the same code): the main
    loop found holds every MFMA of the kernel, on its hot path."""
    w = bench.workload("gemm")
    s = w.parse(shape)
    kfn, args, consts = w.main(s, w.inputs(s, np.random.default_rng(0)))
    asm = toolchains.emit(kfn, args, "gfx950", "asm", **consts)
    r = toolchains.static(kfn, args, "gfx950", **consts).loop
    assert r.mfma == len(re.findall(r"^\s*v_mfma", asm, re.M)) > 0
    assert r.counts["mfma"].keys() == {"v_mfma_f32_16x16x32_bf16"} and r.bound()["matrix core"] == 16
    # the loop has edge-tile code (checked, exec-masked loads); the path chosen has none of it
    f = next(f for f in lr.parse(asm) if f.name == r.function)
    assert any(lr.per_lane(ln) for n in r.cold for ln in f.blocks[n].lines)
    assert not any(lr.per_lane(ln) for n in r.path for ln in f.blocks[n].lines)


# issue 17's bar: HipKittens' GEMM per MFMA (gfx950 2.40 instructions / 0.08 waits, gfx942 1.95 / 0.09), 1.25x
@pytest.mark.parametrize("target, instructions, waits", [("gfx950", 3.0, 0.1), ("gfx942", 2.44, 0.11)])
@pytest.mark.parametrize("shape", ["4096x4096x4096,bt", "4096x4096x4096"])
def test_gemm_main_loop_within_the_bar(target, instructions, waits, shape):
    w = bench.workload("gemm")
    s = w.parse(shape)
    kfn, args, consts = w.main(s, w.inputs(s, np.random.default_rng(0)))
    r = toolchains.static(kfn, args, target, **consts).loop
    assert r.per(r.instructions) <= instructions and r.per(sum(r.counts["wait"].values())) <= waits, r.text()
    # the accumulator over a 2-D grid of waves: each wave a 64 x 128 block, 4 + 8 fragment reads per K step
    assert sum(r.counts["lds_read"].values()) / r.mfma <= (0.5 if "bt" in shape or target == "gfx942" else 0.625)


# clang's flag for an `if (full) { ...; return; }` inlined into a loop: the flag is always set on the way in,
# the skip never taken; only the instruction count would favour it
STORE_LOOP = HEAD + """\
.LBB0_1:                                ; =>This Loop Header: Depth=1
	v_mfma_f32_16x16x32_bf16 v[0:3], v[4:7], v[8:11], v[0:3]
	s_mov_b64 s[36:37], -1
	s_and_b64 vcc, exec, s[36:37]
	s_cbranch_vccz .LBB0_3
; %bb.2:                                ;   in Loop: Header=BB0_1 Depth=1
	buffer_atomic_add_f32 v0, v9, s[0:3], s5 offen
	buffer_atomic_add_f32 v1, v9, s[0:3], s6 offen
.LBB0_3:                                ;   in Loop: Header=BB0_1 Depth=1
	s_add_i32 s4, s4, 1
	s_cmp_lg_u32 s4, s7
	s_cbranch_scc1 .LBB0_1
; %bb.4:
	s_endpgm
.Lfunc_end0:
"""


def test_hot_path_keeps_the_stores_a_flag_could_skip():
    r = lr.analyse(STORE_LOOP, "gfx950")
    assert r.path == ["BB0_1", "bb.2", "BB0_3"]
    assert r.counts["global_store"] == {"buffer_atomic_add_f32": 2}
