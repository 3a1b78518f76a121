"""Sweeps on a 2-worker LocalCluster: the table holds what the same calls made one by one give; a
re-run after an interruption runs only what is missing or failed; a killed worker loses nothing;
the command line (on the same cluster through --scheduler) and its errors."""

import csv
import io
import os
import signal
import threading
import time

import pytest

import stagecut as sc
from stagecut.cli._common import load_graph
from stagecut.cli.main import main
from stagecut.sweep import expand, read_results, read_sweep, run_sweep, summarize
from stagecut.sweep.table import part_path, write_row

TINY = """graphs = ["regal:12", "regal:14:barabasi_albert:2"]
devices = [2, 3]
[[methods]]
name = "dp"
[[methods]]
name = "dpl"
[[methods]]
name = "dp"
options = {max_ideals = 20}
"""


def _sweep(tmp_path, text=TINY, name="s.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _reference(spec, method, devices):
    """The same call, made directly in this process."""
    return sc.partition(load_graph(spec), devices=devices, method=method, seed=0)


def test_table_matches_the_calls_one_by_one(dask_client, tmp_path):
    path = _sweep(tmp_path)
    run = run_sweep(path, client=dask_client)
    rows = {(r["graph"], r["devices"], r["method"] + ("!" if "20" in (r["options"] or "") else "")): r
            for r in read_results(run.results)}
    assert run.tasks == 12 and len(run.ran) == 12 and run.skipped == 0 and len(rows) == 12
    workers = set(dask_client.scheduler_info()["workers"])
    for (graph, k, method), row in rows.items():
        assert row["worker"] in workers  # ran on the cluster, not here
        if method == "dp!":  # a task that fails (too many ideals) is an error row; it does not stop the sweep
            assert row["status"] == "error" and "max_ideals" in row["error"] and row["objective"] is None
            continue
        ref = _reference(graph, method, k)
        assert (row["objective"], row["lower_bound"], row["status"]) == (ref.objective, ref.lower_bound, ref.status)
        assert row["gap"] == pytest.approx(ref.gap) and row["error"] is None
        assert row["runtime_s"] > 0 and row["peak_rss_mb"] > 10
    assert run.errors == 4


def test_rerun_after_an_interruption_runs_only_what_is_missing(dask_client, tmp_path):
    path = _sweep(tmp_path, TINY.replace('[[methods]]\nname = "dp"\noptions = {max_ideals = 20}\n', ""))
    spec = read_sweep(path)
    keys = [t.key for t in expand(spec)]
    seen = []

    def stop_after_three(row):
        seen.append(row["key"])
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, client=dask_client, on_row=stop_after_three)
    assert sorted(r["key"] for r in read_results(spec.results)) == sorted(seen)  # saved as they finished
    second = run_sweep(spec, client=dask_client)
    assert second.skipped == 3 and sorted(second.ran) == sorted(set(keys) - set(seen))
    full = {r["key"]: r for r in read_results(spec.results)}
    assert set(full) == set(keys)
    # a failed row and a lost part are run again, nothing else
    write_row(spec.results, {**full[keys[0]], "status": "error", "objective": None, "error": "planted"})
    os.unlink(part_path(spec.results, keys[5]))
    third = run_sweep(spec, client=dask_client)
    assert sorted(third.ran) == sorted([keys[0], keys[5]]) and third.skipped == len(keys) - 2
    again = {r["key"]: r for r in read_results(spec.results)}
    assert {k: r["objective"] for k, r in again.items()} == {k: r["objective"] for k, r in full.items()}
    assert run_sweep(spec, client=dask_client).ran == ()


def test_a_killed_worker_loses_nothing(dask_client, tmp_path):
    # tasks of about a second each (the exact DP on 20-21 node DAGs), so that one is running when killed
    path = _sweep(tmp_path, 'graphs = ["regal:20", "regal:21:erdos_renyi:1"]\ndevices = [2, 3]\nmethods = ["dp"]\n')
    spec = read_sweep(path)
    dask_client.wait_for_workers(2, timeout=120)  # both workers up (an earlier test may have restarted one)
    pids = dask_client.run(os.getpid)
    out, killed = {}, {}

    def sweep():
        out["run"] = run_sweep(spec, client=dask_client)

    t = threading.Thread(target=sweep)
    t.start()
    deadline = time.monotonic() + 120
    while not killed and time.monotonic() < deadline:
        busy = {w: keys for w, keys in dask_client.processing().items() if keys and w in pids}
        if busy:
            w, keys = next(iter(busy.items()))
            killed.update(worker=w, keys={k.removeprefix("stagecut-sweep-") for k in keys})
            os.kill(pids[w], signal.SIGKILL)
        time.sleep(0.02)
    t.join(300)
    assert killed and not t.is_alive()
    rows = {r["key"]: r for r in read_results(spec.results)}
    assert set(rows) == {task.key for task in expand(spec)} and out["run"].errors == 0
    for task in expand(spec):
        row = rows[task.key]
        assert row["status"] == "optimal" and row["objective"] == _reference(task.graph, "dp", task.devices).objective
        if task.key in killed["keys"]:
            assert row["worker"] != killed["worker"]  # retried elsewhere
    dask_client.wait_for_workers(2, timeout=120)  # the nanny restarts it for the next tests


def test_cli_on_a_running_scheduler_and_report(scheduler_address, tmp_path, capsys):
    path = _sweep(tmp_path, TINY.replace('options = {max_ideals = 20}', 'options = { prune = false }'))
    code = main(["sweep", str(path), "--scheduler", scheduler_address, "--baseline", "dpl"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "| k | method |" in out and "answer/dpl" in out and "[12/12]" in err
    results = str(tmp_path / "s.results")
    rows = read_results(results)
    assert len(rows) == 12
    assert main(["sweep", "--report", results, "--format", "csv", "--baseline", "dpl"]) == 0
    got = {(int(c["devices"]), c["method"]): c for c in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert ('dp {"prune": false}' in {m for _, m in got}) and len(got) == 2 * 4
    for r in summarize(rows, baseline="dpl"):
        row = got[r.devices, r.method]
        assert float(row["bound_best"]) == r.bound_best and float(row["optimal"]) == r.optimal
    # nothing left to run: no cluster is contacted
    assert main(["sweep", str(path), "--scheduler", "tcp://127.0.0.1:1", "--quiet"]) == 0


@pytest.mark.parametrize("argv, needle", [
    ([], "give a sweep file"),
    (["{sweep}", "--report", "{results}"], "not both"),
    (["{sweep}", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], "--workers"),
    (["--report", "{results}/nothing"], "no results table"),
    (["{bad}"], "devices"),
    (["{unknown}"], "'no-such-method' is not a throughput method"),
    (["{bogus}"], "dp refuses"),
    (["{badgraph}"], "rwnn:modules=-3"),
    (["{sweep}", "--scheduler", "tcp://256.0.0.1:99999", "--quiet"], "scheduler"),
    (["--report", "{results}", "--workers", "2"], "--workers"),
])
def test_cli_errors(tmp_path, capsys, argv, needle):
    sweep = _sweep(tmp_path)
    bad = _sweep(tmp_path, 'graphs = ["regal:8"]\ndevices = [0]\nmethods = ["dp"]\n', "bad.toml")
    unknown = _sweep(tmp_path, 'graphs = ["regal:8"]\ndevices = [2]\nmethods = ["dp", "no-such-method"]\n', "u.toml")
    bogus = _sweep(tmp_path, 'graphs = ["regal:8"]\ndevices = [2]\n[[methods]]\nname = "dp"\noptions = {max_ideals = '
                             '"many"}\n', "o.toml")
    badgraph = _sweep(tmp_path, 'graphs = ["rwnn:modules=-3:channels=1"]\nobjective = "latency"\ndevices = [2]\n'
                                'methods = ["heft"]\n', "g.toml")
    results = tmp_path / "s.results"
    write_row(str(results), {"key": "k", "graph": "g", "devices": 2, "method": "dp", "status": "optimal"})
    args = [a.format(sweep=sweep, bad=bad, results=results, unknown=unknown, bogus=bogus, badgraph=badgraph)
            for a in argv]
    assert main(["sweep", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("stagecut: error:") and needle in err[0]


def test_an_unreachable_scheduler_fails_quickly_and_leaves_no_table(tmp_path, capsys):
    sweep = _sweep(tmp_path)
    results = tmp_path / "fresh.results"
    t0 = time.process_time()
    assert main(["sweep", str(sweep), "--scheduler", "tcp://127.0.0.1:1", "--results", str(results), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot reach tcp://127.0.0.1:1" in err[0], err
    assert not results.exists()  # no empty table left behind
    assert time.process_time() - t0 < 10  # CPU seconds; the wait itself is CONNECT_TIMEOUT of wall time



def test_a_sweep_whose_tasks_failed_exits_2_and_says_how_many(scheduler_address, tmp_path, capsys):
    path = _sweep(tmp_path)  # 4 of its 12 tasks fail (too many ideals for max_ideals = 20)
    code = main(["sweep", str(path), "--scheduler", scheduler_address])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert "| k | method |" in out, err  # the report is still printed
    assert err.splitlines()[-1].startswith("stagecut: error: 4 of 12 tasks failed")
