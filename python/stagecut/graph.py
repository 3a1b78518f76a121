"""The graph model: one ``Graph`` type shared by every solver.

A :class:`Graph` is a DAG of :class:`Node` objects. Each node carries its compute time per
device kind (``"accelerator"``, ``"cpu"`` or any other named kind), the memory it takes, the
communication cost of its output (the time to move it between devices; tensor-once: paid once
per crossing however many consumers it has), the device kinds allowed to run it, an optional
colocation class (nodes of one class share a device: a forward node and its backward node, for
instance) and a forward/backward flag. Validation happens once, in the constructor; every
error names the node or field at fault.

Examples
--------
>>> import stagecut as sc
>>> g = sc.Graph.chain([3.0, 1.0, 2.0], comm=0.5)
>>> [n.id for n in g.nodes], g.edges
([0, 1, 2], ((0, 1), (1, 2)))
>>> g.node(1).time("accelerator")
1.0
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np

from stagecut.errors import CycleError, InvalidGraphError
from stagecut.validate import check_flag, check_number, shown

__all__ = ["Node", "Graph", "ACCELERATOR", "CPU", "NodeId", "check_number", "kahn_order", "cycle_among"]

#: A node id as given by the input (any hashable; ints and strings round-trip through JSON).
NodeId = Hashable
K = TypeVar("K", bound=Hashable)


class _Adjacency(Protocol[K]):
    """``adj[key]``: the neighbours of ``key`` (a list of lists indexed by position, or a dict)."""

    def __getitem__(self, key: K, /) -> Iterable[K]: ...

ACCELERATOR = "accelerator"
CPU = "cpu"


def kahn_order(keys: Sequence[K], succ: _Adjacency[K]) -> list[K]:
    """Kahn's algorithm over ``keys`` (successors ``succ[key]``, keys too): a topological order
    that takes the ready key earliest in ``keys`` first. It is shorter than ``keys`` exactly
    when there is a cycle; the keys left out are the ones on a cycle or after one."""
    import heapq

    rank = {k: i for i, k in enumerate(keys)}
    indeg = dict.fromkeys(keys, 0)
    for k in keys:
        for t in succ[k]:
            indeg[t] += 1
    heap = [i for i, k in enumerate(keys) if indeg[k] == 0]
    order: list[K] = []
    while heap:
        k = keys[heapq.heappop(heap)]
        order.append(k)
        for t in succ[k]:
            indeg[t] -= 1
            if indeg[t] == 0:
                heapq.heappush(heap, rank[t])
    return order


def cycle_among(rest: Sequence[K], pred: _Adjacency[K]) -> list[K]:
    """A directed cycle, in edge order, among ``rest``: keys that Kahn's algorithm left out
    (each has a predecessor ``pred[key]`` in ``rest``). Walks back from ``rest[0]``."""
    inside = set(rest)
    pos: dict[K, int] = {}
    path: list[K] = []
    v = rest[0]
    while v not in pos:
        pos[v] = len(path)
        path.append(v)
        v = next(u for u in pred[v] if u in inside)
    return path[pos[v]:][::-1]


def _cost(value: Any, nid: Any, what: str) -> float:
    """A node's time, memory or comm: a finite non-negative number."""
    if type(value) is float and 0.0 <= value < math.inf:  # the common case; NaN fails the comparison
        return value
    return check_number(value, f"node {shown(nid)}: {what}")


_INF = math.inf


_set = object.__setattr__


def _validate_node(n: Node, owned: bool = False) -> None:
    """Check and normalise a :class:`Node`'s fields in place (the dataclass is frozen). The
    ``compute`` mapping is copied (a caller may change theirs later) unless ``owned``: a dict
    built for this node alone, kept as it is when it is already normal (a large graph saves a
    dict per node)."""
    nid = n.id
    try:
        hash(nid)
    except TypeError:
        raise InvalidGraphError(f"node id {shown(nid)} is not hashable (a {type(nid).__name__}): "
                                "use a string, a number or a tuple") from None
    c = n.compute
    if type(c) is not dict and not isinstance(c, Mapping):
        raise InvalidGraphError(f"node {shown(nid)}: compute must be a mapping of device kind to time, "
                                f"e.g. {{'accelerator': 5.0}}, got {type(c).__name__} {shown(c)}")
    if not owned or type(c) is not dict or not all(type(k) is str and type(v) is float and 0.0 <= v < _INF
                                                   for k, v in c.items()):
        compute = {}
        for k, v in c.items():
            if type(v) is not float or not 0.0 <= v < _INF:
                v = _cost(v, nid, f"compute[{k!r}]")
            compute[k if type(k) is str else str(k)] = v
        _set(n, "compute", compute)
    if type(n.memory) is not float or not 0.0 <= n.memory < _INF:
        _set(n, "memory", _cost(n.memory, nid, "memory"))
    if type(n.comm) is not float or not 0.0 <= n.comm < _INF:
        _set(n, "comm", _cost(n.comm, nid, "comm"))
    kinds: Any = n.kinds  # any value a caller passed, whatever the annotation says
    if kinds is not None:
        if isinstance(kinds, str) or not isinstance(kinds, Iterable):
            raise InvalidGraphError(f"node {shown(nid)}: kinds must be a set of device kinds, e.g. "
                                    f"{{'cpu'}}, got {type(kinds).__name__} {shown(kinds)}")
        _set(n, "kinds", frozenset(str(k) for k in kinds))
    if n.colocation is not None:
        try:
            hash(n.colocation)
        except TypeError:
            raise InvalidGraphError(f"node {shown(nid)}: colocation class {shown(n.colocation)} is not hashable "
                                    f"(a {type(n.colocation).__name__}): use a string, a number or a tuple") from None
    backward: Any = n.backward
    if backward is not False and backward is not True:
        _set(n, "backward", check_flag(backward, f"node {shown(nid)}: backward"))
    name: Any = n.name
    if name is not None and not isinstance(name, str):
        raise InvalidGraphError(f"node {shown(nid)}: name must be a string, got {type(name).__name__}")


@dataclass(frozen=True, slots=True)
class Node:
    """One operator or layer.

    Parameters
    ----------
    id : hashable
        Unique id (the input's id: it is what results report).
    compute : mapping of str to float
        Compute time per device kind, e.g. ``{"accelerator": 0.2, "cpu": 1.5}``.
    memory : float
        Memory the node takes on a device (bytes), e.g. its weights.
    comm : float
        Time to move this node's output between devices (paid once per crossing).
    kinds : frozenset of str, optional
        Device kinds allowed to run the node; ``None`` means every kind in ``compute``.
    colocation : hashable, optional
        Nodes with the same colocation class must share a device.
    backward : bool
        True for nodes of the backward pass of a training graph.
    name : str, optional
        A human-readable name.

    Raises
    ------
    InvalidGraphError
        A field of the wrong type or out of range, naming the node and the field: an unhashable
        ``id`` or ``colocation``, ``compute`` that is not a mapping, a time, ``memory`` or
        ``comm`` that is not a finite non-negative number (strings and booleans are not
        numbers), ``kinds`` given as one string, ``backward`` that is not a boolean (or 0/1).

    Examples
    --------
    >>> Node(id="fc1", compute={"accelerator": 0.5, "cpu": 4}).compute
    {'accelerator': 0.5, 'cpu': 4.0}
    >>> Node(id=1, compute=5.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidGraphError: node 1: compute must be a mapping of device kind to time, ... got float 5.0
    """

    id: Hashable
    compute: Mapping[str, float]
    memory: float = 0.0
    comm: float = 0.0
    kinds: frozenset[str] | None = None
    colocation: Hashable | None = None
    backward: bool = False
    name: str | None = None

    def __init__(self, id: Hashable, compute: Mapping[str, float], memory: float = 0.0, comm: float = 0.0,
                 kinds: Iterable[str] | None = None, colocation: Hashable | None = None, backward: bool = False,
                 name: str | None = None) -> None:
        # slots and frozen: fields are set through object.__setattr__ (a Node has no instance
        # dict: 100,000 nodes take ~10 MB less)
        _set(self, "id", id)
        _set(self, "compute", compute)
        _set(self, "memory", memory)
        _set(self, "comm", comm)
        _set(self, "kinds", kinds)
        _set(self, "colocation", colocation)
        _set(self, "backward", backward)
        _set(self, "name", name)
        _validate_node(self)

    def time(self, kind: str) -> float:
        """Compute time on a device of ``kind`` (``inf`` if the node cannot run there)."""
        if not self.supports(kind):
            return math.inf
        return self.compute.get(kind, math.inf)

    def supports(self, kind: str) -> bool:
        """May this node run on a device of ``kind``?"""
        allowed = self.kinds if self.kinds is not None else self.compute.keys()
        return kind in allowed and kind in self.compute


def _owned_node(nid: Hashable, compute: dict[str, float], memory: float, comm: float) -> Node:
    """A :class:`Node` whose ``compute`` dict was built for it alone (kept, not copied)."""
    n = object.__new__(Node)
    for name, value in (("id", nid), ("compute", compute), ("memory", memory), ("comm", comm), ("kinds", None),
                         ("colocation", None), ("backward", False), ("name", None)):
        _set(n, name, value)
    _validate_node(n, owned=True)
    return n


def _edge_list(edges: Iterable[tuple[NodeId, NodeId]], index: Mapping[NodeId, int]
               ) -> tuple[list[tuple[NodeId, NodeId]], np.ndarray]:
    """The edges as (source, target) pairs of known ids and as an ``(m, 2)`` array of positions,
    duplicates dropped (the first kept), self-loops refused. Comprehensions and numpy: a
    100,000-edge graph takes a fraction of a second."""
    edges = edges if isinstance(edges, (list, tuple)) else list(edges)
    get = index.get
    try:
        out = [e if type(e) is tuple else tuple(e) for e in edges]  # the caller's pairs, not copies
        pos = np.array([(get(u), get(v)) for u, v in out], dtype=np.int64).reshape(-1, 2)
    except (TypeError, ValueError):  # not a pair, an unhashable end, an unknown node (None)
        for e in edges:
            _check_edge(e, index)
        raise
    loops = np.flatnonzero(pos[:, 0] == pos[:, 1])
    if loops.size:
        u, v = out[int(loops[0])]
        raise CycleError(f"edge ({shown(u)}, {shown(v)}) is a self-loop", [u])
    code = pos[:, 0] * max(len(index), 1) + pos[:, 1]
    _, first = np.unique(code, return_index=True)
    if first.size < len(out):  # duplicates: keep each edge's first occurrence, in input order
        keep = np.sort(first)
        out = [out[i] for i in keep.tolist()]
        pos = pos[keep]
    return out, pos


def _adjacency(n: int, key: np.ndarray, other: np.ndarray) -> tuple[tuple[int, ...], ...]:
    """``adj[i]``: the ``other`` ends of the edges whose ``key`` end is ``i``, in edge order."""
    values = other[np.argsort(key, kind="stable")].tolist()
    ends = np.cumsum(np.bincount(key, minlength=n)).tolist()
    return tuple([tuple(values[a:b]) for a, b in zip([0, *ends[:-1]], ends)])


def _check_edge(e: Any, index: Mapping[NodeId, int]) -> None:
    """Raise the error that says what is wrong with edge ``e``, if anything."""
    try:
        u, v = e
    except (TypeError, ValueError):
        raise InvalidGraphError(f"edge {shown(e)} is not a (source, target) pair") from None
    for end, what in ((u, "source"), (v, "target")):
        try:
            hash(end)
        except TypeError:
            raise InvalidGraphError(f"edge ({shown(u)}, {shown(v)}): the {what} {shown(end)} is not a "
                                    f"node id (a {type(end).__name__} is not hashable)") from None
        if end not in index:
            raise InvalidGraphError(f"edge ({shown(u)}, {shown(v)}): unknown {what} node {shown(end)}")


def _check_totals(nodes: Sequence[Node]) -> None:
    """Every sum a solver may form must stay a finite float: the total memory, communication and
    compute time of each kind (and compute plus communication, a stage's load) are checked once
    here, so that no solver meets an overflow (two memories of 1e308 sum past the largest float)."""
    comm = _total([n.comm for n in nodes], "comm")
    _total([n.memory for n in nodes], "memory")
    kinds = {k for n in nodes for k in n.compute}
    for kind in sorted(kinds):
        compute = _total([n.compute[kind] for n in nodes if kind in n.compute], f"compute[{kind!r}]")
        if not math.isfinite(compute + 2 * comm):
            raise InvalidGraphError(f"compute[{kind!r}] and comm: the nodes' times add up past the largest "
                                    "float (1.8e308, an overflow); rescale the input (e.g. to seconds)")


def _total(values: list[float], what: str) -> float:
    try:
        total = math.fsum(values)
    except OverflowError:
        total = math.inf
    if not math.isfinite(total):
        raise InvalidGraphError(f"{what}: the nodes' values add up past the largest float (1.8e308, an "
                                "overflow); rescale the input (e.g. memory in MB)")
    return total


class GraphArrays:
    """Per-node and per-edge numpy arrays of a :class:`Graph`, built once by :meth:`Graph.arrays`.

    Attributes
    ----------
    src, dst : numpy.ndarray
        The positions of each edge's ends, in the order of ``Graph.edges`` (int64).
    memory, comm : numpy.ndarray
        Each node's memory and communication cost (float64).
    backward : numpy.ndarray
        Each node's backward flag (bool).
    colocated : numpy.ndarray
        Does the node have a colocation class (bool)?
    zero_compute : numpy.ndarray
        Is every compute time of the node 0 (bool)?
    """

    def __init__(self, graph: Graph) -> None:
        nodes, index = graph.nodes, graph.index
        self.src = np.array([index[u] for u, _ in graph.edges], dtype=np.int64)
        self.dst = np.array([index[v] for _, v in graph.edges], dtype=np.int64)
        self.memory = np.array([nd.memory for nd in nodes], dtype=np.float64)
        self.comm = np.array([nd.comm for nd in nodes], dtype=np.float64)
        self.backward = np.array([nd.backward for nd in nodes], dtype=np.bool_)
        self.colocated = np.array([nd.colocation is not None for nd in nodes], dtype=np.bool_)
        self.zero_compute = np.array([not any(nd.compute.values()) for nd in nodes], dtype=np.bool_)
        self._nodes = nodes
        self._kinds: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def kind(self, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """``(supports, time)``: may each node run on ``kind`` (:meth:`Node.supports`), and its
        compute time there (0 where it may not)."""
        got = self._kinds.get(kind)
        if got is None:
            nodes = self._nodes
            ok = np.array([kind in nd.compute and (nd.kinds is None or kind in nd.kinds) for nd in nodes],
                          dtype=np.bool_)
            t = np.array([nd.compute.get(kind, 0.0) for nd in nodes], dtype=np.float64)
            got = self._kinds[kind] = (ok, np.where(ok, t, 0.0))
        return got


@dataclass(frozen=True)
class Graph:
    """A validated DAG of :class:`Node` objects.

    Parameters
    ----------
    nodes : iterable of Node
    edges : iterable of (source id, target id)
    defaults : mapping, optional
        Problem defaults carried by the input (``accelerators``, ``cpus``, ``memory``): the
        solvers use them when a parameter is not given.

    Raises
    ------
    InvalidGraphError
        Empty graph, duplicate ids, unknown edge endpoints, self-loops, NaN/inf/negative costs.
    CycleError
        The edges close a cycle (the message lists one).
    """

    nodes: tuple[Node, ...]
    edges: tuple[tuple[NodeId, NodeId], ...]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    index: Mapping[NodeId, int] = field(init=False, repr=False, compare=False)
    #: ``succ[i]``: positions of the successors of the node at position ``i``
    succ: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)
    #: ``pred[i]``: positions of its predecessors
    pred: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)

    def __init__(
        self,
        nodes: Iterable[Node],
        edges: Iterable[tuple[NodeId, NodeId]],
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        nodes = tuple(nodes)
        if not nodes:
            raise InvalidGraphError("the graph is empty: it has no nodes")
        index: dict[NodeId, int] = {}
        for pos, n in enumerate(nodes):  # a Node validated itself when it was built
            if not isinstance(n, Node):
                raise InvalidGraphError(f"nodes[{pos}] is a {type(n).__name__}, not a stagecut.Node")
            index.setdefault(n.id, pos)
        if len(index) != len(nodes):
            dup = next(n.id for pos, n in enumerate(nodes) if index[n.id] != pos)
            raise InvalidGraphError(f"duplicate node id {shown(dup)}")
        _check_totals(nodes)
        edge_list, positions = _edge_list(edges, index)
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "edges", tuple(edge_list))
        object.__setattr__(self, "defaults", dict(defaults or {}))
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "succ", _adjacency(len(nodes), positions[:, 0], positions[:, 1]))
        object.__setattr__(self, "pred", _adjacency(len(nodes), positions[:, 1], positions[:, 0]))
        self._check_acyclic()

    # ------------------------------------------------------------------ basics
    def arrays(self) -> GraphArrays:
        """The graph's numpy arrays (:class:`GraphArrays`), built on the first call and kept."""
        got = self.__dict__.get("_arrays")
        if got is None:
            got = self.__dict__["_arrays"] = GraphArrays(self)
        return got

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, node_id: Hashable) -> Node:
        """The node with id ``node_id``."""
        try:
            return self.nodes[self.index[node_id]]
        except KeyError:
            raise InvalidGraphError(f"unknown node id {node_id!r}") from None

    @property
    def ids(self) -> list[NodeId]:
        """Node ids, in input order."""
        return [n.id for n in self.nodes]

    @property
    def is_training(self) -> bool:
        """Does the graph hold backward nodes?"""
        return any(n.backward for n in self.nodes)

    def topological_order(self) -> list[int]:
        """Node positions in a topological order (Kahn's algorithm, input order on ties)."""
        return kahn_order(range(len(self.nodes)), self.succ)

    def _check_acyclic(self) -> None:
        indeg = [len(p) for p in self.pred]
        ready = [i for i, d in enumerate(indeg) if d == 0]
        seen = 0
        while ready:  # Kahn's algorithm in any order: O(n + m)
            i = ready.pop()
            seen += 1
            for t in self.succ[i]:
                indeg[t] -= 1
                if indeg[t] == 0:
                    ready.append(t)
        if seen == len(self.nodes):
            return
        done = {i for i, d in enumerate(indeg) if d == 0}
        cycle = [self.nodes[i].id for i in cycle_among([i for i in range(len(self.nodes)) if i not in done], self.pred)]
        shown = " -> ".join(repr(c) for c in cycle + cycle[:1])
        raise CycleError(f"the graph has a cycle: {shown}", cycle)

    # ---------------------------------------------------------------- builders
    @classmethod
    def chain(
        cls,
        costs: Sequence[float],
        *,
        cpu_costs: Sequence[float] | None = None,
        memory: Sequence[float] | float = 0.0,
        comm: Sequence[float] | float = 0.0,
        defaults: Mapping[str, Any] | None = None,
    ) -> Graph:
        """A chain of layers ``0 -> 1 -> ... -> n-1`` from per-layer accelerator times.

        >>> g = Graph.chain([1.0, 2.0], cpu_costs=[5.0, 9.0], memory=[4.0, 4.0])
        >>> g.node(1).compute
        {'accelerator': 2.0, 'cpu': 9.0}
        """
        if isinstance(costs, (str, bytes, Mapping)) or not hasattr(costs, "__len__"):  # a list, tuple, array
            raise InvalidGraphError(f"costs: expected a sequence of per-layer times, got {type(costs).__name__}")
        n = len(costs)

        def per_layer(x: Sequence[float] | float, what: str) -> list[float]:
            if isinstance(x, (int, float)):
                return [float(x)] * n
            if len(x) != n:
                raise InvalidGraphError(f"{what}: expected {n} values, got {len(x)}")
            return list(x)

        cpu = per_layer(cpu_costs, "cpu_costs") if cpu_costs is not None else None
        mem = per_layer(memory, "memory")
        com = per_layer(comm, "comm")
        nodes = []
        for i in range(n):
            compute = {ACCELERATOR: costs[i]}
            if cpu is not None:
                compute[CPU] = cpu[i]
            nodes.append(_owned_node(i, compute, mem[i], com[i]))
        return cls(nodes, [(i, i + 1) for i in range(n - 1)], defaults)

    @classmethod
    def from_networkx(
        cls,
        G: Any,
        *,
        compute: Mapping[str, str] | None = None,
        memory: str = "memory",
        comm: str = "comm",
        output_bytes: str | None = None,
        bandwidth: float | None = None,
        kinds: str = "kinds",
        colocation: str = "colocation",
        backward: str = "backward",
        name: str = "name",
        defaults: Mapping[str, Any] | None = None,
    ) -> Graph:
        """Build from a ``networkx.DiGraph``.

        Node attributes (names configurable): ``compute`` maps a device kind to the attribute
        holding its time (default ``{"accelerator": "accelerator", "cpu": "cpu"}``; a missing
        attribute means the kind cannot run the node); ``memory``; ``comm`` (time to move the
        output), or ``output_bytes`` together with ``bandwidth`` (bytes per time unit);
        ``kinds`` (allowed kinds, optional); ``colocation``; ``backward``; ``name``.

        >>> import networkx as nx
        >>> G = nx.DiGraph()
        >>> G.add_node("a", accelerator=1.0, cpu=4.0, comm=0.5)
        >>> G.add_node("b", accelerator=2.0)
        >>> G.add_edge("a", "b")
        >>> Graph.from_networkx(G).node("b").supports("cpu")
        False
        """
        if not callable(getattr(G, "is_directed", None)) or not hasattr(G, "edges"):
            raise InvalidGraphError(f"expected a networkx DiGraph, got {type(G).__name__}")
        if not G.is_directed():
            raise InvalidGraphError("the networkx graph must be directed (a DiGraph)")
        compute = dict(compute or {ACCELERATOR: ACCELERATOR, CPU: CPU})
        if output_bytes is not None and bandwidth is None:
            raise InvalidGraphError("output_bytes needs a bandwidth (bytes per time unit)")
        if bandwidth is not None:
            bandwidth = check_number(bandwidth, "bandwidth", positive=True)
        nodes = []
        for nid, data in G.nodes(data=True):
            times = {k: data[a] for k, a in compute.items() if a in data and data[a] is not None}
            if not times:
                raise InvalidGraphError(
                    f"node {nid!r}: no compute time (looked for attributes {sorted(compute.values())})"
                )
            if output_bytes is not None and bandwidth is not None:
                c = check_number(data.get(output_bytes, 0.0), f"node {shown(nid)}: {output_bytes}") / bandwidth
            else:
                c = data.get(comm, 0.0)
            allowed = data.get(kinds)
            nodes.append(
                Node(
                    id=nid,
                    compute=times,
                    memory=data.get(memory, 0.0),
                    comm=c,
                    kinds=allowed,
                    colocation=data.get(colocation),
                    backward=data.get(backward, False),
                    name=data.get(name),
                )
            )
        return cls(nodes, list(G.edges()), defaults)

    def to_networkx(self) -> Any:
        """A ``networkx.DiGraph`` with the attributes :meth:`from_networkx` reads by default."""
        import networkx as nx

        G = nx.DiGraph()
        for n in self.nodes:
            attrs: dict[str, Any] = dict(n.compute)
            attrs.update(memory=n.memory, comm=n.comm, backward=n.backward)
            if n.kinds is not None:
                attrs["kinds"] = set(n.kinds)
            if n.colocation is not None:
                attrs["colocation"] = n.colocation
            if n.name is not None:
                attrs["name"] = n.name
            G.add_node(n.id, **attrs)
        G.add_edges_from(self.edges)
        return G

    def map_nodes(self, fn: Callable[[Node], Node]) -> Graph:
        """A copy with every node replaced by ``fn(node)`` (same ids, same edges)."""
        return Graph([fn(n) for n in self.nodes], self.edges, self.defaults)
