"""MTPP with costs far apart in magnitude (issue 10, item 7): every method gets a partition the
evaluator agrees with, and the exact DP the brute-force optimum, where plain running sums used to
lose the small terms (an internal error)."""

import random

import pytest

from helpers import brute_force_mtpp
from stagecut.graph import Graph, Node
from stagecut.mtpp.model import MtppProblem, evaluate, tensor_costs_dwarf_the_answer
from stagecut.mtpp.slicegraph import METHODS, slice_graph


@pytest.mark.parametrize("segment_costs", ["auto", "scan", "fenwick"])
@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("method", METHODS)
def test_the_issue_chain_gets_the_optimum_from_every_method(method, k, segment_costs):
    # unit work, output costs 0, 1e16, 1, 0: {0} | {1, 2, 3} costs 3 (the 1e16 tensor stays inside);
    # the Fenwick table's difference array used to cancel the 1
    p = MtppProblem(Graph.chain([1.0, 1.0, 1.0, 1.0], comm=[0.0, 1e16, 1.0, 0.0]), devices=k)
    assert tensor_costs_dwarf_the_answer(p) and brute_force_mtpp(p) == 3.0
    plan = slice_graph(p, method=method, population=8, generations=4, segment_costs=segment_costs)
    assert plan.objective == 3.0
    assert evaluate(p, [s.nodes for s in plan.stages]).objective == 3.0


def test_random_graphs_with_costs_far_apart():
    rng = random.Random(16)
    for _ in range(40):
        n = rng.randint(2, 6)
        nodes = [Node(i, {"accelerator": float(rng.randint(0, 9))}, comm=rng.choice([0.0, 1.0, 2.0, 1e16, 3e17]))
                 for i in range(n)]
        g = Graph(nodes, [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.4])
        p = MtppProblem(g, devices=rng.randint(1, 3))
        want = brute_force_mtpp(p)
        for method, seg in (("dp", "auto"), ("order", "auto"), ("order", "fenwick"), ("brkga", "fenwick"),
                            ("random", "auto")):
            plan = slice_graph(p, method=method, population=8, generations=4, segment_costs=seg)  # no error
            assert plan.objective >= want * (1 - 1e-15)
            if method == "dp":
                assert plan.objective == want
