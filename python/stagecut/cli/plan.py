"""``stagecut plan FILE``: the Piper training planner on a Piper JSON input.

Every setting defaults to the file's value. Memory and bandwidth take either GiB
(``--memory-gib 8`` = 8 * 2^30 bytes, ``--bandwidth-gib 25`` = 25 * 2^30 bytes/s, as in the
published runs) or plain bytes (``--memory 8e9``, ``--bandwidth 25e9``, as in the files).
Infeasible is an answer (exit 0); bad input is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Sequence

from stagecut.cli.main import _ranges
from stagecut.errors import StagecutError

__all__ = ["add_parser", "main"]

GIB = float(1 << 30)


def _cmd_plan(args: argparse.Namespace) -> int:
    from stagecut import training as sp

    prob = sp.read_piper(args.file)
    memory = args.memory if args.memory is not None else (
        args.memory_gib * GIB if args.memory_gib is not None else None)
    bandwidth = args.bandwidth if args.bandwidth is not None else (
        args.bandwidth_gib * GIB if args.bandwidth_gib is not None else None)
    for name, val in (("--devices", args.devices), ("--batch", args.batch)):
        if val is not None and val < 1:
            raise StagecutError(f"{name} must be at least 1, got {val}")
    for name, val in (("memory", memory), ("bandwidth", bandwidth)):
        if val is not None and not (math.isfinite(val) and val > 0):
            raise StagecutError(f"{name} must be positive, got {val}")
    intra = args.intra_bandwidth if args.intra_bandwidth is not None else (
        args.intra_bandwidth_gib * GIB if args.intra_bandwidth_gib is not None else None)
    if (args.server_size is None) != (intra is None) and prob.server_size is None:
        raise StagecutError("--server-size and --intra-bandwidth[-gib] go together")
    server = {}
    if args.server_size is not None or intra is not None:
        server = dict(server_size=args.server_size if args.server_size is not None else prob.server_size,
                      intra_bandwidth=intra if intra is not None else prob.intra_bandwidth)
    plan = sp.plan_training(
        prob, **server, devices=args.devices, memory=memory, bandwidth=bandwidth, max_batch=args.batch,
        exact_batch=args.exact_batch, data_parallel=not args.no_dp, tensor_parallel=not args.no_tp,
        recompute=not args.no_ar, knapsack=args.knapsack)
    if args.json:
        print(json.dumps(plan.to_json(include_table=args.table)))
        return 0
    settings = (f"K={plan.devices} devices, M={plan.memory / GIB:.4g} GiB, B={plan.bandwidth / GIB:.4g} GiB/s, "
                f"N={plan.batch}{' (exact)' if plan.exact_batch else ''}")
    if plan.server_size is not None:
        settings += f", {plan.server_size} devices per server at {plan.intra_bandwidth / GIB:.4g} GiB/s"
    if not plan.feasible:
        print(f"infeasible: no plan fits in memory ({settings})")
        return 0
    rows = [("stage", "d", "t", "devices", "nodes", "recompute", "TPS", "memory GiB")]
    for i, s in enumerate(plan.stages):
        nodes = _ranges(list(s.nodes))
        if len(nodes) > 40:
            nodes = nodes[:37] + "..."
        ar = sum(cid == sp.RECOMPUTE_ID for cid in s.tmpcs.values())
        rows.append((str(i), str(s.d), str(s.t), str(s.devices), f"{len(s.nodes)}: {nodes}", f"{ar}/{len(s.nodes)}",
                     f"{s.tps:.6g}", f"{s.memory / GIB:.3f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if j == 4 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    print("\n".join(lines))
    print(f"\ntime per sample: {plan.objective:.6g} ({plan.status}; {settings}; uses {plan.devices_used} devices, "
          f"sum of d {plan.batch_used}; {plan.num_ideals} upsets, {plan.pairs_visited} pairs, {plan.runtime:.2f} s)")
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``plan`` on an argparse subparsers object."""
    p = subparsers.add_parser("plan", help="Piper training plan (pipeline x data x tensor parallelism, recomputation)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="Piper input JSON (format of workloads/piper)")
    p.add_argument("--devices", "-k", type=int, default=None, help="K, number of devices (default: maxDevices)")
    mem = p.add_mutually_exclusive_group()
    mem.add_argument("--memory-gib", type=float, default=None, help="M, memory per device in GiB (2^30 bytes)")
    mem.add_argument("--memory", type=float, default=None, help="M, memory per device in bytes")
    bw = p.add_mutually_exclusive_group()
    bw.add_argument("--bandwidth-gib", type=float, default=None, help="B, bandwidth in GiB/s (2^30 bytes/s)")
    bw.add_argument("--bandwidth", type=float, default=None, help="B, bandwidth in bytes/s")
    p.add_argument("--batch", "-n", type=int, default=None, help="N, microbatches per batch (default: mbsInBatch)")
    p.add_argument("--exact-batch", action="store_true", help="data-parallel degrees sum to exactly N (default: at most)")
    p.add_argument("--no-dp", action="store_true", help="no data parallelism (d = 1)")
    p.add_argument("--no-tp", action="store_true", help="no tensor parallelism (t = 1)")
    p.add_argument("--no-ar", action="store_true", help="no activation recomputation")
    p.add_argument("--server-size", type=int, default=None,
                   help="two-level network: devices per server (tensor parallelism stays inside one)")
    intra = p.add_mutually_exclusive_group()
    intra.add_argument("--intra-bandwidth-gib", type=float, default=None, help="intra-server bandwidth in GiB/s")
    intra.add_argument("--intra-bandwidth", type=float, default=None, help="intra-server bandwidth in bytes/s")
    p.add_argument("--knapsack", choices=("heuristic", "exact"), default="heuristic",
                   help="per-stage TMPC choice: the paper's greedy (default) or exact for stages of <= 20 nodes")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--table", action="store_true", help="with --json, include the TPS table for every k and s")
    p.set_defaults(func=_cmd_plan)
    return p


def main(argv: "Sequence[str] | None" = None) -> int:
    """Run ``plan`` on its own (``python -m stagecut._piper_cli FILE ...``)."""
    from stagecut.cli.main import main as cli_main

    return cli_main(["plan", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
