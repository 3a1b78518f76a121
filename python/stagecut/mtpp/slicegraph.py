"""SliceGraph: pipeline partitioning of graphs of any size under the MTPP cost model.

Archer, Fahrbach, Liu, Prabhu, "Practical Performance Guarantees for Pipelined DNN Inference"
(Sections 4 and Appendix B). Every topological order of the graph, cut into at most ``k``
contiguous segments, gives a valid partition (its quotient is acyclic); SliceGraph finds the
best cuts of one order exactly by a DP (Algorithm 1) over segment costs (Lemma 4.1: a 2D
Fenwick tree, or an incremental scan that only touches the segments the DP needs). The search
is over orders: a vector of node priorities gives an order by Kahn's algorithm (Algorithm 3),
and random sampling, BRKGA or minimum-linear-arrangement orders explore the priorities
(Algorithm 2). ``method="dp"`` is the exact optimum over all acyclic partitions (the ideal DP
with the MTPP block cost) when the graph has few enough ideals.

Examples
--------
>>> from stagecut.graph import Graph
>>> g = Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5)
>>> plan = slice_graph(g, stages=2, method="dp")
>>> plan.objective, plan.blocks, plan.status
(5.5, ((0, 1), (2, 3)), 'optimal')
>>> slice_graph(g, stages=2, method="brkga", seed=0, population=10, generations=5).objective
5.5
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Hashable, Mapping, Sequence

import numpy as np

from stagecut.errors import InvalidGraphError, StagecutError, TooManyIdealsError
from stagecut.graph import ACCELERATOR, Graph, kahn_order
from stagecut.mtpp.model import MtppProblem, block_cost, evaluate, forced_groups, lower_bound

__all__ = ["SlicePlan", "slice_graph", "METHODS", "mtpp_arrays", "segment_io"]

METHODS = ("brkga", "random", "mla", "mla-weighted", "dp", "order")


@dataclass(frozen=True)
class SlicePlan:
    """A pipeline partition and how it was found.

    ``objective`` is what the independent evaluator (:func:`stagecut.mtpp.evaluate`) says of
    ``blocks``; ``lower_bound`` the simple bound of :func:`stagecut.mtpp.lower_bound` (or the
    optimum itself for ``method="dp"``).
    """

    objective: float
    blocks: tuple
    order: tuple
    lower_bound: float
    status: str
    method: str
    seed: "int | None"
    decodes: int
    history: tuple
    runtime_s: float
    stages: int
    block_costs: tuple = ()
    details: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def gap(self) -> float:
        """Relative gap to the lower bound (0 when proven optimal)."""
        if not math.isfinite(self.objective):
            return math.inf
        if self.objective == 0:
            return 0.0
        return (self.objective - self.lower_bound) / self.objective

    def assignment(self) -> dict:
        """``{node id: stage index}``."""
        return {v: b for b, nodes in enumerate(self.blocks) for v in nodes}

    def to_json(self) -> dict:
        """A JSON-serialisable dict (``inf`` becomes ``null``)."""

        def num(x):
            return x if math.isfinite(x) else None

        return {
            "objective": num(self.objective),
            "lower_bound": num(self.lower_bound),
            "gap": num(self.gap),
            "status": self.status,
            "method": self.method,
            "seed": self.seed,
            "stages": self.stages,
            "blocks": [list(b) for b in self.blocks],
            "block_costs": [num(c) for c in self.block_costs],
            "order": list(self.order),
            "decodes": self.decodes,
            "history": [num(h) for h in self.history],
            "runtime_s": self.runtime_s,
            "details": dict(self.details),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), default=str)


class _Units:
    """Nodes grouped into units (forced groups, exact free-leaf folding) and the flat arrays
    of the core."""

    def __init__(self, problem: MtppProblem, fold_leaves: bool, relax_leaf_params: bool = False,
                 keep: "frozenset | set" = frozenset(), groups: "list | None" = None) -> None:
        g = problem.graph
        n = len(g.nodes)
        #: :func:`~stagecut.mtpp.forced_groups` (given, or computed here)
        self.groups = list(groups) if groups is not None else forced_groups(problem)
        parent = list(self.groups)  # group ids are their own representatives
        self.relaxed: list = []

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        if fold_leaves:
            # A group with no work and no parameters whose external edges all come from one
            # other group (a sink) or all go to one other group (a source) can join that
            # group's block in some optimal partition: moving it there never raises a block
            # cost (its tensors stop crossing, or cross where they already did) and never
            # closes a cycle. Parameters may move along too when memory cannot bind (all
            # parameters plus the reserved memory fit in fast memory: no block ever overflows
            # or breaks the limit). Decided on the groups before any fold, so one pass is exact.
            # With relax_leaf_params, work-free leaves that hold parameters fold as well and
            # their parameters are dropped (except the groups in ``keep``): a relaxation (costs
            # only fall), recorded in ``relaxed`` as (group, leaf nodes, neighbour node,
            # "sink" | "source") for the repair.
            memory_free = math.fsum(nd.memory for nd in g.nodes) + problem.reserved_memory <= problem.fast_memory
            grp = list(parent)
            heavy = {grp[i] for i in range(n) if problem.work(i) != 0}
            holding = {grp[i] for i in range(n) if g.nodes[i].memory != 0 and not memory_free}
            heavy |= holding if not relax_leaf_params else holding & set(keep)
            ins: dict = {}
            outs: dict = {}
            for u in range(n):
                for v in g.succ[u]:
                    a, b = grp[u], grp[v]
                    if a != b:
                        outs.setdefault(a, set()).add(b)
                        ins.setdefault(b, set()).add(a)
            leaves: dict = {}
            for r in sorted(set(grp)):
                if r in heavy:
                    continue
                i_r, o_r = ins.get(r, ()), outs.get(r, ())
                if not o_r and len(i_r) == 1:
                    leaves[r] = (next(iter(i_r)), "sink")
                elif not i_r and len(o_r) == 1:
                    leaves[r] = (next(iter(o_r)), "source")
            members: dict = {}
            for i in range(n):
                members.setdefault(grp[i], []).append(i)
            for r, (nb, side) in leaves.items():
                if r in holding and nb in leaves:
                    continue  # two leaves of each other: relax neither (the repair needs nb placed)
                parent[find(r)] = find(nb)
                if r in holding:
                    self.relaxed.append((r, members[r], nb, side))
        dropped = {i for _, nodes, _, _ in self.relaxed for i in nodes}
        roots = sorted({find(i) for i in range(n)})
        uid = {r: u for u, r in enumerate(roots)}
        self.unit_of = [uid[find(i)] for i in range(n)]
        topo = g.topological_order()
        rank = {v: r for r, v in enumerate(topo)}
        members: list = [[] for _ in roots]
        for i in topo:
            members[self.unit_of[i]].append(i)
        self.members = members
        self.rank = rank
        nu = len(roots)
        work = np.zeros(nu)
        params = np.zeros(nu)
        for i, node in enumerate(g.nodes):
            work[self.unit_of[i]] += problem.work(i)
            if i not in dropped:
                params[self.unit_of[i]] += node.memory
        t_cost, t_prod, off, cons = [], [], [0], []
        for i, node in enumerate(g.nodes):
            if not g.succ[i]:
                continue
            t_cost.append(node.comm)
            t_prod.append(self.unit_of[i])
            cons.extend(self.unit_of[j] for j in g.succ[i])
            off.append(len(cons))
        self.arrays = (
            work,
            params,
            np.asarray(t_cost, dtype=np.float64),
            np.asarray(t_prod, dtype=np.int64),
            np.asarray(off, dtype=np.int64),
            np.asarray(cons, dtype=np.int64),
        )
        self.memory = (
            float(problem.fast_memory),
            float(problem.reserved_memory),
            None if problem.bandwidth is None else float(problem.bandwidth),
        )

    def expand(self, units: Sequence[int]) -> list:
        """Original node positions of the units, each unit's members in topological order."""
        return [i for u in units for i in self.members[u]]


def mtpp_arrays(problem: MtppProblem, fold_leaves: bool = False):
    """The flat arrays the core takes (``work, params, t_cost, t_prod, t_cons_off, t_cons``)."""
    return _Units(problem, fold_leaves).arrays


def segment_io(problem: MtppProblem, order: Sequence[Hashable], builder: str = "fenwick") -> np.ndarray:
    """The ``n x n`` table of tensor costs ``io(l, r)`` of the segments of ``order`` (node ids),
    by the 2D Fenwick construction of Lemma 4.1 (``builder="fenwick"``) or the naive one."""
    from stagecut import _core

    g = problem.graph
    plain = MtppProblem(g, problem.stages, problem.fast_memory, problem.bandwidth, problem.reserved_memory,
                        problem.kind, colocate=False)
    units = _Units(plain, fold_leaves=False)
    pos = []
    for v in order:
        if v not in g.index:
            raise InvalidGraphError(f"order: unknown node {v!r}")
        pos.append(g.index[v])
    flat = _core.mtpp_segment_io(*units.arrays, np.asarray(pos, dtype=np.int64), builder)
    n = len(g.nodes)
    return flat.reshape(n, n)


def _warn_cycle_groups(problem: MtppProblem, groups: list) -> None:
    g = problem.graph
    classes = {nd.colocation if nd.colocation is not None else ("node", i) for i, nd in enumerate(g.nodes)}
    if len(set(groups)) < len(classes):
        import warnings

        from stagecut.errors import StagecutWarning

        sizes: dict = {}
        for grp in groups:
            sizes[grp] = sizes.get(grp, 0) + 1
        big = max(sizes, key=sizes.__getitem__)
        warnings.warn(
            f"colocation classes on a directed cycle must share one block (acyclic quotient): "
            f"{len(classes)} classes make {len(set(groups))} groups, the largest holds {sizes[big]} nodes "
            f"(with node {g.nodes[big].id!r}); a backward pass wired in reverse does this. "
            "colocate=False treats the graph as a plain DAG",
            StagecutWarning,
            stacklevel=3,
        )


def _repair(problem: MtppProblem, relaxed: _Units, blocks: list, bound: float, k: int) -> tuple:
    """Put the relaxation's parameter-holding leaves back into the blocks (node positions)
    so that no block costs more than ``bound``: ``(blocks in a topological order, None)``, or
    ``(None, group)`` naming the first leaf that found no room.

    A leaf may go into any block that keeps the quotient acyclic (its neighbour's block; for a
    sink leaf a block that cannot reach the neighbour's, for a source leaf one the neighbour's
    cannot reach), or alone into a new block while there are fewer than ``k``. Placing it
    changes only its own block's cost and its neighbour's (leaves not yet placed count as
    outside every block, which can only overstate costs). Greedy, largest parameters first,
    each where the larger of the two changed costs is least."""
    g = problem.graph
    n = len(g.nodes)
    ids = [nd.id for nd in g.nodes]
    leaf = {i for _, nodes, _, _ in relaxed.relaxed for i in nodes}
    blocks = [[i for i in b if i not in leaf] for b in blocks]

    def cost(nodes):
        return block_cost(problem, [ids[i] for i in nodes])

    def quotient():
        block_of = [-1] * n
        for b, nodes in enumerate(blocks):
            for i in nodes:
                block_of[i] = b
        succ: list = [set() for _ in blocks]
        for u in range(n):
            for v in g.succ[u]:
                a, c = block_of[u], block_of[v]
                if a >= 0 and c >= 0 and a != c:
                    succ[a].add(c)
        return block_of, succ

    def reach(succ, src):
        seen, todo = {src}, [src]
        while todo:
            for c in succ[todo.pop()]:
                if c not in seen:
                    seen.add(c)
                    todo.append(c)
        return seen

    limit = bound * (1 + 1e-9) + 1e-12
    todo = sorted(relaxed.relaxed, key=lambda t: -sum(g.nodes[i].memory for i in t[1]))
    for r, nodes, nb, side in todo:
        block_of, succ = quotient()
        b0 = block_of[nb]
        if side == "sink":  # edge b0 -> c: c must not reach b0
            ok = [c for c in range(len(blocks)) if c == b0 or b0 not in reach(succ, c)]
        else:  # edge c -> b0: b0 must not reach c
            from_b0 = reach(succ, b0)
            ok = [c for c in range(len(blocks)) if c == b0 or c not in from_b0]
        if len(blocks) < k:
            ok.append(len(blocks))  # a new block of its own
        best = None
        for c in ok:
            trial = (blocks[c] if c < len(blocks) else []) + nodes
            worst = max(cost(trial), cost(blocks[b0]) if c != b0 else 0.0)
            if worst <= limit and (best is None or worst < best[0]):
                best = (worst, c)
        if best is None:
            return None, r
        if best[1] == len(blocks):
            blocks.append(list(nodes))
        else:
            blocks[best[1]] = blocks[best[1]] + nodes
    # a topological order of the blocks (stable)
    _, succ = quotient()
    out = [blocks[b] for b in kahn_order(range(len(blocks)), succ)]
    return out, None


def _components(u: _Units) -> int:
    """Weakly connected parts of the unit graph."""
    _, _, _, t_prod, off, cons = u.arrays
    parent = list(range(len(u.members)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for t, p in enumerate(t_prod):
        for c in cons[off[t]:off[t + 1]]:
            parent[find(int(c))] = find(int(p))
    return len({find(x) for x in range(len(parent))})


def _exact_dp(u: _Units, k: int, max_ideals: int) -> dict:
    """The ideal DP on ``u``, pruned by the cost of a quick BRKGA partition (a block that
    costs more than some known partition is in no better one)."""
    from stagecut import _core

    decodes = max(20, min(1000, 400_000 // max(1, len(u.members))))  # ~0.1 s whatever the size
    quick = _core.mtpp_slice(*u.arrays, *u.memory, k, "brkga", seed=0, population=min(50, decodes),
                             generations=2**62, elite=0.2, mutant=0.1, rho=0.7, max_decodes=decodes,
                             samples=decodes, islands=1)
    if math.isfinite(quick["objective"]):
        upper = quick["objective"] * (1 + 1e-9) + 1e-12
        out = _core.mtpp_exact(*u.arrays, *u.memory, k, max_ideals, upper_bound=upper)
        if out["objective"] <= upper:  # above it, the bound was below the optimum after all
            return out
    return _core.mtpp_exact(*u.arrays, *u.memory, k, max_ideals)


def _exact(problem: MtppProblem, units: _Units, fold: bool, k: int, max_ideals: int, details: dict) -> dict:
    """The exact optimum, as blocks of node positions.

    Work-free leaves that hold parameters cannot be folded exactly when memory binds, and each
    one can double the number of ideals. So solve the relaxation that drops their parameters
    (they fold: a lower bound) and put them back: a repaired partition that costs no more than
    the bound is optimal. When the repair fails, the leaf that found no room is modelled
    exactly from then on (a tighter relaxation), until the repair succeeds or no leaf is left
    relaxed (the plain ideal DP on ``units``)."""
    keep: set = set()
    bound = None
    rounds = 0

    def solve(u: _Units) -> dict:
        try:
            return _exact_dp(u, k, max_ideals)
        except TooManyIdealsError as e:
            if bound is not None:
                why = (f"the optimum is at least {bound:.6g}, the bound of round {rounds}, which dropped the "
                       f"parameters of {details['relaxation']['relaxed_leaves']} work-free leaves")
            else:
                why = f"raise max_ideals (now {max_ideals})"
            parts = _components(u)
            if parts > 1:
                why += f"; the graph has {parts} unconnected parts, whose ideals multiply"
                if not problem.colocate and any(nd.colocation is not None for nd in problem.graph.nodes):
                    why += " (colocate=True keeps each colocation class in one block)"
            raise TooManyIdealsError(f"{e}: {why}; method='brkga' gives a partition and its lower bound") from None

    while fold:
        relaxed = _Units(problem, True, relax_leaf_params=True, keep=keep, groups=units.groups)
        if not relaxed.relaxed:
            break
        out = solve(relaxed)
        rounds += 1
        bound = out["objective"]
        details["relaxation"] = {"bound": bound, "ideals": out["ideals"], "relaxed_leaves": len(relaxed.relaxed),
                                 "rounds": rounds}
        details["ideals"] = out["ideals"]
        if not math.isfinite(bound):
            details["exact_by"] = "relaxation (infeasible even without the leaves' parameters)"
            return {"objective": math.inf, "blocks": []}
        fixed, stuck = _repair(problem, relaxed, [relaxed.expand(b) for b in out["blocks"]], bound, k)
        if fixed is not None:
            details["exact_by"] = "relaxation + repair"
            return {"objective": bound, "blocks": fixed}
        keep.add(stuck)
    out = solve(units)
    details["ideals"] = out["ideals"]
    details["exact_by"] = "ideal DP"
    return {"objective": out["objective"], "blocks": [units.expand(b) for b in out["blocks"]]}


def _int(x, what: str, lo: int = 0) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise InvalidGraphError(f"{what}: {x!r} is not an integer")
    if x < lo:
        raise InvalidGraphError(f"{what}: {x} must be at least {lo}")
    return int(x)


def _frac(x, what: str) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise InvalidGraphError(f"{what}: {x!r} is not a number") from None
    if not (0.0 <= v <= 1.0):
        raise InvalidGraphError(f"{what}: {x!r} must lie in [0, 1]")
    return v


def slice_graph(
    graph: "Graph | MtppProblem",
    stages: "int | None" = None,
    method: str = "brkga",
    *,
    seed: int = 0,
    population: int = 100,
    generations: int = 100,
    decodes: "int | None" = None,
    elite: float = 0.2,
    mutant: float = 0.1,
    rho: float = 0.7,
    islands: int = 1,
    order: "Sequence[Hashable] | None" = None,
    priorities: "Mapping[Hashable, float] | Sequence[float] | None" = None,
    fast_memory: "float | None" = None,
    bandwidth: "float | None" = None,
    reserved_memory: float = 0.0,
    segment_costs: str = "auto",
    max_ideals: int = 1_000_000,
    fold_leaves: bool = True,
    kind: str = ACCELERATOR,
    colocate: bool = True,
) -> SlicePlan:
    """Split ``graph`` into at most ``stages`` pipeline stages minimising the largest MTPP
    block cost (see :mod:`stagecut.mtpp` for the cost model and units).

    Parameters
    ----------
    graph : Graph or MtppProblem
        With a problem, ``stages``, the memory arguments and ``colocate`` come from it.
    stages : int
        At most this many blocks (default: ``graph.defaults["accelerators"]``).
    method : {"brkga", "random", "mla", "mla-weighted", "dp", "order"}
        ``"brkga"``: BRKGA over node priorities, each decoded by Kahn + SliceGraph.
        ``"random"``: the best of ``decodes`` random priority vectors.
        ``"mla"`` / ``"mla-weighted"``: BRKGA on the (tensor-cost weighted) linear-arrangement
        cost of the order, then SliceGraph on the best order.
        ``"dp"``: the exact optimum (ideal DP; ``TooManyIdealsError`` past ``max_ideals``).
        ``"order"``: SliceGraph on one order (``order``, or the order ``priorities`` give,
        or a default topological order).
    seed, population, generations, elite, mutant, rho
        BRKGA parameters (Goncalves and Resende): elite and mutant fractions of the
        population, probability ``rho`` of inheriting a key from the elite parent.
    islands : int
        BRKGA / MLA: independent populations sharing the decode budget (best one wins);
        restarts make the search less likely to settle in one basin.
    decodes : int, optional
        Budget of decoded chromosomes (BRKGA and MLA stop there; random samples this many;
        default ``population * generations``).
    fast_memory, bandwidth, reserved_memory
        Memory model (bytes; bytes per time unit). ``bandwidth=None``: hard limit.
    segment_costs : {"auto", "scan", "fenwick"}
        For ``method="order"``: the segment costs by incremental scan, or materialized by the
        2D Fenwick tree (``O(n^2)`` memory; "auto" uses it up to 4096 nodes).
    fold_leaves : bool
        Fold work-free, parameter-free leaves into their only neighbour first (exact).
    colocate : bool
        Keep each colocation class (a training graph's forward node and its backward node) in
        one block (default); ``False`` treats the graph as a plain DAG.

    Returns
    -------
    SlicePlan
    """
    from stagecut import _core

    t0 = time.perf_counter()
    if isinstance(graph, MtppProblem):
        problem = graph
    else:
        problem = MtppProblem(graph, stages, fast_memory, bandwidth, reserved_memory, kind, colocate)
    g = problem.graph
    if method not in METHODS:
        raise InvalidGraphError(f"method: {method!r} is not one of {', '.join(METHODS)}")
    seed = _int(seed, "seed")
    if seed >= 2**64:
        raise InvalidGraphError("seed: must be below 2**64")
    population = _int(population, "population", 2)
    generations = _int(generations, "generations")
    if decodes is not None:
        decodes = _int(decodes, "decodes", 1)
    elite, mutant, rho = _frac(elite, "elite"), _frac(mutant, "mutant"), _frac(rho, "rho")
    if not (0 < elite < 1) or elite + mutant > 1:
        raise InvalidGraphError("elite must lie in (0, 1) and elite + mutant must be at most 1")
    max_ideals = _int(max_ideals, "max_ideals", 1)
    islands = _int(islands, "islands", 1)
    if segment_costs not in ("auto", "scan", "fenwick"):
        raise InvalidGraphError(f"segment_costs: {segment_costs!r} is not 'auto', 'scan' or 'fenwick'")
    units = _Units(problem, fold_leaves and order is None and priorities is None)
    if problem.colocate:
        _warn_cycle_groups(problem, units.groups)
    k = problem.stages
    details: dict = {"units": len(units.members)}
    if method == "dp":
        out = _exact(problem, units, fold_leaves, k, max_ideals, details)
        ublocks = out["blocks"]  # node positions here
        uorder = []
        n_dec, hist = 0, [out["objective"]]
    else:
        kw: dict = {}
        if method == "order":
            if order is not None and priorities is not None:
                raise InvalidGraphError("give order or priorities, not both")
            if order is not None:
                pos = []
                for v in order:
                    if v not in g.index:
                        raise InvalidGraphError(f"order: unknown node {v!r}")
                    pos.append(g.index[v])
                seen: set = set()
                for i in pos:
                    if i in seen:
                        raise InvalidGraphError(f"order: node {g.nodes[i].id!r} repeated")
                    seen.add(i)
                if len(pos) != len(g.nodes):
                    gone = next(nd.id for j, nd in enumerate(g.nodes) if j not in seen)
                    raise InvalidGraphError(f"order: node {gone!r} missing ({len(pos)} of {len(g.nodes)} nodes given)")
                at = {i: r for r, i in enumerate(pos)}
                for u, v in g.edges:
                    if at[g.index[u]] > at[g.index[v]]:
                        raise InvalidGraphError(f"order: node {v!r} comes before its predecessor {u!r}")
                if len(units.members) == len(g.nodes):
                    kw["order"] = np.asarray([units.unit_of[i] for i in pos], dtype=np.int64)
                else:
                    # forced groups: Kahn on the groups, each ranked by its earliest node in
                    # the order (a group's nodes need not be adjacent in it)
                    uprio = np.full(len(units.members), np.inf)
                    np.minimum.at(uprio, np.asarray([units.unit_of[i] for i in pos], dtype=np.int64),
                                  np.arange(len(pos), dtype=np.float64))
                    kw["priorities"] = uprio
            elif priorities is not None:
                if isinstance(priorities, Mapping):
                    missing = [v.id for v in g.nodes if v.id not in priorities]
                    if missing:
                        raise InvalidGraphError(f"priorities: no value for node {missing[0]!r}")
                    vals = [priorities[v.id] for v in g.nodes]
                else:
                    vals = list(priorities)
                    if len(vals) != len(g.nodes):
                        raise InvalidGraphError(f"priorities: expected {len(g.nodes)} values, got {len(vals)}")
                try:
                    arr = np.asarray(vals, dtype=np.float64)
                except (TypeError, ValueError):
                    raise InvalidGraphError("priorities: values must be numbers") from None
                if np.isnan(arr).any():
                    raise InvalidGraphError("priorities: NaN value")
                uprio = np.full(len(units.members), np.inf)
                np.minimum.at(uprio, np.asarray(units.unit_of, dtype=np.int64), arr)
                kw["priorities"] = uprio
            seg = segment_costs
            if seg == "auto":
                seg = "fenwick" if len(units.members) <= 4096 else "scan"
            kw["segment_costs"] = seg
        elif order is not None or priorities is not None:
            raise InvalidGraphError("order/priorities are only used with method='order'")
        budget = decodes if decodes is not None else population * max(generations, 1)
        out = _core.mtpp_slice(
            *units.arrays,
            *units.memory,
            k,
            method,
            seed=seed,
            population=population,
            generations=generations if decodes is None else 2**62,
            elite=elite,
            mutant=mutant,
            rho=rho,
            max_decodes=budget if method != "order" else None,
            samples=budget,
            islands=islands,
            **kw,
        )
        ublocks = out["blocks"]
        uorder = out["order"]
        n_dec, hist = out["decodes"], out["history"]
        details["rounds"] = out["rounds"]
    core_obj = out["objective"]
    details["core_objective"] = core_obj
    if ublocks:
        if method == "dp":  # put each block in a topological order
            blocks = tuple(tuple(g.nodes[i].id for i in sorted(b, key=units.rank.__getitem__)) for b in ublocks)
        else:  # contiguous segments of the order
            blocks = tuple(tuple(g.nodes[i].id for i in units.expand(b)) for b in ublocks)
        ev = evaluate(problem, blocks)
        objective, costs = ev.objective, ev.block_costs
        if not math.isclose(objective, core_obj, rel_tol=1e-6, abs_tol=1e-9):  # pragma: no cover
            raise StagecutError(
                f"the core computed {core_obj!r} but the evaluator scores its partition {objective!r}: "
                "floating-point cancellation when costs span many orders of magnitude (e.g. bytes and "
                "ms mixed); rescale the inputs (e.g. parameters in MB), or report this with the input"
            )
    else:
        blocks, objective, costs = (), math.inf, ()
    if blocks:
        node_order = tuple(v for b in blocks for v in b)
    else:
        node_order = tuple(g.nodes[i].id for i in units.expand(uorder)) if uorder else ()
    lb = lower_bound(problem)
    if not math.isfinite(objective):
        status = "infeasible"
    elif method == "dp":
        status = "optimal"
        lb = objective
    elif objective <= lb * (1 + 1e-12):
        status = "optimal"
    else:
        status = "feasible"
    return SlicePlan(
        objective=objective,
        blocks=blocks,
        order=node_order,
        lower_bound=lb,
        status=status,
        method=method,
        seed=seed if method in ("brkga", "random", "mla", "mla-weighted") else None,
        decodes=int(n_dec),
        history=tuple(hist),
        runtime_s=time.perf_counter() - t0,
        stages=k,
        block_costs=tuple(costs),
        details=details,
    )
