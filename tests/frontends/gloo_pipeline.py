"""Run plans through ``torch.distributed.pipelining`` on 2 gloo ranks (CPU, one thread each) and
check them against the unsplit model: the output (forward only) and the loss and every
parameter's gradient (forward+backward, ``ScheduleGPipe`` with 2 micro-batches). Used by the
tests; each case is ``(model name, stages)`` with ``stages`` the node ids of each stage.

The reference is independent of stagecut: a deep copy of the model run on each micro-batch,
its losses summed and back-propagated (what the schedule accumulates); a parameter held by
several stages (a replicated shared weight) is checked by the sum of its copies' gradients.
"""

import copy
import datetime
import json
import os
import sys
import time
import traceback

MICRO_BATCHES = 2


def _first(out):
    import torch

    return out if isinstance(out, torch.Tensor) else torch.utils._pytree.tree_leaves(out)[0]


def _loss(out, target):
    return ((_first(out) - target) ** 2).mean()


def model_and_input(name, seed=0):
    """A small test model by name (``frontends.torch_models.SMALL_MODELS``, or ``"hf:gpt2"``,
    ``"hf:bert"``, ``"hf:llama"`` from a random Hugging Face config) and one micro-batch."""
    import torch

    from frontends.torch_models import small_model

    if not name.startswith("hf:"):
        return small_model(name, seed)
    from frontends.test_hf import MODELS, VOCAB

    torch.manual_seed(0)
    model = MODELS[name[3:]]().eval()
    torch.manual_seed(seed)
    return model, torch.randint(0, VOCAB, (2, 8))


def _case(rank, model_name, stages, backward, traces):
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import ScheduleGPipe

    from frontends.torch_models import manual_plan
    from stagecut.frontends import runtime
    from stagecut.frontends.torch import trace_torch

    model, x_mb = model_and_input(model_name)
    if model_name not in traces:
        traces[model_name] = trace_torch(model, (x_mb,), bandwidth=1e9)
    t = traces[model_name]
    torch.manual_seed(1)
    x = torch.cat([x_mb] + [model_and_input(model_name, seed=s)[1] for s in range(1, MICRO_BATCHES)])
    ref = copy.deepcopy(model)
    with torch.no_grad():
        out_shape = _first(model(x_mb)).shape
    target = torch.randn(MICRO_BATCHES * out_shape[0], *out_shape[1:])
    xs, ys = x.chunk(MICRO_BATCHES), target.chunk(MICRO_BATCHES)
    ref_out = [ref(xi) for xi in xs]
    ref_loss = sum(_loss(o, y) for o, y in zip(ref_out, ys))
    ref_loss.backward()
    ref_grads = {n: p.grad for n, p in ref.named_parameters() if p.grad is not None}

    plan = manual_plan(t, stages)
    pipe = runtime.pipeline(model, (x_mb,), split_policy=t.split_policy(plan))
    assert pipe.num_stages == 2, pipe.num_stages
    stage = pipe.build_stage(rank, torch.device("cpu"))
    sched = ScheduleGPipe(stage, MICRO_BATCHES, loss_fn=_loss if backward else None, scale_grads=False)
    losses = []
    if rank == 0:
        sched.step(x)
        result = {}
    elif backward:
        sched.step(target=target, losses=losses)
        got = float(sum(losses))
        result = {"loss": got, "ref_loss": float(ref_loss)}
    else:
        out = _first(sched.step())
        want = torch.cat([_first(o).detach() for o in ref_out])
        result = {"max_err": float((out.detach() - want).abs().max())}
    grads = {}
    if backward:
        for n, p in pipe.get_stage_module(rank).named_parameters():
            if p.grad is not None:
                grads[n] = p.grad.detach().clone()
    gathered = [None, None]
    dist.all_gather_object(gathered, grads)
    if rank == 0 and backward:
        total = {}
        for g in gathered:
            for n, v in g.items():
                total[n] = total[n] + v if n in total else v
        first, canonical = {}, {}
        for n, p in model.named_parameters(remove_duplicate=False):
            canonical[n] = first.setdefault(id(p), n)
        summed = {}
        for n, v in total.items():  # copies of a replicated tied parameter: gradients all-reduced
            c = canonical.get(n, n)
            summed[c] = summed[c] + v if c in summed else v
        total = summed
        missing = sorted(set(ref_grads) - set(total))
        errs = [float((total[n] - ref_grads[n]).abs().max() / max(float(ref_grads[n].abs().max()), 1e-12))
                for n in ref_grads if n in total]  # relative to the parameter's largest gradient
        result = {"missing_grads": missing, "grad_err": max(errs, default=0.0),
                  "grads": len(errs)}
    return result


def _worker(rank, init_file, cases, out_dir):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    traces = {}
    results = []
    try:
        for model_name, stages, backward in cases:
            try:
                t0 = time.process_time()
                r = _case(rank, model_name, stages, backward, traces)
                results.append({"ok": True, "cpu_s": time.process_time() - t0, **r})
            except Exception as e:  # noqa: BLE001 - reported to the test, which fails on it
                results.append({"ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                                "trace": traceback.format_exc()[-2000:]})
                break  # the other rank may be waiting on a message that will not come
    finally:
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(results, f)
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001
            pass


def run(cases, tmp_dir, timeout=600):
    """Run ``cases`` (``(model name, stages, backward)``) on 2 gloo ranks; the per-rank results
    (a list per rank, one dict per case run; a failing case ends the rank's list)."""
    import torch.multiprocessing as mp

    init_file = os.path.join(str(tmp_dir), "gloo_init")
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if tests_dir not in sys.path:
        sys.path.insert(0, tests_dir)
    ctx = mp.start_processes(_worker, args=(init_file, cases, str(tmp_dir)), nprocs=2, join=False,
                             start_method="spawn")
    try:
        while not ctx.join(timeout=timeout):
            pass
    except Exception:  # a rank that died: its results file says how far it got
        pass
    out = []
    for rank in range(2):
        path = os.path.join(str(tmp_dir), f"rank{rank}.json")
        out.append(json.load(open(path)) if os.path.exists(path) else [{"ok": False, "error": "no result"}])
    return out


def _plan_once_worker(rank, init_file, out_dir):
    import torch
    import torch.distributed as dist

    import stagecut as sc
    from stagecut.frontends.runtime import plan_once

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    try:  # each rank would plan differently (its own "measured" times): rank 0's plan wins
        times = [1.0, 2.0, 3.0, 4.0] if rank == 0 else [4.0, 3.0, 2.0, 1.0]
        plan = plan_once(lambda: sc.partition(sc.Graph.chain(times), devices=2))
        with open(os.path.join(out_dir, f"plan{rank}.json"), "w") as f:
            json.dump(plan.to_json(), f)
    finally:
        dist.destroy_process_group()


def run_plan_once(tmp_dir):
    """The plan each of 2 gloo ranks gets from ``plan_once`` (JSON mappings)."""
    import torch.multiprocessing as mp

    mp.start_processes(_plan_once_worker, args=(os.path.join(str(tmp_dir), "gloo_init"), str(tmp_dir)), nprocs=2,
                       join=True, start_method="spawn")
    return [json.load(open(os.path.join(str(tmp_dir), f"plan{r}.json"))) for r in range(2)]
