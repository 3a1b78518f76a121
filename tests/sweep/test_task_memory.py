"""A sweep's memory per task (``task_memory``): the core's budget for refusing big requests, the
progress-event watch on the worker's growth, the environment restored, and the key unchanged."""

import os

import pytest

from stagecut.errors import InvalidArgumentError, MemoryLimitError
from stagecut.sweep import expand, sweep_from_dict
from stagecut.sweep.run import BUDGET_VAR, _MemoryWatch, run_task

BASE = {"graphs": ["regal:20"], "devices": [4], "methods": ["dp"]}


def task(**extra):
    return expand(sweep_from_dict({**BASE, **extra}))[0]


def test_a_budget_below_the_dp_table_refuses_the_task_before_allocating(monkeypatch):
    monkeypatch.delenv(BUDGET_VAR, raising=False)
    row = run_task(task(task_memory="2KiB"))
    assert row["status"] == "error" and row["objective"] is None
    assert row["error"].startswith("MemoryLimitError: the DP table") and "2.0 KiB" in row["error"]
    assert BUDGET_VAR not in os.environ  # restored
    ok = run_task(task(task_memory="4GiB"))
    free = run_task(task())
    assert ok["status"] == free["status"] == "optimal" and ok["objective"] == free["objective"]


def test_the_budget_variable_is_restored_to_what_it_was(monkeypatch):
    monkeypatch.setenv(BUDGET_VAR, "8GiB")
    run_task(task(task_memory="2KiB"))
    assert os.environ[BUDGET_VAR] == "8GiB"


def test_the_watch_stops_a_task_that_grows_past_its_limit():
    sizes = iter([1000, 1500, 2000, 2001])
    watch = _MemoryWatch(1000.0, rss=lambda: next(sizes))  # starts at 1000 bytes
    watch(None)  # grown 500
    watch(None)  # grown 1000: at the limit, not over
    with pytest.raises(MemoryLimitError, match="task_memory"):
        watch(None)  # grown 1001


def test_the_watch_reaches_the_planner_through_progress(monkeypatch):
    # the process "grows" by 1 GiB at every look: the DP's first progress event stops the task
    # (the 512 MiB budget itself lets the DP table through)
    from stagecut.sweep import run

    seen = iter(range(0, 2**40, 2**30))
    monkeypatch.setattr(run, "_rss_bytes", lambda: next(seen))
    row = run_task(task(task_memory="512MiB"))
    assert row["status"] == "error"
    assert row["error"].startswith("MemoryLimitError: task_memory: the task grew by 1024 MiB, over its 512 MiB")


def test_task_memory_is_a_limit_not_part_of_the_key():
    assert task(task_memory="4GiB").key == task().key
    assert task(task_memory="4GiB").task_memory == "4GiB"


@pytest.mark.parametrize("bad", ["lots", 0, True, [1]])
def test_bad_task_memory_is_named(bad):
    with pytest.raises(InvalidArgumentError, match="task_memory"):
        sweep_from_dict({**BASE, "task_memory": bad})
