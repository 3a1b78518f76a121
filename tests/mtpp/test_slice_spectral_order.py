"""``slice_graph(..., method="spectral-order")``: sweeps along the spectral embedding.

- the embedding is the smooth eigenvectors (on a long grid the first coordinate is the position
  along it), the sweeps are the axes both ways and then random directions from the seed;
- the plan is the cheapest sweep's (each one cut by SliceGraph), re-scored by the evaluator,
  never below the exact optimum, and on graphs with a geometry far cheaper than a search with
  many more decodes;
- the time limit covers the eigendecomposition; too many units are refused before it, and
  ``"auto"`` then leaves the method out.
"""

from __future__ import annotations

import itertools
import json
import math
import threading

import numpy as np
import pytest
from tests.mtpp.test_combinatorial import optimum_dp, random_problem

import stagecut as sc
from helpers import ctrl_c_after, record_runs
from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph, Node
from stagecut.mtpp import spectral_order
from stagecut.mtpp.model import MtppProblem, evaluate
from stagecut.mtpp.slicegraph import slice_graph
from stagecut.mtpp.units import Units


def _grid(rows: int, cols: int, seed: int = 0) -> Graph:
    """A ``rows x cols`` grid, each edge oriented by a random order of the nodes (a DAG whose
    geometry no topological order shows)."""
    rng = np.random.default_rng(seed)
    rank = rng.permutation(rows * cols)
    edges = []
    for r in range(rows):
        for c in range(cols):
            v = r * cols + c
            for w in ([v + 1] if c + 1 < cols else []) + ([v + cols] if r + 1 < rows else []):
                edges.append((v, w) if rank[v] < rank[w] else (w, v))
    nodes = [Node(v, {"accelerator": 1.0 + float(rng.random())}, comm=2.0) for v in range(rows * cols)]
    return Graph(nodes, edges)


def test_the_first_coordinate_is_the_position_along_a_long_grid():
    rows, cols = 4, 30
    units = Units(MtppProblem(_grid(rows, cols), devices=4), fold_leaves=False)
    coords, part = spectral_order.embedding(units)
    assert coords.shape == (rows * cols, spectral_order.DIMS) and not part.any()
    x = np.asarray([v % cols for v in range(rows * cols)], dtype=float)
    at = {int(v): u for u, members in enumerate(units.members) for v in members}  # node -> unit
    first = np.asarray([coords[at[v], 0] for v in range(rows * cols)])
    assert abs(np.corrcoef(first, x)[0, 1]) > 0.98


def _grids(pieces: int, rows: int, cols: int) -> Graph:
    """``pieces`` separate grids (each as :func:`_grid`), nodes numbered piece after piece."""
    nodes, edges = [], []
    for p in range(pieces):
        g = _grid(rows, cols, seed=p)
        base = p * rows * cols
        nodes += [Node(base + nd.id, dict(nd.compute), comm=nd.comm) for nd in g.nodes]
        edges += [(base + u, base + v) for u, v in g.edges]
    return Graph(nodes, edges)


def test_each_part_is_embedded_on_its_own_and_swept_whole():
    pieces, rows, cols = 3, 4, 20
    units = Units(MtppProblem(_grids(pieces, rows, cols), devices=6), fold_leaves=False)
    coords, part = spectral_order.embedding(units)
    at = {int(v): u for u, members in enumerate(units.members) for v in members}
    size = rows * cols
    for p in range(pieces):
        mine = [at[p * size + v] for v in range(size)]
        assert set(part[mine].tolist()) == {p}  # (the parts numbered by their first unit)
        x = np.asarray([v % cols for v in range(size)], dtype=float)
        assert abs(np.corrcoef(coords[mine, 0], x)[0, 1]) > 0.98  # (its own first coordinate)
        prio = spectral_order.priorities(coords, part, np.eye(spectral_order.DIMS)[0])
        assert sorted(prio[mine].tolist()) == list(range(p * size, (p + 1) * size))  # (swept whole, in turn)
    # a piece's sweep is the one it gets alone: the same embedding (up to the sign fixed), the same ranks
    alone = Units(MtppProblem(_grid(rows, cols, seed=1), devices=2), fold_leaves=False)
    solo, _ = spectral_order.embedding(alone)
    mine = [at[size + v] for v in range(size)]
    assert np.allclose(coords[mine], solo[[{int(v): u for u, m in enumerate(alone.members) for v in m}[v]
                                           for v in range(size)]], atol=1e-8)


def test_an_eigenvector_and_its_negative_give_the_same_sweeps(monkeypatch):
    g = sc.regal_graph(150, model="watts_strogatz", seed=3)
    plain = slice_graph(g, devices=8, method="spectral-order", improve=False)
    real = spectral_order._eigh

    def flipped(mat):
        mu, z = real(mat)
        return mu, -z

    monkeypatch.setattr(spectral_order, "_eigh", flipped)
    again = slice_graph(g, devices=8, method="spectral-order", improve=False)
    assert [s.nodes for s in again.stages] == [s.nodes for s in plain.stages]


def test_seed_0_sweeps_the_axes_both_ways_first_then_random_directions():
    first = list(itertools.islice(spectral_order.directions(3, 0), 8))
    for j in range(3):
        assert np.array_equal(first[2 * j], np.eye(3)[j]) and np.array_equal(first[2 * j + 1], -np.eye(3)[j])
    other = list(itertools.islice(spectral_order.directions(3, 5), 4))
    assert all(np.linalg.norm(d) == pytest.approx(1.0) for d in first[6:] + other)
    assert not any(np.count_nonzero(d) == 1 for d in other)  # (no axis)
    assert all(np.array_equal(a, b) for a, b in zip(other, spectral_order.directions(3, 5)))  # (seeded)
    assert not np.array_equal(other[0], next(spectral_order.directions(3, 6)))


def test_the_plan_is_the_cheapest_sweep_and_repeated_rankings_are_cut_once():
    p = MtppProblem(sc.regal_graph(120, model="random_geometric", seed=2), devices=6)
    units = Units(p, fold_leaves=True)
    out = spectral_order.search(units, 6, 3, 12, "scan")
    coords, part = spectral_order.embedding(units)
    orders = [spectral_order.priorities(coords, part, d) for d in itertools.islice(spectral_order.directions(
        coords.shape[1], 3), 12)]
    distinct = list({o.tobytes(): o for o in orders}.values())
    each = [float(units.slice(6, "order", priorities=o, segment_costs="scan")["objective"]) for o in distinct]
    assert len(set(each)) > 2  # (the sweeps differ, or this proves nothing)
    assert out["decodes"] == len(distinct) and float(out["objective"]) == min(each)
    assert out["history"] == [min(each[: i + 1]) for i in range(len(each))]
    two = Units(MtppProblem(sc.Graph([Node(0, {"accelerator": 1.0}, comm=1.0), Node(1, {"accelerator": 2.0})],
                                     [(0, 1)]), devices=2), fold_leaves=False)
    assert spectral_order.search(two, 2, 0, 48, "scan")["decodes"] == 2  # (two units: two rankings)


def test_a_time_limit_during_the_sweeps_keeps_the_best_so_far(monkeypatch):
    p = MtppProblem(sc.regal_graph(120, model="random_geometric", seed=2), devices=6)
    units = Units(p, fold_leaves=True)
    seen = []
    real = Units.slice

    def slice_then_expire(self, *args, **kw):
        out = real(self, *args, **kw)
        seen.append(float(out["objective"]))
        if len(seen) == 3:
            monkeypatch.setattr(spectral_order, "expired", lambda: True)
        return out

    monkeypatch.setattr(Units, "slice", slice_then_expire)
    out = spectral_order.search(units, 6, 3, 12, "scan")
    assert out["time_limit_reached"] and out["decodes"] == 3 and float(out["objective"]) == min(seen)


def test_a_huge_budget_stops_at_the_time_limit():
    g = sc.regal_graph(40, model="watts_strogatz", seed=1)
    plan = slice_graph(g, devices=4, method="spectral-order", decodes=10**12, time_limit=0.5, improve=False)
    assert plan.objective is not None and plan.status == "time_limit"
    assert plan.stats["decodes"] < 10**6


@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
def test_never_below_the_optimum_and_scored_by_the_evaluator():
    found = 0
    for seed in range(300):
        p = random_problem(seed, n_max=9, k_max=4)
        plan = slice_graph(p, method="spectral-order", seed=seed % 3, decodes=6)
        opt = optimum_dp(p)
        if plan.objective is None:
            continue
        found += 1
        assert plan.objective >= opt * (1 - 1e-9) - 1e-9, seed
        assert evaluate(p, plan.stages).objective == pytest.approx(plan.objective, rel=1e-12)
        assert plan.method == "spectral-order" and plan.seed == seed % 3 and plan.stats["decodes"] <= 6
    assert found >= 200


@pytest.mark.parametrize(("model", "n"), [("watts_strogatz", 200), ("random_geometric", 300)])
def test_on_graphs_with_a_geometry_it_beats_searches_of_many_more_decodes(model, n):
    # measured: 4,017 against 4,534 (BRKGA) and 4,579 (arrangement) at 200 nodes; 7,120 against
    # 7,791 and 7,983 at 300
    g = sc.regal_graph(n, model=model, seed=0)
    mine = slice_graph(g, devices=8, method="spectral-order", improve=False)
    theirs = min(slice_graph(g, devices=8, method=m, decodes=2000, improve=False).objective
                 for m in ("brkga", "mla-weighted"))
    assert mine.stats["decodes"] == spectral_order.SWEEPS and mine.objective < 0.95 * theirs


def test_graphs_with_no_tensors_several_parts_or_one_node():
    parts = Graph([Node(v, {"accelerator": 1.0 + v}, comm=1.0) for v in range(8)], [(0, 1), (1, 2), (4, 5), (5, 6)])
    loose = Graph([Node(v, {"accelerator": 1.0}) for v in range(5)], [])
    single = Graph([Node(0, {"accelerator": 2.0})], [])
    for g, k in ((parts, 3), (loose, 2), (single, 2)):
        plan = slice_graph(g, devices=k, method="spectral-order")
        assert plan.objective == evaluate(MtppProblem(g, devices=k), plan.stages).objective
        assert plan.objective >= optimum_dp(MtppProblem(g, devices=k))


def test_the_time_limit_covers_the_eigendecomposition(monkeypatch):
    g = sc.regal_graph(60, model="watts_strogatz", seed=1)
    monkeypatch.setattr(spectral_order, "_seconds", lambda n: 1e9)  # never time for it
    plan = slice_graph(g, devices=4, method="spectral-order", time_limit=30)
    assert plan.objective is None and plan.status == "time_limit" and plan.stats["decodes"] == 0
    assert any("too short for its eigendecomposition" in n for n in plan.notes)
    auto = slice_graph(g, devices=4, method="auto", decodes=200, time_limit=30)
    assert auto.objective is not None and auto.stats["auto_method"] != "spectral-order"
    assert slice_graph(g, devices=4, method="spectral-order").objective is not None  # (no limit: no check)


def _blocked_eigh(monkeypatch) -> tuple[threading.Event, threading.Event]:
    """``np.linalg.eigh`` held until the first event is set (or 60 s); the second is set when it
    has returned."""
    release, finished = threading.Event(), threading.Event()
    real = np.linalg.eigh

    def held(mat):
        release.wait(60)
        try:
            return real(mat)
        finally:
            finished.set()

    monkeypatch.setattr(spectral_order.np.linalg, "eigh", held)
    return release, finished


def test_waiting_for_the_eigendecomposition_stops_at_the_time_limit(monkeypatch):
    release, finished = _blocked_eigh(monkeypatch)
    g = sc.regal_graph(60, model="watts_strogatz", seed=1)
    try:
        plan = slice_graph(g, devices=4, method="spectral-order", time_limit=1.0, improve=False)
        waited = finished.is_set()  # (the call returned without waiting for the decomposition)
    finally:
        release.set()
    assert plan.objective is None and plan.status == "time_limit" and not waited


def test_ctrl_c_during_the_eigendecomposition_raises_keyboard_interrupt(monkeypatch):
    release, finished = _blocked_eigh(monkeypatch)
    g = sc.regal_graph(60, model="barabasi_albert", seed=1)
    try:
        with ctrl_c_after(0.5), pytest.raises(KeyboardInterrupt):
            slice_graph(g, devices=4, method="spectral-order")
        waited = finished.is_set()
    finally:
        release.set()
    assert not waited


def test_too_many_units_are_refused_and_auto_leaves_the_method_out(monkeypatch, capsys):
    from stagecut.cli.main import main

    monkeypatch.setattr(spectral_order, "MAX_UNITS", 10)
    g = sc.regal_graph(30, seed=0)
    with pytest.raises(InvalidArgumentError, match=r"spectral-order.*at most 10 units.*has 30"):
        slice_graph(g, devices=4, method="spectral-order")
    runs = record_runs(monkeypatch)
    plan = slice_graph(g, devices=4, method="auto", decodes=100)
    assert runs == ["mla-weighted", "brkga", "mla"] and plan.objective is not None
    assert any("spectral-order left out: 30 units, more than 10" in n for n in plan.notes)
    capsys.readouterr()
    assert main(["slice", "regal:30", "-k", "4", "--method", "spectral-order"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "at most 10 units" in err[0]


def test_a_part_too_large_for_the_memory_budget_is_refused_before_allocation(monkeypatch):
    from stagecut import validate
    from stagecut.errors import MemoryLimitError

    monkeypatch.setattr(validate, "MEMORY_BUDGET", 3 * 8 * 40**2 - 1)  # (a part of 40 units is one byte over)
    units = Units(MtppProblem(_grid(4, 10), devices=2), fold_leaves=False)
    with pytest.raises(MemoryLimitError, match="spectral-order"):
        spectral_order.embedding(units)
    monkeypatch.setattr(validate, "MEMORY_BUDGET", 3 * 8 * 40**2)
    assert spectral_order.embedding(units)[0].shape == (40, spectral_order.DIMS)


def test_cli_method_spectral_order(capsys):
    from stagecut.cli.main import main

    capsys.readouterr()
    assert main(["slice", "regal:60:watts_strogatz:1", "-k", "8", "--method", "spectral-order", "--decodes", "10",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    g = sc.regal_graph(60, model="watts_strogatz", seed=1)
    api = slice_graph(g, devices=8, method="spectral-order", decodes=10)
    assert out["method"] == "spectral-order" and math.isclose(out["objective"], api.objective)
    for flag in ("--population", "--generations", "--islands"):
        assert main(["slice", "regal:20", "-k", "4", "--method", "spectral-order", flag, "5"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and flag in err[0]
