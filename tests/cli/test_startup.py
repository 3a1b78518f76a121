"""The command line starts light: ``--help`` and ``--version`` import no solver, no numpy, no
Rust core, and ``import stagecut`` loads its public names on first use (the same names, the
same objects)."""

import argparse
import json
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
    for argv in (["--help"], ["--version"]):
        subprocess.run([sys.executable, "-m", "stagecut", *argv], capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 2 * 1.0, f"--help and --version took {cpu:.2f} s of CPU together"
