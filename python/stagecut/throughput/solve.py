""":func:`partition`: one entry point for every throughput solver (``auto``, ``dp``, ``dpl``, ``ip``)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Hashable, Mapping
from typing import TypeVar

from stagecut._deadline import DeadlineReached, check_time_limit, deadline
from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph
from stagecut.progress import Progress, reports
from stagecut.results import Plan
from stagecut.throughput.baselines import BASELINES, run_baseline
from stagecut.throughput.dp import DEFAULT_MAX_IDEALS, simple_lower_bound, solve_dp, solve_dpl, try_dp
from stagecut.throughput.gpipe import DEFAULT_GPIPE_MAX_IDEALS, partition_gpipe
from stagecut.throughput.ip import partition_ip
from stagecut.throughput.problem import ThroughputProblem, resolve_problem
from stagecut.throughput.rescore import no_plan
from stagecut.validate import check_int

__all__ = ["METHODS", "OBJECTIVES", "partition"]

#: The values of ``method``.
METHODS = ("auto", "dp", "dpl", "ip", *BASELINES)
#: The values of ``objective``: PipeDream's 1F1B max load, GPipe's max FW + max BW.
OBJECTIVES = ("pipedream", "gpipe")

K = TypeVar("K", bound=Hashable)


def _auto(problem: ThroughputProblem, max_ideals: int, prune: bool, dpl: Plan | None = None) -> Plan:
    """The exact DP when the ideals fit, else DPL (``dpl`` if already computed), saying so, and
    why, in the notes."""
    out = try_dp(problem, max_ideals=max_ideals, prune=prune)
    if isinstance(out, Plan):
        return out
    plan = dpl if dpl is not None else solve_dpl(problem, prune=prune)
    note = f"auto: ran the linearized DP (DPL) instead of the exact DP because {out}"
    return dataclasses.replace(plan, notes=(*plan.notes, note))


def _combinatorial(problem: ThroughputProblem, method: str, max_ideals: int, prune: bool) -> Plan:
    if method == "dp":
        return solve_dp(problem, max_ideals=max_ideals, prune=prune)
    if method == "dpl":
        return solve_dpl(problem, prune=prune)
    return _auto(problem, max_ideals, prune)


def _timed(problem: ThroughputProblem, method: str, max_ideals: int, prune: bool, time_limit: float) -> Plan:
    """:func:`_combinatorial` within ``time_limit`` seconds: DPL first (so a split is known), then
    the exact DP (``dp``, ``auto``) in the time left. Cut short, the exact DP gives way to the DPL
    split with status ``"time_limit"`` and DPL's lower bound; with no split in time, none."""
    with deadline(time_limit):
        try:
            dpl = solve_dpl(problem, prune=prune)
        except DeadlineReached:
            return no_plan(problem, status="time_limit", method=method, stats={},
                           lower_bound=simple_lower_bound(problem),
                           notes=[f"time limit ({time_limit:g} s) reached before any split was found"])
        if method == "dpl" or dpl.status == "infeasible":  # proven: no split at all
            return dpl
        try:
            if method == "dp":
                return solve_dp(problem, max_ideals=max_ideals, prune=prune)
            return _auto(problem, max_ideals, prune, dpl)
        except DeadlineReached:
            pass
    found = "the DPL split (not proven optimal)" if dpl.objective is not None else "no split (DPL found none)"
    note = f"time limit ({time_limit:g} s) reached during the exact DP: {found}"
    return dataclasses.replace(dpl, status="time_limit", method=method, notes=(*dpl.notes, note))


def _gpipe(problem: ThroughputProblem, objective: str, method: str, max_ideals: int, limit: float | None,
           t0: float) -> Plan:
    """``partition(objective="gpipe")``: the exact GPipe DP, with its own default cap on ideals."""
    if objective not in OBJECTIVES:
        raise InvalidArgumentError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if method not in ("auto", "dp"):
        raise InvalidArgumentError(f"objective='gpipe' is solved by its exact DP only: method must be 'auto' or "
                                   f"'dp', got {method!r}")
    if limit is not None and limit != float("inf"):
        raise InvalidArgumentError("objective='gpipe' takes no time_limit (its DP runs on small graphs only)")
    cap = DEFAULT_GPIPE_MAX_IDEALS if max_ideals == DEFAULT_MAX_IDEALS else max_ideals
    plan = partition_gpipe(problem, max_ideals=cap)
    return dataclasses.replace(plan, runtime_s=time.perf_counter() - t0)


def _device_notes(problem: ThroughputProblem) -> tuple[str, ...]:
    """Device counts past the node count are capped (a device holds one non-empty stage)."""
    n = len(problem.graph.nodes)
    return tuple(f"{name}={count} is more than the {n} nodes: at most {n} can hold a stage, so the DP used {n}"
                 for name, count in (("devices", problem.devices), ("cpus", problem.cpus)) if count > n)


@reports
def partition(
    graph: Graph | ThroughputProblem,
    *,
    devices: int | None = None,
    cpus: int | None = None,
    memory: float | None = None,
    method: str = "auto",
    objective: str = "pipedream",
    max_ideals: int = DEFAULT_MAX_IDEALS,
    prune: bool = True,
    contiguous: bool = True,
    time_limit: float | None = None,
    gap: float | None = None,
    threads: int | None = None,
    seed: int = 0,
    solver: str = "cbc",
    warm_start: Plan | Mapping[K, tuple[str, int]] | None = None,
    verbose: bool = False,
    accelerators: int | None = None,
    progress: Progress = None,
) -> Plan:
    """Split ``graph`` into contiguous pipeline stages minimizing the time per sample.

    *Contiguous* means that the split's quotient graph is acyclic (the stages, in pipeline
    order, form a chain of ideals; :func:`stagecut.is_contiguous`), which is stronger than every
    stage being convex. Every method but ``ip`` with ``contiguous=False`` optimises over the
    contiguous splits, and ``status="optimal"`` means optimal over that set.

    Parameters
    ----------
    graph : Graph or ThroughputProblem
        Node times per kind (``"accelerator"``, ``"cpu"``) in the input's time unit, memory
        (typically bytes), output communication time.
    devices, cpus : int, optional
        Accelerator and CPU counts; default the graph's defaults (the workload file's
        ``maxFPGAs`` / ``maxCPUs``, which the plan's ``notes`` then mention), else 1 accelerator
        and 0 CPUs. Not with a :class:`ThroughputProblem`.
    memory : float, optional
        Memory per accelerator, in the unit of the nodes' memory; default the graph's
        (``maxSizePerFPGA``), else unlimited.
    method : {"auto", "dp", "dpl", "ip", "local-search", "pipedream", "scotch"}
        ``"dp"``: the exact DP over all ideals (status ``"optimal"``). ``"dpl"``: the same DP
        after adding a DFS topological path (n + 1 ideals; status ``"feasible"`` with a simple
        lower bound). ``"auto"``: ``"dp"`` when the ideals fit under ``max_ideals``, otherwise
        ``"dpl"`` (the notes say so and why). ``"ip"``: :func:`partition_ip`, warm-started from
        ``"auto"``'s plan unless ``warm_start`` is given. The paper's baselines (status
        ``"feasible"``, see :mod:`stagecut.throughput.baselines`): ``"local-search"`` (10
        restarts from ``seed``; usually non-contiguous), ``"pipedream"`` (layer graphs),
        ``"scotch"`` (Scotch's ``gpart``, else METIS; usually non-contiguous).
    objective : {"pipedream", "gpipe"}
        ``"pipedream"``: the max load ``max_i (FW_i + BW_i)`` (1F1B's time per microbatch; the
        only objective of an inference graph). ``"gpipe"``: ``max_i FW_i + max_i BW_i``, solved
        exactly over the contiguous splits by
        :func:`~stagecut.throughput.gpipe.partition_gpipe` (a Python DP for small graphs;
        ``method`` ``"auto"`` or ``"dp"``, no ``time_limit``; ``max_ideals`` defaults to its
        1000).
    max_ideals : int
        Cap on the ideals the exact DP enumerates.
    prune : bool
        Skip blocks whose compute alone cannot improve the current row (exact; turn off to
        count every ideal pair).
    time_limit : float, optional
        Seconds for the whole call (``None``: no limit). ``"dp"`` and ``"auto"`` then run DPL
        first and the exact DP in the time left; stopped by the limit, they return the DPL
        split (re-scored, with its lower bound) and status ``"time_limit"``; with no split found
        in time, ``objective=None`` and status ``"time_limit"``. For ``"ip"``, the warm start
        (``"auto"``'s plan) runs within it too, and the MIP gets the time left (see
        :func:`partition_ip`).
    contiguous, gap, threads, seed, solver, warm_start, verbose
        Only for ``method="ip"`` (see :func:`partition_ip`); ``seed`` also for the baselines.
    accelerators : int, optional
        Deprecated spelling of ``devices`` (a :class:`DeprecationWarning`).
    progress : bool or callable, optional
        Progress reports (:mod:`stagecut.progress`): a callable receives a
        :class:`~stagecut.progress.ProgressEvent` about four times a second while the core works
        (an exception it raises stops the call); ``True`` shows a tqdm bar on stderr once the call
        has run 2 s, if stderr is a terminal; ``None`` (default): none.

    Returns
    -------
    Plan
        Re-scored by :func:`stagecut.evaluate`; ``status="infeasible"`` with ``objective=None``
        when no contiguous split fits. ``stats``: ``ideals``, ``pairs`` (ideal pairs visited),
        ``units``, ``set_aside`` (free isolated nodes the DP set aside); ``mip_*`` for the IP.

    Raises
    ------
    InvalidArgumentError
        An unknown ``method`` or ``objective``, a bad ``max_ideals``, device count, memory, time
        limit or solver option; ``objective="gpipe"`` with another method or a time limit.
    InvalidGraphError
        A bad default carried by the graph; an edge from a backward node to a forward node;
        ``method="pipedream"`` on a graph whose branching regions collapse it (operator graphs).
    TooManyIdealsError
        ``method="dp"`` with more than ``max_ideals`` ideals (the message says why, e.g. the
        number of unconnected parts of the graph).
    SolverError
        The IP solver failed, or (internal error, please report) a solver disagrees with the
        evaluator.
    BackendUnavailableError
        ``method="scotch"`` without Scotch's ``gpart`` or ``pymetis`` (the message says how to
        install them).
    MemoryLimitError
        The DP's tables would pass the memory budget (the message says how much and what to
        change). Device counts past the node count are capped first (the notes say so).
    KeyboardInterrupt
        On Ctrl-C (SIGINT), within a fraction of a second, even inside the Rust core.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0])
    >>> plan = sc.partition(g, devices=3)
    >>> plan.objective, plan.status, [s.nodes for s in plan.stages]
    (4.0, 'optimal', [(0,), (1, 2, 3), (4,)])
    >>> sc.partition(g, devices=3, method="dpl").status
    'feasible'
    >>> sc.partition(g, devices=3, objective="gpipe").objective  # inference: no backward part
    4.0
    >>> heavy = sc.Graph.chain([1.0, 1.0], memory=[5.0, 5.0])  # 5 bytes each
    >>> p = sc.partition(heavy, devices=1, memory=8.0)
    >>> p.status, p.objective
    ('infeasible', None)
    """
    problem = resolve_problem(graph, devices, cpus, memory, accelerators, "partition")
    if method not in METHODS:
        raise InvalidArgumentError(f"method must be one of {METHODS}, got {method!r}")
    max_ideals = check_int(max_ideals, "max_ideals", minimum=1)
    if not isinstance(prune, bool):
        raise InvalidArgumentError(f"prune must be True or False, got {prune!r}")
    limit = check_time_limit(time_limit)
    t0 = time.perf_counter()
    if objective != "pipedream":
        return _gpipe(problem, objective, method, max_ideals, limit, t0)
    if method in BASELINES:  # the paper's baselines (stagecut.throughput.baselines)
        plan = run_baseline(problem, method, seed=seed)
        return dataclasses.replace(plan, runtime_s=time.perf_counter() - t0)
    if method != "ip":
        if warm_start is not None:
            raise InvalidArgumentError(f"warm_start is only for method='ip' (method={method!r} does not use it)")
        if limit is None or limit == float("inf"):
            plan = _combinatorial(problem, method, max_ideals, prune)
        else:
            plan = _timed(problem, method, max_ideals, prune, limit)
        notes = (*plan.notes, *_device_notes(problem))
        return dataclasses.replace(plan, runtime_s=time.perf_counter() - t0, notes=notes)
    if warm_start is None:  # the DP (or DPL) answer is a good incumbent, as in the published runs
        if limit is None or limit == float("inf"):
            first = _combinatorial(problem, "auto", max_ideals, prune)
        else:  # within the same limit (DPL if the exact DP runs out of time); the MIP gets the rest
            first = _timed(problem, "auto", max_ideals, prune, limit)
            time_limit = max(0.1, limit - (time.perf_counter() - t0))
        warm_start = first if first.objective is not None else None
    plan = partition_ip(problem, contiguous=contiguous, time_limit=time_limit, gap=gap, threads=threads,
                        seed=seed, solver=solver, warm_start=warm_start, verbose=verbose)
    return dataclasses.replace(plan, runtime_s=time.perf_counter() - t0)
