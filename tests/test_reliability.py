"""What stagecut promises under hostile input, faults and load (issue 10): one test per promise.

Read the test names from top to bottom: they are the README's "Guarantees". The corpus of bad
files is tests/data/hostile (each with the error it must give); helpers are in
reliability_support.py. Promises kept elsewhere, not repeated here:

* fork safety (fork, spawn, forkserver), Ctrl-C within a second (in-process and on the command
  line: one line, exit 130) and time limits on every solver: tests/test_reliability_faults.py;
* bounds never above the optimum (brute force on thousands of instances): tests/test_bounds_soundness.py;
* the generators' outputs, seed for seed: tests/test_generators.py (times: benches/bench_generators.py).
"""

import errno
import json
import math
import os
import stat
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stagecut as sc
from reliability_support import (
    CASES,
    EXPECTED,
    GOOD_WORKLOAD,
    HOSTILE,
    READERS,
    cli_args,
    mixed_calls,
    no_hang,
    one_error_line,
    run_cli,
    run_process,
    strict_json,
)
from stagecut import formats
from stagecut.graph import Node
from stagecut.training import piper_from_dict


def is_input_error(e):
    """A bad-input error: a StagecutError that is also a ValueError (never TypeError & co.)."""
    return isinstance(e, sc.StagecutError) and isinstance(e, ValueError)


@pytest.fixture
def good_path(tmp_path):
    path = tmp_path / "good.json"
    path.write_text(json.dumps(GOOD_WORKLOAD))
    return path


# ============================================================================ bad input
def test_the_corpus_lists_every_file():
    files = {p.name for p in HOSTILE.glob("*.json")} - {"expected.json"}
    assert files == set(EXPECTED) and len(files) >= 50


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_file_gives_its_reader_one_clear_error(case):
    reader, expected = EXPECTED[case]["reader"], EXPECTED[case]["error"]
    with no_hang(30), pytest.raises(sc.InvalidGraphError) as info:
        READERS[reader](HOSTILE / case)
    assert expected in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("case", CASES)
def test_every_reader_refuses_a_hostile_file_with_a_stagecut_value_error(case):
    for name, read in READERS.items():
        try:
            with no_hang(30):
                read(HOSTILE / case)
        except Exception as e:  # noqa: BLE001 - the point is which exceptions escape
            assert is_input_error(e), f"{name} on {case}: {type(e).__name__}: {e}"


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_file_on_the_command_line_is_one_line_and_exit_2(case, capsys, good_path):
    code, out, err = run_cli(capsys, *cli_args(case, good_path))
    expected = EXPECTED[case].get("cli_error", EXPECTED[case]["error"])
    assert code == 2 and one_error_line(err), err
    assert expected in err and out == ""


@pytest.mark.parametrize("case", ["bigint_cost.json", "deep_nesting.json", "binary.json", "huge_sizes.json"])
def test_a_hostile_file_in_a_real_process_is_one_line_and_exit_2(case):
    r = run_process("partition", HOSTILE / case, "--json")
    assert r.returncode == 2 and one_error_line(r.stderr) and r.stdout == "", r.stderr


# ---------------------------------------------------------- property tests over the readers
SCALARS = (st.none() | st.booleans() | st.integers() | st.integers(min_value=2**64, max_value=10**400)
           | st.floats() | st.text(max_size=6) | st.sampled_from(["0", "1", "false", "true", "2.5", "NaN"]))
JSONISH = st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids,
                                                                                             max_size=4), max_leaves=12)


def field(valid):
    """A field that is usually valid and sometimes anything at all."""
    return st.one_of(valid, valid, JSONISH)


NODE = st.fixed_dictionaries(
    {"id": field(st.integers(0, 5)), "supportedOnFpga": field(st.sampled_from([0, 1, True, False])),
     "cpuLatency": field(st.floats(0, 10)), "fpgaLatency": field(st.floats(0, 10))},
    optional={"isBackwardNode": field(st.booleans()), "size": field(st.floats(0, 1e3)), "colorClass": JSONISH,
              "name": field(st.text(max_size=4)), "extra": JSONISH})
EDGE = st.fixed_dictionaries({"sourceId": field(st.integers(0, 5)), "destId": field(st.integers(0, 5)),
                              "cost": field(st.floats(0, 5))})
WORKLOAD = st.fixed_dictionaries(
    {"nodes": field(st.lists(NODE, max_size=6)), "edges": field(st.lists(EDGE, max_size=6))},
    optional={"maxFPGAs": field(st.integers(0, 4)), "maxCPUs": field(st.integers(0, 2)),
              "maxSizePerFPGA": field(st.floats(0, 1e4))})
SPLIT = st.fixed_dictionaries({}, optional={
    "fpgas": field(st.lists(st.fixed_dictionaries({"nodes": field(st.lists(field(st.integers(0, 5)), max_size=4))}),
                            max_size=3)),
    "cpus": field(st.lists(st.fixed_dictionaries({"nodes": field(st.lists(st.integers(0, 5), max_size=4))}),
                           max_size=2)),
    "maxLoad": JSONISH})
TMPC = st.fixed_dictionaries({"id": field(st.just("vanilla")), "timePerSample": field(st.floats(0, 5)),
                              "parameterSize": field(st.floats(0, 5)), "memoryUsageA": field(st.floats(0, 5)),
                              "memoryUsageB": field(st.floats(0, 5)), "syncTimeFw": field(st.just({})),
                              "syncTimeBw": field(st.just({}))})
PIPER = st.fixed_dictionaries(
    {"maxDevices": field(st.integers(1, 4)), "maxMemoryPerDevice": field(st.floats(1, 100)),
     "bandwidth": field(st.floats(0.1, 10)), "mbsInBatch": field(st.integers(1, 4)),
     "nodes": field(st.lists(st.fixed_dictionaries(
         {"id": field(st.integers(0, 3)), "TMPCs": field(st.fixed_dictionaries({"1": st.lists(TMPC, max_size=2)}))}),
         max_size=3)),
     "edges": field(st.lists(st.fixed_dictionaries({"sourceId": field(st.integers(0, 3)),
                                                    "destId": field(st.integers(0, 3)),
                                                    "communicationCost": field(st.floats(0, 3))}), max_size=3))})
PROPERTY = settings(max_examples=100, deadline=2000, suppress_health_check=[HealthCheck.too_slow])


def only_input_errors(read, data):
    try:
        with no_hang(20):
            read(data)
    except Exception as e:  # noqa: BLE001
        assert is_input_error(e), f"{type(e).__name__}: {e}"


@PROPERTY
@given(st.one_of(WORKLOAD, JSONISH))
def test_the_workload_reader_raises_only_input_errors_on_anything(data):
    only_input_errors(sc.workload_from_dict, data)


@PROPERTY
@given(st.one_of(SPLIT, JSONISH))
def test_the_split_reader_raises_only_input_errors_on_anything(data):
    only_input_errors(lambda d: sc.split_from_dict(d), data)
    only_input_errors(lambda d: sc.split_from_dict(d, sc.Graph.chain([1.0] * 6)), data)


@PROPERTY
@given(st.one_of(PIPER, JSONISH))
def test_the_piper_reader_raises_only_input_errors_on_anything(data):
    only_input_errors(piper_from_dict, data)


@PROPERTY
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_in_a_file_are_an_input_error(tmp_path_factory, blob):
    path = tmp_path_factory.mktemp("bytes") / "x.json"
    path.write_bytes(blob)
    for read in READERS.values():
        only_input_errors(read, path)


# ------------------------------------------------------------------- the API's arguments
@pytest.mark.parametrize("call, expected", [
    (lambda: sc.partition("x.json"), "read_workload"),
    (lambda: sc.partition(nx.DiGraph()), "from_networkx"),
    (lambda: sc.partition([1.0, 2.0]), "Graph.chain"),
    (lambda: sc.evaluate("x.json", {}), "read_workload"),
    (lambda: sc.evaluate(sc.Graph.chain([1.0, 2.0]), [0, 1, 2]), "(kind, index)"),
    (lambda: Node(id=1, compute=5.0), "compute must be a mapping of device kind to time"),
    (lambda: Node(id=[1], compute={}), "not hashable"),
    (lambda: Node(id=1, compute={"cpu": 1.0}, kinds="cpu"), "kinds must be a set"),
    (lambda: Node(id=1, compute={"cpu": "2.5"}), "is a string, not a number"),
    (lambda: Node(id=1, compute={"cpu": 1.0}, backward="0"), "is not a boolean"),
])
def test_a_wrong_argument_is_a_stagecut_error_saying_what_was_expected(call, expected):
    with pytest.raises(sc.StagecutError, match="expected|must|not") as info:
        call()
    assert expected in str(info.value)


def test_one_rule_for_integers_in_files_and_arguments():
    # an integral float is not an integer, wherever it comes from; and neither is a boolean
    data = dict(GOOD_WORKLOAD, maxFPGAs=2.0)
    with pytest.raises(sc.InvalidGraphError, match=r"maxFPGAs must be an integer .* \(a float: write 2\)"):
        sc.workload_from_dict(data)
    g = sc.Graph.chain([1.0, 2.0])
    for call in (lambda: sc.partition(g, devices=2.0), lambda: sc.slice_graph(g, devices=2.0),
                 lambda: sc.partition(g, devices=True)):
        with pytest.raises(sc.InvalidArgumentError, match="devices must be an integer"):
            call()
    with pytest.raises(sc.InvalidArgumentError, match="below 2\\*\\*64"):
        sc.partition(g, devices=2**64)


def test_sizes_that_overflow_a_float_sum_are_named_not_an_overflow_error():
    nodes = [Node(id=i, compute={"accelerator": 1.0}, memory=1e308) for i in range(2)]
    with pytest.raises(sc.InvalidGraphError, match="memory: .* past the largest float"):
        sc.Graph(nodes, [])


# ------------------------------------------------------------------------ command-line input
@pytest.mark.parametrize("argv, expected", [
    (["partition", "{good}", "-k", str(2**64)], "below 2**64"),
    (["partition", "{good}", "-k", "9" * 400], "below 2**64"),
    (["certify", "{good}", "{split}", "--time-limit", "-1"], "--time-limit"),
    (["certify", "{good}", "{split}", "--time-limit", "0"], "must be a positive number"),
    (["partition", "{good}", "--non-contiguous"], "--non-contiguous: goes with --method ip"),
    (["partition", "{good}", "--solver", "highs"], "--solver: goes with --method ip"),
    (["partition", "{good}", "--method", "dp", "--solver", "highs"], "--solver: goes with --method ip"),
    (["slice", "{good}", "--max-ideals", "10"], "--max-ideals: goes with --method dp"),
    (["slice", "{good}", "--method", "dp", "--population", "10"], "--population: goes with --method brkga"),
    (["slice", "{good}", "--memory", "8", "--fast-memory", "9"], "old spelling"),
    (["slice", "{good}", "--fast-memory", "9", "--memory", "8"], "given twice"),
    (["partition", "{good}", "--memory", "8", "--memory-from-file"], "conflicts with --memory"),
    (["partition", "{good}", "-k", "2", "--accelerators", "3"], "old spelling"),
])
def test_a_bad_or_conflicting_flag_is_one_line_and_exit_2(argv, expected, capsys, good_path, tmp_path):
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"blocks": [[1, 2]]}))
    argv = [a.format(good=good_path, split=split) for a in argv]
    code, out, err = run_cli(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len([ln for ln in lines if "note:" not in ln]) == 1, err
    assert expected in err and "Traceback" not in err


def test_json_output_is_strict_json_even_when_the_answer_is_infeasible(capsys, tmp_path):
    g = sc.Graph.chain([1.0, 2.0], memory=[10.0, 10.0], defaults={"accelerators": 1, "cpus": 0})
    path = tmp_path / "g.json"
    sc.write_workload(g, path)
    for argv in (["slice", path, "--memory", "5"], ["slice", path, "--memory", "5", "--method", "dp"],
                 ["partition", path, "--memory", "5"]):
        code, out, err = run_cli(capsys, *argv, "--json")
        assert code == 0, err
        data = strict_json(out)  # no Infinity, no NaN
        assert data["status"] == "infeasible" and data["objective"] is None


def test_a_closed_stdout_ends_quietly():
    # `stagecut demo | head -1`: the reader goes away; no "Broken pipe" traceback or message
    import subprocess

    p = subprocess.Popen([sys.executable, "-m", "stagecut", "partition", "example:transformer"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141 and err == ""


def test_a_warning_is_one_line_without_a_source_line(capsys, tmp_path):
    # colocation classes on a directed cycle: slice warns that they must share one block
    nodes = [Node("f", {"accelerator": 1.0}, colocation=0), Node("x", {"accelerator": 1.0}),
             Node("b", {"accelerator": 1.0}, colocation=0), Node("y", {"accelerator": 1.0})]
    path = tmp_path / "cyc.json"
    sc.write_workload(sc.Graph(nodes, [("f", "x"), ("x", "b"), ("b", "y")]), path)
    code, _, err = run_cli(capsys, "slice", path, "-k", "2", "--method", "dp")
    assert code == 0 and err.startswith("stagecut: warning: colocation classes") and err.count("\n") == 1


# ============================================================================ atomic writes
def test_a_write_that_fails_midway_leaves_the_old_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "split.json"
    formats.write_json({"fpgas": [{"nodes": [1, 2]}]}, path)
    before = path.read_bytes()

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(formats.os, "fsync", full_disk)  # fails after the bytes went to the temporary file
    with pytest.raises(OSError, match="No space"):
        formats.write_json({"fpgas": [{"nodes": [1]}, {"nodes": [2]}]}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["split.json"]  # no temporary file left


def test_an_unencodable_value_writes_nothing(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("old")
    with pytest.raises(ValueError):
        formats.write_json({"load": math.inf}, path)  # Infinity is not JSON
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["r.json"]


def test_a_rewritten_file_keeps_its_permissions(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("{}")
    path.chmod(0o640)
    formats.write_json({"a": 1}, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and json.loads(path.read_text()) == {"a": 1}


@pytest.mark.parametrize("flag", ["-o", "--split-out"])
def test_an_unwritable_output_is_refused_before_any_solving(flag, capsys, good_path, tmp_path, monkeypatch):
    import stagecut.throughput as throughput

    def must_not_run(*args, **kwargs):
        raise AssertionError("solved before checking the output path")

    monkeypatch.setattr(throughput, "partition", must_not_run)  # the subcommand imports it when it runs
    for target, expected in ((tmp_path / "missing" / "r.json", "does not exist"), (tmp_path, "is a directory"),
                             (good_path, "is the input GRAPH")):
        code, _, err = run_cli(capsys, "partition", good_path, flag, target)
        assert code == 2 and one_error_line(err) and expected in err, err


def test_a_cli_output_that_fails_midway_leaves_the_old_file_intact(capsys, good_path, tmp_path, monkeypatch):
    out = tmp_path / "result.json"
    assert run_cli(capsys, "partition", good_path, "-o", out)[0] == 0
    before = out.read_bytes()
    monkeypatch.setattr(formats.os, "replace", lambda *a: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space")))
    code, _, err = run_cli(capsys, "partition", good_path, "-k", "1", "-o", out)
    assert code == 2 and one_error_line(err) and out.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["good.json", "result.json"]


# ================================================================================== load
def test_8_threads_by_48_mixed_calls_give_the_sequential_answers():
    calls = mixed_calls()
    expected = {name: fn() for name, fn in calls}
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda c: (c[0], c[1](), threading.get_ident()), calls * 2))
    assert all(expected[name] == text for name, text, _ in got)
    assert len({t for *_, t in got}) > 1  # the calls really ran on several threads


THREADS_SCRIPT = """
import json, stagecut as sc
from stagecut.training import chain_problem, plan_training
g = sc.regal_graph(40, model="barabasi_albert", seed=5)
out = [sc.partition(g, devices=4, method="dpl").to_json(),
       sc.slice_graph(g, devices=5, method="brkga", seed=3, population=24, generations=8).to_json(),
       plan_training(chain_problem([1.0, 2.0, 3.0, 2.0, 1.0], devices=4, memory=1e9, bandwidth=1.0, batch=4)).to_json()]
print(json.dumps([{k: v for k, v in d.items() if k != "runtime_s"} for d in out], sort_keys=True))
"""


@pytest.mark.slow
def test_the_same_plan_whatever_the_thread_count_and_hash_seed():
    outs = set()
    for threads, hash_seed in (("1", "0"), ("2", "1"), ("7", "random")):
        r = __import__("subprocess").run([sys.executable, "-c", THREADS_SCRIPT], capture_output=True, text=True,
                                         timeout=300, env={**os.environ, "RAYON_NUM_THREADS": threads,
                                                           "PYTHONHASHSEED": hash_seed})
        assert r.returncode == 0, r.stderr
        outs.add(r.stdout)
    assert len(outs) == 1


# ============================================================================ round trips
def tuple_id_graph():
    nodes = [Node(id=("layer", i, "fwd"), compute={"accelerator": float(1 + i % 3), "cpu": 9.0},
                  colocation=("block", i // 2)) for i in range(6)]
    return sc.Graph(nodes, [(nodes[i].id, nodes[i + 1].id) for i in range(5)], {"accelerators": 3, "cpus": 0})


def test_tuple_ids_round_trip_through_every_format(tmp_path):
    g = tuple_id_graph()
    plan = sc.partition(g, devices=3)
    assert type(plan).from_json(json.loads(json.dumps(plan.to_json()))) == plan
    assert sc.split_from_dict(json.loads(json.dumps(plan.to_split())), g) == plan.device_of()
    sc.write_split(plan.device_of(), tmp_path / "s.json")
    assert sc.read_split(tmp_path / "s.json", g) == plan.device_of()
    sc.write_workload(g, tmp_path / "w.json")
    assert sc.read_workload(tmp_path / "w.json") == g


def test_a_saved_result_reads_back_identically_on_the_command_line(capsys, tmp_path):
    g = tuple_id_graph()
    path, saved = tmp_path / "w.json", tmp_path / "r.json"
    sc.write_workload(g, path)
    code, out, _ = run_cli(capsys, "partition", path, "--json", "-o", saved)
    assert code == 0 and strict_json(out) == json.loads(saved.read_text())
    assert run_cli(capsys, "show", saved, "--json")[1] == out
    code, out, err = run_cli(capsys, "evaluate", path, saved, "--json")  # the saved stages, re-scored
    assert code == 0 and strict_json(out)["objective"] == strict_json(run_cli(capsys, "show", saved, "--json")[1])[
        "objective"], err
