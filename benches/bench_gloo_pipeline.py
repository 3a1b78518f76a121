"""A real pipeline run: ``torch.distributed.pipelining`` on 2 gloo ranks (CPU, one thread each),
GPipe and 1F1B with 8 micro-batches, steps per second of stagecut's plan against the uniform
split of the model's layers.

Run: ``python benches/bench_gloo_pipeline.py --json pipeline.json`` (``--models gpt resnet50
inception_v3``, ``--steps 3``); ``benches/bench_reality.py --pipeline pipeline.json`` puts the
table in ``docs/results/pytorch.md``.

For each model (random weights, eval mode so that BatchNorm uses its running statistics, one
micro-batch as below) the parent process:

1. traces the model and calibrates forward and backward times on measured segments
   (``t.calibrated(training=True)``), and plans 2 stages with
   :func:`~stagecut.frontends.program_order.partition_trace` on that training trace (``ours``);
2. splits the model's layers in two equal counts (``uniform``: DeepSpeed's ``uniform``, the
   layers as ``benches/bench_reality.py`` finds them).

Then 2 spawned processes (gloo, ``torch.set_num_threads(1)``; spawned, joined and ended after
``--timeout`` seconds by :func:`stagecut.frontends._gloo.run_ranks`, the harness the pipeline
tests use) trace the model again, build each
plan's stages with :func:`stagecut.frontends.runtime.pipeline` and the trace's ``split_policy``,
and run ``ScheduleGPipe`` and ``Schedule1F1B`` (8 micro-batches, mean squared error against a
random target, gradients accumulated; no optimizer step): one step to warm up, then ``--steps``
timed steps, the plans' steps taken in turn (ours, uniform, ours, ...). Reported per rank: wall
seconds per step and the process CPU seconds per step. The machine is shared (2 cores, other
jobs running): wall time includes waiting for a core, so the CPU seconds of the busier rank are
the plan's measure (steps/s on 2 dedicated cores, leaving out the pipeline's bubble, which is
the same ``(8 + 1) / 8`` for both plans).

On a machine with 2 GPUs, ``--device cuda`` runs the same benchmark with the NCCL backend: the
parent calibrates on ``cuda:0`` (CUDA events), rank ``r`` runs its stage on ``cuda:r``, and each
step is timed in wall seconds between two ``torch.cuda.synchronize()`` (the CPU seconds are then
the host's, not the stage's). That path is written, not run: this project's machines have no GPU,
and where CUDA, 2 devices or NCCL are missing the option is refused in one line (exit 2).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

MICRO_BATCHES = 8
MODELS = ("gpt", "resnet50", "inception_v3")
#: one micro-batch of each model (modest sizes: the machine is shared)
SIZES = {"mlp": "6 layers of 32, micro-batch 4", "gpt": "12 layers, d_model 256, 4 heads, 64 tokens, micro-batch 2",
         "resnet50": "micro-batch 1 at 128x128", "inception_v3": "micro-batch 1 at 160x160"}


def build(name: str) -> tuple[Any, Any]:
    """The model (random weights, eval mode) and one micro-batch (``"mlp"``: a small one for
    the tests)."""
    import bench_reality as br
    import torch

    torch.manual_seed(0)
    if name == "mlp":
        nn = torch.nn
        return (nn.Sequential(*[nn.Sequential(nn.Linear(32, 32), nn.Tanh()) for _ in range(6)]).eval(),
                torch.randn(4, 32))
    if name == "gpt":
        return br.build("gpt")[0], torch.randint(0, 2048, (2, 64))
    import torchvision

    if name == "resnet50":
        return torchvision.models.resnet50().eval(), torch.randn(1, 3, 128, 128)
    if name == "inception_v3":
        return (torchvision.models.inception_v3(init_weights=False, aux_logits=False).eval(),
                torch.randn(1, 3, 160, 160))
    raise SystemExit(f"unknown model {name!r}: one of {MODELS}")


def _trace(model: Any, x: Any) -> Any:
    from stagecut.frontends.torch import trace_torch

    return trace_torch(model, (x,), bandwidth="2GB/s", flops_per_s=1e10)


def check_device(device: str) -> str | None:
    """Why ``device`` cannot run here (``None``: it can): ``"cuda"`` needs CUDA, 2 devices and
    NCCL."""
    if device == "cpu":
        return None
    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available():
        return f"--device {device}: CUDA is not available on this machine (torch {torch.__version__})"
    if torch.cuda.device_count() < 2:
        return f"--device {device}: 2 CUDA devices needed (one per rank), this machine has {torch.cuda.device_count()}"
    if not dist.is_nccl_available():
        return f"--device {device}: this torch build has no NCCL backend"
    return None


def plans(name: str, repeat: int, device: str = "cpu") -> dict[str, Any]:
    """The stages (forward node ids) of ``ours`` and ``uniform``, and what planning cost
    (calibrated on ``device``: ``"cuda"`` times on ``cuda:0``)."""
    import bench_reality as br
    import torch

    from stagecut.frontends import baselines as bl
    from stagecut.frontends.program_order import partition_trace
    from stagecut.frontends.split import stage_of_nodes

    torch.set_num_threads(1)
    model, x = build(name)
    t = _trace(model, x)
    c0 = time.process_time()
    tt = t.calibrated(training=True, repeat=repeat, device="cuda:0" if device == "cuda" else "cpu")
    c1 = time.process_time()
    ours = partition_trace(tt, 2)
    stage = stage_of_nodes(ours, tt)
    out = {"ours": [[v for v in t.order if stage[v] == i] for i in range(2)]}
    layers = br.layers_of(t, model)
    parts = bl.uniform_parts(len(layers), 2)
    out["uniform"] = [[v for layer in layers[a:z] for v in layer] for a, z in zip(parts, parts[1:])]
    predicted = {}
    for key, stages in out.items():
        p = br.manual_plan(tt, [s + [f"{v}_bwd" for v in s] for s in stages], key)
        predicted[key] = [round(1e3 * s.compute, 2) for s in p.stages]
    return {"stages": out, "predicted_ms": predicted, "calibration_cpu_s": round(c1 - c0, 1),
            "family": ours.stats.get("family"), "layers": len(layers), "nodes": len(t.order)}


def batch(model: Any, x_mb: Any) -> tuple[Any, Any]:
    """The inputs of a step (``MICRO_BATCHES`` micro-batches like ``x_mb``) and a random target."""
    import torch

    torch.manual_seed(1)
    x = (torch.randn(MICRO_BATCHES * x_mb.shape[0], *x_mb.shape[1:]) if x_mb.is_floating_point()
         else torch.randint(0, 2048, (MICRO_BATCHES * x_mb.shape[0], *x_mb.shape[1:])))
    with torch.no_grad():
        shape = model(x_mb).shape
    return x, torch.randn(MICRO_BATCHES * shape[0], *shape[1:])


def _loss(out: Any, target: Any) -> Any:
    return ((out - target) ** 2).mean()


def _model_step(rank: int, case: dict[str, Any], state: dict[str, Any]) -> list[dict[str, Any]]:
    """One model on one rank (the step :func:`stagecut.frontends._gloo.run_ranks` runs): every
    plan of the model built, then for each schedule the plans' steps taken in turn (plan A,
    plan B, plan A, ...) so that the machine's load hits them alike. ``case["device"] == "cuda"``:
    rank ``r`` on ``cuda:r`` (the harness set it and started NCCL), each step synchronised before
    and after."""
    import bench_reality as br
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe

    from stagecut.frontends import runtime

    jobs, steps, cuda = case["jobs"], case["steps"], case["device"] == "cuda"
    dev = torch.device(f"cuda:{rank}" if cuda else "cpu")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(dev)

    results: list[dict[str, Any]] = []
    model_name = jobs[0]["model"]
    model, x_mb = build(model_name)
    t = _trace(model, x_mb)
    x, target = batch(model, x_mb)
    x, target = x.to(dev), target.to(dev)
    pipes = {}
    for job in jobs:
        plan = br.manual_plan(t, job["stages"], job["plan"])
        pipes[job["plan"]] = runtime.pipeline(model, (x_mb,), split_policy=t.split_policy(plan))
    for name, cls in (("gpipe", ScheduleGPipe), ("1f1b", Schedule1F1B)):
        scheds = {k: cls(p.build_stage(rank, dev), MICRO_BATCHES, loss_fn=_loss) for k, p in pipes.items()}
        walls: dict[str, list[float]] = {k: [] for k in pipes}
        cpus: dict[str, list[float]] = {k: [] for k in pipes}
        losses: dict[str, list[float]] = {k: [] for k in pipes}
        for i in range(steps + 1):
            for k, sched in scheds.items():
                sync()
                dist.barrier()
                w0, c0 = time.perf_counter(), time.process_time()
                if rank == 0:
                    sched.step(x)
                else:
                    got: list[Any] = []
                    sched.step(target=target, losses=got)
                    losses[k].append(float(sum(float(v) for v in got)))
                sync()
                if i > 0:  # the first step warms up
                    walls[k].append(time.perf_counter() - w0)
                    cpus[k].append(time.process_time() - c0)
                for p in pipes[k].get_stage_module(rank).parameters():
                    p.grad = None
        dist.barrier()
        for k in pipes:
            results.append({"model": model_name, "plan": k, "schedule": name, "wall_s": walls[k], "cpu_s": cpus[k],
                            "losses": losses[k]})
    return results


def run_jobs(jobs: list[dict[str, Any]], steps: int, device: str = "cpu",
             timeout: float = 3600.0) -> list[list[dict[str, Any]]]:
    """The jobs (one model; plan name and stages each) on 2 ranks (gloo; ``device="cuda"``:
    NCCL, one GPU each), ended after ``timeout`` seconds; the per-rank result lists."""
    reason = check_device(device)
    if reason is not None:
        raise RuntimeError(reason)
    from stagecut.frontends._gloo import run_ranks

    return run_ranks(_model_step, [{"jobs": jobs, "steps": steps, "device": device}], world=2,
                     backend="nccl" if device == "cuda" else "gloo", timeout=timeout, group_timeout=900)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=(*MODELS, "mlp"))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3, help="calibration passes (3 x this)")
    ap.add_argument("--json", type=pathlib.Path)
    ap.add_argument("--timeout", type=float, default=3600.0,
                    help="seconds for one model's run on the 2 ranks; ranks still running then are ended")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="cuda: NCCL, one GPU per rank, CUDA-event calibration (not run by this project: no GPU)")
    a = ap.parse_args(argv)
    reason = check_device(a.device)
    if reason is not None:
        ap.error(reason)
    import torch

    rows = []
    for name in a.models:
        w0 = time.perf_counter()
        info = plans(name, a.repeat, a.device)
        print(f"{name}: planned in {time.perf_counter() - w0:.0f} s: {json.dumps(info['predicted_ms'])}",
              file=sys.stderr, flush=True)
        jobs = [{"model": name, "plan": key, "stages": stages} for key, stages in info["stages"].items()]
        w0 = time.perf_counter()
        ranks = run_jobs(jobs, a.steps, a.device, a.timeout)
        print(f"{name}: ran in {time.perf_counter() - w0:.0f} s", file=sys.stderr, flush=True)
        rows.append({"model": name, "size": SIZES[name], **{k: v for k, v in info.items() if k != "stages"},
                     "stage_nodes": {k: [len(s) for s in v] for k, v in info["stages"].items()},
                     "ranks": ranks})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    doc = {"torch": torch.__version__, "micro_batches": MICRO_BATCHES, "steps": a.steps, "device": a.device,
           "backend": "nccl" if a.device == "cuda" else "gloo", "rows": rows}
    if a.json:
        a.json.write_text(json.dumps(doc, indent=1))
    else:
        print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
