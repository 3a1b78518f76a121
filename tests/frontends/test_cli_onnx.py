"""The command line on ONNX models: MODEL.onnx as the GRAPH of any subcommand (FLOP times at
1e12 FLOP/s, a 10 GB/s link, converted to ms) and ``stagecut trace MODEL.onnx -o GRAPH.json``."""

import json

import numpy as np
import pytest

from frontends.extras import require_extra

onnx = require_extra("onnx", "onnx")
from onnx import TensorProto, helper, numpy_helper

import stagecut as sc
from stagecut.cli.main import main
from stagecut.frontends.onnx import trace_onnx


def chain_model(path, batch=64, width=256, layers=6):
    """``layers`` MatMul + Relu pairs: a chain with real compute."""
    rng = np.random.default_rng(0)
    inits, nodes, prev = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32), f"W{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"W{i}"], [f"m{i}"], name=f"mm{i}"))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"r{i}"], name=f"relu{i}"))
        prev = f"r{i}"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [batch, width])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def run(capsys, *argv):
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_partition_reads_an_onnx_file(tmp_path, capsys):
    path = chain_model(tmp_path / "chain.onnx")
    code, out, err = run(capsys, "partition", path, "-k", 4, "--json")
    assert code == 0, err
    result = json.loads(out)
    t = trace_onnx(path, bandwidth=1e10, flops_per_s=1e12)
    seconds = sc.partition(t.graph, devices=4)
    assert result["objective"] == pytest.approx(seconds.objective * 1e3)  # ms
    assert len(result["stages"]) == 4
    code, out, _ = run(capsys, "partition", path, "-k", 4)
    assert code == 0 and "mm0" in out


def test_trace_writes_a_workload_in_ms_and_bytes(tmp_path, capsys):
    path = chain_model(tmp_path / "chain.onnx", batch=8, width=32, layers=2)
    out_path = tmp_path / "g.json"
    code, out, err = run(capsys, "trace", path, "-o", out_path, "--bandwidth", "1GB/s", "--flops-per-s", "1e9")
    assert code == 0, err
    assert "4 nodes" in out
    data = json.loads(out_path.read_text())
    by_id = {n["id"]: n for n in data["nodes"]}
    assert by_id["mm0"]["fpgaLatency"] == pytest.approx(2 * 8 * 32 * 32 / 1e9 * 1e3)  # ms
    assert by_id["mm0"]["size"] == 32 * 32 * 4  # bytes
    cost = {(e["sourceId"], e["destId"]): e["cost"] for e in data["edges"]}
    assert cost[("mm0", "relu0")] == pytest.approx(8 * 32 * 4 / 1e9 * 1e3)  # ms at 1 GB/s
    code, out, err = run(capsys, "partition", out_path, "-k", 2, "--json")
    assert code == 0, err


def test_trace_with_the_onnxruntime_profiler(tmp_path, capsys):
    require_extra("onnxruntime", "onnx")
    path = chain_model(tmp_path / "chain.onnx", batch=16, width=64, layers=2)
    out_path = tmp_path / "g.json"
    code, out, err = run(capsys, "trace", path, "-o", out_path, "--profile", "onnxruntime", "--repeat", 2)
    assert code == 0, err
    data = json.loads(out_path.read_text())
    assert all(n["fpgaLatency"] > 0 for n in data["nodes"] if n["id"].startswith("mm"))


def test_trace_bad_input(tmp_path, capsys):
    path = chain_model(tmp_path / "chain.onnx", batch=2, width=4, layers=1)
    code, _, err = run(capsys, "trace", tmp_path / "g.json", "-o", tmp_path / "h.json")
    assert code == 2 and "ONNX model" in err
    code, _, err = run(capsys, "trace", path, "-o", tmp_path / "h.json", "--dims", "batch")
    assert code == 2 and "NAME=SIZE" in err
    code, _, err = run(capsys, "trace", path, "-o", path)
    assert code == 2 and "input" in err
    code, _, err = run(capsys, "partition", tmp_path / "missing.onnx", "-k", 2)
    assert code == 2 and "cannot read the ONNX model" in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------------ hostile ONNX files
def _relu_model(nodes, inputs=("x",), outputs=("y",), inits=()):
    io = lambda names: [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 2]) for n in names]  # noqa: E731
    graph = helper.make_graph(nodes, "g", io(inputs), io(outputs), list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


HOSTILE_ONNX = {
    # name: (bytes or a model, substring of the one-line error)
    "empty file": (b"", "ONNX"),
    "text file": (b"this is not a model\n", "not a readable ONNX model"),
    "JSON": (b'{"nodes": []}', "not a readable ONNX model"),
    "truncated model": ("truncated", "not a readable ONNX model"),
    "random bytes": (bytes(range(256)) * 4, "not a readable ONNX model"),
    "self-loop": (_relu_model([helper.make_node("Add", ["x", "y"], ["y"], name="loop")]), "own output"),
    "two producers": (_relu_model([helper.make_node("Relu", ["x"], ["y"], name="a"),
                                   helper.make_node("Relu", ["x"], ["y"], name="b")]), "two producers"),
    "undefined input": (_relu_model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")]), "ghost"),
    "output of a graph input": (_relu_model([helper.make_node("Relu", ["y"], ["x"], name="back")],
                                            inputs=("x", "y"), outputs=("x",)), "two producers"),
    "unknown operator": (_relu_model([helper.make_node("NoSuchOp", ["x"], ["y"], name="odd")]), "onnx.checker"),
    "wrong arity": (_relu_model([helper.make_node("Relu", ["x", "x"], ["y"], name="r2")]), "onnx.checker"),
    "no operator": (_relu_model([], outputs=("x",)), "no operator"),
}


def _write(tmp_path, name, content):
    path = tmp_path / (name.replace(" ", "_") + ".onnx")
    if content == "truncated":
        good = _relu_model([helper.make_node("Relu", ["x"], ["y"], name="r")]).SerializeToString()
        path.write_bytes(good[: len(good) // 2])
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_bytes(content.SerializeToString())
    return path


@pytest.mark.parametrize("case", sorted(HOSTILE_ONNX))
@pytest.mark.parametrize("command", ["partition", "latency", "trace"])
def test_a_hostile_onnx_file_is_one_line_and_exit_2(case, command, tmp_path, capsys):
    content, expected = HOSTILE_ONNX[case]
    path = _write(tmp_path, case, content)
    argv = [command, str(path)] + (["-o", str(tmp_path / "g.json")] if command == "trace" else ["-k", "2"])
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, (case, err)
    assert len(err.splitlines()) == 1 and err.startswith("stagecut: error: ") and expected in err, err


def test_external_data_outside_the_model_folder_is_refused(tmp_path, capsys):
    model = _relu_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                        inits=[numpy_helper.from_array(np.ones((2, 2), np.float32), "w")])
    w = model.graph.initializer[0]
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    entry = w.external_data.add()
    entry.key, entry.value = "location", "../../../../etc/passwd"
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    assert main(["partition", str(path), "-k", "2"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "internal error" not in err and "ONNX" in err, err
    with pytest.raises(sc.InvalidGraphError):
        trace_onnx(str(path), bandwidth=1e9)


def test_latency_reads_onnx(tmp_path, capsys):
    path = tmp_path / "chain.onnx"
    chain_model(path, batch=4, width=32, layers=3)
    assert main(["latency", str(path), "-k", "2", "--method", "heft", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "Schedule" and sum(len(s["nodes"]) for s in out["stages"]) == 6
