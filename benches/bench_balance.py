"""``stagecut.balance`` against ``stagecut.partition(Graph.chain(...))`` on random chains of 100
to 10,000 layers, k in {2, 4, 8}, without and with communication.

Run: ``pytest benches/bench_balance.py --benchmark-only`` (add ``--benchmark-json=out.json``).
Each case times the whole call (building the chain graph is part of the ``partition`` cases:
that is what a user of a cost list pays) and records the objective in ``extra_info``; the
``balance`` case checks that its largest load equals ``partition``'s objective.
"""

import random

import pytest

import stagecut as sc


def _lists(n):
    rng = random.Random(n)
    return [rng.uniform(0.5, 1.5) for _ in range(n)], [rng.uniform(0.0, 0.3) for _ in range(n)]


def _load(costs, bal, comm):
    worst, start, n = 0.0, 0, len(costs)
    for size in bal:
        end = start + size
        x = sum(costs[start:end])
        if comm is not None:
            x += (comm[end - 1] if end < n else 0.0) + (comm[start - 1] if start > 0 else 0.0)
        worst, start = max(worst, x), end
    return worst


CASES = [(n, k, with_comm) for n in (100, 1000, 10000) for k in (2, 4, 8) for with_comm in (False, True)]


@pytest.mark.parametrize(("n", "k", "with_comm"), CASES)
def test_balance(benchmark, n, k, with_comm):
    costs, comm = _lists(n)
    comm_arg = comm if with_comm else None
    bal = benchmark(lambda: sc.balance(costs, k, comm=comm_arg, fill=False))
    value = _load(costs, bal, comm_arg)
    benchmark.extra_info["objective"] = value
    ref = sc.partition(sc.Graph.chain(costs, comm=comm if with_comm else 0.0), devices=k).objective
    assert value == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize(("n", "k", "with_comm"), CASES)
def test_partition_chain(benchmark, n, k, with_comm):
    costs, comm = _lists(n)
    plan = benchmark(lambda: sc.partition(sc.Graph.chain(costs, comm=comm if with_comm else 0.0), devices=k))
    benchmark.extra_info["objective"] = plan.objective
