"""The pricing and the order repair of ``benches/mtpp_partitioner_check.py`` (the partitioner itself,
Mt-KaHyPar, is an optional tool and not needed here): a partition is priced as the evaluator prices
its blocks, the repair always gives an acyclic quotient, and a missing partitioner is one clear
message."""

import random

import pytest

import stagecut as sc
from helpers import bench_module, hide_module
from stagecut.mtpp.model import MtppProblem, evaluate


@pytest.fixture(scope="module")
def pc():
    return bench_module("mtpp_partitioner_check")


@pytest.mark.parametrize("seed", range(6))
def test_the_repair_gives_an_acyclic_plan_priced_as_the_evaluator_prices_it(pc, seed):
    rng = random.Random(seed)
    g = sc.regal_graph(30 + 5 * seed, model=["erdos_renyi", "barabasi_albert"][seed % 2], seed=seed)
    p = MtppProblem(g, devices=4)
    labels = [rng.randrange(4) for _ in g.nodes]
    fixed = pc.repaired(p, labels)
    assert pc.acyclic(p, fixed)
    ids = [nd.id for nd in g.nodes]
    blocks = [[ids[i] for i in blk] for blk in pc.blocks_of(fixed)]
    want = evaluate(p, blocks).objective  # (it refuses a cyclic quotient)
    assert pc.largest_block(p, fixed) == pytest.approx(want, rel=1e-12)


def test_a_cyclic_quotient_is_seen(pc):
    g = sc.Graph.chain([1.0, 1.0, 1.0], comm=1.0)
    p = MtppProblem(g, devices=2)
    assert not pc.acyclic(p, [0, 1, 0])  # block 0 feeds block 1, which feeds block 0
    assert pc.acyclic(p, [0, 0, 1])
    assert pc.repaired(p, [0, 1, 0]) in ([0, 1, 1], [1, 1, 1], [0, 0, 0])
    assert pc.largest_block(p, [0, 1, 0]) == 4.0  # (block 0: 2 of work, a tensor out and one in)


def test_without_the_partitioner_the_script_says_how_to_get_it(pc, monkeypatch):
    hide_module(monkeypatch, "mtkahypar")
    with pytest.raises(SystemExit, match="pip install mtkahypar"):
        pc.partitions(MtppProblem(sc.Graph.chain([1.0, 1.0]), devices=2), [0.01], 1)


@pytest.mark.parametrize("seed", range(4))
def test_the_repair_keeps_a_partition_whose_order_holds_already(pc, seed):
    g = sc.regal_graph(40, model="erdos_renyi", seed=seed)
    p = MtppProblem(g, devices=4)
    topo = g.topological_order()
    labels = [0] * len(g.nodes)
    for r, v in enumerate(topo):  # (four runs of the topological order, numbered backwards)
        labels[v] = 3 - 4 * r // len(topo)
    assert pc.acyclic(p, labels)
    assert sorted(map(sorted, pc.blocks_of(pc.repaired(p, labels)))) == sorted(map(sorted, pc.blocks_of(labels)))
