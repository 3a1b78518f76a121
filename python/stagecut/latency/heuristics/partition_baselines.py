"""The baselines of QuickP's setting: a Metis-style balanced cut and MCMC over placements.

Both place *units* (a node, or a whole colocation class: see
:class:`~stagecut.latency.heuristics.constructive.Units`) and score a placement by its makespan in the rank
round-robin order (:class:`~stagecut.latency.model._fast.Evaluator`, as QuickP evaluates its
baselines); the answer is re-scored by :func:`~stagecut.latency.model.evaluate.schedule_from`, with
the lower bound :meth:`LatencyProblem.lower_bound`.

:func:`metis`
    A balanced ``k``-way cut of the undirected unit graph, ``k`` the number of devices: a
    unit weighs its mean time over the devices that can run it, an edge the tensors crossing
    it (bytes, or the PCIe star's ``comm``). The cut comes from METIS when ``pymetis`` is
    importable (an optional dependency), else from recursive bisection: each bisection starts
    from the prefix of the units in topological order (each source just before its first
    consumer) that holds the part's share of the weight; networkx's Kernighan–Lin bisection
    improves it (swapping units, so keeping each side's unit *count*, not its weight); both
    are rebalanced by moving the units that cut least from the heavier side until the weights
    are within ``imbalance`` of their share, and Kernighan–Lin's is kept when it cuts less.
    Parts go by weight to devices by speed: the heaviest part to the fastest
    device, the next to the next (:func:`devices_by_speed`). A cut that puts a unit where it
    cannot run or a device over its memory is *repaired* (:func:`repair`): units leave the
    devices that cannot hold them, those least tied to their device's other units first, and
    go, largest first, to the device with room they exchange most data with (ties: where they
    run fastest); failing that, every unit is placed anew by first-fit decreasing memory.
:func:`mcmc`
    A Markov chain over placements with single-unit moves: a seeded random unit to a random
    other device it can run on and that has room, accepted only when the makespan becomes
    strictly shorter (so the answer is never worse than the start); a move refused since the
    last acceptance is not evaluated again, and the chain stops at a local optimum (every
    move refused). Budgeted by evaluations
    (``max_evaluations``, default :data:`~stagecut.latency.heuristics.search.DEFAULT_EVALUATIONS` without
    a time limit) and seconds (``time_limit``). It starts, by default, from everything on the
    best single device (else from the Metis cut, else from the best constructive heuristic).

>>> import stagecut as sc
>>> from stagecut.latency import Devices, LatencyProblem
>>> g = sc.Graph([sc.Node(v, {"gpu": t}, comm=1.0) for v, t in [("s", 1.0), ("a", 4.0), ("b", 4.0), ("t", 1.0)]],
...              [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")])
>>> p = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0), output_bytes="comm")
>>> s = metis(p, backend="kl")
>>> s.objective, s.placement, mcmc(p, seed=0, max_evaluations=50).objective
(7.0, {'s': 'gpu:0', 'a': 'gpu:0', 'b': 'gpu:1', 't': 'gpu:1'}, 7.0)
"""

from __future__ import annotations

import heapq
import importlib
import importlib.util
import time
import warnings
from typing import Any, Literal

import numpy as np

from stagecut.errors import InvalidArgumentError
from stagecut.latency.heuristics.constructive import Units, _check_problem, best_device, finished, no_answer
from stagecut.latency.heuristics.driver import Start, Walk, _State
from stagecut.latency.heuristics.search import DEFAULT_EVALUATIONS, _random_move, _roomy
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.validate import check_int, check_number, shown

__all__ = ["metis", "mcmc", "balanced_parts", "devices_by_speed", "repair", "unit_graph", "have_pymetis",
           "Backend"]

#: ``"auto"``: METIS when ``pymetis`` is importable, else ``"kl"``; ``"metis"``: METIS (an error
#: without ``pymetis``); ``"kl"``: recursive Kernighan–Lin bisection (networkx).
Backend = Literal["auto", "metis", "kl"]

#: Integer scale of METIS's weights (the largest weight becomes this).
_METIS_SCALE = 1_000_000


def have_pymetis() -> bool:
    """Is ``pymetis`` importable?

    Returns
    -------
    bool
    """
    return importlib.util.find_spec("pymetis") is not None


def unit_graph(problem: LatencyProblem, units: Units | None = None) -> tuple[np.ndarray, dict[tuple[int, int], float]]:
    """The weighted undirected graph :func:`metis` cuts.

    Parameters
    ----------
    problem : LatencyProblem
    units : Units, optional
        The placement units (default: ``Units(problem)``).

    Returns
    -------
    (numpy.ndarray, dict)
        Each unit's weight (the mean of its time over the devices that can run all its nodes),
        and ``{(a, b): bytes}`` for units ``a < b`` that exchange data: each node's output
        counted once per other unit that reads it.

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`.
    """
    problem = _check_problem(problem)
    units = units or Units(problem)
    t = units.times
    run = np.isfinite(t)
    weight = np.where(run, t, 0.0).sum(axis=1) / np.maximum(run.sum(axis=1), 1)
    edges: dict[tuple[int, int], float] = {}
    of = units.unit_of
    for i in range(len(problem)):
        a = int(of[i])
        for b in {int(of[s]) for s in problem.succ[i]} - {a}:
            key = (a, b) if a < b else (b, a)
            edges[key] = edges.get(key, 0.0) + float(problem.size[i])
    return weight, edges


def devices_by_speed(problem: LatencyProblem) -> list[int]:
    """Device positions, fastest first: by the median, over the nodes a device can run that take
    time, of the node's time there over its fastest time (ties: the lower position).

    Parameters
    ----------
    problem : LatencyProblem

    Returns
    -------
    list of int

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`.
    """
    t = _check_problem(problem).times
    fastest = t.min(axis=1)
    score = []
    for d in range(problem.num_devices):
        ok = np.isfinite(t[:, d]) & (fastest > 0)
        score.append(float(np.median(t[ok, d] / fastest[ok])) if ok.any() else 1.0)
    return sorted(range(problem.num_devices), key=lambda d: (score[d], d))


# ----------------------------------------------------------------------------- the cut
def _csr(m: int, edges: dict[tuple[int, int], float]) -> tuple[list[int], list[int], list[int]]:
    nbrs: list[list[tuple[int, float]]] = [[] for _ in range(m)]
    for (a, b), w in edges.items():
        nbrs[a].append((b, w))
        nbrs[b].append((a, w))
    top = max(edges.values(), default=0.0)
    xadj, adj, ew = [0], [], []
    for row in nbrs:
        for b, w in sorted(row):
            adj.append(b)
            ew.append(max(1, round(w / top * _METIS_SCALE)) if top > 0 else 1)
        xadj.append(len(adj))
    return xadj, adj, ew


def _metis_parts(weight: np.ndarray, edges: dict[tuple[int, int], float], k: int, seed: int,
                 imbalance: float) -> np.ndarray:
    pymetis = importlib.import_module("pymetis")
    xadj, adj, ew = _csr(len(weight), edges)
    top = float(weight.max()) if weight.size else 0.0
    vw = [max(1, round(w / top * _METIS_SCALE)) if top > 0 else 1 for w in weight.tolist()]
    options = pymetis.Options(seed=seed, ufactor=max(1, round(imbalance * 1000)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        graph: Any = pymetis.CSRAdjacency(xadj, adj) if hasattr(pymetis, "CSRAdjacency") else None
        if graph is not None:
            out = pymetis.part_graph(k, graph, vweights=vw, eweights=ew, options=options)
        else:
            out = pymetis.part_graph(k, xadj=xadj, adjncy=adj, vweights=vw, eweights=ew, options=options)
    return np.asarray(out[1], dtype=np.int64)


class _Bisection:
    """Recursive bisection (see the module docs): each split starts from a prefix of the units
    in topological order, and Kernighan–Lin's improvement of it is kept when, once both are
    rebalanced, it cuts less."""

    def __init__(self, weight: np.ndarray, nbrs: list[dict[int, float]], imbalance: float, seed: int) -> None:
        self.weight, self.nbrs, self.imbalance, self.seed = weight, nbrs, imbalance, seed

    def split(self, members: list[int], k: int) -> list[list[int]]:
        """``members`` (in topological order) into ``k`` parts, recursively."""
        if k == 1:
            return [members]
        if len(members) <= 1:
            return [members] + [[] for _ in range(k - 1)]
        k1 = k // 2
        total = float(self.weight[members].sum())
        target = total * k1 / k
        w = self.weight[members]
        mid = np.cumsum(w) - w / 2   # the prefix nearest the target share
        cut = int(np.searchsorted(mid, target, side="right"))
        cut = min(max(cut, 1), len(members) - 1)
        first = set(members[:cut])
        plain = {u: u in first for u in members}
        side = self._kl(members, first)
        for x in (plain, side):
            self._rebalance(members, x, target, total / k * self.imbalance)
        if self._cut(members, plain) <= self._cut(members, side):
            side = plain
        a = [u for u in members if side[u]]
        b = [u for u in members if not side[u]]
        return self.split(a, k1) + self.split(b, k - k1)

    def _cut(self, members: list[int], side: dict[int, bool]) -> float:
        return sum(c for u in members if side[u] for v, c in self.nbrs[u].items() if v in side and not side[v])

    def _kl(self, members: list[int], first: set[int]) -> dict[int, bool]:
        import networkx as nx
        from networkx.algorithms.community import kernighan_lin_bisection

        g = nx.Graph()
        g.add_nodes_from(members)
        inside = set(members)
        g.add_weighted_edges_from((u, v, w) for u in members for v, w in self.nbrs[u].items()
                                  if v in inside and u < v)
        rest = [u for u in members if u not in first]
        a, _ = kernighan_lin_bisection(g, partition=(first, set(rest)), weight="weight", seed=self.seed)
        return {u: u in a for u in members}

    def _rebalance(self, members: list[int], side: dict[int, bool], target: float, tol: float) -> None:
        """Move units from the heavier side while that brings side A nearer ``target``: the one
        whose move cuts least (ties: the lower unit). One heap of candidates per side, entries
        refreshed when a neighbour moves; a unit too heavy to move never becomes movable, as the
        excess only shrinks."""
        w = self.weight
        excess = float(sum(w[u] for u in members if side[u])) - target   # > 0: A too heavy
        inside = set(members)
        gain = {u: sum((1.0 if side[v] != side[u] else -1.0) * c for v, c in self.nbrs[u].items() if v in inside)
                for u in members}
        heaps: dict[bool, list[tuple[float, int]]] = {True: [], False: []}
        for u in members:
            if w[u] > 0:
                heaps[side[u]].append((-gain[u], u))
        for h in heaps.values():
            heapq.heapify(h)
        while abs(excess) > tol:
            heavy = excess > 0
            h = heaps[heavy]
            u = -1
            while h:
                g, x = heapq.heappop(h)
                if side[x] == heavy and -g == gain[x] and w[x] < 2 * abs(excess):
                    u = x
                    break
            if u < 0:
                return
            side[u] = not heavy
            excess += -w[u] if heavy else w[u]
            gain[u] = -gain[u]
            heapq.heappush(heaps[side[u]], (-gain[u], u))
            for v, c in self.nbrs[u].items():
                if v in inside:
                    gain[v] += 2 * c if side[v] != side[u] else -2 * c
                    if w[v] > 0:
                        heapq.heappush(heaps[side[v]], (-gain[v], v))


def _topological_units(problem: LatencyProblem, units: Units) -> list[int]:
    """The units in a topological order of the nodes where each source (a weight, an input)
    comes just before its first consumer, a unit at its first node: the bisections' start."""
    pos = np.empty(len(problem), dtype=float)
    pos[problem.order] = np.arange(len(problem), dtype=float)
    key = pos.copy()
    for i in range(len(problem)):
        if not problem.pred[i] and problem.succ[i]:
            key[i] = min(pos[s] for s in problem.succ[i]) - 0.5
    first = np.full(len(units), np.inf)
    np.minimum.at(first, units.unit_of, key)
    return sorted(range(len(units)), key=lambda u: (first[u], u))


def balanced_parts(problem: LatencyProblem, parts: int | None = None, *, units: Units | None = None,
                   seed: int = 0, backend: Backend = "auto", imbalance: float = 0.05) -> np.ndarray:
    """A balanced cut of the units into ``parts`` parts (see the module docs).

    Parameters
    ----------
    problem : LatencyProblem
    parts : int, optional
        Default: the number of devices.
    units : Units, optional
        Default: ``Units(problem)``.
    seed : int
        METIS's seed (the Kernighan–Lin path is deterministic).
    backend : {"auto", "metis", "kl"}
        See :data:`Backend`.
    imbalance : float
        Allowed excess of a part over its share of the weight, as a fraction of the share.

    Returns
    -------
    numpy.ndarray
        The part (0 .. ``parts - 1``) of each unit; parts by decreasing weight (part 0 the
        heaviest; ties: the lower first unit).

    Raises
    ------
    InvalidArgumentError
        A bad problem, part count, seed, backend or imbalance; ``backend="metis"`` without
        ``pymetis``.
    """
    problem = _check_problem(problem)
    k = check_int(parts if parts is not None else problem.num_devices, "parts", minimum=1)
    seed = check_int(seed, "seed")
    imb = check_number(imbalance, "imbalance", error=InvalidArgumentError)
    if backend not in ("auto", "metis", "kl"):
        raise InvalidArgumentError(f"backend: expected 'auto', 'metis' or 'kl', got {shown(backend)}")
    if backend == "metis" and not have_pymetis():
        raise InvalidArgumentError("backend: 'metis' needs pymetis (pip install pymetis), or use 'kl'")
    units = units or Units(problem)
    weight, edges = unit_graph(problem, units)
    m = len(units)
    if k == 1 or m <= 1:
        raw = np.zeros(m, dtype=np.int64)
    elif backend == "metis" or (backend == "auto" and have_pymetis()):
        raw = _metis_parts(weight, edges, k, seed, imb)
    else:
        nbrs: list[dict[int, float]] = [{} for _ in range(m)]
        for (a, b), w in edges.items():
            nbrs[a][b] = nbrs[b][a] = w
        raw = np.zeros(m, dtype=np.int64)
        for p, members in enumerate(_Bisection(weight, nbrs, imb, seed).split(_topological_units(problem, units), k)):
            raw[members] = p
    load = np.bincount(raw, weights=weight, minlength=k)
    first = [int(np.flatnonzero(raw == p)[0]) if (raw == p).any() else m for p in range(k)]
    rank = sorted(range(k), key=lambda p: (-load[p], first[p]))
    relabel = np.empty(k, dtype=np.int64)
    relabel[rank] = np.arange(k)
    out: np.ndarray = relabel[raw]
    return out


# ----------------------------------------------------------------------------- repair
def repair(problem: LatencyProblem, udev: np.ndarray, *, units: Units | None = None) -> tuple[np.ndarray, int] | None:
    """A placement of the units that every device can run and hold, changed as little as the
    rules of the module docs make it.

    Parameters
    ----------
    problem : LatencyProblem
    udev : numpy.ndarray
        Device position of each unit.
    units : Units, optional
        Default: ``Units(problem)``.

    Returns
    -------
    (numpy.ndarray, int) or None
        The repaired device of each unit and how many units moved; ``None`` when nothing was
        found that fits.

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`, or ``udev`` has the wrong length.
    """
    problem = _check_problem(problem)
    units = units or Units(problem)
    cur = np.array(udev, dtype=np.int64)
    if cur.shape != (len(units),):
        raise InvalidArgumentError(f"udev: expected {len(units)} device positions, got shape {cur.shape}")
    _, edges = unit_graph(problem, units)
    nbrs: list[dict[int, float]] = [{} for _ in range(len(units))]
    for (a, b), w in edges.items():
        nbrs[a][b] = nbrs[b][a] = w
    cap, mem = problem.capacity, units.memory
    out = [u for u in range(len(units)) if cur[u] not in units.allowed[u]]
    for u in out:
        cur[u] = -1
    loads = np.bincount(cur[cur >= 0], weights=mem[cur >= 0], minlength=problem.num_devices)
    for d in np.flatnonzero(loads > cap).tolist():
        here = [u for u in range(len(units)) if cur[u] == d and mem[u] > 0]

        def tie(u: int, d: int = d) -> float:
            return sum(w for v, w in nbrs[u].items() if cur[v] == d) / float(mem[u])

        for u in sorted(here, key=lambda u: (tie(u), -mem[u], u)):
            if loads[d] <= cap[d]:
                break
            cur[u] = -1
            loads[d] -= mem[u]
            out.append(u)
    for u in sorted(out, key=lambda u: (-mem[u], u)):
        ok = [int(d) for d in units.allowed[u] if loads[d] + mem[u] <= cap[d]]
        if not ok:
            return _first_fit(units)
        d = max(ok, key=lambda d: (sum(w for v, w in nbrs[u].items() if cur[v] == d), -units.times[u, d], -d))
        cur[u] = d
        loads[d] += mem[u]
    return cur, len(out)


def _first_fit(units: Units) -> tuple[np.ndarray, int] | None:
    """Every unit anew, largest first, on its fastest device with room."""
    problem = units.problem
    free = problem.capacity.copy()
    cur = np.full(len(units), -1, dtype=np.int64)
    for u in sorted(range(len(units)), key=lambda u: (-units.memory[u], u)):
        ok = [int(d) for d in units.allowed[u] if units.memory[u] <= free[d]]
        if not ok:
            return None
        d = min(ok, key=lambda d: (units.times[u, d], d))
        cur[u] = d
        free[d] -= units.memory[u]
    return cur, len(units)


# ----------------------------------------------------------------------------- the methods
def metis(problem: LatencyProblem, *, seed: int = 0, backend: Backend = "auto", imbalance: float = 0.05) -> Schedule:
    """The Metis-style balanced cut (see the module docs), heavier parts on faster devices,
    repaired when it breaks a limit, in rank round-robin order.

    Parameters
    ----------
    problem : LatencyProblem
    seed : int
        METIS's seed (the Kernighan–Lin path is deterministic).
    backend : {"auto", "metis", "kl"}
        See :data:`Backend`.
    imbalance : float
        See :func:`balanced_parts`.

    Returns
    -------
    Schedule
        Method ``"metis"``, status ``"feasible"``; ``stats``: ``cut`` (bytes crossing parts),
        ``imbalance`` (heaviest part over the mean part weight), ``repaired`` (units moved by
        the repair); a note names the backend. No schedule (status ``"unknown"``, or ``"infeasible"`` when
        proven) when nothing fits.

    Raises
    ------
    InvalidArgumentError
        See :func:`balanced_parts`.
    """
    t0 = time.perf_counter()
    units = Units(_check_problem(problem))
    used = "metis" if backend == "metis" or (backend == "auto" and have_pymetis()) else "kl"
    part = balanced_parts(problem, units=units, seed=seed, backend=backend, imbalance=imbalance)
    weight, edges = unit_graph(problem, units)
    k = problem.num_devices
    load = np.bincount(part, weights=weight, minlength=k)
    cut = sum(w for (a, b), w in edges.items() if part[a] != part[b])
    speed = np.array(devices_by_speed(problem), dtype=np.int64)
    fixed = repair(problem, speed[part], units=units)
    if fixed is None:
        return no_answer(problem, units, "metis", "the cut breaks a memory limit and no repair fits", t0, seed)
    udev, moved = fixed
    mean = float(load.sum()) / k
    stats = {"cut": float(cut), "imbalance": float(load.max()) / mean if mean > 0 else 1.0, "repaired": moved}
    notes: tuple[str, ...] = ("cut by METIS (pymetis)" if used == "metis" else
                              "cut by recursive Kernighan–Lin bisection (networkx)",)
    if moved:
        notes += (f"repair: {moved} units moved (a device could not run or hold its part)",)
    return finished(problem, units.placement(udev), None, method="metis", t0=t0, seed=seed, stats=stats, notes=notes)


def _default_start(problem: LatencyProblem) -> Schedule | None:
    for make in (best_device, metis):
        s = make(problem)
        if s.objective is not None:
            return s
    return None


def mcmc(problem: LatencyProblem, *, start: Start = None, seed: int = 0, time_limit: float | None = None,
         max_evaluations: int | None = None) -> Schedule:
    """MCMC over placements with single-unit moves, accepted when strictly better (see the
    module docs).

    Parameters
    ----------
    problem : LatencyProblem
    start : Schedule, sequence of int or None
        The start placement (default: the best single device, else :func:`metis`, else the
        best constructive heuristic).
    seed : int
        Seed of the moves.
    time_limit : float, optional
        Seconds (``None``: none).
    max_evaluations : int, optional
        Makespan evaluations (default :data:`~stagecut.latency.heuristics.search.DEFAULT_EVALUATIONS` when
        there is no time limit).

    Returns
    -------
    Schedule
        Method ``"mcmc"``, status ``"feasible"`` or ``"time_limit"``; never worse than the start
        (in rank round-robin order, or in its own order when that is shorter); ``stats``:
        ``evaluations``, ``accepted``, ``local_optimum`` (1 when it stopped there). No schedule
        (status ``"infeasible"``/``"unknown"``) when nothing fits and no start is given.

    Raises
    ------
    InvalidArgumentError
        A bad seed, time limit or budget; a start that is not a placement of this problem,
        splits a colocation class or breaks a memory limit.
    """
    w = Walk(problem, start, "mcmc", seed, time_limit, max_evaluations, DEFAULT_EVALUATIONS,
             default_start=_default_start)
    if w.failed is not None:
        return w.failed
    state = w.state
    w.begin()
    accepted = 0
    tried: set[tuple[int, int]] = set()   # moves refused since the last acceptance
    moves = _count_moves(state, w.loads, w.cur)
    while w.going():
        if len(tried) >= moves:
            break   # a local optimum: no single move can be accepted any more
        move = _random_move(state, w.loads, w.cur, w.rng)
        if move is None:
            continue
        u, old, d = move
        if (u, d) in tried:
            continue
        f = w.try_move(u, d)
        if f < w.cur_f:
            accepted += 1
            w.keep(u, old, d, f)
            tried.clear()
            moves = _count_moves(state, w.loads, w.cur)
        else:
            w.undo(u, old)
            tried.add((u, d))
    return w.result({"accepted": accepted, "local_optimum": int(len(tried) >= moves)}, current=True)


def _count_moves(state: _State, loads: np.ndarray, cur: np.ndarray) -> int:
    """How many single-unit moves keep every device within its memory."""
    return sum(len(_roomy(state, loads, u, int(cur[u]))) for u in state.movable)

