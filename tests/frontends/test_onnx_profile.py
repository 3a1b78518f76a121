"""ONNX front end with onnxruntime's profiler: per-node times from the profiler JSON, and the
round trip: a torch model exported to ONNX, loaded with profile="onnxruntime", partitioned,
extracted into stage files that run in onnxruntime and compose to the original output."""

import warnings

import numpy as np
import pytest

from frontends.extras import require_extra

onnx = require_extra("onnx", "onnx")
ort = require_extra("onnxruntime", "onnx")
torch = require_extra("torch", "torch")
nn = torch.nn

import stagecut as sc
from stagecut.errors import InvalidArgumentError, StagecutWarning
from stagecut.frontends._ort import kernel_times
from stagecut.frontends.onnx import _SHAPE_ONLY, extract_stages, trace_onnx

BW = 1e9


class Net(nn.Module):
    """A conv block, a residual MLP and a head: Conv, Relu, Flatten, Gemm, Add nodes."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc1 = nn.Linear(8 * 8 * 8, 128)
        self.fc2 = nn.Linear(128, 128)
        self.head = nn.Linear(128, 10)

    def forward(self, x):
        h = torch.relu(self.conv(x)).flatten(1)
        h = torch.relu(self.fc1(h))
        return self.head(h + torch.relu(self.fc2(h)))


def export(tmp_path, batch=16):
    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(batch, 3, 8, 8)
    path = tmp_path / "net.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter says it is legacy
        torch.onnx.export(model, (x,), str(path), input_names=["x"], output_names=["y"], dynamo=False)
    with torch.no_grad():
        y = model(x).numpy()
    return path, x.numpy(), y


def test_round_trip_with_profiled_times(tmp_path):
    path, x, y = export(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StagecutWarning)  # every operator is in the profile
        t = trace_onnx(path, bandwidth="10GB/s", profile="onnxruntime", inputs={"x": x}, repeat=3)
    assert t.timing == "onnxruntime" and any("onnxruntime profiler" in n for n in t.notes)
    model = onnx.load(str(path))
    kinds = {v: n.op_type for v, n in zip(t.order, [n for n in model.graph.node if n.op_type != "Constant"])}
    compute = [v for v in t.order if kinds[v] not in _SHAPE_ONLY]
    assert {"Conv", "Gemm", "Relu", "Add"} <= {kinds[v] for v in compute}
    times = {v: t.graph.node(v).compute["accelerator"] for v in t.order}
    assert all(times[v] > 0 for v in compute), times
    assert all(times[v] < 1.0 for v in t.order)  # seconds: microsecond-scale kernels, not microseconds
    flops = trace_onnx(path, bandwidth="10GB/s", flops_per_s=1e9)
    assert flops.timing == "flops" and {v: n.compute["accelerator"] for v, n in zip(flops.order, flops.graph.nodes)} \
        == {v: flops.flops[v] / 1e9 for v in flops.order}
    for k in (2, 3):
        plan = sc.partition(t.graph, devices=k)
        files = extract_stages(plan, t, path, tmp_path / f"k{k}")
        assert len(files) == k
        env = {"x": x}
        for f in files:
            session = ort.InferenceSession(str(f), providers=["CPUExecutionProvider"])
            values = session.run(None, {i.name: env[i.name] for i in session.get_inputs()})
            env.update(zip([o.name for o in session.get_outputs()], values))
        np.testing.assert_allclose(env["y"], y, rtol=1e-4, atol=1e-5)


def test_kernel_times_reads_the_profiler_json():
    events = [{"cat": "Session", "name": "model_run", "dur": 500}]
    for run, (a, b) in enumerate([(900, 50), (10, 20), (30, 40), (20, 60)]):
        events += [{"cat": "Node", "name": "fc_kernel_time", "dur": a, "args": {"run": run}},
                   {"cat": "Node", "name": "fc_fence_before", "dur": 1},
                   {"cat": "Node", "name": "relu_kernel_time", "dur": b}]
    times = kernel_times(events, warmup=1)
    assert times == {"fc": pytest.approx(20e-6), "relu": pytest.approx(40e-6)}
    assert kernel_times(events)["fc"] == pytest.approx(25e-6)
    with pytest.raises(InvalidArgumentError, match="duration"):
        kernel_times([{"cat": "Node", "name": "fc_kernel_time", "dur": -1}])


def test_operator_missing_from_the_profile_keeps_its_flop_time(tmp_path, monkeypatch):
    import stagecut.frontends._ort as ort_module

    path, x, _ = export(tmp_path, batch=2)
    real = ort_module.profile_onnxruntime

    def partial(proto, feeds, warmup, repeat):
        times = real(proto, feeds, warmup, repeat)
        times.pop(proto.graph.node[0].name)
        return times

    monkeypatch.setattr(ort_module, "profile_onnxruntime", partial)
    with pytest.warns(StagecutWarning, match="not in onnxruntime's profile"):
        t = trace_onnx(path, bandwidth=BW, profile="onnxruntime", flops_per_s=1e9, repeat=1)
    first = t.order[0]
    assert t.graph.node(first).compute["accelerator"] == pytest.approx(t.flops[first] / 1e9)


def test_operators_without_unique_names_are_profiled(tmp_path):
    path, x, _ = export(tmp_path, batch=4)
    model = onnx.load(str(path))
    for node in model.graph.node:
        node.name = "op"  # all the same: the trace calls them op, <op_type>_<position>...
    with warnings.catch_warnings():
        warnings.simplefilter("error", StagecutWarning)
        t = trace_onnx(model, bandwidth=BW, profile="onnxruntime", repeat=1)
    assert t.order[:2] == ("op", "Relu_1")
    assert all(n.compute["accelerator"] > 0 for n in t.graph.nodes if "Gemm" in n.id)


def test_profile_bad_input(tmp_path):
    path, x, _ = export(tmp_path, batch=2)
    with pytest.raises(InvalidArgumentError, match="profile"):
        trace_onnx(path, bandwidth=BW, profile="measure")
    with pytest.raises(InvalidArgumentError, match="not an input"):
        trace_onnx(path, bandwidth=BW, profile="onnxruntime", inputs={"x": x, "z": x})
    with pytest.raises(InvalidArgumentError, match="onnxruntime could not run"):
        trace_onnx(path, bandwidth=BW, profile="onnxruntime", inputs={"x": x[:, :2]})
    with pytest.raises(InvalidArgumentError, match="repeat"):
        trace_onnx(path, bandwidth=BW, profile="onnxruntime", repeat=0)
    model = onnx.load(str(path))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    with pytest.warns(StagecutWarning), pytest.raises(InvalidArgumentError, match="dims="):
        trace_onnx(model, bandwidth=BW, profile="onnxruntime")
    t = trace_onnx(model, bandwidth=BW, profile="onnxruntime", dims={"batch": 4}, repeat=1)
    assert t.output_bytes[t.order[0]] == 4 * 8 * 8 * 8 * 4
