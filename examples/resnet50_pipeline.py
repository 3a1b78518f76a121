"""ResNet-50 -> trace -> partition -> split_policy -> a torch.distributed.pipelining Pipe.

    python examples/resnet50_pipeline.py [--devices 4]

Uses torchvision's ResNet-50 when torchvision is installed; otherwise a small ResNet-style model
written below (a stem, four stages of bottleneck blocks with skip connections, a pooled head),
said on stdout. The plan is exact (the DP over the graph's ideals) for devices of 100 GFLOP/s
(``flops_per_s=1e11``, the FLOP model's times in seconds) linked at 10 GB/s (1e10 bytes per
second); building the Pipe needs no process group, so this runs on one CPU. Each stage module
would then go to its own device (``torch.distributed.pipelining.build_stage`` and a schedule,
under ``torchrun``).
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from torch import nn
from torch.distributed.pipelining import pipeline

import stagecut as sc
from stagecut.frontends.split import split_policy
from stagecut.frontends.torch import trace_torch


class Bottleneck(nn.Module):
    """1x1 -> 3x3 -> 1x1 convolutions with batch norm, plus the (projected) input."""

    def __init__(self, cin: int, width: int, stride: int = 1) -> None:
        super().__init__()
        cout = 4 * width
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = (nn.Identity() if stride == 1 and cin == cout else
                     nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.skip(x))


class SmallResNet(nn.Module):
    """ResNet-50's layout (stem, layer1-4 of bottlenecks, pooled fc) with one block per stage and
    narrow widths: a stand-in when torchvision is not installed."""

    def __init__(self, classes: int = 10, width: int = 8) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        layers, cin = [], width
        for i in range(4):
            layers.append(Bottleneck(cin, width * 2 ** i, stride=1 if i == 0 else 2))
            cin = 4 * width * 2 ** i
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer4(self.layer3(self.layer2(self.layer1(self.stem(x)))))
        return self.fc(x.mean((2, 3)))


def resnet() -> tuple[nn.Module, torch.Tensor, str]:
    """torchvision's ResNet-50 on a 224x224 batch of 2, else :class:`SmallResNet` on 32x32."""
    try:
        from torchvision.models import resnet50
    except ImportError:
        return SmallResNet().eval(), torch.randn(2, 3, 32, 32), "a small ResNet-style model (torchvision is absent)"
    return resnet50().eval(), torch.randn(2, 3, 224, 224), "torchvision's ResNet-50"


def main(devices: int = 4) -> tuple[nn.Module, torch.Tensor, sc.Plan, Any]:
    """Plan and build the pipeline; returns (model, example input, plan, Pipe)."""
    torch.manual_seed(0)
    model, x, what = resnet()
    # ---- the user code: model -> trace -> partition -> split_policy -> pipeline
    trace = trace_torch(model, x, bandwidth="10GB/s", flops_per_s=1e11)  # seconds, bytes, bytes/s
    plan = sc.partition(trace.graph, devices=devices)
    pipe = pipeline(model, (x,), split_policy=split_policy(plan, trace))
    # ----
    print(f"{what}: {len(trace.graph)} operators, {pipe.num_stages} stages, "
          f"{(plan.objective or 0.0) * 1e6:.1f} us per sample ({plan.status})")
    return model, x, plan, pipe


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, default=4, help="pipeline stages (default: 4)")
    main(parser.parse_args().devices)
