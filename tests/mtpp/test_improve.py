"""The pairwise re-split search (``improve_plan``) held to the evaluator, the exact DP and brute force.

- every split cost the vectorised window computes equals the evaluator's block cost (all splits
  of every pair of blocks, on random instances with colocation, hard limits and overflow);
- with two devices one re-split enumerates every partition: from any start it reaches the
  optimum (the DP, brute force on the smallest);
- from random starts it is never worse than the start, never below the optimum, and its plan
  is the evaluator's.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from tests.mtpp.test_combinatorial import random_problem

import stagecut as sc
from helpers import brute_force_mtpp
from stagecut.errors import InvalidArgumentError, InvalidGraphError
from stagecut.mtpp.improve import _boundary, _Plan, _Window, improve_plan
from stagecut.mtpp.model import MtppProblem, block_cost, evaluate, forced_groups
from stagecut.mtpp.slicegraph import slice_graph


def random_start(problem: MtppProblem, rng: random.Random) -> list[list[object]]:
    """A valid partition: a random topological order of the forced groups, cut at random places."""
    g = problem.graph
    grp = forced_groups(problem)
    units = sorted(set(grp))
    succ = {u: set() for u in units}
    for a, b in g.edges:
        x, y = grp[g.index[a]], grp[g.index[b]]
        if x != y:
            succ[x].add(y)
    indeg = {u: 0 for u in units}
    for u in units:
        for v in succ[u]:
            indeg[v] += 1
    ready = [u for u in units if indeg[u] == 0]
    order = []
    while ready:
        u = ready.pop(rng.randrange(len(ready)))
        order.append(u)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    nb = rng.randint(1, min(problem.devices, len(order)))
    cuts = sorted(rng.sample(range(1, len(order)), nb - 1)) if nb > 1 else []
    pieces = [order[a:b] for a, b in zip([0, *cuts], [*cuts, len(order)])]
    return [[g.nodes[i].id for i in range(len(g.nodes)) if grp[i] in set(piece)] for piece in pieces]


def test_a_split_block_and_an_improving_move():
    p = MtppProblem(sc.Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5), devices=2)
    plan = improve_plan(p, [[0], [1, 2, 3]])
    assert plan.objective == 5.5 and plan.method == "improve" and plan.stats["moves"] == 1
    assert [s.nodes for s in plan.stages] == [(0, 1), (2, 3)]
    assert improve_plan(p, [[0, 1, 2, 3]]).objective == 5.5  # fewer blocks than devices: split


def test_bad_arguments_and_plans():
    p = MtppProblem(sc.Graph.chain([1.0, 1.0, 1.0]), devices=2)
    with pytest.raises(InvalidArgumentError):
        improve_plan(p, [[0, 1, 2]], time_limit=-1)
    with pytest.raises(InvalidArgumentError):
        improve_plan(p, [[0, 1, 2]], max_ideals=0)
    with pytest.raises(InvalidArgumentError, match="MtppProblem"):
        improve_plan(p.graph, [[0, 1, 2]])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        improve_plan(p, [[0, 1, 2]], max_free=-1)
    with pytest.raises(InvalidGraphError):
        improve_plan(p, [[0, 1]])
    with pytest.raises(InvalidGraphError):
        improve_plan(p, [[0, 1, 7], [2]])
    with pytest.raises(InvalidGraphError):
        improve_plan(p, [[0, 2], [1]])  # a cyclic quotient


def _check_window(p: MtppProblem, plan: _Plan, win: _Window, bit: dict[int, int], what: str) -> int:
    """Every split of ``win``: both sides' costs are the evaluator's; returns the splits checked."""
    g = p.graph
    units = sorted(bit)
    for mask, c1, c2 in zip(win.ideals.tolist(), win.first.tolist(), win.second.tolist()):
        first = [i for u in units if mask >> bit[u] & 1 for i in plan.units[u]]
        second = [i for u in units if not mask >> bit[u] & 1 for i in plan.units[u]]
        for got, side in ((c1, first), (c2, second)):
            want = block_cost(p, [g.nodes[i].id for i in side]) if side else 0.0
            assert got == want or math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12), \
                f"{what}: window cost {got} != evaluator {want} for {side}"
        # a valid partition with the other blocks (the evaluator raises on a cyclic quotient)
        evaluate(p, [[g.nodes[i].id for i in side] for side in (first, second) if side] +
                 [[g.nodes[i].id for i in plan.nodes(plan.blocks[x])] for x in range(2, len(plan.blocks))])
    return len(win.ideals)


@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
def test_window_split_costs_are_the_evaluators():
    checked = 0
    for seed in range(300):
        rng = random.Random(seed)
        p = random_problem(seed, n_max=9, k_max=5)
        blocks = random_start(p, rng)
        if len(blocks) < 2:
            continue
        g = p.graph
        plan = _Plan(p, [[g.index[v] for v in b] for b in blocks])
        for b in range(len(blocks)):
            assert math.isclose(plan.cost[b], block_cost(p, blocks[b]), rel_tol=1e-12, abs_tol=1e-12) or \
                plan.cost[b] == block_cost(p, blocks[b])
        units = sorted(plan.blocks[0] | plan.blocks[1])
        bit = {u: j for j, u in enumerate(units)}
        win = _Window(plan, bit, 10_000)
        if win.ok:
            checked += _check_window(p, plan, win, bit, f"seed {seed}")
    assert checked > 1000


@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
def test_boundary_windows_keep_the_fixed_parts_and_cost_as_the_evaluator():
    """Windows with only the groups nearest the boundary free: every split keeps each block's
    fixed part on its side, is a valid partition (the evaluator accepts it) and is costed right."""
    checked = 0
    for seed in range(800):
        rng = random.Random(seed)
        p = random_problem(seed, n_max=10, k_max=4)
        blocks = random_start(p, rng)
        if len(blocks) < 2:
            continue
        g = p.graph
        plan = _Plan(p, [[g.index[v] for v in b] for b in blocks])
        first, second = plan.blocks[0], plan.blocks[1]
        if 0 in plan.quotient()[1]:
            first, second = second, first
        found = _boundary(plan, first, second, rng.randint(1, 3))
        if found is None:
            continue
        bit, must_first, must_second = found
        win = _Window(plan, bit, 10_000, must_first=must_first, must_second=must_second)
        if not win.ok:
            continue
        for mask in win.ideals.tolist():
            assert mask & must_first == must_first and not mask & must_second
        fixed_first = [u for u in first if must_first and bit[u] == must_first.bit_length() - 1]
        fixed_second = [u for u in second if must_second and bit[u] == must_second.bit_length() - 1]
        for mask in win.ideals.tolist():
            assert all(mask >> bit[u] & 1 for u in fixed_first)
            assert not any(mask >> bit[u] & 1 for u in fixed_second)
        checked += _check_window(p, plan, win, bit, f"seed {seed}")
    assert checked > 500


@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
@pytest.mark.parametrize("chunk", range(2))
def test_two_devices_reach_the_optimum_from_any_start(chunk):
    for seed in range(chunk * 150, chunk * 150 + 150):
        rng = random.Random(seed)
        p = random_problem(seed, n_max=10, k_max=1)
        p = MtppProblem(p.graph, devices=2, memory=p.memory, bandwidth=p.bandwidth,
                        reserved_memory=p.reserved_memory)
        opt = slice_graph(p, method="dp").objective
        opt = math.inf if opt is None else opt
        if len(p.graph.nodes) <= 6:
            assert opt == pytest.approx(brute_force_mtpp(p), rel=1e-12)
        start = random_start(p, rng)
        plan = improve_plan(p, start, time_limit=None)
        start_cost = evaluate(p, start).objective
        if not math.isfinite(start_cost):
            continue  # an infeasible start is returned as it is
        assert plan.objective == pytest.approx(opt, rel=1e-9), f"seed {seed}: {plan.objective} vs optimum {opt}"


@pytest.mark.filterwarnings("ignore::stagecut.errors.StagecutWarning")
@pytest.mark.parametrize("chunk", range(2))
def test_never_worse_than_the_start_nor_below_the_optimum(chunk):
    improved = 0
    for seed in range(1000 + chunk * 150, 1000 + chunk * 150 + 150):
        rng = random.Random(seed)
        p = random_problem(seed, n_max=10, k_max=6)
        opt = slice_graph(p, method="dp").objective
        start = random_start(p, rng)
        before = evaluate(p, start).objective
        plan = improve_plan(p, start, time_limit=None, max_ideals=rng.choice([3, 50_000]), max_free=rng.randint(0, 3))
        if not math.isfinite(before):
            assert plan.objective is None and plan.status == "infeasible"
            continue
        assert opt is not None
        assert plan.objective is not None
        assert plan.objective <= before
        assert plan.objective >= opt * (1 - 1e-12)
        assert evaluate(p, plan.stages).objective == plan.objective
        assert plan.stats["start_objective"] == before
        improved += plan.objective < before
    assert improved > 30


def test_improves_brkga_on_a_regal_graph():
    p = MtppProblem(sc.regal_graph(80, model="barabasi_albert", seed=0), devices=8)
    start = slice_graph(p, method="brkga", seed=0, decodes=2000, improve=False)
    plan = improve_plan(p, start, time_limit=30)
    assert plan.objective < start.objective
    assert evaluate(p, plan.stages).objective == plan.objective
    assert np.isfinite(plan.stats["start_objective"])


def test_the_time_limit_stops_the_search_with_the_start():
    p = MtppProblem(sc.regal_graph(80, model="barabasi_albert", seed=0), devices=8)
    start = slice_graph(p, method="brkga", seed=0, decodes=500, improve=False)
    plan = improve_plan(p, start, time_limit=1e-9)
    assert plan.stats["moves"] == 0 and plan.objective == start.objective
    assert "stopped at the time limit" in plan.notes[0]
    chain = MtppProblem(sc.Graph.chain([1.0, 1.0, 1.0, 1.0]), devices=2)
    one = improve_plan(chain, [[0, 1, 2, 3]], time_limit=1e-9)  # (the split of a lone block waits for it too)
    assert one.stats["moves"] == 0 and len(one.stages) == 1


def test_boundary_windows_move_the_cut_of_a_long_chain():
    """100 groups: no window fits whole, yet the boundary windows walk the cut to the middle
    (from either side: the costlier block is the later one or the earlier one)."""
    p = MtppProblem(sc.Graph.chain([1.0] * 100), devices=2)
    for cut in (20, 80):
        plan = improve_plan(p, [list(range(cut)), list(range(cut, 100))], time_limit=None, moves=False)
        assert plan.objective == 50.0 and plan.status == "optimal"
    assert improve_plan(p, [list(range(20)), list(range(20, 100))], max_free=0, moves=False).objective == 80.0
    # (the moves of single groups walk the cut too, one node at a time)
    assert improve_plan(p, [list(range(20)), list(range(20, 100))], max_free=0).objective == 50.0
