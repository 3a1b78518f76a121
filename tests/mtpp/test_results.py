"""The MTPP results on the shared protocol: JSON round trips, the evaluator reproduces every
objective, infeasible answers, the renamed arguments, and bounds that are bounds."""

import importlib
import json
import math
import time

import pytest

import stagecut as sc
from stagecut.errors import InvalidArgumentError, InvalidGraphError
from stagecut.examples import regal_graph
from stagecut.graph import Graph, Node
from stagecut.mtpp.bounds import LEVELS, BoundResult, mtpp_bound
from stagecut.mtpp.certify import Certificate, certify
from stagecut.mtpp.model import MtppProblem, evaluate
from stagecut.mtpp.slicegraph import METHODS, SlicePlan, slice_graph
from stagecut.results import Result, Stage


def small():
    """A diamond with a tail: tensors, memory overflow and a leaf."""
    nodes = [Node("a", {"accelerator": 3.0}, memory=4.0, comm=1.0),
             Node("b", {"accelerator": 2.0}, memory=2.0, comm=0.5),
             Node("c", {"accelerator": 4.0}, memory=1.0, comm=0.25),
             Node("d", {"accelerator": 1.0}, memory=3.0, comm=2.0),
             Node("e", {"accelerator": 2.5}, memory=1.0, comm=0.0)]
    return Graph(nodes, [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "e")])


SETTINGS = dict(devices=3, memory=5.0, bandwidth=2.0, reserved_memory=0.5)


def roundtrip(r):
    """``from_json(to_json())`` and through the JSON text both give ``r`` back."""
    again = type(r).from_json(r.to_json())
    assert again == r
    assert type(r).from_json(json.loads(r.dumps())) == r
    assert type(r).from_json(r.dumps()) == r
    return again


# ------------------------------------------------------------------ round trip + evaluator, every method
@pytest.mark.parametrize("method", METHODS)
def test_every_method_round_trips_and_the_evaluator_reproduces_its_objective(method):
    g = small()
    plan = slice_graph(g, method=method, seed=4, population=8, generations=4, **SETTINGS)
    assert isinstance(plan, SlicePlan) and isinstance(plan, Result)
    assert plan.status in ("optimal", "feasible") and plan.method == method
    if method == "auto":  # (few ideals: the exact DP's optimum, no search; tests/mtpp/test_slice_auto_dp.py)
        assert plan.seed is None and plan.stats["auto_method"] == "dp" and plan.status == "optimal"
    else:
        seeded = ("brkga", "random", "mla", "mla-weighted", "spectral-order", "multilevel")
        assert plan.seed == (4 if method in seeded else None)
    roundtrip(plan)
    problem = MtppProblem(g, **SETTINGS)
    ev = evaluate(problem, plan.stages)
    assert ev.objective == plan.objective
    assert ev.stages == plan.stages  # loads, parts and memory are the evaluator's
    assert plan.objective == max(s.load for s in plan.stages)
    assert all(s.load == pytest.approx(sum(s.parts.values())) for s in plan.stages)
    assert [s.index for s in plan.stages] == list(range(len(plan.stages)))
    assert plan.assignment() == {v: s.index for s in plan.stages for v in s.nodes}
    assert plan.lower_bound <= plan.objective and plan.gap is not None and plan.gap >= 0
    assert plan.stats["units"] >= 1 and plan.stats["decodes"] >= 0
    # the human-readable forms
    assert "objective" in plan.summary() and "accelerator:0" in plan.table()
    assert repr(plan).startswith("SlicePlan(objective=")


def test_dp_plan_carries_how_it_was_proven():
    plan = slice_graph(small(), method="dp", **SETTINGS)
    assert plan.status == "optimal" and plan.lower_bound == plan.objective and plan.gap == 0.0
    assert plan.exact_by == "ideal DP" and plan.stats["ideals"] > 0
    # with a relaxation round (a work-free leaf holding parameters)
    g = Graph([Node(0, {"accelerator": 5.0}, memory=1.0), Node(1, {"accelerator": 0.0}, memory=6.0)], [(0, 1)])
    relaxed = slice_graph(g, devices=2, method="dp", memory=5.0, bandwidth=0.5)
    assert relaxed.exact_by == "relaxation + repair" and relaxed.relaxation.rounds == 1
    assert roundtrip(relaxed).relaxation == relaxed.relaxation


def test_certificate_round_trips_and_the_evaluator_reproduces_its_objective():
    g = small()
    plan = slice_graph(g, method="brkga", seed=0, population=8, generations=4, **SETTINGS)
    cert = certify(g, plan, levels=("simple", "bottleneck", "bottleneck-guess", "exact"), **SETTINGS)
    assert isinstance(cert, Certificate) and cert.method == "certify"
    again = roundtrip(cert)
    assert all(isinstance(r, BoundResult) for r in again.levels)
    assert again.levels == cert.levels
    problem = MtppProblem(g, **SETTINGS)
    assert evaluate(problem, cert.stages).objective == cert.objective == plan.objective
    assert cert.stages == plan.stages
    assert cert.lower_bound <= cert.objective and cert.ratio >= 1.0
    assert cert.status == ("optimal" if cert.lower_bound >= cert.objective * (1 - 1e-9) else "feasible")
    assert "certify" in cert.summary() and repr(cert).startswith("Certificate(")


def test_certificate_with_a_cheaper_partition_and_skipped_levels_round_trips():
    g = Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5)
    cert = certify(g, [[0], [1, 2, 3]], devices=2, levels=("exact", "simple", "bottleneck"))
    assert cert.objective == 6.5 and cert.best_objective == 5.5
    # (exact's partition meets its bound: the optimum, so the ladder stops there)
    assert [r.status for r in cert.levels] == ["optimal", "skipped", "skipped"]
    assert cert.levels[1].reason == "the bound is the optimum: the exact level's partition meets it"
    assert evaluate(MtppProblem(g, devices=2), cert.best_stages).objective == cert.best_objective
    roundtrip(cert)
    proven = certify(g, [[0, 1], [2, 3]], devices=2, levels=("exact", "simple"))
    assert proven.levels[1].status == "skipped" and proven.levels[1].bound is None
    assert proven.levels[1].reason == "plan already proven optimal"
    assert roundtrip(proven).levels[1].bound is None


def test_bottleneck_guess_level_round_trips_inside_a_certificate():
    g = Graph.chain([2.0, 2.0, 2.0, 2.0], comm=3.0)
    cert = certify(g, [[0, 1], [2, 3]], devices=2, levels=("bottleneck-guess",))
    (r,) = cert.levels
    # the level's bound is the least guess's, capped by the plan's cost (7: a guess's MIP bound
    # may sit a round-off above it)
    assert len(r.guesses) == 2 and r.bound == min(7.0, *(x.bound for x in r.guesses))
    assert min(x.bound for x in r.guesses) == pytest.approx(7.0, rel=1e-12)
    assert roundtrip(cert).levels[0].guesses == r.guesses


# ------------------------------------------------------------------ infeasible
@pytest.mark.parametrize("method", ["dp", "brkga", "random", "order"])
def test_infeasible_result_has_no_objective_and_round_trips(method):
    g = Graph.chain([1.0, 1.0, 1.0], memory=[5.0, 5.0, 5.0])
    plan = slice_graph(g, devices=2, method=method, memory=6.0, population=4, generations=2)
    assert plan.objective is None and plan.status == "infeasible" and plan.stages == ()
    assert plan.gap is None and plan.assignment() == {} and not plan.feasible
    assert plan.lower_bound == math.inf  # proven: the parameters cannot fit in 2 devices
    assert plan.notes == ()
    again = roundtrip(plan)
    assert again.objective is None and again.to_json()["objective"] is None


def test_heuristic_that_finds_nothing_says_unknown_not_infeasible():
    # the simple bound is finite (each block fits, the total fits), yet no partition exists:
    # three nodes of 4 bytes on two devices of 6 bytes (bin packing, not visible to the bound)
    g = Graph.chain([1.0, 1.0, 1.0], memory=[4.0, 4.0, 4.0])
    plan = slice_graph(g, devices=2, method="brkga", memory=6.0, population=4, generations=2)
    assert plan.objective is None and plan.status == "unknown"
    assert math.isfinite(plan.lower_bound) and "not proven" in plan.notes[0]
    roundtrip(plan)
    assert slice_graph(g, devices=2, method="dp", memory=6.0).lower_bound == math.inf


def test_certificate_of_a_plan_over_the_memory_limit():
    g = Graph.chain([1.0, 1.0, 1.0], memory=[4.0, 4.0, 4.0])
    cert = certify(g, [[0, 1], [2]], devices=3, memory=6.0, levels=("simple", "exact"))
    assert cert.objective is None and cert.status == "infeasible" and "memory" in cert.notes[0]
    assert cert.best_objective == 1.0  # the exact MIP finds the feasible one-node-per-device split
    roundtrip(cert)


# ------------------------------------------------------------------ argument errors
def test_bound_and_certify_argument_errors():
    g = Graph.chain([1.0, 2.0, 3.0], comm=1.0)
    p = MtppProblem(g, devices=2)
    for kwargs, match in [(dict(level="magic"), "level"), (dict(time_limit=-1.0), "time_limit"),
                          (dict(seed=-1), "seed"), (dict(workers=0), "workers"), (dict(solver="gurobi"), "solver"),
                          (dict(threads=0), "threads"), (dict(gap=float("nan")), "gap"),
                          (dict(devices=3), "devices given with an MtppProblem")]:
        with pytest.raises(InvalidArgumentError, match=match):
            mtpp_bound(p, **kwargs)
    with pytest.raises(InvalidArgumentError, match="devices"):
        mtpp_bound(g, level="simple", devices=0)
    for kwargs, match in [(dict(levels=("exact", "magic")), "magic"), (dict(time_limit="soon"), "time_limit"),
                          (dict(memory=-1.0), "memory")]:
        with pytest.raises(InvalidArgumentError, match=match):
            certify(g, [[0, 1], [2]], devices=2, **kwargs)
    with pytest.raises(InvalidArgumentError, match="cannot read blocks"):
        certify(g, 42, devices=2)
    heavy = Graph.chain([1.0, 1.0, 1.0], memory=[5.0, 5.0, 5.0])
    with pytest.raises(InvalidArgumentError, match="holds no partition"):
        certify(heavy, slice_graph(heavy, devices=2, memory=6.0, method="dp"), devices=2)
    with pytest.raises(InvalidGraphError, match="in no block"):
        certify(g, [[0, 1]], devices=2)
    with pytest.raises(InvalidArgumentError, match="memory given with an MtppProblem"):
        certify(p, [[0, 1], [2]], memory=4.0)


# ------------------------------------------------------------------ renamed arguments
def test_old_names_warn_and_give_the_same_result():
    g = small()
    new = slice_graph(g, devices=3, method="dp", memory=5.0, bandwidth=2.0)
    with pytest.warns(DeprecationWarning, match="stages= is now devices="):
        old = slice_graph(g, stages=3, method="dp", memory=5.0, bandwidth=2.0)
    with pytest.warns(DeprecationWarning, match="fast_memory= is now memory="):
        old_mem = slice_graph(g, devices=3, method="dp", fast_memory=5.0, bandwidth=2.0)
    with pytest.warns(DeprecationWarning, match="by keyword"):
        positional = slice_graph(g, 3, "dp", memory=5.0, bandwidth=2.0)
    for r in (old, old_mem, positional):
        assert r.objective == new.objective and r.stages == new.stages and r.method == "dp"
    # the warning points at the caller
    with pytest.warns(DeprecationWarning) as rec:
        slice_graph(g, stages=3, method="order")
    assert rec[0].filename == __file__
    with pytest.warns(DeprecationWarning, match="stages= is now devices="):
        c_old = certify(g, new, stages=3, memory=5.0, bandwidth=2.0, levels=("simple",))
    c_new = certify(g, new, devices=3, memory=5.0, bandwidth=2.0, levels=("simple",))
    assert c_old.lower_bound == c_new.lower_bound and c_old.stages == c_new.stages
    with pytest.warns(DeprecationWarning, match="by keyword"):
        b_old = mtpp_bound(MtppProblem(g, devices=3), "simple")
    assert b_old.bound == mtpp_bound(g, level="simple", devices=3).bound
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidArgumentError, match="devices= only"):
        slice_graph(g, devices=2, stages=3)


def test_every_solver_takes_a_graph_or_a_problem():
    g = small()
    p = MtppProblem(g, **SETTINGS)
    assert slice_graph(g, method="dp", **SETTINGS).objective == slice_graph(p, method="dp").objective
    assert mtpp_bound(g, level="bottleneck", **SETTINGS).bound == mtpp_bound(p, level="bottleneck").bound
    blocks = [["a", "b"], ["c", "d"], ["e"]]
    assert certify(g, blocks, levels=("simple",), **SETTINGS).lower_bound == \
        certify(p, blocks, levels=("simple",)).lower_bound
    # the package exports stay importable
    assert sc.SlicePlan is SlicePlan and sc.Certificate is Certificate and sc.BoundResult is BoundResult
    assert sc.slice_graph is slice_graph and sc.certify is certify and sc.mtpp_bound is mtpp_bound
    assert sc.MtppProblem is MtppProblem and sc.BOUND_LEVELS == LEVELS


# ------------------------------------------------------------------ bounds that are bounds
def test_certify_caps_the_bound_by_the_plans_cost(monkeypatch):
    # a MIP solved to its gap tolerance may report a dual bound a hair above the plan's cost:
    # the certificate must never claim a bound above the cost (a ratio below 1)
    g = Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5)

    def above(problem, *, level, **kw):
        return BoundResult(level=level, bound=5.5 * (1 + 1e-7), status="optimal", seconds=0.0)

    monkeypatch.setattr(importlib.import_module("stagecut.mtpp.certify"), "mtpp_bound", above)
    cert = certify(g, [[0, 1], [2, 3]], devices=2, levels=("exact",))
    assert cert.objective == 5.5
    assert cert.lower_bound == 5.5 and cert.ratio == 1.0 and cert.status == "optimal"
    assert cert.levels[0].bound > cert.objective  # the raw level is kept as the solver said


def test_time_limited_mip_gives_its_dual_bound_not_its_primal():
    # issue 11: CBC stopped after 3 s on regal_graph(60, seed=3), k = 6, has a primal value far
    # above its dual bound; returning the primal as the bound would "certify" a wrong bound
    g = regal_graph(60, seed=3)
    plan = slice_graph(g, devices=6, method="brkga", seed=0, decodes=500)
    t0 = time.perf_counter()
    cert = certify(g, plan, devices=6, levels=("exact",), time_limit=3.0)
    assert time.perf_counter() - t0 < 30
    (r,) = cert.levels
    assert r.status == "time_limit"
    assert r.bound <= plan.objective + 1e-6  # a valid lower bound is below every known partition
    if r.objective is not None:  # CBC found a primal solution: the bound is strictly below it
        assert r.bound < r.objective
    assert cert.lower_bound == pytest.approx(r.bound) and cert.lower_bound < cert.objective
    assert cert.status == "feasible"


# ------------------------------------------------------------------ isolated free nodes
def test_isolated_zero_cost_nodes_do_not_multiply_the_ideals():
    # a torch.export-style graph: a chain plus 60 buffers with no edges, no work and no memory
    chain = Graph.chain([3.0, 1.0, 4.0, 1.0, 5.0], comm=0.5)
    nodes = list(chain.nodes) + [Node(f"buf{i}", {"accelerator": 0.0}) for i in range(60)]
    g = Graph(nodes, chain.edges)
    alone = slice_graph(chain, devices=3, method="dp")
    plan = slice_graph(g, devices=3, method="dp", max_ideals=1000)
    assert plan.objective == alone.objective and plan.stats["ideals"] == alone.stats["ideals"]
    assert plan.stats["units"] == len(chain)
    assert evaluate(MtppProblem(g, devices=3), plan.stages).objective == plan.objective
    # without folding they would be 2^60 times as many: refused, and the reason is named
    with pytest.raises(sc.TooManyIdealsError, match="61 unconnected parts"):
        slice_graph(g, devices=3, method="dp", max_ideals=1000, fold_leaves=False)


def test_stage_fields():
    plan = slice_graph(small(), method="dp", **SETTINGS)
    s = plan.stages[0]
    assert isinstance(s, Stage) and s.device == "accelerator:0"
    assert set(s.parts) == {"work", "io", "overflow"}
    assert s.memory == sum(small().node(v).memory for v in s.nodes)
