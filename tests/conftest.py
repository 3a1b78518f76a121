"""Fixtures shared by every test module (helpers live in helpers.py)."""

import pytest

from helpers import SHARED, require_shared


@pytest.fixture(scope="session")
def shared():
    """Path of ../shared/workloads; skips the test when it is absent (fails in CI)."""
    require_shared()
    return SHARED
