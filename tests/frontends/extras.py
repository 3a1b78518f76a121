"""The optional extras the front-end tests need: skipped locally when missing, a failure in CI
(``CI=true``), where the extras must be installed (``pip install -e '.[test,torch,onnx]'``)."""

import importlib
import os

import pytest


def require_extra(module, extra):
    """Import ``module``, or skip (locally) / fail (in CI) naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        msg = f"{module} is not installed (pip install -e '.[{extra}]')"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + "; CI must install the extra", pytrace=False)
        pytest.skip(msg, allow_module_level=True)
