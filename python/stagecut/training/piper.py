"""Piper: training plans with pipeline, data and tensor parallelism and activation recomputation.

The model is the one of "Piper: Multidimensional Planner for DNN Parallelization" (Tarnawski,
Narayanan, Phanishayee, NeurIPS 2021), with the exact cost model of the authors' code
(``msr-fiddle/piper``, ``algo.cpp``). A plan splits the layer DAG into a sequence of contiguous
stages; stage ``i`` gets a data-parallel degree ``d`` (dividing the number ``N`` of microbatches
in a batch), a tensor-parallel degree ``t`` and one TMPC per node, and runs on ``t * d`` devices.
Its time per sample is::

    TPS = compute / d + (edges / d + 4 (d - 1) / d * params / N) / B

with ``compute`` the chosen TMPCs' ``time``, ``edges`` the sum of ``2 (c(u, v) + sync)`` over
the edges crossing the stage boundary (the sync part from the TMPC of the endpoint inside the
stage), ``params`` the TMPCs' parameter bytes and ``B`` the bandwidth. Memory per device is
``sum(a) * ceil(s / d) + sum(b)`` where ``s`` sums the data-parallel degrees of this and the later
stages. The plan's TPS is the largest stage TPS; constraints: ``sum(t d) <= K``,
``sum(d) <= N`` (``== N`` with ``exact_batch``), and memory ``<= M``.

Examples
--------
>>> import stagecut.training.piper as sp
>>> prob = sp.chain_problem([3.0, 1.0, 2.0], devices=2, memory=1e9, bandwidth=1.0, batch=2, params=1.0)
>>> plan = sp.plan_training(prob)
>>> round(plan.objective, 3), [st.nodes for st in plan.stages]
(3.0, [(0,), (1, 2)])
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time as _time
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable, Mapping, Sequence

import numpy as np

from stagecut.errors import CycleError, InvalidGraphError, SolverError
from stagecut.graph import cycle_among, kahn_order

__all__ = [
    "TMPC",
    "PiperNode",
    "PiperEdge",
    "PiperProblem",
    "PiperStage",
    "TrainingPlan",
    "TrainingEvaluation",
    "read_piper",
    "piper_from_dict",
    "chain_problem",
    "plan_training",
    "evaluate_training",
    "plan_equi",
    "plan_baselines",
    "insert_layer_copies",
    "RECOMPUTE_ID",
    "VANILLA_ID",
]

#: TMPC id the published inputs use for activation recomputation (and for no recomputation).
RECOMPUTE_ID = "activation recomp"
VANILLA_ID = "vanilla"
DEFAULT_MAX_IDEALS = 200_000
GIB = float(1 << 30)


# ---------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TMPC:
    """One way to run a node on ``t`` devices (tensor parallelism).

    ``time`` is the forward+backward time per sample (t-way communication included), ``params``
    the weight bytes per device, memory per device ``mem_a * y + mem_b``; ``sync_fw[u]`` the bytes
    to spread the input from ``u`` among the t devices (one entry per incoming edge) and
    ``sync_bw[w]`` likewise for each outgoing edge. ``recompute`` marks activation recomputation
    (default: ``id == "activation recomp"``).
    """

    id: str
    time: float
    params: float
    mem_a: float
    mem_b: float
    sync_fw: Mapping[Hashable, float] = field(default_factory=dict)
    sync_bw: Mapping[Hashable, float] = field(default_factory=dict)
    recompute: "bool | None" = None

    @property
    def is_recompute(self) -> bool:
        return self.id == RECOMPUTE_ID if self.recompute is None else bool(self.recompute)


@dataclass(frozen=True)
class PiperNode:
    """A layer: its id and its TMPCs per tensor-parallel degree ``t``."""

    id: Hashable
    tmpcs: Mapping[int, Sequence[TMPC]]
    name: str = ""


@dataclass(frozen=True)
class PiperEdge:
    source: Hashable
    target: Hashable
    comm: float


@dataclass(frozen=True)
class PiperProblem:
    """A Piper input: layer DAG with TMPCs, ``devices`` (K), ``memory`` per device (M, bytes),
    ``bandwidth`` (B, bytes/s) and ``batch`` (N, microbatches per batch). Validated on creation:
    errors name the node or field at fault.

    Optionally a two-level network (``server_size`` devices per server, linked at
    ``intra_bandwidth``; servers at ``bandwidth``): tensor parallelism stays inside a server
    (``t`` divides ``server_size``), the t-way sync bytes move at ``intra_bandwidth``, and so does
    a stage's data-parallel all-reduce when its ``t * d`` devices fit in one server.
    """

    nodes: tuple
    edges: tuple
    devices: int
    memory: float
    bandwidth: float
    batch: int
    server_size: "int | None" = None
    intra_bandwidth: "float | None" = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "edges", tuple(self.edges))
        _validate(self)

    def replace(self, **changes: Any) -> "PiperProblem":
        """A copy with some of ``devices``, ``memory``, ``bandwidth``, ``batch`` changed."""
        return dataclasses.replace(self, **changes)

    @property
    def index(self) -> dict:
        """``{node id: position}`` (cached)."""
        idx = self.__dict__.get("_piper_index")
        if idx is None:
            idx = {nd.id: i for i, nd in enumerate(self.nodes)}
            object.__setattr__(self, "_piper_index", idx)
        return idx


def _finite_nonneg(x: Any, where: str) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise InvalidGraphError(f"{where}: {x!r} is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise InvalidGraphError(f"{where}: {x!r} is negative or not finite")
    return v


def _validate(p: PiperProblem) -> None:
    if not isinstance(p.devices, (int, np.integer)) or isinstance(p.devices, bool) or p.devices < 1:
        raise InvalidGraphError(f"devices (maxDevices) must be a positive integer, got {p.devices!r}")
    if not isinstance(p.batch, (int, np.integer)) or isinstance(p.batch, bool) or p.batch < 1:
        raise InvalidGraphError(f"batch (mbsInBatch) must be a positive integer, got {p.batch!r}")
    for name in ("memory", "bandwidth"):
        v = getattr(p, name)
        if not isinstance(v, (int, float, np.number)) or not math.isfinite(v) or v <= 0:
            raise InvalidGraphError(f"{name} must be a positive finite number, got {v!r}")
    if (p.server_size is None) != (p.intra_bandwidth is None):
        raise InvalidGraphError("server_size and intra_bandwidth go together (a two-level network)")
    if p.server_size is not None:
        if not isinstance(p.server_size, (int, np.integer)) or isinstance(p.server_size, bool) or p.server_size < 1:
            raise InvalidGraphError(f"server_size must be a positive integer, got {p.server_size!r}")
        v = p.intra_bandwidth
        if not isinstance(v, (int, float, np.number)) or not math.isfinite(v) or v <= 0:
            raise InvalidGraphError(f"intra_bandwidth must be a positive finite number, got {v!r}")
    if not p.nodes:
        raise InvalidGraphError("the problem has no nodes")
    idx: dict = {}
    for nd in p.nodes:
        if nd.id in idx:
            raise InvalidGraphError(f"duplicate node id {nd.id!r}")
        idx[nd.id] = len(idx)
    preds: dict = {nd.id: [] for nd in p.nodes}
    succs: dict = {nd.id: [] for nd in p.nodes}
    seen = set()
    for e in p.edges:
        if e.source not in idx or e.target not in idx:
            raise InvalidGraphError(f"edge {e.source!r} -> {e.target!r}: endpoint is not a node")
        if e.source == e.target:
            raise CycleError(f"self-loop on node {e.source!r}", [e.source])
        if (e.source, e.target) in seen:
            raise InvalidGraphError(f"duplicate edge {e.source!r} -> {e.target!r}")
        seen.add((e.source, e.target))
        _finite_nonneg(e.comm, f"edge {e.source!r} -> {e.target!r}: communicationCost")
        succs[e.source].append(e.target)
        preds[e.target].append(e.source)
    _check_acyclic(p, preds, succs)
    for nd in p.nodes:
        if not isinstance(nd.tmpcs, Mapping):
            raise InvalidGraphError(f"node {nd.id!r}: TMPCs must map t to a list")
        t1 = nd.tmpcs.get(1)
        if not t1:
            raise InvalidGraphError(f"node {nd.id!r}: no TMPC for t=1 (running without tensor parallelism)")
        for t, lst in nd.tmpcs.items():
            if not isinstance(t, (int, np.integer)) or isinstance(t, bool) or t < 1:
                raise InvalidGraphError(f"node {nd.id!r}: TMPC key {t!r} is not a device count >= 1")
            ids = set()
            for c in lst:
                where = f"node {nd.id!r}, t={t}, TMPC {c.id!r}"
                if not c.id:
                    raise InvalidGraphError(f"node {nd.id!r}, t={t}: empty TMPC id")
                if c.id in ids:
                    raise InvalidGraphError(f"node {nd.id!r}, t={t}: duplicate TMPC id {c.id!r}")
                ids.add(c.id)
                _finite_nonneg(c.time, f"{where}: timePerSample")
                _finite_nonneg(c.params, f"{where}: parameterSize")
                _finite_nonneg(c.mem_a, f"{where}: memoryUsageA")
                _finite_nonneg(c.mem_b, f"{where}: memoryUsageB")
                if set(c.sync_fw) != set(preds[nd.id]):
                    raise InvalidGraphError(
                        f"{where}: syncTimeFw keys {sorted(map(str, c.sync_fw))} do not match the "
                        f"incoming edges from {sorted(map(str, preds[nd.id]))}")
                if set(c.sync_bw) != set(succs[nd.id]):
                    raise InvalidGraphError(
                        f"{where}: syncTimeBw keys {sorted(map(str, c.sync_bw))} do not match the "
                        f"outgoing edges to {sorted(map(str, succs[nd.id]))}")
                for k, v in c.sync_fw.items():
                    _finite_nonneg(v, f"{where}: syncTimeFw[{k!r}]")
                for k, v in c.sync_bw.items():
                    _finite_nonneg(v, f"{where}: syncTimeBw[{k!r}]")


def _check_acyclic(p: PiperProblem, preds: dict, succs: dict) -> None:
    keys = list(preds)
    order = kahn_order(keys, succs)
    if len(order) == len(keys):
        return
    done = set(order)
    cycle = cycle_among([v for v in keys if v not in done], preds)
    raise CycleError(f"the layer graph has a cycle through nodes {cycle}", cycle)


def _kahn_stack_order(p: PiperProblem) -> list:
    """Topological order of node indices as the authors' code computes it (a stack-based Kahn
    over nodes in input order and edges in input order); the equi baselines depend on it."""
    idx = p.index
    n = len(p.nodes)
    indeg = [0] * n
    out: list = [[] for _ in range(n)]
    for e in p.edges:
        indeg[idx[e.target]] += 1
        out[idx[e.source]].append(idx[e.target])
    stack = [v for v in range(n) if indeg[v] == 0]
    order = []
    while stack:
        v = stack.pop()
        order.append(v)
        for w in out[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                stack.append(w)
    return order


# ---------------------------------------------------------------------------------------------
# Readers
# ---------------------------------------------------------------------------------------------


def _req(obj: Mapping, key: str, where: str) -> Any:
    if not isinstance(obj, Mapping) or key not in obj:
        raise InvalidGraphError(f"{where}: missing field {key!r}")
    return obj[key]


def _node_key(k: Any, where: str) -> int:
    try:
        return int(k)
    except (TypeError, ValueError):
        raise InvalidGraphError(f"{where}: key {k!r} is not a node id") from None


def piper_from_dict(data: Mapping) -> PiperProblem:
    """Build a :class:`PiperProblem` from the JSON format of ``workloads/piper`` (the authors')."""
    if not isinstance(data, Mapping):
        raise InvalidGraphError("a Piper input must be a JSON object")
    nodes = []
    for i, nd in enumerate(_req(data, "nodes", "input")):
        nid = _req(nd, "id", f"nodes[{i}]")
        tm = _req(nd, "TMPCs", f"node {nid!r}")
        if not isinstance(tm, Mapping):
            raise InvalidGraphError(f"node {nid!r}: TMPCs must be an object keyed by t")
        tmpcs = {}
        for tk, lst in tm.items():
            try:
                t = int(tk)
            except (TypeError, ValueError):
                raise InvalidGraphError(f"node {nid!r}: TMPC key {tk!r} is not a device count") from None
            out = []
            for j, c in enumerate(lst):
                where = f"node {nid!r}, t={t}, TMPC #{j}"
                out.append(TMPC(
                    id=str(_req(c, "id", where)),
                    time=_req(c, "timePerSample", where),
                    params=_req(c, "parameterSize", where),
                    mem_a=_req(c, "memoryUsageA", where),
                    mem_b=_req(c, "memoryUsageB", where),
                    sync_fw={_node_key(k, where): v for k, v in _req(c, "syncTimeFw", where).items()},
                    sync_bw={_node_key(k, where): v for k, v in _req(c, "syncTimeBw", where).items()},
                ))
            tmpcs[t] = tuple(out)
        nodes.append(PiperNode(id=nid, tmpcs=tmpcs, name=str(nd.get("name", ""))))
    edges = []
    for i, e in enumerate(_req(data, "edges", "input")):
        edges.append(PiperEdge(_req(e, "sourceId", f"edges[{i}]"), _req(e, "destId", f"edges[{i}]"),
                               _req(e, "communicationCost", f"edges[{i}]")))
    server = data.get("serverSize")
    intra = data.get("intraServerBandwidth")
    return PiperProblem(nodes=tuple(nodes), edges=tuple(edges), devices=_req(data, "maxDevices", "input"),
                        memory=float(_req(data, "maxMemoryPerDevice", "input")),
                        bandwidth=float(_req(data, "bandwidth", "input")),
                        batch=_req(data, "mbsInBatch", "input"), server_size=server,
                        intra_bandwidth=None if intra is None else float(intra))


def read_piper(path: "str | os.PathLike | Mapping") -> PiperProblem:
    """Read a Piper input (a path to the JSON format of ``workloads/piper``, or its dict)."""
    if isinstance(path, Mapping):
        return piper_from_dict(path)
    try:
        with open(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise InvalidGraphError(f"{path}: not valid JSON ({e})") from None
    return piper_from_dict(data)


def chain_problem(times: Sequence[float], *, devices: int, memory: float, bandwidth: float, batch: int,
                  comm: float = 0.0, params: float = 0.0, mem_a: float = 0.0, mem_b: float = 0.0) -> PiperProblem:
    """A chain of layers with one TMPC (t = 1) each: a quick way to build small problems."""
    n = len(times)
    nodes = []
    for i, tm in enumerate(times):
        fw = {i - 1: 0.0} if i > 0 else {}
        bw = {i + 1: 0.0} if i + 1 < n else {}
        nodes.append(PiperNode(i, {1: (TMPC(VANILLA_ID, float(tm), params, mem_a, mem_b, fw, bw),)}))
    edges = [PiperEdge(i, i + 1, comm) for i in range(n - 1)]
    return PiperProblem(tuple(nodes), tuple(edges), devices, memory, bandwidth, batch)


_PRIMES = (13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043, 85229, 172933)


def _libstdcxx_int_set_order(keys: Sequence[int]) -> list:
    """Iteration order of a libstdc++ ``std::unordered_set<int>`` after inserting ``keys`` in
    order (identity hash, prime rehash policy, max load factor 1): elements of one bucket are
    contiguous, a new bucket's first element goes to the front, rehashing relinks in order."""
    order: list = []
    nb = 1
    next_resize = 0
    for x in keys:
        if x in order:
            continue
        n_elt = len(order)
        if n_elt + 1 > next_resize:
            min_bkts = max(n_elt + 1, 0 if next_resize else 11)
            if min_bkts >= nb:
                want = max(min_bkts + 1, nb * 2)
                nb = next(p for p in _PRIMES if p >= want)
                next_resize = nb
                new: list = []
                for y in order:  # relink: new bucket -> front, else start of its bucket's run
                    b = y % nb
                    at = next((i for i, z in enumerate(new) if z % nb == b), None)
                    new.insert(0 if at is None else at, y)
                order = new
            else:
                next_resize = nb
        b = x % nb
        at = next((i for i, z in enumerate(order) if z % nb == b), None)
        order.insert(0 if at is None else at, x)
    return order


def insert_layer_copies(prob: PiperProblem, count: int, name: str = "ParallelTransformerLayer") -> PiperProblem:
    """Deepen a model the way the paper's BERT-64 experiment does: ``count`` times, copy a
    layer named ``name`` that has such a layer before and after it in a chain, inserting the
    copy right after it (the copy gets its TMPCs with the sync entries re-keyed)."""
    nodes = list(prob.nodes)
    edges = list(prob.edges)
    fresh = 123456789
    for _ in range(count):
        idx = {nd.id: i for i, nd in enumerate(nodes)}
        layer = {nd.id for nd in nodes if nd.name == name}
        prev, nxt = {}, {}
        for e in edges:
            if e.source in layer and e.target in layer:
                prev[e.target] = e.source
                nxt[e.source] = e.target
        # a layer with a layer before and after it: the first one in the iteration order of the
        # authors' std::unordered_set<int> of layer positions (so BERT-64 is their BERT-64)
        pos = [i for i, nd in enumerate(nodes) if nd.name == name]
        cands = [nodes[i].id for i in _libstdcxx_int_set_order(pos) if nodes[i].id in prev and nodes[i].id in nxt]
        if not cands:
            raise InvalidGraphError(f"no {name!r} layer with a {name!r} predecessor and successor")
        v = cands[0]
        s = nxt[v]
        fresh += 1
        nu = fresh
        while nu in idx:
            nu += 1
        comm = None
        for i, e in enumerate(edges):
            if e.source == v and e.target == s:
                comm = e.comm
                edges[i] = PiperEdge(v, nu, e.comm)
        edges.append(PiperEdge(nu, s, comm))

        def rekey(m: Mapping, old: Hashable, new: Hashable) -> dict:
            return {(new if k == old else k): x for k, x in m.items()}

        nv = nodes[idx[v]]
        nodes[idx[v]] = dataclasses.replace(nv, tmpcs={t: tuple(dataclasses.replace(c, sync_bw=rekey(c.sync_bw, s, nu)) for c in lst) for t, lst in nv.tmpcs.items()})
        ns = nodes[idx[s]]
        nodes[idx[s]] = dataclasses.replace(ns, tmpcs={t: tuple(dataclasses.replace(c, sync_fw=rekey(c.sync_fw, v, nu)) for c in lst) for t, lst in ns.tmpcs.items()})
        copy = {t: tuple(dataclasses.replace(c, sync_fw={v: c.sync_fw[prev[v]]}, sync_bw={s: c.sync_bw[s]}) for c in lst)
                for t, lst in nv.tmpcs.items()}
        nodes.append(PiperNode(nu, copy, name))
    return dataclasses.replace(prob, nodes=tuple(nodes), edges=tuple(edges))


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


def _num(x: float) -> "float | None":
    return None if x is None or not math.isfinite(x) else float(x)


@dataclass(frozen=True)
class PiperStage:
    """One stage: its nodes (input ids, in input order), data- and tensor-parallel degrees, the
    TMPC chosen per node (``{node id: TMPC id}``), and the evaluator's TPS and memory."""

    nodes: tuple
    d: int
    t: int
    tmpcs: Mapping[Hashable, str]
    tps: float = math.nan
    memory: float = math.nan

    @property
    def devices(self) -> int:
        return self.d * self.t

    def to_json(self) -> dict:
        return {"nodes": list(self.nodes), "dataParallelDegree": self.d, "tensorParallelDegree": self.t,
                "TMPCids": {str(k): v for k, v in self.tmpcs.items()}, "tps": _num(self.tps),
                "memory": _num(self.memory)}


@dataclass(frozen=True)
class TrainingEvaluation:
    """The evaluator's verdict on a plan: ``tps`` (inf when out of memory)."""

    tps: float
    feasible: bool
    stages: tuple
    devices: int
    batch: int
    issues: tuple = ()


@dataclass(frozen=True, eq=False)
class TrainingPlan:
    """A training plan and how it was found.

    Attributes
    ----------
    objective : float
        Time per sample of the plan as the evaluator scores it (``inf`` if no plan fits).
    status : str
        ``"optimal"`` (exact knapsack on every stage), ``"feasible"`` (the knapsack heuristic,
        or a baseline) or ``"infeasible"``.
    stages : tuple of PiperStage
        In pipeline order.
    table : numpy.ndarray or None
        ``table[k, s]``: the best TPS on at most ``k`` devices with the sum of data-parallel
        degrees at most ``s`` (exactly ``s`` with ``exact_batch``), for ``k <= K`` and
        ``s <= min(N, K)`` (a larger ``s`` cannot be used); ``inf`` where nothing fits.
    """

    objective: float
    status: str
    stages: tuple
    solver: str
    devices: int
    memory: float
    bandwidth: float
    batch: int
    exact_batch: bool = False
    table: "np.ndarray | None" = None
    dp_objective: float = math.nan
    runtime: float = 0.0
    num_ideals: int = 0
    pairs_visited: int = 0
    server_size: "int | None" = None
    intra_bandwidth: "float | None" = None

    @property
    def feasible(self) -> bool:
        return math.isfinite(self.objective)

    @property
    def devices_used(self) -> int:
        return sum(s.d * s.t for s in self.stages)

    @property
    def batch_used(self) -> int:
        return sum(s.d for s in self.stages)

    def tps(self, k: int, s: "int | None" = None) -> float:
        """Best TPS on at most ``k`` devices with sum of d at most ``s`` (from the table)."""
        if self.table is None:
            raise ValueError("this plan has no table (baselines do not compute one)")
        if s is None:
            s = self.batch
        if self.exact_batch and s >= self.table.shape[1]:
            return math.inf
        return float(self.table[k, min(s, self.table.shape[1] - 1)])

    def node_stage(self) -> dict:
        """``{node id: stage index}``."""
        return {v: i for i, st in enumerate(self.stages) for v in st.nodes}

    def to_json(self, include_table: bool = False) -> dict:
        out = {
            "objective": _num(self.objective),
            "status": self.status,
            "solver": self.solver,
            "devices": self.devices,
            "memory": self.memory,
            "bandwidth": self.bandwidth,
            "batch": self.batch,
            "exact_batch": self.exact_batch,
            "server_size": self.server_size,
            "intra_bandwidth": self.intra_bandwidth,
            "devices_used": self.devices_used,
            "batch_used": self.batch_used,
            "runtime": self.runtime,
            "num_ideals": self.num_ideals,
            "pairs_visited": self.pairs_visited,
            "stages": [s.to_json() for s in self.stages],
        }
        if include_table and self.table is not None:
            out["table"] = [[_num(x) for x in row] for row in self.table.tolist()]
        return out


# ---------------------------------------------------------------------------------------------
# The evaluator (independent of the DP)
# ---------------------------------------------------------------------------------------------


def _adjacency(prob: PiperProblem) -> tuple:
    cache = prob.__dict__.get("_piper_adj")
    if cache is None:
        preds: dict = {nd.id: [] for nd in prob.nodes}
        succs: dict = {nd.id: [] for nd in prob.nodes}
        for e in prob.edges:
            preds[e.target].append((e.source, float(e.comm)))
            succs[e.source].append((e.target, float(e.comm)))
        tm = {(nd.id, t, c.id): c for nd in prob.nodes for t, lst in nd.tmpcs.items() for c in lst}
        cache = (preds, succs, tm)
        object.__setattr__(prob, "_piper_adj", cache)
    return cache


def stage_cost(prob: PiperProblem, nodes: Iterable, d: int, t: int, tmpcs: Mapping, y: int) -> tuple:
    """``(tps, memory)`` of one stage in the cost model, ``y = ceil(s / d)``; raises on a TMPC
    that does not exist. The building block of :func:`evaluate_training`."""
    preds, succs, tm = _adjacency(prob)
    members = set(nodes)
    compute = edge_bytes = sync_bytes = dp_bytes = memory = 0.0
    for v in sorted(members, key=prob.index.__getitem__):
        key = (v, t, tmpcs.get(v) if isinstance(tmpcs, Mapping) else None)
        c = tm.get(key)
        if c is None:
            raise InvalidGraphError(f"node {v!r}: no TMPC {key[2]!r} for t={t}")
        compute += c.time
        for u, cost in preds[v]:
            if u not in members:
                edge_bytes += 2 * cost
                sync_bytes += 2 * c.sync_fw[u]
        for w, cost in succs[v]:
            if w not in members:
                edge_bytes += 2 * cost
                sync_bytes += 2 * c.sync_bw[w]
        dp_bytes += 4 * (d - 1) * c.params / d / prob.batch
        memory += c.mem_a * y + c.mem_b
    if prob.server_size is None:
        tps = ((edge_bytes + sync_bytes) / d + dp_bytes) / prob.bandwidth + compute / d
    else:
        b_ar = prob.intra_bandwidth if t * d <= prob.server_size else prob.bandwidth
        tps = (edge_bytes / d) / prob.bandwidth + (sync_bytes / d) / prob.intra_bandwidth + dp_bytes / b_ar + compute / d
    return tps, memory


def evaluate_training(prob: PiperProblem, stages: Sequence, *, exact_batch: bool = False) -> TrainingEvaluation:
    """Score a plan in the Piper cost model.

    ``stages`` are :class:`PiperStage` (or ``(nodes, d, t, {node: TMPC id})`` tuples) in pipeline
    order. Malformed plans (a node missing or repeated, a stage before one it depends on, d not
    dividing N, too many devices, sum of d over N) raise :class:`InvalidGraphError`; a plan that
    does not fit in memory gets ``tps = inf`` and ``feasible = False``.
    """
    norm = []
    for i, st in enumerate(stages):
        if isinstance(st, PiperStage):
            norm.append((tuple(st.nodes), int(st.d), int(st.t), dict(st.tmpcs)))
        else:
            nodes, d, t, ch = st
            norm.append((tuple(nodes), int(d), int(t), dict(ch)))
    if not norm:
        raise InvalidGraphError("a plan needs at least one stage")
    where: dict = {}
    total_dev = total_d = 0
    for i, (nodes, d, t, ch) in enumerate(norm):
        for v in nodes:
            if v not in prob.index:
                raise InvalidGraphError(f"stage {i}: unknown node {v!r}")
            if v in where:
                raise InvalidGraphError(f"node {v!r} is in stages {where[v]} and {i}")
            where[v] = i
        if d < 1 or prob.batch % d:
            raise InvalidGraphError(f"stage {i}: data-parallel degree {d} does not divide the batch {prob.batch}")
        if t < 1:
            raise InvalidGraphError(f"stage {i}: tensor-parallel degree {t} < 1")
        if prob.server_size is not None and prob.server_size % t:
            raise InvalidGraphError(f"stage {i}: tensor-parallel degree {t} does not divide the server size "
                                    f"{prob.server_size} (tensor parallelism stays inside a server)")
        if set(ch) != set(nodes):
            raise InvalidGraphError(f"stage {i}: the TMPC choice must name exactly the stage's nodes")
        total_dev += d * t
        total_d += d
    missing = [nd.id for nd in prob.nodes if nd.id not in where]
    if missing:
        raise InvalidGraphError(f"nodes {missing[:5]} are in no stage")
    for e in prob.edges:
        if where[e.source] > where[e.target]:
            raise InvalidGraphError(f"edge {e.source!r} -> {e.target!r} goes from stage {where[e.source]} "
                                    f"back to stage {where[e.target]}")
    if total_dev > prob.devices:
        raise InvalidGraphError(f"the plan uses {total_dev} devices, more than {prob.devices}")
    if total_d > prob.batch or (exact_batch and total_d != prob.batch):
        raise InvalidGraphError(f"the data-parallel degrees sum to {total_d}; the batch is {prob.batch}")
    suffix = total_d
    out = []
    worst = 0.0
    feasible = True
    issues = []
    for i, (nodes, d, t, ch) in enumerate(norm):
        y = -(-suffix // d)
        suffix -= d
        tps, mem = stage_cost(prob, nodes, d, t, ch, y)
        if mem > prob.memory:
            feasible = False
            issues.append(f"stage {i} needs {mem:.6g} bytes per device, over {prob.memory:.6g}")
        worst = max(worst, tps)
        out.append(PiperStage(tuple(sorted(nodes, key=prob.index.__getitem__)), d, t, ch, tps, mem))
    return TrainingEvaluation(worst if feasible else math.inf, feasible, tuple(out), total_dev, total_d, tuple(issues))


# ---------------------------------------------------------------------------------------------
# The DP (Rust)
# ---------------------------------------------------------------------------------------------


def _flatten(prob: PiperProblem, tensor_parallel: bool, recompute: bool) -> tuple:
    idx = prob.index
    n = len(prob.nodes)
    es = np.array([idx[e.source] for e in prob.edges], dtype=np.int64)
    ed = np.array([idx[e.target] for e in prob.edges], dtype=np.int64)
    ec = np.array([float(e.comm) for e in prob.edges], dtype=np.float64)
    inc: list = [[] for _ in range(n)]
    out: list = [[] for _ in range(n)]
    for e in prob.edges:
        inc[idx[e.target]].append(e.source)
        out[idx[e.source]].append(e.target)
    cols: dict = {k: [] for k in ("node", "t", "time", "param", "a", "b")}
    sfw, sbw, sfo, sbo = [], [], [0], [0]
    back = []  # tmpc row -> (node id, t, TMPC id)
    for i, nd in enumerate(prob.nodes):
        for t in sorted(nd.tmpcs):
            if t > 1 and not tensor_parallel:
                continue
            if prob.server_size is not None and prob.server_size % t:
                continue
            for c in nd.tmpcs[t]:
                if c.is_recompute and not recompute:
                    continue
                cols["node"].append(i)
                cols["t"].append(int(t))
                cols["time"].append(float(c.time))
                cols["param"].append(float(c.params))
                cols["a"].append(float(c.mem_a))
                cols["b"].append(float(c.mem_b))
                sfw.extend(float(c.sync_fw[u]) for u in inc[i])
                sbw.extend(float(c.sync_bw[w]) for w in out[i])
                sfo.append(len(sfw))
                sbo.append(len(sbw))
                back.append((nd.id, int(t), c.id))
    arr = {k: np.array(v, dtype=np.int64 if k in ("node", "t") else np.float64) for k, v in cols.items()}
    return (n, es, ed, ec, arr["node"], arr["t"], arr["time"], arr["param"], arr["a"], arr["b"],
            np.array(sfo, dtype=np.int64), np.array(sfw, dtype=np.float64),
            np.array(sbo, dtype=np.int64), np.array(sbw, dtype=np.float64)), back


def _settings(prob: PiperProblem, devices, memory, bandwidth, max_batch, server_size=None,
              intra_bandwidth=None) -> PiperProblem:
    changes = {}
    if server_size is not None or intra_bandwidth is not None:
        changes["server_size"] = server_size
        changes["intra_bandwidth"] = None if intra_bandwidth is None else float(intra_bandwidth)
    if devices is not None:
        changes["devices"] = devices
    if memory is not None:
        changes["memory"] = float(memory)
    if bandwidth is not None:
        changes["bandwidth"] = float(bandwidth)
    if max_batch is not None:
        changes["batch"] = max_batch
    return prob.replace(**changes) if changes else prob


def plan_training(
    prob: PiperProblem,
    *,
    devices: "int | None" = None,
    memory: "float | None" = None,
    bandwidth: "float | None" = None,
    max_batch: "int | None" = None,
    exact_batch: bool = False,
    data_parallel: bool = True,
    tensor_parallel: bool = True,
    recompute: bool = True,
    knapsack: str = "heuristic",
    exact_max_nodes: int = 20,
    max_ideals: int = DEFAULT_MAX_IDEALS,
    server_size: "int | None" = None,
    intra_bandwidth: "float | None" = None,
) -> TrainingPlan:
    """Piper's DP: the best training plan, and the table of best TPS for every ``k <= K``, ``s``.

    Parameters
    ----------
    prob : PiperProblem
    devices, memory, bandwidth, max_batch : optional
        Override K, M (bytes per device), B (bytes/s) and N (microbatches per batch).
    exact_batch : bool
        Require the data-parallel degrees to sum to exactly N (default: at most N).
    data_parallel, tensor_parallel, recompute : bool
        Turn off data parallelism (d = 1), tensor parallelism (t = 1) or activation
        recomputation (drop TMPCs marked ``recompute``): the paper's ablation baselines.
    knapsack : {"heuristic", "exact", "generic"}
        Per-stage TMPC choice: the authors' bang-per-buck greedy; an exact branch and bound for
        stages of at most ``exact_max_nodes`` nodes (the greedy above); or the greedy computed
        from scratch on every stage (a cross-check of the incremental fast path).
    server_size, intra_bandwidth : optional
        A two-level network (see :class:`PiperProblem`), e.g. ``server_size=8,
        intra_bandwidth=300e9`` with ``bandwidth=25e9``.

    Returns
    -------
    TrainingPlan
        Scored by :func:`evaluate_training` (the DP's own value must agree with it).
    """
    from stagecut import _core

    prob = _settings(prob, devices, memory, bandwidth, max_batch, server_size, intra_bandwidth)
    if knapsack not in ("heuristic", "exact", "generic"):
        raise InvalidGraphError(f"knapsack must be 'heuristic', 'exact' or 'generic', not {knapsack!r}")
    arrays, back = _flatten(prob, tensor_parallel, recompute)
    t0 = _time.perf_counter()
    res = _core.piper_plan(*arrays, int(prob.devices), float(prob.memory), float(prob.bandwidth),
                           int(prob.batch), bool(exact_batch), bool(data_parallel), knapsack,
                           int(exact_max_nodes), int(max_ideals), prob.server_size,
                           None if prob.intra_bandwidth is None else float(prob.intra_bandwidth))
    runtime = _time.perf_counter() - t0
    table = np.asarray(res["table"]).reshape(prob.devices + 1, res["cols"])
    table.setflags(write=False)
    dp_obj = float(res["objective"])
    n_exact = knapsack == "exact" and exact_max_nodes >= len(prob.nodes)
    common = dict(solver="piper-dp", devices=prob.devices, memory=prob.memory, bandwidth=prob.bandwidth,
                  batch=prob.batch, exact_batch=exact_batch, table=table, dp_objective=dp_obj, runtime=runtime,
                  num_ideals=res["num_ideals"], pairs_visited=res["pairs_visited"],
                  server_size=prob.server_size, intra_bandwidth=prob.intra_bandwidth)
    if not math.isfinite(dp_obj):
        return TrainingPlan(objective=math.inf, status="infeasible", stages=(), **common)
    stages = []
    for st in res["stages"]:
        ch = {}
        for v, row in zip(st["nodes"], st["tmpcs"]):
            nid, t, cid = back[row]
            ch[nid] = cid
        stages.append((tuple(prob.nodes[v].id for v in st["nodes"]), int(st["d"]), int(st["t"]), ch))
    ev = evaluate_training(prob, stages, exact_batch=exact_batch)
    if not ev.feasible or abs(ev.tps - dp_obj) > 1e-9 * max(1.0, abs(dp_obj)):
        raise SolverError(f"internal error: the DP says {dp_obj!r}, the evaluator {ev.tps!r} ({ev.issues})")
    return TrainingPlan(objective=ev.tps, status="optimal" if n_exact else "feasible", stages=ev.stages, **common)


# ---------------------------------------------------------------------------------------------
# Baselines
# ---------------------------------------------------------------------------------------------


def _choice(prob: PiperProblem, t: int, ar: bool) -> "dict | None":
    """Every node on its first TMPC with (``ar``) or without activation recomputation at t."""
    ch = {}
    for nd in prob.nodes:
        c = next((c for c in nd.tmpcs.get(t, ()) if c.is_recompute == ar), None)
        if c is None:
            return None
        ch[nd.id] = c.id
    return ch


def _equi_layouts(prob: PiperProblem, layer_name: "str | None", separate: bool):
    """Yield lists of stages (lists of node indices) the PipeDream-2BW-like planner tries."""
    n = len(prob.nodes)
    order = _kahn_stack_order(prob)
    K = prob.devices
    if layer_name is None:
        for stages in range(1, min(K, n) + 1):
            per, larger = divmod(n, stages)
            out, nxt = [], 0
            for st in range(stages):
                size = per + (st >= stages - larger)
                out.append(order[nxt:nxt + size])
                nxt += size
            yield out
        return
    idx = prob.index
    layers = [v for v in order if prob.nodes[v].name == layer_name]
    lset = set(layers)
    initial: list = []
    final: list = []
    ini, fin = set(), set()
    edges = [(idx[e.source], idx[e.target]) for e in prob.edges]
    while len(layers) + len(initial) + len(final) < n:
        before = len(initial) + len(final)
        for u, v in edges:
            if u not in ini and u not in lset and u not in fin and (v in ini or v in lset):
                initial.append(u)
                ini.add(u)
            if v not in ini and v not in lset and v not in fin and (u in lset or u in fin):
                final.append(v)
                fin.add(v)
        if len(initial) + len(final) == before:
            raise InvalidGraphError(f"some nodes are neither before nor after the {layer_name!r} layers")
    for sep in ((0, 1) if separate else (0,)):
        for stages in range(1 + 2 * sep, min(K, len(layers) + 2 * sep) + 1):
            out: list = [[] for _ in range(stages)]
            ts = stages - 2 * sep
            per, larger = divmod(len(layers), ts)
            nxt = 0
            for st in range(sep, stages - sep):
                size = per + (st >= stages - sep - larger)
                out[st].extend(layers[nxt:nxt + size])
                nxt += size
            out[0].extend(initial)
            out[-1].extend(final)
            yield out


def plan_equi(
    prob: PiperProblem,
    *,
    tensor_parallel: bool = True,
    layer_name: "str | None" = None,
    separate: bool = True,
    devices: "int | None" = None,
    memory: "float | None" = None,
    bandwidth: "float | None" = None,
    max_batch: "int | None" = None,
    server_size: "int | None" = None,
    intra_bandwidth: "float | None" = None,
) -> TrainingPlan:
    """The "equi" baseline (PipeDream-2BW-like, Section 5): equal groups of layers, the same d
    and t on every stage, activation recomputation everywhere or nowhere; best of all of them.

    With ``layer_name`` (e.g. ``"ParallelTransformerLayer"``) only those layers are split evenly;
    the nodes before them join the first stage and those after the last (and, with
    ``separate``, also try them as stages of their own). Without it, all nodes are split evenly
    in topological order (the paper's GNMT / ResNet runs). ``tensor_parallel=False`` is
    "equi-no-TP".
    """
    prob = _settings(prob, devices, memory, bandwidth, max_batch, server_size, intra_bandwidth)
    t0 = _time.perf_counter()
    K, N = prob.devices, prob.batch
    ts = sorted({t for nd in prob.nodes for t in nd.tmpcs})
    ts = [t for t in ts if all(t in nd.tmpcs for nd in prob.nodes)
          and (prob.server_size is None or prob.server_size % t == 0)]
    choices = {(t, ar): _choice(prob, t, ar) for t in ts for ar in (False, True)}
    best = None
    for layout in _equi_layouts(prob, layer_name, separate):
        ns = len(layout)
        d = 1
        while ns * d <= min(K, N):
            if N % d == 0:
                for t in ts:
                    if ns * d * t > K:
                        break
                    if t > 1 and not tensor_parallel:
                        break
                    for ar in (False, True):
                        ch = choices[(t, ar)]
                        if ch is None:
                            continue
                        stages = [([prob.nodes[v].id for v in grp], d, t, {prob.nodes[v].id: ch[prob.nodes[v].id] for v in grp})
                                  for grp in layout]
                        ev = evaluate_training(prob, stages)
                        if ev.feasible and (best is None or ev.tps < best.tps):
                            best = ev
            d += 1
    runtime = _time.perf_counter() - t0
    name = "equi" if tensor_parallel else "equi-no-tp"
    common = dict(solver=name, devices=K, memory=prob.memory, bandwidth=prob.bandwidth, batch=N, runtime=runtime,
                  server_size=prob.server_size, intra_bandwidth=prob.intra_bandwidth)
    if best is None:
        return TrainingPlan(objective=math.inf, status="infeasible", stages=(), **common)
    return TrainingPlan(objective=best.tps, status="feasible", stages=best.stages, **common)


def plan_baselines(prob: PiperProblem, *, layer_name: "str | None" = None, **settings: Any) -> dict:
    """Piper and the paper's baselines on one problem: ``{"piper", "no-dp", "no-tp", "no-ar",
    "equi", "equi-no-tp"}`` -> :class:`TrainingPlan`. ``settings`` go to :func:`plan_training`
    (``devices``, ``memory``, ``bandwidth``, ``max_batch``)."""
    keys = {k: settings[k] for k in ("devices", "memory", "bandwidth", "max_batch", "server_size", "intra_bandwidth")
            if k in settings}
    return {
        "piper": plan_training(prob, **settings),
        "no-dp": plan_training(prob, data_parallel=False, **settings),
        "no-tp": plan_training(prob, tensor_parallel=False, **settings),
        "no-ar": plan_training(prob, recompute=False, **settings),
        "equi": plan_equi(prob, layer_name=layer_name, **keys),
        "equi-no-tp": plan_equi(prob, layer_name=layer_name, tensor_parallel=False, **keys),
    }
