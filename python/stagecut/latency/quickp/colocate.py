"""Critical-path co-location (QuickP): nodes that should share a device, and how to impose it.

:func:`colocation_groups` computes, for every node ``i``, the critical-path rank

    ``r_i = p_i + max over successors j of (r_j + t_ij / b)``   (``r_i = p_i`` for a sink)

where ``p_i`` is the node's time (its mean over the devices that can run it, as in
:mod:`~stagecut.latency.quickp.fusion`), ``t_ij`` the tensor ``i`` sends to ``j`` (the node's output
size: one output per node in this model) and ``b`` a bandwidth. Every node with several
successors is then paired with the successor of largest ``r_j + t_ij / b_pair``; the groups are
the weakly connected components of those pairs, and each group must stay on one device.

The bandwidths: QuickP takes ``b`` = the intra-server bandwidth when all devices fit in one
server and the inter-server one otherwise, and ``b_pair`` = the inter-server one. By default
both are the *slowest link* between two devices, which is exactly that on
:meth:`Devices.servers <stagecut.latency.Devices.servers>` (one server: its intra bandwidth;
several: the inter-server one) and its natural reading on any other topology; ``inf`` (no
transfer cost) with one device. With a :class:`~stagecut.Graph` (no devices) the default is 1,
so ``t / b`` is the node's ``comm``.

A pair whose union could not run on one device (no device runs every member, or none holds
their memory) is skipped and listed in :attr:`Colocation.skipped`, so that the groups never make
a feasible problem infeasible on their own. Existing :attr:`~stagecut.Node.colocation` classes
count as already joined (a group touching a class contains the whole class).

To impose the groups, :meth:`Colocation.apply` (or :func:`with_colocation`) gives the graph with
one :attr:`~stagecut.Node.colocation` class per group (merged with the classes it touches), and
:meth:`Colocation.problem` the problem on the same devices: every latency heuristic, search and
MILP keeps a colocation class on one device.

>>> import stagecut as sc
>>> g = sc.Graph([sc.Node(v, {"gpu": t}, comm=1.0) for v, t in [("s", 1.0), ("a", 5.0), ("b", 1.0), ("t", 1.0)]],
...              [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")])
>>> c = colocation_groups(g)
>>> c.groups, c.ranks["s"]
((('s', 'a'),), 9.0)
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph, NodeId
from stagecut.graph_check import check_graph
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.quickp.fusion import node_times
from stagecut.validate import check_number, shown

__all__ = ["Colocation", "colocation_groups", "critical_path_ranks", "slowest_link", "with_colocation"]


def slowest_link(problem: LatencyProblem) -> float:
    """The smallest bandwidth between two distinct devices (``inf`` with one device)."""
    bw = problem.bandwidth
    off = ~np.eye(len(bw), dtype=bool)
    return float(bw[off].min()) if off.any() else math.inf


def _inputs(source: Graph | LatencyProblem) -> tuple[Graph, np.ndarray, np.ndarray, list[int], float]:
    """The graph, the time matrix, the output sizes, a topological order and the default bandwidth."""
    check_graph(source, "source", accept=(LatencyProblem,))
    if isinstance(source, LatencyProblem):
        return source.graph, source.times, source.size, source.order, slowest_link(source)
    assert isinstance(source, Graph)
    kinds = sorted({k for v in source.nodes for k in v.compute})
    times = np.array([[v.time(k) for k in kinds] for v in source.nodes], dtype=float).reshape(len(source), -1)
    size = np.array([v.comm for v in source.nodes], dtype=float)
    return source, times, size, source.topological_order(), 1.0


def _bandwidth(value: float | None, default: float, what: str) -> float:
    if value is None:
        return default
    return check_number(value, what, positive=True, allow_inf=True, error=InvalidArgumentError)


def critical_path_ranks(source: Graph | LatencyProblem, *, bandwidth: float | None = None) -> np.ndarray:
    """The critical-path rank of each node position (see the module docs).

    Parameters
    ----------
    source : Graph or LatencyProblem
    bandwidth : float, optional
        ``b`` (default: the slowest link; 1 for a graph).

    Returns
    -------
    numpy.ndarray
        ``r_i`` per node position.

    Raises
    ------
    InvalidArgumentError
        ``source`` of the wrong type, a bandwidth that is not positive.
    """
    graph, times, size, order, default = _inputs(source)
    b = _bandwidth(bandwidth, default, "bandwidth")
    return _ranks(graph, node_times(times), size, order, b)


def _ranks(graph: Graph, p: np.ndarray, size: np.ndarray, order: Sequence[int], b: float) -> np.ndarray:
    rank = [0.0] * len(graph)
    pl, sl = p.tolist(), size.tolist()
    succ = graph.succ
    for i in reversed(order):
        best = max((rank[j] for j in succ[i]), default=None)
        rank[i] = pl[i] if best is None else pl[i] + best + (sl[i] / b if sl[i] else 0.0)
    return np.array(rank)


@dataclass(frozen=True)
class Colocation:
    """The co-location groups of :func:`colocation_groups`.

    Attributes
    ----------
    graph : Graph
        The graph the groups are of.
    groups : tuple of tuples of node ids
        Each group's nodes in topological order; groups by their first node. Only groups of two
        or more nodes.
    pairs : tuple of (node id, node id)
        The pairs joined (a node and its chosen successor).
    skipped : tuple of (node id, node id)
        The pairs refused because their union could not run or fit on one device.
    ranks : dict
        Node id -> critical-path rank.
    bandwidth, pair_bandwidth : float
        ``b`` and ``b_pair``.
    """

    graph: Graph
    groups: tuple[tuple[NodeId, ...], ...]
    pairs: tuple[tuple[NodeId, NodeId], ...]
    skipped: tuple[tuple[NodeId, NodeId], ...]
    ranks: Mapping[NodeId, float] = field(repr=False)
    bandwidth: float
    pair_bandwidth: float

    def apply(self, graph: Graph | None = None) -> Graph:
        """The graph with one colocation class per group (see :func:`with_colocation`).

        Raises
        ------
        InvalidArgumentError
            A graph that lacks a grouped node.
        """
        return with_colocation(self.graph if graph is None else graph, self.groups)

    def problem(self, problem: LatencyProblem) -> LatencyProblem:
        """``problem`` (same devices and sizes) with the groups as colocation classes.

        Raises
        ------
        InvalidArgumentError
            ``problem`` is not a LatencyProblem, or lacks a grouped node.
        """
        if not isinstance(problem, LatencyProblem):
            raise InvalidArgumentError(f"problem: expected a LatencyProblem, got {shown(problem)}")
        sizes = None if problem.devices.unit == "relative" else dict(zip(problem.ids, problem.size.tolist()))
        return LatencyProblem(self.apply(problem.graph), problem.devices, output_bytes=sizes)


def colocation_groups(source: Graph | LatencyProblem, *, bandwidth: float | None = None,
                      pair_bandwidth: float | None = None) -> Colocation:
    """QuickP's critical-path co-location groups (see the module docs).

    Parameters
    ----------
    source : Graph or LatencyProblem
        A fused problem (:attr:`Fusion.problem <stagecut.latency.quickp.fusion.Fusion.problem>`) in
        QuickP; any graph or problem works.
    bandwidth : float, optional
        ``b`` of the ranks (default: the slowest link; 1 for a graph).
    pair_bandwidth : float, optional
        ``b_pair`` of the pairing (default: the same).

    Returns
    -------
    Colocation

    Raises
    ------
    InvalidArgumentError
        ``source`` of the wrong type, a bandwidth that is not positive.
    """
    graph, times, size, order, default = _inputs(source)
    b = _bandwidth(bandwidth, default, "bandwidth")
    bp = _bandwidth(pair_bandwidth, default, "pair_bandwidth")
    n = len(graph)
    ranks = _ranks(graph, node_times(times), size, order, b).tolist()
    capacity = source.capacity if isinstance(source, LatencyProblem) else None
    uf = _Groups(times, np.array([v.memory for v in graph.nodes], dtype=float), capacity)
    classes: dict[Hashable, int] = {}
    for i, v in enumerate(graph.nodes):
        if v.colocation is not None:
            uf.union(classes.setdefault(v.colocation, i), i, force=True)
    ids = graph.ids
    pairs, skipped = [], []
    joined = set()
    for i in order:
        succ = graph.succ[i]
        if len(succ) < 2:
            continue
        t = size[i] / bp if size[i] else 0.0
        j = max(succ, key=lambda s: ranks[s] + t)   # the first of the largest, in edge order
        if uf.union(i, j):
            pairs.append((ids[i], ids[j]))
            joined.add(i)
        else:
            skipped.append((ids[i], ids[j]))
    comps: dict[int, list[int]] = {}
    for i in order:
        comps.setdefault(uf.find(i), []).append(i)
    paired = {uf.find(i) for i in joined}
    groups = tuple(tuple(ids[i] for i in m) for r, m in comps.items() if r in paired and len(m) > 1)
    return Colocation(graph=graph, groups=groups, pairs=tuple(pairs), skipped=tuple(skipped),
                      ranks={ids[i]: ranks[i] for i in range(n)}, bandwidth=b, pair_bandwidth=bp)


class _Groups:
    """Union-find over node positions that knows, for each set, the devices (columns) that can
    run all of it and its memory."""

    def __init__(self, times: np.ndarray, memory: np.ndarray, capacity: np.ndarray | None) -> None:
        n = len(times)
        self.parent = list(range(n))
        self.ok = [frozenset(np.flatnonzero(row).tolist()) for row in np.isfinite(times)]
        self.memory = memory.tolist()
        self.capacity = None if capacity is None else capacity.tolist()

    def find(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(self, i: int, j: int, force: bool = False) -> bool:
        """Join the sets of ``i`` and ``j`` if some device runs and holds the union (or ``force``);
        whether they are joined."""
        a, b = self.find(i), self.find(j)
        if a == b:
            return True
        ok = self.ok[a] & self.ok[b]
        mem = self.memory[a] + self.memory[b]
        if not force:
            if not ok:
                return False
            if self.capacity is not None and not any(mem <= self.capacity[d] for d in ok):
                return False
        self.parent[b] = a
        self.ok[a], self.memory[a] = ok, mem
        return True


def with_colocation(graph: Graph, groups: Iterable[Iterable[Hashable]]) -> Graph:
    """``graph`` with each group's nodes in one colocation class.

    A group's class is ``("colocate", first id)`` (its first node in the given order); a group
    that touches existing classes, or another group, is merged with them (all their nodes get the
    one class); nodes in no group keep their class.

    Parameters
    ----------
    graph : Graph
    groups : iterable of iterables of node ids

    Returns
    -------
    Graph

    Raises
    ------
    InvalidArgumentError
        An unknown node id, a group that is not a collection of ids.
    """
    check_graph(graph)
    n = len(graph)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    seen: list[int] = []   # grouped positions, in the order given
    for k, grp in enumerate(groups):
        if isinstance(grp, (str, bytes)) or not isinstance(grp, Iterable):
            raise InvalidArgumentError(f"groups[{k}]: expected a collection of node ids, got {shown(grp)}")
        pos = []
        for v in grp:
            if v not in graph.index:
                raise InvalidArgumentError(f"groups[{k}]: unknown node {shown(v)}")
            pos.append(graph.index[v])
        for i in pos[1:]:
            parent[find(i)] = find(pos[0])
        seen.extend(pos)
    first: dict[Hashable, int] = {}
    for i, v in enumerate(graph.nodes):
        if v.colocation is not None:
            parent[find(i)] = find(first.setdefault(v.colocation, i))
    label: dict[int, Hashable] = {}
    for i in seen:
        label.setdefault(find(i), ("colocate", graph.ids[i]))
    nodes = [replace(v, colocation=label[find(i)]) if find(i) in label else v for i, v in enumerate(graph.nodes)]
    return Graph(nodes, graph.edges, graph.defaults)
