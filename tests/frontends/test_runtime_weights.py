"""Each stage built by ``runtime.pipeline`` holds exactly the parameters and buffers its own
operators use: counted per stage against the weights the trace's nodes on that stage read
(``memory_record.weights``). A tied weight (the embedding's, shared by the output projection) is
held once by every stage that uses it, and by no other; the copies' gradients, all-reduced,
still equal the unsplit model's."""

import copy

import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
pytest.importorskip("torch.distributed.pipelining")

import stagecut as sc  # noqa: E402
from frontends.stage_runner import canonical_names, run_like_pipeline_stages  # noqa: E402
from frontends.test_partition_trace import GPT  # noqa: E402
from frontends.torch_models import manual_plan, small_model  # noqa: E402
from stagecut.frontends import runtime  # noqa: E402
from stagecut.frontends.split import stage_of_nodes  # noqa: E402
from stagecut.frontends.torch import trace_torch  # noqa: E402


def expected_weights(t, plan):
    """Per stage: the (canonical) names of the parameters and of the buffers its nodes read."""
    stage = stage_of_nodes(plan, t)
    rec = t.memory_record
    k = max(stage.values()) + 1
    params, buffers = [set() for _ in range(k)], [set() for _ in range(k)]
    for v, i in stage.items():
        for w in rec.weights.get(v, ()):
            (params if w in rec.trainable else buffers)[i].add(w)
    return params, buffers


def held(module, canonical):
    """The (canonical) names of a stage module's parameters, one per tensor object, how many
    tensor objects, and its buffers' names."""
    tensors = {}
    for n, p in module.named_parameters(remove_duplicate=False):
        tensors.setdefault(id(p), canonical.get(n, n))
    # BatchNorm's counter: the stage's program increments it, but the trace drops that update (nobody
    # uses its result), so the record lists no node reading it
    return sorted(tensors.values()), sorted(n for n, _ in module.named_buffers()
                                            if not n.endswith("num_batches_tracked"))


def check(model, x, t, plan):
    model.zero_grad(set_to_none=True)  # the stage modules may share the model's parameters
    ref = copy.deepcopy(model)
    (ref(x) ** 2).mean().backward()
    pipe = runtime.pipeline(model, (x,), split_policy=t.split_policy(plan))
    canonical = canonical_names(model)
    params, buffers = expected_weights(t, plan)
    assert pipe.num_stages == len(params)
    for i in range(pipe.num_stages):
        names, bufs = held(pipe.get_stage_module(i), canonical)
        assert names == sorted(params[i]), (i, names, params[i])  # each used parameter once, nothing else
        assert bufs == sorted(buffers[i]), (i, bufs, buffers[i])
    _, _, grads = run_like_pipeline_stages(pipe, x)
    modules = [pipe.get_stage_module(i) for i in range(pipe.num_stages)]
    for m in modules:  # every parameter a stage holds is used: it gets a gradient
        assert all(p.grad is not None for p in m.parameters())
    runtime.allreduce_tied(model, modules)
    for m in modules:
        for n, p in m.named_parameters():
            assert torch.allclose(p.grad, ref.get_parameter(canonical.get(n, n)).grad, atol=1e-6), n
    return pipe


def test_tied_lm_stages_hold_only_the_weights_their_nodes_use():
    model, x = small_model("tied_lm")
    t = trace_torch(model, (x,), bandwidth=1e9)
    order = list(t.order)
    emb = order.index("embedding") + 1
    # the embedding alone on stage 0 (the output projection's copy is not kept there), a middle
    # cut, the output projection alone on the last stage, and 3 stages
    for stages in ([order[:emb], order[emb:]], [order[:len(order) // 2], order[len(order) // 2:]],
                   [order[:-1], order[-1:]], [order[:emb], order[emb:-1], order[-1:]]):
        pipe = check(model, x, t, manual_plan(t, stages))
        first = dict(pipe.get_stage_module(0).named_parameters(remove_duplicate=False))
        assert "emb.weight" in first and "head.weight" not in first
        last = dict(pipe.get_stage_module(pipe.num_stages - 1).named_parameters(remove_duplicate=False))
        assert "head.weight" in last and "emb.weight" not in last


@pytest.mark.parametrize("k", [2, 3])
def test_gpt_and_batchnorm_stages(k):
    torch.manual_seed(0)
    model, x = GPT(layers=2, d=16, h=2, t=8, vocab=32).train(), torch.randint(0, 32, (2, 8))
    t = trace_torch(model, (x,), bandwidth="10GB/s", flops_per_s=1e10)
    check(model, x, t, sc.partition(t.graph, devices=k))
    model, x = small_model("inplace_cnn")
    t = trace_torch(model, (x,), bandwidth="10GB/s", flops_per_s=1e10)
    order = list(t.order)
    check(model, x, t, manual_plan(t, [order[:k], order[k:]]))


def test_drop_unused_weights_keeps_what_a_plain_submodule_holds():
    """A called submodule without a graph (an ordinary ``nn.Module``) keeps all it holds, a buffer
    the graph reads is kept; an uncalled submodule and an unread buffer are removed."""
    graph = torch.fx.Graph()
    xin = graph.placeholder("x")
    scale = graph.get_attr("scale")
    graph.output(graph.call_function(torch.mul, (graph.call_module("used", (xin,)), scale)))
    root = torch.nn.Module()
    root.used = torch.nn.Linear(2, 2)
    root.register_buffer("scale", torch.full((1,), 2.0))
    gm = torch.fx.GraphModule(root, graph)
    gm.add_submodule("unused", torch.nn.Linear(2, 2))
    gm.register_buffer("stale", torch.zeros(1))
    removed = runtime.drop_unused_weights(gm)
    assert sorted(removed) == ["stale", "unused.bias", "unused.weight"]
    assert sorted(n for n, _ in gm.named_parameters()) == ["used.bias", "used.weight"]
    assert [n for n, _ in gm.named_buffers()] == ["scale"]
    assert not hasattr(gm, "unused")
    assert gm(torch.ones(1, 2)).shape == (1, 2)
