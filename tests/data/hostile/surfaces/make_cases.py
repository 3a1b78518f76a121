"""Regenerate the hostile corpus of the newer surfaces (this folder): ``python make_cases.py``.

Writes one file per hostile input (saved results, device descriptions, sweep files, ONNX files)
and ``cases.json``: for each case its command line (``{here}`` is this folder, ``{good}`` a small
valid workload the test writes, ``{tmp}`` a fresh folder), the substring its one-line error must
hold, and why it is here. ``tests/test_reliability_surfaces.py`` runs every case through the
command line in-process: exit 2, one line ``stagecut: error: ...``, no traceback, no internal
error, no hang.
"""

import copy
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent

import stagecut as sc  # noqa: E402

CASES = {}


def case(name, argv, expect, why, files=None):
    assert name not in CASES, name
    CASES[name] = {"argv": argv, "expect": expect, "why": why}
    for fname, content in (files or {}).items():
        path = HERE / fname
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content)
        else:
            path.write_text(json.dumps(content))


# ----------------------------------------------------------------------------- saved results (show)
plan = sc.partition(sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0]), devices=3).to_json()
PLAN_EDITS = {
    "nan_objective": (lambda d: d.update(objective="nan"), "objective", "NaN objective with status optimal"),
    "infinite_objective": (lambda d: d.update(objective="inf"), "objective", "Infinity objective"),
    "bound_above": (lambda d: d.update(lower_bound=1e308), "lower_bound", "a bound above the objective"),
    "negative_gap": (lambda d: d.update(gap=-5), "gap", "gap -5"),
    "gap_disagrees": (lambda d: d.update(gap=0.5), "gap", "a gap the objective and bound do not give"),
    "gap_string": (lambda d: d.update(gap="small"), "gap", "a gap that is not a number"),
    "negative_devices": (lambda d: d.update(devices=-3), "devices", "devices -3"),
    "devices_float": (lambda d: d.update(devices=2.5), "devices", "a fractional device count"),
    "no_stages": (lambda d: d.update(stages=[]), "stages", "an answer with no stages"),
    "stages_dict": (lambda d: d.update(stages={"0": {}}), "stages", "stages as an object"),
    "stage_index_huge": (lambda d: d["stages"][0].update(index=1e30), "index", "stage index 1e30"),
    "stage_index_order": (lambda d: d["stages"][0].update(index=2), "index", "stages out of order"),
    "stage_index_bool": (lambda d: d["stages"][0].update(index=True), "index", "a boolean stage index"),
    "stage_nodes_dict": (lambda d: d["stages"][0].update(nodes={"a": 1}), "nodes", "stage nodes as an object"),
    "stage_node_dict": (lambda d: d["stages"][0].update(nodes=[{"a": 1}]), "nodes", "a node id that is an object"),
    "stage_node_bool": (lambda d: d["stages"][0].update(nodes=[True]), "nodes", "a node id that is a boolean"),
    "stage_load_string": (lambda d: d["stages"][0].update(load="fast"), "load", "a load that is a word"),
    "stage_load_inf": (lambda d: d["stages"][0].update(load="inf"), "load", "an infinite load"),
    "stage_memory_list": (lambda d: d["stages"][0].update(memory=[1]), "memory", "memory as a list"),
    "stage_parts_list": (lambda d: d["stages"][0].update(parts=[1, 2]), "parts", "parts as a list"),
    "stage_feasible_string": (lambda d: d["stages"][0].update(feasible="false"), "feasible", "'false' as a flag"),
    "stage_kind_index_float": (lambda d: d["stages"][0].update(kind_index=0.5), "kind_index", "a fractional index"),
    "stage_device_number": (lambda d: d["stages"][0].update(device=7), "device", "a device that is a number"),
    "stage_missing_nodes": (lambda d: d["stages"][0].pop("nodes"), "nodes", "a stage without nodes"),
    "notes_string": (lambda d: d.update(notes="hello"), "notes", "notes as one string (read as five)"),
    "notes_numbers": (lambda d: d.update(notes=[1, 2]), "notes", "notes that are numbers"),
    "seed_string": (lambda d: d.update(seed="abc"), "seed", "a seed that is a word"),
    "seed_negative": (lambda d: d.update(seed=-1), "seed", "a negative seed"),
    "status_word": (lambda d: d.update(status="great"), "status", "an unknown status"),
    "status_number": (lambda d: d.update(status=1), "status", "a status that is a number"),
    "optimal_without_objective": (lambda d: d.update(objective=None, gap=None), "status", "optimal, no answer"),
    "infeasible_with_objective": (lambda d: d.update(status="infeasible"), "status", "infeasible with an answer"),
    "runtime_negative": (lambda d: d.update(runtime_s=-1.0), "runtime_s", "negative seconds"),
    "runtime_string": (lambda d: d.update(runtime_s="1s"), "runtime_s", "seconds as a word"),
    "stats_list": (lambda d: d.update(stats=[1, 2]), "stats", "stats as a list"),
    "contiguous_number": (lambda d: d.update(contiguous=0), "contiguous", "0 as a flag"),
    "huge_integer_objective": (lambda d: d.update(objective=10 ** 400), "objective", "a 400-digit objective"),
    "method_number": (lambda d: d.update(method=5), "method", "a method that is a number"),
    "missing_method": (lambda d: d.pop("method"), "method", "no method"),
    "kind_list": (lambda d: d.update(kind=["Plan"]), "kind", "kind as a list (was an internal error)"),
    "kind_dict": (lambda d: d.update(kind={"a": 1}), "kind", "kind as an object (was an internal error)"),
    "kind_unknown": (lambda d: d.update(kind="Banana"), "kind", "an unknown result kind"),
}
for name, (edit, field, why) in PLAN_EDITS.items():
    d = copy.deepcopy(plan)
    edit(d)
    case(f"show_plan_{name}", ["show", f"{{here}}/plan_{name}.json"], field, why, {f"plan_{name}.json": d})
for name, content, expect in [
    ("array", [1, 2], "kind"), ("number", 5, "kind"), ("string", "plan", "kind"), ("null", None, "kind"),
    ("no_kind", {"objective": 1.0}, "kind"), ("deep", "[" * 50000 + "]" * 50000, "deep"),
    ("not_json", "objective: 4", "JSON"), ("empty", "", "JSON"),
]:
    text = content if isinstance(content, str) and name in ("deep", "not_json", "empty") else json.dumps(content)
    case(f"show_{name}", ["show", f"{{here}}/result_{name}.json"], expect, f"a result file that is {name}",
         {f"result_{name}.json": text})

# a latency answer with device names that are not the problem's
sched = sc.place(sc.Graph.chain([1.0, 2.0, 3.0]), 2, method="heft").to_json()
for name, device in [("huge_index", "accelerator:99999999999999999999"), ("unknown_index", "accelerator:7"),
                     ("no_index", "gpu"), ("empty", ""), ("number", 5), ("colon", ":")]:
    d = copy.deepcopy(sched)
    d["stages"][0]["device"] = device
    case(f"evaluate_device_{name}",
         ["latency", "example:chain", "-k", "2", "--evaluate", f"{{here}}/sched_{name}.json"], "device",
         f"a saved schedule on device {device!r}", {f"sched_{name}.json": d})

# ----------------------------------------------------------------------------- device descriptions
DEVICES = {
    "cpu_string_false": ({"topology": "pcie", "accelerators": 2, "cpu": "false"}, "cpu"),
    "cpu_zero": ({"topology": "pcie", "accelerators": 2, "cpu": 0}, "cpu"),
    "cpu_one": ({"topology": "pcie", "accelerators": 2, "cpu": 1}, "cpu"),
    "cpu_null": ({"topology": "pcie", "accelerators": 2, "cpu": None}, "cpu"),
    "accelerators_1e9": ({"topology": "pcie", "accelerators": 10 ** 9}, "at most 1024"),
    "accelerators_2000": ({"topology": "pcie", "accelerators": 2000}, "at most 1024"),
    "accelerators_negative": ({"topology": "pcie", "accelerators": -1}, "accelerators"),
    "accelerators_string": ({"topology": "pcie", "accelerators": "two"}, "accelerators"),
    "accelerators_missing": ({"topology": "pcie"}, "accelerators"),
    "servers_huge": ({"topology": "servers", "servers": 100000, "gpus_per_server": 100000, "intra_bandwidth": 1,
                      "inter_bandwidth": 1}, "at most 1024"),
    "servers_zero": ({"topology": "servers", "servers": 0, "gpus_per_server": 2, "intra_bandwidth": 1,
                      "inter_bandwidth": 1}, "servers"),
    "servers_bandwidth_negative": ({"topology": "servers", "servers": 1, "gpus_per_server": 2, "intra_bandwidth": -1,
                                    "inter_bandwidth": 1}, "intra_bandwidth"),
    "topology_unknown": ({"topology": "mesh"}, "topology"),
    "memory_negative": ({"topology": "pcie", "accelerators": 2, "memory": -5}, "memory"),
    "memory_word": ({"topology": "pcie", "accelerators": 2, "memory": "lots"}, "memory"),
    "matrix_no_devices": ({"bandwidth": []}, "devices"),
    "matrix_devices_string": ({"devices": "cpu", "bandwidth": []}, "devices"),
    "matrix_device_unknown_field": ({"devices": [{"name": "a", "kind": "cpu", "memory": "inf", "colour": 1}],
                                     "bandwidth": [[None]]}, "colour"),
    "matrix_device_no_memory": ({"devices": [{"name": "a", "kind": "cpu"}], "bandwidth": [[None]]}, "memory"),
    "matrix_parallel_string": ({"devices": [{"name": "a", "kind": "cpu", "memory": "inf", "parallel": "yes"}],
                                "bandwidth": [[None]]}, "parallel"),
    "matrix_bandwidth_short": ({"devices": [{"name": "a", "kind": "cpu", "memory": "inf"},
                                            {"name": "b", "kind": "cpu", "memory": "inf"}], "bandwidth": [[None]]},
                               "bandwidth"),
    "matrix_bandwidth_zero": ({"devices": [{"name": "a", "kind": "cpu", "memory": "inf"},
                                           {"name": "b", "kind": "cpu", "memory": "inf"}],
                               "bandwidth": [[None, 0], [1, None]]}, "bandwidth"),
    "matrix_bandwidth_missing_link": ({"devices": [{"name": "a", "kind": "cpu", "memory": "inf"},
                                                   {"name": "b", "kind": "cpu", "memory": "inf"}],
                                       "bandwidth": [[None, None], [1, None]]}, "bandwidth"),
    "matrix_too_many": ({"devices": [{"name": f"d{i}", "kind": "cpu", "memory": "inf"} for i in range(1100)],
                         "bandwidth": []}, "at most 1024"),
    "not_an_object": ([1, 2, 3], "devices"),
}
for name, (content, expect) in DEVICES.items():
    case(f"devices_{name}", ["latency", "example:chain", "--topology", f"{{here}}/devices_{name}.json"], expect,
         f"a device description with {name.replace('_', ' ')}", {f"devices_{name}.json": content})
for flags, expect in [(["-k", "100000"], "at most 1024"), (["-k", "1025"], "at most 1024"),
                      (["-k", "2000", "--topology", "servers"], "at most 1024"),
                      (["-k", "100000", "--topology", "servers", "--gpus-per-server", "100000"], "at most 1024"),
                      (["-k", "99999999999999999999999"], "-k")]:
    case(f"latency_k_{'_'.join(flags[1:]).replace('-', '')}", ["latency", "example:chain", *flags], expect,
         "a device count that can only grow")

# ----------------------------------------------------------------------------- graph specs
SPECS = {
    "rwnn_modules_negative": ("rwnn:modules=-3:channels=1", "modules"),
    "rwnn_modules_huge": ("rwnn:modules=10000000:channels=1", "nodes requested"),
    "rwnn_size_11": ("rwnn:modules=3:channels=1:size=11", "size must be"),
    "rwnn_size_1e9": ("rwnn:modules=3:channels=1:size=1000000000", "size must be"),
    "rwnn_channels_zero": ("rwnn:modules=3:channels=0", "channels"),
    "rwnn_no_channels": ("rwnn:modules=3", "channels"),
    "rwnn_model_unknown": ("rwnn:modules=3:channels=1:model=gnp", "model"),
    "rwnn_dep_unknown": ("rwnn:modules=3:channels=1:dep=both", "dep"),
    "rwnn_seed_word": ("rwnn:modules=3:channels=1:seed=abc", "seed"),
    "rwnn_unknown_key": ("rwnn:modules=3:channels=1:colour=red", "colour"),
    "regal_word": ("regal:abc", "regal"),
    "regal_negative": ("regal:-1", "n must be"),
    "regal_huge": ("regal:100000000", "nodes requested"),
    "regal_model_unknown": ("regal:10:nomodel", "nomodel"),
    "regal_seed_word": ("regal:10:erdos_renyi:x", "regal"),
    "example_unknown": ("example:nosuch", "nosuch"),
    "missing_file": ("{here}/no_such_file.json", "no_such_file"),
}
for name, (spec, expect) in SPECS.items():
    for command, extra in (("latency", ["-k", "2"]), ("partition", ["-k", "2"]), ("slice", ["-k", "2"])):
        case(f"{command}_{name}", [command, spec, *extra], expect, f"GRAPH {spec} for {command}")

# ----------------------------------------------------------------------------- ONNX files
try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:  # pragma: no cover - the corpus is written with the onnx extra
    sys.exit("make_cases.py needs onnx (pip install 'stagecut[onnx]')")


def relu_model(nodes, inputs=("x",), outputs=("y",), inits=()):
    io = lambda names: [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 2]) for n in names]  # noqa: E731
    graph = helper.make_graph(nodes, "g", io(inputs), io(outputs), list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


good = relu_model([helper.make_node("Relu", ["x"], ["y"], name="r")])
external = onnx.load_model_from_string(relu_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                                                  inits=[numpy_helper.from_array(np.ones((2, 2), np.float32), "w")]))
w = external.graph.initializer[0]
w.ClearField("raw_data")
w.data_location = TensorProto.EXTERNAL
entry = w.external_data.add()
entry.key, entry.value = "location", "../../../../../../etc/passwd"
ONNX = {
    "empty": (b"", "ONNX"),
    "text": (b"this is not a model\n", "ONNX"),
    "json": (b'{"nodes": []}', "ONNX"),
    "random_bytes": (bytes(range(256)) * 4, "ONNX"),
    "truncated": (good[: len(good) // 2], "ONNX"),
    "self_loop": (relu_model([helper.make_node("Add", ["x", "y"], ["y"], name="loop")]), "own output"),
    "two_producers": (relu_model([helper.make_node("Relu", ["x"], ["y"], name="a"),
                                  helper.make_node("Relu", ["x"], ["y"], name="b")]), "two producers"),
    "undefined_input": (relu_model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")]), "ghost"),
    "unknown_operator": (relu_model([helper.make_node("NoSuchOp", ["x"], ["y"], name="odd")]), "onnx.checker"),
    "wrong_arity": (relu_model([helper.make_node("Relu", ["x", "x"], ["y"], name="r2")]), "onnx.checker"),
    "no_operator": (relu_model([], outputs=("x",)), "no operator"),
    "external_outside": (external.SerializeToString(), "ONNX"),
}
for name, (content, expect) in ONNX.items():
    for command in ("latency", "partition", "trace"):
        extra = ["-o", "{tmp}/g.json"] if command == "trace" else ["-k", "2"]
        case(f"onnx_{command}_{name}", [command, f"{{here}}/onnx_{name}.onnx", *extra], expect,
             f"an ONNX file: {name.replace('_', ' ')}", {f"onnx_{name}.onnx": content})

# ----------------------------------------------------------------------------- sweep files
SWEEPS = {
    "unknown_method": ('graphs = ["regal:8"]\ndevices = [2]\nmethods = ["nosuch"]\n', "nosuch"),
    "bogus_option": ('graphs = ["regal:8"]\ndevices = [2]\n[[methods]]\nname = "dp"\noptions = {bogus = 1}\n',
                     "bogus"),
    "option_value": ('graphs = ["regal:8"]\ndevices = [2]\n[[methods]]\nname = "dp"\n'
                     'options = {max_ideals = "many"}\n', "max_ideals"),
    "latency_option": ('objective = "latency"\ngraphs = ["regal:8"]\ndevices = [2]\n[[methods]]\nname = "sa"\n'
                       'options = {iterations = "many"}\n', "iterations"),
    "bad_rwnn": ('objective = "latency"\ngraphs = ["rwnn:modules=-3:channels=1"]\ndevices = [2]\nmethods = ["heft"]\n',
                 "modules"),
    "bad_regal": ('graphs = ["regal:abc"]\ndevices = [2]\nmethods = ["dp"]\n', "regal"),
    "too_many_tasks": ('graphs = ["regal:8"]\nmethods = ["dpl"]\ndevices = [' + ", ".join(map(str, range(1, 1001)))
                       + ']\nseeds = [' + ", ".join(map(str, range(1001))) + ']\n', "tasks"),
    "devices_zero": ('graphs = ["regal:8"]\ndevices = [0]\nmethods = ["dp"]\n', "devices"),
    "objective_unknown": ('objective = "speed"\ngraphs = ["regal:8"]\ndevices = [2]\nmethods = ["dp"]\n',
                          "objective"),
    "not_toml": ("graphs = [regal:8\n", "TOML"),
    "seeds_negative": ('graphs = ["regal:8"]\ndevices = [2]\nmethods = ["dp"]\nseeds = [-1]\n', "seeds"),
    "methods_empty": ('graphs = ["regal:8"]\ndevices = [2]\nmethods = []\n', "methods"),
}
for name, (text, expect) in SWEEPS.items():
    case(f"sweep_{name}", ["sweep", f"{{here}}/sweep_{name}.toml", "--results", "{tmp}/results", "--quiet"], expect,
         f"a sweep file: {name.replace('_', ' ')}", {f"sweep_{name}.toml": text})
case("sweep_scheduler_bad_address", ["sweep", "{here}/sweep_good.toml", "--scheduler", "tcp://256.0.0.1:99999",
                                     "--results", "{tmp}/results", "--quiet"], "scheduler",
     "a scheduler address that does not parse", {"sweep_good.toml": 'graphs = ["regal:8"]\ndevices = [2]\n'
                                                                    'methods = ["dpl"]\n'})

(HERE / "cases.json").write_text(json.dumps(CASES, indent=1, sort_keys=True) + "\n")
print(f"{len(CASES)} cases")
