"""Exceptions raised by stagecut.

Every error a user can cause derives from :class:`StagecutError`. Errors about bad input are
also :class:`ValueError`, so ``except ValueError`` keeps working in callers that expect it:

* :class:`InvalidGraphError`: the graph, problem, split or file is malformed (names the node or
  field); :class:`CycleError` is the special case of a directed cycle.
* :class:`InvalidArgumentError`: a bad argument to a function (an unknown ``method``, a negative
  ``seed``, a time limit that is not a number...), as opposed to bad data.

The rest are about solving:

* :class:`TooManyIdealsError`: an exact DP refused a request that would not fit (the message
  says why the ideals explode and what to use instead);
* :class:`MemoryLimitError`: a request would allocate more than the memory budget (the message
  says how much, and what to change); also a :class:`MemoryError`;
* :class:`SolverError`: a solver failed; an *internal* error (a bug: a solver disagreeing with
  the evaluator, an impossible state) says "please report";
* :class:`BackendUnavailableError`: an optional solver backend (HiGHS, ...) is not installed;
  the message names the extra to install.

The Rust core raises the same classes (its errors are mapped in ``rust/bindings/errors.rs``).
"""

from __future__ import annotations

__all__ = [
    "StagecutError",
    "InvalidGraphError",
    "InvalidArgumentError",
    "CycleError",
    "TooManyIdealsError",
    "MemoryLimitError",
    "SolverError",
    "BackendUnavailableError",
    "StagecutWarning",
    "internal_error",
]


class StagecutError(Exception):
    """Base class of every stagecut error."""


class InvalidGraphError(StagecutError, ValueError):
    """The input graph, problem or split is malformed; the message names the node or field."""


class InvalidArgumentError(StagecutError, ValueError):
    """A function argument is out of its domain (unknown method, bad seed, bad limit...)."""


class CycleError(InvalidGraphError):
    """The graph has a directed cycle; the message lists one (also in :attr:`cycle`)."""

    def __init__(self, message: str, cycle: list[object] | None = None) -> None:
        super().__init__(message)
        self.cycle = list(cycle) if cycle is not None else None


class TooManyIdealsError(StagecutError):
    """Downset enumeration passed ``max_ideals``.

    Raise the limit, or use ``method="dpl"`` (the linearized DP, at most n + 1 ideals) or
    ``method="auto"``, which falls back to it.
    """


class MemoryLimitError(StagecutError, MemoryError):
    """A request would need more memory than the budget, so it was refused before allocating.

    The message says how much it needs and what to change (fewer devices, a smaller population,
    ``segment_costs="scan"``...). The budget is 2 GiB, or the ``STAGECUT_MEMORY_BUDGET``
    environment variable (bytes, or with a unit: ``"16GiB"``).
    """


class SolverError(StagecutError):
    """A solver failed, or an internal check failed (then the message says "please report")."""


class BackendUnavailableError(SolverError):
    """An optional solver backend is not installed; the message names the extra to install."""


class StagecutWarning(UserWarning):
    """Something worth knowing about an answer (e.g. constraints that force nodes together)."""


def internal_error(what: str) -> SolverError:
    """The :class:`SolverError` for a broken internal invariant (a bug in stagecut)."""
    return SolverError(f"internal error: {what}; please report this with the input")


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` in the calling function point at the
    first frame outside the stagecut package (the user's line), however many of stagecut's own
    wrappers (argument checks, progress reporting) lie in between."""
    import os
    import sys

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame = sys._getframe(1)  # the function that will call warnings.warn: stacklevel 1
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level
