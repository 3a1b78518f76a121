"""``place``: ``auto`` reports the strongest bound the library has (memory and communication
included) and stops when its answer meets it; bad arguments are one clear error."""

import pytest

import stagecut as sc
from helpers import SHARED, require_shared
from stagecut.errors import InvalidArgumentError
from stagecut.latency import place
from stagecut.latency.exact.bounds import latency_bound, memory_path_bound
from stagecut.latency.model.problem import LatencyProblem

LAYER_GRAPHS = SHARED / "latency-inputs" / "LayerGraphs"


@pytest.mark.parametrize("name, optimum", [("gnmt", 219.056), ("bert24", 100.218)])
def test_auto_proves_the_layer_graphs_optimal_with_the_memory_path_bound(name, optimum):
    g = sc.read_workload(require_shared(LAYER_GRAPHS / f"{name}_inference.json"))
    s = place(g, method="auto", time_limit=60)
    bound = latency_bound(LatencyProblem.from_workload(g))
    assert s.status == "optimal"
    assert s.objective == pytest.approx(optimum, abs=1e-3)
    assert s.lower_bound == pytest.approx(s.objective, rel=1e-9)
    assert bound.value == pytest.approx(s.objective, rel=1e-6)  # proven by the bound, not claimed
    assert any("memory-path" in n and "proven optimal" in n for n in s.notes)


def test_auto_s_bound_is_at_least_the_memory_path_bound_and_below_its_answer():
    g = sc.read_workload(require_shared(LAYER_GRAPHS / "resnet50_inference.json"))
    p = LatencyProblem.from_workload(g)
    s = place(p, method="auto", time_limit=3)
    # (the skip-path bound, about a second of CPU here, may not fit in the bounds phase's share)
    assert s.lower_bound >= memory_path_bound(p) - 1e-9 > p.lower_bound() + 1.0
    assert latency_bound(p).value <= s.objective
    assert s.lower_bound <= s.objective
    assert s.status != "optimal"


def test_place_refuses_what_is_not_a_graph():
    for bad in (None, {}, [1, 2], "graph.json"):
        with pytest.raises(InvalidArgumentError, match="graph: expected a stagecut Graph or LatencyProblem"):
            place(bad)


@pytest.mark.parametrize("method, option", [("sa", "iterations"), ("ea", "bogus"), ("milp", "window"),
                                            ("local", "temperature_x")])
def test_an_option_a_method_does_not_take_is_one_clear_error(method, option):
    g = sc.Graph.chain([1.0, 2.0], memory=[1.0, 1.0])
    with pytest.raises(InvalidArgumentError, match=f"{option}: not an option of {method}"):
        place(g, 1, method=method, **{option: 1})
