"""The gloo pipeline benchmark (``benches/bench_gloo_pipeline.py``) on a small model: 2 spawned
ranks, GPipe and 1F1B with 8 micro-batches, our calibrated plan and the uniform split; every
step's loss equals the unsplit model's on the same micro-batches."""


import pytest

from frontends.extras import require_extra
from helpers import bench_module

torch = require_extra("torch", "torch")
require_extra("torch.distributed.pipelining", "torch")



@pytest.mark.slow  # two spawned processes importing torch, and a calibration
def test_gloo_benchmark_runs_both_plans_and_both_schedules_with_the_models_loss():
    bench = bench_module("bench_gloo_pipeline")
    info = bench.plans("mlp", repeat=1)
    stages = info["stages"]
    assert set(stages) == {"ours", "uniform"} and all(len(s) == 2 and all(s) for s in stages.values())
    ranks = bench.run_jobs([{"model": "mlp", "plan": k, "stages": v} for k, v in stages.items()], steps=1)
    model, x_mb = bench.build("mlp")
    x, target = bench.batch(model, x_mb)
    with torch.no_grad():
        want = sum(float(bench._loss(model(xi), ti)) for xi, ti in
                   zip(x.chunk(bench.MICRO_BATCHES), target.chunk(bench.MICRO_BATCHES)))
    for rank, results in enumerate(ranks):
        assert all(r["ok"] for r in results), results
        assert {(r["plan"], r["schedule"]) for r in results} == {(p, s) for p in stages for s in ("gpipe", "1f1b")}
        for r in results:
            assert len(r["cpu_s"]) == 1 and r["cpu_s"][0] > 0
            if rank == 1:  # the last stage: each step's summed loss is the unsplit model's
                assert r["losses"] and all(v == pytest.approx(want, rel=1e-5) for v in r["losses"])
