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
