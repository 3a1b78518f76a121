"""The throughput IP (Tarnawski et al., NeurIPS 2020, Sections 5.1.3, 5.2, 5.3) with python-mip.

The cost model is the one of :mod:`stagecut.throughput.evaluate` (Table 1): ``devices``
accelerators and ``cpus`` CPUs, a memory limit per accelerator, nodes that some kind cannot
run, tensor-once communication paid by accelerators, and the largest device load as the
objective. Two formulations, both over *units* (colour classes contracted, so that a forward
node and its backward node share a device):

``contiguous=True`` (ordered blocks)
    ``z[u, b] = 1`` when unit ``u`` is *completed by block* ``b`` (it sits in one of the blocks
    ``0..b``), monotone in ``b`` and closed under predecessors of the forward unit DAG (the one
    the DP uses: orphan backward classes mirrored, classes on a forward cycle fused), so every
    prefix of blocks is an ideal and the blocks form a pipeline with an acyclic quotient, exactly
    the splits the ideal DP enumerates. ``y[b] = 1`` makes block ``b`` a CPU
    (``sum y <= cpus``, ``sum (1 - y) <= devices``); ``xa + xc = z[:, b] - z[:, b-1]``
    split the membership by kind. Contiguity is enforced on the forward unit DAG; backward
    nodes follow their colour class (Section 5.3).
``contiguous=False``
    ``xa[u, d]`` / ``xc[u, d]``: unit ``u`` on accelerator / CPU ``d``; symmetry between
    identical devices is broken by allowing unit ``u`` (in topological order) only on the
    devices ``0..u`` of each kind.

Communication: for every producing node ``p`` and accelerator (block) ``d``, a variable
``c[p, d] >= |x[unit(v), d] - x[unit(p), d]|`` for every consumer ``v`` in another unit, paid
``comm(p)`` once (tensor-once) by the device. The IP objective is therefore an upper bound on
the true load; the returned plan is re-scored by :func:`stagecut.evaluate`.

Examples
--------
>>> import stagecut as sc
>>> from stagecut.throughput.ip import partition_ip
>>> g = sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0])
>>> plan = partition_ip(g, devices=3)
>>> plan.objective, plan.status, [s.nodes for s in plan.stages]
(4.0, 'optimal', [(0,), (1, 2, 3), (4,)])
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Hashable, Mapping
from typing import Any, TypeVar

from stagecut._mip import MODEL_TOL, MODEL_UNITS, MipOutcome, check_options, solve, stated_tolerance
from stagecut.errors import InvalidArgumentError, InvalidGraphError
from stagecut.graph import ACCELERATOR, Graph, NodeId, kahn_order
from stagecut.results import Plan, Stat, Status
from stagecut.throughput._ip_model import IpModel, build_throughput_ip, read_split, start_values
from stagecut.throughput.dp import simple_lower_bound, solve_dpl
from stagecut.throughput.evaluate import evaluate
from stagecut.throughput.problem import ThroughputProblem, resolve_problem
from stagecut.throughput.rescore import no_plan, plan_from_split
from stagecut.validate import check_number, shown

__all__ = ["partition_ip", "build_throughput_ip"]

K = TypeVar("K", bound=Hashable)


def _warm_assignment(warm_start: Plan | Mapping[K, tuple[str, int]] | None, graph: Graph
                     ) -> Mapping[NodeId, tuple[str, int]] | None:
    """The node -> (kind, index) split of ``warm_start``, checked: every key a node of ``graph``,
    every value a (device kind, index) pair."""
    if warm_start is None:
        return None
    if isinstance(warm_start, Plan):
        return warm_start.device_of() if warm_start.objective is not None else None
    if not isinstance(warm_start, Mapping):
        raise InvalidArgumentError(
            f"warm_start must be a Plan or a node -> (kind, index) mapping, got {type(warm_start).__name__}")
    out: dict[NodeId, tuple[str, int]] = {}
    for node, where in warm_start.items():
        if node not in graph.index:
            raise InvalidArgumentError(f"warm_start: node {shown(node)} is not in the graph")
        if (not isinstance(where, (tuple, list)) or len(where) != 2 or not isinstance(where[0], str)
                or isinstance(where[1], bool) or not isinstance(where[1], int)):
            raise InvalidArgumentError(
                f"warm_start: node {shown(node)}: expected a (device kind, index) pair such as "
                f"('accelerator', 0), got {where!r}")
        out[node] = (where[0], where[1])
    return out


def _pipeline_order(graph: Graph, split: Mapping[NodeId, tuple[str, int]]) -> list[tuple[str, int]]:
    """The devices of a split in an order of its quotient graph (as listed when it has a cycle)."""
    devs = sorted({split[n.id] for n in graph.nodes}, key=lambda d: (d[0] != ACCELERATOR, d[0], d[1]))
    succ: dict[tuple[str, int], set[tuple[str, int]]] = {d: set() for d in devs}
    for u, v in graph.edges:
        if split[u] != split[v]:
            succ[split[u]].add(split[v])
    order = kahn_order(devs, succ)
    return order if len(order) == len(devs) else devs


def _known_split(problem: ThroughputProblem, warm: Mapping[NodeId, tuple[str, int]] | None) -> Plan | None:
    """A split of ``problem`` to start from and to hold the MIP to: ``warm`` when the evaluator
    finds it feasible here, else DPL's (``None`` when neither exists)."""
    if warm is not None:
        try:
            ev = evaluate(problem.graph, warm, devices=problem.devices, cpus=problem.cpus, memory=problem.memory)
        except InvalidGraphError:
            ev = None
        if ev is not None and ev.feasible:
            return plan_from_split(problem, warm, _pipeline_order(problem.graph, warm), solver="warm start",
                                   claimed=ev.objective, exact=True, status="feasible", lower_bound=None,
                                   method="ip", stats={})
    dpl = solve_dpl(problem)
    return dpl if dpl.objective is not None else None


def _stats(out: Any, model: IpModel, build_s: float, warm: bool) -> dict[str, Stat]:
    return {"mip_vars": out.cols, "mip_constraints": out.rows, "units": model.units.n_units,
            "build_s": build_s, "solve_s": out.seconds, "solver": out.solver, "mip_status": out.status,
            "mip_objective": None if out.objective is None else out.objective * model.scale,
            "mip_scale": model.scale, "warm_start": int(warm)}


def partition_ip(
    graph: Graph | ThroughputProblem,
    *,
    devices: int | None = None,
    cpus: int | None = None,
    memory: float | None = None,
    contiguous: bool = True,
    time_limit: float | None = None,
    gap: float | None = None,
    threads: int | None = None,
    seed: int = 0,
    solver: str = "cbc",
    warm_start: Plan | Mapping[K, tuple[str, int]] | None = None,
    verbose: bool = False,
    accelerators: int | None = None,
) -> Plan:
    """Solve the throughput IP: the best split found and its proven lower bound.

    Parameters
    ----------
    graph : Graph or ThroughputProblem
    devices, cpus, memory
        As in :func:`stagecut.partition` (defaults from the workload; not with a problem).
    contiguous : bool
        Optimise over the contiguous splits (an acyclic quotient: blocks that form a chain of
        ideals, the DP's set; :func:`stagecut.is_contiguous`) or over every split.
    time_limit : float, optional
        Seconds; on expiry the best split and bound found are returned with status
        ``"time_limit"`` (``objective=None`` when none was found; no exception).
    gap : float, optional
        Relative optimality gap at which to stop (default 1e-6).
    threads, seed : int
        Solver threads (default 1) and random seed.
    solver : {"cbc", "highs"}
        HiGHS needs the ``highs`` extra (``pip install 'stagecut[highs]'``).
    warm_start : Plan or mapping node id -> (kind, index), optional
        A split (e.g. the DP's) given to the solver as a MIP start; without one (or when it does
        not fit this problem), DPL's split is used.
    verbose : bool
        Show the solver's log.
    accelerators : int, optional
        Deprecated spelling of ``devices``.

    Returns
    -------
    Plan
        ``method="ip"``; the best split found (the MIP's or the starting split, whichever the
        evaluator scores lower); ``objective`` as re-scored by :func:`stagecut.evaluate` (input
        time unit); ``lower_bound`` the solver's proven dual bound (or the simple bound, when
        the dual bound is above a known split's cost: then the notes say so), never above the
        objective; ``status`` ``"optimal"`` only when the solver says so and the bound is within
        :func:`~stagecut._mip.stated_tolerance` of the objective (the relative ``gap``, or 2e-5
        of the model unit: times are divided by a reference value, the cost of the starting
        split, so that values far apart in magnitude stay apart, and the model is solved again
        in units of a much better answer), ``"feasible"``, ``"time_limit"``,
        ``"infeasible"`` (the solver proved it and no split is known), or ``"unknown"`` (the
        solver stopped without a usable split and none is known); ``stats`` the model size
        (``mip_vars``, ``mip_constraints``), ``build_s``, ``solve_s``, the solver's own status and
        objective, ``mip_scale`` (one model unit, in the input's time unit) and ``mip_rounds``.

    Raises
    ------
    InvalidArgumentError
        A bad setting or solver option, a ``warm_start`` of the wrong type.
    InvalidGraphError
        A bad default in the graph; an edge from a backward node to a forward node.
    BackendUnavailableError
        ``solver="highs"`` without HiGHS installed.
    SolverError
        The solver failed; or (internal error) its split costs more than its value by more
        than the solvers' round-off.
    """
    problem = resolve_problem(graph, devices, cpus, memory, accelerators, "partition_ip")
    for name, value, positive in (("time_limit (seconds)", time_limit, True), ("gap", gap, False)):
        if value is not None:  # (argument errors, as _mip.check_options should also say)
            check_number(value, name, allow_inf=True, positive=positive, error=InvalidArgumentError)
    check_options(time_limit, gap, threads, seed, solver)
    t0 = time.perf_counter()
    known = _known_split(problem, _warm_assignment(warm_start, problem.graph))
    options: dict[str, Any] = {"contiguous": contiguous, "solver": solver, "gap": gap, "threads": threads,
                               "seed": seed, "verbose": verbose}
    for rounds in range(1, _MAX_ROUNDS + 1):
        left = None if time_limit is None else max(0.1, time_limit - (time.perf_counter() - t0))
        model, out, stats = _solve_round(problem, known, options, left)
        plan = _verified(problem, model, out, known, gap, {**stats, "mip_rounds": rounds}, contiguous, time_limit)
        reference = model.scale * MODEL_UNITS
        if plan.objective is None or not 0 < plan.objective < 0.5 * reference or plan.status == "time_limit":
            break
        known = plan  # far below the reference value: solve again, in units of this answer
    return dataclasses.replace(plan, seed=seed, runtime_s=time.perf_counter() - t0)


#: How many times the MIP may be solved again with its times in units of a better answer.
_MAX_ROUNDS = 3


def _solve_round(problem: ThroughputProblem, known: Plan | None, options: dict[str, Any],
                 time_limit: float | None) -> tuple[IpModel, MipOutcome, dict[str, Stat]]:
    """Build the model in units of ``known``'s cost (the largest time without one), start it
    from ``known``, solve."""
    t0 = time.perf_counter()
    model = build_throughput_ip(problem, upper=None if known is None else known.objective, **options)
    build_s = time.perf_counter() - t0
    start = start_values(problem.graph, model, known.device_of(), problem.cpus) if known is not None else []
    out = solve(model.model, time_limit=time_limit, start=start, scale=model.scale)
    return model, out, _stats(out, model, build_s, bool(start))


def _mip_split(problem: ThroughputProblem, model: IpModel, out: MipOutcome) -> Plan | None:
    """The MIP's split, scored by the evaluator (``None`` when it has none, or one that breaks a
    limit: a solver's numerical trouble, not a split). The MIP's own value
    may sit below the evaluator's by the solvers' tolerances (integrality, feasibility), one
    :data:`~stagecut._mip.MODEL_TOL` of the reference value per unit at most: that is round-off,
    not an error."""
    if out.objective is None:
        return None
    assignment, order = read_split(problem.graph, model)
    ev = evaluate(problem.graph, assignment, devices=problem.devices, cpus=problem.cpus, memory=problem.memory)
    if not ev.feasible:  # the solver took a fractional point for a solution (seen with CBC): no split
        return None
    slack = MODEL_TOL * model.scale * (model.units.n_units + 1) + model.gap * abs(out.objective * model.scale)
    return plan_from_split(problem, assignment, order, solver="IP", claimed=out.objective * model.scale,
                           exact=False, slack=slack, status="feasible", lower_bound=None, method="ip", stats={})


def _verified(problem: ThroughputProblem, model: IpModel, out: MipOutcome, known: Plan | None,
              gap: float | None, stats: dict[str, Stat], contiguous: bool, time_limit: float | None) -> Plan:
    """The answer, with a status and bound that the evaluator and the bound agree on.

    The best of the MIP's split and the known split (by the evaluator); the MIP's dual bound
    unless it is above that split's cost by more than the stated tolerance (then it proves
    nothing: numerical trouble, and the simple bound stands in); ``"optimal"`` only when the
    solver says so and the bound is within the tolerance of the evaluator's value;
    ``"infeasible"`` only when no split is known either.
    """
    common: dict[str, Any] = {"method": "ip", "stats": stats, "contiguous": contiguous}
    notes: list[str] = []
    if out.status == "infeasible":
        if known is None:
            return no_plan(problem, status="infeasible", notes=["no split fits"], **common)
        notes.append("the MIP solver reported that no split fits, yet the known split fits (numerical trouble)")
    found = _mip_split(problem, model, out)
    if found is None and out.objective is not None:
        notes.append("the MIP solver's split breaks a limit (numerical trouble): it is not used")
    candidates = [p for p in (found, known) if p is not None and p.objective is not None]
    if not candidates:
        lb = out.bound * model.scale if math.isfinite(out.bound) else None
        if out.status == "time_limit" and time_limit is not None:
            return no_plan(problem, status="time_limit", lower_bound=lb, runtime_s=0.0, **common,
                           notes=[f"no split found within the time limit of {time_limit:g} s"])
        return no_plan(problem, status="unknown", lower_bound=lb, runtime_s=0.0, **common,
                       notes=[*notes, f"the MIP solver stopped without a usable split ({out.status})"])
    best = min(candidates, key=lambda p: p.objective if p.objective is not None else math.inf)
    assert best.objective is not None
    if best is not found and found is not None:
        notes.append("the MIP's split costs more than the known split (DPL's or the warm start), which is returned")
    tol = stated_tolerance(best.objective, model.scale, model.gap)
    lb = out.bound * model.scale if out.status != "infeasible" else -math.inf
    if lb > best.objective + tol:
        notes.append(f"the MIP's bound {lb:.9g} is above the cost of a known split {best.objective:.9g} "
                     "(numerical trouble): it proves nothing")
        lb = -math.inf
    status: Status = "time_limit" if out.status == "time_limit" else "feasible"
    if out.status == "optimal" and best.objective - lb <= tol:
        status = "optimal"
    elif out.status == "optimal" and math.isfinite(lb):
        notes.append(f"the MIP solver reported optimal, but its bound {lb:.9g} is further than the tolerance "
                     f"{tol:.3g} from the split's cost: not proven")
    lb = min(max(lb, simple_lower_bound(problem)), best.objective)
    return dataclasses.replace(best, status=status, lower_bound=lb, notes=(*problem.notes, *notes),
                               method="ip", stats=stats)
