"""Which stages a measurement cannot tell apart from the slowest: a paired bootstrap over the
passes (``slowest_within_noise``), checked against the exact bootstrap distribution, and its use
in ``Measurement``. No torch needed: the passes are planted."""

import itertools
import random

import numpy as np
import pytest

from stagecut.errors import InvalidArgumentError
from stagecut.frontends.measure import Measurement, StageTiming, slowest_within_noise


def exact_tied(passes, confidence=0.95):
    """Every resampling of the passes enumerated: stage i is tied with the slowest unless the
    median paired difference is positive in more than ``confidence`` of them."""
    a = np.asarray(passes, dtype=float)
    n = a.shape[1]
    m = int(np.argmax(np.median(a, axis=1)))
    out = []
    for i in range(a.shape[0]):
        d = a[m] - a[i]
        pos = sum(np.median(d[list(ix)]) > 0 for ix in itertools.product(range(n), repeat=n))
        if i == m or pos / n ** n <= confidence:
            out.append(i)
    return tuple(out), m


def test_agrees_with_the_exact_bootstrap_on_random_measurements():
    rng = random.Random(3)
    checked = 0
    for _ in range(50):
        n = rng.choice([3, 4])
        k = rng.choice([2, 3, 4])
        speed = [rng.uniform(0.7, 1.3) for _ in range(n)]  # the machine's speed in each pass
        base = [rng.uniform(9.0, 11.0) for _ in range(k)]
        passes = [[b * s + rng.gauss(0, 0.3) for s in speed] for b in base]
        want, m = exact_tied(passes)
        # the exact probability near the threshold is left out: the bootstrap's sampling error decides it
        a = np.asarray(passes)
        probs = [np.mean([np.median((a[m] - a[i])[list(ix)]) > 0
                          for ix in itertools.product(range(n), repeat=n)]) for i in range(k)]
        if any(abs(p - 0.95) < 0.02 for p in probs):
            continue
        assert slowest_within_noise(passes, resamples=20000, seed=1) == want
        checked += 1
    assert checked >= 30


def test_the_pairing_removes_the_machines_drift():
    # stage 1 is 2% faster than stage 0 in every pass, while the speed moves by 40% between passes:
    # unpaired, the two overlap; paired, stage 0 is slower every time
    speed = [1.0, 1.4, 0.8, 1.2, 0.9, 1.3, 1.1, 0.85, 1.05]
    passes = [[10.0 * s for s in speed], [9.8 * s for s in speed], [5.0 * s for s in speed]]
    assert slowest_within_noise(passes) == (0,)


def test_stages_that_take_turns_are_tied_and_the_slowest_is_always_in():
    passes = [[10.0, 9.0, 10.0, 9.0, 10.0, 9.0], [9.0, 10.0, 9.0, 10.0, 9.0, 10.1], [3.0] * 6]
    assert slowest_within_noise(passes) == (0, 1)
    # a much faster stage is never tied; the slowest is returned even when alone
    assert slowest_within_noise([[1.0, 1.1, 0.9], [5.0, 5.2, 4.9]]) == (1,)
    # two passes are enough to tell a stage far slower in both
    assert slowest_within_noise([[5.0, 5.1], [1.0, 1.1]]) == (0,)


def test_identical_stages_are_tied():
    same = [10.0, 11.0, 9.5, 10.2, 10.8]
    assert slowest_within_noise([same, list(same), [1.0] * 5]) == (0, 1)


def test_the_confidence_level_moves_the_boundary():
    # stage 0 is slower in 7 of 9 passes
    d = [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, -0.1, -0.1]
    passes = [[10.0 + x for x in d], [10.0] * 9]
    assert slowest_within_noise(passes, confidence=0.5) == (0,)
    assert slowest_within_noise(passes, confidence=0.999) == (0, 1)


def test_one_pass_tells_nothing_apart_and_bad_input_is_refused():
    assert slowest_within_noise([[3.0], [1.0], [2.0]]) == (0, 1, 2)
    for bad in (0.0, 1.0, -0.5, 2.0):
        with pytest.raises(InvalidArgumentError, match="confidence"):
            slowest_within_noise([[1.0, 2.0]], confidence=bad)
    with pytest.raises(InvalidArgumentError, match="passes"):
        slowest_within_noise([[1.0, 2.0], [1.0]])
    with pytest.raises(InvalidArgumentError, match="passes"):
        slowest_within_noise([])
    with pytest.raises(InvalidArgumentError, match="resamples"):
        slowest_within_noise([[1.0, 2.0]], resamples=0)


def _measurement(passes, predicted):
    stages = tuple(StageTiming(index=i, nodes=1, predicted=p, measured=float(np.median(x)), passes=tuple(x))
                   for i, (x, p) in enumerate(zip(passes, predicted)))
    return Measurement(stages=stages, predicted_bottleneck=int(np.argmax(predicted)),
                       measured_bottleneck=int(np.argmax([s.measured for s in stages])), overhead=0.0)


def test_a_measurement_names_the_stages_within_noise_of_its_bottleneck():
    tied = _measurement([[10.0, 9.0, 10.0, 9.0, 10.0], [9.0, 10.0, 9.0, 10.0, 9.1], [3.0] * 5], [1.0, 2.0, 0.5])
    assert tied.measured_bottleneck == 0 and tied.bottleneck_ties == (0, 1)
    assert tied.predicted_bottleneck in tied.bottleneck_ties
    assert "stages 0, 1 are within the measurement's noise of the slowest (paired over 5 passes" in tied.table()
    clear = _measurement([[10.0, 11.0, 10.5], [5.0, 5.5, 5.2]], [1.0, 2.0])
    assert clear.bottleneck_ties == (0,) and clear.predicted_bottleneck not in clear.bottleneck_ties
    assert "within the measurement's noise" not in clear.table()
    # stages without their passes: only the measured bottleneck
    bare = Measurement(stages=(StageTiming(0, 1, 1.0, 2.0), StageTiming(1, 1, 1.0, 1.9)), predicted_bottleneck=1,
                       measured_bottleneck=0, overhead=0.0)
    assert bare.bottleneck_ties == (0,)
