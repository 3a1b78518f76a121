"""Tests that kill the mutants of ``stagecut/mtpp/model.py`` that survived the rest of the suite
(benches/MUTATION.md, run of 2026-11-27)."""

from __future__ import annotations

import pytest

from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph, Node
from stagecut.mtpp.model import MtppProblem, evaluate, lower_bound


def _huge() -> Graph:
    # a -> b; a's tensor costs 0.8e308, a holds 1e308 bytes: the graph's own totals are finite
    # (compute + 2 * comm = 1.6e308), but the block {a} would cost 1 + 0.8e308 + 1e308 (overflow
    # at bandwidth 1 over a memory of 0): past the largest float.
    return Graph([Node("a", {"accelerator": 1.0}, memory=1e308, comm=0.8e308),
                  Node("b", {"accelerator": 1.0})], [("a", "b")])


def test_the_overflow_guard_counts_the_tensors() -> None:
    with pytest.raises(InvalidArgumentError, match="overflow"):
        MtppProblem(_huge(), devices=2, memory=0.0, bandwidth=1.0)
    # at bandwidth 10 even every tensor in and out (2 * 0.8e308) plus the overflow (0.1e308) is
    # finite: accepted, and the block costs 1 + 0.8e308 + 0.1e308
    p = MtppProblem(_huge(), devices=2, memory=0.0, bandwidth=10.0)
    ev = evaluate(p, [["a"], ["b"]])
    assert ev.feasible and ev.block_costs[0] == pytest.approx(0.9e308, rel=1e-12)


def test_the_lower_bound_holds_the_heaviest_group_with_its_overflow() -> None:
    # four devices for four nodes: the average bound falls to 8 / 4 = 2, the heaviest node costs 5
    assert lower_bound(MtppProblem(Graph.chain([5.0, 1.0, 1.0, 1.0]), devices=4)) == 5.0
    # with memory: the heaviest node also streams (10 - 4) / 2 = 3 of overflow, 5 + 3 = 8; the
    # average bound is (8 + (10 + 4 * (0 - 4))^+ / 2) / 4 = 2
    heavy = Graph.chain([5.0, 1.0, 1.0, 1.0], memory=[10.0, 0.0, 0.0, 0.0])
    assert lower_bound(MtppProblem(heavy, devices=4, memory=4.0, bandwidth=2.0)) == 8.0
    # one device: the average bound (all the work and the overflow of every parameter) wins
    assert lower_bound(MtppProblem(heavy, devices=1, memory=4.0, bandwidth=2.0)) == 8.0 + 3.0
