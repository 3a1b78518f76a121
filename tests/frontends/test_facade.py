"""The facade of issue 15: ``stagecut.torch.trace`` and ``stagecut.onnx.load`` are the front ends'
``trace_torch`` and ``trace_onnx`` under the issue's names (same graph, each argument reaching
the parameter it names), and each export method of a trace equals the function it delegates to;
the README flow (trace -> partition -> ``t.split_policy(plan)`` -> ``pipeline``) builds a Pipe
that computes the model, and ``t.extract_onnx`` gives stage files that compose in onnxruntime.

torch and onnx are required per test (not at module level), so the import test runs without them."""

import dataclasses
import subprocess
import sys

import pytest

from frontends.extras import require_extra

BW = 1e9


def same_trace(a, b):
    """The two traces carry the same graph (ids, costs, edges) and the same side tables."""
    assert [n.id for n in a.graph.nodes] == [n.id for n in b.graph.nodes]
    assert [(n.compute, n.memory, n.comm, n.colocation, n.name) for n in a.graph.nodes] == \
        [(n.compute, n.memory, n.comm, n.colocation, n.name) for n in b.graph.nodes]
    assert list(a.graph.edges) == list(b.graph.edges)
    assert (a.order, dict(a.flops), dict(a.output_bytes), a.timing) == (b.order, dict(b.flops), dict(b.output_bytes),
                                                                        b.timing)


def seq_model(torch):
    nn = torch.nn
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4)).eval()


def outcome(f, *args, **kwargs):
    """("value", what ``f`` returns) or (the exception's type, its message)."""
    try:
        return "value", f(*args, **kwargs)
    except Exception as e:
        return type(e), str(e)


def test_import_stagecut_imports_no_framework():
    code = ("import sys, stagecut, stagecut.torch, stagecut.onnx\n"
            "assert callable(stagecut.torch.trace) and callable(stagecut.onnx.load)\n"
            "print(','.join(m for m in ('torch', 'onnx', 'onnxruntime') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""  # the frameworks imported, if any


def test_trace_is_trace_torch():
    torch = require_extra("torch", "torch")
    import stagecut.torch
    from frontends.torch_models import Branches
    from stagecut.errors import InvalidArgumentError
    from stagecut.frontends.torch import trace_torch

    model, x = Branches().eval(), torch.randn(2, 8)
    t = stagecut.torch.trace(model, (x,), bandwidth=BW, flops_per_s=1e9)
    same_trace(t, trace_torch(model, (x,), bandwidth=BW, flops_per_s=1e9))
    assert t.timing == "flops" and len(t.graph.nodes) >= 5
    # the FLOP model at the flops_per_s given; comm = output bytes / bandwidth
    assert all(n.compute["accelerator"] == pytest.approx(t.flops[n.id] / 1e9) for n in t.graph.nodes)
    assert all(n.comm == pytest.approx(t.output_bytes[n.id] / BW) for n in t.graph.nodes)
    assert any(t.flops[v] > 0 for v in t.order)

    # every other argument reaches the parameter it names
    measured = stagecut.torch.trace(model, x, bandwidth="2GB/s", cost="measure", warmup=0, repeat=1)
    assert measured.timing == "measure" and measured.order == t.order
    assert measured.graph.node(t.order[0]).comm == pytest.approx(t.output_bytes[t.order[0]] / 2e9)
    with pytest.raises(InvalidArgumentError, match="repeat"):
        stagecut.torch.trace(model, x, bandwidth=BW, cost="measure", repeat=0)
    with pytest.raises(InvalidArgumentError, match="warmup"):
        stagecut.torch.trace(model, x, bandwidth=BW, cost="measure", warmup=-1)
    with pytest.raises(InvalidArgumentError, match="timing"):
        stagecut.torch.trace(model, x, bandwidth=BW, cost="made-up")
    assert stagecut.torch.trace(model, x, bandwidth=BW, tracer="fx").method == "fx"
    train = stagecut.torch.trace(model, x, bandwidth=BW, flops_per_s=1e9, training=True, backward_factor=3.0)
    same_trace(train, trace_torch(model, x, bandwidth=BW, flops_per_s=1e9, training=True, backward_factor=3.0))
    v = t.order[0]
    assert train.graph.node(f"{v}_bwd").compute["accelerator"] == pytest.approx(3 * t.flops[v] / 1e9)


def test_trace_passes_example_kwargs():
    torch = require_extra("torch", "torch")
    import stagecut.torch
    from stagecut.frontends.torch import trace_torch

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x, *, scale):
            return self.fc(x * scale).relu()

    model, x, s = Scaled().eval(), torch.randn(3, 8), torch.randn(3, 8)
    t = stagecut.torch.trace(model, (x,), {"scale": s}, bandwidth=BW)
    same_trace(t, trace_torch(model, (x,), {"scale": s}, bandwidth=BW))
    assert sum(t.flops.values()) > 0 and len(t.order) == 3  # mul, linear, relu


def test_each_export_method_is_the_function_it_names():
    torch = require_extra("torch", "torch")
    import stagecut as sc
    import stagecut.torch
    from frontends.torch_models import Branches, manual_plan
    from stagecut.errors import InvalidArgumentError
    from stagecut.frontends import NotExpressibleError
    from stagecut.frontends.export import plan_to_balance, plan_to_pipelining
    from stagecut.frontends.split import module_fqns, split_callback, split_policy

    model, x = seq_model(torch), torch.randn(4, 8)
    t = stagecut.torch.trace(model, (x,), bandwidth=BW, flops_per_s=1e9)
    plan = sc.partition(t.graph, devices=3)
    assert len(plan.stages) == 3
    assert t.split_spec(plan) == plan_to_pipelining(plan, t).split_spec() and len(t.split_spec(plan)) == 2
    assert t.balance(plan) == plan_to_balance(plan, t) and sum(t.balance(plan)) == len(model)
    assert t.module_fqns(plan) == module_fqns(plan, t) and len(t.module_fqns(plan)) == 3

    gm = torch.export.export(model, (x,)).module()
    mine, theirs = t.split_callback(plan), split_callback(plan, t)
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert [mine(n) for n in calls] == [theirs(n) for n in calls] and {mine(n) for n in calls} == {0, 1, 2}

    pipelining = require_extra("torch.distributed.pipelining", "torch")
    pipes = [pipelining.pipeline(model, mb_args=(x,), split_policy=p) for p in (t.split_policy(plan),
                                                                                 split_policy(plan, t))]
    assert [p.num_stages for p in pipes] == [3, 3]
    assert [[name for name, _ in pipes[0].get_stage_module(i).named_parameters()] for i in range(3)] == \
        [[name for name, _ in pipes[1].get_stage_module(i).named_parameters()] for i in range(3)]

    # a plan not contiguous in program order: refused alike, and mode= reaches the function
    branches, xb = Branches().eval(), torch.randn(2, 8)
    tb = stagecut.torch.trace(branches, xb, bandwidth=BW)
    a = [v for v in tb.order if "a" in tb.modules[v]]
    b = [v for v in tb.order if "b" in tb.modules[v]]
    odd = manual_plan(tb, [b, a + [v for v in tb.order if v not in a and v not in b]])
    for mode in ("error", "nearest", "bogus"):
        assert outcome(tb.split_spec, odd, mode=mode) == outcome(lambda p, **kw: plan_to_pipelining(p, tb, **kw)
                                                                 .split_spec(), odd, mode=mode)
        assert outcome(tb.balance, odd, mode=mode) == outcome(plan_to_balance, odd, tb, mode=mode)
    assert outcome(tb.module_fqns, odd) == outcome(module_fqns, odd, tb)
    assert outcome(tb.split_spec, odd)[0] is NotExpressibleError
    assert outcome(tb.split_spec, odd, mode="nearest")[0] == "value"  # mapped to the nearest split
    assert outcome(tb.balance, odd, mode="bogus")[0] is InvalidArgumentError  # mode= reaches plan_to_balance


def test_readme_flow_builds_a_pipe_that_computes_the_model():
    torch = require_extra("torch", "torch")
    require_extra("torch.distributed.pipelining", "torch")
    from frontends.test_split import TinyTransformer, first, run_in_stage_order

    torch.manual_seed(0)
    model, x = TinyTransformer().eval(), torch.randn(2, 6, 16)
    # ---- the README's lines
    from torch.distributed.pipelining import pipeline

    import stagecut as sc
    import stagecut.torch

    t = stagecut.torch.trace(model, (x,), bandwidth="10GB/s", flops_per_s=1e11)
    plan = sc.partition(t.graph, devices=3)
    pipe = pipeline(model, (x,), split_policy=t.split_policy(plan))
    # ----
    assert plan.status == "optimal" and pipe.num_stages == len(plan.stages) == 3
    with torch.no_grad():
        assert torch.allclose(first(run_in_stage_order(pipe, x)), model(x), atol=1e-5)


def test_load_is_trace_onnx_and_extract_onnx_composes(tmp_path):
    onnx = require_extra("onnx", "onnx")
    ort = require_extra("onnxruntime", "onnx")
    require_extra("torch", "torch")
    import numpy as np

    import stagecut as sc
    import stagecut.onnx
    from frontends.test_onnx import small_model
    from frontends.test_onnx_profile import export
    from stagecut.errors import InvalidArgumentError
    from stagecut.frontends.onnx import extract_stages, trace_onnx

    path, x, y = export(tmp_path, batch=4)  # a torch model exported to ONNX, its input and output
    t = stagecut.onnx.load(path, bandwidth="10GB/s", flops_per_s=1e9)
    same_trace(t, trace_onnx(path, bandwidth="10GB/s", flops_per_s=1e9))
    assert t.timing == "flops" and t.source == path  # the default profile stays trace_onnx's
    profiled = stagecut.onnx.load(path, bandwidth=BW, profile="onnxruntime", inputs={"x": x}, warmup=0, repeat=1)
    assert profiled.timing == "onnxruntime" and profiled.order == t.order
    with pytest.raises(InvalidArgumentError, match="repeat"):
        stagecut.onnx.load(path, bandwidth=BW, repeat=0)
    symbolic = tmp_path / "symbolic.onnx"
    onnx.save(small_model(batch="batch"), str(symbolic))
    assert stagecut.onnx.load(symbolic, bandwidth=BW, dims={"batch": 3}).output_bytes["fc1"] == 3 * 16 * 4

    for k in (2, 3):
        plan = sc.partition(t.graph, devices=k)
        files = t.extract_onnx(plan, tmp_path / f"k{k}")
        theirs = extract_stages(plan, t, path, tmp_path / f"theirs{k}")
        assert [f.name for f in files] == [f.name for f in theirs] == [f"stage_{i}.onnx" for i in range(k)]
        assert [onnx.load(str(f)).graph == onnx.load(str(g)).graph for f, g in zip(files, theirs)] == [True] * k
        env = {"x": x}
        for f in files:  # in the order returned: each stage runs on what earlier ones computed
            session = ort.InferenceSession(str(f), providers=["CPUExecutionProvider"])
            values = session.run(None, {i.name: env[i.name] for i in session.get_inputs()})
            env.update(zip([o.name for o in session.get_outputs()], values))
        np.testing.assert_allclose(env["y"], y, rtol=1e-4, atol=1e-5)
    # from a ModelProto, and with the model given explicitly
    proto = onnx.load(str(path))
    tp = stagecut.onnx.load(proto, bandwidth="10GB/s", flops_per_s=1e9)
    plan = sc.partition(tp.graph, devices=2)
    assert [f.name for f in tp.extract_onnx(plan, tmp_path / "proto")] == ["stage_0.onnx", "stage_1.onnx"]
    with pytest.raises(InvalidArgumentError, match="not over this trace"):
        t.extract_onnx(sc.partition(sc.Graph.chain([1.0, 1.0]), devices=2), tmp_path / "bad")
    bare = dataclasses.replace(t, source=None)  # a trace built by hand: the model must be given
    with pytest.raises(InvalidArgumentError, match="model must be"):
        bare.extract_onnx(plan, tmp_path / "bare")
    assert len(bare.extract_onnx(plan, tmp_path / "given", path)) == 2


# ----------------------------------------------------------------------- device= and a callable cost
def deep_model(torch):
    """A chain of 9 operators whose FLOPs sit in the middle (the 256 x 256 linear)."""
    nn = torch.nn
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 8), nn.ReLU(),
                         nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8)).eval()


def same_but_compute(a, b):
    """The graphs differ at most in the nodes' compute times; the side tables are the same."""
    keep = ("id", "memory", "comm", "kinds", "colocation", "backward", "name")
    fields = [[[getattr(n, f) for f in keep] for n in t.graph.nodes] for t in (a, b)]
    assert fields[0] == fields[1]
    assert (a.graph.edges, a.graph.defaults) == (b.graph.edges, b.graph.defaults)
    assert (a.order, dict(a.flops), dict(a.output_bytes), dict(a.memory), dict(a.targets), dict(a.modules)) == \
        (b.order, dict(b.flops), dict(b.output_bytes), dict(b.memory), dict(b.targets), dict(b.modules))


def test_device_moves_the_model_in_place_and_copies_the_inputs():
    torch = require_extra("torch", "torch")
    import collections

    import stagecut.torch
    from stagecut.errors import InvalidArgumentError
    from stagecut.torch import _to_device

    model, x = seq_model(torch), torch.randn(4, 8)
    t = stagecut.torch.trace(model, (x,), bandwidth=BW, flops_per_s=1e9)
    for device in ("cpu", torch.device("cpu")):
        same_trace(stagecut.torch.trace(model, (x,), bandwidth=BW, flops_per_s=1e9, device=device), t)

    # "meta" (no data, no hardware) shows the move: the model moves in place, the caller's inputs stay
    meta = stagecut.torch.trace(model, (x,), bandwidth=BW, device="meta")
    assert {p.device.type for p in model.parameters()} == {"meta"} and x.device.type == "cpu"
    assert (meta.order, dict(meta.output_bytes), dict(meta.memory)) == (t.order, dict(t.output_bytes), dict(t.memory))
    # keyword inputs move too (a meta model on a CPU scale would fail)
    scaled = torch.nn.Linear(8, 8)
    model_kw = type("Scaled", (torch.nn.Module,), {
        "__init__": lambda self: (torch.nn.Module.__init__(self), setattr(self, "fc", scaled))[0],
        "forward": lambda self, x, *, scale: self.fc(x * scale["s"][0]).relu()})()
    kw = {"scale": {"s": [torch.randn(3, 8)]}}
    on_meta = stagecut.torch.trace(model_kw, (torch.randn(3, 8),), kw, bandwidth=BW, device="meta")
    assert len(on_meta.order) == 3 and kw["scale"]["s"][0].device.type == "cpu"

    Pair = collections.namedtuple("Pair", "a b")
    a, b, c = torch.randn(2), torch.randn(3), torch.randn(1)
    moved = _to_device((a, [b, {"k": c, "n": 3}], Pair(a, "s"), None), torch.device("meta"))
    assert [v.device.type for v in (moved[0], moved[1][0], moved[1][1]["k"], moved[2].a)] == ["meta"] * 4
    assert (moved[1][1]["n"], moved[2].b, moved[3], type(moved[2]), type(moved[1])) == (3, "s", None, Pair, list)
    assert [v.shape for v in (moved[0], moved[1][0], moved[1][1]["k"])] == [a.shape, b.shape, c.shape]
    assert {v.device.type for v in (a, b, c)} == {"cpu"}

    for bad in ("nonsense:0", 3) + (() if torch.cuda.is_available() else ("cuda:0",)):
        with pytest.raises(InvalidArgumentError, match="device"):
            stagecut.torch.trace(seq_model(torch), (x,), bandwidth=BW, device=bad)


def test_callable_cost_sets_every_node_time_and_the_plan_follows():
    torch = require_extra("torch", "torch")
    import math
    import warnings

    import stagecut as sc
    import stagecut.torch
    from stagecut.errors import InvalidArgumentError, StagecutWarning
    from stagecut.frontends.torch import trace_torch

    model, x = deep_model(torch), torch.randn(4, 8)
    flop = stagecut.torch.trace(model, (x,), bandwidth=BW, flops_per_s=1e9)
    seen = []

    def cost(r):
        return 1e-3 * (1 + r.flops / 1e9) + r.output_bytes / 1e12 + r.param_bytes / 1e13 + 1e-4 * r.position

    t = stagecut.torch.trace(model, (x,), bandwidth=BW, cost=lambda r: seen.append(r) or cost(r))
    assert t.timing == "callable" and [r.id for r in seen] == list(t.order) == list(flop.order)
    for i, r in enumerate(seen):  # each record is what the trace holds about its node
        assert (r.target, r.modules, r.flops, r.output_bytes, r.param_bytes, r.position) == \
            (t.targets[r.id], t.modules[r.id], t.flops[r.id], t.output_bytes[r.id], t.memory[r.id], i)
        assert r.module == (r.modules[-1] if r.modules else "")
    with pytest.raises(dataclasses.FrozenInstanceError):
        seen[0].flops = 0.0
    assert [n.compute for n in t.graph.nodes] == [{"accelerator": cost(r)} for r in seen]  # exactly
    assert len({n.compute["accelerator"] for n in t.graph.nodes}) == len(t.order)
    same_but_compute(t, flop)

    # the plan is made on the callable's times: 9 equal operators on 3 devices -> 3 + 3 + 3
    flat = stagecut.torch.trace(model, (x,), bandwidth=BW, cost=lambda r: 1e-3)
    plans = {name: sc.partition(tr.graph, devices=3) for name, tr in (("flops", flop), ("callable", flat))}
    stages = {name: [p.assignment()[v] for v in flop.order] for name, p in plans.items()}
    assert stages["callable"] == [0, 0, 0, 1, 1, 1, 2, 2, 2] != stages["flops"]
    assert plans["callable"].objective == sc.evaluate(flat.graph, plans["callable"].device_of()).objective
    assert plans["callable"].objective < sc.evaluate(flat.graph, plans["flops"].device_of()).objective
    assert 3e-3 < plans["callable"].objective < 3.1e-3

    # training: each backward node is backward_factor x its forward node's callable time
    train = stagecut.torch.trace(model, x, bandwidth=BW, cost=cost, training=True, backward_factor=3.0)
    same_but_compute(train, trace_torch(model, x, bandwidth=BW, training=True, backward_factor=3.0))
    for v in t.order:
        fwd = t.graph.node(v).compute["accelerator"]
        assert train.graph.node(v).compute["accelerator"] == fwd
        assert train.graph.node(f"{v}_bwd").compute["accelerator"] == pytest.approx(3 * fwd, rel=1e-12)
    with pytest.raises(InvalidArgumentError, match="backward_factor"):
        stagecut.torch.trace(model, x, bandwidth=BW, cost=cost, training=True, backward_factor=-1.0)

    # bad returns name the node and cost
    victim = flop.order[3]
    for bad in (-1.0, math.nan, math.inf, "0.1", None, True):
        with pytest.raises(InvalidArgumentError, match=rf"cost.*{victim!r}"):
            stagecut.torch.trace(model, x, bandwidth=BW, cost=lambda r, bad=bad: bad if r.id == victim else 0.0)
    with pytest.raises(InvalidArgumentError, match="flops_per_s"):
        stagecut.torch.trace(model, x, bandwidth=BW, cost=cost, flops_per_s=0)

    # the units check runs on the callable's times, not on the discarded FLOP-model times
    acts = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh(), torch.nn.Sigmoid())
    with pytest.warns(StagecutWarning, match="bandwidth"):  # 1 FLOP per 4 bytes at 1e12 FLOP/s over 1e9 B/s
        stagecut.torch.trace(acts, torch.randn(64, 64), bandwidth=BW)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stagecut.torch.trace(acts, torch.randn(64, 64), bandwidth=BW, cost=lambda r: 1e-3)
    with pytest.warns(StagecutWarning, match="bandwidth"):
        stagecut.torch.trace(acts, torch.randn(64, 64), bandwidth=BW, cost=lambda r: 1e-12)
