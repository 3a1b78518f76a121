"""The ``sdp`` bound for MTPP: the communication any ``k``-way partition must pay, from a
semidefinite relaxation with nonnegative entries (a doubly nonnegative relaxation of the
partition matrix), whose multipliers are checked by an eigenvalue and one small LP per group.

A partition of the forced groups (:func:`~stagecut.mtpp.model.forced_groups`) into blocks is a
0/1 matrix ``Y`` (``Y[i, j] = 1``: groups ``i`` and ``j`` share a block). When every block costs at
most ``T``, ``Y`` is positive semidefinite, its diagonal is 1, its entries lie in ``[0, 1]``, and
each row holds at most ``T`` of work: ``sum_j w_j Y[i, j] <= T``. The blocks pay each tensor at
least its clique weight per pair of its groups they split (as in :mod:`stagecut.mtpp.spectral`),
so with ``A`` the sum of those cliques the blocks pay at least
``comm(Y) = sum_{i<j} A[i, j] (1 - Y[i, j])``.

**The certificate.** For any matrix ``L`` (the multipliers) and any such ``Y``:
``-1/2 <A, Y> = <M, Y> + <L, Y>`` with ``M = -A/2 - sym(L)``. The first term is at least
``n min(0, lambda_min(M))`` (``Y`` is semidefinite with trace ``n``). The second is at least
the sum over the rows of ``min <L_i, v>`` over ``v`` with ``v_i = 1``, ``0 <= v <= 1`` and
``sum_{j != i} w_j v_j <= T - w_i``: a fractional knapsack, solved exactly (the most negative
``L[i, j] / w_j`` first; groups of no work free). So every partition of cost at most ``T`` pays
at least ``comm_L(T)``, the sum of these, and ``T`` is below the optimum when
``k T < W + comm_L(T) + ov(k)`` (``W``: the work; ``ov``: the least total overflow; the
argument for fewer than ``k`` blocks is the one of :mod:`~stagecut.mtpp.spectral`). ``comm_L``
does not grow with ``T``, so a bisection finds the largest such ``T``. Soundness rests on this
check alone: any ``L`` gives a valid bound, and a poor one only a weaker bound. The eigenvalue is
lowered by a margin that covers the eigensolver's round-off, and ``comm_L`` by a relative
``1e-9`` of the magnitudes summed.

**The multipliers.** An alternating-direction method on the relaxation at a fixed ``T``: ``X``
projected on the semidefinite cone (one dense eigendecomposition), ``V`` on the rows' sets
above, ``L`` the multiplier of ``X = V`` (over-relaxed by 1.8, the penalty balanced between the
two residuals); ``T`` follows the best bound proven so far. Every :data:`CHECK_EVERY` steps the
current ``L`` is checked as above; the best bound is kept, and once it is above the floor the
method stops when five checks in a row raise it by less than ``1e-4`` (relative). The
multipliers may differ in their last digits with the linear-algebra library's threads, and so
may the bound (each is sound).

What it adds to ``spectral``: the nonnegative entries. A partition matrix has no negative
entry, and without that constraint the relaxation (Donath and Hoffman's) can spread a block's
work over negative correlations; with it, on the 60-node REGAL Erdos-Renyi graph at ``k = 8``
(``T`` = 1,700) a conic solver's optimum sees half as much communication again as without (1,861
against 1,228).

Cost: one ``eigh`` of the group count squared per step, and an ``eigvalsh`` per check (until
the bound stops rising, on the REGAL Erdos-Renyi graphs at ``k = 8``: 0.3 s of CPU at 100 groups,
0.9 s at 200, 7 s at 500, about 60 s at 1,000, where 50 steps, 15 s, reach 99.6% of it; one BLAS
thread); beyond :data:`MAX_GROUPS` groups, or without time for :data:`MIN_STEPS` steps (estimated
generously), the level gives no more than its floor.

Examples
--------
>>> from stagecut.examples import regal_graph
>>> from stagecut.mtpp.model import MtppProblem, lower_bound
>>> p = MtppProblem(regal_graph(60, model="erdos_renyi", seed=0), devices=8)
>>> sdp_bound(p).bound > 1.1 * lower_bound(p)      # the cuts a balanced split must pay
True
"""

from __future__ import annotations

import math
import time

import numpy as np
import numpy.typing as npt

from stagecut.mtpp.combinatorial import CombinatorialBound, _least_total_overflow
from stagecut.mtpp.model import MtppProblem
from stagecut.mtpp.model import lower_bound as simple_bound
from stagecut.mtpp.spectral import _EIGH_SLACK, _first_step, _laplacian, group_work, largest_refuted

__all__ = ["CHECK_EVERY", "MAX_GROUPS", "MIN_STEPS", "sdp_bound"]

#: Most forced groups the level works on (dense matrices of this size squared, one eigendecomposition a
#: step; at 3,000 groups about 20 such matrices, 1.5 GB, and 5 s a step).
MAX_GROUPS = 3000

#: Steps of the multiplier method between two checks of its multipliers.
CHECK_EVERY = 10

#: The level does not start without time for this many (generously estimated) steps: fewer do not
#: lift the bound, and their time is the next levels'.
MIN_STEPS = 25

_Array = npt.NDArray[np.float64]

#: The multiplier method's over-relaxation (1: none; 1.8 reached 1.5% higher bounds in 300 steps on 500-node graphs).
_RELAX = 1.8

#: The multiplier method's first penalty (on costs scaled to at most 1/2). From 1, the bounds on
#: 500- and 1,000-node graphs took about 300 steps to reach what 0.05 reaches in about 40.
_SIGMA0 = 0.05

#: The method stops when :data:`_STALL_CHECKS` checks in a row raised the bound by less than this (relative).
_STALL = 1e-4
_STALL_CHECKS = 5


class _Rows:
    """The rows' knapsacks: ``min <L_i, v>`` over ``v_i = 1``, ``0 <= v <= 1``,
    ``sum_{j != i} w_j v_j <= T - w_i``, for every ``T`` at once (the items sorted once)."""

    def __init__(self, lam: _Array, w: _Array) -> None:
        n = len(w)
        off = lam.copy()
        off[np.diag_indices(n)] = 0.0
        neg = np.minimum(off, 0.0)  # (only negative entries are worth taking)
        free = w <= 0
        self.diag = np.diag(lam).copy()
        self.free = neg[:, free].sum(axis=1)  # groups of no work: taken whole at no capacity
        paid = neg[:, ~free]
        wp = w[~free]
        ratio = paid / wp[None, :]
        order = np.argsort(ratio, axis=1, kind="stable")  # most negative per unit of work first
        self.val = np.take_along_axis(paid, order, axis=1)
        self.wt = wp[order]
        self.cum_w = np.cumsum(self.wt, axis=1)
        self.cum_v = np.cumsum(self.val, axis=1)
        self.w = w
        self.mass = float(np.abs(lam).sum())

    def least(self, t: float) -> float:
        """``sum_i min <L_i, v>`` at ``T = t`` (``inf`` when a group alone is over ``t``)."""
        cap = t - self.w
        if (cap < 0).any():
            return math.inf
        if self.cum_w.shape[1] == 0:
            return float(self.diag.sum() + self.free.sum())
        whole = (self.cum_w <= cap[:, None]).sum(axis=1)  # items taken whole, in order
        rows = np.arange(len(cap))
        took_v = np.where(whole > 0, self.cum_v[rows, np.maximum(whole - 1, 0)], 0.0)
        took_w = np.where(whole > 0, self.cum_w[rows, np.maximum(whole - 1, 0)], 0.0)
        nxt = np.minimum(whole, self.cum_w.shape[1] - 1)
        part = np.where(whole < self.cum_w.shape[1],
                        self.val[rows, nxt] * np.clip((cap - took_w) / self.wt[rows, nxt], 0.0, 1.0), 0.0)
        return math.fsum((self.diag + self.free + took_v + part).tolist())


def _check(lam: _Array, c: _Array, const: float, w: _Array, need: float, k: int, floor: float) -> float:
    """The largest ``T >= floor`` the multipliers ``lam`` prove below the optimum (module docs)."""
    n = len(w)
    with np.errstate(over="ignore", invalid="ignore"):  # (a badly scaled graph: checked just below)
        m = c - 0.5 * (lam + lam.T)
        if not np.isfinite(m).all():
            return floor
        mu = float(np.linalg.eigvalsh(m)[0]) - _EIGH_SLACK * n * float(np.linalg.norm(m))
    if not math.isfinite(mu) or not math.isfinite(const):
        return floor
    eig = n * min(0.0, mu)
    rows = _Rows(lam, w)
    slack = 1e-9 * (abs(const) + abs(eig) + rows.mass)

    def cost(t: float) -> float:
        comm = const + eig + rows.least(t) - slack
        return (need + max(0.0, comm)) / k

    return largest_refuted(cost, floor)


def _project_rows(u: _Array, w: _Array, cap: _Array) -> _Array:
    """Each row of ``u`` nearly projected on ``v_i = 1``, ``0 <= v <= 1``,
    ``sum_{j != i} w_j v_j <= cap_i`` (a bisection on the multiplier of the knapsack row; only
    the multipliers' quality depends on it, not the bound's soundness)."""
    n = len(w)
    v = np.clip(u, 0.0, 1.0)
    v[np.diag_indices(n)] = 0.0
    over = v @ w > cap
    if over.any():
        sub = u[over]
        hi = np.full(len(sub), float(np.max(np.abs(sub))) / max(float(w[w > 0].min(initial=1.0)), 1e-300) + 1.0)
        lo = np.zeros(len(sub))
        idx = np.flatnonzero(over)
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            x = np.clip(sub - mid[:, None] * w[None, :], 0.0, 1.0)
            x[np.arange(len(idx)), idx] = 0.0
            big = x @ w > cap[over]
            lo = np.where(big, mid, lo)
            hi = np.where(big, hi, mid)
        x = np.clip(sub - hi[:, None] * w[None, :], 0.0, 1.0)
        v[over] = x
    v[np.diag_indices(n)] = 1.0
    return v


def sdp_bound(problem: MtppProblem, *, floor: float | None = None, deadline: float | None = None,
              steps: int = 300) -> CombinatorialBound:
    """The ``sdp`` bound (module docs), at least ``floor`` (default: the simple bound), after at
    most ``steps`` steps of the multiplier method (fewer once the bound stops rising; both
    ``complete=True``), stopped at ``deadline`` (``time.monotonic()``; the bound so far,
    ``complete=False``). ``solves`` counts the eigendecompositions. With more than
    :data:`MAX_GROUPS` forced groups, or a deadline too close for :data:`MIN_STEPS` steps, it gives
    ``floor`` with ``complete=False`` and no solve."""
    lo = simple_bound(problem) if floor is None else max(float(floor), simple_bound(problem))
    if not math.isfinite(lo):
        return CombinatorialBound(bound=lo)
    grp, index, w = group_work(problem)
    n = len(w)
    if n > MAX_GROUPS:
        return CombinatorialBound(bound=lo, complete=False)
    k = max(1, min(problem.devices, n))
    if n < 2 or k < 2:
        return CombinatorialBound(bound=lo)
    adj = -_laplacian(problem, grp, index)
    adj[np.diag_indices(n)] = 0.0
    if not adj.any() or not np.isfinite(adj).all():
        return CombinatorialBound(bound=lo)
    if deadline is not None and time.monotonic() + MIN_STEPS * _first_step(n) > deadline:
        return CombinatorialBound(bound=lo, complete=False)  # (no time for the steps that lift a bound)
    params = math.fsum(nd.memory for nd in problem.graph.nodes)
    need = math.fsum(w.tolist()) + _least_total_overflow(problem, params, k)
    const = math.fsum(adj[np.triu_indices(n, 1)].tolist())
    scale = float(np.abs(adj).max())
    c = -0.5 * adj / scale  # (the method works on scaled costs; the check on the real ones)
    x = np.eye(n)
    v = np.eye(n)
    lam = np.zeros((n, n))
    sigma = _SIGMA0
    best, t = lo, lo
    solves, last, complete, stalled = 0, 0.0, True, 0
    for it in range(1, max(1, steps) + 1):
        if solves and deadline is not None and time.monotonic() + last >= deadline:
            complete = False
            break
        began = time.monotonic()
        arg = v - (c + lam) / sigma
        arg = 0.5 * (arg + arg.T)
        try:
            mu, z = np.linalg.eigh(arg)
        except np.linalg.LinAlgError:
            break
        solves += 1
        pos = mu > 0
        zp = z[:, pos]
        x = (zp * mu[pos]) @ zp.T
        before = v
        xr = _RELAX * x + (1.0 - _RELAX) * v  # (over-relaxation)
        v = _project_rows(xr + lam / sigma, w, np.maximum(t - w, 0.0))
        lam = lam + sigma * (xr - v)
        if it % 10 == 0:  # (residual balancing)
            primal = float(np.linalg.norm(x - v))
            dual = sigma * float(np.linalg.norm(v - before))
            if primal > 10 * dual:
                sigma *= 2.0
            elif dual > 10 * primal:
                sigma /= 2.0
        if it % CHECK_EVERY == 0 or it == steps:
            solves += 1
            got = _check(-scale * lam, -0.5 * adj, const, w, need, k, best)
            stalled = stalled + 1 if best > lo and got <= best * (1 + _STALL) else 0  # (once above the floor)
            if got > best:
                best = got
            t = max(t, best)
            if stalled >= _STALL_CHECKS:
                break  # (converged: the time is the next levels')
        last = max(last, time.monotonic() - began)  # (the longest step: one with a check)
    return CombinatorialBound(bound=best * (1 - 1e-12) if best > lo else lo, complete=complete, solves=solves)
