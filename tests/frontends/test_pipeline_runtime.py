"""Runtime-valid cuts: every plan's stages, built by ``torch.distributed.pipelining``, run.

Two checks. In one process, for every 2-stage program-order cut of the small test models (and
their optimal plans at k = 2 and 3): the stages built from ``t.split_policy(plan)`` are run the
way ``PipelineStage`` runs them (each stage's inputs detached leaves that require grad, each
tensor sent to the next stage contiguous), forward and backward, and compared with the unsplit
model (output and every parameter's gradient). On 2 gloo ranks (CPU, one thread each): the
cuts that fail without the runtime pass (a non-contiguous tensor sent after ``transpose``, an
in-place ``relu_``/``add_`` on a received tensor, BatchNorm in train mode) through
``PipelineStage`` and ``ScheduleGPipe`` with real gradients; every cut of every model there is the
slow test."""

import copy

import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
pipelining = pytest.importorskip("torch.distributed.pipelining")

import stagecut as sc
from frontends import gloo_pipeline
from frontends.torch_models import SMALL_MODELS, manual_plan, small_model
from stagecut.errors import InvalidArgumentError
from stagecut.frontends import runtime
from stagecut.frontends.torch import trace_torch

BW = 1e9


def cuts(t):
    return [[list(t.order[:b]), list(t.order[b:])] for b in range(1, len(t.order))]


def run_like_pipeline_stages(pipe, x):
    """Run the stages as PipelineStage does: every tensor a stage receives (from an earlier
    stage) is a fresh leaf requiring grad, and must have been sent contiguous; backward stage by
    stage, each stage's input gradients sent back. Returns the output, the loss and the
    gradients by parameter name (summed over the stages holding a parameter)."""
    import operator

    env, stage_of, sent = {}, {}, []  # sent: (source tensor, leaf, receiving stage)
    stage = 0
    y = None
    for node in pipe.split_gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = x
        elif node.op == "call_module":
            args = []
            for a in node.args:
                v = env[a]
                if id(v) in stage_of:  # made by an earlier stage: sent, received as a leaf
                    assert v.is_contiguous(), f"{a.name} is sent non-contiguous {tuple(v.stride())}"
                    leaf = v.detach().requires_grad_(v.is_floating_point())
                    sent.append((v, leaf, stage))
                    v = leaf
                args.append(v)
            out = pipe.get_stage_module(stage)(*args)
            for o in (out if isinstance(out, tuple) else (out,)):
                stage_of[id(o)] = stage
            env[node] = out
            stage += 1
        elif node.op == "call_function" and node.target is operator.getitem:
            env[node] = env[node.args[0]][node.args[1]]
        elif node.op == "output":
            y = env[node.args[0][0]] if isinstance(node.args[0], (tuple, list)) else env[node.args[0]]
    loss = (y ** 2).mean()
    loss.backward()
    for s in range(pipe.num_stages - 2, -1, -1):
        pairs = [(v, leaf.grad) for v, leaf, r in sent
                 if stage_of[id(v)] == s and leaf.grad is not None and v.requires_grad]
        if pairs:
            torch.autograd.backward([v for v, _ in pairs], [g for _, g in pairs])
    grads = {}
    for i in range(pipe.num_stages):
        for n, p in pipe.get_stage_module(i).named_parameters():
            if p.grad is not None:
                grads[n] = grads[n] + p.grad if n in grads else p.grad.clone()
    return y.detach(), loss.detach(), grads


def canonical_names(model):
    """Each name a parameter is reached by -> the name ``named_parameters()`` lists it under."""
    first = {}
    out = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        out[n] = first.setdefault(id(p), n)
    return out


def check_plan(name, stages_or_plan, t=None):
    model, x = small_model(name)
    t = t or trace_torch(model, (x,), bandwidth=BW)
    plan = stages_or_plan if isinstance(stages_or_plan, sc.Plan) else manual_plan(t, stages_or_plan)
    ref = copy.deepcopy(model)
    want = ref(x)
    (want ** 2).mean().backward()
    pipe = runtime.pipeline(model, (x,), split_policy=t.split_policy(plan))
    assert pipe.num_stages == len([s for s in plan.stages if s.nodes])
    y, _, grads = run_like_pipeline_stages(pipe, x)
    assert torch.allclose(y, want.detach(), atol=1e-5)
    ref_grads = {n: p.grad for n, p in ref.named_parameters() if p.grad is not None}
    canonical = canonical_names(model)
    summed = {}
    for n, g in grads.items():  # the copies of a replicated (tied) parameter: their gradients all-reduced
        c = canonical.get(n, n)
        summed[c] = summed[c] + g if c in summed else g
    grads = summed
    assert set(ref_grads) <= set(grads)
    for n, g in ref_grads.items():
        assert torch.allclose(grads[n], g, atol=1e-5), n
    return pipe


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
    for k in (2, 3):
        check_plan(name, sc.partition(t.graph, devices=k), t)


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


def check_gloo(cases, tmp_path):
    ranks = gloo_pipeline.run(cases, tmp_path)
    for r in ranks:
        bad = [c for c in r if not c["ok"]]
        assert not bad, bad[0]["error"] + "\n" + bad[0].get("trace", "")
        assert len(r) == len(cases)
    for case, last, first in zip(cases, ranks[1], ranks[0]):
        if case[2]:
            assert last["loss"] == pytest.approx(last["ref_loss"], rel=1e-5)
            assert first["grads"] > 0 and not first["missing_grads"] and first["grad_err"] < 1e-4, case
        else:
            assert last["max_err"] < 1e-5, case


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
