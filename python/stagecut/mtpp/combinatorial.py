"""Combinatorial lower bounds for MTPP, sound by construction (no MIP solver).

``node-cut``
    The block holding a forced group ``G`` (:func:`~stagecut.mtpp.model.forced_groups`) costs at
    least ``min f(S)`` over the node sets ``S`` that contain ``G`` and keep every other forced
    group whole. Without the memory term ``f`` is a modular work term plus a hypergraph cut (a
    tensor is paid once when its producer and its consumers are not all on one side), so this
    minimum is one s-t minimum cut (Lawler's gadget for each tensor: an inner arc of the tensor's
    cost between two helper nodes). The memory term is bounded below twice over: by the
    overflow of ``G``'s own parameters (the overflow only grows with the block), and, for a
    bandwidth, by its linear minorant ``(params(S) + R - M) / B`` added to the cut. The bound is
    the largest over the groups: the heaviest node *with* the tensors it must receive and send.
    Only groups whose own block cost passes the best so far are cut (that cost bounds their cut
    from above), so the level is quick even on large graphs.
``crossing``
    The average bound sharpened by tensors that must cross. If the cheapest block holding a
    producer ``u`` and all its consumers costs more than ``T`` (the cut around them, or a lower
    estimate: the largest node cut among them, their own work and overflow), a partition of cost
    ``T`` separates some of them, and the tensor of ``u`` is paid at least twice in the sum of the
    block costs (sent by one block, received by another): once by each block holding some of
    them, and those blocks hold their forced groups with at most ``T - comm(u)`` of their work
    each, so it is paid at least ``m_u(T)`` times: 2, or the bins of ``T - comm(u)`` the groups'
    works need (:func:`least_bins`, Martello and Toth's ``L2``: groups over half a bin each
    take their own), if more. With ``j <= k`` blocks,
    ``j T >= W + C(T) + ov(P, j)`` (``C(T)``: the sum of ``m_u(T) comm(u)`` over the tensors
    forced to cross at ``T``; ``ov``: the least total overflow); the optimum satisfies this at
    ``T = OPT``, so the least ``T`` (at least the node-cut bound) that satisfies it is a bound.
    A bisection finds it (rounded down); every ``T`` it answers failed the test (the optimum
    passes it), so the answer is a bound even where ``C`` does not shrink as ``T`` grows.
``cover``
    The ``crossing`` bound with convex blocks: :mod:`stagecut.mtpp.cover`.
``subgraph``
    The exact optimum (the ideal DP) of the problem restricted to an induced subgraph ``H`` with
    the same ``k`` and memory model: a partition of the whole graph restricted to ``H`` is a
    partition of ``H`` (its quotient is a subgraph of the original quotient), no block costs more
    (less work, fewer tensors crossing, less memory), so ``OPT(H) <= OPT``. ``H`` is grown around
    the groups with the largest node cuts (balls of increasing radius) while the DP stays small.
    The whole graph is tried first: many operator graphs have few ideals (a deep network is
    nearly a chain), and then the level is the optimum itself.

Every value is rounded down by a relative ``1e-12`` (the float sums of a maximum flow).

Examples
--------
>>> from stagecut.graph import Graph
>>> from stagecut.mtpp.model import MtppProblem
>>> p = MtppProblem(Graph.chain([2.0, 2.0, 2.0, 2.0], comm=3.0), devices=4)
>>> round(node_cut_bound(p).bound, 9)          # node 1 with node 0: work 4, one tensor out
7.0
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import networkx as nx

from stagecut.errors import StagecutWarning, TooManyIdealsError
from stagecut.graph import Graph
from stagecut.mtpp.model import MtppProblem, forced_groups, least_total_overflow
from stagecut.mtpp.model import lower_bound as simple_bound
from stagecut.mtpp.slicegraph import slice_graph

__all__ = ["CombinatorialBound", "crossing_bound", "least_bins", "node_cut_bound",
           "subgraph_bound"]

#: Relative amount every flow value is rounded down by.
_SLACK = 1e-12


@dataclass(frozen=True)
class CombinatorialBound:
    """A combinatorial bound: its value, whether it ran to the end (``complete``; else it stopped
    at its deadline and ``bound`` is the best found so far, still valid), how many s-t cuts or
    DPs it solved (``solves``), what gave the bound (``witness``: a group's node ids, an edge,
    or the subgraph's nodes) and ``per_group``, the node-cut value of each group it cut (a lower
    estimate ``work + overflow`` for the others), by group representative position.
    ``partition``: an optimal partition (node ids, in pipeline order) when the level solved the
    whole graph (``subgraph``), else ``None``."""

    bound: float
    complete: bool = True
    solves: int = 0
    witness: tuple[object, ...] = ()
    per_group: dict[int, float] = field(default_factory=dict)
    partition: tuple[tuple[object, ...], ...] | None = None


def _groups(problem: MtppProblem) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i, g in enumerate(forced_groups(problem)):
        out.setdefault(g, []).append(i)
    return out


class _CutNetwork:
    """The flow network of ``f`` without its memory term (see the module docs); ``linear`` adds
    ``params / B`` to each node's arc (the linear minorant of the overflow)."""

    def __init__(self, problem: MtppProblem, groups: dict[int, list[int]], linear: bool) -> None:
        g = problem.graph
        net: nx.DiGraph[object] = nx.DiGraph()
        net.add_node("s")
        net.add_node("t")
        per_param = 1.0 / problem.bandwidth if linear and problem.bandwidth is not None else 0.0
        for i, nd in enumerate(g.nodes):
            net.add_edge(i, "t", capacity=problem.work(i) + nd.memory * per_param)
        for u, nd in enumerate(g.nodes):
            if not g.succ[u] or nd.comm <= 0:
                continue
            a, b = ("in", u), ("out", u)
            net.add_edge(a, b, capacity=float(nd.comm))
            for x in (u, *g.succ[u]):
                net.add_edge(x, a)  # no capacity: infinite
                net.add_edge(b, x)
        for members in groups.values():
            for x in members[1:]:
                net.add_edge(members[0], x)
                net.add_edge(x, members[0])
        self.net = net

    def min_cut(self, seed: Sequence[int]) -> float:
        """The least cut value over the sets holding ``seed`` (the flow value, rounded down)."""
        for x in seed:
            self.net.add_edge("s", x)
        try:
            value = nx.maximum_flow_value(self.net, "s", "t")
        finally:
            for x in seed:
                self.net.remove_edge("s", x)
        return float(value) * (1 - _SLACK)


def _linear_memory(problem: MtppProblem) -> bool:
    """Is the linear minorant of the overflow worth a second network (a bandwidth, and the
    parameters do not all fit)?"""
    total = math.fsum(n.memory for n in problem.graph.nodes)
    return problem.bandwidth is not None and math.isfinite(problem.memory) and \
        total + problem.reserved_memory > problem.memory


def _own(problem: MtppProblem, members: Sequence[int]) -> float:
    """``work + overflow`` of the group alone: a lower estimate of any block holding it."""
    g = problem.graph
    return math.fsum(problem.work(i) for i in members) + problem.overflow(math.fsum(g.nodes[i].memory for i in members))


def _cost(problem: MtppProblem, members: Sequence[int]) -> float:
    """The block cost of ``members`` (positions), looking only at them and their neighbours (the
    evaluator's :func:`~stagecut.mtpp.model.block_cost` scans the whole graph)."""
    g = problem.graph
    inside = set(members)
    producers = set()
    for i in inside:
        if any(v not in inside for v in g.succ[i]):
            producers.add(i)
        producers.update(u for u in g.pred[i] if u not in inside)
    return _own(problem, members) + math.fsum(g.nodes[u].comm for u in producers)


class _Cutter:
    """The node cut of any set of forced groups (both networks), counting the solves."""

    def __init__(self, problem: MtppProblem, groups: dict[int, list[int]]) -> None:
        self.problem = problem
        self.plain = _CutNetwork(problem, groups, linear=False)
        self.linear = _CutNetwork(problem, groups, linear=True) if _linear_memory(problem) else None
        self.solves = 0

    def value(self, members: Sequence[int]) -> float:
        p = self.problem
        params = math.fsum(p.graph.nodes[i].memory for i in members)
        best = self.plain.min_cut(members) + p.overflow(params)
        self.solves += 1
        if self.linear is not None and p.bandwidth is not None:
            lin = self.linear.min_cut(members) + (p.reserved_memory - p.memory) / p.bandwidth
            best = max(best, lin)
        return max(best, _own(p, members))


def _expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def node_cut_bound(problem: MtppProblem, *, deadline: float | None = None) -> CombinatorialBound:
    """The ``node-cut`` bound (module docs): the largest, over the forced groups, of the least
    cost of a block holding the group (at least the simple bound). ``deadline`` (``time.monotonic()``) stops the search
    early with the best so far (``complete=False``).

    >>> from stagecut.graph import Graph
    >>> p = MtppProblem(Graph.chain([1.0, 5.0, 1.0], comm=[2.0, 0.5, 0.0]), devices=3)
    >>> r = node_cut_bound(p)
    >>> round(r.bound, 9), r.witness            # node 1 with node 0: work 6 + 0.5 out
    (6.5, (1,))
    """
    groups = _groups(problem)
    ids = problem.graph.ids
    per = {rep: _own(problem, members) for rep, members in groups.items()}
    best = max(per.values(), default=0.0)
    witness: tuple[object, ...] = ()
    if best == math.inf:
        return CombinatorialBound(bound=math.inf, per_group=per)
    upper = {rep: _cost(problem, members) for rep, members in groups.items()}
    cutter = _Cutter(problem, groups)
    complete = True
    for rep in sorted(groups, key=lambda r: -upper[r]):
        if upper[rep] <= best:
            break  # the cut around a group costs at most the group alone: no later group can win
        if _expired(deadline):
            complete = False
            break
        v = cutter.value(groups[rep])
        per[rep] = max(per[rep], v)
        if v > best:
            best, witness = v, tuple(ids[i] for i in groups[rep])
    simple = simple_bound(problem)
    if simple > best:
        best, witness = simple, ()
    return CombinatorialBound(bound=best, complete=complete, solves=cutter.solves, witness=witness, per_group=per)


def least_bins(items: Sequence[float], cap: float) -> float:
    """A lower bound on the bins of capacity ``cap`` that hold ``items`` (Martello and Toth's
    ``L2``: the items over half a bin each need their own, and those between ``a`` and half a
    bin fill what they leave, for every ``a``); ``inf`` when an item is over ``cap``. Every
    comparison leans towards fewer bins (float round-off never adds one).

    >>> least_bins([6.0, 6.0, 6.0], 10.0), least_bins([6.0, 4.0], 10.0), least_bins([11.0], 10.0)
    (3, 1, inf)
    """
    if not items:
        return 0
    if cap <= 0 or max(items) > cap * (1 + 1e-12):
        return math.inf
    loose = 1 + 1e-12
    total = math.fsum(items)
    best = max(1, math.ceil(total / cap - 1e-9))
    half = cap / 2
    for a in sorted({0.0, *(x for x in items if x <= half)}):
        j1 = sum(1 for x in items if x > (cap - a) * loose)
        j2 = [x for x in items if half * loose < x <= (cap - a) * loose]
        j3 = math.fsum(x for x in items if a <= x <= half)
        rest = j3 - (len(j2) * cap - math.fsum(j2))
        best = max(best, j1 + len(j2) + max(0, math.ceil(rest / cap - 1e-9)))
    return best


def _least_parts(ts: Sequence[float], t: float) -> float:
    """The least ``j >= 2`` with ``ts[j - 2] <= t`` (``inf``: none)."""
    for i, x in enumerate(ts):
        if x <= t:
            return i + 2
    return math.inf


def _least_t(problem: MtppProblem, floor: float, forced: dict[int, float], spread: dict[int, list[float]],
             ngroups: int, parts: dict[int, list[float]] | None = None) -> float:
    """The least ``T >= floor`` (rounded down) with ``T >= min_j (W + C(T) + ov(j)) / j``:
    ``C(T)`` sums, over the producers ``u`` with ``forced[u] > T``, ``comm(u)`` times the least
    number of blocks that can hold its producer and consumers (``spread[u]``: the work of each
    of their forced groups) when each pays the tensor (bins of ``T - comm(u)``:
    :func:`least_bins`), at least 2, and at least ``j`` when ``parts[u][j - 2] > T`` (``parts[u][i]``:
    the least largest ``h`` over the splits of ``N[u]`` into at most ``i + 2`` parts, see
    :func:`cover_bound`). Bisection, answering the largest ``T`` found to fail (each one tested
    fails: the optimum passes)."""
    g = problem.graph
    work = math.fsum(problem.work(i) for i in range(len(g.nodes)))
    params = math.fsum(n.memory for n in g.nodes)
    jmax = max(1, min(problem.devices, ngroups))
    ov = [least_total_overflow(problem, params, j) for j in range(1, jmax + 1)]
    us = [u for u, t in forced.items() if t > floor]
    thr = [forced[u] for u in us]
    comm = [g.nodes[u].comm for u in us]
    spr = [spread[u] for u in us]
    cover = [None if parts is None else parts.get(u) for u in us]

    def need(t: float) -> float:
        crossing = 0.0
        for f, c, w, ts in zip(thr, comm, spr, cover):
            if f > t:
                if t <= c:
                    return math.inf  # the tensor must cross, yet a block paying it costs more than t
                m = max(2, least_bins(w, t - c))
                if ts is not None:
                    m = max(m, _least_parts(ts, t))
                crossing += c * m
        return min((work + crossing + ov[j - 1]) / j for j in range(1, jmax + 1))

    first = need(floor)
    if first <= floor:
        return floor
    lo, hi = floor, max(first if math.isfinite(first) else 0.0, 2 * abs(floor), 1.0)  # (inf: no bisection)
    for _ in range(200):
        if need(hi) <= hi:
            break
        lo, hi = hi, 2 * hi
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if need(mid) <= mid:
            hi = mid
        else:
            lo = mid
    return lo


def _start(problem: MtppProblem, cut: CombinatorialBound | None,
           deadline: float | None) -> tuple[dict[int, list[int]], list[int], CombinatorialBound, float]:
    """What the tensor-counting bounds (``crossing``, ``cover``) start from: the forced groups
    (members, and each node's group), the node-cut bound (``cut``, or computed) and the floor it
    and the simple bound give."""
    if cut is None:
        cut = node_cut_bound(problem, deadline=deadline)
    return _groups(problem), forced_groups(problem), cut, max(cut.bound, simple_bound(problem))


def crossing_bound(problem: MtppProblem, *, cut: CombinatorialBound | None = None, tensor_cuts: int | None = None,
                   deadline: float | None = None) -> CombinatorialBound:
    """The ``crossing`` bound (module docs), from the node cuts ``cut`` (computed when not given)
    and, for up to ``tensor_cuts`` tensors (``None``: all, within the deadline), the heaviest
    first, the cut around the producer and all its consumers (the tensor crosses unless they
    share one block).

    >>> from stagecut.graph import Graph
    >>> p = MtppProblem(Graph.chain([4.0, 4.0, 4.0, 4.0], comm=1.0), devices=3)
    >>> round(crossing_bound(p).bound, 9)       # 16 work + three crossings paid twice, over 3 blocks
    7.333333333
    """
    groups, grp, cut, floor = _start(problem, cut, deadline)
    g = problem.graph
    if not math.isfinite(floor):
        return CombinatorialBound(bound=floor, complete=cut.complete, solves=cut.solves, per_group=cut.per_group)
    # forced[u]: a lower estimate of the least block holding u's group and all its consumers' groups
    forced: dict[int, float] = {}
    spread: dict[int, list[float]] = {}
    seeds: dict[int, list[int]] = {}
    for u in range(len(g.nodes)):
        others = {grp[v] for v in g.succ[u]} - {grp[u]}
        if g.nodes[u].comm <= 0 or not others:
            continue  # no tensor, or one block always holds it all: it never has to cross
        seeds[u] = [i for r in sorted(others | {grp[u]}) for i in groups[r]]
        forced[u] = max(max(cut.per_group[r] for r in others | {grp[u]}), _own(problem, seeds[u]))
        spread[u] = [math.fsum(problem.work(i) for i in groups[r]) for r in sorted(others | {grp[u]})]
    solves, complete = cut.solves, cut.complete
    upper = {u: _cost(problem, seed) for u, seed in seeds.items()}
    ranked = [u for u in sorted(seeds, key=lambda x: -upper[x]) if upper[u] > floor and upper[u] > forced[u]]
    if tensor_cuts is not None:
        ranked = ranked[:max(0, tensor_cuts)]
    if ranked:
        cutter = _Cutter(problem, groups)
        for u in ranked:
            if _expired(deadline):
                complete = False
                break
            forced[u] = max(forced[u], cutter.value(seeds[u]))
        solves += cutter.solves
    t = _least_t(problem, floor, forced, spread, len(groups))
    return CombinatorialBound(bound=t, complete=complete, solves=solves, witness=(), per_group=cut.per_group)


def _ball(graph_succ: Sequence[Sequence[int]], graph_pred: Sequence[Sequence[int]], seed: Sequence[int],
          radius: int) -> set[int]:
    seen = set(seed)
    frontier = list(seed)
    for _ in range(radius):
        nxt = []
        for x in frontier:
            for y in (*graph_succ[x], *graph_pred[x]):
                if y not in seen:
                    seen.add(y)
                    nxt.append(y)
        frontier = nxt
        if not frontier:
            break
    return seen


def subgraph_bound(problem: MtppProblem, *, cut: CombinatorialBound | None = None, seeds: int = 3,
                   max_ideals: int = 200_000, deadline: float | None = None) -> CombinatorialBound:
    """The ``subgraph`` bound (module docs): the exact optimum of induced subgraphs grown around
    the ``seeds`` groups with the largest node cuts, each as far as ``max_ideals`` allows.

    >>> from stagecut.graph import Graph
    >>> p = MtppProblem(Graph.chain([4.0, 4.0, 4.0, 4.0], comm=1.0), devices=2)
    >>> subgraph_bound(p).bound                  # the whole chain fits: the optimum itself
    9.0
    """
    g = problem.graph
    groups = _groups(problem)
    if cut is None:
        cut = node_cut_bound(problem, deadline=deadline)
    best, solves, complete = -math.inf, cut.solves, cut.complete
    witness: tuple[object, ...] = ()
    order = sorted(groups, key=lambda r: -cut.per_group.get(r, 0.0))[:max(0, seeds)]
    done: set[frozenset[int]] = set()
    left = None if deadline is None else deadline - time.monotonic()
    if left is None or left > 0:  # (the whole graph first: where its DP is small, the optimum itself)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", StagecutWarning)
                plan = slice_graph(problem, method="dp", max_ideals=max_ideals, time_limit=left)
        except TooManyIdealsError:
            pass
        else:
            solves += 1
            done.add(frozenset(range(len(g.nodes))))
            if plan.status == "infeasible":
                return CombinatorialBound(bound=math.inf, complete=complete, solves=solves, per_group=cut.per_group)
            value = plan.objective if plan.status == "optimal" else plan.lower_bound
            if value is not None:
                best, witness = float(value), tuple(nd.id for nd in g.nodes)
            if plan.status == "optimal":  # (the optimum: nothing left to find, whatever stopped the node cut)
                return CombinatorialBound(bound=max(best, simple_bound(problem)), complete=True, solves=solves,
                                          witness=witness, per_group=cut.per_group,
                                          partition=tuple(s.nodes for s in plan.stages))
    for rep in order:
        radius = 1
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                complete = False
                break
            ball = _ball(g.succ, g.pred, groups[rep], radius)
            for x in list(ball):  # whole forced groups
                ball.update(groups[forced_groups(problem)[x]])
            key = frozenset(ball)
            if key in done:
                break  # solved already (from another seed), or the ball stopped growing
            done.add(key)
            keep = sorted(ball)
            ids = [g.nodes[i].id for i in keep]
            sub = Graph([g.nodes[i] for i in keep], [(a, b) for a, b in g.edges if g.index[a] in ball
                                                     and g.index[b] in ball])
            sp = dataclasses.replace(problem, graph=sub)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", StagecutWarning)  # classes on a cycle: known, handled
                    plan = slice_graph(sp, method="dp", max_ideals=max_ideals, time_limit=left)
            except TooManyIdealsError:
                break
            solves += 1
            value = plan.objective if plan.status == "optimal" and plan.objective is not None else plan.lower_bound
            if plan.status == "infeasible":
                value = math.inf
            if value is not None and value > best:
                best, witness = float(value), tuple(ids)
            if plan.status != "optimal" or len(ball) == len(g.nodes):
                break
            radius += 1
    return CombinatorialBound(bound=max(best, simple_bound(problem)), complete=complete, solves=solves,
                              witness=witness, per_group=cut.per_group)
