"""QuickP's IPs (P1, P2) and the pipeline (issue 14 item 3), against a brute force of their own."""

import importlib
import itertools
import math
import random

import pytest

import stagecut as sc
from stagecut.errors import InvalidArgumentError
from stagecut.latency import Devices, LatencyProblem, evaluate_schedule
from stagecut.latency.quickp.colocate import colocation_groups
from stagecut.latency.quickp.fusion import fuse
from stagecut.latency.quickp.ip import edge_asap, fused_edge_sizes, list_order, quickp, solve_ip
from stagecut.latency.quickp.opgraph import operator_devices, operator_graph_from_data, synthetic_operator_graph

SEVEN_EDGES = {(0, 3): 4, (0, 4): 5, (1, 3): 0, (2, 3): 5, (3, 4): 3, (3, 5): 4, (3, 6): 1, (4, 5): 3, (5, 6): 3}
SEVEN_TIMES = [9, 4, 6, 1, 7, 2, 4]


def two_gpus(bw=1.0, memory=math.inf):
    return Devices.servers(1, 2, intra_bandwidth=bw, inter_bandwidth=bw, memory=memory)


def seven():
    g = sc.Graph([sc.Node(i, {"gpu": float(t)}) for i, t in enumerate(SEVEN_TIMES)], list(SEVEN_EDGES))
    return LatencyProblem(g, two_gpus())


# ------------------------------------------------------------------------------ a brute force
def linear_extensions(n, edges):
    for perm in itertools.permutations(range(n)):
        pos = {v: i for i, v in enumerate(perm)}
        if all(pos[u] < pos[v] for u, v in edges):
            yield perm


def makespan(p, w, dev, seq):
    """Each device runs its nodes in the order of ``seq`` (a linear extension); ASAP by hand."""
    fin, free = {}, {}
    for v in seq:
        d = dev[v]
        s = 0.0 if p.parallel[d] else free.get(d, 0.0)
        for u in p.pred[v]:
            s = max(s, fin[u] + (w[(u, v)] / p.bandwidth[dev[u], d] if dev[u] != d else 0.0))
        fin[v] = s + p.times[v, d]
        free[d] = fin[v]
    return max(fin.values())


def brute(p, w, groups=(), fixed=False):
    n, nd = len(p), p.num_devices
    edges = [(u, v) for u in range(n) for v in p.succ[u]]
    rank = {v: k for k, v in enumerate(p.order)}
    seqs = [tuple(p.order)] if fixed else list(linear_extensions(n, edges))
    # members of a group keep the topological order
    seqs = [s for s in seqs if all([v for v in s if v in g] == sorted(g, key=rank.get) for g in groups)]
    best = math.inf
    for dev in itertools.product(range(nd), repeat=n):
        if any(not math.isfinite(p.times[v, dev[v]]) for v in range(n)):
            continue
        if any(len({dev[v] for v in g}) > 1 for g in groups):
            continue
        if any(sum(p.memory[v] for v in range(n) if dev[v] == d) > p.capacity[d] for d in range(nd)):
            continue
        best = min(best, min(makespan(p, w, dev, s) for s in seqs))
    return best


def random_instance(rng, n, nd=2):
    names = [f"gpu:{d}" for d in range(nd)]
    nodes = [sc.Node(i, {d: float(rng.randint(1, 9)) for d in names if rng.random() < 0.9} or {names[0]: 1.0},
                     memory=float(rng.randint(0, 3))) for i in range(n)]
    edges = [(u, v) for v in range(n) for u in range(v) if rng.random() < 0.4]
    p = LatencyProblem(sc.Graph(nodes, edges), Devices.servers(1, nd, intra_bandwidth=1.0, inter_bandwidth=1.0,
                                                                   memory=float(rng.choice([6, 100]))))
    w = {(p.index[u], p.index[v]): float(rng.randint(0, 6)) for u, v in edges}
    return p, w


# ------------------------------------------------------------------------------ the 7-node example
def test_seven_nodes_free_order_25_fixed_order_27():
    p = seven()
    free = solve_ip(p, edge_size=SEVEN_EDGES)
    fixed = solve_ip(p, edge_size=SEVEN_EDGES, order="topological")
    assert (free.makespan, free.status) == (25.0, "optimal")
    assert (fixed.makespan, fixed.status) == (27.0, "optimal")
    assert brute(p, SEVEN_EDGES) == 25.0 and brute(p, SEVEN_EDGES, fixed=True) == 27.0
    assert max(edge_asap(p, SEVEN_EDGES, free.dev, free.order)[1]) == 25.0


# ------------------------------------------------------------------------------ against brute force
@pytest.mark.parametrize("seed", range(4))
def test_ip_equals_brute_force_on_small_graphs(seed):
    # the non-overlap rows exist only for pairs the DAG leaves unordered: pruning the ordered pairs
    # never changes an optimum
    rng = random.Random(seed)
    for _ in range(6):
        p, w = random_instance(rng, rng.randint(2, 6))
        ip, want = solve_ip(p, edge_size={(p.ids[u], p.ids[v]): s for (u, v), s in w.items()}), brute(p, w)
        if math.isinf(want):
            assert ip.status == "infeasible"
            continue
        assert ip.status == "optimal" and ip.makespan == pytest.approx(want)
        fixed = solve_ip(p, edge_size={(p.ids[u], p.ids[v]): s for (u, v), s in w.items()}, order="topological")
        assert fixed.makespan == pytest.approx(brute(p, w, fixed=True)) and fixed.makespan >= ip.makespan - 1e-9


@pytest.mark.parametrize("seed", range(3))
def test_p2_equals_brute_force_with_groups_and_is_at_least_p1(seed):
    rng = random.Random(50 + seed)
    for _ in range(5):
        p, w = random_instance(rng, rng.randint(3, 6))
        groups = [tuple(p.ids.index(v) for v in g) for g in colocation_groups(p).groups]
        ew = {(p.ids[u], p.ids[v]): s for (u, v), s in w.items()}
        p1 = solve_ip(p, edge_size=ew)
        p2 = solve_ip(p, edge_size=ew, groups=[[p.ids[v] for v in g] for g in groups])
        want = brute(p, w, groups=groups)
        if math.isinf(want):
            continue
        assert p2.makespan == pytest.approx(want)
        assert p2.makespan >= p1.makespan - 1e-9
        for g in groups:
            assert len({p2.dev[v] for v in g}) == 1


def test_group_members_run_along_the_topological_order():
    # a and b share a device and run a then b (topological order), though b first would let c
    # start sooner: 1 + 5 + 1 + 10 = 17 instead of 1 + 1 + 10 = 12
    g = sc.Graph([sc.Node(v, {"gpu": t}) for v, t in [("s", 1.0), ("a", 5.0), ("b", 1.0), ("c", 10.0)]],
                 [("s", "a"), ("s", "b"), ("b", "c")])
    p = LatencyProblem(g, two_gpus())
    assert p.order == [0, 1, 2, 3]
    w = {(u, v): 0.0 for u in range(4) for v in p.succ[u]}
    assert solve_ip(p).makespan == 12.0
    r = solve_ip(p, groups=[["a", "b"]])
    assert r.makespan == 17.0 == brute(p, w, groups=[(1, 2)]) and r.dev[1] == r.dev[2]
    assert r.order[r.dev[1]].index(1) < r.order[r.dev[1]].index(2)


def test_default_edge_sizes_are_the_producers_output():
    g = sc.Graph([sc.Node(v, {"gpu": t}, comm=5.0) for v, t in [("s", 1.0), ("a", 3.0), ("b", 3.0), ("t", 2.0)]],
                 [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")])
    p = LatencyProblem(g, two_gpus(), output_bytes="comm")
    r = solve_ip(p)
    w = {(u, v): 5.0 for u in range(4) for v in p.succ[u]}
    assert r.makespan == 9.0 == brute(p, w)
    s = evaluate_schedule(p, None, [r.dev[i] for i in range(4)],
                          {n: [p.ids[v] for v in seq] for n, seq in zip(p.devices.names, r.order)})
    assert s.objective == 9.0


def test_bad_arguments():
    p = seven()
    with pytest.raises(InvalidArgumentError, match="order"):
        solve_ip(p, order="any")
    with pytest.raises(InvalidArgumentError, match="not an edge"):
        solve_ip(p, edge_size={(0, 6): 1.0})
    with pytest.raises(InvalidArgumentError, match="unknown node 9"):
        solve_ip(p, groups=[[0, 9]])
    with pytest.raises(InvalidArgumentError, match="devices"):
        quickp(p.graph)


# ------------------------------------------------------------------------------ the pipeline
def test_everything_in_one_group_gives_the_sum_of_times_on_one_device():
    times = {"s": {"gpu:0": 1.0, "gpu:1": 2.0}, "a": {"gpu:0": 3.0, "gpu:1": 1.0},
             "b": {"gpu:0": 2.0, "gpu:1": 2.0}, "t": {"gpu:0": 1.0, "gpu:1": 4.0}}
    g = sc.Graph([sc.Node(v, t, comm=1.0) for v, t in times.items()], [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")])
    p = LatencyProblem(g, two_gpus(), output_bytes="comm")
    for colocate in (False, True):
        s = quickp(p, colocate=colocate, alpha=math.inf, warm_starts=False)
        assert s.stats["fused_nodes"] == 1 and s.objective == 7.0 == s.stats["ip_makespan"]
        assert set(s.placement.values()) == {"gpu:0"} and s.stats["found_by"] == "ip"
        # with HEFT and Metis as starts, the answer is theirs when the one-group IP loses to them
        s = quickp(p, colocate=colocate, alpha=math.inf)
        assert s.stats["ip_makespan"] == 7.0 and s.stats["found_by"] in ("heft", "metis")
        assert s.objective == min(s.stats["heft"], s.stats["metis"]) == 5.0


def test_fused_edges_carry_each_crossing_tensor_once():
    # c is small (1 <= alpha = 2) and its one consumer is d: c + d fuse; a and b (10) stay alone.
    # Two original edges (a -> c, a -> d) cross from {a} into {c, d}: a's tensor is sent once.
    g = sc.Graph([sc.Node(v, {"gpu": t}) for v, t in zip("abcd", (10.0, 10.0, 1.0, 1.0))],
                 [("a", "c"), ("a", "d"), ("b", "c"), ("c", "d")])
    sizes = {"a": 3.0, "b": 5.0, "c": 7.0, "d": 0.0}
    p = LatencyProblem(g, two_gpus(), output_bytes=sizes)
    f = fuse(p, alpha=2.0)
    assert sorted(f.groups.values()) == [("a",), ("b",), ("c", "d")]
    w = fused_edge_sizes(f)
    assert w == {("a", "c"): 3.0, ("b", "c"): 5.0}
    checked = 0
    for (a, b), size in w.items():
        crossing = {u for u in f.groups[a] for v in f.groups[b] if (u, v) in g.edges}
        assert crossing and size == sum(sizes[u] for u in crossing)
        checked += sum((u, v) in g.edges for u in f.groups[a] for v in f.groups[b])
    assert checked == 3   # one fused edge stands for two original ones


def test_edge_asap_charges_a_transfer_only_across_devices():
    g = sc.Graph([sc.Node(v, {"gpu": t}) for v, t in [("u", 2.0), ("v", 3.0), ("x", 1.0)]], [("u", "v"), ("u", "x")])
    p = LatencyProblem(g, two_gpus(bw=2.0))
    p.bandwidth[0, 0] = p.bandwidth[1, 1] = 0.5   # the diagonal is never read (Devices makes it inf)
    w = {(0, 1): 10.0, (0, 2): 4.0}
    # u and v on gpu:0, x on gpu:1: v pays nothing, x pays 4 / 2
    start, finish = edge_asap(p, w, [0, 0, 1], [[0, 1], [2]])
    assert start == [0.0, 2.0, 4.0] and finish == [2.0, 5.0, 5.0]
    start, finish = edge_asap(p, w, [0, 1, 0], [[0, 2], [1]])
    assert start == [0.0, 7.0, 2.0] and finish == [2.0, 10.0, 3.0]
    assert list_order(p, w, [0, 0, 1]) == [[0, 1], [2]]


def test_ip_bound_is_capped_at_its_makespan(monkeypatch):
    # a solver whose bound comes back above the plan (round-off) never gives a bound above it
    from stagecut._mip import MipOutcome

    q = importlib.import_module("stagecut.latency.quickp.ip")

    def solve(model, **kw):
        return MipOutcome(status="time_limit", objective=None, bound=1e9, seconds=0.0, solver="cbc",
                          rows=model.num_rows, cols=model.num_cols)

    monkeypatch.setattr(q, "solve", solve)
    r = solve_ip(seven(), edge_size=SEVEN_EDGES)
    assert r.makespan is not None and r.bound == r.makespan


@pytest.mark.parametrize("shape", ["cnn", "transformer"])
def test_quickp_on_an_operator_graph_reports_the_original_graph(shape):
    g, out, _ = operator_graph_from_data(synthetic_operator_graph(150, shape, seed=2, devices=2))
    p = LatencyProblem(g, operator_devices(2), output_bytes=out)
    p1 = quickp(p, colocate=False, time_limit=30)
    p2 = quickp(p, time_limit=30)
    for s in (p1, p2):
        assert set(s.placement) == set(g.ids) and s.objective <= s.stats["ip_makespan"] * (1 + 1e-9)
        again = evaluate_schedule(p, None, s.placement, s.order)
        assert again.objective == pytest.approx(s.objective)
        assert s.objective <= min(p.times.sum(axis=0)) * (1 + 1e-9)   # never worse than one GPU
    if p1.stats["ip_status"] == p2.stats["ip_status"] == "optimal":
        assert p2.stats["ip_makespan"] >= p1.stats["ip_makespan"] * (1 - 1e-6)
