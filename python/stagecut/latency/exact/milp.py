"""The DiviML MILP for one request: the exact minimum makespan on heterogeneous devices.

Variables (times in model units, see below): ``x[v, d]`` binary, node ``v`` runs on device
``d`` (only where it can run and fits, and its time there is at most the upper bound ``U``);
``S[v] >= 0`` the start of ``v`` (one per node: ``F[v] = S[v] + sum_d p[v, d] x[v, d]`` is its
finish); ``y[u, v]`` binary, ``u`` before ``v``, for the pairs below; ``C`` the makespan.

* Assignment: ``sum_d x[v, d] = 1``. Memory: ``sum_v mem[v] x[v, d] <= capacity[d]`` (each
  row divided by the capacity). Colocation: the nodes of a colocation class
  (:attr:`stagecut.Node.colocation`) have equal ``x`` rows, on the devices that can run and
  hold them all.
* Precedence with the transfer only across devices, for each edge ``u -> v`` and each device
  ``b`` of ``v``: ``S[v] >= F[u] + sum_{a != b} tr(u, a, b) x[u, a] - M_ub (1 - x[v, b])``
  with ``M_ub = max_{a != b} tr(u, a, b)``: when ``v`` is on ``b`` this is the arrival of
  ``u``'s output on ``b``; otherwise it is at most ``S[v] >= F[u]``, which the row of ``v``'s
  own device implies. No time horizon enters these rows. (Zero transfers: ``S[v] >= F[u]``.)
* Non-overlap on each device without parallelism, only for the pairs ``u, v`` that the DAG
  leaves unordered (neither reaches the other: ordered pairs never overlap, since a path
  from ``u`` to ``v`` forces ``S[v] >= F[u]``), and only on the devices both can use:
  ``S[v] >= S[u] + p[u, d] - M (3 - y[u, v] - x[u, d] - x[v, d])`` and the mirror row with
  ``y[u, v]`` for ``1 - y[u, v]``. The big-M is ``M = U - tail(u) + p[u, d] - head(v)`` (at
  least 0), where ``U`` is an upper bound on the optimum (the makespan of the warm start,
  times ``1 + 1e-6``), ``tail(u)`` the longest path from ``u`` to a sink and ``head(v)`` the
  longest path into ``v`` at the fastest times without transfers: every solution with
  ``C <= U`` has ``S[u] <= U - tail(u)`` and ``S[v] >= head(v)``, so the row is void when
  not active. ``C <= U`` is a constraint (and ``S`` is bounded by it); the optimum, which is at
  most ``U``, is kept.
* Makespan: ``C >= F[v] + tail(v) - fastest(v)`` for every node (its finish plus the longest
  path after it: ``C >= F[v]`` for a sink); ``C >= `` the busy time of each device without
  parallelism; ``C >= `` :meth:`~stagecut.latency.LatencyProblem.lower_bound` (valid cuts).
* Symmetry: devices that swap without changing the problem (:func:`~stagecut.latency.exact.brute.symmetry_groups`:
  same times, capacity, parallelism and bandwidths up to the swap) form groups ``g1 < g2 < ...``; node ``v``
  may use ``g_j`` only if a node before it in topological order is on ``g_{j-1}`` (``x[v, g_j] <= sum_{u
  before v} x[u, g_{j-1}]``): the group's devices are used in the order of their first nodes, which a
  relabelling gives every schedule (the warm start is relabelled so).

**Scaling.** Times are divided by :func:`stagecut._mip.reference_scale` of ``U`` (``U`` is
1000 model units), so the solvers' absolute tolerances are small next to the answer whatever
the time unit; a node time above ``U`` removes that device for the node and a transfer above
``2U`` is capped there (no schedule of makespan at most ``U`` changes, so the optimum and the
bounds are exact). The default gap is :func:`stagecut._mip.data_gap`.

**Re-scoring.** The MILP's placement and per-device orders (its ``y`` where it has one, its start times
otherwise; any linear extension of the DAG) are timed by :func:`~stagecut.latency.model.evaluate.schedule_from`;
the better of that schedule and the warm start is returned. ``"optimal"`` only when the evaluator's makespan
and the proven bound agree within :func:`stagecut._mip.stated_tolerance`; the lower bound is the larger of
the MILP's dual bound (never its primal value) and the problem's simple bound. When the time limit passes
while the model is being built (large graphs), the warm start is returned with the simple bound.

Examples
--------
>>> import stagecut as sc
>>> from stagecut.latency import Devices, LatencyProblem
>>> g = sc.Graph([sc.Node(v, {"gpu": t}, comm=5.0) for v, t in [("s", 1.0), ("a", 3.0), ("b", 3.0), ("t", 2.0)]],
...              [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")])
>>> p = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0), output_bytes="comm")
>>> s = solve_milp(p)
>>> s.objective, s.status, s.lower_bound   # 1 + min(2 * 3, 3 + 5) + 2: both branches on one device
(9.0, 'optimal', 9.0)
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from stagecut._deadline import deadline, expired, remaining
from stagecut._mip import (
    MODEL_TOL,
    MipOutcome,
    data_gap,
    import_mip,
    new_model,
    reference_scale,
    solve,
    stated_tolerance,
)
from stagecut.errors import InvalidArgumentError
from stagecut.latency._args import check_solver_call
from stagecut.latency.exact.bounds import SMALL, LatencyBound, best_bound, memory_binds, path_placement
from stagecut.latency.exact.brute import colocated, symmetry_groups
from stagecut.latency.exact.milp_build import (
    RowSink,
    _BuildExpired,
    _canonical,
    _class_fits_nowhere,
    _closure_rows,
    _from_start,
    _Model,
    _trivial_upper,
    greedy_schedule,
    transfer_table,
    transitive_closure,
)
from stagecut.latency.model.evaluate import TOL, schedule_from
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.results import Stat, Status
from stagecut.validate import shown

__all__ = ["solve_milp", "greedy_schedule", "transfer_table", "transitive_closure", "RowSink"]


def _build(problem: LatencyProblem, upper: float, *, solver: str, gap: float | None, threads: int | None,
           seed: int, verbose: bool, bound: float) -> _Model:
    """The MILP in model units of ``reference_scale`` of ``upper`` (see the module docs), its rows
    gathered as arrays and added in bulk (:class:`RowSink`); the deadline is checked between steps."""
    mip = import_mip()
    n, nd = len(problem), problem.num_devices
    scale = reference_scale([upper], upper)
    U = upper / scale * (1 + 1e-6) + MODEL_TOL
    times = problem.times / scale
    ok = np.isfinite(times) & (times <= U) & (problem.memory[:, None] <= problem.capacity[None, :])
    classes = colocated(problem)
    for members in classes:
        both = ok[members].all(axis=0) & (problem.memory[members].sum() <= problem.capacity)
        ok[members] = both
    allowed = [np.flatnonzero(ok[v]).tolist() for v in range(n)]
    tr = transfer_table(problem, scale, 2 * U)
    if expired():
        raise _BuildExpired
    values = times[ok].tolist() + tr[tr > 0].tolist()
    if gap is None:
        gap = data_gap(values, 1.0)  # (values in model units)
    m = new_model("latency_milp", solver=solver, gap=gap, threads=threads, seed=seed, verbose=verbose)
    if str(solver).lower() == "cbc":
        # CBC's preprocessing: off. Stopped by a time limit, its post-processing crashed the process
        # (SIGSEGV in CglPreProcess::postProcess, about 1 run in 15 of a 12-node model at 0.5 s),
        # and these models solve no slower without it.
        m.preprocess = 0
    h = _Model(model=m, scale=scale, gap=gap, upper=U, groups=symmetry_groups(problem))
    p = np.where(ok, times, 0.0)
    fastest = np.where(ok, times, math.inf).min(axis=1)
    head, tail = np.zeros(n), np.zeros(n)
    for v in problem.order:
        head[v] = max((head[u] + fastest[u] for u in problem.pred[v]), default=0.0)
    for v in reversed(problem.order):
        tail[v] = fastest[v] + max((tail[s] for s in problem.succ[v]), default=0.0)
    late = np.maximum(head, U - tail)  # the latest start of each node
    # variables: x (binary, where allowed), S (one per node), C
    xv = m.vars.add_vars(int(ok.sum()), name="x", var_type=mip.BINARY)
    X = np.full((n, nd), -1, dtype=np.int64)
    X[ok] = [var.idx for var in xv]
    for (v, d), var in zip(np.argwhere(ok).tolist(), xv):
        h.x[v, d] = var
    h.S = m.vars.add_vars(n, name="S")
    for v, var in enumerate(h.S):
        var.lb, var.ub = float(head[v]), float(late[v])
    Sx = np.array([var.idx for var in h.S], dtype=np.int64)
    h.C = m.add_var("C", lb=min(U, bound / scale * (1 - 1e-9)), ub=U)
    m.objective = mip.minimize(h.C)
    Cx = h.C.idx
    rows = RowSink()
    for v in range(n):
        rows.add(X[v, allowed[v]].tolist(), [1.0] * len(allowed[v]), "=", 1.0)
        # makespan: the finish plus the longest path after it
        rows.add([Cx, int(Sx[v])] + X[v, allowed[v]].tolist(), [1.0, -1.0] + (-p[v, allowed[v]]).tolist(), ">",
                 float(tail[v] - fastest[v]))
    for members in classes:
        for v in members[1:]:
            for d in allowed[v]:
                rows.add([int(X[v, d]), int(X[members[0], d])], [1.0, -1.0], "=", 0.0)
    for d in range(nd):
        on = np.flatnonzero(ok[:, d])
        if not problem.parallel[d] and len(on):  # each device's busy time
            rows.add([Cx] + X[on, d].tolist(), [1.0] + (-p[on, d]).tolist(), ">", 0.0)
        if math.isfinite(problem.capacity[d]) and problem.memory[on].sum() > problem.capacity[d]:
            keep = on[problem.memory[on] > 0]
            rows.add(X[keep, d].tolist(), (problem.memory[keep] / float(problem.capacity[d])).tolist(), "<", 1.0)
    if expired():
        raise _BuildExpired
    # precedence, the transfer only across devices: S[v] >= F[u] + arrive(b) - M_ub (1 - x[v, b])
    for v in range(n):
        for u in problem.pred[v]:
            au = allowed[u]
            big = [max((float(tr[u, a, b]) for a in au if a != b), default=0.0) for b in allowed[v]]
            if max(big, default=0.0) <= 0:
                rows.add([int(Sx[v]), int(Sx[u])] + X[u, au].tolist(), [1.0, -1.0] + (-p[u, au]).tolist(), ">", 0.0)
                continue
            for b, mb in zip(allowed[v], big):
                coef = [-(float(p[u, a]) + (float(tr[u, a, b]) if a != b else 0.0)) for a in au]
                rows.add([int(Sx[v]), int(Sx[u]), int(X[v, b])] + X[u, au].tolist(), [1.0, -1.0, -mb] + coef, ">",
                         -mb)
        if v % 64 == 0 and expired():
            raise _BuildExpired
    _pair_rows(problem, h, rows, ok, X, Sx, p, head, late, tail, U)
    # symmetry: a group's devices used in the order of their first nodes
    for g in h.groups:
        for j in range(1, len(g)):
            earlier: list[int] = []
            for v in problem.order:
                if ok[v, g[j]]:
                    if earlier:
                        rows.add([int(X[v, g[j]])] + earlier, [1.0] + [-1.0] * len(earlier), "<", 0.0)
                    else:
                        h.x[v, g[j]].ub = 0.0
                if ok[v, g[j - 1]]:
                    earlier.append(int(X[v, g[j - 1]]))
    if expired():
        raise _BuildExpired
    rows.flush(m, _raise_if_expired)
    return h


#: the most disjunctive rows the MILP builds: past this the model is refused (its warm start is
#: the answer, with a note) before the rows are allocated
MAX_PAIR_ROWS = 2_000_000
#: the disjunctive rows are built for blocks of about this many node pairs at a time
PAIR_BLOCK = 200_000


class _TooLarge(Exception):
    """The model would have more than :data:`MAX_PAIR_ROWS` disjunctive rows."""


def _raise_if_expired() -> None:
    if expired():
        raise _BuildExpired


def _pair_rows(problem: LatencyProblem, h: _Model, rows: RowSink, ok: np.ndarray, X: np.ndarray, Sx: np.ndarray,
               p: np.ndarray, head: np.ndarray, late: np.ndarray, tail: np.ndarray, U: float) -> None:
    """Non-overlap on the devices without parallelism, for the pairs the DAG leaves unordered and
    whose time windows can overlap on a device both can use (when ``u`` on ``d`` finishes by its
    latest start plus its time before ``v``'s earliest start, or the other way round, every
    schedule of makespan at most ``U`` keeps them apart). Built in blocks of nodes, the deadline
    checked after each, and refused (:class:`_TooLarge`) past :data:`MAX_PAIR_ROWS` rows."""
    mip = import_mip()
    related = _closure_rows(problem)
    if expired():
        raise _BuildExpired
    n = len(problem)
    seq = np.flatnonzero(~problem.parallel).tolist()
    h.pruned_pairs = int(related.sum() // 2)
    total = 0
    step = max(1, PAIR_BLOCK // max(1, n))
    cols = np.arange(n)
    for lo in range(0, n, step):
        blk = np.arange(lo, min(n, lo + step))
        us, vs = np.nonzero(~related[blk] & (cols[None, :] > blk[:, None]))
        us = blk[us]
        cand = []  # per device, the pair numbers of its rows
        for d in seq:
            both = ok[us, d] & ok[vs, d]
            apart = (late[us] + p[us, d] <= head[vs]) | (late[vs] + p[vs, d] <= head[us])
            cand.append(np.flatnonzero(both & ~apart))
        used = np.unique(np.concatenate(cand)) if cand else np.zeros(0, dtype=np.int64)
        total += 2 * sum(len(c) for c in cand)
        if total > MAX_PAIR_ROWS:
            raise _TooLarge(f"more than {MAX_PAIR_ROWS:,} disjunctive rows")
        if expired():
            raise _BuildExpired
        if not len(used):
            continue
        h.pairs += len(used)
        yv = h.model.vars.add_vars(len(used), name=f"y{lo}", var_type=mip.BINARY)
        Y = np.full(len(us), -1, dtype=np.int64)
        Y[used] = [var.idx for var in yv]
        for k, var in zip(used.tolist(), yv):
            h.y[int(us[k]), int(vs[k])] = var
        for d, pick in zip(seq, cand):
            u, v = us[pick], vs[pick]
            pu, pv = p[u, d], p[v, d]
            m_uv = np.maximum(0.0, U - tail[u] + pu - head[v])
            m_vu = np.maximum(0.0, U - tail[v] + pv - head[u])
            idx = np.stack([Sx[v], Sx[u], Y[pick], X[u, d], X[v, d]], axis=1)
            # S[v] >= S[u] + p[u, d] - m_uv (3 - y - x[u, d] - x[v, d])
            rows.add_block(idx, np.stack([np.ones_like(pu), -np.ones_like(pu), -m_uv, -m_uv, -m_uv], axis=1), ">",
                           pu - 3 * m_uv)
            # S[u] >= S[v] + p[v, d] - m_vu (2 + y - x[u, d] - x[v, d])
            rows.add_block(idx, np.stack([-np.ones_like(pv), np.ones_like(pv), m_vu, -m_vu, -m_vu], axis=1), ">",
                           pv - 2 * m_vu)


def _unbuilt(problem: LatencyProblem, start: Schedule | None, time_limit: float | None, t0: float,
             lb: float, too_large: str | None = None) -> Schedule:
    """Out of time before the model is built (or the model too large to build): the warm start
    (its own method) and the simple bound."""
    why = f"the time limit ({time_limit:g} s) passed while the MILP was being built" if too_large is None \
        else f"the MILP was not built (the model is too large: {too_large})"
    status: Status = "time_limit" if too_large is None else "unknown" if start is None else "feasible"
    if start is None or start.objective is None:
        return Schedule.infeasible("milp", why, devices=problem.devices.names,
                                   status="time_limit" if too_large is None else "unknown", lower_bound=lb,
                                   runtime_s=time.perf_counter() - t0)
    return dataclasses.replace(start, status=status, lower_bound=min(lb, start.objective),
                               notes=(*start.notes, why + ": its warm start"), runtime_s=time.perf_counter() - t0)


def _start_values(problem: LatencyProblem, h: _Model, sched: Schedule, dev: list[int],
                  order: list[list[int]]) -> list[tuple[Any, float]]:
    """The MIP start of a schedule (already relabelled for the symmetry rows)."""
    out: list[tuple[Any, float]] = [(var, float(dev[v] == d)) for (v, d), var in h.x.items()]
    start = [sched.start[i] / h.scale for i in problem.ids]
    out += [(h.S[v], start[v]) for v in range(len(problem))]
    pos = {}
    for seq in order:
        for k, v in enumerate(seq):
            pos[v] = k
    for (u, v), var in h.y.items():
        if dev[u] == dev[v] and not problem.parallel[dev[u]]:
            out.append((var, float(pos[u] < pos[v])))
        else:
            out.append((var, float(start[u] <= start[v])))
    assert sched.objective is not None
    out.append((h.C, sched.objective / h.scale))
    return out


def _read(problem: LatencyProblem, h: _Model) -> tuple[list[int], list[list[int]]]:
    """The MILP's placement and per-device orders: a linear extension of the DAG that follows the
    MILP's ``y`` between two nodes of one device where it can, then its start times."""
    n = len(problem)
    dev = [max((d for (w, d) in h.x if w == v), key=lambda d: h.x[v, d].x or 0.0) for v in range(n)]
    rank = {v: r for r, v in enumerate(problem.order)}
    start = [float(h.S[v].x or 0.0) for v in range(n)]
    fin = [start[v] + float(problem.times[v, dev[v]]) / h.scale for v in range(n)]
    before: list[set[int]] = [set() for _ in range(n)]  # same-device nodes the MILP puts first
    for (u, v), var in h.y.items():
        if dev[u] == dev[v]:
            if (var.x or 0.0) > 0.5:
                before[v].add(u)
            else:
                before[u].add(v)
    waiting = [len(problem.pred[v]) for v in range(n)]
    ready = {v for v in range(n) if not waiting[v]}
    done: set[int] = set()
    orders: list[list[int]] = [[] for _ in range(problem.num_devices)]
    while ready:
        free = [v for v in ready if before[v] <= done] or list(ready)
        v = min(free, key=lambda w: (start[w], fin[w], rank[w]))
        ready.discard(v)
        done.add(v)
        orders[dev[v]].append(v)
        for s in problem.succ[v]:
            waiting[s] -= 1
            if not waiting[s]:
                ready.add(s)
    return dev, orders


# ---------------------------------------------------------------------------- the solve
def solve_milp(problem: LatencyProblem, *, time_limit: float | None = None, solver: str = "cbc",
               start: Schedule | None = None, threads: int | None = None, gap: float | None = None,
               seed: int = 0, verbose: bool = False) -> Schedule:
    """Solve the DiviML MILP (see the module docs): the best schedule found and its bound.

    Parameters
    ----------
    problem : LatencyProblem
    time_limit : float, optional
        Seconds for the whole solve; on expiry the best schedule found and the proven bound come
        back with status ``"time_limit"`` (``objective=None`` when none was found).
    solver : {"cbc", "highs"}
    start : Schedule, optional
        A schedule of this problem to start from (e.g. the best heuristic's; re-scored under
        the ASAP semantics with its per-device order, or the rank round-robin order when that
        contradicts the DAG): the shorter of it and a greedy schedule
        (:func:`greedy_schedule`) is the MIP start, and its makespan the upper bound ``U`` of
        the big-M rows. A start that breaks a memory limit or splits a colocation class is not
        used (a note says so). With neither, ``U`` is the sum of every node's largest time and
        every edge's largest transfer.
    threads : int, optional
        Solver threads (default 1).
    gap : float, optional
        Relative gap at which to stop (default :func:`stagecut._mip.data_gap` of the times).
    seed : int
        The solver's random seed.
    verbose : bool
        Show the solver's log.

    Returns
    -------
    Schedule
        ``method="milp"``, re-scored by :func:`~stagecut.latency.model.evaluate.schedule_from`;
        ``status`` ``"optimal"`` (bound and makespan within the stated tolerance),
        ``"feasible"``, ``"time_limit"``, or ``"infeasible"`` (nothing fits in memory);
        ``lower_bound`` the larger of the MILP's dual bound and the simple bound; ``stats``
        the model size (``mip_vars``, ``mip_constraints``, ``mip_pairs`` disjunctive pairs,
        ``mip_pairs_pruned`` pairs the DAG orders), ``build_s``, ``solve_s``, ``mip_status``,
        ``mip_scale`` and ``warm_start``.

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a LatencyProblem, a bad solver option, a ``start`` that is not a
        schedule of this problem's nodes and devices.
    BackendUnavailableError
        ``solver="highs"`` without HiGHS installed.
    SolverError
        The solver failed.
    """
    t0 = time.perf_counter()
    problem = check_solver_call(problem, time_limit=time_limit, solver=solver, threads=threads, gap=gap, seed=seed,
                                start=start, verbose=verbose)
    names = problem.devices.names
    why = problem.fits_anywhere() or _class_fits_nowhere(problem)
    if why is not None:
        return Schedule.infeasible("milp", why, devices=names, runtime_s=time.perf_counter() - t0)
    with deadline(time_limit):
        notes: list[str] = []
        lb = best_bound(problem)   # (computed once: the model's C, and the bound of every answer)
        known = _known(problem, start, notes)
        upper = known[0].objective if known is not None else _trivial_upper(problem)
        assert upper is not None
        if not math.isfinite(upper):
            raise InvalidArgumentError("the graph's times and transfers add up past the largest float")
        try:
            h = _build(problem, upper, solver=solver, gap=gap, threads=threads, seed=seed, verbose=verbose,
                       bound=lb.value)
        except _BuildExpired:
            return _unbuilt(problem, None if known is None else known[0], time_limit, t0, lb.value)
        except _TooLarge as exc:
            return _unbuilt(problem, None if known is None else known[0], time_limit, t0, lb.value,
                            too_large=str(exc))
        build_s = time.perf_counter() - t0
        mip_start = _start_values(problem, h, *known) if known is not None else None
        left = remaining()
        out = solve(h.model, time_limit=None if left is None else max(0.05, left), start=mip_start, scale=h.scale)
    stats: dict[str, Stat] = {
        "mip_vars": out.cols, "mip_constraints": out.rows, "mip_pairs": h.pairs, "mip_pairs_pruned": h.pruned_pairs,
        "build_s": build_s, "solve_s": out.seconds, "solver": out.solver, "mip_status": out.status,
        "mip_objective": None if out.objective is None else out.objective * h.scale, "mip_scale": h.scale,
        "warm_start": int(known is not None)}
    result = _verified(problem, h, out, None if known is None else known[0], notes, stats, time_limit, lb)
    return dataclasses.replace(result, runtime_s=time.perf_counter() - t0, seed=seed)


def _known(problem: LatencyProblem, start: Schedule | None, notes: list[str]
           ) -> tuple[Schedule, list[int], list[list[int]]] | None:
    """The schedule to start from (relabelled for the symmetry rows), re-scored: the shortest of
    ``start`` (when it fits), the greedy one and the placement of the memory-path bound's runs
    (:func:`~stagecut.latency.exact.bounds.path_placement`), those built before the deadline passes
    (at least one that fits, when one does); ``None`` when none exists."""
    groups = symmetry_groups(problem)
    cand: tuple[list[int], list[list[int]] | None] | None = None
    if start is not None and start.objective is not None:
        cand = _from_start(problem, start)
    found: list[tuple[Schedule, list[int], list[list[int]]]] = []
    witness = path_placement(problem) if len(problem) <= SMALL and memory_binds(problem) else None
    attempts: list[Callable[[], tuple[list[int], list[list[int]] | None] | None]] = [
        lambda: cand, lambda: greedy_schedule(problem), lambda: None if witness is None else (witness, None)]
    for make in attempts:
        if found and expired():  # (past the deadline: the starts built so far, at least one)
            break
        attempt = make()
        if attempt is None:
            continue
        dev, order = attempt
        try:
            s = schedule_from(problem, dev, order, method="milp")
        except InvalidArgumentError:
            if order is None:
                raise
            s = schedule_from(problem, dev, None, method="milp")  # (its order contradicts the DAG)
        split = [c for c in colocated(problem) if len({dev[v] for v in c}) > 1]
        if s.violations or split:
            why = s.violations[0] if s.violations else \
                f"it splits the colocation class of node {shown(problem.ids[split[0][0]])}"
            notes.append(f"the start schedule is not used: {why}")
            continue
        order = [[problem.index[v] for v in s.order.get(name, ())] for name in problem.devices.names]
        dev, order = _canonical(problem, groups, dev, order)
        s2 = schedule_from(problem, dev, order, method="milp")
        assert s2.objective is not None and s.objective is not None
        if abs(s2.objective - s.objective) > TOL * max(1.0, abs(s.objective)):
            continue  # (cannot happen: the group's devices are interchangeable)
        found.append((s2, dev, order))
    return min(found, key=lambda f: f[0].objective or 0.0, default=None)


def _verified(problem: LatencyProblem, h: _Model, out: MipOutcome, known: Schedule | None, notes: list[str],
              stats: dict[str, Stat], time_limit: float | None, known_bound: LatencyBound) -> Schedule:
    """The answer with a status and bound that the evaluator and the bound agree on."""
    names = problem.devices.names
    simple = known_bound.value
    stats["bound_source"] = known_bound.source
    if out.status == "infeasible" and known is None:
        return Schedule.infeasible("milp", "no placement fits in memory", devices=names, stats=stats)
    if out.status == "infeasible":
        notes.append("the MILP solver reported infeasible, yet a schedule fits (numerical trouble)")
    found: Schedule | None = None
    if out.objective is not None and out.status != "infeasible":
        dev, orders = _read(problem, h)
        found = schedule_from(problem, dev, orders, method="milp")
        if found.violations:
            notes.append(f"the MILP's placement breaks a limit (numerical trouble): {found.violations[0]}")
            found = None
    candidates = [s for s in (found, known) if s is not None and s.objective is not None]
    lb = out.bound * h.scale if math.isfinite(out.bound) and out.status != "infeasible" else -math.inf
    if abs(out.bound) >= 1e30:  # (CBC's "no bound yet", about 1.8e308, not a bound)
        lb = -math.inf
    if not candidates:
        bound = max(lb, simple)
        if out.status == "time_limit":
            return Schedule.infeasible("milp", f"no schedule found within the time limit of {time_limit:g} s",
                                       devices=names, status="time_limit", lower_bound=bound, stats=stats)
        return Schedule.infeasible("milp", f"the MILP solver stopped without a schedule ({out.status})",
                                   devices=names, status="unknown", lower_bound=bound, stats=stats)
    best = min(candidates, key=lambda s: s.objective if s.objective is not None else math.inf)
    assert best.objective is not None
    if found is not None and best is not found:
        notes.append("the MILP's schedule is not better than the start schedule, which is returned")
    tol = stated_tolerance(best.objective, h.scale, h.gap)
    if lb > best.objective + tol:
        notes.append(f"the MILP's bound {lb:.9g} is above a known makespan {best.objective:.9g} "
                     "(numerical trouble): it proves nothing")
        lb = -math.inf
    bound = max(lb, simple)
    status: Status = "time_limit" if out.status == "time_limit" else "feasible"
    if best.objective - bound <= tol and out.status in ("optimal", "time_limit", "feasible"):
        status = "optimal"
    elif out.status == "optimal":
        notes.append(f"the MILP solver reported optimal, but its bound {bound:.9g} is further than the "
                     f"tolerance {tol:.3g} from the makespan: not proven")
    dev = [names.index(best.placement[v]) for v in problem.ids]
    order = [[problem.index[v] for v in best.order.get(name, ())] for name in names]
    return schedule_from(problem, dev, order, method="milp", status=status, lower_bound=bound, stats=stats,
                         notes=notes)
