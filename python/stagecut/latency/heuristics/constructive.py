"""The constructive latency heuristics: best single device, MET, DiviML's greedy and HEFT.

Every heuristic takes a :class:`~stagecut.latency.LatencyProblem` and returns a
:class:`~stagecut.latency.Schedule` re-scored by :func:`~stagecut.latency.model.evaluate.schedule_from`
(status ``"feasible"``, lower bound :meth:`LatencyProblem.lower_bound`). They are deterministic
(ties go to the lower device position) and respect the two placement rules:

* memory: a device never holds more than its capacity (each heuristic reserves memory as it
  places; when it cannot place something it returns no schedule, status ``"unknown"``, or
  ``"infeasible"`` when the problem provably has no placement: a node, or a colocation class,
  that fits on no device that can run it);
* colocation: the nodes of one colocation class (:attr:`stagecut.Node.colocation`) share a
  device: a class is placed as one unit (:class:`Units`), where its first node is placed.

The heuristics:

:func:`best_device`
    Everything on the one device where the makespan is least, among the devices that can run
    every node and hold them all.
:func:`met`
    Minimum execution time: each unit (in BFS order) on its fastest device that still has room.
:func:`greedy`
    DiviML's greedy: nodes in BFS order (:func:`bfs_order`); each goes to the device where the
    partial schedule (the nodes placed so far, each appended to its device's queue and started
    as soon as its device and inputs allow) has the least makespan; ties go to the device where
    the node itself finishes first. The schedule keeps the greedy's per-device order, or the
    rank round-robin order when that is shorter.
:func:`heft`
    Insertion-based HEFT (Topcuoglu et al. 2002): upward ranks from mean costs, nodes by
    decreasing rank, each on the device where it finishes earliest, inserted into the first idle
    gap long enough. The schedule's per-device order is HEFT's.

>>> import stagecut as sc
>>> from stagecut.latency import Devices, LatencyProblem
>>> g = sc.Graph.chain([1.0, 2.0, 3.0], cpu_costs=[4.0, 1.0, 4.0], comm=0.1)
>>> p = LatencyProblem(g, Devices.pcie_star(1))
>>> s = heft(p)
>>> s.objective, s.placement, best_device(p).objective
(5.2, {0: 'accelerator:0', 1: 'cpu', 2: 'accelerator:0'}, 6.0)
"""

from __future__ import annotations

import bisect
import heapq
import math
import time
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from stagecut.errors import InvalidArgumentError
from stagecut.latency.model._fast import Evaluator
from stagecut.latency.model.evaluate import schedule_from
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.results import Status
from stagecut.validate import shown

__all__ = ["bfs_order", "Units", "Memory", "best_device", "met", "greedy", "heft", "list_greedy", "list_heft",
           "best_constructive"]


def _check_problem(problem: object) -> LatencyProblem:
    if not isinstance(problem, LatencyProblem):
        raise InvalidArgumentError(f"problem: expected a stagecut.latency.LatencyProblem, got {shown(problem)}")
    return problem


def bfs_order(problem: LatencyProblem) -> list[int]:
    """The breadth-first topological order of the nodes: Kahn's algorithm with a first-in
    first-out queue (sources by position, then each node's successors as they become ready).

    Parameters
    ----------
    problem : LatencyProblem

    Returns
    -------
    list of int
        Every node position once, each after all its predecessors.

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`.

    >>> import stagecut as sc
    >>> from stagecut.latency import Devices
    >>> g = sc.Graph([sc.Node(v, {"gpu": 1.0}) for v in "sabct"],
    ...              [("s", "a"), ("s", "b"), ("a", "c"), ("b", "t"), ("c", "t")])
    >>> bfs_order(LatencyProblem(g, Devices.servers(1, 1, intra_bandwidth=1, inter_bandwidth=1)))
    [0, 1, 2, 3, 4]
    """
    problem = _check_problem(problem)
    indeg = [len(p) for p in problem.pred]
    queue = deque(i for i in range(len(problem)) if indeg[i] == 0)
    out: list[int] = []
    while queue:
        i = queue.popleft()
        out.append(i)
        for s in problem.succ[i]:
            indeg[s] -= 1
            if indeg[s] == 0:
                queue.append(s)
    return out


class Units:
    """The nodes grouped into placement units: each colocation class is one unit, every other
    node a unit of its own; units are numbered in the BFS order of their first node.

    Parameters
    ----------
    problem : LatencyProblem

    Attributes
    ----------
    members : list of numpy.ndarray
        Node positions of each unit (in BFS order).
    unit_of : numpy.ndarray
        The unit of each node position.
    times : numpy.ndarray
        ``(units, devices)``: the sum of the members' times (``inf`` where one cannot run).
    memory : numpy.ndarray
        Bytes of each unit.
    allowed : list of numpy.ndarray
        Per unit, the devices that can run all its nodes and hold them all (alone).
    classes : list
        The colocation class of each unit (``None`` for a lone node).

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`.
    """

    def __init__(self, problem: LatencyProblem) -> None:
        self.problem = _check_problem(problem)
        groups: dict[tuple[str, Hashable], list[int]] = {}
        for i in bfs_order(problem):
            c = problem.graph.nodes[i].colocation
            groups.setdefault(("c", c) if c is not None else ("n", i), []).append(i)
        self.members = [np.array(m, dtype=np.int64) for m in groups.values()]
        self.classes = [k[1] if k[0] == "c" else None for k in groups]
        self.unit_of = np.empty(len(problem), dtype=np.int64)
        for u, m in enumerate(self.members):
            self.unit_of[m] = u
        self.times = np.array([problem.times[m].sum(axis=0) for m in self.members]).reshape(
            len(self.members), problem.num_devices)
        self.memory = np.array([problem.memory[m].sum() for m in self.members], dtype=float)
        self.allowed = [np.flatnonzero(np.isfinite(self.times[u]) & (self.memory[u] <= problem.capacity))
                        for u in range(len(self.members))]

    def __len__(self) -> int:
        return len(self.members)

    def proof(self) -> str | None:
        """Why no placement fits (a node, or a colocation class, that fits on no device that can
        run it), or ``None``."""
        reason = self.problem.fits_anywhere()
        if reason is not None:
            return reason
        for u, ok in enumerate(self.allowed):
            if not ok.size:
                return (f"colocation class {shown(self.classes[u])} ({len(self.members[u])} nodes, "
                        f"{self.memory[u]:g} bytes) fits on no device that can run all its nodes")
        return None

    def placement(self, udev: np.ndarray) -> np.ndarray:
        """The device of each node position, from the device of each unit."""
        return np.asarray(udev, dtype=np.int64)[self.unit_of]

    def loads(self, udev: np.ndarray) -> np.ndarray:
        """Bytes held by each device when unit ``u`` is on ``udev[u]``."""
        return np.bincount(np.asarray(udev, dtype=np.int64), weights=self.memory,
                           minlength=self.problem.num_devices)

    def fits(self, udev: np.ndarray) -> bool:
        """Does every device hold its units within its capacity?"""
        return bool((self.loads(udev) <= self.problem.capacity).all())

    def of_placement(self, dev: np.ndarray, where: str = "placement") -> np.ndarray:
        """The device of each unit, from a device per node position.

        Raises
        ------
        InvalidArgumentError
            A colocation class split across devices (naming ``where`` and the class).
        """
        dev = np.asarray(dev, dtype=np.int64)
        out = np.empty(len(self), dtype=np.int64)
        for u, m in enumerate(self.members):
            if (dev[m] != dev[m[0]]).any():
                raise InvalidArgumentError(f"{where}: colocation class {shown(self.classes[u])} is split "
                                           "across devices")
            out[u] = dev[m[0]]
        return out


class Memory:
    """First come, first served memory: a unit may go to any device that can run it and still
    has room for it. Memory-aware heuristics (:mod:`stagecut.latency.heuristics.memaware`) subclass it to
    hold memory back for the units that need it most.

    Parameters
    ----------
    units : Units
    """

    def __init__(self, units: Units) -> None:
        self.units = units
        self.free = units.problem.capacity.copy()

    def candidates(self, u: int) -> list[int]:
        """The devices unit ``u`` may go to now (ties: the lower position first)."""
        m = self.units.memory[u]
        return [int(d) for d in self.units.allowed[u] if m <= self.free[d]]

    def take(self, u: int, d: int) -> None:
        """Unit ``u`` goes to device ``d``."""
        self.free[d] -= self.units.memory[u]


def finished(problem: LatencyProblem, dev: np.ndarray, order: Sequence[Sequence[int]] | None, *, method: str,
             t0: float, status: Status = "feasible", seed: int | None = None, stats: Mapping[str, Any] | None = None,
             notes: Sequence[str] = ()) -> Schedule:
    """The re-scored :class:`Schedule` of a heuristic's placement and order (``None``: rank
    round-robin), with the problem's lower bound; a placement over a memory limit (a bug) is no
    answer (status ``"unknown"``)."""
    s = schedule_from(problem, dev, order, method=method, status=status, lower_bound=problem.lower_bound(),
                      seed=seed, runtime_s=time.perf_counter() - t0, stats=stats, notes=notes)
    if s.violations:
        return no_answer(problem, None, method, "internal: the placement breaks a limit: " + s.violations[0], t0)
    return s


def no_answer(problem: LatencyProblem, units: Units | None, method: str, reason: str, t0: float,
              seed: int | None = None) -> Schedule:
    """No schedule: status ``"infeasible"`` with the proof when there is one, else ``"unknown"``
    with ``reason``."""
    proof = (units or Units(problem)).proof()
    status: Literal["infeasible", "unknown"] = "infeasible" if proof is not None else "unknown"
    out = Schedule.infeasible(method, proof or reason, devices=problem.devices.names, status=status,
                              runtime_s=time.perf_counter() - t0)
    return out if seed is None else _with_seed(out, seed)


def _with_seed(s: Schedule, seed: int) -> Schedule:
    import dataclasses

    return dataclasses.replace(s, seed=seed)


class ListCore:
    """The core the list schedulers (:func:`list_greedy`, :func:`list_heft`) share, placing nodes
    one at a time: each node's device and finish, its candidate devices (its unit's, once placed,
    else those the memory rule ``memory(units)`` allows), the arrival of its inputs, and the final
    choice between the scheduler's own order and rank round-robin, for the method ``method``.

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`.
    """

    def __init__(self, problem: LatencyProblem, memory: Callable[[Units], Memory], method: str) -> None:
        self.t0 = time.perf_counter()
        self.problem = _check_problem(problem)
        self.method = method
        self.units = Units(problem)
        self.mem = memory(self.units)
        self.udev = np.full(len(self.units), -1, dtype=np.int64)
        self.dev = np.full(len(problem), -1, dtype=np.int64)
        self.finish = np.zeros(len(problem))
        self._ev: Evaluator | None = None

    def evaluator(self) -> Evaluator:
        """The problem's evaluator (made once)."""
        if self._ev is None:
            self._ev = Evaluator(self.problem)
        return self._ev

    def candidates(self, i: int) -> list[int]:
        """The devices node ``i`` may go to (empty: none has room for its unit)."""
        u = int(self.units.unit_of[i])
        if self.udev[u] >= 0:
            return [int(self.udev[u])]
        return self.mem.candidates(u)

    def arrival(self, i: int, d: int) -> float:
        """When the last input of node ``i`` (every predecessor placed) reaches device ``d``."""
        finish, dev, transfer = self.finish, self.dev, self.problem.transfer
        s = 0.0
        for j in self.problem.pred[i]:
            a = finish[j] + transfer(j, int(dev[j]), d)
            if a > s:
                s = a
        return s

    def place(self, i: int, d: int, f: float) -> None:
        """Node ``i`` runs on device ``d`` and finishes at ``f`` (its unit goes there if new)."""
        u = int(self.units.unit_of[i])
        if self.udev[u] < 0:
            self.udev[u] = d
            self.mem.take(u, d)
        self.dev[i], self.finish[i] = d, f

    def no_room(self, i: int) -> Schedule:
        """No schedule: node ``i`` finds no device with room (or the proof that none fits)."""
        return no_answer(self.problem, self.units, self.method, f"node {shown(self.problem.ids[i])}: no device "
                         "that can run it has room left", self.t0)

    def result(self, order: Sequence[Sequence[int]], own: float, whose: str, stats: dict[str, float] | None = None,
               keep_own: bool = False) -> Schedule:
        """The schedule of the placement in the scheduler's ``order`` (makespan ``own``), or in rank
        round-robin order when that is shorter (a note says so, naming ``whose`` order it beats);
        ``keep_own``: the scheduler's order whatever the other gives."""
        p, dev = self.problem, self.dev
        if not keep_own:
            rr = self.evaluator().makespan(dev)
            if rr < own:
                return finished(p, dev, None, method=self.method, t0=self.t0, stats=stats,
                                notes=(f"rank round-robin order ({rr:.6g}) beats {whose} ({own:.6g})",))
        return finished(p, dev, order, method=self.method, t0=self.t0, stats=stats)


# ---------------------------------------------------------------------------------- heuristics
def best_device(problem: LatencyProblem) -> Schedule:
    """Every node on one device: the device with the least makespan among those that can run
    every node and hold them all (ties: the lower position).

    Parameters
    ----------
    problem : LatencyProblem

    Returns
    -------
    Schedule
        Method ``"best-device"``, rank round-robin order; no schedule when no device can run and
        hold everything (status ``"unknown"``, or ``"infeasible"`` when proven).

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`.
    """
    t0 = time.perf_counter()
    problem = _check_problem(problem)
    ok = np.isfinite(problem.times).all(axis=0) & (problem.memory.sum() <= problem.capacity)
    cands = np.flatnonzero(ok)
    if not cands.size:
        return no_answer(problem, None, "best-device", "no single device can run and hold every node", t0)
    ev = Evaluator(problem)
    n = len(problem)
    spans = ev.makespans(np.repeat(cands[:, None], n, axis=1).astype(np.int64))
    d = int(cands[int(np.argmin(spans))])
    return finished(problem, np.full(n, d, dtype=np.int64), None, method="best-device", t0=t0,
                    stats={"evaluations": int(cands.size)})


def met(problem: LatencyProblem) -> Schedule:
    """Minimum execution time: each unit (a node, or a colocation class; in BFS order) on the
    device where it runs fastest among those that still have room for it (ties: the lower
    position).

    Parameters
    ----------
    problem : LatencyProblem

    Returns
    -------
    Schedule
        Method ``"met"``, rank round-robin order; no schedule when some unit finds no device
        with room (status ``"unknown"``, or ``"infeasible"`` when proven).

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`.
    """
    t0 = time.perf_counter()
    units = Units(_check_problem(problem))
    free = problem.capacity.copy()
    udev = np.empty(len(units), dtype=np.int64)
    for u in range(len(units)):
        ok = units.allowed[u][units.memory[u] <= free[units.allowed[u]]]
        if not ok.size:
            return no_answer(problem, units, "met", f"unit of node {shown(problem.ids[units.members[u][0]])}: no "
                             "device that can run it has room left", t0)
        d = int(ok[np.argmin(units.times[u, ok])])
        udev[u] = d
        free[d] -= units.memory[u]
    return finished(problem, units.placement(udev), None, method="met", t0=t0)


def greedy(problem: LatencyProblem) -> Schedule:
    """DiviML's greedy (see the module docs): nodes in BFS order, each on the device (with room
    for its unit) that minimises the makespan of the partial schedule, then the node's own
    finish, then the device position. A colocation class goes where its first node goes.

    Parameters
    ----------
    problem : LatencyProblem

    Returns
    -------
    Schedule
        Method ``"greedy"``; the greedy's per-device order, or rank round-robin when shorter (a
        note says which); no schedule when some node finds no device with room (status
        ``"unknown"``, or ``"infeasible"`` when proven).

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`.
    """
    return list_greedy(problem)


def list_greedy(problem: LatencyProblem, memory: Callable[[Units], Memory] = Memory,
                method: str = "greedy") -> Schedule:
    """:func:`greedy` with the memory rule ``memory`` (a :class:`Memory` made from the units)."""
    core = ListCore(problem, memory, method)
    problem, nd = core.problem, core.problem.num_devices
    ready = np.zeros(nd)
    order: list[list[int]] = [[] for _ in range(nd)]
    span = 0.0
    for i in bfs_order(problem):
        cands = core.candidates(i)
        if not cands:
            return core.no_room(i)
        best: tuple[float, float, int] | None = None
        for d in cands:
            s = core.arrival(i, d)
            if not problem.parallel[d]:
                s = max(s, ready[d])
            f = s + problem.times[i, d]
            key = (max(span, f), f, d)
            if best is None or key < best:
                best = key
        assert best is not None
        span, f, d = best
        core.place(i, d, f)
        ready[d] = f
        order[d].append(i)
    own = core.evaluator().makespan(core.dev, order)
    return core.result(order, own, "the greedy's own")


def _mean_costs(problem: LatencyProblem, units: Units) -> tuple[np.ndarray, list[dict[int, float]]]:
    """HEFT's mean costs: each node's mean time over the devices that can run it, and each
    edge's mean transfer time over the pairs of distinct devices that can run its two ends (0
    inside a colocation class, which never crosses devices)."""
    t = problem.times
    run = np.isfinite(t)
    w = np.where(run, t, 0.0).sum(axis=1) / run.sum(axis=1)
    inv = 1.0 / problem.bandwidth
    np.fill_diagonal(inv, 0.0)
    mean_inv: dict[tuple[bytes, bytes], float] = {}  # by the two ends' sets of devices
    c: list[dict[int, float]] = []
    for i in range(len(problem)):
        row: dict[int, float] = {}
        for s in problem.succ[i]:
            if units.unit_of[i] == units.unit_of[s] or problem.size[i] == 0:
                row[s] = 0.0
                continue
            key = (run[i].tobytes(), run[s].tobytes())
            if key not in mean_inv:
                pairs = np.outer(run[i], run[s])
                np.fill_diagonal(pairs, False)
                mean_inv[key] = float(inv[pairs].mean()) if pairs.any() else 0.0
            row[s] = float(problem.size[i] * mean_inv[key])
        c.append(row)
    return w, c


def _earliest_gap(busy: list[tuple[float, float]], ready: float, length: float) -> float:
    """The earliest start >= ``ready`` of an idle gap of ``length`` between the (sorted) busy
    intervals of a device."""
    t = ready
    for k in range(bisect.bisect_right(busy, ready, key=lambda x: x[1]), len(busy)):
        s, f = busy[k]
        if t + length <= s:
            break
        if f > t:
            t = f
    return t


def heft(problem: LatencyProblem) -> Schedule:
    """Insertion-based HEFT (see the module docs).

    Upward rank: ``rank(i) = w(i) + max over successors s of (c(i, s) + rank(s))``, ``w`` the
    mean of the node's times over the devices that can run it, ``c`` the mean transfer time of
    its output over the pairs of distinct devices that can run the two ends. Ready nodes are
    taken by decreasing rank (ties: topological position); each goes to the device (with room
    for its unit) where it finishes earliest, starting in the first idle gap of that device long
    enough that begins after its inputs arrive (ties: the lower device). A colocation class goes
    where its first node goes.

    Parameters
    ----------
    problem : LatencyProblem

    Returns
    -------
    Schedule
        Method ``"heft"``; per device, HEFT's order (its nodes by start time); the re-scored
        makespan is at most HEFT's own timetable's (``stats["heft_makespan"]``). No schedule when
        some node finds no device with room (status ``"unknown"``, or ``"infeasible"`` when
        proven).

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`.
    """
    return list_heft(problem)


def list_heft(problem: LatencyProblem, memory: Callable[[Units], Memory] = Memory, method: str = "heft"
              ) -> Schedule:
    """:func:`heft` with the memory rule ``memory`` (a :class:`Memory` made from the units); the
    schedule keeps HEFT's order, or the rank round-robin order when that is shorter (a note
    says so)."""
    core = ListCore(problem, memory, method)
    problem, units = core.problem, core.units
    n, nd = len(problem), problem.num_devices
    w, c = _mean_costs(problem, units)
    rank = np.zeros(n)
    for i in reversed(problem.order):
        rank[i] = w[i] + max((c[i][s] + rank[s] for s in problem.succ[i]), default=0.0)
    topo = np.empty(n, dtype=np.int64)
    topo[problem.order] = np.arange(n)
    indeg = [len(p) for p in problem.pred]
    heap = [(-rank[i], int(topo[i]), i) for i in range(n) if indeg[i] == 0]
    heapq.heapify(heap)
    start = np.zeros(n)
    busy: list[list[tuple[float, float]]] = [[] for _ in range(nd)]
    seq = np.zeros(n, dtype=np.int64)
    k = 0
    while heap:
        _, _, i = heapq.heappop(heap)
        cands = core.candidates(i)
        if not cands:
            return core.no_room(i)
        best: tuple[float, int, float] | None = None
        for d in cands:
            r = core.arrival(i, d)
            length = float(problem.times[i, d])
            s = r if problem.parallel[d] else _earliest_gap(busy[d], r, length)
            if best is None or (s + length, d) < (best[0], best[1]):
                best = (s + length, d, s)
        assert best is not None
        f, d, s = best
        core.place(i, d, f)
        start[i], seq[i] = s, k
        k += 1
        if not problem.parallel[d]:
            bisect.insort(busy[d], (s, f))
        for j in problem.succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(heap, (-rank[j], int(topo[j]), j))
    dev, finish = core.dev, core.finish
    order = [sorted(np.flatnonzero(dev == d).tolist(), key=lambda i: (start[i], finish[i], seq[i])) for d in range(nd)]
    own = float(finish.max()) if n else 0.0
    return core.result(order, own, "HEFT's own", stats={"heft_makespan": own}, keep_own=method == "heft")


def best_constructive(problem: LatencyProblem) -> Schedule:
    """The shortest schedule of :func:`best_device`, :func:`met`, :func:`greedy` and
    :func:`heft` (ties: in that order), each keeping its method name; when none finds one, the
    first one's answer (status ``"infeasible"`` or ``"unknown"``).

    Parameters
    ----------
    problem : LatencyProblem

    Returns
    -------
    Schedule

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`.
    """
    found = [h(_check_problem(problem)) for h in (best_device, met, greedy, heft)]
    ok = [s for s in found if s.objective is not None]
    if not ok:
        return found[0]
    return min(ok, key=lambda s: s.objective if s.objective is not None else math.inf)
