"""The sweep summary as a figure (``stagecut sweep --report TABLE --plot FILE.png``).

Two panels against the device count, one line per method: the geometric mean of bound / best
(1 is proven optimal everywhere) and the share of instances proven optimal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stagecut.errors import InvalidArgumentError
from stagecut.sweep.report import SummaryRow

__all__ = ["plot_summary"]


def plot_summary(summary: Sequence[SummaryRow]) -> Any:
    """Draw a sweep summary (:func:`stagecut.sweep.summarize`'s rows).

    Parameters
    ----------
    summary : sequence of SummaryRow

    Returns
    -------
    matplotlib.figure.Figure
        Two axes: ``bound / best`` (geometric mean; methods without a ratio are left out) and
        ``proven optimal`` (share of the instances), each against ``devices``, one line per
        method, labelled with it.

    Raises
    ------
    InvalidArgumentError
        An empty summary.
    BackendUnavailableError
        matplotlib is not installed.

    Examples
    --------
    >>> from stagecut.sweep.report import SummaryRow
    >>> rows = [SummaryRow(devices=k, method="dp", instances=2, solved=2, errors=0, n_ratio=2, bound_best=1.0,
    ...                    answer_baseline=1.0, optimal=1.0, runtime_p50=0.1, runtime_p90=0.2, runtime_max=0.3)
    ...         for k in (2, 4)]
    >>> fig = plot_summary(rows)
    >>> [[int(x) for x in line.get_xdata()] for line in fig.axes[1].get_lines()]
    [[2, 4]]
    >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    from stagecut._plot_base import _pyplot

    if not summary:
        raise InvalidArgumentError("summary: no rows to plot")
    plt = _pyplot()
    fig, (ratio_ax, optimal_ax) = plt.subplots(1, 2, figsize=(9.0, 3.6), layout="constrained")
    for method in dict.fromkeys(r.method for r in summary):
        rows = sorted((r for r in summary if r.method == method), key=lambda r: r.devices)
        ratio = [r for r in rows if r.bound_best is not None]
        if ratio:
            ratio_ax.plot([r.devices for r in ratio], [r.bound_best for r in ratio], marker="o", label=method)
        optimal_ax.plot([r.devices for r in rows], [r.optimal for r in rows], marker="o", label=method)
    ratio_ax.set(xlabel="devices", ylabel="bound / best (geometric mean)", ylim=(0, 1.05))
    optimal_ax.set(xlabel="devices", ylabel="share proven optimal", ylim=(-0.05, 1.05))
    for ax in (ratio_ax, optimal_ax):
        ax.legend(fontsize="small")
    return fig
