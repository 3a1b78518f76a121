"""Gantt charts for :mod:`stagecut.plot`: a latency schedule (:func:`plot_schedule`) and any
timeline of records (:func:`plot_timeline`)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from stagecut._plot_base import _axes, stage_colors
from stagecut.errors import InvalidArgumentError

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["plot_schedule", "plot_timeline"]

#: most bars that get their label written inside
_MAX_LABELS = 60
_TRANSFER_COLOR = "#555555"


def _time(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidArgumentError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def _rows_axes(ax: Axes, rows: list[str], end: float, xlabel: str) -> None:
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(len(rows) - 0.4, -0.6)   # the first row on top
    ax.set_xlim(0.0, end * 1.02 if end > 0 else 1.0)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", linewidth=0.4, alpha=0.5)


def _labels(ax: Axes, bars: Iterable[Any], texts: list[str], end: float) -> None:
    """Write each label inside its bar when there are few bars and the bar is wide enough."""
    if len(texts) > _MAX_LABELS:
        return
    for bar, text in zip(bars, texts):
        if bar.get_width() < 0.012 * max(len(text), 1) * end:
            continue
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height() / 2, text, ha="center",
                va="center", fontsize=7, clip_on=True)


def plot_schedule(schedule: Any, ax: Axes | None = None) -> Axes:
    """The Gantt chart of a latency schedule: one row per device (in ``schedule.devices``
    order), a bar per node from its start to its finish (coloured by device, the critical path
    outlined in black), a thin grey bar per transfer in the row of the device it goes to, and
    the makespan as a dashed line.

    Parameters
    ----------
    schedule : Schedule
        A :class:`~stagecut.latency.Schedule` (from :func:`stagecut.latency.place` or
        :func:`~stagecut.latency.evaluate_schedule`); one without a timetable (infeasible)
        gives empty rows and says so in the title.
    ax : matplotlib Axes, optional
        Where to draw (default: a new figure).

    Returns
    -------
    matplotlib Axes
        ``ax.containers[0]`` (label ``"nodes"``) holds a bar per node in ``schedule.placement``
        order (``get_x()`` its start, ``get_width()`` its duration, the row ``y`` its device's
        position in the y tick labels); ``ax.containers[1]`` (``"transfers"``) one per transfer,
        in ``schedule.transfers`` order.

    Raises
    ------
    InvalidArgumentError
        Not a schedule, or a node without a start or finish (named).
    BackendUnavailableError
        matplotlib is not installed.

    Examples
    --------
    >>> import stagecut as sc
    >>> from stagecut.latency import Devices, evaluate_schedule
    >>> g = sc.Graph.chain([1.0, 2.0], comm=0.5)
    >>> s = evaluate_schedule(g, Devices.pcie_star(2, cpu=False), {0: "accelerator:0", 1: "accelerator:1"})
    >>> ax = plot_schedule(s)
    >>> [(float(b.get_x()), float(b.get_width())) for b in ax.containers[0]]
    [(0.0, 1.0), (2.0, 2.0)]
    >>> [(float(b.get_x()), float(b.get_width())) for b in ax.containers[1]]
    [(1.0, 1.0)]
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    fields = ("placement", "start", "finish", "transfers", "devices")
    if not all(hasattr(schedule, f) for f in fields):
        raise InvalidArgumentError(f"schedule: expected a stagecut.latency.Schedule, got {type(schedule).__name__}")
    placement: Mapping[Hashable, str] = schedule.placement
    used = set(placement.values()) | {t.target for t in schedule.transfers} | {t.source for t in schedule.transfers}
    rows = [d for d in schedule.devices if d in used]
    rows += sorted(str(d) for d in used if d not in rows)
    row_of = {d: i for i, d in enumerate(rows)}
    ax = _axes(ax, (8.0, 1.2 + 0.5 * max(len(rows), 1)))
    colors = stage_colors(len(rows))
    critical = set(schedule.critical_path)
    ys, lefts, widths, faces, edges, lws, texts = [], [], [], [], [], [], []
    for v, d in placement.items():
        if v not in schedule.start or v not in schedule.finish:
            raise InvalidArgumentError(f"schedule.start: node {v!r} has no start or finish")
        s0 = _time(schedule.start[v], f"schedule.start[{v!r}]")
        s1 = _time(schedule.finish[v], f"schedule.finish[{v!r}]")
        ys.append(row_of[d])
        lefts.append(s0)
        widths.append(s1 - s0)
        faces.append(colors[row_of[d]])
        on_path = v in critical
        edges.append("black" if on_path else "white")
        lws.append(1.6 if on_path else 0.5)
        texts.append(str(v))
    nodes = ax.barh(ys, widths, height=0.6, left=lefts, color=faces, edgecolor=edges, linewidth=lws,
                    label="nodes", zorder=2)
    ty = [row_of[t.target] + 0.39 for t in schedule.transfers]
    tl = [_time(t.start, f"schedule.transfers[{i}].start") for i, t in enumerate(schedule.transfers)]
    tw = [_time(t.finish, f"schedule.transfers[{i}].finish") - s for i, (t, s) in
          enumerate(zip(schedule.transfers, tl))]
    ax.barh(ty, tw, height=0.14, left=tl, color=_TRANSFER_COLOR, alpha=0.7, label="transfers", zorder=2)
    makespan = getattr(schedule, "objective", None)
    end = max([a + w for a, w in zip(lefts, widths)] + [a + w for a, w in zip(tl, tw)], default=0.0)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [Patch(facecolor="white", edgecolor="black", linewidth=1.6, label="critical path"),
                          Patch(facecolor=_TRANSFER_COLOR, alpha=0.7, label="transfer (into the row's device)")]
    if isinstance(makespan, (int, float)) and math.isfinite(makespan):
        ax.axvline(makespan, color="black", linestyle="--", linewidth=1.0, zorder=3)
        handles.append(Line2D([], [], color="black", linestyle="--", label=f"makespan {makespan:.4g}"))
        end = max(end, float(makespan))
        ax.set_title(f"{getattr(schedule, 'method', 'schedule')}: makespan {makespan:.4g} "
                     f"({getattr(schedule, 'status', '')})")
    else:
        ax.set_title(f"{getattr(schedule, 'method', 'schedule')}: no schedule ({getattr(schedule, 'status', '')})")
    _labels(ax, nodes, texts, end)
    _rows_axes(ax, rows, end, "time")
    ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax


def _get(record: Any, names: tuple[str, ...]) -> Any:
    for name in names:
        if isinstance(record, Mapping):
            if name in record:
                return record[name]
        elif hasattr(record, name):
            return getattr(record, name)
    return None


def _label(record: Any) -> str:
    text = _get(record, ("label", "name"))
    if text is not None:
        return str(text)
    phase, mb = _get(record, ("phase",)), _get(record, ("microbatch", "micro_batch", "mb"))
    if phase is not None or mb is not None:
        head = str(phase)[:1].upper() if phase is not None else ""
        return f"{head}{'' if mb is None else mb}"
    node = _get(record, ("node",))
    return "" if node is None else str(node)


def plot_timeline(records: Iterable[Any], ax: Axes | None = None) -> Axes:
    """A Gantt chart of timeline records: one row per device (in order of first appearance, or
    sorted when the devices are numbers), a bar per record from its start to its end, coloured
    by phase when the records have one (forward, backward...), else by device.

    Each record is an object or a mapping with ``device`` (or ``stage``), ``start``, ``end``
    (or ``finish``), and optionally ``label`` (or ``name``), or ``phase`` and ``microbatch``
    (the bar then reads ``F3``, ``B3``...): a pipeline schedule's records, the rows of
    :meth:`Schedule.gantt() <stagecut.latency.Schedule.gantt>`...

    Parameters
    ----------
    records : iterable, or a Timeline
        The records (at least one); a :class:`stagecut.throughput.schedules.Timeline` stands
        for its ``slots``, its ``devices`` giving the order of the rows.
    ax : matplotlib Axes, optional
        Where to draw (default: a new figure).

    Returns
    -------
    matplotlib Axes
        ``ax.containers[0]`` holds one bar per record, in the order given.

    Raises
    ------
    InvalidArgumentError
        No record, a record without a device, start or end, or an end before its start (named
        ``records[i].field``).
    BackendUnavailableError
        matplotlib is not installed.

    Examples
    --------
    >>> recs = [{"device": 0, "microbatch": 0, "phase": "forward", "start": 0.0, "end": 1.0},
    ...         {"device": 1, "microbatch": 0, "phase": "forward", "start": 1.0, "end": 2.0},
    ...         {"device": 1, "microbatch": 0, "phase": "backward", "start": 2.0, "end": 4.0}]
    >>> ax = plot_timeline(recs)
    >>> [(float(b.get_x()), float(b.get_width()), float(b.get_y() + b.get_height() / 2))
    ...  for b in ax.containers[0]]
    [(0.0, 1.0, 0.0), (1.0, 1.0, 1.0), (2.0, 2.0, 1.0)]
    >>> [t.get_text() for t in ax.texts]
    ['F0', 'F0', 'B0']
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    order: list[Any] = []
    title = "timeline"
    if hasattr(records, "slots"):  # a pipeline Timeline: its slots, its devices as the rows
        order = list(getattr(records, "devices", ()) or ())
        title = f"{getattr(records, 'schedule', 'timeline')}"
        records = records.slots
    if isinstance(records, (str, bytes)) or not isinstance(records, Iterable):
        raise InvalidArgumentError(f"records: expected an iterable of records, got {type(records).__name__}")
    items = list(records)
    if not items:
        raise InvalidArgumentError("records: no record to draw")
    devices, starts, ends, phases = [], [], [], []
    for i, r in enumerate(items):
        d = _get(r, ("device", "stage"))
        if d is None:
            raise InvalidArgumentError(f"records[{i}].device: missing (each record needs device, start and end)")
        s0 = _get(r, ("start",))
        s1 = _get(r, ("end", "finish"))
        if s0 is None or s1 is None:
            raise InvalidArgumentError(f"records[{i}].{'start' if s0 is None else 'end'}: missing "
                                       "(each record needs device, start and end)")
        s0, s1 = _time(s0, f"records[{i}].start"), _time(s1, f"records[{i}].end")
        if s1 < s0:
            raise InvalidArgumentError(f"records[{i}].end: {s1} is before its start {s0}")
        devices.append(d)
        starts.append(s0)
        ends.append(s1)
        phases.append(_get(r, ("phase",)))
    keys = list(dict.fromkeys(devices))
    if all(isinstance(k, (int, float)) and not isinstance(k, bool) for k in keys):
        keys.sort()
    keys = [k for k in order if k in keys] + [k for k in keys if k not in order]
    row_of = {k: j for j, k in enumerate(keys)}
    rows = [f"device {k}" if isinstance(k, int) else str(k) for k in keys]
    ax = _axes(ax, (8.0, 1.2 + 0.5 * len(rows)))
    from matplotlib.patches import Patch

    by_phase = any(p is not None for p in phases)
    groups = list(dict.fromkeys(str(p) for p in phases)) if by_phase else rows
    colors = dict(zip(groups, stage_colors(len(groups))))
    faces = [colors[str(p)] for p in phases] if by_phase else [colors[rows[row_of[d]]] for d in devices]
    bars = ax.barh([row_of[d] for d in devices], [b - a for a, b in zip(starts, ends)], height=0.6, left=starts,
                   color=faces, edgecolor="white", linewidth=0.5, label="records", zorder=2)
    _labels(ax, bars, [_label(r) for r in items], max(ends))
    if by_phase:
        ax.legend(handles=[Patch(facecolor=c, label=g) for g, c in colors.items()], fontsize="small",
                  loc="upper left", bbox_to_anchor=(1.01, 1.0))
    _rows_axes(ax, rows, max(ends), "time")
    ax.set_title(f"{title}: {len(items)} records on {len(rows)} devices")
    return ax
