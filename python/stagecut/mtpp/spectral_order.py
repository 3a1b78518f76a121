"""Orders from the graph's spectral embedding: ``slice_graph(..., method="spectral-order")``.

Sweeping a graph along its low Laplacian eigenvectors puts nodes that share tensors next to
each other (Hall's embedding; the same eigenvectors as spectral partitioning). Here each sweep
is a vector of node priorities, and Kahn's algorithm turns it into a topological order (a node
is placed once its predecessors are, the lowest priority first), which SliceGraph then cuts
optimally, as for every other order search. On graphs with a geometry (lattices with a few
long edges, random geometric graphs, and operator graphs, whose tensors mostly join nearby
operators) these orders cut far fewer tensors than orders found by searching priorities at
random: on 1,000- and 2,000-node Watts-Strogatz and random geometric graphs, plans 7 to 18%
cheaper than a 15 s BRKGA or arrangement search. On expander-like graphs (Erdos-Renyi,
Barabasi-Albert) every order cuts many tensors and they are no better than a search's.

The embedding: the Laplacian of the units (forced groups, folded leaves), each tensor adding
its cost to the weight between its producer and each consumer; its eigenvectors 2 to
``1 + dims`` (the first is constant on each connected part) give each unit ``dims``
coordinates, scaled by ``1 / sqrt(eigenvalue)`` so that the smoother directions weigh more.
The sweeps: seed 0 first takes each coordinate axis both ways, then random directions from
the seed; each further seed only random directions. ``decodes`` sweeps in all (default
:data:`SWEEPS`), each one decode of the core; the cheapest plan is kept (the first on ties).
One dense eigendecomposition of the unit count squared (about 1 s at 2,000 units), checked
against the time limit before it starts; more than :data:`MAX_UNITS` units are refused.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from stagecut._deadline import DeadlineReached, remaining
from stagecut.errors import InvalidArgumentError
from stagecut.mtpp.units import Units

__all__ = ["DIMS", "MAX_UNITS", "SWEEPS", "check_units", "embedding", "search", "sweeps"]

#: Coordinates of the embedding (eigenvectors 2 to ``1 + DIMS``).
DIMS = 4
#: Sweeps (decodes) per run when ``decodes`` is not given.
SWEEPS = 48
#: Most units the embedding takes (a dense eigendecomposition: seconds at this size).
MAX_UNITS = 3000


def check_units(units: Units) -> None:
    """Refuse a graph with more than :data:`MAX_UNITS` units (before any allocation)."""
    n = len(units.members)
    if n > MAX_UNITS:
        raise InvalidArgumentError(
            f"method='spectral-order' takes at most {MAX_UNITS} units (forced groups after folding leaves); "
            f"this graph has {n}: use method='mla-weighted' or 'brkga'")


def _laplacian(units: Units) -> np.ndarray:
    """The units' Laplacian, each tensor's cost between its producer and each consumer."""
    n = len(units.members)
    _, _, cost, prod, off, cons = units.arrays
    lap = np.zeros((n, n))
    for t in range(len(prod)):
        c = float(cost[t])
        if not c > 0 or not math.isfinite(c):
            continue
        u = int(prod[t])
        for v in cons[off[t]:off[t + 1]]:
            v = int(v)
            if v != u:
                lap[u, v] -= c
                lap[v, u] -= c
                lap[u, u] += c
                lap[v, v] += c
    return lap


def _seconds(n: int) -> float:
    """A generous estimate of one dense eigendecomposition of ``n x n`` (0.4 s per 1,000 cubed,
    measured at 0.15 on one core)."""
    return 0.4 * (n / 1000) ** 3


def embedding(units: Units, dims: int = DIMS) -> np.ndarray:
    """Each unit's ``dims`` coordinates (module docs); fewer columns on a graph with fewer
    units. Raises :class:`~stagecut._deadline.DeadlineReached` when the time left is shorter
    than the decomposition's estimate."""
    n = len(units.members)
    dims = max(0, min(dims, n - 1))
    if dims == 0:
        return np.zeros((n, 0))
    left = remaining()
    if left is not None and left < _seconds(n):
        raise DeadlineReached
    lap = _laplacian(units)
    scale = float(np.abs(lap).max())
    if scale > 0:
        lap /= scale
    mu, z = np.linalg.eigh(lap)
    mu, z = mu[1:dims + 1], z[:, 1:dims + 1]
    coords: np.ndarray = z / np.sqrt(np.maximum(mu, 1e-9 * max(1.0, float(mu.max(initial=0.0)))))
    return coords


def sweeps(coords: np.ndarray, seed: int, count: int) -> list[np.ndarray]:
    """``count`` priority vectors (module docs): for seed 0 the axes both ways first, then
    random unit directions drawn from ``seed``."""
    n, dims = coords.shape
    if dims == 0:
        return [np.zeros(n)][:count]
    out: list[np.ndarray] = []
    if seed == 0:
        for j in range(dims):
            out += [coords[:, j], -coords[:, j]]
    rng = np.random.default_rng(seed)
    while len(out) < count:
        d = rng.normal(size=dims)
        d /= max(float(np.linalg.norm(d)), 1e-300)
        out.append(coords @ d)
    return out[:count]


def search(units: Units, devices: int, seed: int, count: int, segment_costs: str) -> dict[str, Any]:
    """The cheapest of ``count`` sweeps, each cut by SliceGraph (``units.slice``'s answer, with
    ``decodes`` the sweeps done and ``history`` the best cost after each); cut short by the time
    limit, the best so far (``time_limit_reached``)."""
    best: dict[str, Any] | None = None
    history: list[float] = []
    done = 0
    stopped = False
    t0 = time.perf_counter()
    try:
        coords = embedding(units)
        for prio in sweeps(coords, seed, count):
            out = units.slice(devices, "order", priorities=np.ascontiguousarray(prio, dtype=np.float64),
                              segment_costs=segment_costs)
            done += 1
            if out["time_limit_reached"]:
                stopped = True
            if out["blocks"] and (best is None or float(out["objective"]) < float(best["objective"])):
                best = out
            if best is not None:
                history.append(float(best["objective"]))
            if stopped:
                break
    except DeadlineReached:
        stopped = True
    if best is None:
        return {"objective": math.inf, "blocks": [], "order": [], "history": history, "decodes": done,
                "rounds": 0, "time_limit_reached": stopped, "seconds": time.perf_counter() - t0}
    return {**best, "history": history, "decodes": done, "time_limit_reached": stopped}
