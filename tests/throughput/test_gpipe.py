"""The training objectives (issue 16, item 2): FW/BW per device, GPipe's max FW + max BW, and
the exact GPipe DP against brute force over every contiguous split."""

import itertools
import math
import random

import pytest

import stagecut as sc
from helpers import _quotient_acyclic, colocation_groups, random_training_graph
from stagecut.errors import InvalidArgumentError, TooManyIdealsError
from stagecut.graph import Node
from stagecut.throughput.gpipe import gpipe_objective, partition_gpipe, training_loads


def phases(graph, dev_of):
    """Each device's (FW, BW), written out plainly: compute by the node's phase, and on an
    accelerator each producer's output once per device that sends or receives it, in the
    producer's phase."""
    fw, bw = {}, {}
    for d in set(dev_of):
        f = b = 0.0
        for i, n in enumerate(graph.nodes):
            if dev_of[i] == d:
                t = n.compute[d[0]]
                f, b = (f, b + t) if n.backward else (f + t, b)
        if d[0] == "accelerator":
            for p, n in enumerate(graph.nodes):
                cons = {dev_of[v] for v in graph.succ[p]}
                sends = dev_of[p] == d and cons - {d}
                receives = dev_of[p] != d and d in cons
                if sends or receives:
                    f, b = (f, b + n.comm) if n.backward else (f + n.comm, b)
        fw[d], bw[d] = f, b
    return fw, bw


def fits(graph, dev_of, memory):
    """Every node runs on its device's kind; every accelerator's memory is within the limit."""
    used = {}
    for i, n in enumerate(graph.nodes):
        if not n.supports(dev_of[i][0]):
            return False
        if dev_of[i][0] == "accelerator":
            used[dev_of[i]] = used.get(dev_of[i], 0.0) + n.memory
    return all(m <= memory for m in used.values())


def brute_gpipe(graph, k, l, memory=math.inf):
    """The least max FW + max BW over every feasible contiguous split (colocation classes whole)."""
    devices = [("accelerator", i) for i in range(k)] + [("cpu", i) for i in range(l)]
    groups = colocation_groups(graph)
    best = math.inf
    for choice in itertools.product(range(len(devices)), repeat=len(groups)):
        dev_of = [None] * len(graph)
        for grp, c in zip(groups, choice):
            for i in grp:
                dev_of[i] = devices[c]
        if not _quotient_acyclic(graph, dev_of):
            continue
        if not fits(graph, dev_of, memory):
            continue
        fw, bw = phases(graph, dev_of)
        best = min(best, max(fw.values()) + max(bw.values()))
    return best


def with_backward(graph, rng):
    """``graph`` plus a backward node per forward node (colocated, edges mirrored), random times."""
    nodes = [Node(n.id, n.compute, memory=n.memory, comm=n.comm, colocation=n.id) for n in graph.nodes]
    nodes += [Node(("b", n.id), {k: float(rng.randint(0, 12)) for k in n.compute}, comm=float(rng.randint(0, 3)),
                   colocation=n.id, backward=True) for n in graph.nodes]
    edges = list(graph.edges) + [(("b", v), ("b", u)) for u, v in graph.edges]
    edges += [(n.id, ("b", n.id)) for n in graph.nodes]
    return sc.Graph(nodes, edges)


def cases(count):
    rng = random.Random(16)
    for t in range(count):
        if t % 2:
            g = random_training_graph(rng, rng.randint(2, 5))
        else:
            g = with_backward(sc.random_dag(rng.randint(2, 5), edge_prob=0.4, seed=t), rng)
        yield g, rng.randint(1, 3), rng.randint(0, 1), rng.choice([math.inf, 6.0, 10.0])


def test_phases_add_up_to_the_evaluators_load_and_match_a_plain_count():
    rng = random.Random(3)
    checked = 0
    for g, k, l, _ in cases(40):
        devs = [("accelerator", i) for i in range(k)] + [("cpu", i) for i in range(l)]
        dev_of = [rng.choice(devs) for _ in g.nodes]
        for grp in colocation_groups(g):
            for i in grp:
                dev_of[i] = dev_of[grp[0]]
        if not all(n.supports(dev_of[i][0]) for i, n in enumerate(g.nodes)):
            continue
        split = {n.id: dev_of[i] for i, n in enumerate(g.nodes)}
        t = training_loads(g, split)
        fw, bw = phases(g, dev_of)
        for s in t.stages:
            d = (s.kind, s.kind_index)
            assert s.forward == pytest.approx(fw[d]) and s.backward == pytest.approx(bw[d])
            assert s.forward + s.backward == pytest.approx(s.load)
        assert t.pipedream == sc.evaluate(g, split).objective
        assert t.gpipe == pytest.approx(max(fw.values()) + max(bw.values()))
        assert t.gpipe >= t.pipedream - 1e-9
        checked += 1
    assert checked >= 20  # the placements skipped (a node on a device it cannot use) are a minority


def test_gpipe_dp_equals_brute_force_on_120_small_training_graphs():
    seen_infeasible = differs = 0
    for g, k, l, mem in cases(120):
        plan = partition_gpipe(g, devices=k, cpus=l, memory=mem)
        want = brute_gpipe(g, k, l, mem)
        if math.isinf(want):
            assert plan.status == "infeasible" and plan.objective is None
            seen_infeasible += 1
            continue
        assert plan.status == "optimal" and plan.contiguous
        assert plan.objective == pytest.approx(want), (g, k, l, mem)
        assert gpipe_objective(sc.ThroughputProblem.from_graph(g, k, l, mem), plan.device_of()) == \
            pytest.approx(want)
        assert sc.evaluate(g, plan.device_of(), devices=k, cpus=l, memory=mem).feasible
        assert plan.stats["pipedream_objective"] <= plan.objective + 1e-9
        one_f_one_b = sc.partition(g, devices=k, cpus=l, memory=mem, method="dp").objective
        differs += one_f_one_b < plan.stats["pipedream_objective"] - 1e-9
    assert seen_infeasible < 60
    assert differs  # the GPipe optimum is not always the 1F1B optimum


def test_a_gpipe_split_can_differ_from_the_1f1b_one():
    # a chain, FW (6, 4, 2, 1), BW (4, 1, 4, 4), 2 devices, by hand:
    # {0} | {1, 2, 3}: FW 6, 7 and BW 4, 9: GPipe 7 + 9 = 16, 1F1B max(10, 16) = 16
    # {0, 1} | {2, 3}: FW 10, 3 and BW 5, 8: GPipe 10 + 8 = 18, 1F1B max(15, 11) = 15
    # {0, 1, 2} | {3}: FW 12, 1 and BW 9, 4: GPipe 21, 1F1B 21
    fwd = [Node(i, {"accelerator": t}, colocation=i) for i, t in enumerate([6.0, 4.0, 2.0, 1.0])]
    bwd = [Node(10 + i, {"accelerator": t}, colocation=i, backward=True) for i, t in enumerate([4.0, 1.0, 4.0, 4.0])]
    g = sc.Graph(fwd + bwd, [(0, 1), (1, 2), (2, 3), (13, 12), (12, 11), (11, 10)] + [(i, 10 + i) for i in range(4)])
    plan = partition_gpipe(g, devices=2)
    assert plan.objective == brute_gpipe(g, 2, 0) == 16.0
    assert [s.nodes for s in plan.stages] == [(0, 10), (1, 2, 3, 11, 12, 13)]
    assert plan.stats["pipedream_objective"] == 16.0
    assert [(s.forward, s.backward) for s in plan.stages] == [(6.0, 4.0), (7.0, 9.0)]
    dp = sc.partition(g, devices=2, method="dp")
    assert dp.objective == 15.0 and gpipe_objective(g, dp.device_of()) == 18.0


def test_too_many_ideals_and_bad_arguments():
    g = with_backward(sc.Graph([Node(i, {"accelerator": 1.0}) for i in range(12)], []), random.Random(0))
    with pytest.raises(TooManyIdealsError, match="max_ideals=1000"):
        partition_gpipe(g, devices=2)
    with pytest.raises(InvalidArgumentError, match="max_ideals"):
        partition_gpipe(g, devices=2, max_ideals=0)
    with pytest.raises(InvalidArgumentError, match="order"):
        training_loads(g, {n.id: ("accelerator", 0) for n in g.nodes}, order=[("accelerator", 1)])


def test_partition_objective_gpipe_is_the_gpipe_dp():
    rng = random.Random(9)
    for _ in range(10):
        g = random_training_graph(rng, rng.randint(2, 5))
        plan = sc.partition(g, devices=2, cpus=1, objective="gpipe")
        assert plan.method == "gpipe-dp" and plan.objective == pytest.approx(brute_gpipe(g, 2, 1))
    with pytest.raises(InvalidArgumentError, match="objective must be one of"):
        sc.partition(g, devices=2, objective="zb")
    with pytest.raises(InvalidArgumentError, match="method must be 'auto' or 'dp'"):
        sc.partition(g, devices=2, objective="gpipe", method="dpl")
    with pytest.raises(InvalidArgumentError, match="time_limit"):
        sc.partition(g, devices=2, objective="gpipe", time_limit=5)
