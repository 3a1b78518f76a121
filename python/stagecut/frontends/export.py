"""Exports: a plan over a traced model -> what pipeline runtimes take.

* :func:`plan_to_pipelining`: the ``split_spec`` of ``torch.distributed.pipelining.pipeline(module,
  mb_args, split_spec={fqn: SplitPoint.BEGINNING, ...})``. That API splits the program only where
  a submodule's call begins (``SplitPoint.BEGINNING``) or ends (``SplitPoint.END``), and the stages
  are then runs of the program in its own order. So a plan maps to it when (1) its stages are
  contiguous in *program order* (the order the model runs its operators; a plan is only required
  to be contiguous in the graph's partial order, so an exact plan may interleave independent
  branches) and (2) every stage after the first starts where a submodule called exactly once
  begins, or right after one ends. Otherwise the plan is refused with a
  :class:`~stagecut.frontends.NotExpressibleError` naming the stage, the node and the reason, or,
  with ``mode="nearest"``, mapped to the nearest split that is expressible, with notes and the
  mapped split's cost (re-scored by :func:`stagecut.evaluate`).
* :func:`plan_to_balance` / :func:`balance_to_parts`: for a Sequential-like model (an
  ``nn.Sequential``, or DeepSpeed's list of layers), the number of layers of each stage, as
  torchgpipe's ``GPipe(module, balance=[...])`` takes, and the ``num_stages + 1`` boundaries
  ``[0, b1, ..., n_layers]`` in DeepSpeed's ``PipelineModule`` convention (``parts``: stage ``i``
  holds layers ``parts[i]`` to ``parts[i+1] - 1``; DeepSpeed computes this list from its
  ``partition_method``, and takes no list directly: a subclass that sets it is the way in).
* :func:`program_order_graph`: the traced graph with its program order added as edges, so that
  :func:`stagecut.partition` only returns plans that are contiguous in program order (cheaper to
  solve too: a chain has n + 1 ideals).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stagecut.frontends._common import NotExpressibleError, require
from stagecut.graph import Graph
from stagecut.results import Plan, Status

__all__ = ["PipelineSplit", "plan_to_pipelining", "plan_to_balance", "balance_to_parts", "program_order_graph",
           "partition_program_order"]


@dataclass(frozen=True)
class PipelineSplit:
    """Where to split a model for ``torch.distributed.pipelining``.

    Attributes
    ----------
    points : tuple of (str, str)
        One split per stage boundary, in pipeline order: the submodule's fully qualified name and
        ``"beginning"`` or ``"end"``.
    stages : tuple of tuple of str
        The node ids of each stage once split there, in program order (forward nodes; a
        backward node goes with its forward node).
    objective : float
        The time per sample of those stages (seconds, :func:`stagecut.evaluate`); the plan's own
        when nothing had to move.
    notes : tuple of str
        What was moved and why (``mode="nearest"``).
    """

    points: tuple[tuple[str, str], ...]
    stages: tuple[tuple[Hashable, ...], ...]
    objective: float
    notes: tuple[str, ...] = field(default=())

    def split_spec(self) -> dict[str, Any]:
        """``{fqn: SplitPoint.BEGINNING or SplitPoint.END}`` for
        ``torch.distributed.pipelining.pipeline(..., split_spec=...)``.

        Returns
        -------
        dict of str to torch.distributed.pipelining.SplitPoint

        Raises
        ------
        BackendUnavailableError
            torch is not installed.
        """
        pipelining = require("torch.distributed.pipelining", "torch")
        kind = {"beginning": pipelining.SplitPoint.BEGINNING, "end": pipelining.SplitPoint.END}
        return {fqn: kind[where] for fqn, where in self.points}


def _loaded(plan: Any) -> Any:
    """A saved plan (a path to its JSON file, the JSON or its mapping) loaded; anything else as is."""
    if isinstance(plan, (str, dict)) or hasattr(plan, "__fspath__"):
        from stagecut.frontends.runtime import as_plan

        return as_plan(plan)
    return plan


def _stage_sequence(plan: Plan, order: Sequence[Hashable], graph: Graph) -> list[int]:
    """The stage of each forward node in program order (backward nodes sit with their forward).
    ``plan`` may also be a saved plan: a path to its JSON file, the JSON or its mapping."""
    plan = _loaded(plan)
    if not isinstance(plan, Plan):
        raise NotExpressibleError(f"plan must be a stagecut.Plan (from stagecut.partition) or a saved plan (a path "
                                  f"to plan.to_json()'s output, or that JSON), got {type(plan).__name__}")
    where = {v: s for v, s in plan.assignment().items() if not (v in graph.index and graph.node(v).backward)}
    missing = [v for v in order if v not in where]
    if missing or len(where) != len(order):
        extra = sorted(str(v) for v in set(where) - set(order))
        raise NotExpressibleError(
            "the plan is not over this trace's graph: "
            + (f"node {missing[0]!r} of the trace is in no stage" if missing
               else f"node {extra[0]!r} is not in the trace"))
    return [where[v] for v in order]


def _program_order_stages(seq: list[int], order: Sequence[Hashable], mode: str, notes: list[str]) -> list[int]:
    """The position in program order where each stage after the first starts."""
    stages = sorted(set(seq))
    for i in range(1, len(seq)):
        if seq[i] < seq[i - 1]:
            if mode == "error":
                raise NotExpressibleError(
                    f"stage {seq[i]} holds node {order[i]!r}, which runs after node {order[i - 1]!r} of the later "
                    f"stage {seq[i - 1]} in program order: the plan is not contiguous in program order (the order the "
                    "model runs its operators), which pipeline splits need; pass mode='nearest', or partition "
                    "program_order_graph(trace) instead")
            counts = [seq.count(s) for s in stages]
            starts = [sum(counts[:j]) for j in range(1, len(counts))]
            notes.append("the plan is not contiguous in program order: stages re-cut in program order "
                         f"with the same node counts ({counts})")
            return starts
    return [i for i in range(1, len(seq)) if seq[i] != seq[i - 1]]


def _module_spans(trace: Any) -> dict[str, tuple[int, int]]:
    """First and last program position of each submodule called once whose nodes are contiguous."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    count: dict[str, int] = {}
    for pos, v in enumerate(trace.order):
        for m in trace.modules[v]:
            first.setdefault(m, pos)
            last[m] = pos
            count[m] = count.get(m, 0) + 1
    return {m: (first[m], last[m]) for m in first
            if m and trace.calls.get(m, 0) == 1 and last[m] - first[m] + 1 == count[m]}


def _candidates(spans: Mapping[str, tuple[int, int]], n: int) -> dict[int, list[tuple[str, str]]]:
    """``{program position: [(fqn, where), ...]}``: splits that make a stage start there,
    outermost module first, beginnings before ends."""
    at: dict[int, list[tuple[int, str, str]]] = {}
    for m, (a, b) in spans.items():
        if a > 0:
            at.setdefault(a, []).append((0, m, "beginning"))
        if b + 1 < n:
            at.setdefault(b + 1, []).append((1, m, "end"))
    return {p: [(m, w) for _, m, w in sorted(c, key=lambda x: (x[1].count("."), x[0], x[1]))] for p, c in at.items()}


def _where(trace: Any, v: Hashable) -> str:
    mods = trace.modules[v]
    op = trace.targets.get(v, "?")
    return f"{op}, in module {mods[-1]!r}" if mods else f"{op}, a function call of the top-level forward"


def plan_to_pipelining(plan: Plan, trace: Any, *, mode: str = "error") -> PipelineSplit:
    """The split points of ``plan`` for ``torch.distributed.pipelining.pipeline``.

    Parameters
    ----------
    plan : Plan, or a saved plan
        A plan over ``trace.graph`` (its stages in pipeline order), or one saved with
        ``plan.to_json()``: a path to the JSON file, the JSON text or its mapping.
    trace : stagecut.frontends.torch.TorchTrace
        The trace the graph came from (program order, module of each node, calls per module).
    mode : {"error", "nearest"}
        What to do when the plan cannot be written as module splits: raise, or move each stage
        boundary to the nearest one that can (in program order), saying so in ``notes``.

    Returns
    -------
    PipelineSplit
        ``split_spec()`` gives the ``{fqn: SplitPoint}`` dict.

    Raises
    ------
    NotExpressibleError
        (``mode="error"``) the plan is not contiguous in program order, or a stage starts at a
        node where no submodule called once begins, and no such split is reachable by moving only
        operators of the top-level forward (glue, which may go with the stage on either side: a
        note says so and ``objective`` is the moved split's) to the other stage (a node inside a
        module called several times, inside a layer...); in both modes, a plan that is not over
        this trace's graph, or one whose boundaries cannot all be placed at distinct modules.
    InvalidArgumentError
        An unknown ``mode``.

    Examples
    --------
    >>> import torch, stagecut as sc
    >>> from stagecut.frontends.torch import trace_torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    >>> t = trace_torch(model, torch.randn(3, 4), bandwidth="10GB/s", flops_per_s=1e6)
    >>> split = plan_to_pipelining(sc.partition(t.graph, devices=2), t)
    >>> split.points, split.stages
    ((('1', 'beginning'),), (('linear',), ('relu', 'linear_1')))
    """
    from stagecut.errors import InvalidArgumentError

    plan = _loaded(plan)
    if mode not in ("error", "nearest"):
        raise InvalidArgumentError(f"mode must be 'error' or 'nearest', got {mode!r}")
    order = list(trace.order)
    notes: list[str] = []
    seq = _stage_sequence(plan, order, trace.graph)
    starts = _program_order_stages(seq, order, mode, notes)
    cands = _candidates(_module_spans(trace), len(order))
    points: list[tuple[str, str]] = []
    chosen: list[int] = []
    used: set[str] = set()
    for j, b in enumerate(starts):
        lo = chosen[-1] + 1 if chosen else 1
        hi = len(order) - (len(starts) - j)  # leave room for the boundaries after this one
        ok = [m for m in cands.get(b, []) if m[0] not in used] if lo <= b <= hi else []
        pos = b
        if not ok:  # glue operators (of the top-level forward) may go with the module on either side
            glue = _across_glue(trace, order, b, lo, hi, cands, used)
            if glue is not None:
                pos = glue
                ok = [m for m in cands[pos] if m[0] not in used]
                moved = order[min(b, pos):max(b, pos)]
                notes.append(f"stage {j + 1} starts at node {order[pos]!r} ({ok[0][1]} of module {ok[0][0]!r}) "
                             f"instead of {order[b]!r}: {len(moved)} operator(s) of the top-level forward "
                             f"({', '.join(map(str, moved[:5]))}) go with the "
                             f"{'previous' if pos > b else 'next'} stage")
        if not ok:
            if mode == "error":
                raise NotExpressibleError(
                    f"stage {j + 1} starts at node {order[b]!r} ({_where(trace, order[b])}), where no submodule "
                    "called exactly once begins or ends: torch.distributed.pipelining splits only at module calls; "
                    "pass mode='nearest' to move the boundary to the nearest module")
            options = sorted((abs(p - b), p) for p in cands if lo <= p <= hi
                             and any(m[0] not in used for m in cands[p]))
            if not options:
                raise NotExpressibleError(
                    f"stage {j + 1}: no module boundary left between nodes {order[lo - 1]!r} and {order[hi]!r} "
                    f"to start it at; plan fewer stages ({len(starts) + 1} asked)")
            pos = options[0][1]
            ok = [m for m in cands[pos] if m[0] not in used]
            notes.append(f"stage {j + 1} starts at node {order[pos]!r} ({ok[0][1]} of module {ok[0][0]!r}) "
                         f"instead of {order[b]!r} ({_where(trace, order[b])})")
        points.append(ok[0])
        used.add(ok[0][0])
        chosen.append(pos)
    bounds = [0, *chosen, len(order)]
    stages = tuple(tuple(order[bounds[i]:bounds[i + 1]]) for i in range(len(bounds) - 1))
    objective = _rescore(plan, trace.graph, stages, notes)
    return PipelineSplit(points=tuple(points), stages=stages, objective=objective, notes=tuple(notes))


def _is_glue(trace: Any, v: Hashable) -> bool:
    """A node of the top-level ``forward`` itself (in no module): glue between layers."""
    return not trace.modules[v]


def _across_glue(trace: Any, order: Sequence[Hashable], b: int, lo: int, hi: int,
                 cands: Mapping[int, list[tuple[str, str]]], used: set[str]) -> int | None:
    """The nearest position ``p`` in ``[lo, hi]`` where a free module split exists and every node
    between ``b`` and ``p`` is glue (so moving the boundary there moves only glue operators), or
    None. Ties go to the later position (glue joins the stage before it)."""
    best: int | None = None
    for p in sorted(cands, key=lambda q: (abs(q - b), -q)):
        if not lo <= p <= hi or not any(m[0] not in used for m in cands[p]):
            continue
        if all(_is_glue(trace, v) for v in order[min(b, p):max(b, p)]):
            best = p
            break
    return best


def _rescore(plan: Plan, graph: Graph, stages: Sequence[Sequence[Hashable]], notes: list[str]) -> float:
    from stagecut.throughput import evaluate

    split = {v: ("accelerator", i) for i, s in enumerate(stages) for v in s}
    by_class = {graph.node(v).colocation: d for v, d in split.items()}
    for n in graph.nodes:  # a backward node goes with its forward node (same colocation class)
        if n.backward:
            split[n.id] = by_class.get(n.colocation, ("accelerator", len(stages) - 1))
    ev = evaluate(graph, split, devices=len(stages), cpus=0)
    if not ev.feasible:
        notes.append("the mapped split breaks a limit: " + "; ".join(ev.issues))
    if plan.objective is not None and ev.objective != plan.objective:
        notes.append(f"time per sample {ev.objective:.6g} s after mapping, {plan.objective:.6g} s planned")
    return float(ev.objective)


def plan_to_balance(plan: Plan, trace: Any, *, mode: str = "error") -> list[int]:
    """Layers per stage (torchgpipe's ``balance=``) for a model that is a sequence of layers.

    The layers are the model's children in order (``trace.children``: an ``nn.Sequential``'s
    ``"0"``, ``"1"``...); each operator belongs to the layer whose call it is part of. A layer
    that runs no operator (``nn.Identity``, dropout in eval mode) joins the stage of the layer
    before it (the first stage if it is first). An operator of the top-level ``forward`` outside
    every layer (glue such as ``flatten`` or an embedding add) belongs to no layer: it runs with
    the layer before or after it, so the plan may put it in either one's stage.

    Parameters
    ----------
    plan : Plan, or a saved plan
        A plan over ``trace.graph``, or one saved with ``plan.to_json()`` (a path, the JSON or
        its mapping).
    trace : stagecut.frontends.torch.TorchTrace
        The trace of a Sequential-like model.
    mode : {"error", "nearest"}
        A layer split between stages, or layers out of order: raise, or give each layer the
        stage that holds most of its compute (then keep the stages in layer order).

    Returns
    -------
    list of int
        One positive count per stage, summing to the number of layers.

    Raises
    ------
    NotExpressibleError
        A node in a module that is not a child of the model, a layer split between stages, an
        operator of the top-level forward (glue: flatten, an add between layers) in a stage
        other than its neighbouring layers', or layers whose stages go backwards
        (``mode="error"``); a stage left with no layer, or a plan not over this trace's graph.
    InvalidArgumentError
        An unknown ``mode``.

    Examples
    --------
    >>> import torch, stagecut as sc
    >>> from stagecut.frontends.torch import trace_torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    >>> t = trace_torch(model, torch.randn(3, 4), bandwidth="10GB/s", flops_per_s=1e6)
    >>> plan_to_balance(sc.partition(t.graph, devices=2), t)  # GPipe(model, balance=[1, 2], chunks=8)
    [1, 2]
    """
    from stagecut.errors import InvalidArgumentError

    plan = _loaded(plan)
    if mode not in ("error", "nearest"):
        raise InvalidArgumentError(f"mode must be 'error' or 'nearest', got {mode!r}")
    order = list(trace.order)
    seq = _stage_sequence(plan, order, trace.graph)
    layers = list(trace.children)
    stage_of: dict[str, dict[int, float]] = {name: {} for name in layers}
    glue: list[int] = []
    for i, (v, s) in enumerate(zip(order, seq)):
        mods = trace.modules[v]
        if not mods:  # glue of the top-level forward: goes with a neighbouring layer (checked below)
            glue.append(i)
            continue
        if mods[0] not in stage_of:
            raise NotExpressibleError(f"node {v!r} ({_where(trace, v)}) runs in {mods[0]!r}, which is not one of the "
                                      "model's direct children: balance lists split the model's children only")
        w = stage_of[mods[0]]
        w[s] = w.get(s, 0.0) + trace.graph.node(v).compute.get("accelerator", 0.0) + 1e-300
    layer_stage: list[int] = []
    for name in layers:
        w = stage_of[name]
        if len(w) > 1 and mode == "error":
            raise NotExpressibleError(f"layer {name!r} is split between stages {sorted(w)}: balance lists give whole "
                                      "layers to stages; pass mode='nearest' or plan with one node per layer")
        s = max(w, key=lambda k: (w[k], -k)) if w else (layer_stage[-1] if layer_stage else min(seq))
        if layer_stage and s < layer_stage[-1]:
            if mode == "error":
                raise NotExpressibleError(f"layer {name!r} is in stage {s}, after a layer of stage {layer_stage[-1]}: "
                                          "the stages are not contiguous in layer order")
            s = layer_stage[-1]
        layer_stage.append(s)
    _check_glue(trace, order, seq, glue, mode)
    stages = sorted(set(seq))
    balance = [layer_stage.count(s) for s in stages]
    if 0 in balance:
        raise NotExpressibleError(f"stage {balance.index(0)} is left with no layer (balance {balance}): "
                                  "torchgpipe and DeepSpeed need at least one layer per stage")
    return balance


def _check_glue(trace: Any, order: Sequence[Hashable], seq: Sequence[int], glue: Sequence[int], mode: str) -> None:
    """Each glue node (top-level forward) must be in the stage of the layer node just before or
    just after it in program order, the stages a balance list can give it (``mode="error"``)."""
    if mode != "error" or not glue:
        return
    is_glue = set(glue)
    for i in glue:
        before = next((seq[j] for j in range(i - 1, -1, -1) if j not in is_glue), None)
        after = next((seq[j] for j in range(i + 1, len(seq)) if j not in is_glue), None)
        if seq[i] not in (before, after):
            near = sorted({x for x in (before, after) if x is not None})
            raise NotExpressibleError(
                f"node {order[i]!r} ({_where(trace, order[i])}) is in stage {seq[i]}, but the layers around it are in "
                f"stage(s) {near}: an operator outside every layer can only go with a neighbouring layer; "
                "pass mode='nearest'")


def balance_to_parts(balance: Sequence[int]) -> list[int]:
    """DeepSpeed's stage boundaries from layer counts: ``[0, b0, b0 + b1, ..., n_layers]``.

    Parameters
    ----------
    balance : sequence of int
        Layers per stage (positive).

    Returns
    -------
    list of int
        ``len(balance) + 1`` boundaries; stage ``i`` holds layers ``parts[i]`` to
        ``parts[i + 1] - 1``.

    Raises
    ------
    InvalidArgumentError
        A count that is not a positive integer.

    Examples
    --------
    >>> balance_to_parts([2, 3, 1])
    [0, 2, 5, 6]
    """
    from stagecut.errors import InvalidArgumentError
    from stagecut.validate import check_int

    parts = [0]
    for i, b in enumerate(balance):
        parts.append(parts[-1] + check_int(b, f"balance[{i}]", minimum=1, error=InvalidArgumentError))
    return parts


def program_order_graph(trace: Any) -> Graph:
    """``trace.graph`` with an edge from each node to the next in program order.

    :func:`stagecut.partition` on it returns plans contiguous in program order, which
    :func:`plan_to_pipelining` can map when the boundaries fall at module calls. The extra edges
    only order the nodes, but the model charges a node's ``comm`` when any successor is on
    another stage, so a stage boundary may be charged the output of a node nobody after it
    uses: re-score the plan on ``trace.graph`` (:func:`stagecut.evaluate`) for its true cost.

    Parameters
    ----------
    trace : stagecut.frontends.torch.TorchTrace

    Returns
    -------
    Graph

    Raises
    ------
    InvalidGraphError
        The program order contradicts the graph's edges (a corrupted trace).
    """
    order = list(trace.order)
    g: Graph = trace.graph
    return Graph(g.nodes, list(g.edges) + list(zip(order, order[1:])), g.defaults)


def partition_program_order(trace: Any, devices: int, **options: Any) -> Plan:
    """The best plan contiguous in program order (so :func:`plan_to_pipelining`, ``module_fqns``
    and :func:`plan_to_balance` apply when its boundaries fall at module calls), scored on the
    real graph, with the cost of the restriction against the unrestricted optimum.

    The restricted plan is :func:`~stagecut.frontends.program_order.partition_trace` with
    ``family="program"``: exact over the splits contiguous in program order, each boundary
    charged only for the tensors that cross it (re-scored by :func:`stagecut.evaluate` on
    ``trace.graph``). With ``cpus`` (which that family does not take) it is
    :func:`stagecut.partition` on :func:`program_order_graph` instead, re-scored on
    ``trace.graph`` (the extra edges may charge a boundary for a tensor nobody after it
    reads, so that plan is not proven best over program order). The reference is
    :func:`stagecut.partition` on ``trace.graph``. ``stats`` carry ``unrestricted_objective``
    and ``restriction_cost`` (the fraction above it, 0 when the restriction costs nothing), and
    a note says so. Its status is ``"optimal"`` only when the restriction costs nothing and the
    reference is optimal; else ``"feasible"``.

    Parameters
    ----------
    trace : stagecut.frontends.torch.TorchTrace
        A traced model (anything with ``graph`` and ``order``).
    devices : int
        Accelerators.
    **options
        Passed to :func:`stagecut.partition` for the reference (``cpus``, ``memory``, ``method``,
        ``time_limit``, ...); ``memory`` and ``time_limit`` also bound the restricted plan.

    Returns
    -------
    Plan

    Raises
    ------
    InvalidGraphError
        The program order contradicts the graph's edges (a corrupted trace).
    InvalidArgumentError
        A bad option (as :func:`stagecut.partition` raises it); a graph node that is not in the
        trace's program order.

    Examples
    --------
    >>> import types, stagecut as sc
    >>> g = sc.Graph([sc.Node(v, {"accelerator": t}) for v, t in (("a", 2.0), ("b", 2.0), ("c", 1.0))],
    ...              [("a", "c"), ("b", "c")])
    >>> trace = types.SimpleNamespace(graph=g, order=["a", "b", "c"])
    >>> plan = partition_program_order(trace, 2)
    >>> plan.objective, plan.stats["restriction_cost"]
    (3.0, 0.0)
    """
    import dataclasses

    from stagecut.frontends.program_order import partition_trace
    from stagecut.throughput import evaluate, partition

    free = partition(trace.graph, devices=devices, **options)
    if options.get("cpus"):
        plan = partition(program_order_graph(trace), devices=devices, **options)
    else:
        program_order_graph(trace)  # the order must agree with the graph's edges
        plan = partition_trace(trace, devices, family="program", memory=options.get("memory"),
                               time_limit=options.get("time_limit"))
    if plan.objective is None or free.objective is None:
        return plan
    ev = evaluate(trace.graph, plan.device_of(), devices=devices, cpus=options.get("cpus"),
                  memory=options.get("memory"))
    by_device = {s.device: s for s in ev.stages}
    stages = tuple(by_device.get(s.device, s) for s in plan.stages)
    cost = max(0.0, ev.objective / free.objective - 1.0) if free.objective > 0 else 0.0
    status: Status = "optimal" if cost == 0.0 and free.status == "optimal" else "feasible"
    note = (f"restricted to program order: {ev.objective:.6g} against {free.objective:.6g} unrestricted "
            f"(+{100 * cost:.2f}%)")
    return dataclasses.replace(plan, objective=ev.objective, stages=stages, status=status,
                               lower_bound=min(free.lower_bound or 0.0, ev.objective) if free.lower_bound is not None
                               else None, notes=(*plan.notes, note),
                               stats={**plan.stats, "unrestricted_objective": free.objective, "restriction_cost": cost})
