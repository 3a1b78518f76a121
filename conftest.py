"""The doctests of the front ends (``--doctest-modules`` over python/stagecut) that need an extra.

Their examples import torch or onnx (``pip install 'stagecut[torch]'`` / ``'stagecut[onnx]'``).
Where the extra is installed they run like every other doctest. Where it is not, they are skipped,
except in CI (``CI=true``), where a missing extra makes them fail: CI installs every extra, so a
skip there would hide examples nobody runs.

Before such a doctest runs, torch's RNG is seeded (``torch.manual_seed(0)``), and an onnx doctest
runs in an empty temporary directory (its examples write ``model.onnx`` and ``stages/``).
"""

import importlib
import importlib.util
import os
from collections.abc import Iterator

import pytest
from _pytest.doctest import DoctestItem

# doctest item name (module, or module.function) -> the modules its examples import
_TORCH = ("torch",)
_ONNX = ("onnx", "numpy")
DOCTEST_REQUIRES: dict[str, tuple[str, ...]] = {
    "stagecut.torch": _TORCH,
    "stagecut.torch.trace": _TORCH,
    "stagecut.frontends.torch.trace_torch": _TORCH,
    "stagecut.frontends.split.stage_of_nodes": _TORCH,
    "stagecut.frontends.split.split_policy": _TORCH,
    "stagecut.frontends.split.split_callback": _TORCH,
    "stagecut.frontends.split.module_fqns": _TORCH,
    "stagecut.frontends.export.plan_to_pipelining": _TORCH,
    "stagecut.frontends.export.plan_to_balance": _TORCH,
    "stagecut.onnx": _ONNX,
    "stagecut.onnx.load": _ONNX,
    "stagecut.frontends.onnx.trace_onnx": _ONNX,
}


def _requires(item: pytest.Item) -> tuple[str, ...]:
    return DOCTEST_REQUIRES.get(item.name, ()) if isinstance(item, DoctestItem) else ()


def _missing_message(item: pytest.Item) -> str | None:
    """Why ``item`` cannot run here (the modules it needs that are not installed), or None."""
    missing = [m for m in _requires(item) if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    extra = "torch" if "torch" in missing else "onnx"
    return (f"doctest {item.name} needs {', '.join(missing)} (not installed; "
            f"pip install 'stagecut[{extra}]')")


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a front-end doctest whose extra is missing, outside CI."""
    msg = _missing_message(item)
    if msg is not None and not _in_ci():
        pytest.skip(msg)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """In CI, a front-end doctest whose extra is missing fails (reported FAILED, with the reason)."""
    msg = _missing_message(item)
    if msg is not None:
        pytest.fail(msg + "; CI must install the extras", pytrace=False)


@pytest.fixture(autouse=True)
def _frontend_doctest_setup(request: pytest.FixtureRequest) -> Iterator[None]:
    """Seed torch, and move an onnx doctest into a temporary directory (when its extra is here)."""
    needs = _requires(request.node)
    if not needs or _missing_message(request.node) is not None:
        yield
        return
    if "torch" in needs:
        importlib.import_module("torch").manual_seed(0)
    if "onnx" in needs:
        request.getfixturevalue("monkeypatch").chdir(request.getfixturevalue("tmp_path"))
    yield
