"""Time limits that hold in the exact latency methods: a planted slow step in the model build (or a
module solve) past the limit, and the method returns its start with a note instead of building on.

The checks are on what the method does (its answer, its notes, how many module MILPs it started),
never on the wall clock, so they hold on a loaded machine."""

import pathlib
import time

import pytest

import stagecut as sc
from stagecut.latency import Devices, LatencyProblem, evaluate_schedule
from stagecut.latency.diviml import batched as batched_mod
from stagecut.latency.diviml import split as split_mod
from stagecut.latency.exact import milp as milp_mod
from stagecut.latency.exact.bounds import best_bound
from stagecut.latency.heuristics.constructive import best_constructive
from stagecut.latency.pcie import ip as pcie_mod
from stagecut.rwnn import rwnn, rwnn_devices

TOL = 1e-9


def slow(fn, seconds):
    """``fn`` after sleeping ``seconds`` (a planted slow build step)."""

    def wrapper(*args, **kwargs):
        time.sleep(seconds)
        return fn(*args, **kwargs)

    return wrapper


def problem(n=40, seed=3):
    return LatencyProblem(sc.random_dag(n, edge_prob=0.1, seed=seed), Devices.pcie_star(3), output_bytes="comm")


def test_milp_build_stops_at_the_deadline(monkeypatch):
    p = problem()
    start = sc.latency.place(p, method="heft")
    built = []
    monkeypatch.setattr(milp_mod, "transfer_table", slow(milp_mod.transfer_table, 0.4))
    monkeypatch.setattr(milp_mod.RowSink, "flush", lambda self, m, *check: built.append(len(self)))
    s = milp_mod.solve_milp(p, time_limit=0.2, start=start)
    assert built == []  # the rows were never handed to the solver
    assert s.status == "time_limit" and s.objective <= start.objective * (1 + TOL)
    assert any("passed while the MILP was being built" in n for n in s.notes)
    assert s.lower_bound == pytest.approx(best_bound(p).value)
    assert evaluate_schedule(p, None, s.placement, s.order).objective == pytest.approx(s.objective)


def test_milp_build_checks_the_deadline_between_row_groups(monkeypatch):
    # the deadline passes during the precedence rows (a slow row): the pair rows are never built
    p = problem()
    calls = {"pairs": 0}
    real = milp_mod._pair_rows

    def pairs(*args, **kwargs):
        calls["pairs"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(milp_mod, "_pair_rows", pairs)
    real_add = milp_mod.RowSink.add
    slept = []

    def add(self, *args):
        if not slept:
            slept.append(1)
            time.sleep(0.4)
        return real_add(self, *args)

    monkeypatch.setattr(milp_mod.RowSink, "add", add)
    s = milp_mod.solve_milp(p, time_limit=0.2)
    assert calls["pairs"] == 0 and s.status == "time_limit"
    assert any("passed while the MILP was being built" in n for n in s.notes)


def test_split_starts_no_module_milp_after_its_deadline(monkeypatch):
    # a planted slow first module solve past the limit: every later module is its start's
    # schedule (or skipped), no further MILP is started, and the answer is never above the start
    p = LatencyProblem(rwnn(3, size=6, seed=0), rwnn_devices(), output_bytes="comm")
    # a poor start (everything on the CPU): the modules skipped past the deadline bound nothing
    # (0), so the lower bound stays below a good schedule's makespan, though the start's own
    # module bounds (its cut vertices on the CPU) are far above it
    start = sc.latency.evaluate_schedule(p, None, {v: "cpu" for v in p.ids})
    good = best_constructive(p).objective
    assert start.objective > 3 * good
    calls = []
    real = split_mod.solve_milp

    def first_slow(*args, **kwargs):
        calls.append(kwargs.get("time_limit"))
        if len(calls) == 1:
            time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(split_mod, "solve_milp", first_slow)
    s = split_mod.solve_split(p, threads=1, time_limit=0.3, start=start)
    assert s.stats["solves"] > 3
    assert len(calls) == 1, len(calls)  # (without the deadline check: one per module and device pair)
    assert s.status == "time_limit" and s.objective <= start.objective * (1 + TOL)
    assert s.lower_bound <= good


def test_split_fallback_keeps_the_start(monkeypatch):
    # the whole-MILP fallback (memory couples the modules) starts from SPLIT's start: never above it
    path = (pathlib.Path(__file__).resolve().parents[3] / "shared" / "workloads" / "latency-inputs" / "LayerGraphs"
            / "bert24_inference.json")
    if not path.exists():
        pytest.skip("the shared workloads are absent")
    p = LatencyProblem.from_workload(sc.read_workload(path))
    start = best_constructive(p)
    seen = []
    real = split_mod.solve_milp

    def spy(problem, **kwargs):
        if len(problem) == len(p):
            seen.append(kwargs.get("start"))
        return real(problem, **kwargs)

    monkeypatch.setattr(split_mod, "solve_milp", spy)
    s = split_mod.solve_split(p, threads=1, time_limit=2.0, start=start)
    assert s.objective <= start.objective * (1 + TOL)
    assert all(x is start for x in seen)


def test_pcie_ip_build_stops_at_the_deadline(monkeypatch):
    p = LatencyProblem.from_workload(sc.random_dag(30, edge_prob=0.15, seed=2), accelerators=2, memory=40.0)
    monkeypatch.setattr(pcie_mod, "_compute_ends", slow(pcie_mod._compute_ends, 0.4))
    added = []
    monkeypatch.setattr(pcie_mod, "_symmetry", lambda *a: added.append(1) or {})
    s = pcie_mod.solve_pcie_ip(p, time_limit=0.2)
    assert added == [] and s.status == "time_limit"
    assert any("passed while the IP was being built" in n for n in s.notes)
    assert s.objective is not None and s.lower_bound <= s.objective
    assert s.lower_bound == pytest.approx(min(best_bound(p).value, s.objective))


def test_batched_build_stops_at_the_deadline(monkeypatch):
    p = LatencyProblem(rwnn(1, size=8, seed=0), rwnn_devices(), output_bytes="comm")
    monkeypatch.setattr(batched_mod, "transitive_closure", slow(batched_mod.transitive_closure, 0.4))
    solved = []
    monkeypatch.setattr(batched_mod, "solve", lambda *a, **k: solved.append(1))
    s = batched_mod.solve_batched(p, 2, time_limit=0.2)
    assert solved == [] and s.status == "time_limit"
    assert any("greedy schedule is returned" in n for n in s.notes)
    assert s.lower_bound <= s.objective
