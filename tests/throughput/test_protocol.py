"""Every throughput solver keeps the result protocol: JSON round trips, the evaluator reproduces the
objective, infeasible is objective None, argument errors are InvalidArgumentError, the deprecated
``accelerators=`` still works, and the graph hygiene keeps the exact DP on torch.export-style graphs."""

import dataclasses
import json
import math
import random

import pytest

import stagecut as sc
from helpers import random_training_graph
from stagecut.errors import InvalidArgumentError, SolverError
from stagecut.graph import Node
from stagecut.throughput import ThroughputProblem

SOLVERS = [
    ("dp", {}),
    ("dpl", {}),
    ("auto", {}),
    ("auto", {"max_ideals": 2}),  # falls back to DPL
    ("ip", {"time_limit": 60}),
    ("ip", {"time_limit": 60, "contiguous": False}),
]


def _graphs():
    yield "dag", sc.random_dag(7, edge_prob=0.35, seed=5), {"devices": 2, "cpus": 1, "memory": 12.0}
    yield "training", random_training_graph(random.Random(3), 4), {"devices": 2, "cpus": 1}
    strs = sc.Graph([Node(id=f"n{i}", compute={"accelerator": 1.0 + i % 3, "cpu": 4.0}, comm=0.5) for i in range(5)],
                    [("n0", "n1"), ("n1", "n2"), ("n0", "n3"), ("n3", "n4"), ("n2", "n4")])
    yield "string ids", strs, {"devices": 3}


@pytest.mark.parametrize("method,kw", SOLVERS, ids=[f"{m}{'-' + '-'.join(k) if k else ''}" for m, k in SOLVERS])
@pytest.mark.parametrize("name", [n for n, _, _ in _graphs()])
def test_round_trip_and_rescore(method, kw, name):
    g, settings = next((g, s) for n, g, s in _graphs() if n == name)
    plan = sc.partition(g, method=method, **settings, **kw)
    assert plan.status in ("optimal", "feasible")
    assert sc.Plan.from_json(plan.to_json()) == plan
    assert sc.Plan.from_json(plan.dumps()) == plan  # JSON text
    assert sc.Plan.from_json(json.loads(json.dumps(plan.to_json()))) == plan
    ev = sc.evaluate(g, plan.device_of(), **settings)
    assert ev.feasible and ev.objective == plan.objective
    assert set(plan.assignment()) == set(g.ids)
    assert [s.index for s in plan.stages] == list(range(len(plan.stages)))
    assert plan.lower_bound is not None and plan.lower_bound <= plan.objective + 1e-9
    assert plan.contiguous == ev.contiguous
    # the split file format reads back to the same cost
    assert sc.evaluate(g, sc.split_from_dict(plan.to_split(), g), **settings).objective == plan.objective
    expected = {"auto": "dpl" if kw.get("max_ideals") else "dp"}.get(method, method)
    assert plan.method == expected
    assert "ideals" in plan.stats or "mip_vars" in plan.stats


def test_evaluation_round_trip():
    g = sc.Graph.chain([3.0, 1.0, 2.0], comm=0.5)
    ev = sc.evaluate(g, {0: ("accelerator", 0), 1: ("accelerator", 1), 2: ("cpu", 0)}, devices=2, cpus=1)
    assert sc.Evaluation.from_json(json.dumps(ev.to_json())) == ev
    assert ev.load_of() == {("accelerator", 0): 3.5, ("accelerator", 1): 2.0, ("cpu", 0): 0.0}
    assert not ev.feasible and any("cannot run on a cpu" in i for i in ev.issues)


@pytest.mark.parametrize("method", ["dp", "dpl", "auto", "ip"])
def test_infeasible_plan_has_no_objective_and_round_trips(method):
    g = sc.Graph.chain([1.0, 1.0, 1.0], memory=[5.0, 5.0, 5.0])
    plan = sc.partition(g, devices=1, memory=10.0, method=method)
    # DPL proves nothing when its order finds no split (each node fits alone): "unknown"
    assert plan.status == ("unknown" if method == "dpl" else "infeasible")
    assert plan.objective is None and plan.stages == ()
    assert plan.gap is None and not plan.feasible and plan.assignment() == {}
    assert sc.Plan.from_json(plan.to_json()) == plan
    assert sc.Plan.from_json(plan.dumps()) == plan
    assert plan.to_json()["objective"] is None
    free = sc.partition_ip(g, devices=1, memory=10.0, contiguous=False)
    assert free.status == "infeasible" and sc.Plan.from_json(free.dumps()) == free


def _bad_calls():
    g = sc.Graph.chain([1.0, 2.0])
    return [
        lambda: sc.partition(g, method="magic"),
        lambda: sc.partition(g, max_ideals=0),
        lambda: sc.partition(g, max_ideals=2.5),
        lambda: sc.partition(g, devices=-1),
        lambda: sc.partition(g, devices=1.5),
        lambda: sc.partition(g, devices=0, cpus=0),
        lambda: sc.partition(g, cpus=True),
        lambda: sc.partition(g, memory=math.nan),
        lambda: sc.partition(g, memory=-1.0),
        lambda: sc.partition(g, prune="yes"),
        lambda: sc.partition("not a graph"),
        lambda: sc.partition(ThroughputProblem.from_graph(g), devices=2),
        lambda: sc.partition_ip(g, solver="gurobi"),
        lambda: sc.partition_ip(g, time_limit=-1),
        lambda: sc.partition_ip(g, threads=0),
        lambda: sc.partition_ip(g, seed=-3),
        lambda: sc.partition_ip(g, warm_start=[1, 2]),
        lambda: sc.evaluate(g, {0: ("accelerator", 0), 1: ("accelerator", 0)}, devices=-1),
        lambda: sc.evaluate(g, {0: ("accelerator", 0), 1: ("accelerator", 0)}, memory="lots"),
        lambda: ThroughputProblem(g, 1, 0, math.nan),
    ]


@pytest.mark.parametrize("i", range(len(_bad_calls())))
def test_argument_errors_are_not_graph_errors(i):
    with pytest.raises(InvalidArgumentError) as info:
        _bad_calls()[i]()
    assert not isinstance(info.value, sc.InvalidGraphError)
    assert isinstance(info.value, ValueError)


def test_bad_file_defaults_are_graph_errors():
    g = sc.Graph.chain([1.0, 2.0], defaults={"cpus": -1})
    with pytest.raises(sc.InvalidGraphError, match="cpus"):
        sc.partition(g)
    with pytest.raises(sc.InvalidGraphError, match="cpus"):
        sc.evaluate(g, {0: ("accelerator", 0), 1: ("accelerator", 0)})
    with pytest.raises(sc.InvalidGraphError, match="unassigned"):
        sc.evaluate(g, {0: ("accelerator", 0)}, cpus=0)
    with pytest.raises(sc.InvalidGraphError, match="not a"):
        sc.evaluate(g, {0: ("accelerator", 0), 1: "accelerator"}, cpus=0)


def test_deprecated_accelerators_keyword():
    g = sc.random_dag(6, edge_prob=0.4, seed=2)
    new = sc.partition(g, devices=2, cpus=1)
    with pytest.warns(DeprecationWarning, match="devices"):
        old = sc.partition(g, accelerators=2, cpus=1)
    assert old.stages == new.stages and old.objective == new.objective
    with pytest.warns(DeprecationWarning, match="devices"):
        old_ip = sc.partition_ip(g, accelerators=2, cpus=1)
    assert old_ip.objective == pytest.approx(sc.partition_ip(g, devices=2, cpus=1).objective)
    with pytest.warns(DeprecationWarning, match="devices"):
        ev = sc.evaluate(g, new.device_of(), accelerators=1, cpus=1)
    assert ev == sc.evaluate(g, new.device_of(), devices=1, cpus=1)
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidArgumentError, match="not both"):
        sc.partition(g, devices=2, accelerators=2)


def test_problem_object_and_file_notes():
    data = {"maxSizePerFPGA": 10.0, "maxFPGAs": 2, "maxCPUs": 1,
            "nodes": [{"id": 1, "supportedOnFpga": 1, "cpuLatency": 5.0, "fpgaLatency": 1.0,
                       "isBackwardNode": 0, "size": 3.0},
                      {"id": 2, "supportedOnFpga": 1, "cpuLatency": 2.0, "fpgaLatency": 4.0,
                       "isBackwardNode": 0, "size": 3.0}],
            "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5}]}
    g = sc.workload_from_dict(data)
    plan = sc.partition(g, devices=1)
    assert "cpus=1 from the file's maxCPUs" in plan.notes
    assert not any("devices" in n for n in plan.notes)
    assert plan.summary().count("from the file") == 2  # cpus and memory
    assert not any("cpus" in n for n in sc.partition(g, devices=1, cpus=0).notes)
    problem = ThroughputProblem.from_graph(g, devices=1)
    assert (problem.devices, problem.cpus, problem.memory) == (1, 1, 10.0)
    again = sc.partition(problem)
    assert dataclasses.replace(again, runtime_s=plan.runtime_s) == plan
    assert sc.partition_ip(problem).objective == pytest.approx(plan.objective)


def _export_like(n_free=60, n_costly=0):
    """A chain of 10 layers plus isolated buffers (torch.export's num_batches_tracked)."""
    chain = sc.Graph.chain([float(1 + i % 4) for i in range(10)], memory=1.0)
    nodes = list(chain.nodes)
    nodes += [Node(id=f"buf{i}", compute={"accelerator": 0.0}) for i in range(n_free)]
    nodes += [Node(id=f"w{i}", compute={"accelerator": 0.5}) for i in range(n_costly)]
    return sc.Graph(nodes, chain.edges)


def test_isolated_free_nodes_keep_the_exact_dp():
    g = _export_like()
    for method in ("dp", "auto"):
        plan = sc.partition(g, devices=3, memory=4.0, method=method)
        assert plan.method == "dp" and plan.status == "optimal"
        assert plan.stats["ideals"] == 11  # the chain's alone
        assert plan.stats["set_aside"] == 60
        assert any("60 nodes without edges" in n for n in plan.notes)
        assert set(plan.assignment()) == set(g.ids)  # every node is placed
        assert all(plan.assignment()[f"buf{i}"] == 0 for i in range(60))  # on the first stage
        assert sc.evaluate(g, plan.device_of()).objective == plan.objective
        assert sc.Plan.from_json(plan.dumps()) == plan
    alone = sc.partition(sc.Graph.chain([float(1 + i % 4) for i in range(10)], memory=1.0), devices=3, memory=4.0)
    assert alone.objective == plan.objective and alone.stats["ideals"] == 11


def test_the_refusal_names_unconnected_parts():
    g = _export_like(n_free=60, n_costly=12)
    with pytest.raises(sc.TooManyIdealsError, match="13 unconnected parts") as info:
        sc.partition(g, devices=3, method="dp", max_ideals=1000)
    assert "12 of them without edges" in str(info.value) and "60 nodes" in str(info.value)
    plan = sc.partition(g, devices=3, max_ideals=1000)
    assert plan.method == "dpl" and any("13 unconnected parts" in n for n in plan.notes)
    assert sc.evaluate(g, plan.device_of()).objective == plan.objective


def test_isolated_nodes_that_cannot_run_everywhere_are_kept():
    # a CPU-only buffer cannot join an accelerator stage: it is not set aside
    chain = sc.Graph.chain([1.0, 2.0, 3.0], cpu_costs=[5.0, 5.0, 5.0])
    g = sc.Graph([*chain.nodes, Node(id="b", compute={"cpu": 0.0})], chain.edges)
    plan = sc.partition(g, devices=2, cpus=1, method="dp")
    assert plan.stats["set_aside"] == 0 and plan.device_of()["b"][0] == "cpu"
    assert sc.evaluate(g, plan.device_of()).objective == plan.objective


def test_solver_evaluator_disagreement_is_an_internal_error(monkeypatch):
    import stagecut.throughput.rescore as rescore

    real = rescore.evaluate

    def off_by_one(*a, **kw):
        ev = real(*a, **kw)
        return dataclasses.replace(ev, objective=ev.objective + 1.0)

    monkeypatch.setattr(rescore, "evaluate", off_by_one)
    g = sc.Graph.chain([1.0, 2.0, 3.0])
    for call in (lambda: sc.partition(g, devices=2, method="dp"), lambda: sc.partition_ip(g, devices=2)):
        with pytest.raises(SolverError, match="internal error.*please report"):
            call()


def test_evaluator_flags_every_broken_limit():
    g = sc.Graph([Node(id=i, compute={"accelerator": 1.0, "cpu": 2.0}, memory=3.0, colocation=i // 2)
                  for i in range(4)], [(0, 1), (1, 2), (2, 3)])
    ok = {0: ("accelerator", 0), 1: ("accelerator", 0), 2: ("cpu", 0), 3: ("cpu", 0)}
    assert sc.evaluate(g, ok, devices=1, cpus=1, memory=6.0).feasible
    cases = {
        "only 0 available": ({**ok}, {"devices": 1, "cpus": 0, "memory": 6.0}),  # a CPU too many
        "uses 2 cpu devices, only 1": ({0: ("cpu", 0), 1: ("cpu", 0), 2: ("cpu", 1), 3: ("cpu", 1)},
                                       {"devices": 0, "cpus": 1}),
        "uses 2 accelerator devices, only 1": ({**ok, 2: ("accelerator", 1), 3: ("accelerator", 1)},
                                               {"devices": 1, "cpus": 1}),
        "memory 6 exceeds the limit 5": (ok, {"devices": 1, "cpus": 1, "memory": 5.0}),
        "colocation class 1 is split": ({**ok, 3: ("accelerator", 0)}, {"devices": 1, "cpus": 1}),
        "does not have": ({**ok, 3: ("gpu", 0), 2: ("gpu", 0)}, {"devices": 1, "cpus": 1}),
    }
    for why, (split, limits) in cases.items():
        ev = sc.evaluate(g, split, **limits)
        assert not ev.feasible and any(why in i for i in ev.issues), (why, ev.issues)
