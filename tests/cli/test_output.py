"""The human output says what is true of the input at hand, in units a person reads."""

import json
import re

import pytest

import stagecut as sc
from stagecut.cli._common import as_flags, saved_display
from stagecut.results import format_ranges, node_list_notes
from stagecut.units import Display


def test_ranges_are_sorted_and_cut_in_words():
    assert format_ranges([4, 1, 3, 2]) == "1-4"
    assert format_ranges([9, 1, 5]) == "1, 5, 9"
    assert format_ranges(list(range(0, 100, 2)), limit=12) == "0, 2, 4, 6, ... and 46 more"


def test_footnotes_only_when_true():
    single = [sc.Stage(index=0, device="a", nodes=(1, 3, 5), load=1.0)]
    ranged = [sc.Stage(index=0, device="a", nodes=(1, 2, 3), load=1.0)]
    long = [sc.Stage(index=0, device="a", nodes=tuple(range(0, 200, 2)), load=1.0)]
    assert node_list_notes(single) == []
    assert node_list_notes(ranged) == ["ids a-b: every id from a to b"]
    assert node_list_notes(long) == ["lists cut short: the full lists are in --json and -o FILE"]


def test_memory_in_the_unit_given_else_one_that_fits(run, big_chain):
    code, out, _ = run("partition", big_chain, "--memory", "16GiB")
    assert code == 0 and "settings   2 accelerators, 0 CPUs, memory 16 GiB per accelerator" in out
    head = next(line for line in out.splitlines() if line.startswith("stage "))
    assert "memory (GiB)" in head and "load" in head
    code, out, _ = run("partition", big_chain, "--memory", str(16 * 2**30))
    assert "memory (GiB)" in out and "16 GiB per accelerator" in out  # plain bytes: a binary unit that fits
    code, out, _ = run("partition", big_chain, "--memory", "17.2GB")
    assert "memory (GB)" in out and "17.2 GB per accelerator" in out
    assert not re.search(r"\de[+-]\d", out), out


def test_notes_of_a_built_in_example_name_no_file(run):
    code, out, _ = run("partition", "example:transformer")
    assert code == 0 and "file" not in out
    assert "note       --devices 4 (from the defaults of example:transformer)" in out.splitlines()
    assert "note       --cpus 1 (from the defaults of example:transformer)" in out.splitlines()
    assert "devices=" not in out and "cpus=" not in out


def test_show_prints_the_units_the_result_was_given_in(run, big_chain, tmp_path):
    saved = tmp_path / "r.json"
    code, out, _ = run("partition", big_chain, "--memory", "16GiB", "-o", saved)
    data = json.loads(saved.read_text())
    assert data["units"] == {"time": "ms", "memory": "bytes", "shown": {"memory": "GiB", "bandwidth": None}}
    code, shown, _ = run("show", saved)
    assert code == 0 and shown.splitlines()[5:] == out.splitlines()[5:-1]


@pytest.mark.parametrize("units", [None, 7, "ms", {"time": "<script>", "memory": 5, "shown": [1]},
                                   {"time": "ms", "shown": {"memory": "lots", "bandwidth": "GB"}}])
def test_saved_units_from_a_file_are_checked(units):
    d = saved_display({"units": units})
    assert isinstance(d, Display) and d.time in (None, "ms") and d.memory is None and d.bandwidth is None


def test_library_notes_carry_the_inputs_units_on_the_command_line(run, tmp_path):
    """auto's ``methods:`` note lists answers in the input's time unit; its bound note does not
    read like the ``met`` heuristic; certify's cheaper partition has a unit and says where its
    stages are (the JSON key ``best_stages``, which --json and -o FILE hold)."""
    code, out, _ = run("latency", "example:chain", "-k", "2", "--time-limit", "5")
    notes = [line[len("note       "):] for line in out.splitlines() if line.startswith("note ")]
    methods = [n for n in notes if n.startswith("methods")]
    assert code == 0 and len(methods) == 1 and methods[0].startswith("methods (ms): "), notes
    assert all("(met:" not in n for n in notes), notes
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"blocks": [[0], [1, 2, 3, 4, 5, 6, 7]]}))  # 4 | 17: the optimum is 10.5
    code, out, _ = run("certify", "example:chain", split, "-k", "2", "--levels", "simple,exact", "-q")
    assert code == 0 and ("note       the exact MIP found a cheaper partition (cost 10.5 ms): its stages are "
                          "best_stages in --json and -o FILE") in out.splitlines(), out
    data = run.json("certify", "example:chain", split, "-k", "2", "--levels", "exact", "-q")
    assert data["best_objective"] == 10.5 and data["best_stages"]
    # the LP over every block, named on the command line: within its bisection's last step of the
    # optimum (10.5), far above the simple bound (9)
    data = run.json("certify", "example:chain", split, "-k", "2", "--levels", "simple,partition-lp", "-q")
    assert [lv["level"] for lv in data["levels"]] == ["simple", "partition-lp"], data["levels"]
    assert 10.4 < data["levels"][1]["bound"] <= 10.5, data["levels"]


def test_sweep_progress_lines_tell_the_tasks_apart():
    from stagecut.cli.sweep import progress_line

    row = {"graph": "g.json", "devices": 2, "method": "dp", "memory": "file", "seed": 0, "time_limit": None,
           "options": "{}", "status": "optimal", "objective": 3.0, "runtime_s": 0.5}
    lines = {progress_line({**row, **change}, 1, 9) for change in (
        {}, {"memory": "1GiB"}, {"memory": "2GiB"}, {"seed": 1}, {"time_limit": 60.0}, {"options": '{"q": 2}'})}
    assert len(lines) == 6, lines
    assert progress_line({**row, "status": "infeasible", "objective": None}, 3, 9) == \
        "[3/9] g.json k=2 dp: infeasible, in 0.50 s"
    assert progress_line({**row, "status": "error", "objective": None, "error": "boom"}, 3, 9) == \
        "[3/9] g.json k=2 dp: error: boom, in 0.50 s"


#: what the library writes -> what the command line prints (the library's keywords as the flags that set them)
LIBRARY_TO_CLI = [
    ("devices=6 from the file's maxFPGAs", "--devices 6 (from the file's maxFPGAs)"),
    ("cpus=1 from the file's maxCPUs", "--cpus 1 (from the file's maxCPUs)"),
    ("memory=8e+09 from the file's maxSizePerFPGA", "--memory 7.451GiB (from the file's maxSizePerFPGA)"),
    ("more than max_ideals=1000 ideals", "more than --max-ideals 1000 ideals"),
    ("raise max_ideals, or use method='dpl' (linearized DP) or method='auto'",
     "raise --max-ideals, or use --method dpl (linearized DP) or --method auto"),
    ("raise max_ideals or use partition(method='dp')", "raise --max-ideals or use --method dp"),
    ("not proven (knapsack='exact' proves it)", "not proven (--knapsack exact proves it)"),
    ("uses       2 devices, sum of d 2", "uses       2 devices; the stages' data-parallel degrees (d) sum to 2"),
    # left alone: a stage's device column, words that are no keyword, a keyword that sets no flag
    ("d=1,t=1", "d=1,t=1"), ("the method 'dp' and max_ideals", "the method 'dp' and max_ideals"),
    ("runs stopped at max_moves=50", "runs stopped at max_moves=50"),
    ("(colocate=False ignores classes)", "(--ignore-colocation ignores classes)"),
    ("(colocate=True keeps each colocation class in one block)",
     "(leaving out --ignore-colocation keeps each colocation class in one block)"),
]


@pytest.mark.parametrize("library, cli", LIBRARY_TO_CLI)
def test_library_keywords_read_as_flags(library, cli):
    assert as_flags(library, Display(bytes=True)) == cli


def test_a_memory_from_the_input_without_byte_units_keeps_its_number():
    assert as_flags("memory=8e+09 from the file's maxSizePerFPGA", Display(bytes=False)) == \
        "--memory 8e+09 (from the file's maxSizePerFPGA)"


def test_a_saved_api_result_shows_its_settings_as_flags(run, tmp_path):
    g = sc.Graph.chain([1.0, 2.0, 1.0], memory=[1.0] * 3, defaults={"accelerators": 2, "cpus": 1, "memory": 8e9})
    data = sc.partition(g).to_json()
    assert "memory=8e+09 from the file's maxSizePerFPGA" in data["notes"]
    saved = tmp_path / "api.json"
    saved.write_text(json.dumps({**data, "units": {"time": "ms", "memory": "bytes", "shown": {}}}))
    code, out, _ = run("show", saved)
    notes = [line for line in out.splitlines() if line.startswith("note ")]
    assert code == 0 and notes == ["note       --devices 2 (from the file's maxFPGAs)",
                                   "note       --cpus 1 (from the file's maxCPUs)",
                                   "note       --memory 7.451GiB (from the file's maxSizePerFPGA)"], out


def test_the_training_plan_speaks_of_flags_and_degrees(run, piper):
    code, out, _ = run("plan", piper)
    lines = out.splitlines()
    assert code == 0 and any(line.startswith("uses       ") and
                             re.fullmatch(r"uses {7}\d+ devices?; the stages' data-parallel degrees \(d\) sum to \d+",
                                          line) for line in lines), out
    assert "note       TMPCs per stage by the authors' greedy: optimality not proven (--knapsack exact proves it)" \
        in lines, out
    assert "sum of d" not in out and "knapsack=" not in out


def test_an_error_names_the_flags_not_the_keywords(run, chain):
    code, out, err = run("partition", chain, "--method", "dp", "--max-ideals", "2")
    assert code == 2 and not out
    assert err.strip() == ("stagecut: error: the graph has more than --max-ideals 2 ideals; raise --max-ideals, or "
                           "use --method dpl (linearized DP, at most n + 1 ideals) or --method auto"), err
