"""Tests that kill the mutants of ``stagecut/training/evaluate.py`` that survived the rest of the
suite (benches/MUTATION.md, run of 2026-11-27): hand-computed stage costs on a two-level network
with tensor parallelism, every part of a stage's TPS, and the plan checks no other test reached
(a repeated node, a TMPC choice naming a node of another stage, ``exact_batch``, an unknown node
given to ``stage_cost`` directly)."""

from __future__ import annotations

import pytest

from stagecut import training as sp
from stagecut.errors import InvalidGraphError
from stagecut.training import TMPC, PiperEdge, PiperNode, PiperProblem


def _two_level() -> PiperProblem:
    """Two layers ``0 -> 1`` (10 bytes), a TMPC per ``t`` in {1, 2}, every number distinct; servers
    of 2 devices linked at 16 bytes/s inside, 2 bytes/s between them; N = 4."""
    n0 = PiperNode(0, {1: (TMPC("vanilla", 6.0, 8.0, 1.0, 2.0, {}, {1: 3.0}),),
                       2: (TMPC("tp", 4.0, 4.0, 1.0, 1.0, {}, {1: 5.0}),)})
    n1 = PiperNode(1, {1: (TMPC("vanilla", 2.0, 8.0, 1.0, 2.0, {0: 7.0}, {}),),
                       2: (TMPC("tp", 2.0, 4.0, 1.0, 1.0, {0: 11.0}, {}),)})
    return PiperProblem((n0, n1), (PiperEdge(0, 1, 10.0),), devices=8, memory=1e9, bandwidth=2.0, batch=4,
                        server_size=2, intra_bandwidth=16.0)


def _chain() -> PiperProblem:
    return sp.chain_problem([3.0, 1.0, 2.0], devices=4, memory=1e9, bandwidth=1.0, batch=2, params=1.0)


def test_a_stage_wider_than_a_server_all_reduces_between_servers() -> None:
    # d = 2, t = 2: the stage's 4 devices span two servers, so the all-reduce moves at B = 2, not
    # at the intra-server 16 (it would if only d were compared with the server size).
    # compute 4 / 2 = 2; edge 2 * 10 / 2 / 2 = 5; sync 2 * 5 / 2 / 16 = 0.3125;
    # all-reduce 4 * (2 - 1) * 4 / 2 / 4 = 2 bytes, / 2 = 1.
    cost = sp.stage_cost(_two_level(), [0], d=2, t=2, tmpcs={0: "tp"}, y=1)
    assert cost.parts == pytest.approx({"compute": 2.0, "comm": 5.0, "sync": 0.3125, "allreduce": 1.0}, rel=1e-12)
    assert cost.tps == pytest.approx(8.3125, rel=1e-12)
    assert cost.memory == pytest.approx(2.0, rel=1e-12)  # mem_a * y + mem_b = 1 + 1


def test_the_parts_use_the_bandwidth_each_term_moves_at() -> None:
    # d = 2, t = 1 fits a server: sync and all-reduce at 16, the boundary tensor at 2.
    # compute 6 / 2 = 3; edge 20 / 2 / 2 = 5; sync 2 * 3 / 2 / 16 = 0.1875;
    # all-reduce 4 * 1 * 8 / 2 / 4 = 4 bytes, / 16 = 0.25.
    cost = sp.stage_cost(_two_level(), [0], d=2, t=1, tmpcs={0: "vanilla"}, y=2)
    assert cost.parts == pytest.approx({"compute": 3.0, "comm": 5.0, "sync": 0.1875, "allreduce": 0.25}, rel=1e-12)
    assert cost.tps == pytest.approx(sum(cost.parts.values()), rel=1e-12)
    assert cost.memory == pytest.approx(4.0, rel=1e-12)  # 1 * y + 2 with y = 2
    # the consumer's side of the same edge: sync_fw of node 1 (t = 2, d = 1, one server)
    back = sp.stage_cost(_two_level(), [1], d=1, t=2, tmpcs={1: "tp"}, y=1)
    assert back.parts == pytest.approx({"compute": 2.0, "comm": 10.0, "sync": 22.0 / 16.0, "allreduce": 0.0},
                                       rel=1e-12)
    # the evaluator reports the same parts for the same stages
    ev = sp.evaluate_training(_two_level(), [((0,), 2, 1, {0: "vanilla"}), ((1,), 1, 2, {1: "tp"})])
    assert ev.stages[0].parts == pytest.approx(cost.parts, rel=1e-12)
    assert ev.stages[1].parts == pytest.approx(back.parts, rel=1e-12)
    assert ev.tps == pytest.approx(max(cost.tps, back.tps), rel=1e-12)


def test_stage_cost_names_an_unknown_node() -> None:
    with pytest.raises(InvalidGraphError, match="unknown node 7"):
        sp.stage_cost(_chain(), [0, 7], d=1, t=1, tmpcs={0: "vanilla", 7: "vanilla"}, y=1)


def test_a_node_in_two_stages_is_refused() -> None:
    both = [((0, 1), 1, 1, {0: "vanilla", 1: "vanilla"}), ((1, 2), 1, 1, {1: "vanilla", 2: "vanilla"})]
    with pytest.raises(InvalidGraphError, match="node 1 is in stages 0 and 1"):
        sp.evaluate_training(_chain(), both)


def test_the_tmpc_choice_names_exactly_the_stage_nodes() -> None:
    extra = [((0,), 1, 1, {0: "vanilla", 1: "vanilla"}), ((1, 2), 1, 1, {1: "vanilla", 2: "vanilla"})]
    with pytest.raises(InvalidGraphError, match="exactly the stage's nodes"):
        sp.evaluate_training(_chain(), extra)


def test_exact_batch_is_enforced_and_a_plan_keeps_its_own() -> None:
    prob = _chain()
    short = [((0, 1, 2), 1, 1, dict.fromkeys(range(3), "vanilla"))]  # degrees sum to 1 < N = 2
    assert sp.evaluate_training(prob, short).feasible
    with pytest.raises(InvalidGraphError, match="sum to 1; the batch is 2"):
        sp.evaluate_training(prob, short, exact_batch=True)
    plan = sp.plan_training(prob, exact_batch=True)
    assert plan.exact_batch and plan.batch_used == 2
    assert sp.evaluate_training(prob, plan).tps == plan.objective
    # scored for a batch of 4, the plan's own exact_batch refuses degrees summing to 2
    with pytest.raises(InvalidGraphError, match="sum to 2; the batch is 4"):
        sp.evaluate_training(prob, plan, batch=4)
    assert sp.evaluate_training(prob, plan, batch=4, exact_batch=False).batch == 2


def test_the_verdict_fields() -> None:
    prob = _two_level()
    ev = sp.evaluate_training(prob, [((0,), 2, 1, {0: "vanilla"}), ((1,), 1, 2, {1: "tp"})])
    assert (ev.devices, ev.batch) == (4, 3)  # 2 * 1 + 1 * 2 devices; degrees 2 + 1
    assert ev.feasible and ev.objective == ev.tps and ev.issues == ()
    # stage nodes come back in the problem's order, whatever order they were given in
    chain = sp.evaluate_training(_chain(), [((2, 0, 1), 1, 1, dict.fromkeys(range(3), "vanilla"))])
    assert chain.stages[0].nodes == (0, 1, 2)


def test_a_stage_over_the_memory_makes_the_plan_infeasible() -> None:
    # per device: stage 0 needs 1 * 2 + 2 = 4 bytes (y = 2), stage 1 needs 1 * 1 + 1 = 2
    tight = _two_level().replace(memory=3.0)
    ev = sp.evaluate_training(tight, [((0,), 2, 1, {0: "vanilla"}), ((1,), 1, 2, {1: "tp"})])
    assert not ev.feasible and ev.objective is None
    assert ev.tps == float("inf")
    assert ev.issues == ("stage 0 needs 4 bytes per device, over 3 bytes",)
    assert [st.memory for st in ev.stages] == [4.0, 2.0]
    assert ev.stages[0].load == pytest.approx(8.4375, rel=1e-12)  # the stage's TPS is still reported


@pytest.mark.parametrize("prob", [_chain(), _chain().replace(server_size=2, intra_bandwidth=4.0)],
                         ids=["flat", "two-level"])
def test_a_tensor_parallel_degree_below_one_is_a_bad_plan(prob: PiperProblem) -> None:
    with pytest.raises(InvalidGraphError, match="stage 0: tensor-parallel degree 0 < 1"):
        sp.evaluate_training(prob, [((0, 1, 2), 1, 0, dict.fromkeys(range(3), "vanilla"))])
