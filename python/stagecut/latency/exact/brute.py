"""Brute force for the latency problem: the exact minimum makespan of a small DAG (``n <= 8``).

The set searched is the one of :func:`~stagecut.latency.model.evaluate.asap`: every placement that
respects memory (each node on a device that can run it, no device over its capacity) and
colocation (the nodes of a colocation class on one device) times
every per-device order that comes from a linear extension of the DAG, each timed by the ASAP
rule. Enumerating those pairs literally costs ``D**n * n!`` evaluations; the search below
builds the same schedules node by node instead, and is exact for these reasons:

* **Construction.** A schedule is built by appending, one at a time, a node whose
  predecessors are all placed, to the end of some device's order. Its ASAP start is then
  already fixed (its predecessors and the node before it on its device are placed), so the
  times of a partial schedule are final. Every (placement, order) pair whose orders come from
  a linear extension is built by some sequence of appends.
* **One sequence per schedule.** Only sequences in increasing ``(start, finish, topological
  rank)`` are followed. A schedule's nodes sorted by that key form a linear extension of its
  DAG edges and device orders (an edge ``u -> v`` has ``start(v) >= finish(u) >= start(u)``;
  equal keys but for the rank need ``u`` and ``v`` both of zero duration at one instant, and
  such nodes on one device can be put in rank order without changing any time), so each
  schedule is built once, up to the order of zero-time nodes at one instant.
* **Bounds.** A branch stops when a lower bound on every completion reaches the best makespan
  found: each unplaced node's earliest start (after the last appended start, its device's
  availability and its placed predecessors' arrival, minimised over its devices) plus its
  longest path to a sink at the fastest times (an unplaced predecessor's delay adds nothing:
  that predecessor's own term covers it);
  and the work that must run on devices without parallelism, spread over them.
* **Colocation.** The nodes of one colocation class (:attr:`stagecut.Node.colocation`) share a
  device: one that can run them all and hold them all.
* **Symmetry.** Two devices are interchangeable when swapping them leaves every time, capacity,
  parallelism flag and bandwidth unchanged; while both are empty only the first is tried.

The first branch followed is the greedy one (smallest finish first), so a good incumbent comes
early. About 10 ms (at most 50 ms) on random 7-node DAGs and 3 devices; the worst case is
8 independent nodes on 4 unrelated devices (up to about 5 s). The tests hold it to the literal
enumeration with :func:`~stagecut.latency.model.evaluate.asap` on smaller cases.

Examples
--------
>>> import stagecut as sc
>>> from stagecut.latency import Devices, LatencyProblem
>>> g = sc.Graph([sc.Node(v, {"gpu": t}, comm=1.0) for v, t in [("s", 1.0), ("a", 3.0), ("b", 3.0), ("t", 2.0)]],
...              [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")])
>>> p = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0), output_bytes="comm")
>>> s = solve_brute(p)
>>> s.objective, s.status, s.lower_bound   # 1 + min(2 * 3, 3 + 1) + 2
(7.0, 'optimal', 7.0)
"""

from __future__ import annotations

import math
import time

import numpy as np

from stagecut.errors import InvalidArgumentError, internal_error
from stagecut.latency.model.evaluate import TOL, schedule_from
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.validate import shown

__all__ = ["solve_brute", "BRUTE_MAX_NODES", "interchangeable", "symmetry_groups", "colocated"]

#: The largest graph :func:`solve_brute` accepts.
BRUTE_MAX_NODES = 8


def interchangeable(problem: LatencyProblem, d: int, e: int) -> bool:
    """Do devices ``d`` and ``e`` swap without changing the problem (every node's time on
    them, their capacities, parallelism and every bandwidth, with ``d`` and ``e`` exchanged)?

    Parameters
    ----------
    problem : LatencyProblem
    d, e : int
        Device positions.

    Returns
    -------
    bool

    Raises
    ------
    IndexError
        A device position out of range.

    >>> from stagecut.latency import Devices, LatencyProblem
    >>> import stagecut as sc
    >>> p = LatencyProblem(sc.Graph.chain([1.0]), Devices.pcie_star(2))
    >>> interchangeable(p, 1, 2), interchangeable(p, 0, 1)
    (True, False)
    """
    if d == e:
        return True
    t = problem.times
    if not (np.array_equal(t[:, d], t[:, e]) and problem.capacity[d] == problem.capacity[e]
            and problem.parallel[d] == problem.parallel[e]):
        return False
    perm = np.arange(problem.num_devices)
    perm[d], perm[e] = e, d
    bw = problem.bandwidth
    off = ~np.eye(len(perm), dtype=bool)  # (the diagonal is never used)
    return bool(np.array_equal(bw[np.ix_(perm, perm)][off], bw[off]))


def symmetry_groups(problem: LatencyProblem) -> list[list[int]]:
    """The groups (of two or more) of devices that swap pairwise without changing the problem
    (:func:`interchangeable`), each in increasing order.

    Parameters
    ----------
    problem : LatencyProblem

    Returns
    -------
    list of list of int
        Device positions per group (the swaps compose, so each group is an equivalence class).

    Raises
    ------
    None

    >>> import stagecut as sc
    >>> from stagecut.latency import Devices, LatencyProblem
    >>> symmetry_groups(LatencyProblem(sc.Graph.chain([1.0]), Devices.pcie_star(3)))
    [[1, 2, 3]]
    """
    groups: list[list[int]] = []
    for d in range(problem.num_devices):
        for g in groups:
            if interchangeable(problem, g[0], d):
                g.append(d)
                break
        else:
            groups.append([d])
    return [g for g in groups if len(g) > 1]


def colocated(problem: LatencyProblem) -> list[list[int]]:
    """The colocation classes (:attr:`stagecut.Node.colocation`) of two or more nodes, as node
    positions: each class must share one device.

    Parameters
    ----------
    problem : LatencyProblem

    Returns
    -------
    list of list of int
        Each class's node positions, in position order; classes by first member.

    Raises
    ------
    None

    >>> import stagecut as sc
    >>> from stagecut.latency import Devices, LatencyProblem
    >>> g = sc.Graph([sc.Node(i, {"gpu": 1.0}, colocation=c) for i, c in enumerate("aba")], [])
    >>> colocated(LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0)))
    [[0, 2]]
    """
    classes: dict[object, list[int]] = {}
    for i, node in enumerate(problem.graph.nodes):
        if node.colocation is not None:
            classes.setdefault(node.colocation, []).append(i)
    return [c for c in classes.values() if len(c) > 1]


class _Search:
    """The branch and bound (see the module docs); plain lists: it runs in pure Python."""

    def __init__(self, problem: LatencyProblem) -> None:
        n, nd = len(problem), problem.num_devices
        self.n, self.nd = n, nd
        times = problem.times
        self.p = [[float(times[v, d]) for d in range(nd)] for v in range(n)]
        self.mem = [float(x) for x in problem.memory]
        self.cap = [float(x) for x in problem.capacity]
        self.par = [bool(x) for x in problem.parallel]
        self.pred = [list(problem.pred[v]) for v in range(n)]
        self.succ = [list(problem.succ[v]) for v in range(n)]
        self.topo = list(problem.order)
        self.rank = [0] * n
        for r, v in enumerate(self.topo):
            self.rank[v] = r
        self.tr = [[[problem.transfer(v, a, b) for b in range(nd)] for a in range(nd)] for v in range(n)]
        self.allowed = [[d for d in range(nd) if math.isfinite(self.p[v][d]) and self.mem[v] <= self.cap[d]]
                        for v in range(n)]
        self.cls = [-1] * n  # colocation class of each node (-1: none); a class's devices are shared
        for c, members in enumerate(colocated(problem)):
            ok = [d for d in range(nd) if all(math.isfinite(self.p[v][d]) for v in members)
                  and sum(self.mem[v] for v in members) <= self.cap[d]]
            for v in members:
                self.cls[v], self.allowed[v] = c, ok
        self.cls_dev = [-1] * (max(self.cls) + 1)
        self.fastest = [min((self.p[v][d] for d in self.allowed[v]), default=math.inf) for v in range(n)]
        self.tail = [0.0] * n  # longest path to a sink from v, v included, at the fastest times
        for v in reversed(self.topo):
            self.tail[v] = self.fastest[v] + max((self.tail[s] for s in self.succ[v]), default=0.0)
        self.seq = [d for d in range(nd) if not self.par[d]]
        par_ok = [any(self.par[d] for d in self.allowed[v]) for v in range(n)]
        self.seq_work = [0.0 if par_ok[v] else min((self.p[v][d] for d in self.allowed[v]), default=math.inf)
                         for v in range(n)]
        # twin[e]: the devices d < e interchangeable with e
        self.twin = [[d for d in range(e) if interchangeable(problem, d, e)] for e in range(nd)]
        # state
        self.dev = [-1] * n
        self.start = [0.0] * n
        self.fin = [0.0] * n
        self.avail = [0.0] * nd
        self.used = [0.0] * nd
        self.count = [0] * nd
        self.waiting = [len(self.pred[v]) for v in range(n)]
        self.orders: list[list[int]] = [[] for _ in range(nd)]
        self.best = math.inf
        self.best_dev: list[int] | None = None
        self.best_orders: list[list[int]] = []
        self.visited = 0

    def bound(self, last_s: float, cur: float) -> float:
        """A lower bound on the makespan of every completion of the current partial schedule.

        Each unplaced node ``v`` starts no earlier than ``e(v)``, the latest of the last appended
        start and, minimised over its devices, the device's availability and its placed
        predecessors' arrival; so the makespan is at least ``e(v) + tail[v]``. An unplaced
        predecessor ``u`` also delays ``v`` (to ``start(u) + fastest[u]``), but taking it into
        ``e(v)`` never raises the bound: ``tail[u] >= fastest[u] + tail[v]``, so
        ``e(u) + fastest[u] + tail[v]`` is covered by ``u``'s own term ``e(u) + tail[u]`` (by
        induction along the topological order, the same holds when ``e(u)`` itself came from an
        unplaced predecessor). Those terms are therefore left out."""
        dev, fin, tr = self.dev, self.fin, self.tr
        lb = cur
        work = 0.0
        for v in self.topo:
            if dev[v] >= 0:
                continue
            placed_preds = [u for u in self.pred[v] if dev[u] >= 0]
            best_d = math.inf
            for d in self.allowed[v]:
                a = 0.0 if self.par[d] else self.avail[d]
                for u in placed_preds:
                    x = fin[u] + tr[u][dev[u]][d]
                    if x > a:
                        a = x
                if a < best_d:
                    best_d = a
            e = max(last_s, best_d)
            if e + self.tail[v] > lb:
                lb = e + self.tail[v]
            work += self.seq_work[v]
        if work > 0 and self.seq:
            total = work + sum(max(self.avail[d], last_s) for d in self.seq)
            lb = max(lb, total / len(self.seq))
        return lb

    def run(self, k: int, last_s: float, last_f: float, last_r: int, cur: float) -> None:
        self.visited += 1
        if k == self.n:
            if cur < self.best:
                self.best = cur
                self.best_dev = list(self.dev)
                self.best_orders = [list(o) for o in self.orders]
            return
        if k and self.bound(last_s, cur) >= self.best:
            return
        dev, fin, tr = self.dev, self.fin, self.tr
        children: list[tuple[float, float, int, int]] = []
        for v in range(self.n):
            if dev[v] >= 0 or self.waiting[v]:
                continue
            r = self.rank[v]
            c = self.cls[v]
            for d in self.allowed[v]:
                if self.used[d] + self.mem[v] > self.cap[d] or (c >= 0 and self.cls_dev[c] not in (-1, d)):
                    continue
                if not self.count[d] and any(not self.count[t] for t in self.twin[d]):
                    continue  # an empty interchangeable device before d is tried instead
                s = 0.0 if self.par[d] else self.avail[d]
                for u in self.pred[v]:
                    x = fin[u] + tr[u][dev[u]][d]
                    if x > s:
                        s = x
                f = s + self.p[v][d]
                if (s, f, r) <= (last_s, last_f, last_r):
                    continue  # not in key order: this schedule is built by another sequence
                if f + self.tail[v] - self.fastest[v] >= self.best:
                    continue
                children.append((f, s, v, d))
        children.sort()
        for f, s, v, d in children:
            if f + self.tail[v] - self.fastest[v] >= self.best:
                continue
            old_avail = self.avail[d]
            c = self.cls[v]
            old_cls = self.cls_dev[c] if c >= 0 else -1
            if c >= 0:
                self.cls_dev[c] = d
            dev[v], self.start[v], fin[v] = d, s, f
            if not self.par[d]:
                self.avail[d] = f
            self.used[d] += self.mem[v]
            self.count[d] += 1
            self.orders[d].append(v)
            for w in self.succ[v]:
                self.waiting[w] -= 1
            self.run(k + 1, s, f, self.rank[v], max(cur, f))
            for w in self.succ[v]:
                self.waiting[w] += 1
            self.orders[d].pop()
            self.count[d] -= 1
            self.used[d] -= self.mem[v]
            self.avail[d] = old_avail
            if c >= 0:
                self.cls_dev[c] = old_cls
            dev[v] = -1


def solve_brute(problem: LatencyProblem) -> Schedule:
    """The exact minimum makespan over every placement that fits in memory and every per-device
    order that comes from a linear extension of the DAG (ASAP times; see the module docs).

    Parameters
    ----------
    problem : LatencyProblem
        At most :data:`BRUTE_MAX_NODES` (8) nodes.

    Returns
    -------
    Schedule
        ``method="brute"``, ``status="optimal"`` and ``lower_bound`` equal to the makespan
        (re-scored by :func:`~stagecut.latency.model.evaluate.schedule_from`); ``status="infeasible"``
        (``objective=None``) when no placement fits in memory. ``stats``: ``search_nodes``.

    Raises
    ------
    InvalidArgumentError
        More than 8 nodes, or ``problem`` is not a :class:`LatencyProblem`.
    SolverError
        (internal error) the evaluator's makespan differs from the search's.
    """
    if not isinstance(problem, LatencyProblem):
        raise InvalidArgumentError(f"problem: expected a LatencyProblem, got {shown(problem)}")
    if len(problem) > BRUTE_MAX_NODES:
        raise InvalidArgumentError(f"brute force: at most {BRUTE_MAX_NODES} nodes, the graph has {len(problem)} "
                                   "(use the MILP)")
    t0 = time.perf_counter()
    names = problem.devices.names
    why = problem.fits_anywhere()
    if why is not None:
        return Schedule.infeasible("brute", why, devices=names, runtime_s=time.perf_counter() - t0)
    search = _Search(problem)
    search.run(0, -math.inf, -math.inf, -1, 0.0)
    stats = {"search_nodes": search.visited}
    if search.best_dev is None:
        return Schedule.infeasible("brute", "no placement fits in memory", devices=names, stats=stats,
                                   runtime_s=time.perf_counter() - t0)
    sched = schedule_from(problem, search.best_dev, search.best_orders, method="brute", status="optimal",
                          lower_bound=search.best, stats=stats, runtime_s=time.perf_counter() - t0)
    assert sched.objective is not None
    if abs(sched.objective - search.best) > TOL * max(1.0, abs(search.best)) or sched.violations:
        raise internal_error(f"brute force: the evaluator gives {sched.objective!r} for a schedule the search "
                             f"timed at {search.best!r} ({sched.violations})")
    return sched
