"""The max-load evaluator: the one judge of every pipeline split.

It is written from the cost model alone and shares no code with the solvers. A device of kind
``k`` holding the node set ``S`` has load = the sum of the nodes' compute times on ``k``, plus,
on accelerators, the communication cost of every producing node with an edge crossing the
boundary of ``S`` (in or out), counted once per producer however many edges cross (CPUs pay no
communication: the data is already in CPU memory). An accelerator is infeasible when the nodes'
memory exceeds the limit; any device is infeasible when it holds a node it cannot run, and a
split is infeasible when it separates a colocation class or uses more devices than given.
The objective is the largest load.

A split is *contiguous* when, in the forward graph with colocation classes contracted, every
device's forward nodes form a convex set (no path leaves the set and comes back).
"""

from __future__ import annotations

import math
from typing import Hashable, Mapping

from stagecut.errors import InvalidGraphError
from stagecut.graph import ACCELERATOR, Graph
from stagecut.results import DeviceLoad, Evaluation

__all__ = ["evaluate", "is_contiguous"]

_COMM_KINDS = frozenset({ACCELERATOR})


def evaluate(
    graph: Graph,
    assignment: Mapping[Hashable, "tuple[str, int]"],
    *,
    memory: float | None = None,
    accelerators: int | None = None,
    cpus: int | None = None,
    comm_kinds: frozenset = _COMM_KINDS,
) -> Evaluation:
    """Score a split in the max-load cost model.

    Parameters
    ----------
    graph : Graph
    assignment : mapping node id -> (device kind, device index)
        Every node must be assigned.
    memory : float, optional
        Memory capacity of an accelerator (default: ``graph.defaults["memory"]``, else none).
    accelerators, cpus : int, optional
        Device counts to check against (default: the graph's defaults, else unchecked).

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([3.0, 1.0, 2.0], comm=0.5)
    >>> ev = sc.evaluate(g, {0: ("accelerator", 0), 1: ("accelerator", 1), 2: ("accelerator", 1)})
    >>> ev.objective, [d.load for d in ev.devices]
    (3.5, [3.5, 3.5])
    """
    memory = graph.defaults.get("memory", math.inf) if memory is None else memory
    accelerators = graph.defaults.get("accelerators") if accelerators is None else accelerators
    cpus = graph.defaults.get("cpus") if cpus is None else cpus
    missing = [n.id for n in graph.nodes if n.id not in assignment]
    if missing:
        raise InvalidGraphError(f"split leaves node {missing[0]!r} unassigned ({len(missing)} in all)")
    for nid in assignment:
        if nid not in graph.index:
            raise InvalidGraphError(f"split assigns unknown node {nid!r}")
    dev_of = [tuple(assignment[n.id]) for n in graph.nodes]
    devices = sorted(set(dev_of), key=lambda d: (d[0] != ACCELERATOR, str(d[0]), d[1]))
    members: dict = {d: [] for d in devices}
    for i, d in enumerate(dev_of):
        members[d].append(i)
    comm_in: dict = {d: 0.0 for d in devices}
    for u, n in enumerate(graph.nodes):
        targets = {dev_of[v] for v in graph.succ[u]} - {dev_of[u]}
        if targets:
            comm_in[dev_of[u]] += n.comm  # the producer sends once
            for t in targets:
                comm_in[t] += n.comm  # each other device receives once
    issues = []
    loads = []
    for d in devices:
        kind, idx = d
        nodes = [graph.nodes[i] for i in members[d]]
        compute = math.fsum(n.time(kind) for n in nodes)
        comm = comm_in[d] if kind in comm_kinds else 0.0
        mem = math.fsum(n.memory for n in nodes)
        dev_issues = []
        bad = [n.id for n in nodes if not n.supports(kind)]
        if bad:
            dev_issues.append(f"node {bad[0]!r} cannot run on a {kind}")
        if kind == ACCELERATOR and mem > memory:
            dev_issues.append(f"memory {mem:g} exceeds the limit {memory:g}")
        loads.append(
            DeviceLoad(kind=kind, index=idx, nodes=tuple(n.id for n in nodes), load=compute + comm,
                       compute=compute, comm=comm, memory=mem, feasible=not dev_issues,
                       issues=tuple(dev_issues))
        )
        issues.extend(f"{kind} {idx}: {x}" for x in dev_issues)
    classes: dict = {}
    for i, n in enumerate(graph.nodes):
        if n.colocation is not None:
            classes.setdefault(n.colocation, set()).add(dev_of[i])
    for c, ds in classes.items():
        if len(ds) > 1:
            issues.append(f"colocation class {c!r} is split across {len(ds)} devices")
    for kind, limit in ((ACCELERATOR, accelerators), ("cpu", cpus)):
        used = sum(1 for d in devices if d[0] == kind)
        if limit is not None and used > limit:
            issues.append(f"uses {used} {kind} devices, only {limit} available")
    objective = max(d.load for d in loads)
    return Evaluation(objective=objective, devices=tuple(loads), feasible=not issues,
                      contiguous=is_contiguous(graph, dev_of), issues=tuple(issues))


def is_contiguous(graph: Graph, device_of_node: "list | Mapping") -> bool:
    """Is every device's forward node set convex once colocation classes are contracted?

    ``device_of_node`` is indexed by node position (a list) or maps node ids to devices.
    """
    if isinstance(device_of_node, Mapping):
        dev = [device_of_node[n.id] for n in graph.nodes]
    else:
        dev = list(device_of_node)
    fwd = [i for i, n in enumerate(graph.nodes) if not n.backward]
    # class representative of each forward node
    rep: dict = {}
    cls = {}
    for i in fwd:
        c = graph.nodes[i].colocation
        key = ("c", c) if c is not None else ("n", i)
        cls[i] = rep.setdefault(key, len(rep))
    m = len(rep)
    cdev: list = [None] * m
    for i in fwd:
        cdev[cls[i]] = dev[i]
    succ: list = [set() for _ in range(m)]
    for i in fwd:
        for j in graph.succ[i]:
            if not graph.nodes[j].backward and cls[i] != cls[j]:
                succ[cls[i]].add(cls[j])
    for d in set(cdev):
        inside = [c for c in range(m) if cdev[c] == d]
        # from every outside successor of the set, can we get back into the set?
        stack = [w for c in inside for w in succ[c] if cdev[w] != d]
        seen = set(stack)
        while stack:
            c = stack.pop()
            for w in succ[c]:
                if cdev[w] == d:
                    return False
                if w not in seen:
                    seen.add(w)
                    stack.append(w)
    return True
