"""``--plot FILE.png`` of the solving subcommands (``partition``, ``slice``, ``latency``).

The flag is checked while the command line is parsed (matplotlib installed, an extension it
writes) and, like ``-o``, before any work (the path is writable and not an input:
:func:`stagecut.cli._common.check_outputs`); after solving, :func:`write` draws the result (the
stage loads of a plan, the Gantt chart of a schedule) and writes the file atomically.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, TypeVar

__all__ = ["add_plot", "write", "FORMATS"]

#: the extensions ``--plot`` writes
FORMATS = ("png", "svg", "pdf")

T = TypeVar("T")


def _plot_path(text: str) -> str:
    """The ``--plot`` value: a path with a known extension, and matplotlib installed."""
    from stagecut.plot import PIP_PLOT, matplotlib_available

    ext = os.path.splitext(text)[1].lower().lstrip(".")
    if ext not in FORMATS:
        raise argparse.ArgumentTypeError(f"{text[:80]}: the file name must end in "
                                         f"{', '.join('.' + f for f in FORMATS)}")
    if not matplotlib_available():
        raise argparse.ArgumentTypeError(f"plots need matplotlib, which is not installed: {PIP_PLOT}")
    return text


def add_plot(p: argparse.ArgumentParser, what: str) -> None:
    """Add ``--plot FILE.png`` (drawing ``what``).

    Examples
    --------
    >>> p = argparse.ArgumentParser()
    >>> add_plot(p, "the stage loads")
    >>> p.parse_args([]).plot is None
    True
    """
    p.add_argument("--plot", metavar="FILE.png", type=_plot_path, default=None,
                   help=f"also draw {what} into FILE.png (or .svg, .pdf); needs matplotlib: "
                        'pip install "stagecut[plot]" (default: not drawn)')


def write(args: argparse.Namespace, result: T) -> T:
    """Draw ``result`` into ``args.plot`` when given (a schedule as a Gantt chart, anything
    else as its stage loads against the bound) and return ``result``.

    Raises
    ------
    BackendUnavailableError
        matplotlib went missing after the command line was read.
    OSError
        The file cannot be written (the old file, if any, is untouched).
    """
    path = getattr(args, "plot", None)
    if not path:
        return result
    from stagecut import plot

    r: Any = result
    ax = plot.plot_schedule(r) if hasattr(r, "placement") and hasattr(r, "transfers") else plot.plot_stages(r)
    try:
        plot.savefig(ax, path)
    finally:
        import matplotlib.pyplot as plt

        fig: Any = ax.figure
        plt.close(fig)
    return result
