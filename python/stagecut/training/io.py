"""Reading and building Piper problems: the JSON format of ``workloads/piper`` (the authors'),
small chains, and the layer copies of the paper's BERT-64 experiment.

Examples
--------
>>> from stagecut.training import read_piper
>>> tmpc = {"id": "vanilla", "timePerSample": 1.0, "parameterSize": 0.0, "memoryUsageA": 1.0,
...         "memoryUsageB": 0.0, "syncTimeFw": {}, "syncTimeBw": {}}
>>> prob = read_piper({"maxDevices": 2, "maxMemoryPerDevice": 8.0, "bandwidth": 1.0, "mbsInBatch": 2,
...                    "nodes": [{"id": 0, "TMPCs": {"1": [tmpc]}}], "edges": []})
>>> prob.devices, prob.nodes[0].tmpcs[1][0].time
(2, 1.0)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from stagecut.errors import InvalidGraphError
from stagecut.formats import read_json
from stagecut.frontends.memory import saved_per_group
from stagecut.results import NodeId
from stagecut.training.model import TMPC, VANILLA_ID, PiperEdge, PiperNode, PiperProblem
from stagecut.validate import check_field, check_int, check_list, shown

__all__ = ["piper_from_dict", "read_piper", "chain_problem", "insert_layer_copies", "trace_layers", "piper_from_trace",
           "trace_plan_pipeline"]


def _int_key(k: Any, where: str, what: str) -> int:
    """An integer written as an object key (``"12"``) or as a number (ids are integers in this
    format: the sync maps are keyed by them); floats, booleans and other strings are refused."""
    if isinstance(k, str):
        text = k.strip()
        if text.lstrip("-").isdecimal() and text.isascii() and len(text) <= 20:
            return check_int(int(text), f"{where}: {what}", minimum=-(2**63), error=InvalidGraphError)
    elif isinstance(k, int) and not isinstance(k, bool):
        return check_int(k, f"{where}: {what}", minimum=-(2**63), error=InvalidGraphError)
    raise InvalidGraphError(f"{where}: {what} {shown(k)} is not an integer")


def _node_key(k: Any, where: str) -> int:
    return _int_key(k, where, "key (a node id)")


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise InvalidGraphError(f"{where} must be a string, got {type(value).__name__} {shown(value)}")
    return value


def _sync(c: Mapping[str, Any], key: str, where: str) -> dict[NodeId, float]:
    m = check_field(c, key, where)
    if not isinstance(m, Mapping):
        raise InvalidGraphError(f"{where}: {key} must be an object keyed by node id")
    return {_node_key(k, where): v for k, v in m.items()}


def _tmpc_from_dict(c: Mapping[str, Any], where: str) -> TMPC:
    return TMPC(
        id=_str(check_field(c, "id", where), f"{where}: id"),
        time=check_field(c, "timePerSample", where),
        params=check_field(c, "parameterSize", where),
        mem_a=check_field(c, "memoryUsageA", where),
        mem_b=check_field(c, "memoryUsageB", where),
        sync_fw=_sync(c, "syncTimeFw", where),
        sync_bw=_sync(c, "syncTimeBw", where),
    )


def _node_from_dict(nd: Mapping[str, Any], i: int) -> PiperNode:
    nid = _int_key(check_field(nd, "id", f"nodes[{i}]"), f"nodes[{i}]", "id")
    tm = check_field(nd, "TMPCs", f"node {nid!r}")
    if not isinstance(tm, Mapping):
        raise InvalidGraphError(f"node {nid!r}: TMPCs must be an object keyed by t")
    tmpcs: dict[int, tuple[TMPC, ...]] = {}
    for tk, lst in tm.items():
        t = _int_key(tk, f"node {nid!r}", "TMPC key (a device count)")
        lst = check_list(lst, f"node {nid!r}, t={t}: TMPCs")
        tmpcs[t] = tuple(_tmpc_from_dict(c, f"node {nid!r}, t={t}, TMPC #{j}") for j, c in enumerate(lst))
    return PiperNode(id=nid, tmpcs=tmpcs, name=_str(nd.get("name", ""), f"node {nid!r}: name"))


def piper_from_dict(data: Mapping[str, Any]) -> PiperProblem:
    """Build a :class:`PiperProblem` from the JSON format of ``workloads/piper`` (the authors').

    Parameters
    ----------
    data : Mapping
        ``maxDevices``, ``maxMemoryPerDevice`` (bytes), ``bandwidth`` (bytes/s), ``mbsInBatch``,
        optional ``serverSize`` and ``intraServerBandwidth``, ``nodes`` (``id``, ``TMPCs``
        keyed by t: ``id``, ``timePerSample``, ``parameterSize``, ``memoryUsageA``,
        ``memoryUsageB``, ``syncTimeFw``, ``syncTimeBw``; optional ``name``) and ``edges``
        (``sourceId``, ``destId``, ``communicationCost``).

    Returns
    -------
    PiperProblem

    Raises
    ------
    InvalidGraphError
        A missing or malformed field (named), or any error of :class:`PiperProblem`.
    CycleError
        The layer graph has a cycle.

    Examples
    --------
    >>> tmpc = {"id": "vanilla", "timePerSample": 1.0, "parameterSize": 0.0, "memoryUsageA": 1.0,
    ...         "memoryUsageB": 0.0, "syncTimeFw": {}, "syncTimeBw": {}}
    >>> piper_from_dict({"maxDevices": 2, "maxMemoryPerDevice": 8.0, "bandwidth": 1.0, "mbsInBatch": 2,
    ...                  "nodes": [{"id": 0, "TMPCs": {"1": [tmpc]}}]})
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidGraphError: input: missing field 'edges'
    """
    if not isinstance(data, Mapping):
        raise InvalidGraphError("a Piper input must be a JSON object")
    nodes_in = check_list(check_field(data, "nodes", "input"), "nodes")
    nodes = tuple(_node_from_dict(nd, i) for i, nd in enumerate(nodes_in))
    edges = []
    for i, e in enumerate(check_list(check_field(data, "edges", "input"), "edges")):
        where = f"edges[{i}]"
        edges.append(PiperEdge(_int_key(check_field(e, "sourceId", where), where, "sourceId"),
                               _int_key(check_field(e, "destId", where), where, "destId"),
                               check_field(e, "communicationCost", where)))
    return PiperProblem(nodes=nodes, edges=tuple(edges), devices=check_field(data, "maxDevices", "input"),
                        memory=check_field(data, "maxMemoryPerDevice", "input"),
                        bandwidth=check_field(data, "bandwidth", "input"),
                        batch=check_field(data, "mbsInBatch", "input"), server_size=data.get("serverSize"),
                        intra_bandwidth=data.get("intraServerBandwidth"))


def read_piper(path: str | os.PathLike[str] | Mapping[str, Any]) -> PiperProblem:
    """Read a Piper input: a path to the JSON format of ``workloads/piper``, or its dict.

    Parameters
    ----------
    path : str, os.PathLike or Mapping
        The file, or the parsed JSON (see :func:`piper_from_dict`).

    Returns
    -------
    PiperProblem

    Raises
    ------
    InvalidGraphError
        No such file, not valid JSON, or a malformed input (names the field).
    OSError
        The file exists but cannot be read.

    Examples
    --------
    >>> read_piper({"maxDevices": 1})
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidGraphError: input: missing field 'nodes'
    """
    if isinstance(path, Mapping):
        return piper_from_dict(path)
    return piper_from_dict(read_json(path, "a Piper input"))


def chain_problem(times: Sequence[float], *, devices: int, memory: float, bandwidth: float, batch: int,
                  comm: float = 0.0, params: float = 0.0, mem_a: float = 0.0, mem_b: float = 0.0) -> PiperProblem:
    """A chain of layers with one TMPC (``"vanilla"``, t = 1) each: a quick way to build small problems.

    Parameters
    ----------
    times : sequence of float
        The layers' times per sample (node ids ``0..n-1``).
    devices, memory, bandwidth, batch
        The settings (see :class:`PiperProblem`).
    comm, params, mem_a, mem_b : float
        Every edge's communication bytes; every layer's parameter bytes and memory terms.

    Returns
    -------
    PiperProblem

    Raises
    ------
    InvalidGraphError
        A negative or non-finite value, or a setting out of range.

    Examples
    --------
    >>> prob = chain_problem([1.0, 2.0, 3.0], devices=2, memory=1e9, bandwidth=1.0, batch=1, comm=0.5)
    >>> [(e.source, e.target, e.comm) for e in prob.edges]
    [(0, 1, 0.5), (1, 2, 0.5)]
    """
    n = len(times)
    nodes = []
    for i, tm in enumerate(times):
        fw = {i - 1: 0.0} if i > 0 else {}
        bw = {i + 1: 0.0} if i + 1 < n else {}
        nodes.append(PiperNode(i, {1: (TMPC(VANILLA_ID, float(tm), params, mem_a, mem_b, fw, bw),)}))
    edges = [PiperEdge(i, i + 1, comm) for i in range(n - 1)]
    return PiperProblem(tuple(nodes), tuple(edges), devices, memory, bandwidth, batch)


# ------------------------------------------------------------------ layer copies (BERT-64)
_PRIMES = (13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043, 85229, 172933)


def _insert_in_bucket_order(order: list[int], x: int, nb: int) -> None:
    """Put ``x`` at the start of its bucket's run in ``order``, or at the front for a new bucket."""
    b = x % nb
    at = next((i for i, z in enumerate(order) if z % nb == b), None)
    order.insert(0 if at is None else at, x)


def _libstdcxx_int_set_order(keys: Sequence[int]) -> list[int]:
    """Iteration order of a libstdc++ ``std::unordered_set<int>`` after inserting ``keys`` in
    order (identity hash, prime rehash policy, max load factor 1): elements of one bucket are
    contiguous, a new bucket's first element goes to the front, rehashing relinks in order.

    >>> _libstdcxx_int_set_order([1, 2, 3, 14])
    [3, 2, 14, 1]
    """
    order: list[int] = []
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
                new: list[int] = []
                for y in order:  # relink: new bucket -> front, else start of its bucket's run
                    _insert_in_bucket_order(new, y, nb)
                order = new
            else:
                next_resize = nb
        _insert_in_bucket_order(order, x, nb)
    return order


def _rekey(m: Mapping[NodeId, float], old: NodeId, new: NodeId) -> dict[NodeId, float]:
    return {(new if k == old else k): x for k, x in m.items()}


def _copy_one(nodes: list[PiperNode], edges: list[PiperEdge], name: str, fresh: int) -> None:
    """Copy the first suitable ``name`` layer ``v`` (a ``name`` layer before and after it, in the
    authors' set order), inserting the copy (id ``fresh`` or the next free) between ``v`` and
    its successor ``s``."""
    idx = {nd.id: i for i, nd in enumerate(nodes)}
    layer = {nd.id for nd in nodes if nd.name == name}
    prev: dict[NodeId, NodeId] = {}
    nxt: dict[NodeId, NodeId] = {}
    for e in edges:
        if e.source in layer and e.target in layer:
            prev[e.target] = e.source
            nxt[e.source] = e.target
    pos = [i for i, nd in enumerate(nodes) if nd.name == name]
    cands = [nodes[i].id for i in _libstdcxx_int_set_order(pos) if nodes[i].id in prev and nodes[i].id in nxt]
    if not cands:
        raise InvalidGraphError(f"no {name!r} layer with a {name!r} predecessor and successor")
    v = cands[0]
    s = nxt[v]
    nu = fresh
    while nu in idx:
        nu += 1
    comm = 0.0
    for i, e in enumerate(edges):
        if e.source == v and e.target == s:
            comm = e.comm
            edges[i] = PiperEdge(v, nu, e.comm)
    edges.append(PiperEdge(nu, s, comm))
    nv, ns = nodes[idx[v]], nodes[idx[s]]
    nodes[idx[v]] = dataclasses.replace(nv, tmpcs={t: tuple(dataclasses.replace(c, sync_bw=_rekey(c.sync_bw, s, nu))
                                                            for c in lst) for t, lst in nv.tmpcs.items()})
    nodes[idx[s]] = dataclasses.replace(ns, tmpcs={t: tuple(dataclasses.replace(c, sync_fw=_rekey(c.sync_fw, v, nu))
                                                            for c in lst) for t, lst in ns.tmpcs.items()})
    copy = {t: tuple(dataclasses.replace(c, sync_fw={v: c.sync_fw[prev[v]]}, sync_bw={s: c.sync_bw[s]}) for c in lst)
            for t, lst in nv.tmpcs.items()}
    nodes.append(PiperNode(nu, copy, name))


def insert_layer_copies(problem: PiperProblem, count: int, name: str = "ParallelTransformerLayer") -> PiperProblem:
    """Deepen a model the way the paper's BERT-64 experiment does.

    ``count`` times, copy a layer named ``name`` that has such a layer before and after it in a
    chain, inserting the copy right after it (the copy gets its TMPCs with the sync entries
    re-keyed). The layer copied is the first suitable one in the iteration order of the authors'
    ``std::unordered_set<int>`` of layer positions (libstdc++), so BERT-64 is their BERT-64.

    Parameters
    ----------
    problem : PiperProblem
    count : int
        Copies to insert (>= 0).
    name : str
        The layer name (``PiperNode.name``).

    Returns
    -------
    PiperProblem
        With ``count`` more nodes (ids from 123456790 up, skipping ids in use).

    Raises
    ------
    InvalidGraphError
        No ``name`` layer has a ``name`` layer before and after it.
    InvalidArgumentError
        ``count`` is not a non-negative integer.

    Examples
    --------
    >>> from stagecut.training import chain_problem
    >>> prob = chain_problem([1.0] * 4, devices=1, memory=1.0, bandwidth=1.0, batch=1)
    >>> prob = prob.replace(nodes=tuple(dataclasses.replace(nd, name="L") for nd in prob.nodes))
    >>> deeper = insert_layer_copies(prob, 2, name="L")
    >>> len(deeper.nodes), [(e.source, e.target) for e in deeper.edges]
    (6, [(0, 1), (1, 2), (2, 123456790), (123456790, 123456791), (123456791, 3)])
    """
    count = check_int(count, "count")
    nodes = list(problem.nodes)
    edges = list(problem.edges)
    fresh = 123456789
    for _ in range(count):
        fresh += 1
        _copy_one(nodes, edges, name, fresh)
    return dataclasses.replace(problem, nodes=tuple(nodes), edges=tuple(edges))


# ------------------------------------------------------------------ from a traced model
def trace_layers(trace: Any) -> list[tuple[str, list[str]]]:
    """The layers of a traced model in program order, each with its node ids.

    A layer is an item of a layer list (a module whose name ends in a number: ``"layers.3"``,
    ``"transformer.h.0"``, the children ``"0"``, ``"1"``... of an ``nn.Sequential``): a node
    belongs to the outermost such module it runs in. A node in no layer list belongs to its
    outermost module that does not hold a layer list (``"transformer.wte"`` beside
    ``"transformer.h"``, ``"lm_head"``); a node of such a container's own forward (the
    embedding add of ``"transformer"``) or of the top-level forward is glue, and goes with the
    layer before it (the first layer when none runs before). Each layer is a contiguous run in
    program order (a layer running again later is a new one, ``"name#2"``), so the layer graph
    is acyclic."""
    def item(mods: tuple[str, ...]) -> int | None:
        return next((i for i, m in enumerate(mods) if str(m).rsplit(".", 1)[-1].isdigit()), None)

    containers: set[str] = set()  # the modules holding layer lists ("transformer", "transformer.h")
    for v in trace.order:
        i = item(trace.modules[v])
        if i is not None:
            parts = str(trace.modules[v][i]).split(".")
            containers.update(".".join(parts[:j]) for j in range(1, len(parts)))

    def unit_of(mods: tuple[str, ...]) -> str | None:
        i = item(mods)
        if i is not None:
            return str(mods[i])
        return next((str(m) for m in mods if str(m) not in containers), None)

    units: dict[str, list[str]] = {}
    pending: list[str] = []
    last: str | None = None
    for v in trace.order:
        found = unit_of(tuple(trace.modules[v]))
        if found is None:  # glue: of the top-level forward, or of a container's own forward
            if last is None:
                pending.append(v)
            else:
                units[last].append(v)
            continue
        unit = found
        if unit != last and unit in units:  # a layer running again later: a new segment
            n = 2
            while f"{unit}#{n}" in units:
                n += 1
            unit = f"{unit}#{n}"
        units.setdefault(unit, []).extend(pending)
        pending = []
        units[unit].append(v)
        last = unit
    if pending:  # a model with no module at all: one layer
        units.setdefault("forward", []).extend(pending)
    return list(units.items())


def piper_from_trace(trace: Any, *, samples: int, devices: int, memory: float, batch: int,
                     bandwidth: float | None = None, optimizer_states: int = 2, backward_factor: float = 2.0,
                     recompute: bool = True) -> PiperProblem:
    """A Piper problem (:func:`stagecut.training.plan_training`) from a traced model: one node
    per layer (:func:`trace_layers`), data parallelism and recomputation as TMPCs, tensor
    parallelism not offered (``t = 1`` only: a trace does not say how to shard an operator).

    Per layer, from the trace (times per traced batch of ``samples`` samples; the traced batch
    is a microbatch):

    * ``time`` per sample: forward + backward / ``samples``. The backward is the trace's own
      backward nodes when it was traced with ``training=True`` (so a measured or calibrated
      backward counts), else ``backward_factor`` times the forward;
    * ``params``: the bytes of its parameters and buffers (the nodes' ``memory``);
    * memory ``mem_a * y + mem_b``: ``mem_a`` the activations it saves for backward per
      microbatch in flight, ``mem_b`` the weights, their gradients and ``optimizer_states``
      optimizer states of the same size (Adam: 2; SGD with momentum: 1). ``mem_a`` is what
      autograd really saves when the trace recorded it (a :class:`~stagecut.frontends.torch.TorchTrace`
      from ``trace_torch``: :func:`stagecut.frontends.memory.saved_per_group` with the layer as
      the group, storages counted once per layer); otherwise (a trace without that record) the
      sum of its operators' output bytes, an overestimate (views, in-place results and tensors
      that no backward needs count too);
    * with ``recompute``, a second TMPC ``"activation recomp"``: the forward runs twice, and only
      the layer's inputs are kept per microbatch;
    * an edge between layers carries the bytes per sample of the tensors crossing it.

    Parameters
    ----------
    trace : stagecut.frontends.torch.TorchTrace
    samples : int
        Samples in the traced batch (the example inputs' batch size).
    devices, memory, batch
        K, M (bytes per device) and N (microbatches per batch) of the problem.
    bandwidth : float, optional
        Bytes per second between devices (default: the trace's).
    optimizer_states, backward_factor, recompute
        As above.

    Returns
    -------
    PiperProblem
        Node ids are ``0, 1, ...`` in layer order; each node's ``name`` is the layer's name.

    Raises
    ------
    InvalidArgumentError
        A bad ``samples`` / ``optimizer_states`` / ``backward_factor``, or a trace with no
        bandwidth and none given.
    InvalidGraphError
        A bad setting (as :class:`PiperProblem` raises it).
    """
    from stagecut.errors import InvalidArgumentError
    from stagecut.training.model import RECOMPUTE_ID

    samples = check_int(samples, "samples", minimum=1, error=InvalidArgumentError)
    optimizer_states = check_int(optimizer_states, "optimizer_states", minimum=0, error=InvalidArgumentError)
    from stagecut.validate import check_number

    backward_factor = check_number(backward_factor, "backward_factor", error=InvalidArgumentError)
    bw = float(bandwidth) if bandwidth is not None else float(getattr(trace, "bandwidth", 0.0) or 0.0)
    if not bw > 0:
        raise InvalidArgumentError("bandwidth: the trace has none; pass bandwidth= (bytes per second)")
    g = trace.graph
    layers = trace_layers(trace)
    layer_of = {v: i for i, (_, vs) in enumerate(layers) for v in vs}
    ids = set(g.index)

    def seconds(v: str) -> float:
        return float(sum(g.node(v).compute.values()))

    crossing: dict[tuple[int, int], float] = {}
    inputs: dict[int, float] = {}
    for u, v in g.edges:
        if u in layer_of and v in layer_of and layer_of[u] != layer_of[v]:
            key = (layer_of[u], layer_of[v])
            crossing[key] = crossing.get(key, 0.0) + float(trace.output_bytes[u])
            inputs[layer_of[v]] = inputs.get(layer_of[v], 0.0) + float(trace.output_bytes[u])
    edges = tuple(PiperEdge(a, b, c / samples) for (a, b), c in sorted(crossing.items()))
    preds = {i: [a for (a, b) in crossing if b == i] for i in range(len(layers))}
    succs = {i: [b for (a, b) in crossing if a == i] for i in range(len(layers))}
    record = getattr(trace, "memory_record", None)
    if record is not None:
        saved_bytes = saved_per_group(record, [vs for _, vs in layers])
    else:
        saved_bytes = [float(sum(trace.output_bytes[v] for v in vs)) for _, vs in layers]
    nodes = []
    for i, (name, vs) in enumerate(layers):
        fwd = sum(seconds(v) for v in vs)
        bwd = sum(seconds(f"{v}_bwd") if f"{v}_bwd" in ids else backward_factor * seconds(v) for v in vs)
        params = float(sum(g.node(v).memory for v in vs))
        saved = saved_bytes[i]
        fixed = params * (2 + optimizer_states)
        fw, bwm = {a: 0.0 for a in preds[i]}, {b: 0.0 for b in succs[i]}
        tmpcs = [TMPC(VANILLA_ID, (fwd + bwd) / samples, params, saved, fixed, fw, bwm)]
        if recompute:
            tmpcs.append(TMPC(RECOMPUTE_ID, (2 * fwd + bwd) / samples, params, inputs.get(i, 0.0), fixed, fw, bwm))
        nodes.append(PiperNode(i, {1: tuple(tmpcs)}, name))
    return PiperProblem(tuple(nodes), edges, devices, memory, bw, batch)


def trace_plan_pipeline(trace: Any, plan: Any) -> tuple[Any, int]:
    """The pipeline a training plan of :func:`piper_from_trace` runs: a plan over the trace's
    graph with the training plan's stages (for ``trace.split_policy``), and the data-parallel
    degree.

    ``torch.distributed.pipelining`` replicates the whole pipeline for data parallelism: ``d``
    replicas of every stage, rank ``replica * stages + stage`` (see
    ``stagecut.frontends.runtime.pipeline_grid``), each replica on its share of the batch, the
    stages' gradients averaged over the replicas after backward. So the plan's stages must share
    one data-parallel degree, with no tensor parallelism. A stage whose layers the plan
    recomputes (``"activation recomp"``) runs plainly: the runtime does not apply recomputation
    (wrap the stage's layers in ``torch.utils.checkpoint`` to get the memory the plan counted).

    Parameters
    ----------
    trace : stagecut.frontends.torch.TorchTrace
        The trace the problem was built from.
    plan : TrainingPlan
        :func:`stagecut.training.plan_training` of ``piper_from_trace(trace, ...)``.

    Returns
    -------
    (stagecut.Plan, int)
        One stage per training-plan stage, in pipeline order: its layers' nodes (and their
        backward nodes when the trace has them), scored by :func:`stagecut.evaluate` on one
        device per stage; and ``d``.

    Raises
    ------
    InvalidArgumentError
        An infeasible plan (no stages), stages with different data-parallel degrees or tensor
        parallelism (naming the stages), or a layer id that is not a layer of ``trace``.
    """
    from stagecut.errors import InvalidArgumentError
    from stagecut.results import Plan
    from stagecut.throughput.evaluate import evaluate

    stages = tuple(getattr(plan, "stages", ()) or ())
    if not stages:
        raise InvalidArgumentError(f"plan has no stages (status {getattr(plan, 'status', None)!r}): nothing to run")
    degrees = [(int(s.d), int(s.t)) for s in stages]
    if any(t != 1 for _, t in degrees) or len({d for d, _ in degrees}) != 1:
        raise InvalidArgumentError("the runtime replicates the whole pipeline: every stage needs the same "
                                   "data-parallel degree and t = 1; the plan's stages have (d, t) = "
                                   + ", ".join(f"{s.index}: {d}" for s, d in zip(stages, degrees)))
    layers = trace_layers(trace)
    ids = set(trace.graph.index)
    out: list[list[str]] = []
    for s in stages:
        vs: list[str] = []
        for i in s.nodes:
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(layers):
                raise InvalidArgumentError(f"plan: stage {s.index} names layer {shown(i)}, not one of the trace's "
                                           f"{len(layers)} layers")
            vs.extend(layers[i][1])
        out.append(vs + [f"{v}_bwd" for v in vs if f"{v}_bwd" in ids])
    ev = evaluate(trace.graph, {v: ("accelerator", i) for i, vs in enumerate(out) for v in vs}, devices=len(out))
    loads = tuple(sorted(ev.stages, key=lambda st: st.index))
    notes = (f"the stages of a training plan ({len(out)} stages x {degrees[0][0]} data-parallel replicas; "
             f"{plan.method}, {plan.objective:.6g} s per sample)",)
    return Plan(objective=ev.objective, status="feasible", method="training-plan", stages=loads, devices=len(out),
                cpus=0, memory=float("inf"), notes=notes), degrees[0][0]
