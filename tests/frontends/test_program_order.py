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
    assert plan.objective == pytest.approx(best)  # exact over program order (partition_trace's family)
    assert plan.objective >= free - 1e-9
    assert plan.stats["restriction_cost"] == pytest.approx(max(0.0, plan.objective / free - 1.0))
    assert (plan.status == "optimal") == (plan.stats["restriction_cost"] == 0.0)
    with_cpus = partition_program_order(trace_of(g, order), k, cpus=1)  # the order-edge route: not exact
    assert with_cpus.objective <= sc.partition(program_order_graph(trace_of(g, order)), devices=k, cpus=1).objective \
        + 1e-9


# ----------------------------------------------------------------------------- partition_trace
from stagecut.errors import InvalidArgumentError, TooManyIdealsError  # noqa: E402
from stagecut.frontends.program_order import partition_trace  # noqa: E402


def _layer_of(v):
    return ("L" + v[0],) if v[0] != "g" else ()


def _splits_at(order, k, allowed):
    """Program-order splits into at most k stages cutting only before positions in ``allowed``."""
    n = len(order)
    cuts_ok = [p for p in range(1, n) if p in allowed]
    for m in range(1, k + 1):
        for cuts in itertools.combinations(cuts_ok, m - 1):
            b = [0, *cuts, n]
            yield [order[b[i]:b[i + 1]] for i in range(m)]


def _best(g, order, k, allowed):
    return min(sc.evaluate(g, {v: ("accelerator", i) for i, s in enumerate(split) for v in s}).objective
               for split in _splits_at(order, k, allowed))


@pytest.mark.parametrize("seed", range(30))
def test_program_and_layer_families_equal_brute_force_over_their_splits(seed):
    rng = random.Random(seed)
    n = rng.randint(3, 9)
    g0 = sc.random_dag(n, edge_prob=0.4, seed=seed)
    ids = [f"{'abcg'[rng.randint(0, 3)]}{i}" for i in range(n)]  # the first letter names the layer, g: none
    g = sc.Graph([sc.Node(ids[i], dict(nd.compute), comm=nd.comm) for i, nd in enumerate(g0.nodes)],
                 [(ids[g0.index[u]], ids[g0.index[v]]) for u, v in g0.edges])
    order = [g.nodes[i].id for i in g.topological_order()]
    trace = types.SimpleNamespace(graph=g, order=order, modules={v: _layer_of(v) for v in order})
    k = rng.randint(2, 3)
    prog = partition_trace(trace, k, family="program")
    assert prog.status == "optimal" and prog.stats["family"] == "program"
    assert prog.objective == pytest.approx(_best(g, order, k, set(range(n))))
    layer_cuts = {p for p in range(1, n) if _layer_of(order[p]) == () or _layer_of(order[p]) != _layer_of(order[p - 1])}
    lay = partition_trace(trace, k, family="layer")
    assert lay.objective == pytest.approx(_best(g, order, k, layer_cuts))
    free = sc.partition(g, devices=k).objective
    auto = partition_trace(trace, k)
    assert auto.objective == pytest.approx(free) and auto.stats["family"] == "contiguous"
    assert auto.objective <= prog.objective <= lay.objective
    assert prog.lower_bound is None or prog.lower_bound <= free + 1e-12


def test_bad_family_and_a_family_that_does_not_fit():
    g = sc.Graph.chain([1.0, 2.0, 3.0])
    trace = types.SimpleNamespace(graph=g, order=[0, 1, 2])
    with pytest.raises(InvalidArgumentError, match="family"):
        partition_trace(trace, 2, family="modules")
    wide = sc.Graph([sc.Node(i, {"accelerator": 1.0 + i}, comm=0.5) for i in range(12)], [])
    wtrace = types.SimpleNamespace(graph=wide, order=list(range(12)))
    with pytest.raises(TooManyIdealsError, match="max_ideals"):
        partition_trace(wtrace, 2, family="contiguous", max_ideals=100)
    plan = partition_trace(wtrace, 2, max_ideals=100)  # auto falls back to program order and says why
    assert plan.stats["family"] == "program" and any("not solved" in n for n in plan.notes)
