"""An ONNX model as a graph in the command line's units: what ``stagecut trace`` writes and what
every subcommand reads when its GRAPH is ``MODEL.onnx`` (:func:`onnx_graph`).

Shared by :mod:`stagecut.cli.trace` and :func:`stagecut.cli._common.load_graph`, so that neither
imports the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported on first use: 'stagecut trace --help' needs no graph model
    from stagecut.graph import Graph

__all__ = ["onnx_graph", "in_milliseconds", "ONNX_BANDWIDTH", "ONNX_FLOPS_PER_S"]

#: the link between stages for a GRAPH given as MODEL.onnx: 10 GB/s (1e10 bytes per second)
ONNX_BANDWIDTH = "10GB/s"
#: the FLOP rate of the FLOP model for a GRAPH given as MODEL.onnx: 1e12 FLOP per second
ONNX_FLOPS_PER_S = 1e12
_MS_PER_S = 1e3


def in_milliseconds(graph: Graph) -> Graph:
    """``graph`` (times in seconds, as the front ends give) with its times and comm in
    milliseconds, the workload format's unit.

    Raises
    ------
    InvalidGraphError
        A scaled time overflows (not for a front end's graph).
    """
    from stagecut.graph import Graph, Node

    nodes = [Node(id=n.id, compute={k: t * _MS_PER_S for k, t in n.compute.items()}, memory=n.memory,
                  comm=n.comm * _MS_PER_S, kinds=n.kinds, colocation=n.colocation, backward=n.backward, name=n.name)
             for n in graph.nodes]
    return Graph(nodes, graph.edges, graph.defaults)


def onnx_graph(path: str, *, bandwidth: str | float = ONNX_BANDWIDTH, profile: str = "flops",
               flops_per_s: float = ONNX_FLOPS_PER_S, dims: dict[str, int] | None = None,
               repeat: int = 5) -> Graph:
    """The graph of an ONNX file in the command line's units (times in ms, sizes in bytes).

    Parameters
    ----------
    path : str
        The ``.onnx`` file.
    bandwidth : str or float
        The link between stages (``"10GB/s"``, or bytes per second).
    profile : {"flops", "onnxruntime"}
    flops_per_s : float
        FLOP per second of the FLOP model.
    dims : dict of str to int, optional
        Values of symbolic dimensions.
    repeat : int
        Profiled runs (``profile="onnxruntime"``).

    Returns
    -------
    Graph

    Raises
    ------
    BackendUnavailableError
        onnx (or onnxruntime for the profiler) is not installed.
    InvalidArgumentError
        A bad setting or an unreadable model.
    InvalidGraphError
        A model with no operator.
    """
    from stagecut.frontends.onnx import trace_onnx

    trace = trace_onnx(path, bandwidth=bandwidth, profile=profile, flops_per_s=flops_per_s, dims=dims,
                       repeat=repeat)
    return in_milliseconds(trace.graph)
