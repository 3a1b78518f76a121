"""Plots of plans and schedules (matplotlib, the optional ``stagecut[plot]`` extra).

* :func:`plot_stages`: per-stage bars of a plan's load split into its parts (compute and
  communication, stacked) against the lower bound; several plans (methods) side by side.
* :func:`plot_graph`: the graph in layers (topological generations from left to right), each
  node coloured by its stage; :func:`to_dot` gives the same as Graphviz DOT text (no
  matplotlib needed).
* :func:`plot_schedule`: the Gantt chart of a latency :class:`~stagecut.latency.Schedule` (one
  row per device, a bar per node, thin bars for the transfers into the device, the critical
  path outlined); :func:`plot_timeline`: the same for any list of timeline records (a pipeline
  schedule's device / start / end / label).
* :func:`savefig`: write a figure atomically (temporary file, then rename).

matplotlib is imported only when a plotting function runs; without a display the ``Agg``
backend is used. Every function takes an ``ax`` to draw into (else it makes a new figure) and
returns the axes it drew into. Stage ``i`` has colour ``stage_colors(k)[i]`` everywhere.

Examples
--------
>>> import stagecut as sc
>>> from stagecut.plot import plot_stages
>>> plan = sc.partition(sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0], comm=0.5), devices=3)
>>> ax = plot_stages(plan)
>>> [c.get_label() for c in ax.containers]
['compute', 'communication']
>>> [float(p.get_height()) for p in ax.containers[1]]  # each stage's communication
[0.5, 1.0, 0.5]
>>> import matplotlib.pyplot as plt; plt.close(ax.figure)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from stagecut._plot_base import (
    PIP_PLOT,
    UNASSIGNED,
    _axes,
    _lighter,
    matplotlib_available,
    savefig,
    stage_colors,
)
from stagecut._plot_gantt import plot_schedule, plot_timeline
from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["plot_stages", "plot_graph", "to_dot", "layout", "plot_schedule", "plot_timeline", "stage_colors",
           "savefig", "PIP_PLOT", "matplotlib_available"]

#: the order parts are stacked in (compute first, then communication, then the rest by name)
_PART_ORDER = ("compute", "work", "comm", "io", "sync", "allreduce", "overflow")
_PART_NAMES = {"compute": "compute", "work": "compute (work)", "comm": "communication",
               "io": "communication (io)", "sync": "tensor-parallel sync", "allreduce": "all-reduce",
               "overflow": "parameter overflow", "other": "rest of the load", "load": "load"}
_HATCHES = ("", "///", "xxx", "...", "\\\\\\", "ooo", "+++")


# ------------------------------------------------------------------------------ stage bars
def _named_plans(plan_or_plans: Any) -> list[tuple[str, Any]]:
    """``[(label, result)]`` from one result, a mapping label -> result, or an iterable of results."""
    if hasattr(plan_or_plans, "stages"):
        items: list[tuple[str | None, Any]] = [(None, plan_or_plans)]
    elif isinstance(plan_or_plans, Mapping):
        items = [(str(k), v) for k, v in plan_or_plans.items()]
    elif isinstance(plan_or_plans, Iterable) and not isinstance(plan_or_plans, (str, bytes)):
        items = [(None, v) for v in plan_or_plans]
    else:
        raise InvalidArgumentError("plan_or_plans: expected a plan (a result with stages), a list of plans or "
                                   f"a mapping name -> plan, got {type(plan_or_plans).__name__}")
    if not items:
        raise InvalidArgumentError("plan_or_plans: no plan given")
    out: list[tuple[str, Any]] = []
    for i, (label, r) in enumerate(items):
        if not hasattr(r, "stages"):
            raise InvalidArgumentError(f"plan_or_plans[{label if label is not None else i}]: expected a plan "
                                       f"(a result with stages), got {type(r).__name__}")
        out.append((label if label is not None else str(getattr(r, "method", f"plan {i}")), r))
    labels = [lb for lb, _ in out]
    if len(set(labels)) < len(labels):  # the same method twice: number them
        out = [(f"{lb} #{i}" if labels.count(lb) > 1 else lb, r) for i, (lb, r) in enumerate(out)]
    return out


def _stage_parts(stage: Any, where: str) -> list[tuple[str, float]]:
    """The stacked segments of one stage: its parts in :data:`_PART_ORDER`, then the rest of
    ``load`` not in a part (``"other"``); they sum to ``load``."""
    load = float(stage.load)
    if not math.isfinite(load) or load < 0:
        raise InvalidArgumentError(f"{where}.load: expected a finite number >= 0, got {stage.load!r}")
    parts = dict(getattr(stage, "parts", {}) or {})
    names = [p for p in _PART_ORDER if p in parts] + sorted(p for p in parts if p not in _PART_ORDER)
    segments = [(p, float(parts[p])) for p in names]
    for p, v in segments:
        if not math.isfinite(v) or v < 0:
            raise InvalidArgumentError(f"{where}.parts[{p!r}]: expected a finite number >= 0, got {v!r}")
    if not segments:  # no parts (a schedule's busy time, an evaluation...): the load itself
        return [("load", load)]
    rest = load - sum(v for _, v in segments)
    if rest > 1e-9 * max(1.0, load):
        segments.append(("other", rest))
    return segments


def _bound_of(plans: list[tuple[str, Any]], lower_bound: float | None) -> float | None:
    if lower_bound is not None:
        if isinstance(lower_bound, bool) or not isinstance(lower_bound, (int, float)) \
                or not math.isfinite(lower_bound) or lower_bound < 0:
            raise InvalidArgumentError(f"lower_bound: expected a finite number >= 0, got {lower_bound!r}")
        return float(lower_bound)
    bounds = [float(b) for _, r in plans if isinstance(b := getattr(r, "lower_bound", None), (int, float))
              and math.isfinite(b)]
    return max(bounds) if bounds else None


def plot_stages(plan_or_plans: Any, ax: Axes | None = None, lower_bound: float | None = None) -> Axes:
    """Per-stage bars of the load, stacked by its parts (compute, then communication, then any
    other part such as MTPP's parameter overflow), against the lower bound (a dashed line).

    With several plans (methods), each stage position holds one bar per plan, side by side,
    coloured per plan, the parts told apart by hatching; the legend names both.

    Parameters
    ----------
    plan_or_plans : Result, sequence of Result, or mapping of str to Result
        Any result with ``stages`` (:class:`~stagecut.Plan`, ``SlicePlan``, ``TrainingPlan``,
        an :class:`~stagecut.Evaluation`...); several as a list (labelled by their ``method``)
        or a mapping label -> result.
    ax : matplotlib Axes, optional
        Where to draw (default: a new figure).
    lower_bound : float, optional
        The line to draw (default: the largest ``lower_bound`` of the plans; none when none has one).

    Returns
    -------
    matplotlib Axes
        ``ax.containers`` holds one bar container per (plan, part), labelled ``"part"`` for one
        plan and ``"plan: part"`` for several; bar ``i`` of a plan is its stage ``i``.

    Raises
    ------
    InvalidArgumentError
        Not a plan, no plan, a negative or non-finite load, part or ``lower_bound`` (named).
    BackendUnavailableError
        matplotlib is not installed.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0])
    >>> plans = {m: sc.partition(g, devices=3, method=m) for m in ("dp", "local-search")}
    >>> ax = plot_stages(plans)
    >>> [c.get_label() for c in ax.containers]
    ['dp: compute', 'dp: communication', 'local-search: compute', 'local-search: communication']
    >>> [float(p.get_height()) for p in ax.containers[0]]
    [4.0, 4.0, 4.0]
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    plans = _named_plans(plan_or_plans)
    segments = [[_stage_parts(s, f"{label}.stages[{j}]") for j, s in enumerate(r.stages)] for label, r in plans]
    bound = _bound_of(plans, lower_bound)
    k = max((len(r.stages) for _, r in plans), default=0)
    ax = _axes(ax, (min(16.0, max(4.0, 2.5 + 0.6 * k * max(1, len(plans) // 2))), 3.5))
    from matplotlib.patches import Patch

    many = len(plans) > 1
    width = 0.8 / len(plans)
    plan_colors = stage_colors(len(plans))
    rank = {p: i for i, p in enumerate(_PART_ORDER)}
    seen = {p for segs in segments for stage in segs for p, _ in stage}
    # the known parts in their order, then the others by name, then the rest of the load
    part_names = sorted(seen, key=lambda p: (0, rank[p], "") if p in rank else (2, 0, "") if p == "other"
                        else (1, 0, p))
    part_colors = dict(zip(part_names, stage_colors(max(len(part_names), 3))))
    for pi, ((label, _), segs) in enumerate(zip(plans, segments)):
        xs = [j - 0.4 + width * (pi + 0.5) for j in range(len(segs))]
        bottoms = [0.0] * len(segs)
        for qi, part in enumerate(part_names):
            heights = [dict(stage).get(part, 0.0) for stage in segs]
            if not any(part in dict(stage) for stage in segs):
                continue
            name = _PART_NAMES.get(part, part)
            if many:
                color = _lighter(plan_colors[pi], 0.45 * min(qi, 1))
                ax.bar(xs, heights, width, bottom=bottoms, color=color, hatch=_HATCHES[qi % len(_HATCHES)],
                       edgecolor=plan_colors[pi], linewidth=0.6, label=f"{label}: {name}")
            else:
                ax.bar(xs, heights, width, bottom=bottoms, color=part_colors[part], edgecolor="white",
                       linewidth=0.5, label=name)
            bottoms = [b + h for b, h in zip(bottoms, heights)]
    handles: list[Any] = []
    if many:
        handles += [Patch(facecolor=c, edgecolor=c, label=label) for (label, _), c in zip(plans, plan_colors)]
        handles += [Patch(facecolor=_lighter("#606060", 0.45 * min(qi, 1)), edgecolor="#606060",
                          hatch=_HATCHES[qi % len(_HATCHES)], label=_PART_NAMES.get(p, p))
                    for qi, p in enumerate(part_names)]
    else:
        handles += [Patch(facecolor=part_colors[p], label=_PART_NAMES.get(p, p)) for p in part_names]
    if bound is not None:
        handles.append(ax.axhline(bound, color="black", linestyle="--", linewidth=1.2,
                                  label=f"lower bound {bound:.4g}"))
    ax.set_xticks(range(k), [str(j) for j in range(k)])
    ax.set_xlim(-0.6, max(k, 1) - 0.4)
    ax.set_xlabel("stage")
    ax.set_ylabel(f"stage load ({getattr(plans[0][1], 'objective_name', 'load')})")
    if many:
        ax.set_title("stage loads by method")
    else:
        label, r = plans[0]
        obj = getattr(r, "objective", None)
        ax.set_title(f"{label}: " + (f"objective {obj:.4g}" if isinstance(obj, (int, float)) else "no stages")
                     + f" ({getattr(r, 'status', 'evaluated')})")
    if handles:
        ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax


# ----------------------------------------------------------------------------------- graph
def _is_device(key: Any) -> bool:
    """A ``(kind, index)`` pair, as :meth:`Plan.device_of() <stagecut.Plan.device_of>` gives."""
    return isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str) and isinstance(key[1], int)


def _stage_map(graph: Any, plan: Any) -> tuple[dict[Hashable, int], list[str]]:
    """``({node id: stage position}, [stage labels])`` from a result or a mapping node -> stage."""
    if not isinstance(graph, Graph):
        raise InvalidArgumentError(f"graph: expected a stagecut.Graph, got {type(graph).__name__}")
    if hasattr(plan, "stages"):
        stages = list(plan.stages)
        of = {v: j for j, s in enumerate(stages) for v in s.nodes}
        labels = [f"stage {j} ({s.device})" if getattr(s, "device", None) else f"stage {j}"
                  for j, s in enumerate(stages)]
    elif isinstance(plan, Mapping):
        keys = list(dict.fromkeys(plan[n.id] for n in graph.nodes if n.id in plan))
        keys += [k for k in dict.fromkeys(plan.values()) if k not in keys]
        try:  # numbers, device names, (kind, index) pairs: in their order
            keys.sort()
        except TypeError:  # mixed kinds: in order of first appearance
            pass
        pos = {k: j for j, k in enumerate(keys)}
        of = {v: pos[s] for v, s in plan.items()}
        labels = [f"stage {k}" if isinstance(k, int) else f"{k[0]}:{k[1]}" if _is_device(k) else str(k)
                  for k in keys]
    else:
        raise InvalidArgumentError(f"plan: expected a result with stages or a mapping node -> stage, "
                                   f"got {type(plan).__name__}")
    for v in of:
        if v not in graph.index:
            raise InvalidArgumentError(f"plan: node {v!r} is not in the graph")
    return of, labels


def _layers(graph: Graph) -> list[int]:
    """The topological generation of each node (0 for sources, else 1 + the largest of its
    predecessors'), by position."""
    level = [0] * len(graph.nodes)
    for i in graph.topological_order():
        for j in graph.succ[i]:
            level[j] = max(level[j], level[i] + 1)
    return level


def layout(graph: Graph, stage_of: Mapping[Hashable, int] | None = None) -> list[tuple[float, float]]:
    """Positions ``(x, y)`` of the nodes (by position in ``graph.nodes``): ``x`` the topological
    generation, ``y`` spread around 0 within it, ordered by stage then by the mean height of the
    predecessors (fewer crossings).

    Parameters
    ----------
    graph : Graph
        The graph.
    stage_of : mapping of node id to int, optional
        Stage of each node (nodes of one stage are kept next to each other in a generation).

    Returns
    -------
    list of (float, float)
        One position per node.

    Examples
    --------
    >>> from stagecut.graph import Graph, Node
    >>> g = Graph([Node(v, {"accelerator": 1.0}) for v in "abcd"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    >>> layout(g)
    [(0.0, 0.0), (1.0, -0.5), (1.0, 0.5), (2.0, 0.0)]
    """
    level = _layers(graph)
    stage_of = stage_of or {}
    y = [0.0] * len(graph.nodes)
    by_level: dict[int, list[int]] = {}
    for i, lv in enumerate(level):
        by_level.setdefault(lv, []).append(i)
    for lv in sorted(by_level):
        members = by_level[lv]

        def key(i: int) -> tuple[int, float, int]:
            preds = graph.pred[i]
            mean = sum(y[p] for p in preds) / len(preds) if preds else 0.0
            return stage_of.get(graph.nodes[i].id, -1), mean, i

        members.sort(key=key)
        for j, i in enumerate(members):
            y[i] = j - (len(members) - 1) / 2
    return [(float(level[i]), y[i]) for i in range(len(graph.nodes))]


def plot_graph(graph: Graph, plan: Any, ax: Axes | None = None) -> Axes:
    """The graph drawn in layers (topological generations from left to right), each node
    coloured by its stage (:func:`stage_colors`; grey when no stage holds it), edges as lines.

    Parameters
    ----------
    graph : Graph
        The graph that was partitioned.
    plan : Result or mapping of node id to stage
        A result with ``stages`` (a plan, a schedule: one stage per device), or
        ``{node id: stage}`` (any hashable stage names, e.g. ``plan.device_of()``).
    ax : matplotlib Axes, optional
        Where to draw (default: a new figure).

    Returns
    -------
    matplotlib Axes
        ``ax.collections[0]`` holds the edges, ``ax.collections[1]`` the nodes (in
        ``graph.nodes`` order, their colours in ``get_facecolors()``).

    Raises
    ------
    InvalidArgumentError
        ``graph`` is not a Graph, ``plan`` not a plan or a mapping, or names a node not in the graph.
    BackendUnavailableError
        matplotlib is not installed.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0])
    >>> ax = plot_graph(g, sc.partition(g, devices=3))
    >>> ax.collections[1].get_offsets().tolist()
    [[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [4.0, 0.0]]
    >>> len({tuple(c) for c in ax.collections[1].get_facecolors()})
    3
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    of, labels = _stage_map(graph, plan)
    n = len(graph.nodes)
    pos = layout(graph, of)
    width = max((x for x, _ in pos), default=0.0) + 1
    height = max(Counter(x for x, _ in pos).values(), default=1)
    ax = _axes(ax, (min(16.0, 4.0 + 0.6 * width), min(12.0, 2.5 + 0.45 * height)))
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    colors = stage_colors(len(labels))
    segs = [(pos[i], pos[j]) for i in range(n) for j in graph.succ[i]]
    ax.add_collection(LineCollection(segs, colors="#999999", linewidths=0.7, zorder=1))
    node_colors = [colors[of[v.id]] if v.id in of else UNASSIGNED for v in graph.nodes]
    size = 220.0 if n <= 40 else max(12.0, 220.0 * 40 / n)
    ax.scatter([p[0] for p in pos], [p[1] for p in pos], s=size, c=node_colors, edgecolors="black",
               linewidths=0.4, zorder=2)
    if n <= 40:
        for v, (x, yv) in zip(graph.nodes, pos):
            ax.annotate(str(v.id), (x, yv), ha="center", va="center", fontsize=7, zorder=3)
    handles = [Line2D([], [], marker="o", linestyle="", markerfacecolor=c, markeredgecolor="black", label=lb)
               for c, lb in zip(colors, labels)]
    if any(v.id not in of for v in graph.nodes):
        handles.append(Line2D([], [], marker="o", linestyle="", markerfacecolor=UNASSIGNED, markeredgecolor="black",
                              label="no stage"))
    if handles and len(handles) <= 24:
        ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_xlabel("topological generation")
    ax.set_yticks([])
    ax.margins(0.08)
    ax.autoscale_view()
    ax.set_title(f"{n} nodes in {len(labels)} stages")
    return ax


def _dot_id(v: Any) -> str:
    text = str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def to_dot(graph: Graph, plan: Any, *, name: str = "stagecut") -> str:
    """The graph as Graphviz DOT text, each node filled with its stage's colour (the colours of
    :func:`plot_graph`) and a ``stage`` attribute; grey nodes belong to no stage. Render it with
    ``dot -Tpng``. No matplotlib needed.

    Parameters
    ----------
    graph : Graph
        The graph that was partitioned.
    plan : Result or mapping of node id to stage
        As for :func:`plot_graph`.
    name : str
        The digraph's name.

    Returns
    -------
    str
        ``digraph "name" { ... }``: one line per node (``"id" [label=..., fillcolor=..., stage=...]``),
        then one per edge (``"u" -> "v";``).

    Raises
    ------
    InvalidArgumentError
        As for :func:`plot_graph`.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([4.0, 1.0, 4.0])
    >>> print(to_dot(g, sc.partition(g, devices=2)))
    digraph "stagecut" {
      rankdir=LR;
      node [shape=box, style="rounded,filled", fontsize=10];
      "0" [label="0", fillcolor="#1f77b4", stage="0", tooltip="stage 0 (accelerator:0)"];
      "1" [label="1", fillcolor="#1f77b4", stage="0", tooltip="stage 0 (accelerator:0)"];
      "2" [label="2", fillcolor="#ff7f0e", stage="1", tooltip="stage 1 (accelerator:1)"];
      "0" -> "1";
      "1" -> "2";
    }
    """
    of, labels = _stage_map(graph, plan)
    colors = stage_colors(len(labels))
    lines = [f"digraph {_dot_id(name)} {{", "  rankdir=LR;", '  node [shape=box, style="rounded,filled", fontsize=10];']
    for v in graph.nodes:
        if v.id in of:
            s = of[v.id]
            attrs = f'fillcolor="{colors[s]}", stage="{s}", tooltip={_dot_id(labels[s])}'
        else:
            attrs = f'fillcolor="{UNASSIGNED}", tooltip="no stage"'
        lines.append(f"  {_dot_id(v.id)} [label={_dot_id(v.name or v.id)}, {attrs}];")
    lines += [f"  {_dot_id(u)} -> {_dot_id(w)};" for u, w in graph.edges]
    lines.append("}")
    return "\n".join(lines)
