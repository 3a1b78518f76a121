"""``stagecut partition GRAPH``: the best contiguous pipeline split in the max-load model.

    stagecut partition GRAPH [-k K] [-l L] [--memory SIZE] [--method auto|dp|dpl|ip|local-search|pipedream|scotch]
                             [--max-ideals N] [--non-contiguous] [--time-limit S] [--solver cbc|highs]
                             [--json] [-o RESULT.json] [--split-out SPLIT.json] [--plot FILE.png]

Every setting defaults to the file's (``maxFPGAs``, ``maxCPUs``, ``maxSizePerFPGA``); when the
file's CPUs are added, the output says so.
"""

from __future__ import annotations

import argparse
from typing import Any

from stagecut.cli import _common, _plot
from stagecut.cli._choices import PARTITION_MAX_IDEALS as DEFAULT_MAX_IDEALS
from stagecut.cli._choices import PARTITION_METHODS as METHODS

__all__ = ["add_parser", "run", "cpu_note"]


def cpu_note(graph: Any, cpus_flag: int | None, result: Any) -> list[str]:
    """The note that the file's CPUs were added, unless the result already says so."""
    file_cpus = int(graph.defaults.get("cpus", 0) or 0)
    if cpus_flag is not None or file_cpus == 0:
        return []
    if any("cpu" in n.lower() for n in result.notes):
        return []
    return [f"the file's maxCPUs adds {file_cpus} CPU{'s' if file_cpus > 1 else ''} to the accelerators "
            "(--cpus 0 leaves them out)"]


def write_split(path: str, result: Any) -> None:
    """The workload's split format (``fpgas``/``cpus`` lists of ``{"nodes", "load"}``)."""
    if hasattr(result, "to_split"):
        data = result.to_split()
    else:  # one accelerator per stage
        data = {"maxLoad": result.to_json()["objective"], "cpus": [],
                "fpgas": [{"nodes": list(s.nodes), "load": s.load} for s in result.stages]}
    _common.write_json(path, data)


#: flags that only the integer program reads
IP_ONLY = (("non_contiguous", "--non-contiguous"), ("solver", "--solver"))


@_common.guarded
def run(args: argparse.Namespace) -> int:
    from stagecut.throughput import partition

    _common.requires(args, args.method == "ip", "--method ip", IP_ONLY)
    graph = _common.load_graph(args.graph)
    memory = _common.memory_of(args, graph)
    plan = partition(graph, devices=args.devices, cpus=args.cpus, memory=memory, method=args.method,
                     max_ideals=args.max_ideals, contiguous=not args.non_contiguous,
                     time_limit=args.time_limit, solver=args.solver or "cbc")
    if args.split_out:
        write_split(args.split_out, plan)
    _plot.write(args, plan)
    return _common.report(plan, args, extra_notes=cpu_note(graph, args.cpus, plan),
                          display=_common.display_of(args, graph))


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "partition", help="best contiguous pipeline split on K accelerators and L CPUs (max-load model)",
        description=_common.doc(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    _common.add_graph(p)
    _common.add_devices(p, "number of accelerators", "the file's maxFPGAs, else 1", old=("--accelerators",))
    p.add_argument("-l", "--cpus", type=_common.nonnegative_int, default=None, metavar="L",
                   help="number of CPUs (default: the file's maxCPUs, else 0)")
    _common.add_memory(p, "memory per accelerator", "the file's maxSizePerFPGA, else unlimited")
    _common.add_deprecated(p, "--memory-from-file", "memory_from_file", "memory is read from the file by default",
                           flag=True)
    p.add_argument("--method", choices=METHODS, default="auto",
                   help="dp: exact DP over all ideals (optimal); dpl: the DP on one topological order "
                        "(fast, not proven optimal); ip: the integer program (python-mip); "
                        "auto: dp when the ideals fit under --max-ideals, else dpl; the paper's baselines: "
                        "local-search (10 seeded restarts, usually non-contiguous), pipedream (branching "
                        "regions contracted to a path, then the DP; layer graphs), scotch (Scotch's gpart, "
                        "else pymetis) (default: auto)")
    p.add_argument("--max-ideals", type=_common.positive_int, default=DEFAULT_MAX_IDEALS, metavar="N",
                   help=f"most ideals the exact DP may enumerate (default: {DEFAULT_MAX_IDEALS:,})")
    p.add_argument("--non-contiguous", action="store_true",
                   help="ip only: allow splits whose stages are not contiguous (default: contiguous)")
    p.add_argument("--time-limit", type=_common.positive_number, default=None, metavar="S",
                   help="seconds, every method; on expiry the best split so far (status time_limit) and the "
                        "bound (default: none)")
    p.add_argument("--solver", default=None, choices=("cbc", "highs"),
                   help="ip only: MIP solver; highs needs the [highs] extra (default: cbc)")
    _common.add_output(p)
    _plot.add_plot(p, "the stage loads (compute + communication) against the lower bound")
    p.add_argument("--split-out", metavar="FILE", default=None,
                   help="also write the split in the workload's format (fpgas/cpus node lists), "
                        "which 'stagecut evaluate' and 'stagecut certify' read (default: not written)")
    p.set_defaults(func=run)
    return p
