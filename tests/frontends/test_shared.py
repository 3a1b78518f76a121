"""Shared parameters and buffers in a trace: a tied weight (GPT-style embedding = output
projection) is replicated, not a reason to put the whole model on one stage; in training its
gradient all-reduce is charged; keeping it with one stage is the other choice, and
``t.partition`` takes the cheaper one. A buffer sliced in every layer colocates nothing."""

import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")

import stagecut as sc
from frontends.torch_models import TiedLM, Twice, small_model
from stagecut.frontends.shared import allreduce_seconds
from stagecut.frontends.torch import trace_torch

BW = 1e9


def tied_trace(**kw):
    model, x = small_model("tied_lm")
    return model, trace_torch(model, (x,), bandwidth=kw.pop("bandwidth", BW), flops_per_s=1e8, **kw)


def test_tied_weight_is_listed_and_replicated():
    model, t = tied_trace()
    assert list(t.tied) == ["head.weight"] or list(t.tied) == ["emb.weight"]
    tw = next(iter(t.tied.values()))
    assert set(tw.aliases) == {"emb.weight", "head.weight"}
    assert tw.bytes == model.emb.weight.numel() * 4
    assert [t.targets[u] for u in tw.users] == ["aten.embedding.default", "aten.linear.default"]
    first, last = (t.graph.node(u) for u in tw.users)
    assert first.colocation is None or first.colocation != last.colocation
    assert first.memory == last.memory == tw.bytes  # a copy on each user's stage
    # the mask buffer is sliced in every layer: no colocation class spans two layers
    classes = {}
    for v in t.order:
        c = t.graph.node(v).colocation
        if c is not None:
            classes.setdefault(c, set()).add(t.modules[v][:2])
    assert all(len(mods) == 1 for mods in classes.values()), classes
    mask_users = [v for v in t.order if t.targets[v].startswith("aten.slice")]
    assert len(mask_users) >= 4  # one slice of the mask per layer, none colocated with another
    labels = [t.graph.node(v).colocation for v in mask_users]
    assert len({c for c in labels if c is not None}) == len([c for c in labels if c is not None])
    assert not any("used by no operator" in n for n in t.notes)  # the alias is not "unused"
    weights = sum(p.numel() * 4 for p in model.parameters()) + model.mask.numel() * 4
    assert sum(n.memory for n in t.graph.nodes) == weights + tw.bytes  # the tied weight twice, the mask once


@pytest.mark.parametrize("k", [2, 4])
def test_every_stage_does_real_work(k):
    _, t = tied_trace()
    plan = t.partition(k)
    assert plan.objective is not None and plan.status == "optimal"
    loads = [s.load for s in plan.stages]
    assert min(loads) > 0.3 * max(loads), loads
    assert all(any("linear" in v for v in s.nodes) for s in plan.stages)


def test_training_charges_the_gradient_allreduce_and_partition_takes_the_cheaper():
    _, fwd = tied_trace()
    _, t = tied_trace(training=True)
    tw = next(iter(t.tied.values()))
    charge = tw.bytes / BW  # two replicas: a ring all-reduce sends 2 (m - 1) / m = 1 times the bytes
    assert allreduce_seconds(tw, BW) == pytest.approx(charge)
    for u in tw.users:
        assert t.graph.node(f"{u}_bwd").compute["accelerator"] == pytest.approx(
            2.0 * fwd.graph.node(u).compute["accelerator"] + charge)
    other = [v for v in t.order if v not in tw.users][0]
    assert t.graph.node(f"{other}_bwd").compute["accelerator"] == pytest.approx(
        2.0 * fwd.graph.node(other).compute["accelerator"])
    col = t.colocate_tied()
    assert not col.tied
    assert len({col.graph.node(u).colocation for u in tw.users}) == 1
    assert col.graph.node(f"{tw.users[0]}_bwd").colocation == col.graph.node(tw.users[0]).colocation
    assert sum(n.memory for n in col.graph.nodes) == sum(n.memory for n in t.graph.nodes) - tw.bytes
    for u in tw.users:
        assert col.graph.node(f"{u}_bwd").compute["accelerator"] == pytest.approx(
            2.0 * fwd.graph.node(u).compute["accelerator"])
    for bw in (BW, 1e3):  # a slow link: the all-reduce costs more than keeping the users together
        if bw == BW:
            _, tb = tied_trace(training=True, bandwidth=bw)
        else:  # (the trace says the slow link is suspicious)
            with pytest.warns(sc.errors.StagecutWarning, match="exceeds their compute"):
                _, tb = tied_trace(training=True, bandwidth=bw)
        rep = sc.partition(tb.graph, devices=2)
        colp = sc.partition(tb.colocate_tied().graph, devices=2)
        best = tb.partition(2)
        assert best.objective == pytest.approx(min(rep.objective, colp.objective))
        assert best.stats["tied"] == ("colocated" if colp.objective < rep.objective else "replicated")
        re = sc.evaluate((tb.colocate_tied() if best.stats["tied"] == "colocated" else tb).graph,
                         best.device_of(), devices=2)
        assert re.objective == pytest.approx(best.objective)
    assert best.stats["tied"] == "colocated"  # at 1 kB/s


def test_weight_used_twice_in_one_module_stays_colocated():
    model = Twice().eval()
    t = trace_torch(model, torch.randn(4, 6), bandwidth=BW)
    assert not t.tied
    fc = [v for v in t.order if "fc" in t.modules[v]]
    assert len({t.graph.node(v).colocation for v in fc}) == 1


def test_untied_model_partition_is_plain_partition():
    model = TiedLM()
    model.head.weight = torch.nn.Parameter(model.emb.weight.detach().clone())
    t = trace_torch(model, (torch.randint(0, 50, (2, 8)),), bandwidth=BW, flops_per_s=1e8)
    assert not t.tied
    assert t.partition(2).objective == sc.partition(t.graph, devices=2).objective


def test_partition_says_the_times_are_per_traced_batch():
    _, t = tied_trace()
    for plan in (t.partition(2), t.colocate_tied().partition(2)):
        first = plan.summary().splitlines()
        assert first[0].endswith(" s (time per traced batch)") and "time per sample" not in plan.summary()
        assert first[2].startswith("bound") and " s (gap" in first[2]
        assert any("divide by its batch size for seconds per sample" in n for n in plan.notes)
        back = sc.Plan.from_json(plan.to_json())
        assert back.summary().splitlines()[0] == first[0]  # the labels travel with a saved plan
    plain = sc.partition(t.graph, devices=2)  # the generic result keeps its own label
    assert plain.summary().splitlines()[0].endswith("(time per sample)")


def test_display_names_the_stages_by_module():
    _, t = tied_trace()
    plan = t.partition(2)
    table = plan.table(display=t.display())
    head, first, last = table.splitlines()
    assert "load (s)" in head and "first node" in head
    assert "embedding (emb)" in first and "(head)" in last
