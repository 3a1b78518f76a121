import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "workloads"


@pytest.fixture(scope="session")
def shared():
    """Path of ../shared/workloads; skips the test when it is absent."""
    if not (SHARED / "published-table1.json").exists():
        pytest.skip("../shared/workloads is absent")
    return SHARED


def published_rows():
    path = SHARED / "published-table1.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    cols = data["columns"]
    return {name: dict(zip(cols, row)) for name, row in data["rows"].items()}
