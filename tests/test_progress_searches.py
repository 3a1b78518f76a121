"""Progress of the searches run in Python (issue 15, item 6): the latency searches (simulated
annealing, the (1+1) EA, local search, the MCMC baseline) and the throughput local-search
baseline.

* with every evaluation reported (``REPORT_EVERY`` 0), ``done`` counts the evaluations one by
  one, ``best`` is the least makespan so far (evaluated, or the start schedule's: never
  increasing, never the current string's), and the final report's ``best`` is the returned
  objective;
* a callback changes nothing in the result (same seed, same schedule or plan);
* with the real ``REPORT_EVERY``, two reports of a run are at least that far apart.
"""

import pytest

import stagecut as sc
from stagecut import progress as pg
from stagecut.latency import Devices, LatencyProblem
from stagecut.latency.heuristics.constructive import best_device
from stagecut.latency.heuristics.partition_baselines import mcmc
from stagecut.latency.heuristics.search import evolutionary, local_search, simulated_annealing
from stagecut.progress import reporting
from stagecut.throughput import baselines
from stagecut.throughput.problem import ThroughputProblem

SEARCHES = {"sa": simulated_annealing, "ea": evolutionary, "local": local_search, "mcmc": mcmc}


def latency_problem(seed=2, n=40):
    return LatencyProblem(sc.regal_graph(n, seed=seed), Devices.pcie_star(4))


def run_search(phase, problem, seed, evaluations):
    """The search's schedule and the events it reported (mcmc takes no ``progress=``: it reports
    through an enclosing :func:`reporting` block, as inside ``place``)."""
    events = []
    with reporting(events.append):
        s = SEARCHES[phase](problem, seed=seed, max_evaluations=evaluations)
    return s, [e for e in events if e.phase == phase]


@pytest.fixture
def every_evaluation(monkeypatch):
    monkeypatch.setattr(pg, "REPORT_EVERY", 0.0)


@pytest.mark.parametrize("phase", sorted(SEARCHES))
@pytest.mark.usefixtures("every_evaluation")
def test_latency_search_reports_each_evaluation_with_the_least_makespan_so_far(phase):
    p = latency_problem()
    s, events = run_search(phase, p, seed=3, evaluations=600)
    *running, last = events
    assert last.final and not any(e.final for e in running)
    assert last.best == s.objective
    assert last.done == s.stats["evaluations"] and {e.total for e in events} == {600}
    assert all(e.unit == "evaluations" for e in events)
    # the least makespan evaluated so far: the start first, then never up, ending at the answer
    bests = [e.best for e in running]
    assert bests == sorted(bests, reverse=True)
    assert running[0].done == 1 and running[0].best >= s.objective  # the start's makespan
    # the answer is the best so far (a string, or the start schedule), up to re-scoring round-off
    assert running[-1].best == pytest.approx(s.objective, rel=1e-9)
    if phase != "local":  # local search reports per batch of moves, the others per evaluation
        assert [e.done for e in running] == list(range(1, len(running) + 1))
    else:
        dones = [e.done for e in running]
        assert dones == sorted(dones) and dones[0] == 1


@pytest.mark.usefixtures("every_evaluation")
def test_annealing_best_so_far_is_not_its_current_string():
    # annealing accepts worse strings: the makespans it evaluates go up and down, its best does not
    p = latency_problem(seed=5, n=30)
    one = best_device(p)  # a poor start, as positions: the search improves on it many times
    start = [p.devices.names.index(one.placement[v]) for v in p.ids]
    events = []
    with reporting(events.append):
        s = simulated_annealing(p, seed=1, max_evaluations=800, start=start)
    assert s.stats["accepted"] > s.stats["improvements"] + 10  # it did accept worse strings
    bests = [e.best for e in events]
    assert bests == sorted(bests, reverse=True)
    assert len(set(bests)) > 2 and bests[-1] == s.objective
    assert s.notes == ()  # the answer is a string found by the search, not the start schedule


@pytest.mark.parametrize("phase", sorted(SEARCHES))
def test_latency_search_result_is_the_same_with_a_callback(phase):
    p = latency_problem(seed=4)
    plain = SEARCHES[phase](p, seed=7, max_evaluations=500)
    reported, events = run_search(phase, p, seed=7, evaluations=500)
    assert events and events[-1].final
    assert reported.placement == plain.placement and reported.objective == plain.objective
    assert reported.stats == plain.stats


def test_progress_argument_of_a_search_and_of_place_report_the_same():
    p = latency_problem(seed=6)
    direct, via_place = [], []
    a = simulated_annealing(p, seed=2, max_evaluations=400, progress=direct.append)
    b = sc.latency.place(p, method="sa", seed=2, max_evaluations=400, progress=via_place.append)
    assert a.placement == b.placement
    assert direct[-1].final and via_place[-1].final
    assert direct[-1].best == via_place[-1].best == a.objective
    assert direct[-1].done == via_place[-1].done == 400


def test_reports_are_rate_limited():
    # a run long enough for several reports at the real rate: consecutive reports of the run are
    # at least REPORT_EVERY apart (a bound the reporter guarantees, not a speed measurement)
    p = latency_problem(seed=2, n=60)
    s, events = run_search("ea", p, seed=0, evaluations=20_000)
    running = [e for e in events if not e.final]
    assert running and events[-1].final and events[-1].best == s.objective
    gaps = [b.elapsed - a.elapsed for a, b in zip(running, running[1:])]
    # the reporter spaces its own clock readings; an event's time is read a moment later, and a loaded
    # machine may pause the process in between (0.244 s seen under stress-ng): 0.1 s of slack for that
    # (no rate limit: gaps of microseconds; half the interval: 0.125 s)
    assert all(g >= pg.REPORT_EVERY - 0.1 for g in gaps), min(gaps)
    assert len(running) <= 1 + events[-1].elapsed / pg.REPORT_EVERY
    assert len(running) < s.stats["evaluations"] / 100


# ---------------------------------------------------------------------------- throughput
@pytest.mark.usefixtures("every_evaluation")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_throughput_local_search_reports_runs_and_the_best_run_so_far(seed):
    problem = ThroughputProblem.from_graph(sc.regal_graph(30, seed=seed), devices=3)
    plain = baselines.local_search(problem, seed=seed, restarts=5)
    events = []
    plan = baselines.local_search(problem, seed=seed, restarts=5, progress=events.append)
    assert plan.objective == plain.objective and plan.stats == plain.stats
    assert plan.assignment() == plain.assignment()
    *running, last = events
    assert last.final and last.best == plan.objective and last.done == last.total == 5
    assert all(e.phase == "local-search" and e.unit == "runs" for e in events)
    assert running[0].best is None  # no run has ended yet
    dones = [e.done for e in events]
    assert dones == sorted(dones) and set(dones) == set(range(6))
    bests = [e.best for e in events if e.best is not None]
    assert bests == sorted(bests, reverse=True)
    after_run = {e.done: e.best for e in running if e.best is not None}
    assert after_run[5] == plan.objective


def test_throughput_local_search_reports_through_partition():
    g = sc.regal_graph(24, seed=3)
    events = []
    plan = sc.partition(g, devices=3, method="local-search", seed=1, progress=events.append)
    mine = [e for e in events if e.phase == "local-search"]
    assert mine and mine[-1].final and mine[-1].best == plan.objective
