import os

from hypothesis import HealthCheck, settings

# Property tests: fresh examples every run (no database), no deadline (emulated backends are slow, compiles cached).
settings.register_profile("tiles", deadline=None, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "tiles"))


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", help="also run the tests marked slow (long sweeps, fuzzing)")


def pytest_collection_modifyitems(config, items):
    """Tests marked slow run only with --slow (or when -m names them): CI's suite keeps to its budget."""
    import pytest
    if config.getoption("--slow") or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="marked slow: run with --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
