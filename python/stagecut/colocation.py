"""Colocation classes and the unit DAG the exact throughput DP and IPs run on.

Nodes of one colocation class must share a device (a forward node and its backward node, in a
training graph). The throughput DP and IP contract each class into one *unit*; a class whose
nodes are all backward gets an empty forward stand-in tied by the mirror image of its backward
edges; classes on a cycle of the contracted forward graph are fused (they cannot be split
contiguously, Tarnawski et al., NeurIPS 2020, Section 5.3); *free leaves* are folded into their
one neighbour where that provably keeps an optimum (see :func:`fold_free_leaves`).

Examples
--------
>>> import stagecut as sc
>>> from stagecut.graph import Node
>>> nodes = [Node(id="a", compute={"accelerator": 1.0}, colocation=1),
...          Node(id="b", compute={"accelerator": 5.0}),
...          Node(id="c", compute={"accelerator": 1.0}, colocation=1)]
>>> units = Units(sc.Graph(nodes, [("a", "b"), ("b", "c")]))
>>> units.n_units, units.members  # a -> b -> c with a, c colocated: one unit
(1, [[0, 1, 2]])
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator

import networkx as nx
import numpy as np
import numpy.typing as npt
from networkx.utils import UnionFind

from stagecut.errors import InvalidGraphError
from stagecut.graph import Graph, Node

__all__ = ["ClassKey", "ColocationClasses", "Units", "fold_free_leaves"]

#: A class key: ``("c", colocation)`` for a node with a colocation class, ``("n", position)``
#: for a node without one.
ClassKey = tuple[str, Hashable]


class ColocationClasses:
    """Union-find (``networkx.utils.UnionFind``) over the colocation classes of a graph's nodes.

    ``key[i]`` is node ``i``'s class key (see :data:`ClassKey`); :meth:`find` gives a class's
    current representative after :meth:`union` merges (which key represents a set is
    unspecified: callers only compare representatives).

    Parameters
    ----------
    graph : Graph

    Examples
    --------
    >>> import stagecut as sc
    >>> from stagecut.graph import Node
    >>> g = sc.Graph([Node(id=i, compute={"cpu": 1.0}, colocation=i % 2) for i in range(3)], [])
    >>> cc = ColocationClasses(g)
    >>> cc.find(cc.key[0]) == cc.find(cc.key[2]), cc.find(cc.key[0]) == cc.find(cc.key[1])
    (True, False)
    >>> cc.union(cc.key[0], cc.key[1])
    >>> len({cc.find(k) for k in cc.key})
    1
    """

    def __init__(self, graph: Graph) -> None:
        self.key: list[ClassKey] = [("c", nd.colocation) if nd.colocation is not None else ("n", i)
                                    for i, nd in enumerate(graph.nodes)]
        self._sets = UnionFind(self.key)

    def find(self, x: ClassKey) -> ClassKey:
        """The representative of ``x``'s set."""
        root: ClassKey = self._sets[x]
        return root

    def union(self, a: ClassKey, b: ClassKey) -> None:
        """Merge the sets of ``a`` and ``b``."""
        self._sets.union(a, b)

    def __iter__(self) -> Iterator[ClassKey]:
        """Every class key ever seen."""
        return iter(list(self._sets))


def _check_directions(graph: Graph) -> None:
    for u, v in graph.edges:
        if graph.node(u).backward and not graph.node(v).backward:
            raise InvalidGraphError(f"edge ({u!r}, {v!r}) goes from a backward node to a forward node")


def _class_edges(graph: Graph, key: list[ClassKey]) -> set[tuple[ClassKey, ClassKey]]:
    """The forward class graph, with mirrored edges for all-backward ("orphan") classes."""
    fwd_classes = {key[i] for i, nd in enumerate(graph.nodes) if not nd.backward}
    cedges: set[tuple[ClassKey, ClassKey]] = set()
    for u in range(len(graph)):
        for v in graph.succ[u]:
            bu, bv = graph.nodes[u].backward, graph.nodes[v].backward
            if not bu and not bv:
                cedges.add((key[u], key[v]))
            elif bu and bv and (key[u] not in fwd_classes or key[v] not in fwd_classes):
                cedges.add((key[v], key[u]))
    return {(a, b) for a, b in cedges if a != b}


class Units:
    """The forward unit DAG of a graph: contracted colocation classes, fused cycles, folded
    free leaves.

    Attributes
    ----------
    n_units : int
    members : list of list of int
        Node positions of each unit (units numbered by their first node).
    unit_of_node : numpy.ndarray
        The unit of each node position.
    edges : list of (int, int)
        The forward unit DAG's edges, sorted.
    edge_array : numpy.ndarray
        The same edges as an ``(k, 2)`` int64 array.

    Parameters
    ----------
    graph : Graph
    memory : float
        The memory limit per accelerator (the input's unit): free leaves with memory are folded
        only when it cannot bind.
    fast : bool
        Build the units with numpy when the graph is plain (no backward node, no colocation
        class, no free leaf): the same units as the general path (``False``, for tests).

    Raises
    ------
    InvalidGraphError
        An edge goes from a backward node to a forward node.
    """

    def __init__(self, graph: Graph, memory: float = math.inf, *, fast: bool = True) -> None:
        if fast and _plain(graph, memory):
            self._init_plain(graph)
            return
        _check_directions(graph)
        classes = ColocationClasses(graph)
        key, find = classes.key, classes.find
        cedges = _class_edges(graph, key)
        # fuse the strongly connected components of the class graph
        cg = nx.DiGraph()
        cg.add_nodes_from(key)
        cg.add_edges_from(cedges)
        for comp in nx.strongly_connected_components(cg):
            if len(comp) > 1:
                first, *rest = list(comp)
                for c in rest:
                    classes.union(first, c)
        fold_free_leaves(graph, classes, memory)
        unit_of_root: dict[ClassKey, int] = {}
        n = len(graph)
        self.unit_of_node: npt.NDArray[np.int64] = np.empty(n, dtype=np.int64)
        for i in range(n):
            self.unit_of_node[i] = unit_of_root.setdefault(find(key[i]), len(unit_of_root))
        self.n_units: int = len(unit_of_root)
        self._members: list[list[int]] | None = [[] for _ in range(self.n_units)]
        for i in range(n):
            self._members[int(self.unit_of_node[i])].append(i)
        uedges = {(unit_of_root[find(a)], unit_of_root[find(b)]) for a, b in cedges}
        self._edges: list[tuple[int, int]] | None = sorted((a, b) for a, b in uedges if a != b)
        self.edge_array: npt.NDArray[np.int64] = np.array(self._edges, dtype=np.int64).reshape(-1, 2)

    def _init_plain(self, graph: Graph) -> None:
        """A forward graph without colocation classes or free leaves: one unit per node, the
        graph's own edges (a DAG: no cycle to fuse), in numpy; the lists on first use."""
        arr = graph.arrays()
        n = len(graph)
        self.unit_of_node = np.arange(n, dtype=np.int64)
        self.n_units = n
        order = np.lexsort((arr.dst, arr.src))
        self.edge_array = np.stack([arr.src[order], arr.dst[order]], axis=1).reshape(-1, 2)
        self._members = self._edges = None

    @property
    def members(self) -> list[list[int]]:
        """Node positions of each unit (in increasing order)."""
        if self._members is None:
            self._members = [[] for _ in range(self.n_units)]
            for i, u in enumerate(self.unit_of_node.tolist()):
                self._members[u].append(i)
        return self._members

    @property
    def edges(self) -> list[tuple[int, int]]:
        """The forward unit DAG's edges, sorted."""
        if self._edges is None:
            self._edges = list(zip(self.edge_array[:, 0].tolist(), self.edge_array[:, 1].tolist()))
        return self._edges


def _plain(graph: Graph, memory: float) -> bool:
    """No backward node, no colocation class and no free leaf (no node without compute time
    whose memory could move freely): the unit DAG is the graph itself."""
    arr = graph.arrays()
    if arr.backward.any() or arr.colocated.any():
        return False
    if not arr.zero_compute.any():
        return True
    memory_free = math.fsum(arr.memory.tolist()) <= memory
    return not (memory_free or bool((arr.zero_compute & (arr.memory == 0)).any()))


def _kinds(nd: Node) -> frozenset[str]:
    return frozenset(nd.kinds if nd.kinds is not None else nd.compute.keys())


def _is_free(nodes: list[Node], memory_free: bool) -> bool:
    """No compute anywhere, no memory unless it cannot bind, and a forward position of its own."""
    if all(nd.backward for nd in nodes):
        return False  # an all-backward class has no forward position of its own
    if any(t != 0 for nd in nodes for t in nd.compute.values()):
        return False
    return memory_free or all(nd.memory == 0 for nd in nodes)


def fold_free_leaves(graph: Graph, classes: ColocationClasses, memory: float) -> None:
    """Fold free leaves into their one neighbour, where that provably keeps an optimum.

    A class is a *free leaf* when its nodes take no compute time on any kind, all of
    their edges (forward and backward) go to one other class ``m``, and the class can
    run on every kind ``m`` can. Moving it onto ``m``'s device then never raises any
    load: its edges become internal, compute is unchanged, contiguity is kept. Memory
    moves too, so the fold is done only when the class takes no memory or when the
    memory limit cannot bind (the whole graph fits on one accelerator). Repeated until
    no free leaf is left. Without this, dangling zero-cost inputs (e.g. GNMT's hidden
    states) multiply the number of ideals.

    Parameters
    ----------
    graph : Graph
    classes : ColocationClasses
        Updated in place (the folds are unions).
    memory : float
        The memory limit per accelerator.
    """
    key, find = classes.key, classes.find
    memory_free = math.fsum(nd.memory for nd in graph.nodes) <= memory
    changed = True
    while changed:
        changed = False
        members: dict[ClassKey, list[int]] = {}
        for i in range(len(graph)):
            members.setdefault(find(key[i]), []).append(i)
        touched: set[ClassKey] = set()
        for root, ms in members.items():
            if root in touched or not _is_free([graph.nodes[i] for i in ms], memory_free):
                continue
            nbrs = {find(key[j]) for i in ms for j in graph.succ[i] + graph.pred[i]} - {root}
            if len(nbrs) != 1:
                continue
            (other,) = nbrs
            if other in touched:
                continue
            mine = frozenset.intersection(*(_kinds(graph.nodes[i]) for i in ms))
            theirs = frozenset.intersection(*(_kinds(graph.nodes[i]) for i in members[other]))
            if not theirs <= mine:
                continue
            classes.union(other, root)
            touched.update((root, other))
            changed = True
