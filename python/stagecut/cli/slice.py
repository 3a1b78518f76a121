"""``stagecut slice GRAPH``: SliceGraph pipeline partitioning in the MTPP cost model.

    stagecut slice GRAPH [-k K] [--method brkga|random|mla|mla-weighted|dp|order|auto] [--seed S]
                         [--decodes N] [--population P] [--generations G] [--islands I]
                         [--memory SIZE] [--bandwidth RATE] [--reserved SIZE] [--time-unit ms|s]
                         [--max-ideals N] [--improve S | --no-improve] [--restarts N|auto]
                         [--ignore-colocation] [--json]
                         [-o RESULT.json] [--plot FILE.png]

A stage (block) costs its work, the tensors entering and leaving it, and the parameters that
overflow the fast memory (``--memory``, the file's maxSizePerFPGA by default), read at
``--bandwidth``; without a bandwidth the memory is a hard limit. Example:

    stagecut slice regal:200:barabasi_albert:7 -k 16 --decodes 10000
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from stagecut.cli import _common, _plot
from stagecut.cli._choices import SLICE_METHODS as METHODS
from stagecut.cli.partition import write_split

__all__ = ["add_parser", "run", "add_mtpp_memory", "mtpp_memory"]

TIME_UNITS = {"ms": 1e-3, "s": 1.0}


def add_mtpp_memory(p: argparse.ArgumentParser, *, reserved: tuple[str, ...]) -> None:
    """The MTPP memory model flags, shared with ``certify``."""
    _common.add_memory(p, "fast memory per stage", "the file's maxSizePerFPGA, else no memory term",
                       old=("--fast-memory",))
    _common.add_deprecated(p, "--memory-from-file", "memory_from_file", "memory is read from the file by default",
                           flag=True)
    _common.add_bandwidth(p, "bandwidth at which parameters over the fast memory are read",
                          "none: the fast memory is a hard limit", "bytes per time unit of the input (bytes/ms "
                          "for the workload files)")
    p.add_argument(reserved[0], *reserved[1:], dest="reserved", default=None, metavar="SIZE",
                   help="fast memory reserved for activations: bytes, or with a unit (default: 0)")
    p.add_argument("--time-unit", choices=tuple(TIME_UNITS), default="ms",
                   help="time unit of the input's costs, to convert a --bandwidth given with units "
                        "(default: ms, the workload files' unit)")
    p.add_argument("--ignore-colocation", action="store_true",
                   help="treat the graph as a plain DAG: a forward node and its backward node may go to "
                        "different stages (default: keep colocation classes together)")


def mtpp_memory(args: argparse.Namespace, graph: Any) -> dict[str, Any]:
    """``memory``, ``bandwidth`` and ``reserved_memory`` for the MTPP solvers ('none' -> no memory term)."""
    from stagecut.units import parse_bytes

    memory = _common.memory_of(args, graph)
    return {
        "memory": None if memory is None or math.isinf(memory) else memory,
        "bandwidth": _common.bandwidth_of(args, time_unit_s=TIME_UNITS[args.time_unit]),
        "reserved_memory": 0.0 if args.reserved is None else parse_bytes(args.reserved, flag="--reserved",
                                                                         allow_unlimited=False),
    }


#: defaults of the search flags (the flags default to None: given or not is checked)
POPULATION, GENERATIONS, ISLANDS, MAX_IDEALS = 100, 100, 1, 1_000_000
#: the search methods (they read --decodes, --restarts, --population, --generations and --islands;
#: spectral-order only the first two, multilevel only --restarts)
SEARCH = ("brkga", "random", "mla", "mla-weighted", "spectral-order", "multilevel", "auto")
SEARCH_ONLY = (("decodes", "--decodes"), ("population", "--population"), ("generations", "--generations"),
               ("islands", "--islands"), ("restarts", "--restarts"))


def _restarts(text: str) -> int | str:
    """``--restarts``: a count or ``auto``."""
    if text == "auto":
        return text
    try:
        count = _common.nonnegative_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a count (0, 1, 2...) or 'auto'") from None
    if count > 2**32:
        raise argparse.ArgumentTypeError(f"at most 2**32 restarts, got {text[:40]}")
    return count


_restarts.__name__ = "count or 'auto'"


def _given(value: Any, default: Any) -> Any:
    return default if value is None else value


@_common.guarded
def run(args: argparse.Namespace) -> int:
    from stagecut.mtpp import slice_graph

    _common.requires(args, args.method == "dp", "--method dp", (("max_ideals", "--max-ideals"),))
    _common.requires(args, args.method in SEARCH, f"--method {', '.join(SEARCH)}", SEARCH_ONLY)
    brkga = [m for m in SEARCH if m not in ("spectral-order", "multilevel")]
    _common.requires(args, args.method in brkga, f"--method {', '.join(brkga)}", SEARCH_ONLY[1:4])
    _common.requires(args, args.method != "multilevel", f"--method {', '.join(m for m in SEARCH if m != 'multilevel')}",
                     SEARCH_ONLY[:1])
    if args.restarts == "auto" and args.time_limit is None:
        raise _common.bad_argument("--restarts", "auto runs searches until the time limit: give --time-limit S")
    graph = _common.load_graph(args.graph)
    plan = slice_graph(graph, devices=args.devices, method=args.method, seed=args.seed,
                       population=_given(args.population, POPULATION),
                       generations=_given(args.generations, GENERATIONS), decodes=args.decodes,
                       islands=_given(args.islands, ISLANDS), max_ideals=_given(args.max_ideals, MAX_IDEALS),
                       colocate=not args.ignore_colocation, time_limit=args.time_limit,
                       improve=False if args.no_improve else args.improve, restarts=_given(args.restarts, 0),
                       **mtpp_memory(args, graph))
    if args.split_out:
        write_split(args.split_out, plan)
    _plot.write(args, plan)
    return _common.report(plan, args, display=_common.display_of(args, graph))


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser("slice", help="split a large graph into at most K stages (MTPP model: SliceGraph)",
                              description=_common.doc(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    _common.add_graph(p)
    _common.add_devices(p, "most pipeline stages", "the file's maxFPGAs", old=("--stages",))
    p.add_argument("--method", choices=METHODS, default="brkga",
                   help="brkga: genetic search over node priorities, each order cut optimally by SliceGraph; "
                        "random: the best of --decodes random orders; mla, mla-weighted: search for an order "
                        "with short edges first; spectral-order: sweeps along the graph's spectral embedding "
                        "(--decodes of them; best on graphs with a geometry); multilevel: coarsen the graph by "
                        "contracting edges, plan the coarsest graph, refine the plan on the way back (best on "
                        "sparse graphs of hundreds of nodes and more); dp: the proven optimum (ideal DP, "
                        "small graphs); order: SliceGraph on one topological order; auto: dp when the graph has "
                        "at most 40,000 ideals (half the time limit at most), else spectral-order, multilevel "
                        "(on more than 150 units), mla-weighted, brkga and mla in turn (and --restarts more), "
                        "the cheapest plan kept (default: brkga)")
    p.add_argument("--time-limit", type=_common.positive_number, default=None, metavar="S",
                   help="seconds; on expiry the best answer so far (status time_limit) and its bound (default: none)")
    improve = p.add_mutually_exclusive_group()
    improve.add_argument("--improve", type=_common.positive_number, default=None, metavar="S",
                   help="then improve the plan by exact re-splits of two blocks at a time for at most S seconds, "
                        "inside --time-limit (default: 2 s for brkga, random, mla, mla-weighted, "
                        "spectral-order and multilevel; none for "
                        "order and dp); the answer is never worse than the search's")
    improve.add_argument("--no-improve", action="store_true",
                   help="the search's plan as it is: no re-splits of two blocks")
    p.add_argument("--seed", type=_common.nonnegative_int, default=0,
                   help="random seed; the same seed gives the same answer on any number of threads (default: 0)")
    p.add_argument("--decodes", type=_common.positive_int, default=None, metavar="N",
                   help="budget of decoded orders: brkga and mla stop there, random samples this many, "
                        "spectral-order sweeps this many (default 48) "
                        "(default: --population x --generations = 10,000; brkga and mla also stop after "
                        "--generations generations, which is 100 + 100 x 80 = 8,100 decodes with the defaults: "
                        "the first population, then the 80%% non-elite of each generation)")
    p.add_argument("--population", type=_common.positive_int, default=None, metavar="P",
                   help="BRKGA population size (default: 100)")
    p.add_argument("--generations", type=_common.positive_int, default=None, metavar="G",
                   help="BRKGA generations when --decodes is not given (default: 100)")
    p.add_argument("--islands", type=_common.positive_int, default=None, metavar="I",
                   help="independent BRKGA populations sharing the budget; the best wins (default: 1)")
    p.add_argument("--restarts", type=_restarts, default=None, metavar="N|auto",
                   help="then N more searches from seeds S+1, S+2... (each improved), keeping the cheapest plan; "
                        "auto: as many as fit in --time-limit (default: 0)")
    add_mtpp_memory(p, reserved=("--reserved",))
    p.add_argument("--max-ideals", type=_common.positive_int, default=None, metavar="N",
                   help="dp only: most ideals the exact DP may enumerate (default: 1,000,000)")
    _common.add_output(p)
    _plot.add_plot(p, "the block costs (work, tensors, overflow) against the lower bound")
    p.add_argument("--split-out", metavar="FILE", default=None,
                   help="also write the stages as a fpgas split in the workload's format (default: not written)")
    p.set_defaults(func=run)
    return p
