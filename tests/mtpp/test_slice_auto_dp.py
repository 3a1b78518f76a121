"""``slice_graph(method="auto")`` tries the exact DP first on graphs with few ideals.

- a graph with at most ``AUTO_IDEALS`` ideals (and ``max_ideals``): the DP's plan, proven
  optimal (or the problem proven infeasible), ``stats["auto_method"] == "dp"``, no search run;
- past either cap, or when the DP does not end within its share of the time limit (half): the
  portfolio of searches, as before, with the time the DP left;
- the traced operator graphs: the DP's optimum, which the searches alone do not prove.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

import stagecut as sc
from helpers import record_runs
from stagecut._deadline import remaining
from stagecut.mtpp import slicegraph as slicegraph_module
from stagecut.mtpp.model import MtppProblem, evaluate
from stagecut.mtpp.restarts import PORTFOLIO as ALL

PORTFOLIO = tuple(m for m in ALL if m != "multilevel")  # (on these small graphs: too few units for it)
from stagecut.mtpp.slicegraph import AUTO_DP_SECONDS, AUTO_IDEALS, slice_graph

_OPGRAPHS = Path(__file__).resolve().parents[1] / "data" / "opgraphs"


@pytest.mark.parametrize("seed", range(6))
def test_a_graph_with_few_ideals_gets_the_dps_optimum_and_no_search(monkeypatch, seed):
    p = MtppProblem(sc.regal_graph(16, model=("erdos_renyi", "barabasi_albert")[seed % 2], seed=seed), devices=4)
    optimum = slice_graph(p, method="dp")
    seen = record_runs(monkeypatch)
    plan = slice_graph(p, method="auto", time_limit=30.0, restarts="auto")
    assert seen == []  # no search ran
    assert (plan.method, plan.status, plan.stats["auto_method"], plan.stats["found_by"]) == (
        "auto", "optimal", "dp", "dp")
    assert plan.objective == optimum.objective == plan.lower_bound
    assert evaluate(p, plan.stages).objective == plan.objective
    assert plan.seed is None and plan.stats["restarts"] == 0
    assert any("exact DP" in n and "no search ran" in n for n in plan.notes)


def test_past_the_ideals_cap_the_searches_run(monkeypatch):
    p = MtppProblem(sc.regal_graph(16, model="erdos_renyi", seed=0), devices=4)
    ideals = slice_graph(p, method="dp").stats["ideals"]
    assert 10 < ideals <= AUTO_IDEALS
    seen = record_runs(monkeypatch)
    monkeypatch.setattr(slicegraph_module, "AUTO_IDEALS", 10)
    exact: list[int] = []
    real = slicegraph_module._exact
    monkeypatch.setattr(slicegraph_module, "_exact", lambda *a: exact.append(1) or real(*a))
    plan = slice_graph(p, method="auto", decodes=200)
    assert exact == []  # (the ideals counted first: not even the DP's quick search ran)
    assert seen == list(PORTFOLIO)
    assert plan.stats["auto_method"] in PORTFOLIO
    seen.clear()
    monkeypatch.setattr(slicegraph_module, "AUTO_IDEALS", ideals)  # (exactly at the cap: the DP)
    assert slice_graph(p, method="auto", decodes=200).stats["auto_method"] == "dp" and seen == []


def test_max_ideals_caps_the_dp_of_auto_too(monkeypatch):
    p = MtppProblem(sc.regal_graph(16, model="barabasi_albert", seed=1), devices=4)
    seen = record_runs(monkeypatch)
    plan = slice_graph(p, method="auto", decodes=200, max_ideals=10)
    assert seen == list(PORTFOLIO) and plan.stats["auto_method"] in PORTFOLIO


def test_the_dp_gets_half_the_time_limit_and_a_dp_cut_short_leaves_it_to_the_searches(monkeypatch):
    p = MtppProblem(sc.regal_graph(16, model="erdos_renyi", seed=2), devices=4)
    given: list[float | None] = []
    real = slicegraph_module._exact

    ended: list[float] = []

    def short(problem, units, opts, fold):
        given.append(remaining())
        time.sleep(1.0)  # (the searches get what the DP left: at most 39 s)
        found = real(problem, units, opts, fold)
        ended.append(time.perf_counter())
        return slicegraph_module._Found(objective=found.objective, blocks=found.blocks, order=[], history=[],
                                        timed_out=True)  # (as if the time limit stopped it: not proven)

    monkeypatch.setattr(slicegraph_module, "_exact", short)
    left: list[float | None] = []
    run = slicegraph_module._run

    starts: list[float] = []

    def spy(problem, units, opts, *args):
        left.append(remaining())
        starts.append(args[-1])  # (the clock the run measures its time by)
        return run(problem, units, opts, *args)

    monkeypatch.setattr(slicegraph_module, "_run", spy)
    plan = slice_graph(p, method="auto", time_limit=40.0, decodes=200)
    assert len(given) == 1 and given[0] is not None and 15.0 < given[0] <= 20.0  # half of the 40 s
    # the timed-out DP's partition is not the answer: the searches ran, in the time it left
    assert len(left) == 4 and left[0] is not None and left[0] <= 39.0
    assert min(starts) >= ended[0]  # (the DP's second is not counted against the searches)
    assert plan.stats["auto_method"] in PORTFOLIO and plan.status in ("optimal", "feasible")


def test_a_problem_the_dp_proves_infeasible_is_infeasible(monkeypatch):
    g = sc.Graph.chain([1.0, 1.0, 1.0], comm=0.5, memory=[4.0, 4.0, 4.0])
    seen = record_runs(monkeypatch)
    plan = slice_graph(g, devices=2, method="auto", memory=5.0, time_limit=10.0)
    assert (plan.status, plan.objective, plan.stats["auto_method"], seen) == ("infeasible", None, "dp", [])


@pytest.mark.parametrize("name, memory", [("resnet50_training.json", False), ("gpt12_training.json", True)])
def test_a_traced_operator_graph_is_solved_exactly(monkeypatch, name, memory):
    g = sc.read_workload(_OPGRAPHS / name)
    extra = {"memory": g.defaults["memory"]} if memory else {}
    optimum = slice_graph(g, devices=8, method="dp", colocate=False, **extra)
    seen = record_runs(monkeypatch)
    plan = slice_graph(g, devices=8, method="auto", colocate=False, **extra)
    assert seen == [] and plan.status == "optimal" and plan.objective == optimum.objective


def test_a_dp_stopped_by_its_time_still_offers_its_partition(monkeypatch):
    # the searches find nothing here: the timed-out DP's partition is the answer, not proven
    p = MtppProblem(sc.regal_graph(16, model="barabasi_albert", seed=3), devices=4)
    optimum = slice_graph(p, method="dp")
    real = slicegraph_module._exact

    def short(problem, units, opts, fold):
        found = real(problem, units, opts, fold)
        return slicegraph_module._Found(objective=found.objective, blocks=found.blocks, order=[], history=[],
                                        timed_out=True)

    monkeypatch.setattr(slicegraph_module, "_exact", short)
    monkeypatch.setattr(slicegraph_module, "_search", lambda *a: slicegraph_module._Found(
        objective=math.inf, blocks=[], order=[], history=[], timed_out=True))
    plan = slice_graph(p, method="auto", time_limit=20.0, decodes=50)
    assert plan.objective == optimum.objective and plan.stats["auto_method"] == "dp"
    assert plan.status in ("time_limit", "optimal") and plan.method == "auto"
    assert any("the exact DP did not finish" in n for n in plan.notes)


def test_with_no_time_limit_the_dp_gets_its_own_budget(monkeypatch):
    p = MtppProblem(sc.regal_graph(16, model="erdos_renyi", seed=4), devices=4)
    given: list[float | None] = []
    real = slicegraph_module._exact

    def spy(problem, units, opts, fold):
        given.append(remaining())
        return real(problem, units, opts, fold)

    monkeypatch.setattr(slicegraph_module, "_exact", spy)
    assert slice_graph(p, method="auto").stats["auto_method"] == "dp"
    assert len(given) == 1 and given[0] is not None and 25.0 < given[0] <= AUTO_DP_SECONDS == 30.0
