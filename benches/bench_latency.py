"""The latency evaluator (stagecut.latency.model._fast.Evaluator, the fitness of every heuristic) on a
1,000-node, 3,000-edge random DAG on 4 heterogeneous devices.

    RAYON_NUM_THREADS=1 pytest benches/bench_latency.py --benchmark-only
    RAYON_NUM_THREADS=1 python benches/bench_latency.py      # evaluations per second, as a table

Cases: ASAP with a fixed order, one call per evaluation from Python (the order as a sequence
array, and as per-device lists); the same in batches of 1,000 placements (``makespans``: the
Rust loop alone; with ``RAYON_NUM_THREADS=1`` one core); a fixed order that is not a linear
extension (Kahn's algorithm instead of the single sweep); rank round-robin then ASAP. Each case
records ``evaluations_per_second`` in ``extra_info``. The issue's target: >= 50,000 evaluations
per second of ASAP with a given order on one core.
"""

from __future__ import annotations

import pathlib
import random
import sys
import time

import numpy as np
import pytest

import stagecut as sc
from stagecut.latency import Device, Devices, LatencyProblem
from stagecut.latency.model._fast import Evaluator

# tests/helpers.py: pytest puts tests/ on the path (pyproject's pythonpath); a direct run needs it too
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
from helpers import random_linear_extension  # noqa: E402

N, EDGES, DEVICES, BATCH = 1000, 3000, 4, 1000


def random_problem(seed: int = 0) -> LatencyProblem:
    rng = random.Random(seed)
    perm = list(range(N))
    rng.shuffle(perm)
    edges: set[tuple[int, int]] = set()
    while len(edges) < EDGES:
        a, b = sorted(rng.sample(range(N), 2))
        edges.add((perm[a], perm[b]))
    nodes = [sc.Node(i, {"gpu": rng.uniform(0.5, 5.0)}) for i in range(N)]
    devs = [Device(f"gpu:{k}", "gpu", speed=1.0 + 0.5 * k) for k in range(DEVICES)]
    bw = [[None if a == b else (50.0 if a // 2 == b // 2 else 20.0) for b in range(DEVICES)] for a in range(DEVICES)]
    sizes = {i: rng.uniform(0.0, 100.0) for i in range(N)}
    return LatencyProblem(sc.Graph(nodes, sorted(edges)), Devices.from_matrix(devs, bw), output_bytes=sizes)


class Case:
    """The problem, its evaluator, random placements and orders (fixed seeds)."""

    def __init__(self) -> None:
        rng = random.Random(1)
        self.p = random_problem()
        self.ev = Evaluator(self.p)
        self.devs = np.array([[rng.randrange(DEVICES) for _ in range(N)] for _ in range(BATCH)], dtype=np.int64)
        self.seqs = np.array([random_linear_extension(rng, self.p) for _ in range(BATCH)], dtype=np.int64)
        self.dev, self.seq = self.devs[0], self.seqs[0]
        self.lists = [[int(i) for i in self.seq if self.dev[i] == d] for d in range(DEVICES)]
        # each row's device lists, concatenated device by device: the same schedules, but not a
        # linear extension of the DAG, so timed by Kahn's algorithm
        self.kahn = np.array([np.concatenate([s[d[s] == k] for k in range(DEVICES)])
                              for d, s in zip(self.devs, self.seqs)], dtype=np.int64)

    def cases(self) -> dict[str, tuple[object, int]]:
        """name -> (callable, evaluations per call)."""
        ev = self.ev
        return {
            "asap_sequence_single": (lambda: ev.makespan(self.dev, self.seq), 1),
            "asap_lists_single": (lambda: ev.makespan(self.dev, self.lists), 1),
            "asap_sequence_batch": (lambda: ev.makespans(self.devs, self.seqs), BATCH),
            "asap_kahn_batch": (lambda: ev.makespans(self.devs, self.kahn), BATCH),
            "rank_round_robin_single": (lambda: ev.makespan(self.dev), 1),
            "rank_round_robin_batch": (lambda: ev.makespans(self.devs), BATCH),
        }


@pytest.fixture(scope="module")
def case() -> Case:
    return Case()


@pytest.mark.parametrize("name", ["asap_sequence_single", "asap_lists_single", "asap_sequence_batch",
                                  "asap_kahn_batch", "rank_round_robin_single", "rank_round_robin_batch"])
def test_evaluator(benchmark, case, name):
    fn, per_call = case.cases()[name]
    benchmark(fn)
    benchmark.extra_info.update(evaluations_per_call=per_call, nodes=N, edges=case.p.graph.edges.__len__(),
                                evaluations_per_second=per_call / benchmark.stats.stats.mean)


def main() -> None:
    c = Case()
    assert len(c.p.graph.edges) == EDGES
    # the forms agree
    assert c.ev.makespan(c.dev, c.seq) == c.ev.makespan(c.dev, c.lists) == c.ev.makespans(c.devs, c.kahn)[0]
    print(f"{N} nodes, {EDGES} edges, {DEVICES} devices; evaluations per second (best of 5), by the wall "
          "clock and per second of CPU time (all threads; differs from the wall on a loaded machine):")
    for name, (fn, per_call) in c.cases().items():
        reps = max(1, 20_000 // per_call)
        wall = cpu = float("inf")
        for _ in range(5):
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(reps):
                fn()  # type: ignore[operator]
            wall = min(wall, (time.perf_counter() - t0) / reps)
            cpu = min(cpu, (time.process_time() - c0) / reps)
        print(f"  {name:26s} {per_call / wall:10,.0f} wall {per_call / cpu:10,.0f} cpu")

if __name__ == "__main__":
    sys.exit(main())
