"""One place for validating values: every field, argument and limit goes through these.

Bad *data* (a node's cost, a file's memory) is an :class:`~stagecut.errors.InvalidGraphError`;
a bad *argument* (``seed=-1``, ``time_limit="soon"``) passes ``error=InvalidArgumentError``.
Both are :class:`ValueError` and name ``where``.

The rules, the same everywhere (API arguments, file fields, command-line flags):

* a **number** is an int or a float (numpy's too), never a string (``"2.5"``) or a boolean;
  an integer too large for a float is refused, not an ``OverflowError``;
* an **integer** is an int, never a float, even an integral one (``2.0`` is refused, and the
  message says to write ``2``), nor a boolean; it must fit the core's widest integer (below
  2**64) unless a smaller ``maximum`` is given;
* a **flag** (``supportedOnFpga``, ``isBackwardNode``, ``backward``) is a boolean or the integer
  0 or 1, never a string (``"false"`` and ``"0"`` are refused: they are not booleans);
* an **id** (node id, colocation class, edge end) is any hashable value; a JSON list read where
  an id is expected is a tuple (that is how tuple ids are written to JSON), and a JSON object
  is refused.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

from stagecut.errors import InvalidArgumentError, InvalidGraphError, MemoryLimitError, StagecutError

__all__ = ["check_size", "MAX_GENERATED_NODES",
           "check_number", "check_int", "check_flag", "check_id", "check_field", "check_list", "shown",
           "MAX_INT"]

#: the largest integer any argument may take (the core's widest integer is a u64)
MAX_INT = 2**64 - 1


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters (a 400-digit integer stays one short line).

    >>> shown(10**80)
    '1000000000000000000000000000000000000000000000000000000000... (81 digits)'
    """
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**limit:
        digits = len(str(abs(value)))
        return f"{str(value)[:limit - 2]}... ({digits} digits)"
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_number(value: Any, where: str, *, allow_inf: bool = False, positive: bool = False,
                 error: type[StagecutError] = InvalidGraphError) -> float:
    """``value`` as a float, or ``error`` naming ``where``: not a number (strings and booleans
    are not numbers), too large for a float, NaN, negative (or zero with ``positive``),
    infinite (unless ``allow_inf``).

    >>> check_number(2, "memory")
    2.0
    >>> check_number("2.5", "memory")
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidGraphError: memory: '2.5' is a string, not a number (write 2.5)
    >>> check_number(-1, "memory")
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidGraphError: memory: -1 must be non-negative
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        if isinstance(value, str):
            raise error(f"{where}: {shown(value)} is a string, not a number (write {value.strip()[:40]})")
        raise error(f"{where}: {shown(value)} is not a number")
    try:
        x = float(value)
    except OverflowError:
        raise error(f"{where}: {shown(value)} is too large for a float") from None
    except (TypeError, ValueError):
        raise error(f"{where}: {shown(value)} is not a number") from None
    if math.isnan(x) or (math.isinf(x) and not allow_inf):
        raise error(f"{where}: {shown(value)} is not finite")
    if x < 0 or (positive and x == 0):
        raise error(f"{where}: {shown(value)} must be {'positive' if positive else 'non-negative'}")
    return x


def check_int(value: Any, where: str, *, minimum: int = 0, maximum: int | None = None,
              error: type[StagecutError] = InvalidArgumentError) -> int:
    """``value`` as an int, or ``error`` naming ``where``: bools and floats are refused (even
    ``2.0``: one rule for every integer, in files and in arguments), and so is anything below
    ``minimum`` or above ``maximum`` (default :data:`MAX_INT`, the core's widest integer).

    >>> check_int(3, "devices", minimum=1)
    3
    >>> check_int(0, "devices", minimum=1)
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidArgumentError: devices must be an integer >= 1, got 0
    >>> check_int(2.0, "devices", minimum=1)
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidArgumentError: devices must be an integer >= 1, got 2.0 (a float: write 2)
    """
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    top = MAX_INT if maximum is None else maximum
    if not ok or value < minimum or value > top:
        rng = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
        hint = ""
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
            hint = f" (a float: write {int(value)})"
        elif ok and maximum is None and value > top:
            hint = " (too large: integers must be below 2**64)"
        raise error(f"{where} must be an integer {rng}, got {shown(value)}{hint}")
    return int(value)


def check_flag(value: Any, where: str, *, error: type[StagecutError] = InvalidGraphError) -> bool:
    """A boolean field: ``True``/``False`` or the integers 1/0 (as the workload files write them);
    strings are refused (``"false"`` and ``"0"`` are not booleans).

    >>> check_flag(1, "isBackwardNode"), check_flag(False, "isBackwardNode")
    (True, False)
    >>> check_flag("false", "supportedOnFpga")
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidGraphError: supportedOnFpga: 'false' is not a boolean (use true/false or 1/0)
    """
    if isinstance(value, (bool, numbers.Integral)) and value in (0, 1):
        return bool(value)
    if type(value).__name__ == "bool_":  # numpy.bool_
        return bool(value)
    raise error(f"{where}: {shown(value)} is not a boolean (use true/false or 1/0)")


def check_id(value: Any, where: str, *, error: type[StagecutError] = InvalidGraphError) -> Any:
    """An id read from JSON: a list becomes a tuple (recursively: tuple ids are written to JSON
    as lists), anything unhashable is refused naming ``where``.

    >>> check_id([0, ["a", 1]], "node id")
    (0, ('a', 1))
    >>> check_id({"a": 1}, "edges[0].sourceId")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidGraphError: edges[0].sourceId: {'a': 1} is not a valid id (a dict; ...)
    """
    out = _tuples(value, 0)
    try:
        hash(out)
    except TypeError:
        raise error(f"{where}: {shown(value)} is not a valid id (a {type(value).__name__}; use a string, "
                    "a number or a list)") from None
    return out



def check_field(obj: Any, key: str, where: str) -> Any:
    """The field ``key`` of a JSON object read from a file.

    Parameters
    ----------
    obj : Any
        What the file holds at ``where``: it must be a mapping (a JSON object).
    key : str
        The field's name.
    where : str
        Where ``obj`` is in the file, for the message (e.g. ``"nodes[3]"``).

    Returns
    -------
    Any
        ``obj[key]``, not checked further.

    Raises
    ------
    InvalidGraphError
        ``obj`` is not a mapping, or it has no field ``key``.

    Examples
    --------
    >>> check_field({"id": 7}, "id", "nodes[0]")
    7
    >>> check_field({"id": 7}, "cost", "nodes[0]")
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidGraphError: nodes[0]: missing field 'cost'
    """
    if not isinstance(obj, Mapping):
        raise InvalidGraphError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if key not in obj:
        raise InvalidGraphError(f"{where}: missing field {key!r}")
    return obj[key]


def check_list(value: Any, where: str) -> list[Any]:
    """A JSON list read from a file.

    Parameters
    ----------
    value : Any
        What the file holds at ``where``.
    where : str
        Where ``value`` is in the file, for the message (e.g. ``"edges"``).

    Returns
    -------
    list
        ``value`` itself.

    Raises
    ------
    InvalidGraphError
        ``value`` is not a list.

    Examples
    --------
    >>> check_list([1, 2], "edges")
    [1, 2]
    >>> check_list({"a": 1}, "edges")
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidGraphError: edges: expected a JSON list, got dict
    """
    if not isinstance(value, list):
        raise InvalidGraphError(f"{where}: expected a JSON list, got {type(value).__name__}")
    return value

def _tuples(value: Any, depth: int) -> Any:
    if isinstance(value, list) and depth < 100:
        return tuple(_tuples(x, depth + 1) for x in value)
    return value


#: The most nodes a generated graph (``rwnn``, ``regal_graph``) may have: about a kilobyte of
#: Python objects each, so 2 million nodes take about 2 GB before any solver runs.
MAX_GENERATED_NODES = 2_000_000
#: The memory budget of :func:`check_size` (bytes).
MEMORY_BUDGET = 4 * 2**30


def size_text(n: float) -> str:
    """``n`` bytes as a short text in TiB, GiB, MiB or bytes."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} bytes"


def check_size(parameter: str, nodes: float = 0, bytes_needed: float = 0) -> None:
    """Refuse, before anything is allocated, a request for more than :data:`MAX_GENERATED_NODES`
    nodes or more than :data:`MEMORY_BUDGET` bytes: a
    :class:`~stagecut.errors.MemoryLimitError` naming ``parameter`` and the estimated size.

    >>> check_size("modules", nodes=10 ** 7)
    Traceback (most recent call last):
    ...
    stagecut.errors.MemoryLimitError: modules: 10000000 nodes requested (about 9.31 GiB); at most 2000000 are supported
    """
    if nodes > MAX_GENERATED_NODES:
        raise MemoryLimitError(f"{parameter}: {nodes:.0f} nodes requested (about {size_text(nodes * 1000.0)}); "
                               f"at most {MAX_GENERATED_NODES} are supported")
    if bytes_needed > MEMORY_BUDGET:
        raise MemoryLimitError(f"{parameter}: the request needs about {size_text(bytes_needed)}, more than the "
                               f"{size_text(MEMORY_BUDGET)} budget")
