"""Ctrl-C while the ``stagecut`` command starts: one line and exit 130, not a traceback.

Importing the package takes a moment (numpy, the core, the solvers); a Ctrl-C then would end
the command with a long ``KeyboardInterrupt`` traceback from whatever module was importing. The
package imports this module first: in the ``stagecut`` command (and ``python -m stagecut``) only,
it installs a SIGINT handler that prints ``stagecut: interrupted`` and exits with status 130;
:func:`stagecut.cli.main` puts a ``KeyboardInterrupt`` handler back once its error handler is in
place. That handler also remembers the signal (:func:`seen`): a ``KeyboardInterrupt`` raised while
a compiled module initialises can reach the command as another exception (an extension module's
import replaces it with ``ImportError``, and numpy wraps that in its own), which the command then
reports as an interruption, not as an internal error. A program that imports stagecut is not
touched.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

__all__ = ["is_command", "interrupted", "release", "seen"]

_seen = False


def is_command() -> bool:
    """Whether this process is the ``stagecut`` command (its script, or ``python -m stagecut``)."""
    if sys.argv and os.path.basename(sys.argv[0]) in ("stagecut", "stagecut.exe"):
        return True
    argv = list(getattr(sys, "orig_argv", None) or ())
    for i, arg in enumerate(argv[:-1]):
        if arg == "-m":
            return argv[i + 1] in ("stagecut", "stagecut.cli", "stagecut.cli.main")
    return False


def interrupted(signum: int, frame: Any) -> None:
    """The start-up handler: one line on stderr, exit 130 (no clean-up: nothing has started)."""
    try:
        os.write(2, b"stagecut: interrupted\n")
    finally:
        os._exit(130)


def _raise(signum: int, frame: Any) -> None:
    """The command's handler after start-up: Python's ``KeyboardInterrupt``, remembered."""
    global _seen
    _seen = True
    raise KeyboardInterrupt


def seen() -> bool:
    """Whether the command has had a SIGINT since :func:`release` (always False in a program that
    imports stagecut: its handler is its own)."""
    return _seen


def release() -> None:
    """A ``KeyboardInterrupt`` handler that remembers the signal in place of :func:`interrupted`
    (in the command only: another handler is left alone)."""
    try:
        if signal.getsignal(signal.SIGINT) is interrupted:
            signal.signal(signal.SIGINT, _raise)
    except ValueError:  # pragma: no cover - not the main thread
        pass


def _install() -> None:
    try:
        if is_command() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, interrupted)
    except ValueError:  # pragma: no cover - imported first on another thread
        pass


_install()
