"""Training plans from a traced model: the layers (layer lists, glue, containers), each layer's
TMPCs from the trace (forward + the trace's own backward per sample, parameter / gradient /
optimizer-state bytes, saved activations per microbatch, recomputation), the edges' bytes per
sample, and ``plan_training`` on the result, re-scored by the evaluator."""

import types

import pytest

import stagecut as sc
from stagecut.errors import InvalidArgumentError
from stagecut.frontends._common import with_backward
from stagecut.training import evaluate_training, plan_training
from stagecut.training.io import piper_from_trace, trace_layers

# a GPT-like program: container glue, embedding, a layer list of 2, a norm, a top-level head
MODS = [
    ("arange", ("model",)), ("emb", ("model", "model.emb")), ("add", ("model",)),
    ("a0", ("model", "model.h.0")), ("b0", ("model", "model.h.0", "model.h.0.mlp")),
    ("a1", ("model", "model.h.1")), ("b1", ("model", "model.h.1", "model.h.1.mlp")),
    ("ln", ("model", "model.ln")), ("view", ()), ("head", ("head",)),
]


def fake_trace(training=True, factor=3.0):
    order = [v for v, _ in MODS]
    times = {v: 1.0 + i for i, v in enumerate(order)}
    out = {v: 100.0 * (i + 1) for i, v in enumerate(order)}
    mem = {"emb": 4000.0, "a0": 1000.0, "b0": 2000.0, "a1": 1000.0, "b1": 2000.0, "ln": 10.0, "head": 4000.0}
    nodes = [sc.Node(v, {"accelerator": times[v]}, memory=mem.get(v, 0.0), comm=out[v] / 1e3) for v in order]
    edges = list(zip(order, order[1:])) + [("emb", "add"), ("a0", "a1")]
    g = sc.Graph(nodes, list(dict.fromkeys(edges)))
    if training:
        g = with_backward(g, factor)
    return types.SimpleNamespace(graph=g, order=tuple(order), modules=dict(MODS), output_bytes=out, bandwidth=1e3,
                                 times=times, mem=mem)


def test_layers():
    t = fake_trace()
    assert trace_layers(t) == [("model.emb", ["arange", "emb", "add"]), ("model.h.0", ["a0", "b0"]),
                               ("model.h.1", ["a1", "b1"]), ("model.ln", ["ln", "view"]), ("head", ["head"])]
    t.modules["b1"] = ("model", "model.h.0", "model.h.0.mlp")  # h.0 runs again after h.1 starts
    names = [n for n, _ in trace_layers(t)]
    assert names[1:4] == ["model.h.0", "model.h.1", "model.h.0#2"]


@pytest.mark.parametrize("training", [True, False])
def test_tmpcs_from_the_trace(training):
    t = fake_trace(training=training)
    prob = piper_from_trace(t, samples=4, devices=4, memory=1e9, batch=8, optimizer_states=2,
                            backward_factor=2.0)
    factor = 3.0 if training else 2.0  # the trace's own backward nodes when it has them
    layers = trace_layers(t)
    assert [n.name for n in prob.nodes] == [n for n, _ in layers]
    for node, (_, vs) in zip(prob.nodes, layers):
        van, rec = node.tmpcs[1]
        fwd = sum(t.times[v] for v in vs)
        params = sum(t.mem.get(v, 0.0) for v in vs)
        assert van.time == pytest.approx((1 + factor) * fwd / 4)
        assert rec.time == pytest.approx((2 + factor) * fwd / 4) and rec.is_recompute
        assert van.params == rec.params == params
        assert van.mem_b == rec.mem_b == 4 * params  # weights, gradients, 2 Adam states
        assert van.mem_a == sum(t.output_bytes[v] for v in vs)
    # edges: bytes per sample of the tensors crossing layers; model.h.0 -> model.h.1 carries b0 and a0
    e = {(x.source, x.target): x.comm for x in prob.edges}
    assert e[(1, 2)] == pytest.approx((t.output_bytes["b0"] + t.output_bytes["a0"]) / 4)
    assert e[(0, 1)] == pytest.approx(t.output_bytes["add"] / 4)
    assert prob.nodes[2].tmpcs[1][1].mem_a == pytest.approx(t.output_bytes["b0"] + t.output_bytes["a0"])
    assert prob.bandwidth == 1e3


def test_plan_training_on_a_trace_is_rescored_and_memory_binds():
    t = fake_trace()
    prob = piper_from_trace(t, samples=1, devices=4, memory=1e9, batch=4)
    plan = plan_training(prob)
    assert plan.objective is not None
    assert evaluate_training(prob, plan).objective == pytest.approx(plan.objective)
    tight = piper_from_trace(t, samples=1, devices=4, memory=30000.0, batch=4)
    plan_t = plan_training(tight)
    assert max(s.memory for s in plan.stages) > 30000.0  # the roomy plan would not fit
    assert plan_t.objective is not None and plan_t.objective > plan.objective
    assert all(s.memory <= 30000.0 for s in plan_t.stages)
    assert any(c == "activation recomp" for s in plan_t.stages for c in s.tmpcs.values())
    no_rec = plan_training(tight, recompute=False)
    assert no_rec.objective is None or no_rec.objective > plan_t.objective


def test_bad_arguments():
    t = fake_trace()
    with pytest.raises(InvalidArgumentError, match="samples"):
        piper_from_trace(t, samples=0, devices=2, memory=1e9, batch=2)
    t.bandwidth = 0.0
    with pytest.raises(InvalidArgumentError, match="bandwidth"):
        piper_from_trace(t, samples=1, devices=2, memory=1e9, batch=2)
