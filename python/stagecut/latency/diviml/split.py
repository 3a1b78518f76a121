"""MILP-SPLIT (DiviML): the latency MILP solved module by module along the graph's narrow points.

**Cut vertices** (:func:`~stagecut.latency.diviml.modules.cut_vertices`). A node ``c`` is a *cut
vertex* when every path from a source to a sink passes through it: every other node is an
ancestor or a descendant of ``c`` and no edge joins an ancestor to a descendant (such an edge
would carry data around ``c``). (With a single source and sink these are the articulation points
of the undirected graph that every path crosses, the narrow points of a single-channel chain;
with several sources or sinks no virtual node is needed: the nodes before the first cut vertex
simply form a module without an entry.) In a topological order the cut vertices are the
positions ``p`` that no edge jumps over and such that every node before ``p`` has a successor
and every node after ``p`` a predecessor (found in O(n + m)). They are totally
ordered: ``c_1 < ... < c_k``.

**Modules.** ``M_0`` is the ancestors of ``c_1`` with ``c_1`` as its exit; ``M_i`` the nodes
strictly between ``c_i`` and ``c_{i+1}`` with ``c_i`` as entry and ``c_{i+1}`` as exit;
``M_k`` the descendants of ``c_k`` with ``c_k`` as entry. A cut vertex is shared by two
modules: it is the exit of one, where it is timed and holds its memory, and it is the entry of
the next as a **zero-time, zero-memory copy** pinned to the same device, whose output reaches
the module's nodes with the usual transfer. So each cut vertex is counted once.

**Exactness.** Every ancestor of ``c`` finishes before ``c`` starts and every descendant starts
after it finishes, so no device is shared in time across a cut vertex, and a schedule is exactly
a concatenation of module schedules shifted by the cut vertices' finishes: with ``f_i(v)`` the
least finish of ``c_i`` on device ``v``,

``f_1(v) = OPT(M_0 | exit on v)``, ``f_{i+1}(v) = min_u f_i(u) + OPT(M_i | entry on u, exit on v)``,

and the makespan is ``min_u f_k(u) + OPT(M_k | entry on u)``. This is DiviML's chain DP
``dp(t, u, v) = OPT(M_t | u, v) + min_{u', v'} dp(t-1, u', v') + transfer(v' -> u)`` with the
bridge between two modules' exit and entry folded into a module of its own (two cut vertices
joined by an edge: its cost is the transfer plus the exit's time, computed without a MILP).
Each module is solved by :func:`~stagecut.latency.exact.milp.solve_milp` on a sub-problem whose entry
and exit are pinned by giving them a time on one device only, once per (entry, exit) device
pair. The result is **exact** (status ``"optimal"``) when every module solve is optimal.
Memory capacities and colocation classes couple modules; each module is solved with the full
capacities (a relaxation, so the bound stays sound) and when the combined placement breaks a
limit or splits a class, the whole MILP is solved instead (a note says so). A graph without cut
vertices is solved module by module when its modules are joined by several channels
(:mod:`stagecut.latency.diviml.split_multi`, a heuristic with a sound lower bound), else by the whole
MILP (with a note).

**Lower bound.** The same DP with each module's optimum replaced by its MILP's proven bound
(:attr:`Schedule.lower_bound`) is a lower bound on the optimum (the optimum's own devices give
one path of the DP); ``lower_bound`` is its larger with the problem's simple bound.

Examples
--------
>>> import stagecut as sc
>>> from stagecut.latency import Devices, LatencyProblem
>>> g = sc.Graph([sc.Node(v, {"gpu": t}, comm=2.0) for v, t in [("s", 1.0), ("a", 3.0), ("b", 3.0), ("t", 2.0)]],
...              [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")])
>>> p = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0), output_bytes="comm")
>>> [p.ids[c] for c in cut_vertices(p)]
['s', 't']
>>> s = solve_split(p, threads=1)   # s, a, t on one GPU and b on the other: 1 + (2 + 3 + 2) + 2
>>> s.objective, s.status, round(s.lower_bound, 6), s.stats["modules"]
(8.0, 'optimal', 8.0, 1)
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stagecut._deadline import deadline, expired
from stagecut._mip import stated_tolerance
from stagecut._parallel import parallel_map, parallel_width
from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph, Node
from stagecut.latency._args import check_solver_call
from stagecut.latency.diviml.modules import channel_modules, cut_vertices, modules_of
from stagecut.latency.diviml.split_multi import solve_split_multi
from stagecut.latency.exact.bounds import SMALL, best_bound, memory_binds, path_placement
from stagecut.latency.exact.brute import colocated
from stagecut.latency.exact.milp import solve_milp
from stagecut.latency.model.devices import Devices
from stagecut.latency.model.evaluate import schedule_from
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.results import Stat, Status
from stagecut.validate import check_int

__all__ = ["solve_split"]


@dataclass(frozen=True)
class _Task:
    """One module solve: the sub-graph as plain data (picklable) and the solver options."""

    key: tuple[int, int, int]  # (module, entry device or -1, exit device or -1)
    nodes: tuple[tuple[int, tuple[tuple[str, float], ...], float, float, Any], ...]
    edges: tuple[tuple[int, int], ...]
    devices: Devices
    time_limit: float | None
    solver: str
    threads: int | None
    start: tuple[tuple[int, ...], ...] | None = None  # per device: the start's order of this module's nodes
    deadline: float | None = None  # time.time() by which every module solve ends


def _task(problem: LatencyProblem, key: tuple[int, int, int], entry: int | None, inner: Sequence[int],
          exit_: int | None, time_limit: float | None, solver: str, threads: int | None) -> _Task:
    names = problem.devices.names
    _, u, v = key
    members = ([entry] if entry is not None else []) + list(inner) + ([exit_] if exit_ is not None else [])
    inside = set(members)
    nodes = []
    for i in members:
        node = problem.graph.nodes[i]
        if i == entry:  # the zero-time, zero-memory copy of the previous module's exit
            comp: tuple[tuple[str, float], ...] = ((names[u], 0.0),)
            mem = 0.0
        elif i == exit_:
            comp, mem = ((names[v], float(problem.times[i, v])),), float(problem.memory[i])
        else:
            comp = tuple((names[d], float(t)) for d, t in enumerate(problem.times[i]) if math.isfinite(t))
            mem = float(problem.memory[i])
        nodes.append((i, comp, mem, float(problem.size[i]), node.colocation if i != entry else None))
    edges = tuple((a, b) for a in members for b in problem.succ[a] if b in inside)
    return _Task(key, tuple(nodes), edges, problem.devices, time_limit, solver, threads)


def _solve_task(task: _Task) -> tuple[tuple[int, int, int], Schedule, float]:
    """Solve one module (in a worker process or here): its schedule and the tolerance its status
    was stated with."""
    late = (task.deadline is not None and time.time() >= task.deadline) or expired()
    if late and task.start is None:  # past the deadline: no model, no schedule, a bound of 0
        return task.key, Schedule.infeasible("milp", "the time limit passed before this module was solved",
                                             devices=task.devices.names, status="time_limit", lower_bound=0.0), 0.0
    graph = Graph([Node(i, dict(comp), mem, size, colocation=col) for i, comp, mem, size, col in task.nodes],
                  task.edges)
    sub = LatencyProblem(graph, task.devices, output_bytes="comm")
    begin = None
    if task.start is not None:  # the whole start's schedule of this module, in its device order
        order = [[sub.index[i] for i in seq] for seq in task.start]
        dev = [0] * len(sub)
        for d, seq in enumerate(order):
            for k in seq:
                dev[k] = d
        try:
            begin = schedule_from(sub, dev, order, method="start")
        except InvalidArgumentError:  # an order against the DAG (a start of other semantics): its placement
            begin = schedule_from(sub, dev, None, method="start")
    if late and begin is not None:  # past the deadline: the start's own schedule of the module, re-scored
        return task.key, dataclasses.replace(begin, method="milp", status="time_limit",
                                             lower_bound=min(sub.lower_bound(), begin.objective or 0.0)), 0.0
    limit = task.time_limit
    if task.deadline is not None and limit is not None:  # the module's share, never past the deadline
        limit = min(limit, max(1e-3, task.deadline - time.time()))
    s = solve_milp(sub, time_limit=limit, solver=task.solver, threads=task.threads, start=begin)
    scale = float(s.stats.get("mip_scale") or 0.0)
    tol = stated_tolerance(s.objective, scale) if s.objective is not None else 0.0
    return task.key, s, tol


def solve_split(problem: LatencyProblem, *, time_limit: float | None = None, solver: str = "cbc",
                threads: int | None = None, workers: int | None = None, start: Schedule | None = None) -> Schedule:
    """MILP-SPLIT: solve each module between cut vertices for every pair of entry and exit
    devices, join them by the chain DP (see the module docs).

    Parameters
    ----------
    problem : LatencyProblem
    time_limit : float, optional
        Seconds in all: each module solve gets ``time_limit * workers / solves`` (at least
        0.05 s) and none runs past the limit (once it has passed, a module's answer is its warm
        start, with the simple bound); the fallback whole MILP gets what is left. A module solve stopped by its limit
        enters the DP with its best schedule (or none) and its bound in the lower bound.
    solver : {"cbc", "highs"}
    threads : int, optional
        Solver threads of each MILP (default 1).
    workers : int, optional
        Module solves at once, through :func:`stagecut._parallel.parallel_map`: ``1`` in this
        process; more: on the active Dask client when there is one, else a pool of that many
        spawned processes; default: the active Dask client's workers, else in this process.
    start : Schedule, optional
        A schedule of the whole problem (e.g. the best heuristic's; default: the shortest of
        :func:`~stagecut.latency.heuristics.constructive.best_constructive`, built cheapest first
        within the time limit: the ones done when it passes, at least one). Each module solve whose
        (entry, exit) devices are the start's starts from the start's schedule of that module, so
        the chain DP can always rebuild the start: SPLIT's makespan is at most the start's, even
        when the module solves stop at their limits. A start with a different device list or
        missing nodes is not used (a note says so).

    Returns
    -------
    Schedule
        ``method="split"``, re-scored by :func:`~stagecut.latency.model.evaluate.schedule_from`;
        ``status`` ``"optimal"`` when every module solve is optimal (or the bound meets the
        answer), else ``"feasible"`` or ``"time_limit"``; ``lower_bound`` the DP over the
        modules' bounds (see the module docs); ``stats``: ``modules``, ``cut_vertices``, ``solves`` (module MILPs),
        ``module_s`` (their summed solve time), ``dp_value`` and ``dp_bound``. Without cut
        vertices but with modules joined by several channels
        (:func:`~stagecut.latency.diviml.modules.channel_modules`), the sequential module solve of
        :func:`~stagecut.latency.diviml.split_multi.solve_split_multi` (a heuristic, status
        ``"feasible"``, with its chain lower bound). Without either, or when the modules'
        placement breaks a memory limit or a colocation class, the whole MILP's answer (its
        method renamed, a note saying why).

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a LatencyProblem, a bad solver option or worker count.
    BackendUnavailableError
        ``solver="highs"`` without HiGHS installed.
    SolverError
        A solver failed.
    """
    t0 = time.perf_counter()
    problem = check_solver_call(problem, time_limit=time_limit, solver=solver, threads=threads, start=start)
    if workers is not None:
        check_int(workers, "workers", minimum=1)
    nw = parallel_width(workers)
    names = problem.devices.names
    why = problem.fits_anywhere()
    if why is not None:
        return Schedule.infeasible("split", why, devices=names, runtime_s=time.perf_counter() - t0)
    with deadline(time_limit):  # the start, the module solves and the fallback: one time limit
        if start is None:
            from stagecut.latency.heuristics.search import START_SHARE, start_within

            def late() -> bool:  # (no start begun past START_SHARE of the limit: the last one must end in time)
                return expired() or (time_limit is not None and time.perf_counter() - t0 >= START_SHARE * time_limit)

            # (the plain constructive heuristics, cheapest first, until the time limit: at least one)
            start = start_within(problem, late, plain_only=True)
            runs = path_placement(problem) if len(problem) <= SMALL and memory_binds(problem) else None
            if runs is not None:  # the memory-path bound's runs, when shorter
                other = schedule_from(problem, runs, None, method="path-runs")
                if not other.violations and other.objective is not None and \
                        (start.objective is None or other.objective < start.objective):
                    start = other
        return _split(problem, time_limit, solver, threads, workers, nw, start, t0)


def _split(problem: LatencyProblem, time_limit: float | None, solver: str, threads: int | None,
           workers: int | None, nw: int, start: Schedule, t0: float) -> Schedule:
    """:func:`solve_split` once its arguments are checked and its start is known."""
    cuts = cut_vertices(problem)
    if not cuts:
        found = channel_modules(problem)
        if len(found[1]) >= 2:  # modules joined by several channels: the heuristic
            left = None if time_limit is None else max(0.05, time_limit - (time.perf_counter() - t0))
            out = solve_split_multi(problem, time_limit=left, solver=solver, threads=threads, start=start,
                                    modules=found)
            assert isinstance(out, Schedule)
            return out
        return _whole(problem, "the graph has no cut vertex (no narrow point): the whole MILP is solved",
                      time_limit, solver, threads, t0, None, start)
    mods = modules_of(problem, cuts)
    nd = problem.num_devices
    ok = [[d for d in range(nd) if math.isfinite(problem.times[c, d])] for c in range(len(problem))]
    notes: list[str] = []
    begin = _start_orders(problem, start, notes)
    tasks: list[_Task] = []
    for t, (entry, inner, exit_) in enumerate(mods):
        if not inner:
            continue  # an edge between two cut vertices: no MILP (see _cost)
        for u in ok[entry] if entry is not None else [-1]:
            for v in ok[exit_] if exit_ is not None else [-1]:
                task = _task(problem, (t, u, v), entry, inner, exit_, None, solver, threads)
                if begin is not None and (entry is None or begin[1][entry] == u) and \
                        (exit_ is None or begin[1][exit_] == v):
                    members = {i for i, *_ in task.nodes}
                    task = dataclasses.replace(task, start=tuple(tuple(i for i in seq if i in members)
                                                                 for seq in begin[0]))
                tasks.append(task)
    if time_limit is not None and tasks:
        each = max(0.05, time_limit * nw / len(tasks))
        stop_at = time.time() + time_limit - (time.perf_counter() - t0)
        tasks = [dataclasses.replace(k, time_limit=each, deadline=stop_at) for k in tasks]
    solved = parallel_map(_solve_task, tasks, workers=workers if len(tasks) > 1 else 1)
    sub = {key: (s, tol) for key, s, tol in solved}
    out = _combine(problem, mods, ok, sub, cuts, time_limit, solver, threads, t0, start)
    return dataclasses.replace(out, notes=(*out.notes, *notes)) if notes else out


def _start_orders(problem: LatencyProblem, start: Schedule | None,
                  notes: list[str]) -> tuple[list[list[int]], list[int]] | None:
    """The start's per-device order (positions) and device of every node, or None (with a note
    when a given start cannot be used)."""
    if start is None or start.objective is None:
        return None
    names = problem.devices.names
    where = {name: d for d, name in enumerate(names)}
    order: list[list[int]] = [[] for _ in names]
    dev = [-1] * len(problem)
    for name, seq in start.order.items():
        if name not in where:
            notes.append(f"the start is not used: its device {name!r} is not one of this problem's")
            return None
        for v in seq:
            i = problem.index.get(v)
            if i is None or dev[i] >= 0:
                notes.append(f"the start is not used: node {v!r} is not in the problem or listed twice")
                return None
            dev[i] = where[name]
            order[where[name]].append(i)
    if min(dev, default=0) < 0:
        notes.append("the start is not used: it does not place every node")
        return None
    return order, dev


def _cost(problem: LatencyProblem, entry: int, exit_: int, u: int, v: int) -> float:
    """An edge between two cut vertices: the entry's output crosses to the exit's device, then
    the exit runs."""
    return problem.transfer(entry, u, v) + float(problem.times[exit_, v])


def _combine(problem: LatencyProblem, mods: list[tuple[int | None, list[int], int | None]], ok: list[list[int]],
             sub: dict[tuple[int, int, int], tuple[Schedule, float]], cuts: list[int], time_limit: float | None,
             solver: str, threads: int | None, t0: float, start: Schedule | None = None) -> Schedule:
    """The chain DP over the module solves (values and bounds), the placement it picks, re-scored."""
    nd = problem.num_devices
    names = problem.devices.names
    inf = math.inf
    # state: the device of the last cut vertex; value, bound and back-pointer per device
    first = mods[0][0]
    val = [inf] * nd
    bnd = [inf] * nd
    if first is not None:  # the first module starts at a cut vertex (the single source)
        for d in ok[first]:
            val[d] = bnd[d] = float(problem.times[first, d])
    back: list[list[int]] = []
    solves = 0
    module_s = 0.0
    all_optimal = True
    tol_sum = 0.0
    any_limit = False
    for t, (entry, inner, exit_) in enumerate(mods):
        outs = ok[exit_] if exit_ is not None else [0]
        new_val, new_bnd, ptr = [inf] * nd, [inf] * nd, [-1] * nd
        for v in outs:
            for u in ok[entry] if entry is not None else [-1]:
                prev_v = val[u] if u >= 0 else 0.0
                prev_b = bnd[u] if u >= 0 else 0.0
                if not inner:
                    assert entry is not None and exit_ is not None
                    c = _cost(problem, entry, exit_, u, v)
                    cv, cb = c, c
                else:
                    s, _ = sub[t, u, v if exit_ is not None else -1]
                    cv = s.objective if s.objective is not None else inf
                    cb = s.lower_bound if s.lower_bound is not None else 0.0
                    if s.status == "infeasible":
                        cb = inf
                if prev_v + cv < new_val[v]:
                    new_val[v], ptr[v] = prev_v + cv, u
                new_bnd[v] = min(new_bnd[v], prev_b + cb)
        val, bnd = new_val, new_bnd
        back.append(ptr)
    for s, _ in sub.values():
        solves += 1
        module_s += float(s.runtime_s)
        all_optimal &= s.status == "optimal"
        any_limit |= s.status == "time_limit"
    dp_bound = min(bnd)
    dp_value = min(val)
    stats: dict[str, Stat] = {"modules": len(mods), "cut_vertices": len(cuts), "solves": solves,
                              "module_s": module_s, "dp_value": dp_value, "dp_bound": dp_bound}
    known = best_bound(problem)
    bound = max(dp_bound, known.value)
    stats["bound_source"] = "module DP" if dp_bound >= known.value else known.source
    if not math.isfinite(dp_value):
        status: Status = "time_limit" if any_limit else "infeasible"
        if status == "infeasible":
            return _whole(problem, "no module placement fits: the whole MILP is solved", time_limit, solver,
                          threads, t0, dp_bound, start)
        return Schedule.infeasible("split", "a module found no schedule within its time limit",
                                   devices=names, status="time_limit", lower_bound=bound, stats=stats,
                                   runtime_s=time.perf_counter() - t0)
    # reconstruct: the device of each cut vertex, then each module's own schedule
    dev = [-1] * len(problem)
    order: list[list[int]] = [[] for _ in range(nd)]
    v = int(np.argmin(val)) if mods[-1][2] is not None else 0
    picks: list[tuple[int, int]] = []
    for t in range(len(mods) - 1, -1, -1):
        u = back[t][v]
        picks.append((u, v))
        v = u
    picks.reverse()
    if first is not None:
        dev[first] = picks[0][0]
        order[dev[first]].append(first)
    for t, ((entry, inner, exit_), (u, v)) in enumerate(zip(mods, picks)):
        if not inner:
            assert exit_ is not None
            dev[exit_] = v
            order[v].append(exit_)
            continue
        s, tol_t = sub[t, u, v if exit_ is not None else -1]
        tol_sum += tol_t
        for d, name in enumerate(names):
            for node in s.order.get(name, ()):
                i = node if isinstance(node, int) else -1  # the sub-graphs use positions as ids
                if i != entry:
                    dev[i] = d
                    order[d].append(i)
    notes = [f"MILP-SPLIT: {len(cuts)} cut vertices, {len(mods)} modules, {solves} module MILPs"]
    best = schedule_from(problem, dev, order, method="split", stats=stats, notes=notes)
    assert best.objective is not None
    broken = best.violations or [c for c in colocated(problem) if len({dev[v] for v in c}) > 1]
    if broken:
        return _whole(problem, "the modules' placement breaks a memory limit or splits a colocation class: "
                      "the whole MILP is solved", time_limit, solver, threads, t0, dp_bound, start)
    status = "time_limit" if any_limit else "feasible"
    if all_optimal and best.objective - bound <= tol_sum + stated_tolerance(best.objective, 0.0):
        status = "optimal"
    elif best.objective - bound <= stated_tolerance(best.objective, 0.0):  # a bound that meets the answer
        status = "optimal"
    return dataclasses.replace(best, status=status, lower_bound=min(bound, best.objective),
                               runtime_s=time.perf_counter() - t0)


def _whole(problem: LatencyProblem, why: str, time_limit: float | None, solver: str, threads: int | None,
           t0: float, bound: float | None, start: Schedule | None = None) -> Schedule:
    """The whole MILP's answer as SPLIT's (from ``start``: never above it), with a note; ``bound``
    (the DP's) kept when larger."""
    left = None if time_limit is None else max(0.05, time_limit - (time.perf_counter() - t0))
    usable = start is not None and start.objective is not None and set(start.placement) == set(problem.ids) \
        and set(start.placement.values()) <= set(problem.devices.names)
    s = solve_milp(problem, time_limit=left, solver=solver, threads=threads, start=start if usable else None)
    lb = s.lower_bound
    if bound is not None and math.isfinite(bound):
        lb = bound if lb is None else max(lb, bound)
        if s.objective is not None:
            lb = min(lb, s.objective)
    return dataclasses.replace(s, method="split", notes=(*s.notes, why), lower_bound=lb,
                               runtime_s=time.perf_counter() - t0)
