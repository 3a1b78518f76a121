"""Shared helpers of :mod:`stagecut.plot`: the lazy matplotlib import, stage colours, the
atomic figure writer."""

from __future__ import annotations

import colorsys
import importlib.util
import os
import sys
from typing import TYPE_CHECKING, Any

from stagecut.errors import BackendUnavailableError, InvalidArgumentError
from stagecut.formats import atomic_write

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["PIP_PLOT", "UNASSIGNED", "matplotlib_available", "stage_colors", "savefig"]


#: the command that installs what the plots need
PIP_PLOT = 'pip install "stagecut[plot]"'

#: matplotlib's ``tab10`` and ``tab20`` colours (the first ``k`` of them for ``k`` stages)
_TAB10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf")
_TAB20 = ("#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896", "#9467bd",
          "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f", "#c7c7c7", "#bcbd22", "#dbdb8d",
          "#17becf", "#9edae5")
#: colour of nodes that no stage holds
UNASSIGNED = "#d9d9d9"


# ------------------------------------------------------------------------------ matplotlib
def matplotlib_available() -> bool:
    """Whether matplotlib can be imported (without importing it).

    Returns
    -------
    bool
        ``True`` when the ``stagecut[plot]`` extra is installed.

    Examples
    --------
    >>> isinstance(matplotlib_available(), bool)
    True
    """
    if sys.modules.get("matplotlib") is not None:
        return True
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):  # a broken or blocked install
        return False


def _pyplot() -> Any:
    """``matplotlib.pyplot``, with the ``Agg`` backend when there is no display; a missing
    matplotlib is a :class:`BackendUnavailableError` with the pip command."""
    try:
        import matplotlib
    except ImportError:
        raise BackendUnavailableError(f"plotting needs matplotlib, which is not installed: {PIP_PLOT}") from None
    headless = sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if headless and "matplotlib.pyplot" not in sys.modules and "MPLBACKEND" not in os.environ:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _axes(ax: Axes | None, size: tuple[float, float]) -> Axes:
    plt = _pyplot()
    if ax is not None:
        return ax
    _, new = plt.subplots(figsize=size, layout="constrained")
    out: Axes = new
    return out


def stage_colors(k: int) -> list[str]:
    """``k`` distinct colours as ``"#rrggbb"``, stage ``i`` gets the ``i``-th (matplotlib's
    ``tab10`` up to 10 stages, ``tab20`` up to 20, then evenly spaced hues in three shades).

    Parameters
    ----------
    k : int
        Number of stages (>= 0).

    Returns
    -------
    list of str
        Distinct hex colours.

    Raises
    ------
    InvalidArgumentError
        ``k`` is not a non-negative integer.

    Examples
    --------
    >>> stage_colors(3)
    ['#1f77b4', '#ff7f0e', '#2ca02c']
    >>> len(set(stage_colors(500)))
    500
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise InvalidArgumentError(f"k: expected a non-negative integer, got {k!r}")
    if k <= len(_TAB10):
        return list(_TAB10[:k])
    if k <= len(_TAB20):
        return list(_TAB20[:k])
    out = []
    for i in range(k):
        value = (0.9, 0.7, 0.5)[i % 3]
        r, g, b = colorsys.hsv_to_rgb(i / k, 0.75, value)
        out.append(f"#{round(255 * r):02x}{round(255 * g):02x}{round(255 * b):02x}")
    return out


def _lighter(color: str, amount: float) -> str:
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    r, g, b = (round(c + (255 - c) * amount) for c in (r, g, b))
    return f"#{r:02x}{g:02x}{b:02x}"


def savefig(fig_or_ax: Any, path: str | os.PathLike[str], *, dpi: float = 120) -> None:
    """Write a figure (or the figure of an axes) to ``path`` atomically: into a temporary file
    beside it, flushed to disk, then renamed over it (a crash never leaves half a file; an
    existing file keeps its permissions). The format is the file's extension (png, svg, pdf...).

    Parameters
    ----------
    fig_or_ax : matplotlib Figure or Axes
        What to write.
    path : str or path-like
        The output file.
    dpi : float
        Resolution of raster formats.

    Raises
    ------
    InvalidArgumentError
        ``path`` has no extension matplotlib writes, or ``fig_or_ax`` is not a figure.
    OSError
        The directory is not writable, or the disk is full (the old file is untouched).

    Examples
    --------
    >>> import os, tempfile
    >>> import stagecut as sc
    >>> from stagecut.plot import plot_stages
    >>> ax = plot_stages(sc.partition(sc.Graph.chain([1.0, 2.0, 3.0]), devices=2))
    >>> path = os.path.join(tempfile.mkdtemp(), "plan.png")
    >>> savefig(ax, path)
    >>> open(path, "rb").read(4) == b"\\x89PNG"
    True
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    _pyplot()
    fig = getattr(fig_or_ax, "figure", None) if not hasattr(fig_or_ax, "savefig") else fig_or_ax
    if fig is None or not hasattr(fig, "savefig"):
        raise InvalidArgumentError(f"fig_or_ax: expected a matplotlib Figure or Axes, got {type(fig_or_ax).__name__}")
    target = os.fspath(path)
    ext = os.path.splitext(target)[1].lower().lstrip(".")
    supported = fig.canvas.get_supported_filetypes()
    if ext not in supported:
        raise InvalidArgumentError(f"path: {target}: the extension must be one of "
                                   f"{', '.join('.' + e for e in sorted(supported))}")
    atomic_write(target, lambda f: fig.savefig(f, format=ext, dpi=dpi))
