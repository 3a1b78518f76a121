"""Fixtures of the command-line tests: small inputs with known optima, and an in-process runner."""

import json

import pytest

import stagecut as sc
from stagecut.cli.main import main

from .cli_support import GIB, TINY_PIPER


class Run:
    """``run(*argv)`` -> (exit status, stdout, stderr) of an in-process ``stagecut`` call."""

    def __init__(self, capsys):
        self.capsys = capsys

    def __call__(self, *argv):
        self.capsys.readouterr()
        code = main([str(a) for a in argv])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *argv):
        code, out, err = self(*argv, "--json")
        assert code == 0, err
        return json.loads(out)


@pytest.fixture
def run(capsys):
    return Run(capsys)


@pytest.fixture
def chain(tmp_path):
    """A 5-node chain on 3 accelerators, no CPU: the optimum is 4.0 ({0}, {1, 2, 3}, {4})."""
    g = sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0], defaults={"accelerators": 3, "cpus": 0})
    path = tmp_path / "chain.json"
    sc.write_workload(g, path)
    return path


@pytest.fixture
def big_chain(tmp_path):
    """Three 1.0-time nodes of 6 GiB each on 2 accelerators of 12e9 bytes (the file's memory):
    12e9 < 12 GiB fits one node per accelerator, so nothing fits; 16 GiB fits two (time 2.0)."""
    g = sc.Graph.chain([1.0, 1.0, 1.0], memory=[6.0 * GIB] * 3,
                       defaults={"accelerators": 2, "cpus": 0, "memory": 12e9})
    path = tmp_path / "big.json"
    sc.write_workload(g, path)
    return path


@pytest.fixture
def mtpp_chain(tmp_path):
    """Chain 4, 1, 1, 4 with tensors of 0.5; the split {0}, {1, 2, 3} costs 6.5 on 2 stages."""
    g = sc.Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5, defaults={"accelerators": 2, "cpus": 0})
    path = tmp_path / "mtpp.json"
    sc.write_workload(g, path)
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"blocks": [[0], [1, 2, 3]]}))
    return path, split


@pytest.fixture
def piper(tmp_path):
    path = tmp_path / "tiny_piper.json"
    path.write_text(json.dumps(TINY_PIPER))
    return path
