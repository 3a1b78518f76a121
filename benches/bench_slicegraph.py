"""SliceGraph benchmarks (pytest-benchmark) and the tables of the README (SliceGraph section).

    pytest benches/bench_slicegraph.py --benchmark-only
    python benches/bench_slicegraph.py ratios     # BRKGA vs exact DP on the 8 layer graphs
    python benches/bench_slicegraph.py scaling    # decodes per second vs n

Reads ``../shared/workloads`` beside the project (found from this file); skips what is absent.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from stagecut.errors import TooManyIdealsError
from stagecut.examples import regal_graph
from stagecut.mtpp.slicegraph import slice_graph

LAYERS = Path(__file__).resolve().parent.parent.parent / "shared" / "workloads" / "throughput-inputs" / "LayerGraphs"


@pytest.fixture(scope="module")
def regal200():
    return regal_graph(200, model="erdos_renyi", seed=0)


def test_brkga_10k_decodes_regal200_k16(benchmark, regal200):
    plan = benchmark.pedantic(
        lambda: slice_graph(regal200, devices=16, method="brkga", seed=0, decodes=10_000, improve=False), rounds=3,
        iterations=1
    )
    benchmark.extra_info.update(objective=plan.objective, decodes=plan.stats["decodes"])
    assert plan.stats["decodes"] == 10_000


@pytest.mark.parametrize("segment_costs", ["scan", "fenwick"])
def test_slicegraph_one_order_5000_nodes_k64(benchmark, segment_costs):
    g = regal_graph(5000, model="erdos_renyi", seed=1)
    plan = benchmark.pedantic(
        lambda: slice_graph(g, devices=64, method="order", segment_costs=segment_costs), rounds=3, iterations=1
    )
    benchmark.extra_info.update(objective=plan.objective)


@pytest.mark.parametrize("name", ["gpt12_training", "gpt48_training"])
def test_prefix_bound_training_graph_with_its_memory(benchmark, name):
    """The ``prefix`` level on a traced training graph at k = 8 with the file's memory as a hard
    limit (the project's own operator graphs), against the simple bound."""
    from stagecut.formats import read_workload
    from stagecut.mtpp.model import MtppProblem, lower_bound
    from stagecut.mtpp.prefix import prefix_bound

    g = read_workload(Path(__file__).resolve().parent.parent / "tests" / "data" / "opgraphs" / f"{name}.json")
    p = MtppProblem(g, devices=8, memory=float(g.defaults["memory"]), colocate=False)
    r = benchmark.pedantic(lambda: prefix_bound(p), rounds=2, iterations=1)
    benchmark.extra_info.update(bound=r.bound, simple=lower_bound(p), cuts=r.solves)
    assert r.bound > 1.5 * lower_bound(p)


@pytest.mark.parametrize("n", [100, 200])
def test_sdp_bound_300_steps(benchmark, n):
    """The ``sdp`` level's 300 steps on an Erdos-Renyi graph at k = 8, against ``spectral``."""
    from stagecut.mtpp.model import MtppProblem
    from stagecut.mtpp.sdp import sdp_bound
    from stagecut.mtpp.spectral import spectral_bound

    p = MtppProblem(regal_graph(n, model="erdos_renyi", seed=0), devices=8)
    r = benchmark.pedantic(lambda: sdp_bound(p, steps=300), rounds=2, iterations=1)
    benchmark.extra_info.update(bound=r.bound, spectral=spectral_bound(p).bound)
    assert r.bound > spectral_bound(p).bound


@pytest.mark.parametrize("search", ["branch-and-bound", "tabu"])
def test_partition_lp_pricing_100_nodes(benchmark, search):
    """One pricing of ``partition-lp`` on the 100-node Barabasi-Albert graph at k = 8 and the T
    its first step tests: the branch and bound for 200,000 nodes, or the tabu search for blocks
    above a floor; weights: each group's share of the work, summing to 8.8 (a master's weights
    sum to more than k while T is not refuted)."""
    from stagecut.mtpp.model import MtppProblem
    from stagecut.mtpp.partlp import _Blocks
    from stagecut.mtpp.pricing import BlockSearch

    p = MtppProblem(regal_graph(100, model="barabasi_albert", seed=0), devices=8)
    blocks = _Blocks(p)
    work = [sum(p.work(i) for i in range(len(p.graph.nodes)) if blocks.members[j] >> i & 1)
            for j in range(len(blocks.members))]
    pi = [8.8 * w / sum(work) for w in work]
    s = BlockSearch(p, blocks.members, 3445.1)
    if search == "tabu":
        masks = benchmark.pedantic(lambda: s.heavy(pi, 1.0), rounds=5, iterations=1)
        benchmark.extra_info.update(blocks=len(masks))
        assert masks and all(sum(pi[g] for g in blocks.groups(m)) >= 1.0 - 1e-9 for m in masks)
    else:
        upper, masks, done = benchmark.pedantic(lambda: s.solve(pi, nodes=200_000), rounds=3, iterations=1)
        benchmark.extra_info.update(upper=upper, done=done)
        assert upper >= max([sum(pi[g] for g in blocks.groups(m)) for m in masks], default=-1e300)


@pytest.mark.parametrize("n", [200, 2000])
@pytest.mark.parametrize("kicks", [0, 100])
def test_moves_of_single_groups(benchmark, n, kicks):
    """The moves after the re-splits (and ``kicks`` kicks) from one order's slicing, k = 8."""
    from stagecut.mtpp.improve import improve_plan
    from stagecut.mtpp.model import MtppProblem

    p = MtppProblem(regal_graph(n, model="erdos_renyi", seed=0), devices=8)
    start = slice_graph(p, method="mla", seed=0, decodes=20, improve=False)
    plan = benchmark.pedantic(lambda: improve_plan(p, start, time_limit=None, max_windows=200, kicks=kicks, seed=0),
                              rounds=2, iterations=1)
    benchmark.extra_info.update(start=start.objective, objective=plan.objective, group_moves=plan.stats["group_moves"])
    assert plan.objective <= start.objective


@pytest.mark.parametrize("n", [500, 2000])
@pytest.mark.parametrize("model", ["erdos_renyi", "barabasi_albert"])
def test_multilevel_search(benchmark, n, model):
    """``method="multilevel"`` (coarsening, the coarsest level's plan, the refinement), k = 8,
    against the cheapest of the other searches' plans (each with its re-splits)."""
    g = regal_graph(n, model=model, seed=0)
    plan = benchmark.pedantic(lambda: slice_graph(g, devices=8, method="multilevel", improve=False), rounds=2,
                              iterations=1)
    others = min(slice_graph(g, devices=8, method=m).objective for m in ("brkga", "mla-weighted", "spectral-order"))
    benchmark.extra_info.update(objective=plan.objective, others=others, levels=plan.stats["levels"])
    assert plan.objective < others


@pytest.mark.parametrize("n", [50, 100, 200, 400, 800])
def test_decode_rate_vs_n(benchmark, n):
    g = regal_graph(n, model="erdos_renyi", seed=n)
    plan = benchmark.pedantic(lambda: slice_graph(g, devices=16, method="brkga", seed=0, decodes=2000, improve=False),
                              rounds=2, iterations=1)
    benchmark.extra_info.update(decodes=plan.stats["decodes"])


@pytest.mark.skipif(not LAYERS.is_dir(), reason="../shared/workloads not present")
@pytest.mark.parametrize("name", ["resnet50_inference", "inceptionv3_inference"])
def test_brkga_layer_graphs(benchmark, name):
    from stagecut.formats import read_workload

    g = read_workload(LAYERS / f"{name}.json")
    plan = benchmark.pedantic(
        lambda: slice_graph(g, devices=6, method="brkga", seed=0, decodes=10_000, memory=g.defaults["memory"],
                            improve=False),
        rounds=1,
        iterations=1,
    )
    benchmark.extra_info.update(objective=plan.objective)


@pytest.mark.skipif(not LAYERS.is_dir(), reason="../shared/workloads not present")
@pytest.mark.parametrize("name,memory", [("gnmt_inference", "overflow"), ("gnmt_training", "hard"),
                                         ("inceptionv3_training", "hard")])
def test_exact_dp_layer_graphs(benchmark, name, memory):
    from stagecut.formats import read_workload

    g = read_workload(LAYERS / f"{name}.json")
    kw = settings_for(g)[memory]
    plan = benchmark.pedantic(lambda: slice_graph(g, devices=6, method="dp", **kw), rounds=1, iterations=1)
    benchmark.extra_info.update(objective=plan.objective, ideals=plan.stats["ideals"], exact_by=plan.exact_by)
    assert plan.status == "optimal"


# ---------------------------------------------------------------------------- tables
def settings_for(g):
    params = sum(n.memory for n in g.nodes)
    return {
        "hard": {"memory": g.defaults["memory"]},
        "overflow": {"memory": params / 12, "bandwidth": 1e8},
    }


def ratios(max_ideals: int = 4_000_000, decodes: int = 10_000, seeds=(0, 1, 2, 3, 4), names=None) -> list:
    """Each heuristic (seed 0 and the worst of ``seeds`` for BRKGA) against the exact optimum,
    on the 8 layer graphs with both memory settings (colocation classes kept)."""
    from stagecut.formats import read_workload

    rows = []
    for path in sorted(LAYERS.glob("*.json")):
        if names and path.stem not in names:
            continue
        g = read_workload(path)
        for label, kw in settings_for(g).items():
            t = time.perf_counter()
            try:
                opt = slice_graph(g, devices=6, method="dp", max_ideals=max_ideals, **kw)
                dp_obj, dp_s, ideals = opt.objective, time.perf_counter() - t, opt.stats["ideals"]
                how = opt.exact_by
            except TooManyIdealsError:
                dp_obj, dp_s, ideals, how = None, None, f">{max_ideals}", None
            row = {"graph": path.stem, "memory": label, "dp": dp_obj, "ideals": ideals, "dp_s": dp_s, "exact_by": how}
            for method in ("brkga", "random", "mla-weighted"):
                t = time.perf_counter()
                plan = slice_graph(g, devices=6, method=method, seed=0, decodes=decodes, improve=False, **kw)
                row[method] = plan.objective
                row[f"{method}_s"] = time.perf_counter() - t
                row["lb"] = plan.lower_bound
                row["units"] = plan.stats["units"]
            row["brkga_seeds"] = [row["brkga"]] + [
                slice_graph(g, devices=6, method="brkga", seed=s, decodes=decodes, improve=False, **kw).objective
                for s in seeds if s != 0
            ]
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def scaling(ns=(50, 100, 200, 400, 800, 1600), decodes: int = 5000) -> list:
    rows = []
    for n in ns:
        g = regal_graph(n, model="erdos_renyi", seed=n)
        t = time.perf_counter()
        plan = slice_graph(g, devices=16, method="brkga", seed=0, decodes=decodes, improve=False)
        dt = time.perf_counter() - t
        row = {"n": n, "edges": len(g.edges), "decodes_per_s": plan.stats["decodes"] / dt, "seconds": dt}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "ratios"
    out = ratios(names=sys.argv[3:] or None) if what == "ratios" else scaling()
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(json.dumps(out, indent=1, default=str))

