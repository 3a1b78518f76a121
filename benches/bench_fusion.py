"""QuickP's operator fusion on synthetic operator graphs (a 10,000-node graph in under 1 s).

Run: ``pytest benches/bench_fusion.py --benchmark-only`` (add ``--benchmark-json=out.json``).
Each case fuses a CNN- or transformer-shaped operator graph
(:func:`stagecut.latency.quickp.opgraph.synthetic_operator_graph`) given as a
:class:`~stagecut.latency.LatencyProblem` on 4 GPUs (two servers of two) and records the
operator counts before and after, the threshold alpha and the sweeps in ``extra_info``.
The co-location groups of the fused problem are timed too (QuickP runs them on the fused graph).
"""

import pytest

from stagecut.latency import LatencyProblem
from stagecut.latency.quickp.colocate import colocation_groups
from stagecut.latency.quickp.fusion import fuse
from stagecut.latency.quickp.opgraph import operator_devices, operator_graph_from_data, synthetic_operator_graph


def _problem(n, shape):
    g, out, _ = operator_graph_from_data(synthetic_operator_graph(n, shape, seed=1, devices=4))
    return LatencyProblem(g, operator_devices(4), output_bytes=out)


@pytest.mark.parametrize("n", [1_000, 10_000])
@pytest.mark.parametrize("shape", ["cnn", "transformer"])
def test_fuse(benchmark, shape, n):
    p = _problem(n, shape)
    f = benchmark.pedantic(fuse, args=(p,), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update({k: f.stats[k] for k in ("nodes_before", "nodes_after", "edges_before",
                                                         "edges_after", "largest_group", "alpha", "passes")})


@pytest.mark.parametrize("shape", ["cnn", "transformer"])
def test_colocation_of_fused_10k(benchmark, shape):
    f = fuse(_problem(10_000, shape))
    c = benchmark.pedantic(colocation_groups, args=(f.problem,), rounds=5, iterations=1)
    benchmark.extra_info.update(fused_nodes=len(f), groups=len(c.groups), skipped=len(c.skipped),
                                largest=max((len(g) for g in c.groups), default=0))
