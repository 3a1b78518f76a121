"""The ``stagecut`` command line.

``stagecut partition FILE`` splits a workload (JSON format of :mod:`stagecut.formats`) into
pipeline stages; ``stagecut evaluate FILE SPLIT.json`` scores a given split. ``--json`` prints
one JSON object on stdout. Infeasible is an answer (exit 0); bad input is an error (one line
on stderr, exit 2).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Sequence

from stagecut.errors import StagecutError
from stagecut.throughput.evaluate import evaluate
from stagecut.formats import read_split, read_workload
from stagecut.throughput.dp import DEFAULT_MAX_IDEALS, METHODS, partition

__all__ = ["main"]

# Subcommands contributed by other modules: each exposes add_parser(subparsers).
_PLUGINS = ("stagecut.cli.slice", "stagecut.cli.plan", "stagecut.cli.certify")


def _ranges(ids: Sequence) -> str:
    """Compact id list: 1-5,7,9-10 (for integer ids), else comma-separated."""
    if not all(isinstance(i, int) for i in ids):
        return ",".join(map(str, ids))
    xs = sorted(ids)
    out, start, prev = [], None, None
    for x in xs + [None]:
        if start is None:
            start = prev = x
        elif x is not None and x == prev + 1:
            prev = x
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = x
    return ",".join(out)


def _table(devices, width: int = 48) -> str:
    rows = [("device", "kind", "nodes", "load", "memory")]
    for pos, d in enumerate(devices):
        nodes = _ranges(list(d.nodes))
        if len(nodes) > width:
            nodes = nodes[: width - 3] + "..."
        rows.append((str(pos), d.kind, f"{len(d.nodes)}: {nodes}", f"{d.load:.4f}", f"{d.memory:.4g}"))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) if i in (1, 2) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def load_graph(spec: str):
    """A workload file path, or ``example:NAME`` for a built-in synthetic graph
    (``transformer``, ``transformer-training``, ``chain``)."""
    if spec.startswith("example:"):
        from stagecut import examples

        name = spec.split(":", 1)[1]
        makers = {
            "transformer": lambda: examples.transformer_like(layers=12),
            "transformer-training": lambda: examples.transformer_like(layers=12, training=True),
            "chain": lambda: examples.transformer_like(layers=0),
        }
        if name not in makers:
            raise StagecutError(f"unknown example {name!r}; choose one of {sorted(makers)}")
        return makers[name]()
    return read_workload(spec)


DEMO_FILE = "../shared/workloads/throughput-inputs/LayerGraphs/gnmt_training.json"


def _cmd_demo(args) -> int:
    import os

    spec = DEMO_FILE if os.path.exists(DEMO_FILE) else "example:transformer-training"
    print(f"stagecut partition {spec}\n")
    args.file = spec
    return _cmd_partition(args)


def _cmd_partition(args) -> int:
    graph = load_graph(args.file)
    plan = partition(graph, accelerators=args.accelerators, cpus=args.cpus, memory=args.memory,
                     method=args.method, max_ideals=args.max_ideals, contiguous=not args.non_contiguous,
                     time_limit=args.time_limit, solver=args.solver)
    if args.output:
        with open(args.output, "w") as f:
            json.dump(plan.to_split(), f, indent=1)
    if args.json:
        print(json.dumps(plan.to_json()))
        return 0
    if plan.status == "infeasible":
        print(f"infeasible: no contiguous split fits on {plan.accelerators} accelerators and "
              f"{plan.cpus} CPUs with memory {plan.memory:g} ({plan.method}, {plan.ideals} ideals)")
        return 0
    print(_table(plan.devices))
    bound = "" if plan.status == "optimal" or plan.lower_bound is None else f", lower bound {plan.lower_bound:.4f}"
    counts = f"{plan.ideals} ideals, {plan.ideal_pairs} ideal pairs, " if plan.ideals is not None else ""
    print(f"\ntime per sample: {plan.objective:.4f} ({plan.status}, method {plan.method}, "
          f"{counts}{plan.runtime_s:.2f} s{bound})")
    for note in plan.notes:
        print(f"note: {note}")
    return 0


def _cmd_evaluate(args) -> int:
    graph = load_graph(args.file)
    split = read_split(args.split, graph)
    ev = evaluate(graph, split, memory=args.memory, accelerators=args.accelerators, cpus=args.cpus)
    if args.json:
        print(json.dumps(ev.to_json()))
        return 0
    print(_table(ev.devices))
    verdict = "feasible" if ev.feasible else "INFEASIBLE: " + "; ".join(ev.issues)
    print(f"\nmax load (time per sample): {ev.objective:.4f} ({verdict}; "
          f"{'contiguous' if ev.contiguous else 'not contiguous'})")
    return 0


def _device_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--accelerators", "-k", type=int, default=None,
                   help="number of accelerators (default: the file's maxFPGAs)")
    p.add_argument("--cpus", "-l", type=int, default=None, help="number of CPUs (default: the file's maxCPUs)")
    p.add_argument("--memory", type=float, default=None,
                   help="memory per accelerator in bytes (default: the file's maxSizePerFPGA)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stagecut", description="Split DNN graphs across devices.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("partition", help="optimal contiguous pipeline split (max-load objective)")
    p.add_argument("file", help="workload JSON file, or example:transformer[-training]")
    _device_args(p)
    p.add_argument("--method", choices=METHODS, default="auto",
                   help="auto: exact DP if the ideals fit under --max-ideals, else DPL (default)")
    p.add_argument("--max-ideals", type=int, default=DEFAULT_MAX_IDEALS,
                   help=f"cap on ideals for the exact DP (default {DEFAULT_MAX_IDEALS})")
    p.add_argument("--non-contiguous", action="store_true", help="ip only: allow non-contiguous splits")
    p.add_argument("--time-limit", type=float, default=None, help="ip only: seconds (best found + bound)")
    p.add_argument("--solver", default="cbc", choices=("cbc", "highs"), help="ip only: MIP solver (default cbc)")
    p.add_argument("-o", "--output", help="write the split (fpgas/cpus JSON) to this file")
    p.set_defaults(func=_cmd_partition)
    demo = sub.add_parser("demo", help=f"partition {DEMO_FILE} (or a built-in example if absent)")
    demo.set_defaults(func=_cmd_demo, accelerators=None, cpus=None, memory=None, json=False,
                      method="auto", max_ideals=DEFAULT_MAX_IDEALS, output=None, non_contiguous=False,
                      time_limit=None, solver="cbc")
    e = sub.add_parser("evaluate", help="score a split in the max-load cost model")
    e.add_argument("file", help="workload JSON file")
    e.add_argument("split", help="split JSON file ({fpgas: [{nodes}], cpus: [{nodes}]})")
    _device_args(e)
    e.set_defaults(func=_cmd_evaluate)
    for name in _PLUGINS:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        mod.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (StagecutError, ValueError, OSError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"stagecut: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
