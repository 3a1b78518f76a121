"""HEFT, DiviML's greedy and the best single device against plain re-implementations of their
definitions (written here from the docs, sharing no code with the solvers), on random DAGs whose
ranks depend on communication, with exact-fit gaps, busy devices and memory limits."""

import math
import random
from collections import deque

import numpy as np
import pytest

import stagecut as sc
from stagecut.latency import Device, Devices, LatencyProblem
from stagecut.latency.heuristics.constructive import best_device, greedy, heft

INF = math.inf


def problem(seed, n=None):
    """Random DAG of 4-9 nodes on 2-4 devices: GPUs of 1-2 speeds, maybe a parallel CPU pool,
    asymmetric bandwidths, integer times (exact fits happen), big outputs on some nodes, and
    sometimes memory that binds."""
    rng = random.Random(seed)
    n = n or rng.randint(4, 9)
    cpu = rng.random() < 0.4
    nd = rng.randint(2, 4)
    kinds = ([("cpu", "cpu")] if cpu else []) + [(f"gpu:{d}", "gpu") for d in range(nd - int(cpu))]
    tight = rng.random() < 0.4
    devs = [Device(name, kind, speed=1.0 if kind == "cpu" else rng.choice([1.0, 2.0]), parallel=kind == "cpu",
                   memory=INF if kind == "cpu" or not tight else float(rng.randint(2, 5))) for name, kind in kinds]
    m = len(devs)
    bw = [[INF if a == b else rng.choice([0.5, 1.0, 2.0]) for b in range(m)] for a in range(m)]
    nodes = []
    for i in range(n):
        t = float(rng.randint(0, 6))
        compute = {"gpu": t}
        if rng.random() < 0.8:
            compute["cpu"] = 3.0 * t
        nodes.append(sc.Node(i, compute, comm=float(rng.choice([0, 1, 1, 2, 8])),
                             memory=float(rng.randint(1, 2)) if tight else 0.0))
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.35]
    return LatencyProblem(sc.Graph(nodes, edges), Devices.from_matrix(devs, bw), output_bytes="comm")


def transfer(p, i, a, b):
    return 0.0 if a == b else p.size[i] / p.bandwidth[a][b]


def heft_oracle(p):
    """Topcuoglu et al.'s insertion-based HEFT as the heuristics' docs define it."""
    n, nd = len(p), p.num_devices
    can = [[d for d in range(nd) if math.isfinite(p.times[i][d])] for i in range(n)]
    w = [sum(p.times[i][d] for d in can[i]) / len(can[i]) for i in range(n)]

    def c(i, s):
        pairs = [(a, b) for a in can[i] for b in can[s] if a != b]
        if not pairs or p.size[i] == 0:
            return 0.0
        return sum(p.size[i] / p.bandwidth[a][b] for a, b in pairs) / len(pairs)

    rank = {}
    for i in reversed(p.order):
        rank[i] = w[i] + max([c(i, s) + rank[s] for s in p.succ[i]], default=0.0)
    topo = {v: k for k, v in enumerate(p.order)}
    free = list(p.capacity)
    dev, fin = {}, {}
    slots = [[] for _ in range(nd)]
    done = set()
    while len(done) < n:
        ready = [i for i in range(n) if i not in done and all(u in done for u in p.pred[i])]
        i = min(ready, key=lambda v: (-rank[v], topo[v]))
        best = None
        for d in can[i]:
            if p.memory[i] > free[d]:
                continue
            r = max([fin[u] + transfer(p, u, dev[u], d) for u in p.pred[i]], default=0.0)
            length = p.times[i][d]
            t = r
            if not p.parallel[d]:
                for s, f in sorted(slots[d]):
                    if f <= t:
                        continue
                    if t + length <= s:
                        break
                    t = max(t, f)
            if best is None or (t + length, d) < (best[0], best[1]):
                best = (t + length, d, t)
        if best is None:
            return None
        f, d, t = best
        dev[i], fin[i] = d, f
        free[d] -= p.memory[i]
        slots[d].append((t, f))
        done.add(i)
    return [dev[i] for i in range(n)], max(fin.values())


def greedy_oracle(p):
    """DiviML's greedy: BFS order; each node where the partial makespan, then its own finish,
    then the device position is least."""
    n, nd = len(p), p.num_devices
    indeg = [len(p.pred[i]) for i in range(n)]
    queue = deque(i for i in range(n) if indeg[i] == 0)
    order = []
    while queue:
        i = queue.popleft()
        order.append(i)
        for s in p.succ[i]:
            indeg[s] -= 1
            if indeg[s] == 0:
                queue.append(s)
    free = list(p.capacity)
    busy_until = [0.0] * nd
    dev, fin = {}, {}
    span = 0.0
    for i in order:
        best = None
        for d in range(nd):
            if not math.isfinite(p.times[i][d]) or p.memory[i] > free[d]:
                continue
            s = 0.0 if p.parallel[d] else busy_until[d]
            for u in p.pred[i]:
                s = max(s, fin[u] + transfer(p, u, dev[u], d))
            f = s + p.times[i][d]
            key = (max(span, f), f, d)
            if best is None or key < best:
                best = key
        if best is None:
            return None
        span, f, d = best
        dev[i], fin[i] = d, f
        busy_until[d] = f
        free[d] -= p.memory[i]
    return [dev[i] for i in range(n)]


def placement(p, s):
    return [p.devices.names.index(s.placement[v]) for v in p.ids]


@pytest.mark.parametrize("seed", range(150))
def test_heft_is_its_definition(seed):
    p = problem(seed)
    want = heft_oracle(p)
    s = heft(p)
    if want is None:
        assert s.objective is None
        return
    assert placement(p, s) == want[0]
    assert s.stats["heft_makespan"] == pytest.approx(want[1], abs=1e-9)


@pytest.mark.parametrize("seed", range(150))
def test_greedy_is_its_definition(seed):
    p = problem(seed)
    want = greedy_oracle(p)
    s = greedy(p)
    if want is None:
        assert s.objective is None
        return
    assert placement(p, s) == want


def test_the_families_reach_the_cases_that_matter():
    """Some instance of the family has ranks ordered differently with and without communication,
    and some HEFT placement uses an exact-fit gap."""
    differ = 0
    for seed in range(150):
        p = problem(seed)
        run = np.isfinite(p.times)
        w = np.where(run, p.times, 0.0).sum(axis=1) / run.sum(axis=1)
        plain = {}
        for i in reversed(p.order):
            plain[i] = w[i] + max([plain[s] for s in p.succ[i]], default=0.0)
        a = sorted(range(len(p)), key=lambda v: -plain[v])
        s = heft(p)
        if s.objective is not None and a != sorted(range(len(p)), key=lambda v: -s.start[p.ids[v]]):
            differ += 1
    assert differ > 0


@pytest.mark.parametrize("seed", range(40))
def test_best_device_is_the_least_single_device_makespan(seed):
    from stagecut.latency import evaluate_schedule

    p = problem(1000 + seed)
    values = []
    for d, name in enumerate(p.devices.names):
        if np.isfinite(p.times[:, d]).all() and p.memory.sum() <= p.capacity[d]:
            values.append(evaluate_schedule(p, None, [name] * len(p)).objective)
    s = best_device(p)
    if not values:
        assert s.objective is None
    else:
        assert s.objective == pytest.approx(min(values), abs=1e-9)


def test_best_device_prefers_the_faster_of_two_devices_whatever_their_positions():
    nodes = [sc.Node(i, {"gpu": 2.0}) for i in range(3)]
    g = sc.Graph(nodes, [(0, 1), (1, 2)])
    fast_last = Devices.from_matrix([Device("slow", "gpu", speed=1.0), Device("fast", "gpu", speed=2.0)],
                                    [[INF, 1.0], [1.0, INF]])
    fast_first = Devices.from_matrix([Device("fast", "gpu", speed=2.0), Device("slow", "gpu", speed=1.0)],
                                     [[INF, 1.0], [1.0, INF]])
    for devs in (fast_last, fast_first):
        s = best_device(LatencyProblem(g, devs))
        assert set(s.placement.values()) == {"fast"} and s.objective == 3.0
