"""Pipeline timelines (issue 16, item 4): 1F1B and GPipe on a contiguous split against hand
computations and invariants, and the Section 5.2 virtual-stage pipeline of a non-contiguous
split, whose steady state is the split's max load."""

import itertools
import json
import math
import random

import networkx as nx
import pytest

import stagecut as sc
from helpers import SHARED, random_inference_graph, random_training_graph, require_shared
from stagecut.errors import InvalidArgumentError
from stagecut.graph import Node
from stagecut.throughput.gpipe import gpipe_objective
from stagecut.throughput.schedules import gpipe, one_f_one_b, pieces, pieces_timeline, pipeline_timeline


def by_key(tl):
    return {(s.stage, s.microbatch, s.phase[0].upper()): s for s in tl.slots}


def check_stage_invariants(tl, fw, bw, lat):
    """Each op once with its stage's time, no overlap on a device, dependencies (with latency)."""
    n, m = len(fw), tl.microbatches
    ops = by_key(tl)
    assert len(ops) == len(tl.slots) == 2 * n * m
    for (i, j, p), s in ops.items():
        assert s.device == tl.devices[i]
        assert s.end - s.start == pytest.approx(fw[i] if p == "F" else bw[i])
        if p == "F" and i:
            assert s.start >= ops[(i - 1, j, "F")].end + lat[i - 1] - 1e-9
        if p == "B":
            before = ops[(i + 1, j, "B")].end + lat[i] if i + 1 < n else ops[(i, j, "F")].end
            assert s.start >= before - 1e-9
    for d in tl.devices:
        mine = sorted((s.start, s.end) for s in tl.slots if s.device == d)
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(mine, mine[1:]))


def random_stages(rng):
    n = rng.randint(1, 5)
    return [float(rng.randint(0, 6)) for _ in range(n)], [float(rng.randint(0, 9)) for _ in range(n)]


def test_1f1b_on_three_stages_by_hand():
    # FW (1, 2, 1), BW (2, 2, 2), 3 microbatches; stage orders F0 F1 F2 B0 B1 B2 / F0 F1 B0 F2 B1 B2 /
    # F0 B0 F1 B1 F2 B2, each op as soon as its device is free and its input has arrived
    tl = one_f_one_b([1.0, 2.0, 1.0], [2.0, 2.0, 2.0], 3)
    got = {(s.stage, s.label): (s.start, s.end) for s in tl.slots}
    want = {
        (0, "F0"): (0, 1), (0, "F1"): (1, 2), (0, "F2"): (2, 3), (0, "B0"): (8, 10), (0, "B1"): (12, 14),
        (0, "B2"): (15, 17),
        (1, "F0"): (1, 3), (1, "F1"): (3, 5), (1, "B0"): (6, 8), (1, "F2"): (8, 10), (1, "B1"): (10, 12),
        (1, "B2"): (13, 15),
        (2, "F0"): (3, 4), (2, "B0"): (4, 6), (2, "F1"): (6, 7), (2, "B1"): (7, 9), (2, "F2"): (10, 11),
        (2, "B2"): (11, 13),
    }
    assert got == want
    assert [s.label for s in tl.slots if s.stage == 1] == ["F0", "F1", "B0", "F2", "B1", "B2"]
    assert tl.makespan == 17.0 and tl.rows()[0] == ("stage 0", 0.0, 1.0, "F0")


def test_gpipe_on_three_stages_by_hand():
    tl = gpipe([1.0, 2.0, 1.0], [2.0, 2.0, 2.0], 3)
    got = {(s.stage, s.label): (s.start, s.end) for s in tl.slots}
    assert [got[(2, x)] for x in ("F0", "F1", "F2", "B2", "B1", "B0")] == [(3, 4), (5, 6), (7, 8), (8, 10),
                                                                           (10, 12), (12, 14)]
    assert [got[(0, x)] for x in ("B2", "B1", "B0")] == [(12, 14), (14, 16), (16, 18)]
    assert tl.makespan == 18.0  # 4 + 6 + 2 * (2 + 2)


def test_invariants_closed_forms_and_steady_states_on_random_pipelines():
    rng = random.Random(4)
    for _ in range(60):
        fw, bw = random_stages(rng)
        n, m = len(fw), rng.randint(1, 7)
        lat = [float(rng.randint(0, 2)) for _ in range(n - 1)] if rng.random() < 0.5 else [0.0] * (n - 1)
        for run in (one_f_one_b, gpipe):
            check_stage_invariants(run(fw, bw, m, latency=lat), fw, bw, lat)
        # GPipe without latency: a flow shop forward, then one backward
        want = sum(fw) + sum(bw) + (m - 1) * (max(fw) + max(bw))
        assert gpipe(fw, bw, m).makespan == want
        # 1F1B keeps at most S - i microbatches in flight at stage i
        tl = one_f_one_b(fw, bw, m)
        ops = by_key(tl)
        for i in range(n):
            for t in {s.start for s in tl.slots}:
                live = sum(1 for j in range(m) if ops[(i, j, "F")].start <= t < ops[(i, j, "B")].end)
                assert live <= n - i
        # one more microbatch costs max(FW + BW) (1F1B) and max FW + max BW (GPipe)
        big = 4 * n + 6
        step = one_f_one_b(fw, bw, big + 1).makespan - one_f_one_b(fw, bw, big).makespan
        assert step == max(f + b for f, b in zip(fw, bw))
        assert one_f_one_b(fw, bw, big).steady_state() == pytest.approx(max(f + b for f, b in zip(fw, bw)))
        assert gpipe(fw, bw, big + 1).makespan - gpipe(fw, bw, big).makespan == max(fw) + max(bw)


def test_pipeline_timeline_of_a_plan_runs_at_its_objectives():
    g = sc.transformer_like(layers=2, training=True, seed=3)
    plan = sc.partition(g, devices=3, cpus=0)
    tl = pipeline_timeline(g, plan.device_of(), 20)
    assert tl.devices == tuple(s.device for s in plan.stages)
    assert tl.steady_state() == pytest.approx(plan.objective)
    # a chain with FW (6, 4, 2, 1), BW (4, 1, 4, 4): the DP's {0, 1} | {2, 3} has FW 10, 3 and BW 5, 8
    fwd = [Node(i, {"accelerator": t}, colocation=i) for i, t in enumerate([6.0, 4.0, 2.0, 1.0])]
    bwd = [Node(10 + i, {"accelerator": t}, colocation=i, backward=True) for i, t in enumerate([4.0, 1.0, 4.0, 4.0])]
    g = sc.Graph(fwd + bwd, [(0, 1), (1, 2), (2, 3), (13, 12), (12, 11), (11, 10)] + [(i, 10 + i) for i in range(4)])
    split = sc.partition(g, devices=2).device_of()
    assert pipeline_timeline(g, split, 12).steady_state() == 15.0
    step = (pipeline_timeline(g, split, 13, schedule="gpipe").makespan
            - pipeline_timeline(g, split, 12, schedule="gpipe").makespan)
    assert step == gpipe_objective(g, split) == 18.0


def quotient(graph, key_of):
    q = nx.DiGraph()
    q.add_nodes_from(set(key_of.values()))
    q.add_edges_from((key_of[u], key_of[v]) for u, v in graph.edges if key_of[u] != key_of[v])
    return q


def random_split(rng, g, k, l):
    devs = [("accelerator", i) for i in range(k)] + [("cpu", i) for i in range(l)]
    split = {}
    for n in g.nodes:
        ok = [d for d in devs if n.supports(d[0])]
        split[n.id] = rng.choice(ok)
    return split


def test_pieces_are_maximal_acyclic_and_add_up_to_the_device_loads():
    rng = random.Random(5)
    seen_cyclic = 0
    for t in range(80):
        g = random_inference_graph(rng, rng.randint(2, 8)) if t % 2 else random_training_graph(rng, rng.randint(2, 5))
        split = random_split(rng, g, rng.randint(1, 3), 1)
        ps = pieces(g, split)
        assert sorted(map(repr, (v for p in ps for v in p.nodes))) == sorted(repr(n.id) for n in g.nodes)
        piece_of = {v: p.stage for p in ps for v in p.nodes}
        assert all(f"{split[v][0]}:{split[v][1]}" == p.device for p in ps for v in p.nodes)
        q = quotient(g, piece_of)
        assert nx.is_directed_acyclic_graph(q)
        assert all(piece_of[u] <= piece_of[v] for u, v in g.edges)  # numbered in pipeline order
        for a, b in itertools.combinations(ps, 2):  # maximal: no two pieces of a device merge
            if a.device == b.device:
                merged = {v: (a.stage if s == b.stage else s) for v, s in piece_of.items()}
                assert not nx.is_directed_acyclic_graph(quotient(g, merged))
        loads = {}
        for p in ps:
            loads[p.device] = loads.get(p.device, 0.0) + p.load
        ev = sc.evaluate(g, split)
        assert loads == pytest.approx({s.device: s.load for s in ev.stages})
        if not ev.acyclic_quotient:
            seen_cyclic += 1
        elif not g.is_training:
            assert len(ps) == len(ev.stages)  # a contiguous split: one piece per device
    assert seen_cyclic > 10


def test_pieces_timeline_respects_dependencies_and_runs_at_the_max_load():
    rng = random.Random(6)
    for t in range(30):
        g = random_inference_graph(rng, rng.randint(2, 7)) if t % 3 else random_training_graph(rng, rng.randint(2, 4))
        split = random_split(rng, g, rng.randint(1, 3), 1)
        ps = pieces(g, split)
        m = 2 * len(ps) + 12
        tl = pieces_timeline(g, split, m)
        ops = {(s.stage, s.microbatch): s for s in tl.slots}
        assert len(ops) == len(tl.slots) == m * len(ps)
        stage_of = {v: p.stage for p in ps for v in p.nodes}
        for u, v in g.edges:
            a, b = stage_of[u], stage_of[v]
            if a != b:
                assert all(ops[(b, j)].start >= ops[(a, j)].end - 1e-9 for j in range(m))
        for d in tl.devices:
            mine = sorted((s.start, s.end) for s in tl.slots if s.device == d)
            assert all(x[1] <= y[0] + 1e-9 for x, y in zip(mine, mine[1:]))
        assert tl.steady_state() == pytest.approx(sc.evaluate(g, split).objective, rel=1e-9, abs=1e-9)


def test_bad_arguments():
    with pytest.raises(InvalidArgumentError, match="one time per stage"):
        one_f_one_b([1.0, 2.0], [1.0], 2)
    with pytest.raises(InvalidArgumentError, match="forward\\[1\\]"):
        gpipe([1.0, -2.0], [1.0, 1.0], 2)
    with pytest.raises(InvalidArgumentError, match="microbatches"):
        gpipe([1.0], [1.0], 0)
    with pytest.raises(InvalidArgumentError, match="latency"):
        one_f_one_b([1.0, 2.0], [1.0, 1.0], 2, latency=[1.0, 1.0])
    with pytest.raises(InvalidArgumentError, match="no steady state"):
        gpipe([1.0], [1.0], 9).steady_state()
    with pytest.raises(InvalidArgumentError, match="= 6 microbatches"):
        one_f_one_b([1.0, 2.0], [1.0, 1.0], 5).steady_state()
    g = sc.Graph([Node(v, {"accelerator": 1.0}) for v in ("a1", "a2", "b1", "b2")], [("a1", "b1"), ("b2", "a2")])
    crossed = {"a1": ("accelerator", 0), "a2": ("accelerator", 0), "b1": ("accelerator", 1), "b2": ("accelerator", 1)}
    with pytest.raises(InvalidArgumentError, match="pieces_timeline"):
        pipeline_timeline(g, crossed, 4)
    # ranks a1 0, b2 0, b1 1, a2 1; {a1} and {a2} merge ({b2} -> {a1, a2} -> {b1}), then {b1}, {b2} cannot
    assert [p.nodes for p in pieces(g, crossed)] == [("b2",), ("a1", "a2"), ("b1",)]
    with pytest.raises(InvalidArgumentError, match="schedule"):
        pipeline_timeline(g, {v: ("accelerator", 0) for v in ("a1", "a2", "b1", "b2")}, 4, schedule="zb")


@pytest.mark.slow
def test_section_5_2_timeline_of_the_noncontiguous_ip_split_of_bert_l3_reaches_its_max_load():
    path = require_shared(SHARED / "throughput-inputs" / "OperatorGraphs" / "bert_l-3_inference.json")
    published = json.loads((SHARED / "published-table1.json").read_text())
    col = published["columns"].index("ip_noncontiguous_tps")
    want = published["rows"]["OperatorGraphs/bert_l-3_inference.json"][col]  # 21.91
    g = sc.read_workload(path)  # the file's 3 accelerators and 1 CPU
    plan = sc.partition_ip(g, contiguous=False, time_limit=600, threads=1, warm_start=sc.partition(g))
    split = plan.device_of()
    ev = sc.evaluate(g, split)
    assert ev.feasible and not ev.acyclic_quotient
    assert ev.objective == pytest.approx(want, abs=0.005)
    ps = pieces(g, split)
    assert len(ps) > len(ev.stages)
    tl = pieces_timeline(g, split, 4 * len(ps))
    assert tl.steady_state() == pytest.approx(ev.objective, rel=1e-9)
    assert math.isclose(round(tl.steady_state(), 2), want)
