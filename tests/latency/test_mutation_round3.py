"""Hand instances on which plausible variants of the latency code give different answers: the
tie rule of the chain packing, the tolerance of the bisection's rebalancing, the stages of a
schedule, a run's finish in the skip-path bound. Each expected value is computed here from the
instance or by the brute force, not by the code under test."""

from __future__ import annotations

import pytest

import stagecut as sc
from stagecut.latency import Devices, LatencyProblem
from stagecut.latency.exact.brute import solve_brute
from stagecut.latency.exact.skip_path import skip_path_bound
from stagecut.latency.heuristics.memaware import chain_packing
from stagecut.latency.heuristics.partition_baselines import balanced_parts
from stagecut.latency.model.evaluate import schedule_from


def chain(times, comm, memory=1.0, capacity=None, gpus=2):
    nodes = [sc.Node(i, {"gpu": t}, memory=memory, comm=c) for i, (t, c) in enumerate(zip(times, comm))]
    g = sc.Graph(nodes, [(i, i + 1) for i in range(len(times) - 1)])
    mem = {} if capacity is None else {"memory": capacity}
    devs = Devices.servers(1, gpus, intra_bandwidth=1.0, inter_bandwidth=1.0, **mem)
    return LatencyProblem(g, devs, output_bytes="comm")


def test_a_chain_packing_run_starts_at_the_latest_of_equally_cheap_starts():
    # four equal nodes, equal outputs, two GPUs of 3 nodes each: the cut after the first, second
    # or third node costs the same (4 units of work and one transfer); the second GPU's run starts
    # as late as it can, so the first GPU takes three nodes
    p = chain([1.0] * 4, [1.0] * 4, capacity=3.0)
    assert chain_packing(p, [[0], [1], [2], [3]]).tolist() == [0, 0, 0, 1]
    # five nodes: the cut after the second or the third (the second GPU holds three at most)
    p = chain([1.0] * 5, [1.0] * 5, capacity=3.0)
    assert chain_packing(p, [[0], [1], [2], [3], [4]]).tolist() == [0, 0, 0, 1, 1]


@pytest.mark.parametrize(("imbalance", "parts"), [(0.5, [0, 0, 1]), (0.49, [0, 1, 0])])
def test_a_part_exactly_at_its_allowed_excess_is_not_rebalanced(imbalance, parts):
    # units of weight 1, 2, 1 in a chain; the prefix {0, 1} weighs 3 against a share of 2: an
    # excess of exactly 0.5 x 2 = 1.0 is allowed (one edge cut); below that tolerance unit 0 moves
    # to the other side (the lighter move: unit 1 weighs twice the excess), cutting both edges
    p = chain([1.0, 2.0, 1.0], [1.0, 1.0, 1.0])
    assert balanced_parts(p, 2, backend="kl", imbalance=imbalance).tolist() == parts


def test_each_stage_carries_its_device_s_own_time_and_memory():
    # a placement over three GPUs, one of them unused: a stage per used GPU, its load the sum of
    # its nodes' times there and its memory their memory, each computed here from the graph
    times, mem = [1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 4.0, 8.0, 16.0]
    nodes = [sc.Node(i, {"gpu": t}, memory=m, comm=1.0) for i, (t, m) in enumerate(zip(times, mem))]
    g = sc.Graph(nodes, [(i, i + 1) for i in range(4)])
    p = LatencyProblem(g, Devices.servers(1, 3, intra_bandwidth=1.0, inter_bandwidth=1.0), output_bytes="comm")
    s = schedule_from(p, [0, 0, 2, 2, 0], method="hand")
    got = [(st.index, st.device, st.nodes, st.load, st.memory) for st in s.stages]
    assert got == [(0, "gpu:0", (0, 1, 4), 1.0 + 2.0 + 5.0, 1.0 + 2.0 + 16.0),
                   (1, "gpu:2", (2, 3), 3.0 + 4.0, 4.0 + 8.0)]


SKIP_CASES = [
    # (cpu, accelerator, memory, comm) per node, edges, accelerators, their memory, the optimum;
    # the skip-path bound was 10.0 and 8.0 before a run's finish was held to its start plus its
    # path time (a run ending after a short run on the CPU pool was timed from that run's end)
    ([(6, 2, 0, 4), (2, 0, 0, 1), (2, 0, 3, 4), (5, 1, 2, 8)], [(0, 1), (1, 2), (2, 3), (0, 2)], 3, 3.0, 11.0),
    ([(3, 1, 1, 8), (3, 1, 2, 0), (20, 2, 1, 2), (5, 1, 3, 1)], [(0, 1), (1, 2), (0, 3), (3, 1)], 1, 6.0, 13.0),
]


@pytest.mark.parametrize(("spec", "edges", "k", "cap", "optimum"), SKIP_CASES)
def test_the_skip_path_bound_holds_a_run_to_its_start_plus_its_path_time(spec, edges, k, cap, optimum):
    nodes = [sc.Node(v, {"cpu": float(c), "accelerator": float(a)}, memory=float(m), comm=float(x))
             for v, (c, a, m, x) in enumerate(spec)]
    p = LatencyProblem(sc.Graph(nodes, edges), Devices.pcie_star(k, memory=cap))
    assert solve_brute(p).objective == pytest.approx(optimum)
    assert skip_path_bound(p) == pytest.approx(optimum)  # tight on both


def residual_chain(n):
    """``n`` nodes in a chain with a skip edge over every other node (large outputs at the
    blocks' inputs), on a CPU pool and two accelerators that hold 60% of it each."""
    nodes = [sc.Node(v, {"cpu": 10.0, "accelerator": 1.0}, memory=1.0, comm=8.0 if v % 2 == 0 else 1.0)
             for v in range(n)]
    edges = [(v, v + 1) for v in range(n - 1)] + [(v, v + 2) for v in range(0, n - 2, 2)]
    return LatencyProblem(sc.Graph(nodes, edges), Devices.pcie_star(2, memory=0.6 * n))


def test_the_path_s_own_edges_do_not_spend_the_skip_budget(monkeypatch):
    # a stretch of 60 nodes with a budget that holds the 29 skip edges (each crossing two run
    # boundaries) but not the 59 path edges as well: were the path edges listed as skip edges
    # (the shortest, kept first), the skip edges would be left out and the bound fall to 62
    from stagecut.latency.exact import skip_path

    p = residual_chain(60)
    full = skip_path_bound(p, [list(range(60))])
    monkeypatch.setattr(skip_path, "SKIP_WORK", 3.3e5)
    assert skip_path_bound(p, [list(range(60))]) == full == pytest.approx(75.0)
