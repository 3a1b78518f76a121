"""The paper's baselines (stagecut.throughput.baselines): local search, PipeDream, Scotch."""

import os
import random

import pytest
from tests.helpers import brute_force, hide_module, random_inference_graph, random_training_graph

import stagecut as sc
from stagecut.errors import BackendUnavailableError, InvalidGraphError
from stagecut.graph import Node
from stagecut.throughput._scotch import find_gpart
from stagecut.throughput.baselines import local_search, pipedream, scotch
from stagecut.throughput.problem import ThroughputProblem


def require_gpart():
    """Scotch's gpart, or skip; in CI (``CI=true``) fail."""
    exe = find_gpart()
    if exe is None:
        msg = "Scotch's gpart is not on PATH (Debian: apt-get install -y scotch)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + "; CI must install it")
        pytest.skip(msg)
    return exe


def _rescored(graph, plan, problem):
    ev = sc.evaluate(graph, plan.device_of(), devices=problem.devices, cpus=problem.cpus, memory=problem.memory)
    assert ev.feasible, ev.issues
    assert ev.objective == pytest.approx(plan.objective, rel=1e-9, abs=1e-12)
    assert plan.contiguous == ev.acyclic_quotient
    assert plan.status == "feasible"
    assert plan.lower_bound is None or plan.lower_bound <= plan.objective + 1e-9


def _graphs(n_graphs, seed):
    rng = random.Random(seed)
    for k in range(n_graphs):
        if k % 2:
            yield random_training_graph(rng, rng.randint(2, 4)), rng.randint(1, 3), rng.randint(0, 1)
        else:
            yield random_inference_graph(rng, rng.randint(2, 6)), rng.randint(1, 3), rng.randint(0, 1)


def _methods():
    out = [lambda p: local_search(p, seed=3, restarts=3)]
    if find_gpart() is not None:
        out.append(scotch)
    return out


def test_rescored_and_at_least_the_dp_optimum():
    seen = 0
    for graph, k, l in _graphs(40, 11):
        problem = ThroughputProblem.from_graph(graph, devices=k, cpus=l, memory=6.0)
        best = brute_force(graph, k, l, memory=6.0)
        for method in _methods():
            plan = method(problem)
            if plan.objective is None:
                continue
            seen += 1
            _rescored(graph, plan, problem)
            if plan.contiguous:  # the brute force is over the contiguous splits
                assert plan.objective >= best - 1e-9
        try:
            plan = pipedream(problem)
        except InvalidGraphError:
            continue
        if plan.objective is not None:
            seen += 1
            _rescored(graph, plan, problem)
            assert plan.contiguous and plan.objective >= best - 1e-9
    assert seen > 40


def _moves(plan, problem):
    """Every split one class move away from ``plan``'s."""
    split = plan.device_of()
    graph = problem.graph
    devices = [("accelerator", i) for i in range(problem.devices)] + [("cpu", i) for i in range(problem.cpus)]
    classes = {}
    for n in graph.nodes:
        classes.setdefault(n.colocation if n.colocation is not None else ("n", n.id), []).append(n.id)
    for members in classes.values():
        for d in devices:
            if d != split[members[0]]:
                yield {**split, **dict.fromkeys(members, d)}


def test_local_search_ends_at_a_local_optimum():
    checked = 0
    for graph, k, l in _graphs(30, 5):
        problem = ThroughputProblem.from_graph(graph, devices=k, cpus=l, memory=6.0)
        plan = local_search(problem, seed=1, restarts=2)
        if plan.objective is None:
            continue
        for split in _moves(plan, problem):
            ev = sc.evaluate(graph, split, devices=k, cpus=l, memory=6.0)
            assert not (ev.feasible and ev.objective < plan.objective - 1e-9), (split, ev.objective, plan.objective)
            checked += 1
    assert checked > 100


def test_local_search_is_reproducible_by_seed_and_non_contiguous():
    graph = sc.Graph.chain([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0], comm=0.1)
    problem = ThroughputProblem.from_graph(graph, devices=3)
    a, b = local_search(problem, seed=7), local_search(problem, seed=7)
    assert a.device_of() == b.device_of() and a.objective == b.objective and a.seed == 7
    # without communication, {0, 2} | {1, 3} (6) beats every contiguous split (7)
    free = sc.Graph.chain([5.0, 5.0, 1.0, 1.0], comm=0.0)
    plan = sc.partition(free, devices=2, method="local-search", seed=0)
    assert plan.objective == 6.0 and sc.partition(free, devices=2).objective == 7.0
    assert not plan.contiguous and any("non-contiguous" in n for n in plan.notes)


def _diamond():
    """a -> (b, c) -> d with b and c heavy: the contiguous optimum splits the branch (a, b | c, d:
    5), PipeDream's path a, {b, c}, d cannot (9)."""
    nodes = [Node(v, {"accelerator": t}) for v, t in (("a", 1.0), ("b", 4.0), ("c", 4.0), ("d", 1.0))]
    return sc.Graph(nodes, [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])


def test_pipedream_contracts_branches():
    problem = ThroughputProblem.from_graph(_diamond(), devices=2)
    plan = pipedream(problem)
    assert plan.objective == 9.0 and plan.stats["path_nodes"] == 3
    assert {frozenset(s.nodes) for s in plan.stages} in ({frozenset("a"), frozenset("bcd")},
                                                          {frozenset("abc"), frozenset("d")})
    assert sc.partition(_diamond(), devices=2, method="dp").objective == 5.0
    assert sc.partition(_diamond(), devices=2, method="pipedream").method == "pipedream"


def test_pipedream_equals_the_dp_on_chains():
    rng = random.Random(2)
    for _ in range(30):
        n = rng.randint(1, 9)
        g = sc.Graph.chain([float(rng.randint(0, 9)) for _ in range(n)], comm=rng.choice([0.0, 0.5, 2.0]))
        k = rng.randint(1, 4)
        problem = ThroughputProblem.from_graph(g, devices=k)
        assert pipedream(problem).objective == pytest.approx(sc.partition(g, devices=k, method="dp").objective)


def test_pipedream_refuses_a_collapsed_graph():
    # many sources: no node is comparable with every other, the whole graph is one region
    nodes = [Node(i, {"accelerator": 1.0}) for i in range(6)]
    g = sc.Graph(nodes, [(0, 4), (1, 4), (2, 5), (3, 5)])
    with pytest.raises(InvalidGraphError, match="layer graphs"):
        pipedream(ThroughputProblem.from_graph(g, devices=2))


def test_scotch_with_gpart():
    require_gpart()
    rng = random.Random(4)
    g = random_inference_graph(rng, 30)
    problem = ThroughputProblem.from_graph(g, devices=3, cpus=1)
    plan = sc.partition(g, devices=3, cpus=1, method="scotch")
    assert plan.stats["backend"] == "gpart" and plan.method == "scotch"
    _rescored(g, plan, problem)
    assert plan.objective >= sc.partition(g, devices=3, cpus=1, method="ip", contiguous=False).objective - 1e-9
    assert scotch(problem).device_of() == plan.device_of()  # deterministic


def test_scotch_without_a_backend(monkeypatch):

    import stagecut.throughput.baselines as b

    monkeypatch.setattr(b, "find_gpart", lambda: None)
    hide_module(monkeypatch, "pymetis")
    import importlib.util

    real_find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pymetis" else real_find(name, *a))
    with pytest.raises(BackendUnavailableError, match="apt-get install -y scotch"):
        sc.partition(sc.Graph.chain([1.0, 2.0]), devices=2, method="scotch")


def test_cli_accepts_the_baselines(tmp_path):
    from stagecut.cli import main

    path = tmp_path / "g.json"
    path.write_text('{"maxFPGAs": 2, "maxCPUs": 0, "maxSizePerFPGA": 100, "nodes": ['
                    '{"id": 0, "supportedOnFpga": 1, "cpuLatency": 9, "fpgaLatency": 2, "size": 1},'
                    '{"id": 1, "supportedOnFpga": 1, "cpuLatency": 9, "fpgaLatency": 3, "size": 1}],'
                    '"edges": [{"sourceId": 0, "destId": 1, "cost": 0.5}]}')
    for method in ("local-search", "pipedream"):
        assert main(["partition", str(path), "--method", method, "--json"]) == 0
