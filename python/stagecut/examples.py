"""Synthetic graphs we generate ourselves (no third-party data): examples, tests, benchmarks.

* :func:`transformer_like`: a transformer-shaped layer chain (inference or training);
* :func:`random_dag`: a small random DAG for cross-checking solvers;
* :func:`regal_graph`: the synthetic-graph recipe of REGAL (Paliwal et al., ICLR 2020) as used by
  Archer et al. (Appendix C.2): a classic random graph model (Erdos-Renyi, Barabasi-Albert,
  Watts-Strogatz, random geometric), made acyclic by orienting every edge along a uniformly
  random order of the nodes; every node's output tensor size is drawn from ``N(50, 10)``
  (clipped at 0), and a node's cost is the sum of its input and output tensor sizes plus a
  uniformly random fraction of that sum. Everything is drawn from one seeded generator.

Examples
--------
>>> import stagecut as sc
>>> g = sc.transformer_like(layers=2, seed=0)
>>> len(g), g.is_training
(20, False)
>>> len(sc.transformer_like(layers=2, training=True)) == 2 * len(g)
True
>>> g = sc.regal_graph(60, model="erdos_renyi", seed=1)
>>> len(g), g == sc.regal_graph(60, model="erdos_renyi", seed=1)
(60, True)
"""

from __future__ import annotations

import math
import random

import networkx as nx
import numpy as np

from stagecut.errors import InvalidArgumentError
from stagecut.graph import ACCELERATOR, CPU, Graph, Node
from stagecut.validate import check_int, check_number

__all__ = ["transformer_like", "random_dag", "regal_graph", "REGAL_MODELS"]

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

    Raises
    ------
    InvalidArgumentError
        ``layers`` is not a positive integer.
    """
    check_int(layers, "layers", minimum=1)
    rng = random.Random(seed)
    nodes: list[Node] = []
    edges: list[tuple[int, int]] = []
    act_bytes = 4.0 * hidden * 512  # one sequence of 512 tokens, fp32
    bandwidth = 16e9 / 1e3  # bytes per ms
    next_id = 0

    def add(name: str, t: float, params: float, act: float) -> int:
        nonlocal next_id
        t = t * rng.uniform(0.9, 1.1)
        nodes.append(Node(id=next_id, name=name, compute={ACCELERATOR: t, CPU: 10 * t},
                          memory=4.0 * params * hidden * hidden, comm=act * act_bytes / bandwidth,
                          colocation=next_id))
        next_id += 1
        return next_id - 1

    prev = add("embed", 0.3, 8.0, 1.0)
    for i in range(layers):
        ids: dict[str, int] = {}
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
        for i, n in enumerate(fwd):  # node ids are their positions
            nodes.append(Node(id=i + next_id, name=f"{n.name}.grad",
                              compute={k: 2 * v for k, v in n.compute.items()}, memory=0.0,
                              comm=n.comm, colocation=n.colocation, backward=True))
        edges += [(v + next_id, u + next_id) for u, v in list(edges)]
        edges += [(i, i + next_id) for i in range(len(fwd))]
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

    Raises
    ------
    InvalidArgumentError
        ``n`` is not a positive integer or ``edge_prob`` is not in [0, 1].
    """
    check_int(n, "n", minimum=1)
    if not 0.0 <= check_number(edge_prob, "edge_prob", error=InvalidArgumentError) <= 1.0:
        raise InvalidArgumentError(f"edge_prob must be in [0, 1], got {edge_prob!r}")
    rng = random.Random(seed)

    def draw(hi: int) -> float:
        return float(rng.randint(0, hi)) if integer else rng.uniform(0, hi)

    nodes: list[Node] = []
    for i in range(n):
        compute = {ACCELERATOR: draw(10)}
        if cpu:
            compute[CPU] = draw(30)
        nodes.append(Node(id=i, compute=compute, memory=draw(5), comm=draw(4)))
    edges = [(i, j) for i in range(n) for j in range(i + 1, n)
             if (max_span is None or j - i <= max_span) and rng.random() < edge_prob]
    return Graph(nodes, edges)


REGAL_MODELS = ("erdos_renyi", "barabasi_albert", "watts_strogatz", "random_geometric")


def _undirected_edges(model: str, n: int, rng: np.random.Generator, avg_degree: float) -> list[tuple[int, int]]:
    s = int(rng.integers(0, 2**31 - 1))
    if model == "erdos_renyi":
        G = nx.gnp_random_graph(n, min(1.0, avg_degree / max(n - 1, 1)), seed=s)
    elif model == "barabasi_albert":
        G = nx.barabasi_albert_graph(n, max(1, min(n - 1, int(round(avg_degree / 2)))), seed=s)
    elif model == "watts_strogatz":
        k = max(2, int(round(avg_degree)))
        G = nx.watts_strogatz_graph(n, min(k, n - 1), 0.3, seed=s)
    elif model == "random_geometric":
        r = math.sqrt(avg_degree / (math.pi * max(n - 1, 1)))
        G = nx.random_geometric_graph(n, r, seed=s)
    else:
        raise InvalidArgumentError(f"model: {model!r} is not one of {', '.join(REGAL_MODELS)}")
    return list(G.edges())


def regal_graph(
    n: int | None = None,
    *,
    model: str = "erdos_renyi",
    seed: int = 0,
    avg_degree: float = 3.0,
    tensor_mean: float = 50.0,
    tensor_std: float = 10.0,
    params: str = "tensor",
) -> Graph:
    """A seeded REGAL-style random DAG.

    Parameters
    ----------
    n : int, optional
        Number of nodes (default: uniform in 50..200, drawn from the seed).
    model : {"erdos_renyi", "barabasi_albert", "watts_strogatz", "random_geometric"}
    seed : int
    avg_degree : float
        Target average (undirected) degree of the model.
    tensor_mean, tensor_std : float
        Output tensor sizes are ``max(0, N(mean, std))``; they are the nodes' ``comm``
        (bandwidth 1: time = size).
    params : {"tensor", "zero"}
        Node parameter size (``memory``): equal to its output tensor size, or 0.

    Returns
    -------
    Graph
        Nodes ``0..n-1`` (ids in the random order, so ``0`` is a source), with
        ``compute={"accelerator": cost}``, ``comm`` and ``memory``.

    Raises
    ------
    InvalidArgumentError
        A bad ``n``, ``seed``, ``model``, ``params`` or ``avg_degree``.
    """
    rng = np.random.default_rng(check_int(seed, "seed"))
    n = int(rng.integers(50, 201)) if n is None else check_int(n, "n", minimum=1)
    if params not in ("tensor", "zero"):
        raise InvalidArgumentError(f"params: {params!r} is not 'tensor' or 'zero'")
    check_number(avg_degree, "avg_degree", error=InvalidArgumentError)
    n = int(n)
    und = _undirected_edges(model, n, rng, avg_degree)
    perm = rng.permutation(n)  # perm[v] = position of v in the random order
    edges = sorted({(int(min(perm[a], perm[b])), int(max(perm[a], perm[b]))) for a, b in und if a != b})
    size = np.maximum(0.0, rng.normal(tensor_mean, tensor_std, size=n))
    frac = rng.random(n)
    inputs = np.zeros(n)
    for a, b in edges:
        inputs[b] += size[a]
    nodes = []
    for v in range(n):
        base = inputs[v] + size[v]
        nodes.append(
            Node(
                id=v,
                compute={ACCELERATOR: float(base * (1.0 + frac[v]))},
                memory=float(size[v]) if params == "tensor" else 0.0,
                comm=float(size[v]),
            )
        )
    return Graph(nodes, edges)
