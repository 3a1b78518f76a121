"""Exports: plans -> torch.distributed.pipelining split specs (checked by building the Pipe with
``pipeline()`` on CPU and running it against the model), torchgpipe balance lists and DeepSpeed
parts; refusals of plans that are not contiguous in program order or start a stage where no
module begins, and the ``nearest`` mapping."""

import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
nn = torch.nn

import stagecut as sc
from frontends.torch_models import Branches, manual_plan
from stagecut.errors import InvalidArgumentError
from stagecut.frontends import NotExpressibleError
from stagecut.frontends.export import (
    balance_to_parts,
    plan_to_balance,
    plan_to_pipelining,
    program_order_graph,
)
from stagecut.frontends.torch import trace_torch

BW = 1e9


def seq_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32),
                         nn.ReLU(), nn.Linear(32, 4)).eval()


def cut(trace, *starts):
    """Program-order stages starting at the given node positions."""
    b = [0, *starts, len(trace.order)]
    return [list(trace.order[b[i]:b[i + 1]]) for i in range(len(b) - 1)]


def test_sequential_plan_round_trips_to_pipelining_and_balance():
    model, x = seq_model(), torch.randn(4, 8)
    t = trace_torch(model, x, bandwidth=BW, flops_per_s=1e9)
    plan = sc.partition(t.graph, devices=3)
    split = plan_to_pipelining(plan, t)
    assert [set(s) for s in split.stages] == [set(s.nodes) for s in plan.stages]
    assert split.objective == pytest.approx(plan.objective) and not split.notes
    assert all(where == "beginning" for _, where in split.points)
    balance = plan_to_balance(plan, t)
    assert sum(balance) == len(model) and len(balance) == 3 and min(balance) >= 1
    parts = balance_to_parts(balance)
    # DeepSpeed's convention: stage i holds layers parts[i] .. parts[i+1]-1; each layer's nodes are in its stage
    where = plan.assignment()
    for i in range(3):
        for layer in range(parts[i], parts[i + 1]):
            assert all(where[v] == i for v in t.order if t.modules[v][0] == str(layer))


def test_split_spec_builds_a_pipe_that_computes_the_model():
    pipelining = pytest.importorskip("torch.distributed.pipelining")
    model, x = seq_model(), torch.randn(4, 8)
    t = trace_torch(model, x, bandwidth=BW)
    assert [t.modules[v] for v in t.order] == [(str(i),) for i in range(7)]  # one node per layer
    plan = manual_plan(t, cut(t, 2, 5))  # stages start at layers "2" (Linear) and "5" (ReLU)
    split = plan_to_pipelining(plan, t)
    spec = split.split_spec()
    assert spec == {"2": pipelining.SplitPoint.BEGINNING, "5": pipelining.SplitPoint.BEGINNING}
    assert plan_to_balance(plan, t) == [2, 3, 2]
    pipe = pipelining.pipeline(model, mb_args=(x,), split_spec=spec)
    assert pipe.num_stages == 3
    y = x
    for i in range(3):
        y = pipe.get_stage_module(i)(y)
    with torch.no_grad():
        assert torch.allclose(y, model(x), atol=1e-6)


def test_plan_not_contiguous_in_program_order_is_refused_or_mapped():
    model, x = Branches().eval(), torch.randn(2, 8)
    t = trace_torch(model, x, bandwidth=BW)
    a = [v for v in t.order if "a" in t.modules[v]]
    rest = [v for v in t.order if v not in a]
    b_nodes = [v for v in rest if "b" in t.modules[v]]
    others = [v for v in rest if v not in b_nodes]
    plan = manual_plan(t, [b_nodes, a + others])  # b first: contiguous in the graph, not in program order
    assert sc.evaluate(t.graph, plan.device_of(), devices=2).contiguous
    with pytest.raises(NotExpressibleError, match="not contiguous in program order"):
        plan_to_pipelining(plan, t)
    split = plan_to_pipelining(plan, t, mode="nearest")
    assert any("program order" in n for n in split.notes)
    assert [v for s in split.stages for v in s] == list(t.order)
    with pytest.raises(NotExpressibleError):
        plan_to_balance(plan, t)


def test_stage_starting_at_a_function_node_is_refused_or_moved():
    model, x = Branches().eval(), torch.randn(2, 8)
    t = trace_torch(model, x, bandwidth=BW)
    add = next(i for i, v in enumerate(t.order) if not t.modules[v] and "add" in t.targets[v])
    plan = manual_plan(t, cut(t, add))
    split = plan_to_pipelining(plan, t)  # add is glue: it goes with the stage before, "out" begins stage 1
    assert split.points == (("out", "beginning"),) and "top-level forward" in split.notes[0]
    assert split.stages[1] == tuple(v for v in t.order if "out" in t.modules[v])
    a_mid = next(i for i, v in enumerate(t.order) if "a" in t.modules[v])  # a Linear: one node, so cut after it
    plan = manual_plan(t, cut(t, a_mid + 1))
    relu = t.order[a_mid + 1]
    assert not t.modules[relu]  # the relu of branch a is glue, after the end of "a": a split there
    assert plan_to_pipelining(plan, t).points == (("a", "end"),)
    split = plan_to_pipelining(plan, t, mode="nearest")
    assert len(split.stages) == 2
    assert split.objective == pytest.approx(sc.evaluate(t.graph, {v: ("accelerator", i) for i, s in
                                                                  enumerate(split.stages) for v in s}).objective)


def test_module_called_twice_is_no_split_point():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.pre = nn.Linear(6, 6)
            self.fc = nn.Linear(6, 6)

        def forward(self, x):
            return self.fc(torch.relu(self.fc(self.pre(x))))

    t = trace_torch(Twice().eval(), torch.randn(3, 6), bandwidth=BW)
    first_fc = next(i for i, v in enumerate(t.order) if "fc" in t.modules[v])
    plan = manual_plan(t, cut(t, first_fc))
    split = plan_to_pipelining(plan, t)  # "pre" ends there: a split at its END
    assert split.points == (("pre", "end"),)
    second_fc = max(i for i, v in enumerate(t.order) if "fc" in t.modules[v] and
                    "fc" not in t.modules[t.order[i - 1]])
    with pytest.raises(NotExpressibleError, match="called exactly once"):
        plan_to_pipelining(manual_plan(t, cut(t, second_fc)), t)


def test_program_order_graph_gives_expressible_plans():
    model, x = Branches().eval(), torch.randn(2, 8)
    t = trace_torch(model, x, bandwidth=BW)
    g = program_order_graph(t)
    assert len(g.edges) >= len(t.graph.edges) + len(t.order) - 1 - len(t.graph.edges)
    plan = sc.partition(g, devices=2)
    seq = [plan.assignment()[v] for v in t.order]
    assert seq == sorted(seq)


def test_bad_inputs():
    model, x = seq_model(), torch.randn(4, 8)
    t = trace_torch(model, x, bandwidth=BW)
    other = sc.partition(sc.Graph.chain([1.0, 2.0]), devices=2)
    with pytest.raises(NotExpressibleError, match="not over this trace"):
        plan_to_pipelining(other, t)
    with pytest.raises(InvalidArgumentError, match="mode"):
        plan_to_pipelining(sc.partition(t.graph, devices=2), t, mode="closest")
    with pytest.raises(InvalidArgumentError, match="balance"):
        balance_to_parts([2, 0])
    assert balance_to_parts([1, 2, 3]) == [0, 1, 3, 6]


class TinyTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Linear(16, 32)
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0)
                                     for _ in range(3)])
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        h = self.emb(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(h.mean(1))


def test_transformer_trace_partition_pipeline_end_to_end():
    """model -> trace -> partition -> split spec -> pipeline(): the stages compose to the model."""
    pipelining = pytest.importorskip("torch.distributed.pipelining")
    torch.manual_seed(0)
    model, x = TinyTransformer().eval(), torch.randn(2, 5, 16)
    t = trace_torch(model, x, bandwidth="10GB/s", flops_per_s=1e11)
    assert all(t.graph.succ[i] or t.graph.pred[i] for i in range(len(t.graph)))
    plan = sc.partition(t.graph, devices=3)
    assert plan.status == "optimal"
    split = plan_to_pipelining(plan, t, mode="nearest")
    pipe = pipelining.pipeline(model, mb_args=(x,), split_spec=split.split_spec())
    assert pipe.num_stages == len(split.stages) == 3
    y = x
    for i in range(pipe.num_stages):
        y = pipe.get_stage_module(i)(y)
    with torch.no_grad():
        assert torch.allclose(y, model(x), atol=1e-5)
    assert split.objective >= plan.objective - 1e-15


def test_training_plan_maps_to_pipelining_and_balance():
    model, x = seq_model(), torch.randn(4, 8)
    t = trace_torch(model, x, bandwidth=BW, flops_per_s=1e9, training=True)
    plan = sc.partition(t.graph, devices=3)
    split = plan_to_pipelining(plan, t)
    assert split.objective == pytest.approx(plan.objective)
    assert sum(plan_to_balance(plan, t)) == len(model)
