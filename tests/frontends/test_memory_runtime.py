"""What ``torch.distributed.pipelining`` itself holds at a stage's boundaries, against
``training_memory``: 2 gloo ranks, one stage each, ``ScheduleGPipe`` over 4 microbatches, the
stages built by ``runtime.pipeline``. At the first backward every microbatch is in flight: the
tensors the stage keeps for them (``PipelineStage``'s per-microbatch input values and any output
it still holds), less the storages autograd saved in the same run, must be the predicted
``received`` (per microbatch) times 4, the sent outputs released; the last stage's outputs kept
for the step must be the predicted ``outputs`` times 4."""

import os
import sys

import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
pytest.importorskip("torch.distributed.pipelining")

MICRO = 4


def _model(name):
    from frontends.test_memory import Skip
    from frontends.torch_models import small_model

    if name == "skip":
        torch.manual_seed(0)
        return Skip().train(), torch.randn(6, 8)
    return small_model(name)


def _stages(t):
    """Stage 0: up to the first linear (the skip model: the skip and the scale cross, neither saved
    on stage 1; the tied LM: the embedding and the first layer's first linear)."""
    order = list(t.order)
    cut = order.index("linear") + 1
    return [order[:cut], order[cut:]]


def _nbytes(ptrs):
    return float(sum(ptrs.values()))


def _step(rank, name, state):
    """One rank: stage ``rank`` of the 2-stage plan, GPipe over ``MICRO`` microbatches."""
    from torch.distributed.pipelining import ScheduleGPipe

    from frontends.torch_models import manual_plan
    from stagecut.frontends import runtime
    from stagecut.frontends.torch import trace_torch

    model, x_mb = _model(name)
    t = trace_torch(model, (x_mb,), bandwidth=1e9, flops_per_s=1e9)
    plan = manual_plan(t, _stages(t))
    pred = t.training_memory(plan, optimizer="sgd", schedule="gpipe", microbatches=MICRO).stages[rank]
    pipe = runtime.pipeline(model, (x_mb,), split_policy=t.split_policy(plan))
    stage = pipe.build_stage(rank, torch.device("cpu"))
    saved = {}
    keep = []

    def pack(x):
        keep.append(x)
        st = x.untyped_storage()
        saved[st.data_ptr()] = st.nbytes()
        return x

    weights = {p.untyped_storage().data_ptr() for p in [*stage.submod.parameters(), *stage.submod.buffers()]}
    seen = {}
    original = stage.backward_one_chunk

    def backward_one_chunk(*args, **kwargs):
        if not seen:  # the first backward: every microbatch's forward done (GPipe)
            inputs, live = {}, {}
            for st in stage._forward_chunk_states.values():
                for x in st.input_values:
                    if isinstance(x, torch.Tensor):
                        inputs[x.untyped_storage().data_ptr()] = x.untyped_storage().nbytes()
                for x in st.live_outputs if not stage.is_last else ():
                    if isinstance(x, torch.Tensor):
                        live[x.untyped_storage().data_ptr()] = x.untyped_storage().nbytes()
            seen["chunks"] = len(stage._forward_chunk_states)
            seen["inputs"] = _nbytes({k: b for k, b in inputs.items() if k not in saved and k not in weights})
            seen["live_outputs"] = _nbytes({k: b for k, b in live.items() if k not in saved})
        return original(*args, **kwargs)

    stage.backward_one_chunk = backward_one_chunk

    def loss(out, target):  # saves nothing of the output (a loss that did would hold it anyway)
        return out.float().sum()

    sched = ScheduleGPipe(stage, MICRO, loss_fn=loss, scale_grads=False)
    x = torch.cat([x_mb] * MICRO)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda y: y):
        if rank == 0:
            sched.step(x)
        else:
            sched.step(target=torch.zeros(MICRO), losses=[])
    out = {"chunks": seen.get("chunks"), "inputs": seen.get("inputs"), "live_outputs": seen.get("live_outputs"),
           "pred_received": pred.received, "pred_outputs": pred.outputs, "pred_outputs_in_flight":
           pred.outputs_in_flight}
    if stage.is_last:
        outs = {}
        for o in stage.output_chunks:
            for y in torch.utils._pytree.tree_leaves(o):
                if isinstance(y, torch.Tensor):
                    outs[y.untyped_storage().data_ptr()] = y.untyped_storage().nbytes()
        out["outputs"] = _nbytes({k: b for k, b in outs.items() if k not in saved})
        out["output_chunks"] = len(stage.output_chunks)
    return out


@pytest.mark.slow  # 2 spawned processes
@pytest.mark.parametrize("name", ["skip", "tied_lm"])
def test_the_runtime_holds_what_training_memory_predicts(name, tmp_path):
    from stagecut.frontends._gloo import run_ranks

    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if tests_dir not in sys.path:
        sys.path.insert(0, tests_dir)
    ranks = run_ranks(_step, [name], world=2, timeout=600, group_timeout=120, tmp_dir=tmp_path)
    results = [r[0] for r in ranks]
    assert all(r["ok"] for r in results), results
    for r in results:
        assert r["chunks"] == MICRO
        assert r["inputs"] == pytest.approx(MICRO * r["pred_received"], abs=0.5), r
        assert r["live_outputs"] == 0.0, r  # the sent outputs released (or saved)
    last = results[1]
    assert last["output_chunks"] == MICRO == last["pred_outputs_in_flight"]
    assert last["outputs"] == pytest.approx(MICRO * last["pred_outputs"], abs=0.5)
    assert last["pred_outputs"] > 0
    if name == "skip":
        assert results[1]["pred_received"] > 0  # h1 and the scale: received, not saved
