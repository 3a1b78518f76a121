"""The ``cover`` lower bound for MTPP: :func:`~stagecut.mtpp.combinatorial.crossing_bound` with
convex blocks (sound by construction, no MIP solver).

The ``crossing`` bound with convex blocks. A block of a partition with an acyclic quotient
is *convex*: with two of its nodes it holds every node on a path between them (a node
outside on such a path would make the quotient cycle through its block), and it holds whole
forced groups. So the cheapest block holding a producer ``u`` and its consumers is cut
around their convex closure (:func:`convex_closure`), a larger seed than theirs. And when
the tensor of ``u`` crosses, the blocks paying it split ``N[u]`` (the forced groups of
``u`` and its consumers) into parts ``X_1 .. X_m``; the block holding ``X_i`` holds its
closure ``cl(X_i)`` and pays the tensor, so it costs at least
``h(X_i) = max(work + overflow of cl(X_i) + comm(u), the node cut of each group in cl(X_i),
the cut around cl(X_i))``. At ``T = OPT`` every part has ``h <= T``, so the tensor is paid
at least ``m_u(T)`` times, the least number of parts with ``h <= T`` that partition
``N[u]`` (computed exactly over the subsets of ``N[u]`` when it has at most
``max_items`` groups; the cut term for those of at most ``cut_items`` groups), and at
least what ``crossing`` counts (2, the bins of the groups' works). The same least ``T``
as in ``crossing`` is then a bound; it is at least ``crossing`` when both run to the end.

Every value is rounded down by a relative ``1e-12`` (the float sums of a maximum flow), as in
:mod:`stagecut.mtpp.combinatorial`, whose cut network and bisection it shares.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from stagecut.mtpp.combinatorial import (
    _SLACK,
    CombinatorialBound,
    _cost,
    _Cutter,
    _expired,
    _least_parts,
    _least_t,
    _own,
    _start,
    least_bins,
)
from stagecut.mtpp.model import MtppProblem, forced_groups

__all__ = ["convex_closure", "cover_bound"]

def _bits(mask: int) -> Iterator[int]:
    """The positions of the set bits of ``mask``, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


class _Convex:
    """Convex closures of node sets (bit masks over positions): with two nodes, every node on a
    path between them, and whole forced groups, until nothing changes."""

    def __init__(self, problem: MtppProblem) -> None:
        g = problem.graph
        n = len(g.nodes)
        order = g.topological_order()
        self.desc = [0] * n
        self.anc = [0] * n
        for v in reversed(order):  # every node itself included
            m = 1 << v
            for w in g.succ[v]:
                m |= self.desc[w]
            self.desc[v] = m
        for v in order:
            m = 1 << v
            for w in g.pred[v]:
                m |= self.anc[w]
            self.anc[v] = m
        grp = forced_groups(problem)
        masks: dict[int, int] = {}
        for i, r in enumerate(grp):
            masks[r] = masks.get(r, 0) | (1 << i)
        self.group = [masks[grp[i]] for i in range(n)]

    def close(self, mask: int) -> int:
        while True:
            m = mask
            for i in _bits(mask):
                m |= self.group[i]
            below = above = 0
            for i in _bits(m):
                below |= self.desc[i]
                above |= self.anc[i]
            m |= below & above  # a node reached from one member and reaching one lies on a path between them
            if m == mask:
                return m
            mask = m


def convex_closure(problem: MtppProblem, members: Sequence[int]) -> list[int]:
    """The least set of node positions holding ``members`` that every block of a valid
    partition holding ``members`` holds too: closed under forced groups
    (:func:`~stagecut.mtpp.model.forced_groups`) and convex (every node on a path between two
    of its nodes: one outside would put the block on a cycle of the quotient).

    >>> from stagecut.graph import Graph, Node
    >>> g = Graph([Node(i, {"accelerator": 1.0}) for i in range(4)], [(0, 1), (1, 2), (0, 3)])
    >>> convex_closure(MtppProblem(g, devices=2), [0, 2])
    [0, 1, 2]
    """
    cx = _Convex(problem)
    return list(_bits(cx.close(sum(1 << i for i in set(members)))))


def _split_costs(h: list[float]) -> list[float]:
    """``ts[j - 2]``: the least largest ``h[X]`` over the splits of the full set of ``d`` items
    (``len(h) == 2 ** d``, a subset as a bit mask) into at most ``j`` parts, ``j = 2 .. d``,
    each part a proper subset (one part is the case where the tensor need not cross)."""
    size = len(h)
    full = size - 1
    best = [h[m] for m in range(size)]  # into one part
    best[full] = math.inf
    out = []
    for _ in range(2, full.bit_length() + 1):
        cur = best[:]
        for mask in range(1, size):
            low = mask & -mask
            rest = mask ^ low
            sub = rest
            while True:  # the part holding the lowest item: low | sub, a proper subset of mask
                other = rest ^ sub
                if other:
                    v = h[low | sub]
                    w = best[other]
                    if w > v:
                        v = w
                    if v < cur[mask]:
                        cur[mask] = v
                if sub == 0:
                    break
                sub = (sub - 1) & rest
        best = cur
        out.append(best[full])
    return out


def cover_bound(problem: MtppProblem, *, cut: CombinatorialBound | None = None, max_items: int = 8,
                cut_items: int = 6, deadline: float | None = None) -> CombinatorialBound:
    """The ``cover`` bound (module docs): ``crossing`` with convex blocks, each tensor paid by
    at least the least number of blocks whose convex closures can hold its producer and
    consumers. ``max_items``: the most forced groups in ``N[u]`` for the exact count over its
    subsets; ``cut_items``: the most for which each subset's closure is also cut (one s-t cut
    per subset, the tensors with the largest cost first). ``deadline`` (``time.monotonic()``)
    stops the cuts and counts early with the best bound so far (``complete=False``).

    Proof: at ``T = OPT`` take an optimal partition. A tensor that crosses is paid by every
    block holding some of ``N[u]``; those blocks split ``N[u]`` into ``m`` parts, each block
    holds its part's convex closure and pays ``comm(u)``, so every part has ``h <= OPT`` and
    ``m`` is at least the least such split (``_split_costs``); the rest is ``crossing``'s proof.

    Example: the tensor of node 0 (6) goes to nodes 1 and 3, on both ends of the path 1 -> 2 -> 3.
    ``crossing`` lets one block of cost 8 hold 0, 1 and 3 (node 2 outside). A convex block
    holding 0 and 3 holds 2 too: all the work (12), so below 12 the tensor crosses; with 0 and 1
    in one block (8) and 3 in another (10) it is paid twice, and ``2 T >= 12 + 2 * 6``:

    >>> from stagecut.graph import Graph, Node
    >>> from stagecut.mtpp.combinatorial import crossing_bound
    >>> g = Graph([Node(0, {"accelerator": 1.0}, comm=6.0), Node(1, {"accelerator": 1.0}, comm=1.0),
    ...            Node(2, {"accelerator": 6.0}, comm=1.0), Node(3, {"accelerator": 4.0})],
    ...           [(0, 1), (1, 2), (2, 3), (0, 3)])
    >>> p = MtppProblem(g, devices=2)
    >>> round(crossing_bound(p).bound, 9), round(cover_bound(p).bound, 9)
    (8.0, 12.0)
    """
    c = _cover_counts(problem, cut, max_items, cut_items, deadline)
    t = _least_t(problem, c.floor, c.forced, c.spread, c.ngroups, c.parts) if math.isfinite(c.floor) else c.floor
    return CombinatorialBound(bound=t, complete=c.complete, solves=c.solves, witness=(), per_group=c.per_group)


@dataclass(frozen=True)
class _Counts:
    """What ``cover`` counts (:func:`_cover_counts`): ``floor`` a proven bound to start from
    (``start``: the node-cut and simple bound under it); per producer ``u`` forced to cross
    below ``forced[u]``, its groups' works ``spread[u]`` and its split costs ``parts[u]``
    (:func:`_split_costs`; absent: not computed)."""

    floor: float
    start: float
    forced: dict[int, float]
    spread: dict[int, list[float]]
    parts: dict[int, list[float]]
    complete: bool
    solves: int
    per_group: dict[int, float]
    ngroups: int

    def paid(self, problem: MtppProblem, u: int, t: float) -> float:
        """The least number of blocks paying the tensor of ``u`` in a partition of cost ``t``
        (0 when it need not cross)."""
        if u not in self.forced or self.forced[u] <= t:
            return 0
        c = problem.graph.nodes[u].comm
        if t <= c:
            return math.inf
        m = max(2, least_bins(self.spread[u], t - c))
        if u in self.parts:
            m = max(m, _least_parts(self.parts[u], t))
        return m


def _cover_counts(problem: MtppProblem, cut: CombinatorialBound | None, max_items: int, cut_items: int,
                  deadline: float | None) -> _Counts:
    """The counts behind :func:`cover_bound` (its docs), ``floor`` the bound the closures alone give."""
    groups, grp, cut, floor = _start(problem, cut, deadline)
    g = problem.graph
    if not math.isfinite(floor):
        return _Counts(floor, floor, {}, {}, {}, cut.complete, cut.solves, cut.per_group, len(groups))
    cx = _Convex(problem)
    forced: dict[int, float] = {}
    spread: dict[int, list[float]] = {}
    seeds: dict[int, list[int]] = {}
    items_of: dict[int, list[int]] = {}
    complete = cut.complete
    for u in range(len(g.nodes)):
        others = {grp[v] for v in g.succ[u]} - {grp[u]}
        if g.nodes[u].comm <= 0 or not others:
            continue  # no tensor, or one block always holds it all: it never has to cross
        if _expired(deadline):
            complete = False  # (the tensors not reached are not counted: still a bound)
            break
        items = sorted(others | {grp[u]})
        seeds[u] = list(_bits(cx.close(sum(cx.group[r] for r in items))))
        forced[u] = max(max(cut.per_group[grp[i]] for i in seeds[u]), _own(problem, seeds[u]))
        spread[u] = [math.fsum(problem.work(i) for i in groups[r]) for r in items]
        items_of[u] = items
    solves = cut.solves
    cutter = _Cutter(problem, groups)
    upper = {u: _cost(problem, seed) for u, seed in seeds.items()}
    for u in sorted(seeds, key=lambda x: -upper[x]):
        if upper[u] <= floor or upper[u] <= forced[u]:
            continue
        if _expired(deadline):
            complete = False
            break
        forced[u] = max(forced[u], cutter.value(seeds[u]))
    # each tensor's split costs from the closures alone, then the bound they give (``first``)
    parts: dict[int, list[float]] = {}
    subsets: dict[int, list[tuple[float, list[int]]]] = {}
    heaviest = sorted(seeds, key=lambda x: -g.nodes[x].comm)
    for u in heaviest:
        items = items_of[u]
        if forced[u] <= floor or len(items) > max_items:
            continue  # never counted (its tensor need not cross at any T >= floor), or too many subsets
        if _expired(deadline):
            complete = False
            break
        c = g.nodes[u].comm
        d = len(items)
        h = [0.0] * (1 << d)
        found = []
        for x in range(1, (1 << d) - 1):
            if _expired(deadline):
                break
            members = list(_bits(cx.close(sum(cx.group[items[i]] for i in range(d) if x >> i & 1))))
            h[x] = max(_own(problem, members) + c, max(cut.per_group[grp[i]] for i in members)) * (1 - _SLACK)
            found.append((h[x], members))
        else:
            subsets[u] = found
            parts[u] = _split_costs(h)
            continue
        complete = False  # (stopped in the middle of this tensor's parts: it keeps crossing's count)
        break
    first = _least_t(problem, floor, forced, spread, len(groups), parts)
    # then the cut around each closure of two or more groups, where it can matter: above ``first``
    # (every T tested from here is above it: a cut below changes no test)
    for u in heaviest:
        if u not in parts or forced[u] <= first or len(items_of[u]) > cut_items:
            continue
        if _expired(deadline):
            complete = False
            break
        h = [0.0]
        for x, (hx, members) in enumerate(subsets[u], start=1):
            if x & (x - 1) and not _expired(deadline):
                top = _cost(problem, members)  # the cut around them is at most this block's cost
                if top > first and top > hx:
                    hx = max(hx, cutter.value(members))
            h.append(hx)
        h.append(0.0)
        parts[u] = _split_costs(h)
    solves += cutter.solves
    return _Counts(max(floor, first), floor, forced, spread, parts, complete, solves, cut.per_group, len(groups))
