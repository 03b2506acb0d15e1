"""tiles.testing: the docs/testing.md example runs as written on every backend, the strategies draw what
they promise, the checks catch unwritten and wrong outputs, and --backends refuses what cannot run."""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiles import dtypes as tdt
from tiles.testing import (TOLERANCE, arrays, assert_close, dims, dtypes, errors, poisoned, selected_backends,
                           shapes)

DOC = Path(__file__).parent.parent / "docs" / "testing.md"
pytest_plugins = ["pytester"]


def test_doc_example_runs_as_written(pytester, request):
    code = "\n".join(re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S))
    assert "def test_" in code
    pytester.makepyfile(test_axpby=code)
    backends = [b.name for b in selected_backends(request.config)]
    r = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--backends", ",".join(backends))
    r.assert_outcomes(passed=len(backends))   # one passing test per backend, none skipped


def test_doc_example_fails_on_a_wrong_kernel(tmp_path):
    """The example's checks can fail: a kernel that drops b*Y is caught."""
    code = "\n".join(re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S))
    path = tmp_path / "test_wrong.py"
    no_shrink = ("from hypothesis import Phase, settings as _settings\n"   # the first failure is enough
                 "_settings.register_profile('first', phases=[Phase.generate])\n_settings.load_profile('first')\n")
    wrong = code.replace("    tl.add(x, x, y)\n", "")
    assert wrong != code
    path.write_text(no_shrink + wrong)
    # its own process: the profile it loads must not leak into this session's hypothesis settings
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(path), "--backends",
                        "reference"], capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert p.returncode == 1 and "relative error" in p.stdout, p.stdout[-3000:]


def test_unknown_or_absent_backend_is_a_usage_error(pytester):
    pytester.makepyfile(test_one="def test_one(backend):\n    pass\n")
    for arg, message in (("reference,no-such-backend", "unknown backend 'no-such-backend'"),
                         ("metal", "metal cannot run here")):   # metal never runs on Linux
        r = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--backends", arg)
        assert r.ret != 0 and message in "\n".join(r.outlines + r.errlines), arg


@settings(max_examples=40, deadline=None)
@given(n=dims(1, 300))
def test_dims_in_range(n):
    assert 1 <= n <= 300


def test_dims_reach_tile_edges():
    seen = set()

    @settings(max_examples=200, deadline=None, database=None)
    @given(n=dims(1, 300))
    def draw(n):
        seen.add(n)
    draw()
    assert seen & {63, 64, 65, 127, 128, 129}, sorted(seen)


@settings(max_examples=30, deadline=None)
@given(rank=st.integers(1, 4), data=st.data())
def test_shapes(rank, data):
    s = data.draw(shapes(rank=rank, max_side=200, max_elements=5000))
    assert len(s) == rank and int(np.prod(s)) <= 5000
    assert all(1 <= n <= 200 for n in s[-2:]) and all(1 <= n <= 4 for n in s[:-2])


@settings(max_examples=20, deadline=None)
@given(a=arrays(dtypes("bf16", "f16", "fp8e4m3"), shapes(rank=2, max_side=64)))
def test_arrays_hold_exact_values_of_their_dtype(a):
    dt = tdt.of(a)
    assert dt.name in ("bf16", "f16", "fp8e4m3")
    f = a.astype(np.float64)
    assert np.isfinite(f).all()
    assert np.array_equal(dt.round(f), f)       # rounding again changes nothing
    if a.size > 16:
        assert len(np.unique(f)) > 1            # random values, not a constant fill


def test_arrays_are_fresh_per_draw():
    drawn = []

    @settings(max_examples=5, deadline=None, database=None)
    @given(a=arrays("f32", (8, 8)))
    def draw(a):
        drawn.append(a)
    draw()
    assert len({a.tobytes() for a in drawn}) == len(drawn)


def test_poisoned_outputs_fail_the_check():
    ref = np.ones((4, 5))
    out = poisoned((4, 5), "bf16")
    out[:, :4] = 1
    with pytest.raises(AssertionError, match=r"4 of 20 elements not finite .* first at \(0, 4\)"):
        assert_close(out, ref, "bf16")
    assert np.isnan(errors(out, ref)).all()
    assert poisoned((2,), "i32")[0] == np.iinfo(np.int32).max


def test_assert_close_uses_the_dtype_tolerance():
    rng = np.random.default_rng(1)
    ref = rng.standard_normal((64, 64))
    noisy = ref * (1 + 0.5 * TOLERANCE["bf16"] * rng.standard_normal(ref.shape))
    assert assert_close(noisy, ref, "bf16") < TOLERANCE["bf16"]
    with pytest.raises(AssertionError, match=r"relative error .* > 0.002 \(f16\)"):
        assert_close(noisy, ref, "f16")
    max_abs, rel = errors(noisy, ref)
    assert max_abs == pytest.approx(np.abs(noisy - ref).max()) and rel > 0
