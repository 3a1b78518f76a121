"""``place``: the one entry point of the latency planner.

Methods (``method=``), every answer a :class:`~stagecut.latency.Schedule` re-scored by its
evaluator, with ``lower_bound`` at least :meth:`LatencyProblem.lower_bound`:

===============  =========  ==============================================================
method           semantics  what it does
===============  =========  ==============================================================
``best-device``  asap       everything on the best single device that can hold it
``met``          asap       each node on its fastest device
``greedy``       asap       DiviML's greedy: BFS order, each node where the makespan so far is least
``heft``         asap       insertion-based HEFT (upward ranks, mean costs)
``sa``, ``ea``   asap       simulated annealing / biased (1+1) EA over device strings (seeded)
``local``        asap       best single-node moves from the best constructive heuristic
``m-heft``       asap       HEFT with memory held back for the nodes that gain most from the
                            devices that cannot hold everything (several shares; the best)
``m-greedy``     asap       DiviML's greedy with the same memory rule
``m-topo``       asap       block packing in topological order, device after device
``m-chain``      asap       a topological order cut into one run per device by a DP over run
                            times and the outputs crossing the cuts
``lns``          asap       large-neighbourhood search: windows around the critical path
                            re-optimised exhaustively, from the best constructive start (seeded)
``milp``         asap       the DiviML MILP (exact; warm-started from the best heuristic)
``split``        asap       MILP-SPLIT: the MILP per module between cut vertices, joined by a
                            chain DP (exact when every module is solved; its DP lower bound)
``quickp``       asap       QuickP: fuse, co-locate on the critical path, solve the reduced IP
                            (P2) on the fused graph, re-score on the original graph (the time
                            limit bounds the IP; fusion and re-scoring come on top)
``quickp-p1``    asap       the same without co-location groups (P1)
``metis``        asap       a Metis-style balanced cut (pymetis, else recursive Kernighan–Lin),
                            heavier parts on faster devices, repaired to fit (seeded)
``mcmc``         asap       MCMC: single-node moves accepted when better (seeded, budgeted)
``brute``        asap       every placement and order (n <= 8; the tests' oracle)
``pcie-greedy``  pieces     the throughput workloads' authors' greedy on the PCIe star
``ip``           pieces     their latency IP on the PCIe star (``q`` slots per accelerator)
``auto``         asap       every constructive heuristic (memory-aware ones, Metis, the
                            MILP's earliest-finish start and, on a PCIe star, the authors'
                            greedy re-scored under asap included),
                            QuickP from all of them where fusion leaves at most a quarter
                            of the nodes, local search, LNS, local search again from the
                            best, then the MILP when the model is small, else EA, LNS and
                            SA in turn until
                            the limit (default 60 s);
                            never worse than any of them; its notes say which method found
                            the answer, the bound's source and each phase's time
===============  =========  ==============================================================

``asap`` and ``pieces`` are the two evaluators (see :mod:`stagecut.latency.model.schedule`): the
first is the general model (transfers are delays on links), the second the PCIe-star model of
the workload files' authors (communication inside the accelerator's busy time); their makespans
are not comparable with each other.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from stagecut._deadline import check_time_limit
from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph
from stagecut.latency.model.devices import Devices
from stagecut.latency.model.evaluate import TOL
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.progress import Progress, reports
from stagecut.validate import check_int, shown

__all__ = ["place", "METHODS", "AUTO_TIME_LIMIT", "problem_of"]

METHODS = ("auto", "best-device", "met", "greedy", "heft", "sa", "ea", "local", "milp", "split", "brute",
           "pcie-greedy", "ip", "quickp", "quickp-p1", "metis", "mcmc", "m-heft", "m-greedy", "m-topo", "m-chain",
           "lns")
#: ``auto``'s time limit when none is given (seconds).
AUTO_TIME_LIMIT = 60.0
#: the constructive heuristics ``auto`` starts from (and the PCIe greedy re-scored under asap)
CONSTRUCTIVE = ("best-device", "met", "greedy", "heft", "m-heft", "m-greedy", "m-topo", "m-chain", "metis")
#: ``auto`` runs the whole MILP only when nodes x devices is at most this
AUTO_MILP_SIZE = 240
#: ``auto`` runs QuickP when fusion leaves at most this fraction of the nodes of a graph of at
#: least ``AUTO_QUICKP_NODES`` nodes, for this share of the time left
AUTO_QUICKP_RATIO, AUTO_QUICKP_NODES, AUTO_QUICKP_SHARE = 0.25, 200, 0.3
#: the share of the time left that ``auto`` gives its bounds (a deadline they look at in their loops)
AUTO_BOUND_SHARE = 0.15


def problem_of(graph: Graph | LatencyProblem, devices: Devices | int | None,
               output_bytes: Mapping[Hashable, float] | str | None = None) -> LatencyProblem:
    """A :class:`LatencyProblem` from what :func:`place` accepts: a problem as is; a graph with
    :class:`Devices`; a graph with an accelerator count or ``None`` (the PCIe star of the file:
    ``maxFPGAs`` accelerators of ``maxSizePerFPGA`` bytes and a CPU pool).

    Raises
    ------
    InvalidArgumentError
        Devices of the wrong type; no accelerator count given or in the file.
    """
    if not isinstance(graph, (Graph, LatencyProblem)):
        raise InvalidArgumentError(f"graph: expected a stagecut Graph or LatencyProblem, got {type(graph).__name__} "
                                   "(read a file with stagecut.read_workload, or build a Graph)")
    if isinstance(graph, LatencyProblem):
        if devices is not None:
            raise InvalidArgumentError("devices: the problem already has its devices (pass None)")
        return graph
    if isinstance(devices, Devices):
        return LatencyProblem(graph, devices, output_bytes)
    if devices is None or isinstance(devices, int) and not isinstance(devices, bool):
        k = None if devices is None else check_int(devices, "devices", minimum=0)
        return LatencyProblem.from_workload(graph, accelerators=k)
    raise InvalidArgumentError(f"devices: expected Devices, an accelerator count or None, got {shown(devices)}")


def _solvers() -> dict[str, Callable[..., Schedule]]:
    from stagecut.latency.diviml import split
    from stagecut.latency.exact import brute, milp
    from stagecut.latency.heuristics import constructive as heuristics
    from stagecut.latency.heuristics import lns, memaware, partition_baselines, search
    from stagecut.latency.pcie import greedy as pcie
    from stagecut.latency.pcie import ip as pcie_ip
    from stagecut.latency.quickp.ip import quickp

    def quickp_p2(problem: LatencyProblem, **kw: Any) -> Schedule:
        return quickp(problem, colocate=True, **kw)

    def quickp_p1(problem: LatencyProblem, **kw: Any) -> Schedule:
        return quickp(problem, colocate=False, **kw)

    return {
        "best-device": heuristics.best_device,
        "met": heuristics.met,
        "greedy": heuristics.greedy,
        "heft": heuristics.heft,
        "sa": search.simulated_annealing,
        "ea": search.evolutionary,
        "local": search.local_search,
        "milp": milp.solve_milp,
        "split": split.solve_split,
        "brute": brute.solve_brute,
        "pcie-greedy": pcie.pcie_greedy,
        "ip": pcie_ip.solve_pcie_ip,
        "quickp": quickp_p2,
        "quickp-p1": quickp_p1,
        "metis": partition_baselines.metis,
        "mcmc": partition_baselines.mcmc,
        "m-heft": memaware.m_heft,
        "m-greedy": memaware.m_greedy,
        "m-topo": memaware.m_topo,
        "m-chain": memaware.m_chain,
        "lns": lns.lns,
    }


@reports
def place(graph: Graph | LatencyProblem, devices: Devices | int | None = None, *, method: str = "auto",
          time_limit: float | None = None, seed: int = 0, solver: str = "cbc", threads: int | None = None,
          output_bytes: Mapping[Hashable, float] | str | None = None, progress: Progress = None,
          **options: Any) -> Schedule:
    """Place one request of ``graph`` on ``devices`` to minimise its makespan.

    Parameters
    ----------
    graph : Graph or LatencyProblem
    devices : Devices, int or None
        The devices; an int is the PCIe star with that many accelerators (and a CPU pool);
        ``None``: the file's ``maxFPGAs``.
    method : str
        One of :data:`METHODS` (see the module docs). Default ``"auto"``.
    time_limit : float, optional
        Seconds for the whole call (``auto``: :data:`AUTO_TIME_LIMIT` when not given); on expiry
        the best schedule so far with status ``"time_limit"`` and its bound.
    seed : int
        Seed of the randomised methods (the same seed gives the same schedule).
    solver : {"cbc", "highs"}
        MIP backend of ``milp``, ``ip``, ``quickp`` and ``quickp-p1``.
    threads : int, optional
        MIP solver threads.
    output_bytes : see :class:`LatencyProblem`.
    progress : bool or callable, optional
        Progress reports (:mod:`stagecut.progress`): a callable receives a
        :class:`~stagecut.progress.ProgressEvent` about four times a second while the core works
        or a MIP solves (an exception it raises stops the call); ``True`` shows a tqdm bar on
        stderr once the call has run 2 s, if stderr is a terminal; ``None`` (default): none.
    **options
        Passed to the method (``q`` for ``ip``, ``max_evaluations`` for ``sa``/``ea``/``local``/
        ``mcmc``, ``order``/``gap``/``alpha`` for ``quickp``/``quickp-p1``, ``backend``/``imbalance``
        for ``metis``).

    Returns
    -------
    Schedule

    Raises
    ------
    InvalidArgumentError
        An unknown method, a bad time limit or seed, bad devices (see :func:`problem_of`).
    InvalidGraphError
        A node no device can run.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([1.0, 2.0, 3.0], cpu_costs=[4.0, 4.0, 4.0], comm=0.5)
    >>> s = sc.place(g, 2, method="heft")
    >>> s.objective, s.status, sorted(set(s.placement.values()))
    (6.0, 'feasible', ['accelerator:0'])
    """
    t0 = time.perf_counter()
    if method not in METHODS:
        raise InvalidArgumentError(f"method: expected one of {', '.join(METHODS)}, got {shown(method)}")
    limit = check_time_limit(time_limit)
    seed = check_int(seed, "seed")
    problem = problem_of(graph, devices, output_bytes)
    reason = problem.fits_anywhere()
    if reason is not None:
        return Schedule.infeasible(method, reason, devices=problem.devices.names,
                                   semantics="pieces" if method in ("ip", "pcie-greedy") else "asap",
                                   runtime_s=time.perf_counter() - t0)
    solvers = _solvers()
    if method != "auto":
        kw = _kwargs(method, limit, seed, solver, threads, options)
        _check_names(method, solvers[method], options)
        return solvers[method](problem, **kw)
    return _auto(problem, solvers, AUTO_TIME_LIMIT if limit is None else limit, seed, solver, threads, t0)


#: the options the QuickP methods and their baselines take (anything else is refused by name)
OPTIONS = {"quickp": ("order", "gap", "alpha"), "quickp-p1": ("order", "gap", "alpha"),
           "metis": ("backend", "imbalance"), "mcmc": ("start", "max_evaluations"),
           "lns": ("start", "max_iterations", "window", "max_window_evaluations")}


def _kwargs(method: str, limit: float | None, seed: int, solver: str, threads: int | None,
            options: Mapping[str, Any]) -> dict[str, Any]:
    kw: dict[str, Any] = dict(options)
    unknown = sorted(set(options) - set(OPTIONS.get(method, options)))
    if unknown:
        raise InvalidArgumentError(f"{unknown[0]}: not an option of {method} (it takes "
                                   f"{', '.join(OPTIONS[method])})")
    if method in ("milp", "ip", "quickp", "quickp-p1", "split"):
        kw.update(time_limit=limit, solver=solver, threads=threads)
    elif method in ("sa", "ea", "local", "mcmc", "lns"):
        kw.update(time_limit=limit, seed=seed)
    elif method == "metis":
        kw.update(seed=seed)
    elif options:
        raise InvalidArgumentError(f"{method}: takes no options, got {', '.join(sorted(options))}")
    return kw


def _check_names(method: str, solve: Callable[..., Schedule], options: Mapping[str, Any]) -> None:
    """Refuse an option ``solve`` has no parameter for (one clear error, never a bare TypeError)."""
    import inspect

    params = inspect.signature(solve).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    takes = [name for name, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY
             and name not in ("time_limit", "seed", "solver", "threads")]
    for name in sorted(options):
        if name not in params:
            raise InvalidArgumentError(f"{name}: not an option of {method} (it takes "
                                       f"{', '.join(takes) or 'no options'})")


def _auto(problem: LatencyProblem, solvers: Mapping[str, Callable[..., Schedule]], limit: float, seed: int,
          solver: str, threads: int | None, t0: float) -> Schedule:
    """Constructive methods, then LNS and local search from the best, then the MILP when the
    model is small; the best schedule, never worse than any of them (see the module docs)."""
    from stagecut._deadline import deadline
    from stagecut.latency.exact.bounds import SMALL as BOUND_SMALL
    from stagecut.latency.exact.bounds import best_bound, memory_binds, path_placement
    from stagecut.latency.exact.brute import colocated
    from stagecut.latency.exact.milp_build import greedy_schedule
    from stagecut.latency.heuristics.memaware import pcie_asap
    from stagecut.latency.model.evaluate import schedule_from

    end = t0 + limit
    phases: list[str] = []
    found: list[Schedule] = []
    bound = problem.lower_bound()
    bound_from = "critical path and sequential work"
    timed_out = False

    def left() -> float:
        return end - time.perf_counter()

    with deadline(limit):
        # 1. constructive methods (each a start for what follows); stop early past 40% of the limit
        t = time.perf_counter()
        # first the MILP's own start (topological order, each node where it finishes first, memory
        # reserved): cheap, and what `milp` returns when its model is too big, so auto never ends above it
        eft = greedy_schedule(problem)
        if eft is not None:
            s4 = schedule_from(problem, eft[0], eft[1], method="earliest-finish")
            if not s4.violations:
                found.append(s4)
        for m in CONSTRUCTIVE:
            if time.perf_counter() - t0 > 0.4 * limit and found:
                phases.append(f"{m}: skipped (time)")
                continue
            s = solvers[m](problem, seed=seed) if m == "metis" else solvers[m](problem)
            found.append(s)
        s2 = pcie_asap(problem)
        if s2 is not None:
            found.append(s2)
        phases.append(f"constructive {time.perf_counter() - t:.3g} s")
        # the bounds that see memory and communication, and the placement behind the memory-path one
        t = time.perf_counter()
        share = max(0.5, AUTO_BOUND_SHARE * left())
        with deadline(share):   # (the bounds look at it in their loops and leave out what they cannot finish)
            lb = best_bound(problem)
        if lb.value > bound:
            bound, bound_from = lb.value, f"the {lb.source} bound"
        witness = path_placement(problem) if len(problem) <= BOUND_SMALL and memory_binds(problem) else None
        if witness is not None:
            s3 = schedule_from(problem, witness, None, method="path-runs")
            if not s3.violations and not any(len({witness[v] for v in c}) > 1 for c in colocated(problem)):
                found.append(s3)
        phases.append(f"bounds {time.perf_counter() - t:.3g} s")
        ok = [s for s in found if s.objective is not None]
        best = min(ok, key=_key, default=None)

        def proven() -> bool:  # the best meets the bound: nothing left to search
            return best is not None and _key(best) <= bound + TOL * max(1.0, bound)

        # QuickP's fused IP where fusion shrinks the graph to a small fraction (operator graphs with
        # many zero-cost operators), from every constructive answer so far
        if best is not None and not proven() and left() > 2.0 and len(problem) >= AUTO_QUICKP_NODES:
            from stagecut.latency.quickp.fusion import fuse

            t = time.perf_counter()
            fused = len(fuse(problem))
            if fused <= AUTO_QUICKP_RATIO * len(problem):
                s = solvers["quickp"](problem, time_limit=left() * AUTO_QUICKP_SHARE, solver=solver, threads=threads,
                                      warm_starts=False, starts=[x for x in found if x.objective is not None])
                found.append(_with(s, method="quickp"))
                best = min([best, found[-1]], key=_key)
                timed_out = timed_out or s.status == "time_limit"
                phases.append(f"quickp {time.perf_counter() - t:.3g} s ({len(problem)} -> {fused} nodes, "
                              f"{s.stats.get('found_by', '-')})")
        # 2. local descent, LNS from its answer, then local descent again (each from the best so far)
        small = len(problem) * problem.num_devices <= AUTO_MILP_SIZE
        for m, share in (("local", 0.2 if small else 0.4), ("lns", 0.6 if small else 0.85),
                         ("local", 0.3 if small else 0.9)):
            if best is None or left() <= 0.05 or proven():
                break
            t = time.perf_counter()
            s = solvers[m](problem, start=best, time_limit=max(1e-3, left() * share), seed=seed)
            found.append(s)
            best = min([best, s], key=_key)
            phases.append(f"{m} {time.perf_counter() - t:.3g} s")
            timed_out = timed_out or s.status == "time_limit"
        # the rest of the time (models too large for the MILP): EA, LNS and SA in turn from the best
        k = 0
        while not small and best is not None and left() > 1.0 and not proven():
            m = ("ea", "lns", "sa")[k % 3]
            t = time.perf_counter()
            s = solvers[m](problem, start=best, time_limit=left() * (0.5 if left() > 4.0 else 0.9), seed=seed + k + 1)
            found.append(s)
            best = min([best, s], key=_key)
            phases.append(f"{m} {time.perf_counter() - t:.3g} s")
            timed_out = True
            k += 1
        # 3. the whole MILP when the model is small enough to help
        if len(problem) * problem.num_devices <= AUTO_MILP_SIZE and left() > 0.2 and not proven():
            t = time.perf_counter()
            exact = solvers["milp"](problem, time_limit=max(0.1, left() - 0.05), solver=solver, threads=threads,
                                    start=best)
            phases.append(f"milp {time.perf_counter() - t:.3g} s ({exact.status})")
            if exact.lower_bound is not None and exact.lower_bound > bound:
                bound, bound_from = exact.lower_bound, "milp"
            if exact.objective is not None:
                found.append(exact)
                if best is None or exact.objective < _key(best) - TOL * max(1.0, _key(best)):
                    best = exact
                elif exact.status == "optimal" and exact.objective <= _key(best) + TOL * max(1.0, _key(best)):
                    best = _with(best, status="optimal")  # the MILP proves the start optimal
                    bound, bound_from = _key(best), "milp (proven optimal)"
            timed_out = timed_out or exact.status == "time_limit"
        elif len(problem) * problem.num_devices > AUTO_MILP_SIZE and not proven():
            phases.append(f"milp skipped ({len(problem)} nodes x {problem.num_devices} devices > "
                          f"{AUTO_MILP_SIZE})")
    if best is None:
        return Schedule.infeasible("auto", "no heuristic found a placement that fits", status="unknown",
                                   devices=problem.devices.names, runtime_s=time.perf_counter() - t0)
    status = best.status
    if status != "optimal" and _key(best) <= bound + TOL * max(1.0, bound):
        status, bound_from = "optimal", f"{bound_from}, which the answer meets: proven optimal"
    if status != "optimal":
        status = "time_limit" if timed_out else "feasible"
    summary = ", ".join(f"{s.method}: {s.objective:.6g}" for s in found if s.objective is not None)
    notes = (*best.notes, f"found by {best.method}", f"lower bound from {bound_from}",
             "phases: " + "; ".join(phases), "methods: " + summary)
    out = _with(best, method=f"auto ({best.method})", runtime_s=time.perf_counter() - t0, status=status,
                lower_bound=max(bound, best.lower_bound or 0.0), notes=notes)
    return _with(out, stats={**out.stats, "found_by": best.method})


def _key(s: Schedule) -> float:
    return s.objective if s.objective is not None else math.inf


def _with(s: Schedule, **changes: Any) -> Schedule:
    import dataclasses

    if "lower_bound" in changes and s.objective is not None and changes["lower_bound"] is not None:
        changes["lower_bound"] = min(changes["lower_bound"], s.objective)
    return dataclasses.replace(s, **changes)
