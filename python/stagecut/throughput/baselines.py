"""The baselines of the throughput paper (Tarnawski et al., NeurIPS 2020, Section 6, Table 1).

Each returns a :class:`~stagecut.results.Plan` re-scored by :func:`stagecut.evaluate`, with
status ``"feasible"`` (never a proof of optimality) and :func:`simple_lower_bound` (valid for
every split) as ``lower_bound``; ``Plan.contiguous`` says whether the split's quotient is
acyclic (the local search and Scotch usually give non-contiguous splits).

:func:`local_search`
    From a random split, the best single-move reassignment (one colocation class, the smallest
    thing that can move, to another device) until no move improves; restarts; seeded.
:func:`pipedream`
    PipeDream's optimizer: every branching region of the (layer) graph contracted to one node,
    so that the graph is a path, then the DP over the path (in :mod:`stagecut.throughput.pipedream`,
    re-exported here).
:func:`scotch`
    A balanced partition minimising the communication cut, by the Scotch partitioner's
    ``gpart`` program (or METIS through ``pymetis``), its parts mapped to the devices.

Examples
--------
>>> import stagecut as sc
>>> g = sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0])
>>> pipedream(ThroughputProblem.from_graph(g, devices=3)).objective
4.0
>>> plan = local_search(ThroughputProblem.from_graph(g, devices=3), seed=1)
>>> plan.objective >= 4.0, plan.method
(True, 'local-search')
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from stagecut.errors import BackendUnavailableError, InvalidArgumentError
from stagecut.graph import ACCELERATOR, CPU, Graph, NodeId, kahn_order
from stagecut.progress import Progress, Ticker, reports
from stagecut.results import Plan, Stat
from stagecut.throughput._scotch import _INSTALL, _run_gpart, _run_pymetis, _weights, find_gpart
from stagecut.throughput.dp import simple_lower_bound
from stagecut.throughput.evaluate import evaluate
from stagecut.throughput.pipedream import path_groups, pipedream
from stagecut.throughput.problem import ThroughputProblem
from stagecut.throughput.rescore import no_plan, plan_from_split
from stagecut.validate import check_int, check_number

__all__ = ["BASELINES", "SCOTCH_BACKENDS", "local_search", "path_groups", "pipedream", "run_baseline", "scotch"]

#: The baselines' ``method`` names in :func:`stagecut.partition`.
BASELINES = ("local-search", "pipedream", "scotch")

Device = tuple[str, int]

#: The values of :func:`scotch`'s ``backend``.
SCOTCH_BACKENDS = ("auto", "gpart", "pymetis")


def _devices(problem: ThroughputProblem) -> list[Device]:
    return [(ACCELERATOR, i) for i in range(problem.devices)] + [(CPU, i) for i in range(problem.cpus)]


def _classes(graph: Graph) -> list[list[int]]:
    """Node positions of each colocation class (a node without one is its own class)."""
    out: dict[tuple[str, Hashable], list[int]] = {}
    for i, nd in enumerate(graph.nodes):
        out.setdefault(("c", nd.colocation) if nd.colocation is not None else ("n", i), []).append(i)
    return list(out.values())


def _pipeline_order(graph: Graph, split: dict[NodeId, Device]) -> list[Device]:
    """The devices of a split in a topological order of its quotient (as listed if it is cyclic)."""
    devs = sorted(set(split.values()), key=lambda d: (d[0] != ACCELERATOR, d[0], d[1]))
    succ: dict[Device, set[Device]] = {d: set() for d in devs}
    for u, v in graph.edges:
        if split[u] != split[v]:
            succ[split[u]].add(split[v])
    order = kahn_order(devs, succ)
    return order if len(order) == len(devs) else devs


# ---------------------------------------------------------------------------- local search
class _Search:
    """The state of one local search: the device of every class, the consumers of every producer
    on every device, and every device's load; the loads' changes of every move, kept current."""

    def __init__(self, problem: ThroughputProblem, classes: list[list[int]]) -> None:
        g = problem.graph
        self.devs = _devices(problem)
        self.acc = [d[0] == ACCELERATOR for d in self.devs]
        self.cap = problem.memory
        self.members = classes
        self.unit_of = [0] * len(g)
        for u, m in enumerate(classes):
            for i in m:
                self.unit_of[i] = u
        self.comm = [nd.comm for nd in g.nodes]
        self.succ, self.pred = g.succ, g.pred
        self.outdeg = [len(s) for s in g.succ]
        nd_ = g.nodes
        self.t = np.array([[math.fsum(nd_[i].time(d[0]) for i in m) for d in self.devs] for m in classes])
        ok = np.array([[all(nd_[i].supports(d[0]) for i in m) for d in self.devs] for m in classes])
        self.ok = ok
        self.mem = np.array([math.fsum(nd_[i].memory for i in m) for m in classes])
        # producers whose terms a move of the class changes: (producer, edges into the class, inside?)
        self.prods: list[list[tuple[int, int, bool]]] = []
        for m in classes:
            inside = set(m)
            k: dict[int, int] = {}
            for v in m:
                for p in self.pred[v]:
                    k[p] = k.get(p, 0) + 1
            self.prods.append([(p, k.get(p, 0), p in inside) for p in sorted(inside | set(k))])

    def start(self, unit_dev: npt.NDArray[np.int64]) -> None:
        """Set the split (a device per class) and compute every load and move from scratch."""
        n_dev = len(self.devs)
        self.dev_u = unit_dev.copy()
        self.dev = [int(unit_dev[u]) for u in self.unit_of]
        self.cnt = [[0] * n_dev for _ in self.dev]
        for p, s in enumerate(self.succ):
            for v in s:
                self.cnt[p][self.dev[v]] += 1
        self.load = self.loads()
        self.memd = np.bincount(self.dev_u, weights=self.mem, minlength=n_dev)
        self.dsrc = np.zeros(len(self.members))
        self.ddst = np.full((len(self.members), n_dev), np.inf)
        for u in range(len(self.members)):
            self.deltas(u)

    def loads(self) -> npt.NDArray[np.float64]:
        """Every device's load, from scratch (compute, plus tensor-once communication on accelerators)."""
        terms: list[list[float]] = [[] for _ in self.devs]
        for u, d in enumerate(self.dev_u.tolist()):
            terms[d].append(float(self.t[u, d]))
        for p, row in enumerate(self.cnt):
            if not self.comm[p]:
                continue
            for d, c in enumerate(row):
                if self.acc[d] and self._pays(p, d, self.dev[p], c):
                    terms[d].append(self.comm[p])
        return np.array([math.fsum(x) for x in terms])

    def _pays(self, p: int, d: int, dev_p: int, cnt_pd: int) -> bool:
        """Does device ``d`` pay ``p``'s communication: it sends it (a consumer elsewhere) or receives it?"""
        return (self.outdeg[p] > cnt_pd) if dev_p == d else cnt_pd > 0

    def deltas(self, u: int) -> None:
        """The change of the source's load (the same for every target) and of each target's load
        when class ``u`` moves."""
        a = int(self.dev_u[u])
        src = -float(self.t[u, a])
        row = self.t[u].copy()
        row[a] = np.inf
        row[~self.ok[u]] = np.inf
        for p, k, inside in self.prods[u]:
            c = self.comm[p]
            if not c:
                continue
            dp, cp = self.dev[p], self.cnt[p]
            if self.acc[a]:
                src += c * (self._pays(p, a, -1 if inside else dp, cp[a] - k) - self._pays(p, a, dp, cp[a]))
            for e in range(len(self.devs)):
                if self.acc[e] and e != a and math.isfinite(row[e]):
                    row[e] += c * (self._pays(p, e, e if inside else dp, cp[e] + k) - self._pays(p, e, dp, cp[e]))
        self.dsrc[u] = src
        self.ddst[u] = row

    def excess(self, memd: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        acc = np.array(self.acc)
        with np.errstate(invalid="ignore"):
            return np.where(acc, np.maximum(memd - self.cap, 0.0), 0.0)

    def key(self) -> tuple[float, float, float]:
        """(memory over the limits, largest load, sum of squared loads): smaller is better."""
        return float(self.excess(self.memd).sum()), float(self.load.max()), float((self.load ** 2).sum())

    def best_move(self) -> tuple[int, int, tuple[float, float, float]]:
        """The move with the smallest key after it, and that key."""
        n_dev = len(self.devs)
        a = self.dev_u
        load = self.load
        rest = np.zeros((n_dev, n_dev))  # largest load outside devices x and y
        for x in range(n_dev):
            for y in range(n_dev):
                others = [load[z] for z in range(n_dev) if z != x and z != y]
                rest[x, y] = max(others, default=0.0)
        new_a = load[a] + self.dsrc
        new_e = load[None, :] + self.ddst
        valid = np.isfinite(self.ddst)
        new_e = np.where(valid, new_e, 0.0)
        mx = np.maximum(np.maximum(rest[a], new_a[:, None]), new_e)
        sq = (load ** 2).sum() - (load[a] ** 2)[:, None] - (load ** 2)[None, :] + (new_a ** 2)[:, None] + new_e ** 2
        exc = self.excess(self.memd)
        mem_a = self.excess(np.zeros(n_dev) + self.memd[a][:, None] - self.mem[:, None])[np.arange(len(a)), a]
        mem_e = self.excess(self.memd[None, :] + self.mem[:, None])
        viol = exc.sum() - exc[a][:, None] - exc[None, :] + mem_a[:, None] + mem_e
        viol, mx, sq = (np.where(valid, x, np.inf) for x in (viol, mx, sq))
        keys = np.lexsort((sq.ravel(), mx.ravel(), np.round(viol.ravel(), 9)))
        best = int(keys[0])
        u, e = divmod(best, n_dev)
        return u, e, (float(viol.flat[best]), float(mx.flat[best]), float(sq.flat[best]))

    def apply(self, u: int, e: int) -> None:
        """Move class ``u`` to device ``e`` and bring the loads and the moves up to date."""
        a = int(self.dev_u[u])
        self.load[a] += self.dsrc[u]
        self.load[e] += self.ddst[u, e]
        self.memd[a] -= self.mem[u]
        self.memd[e] += self.mem[u]
        self.dev_u[u] = e
        touched: set[int] = set()
        for v in self.members[u]:
            self.dev[v] = e
            touched.add(v)
            for p in self.pred[v]:
                self.cnt[p][a] -= 1
                self.cnt[p][e] += 1
                touched.add(p)
        units = {self.unit_of[x] for x in touched}
        units |= {self.unit_of[w] for x in touched for w in self.succ[x]}
        for w in units:
            self.deltas(w)


def _improves(new: tuple[float, float, float], old: tuple[float, float, float], tol: float) -> bool:
    if new[0] < old[0] - tol:
        return True
    if new[0] > old[0] + tol:
        return False
    if new[1] < old[1] - tol:
        return True
    return new[1] <= old[1] + tol and new[2] < old[2] - tol * max(1.0, old[1])


@reports
def local_search(problem: ThroughputProblem, *, restarts: int = 10, seed: int = 0,
                 max_moves: int | None = None, progress: Progress = None) -> Plan:
    """Best-improvement local search from random splits (the paper's local-search baseline).

    A move reassigns one colocation class (one node, without classes) to another device. From
    a uniformly random split (each class on a device that can run it), the best move is applied
    while it improves the key (memory over the limits, largest load, sum of squared loads,
    compared in that order: the last breaks the plateaus of the largest load) by more than a
    round-off tolerance. The result is therefore a local optimum: no single move lowers the
    largest load. The best of ``restarts`` runs is returned; usually non-contiguous
    (``Plan.contiguous``).

    Progress (:mod:`stagecut.progress`): inside a ``progress=`` call (:func:`stagecut.partition`)
    or with ``progress=`` given here, phase ``"local-search"`` reports the runs done out of
    ``restarts`` with the largest load of the best run so far (``None`` while no run has ended
    within the memory limits), at most every :data:`~stagecut.progress.REPORT_EVERY` seconds (also
    during a run), and a final report whose ``best`` is the returned plan's objective.

    Parameters
    ----------
    problem : ThroughputProblem
    restarts : int
        Independent runs (the paper: 10).
    seed : int
        Seed of the random starts (``numpy.random.default_rng``); the same seed gives the same plan.
    max_moves : int, optional
        Moves per run at most (default 50 per class + 1000); a run stopped by it says so in the notes.
    progress : bool or callable, optional
        Progress reports (see above and :mod:`stagecut.progress`).

    Returns
    -------
    Plan
        ``method="local-search"``, status ``"feasible"`` (or ``"unknown"`` with ``objective=None``
        when every run ends over the memory limit; ``"infeasible"`` when a class fits no device kind);
        ``stats``: ``restarts``, ``moves`` (of the best run), ``total_moves``, ``classes``.

    Raises
    ------
    InvalidArgumentError
        A bad ``restarts``, ``seed`` or ``max_moves``.
    """
    restarts = check_int(restarts, "restarts", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    t0 = time.perf_counter()
    classes = _classes(problem.graph)
    limit = check_int(max_moves, "max_moves", minimum=1) if max_moves is not None else 50 * len(classes) + 1000
    search = _Search(problem, classes)
    lb = simple_lower_bound(problem)
    stats: dict[str, Stat] = {"restarts": restarts, "classes": len(classes)}
    tick = Ticker("local-search", restarts)
    if not search.ok.any(axis=1).all():
        tick.final(0)
        return no_plan(problem, status="infeasible", method="local-search", stats=stats, seed=seed,
                       notes=["a colocation class can run on no device kind in use"], contiguous=False)
    rng = np.random.default_rng(seed)
    tol = 1e-9 * max(1.0, float(np.abs(search.t[np.isfinite(search.t)]).sum()))
    best: tuple[tuple[float, float, float], npt.NDArray[np.int64], int] | None = None
    best_load: float | None = None  # the largest load of the best run so far, if within memory
    total, capped = 0, 0
    for run in range(restarts):
        start = np.array([rng.choice(np.flatnonzero(row)) for row in search.ok], dtype=np.int64)
        search.start(start)
        moves = 0
        while moves < limit:
            tick(run, best_load)
            u, e, key = search.best_move()
            if not _improves(key, search.key(), tol):
                break
            search.apply(u, e)
            moves += 1
        capped += moves >= limit
        total += moves
        search.load = search.loads()  # from scratch: no round-off carried over
        key = search.key()
        if best is None or (key[0], key[1]) < (best[0][0], best[0][1]):
            best = (key, search.dev_u.copy(), moves)
            best_load = key[1] if key[0] <= tol else None
        tick(run + 1, best_load)
    assert best is not None
    stats.update({"moves": best[2], "total_moves": total})
    notes = [f"{capped} of {restarts} runs stopped at max_moves={limit}"] if capped else []
    if best[0][0] > tol:
        tick.final(restarts)
        return no_plan(problem, status="unknown", method="local-search", stats=stats, seed=seed, lower_bound=lb,
                       notes=[*notes, "every run ended over the memory limit"], contiguous=False,
                       runtime_s=time.perf_counter() - t0)
    assignment = {nd.id: search.devs[best[1][search.unit_of[i]]] for i, nd in enumerate(problem.graph.nodes)}
    plan = plan_from_split(problem, assignment, _pipeline_order(problem.graph, assignment), solver="local search",
                           claimed=best[0][1], exact=True, status="feasible", lower_bound=lb,
                           method="local-search", stats=stats, notes=notes, seed=seed,
                           runtime_s=time.perf_counter() - t0)
    if not plan.contiguous:
        plan = _with_note(plan, "non-contiguous split: its quotient graph has a cycle")
    tick.final(restarts, plan.objective)
    return plan


def _with_note(plan: Plan, note: str) -> Plan:
    return dataclasses.replace(plan, notes=(*plan.notes, note))


# ---------------------------------------------------------------------------- Scotch
def _map_parts(problem: ThroughputProblem, parts: Sequence[int], classes: list[list[int]]) -> Plan | None:
    """The best mapping of the parts to the devices (which parts go to the CPUs), by the evaluator."""
    devs = _devices(problem)
    used = sorted(set(parts))
    best: tuple[float, dict[NodeId, Device]] | None = None
    choices = itertools.chain.from_iterable(itertools.combinations(used, n)
                                            for n in range(min(problem.cpus, len(used)) + 1))
    for choice in itertools.islice(choices, 500):
        accs = [p for p in used if p not in choice]
        if len(accs) > problem.devices:
            continue
        dev_of = {p: devs[k] for k, p in enumerate(accs)}
        dev_of.update({p: (CPU, k) for k, p in enumerate(choice)})
        split: dict[NodeId, Device] = {}
        for u, m in enumerate(classes):
            d = dev_of[parts[u]]
            if problem.cpus and not all(problem.graph.nodes[i].supports(d[0]) for i in m):
                d = (CPU, 0)  # a class the part's kind cannot run goes to the first CPU
            split.update((problem.graph.nodes[i].id, d) for i in m)
        ev = evaluate(problem.graph, split, devices=problem.devices, cpus=problem.cpus, memory=problem.memory)
        if ev.feasible and (best is None or ev.objective < best[0]):
            best = (ev.objective, split)
    if best is None:
        return None
    return plan_from_split(problem, best[1], _pipeline_order(problem.graph, best[1]), solver="Scotch mapping",
                           claimed=best[0], exact=True, status="feasible", lower_bound=simple_lower_bound(problem),
                           method="scotch", stats={})


def scotch(problem: ThroughputProblem, *, backend: str = "auto", imbalance: float = 0.05, seed: int = 0) -> Plan:
    """A balanced partition with communication weights (the paper's Scotch baseline).

    The colocation classes become the vertices of an undirected graph, weighted by compute time
    (on an accelerator when the class may run there), with edge weights the tensor-once
    communication between them; it is cut into ``devices`` parts, and into ``devices + cpus``
    parts (the CPUs are much slower: a balanced part on a CPU is usually the worst), of
    balanced weight (within ``imbalance``) minimising the weight of the cut edges; the parts
    are mapped onto the devices (every choice of the parts that go to the CPUs is scored by
    the evaluator; a class that its part's device cannot run goes to the first CPU) and the
    best feasible split is kept. Not guaranteed contiguous (``Plan.contiguous``); memory
    is not balanced, only checked.

    Parameters
    ----------
    problem : ThroughputProblem
    backend : {"auto", "gpart", "pymetis"}
        ``"gpart"``: Scotch's ``gpart`` program (``scotch_gpart`` on Debian), deterministic;
        ``"pymetis"``: METIS; ``"auto"``: ``gpart`` when on ``PATH``, else ``pymetis`` when
        importable (the notes then say so).
    imbalance : float
        Load imbalance tolerance (``gpart -b``; METIS uses its own default).
    seed : int
        METIS's seed (``gpart`` runs deterministically with its fixed seed).

    Returns
    -------
    Plan
        ``method="scotch"``, status ``"feasible"``, or ``"unknown"`` with ``objective=None`` when
        no mapping of the parts fits (memory, nodes a kind cannot run); ``stats``: ``backend``,
        ``parts`` (non-empty parts).

    Raises
    ------
    BackendUnavailableError
        Neither ``gpart`` nor ``pymetis`` (for ``"auto"``), or the one asked for, is available;
        the message says how to install it.
    InvalidArgumentError
        A bad ``backend``, ``imbalance`` or ``seed``.
    SolverError
        ``gpart`` failed.
    """
    if backend not in SCOTCH_BACKENDS:
        raise InvalidArgumentError(f"backend must be one of {SCOTCH_BACKENDS}, got {backend!r}")
    imbalance = check_number(imbalance, "imbalance", error=InvalidArgumentError)
    seed = check_int(seed, "seed", minimum=0)
    t0 = time.perf_counter()
    exe = find_gpart() if backend in ("auto", "gpart") else None
    notes: list[str] = []
    if exe is None:
        import importlib.util

        if importlib.util.find_spec("pymetis") is None:
            if backend == "pymetis":
                raise BackendUnavailableError("pymetis is not installed: pip install pymetis") from None
            raise BackendUnavailableError(_INSTALL) from None
        if backend == "gpart":
            raise BackendUnavailableError(_INSTALL)
        if backend == "auto":
            notes.append("gpart (Scotch) not found: partitioned by METIS (pymetis) instead")
    classes = _classes(problem.graph)
    vw, ew = _weights(problem, classes)
    plan: Plan | None = None
    for nparts in sorted({min(n, len(classes)) for n in (problem.devices, problem.devices + problem.cpus) if n}):
        if nparts == 1:
            parts = [0] * len(classes)
        elif exe is not None:
            parts = _run_gpart(exe, nparts, vw, ew, imbalance)
        else:
            parts = _run_pymetis(nparts, vw, ew, seed)
        got = _map_parts(problem, parts, classes)
        if got is not None and got.objective is not None and (plan is None or got.objective < (plan.objective or 0)):
            plan = got
    stats: dict[str, Stat] = {"backend": "gpart" if exe is not None else "pymetis",
                              "parts": len(plan.stages) if plan is not None else 0}
    if plan is None:
        return no_plan(problem, status="unknown", method="scotch", stats=stats, seed=seed,
                       lower_bound=simple_lower_bound(problem), contiguous=False,
                       notes=[*notes, "no mapping of the partition's parts to the devices fits"],
                       runtime_s=time.perf_counter() - t0)
    plan = dataclasses.replace(plan, stats=stats, seed=seed, runtime_s=time.perf_counter() - t0,
                               notes=(*plan.notes, *notes))
    return plan if plan.contiguous else _with_note(plan, "non-contiguous split: its quotient graph has a cycle")


def run_baseline(problem: ThroughputProblem, method: str, *, seed: int = 0) -> Plan:
    """The baseline ``method`` (one of :data:`BASELINES`) with its defaults and ``seed``.

    Parameters
    ----------
    problem : ThroughputProblem
    method : {"local-search", "pipedream", "scotch"}
    seed : int

    Returns
    -------
    Plan

    Raises
    ------
    InvalidArgumentError
        An unknown ``method``.
    InvalidGraphError, BackendUnavailableError, SolverError
        As the baseline's function.
    """
    if method == "local-search":
        return local_search(problem, seed=seed)
    if method == "pipedream":
        return pipedream(problem)
    if method == "scotch":
        return scotch(problem, seed=seed)
    raise InvalidArgumentError(f"method must be one of {BASELINES}, got {method!r}")
