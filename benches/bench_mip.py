"""MIP benchmarks: model build and solve time per workload (pytest-benchmark), and the ladder of
MTPP lower bounds on REGAL-style graphs (``python benches/bench_mip.py ladder``: a table like
Table 3 of Archer et al., geometric mean of bound / best solution per k).

    pytest benches/bench_mip.py --benchmark-only
    python benches/bench_mip.py ladder --n 24 --seeds 1 --budget 40
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import pytest

import stagecut as sc

WORKLOADS = Path(__file__).resolve().parents[1] / ".." / "shared" / "workloads" / "throughput-inputs"
SMALL = ["LayerGraphs/bert24_inference.json", "LayerGraphs/gnmt_inference.json",
         "LayerGraphs/resnet50_inference.json", "OperatorGraphs/bert_l-3_inference.json"]


def _workload(name):
    path = WORKLOADS / name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return sc.read_workload(path)


@pytest.mark.parametrize("name", SMALL)
@pytest.mark.parametrize("contiguous", [True, False])
def test_build_throughput_ip(benchmark, name, contiguous):
    pytest.importorskip("mip")
    from stagecut.throughput.ip import build_throughput_ip

    problem = sc.ThroughputProblem.from_graph(_workload(name))
    benchmark.pedantic(lambda: build_throughput_ip(problem, contiguous=contiguous), rounds=2, iterations=1)


@pytest.mark.parametrize("name", SMALL[:2])
def test_solve_noncontiguous_ip_30s(benchmark, name):
    pytest.importorskip("mip")
    from stagecut.throughput.ip import partition_ip

    g = _workload(name)
    warm = sc.partition(g)
    plan = benchmark.pedantic(lambda: partition_ip(g, contiguous=False, time_limit=30, warm_start=warm),
                              rounds=1, iterations=1)
    benchmark.extra_info.update(objective=plan.objective, lower_bound=plan.lower_bound, status=plan.status,
                                build_s=plan.stats["build_s"], solve_s=plan.stats["solve_s"])


def ladder(n: int, seeds: int, budget: float, ks, out) -> None:
    from stagecut.examples import REGAL_MODELS, regal_graph
    from stagecut.mtpp.bounds import LEVELS
    from stagecut.mtpp.certify import certify
    from stagecut.mtpp.slicegraph import slice_graph

    rows = []
    for model in REGAL_MODELS:
        for seed in range(seeds):
            g = regal_graph(n, model=model, seed=seed)
            for k in ks:
                try:
                    best = slice_graph(g, devices=k, method="dp")
                except Exception:
                    best = slice_graph(g, devices=k, method="brkga", seed=0)
                t0 = time.perf_counter()
                cert = certify(g, best, devices=k, time_limit=budget, stop_when_proven=False)
                obj = cert.objective
                if cert.best_objective is not None:
                    obj = min(obj, cert.best_objective)
                levels = {r.level: dict(bound=r.bound, status=r.status, seconds=r.seconds) for r in cert.levels}
                row = dict(model=model, seed=seed, n=n, k=k, best=obj, best_method=best.method, levels=levels,
                           seconds=time.perf_counter() - t0)
                rows.append(row)
                print(json.dumps(row), file=out, flush=True)
    # the table: geometric mean of bound / best per k
    print("| k | " + " | ".join(LEVELS) + " |")
    print("|---|" + "---|" * len(LEVELS))
    for k in ks:
        cells = []
        for lv in LEVELS:
            rs = [r["levels"][lv]["bound"] / r["best"] for r in rows if r["k"] == k]
            rs = [max(x, 1e-9) for x in rs if math.isfinite(x)]
            cells.append(f"{math.exp(sum(map(math.log, rs)) / len(rs)):.4f}" if rs else "-")
        print(f"| {k} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["ladder"])
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--budget", type=float, default=40.0)
    ap.add_argument("--ks", default="2,4,8,16")
    ap.add_argument("--out", default="-")
    a = ap.parse_args()
    out = sys.stderr if a.out == "-" else open(a.out, "w")
    ladder(a.n, a.seeds, a.budget, [int(x) for x in a.ks.split(",")], out)
