"""``-q/--quiet`` of the command line: nothing on stderr but errors (no progress bar, no notes,
no warnings). The running command's setting is read through :func:`quiet`; notes found while
parsing (deprecated spellings) wait for it (:func:`defer_note`, :func:`print_parse_notes`).

>>> with quieted(True):
...     quiet()
True
>>> quiet()
False
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["add_quiet", "defer_note", "print_parse_notes", "quiet", "quieted"]

_QUIET: ContextVar[bool] = ContextVar("stagecut_cli_quiet", default=False)


def quiet() -> bool:
    """Whether the running command was given ``--quiet`` (:func:`quieted`)."""
    return _QUIET.get()


@contextmanager
def quieted(on: bool) -> Iterator[None]:
    """Run a command with ``--quiet`` on or off (:func:`quiet` reads it)."""
    token = _QUIET.set(on)
    try:
        yield
    finally:
        _QUIET.reset(token)


def add_quiet(p: argparse.ArgumentParser) -> None:
    """``-q/--quiet`` (given before or after the subcommand: it is left out of the namespace
    unless given, so that the subcommand's parser does not reset the main parser's)."""
    p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                   help="print nothing on stderr but errors: no progress bar (shown by default for a run "
                        "past 2 s when stderr is a terminal), no notes, no warnings")


def defer_note(namespace: argparse.Namespace, text: str) -> None:
    """A note found while parsing, printed by :func:`print_parse_notes` once ``--quiet`` is known."""
    notes = getattr(namespace, "parse_notes", None)
    if notes is None:
        notes = []
        namespace.parse_notes = notes
    notes.append(text)


def print_parse_notes(args: argparse.Namespace) -> None:
    """The notes of the parse (deprecated spellings), unless ``--quiet``."""
    if quiet():
        return
    for text in getattr(args, "parse_notes", None) or ():
        print(f"stagecut: note: {text}", file=sys.stderr)
