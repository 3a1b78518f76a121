"""The exact pricing of the ``partition-lp`` bound without a MIP solver: a branch and bound over
blocks (:class:`BlockSearch`).

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
"""

from __future__ import annotations

import heapq
import math
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from stagecut.mtpp.model import MtppProblem

__all__ = ["BlockSearch", "SearchFirst"]

#: Nodes of the search between two looks at the clock.
_CHECK = 256


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
        self.pos = pos
        self.m = ng
        self.gmask = [groups[j] for j in order]
        self.work = np.array([math.fsum(problem.work(i) for i in _bits(groups[j])) for j in order])
        self.params = np.array([math.fsum(g.nodes[i].memory for i in _bits(groups[j])) for j in order])
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
        # per position: its nodes as (ancestors, the positions of the groups of its descendants)
        self.node_rules: list[list[tuple[int, npt.NDArray[np.bool_]]]] = []
        for i in range(ng):
            rules = []
            for c in _bits(self.gmask[i]):
                barred = np.zeros(ng, dtype=bool)
                barred[[pos[group_of[d]] for d in _bits(desc[c])]] = True
                rules.append((anc[c], barred))
            self.node_rules.append(rules)
        # tensors: producer r (node u with comm > 0) -> the positions of its consumers' other groups
        prods = []
        for u in range(n):
            cons = sorted({pos[group_of[v]] for v in g.succ[u]} - {pos[group_of[u]]})
            if g.nodes[u].comm > 0 and cons:
                prods.append((u, cons))
        self.nprod = len(prods)
        self.pcomm = np.array([g.nodes[u].comm for u, _ in prods])
        self.ppos = np.array([pos[group_of[u]] for u, _ in prods], dtype=np.int64)
        # (producer, consumer position) pairs; left[r, i]: consumer positions of r at i or after
        er, eh = [], []
        left = np.zeros((len(prods), ng + 1))
        self.incoming: list[list[int]] = [[] for _ in range(ng)]  # position -> producers feeding it
        for r, (_, cons) in enumerate(prods):
            for h in cons:
                er.append(r)
                eh.append(h)
                left[r, : h + 1] += 1
                self.incoming[h].append(r)
        self.er = np.array(er, dtype=np.int64)
        self.eh = np.array(eh, dtype=np.int64)
        self.left = left
        self.out_of = [[r for r in range(len(prods)) if int(self.ppos[r]) == i] for i in range(ng)]
        p = problem
        self.finite_memory = math.isfinite(p.memory)
        self.hard = self.finite_memory and p.bandwidth is None
        self.slope = 0.0 if not self.finite_memory or p.bandwidth is None else 1.0 / p.bandwidth
        self.limit = p.memory - p.reserved_memory if self.finite_memory else math.inf
        self.nodes = 0

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
        search is exact)."""
        deadline = None if time_limit is None else time.monotonic() + max(0.0, time_limit)
        t, m = self.t, self.m
        pv = np.array([pi[j] for j in self.order], dtype=float)
        scale = max(1.0, float(np.abs(pv).sum()))
        tol = 1e-9 * scale
        best = -math.inf
        best_in: list[int] = []
        target = -math.inf if floor is None else floor
        cut_by_floor = False
        stopped = False
        open_bounds: list[float] = []  # (the bounds of the branches left when stopped)
        # the state of a branch: position, in positions, node mask in, barred positions, paid
        # producers, decided-in producers, cost paid, weight in, parameters in
        stack: list[tuple[int, tuple[int, ...], int, npt.NDArray[np.bool_], npt.NDArray[np.bool_],
                          npt.NDArray[np.bool_], float, float, float, float]] = []
        root_bar = np.zeros(m, dtype=bool)
        zeros = np.zeros(self.nprod, dtype=bool)
        root_bound = self._bound(0, pv, root_bar, zeros, zeros, 0.0, 0.0, 0.0)
        stack.append((0, (), 0, root_bar, zeros, zeros, 0.0, 0.0, 0.0, root_bound))
        count = 0
        while stack:
            i, inside, imask, barred, paid, pin, cost, weight, params, bound = stack.pop()
            if bound == -math.inf:
                continue
            if bound < max(best, target) - tol:
                if best < target:
                    cut_by_floor = True
                continue
            count += 1
            if (nodes is not None and count > nodes) or (
                    count % _CHECK == 0 and deadline is not None and time.monotonic() >= deadline):
                stopped = True
                open_bounds = [bound] + [s[-1] for s in stack]
                break
            # this block closed here (every later group out): pays the tensors still open
            if inside:
                stop_cost = cost + float(self.pcomm[pin & ~paid & (self.left[:, i] > 0)].sum())
                if stop_cost <= t and weight > best:
                    best, best_in = weight, list(inside)
                    if floor is not None and best >= floor - tol:
                        open_bounds = [bound] + [s[-1] for s in stack]
                        break
            if i == m:
                continue
            children = []
            # out: tensors of in-producers feeding it are paid; nodes reached from the block bar what they reach
            paid_o = paid
            feeds = self.incoming[i]
            if feeds:
                pay = [r for r in feeds if pin[r] and not paid[r]]
                if pay:
                    paid_o = paid.copy()
                    paid_o[pay] = True
                    cost_o = cost + float(self.pcomm[pay].sum())
                else:
                    cost_o = cost
            else:
                cost_o = cost
            bar_o = barred
            if imask:
                for anc, below in self.node_rules[i]:
                    if anc & imask:
                        bar_o = bar_o | below
            if cost_o <= t:
                b = self._bound(i + 1, pv, bar_o, paid_o, pin, cost_o, weight, params)
                children.append((b, (i + 1, inside, imask, bar_o, paid_o, pin, cost_o, weight, params, b)))
            # in: not barred, tensors of out-producers feeding it paid, its own work and parameters
            if not barred[i]:
                new_params = params + float(self.params[i])
                if not (self.hard and new_params > self.limit * (1 + 1e-12)):
                    paid_i, pin_i = paid, pin
                    cost_i = cost + float(self.work[i])
                    if feeds:
                        pay = [r for r in feeds if not pin[r] and not paid[r]]
                        if pay:
                            paid_i = paid.copy()
                            paid_i[pay] = True
                            cost_i += float(self.pcomm[pay].sum())
                    if self.slope:
                        cost_i += (self._over(new_params) - self._over(params))
                    own = self.out_of[i]
                    if own:
                        pin_i = pin.copy()
                        pin_i[own] = True
                    if cost_i <= t:
                        w_i = weight + float(pv[i])
                        b = self._bound(i + 1, pv, barred, paid_i, pin_i, cost_i, w_i, new_params)
                        children.append((b, (i + 1, (*inside, i), imask | self.gmask[i], barred, paid_i, pin_i,
                                             cost_i, w_i, new_params, b)))
            children.sort(key=lambda c: c[0])
            for _, state in children:  # (the larger bound popped first)
                stack.append(state)
        self.nodes += count
        masks = [self.block_mask(best_in)] if best_in else []
        if stopped:
            top = max([best, *open_bounds] + ([target] if cut_by_floor else []))
            return top, masks if floor is None else [], False  # (with a floor: only blocks above it)
        if floor is not None:
            if best >= floor - tol:  # (stopped at its first block: the bounds of the branches left)
                return max([best, *open_bounds]), masks, False
            return -math.inf, [], True
        return best, masks, True

    def _over(self, params: float) -> float:
        x = params - self.limit
        return x * self.slope if x > 0 else 0.0

    def _bound(self, i: int, pv: npt.NDArray[np.float64], barred: npt.NDArray[np.bool_],
               paid: npt.NDArray[np.bool_], pin: npt.NDArray[np.bool_], cost: float, weight: float,
               params: float) -> float:
        """An upper bound on ``pi(S)`` over the blocks completing this branch (module docs);
        ``-inf`` when none can."""
        t = self.t
        if i >= self.m:
            return weight
        a = self.work[i:].copy()
        if self.slope and params + float(self.params[i:].sum()) > self.limit:
            if params >= self.limit:
                a += self.slope * self.params[i:]
        budget = t - cost
        if self.nprod:
            left = self.left[:, i]
            open_ = (left > 0) & ~paid & (self.ppos < i)
            if open_.any():
                share = np.zeros(self.nprod)
                share[open_] = self.pcomm[open_] / left[open_]
                sign = np.where(pin, -1.0, 1.0)
                sel = self.eh >= i
                er, eh = self.er[sel], self.eh[sel] - i
                a += np.bincount(eh, weights=(share * sign)[er], minlength=self.m - i)
                budget -= float(self.pcomm[open_ & pin].sum())
        p = pv[i:]
        ok = ~barred[i:]
        if self.hard:
            ok &= params + self.params[i:] <= self.limit * (1 + 1e-12)
        p, a = p[ok], a[ok]
        keep = (p > 0) | (a < 0)
        p, a = p[keep], a[keep]
        if not len(p):
            return weight if budget >= 0 else -math.inf
        if budget + float(-a[a < 0].sum()) < 0:
            return -math.inf  # (even every group that gives budget back leaves it negative)
        nz = a != 0
        lam = p[nz] / a[nz]
        lam = np.concatenate([[0.0], lam[lam > 0]])
        vals = lam * budget + np.maximum(0.0, p[None, :] - lam[:, None] * a[None, :]).sum(axis=1)
        return weight + float(vals.min())


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out



class SearchFirst:
    """:class:`BlockSearch` for at most ``budget`` seconds, then ``fallback`` (the pricing MIP)
    when the search neither found a block nor finished: the search finds a block above the
    floor in a few hundred nodes when the master is far from its optimum, and proves small
    pricing problems outright; the MIP proves the large ones sooner. Both answers are proven
    upper bounds, so the smaller is kept."""

    def __init__(self, search: BlockSearch, fallback: Any, budget: float) -> None:
        self.search, self.fallback, self.budget = search, fallback, budget
        self.t = search.t

    def solve(self, pi: list[float], time_limit: float | None = None, gap: float | None = None,
              floor: float | None = None) -> tuple[float, list[int], bool]:
        start = time.monotonic()
        first = self.budget if time_limit is None else min(self.budget, time_limit)
        upper, masks, done = self.search.solve(pi, first, floor=floor)
        if done or (floor is not None and masks):  # (a proof, or a block above the floor)
            return upper, masks, done
        rest = None if time_limit is None else max(0.05, time_limit - (time.monotonic() - start))
        upper2, masks2, done2 = self.fallback.solve(pi, rest, gap=gap, floor=floor)
        return min(upper, upper2), masks2, done2
