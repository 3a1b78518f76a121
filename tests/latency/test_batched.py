"""The batched throughput MILP (issue 13 item 1): L = 1 is the latency MILP, small instances
equal a brute force over batch splits and device orders, the evaluator, the options' errors."""

import itertools
import math
import random

import numpy as np
import pytest

import stagecut as sc
from stagecut.errors import InvalidArgumentError
from stagecut.latency import Devices, LatencyProblem
from stagecut.latency.diviml.batched import BatchedSchedule, batch_spec, evaluate_batched, solve_batched
from stagecut.latency.diviml.split_multi import single_batch
from stagecut.latency.exact.milp import solve_milp
from stagecut.rwnn import rwnn_devices

TOL = 1e-6


def random_problem(rng, n, *, devices=None):
    """A random DAG of ``n`` nodes with RWNN-like costs (ms, bytes) on the RWNN devices, or on a
    PCIe star (a parallel CPU pool and accelerators) with relative bandwidths."""
    star = devices is None and rng.random() < 0.3
    nodes, edges = [], []
    for i in range(n):
        base = rng.uniform(0.5, 1.5)
        if star:
            comp = {"cpu": base * 4.0, "accelerator": base}
            comm = rng.uniform(0.1, 1.5)
        else:
            comp = {k: base * r * rng.uniform(0.9, 1.1) for k, r in (("cpu", 7.1), ("t4", 1.26), ("a100", 1.0))}
            comm = float(rng.randint(4, 12)) * 1e6
        nodes.append(sc.Node(i, comp, memory=1e6, comm=comm))
        for u in range(i):
            if rng.random() < 0.4:
                edges.append((u, i))
    g = sc.Graph(nodes, edges)
    if star:
        return LatencyProblem(g, Devices.pcie_star(2))
    return LatencyProblem(g, devices or rwnn_devices(), output_bytes="comm")


def batch_time(problem, spec, v, d, b):
    """t(v, d, b) = t(v, d) * b ** alpha_d, written out here (not BatchSpec.time)."""
    return float(problem.times[v, d]) * b ** spec.alpha[d] if b else 0.0


def timetable(problem, spec, counts, orders):
    """An oracle of the batched model written from its definition, independent of
    evaluate_batched: the least start of each batch is the largest of its device's previous batch's
    finish (devices without parallelism only) and, for every batch of every predecessor, its finish
    plus, across devices, that batch's whole output crossing; relaxed to a fixpoint (a longest path
    over the constraint graph). None when the orders contradict the DAG (no fixpoint)."""
    n, nd = len(problem), problem.num_devices
    start = {(v, d): 0.0 for v in range(n) for d in range(nd) if counts[v][d]}
    for _ in range(len(start) + 1):
        changed = False
        for (v, d) in start:
            t = 0.0
            seq = orders[d]
            k = seq.index(v)
            if k and not problem.parallel[d]:
                w = seq[k - 1]
                t = max(t, start[w, d] + batch_time(problem, spec, w, d, counts[w][d]))
            for u in problem.pred[v]:
                for a in range(nd):
                    if counts[u][a]:
                        cross = problem.size[u] / problem.bandwidth[a][d] * counts[u][a] if a != d else 0.0
                        t = max(t, start[u, a] + batch_time(problem, spec, u, a, counts[u][a]) + cross)
            if t > start[v, d] + 1e-12:
                start[v, d], changed = t, True
        if not changed:
            return max((start[v, d] + batch_time(problem, spec, v, d, counts[v][d]) for (v, d) in start),
                       default=0.0)
    return None


def brute_batched(problem, spec):
    """Every batch split of every node (one supported size or none per device) and every order of
    each device's batches, timed by :func:`timetable` (not by the evaluator under test); the least
    makespan."""
    n, nd, L = len(problem), problem.num_devices, spec.inputs
    splits = []
    for v in range(n):
        opts = [[0] + [b for b in spec.sizes[d] if math.isfinite(problem.times[v, d])] for d in range(nd)]
        splits.append([c for c in itertools.product(*opts) if sum(c) == L])
    best = math.inf
    for choice in itertools.product(*splits):
        used = [sum(problem.memory[v] + spec.activation[v] * choice[v][d] for v in range(n) if choice[v][d])
                for d in range(nd)]
        if any(u > c for u, c in zip(used, problem.capacity)):
            continue
        per = [[v for v in range(n) if choice[v][d]] for d in range(nd)]
        for orders in itertools.product(*[itertools.permutations(p) if not problem.parallel[d] else [tuple(p)]
                                          for d, p in enumerate(per)]):
            mk = timetable(problem, spec, choice, [list(o) for o in orders])
            if mk is not None:  # (None: orders that contradict the DAG)
                best = min(best, mk)
    return best


# ------------------------------------------------------------------------ L = 1 is the latency MILP
@pytest.mark.parametrize("block", range(5))
def test_one_input_equals_the_latency_milp(block):
    rng = random.Random(1000 + block)
    for _ in range(10):  # 5 x 10 = 50 random DAGs
        p = random_problem(rng, rng.randint(3, 5))
        lat = solve_milp(p, threads=1)
        bat = solve_batched(p, 1, threads=1)
        assert lat.status == "optimal" and bat.status == "optimal"
        assert bat.objective == pytest.approx(lat.objective, rel=TOL), (bat.objective, lat.objective)
        assert bat.lower_bound <= lat.objective * (1 + TOL)
        assert all(sum(b.values()) == 1 for b in bat.batches.values())


# ------------------------------------------------------------------------ brute force
@pytest.mark.parametrize("seed", range(8))
def test_batched_equals_brute_force(seed):
    rng = random.Random(2000 + seed)
    devices = rwnn_devices() if seed % 3 else None
    p = random_problem(rng, rng.randint(2, 3), devices=devices)
    if p.num_devices == 3:  # keep the brute force small: two of the three devices
        p = LatencyProblem(p.graph, rwnn_devices(), output_bytes="comm")
    L = rng.choice([2, 3])
    spec = batch_spec(p, L, batch_sizes=[1, 2, 3] if seed % 2 else None)
    r = solve_batched(p, spec=spec, threads=1)
    opt = brute_batched(p, spec)
    assert r.status == "optimal"
    assert r.objective == pytest.approx(opt, rel=TOL), (r.objective, opt)
    assert r.lower_bound <= opt * (1 + TOL)
    counts = np.array([[r.batches[v].get(name, 0) for name in p.devices.names] for v in p.ids])
    mk = evaluate_batched(p, spec, counts, [[p.index[v] for v in r.order[name]] for name in p.devices.names])[0]
    assert mk == pytest.approx(r.objective, rel=1e-12)


def test_batching_helps_and_never_hurts():
    rng = random.Random(5)
    p = random_problem(rng, 4, devices=rwnn_devices())
    one = solve_batched(p, 1, threads=1)
    four = solve_batched(p, 4, threads=1)
    assert four.status == "optimal"
    # four inputs run one after another is a schedule of the batched model only with size-1
    # batches; the optimum with batches of up to 4 is at most 4 sequential latencies
    assert four.objective <= 4 * one.objective * (1 + TOL)
    assert four.throughput == pytest.approx(4 / four.objective)
    assert four.throughput >= one.throughput * (1 - TOL)


def test_memory_counts_weights_once_and_activations_per_input():
    g = sc.Graph([sc.Node(0, {"cpu": 10.0, "t4": 1.0, "a100": 1.0}, memory=5.0, comm=3.0)], [])
    devs = rwnn_devices(t4_memory=5.0 + 2 * 3.0, a100_memory=5.0 + 1 * 3.0)
    p = LatencyProblem(g, devs, output_bytes="comm")
    spec = batch_spec(p, 3, batch_sizes=[1, 2, 3])
    r = solve_batched(p, spec=spec, threads=1)
    assert r.batches[0] == {"t4": 2, "a100": 1}  # each device holds the weights once
    assert r.objective == pytest.approx(2 ** 0.5)


def test_single_batch_and_evaluator_errors():
    p = random_problem(random.Random(3), 3, devices=rwnn_devices())
    spec = batch_spec(p, 4)
    counts = single_batch(p, spec, [2, 2, 2])
    mk, start, fin, _ = evaluate_batched(p, spec, counts)
    assert mk == pytest.approx(sum(p.times[v, 2] * 2 for v in range(3)))  # 4 ** 0.5 on the A100
    with pytest.raises(InvalidArgumentError, match="counts"):
        evaluate_batched(p, spec, counts[:2])
    bad = counts.copy()
    bad[0, 2] = 3
    with pytest.raises(InvalidArgumentError, match="counts"):
        evaluate_batched(p, spec, bad)
    with pytest.raises(InvalidArgumentError, match="order"):
        evaluate_batched(p, spec, counts, [[], [], [0, 1]])
    with pytest.raises(InvalidArgumentError, match="placement"):
        single_batch(p, batch_spec(p, 4, batch_sizes={"a100": [1, 2]}), [2, 2, 2])


def test_bad_options():
    p = random_problem(random.Random(4), 3, devices=rwnn_devices())
    with pytest.raises(InvalidArgumentError, match="inputs"):
        solve_batched(p, 0)
    with pytest.raises(InvalidArgumentError, match="batch_sizes"):
        batch_spec(p, 3, batch_sizes=[2])  # 3 cannot be split into 2s on three devices? 2 + 1 missing
    with pytest.raises(InvalidArgumentError, match="batch_sizes"):
        batch_spec(p, 3, batch_sizes={"tpu": [1]})
    with pytest.raises(InvalidArgumentError, match="alpha"):
        batch_spec(p, 3, alpha=float("nan"))
    with pytest.raises(InvalidArgumentError, match="release"):
        solve_batched(p, 2, release=np.zeros((1, 1)))
    with pytest.raises(InvalidArgumentError, match="problem"):
        solve_batched("nope", 2)


def test_result_round_trips_and_time_limit():
    p = random_problem(random.Random(8), 5, devices=rwnn_devices())
    r = solve_batched(p, 4, threads=1, time_limit=0.2)
    assert r.objective is not None and r.lower_bound <= r.objective
    assert BatchedSchedule.from_json(r.to_json()) == r
    assert r.method == "batched" and r.inputs == 4


def test_cli_batch(capsys):
    import json

    from stagecut.cli.main import main

    code = main(["latency", "rwnn:modules=1:channels=1:size=10", "--method", "milp", "--batch", "2",
                 "--time-limit", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["kind"] == "BatchedSchedule" and out["inputs"] == 2
    assert all(sum(b.values()) == 2 for b in out["batches"].values())
    assert main(["latency", "rwnn:modules=1:channels=1:size=10", "--method", "heft", "--batch", "2"]) == 2
    assert "--batch" in capsys.readouterr().err


# ------------------------------------------------------------------------ hand cases that tell variants apart
def test_a_parallel_device_runs_its_batches_at_once():
    # two independent nodes, both on the CPU pool (parallel): the makespan is the longer, not the sum
    g = sc.Graph([sc.Node(0, {"cpu": 3.0}), sc.Node(1, {"cpu": 2.0})], [])
    p = LatencyProblem(g, Devices.pcie_star(1))
    spec = batch_spec(p, 2)
    counts = np.array([[2, 0], [2, 0]])
    assert evaluate_batched(p, spec, counts)[0] == pytest.approx(6.0) == timetable(p, spec, counts, [[0, 1], []])
    assert solve_batched(p, spec=spec, threads=1).objective == pytest.approx(6.0)


def test_activations_count_per_input_in_the_milp():
    # the T4 holds the weights and two inputs' activations: a third input must go to the CPU (10),
    # though the T4 would run all three in 3 ** 0.5 if activations counted once per batch
    g = sc.Graph([sc.Node(0, {"cpu": 10.0, "t4": 1.0, "a100": 1.0}, memory=5.0, comm=3.0)], [])
    devs = rwnn_devices(t4_memory=5.0 + 2 * 3.0, a100_memory=1.0)
    p = LatencyProblem(g, devs, output_bytes="comm")
    spec = batch_spec(p, 3, batch_sizes=[1, 2, 3])
    r = solve_batched(p, spec=spec, threads=1)
    assert r.batches[0] == {"cpu": 1, "t4": 2}
    assert r.objective == pytest.approx(10.0) == brute_batched(p, spec)


def test_simple_bound_is_the_longest_path_not_the_last_node():
    from stagecut.latency.diviml.batched import simple_bound

    g = sc.Graph([sc.Node("long", {"accelerator": 5.0}), sc.Node("short", {"accelerator": 1.0})], [])
    p = LatencyProblem(g, Devices.pcie_star(2, cpu=False))
    assert p.order[-1] == 1 and simple_bound(p, batch_spec(p, 1)) == pytest.approx(5.0)


def test_activations_of_two_nodes_share_a_device_per_input():
    # a -> b, no weights, 3 bytes of activations per input each; the T4 holds 9 bytes: both nodes'
    # two inputs (12) do not fit together, so part of the work goes to the CPU (10 per input). A
    # memory row counting activations once per batch (6) would run everything on the T4 (2 * 2 ** 0.5)
    g = sc.Graph([sc.Node(v, {"cpu": 10.0, "t4": 1.0, "a100": 1.0}, memory=0.0, comm=3.0) for v in "ab"],
                 [("a", "b")])
    p = LatencyProblem(g, rwnn_devices(t4_memory=9.0, a100_memory=1.0), output_bytes="comm")
    spec = batch_spec(p, 2, batch_sizes=[1, 2])
    r = solve_batched(p, spec=spec, threads=1)
    assert r.status == "optimal" and r.objective > 10.0
    assert r.objective == pytest.approx(brute_batched(p, spec), rel=TOL)
