"""``stagecut plan INPUT``: the Piper training planner.

    stagecut plan INPUT [-k K] [--memory SIZE] [--bandwidth RATE] [--batch N] [--exact-batch]
                        [--no-dp] [--no-tp] [--no-ar] [--knapsack heuristic|exact]
                        [--server-size G --intra-bandwidth RATE] [--json [--table]] [-o RESULT.json]

INPUT is a Piper JSON file (the format of ../shared/workloads/piper: per-layer TMPCs, times in
seconds, sizes in bytes, bandwidth in bytes/s) or example:NAME. Every setting defaults to the
file's. Example:

    stagecut plan ../shared/workloads/piper/gnmt.json -k 2 --memory 2.5GiB --bandwidth 25GiB/s
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from stagecut.cli import _common
from stagecut.errors import InvalidGraphError

__all__ = ["add_parser", "run", "load_problem", "PIPER_EXAMPLES"]

GIB = float(1 << 30)


def _transformer(tr: Any) -> Any:
    # 24 BERT-large-like layers (synthetic): 6 ms per sample, 16 MB of fp16 weights, 64 MB of
    # activations per microbatch in flight, 192 MB of weights+optimizer state, 2 MB per sample out
    return tr.chain_problem([6e-3] * 24, devices=8, memory=16 * GIB, bandwidth=25e9, batch=32, comm=2e6,
                            params=16e6, mem_a=64e6, mem_b=192e6)


#: example name -> (description, maker given ``stagecut.training``)
PIPER_EXAMPLES: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "transformer": ("a synthetic 24-layer transformer chain on 8 devices of 16 GiB at 25 GB/s", _transformer),
}


def load_problem(spec: str) -> Any:
    """The Piper problem an ``INPUT`` argument names (a Piper JSON file or ``example:NAME``).

    Raises
    ------
    InvalidGraphError
        Unreadable or malformed file, unknown example, or a plain-graph spec (``regal:``).
    """
    from stagecut import training

    if spec.startswith("example:"):
        name = spec.split(":", 1)[1]
        if name not in PIPER_EXAMPLES:
            raise InvalidGraphError(f"unknown example {name!r} for plan; choose one of {', '.join(PIPER_EXAMPLES)}")
        return PIPER_EXAMPLES[name][1](training)
    if spec.startswith("regal:"):
        raise InvalidGraphError(f"{spec!r}: plan needs a Piper input (layers with TMPCs), a regal graph has none; "
                                "use a Piper JSON file or example:transformer (or partition/slice for regal graphs)")
    return training.read_piper(spec)


@_common.guarded
def run(args: argparse.Namespace) -> int:
    from stagecut.training import plan_training
    from stagecut.units import parse_bytes

    if args.table and not args.json:
        raise _common.bad_argument("--table", "goes with --json (the TPS table for every k and s)")
    prob = load_problem(args.graph)
    memory = None if args.memory is None else parse_bytes(args.memory, flag="--memory", allow_unlimited=False)
    bandwidth = _common.bandwidth_of(args)
    intra = _common.bandwidth_of(args, dest="intra_bandwidth", flag="--intra-bandwidth")
    server: dict[str, Any] = {}
    if args.server_size is not None or intra is not None:
        file_g, file_intra = getattr(prob, "server_size", None), getattr(prob, "intra_bandwidth", None)
        g = args.server_size if args.server_size is not None else file_g
        if g is None or (intra if intra is not None else file_intra) is None:
            raise _common.bad_argument("--server-size", "goes with --intra-bandwidth (the file has neither)")
        server = {"server_size": g, "intra_bandwidth": intra if intra is not None else file_intra}
    plan = plan_training(prob, devices=args.devices, memory=memory, bandwidth=bandwidth, batch=args.batch,
                         exact_batch=args.exact_batch, data_parallel=not args.no_dp,
                         tensor_parallel=not args.no_tp, recompute=not args.no_ar, knapsack=args.knapsack,
                         time_limit=args.time_limit, **server)
    data = plan.to_json(include_table=True) if args.table else None
    return _common.report(plan, args, data=data, display=_common.display_of(args, time="s"))


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Register ``plan`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "plan", help="a training plan on K devices: pipeline stages x data x tensor parallelism, recomputation "
                     "(Piper)",
        description=_common.doc(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    examples = "; ".join(f"{k}: {v[0]}" for k, v in PIPER_EXAMPLES.items())
    _common.add_graph(p, help=f"a Piper JSON file, or example:NAME ({examples})")
    _common.add_devices(p, "K, number of devices", "the file's maxDevices")
    _common.add_memory(p, "M, memory per device", "the file's maxMemoryPerDevice")
    _common.add_bandwidth(p, "B, bandwidth between devices (servers)", "the file's bandwidth", "bytes/s")
    _common.add_deprecated(p, "--memory-gib", "memory", "--memory 8GiB", type=str, convert=lambda t: f"{t}GiB")
    _common.add_deprecated(p, "--bandwidth-gib", "bandwidth", "--bandwidth 25GiB/s", type=str,
                           convert=lambda t: f"{t}GiB/s")
    p.add_argument("-n", "--batch", type=_common.positive_int, default=None, metavar="N",
                   help="N, microbatches per batch (default: the file's mbsInBatch)")
    p.add_argument("--exact-batch", action="store_true",
                   help="data-parallel degrees sum to exactly N (default: at most N)")
    p.add_argument("--no-dp", action="store_true", help="no data parallelism (d = 1) (default: allowed)")
    p.add_argument("--no-tp", action="store_true", help="no tensor parallelism (t = 1) (default: allowed)")
    p.add_argument("--no-ar", action="store_true", help="no activation recomputation (default: allowed)")
    p.add_argument("--server-size", type=_common.positive_int, default=None, metavar="G",
                   help="two-level network: devices per server; tensor parallelism stays inside one "
                        "(default: the file's serverSize, else one level)")
    _common.add_bandwidth(p, "bandwidth inside a server", "the file's intraServerBandwidth", "bytes/s",
                          dest="intra_bandwidth", flag="--intra-bandwidth")
    _common.add_deprecated(p, "--intra-bandwidth-gib", "intra_bandwidth", "--intra-bandwidth 300GiB/s", type=str,
                           convert=lambda t: f"{t}GiB/s")
    p.add_argument("--time-limit", type=_common.positive_number, default=None, metavar="S",
                   help="seconds; on expiry the best answer so far (status time_limit) and its bound (default: none)")
    p.add_argument("--knapsack", choices=("heuristic", "exact"), default="heuristic",
                   help="per-stage TMPC choice: Piper's greedy, or exact for stages of at most 20 layers "
                        "(default: heuristic)")
    _common.add_output(p)
    p.add_argument("--table", action="store_true",
                   help="with --json: include the best TPS for every device count k and stage count s")
    p.set_defaults(func=run)
    return p
