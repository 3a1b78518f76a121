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
