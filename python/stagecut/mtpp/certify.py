"""Optimality certificates for MTPP partitions: climb the ladder of lower bounds.

:func:`certify` scores a plan with the independent MTPP evaluator, then runs the requested
bounds in order (by default :data:`~stagecut.mtpp.bounds.LEVELS`: ``simple``, the combinatorial
``node-cut``, ``crossing``, ``cover``, ``prefix``, ``spectral``, ``sdp`` and ``subgraph``, then the MIPs ``block``,
``bottleneck``, ``bottleneck-guess`` and ``exact``; on a graph of at most :data:`PARTITION_LP_GROUPS`
forced groups that the whole-graph DP cannot solve, ``partition-lp`` after ``sdp``) within one time
budget, and reports the best proven lower bound (capped by the plan's cost), the level it came from
(``bound_source``) and the per-instance approximation ratio ``objective / lower_bound``. A level
that proved nothing has bound ``None`` ("no bound"). Every MIP bound is the solver's dual bound,
with its status; a level stopped by the time limit contributes its dual bound, never its primal
value.

Examples
--------
>>> import stagecut as sc
>>> from stagecut.mtpp.certify import certify
>>> g = sc.Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5)
>>> cert = certify(g, [[0, 1], [2, 3]], devices=2, levels=("simple", "exact"))
>>> cert.objective, cert.lower_bound, cert.ratio, cert.status
(5.5, 5.5, 1.0, 'optimal')
>>> [(r.level, r.status) for r in cert.levels]
[('simple', 'optimal'), ('exact', 'optimal')]
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from stagecut.errors import InvalidArgumentError, InvalidGraphError, TooManyIdealsError
from stagecut.graph import Graph
from stagecut.mtpp._args import renamed
from stagecut.mtpp.bounds import COMBINATORIAL, EXTRA_LEVELS, LEVELS, BoundResult, mtpp_bound
from stagecut.mtpp.improve import IMPROVE_SECONDS, improve_plan, improve_windows
from stagecut.mtpp.model import MtppEvaluation, MtppProblem, as_problem, evaluate, forced_groups
from stagecut.mtpp.plan import SlicePlan, plan_blocks
from stagecut.mtpp.slicegraph import AUTO_IDEALS
from stagecut.mtpp.units import Units
from stagecut.progress import Progress, reports
from stagecut.results import NodeId, Result, Stage, Stat, Status
from stagecut.units import Display
from stagecut.validate import check_number

__all__ = ["Certificate", "certify", "plan_blocks"]


@dataclass(frozen=True, kw_only=True)
class Certificate(Result):
    """The outcome of :func:`certify` (a :class:`~stagecut.results.Result`, ``method="certify"``).

    ``objective`` is the certified plan's MTPP cost (evaluator; ``None`` when the plan breaks a
    hard memory limit), ``stages`` the plan's blocks as scored, ``lower_bound`` the best proven
    bound over the levels run, capped by the plan's cost (``None`` when no level ran); status
    ``"optimal"`` when the bound meets the cost, else ``"feasible"``.

    Attributes
    ----------
    levels : tuple of BoundResult
        One row per level, in the order run: bound, status, seconds (``"skipped"`` rows too).
    devices : int
        The device count the plan was certified for.
    memory, bandwidth, reserved_memory, colocate
        The memory model and colocation setting of the problem.
    best_stages : tuple of Stage
        A cheaper partition found by a level (empty when none), scored by the evaluator: the
        ``exact`` MIP's, or the optimum the ``subgraph`` level found by the exact DP on the whole
        graph (a note names the level).
    best_objective : float, optional
        Its cost.
    bound_source : str, optional
        The level that gave ``lower_bound`` (the first to reach it; ``None`` when no level gave a bound).
    """

    objective_name: ClassVar[str] = "largest block cost (MTPP)"

    method: str = "certify"
    levels: tuple[BoundResult, ...] = ()
    devices: int
    memory: float = math.inf
    bandwidth: float | None = None
    reserved_memory: float = 0.0
    colocate: bool = True
    best_stages: tuple[Stage, ...] = ()
    best_objective: float | None = None
    bound_source: str | None = None

    def summary(self, display: Display | None = None) -> str:
        """The shared summary block (:meth:`stagecut.results.Result.summary`), then one line per
        level of the ladder: its bound (``no bound`` when it proved none), status and seconds,
        and the level the certified bound came from.

        Examples
        --------
        >>> from stagecut.graph import Graph
        >>> cert = certify(Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5), [[0, 1], [2, 3]], devices=2,
        ...                levels=("simple", "exact"))
        >>> [line.split()[1:4] for line in cert.summary().splitlines() if line.startswith(("level", "bound by"))]
        [['simple', 'bound', '5'], ['exact', 'bound', '5.5'], ['by', 'exact']]
        """
        d = display or Display()
        lines = [super().summary(display)]
        for r in self.levels:
            bound = "no bound" if r.bound is None else d.with_unit(r.bound)
            lines.append(f"level      {r.level:<17} bound {bound:<14} {r.status:<11} {r.seconds:8.2f} s"
                         + (f"   ({r.reason})" if r.status == "skipped" and r.reason else ""))
        if self.levels:
            lines.append(f"bound by   {self.bound_source or 'no level'}")
        return "\n".join(lines)

    @property
    def ratio(self) -> float:
        """``objective / lower_bound``: 1 when proven optimal; ``inf`` when the bound is 0 or unknown."""
        if self.objective == 0:
            return 1.0
        if self.objective is None or self.lower_bound is None or not (0 < self.lower_bound < math.inf):
            return math.inf
        return self.objective / self.lower_bound


def _check_levels(levels: Sequence[str] | str) -> tuple[str, ...]:
    out = (levels,) if isinstance(levels, str) else tuple(levels)
    for lv in out:
        if lv not in LEVELS + EXTRA_LEVELS:
            raise InvalidArgumentError(f"level {lv!r} is not one of {LEVELS + EXTRA_LEVELS}")
    return out


def solved_for(plan: SlicePlan, devices: int | None, settings: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The device count and settings a :class:`SlicePlan` was solved for, where not given: the
    memory model as a whole (only when none of its three settings is given), the device kind (its
    stages' devices), the colocation."""
    out = dict(settings)
    if all(out[name] is None for name in ("memory", "bandwidth", "reserved_memory")):
        out.update(memory=None if math.isinf(plan.memory) else plan.memory, bandwidth=plan.bandwidth,
                   reserved_memory=plan.reserved_memory or None)
    kinds = {str(st.device).split(":")[0] for st in plan.stages}
    if out["kind"] is None and len(kinds) == 1:
        out["kind"] = kinds.pop()
    if out["colocate"] is None:
        out["colocate"] = plan.colocate
    return (plan.devices if devices is None else devices), out


def _problem(graph: Graph | MtppProblem, blocks_of: Callable[[Graph], list[list[NodeId]]], devices: int | None,
             settings: dict[str, Any]) -> tuple[MtppProblem, list[list[NodeId]]]:
    """The problem (devices default: the graph's accelerators, else the plan's block count) and the blocks."""
    if isinstance(graph, MtppProblem):
        return as_problem(graph, devices=devices, **settings, where="certify"), blocks_of(graph.graph)
    if not isinstance(graph, Graph):
        raise InvalidGraphError(f"graph: expected a Graph or MtppProblem, got {type(graph).__name__}")
    blocks = blocks_of(graph)
    if devices is None:
        default = graph.defaults.get("accelerators") or len(blocks)
        devices = max(int(default), len(blocks))
    return as_problem(graph, devices=devices, **settings, where="certify"), blocks


#: The share of the ladder's time left that a combinatorial level may take (at least 5 s); they
#: stop with their best bound so far, and what one does not use goes to the next.
COMBINATORIAL_SHARE = 0.2

#: The share for the ``sdp`` level: larger, since on sparse graphs of 500 nodes and more it is the
#: strongest level the ladder has (the MIPs after it add nothing there), and it stops once its
#: bound stops rising.
SDP_SHARE = 0.5

#: The share for the ``partition-lp`` level (in the default ladder on graphs of at most
#: :data:`PARTITION_LP_GROUPS` forced groups, or when named): the strongest bound the ladder has on
#: graphs of a few dozen groups, and each value of ``T`` it decides needs many pricings. The MIP
#: levels after it get the rest: where it stops at its time limit they added nothing above it on
#: 60- and 100-node graphs (given half of the time left, it decided fewer ``T``).
PARTITION_LP_SHARE = 0.9

#: The most forced groups on which the default ladder runs ``partition-lp`` (after ``sdp``), when the
#: whole graph's DP cannot run.
PARTITION_LP_GROUPS = 100

#: Relative margin over the plan's cost within which a level's bound is round-off (capped at the
#: cost); above it the bound is not taken.
ABOVE_PLAN = 1e-6


@dataclass
class _Ladder:
    """The levels climbed so far: the best bound, and the cheapest partition a level found (``exact``'s
    MIP, or the optimum ``subgraph`` found on the whole graph) when it is cheaper than the plan."""

    objective: float
    best: float = -math.inf
    better: tuple[tuple[NodeId, ...], ...] | None = None
    better_cost: float | None = None
    better_source: str | None = None
    source: str | None = None

    def proven(self) -> bool:
        """The plan is proven optimal, or a level found a partition the bound proves optimal (the
        bound can rise no further)."""
        if not math.isfinite(self.best):
            return False
        return any(cost is not None and self.best >= cost * (1 - 1e-9) for cost in (self.objective, self.better_cost))

    def known(self) -> float | None:
        """The best bound so far (``None``: none yet), for the next level to start from."""
        return None if self.best == -math.inf else self.best

    def record(self, r: BoundResult) -> None:
        # (a bound above the cost of the plan in hand is no lower bound: a solver's garbage, never
        # taken, so a plan is "optimal" only on a bound that can be one)
        above = math.isfinite(self.objective) and r.bound is not None and \
            r.bound > self.objective * (1 + ABOVE_PLAN) + ABOVE_PLAN
        if r.status != "skipped" and r.bound is not None and r.bound > self.best and not above:
            self.best, self.source = r.bound, r.level
        cheapest = self.objective if self.better_cost is None else self.better_cost
        if r.blocks is not None and r.objective is not None and r.objective < cheapest:
            self.better, self.better_cost, self.better_source = r.blocks, r.objective, r.level


def _verdict(objective: float, ladder: _Ladder) -> tuple[float | None, float | None, Status]:
    """``(objective, lower bound, status)``: the bound capped by the plan's cost."""
    if not math.isfinite(objective):
        return None, (None if ladder.best == -math.inf else ladder.best), "infeasible"
    if ladder.best == -math.inf:
        return objective, None, "feasible"
    lb = min(ladder.best, objective)
    return objective, lb, "optimal" if lb >= objective * (1 - 1e-9) else "feasible"


@reports
def certify(
    graph: Graph | MtppProblem, plan: Any, *, devices: int | None = None, levels: Sequence[str] | str | None = None,
    time_limit: float | None = 600.0, memory: float | None = None, bandwidth: float | None = None,
    reserved_memory: float | None = None, kind: str | None = None, colocate: bool | None = None, solver: str = "cbc",
    threads: int | None = None, workers: int | None = None, gap: float | None = None, seed: int = 0,
    verbose: bool = False, stop_when_proven: bool = True,
    on_level: Callable[[BoundResult, float], None] | None = None, stages: int | None = None,
    fast_memory: float | None = None, improve: bool | float | None = None, progress: Progress = None,
) -> Certificate:
    """Certify an MTPP plan: its cost, the ladder of lower bounds and the ratio.

    Parameters
    ----------
    graph : Graph or MtppProblem
        With a Graph, ``devices`` (default: the graph's ``accelerators``, else the plan's block
        count) and the memory model (``memory``, ``bandwidth``, ``reserved_memory``), ``kind``
        and ``colocate`` make the :class:`~stagecut.mtpp.MtppProblem` (``colocate=False``
        ignores colocation classes, as for a plan made with ``slice_graph(..., colocate=False)``).
        A :class:`~stagecut.mtpp.SlicePlan` brings its own: the device count, device kind,
        colocation and memory model it was solved for are the defaults. An argument given here
        wins; the memory model is taken from the plan as a whole, and only when none of
        ``memory``, ``bandwidth`` and ``reserved_memory`` is given (``memory=math.inf``: no limit;
        ``memory`` without ``bandwidth``: a hard limit).
        With a problem, all of these come from it.
    plan : SlicePlan, any Result, list of blocks or mapping
        The partition to certify (see :func:`plan_blocks`).
    levels : sequence of str, optional
        Names from :data:`~stagecut.mtpp.bounds.LEVELS` (``"simple"``, ``"node-cut"``, ``"crossing"``,
        ``"cover"``, ``"prefix"``, ``"spectral"``, ``"sdp"``, ``"subgraph"``, ``"block"``, ``"bottleneck"``,
        ``"bottleneck-guess"``,
        ``"exact"``), run in this order (default: all of them, weakest first; but with
        ``stop_when_proven``, on a graph with at most 40,000 ideals the default ladder runs
        ``subgraph`` right after ``simple``: its exact DP solves the whole graph in seconds), and
        ``"partition-lp"``
        (:data:`~stagecut.mtpp.bounds.EXTRA_LEVELS`: the LP over every block at once; the
        default ladder runs it after ``sdp`` on a graph of more than 40,000 ideals and at most
        :data:`PARTITION_LP_GROUPS` forced groups, elsewhere it runs only when named). The MIP
        levels start from the best bound of the levels before them; the plan's cost (when it is
        finite) is the known cost of every MIP level but ``exact`` (``block`` and ``partition-lp``
        search below it), and its blocks ``partition-lp``'s first columns. Levels given (even all of
        :data:`~stagecut.mtpp.bounds.LEVELS`) run as given; ``None`` (the default) is the default ladder.
    time_limit : float, optional
        Budget in seconds for the whole ladder; each combinatorial level gets a fifth of what is
        left (``sdp``: half of what is left; at least 5 s; stopped there it gives its best bound so
        far, status ``"time_limit"``), ``partition-lp`` nine tenths of what is left (at least 5 s;
        it too gives its best bound so far), each MIP level an equal share of what is left with the
        levels after it; the last level gets all of it, and time a level does not use goes to the
        next. A level with no time left is ``"skipped"``.
    solver, threads, workers, gap, seed, verbose
        MIP options (see :func:`~stagecut.mtpp.bounds.mtpp_bound`).
    stop_when_proven : bool
        Skip the remaining levels once a bound reaches the plan's cost, or the cost of a cheaper
        partition a level found (then the bound is the optimum; default).
    on_level : callable, optional
        Called as ``on_level(result, best_bound_so_far)`` after each level (the CLI prints the
        ladder as it climbs).
    stages, fast_memory
        Deprecated names of ``devices`` and ``memory``.
    improve : bool or float, optional
        First improve the plan by exact re-splits of two blocks at a time, then moves of single
        groups (:func:`~stagecut.mtpp.improve.improve_plan`) for at most this many seconds (``True``:
        until no re-split improves it or :data:`~stagecut.mtpp.improve.IMPROVE_WINDOWS` pairs of
        blocks were tried, at most 2 s under a ``time_limit``; default ``None``/``False``: certify
        the plan as given), inside ``time_limit``; the
        certificate is then about the improved plan (never costlier): ``stats["found_by"]`` is
        ``"improve"`` when that lowered its cost, else ``"plan"``, and
        ``stats["start_objective"]`` the given plan's cost.
    progress : bool or callable, optional
        Progress reports (:mod:`stagecut.progress`): a callable receives a
        :class:`~stagecut.progress.ProgressEvent` about four times a second while the core works or a MIP solves
        (an exception it raises stops the call); ``True`` shows a tqdm bar on stderr once the call
        has run 2 s, if stderr is a terminal; ``None`` (default): none.

    Returns
    -------
    Certificate

    Raises
    ------
    InvalidArgumentError
        An unknown level, a bad time limit or MIP option, a plan that cannot be read, settings
        given with an MtppProblem.
    InvalidGraphError
        The plan is not a valid partition (a node missing or repeated, a split colocation class,
        a cyclic quotient, more blocks than devices).
    SolverError, BackendUnavailableError
        From the MIP solver (see :func:`~stagecut.mtpp.bounds.mtpp_bound`).

    Examples
    --------
    >>> from stagecut.graph import Graph
    >>> cert = certify(Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5), [[0], [1, 2, 3]], devices=2)
    >>> cert.objective, cert.lower_bound, cert.status, cert.best_objective
    (6.5, 5.5, 'feasible', 5.5)
    """
    t0 = time.perf_counter()
    todo = LEVELS if levels is None else _check_levels(levels)
    if time_limit is not None:
        check_number(time_limit, "time_limit (seconds)", allow_inf=True, positive=True, error=InvalidArgumentError)
    devices = renamed("certify", "devices", devices, "stages", stages)
    settings = {"memory": renamed("certify", "memory", memory, "fast_memory", fast_memory), "bandwidth": bandwidth,
                "reserved_memory": reserved_memory, "kind": kind, "colocate": colocate}
    budget = _improve_budget(improve)
    if isinstance(plan, SlicePlan) and isinstance(graph, Graph):
        devices, settings = solved_for(plan, devices, settings)
    problem, blocks = _problem(graph, lambda g: plan_blocks(g, plan), devices, settings)
    ev = evaluate(problem, blocks)
    found: dict[str, Stat] = {}
    notes: list[str] = []
    if budget is not None:
        ev, found, notes = _improve(problem, ev, budget, time_limit, t0, improve_windows(improve))
    if levels is None:  # (the default ladder: levels given are run as given)
        todo = _default_ladder(problem, stop_when_proven)
    ladder = _Ladder(ev.objective)
    mip = {"gap": gap, "threads": threads, "seed": seed, "solver": solver, "workers": workers, "verbose": verbose}
    in_hand = [list(s.nodes) for s in ev.stages] if math.isfinite(ev.objective) else None
    table = _climb(problem, ladder, todo, time_limit, t0, stop_when_proven, on_level, mip, in_hand)
    cert = _certificate(problem, ev.stages, ladder, table, seed, t0)
    if budget is None:
        return cert
    return dataclasses.replace(cert, stats={**cert.stats, **found}, notes=(*notes, *cert.notes))


def _default_ladder(problem: MtppProblem, stop_when_proven: bool) -> tuple[str, ...]:
    """The default ladder for ``problem``: :data:`~stagecut.mtpp.bounds.LEVELS`, in that order but

    - on a graph with at most :data:`~stagecut.mtpp.slicegraph.AUTO_IDEALS` ideals, with
      ``stop_when_proven``, ``subgraph`` right after ``simple``: its exact DP then solves the whole
      graph in seconds, and its optimum ends the ladder (or bounds the plan) before the slower levels;
    - on a graph with more ideals and at most :data:`PARTITION_LP_GROUPS` forced groups, with
      ``partition-lp`` after ``sdp``: there it is the strongest level, and the MIP levels after it
      start from its bound."""
    try:
        Units(problem, True).count_ideals(AUTO_IDEALS)
    except TooManyIdealsError:
        if len(set(forced_groups(problem))) > PARTITION_LP_GROUPS:
            return LEVELS
        at = LEVELS.index("sdp") + 1
        return (*LEVELS[:at], "partition-lp", *LEVELS[at:])
    if not stop_when_proven:
        return LEVELS
    return ("simple", "subgraph", *(lv for lv in LEVELS if lv not in ("simple", "subgraph")))


def _improve_budget(improve: Any) -> float | None:
    """Seconds of re-splits before the ladder (``None``: none)."""
    if improve is None or improve is False:
        return None
    if improve is True:
        return IMPROVE_SECONDS
    return check_number(improve, "improve (seconds, True or False)", positive=True, allow_inf=True,
                        error=InvalidArgumentError)


def _improve(problem: MtppProblem, ev: MtppEvaluation, budget: float, time_limit: float | None,
             t0: float, windows: int | None = None) -> tuple[MtppEvaluation, dict[str, Stat], list[str]]:
    """The plan ``ev`` improved by :func:`~stagecut.mtpp.improve.improve_plan` (re-scored; kept
    only when cheaper), the stats and notes saying so."""
    stats: dict[str, Stat] = {"found_by": "plan", "start_objective": ev.objective}
    if not math.isfinite(ev.objective):
        return ev, stats, []
    left = None if time_limit is None or math.isinf(time_limit) else float(time_limit) - (time.perf_counter() - t0)
    # (leave the ladder time; ``True`` without a time limit: capped by work, not time)
    seconds = (math.inf if windows is not None else budget) if left is None else min(budget, max(0.0, 0.5 * left))
    if seconds <= 0:
        return ev, stats, ["no time left to improve the plan by re-splits of two blocks"]
    imp = improve_plan(problem, list(ev.stages), time_limit=None if math.isinf(seconds) else seconds,
                       max_windows=windows)
    better = evaluate(problem, [list(s.nodes) for s in imp.stages])
    stats["improve_moves"] = imp.stats.get("moves", 0)
    stats["improve_group_moves"] = imp.stats.get("group_moves", 0)
    if not better.objective < ev.objective:
        return ev, stats, []
    stats["found_by"] = "improve"
    return better, stats, [f"the plan was improved by re-splits of two blocks and moves of single groups before it "
                           f"was certified: its cost "
                           f"{ev.objective:.9g} -> {better.objective:.9g}"]


def _climb(problem: MtppProblem, ladder: _Ladder, todo: tuple[str, ...], time_limit: float | None, t0: float,
           stop_when_proven: bool, on_level: Callable[[BoundResult, float], None] | None,
           mip: dict[str, Any], plan: list[list[NodeId]] | None = None) -> tuple[BoundResult, ...]:
    """Run the levels in order within the budget; skipped levels get a row too. ``plan``: the
    plan's blocks, when it is feasible (the MIP levels' known cost)."""
    table = []
    for i, lv in enumerate(todo):
        left = None if time_limit is None else float(time_limit) - (time.perf_counter() - t0)
        if stop_when_proven and ladder.proven():
            plan_proven = ladder.best >= ladder.objective * (1 - 1e-9)
            r = BoundResult(level=lv, bound=None, status="skipped", seconds=0.0,
                            reason="plan already proven optimal" if plan_proven else
                            f"the bound is the optimum: the {ladder.better_source} level's partition meets it")
        elif left is not None and left <= 0.05:
            r = BoundResult(level=lv, bound=None, status="skipped", seconds=0.0, reason="no time left")
        else:
            # (the plan is the known cost of every MIP level but exact, and partition-lp's first
            # columns; exact gets no MIP start from it: with CBC that cost it its bound at short budgets)
            extra: dict[str, Any] = {} if lv in COMBINATORIAL else {"known_bound": ladder.known()}
            if lv not in COMBINATORIAL and lv != "exact" and plan is not None:
                extra["start"] = plan
            if left is None or i == len(todo) - 1:
                pass  # (the last level: all of it)
            elif lv in COMBINATORIAL:  # (they stop with their best so far: leave the next levels time)
                left = min(left, max(5.0, (SDP_SHARE if lv == "sdp" else COMBINATORIAL_SHARE) * left))
            elif lv == "partition-lp":  # (it too stops with its best bound so far)
                left = min(left, max(5.0, PARTITION_LP_SHARE * left))
            else:  # (an equal share with the levels after it: none starves the next)
                left /= len(todo) - i
            r = mtpp_bound(problem, level=lv, time_limit=left, **mip, **extra)
        ladder.record(r)
        table.append(r)
        if on_level is not None:
            on_level(r, ladder.best)
    return tuple(table)


def _certificate(problem: MtppProblem, stages: tuple[Stage, ...], ladder: _Ladder, table: tuple[BoundResult, ...],
                 seed: int, t0: float) -> Certificate:
    objective, lb, status = _verdict(ladder.objective, ladder)
    best = evaluate(problem, ladder.better) if ladder.better is not None else None
    if best is not None and objective is not None and best.objective >= objective * (1 - 1e-9):
        best = None  # the level's partition is no cheaper once re-scored (round-off in its objective)
    notes = []
    if objective is None:
        notes.append("the plan breaks the hard memory limit (a block costs inf)")
    if best is not None:
        who = "the exact MIP" if ladder.better_source == "exact" else f"the {ladder.better_source} level"
        notes.append(f"{who} found a cheaper partition (cost {best.objective:.6g}): see best_stages")
    run = sum(r.status != "skipped" for r in table)
    return Certificate(
        objective=objective, status=status, lower_bound=lb, seed=seed, runtime_s=time.perf_counter() - t0,
        stats={"levels_run": run, "levels_skipped": len(table) - run}, stages=stages, notes=tuple(notes),
        levels=table, devices=problem.devices, memory=problem.memory, bandwidth=problem.bandwidth,
        reserved_memory=problem.reserved_memory, colocate=problem.colocate,
        best_stages=best.stages if best is not None else (),
        best_objective=best.objective if best is not None else None,
        bound_source=ladder.source if lb is not None else None,
    )
