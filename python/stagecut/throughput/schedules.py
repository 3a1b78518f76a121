"""Pipeline schedules as timelines: 1F1B and GPipe on a contiguous split, and the virtual-stage
pipeline of a non-contiguous split (Tarnawski et al., NeurIPS 2020, Section 5.2).

Every schedule is simulated *as soon as possible* with a fixed order of work on each device: a
piece of work starts when its device has finished the previous one in its order and its inputs
are there. The result is a :class:`Timeline` of :class:`Slot` records ``(device, stage,
microbatch, phase, start, end)`` with a ``label`` (``"F3"``, ``"B3"``): the records
:func:`stagecut.plot.plot_timeline` draws, one row per device (:meth:`Timeline.rows` gives
``(device, start, end, label)`` tuples for any other plotting).

Contiguous splits (stages ``0 .. S-1``, per-stage forward and backward times ``FW_i``, ``BW_i``
that already include the stage's communication, as the max-load model counts it; an optional
link ``latency`` delays each transfer between neighbouring stages without occupying a device):

:func:`one_f_one_b`
    PipeDream-Flush's 1F1B: stage ``i`` runs ``S - 1 - i`` warm-up forwards, then alternates one
    forward and one backward, then drains its backwards. Without latency its steady-state time
    per microbatch is ``max_i (FW_i + BW_i)`` (the PipeDream objective, the evaluator's).
:func:`gpipe`
    GPipe: every stage runs the forwards of all microbatches, then their backwards (last
    microbatch first). Without latency a batch of ``m`` takes
    ``sum FW + sum BW + (m - 1) (max FW + max BW)``: ``max FW + max BW`` per extra microbatch.
:func:`pipeline_timeline`
    Either one on a split, with the stages' FW and BW from
    :func:`~stagecut.throughput.gpipe.training_loads`.

Non-contiguous splits (:func:`pieces`, :func:`pieces_timeline`): each device's nodes are cut
into *pieces* so that the graph of pieces is acyclic; ordered topologically, the pieces are the
virtual stages of a pipeline. A node's *rank* is the largest number of device changes on a path
into it; the nodes of one device and one rank form a piece (every edge between pieces raises
the rank, so the pieces' graph is acyclic), and two pieces of one device are merged while that
keeps it acyclic (so no two pieces of a device can be merged; a contiguous split gets one piece
per device). A piece's time is its nodes' compute plus the device's communication terms it
causes: a producer's outgoing tensor in the producer's piece, an incoming tensor in the first
piece that reads it, so a device's pieces add up to its load. In round ``t`` the piece of
virtual stage ``s`` processes microbatch ``t - s``; each device runs its pieces of a round in
stage order. Rounds of the largest device load ``L`` in lockstep would satisfy every
dependency (a piece's inputs come from earlier stages, so from earlier rounds); as soon as
possible in the same order is never later, and the most loaded device needs ``L`` per sample,
so the steady-state time per sample is ``L``, the split's max load (the evaluator's
objective). A training graph is
pipelined the same way as one DAG (forward and backward pieces; no flush).

Examples
--------
>>> tl = one_f_one_b([1.0, 1.0], [2.0, 2.0], 2)
>>> [(s.device, s.label, s.start, s.end) for s in tl.slots]  # doctest: +NORMALIZE_WHITESPACE
[('stage 0', 'F0', 0.0, 1.0), ('stage 0', 'F1', 1.0, 2.0), ('stage 0', 'B0', 4.0, 6.0),
 ('stage 0', 'B1', 7.0, 9.0), ('stage 1', 'F0', 1.0, 2.0), ('stage 1', 'B0', 2.0, 4.0),
 ('stage 1', 'F1', 4.0, 5.0), ('stage 1', 'B1', 5.0, 7.0)]
>>> tl.makespan, gpipe([1.0, 1.0], [2.0, 2.0], 2).makespan
(9.0, 9.0)
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import networkx as nx

from stagecut.errors import InvalidArgumentError, internal_error
from stagecut.graph import ACCELERATOR, Graph, NodeId, kahn_order
from stagecut.throughput.evaluate import evaluate, is_contiguous
from stagecut.throughput.gpipe import training_loads
from stagecut.throughput.problem import ThroughputProblem
from stagecut.validate import check_int, check_number

__all__ = ["Slot", "Timeline", "Piece", "one_f_one_b", "gpipe", "pipeline_timeline", "pieces", "pieces_timeline"]

Phase = Literal["forward", "backward"]
Device = tuple[str, int]
_Op = tuple[int, int, str]  # (stage, microbatch, "F" or "B")


@dataclass(frozen=True)
class Slot:
    """One bar of a timeline: ``device`` runs ``phase`` of ``microbatch`` at ``stage`` (a
    pipeline stage, or a virtual stage: a piece) from ``start`` to ``end`` (the input's time
    unit)."""

    device: str
    stage: int
    microbatch: int
    phase: Phase
    start: float
    end: float

    @property
    def label(self) -> str:
        """``"F3"`` (forward of microbatch 3), ``"B3"``."""
        return f"{self.phase[0].upper()}{self.microbatch}"


@dataclass(frozen=True, kw_only=True)
class Timeline:
    """A simulated schedule of ``microbatches`` microbatches.

    Attributes
    ----------
    schedule : str
        ``"1f1b"``, ``"gpipe"`` or ``"pieces"``.
    devices : tuple of str
        The devices, in pipeline order (the rows of a plot).
    stages : int
        The number of pipeline stages (of pieces for ``"pieces"``).
    microbatches : int
    slots : tuple of Slot
        By device (in ``devices`` order), then in the device's order of work.
    """

    schedule: str
    devices: tuple[str, ...]
    stages: int
    microbatches: int
    slots: tuple[Slot, ...]

    @property
    def makespan(self) -> float:
        """When the last slot ends."""
        return max((s.end for s in self.slots), default=0.0)

    def completion(self) -> tuple[float, ...]:
        """When each microbatch's last slot ends."""
        done = [0.0] * self.microbatches
        for s in self.slots:
            done[s.microbatch] = max(done[s.microbatch], s.end)
        return tuple(done)

    def steady_state(self) -> float:
        """Time per microbatch between fill and drain: ``(C[m-1-S] - C[S]) / (m - 1 - 2S)``, ``C``
        the microbatches' completion times in increasing order, ``S`` the number of (virtual)
        stages; needs ``m >= 2S + 2``. For a schedule that streams microbatches (``"1f1b"``,
        ``"pieces"``); a GPipe batch finishes its microbatches in a burst at the end (compare
        makespans instead: one more microbatch adds ``max FW + max BW``).

        Raises
        ------
        InvalidArgumentError
            A GPipe timeline, or fewer than ``2S + 2`` microbatches.
        """
        if self.schedule == "gpipe":
            raise InvalidArgumentError("a GPipe batch has no steady state between fill and drain; compare the "
                                       "makespans of m and m + 1 microbatches")
        k, m = self.stages, self.microbatches
        if m < 2 * k + 2:
            raise InvalidArgumentError(f"steady_state needs at least 2 * stages + 2 = {2 * k + 2} microbatches, "
                                       f"got {m}")
        c = sorted(self.completion())
        return (c[m - 1 - k] - c[k]) / (m - 1 - 2 * k)

    def rows(self) -> list[tuple[str, float, float, str]]:
        """``(device, start, end, label)`` of every slot, for plotting."""
        return [(s.device, s.start, s.end, s.label) for s in self.slots]


def _times(values: Sequence[float], name: str) -> list[float]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise InvalidArgumentError(f"{name} must be a sequence of times, got {type(values).__name__}")
    return [check_number(v, f"{name}[{i}]", error=InvalidArgumentError) for i, v in enumerate(values)]


def _stage_args(forward: Sequence[float], backward: Sequence[float], microbatches: int,
                latency: float | Sequence[float], devices: Sequence[str] | None
                ) -> tuple[list[float], list[float], int, list[float], list[str]]:
    fw, bw = _times(forward, "forward"), _times(backward, "backward")
    if not fw or len(fw) != len(bw):
        raise InvalidArgumentError(f"forward and backward must give one time per stage (at least one), got "
                                   f"{len(fw)} and {len(bw)}")
    m = check_int(microbatches, "microbatches", minimum=1)
    n = len(fw)
    if isinstance(latency, (int, float)) and not isinstance(latency, bool):
        lat = [check_number(latency, "latency", error=InvalidArgumentError)] * (n - 1)
    else:
        lat = _times(latency, "latency")  # type: ignore[arg-type]
        if len(lat) != n - 1:
            raise InvalidArgumentError(f"latency must give one time per link between stages ({n - 1}), got {len(lat)}")
    names = [f"stage {i}" for i in range(n)] if devices is None else [str(d) for d in devices]
    if len(names) != n:
        raise InvalidArgumentError(f"devices must name the {n} stages, got {len(names)}")
    return fw, bw, m, lat, names


def _run(order: list[list[_Op]], duration: Mapping[_Op, float], deps: Mapping[_Op, list[tuple[_Op, float]]]
         ) -> dict[_Op, tuple[float, float]]:
    """ASAP times of the ops, each device running its ``order`` list in turn; an op starts when
    its device is free and every dependency ``(op, delay)`` has ended ``delay`` earlier."""
    times: dict[_Op, tuple[float, float]] = {}
    at = [0] * len(order)
    free = [0.0] * len(order)
    left = sum(len(o) for o in order)
    while left:
        progress = False
        for d, ops in enumerate(order):
            while at[d] < len(ops):
                op = ops[at[d]]
                ready = [times[p][1] + delay for p, delay in deps.get(op, ()) if p in times]
                if len(ready) < len(deps.get(op, ())):
                    break
                start = max([free[d], *ready])
                times[op] = (start, start + duration[op])
                free[d] = start + duration[op]
                at[d] += 1
                left -= 1
                progress = True
        if not progress:
            raise internal_error("a pipeline schedule deadlocked")
    return times


def _stage_timeline(schedule: str, fw: list[float], bw: list[float], m: int, lat: list[float], names: list[str],
                    order: list[list[_Op]]) -> Timeline:
    n = len(fw)
    duration: dict[_Op, float] = {}
    deps: dict[_Op, list[tuple[_Op, float]]] = {}
    for i in range(n):
        for j in range(m):
            duration[(i, j, "F")], duration[(i, j, "B")] = fw[i], bw[i]
            if i:
                deps[(i, j, "F")] = [((i - 1, j, "F"), lat[i - 1])]
            deps[(i, j, "B")] = [((i + 1, j, "B"), lat[i])] if i + 1 < n else [((i, j, "F"), 0.0)]
    times = _run(order, duration, deps)
    slots = tuple(Slot(device=names[i], stage=i, microbatch=j, phase="forward" if p == "F" else "backward",
                       start=times[(i, j, p)][0], end=times[(i, j, p)][1])
                  for i, ops in enumerate(order) for (_, j, p) in ops)
    return Timeline(schedule=schedule, devices=tuple(names), stages=n, microbatches=m, slots=slots)


def one_f_one_b(forward: Sequence[float], backward: Sequence[float], microbatches: int, *,
                latency: float | Sequence[float] = 0.0, devices: Sequence[str] | None = None) -> Timeline:
    """The 1F1B (PipeDream-Flush) schedule of ``microbatches`` microbatches on a pipeline.

    Parameters
    ----------
    forward, backward : sequence of float
        Each stage's forward and backward time per microbatch (communication included).
    microbatches : int
    latency : float or sequence of float
        The delay of a transfer on each link between consecutive stages (one value for all).
    devices : sequence of str, optional
        The stages' device names (default ``"stage 0"``...).

    Returns
    -------
    Timeline
        Schedule ``"1f1b"``.

    Raises
    ------
    InvalidArgumentError
        Lengths that disagree, a negative or non-finite time, ``microbatches < 1``.

    Examples
    --------
    >>> tl = one_f_one_b([1.0, 2.0, 1.0], [2.0, 2.0, 2.0], 8)
    >>> tl.makespan, one_f_one_b([1.0, 2.0, 1.0], [2.0, 2.0, 2.0], 9).makespan  # + max(FW + BW)
    (37.0, 41.0)
    >>> tl.steady_state()
    4.0
    """
    fw, bw, m, lat, names = _stage_args(forward, backward, microbatches, latency, devices)
    n = len(fw)
    order = []
    for i in range(n):
        warm = min(n - 1 - i, m)
        ops: list[_Op] = [(i, j, "F") for j in range(warm)]
        for j in range(m - warm):
            ops += [(i, warm + j, "F"), (i, j, "B")]
        ops += [(i, j, "B") for j in range(m - warm, m)]
        order.append(ops)
    return _stage_timeline("1f1b", fw, bw, m, lat, names, order)


def gpipe(forward: Sequence[float], backward: Sequence[float], microbatches: int, *,
          latency: float | Sequence[float] = 0.0, devices: Sequence[str] | None = None) -> Timeline:
    """The GPipe schedule: all forwards of the batch, then all backwards (last microbatch first).

    Parameters
    ----------
    forward, backward, microbatches, latency, devices
        As :func:`one_f_one_b`.

    Returns
    -------
    Timeline
        Schedule ``"gpipe"``.

    Raises
    ------
    InvalidArgumentError
        As :func:`one_f_one_b`.

    Examples
    --------
    >>> tl = gpipe([1.0, 2.0, 1.0], [2.0, 2.0, 2.0], 8)  # 4 + 6 + 7 * (2 + 2)
    >>> tl.makespan, gpipe([1.0, 2.0, 1.0], [2.0, 2.0, 2.0], 9).makespan
    (38.0, 42.0)
    """
    fw, bw, m, lat, names = _stage_args(forward, backward, microbatches, latency, devices)
    order = [[(i, j, "F") for j in range(m)] + [(i, j, "B") for j in reversed(range(m))] for i in range(len(fw))]
    return _stage_timeline("gpipe", fw, bw, m, lat, names, order)


def _dev_of(graph: Graph, split: Mapping[Hashable, tuple[str, int]]) -> list[Device]:
    evaluate(graph, split)  # checks the split (every node, (kind, index) pairs)
    return [(split[n.id][0], int(split[n.id][1])) for n in graph.nodes]


def _name(d: Device) -> str:
    return f"{d[0]}:{d[1]}"


def pipeline_timeline(graph: Graph | ThroughputProblem, split: Mapping[Hashable, tuple[str, int]],
                      microbatches: int, *, schedule: str = "1f1b", latency: float | Sequence[float] = 0.0
                      ) -> Timeline:
    """The 1F1B or GPipe timeline of a contiguous split (e.g. ``plan.device_of()``).

    The stages are the split's devices in pipeline order (a topological order of the forward
    quotient, backward edges mirrored); their FW and BW are
    :func:`~stagecut.throughput.gpipe.training_loads`'s (0 backward on an inference graph).

    Parameters
    ----------
    graph : Graph or ThroughputProblem
    split : mapping node id -> (device kind, device index)
    microbatches : int
    schedule : {"1f1b", "gpipe"}
    latency : float or sequence of float
        As :func:`one_f_one_b`.

    Returns
    -------
    Timeline

    Raises
    ------
    InvalidArgumentError
        A split whose quotient has a cycle (use :func:`pieces_timeline`), an unknown schedule.
    InvalidGraphError
        A bad split.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.transformer_like(layers=2, training=True)
    >>> plan = sc.partition(g, devices=2, cpus=0)
    >>> tl = pipeline_timeline(g, plan.device_of(), 16)
    >>> abs(tl.steady_state() - plan.objective) < 1e-9, tl.devices
    (True, ('accelerator:0', 'accelerator:1'))
    """
    g = graph.graph if isinstance(graph, ThroughputProblem) else graph
    if schedule not in ("1f1b", "gpipe"):
        raise InvalidArgumentError(f"schedule must be '1f1b' or 'gpipe', got {schedule!r}")
    dev = _dev_of(g, split)
    if not is_contiguous(g, dev):
        raise InvalidArgumentError("the split's quotient graph has a cycle: it is no pipeline of stages; use "
                                   "pieces_timeline (the Section 5.2 virtual stages)")
    order = _stage_order(g, dev)
    loads = training_loads(graph, split, order=order)
    run = one_f_one_b if schedule == "1f1b" else gpipe
    return run([s.forward for s in loads.stages], [s.backward for s in loads.stages], microbatches,
               latency=latency, devices=[_name(d) for d in order])


def _stage_order(graph: Graph, dev: list[Device]) -> list[Device]:
    """The devices of a contiguous split in pipeline order: forward edges, backward edges
    mirrored (forward edges alone if that closes a cycle)."""
    used = sorted(set(dev), key=lambda d: (d[0] != ACCELERATOR, d[0], d[1]))
    for mirror in (True, False):
        succ: dict[Device, set[Device]] = {d: set() for d in used}
        for u, v in zip(graph.arrays().src.tolist(), graph.arrays().dst.tolist()):
            bu, bv = graph.nodes[u].backward, graph.nodes[v].backward
            if dev[u] != dev[v] and not bu and not bv:
                succ[dev[u]].add(dev[v])
            elif dev[u] != dev[v] and bu and bv and mirror:
                succ[dev[v]].add(dev[u])
        order = kahn_order(used, succ)
        if len(order) == len(used):
            return order
    raise internal_error("a contiguous split without a pipeline order")


# ------------------------------------------------------------------------ Section 5.2: pieces
@dataclass(frozen=True)
class Piece:
    """A virtual stage: the nodes of one device that run together, its time per sample (compute
    plus the communication terms it causes) and its position ``stage`` in the pipeline."""

    stage: int
    device: str
    nodes: tuple[NodeId, ...]
    load: float


def _piece_sets(graph: Graph, dev: list[Device]) -> list[list[int]]:
    """The node positions of each piece, in a topological order of the pieces."""
    n = len(graph)
    rank = [0] * n
    for u in kahn_order(range(n), graph.succ):
        for v in graph.succ[u]:
            rank[v] = max(rank[v], rank[u] + (dev[u] != dev[v]))
    keys = sorted({(dev[i], rank[i]) for i in range(n)}, key=lambda k: (k[1], k[0][0] != ACCELERATOR, k[0]))
    piece_of = {k: p for p, k in enumerate(keys)}
    q = nx.DiGraph()
    q.add_nodes_from(range(len(keys)))
    members: dict[int, list[int]] = {p: [] for p in range(len(keys))}
    for i in range(n):
        members[piece_of[(dev[i], rank[i])]].append(i)
    for u in range(n):
        for v in graph.succ[u]:
            a, b = piece_of[(dev[u], rank[u])], piece_of[(dev[v], rank[v])]
            if a != b:
                q.add_edge(a, b)
    device = {p: k[0] for k, p in piece_of.items()}
    merged = True
    while merged:  # merge two pieces of one device while the pieces' graph stays acyclic
        merged = False
        for a in sorted(q.nodes):
            for b in sorted(q.nodes):
                if a < b and device[a] == device[b] and not _detour(q, a, b) and not _detour(q, b, a):
                    q = nx.contracted_nodes(q, a, b, self_loops=False)
                    members[a] += members.pop(b)
                    merged = True
                    break
            if merged:
                break
    order = kahn_order(sorted(q.nodes), {p: list(q.successors(p)) for p in q.nodes})
    return [sorted(members[p]) for p in order]


def _detour(q: nx.DiGraph, a: int, b: int) -> bool:
    """Is there a path from ``a`` to ``b`` through some other piece?"""
    return any(x != b and nx.has_path(q, x, b) for x in q.successors(a))


def _piece_loads(graph: Graph, dev: list[Device], sets: list[list[int]]) -> list[float]:
    """Each piece's compute plus its communication terms (module docs): the pieces of a device
    add up to the device's load."""
    piece = [0] * len(graph)
    for p, nodes in enumerate(sets):
        for i in nodes:
            piece[i] = p
    terms: list[list[float]] = [[graph.nodes[i].compute[dev[i][0]] for i in nodes] for nodes in sets]
    for p, nd in enumerate(graph.nodes):
        readers: dict[Device, int] = {}
        for v in graph.succ[p]:
            if dev[v] != dev[p]:
                readers[dev[v]] = min(readers.get(dev[v], len(sets)), piece[v])
        if readers and dev[p][0] == ACCELERATOR:
            terms[piece[p]].append(nd.comm)
        for d, first in readers.items():
            if d[0] == ACCELERATOR:
                terms[first].append(nd.comm)
    return [math.fsum(t) for t in terms]


def pieces(graph: Graph | ThroughputProblem, split: Mapping[Hashable, tuple[str, int]]) -> tuple[Piece, ...]:
    """The Section 5.2 virtual stages of a split (module docs): each device's nodes cut into
    pieces whose graph is acyclic, in a topological order.

    Parameters
    ----------
    graph : Graph or ThroughputProblem
    split : mapping node id -> (device kind, device index)
        Any split (contiguous or not) whose devices can run their nodes.

    Returns
    -------
    tuple of Piece
        In pipeline order; one piece per device exactly when the split is contiguous and the
        graph has no backward node.

    Raises
    ------
    InvalidGraphError
        A bad split.
    InvalidArgumentError
        A node on a device kind it cannot run on.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([1.0, 2.0, 3.0])
    >>> [(p.stage, p.device, p.nodes, p.load) for p in pieces(g, {0: ("accelerator", 0),
    ...     1: ("accelerator", 1), 2: ("accelerator", 0)})]  # doctest: +NORMALIZE_WHITESPACE
    [(0, 'accelerator:0', (0,), 1.0), (1, 'accelerator:1', (1,), 2.0), (2, 'accelerator:0', (2,), 3.0)]
    """
    g = graph.graph if isinstance(graph, ThroughputProblem) else graph
    dev = _dev_of(g, split)
    for i, nd in enumerate(g.nodes):
        if not nd.supports(dev[i][0]):
            raise InvalidArgumentError(f"split: node {nd.id!r} cannot run on a {dev[i][0]}")
    sets = _piece_sets(g, dev)
    loads = _piece_loads(g, dev, sets)
    return tuple(Piece(stage=s, device=_name(dev[nodes[0]]), nodes=tuple(g.nodes[i].id for i in nodes), load=t)
                 for s, (nodes, t) in enumerate(zip(sets, loads)))


def pieces_timeline(graph: Graph | ThroughputProblem, split: Mapping[Hashable, tuple[str, int]],
                    microbatches: int) -> Timeline:
    """The Section 5.2 pipeline of a (non-contiguous) split: its :func:`pieces` as virtual
    stages, ``microbatches`` samples, each device taking its pieces round by round.

    Parameters
    ----------
    graph : Graph or ThroughputProblem
    split : mapping node id -> (device kind, device index)
    microbatches : int

    Returns
    -------
    Timeline
        Schedule ``"pieces"``; a slot's ``stage`` is its piece's position; its ``phase`` is
        ``"backward"`` for a piece of backward nodes only. Its steady state is the split's max
        load (:meth:`Timeline.steady_state` approaches it as the batch grows).

    Raises
    ------
    InvalidArgumentError, InvalidGraphError
        As :func:`pieces`; ``microbatches < 1``.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([1.0, 2.0, 3.0])
    >>> split = {0: ("accelerator", 0), 1: ("accelerator", 1), 2: ("accelerator", 0)}
    >>> tl = pieces_timeline(g, split, 40)
    >>> tl.steady_state(), sc.evaluate(g, split).objective
    (4.0, 4.0)
    """
    g = graph.graph if isinstance(graph, ThroughputProblem) else graph
    m = check_int(microbatches, "microbatches", minimum=1)
    ps = pieces(g, split)
    devices = list(dict.fromkeys(p.device for p in ps))
    stage_of = {v: p.stage for p in ps for v in p.nodes}
    back = [all(g.node(v).backward for v in p.nodes) for p in ps]
    pred: list[set[int]] = [set() for _ in ps]
    for u, v in g.edges:
        if stage_of[u] != stage_of[v]:
            pred[stage_of[v]].add(stage_of[u])
    duration = {(p.stage, j, "P"): p.load for p in ps for j in range(m)}
    deps = {(p.stage, j, "P"): [((s, j, "P"), 0.0) for s in sorted(pred[p.stage])] for p in ps for j in range(m)}
    order: list[list[_Op]] = []
    for d in devices:
        mine = [p.stage for p in ps if p.device == d]
        order.append([(s, t - s, "P") for t in range(m + len(ps) - 1) for s in mine if 0 <= t - s < m])
    times = _run(order, duration, deps)
    slots = tuple(Slot(device=d, stage=s, microbatch=j, phase="backward" if back[s] else "forward",
                       start=times[(s, j, p)][0], end=times[(s, j, p)][1])
                  for d, ops in zip(devices, order) for (s, j, p) in ops)
    return Timeline(schedule="pieces", devices=tuple(devices), stages=len(ps), microbatches=m, slots=slots)
