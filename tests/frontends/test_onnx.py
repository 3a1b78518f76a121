"""The ONNX front end on a small model built here with onnx.helper: nodes, initializer bytes as
memory (a shared weight counted once and its users colocated), output bytes from shape
inference, FLOP times, symbolic dimensions, files and bad input."""

import warnings

import numpy as np
import pytest

from frontends.extras import require_extra

onnx = require_extra("onnx", "onnx")
from onnx import TensorProto, helper, numpy_helper

import stagecut as sc
from stagecut.errors import BackendUnavailableError, InvalidArgumentError, StagecutWarning
from stagecut.frontends.onnx import from_onnx, trace_onnx

BW = 1e9


def small_model(batch=4):
    """x[b,8] -Gemm(W1,B1)-> h[b,16] -Relu-> r -MatMul(W2)-> m[b,16] -Add(r)-> s -MatMul(W2)-> y[b,16].
    W2 is used twice (a shared weight); a Constant feeds a Reshape of the output."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "W1"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "B1"),
             numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "W2")]
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [-1, 4])
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "B1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "W2"], ["m"], name="mm1"),
        helper.make_node("Add", ["m", "r"], ["s"], name="add"),
        helper.make_node("MatMul", ["s", "W2"], ["y0"], name="mm2"),
        helper.make_node("Constant", [], ["shp"], name="const", value=shape),
        helper.make_node("Reshape", ["y0", "shp"], ["y"], name=""),
    ]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_nodes_memory_bytes_flops():
    t = trace_onnx(small_model(), bandwidth=BW, flops_per_s=1e9)
    g = t.graph
    assert t.order == ("fc1", "relu", "mm1", "add", "mm2", "Reshape_5")  # the Constant is folded
    assert sum(n.memory for n in g.nodes) == (8 * 16 + 16 + 16 * 16) * 4 + 2 * 8
    assert g.node("fc1").memory == (8 * 16 + 16) * 4 and g.node("mm1").memory == 16 * 16 * 4
    assert g.node("mm1").colocation is not None and g.node("mm1").colocation == g.node("mm2").colocation
    assert all(t.output_bytes[v] == 4 * 16 * 4 for v in t.order)
    assert g.node("add").comm == pytest.approx(4 * 16 * 4 / BW)
    assert t.flops["fc1"] == 2 * 4 * 8 * 16 + 4 * 16 and t.flops["mm1"] == 2 * 4 * 16 * 16
    assert t.flops["add"] == 4 * 16 and t.flops["Reshape_5"] == 0
    assert g.node("fc1").compute["accelerator"] == pytest.approx(t.flops["fc1"] / 1e9)
    assert set(g.edges) == {("fc1", "relu"), ("relu", "mm1"), ("relu", "add"), ("mm1", "add"), ("add", "mm2"),
                            ("mm2", "Reshape_5")}
    assert any("Constant" in n for n in t.notes) and any("<op_type>" in n for n in t.notes)
    plan = sc.partition(g, devices=2)
    assert plan.status == "optimal"
    assert plan.assignment()["mm1"] == plan.assignment()["mm2"]


def test_symbolic_batch_needs_dims(tmp_path):
    model = small_model(batch="batch")
    with pytest.warns(StagecutWarning) as caught:
        t = trace_onnx(model, bandwidth=BW)
    messages = [str(w.message) for w in caught]
    assert any("dims=" in m for m in messages) and any("every node's output size is 0" in m for m in messages)
    assert t.output_bytes["fc1"] == 0
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error", StagecutWarning)
        t2 = trace_onnx(path, bandwidth="1GB/s", dims={"batch": 3})
    assert t2.output_bytes["fc1"] == 3 * 16 * 4 and t2.flops["mm1"] == 2 * 3 * 16 * 16
    assert t2.output_bytes["Reshape_5"] == 3 * 16 * 4
    assert isinstance(from_onnx(str(path), bandwidth=BW, dims={"batch": 3}), sc.Graph)


def test_bad_input(tmp_path, monkeypatch):
    with pytest.raises(InvalidArgumentError, match="ModelProto"):
        trace_onnx(42, bandwidth=BW)
    with pytest.raises(InvalidArgumentError, match="cannot read"):
        trace_onnx(tmp_path / "missing.onnx", bandwidth=BW)
    with pytest.raises(InvalidArgumentError, match="bandwidth"):
        trace_onnx(small_model(), bandwidth=-1)
    import sys

    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(BackendUnavailableError, match=r"stagecut\[onnx\]"):
        trace_onnx("model.onnx", bandwidth=BW)


def test_extracted_stages_compose_to_the_model(tmp_path):
    """ONNX round trip: partition, extract one file per stage, run them in order with onnx's
    reference evaluator, each fed from the tensors so far: the model's output."""
    from onnx.reference import ReferenceEvaluator

    from stagecut.frontends.onnx import extract_stages

    model = small_model()
    t = trace_onnx(model, bandwidth=BW, flops_per_s=1e9)
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    (expected,) = ReferenceEvaluator(model).run(None, {"x": x})
    for k in (2, 3):
        plan = sc.partition(t.graph, devices=k)
        files = extract_stages(plan, t, model, tmp_path / f"k{k}")
        assert len(files) == len(plan.stages) and all(f.exists() for f in files)
        env = {"x": x}
        for f in files:
            stage = onnx.load(str(f))
            assert {n.name for n in stage.graph.node if n.op_type != "Constant"} <= set(t.order) | {""}
            run = ReferenceEvaluator(stage)
            values = run.run(None, {i.name: env[i.name] for i in stage.graph.input})
            env.update(zip([o.name for o in stage.graph.output], values))
        np.testing.assert_allclose(env["y"], expected, rtol=1e-5)
    with pytest.raises(InvalidArgumentError, match="not over this trace"):
        extract_stages(sc.partition(sc.Graph.chain([1.0, 1.0]), devices=2), t, model, tmp_path / "bad")
