"""Operator graphs as networkx node-link JSON (the QuickP format), and synthetic ones.

The format (``networkx.node_link_data`` of a ``DiGraph``)::

    {"directed": true,
     "nodes": [{"id": "conv1/Conv2D", "op_type": "Conv2D", "mem": 1.2e6,
                "comp_cost": {"GPU:0": 530.0, "GPU:1": 530.0}}],          # microseconds
     "links": [{"source": "conv1/Conv2D", "target": "relu1", "tensor_size_in_bit": 3.2e8}]}

(``"edges"`` is accepted for ``"links"``, as newer networkx writes it). :func:`read_operator_graph`
and :func:`operator_graph_from_data` give ``(graph, output_bytes, info)``:

* times stay in microseconds; node ``i``'s ``compute`` holds ``{"gpu:d": time}`` for the first
  ``gpus`` devices of the file, in the order they first appear in the ``comp_cost`` mappings
  (``gpus=None``: all of them), matching the names of
  :meth:`Devices.servers <stagecut.latency.Devices.servers>` (see :func:`operator_devices`);
* ``mem`` is the node's memory in bytes; a link's ``tensor_size_in_bit`` / 8 is a tensor in
  bytes. The latency model has one output per node (sent once per device however many consumers
  it has there), so a node's output is the *largest* tensor on its outgoing links
  (``info["unequal_outputs"]`` counts the nodes whose links disagree). QuickP's own model, a
  transfer per edge with that edge's tensor, is the option ``edge_bytes=info["edge_bytes"]``
  (``(source id, target id) -> bytes``) of :func:`~stagecut.latency.quickp.ip.quickp`;
* only the largest weakly connected component is kept (ties: the one holding the earliest node
  of the file); ``info["dropped_nodes"]`` says how many nodes were dropped, with a
  :class:`~stagecut.errors.StagecutWarning`.

:func:`~stagecut.latency.quickp.synthetic_opgraphs.synthetic_operator_graph` (re-exported here) writes
such data for CNN, transformer, AlexNet and VGG-16 training graphs of exactly ``n`` operators,
seeded.

>>> g, out, info = operator_graph_from_data(synthetic_operator_graph(300, "transformer", seed=1, devices=2))
>>> len(g), info["dropped_nodes"], sorted(g.nodes[0].compute)
(300, 0, ['gpu:0', 'gpu:1'])
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from stagecut.errors import InvalidArgumentError, InvalidGraphError, StagecutWarning
from stagecut.formats import read_json
from stagecut.graph import Graph, Node, NodeId
from stagecut.latency.model.devices import Devices
from stagecut.latency.quickp.synthetic_opgraphs import SHAPES, synthetic_operator_graph
from stagecut.validate import check_id, check_int, check_number, shown

__all__ = ["OperatorGraph", "read_operator_graph", "operator_graph_from_data", "operator_devices",
           "synthetic_operator_graph", "SHAPES"]


class OperatorGraph(NamedTuple):
    """What the reader returns: the graph (times in microseconds), each node's output in bytes,
    and a description (``nodes``, ``edges``, ``dropped_nodes``, ``components``, ``devices``: the
    file's device names, ``gpus``, ``device_map``: file name -> ``gpu:d``, ``op_types``,
    ``unequal_outputs``, ``time_unit``, ``notes``, ``edge_bytes``: each link's tensor in bytes,
    by ``(source id, target id)``)."""

    graph: Graph
    output_bytes: dict[NodeId, float]
    info: dict[str, Any]


def read_operator_graph(path: str | os.PathLike[str], gpus: int | None = None) -> OperatorGraph:
    """Read a node-link JSON operator graph (see the module docs).

    Parameters
    ----------
    path : str or path-like
    gpus : int, optional
        Take the times of the file's first ``gpus`` devices (default: all).

    Returns
    -------
    OperatorGraph
        ``(graph, output_bytes, info)``.

    Raises
    ------
    InvalidGraphError
        The file is missing or not JSON; a malformed node or link (naming it and the field); a
        cycle (:class:`~stagecut.errors.CycleError`).
    InvalidArgumentError
        ``gpus`` not an integer >= 1 or more than the file's devices.
    """
    data = read_json(path, "a node-link JSON operator graph")
    return operator_graph_from_data(data, gpus, where=os.fspath(path))


def _number(value: Any, where: str) -> float:
    return check_number(value, where, error=InvalidGraphError)


def _components(n: int, links: Sequence[tuple[int, int]]) -> np.ndarray:
    """The weakly connected component of each node (labelled by a root position)."""
    parent = list(range(n))

    def find(x: int) -> int:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    for u, v in links:
        ru, rv = find(u), find(v)
        if ru != rv:
            parent[max(ru, rv)] = min(ru, rv)
    return np.array([find(i) for i in range(n)], dtype=np.int64)


def operator_graph_from_data(data: Any, gpus: int | None = None, *, where: str = "operator graph"
                             ) -> OperatorGraph:
    """:func:`read_operator_graph` on data already parsed (e.g. from :func:`synthetic_operator_graph`).

    Parameters
    ----------
    data : mapping
        The node-link object.
    gpus : int, optional
        See :func:`read_operator_graph`.
    where : str
        Names the source in error messages.

    Returns
    -------
    OperatorGraph

    Raises
    ------
    InvalidGraphError
        See :func:`read_operator_graph`.
    InvalidArgumentError
        See :func:`read_operator_graph`.
    """
    if not isinstance(data, Mapping):
        raise InvalidGraphError(f"{where}: expected a JSON object with nodes and links, got {shown(data)}")
    if data.get("directed") is not True:
        raise InvalidGraphError(f"{where}: directed must be true (an operator graph is a DAG), got "
                                f"{shown(data.get('directed'))}")
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise InvalidGraphError(f"{where}: nodes must be a non-empty list")
    if "links" in data and "edges" in data:
        raise InvalidGraphError(f"{where}: both links and edges are given (networkx writes one of them)")
    key = "links" if "links" in data else "edges"
    raw_links = data.get(key, [])
    if not isinstance(raw_links, list):
        raise InvalidGraphError(f"{where}: {key} must be a list")
    ids: list[NodeId] = []
    index: dict[NodeId, int] = {}
    devices: dict[str, int] = {}
    costs: list[dict[str, float]] = []
    mems: list[float] = []
    ops: list[str | None] = []
    for k, nd in enumerate(raw_nodes):
        if not isinstance(nd, Mapping):
            raise InvalidGraphError(f"{where}: nodes[{k}] is not an object")
        if "id" not in nd:
            raise InvalidGraphError(f"{where}: nodes[{k}]: id is missing")
        nid = check_id(nd["id"], f"{where}: nodes[{k}].id")
        if nid in index:
            raise InvalidGraphError(f"{where}: node {shown(nid)} appears twice")
        index[nid] = k
        ids.append(nid)
        for field in ("comp_cost", "mem"):
            if field not in nd:
                raise InvalidGraphError(f"{where}: node {shown(nid)}: {field} is missing")
        cc = nd["comp_cost"]
        if not isinstance(cc, Mapping) or not cc:
            raise InvalidGraphError(f"{where}: node {shown(nid)}: comp_cost must be a non-empty mapping of "
                                    f"device to microseconds, got {shown(cc)}")
        row = {}
        for dev, t in cc.items():
            row[str(dev)] = _number(t, f"{where}: node {shown(nid)}: comp_cost[{str(dev)!r}]")
            devices.setdefault(str(dev), len(devices))
        costs.append(row)
        mems.append(_number(nd["mem"], f"{where}: node {shown(nid)}: mem"))
        op = nd.get("op_type")
        if op is not None and not isinstance(op, str):
            raise InvalidGraphError(f"{where}: node {shown(nid)}: op_type must be a string, got {shown(op)}")
        ops.append(op)
    names = list(devices)
    if gpus is None:
        g = len(names)
    else:
        g = check_int(gpus, "gpus", minimum=1, error=InvalidArgumentError)
        if g > len(names):
            raise InvalidArgumentError(f"gpus: {g} asked, but {where} gives times for {len(names)} devices "
                                       f"({', '.join(names)})")
    taken = names[:g]
    links: list[tuple[int, int]] = []
    bits: list[float] = []
    for k, ln in enumerate(raw_links):
        if not isinstance(ln, Mapping):
            raise InvalidGraphError(f"{where}: {key}[{k}] is not an object")
        ends = []
        for end in ("source", "target"):
            if end not in ln:
                raise InvalidGraphError(f"{where}: {key}[{k}]: {end} is missing")
            v = check_id(ln[end], f"{where}: {key}[{k}].{end}")
            if v not in index:
                raise InvalidGraphError(f"{where}: {key}[{k}]: unknown {end} node {shown(v)}")
            ends.append(index[v])
        if "tensor_size_in_bit" not in ln:
            raise InvalidGraphError(f"{where}: {key}[{k}] ({shown(ids[ends[0]])} -> {shown(ids[ends[1]])}): "
                                    "tensor_size_in_bit is missing")
        bits.append(_number(ln["tensor_size_in_bit"], f"{where}: {key}[{k}] ({shown(ids[ends[0]])} -> "
                                                      f"{shown(ids[ends[1]])}): tensor_size_in_bit"))
        links.append((ends[0], ends[1]))
    n = len(ids)
    comp = _components(n, links)
    labels, first, counts = np.unique(comp, return_index=True, return_counts=True)
    best = labels[np.lexsort((first, -counts))[0]]
    keep = comp == best
    dropped = int(n - keep.sum())
    notes = []
    if dropped:
        msg = (f"{where}: kept the largest weakly connected component ({int(keep.sum())} of {n} nodes); "
               f"dropped {dropped} nodes in {len(labels) - 1} other components")
        warnings.warn(msg, StagecutWarning, stacklevel=2)
        notes.append(msg)
    out = np.zeros(n)
    low = np.full(n, math.inf)
    for (u, _), b in zip(links, bits):
        out[u] = max(out[u], b / 8.0)
        low[u] = min(low[u], b / 8.0)
    unequal = int(((low < out) & keep).sum())
    nodes = []
    for i in np.flatnonzero(keep).tolist():
        compute = {f"gpu:{d}": costs[i][dev] for d, dev in enumerate(taken) if dev in costs[i]}
        if not compute:
            raise InvalidGraphError(f"{where}: node {shown(ids[i])}: comp_cost gives no time for the first {g} "
                                    f"devices ({', '.join(taken)})")
        nodes.append(Node(ids[i], compute, memory=mems[i], name=ops[i]))
    edges = [(ids[u], ids[v]) for u, v in links if keep[u]]
    edge_bytes: dict[tuple[NodeId, NodeId], float] = {}
    for (u, v), b in zip(links, bits):
        if keep[u]:
            edge_bytes[ids[u], ids[v]] = edge_bytes.get((ids[u], ids[v]), 0.0) + b / 8.0
    graph = Graph(nodes, edges)
    info: dict[str, Any] = {
        "nodes": len(graph), "edges": len(graph.edges), "dropped_nodes": dropped, "components": len(labels),
        "devices": names, "gpus": g, "device_map": {dev: f"gpu:{d}" for d, dev in enumerate(taken)},
        "op_types": {ids[i]: ops[i] for i in np.flatnonzero(keep).tolist()}, "unequal_outputs": unequal,
        "time_unit": "us", "notes": notes, "edge_bytes": edge_bytes,
    }
    return OperatorGraph(graph, {ids[i]: float(out[i]) for i in np.flatnonzero(keep).tolist()}, info)


def operator_devices(gpus: int, *, gpus_per_server: int = 2, intra_gbps: float = 50.0, inter_gbps: float = 20.0,
                     memory: float = math.inf) -> Devices:
    """``gpus`` GPUs named ``gpu:0``... in servers of ``gpus_per_server`` (one server when
    ``gpus`` is smaller), with the bandwidths in GB/s turned into bytes per microsecond (the
    time unit of operator graphs): NVLink 50 GB/s inside a server, 20 GB/s across by default.

    Raises
    ------
    InvalidArgumentError
        Counts that are not integers >= 1, ``gpus`` not a multiple of ``gpus_per_server``, bad
        bandwidths.

    >>> operator_devices(4).transfer_time(1e6, 0, 2)   # 1 MB across servers at 20 GB/s: 50 us
    50.0
    """
    g = check_int(gpus, "gpus", minimum=1, error=InvalidArgumentError)
    per = check_int(gpus_per_server, "gpus_per_server", minimum=1, error=InvalidArgumentError)
    if g > per and g % per:
        raise InvalidArgumentError(f"gpus: {g} is not a multiple of gpus_per_server ({per})")
    intra = check_number(intra_gbps, "intra_gbps", positive=True, error=InvalidArgumentError) * 1e3
    inter = check_number(inter_gbps, "inter_gbps", positive=True, error=InvalidArgumentError) * 1e3
    servers, per = (1, g) if g <= per else (g // per, per)
    return Devices.servers(servers, per, intra_bandwidth=intra, inter_bandwidth=inter, memory=memory)
