"""The ``prefix`` bound (what a hard memory limit forces on the pipeline's first and last blocks)
held to brute force, the exact DP and hand values.

Soundness: never above the optimum on random DAGs and training graphs whose memory binds
(brute force over every partition, and the ideal DP). Strength: hand values for each of its two
conditions and for the tensors it counts, and on random instances with memory that binds it
beats the simple bound often, so a dropped term or a wrong comparison fails.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from tests.mtpp.sweeps import chunk_seeds, sweep
from tests.mtpp.test_combinatorial import optimum_dp

import stagecut as sc
from helpers import brute_force_mtpp
from stagecut.graph import Node
from stagecut.mtpp.bounds import mtpp_bound
from stagecut.mtpp.model import MtppProblem, forced_groups, lower_bound
from stagecut.mtpp.prefix import _Dag, prefix_bound
from stagecut.mtpp.slicegraph import slice_graph

_OPGRAPHS = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "opgraphs"


def _chain(works: list[float], memory: list[float], comm: float = 0.0) -> sc.Graph:
    nodes = [Node(i, {"accelerator": w}, memory=m, comm=comm)
             for i, (w, m) in enumerate(zip(works, memory, strict=True))]
    return sc.Graph(nodes, [(i, i + 1) for i in range(len(nodes) - 1)])


def test_a_forward_pass_that_holds_the_memory_leaves_the_backward_pass_two_blocks():
    # forward nodes (work 1, 8 bytes) need three of the four blocks of 10 bytes, and the first two
    # blocks hold at most f0 and f1: the last two hold 31 of work (condition A at j = 2)
    p = MtppProblem(_chain([1, 1, 1, 10, 10, 10], [8, 8, 8, 0, 0, 0]), devices=4, memory=10.0)
    r = prefix_bound(p)
    assert lower_bound(p) == 10.0
    assert r.bound == pytest.approx(15.5, rel=1e-9)
    assert r.witness == ("A", 2)
    assert slice_graph(p, method="dp").objective == pytest.approx(20.0)


def test_the_last_blocks_that_cannot_hold_the_memory_leave_the_first_ones_the_work():
    # the mirror image: the backward nodes hold the memory, so the first two blocks hold the
    # forward pass and b0 (condition B at j = 2): 2 T >= 31
    p = MtppProblem(_chain([10, 10, 10, 1, 1, 1], [0, 0, 0, 8, 8, 8]), devices=4, memory=10.0)
    r = prefix_bound(p)
    assert r.bound == pytest.approx(15.5, rel=1e-9)
    assert r.witness == ("B", 2)
    assert slice_graph(p, method="dp").objective == pytest.approx(20.0)


def test_the_tensor_leaving_the_prefix_is_paid_by_the_last_blocks():
    # every node sends a tensor of 2: the prefix within {f0, f1} cheapest to leave is all of it
    # (its tensor to f2 crosses, 2) or none of it (2 of work comes back): (31 + 2) / 2
    p = MtppProblem(_chain([1, 1, 1, 10, 10, 10], [8, 8, 8, 0, 0, 0], comm=2.0), devices=4, memory=10.0)
    assert prefix_bound(p).bound == pytest.approx(16.5, rel=1e-9)
    assert slice_graph(p, method="dp").objective >= 16.5


def test_reserved_memory_shrinks_every_block():
    # 16-byte devices pair f0 and f1 (one block before f2: the last three hold 31); with 6 bytes
    # reserved they hold one forward node each, as above
    g = _chain([1, 1, 1, 10, 10, 10], [8, 8, 8, 0, 0, 0])
    loose = MtppProblem(g, devices=4, memory=16.0)
    tight = MtppProblem(g, devices=4, memory=16.0, reserved_memory=6.0)
    assert prefix_bound(loose).bound == pytest.approx(31 / 3, rel=1e-9)
    assert prefix_bound(tight).bound == pytest.approx(15.5, rel=1e-9)


def test_without_a_hard_limit_it_is_its_floor():
    g = _chain([1, 1, 1, 10, 10, 10], [8, 8, 8, 0, 0, 0])
    for p in (MtppProblem(g, devices=4), MtppProblem(g, devices=4, memory=10.0, bandwidth=1.0)):
        r = prefix_bound(p)
        assert r.bound == lower_bound(p) and r.solves == 0 and r.complete
    assert prefix_bound(MtppProblem(g, devices=4), floor=12.5).bound == 12.5


def test_a_past_deadline_gives_the_floor_unfinished():
    p = MtppProblem(_chain([1, 1, 1, 10, 10, 10], [8, 8, 8, 0, 0, 0]), devices=4, memory=10.0)
    r = prefix_bound(p, deadline=0.0)
    assert not r.complete and r.solves == 0 and r.bound == lower_bound(p)


def test_the_ladder_names_it_and_mtpp_bound_runs_it():
    p = MtppProblem(_chain([1, 1, 1, 10, 10, 10], [8, 8, 8, 0, 0, 0]), devices=4, memory=10.0)
    r = mtpp_bound(p, level="prefix")
    assert r.status == "optimal" and r.bound == pytest.approx(15.5, rel=1e-9)
    cert = sc.certify(p.graph, slice_graph(p, method="dp"), devices=4, memory=10.0,
                      levels=("simple", "prefix"))
    assert cert.bound_source == "prefix" and cert.lower_bound == pytest.approx(15.5, rel=1e-9)


def test_the_memory_tests_round_as_the_evaluator_does():
    # the evaluator accepts a block when params + R - M <= 0 in floats: with R large against the
    # room left, f1's 1 + 1e-8 bytes fit next to b0 (1e9 + 1e-8 + ... rounds to the limit)
    nodes = [Node("f0", {"accelerator": 0.0}, memory=1 + 1e-8), Node("f1", {"accelerator": 0.0}, memory=1 + 1e-8),
             Node("b0", {"accelerator": 10.0}), Node("b1", {"accelerator": 10.0})]
    g = sc.Graph(nodes, [("f0", "f1"), ("f1", "b0"), ("b0", "b1")])
    p = MtppProblem(g, devices=3, memory=1e9 + 1, reserved_memory=1e9)
    plan = sc.evaluate_mtpp(p, [["f0"], ["f1", "b0"], ["b1"]]).objective
    assert plan == 10.0 and prefix_bound(p).bound <= plan
    # the simple bound's own memory tests: a feasible instance is not refuted
    nodes = [Node(i, {"accelerator": w}, memory=m) for i, (w, m) in enumerate([(3, 0.2), (3, 0.1), (1, 0.1), (1, 0.2)])]
    p = MtppProblem(sc.Graph(nodes, [(0, 2), (1, 2), (2, 3)]), devices=2, memory=2.8, reserved_memory=2.5)
    plan = sc.evaluate_mtpp(p, [[0, 1], [2, 3]]).objective
    assert math.isfinite(plan) and lower_bound(p) <= plan and prefix_bound(p).bound <= plan
    p = MtppProblem(_chain([2, 2], [1e-17, 1e-17]), devices=2, memory=1.0, reserved_memory=1.0)
    plan = sc.evaluate_mtpp(p, [[0], [1]]).objective
    assert plan == 2.0 and lower_bound(p) <= plan and prefix_bound(p).bound <= plan


def _binding(seed: int, problem: MtppProblem) -> MtppProblem:
    """``problem`` with a hard memory limit that binds: room for the parameters with a little to
    spare, and for the largest group."""
    rng = random.Random(seed)
    g = problem.graph
    params = math.fsum(nd.memory for nd in g.nodes)
    groups: dict[int, float] = {}
    for i, grp in enumerate(forced_groups(problem)):
        groups[grp] = groups.get(grp, 0.0) + g.nodes[i].memory
    k = problem.devices
    memory = max(max(groups.values(), default=0.0), math.ceil(params / k) + rng.choice([0, 0, 1, 2]), 1.0)
    return MtppProblem(g, devices=k, memory=memory, colocate=problem.colocate)


def _sound(problem: MtppProblem, opt: float, seed: int) -> bool:
    b = prefix_bound(problem).bound
    tol = 1e-9 * max(1.0, abs(opt)) if math.isfinite(opt) else 0.0
    assert b <= opt + tol, f"seed {seed}: prefix bound {b} above the optimum {opt}"
    assert b >= lower_bound(problem) - 1e-9
    return b > lower_bound(problem) * (1 + 1e-9)


def test_prefix_never_passes_brute_force_and_often_beats_the_simple_bound():
    better = sweep(_sound, chunk_seeds(900_000, 0, 200), brute_force_mtpp, n_max=7, k_max=5, transform=_binding)
    assert better >= 20  # (28 of these 200)


def _training(rng: random.Random, n_fwd: int) -> sc.Graph:
    """A random forward DAG (light work, most of the parameters) and its backward nodes mirrored
    in reverse (heavier work, few parameters), each fed by its forward node."""
    nodes = [Node(i, {"accelerator": float(rng.randint(0, 3))}, memory=float(rng.randint(1, 6)),
                  comm=float(rng.choice([0, 1, 2]))) for i in range(n_fwd)]
    nodes += [Node(100 + i, {"accelerator": float(rng.randint(2, 9))}, memory=float(rng.randint(0, 1)),
                   comm=float(rng.choice([0, 1, 2]))) for i in range(n_fwd)]
    fwd = [(i, j) for i in range(n_fwd) for j in range(i + 1, n_fwd) if j == i + 1 or rng.random() < 0.3]
    edges = fwd + [(100 + j, 100 + i) for i, j in fwd] + [(i, 100 + i) for i in range(n_fwd)]
    edges.append((n_fwd - 1, 100 + n_fwd - 1))
    return sc.Graph(nodes, sorted(set(edges)))


@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
def test_prefix_never_passes_the_dp_on_training_graphs():
    # forward and backward nodes (the forward pass holds the parameters)
    rng = random.Random(17)
    better = 0
    for seed in range(60):
        g = _training(rng, rng.randint(3, 6))
        p = _binding(seed, MtppProblem(g, devices=rng.randint(2, 5)))
        better += _sound(p, optimum_dp(p), seed)
    assert better >= 40  # (54 of these 60)


def test_on_a_traced_training_graph_it_sees_the_forward_memory():
    # GPT, 12 layers, forward + backward, at 8 devices of the file's memory: the forward pass's
    # parameters need five blocks, so the backward pass's work has three
    g = sc.read_workload(_OPGRAPHS / "gpt12_training.json")
    p = MtppProblem(g, devices=8, memory=float(g.defaults["memory"]), colocate=False)
    r = prefix_bound(p)
    assert r.bound >= 1.9 * lower_bound(p)
    assert r.witness == ("A", 5)
    plan = slice_graph(p, method="brkga", decodes=200, seed=0)
    assert plan.objective is not None and r.bound <= plan.objective


#: The slow sweeps: the optimum to hold prefix to, first seed, seeds per chunk, largest graph and k.
_SWEEPS = {"brute-force": (brute_force_mtpp, 910_000, 600, 7, 6), "dp": (optimum_dp, 920_000, 750, 12, 8)}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
@pytest.mark.parametrize(("against", "chunk"), [(a, c) for a in sorted(_SWEEPS) for c in range(2)])
def test_prefix_never_passes_the_optimum_sweep(against, chunk):
    reference, base, size, n_max, k_max = _SWEEPS[against]
    found = sweep(_sound, chunk_seeds(base, chunk, size), reference, n_max=n_max, k_max=k_max, transform=_binding)
    assert found >= 0.02 * size


def test_least_cut_finds_no_ideal_that_holds_and_leaves_a_group():
    p = MtppProblem(_chain([1, 2, 3], [0, 0, 0], comm=1.0), devices=2)
    dag = _Dag(p)
    one = np.array([False, True, False])
    first, last = np.array([True, False, False]), np.array([False, False, True])
    assert dag.least_cut(one, one, pay_in=True) == math.inf
    assert dag.least_cut(last, first, pay_in=True) == math.inf  # (an ideal holding 2 holds 0)
    # the ideals holding 0 and not 2: {0} (0's tensor crosses: 1) or {0, 1} (1's work 2 if paid, and its tensor: 1)
    assert dag.least_cut(first, last, pay_in=True) == pytest.approx(1.0)  # ({0})
    assert dag.least_cut(first, last, pay_in=False) == pytest.approx(1.0)  # ({0, 1}: 1 is held, so free of work)
    assert dag.least_cut(first & False, last, pay_in=True) == pytest.approx(0.0)  # (the empty ideal)
