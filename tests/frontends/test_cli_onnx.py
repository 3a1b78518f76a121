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
