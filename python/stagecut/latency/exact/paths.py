"""The pieces the path bounds share (:mod:`~stagecut.latency.exact.bounds` and
:mod:`~stagecut.latency.exact.skip_path`): every node's transfer time between every pair of
devices, where each node may run, and the long paths the bounds follow."""

from __future__ import annotations

import math

import numpy as np

from stagecut.latency.model.problem import LatencyProblem

__all__ = ["long_paths"]


def _transfers(problem: LatencyProblem) -> np.ndarray:
    """``tr[u, a, b]``, :meth:`LatencyProblem.transfer` for every node and device pair."""
    n, nd = len(problem), problem.num_devices
    size = np.asarray(problem.size, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        tr = size[:, None, None] / problem.bandwidth[None, :, :]
    tr[:, np.arange(nd), np.arange(nd)] = 0.0
    tr[size == 0] = 0.0
    return np.where(np.isnan(tr), 0.0, tr).reshape(n, nd, nd)


def _runnable(problem: LatencyProblem) -> np.ndarray:
    """Where each node may run: a finite time and its memory within the device's."""
    out: np.ndarray = np.isfinite(problem.times) & (problem.memory[:, None] <= problem.capacity[None, :])
    return out


def long_paths(problem: LatencyProblem) -> list[list[int]]:
    """The paths :func:`memory_path_bound` tries: the longest at the fastest times, the heaviest
    in memory, and the longest in both (each normalised by its largest value), without repeats."""
    n = len(problem)
    if not n:
        return []
    t = np.where(np.isfinite(problem.times), problem.times, math.inf).min(axis=1)
    t = np.where(np.isfinite(t), t, 0.0)
    mem = problem.memory.astype(float)
    norm_t = t / t.max() if t.max() > 0 else t
    norm_m = mem / mem.max() if mem.max() > 0 else mem
    out: list[list[int]] = []
    for w in (t, mem, norm_t + norm_m):
        if not w.any():
            continue
        f = np.zeros(n)
        back = [-1] * n
        for v in problem.order:
            best = max(problem.pred[v], key=lambda u: f[u], default=-1)
            f[v] = w[v] + (f[best] if best >= 0 else 0.0)
            back[v] = best
        v = int(np.argmax(f))
        path = []
        while v >= 0:
            path.append(v)
            v = back[v]
        path.reverse()
        if path not in out:
            out.append(path)
    return out
