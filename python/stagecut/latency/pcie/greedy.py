"""The seed-000 greedy for the PCIe star (the throughput workloads' authors' latency greedy).

Nodes are grouped into *blocks* that may not be split: the nodes of one colour class
(``Node.colocation``) share a device, and colour classes that reach each other both ways (a
cycle once the classes are contracted) are fused. The blocks are taken in a topological order of
the contracted DAG and packed onto the accelerators: an accelerator is opened for a block and
takes the following blocks while its memory holds them; a block that does not fit is the first
of the next accelerator; a block too large for an empty accelerator (or with a node an
accelerator cannot run), and every block once the accelerators are used up, goes to the CPU
pool, and the accelerator being filled is then closed. Each accelerator so holds a range of the
order (a convex set: one piece). The result is re-scored by
:func:`~stagecut.latency.pcie.pieces.evaluate_pieces`.

The topological order: Kahn's algorithm with a stack (depth first, as the authors' code: a
chain is followed to its end before a branch), ties by node position. With ``tries > 1``, more
orders are tried and the best placement is returned: Kahn's algorithm by smallest position
(the input's layer order), then depth-first orders with ties broken at random (``seed``).

>>> import stagecut as sc
>>> from stagecut.latency import LatencyProblem
>>> g = sc.Graph.chain([1.0, 1.0, 1.0, 1.0], cpu_costs=[5.0] * 4, memory=[2.0] * 4, comm=0.5)
>>> s = pcie_greedy(LatencyProblem.from_workload(g, accelerators=2, memory=4.0))
>>> s.objective, s.order["accelerator:0"], s.order["accelerator:1"]   # 2 + 0.5, then 0.5 + 2
(5.0, (0, 1), (2, 3))
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Hashable, Sequence

import numpy as np

from stagecut.errors import InvalidArgumentError
from stagecut.graph import Graph
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.latency.pcie.pieces import check_pcie, pieces_schedule, pieces_timing
from stagecut.validate import check_int, check_number

__all__ = ["pcie_greedy", "blocks", "greedy_placement"]


def _classes(problem: LatencyProblem) -> list[int]:
    """Per node position, its colour class number (a node without a class is its own)."""
    cls: dict[Hashable, int] = {}
    out = []
    for i, node in enumerate(problem.graph.nodes):
        key = ("c", node.colocation) if node.colocation is not None else ("n", i)
        out.append(cls.setdefault(key, len(cls)))
    return out


def _scc(n: int, succ: Sequence[Sequence[int]]) -> list[int]:
    """Strongly connected component number of each vertex (iterative Tarjan)."""
    index = [-1] * n
    low = [0] * n
    on = [False] * n
    comp = [-1] * n
    stack: list[int] = []
    counter = ncomp = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on[root] = True
        while work:
            v, j = work[-1]
            if j < len(succ[v]):
                work[-1] = (v, j + 1)
                w = succ[v][j]
                if index[w] < 0:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on[w] = True
                    work.append((w, 0))
                elif on[w]:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on[w] = False
                    comp[w] = ncomp
                    if w == v:
                        break
                ncomp += 1
    return comp


def blocks(problem: LatencyProblem, seed: int | None = None, order: str = "depth") -> list[list[int]]:
    """The inseparable blocks (node positions, each in topological position order) in a
    topological order of the contracted graph (see the module docs).

    Parameters
    ----------
    problem : LatencyProblem
    seed : int, optional
        Break ties at random (``order="depth"`` only).
    order : {"depth", "position"}
        Depth first (a stack, as the authors' code), or Kahn's algorithm taking the ready block
        of smallest node position first (the input's order wherever it is topological).

    Raises
    ------
    InvalidArgumentError
        A seed that is not an integer >= 0, an unknown order.
    """
    if order not in ("depth", "position"):
        raise InvalidArgumentError(f"order: expected 'depth' or 'position', got {order!r}")
    cls = _classes(problem)
    nc = max(cls) + 1
    csucc: list[set[int]] = [set() for _ in range(nc)]
    for u in range(len(problem)):
        for v in problem.succ[u]:
            if cls[u] != cls[v]:
                csucc[cls[u]].add(cls[v])
    comp = _scc(nc, [sorted(s) for s in csucc])
    nb = max(comp) + 1
    rank = np.empty(len(problem), dtype=np.int64)
    rank[problem.order] = np.arange(len(problem))
    members: list[list[int]] = [[] for _ in range(nb)]
    for v in problem.order:
        members[comp[cls[v]]].append(v)
    bsucc: list[set[int]] = [set() for _ in range(nb)]
    for c in range(nc):
        for d in csucc[c]:
            if comp[c] != comp[d]:
                bsucc[comp[c]].add(comp[d])
    indeg = [0] * nb
    for b in range(nb):
        for c in bsucc[b]:
            indeg[c] += 1
    rng = random.Random(check_int(seed, "seed")) if seed is not None else None

    def pushed(items: list[int]) -> list[int]:  # the stack pops the first block by position first
        items.sort(key=lambda b: -rank[members[b][0]])
        if rng is not None:
            rng.shuffle(items)
        return items

    if order == "position":
        heap = [(int(rank[members[b][0]]), b) for b in range(nb) if indeg[b] == 0]
        heapq.heapify(heap)
        out: list[list[int]] = []
        while heap:
            _, b = heapq.heappop(heap)
            out.append(members[b])
            for c in bsucc[b]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    heapq.heappush(heap, (int(rank[members[c][0]]), c))
        return out
    stack = pushed([b for b in range(nb) if indeg[b] == 0])
    out = []
    while stack:
        b = stack.pop()
        out.append(members[b])
        ready = []
        for c in bsucc[b]:
            indeg[c] -= 1
            if indeg[c] == 0:
                ready.append(c)
        stack.extend(pushed(ready))
    return out


def greedy_placement(problem: LatencyProblem, order: list[list[int]]) -> np.ndarray | None:
    """The packing of the module docs over blocks in ``order``: a device position per node
    position, or ``None`` when a block can run only on accelerators and none can take it."""
    par = np.flatnonzero(problem.parallel)
    cpu = int(par[0]) if par.size else -1
    accs = [int(d) for d in np.flatnonzero(~problem.parallel)]
    dev = np.full(len(problem), -1, dtype=np.int64)
    cur, used, held = -1, 0, 0.0
    for blk in order:
        mem = float(problem.memory[blk].sum())
        if cur >= 0 and held + mem <= problem.capacity[cur] and np.isfinite(problem.times[blk, cur]).all():
            dev[blk], held = cur, held + mem
            continue
        cur = -1
        if used < len(accs) and mem <= problem.capacity[accs[used]] \
                and np.isfinite(problem.times[blk, accs[used]]).all():
            cur, held = accs[used], mem
            used += 1
            dev[blk] = cur
        elif cpu >= 0 and np.isfinite(problem.times[blk, cpu]).all():
            dev[blk] = cpu
        else:
            return None
    return dev


def pcie_greedy(problem: LatencyProblem | Graph, *, seed: int | None = None, tries: int = 1,
                time_limit: float | None = None) -> Schedule:
    """The seed-000 greedy on the PCIe star (see the module docs).

    Parameters
    ----------
    problem : LatencyProblem or Graph
        On :meth:`Devices.pcie_star <stagecut.latency.Devices.pcie_star>`; a graph is read as
        :meth:`LatencyProblem.from_workload <stagecut.latency.LatencyProblem.from_workload>`.
    seed : int, optional
        With ``tries > 1``, the random tie-breaking of the further orders (default 0).
    tries : int
        Orders tried: the depth-first order, the order by position, then random depth-first
        ones.
    time_limit : float, optional
        Seconds; no further order is started after it (the first always runs).

    Returns
    -------
    Schedule
        ``method="pcie-greedy"``, ``semantics="pieces"``, re-scored by
        :func:`~stagecut.latency.pcie.pieces.pieces_schedule`; ``status="feasible"``, or
        ``"infeasible"`` (a node fits on no device that can run it) or ``"unknown"`` (no
        packing found); ``lower_bound`` the problem's simple bound; ``seed`` the seed used
        (``None`` for one deterministic try); ``stats["tries"]``.

    Raises
    ------
    InvalidArgumentError
        Not a PCIe star; ``tries`` not an integer >= 1; a bad seed or time limit; a graph
        without ``maxFPGAs``.
    """
    t0 = time.perf_counter()
    if isinstance(problem, Graph):
        problem = LatencyProblem.from_workload(problem)
    check_pcie(problem)
    tries = check_int(tries, "tries", minimum=1)
    if time_limit is not None:
        check_number(time_limit, "time_limit (seconds)", positive=True, allow_inf=True, error=InvalidArgumentError)
    if seed is not None:
        check_int(seed, "seed")
    used_seed = (0 if seed is None else seed) if tries > 1 else seed
    names = problem.devices.names
    why = problem.fits_anywhere()
    if why is not None:
        return Schedule.infeasible("pcie-greedy", why, devices=names, semantics="pieces",
                                   runtime_s=time.perf_counter() - t0)
    rng = random.Random(used_seed)
    best: tuple[float, np.ndarray] | None = None
    done = 0
    for t in range(tries):
        if t and time_limit is not None and time.perf_counter() - t0 >= time_limit:
            break
        order = blocks(problem, order="position") if t == 1 else \
            blocks(problem, None if t == 0 else rng.randrange(2**62))
        dev = greedy_placement(problem, order)
        done += 1
        if dev is None:
            continue
        value = pieces_timing(problem, dev).makespan
        if best is None or value < best[0]:
            best = (value, dev)
    if best is None:
        return Schedule.infeasible("pcie-greedy", "the greedy found no packing: a block that only accelerators "
                                   "can run did not fit on one", devices=names, semantics="pieces",
                                   status="unknown", runtime_s=time.perf_counter() - t0, stats={"tries": done})
    lb = problem.lower_bound()
    return pieces_schedule(problem, best[1], method="pcie-greedy", lower_bound=lb if math.isfinite(lb) else None,
                           seed=used_seed, stats={"tries": done}, runtime_s=time.perf_counter() - t0)
