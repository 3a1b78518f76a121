"""Helpers of tests/test_reliability.py: the hostile-input corpus, readers by name, a command-line
runner that fails a test instead of hanging, strict JSON, and the mixed calls of the load test."""

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys

import stagecut as sc
from stagecut.cli._common import read_placement
from stagecut.cli.main import main
from stagecut.training import chain_problem, plan_training, read_piper

HOSTILE = pathlib.Path(__file__).resolve().parent / "data" / "hostile"
EXPECTED = json.loads((HOSTILE / "expected.json").read_text())
CASES = sorted(EXPECTED)

#: a small valid workload the split files refer to (nodes 1 and 2)
GOOD_WORKLOAD = {
    "maxSizePerFPGA": 10.0, "maxFPGAs": 2, "maxCPUs": 1,
    "nodes": [{"id": i, "supportedOnFpga": 1, "cpuLatency": 5.0, "fpgaLatency": 1.0, "isBackwardNode": 0,
               "size": 3.0} for i in (1, 2)],
    "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5}],
}


def good_graph():
    return sc.workload_from_dict(GOOD_WORKLOAD)


#: every reader of a file, by name: the API's three and the command line's SPLIT reader
READERS = {
    "workload": lambda path: sc.read_workload(path),
    "split": lambda path: sc.read_split(path, good_graph()),
    "placement": lambda path: read_placement(str(path), good_graph()),
    "piper": lambda path: read_piper(path),
}


def cli_args(case, good_path):
    """The command line that reads ``case`` as its reader says."""
    path = str(HOSTILE / case)
    reader = EXPECTED[case]["reader"]
    if reader == "workload":
        return ["partition", path]
    if reader == "piper":
        return ["plan", path]
    return ["evaluate", str(good_path), path]


class Hang(BaseException):
    """Raised by :func:`no_hang` (a BaseException: no ``except Exception`` swallows it)."""


@contextlib.contextmanager
def no_hang(seconds):
    """Fail with :class:`Hang` if the block takes more than ``seconds`` (main thread only)."""
    def expire(signum, frame):
        raise Hang(f"took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run_cli(capsys, *argv, seconds=60):
    """``(exit status, stdout, stderr)`` of an in-process ``stagecut`` call that must not hang."""
    capsys.readouterr()
    with no_hang(seconds):
        code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_process(*argv, env=None, timeout=120):
    """``subprocess.run`` of ``python -m stagecut ARGV``."""
    return subprocess.run([sys.executable, "-m", "stagecut", *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout, env=None if env is None else {**os.environ, **env})


def strict_json(text):
    """Parse JSON refusing ``Infinity``/``NaN`` (which Python's json accepts and JSON does not)."""
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def one_error_line(err):
    """The stderr of a refused command: exactly one line, ``stagecut: error: ...``, no traceback."""
    lines = err.splitlines()
    return len(lines) == 1 and lines[0].startswith("stagecut: error: ") and "Traceback" not in err


# ------------------------------------------------------------------------------ load
def _comparable(result):
    data = result.to_json() if hasattr(result, "to_json") else result
    return json.dumps({k: v for k, v in data.items() if k != "runtime_s"}, sort_keys=True, default=str)


def mixed_calls():
    """48 calls into the core of every kind (exact DP, DPL, seeded BRKGA, the MTPP DP, Piper,
    the evaluator), as (name, zero-argument function) pairs returning comparable text."""
    from stagecut.mtpp import slice_graph

    graphs = [sc.regal_graph(16, model=m, seed=s) for s in range(3) for m in ("erdos_renyi", "barabasi_albert")]
    chain = sc.transformer_like(layers=2)
    piper = chain_problem([1.0, 2.0, 3.0, 1.0, 2.0, 2.0], devices=4, memory=1e9, bandwidth=1.0, batch=4, comm=0.5)
    calls = []
    for i, g in enumerate(graphs):
        calls += [
            (f"dp{i}", lambda g=g: _comparable(sc.partition(g, devices=3, method="dp"))),
            (f"dpl{i}", lambda g=g: _comparable(sc.partition(g, devices=3, method="dpl"))),
            (f"brkga{i}", lambda g=g, i=i: _comparable(slice_graph(g, devices=4, method="brkga", seed=i,
                                                                   population=32, generations=10))),
            (f"mtpp_dp{i}", lambda g=g: _comparable(slice_graph(g, devices=3, method="dp"))),
            (f"piper{i}", lambda i=i: _comparable(plan_training(piper, devices=2 + i % 3))),
            (f"evaluate{i}", lambda: _comparable(sc.evaluate(chain, sc.partition(chain, devices=2).device_of()))),
            (f"random{i}", lambda g=g, i=i: _comparable(slice_graph(g, devices=3, method="random", seed=i,
                                                                    decodes=64))),
            (f"chain{i}", lambda i=i: _comparable(sc.partition(chain, devices=1 + i, cpus=1))),
        ]
    assert len(calls) == 48
    return calls
