"""Synthetic graph generators: O(n + m).

Run: ``pytest benches/bench_generators.py --benchmark-only`` (add ``--benchmark-json=out.json``).
Target: 100,000 nodes in under 2 s for every model. Before the rewrite (networkx's generators
plus a per-pair loop): Erdos-Renyi 10k nodes 7.2 s and 100k > 300 s, random geometric 10k 78 s,
random_dag O(n^2) draws. Each case records the node and edge counts in ``extra_info``.
"""

import pytest

from stagecut.examples import REGAL_MODELS, RWNN_MODELS, random_dag, regal_graph, rwnn
from stagecut.graph import Graph


@pytest.mark.parametrize("n", [10_000, 100_000])
@pytest.mark.parametrize("model", REGAL_MODELS)
def test_regal_graph(benchmark, model, n):
    g = benchmark.pedantic(regal_graph, args=(n,), kwargs={"model": model, "seed": 1}, rounds=3, iterations=1)
    benchmark.extra_info.update(nodes=len(g), edges=len(g.edges))


@pytest.mark.parametrize("kw", [{"edge_prob": 3e-5}, {"edge_prob": 0.3, "max_span": 10}],
                         ids=["sparse", "narrow"])
def test_random_dag_100k(benchmark, kw):
    g = benchmark.pedantic(random_dag, args=(100_000,), kwargs={"seed": 1, **kw}, rounds=3, iterations=1)
    benchmark.extra_info.update(nodes=len(g), edges=len(g.edges))


def test_random_dag_exact_stream_5000(benchmark):
    # the largest size drawn pair by pair (12.5 million uniforms, the graphs of earlier releases)
    g = benchmark.pedantic(random_dag, args=(5_000,), kwargs={"edge_prob": 1e-3, "seed": 1}, rounds=3, iterations=1)
    benchmark.extra_info.update(nodes=len(g), edges=len(g.edges))


@pytest.mark.parametrize("model", RWNN_MODELS)
def test_rwnn_1000_modules_of_32(benchmark, model):
    # DiviML's randomly wired networks at scale, 4 weakly dependent channels
    # (34,000 + 6,000 nodes); target a second or two
    g = benchmark.pedantic(rwnn, args=(1000, 4), kwargs={"model": model, "size": 32, "dep": "wdep", "seed": 1},
                           rounds=3, iterations=1)
    benchmark.extra_info.update(nodes=len(g), edges=len(g.edges))


def test_graph_chain_100k(benchmark):
    # the Graph constructor alone (validation, adjacency, acyclicity): the floor of every generator
    g = benchmark.pedantic(Graph.chain, args=([1.0] * 100_000,), rounds=3, iterations=1)
    benchmark.extra_info.update(nodes=len(g))
