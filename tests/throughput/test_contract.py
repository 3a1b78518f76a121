"""The contraction before the exact DP keeps the optimum: the DP on the contracted unit DAG
equals the uncontracted DP (random operator-like graphs, forward and training, each rule alone
and all together) and brute force on small graphs; and it does contract (else the comparison
would prove nothing)."""

import math
import random

import pytest

import stagecut as sc
from helpers import brute_force, random_training_graph
from stagecut.colocation import Units
from stagecut.frontends._common import with_backward
from stagecut.graph import Node
from stagecut.throughput.contract import contract_units, try_contracted_dp
from stagecut.throughput.dp import _exact_raw, try_dp
from stagecut.throughput.problem import ThroughputProblem, set_aside_free_nodes

RULES = ("leaf", "pull", "push")


def operator_graph(rng, n, memory=False):
    """A DAG like a traced model's: operators, views (no compute, the input's size), small
    constants hanging into one operator, sinks; integer costs (exact sums)."""
    nodes, edges = [], []
    for i in range(n):
        kind = rng.choices(["op", "view", "const", "cheap"], [5, 3, 2, 1])[0] if i else "op"
        mem = rng.randint(0, 3) if memory and rng.random() < 0.5 else 0
        if kind == "const":
            nodes.append(Node(i, {"accelerator": rng.choice([0, 0, 1, 2])}, comm=rng.randint(0, 3), memory=mem))
            continue
        earlier = list(range(i))
        preds = [rng.choice(earlier)] if kind in ("view", "cheap") else rng.sample(earlier, min(len(earlier),
                                                                                                 rng.randint(1, 2)))
        if kind == "view":
            nodes.append(Node(i, {"accelerator": 0}, comm=nodes[preds[0]].comm, memory=mem))
        elif kind == "cheap":
            nodes.append(Node(i, {"accelerator": 1}, comm=rng.randint(0, 4), memory=mem))
        else:
            nodes.append(Node(i, {"accelerator": rng.randint(1, 8)}, comm=rng.randint(0, 4), memory=mem))
        edges += [(p, i) for p in preds]
    # a constant with no consumer yet feeds a later operator
    for i in range(len(nodes)):
        if not any(u == i for u, _ in edges) and i < n - 1 and rng.random() < 0.8:
            edges.append((i, rng.randint(i + 1, n - 1)))
    return sc.Graph(nodes, sorted(set(edges)))


def contracted_objective(problem, rules=RULES):
    core, _ = set_aside_free_nodes(problem)
    units = contract_units(core.graph, Units(core.graph, core.memory), memory=core.memory, cpus=core.cpus,
                           rules=rules)
    raw = _exact_raw(core, units, 10**7, True)
    return raw["objective"], units


def plain_objective(problem):
    plan = try_dp(problem, max_ideals=10**7)
    return plan.objective if plan.objective is not None else math.inf


def graphs(seed):
    rng = random.Random(seed)
    g = operator_graph(rng, rng.randint(4, 16), memory=seed % 3 == 0)
    kind = seed % 4
    if kind == 1:
        g = with_backward(g, rng.choice([1.0, 2.0]))
    elif kind == 2:
        g = random_training_graph(rng, rng.randint(3, 7))
    return g


@pytest.mark.parametrize("seed", range(120))
def test_the_contracted_dp_equals_the_plain_dp(seed):
    g = graphs(seed)
    rng = random.Random(seed)
    memory = rng.choice([math.inf, 6.0, 10.0]) if seed % 3 == 0 else math.inf
    for k in (1, 2, 3, 4):
        problem = ThroughputProblem.from_graph(g, devices=k, cpus=0, memory=memory)
        want = plain_objective(problem)
        for rules in [RULES, *[(r,) for r in RULES]]:
            got, _ = contracted_objective(problem, rules)
            assert got == pytest.approx(want, rel=1e-12, abs=1e-12), (k, rules)
        plan = try_contracted_dp(problem, max_ideals=10**7)
        assert plan.status == ("optimal" if math.isfinite(want) else "infeasible")
        if plan.objective is not None:
            assert plan.objective == pytest.approx(want)
            assert sc.evaluate(g, plan.device_of(), devices=k, memory=memory).objective == plan.objective


@pytest.mark.parametrize("seed", range(40))
def test_the_contracted_dp_equals_brute_force_on_small_graphs(seed):
    rng = random.Random(1000 + seed)
    g = operator_graph(rng, rng.randint(3, 7))
    if seed % 2:
        g = with_backward(g)
    for k in (2, 3):
        problem = ThroughputProblem.from_graph(g, devices=k, cpus=0)
        got, _ = contracted_objective(problem)
        assert got == pytest.approx(brute_force(g, k, 0), rel=1e-12, abs=1e-12)


def test_the_rules_fire_on_these_graphs():
    merged = {r: 0 for r in (*RULES, "hang")}
    shrunk = 0
    for seed in range(120):
        g = graphs(seed)
        _, units = contracted_objective(ThroughputProblem.from_graph(g, devices=2, cpus=0))
        for r, c in units.merged.items():
            merged[r] += c
        shrunk += units.n_units < units.before
    assert merged["leaf"] > 20 and merged["pull"] > 20 and merged["push"] > 5 and merged["hang"] == 0
    assert shrunk > 40


def test_a_leaf_costlier_than_its_output_stays_and_cpus_turn_contraction_off():
    # c (compute 3, output 1) hangs into y: moving it onto y's stage could raise that stage by 2
    g = sc.Graph([Node("x", {"accelerator": 4}, comm=1), Node("c", {"accelerator": 3}, comm=1),
                  Node("y", {"accelerator": 4})], [("x", "y"), ("c", "y")])
    units = Units(g)
    assert contract_units(g, units).merged == {"leaf": 0, "pull": 0, "push": 0, "hang": 0}
    assert contract_units(g, units, restrict=True).restricted == [0, 1]  # both are source leaves of y
    cheap = sc.Graph([Node("x", {"accelerator": 4}, comm=1), Node("c", {"accelerator": 1}, comm=1),
                      Node("y", {"accelerator": 4})], [("x", "y"), ("c", "y")])
    assert contract_units(cheap, Units(cheap)).merged["leaf"] == 1
    assert contract_units(cheap, Units(cheap), cpus=1).n_units == 3


def test_memory_that_may_bind_keeps_a_leaf_in_place():
    g = sc.Graph([Node("x", {"accelerator": 4}, comm=1, memory=5), Node("c", {"accelerator": 1}, comm=1, memory=5),
                  Node("y", {"accelerator": 4}, memory=5)], [("x", "y"), ("c", "y")])
    assert contract_units(g, Units(g, 10.0), memory=10.0).merged["leaf"] == 0
    assert contract_units(g, Units(g, 15.0), memory=15.0).merged["leaf"] == 1


def test_a_link_whose_producer_feeds_another_stage_is_not_pulled():
    # p feeds x and y; x is cheap with a small output (2 + 2 <= 5), but pulling x onto p's stage
    # adds 4 there while p still sends to y: {p} | {x, z} | {y} costs 17, with p and x together 19
    g = sc.Graph([Node("p", {"accelerator": 10}, comm=5), Node("x", {"accelerator": 2}, comm=2),
                  Node("y", {"accelerator": 10}), Node("z", {"accelerator": 10})],
                 [("p", "x"), ("p", "y"), ("x", "z")])
    problem = ThroughputProblem.from_graph(g, devices=3, cpus=0)
    assert plain_objective(problem) == 17
    got, units = contracted_objective(problem)
    assert got == 17 and units.n_units == 4
