"""The results table and its summary: the branches the main tests did not reach (coverage),
checked against values worked out by hand."""

from __future__ import annotations

import math
import os

import pytest

from helpers import hide_module
from stagecut.errors import BackendUnavailableError, InvalidArgumentError
from stagecut.sweep.report import format_report, summarize
from stagecut.sweep.table import read_results, write_row

from .extras import require_sweep_extra


@pytest.fixture(autouse=True)
def _pyarrow():
    require_sweep_extra()


def row(key, graph, devices, method, objective, *, lb=None, status="feasible", options="{}", t=1.0, at=0.0):
    return {"key": key, "problem": "throughput", "graph": graph, "devices": devices, "method": method,
            "options": options, "objective": objective, "lower_bound": lb, "status": status, "runtime_s": t,
            "finished_at": at}


def test_a_row_without_a_key_is_refused(tmp_path):
    for bad in ({}, {"key": ""}, {"key": 3}):
        with pytest.raises(InvalidArgumentError, match="^key:"):
            write_row(str(tmp_path), bad)
    assert not os.listdir(tmp_path)


def test_a_path_that_is_neither_a_directory_nor_a_file_is_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InvalidArgumentError, match="neither a directory nor a Parquet file"):
        read_results(fifo)


def test_a_parquet_file_without_a_column_is_named(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"key": ["a"], "problem": ["throughput"]}), path)
    with pytest.raises(InvalidArgumentError, match="no column 'graph'"):
        read_results(path)


def test_without_pyarrow_the_table_says_how_to_install_it(tmp_path, monkeypatch):
    hide_module(monkeypatch, "pyarrow")
    with pytest.raises(BackendUnavailableError, match=r"stagecut\[sweep\]"):
        read_results(tmp_path)
    with pytest.raises(BackendUnavailableError, match=r"stagecut\[sweep\]"):
        write_row(str(tmp_path), {"key": "a"})


def test_a_summary_of_a_table_path_equals_that_of_its_rows(tmp_path):
    rows = [row("a", "g1", 2, "dp", 4.0, lb=4.0, status="optimal", at=1.0),
            row("b", "g1", 2, "dpl", 5.0, lb=2.0, at=2.0),
            row("c", "g2", 2, "dp", 8.0, lb=8.0, status="optimal", at=3.0)]
    for r in rows:
        write_row(str(tmp_path), r)
    assert summarize(tmp_path) == summarize(read_results(tmp_path)) == summarize(str(tmp_path))


def test_baseline_by_method_name_when_the_table_labels_it_with_options():
    rows = [row("a", "g1", 2, "dp", 4.0, lb=4.0, status="optimal"),
            row("b", "g1", 2, "sa", 5.0, options='{"seed": 1}'),
            row("c", "g2", 2, "dp", 9.0, lb=9.0, status="optimal"),
            row("d", "g2", 2, "sa", 12.0, options='{"seed": 1}')]
    by = {r.method: r for r in summarize(rows, baseline="sa")}
    assert set(by) == {"all", "dp", 'sa {"seed": 1}'}
    # answers over the baseline's: dp 4/5 and 9/12, geometric mean sqrt(0.8 * 0.75)
    assert by["dp"].answer_baseline == pytest.approx(math.sqrt(0.8 * 0.75))
    assert by['sa {"seed": 1}'].answer_baseline == pytest.approx(1.0)
    with pytest.raises(InvalidArgumentError, match="'ls' is not a method of the table"):
        summarize(rows, baseline="ls")
    assert "answer/sa (gmean)" in format_report(summarize(rows, baseline="sa"), baseline="sa")


def test_a_method_that_ran_on_some_instances_or_device_counts_only():
    rows = [row("a", "g1", 2, "dp", 4.0, lb=4.0, status="optimal"),
            row("b", "g2", 2, "dp", 6.0, lb=6.0, status="optimal"),
            row("c", "g1", 2, "sa", 5.0),  # sa did not run on g2
            row("d", "g1", 3, "dp", 3.0, lb=3.0, status="optimal")]  # nor on 3 devices
    out = summarize(rows)
    assert [(r.devices, r.method, r.instances, r.solved) for r in out] == [
        (2, "all", 2, 2), (2, "dp", 2, 2), (2, "sa", 1, 1), (3, "all", 1, 1), (3, "dp", 1, 1)]
    sa = out[2]
    assert sa.bound_best == pytest.approx(4.0 / 5.0) and sa.optimal == 0.0 and sa.n_ratio == 1
    assert sa.answer_baseline == pytest.approx(5.0 / 4.0)  # the baseline: dp, the table's first method
    with pytest.raises(InvalidArgumentError, match="format"):
        format_report(out, "html")


def test_an_unreadable_part_with_an_empty_message_is_named_by_its_type(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    write_row(str(tmp_path), {"key": "a"})
    monkeypatch.setattr(pq, "read_table", lambda *a, **kw: (_ for _ in ()).throw(OSError()))
    with pytest.raises(InvalidArgumentError, match=r"not a Parquet results table \(OSError\)"):
        read_results(tmp_path)


def test_two_memory_values_are_two_instances():
    rows = [{**row("a", "g1", 2, "dp", 4.0, lb=4.0, status="optimal"), "memory": "1GB"},
            {**row("b", "g1", 2, "dp", 6.0, lb=6.0, status="optimal"), "memory": "2GB"},
            {**row("c", "g1", 2, "sa", 5.0), "memory": "1GB"},
            {**row("d", "g1", 2, "sa", 6.0), "memory": "2GB"}]
    by = {r.method: r for r in summarize(rows)}
    assert by["all"].instances == by["sa"].instances == 2
    # sa against the bound of its own memory: 4/5 and 6/6, not one merged instance
    assert by["sa"].bound_best == pytest.approx(math.sqrt(0.8)) and by["sa"].optimal == 0.5


def _two_rows_file(path, first, second):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from stagecut.sweep.table import COLUMNS

    blank = {name: None for name, _ in COLUMNS}
    pq.write_table(pa.Table.from_pylist([{**blank, **first}, {**blank, **second}]), path)
    (back,) = read_results(path)
    return back


def test_a_row_without_a_finish_time_is_older_than_any_with_one(tmp_path):
    timed = {**row("a", "g", 2, "dp", 4.0, at=0.5), "status": "optimal"}
    untimed = {**row("a", "g", 2, "dp", 9.0), "finished_at": None}
    for i, order in enumerate(([untimed, timed], [timed, untimed])):
        back = _two_rows_file(tmp_path / f"t{i}.parquet", *order)
        assert (back["objective"], back["finished_at"]) == (4.0, 0.5)


def test_of_two_rows_finished_at_the_same_time_the_later_one_wins(tmp_path):
    # a part rewritten in place (or rows appended without a time): the last row written is the one kept
    for i, at in enumerate((None, 3.0)):
        first, second = row("a", "g", 2, "dp", 9.0, at=at), row("a", "g", 2, "dp", 4.0, at=at)
        assert _two_rows_file(tmp_path / f"s{i}.parquet", first, second)["objective"] == 4.0
        assert _two_rows_file(tmp_path / f"r{i}.parquet", second, first)["objective"] == 9.0


def test_a_part_keeps_the_tables_column_types(tmp_path):
    # whole numbers given for float columns come back as floats, a missing one as None
    write_row(str(tmp_path), {**row("a", "g", 2, "dp", 4, lb=3, t=2), "seed": 1})
    (back,) = read_results(tmp_path)
    assert [type(back[c]) for c in ("objective", "lower_bound", "runtime_s", "devices", "seed")] == \
        [float, float, float, int, int]
    assert back["gap"] is None and back["error"] is None


def test_every_part_has_the_tables_schema(tmp_path):
    # so the directory reads as one Parquet dataset whatever each row left empty
    import pyarrow as pa
    import pyarrow.parquet as pq

    from stagecut.sweep.table import COLUMNS

    a = write_row(str(tmp_path), {**row("a", "g", 2, "dp", 4.0), "status": "error", "error": "ValueError: x"})
    b = write_row(str(tmp_path), row("b", "g", 2, "dp", None))
    assert pq.read_schema(a).remove_metadata() == pq.read_schema(b).remove_metadata()
    assert [f.name for f in pq.read_schema(b)] == [name for name, _ in COLUMNS]
    schema = pq.read_schema(b)
    assert schema.field("error").type == pa.string() and schema.field("objective").type == pa.float64()
    assert pq.read_table(str(tmp_path)).num_rows == 2


def test_a_part_written_before_the_detail_column_reads_with_it_null(tmp_path):
    # a results table from an older release lacks ``detail``: it still reads, the column null;
    # one that lacks any other column is not a results table
    import pyarrow as pa
    import pyarrow.parquet as pq

    from stagecut.errors import InvalidArgumentError
    from stagecut.sweep.table import COLUMNS

    old = {name: None for name, _ in COLUMNS if name != "detail"}
    pq.write_table(pa.Table.from_pylist([{**old, **row("a", "g", 2, "dp", 4.0, at=1.0)}]), tmp_path / "part-a.parquet")
    (back,) = read_results(tmp_path)
    assert back["detail"] is None and back["objective"] == 4.0 and set(back) == {name for name, _ in COLUMNS}
    broken = {name: None for name, _ in COLUMNS if name not in ("detail", "status")}
    pq.write_table(pa.Table.from_pylist([{**broken, "key": "b"}]), tmp_path / "part-b.parquet")
    with pytest.raises(InvalidArgumentError, match="no column 'status'"):
        read_results(tmp_path)
