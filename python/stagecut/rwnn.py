"""Randomly wired networks (RWNN): the stacked random modules that DiviML's experiments are measured on.

A *module* is a random graph on ``size`` nodes turned into a DAG the way of Xie et al.
("Exploring randomly wired neural networks", ICCV 2019): nodes are numbered, every edge goes
from the lower to the higher number, an input node feeds every source and an output node is fed
by every sink. The random graph models and their parameters are those of DiviML:

* ``"er"``: Erdos-Renyi, each pair an edge with probability :data:`ER_P` = 0.2;
* ``"ws"``: Watts-Strogatz, a ring of ``size`` nodes each joined to its :data:`WS_K` = 4
  nearest neighbours, each edge rewired with probability :data:`WS_P` = 0.75 (exactly
  ``size * 2`` edges);
* ``"ba"``: Barabasi-Albert, a star on :data:`BA_M` + 1 = 6 nodes, then each new node attached
  to 5 distinct nodes drawn in proportion to their degree (exactly ``5 * (size - 5)`` edges).

Watts-Strogatz and Barabasi-Albert are drawn as networkx 3 draws them (the generators of
:mod:`stagecut.examples`); Erdos-Renyi draws one uniform per pair, for all modules at once.

**Channels.** ``modules`` modules are stacked, and module ``t`` feeds module ``t + 1`` through
``channels`` edges, the *channels*. With ``c`` channels a module has ``c`` entry nodes (its
input nodes, ``m{t}.in{k}``) and ``c`` exit nodes (its output nodes, ``m{t}.out{k}``), and
channel ``k`` is the edge from exit ``k`` of module ``t`` to entry ``k`` of module ``t + 1``: the
only edges between two modules, so consecutive modules are joined by a cut of exactly ``c``
edges. With one channel a module is exactly Xie et al.'s (one input node, one output node), and
the exit of each module and the entry of the next are articulation points of the undirected
graph (the channel between them a bridge): the narrow points MILP-SPLIT cuts at. How the entries
and exits attach to the module's body (its random DAG) is the *dependence*:

* ``"sdep"`` (strongly dependent): every entry feeds every source of the body and every sink
  feeds every exit, so every exit of a module depends on every entry (a path from each entry
  to each exit);
* ``"wdep"`` (weakly dependent): the channel endpoints inside the module are random: each
  source is fed by one entry drawn uniformly, each sink feeds one exit drawn uniformly; an
  entry left without a successor then feeds a uniformly drawn body node, and an exit left
  without a predecessor is fed by one. Every node still lies on a path from an entry to an exit,
  but an exit may depend on some entries only. With one channel both are the same graph.

**Layout.** Node ids are integers in topological order (every edge goes from a lower id to a
higher one): module ``t`` holds the ids ``t * w .. (t + 1) * w - 1``, ``w = size + 2c``, as its
``c`` entries, then its body nodes in the model's numbering, then its ``c`` exits.

**Costs and units.** Each node has a time for three device kinds (:data:`KINDS`): a base time
uniform in :data:`BASE_MS` (ms, the A100's time), times the kind's ratio of
:data:`TIME_RATIO` (CPU : T4 : A100 = 7.10 : 1.26 : 1), times a per-node, per-kind noise uniform
in ``[1 - NOISE, 1 + NOISE]`` (mean 1, so the mean times keep the ratio). **Times are in ms.** A
node's ``comm`` is its output tensor size **in bytes** (uniform in :data:`OUTPUT_BYTES`, whole
bytes), not a time, and its ``memory`` its weights in bytes (uniform in :data:`WEIGHT_BYTES`).
:func:`rwnn_devices` gives the matching devices (one CPU, one T4, one A100 over PCIe at
:data:`PCIE_BANDWIDTH` = 16e6 bytes per ms, i.e. 16 GB/s); build the latency problem with
``LatencyProblem(graph, rwnn_devices(), output_bytes="comm")`` so that ``comm`` is read as bytes.
The nodes have no ``"accelerator"`` time: the graphs are for the latency planner, and the
pipeline subcommands (partition, slice), whose ``comm`` is a time, refuse them.

**Seeds.** Everything is drawn from ``numpy.random.default_rng(seed)`` and generators seeded
from it (numpy's, and Python's ``random.Random`` for Watts-Strogatz and Barabasi-Albert): a seed
gives the same graph on every platform. The bodies and the costs do not depend on ``dep``: with
one seed, ``"sdep"`` and ``"wdep"`` differ only in how entries and exits are wired. Time and
memory are O(n + m): 1,000 modules of 32 nodes with 4 channels (40,000 nodes) take about a
second, half of it the :class:`~stagecut.graph.Graph` constructor's validation (see
``benches/bench_generators.py``).

Examples
--------
>>> g = rwnn(3, channels=2, model="ws", size=10, seed=1)
>>> len(g), all(u < v for u, v in g.edges)  # 3 modules of 2 entries, 10 body nodes, 2 exits
(42, True)
>>> sorted(g.nodes[0].compute), g.nodes[0].name, g.nodes[13].name
(['a100', 'cpu', 't4'], 'm0.in0', 'm0.out1')
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

import numpy as np

from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph, Node
from stagecut.nx_random import barabasi_albert, watts_strogatz
from stagecut.validate import check_int, check_number, check_size

if TYPE_CHECKING:
    from stagecut.latency.model.devices import Devices

__all__ = [
    "rwnn", "rwnn_devices", "RWNN_MODELS", "RWNN_DEPS", "KINDS", "TIME_RATIO", "PCIE_BANDWIDTH",
    "DEVICE_MEMORY", "ER_P", "WS_K", "WS_P", "BA_M", "BASE_MS", "NOISE", "OUTPUT_BYTES", "WEIGHT_BYTES",
    "MIN_SIZE",
]

#: the random graph models: Erdos-Renyi, Watts-Strogatz, Barabasi-Albert
RWNN_MODELS = ("er", "ws", "ba")
#: the dependence between a module's entries and exits: strong, weak
RWNN_DEPS = ("sdep", "wdep")
ER_P = 0.2  #: Erdos-Renyi edge probability
WS_K = 4  #: Watts-Strogatz: each node joined to its WS_K nearest ring neighbours
WS_P = 0.75  #: Watts-Strogatz rewiring probability
BA_M = 5  #: Barabasi-Albert: edges of each new node
MIN_SIZE = BA_M + 1  #: the smallest module body every model can draw

#: the device kinds, in the order of TIME_RATIO
KINDS = ("cpu", "t4", "a100")
#: mean time of a node on each kind relative to the A100 (DiviML's measured ratio)
TIME_RATIO = {"cpu": 7.10, "t4": 1.26, "a100": 1.0}
#: a node's base (A100) time is uniform in this range, in ms
BASE_MS = (0.5, 1.5)
#: per-node, per-kind multiplicative noise: uniform in [1 - NOISE, 1 + NOISE]
NOISE = 0.1
#: a node's output tensor (its ``comm``) is uniform in this range, in bytes
OUTPUT_BYTES = (4e6, 12e6)
#: a node's weights (its ``memory``) are uniform in this range, in bytes
WEIGHT_BYTES = (0.5e6, 4.5e6)
#: PCIe 3.0 x16, 16 GB/s, in bytes per ms (the unit of the times)
PCIE_BANDWIDTH = 16e6
#: memory capacity of each device, bytes (the CPU's host memory unbounded)
DEVICE_MEMORY = {"cpu": math.inf, "t4": 16e9, "a100": 40e9}


#: modules whose Erdos-Renyi draws are made at once (bounds the memory of the draws)
_ER_BLOCK = 4096


def _bodies(model: str, m: int, n: int, width: int, c: int, rng: np.random.Generator) -> np.ndarray:
    """Every module's random graph as ``(E, 2)`` global ids ``(low, high)``, module by module."""
    if model == "er":  # one uniform per pair (i < j), pairs row by row, modules in turn
        lo, hi = np.triu_indices(n, 1)
        parts = []
        for first in range(0, m, _ER_BLOCK):
            t, pair = np.nonzero(rng.random((min(_ER_BLOCK, m - first), lo.size)) < ER_P)
            base = (t + first) * width + c
            parts.append(np.stack([base + lo[pair], base + hi[pair]], axis=1))
        return np.concatenate(parts)
    py = random.Random(int(rng.integers(0, 2**63 - 1)))  # networkx's draws, module after module
    parts = [watts_strogatz(n, WS_K, WS_P, py) if model == "ws" else barabasi_albert(n, BA_M, py) for _ in range(m)]
    return np.concatenate([np.sort(e, axis=1) + (t * width + c) for t, e in enumerate(parts)])


def _wiring(body: np.ndarray, m: int, n: int, c: int, dep: str, rng: np.random.Generator) -> np.ndarray:
    """The edges from each module's entries to its body and from its body to its exits."""
    width = n + 2 * c
    total = m * width
    local = np.arange(total, dtype=np.int64) % width
    is_body = (local >= c) & (local < c + n)
    has_in = np.zeros(total, dtype=bool)
    has_out = np.zeros(total, dtype=bool)
    has_in[body[:, 1]] = True
    has_out[body[:, 0]] = True
    sources = np.flatnonzero(is_body & ~has_in)
    sinks = np.flatnonzero(is_body & ~has_out)
    src_mod = sources - local[sources]  # first id of the module
    sink_mod = sinks - local[sinks]
    ends = np.arange(c, dtype=np.int64)
    if dep == "sdep" or c == 1:  # every entry -> every source, every sink -> every exit
        entry = np.stack([(src_mod[:, None] + ends).ravel(), np.repeat(sources, c)], axis=1)
        exit_ = np.stack([np.repeat(sinks, c), (sink_mod[:, None] + (c + n) + ends).ravel()], axis=1)
        return np.concatenate([entry, exit_])
    k_in = rng.integers(0, c, size=sources.size)  # the entry feeding each source
    k_out = rng.integers(0, c, size=sinks.size)  # the exit each sink feeds
    fed = np.zeros((m, c), dtype=bool)
    fed[src_mod // width, k_in] = True
    feeding = np.zeros((m, c), dtype=bool)
    feeding[sink_mod // width, k_out] = True
    t_in, e_in = np.nonzero(~fed)  # entries without a successor: each feeds a random body node
    t_out, e_out = np.nonzero(~feeding)  # exits without a predecessor: each fed by one
    r_in = rng.integers(0, n, size=t_in.size)
    r_out = rng.integers(0, n, size=t_out.size)
    return np.concatenate([
        np.stack([src_mod + k_in, sources], axis=1),
        np.stack([sinks, sink_mod + (c + n) + k_out], axis=1),
        np.stack([t_in * width + e_in, t_in * width + c + r_in], axis=1),
        np.stack([t_out * width + c + r_out, t_out * width + (c + n) + e_out], axis=1),
    ])


def rwnn(
    modules: int,
    channels: int = 1,
    *,
    model: str = "er",
    size: int = 10,
    dep: str = "sdep",
    seed: int = 0,
) -> Graph:
    """A seeded stack of randomly wired modules (see the module docs for the construction).

    Parameters
    ----------
    modules : int
        Number of stacked modules (>= 1).
    channels : int
        Edges joining each module to the next (1 to ``size``; DiviML uses 1 to 4). A module has
        ``channels`` entry nodes and ``channels`` exit nodes; with 1 it is Xie et al.'s module
        (one input node, one output node).
    model : {"er", "ws", "ba"}
        Random graph of each module's body: Erdos-Renyi (p = 0.2), Watts-Strogatz (k = 4,
        p = 0.75) or Barabasi-Albert (m = 5).
    size : int
        Body nodes per module (DiviML: 10 or 32; at least :data:`MIN_SIZE` = 6).
    dep : {"sdep", "wdep"}
        Strongly dependent (every entry of a module reaches every exit) or weakly dependent
        (the entries and exits attach to random body nodes).
    seed : int
        Seed (>= 0) of every draw: the same seed gives the same graph on every platform.

    Returns
    -------
    Graph
        ``modules * (size + 2 * channels)`` nodes with ids ``0, 1, ...`` in topological order
        (module by module: entries, body, exits) and names ``m{t}.in{k}``, ``m{t}.{i}``,
        ``m{t}.out{k}``; ``compute`` gives the time **in ms** on the device kinds ``"cpu"``,
        ``"t4"`` and ``"a100"``; ``comm`` is the output tensor size **in bytes** (build a
        latency problem with ``output_bytes="comm"``, devices from :func:`rwnn_devices`);
        ``memory`` the weights in bytes.

    Raises
    ------
    InvalidArgumentError
        ``modules``, ``channels``, ``size`` or ``seed`` not an integer in range, or ``model`` or
        ``dep`` not one of the names above (the message names the argument).

    Examples
    --------
    >>> g = rwnn(2, model="ba", size=10, seed=3)
    >>> len(g), len(g.edges)  # 2 x (1 + 10 + 1) nodes; 2 x 25 body edges, 1 channel, 5 to inputs/from outputs
    (24, 56)
    >>> g == rwnn(2, model="ba", size=10, seed=3), g == rwnn(2, model="ba", size=10, seed=4)
    (True, False)
    """
    m = check_int(modules, "modules", minimum=1)
    n = check_int(size, "size", minimum=MIN_SIZE)
    c = check_int(channels, "channels", minimum=1, maximum=n)
    # nodes, and the Erdos-Renyi draws of a block of modules (8 bytes per pair), before any allocation
    pairs = n * (n - 1) / 2 * min(_ER_BLOCK, m) if model == "er" else 0.0
    check_size("modules x (size + 2 channels)" if m > 1 else "size", nodes=m * (n + 2 * c),
               bytes_needed=8.0 * pairs + 64.0 * m * n)
    if model not in RWNN_MODELS:
        raise InvalidArgumentError(f"model: {model!r} is not one of {', '.join(RWNN_MODELS)}")
    if dep not in RWNN_DEPS:
        raise InvalidArgumentError(f"dep: {dep!r} is not one of {', '.join(RWNN_DEPS)}")
    rng = np.random.default_rng(check_int(seed, "seed"))
    body_rng, wire_rng = (np.random.default_rng(int(x)) for x in rng.integers(0, 2**63 - 1, size=2))
    width = n + 2 * c
    body = _bodies(model, m, n, width, c, body_rng)
    channel_src = (np.arange(m - 1, dtype=np.int64)[:, None] * width + (n + c) + np.arange(c)).ravel()
    joins = np.stack([channel_src, channel_src + c], axis=1)  # exit k of module t -> entry k of t + 1
    edges = np.concatenate([body, _wiring(body, m, n, c, dep, wire_rng), joins])
    edges = edges[np.lexsort((edges[:, 1], edges[:, 0]))]

    total = m * width
    base = rng.uniform(*BASE_MS, size=total)
    noise = rng.uniform(1.0 - NOISE, 1.0 + NOISE, size=(total, len(KINDS)))
    times = (base[:, None] * np.array([TIME_RATIO[k] for k in KINDS]) * noise).tolist()
    out = np.rint(rng.uniform(*OUTPUT_BYTES, size=total)).tolist()
    weights = np.rint(rng.uniform(*WEIGHT_BYTES, size=total)).tolist()
    local = [f"in{k}" for k in range(c)] + [str(i) for i in range(n)] + [f"out{k}" for k in range(c)]
    names = [f"m{t}.{x}" for t in range(m) for x in local]
    cpu, t4, a100 = KINDS
    nodes = [Node(i, {cpu: tc, t4: tt, a100: ta}, weights[i], out[i], name=names[i])
             for i, (tc, tt, ta) in enumerate(times)]
    return Graph(nodes, zip(edges[:, 0].tolist(), edges[:, 1].tolist()))


def rwnn_devices(
    *,
    bandwidth: float = PCIE_BANDWIDTH,
    cpu_memory: float = DEVICE_MEMORY["cpu"],
    t4_memory: float = DEVICE_MEMORY["t4"],
    a100_memory: float = DEVICE_MEMORY["a100"],
) -> Devices:
    """The devices of the RWNN experiments: one CPU, one T4, one A100 over PCIe.

    The devices are named and of kind ``"cpu"``, ``"t4"`` and ``"a100"`` (the keys of the
    nodes' ``compute`` in :func:`rwnn`), each running one node at a time (the CPU too: it runs
    an operator on all its cores), with every pair joined at ``bandwidth`` bytes per ms
    (peer-to-peer over PCIe: a tensor of ``s`` bytes crosses in ``s / bandwidth`` ms). Build the
    problem with ``LatencyProblem(graph, rwnn_devices(), output_bytes="comm")``.

    Parameters
    ----------
    bandwidth : float
        Bytes per ms (the time unit of :func:`rwnn`'s times); default :data:`PCIE_BANDWIDTH`,
        16e6 (16 GB/s, PCIe 3.0 x16).
    cpu_memory, t4_memory, a100_memory : float
        Capacities in bytes (``inf``: unbounded); default host memory unbounded, 16e9 (T4) and
        40e9 (A100).

    Returns
    -------
    stagecut.latency.Devices
        Three devices, bandwidths in bytes per time unit (``unit="bytes"``).

    Raises
    ------
    InvalidArgumentError
        A bandwidth that is not a positive number, a memory that is negative or NaN (naming it).

    Examples
    --------
    >>> d = rwnn_devices()
    >>> d.names, d.transfer_time(8e6, 0, 2)  # 8 MB from the CPU to the A100: 0.5 ms
    (('cpu', 't4', 'a100'), 0.5)
    """
    from stagecut.latency.model.devices import Device, Devices

    bw = check_number(bandwidth, "bandwidth", positive=True, allow_inf=True, error=InvalidArgumentError)
    caps = (cpu_memory, t4_memory, a100_memory)
    devs = [Device(k, k, memory=check_number(cap, f"{k}_memory", allow_inf=True, error=InvalidArgumentError))
            for k, cap in zip(KINDS, caps)]
    matrix = [[math.inf if a == b else bw for b in range(len(devs))] for a in range(len(devs))]
    return Devices.from_matrix(devs, matrix, unit="bytes")
