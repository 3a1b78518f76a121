"""Colocation classes and the unit DAG the exact DPs run on.

Nodes of one colocation class must share a device (a forward node and its backward node, in a
training graph). The throughput DP and IP contract each class into one *unit*; a class whose
nodes are all backward gets an empty forward stand-in tied by the mirror image of its backward
edges; classes on a cycle of the contracted forward graph are fused (they cannot be split
contiguously); *free leaves* are folded into their one neighbour where that provably keeps an
optimum (see :func:`fold_free_leaves`).
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from stagecut.errors import InvalidGraphError
from stagecut.graph import Graph

__all__ = ["ColocationClasses", "Units", "fold_free_leaves"]


class ColocationClasses:
    """Union-find over the colocation classes of a graph's nodes.

    ``key[i]`` is node ``i``'s class key (its colocation class, or its own key when it has
    none); ``find`` gives a class's current representative after ``union`` merges.
    """

    def __init__(self, graph: Graph) -> None:
        self.parent: dict = {}
        self.key = [("c", nd.colocation) if nd.colocation is not None else ("n", i)
                    for i, nd in enumerate(graph.nodes)]
        for k in self.key:
            self.find(k)

    def find(self, x):
        parent = self.parent
        root = x
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


class Units:
    """The forward unit DAG of a graph: contracted colocation classes, fused cycles."""

    def __init__(self, graph: Graph, memory: float = math.inf) -> None:
        n = len(graph)
        classes = ColocationClasses(graph)
        key, find, union, parent = classes.key, classes.find, classes.union, classes.parent
        for u, v in graph.edges:
            iu, iv = graph.index[u], graph.index[v]
            if graph.nodes[iu].backward and not graph.nodes[iv].backward:
                raise InvalidGraphError(
                    f"edge ({u!r}, {v!r}) goes from a backward node to a forward node"
                )
        fwd_classes = {key[i] for i, nd in enumerate(graph.nodes) if not nd.backward}
        # forward class graph, with mirrored edges for all-backward ("orphan") classes
        cedges = set()
        for u in range(n):
            for v in graph.succ[u]:
                bu, bv = graph.nodes[u].backward, graph.nodes[v].backward
                if not bu and not bv:
                    cedges.add((key[u], key[v]))
                elif bu and bv and (key[u] not in fwd_classes or key[v] not in fwd_classes):
                    cedges.add((key[v], key[u]))
        cedges = {(a, b) for a, b in cedges if a != b}
        # fuse the strongly connected components of the class graph
        cg = nx.DiGraph()
        cg.add_nodes_from({key[i] for i in range(n)})
        cg.add_edges_from(cedges)
        for comp in nx.strongly_connected_components(cg):
            if len(comp) > 1:
                comp = list(comp)
                for c in comp[1:]:
                    union(comp[0], c)
        fold_free_leaves(graph, classes, memory)
        unit_of_root: dict = {}
        self.unit_of_node = np.empty(n, dtype=np.int64)
        for i in range(n):
            self.unit_of_node[i] = unit_of_root.setdefault(find(key[i]), len(unit_of_root))
        self.n_units = len(unit_of_root)
        self.members = [[] for _ in range(self.n_units)]
        for i in range(n):
            self.members[self.unit_of_node[i]].append(i)
        root_unit = {find(k): u for k, u in ((k, unit_of_root[find(k)]) for k in parent)}
        uedges = set()
        for a, b in cedges:
            ua, ub = root_unit[find(a)], root_unit[find(b)]
            if ua != ub:
                uedges.add((ua, ub))
        self.edges = sorted(uedges)


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
    """
    n = len(graph)
    key, find, union = classes.key, classes.find, classes.union
    total_memory = math.fsum(nd.memory for nd in graph.nodes)
    memory_free = total_memory <= memory
    kinds_of = lambda nd: frozenset(nd.kinds if nd.kinds is not None else nd.compute.keys())  # noqa: E731
    changed = True
    while changed:
        changed = False
        members: dict = {}
        for i in range(n):
            members.setdefault(find(key[i]), []).append(i)
        touched: set = set()
        for root, ms in members.items():
            if root in touched:
                continue
            nodes = [graph.nodes[i] for i in ms]
            if any(nd.backward for nd in nodes) and not any(not nd.backward for nd in nodes):
                continue  # an all-backward class has no forward position of its own
            if any(t != 0 for nd in nodes for t in nd.compute.values()):
                continue
            if not memory_free and any(nd.memory != 0 for nd in nodes):
                continue
            nbrs = {find(key[j]) for i in ms for j in graph.succ[i] + graph.pred[i]} - {root}
            if len(nbrs) != 1:
                continue
            (other,) = nbrs
            if other in touched:
                continue
            mine = frozenset.intersection(*(kinds_of(nd) for nd in nodes))
            theirs = frozenset.intersection(*(kinds_of(graph.nodes[i]) for i in members[other]))
            if not theirs <= mine:
                continue
            union(other, root)
            touched.update((root, other))
            changed = True
