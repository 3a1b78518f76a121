"""Replicated stages and the hierarchical topology on two layer graphs of Table 1, along PipeDream's
path (stagecut.throughput.replication, along="pipedream"): the best time per sample for a few
link bandwidths (bytes per ms; the parameters are the nodes' memory), the replicas chosen, and the
CPU seconds (time.process_time: the machine may be shared). Prints Markdown; about 4 s (GNMT's
hierarchical rows take 1-2 s of CPU each, 10-11 s before the DP reused the open chains and pruned).

    nice python benches/bench_replication.py
"""

from __future__ import annotations

import time
from pathlib import Path

import stagecut as sc
from stagecut.throughput.pipedream import pipedream
from stagecut.throughput.problem import ThroughputProblem

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "workloads" / "throughput-inputs" / "LayerGraphs"


def main() -> None:
    print("| workload | model | bandwidth (B/ms) | time per sample | PipeDream, no replicas | replicas | CPU seconds |")
    print("|---|---|---|---|---|---|---|")
    for name, k, servers, per in (("gnmt_training", 6, 2, 3), ("bert24_training", 8, 2, 4)):
        g = sc.read_workload(SHARED / f"{name}.json")
        base = pipedream(ThroughputProblem.from_graph(g, devices=k, cpus=0)).objective
        for bw in (1e9, 1e8, 1e7):
            t0 = time.process_time()
            plan = sc.partition_replicated(g, devices=k, bandwidth=bw, along="pipedream")
            print(f"| {name} | {k} replicable accelerators | {bw:.0e} | {plan.objective:.2f} | {base:.2f} "
                  f"| {plan.stats['replicas']} | {time.process_time() - t0:.2f} |", flush=True)
        # the hierarchical DP is O(ideals^4) at worst: 0.04 s of CPU on BERT-24's 28-ideal path, 1-2 s on GNMT's 73
        for b_in, b_out in ((1e9, 1e8), (1e8, 1e7)):
            t0 = time.process_time()
            plan = sc.partition_hierarchical(g, servers=servers, gpus_per_server=per, bandwidth_in=b_in,
                                             bandwidth_out=b_out, along="pipedream")
            print(f"| {name} | {servers} servers x {per} | {b_in:.0e} in / {b_out:.0e} across | {plan.objective:.2f} "
                  f"| {base:.2f} | {str(plan.stats['replicas']).replace('|', ' / ')} (servers {plan.stats['blocks']}) "
                  f"| {time.process_time() - t0:.2f} |", flush=True)


if __name__ == "__main__":
    main()
