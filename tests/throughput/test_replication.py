"""Replicated stages and the hierarchical topology (stagecut.throughput.replication): the DPs
against brute force over every contiguous split x replication vector x placement, scored by the
model's evaluator; the evaluator against hand-computed loads."""

import itertools
import math
import random

import pytest
from tests.helpers import SHARED, colocation_groups, random_inference_graph, random_training_graph, require_shared

import stagecut as sc
from stagecut.errors import InvalidArgumentError, InvalidGraphError, TooManyIdealsError
from stagecut.graph import Node
from stagecut.throughput import replication
from stagecut.throughput.pipedream import pipedream
from stagecut.throughput.problem import ThroughputProblem
from stagecut.throughput.replication import (
    evaluate_hierarchical,
    evaluate_replicated,
    partition_hierarchical,
    partition_replicated,
)


def _small_graph(rng):
    """A random inference or training graph; most nodes runnable on an accelerator."""
    if rng.random() < 0.4:
        g = random_training_graph(rng, rng.randint(2, 3))
    else:
        g = random_inference_graph(rng, rng.randint(2, 5))
    if rng.random() < 0.9:
        g = sc.Graph([Node(n.id, n.compute, n.memory, n.comm, colocation=n.colocation, backward=n.backward)
                      for n in g.nodes], g.edges)
    weights = {n.id: float(rng.randint(0, 6)) for n in g.nodes if rng.random() < 0.7}
    return g, weights


def _pipelines(graph, max_stages):
    """Every ordered split of the colocation classes into at most max_stages stages whose forward
    edges never go back: the node ids of each stage, in pipeline order."""
    groups = colocation_groups(graph)
    cls = {i: c for c, grp in enumerate(groups) for i in grp}
    fwd = [(cls[i], cls[j]) for i in range(len(graph)) for j in graph.succ[i]
           if not graph.nodes[i].backward and not graph.nodes[j].backward]
    for q in range(1, min(max_stages, len(groups)) + 1):
        for labels in itertools.product(range(q), repeat=len(groups)):
            if len(set(labels)) < q or any(labels[a] > labels[b] for a, b in fwd):
                continue
            yield [[graph.nodes[i].id for c, grp in enumerate(groups) if labels[c] == t for i in grp]
                   for t in range(q)]


def _vectors(n, total):
    """Every vector of n counts >= 1 adding up to at most total."""
    return [v for v in itertools.product(range(1, total + 1), repeat=n) if sum(v) <= total]


def _brute_replicated(graph, k, bandwidth, memory, weights):
    best = math.inf
    for stages in _pipelines(graph, k):
        for reps in _vectors(len(stages), k):
            ev = evaluate_replicated(graph, list(zip(stages, reps)), devices=k, bandwidth=bandwidth,
                                     memory=memory, weights=weights)
            if ev.feasible:
                best = min(best, ev.objective)
    return best


def _brute_hierarchical(graph, servers, per, b_in, b_out, memory, weights):
    best = math.inf
    for stages in _pipelines(graph, servers * per):
        q = len(stages)
        for cuts in itertools.chain.from_iterable(itertools.combinations(range(1, q), c) for c in range(q)):
            bounds = (0, *cuts, q)
            runs = [stages[bounds[j]:bounds[j + 1]] for j in range(len(bounds) - 1)]
            if any(len(run) > per for run in runs):
                continue
            for ms in _vectors(len(runs), servers):
                for reps in itertools.product(*(_vectors(len(run), per) for run in runs)):
                    blocks = [(m, list(zip(run, r))) for m, run, r in zip(ms, runs, reps)]
                    ev = evaluate_hierarchical(graph, blocks, servers=servers, gpus_per_server=per, bandwidth_in=b_in,
                                               bandwidth_out=b_out, memory=memory, weights=weights)
                    if ev.feasible:
                        best = min(best, ev.objective)
    return best


def test_replicated_dp_equals_brute_force():
    rng = random.Random(3)
    found = infeasible = 0
    for _ in range(120):
        g, weights = _small_graph(rng)
        k = rng.randint(1, 4)
        bandwidth = rng.choice([0.5, 1.0, 4.0, 50.0])
        memory = rng.choice([math.inf, 6.0, 9.0])
        plan = partition_replicated(g, devices=k, bandwidth=bandwidth, memory=memory, weights=weights)
        best = _brute_replicated(g, k, bandwidth, memory, weights)
        if plan.objective is None:
            assert best == math.inf and plan.status == "infeasible"
            infeasible += 1
            continue
        found += 1
        assert plan.objective == pytest.approx(best, rel=1e-9, abs=1e-12)
        reps = [int(r) for r in plan.stats["replicas"].split(",")]
        assert sum(reps) <= k and len(reps) == len(plan.stages) and plan.contiguous
        again = evaluate_replicated(g, [(s.nodes, r) for s, r in zip(plan.stages, reps)], devices=k,
                                    bandwidth=bandwidth, memory=memory, weights=weights)
        assert again.feasible and again.objective == plan.objective
    assert found >= 100 and infeasible > 0


def test_hierarchical_dp_equals_brute_force():
    rng = random.Random(8)
    found = infeasible = 0
    for _ in range(120):
        g, weights = _small_graph(rng)
        servers, per = rng.choice([(1, 2), (1, 3), (2, 1), (2, 2), (3, 1)])
        b_out = rng.choice([0.5, 1.0, 4.0])
        b_in = b_out * rng.choice([1.0, 2.0, 8.0])
        memory = rng.choice([math.inf, 6.0, 9.0])
        plan = partition_hierarchical(g, servers=servers, gpus_per_server=per, bandwidth_in=b_in,
                                      bandwidth_out=b_out, memory=memory, weights=weights)
        best = _brute_hierarchical(g, servers, per, b_in, b_out, memory, weights)
        if plan.objective is None:
            assert best == math.inf
            infeasible += 1
            continue
        found += 1
        assert plan.objective == pytest.approx(best, rel=1e-9, abs=1e-12)
        assert sum(int(m) for m in plan.stats["blocks"].split(",")) <= servers
    assert found >= 100 and infeasible > 0


def test_one_server_is_the_replication_model():
    rng = random.Random(5)
    for _ in range(30):
        g, weights = _small_graph(rng)
        k, b = rng.randint(1, 4), rng.choice([0.5, 2.0])
        flat = partition_replicated(g, devices=k, bandwidth=b, weights=weights)
        one = partition_hierarchical(g, servers=1, gpus_per_server=k, bandwidth_in=b, bandwidth_out=b / 3,
                                     weights=weights)
        assert flat.objective == pytest.approx(one.objective) if flat.objective is not None else one.objective is None
        assert sc.Plan.from_json(one.to_json()) == one and sc.Plan.from_json(flat.to_json()) == flat


def test_without_cheap_replication_it_is_the_max_load_dp():
    # parameters too heavy to synchronise: every stage on one accelerator, the plain exact DP's optimum
    rng = random.Random(9)
    for _ in range(25):
        g, _ = _small_graph(rng)
        k = rng.randint(1, 4)
        heavy = {n.id: 1e9 for n in g.nodes}
        plan = partition_replicated(g, devices=k, bandwidth=1.0, weights=heavy, memory=8.0)
        dp = sc.partition(g, devices=k, cpus=0, memory=8.0, method="dp")
        assert (plan.objective is None) == (dp.objective is None)
        if plan.objective is not None:
            assert plan.objective == pytest.approx(dp.objective, rel=1e-9)


def test_the_evaluator_by_hand():
    cost = ((6.0, 2.0), (4.0, 1.0), (2.0, 0.0))
    g = sc.Graph([Node(i, {"accelerator": t}, memory=mem, comm=1.0) for i, (t, mem) in enumerate(cost)],
                 [(0, 1), (1, 2), (0, 2)])
    # stage {0} on 2 replicas: (6 + 1) / 2 + 4 * (2 - 1) * 2 / (2 * 1); stage {1, 2}: 6 + 1 (receives 0 once)
    ev = evaluate_replicated(g, [([0], 2), ([1, 2], 1)], devices=3, bandwidth=1.0)
    assert [s.load for s in ev.stages] == [3.5 + 4.0, 7.0]
    assert ev.stages[0].parts == {"compute": 3.0, "comm": 0.5, "sync": 4.0} and ev.feasible
    assert evaluate_replicated(g, [([0], 2), ([1, 2], 2)], devices=3, bandwidth=1.0).issues == (
        "block 0 uses 4 accelerators per server, only 3 in a server",)
    # two servers of one accelerator, B_in / B_out = 4: 0 | 1 2 across servers, 0's output crosses
    hev = evaluate_hierarchical(g, [(1, [([0], 1)]), (1, [([1, 2], 1)])], servers=2, gpus_per_server=1,
                                bandwidth_in=4.0, bandwidth_out=1.0)
    assert [s.load for s in hev.stages] == [6.0 + 4.0, 6.0 + 4.0]
    # 0 | 1 || 2: node 1's output leaves its block (x4), 0 sends inside its block (1) but also to 2 outside (x4)
    hev = evaluate_hierarchical(g, [(1, [([0], 1), ([1], 1)]), (1, [([2], 1)])], servers=2, gpus_per_server=2,
                                bandwidth_in=4.0, bandwidth_out=1.0)
    assert [s.load for s in hev.stages] == [6.0 + 4.0, 4.0 + 1.0 + 4.0, 2.0 + 4.0 + 4.0]
    assert [s.device for s in hev.stages] == ["accelerator:0", "accelerator:1", "accelerator:2"]
    back = evaluate_replicated(g, [([1, 2], 1), ([0], 1)], devices=2, bandwidth=1.0)
    assert not back.feasible and any("not a pipeline" in x for x in back.issues)


def test_bad_input_names_the_field():
    g = sc.Graph.chain([1.0, 2.0])
    with pytest.raises(InvalidGraphError, match="node 1 is in no stage"):
        evaluate_replicated(g, [([0], 1)], devices=1, bandwidth=1.0)
    with pytest.raises(InvalidGraphError, match="node 0 is in two stages"):
        evaluate_replicated(g, [([0], 1), ([0, 1], 1)], devices=2, bandwidth=1.0)
    with pytest.raises(InvalidGraphError, match="replicas"):
        evaluate_replicated(g, [([0, 1], 0)], devices=2, bandwidth=1.0)
    with pytest.raises(InvalidArgumentError, match="bandwidth"):
        partition_replicated(g, devices=2, bandwidth=0.0)
    with pytest.raises(InvalidArgumentError, match="bandwidth_out"):
        partition_hierarchical(g, servers=1, gpus_per_server=2, bandwidth_in=1.0, bandwidth_out=-1.0)
    with pytest.raises(InvalidArgumentError, match="weights: unknown node 'x'"):
        partition_replicated(g, devices=2, bandwidth=1.0, weights={"x": 1.0})
    with pytest.raises(InvalidArgumentError, match="along"):
        partition_replicated(g, devices=2, bandwidth=1.0, along="chain")
    with pytest.raises(TooManyIdealsError, match="max_ideals=2"):
        partition_replicated(g, devices=2, bandwidth=1.0, max_ideals=2)


def test_gnmt_training_along_pipedream_s_path():
    path = require_shared(SHARED / "throughput-inputs" / "LayerGraphs" / "gnmt_training.json")
    g = sc.read_workload(path)
    # with parameters too heavy to synchronise, the replicated DP along PipeDream's path is PipeDream
    heavy = {n.id: 1e15 for n in g.nodes}
    plan = partition_replicated(g, devices=6, bandwidth=1e6, weights=heavy, along="pipedream")
    base = pipedream(ThroughputProblem.from_graph(g, devices=6, cpus=0))
    assert plan.objective == pytest.approx(base.objective, rel=1e-9)
    # with the nodes' memory as parameters over a fast link, replicas help
    fast = partition_replicated(g, devices=6, bandwidth=1e8, along="pipedream")
    assert fast.objective < base.objective and max(int(r) for r in fast.stats["replicas"].split(",")) > 1


def _hierarchical_answer(graph, **kw):
    plan = partition_hierarchical(graph, **kw)
    return (plan.objective, plan.stats.get("blocks"), plan.stats.get("replicas"),
            [(s.nodes, s.load) for s in plan.stages])


def test_reusing_the_open_chain_and_pruning_blocks_change_no_plan(monkeypatch):
    # the hierarchical DP reuses the open chain from each ideal and skips blocks that cannot improve the
    # incumbent; with both off (_SHARE = False) it is the plain DP: the same plan, bit for bit, on every graph
    rng = random.Random(21)
    for trial in range(30):
        if trial % 3 == 0:
            g, weights = sc.Graph.chain([float(rng.randint(0, 9)) for _ in range(rng.randint(4, 9))],
                                        comm=float(rng.randint(0, 3))), None
            g = sc.Graph(list(g.nodes), [*g.edges, *((0, j) for j in range(2, len(g)) if rng.random() < 0.3)])
        else:
            g, weights = _small_graph(rng)
        servers, per = rng.choice([(2, 2), (3, 1), (2, 3), (3, 2)])
        b_out = rng.choice([0.5, 1.0, 4.0])
        kw = dict(servers=servers, gpus_per_server=per, bandwidth_in=b_out * rng.choice([1.0, 2.0, 8.0]),
                  bandwidth_out=b_out, memory=rng.choice([math.inf, 9.0, 14.0]), weights=weights,
                  along=rng.choice(["ideals", "pipedream"]))
        fast = _hierarchical_answer(g, **kw)
        monkeypatch.setattr(replication, "_SHARE", False)
        plain = _hierarchical_answer(g, **kw)
        monkeypatch.setattr(replication, "_SHARE", True)
        assert fast == plain, (trial, kw)


# slow: the default run covers this path on small graphs (the brute-force and the open-chain tests)
# and the replicated DP along PipeDream's path on GNMT (test_gnmt_training_along_pipedream_s_path)
@pytest.mark.slow
def test_gnmt_hierarchical_along_pipedream_s_path_as_before():
    # the plain DP's answer (about 10 s of CPU before the open chain and the pruning; about 1 s now)
    path = require_shared(SHARED / "throughput-inputs" / "LayerGraphs" / "gnmt_training.json")
    g = sc.read_workload(path)
    plan = partition_hierarchical(g, servers=2, gpus_per_server=3, bandwidth_in=1e9, bandwidth_out=1e8,
                                  along="pipedream")
    assert plan.objective == 90.02689231125001
    assert (plan.stats["blocks"], plan.stats["replicas"]) == ("1,1", "2,1|1,2")
    assert [(len(s.nodes), s.nodes[0]) for s in plan.stages] == [(68, 1), (36, 36), (44, 52), (44, 75)]
