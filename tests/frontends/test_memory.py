"""Training memory per stage predicted from a trace (``TorchTrace.training_memory``), held to an
independent oracle: the plan's stages built with the library's own export (``split_policy`` and
``torch.distributed.pipelining``'s ``pipeline``), run forward stage by stage as a pipeline runs
them (each received tensor a fresh contiguous leaf) under ``saved_tensors_hooks``, then
backward, and a real ``torch.optim`` step on each stage's parameters. Saved activations,
parameters, gradients and optimizer state must match exactly; the microbatches in flight
must be the peak of torch's own ``Schedule1F1B`` / ``ScheduleGPipe`` run against a counting
stage."""

import operator

import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
nn = torch.nn

import stagecut as sc  # noqa: E402
from frontends.test_partition_trace import GPT  # noqa: E402
from frontends.torch_models import InplaceCNN, TiedLM, manual_plan, tied_lm_input  # noqa: E402
from stagecut.errors import InvalidArgumentError, StagecutError  # noqa: E402
from stagecut.frontends import runtime  # noqa: E402
from stagecut.frontends._common import NotExpressibleError  # noqa: E402
from stagecut.frontends.memory import saved_per_group, training_memory  # noqa: E402
from stagecut.frontends.torch import trace_torch  # noqa: E402
from stagecut.training.io import piper_from_trace, trace_layers  # noqa: E402


def nbytes(t):
    return t.numel() * t.element_size()


def built_stages(model, x, trace, plan, optimizers=("adam", "sgd", "sgd-momentum")):
    """Per stage of ``plan`` built by the runtime: saved activation bytes (storages packed by
    autograd, once each, parameters and buffers left out), parameter, buffer (without
    BatchNorm's ``num_batches_tracked``, which no operator reads) and gradient bytes, and the
    optimizer state bytes after one step of each optimizer (parameters: those the stage's
    operators use, the ones that get a gradient)."""
    pipe = runtime.pipeline(model, (x,), split_policy=trace.split_policy(plan))
    env, made_by, sent, out = {}, {}, [], []
    stage = 0
    y = None
    for node in pipe.split_gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = x
        elif node.op == "call_module":
            mod = pipe.get_stage_module(stage)
            args = []
            for a in node.args:
                v = env[a]
                if id(v) in made_by:  # received from an earlier stage: its own contiguous buffer, a leaf
                    # that requires grad when the sent tensor does (PipelineStage: the tensor's metadata)
                    leaf = v.detach().clone().contiguous().requires_grad_(v.requires_grad)
                    sent.append((v, leaf, stage))
                    v = leaf
                args.append(v)
            weights = {t.untyped_storage().data_ptr() for t in [*mod.parameters(), *mod.buffers()]}
            storages, keep = {}, []

            def pack(t, storages=storages, keep=keep, weights=weights):
                keep.append(t)
                st = t.untyped_storage()
                if st.data_ptr() not in weights:
                    storages[st.data_ptr()] = st.nbytes()
                return t

            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                res = mod(*args)
            for o in torch.utils._pytree.tree_leaves(res):
                made_by[id(o)] = stage
            # what the runtime keeps until the microbatch's backward besides the saved tensors: the received
            # tensors (PipelineStage's input values), on the last stage its outputs (returned after the step)
            held = {leaf.untyped_storage().data_ptr(): leaf.untyped_storage().nbytes()
                    for _, leaf, r in sent if r == stage}
            outs = {o.untyped_storage().data_ptr(): o.untyped_storage().nbytes()
                    for o in torch.utils._pytree.tree_leaves(res) if isinstance(o, torch.Tensor)}
            out.append({"saved": float(sum(storages.values())),
                        "received": float(sum(b for k, b in held.items() if k not in storages)),
                        "outputs_all": float(sum(b for k, b in outs.items() if k not in storages)),
                        "buffers": float(sum(nbytes(b) for n, b in mod.named_buffers()
                                             if not n.endswith("num_batches_tracked")))})
            env[node] = res
            stage += 1
        elif node.op == "call_function" and node.target is operator.getitem:
            env[node] = env[node.args[0]][node.args[1]]
        elif node.op == "output":
            y = torch.utils._pytree.tree_leaves(torch.fx.node.map_arg(node.args[0], lambda a: env[a]))[0]
    (y.float() ** 2).mean().backward()
    for s in range(stage - 2, -1, -1):  # each stage's input gradients sent back, stage by stage
        pairs = [(v, leaf.grad) for v, leaf, _ in sent if made_by[id(v)] == s and leaf.grad is not None]
        if pairs:
            torch.autograd.backward([v for v, _ in pairs], [g for _, g in pairs])
    for i, row in enumerate(out):
        row["outputs"] = row.pop("outputs_all") if i == len(out) - 1 else 0.0
        # one microbatch's activation gradients: those sent back for the received tensors, those received for
        # the tensors sent
        row["activation_grads"] = float(sum(nbytes(leaf.grad) for v, leaf, r in sent if leaf.grad is not None
                                            and (r == i or made_by[id(v)] == i)))
        # every parameter a stage holds is one its operators use (the runtime drops the others)
        params = [p for p in pipe.get_stage_module(i).parameters() if p.grad is not None]
        row["parameters"] = float(sum(nbytes(p) for p in params))
        row["gradients"] = float(sum(nbytes(p.grad) for p in params))
        for name in optimizers:
            opt = {"adam": lambda ps: torch.optim.Adam(ps, lr=1e-3),
                   "sgd": lambda ps: torch.optim.SGD(ps, lr=1e-3),
                   "sgd-momentum": lambda ps: torch.optim.SGD(ps, lr=1e-3, momentum=0.9)}[name](params)
            opt.step()
            row[name] = float(sum(nbytes(v) for st in opt.state.values() for v in st.values()
                                  if isinstance(v, torch.Tensor)))
    return out


def gpt():
    torch.manual_seed(0)
    return GPT(layers=2, d=32, h=4, t=8, vocab=40).train(), torch.randint(0, 40, (4, 8))


def cnn():
    torch.manual_seed(0)
    return InplaceCNN().train(), torch.randn(4, 3, 4, 4)


def tied():
    torch.manual_seed(0)
    return TiedLM().train(), tied_lm_input((4, 8))


def resnet(name, size):
    tv = require_extra("torchvision", "torch")
    torch.manual_seed(0)
    return getattr(tv.models, name)(weights=None).train(), torch.randn(2, 3, size, size)


def check_against_built(make, ks):
    model, x = make()
    t = trace_torch(model, (x,), bandwidth="10GB/s", flops_per_s=1e10)
    for k in ks:
        plan = sc.partition(t.graph, devices=k, method="dpl") if len(t.order) > 150 else \
            sc.partition(t.graph, devices=k)
        stages = [s for s in plan.stages if s.nodes]
        measured = built_stages(model, x, t, plan)
        assert len(measured) == len(stages)
        for opt in ("adam", "sgd", "sgd-momentum"):
            pred = t.training_memory(plan, optimizer=opt)
            for s, m in zip(pred.stages, measured):
                assert s.saved == pytest.approx(m["saved"], rel=1e-9, abs=0.5), (k, s.index)
                assert s.parameters == m["parameters"] and s.gradients == m["gradients"], (k, s.index)
                assert s.buffers == m["buffers"], (k, s.index)
                assert s.optimizer == m[opt], (opt, k, s.index)
                assert s.received == pytest.approx(m["received"], rel=1e-9, abs=0.5), (k, s.index)
                assert s.outputs == pytest.approx(m["outputs"], rel=1e-9, abs=0.5), (k, s.index)
                assert s.activation_grads == pytest.approx(m["activation_grads"], rel=1e-9, abs=0.5), (k, s.index)
        yield t, plan, pred, measured


@pytest.mark.parametrize("make,ks", [(gpt, (2,)), (cnn, (2,)), (tied, (3,))], ids=["gpt", "cnn", "tied-lm"])
def test_stage_memory_matches_the_built_stages(make, ks):
    for _, _, pred, measured in check_against_built(make, ks):
        assert all(m["saved"] > 0 for m in measured)
        assert pred.peak == max(s.total for s in pred.stages)


@pytest.mark.slow
@pytest.mark.parametrize("make,ks", [(gpt, (3,)), (lambda: resnet("resnet18", 64), (2, 4)),
                                     (lambda: resnet("resnet50", 64), (4,)),
                                     (lambda: (GPT(layers=12, d=128, h=4, t=32, vocab=256).train(),
                                               torch.randint(0, 256, (4, 32))), (2, 4))],
                         ids=["gpt-k3", "resnet18", "resnet50", "gpt12"])
def test_stage_memory_matches_the_built_stages_at_size(make, ks):
    for _, _, _, measured in check_against_built(make, ks):
        assert all(m["saved"] > 0 for m in measured)


class Half(nn.Module):
    """``chunk`` makes two views of one storage; a stage that gets only ``a`` receives ``a``."""

    def __init__(self):
        super().__init__()
        self.fc, self.out = nn.Linear(8, 32), nn.Linear(16, 4)

    def forward(self, x):
        a, b = self.fc(x).chunk(2, -1)
        return self.out(a) + torch.relu(b).sum()


def test_a_stage_holds_what_it_receives_not_the_senders_storage():
    torch.manual_seed(0)
    model, x = Half().train(), torch.randn(6, 8)
    t = trace_torch(model, (x,), bandwidth="10GB/s", flops_per_s=1e9)
    plan = manual_plan(t, [["linear", "chunk", "relu", "sum_1"], ["linear_1", "add"]])
    pred = t.training_memory(plan, optimizer="sgd")
    measured = built_stages(model, x, t, plan, optimizers=("sgd",))
    assert [s.saved for s in pred.stages] == [m["saved"] for m in measured]
    assert pred.stages[1].saved == 6 * 16 * 4  # linear_1 saves the received half only


class Skip(nn.Module):
    """A skip connection read two stages later (passed through the stage between) and a scale
    made from a buffer alone (a float tensor that requires no grad) crossing the boundaries."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 16)
        self.register_buffer("w", torch.full((4,), 0.5))

    def forward(self, x):
        scale = self.w.mean()
        h1 = self.fc1(x)
        h2 = self.fc2(torch.relu(h1))
        return (self.fc3(h2) + h1) * scale


def test_what_the_runtime_holds_at_the_boundaries():
    """Held besides the saved tensors: what a stage receives (also what it only passes on), the
    last stage's outputs (every microbatch of the step), one microbatch's activation gradients
    (none for a received tensor that requires no grad)."""
    torch.manual_seed(0)
    model, x = Skip().train(), torch.randn(6, 8)
    t = trace_torch(model, (x,), bandwidth="10GB/s", flops_per_s=1e9)
    order = list(t.order)
    cut1, cut2 = order.index("linear") + 1, order.index("linear_1") + 1
    plan = manual_plan(t, [order[:cut1], order[cut1:cut2], order[cut2:]])
    pred = t.training_memory(plan, optimizer="sgd", schedule="gpipe", microbatches=4)
    measured = built_stages(model, x, t, plan, optimizers=("sgd",))
    for s, m in zip(pred.stages, measured):
        for key in ("saved", "received", "outputs", "activation_grads"):
            assert getattr(s, key) == m[key], (s.index, key)
    h = 6 * 16 * 4
    # stage 1 passes h1 on (relu saves its result, not h1) with the scale; stage 2 saves h2 and the scale
    assert [s.received for s in pred.stages] == [0.0, h + 4, h]
    # gradients: stage 0 receives h1's; stage 1 sends h1's back and receives h2's and its copy of h1's;
    # stage 2 sends those two back; none for the scale
    assert [s.activation_grads for s in pred.stages] == [h, 3 * h, 2 * h]
    assert pred.stages[2].outputs == h and pred.stages[2].outputs_in_flight == 4
    assert pred.stages[2].activations == (pred.stages[2].saved + h) * 4 + h * 4 + 2 * h


def eager_saved(model, x):
    weights = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    storages, keep = {}, []

    def pack(t):
        keep.append(t)
        if t.untyped_storage().data_ptr() not in weights:
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return float(sum(storages.values()))


@pytest.mark.parametrize("make,tracer", [(gpt, "export"), (cnn, "export"), (cnn, "fx"), (tied, "export")],
                         ids=["gpt", "cnn", "cnn-fx", "tied-lm"])
def test_one_stage_saves_what_the_eager_model_saves(make, tracer):
    model, x = make()
    t = trace_torch(model, (x,), bandwidth="10GB/s", flops_per_s=1e10, tracer=tracer)
    plan = sc.partition(t.graph, devices=1)
    (stage,) = t.training_memory(plan, optimizer="sgd").stages
    want = eager_saved(model, x)
    assert stage.saved == pytest.approx(want, rel=1e-9)
    assert stage.saved == pytest.approx(sum(t.memory_record.saved_bytes.values()), rel=1e-12)
    assert stage.saved < sum(t.output_bytes.values())  # every output counted: the old overestimate
    assert stage.parameters == sum(nbytes(p) for p in model.parameters())


class _CountingStage:
    """Enough of a ``_PipelineStageBase`` for torch's single-stage schedules to run their loop:
    forwards and backwards only counted (communication ops are empty)."""

    def __init__(self, i, s):
        self.stage_index, self.num_stages, self.group_rank = i, s, i
        self.is_first, self.is_last, self.has_backward = i == 0, i == s - 1, True
        self.submod = nn.Identity()
        self.held = self.peak = 0

    def __getattr__(self, name):
        return (lambda *a, **k: []) if name.endswith("_ops") else (lambda *a, **k: None)

    def forward_one_chunk(self, *a, **k):
        self.held += 1
        self.peak = max(self.peak, self.held)

    def backward_one_chunk(self, *a, **k):
        self.held -= 1


def torch_schedule_peak(kind, i, s, m):
    """Microbatches stage ``i`` of ``s`` holds at its peak in torch's own schedule loop."""
    schedules = require_extra("torch.distributed.pipelining.schedules", "torch")
    cls = {"1f1b": schedules.Schedule1F1B, "gpipe": schedules.ScheduleGPipe}[kind]
    stage = _CountingStage(i, s)
    sched = cls.__new__(cls)  # not __init__: it wants a real stage and process group
    sched._stage, sched._num_stages, sched._n_microbatches = stage, s, m
    sched._has_backward, sched._loss_fn, sched.scale_grads, sched._stage_initialized = True, None, False, True
    sched._finalize_gradients = True
    sched._check_inputs = lambda *a: ([()] * m, [{}] * m)
    for name in ("_initialize_stage", "_maybe_compute_loss", "_maybe_get_loss", "_update_losses"):
        setattr(sched, name, lambda *a, **k: None)
    sched._step_microbatches([()] * m, [{}] * m)
    return stage.peak


@pytest.fixture(scope="module")
def seq_trace():
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16)) for _ in range(4)])
    return trace_torch(model, torch.randn(8, 16), bandwidth="10GB/s", flops_per_s=1e9)


def four_stages(t):
    return sc.partition(t.graph, devices=4)


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
@pytest.mark.parametrize("m", [2, 4, 8])
def test_microbatches_in_flight_follow_torchs_schedules(seq_trace, schedule, m):
    plan = four_stages(seq_trace)
    mem = seq_trace.training_memory(plan, schedule=schedule, microbatches=m)
    s = len(mem.stages)
    assert s == 4
    assert [st.in_flight for st in mem.stages] == [torch_schedule_peak(schedule, i, s, m) for i in range(s)]
    for st in mem.stages:
        assert st.activations == ((st.saved + st.received) * st.in_flight + st.outputs * st.outputs_in_flight
                                  + st.activation_grads)
        assert st.outputs_in_flight == (m if st.index == s - 1 else 0)
        assert st.total == pytest.approx(st.parameters + st.buffers + st.gradients + st.optimizer + st.activations)


def test_in_flight_defaults_and_overrides(seq_trace):
    plan = four_stages(seq_trace)
    assert [s.in_flight for s in seq_trace.training_memory(plan).stages] == [4, 3, 2, 1]
    given = seq_trace.training_memory(plan, microbatches_in_flight=[1, 2, 3, 4])
    assert [s.in_flight for s in given.stages] == [1, 2, 3, 4] and given.schedule == "given"
    assert [s.in_flight for s in seq_trace.training_memory(plan, microbatches_in_flight=5).stages] == [5] * 4


def test_optimizer_states_and_summary(seq_trace):
    plan = four_stages(seq_trace)
    base = seq_trace.training_memory(plan, optimizer="sgd")
    for opt, states, step in (("adam", 2, 4.0), ("adamw", 2, 4.0), ("sgd-momentum", 1, 0.0), (3, 3, 0.0)):
        mem = seq_trace.training_memory(plan, optimizer=opt)
        for a, b in zip(mem.stages, base.stages):
            assert a.optimizer == states * b.parameters + step * 4  # two weights and two biases per stage
            assert b.optimizer == 0.0 and a.gradients == a.parameters
    text = seq_trace.training_memory(plan, microbatches=8).summary()
    assert "KiB" in text and "peak" in text and "schedule 1f1b, 8 microbatches" in text


@pytest.mark.parametrize("kwargs,field", [
    ({"optimizer": "adagrad"}, "optimizer"), ({"optimizer": -1}, "optimizer"), ({"optimizer": True}, "optimizer"),
    ({"optimizer": 1.5}, "optimizer"), ({"schedule": "zb"}, "schedule"), ({"schedule": "gpipe"}, "microbatches"),
    ({"microbatches": 0}, "microbatches"), ({"microbatches": "8"}, "microbatches"),
    ({"microbatches_in_flight": [1, 2]}, "microbatches_in_flight"),
    ({"microbatches_in_flight": 0}, "microbatches_in_flight"),
    ({"microbatches_in_flight": [1, 2, 3, 0]}, "microbatches_in_flight[3]"),
])
def test_bad_arguments_name_the_field(seq_trace, kwargs, field):
    with pytest.raises(InvalidArgumentError, match=field.replace("[", r"\[")):
        seq_trace.training_memory(four_stages(seq_trace), **kwargs)


def test_a_plan_of_another_graph_or_a_trace_without_the_record(seq_trace):
    other = sc.partition(sc.Graph([sc.Node("a", {"accelerator": 1.0})], []), devices=1)
    with pytest.raises(NotExpressibleError, match="not over this trace"):
        seq_trace.training_memory(other)
    import dataclasses

    bare = dataclasses.replace(seq_trace, memory_record=None)
    with pytest.raises(StagecutError, match="no record of the tensors autograd saves"):
        training_memory(bare, four_stages(seq_trace))


def test_piper_mem_a_is_the_saved_activations(seq_trace):
    layers = trace_layers(seq_trace)
    assert len(layers) == 4
    prob = piper_from_trace(seq_trace, samples=8, devices=4, memory=1e9, batch=4)
    plan = four_stages(seq_trace)
    by_stage = seq_trace.training_memory(plan)
    assert [set(s.nodes) for s in plan.stages] == [set(vs) for _, vs in layers]  # a stage per layer
    for node, (_, vs) in zip(prob.nodes, layers):
        van = node.tmpcs[1][0]
        assert van.mem_a == saved_per_group(seq_trace.memory_record, [vs])[0]
    assert [n.tmpcs[1][0].mem_a for n in prob.nodes] == [s.saved for s in by_stage.stages]
    import dataclasses

    old = piper_from_trace(dataclasses.replace(seq_trace, memory_record=None), samples=8, devices=4, memory=1e9,
                           batch=4)
    for node, (_, vs) in zip(old.nodes, layers):  # the fallback: every output counted
        assert node.tmpcs[1][0].mem_a == sum(seq_trace.output_bytes[v] for v in vs)
    assert sum(n.tmpcs[1][0].mem_a for n in prob.nodes) < sum(n.tmpcs[1][0].mem_a for n in old.nodes)


def test_a_training_trace_gives_the_forward_traces_memory(seq_trace):
    from stagecut.frontends._common import trace_with_backward

    t = trace_with_backward(seq_trace, 2.0)
    plan = sc.partition(t.graph, devices=4)
    forward = {v: s.index for s in plan.stages for v in s.nodes if not str(v).endswith("_bwd")}
    fwd_plan = manual_plan(seq_trace, [[v for v in seq_trace.order if forward[v] == i] for i in range(4)])
    assert t.training_memory(plan).stages == seq_trace.training_memory(fwd_plan).stages
