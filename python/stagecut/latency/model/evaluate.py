"""The latency evaluators: the ASAP schedule of a placement and an order, and the orders.

* :func:`asap` — the reference ASAP timetable (Python; :mod:`stagecut.latency.model._fast` is the fast
  one used by the heuristics, and tests hold the two equal): each node starts at the latest of
  its device becoming free (the previous node in the device's order; never on a ``parallel``
  device) and every input arriving (the producer's finish, plus the transfer when it ran on
  another device). An order that contradicts the DAG (a node before one of its ancestors on the
  same device) is refused.
* :func:`rank_round_robin` — the order QuickP evaluates a placement with: rank = own time + the
  largest successor rank; each device serves its ready nodes by largest rank, the devices take
  turns round-robin.
* :func:`schedule_from` — a :class:`~stagecut.latency.model.schedule.Schedule` (transfers, critical
  path, busy time, memory, violations) from a placement and an order; every solver's answer goes
  through it, so every answer is re-scored.
* :func:`evaluate_schedule` — the public entry point: a graph (or problem), devices, a placement
  by device name and optionally an order.

>>> import stagecut as sc
>>> from stagecut.latency import Devices, LatencyProblem
>>> g = sc.Graph(
...     [sc.Node(v, {"gpu": t}, comm=1.0) for v, t in [("s", 1.0), ("a", 2.0), ("b", 2.0), ("t", 1.0)]],
...     [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")])
>>> p = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0), output_bytes="comm")
>>> start, finish = asap(p, [0, 0, 1, 0], [[0, 1, 3], [2]])
>>> finish.tolist()   # b waits 1 for s's output and t 1 for b's
[1.0, 3.0, 4.0, 6.0]
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph
from stagecut.latency.model.devices import Devices
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule, Transfer, stages_of
from stagecut.results import Status
from stagecut.units import bytes_text
from stagecut.validate import shown

#: A device position per node position (a list or an int array).
Placement = Sequence[int] | np.ndarray

__all__ = ["Placement", "asap", "rank_round_robin", "schedule_from", "evaluate_schedule", "check_placement",
           "devices_in_node_order", "TOL"]

#: Relative tolerance of comparisons between evaluators and solvers.
TOL = 1e-9


def check_placement(problem: LatencyProblem, dev: Placement) -> np.ndarray:
    """``dev`` (a device position per node position) as an int array, or
    :class:`~stagecut.errors.InvalidArgumentError` naming the node that cannot run where it is put.

    Raises
    ------
    InvalidArgumentError
        Wrong length, a device position out of range, a node on a device that cannot run it.
    """
    a = np.asarray(dev)
    if a.shape != (len(problem),) or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise InvalidArgumentError(f"placement: expected {len(problem)} device positions, got {shown(dev)}")
    a = a.astype(np.int64)
    bad = np.flatnonzero((a < 0) | (a >= problem.num_devices))
    if bad.size:
        raise InvalidArgumentError(f"placement: node {shown(problem.ids[bad[0]])} is on device {a[bad[0]]}, "
                                   f"but there are {problem.num_devices} devices")
    t = problem.times[np.arange(len(a)), a]
    bad = np.flatnonzero(~np.isfinite(t))
    if bad.size:
        i = int(bad[0])
        raise InvalidArgumentError(f"placement: node {shown(problem.ids[i])} cannot run on "
                                   f"{problem.devices.names[a[i]]}")
    return a


def rank_round_robin(problem: LatencyProblem, dev: Placement) -> list[list[int]]:
    """Per device, its nodes (positions) in the rank round-robin order (see the module docs).
    Ties in rank go to the lower position, so the order is deterministic.

    Raises
    ------
    InvalidArgumentError
        A bad placement (see :func:`check_placement`).
    """
    a = check_placement(problem, dev)
    n, nd = len(problem), problem.num_devices
    own = problem.times[np.arange(n), a]
    rank = np.zeros(n)
    for i in reversed(problem.order):
        rank[i] = own[i] + max((rank[s] for s in problem.succ[i]), default=0.0)
    indeg = np.array([len(p) for p in problem.pred])
    queues: list[list[tuple[float, int]]] = [[] for _ in range(nd)]
    for i in range(n):
        if indeg[i] == 0:
            heapq.heappush(queues[a[i]], (-rank[i], i))
    order: list[list[int]] = [[] for _ in range(nd)]
    done, d = 0, 0
    while done < n:
        while not queues[d]:
            d = (d + 1) % nd
        _, i = heapq.heappop(queues[d])
        order[d].append(i)
        done += 1
        for s in problem.succ[i]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(queues[a[s]], (-rank[s], s))
        d = (d + 1) % nd
    return order


def asap(problem: LatencyProblem, dev: Placement, order: Sequence[Sequence[int]] | None = None
         ) -> tuple[np.ndarray, np.ndarray]:
    """The ASAP ``(start, finish)`` arrays of a placement (device position per node position) and
    an order (per device, its nodes' positions; ``None``: :func:`rank_round_robin`; the order of
    a ``parallel`` device is ignored).

    Raises
    ------
    InvalidArgumentError
        A bad placement; an order that does not list each device's nodes exactly once, or that
        contradicts the DAG (names a node and the ancestor it is put before).
    """
    a = check_placement(problem, dev)
    if order is None:
        order = rank_round_robin(problem, a)
    n, nd = len(problem), problem.num_devices
    if len(order) != nd:
        raise InvalidArgumentError(f"order: expected one list per device ({nd}), got {len(order)}")
    prev = np.full(n, -1)
    seen = np.zeros(n, dtype=bool)
    for d, seq in enumerate(order):
        last = -1
        for i in seq:
            if not (isinstance(i, (int, np.integer)) and 0 <= i < n) or seen[i] or a[i] != d:
                raise InvalidArgumentError(f"order: device {problem.devices.names[d]} lists {shown(i)}, "
                                           "which is not one of its nodes or is listed twice")
            seen[i] = True
            if not problem.parallel[d]:
                prev[i] = last
                last = int(i)
    if not seen.all():
        i = int(np.flatnonzero(~seen)[0])
        raise InvalidArgumentError(f"order: node {shown(problem.ids[i])} is missing from its device's order")
    own = problem.times[np.arange(n), a]
    # a topological sweep of the DAG plus the device chains
    indeg = np.array([len(p) for p in problem.pred]) + (prev >= 0)
    nxt = np.full(n, -1)
    for i in range(n):
        if prev[i] >= 0:
            nxt[prev[i]] = i
    start, finish = np.zeros(n), np.zeros(n)
    ready = [i for i in range(n) if indeg[i] == 0]
    count = 0
    while ready:
        i = ready.pop()
        count += 1
        s = finish[prev[i]] if prev[i] >= 0 else 0.0
        for u in problem.pred[i]:
            s = max(s, finish[u] + problem.transfer(u, int(a[u]), int(a[i])))
        start[i], finish[i] = s, s + own[i]
        for j in (*problem.succ[i], nxt[i]):
            if j >= 0:
                indeg[j] -= 1
                if indeg[j] == 0:
                    ready.append(int(j))
    if count < n:
        i = next(i for i in range(n) if indeg[i] > 0 and prev[i] >= 0)
        raise InvalidArgumentError(f"order: it contradicts the graph's edges on device "
                                   f"{problem.devices.names[a[i]]} (node {shown(problem.ids[i])} "
                                   "is put before one of its ancestors)")
    return start, finish


def _critical_path(problem: LatencyProblem, a: np.ndarray, prev: np.ndarray, start: np.ndarray,
                   finish: np.ndarray) -> list[int]:
    if not len(finish):
        return []
    i = int(np.argmax(finish))
    path = [i]
    while start[i] > 0:
        eps = TOL * max(1.0, start[i])
        nxt = -1
        for u in problem.pred[i]:
            if abs(finish[u] + problem.transfer(u, int(a[u]), int(a[i])) - start[i]) <= eps:
                nxt = u
                break
        if nxt < 0 and prev[i] >= 0 and abs(finish[prev[i]] - start[i]) <= eps:
            nxt = int(prev[i])
        if nxt < 0:
            break
        i = nxt
        path.append(i)
    return path[::-1]


def schedule_from(problem: LatencyProblem, dev: Placement, order: Sequence[Sequence[int]] | None = None,
                  *, method: str, status: Status = "feasible", lower_bound: float | None = None,
                  seed: int | None = None, runtime_s: float = 0.0, stats: Mapping[str, Any] | None = None,
                  notes: Sequence[str] = ()) -> Schedule:
    """The :class:`Schedule` of a placement and order, timed by :func:`asap` (the solver's own
    value is never trusted: this is the re-scoring). ``lower_bound`` is capped at the makespan.

    Raises
    ------
    InvalidArgumentError
        See :func:`asap`.
    """
    a = check_placement(problem, dev)
    if order is None:
        order = rank_round_robin(problem, a)
    start, finish = asap(problem, a, order)
    names = problem.devices.names
    ids = problem.ids
    n = len(problem)
    prev = np.full(n, -1)
    for d, seq in enumerate(order):
        if not problem.parallel[d]:
            for x, y in zip(seq, seq[1:]):
                prev[y] = x
    transfers: dict[tuple[int, int], Transfer] = {}
    for i in range(n):
        for s in problem.succ[i]:
            if a[s] != a[i] and (i, int(a[s])) not in transfers:
                t = problem.transfer(i, int(a[i]), int(a[s]))
                transfers[(i, int(a[s]))] = Transfer(node=ids[i], source=names[a[i]], target=names[a[s]],
                                                     start=float(finish[i]), finish=float(finish[i] + t))
    own = problem.times[np.arange(n), a]
    busy = {names[d]: float(own[a == d].sum()) for d in range(problem.num_devices) if (a == d).any()}
    mem = {names[d]: float(problem.memory[a == d].sum()) for d in range(problem.num_devices) if (a == d).any()}
    violations = tuple(f"{names[d]} holds {bytes_text(mem[names[d]])}, over its {bytes_text(problem.capacity[d])}"
                       for d in range(problem.num_devices) if mem.get(names[d], 0.0) > problem.capacity[d])
    makespan = float(finish.max()) if n else 0.0
    bound = None if lower_bound is None else min(float(lower_bound), makespan)
    order_ids = {names[d]: tuple(ids[i] for i in seq) for d, seq in enumerate(order) if len(seq)}
    return Schedule(
        objective=makespan, status=status, lower_bound=bound, method=method, seed=seed, runtime_s=runtime_s,
        stats=dict(stats or {}), notes=tuple(notes),
        stages=stages_of(names, order_ids, busy, mem),
        placement={ids[i]: names[a[i]] for i in range(n)}, order=order_ids,
        start={ids[i]: float(start[i]) for i in range(n)}, finish={ids[i]: float(finish[i]) for i in range(n)},
        transfers=tuple(sorted(transfers.values(), key=lambda t: (t.start, t.finish))),
        critical_path=tuple(ids[i] for i in _critical_path(problem, a, prev, start, finish)),
        busy=busy, memory_used=mem, devices=names, semantics="asap", violations=violations,
    )


def devices_in_node_order(problem: LatencyProblem, placement: Mapping[Hashable, Any]) -> list[Any]:
    """The devices a ``{node id: device}`` placement gives, by node position.

    Parameters
    ----------
    problem : LatencyProblem
    placement : mapping
        A device (in any form; not checked here) for every node id of ``problem``.

    Returns
    -------
    list
        ``placement[v]`` for each node id ``v`` in position order.

    Raises
    ------
    InvalidArgumentError
        A node of ``problem`` without a device, or a node id that ``problem`` does not have.

    Examples
    --------
    >>> import stagecut as sc
    >>> from stagecut.latency import Devices, LatencyProblem
    >>> p = LatencyProblem(sc.Graph.chain([1.0, 2.0]), Devices.pcie_star(2))
    >>> devices_in_node_order(p, {1: "cpu", 0: "accelerator:0"})
    ['accelerator:0', 'cpu']
    >>> devices_in_node_order(p, {0: "cpu"})
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidArgumentError: placement: node 1 has no device
    """
    missing = [v for v in problem.ids if v not in placement]
    if missing:
        raise InvalidArgumentError(f"placement: node {shown(missing[0])} has no device")
    extra = [v for v in placement if v not in problem.index]
    if extra:
        raise InvalidArgumentError(f"placement: unknown node {shown(extra[0])}")
    return [placement[v] for v in problem.ids]


def _positions(problem: LatencyProblem, placement: Mapping[Hashable, Any] | Sequence[Any]) -> list[int]:
    names = problem.devices.names
    if isinstance(placement, Mapping):
        seq = devices_in_node_order(problem, placement)
    elif isinstance(placement, Sequence) and not isinstance(placement, str):
        seq = list(placement)
    else:
        raise InvalidArgumentError(f"placement: expected {{node id: device name}}, got {shown(placement)}")
    out = []
    for i, d in enumerate(seq):
        if isinstance(d, str):
            if d not in names:
                raise InvalidArgumentError(f"placement: node {shown(problem.ids[i])} is on {d!r}, which is not "
                                           f"a device (devices: {', '.join(names)})")
            out.append(names.index(d))
        elif isinstance(d, (int, np.integer)) and not isinstance(d, bool):
            out.append(int(d))
        else:
            raise InvalidArgumentError(f"placement: node {shown(problem.ids[i])}: expected a device name, "
                                       f"got {shown(d)}")
    return out


def evaluate_schedule(graph: Graph | LatencyProblem, devices: Devices | None,
                      placement: Mapping[Hashable, Any] | Sequence[Any],
                      order: Mapping[str, Sequence[Hashable]] | None = None,
                      output_bytes: Mapping[Hashable, float] | str | None = None) -> Schedule:
    """Evaluate a placement under the ASAP semantics.

    Parameters
    ----------
    graph : Graph or LatencyProblem
        The graph (with ``devices``), or a problem already built (``devices`` then ``None``).
    devices : Devices or None
    placement : mapping of node id to device name (or device position), or a sequence by node position
    order : mapping of device name to its node ids in run order, optional
        Default: :func:`rank_round_robin`.
    output_bytes : see :class:`~stagecut.latency.LatencyProblem`.

    Returns
    -------
    Schedule
        ``status="feasible"`` (evaluated); limits the placement breaks are in ``violations``.

    Raises
    ------
    InvalidArgumentError
        A node without a device or on one that cannot run it, an unknown device, an order that
        misses a node or contradicts the DAG.

    Examples
    --------
    >>> import stagecut as sc
    >>> from stagecut.latency import Devices
    >>> g = sc.Graph.chain([2.0, 2.0, 2.0], cpu_costs=[1.0, 9.0, 1.0], comm=1.0)
    >>> s = evaluate_schedule(g, Devices.pcie_star(1), {0: "cpu", 1: "accelerator:0", 2: "cpu"})
    >>> s.objective, s.critical_path
    (6.0, (0, 1, 2))
    """
    t0 = time.perf_counter()
    if isinstance(graph, LatencyProblem):
        problem = graph
    else:
        if devices is None:
            raise InvalidArgumentError("devices: needed with a graph (or pass a LatencyProblem)")
        problem = LatencyProblem(graph, devices, output_bytes)
    dev = _positions(problem, placement)
    seq: list[list[int]] | None = None
    if order is not None:
        if not isinstance(order, Mapping):
            raise InvalidArgumentError(f"order: expected {{device name: [node ids]}}, got {shown(order)}")
        seq = [[] for _ in range(problem.num_devices)]
        for name, ids in order.items():
            d = problem.devices.index(name)
            for v in ids:
                if v not in problem.index:
                    raise InvalidArgumentError(f"order: unknown node {shown(v)} on {name}")
                seq[d].append(problem.index[v])
    return schedule_from(problem, dev, seq, method="evaluate", runtime_s=time.perf_counter() - t0)
