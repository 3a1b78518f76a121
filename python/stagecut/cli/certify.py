"""``stagecut certify GRAPH SPLIT``: how far from optimal an MTPP split is.

    stagecut certify GRAPH SPLIT [-k K] [--levels simple,bottleneck,bottleneck-guess,exact]
                                 [--time-limit S] [--memory SIZE] [--bandwidth RATE] [--reserved SIZE]
                                 [--solver cbc|highs] [--threads N] [--workers N] [--json] [-o RESULT.json]

Scores the split in the MTPP cost model (as ``stagecut slice`` does) and climbs a ladder of
proven lower bounds (each level's line goes to stderr as it finishes); the summary's bound and
gap are the best bound and how far the split can be from the optimum. SPLIT is a result saved
by ``stagecut slice -o`` (or ``partition -o``), a fpgas/cpus split, ``{"blocks": [[ids], ...]}``
or ``{node: stage}``. A result saved by ``stagecut slice -o`` brings the problem it was solved
for: its device count, memory model, device kind and colocation are the defaults (``-k``, the
memory flags and ``--ignore-colocation`` still win).
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from stagecut.cli import _common
from stagecut.cli._choices import CERTIFY_EXTRA_LEVELS as EXTRA
from stagecut.cli._choices import CERTIFY_LEVELS as LEVELS
from stagecut.cli._choices import CERTIFY_PARTITION_LP_GROUPS as PARTITION_LP_GROUPS
from stagecut.cli.slice import add_mtpp_memory, mtpp_memory

__all__ = ["add_parser", "run"]


def _levels(text: str) -> tuple[str, ...]:
    out = tuple(x.strip() for x in text.replace(" ", ",").split(",") if x.strip())
    bad = [x for x in out if x not in LEVELS + EXTRA]
    if bad or not out:
        raise _common.bad_argument("--levels", f"{bad[0] if bad else text!r} is not one of "
                                   f"{', '.join(LEVELS + EXTRA)}")
    return out


def _progress(unit: str | None) -> Any:
    """The per-level progress line on stderr, times in ``unit`` (the input's)."""
    tail = "" if unit is None else f" {unit}"

    def show(r: Any, best: float) -> None:
        b = "none" if r.bound is None else f"{r.bound:.6g}{tail}"
        so_far = "none" if best == -math.inf else f"{best:.6g}{tail}"
        print(f"stagecut: certify: {r.level:<17} bound {b:>15}  {r.status:<11} {r.seconds:8.2f} s   "
              f"best bound {so_far}", file=sys.stderr, flush=True)

    return show


def _saved_plan(path: str) -> Any:
    """The :class:`~stagecut.mtpp.SlicePlan` a ``stagecut slice -o`` file holds (``None`` for any other split)."""
    from stagecut.cli._inputs import read_json
    from stagecut.cli.show import load_result

    data = read_json(path, "a split or a saved result")
    if not isinstance(data, dict) or data.get("kind") != "SlicePlan":
        return None
    return load_result(path)


@_common.guarded
def run(args: argparse.Namespace) -> int:
    from stagecut.mtpp import certify
    from stagecut.mtpp.certify import solved_for

    levels = None if args.levels is None else _levels(args.levels)
    graph = _common.load_graph(args.graph)
    placement = _common.read_placement(args.split, graph)
    display = _common.display_of(args, graph)
    memory = mtpp_memory(args, graph)
    settings = {**memory, "kind": None, "colocate": False if args.ignore_colocation else None}
    devices = args.devices
    saved = _saved_plan(args.split)  # (a saved slice result: the problem it was solved for, unless flags say)
    if saved is not None:
        if args.memory is None and args.bandwidth is None and args.reserved is None:
            settings.update(memory=None, bandwidth=None, reserved_memory=None)
        devices, settings = solved_for(saved, devices, settings)
    if settings["colocate"] is None:
        settings["colocate"] = True
    cert = certify(graph, placement, devices=devices, levels=levels, time_limit=args.time_limit,
                   solver=args.solver, threads=args.threads, workers=args.workers, seed=args.seed,
                   verbose=args.verbose, on_level=None if args.json or _common.quiet() else _progress(display.time),
                   **settings)
    return _common.report(cert, args, display=display)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = subparsers.add_parser("certify", help="proven lower bounds and the gap of an MTPP split",
                              description=_common.doc(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    _common.add_graph(p)
    p.add_argument("split", metavar="SPLIT",
                   help="a saved result (-o), a fpgas/cpus split, {\"blocks\": [[ids], ...]} or {node: stage}")
    _common.add_devices(p, "number of stages", "a saved slice result's, else the file's maxFPGAs, at least "
                        "the split's stages",
                        old=("--stages",))
    p.add_argument("--levels", default=None,
                   help="comma-separated ladder of bounds, climbed in order: simple (closed form), "
                        "node-cut, crossing, cover, prefix, spectral, sdp, subgraph (combinatorial: min cuts, forced "
                        "crossings, the blocks convex sets need, what a hard memory limit forces on the pipeline's "
                        "first and last blocks, the cuts balanced blocks pay (eigenvalues; a "
                        "semidefinite relaxation), exact optima of subgraphs), "
                        "block (MIPs: the block paying the fewest tensors must be nearly full), bottleneck (MIP), "
                        "bottleneck-guess (MIPs over guessed "
                        f"bottlenecks), exact (the full MIP), partition-lp (the LP over every block by column "
                        f"generation, minutes per tested T from about a hundred nodes) "
                        f"(default: {','.join(LEVELS)}, with partition-lp after sdp on graphs of at most "
                        f"{PARTITION_LP_GROUPS} groups that the whole-graph DP cannot solve, and subgraph "
                        f"after simple on graphs it can; levels given run as given)")
    p.add_argument("--time-limit", type=_common.positive_number, default=600.0, metavar="S",
                   help="seconds for the whole ladder; a combinatorial level gets a fifth of what is left "
                        "(sdp half; at least 5 s), partition-lp nine tenths, another MIP level an equal share with the "
                        "levels after it, the last level all of it (default: 600)")
    add_mtpp_memory(p, reserved=("--reserved",))
    _common.add_deprecated(p, "--reserved-memory", "reserved", "--reserved")
    p.add_argument("--solver", choices=("cbc", "highs"), default="cbc",
                   help="MIP solver; highs needs the [highs] extra (default: cbc)")
    p.add_argument("--threads", type=_common.positive_int, default=1, metavar="N",
                   help="MIP solver threads (default: 1)")
    p.add_argument("--workers", type=_common.positive_int, default=1, metavar="N",
                   help="worker processes for bottleneck-guess (default: 1)")
    p.add_argument("--seed", type=_common.nonnegative_int, default=0, help="MIP solver seed (default: 0)")
    p.add_argument("--verbose", action="store_true", help="show the MIP solver's log")
    _common.add_output(p)
    p.set_defaults(func=run)
    return p
