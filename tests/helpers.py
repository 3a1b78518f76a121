"""Shared test helpers: where ../shared/workloads is, random graphs, and the brute force for the
max-load objective (every assignment of nodes to devices whose quotient graph is acyclic, a chain
of ideals, scored by the evaluator)."""

import contextlib
import itertools
import json
import math
import os
import pathlib

import pytest

import stagecut as sc
from stagecut.errors import InvalidGraphError
from stagecut.graph import Node
from stagecut.mtpp.model import evaluate as mtpp_evaluate

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "workloads"
BENCHES = ROOT / "benches"


def hide_module(monkeypatch, name):
    """Make ``import name`` (and its submodules) raise ``ImportError`` for the rest of the test,
    as on a machine without that optional package."""
    import builtins
    import sys

    real = builtins.__import__

    def hidden(wanted, *args, **kwargs):
        if wanted == name or wanted.startswith(name + "."):
            raise ImportError(wanted)
        return real(wanted, *args, **kwargs)

    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        monkeypatch.delitem(sys.modules, loaded)
    monkeypatch.setattr(builtins, "__import__", hidden)


def bench_module(name):
    """Import ``benches/NAME.py`` (the benchmark scripts are not a package)."""
    import importlib
    import sys

    sys.path.insert(0, str(BENCHES))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHES))


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
                         memory=memory, devices=accelerators, cpus=cpus)
        if ev.feasible and ev.objective < best:
            best = ev.objective
    return best




def brute_force_any(graph, accelerators, cpus, memory=math.inf):
    """The throughput optimum over every split, contiguous or not (colocation classes whole):
    every assignment of the classes to devices that the evaluator finds feasible."""
    devices = [("accelerator", i) for i in range(accelerators)] + [("cpu", i) for i in range(cpus)]
    groups = colocation_groups(graph)
    best = math.inf
    for choice in itertools.product(range(len(devices)), repeat=len(groups)):
        split = {graph.nodes[i].id: devices[c] for grp, c in zip(groups, choice) for i in grp}
        ev = sc.evaluate(graph, split, memory=memory, devices=accelerators, cpus=cpus)
        if ev.feasible:
            best = min(best, ev.objective)
    return best


def rescored_ip(graph, plan, accelerators, cpus, memory):
    """The throughput evaluator's verdict on an IP plan, asserted feasible, equal to the plan's
    objective and not below its lower bound."""
    ev = sc.evaluate(graph, plan.device_of(), memory=memory, devices=accelerators, cpus=cpus)
    assert ev.feasible
    assert ev.objective == pytest.approx(plan.objective)
    assert plan.lower_bound <= plan.objective + 1e-6
    return ev

def set_partitions(items, k):
    """Every partition of ``items`` into at most ``k`` non-empty blocks (lists of lists)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in set_partitions(rest, k):
        for i in range(len(part)):
            yield part[:i] + [[first] + part[i]] + part[i + 1:]
        if len(part) < k:
            yield [[first]] + part


def brute_force_mtpp(problem):
    """The MTPP optimum of ``problem`` (an MtppProblem): the best evaluator score over every
    partition of the node ids into at most ``problem.devices`` blocks that it accepts (a cyclic
    quotient raises InvalidGraphError and is passed over)."""
    best = math.inf
    for part in set_partitions(list(problem.graph.ids), problem.devices):
        try:
            best = min(best, mtpp_evaluate(problem, part).objective)
        except InvalidGraphError:
            continue
    return best

def random_training_graph(rng, n_fwd):
    """A forward DAG plus backward nodes mirrored in reverse, colocated with their forward node."""
    nodes, edges = [], []
    for i in range(n_fwd):
        nodes.append(Node(id=i, compute={"accelerator": rng.randint(0, 6), "cpu": rng.randint(0, 20)},
                          memory=rng.randint(0, 4), comm=rng.randint(0, 3), colocation=i,
                          kinds=None if rng.random() < 0.85 else frozenset({"cpu"})))
    fwd_edges = [(i, j) for i in range(n_fwd) for j in range(i + 1, n_fwd) if rng.random() < 0.4]
    with_bwd = [i for i in range(n_fwd) if rng.random() < 0.8]
    for i in with_bwd:
        nodes.append(Node(id=100 + i, compute={"accelerator": rng.randint(0, 6), "cpu": rng.randint(0, 20)},
                          memory=rng.randint(0, 2), comm=rng.randint(0, 3), colocation=i, backward=True))
        edges.append((i, 100 + i))
    edges += fwd_edges
    edges += [(100 + j, 100 + i) for i, j in fwd_edges if i in with_bwd and j in with_bwd]
    return sc.Graph(nodes, edges)


def random_inference_graph(rng, n):
    nodes = [Node(id=i, compute={"accelerator": rng.randint(0, 8), "cpu": rng.randint(0, 25)},
                  memory=rng.randint(0, 4), comm=rng.randint(0, 4),
                  kinds=None if rng.random() < 0.85 else frozenset({"cpu"}))
             for i in range(n)]
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.35]
    return sc.Graph(nodes, edges)



def random_linear_extension(rng, problem):
    """A random topological order of the node positions of ``problem`` (anything with ``pred`` and
    ``succ`` lists and a length, e.g. a LatencyProblem): Kahn's algorithm taking a uniformly
    random ready node at each step, drawn with ``rng.randrange``."""
    indeg = [len(x) for x in problem.pred]
    ready = [i for i in range(len(problem)) if indeg[i] == 0]
    out = []
    while ready:
        i = ready.pop(rng.randrange(len(ready)))
        out.append(i)
        for j in problem.succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    return out

def published_rows():
    path = SHARED / "published-table1.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    cols = data["columns"]
    return {name: dict(zip(cols, row)) for name, row in data["rows"].items()}


def require_shared(path=SHARED / "published-table1.json"):
    """Skip when ../shared/workloads (or ``path`` in it) is absent; in CI (``CI=true``) fail."""
    if not path.exists():
        msg = f"{path} is absent (the third-party workloads in ../shared/workloads)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + "; CI must have ../shared beside the project")
        pytest.skip(msg)
    return path


def record_runs(monkeypatch, what=lambda opts: opts.method):
    """The runs ``slice_graph`` makes (its searches, or the DP, through
    ``stagecut.mtpp.slicegraph._run``), each recorded as ``what(opts)`` in the list returned."""
    from stagecut.mtpp import slicegraph

    seen = []
    real = slicegraph._run

    def spy(problem, units, opts, *args):
        seen.append(what(opts))
        return real(problem, units, opts, *args)

    monkeypatch.setattr(slicegraph, "_run", spy)
    return seen


@contextlib.contextmanager
def ctrl_c_after(seconds):
    """Ctrl-C (``_thread.interrupt_main``, as SIGINT would) ``seconds`` into the block; the timer
    is cancelled when the block ends first."""
    import _thread
    import threading

    timer = threading.Timer(seconds, _thread.interrupt_main)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
