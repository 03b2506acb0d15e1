"""The differential fuzzer (tiles/fuzz.py): a fixed-seed budget in CI, and its parts."""
import os

import numpy as np
import pytest

from tiles import backend, fuzz

CI_BUDGET = float(os.environ.get("TILES_FUZZ_BUDGET", "150"))


def test_generated_kernels_trace_and_run_on_the_reference():
    for seed in range(20):
        case = fuzz.Generator(seed).case()
        out = fuzz._run(backend.get("reference"), case, case.chains, case.arrays(np.random.default_rng(0),
                                                                                  len(case.chains)))
        assert np.isfinite(out["Y"][:, :1, :1]).all()   # every chain stores its first block


def test_compare_catches_unwritten_and_wrong_values():
    ref = np.array([[1.0, 2.0], [np.nan, 4.0]])
    assert fuzz._compare(ref, ref, 0.0) is None
    assert "NaN pattern" in fuzz._compare(np.array([[1.0, 2.0], [3.0, 4.0]]), ref, 1.0)
    assert "relative error" in fuzz._compare(np.array([[1.0, 2.5], [np.nan, 4.0]]), ref, 1e-3)


def test_fuzz_the_cpu_engines_fixed_seed(monkeypatch):
    """CI's run: a fixed seed for a budget of a few minutes over every CPU engine here; no finding. Built at -O0,
    as `tiles fuzz` builds them: about half the compile time, so more kernels in the budget."""
    monkeypatch.setenv("TILES_EMU_OPT", "-O0")
    engines = [n for n in fuzz.CPU_ENGINES if backend.get(n).available() is None]
    if not engines:
        pytest.skip("no host C++ compiler: no CPU engine")
    rep = fuzz.fuzz(CI_BUDGET, engines, seed=16, shrink_budget=60)
    print(rep.summary())
    assert rep.kernels > 0 and not rep.findings, rep.summary()
