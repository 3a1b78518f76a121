"""Orders from the graph's spectral embedding: ``slice_graph(..., method="spectral-order")``.

Sweeping a graph along its low Laplacian eigenvectors puts nodes that share tensors next to
each other (Hall's embedding; the same eigenvectors as spectral partitioning). Here each sweep
is a vector of node priorities, and Kahn's algorithm turns it into a topological order (a node
is placed once its predecessors are, the lowest priority first), which SliceGraph then cuts
optimally, as for every other order search. On graphs with a geometry (lattices with a few
long edges, random geometric graphs) these orders cut far fewer tensors than orders found by
searching priorities: on 1,000- and 2,000-node Watts-Strogatz and random geometric graphs, plans
7 to 18% cheaper than a 15 s BRKGA or arrangement search. On expander-like graphs (Erdos-Renyi,
Barabasi-Albert) every order cuts many tensors and they are no better than a search's.

The embedding: each connected part of the units (forced groups, folded leaves) on its own, with
the Laplacian of its tensors (each tensor's cost between its producer and each consumer); the
part's eigenvectors 2 to ``1 + dims`` (the first is constant) give each unit ``dims``
coordinates, scaled by ``1 / sqrt(eigenvalue)`` so that the smoother directions weigh more, each
eigenvector's sign fixed (its largest entry positive). The sweeps: seed 0 first takes each
coordinate axis both ways, then random directions from the seed; each further seed only random
directions. A sweep orders each part by its projection (rounded to 9 digits; ties by unit), the
parts one after another (by their first unit). ``decodes`` sweeps in all (default
:data:`SWEEPS`), each one decode of the core unless it repeats the ranking of one already cut; the
cheapest plan is kept (the first on ties), and a time limit stops the sweeps with the best so far.

Cost: one dense eigendecomposition per part (about 1 s at 2,000 units; it runs on a helper
thread, so Ctrl-C and the time limit stop the wait at once), estimated before it starts and
skipped when the time left is shorter; graphs of more than :data:`MAX_UNITS` units are refused.
The embedding is computed once per graph and reused by restarts. A graph whose parts have
repeated eigenvalues (symmetries) has no unique embedding: there the plan of a seed may differ
with the linear-algebra library or its thread count.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
from networkx.utils import UnionFind

from stagecut._deadline import DeadlineReached, expired, remaining
from stagecut.errors import InvalidArgumentError
from stagecut.mtpp.units import Units
from stagecut.validate import check_size

__all__ = ["DIMS", "MAX_UNITS", "SWEEPS", "check_units", "directions", "embedding", "priorities", "search"]

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


def _parts(units: Units) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(part of each unit, numbered by their first unit; producer, consumer and weight of each
    tensor edge between two units, the weights divided by the largest cost)``."""
    n = len(units.members)
    _, _, cost, prod, off, cons = units.arrays
    offsets = np.asarray(off, dtype=np.int64)
    counts = offsets[1:] - offsets[:-1]
    pu = np.repeat(np.asarray(prod, dtype=np.int64), counts)
    pv = np.asarray(cons, dtype=np.int64)[: len(pu)]
    c = np.asarray(cost, dtype=np.float64)
    top = float(c[np.isfinite(c)].max(initial=0.0))
    w = np.repeat(c / top if top > 0 else np.zeros_like(c), counts)
    keep = (pu != pv) & (w > 0) & np.isfinite(w)
    pu, pv, w = pu[keep], pv[keep], w[keep]
    sets = UnionFind(range(n))
    for u, v in zip(pu.tolist(), pv.tolist()):
        sets.union(u, v)
    number: dict[int, int] = {}  # (each part numbered by its first unit)
    part = np.asarray([number.setdefault(sets[x], len(number)) for x in range(n)], dtype=np.int64)
    return part, pu, pv, w


def _seconds(n: int) -> float:
    """A generous estimate of one dense eigendecomposition of ``n x n`` (0.4 s per 1,000 cubed,
    measured at 0.15 on one core)."""
    return 0.4 * (n / 1000) ** 3


def _eigh(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.linalg.eigh`` on a helper thread: the wait stops at once on Ctrl-C, or with
    :class:`DeadlineReached` when the time limit passes (the abandoned thread ends on its own)."""
    out: dict[str, Any] = {}

    def work() -> None:
        try:
            out["value"] = np.linalg.eigh(mat)
        except BaseException as exc:  # (re-raised on the calling thread)
            out["error"] = exc

    worker = threading.Thread(target=work, name="stagecut-eigh", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.05)
        if expired():
            raise DeadlineReached
    if "error" in out:
        raise out["error"]
    mu, z = out["value"]
    return mu, z


_CACHE: weakref.WeakKeyDictionary[Units, tuple[np.ndarray, np.ndarray]] = weakref.WeakKeyDictionary()


def embedding(units: Units, dims: int = DIMS) -> tuple[np.ndarray, np.ndarray]:
    """``(coordinates, part)``: each unit's ``dims`` coordinates (module docs; zeros in a part too
    small for them) and the part it belongs to. Raises
    :class:`~stagecut._deadline.DeadlineReached` when the time left is shorter than the
    decompositions' estimate, and :class:`~stagecut.errors.InvalidArgumentError` past
    :data:`MAX_UNITS` units."""
    check_units(units)
    if dims == DIMS and units in _CACHE:
        return _CACHE[units]
    n = len(units.members)
    part, pu, pv, w = _parts(units)
    sizes = np.bincount(part, minlength=int(part.max(initial=-1)) + 1)
    check_size("method='spectral-order' (the eigendecomposition of the largest connected part)",
               bytes_needed=3 * 8 * float(sizes.max(initial=0)) ** 2)
    left = remaining()
    if left is not None and left < sum(_seconds(int(m)) for m in sizes if m > 2):
        raise DeadlineReached
    coords = np.zeros((n, dims))
    local = np.zeros(n, dtype=np.int64)
    for j in range(len(sizes)):
        members = np.flatnonzero(part == j)
        local[members] = np.arange(len(members))
    for j, m in enumerate(sizes.tolist()):
        d = min(dims, m - 1)
        if d <= 0:
            continue
        members = np.flatnonzero(part == j)
        on = part[pu] == j
        lu, lv, lw = local[pu[on]], local[pv[on]], w[on]
        lap = np.zeros((m, m))
        np.add.at(lap, (lu, lv), -lw)
        np.add.at(lap, (lv, lu), -lw)
        np.add.at(lap, (lu, lu), lw)
        np.add.at(lap, (lv, lv), lw)
        try:
            mu, z = _eigh(lap)
        except np.linalg.LinAlgError:
            continue  # (no embedding for this part: its sweeps follow the unit order)
        mu, z = mu[1:d + 1], z[:, 1:d + 1]
        big = np.argmax(np.abs(z), axis=0)  # (the first of the largest entries)
        z = z * np.where(z[big, np.arange(d)] < 0, -1.0, 1.0)
        coords[members, :d] = z / np.sqrt(np.maximum(mu, 1e-9 * max(1.0, float(mu.max(initial=0.0)))))
    if dims == DIMS:
        _CACHE[units] = (coords, part)
    return coords, part


def directions(dims: int, seed: int) -> Iterator[np.ndarray]:
    """The sweeps' directions in the embedding (module docs): for seed 0 the axes both ways
    first, then random unit directions drawn from ``seed``, without end."""
    if seed == 0:
        for j in range(dims):
            for sign in (1.0, -1.0):
                axis = np.zeros(dims)
                axis[j] = sign
                yield axis
    rng = np.random.default_rng(seed)
    while True:
        d = rng.normal(size=dims)
        d /= max(float(np.linalg.norm(d)), 1e-300)
        yield d


def priorities(coords: np.ndarray, part: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """A sweep's unit priorities: the parts one after another, each ordered by its projection on
    ``direction`` (rounded to 9 digits, ties by unit); the values are the ranks ``0 .. n-1``."""
    n = len(part)
    proj = coords @ direction if coords.shape[1] else np.zeros(n)
    scale = float(np.abs(proj).max(initial=0.0))
    rounded = np.round(proj / scale, 9) if scale > 0 else proj
    rank = np.empty(n)
    rank[np.lexsort((np.arange(n), rounded, part))] = np.arange(n, dtype=np.float64)
    return rank


def search(units: Units, devices: int, seed: int, count: int, segment_costs: str) -> dict[str, Any]:
    """The cheapest of ``count`` sweeps, each cut by SliceGraph (``units.slice``'s answer, with
    ``decodes`` the rankings cut, ``history`` the best cost after each and ``note`` why there was
    none, or ``None``); cut short by the time limit, the best so far (``time_limit_reached``)."""
    best: dict[str, Any] | None = None
    history: list[float] = []
    done = rounds = 0
    stopped = False
    seen: set[bytes] = set()
    note = None
    try:
        try:
            coords, part = embedding(units)
        except DeadlineReached:
            note = "spectral-order: the time left was too short for its eigendecomposition"
            raise
        ways = directions(coords.shape[1], seed)
        for _ in range(count):
            if expired():
                stopped = True
                break
            prio = priorities(coords, part, next(ways))
            key = prio.tobytes()
            if key in seen:
                continue  # (a ranking already cut)
            seen.add(key)
            out = units.slice(devices, "order", priorities=prio, segment_costs=segment_costs)
            done += 1
            rounds += int(out["rounds"])
            if out["blocks"] and (best is None or float(out["objective"]) < float(best["objective"])):
                best = out
            history.append(math.inf if best is None else float(best["objective"]))
            if out["time_limit_reached"]:
                stopped = True
                break
    except DeadlineReached:
        stopped = True
    history = [h for h in history if math.isfinite(h)]
    if best is None:
        return {"objective": math.inf, "blocks": [], "order": [], "history": history, "decodes": done,
                "rounds": rounds, "time_limit_reached": stopped, "note": note}
    return {**best, "history": history, "decodes": done, "rounds": rounds, "time_limit_reached": stopped,
            "note": note}
