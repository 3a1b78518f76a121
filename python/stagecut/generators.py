"""Synthetic graphs for benchmarks and tests.

:func:`regal_graph` follows the synthetic-graph recipe used by REGAL (Paliwal et al., ICLR
2020) and by Archer et al. (Appendix C.2): a classic random graph model (Erdos-Renyi,
Barabasi-Albert, Watts-Strogatz, random geometric), made acyclic by orienting every edge along
a uniformly random order of the nodes; every node's output tensor size is drawn from
``N(50, 10)`` (clipped at 0), and a node's cost is the sum of its input and output tensor sizes
plus a uniformly random fraction of that sum. Everything is drawn from one seeded generator.

Examples
--------
>>> g = regal_graph(60, model="erdos_renyi", seed=1)
>>> len(g), g == regal_graph(60, model="erdos_renyi", seed=1)
(60, True)
"""

from __future__ import annotations

import math

import numpy as np

from stagecut.errors import InvalidGraphError
from stagecut.graph import ACCELERATOR, Graph, Node

__all__ = ["regal_graph", "REGAL_MODELS"]

REGAL_MODELS = ("erdos_renyi", "barabasi_albert", "watts_strogatz", "random_geometric")


def _undirected_edges(model: str, n: int, rng: np.random.Generator, avg_degree: float) -> list:
    import networkx as nx

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
        raise InvalidGraphError(f"model: {model!r} is not one of {', '.join(REGAL_MODELS)}")
    return list(G.edges())


def regal_graph(
    n: "int | None" = None,
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
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidGraphError(f"seed: {seed!r} must be a non-negative integer")
    rng = np.random.default_rng(int(seed))
    if n is None:
        n = int(rng.integers(50, 201))
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InvalidGraphError(f"n: {n!r} must be a positive integer")
    if params not in ("tensor", "zero"):
        raise InvalidGraphError(f"params: {params!r} is not 'tensor' or 'zero'")
    if not (avg_degree >= 0 and math.isfinite(avg_degree)):
        raise InvalidGraphError(f"avg_degree: {avg_degree!r} must be a finite non-negative number")
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
