"""The ``stagecut`` command: parser assembly and :func:`main`.

Every subcommand is one module of :mod:`stagecut.cli` with ``add_parser(subparsers)``; they
share the grammar of :mod:`stagecut.cli._common`. :func:`main` imports only the module of the
subcommand it runs: ``stagecut --help`` and ``stagecut --version`` import no subcommand (nor
numpy, nor the solvers) and start in a small fraction of a second.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Collection, Sequence
from typing import Any

from stagecut import _startup
from stagecut.cli._parser import COMMANDS, EXIT_INTERRUPTED, EXIT_USAGE, Parser
from stagecut.cli._quiet import add_quiet, print_parse_notes, quieted

__all__ = ["main", "build_parser", "command_of"]

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

def __getattr__(name: str) -> Any:
    if name == "load_graph":  # kept importable from here
        from stagecut.cli._common import load_graph

        return load_graph
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Version(argparse.Action):
    """``--version``: the installed version (read from the package metadata only when asked:
    ``importlib.metadata`` is a noticeable part of a ``--help``'s start-up)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kw: Any) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0,
                         help="show stagecut's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from stagecut import __version__

        print(f"stagecut {__version__}")
        parser.exit()


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The ``stagecut`` parser.

    ``commands``: the subcommands whose parsers are built in full (their modules imported);
    the others are listed by name and summary only (enough for ``stagecut --help`` and for a
    usage error). Default: all of them.
    """
    parser = Parser(prog="stagecut", description=DESCRIPTION, epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version)
    parser.add_argument("--debug", action="store_true",
                        help="on an internal error, print the traceback (also STAGECUT_DEBUG=1)")
    add_quiet(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=Parser)
    for name, (module, summary) in COMMANDS.items():
        if commands is None or name in commands:
            importlib.import_module(module).add_parser(sub)
        else:
            sub.add_parser(name, help=summary, add_help=False)
    return parser


#: the main parser's own flags (none takes a value): what may come before the subcommand
_MAIN_FLAGS = ("-h", "--help", "--version", "--debug", "-q", "--quiet")


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` runs (the first word after the main parser's flags), or ``None``
    (``--help``, ``--version``, a usage error)."""
    for arg in argv:
        if arg in _MAIN_FLAGS:
            continue
        return arg if arg in COMMANDS else None
    return None


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
        argv = sys.argv[1:] if argv is None else list(argv)
        command = command_of(argv)
        parser = build_parser(() if command is None else (command,))
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # --help, --version, usage errors
            return e.code if isinstance(e.code, int) else (0 if e.code is None else EXIT_USAGE)
        from stagecut.progress import reporting  # (the core: not needed for --help)
        quiet = bool(getattr(args, "quiet", False))
        # progress bars by default (shown only on a terminal, past 2 s); --quiet: no bar, notes or warnings
        with warnings.catch_warnings(), quieted(quiet), reporting(not quiet):
            warnings.showwarning = _no_warning if quiet else _one_line_warning
            print_parse_notes(args)
            return int(args.func(args))
    except KeyboardInterrupt:  # outside the command's own handler: setting up, or the notes
        print("stagecut: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception:
        if _startup.seen():  # Ctrl-C that surfaced as another exception (an interrupted import)
            print("stagecut: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
