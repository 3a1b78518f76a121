"""Replicated stages and a hierarchical topology (PipeDream, Narayanan et al., SOSP 2019, Section 3.1).

Both extend the max-load model of :func:`stagecut.evaluate` (accelerators only) and keep its
contiguous splits: the stages, in pipeline order, form a chain of ideals of the forward graph
with colocation classes contracted. Each has one evaluator (:func:`evaluate_replicated`,
:func:`evaluate_hierarchical`, written from the formulas below and sharing no code with the
DPs) and one exact DP (:func:`partition_replicated`, :func:`partition_hierarchical`) whose plan
it re-scores.

Replication
    A stage ``S`` may run on ``r`` identical accelerators in data parallel: each replica takes
    every ``r``-th sample, so it pays ``1/r`` of the stage's compute ``T(S)`` and of its
    tensor-once communication ``C(S)`` (the evaluator's), and its parameters ``W(S)`` (the
    nodes' memory, or ``weights=``) are synchronised by a ring all-reduce over a link of
    bandwidth ``B`` (bytes per time unit), which takes ``4 (r - 1) W / (r B)`` (PipeDream's
    ``W^m``)::

        load(S, r) = (T(S) + C(S)) / r + 4 (r - 1) W(S) / (r B)

    The sync is charged in full to every sample, not amortised and not overlapped with the
    compute as PipeDream's ``max(compute, sync) / m`` is: an upper bound on it. The DP chooses
    the chain and every ``r_i`` with ``sum r_i <= devices``; each replica holds the whole stage
    (``memory`` per accelerator).
Hierarchical topology
    ``servers`` servers of ``gpus_per_server`` accelerators; a link inside a server has
    bandwidth ``B_in``, a link across servers ``B_out``. A node's ``comm`` is its transfer time
    inside a server; across servers it costs ``comm * B_in / B_out``. As PipeDream's
    hierarchical DP, the plan has two levels: a chain of *blocks*, block ``j`` replicated on
    ``m_j`` whole servers (``sum m_j <= servers``), and inside each of its servers the same
    chain of stages, stage ``t`` on ``r_t`` of the server's accelerators
    (``sum r_t <= gpus_per_server``); consecutive stages of a block are therefore within a
    server, and only a block's boundary crosses servers. A stage pays ``comm`` for a crossing
    that stays in its block and ``comm * B_in / B_out`` for one that leaves it (a producer whose
    consumers are all in its block pays at ``B_in``), and a hierarchical all-reduce of its
    parameters, first inside the server, then across its block's servers::

        load = (T + C_in + C_out * B_in / B_out) / (r m) + 4 (r - 1) W / (r B_in) + 4 (m - 1) W / (m B_out)

    With one server this is the replication model with ``B = B_in``.

Examples
--------
>>> import stagecut as sc
>>> g = sc.Graph.chain([8.0, 2.0, 2.0])
>>> plan = partition_replicated(g, devices=4, bandwidth=1.0, weights={0: 1.0})
>>> plan.objective, plan.stats["replicas"]  # 8 / 3 + 4 * 2 * 1 / 3: node 0 on 3 replicas
(5.333333333333333, '3,1')
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

from stagecut.colocation import ColocationClasses, _class_edges
from stagecut.errors import InvalidArgumentError, InvalidGraphError, internal_error
from stagecut.graph import ACCELERATOR, Graph, NodeId
from stagecut.graph_check import check_graph
from stagecut.results import DeviceLoad, Evaluation, Plan, Stat
from stagecut.throughput._replication_dp import ALONG, Choices, Rows, _Model
from stagecut.throughput.evaluate import is_contiguous, is_convex
from stagecut.validate import check_int, check_number

__all__ = ["ALONG", "evaluate_hierarchical", "evaluate_replicated", "partition_hierarchical",
           "partition_replicated"]

#: Whether the hierarchical DP reuses the open chain from each ideal (the plain DP when False: a reference).
_SHARE = True

#: A stage of a plan: its node ids and its replicas.
StageSpec = tuple[Sequence[NodeId], int]
#: A block of a hierarchical plan: its servers and its stages.
BlockSpec = tuple[int, Sequence[StageSpec]]


# ---------------------------------------------------------------------------- the evaluator
def _weights(graph: Graph, weights: Mapping[NodeId, float] | None) -> list[float]:
    if weights is None:
        return [nd.memory for nd in graph.nodes]
    if not isinstance(weights, Mapping):
        raise InvalidArgumentError(f"weights must map node ids to parameter sizes, got {type(weights).__name__}")
    for v in weights:
        if v not in graph.index:
            raise InvalidArgumentError(f"weights: unknown node {v!r}")
    return [check_number(weights.get(nd.id, nd.memory), f"weights[{nd.id!r}]", error=InvalidArgumentError)
            for nd in graph.nodes]


def _memory(graph: Graph, memory: float | None) -> float:
    if memory is None:
        return check_number(graph.defaults.get("memory", math.inf), "memory (the graph's default)",
                            allow_inf=True)
    return check_number(memory, "memory", allow_inf=True, error=InvalidArgumentError)


def evaluate_hierarchical(graph: Graph, blocks: Sequence[BlockSpec], *, servers: int, gpus_per_server: int,
                          bandwidth_in: float, bandwidth_out: float, memory: float | None = None,
                          weights: Mapping[NodeId, float] | None = None) -> Evaluation:
    """Score a two-level plan in the hierarchical model (see the module docs).

    Parameters
    ----------
    graph : Graph
    blocks : sequence of (servers, stages)
        In pipeline order; each block's ``stages`` are (node ids, replicas per server) in order.
    servers, gpus_per_server : int
    bandwidth_in, bandwidth_out : float
        Link bandwidths inside and across servers (bytes per time unit).
    memory : float, optional
        Per accelerator; default the graph's, else unlimited.
    weights : mapping node id -> float, optional
        Parameter bytes of each node synchronised by a replicated stage; default its memory.

    Returns
    -------
    Evaluation
        ``objective``: the largest stage load; one :class:`~stagecut.results.DeviceLoad` per stage
        in pipeline order (``device`` names its servers and accelerators, ``kind_index`` is its
        first accelerator; ``parts``: ``compute``, ``comm``, ``sync``); ``feasible`` with the
        ``issues`` (memory, budgets, a node an accelerator cannot run, a split colocation class,
        stages or blocks that do not form a pipeline); ``acyclic_quotient`` of the stages.

    Raises
    ------
    InvalidGraphError
        A node in no stage, in two, or unknown; a replica count below 1.
    InvalidArgumentError
        A bad count, bandwidth, memory or weight.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([4.0, 4.0], comm=1.0)
    >>> ev = evaluate_hierarchical(g, [(1, [([0], 1)]), (1, [([1], 1)])], servers=2, gpus_per_server=1,
    ...                            bandwidth_in=4.0, bandwidth_out=1.0)
    >>> ev.objective  # 4 + 1 * 4 / 1: the transfer crosses servers
    8.0
    """
    check_graph(graph)
    n_srv = check_int(servers, "servers", minimum=1)
    per = check_int(gpus_per_server, "gpus_per_server", minimum=1)
    b_in = check_number(bandwidth_in, "bandwidth_in", positive=True, error=InvalidArgumentError)
    b_out = check_number(bandwidth_out, "bandwidth_out", positive=True, error=InvalidArgumentError)
    cap, w = _memory(graph, memory), _weights(graph, weights)
    where: dict[int, tuple[int, int]] = {}  # node position -> (block, stage)
    specs: list[tuple[int, int, int]] = []  # (block, servers, replicas) of each stage
    for j, (m, stages) in enumerate(blocks):
        m = check_int(m, f"blocks[{j}] servers", minimum=1, error=InvalidGraphError)
        for ids, r in stages:
            r = check_int(r, f"blocks[{j}] replicas", minimum=1, error=InvalidGraphError)
            for v in ids:
                if v not in graph.index:
                    raise InvalidGraphError(f"blocks[{j}]: unknown node {v!r}")
                if graph.index[v] in where:
                    raise InvalidGraphError(f"node {v!r} is in two stages")
                where[graph.index[v]] = (j, len(specs))
            specs.append((j, m, r))
    missing = [nd.id for i, nd in enumerate(graph.nodes) if i not in where]
    if missing:
        raise InvalidGraphError(f"node {missing[0]!r} is in no stage ({len(missing)} in all)")
    ratio = b_in / b_out
    members: list[list[int]] = [[] for _ in specs]
    for i, (_, t) in sorted(where.items()):
        members[t].append(i)
    issues: list[str] = []
    loads: list[DeviceLoad] = []
    first_server, first_gpu, block_at = 0, 0, -1
    for t, (j, m, r) in enumerate(specs):
        if j != block_at:  # the block's first server: after those of the blocks before it
            first_server = sum(int(b[0]) for b in blocks[:j])
            block_at, first_gpu = j, 0
        nodes = [graph.nodes[i] for i in members[t]]
        compute = math.fsum(nd.time(ACCELERATOR) for nd in nodes if nd.supports(ACCELERATOR))
        terms = []
        for i, nd in enumerate(graph.nodes):  # tensor-once: a producer's crossing of the stage's boundary
            targets = [where[c] for c in graph.succ[i]]
            if not nd.comm:
                continue
            if where[i][1] == t and any(s != t for _, s in targets):
                terms.append(nd.comm * (ratio if any(b != j for b, _ in targets) else 1.0))
            elif where[i][1] != t and any(s == t for _, s in targets):
                terms.append(nd.comm * (ratio if where[i][0] != j else 1.0))
        comm, par = math.fsum(terms), math.fsum(w[i] for i in members[t])
        sync = 4 * (r - 1) * par / (r * b_in) + 4 * (m - 1) * par / (m * b_out)
        load = (compute + comm) / (r * m) + sync
        mem = math.fsum(nd.memory for nd in nodes)
        mine = [f"node {nd.id!r} cannot run on an accelerator" for nd in nodes if not nd.supports(ACCELERATOR)][:1]
        if mem > cap:
            mine.append(f"memory {mem:g} exceeds the limit {cap:g}")
        issues += [f"stage {t}: {x}" for x in mine]
        gpu = first_server * per + first_gpu
        name = f"accelerator:{gpu}" if r * m == 1 else (
            f"servers {first_server}-{first_server + m - 1} x gpus {first_gpu}-{first_gpu + r - 1}")
        loads.append(DeviceLoad(index=t, device=name, kind=ACCELERATOR, kind_index=gpu,
                                nodes=tuple(nd.id for nd in nodes), load=load,
                                parts={"compute": compute / (r * m), "comm": comm / (r * m), "sync": sync},
                                memory=mem, feasible=not mine, issues=tuple(mine)))
        first_gpu += r
    used = sum(m for m, _ in blocks)
    if used > n_srv:
        issues.append(f"uses {used} servers, only {n_srv} available")
    for j, (_, stages) in enumerate(blocks):
        gpus = sum(r for _, r in stages)
        if gpus > per:
            issues.append(f"block {j} uses {gpus} accelerators per server, only {per} in a server")
    stage_of = [where[i][1] for i in range(len(graph))]
    classes: dict[object, set[int]] = {}
    for i, nd in enumerate(graph.nodes):
        if nd.colocation is not None:
            classes.setdefault(nd.colocation, set()).add(stage_of[i])
    issues += [f"colocation class {c!r} is split across stages" for c, s in classes.items() if len(s) > 1]
    acyclic = is_contiguous(graph, stage_of)
    # the forward class graph (with all-backward classes' edges mirrored) must go forward in the order given
    key = ColocationClasses(graph).key
    class_stage = {key[i]: stage_of[i] for i in range(len(graph))}
    if not acyclic or any(class_stage[a] > class_stage[b] for a, b in _class_edges(graph, key)):
        issues.append("the stages, in the order given, are not a pipeline (a forward edge goes back)")
    if not is_contiguous(graph, [where[i][0] for i in range(len(graph))]):
        issues.append("the blocks are not a pipeline (their quotient graph has a cycle)")
    return Evaluation(objective=max((s.load for s in loads), default=0.0), stages=tuple(loads),
                      feasible=not issues, convex=is_convex(graph, stage_of), acyclic_quotient=acyclic,
                      issues=tuple(issues))


def evaluate_replicated(graph: Graph, stages: Sequence[StageSpec], *, devices: int, bandwidth: float,
                        memory: float | None = None, weights: Mapping[NodeId, float] | None = None) -> Evaluation:
    """Score a replicated pipeline (see the module docs): one server of ``devices`` accelerators.

    Parameters
    ----------
    graph : Graph
    stages : sequence of (node ids, replicas)
        In pipeline order.
    devices : int
        Accelerators; the replicas may not add up to more.
    bandwidth : float
        The all-reduce link's bandwidth (bytes per time unit).
    memory : float, optional
        Per accelerator; default the graph's, else unlimited.
    weights : mapping node id -> float, optional
        Parameter bytes of each node; default its memory.

    Returns
    -------
    Evaluation
        As :func:`evaluate_hierarchical`.

    Raises
    ------
    InvalidGraphError
        A node in no stage, in two, or unknown; a replica count below 1.
    InvalidArgumentError
        A bad ``devices``, ``bandwidth``, memory or weight.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([8.0, 2.0])
    >>> evaluate_replicated(g, [([0], 2), ([1], 1)], devices=3, bandwidth=1.0, weights={0: 0.5}).objective
    5.0
    """
    return evaluate_hierarchical(graph, [(1, stages)], servers=1, gpus_per_server=devices, bandwidth_in=bandwidth,
                                 bandwidth_out=bandwidth, memory=memory, weights=weights)


# ---------------------------------------------------------------------------- the DPs
def _ids(graph: Graph, mask: int) -> list[NodeId]:
    return [graph.nodes[i].id for i in range(mask.bit_length()) if mask >> i & 1]


def _plan(graph: Graph, ev: Evaluation, claimed: float, *, method: str, devices: int, memory: float,
          stats: dict[str, Stat], notes: list[str], t0: float) -> Plan:
    """The plan of a DP's answer, scored by the evaluator (which must agree)."""
    if not ev.feasible or abs(ev.objective - claimed) > 1e-9 * max(1.0, abs(claimed)):
        raise internal_error(f"the {method} DP computed {claimed} but its plan scores {ev.objective} "
                             f"(issues: {list(ev.issues)})")
    return Plan(objective=ev.objective, status="optimal", lower_bound=ev.objective, method=method,
                runtime_s=time.perf_counter() - t0, stats=stats, stages=ev.stages, notes=tuple(notes),
                devices=devices, cpus=0, memory=memory, contiguous=ev.acyclic_quotient)


def _none(method: str, devices: int, memory: float, stats: dict[str, Stat], t0: float) -> Plan:
    return Plan(objective=None, status="infeasible", method=method, runtime_s=time.perf_counter() - t0,
                stats=stats, notes=("no chain of stages fits (memory, or a node no accelerator can run)",),
                devices=devices, cpus=0, memory=memory)


def partition_replicated(graph: Graph, devices: int, bandwidth: float, *, memory: float | None = None,
                         weights: Mapping[NodeId, float] | None = None, along: str = "ideals",
                         max_ideals: int = 4096) -> Plan:
    """The best contiguous pipeline with replicated stages (the module docs' model), exactly.

    A DP over the chains of ideals: ``A[J][d]``, the least bottleneck of a chain from the empty
    ideal to ``J`` on at most ``d`` accelerators, is the least over ideals ``I`` inside ``J``
    and replicas ``r <= d`` of ``max(A[I][d - r], load(J \\ I, r))``. Ideals of the forward
    class DAG (colocation classes contracted, no folding), enumerated in Python: for small
    graphs; ``along="pipedream"`` runs it on PipeDream's path (:mod:`stagecut.throughput.pipedream`),
    whose prefixes are its only ideals, the linear DP for layer graphs.

    Parameters
    ----------
    graph : Graph
    devices : int
        Accelerators (``sum of replicas <= devices``); CPUs are not used.
    bandwidth : float
        The all-reduce link's bandwidth, bytes (the nodes' memory unit) per time unit.
    memory : float, optional
        Per accelerator; each replica holds its whole stage. Default the graph's, else unlimited.
    weights : mapping node id -> float, optional
        Parameter bytes of each node; default its memory.
    along : {"ideals", "pipedream"}
    max_ideals : int

    Returns
    -------
    Plan
        ``method="replicated-dp"``, status ``"optimal"`` (over the chains searched) with the
        objective re-scored by :func:`evaluate_replicated`, or ``"infeasible"``; ``stats``:
        ``replicas`` (per stage, comma-separated), ``ideals``, ``along``; ``notes`` list each
        stage's replicas.

    Raises
    ------
    InvalidArgumentError
        A bad ``devices``, ``bandwidth``, ``memory``, ``weights``, ``along`` or ``max_ideals``.
    TooManyIdealsError
        More than ``max_ideals`` ideals.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([8.0, 2.0, 2.0])  # no memory: no parameters to synchronise
    >>> plan = partition_replicated(g, devices=4, bandwidth=1.0)
    >>> plan.objective, plan.stats["replicas"]  # one stage on 4 replicas: 12 / 4
    (3.0, '4')
    """
    t0 = time.perf_counter()
    check_graph(graph)
    k = check_int(devices, "devices", minimum=1)
    b = check_number(bandwidth, "bandwidth", positive=True, error=InvalidArgumentError)
    cap, w = _memory(graph, memory), _weights(graph, weights)
    model = _Model(graph, along, w, check_int(max_ideals, "max_ideals", minimum=1), cap)
    rows, arg = model.chain(0, model.full, k, 1.0, cap, 1, b, b)
    best = rows.get(model.full, [math.inf] * (k + 1))
    stats: dict[str, Stat] = {"ideals": len(model.ideals), "along": along}
    if not math.isfinite(best[k]):
        return _none("replicated-dp", k, cap, stats, t0)
    stages = [(_ids(graph, s), r) for s, r in model.unwind(arg, 0, model.full, k)]
    ev = evaluate_replicated(graph, stages, devices=k, bandwidth=b, memory=cap, weights=weights)
    stats["replicas"] = ",".join(str(r) for _, r in stages)
    notes = [f"stage {t}: {r} replica(s)" for t, (_, r) in enumerate(stages)]
    return _plan(graph, ev, best[k], method="replicated-dp", devices=k, memory=cap, stats=stats, notes=notes, t0=t0)


def partition_hierarchical(graph: Graph, servers: int, gpus_per_server: int, bandwidth_in: float,
                           bandwidth_out: float, *, memory: float | None = None,
                           weights: Mapping[NodeId, float] | None = None, along: str = "ideals",
                           max_ideals: int = 512) -> Plan:
    """The best two-level pipeline on servers of accelerators (the module docs' model), exactly.

    PipeDream's hierarchical DP, level by level: for every block (a difference of two ideals
    ``A`` inside ``B``) and every count ``m`` of servers it is replicated on, the best chain of
    stages inside one server (:func:`partition_replicated`'s DP on the ideals between ``A`` and
    ``B``, at most ``gpus_per_server`` accelerators, the block's boundary at ``B_out``); then
    the chain of blocks over the servers, ``O[B][s] = min over A, m <= s of
    max(O[A][s - m], block(A, B, m))``. Exact for the two-level model; ``O(ideals^4)`` at worst:
    small graphs, or ``along="pipedream"`` on layer graphs. The chain from ``A`` reuses the
    rows of the open chain from ``A`` that no crossing out of ``B`` can change, and a block whose
    compute over its accelerators already reaches the best found is skipped; neither changes the
    plan (about 1-1.5 s of CPU on GNMT's 73-ideal path, 10-11 s without them).

    Parameters
    ----------
    graph : Graph
    servers, gpus_per_server : int
    bandwidth_in, bandwidth_out : float
        Inside and across servers, bytes per time unit; a node's ``comm`` is its time inside a server.
    memory : float, optional
        Per accelerator; default the graph's, else unlimited.
    weights : mapping node id -> float, optional
        Parameter bytes of each node; default its memory.
    along : {"ideals", "pipedream"}
    max_ideals : int

    Returns
    -------
    Plan
        ``method="hierarchical-dp"``, status ``"optimal"`` (re-scored by
        :func:`evaluate_hierarchical`) or ``"infeasible"``; ``devices`` is
        ``servers * gpus_per_server``; ``stats``: ``blocks`` (servers per block), ``replicas``
        (accelerators per stage in each server, blocks separated by ``|``), ``ideals``, ``along``.

    Raises
    ------
    InvalidArgumentError
        A bad count, bandwidth, ``memory``, ``weights``, ``along`` or ``max_ideals``.
    TooManyIdealsError
        More than ``max_ideals`` ideals.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([4.0, 4.0, 4.0, 4.0], comm=1.0)
    >>> plan = partition_hierarchical(g, servers=2, gpus_per_server=2, bandwidth_in=8.0, bandwidth_out=1.0,
    ...                               weights=dict.fromkeys(range(4), 100.0))
    >>> # two stages in one server (8 + 1 each) beat four on both: the crossing costs 1 * 8 / 1
    >>> plan.objective, plan.stats["blocks"], plan.stats["replicas"]
    (9.0, '1', '1,1')
    """
    t0 = time.perf_counter()
    check_graph(graph)
    n_srv = check_int(servers, "servers", minimum=1)
    per = check_int(gpus_per_server, "gpus_per_server", minimum=1)
    b_in = check_number(bandwidth_in, "bandwidth_in", positive=True, error=InvalidArgumentError)
    b_out = check_number(bandwidth_out, "bandwidth_out", positive=True, error=InvalidArgumentError)
    cap, w = _memory(graph, memory), _weights(graph, weights)
    model = _Model(graph, along, w, check_int(max_ideals, "max_ideals", minimum=1), cap)
    ratio = b_in / b_out
    outer: dict[int, list[float]] = {0: [0.0] * (n_srv + 1)}
    choice: dict[tuple[int, int], tuple[int, int]] = {}
    inner: dict[tuple[int, int, int], Choices] = {}
    opened: dict[tuple[int, int], tuple[Rows, Choices]] = {}  # the open chain from each lo on m servers
    for hi in model.ideals[1:]:
        row = [math.inf] * (n_srv + 1)
        for lo in model.ideals:
            if lo == hi or lo & ~hi or lo not in outer:
                continue
            # each stage of a chain on m servers of per accelerators is at least its compute over its
            # replicas, so the chain is at least the block's compute over per * m (less a rounding slack)
            floor = model.compute(hi & ~lo) * (1 - 1e-9)
            for m in range(1, n_srv + 1):
                if _SHARE and all(max(outer[lo][s - m], floor / (per * m)) >= row[s] for s in range(m, n_srv + 1)):
                    continue  # the block cannot strictly improve any entry: the plain DP keeps none of it
                if _SHARE and (lo, m) not in opened:
                    opened[(lo, m)] = model.chain(lo, model.full, per, ratio, cap, m, b_in, b_out)
                rows, arg = model.chain(lo, hi, per, ratio, cap, m, b_in, b_out, opened.get((lo, m)))
                if hi not in rows:
                    continue
                best = rows[hi][per]
                for s in range(m, n_srv + 1):
                    val = max(outer[lo][s - m], best)
                    if val < row[s]:
                        row[s], choice[(hi, s)] = val, (lo, m)
                        inner[(lo, hi, m)] = arg
        if math.isfinite(row[n_srv]):
            outer[hi] = row
    stats: dict[str, Stat] = {"ideals": len(model.ideals), "along": along}
    k = n_srv * per
    if model.full not in outer:
        return _none("hierarchical-dp", k, cap, stats, t0)
    blocks: list[BlockSpec] = []
    hi, s = model.full, n_srv
    while hi:
        lo, m = choice[(hi, s)]
        stages = [(_ids(graph, x), r) for x, r in model.unwind(inner[(lo, hi, m)], lo, hi, per)]
        blocks.append((m, stages))
        hi, s = lo, s - m
    blocks.reverse()
    ev = evaluate_hierarchical(graph, blocks, servers=n_srv, gpus_per_server=per, bandwidth_in=b_in,
                               bandwidth_out=b_out, memory=cap, weights=weights)
    stats["blocks"] = ",".join(str(m) for m, _ in blocks)
    stats["replicas"] = "|".join(",".join(str(r) for _, r in st) for _, st in blocks)
    notes = [f"block {j}: {len(st)} stage(s) on {m} server(s)" for j, (m, st) in enumerate(blocks)]
    return _plan(graph, ev, outer[model.full][n_srv], method="hierarchical-dp", devices=k, memory=cap,
                 stats=stats, notes=notes, t0=t0)
