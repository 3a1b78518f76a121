"""The training planner keeps the result protocol (stagecut.results): JSON round trips, the
evaluator reproduces the objective with the plan's own settings, infeasible is objective None,
argument errors are InvalidArgumentError, old spellings still work with a DeprecationWarning.
Also hand-computed stage costs (no ../shared needed)."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stagecut import training as sp
from stagecut.errors import InvalidArgumentError, InvalidGraphError, SolverError
from stagecut.results import Result, Stage

from .piper_cases import close, problems


def _same_table(a: sp.TrainingPlan, b: sp.TrainingPlan) -> bool:
    if a.tps_table is None or b.tps_table is None:
        return a.tps_table is b.tps_table
    return a.tps_table.shape == b.tps_table.shape and bool(np.array_equal(a.tps_table, b.tps_table))


def _round_trips(plan: sp.TrainingPlan) -> None:
    assert sp.TrainingPlan.from_json(plan.to_json()) == plan
    assert sp.TrainingPlan.from_json(plan.dumps()) == plan  # JSON text (inf as "inf")
    back = sp.TrainingPlan.from_json(json.loads(json.dumps(plan.to_json(include_table=True))))
    assert back == plan and _same_table(back, plan)
    assert "tps_table" not in plan.to_json()  # only when asked
    assert sp.TrainingPlan.from_json(plan.to_json()).tps_table is None  # not part of equality, by design
    assert back.assignment() == plan.assignment()
    assert all(type(s) is sp.PiperStage for s in back.stages)


def _chain(**kw):
    base = dict(devices=4, memory=10.0, bandwidth=1.0, batch=4, comm=1.0, params=2.0, mem_a=1.0, mem_b=1.0)
    base.update(kw)
    return sp.chain_problem([3.0, 1.0, 2.0, 2.0], **base)


# ------------------------------------------------------------------------------ protocol
def test_plan_is_a_result_with_typed_stages():
    prob = _chain()
    plan = sp.plan_training(prob)
    assert isinstance(plan, Result) and all(isinstance(s, Stage) for s in plan.stages)
    assert plan.method == "piper-dp" and plan.status == "feasible" and plan.lower_bound is None
    assert plan.stats["ideals"] > 0 and plan.stats["pairs"] > 0 and plan.runtime_s >= 0
    assert [s.index for s in plan.stages] == list(range(len(plan.stages)))
    assert plan.assignment() == {v: s.index for s in plan.stages for v in s.nodes}
    for s in plan.stages:
        assert s.device == f"d={s.d},t={s.t}" and s.tps == s.load and s.devices == s.d * s.t
        assert set(s.parts) == {"compute", "comm", "sync", "allreduce"}
        assert sum(s.parts.values()) == pytest.approx(s.load, rel=1e-12)
    assert plan.objective == max(s.load for s in plan.stages)
    exact = sp.plan_training(prob, knapsack="exact")
    assert exact.status == "optimal" and exact.lower_bound == exact.objective and exact.gap == 0.0
    text = plan.summary() + "\n" + plan.table()
    for word in ("objective", "status", "piper-dp", "settings", "allreduce", "d=1,t=1"):
        assert word in text
    assert repr(plan).startswith("TrainingPlan(objective=")


@pytest.mark.parametrize("kw", [
    {},
    {"knapsack": "exact"},
    {"exact_batch": True},
    {"devices": 3, "batch": 2, "memory": 6.0, "bandwidth": 2.5},
    {"server_size": 2, "intra_bandwidth": 8.0},
    {"memory": 1.5},  # infeasible
])
def test_json_round_trip_plan_training(kw):
    plan = sp.plan_training(_chain(), **kw)
    _round_trips(plan)
    if plan.status == "infeasible":
        assert plan.objective is None and plan.stages == () and plan.to_json()["objective"] is None
        assert math.isinf(plan.dp_objective) and np.isinf(plan.tps_table).all()


def test_json_round_trip_baselines():
    res = sp.plan_baselines(_chain(), devices=3, batch=2)
    assert set(res) == {"piper", "no-dp", "no-tp", "no-ar", "equi", "equi-no-tp"}
    for name, plan in res.items():
        _round_trips(plan)
        assert plan.devices == 3 and plan.batch == 2, name
    assert res["equi"].method == "equi" and res["equi"].tps_table is None and res["equi"].dp_objective is None
    assert res["equi-no-tp"].method == "equi-no-tp"
    infeasible = sp.plan_equi(_chain(), memory=1.5)
    assert infeasible.status == "infeasible" and infeasible.objective is None
    _round_trips(infeasible)


def _two_nodes(a, b):
    n0 = sp.PiperNode(a, {1: (sp.TMPC("vanilla", 1.0, 0.0, 0.0, 0.0, {}, {b: 0.0}),)})
    n1 = sp.PiperNode(b, {1: (sp.TMPC("vanilla", 1.0, 0.0, 0.0, 0.0, {a: 0.0}, {}),)})
    return sp.PiperProblem((n0, n1), (sp.PiperEdge(a, b, 1.0),), devices=2, memory=1.0, bandwidth=1.0, batch=1)


@pytest.mark.parametrize("ids", [("x", "y"), ((0, 1), (0, 2)), (10, 11), ("7", "8"), ("null", '"q"')])
def test_round_trip_with_other_node_ids(ids):
    plan = sp.plan_training(_two_nodes(*ids))
    _round_trips(plan)
    assert set(plan.assignment()) == set(ids)


def test_inconsistent_plan_is_refused():
    with pytest.raises(InvalidGraphError, match="infeasible"):
        sp.TrainingPlan(objective=None, status="feasible", method="x", devices=1, memory=1.0, bandwidth=1.0,
                        batch=1)
    doc = sp.plan_training(_chain()).to_json(include_table=True)
    doc["tps_table"] = [["x"]]
    with pytest.raises(InvalidGraphError, match="tps_table"):
        sp.TrainingPlan.from_json(doc)


# ------------------------------------------------------------------------------ re-scoring
def test_evaluate_plan_uses_its_settings():
    """The README bug: a plan solved with settings other than the problem's re-scores to its objective."""
    prob = _chain()
    plan = sp.plan_training(prob, devices=3, memory=7.0, bandwidth=3.0, batch=2)
    ev = sp.evaluate_training(prob, plan)
    assert ev.feasible and ev.tps == plan.objective and ev.objective == plan.objective
    assert ev.stages == plan.stages
    # the stages alone are scored with the problem's settings (bandwidth 1.0, batch 4): another value
    assert sp.evaluate_training(prob, plan.stages).tps != plan.objective
    # ... unless the settings are given
    assert sp.evaluate_training(prob, plan.stages, bandwidth=3.0, batch=2).tps == plan.objective
    # explicit settings win over the plan's
    assert sp.evaluate_training(prob, plan, bandwidth=1.0).tps != plan.objective


def test_evaluate_plan_uses_its_network_and_batch_mode():
    prob = _chain()
    plan = sp.plan_training(prob, server_size=2, intra_bandwidth=8.0, exact_batch=True)
    ev = sp.evaluate_training(prob, plan)
    assert ev.tps == plan.objective and ev.batch == prob.batch
    with pytest.raises(InvalidGraphError, match="at least one stage"):
        sp.evaluate_training(prob, sp.plan_training(prob, memory=1.5))


SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(problems(max_opts=2, max_nodes=4), st.data())
def test_rescore_with_other_settings(prob, data):
    kw = {"devices": data.draw(st.integers(1, 5)), "memory": data.draw(st.sampled_from([8.0, 20.0, 60.0])),
          "bandwidth": data.draw(st.sampled_from([0.5, 2.0])), "batch": data.draw(st.sampled_from([1, 2, 4])),
          "exact_batch": data.draw(st.booleans())}
    if prob.server_size is None and data.draw(st.booleans()):
        kw.update(server_size=2, intra_bandwidth=5.0)
    plan = sp.plan_training(prob, **kw)
    _round_trips(plan)
    if plan.feasible:
        assert sp.evaluate_training(prob, plan).tps == plan.objective
    equi = sp.plan_equi(prob, **{k: v for k, v in kw.items() if k != "exact_batch"})
    _round_trips(equi)
    if equi.feasible:
        assert sp.evaluate_training(prob, equi).tps == equi.objective


# ------------------------------------------------------------------------------ hand-computed costs
def test_stage_cost_by_hand():
    # node 1 of a 3-chain alone: edges 0->1 and 1->2 cross (comm 1 each, sync 0); d = 2, N = 4
    prob = _chain()
    c = sp.stage_cost(prob, [1], d=2, t=1, tmpcs={1: "vanilla"}, y=2)
    # compute 1 / 2; comm 2 * (1 + 1) / 2 / B = 2; all-reduce 4 * (1/2) * 2 / 4 / B = 1
    assert c.parts == {"compute": 0.5, "comm": 2.0, "sync": 0.0, "allreduce": 1.0}
    assert c.tps == 3.5 and c.memory == 1.0 * 2 + 1.0


def test_memory_counts_the_microbatches_in_flight():
    # memory a * ceil(s / d) + b, s = the degrees of this and the later stages: stage 0 (d = 2)
    # holds ceil(3 / 2) = 2 microbatches, stage 1 (d = 1) holds 1
    prob = sp.chain_problem([1.0, 1.0], devices=3, memory=100.0, bandwidth=1.0, batch=4, mem_a=10.0, mem_b=1.0)
    ev = sp.evaluate_training(prob, [((0,), 2, 1, {0: "vanilla"}), ((1,), 1, 1, {1: "vanilla"})])
    assert [s.memory for s in ev.stages] == [21.0, 11.0]
    tight = prob.replace(memory=20.0)  # stage 0 needs 21
    assert not sp.evaluate_training(tight, ev.stages).feasible
    # and the DP agrees: every plan needs over 20 bytes somewhere (one stage: 2 * 11)
    assert sp.plan_training(tight, knapsack="exact").objective is None
    plan = sp.plan_training(prob.replace(memory=21.0), knapsack="exact")
    assert max(s.memory for s in plan.stages) == 21.0
    assert sp.evaluate_training(prob, plan).tps == plan.objective


def test_recompute_choice_by_hand():
    # vanilla: time 1, memory 4 y; recompute: time 1.5, memory y; 8 parameter bytes make d = 2 cost
    # 4 (1/2) 8 / 2 = 8 per node. Two stages d = 1 on N = 2: the first holds y = 2 microbatches
    # (8 bytes vanilla, over 5), the second y = 1 (4 bytes); one stage (d = 1): 2.5
    fw: dict = {}
    node = lambda i, fw, bw: sp.PiperNode(i, {1: (sp.TMPC("vanilla", 1.0, 8.0, 4.0, 0.0, fw, bw),
                                                 sp.TMPC("activation recomp", 1.5, 8.0, 1.0, 0.0, fw, bw))})
    prob = sp.PiperProblem((node(0, fw, {1: 0.0}), node(1, {0: 0.0}, fw)), (sp.PiperEdge(0, 1, 0.0),),
                           devices=2, memory=5.0, bandwidth=1.0, batch=2)
    plan = sp.plan_training(prob, knapsack="exact")
    assert [(s.nodes, s.tmpcs) for s in plan.stages] == [((0,), {0: "activation recomp"}), ((1,), {1: "vanilla"})]
    assert plan.objective == 1.5 and [s.memory for s in plan.stages] == [2.0, 4.0]
    assert [s.recomputed for s in plan.stages] == [1, 0]
    assert sp.plan_training(prob).objective == 1.5  # the greedy finds it too


# ------------------------------------------------------------------------------ errors and old names
@pytest.mark.parametrize("kw, words", [
    ({"knapsack": "magic"}, "knapsack"),
    ({"exact_batch": "yes"}, "exact_batch"),
    ({"recompute": 1}, "recompute"),
    ({"exact_max_nodes": -1}, "exact_max_nodes"),
    ({"max_ideals": 0}, "max_ideals"),
    ({"devices": 0}, "devices"),
    ({"devices": 2.5}, "devices"),
    ({"batch": 0}, "batch"),
    ({"memory": -1.0}, "memory"),
    ({"bandwidth": float("nan")}, "bandwidth"),
    ({"server_size": 2}, "go together"),
    ({"intra_bandwidth": 0.0}, "intra_bandwidth"),
])
def test_bad_arguments(kw, words):
    with pytest.raises(InvalidArgumentError, match=words) as info:
        sp.plan_training(_chain(), **kw)
    assert not isinstance(info.value, InvalidGraphError)


def test_bad_arguments_elsewhere():
    with pytest.raises(InvalidArgumentError, match="separate"):
        sp.plan_equi(_chain(), separate="no")
    with pytest.raises(InvalidArgumentError, match="memory"):
        sp.evaluate_training(_chain(), [((0, 1, 2, 3), 1, 1, dict.fromkeys(range(4), "vanilla"))], memory=0)
    with pytest.raises(InvalidArgumentError, match="problem"):
        sp.plan_training({"nodes": []})
    with pytest.raises(InvalidArgumentError, match="table"):
        sp.plan_equi(_chain()).tps(1)
    with pytest.raises(TypeError):
        sp.plan_training(_chain(), 2)  # settings are keyword-only


def test_dp_evaluator_disagreement_is_an_internal_error(monkeypatch):
    import stagecut.training.solve as solve

    real = solve.evaluate_training

    def off(*args, **kw):
        ev = real(*args, **kw)
        return type(ev)(tps=ev.tps * 1.01, feasible=True, stages=ev.stages, devices=ev.devices, batch=ev.batch)

    monkeypatch.setattr(solve, "evaluate_training", off)
    with pytest.raises(SolverError, match="please report"):
        sp.plan_training(_chain())


def _timeless(plan: sp.TrainingPlan) -> sp.TrainingPlan:
    return dataclasses.replace(plan, runtime_s=0.0)


def test_old_spellings_warn():
    prob = _chain()
    new = sp.plan_training(prob, batch=2)
    with pytest.warns(DeprecationWarning) as rec:
        old = sp.plan_training(prob=prob, max_batch=2)
    assert sorted(str(w.message).split("(")[1].split("=")[0] for w in rec) == ["max_batch", "prob"]
    assert _timeless(old) == _timeless(new)
    with pytest.warns(DeprecationWarning, match="max_batch"):
        assert _timeless(sp.plan_equi(prob, max_batch=2)) == _timeless(sp.plan_equi(prob, batch=2))
    with pytest.warns(DeprecationWarning):
        old_all = sp.plan_baselines(prob, max_batch=2)
    assert {k: _timeless(p) for k, p in old_all.items()} == {
        k: _timeless(p) for k, p in sp.plan_baselines(prob, batch=2).items()}
    with pytest.raises(InvalidArgumentError, match="only"):
        sp.plan_training(prob, batch=2, max_batch=2)
    for old_name, expected in (("solver", new.method), ("runtime", new.runtime_s),
                               ("num_ideals", new.stats["ideals"]), ("pairs_visited", new.stats["pairs"])):
        with pytest.warns(DeprecationWarning, match=old_name):
            assert getattr(new, old_name) == expected
    with pytest.warns(DeprecationWarning, match="assignment"):
        assert new.node_stage() == new.assignment()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new.to_json(include_table=True)
        new.summary()


def test_close_helper_treats_none_as_inf():
    assert close(None, math.inf) and not close(None, 1.0)
