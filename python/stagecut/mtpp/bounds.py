"""MIPs for MTPP (Archer, Fahrbach, Liu, Prabhu, "Practical Performance Guarantees for
Pipelined DNN Inference", Section 3) and the simple bound, built with python-mip.

All formulations use *completed-by* variables ``z[v, b]`` (node ``v`` sits in one of the
blocks ``0..b``), monotone in ``b`` and closed under predecessors, so every prefix of blocks is
an ideal and the quotient graph is acyclic; ``x[v, b] = z[v, b] - z[v, b-1]``. For every
producing node ``u`` and (super)block ``b`` a variable ``c[u, b] >= |x[v, b] - x[u, b]|`` over
its consumers ``v`` charges ``comm(u)`` once when the tensor crosses the block boundary
(in or out); ``o[b] >= (params(b) + R - M) / B`` is the overflow (a hard limit
``params(b) <= M - R`` without a bandwidth).

``exact`` (Figure 3)
    ``k`` ordered blocks, every block cost ``<= T``; the optimum is the MTPP optimum.
``bottleneck`` (three superblocks)
    A prefix ``P``, the bottleneck block ``N`` and a suffix ``S`` of the ``k`` blocks; ``N``
    keeps its exact cost ``<= T``; ``P`` and ``S`` together hold ``k - 1`` blocks and their
    costs (work, tensors crossing their boundary, and the superadditive overflow
    ``(params + k_P (R - M))^+ / B`` with ``k_P`` an integer variable) sum to at most
    ``(k - 1) T``. Every optimal partition is feasible with ``T = OPT`` (take its bottleneck
    as ``N``), so the optimum is a lower bound.
``bottleneck-guess``
    One small MIP per guessed position ``i`` of the bottleneck block: ``k_P = i`` blocks
    before, ``k - 1 - i`` after, and ``cost(P) <= k_P T``, ``cost(S) <= k_S T``. The bound is
    the smallest of the ``k`` dual bounds (the true position gives at most ``OPT``); the MIPs
    are independent and run in worker processes.
``partition-lp`` (:data:`EXTRA_LEVELS`; in the default ladder on graphs of at most 100 groups and over 40,000 ideals)
    The LP relaxation of covering the groups with the fewest blocks of cost ``<= T`` (column
    generation, :mod:`stagecut.mtpp.partlp`): a ``T`` where the LP needs more than ``k`` blocks
    is below the optimum, proven by one pricing MIP's dual bound (Farley's bound). For graphs
    of a few dozen groups: on 24-node random graphs it reaches 0.999 of the optimum, on 40-node
    ones 0.98 to 0.999 of the plan in 20 s; on 100-node ones it needs minutes per ``T`` near
    ``sdp``'s bound.
``block``
    One small MIP per tested ``T`` (:mod:`stagecut.mtpp.blockmip`): the block paying the fewest
    tensors must hold what the others cannot, ``w >= W - (k - 1) (T - io)``; a ``T`` where no
    node set can is below the optimum.
``simple`` (Lemma 3.3)
    :func:`stagecut.mtpp.lower_bound`: the heaviest single node and the average bound.
``node-cut``, ``crossing``, ``cover``, ``prefix``, ``spectral``, ``sdp``, ``subgraph``
    Combinatorial bounds, sound by construction (:mod:`stagecut.mtpp.combinatorial`): the least
    cost of a block holding each node (an s-t minimum cut: the tensors a heavy node must receive
    and send), the average bound with the tensors that must cross, the same with convex blocks
    (each tensor paid by as many blocks as the convex closures of its producer and consumers
    need), what a hard memory limit forces on the first and last blocks of the pipeline
    (:mod:`stagecut.mtpp.prefix`), the average bound with the cuts any balanced partition pays (eigenvalues of the
    tensor graph, :mod:`stagecut.mtpp.spectral`), the same cuts from a semidefinite relaxation
    with nonnegative entries (:mod:`stagecut.mtpp.sdp`), and exact optima of induced subgraphs.

The MIP levels also carry ``T >= floor`` (a valid cut), ``floor`` the larger of the simple and
the node-cut bound (and of ``known_bound``, a bound the caller has proven, e.g. an earlier level
of :func:`~stagecut.mtpp.certify.certify`), so each is at least these. Every bound returned is
the solver's proven dual bound, never a primal value.

Examples
--------
>>> from stagecut.graph import Graph
>>> g = Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5)
>>> r = mtpp_bound(g, level="exact", devices=2)
>>> r.bound, r.status, r.blocks
(5.5, 'optimal', ((0, 1), (2, 3)))
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from stagecut._mip import check_options, solve, stated_tolerance
from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph
from stagecut.mtpp import sdp, spectral
from stagecut.mtpp._args import positional, renamed
from stagecut.mtpp.blockmip import block_bound
from stagecut.mtpp.combinatorial import crossing_bound, node_cut_bound, subgraph_bound
from stagecut.mtpp.cover import cover_bound
from stagecut.mtpp.formulations import MtppData, mtpp_data, relative_gap
from stagecut.mtpp.formulations import build as build_model
from stagecut.mtpp.model import MtppProblem, _positions, as_problem, block_cost, evaluate, forced_groups
from stagecut.mtpp.model import lower_bound as _simple
from stagecut.mtpp.partlp import partition_lp_bound
from stagecut.mtpp.prefix import prefix_bound
from stagecut.mtpp.sdp import sdp_bound
from stagecut.mtpp.spectral import spectral_bound
from stagecut.results import NodeId, Stat
from stagecut.validate import check_int, check_number

__all__ = ["COMBINATORIAL", "EXTRA_LEVELS", "LEVELS", "BoundStatus", "BoundResult", "GuessBound", "MtppData",
           "mtpp_bound", "simple_bound", "mtpp_data"]

#: The rungs of the ladder, weakest first.
LEVELS = ("simple", "node-cut", "crossing", "cover", "prefix", "spectral", "sdp", "subgraph", "block", "bottleneck",
          "bottleneck-guess", "exact")
#: Levels not in :data:`LEVELS`: ``partition-lp`` solves many MIPs, and from about a hundred groups it
#: needs several minutes to tens of minutes per ``T``. :func:`~stagecut.mtpp.certify.certify`'s default
#: ladder runs it on graphs of at most :data:`~stagecut.mtpp.certify.PARTITION_LP_GROUPS` groups that
#: the whole graph's DP cannot solve; elsewhere it runs when named.
EXTRA_LEVELS = ("partition-lp",)
#: The levels computed without a MIP solver.
COMBINATORIAL = ("simple", "node-cut", "crossing", "cover", "prefix", "spectral", "sdp", "subgraph")
#: The outcome of one rung: the MIP statuses of :mod:`stagecut._mip`, and ``"skipped"``.
BoundStatus = Literal["optimal", "feasible", "time_limit", "infeasible", "no_solution", "skipped"]


@dataclass(frozen=True, kw_only=True)
class GuessBound:
    """One MIP of ``bottleneck-guess``: the guessed position of the bottleneck block and its bound."""

    guess: int
    bound: float | None
    status: BoundStatus
    seconds: float


@dataclass(frozen=True, kw_only=True)
class BoundResult:
    """One rung of the ladder: a proven lower bound and how it was obtained.

    Attributes
    ----------
    level : str
        One of :data:`LEVELS`.
    bound : float, optional
        The solver's dual bound, never a primal value (``inf`` when the formulation is
        infeasible: no partition exists); ``None`` ("no bound") when the level was skipped or
        the solver proved nothing in its time.
    status : str
        ``"optimal"``, ``"time_limit"``, ``"feasible"``, ``"infeasible"``, ``"no_solution"`` or
        ``"skipped"`` (see :data:`BoundStatus`).
    seconds : float
        Wall-clock time of the level.
    objective : float, optional
        For ``exact``: the evaluator's cost of the MIP's partition (its blocks are in
        ``blocks``); for ``subgraph`` when it solved the whole graph, the evaluator's cost of
        the optimum's partition; for the relaxations their best primal value (not a partition
        cost).
    blocks : tuple of tuples of node ids, optional
        ``exact``'s partition, or the optimum's partition ``subgraph`` found on the whole graph,
        in pipeline order.
    stats : mapping
        ``mip_constraints``, ``mip_vars``, ``build_s`` (one MIP levels).
    guesses : tuple of GuessBound
        ``bottleneck-guess``: one entry per guessed position.
    reason : str, optional
        Why the level was skipped, or why the MIP's own bound or status was not trusted
        (numerical trouble: then ``bound`` is the simple bound and ``status`` ``"feasible"``).
    """

    level: str
    bound: float | None
    status: BoundStatus
    seconds: float
    objective: float | None = None
    blocks: tuple[tuple[NodeId, ...], ...] | None = None
    stats: Mapping[str, Stat] = field(default_factory=dict)
    guesses: tuple[GuessBound, ...] = ()
    reason: str | None = None


def simple_bound(problem: MtppProblem) -> float:
    """The simple bound of Lemma 3.3 (:func:`stagecut.mtpp.lower_bound`).

    >>> simple_bound(MtppProblem(Graph.chain([3.0, 1.0, 2.0, 2.0]), devices=2))
    4.0
    """
    return _simple(problem)


@dataclass(frozen=True)
class _Solved:
    """One MIP solved: its dual bound, status, primal value and (``exact``) blocks."""

    bound: float
    status: BoundStatus
    objective: float | None
    seconds: float
    build_s: float
    rows: int
    cols: int
    blocks: tuple[tuple[NodeId, ...], ...] | None
    guess: int | None


def _solve_one(d: MtppData, level: str, guess: int | None, time_limit: float | None, solver: str,
               gap: float | None, threads: int | None, seed: int, verbose: bool,
               deadline: float | None = None, start: list[list[NodeId]] | None = None) -> _Solved:
    """Build and solve one MIP; ``deadline`` (``time.monotonic()``, shared across processes on
    Linux) caps ``time_limit`` so that building the model and starting a worker count too;
    ``start`` (``exact``): the blocks of a partition, in pipeline order, as a MIP start."""
    t0 = time.perf_counter()
    m, z = build_model(d, level, guess, solver, gap, threads, seed, verbose)
    build = time.perf_counter() - t0
    if deadline is not None:
        left = max(0.1, deadline - time.monotonic())
        time_limit = left if time_limit is None else min(float(time_limit), left)
    mip_start = None
    if start is not None and level == "exact" and len(start) <= d.k:
        pos = {v: i for i, v in enumerate(d.ids)}
        blk = [0] * d.n
        for b, nodes in enumerate(start):
            for v in nodes:
                blk[pos[v]] = b
        mip_start = [(z[i, b], 1.0 if blk[i] <= b else 0.0) for i in range(d.n) for b in range(d.k)]
    out = solve(m, time_limit=time_limit, start=mip_start)
    blocks = None
    if level == "exact" and out.objective is not None:
        zz = np.rint(np.array([[v.x for v in row] for row in z]))
        blk = (zz < 0.5).sum(axis=1)
        used = sorted(set(blk.tolist()))
        blocks = tuple(tuple(d.ids[i] for i in range(d.n) if blk[i] == b) for b in used)
    status: BoundStatus = out.status  # type: ignore[assignment]  # the _mip vocabulary
    bound = out.bound * d.scale
    objective = None if out.objective is None else out.objective * d.scale
    return _Solved(bound=bound, status=status, objective=objective,
                   seconds=time.perf_counter() - t0, build_s=build, rows=out.rows, cols=out.cols, blocks=blocks,
                   guess=guess)


def _solve_star(a: tuple[Any, ...]) -> _Solved:
    return _solve_one(*a)


def _combined_status(statuses: set[BoundStatus]) -> BoundStatus:
    if statuses == {"optimal"}:
        return "optimal"
    if statuses <= {"optimal", "infeasible"}:
        return "optimal" if "optimal" in statuses else "infeasible"
    if "time_limit" in statuses:
        return "time_limit"
    return "feasible"


def _bottleneck_guess(d: MtppData, time_limit: float | None, workers: int | None,
                      opts: tuple[str, float | None, int | None, int]) -> tuple[float, BoundStatus, list[_Solved]]:
    """``k`` independent MIPs, one per guessed position of the bottleneck block; the bound is the
    least of their dual bounds. They run through :func:`stagecut._parallel.parallel_map`: on the
    active (or a passed) Dask client's workers when there is one and ``workers != 1``, else in
    ``workers`` spawned processes when ``workers > 1``, else in this process. The shared deadline
    is rebased to each worker's clock; each MIP's own limit is the level's time over the rounds
    the available width needs."""
    from stagecut._parallel import parallel_map, parallel_width

    solver, gap, threads, seed = opts
    width = parallel_width(workers)
    per = None if time_limit is None else max(0.5, float(time_limit) / math.ceil(d.k / width))
    deadline = None if time_limit is None else time.monotonic() + float(time_limit)
    args = [(d, "bottleneck-guess", i, per, solver, gap, threads, seed, False, deadline) for i in range(d.k)]
    results = parallel_map(_solve_star, args, workers, deadline_at=9)
    return min(r.bound for r in results), _combined_status({r.status for r in results}), results


def mtpp_bound(
    graph: Graph | MtppProblem, *legacy: Any, level: str = "exact", devices: int | None = None,
    memory: float | None = None, bandwidth: float | None = None, reserved_memory: float | None = None,
    kind: str | None = None, colocate: bool | None = None, time_limit: float | None = None, gap: float | None = None,
    threads: int | None = None, seed: int = 0, solver: str = "cbc", workers: int | None = None, verbose: bool = False,
    known_bound: float | None = None, start: Sequence[Sequence[NodeId]] | None = None,
    stages: int | None = None, fast_memory: float | None = None,
) -> BoundResult:
    """Solve one rung of the ladder and return its proven lower bound.

    Parameters
    ----------
    graph : Graph or MtppProblem
        With a Graph, ``devices`` and the memory model (``memory``, ``bandwidth``,
        ``reserved_memory``), ``kind`` and ``colocate`` make the problem
        (:func:`~stagecut.mtpp.model.as_problem`); with a problem they come from it.
    level : str
        One of :data:`LEVELS`: ``"simple"``, ``"node-cut"``, ``"crossing"``, ``"cover"``, ``"prefix"``,
        ``"spectral"``, ``"sdp"``, ``"subgraph"``, ``"block"``, ``"bottleneck"``, ``"bottleneck-guess"``,
        ``"exact"``, or ``"partition-lp"`` (:data:`EXTRA_LEVELS`).
    time_limit : float, optional
        Seconds for the level (for ``bottleneck-guess``: the whole level). On expiry a MIP level
        returns the dual bound found so far with status ``"time_limit"`` (never the primal
        value), a combinatorial level the best bound found so far.
    gap, threads, seed, solver, verbose
        Solver options (see :func:`stagecut.throughput.ip.partition_ip`).
    workers : int, optional
        Worker processes for ``bottleneck-guess`` (default 1: in this process).
    known_bound : float, optional
        A lower bound already proven for this problem (e.g. by an earlier level): the MIPs start
        from it (``T >= known_bound``). A wrong value makes a wrong bound.
    start : list of blocks, optional
        A partition (node ids, in pipeline order), for instance the plan being certified. Its
        cost (the evaluator's), when finite, is a known cost: the MIPs cap the tensor costs by it
        (see :func:`mtpp_data`), and ``block`` and ``partition-lp`` search for their bound below it
        (without it: below the cheaper of one block and SliceGraph's cut of one order, 8 to 22%
        above a good plan on 12- to 100-node random graphs); ``partition-lp`` takes its blocks as
        its first columns, and the ``exact`` MIP starts from it (a MIP start). With CBC and
        budgets of seconds that MIP start was measured to hurt (the solver spent its time on the
        start and proved less), so :func:`~stagecut.mtpp.certify.certify` passes the plan to every
        MIP level but ``exact``.
    stages, fast_memory
        Deprecated names of ``devices`` and ``memory`` (and ``level`` given positionally).

    Returns
    -------
    BoundResult

    Raises
    ------
    InvalidArgumentError
        An unknown level or solver; a bad time limit, gap, thread or worker count, seed or device
        count; settings given with an MtppProblem.
    InvalidGraphError
        ``graph`` is not a Graph or MtppProblem; ``start`` is not a partition.
    BackendUnavailableError
        ``solver="highs"`` without HiGHS installed.
    SolverError
        The MIP solver failed.

    Examples
    --------
    >>> from stagecut.graph import Graph
    >>> p = MtppProblem(Graph.chain([2.0, 2.0, 2.0, 2.0], comm=3.0), devices=2)
    >>> mtpp_bound(p, level="simple").bound, mtpp_bound(p, level="bottleneck").bound > 4.0
    (4.0, True)
    """
    old = positional("mtpp_bound", legacy, ("level",), {})
    level = old.get("level", level)
    problem = as_problem(
        graph, devices=renamed("mtpp_bound", "devices", devices, "stages", stages),
        memory=renamed("mtpp_bound", "memory", memory, "fast_memory", fast_memory), bandwidth=bandwidth,
        reserved_memory=reserved_memory, kind=kind, colocate=colocate, where="mtpp_bound")
    if level not in LEVELS + EXTRA_LEVELS:
        raise InvalidArgumentError(f"level must be one of {LEVELS + EXTRA_LEVELS}, got {level!r}")
    for value, what in ((time_limit, "time_limit (seconds)"), (gap, "gap")):
        if value is not None:
            check_number(value, what, allow_inf=True, positive=what != "gap", error=InvalidArgumentError)
    if known_bound is not None:
        check_number(known_bound, "known_bound", allow_inf=True, error=InvalidArgumentError)
    check_options(time_limit, gap, threads, seed, solver)
    if workers is not None:
        workers = check_int(workers, "workers", minimum=1)
    given: list[list[NodeId]] | None = None if start is None else [list(b) for b in start]
    start_cost = None if given is None else evaluate(problem, given).objective
    t0 = time.perf_counter()
    deadline = None if time_limit is None or math.isinf(time_limit) else time.monotonic() + float(time_limit)
    if level in COMBINATORIAL:
        return _combinatorial(problem, level, deadline, t0)
    known = _known_cost(problem)
    if start_cost is not None and math.isfinite(start_cost):
        known = start_cost if known is None else min(known, start_cost)
    if level == "block":
        return _block(problem, known, known_bound, deadline, time_limit, solver, threads, seed, t0)
    if level == "partition-lp":
        columns = None if given is None else [_positions(problem, b, "start") for b in given]
        return _partition_lp(problem, known, known_bound, deadline, time_limit, solver, threads, seed, t0, columns)
    floor = max(-math.inf if known_bound is None else float(known_bound),
                _floor(problem, deadline, time_limit))
    d = mtpp_data(problem, upper=known, floor=floor)
    begin = None if level != "exact" else given
    if level in ("exact", "bottleneck") or d.k == 1:
        r = _solve_one(d, "exact" if d.k == 1 else level, None, _left(deadline, time_limit), solver, gap, threads,
                       seed, verbose, deadline, begin)
        blocks = r.blocks if level == "exact" else None
        bound, status, objective, reason = _checked(problem, d, r.bound, r.status, r.objective, blocks, gap)
        blocks = blocks if objective is not None else None
        return BoundResult(level=level, bound=_some(bound), status=status, seconds=time.perf_counter() - t0,
                           objective=objective, blocks=blocks, reason=reason,
                           stats={"mip_constraints": r.rows, "mip_vars": r.cols, "build_s": r.build_s,
                                  "floor": d.simple})
    left = None if deadline is None else max(0.1, deadline - time.monotonic())
    bound, status, results = _bottleneck_guess(d, left, workers, (solver, gap, threads, seed))
    bound, status, _, reason = _checked(problem, d, bound, status, None, None, gap)
    guesses = tuple(GuessBound(guess=int(r.guess or 0), bound=_some(r.bound), status=r.status, seconds=r.seconds)
                    for r in results)
    return BoundResult(level=level, bound=_some(bound), status=status, seconds=time.perf_counter() - t0,
                       guesses=guesses, reason=reason, stats={"floor": d.simple})


def _some(bound: float) -> float | None:
    """``None`` for "no bound" (a solver that proved nothing reports ``-inf``)."""
    return None if bound == -math.inf or math.isnan(bound) else bound


def _left(deadline: float | None, time_limit: float | None) -> float | None:
    return None if deadline is None else max(0.1, deadline - time.monotonic()) if time_limit is not None else None


def _floor(problem: MtppProblem, deadline: float | None, time_limit: float | None) -> float:
    """The bound the MIPs start from: the simple and the node-cut bound, the cuts given a tenth
    of the level's time at most."""
    stop = None if deadline is None or time_limit is None else time.monotonic() + 0.1 * float(time_limit)
    return max(simple_bound(problem), node_cut_bound(problem, deadline=stop).bound)


def _combinatorial(problem: MtppProblem, level: str, deadline: float | None, t0: float) -> BoundResult:
    """A level computed without a MIP solver: status ``"optimal"`` when it ran to the end (the
    bound is the level's exact value), ``"time_limit"`` when its deadline stopped it."""
    if level == "simple":
        return BoundResult(level="simple", bound=simple_bound(problem), status="optimal",
                           seconds=time.perf_counter() - t0)
    if level == "node-cut":
        r = node_cut_bound(problem, deadline=deadline)
    elif level == "crossing":
        r = crossing_bound(problem, deadline=deadline)
    elif level == "cover":
        r = cover_bound(problem, deadline=deadline)
    elif level == "prefix":
        r = prefix_bound(problem, deadline=deadline)
    elif level == "spectral":
        r = spectral_bound(problem, deadline=deadline)
    elif level == "sdp":
        r = sdp_bound(problem, deadline=deadline)
    else:
        r = subgraph_bound(problem, deadline=deadline)
    bound = max(r.bound, simple_bound(problem))
    stats: dict[str, Stat] = {"solves": r.solves}
    if r.witness:
        stats["witness"] = ", ".join(str(x) for x in r.witness[:20]) + (" ..." if len(r.witness) > 20 else "")
    if level in ("spectral", "sdp") and not r.complete and r.solves == 0:
        most = spectral.MAX_GROUPS if level == "spectral" else sdp.MAX_GROUPS
        many = len(set(forced_groups(problem))) > most
        short = "no time for one eigendecomposition" if level == "spectral" else f"no time for {sdp.MIN_STEPS} steps"
        why = f"more than {most} forced groups" if many else short
        return BoundResult(level=level, bound=None, status="skipped", seconds=time.perf_counter() - t0, reason=why)
    blocks = objective = None
    if r.partition is not None:  # (subgraph solved the whole graph: its partition, re-scored there, is an optimum)
        blocks, objective = tuple(tuple(b) for b in r.partition), bound
    return BoundResult(level=level, bound=bound, status="optimal" if r.complete else "time_limit",
                       seconds=time.perf_counter() - t0, stats=stats, objective=objective, blocks=blocks)


def _block(problem: MtppProblem, known: float | None, known_bound: float | None, deadline: float | None,
           time_limit: float | None, solver: str, threads: int | None, seed: int | None, t0: float) -> BoundResult:
    """The ``block`` level (:mod:`stagecut.mtpp.blockmip`), from the larger of ``known_bound``
    and the simple and node-cut bounds, up to the cost of a known partition."""
    lo = max(-math.inf if known_bound is None else float(known_bound), _floor(problem, deadline, time_limit))
    left = None if deadline is None else max(0.1, deadline - time.monotonic())
    r = block_bound(problem, lo=lo, hi=known, time_limit=left, solver=solver, threads=threads, seed=seed)
    return BoundResult(level="block", bound=_some(r.bound), status="optimal" if r.complete else "time_limit",
                       seconds=time.perf_counter() - t0,
                       stats={"solves": r.solves, "mip_constraints": r.rows, "mip_vars": r.cols, "floor": lo,
                              **({} if known is None else {"upper": known})})


def _partition_lp(problem: MtppProblem, known: float | None, known_bound: float | None, deadline: float | None,
                  time_limit: float | None, solver: str, threads: int | None, seed: int | None,
                  t0: float, columns: list[list[int]] | None = None) -> BoundResult:
    """The ``partition-lp`` level (:mod:`stagecut.mtpp.partlp`), from the larger of ``known_bound``
    and the simple and node-cut bounds, up to the cost of a known partition; ``columns``: a
    partition's blocks (node positions), its first columns."""
    lo = max(-math.inf if known_bound is None else float(known_bound), _floor(problem, deadline, time_limit))
    left = None if deadline is None else max(0.1, deadline - time.monotonic())
    r = partition_lp_bound(problem, lo=lo, hi=known, time_limit=left, solver=solver, threads=threads, seed=seed,
                           start=columns)
    return BoundResult(level="partition-lp", bound=_some(r.bound), status="optimal" if r.complete else "time_limit",
                       seconds=time.perf_counter() - t0,
                       stats={"mips": r.mips, "lps": r.lps, "columns": r.columns, "floor": lo,
                              **({} if known is None else {"upper": known})})


def _known_cost(problem: MtppProblem) -> float | None:
    """The cost of a known partition (``None`` when none is found): the cheaper of one block
    holding everything and SliceGraph's best cut of one topological order."""
    from stagecut.mtpp.slicegraph import slice_graph  # (slicegraph does not import this module)

    costs = [block_cost(problem, problem.graph.ids)]
    plan = slice_graph(problem, method="order")
    if plan.objective is not None:
        costs.append(plan.objective)
    finite = [c for c in costs if math.isfinite(c)]
    return min(finite) if finite else None


def _checked(problem: MtppProblem, d: MtppData, bound: float, status: BoundStatus, objective: float | None,
             blocks: tuple[tuple[NodeId, ...], ...] | None, gap: float | None
             ) -> tuple[float, BoundStatus, float | None, str | None]:
    """``(bound, status, objective, reason)`` of a MIP level, held to the partitions known.

    The exact MIP's partition is scored by the evaluator (its ``objective``). A bound above the
    cost of a known partition by more than :func:`~stagecut._mip.stated_tolerance`, or
    ``"infeasible"`` while a partition is known, is numerical trouble: the level then gives the
    bound it started from (``d.simple``: the simple or a stronger proven bound) with status
    ``"feasible"`` and says why in ``reason``. ``"optimal"`` from the exact MIP stands only
    when its partition's cost is within the tolerance of the bound; a partition the evaluator
    finds infeasible is no partition (``"no_solution"``).
    """
    best = math.inf if d.upper is None else d.upper
    if blocks is not None:
        objective = evaluate(problem, blocks).objective
        if not math.isfinite(objective):  # e.g. a fractional solution taken for an integral one
            return bound, "no_solution", None, (
                "the MIP solver's partition breaks the hard memory limit (numerical trouble): no partition "
                "found, the bound stands")
        best = min(best, objective)
    if status == "infeasible":
        if math.isfinite(best):
            return d.simple, "feasible", objective, (
                "the MIP solver reported that no partition fits, yet one does (numerical trouble): the bound "
                "it started from is given")
        return bound, status, objective, None
    if bound == math.inf:  # (only "infeasible" proves +inf; a solver stopped early has no bound)
        return -math.inf, status, objective, "the MIP solver stopped before it proved a bound"
    if not math.isfinite(best) or not math.isfinite(bound):
        return bound, status, objective, None
    tol = stated_tolerance(best, d.scale, relative_gap(d, gap))
    if bound > best + tol:
        return d.simple, "feasible", objective, (
            f"the MIP's bound {bound:.9g} is above the cost {best:.9g} of a known partition (numerical "
            "trouble): the bound it started from is given")
    bound = min(bound, best)
    if blocks is not None and status == "optimal" and objective is not None and objective - bound > tol:
        return bound, "feasible", objective, (
            f"the MIP solver reported optimal, but its partition costs {objective:.9g}, more than the tolerance "
            f"{tol:.3g} above its bound: not proven")
    return bound, status, objective, None
