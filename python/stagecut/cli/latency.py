"""``stagecut latency GRAPH``: place one request to minimise its makespan (latency).

    stagecut latency GRAPH [-k K] [--topology pcie|servers|DEVICES.json] [--gpus-per-server G]
                           [--intra-bandwidth RATE] [--inter-bandwidth RATE] [--comm-bandwidth RATE]
                           [--memory SIZE] [--method auto|best-device|met|greedy|heft|m-heft|m-greedy|m-topo|
                           m-chain|sa|ea|local|lns|milp|split|ip|pcie-greedy|brute|quickp|quickp-p1|metis|mcmc]
                           [--time-limit S] [--seed S]
                           [--solver cbc|highs] [--q Q] [--evaluate SPLIT [--semantics asap|pieces]]
                           [--json] [-o RESULT.json] [--plot FILE.png]

Topologies: ``pcie`` (default): a CPU pool and K accelerators (the file's maxFPGAs) of the
file's maxSizePerFPGA, a node's ``comm`` paid once between an accelerator and the CPU, twice
between accelerators. ``servers``: K GPUs in servers of G (default: one server), NVLink inside
(--intra-bandwidth, default 50GB/s) and Ethernet across (--inter-bandwidth, default 20GB/s);
a workload file's ``comm`` is a time, so say at which bandwidth it was measured
(--comm-bandwidth) to turn it into bytes. A JSON file: explicit devices and bandwidths (see
``stagecut.latency.Devices.from_dict``). ``--evaluate SPLIT`` scores a given split instead of
solving (``pieces``: the PCIe-star semantics of the workloads' authors; ``asap``: the general
one).

A networkx node-link JSON *operator graph* (QuickP's format: ``directed``, ``nodes`` with
``comp_cost`` in microseconds and ``mem``, ``links`` with ``tensor_size_in_bit``; see
``stagecut.latency.quickp.opgraph``) is recognised by its ``directed`` and ``links`` keys: it runs on K
GPUs (default: every device of the file) with the times of the file's first K devices, in
servers of --gpus-per-server GPUs (default 2), NVLink (--intra-bandwidth) inside and Ethernet
(--inter-bandwidth) across; only its largest weakly connected component is kept (a note says
how many nodes were dropped). Examples:

    stagecut latency ../shared/workloads/latency-inputs/LayerGraphs/bert24_inference.json --method heft
    stagecut latency operators.json -k 4 --method quickp --time-limit 60
"""

from __future__ import annotations

import argparse
import math
import os
import warnings
from collections.abc import Mapping
from typing import Any

from stagecut.cli import _common, _plot
from stagecut.errors import InvalidArgumentError

__all__ = ["add_parser", "run"]

TIME_UNITS = {"ms": 1e-3, "s": 1.0}


def _rwnn_problem(args: argparse.Namespace, graph: Any) -> tuple[Any, list[str]]:
    """A randomly wired network on its own devices (a CPU, a T4 and an A100 over PCIe; its
    ``comm`` is output bytes): DiviML's setting."""
    from stagecut.latency import LatencyProblem
    from stagecut.rwnn import rwnn_devices

    for dest, flag in (("devices", "-k/--devices"), ("memory", "--memory"), ("gpus_per_server", "--gpus-per-server"),
                       ("intra_bandwidth", "--intra-bandwidth"), ("inter_bandwidth", "--inter-bandwidth"),
                       ("comm_bandwidth", "--comm-bandwidth")):
        if getattr(args, dest, None) is not None:
            raise _common.bad_argument(flag, "an rwnn: graph runs on its own CPU + T4 + A100 (give --topology "
                                             "FILE for other devices)")
    devices = rwnn_devices()
    return LatencyProblem(graph, devices, "comm"), [f"devices: {', '.join(devices.names)} over PCIe (rwnn)"]


def _devices(args: argparse.Namespace, graph: Any) -> tuple[Any, Any]:
    """``(devices, output_bytes)`` for :func:`stagecut.latency.place`."""
    from stagecut.latency import Devices
    from stagecut.units import parse_bandwidth

    unit = TIME_UNITS[args.time_unit or "ms"]
    memory = _common.memory_of(args, graph)
    memory = math.inf if memory is None else memory
    k = args.devices if args.devices is not None else graph.defaults.get("accelerators")
    topo = args.topology or "pcie"
    servers_only = (("gpus_per_server", "--gpus-per-server"), ("intra_bandwidth", "--intra-bandwidth"),
                    ("inter_bandwidth", "--inter-bandwidth"), ("comm_bandwidth", "--comm-bandwidth"))
    _common.requires(args, topo == "servers", "--topology servers", servers_only)
    if topo == "pcie":
        if k is None:
            raise _common.bad_argument("-k/--devices", "not given and the file has no maxFPGAs")
        return Devices.pcie_star(k, memory=memory), None
    if topo == "servers":
        if k is None:
            raise _common.bad_argument("-k/--devices", "the number of GPUs is needed with --topology servers")
        g = args.gpus_per_server or k
        if k % g:
            raise _common.bad_argument("--gpus-per-server", f"{g} does not divide the {k} GPUs")
        intra = parse_bandwidth(args.intra_bandwidth or "50GB/s", flag="--intra-bandwidth", time_unit_s=unit)
        inter = parse_bandwidth(args.inter_bandwidth or "20GB/s", flag="--inter-bandwidth", time_unit_s=unit)
        kinds = {kd for n in graph.nodes for kd in n.compute}
        kind = "gpu" if "gpu" in kinds else "accelerator"
        devs = Devices.servers(k // g, g, intra_bandwidth=intra, inter_bandwidth=inter, memory=memory, kind=kind)
        return devs, _output_bytes(args, graph, unit)
    data = _common.read_json(topo, "a device description")
    try:
        devs = Devices.from_dict(data)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{topo}: {e}") from None
    return devs, (None if devs.unit == "relative" else _output_bytes(args, graph, unit))


def _output_bytes(args: argparse.Namespace, graph: Any, unit: float) -> Any:
    from stagecut.units import parse_bandwidth

    if not any(n.comm for n in graph.nodes):
        return None
    if args.comm_bandwidth is None:
        raise _common.bad_argument("--comm-bandwidth", "needed: the file gives each output as a transfer time "
                                   "(comm); say at which bandwidth it was measured (e.g. 12GB/s for PCIe)")
    rate = parse_bandwidth(args.comm_bandwidth, flag="--comm-bandwidth", time_unit_s=unit)
    return {n.id: n.comm * rate for n in graph.nodes}


def _node_link(spec: str) -> Mapping[str, Any] | None:
    """The parsed file when ``spec`` names a node-link operator graph (a JSON object with
    ``directed`` and ``links``), else ``None`` (then :func:`_common.load_graph` reads it)."""
    if spec.startswith(("example:", "regal:", "rwnn:")) or spec.lower().endswith(".onnx") or not os.path.isfile(spec):
        return None
    data = _common.read_json(spec, "a workload or a node-link operator graph")
    if isinstance(data, Mapping) and "directed" in data and "links" in data:
        return data
    return None


def _operator_problem(args: argparse.Namespace, data: Mapping[str, Any]) -> tuple[Any, list[str]]:
    """The :class:`LatencyProblem` of a node-link operator graph on K GPUs, and the reader's
    notes."""
    from stagecut.errors import StagecutWarning
    from stagecut.latency import Devices, LatencyProblem, operator_devices
    from stagecut.latency.quickp.opgraph import operator_graph_from_data
    from stagecut.units import parse_bandwidth

    if args.topology == "pcie":
        raise _common.bad_argument("--topology", "pcie is for workload files; a node-link operator graph "
                                   "runs on GPU servers (servers, or a JSON device description)")
    for attr, flag, why in (("comm_bandwidth", "--comm-bandwidth", "gives tensor sizes in bits"),
                            ("time_unit", "--time-unit", "gives times in microseconds")):
        if getattr(args, attr) is not None:
            raise _common.bad_argument(flag, f"not for a node-link operator graph: it {why}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StagecutWarning)   # the dropped nodes: a note instead
        graph, output_bytes, info = operator_graph_from_data(data, args.devices, where=args.graph)
    memory = _common.memory_of(args)
    memory = math.inf if memory is None else memory
    k = int(info["gpus"])
    if args.topology not in (None, "servers"):
        _common.requires(args, False, "--topology servers", (("gpus_per_server", "--gpus-per-server"),
                                                               ("intra_bandwidth", "--intra-bandwidth"),
                                                               ("inter_bandwidth", "--inter-bandwidth")))
        try:
            devs = Devices.from_dict(_common.read_json(args.topology, "a device description"))
        except InvalidArgumentError as e:
            raise InvalidArgumentError(f"{args.topology}: {e}") from None
    else:
        per = args.gpus_per_server or 2
        if k > per and k % per:
            raise _common.bad_argument("--gpus-per-server", f"{per} does not divide the {k} GPUs")
        rates = [parse_bandwidth(text, flag=flag, time_unit_s=1e-6) / 1e3
                 for text, flag in ((args.intra_bandwidth or "50GB/s", "--intra-bandwidth"),
                                    (args.inter_bandwidth or "20GB/s", "--inter-bandwidth"))]
        devs = operator_devices(k, gpus_per_server=per, intra_gbps=rates[0], inter_gbps=rates[1], memory=memory)
    notes = [*info["notes"], f"operator graph: {info['nodes']} operators on {k} GPUs (times in microseconds)"]
    return LatencyProblem(graph, devs, output_bytes), notes


@_common.guarded
def run(args: argparse.Namespace) -> int:
    from stagecut.latency import LatencyProblem, place

    _common.requires(args, args.method == "ip", "--method ip", (("q", "--q"),))
    _common.requires(args, args.method in ("milp", "ip", "auto", "quickp", "quickp-p1", "split"),
                     "--method milp, ip, quickp, quickp-p1, split or auto", (("solver", "--solver"),))
    _common.requires(args, args.method in ("milp", "split"), "--method milp or split", (("batch", "--batch"),))
    data = _node_link(args.graph)
    notes: list[str] = []
    if data is not None:
        problem, notes = _operator_problem(args, data)
        graph = problem.graph
    else:
        graph = _common.load_graph(args.graph)
        if args.graph.startswith("rwnn:") and args.topology is None:
            problem, notes = _rwnn_problem(args, graph)
        else:
            devices, output_bytes = _devices(args, graph)
            problem = LatencyProblem(graph, devices, output_bytes)
    display = _common.display_of(args, graph, time="us" if data is not None else "ms")
    if args.evaluate:
        if args.method != "auto":
            raise _common.bad_argument("--evaluate", "scores a given split: it takes no --method")
        return _common.report(_plot.write(args, _evaluate(args, graph, problem)), args, extra_notes=notes,
                              display=display)
    _common.requires(args, False, "--evaluate", (("semantics", "--semantics"),))
    if args.batch is not None:  # the batched throughput MILP, or batched SPLIT
        from stagecut.latency.diviml.batched import solve_batched
        from stagecut.latency.diviml.split_multi import solve_split_batched

        solve = solve_batched if args.method == "milp" else solve_split_batched
        batched = solve(problem, args.batch, time_limit=args.time_limit, solver=args.solver or "cbc")
        return _common.report(batched, args, extra_notes=notes, display=display)
    options: dict[str, Any] = {}
    if args.q is not None:
        options["q"] = args.q
    schedule = place(problem, method=args.method, time_limit=args.time_limit, seed=args.seed,
                     solver=args.solver or "cbc", **options)
    _plot.write(args, schedule)
    return _common.report(schedule, args, extra_notes=notes, display=display)


def _evaluate(args: argparse.Namespace, graph: Any, problem: Any) -> Any:
    from stagecut.latency import evaluate_schedule

    split = _common.read_placement(args.evaluate, graph)
    names = problem.devices.names
    placement = {}
    for v, (kind, idx) in split.items():
        name = "cpu" if kind == "cpu" and "cpu" in names else f"{kind}:{idx}"
        if name not in names and kind == "accelerator" and f"gpu:{idx}" in names:
            name = f"gpu:{idx}"   # blocks without a device kind, on GPUs
        if name not in names:
            raise _common.bad_argument("--evaluate", f"node {v!r} is on device {name!r}, which this problem does not "
                                       f"have (devices: {', '.join(names[:8])}{', ...' if len(names) > 8 else ''})")
        placement[v] = name
    default = "pieces" if problem.devices.topology == "pcie" else "asap"
    if (args.semantics or default) == "pieces":
        if problem.devices.topology != "pcie":
            raise _common.bad_argument("--semantics", "pieces is the PCIe-star semantics: use --topology pcie")
        from stagecut.latency.pcie.pieces import evaluate_pieces

        return evaluate_pieces(problem, placement)
    return evaluate_schedule(problem, None, placement)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    from stagecut.cli._choices import LATENCY_METHODS as METHODS

    p = subparsers.add_parser("latency", help="place one request on heterogeneous devices to minimise its "
                                              "makespan (list scheduling, MILP, IP)",
                              description=_common.doc(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    _common.add_graph(p)
    _common.add_devices(p, "accelerators (pcie) or GPUs (servers)", "the file's maxFPGAs")
    p.add_argument("--topology", default=None, metavar="pcie|servers|FILE",
                   help="pcie: a CPU pool and K accelerators; servers: K GPUs in servers of --gpus-per-server; "
                        "FILE: a JSON device description (default: pcie; servers for a node-link operator graph)")
    p.add_argument("--gpus-per-server", type=_common.positive_int, default=None, metavar="G",
                   help="servers only: GPUs per server (default: all K in one server; 2 for a node-link "
                        "operator graph)")
    _common.add_bandwidth(p, "servers only: bandwidth between GPUs of one server", "50GB/s",
                          "bytes per time unit of the input", dest="intra_bandwidth", flag="--intra-bandwidth")
    _common.add_bandwidth(p, "servers only: bandwidth between servers", "20GB/s",
                          "bytes per time unit of the input", dest="inter_bandwidth", flag="--inter-bandwidth")
    _common.add_bandwidth(p, "servers only: the bandwidth at which the file's comm times were measured",
                          "none: required when nodes have comm", "bytes per time unit of the input",
                          dest="comm_bandwidth", flag="--comm-bandwidth")
    p.add_argument("--time-unit", choices=tuple(TIME_UNITS), default=None,
                   help="time unit of the input's costs, to convert bandwidths given with units (default: ms; "
                        "a node-link operator graph is in microseconds)")
    _common.add_memory(p, "memory per accelerator or GPU", "the file's maxSizePerFPGA, else unlimited")
    p.add_argument("--method", choices=METHODS, default="auto",
                   help="best-device, met, greedy, heft: list-scheduling baselines; m-heft, m-greedy: the same "
                        "holding memory back for the nodes that gain most; m-topo, m-chain: a topological order "
                        "packed or cut (DP) into one run per device; sa, ea, local: searches; lns: "
                        "large-neighbourhood search around the critical path; milp: the exact DiviML MILP; "
                        "split: the MILP per module between cut vertices, joined by a chain DP; "
                        "brute: every placement and order (8 nodes at most); "
                        "pcie-greedy, ip: the PCIe-star greedy and latency IP of the workloads' authors "
                        "(their pieces semantics); quickp, quickp-p1: QuickP (fusion, co-location groups for "
                        "quickp, the reduced IP on the fused graph); metis, mcmc: QuickP's baselines (a balanced "
                        "cut, single-node MCMC); auto: the baselines, local search, then the MILP in the "
                        "time left, with the gap (default: auto)")
    p.add_argument("--time-limit", type=_common.positive_number, default=None, metavar="S",
                   help="seconds; on expiry the best schedule so far (status time_limit) and its bound "
                        "(default: none; auto: 60)")
    p.add_argument("--seed", type=_common.nonnegative_int, default=0, help="random seed (default: 0)")
    p.add_argument("--solver", choices=("cbc", "highs"), default=None, help="MIP backend (default: cbc)")
    p.add_argument("--batch", type=_common.positive_int, default=None, metavar="L",
                   help="milp, split only: L inputs in batches (the batched throughput MILP, or batched SPLIT; "
                        "batch sizes 1, 2, 4, ... and L, a batch of b taking b ** 0.5 times one input's time, "
                        "b on a CPU) (default: one request)")
    p.add_argument("--q", type=_common.positive_int, default=None, metavar="Q",
                   help="ip only: contiguous pieces per accelerator (default: 1)")
    p.add_argument("--evaluate", metavar="SPLIT", default=None,
                   help="score this split (a fpgas/cpus split or a saved result) instead of solving "
                        "(default: solve)")
    p.add_argument("--semantics", choices=("pieces", "asap"), default=None,
                   help="--evaluate only: pieces (PCIe star, the authors' semantics) or asap (default: pieces on "
                        "the PCIe star, else asap)")
    _common.add_output(p)
    _plot.add_plot(p, "the Gantt chart of the schedule (a row per device, the critical path outlined)")
    p.set_defaults(func=run)
    return p
