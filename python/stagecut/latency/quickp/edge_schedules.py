"""Pieces of QuickP (:mod:`stagecut.latency.quickp`) below its IP and its pipeline: the IP's
result, the units (colocation groups) a placement moves, schedules from placements (edge ASAP
times, list scheduling, the polish of a start), the IP's symmetry classes, and the tensors and
placements carried between a graph and its fused graph."""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from stagecut._deadline import expired, remaining
from stagecut.errors import InvalidArgumentError
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.quickp.fusion import Fusion
from stagecut.results import Stat
from stagecut.validate import shown

__all__ = ["IPResult", "Order", "POLISH_SHARE", "edge_asap", "fused_edge_sizes", "list_order"]


#: ``"free"``: any order the DAG allows (disjunctive pairs); ``"topological"``: each device's
#: nodes in the problem's topological order.
Order = Literal["free", "topological"]


@dataclass(frozen=True)
class IPResult:
    """What :func:`~stagecut.latency.quickp.ip.solve_ip` found: ``dev`` (device position per node
    position), ``order`` (per device, its node positions), ``makespan`` (re-scored by :func:`edge_asap`; ``None`` when
    nothing was found), ``bound`` (proven lower bound of this IP), ``status`` (``"optimal"``,
    ``"feasible"``, ``"time_limit"``, ``"infeasible"``) and ``stats``."""

    dev: list[int] | None
    order: list[list[int]] | None
    makespan: float | None
    bound: float | None
    status: Literal["optimal", "feasible", "time_limit", "infeasible", "unknown"]
    stats: dict[str, Stat] = field(default_factory=dict)


def _edge_sizes(problem: LatencyProblem, edge_size: Mapping[tuple[Hashable, Hashable], float] | None
                ) -> dict[tuple[int, int], float]:
    sizes = {(u, v): float(problem.size[u]) for u in range(len(problem)) for v in problem.succ[u]}
    if edge_size is None:
        return sizes
    if not isinstance(edge_size, Mapping):
        raise InvalidArgumentError(f"edge_size: expected a mapping of (source, target) to a size, "
                                   f"got {shown(edge_size)}")
    out = dict.fromkeys(sizes, 0.0)
    for e, s in edge_size.items():
        try:
            key = (problem.index[e[0]], problem.index[e[1]])
        except (KeyError, TypeError, IndexError):
            raise InvalidArgumentError(f"edge_size: {shown(e)} is not an edge of the graph") from None
        if key not in out:
            raise InvalidArgumentError(f"edge_size: {shown(e)} is not an edge of the graph")
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not 0 <= s < math.inf:
            raise InvalidArgumentError(f"edge_size of {shown(e)}: expected a finite size >= 0, got {shown(s)}")
        out[key] = float(s)
    return out


def edge_asap(problem: LatencyProblem, w: Mapping[tuple[int, int], float], dev: Sequence[int],
              order: Sequence[Sequence[int]]) -> tuple[list[float], list[float]]:
    """ASAP start and finish times when the edge ``(u, v)`` carries ``w[u, v]`` (transfer
    ``w / bandwidth`` across devices): the model of :mod:`~stagecut.latency.model.evaluate` with a size per
    edge instead of per producer. ``order``: per device its nodes (ignored on parallel devices).

    Raises
    ------
    InvalidArgumentError
        An order that contradicts the DAG.
    """
    n = len(problem)
    prev = [-1] * n
    for d, seq in enumerate(order):
        if not problem.parallel[d]:
            for a, b in zip(seq, seq[1:]):
                prev[b] = a
    nxt = [-1] * n
    for v, u in enumerate(prev):
        if u >= 0:
            nxt[u] = v
    indeg = [len(problem.pred[v]) + (prev[v] >= 0) for v in range(n)]
    ready = [v for v in range(n) if not indeg[v]]
    start, finish = [0.0] * n, [0.0] * n
    bw = problem.bandwidth
    count = 0
    while ready:
        v = ready.pop()
        count += 1
        b = dev[v]
        s = finish[prev[v]] if prev[v] >= 0 else 0.0
        for u in problem.pred[v]:
            a = dev[u]
            s = max(s, finish[u] + (w[u, v] / float(bw[a, b]) if a != b and w[u, v] else 0.0))
        start[v], finish[v] = s, s + float(problem.times[v, b])
        for x in (*problem.succ[v], nxt[v]):
            if x >= 0:
                indeg[x] -= 1
                if not indeg[x]:
                    ready.append(x)
    if count < n:
        raise InvalidArgumentError("order: it contradicts the graph's edges")
    return start, finish


class _Units:
    """Nodes grouped into units (a co-location group, or a node alone), with their devices."""

    def __init__(self, problem: LatencyProblem, groups: Iterable[Iterable[Hashable]] | None) -> None:
        n = len(problem)
        self.of = list(range(n))
        self.members: list[list[int]] = [[v] for v in range(n)]
        rank = [0] * n
        for k, v in enumerate(problem.order):
            rank[v] = k
        self.rank = rank
        for g, grp in enumerate(groups or ()):
            if isinstance(grp, (str, bytes)) or not isinstance(grp, Iterable):
                raise InvalidArgumentError(f"groups[{g}]: expected a collection of node ids, got {shown(grp)}")
            pos = []
            for node in grp:
                if node not in problem.index:
                    raise InvalidArgumentError(f"groups[{g}]: unknown node {shown(node)}")
                pos.append(self.of[problem.index[node]])
            root = min(pos, default=None)
            for k in set(pos) - {root}:
                assert root is not None
                for v in self.members[k]:
                    self.of[v] = root
                self.members[root] += self.members[k]
                self.members[k] = []
        keys = sorted({self.of[v] for v in range(n)}, key=lambda k: min(rank[v] for v in self.members[k]))
        renum = {k: i for i, k in enumerate(keys)}
        self.members = [sorted(self.members[k], key=rank.__getitem__) for k in keys]
        self.of = [renum[self.of[v]] for v in range(n)]

    def allowed(self, problem: LatencyProblem, upper: float) -> list[list[int]]:
        out = []
        for m in self.members:
            t = problem.times[m].sum(axis=0)
            mem = float(problem.memory[m].sum())
            out.append([d for d in range(problem.num_devices)
                        if math.isfinite(t[d]) and t[d] <= upper and mem <= problem.capacity[d]])
        return out


def _heuristic(problem: LatencyProblem, units: _Units, w: Mapping[tuple[int, int], float]
               ) -> tuple[list[int], list[list[int]], float] | None:
    """The better of the best single device and a list schedule in topological order (each unit
    placed with its first node, where that node finishes first); both are valid in every variant."""
    nd, n = problem.num_devices, len(problem)
    best: tuple[list[int], list[list[int]], float] | None = None
    allowed = units.allowed(problem, math.inf)
    for d in range(nd):
        if all(d in a for a in allowed) and problem.memory.sum() <= problem.capacity[d]:
            dev = [d] * n
            order = [list(problem.order) if e == d else [] for e in range(nd)]
            ms = max(edge_asap(problem, w, dev, order)[1])
            if best is None or ms < best[2]:
                best = (dev, order, ms)
    placed: dict[int, int] = {}
    used = np.zeros(nd)
    free = [0.0] * nd
    finish = [0.0] * n
    dev = [-1] * n
    order = [[] for _ in range(nd)]
    bw = problem.bandwidth
    for v in problem.order:
        k = units.of[v]
        if k in placed:
            cands = [placed[k]]
        else:
            mem = float(problem.memory[units.members[k]].sum())
            cands = [d for d in allowed[k] if used[d] + mem <= problem.capacity[d]]
            if not cands:
                return best
        done = []
        for d in cands:
            s = 0.0 if problem.parallel[d] else free[d]
            for u in problem.pred[v]:
                s = max(s, finish[u] + (w[u, v] / bw[dev[u], d] if dev[u] != d and w[u, v] else 0.0))
            done.append((s + float(problem.times[v, d]), d))
        f, d = min(done)
        if k not in placed:
            placed[k] = d
            used[d] += float(problem.memory[units.members[k]].sum())
        dev[v], finish[v] = d, f
        free[d] = max(free[d], f)
        order[d].append(v)
    ms = max(edge_asap(problem, w, dev, order)[1])
    return (dev, order, ms) if best is None or ms < best[2] else best


def list_order(problem: LatencyProblem, w: Mapping[tuple[int, int], float], dev: Sequence[int],
               chains: Sequence[Sequence[int]] = ()) -> list[list[int]]:
    """Per device an order for a fixed placement: a list schedule that takes, among the nodes
    whose inputs are done, the one whose inputs arrive first (ties: topological rank), each
    after the previous one of its device. ``chains``: node positions that must run in the given
    order (a co-location group's members) even when the DAG does not order them."""
    n = len(problem)
    rank = [0] * n
    for k, v in enumerate(problem.order):
        rank[v] = k
    after = [-1] * n
    indeg = [len(problem.pred[v]) for v in range(n)]
    for c in chains:
        for a, b in zip(c, c[1:]):
            after[a] = b
            indeg[b] += 1
    bw = problem.bandwidth
    arrive = [0.0] * n
    finish = [0.0] * n
    free = [0.0] * problem.num_devices
    heap = [(0.0, rank[v], v) for v in range(n) if not indeg[v]]
    heapq.heapify(heap)
    out: list[list[int]] = [[] for _ in range(problem.num_devices)]
    while heap:
        _, _, v = heapq.heappop(heap)
        d = dev[v]
        s = arrive[v] if problem.parallel[d] else max(arrive[v], free[d])
        finish[v] = s + float(problem.times[v, d])
        free[d] = max(free[d], finish[v])
        out[d].append(v)
        for x in problem.succ[v]:
            size = w[v, x]
            arrive[x] = max(arrive[x], finish[v] + (size / float(bw[d, dev[x]]) if size and dev[x] != d else 0.0))
            indeg[x] -= 1
            if not indeg[x]:
                heapq.heappush(heap, (arrive[x], rank[x], x))
        x = after[v]
        if x >= 0:
            arrive[x] = max(arrive[x], finish[v])
            indeg[x] -= 1
            if not indeg[x]:
                heapq.heappush(heap, (arrive[x], rank[x], x))
    return out


def _from_placement(problem: LatencyProblem, units: _Units, w: Mapping[tuple[int, int], float],
                    placed: Sequence[int], where: str) -> tuple[list[int], list[list[int]], float] | None:
    """A warm start as ``(dev, order, makespan)``: each unit where most of its members' time
    runs in ``placed`` (ties: most members, then the lower device), list-scheduled; ``None``
    when that breaks a device's memory or puts a unit where it cannot run."""
    n, nd = len(problem), problem.num_devices
    if isinstance(placed, (str, bytes)) or not isinstance(placed, (Sequence, np.ndarray)) or len(placed) != n:
        raise InvalidArgumentError(f"{where}: expected a device position per node ({n}), got {shown(placed)}")
    for v, d in enumerate(placed):
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 0 <= d < nd:
            raise InvalidArgumentError(f"{where}[{v}]: expected a device position (0..{nd - 1}), got {shown(d)}")
    times = np.where(np.isfinite(problem.times), problem.times, 0.0)
    allowed = units.allowed(problem, math.inf)
    dev = [0] * n
    used = np.zeros(nd)
    for k, mm in enumerate(units.members):
        score: dict[int, tuple[float, int]] = {}
        for v in mm:
            d = int(placed[v])
            t, c = score.get(d, (0.0, 0))
            score[d] = (t + float(times[v, d]), c + 1)
        d = min(score, key=lambda d: (-score[d][0], -score[d][1], d))
        if d not in allowed[k]:
            return None
        used[d] += float(problem.memory[mm].sum())
        for v in mm:
            dev[v] = d
    if (used > problem.capacity).any():
        return None
    seq = list_order(problem, w, dev, [mm for mm in units.members if len(mm) > 1])
    return dev, seq, max(edge_asap(problem, w, dev, seq)[1], default=0.0)


#: The share of the time left that :func:`_polish` may use.
POLISH_SHARE = 0.2


def _polish(problem: LatencyProblem, units: _Units, w: Mapping[tuple[int, int], float],
            start: tuple[list[int], list[list[int]], float], stats: dict[str, Stat],
            max_evaluations: int = 20_000) -> tuple[list[int], list[list[int]], float]:
    """The MIP start improved by moving one unit at a time to another device (first
    improvement, list-scheduled and timed by :func:`edge_asap`, memory kept), until no move
    helps, ``max_evaluations`` or :data:`POLISH_SHARE` of the time left is spent; never worse
    than ``start``. ``stats`` gets ``polished_makespan`` and ``polish_evaluations``."""
    left = remaining()
    stop = math.inf if left is None else time.perf_counter() + POLISH_SHARE * left
    nd, members = problem.num_devices, units.members
    allowed = units.allowed(problem, math.inf)
    udev = [start[0][mm[0]] for mm in members]
    best = start
    evals = 0
    improved = True
    while improved and evals < max_evaluations:
        improved = False
        for u in range(len(members)):
            for d in range(nd):
                if d == udev[u] or d not in allowed[u]:
                    continue
                if evals >= max_evaluations or time.perf_counter() > stop or expired():
                    improved = False
                    break
                old, udev[u] = udev[u], d
                place = [0] * len(problem)
                for k, mm in enumerate(members):
                    for v in mm:
                        place[v] = udev[k]
                got = _from_placement(problem, units, w, place, "placement")
                evals += 1
                if got is not None and got[2] < best[2] * (1 - 1e-12):
                    best, improved = got, True
                else:
                    udev[u] = old
            else:
                continue
            break
    stats.update(polished_makespan=best[2], polish_evaluations=evals)
    return best


def _trivial_upper(problem: LatencyProblem, w: Mapping[tuple[int, int], float]) -> float:
    """No schedule of the model is longer than every node's largest time plus every edge's
    largest transfer."""
    t = np.where(np.isfinite(problem.times), problem.times, 0.0)
    bw = problem.bandwidth[~np.eye(problem.num_devices, dtype=bool)]
    slowest = float(bw.min()) if bw.size else math.inf
    return float(t.max(axis=1).sum()) + sum(s / slowest for s in w.values() if s)


def _interchangeable(problem: LatencyProblem) -> list[list[int]]:
    """Classes (of two or more) of devices any two of which swap without changing the problem:
    equal times, capacity and parallelism, and a bandwidth matrix unchanged by the swap."""
    nd = problem.num_devices
    bw, t = problem.bandwidth, problem.times
    cls: list[list[int]] = []
    for d in range(nd):
        for c in cls:
            a = c[0]
            perm = list(range(nd))
            perm[a], perm[d] = d, a
            if (np.array_equal(t[:, a], t[:, d]) and problem.capacity[a] == problem.capacity[d]
                    and problem.parallel[a] == problem.parallel[d] and np.array_equal(bw[np.ix_(perm, perm)], bw)):
                c.append(d)
                break
        else:
            cls.append([d])
    return [c for c in cls if len(c) > 1]


def _canonical(classes: list[list[int]], units: _Units, dev: list[int], order: list[list[int]]
               ) -> tuple[list[int], list[list[int]]]:
    """Relabel the devices of each class by the first unit that uses them (the symmetry rows)."""
    perm = list(range(len(order)))
    first: dict[int, int] = {}
    for k, mm in enumerate(units.members):
        first.setdefault(dev[mm[0]], k)
    for g in classes:
        used = sorted((d for d in g if d in first), key=first.__getitem__)
        for new, old in zip(g, used + [d for d in g if d not in first]):
            perm[old] = new
    out: list[list[int]] = [[] for _ in order]
    for d, seq in enumerate(order):
        out[perm[d]] = list(seq)
    return [perm[d] for d in dev], out


def fused_edge_sizes(fusion: Fusion) -> dict[tuple[Hashable, Hashable], float]:
    """The tensor on each edge of a fused problem: the outputs of the members of ``A`` read by
    some member of ``B``, each once (QuickP's fused edge weight).

    Raises
    ------
    InvalidArgumentError
        A fusion made from a graph (no problem, so no sizes).
    """
    if fusion.original_problem is None:
        raise InvalidArgumentError("fusion: made from a graph; fuse a LatencyProblem to get its sizes")
    orig = fusion.original_problem
    of, fid = fusion.fused_of.tolist(), fusion.graph.ids
    seen: set[tuple[int, int]] = set()
    out: dict[tuple[Hashable, Hashable], float] = {}
    for u in range(len(orig)):
        for v in orig.succ[u]:
            a, b = of[u], of[v]
            if a != b and (u, b) not in seen:
                seen.add((u, b))
                key = (fid[a], fid[b])
                out[key] = out.get(key, 0.0) + float(orig.size[u])
    return out


def _fused_placement(fusion: Fusion, dev: Sequence[int]) -> list[int]:
    """A device per fused node from a device per original node: where most of the group's time
    runs (ties: most members, then the lower device)."""
    orig = fusion.original_problem
    assert orig is not None
    times = np.where(np.isfinite(orig.times), orig.times, 0.0)
    out = []
    for f in range(len(fusion)):
        score: dict[int, tuple[float, int]] = {}
        for v in fusion.members(f):
            t, c = score.get(dev[v], (0.0, 0))
            score[dev[v]] = (t + float(times[v, dev[v]]), c + 1)
        out.append(min(score, key=lambda d: (-score[d][0], -score[d][1], d)))
    return out


def _per_edge_sizes(fusion: Fusion, w: Mapping[tuple[int, int], float]) -> dict[tuple[Hashable, Hashable], float]:
    """The fused edges' sizes when every original edge carries its own tensor: the sum of the
    tensors of the original edges from ``A`` into ``B``."""
    of, fid = fusion.fused_of.tolist(), fusion.graph.ids
    out: dict[tuple[Hashable, Hashable], float] = {}
    for (u, v), size in w.items():
        a, b = of[u], of[v]
        if a != b:
            out[fid[a], fid[b]] = out.get((fid[a], fid[b]), 0.0) + float(size)
    return out
