import os

from hypothesis import HealthCheck, settings

# Property tests: fresh examples every run (no database), no deadline (emulated backends are slow, compiles cached).
settings.register_profile("tiles", deadline=None, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "tiles"))
