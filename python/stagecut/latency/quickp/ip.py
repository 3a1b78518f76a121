"""QuickP's reduced IPs (P1, P2) and the QuickP pipeline: fuse, co-locate, solve, map back.

:func:`solve_ip` solves QuickP's IP on a :class:`~stagecut.latency.LatencyProblem` whose edges
may carry their own tensors (``edge_size``: a fused graph's edge ``A -> B`` carries the outputs
of the members of ``A`` read in ``B``, each once). Variables: ``x[k, d]`` binary, unit ``k`` on
device ``d`` (a unit is a node, or a co-location group: *one device variable per group*);
``S[v] >= 0`` the start of node ``v``, ``F[v] = S[v] + sum_d p[v, d] x[unit(v), d]``; ``C`` the
makespan. Rows:

* assignment ``sum_d x[k, d] = 1`` (devices that run every member, hold the unit, and whose time
  is at most the upper bound ``U``); memory ``sum_k mem[k] x[k, d] <= capacity[d]``;
* precedence with the transfer only across devices: for an edge ``u -> v`` and each device ``b``
  of ``v``, ``S[v] >= F[u] + sum_{a != b} w_uv / bw[a, b] x[u, a] - M_b (1 - x[v, b])``
  (``M_b`` the largest such transfer); inside a group no transfer (``S[v] >= F[u]``);
* non-overlap on every device without parallelism, only for the pairs the DAG leaves unordered
  (a path from ``u`` to ``v`` already forces ``S[v] >= F[u]``):

  - ``order="free"`` (the default, the unrestricted model): a binary ``y[u, v]`` per pair and the
    two disjunctive rows per shared device;
  - ``order="topological"`` (QuickP's P1 as published): each device runs its nodes in one
    topological order (the problem's ``order``): ``S[v] >= F[u] - M (2 - x[u, d] - x[v, d])``
    for ``u`` before ``v``, no ``y``. This is a *restriction*: on two identical devices, the
    7-node graph of QuickP's example has optimum 25 and the fixed order gives 27 (tested);

* members of a group run along the topological order (``S[v] >= F[u]`` for ``u`` before ``v``
  in one group, whatever ``order``);
* ``C >= F[v]`` for each sink, ``C <= U`` and ``C >=`` the problem's simple lower bound.

The model is built by :func:`~stagecut.latency.quickp.ip_build.build_ip` and solved here.
Times are divided by :func:`stagecut._mip.reference_scale` of ``U`` (1000 model units). ``U`` is
the makespan of the better of two schedules valid in every variant (everything on the best
single device; a list schedule in topological order honouring the groups), given as a MIP start.
The answer is re-scored by an ASAP evaluator of the same per-edge model (:func:`edge_asap`).

P1 is :func:`solve_ip` on the fused problem; P2 the same with the co-location groups of
:func:`~stagecut.latency.quickp.colocate.colocation_groups`, so P2 >= P1 on one instance (tested).
:func:`quickp` runs the pipeline and re-scores its plan on the *original* graph
(:meth:`Fusion.expand_schedule <stagecut.latency.quickp.fusion.Fusion.expand_schedule>`): its makespan
is at most the IP's, since a fused edge carries at least each tensor that crosses it. HEFT's and
the Metis cut's plans (and the best single device) are its warm starts: each is mapped onto the
fused units (a unit where most of its time runs), list-scheduled (:func:`list_order`) and given
to the solver, and the answer is the best of the IP's plan and the starts on the original graph
(``stats["found_by"]``), so it is never above any of them. One time limit covers the whole
call: the starts, the fusion, the groups, the model's build (which checks the clock and stops),
the solve and the re-scoring.

>>> import stagecut as sc
>>> from stagecut.latency import Devices, LatencyProblem
>>> g = sc.Graph([sc.Node(v, {"gpu": t}, comm=5.0) for v, t in [("s", 1.0), ("a", 3.0), ("b", 3.0), ("t", 2.0)]],
...              [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")])
>>> p = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0), output_bytes="comm")
>>> r = solve_ip(p)
>>> r.makespan, r.status
(9.0, 'optimal')
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import threading
import time
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, Literal

from stagecut._deadline import check_time_limit, deadline, expired, remaining
from stagecut._mip import (
    check_options,
    solve,
    stated_tolerance,
)
from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph
from stagecut.latency.exact.milp_build import _closure_rows as node_closure
from stagecut.latency.model.devices import Devices
from stagecut.latency.model.evaluate import schedule_from
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.latency.quickp.colocate import colocation_groups
from stagecut.latency.quickp.edge_schedules import (
    POLISH_SHARE,
    IPResult,
    Order,
    _canonical,
    _edge_sizes,
    _from_placement,
    _fused_placement,
    _heuristic,
    _per_edge_sizes,
    _polish,
    _Units,
    edge_asap,
    fused_edge_sizes,
    list_order,
)
from stagecut.latency.quickp.fusion import fuse
from stagecut.latency.quickp.ip_build import build_ip
from stagecut.results import Stat
from stagecut.validate import shown

__all__ = ["IPResult", "solve_ip", "edge_asap", "fused_edge_sizes", "list_order", "quickp", "Order",
           "DEFAULT_GAP", "POLISH_SHARE"]


def solve_ip(problem: LatencyProblem, *, edge_size: Mapping[tuple[Hashable, Hashable], float] | None = None,
             groups: Iterable[Iterable[Hashable]] | None = None, order: Order = "free",
             time_limit: float | None = None, solver: str = "cbc", threads: int | None = None,
             gap: float | None = None, starts: Sequence[Sequence[int]] = ()) -> IPResult:
    """QuickP's IP (see the module docs).

    Parameters
    ----------
    problem : LatencyProblem
    edge_size : mapping of (source id, target id) to float, optional
        The tensor on each edge (edges left out carry nothing); default: the producer's size.
    groups : iterable of iterables of node ids, optional
        Co-location groups (P2): one device per group, members along the topological order.
    order : {"free", "topological"}
        Unrestricted per-device orders (default), or each device's fixed to the topological order.
    time_limit : float, optional
        Seconds for the solver.
    solver : {"cbc", "highs"}
    threads : int, optional
    gap : float, optional
        Relative gap (default :func:`stagecut._mip.data_gap` of the times).
    starts : sequence of placements, optional
        Warm starts: a device position per node position each (a unit goes where most of its
        time is); each is list-scheduled (:func:`list_order`), and the best of them and the
        module's own two is the MIP start and the upper bound ``U``.

    The time limit covers the model's build as well: a build that outlives it stops, and the
    best start is returned with status ``"time_limit"`` (``stats["built"]`` = 0).

    Returns
    -------
    IPResult

    Raises
    ------
    InvalidArgumentError
        A bad problem, edge size, group, order or solver option.
    BackendUnavailableError
        ``solver="highs"`` without HiGHS.
    SolverError
        The solver failed.
    """
    if not isinstance(problem, LatencyProblem):
        raise InvalidArgumentError(f"problem: expected a LatencyProblem, got {shown(problem)}")
    if order not in ("free", "topological"):
        raise InvalidArgumentError(f"order: expected 'free' or 'topological', got {shown(order)}")
    check_options(time_limit, gap, threads, 0, solver)
    with deadline(time_limit):
        return _solve_ip(problem, edge_size, groups, order, solver, threads, gap, starts)


class _OutOfTime(Exception):
    """The deadline passed while the model was being built."""


def _check_clock() -> None:
    if expired():
        raise _OutOfTime


def _solve_ip(problem: LatencyProblem, edge_size: Mapping[tuple[Hashable, Hashable], float] | None,
              groups: Iterable[Iterable[Hashable]] | None, order: Order, solver: str, threads: int | None,
              gap: float | None, starts: Sequence[Sequence[int]]) -> IPResult:
    t0 = time.perf_counter()
    w = _edge_sizes(problem, edge_size)
    units = _Units(problem, groups)
    start = _heuristic(problem, units, w)
    for k, placed in enumerate(starts):
        got = _from_placement(problem, units, w, placed, f"starts[{k}]")
        if got is not None and (start is None or got[2] < start[2]):
            start = got
    polish: dict[str, Stat] = {}
    if start is not None:
        polish["start_makespan"] = start[2]
        start = _polish(problem, units, w, start, polish)
    try:
        out = _build_and_solve(problem, units, w, start, order, solver, threads, gap, t0)
        return dataclasses.replace(out, stats={**out.stats, **polish})
    except _OutOfTime:
        if start is None:
            return IPResult(None, None, None, problem.lower_bound(), "time_limit",
                            {"reason": "the time limit ran out while the IP was built", "built": 0})
        return IPResult(start[0], start[1], start[2], min(problem.lower_bound(), start[2]), "time_limit",
                        {"built": 0, "build_s": time.perf_counter() - t0, "upper": float(start[2]),
                         "units": len(units.members), **polish})


def _build_and_solve(problem: LatencyProblem, units: _Units, w: Mapping[tuple[int, int], float],
                     start: tuple[list[int], list[list[int]], float] | None, order: Order, solver: str,
                     threads: int | None, gap: float | None, t0: float) -> IPResult:
    _check_clock()
    related = node_closure(problem)   # the DAG's transitive closure: which pairs need no order row
    _check_clock()
    b = build_ip(problem, units, w, start, order, solver, threads, gap, related, _check_clock)
    if b is None:
        return IPResult(None, None, None, math.inf, "infeasible", {"reason": "a group fits on no device"})
    n, scale, allowed, x, S, classes = len(problem), b.scale, b.allowed, b.x, b.S, b.classes
    hint = None
    if start is not None:
        sdev, sorder = _canonical(classes, units, start[0], start[1])
        st, _ = edge_asap(problem, w, sdev, sorder)
        hint = [(x[k, d], 1.0 if sdev[mm[0]] == d else 0.0) for k, mm in enumerate(units.members)
                for d in allowed[k]]
        hint += [(S[v], min(max(st[v] / scale, float(b.head[v])), float(b.late[v]))) for v in range(n)] + [(b.C, b.U)]
        hint += [(yv_, 1.0 if (st[u], units.rank[u]) < (st[v], units.rank[v]) else 0.0) for (u, v), yv_ in b.y.items()]
        for prev, _cur, z in b.running:
            count = 0.0
            for k, var in enumerate(z):
                hint.append((var, count))
                count += float(b.ok[k, prev] and sdev[units.members[k][0]] == prev)
    build_s = time.perf_counter() - t0
    _check_clock()
    out = solve(b.model, time_limit=remaining(), start=hint)
    stats: dict[str, Stat] = {"mip_vars": out.cols, "mip_constraints": out.rows, "mip_pairs": b.pairs,
                              "units": len(units.members), "build_s": build_s, "solve_s": out.seconds,
                              "mip_status": out.status, "upper": float(b.upper), "built": 1}
    if out.status == "infeasible" or (out.objective is None and start is None):
        none: Literal["infeasible", "time_limit", "unknown"] = \
            "infeasible" if out.status == "infeasible" else "time_limit" if out.status == "time_limit" else "unknown"
        return IPResult(None, None, None, math.inf if none == "infeasible" else problem.lower_bound(), none,
                        {**stats, "reason": "no placement fits in memory" if none == "infeasible"
                         else "the IP found no schedule"})
    best: tuple[float, list[int], list[list[int]]] | None = None
    if out.objective is not None:
        dev = [next(d for d in allowed[units.of[v]] if x[units.of[v], d].x >= 0.5) for v in range(n)]
        seq = _orders(problem, dev, [float(s.x) for s in S], units.rank)
        best = (max(edge_asap(problem, w, dev, seq)[1]), dev, seq)
    if start is not None:
        dev, seq = _canonical(classes, units, start[0], start[1])
        ms = max(edge_asap(problem, w, dev, seq)[1])
        if best is None or ms < best[0]:
            best = (ms, dev, seq)
    assert best is not None
    ms, dev, seq = best
    bound = max(problem.lower_bound(), out.bound * scale) if math.isfinite(out.bound) else problem.lower_bound()
    bound = min(bound, ms)
    optimal = out.status == "optimal" and ms - bound <= stated_tolerance(ms, scale, gap)
    status: Literal["optimal", "feasible", "time_limit"] = \
        "optimal" if optimal else ("time_limit" if out.status == "time_limit" else "feasible")
    return IPResult(dev, seq, ms, bound, status, stats)


def _orders(problem: LatencyProblem, dev: list[int], start: list[float], rank: list[int]) -> list[list[int]]:
    """Per device, its nodes by start time (ties by topological rank), as a linear extension of
    the DAG (Kahn's algorithm taking the earliest start first)."""
    indeg = [len(pp) for pp in problem.pred]
    heap = [(start[v], rank[v], v) for v in range(len(problem)) if not indeg[v]]
    heapq.heapify(heap)
    out: list[list[int]] = [[] for _ in range(problem.num_devices)]
    while heap:
        _, _, v = heapq.heappop(heap)
        out[dev[v]].append(v)
        for s in problem.succ[v]:
            indeg[s] -= 1
            if not indeg[s]:
                heapq.heappush(heap, (start[s], rank[s], s))
    return out


#: QuickP's relative gap: the paper stops its solver at 5%.
DEFAULT_GAP = 0.05


def quickp(source: Graph | LatencyProblem, devices: Devices | None = None, *,
           output_bytes: Mapping[Hashable, float] | str | None = None,
           edge_bytes: Mapping[tuple[Hashable, Hashable], float] | None = None, colocate: bool = True,
           order: Order = "free", time_limit: float | None = None, solver: str = "cbc",
           threads: int | None = None, gap: float | None = DEFAULT_GAP, alpha: float | None = None,
           warm_starts: bool = True, starts: Sequence[Schedule] = ()) -> Schedule:
    """QuickP: fuse (:func:`~stagecut.latency.quickp.fusion.fuse`), co-locate (P2; ``colocate=False``:
    P1), solve :func:`solve_ip` on the fused problem with warm starts from HEFT and the Metis cut,
    and re-score the plan on the original graph.

    The answer is the best, on the original graph, of the IP's plan and its warm starts (the
    best single device, :func:`~stagecut.latency.heuristics.constructive.heft`,
    :func:`~stagecut.latency.heuristics.partition_baselines.metis`): never above any of them;
    ``stats["found_by"]`` names the part that found it (``"ip"``, ``"heft"``, ``"metis"`` or
    ``"best-device"``). The time limit covers everything: the starts, the fusion, the groups,
    the model's build, the solve and the re-scoring (the IP gets what is left, less a reserve
    for the re-scoring).

    Parameters
    ----------
    source : Graph or LatencyProblem
    devices : Devices, optional
        Needed with a graph.
    output_bytes : see :class:`~stagecut.latency.LatencyProblem`.
    edge_bytes : mapping of (source id, target id) to bytes, optional
        QuickP's per-edge transfers (``info["edge_bytes"]`` of
        :func:`~stagecut.latency.quickp.opgraph.read_operator_graph`): every edge carries its own tensor
        across devices, instead of each node's output once per device. The makespan (the
        objective, ``start`` and ``finish``) is then of that model (:func:`edge_asap`), and
        ``stats["per_node_makespan"]`` holds the evaluator's value of the same plan.
    colocate : bool
        P2 (default) or P1.
    order, solver, threads : see :func:`solve_ip`.
    time_limit : float, optional
        Seconds for the whole call.
    gap : float, optional
        The IP's relative gap (default 5%, as in the paper; ``None``: the data's own).
    alpha : float, optional
        The fusion threshold (default: the 90th percentile of the node times).
    warm_starts : bool
        Start from HEFT and Metis (default); ``False``: only the IP's own two starts (and the best
        single device).
    starts : sequence of Schedule, optional
        More warm starts (schedules of this problem, e.g. another method's answers): each is
        mapped onto the fused units like HEFT's, and the answer is never above any of them
        (``stats["found_by"]`` names the start's method).

    Returns
    -------
    Schedule
        On the original graph (``method`` ``"quickp"`` or ``"quickp-p1"``), status ``"feasible"``
        (``"time_limit"`` when the limit stopped the IP or left it no time); no schedule when
        nothing was found: ``"infeasible"`` only when some node fits on no device (an
        infeasible fused IP proves nothing about the original), else ``"unknown"`` or
        ``"time_limit"``; ``stats``: ``found_by``, the fusion's and the IP's
        (``fused_nodes``, ``groups``, ``ip_makespan``: the IP's plan on the original graph,
        ``ip_bound``: the fused IP's bound, not one of the original problem, ``fusion_s``,
        ``ip_s``, ``starts_s``) and each start's makespan (``heft``, ``metis``,
        ``best-device``).

    Raises
    ------
    InvalidArgumentError
        A graph without devices, bad options (see :func:`solve_ip`), a bad time limit or edge size.
    """
    t0 = time.perf_counter()
    limit = check_time_limit(time_limit)
    check_options(None, gap, threads, 0, solver)
    if isinstance(source, LatencyProblem):
        problem = source
    elif devices is None:
        raise InvalidArgumentError("devices: needed with a graph (or pass a LatencyProblem)")
    else:
        problem = LatencyProblem(source, devices, output_bytes)
    if order not in ("free", "topological"):
        raise InvalidArgumentError(f"order: expected 'free' or 'topological', got {shown(order)}")
    w = None if edge_bytes is None else _edge_sizes(problem, edge_bytes)
    given = []
    for k, s in enumerate(starts):
        if not isinstance(s, Schedule):
            raise InvalidArgumentError(f"starts[{k}]: expected a Schedule, got {shown(s)}")
        if s.objective is None:
            continue
        if set(s.placement) != set(problem.ids) or any(d not in problem.devices.names for d in s.placement.values()):
            raise InvalidArgumentError(f"starts[{k}]: not a schedule of this problem's nodes and devices")
        given.append(s)
    with deadline(limit):
        return _quickp(problem, w, colocate, order, limit, solver, threads, gap, alpha, warm_starts, t0, given)


def _quickp(problem: LatencyProblem, w: dict[tuple[int, int], float] | None, colocate: bool, order: Order,
            limit: float | None, solver: str, threads: int | None, gap: float | None, alpha: float | None,
            warm_starts: bool, t0: float, given: Sequence[Schedule] = ()) -> Schedule:
    from stagecut.latency.heuristics.constructive import best_device, heft
    from stagecut.latency.heuristics.partition_baselines import metis

    method = "quickp" if colocate else "quickp-p1"
    stats: dict[str, Stat] = {}
    found: list[tuple[float, str, Schedule]] = []

    def score(s: Schedule) -> float:
        assert s.objective is not None
        if w is None:
            return s.objective
        dev, seq = _positions(problem, s)
        return max(edge_asap(problem, w, dev, seq)[1], default=0.0)

    makers = [("best-device", best_device)] + ([("heft", heft), ("metis", metis)] if warm_starts else [])
    for name, make in makers:
        if found and expired():
            break
        got = make(problem) if not found else _until_deadline(make, problem)
        if got is None:   # the deadline came first: the start is abandoned
            stats["abandoned"] = name
            break
        if got.objective is not None:
            found.append((score(got), name, got))
            stats[name] = found[-1][0]
    for s in given:   # the caller's starts, re-scored here (their own method names them)
        re = schedule_from(problem, *_positions(problem, s), method=s.method)
        if re.objective is not None and not re.violations:
            found.append((score(re), s.method, re))
    stats["starts_s"] = time.perf_counter() - t0
    timed_out = expired()
    ip = None
    if not timed_out:
        t1 = time.perf_counter()
        fusion = fuse(problem, alpha=alpha)
        fp = fusion.problem
        assert fp is not None
        stats.update({k: v for k, v in fusion.stats.items() if isinstance(v, (int, float))})
        stats.update(fused_nodes=len(fusion), fusion_s=fusion.stats["time_s"])
        groups = colocation_groups(fp).groups if colocate else ()
        stats["groups"] = len(groups)
        sizes = fused_edge_sizes(fusion) if w is None else _per_edge_sizes(fusion, w)
        starts = [_fused_placement(fusion, _positions(problem, s)[0]) for _, _, s in found]
        left = remaining()
        # kept back for mapping the plan back and re-scoring it on the original graph
        # (the MIP solver may answer up to 2 s after its own limit: a little is kept back for that too)
        reserve = 0.05 + 2e-5 * (len(problem) + len(problem.graph.edges))
        if left is not None:
            reserve += min(1.0, 0.05 * left)
        if left is None or left > reserve + 0.05:
            stats["ip_limit"] = math.inf if left is None else left - reserve
            r = solve_ip(fp, edge_size=sizes, groups=groups, order=order,
                         time_limit=None if left is None else left - reserve, solver=solver, threads=threads,
                         gap=gap, starts=starts)
            stats.update(r.stats)
            stats["ip_status"] = r.status
            timed_out = r.status == "time_limit"
            if r.dev is not None and r.order is not None and r.makespan is not None:
                names, fid = fp.devices.names, fp.ids
                fused = Schedule(objective=r.makespan, status="feasible", method=method,
                                 placement={fid[v]: names[r.dev[v]] for v in range(len(fp))},
                                 order={names[d]: tuple(fid[v] for v in seq) for d, seq in enumerate(r.order) if seq},
                                 devices=names, stats={})
                if w is None:
                    ip = fusion.expand_schedule(fused)
                else:   # the fused makespan is of the per-edge model: map back, then re-score
                    placement = fusion.expand(fused.placement)
                    assert isinstance(placement, dict)
                    orders = fusion.expand_order(fused.order)
                    assert isinstance(orders, dict)
                    pos = {name: d for d, name in enumerate(names)}
                    ip = schedule_from(problem, [pos[placement[v]] for v in problem.ids],
                                       [[problem.index[v] for v in orders.get(name, ())] for name in names],
                                       method=method, lower_bound=problem.lower_bound())
                found.append((score(ip), "ip", ip))
                stats.update(ip_makespan=found[-1][0], ip_bound=r.bound if r.bound is not None else math.nan)
        else:
            timed_out = True
            stats["ip_status"] = "skipped"
        stats["ip_s"] = time.perf_counter() - t1
    if not found:
        # proven only when some node fits nowhere: an infeasible fused (and grouped) IP proves
        # nothing about the original problem
        proof = problem.fits_anywhere()
        reason = proof if proof is not None else str(stats.get("reason", "no start and no IP plan fits"))
        none: Literal["infeasible", "unknown", "time_limit"] = \
            "infeasible" if proof is not None else "time_limit" if timed_out else "unknown"
        return Schedule.infeasible(method, reason, devices=problem.devices.names,
                                   runtime_s=time.perf_counter() - t0, stats=stats, status=none)
    # the IP's plan wins ties: it is the method's own answer
    best_score, by, best = min(found, key=lambda f: (f[0], f[1] != "ip"))
    stats["found_by"] = by
    notes = [f"found by {'the IP on the fused graph' if by == 'ip' else by + ' (a warm start)'}"]
    notes += [f"{name}: {sc:.6g}" for sc, name, _ in found if name != by]
    status: Literal["feasible", "time_limit"] = "time_limit" if timed_out else "feasible"
    changes: dict[str, Any] = {}
    if w is not None:
        dev, seq = _positions(problem, best)
        st, fin = edge_asap(problem, w, dev, seq)
        ids = problem.ids
        stats["per_node_makespan"] = best.objective if best.objective is not None else math.nan
        changes = dict(objective=best_score, start=dict(zip(ids, st)), finish=dict(zip(ids, fin)), transfers=(),
                       critical_path=(), lower_bound=None)
        notes.append("makespan with a transfer per edge (each edge's own tensor)")
    return dataclasses.replace(best, **changes, method=method, status=status, stats={**best.stats, **stats},
                               notes=(*best.notes, *notes), runtime_s=time.perf_counter() - t0)


def _until_deadline(make: Any, problem: LatencyProblem) -> Schedule | None:
    """``make(problem)`` on a helper thread, waited for until the deadline (in 50 ms steps, so
    that Ctrl-C stops the wait); ``None`` when the deadline comes first: the thread is left to
    end on its own (a daemon; its answer is dropped)."""
    left = remaining()
    if left is None:
        out: Schedule = make(problem)
        return out
    got: dict[str, Any] = {}

    def work() -> None:
        try:
            got["s"] = make(problem)
        except BaseException as exc:  # re-raised on the calling thread
            got["error"] = exc

    worker = threading.Thread(target=work, name="stagecut-quickp-start", daemon=True)
    worker.start()
    while worker.is_alive() and not expired():
        worker.join(0.05)
    if worker.is_alive():
        return None
    if "error" in got:
        raise got["error"]
    s: Schedule = got["s"]
    return s


def _positions(problem: LatencyProblem, s: Schedule) -> tuple[list[int], list[list[int]]]:
    """A schedule's device position per node position and order per device position."""
    names = problem.devices.names
    pos = {name: d for d, name in enumerate(names)}
    dev = [pos[s.placement[v]] for v in problem.ids]
    seq: list[list[int]] = [[] for _ in names]
    for name, nodes in s.order.items():
        seq[pos[name]] = [problem.index[v] for v in nodes]
    return dev, seq
