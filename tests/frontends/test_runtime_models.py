"""The plans of the test models run on 2 gloo ranks through ``PipelineStage`` at k = 2 and 4
(k = 4: stages 0 and 2 on rank 0, 1 and 3 on rank 1, ``ScheduleInterleaved1F1B``), forward and
backward with 2 micro-batches: the loss matches the unsplit model's, and every parameter's
gradient (a replicated tied weight's copies summed). GPT-2 (tied weights), BERT and a Llama-style
model from random ``transformers`` configs; torchvision's ResNet-50 (train mode: BatchNorm,
in-place ReLUs) and Inception-v3. Slow: 2 spawned processes tracing and running each model."""

import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
pytest.importorskip("torch.distributed.pipelining")

from frontends.test_pipeline_runtime import check_gloo


def stages_of(plan):
    stages = [list(s.nodes) for s in plan.stages]
    assert all(stages)
    return stages


@pytest.mark.slow
def test_hugging_face_four_stage_plans_on_two_gloo_ranks(tmp_path):
    require_extra("transformers", "test")
    from frontends.test_hf import MODELS, traced

    cases = []
    for name in sorted(MODELS):
        _, _, t = traced(name)
        stages = stages_of(t.partition(4))
        cases += [(f"hf:{name}", stages, False), (f"hf:{name}", stages, True)]
    results = check_gloo(cases, tmp_path)
    assert [r["copies"] for r in results if "copies" in r] == [1, 2, 1]  # gpt2's tied weight: a copy on two stages


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50", "inception_v3"])
def test_vision_plans_on_two_gloo_ranks(name, tmp_path):
    pytest.importorskip("torchvision")
    from frontends.test_real_models import MAKERS
    from stagecut.frontends.torch import trace_torch

    torch.manual_seed(0)
    model, x = MAKERS[name]()
    t = trace_torch(model, (x,), bandwidth=1e10, flops_per_s=1e10)
    cases = [(f"tv:{name}", stages_of(t.partition(k)), True) for k in (2, 4)]
    check_gloo(cases, tmp_path, grad_tol=1e-3, loss_rel=1e-4)
