"""``slice_graph(..., method="multilevel")``: coarsen by acyclic contractions, plan the coarsest
graph, refine on the way back.

- every level is a clustering that nests in the next, holds whole forced groups, keeps the
  quotient acyclic, the clusters' work under the cap and, under a hard memory limit, their
  parameters within a device;
- the plan is valid, the evaluator's, never below the exact DP's optimum, deterministic per seed;
- on sparse random graphs it is cheaper than each search it joins in ``method="auto"``, which runs
  it only on graphs of more than ``MIN_UNITS`` units and never inside itself;
- a time limit stops it with the finest level's plan (valid), or no plan; Ctrl-C is not swallowed.
"""

from __future__ import annotations

import json
import math
import types

import networkx as nx
import pytest

import stagecut as sc
from helpers import ctrl_c_after, record_runs
from stagecut._deadline import DeadlineReached
from stagecut.mtpp import multilevel
from stagecut.mtpp.model import MtppProblem, evaluate, forced_groups
from stagecut.mtpp.slicegraph import slice_graph


def _paired(n: int, seed: int) -> sc.Graph:
    """A REGAL graph in which each node with an even position shares a colocation class with its
    first consumer (forced groups of two and more)."""
    g = sc.regal_graph(n, model="erdos_renyi", seed=seed)
    cls = list(range(n))
    for u in range(0, n, 2):
        if g.succ[u]:
            cls[min(g.succ[u])] = cls[u]
    return g.map_nodes(lambda nd: sc.Node(nd.id, nd.compute, nd.memory, nd.comm, colocation=cls[g.index[nd.id]]))


def _check_levels(p: MtppProblem, levels: list[list[int]]) -> None:
    g = p.graph
    n = len(g.nodes)
    assert levels[0] == forced_groups(p)
    work = [p.work(i) for i in range(n)]
    cap = multilevel.CAP * sum(work) / multilevel.target(p.devices)
    room = p.memory - p.reserved_memory if p.bandwidth is None else math.inf
    for fine, coarse in zip(levels, levels[1:]):
        assert len(set(coarse)) < len(set(fine))
        assert all(coarse[i] == coarse[j] for i in range(n) for j in range(n) if fine[i] == fine[j])  # (nested)
    for label in levels:
        q: nx.DiGraph[int] = nx.DiGraph()
        q.add_nodes_from(set(label))
        q.add_edges_from((label[u], label[v]) for u in range(n) for v in g.succ[u] if label[u] != label[v])
        assert nx.is_directed_acyclic_graph(q)
        names = {i for i in range(n) if label[i] == i}
        assert all(label[i] in names for i in range(n))  # (each cluster labelled by a member)
    for c in set(levels[-1]):
        members = [i for i in range(n) if levels[-1][i] == c]
        if len({levels[0][i] for i in members}) > 1:  # (a merge happened: the cap and the memory hold)
            assert sum(work[i] for i in members) <= cap * (1 + 1e-12)
            assert sum(g.nodes[i].memory for i in members) <= room


@pytest.mark.parametrize("graph, k", [(sc.regal_graph(300, model="erdos_renyi", seed=0), 8),
                                      (sc.regal_graph(300, model="barabasi_albert", seed=1), 16),
                                      (sc.regal_graph(200, model="random_geometric", seed=2), 4),
                                      (_paired(240, 3), 8)])
def test_the_levels_nest_keep_groups_and_their_quotients_stay_acyclic(graph, k):
    p = MtppProblem(graph, devices=k)
    levels = multilevel.coarsen(p, seed=k)
    assert len(levels) >= 3 and len(set(levels[-1])) <= len(graph.nodes) // 3
    _check_levels(p, levels)
    assert multilevel.coarsen(p, seed=k) == levels  # (deterministic)
    assert any(multilevel.coarsen(p, seed=s) != levels for s in range(k + 1, k + 6))  # (seeds jitter the weights)


def test_under_a_hard_memory_limit_every_cluster_fits_one_device():
    base = sc.regal_graph(300, model="erdos_renyi", seed=4)
    room = 1000.0
    heavy = {}  # (six producers and their first consumers: 0.6 of a device each, a heavy tensor between)
    for u in [u for u in range(300) if base.succ[u]][::50]:
        heavy[u] = heavy[min(base.succ[u])] = 0.6 * room
    g = base.map_nodes(lambda nd: sc.Node(nd.id, nd.compute, heavy.get(base.index[nd.id], 1.0),
                                          nd.comm * (40 if base.index[nd.id] in heavy else 1)))
    total = sum(nd.memory for nd in g.nodes)
    assert total < 8 * room
    free = multilevel.coarsen(MtppProblem(g, devices=8))
    biggest = max(sum(nd.memory for i, nd in enumerate(g.nodes) if free[-1][i] == c) for c in set(free[-1]))
    assert biggest > room  # (without the limit a cluster would not fit: the check is exercised)
    p = MtppProblem(g, devices=8, memory=room + 10.0, reserved_memory=10.0)
    _check_levels(p, multilevel.coarsen(p))
    plan = slice_graph(p, method="multilevel")
    assert plan.objective is not None and evaluate(p, plan.stages).objective == plan.objective
    assert all(sum(g.node(v).memory for v in s.nodes) <= room for s in plan.stages)


@pytest.mark.parametrize("seed", range(12))
def test_the_plan_is_valid_the_evaluators_and_never_below_the_optimum(seed, monkeypatch):
    monkeypatch.setattr(multilevel, "target", lambda k: 8)  # (graphs the DP solves, coarsened to 8 clusters)
    g = sc.regal_graph(18 + seed % 5, model=("erdos_renyi", "barabasi_albert", "watts_strogatz")[seed % 3], seed=seed)
    k = (2, 3, 4)[seed % 3]
    memory = None if seed % 2 else sum(nd.memory for nd in g.nodes) / (k - 0.5)
    p = MtppProblem(g, devices=k, memory=memory)
    assert len(multilevel.coarsen(p, seed)) >= 2  # (the graph is coarsened: more nodes than the target)
    plan = slice_graph(p, method="multilevel", seed=seed, improve=False)
    opt = slice_graph(p, method="dp")
    assert plan.objective is not None and opt.objective is not None
    assert evaluate(p, [list(s.nodes) for s in plan.stages]).objective == plan.objective
    assert plan.objective >= opt.objective * (1 - 1e-9)
    assert plan.method == "multilevel" and plan.seed == seed and plan.stats["levels"] >= 2
    if seed == 2:  # (the memory limit leaves the coarsest level without a plan: a finer level is planned)
        assert plan.stats["planned"] > plan.stats["coarsest"]
    again = slice_graph(p, method="multilevel", seed=seed, improve=False)
    assert [s.nodes for s in again.stages] == [s.nodes for s in plan.stages]


@pytest.mark.parametrize("model, seed", [("erdos_renyi", 0), ("barabasi_albert", 1)])
def test_on_sparse_random_graphs_it_is_cheaper_than_each_search_it_joins(model, seed):
    p = MtppProblem(sc.regal_graph(300, model=model, seed=seed), devices=8)
    ml = slice_graph(p, method="multilevel", improve=False)
    for other in ("brkga", "mla-weighted", "spectral-order", "mla"):
        plan = slice_graph(p, method=other)  # (with its re-splits)
        assert ml.objective < 0.98 * plan.objective, other


def test_auto_runs_it_on_graphs_of_many_units_and_never_inside_itself(monkeypatch):
    big = MtppProblem(sc.regal_graph(multilevel.MIN_UNITS + 50, model="erdos_renyi", seed=5), devices=8)
    small = MtppProblem(sc.regal_graph(multilevel.MIN_UNITS, model="erdos_renyi", seed=5), devices=8)
    seen = record_runs(monkeypatch)
    plan = slice_graph(big, method="auto", decodes=200)
    assert seen.count("multilevel") == 1 and seen[:2] == ["spectral-order", "multilevel"]
    # (the coarsest level's auto ran its own searches in between, but not the multilevel one)
    assert len(seen) > 5 and plan.stats["auto_method"] in seen
    assert plan.objective <= slice_graph(big, method="multilevel", seed=1).objective
    seen.clear()
    slice_graph(small, method="auto", decodes=200)
    assert "multilevel" not in seen and seen == ["spectral-order", "mla-weighted", "brkga", "mla"]
    assert not multilevel.nested()
    seen.clear()
    monkeypatch.setattr(multilevel, "MIN_UNITS", 10)  # (the coarsest level has more: only the guard stops it)
    entered: list[bool] = []
    real = multilevel.search

    def spy(problem, seed, plan):
        entered.append(multilevel.nested())
        assert not multilevel.nested(), "the multilevel search ran inside itself"
        return real(problem, seed, plan)

    monkeypatch.setattr(multilevel, "search", spy)
    slice_graph(small, method="auto", decodes=200)
    assert seen.count("multilevel") == 1 and entered == [False] and not multilevel.nested()


def test_a_time_limit_after_the_coarsest_level_gives_its_plan(monkeypatch):
    p = MtppProblem(sc.regal_graph(300, model="barabasi_albert", seed=6), devices=8)
    full = slice_graph(p, method="multilevel", improve=False)
    levels = multilevel.coarsen(p, 0)
    monkeypatch.setattr(multilevel, "expired", lambda: True)
    assert multilevel.coarsen(p, 0) == [forced_groups(p)]  # (past the deadline no pass runs)
    monkeypatch.setattr(multilevel, "coarsen", lambda problem, seed: levels)  # (the time ran out after it)
    cut = slice_graph(p, method="multilevel", improve=False)
    assert cut.status == "time_limit" and cut.objective is not None and len(cut.history) == 1
    assert evaluate(p, [list(s.nodes) for s in cut.stages]).objective == cut.objective
    assert cut.objective > full.objective  # (the refinement was skipped: coarser, costlier)


def test_a_time_limit_before_the_coarsest_plan_gives_none():
    p = MtppProblem(sc.regal_graph(300, model="barabasi_albert", seed=6), devices=8)

    def out_of_time(*args, **kwargs):
        raise DeadlineReached("time limit reached")

    found = multilevel.search(p, 0, out_of_time)
    assert found["time_limit_reached"] and found["blocks"] == [] and found["objective"] == math.inf


def _one_block_coarse(p: MtppProblem, calls: list[tuple[bool, bool]], whole=None):
    """A ``plan`` for :func:`multilevel.search` that gives the whole graph as one block at every
    coarse level (as on graphs whose tensors cost more than their work), and plans the graph
    itself by ``slice_graph`` (or ``whole``)."""
    def plan(problem, **kw):
        calls.append((problem is p, multilevel.nested()))
        if problem is not p:
            one = types.SimpleNamespace(nodes=tuple(nd.id for nd in p.graph.nodes))
            return types.SimpleNamespace(stages=(one,), objective=evaluate(p, [one.nodes]).objective,
                                         status="feasible")
        return (whole or slice_graph)(problem, **kw)
    return plan


def test_a_plan_no_split_pays_for_gets_the_graph_planned_itself():
    p = MtppProblem(sc.regal_graph(300, model="erdos_renyi", seed=6), devices=8)
    one = evaluate(p, [[nd.id for nd in p.graph.nodes]]).objective
    # (the cost of one device is the evaluator's, overflow included)
    params = sum(nd.memory for nd in p.graph.nodes)
    soft = MtppProblem(p.graph, devices=8, memory=params / 3, bandwidth=params / 100)
    whole = [[nd.id for nd in p.graph.nodes]]
    assert multilevel._one_device(soft) == pytest.approx(evaluate(soft, whole).objective)
    assert multilevel._one_device(soft) == pytest.approx(one + 200 / 3)  # (two thirds of the parameters over)
    assert multilevel._one_device(p) == pytest.approx(one)
    calls: list[tuple[bool, bool]] = []
    out = multilevel.search(p, 0, _one_block_coarse(p, calls))
    assert calls == [(False, True), (True, True)]  # (the coarsest level, then the graph; both nested)
    assert out["whole"] and out["planned"] == len(p.graph.nodes) and out["objective"] < 0.5 * one
    assert out["history"][0] == pytest.approx(one) and out["history"][-1] == out["objective"]
    assert len(out["history"]) == out["levels"] + 1  # (a cost per level refined, then the graph's own plan)
    blocks = [[p.graph.nodes[i].id for i in b] for b in out["blocks"]]
    assert evaluate(p, blocks).objective == pytest.approx(out["objective"], rel=1e-9)
    # a plan that a split pays for: the graph is not planned again
    calls.clear()

    def real(problem, **kw):
        calls.append((problem is p, multilevel.nested()))
        return slice_graph(problem, **kw)

    out = multilevel.search(p, 0, real)
    assert calls == [(False, True)] and "whole" not in out and out["objective"] < 0.5 * one
    # the time limit reached while the graph is planned: the refined plan stays
    calls.clear()

    def out_of_time(*args, **kwargs):
        raise DeadlineReached("time limit reached")

    out = multilevel.search(p, 0, _one_block_coarse(p, calls, whole=out_of_time))
    assert out["time_limit_reached"] and out["objective"] == pytest.approx(one) and len(out["blocks"]) == 1
    assert "whole" not in out
    # the graph's own plan no cheaper: the refined plan stays, and the graph's is not reported as kept
    calls.clear()
    costlier = _one_block_coarse(p, [])
    out = multilevel.search(p, 0, _one_block_coarse(p, calls, whole=lambda problem, **kw: costlier(p.graph, **kw)))
    assert calls == [(False, True), (True, True)] and "whole" not in out
    assert len(out["history"]) == out["levels"] and out["objective"] == pytest.approx(one)  # (one entry a level)
    # no time left once refined: the graph is still planned within a positive limit (never 0 s)
    calls.clear()
    limits: list[float] = []

    def timed(problem, **kw):
        limits.append(kw["time_limit"])
        return slice_graph(problem, **{**kw, "time_limit": None})

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(multilevel, "remaining", lambda: 0.0)
        out = multilevel.search(p, 0, _one_block_coarse(p, calls, whole=timed))
    assert limits[-1] == pytest.approx(1e-3) and out["whole"]
    # inside "auto" (whose other searches plan the graph anyway) the graph is not planned again
    calls.clear()
    with multilevel.in_portfolio():
        out = multilevel.search(p, 0, _one_block_coarse(p, calls))
    assert calls == [(False, True)] and "whole" not in out
    # under a hard memory limit the whole graph breaks, one device costs inf: never within 1% of it
    hard = MtppProblem(p.graph, devices=8, memory=sum(nd.memory for nd in p.graph.nodes) / 3)
    assert multilevel._one_device(hard) == math.inf


def test_auto_runs_the_multilevel_search_as_part_of_its_portfolio(monkeypatch):
    p = MtppProblem(sc.regal_graph(multilevel.MIN_UNITS + 50, model="erdos_renyi", seed=5), devices=8)
    seen: list[bool] = []
    real = multilevel.search

    def spy(problem, seed, plan):
        seen.append(multilevel._IN_PORTFOLIO.get())
        return real(problem, seed, plan)

    monkeypatch.setattr(multilevel, "search", spy)
    slice_graph(p, method="auto", decodes=200)
    slice_graph(p, method="multilevel")
    assert seen == [True, False] and not multilevel._IN_PORTFOLIO.get()


@pytest.mark.slow
def test_a_transformer_training_graph_gets_a_split(shared):
    """A BERT training operator graph with colocation ignored: its coarse levels have no split that
    pays (found with seed 1); the plan is the graph's own, at most 0.6 of one device."""
    g = sc.read_workload(shared / "throughput-inputs" / "OperatorGraphs" / "bert_l-3_training.json")
    p = MtppProblem(g, devices=8, colocate=False)
    one = evaluate(p, [[nd.id for nd in g.nodes]]).objective
    plan = slice_graph(p, method="multilevel", seed=1)
    assert plan.objective < 0.6 * one and plan.stats["planned"] == len(set(forced_groups(p)))
    assert any("the graph itself was planned too" in note for note in plan.notes)


def test_ctrl_c_is_not_swallowed():
    g = sc.regal_graph(2000, model="barabasi_albert", seed=0)
    with ctrl_c_after(0.5), pytest.raises(KeyboardInterrupt):
        slice_graph(g, devices=8, method="multilevel")


def test_cli(capsys):
    from stagecut.cli.main import main

    capsys.readouterr()
    assert main(["slice", "regal:200", "-k", "8", "--method", "multilevel", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "multilevel"
    assert out["objective"] == slice_graph(sc.regal_graph(200), devices=8, method="multilevel").objective
    for flag in (["--decodes", "5"], ["--population", "5"]):
        assert main(["slice", "regal:200", "-k", "8", "--method", "multilevel", *flag]) == 2
        err = capsys.readouterr().err
        assert flag[0] in err and len(err.strip().splitlines()) == 1
