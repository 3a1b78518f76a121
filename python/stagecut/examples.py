"""Synthetic example graphs we generate ourselves (no third-party data).

>>> import stagecut as sc
>>> g = sc.transformer_like(layers=2, seed=0)
>>> len(g), g.is_training
(21, False)
>>> len(sc.transformer_like(layers=2, training=True)) == 2 * 21
True
"""

from __future__ import annotations

import random

from stagecut.graph import ACCELERATOR, CPU, Graph, Node

__all__ = ["transformer_like", "random_dag"]

_BLOCK = (  # name, relative accelerator time, relative params, relative activation size
    ("ln1", 0.05, 0.0, 1.0),
    ("qkv", 1.0, 3.0, 3.0),
    ("attn", 1.2, 0.0, 1.0),
    ("proj", 0.4, 1.0, 1.0),
    ("add1", 0.02, 0.0, 1.0),
    ("ln2", 0.05, 0.0, 1.0),
    ("fc1", 1.6, 4.0, 4.0),
    ("fc2", 1.6, 4.0, 1.0),
    ("add2", 0.02, 0.0, 1.0),
)


def transformer_like(
    layers: int = 12,
    *,
    training: bool = False,
    seed: int = 0,
    accelerators: int = 4,
    cpus: int = 1,
    memory: float = 4e9,
    hidden: int = 1024,
) -> Graph:
    """A transformer-like layer graph: embedding, ``layers`` pre-norm blocks, head.

    Each block is ``ln1 -> qkv -> attn -> proj -> add1 -> ln2 -> fc1 -> fc2 -> add2`` with
    residual edges into ``add1`` and ``add2``. Times carry +-10% seeded noise; CPU times are
    10x the accelerator's; memory is fp32 weights of a model with the given ``hidden`` width.
    With ``training=True`` every node gets a backward node (2x the time) in its colocation
    class, wired in reverse. ``graph.defaults`` holds the device counts and memory.
    """
    rng = random.Random(seed)
    nodes: list = []
    edges: list = []
    act_bytes = 4.0 * hidden * 512  # one sequence of 512 tokens, fp32
    bandwidth = 16e9 / 1e3  # bytes per ms
    next_id = 0

    def add(name, t, params, act):
        nonlocal next_id
        t = t * rng.uniform(0.9, 1.1)
        nodes.append(Node(id=next_id, name=name, compute={ACCELERATOR: t, CPU: 10 * t},
                          memory=4.0 * params * hidden * hidden, comm=act * act_bytes / bandwidth,
                          colocation=next_id))
        next_id += 1
        return next_id - 1

    prev = add("embed", 0.3, 8.0, 1.0)
    for i in range(layers):
        ids = {}
        for name, t, p, a in _BLOCK:
            ids[name] = add(f"layer{i}.{name}", t, p, a)
        chain = [prev] + [ids[name] for name, *_ in _BLOCK]
        edges += list(zip(chain, chain[1:]))
        edges += [(prev, ids["add1"]), (ids["add1"], ids["add2"])]
        prev = ids["add2"]
    head = add("head", 0.5, 8.0, 1.0)
    edges.append((prev, head))
    if training:
        fwd = list(nodes)
        for n in fwd:
            nodes.append(Node(id=n.id + next_id, name=f"{n.name}.grad",
                              compute={k: 2 * v for k, v in n.compute.items()}, memory=0.0,
                              comm=n.comm, colocation=n.colocation, backward=True))
        edges += [(v + next_id, u + next_id) for u, v in list(edges)]
        edges += [(n.id, n.id + next_id) for n in fwd]
    return Graph(nodes, edges, {"accelerators": accelerators, "cpus": cpus, "memory": memory})


def random_dag(
    n: int,
    *,
    edge_prob: float = 0.3,
    seed: int = 0,
    max_span: int | None = None,
    cpu: bool = True,
    integer: bool = True,
) -> Graph:
    """A random DAG on ``0..n-1`` (edges ``i -> j``, ``i < j``, each with ``edge_prob``).

    ``max_span`` limits ``j - i`` (a narrow DAG with fewer ideals). Costs are small integers
    when ``integer`` (exact arithmetic in tests).
    """
    rng = random.Random(seed)

    def draw(hi):
        return float(rng.randint(0, hi)) if integer else rng.uniform(0, hi)

    nodes = []
    for i in range(n):
        compute = {ACCELERATOR: draw(10)}
        if cpu:
            compute[CPU] = draw(30)
        nodes.append(Node(id=i, compute=compute, memory=draw(5), comm=draw(4)))
    edges = [(i, j) for i in range(n) for j in range(i + 1, n)
             if (max_span is None or j - i <= max_span) and rng.random() < edge_prob]
    return Graph(nodes, edges)
