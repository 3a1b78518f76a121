"""Large-neighbourhood search (LNS) over placements: keep most of the placement, re-optimise a
window exactly, repeat.

The search works on device strings as :mod:`stagecut.latency.heuristics.search` does (one device per
placement unit, every string within the memory limits, fitness the ``asap`` makespan in rank
round-robin order from the Rust evaluator). Each iteration:

1. times the current placement and traces its critical path (the chain of data and device
   dependences that ends at the last finish);
2. draws a *window* of at most ``window`` units (seeded): a segment of the critical path, a
   region grown breadth first from a critical unit through the DAG, or a run of consecutive critical units on one
   device, grown by the units the window's nodes exchange data with;
3. re-optimises the window with the rest of the placement fixed: every assignment of the
   window's units to the devices they may use (their current devices, those of their
   neighbours, their fastest device, the parallel devices, the two devices with the largest
   share of free memory and the two least busy ones) when there are at most ``max_window_evaluations`` of them
   (exact over that set), otherwise the block moves (all of the window to one device, a prefix
   or suffix of it to another) and the single-unit moves; all candidates evaluated in one batch;
4. takes the best candidate when it is shorter; an equally short one is taken half of the time
   (a seeded coin), to walk plateaus.

The search also stops after ``200 + 20 x (units that can move)`` iterations in a row without a
new best (``stats["stalled"]``). Budgets: ``max_iterations`` and ``time_limit`` (seconds, also bounded by an enclosing
:func:`stagecut._deadline.deadline`); without either, :data:`DEFAULT_ITERATIONS`. With the same
seed and an iteration budget the result is the same on every run. The result is never worse than
the start (the start schedule is returned, in its own order, when it is shorter), with status
``"time_limit"`` when the clock stopped the search.

>>> import stagecut as sc
>>> from stagecut.latency import LatencyProblem
>>> g = sc.Graph.chain([1.0] * 6, cpu_costs=[3.0] * 6, comm=0.5)
>>> p = LatencyProblem.from_workload(g, accelerators=2)
>>> s = lns(p, start=[0] * 6, max_iterations=20)
>>> s.objective, s.method
(6.0, 'lns')
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np

from stagecut.latency.heuristics.driver import Start, Walk, _State
from stagecut.latency.heuristics.search import _neighbours
from stagecut.latency.model.evaluate import TOL
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.progress import Progress, reports
from stagecut.validate import check_int

__all__ = ["lns", "DEFAULT_ITERATIONS", "critical_units"]

#: The iteration budget of :func:`lns` when neither ``max_iterations`` nor ``time_limit`` is given.
DEFAULT_ITERATIONS = 200


def critical_units(state: _State, udev: np.ndarray) -> tuple[list[int], float]:
    """The units on the critical path of the string ``udev`` (first to last, each once) and its
    makespan (rank round-robin order)."""
    problem, units, ev = state.problem, state.units, state.ev
    dev = units.placement(udev)
    order = ev.rank_round_robin(dev)
    start, finish = ev.times(dev, order)
    n = len(problem)
    if n == 0:
        return [], 0.0
    prev = np.full(n, -1, dtype=np.int64)
    for d, seq in enumerate(order):
        if not problem.parallel[d] and len(seq) > 1:
            prev[np.asarray(seq[1:], dtype=np.int64)] = np.asarray(seq[:-1], dtype=np.int64)
    i = int(np.argmax(finish))
    path = [i]
    seen = {i}
    while start[i] > 0:
        eps = TOL * max(1.0, float(start[i]))
        nxt = -1
        for u in problem.pred[i]:
            if abs(finish[u] + problem.transfer(u, int(dev[u]), int(dev[i])) - start[i]) <= eps:
                nxt = u
                break
        if nxt < 0 and prev[i] >= 0 and abs(finish[prev[i]] - start[i]) <= eps:
            nxt = int(prev[i])
        if nxt < 0 or nxt in seen:
            break
        i = nxt
        seen.add(i)
        path.append(i)
    out: list[int] = []
    got: set[int] = set()
    for i in reversed(path):
        u = int(units.unit_of[i])
        if u not in got:
            got.add(u)
            out.append(u)
    return out, float(finish.max())


class _Windows:
    """Draws windows and their candidate strings."""

    def __init__(self, state: _State, window: int, cap: int, rng: random.Random) -> None:
        self.state = state
        self.units = state.units
        self.window = window
        self.cap = cap
        self.rng = rng
        self.near = _neighbours(state)
        self.movable = np.zeros(len(self.units), dtype=bool)
        self.movable[state.movable] = True
        t = self.units.times
        self.fastest = [int(ok[np.argmin(t[u, ok])]) if ok.size else -1 for u, ok in enumerate(self.units.allowed)]

    def draw(self, path: list[int], udev: np.ndarray) -> list[int]:
        """A window (units that can move), drawn around the critical path ``path``."""
        rng, k = self.rng, self.window
        if not path:
            return []
        kind = rng.randrange(3)
        at = rng.randrange(len(path))
        if kind == 0:  # a segment of the path
            length = rng.randint(1, k)
            lo = max(0, min(at, len(path) - length))
            win = path[lo:lo + length]
        elif kind == 1:  # a region grown breadth first from a critical unit (neighbours in random order)
            win = [path[at]]
            got = {path[at]}
            head = 0
            while head < len(win) and len(win) < k:
                nb = [int(x) for x in self.near[win[head]] if int(x) not in got]
                rng.shuffle(nb)
                for x in nb[:k - len(win)]:
                    got.add(x)
                    win.append(x)
                head += 1
        else:  # the run of critical units on one device around `at`
            d = udev[path[at]]
            lo = hi = at
            while lo > 0 and udev[path[lo - 1]] == d and hi - lo + 1 < k:
                lo -= 1
            while hi + 1 < len(path) and udev[path[hi + 1]] == d and hi - lo + 1 < k:
                hi += 1
            win = path[lo:hi + 1]
            if len(win) < k:  # grow by neighbours off the path
                extra = [int(x) for u in win for x in self.near[u] if int(x) not in win]
                rng.shuffle(extra)
                for x in extra:
                    if len(win) >= k:
                        break
                    if x not in win:
                        win.append(x)
        out: list[int] = []
        for u in win:
            if self.movable[u] and u not in out:
                out.append(u)
        return out

    def candidates(self, win: list[int], udev: np.ndarray) -> np.ndarray:
        """Candidate strings (rows) for the window: exhaustive over each unit's device set when
        small enough, else block and single moves; the current string is not among them."""
        units = self.units
        problem = self.state.problem
        # devices worth trying: the parallel ones, and the two with the most free memory (by share)
        finite = np.isfinite(problem.capacity)
        free = np.where(finite, (problem.capacity - units.loads(udev)) / np.where(finite, problem.capacity, 1.0),
                        1.0)
        dev = units.placement(udev)
        busy = np.bincount(dev, weights=problem.times[np.arange(len(dev)), dev], minlength=len(free))
        pos = np.arange(len(free))
        roomy = set(np.flatnonzero(problem.parallel).tolist())
        roomy |= {int(d) for d in np.lexsort((pos, -free))[:2]}
        roomy |= {int(d) for d in np.lexsort((pos, busy))[:2]}
        sets = []
        for u in win:
            can = set(units.allowed[u].tolist())
            mine = {int(udev[u]), self.fastest[u]} | {int(udev[x]) for x in self.near[u]} | roomy
            sets.append(sorted(mine & can))
        total = math.prod(len(s) for s in sets)
        if total <= self.cap:
            choice = np.array(list(itertools.product(*sets)), dtype=np.int64).reshape(total, len(win))
        else:
            devs = sorted({d for s in sets for d in s})
            moves: list[np.ndarray] = []
            cur = udev[win]
            for d in devs:
                moves.append(np.full(len(win), d))
                for cut in range(1, len(win)):
                    r = cur.copy()
                    r[:cut] = d
                    moves.append(r)
                    r = cur.copy()
                    r[cut:] = d
                    moves.append(r)
                for j in range(len(win)):
                    r = cur.copy()
                    r[j] = d
                    moves.append(r)
            choice = np.unique(np.array(moves, dtype=np.int64), axis=0)
            if len(choice) > self.cap:
                keep = sorted(self.rng.sample(range(len(choice)), self.cap))
                choice = choice[keep]
        # only assignments each unit can take, not the current one, within memory
        ok = np.ones(len(choice), dtype=bool)
        for j, u in enumerate(win):
            ok &= np.isin(choice[:, j], units.allowed[u])
        ok &= (choice != udev[win][None, :]).any(axis=1)
        choice = choice[ok]
        if not len(choice):
            return np.zeros((0, len(udev)), dtype=np.int64)
        cap = self.state.problem.capacity
        mem = units.memory[win]
        base = units.loads(udev)
        base = base - np.bincount(udev[win], weights=mem, minlength=len(cap))
        loads = np.repeat(base[None, :], len(choice), axis=0)
        for j in range(len(win)):
            np.add.at(loads, (np.arange(len(choice)), choice[:, j]), mem[j])
        choice = choice[(loads <= cap[None, :]).all(axis=1)]
        out = np.repeat(udev[None, :], len(choice), axis=0)
        out[:, win] = choice
        return out


@reports
def lns(problem: LatencyProblem, *, start: Start = None, seed: int = 0, time_limit: float | None = None,
        max_iterations: int | None = None, window: int = 8, max_window_evaluations: int | None = None,
        progress: Progress = None) -> Schedule:
    """Large-neighbourhood search (see the module docs).

    Parameters
    ----------
    problem : LatencyProblem
    start : Schedule, sequence of int or None
        The start placement (default: the best schedule of the start pool,
        :func:`~stagecut.latency.heuristics.memaware.best_start`).
    seed : int
        Seed of the windows and of the plateau coin.
    time_limit : float, optional
        Seconds (``None``: none).
    max_iterations : int, optional
        Windows re-optimised (default :data:`DEFAULT_ITERATIONS` when there is no time limit).
    window : int
        Most units in a window (>= 1).
    max_window_evaluations : int, optional
        Most candidates evaluated per window (default: about three million node visits' worth,
        between 64 and 4096).
    progress : bool or callable, optional
        Progress reports, phase ``"lns"`` (evaluations done and the best makespan so far).

    Returns
    -------
    Schedule
        Method ``"lns"``, status ``"feasible"`` or ``"time_limit"``; never worse than the start;
        ``stats``: ``iterations``, ``improvements``, ``evaluations``. No schedule (status
        ``"infeasible"``/``"unknown"``) when nothing fits and no start is given.

    Raises
    ------
    InvalidArgumentError
        A bad seed, time limit, budget or window; a start that is not a placement of this
        problem, splits a colocation class or breaks a memory limit.
    """
    window = check_int(window, "window", minimum=1)
    iters = None if max_iterations is None else check_int(max_iterations, "max_iterations", minimum=1)
    w = Walk(problem, start, "lns", seed, time_limit, None, None)
    if iters is None and w.budget.seconds is None:
        iters = DEFAULT_ITERATIONS
    if w.failed is not None:
        return w.failed
    state, budget = w.state, w.budget
    n = len(problem)
    if max_window_evaluations is None:
        cap = int(min(4096, max(64, 3_000_000 // max(1, n))))
    else:
        cap = check_int(max_window_evaluations, "max_window_evaluations", minimum=1)
    path, cur_f = critical_units(state, w.cur)
    w.begin(cur_f)
    wins = _Windows(state, window, cap, w.rng)
    it = improved = sideways = stall = 0
    patience = 200 + 20 * len(state.movable)
    while state.movable and (iters is None or it < iters) and stall < patience and not budget.out_of_time():
        it += 1
        stall += 1
        win = wins.draw(path, w.cur)
        if not win:
            continue
        rows = wins.candidates(win, w.cur)
        if not len(rows):
            continue
        spans = state.ev.makespans(rows[:, state.units.unit_of])
        budget.evaluations += len(rows)
        k = int(np.argmin(spans))
        f = float(spans[k])
        cur_f = w.cur_f
        state.report(budget, min(f, cur_f))
        eps = TOL * max(1.0, cur_f)
        if f < cur_f - eps or (f <= cur_f + eps and w.rng.random() < 0.5):
            if f < cur_f - eps:
                improved += 1
            else:
                sideways += 1
            path, cur_f = critical_units(state, rows[k])
            if w.replace(rows[k].copy(), cur_f):
                stall = 0
    return w.result({"iterations": it, "improvements": improved, "sideways": sideways,
                     "stalled": int(stall >= patience)})
