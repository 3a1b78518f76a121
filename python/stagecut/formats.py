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
import tempfile
from collections.abc import Hashable, Mapping
from typing import Any

from stagecut.errors import InvalidGraphError
from stagecut.graph import ACCELERATOR, CPU, Graph, Node

__all__ = ["read_workload", "workload_from_dict", "workload_to_dict", "write_workload",
           "read_split", "split_from_dict", "split_to_dict", "write_split", "write_json", "Assignment"]

#: node id -> (device kind, device index)
Assignment = Mapping[Any, tuple[str, int]]
PathLike = str | os.PathLike[str]


def write_json(obj: Any, path: PathLike) -> None:
    """Write ``obj`` as JSON atomically: to a temporary file beside ``path``, then renamed over it
    (a crash or Ctrl-C never leaves a half-written file).

    Raises
    ------
    OSError
        The directory is not writable.
    """
    target = os.fspath(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(target)), prefix=".stagecut-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1)
            f.write("\n")
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


def _load_json(path: PathLike) -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise InvalidGraphError(f"{path}: no such file") from None
    except json.JSONDecodeError as e:
        raise InvalidGraphError(f"{path}: not valid JSON ({e})") from None


def _field(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, Mapping):
        raise InvalidGraphError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if key not in obj:
        raise InvalidGraphError(f"{where}: missing field {key!r}")
    return obj[key]


def workload_from_dict(data: Mapping[str, Any]) -> Graph:
    """Build a :class:`Graph` from a parsed workload JSON object.

    Raises
    ------
    InvalidGraphError
        A missing or malformed field (the message names the node or field).
    CycleError
        The edges close a cycle.
    """
    nodes_in = _field(data, "nodes", "workload")
    edges_in = _field(data, "edges", "workload")
    if not isinstance(nodes_in, list) or not isinstance(edges_in, list):
        raise InvalidGraphError("workload: 'nodes' and 'edges' must be lists")
    comm: dict[Any, float] = {}
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


def read_workload(path: PathLike) -> Graph:
    """Read a workload JSON file (see the module docstring for the format).

    Raises
    ------
    InvalidGraphError
        No such file, not JSON, or a malformed workload (names the field).
    CycleError
        The edges close a cycle.
    """
    return workload_from_dict(_load_json(path))


def workload_to_dict(graph: Graph) -> dict[str, Any]:
    """The workload JSON object for ``graph`` (accelerator/cpu kinds only).

    Raises
    ------
    This function raises nothing for a valid :class:`Graph`.
    """
    nodes = []
    for n in graph.nodes:
        d: dict[str, Any] = {
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
    out: dict[str, Any] = {}
    for key, name in (("maxFPGAs", "accelerators"), ("maxCPUs", "cpus"), ("maxSizePerFPGA", "memory")):
        if name in graph.defaults:
            out[key] = graph.defaults[name]
    out.update(nodes=nodes, edges=edges)
    return out


def write_workload(graph: Graph, path: PathLike) -> None:
    """Write ``graph`` in the workload JSON format (atomically, see :func:`write_json`).

    Raises
    ------
    OSError
        The file cannot be written.
    """
    write_json(workload_to_dict(graph), path)


def split_from_dict(data: Mapping[str, Any], graph: Graph | None = None) -> dict[Any, tuple[str, int]]:
    """Parse a split object into an assignment ``{node id: (kind, index)}``.

    With ``graph``, node ids are checked, and nodes the split leaves out are placed with the
    other nodes of their colocation class (a training graph's backward nodes follow their
    forward nodes, as in the hand-made splits); a node that cannot be placed that way is an
    error.

    Raises
    ------
    InvalidGraphError
        A malformed split, a node assigned twice, an unknown node, or (with ``graph``) a node
        left out whose device cannot be inferred.
    """
    assignment: dict[Any, tuple[str, int]] = {}
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
        by_class: dict[Hashable, set[tuple[str, int]]] = {}
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


def read_split(path: PathLike, graph: Graph | None = None) -> dict[Any, tuple[str, int]]:
    """Read a split JSON file; see :func:`split_from_dict`.

    Raises
    ------
    InvalidGraphError
        No such file, not JSON, or a malformed split (see :func:`split_from_dict`).
    """
    return split_from_dict(_load_json(path), graph)


def split_to_dict(assignment: Assignment, loads: Mapping[tuple[str, int], float] | None = None) -> dict[str, Any]:
    """The split JSON object for an assignment (devices in index order).

    Raises
    ------
    This function raises nothing: kinds other than accelerator and cpu are left out.
    """
    out: dict[str, Any] = {"fpgas": [], "cpus": []}
    for key, kind in (("fpgas", ACCELERATOR), ("cpus", CPU)):
        idx = sorted({i for k, i in assignment.values() if k == kind})
        for i in idx:
            dev: dict[str, Any] = {"nodes": [n for n, (k, j) in assignment.items() if k == kind and j == i]}
            if loads is not None and (kind, i) in loads:
                dev["load"] = loads[(kind, i)]
            out[key].append(dev)
    return out


def write_split(assignment: Assignment, path: PathLike,
                loads: Mapping[tuple[str, int], float] | None = None) -> None:
    """Write a split JSON file (atomically, see :func:`write_json`).

    Raises
    ------
    OSError
        The file cannot be written.
    """
    write_json(split_to_dict(assignment, loads), path)
