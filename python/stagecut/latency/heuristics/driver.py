"""The one driver of the searches over device strings (:mod:`stagecut.latency.heuristics.search`'s
simulated annealing, evolutionary algorithm and local search, :func:`~stagecut.latency.heuristics.lns.lns`
and :func:`~stagecut.latency.heuristics.partition_baselines.mcmc`).

:class:`Walk` holds what every search needs: the checked seed and its random generator, the
budget (evaluations, the time limit and an enclosing deadline: :class:`_Budget`), the start
(:class:`_State`: the given placement, or the constructive start pool built under the time limit,
:func:`start_within`), the current string and the best one, the progress reports, and the result:
the best string in rank round-robin order, or the start schedule in its own order when that is
shorter, never worse than the start, with ``stats["found_by"]`` naming what found the answer (the
search's own method, or the start's method, ``"start"`` for a placement given without a schedule,
when the search did not improve on it). A Ctrl-C (``KeyboardInterrupt``) is never caught: it ends
the search without an answer.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from stagecut._deadline import check_time_limit, remaining
from stagecut.errors import InvalidArgumentError
from stagecut.latency.heuristics import constructive, memaware
from stagecut.latency.heuristics.constructive import Units, _check_problem, finished, no_answer
from stagecut.latency.model._fast import Evaluator
from stagecut.latency.model.evaluate import TOL, check_placement
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.progress import Ticker
from stagecut.results import Status
from stagecut.validate import check_int, shown

__all__ = ["Walk", "start_within", "START_SHARE", "Start"]

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
        s0 = self.start_schedule
        same = bool(np.array_equal(best, self.udev))
        found_by = (s0.method if s0 is not None else "start") if same else self.method
        out: dict[str, Any] = {"evaluations": budget.evaluations, **stats}
        if s0 is not None and s0.objective is not None and s0.objective < best_f - TOL * max(1.0, best_f):
            out["found_by"] = s0.method
            index = problem.index
            names = problem.devices.names
            order = [[index[v] for v in s0.order.get(name, ())] for name in names]
            return finished(problem, self._positions(s0), order, method=self.method, t0=self.t0, status=status,
                            seed=self.seed, stats=out,
                            notes=(f"the start ({s0.method}, in its own order) is shorter than every string "
                                   "found in rank round-robin order",))
        out["found_by"] = found_by
        dev = self.units.placement(best)
        return finished(problem, dev, self.ev.rank_round_robin(dev), method=self.method, t0=self.t0,
                        status=status, seed=self.seed, stats=out)


class Walk:
    """One search over device strings, from its start to its result (see the module docs).

    Parameters
    ----------
    problem : LatencyProblem
    start : Schedule, sequence of int or None
        The start placement (``None``: ``default_start(problem)`` when given, else the start pool
        built under the time limit, :func:`start_within`).
    method : str
        The search's method name.
    seed : int
        Seed of the random generator :attr:`rng`.
    time_limit : float or None
    max_evaluations : int or None
    default : int or None
        The evaluation budget when neither ``max_evaluations`` nor a time limit is given.
    default_start : callable, optional
        The start when ``start`` is ``None`` (built under the budget's clock).

    Attributes
    ----------
    failed : Schedule or None
        The answer when there is nothing to search (no placement fits and no start is given).
    cur, cur_f : numpy.ndarray, float
        The current string and its makespan (after :meth:`begin`).
    best, best_f : numpy.ndarray, float
        The best string so far and its makespan.
    loads : numpy.ndarray
        Bytes per device under :attr:`cur`.

    Raises
    ------
    InvalidArgumentError
        A bad seed, time limit or budget; a start that is not a placement of this problem.
    """

    def __init__(self, problem: LatencyProblem, start: Start, method: str, seed: int, time_limit: float | None,
                 max_evaluations: int | None, default: int | None,
                 default_start: Callable[[LatencyProblem], Start] | None = None) -> None:
        self.seed = check_int(seed, "seed")
        self.budget = _Budget(time_limit, max_evaluations, default)
        if start is None and default_start is not None:
            start = default_start(_check_problem(problem))
            self.state = _State(problem, start, method, self.seed)
        else:
            self.state = _State(problem, start, method, self.seed, self.budget)
        self.failed = self.state.failed
        self.rng = random.Random(self.seed)
        self.attempts = 0
        if self.failed is None:
            self.units = self.state.units
            self.cur = self.state.udev.copy()
            self.best = self.cur.copy()
            self.cur_f = self.best_f = math.inf
            self.loads = self.units.loads(self.cur)

    def begin(self, f: float | None = None) -> float:
        """Evaluate the start string (one evaluation; ``f``: its makespan, computed by the caller)."""
        if f is None:
            f = self.state.fitness(self.cur, self.budget)
        else:
            self.budget.evaluations += 1
            self.state.report(self.budget, f)
        self.cur_f = self.best_f = f
        self.best = self.cur.copy()
        return f

    def going(self) -> bool:
        """May a random search try another move: a unit can move, the budget is not spent, and
        the moves tried do not outnumber the evaluations a hundredfold (every move refused)?"""
        if not self.state.movable or self.budget.spent() or self.attempts >= 100 * (self.budget.evaluations + 10):
            return False
        self.attempts += 1
        return True

    def fitness(self, udev: np.ndarray) -> float:
        """The makespan of ``udev`` (one evaluation, reported as progress)."""
        return self.state.fitness(udev, self.budget)

    def try_move(self, u: int, d: int) -> float:
        """Unit ``u`` to device ``d`` in the current string; its makespan (undo with :meth:`undo`)."""
        self.cur[u] = d
        return self.fitness(self.cur)

    def undo(self, u: int, old: int) -> None:
        """Unit ``u`` back to device ``old``."""
        self.cur[u] = old

    def keep(self, u: int, old: int, d: int, f: float) -> bool:
        """Unit ``u`` moves from ``old`` to ``d`` for good, the current makespan becomes ``f``; is
        it a new best?"""
        self.cur[u] = d
        m = self.units.memory[u]
        self.loads[old] -= m
        self.loads[d] += m
        return self._current(f)

    def replace(self, udev: np.ndarray, f: float) -> bool:
        """The current string becomes ``udev`` (makespan ``f``); is it a new best?"""
        self.cur = udev
        self.loads = self.units.loads(udev)
        return self._current(f)

    def _current(self, f: float) -> bool:
        self.cur_f = f
        if f < self.best_f:
            self.best, self.best_f = self.cur.copy(), f
            return True
        return False

    def result(self, stats: dict[str, float], current: bool = False) -> Schedule:
        """The search's answer from its best string (``current``: from the current one, for a
        search whose current string is never worse than its best)."""
        if current:
            return self.state.result(self.cur, self.cur_f, self.budget, stats)
        return self.state.result(self.best, self.best_f, self.budget, stats)
