"""Exceptions raised by stagecut.

Every error a user can cause derives from :class:`StagecutError`; errors about bad input are
also :class:`ValueError`, so ``except ValueError`` keeps working in callers that expect it.
"""

from __future__ import annotations

__all__ = [
    "StagecutError",
    "InvalidGraphError",
    "CycleError",
    "TooManyIdealsError",
    "SolverError",
    "StagecutWarning",
]


class StagecutError(Exception):
    """Base class of every stagecut error."""


class InvalidGraphError(StagecutError, ValueError):
    """The input graph, problem or split is malformed; the message names the node or field."""


class CycleError(InvalidGraphError):
    """The graph has a directed cycle; the message lists one."""

    def __init__(self, message: str, cycle: "list | None" = None) -> None:
        super().__init__(message)
        self.cycle = list(cycle) if cycle is not None else None


class TooManyIdealsError(StagecutError):
    """Downset enumeration passed ``max_ideals``.

    Raise the limit, or use ``method="dpl"`` (the linearized DP, at most n + 1 ideals) or
    ``method="auto"``, which falls back to it.
    """


class SolverError(StagecutError):
    """An external solver (MIP) failed or is unavailable."""


class StagecutWarning(UserWarning):
    """Something worth knowing about an answer (e.g. constraints that force nodes together)."""
