"""Sphinx directives: ``stagecut-cli`` (the command-line reference, generated from the argparse
parser) and ``stagecut-members`` (a submodule's ``__all__`` through autodoc).

Each subcommand becomes a section holding its description and its ``--help`` text, so the page
can never drift from what ``stagecut SUB --help`` prints.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            out = []
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # aliases map to the same parser
                    seen.add(id(sub))
                    out.append((name, sub))
            return out
    return []


def _help_text(parser: argparse.ArgumentParser) -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "88"  # argparse wraps to $COLUMNS: fixed, so the page is reproducible
    try:
        return parser.format_help().rstrip()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


class StagecutCli(Directive):
    """``.. stagecut-cli::`` renders ``stagecut --help`` and one section per subcommand."""

    has_content = False

    def run(self) -> list[Any]:
        from stagecut.cli.main import build_parser

        parser = build_parser()
        out: list[Any] = [nodes.literal_block(text=_help_text(parser), language="text")]
        for name, sub in _subparsers(parser):
            title = f"stagecut {name}"
            section = nodes.section(ids=[nodes.make_id(title)], names=[nodes.fully_normalize_name(title)])
            section += nodes.title(text=title)
            section += nodes.literal_block(text=_help_text(sub), language="text")
            out.append(section)
        return out


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.replace("\n", ",").split(",") if x.strip()]


#: one line for the constants (their value's own docstring would be str's or tuple's)
DATA_DOCS = {
    "stagecut.ACCELERATOR": "The device kind of accelerators: the key of a node's ``compute`` time on one.",
    "stagecut.CPU": "The device kind of CPUs: the key of a node's ``compute`` time on one.",
    "stagecut.STATUSES": "Every status a result may have, from best to worst (see :class:`Result`).",
    "stagecut.DEFAULT_MAX_IDEALS": "The exact DP's default cap on the ideals it enumerates.",
    "stagecut.BOUND_LEVELS": "The lower-bound levels of :func:`mtpp_bound` and :func:`certify`, weakest first.",
}


class StagecutMembers(Directive):
    """``.. stagecut-members:: MODULE``: autodoc entries for every name in ``MODULE.__all__``.

    Options: ``names`` (only these, in this order) and ``exclude`` (names documented elsewhere),
    comma-separated. Constants get their value and a line from :data:`DATA_DOCS`. The module's own docstring
    is left out (the page introduces the module), so its sections do not clash across pages.
    """

    required_arguments = 1
    option_spec = {"exclude": _names, "names": _names}

    def run(self) -> list[Any]:
        import importlib
        import inspect

        from docutils.statemachine import StringList
        from sphinx.util.nodes import nested_parse_with_titles

        modname = self.arguments[0]
        mod = importlib.import_module(modname)
        exclude = set(self.options.get("exclude", []))
        names = self.options.get("names") or list(mod.__all__)
        lines = [f".. currentmodule:: {modname}", ""]
        for name in names:
            if name in exclude:
                continue
            obj = getattr(mod, name)
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                lines += [f".. autoexception:: {name}", ""]
            elif inspect.isclass(obj):
                lines += [f".. autoclass:: {name}", "   :members:", ""]
            elif callable(obj):
                lines += [f".. autofunction:: {name}", ""]
            else:
                value = repr(obj)
                value = value if len(value) <= 90 else value[:87] + "..."
                lines += [f".. py:data:: {name}", f"   :value: {value}", ""]
                doc = DATA_DOCS.get(f"{modname}.{name}")
                if doc:
                    lines += [f"   {doc}", ""]
        # the pages are MyST Markdown, whose nested parse reads Markdown: hand the reST to eval-rst
        lines = ["```{eval-rst}", *lines, "```"]
        node = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source=f"<{modname}.__all__>"), node)
        return list(node.children)


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("stagecut-cli", StagecutCli)
    app.add_directive("stagecut-members", StagecutMembers)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
