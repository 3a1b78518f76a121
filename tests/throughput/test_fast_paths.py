"""The numpy fast paths (plain unit DAGs, the array evaluator, the DP's cached arrays) give exactly
what the general paths and a per-node reference give, on seeded random graphs with and without
colocation classes, backward nodes and free leaves."""

import math
import random

import numpy as np
import pytest

import stagecut as sc
from stagecut.colocation import Units
from stagecut.graph import Node
from stagecut.throughput import dp as dp_module
from stagecut.throughput.evaluate import is_contiguous, is_convex

KINDS = ("accelerator", "cpu")


def random_graph(rng, *, coloc, backward, free):
    """A random DAG whose node positions are not a topological order; optional colocation
    classes, backward nodes (edges forward -> backward only) and zero-cost nodes."""
    n = rng.randint(1, 11)
    nodes = []
    for i in range(n):
        zero = free and rng.random() < 0.3
        compute = {k: (0.0 if zero else rng.choice([0.5, 1.0, 2.0, 3.5])) for k in KINDS if rng.random() < 0.85}
        compute = compute or {"accelerator": 0.0 if zero else 1.0}
        kinds = None if rng.random() < 0.8 else frozenset(rng.sample(list(compute), 1))
        nodes.append(Node(id=f"v{i}", compute=compute, memory=rng.choice([0.0, 0.0, 1.0, 3.0]),
                          comm=rng.choice([0.0, 0.25, 1.0]), kinds=kinds,
                          colocation=rng.randrange(3) if coloc and rng.random() < 0.4 else None,
                          backward=backward and i >= n // 2))
    perm = list(range(n))
    rng.shuffle(perm)  # the topological order is perm, not the positions
    edges = []
    for a in range(n):
        for b in range(a + 1, n):
            u, v = perm[a], perm[b]
            if rng.random() < 0.35 and not (nodes[u].backward and not nodes[v].backward):
                edges.append((f"v{u}", f"v{v}"))
    return sc.Graph(nodes, edges)


def reference_evaluation(graph, split, memory):
    """The max-load cost model, node by node (tensor-once comm on accelerators)."""
    dev = [split[n.id] for n in graph.nodes]
    used = sorted(set(dev), key=lambda d: (d[0] != "accelerator", d[0], d[1]))
    out = []
    for d in used:
        on = [i for i, x in enumerate(dev) if x == d]
        nodes = [graph.nodes[i] for i in on]
        times = [n.time(d[0]) for n in nodes if n.supports(d[0])]
        comm = []
        if d[0] == "accelerator":
            for u in range(len(graph)):
                targets = {dev[v] for v in graph.succ[u]} - {dev[u]}
                if targets and (dev[u] == d or d in targets):
                    comm.append(graph.nodes[u].comm)
        issues = [f"node {n.id!r} cannot run on a {d[0]}" for n in nodes if not n.supports(d[0])][:1]
        mem = math.fsum(n.memory for n in nodes)
        if d[0] == "accelerator" and mem > memory:
            issues.append(f"memory {mem:g} exceeds the limit {memory:g}")
        out.append((f"{d[0]}:{d[1]}", tuple(n.id for n in nodes), math.fsum(times + comm), math.fsum(times),
                    math.fsum(comm), mem, tuple(issues)))
    return out


def reference_acyclic(graph, dev):
    has_fwd = {n.colocation for n in graph.nodes if not n.backward and n.colocation is not None}
    succ = {d: set() for d in dev}
    for u, n in enumerate(graph.nodes):
        for v in graph.succ[u]:
            m = graph.nodes[v]
            if not n.backward and not m.backward:
                a, b = dev[u], dev[v]
            elif n.backward and m.backward and not ({n.colocation, m.colocation} <= has_fwd):
                a, b = dev[v], dev[u]
            else:
                continue
            if a != b:
                succ[a].add(b)
    indeg = {d: 0 for d in succ}
    for d in succ:
        for e in succ[d]:
            indeg[e] += 1
    ready, seen = [d for d in succ if indeg[d] == 0], 0
    while ready:
        d = ready.pop()
        seen += 1
        for e in succ[d]:
            indeg[e] -= 1
            if indeg[e] == 0:
                ready.append(e)
    return seen == len(succ)


def same_units(a, b):
    assert a.n_units == b.n_units
    assert a.members == b.members
    assert a.unit_of_node.tolist() == b.unit_of_node.tolist()
    assert a.edges == b.edges
    assert a.edge_array.tolist() == [list(e) for e in b.edges]


CASES = [(coloc, backward, free) for coloc in (False, True) for backward in (False, True) for free in (False, True)]


@pytest.mark.parametrize(("coloc", "backward", "free"), CASES)
def test_units_fast_path_equals_general_path(coloc, backward, free):
    rng = random.Random(hash((coloc, backward, free)) % 1000)
    for _ in range(60):
        g = random_graph(rng, coloc=coloc, backward=backward, free=free)
        for memory in (math.inf, 2.0, 100.0):
            same_units(Units(g, memory), Units(g, memory, fast=False))


@pytest.mark.parametrize(("coloc", "backward", "free"), CASES)
def test_evaluate_equals_node_by_node_reference(coloc, backward, free):
    rng = random.Random(7 + hash((coloc, backward, free)) % 1000)
    for _ in range(60):
        g = random_graph(rng, coloc=coloc, backward=backward, free=free)
        memory = rng.choice([math.inf, 2.0])
        for _ in range(4):
            devs = [("accelerator", rng.randrange(3)), ("cpu", rng.randrange(2))]
            split = {n.id: devs[0] if rng.random() < 0.7 else devs[1] for n in g.nodes}
            split = {k: (d[0], rng.randrange(3)) if rng.random() < 0.3 else d for k, d in split.items()}
            ev = sc.evaluate(g, split, memory=memory)
            got = [(s.device, s.nodes, s.load, s.parts["compute"], s.parts["comm"], s.memory, s.issues)
                   for s in ev.stages]
            assert got == reference_evaluation(g, split, memory)
            dev = [split[n.id] for n in g.nodes]
            assert ev.acyclic_quotient == reference_acyclic(g, dev) == is_contiguous(g, dev)
            assert ev.convex == is_convex(g, dev)
            assert ev.objective == max(x[2] for x in got)


@pytest.mark.parametrize(("coloc", "backward", "free"), CASES)
def test_dp_with_fast_units_equals_dp_with_general_units(monkeypatch, coloc, backward, free):
    rng = random.Random(11 + hash((coloc, backward, free)) % 1000)
    graphs = [random_graph(rng, coloc=coloc, backward=backward, free=free) for _ in range(25)]
    settings = [dict(devices=rng.randint(1, 3), cpus=rng.randint(0, 1), memory=rng.choice([math.inf, 4.0]))
                for _ in graphs]
    fast = [sc.partition(g, method="dp", **s) for g, s in zip(graphs, settings)]
    monkeypatch.setattr(dp_module, "Units", lambda graph, memory=math.inf: Units(graph, memory, fast=False))
    for g, s, plan in zip(graphs, settings, fast):
        slow = sc.partition(g, method="dp", **s)
        assert (plan.objective, plan.status, plan.notes, plan.stats, plan.contiguous) == \
            (slow.objective, slow.status, slow.notes, slow.stats, slow.contiguous)
        assert [(x.device, x.nodes, x.load) for x in plan.stages] == [(x.device, x.nodes, x.load) for x in slow.stages]


def test_chain_units_are_the_nodes():
    g = sc.Graph.chain([1.0, 2.0, 3.0])
    u = Units(g)
    assert u.members == [[0], [1], [2]] and u.edges == [(0, 1), (1, 2)]
    assert np.array_equal(u.edge_array, [[0, 1], [1, 2]])
