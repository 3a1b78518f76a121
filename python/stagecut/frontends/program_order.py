"""Plans for traced models with a proof of what they are optimal over: :func:`partition_trace`.

The exact DP over every contiguous split enumerates the ideals of the operator graph, and a
transformer's have far too many (each mask slice or position index that hangs into a layer
doubles them). :func:`partition_trace` tries, in order, the families below and says which one
it solved (``stats["family"]``), what that family is, and what the restriction may cost:

``"contiguous"``
    Every contiguous split (the set :func:`stagecut.partition`'s exact DP optimises over),
    solved exactly after the contraction of :mod:`stagecut.throughput.contract` (each merge
    provably keeps an optimum): status ``"optimal"``, no restriction.
``"attached"``
    The contiguous splits that keep each *source leaf* (a unit with no predecessor all of whose
    edges go to one other unit: a mask slice, ``arange``, a constant) on the stage of the unit
    it feeds, solved
    exactly. ``lower_bound`` is the optimum over **every** contiguous split of the same graph
    with those leaves' compute time and memory set to zero, which no split of the real graph beats: when it equals
    the objective the plan is optimal over every contiguous split, and ``stats["restriction_cost"]``
    (``objective / lower_bound - 1``) bounds what the restriction may cost.
``"program"``
    The splits contiguous in program order (stages are runs of the order the model runs its
    operators, a colocation class never cut; zero-time nodes keep their place in the order,
    and a free isolated node set aside goes with the node before it), solved exactly with
    the real graph's communication (a boundary pays only for tensors that cross it), for any
    depth: ``n + 1`` ideals. ``lower_bound`` is :func:`~stagecut.throughput.dp.simple_lower_bound`.
``"layer"``
    Program order with cuts only where the outermost module changes (between the layers the
    top-level ``forward`` calls, and around the operators of the top-level ``forward``
    itself): the family module-level exports can always express.

``family="auto"`` solves ``program`` first (fast at any depth), then the first of
``contiguous`` and ``attached`` that fits in ``max_ideals`` (and in the time limit), and returns
the best plan with the best lower bound: never worse than any family it solved. A named family
is solved as asked (a :class:`~stagecut.errors.TooManyIdealsError` when it does not fit).
Every plan is re-scored by :func:`stagecut.evaluate` on the trace's graph.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from stagecut._deadline import DeadlineReached, check_time_limit, deadline
from stagecut.colocation import ColocationClasses, Units
from stagecut.errors import InvalidArgumentError, TooManyIdealsError
from stagecut.graph import Graph
from stagecut.results import Plan, Stat
from stagecut.throughput.contract import ContractedUnits, contract_units
from stagecut.throughput.dp import DEFAULT_MAX_IDEALS, _exact_raw, _run_dp, _split_of, simple_lower_bound
from stagecut.throughput.problem import ThroughputProblem, set_aside_free_nodes
from stagecut.throughput.rescore import no_plan, plan_from_split
from stagecut.validate import check_int

__all__ = ["FAMILIES", "partition_trace"]

#: The values of ``family``.
FAMILIES = ("auto", "contiguous", "attached", "program", "layer")

_DESCRIBE = {
    "contiguous": "every contiguous split",
    "attached": "the contiguous splits that keep each leaf unit (mask slices, position indices, constants) with "
                "the unit it feeds",
    "program": "the splits contiguous in program order",
    "layer": "the splits contiguous in program order that cut only between top-level layers",
}


def _solve(core: ThroughputProblem, units: Any, unit_edges: np.ndarray, max_ideals: int,
           exact_ideals: bool) -> dict[str, Any]:
    if exact_ideals:
        return dict(_exact_raw(core, units, max_ideals, True))
    return dict(_run_dp(core, units, unit_edges, units.n_units + 2, True))


def _plan(problem: ThroughputProblem, core: ThroughputProblem, aside: Sequence[Hashable], units: Any,
          raw: dict[str, Any], family: str, stats: dict[str, Stat], notes: list[str], lower: float | None,
          t0: float) -> Plan:
    stats = {**stats, "family": family, "ideals": raw["ideals"], "pairs": raw["pairs"], "units": units.n_units}
    if not math.isfinite(raw["objective"]):
        return no_plan(problem, status="infeasible", method=f"dp/{family}", stats=stats,
                       notes=[*notes, f"no split in the family ({_DESCRIBE[family]}) fits"],
                       runtime_s=time.perf_counter() - t0)
    assignment, order = _split_of(core.graph, units, raw["blocks"])
    assignment.update(dict.fromkeys(aside, order[0]))
    if lower is not None and lower >= raw["objective"] * (1 - 1e-12):
        lower = None  # the bound meets the objective: optimal over every contiguous split
    notes = [*notes, f"optimal over {_DESCRIBE[family]}"]
    if lower is not None:
        cost = raw["objective"] / lower - 1 if lower > 0 else math.inf
        stats["restriction_cost"] = cost
        notes.append(f"lower bound over every contiguous split {lower:.6g}: the restriction costs at most "
                     f"{100 * cost:.3g}%")
    else:
        stats["restriction_cost"] = 0.0
    return plan_from_split(problem, assignment, order, solver="DP", claimed=raw["objective"], exact=True,
                           status="optimal", lower_bound=lower, method=f"dp/{family}", stats=stats, notes=notes,
                           runtime_s=time.perf_counter() - t0)


def _zeroed(graph: Graph, positions: Sequence[int]) -> Graph:
    """``graph`` with the nodes at ``positions`` taking no compute time or memory (a relaxation:
    every split's loads can only fall; their outputs still cost what they cost to send, and a
    leaf that takes no time is then merged by the exact leaf rule)."""
    drop = set(positions)
    nodes = [dataclasses.replace(n, compute={k: 0.0 for k in n.compute}, memory=0.0) if i in drop else n
             for i, n in enumerate(graph.nodes)]
    return Graph(nodes, graph.edges, graph.defaults)


def _contracted(core: ThroughputProblem, family: str, max_ideals: int, problem: ThroughputProblem,
                aside: Sequence[Hashable], t0: float) -> Plan | str:
    restrict = family == "attached"
    units = contract_units(core.graph, Units(core.graph, core.memory), memory=core.memory, cpus=core.cpus,
                           restrict=restrict)
    try:
        raw = _solve(core, units, units.edge_array, max_ideals, True)
    except TooManyIdealsError:
        return f"{units.n_units} units (from {units.before}) have more than max_ideals={max_ideals} ideals"
    merged = " ".join(f"{k}={v}" for k, v in units.merged.items() if v)
    notes = [f"contracted {units.before} units to {units.n_units} ({merged or 'nothing merged'})"]
    lower = None
    if restrict and units.restricted:
        relaxed = dataclasses.replace(core, graph=_zeroed(core.graph, units.restricted))
        lunits = contract_units(relaxed.graph, Units(relaxed.graph, relaxed.memory), memory=relaxed.memory,
                                cpus=relaxed.cpus)
        try:
            lower = float(_solve(relaxed, lunits, lunits.edge_array, max_ideals, True)["objective"])
        except TooManyIdealsError:
            lower = simple_lower_bound(problem)
            notes.append("the relaxation for the lower bound has too many ideals: the simple bound is used")
    stats: dict[str, Stat] = {"contracted_from": units.before, "merged": merged, "set_aside": len(aside)}
    return _plan(problem, core, aside, units, raw, family, stats, notes, lower, t0)


def _positions(graph: Graph, order: Sequence[Hashable]) -> list[float]:
    """Program position of each node of ``graph`` (a backward node: its forward node's, after)."""
    pos = {v: i for i, v in enumerate(order)}
    out = []
    for n in graph.nodes:
        if n.id in pos:
            out.append(float(pos[n.id]))
        elif isinstance(n.id, str) and n.id.endswith("_bwd") and n.id[:-4] in pos:
            out.append(float(pos[n.id[:-4]]))
        else:
            raise InvalidArgumentError(f"node {n.id!r} of the graph is not in the trace's program order")
    return out


def _program_chain(graph: Graph, key: list[float], cut_ok: Sequence[bool]) -> ContractedUnits:
    """The runs of program order a split contiguous in it may cut between, as a chain of units.

    ``key`` is each node's program position (a backward node: its forward node's); ``cut_ok[p]``
    says whether the family allows a cut before position ``p``. A cut before ``p`` is also
    refused where a colocation class has members on both sides of it (all of a class's nodes
    must share a stage, and a stage is a run). Free leaves are not folded into the node they
    feed, as the unrestricted DP's units do: a zero-time node keeps its own place in the order,
    so every split of this chain is a split into runs of program order."""
    classes = ColocationClasses(graph)
    span: dict[Any, tuple[float, float]] = {}
    for i, p in enumerate(key):
        r = classes.find(classes.key[i])
        lo, hi = span.get(r, (p, p))
        span[r] = (min(lo, p), max(hi, p))
    positions = sorted(set(key))
    index = {p: j for j, p in enumerate(positions)}
    inside = np.zeros(len(positions) + 1, dtype=np.int64)  # +1 where a class starts, -1 past its end
    for lo, hi in span.values():
        if hi > lo:
            inside[index[lo] + 1] += 1
            inside[index[hi] + 1] -= 1
    blocked = np.cumsum(inside)[:len(positions)] > 0  # a class spans the cut before positions[j]
    seg_at: list[int] = []
    s = -1
    for j, p in enumerate(positions):
        if j == 0 or (cut_ok[int(p)] and not blocked[j]):
            s += 1
        seg_at.append(s)
    n = s + 1
    unit_of = np.array([seg_at[index[p]] for p in key], dtype=np.int64)
    members: list[list[int]] = [[] for _ in range(n)]
    for i, u in enumerate(unit_of.tolist()):
        members[u].append(i)
    edges = [(i, i + 1) for i in range(n - 1)]
    return ContractedUnits(n_units=n, members=members, unit_of_node=unit_of, edges=edges,
                           edge_array=np.array(edges, dtype=np.int64).reshape(-1, 2), merged={},
                           before=len(classes.key), restricted=[])


def _aside_in_order(plan: Plan, graph: Graph, aside: Sequence[Hashable], key: Sequence[float]) -> Plan:
    """``plan`` with each set-aside node (free and isolated: it changes no load wherever it goes)
    moved to the stage of the node before it in program order (the first node's stage when
    none is before it), so that the stages stay runs of program order."""
    if not aside or plan.objective is None:
        return plan
    where = plan.assignment()
    pos = {n.id: key[i] for i, n in enumerate(graph.nodes)}
    placed = sorted((pos[v], str(v), v) for v in where if v not in set(aside))
    if not placed:
        return plan
    stage_of: dict[Hashable, int] = {}
    for v in aside:
        before = [q for q in placed if q[0] <= pos[v]]
        stage_of[v] = where[(before[-1] if before else placed[0])[2]]
    if all(where[v] == stage_of[v] for v in aside):
        return plan
    at = {s.index: j for j, s in enumerate(plan.stages)}
    members: list[list[Hashable]] = [[v for v in s.nodes if v not in stage_of] for s in plan.stages]
    for v, i in stage_of.items():
        members[at[i]].append(v)
    stages = tuple(dataclasses.replace(s, nodes=tuple(m)) for s, m in zip(plan.stages, members))
    return dataclasses.replace(plan, stages=stages)


def _ordered(core: ThroughputProblem, trace: Any, family: str, problem: ThroughputProblem,
             aside: Sequence[Hashable], t0: float) -> Plan:
    graph = core.graph
    order = list(trace.order)
    key = _positions(graph, order)
    if family == "program":
        cut_ok = [True] * len(order)
    else:
        layer_at = [(trace.modules[v][0] if trace.modules.get(v) else None) for v in order]
        cut_ok = [p == 0 or layer_at[p] is None or layer_at[p] != layer_at[p - 1] for p in range(len(order))]
    chain = _program_chain(graph, key, cut_ok)
    raw = _solve(core, chain, chain.edge_array, chain.n_units + 2, False)
    stats: dict[str, Stat] = {"set_aside": len(aside), "segments": chain.n_units}
    lower = simple_lower_bound(problem)
    plan = _plan(problem, core, aside, chain, raw, family, stats, [], lower, t0)
    return _aside_in_order(plan, problem.graph, aside, _positions(problem.graph, order))


def partition_trace(trace: Any, devices: int, *, family: str = "auto", memory: float | None = None,
                    max_ideals: int = DEFAULT_MAX_IDEALS, time_limit: float | None = None) -> Plan:
    """The best plan of a traced model over a stated family of splits (see the module docs).

    Parameters
    ----------
    trace : stagecut.frontends.torch.TorchTrace
        A traced model (anything with ``graph``, ``order`` and, for ``family="layer"``,
        ``modules``).
    devices : int
        Accelerators (pipeline stages at most).
    family : {"auto", "contiguous", "attached", "program", "layer"}
        The family to optimise over; ``"auto"``: the largest that fits in ``max_ideals``.
    memory : float, optional
        Bytes per accelerator (default unlimited).
    max_ideals : int
        Cap on the ideals of the exact DP (``contiguous``, ``attached``).
    time_limit : float, optional
        Seconds for the whole call. ``"auto"`` solves the program-order family first and
        returns the best plan found when the limit runs out; with no plan in time, status
        ``"time_limit"`` and ``objective=None``.

    Returns
    -------
    Plan
        Status ``"optimal"`` over the family in ``stats["family"]`` (the notes say which set
        that is); ``lower_bound`` (when not the objective) bounds every contiguous split, and
        ``stats["restriction_cost"]`` is ``objective / lower_bound - 1``. ``method`` is
        ``"dp/<family>"``.

    Raises
    ------
    InvalidArgumentError
        An unknown family, a bad device count, memory or time limit, a graph node that is not
        in the trace's order.
    TooManyIdealsError
        A named family ``"contiguous"`` or ``"attached"`` with more than ``max_ideals`` ideals.

    Examples
    --------
    >>> import types, stagecut as sc
    >>> g = sc.Graph([sc.Node("mask", {"accelerator": 0.5}, comm=1.0), sc.Node("x", {"accelerator": 2.0}, comm=1.0),
    ...               sc.Node("y", {"accelerator": 2.0})], [("mask", "y"), ("x", "y")])
    >>> trace = types.SimpleNamespace(graph=g, order=("mask", "x", "y"))
    >>> plan = partition_trace(trace, 2)
    >>> plan.objective, plan.status, plan.stats["family"], [s.nodes for s in plan.stages]
    (3.5, 'optimal', 'contiguous', [('x',), ('mask', 'y')])
    """
    if family not in FAMILIES:
        raise InvalidArgumentError(f"family must be one of {FAMILIES}, got {family!r}")
    max_ideals = check_int(max_ideals, "max_ideals", minimum=1)
    limit = check_time_limit(time_limit)
    t0 = time.perf_counter()
    problem = ThroughputProblem.from_graph(trace.graph, devices=devices, cpus=0, memory=memory)
    with deadline(limit):
        try:
            core, aside = set_aside_free_nodes(problem)
            if family in ("program", "layer"):
                return _ordered(core, trace, family, problem, aside, t0)
            if family != "auto":
                out = _contracted(core, family, max_ideals, problem, aside, t0)
                if isinstance(out, str):
                    raise TooManyIdealsError(f"{out}; use family='program' (any depth) or family='auto'")
                return out
            return _auto(core, trace, max_ideals, problem, aside, t0)
        except DeadlineReached:
            return no_plan(problem, status="time_limit", method=f"dp/{family}", stats={},
                           lower_bound=simple_lower_bound(problem),
                           notes=[f"time limit ({limit:g} s) reached before a plan was found"])


def _auto(core: ThroughputProblem, trace: Any, max_ideals: int, problem: ThroughputProblem,
          aside: Sequence[Hashable], t0: float) -> Plan:
    """The program-order plan first (fast, any depth), then the larger families in the time
    left; the best plan found, with the best lower bound."""
    best = _ordered(core, trace, "program", problem, aside, t0)
    notes: list[str] = []
    for fam in ("contiguous", "attached"):
        try:
            out = _contracted(core, fam, max_ideals, problem, aside, t0)
        except DeadlineReached:
            notes.append(f"auto: the time limit ran out in family {fam!r}")
            break
        if isinstance(out, str):
            notes.append(f"auto: family {fam!r} not solved: {out}")
            continue
        if out.objective is None or best.objective is None or out.objective <= best.objective:
            best, out = out, best
        lbs = [x.lower_bound if x.lower_bound is not None else x.objective for x in (best, out)
               if x.stats.get("family") != "program" or x is best]
        lower = max((b for b in lbs if b is not None), default=None)
        best = _with_bound(best, lower)
        break
    return dataclasses.replace(best, notes=(*best.notes, *notes), runtime_s=time.perf_counter() - t0)


def _with_bound(plan: Plan, lower: float | None) -> Plan:
    """``plan`` with ``lower`` (a bound over every contiguous split) if it is better."""
    if plan.objective is None or lower is None or (plan.lower_bound is not None and plan.lower_bound >= lower):
        return plan
    lower = min(lower, plan.objective)
    cost = plan.objective / lower - 1 if lower > 0 else math.inf
    return dataclasses.replace(plan, lower_bound=None if cost <= 1e-12 and plan.stats.get("family") == "contiguous"
                               else lower, stats={**plan.stats, "restriction_cost": max(0.0, cost)})
