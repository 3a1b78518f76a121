"""Runtime-valid cuts: every plan's stages, built by ``torch.distributed.pipelining``, run.

Two checks. In one process, for every 2-stage program-order cut of the small test models (and
their optimal plans and ``t.partition``'s at k = 2 to 4): the stages built from
``t.split_policy(plan)`` are run the way ``PipelineStage`` runs them (each stage's inputs
detached leaves that require grad, each
tensor sent to the next stage contiguous), forward and backward, and compared with the unsplit
model (output and every parameter's gradient). On 2 gloo ranks (CPU, one thread each): the
cuts that fail without the runtime pass (a non-contiguous tensor sent after ``transpose``, an
in-place ``relu_``/``add_`` on a received tensor, BatchNorm in train mode) through
``PipelineStage`` and ``ScheduleGPipe`` with real gradients; every cut of every model there is the
slow test."""


import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
pipelining = pytest.importorskip("torch.distributed.pipelining")

import stagecut as sc
from frontends import gloo_pipeline
from frontends.stage_runner import check_stages, run_like_pipeline_stages
from frontends.torch_models import SMALL_MODELS, manual_plan, small_model
from stagecut.errors import InvalidArgumentError
from stagecut.frontends import runtime
from stagecut.frontends.torch import trace_torch

BW = 1e9


def cuts(t):
    return [[list(t.order[:b]), list(t.order[b:])] for b in range(1, len(t.order))]


def check_plan(name, stages_or_plan, t=None):
    model, x = small_model(name)
    t = t or trace_torch(model, (x,), bandwidth=BW)
    plan = stages_or_plan if isinstance(stages_or_plan, sc.Plan) else manual_plan(t, stages_or_plan)
    return check_stages(model, x, t, plan)


# the cuts of the default suite: those that need the runtime, and the plan stagecut picks
NEEDS_RUNTIME = {"transposed": ["transpose", "mul", "relu_"], "inplace_cnn": ["relu_", "add__1", "relu__1"],
                 "branches": ["linear_1"], "mlp": [], "tied_lm": ["linear_8"]}


@pytest.mark.parametrize("name", sorted(NEEDS_RUNTIME))
def test_cuts_that_need_the_runtime_and_the_optimal_plan_run(name):
    model, x = small_model(name)
    t = trace_torch(model, (x,), bandwidth=BW)
    order = list(t.order)
    for v in NEEDS_RUNTIME[name]:
        b = order.index(v)
        check_plan(name, [order[:b], order[b:]], t)  # stage 1 starts at v
        check_plan(name, [order[:b + 1], order[b + 1:]], t)  # stage 0 ends at v
    t = trace_torch(model, (x,), bandwidth=BW, flops_per_s=1e8)  # compute that matters: two busy stages
    plan = t.partition(2)
    assert all(s.nodes for s in plan.stages)
    check_plan(name, plan, t)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in SMALL_MODELS if n != "encoder"])
def test_every_cut_of_the_small_models_runs_forward_and_backward(name):
    model, x = small_model(name)
    t = trace_torch(model, (x,), bandwidth=BW)
    for stages in cuts(t):
        check_plan(name, stages, t)
    for k in (2, 3, 4):
        check_plan(name, sc.partition(t.graph, devices=k), t)
    t = trace_torch(model, (x,), bandwidth=BW, flops_per_s=1e8)  # the plans t.partition makes (tied weights)
    for k in (2, 3, 4):
        check_plan(name, t.partition(k), t)


def clones_in(pipe, i):
    """The clone nodes of stage i (its graph and its outlined submodules' graphs)."""
    return [n for _, m in pipe.get_stage_module(i).named_modules() if hasattr(m, "graph")
            for n in m.graph.nodes if n.op == "call_function" and "clone" in str(n.target)]


def test_runtime_adds_copies_only_where_needed():
    model, x = small_model("transposed")
    t = trace_torch(model, (x,), bandwidth=BW)
    order = list(t.order)
    after_transpose = order.index("transpose") + 1
    pipe = check_plan("transposed", [order[:after_transpose], order[after_transpose:]], t)
    assert len(clones_in(pipe, 0)) == 1 and not clones_in(pipe, 1)  # the transposed tensor, copied contiguous
    pipe = check_plan("transposed", [order[:1], order[1:]], t)  # linear's output is contiguous: no copy
    assert not clones_in(pipe, 0) and not clones_in(pipe, 1)
    model, x = small_model("inplace_cnn")
    t = trace_torch(model, (x,), bandwidth=BW)
    order = list(t.order)
    at = order.index("relu_")
    pipe = check_plan("inplace_cnn", [order[:at], order[at:]], t)
    assert len(clones_in(pipe, 1)) == 1 and not clones_in(pipe, 0)  # the received tensor relu_ writes to


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, h):
        return self.fc(h).transpose(1, 2)  # the block's output is non-contiguous


class SkipOverBlock(torch.nn.Module):
    """The model input is read by the last stage (passed through the middle one), and the middle
    stage ends inside ``blk`` with a non-contiguous tensor: both copies go at the end of that stage."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.blk = Block()
        self.b = torch.nn.Linear(4, 4)

    def forward(self, x):
        g = self.blk(torch.relu(self.a(x)))
        return self.b(g).transpose(1, 2) + x


def test_copies_at_a_stage_end_do_not_split_the_module_they_follow():
    """A copy made with the module stack of the tensor it copies opened a second call of that
    module after the pass-through copy; the runtime outlines one submodule per name, so the first
    call ran the second call's graph (Llama's 4-stage plan failed that way)."""
    torch.manual_seed(0)
    model, x = SkipOverBlock(), torch.randn(2, 4, 8)
    t = trace_torch(model, (x,), bandwidth=BW)
    order = list(t.order)
    end = order.index("transpose") + 1
    pipe = check_stages(model, x, t, manual_plan(t, [order[:2], order[2:end], order[end:]]))
    assert len(clones_in(pipe, 1)) == 2  # x passed through, blk's output made contiguous
    calls = [n.target for n in pipe.get_stage_module(1).graph.nodes if n.op == "call_module"]
    assert len(calls) == len(set(calls)), calls


def test_encoder_optimal_plan_runs():
    model, x = small_model("encoder")
    t = trace_torch(model, (x,), bandwidth=BW)
    check_plan("encoder", sc.partition(t.graph, devices=2), t)


@pytest.mark.slow
def test_encoder_optimal_and_attention_cuts():
    model, x = small_model("encoder")
    t = trace_torch(model, (x,), bandwidth=BW)
    order = list(t.order)
    for k in (2, 3):
        check_plan("encoder", sc.partition(t.graph, devices=k), t)
    transposes = [i for i, v in enumerate(order) if "transpose" in v or "permute" in v]
    for i in transposes[:3]:
        check_plan("encoder", [order[:i + 1], order[i + 1:]], t)


@pytest.mark.slow
def test_every_cut_of_the_encoder_runs():
    model, x = small_model("encoder")
    t = trace_torch(model, (x,), bandwidth=BW)
    for stages in cuts(t):
        check_plan("encoder", stages, t)


def gloo_cases(names_and_cuts):
    cases = []
    for name, picks in names_and_cuts:
        model, x = small_model(name)
        t = trace_torch(model, (x,), bandwidth=BW)
        all_cuts = cuts(t)
        for b in (picks if picks is not None else range(1, len(t.order))):
            for backward in (False, True):
                cases.append((name, all_cuts[b - 1], backward))
    return cases


def check_gloo(cases, tmp_path, grad_tol=1e-4, loss_rel=1e-5, out_tol=1e-5):
    """Run ``cases`` on 2 gloo ranks (``gloo_pipeline``) and check each against the unsplit model:
    the output, or the loss and every gradient (relative to each parameter's largest), or after
    an SGD step every copy's value (the copies of a tied weight exactly equal)."""
    ranks = gloo_pipeline.run(cases, tmp_path)
    bad = [(rank, len(r) - 1, c) for rank, r in enumerate(ranks) for c in r if not c["ok"]]
    assert not bad, "\n".join(f"rank {rank}, case {cases[i][:1] + (len(cases[i][1][0]),) if i < len(cases) else i}: "
                               f"{c['error']}\n{c.get('trace', '')[-600:]}" for rank, i, c in bad)
    assert all(len(r) == len(cases) for r in ranks)
    out = []
    for case, last, first in zip(cases, ranks[1], ranks[0]):
        if case[2]:
            assert last["loss"] == pytest.approx(last["ref_loss"], rel=loss_rel), case[0]
            assert first["grads"] > 0 and not first["missing_grads"] and first["grad_err"] < grad_tol, (case[0],
                                                                                                         first)
            if case[2] == "step":
                assert first["replica_err"] == 0.0 and first["value_err"] < grad_tol, (case[0], first)
        else:
            assert last["max_err"] < out_tol, case
        out.append({**first, **last})
    return out


@pytest.mark.slow  # two spawned processes importing torch: ~15 s on an idle machine
def test_gloo_pipeline_runs_the_cuts_that_need_the_runtime(tmp_path):
    """transpose -> a non-contiguous send; relu_/add_ on a received tensor; BatchNorm in train mode."""
    check_gloo(gloo_cases([("transposed", [2, 3]), ("inplace_cnn", [2, 4])]), tmp_path)


@pytest.mark.slow
def test_gloo_pipeline_runs_every_cut_of_the_small_models(tmp_path):
    check_gloo(gloo_cases([(n, None) for n in SMALL_MODELS if n != "encoder"]), tmp_path)


def test_pipeline_arguments():
    model, x = small_model("mlp")
    with pytest.raises(InvalidArgumentError, match="exactly one"):
        runtime.pipeline(model, (x,))
    t = trace_torch(model, (x,), bandwidth=BW)
    plan = sc.partition(t.graph, devices=2)
    spec = t.split_spec(plan)
    with pytest.raises(InvalidArgumentError, match="exactly one"):
        runtime.pipeline(model, (x,), split_spec=spec, split_policy=t.split_policy(plan))
    pipe = runtime.pipeline(model, (x,), split_spec=spec)
    y, _, _ = run_like_pipeline_stages(pipe, x)
    assert torch.allclose(y, model(x).detach(), atol=1e-6)


@pytest.mark.slow  # two spawned processes importing torch
def test_plan_once_gives_every_rank_rank_zeros_plan(tmp_path):
    a, b = gloo_pipeline.run_plan_once(tmp_path)
    assert a == b
    want = sc.partition(sc.Graph.chain([1.0, 2.0, 3.0, 4.0]), devices=2)
    assert sc.Plan.from_json(a).assignment() == want.assignment()
