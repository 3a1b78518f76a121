"""The ``stagecut certify`` subcommand (auto-loaded by :mod:`stagecut.cli`).

``stagecut certify FILE SPLIT.json [--stages K] [--levels simple,bottleneck,...]`` scores a
partition in the MTPP cost model and prints the ladder of lower bounds as it climbs; ``--json``
prints the certificate as one JSON object. SPLIT.json holds ``{"blocks": [[ids], ...]}`` (a
SliceGraph plan), a split (``fpgas`` / ``cpus`` lists of ``{"nodes"}``), or ``{node: stage}``.
"""

from __future__ import annotations

import json
import math
import sys

__all__ = ["add_parser"]


def _levels(text: str) -> tuple:
    from stagecut.mtpp.bounds import LEVELS

    out = tuple(x.strip() for x in text.replace(" ", ",").split(",") if x.strip())
    bad = [x for x in out if x not in LEVELS]
    if bad or not out:
        raise ValueError(f"--levels: {bad[0] if bad else text!r} is not one of {', '.join(LEVELS)}")
    return out


def _read_blocks(path: str, graph):
    with open(path) as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if isinstance(data, dict) and "blocks" in data:
        return [list(b) for b in data["blocks"]]
    if isinstance(data, dict) and ("fpgas" in data or "cpus" in data):
        from stagecut.formats import split_from_dict

        return split_from_dict(data, graph)
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        # {node: stage}; JSON keys are strings: map them back to the graph's ids
        by_str = {str(n.id): n.id for n in graph.nodes}
        return {by_str.get(k, k): v for k, v in data.items()}
    raise ValueError(f"{path}: expected blocks, a split or a node -> stage object")


def _cmd_certify(args) -> int:
    from stagecut.mtpp.certify import certify
    from stagecut.cli.main import load_graph

    try:
        levels = _levels(args.levels)
        graph = load_graph(args.file)
        plan = _read_blocks(args.split, graph)
    except (ValueError, OSError) as e:
        print(f"stagecut: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2

    def show(r, best):
        if args.json:
            return
        b = "-" if not math.isfinite(r.bound) else f"{r.bound:.6g}"
        print(f"  {r.level:<17} bound {b:>12}  {r.status:<11} {r.seconds:8.2f} s   best {best:.6g}", flush=True)

    if not args.json:
        print(f"certifying {args.split} on {args.file}: levels {', '.join(levels)}", flush=True)
    cert = certify(graph, plan, stages=args.stages, levels=levels, time_limit=args.time_limit,
                   fast_memory=args.fast_memory, bandwidth=args.bandwidth, reserved_memory=args.reserved_memory,
                   colocate=not args.ignore_colocation, solver=args.solver, threads=args.threads, workers=args.workers, seed=args.seed,
                   verbose=args.verbose, on_level=show)
    if args.json:
        print(json.dumps(cert.to_json()))
    else:
        lb = "-" if not math.isfinite(cert.lower_bound) else f"{cert.lower_bound:.6g}"
        print(f"objective {cert.objective:.6g}  lower bound {lb}  ratio {cert.ratio:.4f}  ({cert.stages} stages)")
    return 0


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("certify", help="lower bounds and approximation ratio of an MTPP partition")
    p.add_argument("file", help="workload JSON file")
    p.add_argument("split", help="partition JSON: {blocks: [[ids]]}, a fpgas/cpus split, or {node: stage}")
    p.add_argument("--stages", "-k", type=int, default=None,
                   help="number of stages (default: the file's maxFPGAs, at least the plan's blocks)")
    p.add_argument("--levels", default="simple,bottleneck,bottleneck-guess,exact",
                   help="comma-separated ladder (default: simple,bottleneck,bottleneck-guess,exact)")
    p.add_argument("--time-limit", type=float, default=600.0, help="budget in seconds for the ladder (default 600)")
    p.add_argument("--fast-memory", type=float, default=None, help="fast memory per stage, bytes (default: none)")
    p.add_argument("--bandwidth", type=float, default=None,
                   help="overflow bandwidth, bytes per time unit (default: hard memory limit)")
    p.add_argument("--reserved-memory", type=float, default=0.0, help="memory reserved for activations, bytes")
    p.add_argument("--ignore-colocation", action="store_true",
                   help="treat the graph as a plain DAG (as slice --ignore-colocation does)")
    p.add_argument("--solver", choices=("cbc", "highs"), default="cbc")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--workers", type=int, default=1, help="worker processes for bottleneck-guess")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verbose", action="store_true", help="show the solver log")
    p.add_argument("--json", action="store_true", help="print the certificate as one JSON object")
    p.set_defaults(func=_cmd_certify)
