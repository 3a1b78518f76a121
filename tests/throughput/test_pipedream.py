"""PipeDream's contraction (stagecut.throughput.pipedream): the path, the DP along it, GNMT."""

import itertools
import math
import random

import pytest
from tests.helpers import SHARED, published_rows, random_inference_graph, require_shared

import stagecut as sc
from stagecut.colocation import Units
from stagecut.errors import InvalidGraphError
from stagecut.graph import Node
from stagecut.throughput.baselines import pipedream as reexported
from stagecut.throughput.pipedream import path_groups, pipedream
from stagecut.throughput.problem import ThroughputProblem


def _path_of_nodes(graph, memory=math.inf):
    units = Units(graph, memory)
    return [[graph.nodes[i].id for u in grp for i in units.members[u]] for grp in path_groups(units)]


def _best_along_path(graph, groups, k):
    """Brute force: every cut of the path into at most k consecutive segments, scored by the evaluator."""
    best = math.inf
    n = len(groups)
    for m in range(1, min(k, n) + 1):
        for cuts in itertools.combinations(range(1, n), m - 1):
            bounds = (0, *cuts, n)
            split = {v: ("accelerator", s) for s in range(m) for grp in groups[bounds[s]:bounds[s + 1]] for v in grp}
            ev = sc.evaluate(graph, split, devices=k, cpus=0)
            if ev.feasible:
                best = min(best, ev.objective)
    return best


def test_the_path_goes_forward_and_the_dp_is_the_best_split_along_it():
    rng = random.Random(16)
    checked = refused = 0
    for _ in range(200):
        g = random_inference_graph(rng, rng.randint(3, 8))
        g = sc.Graph([Node(n.id, n.compute, n.memory, n.comm) for n in g.nodes], g.edges)  # every kind
        k = rng.randint(1, 4)
        groups = _path_of_nodes(g)
        pos = {v: p for p, grp in enumerate(groups) for v in grp}
        assert sorted(pos) == sorted(n.id for n in g.nodes)
        assert all(pos[u] <= pos[v] for u, v in g.edges)  # every prefix of the path is an ideal
        try:
            plan = pipedream(ThroughputProblem.from_graph(g, devices=k, cpus=0))
        except InvalidGraphError:
            refused += 1
            continue
        checked += 1
        assert plan.objective == pytest.approx(_best_along_path(g, groups, k), rel=1e-9, abs=1e-12)
        assert plan.contiguous
        on = {v: s.index for s in plan.stages for v in s.nodes}
        assert all(on[u] == on[v] for grp in groups for u in grp for v in grp)  # path nodes are not cut
    assert checked >= 100 and refused > 0


def test_side_inputs_and_dead_end_outputs_do_not_merge_a_chain():
    # a chain 0..5 with an extra input into 2 and a dead-end output of 3: the old contraction
    # (units comparable with all others) made 1..4 one region; now the chain stays a path
    chain = [Node(i, {"accelerator": t}) for i, t in enumerate((1.0, 5.0, 5.0, 5.0, 5.0, 1.0))]
    extra = [Node("in", {"accelerator": 1.0}), Node("out", {"accelerator": 1.0})]
    edges = [(i, i + 1) for i in range(5)] + [("in", 2), (3, "out")]
    g = sc.Graph(chain + extra, edges)
    assert _path_of_nodes(g) == [[0], [1], ["in"], [2], [3], ["out"], [4], [5]]
    plan = pipedream(ThroughputProblem.from_graph(g, devices=4))
    assert plan.objective == sc.partition(g, devices=4, method="dp").objective == 6.0
    assert plan.stats["side_units"] == 4 and reexported is pipedream  # 0 and 5 too: not comparable with in, out


def test_an_all_branching_graph_is_refused():
    # two parallel chains: no unit is comparable with all the others, nothing is left of the core
    nodes = [Node(f"{c}{i}", {"accelerator": 1.0}) for c in "ab" for i in range(3)]
    g = sc.Graph(nodes, [(f"{c}{i}", f"{c}{i + 1}") for c in "ab" for i in range(2)])
    with pytest.raises(InvalidGraphError, match="no cut unit"):
        pipedream(ThroughputProblem.from_graph(g, devices=2))


@pytest.mark.parametrize("name", ["gnmt_inference", "gnmt_training"])
def test_gnmt_gets_a_pipedream_value_at_or_above_the_dp(name):
    path = require_shared(SHARED / "throughput-inputs" / "LayerGraphs" / f"{name}.json")
    row = published_rows()[f"LayerGraphs/{name}.json"]
    g = sc.read_workload(path)
    problem = ThroughputProblem.from_graph(g)
    plan = pipedream(problem)
    ev = sc.evaluate(g, plan.device_of(), devices=problem.devices, cpus=problem.cpus, memory=problem.memory)
    assert ev.feasible and ev.acyclic_quotient and ev.objective == pytest.approx(plan.objective, rel=1e-12)
    # the DP (published dp_tps, which the exact DP reproduces) is at or below PipeDream's value
    assert row["dp_tps"] <= plan.objective + 0.005
    # and our PipeDream is within 0.5% of the published PipeDream column (33.03, 107.35)
    assert plan.objective == pytest.approx(row["pipedream_tps"], rel=5e-3)
    assert plan.stats["path_nodes"] == 72 and plan.stats["side_units"] == 13
