"""The exact DP's pruning, reached from Python: a block may be dearer than a block that holds it
(communication falls as the block grows), so the descent may be cut on compute only. The random
graphs of test_dp.py (communication 0-4 against compute 0-8) never reach that branch."""

import itertools

import pytest

import stagecut as sc
from helpers import brute_force
from stagecut.graph import Node


@pytest.mark.parametrize("labels", list(itertools.permutations(range(4))), ids=str)
def test_a_dear_first_block_does_not_cut_its_branch(labels):
    # chains x1 -> x2 and y1 -> y2, with y1 -> x2; x1's output is heavy. {x2} alone costs
    # 1 + 30 (x1's tensor enters), more than the whole graph on one device (4), yet
    # {x1, x2} costs 2, and the optimum {y1, y2} | {x1, x2} (2) is reached only by growing
    # {x2}. Every labelling: every order of the DP's descent.
    x1, y1, x2, y2 = labels
    nodes = [Node(i, {"accelerator": 1.0}, comm=30.0 if i == x1 else 0.0) for i in range(4)]
    g = sc.Graph(nodes, [(x1, x2), (y1, x2), (y1, y2)])
    assert brute_force(g, 2, 0) == 2.0
    for prune in (True, False):
        plan = sc.partition(g, devices=2, cpus=0, method="dp", prune=prune)
        assert plan.status == "optimal" and plan.objective == 2.0
        assert sc.evaluate(g, plan.device_of(), devices=2, cpus=0).objective == 2.0


@pytest.mark.parametrize("seed", range(30))
def test_dp_with_heavy_communication_equals_brute_force(seed):
    import random

    rng = random.Random(seed)
    n = rng.randint(4, 6)
    nodes = [Node(i, {"accelerator": float(rng.randint(0, 3)), "cpu": float(rng.randint(5, 20))},
                  comm=float(rng.choice([0, 0, 1, 10, 30]))) for i in range(n)]
    g = sc.Graph(nodes, [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.4])
    k, cpus = rng.randint(2, 3), rng.randint(0, 1)
    want = brute_force(g, k, cpus)
    plan = sc.partition(g, devices=k, cpus=cpus, method="dp")
    assert plan.objective == pytest.approx(want)
