"""Argument helpers of the training planner: flag checks and renamed keywords."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from stagecut.errors import InvalidArgumentError, user_stacklevel

__all__ = ["check_flag", "renamed_kwargs"]

P = ParamSpec("P")
R = TypeVar("R")


def check_flag(value: object, where: str) -> bool:
    """``value`` if it is a bool (numpy's too), else :class:`InvalidArgumentError`.

    >>> check_flag(True, "exact_batch")
    True
    >>> check_flag("yes", "exact_batch")
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidArgumentError: exact_batch must be True or False, got 'yes'
    """
    if not isinstance(value, bool) and type(value).__name__ != "bool_":
        raise InvalidArgumentError(f"{where} must be True or False, got {value!r}")
    return bool(value)


def renamed_kwargs(**old_to_new: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Keep old keyword spellings working for one release, with a :class:`DeprecationWarning`.

    >>> @renamed_kwargs(max_batch="batch")
    ... def f(*, batch: int = 1) -> int:
    ...     return batch
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     f(max_batch=4), str(w[0].message)
    (4, 'f(max_batch=...) is deprecated: use batch=...')
    """

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def inner(*args: P.args, **kwargs: P.kwargs) -> R:
            for old, new in old_to_new.items():
                if old in kwargs:
                    if new in kwargs:
                        raise InvalidArgumentError(f"{fn.__name__}: give {new}= only (not also {old}=)")
                    warnings.warn(f"{fn.__name__}({old}=...) is deprecated: use {new}=...",
                                  DeprecationWarning, stacklevel=user_stacklevel())
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return inner

    return wrap
