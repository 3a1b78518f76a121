"""A small transformer -> trace -> partition -> split_policy -> a torch.distributed.pipelining Pipe.

    python examples/transformer_pipeline.py [--devices 3]

An embedding, ``nn.TransformerEncoderLayer`` blocks and a classification head over the mean of
the sequence. The exact plan may cut inside a block, or interleave branches that are independent
(attention and its residual): ``split_policy`` reorders the exported program to the plan's stage
order first, so every plan whose stages form a pipeline builds. Devices of 100 GFLOP/s
(``flops_per_s=1e11``, times in seconds) linked at 10 GB/s (1e10 bytes per second).
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


class Transformer(nn.Module):
    def __init__(self, vocab: int = 100, dim: int = 64, heads: int = 4, layers: int = 4, classes: int = 10) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True)
                                     for _ in range(layers)])
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.head(h.mean(1))


def main(devices: int = 3) -> tuple[nn.Module, torch.Tensor, sc.Plan, Any]:
    """Plan and build the pipeline; returns (model, example input, plan, Pipe)."""
    torch.manual_seed(0)
    model, tokens = Transformer().eval(), torch.randint(0, 100, (4, 16))
    # ---- the user code: model -> trace -> partition -> split_policy -> pipeline
    trace = trace_torch(model, tokens, bandwidth="10GB/s", flops_per_s=1e11)  # seconds, bytes, bytes/s
    plan = sc.partition(trace.graph, devices=devices)
    pipe = pipeline(model, (tokens,), split_policy=split_policy(plan, trace))
    # ----
    print(f"transformer: {len(trace.graph)} operators, {pipe.num_stages} stages, "
          f"{(plan.objective or 0.0) * 1e6:.2f} us per sample ({plan.status})")
    return model, tokens, plan, pipe


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, default=3, help="pipeline stages (default: 3)")
    main(parser.parse_args().devices)
