"""Readers and writers for the JSON workload and split formats.

The workload format is the one of the profiled graphs published with "Efficient Algorithms
for Device Placement of DNN Graph Operators" (Tarnawski et al., NeurIPS 2020): a top-level
object with ``maxSizePerFPGA``, ``maxFPGAs``, ``maxCPUs``, ``nodes`` (``id``,
``supportedOnFpga``, ``cpuLatency``, ``fpgaLatency``, ``isBackwardNode``, optional
``colorClass``, ``size``, ``name``) and ``edges`` (``sourceId``, ``destId``, ``cost``: the
time to move the source's output, equal for every edge out of one node).

Mapping to :class:`~stagecut.graph.Graph`: ``fpgaLatency`` -> ``compute["accelerator"]``,
``cpuLatency`` -> ``compute["cpu"]``, ``supportedOnFpga`` false -> ``kinds={"cpu"}``,
``size`` -> ``memory``, edge ``cost`` -> the source's ``comm``, ``colorClass`` ->
``colocation``, ``isBackwardNode`` -> ``backward``. ``maxFPGAs``, ``maxCPUs`` and
``maxSizePerFPGA`` become ``graph.defaults`` (``accelerators``, ``cpus``, ``memory``).

A split is ``{"fpgas": [{"nodes": [...]}, ...], "cpus": [{"nodes": [...]}, ...]}``, optionally
with per-device ``load`` and a top-level ``maxLoad``.
"""

from __future__ import annotations

import json
import os
from typing import Any, Hashable, Mapping

from stagecut.errors import InvalidGraphError
from stagecut.graph import ACCELERATOR, CPU, Graph, Node

__all__ = ["read_workload", "workload_from_dict", "workload_to_dict", "write_workload",
           "read_split", "split_from_dict", "split_to_dict", "write_split", "Assignment"]

#: node id -> (device kind, device index)
Assignment = Mapping[Hashable, "tuple[str, int]"]


def _load_json(path: "str | os.PathLike") -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise InvalidGraphError(f"{path}: no such file") from None
    except json.JSONDecodeError as e:
        raise InvalidGraphError(f"{path}: not valid JSON ({e})") from None


def _field(obj: Mapping, key: str, where: str) -> Any:
    if not isinstance(obj, Mapping):
        raise InvalidGraphError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if key not in obj:
        raise InvalidGraphError(f"{where}: missing field {key!r}")
    return obj[key]


def workload_from_dict(data: Mapping) -> Graph:
    """Build a :class:`Graph` from a parsed workload JSON object."""
    nodes_in = _field(data, "nodes", "workload")
    edges_in = _field(data, "edges", "workload")
    if not isinstance(nodes_in, list) or not isinstance(edges_in, list):
        raise InvalidGraphError("workload: 'nodes' and 'edges' must be lists")
    comm: dict = {}
    edges = []
    for i, e in enumerate(edges_in):
        where = f"edges[{i}]"
        u, v = _field(e, "sourceId", where), _field(e, "destId", where)
        cost = _field(e, "cost", where)
        if u in comm and comm[u] != cost:
            try:
                differ = abs(float(comm[u]) - float(cost)) > 1e-6
            except (TypeError, ValueError):
                differ = True
            if differ:
                raise InvalidGraphError(
                    f"{where}: node {u!r} has two different outgoing edge costs ({comm[u]} and {cost})"
                )
        comm.setdefault(u, cost)
        edges.append((u, v))
    nodes = []
    for i, n in enumerate(nodes_in):
        nid = _field(n, "id", f"nodes[{i}]")
        where = f"node {nid!r}"
        supported = bool(_field(n, "supportedOnFpga", where))
        nodes.append(
            Node(
                id=nid,
                compute={ACCELERATOR: _field(n, "fpgaLatency", where), CPU: _field(n, "cpuLatency", where)},
                memory=n.get("size", 0.0),
                comm=comm.get(nid, 0.0),
                kinds=None if supported else frozenset({CPU}),
                colocation=n.get("colorClass"),
                backward=bool(n.get("isBackwardNode", False)),
                name=n.get("name"),
            )
        )
    defaults = {}
    for key, name in (("maxFPGAs", "accelerators"), ("maxCPUs", "cpus"), ("maxSizePerFPGA", "memory")):
        if key in data:
            defaults[name] = data[key]
    return Graph(nodes, edges, defaults)


def read_workload(path: "str | os.PathLike") -> Graph:
    """Read a workload JSON file (see the module docstring for the format)."""
    return workload_from_dict(_load_json(path))


def workload_to_dict(graph: Graph) -> dict:
    """The workload JSON object for ``graph`` (accelerator/cpu kinds only)."""
    nodes = []
    for n in graph.nodes:
        d = {
            "id": n.id,
            "supportedOnFpga": int(n.supports(ACCELERATOR)),
            "cpuLatency": n.compute.get(CPU, 0.0),
            "fpgaLatency": n.compute.get(ACCELERATOR, 0.0),
            "isBackwardNode": int(n.backward),
            "size": n.memory,
        }
        if n.colocation is not None:
            d["colorClass"] = n.colocation
        if n.name is not None:
            d["name"] = n.name
        nodes.append(d)
    edges = [{"sourceId": u, "destId": v, "cost": graph.node(u).comm} for u, v in graph.edges]
    out: dict = {}
    for key, name in (("maxFPGAs", "accelerators"), ("maxCPUs", "cpus"), ("maxSizePerFPGA", "memory")):
        if name in graph.defaults:
            out[key] = graph.defaults[name]
    out.update(nodes=nodes, edges=edges)
    return out


def write_workload(graph: Graph, path: "str | os.PathLike") -> None:
    """Write ``graph`` in the workload JSON format."""
    with open(path, "w") as f:
        json.dump(workload_to_dict(graph), f, indent=1)


def split_from_dict(data: Mapping, graph: Graph | None = None) -> dict:
    """Parse a split object into an assignment ``{node id: (kind, index)}``.

    With ``graph``, node ids are checked, and nodes the split leaves out are placed with the
    other nodes of their colocation class (a training graph's backward nodes follow their
    forward nodes, as in the hand-made splits); a node that cannot be placed that way is an
    error.
    """
    assignment: dict = {}
    for key, kind in (("fpgas", ACCELERATOR), ("cpus", CPU)):
        devices = data.get(key, []) if isinstance(data, Mapping) else None
        if not isinstance(devices, list):
            raise InvalidGraphError(f"split: {key!r} must be a list of devices")
        for d, dev in enumerate(devices):
            for nid in _field(dev, "nodes", f"split {key}[{d}]"):
                if nid in assignment:
                    raise InvalidGraphError(f"split: node {nid!r} is assigned twice")
                if graph is not None and nid not in graph.index:
                    raise InvalidGraphError(f"split: unknown node {nid!r}")
                assignment[nid] = (kind, d)
    if graph is not None:
        by_class: dict = {}
        for n in graph.nodes:
            if n.colocation is not None and n.id in assignment:
                by_class.setdefault(n.colocation, set()).add(assignment[n.id])
        for n in graph.nodes:
            if n.id in assignment:
                continue
            places = by_class.get(n.colocation, set()) if n.colocation is not None else set()
            if len(places) != 1:
                why = "no" if not places else "more than one"
                raise InvalidGraphError(
                    f"split: node {n.id!r} is not assigned and {why} device can be inferred from its colocation class"
                )
            assignment[n.id] = next(iter(places))
    return assignment


def read_split(path: "str | os.PathLike", graph: Graph | None = None) -> dict:
    """Read a split JSON file; see :func:`split_from_dict`."""
    return split_from_dict(_load_json(path), graph)


def split_to_dict(assignment: Assignment, loads: Mapping | None = None) -> dict:
    """The split JSON object for an assignment (devices in index order)."""
    out: dict = {"fpgas": [], "cpus": []}
    for key, kind in (("fpgas", ACCELERATOR), ("cpus", CPU)):
        idx = sorted({i for k, i in assignment.values() if k == kind})
        for i in idx:
            dev: dict = {"nodes": [n for n, (k, j) in assignment.items() if k == kind and j == i]}
            if loads is not None and (kind, i) in loads:
                dev["load"] = loads[(kind, i)]
            out[key].append(dev)
    return out


def write_split(assignment: Assignment, path: "str | os.PathLike", loads: Mapping | None = None) -> None:
    with open(path, "w") as f:
        json.dump(split_to_dict(assignment, loads), f, indent=1)
