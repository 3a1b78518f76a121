"""A training plan from a traced model (``plan_training`` on ``piper_from_trace``), run: its
stages and data-parallel degree (``trace_plan_pipeline``) as replicas of a pipeline on a gloo grid
(``runtime.pipeline_grid``), gradients averaged between the replicas; the loss and the
parameters after one SGD step match the unsplit model's."""

import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
pytest.importorskip("torch.distributed.pipelining")

import stagecut as sc
from frontends import gloo_pipeline
from stagecut.errors import InvalidArgumentError
from stagecut.frontends import runtime
from stagecut.frontends.torch import trace_torch
from stagecut.training import plan_training
from stagecut.training.io import piper_from_trace, trace_layers, trace_plan_pipeline
from stagecut.training.plan import PiperStage, TrainingPlan, stage_label


def two_block_plan():
    model, x = gloo_pipeline.grid_model("two_blocks")
    t = trace_torch(model, (x,), bandwidth=1e9, flops_per_s=1e8)
    fixed = 4 * sum(n.memory for n in t.graph.nodes)  # weights, gradients, 2 Adam states
    prob = piper_from_trace(t, samples=4, devices=4, memory=0.75 * fixed, batch=4)
    return t, prob, plan_training(prob)


def test_a_training_plan_of_a_trace_maps_to_pipeline_stages():
    t, prob, plan = two_block_plan()
    assert [(s.d, s.t) for s in plan.stages] == [(2, 1), (2, 1)]  # one stage does not fit: 2 x 2
    pipe_plan, d = trace_plan_pipeline(t, plan)
    assert d == 2
    layers = dict(trace_layers(t))
    stages = [list(s.nodes) for s in pipe_plan.stages]
    assert [sorted(s) for s in stages] == [sorted(layers["0"]), sorted(layers["1"])]
    assert sorted(v for s in stages for v in s) == sorted(t.order)
    split = {v: ("accelerator", i) for v, i in pipe_plan.assignment().items()}
    assert pipe_plan.objective == sc.evaluate(t.graph, split, devices=2).objective
    model, x = gloo_pipeline.grid_model("two_blocks")
    pipe = runtime.pipeline(model, (x,), split_policy=t.split_policy(pipe_plan))
    assert pipe.num_stages == 2


def test_a_training_trace_plan_keeps_each_backward_node_with_its_forward():
    model, x = gloo_pipeline.grid_model("two_blocks")
    t = trace_torch(model, (x,), bandwidth=1e9, flops_per_s=1e8, training=True)
    fixed = 4 * sum(n.memory for n in t.graph.nodes)
    plan = plan_training(piper_from_trace(t, samples=4, devices=4, memory=0.75 * fixed, batch=4))
    pipe_plan, d = trace_plan_pipeline(t, plan)
    assert d == 2 and len(pipe_plan.stages) == 2
    where = pipe_plan.assignment()
    assert set(where) == {str(n.id) for n in t.graph.nodes}
    assert all(where[v] == where[f"{v}_bwd"] for v in t.order)
    assert runtime.pipeline(model, (x,), split_policy=t.split_policy(pipe_plan)).num_stages == 2


def fake_plan(degrees, nodes=None):
    stages = tuple(PiperStage(index=i, device=stage_label(d, tt), nodes=(nodes or [(i,)] * len(degrees))[i], load=1.0,
                              d=d, t=tt, tmpcs={}) for i, (d, tt) in enumerate(degrees))
    return TrainingPlan(objective=1.0, status="feasible", method="piper-dp", stages=stages, devices=4, memory=1.0,
                        bandwidth=1.0, batch=4)


def test_plans_the_runtime_cannot_run_are_refused_naming_the_stages():
    t, _, _ = two_block_plan()
    with pytest.raises(InvalidArgumentError, match=r"same data-parallel degree.*0: \(1, 1\), 1: \(2, 1\)"):
        trace_plan_pipeline(t, fake_plan([(1, 1), (2, 1)]))
    with pytest.raises(InvalidArgumentError, match="t = 1"):
        trace_plan_pipeline(t, fake_plan([(1, 2), (1, 2)]))
    with pytest.raises(InvalidArgumentError, match="stage 1 names layer 7"):
        trace_plan_pipeline(t, fake_plan([(2, 1), (2, 1)], nodes=[(0,), (7,)]))
    with pytest.raises(InvalidArgumentError, match="no stages"):
        trace_plan_pipeline(t, TrainingPlan(objective=None, status="infeasible", method="piper-dp", devices=4,
                                          memory=1.0, bandwidth=1.0, batch=4))


def test_pipeline_grid_needs_a_world_of_the_right_size():
    with pytest.raises(InvalidArgumentError, match="init_process_group"):
        runtime.pipeline_grid(2, 2)
    with pytest.raises(InvalidArgumentError, match="replicas"):
        runtime.pipeline_grid(2, 0)


@pytest.mark.slow  # 4 spawned processes importing torch, on 2 cores
def test_plan_training_of_a_trace_runs_on_a_four_rank_grid(tmp_path):
    """2 stages x 2 data-parallel replicas on 4 gloo ranks: the plan ``plan_training`` picks for
    two equal blocks that do not fit on one device; and the tied LM cut in two (its tied weight
    on both stages: the copies' gradients all-reduced in the pipeline group, then averaged over
    the replicas)."""
    t, _, plan = two_block_plan()
    pipe_plan, d = trace_plan_pipeline(t, plan)
    stages = [list(s.nodes) for s in pipe_plan.stages]
    model, x = gloo_pipeline.grid_model("tied_lm")
    tl = trace_torch(model, (x,), bandwidth=1e9)
    order = list(tl.order)
    cases = [("two_blocks", stages, d), ("tied_lm", [order[:2], order[2:]], 2)]
    ranks = gloo_pipeline.run_grid(cases, 4, tmp_path)
    bad = [c for r in ranks for c in r if not c["ok"]]
    assert not bad, "\n".join(f"{c['error']}\n{c.get('trace', '')[-800:]}" for c in bad)
    assert all(len(r) == len(cases) for r in ranks)
    for case, got in zip(cases, ranks[0]):
        assert got["loss"] == pytest.approx(got["ref_loss"], rel=1e-5), case[0]
        assert not got["missing"] and got["value_err"] < 1e-5 and got["replica_err"] == 0.0, (case[0], got)
        assert got["averaged"] > 0
    assert [got["tied"] for got in ranks[0]] == [0, 1]
