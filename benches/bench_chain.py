"""The exact DP on long graphs with few ideals: a 100,000-node chain and a 100,000-node chain of
diamonds (series-parallel, 4n/3 ideals), on 8 accelerators.

Run: ``pytest benches/bench_chain.py --benchmark-only`` (add ``--benchmark-json=out.json``).
The benchmark times the whole ``sc.partition`` call on a freshly built graph (one round: the
graph's cached arrays are built inside it). Each case records ``ideals``, ``pairs``, the
objective, the process's peak resident memory (``peak_rss_mb``, from ``getrusage``) and that peak
before the call (``graph_rss_mb``: the interpreter, the imports and the graph itself) in
``extra_info``; ``cpu_s`` is the call's CPU time (the machine may be loaded: compare CPU times),
``core_s`` the wall time of the Rust DP calls alone (the rest is Python: the units, the arrays
handed to the core, rescoring the plan).
"""

import random
import resource
import time

import pytest

import stagecut as sc
from stagecut import _core
from stagecut.graph import Node

N = 100_000


def _chain(n):
    rng = random.Random(1)
    return sc.Graph.chain([rng.uniform(0.5, 1.5) for _ in range(n)], comm=[rng.uniform(0.0, 0.3) for _ in range(n)])


def _diamonds(n):
    """``a -> {b, c} -> d -> {e, f} -> g ...``: each diamond doubles the ideals of one level."""
    rng = random.Random(2)
    nodes = [Node(id=i, compute={"accelerator": rng.uniform(0.5, 1.5)}, comm=rng.uniform(0.0, 0.3)) for i in range(n)]
    edges = []
    for a in range(0, n - 3, 3):
        edges += [(a, a + 1), (a, a + 2), (a + 1, a + 3), (a + 2, a + 3)]
    return sc.Graph(nodes, edges)


GRAPHS = {"chain": _chain, "diamonds": _diamonds}


class _CoreTimer:
    """Sums the wall time spent in ``_core.max_load_dp`` while installed."""

    def __init__(self, monkeypatch):
        self.seconds = 0.0
        inner = _core.max_load_dp

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        monkeypatch.setattr(_core, "max_load_dp", timed)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_dp_100k(benchmark, monkeypatch, name):
    g = GRAPHS[name](N)
    graph_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    timer = _CoreTimer(monkeypatch)
    cpu = [0.0]

    def run():
        t0 = time.process_time()
        try:
            return sc.partition(g, devices=8, method="dp")
        finally:
            cpu[0] = time.process_time() - t0

    plan = benchmark.pedantic(run, rounds=1, iterations=1)
    assert plan.status == "optimal"
    benchmark.extra_info.update(
        ideals=plan.stats["ideals"], pairs=plan.stats["pairs"], objective=plan.objective, core_s=timer.seconds,
        cpu_s=cpu[0], graph_rss_mb=graph_rss_mb, peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
