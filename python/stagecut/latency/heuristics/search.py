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
makes it depend on the machine's speed).

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
import time
from collections.abc import Callable, Sequence

import numpy as np

from stagecut._deadline import check_time_limit, remaining
from stagecut.errors import InvalidArgumentError
from stagecut.latency.heuristics import constructive, memaware
from stagecut.latency.heuristics.constructive import Units, _check_problem, finished, no_answer
from stagecut.latency.model._fast import Evaluator
from stagecut.latency.model.evaluate import TOL, check_placement
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.progress import Progress, Ticker, reports
from stagecut.results import Status
from stagecut.validate import check_int, check_number, shown

__all__ = ["simulated_annealing", "evolutionary", "local_search", "start_within", "DEFAULT_EVALUATIONS", "Start"]

#: The evaluation budget of :func:`simulated_annealing` and :func:`evolutionary` when neither
#: ``max_evaluations`` nor ``time_limit`` is given.
DEFAULT_EVALUATIONS = 10_000

#: Moves local search evaluates in one batch between two looks at the clock.
_CHUNK = 64

#: What ``start=`` accepts.
Start = Schedule | Sequence[int] | np.ndarray | None


#: No constructive start is begun past this share of a search's time limit (one begun before
#: may take as long again on a large graph: the search must still end in time).
START_SHARE = 0.4

#: The constructive starts, cheapest first (as measured on 10,000-node graphs); the ties between
#: equal makespans go to the earlier one of :data:`_TIE_ORDER`, as in
#: :func:`~stagecut.latency.heuristics.memaware.best_start`.
_CHEAPEST_FIRST = ("best_device", "greedy", "met", "heft", "m_chain", "m_topo", "m_greedy", "m_heft", "pcie_asap")
_TIE_ORDER = ("best_device", "met", "greedy", "heft", "m_heft", "m_greedy", "m_topo", "m_chain", "pcie_asap")
_PLAIN = frozenset({"best_device", "met", "greedy", "heft"})


def start_within(problem: LatencyProblem, stop: Callable[[], bool], *, plain_only: bool = False) -> Schedule:
    """The shortest schedule of the start pool built before ``stop()`` says the time is up: the
    constructive heuristics run cheapest first, and the pool is what is done when the time runs
    out (at least one start that fits, when one exists; the pool of
    :func:`~stagecut.latency.heuristics.memaware.best_start`, with the same ties, when the time does not
    run out). ``plain_only``: the plain constructive heuristics only (the pool of
    :func:`~stagecut.latency.heuristics.constructive.best_constructive`). When none fits: the first
    one's answer (status ``"infeasible"`` or ``"unknown"``)."""
    found: dict[str, Schedule] = {}
    first: Schedule | None = None
    for name in _CHEAPEST_FIRST:
        if plain_only and name not in _PLAIN:
            continue
        if found and stop():
            break
        s = getattr(constructive if name in _PLAIN else memaware, name)(problem)
        if first is None:
            first = s
        if s is not None and s.objective is not None:
            found[name] = s
    if not found:
        assert first is not None
        return first
    pool = [found[k] for k in _TIE_ORDER if k in found]
    return min(pool, key=lambda s: s.objective if s.objective is not None else math.inf)


class _Budget:
    """Evaluations and seconds left; remembers whether the clock stopped the search."""

    def __init__(self, time_limit: float | None, max_evaluations: int | None, default: int | None) -> None:
        self.t0 = time.perf_counter()
        limit = check_time_limit(time_limit)
        outer = remaining()
        limits = [x for x in (limit, outer) if x is not None and math.isfinite(x)]
        self.seconds = min(limits) if limits else None
        self.deadline = self.t0 + self.seconds if self.seconds is not None else math.inf
        if max_evaluations is not None:
            self.max_evaluations: int | None = check_int(max_evaluations, "max_evaluations", minimum=1)
        else:
            self.max_evaluations = default if self.seconds is None else None
        self.evaluations = 0
        self.timed_out = False

    def spent(self) -> bool:
        """Is the budget used up (and if by the clock, remember it)?"""
        if self.max_evaluations is not None and self.evaluations >= self.max_evaluations:
            return True
        return self.out_of_time()

    def out_of_time(self) -> bool:
        """Has the clock run out (remembered)?"""
        if time.perf_counter() >= self.deadline:
            self.timed_out = True
        return self.timed_out

    def past_start_share(self) -> bool:
        """Is the clock past :data:`START_SHARE` of the time limit (no further constructive start)?"""
        if self.seconds is None:
            return False
        return self.out_of_time() or time.perf_counter() - self.t0 >= START_SHARE * self.seconds

    def left(self) -> int | None:
        return None if self.max_evaluations is None else self.max_evaluations - self.evaluations

    def progress(self) -> float:
        """How much of the budget is used, in [0, 1] (evaluations if bounded, else time)."""
        if self.max_evaluations is not None:
            return min(1.0, self.evaluations / self.max_evaluations)
        if self.seconds is not None:
            return min(1.0, (time.perf_counter() - self.t0) / self.seconds)
        return 0.0


class _State:
    """The start of a search and what every search needs: units, evaluator, fitness."""

    def __init__(self, problem: LatencyProblem, start: Start, method: str, seed: int | None,
                 budget: _Budget | None = None) -> None:
        self.t0 = time.perf_counter()
        self.problem = _check_problem(problem)
        self.method = method
        self.seed = seed
        self.units = Units(problem)
        self.ev = Evaluator(problem)
        self.start_schedule: Schedule | None = None
        self.failed: Schedule | None = None
        self.tick: Ticker | None = None   # made at the first evaluation, when the budget is known
        self.best_seen = math.inf         # the least makespan so far: evaluated, or the start schedule's
        proof = self.units.proof()
        if proof is not None:
            self.failed = no_answer(problem, self.units, method, proof, self.t0, seed)
            return
        if start is None:
            # (the constructive starts share the search's time limit: cheapest first, at least one,
            # none begun past START_SHARE of it, so that the last one begun ends in time)
            start = start_within(problem, (lambda: False) if budget is None else budget.past_start_share)
            if start.objective is None:
                self.failed = no_answer(problem, self.units, method, "no constructive heuristic found a "
                                        "placement that fits, and no start was given", self.t0, seed)
                return
        if isinstance(start, Schedule):
            if start.objective is None:
                raise InvalidArgumentError("start: the schedule has no placement (status "
                                           f"{start.status!r})")
            self.start_schedule = start
            self.best_seen = start.objective
            dev = self._positions(start)
        else:
            try:
                dev = check_placement(problem, start)
            except InvalidArgumentError as e:
                raise InvalidArgumentError(f"start: {e}") from None
        self.udev = self.units.of_placement(dev, "start")
        loads = self.units.loads(self.udev)
        over = np.flatnonzero(loads > problem.capacity)
        if over.size:
            d = int(over[0])
            raise InvalidArgumentError(f"start: {problem.devices.names[d]} would hold {loads[d]:g} bytes, over "
                                       f"its {problem.capacity[d]:g}")
        self.movable = [u for u in range(len(self.units)) if self.units.allowed[u].size > 1]

    def _positions(self, s: Schedule) -> np.ndarray:
        names = self.problem.devices.names
        out = np.empty(len(self.problem), dtype=np.int64)
        for i, v in enumerate(self.problem.ids):
            if v not in s.placement or s.placement[v] not in names:
                raise InvalidArgumentError(f"start: node {shown(v)} has no device of this problem in the "
                                           "schedule")
            out[i] = names.index(s.placement[v])
        return check_placement(self.problem, out)

    def fitness(self, udev: np.ndarray, budget: _Budget) -> float:
        """The makespan of the string ``udev`` (one evaluation, reported as progress). Every string
        evaluated fits in memory, so the least one so far (or the start schedule's makespan, in its
        own order, if less) is the search's best so far."""
        budget.evaluations += 1
        f = self.ev.makespan(self.units.placement(udev))
        self.report(budget, f)
        return f

    def report(self, budget: _Budget, f: float) -> None:
        """Progress after evaluations whose best makespan is ``f``: the evaluations done and the
        best so far (rate-limited by :class:`~stagecut.progress.Ticker`)."""
        if f < self.best_seen:
            self.best_seen = f
        if self.tick is None:
            self.tick = Ticker(self.method, budget.max_evaluations)
        self.tick(budget.evaluations, self.best_seen)

    def result(self, best: np.ndarray, best_f: float, budget: _Budget, stats: dict[str, float]) -> Schedule:
        """The best string in rank round-robin order, or the start schedule if that is shorter
        (reported as the final progress)."""
        out = self._result(best, best_f, budget, stats)
        if self.tick is None:
            self.tick = Ticker(self.method, budget.max_evaluations)
        self.tick.final(budget.evaluations, out.objective)
        return out

    def _result(self, best: np.ndarray, best_f: float, budget: _Budget, stats: dict[str, float]) -> Schedule:
        problem = self.problem
        status: Status = "time_limit" if budget.timed_out else "feasible"
        stats = {"evaluations": budget.evaluations, **stats}
        s0 = self.start_schedule
        if s0 is not None and s0.objective is not None and s0.objective < best_f - TOL * max(1.0, best_f):
            index = problem.index
            names = problem.devices.names
            order = [[index[v] for v in s0.order.get(name, ())] for name in names]
            return finished(problem, self._positions(s0), order, method=self.method, t0=self.t0, status=status,
                            seed=self.seed, stats=stats,
                            notes=(f"the start ({s0.method}, in its own order) is shorter than every string "
                                   "found in rank round-robin order",))
        dev = self.units.placement(best)
        return finished(problem, dev, self.ev.rank_round_robin(dev), method=self.method, t0=self.t0,
                        status=status, seed=self.seed, stats=stats)


def _random_move(state: _State, loads: np.ndarray, cur: np.ndarray, rng: random.Random
                 ) -> tuple[int, int, int] | None:
    """A random movable unit ``u``, its device ``old`` and a random other device ``d`` with room
    for it, as ``(u, old, d)``; ``None`` when the drawn unit fits nowhere else."""
    u = state.movable[rng.randrange(len(state.movable))]
    old = int(cur[u])
    to = _roomy(state, loads, u, old)
    return None if not to else (u, old, to[rng.randrange(len(to))])


def _seed(seed: object) -> int:
    return check_int(seed, "seed")


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
    seed = _seed(seed)
    temp = check_number(temperature, "temperature", positive=True, error=InvalidArgumentError)
    budget = _Budget(time_limit, max_evaluations, DEFAULT_EVALUATIONS)
    state = _State(problem, start, "sa", seed, budget)
    if state.failed is not None:
        return state.failed
    rng = random.Random(seed)
    cur = state.udev.copy()
    cur_f = state.fitness(cur, budget)
    best, best_f = cur.copy(), cur_f
    loads = state.units.loads(cur)
    t_hi = temp * cur_f
    t_lo = t_hi * 1e-3
    accepted = improved = attempts = 0
    while state.movable and t_hi > 0 and not budget.spent() and attempts < 100 * (budget.evaluations + 10):
        attempts += 1
        move = _random_move(state, loads, cur, rng)
        if move is None:
            continue
        u, old, d = move
        cur[u] = d
        f = state.fitness(cur, budget)
        t = t_hi * (t_lo / t_hi) ** budget.progress()
        if f <= cur_f or rng.random() < math.exp(-(f - cur_f) / t):
            accepted += 1
            cur_f = f
            loads[old] -= state.units.memory[u]
            loads[d] += state.units.memory[u]
            if f < best_f:
                best, best_f = cur.copy(), f
                improved += 1
        else:
            cur[u] = old
    return state.result(best, best_f, budget, {"accepted": accepted, "improvements": improved})


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
    seed = _seed(seed)
    budget = _Budget(time_limit, max_evaluations, DEFAULT_EVALUATIONS)
    state = _State(problem, start, "ea", seed, budget)
    if state.failed is not None:
        return state.failed
    rng = random.Random(seed)
    units = state.units
    parent = state.udev.copy()
    parent_f = state.fitness(parent, budget)
    m = len(state.movable)
    near = _neighbours(state)
    weights = _speed_weights(state)
    improved = attempts = 0
    while m and not budget.spent() and attempts < 100 * (budget.evaluations + 10):
        attempts += 1
        child = parent.copy()
        chosen = [u for u in state.movable if rng.random() < 1.0 / m] or [state.movable[rng.randrange(m)]]
        for u in chosen:
            ok = units.allowed[u]
            d = -1
            if near[u].size and rng.random() < 0.5:
                d = int(child[near[u][rng.randrange(near[u].size)]])
                if d not in ok:
                    d = -1
            if d < 0 or d == child[u]:
                w = np.where(ok == child[u], 0.0, weights[u])
                d = int(rng.choices(ok.tolist(), weights=w.tolist())[0])
            child[u] = d
        if not units.fits(child):
            continue
        f = state.fitness(child, budget)
        if f <= parent_f:
            improved += f < parent_f
            parent, parent_f = child, f
    return state.result(parent, parent_f, budget, {"improvements": improved})


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
    seed = _seed(seed)
    budget = _Budget(time_limit, max_evaluations, None)
    state = _State(problem, start, "local", seed, budget)
    if state.failed is not None:
        return state.failed
    rng = random.Random(seed)
    units = state.units
    cur = state.udev.copy()
    cur_f = state.fitness(cur, budget)
    loads = units.loads(cur)
    moves = 0
    optimum = False
    while not budget.spent():
        cand = [(u, d) for u in state.movable for d in _roomy(state, loads, u, int(cur[u]))]
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
            u, d = cand[int(ties[rng.randrange(ties.size)])]
            loads[cur[u]] -= units.memory[u]
            loads[d] += units.memory[u]
            cur[u], cur_f = d, low
            moves += 1
        elif spans.size == len(cand):
            optimum = True
            break
    return state.result(cur, cur_f, budget, {"moves": moves, "local_optimum": int(optimum)})
