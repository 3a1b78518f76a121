"""A user's order or node priorities for ``slice_graph(method="order")``, in the core's terms:
the units' order (one unit per node) or their priorities (each unit: its smallest node
priority; forced groups ranked by their earliest node in the order)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph
from stagecut.mtpp.units import Units
from stagecut.results import NodeId

__all__ = ["Priorities", "order_priorities", "positions", "priority_values"]

#: Node priorities: a mapping from node id, or one value per node in node order.
Priorities = Mapping[NodeId, float] | Sequence[float] | npt.NDArray[np.float64]


def positions(graph: Graph, order: Sequence[NodeId]) -> list[int]:
    """Node positions of ``order`` (node ids); an unknown id is an :class:`InvalidArgumentError`."""
    pos = []
    for v in order:
        if v not in graph.index:
            raise InvalidArgumentError(f"order: unknown node {v!r}")
        pos.append(graph.index[v])
    return pos


def order_priorities(graph: Graph, units: Units, order: Sequence[NodeId]) -> dict[str, Any]:
    """The core's ``order`` (one unit per node) or ``priorities`` (forced groups: Kahn on the
    groups, each ranked by its earliest node in the order) for a user's order."""
    pos = positions(graph, order)
    seen: set[int] = set()
    for i in pos:
        if i in seen:
            raise InvalidArgumentError(f"order: node {graph.nodes[i].id!r} repeated")
        seen.add(i)
    if len(pos) != len(graph.nodes):
        gone = next(nd.id for j, nd in enumerate(graph.nodes) if j not in seen)
        raise InvalidArgumentError(f"order: node {gone!r} missing ({len(pos)} of {len(graph.nodes)} nodes given)")
    at = {i: r for r, i in enumerate(pos)}
    for u, v in graph.edges:
        if at[graph.index[u]] > at[graph.index[v]]:
            raise InvalidArgumentError(f"order: node {v!r} comes before its predecessor {u!r}")
    unit_pos = np.asarray([units.unit_of[i] for i in pos], dtype=np.int64)
    if len(units.members) == len(graph.nodes):
        return {"order": unit_pos}
    uprio = np.full(len(units.members), np.inf)
    np.minimum.at(uprio, unit_pos, np.arange(len(pos), dtype=np.float64))
    return {"priorities": uprio}


def priority_values(graph: Graph, units: Units, priorities: Priorities) -> dict[str, Any]:
    """The core's unit ``priorities`` (each unit: its smallest node priority)."""
    if isinstance(priorities, Mapping):
        missing = [v.id for v in graph.nodes if v.id not in priorities]
        if missing:
            raise InvalidArgumentError(f"priorities: no value for node {missing[0]!r}")
        vals = [priorities[v.id] for v in graph.nodes]
    else:
        vals = list(priorities)
        if len(vals) != len(graph.nodes):
            raise InvalidArgumentError(f"priorities: expected {len(graph.nodes)} values, got {len(vals)}")
    try:
        arr = np.asarray(vals, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidArgumentError("priorities: values must be numbers") from None
    if np.isnan(arr).any():
        raise InvalidArgumentError("priorities: NaN value")
    uprio = np.full(len(units.members), np.inf)
    np.minimum.at(uprio, np.asarray(units.unit_of, dtype=np.int64), arr)
    return {"priorities": uprio}
