"""The results table (Parquet parts, atomic, read back) and the summaries, held to values computed
by hand and by a plain reference over random tables."""

import math
import random
import statistics

import pytest

from frontends.extras import require_extra
from stagecut.errors import InvalidArgumentError
from stagecut.sweep import COLUMNS, format_report, read_results, summarize, write_row


@pytest.fixture(autouse=True)
def _extra():
    require_extra("pyarrow", "sweep")


def _row(graph, k, method, obj, lb, status, t=1.0, **kw):
    return {"key": f"{graph}-{k}-{method}", "problem": "throughput", "graph": graph, "devices": k, "method": method,
            "options": "{}", "memory": "file", "seed": 0, "objective": obj, "lower_bound": lb, "status": status,
            "runtime_s": t, **kw}


def test_table_round_trip_and_replace(tmp_path):
    rows = [_row("a", 2, "dp", 4.0, 4.0, "optimal", finished_at=1.0),
            _row("a", 2, "dpl", None, None, "error", error="ValueError: boom", finished_at=2.0),
            _row("b", 2, "dp", 5.5, float("nan"), "feasible", finished_at=3.0)]
    for r in rows:
        write_row(str(tmp_path), r)
    back = read_results(tmp_path)
    assert [r["key"] for r in back] == ["a-2-dp", "a-2-dpl", "b-2-dp"]
    assert back[1]["error"] == "ValueError: boom" and back[1]["objective"] is None
    assert back[2]["lower_bound"] is None  # NaN is stored as null
    assert set(back[0]) == {name for name, _ in COLUMNS}
    # a re-run of a task replaces its part: one row per key, the last one
    write_row(str(tmp_path), _row("a", 2, "dpl", 6.0, 3.0, "feasible", finished_at=4.0))
    again = {r["key"]: r for r in read_results(tmp_path)}
    assert len(again) == 3 and again["a-2-dpl"]["objective"] == 6.0 and again["a-2-dpl"]["error"] is None
    assert [r["key"] for r in read_results(tmp_path, keys=["b-2-dp"])] == ["b-2-dp"]
    assert not [f for f in tmp_path.iterdir() if not f.name.startswith("part-")]  # no temporary files left


def test_bad_tables(tmp_path):
    (tmp_path / "part-x.parquet").write_text("not parquet")
    with pytest.raises(InvalidArgumentError, match="part-x.parquet"):
        read_results(tmp_path)
    with pytest.raises(InvalidArgumentError, match="^key"):
        write_row(str(tmp_path), {"graph": "g"})
    assert read_results(tmp_path / "missing") == []


def test_summary_by_hand():
    rows = [_row("a", 2, "dp", 4.0, 4.0, "optimal", 1.0), _row("a", 2, "dpl", 5.0, 2.0, "feasible", 3.0),
            _row("b", 2, "dp", 8.0, 8.0, "optimal", 2.0), _row("b", 2, "dpl", 10.0, 1.0, "feasible", 4.0),
            _row("a", 4, "dp", None, None, "error", 0.0), _row("a", 4, "dpl", 3.0, 1.5, "feasible", 5.0)]
    s = {(r.devices, r.method): r for r in summarize(rows)}
    # k=2: best (4, 8), bound (4, 8) -> proven everywhere; dpl is 5/4 and 10/8 of the best
    assert s[2, "all"].bound_best == pytest.approx(1.0) and s[2, "all"].optimal == 1.0
    assert s[2, "all"].answer_baseline == pytest.approx(1.0)  # baseline: the first method, dp
    assert s[2, "dpl"].bound_best == pytest.approx(0.8) and s[2, "dpl"].answer_baseline == pytest.approx(1.25)
    assert s[2, "dpl"].optimal == 0.0
    assert (s[2, "all"].runtime_p50, s[2, "all"].runtime_max) == (2.5, 4.0)
    assert s[2, "dpl"].runtime_p90 == pytest.approx(3.9)
    # k=4: dp failed, dpl's answer 3 with bound 1.5; no baseline answer
    assert s[4, "all"].bound_best == pytest.approx(0.5) and s[4, "all"].answer_baseline is None
    assert s[4, "dp"].errors == 1 and s[4, "dp"].solved == 0 and s[4, "dp"].runtime_p50 is None
    by_dpl = {(r.devices, r.method): r for r in summarize(rows, baseline="dpl")}
    assert by_dpl[2, "dp"].answer_baseline == pytest.approx(0.8) and by_dpl[4, "all"].answer_baseline == 1.0
    with pytest.raises(InvalidArgumentError, match="^baseline"):
        summarize(rows, baseline="ip")
    md = format_report(summarize(rows), "markdown", "dp")
    assert "| 2 | dpl | 2 | 2 | 0 | 0.8 | 1.25 | 0% | 3.5 | 3.9 | 4 |" in md.splitlines()
    csv_lines = format_report(summarize(rows), "csv").splitlines()
    assert csv_lines[0].startswith("devices,method,instances") and len(csv_lines) == 1 + len(s)
    with pytest.raises(InvalidArgumentError, match="^format"):
        format_report(summarize(rows), "html")


def _reference(rows, k, baseline):
    """The k row over all methods, computed plainly with statistics.geometric_mean."""
    graphs = sorted({r["graph"] for r in rows if r["devices"] == k})
    ratios, vs_base, proven = [], [], 0
    for g in graphs:
        mine = [r for r in rows if r["devices"] == k and r["graph"] == g and r["status"] != "error"]
        answers = [r["objective"] for r in mine if r["objective"] is not None]
        if not answers:
            continue
        best = min(answers)
        bounds = [r["lower_bound"] for r in mine if r["lower_bound"] is not None]
        bounds += [r["objective"] for r in mine if r["status"] == "optimal"]
        if bounds:
            ratios.append(max(bounds) / best)
            proven += max(bounds) >= best * (1 - 1e-9) - 1e-9
        base = [r["objective"] for r in mine if r["method"] == baseline and r["objective"] is not None]
        if base:
            vs_base.append(best / base[0])
    return statistics.geometric_mean(ratios), statistics.geometric_mean(vs_base), proven / len(graphs)


def test_summary_matches_a_plain_reference_on_random_tables():
    rng = random.Random(5)
    for _ in range(20):
        rows = []
        for g in range(rng.randint(1, 6)):
            for k in (2, 4):
                opt = rng.uniform(1, 10)
                for m in ("dp", "dpl", "ip"):
                    if rng.random() < 0.1:
                        rows.append(_row(f"g{g}", k, m, None, None, "error"))
                        continue
                    exact = m == "dp" or rng.random() < 0.3
                    obj = opt if exact else opt * rng.uniform(1, 1.5)
                    rows.append(_row(f"g{g}", k, m, obj, obj if exact else opt * rng.uniform(0.5, 1),
                                     "optimal" if exact else "feasible", rng.uniform(0, 3)))
        s = {(r.devices, r.method): r for r in summarize(rows, baseline="ip")}
        for k in (2, 4):
            if (k, "all") not in s or s[k, "all"].answer_baseline is None or s[k, "all"].bound_best is None:
                continue
            bb, ab, opt_share = _reference(rows, k, "ip")
            assert math.isclose(s[k, "all"].bound_best, bb, rel_tol=1e-9)
            assert math.isclose(s[k, "all"].answer_baseline, ab, rel_tol=1e-9)
            assert s[k, "all"].optimal == pytest.approx(opt_share)


def test_the_report_plot_draws_the_summary(tmp_path, capsys):
    require_extra("matplotlib", "plot")
    import matplotlib.pyplot as plt

    from stagecut.cli import main
    from stagecut.sweep.plot import plot_summary

    rows = [_row("a", 2, "dp", 4.0, 4.0, "optimal"), _row("a", 2, "dpl", 5.0, 2.0, "feasible"),
            _row("a", 4, "dp", 3.0, 3.0, "optimal"), _row("a", 4, "dpl", 3.0, 1.5, "feasible")]
    summary = summarize(rows)
    fig = plot_summary(summary)
    ratio, optimal = ({line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.get_lines()}
                      for ax in fig.axes)
    plt.close(fig)
    want = {(r.devices, r.method): r for r in summary}
    for method in ("dp", "dpl", "all"):
        assert ratio[method] == ([2, 4], [want[2, method].bound_best, want[4, method].bound_best])
        assert optimal[method] == ([2, 4], [want[2, method].optimal, want[4, method].optimal])
    with pytest.raises(InvalidArgumentError, match="^summary"):
        plot_summary([])
    for r in rows:
        write_row(str(tmp_path / "t"), r)
    png = tmp_path / "summary.png"
    assert main(["sweep", "--report", str(tmp_path / "t"), "--plot", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_the_newest_of_two_rows_with_one_key_wins_in_either_order(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    old = {**{name: None for name, _ in COLUMNS}, **_row("a", 2, "dp", 9.0, 1.0, "feasible", finished_at=1.0)}
    new = {**old, "objective": 4.0, "lower_bound": 4.0, "status": "optimal", "finished_at": 2.0}
    for order in ([old, new], [new, old]):
        path = tmp_path / f"two-{order[0]['finished_at']}.parquet"
        pq.write_table(pa.Table.from_pylist(order), path)
        (back,) = read_results(path)
        assert (back["objective"], back["status"], back["finished_at"]) == (4.0, "optimal", 2.0)


def test_an_optimal_answer_without_a_bound_is_its_own_bound():
    # dp says optimal (4.0) but stores no lower bound; dpl finds 5.0 with none: the instance's bound is 4.0
    rows = [_row("a", 2, "dp", 4.0, None, "optimal"), _row("a", 2, "dpl", 5.0, None, "feasible")]
    by = {r.method: r for r in summarize(rows, baseline="dp")}
    assert by["dp"].bound_best == pytest.approx(1.0) and by["dp"].optimal == 1.0
    assert by["dpl"].bound_best == pytest.approx(0.8) and by["dpl"].optimal == 0.0
