"""Piper benchmarks on the published workloads (pytest-benchmark), against the authors'
single-core C++ measured on this machine (``published-piper.json``, note):

    pytest benches/bench_piper.py --benchmark-only
    python benches/bench_piper.py            # prints the README table (best of 3 runs)

Each case also checks the optimum, so a fast wrong answer does not pass.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from stagecut import training as sp

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "workloads" / "piper"
GIB = float(1 << 30)

# name, file, layer copies, settings, expected TPS (authors' code), C++ seconds, target seconds
CASES = [
    ("gnmt-K2-M2.5", "gnmt.json", 0, dict(devices=2, memory=2.5 * GIB, bandwidth=25 * GIB), 263.354, 172.0, 3.0),
    ("bert32-K2048-N512-M8", "bert32a100.json", 0,
     dict(devices=2048, batch=512, memory=8 * GIB, bandwidth=25 * GIB), 0.00122128, 12.4, 0.6),
    ("bert64-K2048-N2048-M8", "bert32a100.json", 32,
     dict(devices=2048, batch=2048, memory=8 * GIB, bandwidth=25 * GIB), 0.00141355, 141.0, 7.0),
]

_CACHE: dict = {}


def _problem(fname: str, copies: int) -> sp.PiperProblem:
    key = (fname, copies)
    if key not in _CACHE:
        path = DATA / fname
        if not path.exists():
            pytest.skip(f"{path} is absent")
        prob = sp.read_piper(path)
        _CACHE[key] = sp.insert_layer_copies(prob, copies) if copies else prob
    return _CACHE[key]


@pytest.mark.parametrize("name, fname, copies, kw, expected, cpp, target", CASES, ids=[c[0] for c in CASES])
def test_plan_training(benchmark, name, fname, copies, kw, expected, cpp, target):
    prob = _problem(fname, copies)
    plan = benchmark.pedantic(sp.plan_training, args=(prob,), kwargs=kw, rounds=3, iterations=1)
    assert plan.objective is not None and abs(plan.objective - expected) <= 1e-5 * expected
    benchmark.extra_info.update(cpp_seconds=cpp, target_seconds=target, ideals=plan.stats["ideals"],
                                pairs=plan.stats["pairs"])


@pytest.mark.parametrize("K, M", [(128, 16.0), (64, 8.0)])
def test_resnet_and_equi(benchmark, K, M):
    prob = _problem("resnet.json", 0)
    kw = dict(devices=K, memory=M * GIB, bandwidth=25 * GIB)
    res = benchmark.pedantic(lambda: (sp.plan_training(prob, **kw), sp.plan_equi(prob, **kw)), rounds=3, iterations=1)
    assert res[0].objective is not None and res[1].objective is not None and res[0].objective < res[1].objective


def main() -> int:
    print("| case | authors' C++ (1 core) | target | stagecut (best of 3) | TPS |")
    print("|---|---|---|---|---|")
    for name, fname, copies, kw, expected, cpp, target in CASES:
        prob = _problem(fname, copies)
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            plan = sp.plan_training(prob, **kw)
            best = min(best, time.perf_counter() - t0)
        ok = plan.objective is not None and abs(plan.objective - expected) <= 1e-5 * expected
        tps = "infeasible" if plan.objective is None else f"{plan.objective:.6g}"
        print(f"| {name} | {cpp:g} s | < {target:g} s | {best:.2f} s | {tps}{'' if ok else ' (MISMATCH)'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
