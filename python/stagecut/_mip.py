"""Shared python-mip handling: model creation, solver options, status and bound extraction.

Every MIP of stagecut is built through :func:`new_model` and solved through :func:`solve`,
which returns a :class:`MipOutcome`: the status in stagecut's vocabulary (``"optimal"``,
``"time_limit"``, ``"infeasible"``, ``"feasible"``, ``"no_solution"``), the best objective
found (``None`` when there is none) and the proven dual bound (never a primal value). A time
limit is not an error: the best solution and bound found so far come back with status
``"time_limit"``. python-mip is imported lazily so that ``import stagecut`` works without it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stagecut.errors import BackendUnavailableError, InvalidArgumentError, SolverError
from stagecut.validate import check_number

__all__ = ["SOLVERS", "import_mip", "new_model", "solve", "MipOutcome", "add"]

#: Solver names accepted by ``solver=``.
SOLVERS = ("cbc", "highs")


def import_mip() -> Any:
    """``import mip`` (a core dependency), or a :class:`BackendUnavailableError` saying how to install it."""
    try:
        import mip  # noqa: F401
    except ImportError as exc:  # pragma: no cover - only in a broken install
        raise BackendUnavailableError(
            "the MIP solvers need python-mip, which did not import; reinstall stagecut (pip install stagecut)"
        ) from exc
    return mip


def check_options(time_limit: float | None = None, gap: float | None = None, threads: int | None = None,
                  seed: int | None = 0, solver: str = "cbc") -> None:
    """Validate the common solver options (bad input is a ValueError)."""
    if solver is None or str(solver).lower() not in SOLVERS:
        raise InvalidArgumentError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if time_limit is not None:
        check_number(time_limit, "time_limit (seconds)", allow_inf=True, positive=True, error=InvalidArgumentError)
    if gap is not None:
        check_number(gap, "gap", allow_inf=True, error=InvalidArgumentError)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise InvalidArgumentError(f"threads must be a positive integer, got {threads!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise InvalidArgumentError(f"seed must be a non-negative integer, got {seed!r}")


def new_model(name: str, *, solver: str = "cbc", gap: float | None = None, threads: int | None = None,
              seed: int | None = 0, verbose: bool = False) -> Any:
    """A minimisation model with the options set and the solver output silenced unless asked."""
    check_options(None, gap, threads, seed, solver)
    mip = import_mip()
    sname = {"cbc": mip.CBC, "highs": mip.HIGHS}[str(solver).lower()]
    try:
        m = mip.Model(name=name, sense=mip.MINIMIZE, solver_name=sname)
    except Exception as exc:  # HiGHS library missing, CBC failing to load, ...
        if sname == mip.HIGHS:
            raise BackendUnavailableError(
                "the HiGHS solver is not installed: pip install 'stagecut[highs]' (or use solver='cbc')"
            ) from exc
        raise SolverError(f"cannot start the {solver} solver through python-mip: {exc}") from exc
    m.verbose = 1 if verbose else 0
    m.max_mip_gap = float(gap) if gap is not None else 1e-6
    m.max_mip_gap_abs = 1e-9
    m.threads = int(threads) if threads is not None else 1
    if seed is not None:
        m.seed = int(seed)
    return m


def add(model: Any, constraints: Any) -> None:
    """Add a constraint tensor (or one constraint) unless it is empty."""
    if getattr(constraints, "size", 1) == 0:
        return
    model += constraints


@dataclass(frozen=True)
class MipOutcome:
    """What one solve gave."""

    status: str
    objective: float | None
    bound: float
    seconds: float
    solver: str
    rows: int
    cols: int

    @property
    def gap(self) -> float | None:
        if self.objective is None:
            return None
        if self.objective == 0:
            return 0.0
        return max(0.0, (self.objective - self.bound) / abs(self.objective))


def solve(model: Any, *, time_limit: float | None = None, start: Sequence[tuple[Any, float]] | None = None,
          relax: bool = False) -> MipOutcome:
    """Optimise; map the status; read the dual bound.

    ``start`` is a list of ``(var, value)`` pairs (a MIP start). With a time limit the best
    solution and bound are returned with status ``"time_limit"``.
    """
    mip = import_mip()
    S = mip.OptimizationStatus
    if start:
        model.start = [(v, float(x)) for v, x in start]
    limit = math.inf if time_limit is None else float(time_limit)
    t0 = time.perf_counter()
    with _quiet(model.verbose == 0):
        try:
            st = model.optimize(max_seconds=limit, relax=relax)
        except Exception as exc:
            raise SolverError(f"the {model.solver_name} solver failed: {exc}") from exc
    seconds = time.perf_counter() - t0
    has_sol = model.num_solutions > 0 and model.objective_value is not None
    obj = float(model.objective_value) if has_sol else None
    try:
        bound = float(model.objective_bound)
    except (TypeError, ValueError):
        bound = -math.inf
    if math.isnan(bound):
        bound = -math.inf
    if st == S.OPTIMAL:
        status = "optimal"
        if relax:
            bound = obj if obj is not None else bound
    elif st in (S.INFEASIBLE, S.INT_INFEASIBLE):
        status, obj, bound = "infeasible", None, math.inf
    elif st == S.FEASIBLE:
        status = "time_limit" if seconds >= 0.95 * limit else "feasible"
    elif st == S.NO_SOLUTION_FOUND:
        status = "time_limit" if seconds >= 0.95 * limit else "no_solution"
        obj = None
    elif st == S.UNBOUNDED:
        raise SolverError("internal error: the MIP is unbounded; please report this with the input")
    else:
        status = "feasible" if obj is not None else "no_solution"
    if obj is not None and bound > obj:
        bound = obj  # the bound is at most the best primal value (round-off)
    return MipOutcome(status=status, objective=obj, bound=bound, seconds=seconds,
                      solver=str(model.solver_name).lower(), rows=model.num_rows, cols=model.num_cols)


class _quiet:
    """Silence C-level stdout (CBC prints some lines even at verbose=0)."""

    def __init__(self, active: bool) -> None:
        self.active = active

    def __enter__(self) -> _quiet:
        if not self.active:
            return self
        try:
            import sys

            sys.stdout.flush()
            self.fd = os.dup(1)
            self.null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(self.null, 1)
        except OSError:
            self.active = False
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.active:
            os.dup2(self.fd, 1)
            os.close(self.fd)
            os.close(self.null)
