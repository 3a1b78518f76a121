"""MIP progress (issue 15, item 6; :mod:`stagecut._mip`): what phase ``"mip"`` reports per solver.

* HiGHS: the incumbent's cost (``best``, never increasing) and the dual bound (``bound``, never
  decreasing, never above ``best``) while it solves, in the caller's units (``scale``); the
  final report is the outcome's objective and bound;
* CBC: the MIP start's cost until the solve ends, then the outcome's;
* without ``scale`` neither (model units mean nothing to the caller); reports change nothing
  in the outcome.
"""

import random

import pytest

import stagecut as sc
from stagecut import _mip
from stagecut import progress as pg
from stagecut.latency import Devices, LatencyProblem
from stagecut.progress import reporting

mip = _mip.import_mip()


def cover_model(solver, n=50, rows=40, seed=1):
    """A set-multicover MIP HiGHS needs a few tenths of a second for (its root bound is well
    below its optimum), and the all-ones start, which is feasible."""
    rng = random.Random(seed)
    m = _mip.new_model("cover", solver=solver)
    x = [m.add_var(var_type=mip.BINARY) for _ in range(n)]
    for _ in range(rows):
        m += mip.xsum(rng.randint(1, 30) * x[j] for j in range(n)) >= 300
    m.objective = mip.xsum(rng.randint(10, 60) * x[j] for j in range(n))
    return m, [(v, 1.0) for v in x]


def solve_reported(solver, scale, start=True, time_limit=20.0):
    m, ones = cover_model(solver)
    events = []
    with reporting(events.append):
        out = _mip.solve(m, time_limit=time_limit, start=ones if start else None, scale=scale)
    return m, ones, out, [e for e in events if e.phase == "mip"]


@pytest.fixture
def every_poll(monkeypatch):
    monkeypatch.setattr(pg, "REPORT_EVERY", 0.0)  # a report at every 50 ms poll of the solver


@pytest.mark.usefixtures("every_poll")
def test_highs_reports_its_incumbent_and_bound_while_it_solves():
    _m, _ones, out, events = solve_reported("highs", scale=2.0)
    *running, last = events
    assert out.status == "optimal"
    assert last.final and last.best == out.objective * 2.0 and last.bound == out.bound * 2.0
    with_bound = [e for e in running if e.bound is not None]
    assert len(with_bound) >= 2  # the callbacks worked: bounds before the end
    bests = [e.best for e in running if e.best is not None]
    bounds = [e.bound for e in with_bound]
    assert bests == sorted(bests, reverse=True) and bounds == sorted(bounds)
    assert all(e.bound <= e.best for e in with_bound if e.best is not None)
    assert bounds[0] < last.bound  # the bound rose during the solve: it is read live, not only at the end
    # solved to optimality: every incumbent costs at least the optimum, every bound at most
    assert all(b >= last.best - 1e-6 for b in bests) and all(b <= last.best + 1e-6 for b in bounds)


@pytest.mark.usefixtures("every_poll")
def test_cbc_reports_the_start_cost_then_the_outcome():
    m, ones, out, events = solve_reported("cbc", scale=0.5)
    *running, last = events
    start_cost = sum(m.objective.expr[v] for v, _ in ones) * 0.5
    assert running and all(e.best == start_cost and e.bound is None for e in running)
    assert last.final and last.best == out.objective * 0.5 < start_cost
    assert last.bound == out.bound * 0.5


@pytest.mark.usefixtures("every_poll")
@pytest.mark.parametrize("solver", ["cbc", "highs"])
def test_without_scale_only_seconds(solver):
    _m, _ones, out, events = solve_reported(solver, scale=None)
    assert out.status == "optimal" and events[-1].final
    assert all(e.best is None and e.bound is None for e in events)
    dones = [e.done for e in events]
    assert dones == sorted(dones) and {e.total for e in events} == {20.0}


@pytest.mark.parametrize("solver", ["cbc", "highs"])
def test_reports_change_nothing_in_the_outcome(solver):
    m, ones = cover_model(solver)
    plain = _mip.solve(m, time_limit=20.0, start=ones, scale=1.0)
    _m, _ones, reported, events = solve_reported(solver, scale=1.0)
    assert events and reported.status == plain.status == "optimal"
    assert reported.objective == plain.objective and reported.bound == plain.bound
    assert not hasattr(m, "_stagecut_progress_callback")  # no callback without a progress= call


@pytest.mark.parametrize("solver", ["cbc", "highs"])
def test_place_milp_reports_in_seconds_of_the_problem(solver):
    # the latency MILP gives its scale: the final MIP report is its objective in the problem's units
    p = LatencyProblem(sc.regal_graph(7, seed=3), Devices.pcie_star(2))
    events = []
    s = sc.latency.place(p, method="milp", solver=solver, time_limit=30, progress=events.append)
    mine = [e for e in events if e.phase == "mip"]
    assert mine and mine[-1].final
    assert mine[-1].best == pytest.approx(s.stats["mip_objective"], rel=1e-12)
    assert mine[-1].best == pytest.approx(s.objective, rel=1e-4)
