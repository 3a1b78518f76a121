"""The pricing of the ``partition-lp`` bound without a MIP solver: a branch and bound over blocks
that is exact (:meth:`BlockSearch.solve`), and a tabu search for heavy blocks that proves nothing
(:meth:`BlockSearch.heavy`). Both run in the Rust core (``rust/mtpp/pricing.rs`` and
``pricing_local.rs``), with the GIL released and interruptible by Ctrl-C; this module derives
their tables.

The pricing problem at a fixed ``T``: the largest weight ``pi(S)`` (one weight per forced group)
of a *feasible block* ``S``: nonempty, whole forced groups, convex (with two nodes, every node on
a path between them), costing at most ``T`` (work, each tensor in or out once, the overflow, as
the evaluator counts them). ``partition-lp`` refutes ``T`` with an upper bound ``M`` on it, so
``M`` must be proven.

The search decides the groups in a topological order of the group graph (a forced group is a
strongly connected part of the class graph, so the groups form a DAG), in or out. Deciding in
that order makes every quantity of a partial block final or monotone:

- a tensor is paid as soon as its producer's group and one consumer's group are decided on
  different sides (the consumers' groups come after the producer's), so the cost paid so far
  (work, tensors, the overflow of the parameters in) only grows along a branch, and a branch
  whose cost passes ``T`` is cut;
- convexity: a node decided out that is reached from a node in must have every node it reaches
  out too (its ancestors are all decided when it is), so those groups are barred from coming in;
  this is exactly the convexity the evaluator's blocks have;
- the weight bound of a partial block (in ``I``, the rest undecided) is ``pi(I)`` plus the LP
  relaxation of a knapsack over the undecided groups allowed in: a group costs its work, the
  overflow's slope at the parameters in times its parameters, plus ``c(u) / d`` for each
  producer ``u`` decided out whose tensor it would make cross (``d`` the producer's undecided
  consumer groups: if ``j`` of them come in the tensor costs ``c(u) >= j c(u) / d``), less
  ``c(u) / d`` for each producer decided in and not yet paid, whose tensor is paid unless all
  ``d`` come in (so ``c(u)`` is taken from the budget and ``c(u) / d`` given back per consumer
  group taken: ``c(u) [some out] >= c(u) (d - j) / d``). Every term is a lower bound on what
  the completed block pays, so the LP value, computed as ``min over lambda >= 0`` of
  ``lambda R + sum max(0, pi_g - lambda a_g)`` (at its breakpoints: weak duality makes any
  ``lambda`` an upper bound), bounds every completion.

With a ``floor`` the search looks only for blocks of weight at least ``floor``: it stops at the
first one, or proves there is none (``-inf``, solved). Stopped by its time limit it returns the
largest bound of the branches still open (and the floor, when a branch was cut by it): still a
proven ``M``. A tolerance of ``1e-9`` of the weights' scale is kept on every cut.

The tabu search (:meth:`BlockSearch.heavy`) finds columns for the master quickly: from each of
the heaviest groups it moves, 60 times, to the heaviest block within ``T`` next to the current
one (add a group of positive weight or one sharing a tensor with the block, with the groups its
convex closure brings, dropping up to three groups when the add passes ``T``; or drop a group
that is not between two others), each group moved tabu for 5 moves. Its blocks are convex at
the group level (a block holds every group on a path between two of its groups), hence
feasible blocks; it returns those of weight at least a floor, which are columns, never a proof.
"""

from __future__ import annotations

import heapq
import math
import time
from typing import Any

import numpy as np

from stagecut import _core
from stagecut.mtpp.model import MtppProblem

__all__ = ["BlockSearch", "SearchFirst"]

#: The tabu search's starts (the heaviest groups), moves from each, tenure and most blocks returned.
LOCAL_STARTS = 24
LOCAL_MOVES = 60
LOCAL_TENURE = 5
LOCAL_WANT = 20


class BlockSearch:
    """The pricing problem at one ``T`` (module docs) by branch and bound; ``groups``: the node
    mask of each forced group (the positions of :class:`~stagecut.mtpp.partlp._Blocks`)."""

    def __init__(self, problem: MtppProblem, groups: list[int], t: float) -> None:
        g = problem.graph
        n = len(g.nodes)
        self.problem, self.t = problem, t
        ng = len(groups)
        group_of = [0] * n
        for j, mk in enumerate(groups):
            for i in _bits(mk):
                group_of[i] = j
        # a topological order of the groups (Kahn, smallest first), each group at its position
        succ: list[set[int]] = [set() for _ in range(ng)]
        indeg = [0] * ng
        for u in range(n):
            for v in g.succ[u]:
                a, b = group_of[u], group_of[v]
                if a != b and b not in succ[a]:
                    succ[a].add(b)
                    indeg[b] += 1
        ready = [j for j in range(ng) if indeg[j] == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            j = heapq.heappop(ready)
            order.append(j)
            for b in succ[j]:
                indeg[b] -= 1
                if indeg[b] == 0:
                    heapq.heappush(ready, b)
        if len(order) != ng:  # pragma: no cover - forced groups always form a DAG
            raise ValueError("the forced groups form a cycle")
        self.order = order  # position -> group index
        pos = [0] * ng
        for i, j in enumerate(order):
            pos[j] = i
        self.gmask = [groups[j] for j in order]
        work = [math.fsum(problem.work(i) for i in _bits(groups[j])) for j in order]
        params = [math.fsum(g.nodes[i].memory for i in _bits(groups[j])) for j in order]
        # ancestors and descendants of every node (itself included)
        topo = g.topological_order()
        desc = [0] * n
        anc = [0] * n
        for v in reversed(topo):
            mk = 1 << v
            for w in g.succ[v]:
                mk |= desc[w]
            desc[v] = mk
        for v in topo:
            mk = 1 << v
            for w in g.pred[v]:
                mk |= anc[w]
            anc[v] = mk
        # per position, per node: (its ancestors, the positions of the groups of its descendants)
        rules = []
        for i in range(ng):
            node_rules = []
            for c in _bits(self.gmask[i]):
                barred = 0
                for d in _bits(desc[c]):
                    barred |= 1 << pos[group_of[d]]
                node_rules.append((_words(anc[c], n), _words(barred, ng)))
            rules.append(node_rules)
        # tensors: producer (node u with comm > 0) -> the positions of its consumers' other groups
        prods = []
        for u in range(n):
            cons = sorted({pos[group_of[v]] for v in g.succ[u]} - {pos[group_of[u]]})
            if g.nodes[u].comm > 0 and cons:
                prods.append((u, cons))
        p = problem
        finite = math.isfinite(p.memory)
        slope = 0.0 if not finite or p.bandwidth is None else 1.0 / p.bandwidth
        limit = p.memory - p.reserved_memory if finite else math.inf
        self.nodes = 0
        self._core = _core.BlockSearch(
            float(t), work, params, [_words(mk, n) for mk in self.gmask], rules,
            [float(g.nodes[u].comm) for u, _ in prods], [pos[group_of[u]] for u, _ in prods],
            [cons for _, cons in prods], finite and p.bandwidth is None, slope, limit, n)
        # the groups each group reaches and is reached from (itself included), by position
        # (through whole groups: a forced group may hold nodes with no path between them, so this
        # is the transitive closure of the group graph, not of the nodes' own reach)
        down = [1 << i for i in range(ng)]
        up = [1 << i for i in range(ng)]
        for i in reversed(range(ng)):
            for b in succ[order[i]]:
                down[i] |= down[pos[b]]
        for i in range(ng):
            for b in succ[order[i]]:
                up[pos[b]] |= up[i]
        self._local = self._core.local([_words(x, ng) for x in down], [_words(x, ng) for x in up])

    def block_mask(self, inside: list[int]) -> int:
        mk = 0
        for i in inside:
            mk |= self.gmask[i]
        return mk

    def solve(self, pi: list[float], time_limit: float | None = None, gap: float | None = None,
              floor: float | None = None, nodes: int | None = None) -> tuple[float, list[int], bool]:
        """``(M, masks, solved to its end)`` as :class:`~stagecut.mtpp.partlp._Pricer` gives
        them: without ``floor``, ``M`` the largest ``pi(S)`` over the feasible blocks (``-inf``:
        none) and ``masks`` the best block; with it, the first block of weight at least
        ``floor`` (``M`` then the largest bound of the branches left), or ``(-inf, [], True)``
        when there is none. Stopped by ``time_limit`` (seconds) or after ``nodes`` nodes, ``M``
        is the largest bound of the branches left (``solved`` false). ``gap`` is not used (the
        search is exact). The search runs in the Rust core, interruptible by Ctrl-C."""
        pv = [float(pi[j]) for j in self.order]
        limit = None if time_limit is None else max(0.0, time_limit)
        upper, inside, solved, count = self._core.solve(pv, limit, floor, nodes)
        self.nodes += count
        return upper, ([self.block_mask(inside)] if inside else []), solved


    def heavy(self, pi: list[float], floor: float, time_limit: float | None = None,
              starts: int = LOCAL_STARTS) -> list[int]:
        """Blocks of weight at least ``floor`` found by the tabu search of the Rust core (node
        masks, the heaviest first; it proves nothing): from the ``starts`` heaviest groups."""
        pv = [float(pi[j]) for j in self.order]
        tops = [int(i) for i in np.argsort(pv)[::-1][:starts] if pv[int(i)] > 0]
        limit = None if time_limit is None else max(0.0, time_limit)
        found = self._local.search(pv, tops, float(floor), LOCAL_MOVES, LOCAL_TENURE, LOCAL_WANT, 0, limit)
        return [self.block_mask(inside) for _, inside in found]


def _words(mask: int, width: int) -> list[int]:
    """A bitset of ``width`` bits as 64-bit words, least significant first."""
    return [(mask >> (64 * j)) & 0xFFFFFFFFFFFFFFFF for j in range((width + 63) // 64)]


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out



class SearchFirst:
    """With a floor, the tabu search first: blocks above the floor it finds are returned as
    columns (``M = inf``: no proof). Then :class:`BlockSearch` for at most ``budget`` seconds,
    then ``fallback`` (the pricing MIP) when the search neither found a block nor finished: the
    search finds a block above the floor when the master is far from its optimum, and proves
    small pricing problems outright; the MIP proves the large ones sooner. Both answers are
    proven upper bounds, so the smaller is kept."""

    def __init__(self, search: BlockSearch, fallback: Any, budget: float) -> None:
        self.search, self.fallback, self.budget = search, fallback, budget
        self.t = search.t

    def solve(self, pi: list[float], time_limit: float | None = None, gap: float | None = None,
              floor: float | None = None) -> tuple[float, list[int], bool]:
        start = time.monotonic()
        if floor is not None:  # (blocks above the floor found quickly: columns, no proof)
            found = self.search.heavy(pi, floor, self.budget if time_limit is None else min(self.budget, time_limit))
            if found:
                return math.inf, found, False
        # (the branch and bound keeps its own budget, within what is left of the time limit)
        first = self.budget if time_limit is None else min(self.budget, time_limit - (time.monotonic() - start))
        upper, masks, done = self.search.solve(pi, first, floor=floor)
        if done or (floor is not None and masks):  # (a proof, or a block above the floor)
            return upper, masks, done
        rest = None if time_limit is None else max(0.05, time_limit - (time.monotonic() - start))
        upper2, masks2, done2 = self.fallback.solve(pi, rest, gap=gap, floor=floor)
        return min(upper, upper2), masks2, done2
