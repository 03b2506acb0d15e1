"""Testing kernels across backends: tolerances, poisoned outputs, hypothesis strategies, and a pytest plugin.

The plugin (registered as the `tiles` pytest11 entry point) gives a `backend` fixture parametrized over the
backends that can run here (`--backends reference,hip-emu:gfx942` chooses), so one test covers every vendor:

    from tiles.testing import assert_close, poisoned, random_array

    def test_scale(backend):
        x = random_array((70, 130), "bf16")
        y = poisoned((70, 130), "f32")
        run(backend, scale, y, x, 2.0)
        assert_close(y, 2.0 * x.astype("float64"), "bf16")
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from .backend import Backend, available, get

# ‖out − ref‖ / ‖ref‖ allowed for results whose least precise step is this dtype (one rounding plus f32 sums)
TOLERANCE = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2, "fp8e4m3": 1.3e-1, "fp8e5m2": 2.6e-1, "i32": 0.0}


def tolerance(dtype) -> float:
    return TOLERANCE[dtypes.of(dtype).name]


def random_array(shape, dtype, rng: np.random.Generator | None = None, scale: float = 1.0) -> np.ndarray:
    """Fresh standard-normal values (never zeros), rounded to dtype, in a host array of that dtype."""
    rng = rng or np.random.default_rng()
    dt = dtypes.of(dtype)
    return dt.round(rng.standard_normal(shape) * scale).astype(dt.np)


def poisoned(shape, dtype) -> np.ndarray:
    """An output array full of NaN (max int for i32): whatever the kernel fails to write fails the check."""
    dt = dtypes.of(dtype)
    if not dt.is_float:
        return np.full(shape, np.iinfo(np.int32).max, dtype=np.int32)
    return np.full(shape, np.nan, dtype=np.float32).astype(dt.np)


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
    err = float(np.linalg.norm(out[fin] - ref[fin]) / max(np.linalg.norm(ref[fin]), 1e-30))
    assert err <= tol, f"{what}: relative error {err:.3g} > {tol:.3g} ({dtypes.of(dtype)})"
    return err


def run(backend: Backend, kfn, *args, **consts):
    """Launch on a backend with host arrays: copies in, runs, copies every array argument back in place."""
    return backend.call(kfn, *args, **consts)


# ---------------------------------------------------------------- pytest plugin

def pytest_addoption(parser):
    parser.addoption("--backends", default=None,
                     help="comma-separated tiles backends for the `backend` fixture (default: all available)")


def selected_backends(config) -> list[Backend]:
    names = config.getoption("--backends", default=None)
    if names:
        return [get(n.strip()) for n in names.split(",") if n.strip()]
    return available()


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        bs = selected_backends(metafunc.config)
        metafunc.parametrize("backend", bs, ids=[b.name for b in bs])
