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

import math
import time
from collections.abc import Hashable, Mapping
from typing import Any, TypeVar

from stagecut._mip import check_options, solve
from stagecut.errors import InvalidArgumentError, internal_error
from stagecut.graph import Graph, NodeId
from stagecut.results import Plan, Stat, Status
from stagecut.throughput._ip_model import IpModel, build_throughput_ip, read_split, start_values
from stagecut.throughput.problem import ThroughputProblem, resolve_problem
from stagecut.throughput.rescore import no_plan, plan_from_split
from stagecut.validate import check_number

__all__ = ["partition_ip", "build_throughput_ip"]

K = TypeVar("K", bound=Hashable)


def _warm_assignment(warm_start: Plan | Mapping[K, tuple[str, int]] | None
                     ) -> Mapping[NodeId, tuple[str, int]] | None:
    if warm_start is None:
        return None
    if isinstance(warm_start, Plan):
        return warm_start.device_of() if warm_start.objective is not None else None
    if isinstance(warm_start, Mapping):
        return {k: tuple(v) for k, v in warm_start.items()}  # type: ignore[misc]
    raise InvalidArgumentError(
        f"warm_start must be a Plan or a node -> (kind, index) mapping, got {type(warm_start).__name__}")


def _stats(out: Any, model: IpModel, build_s: float, warm: bool) -> dict[str, Stat]:
    return {"mip_vars": out.cols, "mip_constraints": out.rows, "units": model.units.n_units,
            "build_s": build_s, "solve_s": out.seconds, "solver": out.solver, "mip_status": out.status,
            "mip_objective": out.objective, "warm_start": int(warm)}


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
        Ordered contiguous blocks (the DP's search space) or any split.
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
        A split (e.g. the DP's or DPL's) given to the solver as a MIP start.
    verbose : bool
        Show the solver's log.
    accelerators : int, optional
        Deprecated spelling of ``devices``.

    Returns
    -------
    Plan
        ``method="ip"``; ``objective`` as re-scored by :func:`stagecut.evaluate` (input time
        unit); ``lower_bound`` the solver's proven dual bound; ``status`` ``"optimal"``,
        ``"feasible"``, ``"time_limit"`` or ``"infeasible"``; ``stats`` the model size
        (``mip_vars``, ``mip_constraints``), ``build_s``, ``solve_s`` and the solver's own status.

    Raises
    ------
    InvalidArgumentError
        A bad setting or solver option, a ``warm_start`` of the wrong type.
    InvalidGraphError
        A bad default in the graph; an edge from a backward node to a forward node.
    BackendUnavailableError
        ``solver="highs"`` without HiGHS installed.
    SolverError
        The solver failed; or (internal error) its split disagrees with the evaluator.
    """
    problem = resolve_problem(graph, devices, cpus, memory, accelerators, "partition_ip")
    for name, value, positive in (("time_limit (seconds)", time_limit, True), ("gap", gap, False)):
        if value is not None:  # (argument errors, as _mip.check_options should also say)
            check_number(value, name, allow_inf=True, positive=positive, error=InvalidArgumentError)
    check_options(time_limit, gap, threads, seed, solver)
    warm = _warm_assignment(warm_start)
    t0 = time.perf_counter()
    model = build_throughput_ip(problem, contiguous=contiguous, solver=solver, gap=gap, threads=threads,
                                seed=seed, verbose=verbose)
    build_s = time.perf_counter() - t0
    start = start_values(problem.graph, model, warm, problem.cpus) if warm else []
    out = solve(model.model, time_limit=time_limit, start=start)
    stats = _stats(out, model, build_s, bool(start))
    common: dict[str, Any] = {"method": "ip", "stats": stats, "seed": seed}
    lb = out.bound if math.isfinite(out.bound) else None
    if out.status == "infeasible":
        return no_plan(problem, status="infeasible", contiguous=contiguous, notes=["no split fits"],
                       runtime_s=time.perf_counter() - t0, **common)
    if out.objective is None:
        if time_limit is None:
            raise internal_error(f"the IP solver stopped without a solution or a time limit ({out.status})")
        return no_plan(problem, status="time_limit", lower_bound=lb, contiguous=contiguous,
                       notes=[f"no split found within the time limit of {time_limit:g} s"],
                       runtime_s=time.perf_counter() - t0, **common)
    assignment, order = read_split(problem.graph, model)
    status: Status = "feasible"
    if out.status in ("optimal", "time_limit"):
        status = "optimal" if out.status == "optimal" else "time_limit"
    return plan_from_split(problem, assignment, order, solver="IP", claimed=out.objective, exact=False,
                           status=status, lower_bound=lb, runtime_s=time.perf_counter() - t0, **common)
