"""The seed-000 latency IP on the PCIe star (the throughput workloads' authors' latency IP).

The model (python-mip through :mod:`stagecut._mip`; CBC by default, HiGHS selectable), for
``k`` accelerators with ``q`` *slots* each (``m = a * q + s`` is slot ``s`` of accelerator ``a``;
the slots of an accelerator run in order) and the CPU pool:

* ``x[i, m]`` (binary): node ``i`` in slot ``m``; ``xc[i]`` (binary): node ``i`` on the CPU
  pool; each node in exactly one place; a node only where it can run and fits; memory per
  accelerator (over its ``q`` slots); the nodes of a colour class on one accelerator (any of its
  slots) or all on the CPU pool;
* contiguity through "still reaches" variables ``r[i, m] in [0, 1]``: ``r >= x``, ``r[u] >=
  r[v]`` on every edge ``u -> v`` (an ancestor of the slot reaches it), and ``r[v, m] <= 1 -
  x[u, m] + x[v, m]`` (a node fed by the slot but outside it does not reach it): every slot is
  convex;
* communication: ``cin[u, m] >= x[v, m] - x[u, m]`` and ``cout[u, m] >= x[u, m] - x[v, m]`` on
  every edge ``u -> v`` (each producer's ``comm`` once per slot it enters or leaves);
* times: ``fin[m] = start[m] + sum t_acc x + sum comm (cin + cout)``; ``start[m] >= L[u] -
  M (1 - x[v, m] + x[u, m])`` on every edge (a slot waits for its inputs), ``start[a, s] >=
  fin[a, s - 1]``; the release times ``L[v] >= L[u] + t_cpu[v] xc[v]`` on every edge, ``L[v] >=
  t_cpu[v] xc[v]``, ``L[v] >= fin[m] - M (1 - x[v, m])``, and the valid cuts ``L[v] >= L[u] +
  (t_acc[v] + comm[u]) (x[v, m] - x[u, m])``; ``T >= L`` at the sinks; minimise ``T``;
* symmetry between the identical accelerators: the first node of accelerator ``a`` (in a
  topological order) comes after the first node of accelerator ``a - 1``.

With ``q = 1`` a slot is one piece of :mod:`~stagecut.latency.pcie.pieces` and the model's value of
a split is exactly :func:`~stagecut.latency.pcie.pieces.evaluate_pieces`'s: the IP is exact over the
splits whose accelerators each hold one convex set (contiguous splits). With ``q > 1`` every
split with at most ``q`` pieces per accelerator is a solution of the model of the same value
(slots = pieces), so the dual bound bounds those splits; the evaluator may score the model's
own split higher (it merges independent slots of a device into one piece), and the status says
``"optimal"`` only when the evaluator's value meets the bound.

>>> import stagecut as sc
>>> from stagecut.latency import LatencyProblem
>>> g = sc.Graph.chain([1.0, 1.0, 1.0], cpu_costs=[3.0, 8.0, 5.0], comm=1.0, memory=[1.0, 1.0, 1.0])
>>> s = solve_pcie_ip(LatencyProblem.from_workload(g, accelerators=1, memory=2.0))
>>> s.objective, s.status, s.order["accelerator:0"]   # node 0 on the CPU (3), then in 1 + 1 + 1
(6.0, 'optimal', (1, 2))
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from stagecut._deadline import deadline, expired, remaining
from stagecut._mip import (
    MipOutcome,
    add,
    data_gap,
    import_mip,
    new_model,
    reference_scale,
    solve,
    stated_tolerance,
)
from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph
from stagecut.latency._args import check_solver_call
from stagecut.latency.exact.bounds import best_bound
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.latency.pcie.greedy import pcie_greedy
from stagecut.latency.pcie.pieces import check_pcie, pieces_schedule, pieces_timing, placement_positions
from stagecut.results import Stat, Status
from stagecut.validate import check_int

__all__ = ["solve_pcie_ip", "PcieIp", "build_pcie_ip", "GREEDY_TRIES"]

#: Orders the default warm start (:func:`~stagecut.latency.pcie.greedy.pcie_greedy`) tries: its
#: depth-first order and random ones from seed 0, within a tenth of the time limit.
GREEDY_TRIES = 16


@dataclass
class PcieIp:
    """A built model and its handles (python-mip variables; times in units of ``scale``)."""

    model: Any
    q: int
    accs: list[int]
    cpu: int
    scale: float
    gap: float
    big_m: float
    x: dict[tuple[int, int], Any]
    xc: dict[int, Any]
    r: dict[tuple[int, int], Any]
    cin: dict[tuple[int, int], Any]
    cout: dict[tuple[int, int], Any]
    start: list[Any]
    fin: list[Any]
    L: list[Any]
    T: Any
    count: dict[tuple[int, int], Any]
    identical: bool
    E: list[Any]


def _identical(problem: LatencyProblem, accs: list[int]) -> bool:
    if len(accs) < 2:
        return False
    t, c = problem.times[:, accs], problem.capacity[accs]
    return bool(np.all((t == t[:, :1]) | (np.isinf(t) & np.isinf(t[:, :1]))) and np.all(c == c[0]))


def build_pcie_ip(problem: LatencyProblem, *, q: int = 1, upper: float | None = None, solver: str = "cbc",
                  gap: float | None = None, threads: int | None = None, seed: int = 0,
                  verbose: bool = False) -> PcieIp:
    """Build the latency IP of ``problem`` (see the module docs) with ``q`` slots per
    accelerator, its times divided by :func:`~stagecut._mip.reference_scale` (``upper``: the
    makespan of a split the model can represent, which also caps every release time; ``None``:
    a cap that holds for every split).

    Raises
    ------
    InvalidArgumentError
        Not a PCIe star; a bad ``q`` or solver option.
    BackendUnavailableError
        ``solver="highs"`` without HiGHS installed.
    """
    mip = import_mip()
    check_pcie(problem)
    q = check_int(q, "q", minimum=1)
    n = len(problem)
    par = np.flatnonzero(problem.parallel)
    cpu = int(par[0]) if par.size else -1
    accs = [int(d) for d in np.flatnonzero(~problem.parallel)]
    S = len(accs) * q
    comm = problem.size
    tcpu = problem.times[:, cpu] if cpu >= 0 else np.full(n, math.inf)
    tacc = problem.times[:, accs] if accs else np.zeros((n, 0))
    finite = [v for v in (*tcpu.tolist(), *tacc.ravel().tolist(), *comm.tolist()) if math.isfinite(v)]
    scale = reference_scale(finite, upper)
    if upper is not None and math.isfinite(upper) and upper > 0:
        cap = upper * (1 + 1e-9) / scale
    else:  # every slot and CPU node in a row, each producer paid in every slot and once out
        worst = np.where(np.isfinite(problem.times), problem.times, 0.0).max(axis=1).sum()
        cap = (worst + (S + 1) * comm.sum()) / scale + 1.0
    if gap is None:
        gap = data_gap([v / scale for v in finite], 1.0)
    _check_clock()
    m = new_model("pcie_latency_ip", solver=solver, gap=gap, threads=threads, seed=seed, verbose=verbose)
    B, C = mip.BINARY, mip.CONTINUOUS
    edges = [(u, v) for u in range(n) for v in problem.succ[u]]
    x = {(i, s): m.add_var(f"x_{i}_{s}", var_type=B) for i in range(n) for s in range(S)}
    xc = {i: m.add_var(f"xc_{i}", var_type=B) for i in range(n)} if cpu >= 0 else {}
    for i in range(n):  # where a node may run
        if cpu >= 0 and not math.isfinite(tcpu[i]):
            xc[i].ub = 0.0
        for a, d in enumerate(accs):
            if not math.isfinite(problem.times[i, d]) or problem.memory[i] > problem.capacity[d]:
                for s in range(q):
                    x[i, a * q + s].ub = 0.0
        m += mip.xsum(x[i, s] for s in range(S)) + (xc[i] if cpu >= 0 else 0) == 1
    for a, d in enumerate(accs):  # memory
        capd = problem.capacity[d]
        if math.isfinite(capd) and capd > 0 and problem.memory.sum() > capd:
            m += mip.xsum((problem.memory[i] / capd) * x[i, a * q + s]
                          for i in range(n) for s in range(q) if problem.memory[i] > 0) <= 1.0 + 1e-9
    _colour_classes(m, problem, x, xc, q, len(accs))
    r = {(i, s): m.add_var(f"r_{i}_{s}", var_type=C, lb=0.0, ub=1.0) for i in range(n) for s in range(S)}
    _check_clock()
    for s in range(S):  # contiguity: every slot convex
        _check_clock()
        for i in range(n):
            add(m, r[i, s] - x[i, s] >= 0)
        for u, v in edges:
            add(m, r[u, s] - r[v, s] >= 0)
            add(m, r[v, s] + x[u, s] - x[v, s] <= 1)
    prod = [u for u in range(n) if problem.succ[u] and comm[u] > 0]
    cin = {(u, s): m.add_var(f"ci_{u}_{s}", var_type=C, lb=0.0, ub=1.0) for u in prod for s in range(S)}
    cout = {(u, s): m.add_var(f"co_{u}_{s}", var_type=C, lb=0.0, ub=1.0) for u in prod for s in range(S)}
    for u in prod:
        _check_clock()
        for v in problem.succ[u]:
            for s in range(S):
                add(m, cin[u, s] - x[v, s] + x[u, s] >= 0)
                add(m, cout[u, s] - x[u, s] + x[v, s] >= 0)
    start = [m.add_var(f"start_{s}", var_type=C, lb=0.0, ub=cap) for s in range(S)]
    fin = [m.add_var(f"fin_{s}", var_type=C, lb=0.0, ub=cap) for s in range(S)]
    L = [m.add_var(f"L_{i}", var_type=C, lb=0.0, ub=cap) for i in range(n)]
    T = m.add_var("T", var_type=C, lb=0.0, ub=cap)
    for a in range(len(accs)):
        for s in range(a * q, a * q + q):
            load = mip.xsum((tacc[i, a] / scale) * x[i, s] for i in range(n) if tacc[i, a] > 0 and
                            math.isfinite(tacc[i, a])) + mip.xsum((comm[u] / scale) * (cin[u, s] + cout[u, s])
                                                                  for u in prod)
            m += fin[s] == start[s] + load
            if s > a * q:
                m += start[s] >= fin[s - 1]
    producers = set(prod)
    for k, (u, v) in enumerate(edges):
        if k % 32 == 0:
            _check_clock()
        cu = comm[u] / scale if u in producers else 0.0
        m += L[v] >= L[u] + ((tcpu[v] / scale) * xc[v] if cpu >= 0 and math.isfinite(tcpu[v]) else 0)
        for a in range(len(accs)):
            w = (tacc[v, a] / scale if math.isfinite(tacc[v, a]) else 0.0) + cu
            for s in range(a * q, a * q + q):
                add(m, start[s] - L[u] - cap * x[v, s] + cap * x[u, s] >= -cap)
                if w > 0:
                    add(m, L[v] - L[u] - w * x[v, s] + w * x[u, s] >= 0)
    _check_clock()
    E = _compute_ends(m, problem, x, xc, L, q, accs, cpu, scale, cap)
    _check_clock()
    for i in range(n):
        if cpu >= 0 and math.isfinite(tcpu[i]) and tcpu[i] > 0:
            m += L[i] >= (tcpu[i] / scale) * xc[i]
        for s in range(S):
            add(m, L[i] - fin[s] - cap * x[i, s] >= -cap)
        if not problem.succ[i]:
            m += T >= L[i]
    _check_clock()
    identical = _identical(problem, accs)
    count = _symmetry(m, problem, x, q, len(accs)) if identical else {}
    m.objective = mip.minimize(T)
    return PcieIp(model=m, q=q, accs=accs, cpu=cpu, scale=scale, gap=gap, big_m=cap, x=x, xc=xc, r=r, cin=cin,
                  cout=cout, start=start, fin=fin, L=L, T=T, count=count, identical=identical, E=E)


class BuildExpired(Exception):
    """The time limit (a :func:`stagecut._deadline.deadline` scope) passed while the model was being built."""


def _check_clock() -> None:
    if expired():
        raise BuildExpired


def _compute_ends(m: Any, problem: LatencyProblem, x: Any, xc: Any, L: list[Any], q: int, accs: list[int],
                  cpu: int, scale: float, cap: float) -> list[Any]:
    """The valid cuts of the compute ends: ``E[v]`` (when ``v``'s own compute ends, at most its
    release ``L[v]``) is at least ``E[u]`` plus ``v``'s time where it runs, on every edge
    ``u -> v`` (a piece computes its nodes in a topological order). This keeps the critical
    path with each node's time in the relaxation, where the big-M constraints keep almost
    nothing. (The same with ``comm[u]`` when ``u`` and ``v`` sit apart, through one more
    variable per edge, raised the bound by under 1% on the layer graphs for a third more rows.)"""
    mip = import_mip()
    n = len(problem)
    own = []
    for v in range(n):
        terms = [(problem.times[v, cpu] / scale) * xc[v]] if cpu >= 0 and math.isfinite(problem.times[v, cpu]) else []
        terms += [(problem.times[v, dv] / scale) * x[v, a * q + s] for a, dv in enumerate(accs)
                  if math.isfinite(problem.times[v, dv]) for s in range(q)]
        own.append(mip.xsum(terms))
    E = [m.add_var(f"E_{v}", lb=0.0, ub=cap) for v in range(n)]
    for v in range(n):
        m += E[v] >= own[v]
        m += L[v] >= E[v]
        for u in problem.pred[v]:
            m += E[v] >= E[u] + own[v]
    return E


def _colour_classes(m: Any, problem: LatencyProblem, x: Any, xc: Any, q: int, k: int) -> None:
    mip = import_mip()
    classes: dict[Hashable, list[int]] = {}
    for i, node in enumerate(problem.graph.nodes):
        if node.colocation is not None:
            classes.setdefault(node.colocation, []).append(i)
    for ms in classes.values():
        for i, j in zip(ms, ms[1:]):
            if xc:
                m += xc[i] == xc[j]
            for a in range(k):
                m += mip.xsum(x[i, a * q + s] - x[j, a * q + s] for s in range(q)) == 0


def _symmetry(m: Any, problem: LatencyProblem, x: Any, q: int, k: int) -> dict[tuple[int, int], Any]:
    """count[p, a]: nodes among the first p + 1 (topological order) on accelerator a; a node may
    go on accelerator a >= 1 only when an earlier node is on a - 1."""
    mip = import_mip()
    count: dict[tuple[int, int], Any] = {}
    for p, i in enumerate(problem.order):
        for a in range(k):
            on = mip.xsum(x[i, a * q + s] for s in range(q))
            count[p, a] = m.add_var(f"cnt_{p}_{a}", lb=0.0, ub=p + 1)
            m += count[p, a] == (count[p - 1, a] if p else 0) + on
            if a >= 1:
                if p == 0:
                    m += on == 0
                else:
                    m += on <= count[p - 1, a - 1]
    return count


def start_values(problem: LatencyProblem, h: PcieIp, dev: np.ndarray) -> list[tuple[Any, float]] | None:
    """A MIP start from a placement (``None`` when the model cannot represent it: more pieces
    than slots on an accelerator, a broken limit)."""
    tm = pieces_timing(problem, dev)
    n, q, k = len(problem), h.q, len(h.accs)
    if any(pc.index > q for pc in tm.pieces):
        return None
    rank = np.empty(n, dtype=np.int64)
    rank[problem.order] = np.arange(n)
    used = sorted({pc.device for pc in tm.pieces}, key=lambda d: min(rank[v] for v in np.flatnonzero(dev == d)))
    label = {d: a for a, d in enumerate(used)} if h.identical else {d: h.accs.index(d) for d in used}
    slot = np.full(n, -1, dtype=np.int64)
    sv = [(0.0, 0.0)] * (k * q)
    for pc in tm.pieces:
        s = label[pc.device] * q + pc.index - 1
        slot[list(pc.nodes)] = s
        sv[s] = (pc.ready / h.scale, pc.end / h.scale)
    for a in range(k):
        for s in range(a * q + 1, a * q + q):
            if sv[s] == (0.0, 0.0) and not (slot == s).any():
                sv[s] = (sv[s - 1][1], sv[s - 1][1])
    reach = np.zeros((n, k * q), dtype=bool)
    for v in reversed(problem.order):
        if slot[v] >= 0:
            reach[v, slot[v]] = True
        for w in problem.succ[v]:
            reach[v] |= reach[w]
    out: list[tuple[Any, float]] = [(h.x[i, s], float(slot[i] == s)) for i in range(n) for s in range(k * q)]
    out += [(h.xc[i], float(slot[i] < 0)) for i in h.xc]
    out += [(h.r[i, s], float(reach[i, s])) for i in range(n) for s in range(k * q)]
    for (u, s), var in h.cin.items():
        out.append((var, float(slot[u] != s and any(slot[v] == s for v in problem.succ[u]))))
    for (u, s), var in h.cout.items():
        out.append((var, float(slot[u] == s and any(slot[v] != s for v in problem.succ[u]))))
    out += [(h.start[s], sv[s][0]) for s in range(k * q)] + [(h.fin[s], sv[s][1]) for s in range(k * q)]
    out += [(h.L[i], float(tm.release[i]) / h.scale) for i in range(n)] + [(h.T, tm.makespan / h.scale)]
    out += [(h.E[i], float(tm.finish[i]) / h.scale) for i in range(n)]
    for (p, a), var in h.count.items():
        out.append((var, float(sum(1 for i in problem.order[:p + 1] if a * q <= slot[i] < a * q + q))))
    return out


def _read(problem: LatencyProblem, h: PcieIp) -> np.ndarray:
    """The placement of the solved model (device positions)."""
    dev = np.empty(len(problem), dtype=np.int64)
    for i in range(len(problem)):
        best, where = (h.xc[i].x or 0.0, h.cpu) if h.xc else (-1.0, -1)
        for s in range(len(h.accs) * h.q):
            val = h.x[i, s].x or 0.0
            if val > best:
                best, where = val, h.accs[s // h.q]
        dev[i] = where
    return dev


def _broken(problem: LatencyProblem, dev: np.ndarray) -> tuple[str, ...]:
    """The limits a placement breaks (memory, colour classes, pieces waiting for each other)."""
    try:
        return pieces_schedule(problem, dev, method="pcie-ip").violations
    except InvalidArgumentError as exc:  # (pieces in a cycle: only zero-time slots allow it in the model)
        return (str(exc),)


def _known(problem: LatencyProblem, start: Any, time_limit: float | None) -> tuple[np.ndarray | None, list[str]]:
    """The placement to start from and hold the MIP to: ``start``, else the greedy's."""
    if start is None:
        budget = None if time_limit is None else 0.1 * time_limit
        g = pcie_greedy(problem, seed=0, tries=GREEDY_TRIES, time_limit=budget)
        if g.objective is None:
            return None, []
        start = g
    elif isinstance(start, Schedule) and start.objective is None:
        return None, ["the start schedule holds no placement: ignored"]
    dev = placement_positions(problem, start)
    broken = _broken(problem, dev)
    if broken:
        return None, [f"the start placement breaks a limit ({broken[0]}): ignored"]
    return dev, []


def solve_pcie_ip(problem: LatencyProblem | Graph, *, q: int = 1, time_limit: float | None = None, solver: str = "cbc",
                  start: Any = None, threads: int | None = None, gap: float | None = None, seed: int = 0,
                  verbose: bool = False) -> Schedule:
    """Solve the latency IP on the PCIe star (see the module docs).

    Parameters
    ----------
    problem : LatencyProblem or Graph
        On :meth:`Devices.pcie_star <stagecut.latency.Devices.pcie_star>`; a graph is read as
        :meth:`LatencyProblem.from_workload <stagecut.latency.LatencyProblem.from_workload>`
        (the star of its workload file).
    q : int
        Slots (convex sub-graphs run in order) per accelerator: 1 optimises over the
        contiguous splits, more over splits of up to ``q`` pieces per accelerator.
    time_limit : float, optional
        Seconds, the greedy warm start included; on expiry the best placement and the bound so
        far come back with status ``"time_limit"`` (no exception).
    solver : {"cbc", "highs"}
    start : placement or Schedule, optional
        A placement (any form :func:`~stagecut.latency.pcie.pieces.evaluate_pieces` takes) to start
        from; default: :func:`~stagecut.latency.pcie.greedy.pcie_greedy`'s best of
        :data:`GREEDY_TRIES` orders. The MIP is warm-started
        with it when it has at most ``q`` pieces per accelerator, and it is returned when the
        MIP finds nothing better.
    threads, gap, seed, verbose
        Solver threads (default 1), relative gap (default: tight for the data), seed, log.

    Returns
    -------
    Schedule
        ``method="pcie-ip"``, ``semantics="pieces"``, re-scored by the pieces evaluator (the
        better of the MIP's placement and the start); ``lower_bound`` the MIP's dual bound (or
        the problem's simple bound when larger; never a primal value; capped at the objective);
        ``status`` ``"optimal"`` only when the solver says so and the bound is within
        :func:`~stagecut._mip.stated_tolerance` of the evaluator's value (optimal over the
        splits of at most ``q`` pieces per accelerator), ``"feasible"``, ``"time_limit"``,
        ``"infeasible"`` (no split of at most ``q`` pieces per accelerator fits in memory) or
        ``"unknown"``; ``stats``: model size, ``build_s``, ``solve_s``, the solver's status,
        objective and bound (time units), ``mip_scale``, ``warm_start``, ``q``.

    Raises
    ------
    InvalidArgumentError
        Not a PCIe star; a bad ``q``, time limit or solver option; a bad ``start`` placement
        (naming the node); a graph without ``maxFPGAs``.
    BackendUnavailableError
        ``solver="highs"`` without HiGHS installed.
    SolverError
        The solver failed.
    """
    t0 = time.perf_counter()
    if isinstance(problem, Graph):
        problem = LatencyProblem.from_workload(problem)
    check_pcie(problem)
    q = check_int(q, "q", minimum=1)
    check_solver_call(problem, time_limit=time_limit, solver=solver, threads=threads, gap=gap, seed=seed,
                      verbose=verbose)
    names = problem.devices.names
    why = problem.fits_anywhere()
    if why is not None:
        return Schedule.infeasible("pcie-ip", why, devices=names, semantics="pieces",
                                   runtime_s=time.perf_counter() - t0)
    with deadline(time_limit):  # the warm start, the build and the solve: one time limit
        known, notes = _known(problem, start, time_limit)
        known_value = None if known is None else pieces_timing(problem, known).makespan
        try:
            h, out, stats = _solve(problem, q, known, known_value, time_limit, t0,
                                   {"solver": solver, "gap": gap, "threads": threads, "seed": seed,
                                    "verbose": verbose})
        except BuildExpired:
            return _unbuilt(problem, known, notes, time_limit, t0, seed)
    return _verified(problem, h, out, known, known_value, stats, notes, t0, time_limit, seed)


def _solve(problem: LatencyProblem, q: int, known: np.ndarray | None, known_value: float | None,
           time_limit: float | None, t0: float, options: dict[str, Any]
           ) -> tuple[PcieIp, MipOutcome, dict[str, Stat]]:
    tb = time.perf_counter()
    fits = known is not None and all(pc.index <= q for pc in pieces_timing(problem, known).pieces)
    h = build_pcie_ip(problem, q=q, upper=known_value if fits else None, **options)  # (capped by a split it holds)
    warm = start_values(problem, h, known) if fits and known is not None else None
    build_s = time.perf_counter() - tb
    _check_clock()
    left = remaining()
    out = solve(h.model, time_limit=None if left is None else max(0.1, left), start=warm)
    stats: dict[str, Stat] = {
        "mip_vars": out.cols, "mip_constraints": out.rows, "build_s": build_s, "solve_s": out.seconds,
        "solver": out.solver, "mip_status": out.status, "q": q, "warm_start": int(warm is not None),
        "mip_objective": None if out.objective is None else out.objective * h.scale,
        "mip_bound": out.bound * h.scale if math.isfinite(out.bound) else None, "mip_scale": h.scale}
    return h, out, stats


def _unbuilt(problem: LatencyProblem, known: np.ndarray | None, notes: list[str], time_limit: float | None,
             t0: float, seed: int) -> Schedule:
    """Out of time before the model is built: the start placement (or nothing) and the simple bound."""
    why = f"the time limit ({time_limit:g} s) passed while the IP was being built"
    simple = best_bound(problem).value
    if known is None:
        return Schedule.infeasible("pcie-ip", why, devices=problem.devices.names, semantics="pieces",
                                   status="time_limit", lower_bound=simple, runtime_s=time.perf_counter() - t0)
    value = pieces_timing(problem, known).makespan
    return pieces_schedule(problem, known, method="pcie-ip", status="time_limit", lower_bound=min(simple, value),
                           seed=seed, notes=[*notes, why + ": the start placement is returned"],
                           runtime_s=time.perf_counter() - t0)


def _verified(problem: LatencyProblem, h: PcieIp, out: MipOutcome, known: np.ndarray | None,
              known_value: float | None, stats: dict[str, Stat], notes: list[str], t0: float,
              time_limit: float | None, seed: int) -> Schedule:
    """The better of the MIP's and the known placement, with a status and bound that the
    evaluator and the MIP's bound agree on (as the throughput IP does)."""
    names = problem.devices.names
    common: dict[str, Any] = {"devices": names, "semantics": "pieces", "stats": stats}
    if out.status == "infeasible" and known is not None:
        notes.append("the MIP solver reported that no split fits, yet the start placement fits (numerical trouble)")
    found: tuple[float, np.ndarray] | None = None
    if out.objective is not None and out.status != "infeasible":
        dev = _read(problem, h)
        broken = _broken(problem, dev)
        if broken:
            notes.append(f"the MIP solver's placement breaks a limit ({broken[0]}; numerical trouble): not used")
        else:
            found = (pieces_timing(problem, dev).makespan, dev)
            claimed = out.objective * h.scale
            if h.q == 1 and found[0] > claimed + stated_tolerance(claimed, h.scale, h.gap) * (len(problem) + 1):
                notes.append(f"the evaluator scores the MIP's placement {found[0]:.9g}, above the MIP's value "
                             f"{claimed:.9g} (numerical trouble)")
    candidates = [c for c in (found, None if known is None or known_value is None else (known_value, known))
                  if c is not None]
    lb = out.bound * h.scale if math.isfinite(out.bound) else -math.inf  # (+inf unproven: none yet)
    if math.isfinite(out.bound) and abs(out.bound) >= 1e30:  # (CBC's "no bound yet", about 1.8e308)
        lb = -math.inf
    if not candidates:
        runtime = time.perf_counter() - t0
        if out.status == "infeasible":
            return Schedule.infeasible("pcie-ip", f"no split with at most {h.q} piece(s) per accelerator fits "
                                       "in memory", runtime_s=runtime, **common)
        stop: Literal["time_limit", "unknown"] = "time_limit" if out.status == "time_limit" else "unknown"
        why = (f"no placement found within the time limit of {time_limit:g} s" if stop == "time_limit"
               else f"the MIP solver stopped without a usable placement ({out.status})")
        return Schedule.infeasible("pcie-ip", why, status=stop, runtime_s=runtime,
                                   lower_bound=lb if math.isfinite(lb) else None, **common)
    value, dev = min(candidates, key=lambda c: c[0])  # (ties: the MIP's)
    tol = stated_tolerance(value, h.scale, h.gap)
    in_set = max((pc.index for pc in pieces_timing(problem, dev).pieces), default=0) <= h.q
    if found is not None and dev is not found[1]:
        notes.append("the MIP's placement scores worse than the start placement, which is returned")
    if lb > value + tol:
        if in_set:
            notes.append(f"the MIP's bound {lb:.9g} is above the makespan {value:.9g} of a split it covers "
                         "(numerical trouble): it proves nothing")
            lb = -math.inf
        else:
            notes.append(f"the start placement has more than {h.q} piece(s) on an accelerator and beats the "
                         f"MIP's bound {lb:.9g} over the splits of at most {h.q}")
    status: Status = "time_limit" if out.status == "time_limit" else "feasible"
    if out.status == "optimal" and value - lb <= tol:
        status = "optimal"
    elif out.status == "optimal" and math.isfinite(lb):
        notes.append(f"the MIP solver reported optimal, but its bound {lb:.9g} is further than the tolerance "
                     f"{tol:.3g} from the evaluator's makespan {value:.9g}: not proven")
    simple = best_bound(problem).value
    bound = min(max(lb, simple if math.isfinite(simple) else -math.inf), value)
    return pieces_schedule(problem, dev, method="pcie-ip", status=status,
                           lower_bound=bound if math.isfinite(bound) else None, seed=seed,
                           stats=stats, notes=notes, runtime_s=time.perf_counter() - t0)
