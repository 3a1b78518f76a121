"""QuickP as a composite method: warm starts, the answer never above HEFT's or Metis', one time
limit over the whole pipeline, QuickP's per-edge transfers, and the training graphs it targets."""

import importlib
import math

import numpy as np
import pytest

import stagecut as sc
from stagecut.errors import InvalidArgumentError
from stagecut.latency import Devices, LatencyProblem, best_device, evaluate_schedule, heft, metis
from stagecut.latency.quickp.fusion import fuse
from stagecut.latency.quickp.ip import edge_asap, list_order, quickp
from stagecut.latency.quickp.opgraph import operator_devices, operator_graph_from_data, synthetic_operator_graph

Q = importlib.import_module("stagecut.latency.quickp.ip")


def training_problem(shape="alexnet", n=400, gpus=2, seed=1):
    g, out, info = operator_graph_from_data(synthetic_operator_graph(n, shape, seed=seed, devices=gpus))
    return LatencyProblem(g, operator_devices(gpus), output_bytes=out), info


def positions(p, s):
    names = list(p.devices.names)
    dev = [names.index(s.placement[v]) for v in p.ids]
    seq = [[p.index[v] for v in s.order.get(name, ())] for name in names]
    return dev, seq


def short_solves(monkeypatch, seconds=2.0):
    """The MIP solves stop after ``seconds`` (the tests check what is found, not how fast)."""
    real = Q.solve
    monkeypatch.setattr(Q, "solve", lambda model, **kw: real(model, **{**kw, "time_limit": seconds}))


# ------------------------------------------------------------------------------ one time limit
def late_clock(monkeypatch):
    """Make the deadline pass when ``late["now"]`` is set (no waiting: the tests never depend on
    how fast this machine is)."""
    from stagecut._deadline import expired, remaining

    late = {"now": False}
    monkeypatch.setattr(Q, "expired", lambda: late["now"] or expired())
    monkeypatch.setattr(Q, "remaining", lambda: 0.0 if late["now"] else remaining())
    return late


def test_a_slow_build_is_cut_by_the_deadline(monkeypatch):
    # the model's build outlives the limit (planted: the deadline passes while the transitive
    # closure is computed): the build stops, the MIP is never solved, the answer is the best start
    late = late_clock(monkeypatch)
    p, _ = training_problem("alexnet", 300)
    real = Q.node_closure
    calls = {"closure": 0}

    def slow(problem):
        calls["closure"] += 1
        late["now"] = True
        return real(problem)

    def no_solve(*a, **k):
        raise AssertionError("solved after the deadline")

    monkeypatch.setattr(Q, "node_closure", slow)
    monkeypatch.setattr(Q, "solve", no_solve)
    s = quickp(p, time_limit=600, threads=1)
    assert calls["closure"] == 1
    assert s.status == "time_limit" and s.stats["built"] == 0
    assert s.stats["found_by"] in ("heft", "metis", "best-device")
    assert s.objective == min(s.stats["heft"], s.stats["metis"], s.stats["best-device"])


def test_the_solver_gets_what_is_left_of_the_limit(monkeypatch):
    # the solver's limit is what is left of the call's, less a reserve for the re-scoring
    from stagecut._deadline import remaining
    from stagecut._mip import MipOutcome

    p, _ = training_problem("alexnet", 300)
    got = {}

    def spy(model, **kw):
        got["limit"], got["left"] = kw["time_limit"], remaining()
        return MipOutcome(status="time_limit", objective=None, bound=-math.inf, seconds=0.0, solver="cbc",
                          rows=model.num_rows, cols=model.num_cols)

    monkeypatch.setattr(Q, "solve", spy)
    s = quickp(p, time_limit=600, threads=1)
    assert got["limit"] is not None and 0 < got["limit"] <= got["left"] + 1e-3 and got["limit"] < 600 - 1
    assert s.status == "time_limit" and s.stats["found_by"] in ("heft", "metis", "best-device", "ip")


def test_a_start_that_outlives_the_limit_is_abandoned(monkeypatch):
    # a planted HEFT that blocks (until released, or 60 s): quickp answers at its deadline with
    # the best single device instead of waiting for it
    import threading

    import stagecut.latency.heuristics.constructive as heuristics

    release = threading.Event()

    def stuck(problem):
        release.wait(60)
        return heuristics.best_device(problem)

    monkeypatch.setattr(heuristics, "heft", stuck)
    p, _ = training_problem("alexnet", 240)
    try:
        s = quickp(p, time_limit=1.0)
        assert not release.is_set()
    finally:
        release.set()
    assert s.status == "time_limit" and s.stats["abandoned"] == "heft" and s.stats["found_by"] == "best-device"
    assert "heft" not in s.stats and "metis" not in s.stats


def test_no_time_left_after_the_starts_skips_the_ip(monkeypatch):
    p, _ = training_problem("alexnet", 300)

    def no_ip(*a, **k):
        raise AssertionError("the IP ran with no time left")

    monkeypatch.setattr(Q, "solve_ip", no_ip)
    monkeypatch.setattr(Q, "remaining", lambda: 0.01)
    s = quickp(p, time_limit=30)
    assert s.status == "time_limit" and s.stats["ip_status"] == "skipped"
    assert s.objective == min(s.stats["heft"], s.stats["metis"], s.stats["best-device"])


# ------------------------------------------------------------------------------ the training graphs
@pytest.mark.parametrize("shape, core", [("alexnet", 233), ("vgg", 417)])
def test_training_graphs_are_mostly_free_operators(shape, core):
    data = synthetic_operator_graph(1200, shape, seed=3, devices=2)
    assert data == synthetic_operator_graph(1200, shape, seed=3, devices=2)
    assert data != synthetic_operator_graph(1200, shape, seed=4, devices=2)
    g, out, info = operator_graph_from_data(data)
    assert len(g) == 1200 and info["dropped_nodes"] == 0
    t = np.array([v.compute["gpu:0"] for v in g.nodes])
    assert (t == 0).mean() > 0.4 and (t < 5).mean() > 0.8      # most operators free or tiny
    assert t.max() > 100 * np.median(t[t > 0])                  # a few large convolutions
    sizes = info["edge_bytes"]
    assert len(sizes) == len(g.edges) and min(sizes.values()) == 0.0
    ops = info["op_types"]
    control = [b for (u, v), b in sizes.items() if "NoOp" in (ops[u], ops[v])]
    assert len(control) > 20 and set(control) == {0.0}           # control edges carry nothing
    assert info["unequal_outputs"] > 0                         # the loss's two outputs
    assert {"Conv2DBackpropFilter", "ApplyMomentum", "NoOp", "Shape"} <= set(ops.values())
    # a gradient reads a forward activation far back in the topological order
    p = LatencyProblem(g, operator_devices(2), output_bytes=out)
    pos = {v: k for k, v in enumerate(p.ids[i] for i in p.order)}
    assert max(pos[v] - pos[u] for u, v in g.edges) > len(g) / 4
    assert len(operator_graph_from_data(synthetic_operator_graph(core, shape)).graph) == core
    with pytest.raises(InvalidArgumentError, match=f"at least {core}"):
        synthetic_operator_graph(core - 1, shape)


def test_reader_gives_each_links_tensor():
    data = {"directed": True,
            "nodes": [{"id": v, "mem": 0, "comp_cost": {"GPU:0": 1.0}} for v in "abc"],
            "links": [{"source": "a", "target": "b", "tensor_size_in_bit": 80.0},
                      {"source": "a", "target": "c", "tensor_size_in_bit": 16.0}]}
    g, out, info = operator_graph_from_data(data)
    assert info["edge_bytes"] == {("a", "b"): 10.0, ("a", "c"): 2.0} and out["a"] == 10.0
    # two links between one pair (a multigraph: two tensors) both cross
    data["links"].append({"source": "a", "target": "b", "tensor_size_in_bit": 8.0})
    g, out, info = operator_graph_from_data(data)
    assert info["edge_bytes"][("a", "b")] == 11.0 and len(g.edges) == 2 and out["a"] == 10.0


# ------------------------------------------------------------------------------ never above its starts
@pytest.mark.parametrize("shape", ["alexnet", pytest.param("vgg", marks=pytest.mark.slow)])
def test_quickp_is_never_above_heft_or_metis_and_names_the_part(shape, monkeypatch):
    p, _ = training_problem(shape, 450)
    short_solves(monkeypatch)
    s = quickp(p, time_limit=600, threads=1)
    h, m, b = heft(p), metis(p), best_device(p)
    assert s.objective <= min(h.objective, m.objective, b.objective) * (1 + 1e-9)
    assert s.stats["heft"] == pytest.approx(h.objective) and s.stats["metis"] == pytest.approx(m.objective)
    by = s.stats["found_by"]
    assert by in ("ip", "heft", "metis", "best-device")
    want = s.stats["ip_makespan"] if by == "ip" else s.stats[by]
    assert s.objective == pytest.approx(want)
    assert evaluate_schedule(p, None, s.placement, s.order).objective == pytest.approx(s.objective)
    assert s.stats["fused_nodes"] < len(p) / 3


def test_warm_starts_reach_the_ip(monkeypatch):
    # HEFT's plan, mapped to the fused units, is a start of the IP: its upper bound is never above
    # the mapped plan's makespan, and with no time to solve the IP still answers with it
    p, _ = training_problem("alexnet", 300)
    seen = {}
    real = Q.solve_ip

    def spy(*args, **kw):
        seen["starts"] = kw["starts"]
        r = real(*args, **kw)
        seen["r"] = r
        return r

    monkeypatch.setattr(Q, "solve_ip", spy)
    short_solves(monkeypatch)
    s = quickp(p, time_limit=600, threads=1)
    assert len(seen["starts"]) == 3           # best device, HEFT, Metis
    f = fuse(p)
    assert all(len(x) == len(f) for x in seen["starts"])
    assert s.stats["upper"] >= seen["r"].makespan - 1e-6


def test_fused_placement_follows_where_the_time_runs():
    g = sc.Graph([sc.Node(v, {"gpu": t}) for v, t in [("a", 1.0), ("b", 5.0), ("c", 1.0)]], [("a", "b"), ("b", "c")])
    p = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0))
    f = fuse(p)
    assert len(f) == 1
    assert Q._fused_placement(f, [0, 1, 0]) == [1]      # b's 5 outweighs a + c
    g = sc.Graph([sc.Node(v, {"gpu": 0.0}) for v in "abc"], [("a", "b"), ("b", "c")])
    f = fuse(LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0)))
    assert Q._fused_placement(f, [1, 0, 1]) == [1]      # no time anywhere: most members


def test_a_warm_start_puts_each_group_where_most_of_its_time_runs():
    # group {a, b} split by the start: a (1) on gpu:1, b (5) on gpu:0; the group goes to gpu:0
    g = sc.Graph([sc.Node(v, {"gpu": t}) for v, t in [("a", 1.0), ("b", 5.0), ("c", 2.0)]], [("a", "c"), ("b", "c")])
    p = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0))
    units = Q._Units(p, [["a", "b"]])
    w = {(0, 2): 0.0, (1, 2): 0.0}
    dev, order, makespan = Q._from_placement(p, units, w, [1, 0, 1], "starts[0]")
    assert dev == [0, 0, 1] and order == [[0, 1], [2]] and makespan == 8.0
    with pytest.raises(InvalidArgumentError, match=r"starts\[0\]\[2\]"):
        Q._from_placement(p, units, w, [1, 0, 2], "starts[0]")


def test_polish_moves_units_while_that_helps_and_never_worsens():
    # two independent 4-unit jobs a and b start on one GPU (makespan 8): moving b to the other GPU
    # gives 4; a start that is already best stays as it is
    g = sc.Graph([sc.Node(v, {"gpu": 4.0}) for v in "ab"], [])
    p = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0))
    units = Q._Units(p, ())
    stats = {}
    start = Q._from_placement(p, units, {}, [0, 0], "s")
    assert start[2] == 8.0
    dev, order, ms = Q._polish(p, units, {}, start, stats)
    assert ms == 4.0 and sorted(dev) == [0, 1] and stats["polished_makespan"] == 4.0
    assert Q._polish(p, units, {}, (dev, order, ms), {})[2] == 4.0
    # with no evaluations allowed, the start comes back untouched
    assert Q._polish(p, units, {}, start, stats, max_evaluations=0)[2] == 8.0


def test_the_ip_starts_from_the_polished_start(monkeypatch):
    # the only start puts both jobs on one GPU (8); polished, they run side by side (4), and a
    # solver that finds nothing leaves the IP with that plan
    from stagecut._mip import MipOutcome

    g = sc.Graph([sc.Node(v, {"gpu": 4.0}) for v in "ab"], [])
    p = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0))
    monkeypatch.setattr(Q, "_heuristic", lambda *a: None)
    monkeypatch.setattr(Q, "solve", lambda model, **kw: MipOutcome(
        status="time_limit", objective=None, bound=-math.inf, seconds=0.0, solver="cbc", rows=model.num_rows,
        cols=model.num_cols))
    r = Q.solve_ip(p, starts=[[0, 0]])
    assert r.makespan == 4.0 and r.stats["start_makespan"] == 8.0 and r.stats["polished_makespan"] == 4.0


def test_list_order_keeps_chains_and_prefers_early_inputs():
    # x and y are independent on one device: y's input arrives first, so y runs first;
    # a chain (x before y) overrides that
    g = sc.Graph([sc.Node(v, {"gpu": t}) for v, t in [("s", 1.0), ("t", 5.0), ("x", 1.0), ("y", 1.0)]],
                 [("t", "x"), ("s", "y")])
    p = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0))
    w = {(p.index["t"], p.index["x"]): 0.0, (p.index["s"], p.index["y"]): 0.0}
    dev = [0, 1, 0, 0] if p.ids == ["s", "t", "x", "y"] else None
    assert dev is not None
    assert list_order(p, w, dev) == [[0, 3, 2], [1]]
    assert list_order(p, w, dev, chains=[[2, 3]]) == [[0, 2, 3], [1]]


def test_list_order_counts_the_devices_busy_time():
    # p (10) and q (1) are sources on gpu:0, r (1) on gpu:1; u (after q) and v (after r) on gpu:1.
    # q waits for p: it ends at 11, so u's input arrives at 11 and v (input at 1) runs first
    g = sc.Graph([sc.Node(v, {"gpu": t}) for v, t in [("p", 10.0), ("q", 1.0), ("r", 1.0), ("u", 1.0), ("v", 1.0)]],
                 [("q", "u"), ("r", "v")])
    p = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0))
    assert p.ids == ["p", "q", "r", "u", "v"] and p.order == [0, 1, 2, 3, 4]
    w = {(1, 3): 0.0, (2, 4): 0.0}
    assert list_order(p, w, [0, 0, 1, 1, 1]) == [[0, 1], [2, 4, 3]]


# ------------------------------------------------------------------------------ per-edge transfers
def test_per_edge_transfers_score_each_links_tensor():
    # a sends 10 bytes to b and 2 to c; with c elsewhere, the per-node model charges 10 (a's
    # largest output), the per-edge model 2
    data = {"directed": True,
            "nodes": [{"id": "a", "mem": 0, "comp_cost": {"GPU:0": 1.0, "GPU:1": 1.0}},
                      {"id": "b", "mem": 0, "comp_cost": {"GPU:0": 4.0, "GPU:1": 4.0}},
                      {"id": "c", "mem": 0, "comp_cost": {"GPU:0": 4.0, "GPU:1": 4.0}}],
            "links": [{"source": "a", "target": "b", "tensor_size_in_bit": 80.0},
                      {"source": "a", "target": "c", "tensor_size_in_bit": 16.0}]}
    g, out, info = operator_graph_from_data(data)
    devs = Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0)
    p = LatencyProblem(g, devs, output_bytes=out)
    node = quickp(p, time_limit=10, alpha=-math.inf)     # no fusion: three nodes
    edge = quickp(p, time_limit=10, alpha=-math.inf, edge_bytes=info["edge_bytes"])
    assert node.objective == 9.0                 # 1 + 4 + 4 on one GPU beats 1 + 10 + 4
    assert edge.objective == 7.0                 # a, b on one GPU, c on the other: 1 + 2 + 4
    dev, seq = positions(p, edge)
    w = {(p.index[u], p.index[v]): b for (u, v), b in info["edge_bytes"].items()}
    assert max(edge_asap(p, w, dev, seq)[1]) == 7.0 == max(edge.finish.values())
    assert edge.stats["per_node_makespan"] == 15.0 and edge.stats["found_by"] == "ip"
    with pytest.raises(InvalidArgumentError, match="not an edge"):
        quickp(p, edge_bytes={("b", "a"): 1.0})


def test_per_edge_fused_sizes_add_every_crossing_link():
    # c + d fuse (c small, its one consumer d); a -> c and a -> d both cross from {a}: with a
    # transfer per edge both tensors count (3 + 4), unlike the per-node model's one output (3)
    g = sc.Graph([sc.Node(v, {"gpu": t}) for v, t in zip("abcd", (10.0, 10.0, 1.0, 1.0))],
                 [("a", "c"), ("a", "d"), ("b", "c"), ("c", "d")])
    p = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0),
                       output_bytes={"a": 3.0, "b": 5.0, "c": 7.0, "d": 0.0})
    f = fuse(p, alpha=2.0)
    assert sorted(f.groups.values()) == [("a",), ("b",), ("c", "d")]
    w = {(0, 2): 3.0, (0, 3): 4.0, (1, 2): 5.0, (2, 3): 6.0}
    assert Q._per_edge_sizes(f, w) == {("a", "c"): 7.0, ("b", "c"): 5.0}


def test_infeasible_only_when_proven():
    # three independent 6-byte nodes, two GPUs of 10 bytes: nothing fits, but no single node is too
    # big, so the answer is "unknown"; a node of 11 bytes fits nowhere: "infeasible"
    devs = Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0, memory=10.0)
    g = sc.Graph([sc.Node(v, {"gpu": 1.0}, memory=6.0) for v in "abc"], [])
    s = quickp(LatencyProblem(g, devs), time_limit=10)
    assert s.objective is None and s.status == "unknown"
    g = sc.Graph([sc.Node("a", {"gpu": 1.0}, memory=11.0), sc.Node("b", {"gpu": 1.0})], [("a", "b")])
    s = quickp(LatencyProblem(g, devs), time_limit=10)
    assert s.objective is None and s.status == "infeasible" and "fits on no device" in s.notes[0]


def test_bad_time_limit_is_refused():
    p, _ = training_problem("alexnet", 240)
    with pytest.raises(InvalidArgumentError, match="time_limit"):
        quickp(p, time_limit=-1)
    with pytest.raises(InvalidArgumentError, match="order"):
        quickp(p, order="any")
    assert math.isfinite(quickp(p, time_limit=2).objective)
