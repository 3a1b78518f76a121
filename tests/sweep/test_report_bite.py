"""The sweep report's text, pinned character by character: what a reader or a spreadsheet sees."""

import csv
import io

from stagecut.sweep import format_report, summarize
from stagecut.sweep.report import SummaryRow


def _rows():
    full = SummaryRow(devices=2, method="all", instances=3, solved=2, errors=1, n_ratio=2,
                      bound_best=0.123456789, answer_baseline=1.0 / 3.0, optimal=2.0 / 3.0,
                      runtime_p50=0.123456, runtime_p90=12.3456, runtime_max=1234.5678)
    empty = SummaryRow(devices=4, method="dp {\"a\": 1}", instances=1, solved=0, errors=1, n_ratio=0,
                       bound_best=None, answer_baseline=None, optimal=0.0,
                       runtime_p50=None, runtime_p90=None, runtime_max=None)
    return [full, empty]


def test_the_csv_report_keeps_full_precision_and_leaves_missing_values_empty():
    text = format_report(_rows(), "csv")
    assert text == (
        "devices,method,instances,solved,errors,n_ratio,bound_best,answer_baseline,optimal,"
        "runtime_p50,runtime_p90,runtime_max\n"
        "2,all,3,2,1,2,0.123456789,0.3333333333333333,0.6666666666666666,0.123456,12.3456,1234.5678\n"
        '4,"dp {""a"": 1}",1,0,1,0,,,0.0,,,\n')
    back = list(csv.reader(io.StringIO(text)))
    assert back[2][1] == 'dp {"a": 1}' and float(back[1][7]) == 1.0 / 3.0


def test_the_markdown_report_rounds_to_four_digits_and_times_to_three():
    text = format_report(_rows(), "markdown", baseline="dpl")
    assert text.splitlines() == [
        "| k | method | instances | solved | errors | bound/answer (gmean) | answer/dpl (gmean) | proven optimal "
        "| time p50 (s) | time p90 (s) | time max (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        "| 2 | all | 3 | 2 | 1 | 0.1235 | 0.3333 | 67% | 0.123 | 12.3 | 1.23e+03 |",
        '| 4 | dp {"a": 1} | 1 | 0 | 1 | - | - | 0% | - | - | - |',
    ]
    assert text.endswith(" |\n") and format_report(_rows()) == format_report(_rows(), "markdown", None)
    assert "answer/baseline (gmean)" in format_report(_rows())


def _r(graph, method, obj, lb, status, **kw):
    return {"graph": graph, "devices": 2, "method": method, "objective": obj, "lower_bound": lb,
            "status": status, "runtime_s": 1.0, **kw}


def test_an_empty_table_summarizes_to_nothing():
    assert summarize([]) == ()
    assert summarize([], baseline=None) == ()


def test_a_row_without_options_is_labelled_by_its_method_alone():
    rows = [_r("a", "dp", 4.0, 4.0, "optimal"), _r("a", "dpl", 5.0, 2.0, "feasible", options=None),
            _r("a", "ip", 4.0, 4.0, "optimal", options="")]
    assert [s.method for s in summarize(rows)] == ["all", "dp", "dpl", "ip"]


def test_an_answer_that_is_not_finite_is_not_a_solved_instance():
    rows = [_r("a", "dp", 4.0, 4.0, "optimal"), _r("a", "h", float("inf"), None, "infeasible"),
            _r("b", "dp", 6.0, 6.0, "optimal"), _r("b", "h", 7.0, 1.0, "error")]
    s = {r.method: r for r in summarize(rows)}
    assert (s["h"].instances, s["h"].solved, s["h"].errors, s["h"].n_ratio) == (2, 0, 1, 0)
    assert s["h"].bound_best is None and s["h"].answer_baseline is None and s["h"].optimal == 0.0
    assert (s["all"].solved, s["all"].optimal) == (2, 1.0)
