"""``partition_program_order``: the best plan contiguous in program order, scored on the real
graph, with the cost of the restriction (no torch needed: a trace is a graph and an order)."""

import itertools
import random
import types

import pytest

import stagecut as sc
from stagecut.frontends.export import partition_program_order, program_order_graph


def trace_of(graph, order):
    return types.SimpleNamespace(graph=graph, order=list(order))


def test_interleaved_branches_cost_what_the_restriction_forces():
    # a1 -> a2 and b1 -> b2, run a1, b1, a2, b2; a1's and b1's outputs cost 10 to move: the best
    # plan ({a1, a2} | {b1, b2}, 2) is not a program-order prefix split, whose best is one stage (4)
    g = sc.Graph([sc.Node(v, {"accelerator": 1.0}, comm=c) for v, c in
                  (("a1", 10.0), ("b1", 10.0), ("a2", 0.0), ("b2", 0.0))], [("a1", "a2"), ("b1", "b2")])
    plan = partition_program_order(trace_of(g, ["a1", "b1", "a2", "b2"]), 2)
    assert (plan.objective, plan.status) == (4.0, "feasible")
    assert plan.stats["unrestricted_objective"] == 2.0 and plan.stats["restriction_cost"] == pytest.approx(1.0)
    assert "+100.00%" in plan.notes[-1]
    assert plan.lower_bound <= 2.0


def _prefix_splits(order, k):
    n = len(order)
    for m in range(1, min(k, n) + 1):
        for cuts in itertools.combinations(range(1, n), m - 1):
            b = [0, *cuts, n]
            yield [order[b[i]:b[i + 1]] for i in range(m)]


@pytest.mark.parametrize("seed", range(40))
def test_the_restricted_plan_is_a_prefix_split_scored_on_the_real_graph(seed):
    rng = random.Random(seed)
    g = sc.random_dag(rng.randint(3, 8), edge_prob=0.4, seed=seed)
    order = g.topological_order()
    order = [g.nodes[i].id for i in order] if order and isinstance(order[0], int) else list(order)
    k = rng.randint(2, 3)
    plan = partition_program_order(trace_of(g, order), k)
    # contiguous in program order, and its objective is the evaluator's on the real graph
    pos = {v: i for i, v in enumerate(order)}
    spans = [sorted(pos[v] for v in s.nodes) for s in plan.stages]
    assert all(b[-1] - b[0] + 1 == len(b) for b in spans)
    assert sc.evaluate(g, plan.device_of(), devices=k).objective == plan.objective
    # at least the best prefix split, at most the restricted model's optimum, never below the free optimum
    best = min(sc.evaluate(g, {v: ("accelerator", i) for i, s in enumerate(split) for v in s}, devices=k).objective
               for split in _prefix_splits(order, k))
    restricted = sc.partition(program_order_graph(trace_of(g, order)), devices=k).objective
    free = sc.partition(g, devices=k).objective
    assert best <= plan.objective <= restricted + 1e-9
    assert plan.objective >= free - 1e-9
    assert plan.stats["restriction_cost"] == pytest.approx(max(0.0, plan.objective / free - 1.0))
    assert (plan.status == "optimal") == (plan.stats["restriction_cost"] == 0.0)
