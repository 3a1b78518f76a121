"""One place for validating numbers: every field, argument and limit goes through these.

Bad *data* (a node's cost, a file's memory) is an :class:`~stagecut.errors.InvalidGraphError`;
a bad *argument* (``seed=-1``, ``time_limit="soon"``) passes ``error=InvalidArgumentError``.
Both are :class:`ValueError` and name ``where``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from stagecut.errors import InvalidArgumentError, InvalidGraphError, StagecutError

__all__ = ["check_number", "check_int"]


def check_number(value: Any, where: str, *, allow_inf: bool = False, positive: bool = False,
                 error: type[StagecutError] = InvalidGraphError) -> float:
    """``value`` as a float, or ``error`` naming ``where``: not a number, NaN, negative (or zero
    with ``positive``), infinite (unless ``allow_inf``).

    >>> check_number("2.5", "memory")
    2.5
    >>> check_number(-1, "memory")
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidGraphError: memory: -1 must be non-negative
    """
    if isinstance(value, bool):
        raise error(f"{where}: {value!r} is not a number")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise error(f"{where}: {value!r} is not a number") from None
    if math.isnan(x) or (math.isinf(x) and not allow_inf):
        raise error(f"{where}: {value!r} is not finite")
    if x < 0 or (positive and x == 0):
        raise error(f"{where}: {value!r} must be {'positive' if positive else 'non-negative'}")
    return x


def check_int(value: Any, where: str, *, minimum: int = 0, maximum: int | None = None,
              error: type[StagecutError] = InvalidArgumentError) -> int:
    """``value`` as an int (bools and floats refused), or ``error`` naming ``where``.

    >>> check_int(3, "devices", minimum=1)
    3
    >>> check_int(0, "devices", minimum=1)
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidArgumentError: devices must be an integer >= 1, got 0
    """
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not ok or value < minimum or (maximum is not None and value > maximum):
        rng = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
        raise error(f"{where} must be an integer {rng}, got {value!r}")
    return int(value)
