"""The ``prefix`` lower bound for MTPP: what a hard memory limit forces on the pipeline's order
(sound by construction, no MIP solver).

The blocks of a partition with an acyclic quotient run in a topological order of the quotient,
so the first ``j`` of them hold an *ideal* ``I`` of the graph (with a node, every node before it)
and the last ``k - j`` hold the rest. Under a hard memory limit (``memory`` with no
``bandwidth``) each block holds at most ``cap = memory - reserved_memory`` of parameters, and
at ``T`` at least the optimum each costs at most ``T``. Every tensor from ``I`` to the rest is
paid at least once on each side (by its producer's block, and by a consumer's). So
``out(I)``, those tensors' costs, gives two conditions:

- **A**: the last ``k - j`` blocks pay ``W - w(I) + out(I) <= (k - j) T``, and ``I`` holds at
  most ``j cap``. A group whose ancestors (itself included) hold more than ``j cap`` cannot be in
  ``I``: ``I`` lies within ``X_j``, the other groups. So
  ``T >= (w(V - X_j) + min over ideals I in X_j of (w(X_j - I) + out(I))) / (k - j)``.
- **B**: the first ``j`` blocks pay ``w(I) + out(I) <= j T``, and the rest holds at most
  ``(k - j) cap``. A group whose descendants (itself included) hold more than that is in ``I``:
  ``I`` holds ``Y_j``, those groups. So ``T >= min over ideals I holding Y_j of (w(I) + out(I)) / j``.

Both minima are minimum cuts (an ideal is a closed set of a flow network; a tensor is cut
through one extra node). The bound is the largest over ``j = 1 .. k - 1``; fewer than ``k``
blocks satisfy the same conditions (the prefix of ``j`` blocks is then the whole graph when
``j`` is at least their number). With no hard limit, ``X_j`` is every group and ``Y_j`` none,
and the level gives no more than its floor: it is the level for memory that binds, where the
others see little. On a training graph the forward pass holds most of the parameters and the
backward pass most of the work: no block can pair the two (a block with a forward and a
backward node holds the loss and everything between), so a plan must give the forward pass
enough blocks for its memory and the backward pass the rest for its work, which is what ``A``
counts.

Every flow value and every sum is rounded towards a smaller bound: the memory tests by a
relative ``1e-9`` and a few units in the last place of the memory (a group is kept in ``X_j``
and left out of ``Y_j`` when in doubt; the evaluator's own test of a block rounds too), the flow
values and the result by a relative ``1e-12``.

Examples
--------
A forward pass that holds the memory and a backward pass that holds the work: three forward
nodes of 8 bytes on devices of 10 bytes need three blocks of the four, and no block holds a
forward node before the last with a backward node (it would hold the last one too, 16 bytes).
So the last two blocks hold the last forward node and the backward pass, 31 of work:

>>> from stagecut.graph import Graph, Node
>>> from stagecut.mtpp.model import MtppProblem, lower_bound
>>> nodes = [Node(f"f{i}", {"accelerator": 1.0}, memory=8.0) for i in range(3)]
>>> nodes += [Node(f"b{i}", {"accelerator": 10.0}) for i in range(3)]
>>> g = Graph(nodes, [("f0", "f1"), ("f1", "f2"), ("f2", "b0"), ("b0", "b1"), ("b1", "b2")])
>>> p = MtppProblem(g, devices=4, memory=10.0)
>>> lower_bound(p), round(prefix_bound(p).bound, 9)      # the optimum is 20: {f2, b0, b1}, {b2}
(10.0, 15.5)
"""

from __future__ import annotations

import math
import sys
import time

import networkx as nx
import numpy as np
from networkx.algorithms.flow import boykov_kolmogorov

from stagecut.mtpp.combinatorial import CombinatorialBound
from stagecut.mtpp.model import MtppProblem, forced_groups
from stagecut.mtpp.model import lower_bound as simple_bound
from stagecut.mtpp.spectral import group_work

__all__ = ["MAX_GROUPS", "prefix_bound"]

#: Most forced groups the level works on (a dense ancestor matrix of this size squared, in bytes).
MAX_GROUPS = 8000

#: Relative allowance on the memory sums: a group is kept in ``X_j`` and left out of ``Y_j`` when in doubt.
_MEMORY_SLACK = 1e-9

_EPS = sys.float_info.epsilon

#: Relative amount the flow values and the bound are rounded down by.
_SLACK = 1e-12


class _Dag:
    """The forced groups as a DAG: work, parameters, ancestor sets and tensors."""

    def __init__(self, problem: MtppProblem) -> None:
        g = problem.graph
        grp, index, self.work = group_work(problem)
        of = [index[r] for r in grp]
        n = len(index)
        self.n = n
        self.params = np.zeros(n)
        for i, nd in enumerate(g.nodes):
            self.params[of[i]] += nd.memory
        self.succ: list[set[int]] = [set() for _ in range(n)]
        for u in range(len(g.nodes)):
            for v in g.succ[u]:
                if of[u] != of[v]:
                    self.succ[of[u]].add(of[v])
        #: each tensor that leaves its producer's group: (the producer's group, the consumers' groups, its cost)
        self.tensors: list[tuple[int, tuple[int, ...], float]] = []
        for u, nd in enumerate(g.nodes):
            outs = tuple(sorted({of[v] for v in g.succ[u]} - {of[u]}))
            if outs and nd.comm > 0:
                self.tensors.append((of[u], outs, float(nd.comm)))
        order = list(nx.topological_sort(nx.DiGraph([(a, b) for a in range(n) for b in self.succ[a]])))
        seen = set(order)
        order = [x for x in range(n) if x not in seen] + order  # (groups with no edge first)
        anc = np.zeros((n, n), dtype=bool)
        for v in order:
            anc[v, v] = True
            for s in self.succ[v]:
                anc[s] |= anc[v]
        #: parameters held by each group's ancestors, and by its descendants (itself included)
        self.up = np.array([math.fsum(self.params[row].tolist()) for row in anc])
        self.down = np.array([math.fsum(self.params[col].tolist()) for col in anc.T])

    def least_cut(self, include: np.ndarray, exclude: np.ndarray, pay_in: bool) -> float:
        """The least ``w(free & I) + out(I)`` (``pay_in``) or ``w(free - I) + out(I)`` over the
        ideals ``I`` that hold every group of ``include`` and none of ``exclude``, ``free`` being
        the other groups (``inf`` when no such ideal exists), rounded down."""
        if (include & exclude).any():
            return math.inf
        net: nx.DiGraph[object] = nx.DiGraph()
        net.add_node("s")
        net.add_node("t")
        for x in range(self.n):
            if include[x]:
                net.add_edge("s", x)  # (no capacity: infinite)
            elif exclude[x]:
                net.add_edge(x, "t")
            elif pay_in:  # (cut when x is in I)
                net.add_edge(x, "t", capacity=float(self.work[x]))
            else:  # (cut when x is not)
                net.add_edge("s", x, capacity=float(self.work[x]))
        for a in range(self.n):
            for b in self.succ[a]:
                net.add_edge(b, a)  # b in I => a in I
        for i, (u, outs, c) in enumerate(self.tensors):
            aux = ("tensor", i)
            net.add_edge(u, aux, capacity=c)
            for o in outs:
                net.add_edge(aux, o)
        try:
            # (Boykov-Kolmogorov: 25 to 35% less CPU than networkx's default on the traced
            # training graphs, the same values to round-off)
            value = nx.maximum_flow_value(net, "s", "t", flow_func=boykov_kolmogorov)
        except nx.NetworkXUnbounded:
            return math.inf
        return float(value) * (1 - _SLACK)


def prefix_bound(problem: MtppProblem, *, floor: float | None = None,
                 deadline: float | None = None) -> CombinatorialBound:
    """The ``prefix`` bound (module docs), at least ``floor`` (default: the simple bound); stopped
    at ``deadline`` (``time.monotonic()``) with the best so far (``complete=False``). ``solves``
    counts the minimum cuts; ``witness`` is ``("A" or "B", j)`` of the condition that gave the bound.
    With no hard memory limit, or more than :data:`MAX_GROUPS` forced groups, it gives ``floor``
    (``complete=False`` for the latter) and no cut."""
    lo = simple_bound(problem) if floor is None else max(float(floor), simple_bound(problem))
    k = problem.devices
    cap = problem.memory - problem.reserved_memory
    if not math.isfinite(lo) or problem.bandwidth is not None or not math.isfinite(cap) or k < 2:
        return CombinatorialBound(bound=lo)
    if len(set(forced_groups(problem))) > MAX_GROUPS:
        return CombinatorialBound(bound=lo, complete=False)
    dag = _Dag(problem)
    # (the evaluator accepts a block when ``params + R - M <= 0`` in floats, which can pass the
    # limit by a few units in the last place of ``max(M, R)``: allowed per block)
    ulps = 4 * _EPS * (abs(problem.memory) + abs(problem.reserved_memory))
    best, solves = lo, 0
    witness: tuple[object, ...] = ()
    none = np.zeros(dag.n, dtype=bool)
    for j in range(1, k):
        for kind in ("A", "B"):
            if deadline is not None and time.monotonic() >= deadline:
                return CombinatorialBound(bound=best, complete=False, solves=solves, witness=witness)
            if kind == "A":
                out = dag.up > j * (cap + ulps) * (1 + _MEMORY_SLACK)  # (groups no prefix of j blocks holds)
                if not out.any():
                    continue
                rest = math.fsum(dag.work[out].tolist())
                t = (rest + dag.least_cut(none, out, pay_in=False)) / (k - j)
            else:
                # (groups the last k - j blocks cannot hold)
                held = dag.down > (k - j) * (cap + ulps) * (1 + _MEMORY_SLACK)
                if not held.any():
                    continue
                own = math.fsum(dag.work[held].tolist())
                t = (own + dag.least_cut(held, none, pay_in=True)) / j
            solves += 1
            t *= 1 - _SLACK
            if t > best:
                best, witness = t, (kind, j)
    return CombinatorialBound(bound=best, solves=solves, witness=witness)
