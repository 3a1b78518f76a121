"""Fixtures shared by every test module (helpers live in helpers.py), and the hypothesis profiles.

Two hypothesis profiles, chosen once for the whole run:

* ``ci`` (when ``CI=true``): derandomized, so the examples are a fixed function of each test and a
  CI failure is the same failure on every machine; 100 examples unless a test sets its own; no
  deadline (the box is shared); no example database (nothing carried over between runs).
* ``dev`` (otherwise): fresh random examples on every run, no deadline, and the local example
  database (``.hypothesis/``), which replays a failing example first on the next run.

Both print a failing example's ``@reproduce_failure(...)`` blob: paste it on the test to replay it
exactly. ``HYPOTHESIS_PROFILE=ci`` runs CI's examples locally; ``--hypothesis-seed=N`` fixes the
seed of a ``dev`` run.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

# the scripts that regenerate test data (they write into their folders when run) are not test
# modules: --doctest-modules must not import them
collect_ignore_glob = ["data/*"]

from helpers import SHARED, require_shared

_SLOW_DATA = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile("ci", derandomize=True, max_examples=100, deadline=None, print_blob=True,
                          database=None, suppress_health_check=_SLOW_DATA)
settings.register_profile("dev", deadline=None, print_blob=True, suppress_health_check=_SLOW_DATA)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI", "").lower() == "true" else "dev")
settings.load_profile(PROFILE)


def pytest_report_header(config):
    how = ("derandomized: the same examples on every run" if settings.default.derandomize
           else "random examples: a failure prints its @reproduce_failure blob")
    return f"hypothesis profile {PROFILE!r} ({how})"


@pytest.fixture(scope="session")
def shared():
    """Path of ../shared/workloads; skips the test when it is absent (fails in CI)."""
    require_shared()
    return SHARED
