"""Time limits that hold with a planted slow model build: every row handed to the bulk row sink
(the MILP's, the QuickP IP's, SPLIT's module MILPs) sleeps, so an unchecked build would take
minutes. Each method must still come back soon after its limit with a valid answer re-scored by
the evaluator (its start, with status ``"time_limit"``).

The bounds on the wall clock are generous (the limit plus 20 s: a build that ignored the deadline
would take several minutes), so they hold on a loaded machine; the planted sleep uses no CPU."""

import time

import pytest

import stagecut as sc
from stagecut.latency import Devices, LatencyProblem, evaluate_schedule, heft
from stagecut.latency import solve as solve_mod
from stagecut.latency.exact import bounds as bounds_mod
from stagecut.latency.exact.milp_build import RowSink
from stagecut.latency.quickp.ip import quickp
from stagecut.latency.quickp.opgraph import operator_devices, operator_graph_from_data, synthetic_operator_graph
from stagecut.rwnn import rwnn, rwnn_devices

TOL = 1e-9
#: seconds past the limit that no call may take (generous: an unchecked build takes minutes)
SLACK = 20.0


def slow_rows(monkeypatch, seconds=0.02):
    """Every row (and every block of rows) added to a RowSink sleeps first."""
    added = {"rows": 0}
    real_add, real_block = RowSink.add, RowSink.add_block

    def add(self, *args):
        added["rows"] += 1
        time.sleep(seconds)
        return real_add(self, *args)

    def add_block(self, idx, val, sense, rhs):   # (one vectorised call: one sleep)
        added["rows"] += len(rhs)
        time.sleep(seconds)
        return real_block(self, idx, val, sense, rhs)

    monkeypatch.setattr(RowSink, "add", add)
    monkeypatch.setattr(RowSink, "add_block", add_block)
    return added


def rescored(p, s):
    """The evaluator's makespan of ``s``'s placement and order."""
    return evaluate_schedule(p, None, s.placement, s.order).objective


def timed(f, *args, **kwargs):
    t = time.perf_counter()
    out = f(*args, **kwargs)
    return out, time.perf_counter() - t


def random_problem(n=40, seed=3):
    return LatencyProblem(sc.random_dag(n, edge_prob=0.1, seed=seed), Devices.pcie_star(3), output_bytes="comm")


def training_problem(n=400, gpus=2):
    g, out, _ = operator_graph_from_data(synthetic_operator_graph(n, "alexnet", seed=1, devices=gpus))
    return LatencyProblem(g, operator_devices(gpus), output_bytes=out)


def test_milp_with_a_planted_slow_build_returns_its_start_soon_after_the_limit(monkeypatch):
    p = random_problem()
    start = heft(p)
    added = slow_rows(monkeypatch)
    s, wall = timed(sc.place, p, method="milp", time_limit=1.0, start=start)
    assert wall < 1.0 + SLACK
    assert 0 < added["rows"] < 100_000
    assert s.status == "time_limit" and any("passed while the MILP was being built" in n for n in s.notes)
    assert s.objective <= start.objective * (1 + TOL)
    assert rescored(p, s) == pytest.approx(s.objective)


def test_quickp_with_a_planted_slow_build_returns_its_best_start_soon_after_the_limit(monkeypatch):
    p = training_problem()
    h = heft(p)
    slow_rows(monkeypatch)
    s, wall = timed(quickp, p, time_limit=2.0, threads=1)
    assert wall < 2.0 + SLACK
    assert s.status == "time_limit" and s.stats["built"] == 0
    assert s.stats["found_by"] in ("heft", "metis", "best-device")
    assert s.objective <= h.objective * (1 + TOL)
    assert rescored(p, s) == pytest.approx(s.objective)


def test_split_with_planted_slow_module_builds_ends_soon_after_the_limit(monkeypatch):
    p = LatencyProblem(rwnn(3, size=6, seed=0), rwnn_devices(), output_bytes="comm")
    start = heft(p)
    slow_rows(monkeypatch)
    s, wall = timed(sc.place, p, method="split", time_limit=1.0, threads=1)
    assert wall < 1.0 + SLACK
    assert s.status == "time_limit" and s.objective is not None
    assert s.objective <= start.objective * (1 + 1e-6)
    assert rescored(p, s) == pytest.approx(s.objective)


def test_auto_with_a_planted_slow_milp_build_ends_soon_after_the_limit(monkeypatch):
    # small enough that auto runs the whole MILP after its searches: the MILP's build is slow
    # (seed 2: not proven optimal by the bounds or the searches, so the MILP phase runs; the
    # skip-path bound proves seed 0's answer optimal)
    g = sc.random_dag(12, edge_prob=0.3, seed=2)
    p = LatencyProblem(g, Devices.pcie_star(2), output_bytes="comm")
    assert len(p) * p.num_devices <= solve_mod.AUTO_MILP_SIZE
    added = slow_rows(monkeypatch, seconds=0.05)
    s, wall = timed(sc.place, p, method="auto", time_limit=6.0)
    assert wall < 6.0 + SLACK
    # (on an idle machine the slowed MILP may still finish and prove its answer: then it says so)
    assert s.objective is not None and s.status in ("time_limit", "optimal")
    if s.status == "optimal":
        assert s.lower_bound == pytest.approx(s.objective)
    assert s.objective <= heft(p).objective * (1 + TOL)
    assert rescored(p, s) == pytest.approx(s.objective)
    phases = next(n for n in s.notes if n.startswith("phases: "))
    assert "milp" in phases and added["rows"] > 0


def test_auto_with_a_planted_slow_quickp_build_ends_soon_after_the_limit(monkeypatch):
    # a training graph that fusion shrinks to a few percent: auto runs QuickP, whose IP build is slow
    # (the bounds phase gets the problem's simple bound: the memory-aware bounds cost seconds of CPU
    # on this graph, and this test is about QuickP's build)
    p = training_problem()
    monkeypatch.setattr(bounds_mod, "best_bound", lambda q: bounds_mod.LatencyBound(q.lower_bound(), "simple"))
    # (a few quick constructive methods, so that QuickP's phase has its time on a loaded machine too)
    monkeypatch.setattr(solve_mod, "CONSTRUCTIVE", ("best-device", "heft", "greedy"))
    added = slow_rows(monkeypatch)
    s, wall = timed(sc.place, p, method="auto", time_limit=6.0)
    assert wall < 6.0 + SLACK
    phases = next(n for n in s.notes if n.startswith("phases: "))
    assert "quickp" in phases and added["rows"] > 0
    assert s.status == "time_limit" and s.objective <= heft(p).objective * (1 + TOL)
    assert rescored(p, s) == pytest.approx(s.objective)


def test_milp_refuses_a_model_past_its_row_cap_and_returns_its_start(monkeypatch):
    # (a 10,000-node operator graph would need tens of millions of disjunctive rows: refused
    # before they are allocated; here the cap is lowered instead)
    from stagecut.latency.exact import milp as milp_mod

    p = random_problem()
    start = heft(p)
    monkeypatch.setattr(milp_mod, "MAX_PAIR_ROWS", 10)
    flushed = []
    monkeypatch.setattr(RowSink, "flush", lambda self, m, *check: flushed.append(len(self)))
    s = sc.place(p, method="milp", time_limit=30.0, start=start)
    assert flushed == []
    assert s.status == "feasible" and any("model is too large" in n for n in s.notes)
    assert s.objective <= start.objective * (1 + TOL)
    assert rescored(p, s) == pytest.approx(s.objective)
    assert s.lower_bound <= s.objective


def test_auto_gives_its_bounds_a_share_of_the_limit(monkeypatch):
    # the bounds run under their own deadline (a bound that checks the clock stops there), so
    # that a slow bound on a large graph leaves the searches most of the limit
    from stagecut._deadline import remaining

    seen = []

    def spy(q):
        seen.append(remaining())
        return bounds_mod.LatencyBound(q.lower_bound(), "simple")

    monkeypatch.setattr(bounds_mod, "best_bound", spy)
    sc.place(random_problem(), method="auto", time_limit=4.0)
    assert len(seen) == 1 and seen[0] is not None
    assert seen[0] <= solve_mod.AUTO_BOUND_SHARE * 4.0 + 1e-6


@pytest.mark.parametrize("seed", range(3))
def test_milp_built_in_small_blocks_has_the_same_optimum(monkeypatch, seed):
    # the pair rows are built a block of nodes at a time: one node per block gives the same model
    from stagecut.latency.exact import milp as milp_mod

    p = LatencyProblem(sc.random_dag(8, edge_prob=0.25, seed=seed), Devices.pcie_star(2), output_bytes="comm")
    whole = milp_mod.solve_milp(p, time_limit=60)
    monkeypatch.setattr(milp_mod, "PAIR_BLOCK", 1)
    blocks = milp_mod.solve_milp(p, time_limit=60)
    assert whole.status == blocks.status == "optimal"
    assert blocks.objective == pytest.approx(whole.objective)
    assert blocks.stats["mip_pairs"] == whole.stats["mip_pairs"] > 0


def test_row_sink_flush_stops_when_its_check_raises():
    from stagecut._mip import new_model

    m = new_model("t", solver="cbc")
    xs = m.vars.add_vars(3, name="x")
    rows = RowSink()
    for k in range(10_000):
        rows.add([xs[0].idx, xs[1].idx], [1.0, float(k % 7)], "<", 100.0)
    calls = []

    class Stop(Exception):
        pass

    def check():
        calls.append(1)
        if len(calls) == 2:
            raise Stop

    with pytest.raises(Stop):
        rows.flush(m, check)
    assert 0 < m.solver.num_rows() < 10_000


def test_quickp_stops_handing_rows_to_the_solver_when_the_deadline_passes_during_the_flush(monkeypatch):
    # the deadline passes as the IP's rows are handed to CBC: the flush stops at its first check
    # (almost no rows reach the solver), the IP is never solved, the answer is the best start
    from stagecut._deadline import expired

    QPmod = __import__("stagecut.latency.quickp.ip", fromlist=["quickp"])
    p = training_problem()
    late = {"now": False}
    monkeypatch.setattr(QPmod, "expired", lambda: late["now"] or expired())
    real_flush = RowSink.flush
    reached = []

    def flush(self, m, *check):
        total = len(self)
        late["now"] = True
        try:
            real_flush(self, m, *check)
        finally:
            reached.append((m.solver.num_rows(), total))

    monkeypatch.setattr(RowSink, "flush", flush)
    monkeypatch.setattr(QPmod, "solve", lambda *a, **k: pytest.fail("solved after the deadline"))
    s = quickp(p, time_limit=600, threads=1)
    assert len(reached) == 1
    rows, total = reached[0]
    assert total > 1000 and rows <= 10
    assert s.status == "time_limit" and s.stats["built"] == 0
    assert rescored(p, s) == pytest.approx(s.objective)


def long_chain(n=2100):
    """A chain longer than the bounds' SMALL (the memory-path programme looks at the deadline)."""
    assert n > bounds_mod.SMALL
    costs = [1.0 + (v % 7) for v in range(n)]
    g = sc.Graph.chain(costs, memory=1.0, comm=0.5)
    return LatencyProblem(g, Devices.pcie_star(2, memory=0.6 * n), output_bytes="comm")


class _SlowNumpy:
    """numpy as the bounds module sees it, with one slow step in the memory-path programme's
    inner loop (planted: every ``fill_diagonal`` sleeps)."""

    def __init__(self, seconds):
        import numpy

        self._np, self._seconds, self.calls = numpy, seconds, 0
        self.first: tuple[float | None, float] | None = None  # (the deadline's time left, the clock) at the first call

    def fill_diagonal(self, *args, **kwargs):
        if self.first is None:
            from stagecut._deadline import remaining

            self.first = (remaining(), time.perf_counter())
        self.calls += 1
        time.sleep(self._seconds)
        return self._np.fill_diagonal(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._np, name)


def test_memory_path_bound_stops_itself_at_a_deadline(monkeypatch):
    # unchecked, the programme over the 2,000-node stretch would take 2,000 x 20 ms = 40 s
    from stagecut._deadline import deadline

    p = long_chain()
    slow = _SlowNumpy(0.02)
    monkeypatch.setattr(bounds_mod, "np", slow)
    with deadline(2.5):  # (long enough that a loaded machine still reaches the slowed programme)
        b, wall = timed(bounds_mod.latency_bound, p)
    assert wall < 2.5 + SLACK
    assert 0 < slow.calls < 1000
    assert b.value <= heft(p).objective * (1 + TOL)   # (what was cut short adds nothing: still a bound)


def test_auto_runs_its_bounds_under_their_deadline_without_a_thread(monkeypatch):
    # the bound stops itself at its share of the limit: no helper thread is left running
    import threading

    p = long_chain()
    slow = _SlowNumpy(0.02)
    monkeypatch.setattr(bounds_mod, "np", slow)
    # (so that the bounds' share reaches the slowed programme however loaded the machine: the
    # device-path bound before it is stubbed out, and the share is half the time left, not 15%)
    monkeypatch.setattr(bounds_mod, "device_path_bound", lambda problem, tr: 0.0)
    monkeypatch.setattr(solve_mod, "AUTO_BOUND_SHARE", 0.5)
    before = threading.active_count()
    t0 = time.perf_counter()
    s, wall = timed(sc.place, p, method="auto", time_limit=6.0)
    assert threading.active_count() == before
    assert 0 < slow.calls < 1000
    # the slowed programme ran under the bounds' own deadline (half the time left, at least 0.5 s),
    # not only under auto's whole limit (an allowance for auto's own clock, read after ``t0``)
    assert slow.first is not None
    left, now = slow.first
    auto_left = t0 + 6.0 - now
    assert left is not None and left <= max(0.5, 0.5 * auto_left) + 0.25 * auto_left + 0.05
    assert wall < 6.0 + SLACK
    assert s.objective <= heft(p).objective * (1 + TOL) and s.lower_bound <= s.objective
    assert rescored(p, s) == pytest.approx(s.objective)


def slow_memory_aware_starts(monkeypatch, seconds=1.5):
    """Every memory-aware constructive heuristic sleeps first; returns the names of those called."""
    from stagecut.latency.heuristics import memaware

    called = []
    for name in ("m_heft", "m_greedy", "m_topo", "m_chain", "pcie_asap"):
        real = getattr(memaware, name)

        def slow(q, real=real, name=name):
            called.append(name)
            time.sleep(seconds)
            return real(q)

        monkeypatch.setattr(memaware, name, slow)
    return called


@pytest.mark.parametrize("method", ["sa", "ea", "local", "lns"])
def test_search_starts_share_the_time_limit(monkeypatch, method):
    # the constructive starts run cheapest first under the search's own limit: once it has passed,
    # no further (slow) start is built, and the search returns the best start it has
    p = random_problem()
    h = heft(p)
    # (the plain starts get 40% of 2 s to finish, a wide margin on a loaded machine; the first slow
    # start then runs past the whole limit, so no second one is begun)
    called = slow_memory_aware_starts(monkeypatch, seconds=2.5)
    s, wall = timed(sc.place, p, method=method, time_limit=2.0)
    assert len(called) == 1, called
    assert wall < 2.0 + SLACK
    assert s.status == "time_limit" and s.objective <= h.objective * (1 + TOL)
    assert rescored(p, s) == pytest.approx(s.objective)


def test_search_without_a_limit_still_builds_every_start(monkeypatch):
    p = random_problem()
    called = slow_memory_aware_starts(monkeypatch, seconds=0.0)
    sc.place(p, method="local", max_evaluations=10)
    assert sorted(called) == sorted(["m_heft", "m_greedy", "m_topo", "m_chain", "pcie_asap"])


def slow_plain_starts(monkeypatch, seconds=1.5):
    """The plain constructive heuristics but best-device sleep first; returns the names of those called."""
    from stagecut.latency.heuristics import constructive

    called = []
    for name in ("met", "greedy", "heft"):
        real = getattr(constructive, name)

        def slow(q, real=real, name=name):
            called.append(name)
            time.sleep(seconds)
            return real(q)

        monkeypatch.setattr(constructive, name, slow)
    return called


def test_split_start_shares_the_time_limit(monkeypatch):
    p = LatencyProblem(rwnn(3, size=6, seed=0), rwnn_devices(), output_bytes="comm")
    # (the start is the better of best-device and greedy, the only ones built before the limit)
    first = min(x.objective for x in (sc.place(p, method="greedy"), sc.place(p, method="best-device"))
                if x.objective is not None)
    called = slow_plain_starts(monkeypatch)
    s, wall = timed(sc.place, p, method="split", time_limit=1.0, threads=1)
    assert called == ["greedy"]
    assert wall < 1.0 + SLACK
    assert s.status == "time_limit" and s.objective is not None
    assert s.objective <= first * (1 + 1e-6)
    assert rescored(p, s) == pytest.approx(s.objective)


def test_milp_builds_no_further_start_past_its_deadline(monkeypatch):
    # the bound takes the whole limit (planted: it sleeps past it); the given start fits, so the
    # (planted: slow) greedy start is not built, and the start is returned soon after the limit
    from stagecut.latency.exact import milp as milp_mod

    p = random_problem()
    start = heft(p)

    def late_bound(q):
        time.sleep(1.5)
        return bounds_mod.LatencyBound(q.lower_bound(), "simple")

    called = []

    def slow_greedy(q):
        called.append(1)
        time.sleep(30)

    monkeypatch.setattr(milp_mod, "best_bound", late_bound)
    monkeypatch.setattr(milp_mod, "greedy_schedule", slow_greedy)
    s, wall = timed(sc.place, p, method="milp", time_limit=1.0, start=start)
    assert called == []
    assert wall < 1.0 + SLACK
    assert s.status == "time_limit" and s.objective <= start.objective * (1 + TOL)
    assert rescored(p, s) == pytest.approx(s.objective)


def test_milp_with_a_slow_bound_on_a_large_graph_ends_soon_after_its_limit(monkeypatch):
    p = long_chain()
    slow = _SlowNumpy(0.02)
    monkeypatch.setattr(bounds_mod, "np", slow)
    s, wall = timed(sc.place, p, method="milp", time_limit=2.0)
    assert 0 < slow.calls < 1000
    assert wall < 2.0 + SLACK
    assert s.objective is not None and s.status == "time_limit"
    assert rescored(p, s) == pytest.approx(s.objective)
