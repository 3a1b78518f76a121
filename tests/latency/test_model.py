"""The latency model: devices, problem, the reference ASAP evaluator, Schedule, bad input."""

import itertools
import math
import random

import pytest

import stagecut as sc
from stagecut.errors import InvalidArgumentError, InvalidGraphError
from stagecut.latency import Device, Devices, LatencyProblem, Schedule, asap, evaluate_schedule, rank_round_robin
from stagecut.latency.model.evaluate import schedule_from


def gpus(n, bw=1.0):
    return Devices.servers(1, n, intra_bandwidth=bw, inter_bandwidth=bw)


def dag(times, edges, comm=0.0, kind="gpu"):
    nodes = [sc.Node(v, {kind: t} if not isinstance(t, dict) else t, comm=comm) for v, t in times.items()]
    return sc.Graph(nodes, edges)


def fork(w, tau, ps=1.0, pt=2.0):
    g = dag({"s": ps, "a": w, "b": w, "t": pt}, [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")], comm=tau)
    return LatencyProblem(g, gpus(2), output_bytes="comm")


def best_over_placements(p):
    return min(schedule_from(p, list(dev), method="x").objective
               for dev in itertools.product(range(p.num_devices), repeat=len(p)))


# ------------------------------------------------------------------------- known values
@pytest.mark.parametrize("w,tau", [(3.0, 1.0), (3.0, 5.0), (2.0, 0.5), (4.0, 4.0)])
def test_fork_gives_ps_pt_min_2w_w_tau(w, tau):
    # both branches on one device: 2w; split: w + tau (s -> b and b -> t each pay tau, in parallel with a)
    assert best_over_placements(fork(w, tau)) == pytest.approx(1.0 + 2.0 + min(2 * w, w + tau))


def test_chain_on_one_device_is_the_sum():
    g = sc.Graph.chain([1.0, 2.0, 3.0, 4.0], comm=1.0)
    s = evaluate_schedule(g, Devices.pcie_star(3, cpu=False), dict.fromkeys(range(4), "accelerator:1"))
    assert s.objective == 10.0 and s.transfers == () and s.critical_path == (0, 1, 2, 3)
    assert s.busy == {"accelerator:1": 10.0} and [st.device for st in s.stages] == ["accelerator:1"]


def test_no_transfers_and_enough_devices_give_the_critical_path():
    g = dag({"s": 1.0, "a": 5.0, "b": 2.0, "c": 3.0, "t": 1.0},
            [("s", "a"), ("s", "b"), ("s", "c"), ("a", "t"), ("b", "t"), ("c", "t")])
    p = LatencyProblem(g, gpus(3))
    assert best_over_placements(p) == 7.0 == p.lower_bound()


def test_parallel_device_runs_nodes_at_once():
    g = dag({"a": {"cpu": 2.0}, "b": {"cpu": 3.0}}, [], kind="cpu")
    s = evaluate_schedule(g, Devices.pcie_star(0), {"a": "cpu", "b": "cpu"})
    assert s.objective == 3.0 and s.start == {"a": 0.0, "b": 0.0}


def test_pcie_star_transfers_and_times():
    g = sc.Graph.chain([1.0, 1.0, 1.0], cpu_costs=[5.0, 5.0, 5.0], comm=2.0)
    p = LatencyProblem(g, Devices.pcie_star(2))
    # acc0 -> acc1 goes through CPU memory (2 x comm), acc1 -> cpu once
    s = schedule_from(p, [1, 2, 0], method="x")
    assert s.finish == {0: 1.0, 1: 6.0, 2: 13.0}
    assert [(t.source, t.target, t.finish - t.start) for t in s.transfers] == [
        ("accelerator:0", "accelerator:1", 4.0), ("accelerator:1", "cpu", 2.0)]


def test_order_decides_and_bad_orders_are_refused():
    g = dag({"a": 1.0, "b": 4.0, "c": 1.0}, [("a", "c")])
    p = LatencyProblem(g, gpus(1))
    assert asap(p, [0, 0, 0], [[0, 2, 1]])[1].max() == 6.0
    assert asap(p, [0, 0, 0], [[1, 0, 2]])[1].tolist() == [5.0, 4.0, 6.0]
    with pytest.raises(InvalidArgumentError, match="contradicts"):
        asap(p, [0, 0, 0], [[2, 0, 1]])
    with pytest.raises(InvalidArgumentError, match="missing"):
        asap(p, [0, 0, 0], [[0, 1]])
    with pytest.raises(InvalidArgumentError, match="listed twice|not one of"):
        asap(p, [0, 0, 0], [[0, 1, 1, 2]])


def test_rank_round_robin_serves_longest_path_first():
    # b heads the long path: it goes before a on the one device
    g = dag({"a": 1.0, "b": 1.0, "c": 5.0}, [("b", "c")])
    p = LatencyProblem(g, gpus(2))
    assert rank_round_robin(p, [0, 0, 1]) == [[1, 0], [2]]


def brute_asap(p, dev):
    """Best makespan over every per-device order (all permutations, skipping the inconsistent ones)."""
    n = len(p)
    best = math.inf
    for perm in itertools.permutations(range(n)):
        pos = {v: i for i, v in enumerate(perm)}
        if any(pos[u] > pos[v] for v in range(n) for u in p.pred[v]):
            continue
        order = [[v for v in perm if dev[v] == d] for d in range(p.num_devices)]
        best = min(best, asap(p, dev, order)[1].max())
    return best


def random_problem(rng, n, nd):
    nodes = [sc.Node(i, {"gpu": rng.choice([1.0, 2.0, 3.0, 0.5])}, comm=rng.choice([0.0, 0.5, 2.0]))
             for i in range(n)]
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.35]
    bw = [[None if a == b else rng.choice([0.5, 1.0, 4.0]) for b in range(nd)] for a in range(nd)]
    devs = Devices.from_dict({"devices": [{"name": f"d{i}", "kind": "gpu", "memory": "inf",
                                           "speed": rng.choice([1.0, 2.0])} for i in range(nd)],
                              "bandwidth": bw})
    return LatencyProblem(sc.Graph(nodes, edges), devs, output_bytes="comm")


def test_asap_equals_the_definition_on_random_dags():
    rng = random.Random(7)
    for _ in range(40):
        p = random_problem(rng, rng.randint(2, 6), rng.randint(1, 3))
        dev = [rng.randrange(p.num_devices) for _ in range(len(p))]
        start, finish = asap(p, dev)
        a = dev
        for v in range(len(p)):  # every constraint holds, and some constraint is tight (or start 0)
            ready = [finish[u] + p.transfer(u, a[u], a[v]) for u in p.pred[v]]
            assert start[v] >= max(ready, default=0.0) - 1e-12
            assert finish[v] == pytest.approx(start[v] + p.times[v, a[v]])
        assert finish.max() >= brute_asap(p, dev) - 1e-12


def test_schedule_round_trips_and_reports():
    p = fork(3.0, 1.0)
    s = schedule_from(p, [0, 0, 1, 1], method="x", lower_bound=100.0)
    assert s.lower_bound == s.objective == 7.0  # a bound is capped at the makespan
    assert Schedule.from_json(s.to_json()) == s and Schedule.from_json(s.dumps()) == s
    assert s.assignment() == {"s": 0, "a": 0, "b": 1, "t": 1}
    assert s.critical_path[0] == "s" and s.critical_path[-1] == "t"
    rows = s.gantt()
    assert [r["what"] for r in rows].count("transfer") == 2 and rows[0]["node"] == "s"
    assert "makespan" in s.summary()


def test_memory_violation_is_reported_not_hidden():
    g = sc.Graph([sc.Node(0, {"gpu": 1.0}, memory=5.0), sc.Node(1, {"gpu": 1.0}, memory=5.0)], [(0, 1)])
    d = Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0, memory=8.0)
    s = evaluate_schedule(g, d, {0: "gpu:0", 1: "gpu:0"})
    assert s.violations and "gpu:0" in s.violations[0]
    assert not evaluate_schedule(g, d, {0: "gpu:0", 1: "gpu:1"}).violations
    big = sc.Graph([sc.Node(0, {"gpu": 1.0}, memory=9.0)], [])
    assert LatencyProblem(big, d).fits_anywhere() is not None


# ------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("data,match", [
    ({"devices": [{"name": "a", "kind": "gpu"}], "bandwidth": [[None]]}, "memory is missing"),
    ({"devices": [{"name": "a", "kind": "gpu", "memory": 1}, {"name": "b", "kind": "gpu", "memory": 1}],
      "bandwidth": [[None, 1.0], [None, None]]}, "disconnected"),
    ({"devices": [{"name": "a", "kind": "gpu", "memory": 1}, {"name": "b", "kind": "gpu", "memory": 1}],
      "bandwidth": [[None, 0], [1, None]]}, "positive"),
    ({"devices": [{"name": "a", "kind": "gpu", "memory": 1}, {"name": "a", "kind": "gpu", "memory": 1}],
      "bandwidth": [[None, 1], [1, None]]}, "used twice"),
    ({"devices": [{"name": "a", "kind": "gpu", "memory": 1}], "bandwidth": [[None, 1]]}, "entries"),
    ({"devices": [{"name": "a", "kind": "gpu", "memory": float("nan")}], "bandwidth": [[None]]}, "finite"),
    ({"devices": [{"name": "a", "kind": "gpu", "memory": 1, "sped": 2}], "bandwidth": [[None]]}, "unknown field"),
    ({"devices": []}, "bandwidth is missing|at least one"),
    ({"topology": "ring"}, "topology"),
    ({"topology": "servers", "servers": 2}, "gpus_per_server"),
    ([1, 2], "JSON object"),
])
def test_bad_device_descriptions_name_the_field(data, match):
    with pytest.raises(InvalidArgumentError, match=match):
        Devices.from_dict(data)


def test_bad_devices_and_problems():
    with pytest.raises(InvalidArgumentError, match="speed"):
        Device("x", "gpu", speed=0)
    with pytest.raises(InvalidArgumentError, match="non-empty"):
        Device("", "gpu")
    g = dag({"a": {"tpu": 1.0}}, [], kind="tpu")
    with pytest.raises(InvalidGraphError, match="node 'a': no device can run it"):
        LatencyProblem(g, gpus(2))
    g = sc.Graph.chain([1.0, 1.0], comm=1.0)
    with pytest.raises(InvalidArgumentError, match="output_bytes"):  # bytes bandwidths, comm given as a time
        LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1e9, inter_bandwidth=1e9, kind="accelerator"))
    with pytest.raises(InvalidArgumentError, match="node 1 is missing"):
        LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1e9, inter_bandwidth=1e9, kind="accelerator"),
                       output_bytes={0: 1.0})
    with pytest.raises(InvalidGraphError, match="nan|finite"):
        sc.Node(0, {"gpu": float("nan")})


def test_bad_placements_name_the_node():
    g = sc.Graph.chain([1.0, 1.0])  # accelerator only
    d = Devices.pcie_star(1)
    with pytest.raises(InvalidArgumentError, match="node 1 has no device"):
        evaluate_schedule(g, d, {0: "cpu"})
    with pytest.raises(InvalidArgumentError, match="node 0 cannot run on cpu"):
        evaluate_schedule(g, d, {0: "cpu", 1: "accelerator:0"})
    with pytest.raises(InvalidArgumentError, match="'gpu:9', which is not a device"):
        evaluate_schedule(g, d, {0: "gpu:9", 1: "cpu"})
    with pytest.raises(InvalidArgumentError, match="unknown node 5"):
        evaluate_schedule(g, d, {0: "accelerator:0", 1: "accelerator:0", 5: "cpu"})
    with pytest.raises(InvalidArgumentError, match="devices"):
        evaluate_schedule(g, None, {0: "accelerator:0", 1: "accelerator:0"})
