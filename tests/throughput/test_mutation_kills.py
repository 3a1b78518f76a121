"""Tests written to kill the mutants of the max-load evaluator that mutmut found alive (issue 11,
item 4; see benches/MUTATION.md). Each test fails on the mutants it names."""

import pytest

import stagecut as sc
from stagecut.errors import InvalidGraphError
from stagecut.graph import Node
from stagecut.throughput.evaluate import evaluate


def _four_nodes() -> sc.Graph:
    """``a -> b, a -> c, b -> d, c -> d``; ``c`` runs on accelerators only."""
    nodes = [
        Node("a", {"accelerator": 3.0, "cpu": 10.0}, memory=4.0, comm=0.5),
        Node("b", {"accelerator": 1.0, "cpu": 2.0}, memory=8.0, comm=0.25),
        Node("c", {"accelerator": 2.0}, memory=1.0, comm=1.0),
        Node("d", {"accelerator": 4.0, "cpu": 1.0}, memory=2.0, comm=0.0),
    ]
    return sc.Graph(nodes, [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])


def test_every_field_of_every_device_load() -> None:
    """Kills the ``_device_load`` mutants that drop or replace a field of the ``DeviceLoad`` it
    returns (``index=None``, ``device=None``, ``feasible=None``, no ``parts``, no ``memory``):
    the solvers' tests compare objectives, not the stages' fields."""
    g = _four_nodes()
    split = {"a": ("accelerator", 0), "c": ("accelerator", 0), "b": ("accelerator", 1), "d": ("cpu", 0)}
    ev = evaluate(g, split, devices=2, cpus=1, memory=6.0)
    # accelerator 0 = {a, c}: compute 5, sends a's (0.5) and c's (1) outputs
    # accelerator 1 = {b}: compute 1, receives a's output, sends b's: 0.75; memory 8 > 6
    # cpu 0 = {d}: compute 1, no communication on a CPU
    want = [
        (0, "accelerator:0", "accelerator", 0, ("a", "c"), 6.5, 5.0, 1.5, 5.0, True, ()),
        (1, "accelerator:1", "accelerator", 1, ("b",), 1.75, 1.0, 0.75, 8.0, False,
         ("memory 8 exceeds the limit 6",)),
        (2, "cpu:0", "cpu", 0, ("d",), 1.0, 1.0, 0.0, 2.0, True, ()),
    ]
    got = [(s.index, s.device, s.kind, s.kind_index, s.nodes, s.load, s.parts["compute"], s.parts["comm"],
            s.memory, s.feasible, s.issues) for s in ev.stages]
    assert got == want
    assert all(s.feasible is f for s, f in zip(ev.stages, [True, False, True]))
    assert ev.objective == 6.5
    assert not ev.feasible
    assert ev.issues == ("accelerator 1: memory 8 exceeds the limit 6",)


def test_a_bad_split_says_what_is_wrong() -> None:
    """Kills the ``_devices_of`` mutants that blank the message of a split that is not a mapping
    (``InvalidGraphError(None)``, ``type(None).__name__``) or of an unknown node: the tests of
    bad splits checked the error type only."""
    g = sc.Graph.chain([1.0, 1.0])
    with pytest.raises(InvalidGraphError, match=r"^split must map node ids to \(kind, index\), got list$"):
        evaluate(g, [("accelerator", 0), ("accelerator", 0)])  # type: ignore[arg-type]
    with pytest.raises(InvalidGraphError, match=r"^split assigns unknown node 'zz'$"):
        evaluate(g, {0: ("accelerator", 0), 1: ("accelerator", 0), "zz": ("accelerator", 1)})


@pytest.mark.parametrize("device", [("accelerator", 0, 1), (5, 0), ("accelerator",), "accelerator", ("cpu", -1),
                                    ("cpu", True), ("cpu", 1.0)])
def test_a_device_is_a_kind_and_an_index(device: object) -> None:
    """Kills the ``_devices_of`` mutants that weaken the pair check to ``(sequence and length 2)
    or a string kind`` (a triple passes) or ``sequence or (length 2 and a string kind)`` (an int
    kind passes, a 1-tuple reaches ``d[1]``), and the index check to ``not int and < 0`` (-1
    passes), ``bool and not int`` (``True`` passes) or ``not ok and bool`` (a triple passes)."""
    g = sc.Graph.chain([1.0, 1.0])
    with pytest.raises(InvalidGraphError, match=r"^split: node 1 is on .*, not a \(kind, index >= 0\) pair$"):
        evaluate(g, {0: ("accelerator", 0), 1: device})  # type: ignore[dict-item]
