"""The plan exports' torch-free parts that the export tests did not reach (coverage): the best
plan contiguous in program order against a brute force over every such split, its cost against
the unrestricted optimum, and the refusals. The trace is a stand-in with ``graph`` and
``order`` (all these functions read), so this runs in any install."""

from __future__ import annotations

import itertools
import math
import random
import types

import pytest

import stagecut as sc
from stagecut.errors import InvalidArgumentError, InvalidGraphError
from stagecut.frontends.export import partition_program_order, plan_to_balance, program_order_graph


def random_trace(rng, n):
    """A random DAG whose node ids follow one random topological order: the program order."""
    order = list(range(n))
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.35]
    nodes = [sc.Node(v, {"accelerator": float(rng.randint(0, 5))}, comm=float(rng.choice([0, 0, 1, 3])),
                     memory=float(rng.randint(0, 3))) for v in order]
    return types.SimpleNamespace(graph=sc.Graph(nodes, edges), order=tuple(order))


def best_in_program_order(trace, devices, memory=None):
    """The least evaluated objective over every split of the program order into at most
    ``devices`` consecutive runs (each run one accelerator), by enumeration."""
    order, n, best = list(trace.order), len(trace.order), math.inf
    for j in range(1, min(devices, n) + 1):
        for cuts in itertools.combinations(range(1, n), j - 1):
            b = (0, *cuts, n)
            split = {v: ("accelerator", i) for i in range(j) for v in order[b[i]:b[i + 1]]}
            ev = sc.evaluate(trace.graph, split, devices=devices, memory=memory)
            if ev.feasible:
                best = min(best, ev.objective)
    return best


def test_partition_program_order_is_the_best_split_in_program_order():
    rng = random.Random(8)
    costly = exact = 0
    for _ in range(40):
        trace = random_trace(rng, rng.randint(2, 7))
        devices = rng.randint(1, 4)
        memory = rng.choice([None, 6.0])
        kw = {} if memory is None else {"memory": memory}
        plan = partition_program_order(trace, devices, **kw)
        free = sc.partition(trace.graph, devices=devices, **kw)
        want = best_in_program_order(trace, devices, memory)
        if math.isinf(want):
            assert plan.objective is None or not math.isfinite(plan.objective)
            continue
        # the best split into runs of program order (and it is one: see the next test)
        assert plan.objective == pytest.approx(want, abs=1e-9), (trace.graph.edges, devices, memory)
        exact += 1
        ev = sc.evaluate(trace.graph, plan.device_of(), devices=devices, **kw)
        assert ev.feasible and ev.objective == plan.objective  # within the memory it was given
        # the cost of the restriction against the unrestricted optimum, and what it proves
        assert plan.stats["unrestricted_objective"] == free.objective <= plan.objective + 1e-9
        cost = plan.objective / free.objective - 1.0 if free.objective > 0 else 0.0
        assert plan.stats["restriction_cost"] == pytest.approx(max(cost, 0.0), abs=1e-12)
        proven = plan.stats["restriction_cost"] == 0.0 and free.status == "optimal"
        assert plan.status == ("optimal" if proven else "feasible")
        assert plan.lower_bound is None or plan.lower_bound <= plan.objective + 1e-9
        assert any("restricted to program order" in note for note in plan.notes)
        costly += plan.stats["restriction_cost"] > 0
    assert 0 < costly < 40  # both kinds of instance were met
    assert exact >= 25


def in_program_order(trace, plan):
    """Whether each stage is one run of the program order, the stages in device order."""
    dev = plan.device_of()
    idx = [dev[v][1] for v in trace.order]
    return all(a <= b for a, b in zip(idx, idx[1:]))


def test_partition_program_order_plans_are_runs_of_the_program_order():
    """Zero-time nodes (free leaves, free isolated nodes) keep their place in program order: with
    order 0..4 and edges 1-3, 2-4, 3-4, folding the zero-time node 2 into node 4's unit used to
    put it after node 3."""
    rng = random.Random(8)
    for _ in range(40):
        trace = random_trace(rng, rng.randint(2, 7))
        devices = rng.randint(1, 4)
        memory = rng.choice([None, 6.0])
        plan = partition_program_order(trace, devices, **({} if memory is None else {"memory": memory}))
        if plan.objective is not None:
            assert in_program_order(trace, plan), (trace.graph.edges, plan.device_of())


def test_with_cpus_the_plan_is_rescored_on_the_real_graph():
    rng = random.Random(2)
    for _ in range(15):
        trace = random_trace(rng, rng.randint(2, 6))
        plan = partition_program_order(trace, 2, cpus=1)
        ev = sc.evaluate(trace.graph, plan.device_of(), devices=2, cpus=1)
        assert plan.objective == ev.objective
        assert plan.objective >= plan.stats["unrestricted_objective"] - 1e-9
        assert plan.status in ("optimal", "feasible")


def test_a_program_order_against_the_edges_is_refused():
    g = sc.Graph([sc.Node(v, {"accelerator": 1.0}) for v in "abc"], [("a", "b"), ("b", "c")])
    bad = types.SimpleNamespace(graph=g, order=("b", "a", "c"))
    with pytest.raises(InvalidGraphError):
        program_order_graph(bad)
    with pytest.raises(InvalidGraphError):
        partition_program_order(bad, 2)
    good = types.SimpleNamespace(graph=g, order=("a", "b", "c"))
    assert set(program_order_graph(good).edges) == {("a", "b"), ("b", "c")}


def test_plan_to_balance_refuses_an_unknown_mode():
    g = sc.Graph([sc.Node(v, {"accelerator": 1.0}) for v in "ab"], [("a", "b")])
    trace = types.SimpleNamespace(graph=g, order=("a", "b"), modules={"a": ("0",), "b": ("1",)},
                                  children=("0", "1"), calls={"0": 1, "1": 1})
    plan = sc.partition(g, devices=2)
    assert sum(plan_to_balance(plan, trace)) == 2
    with pytest.raises(InvalidArgumentError, match="mode"):
        plan_to_balance(plan, trace, mode="closest")


def test_plan_to_balance_nearest_keeps_layers_in_order():
    # layers 0..3 (one node each); the plan puts layer 2 back on layer 0's stage
    g = sc.Graph([sc.Node(v, {"accelerator": 1.0}) for v in "abcd"], [("a", "b"), ("b", "c"), ("c", "d")])
    trace = types.SimpleNamespace(graph=g, order=tuple("abcd"), modules={v: (str(i),) for i, v in enumerate("abcd")},
                                  children=("0", "1", "2", "3"), calls={str(i): 1 for i in range(4)})
    on = {"a": 0, "b": 1, "c": 0, "d": 1}
    from stagecut.frontends import NotExpressibleError
    from stagecut.results import DeviceLoad, Plan

    stages = tuple(DeviceLoad(index=i, device=f"accelerator:{i}", nodes=tuple(v for v in "abcd" if on[v] == i),
                              load=0.0, kind="accelerator", kind_index=i) for i in range(2))
    bad = Plan(objective=2.0, status="feasible", method="manual", stages=stages, devices=2, cpus=0,
               memory=float("inf"))
    with pytest.raises(NotExpressibleError, match="not contiguous in layer order"):
        plan_to_balance(bad, trace)
    assert plan_to_balance(bad, trace, mode="nearest") == [1, 3]  # layer 2 stays with layer 1's stage


def test_a_refused_stage_start_names_the_operator_and_its_module():
    from stagecut.frontends import NotExpressibleError
    from stagecut.frontends.export import plan_to_pipelining

    order = ("e0", "e1", "m0")
    g = sc.Graph([sc.Node(v, {"accelerator": 1.0}) for v in order], [("e0", "e1"), ("e1", "m0")])
    trace = types.SimpleNamespace(graph=g, order=order, modules={"e0": ("emb",), "e1": ("emb",), "m0": ("mlp",)},
                                  calls={"emb": 1, "mlp": 1}, children=("emb", "mlp"),
                                  targets={"e0": "aten.embedding", "e1": "aten.add", "m0": "aten.mm"})
    split = {"e0": ("accelerator", 0), "e1": ("accelerator", 1), "m0": ("accelerator", 1)}  # starts inside emb
    plan = sc.partition(g, devices=2)
    from stagecut.results import DeviceLoad, Plan

    stages = tuple(DeviceLoad(index=i, device=f"accelerator:{i}", nodes=tuple(v for v in order if split[v][1] == i),
                              load=0.0, kind="accelerator", kind_index=i) for i in range(2))
    inside = Plan(objective=plan.objective, status="feasible", method="manual", stages=stages, devices=2, cpus=0,
                  memory=float("inf"))
    with pytest.raises(NotExpressibleError, match=r"node 'e1' \(aten\.add, in module 'emb'\)"):
        plan_to_pipelining(inside, trace)


def manual_plan(graph, order, stage_of):
    from stagecut.results import DeviceLoad, Plan

    k = max(stage_of.values()) + 1
    stages = tuple(DeviceLoad(index=i, device=f"accelerator:{i}", nodes=tuple(v for v in order if stage_of[v] == i),
                              load=0.0, kind="accelerator", kind_index=i) for i in range(k))
    return Plan(objective=1.0, status="feasible", method="manual", stages=stages, devices=k, cpus=0,
                memory=float("inf"))


def layer_trace(modules, edges, times=None, calls=None):
    order = tuple(v for v, _ in modules)
    times = times or {}
    g = sc.Graph([sc.Node(v, {"accelerator": times.get(v, 1.0)}) for v in order], edges)
    mods = dict(modules)
    children = tuple(dict.fromkeys(m[0] for m in mods.values() if m))
    return types.SimpleNamespace(graph=g, order=order, modules=mods, children=children,
                                 calls=calls or {m: 1 for ms in mods.values() for m in ms},
                                 targets={v: "aten.op" for v in order})


def test_a_layer_split_between_stages_goes_to_its_heavier_part():
    t = layer_trace([("n0", ("0",)), ("m0", ("1",)), ("m1", ("1",)), ("p0", ("2",))],
                    [("n0", "m0"), ("m0", "m1"), ("m1", "p0")], times={"m0": 1.0, "m1": 5.0})
    plan = manual_plan(t.graph, t.order, {"n0": 0, "m0": 0, "m1": 1, "p0": 1})
    assert plan_to_balance(plan, t, mode="nearest") == [1, 2]  # layer 1 (1 + 5) goes where its 5 is
    t2 = layer_trace([("n0", ("0",)), ("m0", ("1",)), ("m1", ("1",)), ("p0", ("2",))],
                     [("n0", "m0"), ("m0", "m1"), ("m1", "p0")], times={"m0": 5.0, "m1": 1.0})
    assert plan_to_balance(plan, t2, mode="nearest") == [2, 1]


def test_glue_before_every_layer_goes_only_with_the_first_layer():
    # g0 (top-level forward) runs first; planned on the last stage, no layer before it can take it
    t = layer_trace([("g0", ()), ("a", ("0",)), ("b", ("1",))], [("a", "b")])
    from stagecut.frontends import NotExpressibleError

    plan = manual_plan(t.graph, t.order, {"g0": 1, "a": 0, "b": 1})
    with pytest.raises(NotExpressibleError, match=r"node 'g0' .* stage\(s\) \[0\]"):
        plan_to_balance(plan, t)
    assert plan_to_balance(manual_plan(t.graph, t.order, {"g0": 0, "a": 0, "b": 1}), t) == [1, 1]


def test_the_outermost_module_split_is_named_first_at_a_stage_start():
    # at position 2 module x ends and y.in begins (y itself is called twice: no split of its own);
    # the split named is the outermost one, x's end
    from stagecut.frontends.export import plan_to_pipelining

    t = layer_trace([("e0", ("x",)), ("e1", ("x",)), ("r0", ("y", "y.in")), ("r1", ("y", "y.in"))],
                    [("e0", "e1"), ("e1", "r0"), ("r0", "r1")], calls={"x": 1, "y": 2, "y.in": 1})
    split = plan_to_pipelining(manual_plan(t.graph, t.order, {"e0": 0, "e1": 0, "r0": 1, "r1": 1}), t)
    assert split.points == (("x", "end"),)


def test_a_plan_over_another_graph_names_a_node_the_trace_lacks():
    from stagecut.frontends import NotExpressibleError
    from stagecut.frontends.export import plan_to_pipelining

    t = layer_trace([("a", ("0",)), ("b", ("1",))], [("a", "b")])
    other = sc.Graph([sc.Node(v, {"accelerator": 1.0}) for v in ("a", "b", "zz")], [("a", "b")])
    plan = manual_plan(other, ("a", "b", "zz"), {"a": 0, "b": 1, "zz": 1})
    for export in (plan_to_pipelining, plan_to_balance):
        with pytest.raises(NotExpressibleError, match="node 'zz' is not in the trace"):
            export(plan, t)


def test_a_free_isolated_node_stays_in_its_place_in_program_order():
    """A node with no edge, time or memory is set aside by the DP and placed afterwards: with the
    node before it in program order, not on the first stage."""
    nodes = [sc.Node(v, {"accelerator": t}, comm=0.1 if t else 0.0) for v, t in (("a", 2.0), ("b", 1.0),
                                                                              ("c", 0.0), ("d", 1.0))]
    trace = types.SimpleNamespace(graph=sc.Graph(nodes, [("a", "b"), ("b", "d")]), order=("a", "b", "c", "d"))
    plan = partition_program_order(trace, 2)
    assert [set(s.nodes) for s in plan.stages] == [{"a"}, {"b", "c", "d"}]
    assert in_program_order(trace, plan) and plan.objective == pytest.approx(2.1)


def test_the_restricted_plan_gets_the_memory_and_the_time_limit(monkeypatch):
    """``memory`` and ``time_limit`` bound the restricted plan as well as the reference."""
    import stagecut.frontends.program_order as po

    seen = []
    real = po.partition_trace

    def spy(*args, **kwargs):
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(po, "partition_trace", spy)
    trace = random_trace(random.Random(3), 5)
    plan = partition_program_order(trace, 2, memory=6.0, time_limit=7.5)
    assert plan.objective is not None
    assert [(s["family"], s["memory"], s["time_limit"]) for s in seen] == [("program", 6.0, 7.5)]


def test_a_colocation_class_is_never_cut_by_a_program_order_plan():
    """Nodes ``a`` and ``c`` must share a stage and ``b`` runs between them: every run of the
    program order holding both holds ``b``, so the best plan is one stage (and ``d`` may go on
    another)."""
    nodes = [sc.Node(v, {"accelerator": 1.0}, colocation="ac" if v in "ac" else None) for v in "abcd"]
    trace = types.SimpleNamespace(graph=sc.Graph(nodes, [("a", "c"), ("b", "d"), ("c", "d")]),
                                  order=("a", "b", "c", "d"))
    plan = partition_program_order(trace, 3)
    assert in_program_order(trace, plan)
    assert [set(s.nodes) for s in plan.stages if s.nodes] == [{"a", "b", "c"}, {"d"}]
    assert plan.objective == pytest.approx(3.0)


def test_a_mapped_split_is_scored_on_as_many_accelerators_as_it_has_stages():
    # the trace's graph says 1 accelerator (a workload default); the mapped 3-stage split is
    # scored on 3, so no limit is broken and no note says so
    from stagecut.frontends.export import plan_to_pipelining

    t = layer_trace([("a", ("0",)), ("b", ("1",)), ("c", ("2",))], [("a", "b"), ("b", "c")],
                    times={"a": 1.0, "b": 2.0, "c": 3.0})
    t.graph = sc.Graph(t.graph.nodes, t.graph.edges, {"accelerators": 1})
    plan = manual_plan(t.graph, t.order, {"a": 0, "b": 1, "c": 2})
    split = plan_to_pipelining(plan, t)
    assert split.stages == (("a",), ("b",), ("c",)) and split.objective == 3.0
    assert not [n for n in split.notes if "breaks a limit" in n], split.notes


def test_the_program_order_graph_keeps_the_graphs_defaults():
    g = sc.Graph([sc.Node(v, {"accelerator": 1.0}, memory=2.0) for v in "abc"], [("a", "c")],
                 {"accelerators": 2, "memory": 3.0})
    trace = types.SimpleNamespace(graph=g, order=("a", "b", "c"))
    po = program_order_graph(trace)
    assert po.defaults == g.defaults and set(po.edges) == {("a", "c"), ("a", "b"), ("b", "c")}
    # with cpus the restricted plan is planned on that graph: its memory default binds (2 + 2 > 3)
    plan = partition_program_order(trace, 2, cpus=1)
    assert all(len(s.nodes) <= 1 or s.kind == "cpu" for s in plan.stages), plan.stages


def test_a_program_order_plan_may_cut_right_before_a_colocation_class():
    nodes = [sc.Node(v, {"accelerator": 3.0 if v == "a" else 1.0}, colocation="bd" if v in "bd" else None)
             for v in "abcd"]
    trace = types.SimpleNamespace(graph=sc.Graph(nodes, [("a", "b"), ("b", "c"), ("c", "d")]),
                                  order=("a", "b", "c", "d"))
    plan = partition_program_order(trace, 2)
    assert [set(s.nodes) for s in plan.stages if s.nodes] == [{"a"}, {"b", "c", "d"}]
    assert plan.objective == pytest.approx(3.0)


def test_nearest_never_moves_a_boundary_back_onto_the_one_before_it():
    # modules a, b, c of two operators each; the plan cuts inside a and inside b. The first cut
    # moves to 2 (b's beginning); for the second, 2 (a's end, still free) and 4 (c's beginning)
    # are as near, but 2 is the first cut: the stages stay non-empty and in order
    from stagecut.frontends.export import plan_to_pipelining

    mods = [("a0", ("a",)), ("a1", ("a",)), ("b0", ("b",)), ("b1", ("b",)), ("c0", ("c",)), ("c1", ("c",))]
    t = layer_trace(mods, [(u, v) for (u, _), (v, _) in zip(mods, mods[1:])])
    plan = manual_plan(t.graph, t.order, {"a0": 0, "a1": 1, "b0": 1, "b1": 2, "c0": 2, "c1": 2})
    split = plan_to_pipelining(plan, t, mode="nearest")
    assert split.stages == (("a0", "a1"), ("b0", "b1"), ("c0", "c1"))
    assert split.points == (("b", "beginning"), ("c", "beginning")) and split.objective == 2.0
    assert [n.split(" (")[0] for n in split.notes[:2]] == ["stage 1 starts at node 'b0'", "stage 2 starts at node 'c0'"]


def test_a_plan_that_misses_a_node_of_the_trace_names_the_first_one_missing():
    from stagecut.frontends import NotExpressibleError
    from stagecut.frontends.export import plan_to_pipelining

    t = layer_trace([("a", ("0",)), ("b", ("1",)), ("c", ("2",))], [("a", "b"), ("b", "c")])
    for keep, first in (({"a": 0, "c": 1}, "b"), ({"a": 0}, "b"), ({"c": 0}, "a")):
        sub = sc.Graph([sc.Node(v, {"accelerator": 1.0}) for v in keep], [])
        plan = manual_plan(sub, tuple(keep), keep)
        for export in (plan_to_pipelining, plan_to_balance):
            with pytest.raises(NotExpressibleError, match=f"node '{first}' of the trace is in no stage"):
                export(plan, t)


def test_glue_moved_with_a_boundary_is_noted_for_the_stage_it_starts():
    # x (a), two top-level operators g1 g2, y (b): the cut between g1 and g2 moves past g2 to y's beginning
    from stagecut.frontends.export import plan_to_pipelining

    t = layer_trace([("a", ("x",)), ("g1", ()), ("g2", ()), ("b", ("y",))], [("a", "g1"), ("g1", "g2"), ("g2", "b")])
    split = plan_to_pipelining(manual_plan(t.graph, t.order, {"a": 0, "g1": 0, "g2": 1, "b": 1}), t)
    assert split.stages == (("a", "g1", "g2"), ("b",)) and split.points == (("y", "beginning"),)
    assert split.notes[0].startswith("stage 1 starts at node 'b' (beginning of module 'y') instead of 'g2': "
                                     "1 operator(s) of the top-level forward (g2) go with the previous stage")


def test_backward_nodes_go_with_their_forward_class_or_else_to_the_last_stage():
    from stagecut.frontends.export import plan_to_pipelining

    nodes = [sc.Node("a", {"accelerator": 1.0}, colocation="ca"), sc.Node("b", {"accelerator": 1.0}, colocation="cb"),
             sc.Node("gb", {"accelerator": 4.0}, colocation="cb", backward=True),
             sc.Node("gx", {"accelerator": 8.0}, colocation="lonely", backward=True)]
    g = sc.Graph(nodes, [("a", "b"), ("b", "gb"), ("gb", "gx")])
    t = types.SimpleNamespace(graph=g, order=("a", "b"), modules={"a": ("0",), "b": ("1",)}, children=("0", "1"),
                              calls={"0": 1, "1": 1}, targets={"a": "aten.op", "b": "aten.op"})
    split = plan_to_pipelining(manual_plan(g, ("a", "b"), {"a": 0, "b": 1}), t)
    want = sc.evaluate(g, {"a": ("accelerator", 0), "b": ("accelerator", 1), "gb": ("accelerator", 1),
                           "gx": ("accelerator", 1)}, devices=2, cpus=0)
    assert split.stages == (("a",), ("b",)) and split.objective == want.objective == 13.0
