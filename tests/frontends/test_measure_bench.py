"""The tables of ``benches/bench_reality.py`` from planted measurements: the peer ratio and its
bootstrap noise band, where a plan cuts in layers, which stage is the bottleneck and whether a miss
is inside its band, and the drift account of ratios against a calibration from another pass."""

import pytest

from helpers import bench_module


@pytest.fixture(scope="module")
def br():
    return bench_module("bench_reality")


def _m(passes):
    """A _row-like record from per-stage pass times (ms)."""
    import statistics

    med = [statistics.median(p) for p in passes]
    return {"passes_ms": passes, "measured_ms": med, "measured_max_ms": max(med), "predicted_ms": med,
            "spread_ms": [0.0] * len(passes)}


def test_paired_ratio_and_its_noise_band(br):
    ours = [[10.0, 11.0, 9.0, 10.5, 9.5], [8.0, 8.0, 8.0, 8.0, 8.0]]
    same = {"calibrated_again": _m(ours), "x": _m(ours)}
    assert br._paired(same, "x") == (1.0, 0.0)  # the same times: no noise between them
    slow = {"calibrated_again": _m(ours), "x": _m([[2 * t for t in s] for s in ours])}
    assert br._paired(slow, "x") == pytest.approx((2.0, 0.0))  # twice as slow in every pass
    noisy = {"calibrated_again": _m(ours), "x": _m([[10.0, 14.0, 8.0, 12.0, 9.0], [8.0] * 5])}
    ratio, band = br._paired(noisy, "x")
    assert ratio == pytest.approx(10.0 / 10.0) and band > 0.02


def test_a_peer_faster_than_ours_is_explained(br):
    r = {"model": "m", "k": 2, "calibrated_again": _m([[10.0] * 3, [9.0] * 3]),
         "uniform": _m([[9.0] * 3, [9.0] * 3])}
    r["uniform"]["predicted_ms"] = [11.0, 9.0]
    text = br._why(r, "uniform", "uniform", 0.9, 0.02)
    assert "-10.0%" in text and "outside it" in text and "11.0 ms against ours 10.0" in text
    assert "decided it" in text
    assert "within it" in br._why(r, "uniform", "uniform", 0.99, 0.02)


def _cal(pred_now, measured, spread=None, drift=1.0, ratios=None):
    out = {"predicted_now_ms": pred_now, "measured_ms": measured, "ratios_now": [1.0] * len(measured),
           "drift": drift, "ratios": ratios or [drift] * len(measured)}
    if spread is not None:
        out["spread_ms"] = spread
    return out


def test_bottleneck_misses_are_measured_against_their_band(br):
    rows = [{"model": "m", "k": 2, "calibrated": _cal([10.0, 9.0], [10.0, 9.5], [0.5, 0.5])},   # hit
            {"model": "m", "k": 3, "calibrated": _cal([10.0, 9.0, 1.0], [9.8, 10.0, 1.0], [0.5, 0.5, 0.1])},
            {"model": "m", "k": 4, "calibrated": _cal([10.0, 9.0], [8.0, 10.0], [0.1, 0.1])}]   # far miss
    text = "\n".join(br._bottleneck_section([("r", rows)]))
    assert "| r | m | 2 | 0 | 0 | yes | | | |" in text
    assert "| r | m | 3 | 0 | 1 | no | -2.0% | +-7.1% | - |" in text
    assert "| r | m | 4 | 0 | 1 | no | -20.0% | +-1.4% | - |" in text
    assert "measured one on 1 of 3 rows; 1 of the 2 misses are within their noise band" in text


def test_a_miss_is_tied_or_apart_by_the_paired_passes(br):
    speed = [1.0, 1.4, 0.8, 1.2, 0.9, 1.3, 1.1, 0.85, 1.05]

    def cal(pred_now, stage_ms):
        c = _cal(pred_now, [float(sorted(x)[4]) for x in stage_ms])
        c["passes_ms"] = stage_ms
        c["spread_ms"] = [0.5] * len(stage_ms)
        return c

    # the model calls stage 0 slowest; stage 1 measures 2% slower in every pass (apart), or takes turns (tied)
    apart = cal([10.0, 9.0], [[10.0 * v for v in speed], [10.2 * v for v in speed]])
    turns = cal([10.0, 9.0], [[10.0, 9.0] * 4 + [10.0], [9.0, 10.5] * 4 + [10.5]])
    hit = cal([10.0, 9.0], [[10.0 * v for v in speed], [5.0 * v for v in speed]])
    rows = [{"model": "a", "k": 2, "calibrated": apart}, {"model": "t", "k": 2, "calibrated": turns},
            {"model": "h", "k": 2, "calibrated": hit}]
    text = "\n".join(br._bottleneck_section([("r", rows)]))
    assert "| r | a | 2 | 0 | 1 | no | -2.0% | +-6.6% | **apart** |" in text
    assert "| r | t | 2 | 0 | 1 | no | " in text and text.split("| r | t | 2 |")[1].split("\n")[0].endswith("tied |")
    assert "| r | h | 2 | 0 | 0 | yes | | | |" in text
    assert "measured one on 1 of 3 rows; on 2 of the 3 rows whose passes were recorded it is the measured one or tied" \
        in text


def test_drift_accounts_for_ratios_against_another_pass(br):
    rows = [{"calibrated": _cal([1.0], [1.0], drift=1.4, ratios=[1.4, 1.33])},
            {"calibrated": _cal([1.0], [1.0], drift=0.8, ratios=[0.8, 0.84])}]
    text = " ".join(br._drift_section(rows))
    assert "0.80-1.40x their calibrated time" in text
    assert "4 of 4 stage ratios as calibrated fall outside 0.85-1.15" in text
    assert "every as-calibrated ratio is 0.95-1.05 (4 of 4 within 0.85-1.15)" in text


def test_where_a_plan_cuts_in_layers(br):
    assert br._cuts([5.04, 8.0, 11.5], 4) == "5.04, 8, 11.5"
    # an older record: every change of stage along program order, several in one layer
    assert br._cuts([11.22, 11.38, 11.97], 2) == "11.22-11.97 (its branches split)"


def _recheck(stage0, stage1, pred0, pred1):
    """A --recheck record: cuts 3+0, 3+1, 3+2 of a layer of 20 operators, 2 trials; ``stageN``
    / ``predN``: per cut, stage N's measured / predicted ms (the same in both trials)."""
    plans = {f"3+{j}": {"measured_ms": [stage0[j], stage1[j]], "predicted_now_ms": [pred0[j], pred1[j]],
                        "against_first": max(stage0[j], stage1[j]) / max(stage0[0], stage1[0])}
             for j in range(3)}
    return {"model": "m", "k": 2, "layer": 3, "ours_ops": 1, "layer_ops": 20,
            "ops": ["aten.layer_norm.default", "aten.linear.default"],
            "predicted_ms": {k: v["predicted_now_ms"] for k, v in plans.items()},
            "trials": [{"plans": plans, "passes": 6}, {"plans": plans, "passes": 6}]}


def test_a_recheck_of_the_cut_is_reported_for_that_cut(br):
    rc = _recheck([10.0, 10.5, 11.0], [12.0, 11.5, 10.0], [10.0, 10.2, 11.0], [12.0, 11.8, 11.0])
    r = {"model": "m", "k": 2, "peer_stage_layers": {"calibrated_again": [3.1]},
         "calibrated_again": {**_m([[11.0] * 6, [12.0] * 6]), "spread_ms": [0.55, 1.2]}}
    note = br._recheck_note(r, [rc])
    # 3.1 in a layer of 20 operators: 2 of them moved, the cut 3+2; 11.0 against 12.0 measured, 11.0/12.0 predicted
    assert "`3+2`" in note and "layer_norm, linear of layer 3" in note
    assert "measures -8.3%" in note and "predicts -8.3%" in note
    assert "stage 0 changes by +1.0 ms (predicted +1.0), stage 1 by -2.0 ms (predicted -1.0)" in note
    assert "noise of this row's 6 passes (a stage's half interquartile range: 5-10% of its time)" in note
    assert br._recheck_note({**r, "peer_stage_layers": {"calibrated_again": [4.0]}}, [rc]) == ""
    assert br._recheck_note({**r, "k": 4}, [rc]) == ""
    table = "\n".join(br._recheck_section([rc]))
    assert "| m | 3+1 (ours) | layer_norm | -1.7% [-1.7, -1.7] | -4.2% [-4.2, -4.2] |" in table
    assert "| m | 3+2 | layer_norm, linear | -8.3% [-8.3, -8.3] | -8.3% [-8.3, -8.3] |" in table
    assert "+1.0 (+1.0) / -2.0 (-1.0)" in table
