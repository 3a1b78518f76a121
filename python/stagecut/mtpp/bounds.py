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
``simple`` (Lemma 3.3)
    :func:`stagecut.mtpp.lower_bound`: the heaviest single node and the average bound.
``node-cut``, ``crossing``, ``subgraph``
    Combinatorial bounds, sound by construction (:mod:`stagecut.mtpp.combinatorial`): the least
    cost of a block holding each node (an s-t minimum cut: the tensors a heavy node must receive
    and send), the average bound with the tensors that must cross, and exact optima of induced
    subgraphs.

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
import numpy.typing as npt

from stagecut._mip import add, check_options, data_gap, new_model, reference_scale, solve, stated_tolerance
from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph
from stagecut.mtpp._args import positional, renamed
from stagecut.mtpp.combinatorial import crossing_bound, node_cut_bound, subgraph_bound
from stagecut.mtpp.model import MtppProblem, as_problem, block_cost, evaluate, forced_groups
from stagecut.mtpp.model import lower_bound as _simple
from stagecut.results import NodeId, Stat
from stagecut.validate import check_int, check_number

__all__ = ["COMBINATORIAL", "LEVELS", "BoundStatus", "BoundResult", "GuessBound", "MtppData", "mtpp_bound",
           "simple_bound", "mtpp_data"]

#: The rungs of the ladder, weakest first.
LEVELS = ("simple", "node-cut", "crossing", "subgraph", "bottleneck", "bottleneck-guess", "exact")
#: The levels computed without a MIP solver.
COMBINATORIAL = ("simple", "node-cut", "crossing", "subgraph")
#: The outcome of one rung: the MIP statuses of :mod:`stagecut._mip`, and ``"skipped"``.
BoundStatus = Literal["optimal", "feasible", "time_limit", "infeasible", "no_solution", "skipped"]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


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
        ``blocks``); for the relaxations their best primal value (not a partition cost).
    blocks : tuple of tuples of node ids, optional
        ``exact``'s partition, in pipeline order.
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
class MtppData:
    """Plain arrays of an instance (picklable, for worker processes): per node ``work`` and
    ``params``; per producing node with a tensor cost ``prod`` (its position) and ``comm``;
    the (producer index, consumer position) pairs; the edges; the forced-group ties ``same``
    (``(group, node)`` pairs); the memory model ``M``, ``R``, ``B``; ``simple``, the bound the MIPs start
    from (the simple bound, or a stronger proven one); ``scale``,
    the value of one model unit (:func:`~stagecut._mip.reference_scale`: the MIPs divide every
    time by it), and ``upper``, the cost of a known partition (or ``None``); tensor costs above
    twice ``upper`` are capped there (exact: see :func:`mtpp_data`)."""

    n: int
    k: int
    ids: list[NodeId]
    work: F64
    params: F64
    prod: I64
    comm: F64
    pair_prod: I64
    pair_cons: I64
    edges: I64
    same: I64
    M: float
    R: float
    B: float | None
    simple: float
    scale: float = 1.0
    upper: float | None = None


def mtpp_data(problem: MtppProblem, upper: float | None = None, floor: float | None = None) -> MtppData:
    """The plain arrays of ``problem`` (see :class:`MtppData`), ``upper`` the cost of a known
    partition (``None``: none known), ``floor`` a proven lower bound the MIPs start from (their
    ``T >= floor``; at least the simple bound, which is used when ``floor`` is ``None``).

    Times go into the MIPs in model units (:func:`~stagecut._mip.reference_scale`: ``upper`` is
    1000 units, else the largest time is), so that 1e7 next to 7 stays within the solvers'
    tolerances. With ``upper``, a tensor cost above ``2 upper`` is capped at ``2 upper``: a
    partition of cost at most ``upper`` pays none of them, and any other still costs more than
    ``upper``, so the optimum is unchanged, and the relaxations' constraints only get looser
    (their bounds stay valid).

    >>> d = mtpp_data(MtppProblem(Graph.chain([3.0, 1.0], comm=0.5), devices=2))
    >>> d.work.tolist(), d.prod.tolist(), d.pair_cons.tolist()
    ([3.0, 1.0], [0], [1])
    """
    g = problem.graph
    n = len(g.nodes)
    prod: list[int] = []
    comm: list[float] = []
    pair_prod: list[int] = []
    pair_cons: list[int] = []
    for u, nd in enumerate(g.nodes):
        if nd.comm > 0 and g.succ[u]:
            k = len(prod)
            prod.append(u)
            comm.append(nd.comm)
            cons = sorted(set(g.succ[u]))
            pair_prod.extend([k] * len(cons))
            pair_cons.extend(cons)
    edges = np.array([(g.index[a], g.index[b]) for a, b in g.edges], dtype=np.int64).reshape(-1, 2)
    # forced groups (colocation classes, and classes on a cycle): one block for each group
    grp = forced_groups(problem)
    same = np.array([(grp[i], i) for i in range(n) if grp[i] != i], dtype=np.int64).reshape(-1, 2)
    work = [problem.work(i) for i in range(n)]
    if upper is not None and not (math.isfinite(upper) and upper > 0):
        upper = None
    if upper is not None:
        comm = [min(c, 2 * upper) for c in comm]
    return MtppData(
        n=n, k=problem.devices, ids=[nd.id for nd in g.nodes], work=np.array(work, dtype=float),
        params=np.array([nd.memory for nd in g.nodes], dtype=float),
        prod=np.array(prod, dtype=np.int64), comm=np.array(comm), pair_prod=np.array(pair_prod, dtype=np.int64),
        pair_cons=np.array(pair_cons, dtype=np.int64), edges=edges, same=same,
        M=problem.memory, R=problem.reserved_memory, B=problem.bandwidth, simple=_start_bound(problem, floor),
        scale=reference_scale(work + comm, upper), upper=upper,
    )


def _start_bound(problem: MtppProblem, floor: float | None) -> float:
    return _simple(problem) if floor is None else max(_simple(problem), floor)


def _blocks_model(m: Any, d: MtppData, nblocks: int) -> tuple[Any, Any, Any]:
    """z (completed-by) and the per-block cost and parameter expressions."""
    import mip

    n = d.n
    z = m.add_var_tensor((n, nblocks), "z", var_type=mip.BINARY)
    for v in z[:, nblocks - 1]:
        v.lb = 1.0
    if nblocks > 1:
        add(m, z[:, :-1] - z[:, 1:] <= 0)
    e = d.edges
    if len(e):
        add(m, z[e[:, 1], :] - z[e[:, 0], :] <= 0)
    if len(d.same):
        add(m, z[d.same[:, 0], :] - z[d.same[:, 1], :] == 0)
    if nblocks > 1:
        x = np.concatenate([z[:, :1], z[:, 1:] - z[:, :-1]], axis=1).view(type(z))
    else:
        x = z
    cost = (d.work / d.scale) @ x
    if len(d.prod):
        c = m.add_var_tensor((len(d.prod), nblocks), "c", lb=0.0, ub=1.0)
        pp, pc = d.pair_prod, d.pair_cons
        pu = d.prod[pp]
        diff = x[pc, :] - x[pu, :]
        add(m, c[pp, :] - diff >= 0)
        add(m, c[pp, :] + diff >= 0)
        cost = cost + (d.comm / d.scale) @ c
    params_b = d.params @ x
    return z, cost, params_b


def _memory_terms(m: Any, d: MtppData, params_b: Any, blocks_in: list[Any]) -> Any:
    """Overflow of each (super)block holding ``blocks_in[b]`` blocks (constants or exprs)."""
    M, R, B = d.M, d.R, d.B
    nb = len(params_b)
    if not math.isfinite(M) or d.params.sum() + R <= M:
        return None
    scale = max(1.0, float(d.params.sum()))
    if B is None:
        for b in range(nb):
            add(m, params_b[b] * (1 / scale) - blocks_in[b] * ((M - R) / scale) <= 0)
        return None
    o = m.add_var_tensor((nb,), "o", lb=0.0)  # in model units: bytes / (B * scale)
    bs = B * d.scale
    for b in range(nb):
        add(m, o[b] - params_b[b] * (1 / bs) - blocks_in[b] * ((R - M) / bs) >= 0)
    return o


def _superblocks(m: Any, d: MtppData, level: str, guess: int | None, T: Any) -> Any:
    """``bottleneck`` / ``bottleneck-guess``: prefix P, bottleneck N, suffix S; returns z."""
    import mip

    k = d.k
    z, cost, params_b = _blocks_model(m, d, 3)  # P, N, S
    if level == "bottleneck":
        kp = m.add_var("kP", var_type=mip.INTEGER, lb=0, ub=k - 1)
        blocks_in: list[Any] = [kp, 1, (k - 1) - kp]
    else:
        assert guess is not None
        blocks_in = [guess, 1, k - 1 - guess]
        if blocks_in[0] == 0:  # an empty prefix
            for v in z[:, 0]:
                v.ub = 0.0
        if blocks_in[2] == 0:  # an empty suffix
            for v in z[:, 1]:
                v.lb = 1.0
    o = _memory_terms(m, d, params_b, blocks_in)
    load = cost + o if o is not None else cost
    add(m, load[1] - T <= 0)
    if level == "bottleneck":
        add(m, load[0] + load[2] - (k - 1) * T <= 0)
    else:
        if blocks_in[0]:
            add(m, load[0] - blocks_in[0] * T <= 0)
        if blocks_in[2]:
            add(m, load[2] - blocks_in[2] * T <= 0)
    return z


def _gap(d: MtppData, gap: float | None) -> float:
    """The relative gap asked, else the data's (:func:`~stagecut._mip.data_gap`)."""
    return gap if gap is not None else data_gap([*d.work.tolist(), *d.comm.tolist()], d.scale)


def _build(d: MtppData, level: str, guess: int | None, solver: str, gap: float | None, threads: int | None,
           seed: int, verbose: bool) -> tuple[Any, Any]:
    import mip

    m = new_model(f"mtpp_{level}", solver=solver, gap=_gap(d, gap), threads=threads, seed=seed, verbose=verbose)
    T = m.add_var("T", lb=float(d.simple) / d.scale if math.isfinite(d.simple) else 0.0)
    if level == "exact":
        z, cost, params_b = _blocks_model(m, d, d.k)
        o = _memory_terms(m, d, params_b, [1] * d.k)
        load = cost + o if o is not None else cost
        add(m, load - T <= 0)
    else:
        z = _superblocks(m, d, level, guess, T)
    m.objective = mip.minimize(T)
    return m, z


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
    m, z = _build(d, level, guess, solver, gap, threads, seed, verbose)
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
    level : {"simple", "node-cut", "crossing", "subgraph", "bottleneck", "bottleneck-guess", "exact"}
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
        A partition (node ids, in pipeline order) the ``exact`` MIP starts from (a MIP start;
        its cost also caps the tensor costs, see :func:`mtpp_data`). With CBC and budgets of
        seconds this was measured to hurt (the solver spent its time on the start and proved
        less), so :func:`~stagecut.mtpp.certify.certify` does not pass one.
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
    if level not in LEVELS:
        raise InvalidArgumentError(f"level must be one of {LEVELS}, got {level!r}")
    for value, what in ((time_limit, "time_limit (seconds)"), (gap, "gap")):
        if value is not None:
            check_number(value, what, allow_inf=True, positive=what != "gap", error=InvalidArgumentError)
    if known_bound is not None:
        check_number(known_bound, "known_bound", allow_inf=True, error=InvalidArgumentError)
    check_options(time_limit, gap, threads, seed, solver)
    if workers is not None:
        workers = check_int(workers, "workers", minimum=1)
    start_cost = None if start is None else evaluate(problem, [list(b) for b in start]).objective
    t0 = time.perf_counter()
    deadline = None if time_limit is None or math.isinf(time_limit) else time.monotonic() + float(time_limit)
    if level in COMBINATORIAL:
        return _combinatorial(problem, level, deadline, t0)
    known = _known_cost(problem)
    if start_cost is not None and math.isfinite(start_cost):
        known = start_cost if known is None else min(known, start_cost)
    floor = max(-math.inf if known_bound is None else float(known_bound),
                _floor(problem, deadline, time_limit))
    d = mtpp_data(problem, upper=known, floor=floor)
    begin = None if start is None or level != "exact" else [list(b) for b in start]
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
    else:
        r = subgraph_bound(problem, deadline=deadline)
    bound = max(r.bound, simple_bound(problem))
    stats: dict[str, Stat] = {"solves": r.solves}
    if r.witness:
        stats["witness"] = ", ".join(str(x) for x in r.witness[:20]) + (" ..." if len(r.witness) > 20 else "")
    return BoundResult(level=level, bound=bound, status="optimal" if r.complete else "time_limit",
                       seconds=time.perf_counter() - t0, stats=stats)


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
    if not math.isfinite(best) or not math.isfinite(bound):
        return bound, status, objective, None
    tol = stated_tolerance(best, d.scale, _gap(d, gap))
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
