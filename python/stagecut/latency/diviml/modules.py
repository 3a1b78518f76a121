"""The modules of a graph, where MILP-SPLIT cuts it: its cut vertices, and the modules of a
graph whose parts are joined by several channels.

**Cut vertices** (:func:`cut_vertices`). A node ``c`` is a *cut vertex* when every path from a
source to a sink passes through it: every other node is an ancestor or a descendant of ``c`` and
no edge joins an ancestor to a descendant. In a topological order the cut vertices are the
positions ``p`` that no edge jumps over and such that every node before ``p`` has a successor and
every node after ``p`` a predecessor (found in O(n + m)). :func:`modules_of` gives the chain of
modules between them (see :mod:`~stagecut.latency.diviml.split`).

**Multi-channel modules** (:func:`channel_modules`). With ``c`` parallel channels there is no
cut vertex; the modules are the ``(c + 1)``-edge-connected components of the undirected graph,
lightly wired nodes joined to a neighbour's component and components that depend on each other
both ways merged; on large graphs, or when that finds a single module, a topological order cut
where at most ``c`` edges cross (see :mod:`~stagecut.latency.diviml.split_multi`).
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np

from stagecut._deadline import expired
from stagecut.errors import InvalidArgumentError
from stagecut.latency.model.problem import LatencyProblem
from stagecut.validate import check_int, shown

__all__ = ["cut_vertices", "modules_of", "channel_modules", "MIN_MODULE"]

MIN_MODULE = 3  #: components with fewer nodes join a neighbour's module
MIN_TOPOLOGICAL = 6  #: the least module of the topological fallback
#: above this many nodes the modules come from the topological cut alone (networkx's
#: k_edge_components took 16-30 s on 280-360-node RWNNs, the topological cut is O(n + m))
MAX_COMPONENT_NODES = 120


def _modules_for(problem: LatencyProblem, c: int) -> list[list[int]]:
    g = nx.Graph()
    g.add_nodes_from(range(len(problem)))
    g.add_edges_from((u, v) for u in range(len(problem)) for v in problem.succ[u])
    label = [0] * len(problem)
    comps = sorted((sorted(s) for s in nx.k_edge_components(g, c + 1)), key=min)
    for k, comp in enumerate(comps):
        for v in comp:
            label[v] = k
    big = [k for k, comp in enumerate(comps) if len(comp) >= MIN_MODULE]
    if not big:
        return [list(problem.order)]
    rank = {v: r for r, v in enumerate(problem.order)}
    span = {k: (min(rank[v] for v in comps[k]), max(rank[v] for v in comps[k])) for k in big}
    for comp in comps:  # a small component joins the big one nearest in topological rank
        if len(comp) < MIN_MODULE:
            for v in comp:
                r = rank[v]
                label[v] = min(big, key=lambda b: (max(span[b][0] - r, r - span[b][1], 0), span[b][0]))
    q = nx.DiGraph()
    q.add_nodes_from(set(label))
    q.add_edges_from((label[u], label[v]) for u in range(len(problem)) for v in problem.succ[u]
                     if label[u] != label[v])
    cond = nx.condensation(q)
    groups: list[list[int]] = []
    for s in nx.topological_sort(cond):
        members = set(cond.nodes[s]["members"])
        groups.append(sorted((v for v in range(len(problem)) if label[v] in members), key=rank.__getitem__))
    return groups


def _topological_modules(problem: LatencyProblem, c: int) -> list[list[int]]:
    """The fallback: cut a topological order where at most ``c`` edges cross, modules of at
    least :data:`MIN_TOPOLOGICAL` nodes."""
    order = problem.order
    n = len(order)
    pos = {v: p for p, v in enumerate(order)}
    delta = np.zeros(n + 1, dtype=np.int64)
    for u in range(n):
        for v in problem.succ[u]:
            delta[pos[u] + 1] += 1
            delta[pos[v] + 1] -= 1
    crossing = np.cumsum(delta)  # crossing[p]: edges from order[:p] to order[p:]
    mods: list[list[int]] = []
    last = 0
    for p in range(MIN_TOPOLOGICAL, n - MIN_TOPOLOGICAL + 1):
        if crossing[p] <= c and p - last >= MIN_TOPOLOGICAL:
            mods.append(order[last:p])
            last = p
    mods.append(order[last:])
    return mods


def channel_modules(problem: LatencyProblem, channels: int | None = None) -> tuple[int, list[list[int]]]:
    """The modules of a multi-channel graph (see the module docs), in a topological order.

    Parameters
    ----------
    problem : LatencyProblem
    channels : int, optional
        ``c`` (>= 1); default: the one of 2, 3 and 4 giving the most modules.

    Returns
    -------
    tuple of (int, list of list of int)
        ``c`` and the modules (node positions, each in topological order).

    Raises
    ------
    InvalidArgumentError
        Not a LatencyProblem, or a bad ``channels``.

    Examples
    --------
    >>> from stagecut.latency import LatencyProblem
    >>> from stagecut.rwnn import rwnn, rwnn_devices
    >>> p = LatencyProblem(rwnn(3, channels=2, size=8, seed=0), rwnn_devices(), output_bytes="comm")
    >>> c, mods = channel_modules(p, 2)
    >>> c, len(mods), sum(map(len, mods)) == len(p)
    (2, 3, True)
    """
    if not isinstance(problem, LatencyProblem):
        raise InvalidArgumentError(f"problem: expected a LatencyProblem, got {shown(problem)}")
    cs = (check_int(channels, "channels", minimum=1),) if channels is not None else (2, 3, 4)
    cut = max(((c, _topological_modules(problem, c)) for c in cs), key=lambda cm: (len(cm[1]), -cm[0]))
    if len(problem) > MAX_COMPONENT_NODES:
        return cut
    found: list[tuple[int, list[list[int]]]] = []
    for c in cs:  # (networkx's components take seconds: stop at the deadline with what is known)
        if expired():
            break
        found.append((c, _modules_for(problem, c)))
    best = max(found, key=lambda cm: (len(cm[1]), -cm[0]), default=(cut[0], [list(problem.order)]))
    return best if len(best[1]) >= 2 else cut


def cut_vertices(problem: LatencyProblem) -> list[int]:
    """The positions of the nodes every source-to-sink path passes through, in topological
    order (see the module docs).

    Parameters
    ----------
    problem : LatencyProblem

    Returns
    -------
    list of int
        Node positions, each before the next in the DAG.

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a LatencyProblem.
    """
    if not isinstance(problem, LatencyProblem):
        raise InvalidArgumentError(f"problem: expected a LatencyProblem, got {shown(problem)}")
    order = problem.order
    n = len(order)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    jumps = np.zeros(n + 1, dtype=np.int64)  # edges a -> b jump over the positions pos[a] < p < pos[b]
    for a in range(n):
        for b in problem.succ[a]:
            if pos[b] > pos[a] + 1:
                jumps[pos[a] + 1] += 1
                jumps[pos[b]] -= 1
    over = np.cumsum(jumps)[:n]
    no_succ = np.array([not problem.succ[v] for v in order], dtype=np.int64)
    no_pred = np.array([not problem.pred[v] for v in order], dtype=np.int64)
    sinks_before = np.concatenate([[0], np.cumsum(no_succ)[:-1]])
    sources_after = np.concatenate([np.cumsum(no_pred[::-1])[::-1][1:], [0]]) if n else no_pred
    return [order[p] for p in range(n) if over[p] == 0 and sinks_before[p] == 0 and sources_after[p] == 0]


def modules_of(problem: LatencyProblem, cuts: Sequence[int]) -> list[tuple[int | None, list[int], int | None]]:
    """The chain of modules between the cut vertices: ``(entry, interior, exit)`` per module, in
    order (positions; ``entry`` ``None`` for the first, ``exit`` ``None`` for the last; a first
    or last module with no interior is left out).

    Parameters
    ----------
    problem : LatencyProblem
    cuts : sequence of int
        :func:`cut_vertices` of the problem (at least one).

    Returns
    -------
    list of tuple

    Raises
    ------
    InvalidArgumentError
        No cut vertex given.
    """
    if not cuts:
        raise InvalidArgumentError("cuts: at least one cut vertex is needed")
    rank = {v: r for r, v in enumerate(problem.order)}
    at = [rank[c] for c in cuts]
    order = problem.order
    out: list[tuple[int | None, list[int], int | None]] = []
    if at[0] > 0:
        out.append((None, order[:at[0]], cuts[0]))
    for i in range(len(cuts) - 1):
        out.append((cuts[i], order[at[i] + 1:at[i + 1]], cuts[i + 1]))
    if at[-1] < len(order) - 1:
        out.append((cuts[-1], order[at[-1] + 1:], None))
    return out
