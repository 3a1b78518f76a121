"""Sweep files: the refusals and readings the main tests did not reach (coverage); each names
the field, and a scalar where a list is expected is read as a one-element list."""

from __future__ import annotations

import os

import pytest

from stagecut.errors import InvalidArgumentError, MemoryLimitError
from stagecut.sweep import spec as spec_module
from stagecut.sweep.spec import check_spec, expand, sweep_from_dict

BASE = {"graphs": ["regal:8"], "devices": [2], "methods": ["dpl"]}


def make(**changes):
    return sweep_from_dict({**BASE, **changes})


def test_a_scalar_is_a_list_of_one():
    s = make(graphs="regal:8", devices=3, methods="dp", seeds=4, memory="1GB")
    assert (s.graphs, s.devices, s.seeds, s.memory) == ((("regal:8", "regal:8"),), (3,), (4,), ("1GB",))
    assert [m.name for m in s.methods] == ["dp"]
    assert len(expand(s)) == 1


@pytest.mark.parametrize(("changes", "field"), [
    ({"memory": [True]}, "memory"),
    ({"memory": [[1]]}, "memory"),
    ({"graphs": ["regal:8", "regal:8"]}, "graphs: a graph is named twice"),
    ({"methods": [3]}, "methods[0]"),
    ({"methods": [{"name": "dp", "options": "fast"}]}, "methods[0].options"),
    ({"results": ""}, "results"),
    ({"results": 7}, "results"),
    ({"report": {"baseline": "dp", "style": "x"}}, "report"),
    ({"report": "dp"}, "report"),
])
def test_each_bad_value_names_its_field(changes, field):
    with pytest.raises(InvalidArgumentError) as info:
        make(**changes)
    assert str(info.value).startswith(f"{field}:" if ":" not in field else field), str(info.value)


def test_not_a_table_is_refused():
    for data in (["graphs"], "graphs = 1", None):
        with pytest.raises(InvalidArgumentError, match="^sweep: expected a table"):
            sweep_from_dict(data)


def test_a_directory_is_not_a_graph_file(tmp_path):
    (tmp_path / "d.json").mkdir()  # a glob that matches a directory
    with pytest.raises(InvalidArgumentError, match=r"^graphs: .*d\.json: no such file"):
        sweep_from_dict({**BASE, "graphs": ["*.json"]}, base=str(tmp_path))
    with pytest.raises(InvalidArgumentError, match=r"^graphs: .*d\.json: no such file"):
        sweep_from_dict({**BASE, "graphs": [os.path.join(str(tmp_path), "d.json")]})


def test_too_many_tasks_are_refused_before_any_check(monkeypatch):
    monkeypatch.setattr(spec_module, "MAX_TASKS", 5)
    s = make(devices=[2, 3], seeds=[0, 1, 2])  # 6 tasks
    with pytest.raises(MemoryLimitError, match="1 methods x 1 graphs x 2 devices x 1 memory x 3 seeds = 6 tasks"):
        check_spec(s)
    check_spec(make(devices=[2, 3], seeds=[0, 1]))  # 4: fine


def test_slice_and_latency_methods_are_checked_against_their_own_lists():
    with pytest.raises(InvalidArgumentError, match=r"^methods\[0\]\.name: 'dpl' is not a slice method"):
        check_spec(make(objective="slice"))
    check_spec(make(objective="slice", methods=["order"]))
    with pytest.raises(InvalidArgumentError, match=r"^methods\[0\]\.options\.ideals: not an option of slice"):
        check_spec(make(objective="slice", methods=[{"name": "order", "options": {"ideals": 3}}]))
    with pytest.raises(InvalidArgumentError, match=r"^methods\[0\]\.options"):
        check_spec(make(objective="latency", methods=[{"name": "heft", "options": {"no_such_option": 1}}]))


def test_option_values_are_tried_on_a_small_chain_for_every_objective():
    # a value the method refuses is named with the method before any cluster starts
    with pytest.raises(InvalidArgumentError, match=r"^methods\[0\]\.options: brkga refuses"):
        check_spec(make(objective="slice", methods=[{"name": "brkga", "options": {"population": -3}}]))
    with pytest.raises(InvalidArgumentError, match=r"^methods\[0\]\.options: sa refuses"):
        check_spec(make(objective="latency", methods=[{"name": "sa", "options": {"max_evaluations": -1}}]))
    # accepted values pass on every objective
    check_spec(make(objective="slice", methods=[{"name": "brkga", "options": {"population": 8}}]))
    check_spec(make(objective="latency", methods=[{"name": "sa", "options": {"max_evaluations": 20}}]))


@pytest.mark.parametrize(("objective", "entry", "method", "options"), [
    ("throughput", "partition", "dp", {"max_ideals": 1000}), ("slice", "slice_graph", "brkga", {"population": 8}),
    ("latency", "place", "sa", {"max_evaluations": 20})])
def test_the_dry_run_of_options_has_a_time_limit(monkeypatch, objective, entry, method, options):
    import functools

    import stagecut as sc

    seen = []
    real = getattr(sc, entry)

    @functools.wraps(real)  # the same signature: check_spec reads the option names from it
    def record(*a, **kw):
        seen.append(kw.get("time_limit"))

    monkeypatch.setattr(sc, entry, record)
    check_spec(make(objective=objective, methods=[{"name": method, "options": options}]))
    assert seen and all(t is not None and 0 < t <= 1.0 for t in seen), seen


def test_options_in_another_order_are_the_same_method():
    a = {"name": "ip", "options": {"time_limit_ratio": 1, "solver": "cbc"}}
    b = {"name": "ip", "options": {"solver": "cbc", "time_limit_ratio": 1}}
    assert make(methods=[a]).methods == make(methods=[b]).methods
    assert make(methods=[a]).methods[0].options == '{"solver": "cbc", "time_limit_ratio": 1}'
    assert [t.key for t in expand(make(methods=[a]))] == [t.key for t in expand(make(methods=[b]))]
    with pytest.raises(InvalidArgumentError, match="^methods: a method with the same options is named twice"):
        make(methods=[a, b])


@pytest.mark.parametrize("objective", ["throughput", "slice"])
def test_progress_is_not_an_option_a_sweep_may_set(objective):
    method = "dp" if objective == "throughput" else "order"
    with pytest.raises(InvalidArgumentError,
                       match=rf"^methods\[0\]\.options\.progress: not an option of {objective} methods"):
        check_spec(make(objective=objective, methods=[{"name": method, "options": {"progress": True}}]))


def test_a_worker_count_is_kept():
    assert make(workers=3).workers == 3 and make().workers is None
    with pytest.raises(InvalidArgumentError, match="^workers"):
        make(workers=0)
