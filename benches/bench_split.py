"""MILP-SPLIT on stacked single-channel Erdos-Renyi RWNNs of 10, 20 and 40 modules (6 body nodes
each) on the RWNN devices (CPU, T4, A100).

    pytest benches/bench_split.py --benchmark-only

One round per case (a round solves 9 module MILPs per module), with a time limit of 0.25 s per
module in all (so each module MILP gets about 0.03 s: the case measures the DP, the sub-problem
building and the solver start-up more than the MILPs, and each solve takes at least 0.05 s: 10
modules took 8.2 s, about 0.8 s a module, on the shared 2-core machine). Each case
records the makespan, the lower bound and the status in ``extra_info``.
"""

from __future__ import annotations

import pytest

from stagecut.latency import LatencyProblem
from stagecut.latency.split import solve_split
from stagecut.rwnn import rwnn, rwnn_devices

PER_MODULE_S = 0.25


@pytest.mark.parametrize("modules", [10, 20, 40])
def test_split(benchmark, modules):
    p = LatencyProblem(rwnn(modules, size=6, seed=0), rwnn_devices(), output_bytes="comm")
    s = benchmark.pedantic(solve_split, args=(p,), kwargs={"time_limit": PER_MODULE_S * modules, "threads": 1},
                           rounds=1, iterations=1)
    assert s.objective is not None and s.lower_bound <= s.objective
    benchmark.extra_info.update(makespan=s.objective, lower_bound=s.lower_bound, status=s.status,
                                modules=s.stats.get("modules"))
