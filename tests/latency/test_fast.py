"""The Rust evaluator (stagecut.latency.model._fast.Evaluator) equals the Python reference
(stagecut.latency.model.evaluate): the same start/finish arrays bit for bit, the same rank round-robin
orders, the same errors, on hundreds of random DAGs; and the known small values."""

import itertools
import math
import random

import numpy as np
import pytest

import stagecut as sc
from helpers import random_linear_extension
from stagecut.errors import InvalidArgumentError
from stagecut.latency import Device, Devices, LatencyProblem, asap, rank_round_robin
from stagecut.latency.model._fast import Evaluator


def random_problem(rng, n, nd, p_edge=0.3):
    """A random DAG on ``nd`` heterogeneous devices: per-device times, some nodes unable to run
    on some devices (never on all), device 0 sometimes a parallel pool, random bandwidths and
    output sizes (some zero)."""
    devs = [Device(f"dev{k}", f"kind{k}", parallel=(k == 0 and rng.random() < 0.4)) for k in range(nd)]
    bw = [[None if a == b else rng.choice([0.5, 1.0, 2.0, 3.0, math.inf]) * rng.uniform(0.5, 1.5)
           for b in range(nd)] for a in range(nd)]
    ids = [f"v{i}" for i in range(n)]
    nodes = []
    for v in ids:
        kinds = [k for k in range(nd) if rng.random() < 0.75] or [rng.randrange(nd)]
        nodes.append(sc.Node(v, {f"kind{k}": rng.choice([0.0, rng.uniform(0.1, 5.0), float(rng.randint(1, 6))])
                                 for k in kinds}))
    perm = ids[:]
    rng.shuffle(perm)
    edges = [(perm[a], perm[b]) for a in range(n) for b in range(a + 1, n) if rng.random() < p_edge]
    sizes = {v: rng.choice([0.0, rng.uniform(0.0, 4.0), 1e-3]) for v in ids}
    return LatencyProblem(sc.Graph(nodes, edges), Devices.from_matrix(devs, bw), output_bytes=sizes)


def random_placement(rng, p):
    return [rng.choice([d for d in range(p.num_devices) if math.isfinite(p.times[i, d])]) for i in range(len(p))]


def per_device(p, dev, seq):
    lists = [[] for _ in range(p.num_devices)]
    for i in seq:
        lists[dev[i]].append(int(i))
    return lists


def same_outcome(p, ev, dev, order=None, fast_order=None):
    """``asap(p, dev, order)`` and ``ev.times(dev, fast_order or order)``: the same arrays
    (bitwise), or the same InvalidArgumentError message. True when there were arrays."""
    fast_order = order if fast_order is None else fast_order
    try:
        want = asap(p, dev, order)
    except InvalidArgumentError as e:
        with pytest.raises(InvalidArgumentError) as got:
            ev.times(dev, fast_order)
        assert str(got.value) == str(e)
        return False
    got = ev.times(dev, fast_order)
    for w, g in zip(want, got):
        assert g.dtype == np.float64 and np.array_equal(w, g), (w, g)
    return True


# ---------------------------------------------------------------- equal to the reference
@pytest.mark.parametrize("seed", range(6))
def test_random_dags_equal_the_reference(seed):
    rng = random.Random(seed)
    consistent = rejected = 0
    for _ in range(60):  # 360 random DAGs in all
        n, nd = rng.randint(1, 25), rng.randint(1, 4)
        p = random_problem(rng, n, nd, p_edge=rng.choice([0.1, 0.3, 0.6]))
        ev = Evaluator(p)
        for _ in range(3):
            dev = random_placement(rng, p)
            # rank round-robin: the same lists, then the same times
            assert ev.rank_round_robin(dev) == rank_round_robin(p, dev)
            same_outcome(p, ev, dev)
            assert ev.makespan(dev) == asap(p, dev)[1].max()
            # a valid order from a random linear extension, as lists and as a sequence
            seq = random_linear_extension(rng, p)
            lists = per_device(p, dev, seq)
            assert same_outcome(p, ev, dev, lists)
            same_outcome(p, ev, dev, lists, np.array(seq))
            assert ev.makespan(np.array(dev), np.array(seq)) == asap(p, dev, lists)[1].max()
            # a random permutation: consistent or not, the same answer or the same error
            perm = list(range(n))
            rng.shuffle(perm)
            lists = per_device(p, dev, perm)
            ok = same_outcome(p, ev, dev, lists)
            same_outcome(p, ev, dev, lists, np.array(perm))
            consistent += ok
            rejected += not ok
    assert consistent > 20 and rejected > 20, (consistent, rejected)


def test_batches_equal_the_reference():
    rng = random.Random(11)
    p = random_problem(rng, 40, 3)
    ev = Evaluator(p)
    devs = np.array([random_placement(rng, p) for _ in range(50)])
    seqs = np.array([random_linear_extension(rng, p) for _ in range(50)])
    before = ev.evaluations
    got = ev.makespans(devs)
    assert ev.evaluations == before + 50
    assert got.tolist() == [asap(p, d)[1].max() for d in devs]
    got = ev.makespans(devs, seqs)
    assert got.tolist() == [asap(p, d, per_device(p, d, s))[1].max() for d, s in zip(devs, seqs)]
    assert ev.makespans(np.zeros((0, 40), dtype=np.int64)).shape == (0,)
    bad = devs.copy()
    bad[3, 5] = 7
    with pytest.raises(InvalidArgumentError, match=r"^row 3: placement: node 'v5' is on device 7, but there are 3"):
        ev.makespans(bad)
    with pytest.raises(InvalidArgumentError, match="placements"):
        ev.makespans(devs[:, :-1])
    with pytest.raises(InvalidArgumentError, match="orders"):
        ev.makespans(devs, seqs[:-1])


# ---------------------------------------------------------------- known values
def gpus(n):
    return Devices.servers(1, n, intra_bandwidth=1.0, inter_bandwidth=1.0)


def test_a_chain_on_one_device_is_the_sum():
    times = [1.5, 2.0, 4.25, 0.5, 3.0]
    g = sc.Graph([sc.Node(i, {"gpu": t}, comm=2.0) for i, t in enumerate(times)], [(i, i + 1) for i in range(4)])
    ev = Evaluator(LatencyProblem(g, gpus(3), output_bytes="comm"))
    for d in range(3):
        assert ev.makespan([d] * 5) == sum(times)
        assert ev.makespan([d] * 5, [list(range(5)) if k == d else [] for k in range(3)]) == sum(times)
    # one node elsewhere pays two transfers of 2
    assert ev.makespan([0, 0, 1, 0, 0]) == sum(times) + 4.0


@pytest.mark.parametrize("w,tau,want", [(3.0, 1.0, 7.0), (3.0, 5.0, 9.0), (2.0, 0.5, 5.5), (4.0, 4.0, 11.0)])
def test_fork_best_over_placements_is_ps_pt_min_2w_w_tau(w, tau, want):
    g = sc.Graph([sc.Node(v, {"gpu": t}, comm=tau) for v, t in [("s", 1.0), ("a", w), ("b", w), ("t", 2.0)]],
                 [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")])
    p = LatencyProblem(g, gpus(2), output_bytes="comm")
    ev = Evaluator(p)
    assert want == 1.0 + 2.0 + min(2 * w, w + tau)
    devs = np.array(list(itertools.product(range(2), repeat=4)))
    assert ev.makespans(devs).min() == want
    best = math.inf
    for dev in devs:
        for seq in itertools.permutations(range(4)):
            try:
                best = min(best, ev.makespan(dev, np.array(seq)))
            except InvalidArgumentError:
                pass
    assert best == want


# ---------------------------------------------------------------- refusals
def test_inconsistent_orders_are_refused_naming_the_node():
    g = sc.Graph([sc.Node(v, {"gpu": 1.0}) for v in "abc"], [("a", "b"), ("b", "c")])
    p = LatencyProblem(g, gpus(2))
    ev = Evaluator(p)
    msg = "order: it contradicts the graph's edges on device gpu:0 (node 'a' is put before one of its ancestors)"
    with pytest.raises(InvalidArgumentError) as e:
        ev.makespan([0, 1, 0], [[2, 0], [1]])
    assert str(e.value) == msg
    with pytest.raises(InvalidArgumentError, match="contradicts the graph's edges"):
        ev.makespan([0, 0, 0], np.array([0, 2, 1]))
    for order, match in [([[0, 2, 2], [1]], "gpu:0 lists 2, which is not one of its nodes"),
                         ([[0, 1, 2], []], "gpu:0 lists 1"), ([[0, -1], [1]], "lists -1"),
                         ([[0, 2.0], [1]], "lists 2.0"), ([[0], [1]], "node 'c' is missing"),
                         ([[0, 2]], r"expected one list per device \(2\), got 1")]:
        with pytest.raises(InvalidArgumentError, match=match):
            ev.makespan([0, 1, 0], order)
        with pytest.raises(InvalidArgumentError, match=match):
            asap(p, [0, 1, 0], order)
    for seq in ([0, 1], [0, 1, 1], [0, 1, 3], [0.0, 1.0, 2.0]):
        with pytest.raises(InvalidArgumentError, match="order"):
            ev.makespan([0, 0, 0], np.array(seq))
    assert ev.evaluations == 0


def test_bad_placements_get_the_reference_messages():
    g = sc.Graph([sc.Node("a", {"gpu": 1.0}), sc.Node("b", {"cpu": 1.0, "gpu": 2.0})], [("a", "b")])
    p = LatencyProblem(g, Devices.pcie_star(1, accelerator_kind="gpu"))
    ev = Evaluator(p)
    for dev in ([1, 2], [1, -1], [0, 1], [1], [1.0, 1.0], [True, True], "ab"):
        with pytest.raises(InvalidArgumentError) as want:
            asap(p, dev)
        with pytest.raises(InvalidArgumentError) as got:
            ev.makespan(dev)
        assert str(got.value) == str(want.value)
        with pytest.raises(InvalidArgumentError) as got:
            ev.rank_round_robin(dev)
        assert str(got.value) == str(want.value)
    assert ev.makespan([1, 0]) == 2.0 == asap(p, [1, 0])[1].max() and ev.evaluations == 1
    with pytest.raises(InvalidArgumentError, match="LatencyProblem"):
        Evaluator(g)


def test_a_parallel_pool_runs_its_nodes_at_once():
    g = sc.Graph([sc.Node(v, {"cpu": t}) for v, t in [("a", 2.0), ("b", 3.0), ("c", 1.0)]], [("a", "c")])
    ev = Evaluator(LatencyProblem(g, Devices.pcie_star(0)))
    start, finish = ev.times([0, 0, 0], [[2, 1, 0]])  # the order of a parallel device is ignored
    assert start.tolist() == [0.0, 0.0, 2.0] and finish.tolist() == [2.0, 3.0, 3.0]
