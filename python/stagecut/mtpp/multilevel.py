"""Multilevel plans for MTPP: ``slice_graph(..., method="multilevel")``.

The scheme of multilevel graph partitioners (METIS, Scotch), kept acyclic: coarsen the graph
by contracting edges, find a plan for the coarsest graph, then refine it on the way back.

**Coarsening.** A level is a clustering of the nodes (level 0: the forced groups). A pass
contracts edges of the quotient graph of the clusters, the heaviest first: an edge's weight is
the tensor cost it carries (each tensor's cost shared among its consumers), over the work of
the two clusters it joins, so that clusters stay small and the tensors a plan would pay end up
inside them (a seed jitters the weights by a few percent, so restarts coarsen differently). A
cluster is contracted at most once per pass, into a cluster of work at most :data:`CAP` times
an even share of the graph's work over :func:`target` clusters (and, under a hard memory
limit, with parameters that fit one device), and only when no other path joins the two
clusters: the quotient stays acyclic, so a partition of the clusters with an acyclic quotient
is one of the nodes. Passes run until at most :func:`target` clusters are left or a pass
removes fewer than :data:`STALL` of them, or the time limit passes.

**Coarsest plan, refinement.** Each level is an MTPP problem of its own: the same graph and
memory model with the clusters as colocation classes, so every valid plan of a level is a valid
plan of every finer level and of the graph. The coarsest level is solved by
``slice_graph(method="auto")`` (the exact DP when it has few ideals, else one run of each
search; the multilevel search itself is not among them there), then each finer level improves
the plan of the level above by exact re-splits of two blocks and moves of single groups
(:func:`~stagecut.mtpp.improve.improve_plan`, no kicks): moves of whole clusters first, of
single nodes last. On sparse random graphs of 500 to 2,000 nodes this finds plans 4 to 8%
cheaper than a 15 s run of the other searches, in a few seconds; on graphs with a geometry the
spectral sweeps are as good or better, and on a hundred nodes or so any search may win.

**Graphs whose tensors cost more than their work.** There a good plan cuts the graph at a few
places where little crosses, and coarse clusters may join every such place: on a BERT training
operator graph (6 layers, 1,071 nodes, colocation ignored, ``k = 8``), every level from 280
clusters up had no plan cheaper than the whole graph on one device, and the moves of the
refinement cannot open a new block one group at a time. So when the refined plan costs within
:data:`NO_SPLIT` of one device, the graph itself is planned by ``method="auto"`` (without the
multilevel search) in the time left, and the cheaper plan is kept (when it is the graph's own,
``planned`` is the graph's groups). Not inside ``method="auto"``, whose other searches plan the
graph anyway.

A time limit (the caller's :func:`~stagecut._deadline.deadline`) stops the search with the plan
of the finest level reached, which is valid for the graph.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import random
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import networkx as nx

from stagecut._deadline import DeadlineReached, expired, remaining
from stagecut.mtpp.improve import improve_plan
from stagecut.mtpp.model import MtppProblem, forced_groups
from stagecut.mtpp.plan import SlicePlan

__all__ = ["CAP", "MIN_UNITS", "NO_SPLIT", "STALL", "coarsen", "in_portfolio", "levels_problem", "nested", "search",
           "target"]

#: The most work a cluster may have, as a multiple of the graph's work over :func:`target`.
CAP = 1.5
#: A pass that removes fewer than this share of the clusters ends the coarsening.
STALL = 0.05
#: ``method="auto"`` runs the multilevel search only on graphs of more units (forced groups,
#: folded leaves) than this: on fewer, the coarsest level would be the graph itself.
MIN_UNITS = 150
#: The share of the time left the coarsest level's solve may take.
COARSE_SHARE = 0.3
#: The relative jitter a seed puts on the edge weights (seed 0 too: each seed coarsens its own way).
JITTER = 0.05
#: A refined plan within this share of the cost of the whole graph on one device is one that no
#: split pays for: the graph itself is then planned as well (module docs).
NO_SPLIT = 0.01

_NESTED: ContextVar[bool] = ContextVar("stagecut_multilevel_nested", default=False)
_IN_PORTFOLIO: ContextVar[bool] = ContextVar("stagecut_multilevel_in_portfolio", default=False)


def nested() -> bool:
    """Whether this call runs inside a multilevel search's solve of its coarsest level (where
    ``method="auto"`` leaves the multilevel search out, so that it does not recurse)."""
    return _NESTED.get()


@contextlib.contextmanager
def _raised(flag: ContextVar[bool]) -> Iterator[None]:
    token = flag.set(True)
    try:
        yield
    finally:
        flag.reset(token)


def _nesting() -> contextlib.AbstractContextManager[None]:
    return _raised(_NESTED)


def in_portfolio() -> contextlib.AbstractContextManager[None]:
    """The searches of ``method="auto"`` run inside this: there the multilevel search does not plan
    the graph itself when no split pays for its plan (the portfolio's other searches do)."""
    return _raised(_IN_PORTFOLIO)


def target(devices: int) -> int:
    """The clusters the coarsening aims at: ``4 k``, at least 24 and at most ``MIN_UNITS // 2``.

    >>> target(2), target(8), target(64)
    (24, 32, 75)
    """
    return max(24, min(4 * devices, MIN_UNITS // 2))


def coarsen(problem: MtppProblem, seed: int = 0) -> list[list[int]]:
    """The levels of the coarsening: ``levels[j][i]`` is the cluster of node position ``i`` at
    level ``j`` (a node position of the cluster); ``levels[0]`` is :func:`forced_groups`.

    >>> from stagecut.graph import Graph
    >>> p = MtppProblem(Graph.chain([1.0] * 4, comm=1.0), devices=2)
    >>> coarsen(p)[0], len(coarsen(p))    # four nodes are fewer than the target: no pass
    ([0, 1, 2, 3], 1)
    """
    g = problem.graph
    n = len(g.nodes)
    label = forced_groups(problem)
    cg: nx.DiGraph[int] = nx.DiGraph()
    cg.add_nodes_from(set(label))
    work = dict.fromkeys(cg.nodes, 0.0)
    params = dict.fromkeys(cg.nodes, 0.0)
    for i in range(n):
        work[label[i]] += problem.work(i)
        params[label[i]] += g.nodes[i].memory
    weight: dict[tuple[int, int], float] = {}
    for u in range(n):
        succ = g.succ[u]
        for v in succ:
            a, b = label[u], label[v]
            if a != b:
                cg.add_edge(a, b)
                weight[a, b] = weight.get((a, b), 0.0) + g.nodes[u].comm / len(succ)
    goal = target(problem.devices)
    cap = CAP * sum(work.values()) / goal
    room = problem.memory - problem.reserved_memory if problem.bandwidth is None else math.inf
    rng = random.Random(seed)
    levels = [label]
    while cg.number_of_nodes() > goal and not expired():
        before = cg.number_of_nodes()
        into = _pass(cg, weight, work, params, cap, room, goal, rng)
        if before - cg.number_of_nodes() < STALL * before:
            break
        label = [into.get(c, c) for c in label]
        levels.append(label)
    return levels


def _pass(cg: nx.DiGraph[int], weight: dict[tuple[int, int], float], work: dict[int, float],
          params: dict[int, float], cap: float, room: float, goal: int, rng: random.Random) -> dict[int, int]:
    """One pass of contractions on ``cg`` (in place, with the weights, works and parameters):
    the clusters merged, each into the cluster that keeps its label."""
    def score(e: tuple[int, int]) -> float:
        return weight[e] / (work[e[0]] + work[e[1]] + 1e-300) * (1.0 + JITTER * rng.random())

    candidates = sorted(((score(e), e) for e in weight), key=lambda t: (-t[0], t[1]))
    touched: set[int] = set()
    into: dict[int, int] = {}
    for tried, (_, (a, b)) in enumerate(candidates):
        if cg.number_of_nodes() <= goal or (tried % 256 == 255 and expired()):
            break
        if a in touched or b in touched or work[a] + work[b] > cap or params[a] + params[b] > room:
            continue
        cg.remove_edge(a, b)
        other = nx.has_path(cg, a, b)  # (another path a -> b would close a cycle through the cluster)
        cg.add_edge(a, b)
        if other:
            continue
        for p in list(cg.predecessors(b)):
            if p != a:
                _move(weight, (p, b), (p, a))
                cg.add_edge(p, a)
        for s in list(cg.successors(b)):
            _move(weight, (b, s), (a, s))
            cg.add_edge(a, s)
        weight.pop((a, b), None)
        cg.remove_node(b)
        work[a] += work.pop(b)
        params[a] += params.pop(b)
        touched.update((a, b))
        into[b] = a
    return into


def _move(weight: dict[tuple[int, int], float], old: tuple[int, int], new: tuple[int, int]) -> None:
    weight[new] = weight.get(new, 0.0) + weight.pop(old, 0.0)


def levels_problem(problem: MtppProblem, label: list[int]) -> MtppProblem:
    """``problem`` with the clusters of ``label`` as its colocation classes (the same memory model)."""
    g = problem.graph
    graph = g.map_nodes(lambda nd: dataclasses.replace(nd, colocation=label[g.index[nd.id]]))
    return MtppProblem(graph, devices=problem.devices, memory=None if math.isinf(problem.memory) else problem.memory,
                       bandwidth=problem.bandwidth, reserved_memory=problem.reserved_memory, kind=problem.kind,
                       colocate=True)


def search(problem: MtppProblem, seed: int, plan: Callable[..., SlicePlan]) -> dict[str, Any]:
    """The multilevel search (module docs) within the caller's deadline: ``objective``,
    ``blocks`` (node positions), ``history`` (the plan's cost at each level refined, coarsest
    first, then the cost of the graph's own plan when it is kept), ``levels``, ``coarsest`` (its
    clusters), ``planned`` (the clusters of the level first planned: the coarsest, or under a hard
    memory limit the first finer level that has a plan; the graph's groups when its own plan is
    kept), ``whole`` (present when the graph's own plan is kept), ``time_limit_reached``; the cost
    ``inf`` and no blocks when no level has a plan (infeasible,
    or no time). ``plan`` is :func:`~stagecut.mtpp.slicegraph.slice_graph` (given by it: no import cycle)."""
    g = problem.graph
    levels = coarsen(problem, seed)
    out: dict[str, Any] = {"objective": math.inf, "blocks": [], "history": [], "levels": len(levels),
                           "coarsest": len(set(levels[-1])), "planned": len(set(levels[-1])),
                           "time_limit_reached": False}
    top = len(levels) - 1
    while True:  # (the coarsest level, or under a hard memory limit the first finer one with a plan)
        left = remaining()
        share = None if left is None else max(COARSE_SHARE * left, 1e-3)
        try:
            with _nesting():
                found = plan(problem if top == 0 else levels_problem(problem, levels[top]), method="auto",
                             seed=seed, time_limit=share, improve=True)
        except DeadlineReached:
            out["time_limit_reached"] = True
            return out
        if found.stages or found.status == "time_limit" or top == 0:
            break
        top -= 1
    out["planned"] = len(set(levels[top]))
    if found.objective is None or not found.stages:
        out["time_limit_reached"] = found.status == "time_limit"
        return out
    blocks = [list(s.nodes) for s in found.stages]
    out["history"].append(found.objective)
    for j in range(top - 1, -1, -1):
        if expired():
            out["time_limit_reached"] = True
            break
        level = problem if j == 0 else levels_problem(problem, levels[j])
        imp = improve_plan(level, blocks, time_limit=None, kicks=0, seed=seed)  # (within the caller's deadline)
        blocks = [list(s.nodes) for s in imp.stages]
        out["history"].append(imp.objective)
        out["time_limit_reached"] = bool(imp.stats.get("time_limit_reached"))
    out["objective"] = out["history"][-1]  # (the evaluator's: every level's cost is the graph's)
    out["blocks"] = [[g.index[v] for v in b] for b in blocks]
    no_split = out["objective"] >= (1 - NO_SPLIT) * _one_device(problem)
    if no_split and top > 0 and not _IN_PORTFOLIO.get() and not expired():
        _plan_whole(problem, seed, plan, out)
    return out


def _one_device(problem: MtppProblem) -> float:
    """The cost of the whole graph in one block: its work and overflow (``inf`` under a hard memory
    limit it breaks, so that no plan is ever within :data:`NO_SPLIT` of it)."""
    return sum(problem.work(i) for i in range(len(problem.graph.nodes))) + problem.overflow(
        sum(nd.memory for nd in problem.graph.nodes))


def _plan_whole(problem: MtppProblem, seed: int, plan: Callable[..., SlicePlan], out: dict[str, Any]) -> None:
    """The graph itself planned by ``method="auto"`` (without the multilevel search), kept in ``out``
    when cheaper (``out["whole"]``): for a refined plan that no split pays for (module docs)."""
    left = remaining()
    try:
        with _nesting():
            found = plan(problem, method="auto", seed=seed, time_limit=None if left is None else max(left, 1e-3),
                         improve=True)
    except DeadlineReached:
        out["time_limit_reached"] = True
        return
    if found.objective is not None and found.stages and found.objective < out["objective"]:
        g = problem.graph
        out["objective"], out["blocks"] = found.objective, [[g.index[v] for v in s.nodes] for s in found.stages]
        out["history"].append(found.objective)
        out["planned"] = len(set(forced_groups(problem)))
        out["whole"] = True
    out["time_limit_reached"] = found.status == "time_limit"
