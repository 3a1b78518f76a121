"""MILP-SPLIT on stacked single-channel Erdos-Renyi RWNNs of 10, 20 and 40 modules (6 body nodes
each) on the RWNN devices (CPU, T4, A100).

    pytest benches/bench_split.py --benchmark-only

One round per case, each to its proven optimum: a round solves 9 module MILPs per module (HiGHS,
one thread, in this process, no time limit), so this is SPLIT's time to optimum, the figure
DiviML compares with the whole MILP's. Each case records the makespan, the lower bound, the
status and the module count in ``extra_info``.
"""

from __future__ import annotations

import pytest

from stagecut.latency import LatencyProblem
from stagecut.latency.diviml.split import solve_split
from stagecut.rwnn import rwnn, rwnn_devices


@pytest.mark.parametrize("modules", [10, 20, 40])
def test_split(benchmark, modules):
    p = LatencyProblem(rwnn(modules, size=6, seed=0), rwnn_devices(), output_bytes="comm")
    s = benchmark.pedantic(solve_split, args=(p,), kwargs={"solver": "highs", "threads": 1, "workers": 1},
                           rounds=1, iterations=1)
    assert s.status == "optimal" and s.lower_bound <= s.objective
    benchmark.extra_info.update(makespan=s.objective, lower_bound=s.lower_bound, status=s.status,
                                modules=s.stats.get("modules"))
