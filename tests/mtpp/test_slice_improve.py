"""``slice_graph(..., improve=...)`` and ``certify(..., improve=...)``: the search's plan, then
exact re-splits of two blocks at a time (``improve_plan``).

- never worse than the search's own plan (``improve=False`` with the same seed), re-scored by the
  evaluator, never below the exact optimum, ``found_by`` naming the part that found it;
- a re-split step that lies (its plan costs more than it claims) cannot make the answer worse;
- the step runs inside the call's time limit; bad values are refused.
"""

from __future__ import annotations

import time

import pytest
from tests.mtpp.test_combinatorial import random_problem

import stagecut as sc
from stagecut.errors import InvalidArgumentError
from stagecut.mtpp import improve as improve_module
from stagecut.mtpp.certify import certify
from stagecut.mtpp.model import MtppProblem, evaluate
from stagecut.mtpp.slicegraph import SlicePlan, slice_graph


@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
def test_never_worse_than_the_search_rescored_and_never_below_the_optimum():
    gained = 0
    for seed in range(60):
        p = random_problem(seed, n_max=10, k_max=5)
        plain = slice_graph(p, method="random", seed=seed, decodes=1, improve=False)
        plan = slice_graph(p, method="random", seed=seed, decodes=1)
        if plain.objective is None:
            continue
        assert plan.stats["start_objective"] == plain.objective  # the same search, then the re-splits
        assert plan.objective is not None and plan.objective <= plain.objective
        assert evaluate(p, plan.stages).objective == plan.objective
        opt = slice_graph(p, method="dp").objective
        assert opt is not None and plan.objective >= opt * (1 - 1e-12)
        assert plan.stats["found_by"] == ("improve" if plan.objective < plain.objective else "random")
        assert sorted(plan.order, key=str) == sorted(p.graph.ids, key=str)
        at = {v: r for r, v in enumerate(plan.order)}
        assert all(at[a] < at[b] for a, b in p.graph.edges)  # a topological order
        assert [s.index for s in plan.stages] == list(range(len(plan.stages)))
        gained += plan.objective < plain.objective
    assert gained >= 3  # (the step does something on these: one random order is a weak plan)


def test_defaults_per_method_and_found_by():
    g = sc.regal_graph(60, seed=3)
    brkga = slice_graph(g, devices=8, seed=0, decodes=300)
    assert brkga.stats["found_by"] in ("brkga", "improve") and "start_objective" in brkga.stats
    order = slice_graph(g, devices=8, method="order")
    assert "found_by" not in order.stats  # the slicing of one order, as asked
    forced = slice_graph(g, devices=8, method="order", improve=True)
    assert forced.objective is not None and order.objective is not None
    assert forced.objective <= order.objective and forced.stats["found_by"] in ("order", "improve")
    small = sc.Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5)
    dp = slice_graph(small, devices=2, method="dp", improve=5)
    assert dp.status == "optimal" and dp.stats["found_by"] == "dp" and dp.stats["improve_moves"] == 0


def test_a_lying_step_cannot_make_the_answer_worse(monkeypatch):
    """A planted bug in the re-split step: it returns the worst single-block-per-node-ish plan
    while claiming a cost of 0; slice_graph re-scores it and keeps the search's plan."""
    p = MtppProblem(sc.regal_graph(40, seed=1), devices=4)
    plain = slice_graph(p, seed=0, decodes=200, improve=False)

    def liar(problem, plan, *, time_limit=None, **kw):
        worse = evaluate(problem, [list(problem.graph.ids)])  # one block: everything on one device
        return SlicePlan(objective=0.0, status="feasible", method="improve", stages=worse.stages,
                         devices=problem.devices, notes=("no re-split of two blocks improves it",),
                         stats={"moves": 1})

    monkeypatch.setattr(improve_module, "improve_plan", liar)
    plan = slice_graph(p, seed=0, decodes=200)
    assert plan.objective == plain.objective and plan.stats["found_by"] == "brkga"
    assert [s.nodes for s in plan.stages] == [s.nodes for s in plain.stages]


def test_the_step_runs_inside_the_time_limit():
    p = MtppProblem(sc.regal_graph(120, seed=1), devices=16)
    c0 = time.process_time()
    plan = slice_graph(p, seed=0, decodes=10**7, time_limit=1.5, improve=60)
    assert time.process_time() - c0 < 30  # (CPU: generous; the wall limit is checked by the stats below)
    assert plan.objective is not None and plan.status in ("time_limit", "optimal")
    assert plan.objective <= plan.stats["start_objective"]
    assert plan.stats["found_by"] in ("brkga", "improve")
    assert 0 <= plan.stats["improve_limit_s"] <= 1.5  # the step's 60 s were cut to what the limit left


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "2"])
def test_bad_improve_values(bad):
    with pytest.raises(InvalidArgumentError, match="improve"):
        slice_graph(sc.Graph.chain([1.0, 1.0]), devices=2, improve=bad)


def test_certify_the_improved_plan_when_asked():
    p = MtppProblem(sc.regal_graph(60, seed=3), devices=8)
    start = slice_graph(p, method="random", seed=0, decodes=5, improve=False)
    plain = certify(p, start, levels=("simple", "node-cut"), time_limit=30)
    better = certify(p, start, levels=("simple", "node-cut"), time_limit=30, improve=10)
    assert plain.objective == start.objective and "found_by" not in plain.stats
    assert better.objective is not None and start.objective is not None
    assert better.objective < start.objective  # 5 random orders: the re-splits find better
    assert better.stats["found_by"] == "improve" and better.stats["start_objective"] == start.objective
    assert evaluate(p, better.stages).objective == better.objective
    assert better.lower_bound is not None and better.lower_bound <= better.objective
    assert any("re-splits" in n for n in better.notes)


def test_cli_slice_improve_flags(capsys):
    import json

    from stagecut.cli.main import main

    def run(*argv: str) -> dict:
        capsys.readouterr()
        assert main(["slice", "regal:60:erdos_renyi:3", "-k", "8", "--method", "random", "--decodes", "2",
                     "--json", *argv]) == 0
        return json.loads(capsys.readouterr().out)

    plain, default, longer = run("--no-improve"), run(), run("--improve", "30")
    assert "found_by" not in plain["stats"]
    for d in (default, longer):
        assert d["stats"]["start_objective"] == plain["objective"] and d["objective"] <= plain["objective"]
    assert longer["stats"]["found_by"] == "improve" and longer["objective"] < plain["objective"]
    capsys.readouterr()
    assert main(["slice", "regal:60:erdos_renyi:3", "-k", "8", "--improve", "0"]) == 2
    assert "--improve" in capsys.readouterr().err
    assert main(["slice", "regal:60:erdos_renyi:3", "-k", "8", "--improve", "3", "--no-improve"]) == 2
    assert "not allowed with" in capsys.readouterr().err


class _SlowClock:
    """``time`` as the improve module sees it, with a monotonic clock that jumps a second at
    every read: a very slow machine (the other clocks are the real ones)."""

    def __init__(self):
        self.now = time.monotonic()

    def monotonic(self):
        self.now += 1.0
        return self.now

    def __getattr__(self, name):
        return getattr(time, name)


def test_the_default_re_splits_are_capped_by_work_not_time(monkeypatch):
    # the same seed gives the same plan however slow the machine: without a time limit the default
    # step stops at a local optimum or at IMPROVE_WINDOWS windows, never at a clock
    g = sc.regal_graph(200, seed=2)
    plain = slice_graph(g, devices=8, seed=3, improve=False)
    fast = slice_graph(g, devices=8, seed=3)
    assert fast.objective < plain.objective and fast.stats["found_by"] == "improve"
    assert fast.stats["improve_windows"] == improve_module.IMPROVE_WINDOWS
    assert fast.stats["improve_limit_s"] is None
    monkeypatch.setattr(improve_module, "time", _SlowClock())
    slow = slice_graph(g, devices=8, seed=3)
    assert slow.objective == fast.objective
    assert [s.nodes for s in slow.stages] == [s.nodes for s in fast.stages]
    # an explicit number of seconds is a time budget: on the slow clock it stops at once
    timed = slice_graph(g, devices=8, seed=3, improve=2.0)
    assert timed.objective == plain.objective and timed.stats["found_by"] == "brkga"


def test_improve_plan_stops_at_its_window_cap():
    p = MtppProblem(sc.regal_graph(200, seed=2), devices=8)
    start = slice_graph(p, seed=3, improve=False)
    free = improve_module.improve_plan(p, start, time_limit=None)
    assert free.stats["windows"] > 5 and not free.stats["window_limit_reached"]
    capped = improve_module.improve_plan(p, start, time_limit=None, max_windows=5)
    assert capped.stats["windows"] == 5 and capped.stats["window_limit_reached"]
    assert free.objective <= capped.objective <= start.objective
    assert any("max_windows" in n for n in capped.notes)
    with pytest.raises(InvalidArgumentError, match="max_windows"):
        improve_module.improve_plan(p, start, max_windows=0)
