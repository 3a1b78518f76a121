"""The PCIe-star ("pieces") semantics of the throughput workloads' authors: the four expert
values, the all-CPU and one-accelerator values, hand-made cases, an independent re-implementation
of the authors' computeLatency on random placements, and the Schedule's fields."""

import random

import pytest

import stagecut as sc
from helpers import SHARED, require_shared
from stagecut.errors import InvalidArgumentError
from stagecut.formats import read_split, read_workload
from stagecut.graph import Node
from stagecut.latency import Devices, LatencyProblem, Schedule
from stagecut.latency.pcie.pieces import evaluate_pieces, pieces_timing

LAYER = SHARED / "latency-inputs" / "LayerGraphs"
EXPERTS = SHARED / "human-experts"
EXPERT_VALUES = {"bert24": 111.937, "gnmt": 293.403, "inceptionv3": 865.519, "resnet50": 1014.927}


def _workload(name):
    return read_workload(require_shared(LAYER / f"{name}_inference.json"))


# ----------------------------------------------------------------------------- the published values
@pytest.mark.parametrize("name", sorted(EXPERT_VALUES))
def test_expert_splits_reproduce_the_published_latency(name):
    g = _workload(name)
    split = read_split(require_shared(EXPERTS / f"{name}_inference_expert.json"), g)
    s = evaluate_pieces(g, split)
    assert round(s.objective, 3) == EXPERT_VALUES[name]
    assert s.semantics == "pieces" and s.status == "feasible"
    assert s.objective == pytest.approx(max(s.finish.values()))
    _check_schedule(LatencyProblem.from_workload(g, accelerators=6), s)


def test_bert24_expert_split_uses_more_accelerators_than_the_file_allows():
    g = _workload("bert24")
    s = evaluate_pieces(g, read_split(require_shared(EXPERTS / "bert24_inference_expert.json"), g))
    assert any("6 accelerators" in v and "maxFPGAs" in v for v in s.violations)


def _longest_cpu_path(g):
    best = {}
    for i in g.topological_order():
        best[i] = g.nodes[i].compute["cpu"] + max((best[u] for u in g.pred[i]), default=0.0)
    return max(best.values())


@pytest.mark.parametrize("name", sorted(EXPERT_VALUES))
def test_all_cpu_is_the_longest_cpu_path_and_one_accelerator_the_sum(name):
    g = _workload(name)
    cpu = evaluate_pieces(g, {v: ("cpu", 0) for v in g.ids})
    assert cpu.objective == pytest.approx(_longest_cpu_path(g), rel=1e-12)
    assert not cpu.transfers and cpu.busy == {"cpu": pytest.approx(sum(n.compute["cpu"] for n in g.nodes))}
    one = evaluate_pieces(g, {v: "accelerator:0" for v in g.ids})
    assert one.objective == pytest.approx(sum(n.compute["accelerator"] for n in g.nodes), rel=1e-12)
    assert one.stats["pieces"] == 1 and not one.transfers
    if name == "bert24":
        assert round(cpu.objective, 2) == 924.06 and round(one.objective, 3) == 92.406


# ----------------------------------------------------------------------------- hand-made cases
def _graph(spec, edges, **defaults):
    """spec: id -> (acc time, cpu time, comm, memory)."""
    nodes = [Node(v, {"accelerator": a, "cpu": c}, memory=m, comm=k) for v, (a, c, k, m) in spec.items()]
    return sc.Graph(nodes, edges, defaults)


def test_a_producer_pays_its_comm_once_into_and_once_out_of_a_piece():
    # s (CPU) feeds a and b (one piece); a and b both feed t and u (CPU)
    g = _graph({"s": (1, 2, 3.0, 0), "a": (1, 9, 5.0, 0), "b": (2, 9, 7.0, 0), "t": (9, 1, 0, 0), "u": (9, 4, 0, 0)},
               [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t"), ("a", "u"), ("b", "u")])
    s = evaluate_pieces(LatencyProblem.from_workload(g, accelerators=1),
                        {"s": "cpu", "a": "accelerator:0", "b": "accelerator:0", "t": "cpu", "u": "cpu"})
    # ready 2, in 3 (s once), compute 1 + 2, out 5 + 7 (a and b once each): end 20; u ends 24
    assert s.objective == 24.0
    assert s.start["a"] == 5.0 and s.finish["a"] == 6.0 and s.start["b"] == 6.0 and s.finish["b"] == 8.0
    assert s.start["t"] == 20.0 and s.start["u"] == 20.0
    assert s.busy["accelerator:0"] == 18.0
    ins = [(t.node, t.source, t.target, t.start, t.finish) for t in s.transfers if t.target != "cpu"]
    outs = [(t.node, t.start, t.finish) for t in s.transfers if t.target == "cpu"]
    assert ins == [("s", "cpu", "accelerator:0", 2.0, 5.0)]
    assert outs == [("a", 8.0, 13.0), ("b", 13.0, 20.0)]
    assert s.critical_path == ("s", "a", "b", "u")


def test_a_piece_waits_for_its_last_input():
    g = _graph({"x": (1, 1, 1.0, 0), "y": (1, 6, 2.0, 0), "p": (3, 50, 0, 0)}, [("x", "p"), ("y", "p")])
    s = evaluate_pieces(LatencyProblem.from_workload(g, accelerators=1),
                        {"x": "cpu", "y": "cpu", "p": "accelerator:0"})
    assert s.start["x"] == s.start["y"] == 0.0  # the CPU pool runs both at once
    assert s.objective == 6 + 1 + 2 + 3
    assert s.critical_path == ("y", "p")


def test_a_non_contiguous_accelerator_is_cut_into_pieces_that_run_in_order():
    # a -> b -> c with b on the CPU: a and c on one accelerator are two pieces; d joins piece 1
    g = _graph({"a": (1, 10, 1.0, 0), "b": (1, 2, 1.0, 0), "c": (1, 10, 0, 0), "d": (4, 10, 0, 0)},
               [("a", "b"), ("b", "c")])
    p = LatencyProblem.from_workload(g, accelerators=1)
    s = evaluate_pieces(p, {"a": "accelerator:0", "b": "cpu", "c": "accelerator:0", "d": "accelerator:0"})
    tm = pieces_timing(p, [1, 0, 1, 1])
    assert [(pc.index, [g.nodes[v].id for v in pc.nodes]) for pc in tm.pieces] == [(1, ["a", "d"]), (2, ["c"])]
    # piece 1: 1 + 4 + out 1 = 6; b: 6..8; piece 2: in 1 + 1 = 10
    assert s.objective == 10.0 and s.stats["pieces"] == 2 and s.stats["max_pieces_per_device"] == 1 + 1
    assert s.order["accelerator:0"] == ("a", "d", "c")
    assert s.busy["accelerator:0"] == 6.0 + 2.0


def test_two_accelerators_pay_a_crossing_tensor_twice_through_cpu_memory():
    g = sc.Graph.chain([2.0, 3.0], cpu_costs=[9.0, 9.0], comm=1.5)
    s = evaluate_pieces(LatencyProblem.from_workload(g, accelerators=2), [1, 2])
    assert s.objective == 2 + 1.5 + 1.5 + 3
    assert [(t.source, t.target) for t in s.transfers] == [("accelerator:0", "cpu"), ("cpu", "accelerator:1")]


def test_violations_memory_and_colour_classes():
    nodes = [Node(0, {"accelerator": 1, "cpu": 2}, memory=3, colocation="k"),
             Node(1, {"accelerator": 1, "cpu": 2}, memory=3, colocation="k"),
             Node(2, {"accelerator": 1, "cpu": 2}, memory=3)]
    g = sc.Graph(nodes, [(0, 1), (1, 2)], {"accelerators": 1, "memory": 5.0})
    s = evaluate_pieces(g, {0: "accelerator:0", 1: "cpu", 2: "accelerator:0"})
    assert any("accelerator:0 holds 6 bytes" in v for v in s.violations)
    assert any("colour class 'k'" in v for v in s.violations)
    assert s.memory_used == {"cpu": 3.0, "accelerator:0": 6.0}
    ok = evaluate_pieces(g, {0: "cpu", 1: "cpu", 2: "accelerator:0"})
    assert ok.violations == ()


def test_placement_forms_agree_and_the_schedule_round_trips():
    g = sc.Graph.chain([1.0, 2.0, 3.0], cpu_costs=[4.0, 5.0, 6.0], comm=0.5, defaults={"accelerators": 2})
    p = LatencyProblem.from_workload(g)
    forms = [{0: "cpu", 1: "accelerator:1", 2: "accelerator:1"}, [0, 2, 2],
             {0: ("cpu", 3), 1: ("accelerator", 1), 2: ("accelerator", 1)}]
    values = [evaluate_pieces(p, f) for f in forms] + [evaluate_pieces(g, forms[0])]
    assert len({s.objective for s in values}) == 1 and values[0].objective == 4 + 0.5 + 5
    assert Schedule.from_json(values[0].to_json()) == values[0]
    assert evaluate_pieces(p, values[0]).objective == values[0].objective  # a Schedule is a placement


@pytest.mark.parametrize("placement, match", [
    ({0: "cpu", 1: "cpu"}, "node 2 has no device"),
    ({0: "cpu", 1: "cpu", 2: "cpu", 7: "cpu"}, "unknown node 7"),
    ({0: "cpu", 1: "gpu:0", 2: "cpu"}, "node 1 is on 'gpu:0'"),
    ({0: "cpu", 1: ("accelerator", 5), 2: "cpu"}, "node 1 is on"),
    ({0: "cpu", 1: 1.5, 2: "cpu"}, "node 1: expected a device"),
    ({0: "cpu", 1: "cpu", 2: "accelerator:0"}, "node 2 cannot run on accelerator:0"),
    ([0, 0], "expected 3 devices"),
    ("cpu", "placement: expected"),
])
def test_bad_placements_name_the_node(placement, match):
    nodes = [Node(i, {"accelerator": 1, "cpu": 1}) for i in range(2)] + [Node(2, {"cpu": 1})]
    p = LatencyProblem(sc.Graph(nodes, [(0, 1), (1, 2)]), Devices.pcie_star(1))
    with pytest.raises(InvalidArgumentError, match=match):
        evaluate_pieces(p, placement)


def test_only_the_pcie_star():
    g = sc.Graph([Node(0, {"gpu": 1.0}), Node(1, {"gpu": 1.0})], [(0, 1)])
    p = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0), output_bytes="comm")
    with pytest.raises(InvalidArgumentError, match="PCIe star"):
        evaluate_pieces(p, ["gpu:0", "gpu:1"])


# ----------------------------------------------------------------------------- an independent reference
def reference_latency(g, dev_of):
    """The authors' computeLatency, written again from their description: pieces by the
    'exits on the longest path' count, then the contracted DAG in a topological order."""
    n = len(g)
    piece = {}
    for d in {d for d in dev_of if d != "cpu"}:
        inside = [dev_of[i] == d for i in range(n)]
        h = {}
        for v in g.topological_order():
            h[v] = max([1 if inside[v] else 0] + [h[u] + (inside[v] and not inside[u]) for u in g.pred[v]])
            if inside[v]:
                piece[v] = (d, h[v])
    groups = {}
    for i in range(n):
        groups.setdefault(piece.get(i, ("cpu", i)), []).append(i)
    latency = {}
    pending = dict(groups)
    while pending:
        before = len(pending)
        for key, ms in list(pending.items()):
            mset = set(ms)
            ext = {u for v in ms for u in g.pred[v] if u not in mset}
            if not all(u in latency for u in ext):
                continue
            ready = max((latency[u] for u in ext), default=0.0)
            if key[0] == "cpu":
                latency[ms[0]] = ready + g.nodes[ms[0]].compute["cpu"]
            else:
                comm_in = sum(g.nodes[u].comm for u in ext)
                comm_out = sum(g.nodes[v].comm for v in ms if any(w not in mset for w in g.succ[v]))
                end = ready + comm_in + sum(g.nodes[v].compute["accelerator"] for v in ms) + comm_out
                for v in ms:
                    latency[v] = end
            del pending[key]
        if len(pending) == before:
            return None  # pieces wait for each other: the authors' code fails ("not acyclic")
    return max(latency.values())


def random_graph(rng, n, p_edge=0.35):
    nodes = [Node(i, {"accelerator": rng.randint(0, 8), "cpu": rng.randint(0, 25)}, memory=rng.randint(0, 4),
                  comm=rng.choice([0, 0.5, 1, 2, 3.25])) for i in range(n)]
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < p_edge]
    return sc.Graph(nodes, edges)


@pytest.mark.parametrize("seed", range(150))
def test_pieces_equal_the_reference_on_random_placements(seed):
    rng = random.Random(seed)
    g = random_graph(rng, rng.randint(1, 12))
    k = rng.randint(1, 3)
    p = LatencyProblem.from_workload(g, accelerators=k)
    dev = [rng.randint(0, k) for _ in range(len(g))]
    expected = reference_latency(g, ["cpu" if d == 0 else d for d in dev])
    if expected is None:
        with pytest.raises(InvalidArgumentError, match="wait for each other in a cycle"):
            evaluate_pieces(p, dev)
        return
    s = evaluate_pieces(p, dev)
    assert s.objective == pytest.approx(expected, abs=1e-9)
    _check_schedule(p, s)


def test_pieces_that_feed_each_other_are_refused_naming_them():
    # {a, d} on accelerator 0 and {b, c} on accelerator 1, each convex: a -> b, c -> d
    g = _graph({v: (1, 1, 1.0, 0) for v in "abcd"}, [("a", "b"), ("c", "d")])
    p = LatencyProblem.from_workload(g, accelerators=2)
    with pytest.raises(InvalidArgumentError, match=r"piece 1 of accelerator:\d \{'[ad]', '[ad]'\} ->"):
        evaluate_pieces(p, {"a": "accelerator:0", "d": "accelerator:0", "b": "accelerator:1", "c": "accelerator:1"})
    assert evaluate_pieces(p, {"a": "accelerator:0", "d": "accelerator:0", "b": "accelerator:1", "c": "cpu"})


def _check_schedule(p, s):
    """The fields of a pieces schedule agree with each other and with the release times."""
    g = p.graph
    pos = {v: i for i, v in enumerate(p.ids)}
    dev = [p.devices.index(s.placement[v]) for v in p.ids]
    tm = pieces_timing(p, dev)
    release = {v: float(tm.release[pos[v]]) for v in p.ids}
    piece = {v: (pc.device, pc.index) for pc in tm.pieces for v in (p.ids[i] for i in pc.nodes)}
    eps = 1e-9 * max(1.0, s.objective)
    assert s.objective == pytest.approx(max(s.finish.values()), abs=eps) == pytest.approx(max(release.values()))
    assert sorted(map(repr, (v for seq in s.order.values() for v in seq))) == sorted(map(repr, p.ids))
    for name, seq in s.order.items():
        for v in seq:
            assert s.placement[v] == name
            assert s.finish[v] == pytest.approx(s.start[v] + p.times[pos[v], dev[pos[v]]], abs=eps)
            assert release[v] >= s.finish[v] - eps
        if name != "cpu":  # one compute at a time on an accelerator
            assert all(s.start[y] >= s.finish[x] - eps for x, y in zip(seq, seq[1:]))
    for v in p.ids:
        ins = [p.ids[u] for u in g.pred[pos[v]]]
        if s.placement[v] == "cpu":  # as soon as the last input is released
            assert s.start[v] == pytest.approx(max((release[u] for u in ins), default=0.0), abs=eps)
            assert release[v] == s.finish[v]
        for u in ins:
            if piece.get(u) != piece.get(v) or piece.get(v) is None:
                assert s.start[v] >= release[u] + (g.node(u).comm if s.placement[v] != "cpu" else 0) - eps
            else:
                assert release[u] == release[v]
    for t in s.transfers:  # in-transfers after the release, before the consumer's compute
        if t.target != "cpu":
            assert t.start >= release[t.node] - eps
    assert set(s.critical_path) <= set(p.ids)
    assert release[s.critical_path[-1]] == pytest.approx(s.objective)
    assert s.memory_used == {d: pytest.approx(sum(g.node(v).memory for v in seq)) for d, seq in s.order.items()}
