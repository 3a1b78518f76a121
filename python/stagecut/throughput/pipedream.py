"""PipeDream's optimizer as the throughput paper's baseline (Tarnawski et al., NeurIPS 2020, Table 1).

PipeDream (Narayanan et al., SOSP 2019) partitions a *chain* of layers. To run it on a DAG the
paper contracts every branching region of the layer graph to one node, so that the graph
becomes a path, and then runs the linear DP over the path. :func:`path_groups` is our
definition of that contraction; :func:`pipedream` runs the exact DP with each path node as one
colocation class (the path's prefixes are its only ideals).

The contraction (on the forward unit DAG: colocation classes contracted, as for the exact DP):

1. A unit comparable with every other unit (every other unit is its ancestor or its
   descendant) is a *cut*, and stays a node of the path.
2. A source or a sink that is not a cut is a *side unit* (a layer graph's extra inputs, such as
   GNMT's initial states, and its dead-end outputs, such as its final LSTM states). Side units
   are taken out before the regions are formed, so that they do not merge the whole graph
   into one region.
3. Among the other units (the *core*), a unit comparable with every other core unit is a core
   cut; the core units between two consecutive core cuts (a branching region), and those
   before the first and after the last, become one path node each.
4. The side sources whose first consumer is in path node ``p`` become one path node just
   before ``p``; the side sinks whose last producer is in (or just before) ``p`` become one
   path node just after it.

Every edge then goes forward along the path (or stays inside a path node), so its prefixes
are ideals and every split along it is contiguous. On a graph with no side units this is the
plain contraction of step 3; a chain is its own path. An operator graph, whose many sources
and branches leave no cut in the core, collapses into one region: refused.

Examples
--------
>>> import stagecut as sc
>>> from stagecut.throughput.problem import ThroughputProblem
>>> g = sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0])
>>> pipedream(ThroughputProblem.from_graph(g, devices=3)).objective
4.0
"""

from __future__ import annotations

import time

from stagecut.colocation import Units
from stagecut.errors import InvalidGraphError
from stagecut.graph import Graph, Node, NodeId, kahn_order
from stagecut.results import Plan, Stat
from stagecut.throughput.dp import simple_lower_bound, solve_dp
from stagecut.throughput.problem import ThroughputProblem
from stagecut.throughput.rescore import no_plan, plan_from_split

__all__ = ["path_groups", "pipedream"]

_LINK = "stagecut-pipedream-link"


def _closures(n: int, edges: list[tuple[int, int]]) -> tuple[list[int], list[list[int]], list[list[int]],
                                                             list[int], list[int]]:
    """A topological order, the successors and predecessors, and the ancestor and descendant
    bitmasks of each unit."""
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        succ[a].append(b)
        pred[b].append(a)
    order = kahn_order(range(n), succ)
    if len(order) != n:
        raise InvalidGraphError("the unit graph has a cycle")
    anc, desc = [0] * n, [0] * n
    for v in order:
        for p in pred[v]:
            anc[v] |= anc[p] | (1 << p)
    for v in reversed(order):
        for s in succ[v]:
            desc[v] |= desc[s] | (1 << s)
    return order, succ, pred, anc, desc


def _comparable(anc: list[int], desc: list[int], v: int, among: int) -> bool:
    """Is every unit of the bitmask ``among`` an ancestor or a descendant of ``v`` (or ``v``)?"""
    return (anc[v] | desc[v] | (1 << v)) & among == among


def _peel(n: int, succ: list[list[int]], pred: list[list[int]], anc: list[int],
          desc: list[int]) -> tuple[set[int], set[int], set[int]]:
    """The side units taken from the top (sources), from the bottom (sinks), and the core left.

    Repeatedly, every source and every sink of the core that is not comparable with every core
    unit leaves it (a unit that is both goes to the top)."""
    core = set(range(n))
    top: set[int] = set()
    bottom: set[int] = set()
    while True:
        among = sum(1 << v for v in core)
        src = {v for v in core if not any(p in core for p in pred[v]) and not _comparable(anc, desc, v, among)}
        snk = {v for v in core if not any(s in core for s in succ[v]) and not _comparable(anc, desc, v, among)}
        if not src and not snk:
            return top, bottom, core
        top |= src
        bottom |= snk - src
        core -= src | snk


def path_groups(units: Units) -> list[list[int]]:
    """The units of each node of PipeDream's path, in path order (see the module docs).

    Parameters
    ----------
    units : Units
        The forward unit DAG (:class:`stagecut.colocation.Units`).

    Returns
    -------
    list of list of int
        Unit numbers of each path node, each in a topological order.

    Raises
    ------
    InvalidGraphError
        (internal error) the unit DAG has a cycle.

    Examples
    --------
    >>> import stagecut as sc
    >>> from stagecut.colocation import Units
    >>> from stagecut.graph import Node
    >>> nodes = [Node(v, {"accelerator": 1.0}) for v in "abcde"]
    >>> # a -> b -> c, with a second input d of b and a dead-end output e of b
    >>> g = sc.Graph(nodes, [("a", "b"), ("b", "c"), ("d", "b"), ("b", "e")])
    >>> path_groups(Units(g))
    [[0, 3], [1], [2, 4]]
    """
    n = units.n_units
    order, succ, pred, anc, desc = _closures(n, list(units.edges))
    top, bottom, core = _peel(n, succ, pred, anc, desc)
    among = sum(1 << v for v in core)
    cuts = [v for v in order if v in core and _comparable(anc, desc, v, among)]
    mask = sum(1 << c for c in cuts)
    rank = {c: r for r, c in enumerate(cuts)}
    # path positions: core slot s at 3s + 1, the side sources before it at 3s, the side sinks after it at 3s + 2
    pos = {v: 3 * (2 * rank[v] + 1 if v in rank else 2 * (anc[v] & mask).bit_count()) + 1 for v in core}
    for v in reversed(order):
        if v in top:
            pos[v] = 3 * min((pos[s] // 3 for s in succ[v] if s not in bottom), default=0)
    for v in order:
        if v in bottom:
            pos[v] = 3 * max(pos[p] // 3 for p in pred[v]) + 2
    groups: dict[int, list[int]] = {}
    for v in order:
        groups.setdefault(pos[v], []).append(v)
    return [groups[k] for k in sorted(groups)]


def _collapsed(units: Units, groups: list[list[int]], need: int) -> str | None:
    """Why the path is refused (``None``: it is not)."""
    n = units.n_units
    _, succ, pred, anc, desc = _closures(n, list(units.edges))
    core = _peel(n, succ, pred, anc, desc)[2]
    among = sum(1 << v for v in core)
    if n > 1 and (len(groups) == 1 or not any(_comparable(anc, desc, v, among) for v in core)):
        return "no cut unit (the graph is one branching region)"
    if len(groups) < need:
        return f"{len(groups)} path node(s), fewer than the {need} devices"
    return None


def pipedream(problem: ThroughputProblem) -> Plan:
    """PipeDream's optimizer: contract the branching regions into a path, then the DP over it.

    The forward unit DAG (colocation classes contracted, as for the exact DP) is cut into the
    path of :func:`path_groups`; the exact DP then runs with each path node as one colocation
    class (the path's prefixes are its only ideals). The split is contiguous, so never better
    than the exact DP's.

    Parameters
    ----------
    problem : ThroughputProblem

    Returns
    -------
    Plan
        ``method="pipedream"``, status ``"feasible"`` (``"unknown"`` with ``objective=None`` when
        no split along the path fits); ``stats``: ``path_nodes``, ``units``, ``side_units``
        (sources and sinks outside the regions), ``largest_region`` (units in the largest path
        node), ``ideals``.

    Raises
    ------
    InvalidGraphError
        The contraction collapses the graph (one path node, or fewer path nodes than
        min(devices + cpus, units)): an operator graph, whose many sources and branches leave
        no cut; PipeDream's optimizer is for layer graphs.

    Examples
    --------
    >>> import stagecut as sc
    >>> from stagecut.graph import Node
    >>> nodes = [Node(v, {"accelerator": t}) for v, t in zip("abcd", (1.0, 4.0, 4.0, 1.0))]
    >>> diamond = sc.Graph(nodes, [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    >>> plan = pipedream(ThroughputProblem.from_graph(diamond, devices=2))
    >>> plan.objective, plan.stats["path_nodes"]  # b and c are one path node: a | b c d
    (9.0, 3)
    """
    t0 = time.perf_counter()
    g = problem.graph
    units = Units(g, problem.memory)
    groups = path_groups(units)
    need = min(problem.devices + problem.cpus, units.n_units)
    why = _collapsed(units, groups, need)
    if why is not None:
        raise InvalidGraphError(
            f"PipeDream's contraction of branching regions leaves {why} out of {units.n_units} units: "
            "its optimizer is for layer graphs, not for operator graphs with many branches and sources; "
            "use method='dp' or 'dpl'")
    group_of = [0] * len(g)
    for k, members in enumerate(groups):
        for u in members:
            for i in units.members[u]:
                group_of[i] = k
    nodes = [Node(nd.id, nd.compute, nd.memory, nd.comm, nd.kinds, colocation=("pipedream", group_of[i]),
                  backward=nd.backward, name=nd.name) for i, nd in enumerate(g.nodes)]
    # the path's order, made binding: free link nodes (no time, memory or communication) with an
    # edge from path node k to k + 1 in the forward quotient, so that the path's prefixes are its
    # only ideals: a forward link into a forward node of k + 1 when both have forward nodes, else
    # two backward links k + 1 -> k (mirrored in the quotient: one of the classes is all-backward)
    forward = {group_of[i] for i, nd in enumerate(g.nodes) if not nd.backward}
    first: dict[int, NodeId] = {}
    for i, nd in enumerate(g.nodes):
        if not nd.backward:
            first.setdefault(group_of[i], nd.id)
    edges = list(g.edges)
    free = dict.fromkeys(problem.kinds, 0.0)
    for k in range(len(groups) - 1):
        if k in forward and k + 1 in forward:
            nodes.append(Node((_LINK, k), free, colocation=("pipedream", k)))
            edges.append(((_LINK, k), first[k + 1]))
        else:
            nodes += [Node((_LINK, k), free, colocation=("pipedream", k), backward=True),
                      Node((_LINK, k, 1), free, colocation=("pipedream", k + 1), backward=True)]
            edges.append(((_LINK, k, 1), (_LINK, k)))
    path = ThroughputProblem(Graph(nodes, edges, g.defaults), problem.devices, problem.cpus, problem.memory)
    sub = solve_dp(path, max_ideals=len(groups) + 2)
    _, succ, pred, anc, desc = _closures(units.n_units, list(units.edges))
    side = units.n_units - len(_peel(units.n_units, succ, pred, anc, desc)[2])
    stats: dict[str, Stat] = {"path_nodes": len(groups), "units": units.n_units, "side_units": side,
                              "largest_region": max(len(m) for m in groups), "ideals": sub.stats.get("ideals")}
    lb = simple_lower_bound(problem)
    if sub.objective is None:
        return no_plan(problem, status="unknown", method="pipedream", stats=stats, lower_bound=lb,
                       notes=["no split along PipeDream's path fits"], runtime_s=time.perf_counter() - t0)
    order = [(s.kind, s.kind_index) for s in sub.stages]
    split = {v: d for v, d in sub.device_of().items() if not (isinstance(v, tuple) and v[:1] == (_LINK,))}
    return plan_from_split(problem, split, order, solver="PipeDream DP", claimed=sub.objective,
                           exact=True, status="feasible", lower_bound=lb, method="pipedream", stats=stats,
                           runtime_s=time.perf_counter() - t0)
