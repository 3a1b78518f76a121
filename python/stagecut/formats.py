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
import math
import os
import secrets
import stat
from collections.abc import Callable, Hashable, Mapping
from typing import Any, BinaryIO

from stagecut.errors import InvalidArgumentError, InvalidGraphError
from stagecut.graph import ACCELERATOR, CPU, Graph, Node
from stagecut.validate import check_field, check_flag, check_id, check_int, check_list, check_number, shown

__all__ = ["read_workload", "workload_from_dict", "workload_to_dict", "write_workload",
           "read_split", "split_from_dict", "split_to_dict", "write_split", "write_json", "read_json",
           "check_writable", "json_safe", "Assignment"]

#: node id -> (device kind, device index)
Assignment = Mapping[Any, tuple[str, int]]
PathLike = str | os.PathLike[str]


def json_safe(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by ``None`` (JSON has no ``Infinity`` or
    ``NaN``; the results' own ``to_json`` already writes them as strings).

    >>> json_safe({"load": float("inf"), "nodes": [1, 2.5]})
    {'load': None, 'nodes': [1, 2.5]}
    """
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def check_writable(path: PathLike, what: str = "output") -> None:
    """Refuse an output path that cannot be written, before any work is done: its directory
    must exist and be writable, and the path must not be a directory.

    Raises
    ------
    InvalidArgumentError
        Names the path and what is wrong.
    """
    target = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(target)
    if os.path.isdir(target):
        raise InvalidArgumentError(f"{what} {os.fspath(path)}: is a directory, not a file")
    if not os.path.isdir(folder):
        raise InvalidArgumentError(f"{what} {os.fspath(path)}: the directory {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InvalidArgumentError(f"{what} {os.fspath(path)}: the directory {folder} is not writable")
    if os.path.exists(target) and not os.access(target, os.W_OK):
        raise InvalidArgumentError(f"{what} {os.fspath(path)}: the file is not writable")


def write_json(obj: Any, path: PathLike, *, indent: int | None = 1) -> None:
    """Write ``obj`` as JSON atomically: to a temporary file beside ``path`` (flushed to disk),
    then renamed over it. A full disk, a crash or Ctrl-C never leaves a half-written file: the
    old file, if any, stays as it was. The new file gets the old file's permissions (else the
    umask's). ``Infinity``/``NaN`` are refused (they are not JSON).

    Raises
    ------
    OSError
        The directory is not writable, or the disk is full (the old file is untouched).
    ValueError
        ``obj`` holds a non-finite float or something JSON cannot encode (nothing is written).
    """
    text = json.dumps(obj, indent=indent, allow_nan=False) + "\n"  # fails before anything is written
    atomic_write(path, lambda f: f.write(text.encode()))


def atomic_write(path: PathLike, write: Callable[[BinaryIO], Any]) -> None:
    """Call ``write`` on a binary file that becomes ``path`` only once it is complete: a
    temporary file beside ``path``, flushed to disk, then renamed over it with the old file's
    permissions (else the umask's). On any error, or Ctrl-C, the temporary file is removed and
    the old file, if any, stays as it was.

    Raises
    ------
    OSError
        The directory is not writable, or the disk is full (the old file is untouched).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> atomic_write(path, lambda f: f.write(b"hello"))
    >>> open(path).read()
    'hello'
    """
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    tmp = os.path.join(folder, f".{os.path.basename(target)}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))
        except FileNotFoundError:
            pass
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def read_json(path: PathLike, what: str = "a JSON file") -> Any:
    """The parsed content of a JSON file; anything wrong with it is one clear error.

    Raises
    ------
    InvalidGraphError
        No such file, a directory, not UTF-8 text, not valid JSON, nested too deeply, or an
        integer with too many digits (names ``path`` and ``what`` it should be).
    InvalidArgumentError
        ``path`` is not a file name.
    OSError
        The file exists but cannot be read (permissions).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidArgumentError(f"path: expected a file name, got {type(path).__name__} {shown(path)}")
    try:
        with open(path, encoding="utf-8-sig") as f:  # a byte-order mark, as some editors write, is fine
            return json.load(f)
    except FileNotFoundError:
        raise InvalidGraphError(f"{os.fspath(path)}: no such file ({what})") from None
    except IsADirectoryError:
        raise InvalidGraphError(f"{os.fspath(path)}: is a directory, not {what}") from None
    except UnicodeDecodeError:
        raise InvalidGraphError(f"{os.fspath(path)}: not UTF-8 text, so not {what}") from None
    except json.JSONDecodeError as e:
        raise InvalidGraphError(f"{os.fspath(path)}: not valid JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise InvalidGraphError(f"{os.fspath(path)}: JSON nested too deeply to read") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise InvalidGraphError(f"{os.fspath(path)}: not valid JSON ({str(e).splitlines()[0][:80]})") from None


def _read_edges(edges_in: list[Any]) -> tuple[list[tuple[Any, Any]], dict[Any, float]]:
    """The edges and each source's ``cost`` (equal on every edge out of one node)."""
    comm: dict[Any, float] = {}
    edges = []
    for i, e in enumerate(edges_in):
        where = f"edges[{i}]"
        u = check_id(check_field(e, "sourceId", where), f"{where}.sourceId")
        v = check_id(check_field(e, "destId", where), f"{where}.destId")
        cost = check_number(check_field(e, "cost", where), f"{where}.cost")
        if u in comm and abs(comm[u] - cost) > 1e-6:
            raise InvalidGraphError(
                f"{where}: node {shown(u)} has two different outgoing edge costs ({comm[u]} and {cost})"
            )
        comm.setdefault(u, cost)
        edges.append((u, v))
    return edges, comm


def _read_node(n: Any, i: int, comm: Mapping[Any, float]) -> Node:
    nid = check_id(check_field(n, "id", f"nodes[{i}]"), f"nodes[{i}].id")
    where = f"node {shown(nid)}"
    supported = check_flag(check_field(n, "supportedOnFpga", where), f"{where}: supportedOnFpga")
    colour = n.get("colorClass")
    name = n.get("name")
    if name is not None and not isinstance(name, str):
        raise InvalidGraphError(f"{where}: name must be a string, got {type(name).__name__}")
    return Node(
        id=nid,
        compute={ACCELERATOR: check_number(check_field(n, "fpgaLatency", where), f"{where}: fpgaLatency"),
                 CPU: check_number(check_field(n, "cpuLatency", where), f"{where}: cpuLatency")},
        memory=check_number(n.get("size", 0.0), f"{where}: size"),
        comm=comm.get(nid, 0.0),
        kinds=None if supported else frozenset({CPU}),
        colocation=None if colour is None else check_id(colour, f"{where}: colorClass"),
        backward=check_flag(n.get("isBackwardNode", False), f"{where}: isBackwardNode"),
        name=name,
    )


def _count(key: str) -> Callable[[Any], int]:
    return lambda v: check_int(v, key, error=InvalidGraphError)


#: workload field -> (Graph.defaults key, reader)
_DEFAULTS: dict[str, tuple[str, Callable[[Any], float]]] = {
    "maxFPGAs": ("accelerators", _count("maxFPGAs")),
    "maxCPUs": ("cpus", _count("maxCPUs")),
    "maxSizePerFPGA": ("memory", lambda v: check_number(v, "maxSizePerFPGA", allow_inf=True)),
}


def workload_from_dict(data: Mapping[str, Any]) -> Graph:
    """Build a :class:`Graph` from a parsed workload JSON object.

    Every field is checked as :mod:`stagecut.validate` says: times, sizes and costs are
    numbers (not strings, not booleans), ``supportedOnFpga`` and ``isBackwardNode`` booleans
    or 0/1 (not strings), ``maxFPGAs`` and ``maxCPUs`` integers (``2.0`` is refused: write
    ``2``), ids and colour classes strings, numbers or lists (read as tuples). Unknown keys
    are ignored.

    Raises
    ------
    InvalidGraphError
        A missing or malformed field (the message names the node or field).
    CycleError
        The edges close a cycle.

    Examples
    --------
    >>> node = {"id": 1, "supportedOnFpga": "false", "cpuLatency": 1, "fpgaLatency": 1}
    >>> workload_from_dict({"nodes": [node], "edges": []})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidGraphError: node 1: supportedOnFpga: 'false' is not a boolean (...)
    """
    if not isinstance(data, Mapping):
        raise InvalidGraphError(f"workload: expected a JSON object, got {type(data).__name__}")
    nodes_in = check_list(check_field(data, "nodes", "workload"), "workload: 'nodes'")
    edges_in = check_list(check_field(data, "edges", "workload"), "workload: 'edges'")
    edges, comm = _read_edges(edges_in)
    nodes = [_read_node(n, i, comm) for i, n in enumerate(nodes_in)]
    defaults = {name: read(data[key]) for key, (name, read) in _DEFAULTS.items() if key in data}
    return Graph(nodes, edges, defaults)


def read_workload(path: PathLike) -> Graph:
    """Read a workload JSON file (see the module docstring for the format).

    Raises
    ------
    InvalidGraphError
        No such file, not JSON, or a malformed workload (names the field).
    CycleError
        The edges close a cycle.
    OSError
        The file exists but cannot be read.
    """
    return workload_from_dict(read_json(path, "a workload"))


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
    for key, (name, _) in _DEFAULTS.items():
        value = graph.defaults.get(name)
        if value is not None and not (isinstance(value, float) and math.isinf(value)):  # inf: no limit
            out[key] = value
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

    Node ids are read as in a workload (a list is a tuple id: :meth:`Plan.to_split` writes tuple
    ids so). With ``graph``, node ids are checked, and nodes the split leaves out are placed with
    the other nodes of their colocation class (a training graph's backward nodes follow their
    forward nodes, as in the hand-made splits); a node that cannot be placed that way is an
    error.

    Raises
    ------
    InvalidGraphError
        A malformed split (names the field), a node assigned twice, an unknown node, or (with
        ``graph``) a node left out whose device cannot be inferred.
    """
    if not isinstance(data, Mapping):
        raise InvalidGraphError(f"split: expected a JSON object with 'fpgas' and/or 'cpus', got {type(data).__name__}")
    if "fpgas" not in data and "cpus" not in data:
        raise InvalidGraphError("split: expected a JSON object with 'fpgas' and/or 'cpus' "
                                "(lists of {\"nodes\": [...]})")
    assignment: dict[Any, tuple[str, int]] = {}
    for key, kind in (("fpgas", ACCELERATOR), ("cpus", CPU)):
        devices = check_list(data.get(key, []), f"split: {key!r}")
        for d, dev in enumerate(devices):
            where = f"split {key}[{d}]"
            for j, raw in enumerate(check_list(check_field(dev, "nodes", where), f"{where}.nodes")):
                nid = check_id(raw, f"{where}.nodes[{j}]")
                if nid in assignment:
                    raise InvalidGraphError(f"split: node {shown(nid)} is assigned twice")
                if graph is not None and nid not in graph.index:
                    raise InvalidGraphError(f"split: unknown node {shown(nid)}")
                assignment[nid] = (kind, d)
    if graph is not None:
        _infer_left_out(assignment, graph)
    return assignment


def _infer_left_out(assignment: dict[Any, tuple[str, int]], graph: Graph) -> None:
    """Place each node the split leaves out with its colocation class (or raise)."""
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
                f"split: node {shown(n.id)} is not assigned and {why} device can be inferred from its colocation class"
            )
        assignment[n.id] = next(iter(places))


def read_split(path: PathLike, graph: Graph | None = None) -> dict[Any, tuple[str, int]]:
    """Read a split JSON file; see :func:`split_from_dict`.

    Raises
    ------
    InvalidGraphError
        No such file, not JSON, or a malformed split (see :func:`split_from_dict`).
    OSError
        The file exists but cannot be read.
    """
    return split_from_dict(read_json(path, "a split"), graph)


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
                dev["load"] = json_safe(loads[(kind, i)])
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
