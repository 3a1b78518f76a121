"""The paper-form table of ``benches/mtpp_levels.py`` from planted bounds: per device count the
geometric mean of each level's bound over the certified plan, and the gap closed against
``simple``; graph names it cannot rebuild are refused."""

import math

import pytest

from helpers import bench_module


@pytest.fixture(scope="module")
def ml():
    return bench_module("mtpp_levels")


def rec(graph, k, plan, bound, simple, crossing=None):
    crossing = simple if crossing is None else crossing
    return {"graph": graph, "nodes": 100 if graph != "c" else 200, "devices": k, "method": "ladder", "plan": plan,
            "bound": bound, "simple": simple,
            "node-cut": simple, "crossing": crossing, "cover": crossing}


def test_the_table_is_the_geometric_mean_of_bound_over_plan(ml):
    recs = [rec("a", 8, 100.0, 90.0, 80.0, 85.0), rec("b", 8, 200.0, 160.0, 100.0),
            rec("a", 16, 50.0, 50.0, 30.0), rec("b", 16, 40.0, 40.0, 20.0), rec("c", 8, 10.0, 5.0, 4.0)]
    text = ml.table(recs)
    simple8, ladder8 = math.sqrt(0.8 * 0.5), math.sqrt(0.9 * 0.8)
    crossing8 = math.sqrt(0.85 * 0.5)
    closed = (1 - simple8) / (1 - ladder8)
    assert (f"| 100 | 8 | 2 | {simple8:.4f} | {simple8:.4f} | {crossing8:.4f} | {crossing8:.4f} | {ladder8:.4f} | "
            f"{closed:.1f}x |") in text
    assert "| 100 | 16 | 2 | " in text and "| 1.0000 | every instance proven |" in text.split("| 100 | 16 |")[1]
    # sizes apart, sizes then k ascending
    assert text.index("| 100 | 8 |") < text.index("| 100 | 16 |") < text.index("| 200 | 8 | 1 | 0.4000 |")
    assert text.rstrip().endswith(f"| 0.5000 | {(1 - 0.4) / (1 - 0.5):.1f}x |")


def test_graph_names_it_cannot_rebuild_are_refused(ml):
    g = ml.graph_of("regal:12:erdos_renyi:3")
    assert len(g.nodes) == 12
    for bad in ("example:transformer", "regal:12:erdos_renyi", "models/x.json"):
        with pytest.raises(SystemExit, match="regal:N:MODEL:SEED"):
            ml.graph_of(bad)


def test_operator_graphs_are_read_from_their_files_with_the_task_settings(ml):
    import pathlib

    base = pathlib.Path(__file__).resolve().parents[1]  # tests/: as the sweep file names them
    g = ml.graph_of("data/opgraphs/resnet50.json", base)
    assert len(g.nodes) == 175
    with pytest.raises(SystemExit, match="not found"):
        ml.graph_of("data/opgraphs/nothing.json", base)
    # the task's memory and colocation, as the sweep solved it
    row = {"memory": "none", "options": '{"levels": ["simple"], "colocate": false}'}
    assert ml.settings_of(row, g) == {"memory": math.inf, "colocate": False}
    file_row = {"memory": "file", "options": "{}"}
    assert ml.settings_of(file_row, g) == {"memory": float(g.defaults["memory"]), "colocate": None}
    assert ml.settings_of({"memory": "1KB", "options": None}, g)["memory"] == 1000.0


def test_operator_graphs_are_one_group_after_the_regal_sizes(ml):
    recs = [rec("a", 8, 100.0, 90.0, 80.0), rec("c", 8, 10.0, 5.0, 4.0),
            {**rec("ops1", 8, 10.0, 10.0, 5.0), "nodes": 175, "group": ml.OPS},
            {**rec("ops2", 8, 20.0, 10.0, 10.0), "nodes": 1836, "group": ml.OPS}]
    text = ml.table(recs)
    line = [x for x in text.splitlines() if x.startswith(f"| {ml.OPS} | 8 |")]
    assert line and line[0].startswith(f"| {ml.OPS} | 8 | 2 | {math.sqrt(0.5 * 0.5):.4f} |")
    assert text.index("| 100 | 8 |") < text.index("| 200 | 8 |") < text.index(f"| {ml.OPS} | 8 |")
    # the same operator graph under a memory limit is an instance of its own, in a group of its own
    limited = {**recs[2], "memory": "file", "bound": 8.0}
    text = ml.table([*recs, limited])
    assert f"| {ml.OPS}, memory file | 8 | 1 | " in text and f"| {ml.OPS} | 8 | 2 | " in text


def test_the_plot_draws_each_group_s_geometric_means_against_k(ml):
    recs = [rec("a", 8, 100.0, 90.0, 80.0), rec("b", 8, 200.0, 160.0, 100.0), rec("a", 16, 50.0, 50.0, 30.0),
            {**rec("ops1", 8, 10.0, 10.0, 5.0), "nodes": 175, "group": ml.OPS}]
    fig = ml.plot(recs)
    try:
        ladder, simple = fig.axes
        lines = {ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata())) for ln in ladder.get_lines()
                 if not ln.get_label().startswith("_")}
        xs, ys = lines["REGAL, 100 nodes"]
        assert xs == [8, 16] and ys == pytest.approx([math.sqrt(0.9 * 0.8), 1.0])
        assert lines[ml.OPS] == ([8], [1.0])
        simple_lines = {ln.get_label(): list(ln.get_ydata()) for ln in simple.get_lines()}
        assert simple_lines["REGAL, 100 nodes"] == pytest.approx([math.sqrt(0.8 * 0.5), 0.6])
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_each_level_is_measured_on_the_row_s_instance(ml):
    import stagecut as sc

    row = {"graph": "regal:12:barabasi_albert:1", "devices": 3, "method": "ladder", "objective": 1e9,
           "lower_bound": 0.0, "memory": "file", "options": "{}"}
    (rec,) = ml.measure([row], time_limit=5.0)
    g = sc.regal_graph(12, model="barabasi_albert", seed=1)
    for level in ml.LEVELS:
        assert rec[level] == pytest.approx(sc.mtpp_bound(g, level=level, devices=3, time_limit=5.0).bound)
        assert rec[level + "_status"] in ("optimal", "feasible", "time_limit")
    assert rec["simple"] <= rec["crossing"] <= rec["cover"] and rec["group"] == 12


def test_runs_of_one_instance_at_two_budgets_are_never_averaged_together(ml):
    a60 = {**rec("a", 16, 100.0, 88.0, 80.0), "time_limit": 60.0, "memory": "file"}
    a600 = {**a60, "time_limit": 600.0, "bound": 92.0}
    assert ml.instance(a60) != ml.instance(a600)
    with pytest.raises(SystemExit, match="twice"):
        ml.table([a60, a600])
    assert "| 100 | 16 | 1 |" in ml.table([a600])


def test_the_ladder_columns_climb_from_the_rows_detail(ml):
    import json

    levels = [["simple", 70.0, "optimal", 0.0], ["cover", 75.0, "optimal", 1.0], ["spectral", 82.0, "optimal", 2.0],
              ["exact", None, "time_limit", 9.0], ["block", 80.0, "optimal", 3.0]]
    detail = {"bound_source": "spectral", "levels": levels}
    row = {"graph": "regal:100:erdos_renyi:0", "devices": 8, "method": "ladder", "memory": "none", "time_limit": 60.0,
           "objective": 100.0, "lower_bound": 82.0, "detail": json.dumps(detail)}
    r = ml.ladder_one(row)
    # a level with no bound, or a lower one, keeps the best before it
    assert [r[lv] for lv in ("simple", "cover", "spectral", "exact", "block")] == [70.0, 75.0, 82.0, 82.0, 82.0]
    assert r["group"] == 100 and r["exact_status"] == "time_limit" and r["spectral_s"] == 2.0
    text = ml.table([r], ("simple", "cover", "spectral", "exact", "block"))
    assert "| 100 | 8 | 1 | 0.7000 | 0.7500 | 0.8200 | 0.8200 | 0.8200 | 0.8200 | 1.7x |" in text
    with pytest.raises(SystemExit, match="no detail column"):
        ml.ladder_one({**row, "detail": None})


def test_a_cheaper_partition_the_ladder_found_is_the_plan_its_bounds_are_set_against(ml):
    import json

    # the plan costs 100; the subgraph level's DP found and proved a partition of 90
    levels = [["simple", 70.0, "optimal", 0.0], ["subgraph", 90.0, "optimal", 5.0]]
    detail = {"bound_source": "subgraph", "levels": levels, "best_objective": 90.0}
    row = {"graph": "regal:100:erdos_renyi:0", "devices": 8, "method": "ladder", "memory": "none", "time_limit": 60.0,
           "objective": 100.0, "lower_bound": 90.0, "detail": json.dumps(detail)}
    r = ml.ladder_one(row)
    assert r["plan"] == 90.0 and r["subgraph"] == 90.0
    assert "| 100 | 8 | 1 | 0.7778 | 1.0000 | 1.0000 | every instance proven |" in ml.table([r], ("simple", "subgraph"))
    assert ml.ladder_one({**row, "detail": json.dumps({**detail, "best_objective": None})})["plan"] == 100.0
