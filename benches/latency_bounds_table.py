"""The latency lower bounds on the four shared latency LayerGraphs, and the proven gap of a method.

    python benches/latency_bounds_table.py                      # the bounds alone (well under a second)
    python benches/latency_bounds_table.py --method auto --time-limit 120

Prints one Markdown row per graph: nodes, devices, each bound of ``stagecut.latency.exact.bounds`` (with
its CPU time), and with ``--method`` the method's makespan, the method that found it (``auto``'s
``stats["found_by"]``), its wall and CPU seconds and the proven gap ``(makespan - bound) /
makespan`` against the best bound.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import stagecut as sc
from stagecut.latency import LatencyProblem
from stagecut.latency.exact.bounds import latency_bound

SHARED = pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "workloads"
LAYER = SHARED / "latency-inputs" / "LayerGraphs"
GRAPHS = ("bert24", "gnmt", "inceptionv3", "resnet50")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", default=None, help="a latency method of stagecut.latency.place")
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args()
    head = "| graph | nodes | devices | simple | device-path | memory-path | skip-path | bound CPU s |"
    if args.method:
        head += f" {args.method} | found by | wall s | CPU s | proven gap |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for name in GRAPHS:
        p = LatencyProblem.from_workload(sc.read_workload(LAYER / f"{name}_inference.json"))
        c0 = time.process_time()
        b = latency_bound(p)
        cpu = time.process_time() - c0
        row = (f"| {name} | {len(p)} | {p.num_devices} | {b.parts['simple']:.1f} | {b.parts['device-path']:.1f} | "
               f"{b.parts['memory-path']:.1f} | {b.parts.get('skip-path', 0.0):.1f} | {cpu:.2f} |")
        if args.method:
            t0, c0 = time.perf_counter(), time.process_time()
            s = sc.latency.place(p, method=args.method, time_limit=args.time_limit)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            assert s.objective is not None
            found = s.stats.get("found_by", s.method)
            gap = (s.objective - b.value) / s.objective
            gap = 0.0 if abs(gap) < 1e-9 else gap  # (a bound met up to rounding)
            row += f" {s.objective:.1f} | {found} | {wall:.1f} | {cpu:.1f} | {gap:.1%} |"
        print(row, flush=True)


if __name__ == "__main__":
    main()
