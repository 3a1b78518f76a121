"""The argument checks every latency MIP solver makes before it starts (the DiviML MILP,
MILP-SPLIT with one and several channels, the batched MILP and batched SPLIT, the PCIe IP): the problem, the
solver options of :func:`stagecut._mip.check_options` (solver name, time limit, gap, threads,
seed) and the schedule to start from, in that order, each refused with one
:class:`~stagecut.errors.InvalidArgumentError` naming the argument.

>>> import stagecut as sc
>>> from stagecut.latency import Devices, LatencyProblem
>>> p = LatencyProblem(sc.Graph.chain([1.0, 2.0]), Devices.pcie_star(2))
>>> check_solver_call(p, solver="highs", threads=2) is p
True
>>> check_solver_call("p.json")
Traceback (most recent call last):
...
stagecut.errors.InvalidArgumentError: problem: expected a LatencyProblem, got 'p.json'
>>> check_solver_call(p, solver="gurobi")
Traceback (most recent call last):
...
stagecut.errors.InvalidArgumentError: solver must be one of ('cbc', 'highs'), got 'gurobi'
>>> check_solver_call(p, start={"0": "gpu:0"})
Traceback (most recent call last):
...
stagecut.errors.InvalidArgumentError: start: expected a Schedule, got {'0': 'gpu:0'}
"""

from __future__ import annotations

from typing import Any

from stagecut._mip import check_options
from stagecut.errors import InvalidArgumentError
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.validate import check_flag, shown

__all__ = ["check_solver_call", "checked_problem", "checked_start"]


def checked_problem(problem: Any) -> LatencyProblem:
    """``problem`` if it is a :class:`LatencyProblem`, else :class:`InvalidArgumentError`."""
    if not isinstance(problem, LatencyProblem):
        raise InvalidArgumentError(f"problem: expected a LatencyProblem, got {shown(problem)}")
    return problem


def checked_start(start: Any) -> Schedule | None:
    """``start`` if it is ``None`` or a :class:`Schedule`, else :class:`InvalidArgumentError`
    (whether it is a schedule of the problem's nodes and devices is the solver's to say)."""
    if start is not None and not isinstance(start, Schedule):
        raise InvalidArgumentError(f"start: expected a Schedule, got {shown(start)}")
    return start


def check_solver_call(problem: Any, *, time_limit: float | None = None, solver: str = "cbc",
                      threads: int | None = None, gap: float | None = None, seed: int | None = 0,
                      start: Any = None, **flags: Any) -> LatencyProblem:
    """Check a latency MIP solver's arguments; return the problem.

    Parameters
    ----------
    problem : LatencyProblem
    time_limit, solver, threads, gap, seed
        As :func:`stagecut._mip.check_options` checks them (``gap=None``, ``seed=0``: the
        solvers that take neither).
    start : Schedule, optional
        A schedule to start from (a solver whose ``start`` may be a placement checks it itself
        and passes nothing here).
    **flags
        Boolean arguments by name (``verbose=...``): ``True``/``False`` or 1/0.

    Raises
    ------
    InvalidArgumentError
        The first bad argument, named: the problem, then the solver options, the start, the flags.
    """
    checked = checked_problem(problem)
    check_options(time_limit, gap, threads, seed, solver)
    checked_start(start)
    for name, value in flags.items():
        check_flag(value, name, error=InvalidArgumentError)
    return checked
