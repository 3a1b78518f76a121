"""Fixtures shared by every test module (helpers live in helpers.py)."""

import os

import pytest

from helpers import SHARED


def require_shared(path=SHARED / "published-table1.json"):
    """Skip when ../shared/workloads (or ``path`` in it) is absent; in CI (``CI=true``) fail."""
    if not path.exists():
        msg = f"{path} is absent (the third-party workloads in ../shared/workloads)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + "; CI must have ../shared beside the project")
        pytest.skip(msg)
    return path


@pytest.fixture(scope="session")
def shared():
    """Path of ../shared/workloads; skips the test when it is absent (fails in CI)."""
    require_shared()
    return SHARED
