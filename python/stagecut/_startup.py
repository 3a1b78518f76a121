"""Ctrl-C while the ``stagecut`` command starts: one line and exit 130, not a traceback.

Importing the package takes a moment (numpy, the core, the solvers); a Ctrl-C then would end
the command with a long ``KeyboardInterrupt`` traceback from whatever module was importing. The
package imports this module first: in the ``stagecut`` command (and ``python -m stagecut``) only,
it installs a SIGINT handler that prints ``stagecut: interrupted`` and exits with status 130;
:func:`stagecut.cli.main` puts Python's own handler back once its error handler is in place.
A program that imports stagecut is not touched.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

__all__ = ["is_command", "interrupted", "release"]


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


def release() -> None:
    """Python's own SIGINT handler (``KeyboardInterrupt``) back in place of :func:`interrupted`."""
    try:
        if signal.getsignal(signal.SIGINT) is interrupted:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # pragma: no cover - not the main thread
        pass


def _install() -> None:
    try:
        if is_command() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, interrupted)
    except ValueError:  # pragma: no cover - imported first on another thread
        pass


_install()
