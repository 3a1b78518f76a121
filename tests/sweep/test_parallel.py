"""parallel_map: the same answers in order in this process, in a spawned pool and on a Dask client;
deadlines rebased; the bottleneck-guess ladder on a client gives the bound it gives here."""

import operator
import time

import pytest

from stagecut._parallel import active_client, parallel_map, parallel_width
from stagecut.errors import InvalidArgumentError
from stagecut.examples import regal_graph
from stagecut.mtpp.bounds import mtpp_bound
from stagecut.mtpp.model import MtppProblem


def test_in_process_and_pool_give_the_same_ordered_answers():
    items = list(range(-7, 8))
    assert parallel_map(operator.neg, items) == [-x for x in items]
    assert parallel_map(operator.neg, items, workers=1) == [-x for x in items]
    assert parallel_map(operator.neg, []) == []
    # spawned processes; a monotonic deadline is rebased through wall-clock time (on this host it
    # comes back the same, up to the time between two clock reads: generous, a loaded machine can
    # pause a process between them; without the rebase it would be off by decades), None stays None
    deadline = time.monotonic() + 50.0
    out = parallel_map(tuple, [(x, deadline if x % 2 else None) for x in items], workers=2, deadline_at=1)
    assert [x for x, _ in out] == items
    assert all(d is None if x % 2 == 0 else d == pytest.approx(deadline, abs=1.0) for x, d in out)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(InvalidArgumentError, match="^workers"):
            parallel_map(operator.neg, items, workers=bad)


def test_on_a_client(dask_client):
    items = list(range(20))
    deadline = time.monotonic() + 50.0
    out = parallel_map(tuple, [(x, deadline) for x in items], client=dask_client, deadline_at=1)
    assert [x for x, _ in out] == items and all(d == pytest.approx(deadline, abs=1.0) for _, d in out)
    assert active_client() is None and active_client(dask_client) is dask_client
    assert parallel_width(None, dask_client) == 2 and parallel_width(1, dask_client) == 1
    with dask_client.as_current():  # the active client is found without being passed
        assert active_client() is dask_client
        assert parallel_map(operator.neg, items) == [-x for x in items]


@pytest.mark.slow
def test_bottleneck_guess_on_a_client_matches_in_process(dask_client):
    from distributed import get_task_stream

    p = MtppProblem(regal_graph(10, seed=3), devices=3)
    here = mtpp_bound(p, level="bottleneck-guess", time_limit=60, workers=1)
    with dask_client.as_current(), get_task_stream(dask_client) as stream:
        there = mtpp_bound(p, level="bottleneck-guess", time_limit=60)
    assert len(stream.data) == 3  # one task per guessed position, on the cluster
    assert here.status == there.status == "optimal"
    assert there.bound == pytest.approx(here.bound, rel=1e-9)
    assert [g.bound for g in there.guesses] == pytest.approx([g.bound for g in here.guesses], rel=1e-9)
    assert there.bound == min(g.bound for g in there.guesses)
