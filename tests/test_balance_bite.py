"""stagecut.balance: the branches the main tests did not reach (coverage), each against an
oracle of its own: a brute force over every split, or the throughput DP on the same chain."""

from __future__ import annotations

import importlib
import itertools
import random

import numpy as np
import pytest

import stagecut as sc
from stagecut.errors import InvalidArgumentError


def loads(costs, sizes, comm=None):
    """Every stage's load in the chain model, written from the docstring's definition."""
    out, start, n = [], 0, len(costs)
    for size in sizes:
        end = start + size
        x = sum(costs[start:end])
        if comm is not None:
            x += (comm[end - 1] if end < n else 0) + (comm[start - 1] if start > 0 else 0)
        out.append(x)
        start = end
    return out


def splits(n, j):
    for cuts in itertools.combinations(range(1, n), j - 1):
        b = (0, *cuts, n)
        yield [y - x for x, y in zip(b, b[1:])]


def stage_memory(memory, sizes):
    """Each stage's memory as the difference of two prefix sums: how balance() adds floats (a
    left-to-right sum of the stage's own layers can differ from it in the last bit)."""
    prefix = list(itertools.accumulate(memory, initial=0.0))
    ends = list(itertools.accumulate(sizes, initial=0))
    return [prefix[b] - prefix[a] for a, b in zip(ends, ends[1:])]


def best(costs, k, comm=None, memory=None, capacity=None, fill=True):
    """(optimal largest load, fewest stages reaching it) over every split that fits."""
    n, found = len(costs), []
    for j in ([min(k, n)] if fill else range(1, min(k, n) + 1)):
        for s in splits(n, j):
            if memory is not None and max(stage_memory(memory, s)) > capacity:
                continue
            found.append((max(loads(costs, s, comm)), j))
    return min(found) if found else None


def fits_like_the_brute_force(costs, k, comm, memory, capacity, fill):
    """balance() against :func:`best` with memory: the optimal largest load within the capacity,
    or the capacity refusal when no split fits. True when a split fits."""
    want = best(costs, k, comm, memory, capacity, fill)
    if want is None:
        with pytest.raises(InvalidArgumentError, match="capacity"):
            sc.balance(costs, k, comm=comm, memory=memory, capacity=capacity, fill=fill)
        return False
    sizes = sc.balance(costs, k, comm=comm, memory=memory, capacity=capacity, fill=fill)
    assert max(stage_memory(memory, sizes)) <= capacity
    assert max(loads(costs, sizes, comm)) == want[0], (costs, comm, memory, capacity, k, fill, sizes)
    return True


def test_an_object_array_of_numbers_is_read_like_a_list():
    costs = [3, 1, 4, 1, 5, 9, 2, 6]
    want = sc.balance(costs, 3)
    assert sc.balance(np.array(costs, dtype=object), 3) == want
    assert sc.balance(np.array(costs, dtype=np.int32), 3) == want
    with pytest.raises(InvalidArgumentError, match=r"costs\[1\]"):
        sc.balance(np.array([1, "x"], dtype=object), 2)


def test_an_int_too_large_for_a_float_is_named():
    with pytest.raises(InvalidArgumentError, match=r"costs\[0\]"):
        sc.balance([10**400, 1], 2)
    with pytest.raises(InvalidArgumentError, match=r"comm\[1\]"):
        sc.balance([1, 1], 2, comm=[1, 10**400])


def test_filling_skips_one_layer_stages_before_splitting_a_longer_one():
    # the optimum (5) needs two stages, [5] and [1, 1]; filling to three must split the second,
    # not the first (one layer), and never raise the largest load
    assert sc.balance([5, 1, 1], 3) == [1, 1, 1]
    assert sc.balance([5, 1, 1, 1], 3) == [1, 2, 1]
    assert sc.balance([5, 1, 1, 1], 3, fill=False) == [1, 3]
    rng = random.Random(5)
    for _ in range(200):
        n = rng.randint(1, 8)
        costs = [rng.choice([0, 1, 2, 5, 9]) for _ in range(n)]
        k = rng.randint(1, 9)
        got = sc.balance(costs, k)
        assert len(got) == min(k, n) and min(got) >= 1 and sum(got) == n
        assert max(loads(costs, got)) == best(costs, k)[0], (costs, k, got)


@pytest.mark.parametrize("comm", [False, True])
def test_float_memory_that_fits_exactly_is_a_fit(comm):
    # tenths do not add up exactly in binary: a prefix-sum search can put a stage's first layer
    # one off; the window must agree with the test the memory check itself makes
    rng = random.Random(7 + comm)
    tried = 0
    for _ in range(150):
        n = rng.randint(2, 8)
        costs = [rng.randint(0, 6) for _ in range(n)]
        memory = [rng.choice([0.1, 0.2, 0.3, 0.7]) for _ in range(n)]
        c = [rng.randint(0, 3) for _ in range(n)] if comm else None
        k = rng.randint(1, n)
        # a capacity equal to some stage's memory: an exact fit
        a = rng.randrange(n)
        capacity = stage_memory(memory, [a, rng.randint(a + 1, n) - a])[-1] if a else sum(memory[:rng.randint(1, n)])
        for fill in (True, False):
            tried += fits_like_the_brute_force(costs, k, c, memory, capacity, fill)
    assert tried > 100


def test_without_fill_the_fewest_stages_among_the_optimal_splits():
    rng = random.Random(3)
    for _ in range(300):
        n = rng.randint(1, 8)
        costs = [rng.randint(0, 5) for _ in range(n)]
        comm = [rng.randint(0, 4) for _ in range(n)] if rng.random() < 0.5 else None
        k = rng.randint(1, 8)
        got = sc.balance(costs, k, comm=comm, fill=False)
        opt, fewest = best(costs, k, comm, fill=False)
        assert max(loads(costs, got, comm)) == opt
        assert len(got) == fewest, (costs, comm, k, got)


def test_a_long_uniform_chain_lists_its_candidates_in_narrowing_windows():
    # thousands of layers of equal cost and transfer: very many (start, end) pairs share each
    # candidate load, so the first window around the optimum holds too many to list; the result
    # must still be the throughput DP's optimum on the same chain
    n, k = 3000, 7
    costs, comm = [1.0] * n, [0.5] * n
    got = sc.balance(costs, k, comm=comm, fill=False)
    plan = sc.partition(sc.Graph.chain(costs, comm=comm), devices=k)
    assert plan.status == "optimal"
    assert max(loads(costs, got, comm)) == pytest.approx(plan.objective, rel=1e-12)
    assert sum(got) == n and len(got) <= k


def test_free_layers_with_transfers_against_the_brute_force():
    # every cost zero: the threshold search has no width to narrow and ends on the float itself
    rng = random.Random(11)
    for _ in range(30):
        n, k = rng.randint(2, 7), rng.randint(2, 4)
        comm = [float(rng.choice([0, 0, 1, 2, 5])) for _ in range(n)]
        for fill in (True, False):
            sizes = sc.balance([0.0] * n, k, comm=comm, fill=fill)
            want, fewest = best([0.0] * n, k, comm=comm, fill=fill)
            assert max(loads([0.0] * n, sizes, comm)) == want, (comm, k, fill, sizes)
            assert len(sizes) == (min(k, n) if fill else fewest)


def test_a_memory_refusal_names_the_stage_count_it_tried():
    # 3 layers, 5 stages asked: fill means exactly 3, without fill at most 5
    with pytest.raises(InvalidArgumentError, match="into exactly 3 stages fits 1.0 per stage"):
        sc.balance([1, 1, 1], 5, comm=[1, 1, 1], memory=[2, 2, 2], capacity=1)
    with pytest.raises(InvalidArgumentError, match="into at most 5 stages fits 1.0 per stage"):
        sc.balance([1, 1, 1], 5, comm=[1, 1, 1], memory=[2, 2, 2], capacity=1, fill=False)


def test_the_split_is_exact_to_the_last_bit():
    # the two splits differ by one unit in the last place: 9.0 against 9.000000000000002
    assert sc.balance([3.0000000000000018, 6.0, 3.0], 2) == [1, 2]
    assert sc.balance([3.0000000000000018, 6.0, 6.000000000000002], 3) == [1, 1, 1]
    assert sc.balance([3.000000000000001, 6.0, 6.000000000000002, 3.000000000000001, 6.0], 3) == [2, 1, 2]
    # free layers and a transfer of the smallest positive float: the optimum is 0, not 5e-324
    assert sc.balance([0.0, 0.0, 0.0], 2, comm=[0.0, 5e-324, 0.0]) == [1, 2]
    assert sc.balance([0.0, 0.0, 0.0], 2, comm=[5e-324, 0.0, 0.0]) == [2, 1]


def test_free_layers_end_the_threshold_search_on_adjacent_floats():
    # every cost 0: no candidate window is ever narrow enough to list, so the bisection ends on
    # two adjacent floats and answers with the upper one; the optimum is the cheapest cut(s)
    assert sc.balance([0.0] * 4, 2, comm=[5.0, 1.0, 5.0, 5.0]) == [2, 2]  # both stages carry 1
    assert sc.balance([0.0] * 4, 2, comm=[1.0, 5.0, 5.0, 5.0]) == [1, 3]
    assert sc.balance([0.0] * 5, 3, comm=[5.0, 1.0, 5.0, 1.0, 5.0]) == [2, 2, 1]  # the middle carries 2
    assert sc.balance([0.0] * 4, 2, comm=[5.0, 1.0, 5.0, 5.0], fill=False) == [4]  # one stage: no transfer


def test_very_many_equal_loads_end_the_threshold_search_on_adjacent_floats():
    # 5,000 layers of cost 1 and free transfers: every window around the optimum holds more
    # candidates than are listed, down to adjacent floats; the answer is still the optimum
    n, k = 5000, 7
    got = sc.balance([1.0] * n, k, comm=[0.0] * n, fill=False)
    assert max(loads([1.0] * n, got, [0.0] * n)) == 715 == -(-n // k)
    assert sum(got) == n and len(got) == k


@pytest.fixture
def probes(monkeypatch):
    """Every threshold the communication search probes, in order."""
    reach = importlib.import_module("stagecut.balance")._Reach
    log, probe = [], reach.probe
    monkeypatch.setattr(reach, "probe", lambda self, t: log.append(t) or probe(self, t))
    return log


def draw_memory_chain(rng):
    n = rng.randint(2, 8)
    costs = [float(rng.randint(0, 6)) for _ in range(n)]
    comm = [float(rng.randint(0, 3)) for _ in range(n)]
    memory = [float(rng.choice([0, 1, 1, 5])) for _ in range(n)] if rng.random() < 0.7 else None
    return costs, comm, memory, (5.0 if memory else None), rng.randint(2, 4), rng.random() < 0.5


PINNED_PROBES = [
    # free layers: the classic bound is 0, so the search starts below it (at the sentinel -1,
    # which is never probed) and the optimum is 0
    ([0.0, 0, 0], [0.0, 5, 0], None, None, 2, True),
    # the first guess (bound + largest layer + two transfers) is below the optimum: a memory-heavy
    # first layer must be alone, so the rest is one stage of 20
    ([0.0, 5, 5, 5, 5], [1.0, 0, 0, 0, 0], [5.0, 1, 1, 1, 1], 5.0, 2, False),
    # a listed candidate equal to the interval's lower end, or to its upper end
    ([6.0, 0, 5, 3, 6, 1, 0], [0.0, 0, 1, 0, 0, 2, 2], [0.0, 0, 1, 1, 1, 5, 1], 5.0, 3, True),
    ([0.0, 3, 2, 3, 0, 4, 2], [1.0, 2, 0, 0, 0, 3, 1], [1.0, 5, 1, 0, 1, 1, 5], 5.0, 4, True),
    ([5.0, 2, 1, 5, 6, 6, 6, 5], [1.0, 2, 2, 0, 1, 3, 1, 0], [0.0, 1, 0, 0, 1, 1, 1, 5], 5.0, 2, False),
]


def test_no_threshold_is_probed_twice(probes):
    # a probe is O(k n) numpy work: a threshold whose answer is known (the first guess, the ends of
    # the candidate interval) is never probed again; only the answer is, to rebuild its split
    rng = random.Random(21)
    cases = PINNED_PROBES + [draw_memory_chain(rng) for _ in range(300)]
    checked = 0
    for costs, comm, memory, capacity, k, fill in cases:
        probes.clear()
        try:
            sizes = sc.balance(costs, k, comm=comm, memory=memory, capacity=capacity, fill=fill)
        except InvalidArgumentError:
            continue
        assert max(loads(costs, sizes, comm)) == best(costs, k, comm, memory, capacity, fill)[0]
        again = [t for t in set(probes[:-1]) if probes[:-1].count(t) > 1]
        assert not again, (costs, comm, memory, k, fill, probes)
        assert min(probes) >= 0.0, probes  # (no load is negative: nothing to learn below 0)
        checked += 1
    assert checked >= 200


def test_a_bad_argument_is_named_with_what_it_got():
    with pytest.raises(InvalidArgumentError, match=r"^costs: expected a sequence of per-layer numbers, got int$"):
        sc.balance(5, 2)
    with pytest.raises(InvalidArgumentError, match=r"^comm: expected a sequence of per-layer numbers, got str$"):
        sc.balance([1.0, 2.0], 2, comm="ab")
    with pytest.raises(InvalidArgumentError, match=r"^memory: expected 2 values \(one per layer\), got 1$"):
        sc.balance([1.0, 2.0], 2, memory=[1.0], capacity=2.0)
    with pytest.raises(InvalidArgumentError, match=r"^capacity: -1 must be non-negative$"):
        sc.balance([1.0], 1, memory=[1.0], capacity=-1)


def test_plain_ints_and_floats_mixed_take_the_fast_path():
    # the per-value checks are the slow path, for values that need a message or a conversion
    fast = importlib.import_module("stagecut.balance")._fast_values
    assert fast([1, 2.5]) == [1.0, 2.5]
    assert fast([1, 2]) == [1.0, 2.0] and fast([0.5]) == [0.5]
    assert fast([1, True]) is None and fast([1, -2.0]) is None


def test_the_threshold_search_takes_about_ten_to_twenty_probes(probes):
    # the module docs' figure, on the benchmark's random chains (costs 0.5-1.5, transfers 0-0.3):
    # the search starts near the classic bound, not from zero (that takes 22 to 36)
    for n in (100, 1000, 10000):
        rng = random.Random(n)
        costs = [rng.uniform(0.5, 1.5) for _ in range(n)]
        comm = [rng.uniform(0.0, 0.3) for _ in range(n)]
        for k in (2, 8):
            probes.clear()
            sc.balance(costs, k, comm=comm, fill=False)
            assert 5 <= len(probes) <= 20, (n, k, len(probes))


def test_memory_without_capacity_is_refused_naming_both():
    with pytest.raises(InvalidArgumentError, match=r"^memory and capacity: give both \(per-layer memory and memory "
                                                   r"per stage\) or neither$"):
        sc.balance([1.0, 2.0], 2, memory=[1.0, 1.0])
    with pytest.raises(InvalidArgumentError, match=r"^memory and capacity: give both"):
        sc.balance([1.0, 2.0], 2, capacity=1.0)


def test_long_memory_windows_against_the_brute_force():
    # 10 to 14 layers of 0-2 units of memory, 4-8 units per stage: a stage's window of possible
    # first layers spans up to a dozen layers, so its maximum comes from two overlapping blocks of
    # the sparse table (lengths 5 and up need level 2 and more)
    rng = random.Random(8)
    feasible = 0
    for _ in range(120):
        n, k = rng.randint(10, 14), rng.randint(2, 4)
        costs = [float(rng.randint(0, 9)) for _ in range(n)]
        comm = [float(rng.randint(0, 5)) for _ in range(n)]
        memory = [float(rng.randint(0, 2)) for _ in range(n)]
        capacity, fill = float(rng.randint(4, 8)), rng.random() < 0.5
        feasible += fits_like_the_brute_force(costs, k, comm, memory, capacity, fill)
    assert feasible >= 60


@pytest.mark.parametrize("lo, hi", [(0.9, 1.0 + 5e-13), (1.0 - 5e-13, 1.5)])
def test_a_candidate_within_the_rounding_margin_of_either_end_is_listed(lo, hi):
    # The threshold search lists the candidate loads R[b] - L[a] strictly between a threshold
    # without a split (lo) and one with a split (hi), widening the index search by 1e-12 on each
    # side for rounding. The optimum here (1.0: layers 0.5 | 0.25 with a 0.5 transfer) lies within
    # that margin of hi, then of lo: a margin applied the wrong way drops it and answers hi.
    balance = importlib.import_module("stagecut.balance")
    costs, comm = [0.5, 0.25], [0.5, 0.0]
    p = np.concatenate(([0.0], np.cumsum(costs)))
    reach = balance._Reach(p, comm, None, np.inf, 2, True)
    assert reach.probe(lo) is None and reach.probe(hi) is not None
    assert balance._search(reach, lo, hi, float(p[-1])) == 1.0
    assert max(loads(costs, [1, 1], comm)) == 1.0


def test_a_threshold_search_over_the_memory_budget_is_refused_before_it_starts(monkeypatch):
    # with comm, a probe keeps a row of n flags per stage: k * n bytes for k stages of n layers
    validate = importlib.import_module("stagecut.validate")
    n = 70_000  # 4.9e9 flags: over the 4 GiB budget
    with pytest.raises(sc.MemoryLimitError, match=r"^k: 70000 stages of 70000 layers with comm need about 4.56 GiB"):
        sc.balance(np.ones(n), n, comm=np.zeros(n))
    monkeypatch.setattr(validate, "MEMORY_BUDGET", 12)
    assert sc.balance([1.0, 1, 1, 1], 3, comm=[0.0] * 4) == [2, 1, 1]  # 3 x 4 = 12: at the budget
    with pytest.raises(sc.MemoryLimitError, match="ask for fewer stages, or merge layers first"):
        sc.balance([1.0] * 13, 1, comm=[0.0] * 13)  # 13 > 12
    with pytest.raises(sc.MemoryLimitError, match="^k: 4 stages of 4 layers"):
        sc.balance([1.0] * 4, 9, comm=[0.0] * 4)  # min(k, n) stages: 4 x 4 = 16
    assert sc.balance([1.0] * 13, 1) == [13]  # without comm: a greedy search, no rows kept
