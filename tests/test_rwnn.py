"""Randomly wired networks (issue 13, item 4): stacked Xie et al. modules joined by channels.

The layout the tests read (documented in stagecut.rwnn): module ``t`` holds the ids
``t * w .. (t + 1) * w - 1``, ``w = size + 2 * channels``: its entries, its body, its exits.
Timings are in benches/bench_generators.py, never asserted here.
"""

import math

import networkx as nx
import numpy as np
import pytest

from stagecut.cli._common import GRAPH_HELP, load_graph
from stagecut.cli.main import DESCRIPTION, main
from stagecut.errors import InvalidArgumentError
from stagecut.examples import rwnn as rwnn_from_examples
from stagecut.rwnn import (
    BASE_MS,
    KINDS,
    NOISE,
    OUTPUT_BYTES,
    PCIE_BANDWIDTH,
    RWNN_DEPS,
    RWNN_MODELS,
    TIME_RATIO,
    WEIGHT_BYTES,
    rwnn,
    rwnn_devices,
)


class Layout:
    """Which module, and which part of it (entry, body, exit), each node id is."""

    def __init__(self, g, size, channels):
        self.g, self.n, self.c, self.w = g, size, channels, size + 2 * channels
        self.modules = len(g) // self.w

    def module(self, v):
        return v // self.w

    def entries(self, t):
        return [t * self.w + k for k in range(self.c)]

    def body(self, t):
        return [t * self.w + self.c + i for i in range(self.n)]

    def exits(self, t):
        return [t * self.w + self.c + self.n + k for k in range(self.c)]

    def is_body(self, v):
        return self.c <= v % self.w < self.c + self.n

    def body_edges(self, t):
        if not hasattr(self, "_body_edges"):
            self._body_edges = [[] for _ in range(self.modules)]
            for u, v in self.g.edges:
                if self.is_body(u) and self.is_body(v) and self.module(u) == self.module(v):
                    self._body_edges[self.module(u)].append((u, v))
        return self._body_edges[t]

    def digraph(self):
        d = nx.DiGraph()
        d.add_nodes_from(n.id for n in self.g.nodes)
        d.add_edges_from(self.g.edges)
        return d


#: rwnn(2, 2, model="ws", size=10, dep="wdep", seed=5): (edges, edge code), sum of A100 ms, sum of bytes
FINGERPRINT, FINGERPRINT_MS, FINGERPRINT_BYTES = (53, 2302041), 28.07186, 220386319.0

CASES = [(model, dep, c, size) for model in RWNN_MODELS for dep in RWNN_DEPS for c in (1, 2, 4) for size in (10, 32)]


@pytest.mark.parametrize("model, dep, c, size", CASES)
def test_a_dag_of_stacked_xie_modules(model, dep, c, size):
    m = 4
    g = rwnn(m, c, model=model, size=size, dep=dep, seed=7)
    lay = Layout(g, size, c)
    assert len(g) == m * (size + 2 * c)
    assert [n.id for n in g.nodes] == list(range(len(g)))
    assert all(u < v for u, v in g.edges)  # Xie et al.: from the lower index to the higher
    assert nx.is_directed_acyclic_graph(lay.digraph())
    assert len(set(g.edges)) == len(g.edges)
    for t in range(m):
        assert g.nodes[lay.entries(t)[0]].name == f"m{t}.in0"
        assert g.nodes[lay.body(t)[3]].name == f"m{t}.3"
        assert g.nodes[lay.exits(t)[-1]].name == f"m{t}.out{c - 1}"
    for u, v in g.edges:
        tu, tv = lay.module(u), lay.module(v)
        if tu != tv:  # a channel: exit k of module t -> entry k of module t + 1
            assert tv == tu + 1 and u in lay.exits(tu) and v in lay.entries(tv)
            assert lay.exits(tu).index(u) == lay.entries(tv).index(v)
        else:  # entries only feed the body, exits are only fed by it
            assert not (u in lay.entries(tu) and v in lay.exits(tu))
            assert lay.is_body(u) or u in lay.entries(tu)
            assert lay.is_body(v) or v in lay.exits(tu)
    for t in range(m - 1):
        between = [(u, v) for u, v in g.edges if lay.module(u) == t and lay.module(v) == t + 1]
        assert len(between) == c  # the cut between consecutive modules: exactly the channels
    # every body source is fed by an entry and every sink feeds an exit (the Xie et al. input/output)
    pred = {v: set() for v in range(len(g))}
    succ = {v: set() for v in range(len(g))}
    for u, v in g.edges:
        pred[v].add(u)
        succ[u].add(v)
    for t in range(m):
        body = set(lay.body(t))
        for v in body:
            assert pred[v] - body <= set(lay.entries(t)) and succ[v] - body <= set(lay.exits(t))
            if not pred[v] & body:  # a source
                assert pred[v]
            elif dep == "sdep" or c == 1:  # wdep: an entry without a source feeds a random node
                assert not pred[v] - body
            if not succ[v] & body:  # a sink
                assert succ[v]
            elif dep == "sdep" or c == 1:
                assert not succ[v] - body
        assert all(succ[e] for e in lay.entries(t)) and all(pred[x] for x in lay.exits(t))


def test_the_same_seed_gives_the_same_graph_and_others_differ():
    for model in RWNN_MODELS:
        g = rwnn(5, 2, model=model, size=10, dep="wdep", seed=11)
        assert g == rwnn(5, 2, model=model, size=10, dep="wdep", seed=11)
        others = [rwnn(5, 2, model=model, size=10, dep="wdep", seed=s) for s in (12, 13)]
        assert all(set(o.edges) != set(g.edges) for o in others)
        assert all(o.nodes[0].compute != g.nodes[0].compute for o in others)
    assert rwnn_from_examples is rwnn


def test_a_seed_is_the_same_graph_on_every_platform():
    # a fingerprint of one seed: numpy's PCG64 and Python's Mersenne Twister draw the same numbers
    # everywhere, so a change here is a change of the generator (say so in the changelog)
    g = rwnn(2, 2, model="ws", size=10, dep="wdep", seed=5)
    code = sum((i + 1) * (u * 97 + v) for i, (u, v) in enumerate(g.edges))
    assert (len(g.edges), code) == FINGERPRINT
    assert round(sum(n.compute["a100"] for n in g.nodes), 6) == FINGERPRINT_MS
    assert sum(n.comm for n in g.nodes) == FINGERPRINT_BYTES


@pytest.mark.parametrize("size", [10, 32])
def test_model_edge_counts(size):
    m = 300
    pairs = size * (size - 1) // 2
    lay = Layout(rwnn(m, model="er", size=size, seed=3), size, 1)
    er = [len(lay.body_edges(t)) for t in range(m)]
    mean, sd = 0.2 * pairs, math.sqrt(pairs * 0.2 * 0.8)
    assert abs(np.mean(er) - mean) < 5 * sd / math.sqrt(m)  # Erdos-Renyi, p = 0.2
    assert np.std(er) == pytest.approx(sd, rel=0.25)
    assert len(set(er)) > 3
    g = rwnn(20, model="ws", size=size, seed=3)
    lay = Layout(g, size, 1)
    assert all(len(lay.body_edges(t)) == 2 * size for t in range(20))  # Watts-Strogatz: k = 4, rewiring keeps n k / 2
    rewired = [sum(1 for u, v in lay.body_edges(t) if (v - u) % size not in (1, 2, size - 1, size - 2))
               for t in range(20)]
    assert np.mean(rewired) > 0.4 * 2 * size  # p = 0.75: most edges leave the ring lattice
    g = rwnn(20, model="ba", size=size, seed=3)
    lay = Layout(g, size, 1)
    assert all(len(lay.body_edges(t)) == 5 + 5 * (size - 6) for t in range(20))  # Barabasi-Albert, m = 5
    degrees = [d for t in range(20) for d in np.bincount(np.array(lay.body_edges(t)).ravel())[lay.body(t)[0]:]]
    assert max(degrees) > 3 * min(degrees)  # preferential attachment: hubs


@pytest.mark.parametrize("model", RWNN_MODELS)
def test_single_channel_modules_are_joined_at_articulation_points(model):
    m, size = 5, 10
    g = rwnn(m, 1, model=model, size=size, dep="wdep", seed=2)
    lay = Layout(g, size, 1)
    und = lay.digraph().to_undirected()
    cut = set(nx.articulation_points(und))
    bridges = {tuple(sorted(e)) for e in nx.bridges(und)}
    for t in range(m - 1):
        out, nxt = lay.exits(t)[0], lay.entries(t + 1)[0]
        assert out in cut and nxt in cut and (out, nxt) in bridges
        rest = und.copy()
        rest.remove_node(out)
        assert not nx.has_path(rest, lay.body(t)[0], lay.body(t + 1)[0])  # MILP-SPLIT's narrow point
    assert sorted(v for v in range(len(g)) if not list(und.neighbors(v))) == []
    sources = [v for v in range(len(g)) if not any(b == v for _, b in g.edges)]
    sinks = [v for v in range(len(g)) if not any(a == v for a, _ in g.edges)]
    assert sources == [0] and sinks == [len(g) - 1]


def reaches_every_exit(g, lay, t):
    d = lay.digraph()
    return all(set(lay.exits(t)) <= nx.descendants(d, e) for e in lay.entries(t))


@pytest.mark.parametrize("model", RWNN_MODELS)
@pytest.mark.parametrize("c", [1, 2, 3, 4])
def test_strong_dependence_every_entry_reaches_every_exit(model, c):
    for seed in range(3):
        g = rwnn(4, c, model=model, size=10, dep="sdep", seed=seed)
        lay = Layout(g, 10, c)
        assert all(reaches_every_exit(g, lay, t) for t in range(4))
        assert all(set(lay.exits(3)) <= nx.descendants(lay.digraph(), e) for e in lay.entries(0))


def test_weak_dependence_attaches_channels_at_random():
    broken = 0
    for model in RWNN_MODELS:
        for seed in range(3):
            s = rwnn(6, 3, model=model, size=32, dep="sdep", seed=seed)
            w = rwnn(6, 3, model=model, size=32, dep="wdep", seed=seed)
            assert set(w.edges) != set(s.edges)
            ls, lw = Layout(s, 32, 3), Layout(w, 32, 3)
            assert all(ls.body_edges(t) == lw.body_edges(t) for t in range(6))  # the same bodies
            assert [n.compute for n in s.nodes] == [n.compute for n in w.nodes]  # and the same costs
            assert len(w.edges) < len(s.edges)
            broken += sum(not reaches_every_exit(w, lw, t) for t in range(6))
            d = lw.digraph()
            for t in range(6):  # still every node on a path from an entry to an exit
                starts = set().union(*(nx.descendants(d, e) for e in lw.entries(t)))
                assert set(lw.body(t)) | set(lw.exits(t)) <= starts
    assert broken >= 10  # some exit misses some entry: the dependence is weak
    assert rwnn(4, 1, model="er", dep="wdep", seed=1) == rwnn(4, 1, model="er", dep="sdep", seed=1)


def test_times_keep_the_device_ratio_and_sizes_are_bytes():
    g = rwnn(40, 2, model="er", size=32, seed=9)
    t = np.array([[n.compute[k] for k in KINDS] for n in g.nodes])
    assert list(KINDS) == ["cpu", "t4", "a100"] and all(set(n.compute) == set(KINDS) for n in g.nodes)
    mean = t.mean(axis=0)
    assert mean[0] / mean[2] == pytest.approx(7.10, rel=0.02)
    assert mean[1] / mean[2] == pytest.approx(1.26, rel=0.02)
    assert mean[2] == pytest.approx(sum(BASE_MS) / 2, rel=0.05)  # ms
    ratio = t / t[:, 2:]
    lo, hi = (1 - NOISE) / (1 + NOISE), (1 + NOISE) / (1 - NOISE)
    for j, k in enumerate(KINDS):
        assert np.all(ratio[:, j] >= TIME_RATIO[k] * lo - 1e-12) and np.all(ratio[:, j] <= TIME_RATIO[k] * hi + 1e-12)
    assert np.std(ratio[:, 0]) > 0.05  # per-node noise
    comm = np.array([n.comm for n in g.nodes])
    mem = np.array([n.memory for n in g.nodes])
    assert np.all((comm >= OUTPUT_BYTES[0]) & (comm <= OUTPUT_BYTES[1])) and np.all(comm == np.round(comm))
    assert np.all((mem >= WEIGHT_BYTES[0]) & (mem <= WEIGHT_BYTES[1]))


def test_devices_and_the_latency_problem_read_bytes():
    from stagecut.latency import LatencyProblem

    d = rwnn_devices()
    assert d.names == ("cpu", "t4", "a100") and [x.kind for x in d.devices] == ["cpu", "t4", "a100"]
    assert d.unit == "bytes" and not any(x.parallel for x in d.devices)
    assert [x.memory for x in d.devices] == [math.inf, 16e9, 40e9]
    assert all(d.bandwidth[a][b] == PCIE_BANDWIDTH for a in range(3) for b in range(3) if a != b)
    g = rwnn(2, 2, model="ba", seed=1)
    p = LatencyProblem(g, d, output_bytes="comm")
    assert p.times.tolist() == [[n.compute[k] for k in KINDS] for n in g.nodes]
    assert p.transfer(5, 0, 2) == pytest.approx(g.nodes[5].comm / 16e6)  # ms: 4-12 MB at 16 GB/s
    small = rwnn_devices(bandwidth=1e6, t4_memory=1e9)
    assert small.transfer_time(2e6, 1, 2) == 2.0 and small.devices[1].memory == 1e9


@pytest.mark.parametrize("kwargs, name", [
    ({"modules": 0}, "modules"), ({"modules": 2.0}, "modules"), ({"channels": 0}, "channels"),
    ({"channels": 11}, "channels"), ({"size": 5}, "size"), ({"size": True}, "size"),
    ({"model": "erdos_renyi"}, "model"), ({"dep": "strong"}, "dep"), ({"seed": -1}, "seed"), ({"seed": "1"}, "seed"),
])
def test_bad_arguments_name_the_argument(kwargs, name):
    args = {"modules": 2, **kwargs}
    with pytest.raises(InvalidArgumentError, match=f"^{name}"):
        rwnn(args.pop("modules"), **args)


@pytest.mark.parametrize("kwargs, name", [({"bandwidth": 0}, "bandwidth"), ({"t4_memory": -1}, "t4_memory"),
                                          ({"cpu_memory": float("nan")}, "cpu_memory")])
def test_bad_devices_name_the_argument(kwargs, name):
    with pytest.raises(InvalidArgumentError, match=f"^{name}"):
        rwnn_devices(**kwargs)


def test_the_cli_spec_builds_the_same_graph():
    assert load_graph("rwnn:modules=3:channels=2") == rwnn(3, 2)
    spec = "rwnn:seed=4:model=ba:size=32:dep=wdep:channels=3:modules=2"  # keys in any order
    assert load_graph(spec) == rwnn(2, 3, model="ba", size=32, dep="wdep", seed=4)
    assert "rwnn:modules=M:channels=C" in GRAPH_HELP and "rwnn:modules=M:channels=C" in DESCRIPTION


@pytest.mark.parametrize("spec, words", [
    ("rwnn:modules=3", ["channels= is missing"]),
    ("rwnn:channels=1", ["modules= is missing"]),
    ("rwnn:modules=x:channels=1", ["modules=x", "integer"]),
    ("rwnn:modules=3:channels=-1", ["channels=-1"]),
    ("rwnn:modules=0:channels=1", ["modules must be an integer >= 1"]),
    ("rwnn:modules=3:channels=1:model=gnp", ["model: 'gnp'"]),
    ("rwnn:modules=3:channels=1:dep=both", ["dep: 'both'"]),
    ("rwnn:modules=3:channels=1:size=4", ["size must be"]),
    ("rwnn:modules=3:channels=1:colour=red", ["unknown key 'colour'"]),
    ("rwnn:modules=3:channels=1:seed", ["'seed' is not KEY=VALUE"]),
    ("rwnn:modules=3:channels=1:channels=2", ["channels is given twice"]),
    ("rwnn:", ["'' is not KEY=VALUE"]),
])
def test_bad_specs_are_one_line_and_exit_2(capsys, spec, words):
    code = main(["slice", spec, "-k", "2"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("stagecut: error: "), err
    assert all(w in err for w in words), err
