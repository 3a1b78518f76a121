"""A tied weight replicated across stages (its users on several stages, each holding a copy):
after backward, ``runtime.allreduce_tied`` gives every copy the sum of the copies' gradients, so
the copies stay equal after an optimizer step and equal the unsplit model's weight. In one
process (the stage modules of one pipe) and on 2 gloo ranks (GPT-2 from a random Hugging Face
config at k = 2 and 4, the small tied LM)."""

import copy

import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
pytest.importorskip("torch.distributed.pipelining")

from frontends.stage_runner import run_like_pipeline_stages
from frontends.torch_models import manual_plan, small_model
from stagecut.frontends import runtime
from stagecut.frontends.torch import trace_torch

LR = 0.1


def sgd(params):
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p -= LR * p.grad


def test_tied_parameters_are_named_by_every_alias():
    model, _ = small_model("tied_lm")
    assert runtime.tied_parameters(model) == [("emb.weight", "head.weight")]
    assert runtime.tied_parameters(small_model("mlp")[0]) == []


def test_allreduce_tied_keeps_the_copies_equal_to_the_unsplit_weight():
    model, x = small_model("tied_lm")
    ref = copy.deepcopy(model)
    (ref(x) ** 2).mean().backward()
    sgd(ref.parameters())
    t = trace_torch(model, (x,), bandwidth=1e9)
    order = list(t.order)
    cut = order.index("embedding") + 1
    pipe = runtime.pipeline(model, (x,), split_policy=t.split_policy(manual_plan(t, [order[:cut], order[cut:]])))
    run_like_pipeline_stages(pipe, x)
    modules = [pipe.get_stage_module(i) for i in range(pipe.num_stages)]
    copies = [p for m in modules for n, p in m.named_parameters() if n in ("emb.weight", "head.weight")]
    assert len({id(p) for p in copies}) == len(copies) >= 2  # a copy on each stage
    partial = [p.grad.clone() for p in copies if p.grad is not None]
    assert len(partial) >= 2 and not torch.allclose(partial[0], partial[1])  # each stage's part only
    assert runtime.allreduce_tied(model, modules) == 1
    assert all(torch.equal(p.grad, copies[0].grad) for p in copies)
    assert torch.allclose(copies[0].grad, ref.emb.weight.grad, atol=1e-6)
    params = {id(p): p for m in modules for p in m.parameters()}
    sgd(params.values())
    assert all(torch.equal(p, copies[0]) for p in copies)  # the replicas stay equal
    assert torch.allclose(copies[0], ref.emb.weight, atol=1e-6)  # and equal the unsplit model's
    named = {n: p for m in modules for n, p in m.named_parameters()}
    for n, p in ref.named_parameters():
        assert torch.allclose(named[n], p, atol=1e-6), n


def test_without_the_allreduce_the_copies_drift_apart():
    """What the helper is for: each copy stepping with its own stage's part of the gradient."""
    model, x = small_model("tied_lm")
    t = trace_torch(model, (x,), bandwidth=1e9)
    order = list(t.order)
    cut = order.index("embedding") + 1
    pipe = runtime.pipeline(model, (x,), split_policy=t.split_policy(manual_plan(t, [order[:cut], order[cut:]])))
    run_like_pipeline_stages(pipe, x)
    modules = [pipe.get_stage_module(i) for i in range(pipe.num_stages)]
    sgd({id(p): p for m in modules for p in m.parameters()}.values())
    a, b = (dict(m.named_parameters()) for m in modules)
    assert not torch.equal(a["emb.weight"], b["head.weight"])


@pytest.mark.slow  # 2 spawned processes, each tracing the models
def test_two_rank_gloo_tied_copies_after_an_optimizer_step(tmp_path):
    """GPT-2 (random config; its plans replicate the tied embedding at k = 2 and 4) and the small
    tied LM: one SGD step after ``allreduce_tied`` on 2 gloo ranks; every copy of every parameter
    equals the unsplit model's after the same step, the tied copies exactly each other."""
    from frontends.test_hf import traced
    from frontends.test_pipeline_runtime import check_gloo

    cases = []
    _, _, t = traced("gpt2")
    for k in (2, 4):
        plan = t.partition(k)
        assert plan.stats["tied"] == "replicated"
        cases.append(("hf:gpt2", [list(s.nodes) for s in plan.stages], "step"))
    model, x = small_model("tied_lm")
    t = trace_torch(model, (x,), bandwidth=1e9)
    order = list(t.order)
    cases.append(("tied_lm", [order[:2], order[2:]], "step"))
    results = check_gloo(cases, tmp_path)
    assert all(r["copies"] >= 2 for r in results)  # the tied weight had a copy on more than one stage
