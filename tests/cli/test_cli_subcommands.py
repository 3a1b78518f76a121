"""Each subcommand: known answers, the same summary block, the same JSON keys, units, -o and show."""

import json

import pytest

import stagecut as sc
from stagecut.cli import demo as demo_cmd

from .cli_support import GIB, SHARED_KEYS, SUMMARY_LABELS, labels


def _check_block(out, objective_text=None):
    """The summary block first (its five labels), then the stage table, its times and sizes with units."""
    lines = out.splitlines()
    assert labels("\n".join(lines[:5])) == SUMMARY_LABELS
    if objective_text is not None:
        assert lines[0].split()[1] == objective_text
    head = next((line for line in lines if line.startswith("stage ")), None)
    assert head is not None, out
    assert "load (" in head and "memory (" in head and " ids" in head, head


def _same_result(a, b):
    drop = {"runtime_s", "stats", "units"}  # units: also the units the sizes were given in
    return {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}


# ------------------------------------------------------------------------------- partition
@pytest.mark.parametrize("method", ["auto", "dp", "dpl", "ip"])
def test_partition_chain_optimum(run, chain, method):
    res = run.json("partition", chain, "--method", method)
    assert SHARED_KEYS <= set(res) and res["kind"] == "Plan"
    if method != "dpl":  # dpl is a heuristic: at least the optimum
        assert res["objective"] == 4.0 and res["status"] == "optimal" and res["gap"] == 0.0
    assert res["objective"] >= 4.0 and res["method"] == ("dp" if method == "auto" else method)
    if method == "dp":
        assert [s["nodes"] for s in res["stages"]] == [[0], [1, 2, 3], [4]]
    code, out, err = run("partition", chain, "--method", method)
    assert code == 0 and err == ""
    _check_block(out, "4" if method != "dpl" else None)


def test_partition_memory_with_units(run, big_chain):
    a = run.json("partition", big_chain, "--memory", "16GiB")
    b = run.json("partition", big_chain, "--memory", "17179869184")
    assert _same_result(a, b) and a["memory"] == 16 * GIB and a["objective"] == 2.0
    c = run.json("partition", big_chain)  # the file's 12e9 bytes: one 6 GiB node per accelerator, no room
    assert c["status"] == "infeasible" and c["objective"] is None and c["memory"] == 12e9
    assert run.json("partition", big_chain, "--memory", "none")["objective"] == 2.0


def test_partition_says_when_the_files_cpus_are_added(run, tmp_path):
    g = sc.Graph([sc.Node(id=i, compute={"accelerator": 2.0, "cpu": 3.0}) for i in range(3)],
                 [(0, 1), (1, 2)], {"accelerators": 1, "cpus": 1})
    path = tmp_path / "w.json"
    sc.write_workload(g, path)
    code, out, _ = run("partition", path)
    assert code == 0 and any(line.startswith("note") and "CPU" in line.upper() and "file" in line
                             for line in out.splitlines())
    res = run.json("partition", path)
    assert res["cpus"] == 1 and any(s["kind"] == "cpu" for s in res["stages"]) and res["objective"] == 4.0
    code, out, _ = run("partition", path, "--cpus", "0")
    assert not any("maxCPUs" in line for line in out.splitlines()) and out.splitlines()[0].split()[1] == "6"


# ----------------------------------------------------------------------- evaluate, -o, show
def test_saved_result_evaluates_and_shows_back(run, chain, tmp_path):
    saved, split = tmp_path / "plan.json", tmp_path / "split.json"
    code, out, _ = run("partition", chain, "-o", saved, "--split-out", split)
    assert code == 0 and f"saved the result to {saved}" in out
    plan = sc.Plan.from_json(json.loads(saved.read_text()))
    assert plan.objective == 4.0 and json.loads(split.read_text())["fpgas"][1]["nodes"] == [1, 2, 3]
    code, shown, _ = run("show", saved)
    assert code == 0 and shown.splitlines()[:4] == out.splitlines()[:4]  # all but the time
    assert shown.splitlines()[6:] == out.splitlines()[6:-1]  # the same table
    assert run.json("show", saved) == json.loads(saved.read_text())
    for source in (saved, split):
        ev = run.json("evaluate", chain, source)
        assert SHARED_KEYS <= set(ev) and ev["objective"] == 4.0 and ev["status"] == "feasible"
        assert ev["method"] == "evaluate"
    code, out, _ = run("evaluate", chain, split)
    _check_block(out, "4")


def test_evaluate_reports_a_split_that_breaks_limits(run, big_chain, tmp_path):
    split = tmp_path / "s.json"
    split.write_text(json.dumps({"fpgas": [{"nodes": [0, 1, 2]}], "cpus": []}))
    ev = run.json("evaluate", big_chain, split, "--memory", "16GiB")
    assert ev["status"] == "infeasible" and ev["objective"] is None and any("memory" in n for n in ev["notes"])
    ev = run.json("evaluate", big_chain, split, "--memory", "18GiB")
    assert ev["status"] == "feasible" and ev["objective"] == 3.0
    ev = run.json("evaluate", big_chain, split, "--memory", "19327352832")
    assert ev["status"] == "feasible" and ev["memory"] == 18 * GIB


# ----------------------------------------------------------------------------------- slice
def test_slice_dp_on_a_regal_graph(run, tmp_path):
    g = sc.regal_graph(14, model="barabasi_albert", seed=3)
    best = sc.slice_graph(g, devices=3, method="dp")
    res = run.json("slice", "regal:14:barabasi_albert:3", "-k", "3", "--method", "dp")
    assert SHARED_KEYS <= set(res) and res["kind"] == "SlicePlan"
    assert res["status"] == "optimal" and res["objective"] == pytest.approx(best.objective)
    saved = tmp_path / "slice.json"
    code, out, _ = run("slice", "regal:14:barabasi_albert:3", "-k", "3", "--method", "dp", "-o", saved)
    _check_block(out)
    assert sc.SlicePlan.from_json(json.loads(saved.read_text())).objective == pytest.approx(best.objective)
    code, shown, _ = run("show", saved)
    assert code == 0 and shown.splitlines()[0] == out.splitlines()[0]


def test_slice_memory_units_and_bandwidth(run, tmp_path):
    # two nodes of 1 GiB of parameters, 1 ms of work each, no tensors, one stage
    g = sc.Graph.chain([1.0, 1.0], memory=[float(GIB)] * 2, defaults={"accelerators": 1, "cpus": 0})
    path = tmp_path / "w.json"
    sc.write_workload(g, path)
    a = run.json("slice", path, "--method", "dp", "--memory", "1GiB", "--bandwidth", "1GiB/s")
    b = run.json("slice", path, "--method", "dp", "--memory", "1073741824", "--bandwidth", "1073741.824")
    # 1 GiB overflows at 1 GiB/s = 1000 ms (the file's times are in ms): 2 + 1000
    assert a["objective"] == pytest.approx(1002.0) and b["objective"] == pytest.approx(a["objective"])
    c = run.json("slice", path, "--method", "dp", "--memory", "1GiB", "--bandwidth", "1GiB/s", "--time-unit", "s")
    assert c["objective"] == pytest.approx(3.0)
    assert run.json("slice", path, "--method", "dp", "--memory", "2GiB")["objective"] == 2.0
    hard = run.json("slice", path, "--method", "dp", "--memory", "1GiB")  # no bandwidth: a hard limit
    assert hard["status"] == "infeasible" and hard["objective"] is None


def test_slice_decodes_default_is_what_the_help_says(run):
    # the help: budget population x generations; brkga stops after the generations, which is
    # population + generations x (the 80% non-elite) decodes
    assert run.json("slice", "regal:30", "-k", "4")["stats"]["decodes"] == 100 + 100 * 80
    assert run.json("slice", "regal:30", "-k", "4", "--population", "10", "--generations", "7")["stats"]["decodes"] \
        == 10 + 7 * 8
    assert run.json("slice", "regal:30", "-k", "4", "--method", "random")["stats"]["decodes"] == 10_000
    assert run.json("slice", "regal:30", "-k", "4", "--decodes", "500")["stats"]["decodes"] == 500


# --------------------------------------------------------------------------------- certify
def test_certify_known_bound(run, mtpp_chain, tmp_path):
    path, split = mtpp_chain
    res = run.json("certify", path, split, "-k", "2")
    assert SHARED_KEYS <= set(res) and res["kind"] == "Certificate"
    assert res["objective"] == 6.5 and res["lower_bound"] == pytest.approx(5.5)
    assert res["gap"] == pytest.approx(1 / 6.5)
    code, out, err = run("certify", path, split, "-k", "2", "--levels", "simple")
    assert code == 0 and all(line.startswith("stagecut: certify: ") for line in err.splitlines())
    _check_block(out, "6.5")
    old = run.json("certify", path, split, "--stages", "2", "--memory", "none")
    assert old["objective"] == 6.5 and old["lower_bound"] == res["lower_bound"]


def test_certify_reads_a_saved_slice_result(run, mtpp_chain, tmp_path):
    path, _ = mtpp_chain
    saved = tmp_path / "slice.json"
    assert run("slice", path, "-k", "2", "--method", "dp", "-o", saved)[0] == 0
    best = json.loads(saved.read_text())["objective"]
    res = run.json("certify", path, saved, "-k", "2", "--levels", "simple,exact")
    assert res["objective"] == pytest.approx(best) and res["lower_bound"] == pytest.approx(best, rel=1e-6)


def test_certify_memory_units(run, tmp_path):
    g = sc.Graph.chain([1.0, 1.0], memory=[float(GIB)] * 2, defaults={"accelerators": 1, "cpus": 0})
    path, split = tmp_path / "w.json", tmp_path / "s.json"
    sc.write_workload(g, path)
    split.write_text(json.dumps({"blocks": [[0, 1]]}))
    a = run.json("certify", path, split, "--levels", "simple", "--memory", "1GiB", "--bandwidth", "1GiB/s")
    b = run.json("certify", path, split, "--levels", "simple", "--memory", "1073741824", "--bandwidth", "1073741.824")
    assert a["objective"] == pytest.approx(1002.0) and b["objective"] == pytest.approx(1002.0)
    assert a["lower_bound"] == pytest.approx(b["lower_bound"])


# ------------------------------------------------------------------------------------ plan
def test_plan_tiny_piper(run, piper, tmp_path):
    res = run.json("plan", piper, "-k", "1")
    assert SHARED_KEYS <= set(res) and res["kind"] == "TrainingPlan"
    assert res["objective"] == pytest.approx(3.0) and res["devices"] == 1
    a = run.json("plan", piper, "--memory", "16GiB", "--bandwidth", "2")
    b = run.json("plan", piper, "--memory", "17179869184", "--bandwidth", "2")
    assert _same_result(a, b) and a["memory"] == 16 * GIB and a["bandwidth"] == 2.0
    assert run.json("plan", piper, "--bandwidth", "25GB/s")["bandwidth"] == 25e9
    assert run.json("plan", piper, "--memory", "1B")["status"] == "infeasible"
    saved = tmp_path / "plan.json"
    code, out, _ = run("plan", piper, "-o", saved)
    _check_block(out)
    code, shown, _ = run("show", saved)
    assert code == 0 and shown.splitlines()[0] == out.splitlines()[0]


def test_plan_example(run):
    res = run.json("plan", "example:transformer", "-k", "4", "--no-tp")
    assert res["status"] in ("optimal", "feasible") and res["objective"] > 0 and res["devices"] == 4


# ------------------------------------------------------------------------------------ demo
def test_demo_without_shared_says_so(run, monkeypatch, tmp_path):
    monkeypatch.setattr(demo_cmd, "_shared_dirs", lambda: [tmp_path / "nowhere"])
    code, out, err = run("demo")
    assert code == 0
    assert err.count("\n") == 1 and "absent" in err and "example:transformer-training" in err
    assert out.startswith("$ stagecut partition example:transformer-training")
    _check_block(out.split("\n\n", 1)[1])
    res = run.json("demo")
    g = sc.transformer_like(layers=12, training=True)
    assert res["objective"] == pytest.approx(sc.partition(g).objective)


@pytest.mark.parametrize("argv", [
    ["partition", "regal:300:erdos_renyi:1", "-k", "8", "--method", "dp", "--max-ideals", "100000000"],
    ["slice", "regal:300:erdos_renyi:1", "-k", "8", "--decodes", "100000000"],
])
def test_time_limit_is_honoured_by_every_method(run, argv, monkeypatch):
    import time as _time

    # the ideals of regal:300 are enumerated fast enough to pass the default memory budget (sized
    # for the sub-ideal lists the DP needs) within the half second: raise it, the limit stops first
    monkeypatch.setenv("STAGECUT_MEMORY_BUDGET", "64GiB")

    t0 = _time.perf_counter()
    data = run.json(*argv, "--time-limit", "0.5")
    assert _time.perf_counter() - t0 < 20  # generous: without the limit these run for minutes
    assert data["status"] == "time_limit"
