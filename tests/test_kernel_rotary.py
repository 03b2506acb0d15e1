"""Rotary embedding (half-split and interleaved) on every backend against float64."""
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from tiles import dtypes, ir, toolchains
from tiles.kernels.rotary import PAIRS, _constants, rotary, rotary_half, rotary_interleaved, tables
from tiles.testing import assert_close, random_array


def reference_rotary(x, cos, sin, interleaved):
    x, c, s = (np.asarray(a).astype(np.float64) for a in (x, cos, sin))
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = a * c - b * s, b * c + a * s
        return out
    a, b = np.split(x, 2, axis=-1)
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


@settings(max_examples=6)
@given(batch=st.integers(1, 2), kv_heads=st.integers(1, 2), group=st.sampled_from([1, 2]),
       n=st.integers(1, 100), d=st.sampled_from([64, 128]), interleaved=st.booleans(),
       dtype=st.sampled_from(["bf16", "f16"]), head_groups=st.sampled_from([1, 2, 3]))
# every backend, ragged rows; 3 head groups over 2 q heads and 1 k head: the groups past the last head write nothing
@example(batch=1, kv_heads=1, group=2, n=37, d=64, interleaved=True, dtype="bf16", head_groups=3)
@example(batch=2, kv_heads=1, group=2, n=70, d=128, interleaved=False, dtype="bf16", head_groups=3)
def test_rotary(backend, batch, kv_heads, group, n, d, interleaved, dtype, head_groups):
    q = random_array((batch, kv_heads * group, n, d), dtype)
    k = random_array((batch, kv_heads, n, d), dtype)
    cos, sin = (dtypes.of(dtype).round(t).astype(q.dtype) for t in tables(n, d))
    qo, ko = rotary(q, k, cos, sin, interleaved=interleaved, backend=backend, HG=head_groups)
    assert_close(qo, reference_rotary(q, cos, sin, interleaved), dtype, what="q")
    assert_close(ko, reference_rotary(k, cos, sin, interleaved), dtype, what="k")


def test_interleaved_head_loop_exchanges_pairs_without_a_product():
    """tl.swap_pairs exchanges the pairs: the loops over heads hold no mma (cos and sin are spread once per block)."""
    q = random_array((1, 2, 8, 2 * PAIRS), "bf16")
    t = random_array((8, PAIRS), "bf16")
    k = rotary_interleaved.trace([q, q, q, q, t, t, *_constants(q.dtype)])
    loops = [s for s in k.body if isinstance(s, ir.Loop)]
    assert len(loops) == 2
    for loop in loops:
        names = [op.name for op, _ in ir.walk(loop.body)]
        assert "mma" not in names and names.count("swap_pairs") == 1, names
    assert sum(op.name == "mma" for op, _ in k.walk()) == 2


def test_rotary_conventions_differ():
    """The two conventions pair different elements: a kernel that ignored the flag would fail one test."""
    q = random_array((1, 1, 8, 32), "bf16")
    cos, sin = (dtypes.bf16.round(t).astype(q.dtype) for t in tables(8, 32))
    half, _ = rotary(q, q, cos, sin)
    inter, _ = rotary(q, q, cos, sin, interleaved=True)
    assert not np.allclose(half.astype(np.float64), inter.astype(np.float64))


def test_rotary_bad_input():
    q = random_array((1, 2, 8, 48), "bf16")
    cos, sin = (dtypes.bf16.round(t).astype(q.dtype) for t in tables(8, 48))
    with pytest.raises(ValueError, match="multiple of 32"):
        rotary(q, q, cos, sin)
    with pytest.raises(ValueError, match="cos and sin of shape"):
        rotary(q, q, cos[:4], sin[:4], interleaved=True)
    with pytest.raises(ValueError, match="share one dtype"):
        rotary(q, q, cos.astype(np.float32), sin, interleaved=True)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("interleaved", [False, True])
def test_q_and_k_move_as_16_byte_chunks_on_cuda(target, interleaved):
    """q and k reach shared memory as 16-byte cp.async copies and leave it as 16-byte stores."""
    why = toolchains.cannot_compile(target)
    if why:
        pytest.skip(why)
    q = random_array((2, 4, 64, 128), "bf16")
    t = random_array((64, 64), "bf16")
    if interleaved:
        v, tv = q.reshape(2, 4, -1, 2 * PAIRS), t.reshape(-1, PAIRS)
        sass = toolchains.emit(rotary_interleaved, [v, v, v, v, tv, tv, *_constants(q.dtype)], target, "sass")
    else:
        sass = toolchains.emit(rotary_half, [q, q, q, q, t, t], target, "sass", W=64)
    assert "LDGSTS.E.BYPASS.128" in sass and "STG.E.128" in sass
