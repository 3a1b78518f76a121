"""The sweep file: parsing, its errors (one InvalidArgumentError naming the field), expansion."""

import itertools
import json
import os
import re

import pytest

from stagecut.errors import InvalidArgumentError
from stagecut.sweep import expand, read_sweep, sweep_from_dict

BASE = {"graphs": ["regal:8"], "devices": [2], "methods": ["dp"]}


def test_expansion_is_the_cartesian_product(tmp_path):
    (tmp_path / "m").mkdir()
    for name in ("a.json", "b.json", "c.txt"):
        (tmp_path / "m" / name).write_text("{}")
    (tmp_path / "s.toml").write_text(
        'graphs = ["m/*.json", "example:transformer"]\ndevices = [2, 4]\nmemory = ["file", "1GiB"]\n'
        'seeds = [0, 7]\ntime_limit = 5\n'
        '[[methods]]\nname = "dp"\n[[methods]]\nname = "ip"\ntime_limit = 9\noptions = {solver = "cbc", gap = 0.01}\n')
    spec = read_sweep(tmp_path / "s.toml")
    tasks = expand(spec)
    graphs = [os.path.join("m", "a.json"), os.path.join("m", "b.json"), "example:transformer"]
    want = list(itertools.product(["dp", "ip"], graphs, [2, 4], ["file", "1GiB"], [0, 7]))
    assert [(t.method, t.graph, t.devices, t.memory, t.seed) for t in tasks] == want
    assert len({t.key for t in tasks}) == len(tasks) == 2 * 3 * 2 * 2 * 2
    assert {t.time_limit for t in tasks if t.method == "dp"} == {5.0}
    assert {t.time_limit for t in tasks if t.method == "ip"} == {9.0}
    assert {json.loads(t.options)["gap"] for t in tasks if t.method == "ip"} == {0.01}
    files = {t.graph_spec for t in tasks if t.graph.startswith("m")}
    assert files == {str(tmp_path / "m" / "a.json"), str(tmp_path / "m" / "b.json")}
    assert spec.results == str(tmp_path / "s.results")


def test_keys_are_stable_and_depend_on_what_decides_the_answer():
    k1 = {t.devices: t.key for t in expand(sweep_from_dict({**BASE, "devices": [2, 3]}))}
    k2 = {t.devices: t.key for t in expand(sweep_from_dict({**BASE, "devices": [3, 2]}))}
    assert k1 == k2  # order of the axes does not matter
    other = [expand(sweep_from_dict({**BASE, **change}))[0].key for change in (
        {"seeds": [1]}, {"memory": ["1GB"]}, {"time_limit": 3}, {"objective": "slice"},
        {"methods": [{"name": "dp", "options": {"prune": False}}]}, {"graphs": ["regal:9"]})]
    assert len(set(other) | {k1[2]}) == len(other) + 1


@pytest.mark.parametrize("change, field", [
    ({"devices": [0]}, "devices"), ({"devices": []}, "devices"), ({"devices": [2, 2]}, "devices"),
    ({"seeds": [-1]}, "seeds"), ({"memory": ["12 parsecs"]}, "memory"), ({"time_limit": -1}, "time_limit"),
    ({"objective": "speed"}, "objective"), ({"colour": 1}, "colour"), ({"graphs": ["nope/*.json"]}, "graphs"),
    ({"graphs": [3]}, "graphs"),
    ({"methods": [{"name": "dp", "options": {"devices": 3}}]}, "methods[0].options.devices"),
    ({"methods": [{"name": "dp", "speed": 1}]}, "methods[0].speed"), ({"methods": [{}]}, "methods[0].name"),
    ({"methods": ["dp", "dp"]}, "methods"), ({"report": {"baseline": "ip"}}, "report.baseline"),
    ({"workers": 0}, "workers"), ({"objective": "latency", "memory": ["1GB"]}, "memory"),
])
def test_bad_fields_are_named(change, field):
    with pytest.raises(InvalidArgumentError, match=rf"^{re.escape(field)}"):
        sweep_from_dict({**BASE, **change})


def test_missing_lists_and_bad_toml(tmp_path):
    for key in ("graphs", "devices", "methods"):
        with pytest.raises(InvalidArgumentError, match=f"^{key}: missing"):
            sweep_from_dict({k: v for k, v in BASE.items() if k != key})
    bad = tmp_path / "bad.toml"
    bad.write_text("graphs = [\n")
    with pytest.raises(InvalidArgumentError, match="not valid TOML"):
        read_sweep(bad)
