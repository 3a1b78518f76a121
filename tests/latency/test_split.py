"""MILP-SPLIT (issue 13): equal to the whole MILP (and to brute force where it runs) on
single-channel chains of modules, its lower bound never above the optimum, never worse than the
constructive baselines, the cut vertices, the fallbacks and ``place(method="split")``."""

import math
import os
import random

import pytest

import stagecut as sc
from stagecut.errors import InvalidArgumentError
from stagecut.latency import LatencyProblem
from stagecut.latency.diviml.modules import cut_vertices, modules_of
from stagecut.latency.diviml.split import solve_split
from stagecut.latency.exact.brute import solve_brute
from stagecut.latency.exact.milp import solve_milp
from stagecut.latency.heuristics.constructive import best_constructive
from stagecut.rwnn import rwnn, rwnn_devices

TOL = 1e-6


def chain_problem(rng, modules, *, inner=(1, 3), bridge=None, open_ends=None):
    """A single-channel chain of small random modules on the RWNN devices (RWNN's cost ranges:
    ms times in the CPU : T4 : A100 ratio, outputs in bytes). Each module: an entry, 1-3 inner
    nodes wired at random below it, an exit; consecutive modules share a node or are joined by
    one edge (``bridge``; random per join when None). ``open_ends``: the first module has two
    sources and no entry, the last two sinks and no exit (random when None)."""
    if open_ends is None:
        open_ends = rng.random() < 0.3
    nodes, edges = [], []

    def node():
        base = rng.uniform(0.5, 1.5)
        i = len(nodes)
        nodes.append(sc.Node(i, {k: base * r * rng.uniform(0.9, 1.1) for k, r in
                                 (("cpu", 7.1), ("t4", 1.26), ("a100", 1.0))},
                             memory=1e6, comm=float(rng.randint(4, 12)) * 1e6))
        return i

    prev = None
    for t in range(modules):
        first = t == 0 and open_ends
        if prev is None or first:
            entries = [node(), node()] if first else [node()]
        elif bridge if bridge is not None else rng.random() < 0.5:
            entries = [node()]
            edges.append((prev, entries[0]))
        else:
            entries = [prev]
        body = [node() for _ in range(rng.randint(*inner))]
        for k, v in enumerate(body):
            ups = entries + body[:k]
            for u in rng.sample(ups, rng.randint(1, len(ups))):
                edges.append((u, v))
        last = t == modules - 1 and open_ends
        if last:
            prev = None
        else:
            prev = node()
            for v in body:
                edges.append((v, prev))
    return LatencyProblem(sc.Graph(nodes, edges), rwnn_devices(), output_bytes="comm")


def rwnn_problem(modules, size, seed):
    return LatencyProblem(rwnn(modules, size=size, seed=seed), rwnn_devices(), output_bytes="comm")


def check_against(problem, exact):
    s = solve_split(problem, threads=1)
    assert s.status == "optimal" and exact.status == "optimal"
    assert s.objective == pytest.approx(exact.objective, rel=TOL), (s.objective, exact.objective)
    assert s.lower_bound <= exact.objective * (1 + TOL), (s.lower_bound, exact.objective)
    base = best_constructive(problem)
    assert s.objective <= base.objective * (1 + TOL)
    assert not s.violations
    assert set(s.placement) == set(problem.ids)
    return s


# ------------------------------------------------------------------------ cut vertices, modules
def test_cut_vertices_of_a_diamond_chain():
    g = sc.Graph([sc.Node(v, {"gpu": 1.0}) for v in "sabtcd"],
                 [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t"), ("t", "c"), ("t", "d")])
    p = LatencyProblem(g, sc.latency.Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0))
    cuts = cut_vertices(p)
    assert [p.ids[c] for c in cuts] == ["s", "t"]
    mods = modules_of(p, cuts)
    assert [(p.ids[e], sorted(p.ids[i] for i in inner), None if x is None else p.ids[x]) for e, inner, x in mods] \
        == [("s", ["a", "b"], "t"), ("t", ["c", "d"], None)]
    with pytest.raises(InvalidArgumentError):
        modules_of(p, [])


def test_cut_vertices_are_on_every_path():
    rng = random.Random(5)
    for _ in range(40):
        p = chain_problem(rng, rng.randint(1, 4))
        n = len(p)
        reach = [set() for _ in range(n)]
        for v in reversed(p.order):
            for s in p.succ[v]:
                reach[v] |= {s} | reach[s]
        expect = [c for c in range(n) if all(c == v or v in reach[c] or c in reach[v] for v in range(n))
                  and not any(c in reach[a] and b in reach[c] for a, b in p.graph.edges)]  # no edge around c
        assert sorted(cut_vertices(p)) == sorted(expect)
    assert cut_vertices(rwnn_problem(3, 6, 0)) == [0, 7, 8, 15, 16, 23]


# ------------------------------------------------------------------------ exactness
@pytest.mark.parametrize("seed", range(12))
def test_split_equals_brute_force_on_small_chains(seed):
    rng = random.Random(100 + seed)
    p = chain_problem(rng, rng.randint(1, 3), inner=(1, 2))
    while len(p) > 8:
        p = chain_problem(rng, 2, inner=(1, 2))
    check_against(p, solve_brute(p))


@pytest.mark.parametrize("seed", range(12))
def test_split_equals_milp_on_chains(seed):
    rng = random.Random(200 + seed)
    p = chain_problem(rng, rng.randint(2, 4))
    check_against(p, solve_milp(p, threads=1))


@pytest.mark.parametrize("seed", range(2))
def test_split_equals_milp_on_a_stacked_rwnn(seed):
    p = rwnn_problem(1, 6, seed)  # one module of 6 + 2 nodes: brute force too
    s = check_against(p, solve_milp(p, threads=1))
    assert s.objective == pytest.approx(solve_brute(p).objective, rel=TOL)


@pytest.mark.slow
def test_split_equals_milp_on_50_stacked_rwnns_slow():
    # two stacked ER modules of 6 body nodes (16 nodes) on HiGHS (CBC did not prove a 27-node
    # instance optimal in 120 s). The whole MILP has 60 s: HiGHS proves most of these within a
    # second or two but stalls on a few (seed 1: 60 s, stopped at SPLIT's value). On every seed
    # SPLIT is optimal, the MILP finds nothing better and its bound is below SPLIT; where the
    # MILP proves its optimum the two are equal, and that must happen on at least 50 instances.
    from stagecut.errors import BackendUnavailableError

    both = []
    for seed in range(60):
        p = rwnn_problem(2, 6, seed)
        try:
            s = solve_split(p, threads=1, solver="highs")
        except BackendUnavailableError:
            if os.environ.get("CI") == "true":
                raise
            pytest.skip("HiGHS is not installed")
        exact = solve_milp(p, threads=1, solver="highs", time_limit=60)
        assert s.status == "optimal", seed
        assert s.objective <= exact.objective * (1 + TOL), (seed, s.objective, exact.objective)
        assert exact.lower_bound <= s.objective * (1 + TOL), seed
        if exact.status == "optimal":
            assert s.objective == pytest.approx(exact.objective, rel=TOL), seed
            both.append(seed)
        assert s.lower_bound <= s.objective * (1 + TOL), seed
        for method in ("best-device", "met", "greedy", "heft", "sa", "ea"):  # SPLIT <= every baseline
            base = sc.latency.place(p, method=method, seed=seed, time_limit=2.0)
            assert s.objective <= base.objective * (1 + TOL), (seed, method)
    assert len(both) >= 50, f"SPLIT = MILP with both optimal on {len(both)} of 60: {both}"


def test_lower_bound_under_a_time_limit_stays_below_the_optimum():
    rng = random.Random(7)
    for _ in range(3):
        p = chain_problem(rng, 3, inner=(3, 3))
        opt = solve_split(p, threads=1)
        assert opt.status == "optimal"
        cut = solve_split(p, threads=1, time_limit=0.05)
        assert cut.lower_bound <= opt.objective * (1 + TOL)
        if cut.objective is not None:
            assert cut.objective >= opt.objective * (1 - TOL)


def test_split_is_never_above_its_start_under_a_tight_limit():
    # module MILPs cut off after 0.05 s: without the start's module schedules as warm starts
    # SPLIT lands above simulated annealing's makespan on every one of these seeds
    for seed in range(3):
        p = rwnn_problem(3, 10, seed)
        sa = sc.latency.place(p, method="sa", seed=seed, max_evaluations=3000)
        s = solve_split(p, threads=1, time_limit=0.5, start=sa)
        assert s.status in ("time_limit", "optimal")  # (27 module MILPs at 0.05 s: "time_limit" here)
        assert s.objective <= sa.objective * (1 + TOL), (seed, s.objective, sa.objective)
        assert s.lower_bound <= s.objective
        assert not any("not used" in n for n in s.notes)


def test_split_keeps_its_time_limit_with_many_module_solves():
    # 54 module MILPs at their 0.05 s floor would take 2.7 s; past the limit a module's answer
    # is its warm start at once
    # (the start is given: under a 0.5 s limit on a loaded machine SPLIT's own start may be only the
    # cheapest heuristic's, so the best of all of them is no bound on what it returns)
    p = rwnn_problem(6, 10, 0)
    start = best_constructive(p)
    s = solve_split(p, threads=1, time_limit=0.5, start=start)
    assert s.stats["solves"] >= 50
    assert s.status == "time_limit"  # (test_time_limits.py checks that no module MILP starts past the deadline)
    assert s.objective is not None and start.objective is not None
    assert s.objective <= start.objective * (1 + TOL)


def test_a_start_that_does_not_fit_is_not_used():
    p = rwnn_problem(2, 6, 0)
    other = best_constructive(rwnn_problem(3, 6, 0))
    s = solve_split(p, threads=1, start=other)
    assert any("the start is not used" in n for n in s.notes)
    assert s.status == "optimal"
    with pytest.raises(InvalidArgumentError, match="start"):
        solve_split(p, threads=1, start={"a": "cpu"})


def test_workers_give_the_same_answer():
    p = chain_problem(random.Random(3), 3)
    one = solve_split(p, threads=1)
    two = solve_split(p, threads=1, workers=2)
    assert two.objective == pytest.approx(one.objective, rel=TOL) and two.status == "optimal"


# ------------------------------------------------------------------------ fallbacks, errors, place
def test_no_cut_vertex_falls_back_to_the_whole_milp():
    g = sc.Graph([sc.Node(v, {"cpu": 7.0, "t4": 1.3, "a100": 1.0}, comm=8e6) for v in "abcd"],
                 [("a", "c"), ("b", "d"), ("a", "d")])
    p = LatencyProblem(g, rwnn_devices(), output_bytes="comm")
    assert cut_vertices(p) == []
    s = solve_split(p, threads=1)
    assert s.method == "split" and any("no cut vertex" in n for n in s.notes)
    assert s.objective == pytest.approx(solve_brute(p).objective, rel=TOL)


def test_memory_coupling_falls_back_to_the_whole_milp():
    rng = random.Random(11)
    p = chain_problem(rng, 3, bridge=True, open_ends=False)
    # the A100 holds only a few nodes: each module alone would put its nodes there
    tight = rwnn_devices(a100_memory=2.5e6, t4_memory=2.5e6)
    q = LatencyProblem(p.graph, tight, output_bytes="comm")
    s = solve_split(q, threads=1)
    assert not s.violations
    assert s.objective == pytest.approx(solve_milp(q, threads=1).objective, rel=TOL)
    assert s.lower_bound <= s.objective


def test_bad_arguments():
    p = chain_problem(random.Random(1), 2)
    with pytest.raises(InvalidArgumentError):
        solve_split("nope")
    with pytest.raises(InvalidArgumentError):
        solve_split(p, workers=0)
    with pytest.raises(InvalidArgumentError):
        solve_split(p, solver="gurobi-ish")


def test_place_runs_split():
    p = chain_problem(random.Random(2), 2)
    s = sc.latency.place(p, method="split", threads=1)  # (place passes solver= and time_limit= too)
    assert s.method == "split" and s.status == "optimal"
    assert "split" in sc.latency.solve.METHODS
    assert math.isfinite(s.lower_bound)
