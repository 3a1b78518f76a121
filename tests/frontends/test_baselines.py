"""The baselines: what DeepSpeed's and torchgpipe's partitioners compute, on hand-worked cases,
and the exact split never worse than any of them (brute force on small lists)."""

import itertools
import random

import pytest

from stagecut.errors import InvalidArgumentError
from stagecut.frontends.baselines import (
    block_balance,
    compare,
    max_load,
    optimal_parts,
    parts_to_balance,
    spread_parts,
    uniform_parts,
)


def all_parts(n, k):
    for cuts in itertools.combinations(range(1, n), k - 1):
        yield [0, *cuts, n]


def test_hand_worked_cases():
    assert uniform_parts(38, 8) == [0, 5, 10, 15, 20, 25, 30, 34, 38]
    assert uniform_parts(3, 5) == [0, 1, 2, 3, 3, 3]
    # min-spread DP, worked by hand: ties keep the later predecessor
    assert spread_parts([1, 1, 1, 1, 1], 4) == [0, 2, 3, 4, 5]
    # minimising the spread is not minimising the largest stage: [1 | 6 | 4 1 1] (sums 1, 6, 6) and
    # [1 6 | 4 | 1 1] (7, 4, 2) both spread 5, the smallest; the DP keeps the later cut, worth 7, not 6
    costs = [1, 6, 4, 1, 1]
    assert spread_parts(costs, 3) == [0, 2, 3, 5] and optimal_parts(costs, 3) == [0, 1, 2, 5]
    assert max_load(costs, [0, 2, 3, 5]) == 7 and max_load(costs, [0, 1, 2, 5]) == 6
    # block moves on [0, .2, .4, .6, .8, 1]: [3, 3] -> [4, 2], then 1.8 <= 1.2 + 1 stops
    assert block_balance([1, 2, 3, 4, 5, 6], 2) == [4, 2]
    # rescaled [1, .5, 0, 0, .5, 1] in [2, 2, 2]: sums 1.5, 0, 1.5; the largest is the last of the
    # equals (block 2), so block 1 takes the first layer of block 2: 1.5, .5, 1, and 1.5 <= .5 + 1 stops
    assert block_balance([2, 1, 0, 0, 1, 2], 3) == [2, 3, 1]
    assert block_balance([7, 7, 7, 7], 2) == [2, 2]  # all equal: rescaled to zeros, nothing moves
    assert parts_to_balance([0, 2, 5]) == [2, 3]


def test_exact_is_optimal_and_never_worse_than_the_baselines():
    rng = random.Random(7)
    for _ in range(150):
        n, k = rng.randint(1, 9), rng.randint(1, 4)
        costs = [float(rng.randint(0, 9)) for _ in range(n)]
        params = [float(rng.randint(0, 9)) for _ in range(n)]
        res = compare(costs, k, params)
        brute = min(max_load(costs, p) for p in all_parts(n, min(n, k)))
        assert res["optimal"] == brute
        assert all(v >= res["optimal"] for v in res.values())
        sp = spread_parts(costs, k)
        assert len(sp) == k + 1 and sp[0] == 0 and sp[-1] == n
        if n > k:
            assert min(parts_to_balance(sp)) >= 1
            assert sum(block_balance(costs, k)) == n


def test_spread_dp_minimises_the_spread_when_a_path_does():
    """On lists where every stage sum is distinct enough, the DP's split has the smallest spread
    of all splits (brute force), which is what DeepSpeed's partition_balanced aims at."""
    rng = random.Random(3)
    hits = 0
    for _ in range(100):
        n, k = rng.randint(3, 8), rng.randint(2, 3)
        if n <= k:
            continue
        costs = [float(rng.randint(1, 20)) for _ in range(n)]

        def spread(p, costs=costs):
            sums = [sum(costs[a:b]) for a, b in zip(p, p[1:])]
            return max(sums) - min(sums)

        best = min(spread(p) for p in all_parts(n, k))
        got = spread(spread_parts(costs, k))
        assert got >= best
        hits += got == best
    assert hits >= 60


def test_bad_arguments():
    with pytest.raises(InvalidArgumentError):
        spread_parts([], 2)
    with pytest.raises(InvalidArgumentError):
        block_balance([1.0], 2)
    with pytest.raises(InvalidArgumentError):
        uniform_parts(4, 0)
    with pytest.raises(InvalidArgumentError):
        max_load([1.0, 2.0], [0, 1])
    with pytest.raises(InvalidArgumentError):
        compare([1.0, 2.0], 2, params=[1.0])
    with pytest.raises(InvalidArgumentError):
        spread_parts(["1"], 1)
