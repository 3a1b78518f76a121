"""``slice_graph(..., restarts=...)``: more seeded searches (each with its re-splits), the
cheapest plan kept.

- ``restarts=n`` is the best of the ``n + 1`` single runs from seeds ``seed .. seed + n`` (the
  first on ties), deterministic, re-scored by the evaluator, never worse than the first run;
- ``"auto"`` runs them while the time left is at least the quickest run (a fake clock), needs a
  time limit, and says ``"time_limit"`` when time stopped them; none runs once a plan is proven
  optimal or infeasible;
- bad values and methods with no seed are refused (the CLI: one line, exit 2).
"""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

import stagecut as sc
from helpers import record_runs
from stagecut.errors import InvalidArgumentError
from stagecut.mtpp import restarts as restarts_module
from stagecut.mtpp import slicegraph as slicegraph_module
from stagecut.mtpp.model import MtppProblem, evaluate
from stagecut.mtpp.slicegraph import slice_graph


def _problem() -> MtppProblem:
    return MtppProblem(sc.regal_graph(80, model="watts_strogatz", seed=1), devices=8)


def test_the_best_of_the_single_runs_and_whose_it_is(monkeypatch):
    p = _problem()
    singles = [slice_graph(p, seed=s, decodes=300) for s in range(5, 10)]
    costs = [s.objective for s in singles]
    assert len(set(costs)) > 1  # (the seeds disagree here, or the test proves nothing)
    assert all(s.stats["restarts"] == 0 for s in singles)
    seeds = record_runs(monkeypatch, lambda opts: opts.seed)
    plan = slice_graph(p, seed=5, decodes=300, restarts=4)
    assert seeds == [5, 6, 7, 8, 9]
    win = costs.index(min(costs))  # the first seed to reach the least cost
    assert plan.objective == min(costs) and plan.seed == 5 + win
    assert [s.nodes for s in plan.stages] == [s.nodes for s in singles[win].stages]  # that seed's plan, as alone
    assert plan.stats["restarts"] == 4 and plan.status == "feasible"
    assert plan.stats["restart_decodes"] == sum(s.stats["decodes"] for s in singles)
    assert evaluate(p, plan.stages).objective == plan.objective
    assert any("4 of 4 restart(s) from seed 6" in n and f"seed {plan.seed}'s" in n for n in plan.notes)
    seeds.clear()
    assert slice_graph(p, seed=5, decodes=300, restarts=0).objective == costs[0] and seeds == [5]


def test_ties_keep_the_first_seed_and_seeds_wrap():
    g = sc.Graph.chain([5.0, 1.0, 1.0, 1.0, 5.0, 1.0], comm=0.5)  # every seed finds the one optimum
    plan = slice_graph(g, devices=2, seed=2**64 - 2, restarts=3)
    assert plan.status == "feasible" and plan.stats["restarts"] == 3  # (the tensor keeps it off the bound)
    assert plan.seed == 2**64 - 2 and plan.objective == slice_graph(g, devices=2, method="dp").objective
    assert any("from seed 18446744073709551615 on" in n for n in plan.notes)


def test_never_worse_than_the_first_run():
    for seed in range(6):
        p = MtppProblem(sc.regal_graph(40, seed=seed), devices=4)
        first = slice_graph(p, method="random", seed=seed, decodes=3)
        more = slice_graph(p, method="random", seed=seed, decodes=3, restarts=3)
        assert first.objective is not None and more.objective is not None
        assert more.objective <= first.objective


@dataclasses.dataclass(frozen=True)
class _Opts:
    method: str = "brkga"
    seed: int = 0


class _Clock:
    """``remaining()`` as the restart loop sees it: ``left`` seconds, less ``step`` at each read."""

    def __init__(self, left: float, step: float):
        self.left, self.step, self.reads = left, step, 0

    def __call__(self) -> float:
        self.reads += 1
        assert self.reads < 50, "the restarts go on with no time left"
        self.left = max(0.0, self.left - self.step)
        return self.left


def test_auto_runs_while_the_time_left_covers_the_quickest_run(monkeypatch):
    p = _problem()
    clock = _Clock(left=1e6, step=2e5)  # 800000, 600000, ... then 0: four restarts fit, not five
    monkeypatch.setattr(restarts_module, "remaining", clock)
    plan = slice_graph(p, seed=0, decodes=200, improve=False, time_limit=1e7, restarts="auto")
    assert plan.stats["restarts"] == 4 and clock.reads == 5
    assert plan.status == "time_limit" and any("shorter than the quickest run" in n for n in plan.notes)
    # a cap below what the time allows is the cap (and the status is the plan's own)
    monkeypatch.setattr(restarts_module, "remaining", _Clock(left=1e6, step=2e5))
    capped = slice_graph(p, seed=0, decodes=200, improve=False, time_limit=1e7, restarts=2)
    assert capped.stats["restarts"] == 2 and capped.status == "feasible"
    # time left, but less than a run takes: none starts
    monkeypatch.setattr(restarts_module, "remaining", _Clock(left=1e-9, step=0.0))
    none = slice_graph(p, seed=0, decodes=200, improve=False, time_limit=1e7, restarts="auto")
    assert none.stats["restarts"] == 0 and none.status == "time_limit"
    assert none.objective == slice_graph(p, seed=0, decodes=200, improve=False).objective


def test_auto_keeps_time_to_polish_the_cheapest_plan(monkeypatch):
    p = _problem()
    polished = []

    def spy(problem, plan, seed, t0):
        polished.append((plan.objective, seed))
        return plan

    monkeypatch.setattr(slicegraph_module, "polish", spy)
    # reads 800000, 600000, ...: with 300000 s kept (the improve budget, under a fifth of the limit)
    # the restarts stop at 200000 left (three restarts), where without it four fit
    monkeypatch.setattr(restarts_module, "remaining", _Clock(left=1e6, step=2e5))
    plan = slice_graph(p, seed=0, decodes=200, improve=3e5, time_limit=1e7, restarts="auto")
    assert plan.stats["restarts"] == 3 and polished == [(plan.objective, 0)]
    # improve=False: nothing kept, no polish
    monkeypatch.setattr(restarts_module, "remaining", _Clock(left=1e6, step=2e5))
    plan = slice_graph(p, seed=0, decodes=200, improve=False, time_limit=1e7, restarts="auto")
    assert plan.stats["restarts"] == 4 and len(polished) == 1
    # a number of restarts: no polish either
    plan = slice_graph(p, seed=0, decodes=200, improve=1.0, time_limit=1e7, restarts=1)
    assert len(polished) == 1


def test_each_run_ends_before_the_time_kept(monkeypatch):
    """A run is given the time left less the time kept, and its deadline says the same (a run that
    takes all it is given cannot eat into the polish)."""
    from stagecut._deadline import remaining as real_remaining

    monkeypatch.setattr(restarts_module, "remaining", _Clock(left=100.0, step=10.0))
    seen = []
    first = slice_graph(_problem(), seed=0, decodes=50, improve=False)

    def run(opts, left, start):
        seen.append((left, real_remaining()))
        return first

    restarts_module.restart(run, restarts_module.run_options(_Opts(), 0), first, 3, time.perf_counter(),
                            reserve=25.0)
    assert [x[0] for x in seen] == [65.0, 55.0, 45.0]  # (90, 80, 70 left, less 25)
    assert all(r is not None and r <= left for left, r in seen)


def test_the_polish_is_never_worse_and_says_so(monkeypatch):
    p = MtppProblem(sc.regal_graph(150, model="erdos_renyi", seed=1), devices=8)
    seen = []
    real = slicegraph_module.polish

    def spy(problem, plan, seed, t0):
        out = real(problem, plan, seed, t0)
        seen.append((plan, out))
        return out

    monkeypatch.setattr(slicegraph_module, "polish", spy)
    plan = slice_graph(p, method="mla", seed=0, decodes=100, time_limit=3.0, improve=0.6, restarts="auto")
    (before, after), = seen
    assert after.objective <= before.objective and plan.objective == after.objective
    assert evaluate(p, plan.stages).objective == plan.objective
    assert isinstance(plan.stats["polish_kicks"], int)
    lowered = any("kicks and moves of single groups" in n for n in plan.notes)
    assert lowered == (plan.stats["found_by"] == "polish") == (after.objective < before.objective)


def test_no_restart_once_a_plan_is_proven(monkeypatch):
    g = sc.Graph.chain([1.0] * 8, comm=0.0)  # blocks of two: every plan meets the average bound
    plan = slice_graph(g, devices=4, restarts=5)
    assert plan.status == "optimal" and plan.stats["restarts"] == 0
    heavy = sc.Graph.chain([1.0, 1.0, 1.0], memory=[4.0, 4.0, 4.0])
    none = slice_graph(heavy, devices=2, memory=3.0, restarts=5)  # no node fits: proven infeasible
    assert none.status == "infeasible" and none.stats["restarts"] == 0
    # a restart whose plan is proven optimal ends them
    real = slicegraph_module._run

    def proven_at_seed_2(problem, units, opts, *args):
        plan = real(problem, units, opts, *args)
        return dataclasses.replace(plan, status="optimal") if opts.seed == 2 else plan

    monkeypatch.setattr(slicegraph_module, "_run", proven_at_seed_2)
    p = _problem()
    stopped = slice_graph(p, seed=0, decodes=200, restarts=10)
    assert stopped.stats["restarts"] == 2 and any("proven optimal" in n for n in stopped.notes)


@pytest.mark.parametrize(("kw", "match"), [
    (dict(restarts="auto"), "time_limit"),
    (dict(restarts=-1), "restarts"),
    (dict(restarts=1.5), "restarts"),
    (dict(restarts="all", time_limit=5), "'auto'"),
    (dict(restarts=True), "restarts"),
    (dict(restarts=2**33), "restarts"),
    (dict(restarts=2, method="dp"), "seeded"),
    (dict(restarts=1, method="order"), "seeded"),
])
def test_bad_restarts(kw, match):
    with pytest.raises(InvalidArgumentError, match=match):
        slice_graph(sc.Graph.chain([1.0, 2.0, 3.0]), devices=2, **kw)


def test_cli_restarts(capsys):
    from stagecut.cli.main import main

    capsys.readouterr()
    assert main(["slice", "regal:60:watts_strogatz:1", "-k", "8", "--decodes", "200", "--seed", "5",
                 "--restarts", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    g = sc.regal_graph(60, model="watts_strogatz", seed=1)
    assert out["stats"]["restarts"] == 2 and out["seed"] in (5, 6, 7)
    assert out["objective"] == min(slice_graph(g, devices=8, seed=s, decodes=200).objective for s in (5, 6, 7))
    for argv, said in [(["--restarts", "auto"], "--time-limit"), (["--restarts", "x"], "count"),
                       (["--restarts", str(2**40)], "2**32"),
                       (["--restarts", "2", "--method", "dp"], "--restarts")]:
        assert main(["slice", "regal:20", "-k", "4", *argv]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1


def _spy_runs(monkeypatch) -> list[tuple[str, int]]:
    runs = record_runs(monkeypatch, lambda opts: (opts.method, opts.seed))
    return runs


def test_auto_is_the_cheapest_of_its_searches_and_names_it(monkeypatch):
    p = _problem()  # (80 nodes: too few for the multilevel search, which auto leaves out)
    portfolio = [m for m in slicegraph_module.PORTFOLIO if m != "multilevel"]
    parts = {m: slice_graph(p, method=m, seed=3 + i, decodes=300) for i, m in enumerate(portfolio)}
    costs = [parts[m].objective for m in portfolio]
    runs = _spy_runs(monkeypatch)
    plan = slice_graph(p, method="auto", seed=3, decodes=300)
    assert runs == [("spectral-order", 3), ("mla-weighted", 4), ("brkga", 5), ("mla", 6)]
    win = portfolio[costs.index(min(costs))]  # the first to reach the least cost
    assert plan.objective == min(costs) and plan.method == "auto"
    assert plan.stats["auto_method"] == win and plan.seed == parts[win].seed
    assert [s.nodes for s in plan.stages] == [s.nodes for s in parts[win].stages]
    assert evaluate(p, plan.stages).objective == plan.objective
    assert any("4 of 4 runs of spectral-order, mla-weighted, brkga, mla in turn from seed 3 on" in n
               and f"{win}'s" in n
               for n in plan.notes)
    # restarts continue the cycle with the next seeds
    runs.clear()
    more = slice_graph(p, method="auto", seed=3, decodes=300, restarts=2)
    assert runs == [("spectral-order", 3), ("mla-weighted", 4), ("brkga", 5), ("mla", 6), ("spectral-order", 7),
                    ("mla-weighted", 8)]
    assert more.objective <= plan.objective and more.stats["restarts"] == 5


def test_auto_stops_with_the_time_too(monkeypatch):
    p = _problem()
    runs = _spy_runs(monkeypatch)
    monkeypatch.setattr(restarts_module, "remaining", _Clock(left=1e-9, step=0.0))
    plan = slice_graph(p, method="auto", seed=0, decodes=200, improve=False, time_limit=1e7)
    assert runs == [("spectral-order", 0)] and plan.status == "time_limit"
    assert plan.stats["auto_method"] == "spectral-order"


def test_cli_method_auto(capsys):
    from stagecut.cli.main import main

    capsys.readouterr()
    assert main(["slice", "regal:60:watts_strogatz:1", "-k", "8", "--decodes", "200", "--method", "auto",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    g = sc.regal_graph(60, model="watts_strogatz", seed=1)
    assert out["method"] == "auto" and out["stats"]["auto_method"] in slicegraph_module.PORTFOLIO
    assert out["objective"] == slice_graph(g, devices=8, method="auto", decodes=200).objective
    with pytest.raises(InvalidArgumentError, match="order"):
        slice_graph(g, devices=8, method="auto", order=list(g.ids))
