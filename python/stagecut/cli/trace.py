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
from stagecut.cli._onnx import ONNX_BANDWIDTH, ONNX_FLOPS_PER_S, onnx_graph
from stagecut.errors import InvalidArgumentError

__all__ = ["add_parser", "run", "onnx_graph", "ONNX_BANDWIDTH", "ONNX_FLOPS_PER_S"]


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

