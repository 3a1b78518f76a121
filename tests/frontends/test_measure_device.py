"""The GPU path of measurement, guarded: ``device=`` is checked before anything is built or timed,
CUDA is refused in one clear error where it is absent (here: no GPU), a calibrated trace is
measured where it was calibrated, and the CUDA-event clock reads its marks as the CPU clock does
(with a stand-in for ``torch.cuda.Event``); the per-stage noise band of a measurement."""


import numpy as np
import pytest

from frontends.extras import require_extra
from helpers import bench_module

torch = require_extra("torch", "torch")
nn = torch.nn

import stagecut.frontends.piece_timing as pt  # noqa: E402
from stagecut.errors import BackendUnavailableError, InvalidArgumentError  # noqa: E402
from stagecut.frontends.measure import calibrate, measure, measure_many, refine  # noqa: E402
from stagecut.frontends.program_order import partition_trace  # noqa: E402
from stagecut.frontends.torch import trace_torch  # noqa: E402


@pytest.fixture(scope="module")
def traced():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 8)).eval()
    return trace_torch(model, torch.randn(4, 16), bandwidth="10GB/s", flops_per_s=1e9)


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def no_timing(monkeypatch):
    """Fails the test if anything is built or timed."""
    def boom(*_a, **_k):
        raise AssertionError("built or timed before the device was checked")
    monkeypatch.setattr(pt, "_time_groups", boom)
    monkeypatch.setattr("stagecut.frontends.measure._pieces", boom)
    monkeypatch.setattr("stagecut.frontends.calibrate._pieces", boom)


def test_check_device_names_the_bad_value():
    assert pt.check_device("cpu") == "cpu" and pt.check_device(" CPU ") == "cpu"
    for bad in ("gpu", "cuda:x", "cuda:-1", "", None, 0):
        with pytest.raises(InvalidArgumentError, match="device must be 'cpu', 'cuda' or 'cuda:N'"):
            pt.check_device(bad)


def test_cuda_is_refused_clearly_where_it_is_absent(traced, no_cuda, no_timing):
    plan = partition_trace(traced, 2)
    for call in (lambda: pt.check_device("cuda"), lambda: calibrate(traced, device="cuda"),
                 lambda: measure(traced, plan, device="cuda:0"),
                 lambda: measure_many(traced, {"a": plan}, device="cuda"),
                 lambda: refine(traced, plan, 2, device="cuda"), lambda: traced.calibrated(device="cuda")):
        with pytest.raises(BackendUnavailableError, match=r"CUDA is not available on this machine") as e:
            call()
        assert "\n" not in str(e.value)


def test_a_missing_cuda_device_is_refused(monkeypatch, no_timing):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert pt.check_device("cuda") == "cuda:0" and pt.check_device("cuda:0") == "cuda:0"
    with pytest.raises(BackendUnavailableError, match="1 CUDA device"):
        pt.check_device("cuda:1")


def test_a_calibrated_trace_is_measured_where_it_was_calibrated(traced, monkeypatch):
    cal = calibrate(traced, segments=2, warmup=0, repeat=1)
    assert cal.device == "cpu"
    tc = traced.calibrated(calibration=cal)
    plan = partition_trace(tc, 2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # as if there were a GPU
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(pt, "_time_groups", lambda *a, **k: pytest.fail("timed"))
    with pytest.raises(InvalidArgumentError, match="calibrated on 'cpu'"):
        measure(tc, plan, device="cuda")


class _FakeEvent:
    """``torch.cuda.Event`` stand-in: each record() is 1 ms after the previous one, in a shared
    clock; elapsed_time in milliseconds as CUDA reports it."""

    clock = [0.0]
    synced = [0]

    def __init__(self, enable_timing=False):
        assert enable_timing
        self.at = None

    def record(self):
        _FakeEvent.clock[0] += 1.0
        self.at = _FakeEvent.clock[0]

    def synchronize(self):
        _FakeEvent.synced[0] += 1

    def elapsed_time(self, other):
        return other.at - self.at


def test_the_cuda_event_clock_reads_seconds_between_its_marks(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    lin = nn.Linear(4, 4)
    fwd = pt._caller(lin, (torch.randn(2, 4),), False, "cuda:0")
    assert fwd() == pytest.approx((1e-3, 0.0))  # one record before, one after: 1 ms
    both = pt._caller(lin, (torch.randn(2, 4),), True, "cuda:0")
    f, b = both()  # 4 marks: forward between the first two, backward between the last two
    assert (f, b) == pytest.approx((1e-3, 1e-3))
    assert _FakeEvent.synced[0] >= 2  # each reading waits for its end mark
    # the CPU clock is not the fake one
    cpu = pt._caller(lin, (torch.randn(2, 4),), False, "cpu")
    assert cpu()[0] < 0.5


def test_each_stage_reports_its_noise_band_and_passes(traced):
    """_report on planted passes: the spread is half the interquartile range of each stage's
    per-pass seconds, and the passes come back in order."""
    import stagecut.frontends.measure as meas

    plan = partition_trace(traced, 2)
    stage = meas._stage_map(plan, traced)
    xs = [[1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 2.0, 2.0, 2.0, 2.0]]
    m = meas._report(traced, stage, [[(x, 0.0) for x in row] for row in xs], False, 0.0, None)
    assert m.stages[0].spread == pytest.approx(float(np.subtract(*np.percentile(xs[0], [75, 25]))) / 2) == 1.0
    assert m.stages[1].spread == 0.0
    assert [list(s.passes) for s in m.stages] == xs
    assert m.stages[0].measured == 3.0 and m.measured_bottleneck == 0


@pytest.mark.parametrize("bench", ["bench_reality", "bench_gloo_pipeline"])
def test_the_benchmarks_refuse_cuda_in_one_line(bench, no_cuda, capsys):
    mod = bench_module(bench)
    with pytest.raises(SystemExit) as e:
        mod.main(["--device", "cuda", "--models", "gpt"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "CUDA is not available" in err[-1] and "Traceback" not in "\n".join(err)
