"""torchvision's ResNet-50 and Inception-v3 (random weights) at k = 2 and 4: every stage of the
plan does work, and the stages built by the runtime compute the model's output and gradients
(run like ``PipelineStage``: received tensors are leaves requiring grad, sends contiguous).
BatchNorm in train mode for ResNet-50 (in-place ReLUs on received tensors, buffers updated in
place). Slow: minutes of CPU each."""

import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
torchvision = pytest.importorskip("torchvision")
pytest.importorskip("torch.distributed.pipelining")

from frontends.stage_runner import check_stages
from stagecut.frontends.torch import trace_torch


def resnet50():
    return torchvision.models.resnet50(weights=None).train(), torch.randn(2, 3, 64, 64)


def inception_v3():
    model = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=False).eval()
    return model, torch.randn(1, 3, 96, 96)


MAKERS = {"resnet50": resnet50, "inception_v3": inception_v3}


@pytest.mark.slow
@pytest.mark.parametrize("make", [resnet50, inception_v3], ids=["resnet50", "inception_v3"])
@pytest.mark.parametrize("k", [2, 4])
def test_plans_of_real_vision_models_run(make, k):
    torch.manual_seed(0)
    model, x = make()
    t = trace_torch(model, (x,), bandwidth=1e10, flops_per_s=1e10)
    plan = t.partition(k)
    loads = [s.load for s in plan.stages]
    assert all(s.nodes for s in plan.stages) and min(loads) > 0.3 * max(loads), loads
    check_stages(model, x, t, plan, atol=1e-3)
