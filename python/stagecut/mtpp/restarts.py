"""Restarts of the MTPP searches, and the ``"auto"`` portfolio of searches.

``slice_graph(..., restarts=n)`` runs ``n`` more searches after the first, from seeds
``seed + 1``, ``seed + 2``... (modulo ``2**64``), each with its re-splits, and keeps the cheapest
plan (the first on ties); ``restarts="auto"`` runs as many as fit in the time limit. The plan a
seed ends at varies by a few percent from seed to seed on graphs of a few hundred nodes (the
re-splits end at different local optima), so the best of several seeds is usually cheaper than
one longer search. ``method="auto"`` runs the searches of :data:`PORTFOLIO` in turn (run ``i``:
search ``i`` modulo their number, from seed ``seed + i``; ``"spectral-order"`` is left out on
graphs too large for it, ``"multilevel"`` on graphs too small for it), at least one of each; no
one search wins on every graph.

No run starts once a plan is proven optimal or infeasible, or when the time left is shorter than
the quickest run so far (the status is then ``"time_limit"``: more time could find a cheaper
plan). The plan kept carries ``stats["restarts"]`` (runs after the first), ``stats["restart_decodes"]``
(the decodes of all runs) and a note saying why the runs stopped.

``restarts="auto"`` keeps the last part of the time limit (:func:`polish_reserve`: a fifth, at most
the ``improve`` budget; each run is held to the time left less it) to :func:`polish` the cheapest
plan by kicks and moves of single groups (:mod:`~stagecut.mtpp.moves`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from stagecut._deadline import deadline, remaining
from stagecut.errors import InvalidArgumentError
from stagecut.mtpp.improve import block_order, improve_plan
from stagecut.mtpp.model import MtppProblem, evaluate, lower_bound
from stagecut.mtpp.plan import SlicePlan
from stagecut.results import Stat, Status
from stagecut.validate import check_int

__all__ = ["PORTFOLIO", "SEEDED", "check_restarts", "polish", "polish_reserve", "restart", "run_options"]

#: The searches ``method="auto"`` runs in turn (run ``i`` is search ``i`` modulo their number, seed
#: ``seed + i``; without ``"spectral-order"`` on graphs too large for it, nor ``"multilevel"`` on
#: graphs of at most :data:`~stagecut.mtpp.multilevel.MIN_UNITS` units).
PORTFOLIO = ("spectral-order", "multilevel", "mla-weighted", "brkga", "mla")
#: The seeded searches (restarts apply to them).
SEEDED = ("brkga", "random", "mla", "mla-weighted", "spectral-order", "multilevel", "auto")


class _Settings(Protocol):
    @property
    def method(self) -> str: ...

    @property
    def seed(self) -> int: ...


S = TypeVar("S", bound=_Settings)


def check_restarts(restarts: Any, method: str, limit: float | None) -> float:
    """The most further searches ``restarts`` asks for (``inf``: as many as ``limit`` allows).

    >>> check_restarts(3, "brkga", None), check_restarts("auto", "brkga", 10.0)
    (3.0, inf)
    """
    if restarts == "auto":
        if limit is None or math.isinf(limit):
            raise InvalidArgumentError("restarts='auto' runs searches until the time limit: give a time_limit "
                                       "(or a number of restarts)")
        more = math.inf
    elif isinstance(restarts, str):
        raise InvalidArgumentError(f"restarts: {restarts!r} is not a number of searches or 'auto'")
    else:
        more = float(check_int(restarts, "restarts", maximum=2**32))
    if more and method not in SEEDED:
        raise InvalidArgumentError(f"restarts: method={method!r} is not a seeded search "
                                   f"(restarts apply to {', '.join(SEEDED)})")
    return more


def run_options(opts: S, i: int, portfolio: tuple[str, ...] = PORTFOLIO) -> S:
    """The settings of run ``i`` (0: the first): seed ``seed + i`` (mod ``2**64``); for
    ``"auto"``, the search ``portfolio[i % len(portfolio)]``."""
    method = portfolio[i % len(portfolio)] if opts.method == "auto" else opts.method
    return dataclasses.replace(opts, method=method, seed=(opts.seed + i) % 2**64)  # type: ignore[type-var]


def _better(a: SlicePlan, b: SlicePlan) -> bool:
    """Whether plan ``a`` costs less than ``b`` (a plan beats none)."""
    if a.objective is None:
        return False
    return b.objective is None or a.objective < b.objective * (1 - 1e-12)


def _decodes(plan: SlicePlan) -> int:
    value = plan.stats.get("decodes", 0)
    return value if isinstance(value, int) else 0


def restart(run: Callable[[S, float | None, float], SlicePlan], opts: S, first: SlicePlan, most: float,
            t0: float, portfolio: tuple[str, ...] = PORTFOLIO, reserve: float = 0.0) -> SlicePlan:
    """``first`` (run 0, started at ``t0``) against runs ``1, 2...`` (``run(settings, seconds
    left, start time)``) while ``most`` allows (module docs), keeping ``reserve`` seconds of the
    time limit for the caller; the cheapest plan, with its stats and a note (for ``"auto"``: method
    ``"auto"``, ``stats["auto_method"]`` the search that found it)."""
    best, ran, decodes = first, 0, _decodes(first)
    quickest = time.perf_counter() - t0
    why = "every run asked for ran"
    if first.status in ("optimal", "infeasible"):
        why = f"the plan of seed {first.seed} is proven {first.status}"
        most = 0
    while ran < most:
        left = remaining()
        if left is not None and left - reserve < quickest:
            why = "the time left was shorter than the quickest run"
            break
        start = time.perf_counter()
        if left is not None:
            left -= reserve
        with deadline(left):  # (the run ends before the time kept for the caller)
            plan = run(run_options(opts, ran + 1, portfolio), left, start)
        ran += 1
        decodes += _decodes(plan)
        quickest = min(quickest, time.perf_counter() - start)
        if _better(plan, best):
            best = plan
        if plan.status in ("optimal", "infeasible"):
            why = f"the plan of seed {plan.seed} is proven {plan.status}"
            break
    status = best.status
    if why.startswith("the time left") and status == "feasible":
        status = "time_limit"  # (stopped by the time limit: more time could find a cheaper plan)
    if opts.method == "auto":
        asked = "" if math.isinf(most) else f" of {int(most) + 1}"
        note = (f"{ran + 1}{asked} runs of {', '.join(portfolio)} in turn from seed {opts.seed} on ({why}); "
                f"the plan kept is {best.method}'s, seed {best.seed}")
    else:
        asked = "" if math.isinf(most) else f" of {int(most)}"
        note = (f"{ran}{asked} restart(s) from seed {(opts.seed + 1) % 2**64} on ({why}); "
                f"the plan kept is seed {best.seed}'s")
    stats = {**best.stats, "restarts": ran, "restart_decodes": decodes}
    if opts.method == "auto":  # (the portfolio's answer: which of its searches found it)
        stats["auto_method"] = best.method
    return dataclasses.replace(best, method=opts.method, status=status, stats=stats, notes=(*best.notes, note),
                               runtime_s=time.perf_counter() - t0)


#: The share of ``slice_graph``'s time limit kept, with ``restarts="auto"``, to polish the cheapest
#: plan by kicks (:func:`polish`); at most the ``improve`` budget.
POLISH_SHARE = 0.2


def polish_reserve(budget: float | None, limit: float | None) -> float:
    """Seconds of the time limit ``restarts="auto"`` keeps for :func:`polish` (0: no polish)."""
    if budget is None or limit is None or math.isinf(limit):
        return 0.0
    return min(budget, POLISH_SHARE * limit)


def polish(problem: MtppProblem, plan: SlicePlan, seed: int, t0: float) -> SlicePlan:
    """The cheapest plan of the restarts, improved by kicks and moves until the time limit
    (:mod:`~stagecut.mtpp.moves`): never worse; ``stats["found_by"]`` is ``"polish"`` when it
    lowered the cost, ``stats["polish_kicks"]`` the kicks tried."""
    left = remaining()
    start = plan.objective
    if start is None or plan.status in ("optimal", "infeasible"):
        return plan
    if left is None or left <= 0:
        return dataclasses.replace(plan, stats={**plan.stats, "polish_kicks": 0},
                                   notes=(*plan.notes, "no time was left to polish the plan by kicks"))
    imp = improve_plan(problem, plan, time_limit=left, kicks=None, seed=seed)
    stats: dict[str, Stat] = {**plan.stats, "polish_kicks": imp.stats.get("kicks", 0)}
    ev = evaluate(problem, [list(s.nodes) for s in imp.stages])  # (the answer is the evaluator's)
    if not ev.objective < start:
        return dataclasses.replace(plan, stats=stats, runtime_s=time.perf_counter() - t0)
    stats["found_by"] = "polish"
    lb = plan.lower_bound if plan.lower_bound is not None else lower_bound(problem)
    status: Status = "optimal" if ev.objective <= lb * (1 + 1e-12) else plan.status
    note = (f"kicks and moves of single groups ({stats['polish_kicks']} kicks, until the time limit) lowered "
            f"the plan's cost from {start:.9g} to {ev.objective:.9g}")
    return dataclasses.replace(plan, objective=ev.objective, status=status, stages=ev.stages, stats=stats,
                               notes=(*plan.notes, note), order=block_order(problem, ev.stages),
                               runtime_s=time.perf_counter() - t0)
