"""Pipeline partitioning for throughput: the exact DP over ideals and its linearized variant.

The model is the one of Table 1 of "Efficient Algorithms for Device Placement of DNN Graph
Operators" (Tarnawski et al., NeurIPS 2020): split a DAG into contiguous blocks on at most
``accelerators`` accelerators and ``cpus`` CPUs, minimizing the largest device load (the time
per sample of the pipeline), with a memory limit per accelerator. See
:mod:`stagecut.evaluate` for the cost of one device.

Training graphs (Section 5.3): nodes of one colocation class are contracted into one unit per
class (a forward node carries its backward node along); a class whose nodes are all backward
gets an empty forward stand-in, tied by the mirror image of its backward edges; classes on a
cycle of the contracted forward graph are fused (they cannot be split contiguously). The DP
then runs over the ideals of the forward unit DAG.
"""

from __future__ import annotations

import math
import time

import numpy as np

from stagecut import _core
from stagecut.errors import InvalidGraphError, StagecutError, TooManyIdealsError
from stagecut.colocation import Units
from stagecut.throughput.evaluate import evaluate
from stagecut.throughput.ip import partition_ip
from stagecut.throughput.problem import resolve_devices
from stagecut.graph import ACCELERATOR, CPU, Graph, check_number, kahn_order
from stagecut.results import Plan

__all__ = ["partition", "simple_lower_bound", "DEFAULT_MAX_IDEALS", "METHODS"]

#: Default cap on the number of ideals the exact DP may enumerate.
DEFAULT_MAX_IDEALS = 200_000
METHODS = ("auto", "dp", "dpl", "ip")


class _ReferenceUnits:
    """Units and linearized edges of DPL, following the reference implementation's order
    (see :mod:`stagecut._reference_order`)."""

    def __init__(self, graph: Graph) -> None:
        from stagecut.throughput._reference_order import reference_dpl_units

        self.members, edges, path = reference_dpl_units(graph)
        self.n_units = len(self.members)
        self.edges = sorted(set(edges) | set(path))


def simple_lower_bound(graph: Graph, units: Units, accelerators: int, cpus: int, memory: float) -> float:
    """max(heaviest unit on its cheapest usable kind, total cheapest work / devices)."""
    best_unit = 0.0
    total = 0.0
    for ms in units.members:
        nodes = [graph.nodes[i] for i in ms]
        options = []
        if accelerators and sum(n.memory for n in nodes) <= memory:
            options.append(math.fsum(n.time(ACCELERATOR) for n in nodes))
        if cpus:
            options.append(math.fsum(n.time(CPU) for n in nodes))
        t = min(options, default=math.inf)
        best_unit = max(best_unit, t)
        total += t
    return max(best_unit, total / (accelerators + cpus))


def _path(units: Units) -> list:
    """Edges along one topological order of the unit DAG."""
    succ: list = [[] for _ in range(units.n_units)]
    for a, b in units.edges:
        succ[a].append(b)
    order = kahn_order(range(units.n_units), succ)
    return list(zip(order, order[1:]))


def _run_dp(graph: Graph, units: Units, unit_edges, accelerators, cpus, memory, max_ideals, prune,
            upper=None):
    nodes = graph.nodes
    src = np.fromiter((graph.index[u] for u, _ in graph.edges), dtype=np.int64, count=len(graph.edges))
    dst = np.fromiter((graph.index[v] for _, v in graph.edges), dtype=np.int64, count=len(graph.edges))
    off = np.zeros(units.n_units + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(m) for m in units.members])
    flat = np.fromiter((i for m in units.members for i in m), dtype=np.int64, count=len(nodes))
    ue = np.asarray(unit_edges, dtype=np.int64).reshape(-1, 2)

    def times(kind):
        # an unsupported kind costs nothing here; the *_ok flags make the block infeasible
        return np.array([n.compute.get(kind, 0.0) if n.supports(kind) else 0.0 for n in nodes], dtype=np.float64)

    return _core.max_load_dp(
        times(ACCELERATOR),
        times(CPU),
        np.array([n.memory for n in nodes], dtype=np.float64),
        np.array([n.comm for n in nodes], dtype=np.float64),
        np.array([n.supports(ACCELERATOR) for n in nodes], dtype=np.bool_),
        np.array([n.supports(CPU) for n in nodes], dtype=np.bool_),
        src,
        dst,
        units.n_units,
        np.ascontiguousarray(ue[:, 0]),
        np.ascontiguousarray(ue[:, 1]),
        off,
        flat,
        accelerators,
        cpus,
        memory,
        math.inf,
        max_ideals,
        prune,
        upper_bound=upper,
    )



def partition(
    graph: Graph,
    accelerators: int | None = None,
    cpus: int | None = None,
    memory: float | None = None,
    *,
    method: str = "auto",
    max_ideals: int = DEFAULT_MAX_IDEALS,
    prune: bool = True,
    contiguous: bool = True,
    time_limit: float | None = None,
    gap: float | None = None,
    threads: int | None = None,
    seed: int = 0,
    solver: str = "cbc",
    warm_start: "Plan | None" = None,
    verbose: bool = False,
) -> Plan:
    """Split ``graph`` into contiguous pipeline stages minimizing the time per sample.

    Parameters
    ----------
    graph : Graph
        Node times per kind (``"accelerator"``, ``"cpu"``), memory, output communication cost.
    accelerators, cpus : int, optional
        Device counts; default ``graph.defaults`` (the workload file's ``maxFPGAs`` /
        ``maxCPUs``), else 1 accelerator and 0 CPUs.
    memory : float, optional
        Memory per accelerator; default ``graph.defaults["memory"]``, else unlimited.
    method : {"auto", "dp", "dpl", "ip"}
        ``"dp"``: the exact DP over all ideals (status ``"optimal"``); raises
        :class:`~stagecut.errors.TooManyIdealsError` past ``max_ideals``. ``"dpl"``: the same
        DP after adding a DFS topological path (n + 1 ideals; status ``"feasible"``).
        ``"auto"``: ``"dp"`` when the ideals fit under ``max_ideals``, otherwise ``"dpl"``.
    max_ideals : int
        Explicit cap on the ideals the exact DP enumerates.
    prune : bool
        Skip blocks whose compute alone cannot improve the current row (exact; turn off to
        count every ideal pair).
    contiguous, time_limit, gap, threads, seed, solver, warm_start, verbose
        Only for ``method="ip"``, the integer program of :func:`stagecut.mip_pipeline.partition_ip`
        (python-mip; CBC by default): ``contiguous=False`` drops the contiguity constraints; a
        time limit returns the best split found with status ``"time_limit"`` and the proven
        lower bound.

    Returns
    -------
    Plan
        Re-scored by :func:`stagecut.evaluate`; ``status="infeasible"`` with
        ``objective=None`` when no contiguous split fits.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0])
    >>> plan = sc.partition(g, accelerators=3)
    >>> plan.objective, plan.status, [list(d.nodes) for d in plan.devices]
    (4.0, 'optimal', [[0], [1, 2, 3], [4]])
    """
    if method not in METHODS:
        raise InvalidGraphError(f"method must be one of {METHODS}, got {method!r}")
    if isinstance(max_ideals, bool) or not isinstance(max_ideals, (int, np.integer)) or max_ideals < 1:
        raise InvalidGraphError(f"max_ideals must be a positive integer, got {max_ideals!r}")
    accelerators, cpus, memory = resolve_devices(graph, accelerators, cpus, memory)
    if method == "ip":
        if warm_start is None:  # the DP (or DPL) answer is a good incumbent, as in the published runs
            first = partition(graph, accelerators, cpus, memory, max_ideals=max_ideals, prune=prune)
            warm_start = first if first.objective is not None else None
        return partition_ip(graph, accelerators, cpus, memory, contiguous=contiguous, time_limit=time_limit,
                            gap=gap, threads=threads, seed=seed, solver=solver, warm_start=warm_start,
                            verbose=verbose)
    t0 = time.perf_counter()
    units = Units(graph, memory)
    notes = []
    ran = method
    if method in ("auto", "dp"):
        upper = None
        if prune:
            # a split along one topological order of the units (the DP on the units plus a
            # path: n + 1 ideals) is a split of this problem, so no better than the optimum: a
            # block costing more than it is in no better split (exact pruning)
            lin = _run_dp(graph, units, units.edges + _path(units), accelerators, cpus, memory,
                          units.n_units + 2, prune)
            if math.isfinite(lin["objective"]):
                upper = lin["objective"] * (1 + 1e-9) + 1e-12
        try:
            raw = _run_dp(graph, units, units.edges, accelerators, cpus, memory, max_ideals, prune, upper)
            if upper is not None and not raw["objective"] <= upper:  # the bound was wrong after all
                raw = _run_dp(graph, units, units.edges, accelerators, cpus, memory, max_ideals, prune)
            ran = "dp"
        except TooManyIdealsError:
            if method == "dp":
                raise TooManyIdealsError(
                    f"the graph has more than max_ideals={max_ideals} ideals; raise max_ideals, "
                    "or use method='dpl' (linearized DP, at most n + 1 ideals) or method='auto'"
                ) from None
            notes.append(f"more than {max_ideals} ideals: ran the linearized DP (DPL) instead of the exact DP")
            ran = "dpl"
    if ran == "dpl":
        units = _ReferenceUnits(graph)
        raw = _run_dp(graph, units, units.edges, accelerators, cpus, memory, units.n_units + 2, prune)
    runtime = time.perf_counter() - t0
    exact = ran == "dp"
    lb = simple_lower_bound(graph, units, accelerators, cpus, memory)
    common = dict(method=ran, runtime_s=runtime, accelerators=accelerators, cpus=cpus, memory=memory,
                  ideals=raw["ideals"], ideal_pairs=raw["pairs"], notes=tuple(notes))
    if not math.isfinite(raw["objective"]):
        # exact: proven infeasible; DPL: only this linearization is (no bound either way)
        notes.append("no split fits" if exact else "no split along the DPL order fits; try method='dp'")
        common["notes"] = tuple(notes)
        return Plan(objective=None, status="infeasible", devices=(), lower_bound=None, **common)
    assignment: dict = {}
    order: list = []
    counters = {True: 0, False: 0}
    for is_acc, unit_ids in raw["blocks"]:
        kind = ACCELERATOR if is_acc else CPU
        dev = (kind, counters[is_acc])
        counters[is_acc] += 1
        order.append(dev)
        for u in unit_ids:
            for i in units.members[u]:
                assignment[graph.nodes[i].id] = dev
    ev = evaluate(graph, assignment, memory=memory, accelerators=accelerators, cpus=cpus)
    if not ev.feasible or abs(ev.objective - raw["objective"]) > 1e-6 * max(1.0, abs(ev.objective)):
        raise StagecutError(
            f"internal error: the DP's split scores {ev.objective} (issues: {list(ev.issues)}) "
            f"but the DP computed {raw['objective']}; please report this with the input"
        )
    by_dev = {(d.kind, d.index): d for d in ev.devices}
    devices = tuple(by_dev[d] for d in order)
    return Plan(objective=ev.objective, status="optimal" if exact else "feasible", devices=devices,
                lower_bound=ev.objective if exact else min(lb, ev.objective), contiguous=ev.contiguous,
                **common)
