"""Single-group moves (``stagecut.mtpp.moves``) held to the evaluator and to brute force over moves.

- the costs the search keeps by sums and differences equal the evaluator's after any sequence of
  valid moves (random instances with colocation, hard limits and overflow);
- every move it may make keeps the quotient acyclic, and it offers every move the evaluator
  accepts: at the end of the descent no single move of a group (checked one by one with the
  evaluator) makes the pair of blocks it touches smaller;
- ``improve_plan`` with kicks is never worse than without, repeatable for a seed and a kick
  count, and stops at its time limit.
"""

from __future__ import annotations

import math
import random
import time

import pytest
from tests.mtpp.test_combinatorial import random_problem
from tests.mtpp.test_improve import random_start

import stagecut as sc
from stagecut.errors import InvalidArgumentError
from stagecut.mtpp.improve import improve_plan
from stagecut.mtpp.model import MtppProblem, block_cost, evaluate
from stagecut.mtpp.moves import MoveSearch


def _search(problem: MtppProblem, blocks: list[list[object]]) -> MoveSearch:
    g = problem.graph
    return MoveSearch(problem, [[g.index[v] for v in b] for b in blocks])


def _costs(problem: MtppProblem, search: MoveSearch) -> tuple[list[float], list[float]]:
    """The search's costs of its nonempty blocks, and the evaluator's, in pipeline order."""
    g = problem.graph
    ev = evaluate(problem, [[g.ids[i] for i in b] for b in search.blocks()])
    mine = [c for b, c in enumerate(search.cost) if search.size[b]]
    return mine, [s.load for s in ev.stages]


def _close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(x == y or abs(x - y) <= 1e-9 * max(1.0, abs(y)) for x, y in zip(a, b))


@pytest.mark.parametrize("seed", range(150))
def test_kept_costs_are_the_evaluators(seed):
    p = random_problem(seed, n_max=9, k_max=4)
    rng = random.Random(seed)
    start = random_start(p, rng)
    if not math.isfinite(evaluate(p, start).objective):
        return
    spare = [[] for _ in range(rng.randint(0, p.devices - len(start)))]
    s = _search(p, spare + start if seed % 2 else start + spare)  # empty blocks may be filled too
    assert _close(*_costs(p, s))
    for _ in range(25):
        x = rng.randrange(len(s.groups))
        lo, hi = s.span(x)
        b = rng.randint(lo, hi)
        if b != s.block[x]:
            expect = s.trial(x, b)
            a = s.block[x]
            s.move(x, b)
            assert math.isclose(s.cost[a], expect[0], rel_tol=1e-9, abs_tol=1e-9)
            assert math.isclose(s.cost[b], expect[1], rel_tol=1e-9, abs_tol=1e-9)
        mine, theirs = _costs(p, s)  # (evaluate also checks the quotient is acyclic and the groups whole)
        assert _close(mine, theirs), (seed, mine, theirs)


@pytest.mark.parametrize("seed", range(60))
def test_the_descent_ends_where_no_single_move_pays(seed):
    p = random_problem(seed + 1000, n_max=8, k_max=4)
    rng = random.Random(seed)
    start = random_start(p, rng)
    if not math.isfinite(evaluate(p, start).objective):
        return
    s = _search(p, start)
    s.descend(random.Random(seed))
    g = p.graph
    base = s.blocks()
    order = list(range(s.k))
    for x in range(len(s.groups)):
        a = s.block[x]
        for b in order:
            if b == a:
                continue
            moved = [[i for i in range(len(g.nodes)) if (s.block[s.group_of[i]] if s.group_of[i] != x else b) == c]
                     for c in order]
            try:
                ev = evaluate(p, [[g.ids[i] for i in blk] for blk in moved if blk])
            except sc.InvalidGraphError:
                lo, hi = s.span(x)
                assert not lo <= b <= hi  # a move the search may make is always a valid partition
                continue
            lo, hi = s.span(x)
            if not lo <= b <= hi:
                continue  # (valid as a set partition in another block order: not a move of this search)
            new_a = block_cost(p, [g.ids[i] for i in moved[a]]) if moved[a] else 0.0
            new_b = block_cost(p, [g.ids[i] for i in moved[b]]) if moved[b] else 0.0
            old = sorted((s.cost[a], s.cost[b]), reverse=True)
            new = sorted((new_a, new_b), reverse=True)
            assert not (new[0] < old[0] * (1 - 1e-9)) and not (new[0] <= old[0] and new[1] < old[1] * (1 - 1e-9)), \
                (seed, x, a, b, old, new, ev.objective)
    assert base == s.blocks()


def test_a_move_past_a_block_in_between():
    """y must go from the first block to the third; the second lies between them (x1 -> x2 -> x3), so
    no re-split of two blocks can do it."""
    g = sc.Graph([sc.Node("x1", {"accelerator": 10.0}), sc.Node("x2", {"accelerator": 12.0}),
                  sc.Node("x3", {"accelerator": 8.0}), sc.Node("y", {"accelerator": 5.0})],
                 [("x1", "x2"), ("x2", "x3")])
    p = MtppProblem(g, devices=3)
    plan = improve_plan(p, [["x1", "y"], ["x2"], ["x3"]])
    assert plan.objective == 13.0
    assert [set(s.nodes) for s in plan.stages] == [{"x1"}, {"x2"}, {"x3", "y"}]
    assert plan.stats["group_moves"] >= 1


def test_colocated_nodes_move_together():
    g = sc.Graph([sc.Node("a", {"accelerator": 10.0}), sc.Node("b", {"accelerator": 1.0}, colocation="c"),
                  sc.Node("c", {"accelerator": 1.0}, colocation="c"), sc.Node("d", {"accelerator": 6.0})],
                 [("a", "d")])
    p = MtppProblem(g, devices=2)
    s = _search(p, [["a", "b", "c"], ["d"]])
    assert len(s.groups) == 3
    moves, _ = s.descend(random.Random(0))
    assert moves == 1 and sorted(s.cost) == [8.0, 10.0]
    assert s.blocks() == [[0], [1, 2, 3]]


def _big() -> MtppProblem:
    return MtppProblem(sc.regal_graph(150, model="erdos_renyi", seed=3), devices=8)


def test_kicks_are_never_worse_and_repeatable():
    p = _big()
    start = sc.slice_graph(p, method="mla", seed=0, decodes=50, improve=False)
    none = improve_plan(p, start, time_limit=None, kicks=0)
    some = improve_plan(p, start, time_limit=None, kicks=60, seed=5)
    again = improve_plan(p, start, time_limit=None, kicks=60, seed=5)
    assert some.objective <= none.objective <= start.objective
    assert some.objective < start.objective
    assert [s.nodes for s in some.stages] == [s.nodes for s in again.stages]
    assert some.stats["kicks"] == 60
    assert evaluate(p, [list(s.nodes) for s in some.stages]).objective == some.objective


def test_kicks_until_the_time_limit():
    p = _big()
    start = sc.slice_graph(p, method="mla", seed=0, decodes=50, improve=False)
    s = _search(p, [list(st.nodes) for st in start.stages])
    out = s.search(seed=0, kicks=None, deadline=time.monotonic() + 1.0)
    assert out["time_limit_reached"] and out["kicks"] >= 1
    assert max(s.cost) <= start.objective
    plan = improve_plan(p, start, time_limit=0.5, kicks=None)  # within improve_plan: stops too
    assert plan.stats["time_limit_reached"] and plan.objective <= start.objective


def test_bad_kicks():
    p = MtppProblem(sc.Graph.chain([1.0, 1.0, 1.0]), devices=2)
    with pytest.raises(InvalidArgumentError, match="kicks"):
        improve_plan(p, [[0, 1, 2]], kicks=-1)
    with pytest.raises(InvalidArgumentError, match="kicks"):
        improve_plan(p, [[0, 1, 2]], time_limit=None, kicks=None)  # no end


def test_kicks_stop_at_the_deadline_on_a_plateau():
    """Every kick lands on a plan of the same cost and no move follows it: only the kick loop's own
    look at the clock ends the search."""
    p = MtppProblem(sc.Graph([sc.Node("a", {"accelerator": 1.0})], []), devices=2)
    s = _search(p, [["a"], []])  # the node moves between the two blocks and back, at the same cost
    out = s.search(seed=0, kicks=None, deadline=time.monotonic() + 0.2)
    assert out["time_limit_reached"] and out["kicks"] >= 2 and max(s.cost) == 1.0
    assert out["kicks_kept"] == out["kicks"]


def test_no_kicks_when_nothing_can_move_or_the_plan_meets_the_bound():
    p = MtppProblem(sc.Graph.chain([1.0, 2.0, 3.0]), devices=1)
    s = _search(p, [[0, 1, 2]])  # one block: no group can move
    out = s.search(seed=0, kicks=None, deadline=time.monotonic() + 60.0)
    assert not out["time_limit_reached"] and out["kicks"] <= 1 and out["moves"] == 0
    q = MtppProblem(sc.Graph.chain([1.0, 1.0]), devices=2)
    t = _search(q, [[0], [1]])
    out = t.search(seed=0, kicks=None, deadline=time.monotonic() + 60.0, floor=1.0)
    assert out["kicks"] == 0 and not out["time_limit_reached"]
    with pytest.raises(InvalidArgumentError, match="deadline"):
        t.search(seed=0, kicks=None)  # no deadline: it would never end


def test_at_a_hard_memory_limit_the_moves_sum_as_the_evaluator_does():
    """0.1 + 0.2 + 0.3 summed in one order is 0.6000000000000001, above a 0.6 limit; the moves and
    the evaluator must agree on whether the three nodes fit one block."""
    g = sc.Graph([sc.Node("a", {"accelerator": 1.0}, memory=0.1, comm=10.0),
                  sc.Node("b", {"accelerator": 1.0}, memory=0.2), sc.Node("c", {"accelerator": 1.0}, memory=0.3)],
                 [("a", "b"), ("a", "c")])
    p = MtppProblem(g, devices=2, memory=0.6)
    s = _search(p, [["a"], ["b", "c"]])
    merged = s.trial(0, 1)[1]
    assert merged == evaluate(p, [["a", "b", "c"]]).objective
    plan = improve_plan(p, [["a"], ["b", "c"]])
    assert plan.objective == evaluate(p, plan.stages).objective == 3.0
    # nine nodes of 0.1 summed one by one are 0.8999999999999999; a tenth makes 0.9999999999999999, and
    # exactly 1.0 summed exactly: over a limit of 0.9999999999999999
    tenth = [sc.Node(i, {"accelerator": 1.0}, memory=0.1) for i in range(10)]
    q = MtppProblem(sc.Graph(tenth, []), devices=2, memory=0.9999999999999999)
    t = _search(q, [[0], list(range(1, 10))])
    assert t.trial(0, 1)[1] == evaluate(q, [list(range(10))]).objective == math.inf


def test_re_splits_at_a_hard_memory_limit_end():
    """The re-splits' windows sum parameters in another order than the blocks do; at the limit they
    disagreed and the same two re-splits were made in turn until the time limit."""
    mem = [0.7, 0.1, 0.2, 0.3, 0.3, 0.7, 0.2, 0.2]
    nodes = [sc.Node(i, {"accelerator": float(w)}, memory=mem[i], comm=float(c))
             for i, (w, c) in enumerate(zip([3, 1, 0, 2, 2, 1, 3, 0], [5, 10, 0, 1, 5, 10, 1, 0]))]
    edges = [(0, 4), (0, 5), (1, 3), (1, 4), (1, 7), (2, 4), (2, 5), (3, 4), (3, 5), (3, 7), (4, 5), (4, 6),
             (5, 6), (5, 7)]
    g = sc.Graph(nodes, edges)
    for limit in (1.7999999999999998, 1.8, 1.0, 1.2):
        p = MtppProblem(g, devices=3, memory=limit)
        start = [[0, 1, 2, 3], [4, 5, 6, 7]]
        if not math.isfinite(evaluate(p, start).objective):
            continue
        plan = improve_plan(p, start, moves=False, time_limit=30.0)
        assert not plan.stats["time_limit_reached"] and plan.stats["moves"] < 20
        assert plan.objective == evaluate(p, plan.stages).objective <= evaluate(p, start).objective


def test_an_emptied_block_costs_nothing():
    """Under memory overflow even a block holding no parameters pays ``(R - M) / B``; an empty block
    is no block, so it costs 0, and emptying a block is a move like any other."""
    g = sc.Graph([sc.Node("a", {"accelerator": 1.0}), sc.Node("b", {"accelerator": 1.0})], [])
    p = MtppProblem(g, devices=2, memory=1.0, bandwidth=1.0, reserved_memory=3.0)  # 2 of overflow per block
    s = _search(p, [["a"], ["b"]])
    assert s.cost == [3.0, 3.0]
    assert s.trial(0, 1) == (0.0, 4.0)
    s.move(0, 1)
    assert s.cost == [0.0, 4.0] and s.size == [0, 2]
    assert _close(*_costs(p, s))
