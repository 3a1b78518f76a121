"""The max-load evaluator: the one judge of every pipeline split.

It is written from the cost model alone (Tarnawski et al., NeurIPS 2020, Table 1) and shares no
code with the solvers. A device of kind ``k`` holding the node set ``S`` has load = the sum of
the nodes' compute times on ``k``, plus, on accelerators, the communication cost of every
producing node with an edge crossing the boundary of ``S`` (in or out), counted once per
producer however many edges cross (CPUs pay no communication: the data is already in CPU
memory). Times are in the input's unit (milliseconds in the workload files), memory in the
input's unit (bytes). An accelerator is infeasible when its nodes' memory exceeds the limit;
any device is infeasible when it holds a node it cannot run, and a split is infeasible when it
separates a colocation class or uses more devices than given. The objective is the largest load.

Two properties of a split's shape are reported (:class:`~stagecut.results.Evaluation`):

*convex* (:func:`is_convex`)
    In the forward graph with colocation classes contracted, every device's forward nodes form
    a convex set (no path leaves the set and comes back).
*acyclic quotient*, also called *contiguous* (:func:`is_contiguous`)
    The devices can be ordered as a pipeline: the graph whose nodes are the devices, with an
    edge for every forward edge between two devices (and, for a colocation class that has only
    backward nodes, the mirror image of its backward edges), has no cycle. Equivalently the
    blocks, taken in pipeline order, form a chain of ideals (downsets): the set the exact DP,
    DPL and the contiguous IP optimise over (``Plan.contiguous``).

An acyclic quotient implies convex blocks, not conversely: blocks ``{a1, a2}`` and ``{b1, b2}``
with edges ``a1 -> b1`` and ``b2 -> a2`` are both convex, but each must come before the other.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from stagecut.errors import InvalidArgumentError, InvalidGraphError, user_stacklevel
from stagecut.graph import ACCELERATOR, CPU, Graph, NodeId
from stagecut.graph_check import check_graph
from stagecut.results import DeviceLoad, Evaluation
from stagecut.validate import check_int, check_number

__all__ = ["evaluate", "is_contiguous", "is_convex"]

#: a node id type (``int``, ``str``...): a ``dict[int, tuple[str, int]]`` is a valid split
K = TypeVar("K", bound=Hashable)
Device = tuple[str, int]

_COMM_KINDS = frozenset({ACCELERATOR})


def evaluate(
    graph: Graph,
    assignment: Mapping[K, tuple[str, int]],
    *,
    devices: int | None = None,
    cpus: int | None = None,
    memory: float | None = None,
    comm_kinds: frozenset[str] = _COMM_KINDS,
    accelerators: int | None = None,
) -> Evaluation:
    """Score a split in the max-load cost model.

    Parameters
    ----------
    graph : Graph
    assignment : mapping node id -> (device kind, device index)
        Every node must be assigned (e.g. :meth:`stagecut.Plan.device_of`, or
        :func:`stagecut.read_split`).
    devices, cpus : int, optional
        Accelerator and CPU counts to check against; default the graph's defaults (a workload
        file's ``maxFPGAs`` / ``maxCPUs``), else unchecked.
    memory : float, optional
        Memory per accelerator, in the nodes' memory unit; default the graph's
        (``maxSizePerFPGA``), else unlimited.
    comm_kinds : frozenset of str
        The device kinds that pay communication (accelerators).
    accelerators : int, optional
        Deprecated spelling of ``devices``.

    Returns
    -------
    Evaluation
        ``objective`` (the largest load, in the input's time unit), one
        :class:`~stagecut.results.DeviceLoad` per device used (accelerators first), whether the
        split is feasible (and why not, in ``issues``), whether its blocks are ``convex`` and
        whether its quotient is acyclic (``acyclic_quotient``, also ``contiguous``).

    Raises
    ------
    InvalidGraphError
        A node left unassigned, an unknown node, a device that is not a (kind, index) pair.
    InvalidArgumentError
        A bad device count or memory.

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([3.0, 1.0, 2.0], comm=0.5)
    >>> ev = sc.evaluate(g, {0: ("accelerator", 0), 1: ("accelerator", 1), 2: ("accelerator", 1)})
    >>> ev.objective, [(s.device, s.load, s.compute, s.comm) for s in ev.stages]
    (3.5, [('accelerator:0', 3.5, 3.0, 0.5), ('accelerator:1', 3.5, 3.0, 0.5)])
    >>> sc.evaluate(g, {i: ("accelerator", i) for i in range(3)}, devices=2).issues
    ('uses 3 accelerator devices, only 2 available',)
    """
    check_graph(graph)
    devices, cpus, memory = _limits(graph, devices, cpus, memory, accelerators)
    dev_of = _devices_of(graph, assignment)
    used = sorted(set(dev_of), key=lambda d: (d[0] != ACCELERATOR, d[0], d[1]))
    slot = {d: k for k, d in enumerate(used)}
    dev = np.array([slot[d] for d in dev_of], dtype=np.int64)
    comm = _comm_loads(graph, dev, len(used))
    arr = graph.arrays()
    ids = [n.id for n in graph.nodes]
    order = np.argsort(dev, kind="stable")
    ends = np.cumsum(np.bincount(dev, minlength=len(used))).tolist()
    stages = []
    for k, d in enumerate(used):
        on = order[(ends[k - 1] if k else 0):ends[k]]
        stages.append(_device_load(k, d, [ids[i] for i in on.tolist()], arr.kind(d[0]), on, arr.memory[on],
                                   comm[k] if d[0] in comm_kinds else [], memory))
    issues = [f"{s.kind} {s.kind_index}: {x}" for s in stages for x in s.issues]
    issues += _split_issues(graph, dev_of, used, devices, cpus)
    acyclic = _acyclic_quotient(graph, dev, len(used))
    plain = not (arr.backward.any() or arr.colocated.any())  # then an acyclic quotient makes convex blocks
    return Evaluation(objective=max(s.load for s in stages), stages=tuple(stages), feasible=not issues,
                      convex=(acyclic and plain) or is_convex(graph, dev_of), acyclic_quotient=acyclic,
                      issues=tuple(issues))


def _limits(graph: Graph, devices: int | None, cpus: int | None, memory: float | None,
            accelerators: int | None) -> tuple[int | None, int | None, float]:
    """The device counts (``None``: unchecked) and memory to hold the split to."""
    if accelerators is not None:
        warnings.warn("evaluate(accelerators=...) is deprecated and will be removed in the next release; "
                      "use devices=...", DeprecationWarning, stacklevel=user_stacklevel())
        if devices is not None:
            raise InvalidArgumentError("give devices=, not both devices= and the deprecated accelerators=")
        devices = accelerators
    d = graph.defaults
    counts: list[int | None] = []
    for name, key, given in (("devices", "accelerators", devices), ("cpus", "cpus", cpus)):
        if given is not None:
            counts.append(check_int(given, name))
        elif key in d:
            counts.append(check_int(d[key], f"{name} (the graph's default {key!r})", error=InvalidGraphError))
        else:
            counts.append(None)
    if memory is not None:
        mem = check_number(memory, "memory", allow_inf=True, error=InvalidArgumentError)
    else:
        mem = check_number(d.get("memory", math.inf), "memory (the graph's default)", allow_inf=True)
    return counts[0], counts[1], mem


def _devices_of(graph: Graph, assignment: Mapping[K, tuple[str, int]]) -> list[Device]:
    """The device of each node position, checked."""
    if not isinstance(assignment, Mapping):
        raise InvalidGraphError(f"split must map node ids to (kind, index), got {type(assignment).__name__}")
    missing = [n.id for n in graph.nodes if n.id not in assignment]
    if missing:
        raise InvalidGraphError(f"split leaves node {missing[0]!r} unassigned ({len(missing)} in all)")
    if len(assignment) != len(graph):  # else every key is one of the graph's (all of them are keys)
        for nid in assignment:
            if nid not in graph.index:
                raise InvalidGraphError(f"split assigns unknown node {nid!r}")
    values = [assignment[n.id] for n in graph.nodes]  # type: ignore[index]  # every id is in it (checked above)
    # each object checked once (the solvers share one (kind, index) tuple per device); ``values``
    # keeps every object alive, so that no id is reused
    norm: dict[int, Device] = {}
    for d in values:
        if id(d) in norm:
            continue
        ok = isinstance(d, Sequence) and len(d) == 2 and isinstance(d[0], str)
        if not ok or isinstance(d[1], bool) or not isinstance(d[1], int) or d[1] < 0:
            first = next(n for n, x in zip(graph.nodes, values) if id(x) == id(d))
            raise InvalidGraphError(f"split: node {first.id!r} is on {d!r}, not a (kind, index >= 0) pair")
        norm[id(d)] = (d[0], int(d[1]))
    return [norm[id(d)] for d in values]


def _comm_loads(graph: Graph, dev: npt.NDArray[np.int64], n_dev: int) -> list[list[float]]:
    """Tensor-once communication terms of each device (by its slot in ``dev``): a producer pays
    its output once if some consumer is elsewhere; each other device holding a consumer receives
    it once."""
    arr = graph.arrays()
    src, dst = arr.src, arr.dst
    cross = dev[src] != dev[dst]
    u = src[cross]
    producers = np.unique(u)
    pairs = np.unique(u * n_dev + dev[dst[cross]])  # (producer, receiving device), once each
    pu, pd = pairs // n_dev, pairs % n_dev
    owner = np.concatenate([dev[producers], pd])
    values = np.concatenate([arr.comm[producers], arr.comm[pu]])
    order = np.argsort(owner, kind="stable")
    ends = np.cumsum(np.bincount(owner, minlength=n_dev)).tolist()
    flat = values[order].tolist()
    return [flat[(ends[k - 1] if k else 0):ends[k]] for k in range(n_dev)]


def _fsum(values: Iterable[float]) -> float:
    """``math.fsum``; ``inf`` when the sum overflows the float range."""
    try:
        return math.fsum(values)
    except OverflowError:
        return math.inf


def _device_load(position: int, device: Device, ids: list[NodeId],
                 kind_arrays: tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]], on: npt.NDArray[np.int64],
                 memories: npt.NDArray[np.float64], comm_terms: list[float], memory: float) -> DeviceLoad:
    """One device's load, its parts and its issues; every sum correctly rounded (``math.fsum``),
    so that costs spanning many orders of magnitude keep their small terms. ``ids``: the nodes
    at positions ``on``; ``kind_arrays``: which nodes may run on the device's kind, and their
    times (:meth:`~stagecut.graph.GraphArrays.kind`)."""
    kind, idx = device
    issues = []
    supported, time_of = kind_arrays
    ok = supported[on]
    if not ok.all():
        issues.append(f"node {ids[int(np.argmin(ok))]!r} cannot run on a {kind}")
    times = time_of[on[ok]].tolist()
    compute, comm, load = _fsum(times), _fsum(comm_terms), _fsum(times + comm_terms)
    mem = _fsum(memories.tolist())
    if kind == ACCELERATOR and mem > memory:
        issues.append(f"memory {mem:g} exceeds the limit {memory:g}")
    if math.isinf(load):
        issues.append("the load overflows the floating-point range (costs near 1e308): rescale the inputs")
    return DeviceLoad(index=position, device=f"{kind}:{idx}", kind=kind, kind_index=idx,
                      nodes=tuple(ids), load=load,
                      parts={"compute": compute, "comm": comm}, memory=mem, feasible=not issues,
                      issues=tuple(issues))


def _split_issues(graph: Graph, dev_of: list[Device], used: list[Device], devices: int | None,
                  cpus: int | None) -> list[str]:
    """Colocation classes split across devices; more devices of a kind than available."""
    issues = []
    classes: dict[Hashable, set[Device]] = {}
    for i in np.flatnonzero(graph.arrays().colocated).tolist():
        classes.setdefault(graph.nodes[i].colocation, set()).add(dev_of[i])
    for c, ds in classes.items():
        if len(ds) > 1:
            issues.append(f"colocation class {c!r} is split across {len(ds)} devices")
    for kind, limit in ((ACCELERATOR, devices), (CPU, cpus)):
        n_used = sum(1 for d in used if d[0] == kind)
        if limit is not None and n_used > limit:
            issues.append(f"uses {n_used} {kind} devices, only {limit} available")
    for kind in sorted({d[0] for d in used} - {ACCELERATOR, CPU}):
        issues.append(f"uses {kind} devices, which the throughput model does not have")
    return issues


def is_contiguous(graph: Graph, device_of_node: Sequence[Hashable] | Mapping[K, Hashable]) -> bool:
    """Is the split's quotient graph acyclic (can its devices be ordered as a pipeline)?

    The quotient has a node per device and an edge ``d -> e`` for every edge between a forward
    node on ``d`` and a forward node on ``e`` (and, for a colocation class without forward
    nodes, for the mirror image of its backward edges). Acyclic means the blocks, in a
    topological order of the quotient, form a chain of ideals: the splits the exact DP, DPL
    and the contiguous IP optimise over. Implies :func:`is_convex`.

    Parameters
    ----------
    graph : Graph
    device_of_node : sequence or mapping
        The device of each node: a sequence indexed by node position, or a mapping from node
        ids (e.g. :meth:`stagecut.Plan.device_of`). Devices are any hashable values.

    Returns
    -------
    bool

    Raises
    ------
    InvalidGraphError
        A node without a device (a mapping that misses it, a sequence of the wrong length).

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([1.0, 1.0, 1.0])
    >>> sc.is_contiguous(g, ["a", "b", "b"]), sc.is_contiguous(g, {0: "a", 1: "b", 2: "a"})
    (True, False)
    >>> from stagecut.graph import Node
    >>> two = sc.Graph([Node(v, {"accelerator": 1.0}) for v in ("a1", "a2", "b1", "b2")],
    ...                [("a1", "b1"), ("b2", "a2")])
    >>> split = {"a1": 0, "a2": 0, "b1": 1, "b2": 1}  # convex blocks, but 0 -> 1 and 1 -> 0
    >>> sc.is_contiguous(two, split), is_convex(two, split)
    (False, True)
    """
    dev = _device_list(graph, device_of_node)
    slot: dict[Hashable, int] = {}
    codes = np.fromiter((slot.setdefault(d, len(slot)) for d in dev), dtype=np.int64, count=len(dev))
    return _acyclic_quotient(graph, codes, len(slot))


def _acyclic_quotient(graph: Graph, dev: npt.NDArray[np.int64], n_dev: int) -> bool:
    """:func:`is_contiguous` with the devices numbered ``0 .. n_dev - 1`` (``dev``: each node's)."""
    arr = graph.arrays()
    src, dst = arr.src, arr.dst
    if arr.backward.any():
        has_forward = {n.colocation for n in graph.nodes if not n.backward and n.colocation is not None}
        hf = np.fromiter((n.colocation is not None and n.colocation in has_forward for n in graph.nodes),
                         dtype=np.bool_, count=len(graph))
        bw = arr.backward
        fwd = ~bw[src] & ~bw[dst]
        # an all-backward class: its edges mirrored into the forward order
        mirrored = bw[src] & bw[dst] & ~(hf[src] & hf[dst])
        a = np.concatenate([dev[src[fwd]], dev[dst[mirrored]]])
        b = np.concatenate([dev[dst[fwd]], dev[src[mirrored]]])
    else:
        a, b = dev[src], dev[dst]
    keep = a != b
    pairs = np.unique(a[keep] * n_dev + b[keep])
    heads, tails = (pairs // n_dev).tolist(), (pairs % n_dev).tolist()
    succ: list[list[int]] = [[] for _ in range(n_dev)]
    indeg = [0] * n_dev
    for x, y in zip(heads, tails):
        succ[x].append(y)
        indeg[y] += 1
    ready = [x for x in range(n_dev) if indeg[x] == 0]
    seen = 0
    while ready:  # Kahn's algorithm: every device is reached exactly when there is no cycle
        x = ready.pop()
        seen += 1
        for y in succ[x]:
            indeg[y] -= 1
            if indeg[y] == 0:
                ready.append(y)
    return seen == n_dev


def _device_list(graph: Graph, device_of_node: Sequence[Hashable] | Mapping[K, Hashable]) -> list[Hashable]:
    """The device of each node position, checked for completeness."""
    if isinstance(device_of_node, Mapping):
        missing = [n.id for n in graph.nodes if n.id not in device_of_node]
        if missing:
            raise InvalidGraphError(f"split leaves node {missing[0]!r} unassigned ({len(missing)} in all)")
        return [device_of_node[n.id] for n in graph.nodes]  # type: ignore[index]
    dev = list(device_of_node)
    if len(dev) != len(graph):
        raise InvalidGraphError(f"split gives {len(dev)} devices for {len(graph)} nodes")
    return dev


def is_convex(graph: Graph, device_of_node: Sequence[Hashable] | Mapping[K, Hashable]) -> bool:
    """Is every device's forward node set convex once colocation classes are contracted?

    Weaker than :func:`is_contiguous` (an acyclic quotient): two convex blocks can still each
    need to come before the other.

    Parameters
    ----------
    graph : Graph
    device_of_node : sequence or mapping
        The device of each node: a sequence indexed by node position, or a mapping from node
        ids (e.g. :meth:`stagecut.Plan.device_of`). Devices are any hashable values.

    Returns
    -------
    bool

    Raises
    ------
    InvalidGraphError
        A node without a device (a mapping that misses it, a sequence of the wrong length).

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([1.0, 1.0, 1.0])
    >>> from stagecut.throughput.evaluate import is_convex
    >>> is_convex(g, ["a", "b", "b"]), is_convex(g, {0: "a", 1: "b", 2: "a"})
    (True, False)
    """
    dev = _device_list(graph, device_of_node)
    cls, succ = _forward_classes(graph)
    cdev: dict[int, Hashable] = {c: dev[i] for i, c in cls.items()}
    for d in set(cdev.values()):
        # from every outside successor of the set, can we get back into the set?
        stack = [w for c in cdev if cdev[c] == d for w in succ[c] if cdev[w] != d]
        seen = set(stack)
        while stack:
            for w in succ[stack.pop()]:
                if cdev[w] == d:
                    return False
                if w not in seen:
                    seen.add(w)
                    stack.append(w)
    return True


def _forward_classes(graph: Graph) -> tuple[dict[int, int], list[set[int]]]:
    """The class of each forward node position, and the successors of each class."""
    rep: dict[tuple[str, Hashable], int] = {}
    cls: dict[int, int] = {}
    for i, n in enumerate(graph.nodes):
        if not n.backward:
            key = ("c", n.colocation) if n.colocation is not None else ("n", i)
            cls[i] = rep.setdefault(key, len(rep))
    succ: list[set[int]] = [set() for _ in range(len(rep))]
    for i in cls:
        for j in graph.succ[i]:
            if j in cls and cls[i] != cls[j]:
                succ[cls[i]].add(cls[j])
    return cls, succ
