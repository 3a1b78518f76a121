"""Graph-level exports: split_policy (checked by building the Pipe with
torch.distributed.pipelining.pipeline on CPU and running its stage modules in stage order against
the model), the torch.fx split_module callback (running split_module's result) and torchtitan's
per-stage module names; plans that are not contiguous in program order, stages that start at a
function node, stages with no dependency between them, and the refusals."""

import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
nn = torch.nn

import stagecut as sc
from frontends.torch_models import Branches, manual_plan
from stagecut.frontends import NotExpressibleError
from stagecut.frontends.export import plan_to_pipelining, program_order_graph
from stagecut.frontends.split import module_fqns, split_callback, split_policy, stage_of_nodes
from stagecut.frontends.torch import trace_torch

BW = 1e9


class TinyTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Linear(16, 32)
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0)
                                     for _ in range(3)])
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        h = self.emb(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(self.drop(h).mean(1))


def run_in_stage_order(pipe, *args):
    """Run the Pipe's stage modules in stage-index order, each fed from the model's inputs and
    the outputs of earlier stages only (as a pipeline runs them); the model's output."""
    root = pipe.split_gm.graph
    env = {}
    inputs = iter(args)
    calls = {}
    for n in root.nodes:
        if n.op == "placeholder":
            env[n] = next(inputs)
        elif n.op == "call_module":
            calls[n.meta["stage_idx"]] = n
    assert sorted(calls) == list(range(pipe.num_stages))
    for i in range(pipe.num_stages):
        node = calls[i]
        assert all(a in env for a in node.all_input_nodes), f"stage {i} needs a value of a later stage"
        env[node] = pipe.get_stage_module(i)(*[env[a] for a in node.args])
        for user in node.users:  # a stage with several outputs: the root graph picks them with getitem
            if user.op == "call_function":
                env[user] = env[node][user.args[1]]
    (out,) = [n for n in root.nodes if n.op == "output"]
    return torch.fx.node.map_arg(out.args[0], lambda n: env[n])


def stage_params(pipe, i):
    return {name for name, _ in pipe.get_stage_module(i).named_parameters()}


def build(model, x, plan, t):
    pipelining = pytest.importorskip("torch.distributed.pipelining")
    return pipelining.pipeline(model, mb_args=(x,), split_policy=split_policy(plan, t))


def first(y):
    return y[0] if isinstance(y, (tuple, list)) else y


def test_policy_on_a_plan_not_contiguous_in_program_order():
    torch.manual_seed(0)
    model, x = Branches().eval(), torch.randn(2, 8)
    t = trace_torch(model, x, bandwidth=BW)
    a = [v for v in t.order if "a" in t.modules[v]]
    b = [v for v in t.order if "b" in t.modules[v]]
    plan = manual_plan(t, [b, [v for v in t.order if v not in b]])  # b runs after a in program order
    with pytest.raises(NotExpressibleError, match="program order"):
        plan_to_pipelining(plan, t)
    pipe = build(model, x, plan, t)
    assert pipe.num_stages == 2
    assert stage_params(pipe, 0) == {"b.weight", "b.bias"}
    assert stage_params(pipe, 1) == {"a.weight", "a.bias", "out.weight", "out.bias"}
    with torch.no_grad():
        assert torch.allclose(first(run_in_stage_order(pipe, x)), model(x), atol=1e-6)
    # three stages, the first two independent of each other: stage indices still follow the plan
    plan3 = manual_plan(t, [b, a, [v for v in t.order if v not in a + b]])
    pipe3 = build(model, x, plan3, t)
    assert [stage_params(pipe3, i) for i in range(3)] == [{"b.weight", "b.bias"}, {"a.weight", "a.bias"},
                                                           {"out.weight", "out.bias"}]
    with torch.no_grad():
        assert torch.allclose(first(run_in_stage_order(pipe3, x)), model(x), atol=1e-6)


def test_policy_splits_where_no_module_begins():
    model, x = Branches().eval(), torch.randn(2, 8)
    t = trace_torch(model, x, bandwidth=BW)
    add = next(i for i, v in enumerate(t.order) if not t.modules[v] and "add" in t.targets[v])
    plan = manual_plan(t, [list(t.order[:add]), list(t.order[add:])])
    split = plan_to_pipelining(plan, t)  # add is glue of the top-level forward: the split moves it, and says so
    assert split.points == (("out", "beginning"),) and "top-level forward" in split.notes[0]
    pipe = build(model, x, plan, t)
    assert pipe.num_stages == 2 and stage_params(pipe, 1) == {"out.weight", "out.bias"}
    with torch.no_grad():
        assert torch.allclose(first(run_in_stage_order(pipe, x)), model(x), atol=1e-6)


def test_policy_on_an_optimal_transformer_plan():
    torch.manual_seed(0)
    model, x = TinyTransformer().eval(), torch.randn(2, 5, 16)
    t = trace_torch(model, x, bandwidth="10GB/s", flops_per_s=1e11)
    plan = sc.partition(t.graph, devices=3)
    assert plan.status == "optimal"
    pipe = build(model, x, plan, t)
    assert pipe.num_stages == 3
    # each stage module holds the weights the plan puts on that stage (the trace's memory, bytes)
    stage = stage_of_nodes(plan, t)
    for i in range(3):
        held = sum(p.numel() * p.element_size() for p in pipe.get_stage_module(i).parameters())
        assert held == sum(t.memory[v] for v in t.order if stage[v] == i) > 0
    with torch.no_grad():
        assert torch.allclose(first(run_in_stage_order(pipe, x)), model(x), atol=1e-5)


def test_split_module_callback_on_export_and_fx_programs():
    from torch.fx.passes.split_module import split_module

    model, x = Branches().eval(), torch.randn(2, 8)
    for tracer in ("export", "fx"):
        t = trace_torch(model, x, bandwidth=BW, tracer=tracer)
        b = [v for v in t.order if "b" in t.modules[v]]
        plan = manual_plan(t, [b, [v for v in t.order if v not in b]])
        gm = torch.export.export(model, (x,)).module() if tracer == "export" else torch.fx.symbolic_trace(model)
        parts = split_module(gm, model, split_callback(plan, t), keep_original_node_name=True)
        for i, stage in enumerate(plan.stages):
            names = {n.name for n in getattr(parts, f"submod_{i}").graph.nodes if n.op not in
                     ("placeholder", "output", "get_attr")}
            assert set(stage.nodes) <= names, (tracer, i)
            assert not (names & (set(t.order) - set(stage.nodes))), (tracer, i)
        with torch.no_grad():
            assert torch.allclose(first(parts(x)), model(x), atol=1e-6)


def test_module_fqns_for_torchtitan():
    torch.manual_seed(0)
    model, x = TinyTransformer().eval(), torch.randn(2, 5, 16)
    t = trace_torch(model, x, bandwidth="10GB/s", flops_per_s=1e11)
    layer_of = {v: t.modules[v][0] if t.modules[v] else None for v in t.order}
    # program-order stages: emb + layers.0 | layers.1 | layers.2 + top-level mean + head
    starts = [next(i for i, v in enumerate(t.order) if layer_of[v] == f"layers.{j}") for j in (1, 2)]
    cut = [0, *starts, len(t.order)]
    plan = manual_plan(t, [list(t.order[cut[i]:cut[i + 1]]) for i in range(3)])
    assert module_fqns(plan, t) == [["emb", "layers.0"], ["layers.1"], ["layers.2", "drop", "head"]]
    # a plan from the program-order graph is always whole layers in order, or refused naming a module
    p2 = sc.partition(program_order_graph(t), devices=2)
    try:
        fqns = module_fqns(p2, t)
    except NotExpressibleError as e:
        assert "spans stages" in str(e)
    else:
        assert [f for s in fqns for f in s] == ["emb", "layers.0", "layers.1", "layers.2", "drop", "head"]
    # a layer cut in the middle
    mid = starts[0] + 3
    split_layer = manual_plan(t, [list(t.order[:mid]), list(t.order[mid:])])
    with pytest.raises(NotExpressibleError, match=r"module 'layers.1' spans stages 0 and 1"):
        module_fqns(split_layer, t)


def test_module_fqns_refusals():
    model, x = Branches().eval(), torch.randn(2, 8)
    t = trace_torch(model, x, bandwidth=BW)
    b = [v for v in t.order if "b" in t.modules[v]]
    with pytest.raises(NotExpressibleError, match="runs after a module of stage 1"):
        module_fqns(manual_plan(t, [b, [v for v in t.order if v not in b]]), t)
    add = next(i for i, v in enumerate(t.order) if "add" in t.targets[v])
    relu_b = add - 1
    plan = manual_plan(t, [list(t.order[:relu_b]), [t.order[relu_b], t.order[add]], list(t.order[add + 1:])])
    with pytest.raises(NotExpressibleError, match="stage 1 holds no layer"):
        module_fqns(plan, t)
    assert module_fqns(manual_plan(t, [list(t.order[:2]), list(t.order[2:])]), t) == [["a"], ["b", "out"]]


def test_refusals_of_policy_and_callback():
    model, x = Branches().eval(), torch.randn(2, 8)
    t = trace_torch(model, x, bandwidth=BW)
    backwards = manual_plan(t, [list(t.order[3:]), list(t.order[:3])])  # stage 0 uses stage 1's outputs
    for export in (split_policy, split_callback, module_fqns):
        with pytest.raises(NotExpressibleError, match="not in pipeline order"):
            export(backwards, t)
        with pytest.raises(NotExpressibleError, match="not over this trace"):
            export(sc.partition(sc.Graph.chain([1.0, 2.0]), devices=2), t)
    other = nn.Sequential(nn.Linear(8, 3))
    policy = split_policy(manual_plan(t, [list(t.order[:3]), list(t.order[3:])]), t)
    with pytest.raises(NotExpressibleError, match="not in the graph module"):
        policy(torch.export.export(other, (x,)).module())


def test_training_trace_policy():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
    x = torch.randn(3, 8)
    t = trace_torch(model, x, bandwidth=BW, flops_per_s=1e9, training=True)
    plan = sc.partition(t.graph, devices=2)
    pipe = build(model, x, plan, t)
    assert pipe.num_stages == 2
    with torch.no_grad():
        assert torch.allclose(first(run_in_stage_order(pipe, x)), model(x), atol=1e-6)


class Gated(nn.Module):
    """A tuple result picked with getitem (nodes the trace merges into their producer)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(8, 8)
        self.fc3 = nn.Linear(8, 2)

    def forward(self, x):
        a, b = self.fc1(x).chunk(2, -1)
        return self.fc3(self.fc2(a * torch.sigmoid(b)))


def test_getitem_picks_go_with_their_producer():
    from torch.fx.passes.split_module import split_module

    model, x = Gated().eval(), torch.randn(3, 8)
    t = trace_torch(model, x, bandwidth=BW)
    split_at = next(i for i, v in enumerate(t.order) if "split" in t.targets[v] or "chunk" in t.targets[v])
    gm = torch.export.export(model, (x,)).module()
    assert any(n.target is __import__("operator").getitem for n in gm.graph.nodes)
    for cut in (split_at, split_at + 1):
        plan = manual_plan(t, [list(t.order[:cut]), list(t.order[cut:])])
        pipe = build(model, x, plan, t)
        with torch.no_grad():
            assert torch.allclose(first(run_in_stage_order(pipe, x)), model(x), atol=1e-6)
        parts = split_module(torch.export.export(model, (x,)).module(), model, split_callback(plan, t))
        with torch.no_grad():
            assert torch.allclose(first(parts(x)), model(x), atol=1e-6)
