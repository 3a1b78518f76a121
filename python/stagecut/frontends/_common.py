"""What the front ends share: the missing-extra error, the bandwidth argument, the
not-expressible error of the exports, and the warnings about suspicious sizes."""

from __future__ import annotations

import importlib
import math
import warnings
from collections.abc import Iterable
from types import ModuleType
from typing import Any, TypeVar

from stagecut.errors import BackendUnavailableError, InvalidArgumentError, StagecutWarning
from stagecut.frontends._unionfind import UnionFind
from stagecut.frontends.shared import charge_tied
from stagecut.units import parse_bandwidth
from stagecut.validate import check_number

_T = TypeVar("_T")

__all__ = ["NotExpressibleError", "require", "bandwidth_bytes_per_s", "check_sizes", "UnionFind", "with_backward"]


class NotExpressibleError(InvalidArgumentError):
    """A plan cannot be written in the target's terms (a stage that does not start at a module,
    stages that are not contiguous in program order...); the message names the stage, the node
    and the reason."""


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`BackendUnavailableError` naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise BackendUnavailableError(
            f"this front end needs {module.split('.')[0]}, which is not installed: "
            f"pip install 'stagecut[{extra}]'") from e


def bandwidth_bytes_per_s(bandwidth: Any) -> float:
    """The ``bandwidth`` argument in bytes per second: a positive number, or a string with units
    (``"25GB/s"``); a plain number is bytes per second."""
    if isinstance(bandwidth, str):
        value = parse_bandwidth(bandwidth, time_unit_s=1.0, flag="bandwidth")
    else:
        value = check_number(bandwidth, "bandwidth (bytes per second)", positive=True,
                             error=InvalidArgumentError)
    if not 0 < value < math.inf:
        raise InvalidArgumentError(
            f"bandwidth: expected a finite positive number of bytes per second, got {bandwidth!r}")
    return float(value)


def check_sizes(output_bytes: Iterable[float], comm: float, compute: float, notes: list[str]) -> None:
    """Warn (a :class:`StagecutWarning`, also added to ``notes``) when every output size is 0, or
    when the communication exceeds the compute by orders of magnitude (mismatched units)."""
    sizes = list(output_bytes)
    if len(sizes) > 1 and not any(sizes):
        msg = "every node's output size is 0 bytes: communication will cost nothing"
        notes.append(msg)
        warnings.warn(msg, StagecutWarning, stacklevel=3)
    if compute > 0 and comm > 1000 * compute:
        msg = (f"the nodes' communication ({comm:.3g} s in total) exceeds their compute ({compute:.3g} s) "
               "by over 1000x: check that bandwidth is in bytes per second")
        notes.append(msg)
        warnings.warn(msg, StagecutWarning, stacklevel=3)


def trace_with_backward(trace: _T, factor: float) -> _T:
    """A trace (a dataclass with ``graph`` and ``notes``) with :func:`with_backward`'s backward
    nodes added to its graph and a note saying so.

    Raises
    ------
    InvalidArgumentError
        As :func:`with_backward`.
    """
    import dataclasses

    src: Any = trace
    notes = (*src.notes, f"training: a backward node per node at {factor:g}x its forward time")
    graph = with_backward(src.graph, factor)
    tied = getattr(src, "tied", None)
    if tied:  # replicated tied parameters: their users' backward nodes pay the gradient all-reduce
        graph = charge_tied(graph, tied, src.bandwidth)
        notes = (*notes, f"training: the gradient all-reduce of {len(tied)} tied parameter(s) charged to their "
                 "users' backward nodes")
    return dataclasses.replace(trace, graph=graph, notes=notes)  # type: ignore[type-var]


def with_backward(graph: Any, factor: float = 2.0) -> Any:
    """``graph`` (forward only) plus one backward node per node, the convention of the training
    workloads: ``<id>_bwd`` with ``backward=True``, ``factor`` times the forward node's time, no
    memory (the weights are counted on the forward node), and as ``comm`` the gradients it sends
    back: the outputs of the node's predecessors (the same sizes as the activations). Edges
    ``v -> v_bwd`` (the stashed activation) and ``v_bwd -> u_bwd`` for each edge ``u -> v``; each
    node and its backward node share a colocation class (the forward node's, or a new one named
    after it).

    Raises
    ------
    InvalidArgumentError
        A negative or non-finite ``factor``, or a graph that already has backward nodes.
    """
    from stagecut.graph import Graph, Node

    factor = check_number(factor, "backward_factor", error=InvalidArgumentError)
    if graph.is_training:
        raise InvalidArgumentError("the graph already has backward nodes")
    nodes = list(graph.nodes)
    fwd = [n.id for n in graph.nodes]
    cls = {n.id: (n.colocation if n.colocation is not None else n.id) for n in graph.nodes}
    out = [Node(id=n.id, compute=n.compute, memory=n.memory, comm=n.comm, kinds=n.kinds, colocation=cls[n.id],
                name=n.name) for n in nodes]
    for i, n in enumerate(nodes):
        comm = math.fsum(nodes[j].comm for j in graph.pred[i])
        out.append(Node(id=f"{n.id}_bwd", compute={k: factor * t for k, t in n.compute.items()}, memory=0.0,
                        comm=comm, kinds=n.kinds, colocation=cls[n.id], backward=True,
                        name=f"{n.name or n.id} (backward)"))
    edges = list(graph.edges) + [(v, f"{v}_bwd") for v in fwd] + [(f"{v}_bwd", f"{u}_bwd") for u, v in graph.edges]
    return Graph(out, edges, graph.defaults)
