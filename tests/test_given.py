"""What a launch checks on the host becomes what the device code takes as given (tiles/ir.py, given; GL.aligned):
which facts qualify, which arrays count as aligned, the CUDA and HIP sources' lines, the CPU engines testing them,
and kernels on views that do and do not keep the alignment against float64 on every backend."""
import numpy as np
import pytest
from hypothesis import given as hgiven, settings, strategies as st

import tiles as tl
from tiles import ir, toolchains
from tiles.dsl import ArgSpec
from tiles.testing import assert_close, poisoned, random_array, run
from tiles.tune import Shaped
from tiles.types import GL


@tl.kernel
def scaled(Y, X, s, *, BR, BC):
    """Y = X * s, rows of at most BC columns, in tiles of BR rows."""
    br = tl.grid(tl.cdiv(X.rows, BR))
    tl.check_eq(tl.minimum(X.cols, BC), X.cols)      # a fact: min and dims
    tl.check_eq(Y.rows, X.rows)                       # a fact
    tl.check_eq(Y.cols * 1, X.cols)                   # arithmetic: not a fact (it could overflow on the device)
    tl.check_gt(s, 0.0)                               # a float: not a fact (the host compares in double)
    x = tl.regs(tl.f32, BR, BC)
    tl.load(x, X, (br, 0))
    tl.mul(x, x, s)
    tl.store(Y, x, (br, 0))


def test_arrays_aligned_or_not():
    x = np.zeros((4, 64), np.float32)
    assert ArgSpec.of(x).aligned
    assert not ArgSpec.of(x[:, 1:]).aligned                       # starts 4 bytes past a boundary
    assert ArgSpec.of(x[1:]).aligned                              # a whole row (256 bytes) on
    assert not ArgSpec.of(np.zeros((4, 63), np.float32)).aligned  # rows of 252 bytes
    assert not ArgSpec.of(np.zeros((1, 63), np.float32)).aligned  # one row, but its stride counts (HIP uses it)
    assert ArgSpec.of(Shaped((8, 64), "bf16")).aligned and not ArgSpec.of(Shaped((8, 60), "bf16")).aligned
    assert ArgSpec.of(x).key() != ArgSpec.of(x[:, 1:]).key()      # traced apart


def test_facts_are_the_checks_that_cannot_overflow():
    k = scaled.trace([np.zeros((8, 64), np.float32)] * 2 + [1.0], BR=16, BC=64)
    facts = {(ir.fmt(c.a), c.op, ir.fmt(c.b)) for c in ir.given(k)}
    assert facts == {("min(X.cols, 64)", "==", "X.cols"), ("Y.rows", "==", "X.rows"),
                     ("Y.batch", "==", "1"), ("Y.depth", "==", "1"), ("X.batch", "==", "1"), ("X.depth", "==", "1")}


@pytest.mark.parametrize("target, aligned, rows", [
    ("sm_90a", "TC_ASSUME(Y.aligned<16>());", "TC_ASSUME(Y.rows() == X.rows());"),
    ("gfx942", "TH_ASSUME(Y.aligned(16));", "TH_ASSUME(Y.rows == X.rows);")])
def test_source_assumes_what_was_checked(target, aligned, rows):
    src = toolchains.emit(scaled, [Shaped((8, 64), "f32")] * 2 + [1.0], target, "source", BR=16, BC=64)
    facts = src.split("checked before the launch")[1].split("const int")[0]
    assert aligned in facts and rows in facts and "* 1" not in facts and "s >" not in facts
    odd = toolchains.emit(scaled, [Shaped((8, 62), "f32")] * 2 + [1.0], target, "source", BR=16, BC=64)
    assert aligned not in odd and rows in odd


def test_no_facts_on_request(monkeypatch):
    """TILES_GIVEN=0: the kernel as it was before, to time it without them."""
    monkeypatch.setenv("TILES_GIVEN", "0")
    for target in ("sm_90a", "gfx942"):
        src = toolchains.emit(scaled, [Shaped((8, 64), "f32")] * 2 + [1.0], target, "source", BR=16, BC=64)
        assert "_ASSUME" not in src and "checked before the launch" not in src


@pytest.mark.parametrize("engine", ["cuda-emu:sm_80", "hip-emu:gfx942"])
def test_cpu_engine_tests_each_fact(engine):
    """Device code traced for aligned arrays, run on arrays that are not (what a launch never does: it traces
    again): the CPU engine refuses instead of computing with a fact that does not hold."""
    from tiles import backend
    b = backend.get(engine)
    if b.available():
        pytest.skip(b.available())
    x, y = random_array((8, 64), "f32"), poisoned((8, 64), "f32")
    k = scaled.trace([x, y, 1.0], b.target, BR=16, BC=64)
    assert all(p.aligned for p in k.params if isinstance(p, GL))
    narrow = [random_array((8, 62), "f32"), poisoned((8, 62), "f32")]   # rows of 248 bytes
    with pytest.raises(Exception, match="checked before the launch"):
        b.run(k, [*narrow, 1.0])


@settings(max_examples=6, deadline=None)
@hgiven(rows=st.integers(1, 40), cols=st.integers(1, 64), offset=st.integers(0, 8),
        dtype=st.sampled_from(["f32", "bf16"]))
def test_views_on_and_off_alignment(backend, rows, cols, offset, dtype):
    """Whatever the view's start and row stride, the result is X * s."""
    base = random_array((rows * 72 + offset,), dtype)
    x = base[offset:offset + rows * 72].reshape(rows, 72)[:, :cols]
    y = poisoned((rows, cols), dtype)
    run(backend, scaled, y, x, 1.5, BR=16, BC=64)
    assert_close(y, x.astype(np.float64) * 1.5, dtype)
