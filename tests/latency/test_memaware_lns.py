"""Memory-aware constructive heuristics, LNS, ``auto``, HEFT's order on zero-time nodes, and the
Rust evaluator's path without a transfer table.

Oracles: the brute force of ``test_heuristics`` (its own simulation, every placement and order)
and the Python reference :func:`stagecut.latency.asap`."""

import math
import random

import numpy as np
import pytest

import stagecut as sc
from stagecut.latency import Device, Devices, LatencyProblem, asap
from stagecut.latency.heuristics.constructive import greedy, heft, list_heft
from stagecut.latency.heuristics.lns import lns
from stagecut.latency.heuristics.memaware import (
    Reserve,
    chain_packing,
    m_chain,
    m_greedy,
    m_heft,
    m_topo,
    memory_aware,
    pcie_asap,
)
from stagecut.latency.heuristics.search import evolutionary, local_search, simulated_annealing
from stagecut.latency.model._fast import Evaluator

from .test_heuristics import brute_force, check_schedule, random_problem

INF = math.inf
MEMORY_AWARE = [m_heft, m_greedy, m_topo, m_chain]


def positions(p, s):
    names = p.devices.names
    return np.array([names.index(s.placement[v]) for v in p.ids], dtype=np.int64)


def orders(p, s):
    return [[p.index[v] for v in s.order.get(name, ())] for name in p.devices.names]


def zero_heavy_problem(rng, n=14, nd=3):
    """A random DAG where about half of the nodes take no time anywhere (as in traced operator
    graphs), on GPUs of two speeds and maybe a CPU pool."""
    kinds = ([("cpu", "cpu")] if rng.random() < 0.5 else []) + [(f"gpu:{d}", "gpu") for d in range(nd)]
    devs = [Device(name, kind, speed=1.0 if kind == "cpu" else rng.choice([1.0, 2.0]), parallel=kind == "cpu")
            for name, kind in kinds]
    m = len(devs)
    bw = [[INF if a == b else rng.choice([1.0, 2.0, 4.0]) for b in range(m)] for a in range(m)]
    nodes = []
    for i in range(n):
        zero = rng.random() < 0.5
        t = 0.0 if zero else float(rng.randint(1, 9))
        nodes.append(sc.Node(i, {"gpu": t, "cpu": 0.0 if zero else 3 * t}, comm=float(rng.choice([0, 0, 1, 2]))))
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.25]
    return LatencyProblem(sc.Graph(nodes, edges), Devices.from_matrix(devs, bw), output_bytes="comm")


# ------------------------------------------------------------------- HEFT's order and guarantees
@pytest.mark.parametrize("seed", range(60))
def test_heft_keeps_its_timetable_on_graphs_with_many_zero_time_nodes(seed):
    """HEFT documents: the re-scored makespan is at most its own timetable's. A zero-time node
    inserted at the very start of a busy slot must stay before that slot's node."""
    p = zero_heavy_problem(random.Random(seed))
    s = heft(p)
    assert s.objective <= s.stats["heft_makespan"] * (1 + 1e-9) + 1e-9
    ev = Evaluator(p)
    assert ev.makespan(positions(p, s), orders(p, s)) == pytest.approx(s.objective, abs=1e-9)


def test_heft_order_fix_matters_on_some_zero_time_instance():
    """Some instance of the family above has a zero-time node sharing its start with a longer
    node on one device: ordering by start alone would lose HEFT's timetable there."""
    hit = 0
    for seed in range(60):
        p = zero_heavy_problem(random.Random(seed))
        s = heft(p)
        for seq in s.order.values():
            for a, b in zip(seq, seq[1:]):
                if s.start[a] == s.start[b] and s.finish[a] == s.start[a] and s.finish[b] > s.start[b]:
                    hit += 1
    assert hit > 0


@pytest.mark.parametrize("seed", range(30))
def test_every_method_is_its_own_rescored_timetable(seed):
    """Every method's schedule is the asap timetable of its own placement and order, within the
    memory limits, and never below the brute-force optimum."""
    rng = random.Random(1000 + seed)
    p = random_problem(rng, n=rng.randint(3, 6), memory=seed % 2 == 0) if seed % 3 else zero_heavy_problem(rng, n=6)
    opt = brute_force(p)
    for method in [heft, greedy, *MEMORY_AWARE, lambda q: lns(q, max_iterations=30, seed=seed)]:
        s = method(p)
        if s.objective is None:
            continue
        check_schedule(p, s, opt)
        start, finish = asap(p, positions(p, s), orders(p, s))
        assert max(finish, default=0.0) == pytest.approx(s.objective, abs=1e-9)


# ------------------------------------------------------------------- memory-aware heuristics
def memory_trap():
    """One accelerator that holds one node; node 2 gains 48 from it, the others 1 each. Plain
    HEFT gives it to node 0 (first come); the reservation keeps it for node 2."""
    g = sc.Graph.chain([1.0, 1.0, 1.0, 1.0], cpu_costs=[2.0, 2.0, 50.0, 2.0], memory=[1.0] * 4)
    return LatencyProblem.from_workload(g, accelerators=1, memory=1.0)


def test_the_reservation_keeps_the_scarce_memory_for_the_node_that_gains_most():
    p = memory_trap()
    assert heft(p).objective == 55.0
    s = m_heft(p)
    assert s.objective == 7.0
    assert s.placement[2] == "accelerator:0"
    assert m_greedy(p).objective == 7.0
    r = Reserve(__import__("stagecut.latency.heuristics.constructive", fromlist=["Units"]).Units(p), 1.0)
    assert r.reserved.tolist() == [False, False, True, False]
    assert r.candidates(0) == [0]          # node 0 may not take node 2's memory
    assert r.candidates(2) == [0, 1]


def test_the_reserved_share_leaves_slack_for_the_rest():
    p = memory_trap()
    s = list_heft(p, lambda u: Reserve(u, 0.0), "m-heft")   # nothing reserved: plain HEFT
    assert s.objective == heft(p).objective


@pytest.mark.parametrize("seed", range(40))
def test_memory_aware_heuristics_respect_memory_and_the_optimum(seed):
    rng = random.Random(500 + seed)
    p = random_problem(rng, n=rng.randint(3, 6), memory=True, cpu=True)
    opt = brute_force(p)
    for h in MEMORY_AWARE:
        s = h(p)
        if s.objective is None:
            assert s.status in ("unknown", "infeasible")
            assert not s.notes[0].startswith("internal"), s.notes   # never a placement over a limit
            continue
        check_schedule(p, s, opt)
        for name, used in s.memory_used.items():
            assert used <= p.capacity[p.devices.index(name)]


def chain_with_cheap_cut():
    """Six nodes on two accelerators of 4 bytes; node 0 takes 2 bytes, the others 1; outputs of
    5 except node 1's (0.5). First fit cuts after node 2 (a transfer of 5 / 0.5 = 10); the cut
    DP after node 1 (0.5 / 0.5 = 1)."""
    mem = [2.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    comm = [5.0, 0.5, 5.0, 5.0, 5.0, 5.0]
    nodes = [sc.Node(i, {"accelerator": 1.0, "cpu": 10.0}, comm=comm[i], memory=mem[i]) for i in range(6)]
    g = sc.Graph(nodes, [(i, i + 1) for i in range(5)])
    return LatencyProblem(g, Devices.pcie_star(2, memory=4.0))


def test_the_cut_dp_cuts_where_the_crossing_output_is_small():
    p = chain_with_cheap_cut()
    s = m_chain(p)
    assert s.objective == 7.0     # 2 + 1 + 4
    assert s.placement[0] == s.placement[1] != s.placement[2]
    assert m_topo(p).objective == 16.0   # 3 + 10 + 3
    from stagecut.latency.pcie.greedy import blocks
    dev = chain_packing(p, blocks(p, order="position"))
    assert dev is not None and dev[0] == dev[1] != dev[2]


def test_the_cut_dp_sends_to_the_cpu_what_fits_nowhere():
    g = sc.Graph.chain([1.0] * 4, cpu_costs=[2.0] * 4, memory=[1.0, 9.0, 1.0, 1.0], comm=0.1)
    p = LatencyProblem.from_workload(g, accelerators=1, memory=3.0)
    s = m_chain(p)
    assert s.placement[1] == "cpu" and s.objective is not None
    assert s.memory_used.get("accelerator:0", 0.0) <= 3.0


def test_pcie_greedy_rescored_under_asap_is_a_start():
    g = sc.Graph.chain([1.0, 1.0, 1.0, 1.0], cpu_costs=[5.0] * 4, memory=[2.0] * 4, comm=0.5)
    p = LatencyProblem.from_workload(g, accelerators=2, memory=4.0)
    s = pcie_asap(p)
    assert s is not None and s.semantics == "asap"
    assert s.objective == pytest.approx(5.0)   # 2, transfer 0.5 / 0.5, 2
    assert any(x.method == "pcie-greedy (asap)" for x in memory_aware(p))
    q = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0, kind="accelerator"),
                       output_bytes="comm")
    assert pcie_asap(q) is None


# ------------------------------------------------------------------- LNS
def bad_start_problem(seed=3, n=40, nd=4):
    rng = random.Random(seed)
    nodes = [sc.Node(i, {"accelerator": float(rng.randint(1, 9)), "cpu": float(rng.randint(20, 60))},
                     comm=float(rng.randint(0, 3)), memory=1.0) for i in range(n)]
    edges = [(i, j) for i in range(n) for j in range(i + 1, min(n, i + 4)) if rng.random() < 0.6]
    return LatencyProblem(sc.Graph(nodes, edges), Devices.pcie_star(nd, memory=n / 3), output_bytes="comm")


def test_lns_improves_a_bad_start_and_is_reproducible():
    p = bad_start_problem()
    start = [0] * len(p)          # everything on the CPU pool
    start_value = Evaluator(p).makespan(start)
    a = lns(p, start=start, max_iterations=150, seed=4)
    b = lns(p, start=start, max_iterations=150, seed=4)
    assert a.objective < 0.5 * start_value
    assert a.placement == b.placement and a.objective == b.objective
    assert a.stats["iterations"] == 150 and a.stats["improvements"] > 0
    assert a.status == "feasible"
    for name, used in a.memory_used.items():
        assert used <= p.capacity[p.devices.index(name)]


def test_lns_is_never_worse_than_its_start_schedule():
    p = bad_start_problem(seed=5)
    for start in [heft(p), m_chain(p), local_search(p, max_evaluations=200)]:
        s = lns(p, start=start, max_iterations=40, seed=1)
        assert s.objective <= start.objective + 1e-9


@pytest.mark.parametrize("seed", range(25))
def test_lns_finds_the_optimum_of_small_instances_from_a_bad_start(seed):
    """On <= 5 nodes a window holds the whole graph: LNS from everything-on-one-device reaches
    the best placement in rank round-robin order (the brute force over placements)."""
    rng = random.Random(700 + seed)
    p = random_problem(rng, n=rng.randint(2, 5), nd=3, memory=False)
    ev = Evaluator(p)
    runs = [d for d in range(p.num_devices) if np.isfinite(p.times[:, d]).all()]
    if not runs:
        pytest.skip("no device runs every node")
    best = min(ev.makespan(np.array(a)) for a in np.ndindex(*([p.num_devices] * len(p)))
               if np.isfinite(p.times[np.arange(len(p)), list(a)]).all())
    s = lns(p, start=[runs[0]] * len(p), max_iterations=60, seed=seed, window=5)
    assert s.objective <= best + 1e-9


def test_lns_stops_at_its_time_limit_and_at_an_enclosing_deadline():
    from stagecut._deadline import deadline

    p = bad_start_problem(n=60)
    s = lns(p, start=[0] * len(p), time_limit=0.05, seed=0)
    assert s.status == "time_limit" and s.stats["iterations"] < 10**6
    with deadline(0.05):
        s = lns(p, start=[0] * len(p), seed=0, max_iterations=10**7)
    assert s.status == "time_limit" and s.stats["iterations"] < 10**7


def test_lns_bad_arguments_name_the_argument():
    p = bad_start_problem()
    for kw, word in [({"window": 0}, "window"), ({"max_iterations": 0}, "max_iterations"), ({"seed": "x"}, "seed"),
                     ({"max_window_evaluations": 0}, "max_window_evaluations")]:
        with pytest.raises(sc.InvalidArgumentError, match=word):
            lns(p, **kw)


# ------------------------------------------------------------------- auto
def test_auto_is_never_worse_than_its_parts_and_says_who_found_it():
    p = bad_start_problem(seed=9, n=30)
    s = sc.place(p, method="auto", time_limit=6.0, seed=0)  # (every part reached under load)
    assert s.objective is not None
    found_by = s.stats["found_by"]
    assert s.method == f"auto ({found_by})"
    listed = [x for x in s.notes if x.startswith("methods: ")][0][len("methods: "):]
    values = {}
    for part in listed.split(", "):
        name, value = part.rsplit(": ", 1)
        values[name] = float(value)
    assert s.objective <= min(values.values()) * (1 + 1e-6)
    assert values[found_by] == pytest.approx(s.objective, rel=1e-6)
    for m in ("heft", "greedy", "m-heft", "m-chain", "m-topo", "pcie-greedy (asap)", "lns"):
        assert m in values
    for h in (heft, greedy, m_heft, m_chain, m_topo):
        assert s.objective <= h(p).objective + 1e-9
    assert any(x.startswith("lower bound from ") for x in s.notes)
    assert any(x.startswith("phases: ") for x in s.notes)
    assert s.lower_bound is not None and s.lower_bound <= s.objective


def test_auto_runs_the_milp_on_small_models_and_proves_the_optimum():
    g = sc.Graph.chain([2.0, 3.0, 1.0], cpu_costs=[4.0, 6.0, 2.0], comm=1.0)
    s = sc.place(g, 1, method="auto", time_limit=20.0)
    assert s.status == "optimal" and s.objective == pytest.approx(6.0)
    assert s.lower_bound == pytest.approx(6.0)


# ------------------------------------------------------------------- Rust: no transfer table
def wide_problem(n, nd, seed=0):
    rng = random.Random(seed)
    devs = [Device(f"gpu:{d}", "gpu", speed=rng.choice([1.0, 2.0])) for d in range(nd)]
    bw = [[INF if a == b else rng.choice([0.5, 1.0, 2.0, 4.0]) for b in range(nd)] for a in range(nd)]
    nodes = [sc.Node(i, {"gpu": float(rng.randint(0, 5))}, comm=float(rng.randint(1, 4))) for i in range(n)]
    edges = [(i, j) for i in range(n) for j in range(i + 1, min(n, i + 6)) if rng.random() < 0.5]
    return LatencyProblem(sc.Graph(nodes, edges), Devices.from_matrix(devs, bw), output_bytes="comm")


def test_the_evaluator_without_a_transfer_table_matches_the_table_and_the_reference():
    """nodes x devices^2 > 2^22: the Rust evaluator computes each transfer on the fly. A
    placement on the first 8 devices must time the same as on the 8-device problem (whose table
    is precomputed) and as the Python reference."""
    n, nd, used = 300, 128, 8
    big = wide_problem(n, nd)
    assert n * nd * nd > 2**22 >= n * used * used
    devs = [Device(f"gpu:{d}", "gpu", speed=big.devices.devices[d].speed) for d in range(used)]
    bw = [[INF if a == b else float(big.bandwidth[a, b]) for b in range(used)] for a in range(used)]
    small = LatencyProblem(big.graph, Devices.from_matrix(devs, bw), output_bytes="comm")
    ev_big, ev_small = Evaluator(big), Evaluator(small)
    rng = np.random.default_rng(1)
    for _ in range(5):
        dev = rng.integers(0, used, size=n).astype(np.int64)
        order = ev_small.rank_round_robin(dev)
        s_small, f_small = ev_small.times(dev, order)
        s_big, f_big = ev_big.times(dev, order + [[] for _ in range(nd - used)])
        ref_s, ref_f = asap(big, dev, order + [[] for _ in range(nd - used)])
        assert np.array_equal(f_big, f_small) and np.array_equal(s_big, s_small)
        assert np.allclose(f_big, ref_f, rtol=0, atol=1e-9)
        assert ev_big.rank_round_robin(dev)[:used] == order
        assert ev_big.makespan(dev) == ev_small.makespan(dev)
        assert ev_big.makespans(dev[None, :])[0] == ev_small.makespan(dev)
        seq = np.array(sorted(range(n), key=lambda i: (f_small[i] - 0, i)), dtype=np.int64)
        assert ev_big.makespans(dev[None, :], seq[None, :])[0] == ev_small.makespans(dev[None, :], seq[None, :])[0]
    # transfers matter on this graph: with them all free the answer would differ
    dev = (np.arange(n) % used).astype(np.int64)
    free = LatencyProblem(big.graph, Devices.from_matrix(devs, [[INF] * used for _ in range(used)]),
                          output_bytes="comm")
    assert Evaluator(free).makespan(dev) < ev_big.makespan(dev)


def test_searches_share_the_start_pool_and_never_lose_it():
    p = bad_start_problem(seed=11)
    start = m_chain(p)
    for search in (lambda q, s: simulated_annealing(q, start=s, max_evaluations=300, seed=2),
                   lambda q, s: evolutionary(q, start=s, max_evaluations=300, seed=2),
                   lambda q, s: local_search(q, start=s, max_evaluations=300),
                   lambda q, s: lns(q, start=s, max_iterations=20, seed=2)):
        assert search(p, start).objective <= start.objective + 1e-9


def test_the_reservation_goes_by_gain_per_byte():
    """A gains 10 with 2 bytes, B and C gain 6 each with 1 byte; the accelerator holds 2 bytes:
    B and C together (12) beat A (10), and the reservation picks them."""
    from stagecut.latency.heuristics.constructive import Units

    nodes = [sc.Node("A", {"accelerator": 1.0, "cpu": 11.0}, memory=2.0),
             sc.Node("B", {"accelerator": 1.0, "cpu": 7.0}, memory=1.0),
             sc.Node("C", {"accelerator": 1.0, "cpu": 7.0}, memory=1.0)]
    p = LatencyProblem(sc.Graph(nodes, [("A", "B"), ("B", "C")]), Devices.pcie_star(1, memory=2.0))
    r = Reserve(Units(p), 1.0)
    assert [p.ids[int(Units(p).members[u][0])] for u in np.flatnonzero(r.reserved)] == ["B", "C"]
    assert r.pending == 2.0
    r.take(int(Units(p).unit_of[p.index["B"]]), 1)
    assert r.pending == 1.0
    s = m_heft(p)
    assert s.placement["B"] == s.placement["C"] == "accelerator:0" and s.objective == 13.0


@pytest.mark.parametrize("search", ["sa", "ea", "local", "lns"])
def test_every_search_stops_at_an_enclosing_deadline(search):
    from stagecut._deadline import deadline

    p = bad_start_problem(n=400 if search == "local" else 60)   # local: no local optimum within 0.2 s
    run = {"sa": lambda: simulated_annealing(p, start=[0] * len(p), max_evaluations=10**8),
           "ea": lambda: evolutionary(p, start=[0] * len(p), max_evaluations=10**8),
           "local": lambda: local_search(p, start=[0] * len(p), max_evaluations=10**8),
           "lns": lambda: lns(p, start=[0] * len(p), max_iterations=10**8)}[search]
    with deadline(0.2):
        s = run()
    assert s.status == "time_limit"


def test_the_ea_walks_a_plateau():
    """Every placement of a chain without communication on identical GPUs has the same
    makespan: the EA accepts each (neutral) offspring, so it leaves its start."""
    g = sc.Graph([sc.Node(i, {"gpu": 1.0}) for i in range(12)], [(i, i + 1) for i in range(11)])
    p = LatencyProblem(g, Devices.servers(1, 3, intra_bandwidth=1.0, inter_bandwidth=1.0))
    s = evolutionary(p, start=[0] * 12, max_evaluations=100, seed=3)
    assert s.objective == 12.0
    assert set(s.placement.values()) != {"gpu:0"}
