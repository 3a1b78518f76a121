"""The PyTorch front end on small models built here: node counts, parameter bytes, output bytes
against the tensors the modules really return (forward hooks, independent of the front end),
FLOP times, colocation of a module called twice, the fx fallback, and no isolated placeholder
nodes (so that ``auto`` stays on the exact DP)."""

import math
import subprocess
import sys
import warnings

import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
nn = torch.nn

import stagecut as sc
from stagecut.errors import BackendUnavailableError, InvalidArgumentError, StagecutWarning
from stagecut.frontends.torch import from_torch, output_bytes, trace_torch

BW = 1e9  # bytes per second


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()


class ResBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return torch.relu(x + self.conv2(torch.relu(self.bn(self.conv1(x)))))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.block = ResBlock(4)
        self.head = nn.Linear(4 * 8 * 8, 5)

    def forward(self, x):
        return self.head(torch.flatten(self.block(self.stem(x)), 1))


class Twice(nn.Module):
    """``fc`` is called twice (a shared weight); ``out`` once."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.out = nn.Linear(6, 2)

    def forward(self, x):
        return self.out(torch.relu(self.fc(torch.relu(self.fc(x)))))


def leaf_outputs(model, x):
    """Bytes of each leaf module's output, by forward hooks on a plain run of the model."""
    sizes = {}
    hooks = [m.register_forward_hook(lambda _m, _a, out, name=name: sizes.__setitem__(
        name, out.numel() * out.element_size())) for name, m in model.named_modules() if not list(m.children())]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return sizes


def last_node_of(trace, module):
    return [v for v in trace.order if trace.modules[v] and trace.modules[v][-1] == module][-1]


def weight_bytes(model, buffers=True):
    tensors = list(model.parameters()) + (list(model.buffers()) if buffers else [])
    return sum(t.numel() * t.element_size() for t in tensors)


def test_mlp_nodes_bytes_flops():
    model, x = mlp(), torch.randn(3, 8)
    t = trace_torch(model, (x,), bandwidth=BW, flops_per_s=1e9)
    g = t.graph
    assert t.method == "export"
    assert len(g) == 3 and len(g.edges) == 2  # linear, relu, linear: the placeholders are not nodes
    assert sum(n.memory for n in g.nodes) == weight_bytes(model)
    assert [t.output_bytes[v] for v in t.order] == [3 * 16 * 4, 3 * 16 * 4, 3 * 4 * 4]
    for n in g.nodes:
        assert n.comm == pytest.approx(t.output_bytes[n.id] / BW)
    first = t.order[0]
    assert t.flops[first] == 2 * 3 * 8 * 16  # the matmul of Linear(8, 16) on a batch of 3
    assert g.node(first).compute["accelerator"] == pytest.approx(2 * 3 * 8 * 16 / 1e9)
    assert t.modules[first] == ("0",) and t.children == ("0", "1", "2")


def test_cnn_residual_output_bytes_match_the_modules_outputs():
    model, x = SmallCNN().eval(), torch.randn(2, 3, 8, 8)
    t = trace_torch(model, x, bandwidth="1GB/s")
    sizes = leaf_outputs(model, x)
    for module in ("stem", "block.conv1", "block.bn", "block.conv2", "head"):
        assert t.output_bytes[last_node_of(t, module)] == sizes[module], module
    # every parameter and buffer an operator uses is counted once; BatchNorm's step counter is not used in eval
    unused = model.block.bn.num_batches_tracked
    assert sum(n.memory for n in t.graph.nodes) == weight_bytes(model) - unused.numel() * unused.element_size()
    assert any("used by no operator" in note for note in t.notes) and len(set(t.notes)) == len(t.notes)
    # no isolated node: auto runs the exact DP
    assert all(t.graph.succ[i] or t.graph.pred[i] for i in range(len(t.graph)))
    plan = sc.partition(t.graph, devices=3)
    assert plan.status == "optimal" and not any("dpl" in note.lower() for note in plan.notes)


def test_module_called_twice_is_colocated_and_counted_once():
    model, x = Twice().eval(), torch.randn(4, 6)
    t = trace_torch(model, x, bandwidth=BW)
    assert t.calls["fc"] == 2 and t.calls["out"] == 1
    fc_nodes = [v for v in t.order if "fc" in t.modules[v]]
    assert len(fc_nodes) >= 2
    classes = {t.graph.node(v).colocation for v in fc_nodes}
    assert len(classes) == 1 and None not in classes
    assert sum(n.memory for n in t.graph.nodes) == weight_bytes(model)
    plan = sc.partition(t.graph, devices=2)
    assert len({plan.assignment()[v] for v in fc_nodes}) == 1


def test_measured_times_are_positive_and_the_model_is_restored():
    model, x = SmallCNN().train(), torch.randn(2, 3, 8, 8)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    t = trace_torch(model, x, bandwidth=BW, timing="measure", warmup=1, repeat=3)
    assert t.timing == "measure"
    assert all(n.compute["accelerator"] > 0 for n in t.graph.nodes)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_fx_fallback_when_export_fails(monkeypatch):
    def refuse(*a, **k):
        raise RuntimeError("no export today")

    monkeypatch.setattr(torch.export, "export", refuse)
    model, x = mlp(), torch.randn(3, 8)
    t = trace_torch(model, x, bandwidth=BW)
    assert t.method == "fx" and any("no export today" in note for note in t.notes)
    assert len(t.graph) == 3 and sum(n.memory for n in t.graph.nodes) == weight_bytes(model)
    assert [t.output_bytes[v] for v in t.order] == [3 * 16 * 4, 3 * 16 * 4, 3 * 4 * 4]
    with pytest.raises(InvalidArgumentError, match="torch.export could not trace"):
        trace_torch(model, x, bandwidth=BW, tracer="export")

    class DataDependent(nn.Module):
        def forward(self, v):
            return v * 2 if v.sum() > 0 else v

    with pytest.raises(InvalidArgumentError, match="symbolic_trace failed too"):
        trace_torch(DataDependent(), x, bandwidth=BW)


def test_from_torch_and_bad_arguments():
    model, x = mlp(), torch.randn(3, 8)
    assert isinstance(from_torch(model, x, bandwidth=BW), sc.Graph)
    with pytest.raises(InvalidArgumentError, match="timing"):
        trace_torch(model, x, bandwidth=BW, timing="guess")
    with pytest.raises(InvalidArgumentError, match="bandwidth"):
        trace_torch(model, x, bandwidth=0)
    with pytest.raises(InvalidArgumentError, match="bandwidth"):
        trace_torch(model, x, bandwidth="25GB")
    with pytest.raises(InvalidArgumentError, match="nn.Module"):
        trace_torch(lambda v: v, x, bandwidth=BW)


def test_communication_far_above_compute_warns():
    model, x = mlp(), torch.randn(3, 8)
    with pytest.warns(StagecutWarning, match="bytes per second"):
        t = trace_torch(model, x, bandwidth=1.0, flops_per_s=1e15)  # 1 byte/s: a unit mix-up
    assert any("1000x" in note for note in t.notes)


def test_output_bytes_of_values():
    assert output_bytes(torch.zeros(2, 3, dtype=torch.float16)) == 12
    assert output_bytes((torch.zeros(4), torch.zeros(2, dtype=torch.int64))) == 32
    assert output_bytes(3) == 8 and output_bytes(None) == 0
    assert output_bytes(object()) is None


def test_import_stagecut_does_not_import_torch():
    code = ("import sys, stagecut, stagecut.frontends, stagecut.frontends.torch, stagecut.frontends.export; "
            "sys.exit('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_missing_torch_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    with pytest.raises(BackendUnavailableError, match=r"stagecut\[torch\]"):
        trace_torch(object(), (), bandwidth=BW)


def test_no_silent_zero_sizes():
    with warnings.catch_warnings():
        warnings.simplefilter("error", StagecutWarning)
        t = trace_torch(SmallCNN().eval(), torch.randn(1, 3, 8, 8), bandwidth=BW)
    assert all(b > 0 for b in t.output_bytes.values())
    assert math.isclose(sum(n.comm for n in t.graph.nodes), sum(t.output_bytes.values()) / BW)


def test_training_adds_colocated_backward_nodes():
    model, x = mlp(), torch.randn(3, 8)
    fwd = trace_torch(model, x, bandwidth=BW, flops_per_s=1e9)
    t = trace_torch(model, x, bandwidth=BW, flops_per_s=1e9, training=True, backward_factor=2.0)
    g = t.graph
    assert len(g) == 6 and sum(n.backward for n in g.nodes) == 3 and t.order == fwd.order
    for v in t.order:
        f, b = g.node(v), g.node(f"{v}_bwd")
        assert b.backward and b.colocation == f.colocation is not None
        assert b.compute["accelerator"] == pytest.approx(2 * f.compute["accelerator"]) and b.memory == 0
    first, second = t.order[:2]
    assert (second + "_bwd", first + "_bwd") in g.edges and g.node(second + "_bwd").comm == g.node(first).comm
    assert sum(n.memory for n in g.nodes) == weight_bytes(model)
    plan = sc.partition(g, devices=2)
    where = plan.assignment()
    assert all(where[v] == where[f"{v}_bwd"] for v in t.order)
