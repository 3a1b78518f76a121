"""The one driver of the searches (heuristics/driver.py) and the list-scheduling core
(constructive.ListCore): what every search's result says about who found it, that the
searches keep their current string (not only their best) where the docs say so, and that the
list schedulers' shared pieces behave on hand instances."""

import random

import numpy as np
import pytest

import stagecut as sc
from stagecut.latency import Devices, LatencyProblem
from stagecut.latency.heuristics.constructive import ListCore, Memory, greedy, heft, list_greedy
from stagecut.latency.heuristics.driver import Walk
from stagecut.latency.heuristics.lns import lns
from stagecut.latency.heuristics.partition_baselines import mcmc
from stagecut.latency.heuristics.search import evolutionary, local_search, simulated_annealing
from stagecut.latency.model._fast import Evaluator

SEARCHES = {
    "sa": lambda p, start: simulated_annealing(p, start=start, seed=2, max_evaluations=300),
    "ea": lambda p, start: evolutionary(p, start=start, seed=2, max_evaluations=300),
    "local": lambda p, start: local_search(p, start=start, seed=2, max_evaluations=2000),
    "lns": lambda p, start: lns(p, start=start, seed=2, max_iterations=60),
    "mcmc": lambda p, start: mcmc(p, start=start, seed=2, max_evaluations=300),
}


def chain_problem(n=12, seed=3):
    """A chain that runs 10x faster on an accelerator than on the CPU pool: everything on the
    CPU is a poor start every search improves on."""
    rng = random.Random(seed)
    nodes = [sc.Node(i, {"accelerator": float(rng.randint(1, 4)), "cpu": float(rng.randint(30, 60))},
                     comm=1.0, memory=1.0) for i in range(n)]
    edges = [(i, i + 1) for i in range(n - 1)]
    return LatencyProblem(sc.Graph(nodes, edges), Devices.pcie_star(2, memory=float(n)), output_bytes="comm")


@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_a_search_that_improves_its_start_says_it_found_the_answer(name):
    p = chain_problem()
    start = [0] * len(p)  # the CPU pool
    s = SEARCHES[name](p, start)
    assert s.objective < 0.5 * Evaluator(p).makespan(np.array(start))
    assert s.stats["found_by"] == s.method == name


@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_a_search_that_cannot_improve_its_start_names_the_start(name):
    """One accelerator that holds everything: all on it is optimal (any CPU node costs 30+),
    so the answer is the start's, given as a placement ("start") or as a schedule (its method)."""
    p = chain_problem()
    best = [1] * len(p)
    s = SEARCHES[name](p, best)
    assert s.objective == pytest.approx(Evaluator(p).makespan(np.array(best)))
    assert s.stats["found_by"] == "start"
    h = heft(p)
    assert [p.devices.index(h.placement[v]) for v in p.ids] == best
    s = SEARCHES[name](p, h)
    assert s.stats["found_by"] == "heft" and s.objective == pytest.approx(h.objective)


def test_the_start_schedule_in_its_own_order_is_returned_and_named():
    """A start whose own order beats rank round-robin on its placement is returned as is, named
    as the answer's finder; when the search changes nothing, the start's method is named too."""
    own_better = 0
    for p in greedy_instances():
        s0 = greedy(p)
        s = local_search(p, start=s0, max_evaluations=1)   # (the start's own evaluation only)
        assert s.stats["found_by"] == "greedy" and s.objective <= s0.objective + 1e-9
        if "in its own order" in " ".join(s.notes):
            own_better += 1
            assert s.objective == pytest.approx(s0.objective) and s.order == s0.order
    assert own_better > 0


def test_the_ea_keeps_its_last_equal_string_and_the_sa_its_best():
    """The (1+1) EA replaces its parent by an equally good child (a walk on plateaus) and
    returns its parent; simulated annealing returns the best string it saw, not its current one."""
    p = chain_problem(n=8)
    w = Walk(p, [0] * len(p), "ea", 0, None, 100, 100)
    f0 = w.begin()
    child = w.cur.copy()
    child[0] = 1
    f = w.fitness(child)
    assert w.replace(child, f) == (f < f0)
    assert w.cur is child and w.cur_f == f and w.best_f == min(f, f0)
    worse = w.cur.copy()
    worse[:] = 0
    assert w.replace(worse, f0 + 100.0) is False
    assert w.best_f == min(f, f0) and (w.best != worse).any()
    out = w.result({}, current=True)
    assert out.objective == pytest.approx(Evaluator(p).makespan(worse))
    best = w.result({})
    assert best.objective == pytest.approx(min(f, f0))


def test_walk_moves_keep_the_memory_loads():
    p = chain_problem(n=5)
    w = Walk(p, [0] * 5, "sa", 0, None, 50, 50)
    w.begin()
    loads = w.loads.copy()
    f = w.try_move(2, 1)
    assert w.cur[2] == 1 and w.keep(2, 0, 1, f) == (f < Evaluator(p).makespan(np.zeros(5, dtype=np.int64)))
    assert w.loads[0] == loads[0] - 1.0 and w.loads[1] == loads[1] + 1.0
    f = w.try_move(3, 1)
    w.undo(3, 0)
    assert w.cur[3] == 0 and w.loads[1] == loads[1] + 1.0


def test_walk_stops_when_every_move_is_refused():
    """A random search whose moves are all refused (nothing evaluated) still ends: at most a
    hundred tries per evaluation (plus ten)."""
    p = chain_problem(n=4)
    w = Walk(p, [0] * 4, "sa", 0, None, 1000, 1000)
    w.begin()
    tries = 0
    while w.going():
        tries += 1
    assert tries == 100 * (1 + 10) - 0 and w.attempts == tries


def test_list_core_candidates_arrival_and_unit_placement():
    """Two nodes of one colocation class: once the first is placed, the second may go only
    there; the arrival of an input pays the transfer across devices, none on the same one."""
    nodes = [sc.Node("a", {"gpu": 1.0}, comm=4.0, colocation="k"), sc.Node("b", {"gpu": 2.0}),
             sc.Node("c", {"gpu": 1.0}, colocation="k")]
    p = LatencyProblem(sc.Graph(nodes, [("a", "b"), ("b", "c")]),
                       Devices.servers(1, 2, intra_bandwidth=2.0, inter_bandwidth=1.0), output_bytes="comm")
    core = ListCore(p, Memory, "x")
    a, b, c = (p.index[v] for v in "abc")
    assert core.candidates(a) == [0, 1]
    core.place(a, 1, 1.0)
    assert core.candidates(c) == [1] and core.candidates(b) == [0, 1]
    assert core.arrival(b, 1) == 1.0 and core.arrival(b, 0) == pytest.approx(1.0 + 4.0 / 2.0)
    core.place(b, 0, 5.0)
    assert core.dev.tolist() == [1, 0, -1] and core.finish[b] == 5.0


def greedy_instances(count=400, seed=5):
    """Small random DAGs on two GPUs with many zero-time nodes: the greedy's own order and the
    rank round-robin order each win on some."""
    rng = random.Random(seed)
    for _ in range(count):
        n = rng.randint(4, 9)
        nodes = [sc.Node(i, {"gpu": float(rng.choice([0, 1, 3, 7]))}, comm=float(rng.randint(0, 3)))
                 for i in range(n)]
        edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.3]
        yield LatencyProblem(sc.Graph(nodes, edges), Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0),
                             output_bytes="comm")


def test_list_greedy_keeps_the_shorter_order_and_says_which():
    kept = {"rr": 0, "own": 0}
    for p in greedy_instances():
        s = list_greedy(p)
        ev = Evaluator(p)
        dev = np.array([p.devices.index(s.placement[v]) for v in p.ids])
        rr = ev.makespan(dev)
        own = ev.makespan(dev, [[p.index[v] for v in s.order.get(name, ())] for name in p.devices.names])
        if s.notes:
            kept["rr"] += 1
            assert "rank round-robin order" in s.notes[0] and s.objective == pytest.approx(rr)
        else:
            kept["own"] += 1
            assert s.objective == pytest.approx(own) and own <= rr + 1e-9
    assert kept["rr"] > 0 and kept["own"] > 0


@pytest.mark.parametrize("name", ["sa", "ea", "local", "lns"])
def test_ctrl_c_inside_a_search_ends_it_without_an_answer(name):
    """A KeyboardInterrupt raised while a search runs (here from its progress callback, at the
    first report) is never caught by the driver: no schedule comes back."""
    p = chain_problem(n=30)
    calls = []

    def interrupt(report):
        calls.append(report)
        raise KeyboardInterrupt

    run = {"sa": simulated_annealing, "ea": evolutionary, "local": local_search, "lns": lns}[name]
    with pytest.raises(KeyboardInterrupt):
        run(p, start=[0] * len(p), seed=1, time_limit=60, progress=interrupt)
    assert len(calls) == 1


# ------------------------------------------------- tests for mutants that survived a sampled run
def memory_trap():
    """One accelerator that holds one node; node 2 gains 48 from it: the plain heuristics give
    it to node 0, the memory-aware ones keep it for node 2."""
    g = sc.Graph.chain([1.0, 1.0, 1.0, 1.0], cpu_costs=[2.0, 2.0, 50.0, 2.0], memory=[1.0] * 4)
    return LatencyProblem.from_workload(g, accelerators=1, memory=1.0)


def test_the_plain_start_pool_holds_only_the_plain_heuristics():
    from stagecut.latency.heuristics.constructive import best_constructive
    from stagecut.latency.heuristics.driver import start_within
    from stagecut.latency.heuristics.memaware import best_start

    p = memory_trap()
    plain = start_within(p, lambda: False, plain_only=True)
    assert plain.method in ("best-device", "met", "greedy", "heft")
    assert plain.objective == best_constructive(p).objective == 55.0
    full = start_within(p, lambda: False)
    assert full.objective == best_start(p).objective == 7.0


def test_a_search_under_a_time_limit_alone_cools_over_the_time():
    """No evaluation budget: the budget's progress is the share of the time limit used."""
    from stagecut.latency.heuristics.driver import _Budget

    b = _Budget(3600.0, None, 100)
    assert b.max_evaluations is None and 0.0 <= b.progress() < 0.5
    b = _Budget(None, None, 100)
    assert b.max_evaluations == 100 and b.progress() == 0.0
    b.evaluations = 150
    assert b.progress() == 1.0
    s = simulated_annealing(chain_problem(n=6), start=[0] * 6, time_limit=0.2, seed=1)
    assert s.objective is not None and s.status in ("feasible", "time_limit")


def test_a_start_schedule_of_another_problem_is_refused_naming_the_node():
    p = chain_problem(n=4)
    other = heft(chain_problem(n=3))
    with pytest.raises(sc.errors.InvalidArgumentError, match=r"start: node 3 has no device"):
        local_search(p, start=other)


def test_no_answer_reports_its_own_runtime():
    import time

    from stagecut.latency.heuristics.constructive import met

    g = sc.Graph([sc.Node("a", {"gpu": 1.0}, memory=5.0)], [])
    p = LatencyProblem(g, Devices.servers(1, 1, intra_bandwidth=1.0, inter_bandwidth=1.0, memory=1.0))
    t = time.perf_counter()
    s = met(p)
    spent = time.perf_counter() - t
    assert s.objective is None and s.status == "infeasible"
    assert 0.0 <= s.runtime_s <= spent


def test_a_random_move_always_changes_the_device():
    from stagecut.latency.heuristics.search import _random_move

    p = chain_problem(n=6)
    w = Walk(p, [0, 1, 0, 1, 0, 1], "sa", 0, None, 10, 10)
    rng = random.Random(0)
    for _ in range(200):
        u, old, d = _random_move(w.state, w.loads, w.cur, rng)
        assert old == w.cur[u] and d != old


def six_gpus():
    """Six GPUs (the last one twice as fast), no CPU pool, unlimited memory."""
    from stagecut.latency import Device

    devs = [Device(f"gpu:{d}", "gpu", speed=2.0 if d == 5 else 1.0) for d in range(6)]
    return Devices.from_matrix(devs, [[float("inf") if a == b else 1.0 for b in range(6)] for a in range(6)])


def test_an_lns_window_may_move_a_unit_to_its_fastest_device():
    """All on gpu:0: the roomy and least busy devices are gpu:0-2 (ties by position), no
    neighbour is elsewhere; only the unit's fastest device brings gpu:5 into the window's sets."""
    from stagecut.latency.heuristics.lns import _Windows

    g = sc.Graph([sc.Node(i, {"gpu": 4.0}, comm=1.0) for i in range(3)], [(0, 1), (1, 2)])
    p = LatencyProblem(g, six_gpus(), output_bytes="comm")
    w = Walk(p, [0, 0, 0], "lns", 0, None, None, None)
    wins = _Windows(w.state, 1, 1000, random.Random(0))
    rows = wins.candidates([1], w.cur)
    assert 5 in rows[:, 1].tolist()


class _Rigged(random.Random):
    """A generator whose first two ``randrange`` calls give ``first`` (the window kind, then
    where on the path it starts)."""

    def __init__(self, seed, first):
        super().__init__(seed)
        self.first = list(first)

    def randrange(self, *args, **kwargs):
        if self.first:
            return self.first.pop(0)
        return super().randrange(*args, **kwargs)


def test_an_lns_run_window_grows_by_the_neighbours_off_the_path():
    """A chain p0 -> p1 -> p2 on gpu:0 with a side node off each (on gpu:1): the run of critical
    units on gpu:0 from p0 is the chain; a window of five takes two side nodes besides."""
    from stagecut.latency.heuristics.lns import _Windows, critical_units

    nodes = [sc.Node(f"p{i}", {"gpu": 5.0}, comm=1.0) for i in range(3)]
    nodes += [sc.Node(f"s{i}", {"gpu": 0.5}, comm=0.0) for i in range(3)]
    edges = [("p0", "p1"), ("p1", "p2")] + [(f"p{i}", f"s{i}") for i in range(3)]
    p = LatencyProblem(sc.Graph(nodes, edges), six_gpus(), output_bytes="comm")
    start = [0 if p.ids[i].startswith("p") else 1 for i in range(6)]
    w = Walk(p, start, "lns", 0, None, None, None)
    path, _ = critical_units(w.state, w.cur)
    chain = [int(w.units.unit_of[p.index[v]]) for v in ("p0", "p1", "p2")]
    assert path[:3] == chain
    win = _Windows(w.state, 5, 1000, _Rigged(0, [2, 0])).draw(path, w.cur)
    assert win[:3] == chain and len(win) == 5
    side = {int(w.units.unit_of[p.index[f"s{i}"]]) for i in range(3)}
    assert set(win[3:]) <= side


def test_topo_packing_fills_the_fastest_device_first_and_fits_exactly():
    from stagecut.latency.heuristics.memaware import topo_packing

    g = sc.Graph([sc.Node(i, {"gpu": 2.0}, memory=1.0) for i in range(3)], [(0, 1), (1, 2)])
    p = LatencyProblem(g, six_gpus())
    assert topo_packing(p, [[0], [1], [2]]).tolist() == [5, 5, 5]
    # blocks of 1, 2 and 1 bytes on two devices of 2: the last block fits exactly where the first is
    from stagecut.latency import Device

    devs = [Device(f"gpu:{d}", "gpu", memory=2.0) for d in range(2)]
    two = Devices.from_matrix(devs, [[float("inf"), 1.0], [1.0, float("inf")]])
    g = sc.Graph([sc.Node(i, {"gpu": 1.0}, memory=m) for i, m in enumerate([1.0, 2.0, 1.0])], [(0, 1), (1, 2)])
    q = LatencyProblem(g, two)
    assert topo_packing(q, [[0], [1], [2]]).tolist() == [0, 1, 0]
