"""Run a plan's stages in one process the way ``PipelineStage`` runs them (torch required)."""

import copy

import torch

from stagecut.frontends import runtime


def run_like_pipeline_stages(pipe, x):
    """Run the stages as PipelineStage does: every tensor a stage receives (from an earlier
    stage) is a fresh leaf requiring grad, and must have been sent contiguous; backward stage by
    stage, each stage's input gradients sent back. Returns the output, the loss and the
    gradients by parameter name (summed over the stages holding a parameter)."""
    import operator

    env, stage_of, sent = {}, {}, []  # sent: (source tensor, leaf, receiving stage)
    stage = 0
    y = None
    for node in pipe.split_gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = x
        elif node.op == "call_module":
            args = []
            for a in node.args:
                v = env[a]
                # PipelineStage: only stage 0 takes model inputs; others receive from the stage before
                assert stage == 0 or a.op != "placeholder", f"stage {stage} takes the model input {a.name}"
                assert id(v) not in stage_of or stage_of[id(v)] == stage - 1, \
                    f"stage {stage} reads {a.name} of stage {stage_of[id(v)]}, not of the stage before it"
                if id(v) in stage_of:  # made by an earlier stage: sent, received as a leaf
                    assert v.is_contiguous(), f"{a.name} is sent non-contiguous {tuple(v.stride())}"
                    leaf = v.detach().requires_grad_(v.is_floating_point())
                    sent.append((v, leaf, stage))
                    v = leaf
                args.append(v)
            out = pipe.get_stage_module(stage)(*args)
            for o in (out if isinstance(out, tuple) else (out,)):
                stage_of[id(o)] = stage
            env[node] = out
            stage += 1
        elif node.op == "call_function" and node.target is operator.getitem:
            env[node] = env[node.args[0]][node.args[1]]
        elif node.op == "output":
            y = first_tensor(torch.fx.node.map_arg(node.args[0], lambda a: env[a]))
    loss = (y ** 2).mean()
    loss.backward()
    for s in range(pipe.num_stages - 2, -1, -1):
        pairs = [(v, leaf.grad) for v, leaf, r in sent
                 if stage_of[id(v)] == s and leaf.grad is not None and v.requires_grad]
        if pairs:
            torch.autograd.backward([v for v, _ in pairs], [g for _, g in pairs])
    grads = {}
    for i in range(pipe.num_stages):
        for n, p in pipe.get_stage_module(i).named_parameters():
            if p.grad is not None:
                grads[n] = grads[n] + p.grad if n in grads else p.grad.clone()
    return y.detach(), loss.detach(), grads


def first_tensor(out):
    """The model's main output: the first tensor in it (a Hugging Face output's logits or last
    hidden state come first)."""
    return torch.utils._pytree.tree_leaves(out)[0] if not isinstance(out, torch.Tensor) else out


def canonical_names(model):
    """Each name a parameter is reached by -> the name ``named_parameters()`` lists it under."""
    first = {}
    out = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        out[n] = first.setdefault(id(p), n)
    return out


def check_stages(model, x, t, plan, atol=1e-5):
    """Build ``plan``'s stages with the runtime (split_policy), run them like PipelineStage and
    compare output and gradients with a copy of the unsplit model; the Pipe."""
    ref = copy.deepcopy(model)
    want = first_tensor(ref(x))
    (want ** 2).mean().backward()
    pipe = runtime.pipeline(model, (x,), split_policy=t.split_policy(plan))
    assert pipe.num_stages == len([s for s in plan.stages if s.nodes])
    y, _, grads = run_like_pipeline_stages(pipe, x)
    assert torch.allclose(y, want.detach(), atol=atol)
    ref_grads = {n: p.grad for n, p in ref.named_parameters() if p.grad is not None}
    canonical = canonical_names(model)
    summed = {}
    for n, g in grads.items():  # the copies of a replicated (tied) parameter: their gradients all-reduced
        c = canonical.get(n, n)
        summed[c] = summed[c] + g if c in summed else g
    grads = summed
    assert set(ref_grads) <= set(grads)
    for n, g in ref_grads.items():
        assert torch.allclose(grads[n], g, atol=atol), n
    return pipe
