"""Bad input raises a clear stagecut exception naming the culprit; builders round-trip."""

import json
import math

import networkx as nx
import pytest

import stagecut as sc
from stagecut.graph import Node


def n(i, **kw):
    kw.setdefault("compute", {"accelerator": 1.0})
    return Node(id=i, **kw)


def test_empty_graph():
    with pytest.raises(sc.InvalidGraphError, match="empty"):
        sc.Graph([], [])


def test_duplicate_id():
    with pytest.raises(sc.InvalidGraphError, match="duplicate node id 'x'"):
        sc.Graph([n("x"), n("x")], [])


def test_unknown_endpoint():
    with pytest.raises(sc.InvalidGraphError, match="unknown target node 'zz'"):
        sc.Graph([n("a")], [("a", "zz")])


def test_cycle_is_reported():
    with pytest.raises(sc.CycleError) as info:
        sc.Graph([n("a"), n("b"), n("c")], [("a", "b"), ("b", "c"), ("c", "b")])
    assert sorted(info.value.cycle) == ["b", "c"]
    assert "'b'" in str(info.value) and "'c'" in str(info.value)
    with pytest.raises(sc.CycleError, match="self-loop"):
        sc.Graph([n("a")], [("a", "a")])


@pytest.mark.parametrize("field,value", [("memory", math.nan), ("comm", math.inf), ("memory", -1.0)])
def test_bad_numbers(field, value):
    with pytest.raises(sc.InvalidGraphError, match=f"node 'q': {field}"):
        sc.Graph([n("q", **{field: value})], [])


@pytest.mark.parametrize("value", [math.nan, -2.0, math.inf, "fast"])
def test_bad_compute_time(value):
    with pytest.raises(sc.InvalidGraphError, match=r"node 7: compute\['accelerator'\]"):
        sc.Graph([n(7, compute={"accelerator": value})], [])


def test_errors_are_value_errors():
    assert issubclass(sc.InvalidGraphError, ValueError)
    assert issubclass(sc.CycleError, sc.InvalidGraphError)
    assert issubclass(sc.TooManyIdealsError, sc.StagecutError)


def test_bad_parameters():
    g = sc.Graph.chain([1.0, 2.0])
    with pytest.raises(sc.errors.InvalidArgumentError, match="devices"):
        sc.partition(g, devices=-1)
    with pytest.raises(sc.errors.InvalidArgumentError, match="no devices"):
        sc.partition(g, devices=0, cpus=0)
    with pytest.raises(sc.errors.InvalidArgumentError, match="memory"):
        sc.partition(g, memory=math.nan)
    with pytest.raises(sc.errors.InvalidArgumentError, match="method"):
        sc.partition(g, method="magic")
    with pytest.raises(sc.errors.InvalidArgumentError, match="max_ideals"):
        sc.partition(g, max_ideals=0)


def test_backward_to_forward_edge():
    g = sc.Graph([n("f"), n("b", backward=True)], [("b", "f")])
    with pytest.raises(sc.InvalidGraphError, match="backward node to a forward node"):
        sc.partition(g)


def workload(**over):
    data = {"maxSizePerFPGA": 10.0, "maxFPGAs": 2, "maxCPUs": 1,
            "nodes": [{"id": 1, "supportedOnFpga": 1, "cpuLatency": 5.0, "fpgaLatency": 1.0,
                       "isBackwardNode": 0, "size": 3.0},
                      {"id": 2, "supportedOnFpga": 0, "cpuLatency": 2.0, "fpgaLatency": 1.0,
                       "isBackwardNode": 0, "size": 3.0, "colorClass": 9}],
            "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5}]}
    data.update(over)
    return data


def test_workload_mapping_and_roundtrip(tmp_path):
    g = sc.workload_from_dict(workload())
    assert g.defaults == {"accelerators": 2, "cpus": 1, "memory": 10.0}
    assert g.node(1).comm == 0.5 and g.node(2).comm == 0.0
    assert not g.node(2).supports("accelerator") and g.node(2).colocation == 9
    path = tmp_path / "w.json"
    sc.write_workload(g, path)
    g2 = sc.read_workload(path)
    assert g2.nodes == g.nodes and g2.edges == g.edges and g2.defaults == g.defaults


def test_workload_errors(tmp_path):
    bad = workload()
    del bad["nodes"][1]["cpuLatency"]
    with pytest.raises(sc.InvalidGraphError, match="node 2: missing field 'cpuLatency'"):
        sc.workload_from_dict(bad)
    bad = workload(edges=[{"sourceId": 1, "destId": 2, "cost": 0.5}, {"sourceId": 1, "destId": 2, "cost": 0.9}])
    with pytest.raises(sc.InvalidGraphError, match="node 1 has two different outgoing edge costs"):
        sc.workload_from_dict(bad)
    bad = workload(edges=[{"sourceId": 1, "destId": 3, "cost": 0.5}])
    with pytest.raises(sc.InvalidGraphError, match="unknown target node 3"):
        sc.workload_from_dict(bad)
    p = tmp_path / "x.json"
    p.write_text("{not json")
    with pytest.raises(sc.InvalidGraphError, match="not valid JSON"):
        sc.read_workload(p)


def test_split_roundtrip_and_inference(tmp_path):
    g = sc.transformer_like(layers=1, training=True)
    plan = sc.partition(g, devices=2, cpus=0)
    fwd_only = {"fpgas": [{"nodes": [i for i in d.nodes if not g.node(i).backward]} for d in plan.stages],
                "cpus": []}
    # backward nodes follow their forward colocation class
    assert sc.split_from_dict(fwd_only, g) == plan.device_of()
    with pytest.raises(sc.InvalidGraphError, match="assigned twice"):
        sc.split_from_dict({"fpgas": [{"nodes": [0]}, {"nodes": [0]}]}, g)
    with pytest.raises(sc.InvalidGraphError, match="unknown node 'nope'"):
        sc.split_from_dict({"fpgas": [{"nodes": ["nope"]}]}, g)


def test_networkx_builder_with_bytes_and_bandwidth():
    G = nx.DiGraph()
    G.add_node("x", accelerator=2.0, cpu=8.0, out_bytes=400.0, memory=1.0)
    G.add_node("y", accelerator=3.0, out_bytes=0.0, colocation="c")
    G.add_edge("x", "y")
    g = sc.Graph.from_networkx(G, output_bytes="out_bytes", bandwidth=100.0)
    assert g.node("x").comm == 4.0 and not g.node("y").supports("cpu")
    p = sc.partition(g, devices=2)
    assert p.objective == 5.0  # one device (2 + 3) beats 2 + 4 | 3 + 4
    assert sc.partition(g, devices=2, method="dpl").objective == 5.0  # non-integer ids too
    G2 = g.to_networkx()
    assert sc.Graph.from_networkx(G2).nodes == g.nodes
    with pytest.raises(sc.InvalidGraphError, match="bandwidth"):
        sc.Graph.from_networkx(G, output_bytes="out_bytes")
    with pytest.raises(sc.InvalidGraphError, match="directed"):
        sc.Graph.from_networkx(nx.Graph())
    G.add_node("z")
    with pytest.raises(sc.InvalidGraphError, match="node 'z': no compute time"):
        sc.Graph.from_networkx(G)


def test_evaluator_reports_violations():
    g = sc.Graph.chain([1.0, 1.0, 1.0], memory=4.0)
    ev = sc.evaluate(g, {0: ("accelerator", 0), 1: ("accelerator", 1), 2: ("accelerator", 0)}, memory=6.0)
    assert not ev.contiguous  # device 0 holds 0 and 2 but not 1
    assert ev.feasible is False and any("memory" in i for i in ev.issues)
    with pytest.raises(sc.InvalidGraphError, match="unassigned"):
        sc.evaluate(g, {0: ("accelerator", 0)})
    ev = sc.evaluate(g, {i: ("accelerator", i) for i in range(3)}, devices=2)
    assert not ev.feasible and any("only 2" in i for i in ev.issues)


def test_cli_errors_exit_2(tmp_path, capsys):
    from stagecut.cli.main import main

    p = tmp_path / "w.json"
    bad = workload(edges=[{"sourceId": 1, "destId": 1, "cost": 0.5}])
    p.write_text(json.dumps(bad))
    assert main(["partition", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "self-loop" in err
    assert main(["partition", str(tmp_path / "missing.json")]) == 2


# ------------------------------------------------------------------ one rule per kind of value
def test_networkx_attributes_follow_the_same_rules():
    G = nx.DiGraph()
    G.add_node("a", accelerator=1.0, backward="0")
    with pytest.raises(sc.InvalidGraphError, match="node 'a': backward: '0' is not a boolean"):
        sc.Graph.from_networkx(G)
    G.nodes["a"].update(backward=False, kinds="cpu")
    with pytest.raises(sc.InvalidGraphError, match="kinds must be a set of device kinds"):
        sc.Graph.from_networkx(G)
    with pytest.raises(sc.InvalidGraphError, match="expected a networkx DiGraph, got dict"):
        sc.Graph.from_networkx({"a": 1})


def test_unhashable_edge_ends_and_malformed_edges_are_named():
    with pytest.raises(sc.InvalidGraphError, match=r"the target \['b'\] is not a node id"):
        sc.Graph([n("a"), n("b")], [("a", ["b"])])
    with pytest.raises(sc.InvalidGraphError, match="is not a \\(source, target\\) pair"):
        sc.Graph([n("a"), n("b")], [("a", "b", "c")])
    g = sc.Graph([n("a"), n("b")], [("a", "b"), ["a", "b"]])  # duplicates are dropped, lists are pairs
    assert g.edges == (("a", "b"),)


def test_strings_are_not_numbers_anywhere():
    with pytest.raises(sc.InvalidGraphError, match="'3' is a string, not a number"):
        n("x", memory="3")
    with pytest.raises(sc.InvalidGraphError, match="is a string"):
        sc.Graph.chain(["1.0", 2.0])
    with pytest.raises(sc.errors.InvalidArgumentError, match="memory"):
        sc.partition(sc.Graph.chain([1.0]), memory="16GiB")


def test_a_split_written_from_tuple_ids_reads_back():
    # item 11: to_split writes a tuple id as a JSON list; split_from_dict read it as an unhashable list
    g = sc.Graph([n(("a", 0)), n(("a", 1))], [(("a", 0), ("a", 1))])
    plan = sc.partition(g, devices=2)
    split = json.loads(json.dumps(plan.to_split()))
    assert sc.split_from_dict(split, g) == plan.device_of()
    assert sc.split_from_dict(split) == plan.device_of()  # without the graph too


def test_a_chain_from_a_numpy_array_and_a_file_with_a_byte_order_mark(tmp_path):
    import numpy as np

    g = sc.Graph.chain(np.array([1.0, 2.0]), memory=np.float64(1.0))
    assert g.node(1).compute == {"accelerator": 2.0} and type(g.node(1).memory) is float
    path = tmp_path / "bom.json"
    path.write_text(json.dumps(sc.workload_to_dict(g)), encoding="utf-8-sig")
    assert sc.read_workload(path).edges == g.edges


def test_deprecation_warnings_point_at_the_callers_line():
    # the entry points are wrapped (argument checks, progress reports): the warning must still
    # name the user's file, not one of stagecut's wrappers
    import warnings

    from stagecut.training import plan_training
    from stagecut.training.io import chain_problem

    g = sc.Graph.chain([1.0, 2.0, 3.0])
    split = {0: ("accelerator", 0), 1: ("accelerator", 0), 2: ("accelerator", 1)}
    calls = [lambda: sc.partition(g, accelerators=2), lambda: sc.evaluate(g, split, accelerators=2),
             lambda: sc.slice_graph(g, stages=2, method="order"),
             lambda: plan_training(chain_problem([1.0, 2.0], devices=2, memory=1e9, bandwidth=1.0, batch=1),
                                   max_batch=1)]
    for call in calls:
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            call()
        deprecations = [w for w in rec if issubclass(w.category, DeprecationWarning)]
        assert deprecations and all(w.filename == __file__ for w in deprecations), [w.filename for w in rec]
