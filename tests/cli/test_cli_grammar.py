"""The grammar every subcommand shares: help, -k, deprecated spellings, one error path, exit codes."""

import argparse
import subprocess
import sys

import pytest

import stagecut as sc
from stagecut import throughput
from stagecut.cli import _common
from stagecut.cli.main import build_parser

from .cli_support import SUMMARY_LABELS, labels

SOLVING = ("partition", "evaluate", "slice", "certify", "plan", "latency")


def _subparsers():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, sub.choices


def test_version_in_a_subprocess():
    out = subprocess.run([sys.executable, "-m", "stagecut", "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == f"stagecut {sc.__version__}"


def test_top_level_help_says_which_subcommand_answers_what(run):
    code, out, _ = run("--help")
    assert code == 0
    for word in ("partition", "evaluate", "slice", "certify", "plan", "latency", "sweep", "trace", "show", "demo"):
        assert f"\n  {word}" in out
    for term in ("MTPP", "DPL", "ideals", "TMPC"):  # each explained on its own line
        assert any(line.strip().startswith(term + " ") for line in out.splitlines()), term
    assert "exit status" in out


def test_every_flag_has_help_with_its_default():
    _, subs = _subparsers()
    assert set(subs) == {*SOLVING, "sweep", "trace", "show", "demo"}
    for name, p in subs.items():
        for a in p._actions:
            if a.help == argparse.SUPPRESS or isinstance(a, argparse._HelpAction):
                continue
            assert a.help, f"{name} {a.option_strings or a.dest} has no help"
            if a.option_strings and a.nargs != 0:  # takes a value: says its default
                assert "default" in a.help, f"{name} {a.option_strings} does not give its default"


def test_decodes_help_gives_its_true_default():
    _, subs = _subparsers()
    decodes = next(a for a in subs["slice"]._actions if "--decodes" in a.option_strings)
    assert "10,000" in decodes.help and "8,100" in decodes.help
    from stagecut.cli import slice as slice_cmd

    # the flags default to None (so that giving one with --method dp is refused); their defaults
    for flag, value in (("--population", slice_cmd.POPULATION), ("--generations", slice_cmd.GENERATIONS)):
        action = next(a for a in subs["slice"]._actions if flag in a.option_strings)
        assert f"default: {value})" in action.help
    assert slice_cmd.POPULATION * slice_cmd.GENERATIONS == 10_000


def test_demo_help_says_what_it_runs(run):
    code, out, _ = run("demo", "--help")
    assert code == 0 and "gnmt_training.json" in out and "example:transformer-training" in out


@pytest.mark.parametrize("name", SOLVING)
def test_one_device_flag_and_units_everywhere(name):
    _, subs = _subparsers()
    opts = {o: a for a in subs[name]._actions for o in a.option_strings}
    assert opts["-k"] is opts["--devices"] and opts["-k"].dest == "devices"
    assert opts["--memory"].help and "16GiB" in opts["--memory"].help
    assert "--json" in opts and "-o" in opts and "--output" in opts
    if name in ("slice", "certify", "plan"):
        assert "25GB/s" in opts["--bandwidth"].help


@pytest.mark.parametrize("argv, words", [
    (["partition", "missing.json"], ["missing.json", "no such file"]),
    (["slice", "missing.json"], ["missing.json"]),
    (["certify", "missing.json", "split.json"], ["missing.json"]),
    (["evaluate", "missing.json", "split.json"], ["missing.json"]),
    (["plan", "missing.json"], ["missing.json"]),
    (["show", "missing.json"], ["missing.json"]),
    (["partition", "{chain}", "--memory", "16Gb"], ["--memory", "bits"]),
    (["slice", "{chain}", "--memory", "lots"], ["--memory", "not a size"]),
    (["slice", "{chain}", "--bandwidth", "25GB"], ["--bandwidth", "add a time"]),
    (["plan", "{piper}", "--bandwidth", "fast"], ["--bandwidth"]),
    (["partition", "{chain}", "-k", "0"], ["-k/--devices", ">= 1"]),
    (["partition", "{chain}", "--method", "magic"], ["--method", "magic"]),
    (["partition", "example:nope"], ["unknown example 'nope'"]),
    (["slice", "regal:ten"], ["regal:N[:MODEL[:SEED]]"]),
    (["slice", "regal:10:nope"], ["unknown model 'nope'"]),
    (["plan", "regal:10"], ["Piper input"]),
    (["certify", "{chain}", "{chain}", "--levels", "nope"], ["--levels", "nope"]),
    (["evaluate", "{chain}", "{chain}"], ["expected a saved result"]),
    (["show", "{chain}"], ["not a saved result"]),
    (["frobnicate"], ["invalid choice"]),
    ([], ["required"]),
])
def test_bad_input_is_one_line_and_exit_2(run, chain, piper, argv, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [a.format(chain=chain, piper=piper) for a in argv]
    code, out, err = run(*argv)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("stagecut: error: "), err
    assert "Traceback" not in err and out == ""
    for w in words:
        assert w in err


def test_a_bug_is_exit_1_with_please_report(run, chain, monkeypatch):
    def broken(*a, **kw):
        raise RuntimeError("boom")

    monkeypatch.setattr(throughput, "partition", broken)
    code, out, err = run("partition", chain)
    assert code == 1 and err.count("\n") == 1 and "internal error: RuntimeError: boom" in err
    assert "please report" in err and "Traceback" not in err
    code, out, err = run("--debug", "partition", chain)
    assert code == 1 and "Traceback" in err and "please report" in err.splitlines()[-1]


def test_an_internal_solver_error_is_a_bug(run, chain, monkeypatch):
    def broken(*a, **kw):
        raise sc.SolverError("internal error: the DP disagrees with the evaluator; please report this")

    monkeypatch.setattr(throughput, "partition", broken)
    code, _, err = run("partition", chain)
    assert code == 1 and err.count("\n") == 1 and "please report" in err


def test_ctrl_c_is_exit_130(run, chain, monkeypatch):
    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(throughput, "partition", interrupted)
    code, out, err = run("partition", chain)
    assert code == 130 and err == "stagecut: interrupted\n"


def test_guarded_handles_os_errors():
    @_common.guarded
    def denied(args):
        raise PermissionError(13, "Permission denied", "/root/x.json")

    assert denied(argparse.Namespace()) == 2


@pytest.mark.parametrize("old, new", [
    (["--accelerators", "2"], ["-k", "2"]),
    (["--memory-from-file"], []),
])
def test_deprecated_partition_spellings_still_work(run, chain, old, new):
    code, out, err = run("partition", chain, *old, "--json")
    assert code == 0 and err.count("\n") == 1 and err.startswith("stagecut: note: " + old[0])
    assert ("deprecated" in err) == (len(old) == 2)
    a, b = sc.Plan.from_json(out), sc.Plan.from_json(run.json("partition", chain, *new))
    assert (a.objective, a.assignment(), a.devices) == (b.objective, b.assignment(), b.devices)


def test_deprecated_stages_and_fast_memory(run, tmp_path):
    args = ["slice", "regal:12:erdos_renyi:1", "--method", "dp"]
    code, out, err = run(*args, "--stages", "3", "--fast-memory", "400", "--json")
    assert code == 0 and err.count("\n") == 2 and "--stages" in err and "--fast-memory" in err
    old = sc.SlicePlan.from_json(out)
    new = sc.SlicePlan.from_json(run.json(*args, "-k", "3", "--memory", "400"))
    assert old.objective == new.objective and old.assignment() == new.assignment()


def test_deprecated_gib_flags_of_plan(run, piper):
    code, out, err = run("plan", piper, "--memory-gib", "1", "--bandwidth-gib", "2", "--json")
    assert code == 0 and err.count("\n") == 2 and "--memory 8GiB" in err
    old = sc.TrainingPlan.from_json(out)
    new = sc.TrainingPlan.from_json(run.json("plan", piper, "--memory", "1GiB", "--bandwidth", "2GiB/s"))
    assert old.memory == new.memory == 2**30 and old.bandwidth == new.bandwidth == 2 * 2**30
    assert old.objective == new.objective


def test_warnings_are_one_line(run, tmp_path):
    g = sc.transformer_like(layers=1, training=True)  # backward wired in reverse: classes on a cycle
    path = tmp_path / "train.json"
    sc.write_workload(g, path)
    code, out, err = run("slice", path, "-k", "3", "--method", "dp")
    assert code == 0 and labels(out)[:5] == SUMMARY_LABELS
    assert all(line.startswith("stagecut: warning: ") for line in err.splitlines()) and err


def test_bad_input_in_a_subprocess(tmp_path):
    out = subprocess.run([sys.executable, "-m", "stagecut", "slice", "regal:12", "--bandwidth", "9Gb/s"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == ["stagecut: error: --bandwidth: '9Gb/s' looks like bits; write bytes "
                                       "(e.g. 9GB/s or 9GiB/s)"]


def test_every_built_in_example_loads():
    from stagecut.cli._common import EXAMPLES, load_graph

    sizes = {name: len(load_graph(f"example:{name}")) for name in EXAMPLES}
    assert sizes == {"transformer": 110, "transformer-training": 220, "chain": 8}
