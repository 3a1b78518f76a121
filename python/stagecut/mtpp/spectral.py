"""The ``spectral`` bound for MTPP: the communication any ``k``-way partition must pay, from the
eigenvalues of the tensor graph (Donath and Hoffman's bound on graph partitions, weighted by
work, with their diagonal shifts).

The sum of the block costs of a partition into ``j <= k`` blocks is the total work ``W``, the
overflow, and every tensor paid once per block holding its producer or a consumer (when they
are not all in one block). Sparse graphs hide this communication from the other combinatorial
bounds: no single tensor *has* to cross, yet any balanced partition of a random graph cuts many.

The bound works on the forced groups (:func:`~stagecut.mtpp.model.forced_groups`), which a block
holds whole:

- **A graph whose cuts the tensors pay for.** A tensor of cost ``c`` whose producer and
  consumers lie in ``m`` groups is a clique on them with weight ``a = c min_b b / p(m, b)`` per
  pair (``p(m, b)``: the most pairs ``b`` blocks can split ``m`` groups into). Spread over
  ``b >= 2`` blocks it is paid ``b c >= a`` times the pairs it splits. With ``L`` the Laplacian of
  these cliques and ``x_j`` the 0/1 vector of block ``j``, the blocks pay at least
  ``1/2 sum_j x_j' L x_j``.
- **Donath and Hoffman.** With ``D`` the groups' work (each at least a tiny ``eps``, so that the
  groups with no work count: a block then holds at most ``T + E`` of ``D``, ``E`` the total
  added), ``y_j = D^(1/2) x_j`` are orthogonal with ``|y_j|^2 = D(block j)``, so
  ``sum_j x_j' (L + U) x_j >= sum_i d_i mu_i`` for the eigenvalues ``mu_1 <= mu_2 <= ...`` of
  ``D^(-1/2) (L + U) D^(-1/2)`` and the block sizes ``d_1 >= d_2 >= ...`` (any diagonal ``U``; it
  adds ``trace U`` to the left side, which is taken back). The least such sum over the sizes a
  partition of cost ``T`` can have fills the smallest eigenvalues first, ``T + E`` each.
- **The test.** ``T`` is below the optimum when for every ``j <= k``:
  ``j T < W + comm_j(T) + ov(j)`` (``comm_j``: the bound above with ``j`` blocks; ``ov``: the
  least total overflow). A bisection answers the largest ``T`` it proved so (or the floor).
- **The shifts.** ``U`` (trace 0) is improved by a projected supergradient ascent on the
  weighted eigenvalue sum, one dense eigendecomposition per step; every step's eigenvalues give
  a bound, and the best is kept. Each eigenvalue is lowered by a margin that covers the
  eigensolver's round-off (``8 n eps |M|_F``).

Cost: one ``eigh`` of the group count squared per step (about 1 ms at 100 groups, 1 s at
2,000); beyond :data:`MAX_GROUPS` groups, or with too little time for one step, the level
gives no more than its floor.

Examples
--------
>>> from stagecut.examples import regal_graph
>>> from stagecut.mtpp.model import MtppProblem, lower_bound
>>> p = MtppProblem(regal_graph(60, model="barabasi_albert", seed=0), devices=4)
>>> spectral_bound(p).bound > lower_bound(p)      # the cuts a balanced split must pay
True
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterator

import numpy as np

from stagecut.mtpp.combinatorial import CombinatorialBound
from stagecut.mtpp.model import MtppProblem, forced_groups, least_total_overflow
from stagecut.mtpp.model import lower_bound as simple_bound

__all__ = ["MAX_GROUPS", "largest_refuted", "pair_weight", "spectral_bound", "tensor_groups"]

#: Most forced groups the level decomposes (a dense eigendecomposition of this size takes seconds).
MAX_GROUPS = 3000

#: Seconds one step takes per (1,000 groups) cubed, generously (measured: 0.15 on one core).
_STEP_SECONDS = 0.3

#: The relative round-off allowance of a dense symmetric eigensolver, per row.
_EIGH_SLACK = 8 * np.finfo(float).eps


@functools.lru_cache(maxsize=4096)
def pair_weight(m: int) -> float:
    """The weight per pair of a tensor's clique on ``m >= 2`` groups, per unit of its cost: the
    least ``b / p(m, b)`` over ``b = 2..m`` blocks, ``p(m, b)`` the most pairs that ``b`` blocks
    split ``m`` groups into (as even as possible). Spread over ``b`` blocks the tensor is paid
    ``b`` times, at least this weight times the pairs split.

    >>> pair_weight(2), pair_weight(3), pair_weight(4)
    (2.0, 1.0, 0.5)
    """
    best = math.inf
    for b in range(2, m + 1):
        q, r = divmod(m, b)
        split = (m * m - r * (q + 1) ** 2 - (b - r) * q * q) // 2
        best = min(best, b / split)
    return best


def group_work(problem: MtppProblem) -> tuple[list[int], dict[int, int], np.ndarray]:
    """The forced group of each node (its representative), each representative's index (in
    order), and each group's work by index."""
    grp = forced_groups(problem)
    index = {r: i for i, r in enumerate(sorted(set(grp)))}
    w = np.zeros(len(index))
    for i, r in enumerate(grp):
        w[index[r]] += problem.work(i)
    return grp, index, w


def tensor_groups(problem: MtppProblem, grp: list[int], index: dict[int, int]) -> Iterator[tuple[float, list[int]]]:
    """Each tensor that joins two forced groups or more: its cost and its groups' indices (sorted),
    the producer's with its consumers'. A block pays it when it holds some of them but not all."""
    g = problem.graph
    for u, nd in enumerate(g.nodes):
        c = float(nd.comm)
        if c <= 0 or not g.succ[u]:
            continue
        e = sorted({index[grp[u]], *(index[grp[v]] for v in g.succ[u])})
        if len(e) >= 2:
            yield c, e


def _laplacian(problem: MtppProblem, grp: list[int], index: dict[int, int]) -> np.ndarray:
    n = len(index)
    lap = np.zeros((n, n))
    for c, e in tensor_groups(problem, grp, index):
        m = len(e)
        a = c * pair_weight(m)
        lap[np.ix_(e, e)] -= a
        lap[e, e] += a * m
    return lap


class _Test:
    """Does ``T`` fail for given eigenvalues? (module docs: ``j T < W + comm_j + ov(j)`` for every
    ``j <= k``.) Only ``j = k`` is tested, which implies the others for every ``T`` tested (at
    least the simple bound): a partition into ``j < k`` blocks has ``j T >= W + comm_j + ov(j)``;
    the sizes that fill ``j`` blocks fill ``k`` the same way (the rest empty), so
    ``comm_j >= comm_k``; and ``ov(k) - ov(j) <= (k - j) (R - M)^+ / B <= (k - j) T``, since
    ``T`` is at least one group's overflow ``>= (R - M)^+ / B``. So ``k T >= W + comm_k + ov(k)``."""

    def __init__(self, problem: MtppProblem, work: float, extra: float, blocks: int) -> None:
        params = math.fsum(n.memory for n in problem.graph.nodes)
        self.work, self.extra, self.blocks = work, extra, blocks
        self.ov = least_total_overflow(problem, params, blocks)

    def sizes(self, t: float) -> np.ndarray | None:
        """The block sizes (in ``D``) with the least eigenvalue sum, largest first; ``None``: the
        blocks cannot hold it all."""
        cap = t + self.extra
        total = self.work + self.extra
        if cap <= 0 or total > self.blocks * cap * (1 + 1e-12):
            return None
        full = min(self.blocks, int(total // cap))
        d = np.zeros(self.blocks)
        d[:full] = cap
        if full < self.blocks:
            d[full] = max(0.0, total - full * cap)
        return d

    def need(self, t: float, mu: np.ndarray, trace: float) -> float:
        """``(W + comm_k(T) + ov(k)) / k`` (``inf`` when ``k`` blocks cannot hold the work)."""
        d = self.sizes(t)
        if d is None:
            return math.inf
        comm = max(0.0, 0.5 * (float(d @ mu) - trace))
        return (self.work + comm + self.ov) / self.blocks


def _bisect(test: _Test, mu: np.ndarray, trace: float, floor: float) -> float:
    """The largest ``T >= floor`` the test proved below the optimum (``floor`` when none)."""
    return largest_refuted(lambda t: test.need(t, mu, trace), floor)


def largest_refuted(need: Callable[[float], float], floor: float) -> float:
    """The largest ``T >= floor`` with ``need(T) > T`` found by doubling then bisection
    (``need(T)``: the least cost a partition of cost at most ``T`` must have, nonincreasing in
    ``T``), or ``floor`` when ``floor`` itself is not refuted. A NaN never proves anything."""
    def fails(t: float) -> bool:
        return bool(need(t) > t)

    if not fails(floor):
        return floor
    lo, hi = floor, max(2.0 * floor, 1.0)
    for _ in range(200):
        if not fails(hi):
            break
        lo, hi = hi, 2.0 * hi
    else:
        return lo
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if fails(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _first_step(n: int) -> float:
    """Seconds the first step will take, generously: 2 x the time of a dense ``eigh`` of a quarter
    of the size, times 64 (the cube of 4), as this machine's BLAS runs it now (its threads and
    load); :data:`_STEP_SECONDS` per 1,000 groups cubed for small ones."""
    if n < 400:
        return _STEP_SECONDS * (n / 1000) ** 3
    rng = np.random.default_rng(0)
    np.linalg.eigvalsh(np.eye(8))  # (the first call pays the library's start-up)
    m = n // 4
    probe = rng.random((m, m))
    probe += probe.T
    t0 = time.perf_counter()
    np.linalg.eigh(probe)
    return 2 * 64 * (time.perf_counter() - t0)


def spectral_bound(problem: MtppProblem, *, floor: float | None = None, deadline: float | None = None,
                   steps: int = 100) -> CombinatorialBound:
    """The ``spectral`` bound (module docs), at least ``floor`` (default: the simple bound),
    after at most ``steps`` steps of the shift ascent, stopped at ``deadline``
    (``time.monotonic()``; the bound so far, ``complete=False``). ``solves`` counts the
    eigendecompositions. With more than :data:`MAX_GROUPS` forced groups, or a deadline too close
    for one step, it gives ``floor`` with ``complete=False`` and no solve."""
    lo = simple_bound(problem) if floor is None else max(float(floor), simple_bound(problem))
    if not math.isfinite(lo):
        return CombinatorialBound(bound=lo)
    grp, index, w = group_work(problem)
    n = len(w)
    if n > MAX_GROUPS:
        return CombinatorialBound(bound=lo, complete=False)
    work = math.fsum(w.tolist())
    if n < 2 or work <= 0:
        return CombinatorialBound(bound=lo)
    lap = _laplacian(problem, grp, index)
    if not lap.any():
        return CombinatorialBound(bound=lo)
    if deadline is not None and time.monotonic() + _first_step(n) > deadline:
        return CombinatorialBound(bound=lo, complete=False)  # (no time for one step: it cannot be stopped)
    eps = 1e-6 * work / n
    dw = np.maximum(w, eps)
    extra = math.fsum((dw - w).tolist())  # each block holds at most this much more than its work
    scale = 1.0 / np.sqrt(dw)
    test = _Test(problem, work, extra, max(1, min(problem.devices, n)))
    k = test.blocks
    shift = np.zeros(n)
    best = lo
    step0 = None
    complete = True
    solves = 0
    last = 0.0  # seconds of the last step: the next one is not started when it would end past the deadline
    for it in range(max(1, steps)):
        if solves and deadline is not None and time.monotonic() + last >= deadline:
            complete = False
            break
        began = time.monotonic()
        mat = lap.copy()
        mat[np.diag_indices(n)] += shift
        with np.errstate(over="ignore", invalid="ignore"):  # (a badly scaled graph: checked just below)
            mat *= scale[:, None]
            mat *= scale[None, :]
        if not np.isfinite(mat).all():
            break
        try:
            mu, z = np.linalg.eigh(mat)
        except np.linalg.LinAlgError:
            break  # (no convergence on a badly scaled matrix: the bound so far stands)
        solves += 1
        margin = _EIGH_SLACK * n * float(np.linalg.norm(mat))
        low = mu[:k] - margin
        trace = math.fsum(shift.tolist())
        t = _bisect(test, low, trace, best)
        best = max(best, t)
        # a supergradient of the eigenvalue sum at block sizes just above the bound
        d = test.sizes(best * (1 + 1e-9))
        if d is None:
            break
        grad = (z[:, :k] ** 2 @ d) / dw
        grad -= grad.mean()
        top = float(np.abs(grad).max())
        if top <= 0:
            break
        if step0 is None:
            step0 = float(np.abs(np.diag(lap)).mean()) / top
        shift += step0 / math.sqrt(it + 1) * grad
        shift -= shift.mean()
        last = time.monotonic() - began
    return CombinatorialBound(bound=best * (1 - 1e-12) if best > lo else lo, complete=complete, solves=solves)
