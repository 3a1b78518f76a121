"""Long chains: the exact DP against an independent linear-partition reference.

The ideals of a chain are its prefixes, so the exact DP is a linear partition; with ideals kept
without node sets, a greedy bound and the cell filter (rust/ideal_bounds.rs), a 20,000-node
chain solves in well under a second of DP and visits O(n) ideal pairs, not n^2 / k.

The reference shares no code with the package: with integer times and tensor costs the optimum
is an integer, the smallest ``T`` for which the chain splits into at most ``k`` intervals of
cost ``<= T``; feasibility is a shortest path over prefixes (exact although a block's cost is
not monotone: its outgoing tensor comes and goes as it grows).
"""

import random

import numpy as np

import stagecut as sc


def _min_blocks(w, comm, t):
    """Fewest intervals covering the chain, each costing at most ``t``: compute plus the tensor
    entering (from the node before) and the one leaving (its last node's); ``inf`` if none."""
    n = len(w)
    pre = np.concatenate([[0.0], np.cumsum(w)])
    c_in = np.concatenate([[0.0], comm[:-1]])  # c_in[j]: the tensor entering a block from j
    c_out = np.concatenate([[0.0], comm[:-1], [0.0]])  # c_out[i]: leaving a block ending at i
    key = pre[:-1] - c_in  # block j..i costs pre[i] + c_out[i] - key[j]
    best = np.full(n + 1, np.inf)
    best[0] = 0
    lo = 0
    for i in range(1, n + 1):
        while pre[i] - pre[lo] > t:  # compute alone only grows: earlier starts never fit again
            lo += 1
        if lo >= i:
            return np.inf
        ok = key[lo:i] >= pre[i] + c_out[i] - t
        if ok.any():
            best[i] = 1 + best[lo:i][ok].min()
    return best[n]


def _chain(n, seed, with_comm):
    rng = random.Random(seed)
    w = [float(rng.randint(1, 9)) for _ in range(n)]
    comm = [float(rng.randint(0, 3)) if with_comm else 0.0 for _ in range(n)]
    return w, comm


def _check_optimal(w, comm, k, objective):
    t = int(objective)
    assert t == objective
    wa, ca = np.array(w), np.array(comm)
    assert _min_blocks(wa, ca, t) <= k, "the DP's value is not achievable"
    assert _min_blocks(wa, ca, t - 1) > k, "a better split exists"


def test_a_20k_chain_is_solved_exactly():
    n, k = 20_000, 8
    w, comm = _chain(n, 1, with_comm=True)
    plan = sc.partition(sc.Graph.chain(w, comm=comm), devices=k, method="dp")
    assert plan.status == "optimal"
    assert plan.stats["ideals"] == n + 1
    assert plan.stats["pairs"] < 20 * n, plan.stats  # n^2 / k = 5e7 before
    assert len(plan.stages) <= k
    _check_optimal(w, comm, k, plan.objective)


def test_chains_without_tensors_and_with_few_devices():
    for n, k, seed in [(1, 1, 0), (7, 3, 1), (500, 1, 2), (3000, 5, 3), (3000, 13, 4)]:
        w, comm = _chain(n, seed, with_comm=seed % 2 == 1)
        plan = sc.partition(sc.Graph.chain(w, comm=comm), devices=k, method="dp")
        assert plan.status == "optimal"
        _check_optimal(w, comm, k, plan.objective)


def test_the_reference_rejects_a_wrong_value():
    # the reference itself can fail: one below the optimum, or a value no split reaches
    w, comm = _chain(200, 5, with_comm=True)
    plan = sc.partition(sc.Graph.chain(w, comm=comm), devices=4, method="dp")
    for wrong in [plan.objective - 1, plan.objective + 1]:
        try:
            _check_optimal(w, comm, 4, wrong)
        except AssertionError:
            continue
        raise AssertionError(f"{wrong} passed for an optimum of {plan.objective}")
