"""stagecut.balance against the exact chain DP, DeepSpeed's partition_balanced and brute force."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

import stagecut as sc
from stagecut.errors import InvalidArgumentError
from stagecut.frontends.baselines import optimal_parts, spread_parts


def load(costs, balance, comm=None):
    """The chain model's largest stage load, written independently of the module."""
    n, worst, start = len(costs), 0.0, 0
    for size in balance:
        end = start + size  # layers start .. end - 1
        x = float(sum(costs[start:end]))
        if comm is not None:
            if end < n:
                x += comm[end - 1]
            if start > 0:
                x += comm[start - 1]
        worst = max(worst, x)
        start = end
    return worst


def compositions(n, j):
    for cuts in itertools.combinations(range(1, n), j - 1):
        bounds = (0, *cuts, n)
        yield [b - a for a, b in zip(bounds, bounds[1:])]


def brute(costs, k, comm=None, memory=None, capacity=None, exact=False):
    n, best = len(costs), None
    for j in ([min(k, n)] if exact else range(1, min(k, n) + 1)):
        for bal in compositions(n, j):
            if memory is not None:
                start, fits = 0, True
                for size in bal:
                    fits = fits and sum(memory[start:start + size]) <= capacity
                    start += size
                if not fits:
                    continue
            v = load(costs, bal, comm)
            best = v if best is None or v < best else best
    return best


def check_shape(bal, n, k, fill=True):
    assert all(isinstance(b, int) and b >= 1 for b in bal)
    assert sum(bal) == n
    if fill:
        assert len(bal) == min(k, n)
    else:
        assert len(bal) <= k


def random_case(rng):
    n = rng.randint(1, 12)
    k = rng.randint(1, 6)
    costs = [rng.randint(0, 20) for _ in range(n)]
    comm = [rng.randint(0, 15) for _ in range(n)]
    return n, k, costs, comm


def test_equals_exact_dp_without_comm():
    rng = random.Random(7)
    for _ in range(1000):
        n, k, costs, _ = random_case(rng)
        bal = sc.balance(costs, k)
        check_shape(bal, n, k)
        opt = sc.partition(sc.Graph.chain(costs), devices=k).objective
        ref = optimal_parts(costs, k)
        assert load(costs, bal) == opt == load(costs, [b - a for a, b in zip(ref, ref[1:]) if b > a])
        spread = spread_parts(costs, k)
        assert load(costs, bal) <= load(costs, [b - a for a, b in zip(spread, spread[1:]) if b > a])
        unfilled = sc.balance(costs, k, fill=False)
        check_shape(unfilled, n, k, fill=False)
        assert load(costs, unfilled) == opt


def test_equals_exact_dp_with_comm():
    rng = random.Random(11)
    for _ in range(1000):
        n, k, costs, comm = random_case(rng)
        bal = sc.balance(costs, k, comm=comm, fill=False)
        check_shape(bal, n, k, fill=False)
        opt = sc.partition(sc.Graph.chain(costs, comm=comm), devices=k).objective
        assert load(costs, bal, comm) == opt


def test_fill_with_comm_is_the_exact_k_optimum():
    rng = random.Random(13)
    worse = 0
    for _ in range(400):
        n, k, costs, comm = random_case(rng)
        n = min(n, 9)
        costs, comm = costs[:n], comm[:n]
        bal = sc.balance(costs, k, comm=comm)
        check_shape(bal, n, k)
        assert load(costs, bal, comm) == brute(costs, k, comm, exact=True)
        worse += load(costs, bal, comm) > brute(costs, k, comm)
    assert worse > 0  # the cases the docs warn about occur: filling can cost with comm


def test_memory_capacity_against_brute_force():
    rng = random.Random(17)
    seen_infeasible = seen_feasible = 0
    for _ in range(400):
        n, k, costs, comm = random_case(rng)
        n = min(n, 9)
        costs, comm = costs[:n], comm[:n]
        memory = [rng.randint(1, 10) for _ in range(n)]
        capacity = rng.randint(5, 30)
        for use_comm, fill in itertools.product((False, True), (False, True)):
            cm = comm if use_comm else None
            ref = brute(costs, k, cm, memory, capacity, exact=fill)
            if ref is None:
                seen_infeasible += 1
                with pytest.raises(InvalidArgumentError, match="capacity"):
                    sc.balance(costs, k, comm=cm, memory=memory, capacity=capacity, fill=fill)
                continue
            seen_feasible += 1
            bal = sc.balance(costs, k, comm=cm, memory=memory, capacity=capacity, fill=fill)
            check_shape(bal, n, k, fill)
            start = 0
            for size in bal:
                assert sum(memory[start:start + size]) <= capacity
                start += size
            assert load(costs, bal, cm) == ref
    assert seen_infeasible > 0 and seen_feasible > 0


def test_float_costs_and_shapes():
    rng = random.Random(19)
    for _ in range(100):
        n, k = rng.randint(1, 30), rng.randint(1, 10)
        costs = [rng.uniform(0.0, 3.0) for _ in range(n)]
        bal = sc.balance(costs, k)
        check_shape(bal, n, k)
        assert load(costs, bal) <= sc.partition(sc.Graph.chain(costs), devices=k).objective * (1 + 1e-9)
    assert sc.balance([0, 0, 0], 5) == [1, 1, 1]
    assert sc.balance(np.array([4, 1, 1, 2, 4]), 3, comm=np.array([0.5] * 5)) == sc.balance(
        [4, 1, 1, 2, 4], 3, comm=[0.5] * 5)
    assert sc.balance([3], 1) == [1]


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"costs": [], "k": 2}, "costs"),
    ({"costs": "abc", "k": 2}, "costs"),
    ({"costs": [1, -1], "k": 2}, r"costs\[1\]"),
    ({"costs": [1, float("nan")], "k": 2}, r"costs\[1\]"),
    ({"costs": [1, True], "k": 2}, r"costs\[1\]"),
    ({"costs": np.array([1.0, -1.0]), "k": 2}, r"costs\[1\]"),
    ({"costs": [1, 2], "k": 2, "comm": [1, float("inf")]}, r"comm\[1\]"),
    ({"costs": [1, 2], "k": 0}, "k"),
    ({"costs": [1, 2], "k": 2.0}, "k"),
    ({"costs": [1, 2], "k": 2, "comm": [1]}, "comm"),
    ({"costs": [1, 2], "k": 2, "comm": [1, -2]}, r"comm\[1\]"),
    ({"costs": [1, 2], "k": 2, "memory": [1, 2]}, "capacity"),
    ({"costs": [1, 2], "k": 2, "capacity": 3}, "memory"),
    ({"costs": [1, 2], "k": 2, "memory": [1, 2, 3], "capacity": 3}, "memory"),
    ({"costs": [1, 2], "k": 2, "memory": [1, 2], "capacity": -1}, "capacity"),
    ({"costs": [1, 2], "k": 2, "memory": [5, 2], "capacity": 3}, "capacity"),
    ({"costs": [1, 2], "k": 2, "fill": 1}, "fill"),
])
def test_bad_input(kwargs, name):
    kwargs = dict(kwargs)  # the parameter is shared by every run of the test in this process
    costs, k = kwargs.pop("costs"), kwargs.pop("k")
    with pytest.raises(InvalidArgumentError, match=name):
        sc.balance(costs, k, **kwargs)


def long_case(rng, integer=True):
    n = rng.randint(13, 400)
    k = rng.choice((2, 3, 4, 5, 8))
    if integer:
        return n, k, [rng.randint(0, 50) for _ in range(n)], [rng.randint(0, 30) for _ in range(n)]
    return n, k, [rng.uniform(0.5, 1.5) for _ in range(n)], [rng.uniform(0.0, 0.3) for _ in range(n)]


def test_with_comm_on_longer_chains():
    """Past the brute-force sizes: the threshold search lists candidate loads there."""
    rng = random.Random(29)
    for i in range(80):
        n, k, costs, comm = long_case(rng, integer=i % 2 == 0)
        opt = sc.partition(sc.Graph.chain(costs, comm=comm), devices=k).objective
        bal = sc.balance(costs, k, comm=comm, fill=False)
        check_shape(bal, n, k, fill=False)
        if i % 2 == 0:
            assert load(costs, bal, comm) == opt
        else:
            assert load(costs, bal, comm) == pytest.approx(opt, rel=1e-12)
        filled = sc.balance(costs, k, comm=comm)
        check_shape(filled, n, k)
        assert load(costs, filled, comm) >= load(costs, bal, comm)
        if len(bal) == min(k, n):  # the optimum over at most k stages has k: filling costs nothing
            assert load(costs, filled, comm) == load(costs, bal, comm)


def test_memory_with_comm_on_longer_chains():
    rng = random.Random(31)
    seen_infeasible = seen_feasible = 0
    for _ in range(60):
        n, k, costs, comm = long_case(rng)
        memory = [rng.randint(1, 10) for _ in range(n)]
        capacity = rng.randint(10, int(3 * 5.5 * n / k))
        plan = sc.partition(sc.Graph.chain(costs, comm=comm, memory=memory), devices=k, memory=capacity)
        if plan.status == "infeasible":
            seen_infeasible += 1
            with pytest.raises(InvalidArgumentError, match="capacity"):
                sc.balance(costs, k, comm=comm, memory=memory, capacity=capacity, fill=False)
            continue
        seen_feasible += 1
        bal = sc.balance(costs, k, comm=comm, memory=memory, capacity=capacity, fill=False)
        check_shape(bal, n, k, fill=False)
        start = 0
        for size in bal:
            assert sum(memory[start:start + size]) <= capacity
            start += size
        assert load(costs, bal, comm) == plan.objective
    assert seen_infeasible > 0 and seen_feasible > 0


def test_comm_edge_cases():
    # equal costs, no transfer: the optimum is the lower bound the search starts below
    assert sc.balance([2] * 12, 4, comm=[0] * 12) == [3, 3, 3, 3]
    assert sc.balance([0, 0, 0], 2, comm=[0, 0, 0], fill=False) == [3]
    assert sc.balance([0, 0, 0], 2, comm=[0, 0, 0]) == [2, 1]
    # a transfer too large to cut at: one stage, or the cut where the transfer is small
    assert sc.balance([1, 1, 1, 1], 2, comm=[9, 9, 0, 9], fill=False) == [3, 1]
    assert sc.balance([1.5, 2.5], 1, comm=[0.25, 7.0]) == [2]
