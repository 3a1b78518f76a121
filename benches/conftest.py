import pathlib

import pytest

SHARED = pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "workloads"


@pytest.fixture(scope="session")
def shared():
    if not (SHARED / "published-table1.json").exists():
        pytest.skip("../shared/workloads is absent")
    return SHARED
