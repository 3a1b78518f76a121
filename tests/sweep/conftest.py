"""One Dask LocalCluster (2 worker processes, 1 thread each) for the sweep tests that need one."""

import logging

import pytest

from .extras import require_sweep_extra


@pytest.fixture(scope="session")
def dask_client():
    """A client of a 2-worker LocalCluster; skipped (failed in CI) without the [sweep] extra."""
    distributed = require_sweep_extra()
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                       silence_logs=logging.ERROR)
    client = distributed.Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


@pytest.fixture
def scheduler_address(dask_client, monkeypatch):
    """The address of the tests' scheduler, for a sweep given ``--scheduler``, with the connect
    timeout raised from its 3 s to 120 s: on a loaded machine a live scheduler can take seconds
    to answer, and the tests check the sweep, not how fast it connects (an address that does not
    answer keeps the short timeout in its own tests)."""
    from stagecut.sweep import run

    monkeypatch.setattr(run, "CONNECT_TIMEOUT", 120.0)
    return dask_client.scheduler.address
