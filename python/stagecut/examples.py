"""Synthetic graphs we generate ourselves (no third-party data): examples, tests, benchmarks.

* :func:`transformer_like`: a transformer-shaped layer chain (inference or training);
* :func:`random_dag`: a small random DAG for cross-checking solvers;
* :func:`regal_graph`: the synthetic-graph recipe of REGAL (Paliwal et al., ICLR 2020) as used by
  Archer et al. (Appendix C.2): a classic random graph model (Erdos-Renyi, Barabasi-Albert,
  Watts-Strogatz, random geometric), made acyclic by orienting every edge along a uniformly
  random order of the nodes; every node's output tensor size is drawn from ``N(50, 10)``
  (clipped at 0), and a node's cost is the sum of its input and output tensor sizes plus a
  uniformly random fraction of that sum. Everything is drawn from one seeded generator;
* :func:`rwnn` (and :func:`rwnn_devices`), from :mod:`stagecut.rwnn`: the randomly wired
  networks of DiviML, stacked Erdos-Renyi, Watts-Strogatz or Barabasi-Albert modules turned
  into DAGs the Xie et al. way, joined by 1 to 4 channels, with times in ms for a CPU, a T4
  and an A100 and output sizes in bytes (``comm``) for the latency planner.

The generators run in time and memory O(n + m) (100,000 nodes in about a second). The random
graph models are drawn exactly as networkx 3 draws them from a ``random.Random`` seeded by our
generator, so a seed gives the same graph as in earlier releases (and whether SciPy is installed
no longer matters for the random geometric model); only Erdos-Renyi and :func:`random_dag` above
:data:`EXACT_PAIRS` candidate pairs (n > 5,000) draw their edges by geometric skips, the same
distribution with a different sample per seed.

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

import numpy as np

from stagecut.errors import InvalidArgumentError
from stagecut.graph import ACCELERATOR, CPU, Graph, Node
from stagecut.nx_random import barabasi_albert, edge_array, watts_strogatz
from stagecut.rwnn import RWNN_DEPS, RWNN_MODELS, rwnn, rwnn_devices
from stagecut.validate import check_int, check_number, check_size

__all__ = ["transformer_like", "random_dag", "regal_graph", "REGAL_MODELS", "rwnn", "rwnn_devices", "RWNN_MODELS",
           "RWNN_DEPS"]

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
    when ``integer`` (exact arithmetic in tests). Time and memory are O(n + m): up to
    :data:`EXACT_PAIRS` candidate pairs each pair is drawn in turn (the graphs of earlier
    releases, seed for seed); above, the edges are drawn by geometric skips over the pairs
    (the same distribution).

    Raises
    ------
    InvalidArgumentError
        ``n`` is not a positive integer, ``edge_prob`` is not in [0, 1] or ``max_span`` is not
        a non-negative integer.

    Examples
    --------
    >>> g = random_dag(6, edge_prob=0.5, seed=1)
    >>> len(g), all(u < v for u, v in g.edges)
    (6, True)
    """
    check_int(n, "n", minimum=1)
    if not 0.0 <= check_number(edge_prob, "edge_prob", error=InvalidArgumentError) <= 1.0:
        raise InvalidArgumentError(f"edge_prob must be in [0, 1], got {edge_prob!r}")
    span = n - 1 if max_span is None else min(n - 1, check_int(max_span, "max_span"))
    rng = random.Random(seed)
    bits = rng.getrandbits

    def draw(hi: int) -> float:
        if not integer:
            return rng.uniform(0, hi)
        k = (hi + 1).bit_length()  # rng.randint(0, hi), inlined: the same draws, a third of the time
        r = bits(k)
        while r > hi:
            r = bits(k)
        return float(r)

    nodes: list[Node] = []
    for i in range(n):
        compute = {ACCELERATOR: draw(10)}
        if cpu:
            compute[CPU] = draw(30)
        nodes.append(Node(id=i, compute=compute, memory=draw(5), comm=draw(4)))
    src, dst = _bernoulli_pairs(n, span, float(edge_prob), rng)
    return Graph(nodes, zip(src.tolist(), dst.tolist()))


#: up to this many candidate pairs, random_dag and regal_graph's Erdos-Renyi model draw one
#: uniform per pair in order (the graphs of earlier releases); above, geometric skips
EXACT_PAIRS = 12_500_000  # n = 5000 without a span limit, about 0.1 s


def _pairs_before(n: int, span: int) -> np.ndarray:
    """``start[i]``: how many candidate pairs ``(a, b)``, ``a < b <= a + span``, precede row ``i``."""
    rows = np.minimum(n - 1 - np.arange(n, dtype=np.int64), span)
    return np.concatenate(([0], np.cumsum(rows)[:-1])).astype(np.int64)


def _bernoulli_pairs(n: int, span: int, p: float, py: random.Random) -> tuple[np.ndarray, np.ndarray]:
    """Each pair ``i < j <= i + span`` (row by row) independently with probability ``p``: as
    ``(sources, targets)`` arrays in that order, in O(n + m)."""
    start = _pairs_before(n, span)
    total = int(np.minimum(n - 1 - np.arange(n, dtype=np.int64), span).sum()) if n > 1 else 0
    if total == 0 or p <= 0.0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    hits: list[np.ndarray] = []
    if total <= EXACT_PAIRS:  # one uniform per pair, from py's own stream (Mersenne Twister twin)
        twin = _numpy_twin(py)
        for lo in range(0, total, 1 << 20):
            u = twin.random_sample(min(1 << 20, total - lo))
            hits.append(lo + np.flatnonzero(u < p))
    else:  # gaps between successes are geometric
        gen = np.random.default_rng(py.getrandbits(64))
        pos = -1
        chunk = int(min(total, total * p * 1.1 + 1024, 1 << 22))
        while pos < total:  # gaps clipped: a tiny p saturates numpy's geometric at 2**63 - 1
            k = pos + np.cumsum(np.minimum(gen.geometric(p, size=chunk), total + 1))
            hits.append(k[k < total])
            pos = int(k[-1])
    k = np.concatenate(hits)
    i = np.searchsorted(start, k, side="right") - 1
    return i, i + 1 + (k - start[i])


def _numpy_twin(py: random.Random) -> np.random.RandomState:
    """A numpy generator in ``py``'s state: its ``random_sample()`` continues ``py.random()``."""
    _, state, _ = py.getstate()
    twin = np.random.RandomState()
    twin.set_state(("MT19937", np.array(state[:-1], dtype=np.uint32), int(state[-1]), 0, 0.0))
    return twin


REGAL_MODELS = ("erdos_renyi", "barabasi_albert", "watts_strogatz", "random_geometric")


def _undirected_edges(model: str, n: int, rng: np.random.Generator, avg_degree: float) -> np.ndarray:
    """The model's undirected edges as an ``(m, 2)`` array; each model is drawn exactly as
    networkx 3 draws it from ``random.Random(s)`` (same graph, seed for seed), in O(n + m)."""
    s = int(rng.integers(0, 2**31 - 1))
    py = random.Random(s)
    if model == "erdos_renyi":
        p = min(1.0, avg_degree / max(n - 1, 1))
        if p >= 1.0:  # networkx: the complete graph, no draws
            a, b = np.triu_indices(n, 1)
            return np.stack([a, b], axis=1)
        return np.stack(_bernoulli_pairs(n, n - 1, p, py), axis=1)
    if model == "barabasi_albert":
        return barabasi_albert(n, max(1, min(n - 1, int(round(avg_degree / 2)))), py)
    if model == "watts_strogatz":
        k = max(2, int(round(avg_degree)))
        return watts_strogatz(n, min(k, n - 1), 0.3, py)
    if model == "random_geometric":
        return _random_geometric(n, math.sqrt(avg_degree / (math.pi * max(n - 1, 1))), py)
    raise InvalidArgumentError(f"model: {model!r} is not one of {', '.join(REGAL_MODELS)}")


def _random_geometric(n: int, radius: float, py: random.Random) -> np.ndarray:
    """networkx's ``random_geometric_graph(n, radius)`` without SciPy: points uniform in the
    unit square (drawn node by node, x then y), an edge when the squared distance is at most
    ``radius ** 2``; neighbours are found through a grid of cells of side ``radius``."""
    xy = _numpy_twin(py).random_sample(2 * n).reshape(n, 2)  # py.random() for x, then y, node by node
    if not radius > 0:
        return edge_array([])
    r2 = radius**2
    width = max(radius, 2.0**-30)  # cells at least radius wide: neighbours are in adjacent cells
    side = int(1.0 / width) + 1
    cell = np.minimum((xy / width).astype(np.int64), side - 1)
    key = cell[:, 0] * side + cell[:, 1]
    order = np.argsort(key, kind="stable")
    sorted_keys = key[order]
    found = []
    for dx, dy in ((0, 0), (0, 1), (1, -1), (1, 0), (1, 1)):
        cx, cy = cell[:, 0] + dx, cell[:, 1] + dy
        ok = (cx < side) & (cy >= 0) & (cy < side)
        target = np.where(ok, cx * side + cy, -1)
        lo = np.searchsorted(sorted_keys, target, side="left")
        hi = np.where(ok, np.searchsorted(sorted_keys, target, side="right"), lo)
        count = hi - lo
        src = np.repeat(np.arange(n), count)
        dst = order[np.repeat(lo - np.cumsum(count) + count, count) + np.arange(int(count.sum()))]
        if (dx, dy) == (0, 0):
            keep = src < dst
            src, dst = src[keep], dst[keep]
        d = np.abs(xy[src] - xy[dst])
        near = d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1] <= r2
        found.append(np.stack([np.minimum(src[near], dst[near]), np.maximum(src[near], dst[near])], axis=1))
    return np.concatenate(found) if found else edge_array([])


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
    check_size("n", nodes=n)
    check_number(tensor_std, "tensor_std", error=InvalidArgumentError)  # a finite number >= 0
    if params not in ("tensor", "zero"):
        raise InvalidArgumentError(f"params: {params!r} is not 'tensor' or 'zero'")
    check_number(avg_degree, "avg_degree", error=InvalidArgumentError)
    n = int(n)
    und = _undirected_edges(model, n, rng, avg_degree)
    perm = rng.permutation(n)  # perm[v] = position of v in the random order
    a, b = perm[und[:, 0]], perm[und[:, 1]]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    code = np.unique((lo * n + hi)[lo != hi])  # sorted, without duplicates
    src, dst = code // n, code % n
    size = np.maximum(0.0, rng.normal(tensor_mean, tensor_std, size=n))
    frac = rng.random(n)
    inputs = np.bincount(dst, weights=size[src], minlength=n)  # summed in edge order
    cost = ((inputs + size) * (1.0 + frac)).tolist()
    sizes = size.tolist()
    nodes = [Node(id=v, compute={ACCELERATOR: cost[v]}, memory=sizes[v] if params == "tensor" else 0.0,
                  comm=sizes[v]) for v in range(n)]
    return Graph(nodes, zip(src.tolist(), dst.tolist()))
