"""The pieces of the command line that its start-up needs, and nothing heavier.

``stagecut --help`` and ``stagecut --version`` import this module, :mod:`stagecut.cli._quiet`
and :mod:`stagecut.cli.main` only (no numpy, no solver, no Rust core): the parser class whose
usage errors are one line, the exit statuses, and the one-line summary of every subcommand (the
list ``stagecut --help`` prints without importing the subcommands' modules).
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

__all__ = ["EXIT_OK", "EXIT_BUG", "EXIT_USAGE", "EXIT_INTERRUPTED", "EXIT_SIGPIPE", "Parser", "COMMANDS"]

EXIT_OK, EXIT_BUG, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_SIGPIPE = 0, 1, 2, 130, 141


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr (exit 2)."""

    def error(self, message: str) -> NoReturn:
        print(f"stagecut: error: {message} (see '{self.prog} --help')", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


#: subcommand -> (its module, its one-line summary in ``stagecut --help``), in the order of the
#: help; each module's ``add_parser`` registers the same summary (a test holds them equal)
COMMANDS: dict[str, tuple[str, str]] = {
    "partition": ("stagecut.cli.partition",
                  "best contiguous pipeline split on K accelerators and L CPUs (max-load model)"),
    "evaluate": ("stagecut.cli.evaluate", "score a given split in the max-load model (does it fit? its load?)"),
    "slice": ("stagecut.cli.slice", "split a large graph into at most K stages (MTPP model: SliceGraph)"),
    "certify": ("stagecut.cli.certify", "proven lower bounds and the gap of an MTPP split"),
    "plan": ("stagecut.cli.plan",
             "a training plan on K devices: pipeline stages x data x tensor parallelism, recomputation (Piper)"),
    "latency": ("stagecut.cli.latency",
                "place one request on heterogeneous devices to minimise its makespan (list scheduling, MILP, IP)"),
    "sweep": ("stagecut.cli.sweep",
              "run a sweep of planner calls on Dask (graphs x methods x K x memory x seeds) and tabulate it"),
    "trace": ("stagecut.cli.trace", "turn an ONNX model into a workload file (times in ms, sizes in bytes)"),
    "show": ("stagecut.cli.show", "print a result saved with -o (or --json) again"),
    "demo": ("stagecut.cli.demo", "run partition on GNMT training from ../shared/workloads (or a built-in example)"),
}
