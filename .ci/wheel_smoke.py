"""Smoke test of an installed stagecut wheel (run by .ci/wheel in a fresh venv, outside the checkout).

Checks that the package imported is the installed one, then runs one call per objective and the
CLI demo, each against a value known from the test suite.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import stagecut as sc
from stagecut.training import chain_problem

here = pathlib.Path(sc.__file__).resolve()
assert "site-packages" in here.parts, f"stagecut imported from {here}, not from the installed wheel"
if "--rust-allowed" not in sys.argv:  # a wheel must work without Rust; an sdist is built with it
    assert shutil.which("cargo") is None and shutil.which("rustc") is None, "Rust is on PATH"

# throughput: the exact DP
plan = sc.partition(sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0]), devices=3)
assert (plan.objective, plan.status) == (4.0, "optimal"), plan.summary()
assert plan.assignment() == {0: 0, 1: 1, 2: 1, 3: 1, 4: 2}

# MTPP: SliceGraph (BRKGA) against the exact DP, both re-scored by the evaluator
g = sc.transformer_like(layers=6)
best = sc.slice_graph(g, devices=4, seed=0, decodes=2000)
exact = sc.slice_graph(g, devices=4, method="dp")
assert exact.status == "optimal" and exact.objective <= best.objective + 1e-9, (exact.objective, best.objective)

# Piper: a training plan
prob = chain_problem([3.0, 1.0, 2.0], devices=2, memory=1e9, bandwidth=1.0, batch=2, params=1.0, mem_b=1.0)
tp = sc.plan_training(prob)
assert tp.objective == 3.0, tp.summary()

# latency: one request's makespan
s = sc.place(sc.Graph.chain([1.0, 2.0, 3.0], cpu_costs=[4.0, 4.0, 4.0], comm=0.5), 2, method="heft")
assert s.objective == 6.0, s.objective

# the command line, as a user runs it
exe = shutil.which("stagecut")
assert exe is not None and str(pathlib.Path(sys.prefix)) in exe, exe
out = subprocess.run([exe, "demo"], capture_output=True, text=True, check=True).stdout
assert "optimal" in out, out
version = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout
assert version.strip() == f"stagecut {sc.__version__}", version
print(f"wheel smoke test passed: stagecut {sc.__version__} from {here.parent}")
