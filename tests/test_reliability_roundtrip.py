"""Results read back as written, and result files are checked before they are believed.

* every latency method's answer written with ``-o`` scores the same when read back by
  ``--evaluate`` (its own semantics), ``show`` and ``from_json``, the CPU ("cpu") included;
* a throughput plan round-trips the same way through ``evaluate``;
* ``show``/``from_json`` refuse a hand-edited result with one clear error naming the field;
* device descriptions: booleans are booleans; device counts too large are refused at once.
"""

import copy
import json
import math
import time

import pytest

import stagecut as sc
from reliability_support import run_cli
from stagecut.errors import InvalidArgumentError, InvalidGraphError, MemoryLimitError
from stagecut.latency import Devices, Schedule
from stagecut.latency.solve import METHODS

#: the methods and the semantics their answers are scored in (pieces: the PCIe-star IPs' own)
PIECES = {"ip", "pcie-greedy"}
#: methods that need more than a small graph or a batch
SKIP = {"split"}


def _graph():
    # 7 nodes; the CPU is the only device for two of them (they run on no accelerator) and the
    # fastest for another: every answer uses "cpu"
    nodes = [sc.Node(0, {"cpu": 1.0, "accelerator": 4.0}, memory=1.0, comm=2.0)]
    nodes += [sc.Node(i, {"cpu": 9.0 + i, "accelerator": 1.0 + 0.5 * i}, memory=1.0, comm=1.0 + i)
              for i in range(1, 5)]
    nodes += [sc.Node(5, {"cpu": 3.0}, memory=1.0, comm=1.0), sc.Node(6, {"cpu": 2.0}, memory=1.0)]
    edges = [(0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 5), (5, 6)]
    return sc.Graph(nodes, edges)


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    path = tmp_path_factory.mktemp("rt") / "g.json"
    g = _graph()
    sc.write_workload(g, path)
    return path


@pytest.mark.parametrize("method", [m for m in METHODS if m not in SKIP])
def test_a_saved_latency_answer_reads_back_to_the_same_placement_and_objective(method, workload, tmp_path, capsys):
    out = tmp_path / "r.json"
    code, _, err = run_cli(capsys, "latency", workload, "-k", "2", "--method", method, "--time-limit", "5",
                           "-o", out)
    if code == 2:  # a method that does not take this input says so in one line
        assert len(err.splitlines()) == 1 and "internal error" not in err, err
        return
    assert code == 0, err
    saved = json.loads(out.read_text())
    result = Schedule.from_json(saved)
    assert result.to_json() == saved or Schedule.from_json(result.to_json()) == result
    assert any(s["device"] == "cpu" for s in saved["stages"])  # the CPU is used and named "cpu"
    semantics = "pieces" if method in PIECES or saved.get("method") in PIECES else "asap"
    code, text, err = run_cli(capsys, "latency", workload, "-k", "2", "--evaluate", out, "--semantics", semantics,
                              "--json")
    assert code == 0, err
    again = json.loads(text)
    assert {v: s["device"] for s in again["stages"] for v in s["nodes"]} == \
        {v: s["device"] for s in saved["stages"] for v in s["nodes"]}
    assert math.isclose(again["objective"], saved["objective"], rel_tol=1e-9, abs_tol=1e-9), method
    code, text, err = run_cli(capsys, "show", out)
    assert code == 0 and f"{saved['objective']:.6g}" in text, err


def test_a_device_name_that_is_not_the_problems_is_refused(workload, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert run_cli(capsys, "latency", workload, "-k", "2", "--method", "heft", "-o", out)[0] == 0
    data = json.loads(out.read_text())
    for bad in ("accelerator:99999999999999999999", "accelerator:7", "gpu", 5, ""):
        d = copy.deepcopy(data)
        d["stages"][-1]["device"] = bad
        out.write_text(json.dumps(d))
        code, _, err = run_cli(capsys, "latency", workload, "-k", "2", "--evaluate", out)
        assert code == 2 and len(err.splitlines()) == 1 and "device" in err, (bad, err)


def test_a_throughput_plan_reads_back_through_evaluate(tmp_path, capsys):
    g = sc.regal_graph(14, seed=4)
    path = tmp_path / "g.json"
    sc.write_workload(g, path)
    out = tmp_path / "p.json"
    assert run_cli(capsys, "partition", path, "-k", "3", "-l", "1", "-o", out)[0] == 0
    plan = sc.Plan.from_json(json.loads(out.read_text()))
    code, text, err = run_cli(capsys, "evaluate", path, out, "-k", "3", "-l", "1", "--json")
    assert code == 0, err
    assert math.isclose(json.loads(text)["objective"], plan.objective, rel_tol=1e-12)


# --------------------------------------------------------------------------- hand-edited results
def _plan_json():
    return sc.partition(sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0]), devices=3).to_json()


EDITS = {
    "objective NaN": (lambda d: d.update(objective="nan"), "objective"),
    "objective inf": (lambda d: d.update(objective=math.inf), "objective"),
    "bound above the objective": (lambda d: d.update(lower_bound=1e308), "lower_bound"),
    "negative gap": (lambda d: d.update(gap=-5), "gap"),
    "gap that disagrees": (lambda d: d.update(gap=0.5), "gap"),
    "negative devices": (lambda d: d.update(devices=-3), "devices"),
    "no stages": (lambda d: d.update(stages=[]), "stages"),
    "stage index 1e30": (lambda d: d["stages"][0].update(index=1e30), "index"),
    "stage index out of order": (lambda d: d["stages"][0].update(index=2), "index"),
    "stage nodes a dict": (lambda d: d["stages"][0].update(nodes={"a": 1}), "nodes"),
    "node id a dict": (lambda d: d["stages"][0].update(nodes=[{"a": 1}]), "nodes"),
    "notes a string": (lambda d: d.update(notes="hello"), "notes"),
    "seed a string": (lambda d: d.update(seed="abc"), "seed"),
    "seed negative": (lambda d: d.update(seed=-1), "seed"),
    "status unknown word": (lambda d: d.update(status="great"), "status"),
    "optimal without objective": (lambda d: d.update(objective=None, gap=None), "status"),
    "infeasible with objective": (lambda d: d.update(status="infeasible"), "status"),
    "runtime negative": (lambda d: d.update(runtime_s=-1.0), "runtime_s"),
    "load a string": (lambda d: d["stages"][0].update(load="fast"), "load"),
    "load inf": (lambda d: d["stages"][0].update(load="inf"), "load"),
    "feasible a string": (lambda d: d["stages"][0].update(feasible="false"), "feasible"),
    "kind_index a float": (lambda d: d["stages"][0].update(kind_index=0.5), "kind_index"),
    "stats a list": (lambda d: d.update(stats=[1, 2]), "stats"),
    "contiguous a number": (lambda d: d.update(contiguous=0), "contiguous"),
    "huge integer objective": (lambda d: d.update(objective=10 ** 400), "objective"),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_from_json_refuses_a_hand_edited_result_naming_the_field(case):
    edit, field = EDITS[case]
    data = _plan_json()
    edit(data)
    with pytest.raises(InvalidGraphError, match=field):
        sc.Plan.from_json(data)


@pytest.mark.parametrize("case", sorted(EDITS))
def test_show_refuses_a_hand_edited_result_in_one_line(case, tmp_path, capsys):
    edit, field = EDITS[case]
    data = _plan_json()
    edit(data)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    code, _, err = run_cli(capsys, "show", path)
    assert code == 2 and len(err.splitlines()) == 1 and field in err and "internal" not in err, err


@pytest.mark.parametrize("data", [5, "not json", "[1, 2]", None, [], "[" * 100000, {"kind": ["Plan"]}])
def test_from_json_refuses_what_is_not_a_result(data):
    with pytest.raises(InvalidGraphError):
        sc.Plan.from_json(data)


def test_an_untouched_result_still_reads_back():
    data = _plan_json()
    assert sc.Plan.from_json(data).to_json() == data


# --------------------------------------------------------------------------- device descriptions
@pytest.mark.parametrize("value", ["false", 0, 1, "true", None, [], "no"])
def test_the_cpu_flag_of_a_device_file_is_a_boolean(value):
    with pytest.raises(InvalidArgumentError, match="cpu"):
        Devices.from_dict({"topology": "pcie", "accelerators": 2, "cpu": value})
    assert Devices.from_dict({"topology": "pcie", "accelerators": 2, "cpu": False}).names == \
        ("accelerator:0", "accelerator:1")


@pytest.mark.parametrize("make", [
    lambda: Devices.pcie_star(1024),  # first: without the check it is built (a second), and the test fails
    lambda: Devices.pcie_star(100_000),
    lambda: Devices.pcie_star(10 ** 9),
    lambda: Devices.servers(100_000, 100_000, intra_bandwidth=1.0, inter_bandwidth=1.0),
    lambda: Devices.from_dict({"topology": "pcie", "accelerators": 10 ** 9}),
    lambda: Devices.from_dict({"topology": "servers", "servers": 10 ** 5, "gpus_per_server": 10 ** 5,
                               "intra_bandwidth": 1, "inter_bandwidth": 1}),
    lambda: sc.place(_graph(), 100_000, method="heft"),
])
def test_too_many_devices_are_refused_before_allocation(make):
    t0 = time.process_time()
    with pytest.raises(MemoryLimitError, match="at most 1024"):
        make()
    assert time.process_time() - t0 < 1.0  # CPU seconds: nothing was built


def test_1024_devices_still_work():
    assert len(Devices.pcie_star(1023)) == 1024
