"""The ``stagecut`` command: parser assembly and :func:`main`.

Every subcommand is one module of :mod:`stagecut.cli` with ``add_parser(subparsers)``; they
share the grammar of :mod:`stagecut.cli._common`.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from stagecut import __version__, _startup
from stagecut.cli import _common
from stagecut.cli import certify as certify_cmd
from stagecut.cli import demo as demo_cmd
from stagecut.cli import evaluate as evaluate_cmd
from stagecut.cli import latency as latency_cmd
from stagecut.cli import partition as partition_cmd
from stagecut.cli import plan as plan_cmd
from stagecut.cli import show as show_cmd
from stagecut.cli import slice as slice_cmd
from stagecut.cli import sweep as sweep_cmd
from stagecut.cli import trace as trace_cmd
from stagecut.progress import reporting

__all__ = ["main", "build_parser", "load_graph"]

load_graph = _common.load_graph  # kept importable from here

DESCRIPTION = """\
Split a DNN computation graph across devices: optimally where that is tractable, with a
proven bound where it is not.

Which subcommand answers which question:
  partition  How do I split this graph into contiguous pipeline stages on K accelerators
             (and L CPUs) to get the most throughput?  (max-load model; exact DP, DPL or IP)
  evaluate   What does this given split cost in that model, and does it fit?
  slice      How do I split a large graph into at most K stages when parameters that do
             not fit in fast memory are streamed?  (MTPP model; SliceGraph search or DP)
  certify    How far from optimal is an MTPP split?  (a ladder of proven lower bounds)
  plan       How do I train this model on K devices: pipeline stages, data and tensor
             parallelism, recomputation?  (Piper)
  latency    How short can one request be on these devices (CPU + accelerators over PCIe,
             GPUs in servers)?  (makespan; list scheduling, MILP, the authors' latency IP)
  sweep      Run many of these (graphs x methods x K x memory x seeds) on Dask, one Parquet row
             each, resumable; --report TABLE summarizes a table per K.
  trace      Turn an ONNX model into a workload file (times in ms, sizes in bytes); any
             subcommand also reads MODEL.onnx as GRAPH.
  show       Print a result saved with -o again.
  demo       Run partition on a real workload (or a built-in example) to see the output.

Terms:
  MTPP    max-throughput pipeline partitioning: a stage costs its work, the tensors entering
          and leaving it, and the parameters that overflow fast memory read at a bandwidth.
  DPL     the exact DP restricted to the n + 1 prefixes of one topological order: fast,
          feasible, not proven optimal (partition falls back to it when ideals are too many).
  ideals  node sets closed under predecessors (downsets); a contiguous pipeline is a chain
          of ideals, so the exact DPs enumerate them (their count decides what is tractable).
  TMPC    one of a layer's profiled ways to run in Piper: a tensor-parallel degree t and
          memory options (e.g. activation recomputation) with its time, parameters, memory.

Common grammar: GRAPH is a workload FILE, example:NAME, regal:N[:MODEL[:SEED]] or
rwnn:modules=M:channels=C[:dep=sdep|wdep][:size=10|32][:model=er|ws|ba][:seed=S] or
MODEL.onnx; -k/--devices is the number of devices (stages); --memory and --bandwidth take units
(16GiB, 512MB, 25GB/s); memory defaults to the file's; --json prints the result JSON;
-o FILE saves it.
"""

EPILOG = """\
exit status: 0 an answer (an infeasible instance is an answer, not an error); 2 bad input or
usage (one line on stderr); 1 a bug in stagecut (please report it; --debug shows the
traceback); 130 interrupted.
"""

#: the subcommand modules, in the order of the help
SUBCOMMANDS = (partition_cmd, evaluate_cmd, slice_cmd, certify_cmd, plan_cmd, latency_cmd, sweep_cmd, trace_cmd,
               show_cmd, demo_cmd)


def build_parser() -> argparse.ArgumentParser:
    """The whole ``stagecut`` parser."""
    parser = _common.Parser(prog="stagecut", description=DESCRIPTION, epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"stagecut {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="on an internal error, print the traceback (also STAGECUT_DEBUG=1)")
    _common.add_quiet(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                parser_class=_common.Parser)
    for mod in SUBCOMMANDS:
        mod.add_parser(sub)
    return parser


def _one_line_warning(message: Any, category: Any, filename: str, lineno: int,
                      file: Any = None, line: Any = None) -> None:
    text = str(message).strip().splitlines()
    print(f"stagecut: warning: {text[0] if text else category.__name__}", file=sys.stderr)


def _no_warning(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
    pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    try:
        _startup.release()  # from here on Ctrl-C is KeyboardInterrupt, caught below and by the handler
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # --help, --version, usage errors
            return e.code if isinstance(e.code, int) else (0 if e.code is None else _common.EXIT_USAGE)
    except KeyboardInterrupt:
        print("stagecut: interrupted", file=sys.stderr)
        return _common.EXIT_INTERRUPTED
    quiet = bool(getattr(args, "quiet", False))
    # progress bars by default (shown only on a terminal, past 2 s); --quiet: no bar, notes or warnings
    with warnings.catch_warnings(), _common.quieted(quiet), reporting(not quiet):
        warnings.showwarning = _no_warning if quiet else _one_line_warning
        _common.print_parse_notes(args)
        return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
