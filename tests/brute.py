"""Brute force for the max-load objective: every assignment of nodes to devices whose
quotient graph is acyclic (a chain of ideals), scored by the evaluator."""

import itertools
import math

import stagecut as sc


def _quotient_acyclic(graph, dev_of):
    fwd = [i for i, n in enumerate(graph.nodes) if not n.backward]
    edges = {(dev_of[i], dev_of[j]) for i in fwd for j in graph.succ[i]
             if not graph.nodes[j].backward and dev_of[i] != dev_of[j]}
    nodes = {dev_of[i] for i in fwd}
    indeg = {d: 0 for d in nodes}
    for _, b in edges:
        indeg[b] += 1
    ready = [d for d in nodes if indeg[d] == 0]
    seen = 0
    while ready:
        d = ready.pop()
        seen += 1
        for a, b in edges:
            if a == d:
                indeg[b] -= 1
                if indeg[b] == 0:
                    ready.append(b)
    return seen == len(nodes)


def colocation_groups(graph):
    """Node positions by colocation class (a node without one is its own class)."""
    classes = {}
    for i, n in enumerate(graph.nodes):
        classes.setdefault(n.colocation if n.colocation is not None else ("node", i), []).append(i)
    return list(classes.values())


def brute_force(graph, accelerators, cpus, memory=math.inf):
    devices = [("accelerator", i) for i in range(accelerators)] + [("cpu", i) for i in range(cpus)]
    groups = colocation_groups(graph)  # assign colocation classes as a whole
    best = math.inf
    for choice in itertools.product(range(len(devices)), repeat=len(groups)):
        dev_of = [None] * len(graph)
        for g, c in zip(groups, choice):
            for i in g:
                dev_of[i] = devices[c]
        if not _quotient_acyclic(graph, dev_of):
            continue
        ev = sc.evaluate(graph, {n.id: dev_of[i] for i, n in enumerate(graph.nodes)},
                         memory=memory, accelerators=accelerators, cpus=cpus)
        if ev.feasible and ev.objective < best:
            best = ev.objective
    return best
