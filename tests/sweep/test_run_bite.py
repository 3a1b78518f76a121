"""One sweep task run in this process (what a worker runs) for each objective, against the same
call made directly; and a part file that cannot be written leaves no temporary file."""

from __future__ import annotations

import os

import pytest

import stagecut as sc
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
