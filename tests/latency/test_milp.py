"""The exact latency methods: brute force (held to a literal enumeration and to hand-computed
cases) and the DiviML MILP (held to brute force on random DAGs, time limits, warm starts,
scaling, HiGHS)."""

import itertools
import math
import random

import numpy as np
import pytest

import stagecut as sc
from stagecut.errors import InvalidArgumentError
from stagecut.latency import Device, Devices, LatencyProblem, asap, evaluate_schedule
from stagecut.latency.exact.bounds import best_bound
from stagecut.latency.exact.brute import BRUTE_MAX_NODES, interchangeable, solve_brute, symmetry_groups
from stagecut.latency.exact.milp import greedy_schedule, solve_milp

KINDS = ("cpu", "gpu", "fpga")


# ------------------------------------------------------------------------------ instances
def random_problem(rng, n, nd, *, p_edge=0.35, zeros=False, memory=True, pool=None, unrunnable=True,
                   identical=None, colocation=None):
    """A random DAG of ``n`` nodes on ``nd`` devices: per-kind times (some kinds missing: nodes
    some devices cannot run), memory limits, a parallel CPU pool (``pool``; random when None),
    a bandwidth matrix of several values; ``identical``: ``"same"`` makes the devices after the
    pool alike (same kind, speed, memory, bandwidths), ``"bandwidth"`` alike but for one link;
    ``zeros``: zero times and transfers; ``colocation``: one class of two or three nodes (random
    when None). ``None`` when a node has no device (drawn again)."""
    if identical is None:
        identical = rng.choice([None, None, None, "same", "bandwidth"])
    if pool is None:
        pool = rng.random() < 0.3
    if colocation is None:
        colocation = rng.random() < 0.15
    mates = set(rng.sample(range(n), min(n, rng.randint(2, 3)))) if colocation and n > 1 else set()
    nodes, edges = [], []
    for v in range(n):
        comp = {k: float(rng.choice([0, 1, 2, 3, 5, 8]) if zeros else rng.randint(1, 9)) for k in KINDS}
        if unrunnable and rng.random() < 0.3:
            comp.pop(rng.choice(KINDS[1:]))
        size = float(rng.choice([0, 1, 2, 4]) if zeros else rng.randint(0, 4))
        nodes.append(sc.Node(v, comp, memory=float(rng.randint(1, 4)) if memory else 0.0, comm=size,
                             colocation="k" if v in mates else None))
        edges += [(u, v) for u in range(v) if rng.random() < p_edge]
    devs = []
    same_kind, same_mem = rng.choice(["gpu", "fpga"]), float(rng.randint(5, 12)) if memory else math.inf
    for d in range(nd):
        if d == 0 and pool:
            devs.append(Device("cpu", "cpu", parallel=True))
        elif identical:
            devs.append(Device(f"d{d}", same_kind, memory=same_mem))
        else:
            cap = float(rng.randint(3, 10)) if memory and rng.random() < 0.6 else math.inf
            devs.append(Device(f"d{d}", rng.choice(["gpu", "gpu", "fpga", "cpu"]), memory=cap,
                               speed=rng.choice([1.0, 1.0, 2.0])))
    if identical:
        bw = [[math.inf if a == b else 2.0 for b in range(nd)] for a in range(nd)]
        if identical == "bandwidth" and nd > 1:
            a, b = rng.sample(range(nd), 2)
            bw[a][b] = 0.5
    else:
        bw = [[math.inf if a == b else float(rng.choice([0.5, 1, 1, 2, 4])) for b in range(nd)] for a in range(nd)]
        if rng.random() < 0.5:
            for a in range(nd):
                for b in range(a):
                    bw[a][b] = bw[b][a]
    try:
        return LatencyProblem(sc.Graph(nodes, edges), Devices.from_matrix(devs, bw), output_bytes="comm")
    except sc.InvalidGraphError:
        return None


def draw(seed, n_range=(2, 7), nd_range=(2, 3), **kw):
    rng = random.Random(seed)
    while True:
        p = random_problem(rng, rng.randint(*n_range), rng.randint(*nd_range), zeros=rng.random() < 0.3, **kw)
        if p is not None:
            return p


def literal_optimum(problem):
    """Every placement within memory times every linear extension of the DAG (the per-device
    orders it induces), each timed by ``asap``: the definition, without any pruning."""
    n, nd = len(problem), problem.num_devices
    extensions = []

    def extend(seq, left):
        if not left:
            extensions.append(list(seq))
        for v in sorted(left):
            if all(u in seq for u in problem.pred[v]):
                extend(seq + [v], left - {v})

    extend([], frozenset(range(n)))
    best = math.inf
    for dev in itertools.product(range(nd), repeat=n):
        if not all(math.isfinite(problem.times[v, dev[v]]) for v in range(n)):
            continue
        used = np.zeros(nd)
        for v in range(n):
            used[dev[v]] += problem.memory[v]
        if (used > problem.capacity).any():
            continue
        classes = {}
        for v, node in enumerate(problem.graph.nodes):
            if node.colocation is not None:
                classes.setdefault(node.colocation, set()).add(dev[v])
        if any(len(c) > 1 for c in classes.values()):
            continue
        for order in {tuple(tuple(v for v in e if dev[v] == d) for d in range(nd)) for e in extensions}:
            _, finish = asap(problem, list(dev), [list(o) for o in order])
            best = min(best, float(finish.max()))
    return best


def value(schedule):
    return math.inf if schedule.objective is None else schedule.objective


def check_same(brute, milp, tol=1e-6):
    """The MILP's answer is brute force's optimum, proven, with a sound bound."""
    assert milp.status == brute.status, (brute.status, milp.status, milp.notes)
    if brute.objective is None:
        assert milp.objective is None
        return
    assert milp.objective == pytest.approx(brute.objective, rel=tol, abs=tol), milp.notes
    assert milp.lower_bound <= brute.objective + tol
    assert milp.lower_bound == pytest.approx(milp.objective, rel=tol, abs=tol)
    assert not milp.violations
    # the reported schedule is what the evaluator gives for its placement and order
    again = evaluate_schedule(_problem_of(milp), None, dict(milp.placement), order=dict(milp.order))
    assert again.objective == milp.objective


_PROBLEMS = {}


def _problem_of(schedule):
    return _PROBLEMS[id(schedule)]


def solve_both(problem, **kw):
    brute = solve_brute(problem)
    milp = solve_milp(problem, threads=1, **kw)
    _PROBLEMS[id(milp)] = problem
    return brute, milp


def graph(times, edges, comm=0.0, memory=0.0, kind="gpu"):
    return sc.Graph([sc.Node(v, {kind: t} if not isinstance(t, dict) else t, comm=comm, memory=memory)
                     for v, t in times.items()], edges)


def servers(k, **kw):
    return Devices.servers(1, k, intra_bandwidth=1.0, inter_bandwidth=1.0, **kw)


# ------------------------------------------------------------------------------ brute force
@pytest.mark.parametrize("seed", range(100))
def test_brute_force_is_the_literal_enumeration(seed):
    p = draw(seed, n_range=(1, 5), nd_range=(1, 3))
    assert value(solve_brute(p)) == literal_optimum(p)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 160))
def test_brute_force_is_the_literal_enumeration_six_nodes(seed):
    p = draw(seed, n_range=(6, 6), nd_range=(2, 3), p_edge=0.25)
    assert value(solve_brute(p)) == literal_optimum(p)


def test_zero_time_nodes_at_one_instant():
    """Zero-time nodes and free transfers: the one-sequence-per-schedule rule must keep every
    schedule (the literal enumeration is the judge)."""
    times = {0: 0.0, 1: 0.0, 2: 3.0, 3: 0.0, 4: 2.0}
    g = graph(times, [(0, 2), (1, 3), (3, 4)], comm=0.0)
    for devices in (servers(1), servers(2)):
        p = LatencyProblem(g, devices, output_bytes="comm")
        assert solve_brute(p).objective == literal_optimum(p)
    # u (no time) must run before v at the same instant for w to start at 0 on the other device
    g = sc.Graph([sc.Node("v", {"a": 3.0}), sc.Node("u", {"a": 0.0}), sc.Node("w", {"b": 5.0})], [("u", "w")])
    d = Devices.from_matrix([Device("A", "a"), Device("B", "b")], [[None, 1.0], [1.0, None]])
    p = LatencyProblem(g, d)
    brute, milp = solve_both(p)
    assert brute.objective == literal_optimum(p) == 5.0
    assert brute.order["A"] == ("u", "v") and brute.start["v"] == brute.start["u"] == 0.0
    check_same(brute, milp)


def test_chain_on_identical_devices_is_the_sum():
    for comm in (0.0, 1.0):
        g = graph({0: 2.0, 1: 3.0, 2: 1.0, 3: 4.0}, [(0, 1), (1, 2), (2, 3)], comm=comm)
        brute, milp = solve_both(LatencyProblem(g, servers(3), output_bytes="comm"))
        assert brute.objective == milp.objective == 10.0
        assert brute.status == milp.status == "optimal"
        if comm:
            assert len(set(brute.placement.values())) == 1


def test_zero_transfers_and_enough_devices_give_the_critical_path():
    # width 3 (b, c, d); critical path a, b, e = 1 + 4 + 1
    g = graph({"a": 1.0, "b": 4.0, "c": 2.0, "d": 3.0, "e": 1.0},
              [("a", "b"), ("a", "c"), ("a", "d"), ("b", "e"), ("c", "e"), ("d", "e")], comm=0.0)
    for k, expected in ((3, 6.0), (4, 6.0), (2, 7.0)):  # two devices: {b} and {c, d}: 1 + 5 + 1
        brute, milp = solve_both(LatencyProblem(g, servers(k), output_bytes="comm"))
        assert brute.objective == expected and milp.objective == expected, k
        check_same(brute, milp)


@pytest.mark.parametrize("tau, expected", [(1.0, 7.0), (5.0, 9.0), (3.0, 9.0), (0.0, 6.0)])
def test_fork_join(tau, expected):
    """s -> {a, b} -> t, branches of w = 3, transfer tau per cut edge, 2 identical devices:
    p_s + p_t + min(2w, w + tau) with p_s = 1, p_t = 2."""
    g = graph({"s": 1.0, "a": 3.0, "b": 3.0, "t": 2.0}, [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")], comm=tau)
    brute, milp = solve_both(LatencyProblem(g, servers(2), output_bytes="comm"))
    assert brute.objective == expected == 1 + 2 + min(6, 3 + tau)
    check_same(brute, milp)


@pytest.mark.parametrize("parallel, expected", [(True, 5.0), (False, 6.0)])
def test_cpu_pool_runs_nodes_at_once(parallel, expected):
    """Three independent nodes (CPU 5, GPU 3) on a CPU and one GPU: with a pool all three run on
    the CPU at once (5); with a one-at-a-time CPU the best is two on the GPU (6)."""
    g = graph({v: {"cpu": 5.0, "gpu": 3.0} for v in "abc"}, [])
    d = Devices.from_matrix([Device("cpu", "cpu", parallel=parallel), Device("g", "gpu")], [[None, 1.0], [1.0, None]])
    brute, milp = solve_both(LatencyProblem(g, d))
    assert brute.objective == expected
    check_same(brute, milp)


def test_infeasible_memory():
    big = graph({0: 1.0, 1: 1.0}, [(0, 1)], memory=5.0)  # a node larger than every device
    tight = graph({0: 1.0, 1: 1.0, 2: 1.0}, [], memory=3.0)  # each fits, no two share a device
    for g in (big, tight):
        p = LatencyProblem(g, servers(2, memory=4.0))
        brute, milp = solve_both(p)
        assert brute.status == milp.status == "infeasible"
        assert brute.objective is None and milp.objective is None
    ok = LatencyProblem(tight, servers(3, memory=4.0))
    brute, milp = solve_both(ok)
    assert brute.objective == milp.objective == 1.0


def test_colocation():
    """a and b must share a device: the fork can no longer split its branches (9, not 7)."""
    nodes = [sc.Node(v, {"gpu": t}, comm=1.0, colocation="ab" if v in "ab" else None)
             for v, t in [("s", 1.0), ("a", 3.0), ("b", 3.0), ("t", 2.0)]]
    g = sc.Graph(nodes, [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")])
    brute, milp = solve_both(LatencyProblem(g, servers(2), output_bytes="comm"))
    assert brute.objective == 9.0 and brute.placement["a"] == brute.placement["b"]
    check_same(brute, milp)
    # a class too big for every device together, though each node fits alone
    nodes = [sc.Node(v, {"gpu": 1.0}, memory=3.0, colocation="ab" if v in "ab" else None) for v in "abc"]
    p = LatencyProblem(sc.Graph(nodes, []), servers(3, memory=4.0))
    brute, milp = solve_both(p)
    assert brute.status == milp.status == "infeasible"
    # a start that splits the class is not used
    nodes = [sc.Node(v, {"gpu": 1.0}, colocation="ab" if v in "ab" else None) for v in "abc"]
    p = LatencyProblem(sc.Graph(nodes, []), servers(3))
    split = evaluate_schedule(p, None, {"a": "gpu:0", "b": "gpu:1", "c": "gpu:2"})
    s = solve_milp(p, threads=1, start=split)
    assert s.objective == 2.0 and s.placement["a"] == s.placement["b"]
    assert any("colocation" in n for n in s.notes)


def test_brute_force_refuses_large_graphs():
    g = sc.Graph.chain([1.0] * (BRUTE_MAX_NODES + 1))
    with pytest.raises(InvalidArgumentError, match="at most 8"):
        solve_brute(LatencyProblem(g, Devices.pcie_star(1)))
    with pytest.raises(InvalidArgumentError):
        solve_brute(g)


def test_interchangeable_devices():
    p = LatencyProblem(graph({0: 1.0}, []), Devices.from_matrix(
        [Device(f"g{i}", "gpu") for i in range(3)], [[None, 1.0, 1.0], [1.0, None, 2.0], [1.0, 1.0, None]]))
    # g1 -> g2 is faster than every other link: no two devices swap
    assert not any(interchangeable(p, a, b) for a, b in [(0, 1), (0, 2), (1, 2)])
    assert symmetry_groups(p) == []
    q = LatencyProblem(graph({0: 1.0}, []), Devices.servers(2, 2, intra_bandwidth=5.0, inter_bandwidth=1.0))
    assert interchangeable(q, 0, 1) and interchangeable(q, 2, 3)
    assert not interchangeable(q, 0, 2)  # gpu:0 and gpu:2 swapped: gpu:1 would reach gpu:0 over Ethernet
    assert symmetry_groups(q) == [[0, 1], [2, 3]]
    r = LatencyProblem(graph({0: {"gpu": 1.0, "fpga": 2.0}}, []), Devices.from_matrix(
        [Device("a", "gpu"), Device("b", "fpga"), Device("c", "gpu", memory=9.0), Device("d", "gpu")],
        [[None, 1.0, 1.0, 1.0]] + [[1.0, None, 1.0, 1.0], [1.0, 1.0, None, 1.0], [1.0, 1.0, 1.0, None]]))
    assert symmetry_groups(r) == [[0, 3]]  # b: another kind; c: another memory


# ------------------------------------------------------------------------------ the MILP = brute force
def _milp_equals_brute(seed):
    p = draw(seed)
    brute, milp = solve_both(p)
    check_same(brute, milp)
    return p


@pytest.mark.parametrize("seed", range(60))
def test_milp_equals_brute_force(seed):
    _milp_equals_brute(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(60, 220))
def test_milp_equals_brute_force_more(seed):
    _milp_equals_brute(seed)


def test_the_random_cases_cover_the_model():
    """The random instances hold what the equality is meant to test: a parallel pool, nodes that
    some device cannot run, memory that binds, transfers that differ by link, groups of identical
    devices and near-identical ones (one link differs), and optima that use several devices."""
    seen = {"pool": 0, "unrunnable": 0, "memory": 0, "links": 0, "groups": 0, "near": 0, "spread": 0,
            "colocation": 0, "infeasible": 0}
    for seed in range(60):
        p = draw(seed)
        seen["pool"] += bool(p.parallel.any())
        seen["unrunnable"] += bool(np.isinf(p.times).any())
        seen["memory"] += bool(np.isfinite(p.capacity).any() and p.memory.sum() > p.capacity.min())
        off = p.bandwidth[~np.eye(p.num_devices, dtype=bool)]
        seen["links"] += len(set(off.tolist())) > 1
        seen["groups"] += bool(symmetry_groups(p))
        kinds = {(d.kind, d.memory, d.speed, d.parallel) for d in p.devices.devices}
        seen["near"] += len(kinds) == 1 and not symmetry_groups(p) and p.num_devices > 1
        brute = solve_brute(p)
        seen["spread"] += len(set(brute.placement.values())) > 1
        seen["colocation"] += any(n.colocation is not None for n in p.graph.nodes)
        seen["infeasible"] += brute.status == "infeasible"
    assert all(c >= 3 for c in seen.values()), seen


# ------------------------------------------------------------------------------ time limits and bounds
@pytest.mark.parametrize("seed", [0, 14, 16, 17, 18, 19])
def test_time_limit_bound_below_the_optimum(seed):
    """Eight nearly independent nodes on four unrelated devices (CBC needs 1-3 s to prove most
    of these): a 0.3 s limit stops it with a bound at or below brute force's optimum and a
    schedule at or above it."""
    p = _hard_eight(seed)
    brute = solve_brute(p)
    s = solve_milp(p, threads=1, time_limit=0.3)
    assert s.objective is not None and s.objective >= brute.objective - 1e-9
    assert s.lower_bound <= brute.objective + 1e-9
    assert s.status in ("time_limit", "optimal")
    if s.status == "optimal":
        assert s.objective == pytest.approx(brute.objective)
    else:
        assert s.lower_bound < s.objective


def test_a_time_limit_bites():
    # four instances CBC needs 1.1-2.6 s to prove on an idle machine (the eight-node ones above
    # take 0.1-0.25 s there, too close to a short limit): 0.1 s stops at least one short of a proof
    cases = [(14, 1), (16, 1), (20, 5), (24, 1)]
    statuses = [solve_milp(_medium(n, seed), threads=1, time_limit=0.1).status for n, seed in cases]
    assert "time_limit" in statuses, statuses


def _hard_eight(seed):
    rng = random.Random(500 + seed)
    while True:
        p = random_problem(rng, 8, 4, p_edge=0.1, memory=False, pool=False, unrunnable=False, identical=False)
        if p is not None:
            return p


def _medium(n, seed):
    rng = random.Random(1000 + seed)
    while True:
        p = random_problem(rng, n, 4, p_edge=min(0.5, 3.0 / n), pool=True, identical=False)
        if p is not None:
            return p


@pytest.mark.slow
@pytest.mark.parametrize("n, seed", [(14, 0), (14, 1), (16, 0), (16, 1), (18, 0), (18, 1), (20, 3), (20, 5)])
def test_time_limit_bound_below_a_long_run(n, seed):
    """14-20 nodes, 1.5 s (which stopped every one of these short of a proof when they were
    picked; the long runs prove their optima in 2-20 s): the bound is at most the makespan of
    the best schedule a long run finds (its optimum when it proves one), and the schedule at
    least the long run's bound."""
    p = _medium(n, seed)
    short = solve_milp(p, threads=1, time_limit=1.5)
    long = solve_milp(p, threads=1, time_limit=600)
    assert short.lower_bound <= long.objective + 1e-6
    assert short.objective >= long.lower_bound - 1e-6
    assert short.lower_bound <= short.objective
    assert short.status == "time_limit" or short.objective == pytest.approx(long.objective)


@pytest.mark.parametrize("seed", range(8))
def test_bound_is_never_the_primal_value(seed):
    """Stopped early, the bound is the solver's dual bound or the simple bound, not the makespan."""
    p = _medium(12, seed)
    s = solve_milp(p, threads=1, time_limit=0.5)
    assert s.lower_bound <= s.objective
    if s.status != "optimal":
        assert s.lower_bound < s.objective
        assert s.lower_bound >= p.lower_bound() - 1e-9


# ------------------------------------------------------------------------------ warm starts, solvers, scaling
def test_warm_start_is_used_and_never_beaten_by_worse():
    p = draw(3)
    start = solve_brute(p)
    s = solve_milp(p, threads=1, start=start)
    assert s.stats["warm_start"] == 1
    assert s.objective == pytest.approx(start.objective) and s.status == "optimal"


def test_warm_start_on_the_second_of_identical_devices():
    """A start on gpu:1 only is relabelled onto gpu:0 (the symmetry rows would cut it off)."""
    g = graph({0: 2.0, 1: 3.0, 2: 1.0}, [(0, 1), (1, 2)], comm=1.0)
    p = LatencyProblem(g, servers(3), output_bytes="comm")
    start = evaluate_schedule(p, None, {0: "gpu:1", 1: "gpu:1", 2: "gpu:1"})
    s = solve_milp(p, threads=1, start=start, time_limit=5)
    assert s.objective == 6.0 and s.status == "optimal"


def test_bad_warm_starts():
    p = LatencyProblem(graph({0: 1.0, 1: 1.0}, [(0, 1)], memory=3.0), servers(2, memory=4.0))
    over = evaluate_schedule(p, None, {0: "gpu:0", 1: "gpu:0"})
    assert over.violations
    s = solve_milp(p, threads=1, start=over)
    assert s.objective == 2.0 and not s.violations and any("not used" in n for n in s.notes)
    other = evaluate_schedule(LatencyProblem(graph({"x": 1.0}, []), servers(2)), None, {"x": "gpu:0"})
    with pytest.raises(InvalidArgumentError):
        solve_milp(p, start=other)
    with pytest.raises(InvalidArgumentError):
        solve_milp(p, start="gpu:0")
    with pytest.raises(InvalidArgumentError):
        solve_milp(p, solver="gurobi")
    with pytest.raises(InvalidArgumentError):
        solve_milp(g := graph({0: 1.0}, []), threads=1)
    assert g is not None


def test_greedy_schedule_respects_memory():
    p = LatencyProblem(graph({0: 1.0, 1: 1.0, 2: 1.0}, [], memory=3.0), servers(2, memory=4.0))
    assert greedy_schedule(p) is None
    dev, order = greedy_schedule(LatencyProblem(graph({0: 1.0, 1: 1.0}, [], memory=3.0), servers(2, memory=4.0)))
    assert sorted(dev) == [0, 1] and order == [[0], [1]]


@pytest.mark.parametrize("seed", [1, 2, 7])
def test_highs_gives_the_same_optimum(seed):
    p = draw(seed, n_range=(5, 7))
    cbc = solve_milp(p, threads=1)
    highs = solve_milp(p, threads=1, solver="highs")
    assert highs.stats["solver"] == "highs"
    assert highs.objective == pytest.approx(cbc.objective) == solve_brute(p).objective
    assert highs.status == cbc.status == "optimal"


@pytest.mark.parametrize("factor", [2.0**30, 2.0**-30])
def test_times_far_from_one(factor):
    """Times and transfers scaled by 2**30 or 2**-30: the same schedule, the optimum scaled."""
    base = draw(21, n_range=(6, 7))
    g = base.graph
    scaled = sc.Graph([sc.Node(v.id, {k: t * factor for k, t in v.compute.items()}, memory=v.memory,
                               comm=v.comm * factor) for v in g.nodes], g.edges)
    p = LatencyProblem(scaled, base.devices, output_bytes="comm")
    brute, milp = solve_both(p)
    assert brute.objective == pytest.approx(solve_brute(base).objective * factor)
    check_same(brute, milp)


def test_a_time_limit_that_passes_while_the_model_is_built_returns_the_warm_start():
    # a 400-node graph: building its pair rows takes seconds; 1 ms passes before that
    p = LatencyProblem(sc.random_dag(400, edge_prob=0.02, seed=3), Devices.pcie_star(3), output_bytes="comm")
    start = sc.place(p, method="heft")
    s = solve_milp(p, time_limit=1e-3, start=start)
    # the warm start: the shorter of HEFT's schedule and the MILP's own greedy one, re-scored
    assert s.status == "time_limit" and s.objective <= start.objective
    assert evaluate_schedule(p, None, s.placement, s.order).objective == s.objective
    assert s.lower_bound == best_bound(p).value < s.objective
    assert any("passed while the MILP was being built" in n for n in s.notes)
    assert "mip_vars" not in s.stats
    cold = solve_milp(p, time_limit=1e-3)  # its own greedy schedule
    assert (cold.status, cold.lower_bound) == ("time_limit", best_bound(p).value) and cold.objective > cold.lower_bound


def test_pairs_are_kept_when_their_time_windows_can_overlap():
    # q (CPU only, 1, output 4) -> u (accelerator only, 1); c (CPU only, 5) -> v (accelerator only, 1).
    # u's input arrives at 5 (1 + the transfer), as v's does: they share the accelerator, optimum 7.
    # The earliest starts at the fastest times without transfers (1 for u, 5 for v) would say u
    # is done before v starts; the pair must be kept (u's latest start decides), else the model
    # overlaps them and claims 6
    g = sc.Graph([sc.Node("q", {"cpu": 1.0}, comm=4.0), sc.Node("u", {"accelerator": 1.0}),
                  sc.Node("c", {"cpu": 5.0}), sc.Node("v", {"accelerator": 1.0})], [("q", "u"), ("c", "v")])
    p = LatencyProblem(g, Devices.pcie_star(1))
    assert solve_brute(p).objective == pytest.approx(7.0)
    s = solve_milp(p, threads=1)
    assert s.status == "optimal" and s.objective == pytest.approx(7.0) and s.lower_bound == pytest.approx(7.0)
    assert s.stats["mip_objective"] == pytest.approx(7.0)
