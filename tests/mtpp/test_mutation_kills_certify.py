"""Tests that kill the mutants of ``stagecut/mtpp/certify.py`` that survived the rest of the suite
(benches/MUTATION.md, run of 2026-11-27, ``certify.py``).

The ladder's bookkeeping (the budget each level gets, the rows of skipped levels, the best bound
so far) is checked with a fake clock and a fake ``mtpp_bound`` where the real solver cannot make
the case happen on demand; everything else runs the real levels on small graphs.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from typing import Any

import pytest

from stagecut.errors import InvalidGraphError
from stagecut.examples import regal_graph
from stagecut.graph import Graph
from stagecut.mtpp.bounds import BoundResult
from stagecut.mtpp.certify import Certificate, certify, plan_blocks
from stagecut.mtpp.model import MtppProblem, evaluate
from stagecut.mtpp.slicegraph import slice_graph

CERTIFY = importlib.import_module("stagecut.mtpp.certify")


def _chain() -> Graph:
    # costs 4, 1, 1, 4 with tensors of 0.5: [[0, 1], [2, 3]] costs 5.5 (optimal on 2 devices),
    # [[0], [1, 2, 3]] costs 6.5
    return Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5)


class _Clock:
    """A fake ``time`` module whose ``perf_counter`` advances by ``step`` seconds a call."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def perf_counter(self) -> float:
        value = self.now
        self.now += self.step
        return value


def _fake_bound(calls: list[tuple[str, float | None]], bound: float = 1.0) -> Any:
    def fake(problem: MtppProblem, *, level: str, time_limit: float | None, **_: Any) -> BoundResult:
        calls.append((level, time_limit))
        return BoundResult(level=level, bound=bound, status="optimal", seconds=0.0)
    return fake


def test_the_ratio_of_a_free_plan_and_of_a_zero_bound() -> None:
    # a plan of cost 0 is optimal whatever the bound: ratio 1 (not inf)
    free = certify(Graph.chain([0.0, 0.0]), [[0], [1]], devices=2, levels=("simple",))
    assert free.objective == 0.0 and free.ratio == 1.0
    # a bound of 0 proves nothing about a plan of positive cost: ratio inf, not a division by 0
    cert = Certificate(objective=2.0, status="feasible", lower_bound=0.0, devices=2)
    assert cert.ratio == math.inf
    assert Certificate(objective=2.0, status="feasible", lower_bound=0.5, devices=2).ratio == 4.0


def test_plan_blocks_reads_every_plan_form() -> None:
    g = Graph.chain([1.0, 1.0, 1.0])
    # a mapping whose stages form a cycle is not a pipeline
    with pytest.raises(InvalidGraphError, match="cycle"):
        plan_blocks(g, {0: "a", 1: "b", 2: "a"})
    # the stages of a mapping come in pipeline order, not in the mapping's order
    assert plan_blocks(g, {2: "z", 1: "y", 0: "x"}) == [[0], [1], [2]]
    # the JSON of an old plan
    assert plan_blocks(g, {"blocks": [[0, 1], [2]]}) == [[0, 1], [2]]
    # Stage objects, e.g. another result's stages
    stages = evaluate(MtppProblem(g, devices=2), [[0], [1, 2]]).stages
    assert plan_blocks(g, list(stages)) == [[0], [1, 2]]


def test_one_level_given_as_a_string() -> None:
    cert = certify(_chain(), [[0, 1], [2, 3]], devices=2, levels="simple")
    assert [r.level for r in cert.levels] == ["simple"]


def test_the_device_count_defaults_to_the_accelerators_else_the_block_count() -> None:
    plan = [[0, 1], [2, 3]]
    assert certify(_chain(), plan, levels=("simple",)).devices == 2
    more = Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5, defaults={"accelerators": 3})
    assert certify(more, plan, levels=("simple",)).devices == 3
    fewer = Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5, defaults={"accelerators": 1})
    assert certify(fewer, plan, levels=("simple",)).devices == 2
    # an explicit count is kept, not replaced by the block count
    assert certify(_chain(), plan, devices=3, levels=("simple",)).devices == 3


def test_a_slice_plan_brings_its_devices_and_memory_model() -> None:
    # the file says 4 accelerators; the plan was made for 2 devices with a memory limit and
    # overflow: certifying it as a 4-device problem without memory would score another problem
    g = Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5, memory=[3.0, 1.0, 1.0, 3.0], defaults={"accelerators": 4})
    plan = slice_graph(g, devices=2, memory=4.0, bandwidth=2.0, method="dp")
    cert = certify(g, plan, levels=("simple", "exact"))
    assert cert.devices == 2 and cert.memory == 4.0 and cert.bandwidth == 2.0
    assert cert.objective == pytest.approx(plan.objective)  # the same cost model as the plan's
    assert cert.lower_bound == pytest.approx(plan.objective)  # the DP's optimum, proven again
    # an argument given wins over the plan's; the memory model is the plan's only as a whole
    assert certify(g, plan, devices=3, memory=8.0, levels=("simple",)).devices == 3
    mine = certify(g, plan, memory=8.0, levels=("simple",))
    assert mine.memory == 8.0 and mine.bandwidth is None  # (a hard limit, as asked: not the plan's bandwidth)
    assert math.isinf(certify(g, plan, memory=math.inf, levels=("simple",)).memory)
    # without memory the average bound is the 2-device one, not the 4-device one
    free = slice_graph(g, devices=2, method="dp")
    assert certify(g, free, levels=("simple",)).lower_bound >= 10.0 / 2
    # the activations' reserve, the device kind and the colocation come with the plan too
    reserved = slice_graph(g, devices=2, memory=4.0, bandwidth=2.0, reserved_memory=1.0, method="dp")
    cert = certify(g, reserved, levels=("simple",))
    assert cert.reserved_memory == 1.0 and cert.objective == pytest.approx(reserved.objective)
    cpu = Graph.chain([4.0, 1.0, 1.0, 4.0], cpu_costs=[40.0, 10.0, 10.0, 40.0], comm=0.5)
    on_cpu = slice_graph(cpu, devices=2, kind="cpu", method="dp")
    assert certify(cpu, on_cpu, levels=("simple",)).objective == pytest.approx(on_cpu.objective)  # (not 5.5)
    tied = Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5)
    tied = Graph([dataclasses.replace(nd, colocation=7) if i in (0, 3) else nd for i, nd in enumerate(tied.nodes)],
                 [(0, 1), (1, 2), (2, 3)])
    split = slice_graph(tied, devices=2, colocate=False, method="dp")  # (0 and 3 apart)
    assert certify(tied, split, levels=("simple",)).objective == pytest.approx(split.objective)
    with pytest.raises(InvalidGraphError, match="colocation class"):  # (asked to keep the classes: it breaks one)
        certify(tied, split, colocate=True, levels=("simple",))


def test_without_stop_when_proven_every_level_runs_and_the_best_bound_is_kept() -> None:
    g = _chain()
    seen: list[tuple[str, float]] = []
    cert = certify(g, [[0], [1, 2, 3]], devices=2, levels=("exact", "simple"), stop_when_proven=False,
                   on_level=lambda r, best: seen.append((r.level, best)))
    exact, simple = cert.levels
    assert exact.bound == pytest.approx(5.5) and simple.bound < exact.bound
    # the best bound so far, not the level's own; the certificate keeps the best, not the last
    assert seen == [("exact", exact.bound), ("simple", exact.bound)]
    assert cert.lower_bound == exact.bound
    # a proven plan: the later levels still run when asked to
    proven = certify(g, [[0, 1], [2, 3]], devices=2, levels=("exact", "simple"), stop_when_proven=False)
    assert [r.status for r in proven.levels] == ["optimal", "optimal"]
    assert proven.stats == {"levels_run": 2, "levels_skipped": 0}
    stopped = certify(g, [[0, 1], [2, 3]], devices=2, levels=("exact", "simple"))
    assert stopped.stats == {"levels_run": 1, "levels_skipped": 1}


def test_no_level_run_gives_no_bound() -> None:
    cert = certify(_chain(), [[0, 1], [2, 3]], devices=2, levels=())
    assert cert.lower_bound is None and cert.status == "feasible" and cert.ratio == math.inf


def test_a_budget_too_small_skips_every_level() -> None:
    cert = certify(regal_graph(12, seed=1), [list(range(6)), list(range(6, 12))], devices=2,
                   levels=("simple", "exact"), time_limit=1e-3)
    assert [(r.status, r.reason) for r in cert.levels] == [("skipped", "no time left")] * 2
    assert cert.lower_bound is None and cert.stats == {"levels_run": 0, "levels_skipped": 2}


def test_each_level_gets_what_is_left_of_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, float | None]] = []
    monkeypatch.setattr(CERTIFY, "mtpp_bound", _fake_bound(calls))
    monkeypatch.setattr(CERTIFY, "time", _Clock(step=4.0))
    # the clock reads 0 at the start, then 4, 8, 12 at the levels: 6 left, of which the
    # combinatorial "simple" gets at most max(5 s, a fifth); then 2 left, shared by the two MIP
    # levels: 1 for "bottleneck"; then no time left
    cert = certify(_chain(), [[0], [1, 2, 3]], devices=2, levels=("simple", "bottleneck", "exact"), time_limit=10.0)
    assert calls == [("simple", 5.0), ("bottleneck", 1.0)]
    assert [r.status for r in cert.levels] == ["optimal", "optimal", "skipped"]
    assert cert.levels[2].reason == "no time left"


def test_no_mip_level_starves_the_ones_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # a long budget: each MIP level gets an equal share of what is left with those after it, and
    # what one does not use goes to the next (here the clock moves 1 s a reading: each level
    # "uses" 1 s); the last one gets all that is left. Before, the first MIP level got it all.
    calls: list[tuple[str, float | None]] = []
    monkeypatch.setattr(CERTIFY, "mtpp_bound", _fake_bound(calls))
    monkeypatch.setattr(CERTIFY, "time", _Clock(step=1.0))
    certify(_chain(), [[0], [1, 2, 3]], devices=2, levels=("simple", "block", "bottleneck", "exact"),
            time_limit=600.0, stop_when_proven=False)
    assert calls == [("simple", pytest.approx(0.2 * 599)), ("block", pytest.approx(598 / 3)),
                     ("bottleneck", pytest.approx(597 / 2)), ("exact", pytest.approx(596))]


def test_a_cheaper_partition_that_is_only_round_off_is_not_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def exact(problem: MtppProblem, *, level: str, **_: Any) -> BoundResult:
        # the MIP's partition is the plan itself, its objective a round-off below the plan's 5.5
        return BoundResult(level=level, bound=5.0, status="time_limit", seconds=0.0, objective=5.5 - 1e-12,
                           blocks=((0, 1), (2, 3)))
    monkeypatch.setattr(CERTIFY, "mtpp_bound", exact)
    cert = certify(_chain(), [[0, 1], [2, 3]], devices=2, levels=("exact",))
    assert cert.best_stages == () and cert.best_objective is None and cert.notes == ()
    assert cert.lower_bound == 5.0 and cert.status == "feasible"


def test_an_unplaceable_problem_still_climbs_the_ladder() -> None:
    # every node holds more than the hard limit: the plan costs inf, and so does every bound;
    # an infinite bound does not "prove" an infinite cost, so the later levels still run
    g = Graph.chain([1.0, 1.0], memory=[7.0, 7.0])
    cert = certify(g, [[0], [1]], devices=2, memory=6.0, levels=("simple", "exact"))
    assert cert.objective is None and cert.status == "infeasible"
    assert cert.levels[1].status != "skipped" and cert.lower_bound == math.inf


def test_the_certificate_keeps_the_problem_settings() -> None:
    cert = certify(_chain(), [[0, 1], [2, 3]], devices=3, colocate=False, levels=("simple",))
    assert cert.devices == 3 and cert.colocate is False


def test_a_bound_above_the_plan_is_never_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    # a MIP stopped by its limit once gave +inf as its "bound" with status time_limit: the ladder
    # took it, capped it at the plan's cost and called a plan 24% above its best bound optimal
    def fake(problem: MtppProblem, *, level: str, **_: Any) -> BoundResult:
        bound = {"simple": 5.0, "exact": math.inf, "bottleneck": 6.0}[level]
        return BoundResult(level=level, bound=bound, status="time_limit", seconds=0.0)

    monkeypatch.setattr(CERTIFY, "mtpp_bound", fake)
    cert = certify(_chain(), [[0], [1, 2, 3]], devices=2, levels=("simple", "bottleneck", "exact"))
    assert cert.objective == 6.5 and cert.lower_bound == 6.0 and cert.status == "feasible"
    assert cert.bound_source == "bottleneck"
    # a bound within round-off above the plan's cost is the plan's cost: proven
    monkeypatch.setattr(CERTIFY, "mtpp_bound", lambda p, *, level, **_: BoundResult(
        level=level, bound=6.5 * (1 + 1e-9), status="optimal", seconds=0.0))
    cert = certify(_chain(), [[0], [1, 2, 3]], devices=2, levels=("exact",))
    assert cert.status == "optimal" and cert.lower_bound == 6.5


@pytest.mark.parametrize("level", ["bottleneck", "exact"])
def test_a_mip_level_whose_solver_stopped_with_an_infinite_bound_gives_none(monkeypatch, level) -> None:
    from stagecut import _mip
    from stagecut.mtpp import bounds

    monkeypatch.setattr(bounds, "solve", lambda m, **kw: _mip.MipOutcome(
        status="time_limit", objective=None, bound=math.inf, seconds=1.0, solver="cbc", rows=1, cols=1))
    r = bounds.mtpp_bound(_chain(), level=level, devices=2, time_limit=1.0)
    assert r.bound is None and r.status == "time_limit" and "stopped before" in (r.reason or "")
