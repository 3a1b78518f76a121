"""``stagecut trace MODEL.onnx -o GRAPH.json``: an ONNX model as a workload file.

    stagecut trace MODEL.onnx -o GRAPH.json [--bandwidth RATE] [--profile flops|onnxruntime]
                              [--flops-per-s RATE] [--dims NAME=SIZE,...] [--repeat N]

One node per ONNX operator (the node names), written in the workload format every other
subcommand reads: times in milliseconds (``fpgaLatency``), sizes in bytes (``size``: the
weights a node holds), and each edge's ``cost`` the producer's output bytes / RATE, in
milliseconds. Times come from the FLOP model (FLOPs / --flops-per-s, default 1e12 FLOP/s) or,
with --profile onnxruntime, from onnxruntime's profiler (CPU, median of --repeat runs).

Any subcommand also takes MODEL.onnx directly as its GRAPH, with the defaults: the FLOP model at
1e12 FLOP/s and a link of 10 GB/s (1e10 bytes per second).
"""

from __future__ import annotations

import argparse

from stagecut.cli import _common
from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph, Node

__all__ = ["add_parser", "run", "onnx_graph", "ONNX_BANDWIDTH", "ONNX_FLOPS_PER_S"]

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


def _dims(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in text.split(","):
        name, eq, value = part.partition("=")
        if not eq or not name or not (value.isascii() and value.isdecimal()) or int(value) < 1:
            raise argparse.ArgumentTypeError(f"{part!r}: expected NAME=SIZE with a positive integer SIZE")
        out[name] = int(value)
    return out


@_common.guarded
def run(args: argparse.Namespace) -> int:
    if not args.graph.lower().endswith(".onnx"):
        raise InvalidArgumentError(f"{args.graph!r}: stagecut trace reads an ONNX model (a .onnx file)")
    graph = onnx_graph(args.graph, bandwidth=args.bandwidth or ONNX_BANDWIDTH, profile=args.profile,
                       flops_per_s=args.flops_per_s, dims=args.dims, repeat=args.repeat)
    from stagecut.formats import workload_to_dict
    from stagecut.units import bytes_text

    _common.write_json(args.output, workload_to_dict(graph))
    total = sum(n.compute.get("accelerator", 0.0) for n in graph.nodes)
    print(f"{args.output}: {len(graph)} nodes, {len(graph.edges)} edges, {total:.6g} ms of compute "
          f"({args.profile}), {bytes_text(sum(n.memory for n in graph.nodes))} of weights")
    return _common.EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser("trace", help="turn an ONNX model into a workload file (times in ms, sizes in bytes)",
                              description=_common.doc(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("graph", metavar="MODEL.onnx", help="the ONNX model")
    p.add_argument("-o", "--output", metavar="GRAPH.json", required=True,
                   help="where to write the workload JSON (required: no default)")
    _common.add_bandwidth(p, "link between stages", f"{ONNX_BANDWIDTH}, 1e10 bytes per second", "bytes per second")
    p.add_argument("--profile", choices=("flops", "onnxruntime"), default="flops",
                   help="times from the FLOP model, or from onnxruntime's profiler on the CPU (default: flops)")
    p.add_argument("--flops-per-s", type=_common.positive_number, default=ONNX_FLOPS_PER_S, metavar="RATE",
                   help=f"FLOP per second of the FLOP model (default: {ONNX_FLOPS_PER_S:g})")
    p.add_argument("--dims", type=_dims, default=None, metavar="NAME=SIZE,...",
                   help="values of the model's symbolic dimensions, e.g. batch=8 (default: none)")
    p.add_argument("--repeat", type=_common.positive_int, default=5, metavar="N",
                   help="profiled runs whose median is a node's time, after 2 warm-up runs (default: 5)")
    p.set_defaults(func=run)
    return p

