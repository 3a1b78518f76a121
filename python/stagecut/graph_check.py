"""The check that an argument is a :class:`~stagecut.graph.Graph`, with a hint on how to get one.

It lives apart from :mod:`stagecut.validate` (the value checks, which :mod:`stagecut.graph`
itself uses) because it needs the ``Graph`` class: graph -> validate, and this module -> both.
"""

from __future__ import annotations

import numbers
from typing import Any

from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph
from stagecut.validate import shown

__all__ = ["check_graph"]


def check_graph(obj: Any, where: str = "graph", *, accept: tuple[type, ...] = ()) -> None:
    """Refuse anything but a :class:`~stagecut.graph.Graph` (or one of ``accept``, e.g. a problem
    object) with an :class:`~stagecut.errors.InvalidArgumentError` that says how to get one.

    >>> check_graph("model.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidArgumentError: graph: expected a stagecut.Graph, got str 'model.json' (read ...(path))
    """
    if isinstance(obj, (Graph, *accept)):
        return
    expected = " or ".join(["a stagecut.Graph", *(f"a {t.__name__}" for t in accept)])
    got = type(obj).__name__
    if isinstance(obj, str) or hasattr(obj, "__fspath__"):
        hint = f"{got} {shown(str(obj))} (read a workload file with stagecut.read_workload(path))"
    elif hasattr(obj, "is_directed") and hasattr(obj, "nodes"):
        hint = f"networkx {got} (convert it with stagecut.Graph.from_networkx(G))"
    elif isinstance(obj, (list, tuple)) and all(isinstance(x, numbers.Real) for x in obj[:10]):
        hint = f"{got} (a chain of layer costs: stagecut.Graph.chain(costs))"
    else:
        hint = got
    raise InvalidArgumentError(f"{where}: expected {expected}, got {hint}")
