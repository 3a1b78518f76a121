"""The command line starts light: ``--help`` and ``--version`` import no solver, no numpy, no
Rust core, and ``import stagecut`` loads its public names on first use (the same names, the
same objects)."""

import argparse
import importlib
import json
import re
import resource
import subprocess
import sys

import pytest

import stagecut as sc
from stagecut.cli._parser import COMMANDS
from stagecut.cli.main import build_parser, command_of

#: modules that take most of a second to import, which --help and --version must not load
HEAVY = ("numpy", "networkx", "mip", "stagecut._core", "stagecut.graph", "stagecut.throughput", "stagecut.latency",
         "stagecut.cli._common")

PROBE = """
import json, sys
from stagecut.cli.main import main
code = main({argv!r})
print(json.dumps({{"code": code, "loaded": [m for m in {heavy!r} if m in sys.modules]}}), file=sys.stderr)
"""


def _probe(argv):
    out = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], capture_output=True,
                         text=True, check=True)
    return out.stdout, json.loads(out.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["-q", "--help"], ["bogus-command"]])
def test_help_and_version_import_nothing_heavy(argv):
    stdout, probe = _probe(argv)
    assert probe["loaded"] == [], f"stagecut {' '.join(argv)} imported {probe['loaded']}"
    assert probe["code"] == (2 if argv == ["bogus-command"] else 0)
    if argv == ["--version"]:
        assert stdout.strip() == f"stagecut {sc.__version__}"


#: what a subcommand's --help must not load (it imports its own module and the shared grammar only)
SUBCOMMAND_HEAVY = ("numpy", "networkx", "mip", "stagecut._core", "stagecut.graph", "stagecut.formats",
                    "stagecut.throughput", "stagecut.mtpp", "stagecut.latency", "stagecut.training", "stagecut.sweep",
                    "importlib.metadata")


def _preloaded(names):
    """Those of ``names`` a bare interpreter has loaded already (a site-packages ``.pth`` may
    import ``importlib.metadata``): not stagecut's doing."""
    code = f"import json, sys; print(json.dumps([m for m in {tuple(names)!r} if m in sys.modules]))"
    return set(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                          check=True).stdout))


SUBCOMMAND_PROBE = """
import json, sys
from stagecut.cli.main import main
code = main({argv!r})
loaded = [m for m in {heavy!r} if m in sys.modules]
print(json.dumps({{"code": code, "loaded": loaded, "module": {module!r} in sys.modules}}), file=sys.stderr)
"""


@pytest.mark.parametrize("command", list(COMMANDS))
def test_each_subcommand_help_imports_nothing_heavy(command):
    """``stagecut COMMAND --help`` builds that subcommand's parser (its module is imported, its
    usage printed) without numpy, networkx, python-mip, the Rust core or the solvers."""
    code = SUBCOMMAND_PROBE.format(argv=[command, "--help"], heavy=SUBCOMMAND_HEAVY, module=COMMANDS[command][0])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    probe = json.loads(out.stderr.strip().splitlines()[-1])
    assert probe["code"] == 0 and probe["module"], probe
    assert f"usage: stagecut {command}" in out.stdout
    loaded = [m for m in probe["loaded"] if m not in _preloaded(SUBCOMMAND_HEAVY)]
    assert loaded == [], f"stagecut {command} --help imported {loaded}"


def test_the_parsers_choices_are_the_solvers():
    """The choices the parsers show without importing the solvers are the solvers' own."""
    from stagecut import mtpp, throughput
    from stagecut.cli import _choices
    from stagecut.latency import solve as latency_solve

    assert _choices.PARTITION_METHODS == throughput.METHODS
    assert _choices.PARTITION_MAX_IDEALS == throughput.DEFAULT_MAX_IDEALS
    assert _choices.SLICE_METHODS == mtpp.METHODS
    assert _choices.CERTIFY_LEVELS == mtpp.LEVELS
    assert _choices.CERTIFY_EXTRA_LEVELS == mtpp.bounds.EXTRA_LEVELS
    assert _choices.CERTIFY_PARTITION_LP_GROUPS == importlib.import_module("stagecut.mtpp.certify").PARTITION_LP_GROUPS
    assert _choices.LATENCY_METHODS == latency_solve.METHODS


def test_version_is_read_only_when_asked():
    stdout, probe = _probe(["--version"])
    assert stdout.strip() == f"stagecut {sc.__version__}"
    code = PROBE.format(argv=["--help"], heavy=("importlib.metadata",))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    if not _preloaded(["importlib.metadata"]):
        assert json.loads(out.stderr.strip().splitlines()[-1])["loaded"] == []


def test_import_stagecut_is_lazy_and_complete():
    code = ("import sys, stagecut as sc; assert 'numpy' not in sys.modules, 'import stagecut loaded numpy'; "
            "import stagecut.balance; assert callable(sc.balance), sc.balance; "
            "missing = [n for n in sc.__all__ if not hasattr(sc, n)]; assert not missing, missing; "
            "assert set(sc.__all__) <= set(dir(sc)); "
            "print(sc.partition(sc.Graph.chain([1.0, 2.0]), devices=2).objective)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2.0"


def test_the_lazy_names_are_the_modules_objects():
    from stagecut.mtpp.model import evaluate as mtpp_evaluate
    from stagecut.throughput import partition

    assert sc.partition is partition and sc.evaluate_mtpp is mtpp_evaluate
    assert sc.latency.place is sc.place  # a subpackage is reachable as an attribute, as before
    with pytest.raises(AttributeError, match="no_such_name"):
        sc.no_such_name  # noqa: B018


def test_help_lists_the_subcommands_as_their_modules_do():
    full = build_parser()
    assert build_parser(()).format_help() == full.format_help()
    sub = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    assert [(c.dest, c.help) for c in sub._choices_actions] == [(n, s) for n, (_, s) in COMMANDS.items()]


def test_command_of_skips_the_main_flags():
    assert command_of(["-q", "--debug", "partition", "--help"]) == "partition"
    assert command_of(["--help"]) is None and command_of(["nope", "partition"]) is None


def test_help_takes_well_under_a_second_of_cpu():
    """A generous bound (the strict 0.3 s figure is benches/bench_cli.py's): CPU time, not wall."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for argv in (["--help"], ["--version"], ["partition", "--help"]):
        subprocess.run([sys.executable, "-m", "stagecut", *argv], capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 3 * 1.0, f"--help, --version and partition --help took {cpu:.2f} s of CPU together"


def test_latency_help_describes_every_method():
    """Each ``--method`` choice of ``latency`` is described in the flag's help, not only accepted."""
    from stagecut.cli import _choices

    parser = build_parser(("latency",))
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    method = next(a for a in sub.choices["latency"]._actions if a.dest == "method")
    text = method.help
    missing = [m for m in _choices.LATENCY_METHODS if not re.search(rf"(^|[\s,]){re.escape(m)}[:,]", text)]
    assert missing == [], missing
