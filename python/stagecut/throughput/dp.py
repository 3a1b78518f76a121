"""The exact DP over ideals and its linearized variant DPL (Tarnawski et al., NeurIPS 2020).

The model is the one of Table 1: split a DAG into contiguous blocks on at most ``devices``
accelerators and ``cpus`` CPUs, minimizing the largest device load (the time per sample of the
pipeline, in the input's time unit), with a memory limit per accelerator. See
:mod:`stagecut.throughput.evaluate` for the cost of one device.

The set both optimise over: *contiguous* splits, those whose quotient graph is acyclic (the
blocks, in pipeline order, form a chain of ideals; :func:`stagecut.is_contiguous`). A split of
convex blocks whose quotient has a cycle is not in it (the non-contiguous IP searches every
split). The exact DP's ``status="optimal"`` means optimal over that set; DPL searches the
chains of one topological order only (status ``"feasible"``, with a lower bound valid for
every split, :func:`simple_lower_bound`).

Training graphs (Section 5.3): nodes of one colocation class are contracted into one unit (see
:mod:`stagecut.colocation`). The exact DP then runs over the ideals (downsets) of the forward
unit DAG, in the Rust core; DPL runs the same DP after adding the edges of one topological path
(the reference implementation's DFS order, :mod:`stagecut.throughput._reference_order`), so it
has n + 1 ideals.

Isolated nodes that cost nothing are set aside first (exact, see
:func:`~stagecut.throughput.problem.set_aside_free_nodes`) and put back into the first stage.

Examples
--------
>>> import stagecut as sc
>>> from stagecut.throughput.problem import ThroughputProblem
>>> problem = ThroughputProblem.from_graph(sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0]), devices=3)
>>> plan = solve_dp(problem)
>>> plan.objective, plan.status, plan.stats["ideals"]
(4.0, 'optimal', 6)
>>> solve_dpl(problem).objective
4.0
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import networkx as nx
import numpy as np
import numpy.typing as npt

from stagecut import _core
from stagecut._deadline import remaining
from stagecut.colocation import Units
from stagecut.errors import TooManyIdealsError
from stagecut.graph import ACCELERATOR, CPU, Graph, NodeId, kahn_order
from stagecut.results import Plan, Stat
from stagecut.throughput._reference_order import reference_dpl_units
from stagecut.throughput.problem import ThroughputProblem, set_aside_free_nodes
from stagecut.throughput.rescore import no_plan, plan_from_split

if TYPE_CHECKING:
    from stagecut._core import _MaxLoadResult

__all__ = ["DEFAULT_MAX_IDEALS", "solve_dp", "try_dp", "solve_dpl", "simple_lower_bound"]

#: Default cap on the number of ideals the exact DP may enumerate.
DEFAULT_MAX_IDEALS = 200_000


class _UnitsLike(Protocol):
    @property
    def n_units(self) -> int: ...

    @property
    def members(self) -> list[list[int]]: ...

    @property
    def edges(self) -> list[tuple[int, int]]: ...


class _ReferenceUnits:
    """Units and linearized edges of DPL, following the reference implementation's order."""

    def __init__(self, graph: Graph) -> None:
        members, edges, path = reference_dpl_units(graph)
        self.members: list[list[int]] = members
        self.n_units: int = len(members)
        self.edges: list[tuple[int, int]] = sorted(set(edges) | set(path))


def simple_lower_bound(problem: ThroughputProblem) -> float:
    """A lower bound on the optimum over every split, computed on the original graph.

    Each colocation class must sit whole on one device; on a device it costs at least its
    compute time on the cheapest kind it may use there (every node runs on that kind and, on an
    accelerator, the class fits in memory). So the largest such class cost, and the sum of
    them shared over every device, are lower bounds on the largest load of any split (contiguous
    or not). Nothing is folded or merged first: merging could only raise the bound above the
    optimum.

    Parameters
    ----------
    problem : ThroughputProblem

    Returns
    -------
    float
        A lower bound, in the input's time unit: ``inf`` exactly when some colocation class fits
        on no device (then no split exists).

    Examples
    --------
    >>> import stagecut as sc
    >>> from stagecut.graph import Node
    >>> g = sc.Graph([Node("a", {"accelerator": 6.0, "cpu": 8.0}, memory=1.0),
    ...               Node("z", {"cpu": 0.0}, memory=4.0, kinds=frozenset({"cpu"}))], [("a", "z")])
    >>> simple_lower_bound(ThroughputProblem.from_graph(g, devices=1, cpus=1, memory=4.0))
    6.0
    """
    graph = problem.graph
    classes: dict[object, list[int]] = {}
    for i, nd in enumerate(graph.nodes):
        classes.setdefault(("c", nd.colocation) if nd.colocation is not None else ("n", i), []).append(i)
    costs = []
    for members in classes.values():
        nodes = [graph.nodes[i] for i in members]
        options = []
        if problem.devices and all(n.supports(ACCELERATOR) for n in nodes) and \
                _sum(n.memory for n in nodes) <= problem.memory:
            options.append(_sum(n.time(ACCELERATOR) for n in nodes))
        if problem.cpus and all(n.supports(CPU) for n in nodes):
            options.append(_sum(n.time(CPU) for n in nodes))
        costs.append(min(options, default=math.inf))
    heaviest = max(costs)
    if math.isinf(heaviest):
        return heaviest
    share = _sum(c / (problem.devices + problem.cpus) for c in costs)
    return max(heaviest, share) if math.isfinite(share) else heaviest  # (an overflow proves nothing)


def _sum(values: Iterable[float]) -> float:
    """``math.fsum``, ``inf`` when the sum overflows (instead of an ``OverflowError``)."""
    try:
        return math.fsum(values)
    except OverflowError:
        return math.inf


def _path(units: _UnitsLike) -> npt.NDArray[np.int64]:
    """Edges along one topological order of the unit DAG (Kahn's, the smallest ready unit first),
    as an ``(n_units - 1, 2)`` array."""
    ue = _edge_array(units)
    if bool((ue[:, 0] < ue[:, 1]).all()):  # units numbered in a topological order: it is that one
        order = np.arange(units.n_units, dtype=np.int64)
    else:
        succ: list[list[int]] = [[] for _ in range(units.n_units)]
        for a, b in units.edges:
            succ[a].append(b)
        order = np.asarray(kahn_order(range(units.n_units), succ), dtype=np.int64)
    return np.stack([order[:-1], order[1:]], axis=1)


def _edge_array(units: _UnitsLike) -> npt.NDArray[np.int64]:
    """The unit edges as an ``(k, 2)`` int64 array."""
    got = getattr(units, "edge_array", None)
    if got is not None:
        return np.asarray(got, dtype=np.int64).reshape(-1, 2)
    return np.asarray(units.edges, dtype=np.int64).reshape(-1, 2)


def _run_dp(problem: ThroughputProblem, units: _UnitsLike, unit_edges: npt.NDArray[np.int64],
            max_ideals: int, prune: bool, upper: float | None = None) -> _MaxLoadResult:
    """One call of the Rust DP: ``{"objective", "blocks": [(is_accelerator, units)], "ideals", "pairs"}``."""
    arr = problem.graph.arrays()
    unit_of = getattr(units, "unit_of_node", None)
    if unit_of is not None:  # members in node order: a stable sort of the nodes by unit
        flat = np.argsort(unit_of, kind="stable").astype(np.int64)
        off = np.zeros(units.n_units + 1, dtype=np.int64)
        off[1:] = np.cumsum(np.bincount(unit_of, minlength=units.n_units))
    else:
        off = np.zeros(units.n_units + 1, dtype=np.int64)
        off[1:] = np.cumsum([len(m) for m in units.members])
        flat = np.fromiter((i for m in units.members for i in m), dtype=np.int64, count=len(arr.memory))
    ue = np.asarray(unit_edges, dtype=np.int64).reshape(-1, 2)
    # an unsupported kind costs nothing here; the *_ok flags make the block infeasible
    acc_ok, acc_t = arr.kind(ACCELERATOR)
    cpu_ok, cpu_t = arr.kind(CPU)
    return _core.max_load_dp(
        acc_t, cpu_t, arr.memory, arr.comm, acc_ok, cpu_ok,
        arr.src, arr.dst, units.n_units, np.ascontiguousarray(ue[:, 0]), np.ascontiguousarray(ue[:, 1]), off, flat,
        problem.devices, problem.cpus, problem.memory, math.inf, max_ideals, prune, upper_bound=upper,
        time_limit=remaining(),  # the caller's deadline scope (stagecut._deadline), if any
    )


def _split_of(graph: Graph, units: _UnitsLike, blocks: Sequence[tuple[bool, Sequence[int]]]
              ) -> tuple[dict[NodeId, tuple[str, int]], list[tuple[str, int]]]:
    """``({node id: (kind, index)}, devices in pipeline order)`` of the DP's blocks."""
    assignment: dict[NodeId, tuple[str, int]] = {}
    order: list[tuple[str, int]] = []
    for is_acc, _ in blocks:
        kind = ACCELERATOR if is_acc else CPU
        order.append((kind, sum(1 for d in order if d[0] == kind)))
    unit_of = getattr(units, "unit_of_node", None)
    if unit_of is not None:  # arrays: the block of each unit, then of each node
        block_of = np.full(units.n_units, -1, dtype=np.int64)
        for b, (_, unit_ids) in enumerate(blocks):
            block_of[np.asarray(unit_ids, dtype=np.int64)] = b
        node_block = block_of[unit_of]
        placed = np.flatnonzero(node_block >= 0).tolist()
        nodes = graph.nodes
        return dict(zip([nodes[i].id for i in placed], [order[b] for b in node_block[placed].tolist()])), order
    for dev, (_, unit_ids) in zip(order, blocks):
        for u in unit_ids:
            for i in units.members[u]:
                assignment[graph.nodes[i].id] = dev
    return assignment, order


def _exact_raw(core: ThroughputProblem, units: Units, max_ideals: int, prune: bool) -> _MaxLoadResult:
    upper = None
    if prune:
        # a split along one topological order of the units (the DP on the units plus a path:
        # n + 1 ideals) is a split of this problem, so no better than the optimum: a block
        # costing more than it is in no better split (exact pruning)
        lin = _run_dp(core, units, np.concatenate([_edge_array(units), _path(units)]), units.n_units + 2, prune)
        if math.isfinite(lin["objective"]):
            upper = lin["objective"] * (1 + 1e-9) + 1e-12
    raw = _run_dp(core, units, _edge_array(units), max_ideals, prune, upper)
    if upper is not None and not raw["objective"] <= upper:  # the bound was wrong after all
        raw = _run_dp(core, units, _edge_array(units), max_ideals, prune)
    return raw


def _nodes(n: int) -> str:
    return f"{n} node" if n == 1 else f"{n} nodes"


def _why_so_many(core: ThroughputProblem, units: Units, max_ideals: int, set_aside: int) -> str:
    """Why the exact DP refused: the count, and unconnected parts that multiply the ideals."""
    why = f"the graph has more than max_ideals={max_ideals} ideals"
    ug = nx.DiGraph()
    ug.add_nodes_from(range(units.n_units))
    ug.add_edges_from(units.edges)
    parts = nx.number_weakly_connected_components(ug)
    if parts > 1:
        lone = sum(1 for c in nx.weakly_connected_components(ug) if len(c) == 1)
        why += f"; it has {parts} unconnected parts, whose ideals multiply"
        if lone:
            why += (f" ({lone} of them without edges, kept because they cost something, hold memory "
                    "or cannot run on every device kind in use)")
    if set_aside:
        why += f" ({_nodes(set_aside)} without edges or cost already set aside)"
    return why


def try_dp(problem: ThroughputProblem, *, max_ideals: int = DEFAULT_MAX_IDEALS, prune: bool = True) -> Plan | str:
    """The exact DP's plan, or why it refused (more than ``max_ideals`` ideals).

    Parameters
    ----------
    problem : ThroughputProblem
    max_ideals : int
    prune : bool
        Skip blocks whose compute alone cannot improve the current row (exact; turn off to
        count every ideal pair).

    Returns
    -------
    Plan or str
        The plan (status ``"optimal"``: optimal over the contiguous splits, those with an
        acyclic quotient; or ``"infeasible"`` with ``objective=None``: no contiguous split
        fits), or the reason for refusing.

    Raises
    ------
    InvalidGraphError
        An edge from a backward node to a forward node.
    SolverError
        (internal error) the DP disagrees with the evaluator.
    """
    t0 = time.perf_counter()
    core, aside = set_aside_free_nodes(problem)
    units = Units(core.graph, core.memory)
    try:
        raw = _exact_raw(core, units, max_ideals, prune)
    except TooManyIdealsError:
        return _why_so_many(core, units, max_ideals, len(aside))
    stats: dict[str, Stat] = {"ideals": raw["ideals"], "pairs": raw["pairs"], "units": units.n_units,
                              "set_aside": len(aside)}
    notes = [f"{_nodes(len(aside))} without edges, cost or memory set aside for the DP and placed on the "
             "first stage"] if aside else []
    return dp_plan(problem, core, units, raw, aside, stats, notes, t0)


def solve_dp(problem: ThroughputProblem, *, max_ideals: int = DEFAULT_MAX_IDEALS, prune: bool = True) -> Plan:
    """The exact DP's plan (see :func:`try_dp`).

    Raises
    ------
    TooManyIdealsError
        More than ``max_ideals`` ideals; the message says why (unconnected parts...).
    InvalidGraphError, SolverError
        As :func:`try_dp`.
    """
    out = try_dp(problem, max_ideals=max_ideals, prune=prune)
    if isinstance(out, str):
        raise TooManyIdealsError(f"{out}; raise max_ideals, or use method='dpl' (linearized DP, at most "
                                 "n + 1 ideals) or method='auto'")
    return out


def solve_dpl(problem: ThroughputProblem, *, prune: bool = True) -> Plan:
    """DPL: the DP along the reference implementation's topological path (n + 1 ideals).

    Parameters
    ----------
    problem : ThroughputProblem
    prune : bool

    Returns
    -------
    Plan
        The best split along the path (a contiguous split: acyclic quotient), status
        ``"feasible"`` with :func:`simple_lower_bound` as ``lower_bound`` (a bound on every
        split, computed on the original graph). When no split along the path fits
        (``objective=None``): status ``"infeasible"`` if the bound proves that no split fits
        (``inf``: a colocation class fits on no device), else ``"unknown"``.

    Raises
    ------
    InvalidGraphError, SolverError
        As :func:`try_dp`.
    """
    t0 = time.perf_counter()
    units = _ReferenceUnits(problem.graph)
    raw = _run_dp(problem, units, _edge_array(units), units.n_units + 2, prune)
    stats: dict[str, Stat] = {"ideals": raw["ideals"], "pairs": raw["pairs"], "units": units.n_units}
    lb = simple_lower_bound(problem)
    if not math.isfinite(raw["objective"]):
        if math.isinf(lb):  # some colocation class fits on no device: proven
            return no_plan(problem, status="infeasible", method="dpl", stats=stats, notes=["no split fits"],
                           runtime_s=time.perf_counter() - t0)
        return no_plan(problem, status="unknown", method="dpl", stats=stats, lower_bound=lb,
                       notes=["no split along the DPL order fits (not proven infeasible); try method='dp'"],
                       runtime_s=time.perf_counter() - t0)
    assignment, order = _split_of(problem.graph, units, raw["blocks"])
    return plan_from_split(problem, assignment, order, solver="DPL", claimed=raw["objective"], exact=True,
                           status="feasible", lower_bound=lb, method="dpl", stats=stats,
                           runtime_s=time.perf_counter() - t0)


def dp_plan(problem: Any, core: Any, units: Any, raw: Mapping[str, Any], aside: Sequence[Any],
            stats: dict[str, Stat], notes: list[str], t0: float) -> Plan:
    """The plan of the exact DP's answer ``raw`` over ``units`` of ``core`` (the nodes ``aside``
    on the first stage), re-scored; ``infeasible`` when no contiguous split fits."""
    if not math.isfinite(raw["objective"]):
        return no_plan(problem, status="infeasible", method="dp", stats=stats,
                       notes=[*notes, "no contiguous split fits"], runtime_s=time.perf_counter() - t0)
    assignment, order = _split_of(core.graph, units, raw["blocks"])
    assignment.update(dict.fromkeys(aside, order[0]))
    return plan_from_split(problem, assignment, order, solver="DP", claimed=raw["objective"], exact=True,
                           status="optimal", lower_bound=None, method="dp", stats=stats, notes=notes,
                           runtime_s=time.perf_counter() - t0)
