"""fp8 GEMM (e4m3, per-tensor scales, bf16 out) against float64 on every backend whose target has fp8."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tiles as tl
from tiles.kernels.gemm_fp8 import gemm_fp8, matmul_fp8, supports_fp8
from tiles.testing import assert_close, random_array


def needs_fp8(backend):
    if not supports_fp8(backend.target):
        pytest.skip(f"{backend.target} has no fp8 e4m3 (no fp8 MMA on this target)")


@settings(max_examples=6)
@given(m=st.integers(1, 200), n=st.integers(1, 200), k=st.integers(1, 400),
       scale_a=st.floats(0.01, 4.0), scale_b=st.floats(0.01, 4.0), spread=st.sampled_from([1.0, 60.0]),
       split=st.sampled_from([1, 1, 2, 3]))
def test_gemm_fp8(backend, m, n, k, scale_a, scale_b, spread, split):
    """Against float64, K whole or split over `split` blocks a tile (the last of a tile adds the parts; a split
    rarely divides the K steps, and past K's end a part may have none)."""
    needs_fp8(backend)
    a = random_array((m, k), "fp8e4m3", scale=spread)
    b = random_array((n, k), "fp8e4m3", scale=spread)
    c = matmul_fp8(a, b, scale_a, scale_b, backend=backend, SPLIT=split)
    assert c.dtype == tl.bf16.np
    ref = a.astype(np.float64) @ b.astype(np.float64).T * np.float32(scale_a) * np.float32(scale_b)
    assert_close(c, ref, "bf16")


def test_gemm_fp8_refused_without_fp8():
    a = random_array((16, 32), "fp8e4m3")
    with pytest.raises(tl.TileError, match="does not support dtype fp8e4m3"):
        gemm_fp8.trace([np.zeros((16, 16), tl.bf16.np), a, a, 1.0, 1.0], "sm_80")


def test_gemm_fp8_shape_mismatch():
    a = random_array((16, 32), "fp8e4m3")
    b = random_array((16, 48), "fp8e4m3")
    with pytest.raises(ValueError, match="expected a"):
        matmul_fp8(a, b, 1.0, 1.0)


def test_gemm_fp8_split_is_one_launch_with_its_workspace():
    """A split of K is one launch with the parts' f32 workspace and one zeroed counter per tile (gemm.split_workspace);
    traced alone, without them, it refuses, and so does a workspace without a split."""
    from tiles.tune import Shaped
    args = [Shaped((5, 40), "bf16"), Shaped((5, 512), "fp8e4m3"), Shaped((40, 512), "fp8e4m3"), 1.0, 1.0]
    ((f, (*same, parts, arrivals), kw),) = gemm_fp8.steps(args, "sm_90a", SPLIT=4, BM=64, BN=32)
    assert f is gemm_fp8 and same == args and kw == {"SPLIT": 4, "BM": 64, "BN": 32}
    assert parts.shape == (4, 5, 40) and arrivals.shape == (1, 2) and arrivals.fill == 0
    with pytest.raises(tl.TileError, match="SPLIT=4 without the parts' workspace"):
        gemm_fp8.trace(args, "sm_90a", SPLIT=4)
    with pytest.raises(tl.TileError, match="SPLIT=1 with the parts' workspace"):
        gemm_fp8.trace([*args, parts, arrivals], "sm_90a")


def test_gemm_fp8_decode_shapes_split_k_on_sm90a():
    """Up to 128 rows, sm_90a gets 64- or 128-row tiles by 64 or 128 (kernels/gemm_fp8.py skinny), not the 16 blocks of
    the configured 128x256, with K split to fill the SMs where each part keeps gemm.PART_STEPS steps (the H100's
    winners: K whole at 4096, split 2 at 14336); other shapes and targets keep their configuration."""
    from tiles.tune import Shaped

    def chosen(m, n, k, target="sm_90a"):
        return gemm_fp8.shape_config(target, [Shaped((m, n), "bf16"), Shaped((m, k), "fp8e4m3"),
                                              Shaped((n, k), "fp8e4m3"), 1.0, 1.0])
    assert chosen(1, 4096, 4096) == dict(BM=64, BN=64, BK=128, stages=8, workers=1, SPLIT=1)
    assert chosen(16, 14336, 4096)["BN"] == 128   # 224 blocks of 64 columns: more than the SMs
    assert chosen(16, 4096, 14336)["SPLIT"] == 2
    assert chosen(128, 4096, 4096)["BM"] == 128 and chosen(128, 4096, 4096)["workers"] == 2
    assert chosen(16, 28672, 8192)["SPLIT"] == 1   # 224 tiles fill the SMs already
    assert chosen(512, 4096, 4096) == {} and chosen(1, 4096, 4096, "gfx950") == {}
