"""Training objectives: PipeDream's 1F1B and GPipe's, and an exact DP for GPipe's.

A device's load in the max-load model (:mod:`stagecut.throughput.evaluate`) splits into a
*forward* part ``FW`` and a *backward* part ``BW``:

* compute: a forward node's time counts in ``FW``, a backward node's in ``BW``;
* communication (accelerators only, tensor-once as in the evaluator): each term belongs to the
  phase of its *producing* node (the tensor moves when its producer has run): a producer that
  sends its output off the device pays ``comm`` once in its own phase, and each other device
  that receives it pays ``comm`` once in the producer's phase.

So ``FW_i + BW_i`` is exactly the evaluator's load of device ``i`` (the same terms, each in one
part), and the two training objectives of a split are:

*PipeDream (1F1B)*: ``max_i (FW_i + BW_i)``
    the evaluator's objective, which the DP, DPL and the IPs optimise; the steady-state time
    per microbatch of the 1F1B schedule (:func:`stagecut.throughput.schedules.one_f_one_b`).
*GPipe*: ``max_i FW_i + max_i BW_i``
    all forwards of a batch, then all backwards; the time per microbatch of a long batch
    (:func:`stagecut.throughput.schedules.gpipe`). Never below the 1F1B objective.

:func:`partition_gpipe` minimises the GPipe objective exactly over the contiguous splits (the
blocks, in pipeline order, form a chain of ideals of the forward unit DAG: the set the exact DP
optimises over). It walks the staircase of Pareto-optimal pairs (max BW, max FW): with ``c``
the least max BW of the splits whose blocks all have FW < the previous step's max FW, the least
max FW under the cap BW <= ``c`` is the next step; the answer is the best sum, and the walk
stops once ``c`` plus the least max FW of any split reaches the best sum found. Each step is a
min-max DP over pairs of ideals, in Python: small graphs only (``max_ideals``).

Examples
--------
>>> import stagecut as sc
>>> from stagecut.graph import Node
>>> fwd = [Node(i, {"accelerator": t}, colocation=i) for i, t in enumerate([1.0, 4.0, 1.0])]
>>> bwd = [Node(10 + i, {"accelerator": t}, colocation=i, backward=True)
...        for i, t in enumerate([4.0, 1.0, 4.0])]
>>> g = sc.Graph(fwd + bwd, [(0, 1), (1, 2), (2, 12), (12, 11), (11, 10)])
>>> split = {0: ("accelerator", 0), 10: ("accelerator", 0), 1: ("accelerator", 1),
...          11: ("accelerator", 1), 2: ("accelerator", 2), 12: ("accelerator", 2)}
>>> t = training_loads(g, split)
>>> t.pipedream, t.gpipe, [(s.forward, s.backward) for s in t.stages]
(5.0, 8.0, [(1.0, 4.0), (4.0, 1.0), (1.0, 4.0)])
>>> plan = partition_gpipe(g, devices=3)
>>> plan.objective, plan.status, [s.nodes for s in plan.stages]
(8.0, 'optimal', [(0, 10), (1, 11), (2, 12)])
>>> partition_gpipe(g, devices=2).objective  # {0} | {1, 2}: FW (1, 5), BW (4, 5)
10.0
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from stagecut.colocation import Units
from stagecut.errors import InvalidArgumentError, TooManyIdealsError, internal_error
from stagecut.graph import ACCELERATOR, CPU, Graph, NodeId
from stagecut.results import DeviceLoad, Plan, Stat
from stagecut.throughput.evaluate import evaluate
from stagecut.throughput.problem import ThroughputProblem, resolve_problem, set_aside_free_nodes
from stagecut.throughput.rescore import no_plan, plan_from_split
from stagecut.validate import check_int

__all__ = ["DEFAULT_GPIPE_MAX_IDEALS", "PhaseLoad", "TrainingLoads", "training_loads", "gpipe_objective",
           "partition_gpipe"]

#: Default cap on the ideals :func:`partition_gpipe` enumerates (a Python DP over ideal pairs).
DEFAULT_GPIPE_MAX_IDEALS = 1000

Device = tuple[str, int]


@dataclass(frozen=True, kw_only=True)
class PhaseLoad(DeviceLoad):
    """A device's load split into its forward and backward parts (module docs).

    ``load = forward + backward`` (up to rounding: each part is a correctly rounded sum);
    ``parts`` holds ``compute`` and ``comm`` as in :class:`~stagecut.results.DeviceLoad`.
    """

    forward: float
    backward: float


@dataclass(frozen=True, kw_only=True)
class TrainingLoads:
    """Both training objectives of a split, and each device's forward and backward load.

    Attributes
    ----------
    pipedream : float
        ``max_i (FW_i + BW_i)``: the evaluator's objective (1F1B's time per microbatch).
    gpipe : float
        ``max_i FW_i + max_i BW_i`` (GPipe's time per microbatch).
    stages : tuple of PhaseLoad
        The devices used, in the evaluator's order (accelerators first), or in the order given
        to :func:`training_loads`.
    feasible : bool
        The evaluator's verdict (memory, device counts, colocation...).
    issues : tuple of str
        Why not feasible.
    """

    pipedream: float
    gpipe: float
    stages: tuple[PhaseLoad, ...]
    feasible: bool
    issues: tuple[str, ...] = ()


def _problem_limits(graph: Graph | ThroughputProblem) -> tuple[Graph, dict[str, float | None]]:
    if isinstance(graph, ThroughputProblem):
        return graph.graph, {"devices": graph.devices, "cpus": graph.cpus, "memory": graph.memory}
    return graph, {}


def _phase_terms(graph: Graph, dev: Sequence[Device], comm_kinds: frozenset[str]
                 ) -> dict[Device, tuple[list[float], list[float]]]:
    """Each device's (forward terms, backward terms): compute of its runnable nodes, and the
    tensor-once communication terms in the producer's phase (devices of ``comm_kinds`` only)."""
    terms: dict[Device, tuple[list[float], list[float]]] = {d: ([], []) for d in dev}
    for i, nd in enumerate(graph.nodes):
        d = dev[i]
        if nd.supports(d[0]):
            terms[d][nd.backward].append(nd.compute[d[0]])
    for p, nd in enumerate(graph.nodes):
        receivers = {dev[v] for v in graph.succ[p]} - {dev[p]}
        if not receivers:
            continue
        for d in (dev[p], *receivers):
            if d[0] in comm_kinds:
                terms[d][nd.backward].append(nd.comm)
    return terms


def training_loads(graph: Graph | ThroughputProblem, split: Mapping[Hashable, tuple[str, int]], *,
                   order: Sequence[tuple[str, int]] | None = None) -> TrainingLoads:
    """Score a split under both training objectives (see the module docs for FW_i and BW_i).

    Parameters
    ----------
    graph : Graph or ThroughputProblem
        A problem's device counts and memory are checked; a graph's defaults otherwise (as
        :func:`stagecut.evaluate`).
    split : mapping node id -> (device kind, device index)
    order : sequence of (kind, index), optional
        The devices in pipeline order (each device of the split once); default the
        evaluator's order.

    Returns
    -------
    TrainingLoads

    Raises
    ------
    InvalidGraphError
        A bad split (as :func:`stagecut.evaluate`).
    InvalidArgumentError
        ``order`` does not list the split's devices.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([2.0, 3.0], comm=0.5)
    >>> t = training_loads(g, {0: ("accelerator", 0), 1: ("accelerator", 1)})
    >>> t.pipedream, t.gpipe, [s.backward for s in t.stages]  # inference: no backward part
    (3.5, 3.5, [0.0, 0.0])
    """
    g, limits = _problem_limits(graph)
    ev = evaluate(g, split, **limits)  # type: ignore[arg-type]
    dev = [(split[n.id][0], int(split[n.id][1])) for n in g.nodes]
    terms = _phase_terms(g, dev, frozenset({ACCELERATOR}))
    stages = list(ev.stages)
    if order is not None:
        by_device = {(s.kind, s.kind_index): s for s in stages}
        wanted = [(d[0], int(d[1])) for d in order]
        if sorted(wanted) != sorted(by_device):
            raise InvalidArgumentError(f"order must list the split's devices {sorted(by_device)} once each, "
                                       f"got {wanted}")
        stages = [dataclasses.replace(by_device[d], index=i) for i, d in enumerate(wanted)]
    out = []
    for s in stages:
        fw, bw = terms[(s.kind, s.kind_index)]
        fields = {f.name: getattr(s, f.name) for f in dataclasses.fields(DeviceLoad)}
        out.append(PhaseLoad(**fields, forward=_fsum(fw), backward=_fsum(bw)))
    return TrainingLoads(pipedream=ev.objective, gpipe=max(s.forward for s in out) + max(s.backward for s in out),
                         stages=tuple(out), feasible=ev.feasible, issues=ev.issues)


def gpipe_objective(graph: Graph | ThroughputProblem, split: Mapping[Hashable, tuple[str, int]]) -> float:
    """GPipe's objective ``max_i FW_i + max_i BW_i`` of a split (module docs).

    Parameters
    ----------
    graph : Graph or ThroughputProblem
    split : mapping node id -> (device kind, device index)

    Returns
    -------
    float
        In the input's time unit; feasibility is not checked (see :func:`training_loads`).

    Raises
    ------
    InvalidGraphError
        A bad split (as :func:`stagecut.evaluate`).

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.transformer_like(layers=1, training=True)
    >>> split = {n.id: ("accelerator", 0) for n in g.nodes}
    >>> gpipe_objective(g, split) == sc.evaluate(g, split).objective  # one device: FW + BW
    True
    """
    return training_loads(graph, split).gpipe


def _fsum(values: Sequence[float]) -> float:
    try:
        return math.fsum(values)
    except OverflowError:
        return math.inf


# ------------------------------------------------------------------------------ the exact DP
class _Blocks:
    """The ideals of the forward unit DAG (bitmasks, by size) and, for every pair ``J < I`` and
    kind in use, the block ``I - J``'s (FW, BW) when it fits on that kind."""

    def __init__(self, problem: ThroughputProblem, units: Units, max_ideals: int) -> None:
        g = problem.graph
        n_units = units.n_units
        pred = [0] * n_units
        for a, b in units.edges:
            pred[b] |= 1 << a
        self.ideals = _ideals(n_units, pred, max_ideals)
        members = units.members
        unit_of = [int(u) for u in units.unit_of_node.tolist()]
        cons = [0] * len(g)
        for p in range(len(g)):
            for v in g.succ[p]:
                cons[p] |= 1 << unit_of[v]
        # the producers whose output can cross a boundary at a cost: (unit, consumer units, comm, phase)
        producers = [(unit_of[p], cons[p], nd.comm, nd.backward) for p, nd in enumerate(g.nodes)
                     if cons[p] & ~(1 << unit_of[p]) and nd.comm > 0]
        kinds = [k for k in (ACCELERATOR, CPU) if k in problem.kinds]
        # per kind and unit: can it run there, its forward and backward times; its memory
        per_unit = {kind: [_unit_terms(g, members[u], kind) for u in range(n_units)] for kind in kinds}
        memory = [[g.nodes[i].memory for i in members[u]] for u in range(n_units)]
        self.by_ideal: list[list[tuple[int, bool, float, float]]] = [[] for _ in self.ideals]
        self.pairs = 0
        for ii, big in enumerate(self.ideals):
            for jj in range(ii):
                small = self.ideals[jj]
                if small & ~big or small == big:
                    continue
                self.pairs += 1
                block = big & ~small
                inside = [u for u in range(n_units) if block >> u & 1]
                for kind in kinds:
                    cost = _block_cost(problem, kind, inside, per_unit[kind], memory, block, producers)
                    if cost is not None:
                        self.by_ideal[ii].append((jj, kind == ACCELERATOR, cost[0], cost[1]))


def _ideals(n_units: int, pred: list[int], max_ideals: int) -> list[int]:
    """Every downset of the unit DAG (``pred[u]``: the mask of ``u``'s predecessors), by size."""
    seen = {0}
    frontier = [0]
    while frontier:
        nxt = []
        for ideal in frontier:
            for u in range(n_units):
                if not ideal >> u & 1 and pred[u] & ~ideal == 0:
                    bigger = ideal | 1 << u
                    if bigger not in seen:
                        seen.add(bigger)
                        nxt.append(bigger)
                        if len(seen) > max_ideals:
                            raise TooManyIdealsError(
                                f"the graph has more than max_ideals={max_ideals} ideals: partition_gpipe is a "
                                "Python DP for small graphs; raise max_ideals or use partition(method='dp') "
                                "for the 1F1B objective")
        frontier = nxt
    return sorted(seen, key=lambda m: (bin(m).count("1"), m))


def _unit_terms(graph: Graph, members: list[int], kind: str) -> tuple[bool, list[float], list[float]]:
    """Can every node of a unit run on ``kind``; the forward and the backward nodes' times there."""
    nodes = [graph.nodes[i] for i in members]
    if not all(nd.supports(kind) for nd in nodes):
        return False, [], []
    return (True, [nd.compute[kind] for nd in nodes if not nd.backward],
            [nd.compute[kind] for nd in nodes if nd.backward])


def _block_cost(problem: ThroughputProblem, kind: str, inside: list[int],
                per_unit: list[tuple[bool, list[float], list[float]]], memory: list[list[float]], block: int,
                producers: list[tuple[int, int, float, bool]]) -> tuple[float, float] | None:
    """(FW, BW) of the units ``inside`` (mask ``block``) on ``kind``; ``None`` when a node cannot
    run there or, on an accelerator, their memory passes the limit. ``per_unit``: each unit's
    :func:`_unit_terms` on ``kind``; ``producers``: (unit, mask of its consumers' units, comm,
    backward) of every node that may pay comm."""
    terms: tuple[list[float], list[float]] = ([], [])
    for u in inside:
        ok, fw, bw = per_unit[u]
        if not ok:
            return None
        terms[0].extend(fw)
        terms[1].extend(bw)
    if kind == ACCELERATOR:
        if _fsum([x for u in inside for x in memory[u]]) > problem.memory:
            return None
        for unit, cons, comm, backward in producers:
            here = block >> unit & 1
            if (here and cons & ~block) or (not here and cons & block):
                terms[backward].append(comm)
    return _fsum(terms[0]), _fsum(terms[1])


def _minmax(blocks: _Blocks, k: int, l: int, by_backward: bool, cap: float, strict: bool
            ) -> tuple[float, list[tuple[bool, int, int]]]:
    """The least largest FW (``by_backward``: BW) of a chain of ideals on at most ``k``
    accelerators and ``l`` CPUs, using only blocks whose other part is ``<= cap`` (``strict``:
    ``< cap``); and its blocks ``(is_accelerator, ideal index, previous ideal index)`` in
    pipeline order (``inf`` and ``[]`` when there is none)."""
    n = len(blocks.ideals)
    width = (k + 1) * (l + 1)
    val = [[math.inf] * width for _ in range(n)]
    back: list[list[tuple[int, int, bool] | None]] = [[None] * width for _ in range(n)]
    val[0][0] = 0.0
    for ii in range(1, n):
        row, brow = val[ii], back[ii]
        for jj, acc, fw, bw in blocks.by_ideal[ii]:
            key, other = (bw, fw) if by_backward else (fw, bw)
            if other > cap or (strict and other >= cap):
                continue
            src = val[jj]
            for a in range(k + 1 if not acc else k):
                for c in range(l + 1 if acc else l):
                    v = src[a * (l + 1) + c]
                    if v == math.inf:
                        continue
                    s = (a + 1) * (l + 1) + c if acc else a * (l + 1) + c + 1
                    cand = v if v >= key else key
                    if cand < row[s]:
                        row[s], brow[s] = cand, (jj, a * (l + 1) + c, acc)
    last = val[n - 1]
    best = min(range(width), key=lambda s: (last[s], s))
    if last[best] == math.inf:
        return math.inf, []
    chain = []
    ii, s = n - 1, best
    while ii:
        step = back[ii][s]
        assert step is not None
        chain.append((step[2], ii, step[0]))
        ii, s = step[0], step[1]
    return last[best], chain[::-1]


def _value(blocks: _Blocks, chain: list[tuple[bool, int, int]]) -> tuple[float, float, float]:
    """(GPipe objective, 1F1B objective, max FW) of a chain of blocks."""
    costs = []
    for acc, ii, jj in chain:
        costs.append(next((fw, bw) for j, a, fw, bw in blocks.by_ideal[ii] if j == jj and a == acc))
    fw_max = max(c[0] for c in costs)
    return fw_max + max(c[1] for c in costs), max(c[0] + c[1] for c in costs), fw_max


def _staircase(blocks: _Blocks, k: int, l: int) -> tuple[list[tuple[bool, int, int]], int, int]:
    """The chain minimising max FW + max BW, the DP calls made, the Pareto steps visited."""
    floor_fw, _ = _minmax(blocks, k, l, False, math.inf, False)
    best_value, best_chain, calls, steps = math.inf, [], 1, 0
    cap_fw = math.inf
    while True:
        c, _ = _minmax(blocks, k, l, True, cap_fw, cap_fw != math.inf)
        calls += 1
        if c == math.inf or c + floor_fw >= best_value:
            break
        f, chain = _minmax(blocks, k, l, False, c, False)
        calls += 1
        steps += 1
        value = _value(blocks, chain)[0]
        if value < best_value:
            best_value, best_chain = value, chain
        cap_fw = f
    return best_chain, calls, steps


def partition_gpipe(
    graph: Graph | ThroughputProblem,
    *,
    devices: int | None = None,
    cpus: int | None = None,
    memory: float | None = None,
    max_ideals: int = DEFAULT_GPIPE_MAX_IDEALS,
) -> Plan:
    """Split a (training) graph into contiguous stages minimising GPipe's ``max FW + max BW``.

    Exact over the contiguous splits (acyclic quotient: the blocks, in pipeline order, form a
    chain of ideals of the forward unit DAG, colocation classes contracted, as for the exact
    DP): status ``"optimal"`` means optimal over that set. The method is the staircase walk of
    the module docs, a Python DP over pairs of ideals: for small graphs.

    Parameters
    ----------
    graph : Graph or ThroughputProblem
    devices, cpus, memory
        As :func:`stagecut.partition` (defaults from the graph).
    max_ideals : int
        Refuse graphs with more ideals (:class:`~stagecut.errors.TooManyIdealsError`).

    Returns
    -------
    Plan
        ``objective``: the GPipe objective of the split, re-scored by :func:`training_loads`
        (on top of :func:`stagecut.evaluate`); ``stages``: :class:`PhaseLoad` in pipeline order
        (``load`` is FW + BW); ``stats["pipedream_objective"]``: the split's 1F1B objective;
        ``stats["dp_calls"]``, ``stats["pareto_steps"]``, ``ideals``, ``pairs``, ``units``.
        ``status="infeasible"`` with ``objective=None`` when no contiguous split fits.

    Raises
    ------
    TooManyIdealsError
        More than ``max_ideals`` ideals.
    InvalidArgumentError, InvalidGraphError
        Bad settings, an edge from a backward node to a forward node.
    SolverError
        (internal error) the DP disagrees with the evaluator.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.transformer_like(layers=1, training=True)
    >>> plan = partition_gpipe(g, devices=2, cpus=0)
    >>> plan.status, plan.objective == gpipe_objective(g, plan.device_of())
    ('optimal', True)
    >>> plan.stats["pipedream_objective"] <= plan.objective
    True
    """
    t0 = time.perf_counter()
    problem = resolve_problem(graph, devices, cpus, memory, None, "partition_gpipe")
    max_ideals = check_int(max_ideals, "max_ideals", minimum=1)
    core, aside = set_aside_free_nodes(problem)
    units = Units(core.graph, core.memory)
    blocks = _Blocks(core, units, max_ideals)
    k, l = min(problem.devices, units.n_units), min(problem.cpus, units.n_units)
    chain, calls, steps = _staircase(blocks, k, l)
    stats: dict[str, Stat] = {"ideals": len(blocks.ideals), "pairs": blocks.pairs, "units": units.n_units,
                              "dp_calls": calls, "pareto_steps": steps, "set_aside": len(aside)}
    if not chain:
        return no_plan(problem, status="infeasible", method="gpipe-dp", stats=stats,
                       notes=["no contiguous split fits"], runtime_s=time.perf_counter() - t0)
    claimed_gpipe, claimed_1f1b, _ = _value(blocks, chain)
    assignment, order = _assign(core.graph, units, blocks, chain)
    assignment.update(dict.fromkeys(aside, order[0]))
    plan = plan_from_split(problem, assignment, order, solver="GPipe DP", claimed=claimed_1f1b, exact=True,
                           status="optimal", lower_bound=None, method="gpipe-dp", stats=stats)
    scored = training_loads(problem, assignment, order=order)
    tol = 1e-6 * max(1.0, abs(claimed_gpipe))
    if abs(scored.gpipe - claimed_gpipe) > tol:
        raise internal_error(f"the GPipe DP's split scores {scored.gpipe} but the DP computed {claimed_gpipe}")
    note = ("objective: GPipe's max FW + max BW, optimal over contiguous splits (chains of ideals); "
            f"this split's 1F1B objective max(FW + BW) is {scored.pipedream:g}")
    return dataclasses.replace(plan, objective=scored.gpipe, lower_bound=scored.gpipe, stages=scored.stages,
                               stats={**stats, "pipedream_objective": scored.pipedream},
                               notes=(*plan.notes, note), runtime_s=time.perf_counter() - t0)


def _assign(graph: Graph, units: Units, blocks: _Blocks, chain: list[tuple[bool, int, int]]
            ) -> tuple[dict[NodeId, tuple[str, int]], list[Device]]:
    """The split of a chain of blocks, and its devices in pipeline order."""
    assignment: dict[NodeId, tuple[str, int]] = {}
    order: list[Device] = []
    for acc, ii, jj in chain:
        kind = ACCELERATOR if acc else CPU
        d = (kind, sum(1 for x in order if x[0] == kind))
        order.append(d)
        block = blocks.ideals[ii] & ~blocks.ideals[jj]
        for u in range(units.n_units):
            if block >> u & 1:
                for i in units.members[u]:
                    assignment[graph.nodes[i].id] = d
    return assignment, order
