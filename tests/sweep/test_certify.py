"""Certify sweeps (MTPP lower bounds, one level of the ladder per method): the file's checks, each
naming its field; the task's time limit shared between the plan and the bound; rows equal to the
same calls made directly, every bound at most the exact DP's optimum; the summary's per-level
ratios against the best plan, computed by hand."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

import pytest

import stagecut as sc
from stagecut.cli._common import load_graph
from stagecut.errors import InvalidArgumentError
from stagecut.sweep import expand, read_results, read_sweep, run_sweep, summarize
from stagecut.sweep import spec as spec_module
from stagecut.sweep.run import run_task
from stagecut.sweep.spec import PLAN_SHARE, check_spec, sweep_from_dict

BASE = {"objective": "certify", "graphs": ["regal:12"], "devices": [3], "methods": ["cover"]}


def make(**changes):
    return sweep_from_dict({**BASE, **changes})


@pytest.mark.parametrize(("changes", "field"), [
    ({"objective": "slice", "methods": ["brkga"], "plan": {"decodes": 10}}, "plan: only a certify sweep"),
    ({"plan": "fast"}, "plan: expected a table"),
    ({"plan": {"devices": 4}}, "plan.devices: is an axis"),
    ({"plan": {"seed": 4}}, "plan.seed: is an axis"),
    ({"plan": {"time_limit": -1}}, "plan.time_limit"),
])
def test_each_bad_plan_table_names_its_field(changes, field):
    with pytest.raises(InvalidArgumentError) as info:
        make(**changes)
    assert str(info.value).startswith(field), str(info.value)


@pytest.mark.parametrize(("changes", "match"), [
    ({"methods": ["brkga"]}, r"^methods\[0\]\.name: 'brkga' is not a certify method; expected one of ladder, simple, "),
    ({"methods": [{"name": "cover", "options": {"levels": ["exact"]}}]}, r"^methods\[0\]\.options\.levels: not an"),
    ({"methods": [{"name": "cover", "options": {"plan": [[0]]}}]}, r"^methods\[0\]\.options\.plan: not an"),
    ({"methods": [{"name": "exact", "options": {"solver": "nosuch"}}]}, r"^methods\[0\]\.options: exact refuses"),
    ({"plan": {"populace": 10}}, r"^plan\.populace: not an option of slice_graph"),
    ({"plan": {"population": -3}}, r"^plan: slice_graph refuses \{\"population\": -3\}"),
])
def test_levels_and_options_are_checked_before_any_cluster(changes, match):
    with pytest.raises(InvalidArgumentError, match=match):
        check_spec(make(**changes))


def test_every_level_is_a_method_and_the_plan_options_are_accepted():
    check_spec(make(methods=["ladder", *sc.BOUND_LEVELS, "partition-lp"], plan={"method": "order", "improve": False}))
    check_spec(make(methods=[{"name": "ladder", "options": {"levels": ["simple", "partition-lp"]}}]))
    with pytest.raises(InvalidArgumentError, match=r"^methods\[0\]\.options: ladder refuses .*nosuch"):
        check_spec(make(methods=[{"name": "ladder", "options": {"levels": ["simple", "nosuch"]}}]))


def test_the_ladder_method_runs_the_levels_it_is_given_and_keeps_the_best():
    spec = make(methods=[{"name": "ladder", "options": {"levels": ["simple", "exact"], "stop_when_proven": False}},
                         "simple"], graphs=["regal:12:barabasi_albert:2"])
    ladder, simple = (run_task(t) for t in expand(spec))
    opt = _dp_optimum("regal:12:barabasi_albert:2", 3)
    assert simple["lower_bound"] < opt * (1 - 1e-6)  # the simple bound alone does not reach the optimum here
    assert ladder["lower_bound"] == pytest.approx(opt, rel=1e-6) and ladder["objective"] == simple["objective"]


def test_the_plan_is_part_of_a_certify_key_and_other_keys_are_unchanged():
    a, b = expand(make()), expand(make(plan={"decodes": 500}))
    assert a[0].key != b[0].key and json.loads(b[0].plan) == {"decodes": 500} and a[0].plan == "{}"
    # a throughput task's key as it was before certify sweeps: a re-run still finds its saved rows
    t = expand(sweep_from_dict({"graphs": ["regal:8"], "devices": [2], "methods": ["dp"], "seeds": [3]}))[0]
    assert t.key == spec_module._key("throughput", "regal:8", "dp", "{}", None, 2, "file", 3)


def _dp_optimum(spec, k):
    return sc.slice_graph(load_graph(spec), devices=k, method="dp").objective


@pytest.mark.parametrize("level", ["simple", "cover", "exact"])
def test_a_task_certifies_the_seeded_plan_and_its_bound_is_at_most_the_optimum(level):
    task = expand(make(methods=[level], devices=[3], seeds=[1], graphs=["regal:12:barabasi_albert:2"]))[0]
    row = run_task(task)
    graph = load_graph(task.graph_spec)
    plan = sc.slice_graph(graph, devices=3, seed=1)
    direct = sc.certify(graph, plan, devices=3, levels=(level,), seed=1, time_limit=None)
    assert row["error"] is None and row["problem"] == "certify" and row["method"] == level
    assert (row["objective"], row["lower_bound"], row["status"]) == (direct.objective, direct.lower_bound,
                                                                      direct.status)
    detail = json.loads(row["detail"])  # the ladder, level by level, as the certificate has it
    assert detail["bound_source"] == direct.bound_source
    assert [x[:3] for x in detail["levels"]] == [[r.level, r.bound, r.status] for r in direct.levels]
    opt = _dp_optimum(task.graph_spec, 3)
    assert row["lower_bound"] <= opt * (1 + 1e-9) <= row["objective"] * (1 + 1e-9)
    assert (row["status"] == "optimal") == (row["lower_bound"] >= row["objective"] * (1 - 1e-9))
    if level == "exact":  # the exact MIP proves the optimum
        assert row["lower_bound"] == pytest.approx(opt, rel=1e-6)


class _Clock:
    """The sweep's ``time`` module, its ``monotonic`` moving on only when the fakes below spend time."""

    def __init__(self):
        self.now = 1000.0
        self.perf_counter, self.time = time.perf_counter, time.time

    def monotonic(self):
        return self.now


def _timed_calls(monkeypatch, plan_seconds):
    """Fakes of ``slice_graph`` (taking ``plan_seconds`` of the sweep's clock, searching without a
    limit) and ``certify`` (with the limit it is given); the dict they fill with the time limits and
    seeds each was called with."""
    from stagecut.sweep import run as run_module

    clock = _Clock()
    seen = {}
    real_slice, real_certify = sc.slice_graph, sc.certify

    def slice_graph(*args, time_limit=None, **kw):
        seen["plan"], seen["plan_seed"] = time_limit, kw["seed"]
        clock.now += plan_seconds
        return real_slice(*args, time_limit=None, **kw)

    def certify(*args, time_limit=None, **kw):
        seen["bound"], seen["bound_seed"] = time_limit, kw["seed"]
        return real_certify(*args, time_limit=time_limit, **kw)

    monkeypatch.setattr(sc, "slice_graph", slice_graph)
    monkeypatch.setattr(sc, "certify", certify)
    monkeypatch.setattr(run_module, "time", clock)
    return seen


@pytest.mark.parametrize(("task_limit", "own", "plan_gets"), [
    (100.0, None, PLAN_SHARE * 100.0),  # no limit of its own: its share
    (100.0, 30.0, 30.0),                # its own, shorter
    (100.0, 250.0, 100.0),              # its own, capped by the task's
    (None, None, None),                 # no limit anywhere
    (None, 30.0, 30.0),
])
def test_the_task_time_limit_covers_the_plan_and_the_bound(monkeypatch, task_limit, own, plan_gets):
    seen = _timed_calls(monkeypatch, plan_seconds=7.0)
    plan = {} if own is None else {"time_limit": own}
    task = expand(make(time_limit=task_limit, plan=plan, seeds=[5]))[0]
    row = run_task(task)
    assert row["error"] is None and seen["plan_seed"] == seen["bound_seed"] == 5  # the task's seed, both
    assert seen["plan"] == plan_gets
    assert seen["bound"] == (None if task_limit is None else task_limit - 7.0)


def test_the_bound_gets_nothing_when_the_plan_used_the_whole_limit(monkeypatch):
    seen = _timed_calls(monkeypatch, plan_seconds=50.0)
    row = run_task(expand(make(time_limit=40.0, methods=["exact"]))[0])
    assert 0 < seen["bound"] <= 1e-6  # (certify refuses 0: the least positive limit, its levels skipped)
    assert row["error"] is None and row["lower_bound"] is None and row["status"] == "feasible"
    assert row["objective"] is not None


def _row(graph, level, plan, bound, k=4):
    status = "optimal" if bound is not None and bound >= plan else "feasible"
    return {"problem": "certify", "graph": graph, "devices": k, "memory": "file", "seed": 0, "method": level,
            "options": "{}", "objective": plan, "lower_bound": bound, "status": status, "runtime_s": 1.0}


def test_the_summary_holds_each_level_to_its_own_bound_against_the_best_plan():
    # two instances; the tasks' plans differ (a time-limited search), the best plan is each instance's least
    rows = [_row("a", "simple", 10.0, 5.0), _row("a", "exact", 8.0, 8.0),
            _row("b", "simple", 20.0, 12.0), _row("b", "exact", 20.0, 15.0)]
    by = {r.method: r for r in summarize(rows, baseline="simple")}
    assert by["simple"].bound_best == pytest.approx(math.sqrt(5.0 / 8.0 * 12.0 / 20.0))
    assert by["exact"].bound_best == pytest.approx(math.sqrt(8.0 / 8.0 * 15.0 / 20.0))
    assert by["all"].bound_best == pytest.approx(math.sqrt(8.0 / 8.0 * 15.0 / 20.0))
    assert (by["simple"].optimal, by["exact"].optimal, by["all"].optimal) == (0.0, 0.5, 0.5)
    # a throughput table keeps its meaning: every method is held to the instance's best bound
    plain = [{**r, "problem": "throughput"} for r in rows]
    assert {r.method: r for r in summarize(plain)}["simple"].bound_best == pytest.approx(
        math.sqrt(8.0 / 10.0 * 15.0 / 20.0))


def test_a_certify_sweep_on_the_cluster_matches_the_calls_one_by_one(dask_client, tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('objective = "certify"\ngraphs = ["regal:12", "regal:12:watts_strogatz:1"]\ndevices = [2, 4]\n'
                    'methods = ["crossing", "exact"]\nplan = { decodes = 2000 }\n')
    run = run_sweep(path, client=dask_client)
    rows = read_results(run.results)
    assert run.tasks == 8 and len(rows) == 8 and run.errors == 0
    for r in rows:
        graph = load_graph(r["graph"])
        plan = sc.slice_graph(graph, devices=r["devices"], seed=0, decodes=2000)
        direct = sc.certify(graph, plan, devices=r["devices"], levels=(r["method"],), seed=0, time_limit=None)
        assert (r["objective"], r["lower_bound"], r["status"]) == (direct.objective, direct.lower_bound,
                                                                  direct.status)
        assert r["lower_bound"] <= _dp_optimum(r["graph"], r["devices"]) * (1 + 1e-9)
    summary = {(s.devices, s.method): s for s in summarize(rows)}
    for k in (2, 4):  # the exact MIP proves every instance; crossing is a bound, at most that
        assert summary[(k, "exact")].optimal == 1.0
        assert summary[(k, "crossing")].bound_best <= summary[(k, "exact")].bound_best + 1e-12


def test_the_testbed_file_is_a_valid_certify_sweep():
    spec = read_sweep(Path(__file__).resolve().parents[2] / "benches" / "mtpp_testbed.toml")
    assert spec.objective == "certify" and spec.devices == (2, 4, 8, 16, 32, 64) and spec.time_limit == 600
    labels = [label for label, _ in spec.graphs]
    assert len(set(labels)) == 40 and {int(label.split(":")[1]) for label in labels} == {100, 200, 500, 1000, 2000}
    assert spec.methods[0].name == "ladder"
    # its methods, options and plan as check_spec checks them (on one small graph, not the 2,000-node ones)
    check_spec(dataclasses.replace(spec, graphs=(("regal:12", "regal:12"),)))


def test_a_proven_infeasible_instance_is_a_row_not_an_error():
    # a hard memory limit the devices cannot hold together: slice_graph proves there is no
    # partition; the row says "infeasible" (and is not run again as a failed task)
    graph = str(Path(__file__).resolve().parents[1] / "data" / "opgraphs" / "resnet50.json")  # (memory for 4)
    task = expand(make(methods=["cover"], devices=[2], memory=["file"], graphs=[graph]))[0]
    row = run_task(task)
    assert row["error"] is None and row["status"] == "infeasible" and row["objective"] is None
    # the same instance without the memory limit is certified as before
    ok = run_task(expand(make(methods=["cover"], devices=[2], memory=["none"], graphs=[graph],
                              plan={"decodes": 200}))[0])
    assert ok["error"] is None and ok["status"] in ("optimal", "feasible") and ok["objective"] > 0


@pytest.mark.parametrize("name", ["mtpp_testbed_60s.toml", "mtpp_testbed_60s_targets.toml",
                                  "mtpp_testbed_60s_restarts.toml", "mtpp_testbed_60s_auto.toml",
                                  "mtpp_testbed_ops_60s.toml",
                                  "mtpp_testbed_600s.toml", "mtpp_testbed_600s_restarts.toml",
                                  "mtpp_testbed_600s_auto.toml", "mtpp_testbed_600s_partlp_k8.toml",
                                  "mtpp_testbed_60s_multilevel.toml", "mtpp_testbed_600s_multilevel_k8.toml",
                                  "mtpp_testbed_600s_default_100_k8.toml", "mtpp_testbed_600s_200_2000_k8.toml"])
def test_the_testbed_parts_are_valid_certify_sweeps(name):
    spec = read_sweep(Path(__file__).resolve().parents[2] / "benches" / name)
    assert spec.objective == "certify" and spec.methods[0].name == "ladder"
    for label, path in spec.graphs:  # (the operator graphs' files are found beside the sweep file)
        assert label.startswith("regal:") or (label.endswith(".json") and Path(path).is_file()), (label, path)
    check_spec(dataclasses.replace(spec, graphs=(("regal:12", "regal:12"),)))


def test_the_detail_column_is_strict_json_with_no_bound_null_and_infeasible_inf():
    import types

    from stagecut.mtpp.bounds import BoundResult
    from stagecut.sweep.run import _detail

    levels = (BoundResult(level="simple", bound=math.inf, status="optimal", seconds=0.0),
              BoundResult(level="exact", bound=None, status="time_limit", seconds=1.25))
    text = _detail(types.SimpleNamespace(method="certify", levels=levels, bound_source="simple"))

    def refuse(name):
        raise AssertionError(f"not strict JSON: {name}")

    back = json.loads(text, parse_constant=refuse)
    assert back == {"bound_source": "simple", "levels": [["simple", "inf", "optimal", 0.0],
                                                         ["exact", None, "time_limit", 1.25]], "best_objective": None}
    assert _detail(types.SimpleNamespace(method="slice", levels=())) is None
    cheaper = _detail(types.SimpleNamespace(method="certify", levels=levels, bound_source="simple", best_objective=9.5))
    assert json.loads(cheaper, parse_constant=refuse)["best_objective"] == 9.5


def test_a_cheaper_partition_a_level_found_is_the_instances_best_plan_in_the_summary():
    from stagecut.sweep.report import summarize

    def row(graph, method, objective, bound, best):
        detail = json.dumps({"bound_source": "subgraph", "levels": [], "best_objective": best})
        return {"problem": "certify", "graph": graph, "devices": 8, "method": method, "objective": objective,
                "lower_bound": bound, "status": "optimal" if bound >= objective else "feasible", "runtime_s": 1.0,
                "detail": detail}

    # the plan costs 10; the ladder found and proved a partition of 9.5: certified, it is optimal
    rows = [row("a", "ladder", 10.0, 9.5, 9.5), row("b", "ladder", 4.0, 3.0, None)]
    s = {r.method: r for r in summarize(rows)}
    assert s["all"].bound_best == pytest.approx(math.sqrt(1.0 * 0.75))
    assert s["ladder"].bound_best == pytest.approx(math.sqrt(1.0 * 0.75))
    assert s["all"].optimal == 0.5
    assert s["ladder"].answer_baseline == pytest.approx(1.0)  # (its own baseline: the same best partitions)
