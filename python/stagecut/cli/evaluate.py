"""``stagecut evaluate GRAPH SPLIT``: score a given split in the max-load model.

    stagecut evaluate GRAPH SPLIT [-k K] [-l L] [--memory SIZE] [--json] [-o RESULT.json]

SPLIT is a result saved by ``stagecut partition -o``, a split in the workload format
(``{"fpgas": [{"nodes": [...]}, ...], "cpus": [...]}``, as ``--split-out`` writes it),
``{"blocks": [[ids], ...]}`` or ``{node: stage}`` (blocks and stages run on accelerators).
A split that breaks a limit is an answer (status infeasible, with the reasons), not an error.
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any

from stagecut.cli import _common

if TYPE_CHECKING:
    from stagecut.results import Result

__all__ = ["add_parser", "run", "as_result"]


def as_result(ev: Any, *, devices: int | None, cpus: int | None, memory: float | None,
              runtime_s: float = 0.0) -> Result:
    """The evaluator's verdict as a result (the summary block, the stage table, the shared JSON keys)."""
    from stagecut.results import Plan, Result

    if isinstance(ev, Result):
        return ev
    stages = tuple(ev.stages)
    used = {k: sum(1 for d in stages if d.kind == k) for k in ("accelerator", "cpu")}
    notes = tuple(ev.issues) + (() if ev.contiguous else ("the split is not contiguous",))
    return Plan(objective=ev.objective if ev.feasible else None,
                status="feasible" if ev.feasible else "infeasible", method="evaluate",
                runtime_s=runtime_s, stages=stages, notes=notes,
                stats={"max_load": ev.objective},
                devices=devices if devices is not None else used["accelerator"],
                cpus=cpus if cpus is not None else used["cpu"],
                memory=memory if memory is not None else math.inf, contiguous=ev.contiguous)


@_common.guarded
def run(args: argparse.Namespace) -> int:
    import time

    from stagecut.throughput import evaluate

    graph = _common.load_graph(args.graph)
    placement = _common.read_placement(args.split, graph)
    memory = _common.memory_of(args, graph)
    start = time.perf_counter()
    ev = evaluate(graph, placement, memory=memory, devices=args.devices, cpus=args.cpus)
    result = as_result(ev, devices=args.devices if args.devices is not None else graph.defaults.get("accelerators"),
                       cpus=args.cpus if args.cpus is not None else graph.defaults.get("cpus"),
                       memory=memory, runtime_s=time.perf_counter() - start)
    return _common.report(result, args, display=_common.display_of(args, graph))


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser("evaluate", help="score a given split in the max-load model (does it fit? its load?)",
                              description=_common.doc(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    _common.add_graph(p)
    p.add_argument("split", metavar="SPLIT",
                   help="a saved partition result (-o), a fpgas/cpus split (--split-out), "
                        "{\"blocks\": [[ids], ...]} or {node: stage}")
    _common.add_devices(p, "accelerators the split may use", "the file's maxFPGAs, else unchecked",
                        old=("--accelerators",))
    p.add_argument("-l", "--cpus", type=_common.nonnegative_int, default=None, metavar="L",
                   help="CPUs the split may use (default: the file's maxCPUs, else unchecked)")
    _common.add_memory(p, "memory per accelerator", "the file's maxSizePerFPGA, else unlimited")
    _common.add_deprecated(p, "--memory-from-file", "memory_from_file", "memory is read from the file by default",
                           flag=True)
    _common.add_output(p)
    p.set_defaults(func=run)
    return p
