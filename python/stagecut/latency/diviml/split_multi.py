"""MILP-SPLIT for graphs whose modules are joined by several channels (a heuristic with a sound
lower bound), and the batched form of SPLIT.

**Modules.** With ``c`` parallel channels there is no cut vertex; the modules are the
``(c + 1)``-edge-connected components of the undirected graph
(:func:`networkx.k_edge_components`): two stacked modules joined by ``c`` edges fall apart, a
module's body (more densely wired) stays whole. Components of fewer than
:data:`~stagecut.latency.diviml.modules.MIN_MODULE` nodes (lightly wired nodes) join the
component of a neighbour (a predecessor when there is one), and components that depend on each
other both ways are merged (the strongly connected components of the quotient), which leaves a
DAG of modules; they are taken in a topological order. ``c`` is given, or the one of 2, 3, 4
that gives the most modules. When that leaves one module (sparse modules, as weakly dependent
ones with 4 channels, are not ``(c + 1)``-edge-connected inside), the fallback cuts a
topological order wherever at most ``c`` edges cross, into modules of at least
:data:`~stagecut.latency.diviml.modules.MIN_TOPOLOGICAL` nodes. Graphs of more than
:data:`~stagecut.latency.diviml.modules.MAX_COMPONENT_NODES` nodes use that topological cut
alone (``k_edge_components`` grows too fast: 16-30 s on stacked RWNNs of 280-360 nodes); on
stacked modules joined by ``c`` channels both give the stack's modules. These modules are
computed by :func:`~stagecut.latency.diviml.modules.channel_modules`.

**Sequential solve (a heuristic).** The modules are solved one after the other, each by the
MILP of :mod:`stagecut.latency.diviml.batched` (with ``L = 1`` the latency MILP) on its own nodes, with
the devices and inputs of the modules before it fixed: a batch of ``v`` on ``d`` may start only
when ``d`` has finished the earlier modules' batches and every input from an earlier module has
arrived on ``d`` (release times). Each module minimises its own finish. The joined placement is
re-scored by the evaluator. The result is **not** proven optimal: its status is ``"feasible"``
(or ``"time_limit"``) and a note says that it is a heuristic.

**Lower bound.** With ``P_s = M_1 + ... + M_s`` and ``e_s`` the finish of the last node of
``P_s`` in any schedule:

* ``e_s >= min_{v in M_s} head(v) + LB(M_s)``: the schedule restricted to ``M_s`` is a
  schedule of ``M_s`` alone (other nodes only take devices away), which starts no earlier than
  the least ``head`` (longest path from a source at the fastest times); ``LB(M_s)`` is the
  dual bound of the MILP of ``M_s`` alone (time-limited; its simple bound without one);
* ``e_s >= LB_{s-1} + min_x dep_s(x)``: the last node ``x`` of ``P_{s-1}`` to finish has no
  successor in ``P_{s-1}``, so every path from its successors through ``M_s`` runs after it;
  ``dep_s(x)`` is the longest such path at the fastest times (0 when there is none), the
  minimum over every such candidate ``x``.

``LB_s`` is the larger of the two (and of ``LB_{s-1}``), and the bound is ``LB_Q`` or the
problem's simple bound, whichever is larger. Batched, every time is the node's shortest batch
time. The tests hold it below the MILP's optimum (and brute force) on small multi-channel graphs.

:func:`single_batch` runs a one-device-per-node placement with every node's ``L`` inputs as one batch
(the baselines of the batched table).

**Batched SPLIT** (:func:`solve_split_batched`): for graphs with cut vertices, the chain DP of
:mod:`stagecut.latency.diviml.split` with every cut vertex running all ``L`` inputs as one batch on one
device (a restriction: a heuristic), each module solved by the batched MILP for each (entry,
exit) device pair; its lower bound is the sum over modules of the dual bound of each module
alone, its entry a free zero-time copy (modules cannot overlap in time: every batch after a cut
vertex waits for every batch of it). Without cut vertices the sequential solve above is used.

Examples
--------
>>> from stagecut.latency import LatencyProblem
>>> from stagecut.rwnn import rwnn, rwnn_devices
>>> p = LatencyProblem(rwnn(2, channels=2, size=6, seed=1), rwnn_devices(), output_bytes="comm")
>>> s = solve_split_multi(p, solver="highs")  # (no time limit: the same answer however loaded the machine)
>>> s.status, s.stats["modules"] >= 2, s.lower_bound <= s.objective
('feasible', True, True)
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence

import numpy as np

from stagecut._deadline import deadline, expired
from stagecut._mip import stated_tolerance
from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph, Node
from stagecut.latency._args import check_solver_call
from stagecut.latency.diviml.batched import (
    BatchedSchedule,
    BatchSpec,
    _result,
    batch_spec,
    evaluate_batched,
    simple_bound,
    solve_batched,
)
from stagecut.latency.diviml.modules import channel_modules, cut_vertices, modules_of
from stagecut.latency.exact.bounds import best_bound
from stagecut.latency.model.evaluate import schedule_from
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.results import Stat, Status

__all__ = ["solve_split_multi", "solve_split_batched", "single_batch"]


def single_batch(problem: LatencyProblem, spec: BatchSpec, placement: Sequence[int]) -> np.ndarray:
    """The counts of a one-device-per-node placement: all ``L`` inputs of each node as one batch
    on its device (how the latency heuristics' placements run ``L`` inputs in the tables).

    Parameters
    ----------
    problem : LatencyProblem
    spec : BatchSpec
    placement : sequence of int
        A device per node position.

    Returns
    -------
    numpy.ndarray
        ``(n, devices)`` counts.

    Raises
    ------
    InvalidArgumentError
        A device that does not support a batch of ``L``.

    Examples
    --------
    >>> import stagecut as sc
    >>> from stagecut.latency import Devices
    >>> from stagecut.latency.diviml.batched import batch_spec
    >>> p = LatencyProblem(sc.Graph.chain([1.0, 2.0]), Devices.pcie_star(2, cpu=False))
    >>> single_batch(p, batch_spec(p, 4), [0, 1]).tolist()
    [[4, 0], [0, 4]]
    """
    counts = np.zeros((len(problem), problem.num_devices), dtype=np.int64)
    for v, d in enumerate(placement):
        if spec.inputs not in spec.sizes[d]:
            raise InvalidArgumentError(f"placement: {problem.devices.names[d]} runs no batch of {spec.inputs}")
        counts[v, d] = spec.inputs
    return counts


def _sub_problem(problem: LatencyProblem, members: Sequence[int], zero: int | None = None,
                 pin: dict[int, int] | None = None) -> LatencyProblem:
    """The sub-graph of ``members`` (ids = positions in ``problem``); ``zero``: that node is a
    zero-time, zero-memory node; ``pin``: node -> the only device it may run on."""
    names = problem.devices.names
    inside = set(members)
    nodes = []
    for i in members:
        devs = [d for d in range(problem.num_devices) if math.isfinite(problem.times[i, d])]
        if pin is not None and i in pin:
            devs = [pin[i]]
        comp = {names[d]: 0.0 if i == zero else float(problem.times[i, d]) for d in devs}
        nodes.append(Node(i, comp, 0.0 if i == zero else float(problem.memory[i]), float(problem.size[i])))
    edges = [(a, b) for a in members for b in problem.succ[a] if b in inside]
    return LatencyProblem(Graph(nodes, edges), problem.devices, output_bytes="comm")


def _sub_spec(spec: BatchSpec, members: Sequence[int]) -> BatchSpec:
    return dataclasses.replace(spec, activation=tuple(spec.activation[i] for i in members))


def _quick(problem: LatencyProblem, spec: BatchSpec) -> list[float]:
    return [min((spec.time(problem, v, d, b) for d in range(problem.num_devices)
                 if math.isfinite(problem.times[v, d]) for b in spec.sizes[d]), default=math.inf)
            for v in range(len(problem))]


def _chain_bound(problem: LatencyProblem, spec: BatchSpec, mods: list[list[int]], module_lb: list[float]) -> float:
    """The recursion of the module docs over the modules in order."""
    quick = _quick(problem, spec)
    head = [0.0] * len(problem)
    for v in problem.order:
        head[v] = max((head[u] + quick[u] for u in problem.pred[v]), default=0.0)
    lb = 0.0
    placed: set[int] = set()
    for members, mlb in zip(mods, module_lb):
        inside = set(members)
        dep = {v: 0.0 for v in members}  # longest path from v through the module, v included
        for v in reversed(members):
            dep[v] = quick[v] + max((dep[s] for s in problem.succ[v] if s in inside), default=0.0)
        frontier = [x for x in placed if not any(s in placed for s in problem.succ[x])]
        step = min((max((dep[s] for s in problem.succ[x] if s in inside), default=0.0) for x in frontier),
                   default=0.0)
        lb = max(lb, lb + step, min(head[v] for v in members) + mlb)
        placed |= inside
    return lb


def solve_split_multi(problem: LatencyProblem, inputs: int = 1, *, spec: BatchSpec | None = None,
                      channels: int | None = None, time_limit: float | None = None, solver: str = "cbc",
                      threads: int | None = None, bound_solves: bool = True, start: Schedule | None = None,
                      modules: tuple[int, list[list[int]]] | None = None) -> Schedule | BatchedSchedule:
    """The sequential module solve with its lower bound (see the module docs).

    Parameters
    ----------
    problem : LatencyProblem
    inputs : int
        ``L``: 1 gives a latency :class:`Schedule`, more a :class:`BatchedSchedule` (ignored
        when ``spec`` is given).
    spec : BatchSpec, optional
        The batch model (default :func:`~stagecut.latency.diviml.batched.batch_spec` of ``inputs``).
    channels : int, optional
        See :func:`~stagecut.latency.diviml.modules.channel_modules`.
    time_limit : float, optional
        Seconds in all, shared evenly by the module solves (and the bound solves).
    solver : {"cbc", "highs"}
    threads : int, optional
        Solver threads of each MILP.
    bound_solves : bool
        Solve each module alone for its dual bound (else its simple bound is used).
    start : Schedule, optional
        ``L = 1`` only: a schedule of the whole problem (default: the shortest of
        :func:`~stagecut.latency.heuristics.constructive.best_constructive`); when the sequential solve ends
        above it, the start's placement and order are returned instead (a note says so), so the
        answer is never above the start.
    modules : tuple of (int, list of list of int), optional
        :func:`~stagecut.latency.diviml.modules.channel_modules` of the problem, when already
        computed (``channels`` is then ignored).

    Returns
    -------
    Schedule or BatchedSchedule
        ``method="split"`` (``"split-batched"`` for ``L > 1``), status ``"feasible"`` or
        ``"time_limit"`` (``"optimal"`` when ``L = 1`` and the bound meets the answer),
        ``lower_bound`` the chain bound (or :func:`~stagecut.latency.exact.bounds.best_bound`, when
        larger); ``stats``: ``modules``, ``channels``,
        ``solves``, ``module_s``.

    Raises
    ------
    InvalidArgumentError
        Not a LatencyProblem, bad options.
    SolverError
        A solver failed.
    """
    t0 = time.perf_counter()
    problem = check_solver_call(problem, time_limit=time_limit, solver=solver, threads=threads, start=start,
                                bound_solves=bound_solves)
    with deadline(time_limit):  # every module solve, bound solve and the start: one time limit
        c, mods = modules if modules is not None else channel_modules(problem, channels)
        return _sequential(problem, inputs, spec, c, mods, time_limit, solver, threads, bound_solves, start, t0)


def _sequential(problem: LatencyProblem, inputs: int, spec: BatchSpec | None, c: int, mods: list[list[int]],
                time_limit: float | None, solver: str, threads: int | None, bound_solves: bool,
                start: Schedule | None, t0: float) -> Schedule | BatchedSchedule:
    """:func:`solve_split_multi` once its options are checked and its modules known."""
    sp = spec if spec is not None else batch_spec(problem, inputs)
    n, nd = len(problem), problem.num_devices
    each = None if time_limit is None else max(0.05, time_limit / (len(mods) * (2 if bound_solves else 1)))
    counts = np.zeros((n, nd), dtype=np.int64)
    fin = np.full((n, nd), math.nan)
    free = np.zeros(nd)
    orders: list[list[int]] = [[] for _ in range(nd)]
    module_s, any_limit, lbs = 0.0, False, []
    for members in mods:
        sub = _sub_problem(problem, members)
        release = np.zeros((len(members), nd))
        for k, v in enumerate(members):
            for b in range(nd):
                r = 0.0 if problem.parallel[b] else float(free[b])
                for u in problem.pred[v]:
                    for a in range(nd):
                        if counts[u, a]:
                            r = max(r, fin[u, a] + (problem.transfer(u, a, b) * counts[u, a] if a != b else 0.0))
                release[k, b] = r
        ssp = _sub_spec(sp, members)
        got = solve_batched(sub, spec=ssp, release=release, time_limit=each, solver=solver, threads=threads)
        if got.objective is None:
            return Schedule.infeasible("split", "a module found no schedule (memory)", devices=problem.devices.names,
                                       status="unknown", runtime_s=time.perf_counter() - t0)
        module_s += got.runtime_s
        any_limit |= got.status == "time_limit"
        names = problem.devices.names
        for d, name in enumerate(names):
            for w in got.order.get(name, ()):
                assert isinstance(w, int)
                counts[w, d] = got.batches[w][name]
                fin[w, d] = got.finish[name][w]
                orders[d].append(w)
                free[d] = max(free[d], fin[w, d])
        if bound_solves and not expired():
            alone = solve_batched(sub, spec=ssp, time_limit=each, solver=solver, threads=threads)
            module_s += alone.runtime_s
            lbs.append(alone.lower_bound if alone.lower_bound is not None else simple_bound(sub, ssp))
        else:
            lbs.append(simple_bound(sub, ssp))
    bound = _chain_bound(problem, sp, mods, lbs)
    stats: dict[str, Stat] = {"modules": len(mods), "channels": c, "solves": len(mods) * (1 + int(bound_solves)),
                              "module_s": module_s}
    status: Status = "time_limit" if any_limit else "feasible"
    note = (f"MILP-SPLIT over {len(mods)} modules of a {c}-channel graph, solved one after the other with "
            "fixed predecessors (a heuristic: not proven optimal)")
    if sp.inputs == 1:
        dev = [int(np.argmax(counts[v])) for v in range(n)]
        best = schedule_from(problem, dev, orders, method="split", stats=stats, notes=[note])
        known = best_bound(problem)
        stats["bound_source"] = "module chain" if bound >= known.value else known.source
        bound = max(bound, known.value)
        if best.violations:  # the modules, each with the whole memory, overfill a device: the start
            why = f"the modules' placement breaks a limit: {best.violations[0]}"
            fallback = _no_worse_than(problem, dataclasses.replace(best, objective=math.inf), start, stats, note)
            if fallback.violations or fallback.objective is None or not math.isfinite(fallback.objective):
                return Schedule.infeasible("split", why, devices=problem.devices.names, status="unknown",
                                           runtime_s=time.perf_counter() - t0)
            best = dataclasses.replace(fallback, notes=(*fallback.notes, why))
        assert best.objective is not None
        best = _no_worse_than(problem, best, start, stats, note)
        assert best.objective is not None
        if best.objective - bound <= stated_tolerance(best.objective, 0.0):  # a bound that meets the answer
            status = "optimal"
        return dataclasses.replace(best, status=status, lower_bound=min(bound, best.objective),
                                   runtime_s=time.perf_counter() - t0)
    mk = evaluate_batched(problem, sp, counts, orders)[0]
    return _batched_result(problem, sp, counts, orders, status, max(bound, simple_bound(problem, sp)), mk, stats,
                           note, t0)


def _no_worse_than(problem: LatencyProblem, best: Schedule, start: Schedule | None, stats: dict[str, Stat],
                   note: str) -> Schedule:
    """``best``, or the start re-scored (method ``"split"``) when the start is shorter."""
    if start is None:
        from stagecut.latency.heuristics.constructive import best_constructive

        start = best_constructive(problem)
    if start.objective is None or best.objective is None or start.objective >= best.objective:
        return best
    names = problem.devices.names
    try:
        dev = [names.index(start.placement[v]) for v in problem.ids]
        order = [[problem.index[v] for v in start.order.get(name, ())] for name in names]
        again = schedule_from(problem, dev, order, method="split", stats=stats, notes=[note])
    except (KeyError, ValueError, InvalidArgumentError):
        return dataclasses.replace(best, notes=(*best.notes, "the start is not used: it is not a schedule of "
                                                             "this problem"))
    if again.objective is None or again.objective >= best.objective or again.violations:
        return best
    why = (f"the sequential solve ended at {best.objective:.6g}, above its start's {again.objective:.6g} "
           f"({start.method}): the start is returned") if math.isfinite(best.objective) else \
        f"the start ({start.method}, {again.objective:.6g}) is returned"
    return dataclasses.replace(again, notes=(*again.notes, why))


def _batched_result(problem: LatencyProblem, spec: BatchSpec, counts: np.ndarray, orders: list[list[int]],
                    status: Status, bound: float, mk: float, stats: dict[str, Stat], note: str,
                    t0: float) -> BatchedSchedule:
    r = _result(problem, spec, counts, orders, None, status=status, method="split-batched", stats=stats, notes=(note,))
    return dataclasses.replace(r, lower_bound=min(bound, mk), runtime_s=time.perf_counter() - t0)


def solve_split_batched(problem: LatencyProblem, inputs: int, *, spec: BatchSpec | None = None,
                        time_limit: float | None = None, solver: str = "cbc",
                        threads: int | None = None) -> BatchedSchedule:
    """Batched MILP-SPLIT (see the module docs): the chain DP with each cut vertex's ``L``
    inputs as one batch, or the sequential module solve without cut vertices.

    Parameters
    ----------
    problem : LatencyProblem
    inputs : int
        ``L`` (ignored when ``spec`` is given).
    spec : BatchSpec, optional
        The batch model.
    time_limit : float, optional
        Seconds in all, shared evenly by the module solves.
    solver : {"cbc", "highs"}
    threads : int, optional
        Solver threads.

    Returns
    -------
    BatchedSchedule
        ``method="split-batched"``, status ``"feasible"`` (a heuristic) or ``"time_limit"``,
        ``lower_bound`` as in the module docs.

    Raises
    ------
    InvalidArgumentError
        Not a LatencyProblem, bad options, or no device runs a batch of ``L`` (the cut vertices
        need one).
    SolverError
        A solver failed.
    """
    t0 = time.perf_counter()
    problem = check_solver_call(problem, time_limit=time_limit, solver=solver, threads=threads)
    sp = spec if spec is not None else batch_spec(problem, inputs)
    cuts = cut_vertices(problem)
    if not cuts:
        out = solve_split_multi(problem, spec=sp, time_limit=time_limit, solver=solver, threads=threads)
        assert isinstance(out, BatchedSchedule)
        return out
    L, nd = sp.inputs, problem.num_devices
    ok = [[d for d in range(nd) if math.isfinite(problem.times[c, d]) and L in sp.sizes[d]]
          for c in range(len(problem))]
    if any(not ok[c] for c in cuts):
        raise InvalidArgumentError(f"inputs: no device runs a batch of {L} of a cut vertex")
    mods = modules_of(problem, cuts)
    solves = sum((len(ok[e]) if e is not None else 1) * (len(ok[x]) if x is not None else 1) + 1
                 for e, inner, x in mods if inner)
    each = None if time_limit is None else max(0.05, time_limit / max(1, solves))
    inf = math.inf
    first = mods[0][0]
    chain: dict[int, list[tuple[list[int], BatchedSchedule | None, int]]] = {}
    cur: dict[int, float] = {}
    quick = _quick(problem, sp)
    bound = 0.0
    if first is not None:  # the single source: its own batch time, then the modules
        cur = {d: sp.time(problem, first, d, L) for d in ok[first]}
        chain = {d: [] for d in ok[first]}
        bound = quick[first]
    module_s, any_limit, solved = 0.0, False, 0
    for entry, inner, exit_ in mods:
        outs = ok[exit_] if exit_ is not None else [-1]
        ins = ok[entry] if entry is not None else [-1]
        new = {v: inf for v in outs}
        new_chain: dict[int, list[tuple[list[int], BatchedSchedule | None, int]]] = {}
        members = ([entry] if entry is not None else []) + list(inner) + ([exit_] if exit_ is not None else [])
        if inner:  # the bound: the module alone, its entry a free zero-time copy
            sub = _sub_problem(problem, members, zero=entry)
            alone = solve_batched(sub, spec=_sub_spec(sp, members), time_limit=each, solver=solver, threads=threads)
            module_s += alone.runtime_s
            solved += 1
            bound += alone.lower_bound or 0.0
        elif exit_ is not None:  # a bridge: the exit's batch at least
            bound += quick[exit_]
        for u in ins:
            if u >= 0 and not math.isfinite(cur.get(u, inf)):
                continue
            for v in outs:
                pin = {}
                if entry is not None:
                    pin[entry] = u
                if exit_ is not None:
                    pin[exit_] = v
                if not inner:
                    assert entry is not None and exit_ is not None
                    cost = (problem.transfer(entry, u, v) * L if u != v else 0.0) + sp.time(problem, exit_, v, L)
                    got: BatchedSchedule | None = None
                else:
                    sub = _sub_problem(problem, members, zero=entry, pin=pin)
                    got = solve_batched(sub, spec=_sub_spec(sp, members), time_limit=each, solver=solver,
                                        threads=threads)
                    module_s += got.runtime_s
                    solved += 1
                    any_limit |= got.status == "time_limit"
                    cost = got.objective if got.objective is not None else inf
                total = (cur[u] if u >= 0 else 0.0) + cost
                key = v if v >= 0 else 0
                if total < new.get(v, inf):
                    new[v] = total
                    new_chain[key] = [*(chain.get(u, []) if u >= 0 else []), (members, got, v)]
        cur = {(v if v >= 0 else 0): x for v, x in new.items()}
        chain = new_chain
    end = min(cur, key=lambda d: cur[d])
    if not math.isfinite(cur[end]):
        raise InvalidArgumentError("inputs: no batched module schedule fits (memory)")
    n = len(problem)
    counts = np.zeros((n, nd), dtype=np.int64)
    orders: list[list[int]] = [[] for _ in range(nd)]
    names = problem.devices.names
    placed: set[int] = set()
    for members, got, v in chain[end]:
        before = set(placed)
        if got is None:
            x = members[-1]
            counts[x, v] = L
            orders[v].append(x)
            placed.add(x)
            continue
        for d, name in enumerate(names):
            for w in got.order.get(name, ()):
                assert isinstance(w, int)
                if w in before:
                    continue  # the entry copy: placed by the module before
                counts[w, d] = got.batches[w][name]
                orders[d].append(w)
                placed.add(w)
    for x in range(n):  # the first cut vertex when it has no module before it
        if x not in placed:
            d = int(np.argmin([sp.time(problem, x, d, L) if d in ok[x] else inf for d in range(nd)]))
            counts[x, d] = L
            orders[d].insert(0, x)
    mk = evaluate_batched(problem, sp, counts, orders)[0]
    stats: dict[str, Stat] = {"modules": len(mods), "cut_vertices": len(cuts), "solves": solved, "module_s": module_s}
    note = (f"batched MILP-SPLIT: {len(cuts)} cut vertices, each running its {L} inputs as one batch on one "
            "device (a heuristic: not proven optimal)")
    status: Status = "time_limit" if any_limit else "feasible"
    return _batched_result(problem, sp, counts, orders, status, max(bound, simple_bound(problem, sp)), mk, stats,
                           note, t0)
