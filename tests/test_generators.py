"""The synthetic generators are O(n + m) and draw the same graphs as before, seed for seed.

Their random models are checked edge for edge against networkx's own generators (what
``regal_graph`` called before it was rewritten), and ``random_dag`` against its old pair-by-pair
loop; sizes are in benches/bench_generators.py (never timed here).
"""

import math
import random

import networkx as nx
import numpy as np
import pytest

from stagecut.examples import (
    REGAL_MODELS,
    _bernoulli_pairs,
    _random_geometric,
    random_dag,
    regal_graph,
)
from stagecut.graph import ACCELERATOR, CPU, Graph, Node
from stagecut.nx_random import barabasi_albert, watts_strogatz


def edge_set(edges):
    return {tuple(sorted(map(int, e))) for e in edges}


SIZES = (2, 3, 5, 14, 60, 200)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n", SIZES)
def test_models_draw_what_networkx_draws(n, seed):
    p = min(1.0, 3.0 / (n - 1))
    if p < 1:
        ours = np.stack(_bernoulli_pairs(n, n - 1, p, random.Random(seed)), axis=1)
        assert edge_set(ours) == edge_set(nx.gnp_random_graph(n, p, seed=seed).edges())
    m = min(n - 1, 2)
    assert edge_set(barabasi_albert(n, m, random.Random(seed))) == \
        edge_set(nx.barabasi_albert_graph(n, m, seed=seed).edges())
    k = min(3, n - 1)
    assert edge_set(watts_strogatz(n, k, 0.3, random.Random(seed))) == \
        edge_set(nx.watts_strogatz_graph(n, k, 0.3, seed=seed).edges())
    r = math.sqrt(3.0 / (math.pi * (n - 1)))
    assert edge_set(_random_geometric(n, r, random.Random(seed))) == \
        edge_set(nx.random_geometric_graph(n, r, seed=seed).edges())


def old_random_dag(n, *, edge_prob=0.3, seed=0, max_span=None, cpu=True, integer=True):
    """random_dag as it was: one draw per candidate pair, O(n^2)."""
    rng = random.Random(seed)

    def draw(hi):
        return float(rng.randint(0, hi)) if integer else rng.uniform(0, hi)

    nodes = []
    for i in range(n):
        compute = {ACCELERATOR: draw(10)}
        if cpu:
            compute[CPU] = draw(30)
        nodes.append(Node(id=i, compute=compute, memory=draw(5), comm=draw(4)))
    edges = [(i, j) for i in range(n) for j in range(i + 1, n)
             if (max_span is None or j - i <= max_span) and rng.random() < edge_prob]
    return Graph(nodes, edges)


@pytest.mark.parametrize("kw", [dict(n=1), dict(n=6, edge_prob=0.4), dict(n=9), dict(n=30, edge_prob=0.2, max_span=3),
                                dict(n=50, edge_prob=1.0), dict(n=40, edge_prob=0.0, max_span=5),
                                dict(n=25, integer=False, cpu=False)])
@pytest.mark.parametrize("seed", [0, 2, 5, 11])
def test_random_dag_is_the_same_graph_as_before(kw, seed):
    assert random_dag(seed=seed, **kw) == old_random_dag(seed=seed, **kw)


def test_regal_graph_is_well_formed_at_every_small_size():
    for model in REGAL_MODELS:
        for n in (1, 2, 3):  # barabasi_albert(1) used to raise networkx's own error
            g = regal_graph(n, model=model, seed=0)
            assert len(g) == n and all(u < v for u, v in g.edges)


def test_above_the_exact_stream_edges_are_skipped_to_with_the_same_distribution(monkeypatch):
    import stagecut.examples as ex

    monkeypatch.setattr(ex, "EXACT_PAIRS", 0)  # every size takes the geometric skips
    for span, p in ((299, 1.0), (10, 1.0), (299, 0.0)):
        src, dst = _bernoulli_pairs(300, span, p, random.Random(0))
        assert len(src) == p * sum(min(span, 299 - i) for i in range(300))
    src, dst = _bernoulli_pairs(300, 40, 0.2, random.Random(0))
    pairs = sum(min(40, 299 - i) for i in range(300))
    assert abs(len(src) - 0.2 * pairs) < 5 * math.sqrt(0.2 * 0.8 * pairs)
    assert (src < dst).all() and (dst - src).max() <= 40 and len(set(zip(src, dst))) == len(src)
    again = _bernoulli_pairs(300, 40, 0.2, random.Random(0))
    assert (again[0] == src).all() and (again[1] == dst).all()
    g = regal_graph(2000, model="erdos_renyi", seed=4)
    assert abs(len(g.edges) - 3000) < 5 * math.sqrt(3000) and g == regal_graph(2000, model="erdos_renyi", seed=4)


def test_a_tiny_probability_gives_no_edges_not_an_overflow():
    src, _ = _bernoulli_pairs(100_000, 99_999, 1e-300, random.Random(1))  # geometric gaps saturate
    assert len(src) == 0


@pytest.mark.parametrize("bad", [dict(edge_prob=1.5), dict(edge_prob="0.3"), dict(max_span=-1), dict(max_span=2.0)])
def test_random_dag_arguments(bad):
    from stagecut.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError):
        random_dag(5, **bad)
