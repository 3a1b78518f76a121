"""Exact pipeline DP on the 16 workloads of Table 1.

Run: ``pytest benches/bench_pipeline.py --benchmark-only`` (add ``--benchmark-json=out.json``).
Each case records the ideal and ideal-pair counts (``ideals``, ``pairs``) in ``extra_info``.
"""

import json
import pathlib

import pytest

import stagecut as sc

SHARED = pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "workloads"
NAMES = sorted(json.loads((SHARED / "published-table1.json").read_text())["rows"]) if SHARED.exists() else []
HEAVY = {"LayerGraphs/inceptionv3_inference.json", "LayerGraphs/inceptionv3_training.json"}


@pytest.mark.parametrize("name", NAMES)
def test_dp(benchmark, shared, name):
    g = sc.read_workload(shared / "throughput-inputs" / name)
    rounds = 1 if name in HEAVY else 3
    plan = benchmark.pedantic(sc.partition, args=(g,), kwargs={"method": "dp"}, rounds=rounds, iterations=1)
    benchmark.extra_info.update(ideals=plan.stats["ideals"], pairs=plan.stats["pairs"], objective=plan.objective)


@pytest.mark.parametrize("name", NAMES)
def test_dpl(benchmark, shared, name):
    g = sc.read_workload(shared / "throughput-inputs" / name)
    plan = benchmark(sc.partition, g, method="dpl")
    benchmark.extra_info.update(ideals=plan.stats["ideals"], objective=plan.objective)
