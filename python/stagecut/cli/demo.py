"""``stagecut demo``: run ``stagecut partition`` on a real workload to see what it prints.

    stagecut demo [--json]

Runs the exact pipeline split of GNMT training (../shared/workloads/throughput-inputs/
LayerGraphs/gnmt_training.json: the file's accelerators, CPUs and memory per accelerator) and
prints the summary block and the stage table. Without ../shared/workloads it says so in one
line and runs on the built-in synthetic transformer (example:transformer-training) instead.
"""

from __future__ import annotations

import argparse
import os
import pathlib

from stagecut.cli import _common
from stagecut.cli import partition as partition_cmd
from stagecut.cli._choices import PARTITION_MAX_IDEALS as DEFAULT_MAX_IDEALS

__all__ = ["add_parser", "run", "demo_input", "DEMO_FILE", "FALLBACK"]

DEMO_FILE = "throughput-inputs/LayerGraphs/gnmt_training.json"
FALLBACK = "example:transformer-training"


def _shared_dirs() -> list[pathlib.Path]:
    """Where ../shared/workloads may be: $STAGECUT_WORKLOADS, beside the working directory's parent,
    beside the project (an editable install)."""
    out = []
    if os.environ.get("STAGECUT_WORKLOADS"):
        out.append(pathlib.Path(os.environ["STAGECUT_WORKLOADS"]))
    out.append(pathlib.Path("..") / "shared" / "workloads")
    out.append(pathlib.Path(__file__).resolve().parents[3].parent / "shared" / "workloads")
    return out


def demo_input() -> tuple[str, bool]:
    """``(GRAPH spec, found)``: the GNMT workload if ../shared is there, else the fallback."""
    for d in _shared_dirs():
        path = d / DEMO_FILE
        if path.is_file():
            return str(path), True
    return FALLBACK, False


@_common.guarded
def run(args: argparse.Namespace) -> int:
    spec, found = demo_input()
    if not found:
        _common.note(f"../shared/workloads is absent, so the demo uses the built-in synthetic example {FALLBACK}")
    if not args.json:
        print(f"$ stagecut partition {spec}\n")
    ns = argparse.Namespace(graph=spec, devices=None, cpus=None, memory=None, method="auto",
                            max_ideals=DEFAULT_MAX_IDEALS, non_contiguous=False, time_limit=None, solver=None,
                            json=args.json, output=None, split_out=None, debug=getattr(args, "debug", False))
    return int(partition_cmd.run.__wrapped__(ns))  # type: ignore[attr-defined]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "demo", help="run partition on GNMT training from ../shared/workloads (or a built-in example)",
        description=_common.doc(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print the result JSON instead of the summary and table")
    p.set_defaults(func=run)
    return p
