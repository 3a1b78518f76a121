"""Calibrated stage times: segments of the exported program built and timed in situ, the NNLS fit,
measure(plan) on the stages as built, refine never returning a plan measured worse than its start.
No assertion depends on the machine's speed: only on sums, shapes and orders of what was timed."""

import random

import numpy as np
import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
nn = torch.nn

import stagecut as sc  # noqa: E402
from stagecut.errors import InvalidArgumentError  # noqa: E402
from stagecut.frontends import NotExpressibleError  # noqa: E402
from stagecut.frontends.calibrate import _nnls  # noqa: E402
from stagecut.frontends.measure import calibrate, measure, refine  # noqa: E402
from stagecut.frontends.program_order import partition_trace  # noqa: E402
from stagecut.frontends.torch import trace_torch  # noqa: E402


def mlp():
    torch.manual_seed(0)
    layers = []
    for d_in, d_out in ((32, 256), (256, 256), (256, 64), (64, 256), (256, 16)):
        layers += [nn.Linear(d_in, d_out), nn.ReLU()]
    return nn.Sequential(*layers).eval(), torch.randn(64, 32)


@pytest.fixture(scope="module")
def traced():
    torch.set_num_threads(1)
    model, x = mlp()
    return trace_torch(model, x, bandwidth="10GB/s", flops_per_s=1e9)


def test_calibrated_times_add_up_to_the_measured_segments(traced):
    cal = calibrate(traced, segments=4, warmup=1, repeat=2)
    assert len(cal.segments) == 4 and [v for s in cal.segments for v in s] == list(traced.order)
    for seg, m in zip(cal.segments, cal.measured):
        assert sum(cal.node_seconds[v] for v in seg) == pytest.approx(m, rel=1e-9, abs=1e-12)
    assert all(t >= 0 for t in cal.node_seconds.values())
    assert all(all(p >= 0 for p in ps) for ps in cal.params.values())
    ct = traced.calibrated(calibration=cal)
    assert ct.timing == "calibrated" and ct.calibration is cal
    assert [n.id for n in ct.graph.nodes] == [n.id for n in traced.graph.nodes]
    assert sum(n.compute["accelerator"] for n in ct.graph.nodes) == pytest.approx(sum(cal.measured))


def test_measure_reports_each_stage_as_built(traced):
    plan = partition_trace(traced, 3)
    m = measure(traced, plan, warmup=1, repeat=2)
    assert len(m.stages) == len(plan.stages)
    for s, st in zip(m.stages, plan.stages):  # predicted = the plan's compute part
        assert s.predicted == pytest.approx(st.compute) and s.nodes == len(st.nodes) and s.measured >= 0
    assert m.predicted_bottleneck == int(np.argmax([s.predicted for s in m.stages]))
    assert m.measured_bottleneck == int(np.argmax([s.measured for s in m.stages]))
    assert "measured/predicted" in m.table()


def test_refine_returns_its_best_measured_plan(traced):
    plan = partition_trace(traced, 2)
    start = measure(traced, plan, warmup=1, repeat=2)
    best, m, scaled = refine(traced, plan, 2, rounds=2, warmup=1, repeat=2)
    assert sc.evaluate(traced.graph, best.device_of()).feasible
    assert [n.id for n in scaled.graph.nodes] == [n.id for n in traced.graph.nodes]
    assert len(m.stages) == len(best.stages)
    # the start is measured again inside refine, so only the shape is fixed, not the times
    assert m.measured_max > 0 and start.measured_max > 0


def test_refine_scales_each_stage_to_its_measurement(traced, monkeypatch):
    import stagecut.frontends.measure as meas

    plan = partition_trace(traced, 2)
    seen = []

    def fake_measure(trace, p, **_):
        stage = meas._stage_map(p, trace)
        pred = [0.0, 0.0]
        for v, s in stage.items():
            pred[s] += trace.graph.node(v).compute["accelerator"]
        seen.append(trace)
        # stage 0 measures 3x its prediction, stage 1 as predicted
        st = tuple(meas.StageTiming(index=i, nodes=1, predicted=pred[i], measured=pred[i] * (3 if i == 0 else 1))
                   for i in range(2))
        return meas.Measurement(stages=st, predicted_bottleneck=int(np.argmax(pred)),
                                measured_bottleneck=int(np.argmax([s.measured for s in st])), overhead=0.0)

    planned = []

    def plan_on(trace, k):
        planned.append(trace)
        return partition_trace(trace, k)

    monkeypatch.setattr(meas, "measure", fake_measure)
    refine(traced, plan, 2, rounds=1, partition=plan_on)
    assert len(seen) >= 1 and len(planned) == 1
    scaled = planned[0]
    first = {v for v, s in meas._stage_map(plan, traced).items() if s == 0}
    for v in traced.order:
        f = 3 if v in first else 1
        assert scaled.graph.node(v).compute["accelerator"] == pytest.approx(f * traced.graph.node(v).compute[
            "accelerator"])


def _fake_timings(meas, monkeypatch, alone, together):
    """``measure`` gives each plan ``alone(plan)`` as its bottleneck, ``measure_many`` gives
    ``together(plan)``; records what ``measure_many`` was asked to time."""
    asked = []

    def report(trace, p, worst):
        n = len(p.stages)
        st = tuple(meas.StageTiming(index=i, nodes=1, predicted=1.0, measured=worst if i == n - 1 else worst / 2)
                   for i in range(n))
        return meas.Measurement(stages=st, predicted_bottleneck=0, measured_bottleneck=n - 1, overhead=0.0)

    def fake_measure(trace, p, **_):
        return report(trace, p, alone(p))

    def fake_many(trace, plans, **_):
        asked.append(dict(plans))
        return {k: report(trace, p, together(p)) for k, p in plans.items()}

    monkeypatch.setattr(meas, "measure", fake_measure)
    monkeypatch.setattr(meas, "measure_many", fake_many)
    return asked


def test_refine_keeps_the_fastest_plan_of_one_same_pass_comparison(traced, monkeypatch):
    import stagecut.frontends.measure as meas

    start = partition_trace(traced, 2)
    other = partition_trace(traced, 3)
    key = meas._key
    # measured alone (minutes apart), the re-plan looks 10x faster; timed together with the start,
    # it is slower: the same-pass comparison decides
    replans = []

    def plan_on(trace, k):
        replans.append(other)
        return other

    asked = _fake_timings(meas, monkeypatch, alone=lambda p: 10.0 if key(p) == key(start) else 1.0,
                          together=lambda p: 5.0 if key(p) == key(start) else 6.0)
    best, m, tr = refine(traced, start, 2, rounds=2, partition=plan_on)
    assert key(best) == key(start) and tr is traced and m.measured_max == 5.0
    assert len(asked) == 1 and sorted(len(p.stages) for p in asked[0].values()) == [2, 3]
    # the other way round: the re-plan wins, with its scaled trace
    asked = _fake_timings(meas, monkeypatch, alone=lambda p: 1.0, together=lambda p: 7.0 if key(p) == key(start)
                          else 6.0)
    best, m, tr = refine(traced, start, 2, rounds=2, partition=plan_on)
    assert key(best) == key(other) and m.measured_max == 6.0 and tr is not traced
    assert "stage times scaled to a measurement" in tr.notes


def test_refine_compares_its_candidates_and_keeps_the_start_on_ties(traced, monkeypatch):
    import stagecut.frontends.measure as meas

    start = partition_trace(traced, 2)
    layer = partition_trace(traced, 3)
    key = meas._key
    asked = _fake_timings(meas, monkeypatch, alone=lambda p: 1.0, together=lambda p: 2.0 if len(p.stages) == 3
                          else 3.0)
    # rounds=0: nothing re-planned; the start and the candidates (the duplicate timed once) compared
    best, m, tr = refine(traced, start, 2, rounds=0, candidates=[layer, start, layer])
    assert key(best) == key(layer) and tr is traced and m.measured_max == 2.0
    assert len(asked) == 1 and len(asked[0]) == 2
    asked = _fake_timings(meas, monkeypatch, alone=lambda p: 1.0, together=lambda p: 4.0)
    best, _, _ = refine(traced, start, 2, rounds=0, candidates=[layer])
    assert key(best) == key(start)  # equal times: the start
    with pytest.raises(InvalidArgumentError, match=r"candidates\[1\] must be a Plan"):
        refine(traced, start, 2, candidates=[layer, "not a plan"])


@pytest.mark.parametrize("seed", range(20))
def test_nnls_meets_the_optimality_conditions(seed):
    rng = np.random.default_rng(seed)
    a = rng.random((12, 5)) * rng.choice([1e-3, 1.0, 1e3], size=5)
    b = rng.random(12) - (0.5 if seed % 2 else 0.0)
    x = _nnls(a, b)
    assert (x >= 0).all()
    grad = a.T @ (a @ x - b)  # KKT: grad >= 0, and 0 where x > 0
    scale = np.abs(a).max(axis=0) * max(1.0, float(np.abs(b).max()))
    assert (grad >= -1e-8 * scale * 12).all()
    assert np.allclose(grad[x > 0] / scale[x > 0], 0.0, atol=1e-7)
    # no random non-negative point does better
    r = np.linalg.norm(a @ x - b)
    for _ in range(50):
        y = np.abs(x + rng.normal(scale=0.1, size=5) * (x + 1e-3))
        assert np.linalg.norm(a @ y - b) >= r - 1e-9


def test_a_trace_without_its_model_or_from_fx_is_refused(traced):
    import dataclasses

    bare = dataclasses.replace(traced, model=None)
    with pytest.raises(InvalidArgumentError, match="model"):
        calibrate(bare)
    model, x = mlp()
    fx = trace_torch(model, x, bandwidth="10GB/s", tracer="fx")
    with pytest.raises(NotExpressibleError, match="export"):
        measure(fx, sc.partition(fx.graph, devices=2))
    with pytest.raises(InvalidArgumentError, match="segments"):
        calibrate(traced, segments=1)
    random.seed(0)


def test_measure_many_times_every_plan_in_the_same_passes(traced):
    from stagecut.frontends.measure import measure_many

    plans = {"two": partition_trace(traced, 2), "three": partition_trace(traced, 3)}
    got = measure_many(traced, plans, warmup=1, repeat=1)
    assert set(got) == {"two", "three"}
    for name, plan in plans.items():
        m = got[name]
        assert [s.predicted for s in m.stages] == pytest.approx([s.compute for s in plan.stages])
        assert all(s.measured >= 0 for s in m.stages)


# ----------------------------------------------------------------------------- backward, drift, spread
@pytest.fixture(scope="module")
def train_cal(traced):
    return calibrate(traced, segments=4, warmup=1, repeat=1, backward=True)


def test_backward_calibration_adds_up_to_the_measured_segments(traced, train_cal):
    cal = train_cal
    assert cal.backward_factors is not None and all(f >= 0 for f in cal.backward_factors.values())
    assert len(cal.backward_measured) == len(cal.segments)
    for seg, m in zip(cal.segments, cal.backward_measured):
        assert sum(cal.backward_seconds[v] for v in seg) == pytest.approx(m, rel=1e-9, abs=1e-12)
    tt = traced.calibrated(calibration=cal, training=True)
    assert tt.graph.is_training
    for v in traced.order:
        assert tt.graph.node(v).compute["accelerator"] == pytest.approx(cal.node_seconds[v])
        assert tt.graph.node(f"{v}_bwd").compute["accelerator"] == pytest.approx(cal.backward_seconds[v], abs=1e-15)
    with pytest.raises(InvalidArgumentError, match="backward"):  # a forward-only calibration cannot make one
        traced.calibrated(calibration=calibrate(traced, segments=2, warmup=0, repeat=1), training=True)
    with pytest.raises(InvalidArgumentError, match="forward trace"):
        tt.calibrated()


def test_measure_of_a_training_trace_times_forward_and_backward(traced, train_cal):
    tt = traced.calibrated(calibration=train_cal, training=True)
    plan = partition_trace(tt, 2)
    m = measure(tt, plan, warmup=1, repeat=1)
    assert m.backward and m.drift is not None and m.drift > 0
    for s, st in zip(m.stages, plan.stages):  # forward and backward nodes both predicted
        assert s.predicted == pytest.approx(st.compute)
        assert 0 <= s.backward <= s.measured and s.predicted_now is not None and s.ratio_now is not None
    fwd_only = measure(tt, plan, warmup=1, repeat=1, backward=False, reference=False)
    assert not fwd_only.backward and fwd_only.drift is None and all(s.ratio_now is None for s in fwd_only.stages)
    fwd_pred = [sum(tt.graph.node(v).compute["accelerator"] for v in st.nodes if not str(v).endswith("_bwd"))
                for st in plan.stages]
    assert [s.predicted for s in fwd_only.stages] == pytest.approx(fwd_pred)


def test_same_pass_prediction_takes_the_machines_drift_out(traced):
    """_report on planted passes: the segments run at twice their calibrated time, each stage
    at twice its prediction in every pass: drift 2, ratio_now 1, predicted_now twice the
    prediction; a stage that is slower only in one pass of three keeps ratio_now 1 (median)."""
    import stagecut.frontends.measure as meas

    cal = calibrate(traced, segments=3, warmup=0, repeat=1)
    tc = traced.calibrated(calibration=cal)
    plan = partition_trace(tc, 2)
    stage = meas._stage_map(plan, tc)
    pred = [0.0, 0.0]
    for v, s in stage.items():
        pred[s] += tc.graph.node(v).compute["accelerator"]
    speed = [2.0, 1.5, 3.0]  # the machine's speed in each of 3 passes
    seg_passes = [[(m * f, 0.0) for f in speed] for m in cal.measured]
    stage_passes = [[(p * f * (1.7 if (i == 1 and r == 2) else 1.0), 0.0) for r, f in enumerate(speed)]
                    for i, p in enumerate(pred)]
    m = meas._report(tc, stage, stage_passes, False, 0.0, (cal, seg_passes))
    assert m.drift == pytest.approx(2.0)
    for s, p in zip(m.stages, pred):
        assert s.ratio_now == pytest.approx(1.0)
        assert s.predicted_now == pytest.approx(2.0 * p)
    assert m.predicted_now_bottleneck == int(np.argmax(pred))
    assert "machine speed" in m.table()


def test_measured_cost_reports_its_spread_and_the_seed_leaves_the_callers_generator_alone():
    model, x = mlp()
    torch.manual_seed(123)
    want = torch.rand(3)
    torch.manual_seed(123)
    t = trace_torch(model, x, bandwidth="10GB/s", timing="measure", warmup=0, repeat=3, seed=7)
    assert torch.equal(torch.rand(3), want)
    assert t.timing_spread is not None and 0 <= t.timing_spread < float("inf")
    assert any("vary by" in n for n in t.notes)
    assert trace_torch(model, x, bandwidth="10GB/s").timing_spread is None
    with pytest.raises(InvalidArgumentError, match="seed"):
        trace_torch(model, x, bandwidth="10GB/s", timing="measure", repeat=1, seed=-1)
