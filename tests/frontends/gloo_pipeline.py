"""Run plans through ``torch.distributed.pipelining`` on 2 gloo ranks (CPU, one thread each) and
check them against the unsplit model: the output (forward only) and the loss and every
parameter's gradient (forward+backward, 2 micro-batches; ``ScheduleGPipe`` for 2 stages,
``ScheduleInterleaved1F1B`` with stages 0 and 2 on rank 0 for 4), or the parameters after one
SGD step with the tied copies' gradients all-reduced (``runtime.allreduce_tied``). Used by the
tests; each case is ``(model name, stages, mode)`` with ``stages`` the node ids of each stage.

The reference is independent of stagecut: a deep copy of the model run on each micro-batch,
its losses summed and back-propagated (what the schedule accumulates); a parameter held by
several stages (a replicated shared weight) is checked by the sum of its copies' gradients
(after the all-reduce: each copy's gradient and value, against the reference's).

The ranks are spawned and joined by :func:`stagecut.frontends._gloo.run_ranks`, the harness
``benches/bench_gloo_pipeline.py`` uses too.
"""

import copy
import os
import sys

from stagecut.frontends._gloo import run_ranks

MICRO_BATCHES = 2


def _first(out):
    import torch

    return out if isinstance(out, torch.Tensor) else torch.utils._pytree.tree_leaves(out)[0]


def _loss(out, target):
    return ((_first(out) - target) ** 2).mean()


def model_and_input(name, seed=0):
    """A test model by name (``frontends.torch_models.SMALL_MODELS``; ``"hf:gpt2"``, ``"hf:bert"``,
    ``"hf:llama"`` from a random Hugging Face config; ``"tv:resnet50"``, ``"tv:inception_v3"``
    from torchvision, random weights) and one micro-batch."""
    import torch

    from frontends.torch_models import small_model

    if name.startswith("tv:"):
        from frontends.test_real_models import MAKERS

        torch.manual_seed(0)
        model, x = MAKERS[name[3:]]()
        torch.manual_seed(seed)
        return model, torch.randn_like(x)
    if not name.startswith("hf:"):
        return small_model(name, seed)
    from frontends.test_hf import MODELS, VOCAB

    torch.manual_seed(0)
    model = MODELS[name[3:]]().eval()
    torch.manual_seed(seed)
    return model, torch.randint(0, VOCAB, (2, 8))


LR = 0.1


def _schedule(stages, loss_fn):
    from torch.distributed.pipelining import ScheduleGPipe, ScheduleInterleaved1F1B

    if len(stages) == 1:
        return ScheduleGPipe(stages[0], MICRO_BATCHES, loss_fn=loss_fn, scale_grads=False)
    return ScheduleInterleaved1F1B(stages, MICRO_BATCHES, loss_fn=loss_fn, scale_grads=False)


def _case(rank, model_name, stages, mode, traces):
    """One plan on 2 ranks: stage i on rank i % 2 (k = 4: stages 0 and 2 on rank 0, an
    interleaved schedule). ``mode``: False (forward), True (forward+backward) or ``"step"``
    (then the tied copies' gradients all-reduced and one SGD step: the parameters compared)."""
    import torch
    import torch.distributed as dist

    from frontends.torch_models import manual_plan
    from stagecut.frontends import runtime
    from stagecut.frontends.torch import trace_torch

    backward = bool(mode)
    model, x_mb = model_and_input(model_name)
    if model_name not in traces:
        traces[model_name] = trace_torch(model, (x_mb,), bandwidth=1e9)
    t = traces[model_name]
    torch.manual_seed(1)
    x = torch.cat([x_mb] + [model_and_input(model_name, seed=s)[1] for s in range(1, MICRO_BATCHES)])
    ref = copy.deepcopy(model)
    with torch.no_grad():
        out_shape = _first(copy.deepcopy(model)(x_mb)).shape
    target = torch.randn(MICRO_BATCHES * out_shape[0], *out_shape[1:])
    xs, ys = x.chunk(MICRO_BATCHES), target.chunk(MICRO_BATCHES)
    ref_out = [ref(xi) for xi in xs]
    ref_loss = sum(_loss(o, y) for o, y in zip(ref_out, ys))
    ref_loss.backward()
    ref_grads = {n: p.grad for n, p in ref.named_parameters() if p.grad is not None}
    if mode == "step":
        with torch.no_grad():
            for p in ref.parameters():
                if p.grad is not None:
                    p -= LR * p.grad

    plan = manual_plan(t, stages)
    k = len(stages)
    pipe = runtime.pipeline(model, (x_mb,), split_policy=t.split_policy(plan))
    assert pipe.num_stages == k, (pipe.num_stages, k)
    mine = [pipe.build_stage(i, torch.device("cpu")) for i in range(rank, k, 2)]
    sched = _schedule(mine, _loss if backward else None)
    last = (k - 1) % 2
    losses = []
    args = (x,) if rank == 0 else ()
    kwargs = {"target": target, "losses": losses} if rank == last and backward else {}
    out = sched.step(*args, **kwargs)
    result = {}
    if rank == last and backward:
        result = {"loss": float(sum(losses)), "ref_loss": float(ref_loss)}
    elif rank == last:
        want = torch.cat([_first(o).detach() for o in ref_out])
        result = {"max_err": float((_first(out).detach() - want).abs().max())}
    modules = [st.submod for st in mine]
    grads, params = {}, {}
    if backward:
        if mode == "step":
            runtime.allreduce_tied(model, modules)
            opt = torch.optim.SGD([p for m in modules for p in m.parameters()], lr=LR)
            opt.step()
        for m in modules:
            for n, p in m.named_parameters():
                if p.grad is not None:
                    grads.setdefault(n, []).append(p.grad.detach().clone())
                    params.setdefault(n, []).append(p.detach().clone())
    gathered = [None, None]
    dist.all_gather_object(gathered, (grads, params))
    if rank == 0 and backward:
        canonical = {}
        first = {}
        for n, p in model.named_parameters(remove_duplicate=False):
            canonical[n] = first.setdefault(id(p), n)
        copies = {}  # canonical name -> [gradient of each copy], [value of each copy]
        for g, v in gathered:
            for n in g:
                c = canonical.get(n, n)
                copies.setdefault(c, ([], []))
                copies[c][0].extend(g[n])
                copies[c][1].extend(v[n])
        ref_params = dict(ref.named_parameters())

        def rel(a, b):  # relative to the reference's largest entry
            return float((a - b).abs().max() / max(float(b.abs().max()), 1e-12))

        errs, value_errs, replica_errs = [], [], []
        for n, g in ref_grads.items():
            if n not in copies:
                continue
            gs, vs = copies[n]
            if mode == "step":  # every copy all-reduced: each holds the full gradient
                errs += [rel(gi, g) for gi in gs]
                value_errs += [rel(vi, ref_params[n].detach()) for vi in vs]
                replica_errs += [float((vi - vs[0]).abs().max()) for vi in vs[1:]]
            else:  # copies of a replicated tied parameter: their gradients summed
                errs.append(rel(sum(gs), g))
        result.update(missing_grads=sorted(set(ref_grads) - set(copies)), grad_err=max(errs, default=0.0),
                      grads=len(errs), copies=max((len(c[0]) for c in copies.values()), default=0))
        if mode == "step":
            result.update(value_err=max(value_errs, default=0.0), replica_err=max(replica_errs, default=0.0))
    return result


def _case_step(rank, case, traces):
    """:func:`run_ranks`'s step: one ``(model name, stages, mode)`` case (the traces kept per rank)."""
    model_name, stages, mode = case
    return _case(rank, model_name, stages, mode, traces)


def _tests_on_path():
    """The spawned ranks import this module (``frontends.gloo_pipeline``) and the test models by
    name: the tests directory goes on ``sys.path``, which the spawned processes inherit."""
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if tests_dir not in sys.path:
        sys.path.insert(0, tests_dir)


def run(cases, tmp_dir, timeout=600):
    """Run ``cases`` (``(model name, stages, mode)``, mode as :func:`_case` takes it) on 2 gloo
    ranks; the per-rank results (a list per rank, one dict per case run; a failing case ends the
    rank's list)."""
    _tests_on_path()
    return run_ranks(_case_step, cases, world=2, timeout=timeout, group_timeout=60, tmp_dir=tmp_dir)


def _plan_once_step(rank, case, state):
    """Each rank would plan differently (its own "measured" times): rank 0's plan wins."""
    import stagecut as sc
    from stagecut.frontends.runtime import plan_once

    times = [1.0, 2.0, 3.0, 4.0] if rank == 0 else [4.0, 3.0, 2.0, 1.0]
    return {"plan": plan_once(lambda: sc.partition(sc.Graph.chain(times), devices=2)).to_json()}


def run_plan_once(tmp_dir, timeout=300):
    """The plan each of 2 gloo ranks gets from ``plan_once`` (JSON mappings)."""
    _tests_on_path()
    ranks = run_ranks(_plan_once_step, [None], world=2, timeout=timeout, tmp_dir=tmp_dir)
    assert all(r and r[0]["ok"] for r in ranks), ranks
    return [r[0]["plan"] for r in ranks]


def two_blocks():
    """Two equal blocks (a training plan on 4 devices: 2 stages x 2 data-parallel replicas)."""
    import torch

    nn = torch.nn
    return nn.Sequential(*[nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32)) for _ in range(2)])


def grid_model(name, seed=0):
    import torch

    if name == "two_blocks":
        torch.manual_seed(0)
        model = two_blocks()
        torch.manual_seed(seed)
        return model, torch.randn(4, 32)
    return model_and_input(name, seed)


def _grid_case(model_name, stages, replicas):
    """One training plan run as ``replicas`` copies of a ``len(stages)``-stage pipeline (rank =
    replica * stages + stage): each replica on its own 2 micro-batches, the tied copies'
    gradients all-reduced in the pipeline group, every gradient averaged in the data-parallel
    group (DDP), one SGD step. Against the unsplit model on the whole batch, loss averaged over
    the replicas, the same step."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import ScheduleGPipe

    from frontends.torch_models import manual_plan
    from stagecut.frontends import runtime
    from stagecut.frontends.torch import trace_torch

    n = len(stages)
    s, r, pipe_group, dp_group = runtime.pipeline_grid(n, replicas)
    model, x_mb = grid_model(model_name)
    t = trace_torch(model, (x_mb,), bandwidth=1e9)
    xs = [x_mb] + [grid_model(model_name, seed=i)[1] for i in range(1, replicas * MICRO_BATCHES)]
    ref = copy.deepcopy(model)
    with torch.no_grad():
        out_shape = _first(copy.deepcopy(model)(x_mb)).shape
    torch.manual_seed(1)
    ys = [torch.randn(*out_shape) for _ in xs]
    ref_loss = sum(_loss(ref(xi), yi) for xi, yi in zip(xs, ys)) / replicas
    ref_loss.backward()
    with torch.no_grad():
        for p in ref.parameters():
            if p.grad is not None:
                p -= LR * p.grad

    pipe = runtime.pipeline(model, (x_mb,), split_policy=t.split_policy(manual_plan(t, stages)))
    assert pipe.num_stages == n, (pipe.num_stages, n)
    stage = pipe.build_stage(s, torch.device("cpu"), group=pipe_group)
    sched = ScheduleGPipe(stage, MICRO_BATCHES, loss_fn=_loss, scale_grads=False)
    mine = slice(r * MICRO_BATCHES, (r + 1) * MICRO_BATCHES)
    losses = []
    args = (torch.cat(xs[mine]),) if s == 0 else ()
    kwargs = {"target": torch.cat(ys[mine]), "losses": losses} if s == n - 1 else {}
    sched.step(*args, **kwargs)
    tied = runtime.allreduce_tied(model, [stage.submod], group=pipe_group)
    averaged = runtime.allreduce_data_parallel([stage.submod], group=dp_group)
    opt = torch.optim.SGD(stage.submod.parameters(), lr=LR)
    opt.step()
    mine_params = {k: v.detach().clone() for k, v in stage.submod.named_parameters()}
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, (s, r, float(sum(losses)) if losses else None, mine_params))
    if dist.get_rank() != 0:
        return {}
    canonical, first = {}, {}
    for k, p in model.named_parameters(remove_duplicate=False):
        canonical[k] = first.setdefault(id(p), k)
    ref_params = dict(ref.named_parameters())
    value_err, replica_err, seen = 0.0, 0.0, set()
    by_stage = {}
    for st, _, _, params in gathered:
        for k, v in params.items():
            c = canonical.get(k, k)
            want = ref_params[c].detach()
            value_err = max(value_err, float((v - want).abs().max() / max(float(want.abs().max()), 1e-12)))
            seen.add(c)
            if (st, k) in by_stage:
                replica_err = max(replica_err, float((v - by_stage[(st, k)]).abs().max()))
            by_stage.setdefault((st, k), v)
    loss = sum(x for _, _, x, _ in gathered if x is not None) / replicas
    return {"loss": loss, "ref_loss": float(ref_loss), "value_err": value_err, "replica_err": replica_err,
            "missing": sorted(set(ref_params) - seen), "tied": tied, "averaged": averaged}


def _grid_step(rank, case, state):
    """:func:`run_ranks`'s step: one ``(model name, stages, replicas)`` case."""
    return _grid_case(*case)


def run_grid(cases, world, tmp_dir, timeout=900):
    """Run ``cases`` (``(model name, stages, replicas)``, ``len(stages) * replicas == world``) on
    ``world`` gloo ranks; each rank's results (rank 0's carry the comparison)."""
    _tests_on_path()
    return run_ranks(_grid_step, cases, world=world, timeout=timeout, group_timeout=120, tmp_dir=tmp_dir)
