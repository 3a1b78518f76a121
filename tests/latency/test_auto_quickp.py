"""``auto`` runs QuickP on operator graphs that fusion shrinks a lot (training graphs with many
zero-cost operators), takes its answer when it is the best, says so, and skips it where fusion
leaves most of the graph."""

import pytest

import stagecut as sc
from stagecut.latency import LatencyProblem, evaluate_schedule, heft
from stagecut.latency.exact import bounds as bounds_mod
from stagecut.latency.exact import milp as milp_mod
from stagecut.latency.heuristics import lns as lns_mod
from stagecut.latency.heuristics import search as search_mod
from stagecut.latency.quickp.opgraph import operator_devices, operator_graph_from_data, synthetic_operator_graph

TOL = 1e-9
QP = __import__("stagecut.latency.quickp.ip", fromlist=["quickp"])


def training_problem(n=400, gpus=2):
    g, out, _ = operator_graph_from_data(synthetic_operator_graph(n, "alexnet", seed=1, devices=gpus))
    return LatencyProblem(g, operator_devices(gpus), output_bytes=out)


def simple_bounds(monkeypatch):
    """The bounds phase gets the problem's simple bound (the memory-aware bounds cost seconds of
    CPU on these graphs, and these tests are about the QuickP phase)."""
    monkeypatch.setattr(bounds_mod, "best_bound", lambda q: bounds_mod.LatencyBound(q.lower_bound(), "simple"))


def parts(s):
    listed = next(x for x in s.notes if x.startswith("methods: "))[len("methods: "):]
    out = {}
    for part in listed.split(", "):
        name, value = part.rsplit(": ", 1)
        out[name] = min(out.get(name, float("inf")), float(value))
    return out


def test_auto_runs_quickp_on_a_training_graph_and_is_never_worse_than_it(monkeypatch):
    p = training_problem()
    simple_bounds(monkeypatch)
    seen = []
    real = QP.quickp

    def spy(*args, **kwargs):
        s = real(*args, **kwargs)
        seen.append((kwargs, s))
        return s

    monkeypatch.setattr(QP, "quickp", spy)
    # (a few quick constructive methods, so that QuickP's phase has its time on a loaded machine too)
    monkeypatch.setattr(sc.latency.solve, "CONSTRUCTIVE", ("best-device", "heft", "greedy", "m-heft"))
    s = sc.place(p, method="auto", time_limit=8.0)
    assert len(seen) == 1
    kwargs, q = seen[0]
    # every constructive answer is a start (heft's among them), QuickP's own starts are not recomputed
    assert kwargs["warm_starts"] is False and any(x.method == "heft" for x in kwargs["starts"])
    assert q.objective <= heft(p).objective * (1 + TOL)
    phases = next(x for x in s.notes if x.startswith("phases: "))
    assert "quickp " in phases and f"{len(p)} -> " in phases
    values = parts(s)
    assert "quickp" in values and s.objective <= min(values.values()) * (1 + 1e-6)
    assert s.objective <= q.objective * (1 + TOL)
    assert values[s.stats["found_by"]] == pytest.approx(s.objective, rel=1e-6)
    assert evaluate_schedule(p, None, s.placement, s.order).objective == pytest.approx(s.objective)


def test_auto_takes_quickp_s_answer_when_it_is_the_best_and_names_it(monkeypatch):
    # QuickP (made to run on this small graph) answers with the optimum, which is below every
    # constructive answer, and every later phase (searches, the MILP) returns its start unchanged:
    # auto must return QuickP's answer and say it found it
    p = LatencyProblem(sc.random_dag(9, edge_prob=0.3, seed=18), sc.latency.Devices.pcie_star(2),
                       output_bytes="comm")
    simple_bounds(monkeypatch)
    good = sc.place(p, method="milp", time_limit=30)
    assert good.status == "optimal"
    answers = [sc.place(p, method=m).objective for m in sc.latency.solve.CONSTRUCTIVE]
    assert good.objective < min(x for x in answers if x is not None) - 0.5  # (else this test checks nothing)
    assert p.lower_bound() < good.objective - 0.5

    def fake_quickp(problem, **kwargs):
        return sc.latency.evaluate_schedule(problem, None, good.placement, good.order)

    def unchanged(problem, start=None, **kwargs):
        return start

    monkeypatch.setattr(sc.latency.solve, "AUTO_QUICKP_RATIO", 1.0)
    monkeypatch.setattr(sc.latency.solve, "AUTO_QUICKP_NODES", 1)
    monkeypatch.setattr(QP, "quickp", fake_quickp)
    for name in ("local_search", "simulated_annealing", "evolutionary"):
        monkeypatch.setattr(search_mod, name, unchanged)
    monkeypatch.setattr(lns_mod, "lns", unchanged)
    monkeypatch.setattr(milp_mod, "solve_milp", unchanged)
    s = sc.place(p, method="auto", time_limit=5.0)
    assert s.stats["found_by"] == "quickp" and s.method == "auto (quickp)"
    assert s.objective == pytest.approx(good.objective)
    assert s.status != "optimal" and s.lower_bound < s.objective


def test_auto_skips_quickp_where_fusion_leaves_most_of_the_graph(monkeypatch):
    # a random DAG without zero-cost operators: fusion merges little, so no QuickP phase
    g = sc.random_dag(240, edge_prob=0.02, seed=4)
    p = LatencyProblem(g, sc.latency.Devices.pcie_star(2), output_bytes="comm")
    simple_bounds(monkeypatch)
    called = []
    monkeypatch.setattr(QP, "quickp", lambda *a, **k: called.append(1))
    s = sc.place(p, method="auto", time_limit=2.0)
    assert called == [] and s.objective is not None
    assert "quickp" not in parts(s)


def test_auto_starts_from_the_milp_s_earliest_finish_schedule_too():
    # (on a 10,000-node transformer graph this start was below every constructive method's)
    from stagecut.latency.exact.milp_build import greedy_schedule

    p = LatencyProblem(sc.random_dag(30, edge_prob=0.15, seed=2), sc.latency.Devices.pcie_star(3),
                       output_bytes="comm")
    dev, order = greedy_schedule(p)
    eft = sc.latency.schedule_from(p, dev, order, method="x").objective
    s = sc.place(p, method="auto", time_limit=1.0)
    values = parts(s)
    assert values["earliest-finish"] == pytest.approx(eft)
    assert s.objective <= eft * (1 + 1e-9)


def test_auto_keeps_the_earliest_finish_start_when_its_constructive_phase_runs_long(monkeypatch):
    # a slow first constructive method uses up the constructive share of the limit: the
    # earliest-finish start (what `milp` returns when its model is too big) is still among auto's
    from stagecut.latency import solve as solve_mod
    from stagecut.latency.exact.milp_build import greedy_schedule

    p = LatencyProblem(sc.random_dag(30, edge_prob=0.15, seed=2), sc.latency.Devices.pcie_star(3),
                       output_bytes="comm")
    real = solve_mod._solvers

    def slow_solvers():
        table = dict(real())
        fast = table["best-device"]

        def slow(problem, **kw):
            import time
            time.sleep(0.8)
            return fast(problem, **kw)
        table["best-device"] = slow
        return table

    monkeypatch.setattr(solve_mod, "_solvers", slow_solvers)
    dev, order = greedy_schedule(p)
    eft = sc.latency.schedule_from(p, dev, order, method="x").objective
    s = sc.place(p, method="auto", time_limit=1.0)
    assert parts(s)["earliest-finish"] == pytest.approx(eft)
    assert s.objective <= eft * (1 + 1e-9)
