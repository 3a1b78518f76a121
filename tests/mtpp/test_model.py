"""The MTPP evaluator: hand-computed costs, tensor-once counting, overflow, validation."""

import math

import networkx as nx
import pytest

from stagecut.errors import InvalidArgumentError, InvalidGraphError
from stagecut.graph import Graph, Node
from stagecut.mtpp.model import MtppProblem, block_cost, evaluate, lower_bound


def diamond():
    # a -> b, a -> c, b -> d, c -> d
    nodes = [
        Node("a", {"accelerator": 1.0}, memory=4.0, comm=2.0),
        Node("b", {"accelerator": 3.0}, memory=1.0, comm=0.5),
        Node("c", {"accelerator": 2.0}, memory=1.0, comm=0.25),
        Node("d", {"accelerator": 5.0}, memory=2.0, comm=9.0),
    ]
    return Graph(nodes, [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])


def test_tensor_counted_once_per_block_side():
    p = MtppProblem(diamond(), devices=2)
    # {a}: work 1 + a's tensor leaves once (two consumers outside) = 3
    assert block_cost(p, ["a"]) == 3.0
    # {b, c, d}: a's tensor enters once; work 10; nothing leaves (d is a sink) = 12
    assert block_cost(p, ["b", "c", "d"]) == 12.0
    # {a, b}: work 4, a leaves (to c) 2, b leaves (to d) 0.5 -> 6.5
    assert block_cost(p, ["a", "b"]) == 6.5
    # {c}: a enters 2, work 2, c leaves 0.25
    assert block_cost(p, ["c"]) == 4.25
    ev = evaluate(p, [["a"], ["b", "c", "d"]])
    assert ev.objective == 12.0 and ev.block_costs == (3.0, 12.0) and ev.feasible


def test_overflow_and_hard_limit():
    g = diamond()
    p = MtppProblem(g, devices=4, memory=3.0, bandwidth=2.0, reserved_memory=1.0)
    # {a}: params 4 + reserved 1 - 3 = 2 over -> 1.0 extra
    assert block_cost(p, ["a"]) == 3.0 + 1.0
    # {b}: 1 + 1 - 3 < 0 -> none; a enters 2, work 3, b leaves 0.5
    assert block_cost(p, ["b"]) == 5.5
    hard = MtppProblem(g, devices=4, memory=3.0, reserved_memory=1.0)
    assert block_cost(hard, ["a"]) == math.inf
    assert block_cost(hard, ["b"]) == 5.5
    assert not evaluate(hard, [["a"], ["b"], ["c"], ["d"]]).feasible


def test_cyclic_quotient_and_bad_partitions_are_rejected():
    p = MtppProblem(diamond(), devices=3)
    with pytest.raises(InvalidGraphError, match="cycle"):
        evaluate(p, [["a", "d"], ["b", "c"]])
    with pytest.raises(InvalidGraphError, match="'d'"):
        evaluate(p, [["a"], ["b", "c"]])
    with pytest.raises(InvalidGraphError, match="'b'"):
        evaluate(p, [["a", "b"], ["b", "c", "d"]])
    with pytest.raises(InvalidGraphError, match="unknown node 'z'"):
        evaluate(p, [["a", "b", "c", "d", "z"]])
    with pytest.raises(InvalidGraphError, match="blocks for 3 devices"):
        evaluate(p, [["a"], ["b"], ["c"], ["d"]])
    with pytest.raises(InvalidGraphError, match="empty"):
        evaluate(p, [["a", "b", "c", "d"], []])


def test_problem_validation_names_the_field():
    g = diamond()
    with pytest.raises(InvalidArgumentError, match="devices"):
        MtppProblem(g, devices=0)
    with pytest.raises(InvalidArgumentError, match="devices"):
        MtppProblem(g, devices=2.5)
    with pytest.raises(InvalidGraphError, match="devices"):
        MtppProblem(g)  # no default
    with pytest.raises(InvalidArgumentError, match="memory"):
        MtppProblem(g, devices=2, memory=-1)
    with pytest.raises(InvalidArgumentError, match="bandwidth"):
        MtppProblem(g, devices=2, memory=1.0, bandwidth=0.0)
    with pytest.raises(InvalidArgumentError, match="reserved_memory"):
        MtppProblem(g, devices=2, reserved_memory=float("nan"))
    with pytest.raises(InvalidArgumentError, match="colocate"):
        MtppProblem(g, devices=2, colocate="yes")
    cpu_only = Graph([Node("x", {"cpu": 1.0}), Node("y", {"accelerator": 1.0})], [("x", "y")])
    with pytest.raises(InvalidGraphError, match="node 'x'"):
        MtppProblem(cpu_only, devices=2)
    with pytest.raises(InvalidGraphError, match="accelerators"):
        MtppProblem(Graph.chain([1.0], defaults={"accelerators": 0}))
    assert MtppProblem(Graph.chain([1.0], defaults={"accelerators": 3})).devices == 3


def test_old_argument_names_warn_and_mean_the_same():
    g = diamond()
    new = MtppProblem(g, devices=3, memory=3.0, bandwidth=2.0)
    with pytest.warns(DeprecationWarning, match="stages= is now devices="):
        assert MtppProblem(g, stages=3, memory=3.0, bandwidth=2.0) == new
    with pytest.warns(DeprecationWarning, match="fast_memory= is now memory="):
        assert MtppProblem(g, devices=3, fast_memory=3.0, bandwidth=2.0) == new
    with pytest.warns(DeprecationWarning, match="by keyword"):
        assert MtppProblem(g, 3, 3.0, 2.0) == new
    assert new.stages == 3 and new.fast_memory == 3.0  # read-only aliases
    with pytest.raises(InvalidArgumentError, match="devices= only"), pytest.warns(DeprecationWarning):
        MtppProblem(g, devices=2, stages=3)
    with pytest.raises(InvalidArgumentError, match="both"), pytest.warns(DeprecationWarning):
        MtppProblem(g, 2, devices=2)


def test_as_problem_builds_one_way():
    from stagecut.mtpp.model import as_problem

    g = diamond()
    p = as_problem(g, devices=2, memory=3.0)
    assert p == MtppProblem(g, devices=2, memory=3.0)
    assert as_problem(p) is p
    with pytest.raises(InvalidArgumentError, match="memory given with an MtppProblem"):
        as_problem(p, memory=5.0)
    with pytest.raises(InvalidGraphError, match="expected a Graph or an MtppProblem"):
        as_problem([1, 2], devices=2)


def test_evaluation_stages_split_the_cost_into_parts():
    p = MtppProblem(diamond(), devices=2, memory=3.0, bandwidth=2.0)
    ev = evaluate(p, [["a"], ["b", "c", "d"]])
    a, rest = ev.stages
    # {a}: work 1, its tensor leaves once (2), overflow (4 - 3) / 2
    assert (a.index, a.device, a.nodes, a.memory) == (0, "accelerator:0", ("a",), 4.0)
    assert dict(a.parts) == {"work": 1.0, "io": 2.0, "overflow": 0.5} and a.load == 3.5
    assert rest.load == sum(rest.parts.values()) == block_cost(p, ["b", "c", "d"])
    assert ev.block_costs == (a.load, rest.load)
    # the stages of an evaluation (or of any result) are accepted as blocks
    assert evaluate(p, ev.stages) == ev


def test_networkx_bytes_and_bandwidth_map_to_tensor_costs():
    G = nx.DiGraph()
    G.add_node(0, accelerator=1.0, out_bytes=100.0, memory=10.0)
    G.add_node(1, accelerator=2.0, out_bytes=50.0, memory=10.0)
    G.add_edge(0, 1)
    g = Graph.from_networkx(G, output_bytes="out_bytes", bandwidth=10.0)
    p = MtppProblem(g, devices=2, memory=15.0, bandwidth=10.0)
    # {0}: work 1 + 100 B / 10 B per unit = 10 out
    assert block_cost(p, [0]) == 11.0
    # both: work 3, overflow (20 - 15) / 10
    assert block_cost(p, [0, 1]) == 3.5


def test_lower_bound_is_valid_on_a_chain():
    g = Graph.chain([3.0, 1.0, 2.0, 2.0], comm=0.5, memory=[4.0, 0.0, 4.0, 4.0])
    p = MtppProblem(g, devices=2, memory=6.0, bandwidth=2.0)
    # best of the three cut points by hand
    cands = []
    for c in range(1, 4):
        a, b = list(range(c)), list(range(c, 4))
        cands.append(max(block_cost(p, a), block_cost(p, b)))
    cands.append(block_cost(p, [0, 1, 2, 3]))
    lb = lower_bound(p)
    assert lb <= min(cands)
    # single-node term: node 0 has work 3 and no overflow; average term (8 + (12-12)/2)/2 = 4
    assert lb == 4.0


def test_forced_groups_keep_classes_and_merge_classes_on_cycles():
    from stagecut.mtpp.model import forced_groups

    def training(reverse):
        nodes = [Node(f"f{i}", {"accelerator": 1.0}, memory=2.0, comm=1.0, colocation=i) for i in range(3)]
        nodes += [Node(f"b{i}", {"accelerator": 2.0}, memory=2.0, comm=1.0, colocation=i) for i in range(3)]
        edges = [("f0", "f1"), ("f1", "f2")]
        edges += [("b2", "b1"), ("b1", "b0")] if reverse else [("b0", "b1"), ("b1", "b2")]
        return Graph(nodes, edges)

    # backward as a parallel copy (the layer-graph files): one group per class
    p = MtppProblem(training(reverse=False), devices=3, memory=5.0, bandwidth=1.0)
    assert forced_groups(p) == [0, 1, 2, 0, 1, 2]
    assert forced_groups(MtppProblem(training(False), devices=3, colocate=False)) == list(range(6))
    # the largest group: work 3 + overflow (4 - 5)^+ = 3; the average bound: work 9 + overflow
    # (12 - 5 j)^+ over j blocks, least at j = 3: 9 / 3 = 3
    assert lower_bound(p) == 3.0
    # backward wired in reverse: all classes on one cycle, one group
    q = MtppProblem(training(reverse=True), devices=3, memory=5.0, bandwidth=1.0)
    assert forced_groups(q) == [0] * 6
    assert lower_bound(q) == 9.0 + (12.0 - 5.0) / 1.0
    assert evaluate(q, [["f0", "f1", "f2", "b0", "b1", "b2"]]).objective == 16.0


def test_an_overflowing_cost_is_an_overflow_error_not_infeasible():
    # (20 - 5) / 1e-308 = 1.5e309: past the largest float; it used to read as 'infeasible'
    g = Graph.chain([1.0, 1.0], memory=[10.0, 10.0])
    with pytest.raises(InvalidArgumentError, match="overflow"):
        MtppProblem(g, devices=2, memory=5.0, bandwidth=1e-308)
    near = MtppProblem(g, devices=2, memory=5.0, bandwidth=1e-300)  # 1.5e301: fine
    assert evaluate(near, [[0], [1]]).objective == pytest.approx(1.0 + 5.0 / 1e-300)
