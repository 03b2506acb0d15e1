"""tiles: write a GPU kernel once against typed tiles; run it on NVIDIA, AMD and Apple GPUs.

    import tiles as tl

    @tl.kernel
    def scale(Y, X, s, *, BR=64, BC=64):
        br, bc = tl.grid(tl.cdiv(X.rows, BR), tl.cdiv(X.cols, BC))
        x = tl.regs(tl.f32, BR, BC)
        tl.load(x, X, (br, bc))
        tl.mul(x, x, s)
        tl.store(Y, x, (br, bc))
"""
from .dsl import (TileError, abs, add, add_col, add_row, atomic_add, bounds_mask, broadcast_over, causal_mask, cdiv,
                  check_eq, check_gt, col_max, col_min, col_sum, copy, cos, div, div_col, div_row, dropout, eq, erf,
                  exp, exp2, fill, ge, gelu, grid, gt, kernel, le, load, log, log2, logsumexp2, lt, max, maximum,
                  min, minimum, mma_AB, mma_ABt, mma_AtB, mma_AtBt, mul, mul_col, mul_row, ne, neg, pipeline, pow,
                  range, regs, relu, row_max, row_min, row_sum, rsqrt, rvec, shared, shared_vec, sigmoid, silu, sin,
                  sqrt, store, store_sum, sub, sub_col, sub_row, swap_pairs, tanh, tile_max, tile_min, tile_sum, where, zero)
from .dtypes import DType, bf16, f16, f32, fp8e4m3, fp8e5m2, i32
from . import tune  # noqa: E402 - tl.tune.pow2 and friends, for the search spaces kernels declare

__version__ = "0.1.0"
