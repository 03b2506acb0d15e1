"""Testing kernels across backends: tolerances, poisoned outputs, hypothesis strategies, and a pytest plugin.

The plugin (registered as the `tiles` pytest11 entry point) gives a `backend` fixture parametrized over the
backends that can run here (`--backends reference,hip-emu:gfx942` chooses), so one test covers every vendor.
docs/testing.md shows a whole example; in short:

    from hypothesis import given, settings
    from tiles.testing import arrays, assert_close, poisoned, run, shapes

    @settings(max_examples=5, deadline=None)
    @given(x=arrays("bf16", shapes(rank=2)))
    def test_scale(backend, x):
        y = poisoned(x.shape, "f32")
        run(backend, scale, y, x, 2.0)
        assert_close(y, 2.0 * x.astype("float64"), "bf16")
"""
from __future__ import annotations

import numpy as np

from . import dtypes as _dt
from .backend import Backend, all_backends, available, get

# ‖out − ref‖ / ‖ref‖ allowed for results whose least precise step is this dtype (one rounding plus f32 sums)
TOLERANCE = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2, "fp8e4m3": 1.3e-1, "fp8e5m2": 2.6e-1, "i32": 0.0}


def tolerance(dtype) -> float:
    return TOLERANCE[_dt.of(dtype).name]


# The accuracy bound of each elementwise function against float64, as ‖out − ref‖ / ‖ref‖ of f32 results on f32
# inputs (sqrt, rsqrt, pow on positive inputs; sin and cos on |x| <= 10; pow with |p log2 x| <= 10): the f32
# math libraries (CUDA's, the hosts' libm under the emulators) and the HIP/Metal headers' own erf, tanh and pow
# fit the default; MSL compiles with fast math on the device, whose bound is looser (not measured: no Apple GPU).
# Comparisons, where and relu are exact. docs/design.md, Numerics, gives the derivation per backend.
MAP_TOLERANCE = {"sqrt": 1e-6, "rsqrt": 1e-6, "tanh": 1e-6, "sigmoid": 1e-6, "silu": 1e-6, "gelu": 1e-6, "erf": 1e-6,
                 "relu": 0.0, "sin": 1e-6, "cos": 1e-6, "pow": 1e-5}
FAST_MATH_TOLERANCE = {"metal": {"sqrt": 1e-6, "rsqrt": 1e-5, "tanh": 1e-5, "sigmoid": 1e-5, "silu": 1e-5, "gelu": 1e-5,
                                 "erf": 1e-5, "sin": 1e-5, "cos": 1e-5, "pow": 1e-4}}


def map_tolerance(op: str, backend=None) -> float:
    """The bound of elementwise function `op` on a backend (a name or Backend; None: the CPU engines')."""
    name = getattr(backend, "name", backend) or ""
    return FAST_MATH_TOLERANCE.get(name, {}).get(op, MAP_TOLERANCE.get(op, 0.0))


def random_array(shape, dtype, rng: np.random.Generator | None = None, scale: float = 1.0) -> np.ndarray:
    """Fresh standard-normal values (never zeros), rounded to dtype, in a host array of that dtype."""
    rng = rng or np.random.default_rng()
    dt = _dt.of(dtype)
    return dt.round(rng.standard_normal(shape) * scale).astype(dt.np)


def poisoned(shape, dtype) -> np.ndarray:
    """An output array full of NaN (max int for i32): whatever the kernel fails to write fails the check."""
    dt = _dt.of(dtype)
    if not dt.is_float:
        return np.full(shape, np.iinfo(np.int32).max, dtype=np.int32)
    return np.full(shape, np.nan, dtype=np.float32).astype(dt.np)


def errors(out, ref) -> tuple[float, float]:
    """(max |out − ref|, ‖out − ref‖ / ‖ref‖) over the finite reference values; NaN where out is not finite."""
    out = np.asarray(out).astype(np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    fin = np.isfinite(ref)
    diff = out[fin] - ref[fin]
    if not np.isfinite(diff).all():
        return float("nan"), float("nan")
    max_abs = float(np.abs(diff).max(initial=0.0))
    return max_abs, float(np.linalg.norm(diff) / max(np.linalg.norm(ref[fin]), 1e-30))


def assert_close(out, ref, dtype, *, tol: float | None = None, what: str = "output") -> float:
    """Relative error ‖out − ref‖ / ‖ref‖ within the dtype's tolerance, and no NaN anywhere; returns the error."""
    out = np.asarray(out).astype(np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert out.shape == ref.shape, f"{what}: shape {out.shape}, expected {ref.shape}"
    bad = ~np.isfinite(out) & np.isfinite(ref)
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {out.size} elements not finite (unwritten?), "
                           f"first at {tuple(int(i[0]) for i in np.nonzero(bad))}")
    fin = np.isfinite(ref)
    assert (out[~fin] == ref[~fin]).all(), f"{what}: infinities differ from the reference"
    tol = tolerance(dtype) if tol is None else tol
    err = errors(out, ref)[1]
    assert err <= tol, f"{what}: relative error {err:.3g} > {tol:.3g} ({_dt.of(dtype)})"
    return err


def run(backend: Backend | str, kfn, *args, **consts):
    """Launch on a backend (a Backend or its name) with host arrays: copies in, runs, copies every array argument
    back in place."""
    backend = get(backend) if isinstance(backend, str) else backend
    return backend.call(kfn, *args, **consts)


# ---------------------------------------------------------------- hypothesis strategies
# hypothesis is a dev dependency, so it is imported when a strategy is built, not with this module.

# Tile edges the shipped configurations use; sizes just around them are where masking bugs live.
_EDGES = (16, 32, 64, 128, 256)


def dims(min_value: int = 1, max_value: int = 300):
    """Extents of one axis, biased towards tile edges and one past or short of them."""
    from hypothesis import strategies as st
    near = sorted({e + d for e in _EDGES for d in (-1, 0, 1) if min_value <= e + d <= max_value})
    anywhere = st.integers(min_value, max_value)
    return st.one_of(st.sampled_from(near), anywhere) if near else anywhere


def shapes(rank: int = 2, min_side: int = 1, max_side: int = 300, max_elements: int = 1 << 17):
    """Array shapes of `rank` axes (leading axes kept small), at most max_elements elements."""
    from hypothesis import strategies as st
    lead = [dims(1, min(max_side, 4)) for _ in range(max(rank - 2, 0))]
    tail = [dims(min_side, max_side) for _ in range(min(rank, 2))]
    return st.tuples(*lead, *tail).filter(lambda s: int(np.prod(s)) <= max_elements)


def dtypes(*names: str):
    """One of the named dtypes (default: the 16-bit float inputs every target's matrix units take)."""
    from hypothesis import strategies as st
    return st.sampled_from([_dt.of(n) for n in names or ("bf16", "f16")])


def arrays(dtype, shape, *, scale: float = 1.0):
    """Host arrays of standard-normal values rounded to dtype; dtype and shape may be values or strategies.

    Hypothesis draws the seed, so every run has fresh values and a failure replays exactly.
    """
    from hypothesis import strategies as st
    strat = [x if isinstance(x, st.SearchStrategy) else st.just(x) for x in (dtype, shape)]
    return st.tuples(*strat, st.integers(0, 2**63 - 1)).map(
        lambda t: random_array(t[1], t[0], np.random.default_rng(t[2]), scale))


# ---------------------------------------------------------------- pytest plugin

def pytest_addoption(parser):
    parser.addoption("--backends", default=None,
                     help="comma-separated tiles backends for the `backend` fixture (default: all available)")


def selected_backends(config) -> list[Backend]:
    """The backends of --backends (each must be able to run here), else every backend that can."""
    import pytest
    names = config.getoption("--backends", default=None)
    if not names:
        return available()
    chosen = []
    for n in (n.strip() for n in names.split(",") if n.strip()):
        try:
            b = get(n)
        except KeyError as e:
            raise pytest.UsageError(f"--backends: {e.args[0]}") from None
        why = b.available()
        if why is not None:
            raise pytest.UsageError(f"--backends: {n} cannot run here: {why}")
        chosen.append(b)
    return chosen


def pytest_report_header(config):
    lines = []
    for b in all_backends():
        why = b.available()
        lines.append(f"  {b.name:<16} {b.kind:<9} " + ("available" if why is None else f"not here: {why}"))
    return ["tiles backends:"] + lines


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        config = metafunc.config
        if not hasattr(config, "_tiles_backends"):   # once per session: availability checks may import toolkits
            config._tiles_backends = selected_backends(config)
        bs = config._tiles_backends
        metafunc.parametrize("backend", bs, ids=[b.name for b in bs])
