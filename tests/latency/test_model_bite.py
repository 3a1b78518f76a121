"""Tests written for mutants of the latency model, bounds and evaluators that survived a sampled
mutmut run (benches/MUTATION.md): each checks one thing a plausible slip would change."""

import pytest

import stagecut as sc
from stagecut.errors import InvalidArgumentError
from stagecut.latency import Devices, LatencyProblem
from stagecut.latency.exact.brute import solve_brute
from stagecut.latency.exact.paths import long_paths
from stagecut.latency.model.evaluate import evaluate_schedule
from stagecut.latency.pcie.pieces import evaluate_pieces


def test_servers_names_the_bad_inter_bandwidth():
    with pytest.raises(InvalidArgumentError, match=r"^inter_bandwidth"):
        Devices.servers(2, 1, intra_bandwidth=1.0, inter_bandwidth=-1.0)


def test_gantt_rows_name_their_device():
    g = sc.Graph([sc.Node("a", {"gpu": 1.0}, comm=2.0), sc.Node("b", {"gpu": 1.0})], [("a", "b")])
    p = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0), output_bytes="comm")
    s = evaluate_schedule(p, None, {"a": "gpu:0", "b": "gpu:1"})
    assert s.method == "evaluate"
    rows = s.gantt()
    assert [(r["what"], r["device"]) for r in rows] == [("node", "gpu:0"), ("transfer", "gpu:0->gpu:1"),
                                                         ("node", "gpu:1")]


def test_evaluate_pieces_takes_the_memory_of_the_workload_file():
    """Two nodes of 3 bytes on one accelerator of the file's 4 bytes: over the limit."""
    g = sc.Graph([sc.Node(v, {"accelerator": 1.0, "cpu": 5.0}, memory=3.0) for v in "ab"], [("a", "b")],
                 defaults={"accelerators": 2, "memory": 4.0})
    over = evaluate_pieces(g, {"a": "accelerator:0", "b": "accelerator:0"})
    assert any("accelerator:0" in v for v in over.violations)
    ok = evaluate_pieces(g, {"a": "accelerator:0", "b": "accelerator:1"})
    assert not ok.violations


def test_long_paths_include_the_path_long_in_time_and_memory_together():
    """Three lone nodes: one long in time, one heavy in memory, one second in both: the third
    path (normalised time plus normalised memory) is the one second in both."""
    nodes = [sc.Node("t", {"gpu": 10.0}, memory=0.0), sc.Node("m", {"gpu": 0.0}, memory=10.0),
             sc.Node("both", {"gpu": 8.0}, memory=8.0)]
    p = LatencyProblem(sc.Graph(nodes, []), Devices.servers(1, 1, intra_bandwidth=1.0, inter_bandwidth=1.0))
    paths = long_paths(p)
    assert [[p.ids[i] for i in path] for path in paths] == [["t"], ["m"], ["both"]]


def test_brute_force_names_what_it_got_instead_of_a_problem():
    with pytest.raises(InvalidArgumentError, match=r"got .*'not a problem'"):
        solve_brute("not a problem")


def test_the_pcie_greedy_says_it_found_no_packing():
    from stagecut.latency.pcie.greedy import pcie_greedy

    g = sc.Graph([sc.Node(v, {"accelerator": 1.0}, memory=1.0) for v in "ab"], [("a", "b")])
    s = pcie_greedy(LatencyProblem.from_workload(g, accelerators=1, memory=1.5))
    assert s.objective is None and s.method == "pcie-greedy" and s.status == "unknown"
    assert "no packing" in s.notes[0]


def test_best_device_counts_the_devices_it_evaluated():
    from stagecut.latency.heuristics.constructive import best_device

    g = sc.Graph([sc.Node(v, {"gpu": 1.0, "cpu": 2.0}) for v in "ab"], [("a", "b")])
    p = LatencyProblem(g, Devices.servers(1, 3, intra_bandwidth=1.0, inter_bandwidth=1.0))
    s = best_device(p)
    assert s.stats["evaluations"] == 3 and s.objective == 2.0


def test_too_many_devices_are_refused_with_the_matrix_size():
    """2 x 1,024 GPUs: the 2,048 x 2,048 bandwidth matrix of 8-byte floats is 32 MiB."""
    from stagecut.errors import MemoryLimitError

    with pytest.raises(MemoryLimitError, match=r"servers x gpus_per_server: 2 x 1024 means 2048 devices; at most "
                                               r"1024 .* more than 32 MiB\)"):
        Devices.servers(2, 1024, intra_bandwidth=1.0, inter_bandwidth=1.0)


def test_output_bytes_of_an_unknown_node_are_refused_naming_it():
    g = sc.Graph([sc.Node("a", {"gpu": 1.0}), sc.Node("b", {"gpu": 1.0})], [("a", "b")])
    devs = Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0)
    with pytest.raises(InvalidArgumentError, match=r"output_bytes: unknown node 'zz'"):
        LatencyProblem(g, devs, output_bytes={"a": 1.0, "zz": 2.0})
