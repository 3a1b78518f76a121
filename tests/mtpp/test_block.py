"""The ``block`` bound (the block paying the fewest tensors must be nearly full) against brute force.

Never above the optimum (brute force over every partition: 150 instances in the default run,
2,000 in the ``slow`` sweep), at least the bound it starts from, above the combinatorial bounds
on many of them (so a dropped term fails), and hand values.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from tests.mtpp.sweeps import chunk_seeds, sweep
from tests.mtpp.test_combinatorial import random_problem

import stagecut as sc
from helpers import brute_force_mtpp
from stagecut.mtpp.blockmip import block_bound
from stagecut.mtpp.bounds import mtpp_bound
from stagecut.mtpp.cover import cover_bound
from stagecut.mtpp.model import MtppProblem
from stagecut.mtpp.slicegraph import slice_graph


def test_block_bound_on_a_chain_reaches_the_optimum():
    # 4 x work 4, tensors 1, k = 2: a block holding what the other cannot (w >= 16 - (T - io))
    # with w + io <= T: {0, 1} (8 + 1) at T = 9, the optimum; below 9 no node set qualifies
    p = MtppProblem(sc.Graph.chain([4.0, 4.0, 4.0, 4.0], comm=1.0), devices=2)
    r = block_bound(p, lo=8.0)
    assert 8.9 < r.bound <= 9.0 and r.complete and r.solves >= 2
    assert slice_graph(p, method="dp").objective == pytest.approx(9.0)


def test_block_bound_from_one_solve_at_a_known_cost():
    # with the optimum's cost as the upper end, one MIP proves it: the best set at T = 9 has
    # w - io = 8 - 1 = 7, and 16 - 7 = 9: every T below 9 is refuted at once
    p = MtppProblem(sc.Graph.chain([4.0, 4.0, 4.0, 4.0], comm=1.0), devices=2)
    r = block_bound(p, lo=8.0, hi=9.0, steps=0)
    assert r.bound == pytest.approx(9.0, rel=1e-6) and r.solves == 1


def test_block_bound_refutes_above_the_average_over_k_minus_1_blocks():
    # tensors 3, k = 3: above 16 / 2 a block may hold little work, but it is not empty; the
    # cheapest, {0} (work 4, one tensor 3), qualifies only from T = 9 (4 - 2 * 3 >= 16 - 2 T)
    p = MtppProblem(sc.Graph.chain([4.0, 4.0, 4.0, 4.0], comm=3.0), devices=3)
    r = block_bound(p, lo=8.0)
    assert 8.9 < r.bound <= 9.0 and slice_graph(p, method="dp").objective == pytest.approx(11.0)


def test_block_bound_bisects_below_its_first_test_when_that_fails():
    # k = 2, searched up to 20: the first test (at 16 = W / (k - 1)) refutes nothing, so the four
    # steps halve [8, 16], not [8, 20]: 12, 10, 9 fail, 8.5 is refuted
    p = MtppProblem(sc.Graph.chain([4.0, 4.0, 4.0, 4.0], comm=1.0), devices=2)
    r = block_bound(p, lo=8.0, hi=20.0, steps=4)
    assert r.bound == pytest.approx(8.5) and r.solves == 5


@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
def test_block_bound_keeps_forced_groups_whole():
    # a random instance with colocation classes, two devices: with its classes split the node
    # set would qualify at a lower T (19 instead of 21, the optimum being at least 21)
    p = _two(random_problem(100_140, n_max=7, k_max=6))
    opt = brute_force_mtpp(p)
    r = block_bound(p, lo=cover_bound(p).bound, steps=4)
    assert r.bound == pytest.approx(21.0, rel=1e-6) and r.bound <= opt + 1e-9


def test_block_bound_refutes_nothing_when_a_light_block_qualifies():
    # k = 3 on the same chain: the block {0} (work 4, one tensor) qualifies from T = 7
    # (4 - 2 * 1 >= 16 - 2 T, 4 + 1 <= T, 1 <= T - 16 / 3): nothing above 7 is refuted
    p = MtppProblem(sc.Graph.chain([4.0, 4.0, 4.0, 4.0], comm=1.0), devices=3)
    for lo in (7.0, 8.0):
        r = block_bound(p, lo=lo)
        assert r.bound == lo and r.solves >= 1 and r.complete


def test_block_level_in_mtpp_bound_and_certify():
    p = MtppProblem(sc.Graph.chain([4.0, 4.0, 4.0, 4.0], comm=1.0), devices=2)
    r = mtpp_bound(p, level="block", known_bound=8.0)
    assert r.level == "block" and r.status == "optimal" and 8.99 < r.bound <= 9.0
    assert r.stats["solves"] >= 1 and r.stats["floor"] == pytest.approx(8.0)
    cert = sc.certify(p, slice_graph(p, method="dp"), levels=("simple", "block"), stop_when_proven=False)
    assert [x.level for x in cert.levels] == ["simple", "block"] and cert.bound_source == "block"


def _two(p: MtppProblem) -> MtppProblem:
    return dataclasses.replace(p, devices=min(2, len(p.graph.nodes)))


def _check(p: MtppProblem, opt: float, steps: int) -> bool:
    lo = cover_bound(p).bound
    r = block_bound(p, lo=lo, steps=steps)
    tol = 1e-9 * max(1.0, abs(opt)) if math.isfinite(opt) else 0.0
    assert r.bound <= opt + tol, f"block {r.bound} above the optimum {opt}"
    assert r.bound >= lo or r.bound == lo
    return r.bound > lo * (1 + 1e-9) + 1e-12


@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
def test_block_never_passes_brute_force_and_beats_cover_often():
    # two devices: there the optimum is often near the average and the bound has work to do
    better = sweep(lambda p, opt, s: _check(p, opt, steps=4), chunk_seeds(100_000, 0, 150), brute_force_mtpp,
                   n_max=7, k_max=6, transform=lambda s, p: _two(p))
    assert better >= 12  # (19 of these 150)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
@pytest.mark.parametrize("chunk", range(4))
def test_block_never_passes_brute_force_sweep(chunk):
    sweep(lambda p, opt, s: _check(p, opt, steps=4), chunk_seeds(500_000, chunk, 500), brute_force_mtpp,
          n_max=7, k_max=6, transform=lambda s, p: _two(p) if s % 2 else p)
