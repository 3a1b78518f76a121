"""The DFS order of the reference DPL, reproduced.

DPL's answer depends on which topological order it linearizes. The reference implementation
(Tarnawski et al.) contracts colour classes into a new node list whose order is the iteration
order of a C++ ``std::unordered_map<int, ...>`` keyed by class ids, folds zero-cost degree-1
nodes, then walks the contracted graph with a stack-based Kahn traversal. To reproduce its
published DPL numbers we replay those steps, including libstdc++'s hash-table iteration order
(identity hash, prime bucket counts, new keys of an empty bucket go to the front of the list,
rehash re-links in list order), written from the documented behaviour of that container.

The result is the unit structure and the path DPL adds, ready for the DP. Used by
``partition(method="dpl")``; it applies to integer node ids and colour classes (other ids are
replaced by their positions).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

# (element count reached, bucket count) of libstdc++'s prime rehash policy for a map grown by
# single inserts from empty, max load factor 1, in the releases the reference was built with:
# start at 2 buckets, then the next listed prime >= twice the count. (Newer libstdc++ starts
# at 13 buckets; with that table 2 of the 16 published DPL values are not reproduced, with
# this one all are.)
_GROWTH = ((1, 2), (3, 5), (6, 11), (12, 23), (24, 47), (48, 97), (98, 199), (200, 409),
           (410, 823), (824, 1741), (1742, 3739), (3740, 7517), (7518, 15173), (15174, 30727),
           (30728, 62233), (62234, 126271))
_HEAD = object()
#: an edge (source, target, artificial?)
_Edge = tuple[int, int, bool]


class _HashOrder:
    """Iteration order of a libstdc++ unordered container of ints under single inserts."""

    def __init__(self) -> None:
        self.nb = 1
        self.nxt: dict[int, int | None] = {}
        self.head: int | None = None
        self.before: dict[int, object] = {}

    def _next(self, k: object) -> int | None:
        return self.head if k is _HEAD else self.nxt[cast(int, k)]

    def _set_next(self, k: object, v: int) -> None:
        if k is _HEAD:
            self.head = v
        else:
            self.nxt[cast(int, k)] = v

    def add(self, k: int) -> None:
        if k in self.nxt:
            return
        size = len(self.nxt) + 1
        nb = self.nb
        for threshold, buckets in _GROWTH:
            if size >= threshold:
                nb = max(nb, buckets)
        if nb != self.nb:
            self._rehash(nb)
        b = k % self.nb
        if b in self.before:
            before = self.before[b]
            self.nxt[k] = self._next(before)
            self._set_next(before, k)
        else:
            self.nxt[k] = self.head
            self.head = k
            if self.nxt[k] is not None:
                self.before[cast(int, self.nxt[k]) % self.nb] = k
            self.before[b] = _HEAD

    def _rehash(self, nb: int) -> None:
        order = list(self)
        self.nb, self.head, self.before = nb, None, {}
        first_bucket = 0
        for p in order:
            b = p % nb
            if b not in self.before:
                self.nxt[p] = self.head
                self.head = p
                self.before[b] = _HEAD
                if self.nxt[p] is not None:
                    self.before[first_bucket] = p
                first_bucket = b
            else:
                before = self.before[b]
                self.nxt[p] = self._next(before)
                self._set_next(before, p)

    def __iter__(self) -> Iterator[int]:
        k = self.head
        while k is not None:
            yield k
            k = self.nxt[k]


@dataclass
class _N:
    id: int
    cc: int
    bwd: bool
    cpu: float
    acc: float
    members: list[int] = field(default_factory=list)


def _contract(nodes: list[_N], edges: list[_Edge]) -> tuple[list[_N], list[_Edge]]:
    classes = sorted({n.cc for n in nodes})
    top = classes[-1]
    bwd_vcc = {c: top + 1 + i for i, c in enumerate(classes)}
    fwd_of = {v: c for c, v in bwd_vcc.items()}
    order = _HashOrder()
    groups: dict[int, list[_N]] = {}
    vcc_of: dict[int, int] = {}
    for n in nodes:
        v = bwd_vcc[n.cc] if n.bwd else n.cc
        vcc_of[n.id] = v
        order.add(v)
        groups.setdefault(v, []).append(n)
    out = []
    for v in order:
        g = groups[v]
        bwd = v > top
        out.append(_N(id=v, cc=fwd_of[v] if bwd else v, bwd=bwd, cpu=sum(x.cpu for x in g),
                      acc=sum(x.acc for x in g), members=[m for x in g for m in x.members]))
    true_e: set[tuple[int, int]] = set()
    art_e: set[tuple[int, int]] = set()
    for s, d, art in edges:
        a, b = vcc_of[s], vcc_of[d]
        if a != b:
            (art_e if art else true_e).add((a, b))
    return out, [(a, b, True) for a, b in sorted(art_e)] + [(a, b, False) for a, b in sorted(true_e)]


def _add_orphan_stand_ins(nodes: list[_N], edges: list[_Edge]) -> None:
    fwd_of_cc = {n.cc: n.id for n in nodes if not n.bwd}
    bwd_cc = {n.id: n.cc for n in nodes if n.bwd}
    orphans = _HashOrder()
    for n in nodes:
        if n.bwd and n.cc not in fwd_of_cc:
            orphans.add(n.id)
    used = {n.id for n in nodes}
    orphan_set = set(orphans)
    for oid in orphans:
        new = 100000
        while new in used:
            new += 1
        used.add(new)
        nodes.append(_N(id=new, cc=bwd_cc[oid], bwd=False, cpu=0.0, acc=0.0))
        fwd_of_cc[bwd_cc[oid]] = new
    for s, d, _ in list(edges):
        if s in bwd_cc and d in bwd_cc and (s in orphan_set or d in orphan_set):
            edges.append((fwd_of_cc[bwd_cc[d]], fwd_of_cc[bwd_cc[s]], True))


def _fuse_forward_cycles(nodes: list[_N], edges: list[_Edge]) -> None:
    import networkx as nx

    fwd = [n for n in nodes if not n.bwd]
    ids = {n.id for n in fwd}
    g = nx.DiGraph()
    g.add_nodes_from(ids)
    g.add_edges_from((s, d) for s, d, _ in edges if s in ids and d in ids)
    comp: dict[int, int] = {}
    for i, c in enumerate(nx.strongly_connected_components(g)):
        for v in c:
            comp[v] = i
    parent = {n.cc: n.cc for n in nodes}

    def find(a: int) -> int:
        while parent[a] != a:
            a = parent[a]
        return a

    by_comp: dict[int, list[_N]] = {}
    for n in fwd:
        by_comp.setdefault(comp[n.id], []).append(n)
    for n in fwd:
        for m in by_comp[comp[n.id]]:
            if m is not n:
                parent[find(n.cc)] = find(m.cc)
    for n in nodes:
        n.cc = find(n.cc)


def _fold_trivial(nodes: list[_N], edges: list[_Edge]) -> tuple[list[_N], list[_Edge]]:
    while True:
        fwd = {n.id for n in nodes if not n.bwd}
        cc = {n.id: n.cc for n in nodes}
        fnb: dict[int, list[int]] = {}
        bnb: dict[int, list[int]] = {}
        for s, d, _ in edges:
            (fnb if s in fwd else bnb).setdefault(d, []).append(s)
            (fnb if d in fwd else bnb).setdefault(s, []).append(d)
        bwd_lat: dict[int, float] = {}
        for n in nodes:
            if n.bwd:
                bwd_lat[n.cc] = bwd_lat.get(n.cc, 0.0) + n.cpu + n.acc
        for n in nodes:
            if (not n.bwd and n.cpu < 1e-6 and n.acc < 1e-6 and not bnb.get(n.id)
                    and len(fnb.get(n.id, ())) == 1 and bwd_lat.get(n.cc, 0.0) < 1e-6):
                target, old = cc[fnb[n.id][0]], n.cc
                for x in nodes:
                    if x.cc == old:
                        x.cc = target
                nodes, edges = _contract(nodes, edges)
                break
        else:
            return nodes, edges


def _linearize(nodes: list[_N], edges: list[_Edge]) -> list[int]:
    fwd = [n.id for n in nodes if not n.bwd]
    fset = set(fwd)
    indeg: dict[int, int] = {}
    present = set()
    out: dict[int, list[int]] = {}
    for s, d, _ in edges:
        if d in fset:
            indeg[d] = indeg.get(d, 0) + 1
            present.add((s, d))
            out.setdefault(s, []).append(d)
    stack = [v for v in fwd if indeg.get(v, 0) == 0]
    order = []
    while stack:
        v = stack.pop()
        order.append(v)
        for d in out.get(v, ()):
            indeg[d] -= 1
            if indeg[d] == 0:
                stack.append(d)
    return order


def reference_dpl_units(graph: Any) -> tuple[list[list[int]], list[tuple[int, int]], list[tuple[int, int]]]:
    """``(members, edges, path)`` of the reference DPL: unit members (node positions, forward
    and backward), the forward unit edges, and the linearization path as unit pairs."""
    ints = all(isinstance(n.id, int) and not isinstance(n.id, bool) for n in graph.nodes)
    fresh = 2**31 - 1 - 12345678
    nodes = []
    for i, n in enumerate(graph.nodes):
        nid = n.id if ints else i
        if isinstance(n.colocation, int) and not isinstance(n.colocation, bool) and ints:
            cc: Any = n.colocation  # an int here; None below until numbered
        elif n.colocation is None:
            fresh -= 1
            cc = fresh
        else:
            cc = None
        nodes.append(_N(id=nid, cc=cc, bwd=n.backward, cpu=n.compute.get("cpu", 0.0),
                        acc=n.compute.get("accelerator", 0.0), members=[i]))
    if any(x.cc is None for x in nodes):  # non-integer classes: number them by appearance
        names: dict[Any, int] = {}
        for x, n in zip(nodes, graph.nodes):
            x.cc = names.setdefault(("c", n.colocation) if n.colocation is not None else ("n", x.id), len(names))
    pos_id = {n.id: (n.id if ints else i) for i, n in enumerate(graph.nodes)}
    edges = [(pos_id[u], pos_id[v], False) for u, v in graph.edges]
    nodes, edges = _contract(nodes, edges)
    _add_orphan_stand_ins(nodes, edges)
    _fuse_forward_cycles(nodes, edges)
    nodes, edges = _contract(nodes, edges)
    nodes, edges = _fold_trivial(nodes, edges)
    order = _linearize(nodes, edges)
    fwd = [n for n in nodes if not n.bwd]
    unit = {n.cc: u for u, n in enumerate(fwd)}
    members = [list(n.members) for n in fwd]
    for n in nodes:
        if n.bwd:
            members[unit[n.cc]].extend(n.members)
    uid = {n.id: unit[n.cc] for n in fwd}
    uedges = sorted({(uid[s], uid[d]) for s, d, _ in edges if s in uid and d in uid and uid[s] != uid[d]})
    path = [uid[v] for v in order]
    return members, uedges, list(zip(path, path[1:]))
