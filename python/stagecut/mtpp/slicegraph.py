"""SliceGraph: pipeline partitioning of graphs of any size under the MTPP cost model.

Archer, Fahrbach, Liu, Prabhu, "Practical Performance Guarantees for Pipelined DNN Inference"
(Sections 4 and Appendix B). Every topological order of the graph, cut into at most ``k``
contiguous segments, gives a valid partition (its quotient is acyclic); SliceGraph finds the
best cuts of one order exactly by a DP (Algorithm 1) over segment costs (Lemma 4.1: a 2D
Fenwick tree, or an incremental scan that only touches the segments the DP needs). The search
is over orders: a vector of node priorities gives an order by Kahn's algorithm (Algorithm 3),
and random sampling, BRKGA or minimum-linear-arrangement orders explore the priorities
(Algorithm 2). ``method="dp"`` is the exact optimum over all acyclic partitions (the ideal DP
with the MTPP block cost, :mod:`stagecut.mtpp.exact`) when the graph has few enough ideals.

The methods (:data:`METHODS`):

``"brkga"``
    BRKGA (Goncalves and Resende) over node priorities, each decoded by Kahn + SliceGraph.
``"random"``
    The best of ``decodes`` random priority vectors (random-T).
``"mla"``, ``"mla-weighted"``
    BRKGA on the (tensor-cost weighted) linear-arrangement cost of the order, then SliceGraph
    on the best order (Appendix C.1).
``"multilevel"``
    Coarsen by acyclic edge contractions, plan the coarsest level, refine on the way back
    (:mod:`~stagecut.mtpp.multilevel`): the cheapest plans on sparse graphs of hundreds of nodes.
``"dp"``
    The exact optimum (ideal DP; :class:`~stagecut.errors.TooManyIdealsError` past ``max_ideals``).
``"order"``
    SliceGraph on one order (``order``, or the order ``priorities`` give, or a default
    topological order).
``"spectral-order"``
    Sweeps along the graph's spectral embedding (:mod:`~stagecut.mtpp.spectral_order`), each
    order cut by SliceGraph; far cheaper plans than the searches on graphs with a geometry.
``"auto"``
    The exact DP first when the graph has at most :data:`AUTO_IDEALS` ideals (traced operator
    graphs have a few hundred to a few tens of thousands: the DP proves the optimum in seconds at
    most), for at most half the time limit (30 s with none). Otherwise (or if the DP did not
    finish: its best partition stays a candidate), the searches of :data:`PORTFOLIO` in turn
    (``"multilevel"`` only on more than :data:`~stagecut.mtpp.multilevel.MIN_UNITS` units), each
    from its own seed and with its re-splits, the cheapest plan kept; ``restarts`` more runs
    continue the cycle. No one search wins everywhere: the spectral sweeps on lattice-like and
    geometric graphs, the multilevel search on sparse random graphs (by 4 to 8% at 500 to 2,000
    nodes); on a hundred nodes or so any may win.

Examples
--------
>>> from stagecut.graph import Graph
>>> g = Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5)
>>> plan = slice_graph(g, devices=2, method="dp")
>>> plan.objective, plan.status, plan.assignment()
(5.5, 'optimal', {0: 0, 1: 0, 2: 1, 3: 1})
>>> [(s.device, s.nodes, s.load) for s in plan.stages]
[('accelerator:0', (0, 1), 5.5), ('accelerator:1', (2, 3), 5.5)]
>>> slice_graph(g, devices=2, method="brkga", seed=0, population=10, generations=5).objective
5.5
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from stagecut._deadline import DeadlineReached, check_time_limit, deadline
from stagecut.errors import (
    InvalidArgumentError,
    MemoryLimitError,
    TooManyIdealsError,
    internal_error,
)
from stagecut.graph import Graph
from stagecut.mtpp import multilevel, spectral_order
from stagecut.mtpp._args import positional, renamed
from stagecut.mtpp.exact import Relaxation, solve_exact
from stagecut.mtpp.improve import after_search, improve_budget, improve_windows
from stagecut.mtpp.model import MtppProblem, as_problem, evaluate, lower_bound, tensor_costs_dwarf_the_answer
from stagecut.mtpp.plan import SlicePlan
from stagecut.mtpp.restarts import PORTFOLIO, check_restarts, polish, polish_reserve, restart, run_options
from stagecut.mtpp.restarts import SEEDED as _SEEDED
from stagecut.mtpp.units import CoreArrays, Units, warn_cycle_groups
from stagecut.mtpp.user_order import Priorities, order_priorities, positions, priority_values
from stagecut.progress import Progress, reports
from stagecut.results import NodeId, Stage, Stat, Status
from stagecut.validate import check_int, check_number

__all__ = ["SlicePlan", "slice_graph", "METHODS", "PORTFOLIO", "AUTO_IDEALS", "Relaxation", "mtpp_arrays",
           "segment_io"]

#: ``method="auto"`` tries the exact DP first on graphs with at most this many ideals (the DP's
#: time grows about as their square: 0.03 s for 240, 4 s for 36,000, 37 s for 71,000).
AUTO_IDEALS = 40_000
#: The share of the time limit the DP of ``method="auto"`` may take.
AUTO_DP_SHARE = 0.5
#: Seconds the DP of ``method="auto"`` may take with no time limit (then the searches run).
AUTO_DP_SECONDS = 30.0

#: The values of ``slice_graph(method=...)``.
METHODS = ("brkga", "random", "mla", "mla-weighted", "spectral-order", "multilevel", "dp", "order", "auto")
_SEGMENT_COSTS = ("auto", "scan", "fenwick")


def mtpp_arrays(problem: MtppProblem, fold_leaves: bool = False) -> CoreArrays:
    """The flat arrays the core takes (``work, params, t_cost, t_prod, t_cons_off, t_cons``).

    >>> from stagecut.graph import Graph
    >>> work, *_ = mtpp_arrays(MtppProblem(Graph.chain([1.0, 2.0]), devices=2))
    >>> work.tolist()
    [1.0, 2.0]
    """
    return Units(problem, fold_leaves).arrays


def segment_io(problem: Graph | MtppProblem, order: Sequence[NodeId],
               builder: str = "fenwick") -> npt.NDArray[np.float64]:
    """The ``n x n`` table of tensor costs ``io(l, r)`` of the segments of ``order`` (node ids),
    by the 2D Fenwick construction of Lemma 4.1 (``builder="fenwick"``) or the naive one.

    Colocation classes play no part (the table is over nodes).

    Raises
    ------
    InvalidArgumentError
        ``order`` is not a topological order of the nodes, or an unknown ``builder``.

    Examples
    --------
    >>> from stagecut.graph import Graph
    >>> segment_io(Graph.chain([1.0, 1.0], comm=0.5), [0, 1]).tolist()
    [[0.5, 0.0], [0.0, 0.5]]
    """
    if isinstance(problem, MtppProblem):
        plain = dataclasses.replace(problem, colocate=False)
    else:
        plain = as_problem(problem, devices=1, colocate=False, where="segment_io")
    units = Units(plain, fold_leaves=False)
    pos = np.asarray(positions(plain.graph, order), dtype=np.int64)
    flat = units.segment_io(pos, builder)
    n = len(plain.graph.nodes)
    return flat.reshape(n, n)


# ------------------------------------------------------------------------------ arguments
@dataclass(frozen=True)
class _Options:
    """The validated search settings."""

    method: str
    seed: int
    population: int
    generations: int
    decodes: int | None
    elite: float
    mutant: float
    rho: float
    islands: int
    max_ideals: int
    segment_costs: str


def _fraction(x: Any, what: str) -> float:
    v = check_number(x, what, error=InvalidArgumentError)
    if v > 1.0:
        raise InvalidArgumentError(f"{what}: {x!r} must lie in [0, 1]")
    return v


def _options(method: Any, seed: Any, population: Any, generations: Any, decodes: Any, elite: Any, mutant: Any,
             rho: Any, islands: Any, max_ideals: Any, segment_costs: Any) -> _Options:
    if method not in METHODS:
        raise InvalidArgumentError(f"method: {method!r} is not one of {', '.join(METHODS)}")
    e, m = _fraction(elite, "elite"), _fraction(mutant, "mutant")
    if not (0 < e < 1) or e + m > 1:
        raise InvalidArgumentError("elite must lie in (0, 1) and elite + mutant must be at most 1")
    if segment_costs not in _SEGMENT_COSTS:
        raise InvalidArgumentError(f"segment_costs: {segment_costs!r} is not 'auto', 'scan' or 'fenwick'")
    return _Options(
        method=method,
        seed=check_int(seed, "seed", maximum=2**64 - 1),
        population=check_int(population, "population", minimum=2, maximum=2**62),
        generations=check_int(generations, "generations", maximum=2**62),
        decodes=None if decodes is None else check_int(decodes, "decodes", minimum=1),
        elite=e, mutant=m, rho=_fraction(rho, "rho"),
        islands=check_int(islands, "islands", minimum=1),
        max_ideals=check_int(max_ideals, "max_ideals", minimum=1),
        segment_costs=segment_costs,
    )


# ------------------------------------------------------------------------------ method="order"
def _order_kwargs(problem: MtppProblem, units: Units, opts: _Options, order: Sequence[NodeId] | None,
                  priorities: Priorities | None) -> dict[str, Any]:
    if opts.method != "order":
        if order is not None or priorities is not None:
            raise InvalidArgumentError("order/priorities are only used with method='order'")
        return {}
    if order is not None and priorities is not None:
        raise InvalidArgumentError("give order or priorities, not both")
    kw: dict[str, Any] = {}
    if order is not None:
        kw = order_priorities(problem.graph, units, order)
    elif priorities is not None:
        kw = priority_values(problem.graph, units, priorities)
    kw["segment_costs"] = _segment_costs(problem, units, opts)
    return kw


def _segment_costs(problem: MtppProblem, units: Units, opts: _Options) -> str:
    """How the core prices the segments of single orders (``"auto"``: the table rounds away
    answers far below some tensor cost; the scan does not)."""
    if opts.segment_costs != "auto":
        return opts.segment_costs
    return "fenwick" if len(units.members) <= 4096 and not tensor_costs_dwarf_the_answer(problem) else "scan"


# ------------------------------------------------------------------------------ solving
@dataclass
class _Found:
    """A solver's partition before re-scoring: node positions, pipeline order."""

    objective: float
    blocks: list[list[int]]
    order: list[int]
    history: list[float]
    stats: dict[str, Stat] = field(default_factory=dict)
    exact_by: str | None = None
    relaxation: Relaxation | None = None
    timed_out: bool = False
    notes: tuple[str, ...] = ()


def _search(problem: MtppProblem, units: Units, opts: _Options, kw: dict[str, Any]) -> _Found:
    """A search over orders (or one order), each cut optimally by SliceGraph, in the core; cut
    short by the time limit, the search's best so far (one order: none)."""
    budget = opts.decodes if opts.decodes is not None else opts.population * max(opts.generations, 1)
    budget = min(budget, 2**63)  # more is no limit
    if opts.method == "multilevel":
        ml = multilevel.search(problem, opts.seed, slice_graph)
        return _Found(objective=ml["objective"], blocks=ml["blocks"], order=[], history=ml["history"],
                      stats={"decodes": 0, **{k: ml[k] for k in ("levels", "coarsest", "planned")}},
                      timed_out=ml["time_limit_reached"],
                      notes=("the refined plan cost about as much as one device: the graph itself was planned "
                             "too, by method='auto', and its plan is kept",) if ml.get("whole") else ())
    if opts.method == "spectral-order":  # (single orders: the scan prices a segment as the DP reaches it)
        seg = "scan" if opts.segment_costs == "auto" else opts.segment_costs
        out = spectral_order.search(units, problem.devices, opts.seed, opts.decodes or spectral_order.SWEEPS, seg)
        return _Found(objective=float(out["objective"]), blocks=[units.expand(b) for b in out["blocks"]],
                      order=units.expand(out["order"]), history=out["history"],
                      stats={"decodes": int(out["decodes"]), "slice_rounds": int(out["rounds"])},
                      timed_out=bool(out["time_limit_reached"]), notes=(out["note"],) if out["note"] else ())
    try:
        out = units.slice(
            problem.devices, opts.method, seed=opts.seed, population=opts.population,
            generations=opts.generations if opts.decodes is None else 2**62, elite=opts.elite, mutant=opts.mutant,
            rho=opts.rho, max_decodes=budget if opts.method != "order" else None, samples=budget,
            islands=opts.islands, **kw,
        )
    except DeadlineReached:
        return _Found(objective=math.inf, blocks=[], order=[], history=[], timed_out=True)
    return _Found(objective=float(out["objective"]), blocks=[units.expand(b) for b in out["blocks"]],
                  order=units.expand(out["order"]), history=[float(h) for h in out["history"]],
                  stats={"decodes": int(out["decodes"]), "slice_rounds": int(out["rounds"])},
                  timed_out=bool(out["time_limit_reached"]))


def _exact(problem: MtppProblem, units: Units, opts: _Options, fold: bool) -> _Found:
    out = solve_exact(problem, units, fold=fold, max_ideals=opts.max_ideals)
    return _Found(objective=out.objective, blocks=out.blocks, order=[], history=[out.objective],
                  stats={"decodes": 0, "ideals": out.ideals}, exact_by=out.exact_by, relaxation=out.relaxation,
                  timed_out=out.timed_out)


def _rescore(problem: MtppProblem, found: _Found) -> tuple[Stage, ...]:
    """The found blocks as stages scored by the evaluator; a disagreement is an internal error."""
    if not found.blocks:
        return ()
    g = problem.graph
    ev = evaluate(problem, [[g.nodes[i].id for i in b] for b in found.blocks])
    if not math.isclose(ev.objective, found.objective, rel_tol=1e-6, abs_tol=1e-9):
        raise internal_error(
            f"the core computed {found.objective!r} but the evaluator scores its partition {ev.objective!r}: "
            "floating-point cancellation when costs span many orders of magnitude (e.g. bytes and "
            "ms mixed); rescale the inputs (e.g. parameters in MB)"
        )
    return ev.stages


def _timed_out_status(problem: MtppProblem, found: _Found,
                      stages: tuple[Stage, ...]) -> tuple[Status, float, float | None, list[str]]:
    """:func:`_status` of a solve cut short by the time limit: ``"time_limit"`` (``"optimal"`` if
    the bound proves it), the bound: the simple one, or the last relaxation's optimum if larger."""
    lb = lower_bound(problem)
    if found.relaxation is not None:
        lb = max(lb, found.relaxation.bound)
    if not stages:
        return "time_limit", lb, None, ["time limit reached before any partition was found"]
    objective = max(s.load for s in stages)
    if objective <= lb * (1 + 1e-12):
        return "optimal", lb, objective, []
    return "time_limit", lb, objective, ["time limit reached: the best partition found so far"]


def _status(problem: MtppProblem, method: str,
            stages: tuple[Stage, ...]) -> tuple[Status, float, float | None, list[str]]:
    """``(status, lower bound, objective, notes)`` of a partition (``stages``, or none found)."""
    lb = lower_bound(problem)
    if not stages:
        if method == "dp" or not math.isfinite(lb):
            return "infeasible", math.inf, None, []
        return "unknown", lb, None, [
            "no feasible partition found, but infeasibility is not proven: method='dp' decides it"]
    objective = max(s.load for s in stages)
    if not math.isfinite(objective):  # pragma: no cover - the core returns no blocks then
        raise internal_error(f"a partition of cost {objective!r} was returned as feasible")
    if method == "dp":
        return "optimal", objective, objective, []
    return ("optimal" if objective <= lb * (1 + 1e-12) else "feasible"), lb, objective, []


def _plan(problem: MtppProblem, units: Units, opts: _Options, found: _Found, t0: float) -> SlicePlan:
    stages = _rescore(problem, found)
    if found.timed_out:
        status, lb, objective, notes = _timed_out_status(problem, found, stages)
    else:
        status, lb, objective, notes = _status(problem, opts.method, stages)
    g = problem.graph
    positions = [i for b in found.blocks for i in b] if found.blocks else found.order
    return SlicePlan(
        objective=objective, status=status, lower_bound=lb, method=opts.method,
        seed=opts.seed if opts.method in _SEEDED else None, runtime_s=time.perf_counter() - t0,
        stats={**found.stats, "units": len(units.members)}, stages=stages, notes=(*found.notes, *notes),
        devices=problem.devices, memory=problem.memory, bandwidth=problem.bandwidth,
        reserved_memory=problem.reserved_memory, colocate=problem.colocate,
        order=tuple(g.nodes[i].id for i in positions), history=tuple(found.history),
        exact_by=found.exact_by, relaxation=found.relaxation,
    )


@reports
def slice_graph(
    graph: Graph | MtppProblem, *legacy: Any, devices: int | None = None, method: str = "brkga", seed: int = 0,
    population: int = 100, generations: int = 100, decodes: int | None = None, elite: float = 0.2,
    mutant: float = 0.1, rho: float = 0.7, islands: int = 1, order: Sequence[NodeId] | None = None,
    priorities: Priorities | None = None, memory: float | None = None, bandwidth: float | None = None,
    reserved_memory: float | None = None, segment_costs: str = "auto", max_ideals: int = 1_000_000,
    fold_leaves: bool = True, kind: str | None = None, colocate: bool | None = None, stages: int | None = None,
    fast_memory: float | None = None, time_limit: float | None = None, improve: bool | float | None = None,
    progress: Progress = None, restarts: int | str = 0,
) -> SlicePlan:
    """Split ``graph`` into at most ``devices`` pipeline stages minimising the largest MTPP
    block cost (see :mod:`stagecut.mtpp.model` for the cost model and units, and the module
    docs for the methods).

    Parameters
    ----------
    graph : Graph or MtppProblem
        With a problem, the device count, the memory model, ``kind`` and ``colocate`` come from
        it (giving them too is an error).
    devices : int, optional
        At most this many blocks (default: the graph's ``defaults["accelerators"]``).
    method : {"brkga", "random", "mla", "mla-weighted", "spectral-order", "dp", "order", "auto"}
        ``"spectral-order"``: ``decodes`` sweeps along the spectral embedding (default 48).
        ``"auto"``: the exact DP when the graph has at most :data:`AUTO_IDEALS` ideals (and
        ``max_ideals``), for at most half of ``time_limit`` (30 s with none); else (or if not done)
        ``"spectral-order"``, ``"mla-weighted"``, ``"brkga"`` and ``"mla"`` in turn
        (module docs), the cheapest plan kept; ``method`` of the result is ``"auto"``,
        ``stats["auto_method"]`` the part that found it (``"dp"``: the plan is proven optimal, or
        the problem infeasible).
    seed, population, generations, elite, mutant, rho : optional
        BRKGA parameters (Goncalves and Resende): elite and mutant fractions of the population,
        probability ``rho`` of inheriting a key from the elite parent.
    decodes : int, optional
        Budget of decoded chromosomes (BRKGA and MLA stop there; random samples this many;
        default ``population * generations``).
    islands : int
        BRKGA / MLA: independent populations sharing the decode budget (best one wins).
    order, priorities : optional
        For ``method="order"``: the order (node ids), or a priority per node (a mapping or a
        sequence in node order; Kahn takes the smallest first).
    memory, bandwidth, reserved_memory : float, optional
        Fast memory per device (bytes; ``None``: unlimited), bytes per time unit for
        overflowing parameters (``None``: hard limit), memory reserved for activations.
    segment_costs : {"auto", "scan", "fenwick"}
        For ``"order"``: segment costs by incremental scan, or materialized by the 2D Fenwick
        tree (``O(n^2)`` memory; ``"auto"`` up to 4096 units).
    max_ideals : int
        For ``"dp"``: refuse past this many ideals (``"auto"`` tries the DP only up to this many
        and :data:`AUTO_IDEALS`).
    fold_leaves : bool
        Fold work-free, parameter-free leaves into their only neighbour first (exact).
    kind : str, optional
        The device kind whose compute time is the work (``"accelerator"``).
    colocate : bool, optional
        Keep each colocation class in one block (default ``True``); ``False``: a plain DAG.
    stages, fast_memory : optional
        Deprecated names of ``devices`` and ``memory`` (also ``stages`` and ``method`` given
        positionally), accepted with a :class:`DeprecationWarning` for one release.
    time_limit : float, optional
        Seconds for the whole call (``None``: no limit). A search stopped by it returns its best
        partition so far; ``"dp"`` returns the best partition of the quick BRKGA searches that
        bound its DPs; ``"order"`` returns none. Status ``"time_limit"`` (``"optimal"`` if the
        lower bound proves it), the simple lower bound (or the leaf relaxation's optimum, if a
        round of it finished); ``objective`` ``None`` when nothing was found in time.
    improve : bool or float, optional
        Then improve the plan by exact re-splits of two blocks at a time, then moves of single
        groups (:func:`~stagecut.mtpp.improve.improve_plan`) for at most this many seconds. ``True``
        and the default (``None``, on for the search methods ``"brkga"``, ``"random"``,
        ``"mla"``, ``"mla-weighted"``, ``"spectral-order"``; off for ``"order"``, whose plan is that order's slicing,
        and ``"dp"``, whose optimum needs none): until no re-split improves the plan or
        :data:`~stagecut.mtpp.improve.IMPROVE_WINDOWS` pairs of blocks were tried, a cap on the
        work, so the answer is the same from the same seed on any machine. With a
        ``time_limit`` the step runs inside it: the search stops early enough to leave it up to
        a fifth of the limit (at most 2 s by default). The answer is never worse than the
        search's: ``stats["found_by"]`` names the part that found it (the method, or
        ``"improve"``), ``stats["start_objective"]`` the search's cost. A step stopped by time
        (a number of seconds, or the ``time_limit``; a note says so) may give another answer
        on a slower machine.
    progress : bool or callable, optional
        Progress reports (:mod:`stagecut.progress`): a callable receives a
        :class:`~stagecut.progress.ProgressEvent` about four times a second while the core works
        (an exception it raises stops the call); ``True`` shows a tqdm bar on stderr once the call
        has run 2 s, if stderr is a terminal; ``None`` (default): none.
    restarts : int or "auto"
        The seeded searches: after the first search (and its re-splits, unless
        ``improve=False``), run up to this many more from seeds ``seed + 1``, ``seed + 2``...
        (modulo ``2**64``), each with its own re-splits, and keep the cheapest plan (the first on
        ties; ``seed`` says whose it is). Their answers vary by a few percent from seed to seed
        on graphs of a few hundred nodes, so the best of several is usually cheaper than one
        longer search. ``"auto"``: as many as fit in ``time_limit`` (required then). No restart
        starts once a plan is proven optimal or infeasible, or when the time left is shorter
        than the quickest run so far (then the status is ``"time_limit"``). ``stats``:
        ``restarts`` (how many ran), ``restart_decodes`` (the decodes of all runs); a note says
        why they stopped. ``"auto"`` keeps the last fifth of ``time_limit`` (at most the
        ``improve`` budget) to polish the cheapest plan by kicks and moves of single groups
        (:mod:`~stagecut.mtpp.moves`; ``stats["polish_kicks"]``, and ``stats["found_by"]`` is
        ``"polish"`` when that lowered the cost). With ``method="auto"`` the runs continue its cycle of searches (the
        first four are one of each, three past 3,000 units, within the time limit). Default 0.

    Returns
    -------
    SlicePlan
        Re-scored by :func:`stagecut.mtpp.evaluate`; ``objective`` ``None`` and status
        ``"infeasible"`` when no partition exists (proven), ``"unknown"`` when a heuristic found
        none and infeasibility is not proven (a note says so).

    Raises
    ------
    InvalidArgumentError
        An unknown ``method`` or ``segment_costs``; a bad seed, population, fraction, budget or
        device count; ``restarts`` not a count or ``"auto"``, ``"auto"`` with no time limit, or
        restarts for ``"dp"`` or ``"order"``; an ``order`` that is not a topological order; bad ``priorities``;
        settings given with an MtppProblem.
    InvalidGraphError
        ``graph`` is not a graph, or a node cannot run on ``kind``.
    TooManyIdealsError
        ``method="dp"`` past ``max_ideals``: the message names the reason (unconnected parts
        whose ideals multiply, ``colocate=False``, the relaxation's bound) and the alternative.
    SolverError
        An internal error (the core and the evaluator disagree); please report it.
    MemoryLimitError
        The population, the segment table (``segment_costs="fenwick"``) or the DP's tables would
        pass the memory budget (the message says how much and what to change).
    KeyboardInterrupt
        On Ctrl-C (SIGINT), within a fraction of a second, even inside the Rust core.

    Examples
    --------
    >>> from stagecut.graph import Graph
    >>> g = Graph.chain([3.0, 1.0, 2.0], comm=0.5, memory=[4.0, 4.0, 4.0])
    >>> plan = slice_graph(g, devices=2, method="dp", memory=6.0, bandwidth=2.0)
    >>> plan.objective, plan.exact_by, [s.nodes for s in plan.stages]
    (4.5, 'ideal DP', [(0,), (1, 2)])
    """
    t0 = time.perf_counter()
    old = positional("slice_graph", legacy, ("devices", "method"), {"devices": devices})
    problem = as_problem(
        graph, devices=renamed("slice_graph", "devices", old.get("devices", devices), "stages", stages),
        memory=renamed("slice_graph", "memory", memory, "fast_memory", fast_memory),
        bandwidth=bandwidth, reserved_memory=reserved_memory, kind=kind, colocate=colocate, where="slice_graph")
    opts = _options(old.get("method", method), seed, population, generations, decodes, elite, mutant, rho, islands,
                    max_ideals, segment_costs)
    limit = check_time_limit(time_limit)
    budget = improve_budget(improve, opts.method in _SEEDED)
    units = Units(problem, fold_leaves and order is None and priorities is None)
    if problem.colocate:
        warn_cycle_groups(problem, units.groups)
    if opts.method == "spectral-order":
        spectral_order.check_units(units)
    portfolio = tuple(m for m in PORTFOLIO if (m != "spectral-order" or len(units.members) <= spectral_order.MAX_UNITS)
                      and (m != "multilevel" or len(units.members) > multilevel.MIN_UNITS and not multilevel.nested()))
    more = check_restarts(restarts, opts.method, limit)
    kw = _order_kwargs(problem, units, opts, order, priorities)
    if opts.method == "auto":
        more += len(portfolio) - 1  # (every search of the portfolio once, then the restarts)
    start, fallback, why = t0, None, None
    if opts.method == "auto":
        exact, fallback, why = _auto_exact(problem, units, opts, fold_leaves, limit, t0)
        if exact is not None:
            return exact
        start = time.perf_counter()  # (the searches' clock: the DP's time is not theirs)
        if limit is not None:
            limit = max(0.0, limit - (start - t0))
    reserve = polish_reserve(budget, limit) if math.isinf(more) else 0.0  # (restarts="auto": time to polish)
    with deadline(limit), multilevel.in_portfolio() if opts.method == "auto" else contextlib.nullcontext():
        first = None if limit is None else limit - reserve
        with deadline(first):
            plan = _run(problem, units, run_options(opts, 0, portfolio), kw, fold_leaves, first, budget, improve,
                        start)
        if more:
            def again(o: _Options, left: float | None, begun: float) -> SlicePlan:
                return _run(problem, units, o, kw, fold_leaves, left, budget, improve, begun)

            plan = restart(again, opts, plan, more, start, portfolio, reserve)
            if reserve:
                plan = polish(problem, plan, opts.seed, start)
            if "spectral-order" not in portfolio:
                plan = dataclasses.replace(plan, notes=(*plan.notes, (
                    f"spectral-order left out: {len(units.members)} units, more than {spectral_order.MAX_UNITS}")))
        elif opts.method in _SEEDED:
            plan = dataclasses.replace(plan, stats={**plan.stats, "restarts": 0})
    if opts.method == "auto":
        plan = _with_dp_attempt(plan, fallback, why, t0)
    return plan


def _auto_exact(problem: MtppProblem, units: Units, opts: _Options, fold_leaves: bool, limit: float | None,
                t0: float) -> tuple[SlicePlan | None, SlicePlan | None, str | None]:
    """``method="auto"``'s first step: ``(plan, fallback, note)``. ``plan`` is the exact DP's
    (proven optimal, or the problem infeasible) when the graph has at most :data:`AUTO_IDEALS`
    ideals and the DP ends within its share of ``limit`` (:data:`AUTO_DP_SECONDS` without one);
    else ``None``, and the searches run. ``fallback``: the best partition of a DP stopped by
    the time limit (a candidate against the searches'), ``note`` says so."""
    dp = dataclasses.replace(opts, method="dp", max_ideals=min(opts.max_ideals, AUTO_IDEALS))
    share = AUTO_DP_SECONDS if limit is None or math.isinf(limit) else AUTO_DP_SHARE * limit
    begun = time.perf_counter()
    try:
        with deadline(share):
            units.count_ideals(dp.max_ideals)  # (refuses at once past it, before the DP's quick search)
            found = _exact(problem, units, dp, fold_leaves)
    except (TooManyIdealsError, MemoryLimitError):
        return None, None, None
    except DeadlineReached:
        found = _Found(objective=math.inf, blocks=[], order=[], history=[], timed_out=True)
    plan = _plan(problem, units, dp, found, t0)
    if plan.status not in ("optimal", "infeasible"):  # (the time limit stopped it: the searches run)
        why = f"the exact DP did not finish in its {time.perf_counter() - begun:.3g} s: the searches ran"
        return None, (plan if plan.stages else None), why
    if found.timed_out:
        how = "a partition of the exact DP's first searches meets the lower bound (proven optimal)"
    elif plan.status == "optimal":
        how = f"the exact DP ({found.stats.get('ideals', 0)} ideals) found the optimum"
    else:
        how = f"the exact DP ({found.stats.get('ideals', 0)} ideals) proved the problem infeasible"
    note = f"{how} in {time.perf_counter() - t0:.3g} s: no search ran"
    return dataclasses.replace(plan, method="auto", seed=None, notes=(*plan.notes, note),
                               stats={**plan.stats, "auto_method": "dp", "found_by": "dp", "restarts": 0,
                                      "restart_decodes": 0}), None, None


def _with_dp_attempt(plan: SlicePlan, fallback: SlicePlan | None, why: str | None, t0: float) -> SlicePlan:
    """``auto``'s answer after a DP stopped by its time: the searches' plan, or the DP's partition
    when it is cheaper (or the searches found none), with the note; ``runtime_s`` from ``t0``."""
    if fallback is not None and fallback.objective is not None and (
            plan.objective is None or fallback.objective < plan.objective * (1 - 1e-12)):
        plan = dataclasses.replace(fallback, method="auto", seed=None, status="time_limit",
                                   stats={**fallback.stats, "auto_method": "dp", "found_by": "dp",
                                          "restarts": plan.stats.get("restarts", 0),
                                          "restart_decodes": plan.stats.get("restart_decodes", 0)})
    notes = plan.notes if why is None else (*plan.notes, why)
    return dataclasses.replace(plan, notes=notes, runtime_s=time.perf_counter() - t0)


def _run(problem: MtppProblem, units: Units, opts: _Options, kw: dict[str, Any], fold_leaves: bool,
         limit: float | None, budget: float | None, improve: Any, t0: float) -> SlicePlan:
    """One search (or the DP) and its re-splits, within ``limit`` seconds from ``t0``."""
    reserve = 0.0 if budget is None or limit is None or math.isinf(limit) else min(budget, 0.2 * limit)
    with deadline(None if limit is None else limit - reserve):
        if opts.method == "dp":
            found = _exact(problem, units, opts, fold_leaves)
        else:
            found = _search(problem, units, opts, kw)
    plan = _plan(problem, units, opts, found, t0)
    if budget is not None:
        plan = after_search(problem, plan, budget, limit, t0, improve_windows(improve))
    return plan
