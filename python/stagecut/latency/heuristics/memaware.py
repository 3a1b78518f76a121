"""Memory-aware constructive heuristics: list schedulers that treat memory as a resource.

The plain list schedulers (:func:`~stagecut.latency.heuristics.constructive.heft`,
:func:`~stagecut.latency.heuristics.constructive.greedy`) take device memory first come, first served: once
the fast devices are full, every later node lands on whatever still has room (a slow CPU pool,
say), however much it would have gained from a fast device. The heuristics here decide ahead of
time who deserves the scarce memory (ideas of Baechi's m-TOPO / m-ETF / m-SCT, in our own form):

*tight* devices are those that cannot hold the whole graph, *roomy* ones those that can. A
unit's *gain* is its least time on a roomy device minus its least time on a tight one (infinite
when only a tight device can run it). The units of positive gain are taken by gain per byte
(zero-memory units first; ties by topological position) while their memory fits in ``fraction``
of the tight devices' total capacity: they are *reserved*. A list scheduler then places units as
usual, except that a unit that is not reserved may go to a tight device only when the tight
devices' free memory, less what the reserved units still to come need, has room for it
(:class:`Reserve`). With no roomy or no tight device, nothing is reserved and the scheduler is
the plain one.

:func:`m_heft` / :func:`m_greedy`
    HEFT and DiviML's greedy under that rule, for a few fractions (the best schedule wins).
:func:`m_topo`
    Block packing in topological order (Baechi's m-TOPO; the throughput workloads' authors'
    greedy generalised beyond the PCIe star): the blocks of
    :func:`~stagecut.latency.pcie.greedy.blocks` fill the devices that are not parallel one after
    another, fastest first, each while its memory holds them (optionally up to a share of the
    work); the rest go to the device where they run fastest among those with room. Under the
    ``asap`` evaluator (rank round-robin order).
:func:`memory_aware`
    The best of the three, and the PCIe greedy's placement re-scored under ``asap`` on a PCIe
    star.

Every result is a :class:`~stagecut.latency.Schedule` re-scored by
:func:`~stagecut.latency.model.evaluate.schedule_from` (status ``"feasible"``), deterministic, and
never over a memory limit.

>>> import stagecut as sc
>>> from stagecut.latency import LatencyProblem
>>> g = sc.Graph.chain([1.0, 1.0, 1.0, 1.0], cpu_costs=[2.0, 2.0, 50.0, 2.0], memory=[1.0] * 4)
>>> p = LatencyProblem.from_workload(g, accelerators=1, memory=1.0)
>>> from stagecut.latency.heuristics.constructive import heft
>>> heft(p).objective, m_heft(p).objective   # plain HEFT gives the accelerator to node 0
(55.0, 7.0)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable

import numpy as np

from stagecut.latency.heuristics.constructive import (
    Memory,
    Units,
    _check_problem,
    best_constructive,
    finished,
    list_greedy,
    list_heft,
    no_answer,
)
from stagecut.latency.model._fast import Evaluator
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule

__all__ = ["Reserve", "m_heft", "m_greedy", "m_topo", "m_chain", "chain_packing", "topo_packing", "pcie_asap",
           "memory_aware", "best_start", "FRACTIONS"]

#: The fractions of the tight devices' capacity :func:`m_heft` and :func:`m_greedy` reserve.
FRACTIONS = (1.0, 0.9, 0.7)


class Reserve(Memory):
    """The memory rule of the module docs: units that gain most per byte from a tight device
    have its memory held back for them.

    Parameters
    ----------
    units : Units
    fraction : float
        The share of the tight devices' capacity reserved.

    Attributes
    ----------
    reserved : numpy.ndarray
        Per unit, is it reserved?
    pending : float
        Bytes the reserved units not yet placed need.
    """

    def __init__(self, units: Units, fraction: float = 1.0) -> None:
        super().__init__(units)
        p = units.problem
        total = float(units.memory.sum())
        self.tight = p.capacity < total
        self.reserved = np.zeros(len(units), dtype=bool)
        self.pending = 0.0
        if not self.tight.any() or self.tight.all() or len(units) == 0:
            return
        t = units.times
        gain = t[:, ~self.tight].min(axis=1) - t[:, self.tight].min(axis=1)
        gain = np.where(np.isnan(gain), -math.inf, gain)
        mem = units.memory
        with np.errstate(divide="ignore", invalid="ignore"):
            density = np.where(mem > 0, gain / np.where(mem > 0, mem, 1.0), math.inf)
        cand = np.flatnonzero(gain > 0)
        # by gain per byte (largest first), ties by the unit's topological (BFS) number
        cand = cand[np.lexsort((cand, -density[cand]))]
        room = fraction * float(p.capacity[self.tight].sum())
        used = 0.0
        for u in cand:
            if used + mem[u] <= room:
                self.reserved[u] = True
                used += mem[u]
        self.pending = used

    def candidates(self, u: int) -> list[int]:
        m = self.units.memory[u]
        ok = [int(d) for d in self.units.allowed[u] if m <= self.free[d]]
        if self.reserved[u] or not ok:
            return ok
        spare = float(self.free[self.tight].sum()) - self.pending
        kept = [d for d in ok if not self.tight[d] or m <= spare]
        return kept or ok

    def take(self, u: int, d: int) -> None:
        super().take(u, d)
        if self.reserved[u]:
            self.pending -= self.units.memory[u]


def _rule(fraction: float) -> Callable[[Units], Memory]:
    return lambda units: Reserve(units, fraction)


def _best(found: list[Schedule], method: str, t0: float) -> Schedule:
    ok = [s for s in found if s.objective is not None]
    if not ok:
        return found[0]
    best = min(ok, key=lambda s: s.objective if s.objective is not None else math.inf)
    import dataclasses

    return dataclasses.replace(best, method=method, runtime_s=time.perf_counter() - t0,
                               notes=(*best.notes, f"of {len(found)} variants"))


def _shortest(problem: LatencyProblem, placements: Iterable[np.ndarray | None], method: str, reason: str,
              t0: float, stats: dict[str, float] | None = None) -> Schedule:
    """The placement of ``placements`` (``None``: one that did not fit) with the least makespan
    under ``asap`` (rank round-robin order; ties: the first), as a schedule of ``method``; no
    schedule (``reason``) when none fits."""
    ev = Evaluator(problem)
    best: tuple[float, np.ndarray] | None = None
    for dev in placements:
        if dev is None:
            continue
        f = ev.makespan(dev)
        if best is None or f < best[0]:
            best = (f, dev)
    if best is None:
        return no_answer(problem, None, method, reason, t0)
    return finished(problem, best[1], None, method=method, t0=t0, stats=stats)


def m_heft(problem: LatencyProblem, fractions: tuple[float, ...] = FRACTIONS) -> Schedule:
    """HEFT with memory reserved for the units that gain most from the tight devices (see the
    module docs), for each reserved fraction in ``fractions``; the shortest schedule.

    Parameters
    ----------
    problem : LatencyProblem
    fractions : tuple of float
        Shares of the tight devices' capacity to reserve.

    Returns
    -------
    Schedule
        Method ``"m-heft"``; HEFT's order or rank round-robin, whichever is shorter.

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`.
    """
    t0 = time.perf_counter()
    _check_problem(problem)
    return _best([list_heft(problem, _rule(f), "m-heft") for f in fractions], "m-heft", t0)


def m_greedy(problem: LatencyProblem, fractions: tuple[float, ...] = FRACTIONS) -> Schedule:
    """DiviML's greedy with memory reserved as :func:`m_heft` does.

    Parameters
    ----------
    problem : LatencyProblem
    fractions : tuple of float

    Returns
    -------
    Schedule
        Method ``"m-greedy"``.

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`.
    """
    t0 = time.perf_counter()
    _check_problem(problem)
    return _best([list_greedy(problem, _rule(f), "m-greedy") for f in fractions], "m-greedy", t0)


def topo_packing(problem: LatencyProblem, blocks: list[list[int]], share: float | None = None) -> np.ndarray | None:
    """The packing of :func:`m_topo` over ``blocks`` (node positions, in a topological order of
    blocks): a device position per node position, or ``None`` when some block fits nowhere.

    ``share``: a fraction of the total (fastest-time) work; a device stops taking blocks once its
    own work would pass it (``None``: only memory stops it).
    """
    n = len(problem)
    times = problem.times
    fill = [int(d) for d in np.flatnonzero(~problem.parallel)]
    speed = [float(np.where(np.isfinite(times[:, d]), times[:, d], 0.0).sum()
                   / max(1, int(np.isfinite(times[:, d]).sum()))) for d in fill]
    fill = [d for _, d in sorted(zip(speed, fill))]
    limit = math.inf
    if share is not None:
        limit = share * float(np.nanmin(np.where(np.isfinite(times), times, np.nan), axis=1).sum()) \
            if n else math.inf
    free = problem.capacity.copy()
    dev = np.full(n, -1, dtype=np.int64)
    k, work = 0, 0.0
    for blk in blocks:
        mem = float(problem.memory[blk].sum())
        placed = False
        while k < len(fill):
            d = fill[k]
            runs = bool(np.isfinite(times[blk, d]).all())
            w = float(times[blk, d].sum()) if runs else math.inf
            if runs and mem <= free[d] and (work == 0.0 or work + w <= limit):
                dev[blk] = d
                free[d] -= mem
                work += w
                placed = True
                break
            if not runs and mem <= free[d]:
                break  # this block cannot run here: it goes elsewhere, the device stays open
            k, work = k + 1, 0.0
        if placed:
            continue
        cost = [(float(times[blk, d].sum()), d) for d in range(problem.num_devices)
                if mem <= free[d] and np.isfinite(times[blk, d]).all()]
        if not cost:
            return None
        d = min(cost)[1]
        dev[blk] = d
        free[d] -= mem
    return dev


def _orders(problem: LatencyProblem) -> list[list[list[int]]]:
    """The block orders :func:`m_topo` and :func:`m_chain` try: the depth-first and the
    by-position orders of :func:`~stagecut.latency.pcie.greedy.blocks`, and the placement units
    (colocation classes) by their first node in BFS order when the blocks are fewer (colocation
    classes that reach each other both ways, as a forward node and its backward node, fuse
    into blocks; the units keep them apart, at the price of an order that is not topological
    between units)."""
    from stagecut.latency.pcie.greedy import blocks

    out = [blocks(problem, order="depth"), blocks(problem, order="position")]
    units = Units(problem)
    if len(units) > len(out[0]):
        out.append([m.tolist() for m in units.members])
    return out


def m_topo(problem: LatencyProblem, shares: tuple[float | None, ...] = (None, 0.5, 0.25)) -> Schedule:
    """Block packing in topological order (see the module docs): the depth-first and the
    by-position block orders, each with every work share in ``shares``; the shortest under
    ``asap`` (rank round-robin order).

    Parameters
    ----------
    problem : LatencyProblem
    shares : tuple of (float or None)
        Work shares per device (``None``: memory alone closes a device).

    Returns
    -------
    Schedule
        Method ``"m-topo"``; no schedule (status ``"unknown"``/``"infeasible"``) when no packing
        fits.

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`.
    """
    t0 = time.perf_counter()
    _check_problem(problem)
    orders = _orders(problem)
    packings = (topo_packing(problem, blk, share) for blk in orders for share in shares)
    return _shortest(problem, packings, "m-topo", "no block packing fits", t0,
                     stats={"packings": len(orders) * len(shares)})


def chain_packing(problem: LatencyProblem, blocks: list[list[int]]) -> np.ndarray | None:
    """The placement of :func:`m_chain` over ``blocks`` (node positions, in a topological order
    of blocks), or ``None`` when no cut fits.

    The order is cut into runs: each run either on one device that is not parallel (at most one
    run per such device, its memory holding the run) or, block by block, on the parallel device
    where each runs fastest. A run's cost is the sum of its blocks' times there; a cut between
    two runs costs the outputs that cross it (each node once, from its block to the last block
    reading it) over the slowest link of that kind (between two sequential devices, or between a
    sequential and a parallel one). A dynamic program over (cut, devices used) minimises the
    total in O(blocks x devices) with a sliding-window minimum over each run's start. Among
    equally cheap starts a run takes the latest (it is as short as it can be: the devices
    before it in that order, larger and then faster, take the blocks).
    """
    nb = len(blocks)
    if nb == 0:
        return np.zeros(len(problem), dtype=np.int64)
    times, par = problem.times, problem.parallel
    seqdev = [int(d) for d in np.flatnonzero(~par)]
    # sequential devices by capacity (largest first), then speed, then position
    speed = {d: float(np.where(np.isfinite(times[:, d]), times[:, d], 0.0).sum()) for d in seqdev}
    seqdev.sort(key=lambda d: (-problem.capacity[d], speed[d], d))
    pardev = [int(d) for d in np.flatnonzero(par)]
    inv = 1.0 / problem.bandwidth
    ss = [(a, b) for a in seqdev for b in seqdev if a != b]
    sp = [(a, b) for a in seqdev for b in pardev] + [(b, a) for a in seqdev for b in pardev]
    inv_ss = max((float(inv[a, b]) for a, b in ss), default=0.0)
    inv_sp = max((float(inv[a, b]) for a, b in sp), default=0.0)
    where = np.empty(len(problem), dtype=np.int64)
    for k, blk in enumerate(blocks):
        where[blk] = k
    # cut j (before block j) is crossed by each node's output from its block to its last reader's
    last = where.copy()
    for u in range(len(problem)):
        for v in problem.succ[u]:
            if where[v] > last[u]:
                last[u] = where[v]
    diff = np.zeros(nb + 1)
    np.add.at(diff, where + 1, problem.size)
    np.add.at(diff, last + 1, -problem.size)
    cross = np.cumsum(diff)[:nb]          # cross[j]: outputs crossing the cut before block j
    cross[0] = 0.0
    mem = np.array([float(problem.memory[b].sum()) for b in blocks])
    pmem = np.concatenate([[0.0], np.cumsum(mem)])
    tpar = np.full(nb, math.inf)
    ppar = np.full(nb, -1, dtype=np.int64)
    for d in pardev:
        t = np.array([float(times[b, d].sum()) for b in blocks])
        better = t < tpar
        tpar[better], ppar[better] = t[better], d
    inf = math.inf
    K = len(seqdev)
    # A[k][j]: blocks [0, j) covered, k sequential runs used, the last one ending at j;
    # C[k][j]: the same with block j-1 on a parallel device
    A = np.full((K + 1, nb + 1), inf)
    C = np.full((K + 1, nb + 1), inf)
    argA = np.full((K + 1, nb + 1), -1, dtype=np.int64)
    A[0, 0] = 0.0
    for k in range(K + 1):
        if k > 0:
            d = seqdev[k - 1]
            t = np.array([float(times[b, d].sum()) for b in blocks])
            pt = np.concatenate([[0.0], np.cumsum(np.where(np.isfinite(t), t, 0.0))])
            bad = np.concatenate([[0], np.cumsum(~np.isfinite(t))])
            # entering run [i, j) from the state at i: pay the cut unless i == 0
            enter = np.minimum(A[k - 1] + np.where(np.arange(nb + 1) > 0, np.append(cross, 0.0), 0.0) * inv_ss,
                               C[k - 1] + np.append(cross, 0.0) * inv_sp) - pt
            cap = problem.capacity[d]
            dq: list[int] = []
            lo = 0
            head = 0
            for j in range(1, nb + 1):
                i_new = j - 1
                while len(dq) > head and enter[dq[-1]] >= enter[i_new]:
                    dq.pop()
                dq.append(i_new)
                while pmem[j] - pmem[lo] > cap or bad[j] - bad[lo] > 0:
                    lo += 1
                while head < len(dq) and dq[head] < lo:
                    head += 1
                if head < len(dq) and lo < j:
                    i = dq[head]
                    v = enter[i] + pt[j]
                    if v < A[k, j]:
                        A[k, j], argA[k, j] = v, i
        for j in range(1, nb + 1):
            if not math.isfinite(tpar[j - 1]):
                continue
            prev = min(C[k, j - 1], A[k, j - 1] + (cross[j - 1] * inv_sp if j - 1 > 0 else 0.0))
            C[k, j] = prev + tpar[j - 1]
    ends = np.minimum(A[:, nb], C[:, nb])
    k = int(np.argmin(ends))
    if not math.isfinite(ends[k]):
        return None
    dev = np.full(len(problem), -1, dtype=np.int64)
    j, on_a = nb, A[k, nb] <= C[k, nb]
    while j > 0:
        if on_a:
            i = int(argA[k, j])
            for b in range(i, j):
                dev[blocks[b]] = seqdev[k - 1]
            j, k = i, k - 1
            on_a = j > 0 and A[k, j] + (cross[j] * inv_ss) <= C[k, j] + cross[j] * inv_sp
        else:
            dev[blocks[j - 1]] = ppar[j - 1]
            j -= 1
            on_a = j > 0 and A[k, j] + cross[j] * inv_sp < C[k, j]
    return dev


def m_chain(problem: LatencyProblem) -> Schedule:
    """Cut a topological order of the blocks into runs, one per sequential device, by a dynamic
    program that minimises the runs' times plus the outputs crossing the cuts
    (:func:`chain_packing`), for the depth-first and the by-position block orders; the shortest
    under ``asap`` (rank round-robin order).

    Parameters
    ----------
    problem : LatencyProblem

    Returns
    -------
    Schedule
        Method ``"m-chain"``; no schedule (status ``"unknown"``/``"infeasible"``) when no cut
        fits.

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`.
    """
    t0 = time.perf_counter()
    _check_problem(problem)
    placements = (chain_packing(problem, blk) for blk in _orders(problem))
    return _shortest(problem, placements, "m-chain", "no cut of the order fits", t0)


def pcie_asap(problem: LatencyProblem) -> Schedule | None:
    """The PCIe greedy's placement (:func:`~stagecut.latency.pcie.greedy.pcie_greedy`) re-scored under
    ``asap`` (rank round-robin order), method ``"pcie-greedy (asap)"``; ``None`` when the devices
    are not a PCIe star or the greedy finds no packing."""
    from stagecut.errors import InvalidArgumentError
    from stagecut.latency.pcie.greedy import pcie_greedy

    t0 = time.perf_counter()
    try:
        s = pcie_greedy(problem)
    except InvalidArgumentError:
        return None
    if s.objective is None:
        return None
    names = problem.devices.names
    dev = np.array([names.index(s.placement[v]) for v in problem.ids], dtype=np.int64)
    return finished(problem, dev, None, method="pcie-greedy (asap)", t0=t0)


def memory_aware(problem: LatencyProblem) -> list[Schedule]:
    """Every memory-aware constructive schedule: :func:`m_heft`, :func:`m_greedy`,
    :func:`m_topo`, and :func:`pcie_asap` on a PCIe star (those that found one)."""
    out = [m_heft(problem), m_greedy(problem), m_topo(problem), m_chain(problem)]
    p = pcie_asap(problem)
    if p is not None:
        out.append(p)
    return [s for s in out if s.objective is not None]


def best_start(problem: LatencyProblem) -> Schedule:
    """The shortest schedule of the whole start pool: the plain constructive heuristics
    (:func:`~stagecut.latency.heuristics.constructive.best_constructive`) and every memory-aware one
    (:func:`memory_aware`), each keeping its method name (ties: the plain ones first); when none
    finds one, the plain heuristics' answer (status ``"infeasible"`` or ``"unknown"``).

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`.
    """
    plain = best_constructive(_check_problem(problem))
    pool = [s for s in [plain, *memory_aware(problem)] if s.objective is not None]
    if not pool:
        return plain
    return min(pool, key=lambda s: s.objective if s.objective is not None else math.inf)
