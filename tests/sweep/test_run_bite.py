"""One sweep task run in this process (what a worker runs) for each objective, against the same
call made directly; and a part file that cannot be written leaves no temporary file."""

from __future__ import annotations

import os

import pytest

import stagecut as sc
from helpers import hide_module
from stagecut.cli._common import load_graph
from stagecut.sweep.run import run_task
from stagecut.sweep.spec import expand, sweep_from_dict
from stagecut.sweep.table import part_path, write_row

from .extras import require_sweep_extra


def only_task(**fields):
    (task,) = expand(sweep_from_dict({"graphs": ["regal:10"], "devices": [2], **fields}))
    return task


def test_a_slice_task_takes_the_graphs_own_memory_and_equals_the_direct_call():
    task = only_task(objective="slice", methods=["order"])
    row = run_task(task)
    g = load_graph("regal:10")
    mem = g.defaults.get("memory")
    direct = sc.slice_graph(g, devices=2, method="order", seed=0, memory=None if mem is None else float(mem))
    assert (row["status"], row["objective"], row["error"]) == (direct.status, direct.objective, None)
    assert row["problem"] == "slice" and row["worker"].startswith("local:")
    # a memory given in the sweep replaces the graph's (none here): one byte fits no stage
    tight = run_task(only_task(objective="slice", methods=["order"], memory=["1B"]))
    assert (tight["status"], tight["objective"], tight["error"]) == ("infeasible", None, None)


def test_a_latency_task_equals_the_direct_call():
    row = run_task(only_task(objective="latency", methods=["heft"]))
    direct = sc.place(load_graph("regal:10"), 2, method="heft", seed=0)
    assert (row["status"], row["objective"], row["error"]) == (direct.status, direct.objective, None)
    assert row["runtime_s"] >= 0 and row["finished_at"] > 0


def test_a_part_that_cannot_be_written_leaves_no_temporary_file(tmp_path):
    require_sweep_extra()
    os.makedirs(part_path(str(tmp_path), "k1"))  # a directory where the part file must go
    with pytest.raises(OSError):
        write_row(str(tmp_path), {"key": "k1", "status": "optimal"})
    assert sorted(os.listdir(tmp_path)) == ["part-k1.parquet"]  # only the directory: no .tmp- file


def test_a_scheduler_a_client_and_a_worker_count_exclude_each_other(tmp_path):
    from stagecut.sweep.run import run_sweep

    spec = sweep_from_dict({"graphs": ["regal:8"], "devices": [2], "methods": ["dpl"],
                            "results": str(tmp_path / "r")})
    with pytest.raises(sc.InvalidArgumentError, match="^scheduler: give a scheduler address or a client, not both"):
        run_sweep(spec, scheduler="tcp://127.0.0.1:1", client=object())
    with pytest.raises(sc.InvalidArgumentError, match="^workers: sets the size of the local cluster"):
        run_sweep(spec, workers=2, scheduler="tcp://127.0.0.1:1")
    assert not (tmp_path / "r").exists()


def test_without_dask_the_sweep_says_how_to_install_it(monkeypatch):

    from stagecut.errors import BackendUnavailableError
    from stagecut.sweep import run

    hide_module(monkeypatch, "distributed")
    message = r"^sweeps run on Dask: pip install 'stagecut\[sweep\]' \(dask\[distributed\] and pyarrow\)$"
    with pytest.raises(BackendUnavailableError, match=message):
        run._distributed()


def test_each_worker_sizes_the_rust_pool_to_its_share_of_its_hosts_threads(monkeypatch):
    # two workers on host h (2 and 3 threads) and one on g (4 threads), 20 cores per host
    require_sweep_extra()
    from stagecut.sweep import run

    class Client:
        plugins = []

        def scheduler_info(self, n_workers):
            assert n_workers == -1  # every worker, not the first few
            return {"workers": {"a": {"host": "h", "nthreads": 2}, "b": {"host": "h", "nthreads": 3},
                                "c": {"host": "g", "nthreads": 4}}}

        def register_plugin(self, plugin, name):
            self.plugins.append((plugin, name))

    client = Client()
    run._rayon_plugin(None, client)
    ((plugin, name),) = client.plugins
    assert name == plugin.name == "stagecut-rayon-threads"
    monkeypatch.setattr(os, "cpu_count", lambda: 20)
    monkeypatch.setenv("RAYON_NUM_THREADS", "0")
    for ip, threads, share in (("h", 2, "4"), ("g", 4, "5"), ("new", 6, "3")):
        worker = type("W", (), {"ip": ip, "state": type("S", (), {"nthreads": threads})()})()
        plugin.setup(worker)
        assert os.environ["RAYON_NUM_THREADS"] == share, ip


def test_the_local_cluster_starts_its_workers_deaf_to_ctrl_c_and_restores_the_handler(monkeypatch):
    import signal
    import types

    from stagecut.sweep import run

    seen = {}

    def cluster(**kwargs):
        seen["handler"] = signal.getsignal(signal.SIGINT)  # what the worker processes inherit
        return kwargs

    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    before = signal.getsignal(signal.SIGINT)
    kwargs = run._local_cluster(types.SimpleNamespace(LocalCluster=cluster), 3)
    assert seen["handler"] is signal.SIG_IGN and signal.getsignal(signal.SIGINT) is before
    assert (kwargs["n_workers"], kwargs["threads_per_worker"], kwargs["processes"]) == (3, 1, True)
    assert kwargs["env"] == {"RAYON_NUM_THREADS": "2"}  # 8 cores // 3 workers

    def broken(**kwargs):
        raise OSError("no ports left")

    with pytest.raises(OSError, match="no ports left"):
        run._local_cluster(types.SimpleNamespace(LocalCluster=broken), 2)
    assert signal.getsignal(signal.SIGINT) is before


def test_a_sweep_with_nothing_left_to_run_reports_no_errors_and_starts_no_cluster(tmp_path, monkeypatch):
    require_sweep_extra()
    from stagecut.sweep import run

    spec = sweep_from_dict({"graphs": ["regal:8"], "devices": [2], "methods": ["dp"]})
    write_row(str(tmp_path), run_task(expand(spec)[0]))
    monkeypatch.setattr(run, "_distributed", lambda: pytest.fail("a cluster was started"))
    r = run.run_sweep(spec, results=str(tmp_path))
    assert (r.results, r.tasks, r.skipped, r.ran, r.errors) == (str(tmp_path), 1, 1, (), 0)


def test_the_sweeps_own_client_joins_the_cluster_it_started_and_both_are_closed(tmp_path, monkeypatch):
    require_sweep_extra()
    import types

    from stagecut.sweep import run

    events = []

    class Cluster:
        def close(self):
            events.append("cluster closed")

    class Client:
        def __init__(self, address):
            events.append(("client of", address))

        def close(self):
            events.append("client closed")

    cluster = Cluster()
    monkeypatch.setattr(run, "_distributed", lambda: types.SimpleNamespace(Client=Client))
    monkeypatch.setattr(run, "_local_cluster", lambda distributed, n: events.append(("workers", n)) or cluster)

    def stop(distributed, client):
        raise RuntimeError("stop here")

    monkeypatch.setattr(run, "_rayon_plugin", stop)
    spec = sweep_from_dict({"graphs": ["regal:8"], "devices": [2, 3], "methods": ["dp"]})
    with pytest.raises(RuntimeError, match="stop here"):
        run.run_sweep(spec, results=str(tmp_path), workers=5)
    assert events == [("workers", 2), ("client of", cluster), "client closed", "cluster closed"]


def test_a_scheduler_address_is_checked_then_passed_as_given():
    import types

    from stagecut.errors import InvalidArgumentError
    from stagecut.sweep import run

    calls = []
    fake = types.SimpleNamespace(Client=lambda address, timeout: calls.append((address, timeout)) or "client")
    for address in ("tcp://10.0.0.1:8786", "10.0.0.1:8786", "tls://sched.example:1"):
        assert run._connect(fake, address) == "client"
    assert calls == [(a, f"{run.CONNECT_TIMEOUT}s") for a in ("tcp://10.0.0.1:8786", "10.0.0.1:8786",
                                                              "tls://sched.example:1")]
    # (a second scheme is refused here, not passed on to fail as "cannot reach": whichever "://" the
    # host is read after, the other one is in the host or the port)
    for bad in ("tcp://10.0.0.1", "tcp://:8786", "10.0.0.1:0", "10.0.0.1:65536", "10.0.0.1:port",
                "tcp://x://10.0.0.1:8786", "tcp://10.0.0.1:8786://x", "tcp://a/b:1"):
        with pytest.raises(InvalidArgumentError, match="^scheduler: expected tcp://HOST:PORT"):
            run._connect(fake, bad)
    assert len(calls) == 3
