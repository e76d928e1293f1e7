"""Hypothesis profiles for the fuzz tests: ``ci`` (the default, in ``make test``: a fixed sample of
150 examples per test, the same at every run, well under a minute in all) and ``explore``
(``HYPOTHESIS_PROFILE=explore``: a thousand fresh examples per test, to look for new crashes;
run it with ``--timeout=0``)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile(
    "ci", max_examples=150, derandomize=True, database=None, deadline=None, suppress_health_check=_QUIET
)
settings.register_profile("explore", max_examples=1000, deadline=None, suppress_health_check=_QUIET)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
