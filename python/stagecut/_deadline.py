"""Time limits shared by the calls into the core that one solver makes.

A solver with ``time_limit=`` opens a :func:`deadline` scope; every core call made inside it
(however deep in the solver's helpers) passes ``time_limit=remaining()``, so the whole solve,
not each call, is bounded. A core call that reaches the deadline without an answer raises
``_core.DeadlineReached``, which the solver turns into a result with status ``"time_limit"``
and the best answer it knows. Nested scopes keep the earlier deadline.

>>> with deadline(3600.0):
...     0 < remaining() <= 3600.0
True
>>> remaining() is None
True
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from stagecut._core import DeadlineReached
from stagecut.errors import InvalidArgumentError
from stagecut.validate import check_number

__all__ = ["DeadlineReached", "check_time_limit", "deadline", "remaining", "expired"]

_AT: ContextVar[float | None] = ContextVar("stagecut_deadline", default=None)


def check_time_limit(value: Any, where: str = "time_limit") -> float | None:
    """``None`` (no limit) or a positive number of seconds (``inf``: no limit).

    >>> check_time_limit(0)
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidArgumentError: time_limit: 0 must be positive
    """
    if value is None:
        return None
    return check_number(value, where, positive=True, allow_inf=True, error=InvalidArgumentError)


@contextmanager
def deadline(time_limit: float | None) -> Iterator[None]:
    """Core calls in this block stop ``time_limit`` seconds from now (``None``/``inf``: no limit)."""
    at = None if time_limit is None or math.isinf(time_limit) else time.monotonic() + time_limit
    outer = _AT.get()
    if outer is not None and (at is None or outer < at):
        at = outer
    token = _AT.set(at)
    try:
        yield
    finally:
        _AT.reset(token)


def remaining() -> float | None:
    """Seconds left in the current :func:`deadline` scope (``None``: no limit; never negative)."""
    at = _AT.get()
    return None if at is None else max(0.0, at - time.monotonic())


def expired() -> bool:
    """Whether the current scope's deadline has passed."""
    left = remaining()
    return left is not None and left <= 0.0
