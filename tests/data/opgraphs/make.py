"""Regenerate the traced operator graphs in this folder (latency workloads in the shared format).

    python tests/data/opgraphs/make.py            # every graph (needs the torch extra; a few minutes)
    python tests/data/opgraphs/make.py gpt12      # one graph

Each graph is a real model traced with :func:`stagecut.torch.trace` (``torch.export``, FLOP
costs), written as a latency workload: ``cpuLatency`` = FLOPs / 10 GFLOP/s in ms,
``fpgaLatency`` = that divided by the accelerator's speed-up for the operator's kind (40x for
matrix products and convolutions, 10x for everything else), ``size`` = the operator's
parameter bytes plus its output bytes, edges costing the source's ``comm`` (output bytes / 12 GB/s, PCIe) in ms, and
``maxSizePerFPGA`` set so that the accelerators together hold only 60% of the total: memory
binds. Random weights, fixed seeds: the files are deterministic for a given torch version.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CPU_FLOPS = 1e10          # FLOP/s of the CPU pool's cores
PCIE = 12e9               # bytes/s
FAST_KINDS = ("conv", "mm", "matmul", "linear", "addmm", "bmm", "baddbmm", "einsum")
ACCELERATORS, CPUS, FILL = 4, 8, 0.6


def _gpt(layers: int, d: int = 512, heads: int = 8, seq: int = 128, vocab: int = 8192):
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q, k, v = (t.view(b, s, heads, d // heads).transpose(1, 2) for t in (q, k, v))
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
            return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
            self.layers = nn.ModuleList(Block() for _ in range(layers))
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            x = self.emb(ids) + self.pos(torch.arange(ids.shape[1]))
            for layer in self.layers:
                x = layer(x)
            return self.head(self.ln(x))

    torch.manual_seed(0)
    return GPT().eval(), (torch.randint(0, vocab, (1, seq)),)


def _vision(name: str):
    import torch
    import torchvision

    torch.manual_seed(0)
    if name == "inception_v3":
        model = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=False)
        return model.eval(), (torch.randn(1, 3, 299, 299),)
    return getattr(torchvision.models, name)(weights=None).eval(), (torch.randn(1, 3, 224, 224),)


#: file stem -> (model factory, training)
GRAPHS = {
    "resnet50": (lambda: _vision("resnet50"), False),
    "inception_v3": (lambda: _vision("inception_v3"), False),
    "gpt12": (lambda: _gpt(12), False),
    "resnet50_training": (lambda: _vision("resnet50"), True),
    "gpt12_training": (lambda: _gpt(12), True),
    "inception_v3_training": (lambda: _vision("inception_v3"), True),
    "resnet152_training": (lambda: _vision("resnet152"), True),
    "gpt48_training": (lambda: _gpt(48), True),
    "gpt96_training": (lambda: _gpt(96), True),
}


def workload(stem: str) -> dict:
    import torch

    import stagecut.torch

    torch.set_num_threads(1)
    factory, training = GRAPHS[stem]
    model, args = factory()
    t = stagecut.torch.trace(model, args, bandwidth=PCIE, cost="flops", flops_per_s=CPU_FLOPS,
                             training=training)
    g = t.graph
    ids = {node.id: i for i, node in enumerate(g.nodes)}
    nodes, edges = [], []
    for node in g.nodes:
        cpu_ms = 1e3 * sum(node.compute.values()) / len(node.compute)
        fwd = str(node.id).removesuffix("_bwd")
        target = t.targets.get(fwd, "").lower()
        speedup = 40.0 if any(k in target for k in FAST_KINDS) else 10.0
        out = float(t.output_bytes.get(fwd, 0.0))
        nodes.append({"name": str(node.id), "id": ids[node.id], "supportedOnFpga": 1,
                      "cpuLatency": round(cpu_ms, 6), "fpgaLatency": round(cpu_ms / speedup, 6),
                      "isBackwardNode": bool(node.backward),
                      "colorClass": ids[node.id] if node.colocation is None else str(node.colocation),
                      "size": float(node.memory) + out})
    comm = {node.id: node.comm for node in g.nodes}  # seconds: bytes / PCIE (backward: the gradients sent)
    for u, v in g.edges:
        edges.append({"sourceId": ids[u], "destId": ids[v], "cost": round(1e3 * comm[u], 6),
                      "size": round(comm[u] * PCIE)})
    total = sum(n["size"] for n in nodes)
    biggest = max(n["size"] for n in nodes)
    memory = max(math.ceil(FILL * total / ACCELERATORS), math.ceil(biggest))
    return {"maxSizePerFPGA": float(memory), "maxFPGAs": ACCELERATORS, "maxCPUs": CPUS,
            "nodes": nodes, "edges": edges}


def main(argv: list[str]) -> None:
    for stem in argv or list(GRAPHS):
        data = workload(stem)
        (HERE / f"{stem}.json").write_text(json.dumps(data, separators=(",", ":")) + "\n")
        print(f"{stem}: {len(data['nodes'])} nodes, {len(data['edges'])} edges")


if __name__ == "__main__":
    main(sys.argv[1:])
