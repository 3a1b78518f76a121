"""MTPP: max-throughput pipeline partitioning with parameter overflow.

The cost model of Archer, Fahrbach, Liu and Prabhu, "Practical Performance Guarantees for
Pipelined DNN Inference" (Section 2.2, eq. 1-4), on the one :class:`~stagecut.graph.Graph`:

- ``work(v)`` = ``node.compute["accelerator"]`` (time);
- the tensor a node produces costs ``node.comm`` (time) to move between stages;
- ``params(v)`` = ``node.memory`` (bytes).

A *block* ``S`` (the nodes of one pipeline stage) costs

.. math::

    f(S) = \\sum_{u \\notin S,\\ u \\to S} c(u) + \\sum_{v \\in S} w(v)
           + \\sum_{v \\in S,\\ v \\to V \\setminus S} c(v)
           + \\frac{(\\mathrm{params}(S) + R - M)^+}{B}

each producing node's tensor counted once however many consumers it has on the other side;
``M`` is the fast memory (bytes), ``R`` the fast memory reserved for activations (bytes), ``B``
the bandwidth at which overflowing parameters are streamed (bytes per time unit: bytes/ms for
the workload files, whose times are in ms). With ``bandwidth=None`` the memory is a hard
limit: a block whose parameters exceed ``M - R`` is infeasible (cost ``inf``). With
``fast_memory=None`` there is no memory term. A partition into at most ``k`` blocks is valid
if its quotient graph is acyclic (the stages can be pipelined); its objective is the largest
block cost (the reciprocal of throughput).

Colocation: nodes sharing a ``colocation`` class (a forward node and its backward node in a
training workload) must share a block (``colocate=True``, the default). With an acyclic
quotient this forces more: classes on a directed cycle of the class graph must share a block
too. :func:`forced_groups` computes these groups; every solver works on them.

This module holds the problem object and the evaluator, written from the definition alone and
independent of every solver: tests hold the solvers to it.

Examples
--------
>>> from stagecut.graph import Graph
>>> g = Graph.chain([3.0, 1.0, 2.0], comm=0.5, memory=[4.0, 4.0, 4.0])
>>> p = MtppProblem(g, stages=2, fast_memory=6.0, bandwidth=2.0)
>>> block_cost(p, [0, 1])          # work 4 + output 0.5 + overflow (8 - 6) / 2
5.5
>>> evaluate(p, [[0, 1], [2]]).objective
5.5
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Iterable, Sequence

from stagecut.errors import InvalidGraphError
from stagecut.graph import ACCELERATOR, Graph, check_number, kahn_order

__all__ = ["MtppProblem", "MtppEvaluation", "block_cost", "evaluate", "forced_groups", "lower_bound"]


def _nonneg(x, what: str, allow_inf: bool = False) -> float:
    return check_number(x, what, allow_inf=allow_inf)


@dataclass(frozen=True)
class MtppProblem:
    """An MTPP instance: a graph, the number of stages and the memory model.

    Parameters
    ----------
    graph : Graph
    stages : int
        Most blocks allowed (``k``). ``None`` takes ``graph.defaults["accelerators"]``.
    fast_memory : float, optional
        Fast memory per stage, bytes (``None``: unlimited, no memory term).
    bandwidth : float, optional
        Bytes per time unit at which overflowing parameters are streamed; ``None`` makes the
        fast memory a hard limit.
    reserved_memory : float
        Fast memory kept for activations, bytes.
    kind : str
        The device kind whose compute time is the work (``"accelerator"``).
    colocate : bool
        Nodes of one colocation class must share a block (default). ``False`` treats the graph
        as a plain DAG (a training graph's forward and backward nodes may then be split).
    """

    graph: Graph
    stages: int
    fast_memory: float = math.inf
    bandwidth: "float | None" = None
    reserved_memory: float = 0.0
    kind: str = ACCELERATOR
    colocate: bool = True

    def __init__(
        self,
        graph: Graph,
        stages: "int | None" = None,
        fast_memory: "float | None" = None,
        bandwidth: "float | None" = None,
        reserved_memory: float = 0.0,
        kind: str = ACCELERATOR,
        colocate: bool = True,
    ) -> None:
        if not isinstance(graph, Graph):
            raise InvalidGraphError(f"graph: expected a stagecut Graph, got {type(graph).__name__}")
        if stages is None:
            stages = graph.defaults.get("accelerators")
            if stages is None:
                raise InvalidGraphError("stages: not given and the graph has no 'accelerators' default")
        if isinstance(stages, bool) or not isinstance(stages, (int,)) and not (
            isinstance(stages, float) and stages.is_integer()
        ):
            raise InvalidGraphError(f"stages: {stages!r} is not an integer")
        stages = int(stages)
        if stages < 1:
            raise InvalidGraphError(f"stages: {stages} must be at least 1")
        fm = math.inf if fast_memory is None else _nonneg(fast_memory, "fast_memory", allow_inf=True)
        if bandwidth is not None:
            bw = _nonneg(bandwidth, "bandwidth", allow_inf=True)
            if bw == 0:
                raise InvalidGraphError("bandwidth: must be positive (use None for a hard memory limit)")
        else:
            bw = None
        rv = _nonneg(reserved_memory, "reserved_memory")
        for n in graph.nodes:
            if not n.supports(kind):
                raise InvalidGraphError(f"node {n.id!r}: cannot run on a {kind!r} device (no compute[{kind!r}])")
        object.__setattr__(self, "graph", graph)
        object.__setattr__(self, "stages", stages)
        object.__setattr__(self, "fast_memory", fm)
        object.__setattr__(self, "bandwidth", bw)
        object.__setattr__(self, "reserved_memory", rv)
        object.__setattr__(self, "kind", str(kind))
        if not isinstance(colocate, bool):
            raise InvalidGraphError(f"colocate: {colocate!r} is not True or False")
        object.__setattr__(self, "colocate", colocate)

    def work(self, i: int) -> float:
        """Work of the node at position ``i``."""
        return self.graph.nodes[i].time(self.kind)

    def overflow(self, params: float) -> float:
        """The memory term of a block holding ``params`` bytes of parameters."""
        x = params + self.reserved_memory - self.fast_memory
        if math.isnan(x) or x <= 0:
            return 0.0
        if self.bandwidth is None:
            return math.inf
        return x / self.bandwidth


def forced_groups(problem: MtppProblem) -> list:
    """``group[i]`` for every node position ``i``: nodes with the same group share a block in
    every valid partition. Without colocation every node is its own group. With it, a group is
    a strongly connected component of the graph whose nodes are the colocation classes (a
    block holds whole classes, and classes on a directed cycle cannot be in different blocks
    of an acyclic quotient). Groups are numbered by their first node position."""
    g = problem.graph
    n = len(g.nodes)
    if not problem.colocate:
        return list(range(n))
    cls: dict = {}
    klass = [cls.setdefault(nd.colocation, i) if nd.colocation is not None else i for i, nd in enumerate(g.nodes)]
    if all(klass[i] == i for i in range(n)):
        return klass
    import networkx as nx

    cg = nx.DiGraph()
    cg.add_nodes_from(set(klass))
    cg.add_edges_from((klass[u], klass[v]) for u in range(n) for v in g.succ[u] if klass[u] != klass[v])
    comp_of: dict = {}
    for comp in nx.strongly_connected_components(cg):
        rep = min(comp)
        for c in comp:
            comp_of[c] = rep
    return [comp_of[klass[i]] for i in range(n)]


def _positions(problem: MtppProblem, nodes: Iterable[Hashable], where: str) -> list:
    g = problem.graph
    out = []
    for v in nodes:
        if v not in g.index:
            raise InvalidGraphError(f"{where}: unknown node {v!r}")
        out.append(g.index[v])
    return out


def block_cost(problem: MtppProblem, nodes: Iterable[Hashable]) -> float:
    """Cost of one block (node ids), from the definition (eq. 1-4)."""
    g = problem.graph
    members = set(_positions(problem, nodes, "block"))
    work = sum(problem.work(i) for i in members)
    params = sum(g.nodes[i].memory for i in members)
    io = 0.0
    for u in range(len(g.nodes)):
        if not g.succ[u]:
            continue
        inside = u in members
        if any((v in members) != inside for v in g.succ[u]):
            io += g.nodes[u].comm
    return work + io + problem.overflow(params)


@dataclass(frozen=True)
class MtppEvaluation:
    objective: float
    block_costs: tuple
    feasible: bool


def evaluate(problem: MtppProblem, blocks: Sequence[Iterable[Hashable]]) -> MtppEvaluation:
    """Check a partition and score it.

    Raises
    ------
    InvalidGraphError
        A node missing, repeated or unknown; an empty block; more blocks than stages; a cyclic
        quotient graph (the message names the blocks).
    """
    g = problem.graph
    blocks = [list(b) for b in blocks]
    block_of: dict = {}
    for b, nodes in enumerate(blocks):
        if not nodes:
            raise InvalidGraphError(f"block {b} is empty")
        for i in _positions(problem, nodes, f"block {b}"):
            if i in block_of:
                raise InvalidGraphError(f"node {g.nodes[i].id!r} is in blocks {block_of[i]} and {b}")
            block_of[i] = b
    missing = [g.nodes[i].id for i in range(len(g.nodes)) if i not in block_of]
    if missing:
        raise InvalidGraphError(f"node {missing[0]!r} is in no block ({len(missing)} missing)")
    if len(blocks) > problem.stages:
        raise InvalidGraphError(f"{len(blocks)} blocks for {problem.stages} stages")
    if problem.colocate:
        where: dict = {}
        for i, nd in enumerate(g.nodes):
            if nd.colocation is None:
                continue
            j = where.setdefault(nd.colocation, i)
            if block_of[j] != block_of[i]:
                raise InvalidGraphError(
                    f"colocation class {nd.colocation!r} is split: node {g.nodes[j].id!r} is in block "
                    f"{block_of[j]}, node {nd.id!r} in block {block_of[i]} (colocate=False ignores classes)"
                )
    # quotient graph must be acyclic
    succ: dict = {b: set() for b in range(len(blocks))}
    for u, v in g.edges:
        a, c = block_of[g.index[u]], block_of[g.index[v]]
        if a != c:
            succ[a].add(c)
    order = kahn_order(range(len(blocks)), succ)
    if len(order) != len(blocks):
        cyc = sorted(set(range(len(blocks))) - set(order))
        raise InvalidGraphError(f"the quotient graph of the blocks has a cycle (among blocks {cyc})")
    costs = tuple(block_cost(problem, nodes) for nodes in blocks)
    obj = max(costs) if costs else 0.0
    return MtppEvaluation(objective=obj, block_costs=costs, feasible=math.isfinite(obj))


def lower_bound(problem: MtppProblem) -> float:
    """The simple lower bound on the optimum.

    The largest ``work + overflow(params)`` of a single :func:`forced_groups` group (the block
    holding it costs at least that; work and overflow only grow with the block), and the
    average bound:
    with ``j <= k`` blocks the costs sum to at least the total work plus
    ``(P + j (R - M))^+ / B`` (the overflow is superadditive), so the largest is at least that
    over ``j``; minimised over ``j``.
    """
    g = problem.graph
    gw: dict = {}
    gp: dict = {}
    for i, grp in enumerate(forced_groups(problem)):
        gw[grp] = gw.get(grp, 0.0) + problem.work(i)
        gp[grp] = gp.get(grp, 0.0) + g.nodes[i].memory
    single = max(gw[grp] + problem.overflow(gp[grp]) for grp in gw)
    w = sum(problem.work(i) for i in range(len(g.nodes)))
    p = sum(n.memory for n in g.nodes)
    avg = math.inf
    for j in range(1, min(problem.stages, len(gw)) + 1):
        x = p + j * (problem.reserved_memory - problem.fast_memory)
        if math.isnan(x) or x <= 0:
            o = 0.0
        elif problem.bandwidth is None:
            o = math.inf
        else:
            o = x / problem.bandwidth
        avg = min(avg, (w + o) / j)
    return max(single, avg)
