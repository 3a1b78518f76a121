"""Contraction before the exact DP: merge units that an optimal split never needs to separate.

The exact DP enumerates the ideals of the unit DAG (:class:`~stagecut.colocation.Units`), and
operator graphs of transformers have far too many: every constant that hangs into a layer (a
causal mask sliced from a buffer, ``arange`` for the positions) can sit in any stage before its
consumer, which doubles the ideals of everything before it, and the views and transposes of
attention's query, key and value branches multiply them again. Each rule below merges a unit
into a neighbour only when an *exchange argument* shows that some optimal contiguous split keeps
the two together: take any contiguous split that separates them, move the unit onto its
neighbour's stage, and no stage's load grows (the loads are those of
:func:`stagecut.evaluate`: compute, plus each producer's output once when a consumer is on
another stage and once per other stage that consumes it). Applied one at a time, each rule
keeps the optimum of the contracted problem equal to the optimum of the one before, so the DP
on the contracted unit DAG is exact over every contiguous split (``status="optimal"``). The
rules apply to accelerator-only problems (``cpus=0``), where every stage pays communication.

``t(x)``: the accelerator time of a unit's nodes (forward and backward); ``out(x, y)``: the
comm of the nodes of ``x`` with an edge into ``y``; memory moves with a unit, so a unit that
holds memory is merged only when the memory limit cannot bind (the whole graph fits on one
device).

* **Leaf absorption** (forward and training graphs). A unit ``x`` all of whose edges (forward
  and backward, in and out) go to one other unit ``c``, with ``t(x) <= out(x, c)``. Moving
  ``x`` to ``c``'s stage adds at most ``t(x)`` there and removes at least ``out(x, c)`` it
  received; ``x``'s own stage only loses; no one else sees a change. This takes constants,
  ``arange``, mask slices and the token embedding onto the layer that uses them (repeatedly:
  a chain of them folds one by one).
* **Chain link, pulled back** (forward graphs). An edge ``p -> x`` where ``x`` is ``p``'s only
  successor and ``p`` is ``x``'s only predecessor, with ``t(x) + out(x) <= out(p)`` (``out``:
  the comm of the unit's nodes with an edge leaving it). Moving ``x`` to ``p``'s stage costs
  that stage ``t(x) + out(x) - out(p) <= 0`` and ``x``'s old stage ``out(x) - out(p) - t(x)``;
  the consumers of ``x`` receive it as before. A view or a transpose after the operator that
  makes its input.
* **Chain link, pushed forward** (forward graphs). The same edge with
  ``t(p) + in(p) <= out(p)`` (``in``: the comm of the nodes outside ``p`` with an edge into
  it): moving ``p`` to ``x``'s stage costs that stage at most ``t(p) + in(p) - out(p)``, and
  ``p``'s old stage at most ``in(p) - out(p) - t(p)``. A view before the operator that reads it.

Tests compare the DP on the contracted DAG with the uncontracted DP (random graphs and traced
transformers) and with brute force on small graphs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stagecut.colocation import Units
from stagecut.errors import TooManyIdealsError
from stagecut.graph import ACCELERATOR, Graph
from stagecut.results import Plan, Stat
from stagecut.throughput.dp import DEFAULT_MAX_IDEALS, _exact_raw, dp_plan
from stagecut.throughput.problem import ThroughputProblem, set_aside_free_nodes

__all__ = ["ContractedUnits", "contract_units", "try_contracted_dp"]


@dataclass
class ContractedUnits:
    """A unit DAG after contraction (the interface the DP takes: ``n_units``, ``members``,
    ``unit_of_node``, ``edges``, ``edge_array``), and what was merged.

    Attributes
    ----------
    n_units : int
    members : list of list of int
        Node positions of each unit, increasing.
    unit_of_node : numpy.ndarray
    edges : list of (int, int)
    edge_array : numpy.ndarray
    merged : dict of str to int
        How many merges each rule made (``"leaf"``, ``"pull"``, ``"push"``, and ``"hang"``: leaves
        merged by the restriction, without the exact condition).
    before : int
        Units before the contraction.
    restricted : list of int
        Node positions merged by ``"hang"`` (empty unless ``restrict=True``).
    """

    n_units: int
    members: list[list[int]]
    unit_of_node: npt.NDArray[np.int64]
    edges: list[tuple[int, int]]
    edge_array: npt.NDArray[np.int64]
    merged: dict[str, int]
    before: int
    restricted: list[int]


class _State:
    """Union-find over units, with each live unit's nodes, unit neighbours and compute time."""

    def __init__(self, graph: Graph, units: Units) -> None:
        self.graph = graph
        arr = graph.arrays()
        ok, acc = arr.kind(ACCELERATOR)
        self.comm = arr.comm.tolist()
        self.memory = arr.memory.tolist()
        n = units.n_units
        self.parent = list(range(n))
        self.nodes: list[list[int]] = [list(m) for m in units.members]
        self.time = [math.fsum(float(acc[i]) for i in m) for m in units.members]
        self.mem = [math.fsum(self.memory[i] for i in m) for m in units.members]
        self.runs = [all(bool(ok[i]) for i in m) for m in units.members]
        self.succ: list[set[int]] = [set() for _ in range(n)]
        self.pred: list[set[int]] = [set() for _ in range(n)]
        for a, b in units.edges:
            self.succ[a].add(b)
            self.pred[b].add(a)
        self.unit_of = units.unit_of_node.copy()
        self.backward = bool(arr.backward.any())

    def find(self, a: int) -> int:
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def unit(self, node: int) -> int:
        return self.find(int(self.unit_of[node]))

    def neighbours(self, x: int) -> set[int]:
        """Units sharing a node-level edge (forward or backward) with unit ``x``."""
        g = self.graph
        out: set[int] = set()
        for i in self.nodes[x]:
            for j in g.succ[i]:
                out.add(self.unit(j))
            for j in g.pred[i]:
                out.add(self.unit(j))
        out.discard(x)
        return out

    def sent(self, x: int, into: int | None = None) -> float:
        """Comm of the nodes of ``x`` with an edge into ``into`` (``None``: out of ``x``)."""
        g = self.graph
        total = []
        for i in self.nodes[x]:
            targets = (self.unit(j) for j in g.succ[i])
            if any((u == into) if into is not None else (u != x) for u in targets):
                total.append(self.comm[i])
        return math.fsum(total)

    def received(self, x: int) -> float:
        """Comm of the nodes outside ``x`` with an edge into ``x`` (each once)."""
        g = self.graph
        seen = {j for i in self.nodes[x] for j in g.pred[i] if self.unit(j) != x}
        return math.fsum(self.comm[j] for j in seen)

    def merge(self, x: int, into: int) -> None:
        """Merge unit ``x`` into unit ``into`` (both live)."""
        self.parent[x] = into
        self.nodes[into].extend(self.nodes[x])
        self.time[into] = self.time[into] + self.time[x]
        self.mem[into] = self.mem[into] + self.mem[x]
        self.runs[into] = self.runs[into] and self.runs[x]
        for s in self.succ[x]:
            self.pred[s].discard(x)
            if s != into:
                self.pred[s].add(into)
                self.succ[into].add(s)
        for p in self.pred[x]:
            self.succ[p].discard(x)
            if p != into:
                self.succ[p].add(into)
                self.pred[into].add(p)
        self.succ[into].discard(into)
        self.pred[into].discard(into)
        self.nodes[x], self.succ[x], self.pred[x] = [], set(), set()


def _leaf(st: _State, x: int, may_move: bool, restrict: bool) -> tuple[int, bool] | None:
    """``(c, exact)``: the unit ``x`` may be absorbed into (leaf absorption) and whether the
    exact condition holds (else only with ``restrict``); or ``None``."""
    if not may_move:
        return None
    nbrs = st.neighbours(x)
    if len(nbrs) != 1:
        return None
    (c,) = nbrs
    if not st.runs[c]:
        return None
    exact = st.time[x] <= st.sent(x, c)
    return (c, exact) if exact or (restrict and not st.pred[x]) else None


def _link(st: _State, p: int, x: int, move_p: bool, move_x: bool) -> bool:
    """May the chain link ``p -> x`` be merged (pulled back or pushed forward)?"""
    if st.succ[p] != {x} or st.pred[x] != {p}:
        return False
    out_p = st.sent(p)
    if move_x and st.time[x] + st.sent(x) <= out_p:
        return True
    return move_p and st.time[p] + st.received(p) <= out_p


def contract_units(graph: Graph, units: Units, *, memory: float = math.inf, cpus: int = 0,
                   rules: Iterable[str] = ("leaf", "pull", "push"), restrict: bool = False) -> ContractedUnits:
    """Contract ``units`` (of ``graph``) by the exact rules of this module.

    Parameters
    ----------
    graph : Graph
    units : Units
        The unit DAG of ``graph`` (colocation classes contracted).
    memory : float
        Memory per accelerator: units holding memory move only when the whole graph fits in it.
    cpus : int
        CPU devices: with any, nothing is contracted (a CPU stage pays no communication, so the
        exchange arguments do not hold).
    rules : iterable of str
        The rules to apply (tests turn them off one by one).
    restrict : bool
        Also merge every source leaf unit (no predecessor, all of its edges to one other unit: a
        constant, a mask slice, a position index) into its neighbour when the exact condition fails: the DP is
        then optimal over the contiguous splits that keep each such leaf with its neighbour
        (the ``"hang"`` merges, listed in ``restricted``).

    Returns
    -------
    ContractedUnits
        Units numbered by their smallest node position, edges between them; equal to ``units``
        when no rule applies.

    Examples
    --------
    >>> import stagecut as sc
    >>> from stagecut.colocation import Units
    >>> g = sc.Graph([sc.Node("mask", {"accelerator": 0.5}, comm=1.0), sc.Node("x", {"accelerator": 2.0}, comm=1.0),
    ...               sc.Node("y", {"accelerator": 2.0})], [("mask", "y"), ("x", "y")])
    >>> cu = contract_units(g, Units(g))
    >>> cu.n_units, cu.members, cu.merged["leaf"]
    (2, [[0, 2], [1]], 1)
    """
    active = set(rules)
    st = _State(graph, units)
    merged = {"leaf": 0, "pull": 0, "push": 0, "hang": 0}
    restricted: list[int] = []
    if cpus == 0 and len(st.nodes) > 1:
        memory_free = math.fsum(st.memory) <= memory
        changed = True
        while changed:
            changed = False
            for x in range(len(st.parent)):
                if st.find(x) != x or not st.nodes[x]:
                    continue
                may_move = st.runs[x] and (memory_free or st.mem[x] == 0)
                if "leaf" in active:
                    found = _leaf(st, x, may_move, restrict)
                    if found is not None:
                        c, exact = found
                        if not exact:
                            restricted.extend(st.nodes[x])
                        st.merge(x, c)
                        merged["leaf" if exact else "hang"] += 1
                        changed = True
                        continue
                if st.backward or not ({"pull", "push"} & active) or len(st.succ[x]) != 1:
                    continue
                (y,) = st.succ[x]
                move_y = "pull" in active and st.runs[y] and (memory_free or st.mem[y] == 0)
                move_x = "push" in active and may_move
                if (move_x or move_y) and _link(st, x, y, move_x, move_y):
                    rule = "pull" if move_y and st.time[y] + st.sent(y) <= st.sent(x) else "push"
                    st.merge(y, x)
                    merged[rule] += 1
                    changed = True
    roots = sorted({st.find(x) for x in range(len(st.parent)) if st.nodes[st.find(x)]},
                   key=lambda r: min(st.nodes[r]))
    number = {r: i for i, r in enumerate(roots)}
    members = [sorted(st.nodes[r]) for r in roots]
    unit_of = np.empty(len(graph), dtype=np.int64)
    for i, m in enumerate(members):
        unit_of[m] = i
    pairs = {(number[st.find(a)], number[st.find(b)]) for a, b in units.edges}
    edges = sorted((a, b) for a, b in pairs if a != b)
    return ContractedUnits(n_units=len(roots), members=members, unit_of_node=unit_of, edges=edges,
                           edge_array=np.array(edges, dtype=np.int64).reshape(-1, 2), merged=merged,
                           before=units.n_units, restricted=sorted(restricted))


def try_contracted_dp(problem: ThroughputProblem, *, max_ideals: int = DEFAULT_MAX_IDEALS,
                      prune: bool = True) -> Plan | str:
    """The exact DP on the contracted unit DAG (:func:`contract_units`): the same optimum as
    :func:`~stagecut.throughput.dp.try_dp` (status ``"optimal"`` over every contiguous split),
    on far fewer ideals; or why it refused.

    Parameters
    ----------
    problem : ThroughputProblem
    max_ideals : int
    prune : bool

    Returns
    -------
    Plan or str
        ``stats`` add ``contracted_from`` (units before contraction) and ``merged`` (merges per
        rule, as ``"leaf=3 pull=1 push=0"``).

    Raises
    ------
    InvalidGraphError, SolverError
        As :func:`~stagecut.throughput.dp.try_dp`.
    """
    t0 = time.perf_counter()
    core, aside = set_aside_free_nodes(problem)
    units = contract_units(core.graph, Units(core.graph, core.memory), memory=core.memory, cpus=core.cpus)
    try:
        raw = _exact_raw(core, units, max_ideals, prune)  # type: ignore[arg-type]  # a Units-like object
    except TooManyIdealsError:
        return (f"the contracted unit DAG ({units.n_units} units, from {units.before}) has more than "
                f"max_ideals={max_ideals} ideals")
    merged = " ".join(f"{k}={v}" for k, v in units.merged.items())
    stats: dict[str, Stat] = {"ideals": raw["ideals"], "pairs": raw["pairs"], "units": units.n_units,
                              "contracted_from": units.before, "merged": merged, "set_aside": len(aside)}
    notes = [f"contracted {units.before} units to {units.n_units} before the exact DP ({merged}; each merge "
             "provably keeps an optimum)"]
    return dp_plan(problem, core, units, raw, aside, stats, notes, t0)
