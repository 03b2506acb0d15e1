"""Attention backward (MHA/GQA, causal or not, every head dim of attention_bwd.HEAD_DIMS) on every backend against
float64 gradients."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tiles import dtypes
from tiles.kernels.attention import attention, reference, scores
from tiles.kernels.attention_bwd import attention_backward
from tiles.testing import assert_close, random_array


def up(x):
    return np.asarray(x).astype(np.float64)


def reference_attention_grads(q, k, v, do, causal, scale, o_given=None):
    """float64 O, LSE and the closed-form gradients dQ, dK, dV (GQA: dK, dV summed over each group).

    Delta = rowsum(dO * O) takes O as the backward is handed it (o_given, e.g. rounded to q's dtype), exact if
    none: the rounding of its input is not the backward's error, and with few keys dP - Delta cancels."""
    group = q.shape[1] // k.shape[1]
    o, lse = reference(q, k, v, causal=causal, scale=scale)
    p = np.exp(scores(q, k, causal=causal, scale=scale) - lse[..., None])
    kf, vf = np.repeat(up(k), group, axis=1), np.repeat(up(v), group, axis=1)
    dof = up(do)
    dp = dof @ vf.transpose(0, 1, 3, 2)
    ds = p * (dp - (dof * (o if o_given is None else up(o_given))).sum(-1, keepdims=True))
    dq = scale * ds @ kf
    dk = scale * ds.transpose(0, 1, 3, 2) @ up(q)
    dv = p.transpose(0, 1, 3, 2) @ dof
    fold = lambda g: g.reshape(g.shape[0], -1, group, *g.shape[2:]).sum(2)  # noqa: E731
    return o, lse, dq, fold(dk), fold(dv)


@settings(max_examples=4)
@given(batch=st.integers(1, 2), kv_heads=st.integers(1, 2), group=st.sampled_from([1, 2]),
       n=st.integers(2, 100), n_kv=st.integers(2, 100), d=st.sampled_from([64, 128]), causal=st.booleans(),
       dtype=st.sampled_from(["bf16", "f16"]), longest_first=st.booleans(), staged=st.booleans())
def test_attention_backward(backend, batch, kv_heads, group, n, n_kv, d, causal, dtype, longest_first, staged):
    check_attention_backward(backend, batch, kv_heads, group, n, n_kv, d, causal, dtype, longest_first, staged)


@settings(max_examples=2)
@given(n=st.integers(2, 100), n_kv=st.integers(2, 100), group=st.sampled_from([1, 2]), causal=st.booleans(),
       dtype=st.sampled_from(["bf16", "f16"]), longest_first=st.booleans())
@pytest.mark.parametrize("d", [32, 96, 256])
def test_attention_backward_head_dims(backend, d, n, n_kv, group, causal, dtype, longest_first):
    """The head dims configured from the resource reports alone (attention_bwd.HEAD_DIMS; sm_90a off wgmma at
    64 kv rows a block; 256 in chunks of DC = 64 columns of dK, dV and dQ), on every backend against float64."""
    check_attention_backward(backend, 1, 2, group, n, n_kv, d, causal, dtype, longest_first, False)


def check_attention_backward(backend, batch, kv_heads, group, n, n_kv, d, causal, dtype, longest_first, staged):
    # n_kv >= 2: with one key, softmax is constant, dQ and dK vanish and no relative error means anything
    n_kv = n if causal else n_kv
    staged = staged and backend.target != "apple"   # three staged tiles at D 128 pass its 32 KB of threadgroup memory
    heads = kv_heads * group
    q = random_array((batch, heads, n, d), dtype)
    k = random_array((batch, kv_heads, n_kv, d), dtype)
    v = random_array((batch, kv_heads, n_kv, d), dtype)
    do = random_array((batch, heads, n, d), dtype)
    scale = 1 / math.sqrt(d)
    o, lse, _, _, _ = reference_attention_grads(q, k, v, do, causal, scale)
    # the forward's outputs as the forward kernel hands them over: O in q's dtype, LSE in float32
    o = dtypes.of(dtype).round(o).astype(q.dtype)
    _, _, ref_dq, ref_dk, ref_dv = reference_attention_grads(q, k, v, do, causal, scale, o)
    dq, dk, dv = attention_backward(q, k, v, o, lse.astype(np.float32), do, causal=causal, backend=backend,
                                    longest_first=longest_first, rows=dict(staged=staged))
    assert_close(dq, ref_dq, dtype, what="dQ")
    assert_close(dk, ref_dk, dtype, what="dK")
    assert_close(dv, ref_dv, dtype, what="dV")


@pytest.mark.parametrize("causal", [False, True])
def test_whole_and_edge_blocks(backend, causal):
    """150 rows: whole query and kv blocks (the backends' unchecked global accesses) and a ragged last one."""
    q, do = (random_array((1, 2, 150, 64), "bf16") for _ in range(2))
    k, v = (random_array((1, 1, 150, 64), "bf16") for _ in range(2))
    o, lse, _, _, _ = reference_attention_grads(q, k, v, do, causal, 0.125)
    o = dtypes.of("bf16").round(o).astype(q.dtype)
    _, _, ref_dq, ref_dk, ref_dv = reference_attention_grads(q, k, v, do, causal, 0.125, o)
    dq, dk, dv = attention_backward(q, k, v, o, lse.astype(np.float32), do, causal=causal, backend=backend)
    assert_close(dq, ref_dq, "bf16", what="dQ")
    assert_close(dk, ref_dk, "bf16", what="dK")
    assert_close(dv, ref_dv, "bf16", what="dV")


def test_attention_backward_bad_input():
    q = random_array((1, 3, 8, 64), "bf16")
    k = random_array((1, 2, 8, 64), "bf16")
    lse = np.zeros((1, 3, 8), np.float32)
    with pytest.raises(ValueError, match="multiple of H_kv"):
        attention_backward(q, k, k, q, lse, q)
    with pytest.raises(ValueError, match="lse of"):
        attention_backward(q, q, q, q, lse[:, :2], q)


def test_backward_from_the_forward_kernel(backend):
    """O and LSE as kernels/attention.py returns them (LSE in natural log) feed the backward unchanged."""
    q = random_array((1, 2, 50, 64), "bf16")
    k = random_array((1, 1, 50, 64), "bf16")
    v = random_array((1, 1, 50, 64), "bf16")
    do = random_array((1, 2, 50, 64), "bf16")
    o, lse = attention(q, k, v, causal=True, backend=backend)
    dq, dk, dv = attention_backward(q, k, v, o, lse, do, causal=True, backend=backend)
    _, _, ref_dq, ref_dk, ref_dv = reference_attention_grads(q, k, v, do, True, 1 / 8, o)
    assert_close(dq, ref_dq, "bf16", what="dQ")
    assert_close(dk, ref_dk, "bf16", what="dK")
    assert_close(dv, ref_dv, "bf16", what="dV")
