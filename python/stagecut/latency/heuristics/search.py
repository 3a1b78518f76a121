"""Search over placements: simulated annealing, the biased (1+1) EA and local search.

All three search *device strings*: one device per placement unit (a node, or a whole colocation
class: see :class:`~stagecut.latency.heuristics.constructive.Units`), units in the BFS order of their first
node. A string's fitness is its makespan in the rank round-robin order, computed by
:class:`~stagecut.latency.model._fast.Evaluator` (one *evaluation*). Every string visited respects the
memory limits: a move or mutation that would put a device over its capacity is dropped without
being evaluated.

Each search starts from a placement (``start``: a :class:`Schedule`, a device position per
node, or by default the best of the constructive heuristics,
:func:`~stagecut.latency.heuristics.memaware.best_start`: the plain and the memory-aware constructive
heuristics, built cheapest first under the search's time limit: none begun past
:data:`START_SHARE` of it, at least one, :func:`start_within`) and never returns anything worse: when
the start is a schedule with its own order (HEFT's, say) that beats the best string found in
rank round-robin order, that schedule is returned (a note says so).

Budgets: ``max_evaluations`` (fitness evaluations) and ``time_limit`` (seconds, also bounded by
an enclosing :func:`stagecut._deadline.deadline`); a search stopped by the time limit returns its
best with status ``"time_limit"``, otherwise ``"feasible"``. With the same seed and an
evaluation budget the result is the same on every run (a time limit that stops the search first
makes it depend on the machine's speed). The answer's ``stats["found_by"]`` names the search, or
the start's method (``"start"`` for a bare placement) when the search did not improve on it; the
searches share their driver (:class:`~stagecut.latency.heuristics.driver.Walk`) with
:func:`~stagecut.latency.heuristics.lns.lns` and
:func:`~stagecut.latency.heuristics.partition_baselines.mcmc`.

Progress (:mod:`stagecut.progress`): inside a ``progress=`` call (:func:`stagecut.latency.place`)
or with ``progress=`` given here, a search reports phase ``"sa"``, ``"ea"``, ``"local"`` (and
``"mcmc"`` for :func:`~stagecut.latency.heuristics.partition_baselines.mcmc`): the evaluations done out of
``max_evaluations`` (``total`` ``None`` under a time limit alone) with the best makespan found
so far (the start schedule's, in its own order, when that is shorter), at most every
:data:`~stagecut.progress.REPORT_EVERY` seconds, and a final report whose ``best`` is the returned
schedule's makespan (re-scored: when the best string ties with the start schedule, the two may
differ by round-off). Reporting draws no random numbers: a search gives the same schedule with or
without it.

:func:`simulated_annealing`
    Moves one random unit to another random device it can go to; a worse string is accepted
    with probability ``exp(-delta / T)``, ``T`` cooling geometrically from ``temperature``
    times the start's makespan to a thousandth of that over the budget.
:func:`evolutionary`
    The biased (1+1) EA: the offspring changes each unit's device with probability ``1/m`` (``m``
    the units that can move; at least one changes), and replaces the parent when it is no worse.
    The mutation is *biased*: half of the time a changed unit joins the device of a random unit
    it exchanges data with (saving the transfer), otherwise it draws a device with probability
    inversely proportional to its time there.
:func:`local_search`
    Best-improvement descent: every single-unit move is evaluated (in one batch) and the best
    strictly improving one is made, until none improves (ties: a seeded random choice).
"""

from __future__ import annotations

import math
import random

import numpy as np

from stagecut.errors import InvalidArgumentError
from stagecut.latency.heuristics.driver import START_SHARE, Start, Walk, _State, start_within
from stagecut.latency.model.evaluate import TOL
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.progress import Progress, reports
from stagecut.validate import check_number

__all__ = ["simulated_annealing", "evolutionary", "local_search", "start_within", "DEFAULT_EVALUATIONS", "Start",
           "START_SHARE"]

#: The evaluation budget of :func:`simulated_annealing` and :func:`evolutionary` when neither
#: ``max_evaluations`` nor ``time_limit`` is given.
DEFAULT_EVALUATIONS = 10_000

#: Moves local search evaluates in one batch between two looks at the clock.
_CHUNK = 64


def _random_move(state: _State, loads: np.ndarray, cur: np.ndarray, rng: random.Random
                 ) -> tuple[int, int, int] | None:
    """A random movable unit ``u``, its device ``old`` and a random other device ``d`` with room
    for it, as ``(u, old, d)``; ``None`` when the drawn unit fits nowhere else."""
    u = state.movable[rng.randrange(len(state.movable))]
    old = int(cur[u])
    to = _roomy(state, loads, u, old)
    return None if not to else (u, old, to[rng.randrange(len(to))])


def _roomy(state: _State, loads: np.ndarray, u: int, current: int) -> list[int]:
    """The devices unit ``u`` can move to from ``current`` without breaking a memory limit."""
    cap = state.problem.capacity
    m = state.units.memory[u]
    return [int(d) for d in state.units.allowed[u] if d != current and loads[d] + m <= cap[d]]


@reports
def simulated_annealing(problem: LatencyProblem, *, start: Start = None, seed: int = 0,
                        time_limit: float | None = None, max_evaluations: int | None = None,
                        temperature: float = 0.05, progress: Progress = None) -> Schedule:
    """Simulated annealing over device strings (see the module docs).

    Parameters
    ----------
    problem : LatencyProblem
    start : Schedule, sequence of int or None
        The start placement (default: the best schedule of the start pool,
        :func:`~stagecut.latency.heuristics.memaware.best_start`).
    seed : int
        Seed of the random moves.
    time_limit : float, optional
        Seconds (``None``: none). Without ``max_evaluations`` the temperature then cools over
        the time limit.
    max_evaluations : int, optional
        Fitness evaluations (default :data:`DEFAULT_EVALUATIONS` when there is no time limit).
    temperature : float
        Initial temperature as a fraction of the start's makespan.
    progress : bool or callable, optional
        Progress reports, phase ``"sa"`` (see the module docs and :mod:`stagecut.progress`).

    Returns
    -------
    Schedule
        Method ``"sa"``, status ``"feasible"`` or ``"time_limit"``; never worse than the start.
        No schedule (status ``"infeasible"``/``"unknown"``) when nothing fits and no start is
        given.

    Raises
    ------
    InvalidArgumentError
        A bad seed, time limit, budget or temperature; a start that is not a placement of this
        problem, splits a colocation class or breaks a memory limit.
    """
    temp = check_number(temperature, "temperature", positive=True, error=InvalidArgumentError)
    w = Walk(problem, start, "sa", seed, time_limit, max_evaluations, DEFAULT_EVALUATIONS)
    if w.failed is not None:
        return w.failed
    t_hi = temp * w.begin()
    t_lo = t_hi * 1e-3
    accepted = improved = 0
    while t_hi > 0 and w.going():
        move = _random_move(w.state, w.loads, w.cur, w.rng)
        if move is None:
            continue
        u, old, d = move
        f = w.try_move(u, d)
        t = t_hi * (t_lo / t_hi) ** w.budget.progress()
        if f <= w.cur_f or w.rng.random() < math.exp(-(f - w.cur_f) / t):
            accepted += 1
            improved += w.keep(u, old, d, f)
        else:
            w.undo(u, old)
    return w.result({"accepted": accepted, "improvements": improved})


def _neighbours(state: _State) -> list[np.ndarray]:
    """Per unit, the units it exchanges data with (for the EA's biased mutation)."""
    units, problem = state.units, state.problem
    out: list[set[int]] = [set() for _ in range(len(units))]
    for i in range(len(problem)):
        for s in problem.succ[i]:
            a, b = int(units.unit_of[i]), int(units.unit_of[s])
            if a != b:
                out[a].add(b)
                out[b].add(a)
    return [np.array(sorted(x), dtype=np.int64) for x in out]


def _speed_weights(state: _State) -> list[np.ndarray]:
    """Per unit, weights of its allowed devices inversely proportional to its time there."""
    out = []
    for u, ok in enumerate(state.units.allowed):
        t = state.units.times[u, ok]
        out.append(1.0 / (t + 1e-9 * max(1.0, float(t.max()))))
    return out


@reports
def evolutionary(problem: LatencyProblem, *, start: Start = None, seed: int = 0, time_limit: float | None = None,
                 max_evaluations: int | None = None, progress: Progress = None) -> Schedule:
    """The biased (1+1) evolutionary algorithm over device strings (see the module docs).

    Parameters
    ----------
    problem : LatencyProblem
    start : Schedule, sequence of int or None
        The first parent (default: the best schedule of the start pool,
        :func:`~stagecut.latency.heuristics.memaware.best_start`).
    seed : int
        Seed of the mutations.
    time_limit : float, optional
        Seconds (``None``: none).
    max_evaluations : int, optional
        Fitness evaluations (default :data:`DEFAULT_EVALUATIONS` when there is no time limit).
    progress : bool or callable, optional
        Progress reports, phase ``"ea"`` (see the module docs and :mod:`stagecut.progress`).

    Returns
    -------
    Schedule
        Method ``"ea"``, status ``"feasible"`` or ``"time_limit"``; never worse than the start.
        No schedule (status ``"infeasible"``/``"unknown"``) when nothing fits and no start is
        given.

    Raises
    ------
    InvalidArgumentError
        A bad seed, time limit or budget; a start that is not a placement of this problem,
        splits a colocation class or breaks a memory limit.
    """
    w = Walk(problem, start, "ea", seed, time_limit, max_evaluations, DEFAULT_EVALUATIONS)
    if w.failed is not None:
        return w.failed
    rng, units, movable = w.rng, w.units, w.state.movable
    w.begin()
    m = len(movable)
    near = _neighbours(w.state)
    weights = _speed_weights(w.state)
    improved = 0
    while w.going():
        child = w.cur.copy()
        chosen = [u for u in movable if rng.random() < 1.0 / m] or [movable[rng.randrange(m)]]
        for u in chosen:
            ok = units.allowed[u]
            d = -1
            if near[u].size and rng.random() < 0.5:
                d = int(child[near[u][rng.randrange(near[u].size)]])
                if d not in ok:
                    d = -1
            if d < 0 or d == child[u]:
                wt = np.where(ok == child[u], 0.0, weights[u])
                d = int(rng.choices(ok.tolist(), weights=wt.tolist())[0])
            child[u] = d
        if not units.fits(child):
            continue
        f = w.fitness(child)
        if f <= w.cur_f:
            improved += w.replace(child, f)
    return w.result({"improvements": improved}, current=True)


@reports
def local_search(problem: LatencyProblem, *, start: Start = None, seed: int = 0, time_limit: float | None = None,
                 max_evaluations: int | None = None, progress: Progress = None) -> Schedule:
    """Best-improvement local search over single-unit moves (see the module docs), until no
    move improves or the budget is spent.

    Parameters
    ----------
    problem : LatencyProblem
    start : Schedule, sequence of int or None
        The start placement (default: the best schedule of the start pool,
        :func:`~stagecut.latency.heuristics.memaware.best_start`).
    seed : int
        Seed of the choice among equally good best moves.
    time_limit : float, optional
        Seconds (``None``: none).
    max_evaluations : int, optional
        Fitness evaluations (``None``: until a local optimum).
    progress : bool or callable, optional
        Progress reports, phase ``"local"`` (see the module docs and :mod:`stagecut.progress`).

    Returns
    -------
    Schedule
        Method ``"local"``, status ``"feasible"`` (a local optimum, or the evaluation budget
        spent: ``stats["local_optimum"]`` says which) or ``"time_limit"``; never worse than the
        start. No schedule (status ``"infeasible"``/``"unknown"``) when nothing fits and no
        start is given.

    Raises
    ------
    InvalidArgumentError
        A bad seed, time limit or budget; a start that is not a placement of this problem,
        splits a colocation class or breaks a memory limit.
    """
    w = Walk(problem, start, "local", seed, time_limit, max_evaluations, None)
    if w.failed is not None:
        return w.failed
    state, budget, units = w.state, w.budget, w.units
    w.begin()
    moves = 0
    optimum = False
    while not budget.spent():
        cur, cur_f = w.cur, w.cur_f
        cand = [(u, d) for u in state.movable for d in _roomy(state, w.loads, u, int(cur[u]))]
        if not cand:
            optimum = True
            break
        left = budget.left()
        todo = len(cand) if left is None else min(len(cand), left)
        parts = []
        for k in range(0, todo, _CHUNK):
            chunk = cand[k:min(k + _CHUNK, todo)]
            rows = np.repeat(cur[None, :], len(chunk), axis=0)
            rows[np.arange(len(chunk)), [u for u, _ in chunk]] = [d for _, d in chunk]
            budget.evaluations += len(chunk)
            parts.append(state.ev.makespans(rows[:, units.unit_of]))
            state.report(budget, cur_f)  # a descent: its current string is its best
            if budget.out_of_time():
                break
        spans = np.concatenate(parts)
        low = float(spans.min())
        if low < cur_f - TOL * max(1.0, cur_f):
            ties = np.flatnonzero(spans <= low)
            u, d = cand[int(ties[w.rng.randrange(ties.size)])]
            w.keep(u, int(cur[u]), d, low)
            moves += 1
        elif spans.size == len(cand):
            optimum = True
            break
    return w.result({"moves": moves, "local_optimum": int(optimum)}, current=True)
