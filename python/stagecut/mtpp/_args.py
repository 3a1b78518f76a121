"""Argument handling shared by the MTPP solvers: the renamed arguments of the last release.

``stages=`` became ``devices=`` and ``fast_memory=`` became ``memory=``; the old names (and the
old positional forms) are accepted for one release with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from stagecut.errors import InvalidArgumentError, user_stacklevel

__all__ = ["deprecated", "renamed", "positional"]


def deprecated(message: str, stacklevel: int = 3) -> None:
    """Warn that an old spelling was used (it still works for one release), pointing at the
    user's line (``stacklevel`` is kept for callers and no longer used: see
    :func:`stagecut.errors.user_stacklevel`)."""
    warnings.warn(message + " (the old spelling works for one more release)", DeprecationWarning,
                  stacklevel=user_stacklevel())


def renamed(where: str, new: str, value: Any, old: str, old_value: Any, stacklevel: int = 3) -> Any:
    """``value``, or ``old_value`` given under the old name ``old`` (with a warning).

    >>> renamed("f", "devices", 3, "stages", None)
    3
    """
    if old_value is None:
        return value
    deprecated(f"{where}: {old}= is now {new}=", stacklevel)
    if value is not None and value != old_value:
        raise InvalidArgumentError(f"{where}: give {new}= only (got {new}={value!r} and {old}={old_value!r})")
    return old_value


def positional(where: str, args: Sequence[Any], names: Sequence[str], given: Mapping[str, Any],
               stacklevel: int = 3) -> dict[str, Any]:
    """Map old positional arguments ``args`` onto ``names`` (with a warning); refuse a name
    given both ways or too many arguments.

    >>> positional("f", (), ("devices",), {})
    {}
    """
    if not args:
        return {}
    if len(args) > len(names):
        raise InvalidArgumentError(
            f"{where}: takes the graph positionally and everything else by keyword; got {len(args)} more "
            f"positional arguments")
    out = dict(zip(names, args))
    deprecated(f"{where}: pass {', '.join(f'{n}=' for n in out)} by keyword", stacklevel)
    for name in out:
        if given.get(name) is not None:
            raise InvalidArgumentError(f"{where}: {name} given both positionally and by keyword")
    return out
