"""What "contiguous" means: an acyclic quotient (a chain of ideals), which is stronger than
convex blocks; the DPs and the contiguous IP are optimal over the former (issue 10, item 8)."""

import random

import pytest

import stagecut as sc
from helpers import brute_force
from stagecut.graph import Node
from stagecut.throughput.evaluate import is_convex
from stagecut.throughput.ip import partition_ip


def crossed():
    """a1 -> b1 and b2 -> a2: {a1, a2} / {b1, b2} are convex, but each must precede the other.
    The a's run on the accelerator only cheaply (CPU 100), the b's on the CPU (accelerator 100)."""
    a = [Node(v, {"accelerator": 1.0, "cpu": 100.0}) for v in ("a1", "a2")]
    b = [Node(v, {"accelerator": 100.0, "cpu": 1.0}) for v in ("b1", "b2")]
    return sc.Graph(a + b, [("a1", "b1"), ("b2", "a2")])


SPLIT = {"a1": ("accelerator", 0), "a2": ("accelerator", 0), "b1": ("cpu", 0), "b2": ("cpu", 0)}


def test_convex_blocks_with_a_cyclic_quotient_are_reported_as_such():
    g = crossed()
    ev = sc.evaluate(g, SPLIT, devices=1, cpus=1)
    assert ev.feasible and ev.objective == 2.0
    assert ev.convex and not ev.acyclic_quotient and not ev.contiguous
    assert is_convex(g, SPLIT) and not sc.is_contiguous(g, SPLIT)
    assert sc.Evaluation.from_json(ev.to_json()) == ev


def test_optimal_means_optimal_over_acyclic_quotients():
    g = crossed()
    for method in ("dp", "auto", "ip"):
        plan = sc.partition(g, devices=1, cpus=1, method=method)
        assert plan.status == "optimal" and plan.objective == 101.0 and plan.contiguous, method
        assert brute_force(g, 1, 1) == 101.0  # over acyclic quotients
        ev = sc.evaluate(g, plan.device_of())
        assert ev.acyclic_quotient and ev.convex
    free = partition_ip(g, devices=1, cpus=1, contiguous=False)
    assert free.status == "optimal" and free.objective == 2.0 and not free.contiguous


def test_acyclic_quotient_implies_convex_on_random_splits():
    rng = random.Random(8)
    seen = {(True, True): 0, (True, False): 0, (False, False): 0}
    for _ in range(400):
        n = rng.randint(1, 6)
        g = sc.Graph([Node(i, {"accelerator": 1.0}) for i in range(n)],
                     [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.4])
        split = [rng.randrange(3) for _ in range(n)]
        key = (is_convex(g, split), sc.is_contiguous(g, split))
        assert key != (False, True)
        seen[key] += 1
    assert all(seen.values())  # each possible case occurs


def test_orphan_backward_classes_follow_their_mirrored_edges():
    # f -> g forward; bw1 -> bw2 backward with no forward node in their classes: mirrored, bw2 -> bw1
    nodes = [Node("f", {"accelerator": 1.0}), Node("g", {"accelerator": 1.0}),
             Node("bw1", {"accelerator": 1.0}, backward=True), Node("bw2", {"accelerator": 1.0}, backward=True)]
    g = sc.Graph(nodes, [("f", "g"), ("bw1", "bw2")])
    assert sc.is_contiguous(g, {"f": 0, "g": 0, "bw2": 0, "bw1": 1})
    assert not sc.is_contiguous(g, {"f": 0, "g": 1, "bw2": 1, "bw1": 0})  # 0 -> 1 and (mirrored) 1 -> 0
    with pytest.raises(sc.errors.InvalidGraphError):
        sc.is_contiguous(g, [0, 1])
