"""``stagecut latency FILE -k G --method ...`` on a networkx node-link operator graph (issue 14)."""

import json

import pytest

from stagecut.latency import LatencyProblem, evaluate_schedule, operator_devices, place, read_operator_graph

OPS = [("in", 0.0, 8e6), ("conv", 40.0, 8e6), ("bn", 3.0, 8e6), ("relu", 2.0, 8e6), ("left", 30.0, 8e5),
       ("right", 30.0, 8e5), ("add", 2.0, 8e5), ("out", 5.0, 8e3)]
LINKS = [("in", "conv"), ("conv", "bn"), ("bn", "relu"), ("relu", "left"), ("relu", "right"), ("left", "add"),
         ("right", "add"), ("add", "out")]


def node_link(devices=4, lonely=True):
    """Eight operators in one component (plus a lonely one), times per device in microseconds."""
    nodes = [{"id": v, "op_type": v.capitalize(), "mem": 1e6,
              "comp_cost": {f"GPU:{d}": t * (1 + 0.5 * d) for d in range(devices)}} for v, t, _ in OPS]
    if lonely:
        nodes.append({"id": "stray", "op_type": "Const", "mem": 0.0, "comp_cost": {"GPU:0": 1.0}})
    bits = {v: b for v, _, b in OPS}
    links = [{"source": a, "target": b, "tensor_size_in_bit": bits[a]} for a, b in LINKS]
    return {"directed": True, "multigraph": False, "graph": {}, "nodes": nodes, "links": links}


@pytest.fixture
def ops(tmp_path):
    path = tmp_path / "ops.json"
    path.write_text(json.dumps(node_link()))
    return path


def problem(path, k, per=2):
    with pytest.warns(Warning, match="dropped 1 nodes"):
        g, out, _ = read_operator_graph(path, gpus=k)
    return LatencyProblem(g, operator_devices(k, gpus_per_server=per), out)


@pytest.mark.parametrize("method", ["quickp", "quickp-p1", "metis", "mcmc", "best-device"])
def test_every_method_runs_on_an_operator_graph(run, ops, method):
    data = run.json("latency", ops, "-k", 2, "--method", method, "--time-limit", 30)
    assert data["method"].startswith(method) and data["status"] == "feasible"
    assert data["devices"] == ["gpu:0", "gpu:1"] and "stray" not in data["placement"]
    assert len(data["placement"]) == len(OPS)
    p = problem(ops, 2)
    again = evaluate_schedule(p, None, data["placement"], data["order"])
    assert data["objective"] == pytest.approx(again.objective)   # re-scored on the original graph
    assert data["objective"] >= p.lower_bound() - 1e-9


def test_the_first_k_devices_times_and_two_gpus_per_server(run, ops):
    # gpu:0 is the fastest device of the file: everything there takes the sum of its times
    data = run.json("latency", ops, "-k", 4, "--method", "best-device")
    assert data["objective"] == pytest.approx(sum(t for _, t, _ in OPS))
    for per in (2, 4):   # the CLI's servers are operator_devices(K) with its output sizes
        args = ("--gpus-per-server", per) if per != 2 else ()
        got = run.json("latency", ops, "-k", 4, "--method", "metis", *args)
        want = place(problem(ops, 4, per), method="metis")
        assert got["objective"] == pytest.approx(want.objective) and got["placement"] == want.placement
    assert run.json("latency", ops, "--method", "best-device")["devices"] == [f"gpu:{d}" for d in range(4)]


def test_the_summary_says_what_was_dropped(run, ops):
    code, out, err = run("latency", ops, "-k", 2, "--method", "mcmc")
    assert code == 0, err
    assert "dropped 1 nodes" in out and "8 operators on 2 GPUs" in out and not err


def test_a_bad_operator_graph_is_one_line_and_exit_2(run, tmp_path):
    bad = node_link(lonely=False)
    bad["links"].append({"source": "out", "target": "nowhere", "tensor_size_in_bit": 8.0})
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    code, out, err = run("latency", path, "-k", 2, "--method", "quickp")
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1 and err.startswith("stagecut: error:") and "nowhere" in err


@pytest.mark.parametrize("argv,word", [(("-k", 5), "gpus: 5 asked"), (("-k", 3), "--gpus-per-server"),
                                       (("--topology", "pcie"), "--topology"),
                                       (("--comm-bandwidth", "12GB/s"), "--comm-bandwidth"),
                                       (("--time-unit", "s"), "--time-unit"),
                                       (("--method", "metis", "--solver", "cbc"), "--solver")])
def test_bad_flags_for_an_operator_graph_are_one_line_and_exit_2(run, ops, argv, word):
    code, out, err = run("latency", ops, *argv)
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1 and word in err


def test_a_saved_plan_evaluates_back_on_the_operator_graph(run, ops, tmp_path):
    saved = tmp_path / "plan.json"
    got = run.json("latency", ops, "-k", 2, "--method", "mcmc", "-o", saved)
    back = run.json("latency", ops, "-k", 2, "--evaluate", saved)
    assert back["placement"] == got["placement"] and back["objective"] == pytest.approx(got["objective"])


def test_an_rwnn_spec_runs_on_its_cpu_t4_a100_devices(run):
    from stagecut.rwnn import rwnn, rwnn_devices

    code, out, err = run("latency", "rwnn:modules=3:channels=1:seed=2", "--method", "heft", "--json")
    assert code == 0, err
    data = json.loads(out)
    g = rwnn(3, 1, seed=2)
    again = evaluate_schedule(LatencyProblem(g, rwnn_devices(), "comm"), None,
                              {int(k): v for k, v in data["placement"].items()})
    assert data["objective"] == pytest.approx(again.objective)
    assert set(data["devices"]) == {"cpu", "t4", "a100"}
    code, _, err = run("latency", "rwnn:modules=3:channels=1", "-k", "2")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "rwnn" in err
