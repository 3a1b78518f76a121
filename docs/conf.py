"""Sphinx configuration of the stagecut documentation (MyST Markdown pages, numpydoc API reference).

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (what ``.ci/docs`` runs).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import stagecut  # noqa: E402

project = "stagecut"
author = "the stagecut authors"
copyright = "2026, the stagecut authors"
release = stagecut.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "numpydoc",
    "sphinx.ext.viewcode",
    "cli_reference",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "README.md"]

# MyST: heading anchors so that [text](page.md#a-heading) links resolve; $...$ left alone
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# autodoc + numpydoc: the docstrings are numpydoc with Sphinx roles
autodoc_typehints = "none"  # the signatures carry them; numpydoc's Parameters section says the rest
autodoc_member_order = "bysource"
autodoc_default_options = {"members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()
default_role = "py:obj"

html_theme = "furo"
html_title = f"stagecut {release}"
html_static_path: list[str] = []
html_last_updated_fmt = None
