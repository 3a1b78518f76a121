"""The README's latency table: every method of ``stagecut.place`` on the four LayerGraphs latency
inputs (PCIe star of each file: a CPU pool and maxFPGAs accelerators of maxSizePerFPGA bytes).

    python benches/latency_table.py [--milp-limit 300] [--ip-limit 300]

Prints Markdown: makespan (ms) per method under the asap semantics, the MILP's bound and gap;
and the authors' pieces semantics (their greedy, the latency IP with its bound). Needs
``../shared/workloads``.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import stagecut as sc

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared" / "workloads" / "latency-inputs" / "LayerGraphs"
GRAPHS = ("bert24", "gnmt", "inceptionv3", "resnet50")
HEURISTICS = ("best-device", "met", "greedy", "heft", "sa", "ea", "local")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--milp-limit", type=float, default=300.0)
    ap.add_argument("--ip-limit", type=float, default=300.0)
    ap.add_argument("--graphs", nargs="*", default=list(GRAPHS))
    args = ap.parse_args()
    head = ["graph", *HEURISTICS, "milp", "bound", "gap", "milp s", "pcie-greedy", "ip", "ip bound", "ip s"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name in args.graphs:
        g = sc.read_workload(SHARED / f"{name}_inference.json")
        row = [name]
        found = []
        for m in HEURISTICS:
            s = sc.place(g, method=m, time_limit=30.0, seed=0)
            found.append(s)
            row.append(f"{s.objective:.3f}" if s.objective is not None else s.status)
        best = min((s for s in found if s.objective is not None), key=lambda s: s.objective or 0.0)
        t = time.perf_counter()  # the MILP warm-started from the best heuristic (as auto does)
        s = sc.place(g, method="milp", time_limit=args.milp_limit, threads=1, start=best)
        row += [f"{s.objective:.3f}" if s.objective is not None else s.status,
                f"{s.lower_bound:.3f}" if s.lower_bound is not None else "-",
                f"{100 * s.gap:.1f}%" if s.gap is not None else "-", f"{time.perf_counter() - t:.0f}"]
        s = sc.place(g, method="pcie-greedy")
        row.append(f"{s.objective:.3f}" if s.objective is not None else s.status)
        t = time.perf_counter()
        s = sc.place(g, method="ip", time_limit=args.ip_limit, threads=1)
        row += [f"{s.objective:.3f}" if s.objective is not None else s.status,
                f"{s.lower_bound:.3f}" if s.lower_bound is not None else "-", f"{time.perf_counter() - t:.0f}"]
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
