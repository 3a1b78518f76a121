"""The exact MTPP optimum: the ideal DP of the core, with the leaf relaxation and its repair.

Every acyclic-quotient partition is a chain of ideals, so the ideal DP with the MTPP block cost
(``_core.mtpp_exact``) is exact. Work-free leaves that hold parameters cannot be folded exactly
when memory binds, and each one can double the number of ideals; so :func:`solve_exact` first
solves the relaxation that drops their parameters (they fold: every block costs no more, so its
optimum is a lower bound), then puts them back (:func:`repair`): a repaired partition that costs
no more than the bound is optimal. When the repair fails, the leaf that found no room is
modelled exactly from then on (a tighter relaxation), until the repair succeeds or no leaf is
left relaxed (the plain ideal DP).

Inside a time limit (a :func:`stagecut._deadline.deadline` scope), a DP cut short gives way to
the best partition known: the quick BRKGA incumbents that bound each DP, re-scored with the true
costs (:attr:`ExactOutcome.timed_out`), with the last relaxation's optimum as a lower bound.

Examples
--------
>>> from stagecut.graph import Graph
>>> from stagecut.mtpp.model import MtppProblem
>>> from stagecut.mtpp.units import Units
>>> p = MtppProblem(Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5), devices=2)
>>> out = solve_exact(p, Units(p, fold_leaves=True), fold=True, max_ideals=1000)
>>> out.objective, out.blocks, out.exact_by
(5.5, [[0, 1], [2, 3]], 'ideal DP')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from stagecut._deadline import DeadlineReached
from stagecut.errors import TooManyIdealsError
from stagecut.graph import kahn_order
from stagecut.mtpp.model import MtppProblem, block_cost
from stagecut.mtpp.units import RelaxedLeaf, Units, components

__all__ = ["Relaxation", "ExactOutcome", "solve_exact", "repair"]


@dataclass(frozen=True, kw_only=True)
class Relaxation:
    """The last round of the leaf relaxation: its optimum (a lower bound on the MTPP optimum),
    the ideals it took, how many leaves it relaxed and how many rounds were solved."""

    bound: float
    ideals: int
    relaxed_leaves: int
    rounds: int


@dataclass(frozen=True, kw_only=True)
class ExactOutcome:
    """What :func:`solve_exact` found: the optimum (``inf``: infeasible), its blocks (node
    positions, pipeline order, each block in a topological order of the graph), the ideals of
    the last DP, how it was proven, the relaxation."""

    objective: float
    blocks: list[list[int]]
    ideals: int
    exact_by: str
    relaxation: Relaxation | None = None
    timed_out: bool = False
    """Stopped by the time limit: ``objective`` and ``blocks`` are the best partition known (true
    costs; ``inf`` and none when there is none), not proven optimal."""


class _Incumbent:
    """The best partition seen so far (node positions), by its true cost."""

    def __init__(self, problem: MtppProblem) -> None:
        self.problem = problem
        self.cost = math.inf
        self.blocks: list[list[int]] = []

    def offer(self, blocks: list[list[int]]) -> None:
        ids = [nd.id for nd in self.problem.graph.nodes]
        cost = max((block_cost(self.problem, [ids[i] for i in b]) for b in blocks), default=math.inf)
        if cost < self.cost:
            self.cost, self.blocks = cost, blocks


def _ideal_dp(units: Units, k: int, max_ideals: int,
              best: _Incumbent | None = None) -> tuple[float, list[list[int]], int]:
    """The ideal DP on ``units`` (``(optimum, blocks of units, ideals)``), pruned by the cost of
    a quick BRKGA partition (a block that costs more than some known partition is in no better one),
    which is offered to ``best``."""
    decodes = max(20, min(1000, 400_000 // max(1, len(units.members))))  # ~0.1 s whatever the size
    quick = units.slice(k, "brkga", seed=0, population=min(50, decodes), generations=2**62, elite=0.2,
                        mutant=0.1, rho=0.7, max_decodes=decodes, samples=decodes, islands=1)
    if best is not None and quick["blocks"]:
        best.offer([units.expand(b) for b in quick["blocks"]])
    out = None
    if math.isfinite(quick["objective"]):
        upper = quick["objective"] * (1 + 1e-9) + 1e-12
        out = units.exact(k, max_ideals, upper_bound=upper)
        if out["objective"] > upper:  # above it, the bound was below the optimum after all
            out = None
    if out is None:
        out = units.exact(k, max_ideals)
    return float(out["objective"]), [list(b) for b in out["blocks"]], int(out["ideals"])


def refusal_reason(problem: MtppProblem, units: Units, max_ideals: int, relaxation: Relaxation | None) -> str:
    """Why the ideals explode and what to do, for a :class:`~stagecut.errors.TooManyIdealsError`.

    >>> from stagecut.graph import Graph, Node
    >>> g = Graph([Node(i, {"accelerator": 1.0}) for i in range(3)], [])
    >>> p = MtppProblem(g, devices=2)
    >>> for reason in refusal_reason(p, Units(p, fold_leaves=False), 10, None).split("; "):
    ...     print(reason)
    raise max_ideals (now 10)
    the graph has 3 unconnected parts, whose ideals multiply
    method='brkga' gives a partition and its lower bound
    """
    if relaxation is not None:
        why = (f"the optimum is at least {relaxation.bound:.6g}, the bound of round {relaxation.rounds}, which "
               f"dropped the parameters of {relaxation.relaxed_leaves} work-free leaves")
    else:
        why = f"raise max_ideals (now {max_ideals})"
    parts = components(units)
    if parts > 1:
        why += f"; the graph has {parts} unconnected parts, whose ideals multiply"
        if not problem.colocate and any(nd.colocation is not None for nd in problem.graph.nodes):
            why += " (colocate=True keeps each colocation class in one block)"
    return why + "; method='brkga' gives a partition and its lower bound"


def _solve(problem: MtppProblem, units: Units, max_ideals: int, relaxation: Relaxation | None,
           best: _Incumbent | None = None) -> tuple[float, list[list[int]], int]:
    try:
        return _ideal_dp(units, problem.devices, max_ideals, best)
    except TooManyIdealsError as e:
        why = refusal_reason(problem, units, max_ideals, relaxation)
        raise TooManyIdealsError(f"{e}: {why}") from None


def solve_exact(problem: MtppProblem, units: Units, *, fold: bool, max_ideals: int) -> ExactOutcome:
    """The exact optimum over all acyclic partitions into at most ``problem.devices`` blocks.

    Parameters
    ----------
    problem : MtppProblem
    units : Units
        The units to solve on (with exact folding when ``fold``).
    fold : bool
        Try the leaf relaxation first (needs folding).
    max_ideals : int
        Refuse past this many ideals.

    Returns
    -------
    ExactOutcome

    Raises
    ------
    TooManyIdealsError
        Past ``max_ideals``; the message says why (the relaxation's bound when there is one,
        unconnected parts whose ideals multiply, ``colocate=False`` splitting classes) and what
        to use instead.
    """
    best = _Incumbent(problem)
    state: list[Relaxation | None] = [None]
    try:
        return _solve_exact(problem, units, fold, max_ideals, best, state)
    except DeadlineReached:
        blocks = [sorted(b, key=units.rank.__getitem__) for b in best.blocks]
        return ExactOutcome(objective=best.cost, blocks=blocks, ideals=0, relaxation=state[0], timed_out=True,
                            exact_by="time limit: the best partition of the quick BRKGA searches, not proven optimal")


def _solve_exact(problem: MtppProblem, units: Units, fold: bool, max_ideals: int, best: _Incumbent,
                 state: list[Relaxation | None]) -> ExactOutcome:
    """:func:`solve_exact`, offering every incumbent to ``best`` and keeping the last relaxation
    in ``state[0]`` (for a time limit)."""
    keep: set[int] = set()
    relaxation: Relaxation | None = None
    while fold:
        relaxed = Units(problem, True, relax_leaf_params=True, keep=keep, groups=units.groups)
        if not relaxed.relaxed:
            break
        bound, ublocks, ideals = _solve(problem, relaxed, max_ideals, relaxation, best)
        relaxation = Relaxation(bound=bound, ideals=ideals, relaxed_leaves=len(relaxed.relaxed),
                                rounds=1 if relaxation is None else relaxation.rounds + 1)
        state[0] = relaxation
        if not math.isfinite(bound):
            return ExactOutcome(objective=math.inf, blocks=[], ideals=relaxation.ideals, relaxation=relaxation,
                                exact_by="relaxation (infeasible even without the leaves' parameters)")
        fixed, stuck = repair(problem, relaxed, [relaxed.expand(b) for b in ublocks], bound)
        if fixed is not None:
            fixed = [sorted(b, key=units.rank.__getitem__) for b in fixed]
            return ExactOutcome(objective=bound, blocks=fixed, ideals=relaxation.ideals, relaxation=relaxation,
                                exact_by="relaxation + repair")
        assert stuck is not None
        keep.add(stuck)
    objective, ublocks, ideals = _solve(problem, units, max_ideals, relaxation, best)
    blocks = [sorted(units.expand(b), key=units.rank.__getitem__) for b in ublocks]
    return ExactOutcome(objective=objective, blocks=blocks, ideals=ideals, exact_by="ideal DP", relaxation=relaxation)


class _Blocks:
    """Blocks of node positions under construction, with their quotient graph."""

    def __init__(self, problem: MtppProblem, blocks: list[list[int]]) -> None:
        self.problem = problem
        self.blocks = blocks
        self.ids = [nd.id for nd in problem.graph.nodes]

    def cost(self, nodes: Sequence[int]) -> float:
        return block_cost(self.problem, [self.ids[i] for i in nodes])

    def quotient(self) -> tuple[list[int], list[set[int]]]:
        """``block_of`` per node position (-1: not placed) and the successor blocks of each block."""
        g = self.problem.graph
        block_of = [-1] * len(g.nodes)
        for b, nodes in enumerate(self.blocks):
            for i in nodes:
                block_of[i] = b
        succ: list[set[int]] = [set() for _ in self.blocks]
        for u in range(len(g.nodes)):
            for v in g.succ[u]:
                a, c = block_of[u], block_of[v]
                if a >= 0 and c >= 0 and a != c:
                    succ[a].add(c)
        return block_of, succ

    def allowed(self, leaf: RelaxedLeaf) -> tuple[int, list[int]]:
        """The neighbour's block and the blocks ``leaf`` may join (keeping the quotient acyclic),
        with ``len(blocks)`` for a new block while fewer than ``k`` are used."""
        block_of, succ = self.quotient()
        b0 = block_of[leaf.neighbour]
        if leaf.side == "sink":  # edge b0 -> c: c must not reach b0
            ok = [c for c in range(len(self.blocks)) if c == b0 or b0 not in _reach(succ, c)]
        else:  # edge c -> b0: b0 must not reach c
            from_b0 = _reach(succ, b0)
            ok = [c for c in range(len(self.blocks)) if c == b0 or c not in from_b0]
        if len(self.blocks) < self.problem.devices:
            ok.append(len(self.blocks))
        return b0, ok

    def place(self, leaf: RelaxedLeaf, limit: float) -> bool:
        """Put ``leaf`` where the larger of the two changed block costs is least, if at most ``limit``."""
        b0, ok = self.allowed(leaf)
        best: tuple[float, int] | None = None
        for c in ok:
            trial = (self.blocks[c] if c < len(self.blocks) else []) + leaf.nodes
            worst = max(self.cost(trial), self.cost(self.blocks[b0]) if c != b0 else 0.0)
            if worst <= limit and (best is None or worst < best[0]):
                best = (worst, c)
        if best is None:
            return False
        if best[1] == len(self.blocks):
            self.blocks.append(list(leaf.nodes))
        else:
            self.blocks[best[1]] = self.blocks[best[1]] + leaf.nodes
        return True


def _reach(succ: list[set[int]], src: int) -> set[int]:
    seen, todo = {src}, [src]
    while todo:
        for c in succ[todo.pop()]:
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return seen


def repair(problem: MtppProblem, relaxed: Units, blocks: list[list[int]],
           bound: float) -> tuple[list[list[int]] | None, int | None]:
    """Put the relaxation's parameter-holding leaves back into the blocks (node positions) so
    that no block costs more than ``bound``.

    A leaf may go into any block that keeps the quotient acyclic (its neighbour's block; for a
    sink leaf a block that cannot reach the neighbour's, for a source leaf one the neighbour's
    cannot reach), or alone into a new block while there are fewer than ``k``. Placing it
    changes only its own block's cost and its neighbour's (leaves not yet placed count as
    outside every block, which can only overstate costs). Greedy, largest parameters first,
    each where the larger of the two changed costs is least.

    Returns
    -------
    (blocks, None) or (None, group)
        The repaired blocks in a topological order, or the first leaf group that found no room.
    """
    g = problem.graph
    leaf_nodes = {i for leaf in relaxed.relaxed for i in leaf.nodes}
    work = _Blocks(problem, [[i for i in b if i not in leaf_nodes] for b in blocks])
    limit = bound * (1 + 1e-9) + 1e-12
    for leaf in sorted(relaxed.relaxed, key=lambda t: -sum(g.nodes[i].memory for i in t.nodes)):
        if not work.place(leaf, limit):
            return None, leaf.group
    _, succ = work.quotient()
    return [work.blocks[b] for b in kahn_order(range(len(work.blocks)), succ)], None
