"""The PCIe-star latency semantics of the throughput workloads' authors ("pieces").

This is the semantics of the latency inputs in ``../shared/workloads/latency-inputs`` (the
authors' ``computeLatency``), on the PCIe star of :meth:`Devices.pcie_star
<stagecut.latency.Devices.pcie_star>` (one CPU pool with unbounded parallelism and identical
accelerators; a node's ``comm`` is the time to move its output between an accelerator and CPU
memory):

* **Pieces.** An accelerator's nodes are cut into contiguous pieces by data dependence: a node
  of the accelerator belongs to piece ``1 + h``, where ``h`` is the largest number of times a
  path of the DAG ending at the node leaves the accelerator and comes back. Every piece is
  convex, and piece ``p + 1`` depends on piece ``p``, so the pieces of a device run one after
  the other. An accelerator whose nodes form one convex set is one piece. Pieces of two
  accelerators that feed each other (a cycle) cannot be timed: such a placement is refused, as
  the authors' code refuses it.
* **A piece** waits for every *external input* (a node outside the piece with an edge into it,
  whichever device runs it: another piece of the same accelerator counts too) to be released,
  then pays *in-communication* (the ``comm`` of each external input, once however many of its
  edges enter the piece), its nodes' accelerator times (*compute*) and *out-communication* (the
  ``comm`` of each node of the piece with an edge leaving the piece, once), and releases all its
  nodes' outputs at its end.
* **A CPU node** starts when its last input is released (no communication on the CPU side: the
  accelerators pay it) and releases its output when it finishes; the pool runs any number of
  nodes at once.

The makespan is the latest release. Transfers go through CPU memory: an input enters a piece
from the CPU (``source`` is the CPU device, ``"host"`` without one) and an output leaves it to
the CPU, so a tensor between two accelerators is paid twice, once by each.

Times of a node inside a piece (the :class:`~stagecut.latency.Schedule` fields): the piece is
*ready* when its last external input is released; its in-transfers run back to back from then
(inputs in node order), its nodes then compute back to back in a topological order (that is
``order[device]``), and its out-transfers follow. ``start[v]``/``finish[v]`` are the bounds of
``v``'s own compute slot; ``v``'s output is released at the piece's *end* (its last
out-transfer's finish), which is what consumers outside the piece wait for. The makespan is
also the largest ``finish`` (a piece that releases after its last compute finish has a consumer
that finishes no earlier).

>>> import stagecut as sc
>>> from stagecut.latency import Devices, LatencyProblem
>>> g = sc.Graph.chain([2.0, 3.0, 1.0], cpu_costs=[10.0, 10.0, 4.0], comm=0.5)
>>> p = LatencyProblem(g, Devices.pcie_star(1))
>>> s = evaluate_pieces(p, {0: "accelerator:0", 1: "accelerator:0", 2: "cpu"})
>>> s.objective, s.finish[1], s.start[2], s.busy["accelerator:0"]   # 2 + 3 + out 0.5, then 4
(9.5, 5.0, 5.5, 5.5)
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stagecut.errors import InvalidArgumentError
from stagecut.graph import ACCELERATOR, CPU, Graph, cycle_among
from stagecut.graph_check import check_graph
from stagecut.latency.model.evaluate import check_placement, devices_in_node_order
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule, Transfer, stages_of
from stagecut.results import Status
from stagecut.units import bytes_text
from stagecut.validate import shown

__all__ = ["Piece", "PiecesTiming", "evaluate_pieces", "pieces_timing", "pieces_schedule", "check_pcie",
           "placement_positions"]


@dataclass(frozen=True)
class Piece:
    """One piece of an accelerator (positions of nodes; times in the graph's unit).

    ``device``: device position; ``index``: 1 for the first piece of the device...; ``nodes``:
    its nodes in run order; ``inputs``: external inputs (node positions, ascending);
    ``outputs``: its nodes with an edge leaving it; ``ready``, ``comm_in``, ``compute``,
    ``comm_out``, ``end``: see the module docs (``end = ready + comm_in + compute + comm_out``).
    """

    device: int
    index: int
    nodes: tuple[int, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    ready: float
    comm_in: float
    compute: float
    comm_out: float
    end: float


@dataclass(frozen=True)
class PiecesTiming:
    """The timing of a placement: per node position ``start``, ``finish`` (its compute) and
    ``release`` (when its output is available), the ``pieces`` in processing order, the
    ``makespan`` and ``crit`` (node positions on a critical path, first to last)."""

    device: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    release: np.ndarray
    pieces: tuple[Piece, ...]
    makespan: float
    crit: tuple[int, ...]


def check_pcie(problem: LatencyProblem) -> None:
    """Refuse a problem whose devices are not a PCIe star.

    Raises
    ------
    InvalidArgumentError
        The devices were not built by :meth:`Devices.pcie_star <stagecut.latency.Devices.pcie_star>`
        (the pieces semantics is defined on the PCIe star only).
    """
    if not isinstance(problem, LatencyProblem):
        raise InvalidArgumentError(f"problem: expected a LatencyProblem, got {shown(problem)}")
    if problem.devices.topology != "pcie" or problem.devices.unit != "relative":
        raise InvalidArgumentError(
            f"devices: the pieces semantics needs the PCIe star (Devices.pcie_star), got a "
            f"{problem.devices.topology!r} topology")


def _piece_numbers(problem: LatencyProblem, a: np.ndarray) -> np.ndarray:
    """Per node, its piece number on its accelerator (0 for a node on a parallel device)."""
    n = len(problem)
    out = np.zeros(n, dtype=np.int64)
    pred = problem.pred
    for d in np.unique(a):
        if problem.parallel[d]:
            continue
        inside = a == d
        h = [0] * n
        for v in problem.order:
            best = 1 if inside[v] else 0
            for u in pred[v]:
                x = h[u] + (1 if inside[v] and not inside[u] else 0)
                if x > best:
                    best = x
            h[v] = best
        for w in np.flatnonzero(inside).tolist():
            out[w] = h[w]
    return out


def pieces_timing(problem: LatencyProblem, dev: Sequence[int] | np.ndarray) -> PiecesTiming:
    """The timing of a placement (a device position per node position) under the pieces
    semantics (see the module docs).

    Raises
    ------
    InvalidArgumentError
        Not a PCIe star; a bad placement (a node on a device that cannot run it, naming it);
        pieces that wait for each other in a cycle (two convex sets on two accelerators, each
        feeding the other: the authors' code fails on it too), naming them.
    """
    check_pcie(problem)
    a = check_placement(problem, dev)
    n = len(problem)
    own = problem.times[np.arange(n), a]
    size = problem.size
    num = _piece_numbers(problem, a)
    rank = np.empty(n, dtype=np.int64)
    rank[problem.order] = np.arange(n)
    # groups: a CPU node alone, or a piece; key -> members in topological order
    key: list[tuple[int, int]] = [(-1, v) if problem.parallel[a[v]] else (int(a[v]), int(num[v])) for v in range(n)]
    members: dict[tuple[int, int], list[int]] = {}
    for v in problem.order:
        members.setdefault(key[v], []).append(v)
    gsucc: dict[tuple[int, int], set[tuple[int, int]]] = {k: set() for k in members}
    indeg = dict.fromkeys(members, 0)
    for u in range(n):
        for v in problem.succ[u]:
            if key[u] != key[v] and key[v] not in gsucc[key[u]]:
                gsucc[key[u]].add(key[v])
                indeg[key[v]] += 1
    heap = [(rank[ms[0]], k) for k, ms in members.items() if indeg[k] == 0]
    heapq.heapify(heap)
    start, finish, release = np.zeros(n), np.zeros(n), np.zeros(n)
    pieces: list[Piece] = []
    binding: dict[tuple[int, int], int] = {}  # group -> the input released last (-1: none)
    while heap:
        _, k = heapq.heappop(heap)
        ms = members[k]
        if k[0] < 0:
            v = ms[0]
            s, b = 0.0, -1
            for u in problem.pred[v]:
                if b < 0 or release[u] > s:
                    s, b = float(release[u]), u
            start[v], finish[v] = s, s + own[v]
            release[v] = finish[v]
        else:
            inside = set(ms)
            ins = sorted({u for v in ms for u in problem.pred[v] if u not in inside})
            outs = tuple(v for v in ms if any(w not in inside for w in problem.succ[v]))
            ready, b = 0.0, -1
            for u in ins:
                if b < 0 or release[u] > ready:
                    ready, b = float(release[u]), u
            cin = float(sum(size[u] for u in ins))
            t = ready + cin
            for v in ms:
                start[v], t = t, t + float(own[v])
                finish[v] = t
            cout = float(sum(size[v] for v in outs))
            end = t + cout
            release[ms] = end
            pieces.append(Piece(device=k[0], index=k[1], nodes=tuple(ms), inputs=tuple(ins), outputs=outs,
                                ready=ready, comm_in=cin, compute=float(own[ms].sum()), comm_out=cout, end=end))
        binding[k] = b
        for k2 in sorted(gsucc[k], key=lambda x: rank[members[x][0]]):
            indeg[k2] -= 1
            if indeg[k2] == 0:
                heapq.heappush(heap, (rank[members[k2][0]], k2))
    if len(binding) < len(members):
        _refuse_cycle(problem, members, gsucc, binding)
    makespan = float(release.max()) if n else 0.0
    crit: list[int] = []
    if n:
        v = int(np.argmax(release))
        while True:
            k = key[v]
            crit[:0] = members[k]
            b = binding[k]
            if b < 0 or release[b] <= 0:
                break
            v = b
    return PiecesTiming(device=a, start=start, finish=finish, release=release, pieces=tuple(pieces),
                        makespan=makespan, crit=tuple(crit))


def _refuse_cycle(problem: LatencyProblem, members: Mapping[tuple[int, int], list[int]],
                  gsucc: Mapping[tuple[int, int], set[tuple[int, int]]], done: Mapping[tuple[int, int], int]) -> None:
    """Name the pieces that wait for each other (the authors' code fails on such a placement)."""
    rest = [k for k in members if k not in done]
    gpred: dict[tuple[int, int], list[tuple[int, int]]] = {k: [] for k in rest}
    for k in rest:
        for k2 in gsucc[k]:
            if k2 in gpred:
                gpred[k2].append(k)
    names = problem.devices.names

    def label(k: tuple[int, int]) -> str:
        return f"piece {k[1]} of {names[k[0]]} {{{', '.join(shown(problem.ids[v]) for v in members[k][:4])}" \
            f"{', ...' if len(members[k]) > 4 else ''}}}" if k[0] >= 0 else f"node {shown(problem.ids[k[1]])}"

    cyc = cycle_among(rest, gpred)
    raise InvalidArgumentError("placement: its pieces wait for each other in a cycle (" +
                               " -> ".join(label(k) for k in [*cyc, cyc[0]]) +
                               "): the pieces semantics cannot time it (each piece needs all its inputs first)")


def _host(problem: LatencyProblem) -> str:
    par = np.flatnonzero(problem.parallel)
    return problem.devices.names[int(par[0])] if par.size else "host"


def _class_violations(problem: LatencyProblem, a: np.ndarray) -> list[str]:
    where: dict[Hashable, set[int]] = {}
    for i, node in enumerate(problem.graph.nodes):
        if node.colocation is not None:
            where.setdefault(node.colocation, set()).add(int(a[i]))
    names = problem.devices.names
    return [f"colour class {shown(c)} is split over {', '.join(names[d] for d in sorted(ds))}"
            for c, ds in where.items() if len(ds) > 1]


def pieces_schedule(problem: LatencyProblem, dev: Sequence[int] | np.ndarray, *, method: str,
                    status: Status = "feasible", lower_bound: float | None = None, seed: int | None = None,
                    runtime_s: float = 0.0, stats: Mapping[str, Any] | None = None, notes: Sequence[str] = (),
                    violations: Sequence[str] = ()) -> Schedule:
    """The :class:`~stagecut.latency.Schedule` (``semantics="pieces"``) of a placement (a device
    position per node position), timed by :func:`pieces_timing`: every solver's answer is
    re-scored through it. ``lower_bound`` is capped at the makespan.

    Raises
    ------
    InvalidArgumentError
        See :func:`pieces_timing`.
    """
    tm = pieces_timing(problem, dev)
    a = tm.device
    n, names, ids = len(problem), problem.devices.names, problem.ids
    host = _host(problem)
    transfers: list[Transfer] = []
    busy: dict[str, float] = {}
    order: dict[str, list[int]] = {}
    for pc in sorted(tm.pieces, key=lambda p: (p.device, p.index)):
        name = names[pc.device]
        t = pc.ready
        for u in pc.inputs:
            dt = float(problem.size[u])
            transfers.append(Transfer(node=ids[u], source=host, target=name, start=t, finish=t + dt))
            t += dt
        t = pc.ready + pc.comm_in + pc.compute
        for v in pc.outputs:
            dt = float(problem.size[v])
            transfers.append(Transfer(node=ids[v], source=name, target=host, start=t, finish=t + dt))
            t += dt
        busy[name] = busy.get(name, 0.0) + pc.comm_in + pc.compute + pc.comm_out
        order.setdefault(name, []).extend(pc.nodes)
    own = problem.times[np.arange(n), a]
    rank = np.empty(n, dtype=np.int64)
    rank[problem.order] = np.arange(n)
    for d in np.flatnonzero(problem.parallel):
        on = [int(v) for v in np.flatnonzero(a == d)]
        if on:
            busy[names[d]] = float(own[on].sum())
            order[names[d]] = sorted(on, key=lambda v: (tm.start[v], rank[v]))
    used = sorted({int(d) for d in a})
    busy = {names[d]: busy[names[d]] for d in used}
    mem = {names[d]: float(problem.memory[a == d].sum()) for d in used}
    viol = [f"{names[d]} holds {bytes_text(mem[names[d]])}, over its {bytes_text(problem.capacity[d])}"
            for d in used if mem[names[d]] > problem.capacity[d]]
    viol += _class_violations(problem, a) + list(violations)
    order_ids = {names[d]: tuple(ids[v] for v in order[names[d]]) for d in used}
    bound = None if lower_bound is None else min(float(lower_bound), tm.makespan)
    per_dev = [sum(1 for p in tm.pieces if p.device == d) for d in used if not problem.parallel[d]]
    st: dict[str, Any] = {"pieces": len(tm.pieces), "max_pieces_per_device": max(per_dev, default=0)}
    st.update(stats or {})
    return Schedule(
        objective=tm.makespan, status=status, lower_bound=bound, method=method, seed=seed, runtime_s=runtime_s,
        stats=st, notes=tuple(notes), stages=stages_of(names, order_ids, busy, mem),
        placement={ids[i]: names[a[i]] for i in range(n)}, order=order_ids,
        start={ids[i]: float(tm.start[i]) for i in range(n)}, finish={ids[i]: float(tm.finish[i]) for i in range(n)},
        transfers=tuple(sorted(transfers, key=lambda t: (t.start, t.finish))),
        critical_path=tuple(ids[i] for i in tm.crit), busy=busy, memory_used=mem, devices=names,
        semantics="pieces", violations=tuple(viol))


def _device_position(problem: LatencyProblem, value: Any, node: Any) -> int:
    """A device given as a name, a position or a split pair ``(kind, index)``."""
    names = problem.devices.names
    if isinstance(value, str):
        if value not in names:
            raise InvalidArgumentError(f"placement: node {shown(node)} is on {value!r}, which is not a device "
                                       f"(devices: {', '.join(names)})")
        return names.index(value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) \
            and isinstance(value[1], (int, np.integer)) and not isinstance(value[1], bool):
        kind, idx = value
        if kind == CPU:  # every CPU of a split is the one pool
            par = np.flatnonzero(problem.parallel)
            if par.size:
                return int(par[0])
        elif kind == ACCELERATOR:
            seq = np.flatnonzero(~problem.parallel)
            if 0 <= idx < seq.size:
                return int(seq[idx])
        raise InvalidArgumentError(f"placement: node {shown(node)} is on {shown(value)}, which is not a device "
                                   f"(devices: {', '.join(names)})")
    raise InvalidArgumentError(f"placement: node {shown(node)}: expected a device name, a device position or "
                               f"a (kind, index) pair, got {shown(value)}")


def placement_positions(problem: LatencyProblem, placement: Any) -> np.ndarray:
    """A placement in any accepted form (see :func:`evaluate_pieces`) as device positions.

    Raises
    ------
    InvalidArgumentError
        A node missing or unknown, a device that does not exist or cannot run the node.
    """
    if isinstance(placement, Schedule):
        placement = placement.placement
    if isinstance(placement, Mapping):
        seq = devices_in_node_order(problem, placement)
    elif isinstance(placement, np.ndarray) or (isinstance(placement, Sequence) and not isinstance(placement, str)):
        seq = list(placement)
        if len(seq) != len(problem):
            raise InvalidArgumentError(f"placement: expected {len(problem)} devices (one per node), got {len(seq)}")
    else:
        raise InvalidArgumentError(f"placement: expected {{node id: device}}, got {shown(placement)}")
    return check_placement(problem, [_device_position(problem, d, problem.ids[i]) for i, d in enumerate(seq)])


def _accelerators_named(graph: Graph, placement: Any) -> int:
    """How many accelerators a placement given with a graph names (1 + the largest index)."""
    if isinstance(placement, Schedule):
        placement = placement.placement
    values = placement.values() if isinstance(placement, Mapping) else \
        (placement if isinstance(placement, (Sequence, np.ndarray)) and not isinstance(placement, str) else ())
    k = 0
    for d in values:
        if isinstance(d, tuple) and len(d) == 2 and d[0] == ACCELERATOR and isinstance(d[1], (int, np.integer)):
            k = max(k, int(d[1]) + 1)
        elif isinstance(d, str) and d.startswith(ACCELERATOR + ":") and d[len(ACCELERATOR) + 1:].isdigit():
            k = max(k, int(d[len(ACCELERATOR) + 1:]) + 1)
        elif isinstance(d, (int, np.integer)) and not isinstance(d, bool):
            k = max(k, int(d))
    return k


def evaluate_pieces(graph: Graph | LatencyProblem, placement: Any) -> Schedule:
    """Evaluate a placement under the authors' PCIe-star semantics (see the module docs).

    Parameters
    ----------
    graph : Graph or LatencyProblem
        A problem on a PCIe star, or a graph: then the star of its workload file (``maxFPGAs``
        accelerators of ``maxSizePerFPGA`` bytes and the CPU pool), with as many more
        accelerators as the placement names (a violation says so).
    placement : mapping or sequence
        ``{node id: device}`` (or one device per node position, or a Schedule), a device being
        a name (``"cpu"``, ``"accelerator:2"``), a position in ``devices``, or a pair
        ``(kind, index)`` as :func:`stagecut.read_split` gives (every ``("cpu", i)`` is the pool;
        ``("accelerator", i)`` is ``accelerator:i``).

    Returns
    -------
    Schedule
        ``semantics="pieces"``, ``status="feasible"`` (evaluated), ``method="evaluate"``; the
        makespan, start/finish of every node's compute and every transfer, per-device order
        (pieces in order, each in a topological order), critical path, busy time (pieces:
        in + compute + out; the CPU pool: its total work) and memory; ``violations`` lists an
        accelerator over its memory, a colour class split over devices, accelerators beyond
        the file's ``maxFPGAs``; ``stats["pieces"]``, ``stats["max_pieces_per_device"]``.

    Raises
    ------
    InvalidArgumentError
        A problem that is not a PCIe star; a node missing from the placement or unknown; a
        device that does not exist or cannot run the node (naming the node); pieces that wait
        for each other in a cycle (see :func:`pieces_timing`).
    InvalidGraphError
        A bad workload default (``maxFPGAs``), a node no device can run.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([1.0, 1.0, 1.0], cpu_costs=[3.0, 3.0, 3.0], comm=1.0)
    >>> s = evaluate_pieces(g, {0: ("accelerator", 0), 1: ("cpu", 0), 2: ("accelerator", 0)})
    >>> s.objective, s.stats["pieces"], s.order["accelerator:0"]   # (1 + out 1), 3, (in 1 + 1)
    (7.0, 2, (0, 2))
    """
    t0 = time.perf_counter()
    extra: list[str] = []
    if isinstance(graph, LatencyProblem):
        problem = graph
    else:
        check_graph(graph)
        k_file = graph.defaults.get("accelerators")
        needed = _accelerators_named(graph, placement)
        k = max(needed, k_file if isinstance(k_file, int) else 0)
        if isinstance(k_file, int) and needed > k_file:
            extra.append(f"the placement uses {needed} accelerators, the file allows {k_file} (maxFPGAs)")
        mem = graph.defaults.get("memory", math.inf)
        problem = LatencyProblem.from_workload(graph, accelerators=k, memory=mem)
    check_pcie(problem)
    dev = placement_positions(problem, placement)
    return pieces_schedule(problem, dev, method="evaluate", violations=extra,
                           runtime_s=time.perf_counter() - t0)
