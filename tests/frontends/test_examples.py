"""The scripts in examples/: model -> trace -> partition -> split_policy -> pipeline, run as a
user would, and the Pipe's stage modules, run in stage order, compose to the model's output."""

import importlib.util
import os
import pathlib

import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
require_extra("torch.distributed.pipelining", "torch")

from frontends.test_split import first, run_in_stage_order

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
HAS_TORCHVISION = importlib.util.find_spec("torchvision") is not None


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def user_lines(path):
    """The lines between the example's '# ---- the user code' markers."""
    text = path.read_text().splitlines()
    start = next(i for i, line in enumerate(text) if "# ---- the user code" in line)
    end = next(i for i in range(start + 1, len(text)) if text[i].strip() == "# ----")
    return [line for line in text[start + 1:end] if line.strip()]


@pytest.mark.parametrize("name, devices", [
    # torchvision's ResNet-50 (the [torch] extra installs torchvision; 15-30 s on a CPU), else the
    # small stand-in outside CI; slow: the transformer example takes the same path by default
    pytest.param("resnet50_pipeline", 4, marks=pytest.mark.slow),
    ("transformer_pipeline", 3),
])
def test_example_builds_a_pipe_that_computes_the_model(name, devices, capsys):
    if name == "resnet50_pipeline" and not HAS_TORCHVISION and os.environ.get("CI") == "true":
        pytest.fail("torchvision is missing: the [torch] extra installs it and CI runs the real ResNet-50")
    module = load(name)
    model, x, plan, pipe = module.main(devices)
    out = capsys.readouterr().out
    assert f"{devices} stages" in out
    if name == "resnet50_pipeline" and HAS_TORCHVISION:
        assert out.startswith("torchvision's ResNet-50: ")
    assert plan.status == "optimal" and pipe.num_stages == len(plan.stages) == devices
    with torch.no_grad():
        expected = model(x)
        assert torch.allclose(first(run_in_stage_order(pipe, x)), expected, atol=1e-4, rtol=1e-4)
    lines = user_lines(EXAMPLES / f"{name}.py")
    assert 3 <= len(lines) < 10 and any("split_policy(" in line for line in lines)
