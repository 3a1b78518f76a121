"""``stagecut slice``: SliceGraph pipeline partitioning under the MTPP cost model.

    stagecut slice FILE --stages K --method brkga|random|mla|mla-weighted|dp|order --seed S [--json]

FILE is a workload JSON file (times in ms, sizes in bytes), or ``regal:N[:MODEL[:SEED]]`` for a
synthetic REGAL-style graph. Infeasible is an answer (exit 0); bad input prints one line on
stderr and exits 2.
"""

from __future__ import annotations

import json
import math
import sys

from stagecut.errors import StagecutError
from stagecut.mtpp.slicegraph import METHODS, slice_graph

__all__ = ["add_parser"]


def _load(spec: str):
    if spec.startswith("regal:"):
        from stagecut.errors import InvalidGraphError
        from stagecut.examples import regal_graph

        parts = spec.split(":")[1:]
        try:
            n = int(parts[0])
            model = parts[1] if len(parts) > 1 else "erdos_renyi"
            seed = int(parts[2]) if len(parts) > 2 else 0
        except (IndexError, ValueError):
            raise InvalidGraphError(f"{spec!r}: expected regal:N[:MODEL[:SEED]]") from None
        return regal_graph(n, model=model, seed=seed)
    from stagecut.formats import read_workload

    return read_workload(spec)


def _fmt(x: float) -> str:
    return f"{x:.6g}" if math.isfinite(x) else "inf"


def _cmd_slice(args) -> int:
    try:
        g = _load(args.file)
        fast = args.fast_memory
        if fast is None and args.memory_from_file:
            fast = g.defaults.get("memory")
        plan = slice_graph(
            g,
            args.stages,
            args.method,
            seed=args.seed,
            population=args.population,
            generations=args.generations,
            decodes=args.decodes,
            islands=args.islands,
            fast_memory=fast,
            bandwidth=args.bandwidth,
            reserved_memory=args.reserved,
            max_ideals=args.max_ideals,
            colocate=not args.ignore_colocation,
        )
    except (StagecutError, ValueError, OSError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"stagecut slice: error: {msg}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(plan.to_json(), default=str))
        return 0
    print(f"method {plan.method}  stages {plan.stages}  status {plan.status}  decodes {plan.decodes}  "
          f"runtime {plan.runtime_s:.3f} s")
    print(f"objective {_fmt(plan.objective)}  lower bound {_fmt(plan.lower_bound)}  gap {plan.gap:.2%}"
          if math.isfinite(plan.objective) else "no feasible partition")
    if "exact_by" in plan.details:
        print(f"proven by: {plan.details['exact_by']} ({plan.details.get('ideals', '?')} ideals)")
    for i, (b, c) in enumerate(zip(plan.blocks, plan.block_costs)):
        ids = ",".join(map(str, b))
        if len(ids) > 60:
            ids = ids[:57] + "..."
        print(f"  stage {i:>3}  cost {_fmt(c):>10}  {len(b):>5} nodes: {ids}")
    return 0


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("slice", help="SliceGraph pipeline partitioning (MTPP cost model)")
    p.add_argument("file", help="workload JSON file, or regal:N[:MODEL[:SEED]]")
    p.add_argument("--stages", "-k", type=int, default=None,
                   help="most pipeline stages (default: the file's maxFPGAs)")
    p.add_argument("--method", choices=METHODS, default="brkga")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--population", type=int, default=100)
    p.add_argument("--generations", type=int, default=100)
    p.add_argument("--islands", type=int, default=1, help="independent BRKGA populations sharing the budget")
    p.add_argument("--decodes", type=int, default=None, help="budget of decodes (default population x generations)")
    p.add_argument("--fast-memory", type=float, default=None, help="fast memory per stage, bytes")
    p.add_argument("--memory-from-file", action="store_true",
                   help="use the file's maxSizePerFPGA as the fast memory")
    p.add_argument("--bandwidth", type=float, default=None,
                   help="bytes per time unit for overflowing parameters (default: memory is a hard limit)")
    p.add_argument("--reserved", type=float, default=0.0, help="fast memory reserved for activations, bytes")
    p.add_argument("--max-ideals", type=int, default=1_000_000, help="limit for --method dp")
    p.add_argument("--ignore-colocation", action="store_true",
                   help="treat the graph as a plain DAG (forward and backward nodes may be split)")
    p.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    p.set_defaults(func=_cmd_slice)
