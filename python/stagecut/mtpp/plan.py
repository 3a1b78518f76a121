"""The plan an MTPP search returns (:class:`SlicePlan`), and how a plan given in any of the
usual forms is read as blocks (:func:`plan_blocks`).

Kept apart from the searches so that the search (:mod:`~stagecut.mtpp.slicegraph`), the
re-splits (:mod:`~stagecut.mtpp.improve`) and the certificate (:mod:`~stagecut.mtpp.certify`)
share one result type without importing each other.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from stagecut.errors import InvalidArgumentError, InvalidGraphError
from stagecut.graph import Graph, kahn_order
from stagecut.mtpp.exact import Relaxation
from stagecut.results import NodeId, Result, Stage

__all__ = ["SlicePlan", "plan_blocks"]


@dataclass(frozen=True, kw_only=True)
class SlicePlan(Result):
    """A pipeline partition under the MTPP cost model and how it was found (a
    :class:`~stagecut.results.Result`).

    ``objective`` is what the independent evaluator (:func:`stagecut.mtpp.evaluate`) says of
    ``stages`` (``None`` when no partition was found); ``lower_bound`` the simple bound of
    :func:`stagecut.mtpp.lower_bound` (the optimum itself for ``method="dp"``). Each stage is a
    block: device ``"accelerator:i"``, load = block cost, parts ``work`` / ``io`` /
    ``overflow``, memory = the parameters it holds. ``stats``: ``decodes``, ``units`` (after
    folding), ``slice_rounds`` (threshold rounds of the slicing DP), ``ideals`` (``"dp"``).

    Attributes
    ----------
    devices : int
        Most blocks allowed (``k``).
    memory, bandwidth, reserved_memory, colocate
        The memory model and colocation setting it was solved for (``memory``: ``inf`` when
        unlimited).
    order : tuple of node ids
        The topological order the blocks are cut from (for ``"dp"``: the blocks one after the other).
    history : tuple of float
        The search's best objective after each generation (one value for ``"order"`` and
        ``"dp"``), before the re-splits of ``improve``.
    exact_by : str, optional
        For ``"dp"``: how the optimum was proven (``"ideal DP"``, ``"relaxation + repair"``...).
    relaxation : Relaxation, optional
        For ``"dp"``: the last round of the leaf relaxation, when one ran.
    """

    objective_name: ClassVar[str] = "largest block cost (MTPP)"

    devices: int
    memory: float = math.inf
    bandwidth: float | None = None
    reserved_memory: float = 0.0
    colocate: bool = True
    order: tuple[NodeId, ...] = ()
    history: tuple[float, ...] = ()
    exact_by: str | None = None
    relaxation: Relaxation | None = None


def _ordered_groups(graph: Graph, assignment: Mapping[NodeId, Any]) -> list[list[NodeId]]:
    """Blocks from ``{node: stage}``, ordered along the quotient DAG."""
    groups: dict[Hashable, list[NodeId]] = {}
    for v, s in assignment.items():
        groups.setdefault(tuple(s) if isinstance(s, (list, tuple)) else s, []).append(v)
    where = {v: s for s, vs in groups.items() for v in vs}
    keys = list(groups)
    succ: dict[Hashable, set[Hashable]] = {s: set() for s in keys}
    for a, b in graph.edges:
        if a in where and b in where and where[a] != where[b]:
            succ[where[a]].add(where[b])
    order = kahn_order(keys, succ)
    if len(order) != len(keys):
        raise InvalidGraphError("the plan's stages form a cycle: it is not a pipeline")
    return [groups[s] for s in order]


def plan_blocks(graph: Graph, plan: Any) -> list[list[NodeId]]:
    """Blocks (lists of node ids, in pipeline order) from a result (its ``stages``), a list of
    blocks or of ``Stage`` objects, the JSON of a result (``{"stages": [{"nodes": ...}, ...]}``) or of an old plan
    (``{"blocks": ...}``), a ``{node: stage}`` mapping or a ``{node: (kind, index)}`` mapping.

    Raises
    ------
    InvalidArgumentError
        ``plan`` is none of these, or a result that holds no partition.
    InvalidGraphError
        A mapping whose stages form a cycle.

    Examples
    --------
    >>> from stagecut.graph import Graph
    >>> plan_blocks(Graph.chain([1.0, 1.0, 1.0]), {2: "b", 0: "a", 1: "a"})
    [[0, 1], [2]]
    """
    if isinstance(plan, Result):
        if not plan.stages:
            raise InvalidArgumentError(f"plan: the {type(plan).__name__} holds no partition (status {plan.status})")
        return [list(s.nodes) for s in plan.stages]
    if isinstance(plan, Mapping):
        if isinstance(plan.get("stages"), (list, tuple)):
            return [list(s["nodes"]) if isinstance(s, Mapping) else list(s) for s in plan["stages"]]
        if isinstance(plan.get("blocks"), (list, tuple)):
            return [list(b) for b in plan["blocks"]]
        return _ordered_groups(graph, plan)
    if isinstance(plan, (list, tuple)):
        return [list(b.nodes) if isinstance(b, Stage) else list(b) for b in plan]
    raise InvalidArgumentError(f"plan: cannot read blocks from a {type(plan).__name__}")
