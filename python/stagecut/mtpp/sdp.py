"""The ``sdp`` bound for MTPP: the communication any ``k``-way partition must pay, from a
semidefinite relaxation with nonnegative entries (a doubly nonnegative relaxation of the
partition matrix), whose multipliers are checked by an eigenvalue and one small LP per group.

A partition of the forced groups (:func:`~stagecut.mtpp.model.forced_groups`) into blocks is a
0/1 matrix ``Y`` (``Y[i, j] = 1``: groups ``i`` and ``j`` share a block). When every block costs at
most ``T``, ``Y`` is positive semidefinite, its diagonal is 1, its entries lie in ``[0, 1]``, and
each row holds at most ``T`` of work and tensors: the block ``B`` of group ``i`` pays each tensor
``e`` whose groups it splits (``io(B)``), and for any weights ``p`` and ``q`` on the groups of
``e`` (each summing to 1), ``c_e (p(B) - q(B)) <= c_e [B splits e]`` (both are 1 or both 0 when
``B`` holds all or none of them). Summed over the tensors that is a linear row
``sum_j a[i, j] Y[i, j] <= T`` with ``a[i, j] = w_j + g[i, j]``, valid for every such ``g``; the
method chooses ``g`` from its current rows (at row ``v``, ``p`` spread over the groups of
``e`` where ``v`` is largest, ``q`` where it is smallest: a subgradient of
``sum_e c_e (max_e v - min_e v)``, which is ``io(B)`` at 0/1 rows). The blocks pay each tensor
at least its clique weight per pair of its groups they split (as in
:mod:`stagecut.mtpp.spectral`), so with ``A`` the sum of those cliques the blocks pay at least
``comm(Y) = sum_{i<j} A[i, j] (1 - Y[i, j])``.

**The certificate.** For any matrix ``L`` (the multipliers) and any such ``Y``:
``-1/2 <A, Y> = <M, Y> + <L, Y>`` with ``M = -A/2 - sym(L)``. The first term is at least
``n min(0, lambda_min(M))`` (``Y`` is semidefinite with trace ``n``). The second is at least
the sum over the rows of ``min <L_i, v>`` over ``v`` with ``v_i = 1``, ``0 <= v <= 1`` and
``sum_{j != i} a[i, j] v_j <= T - a[i, i]``: an LP of one constraint, bounded below by its
dual, ``max`` over ``mu >= 0`` of ``sum_j min(0, L[i, j] + mu a[i, j]) - mu (T - a[i, i])``
(any ``mu`` gives a bound; the best is at a breakpoint, found exactly), and infinite when no
``v`` meets the row. So every partition of cost at most ``T`` pays at least ``comm_L(T)``, the
sum of these, and ``T`` is below the optimum when
``k T < W + comm_L(T) + ov(k)`` (``W``: the work; ``ov``: the least total overflow; the
argument for fewer than ``k`` blocks is the one of :mod:`~stagecut.mtpp.spectral`). ``comm_L``
does not grow with ``T``, so a bisection finds the largest such ``T``. Soundness rests on this
check alone: any ``L`` and any ``g`` give a valid bound, and poor ones only a weaker bound. The
eigenvalue is lowered by a margin that covers the eigensolver's round-off, and ``comm_L`` by a
relative ``1e-9`` of the magnitudes summed.

**The multipliers.** An alternating-direction method on the relaxation at a fixed ``T``: ``X``
projected on the semidefinite cone (one dense eigendecomposition), ``V`` on the rows' sets
above, ``L`` the multiplier of ``X = V`` (over-relaxed by 1.8, the penalty balanced between the
two residuals); ``T`` follows the best bound proven so far. Every :data:`CHECK_EVERY` steps the
current ``L`` is checked as above and the rows' tensor weights ``g`` are chosen again at ``V``;
the best bound is kept, and once it is above the floor the method stops when five checks in a
row raise it by less than ``1e-4`` (relative). The multipliers may differ in their last digits
with the linear-algebra library's threads, and so may the bound (each is sound).

What it adds to ``spectral``: the nonnegative entries. A partition matrix has no negative
entry, and without that constraint the relaxation (Donath and Hoffman's) can spread a block's
work over negative correlations; with it, on the 60-node REGAL Erdos-Renyi graph at ``k = 8``
(``T`` = 1,700) a conic solver's optimum sees half as much communication again as without (1,861
against 1,228). The tensors in the rows add most where blocks are small, a tensor being a larger
share of their cost: on the REGAL graphs at ``k = 8`` the bound rose 3.1 to 3.8% at 24 nodes,
1.5% at 60 and 100, 0.7% at 200 and 0.4% at 500 (Erdos-Renyi and Barabasi-Albert).

Cost: one ``eigh`` of the group count squared per step, and an ``eigvalsh`` and the rows' LPs
per check (until the bound stops rising, on the REGAL Erdos-Renyi graphs at ``k = 8``: 0.3 s of
CPU at 100 groups, 1 s at 200, 9 s at 500, about 60 s at 1,000; one BLAS thread); beyond
:data:`MAX_GROUPS` groups, or without time for :data:`MIN_STEPS` steps (estimated generously),
the level gives no more than its floor.

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

from stagecut.mtpp.combinatorial import CombinatorialBound
from stagecut.mtpp.model import MtppProblem, least_total_overflow
from stagecut.mtpp.model import lower_bound as simple_bound
from stagecut.mtpp.spectral import _EIGH_SLACK, _first_step, _laplacian, group_work, largest_refuted, tensor_groups

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


def _tensors(problem: MtppProblem, grp: list[int], index: dict[int, int]) -> list[tuple[npt.NDArray[np.int64], _Array]]:
    """The tensors that join two groups or more (:func:`~stagecut.mtpp.spectral.tensor_groups`), by
    their number of groups: each size's groups (one row per tensor) and costs."""
    by: dict[int, tuple[list[list[int]], list[float]]] = {}
    for c, e in tensor_groups(problem, grp, index):
        members, costs = by.setdefault(len(e), ([], []))
        members.append(e)
        costs.append(c)
    return [(np.array(m, dtype=np.int64), np.array(c)) for _, (m, c) in sorted(by.items())]


#: Entries within this of a tensor's largest (smallest) in a row share its weight ``p`` (``q``).
_TIE = 1e-6

#: Rows per chunk when the tensor weights are built (bounds the temporary arrays).
_CHUNK = 256


def _tensor_weights(v: _Array, tensors: list[tuple[npt.NDArray[np.int64], _Array]]) -> _Array:
    """``g`` (module docs) at the rows of ``v``: for each row and tensor, its cost spread evenly
    over the groups where the row is largest (``+``) and where it is smallest (``-``)."""
    n = len(v)
    g = np.zeros((n, n))
    for lo in range(0, n, _CHUNK):
        rows = v[lo:lo + _CHUNK]
        out = g[lo:lo + _CHUNK]
        at = np.arange(len(rows))[:, None, None]
        for members, costs in tensors:
            x = rows[:, members]  # rows x tensors x groups
            top = x >= x.max(axis=2, keepdims=True) - _TIE
            low = x <= x.min(axis=2, keepdims=True) + _TIE
            share = top / top.sum(axis=2, keepdims=True) - low / low.sum(axis=2, keepdims=True)
            np.add.at(out, (np.broadcast_to(at, x.shape), np.broadcast_to(members[None], x.shape)),
                      share * costs[None, :, None])
    return g


class _Rows:
    """The rows' LPs: ``min <L_i, v>`` over ``v_i = 1``, ``0 <= v <= 1``,
    ``sum_{j != i} a[i, j] v_j <= T - a[i, i]``, by their duals (module docs), for every ``T`` at
    once (the breakpoints sorted once)."""

    def __init__(self, lam: _Array, a: _Array, summed: float = 0.0) -> None:
        n = len(a)
        off = np.diag_indices(n)
        self.diag = np.diag(lam).copy()
        self.own = np.diag(a).copy()
        lv = lam.copy()
        lv[off] = 0.0
        av = a.copy()
        av[off] = 0.0
        self.lam, self.a = lv, av
        self.slope0 = (av * ((lv < 0) | ((lv == 0) & (av < 0)))).sum(axis=1)  # the dual's slope just above 0
        with np.errstate(divide="ignore", invalid="ignore"):  # (a term turns on or off at -L / a)
            kink = np.where(((lv < 0) & (av > 0)) | ((lv > 0) & (av < 0)), -lv / av, np.inf)
        order = np.argsort(kink, axis=1, kind="stable")
        self.kink = np.take_along_axis(kink, order, axis=1)
        drop = np.where(np.isfinite(self.kink), np.abs(np.take_along_axis(av, order, axis=1)), 0.0)
        self.after = self.slope0[:, None] - np.cumsum(drop, axis=1)  # the slope after each kink
        self.least_row = np.minimum(av, 0.0).sum(axis=1)  # the least a row's left side can be
        self.size = np.abs(av).sum(axis=1) + summed  # (what round-off in a row's weights scales with)
        self.mass = float(np.abs(lam).sum())

    def least(self, t: float) -> tuple[float, float]:
        """``sum_i min <L_i, v>`` at ``T = t`` (``inf`` when a row has no ``v``), and a margin for
        its round-off."""
        b = t - self.own
        if (self.least_row > b + 1e-12 * (np.abs(b) + self.size)).any():
            return math.inf, 0.0
        n = len(b)
        if n < 2:
            return float(self.diag.sum()), 0.0
        past = (self.after > b[:, None]).sum(axis=1)  # kinks after which the slope is still above b
        mu = np.where(self.slope0 <= b, 0.0, self.kink[np.arange(n), np.minimum(past, n - 1)])
        mu = np.where(np.isfinite(mu), mu, 0.0)
        bu = np.where(mu > 0, b, 0.0)  # (mu = 0 at an infinite T: no term of b)
        val = np.minimum(0.0, self.lam + mu[:, None] * self.a).sum(axis=1) - mu * bu
        margin = 1e-9 * (self.mass + float((mu * (self.size + np.abs(bu))).sum()))
        return math.fsum((self.diag + val).tolist()), margin


def _check(lam: _Array, c: _Array, const: float, a: _Array, need: float, k: int, floor: float,
           summed: float = 0.0) -> float:
    """The largest ``T >= floor`` the multipliers ``lam`` and row weights ``a`` prove below the
    optimum (module docs; ``summed``: the magnitudes summed into a row of ``a``, for its round-off)."""
    n = len(a)
    with np.errstate(over="ignore", invalid="ignore"):  # (a badly scaled graph: checked just below)
        m = c - 0.5 * (lam + lam.T)
        if not np.isfinite(m).all() or not np.isfinite(a).all():
            return floor
        mu = float(np.linalg.eigvalsh(m)[0]) - _EIGH_SLACK * n * float(np.linalg.norm(m))
    if not math.isfinite(mu) or not math.isfinite(const):
        return floor
    eig = n * min(0.0, mu)
    rows = _Rows(lam, a, summed)
    slack = 1e-9 * (abs(const) + abs(eig))

    def cost(t: float) -> float:
        least, margin = rows.least(t)
        comm = const + eig + least - slack - margin
        return (need + max(0.0, comm)) / k

    return largest_refuted(cost, floor)


def _project_rows(u: _Array, a: _Array, cap: _Array) -> _Array:
    """Each row of ``u`` nearly projected on ``v_i = 1``, ``0 <= v <= 1``,
    ``sum_{j != i} a[i, j] v_j <= cap_i`` (a bisection on the multiplier of the row; only the
    multipliers' quality depends on it, not the bound's soundness)."""
    n = len(a)
    off = np.diag_indices(n)
    av = a.copy()
    av[off] = 0.0
    v = np.clip(u, 0.0, 1.0)
    v[off] = 0.0
    over = np.einsum("ij,ij->i", v, av) > cap
    if over.any():
        sub, sa = u[over], av[over]
        mag = np.abs(sa)
        real = mag > 1e-9 * mag.max(axis=1, keepdims=True)  # (weights left by cancellation are round-off)
        step = np.where(real, mag, np.inf).min(axis=1)
        step = np.where(np.isfinite(step), step, 1.0)
        hi = (np.abs(sub).max(axis=1) + 1.0) / np.maximum(step, 1e-300) + 1.0
        lo = np.zeros(len(sub))
        idx = np.flatnonzero(over)
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            x = np.clip(sub - mid[:, None] * sa, 0.0, 1.0)
            x[np.arange(len(idx)), idx] = 0.0
            big = np.einsum("ij,ij->i", x, sa) > cap[over]
            lo = np.where(big, mid, lo)
            hi = np.where(big, hi, mid)
        v[over] = np.clip(sub - hi[:, None] * sa, 0.0, 1.0)
    v[off] = 1.0
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
    need = math.fsum(w.tolist()) + least_total_overflow(problem, params, k)
    const = math.fsum(adj[np.triu_indices(n, 1)].tolist())
    scale = float(np.abs(adj).max())
    c = -0.5 * adj / scale  # (the method works on scaled costs; the check on the real ones)
    tensors = _tensors(problem, grp, index)
    summed = float(np.abs(w).sum()) + 2.0 * math.fsum(float(cs.sum()) for _, cs in tensors)
    x = np.eye(n)
    v = np.eye(n)
    a = w[None, :] + _tensor_weights(v, tensors)
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
        v = _project_rows(xr + lam / sigma, a, t - np.diag(a))
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
            got = _check(-scale * lam, -0.5 * adj, const, a, need, k, best, summed)
            stalled = stalled + 1 if best > lo and got <= best * (1 + _STALL) else 0  # (once above the floor)
            if got > best:
                best = got
            t = max(t, best)
            a = w[None, :] + _tensor_weights(v, tensors)  # (the tensors' weights where the rows are now)
            if stalled >= _STALL_CHECKS:
                break  # (converged: the time is the next levels')
        last = max(last, time.monotonic() - began)  # (the longest step: one with a check)
    return CombinatorialBound(bound=best * (1 - 1e-12) if best > lo else lo, complete=complete, solves=solves)
