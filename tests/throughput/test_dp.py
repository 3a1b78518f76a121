"""The exact pipeline DP against brute force, DPL, and the evaluator."""

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stagecut as sc
from helpers import brute_force, random_inference_graph, random_training_graph
from stagecut.graph import Node


def _check_plan(graph, plan, k, l, memory):
    ev = sc.evaluate(graph, plan.device_of(), memory=memory, devices=k, cpus=l)
    assert ev.feasible
    assert ev.objective == pytest.approx(plan.objective)
    by_dev = {(d.kind, d.kind_index): d.load for d in ev.stages}
    assert [d.index for d in plan.stages] == list(range(len(plan.stages)))
    for d in plan.stages:
        assert d.load == pytest.approx(by_dev[(d.kind, d.kind_index)])
    assert ev.contiguous


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 6), k=st.integers(1, 3), l=st.integers(0, 1),
       tight=st.booleans())
def test_dp_equals_brute_force_inference(seed, n, k, l, tight):
    rng = random.Random(seed)
    g = random_inference_graph(rng, n)
    memory = 5.0 if tight else math.inf
    want = brute_force(g, k, l, memory)
    plan = sc.partition(g, devices=k, cpus=l, memory=memory, method="dp")
    if math.isinf(want):
        assert plan.status == "infeasible" and plan.objective is None
        return
    assert plan.status == "optimal"
    assert plan.objective == pytest.approx(want)
    _check_plan(g, plan, k, l, memory)
    dpl = sc.partition(g, devices=k, cpus=l, memory=memory, method="dpl")
    assert dpl.status in ("feasible", "unknown")
    if dpl.objective is not None:
        assert dpl.objective >= plan.objective - 1e-9
        assert dpl.lower_bound <= plan.objective + 1e-9


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 4), k=st.integers(1, 2), l=st.integers(0, 1),
       tight=st.booleans())
def test_dp_equals_brute_force_training(seed, n, k, l, tight):
    rng = random.Random(seed)
    g = random_training_graph(rng, n)
    memory = 6.0 if tight else math.inf
    want = brute_force(g, k, l, memory)
    plan = sc.partition(g, devices=k, cpus=l, memory=memory, method="dp")
    if math.isinf(want):
        assert plan.status == "infeasible"
        return
    assert plan.objective == pytest.approx(want)
    _check_plan(g, plan, k, l, memory)
    dpl = sc.partition(g, devices=k, cpus=l, memory=memory, method="dpl")
    assert dpl.objective is None or dpl.objective >= plan.objective - 1e-9


def test_pruning_does_not_change_the_optimum():
    for seed in range(15):
        g = sc.random_dag(9, edge_prob=0.3, seed=seed)
        a = sc.partition(g, devices=3, cpus=1, memory=12, method="dp", prune=True)
        b = sc.partition(g, devices=3, cpus=1, memory=12, method="dp", prune=False)
        assert a.objective == b.objective
        assert a.stats["ideals"] == b.stats["ideals"]
        assert a.stats["pairs"] <= b.stats["pairs"]


def test_ideal_pair_count_without_pruning():
    # a chain of n nodes has n + 1 ideals and (n + 1)(n + 2) / 2 pairs J <= I, minus the n + 1 with J = I
    g = sc.Graph.chain([1.0] * 10)
    p = sc.partition(g, devices=2, prune=False)
    assert p.stats["ideals"] == 11
    assert p.stats["pairs"] == 11 * 12 // 2 - 11
    # an antichain of 4 nodes: 16 ideals, 3^4 pairs J <= I, minus 16 with J = I
    g = sc.Graph([Node(id=i, compute={"accelerator": 1.0}) for i in range(4)], [])
    p = sc.partition(g, devices=2, prune=False)
    assert (p.stats["ideals"], p.stats["pairs"]) == (16, 81 - 16)


def test_chain_known_optimum():
    g = sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0], comm=0.5)
    p = sc.partition(g, devices=3)
    # [4] | [1,1,2] | [4]: the middle pays 0.5 in and 0.5 out: 5; moving any node across is worse
    assert p.objective == 5.0
    assert [list(d.nodes) for d in p.stages] == [[0], [1, 2, 3], [4]]


def test_cpu_pays_no_communication_and_unsupported_nodes_go_to_cpu():
    nodes = [Node(id="a", compute={"accelerator": 1.0, "cpu": 5.0}, comm=10.0),
             Node(id="b", compute={"accelerator": 1.0, "cpu": 2.0}, comm=10.0, kinds=frozenset({"cpu"})),
             Node(id="c", compute={"accelerator": 1.0, "cpu": 5.0}, comm=10.0)]
    g = sc.Graph(nodes, [("a", "b"), ("b", "c")])
    p = sc.partition(g, devices=2, cpus=1)
    # b must be on the CPU (no comm there); c's accelerator pays b's output (10) once
    assert p.objective == pytest.approx(11.0)
    assert p.device_of()["b"][0] == "cpu"
    assert sc.partition(g, devices=2, cpus=0).status == "infeasible"


def test_memory_limit_and_infeasible_answer():
    g = sc.Graph.chain([1.0, 1.0, 1.0], memory=[5.0, 5.0, 5.0])
    assert sc.partition(g, devices=3, memory=10).objective == 1.0 + 0.0
    assert sc.partition(g, devices=2, memory=10).objective == 2.0
    p = sc.partition(g, devices=1, memory=10)
    assert p.status == "infeasible" and p.objective is None and p.stages == ()


def test_auto_falls_back_to_dpl_and_dp_refuses():
    # 12 isolated nodes that all cost something (none is set aside): 4096 ideals
    g = sc.Graph([Node(id=i, compute={"accelerator": float(i + 1)}) for i in range(12)], [])
    p = sc.partition(g, devices=3, method="auto", max_ideals=1000)
    assert p.method == "dpl" and p.status == "feasible" and p.notes
    assert p.lower_bound <= p.objective
    dpl = sc.partition(g, devices=3, method="dpl")  # the bound's DPL run, reused
    assert (p.objective, p.stages) == (dpl.objective, dpl.stages)
    with pytest.raises(sc.TooManyIdealsError, match="dpl"):
        sc.partition(g, devices=3, method="dp", max_ideals=1000)
    exact = sc.partition(g, devices=3, method="auto")
    assert exact.method == "dp" and exact.status == "optimal" and exact.stats["ideals"] == 4096
    assert exact.objective <= p.objective


def test_cycle_created_by_colocation_is_fused():
    # a -> b -> c with a and c colocated: b must share their device (contiguity)
    nodes = [Node(id="a", compute={"accelerator": 1.0}, colocation=1),
             Node(id="b", compute={"accelerator": 5.0}),
             Node(id="c", compute={"accelerator": 1.0}, colocation=1)]
    g = sc.Graph(nodes, [("a", "b"), ("b", "c")])
    p = sc.partition(g, devices=3)
    assert p.objective == 7.0 and len(p.stages) == 1


def test_transformer_example_dp_and_expert_like_split():
    g = sc.transformer_like(layers=3, training=True, seed=1)
    p = sc.partition(g)
    assert p.status == "optimal"
    ev = sc.evaluate(g, p.device_of())
    assert ev.objective == pytest.approx(p.objective)
    # one device holding everything is a valid split; the DP must beat it
    one = sc.evaluate(g, {n.id: ("accelerator", 0) for n in g.nodes})
    assert p.objective <= one.objective


def test_partition_routes_ip_to_the_integer_program():
    g = sc.random_dag(6, edge_prob=0.4, seed=11)
    dp = sc.partition(g, devices=2, cpus=1, memory=9, method="dp")
    ip = sc.partition(g, devices=2, cpus=1, memory=9, method="ip", time_limit=60)
    assert ip.method.startswith("ip") and ip.status == "optimal"
    assert ip.objective == pytest.approx(dp.objective)
    free = sc.partition(g, devices=2, cpus=1, memory=9, method="ip", contiguous=False, time_limit=60)
    assert free.objective <= dp.objective + 1e-9
