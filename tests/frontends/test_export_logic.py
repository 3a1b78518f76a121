"""The pure-Python part of the plan exports, without torch: where each stage starts in program
order, which module split makes it start there (beginnings, ends, nesting, glue operators of the
top-level forward moved to a neighbouring stage), and torchgpipe/DeepSpeed balance lists with
glue. The trace is a stand-in with the fields the exports read (``graph``, ``order``,
``modules``, ``calls``, ``children``, ``targets``), so these run in any install."""

import types

import pytest

import stagecut as sc
from stagecut.frontends import NotExpressibleError
from stagecut.frontends.export import balance_to_parts, plan_to_balance, plan_to_pipelining
from stagecut.results import DeviceLoad, Plan

# program order: emb (2 nodes), two glue nodes, blk = att (2) + mlp (1), glue, head
MODULES = [
    ("e0", ("emb",)), ("e1", ("emb",)),
    ("g0", ()), ("g1", ()),
    ("a0", ("blk", "blk.att")), ("a1", ("blk", "blk.att")), ("m0", ("blk", "blk.mlp")),
    ("g2", ()),
    ("h0", ("head",)),
]


def fake_trace():
    order = [v for v, _ in MODULES]
    nodes = [sc.Node(v, {"accelerator": 1.0 + i}, comm=0.01 * (i + 1)) for i, v in enumerate(order)]
    graph = sc.Graph(nodes, list(zip(order, order[1:])))
    mods = dict(MODULES)
    calls = {m: 1 for ms in mods.values() for m in ms}
    return types.SimpleNamespace(graph=graph, order=tuple(order), modules=mods, calls=calls,
                                 children=("emb", "blk", "head"), targets={v: "aten.op" for v in order})


def plan_of(trace, stages):
    ev = sc.evaluate(trace.graph, {v: ("accelerator", i) for i, s in enumerate(stages) for v in s},
                     devices=len(stages))
    loads = tuple(DeviceLoad(index=i, device=f"accelerator:{i}", nodes=tuple(s), load=0.0, kind="accelerator",
                             kind_index=i) for i, s in enumerate(stages))
    return Plan(objective=ev.objective, status="feasible", method="manual", stages=loads, devices=len(stages),
                cpus=0, memory=float("inf"))


def cut(trace, *starts):
    b = [0, *starts, len(trace.order)]
    return plan_of(trace, [list(trace.order[b[i]:b[i + 1]]) for i in range(len(b) - 1)])


# cut position -> (split point, where stage 1 really starts) or None (refused in mode="error")
EXPECTED = {
    1: None,  # inside emb
    2: (("emb", "end"), 2),
    3: (("blk", "beginning"), 4),  # g1 is glue: it goes with the next stage (tie between 2 and 4: the later)
    4: (("blk", "beginning"), 4),  # outermost first
    5: None,  # inside blk.att, no glue to cross
    6: (("blk.mlp", "beginning"), 6),  # beginnings before ends at the same depth
    7: (("blk", "end"), 7),
    8: (("head", "beginning"), 8),
}


@pytest.mark.parametrize("b", sorted(EXPECTED))
def test_stage_start_maps_to_the_module_split_at_that_position(b):
    t = fake_trace()
    plan = cut(t, b)
    want = EXPECTED[b]
    if want is None:
        with pytest.raises(NotExpressibleError, match=f"stage 1 starts at node {t.order[b]!r}"):
            plan_to_pipelining(plan, t)
        return
    point, start = want
    split = plan_to_pipelining(plan, t)
    assert split.points == (point,)
    assert split.stages == (t.order[:start], t.order[start:])
    moved = sc.evaluate(t.graph, {v: ("accelerator", i) for i, s in enumerate(split.stages) for v in s},
                        devices=2).objective
    assert split.objective == pytest.approx(moved)
    assert bool(split.notes) == (start != b)  # a note exactly when glue moved


def test_three_stages_and_distinct_modules():
    t = fake_trace()
    split = plan_to_pipelining(cut(t, 2, 6), t)
    assert split.points == (("emb", "end"), ("blk.mlp", "beginning"))
    assert [len(s) for s in split.stages] == [2, 4, 3]
    split = plan_to_pipelining(cut(t, 4, 7), t)
    # split_spec is a dict keyed by module: "blk" is taken, so the second split is the end of blk.mlp
    assert split.points == (("blk", "beginning"), ("blk.mlp", "end"))
    assert [len(s) for s in split.stages] == [4, 3, 2]


def test_nearest_moves_a_boundary_inside_a_module():
    t = fake_trace()
    split = plan_to_pipelining(cut(t, 5), t, mode="nearest")
    assert split.stages[0] in (t.order[:4], t.order[:6])
    assert split.notes


def test_not_contiguous_in_program_order():
    t = fake_trace()
    order = list(t.order)
    plan = plan_of(t, [order[:2] + order[4:], order[2:4]])  # g0, g1 in stage 1 though later nodes are in stage 0
    with pytest.raises(NotExpressibleError, match="not contiguous in program order"):
        plan_to_pipelining(plan, t)


@pytest.mark.parametrize("b, balance", [(2, [1, 2]), (3, [1, 2]), (4, [1, 2]), (7, [2, 1]), (8, [2, 1])])
def test_balance_gives_glue_to_a_neighbouring_layer(b, balance):
    t = fake_trace()
    assert plan_to_balance(cut(t, b), t) == balance
    assert balance_to_parts(balance) == [0, balance[0], 3]


def test_balance_refusals():
    t = fake_trace()
    with pytest.raises(NotExpressibleError, match="layer 'blk' is split"):
        plan_to_balance(cut(t, 5), t)
    with pytest.raises(NotExpressibleError, match="node 'g0'.*stage 1.*neighbouring layer"):
        plan_to_balance(cut(t, 2, 3), t)  # g0 alone in stage 1, between emb (0) and blk (2)
    with pytest.raises(NotExpressibleError, match="no layer"):
        plan_to_balance(cut(t, 2, 3), t, mode="nearest")
    t.modules["a0"] = ("other",)
    with pytest.raises(NotExpressibleError, match="'other', which is not one of the model's direct children"):
        plan_to_balance(cut(t, 4), t)


def test_exports_take_a_saved_plan(tmp_path):
    import json

    from stagecut.errors import InvalidArgumentError
    from stagecut.frontends.runtime import as_plan, plan_once

    t = fake_trace()
    plan = cut(t, 4)
    text = json.dumps(plan.to_json())
    path = tmp_path / "plan.json"
    path.write_text(text)
    want = plan_to_pipelining(plan, t)
    for saved in (text, str(path), path, json.loads(text)):
        assert as_plan(saved) == plan
        assert plan_to_pipelining(saved, t) == want
        assert plan_to_balance(saved, t) == [1, 2]
    assert plan_once(lambda: plan) == plan and plan_once(str(path)) == plan  # no torch.distributed: planned here
    with pytest.raises(InvalidArgumentError, match="cannot read.*missing.json"):
        plan_to_pipelining(str(tmp_path / "missing.json"), t)
    with pytest.raises(InvalidArgumentError, match="not a saved stagecut plan"):
        as_plan('{"objective": 1}')
    with pytest.raises(InvalidArgumentError, match="not a saved stagecut plan"):
        as_plan({"stages": "x"})
    with pytest.raises(NotExpressibleError, match="saved plan"):
        plan_to_pipelining(42, t)


def test_split_spec_maps_each_point_to_its_split_kind(monkeypatch):
    # torch's SplitPoint stood in for by an enum of our own: the mapping runs without torch
    import enum

    import stagecut.frontends.export as export

    class SplitPoint(enum.Enum):
        BEGINNING = 1
        END = 2

    asked = []
    monkeypatch.setattr(export, "require", lambda name, extra: asked.append((name, extra))
                        or types.SimpleNamespace(SplitPoint=SplitPoint))
    split = export.PipelineSplit(points=(("blk.0", "beginning"), ("blk.1", "end")),
                                 stages=(("a",), ("b",), ("c",)), objective=1.0)
    assert split.split_spec() == {"blk.0": SplitPoint.BEGINNING, "blk.1": SplitPoint.END}
    assert asked == [("torch.distributed.pipelining", "torch")]
