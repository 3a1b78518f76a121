"""Numerically honest answers (issue 10, items 6 and 7): inputs spanning many orders of
magnitude get the brute-force answer, MIP round-off is a tolerance and not an error, and
costs that overflow the floating-point range say "overflow", not "infeasible"."""

import math

import pytest

import stagecut as sc
from helpers import brute_force


def wide_chain():
    """The issue's chain: unit times, output costs 0, 1e16, 1, 0 (1e16 + 1 - 1e16 loses the 1)."""
    return sc.Graph.chain([1.0, 1.0, 1.0, 1.0], comm=[0.0, 1e16, 1.0, 0.0])


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_wide_cost_range_gets_the_brute_force_answer(k):
    g = wide_chain()
    want = brute_force(g, k, 0)
    assert want == (4.0 if k == 1 else 3.0)
    for method in ("dp", "dpl", "auto"):
        plan = sc.partition(g, devices=k, method=method)
        assert plan.objective == want, method
        assert plan.status == ("feasible" if method == "dpl" else "optimal")
        assert sc.evaluate(g, plan.device_of()).objective == want


def test_the_evaluator_sums_exactly():
    # node 1 alone: compute 1, receives node 0's 1e16, sends its own 1 to node 2; a plain sum
    # (1 + 1e16) + 1 rounds to 1e16, the correctly rounded sum is 1e16 + 2
    g = sc.Graph.chain([1.0, 1.0, 1.0], comm=[1e16, 1.0, 0.0])
    ev = sc.evaluate(g, {0: ("accelerator", 0), 1: ("accelerator", 1), 2: ("accelerator", 2)})
    loads = ev.load_of()
    assert loads[("accelerator", 1)] == math.fsum([1.0, 1e16, 1.0]) == 1e16 + 2
    assert loads[("accelerator", 2)] == 2.0
