"""The build of QuickP's IP (the formulation is in :mod:`stagecut.latency.quickp.ip`, whose
:func:`~stagecut.latency.quickp.ip.solve_ip` solves the model built here and reads the schedule
back).

:func:`build_ip` makes the variables and rows for one problem: ``x[k, d]`` per unit and allowed
device, ``S[v]`` per node bounded by its head and latest start, the makespan ``C``, the
symmetry-breaking running counts of interchangeable devices, and the ``y`` order variables of the
pairs whose windows can meet on a device; the rows go through one
:class:`~stagecut.latency.exact.milp_build.RowSink`. The caller's ``check`` runs between steps
(and while the rows are handed to the solver) and stops the build by raising.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from stagecut._mip import MODEL_TOL, data_gap, import_mip, new_model, reference_scale
from stagecut.latency.exact.milp_build import RowSink
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.quickp.edge_schedules import Order, _interchangeable, _trivial_upper, _Units

__all__ = ["BuiltIP", "build_ip"]


@dataclasses.dataclass
class BuiltIP:
    """QuickP's IP as built, with what reading its answer back needs.

    ``upper``: the makespan bound ``U`` in the problem's units (``U`` itself is in model units,
    ``scale`` of them per model unit, with its tolerance); ``allowed[k]``: the devices of unit ``k``;
    ``ok[k, d]``: unit ``k`` may go on device ``d``; ``pv[v, d]``: node ``v``'s time on ``d`` in
    model units (0 where not allowed); ``head``/``late``: each node's earliest and latest start;
    ``x``, ``S``, ``C``, ``y``: the variables; ``running``: per pair of interchangeable devices
    ``(previous, current, counts)``; ``classes``: the interchangeable devices; ``pairs``: the node
    pairs given ``y`` rows."""

    model: Any
    upper: float
    scale: float
    U: float
    allowed: list[list[int]]
    ok: np.ndarray
    pv: np.ndarray
    head: np.ndarray
    late: np.ndarray
    x: dict[tuple[int, int], Any]
    S: list[Any]
    C: Any
    y: dict[tuple[int, int], Any]
    running: list[tuple[int, int, list[Any]]]
    classes: list[list[int]]
    pairs: int


def build_ip(problem: LatencyProblem, units: _Units, w: Mapping[tuple[int, int], float],
             start: tuple[list[int], list[list[int]], float] | None, order: Order, solver: str,
             threads: int | None, gap: float | None, related: np.ndarray,
             check: Callable[[], None]) -> BuiltIP | None:
    """QuickP's IP for ``problem`` (``related[u, v]``: a path joins ``u`` and ``v``, either way),
    or ``None`` when a unit fits on no device. ``check`` is called between steps; what it raises
    stops the build."""
    upper = start[2] if start is not None else _trivial_upper(problem, w)
    mip = import_mip()
    n, nd = len(problem), problem.num_devices
    scale = reference_scale([upper], upper)
    U = upper / scale * (1 + 1e-6) + MODEL_TOL
    p = problem.times / scale
    allowed = units.allowed(problem, upper * (1 + 1e-6))
    if any(not a for a in allowed):
        return None
    nk = len(units.members)
    ok = np.zeros((nk, nd), dtype=bool)     # ok[k, d]: unit k may go on device d
    for k, a in enumerate(allowed):
        ok[k, a] = True
    of = np.asarray(units.of, dtype=np.int64)
    okv = ok[of]                            # per node
    pv = np.where(okv, p, 0.0)              # p[v, d] where allowed, else 0 (no NaN or inf in a row)
    values = pv[okv].tolist()
    m = new_model("quickp", solver=solver, gap=gap if gap is not None else data_gap(values, 1.0), threads=threads)
    # variables: x[k, d] binary where allowed, S[v] (bounded by head and tail), C
    xv = m.vars.add_vars(int(ok.sum()), name="x", var_type=mip.BINARY)
    X = np.full((nk, nd), -1, dtype=np.int64)
    X[ok] = [var.idx for var in xv]
    x = {(int(k), int(d)): var for (k, d), var in zip(np.argwhere(ok).tolist(), xv)}
    # head: longest path into v, tail: longest path from v to a sink (fastest times, no transfers)
    fastest = np.where(okv, p, math.inf).min(axis=1)
    head, tail = np.zeros(n), np.zeros(n)
    for v in problem.order:
        head[v] = max((head[u] + fastest[u] for u in problem.pred[v]), default=0.0)
    for v in reversed(problem.order):
        tail[v] = fastest[v] + max((tail[s] for s in problem.succ[v]), default=0.0)
    late = np.maximum(head, U - tail)       # the latest start of each node
    S = m.vars.add_vars(n, name="S")
    for v, var in enumerate(S):
        var.lb, var.ub = float(head[v]), float(late[v])
    Sx = np.array([var.idx for var in S], dtype=np.int64)
    C = m.add_var(lb=problem.lower_bound() / scale * (1 - 1e-9), ub=U)
    m.objective = mip.minimize(C)
    Cx = C.idx
    rows = RowSink()
    # assignment, one row per unit
    for k, a in enumerate(allowed):
        rows.add(X[k, a].tolist(), [1.0] * len(a), "=", 1.0)
    # makespan: C >= S[v] + run(v) + the longest path after v
    for v in range(n):
        a = allowed[units.of[v]]
        rows.add([Cx, int(Sx[v])] + X[units.of[v], a].tolist(), [1.0, -1.0] + (-pv[v, a]).tolist(), ">",
                 float(tail[v] - fastest[v]))
    unit_time = np.zeros((nk, nd))          # each unit's total time per device
    np.add.at(unit_time, of, pv)
    unit_mem = np.zeros(nk)
    np.add.at(unit_mem, of, np.asarray(problem.memory, dtype=float))
    for d in range(nd):
        on = np.flatnonzero(ok[:, d])
        if math.isfinite(problem.capacity[d]):
            keep = on[unit_mem[on] != 0]
            if len(keep):
                rows.add(X[keep, d].tolist(), unit_mem[keep].tolist(), "<", float(problem.capacity[d]))
        if not problem.parallel[d] and len(on):   # each device's busy time is at most C
            rows.add(X[on, d].tolist() + [Cx], unit_time[on, d].tolist() + [-1.0], "<", 0.0)
    classes = _interchangeable(problem)
    # devices of a class used in the order of their first unit: x[k, g[j]] <= sum_{q < k} x[q, g[j - 1]],
    # the sum kept in a running variable (z[k] = z[k - 1] + x[k - 1, g[j - 1]]): O(units) entries, not O(units^2)
    running: list[tuple[int, int, list[Any]]] = []
    for g in classes:
        for j in range(1, len(g)):
            prev, cur = g[j - 1], g[j]
            z = m.vars.add_vars(nk, name=f"z{cur}", ub=float(nk))
            z[0].ub = 0.0
            running.append((prev, cur, z))
            for k in range(nk):
                if k:
                    idx, val = [z[k].idx, z[k - 1].idx], [1.0, -1.0]
                    if ok[k - 1, prev]:
                        idx.append(int(X[k - 1, prev]))
                        val.append(-1.0)
                    rows.add(idx, val, "=", 0.0)
                if ok[k, cur]:
                    if k:
                        rows.add([int(X[k, cur]), z[k].idx], [1.0, -1.0], "<", 0.0)
                    else:
                        x[k, cur].ub = 0.0
        check()
    bw = problem.bandwidth
    check()
    # precedence, the transfer only across devices: for each device b of v,
    # S[v] >= S[u] + run(u) + sum_{a != b} size / bw[a, b] x[ku, a] - big_b (1 - x[kv, b])
    for e, ((u, v), size) in enumerate(w.items()):
        if not e % 256:
            check()
        ku, kv = units.of[u], units.of[v]
        au = allowed[ku]
        iu = [int(Sx[v]), int(Sx[u])] + X[ku, au].tolist()
        run_u = (-pv[u, au]).tolist()
        tr = {b: [size / bw[a, b] / scale if a != b else 0.0 for a in au] for b in allowed[kv]} \
            if ku != kv and size else {}
        if not tr or max(max(t) for t in tr.values()) == 0:
            rows.add(iu, [1.0, -1.0] + run_u, ">", 0.0)
            continue
        for b, t in tr.items():
            big = max(t)
            if big == 0:
                rows.add(iu, [1.0, -1.0] + run_u, ">", 0.0)
            else:
                rows.add(iu + [int(X[kv, b])], [1.0, -1.0] + [r - c for r, c in zip(run_u, t)] + [-big], ">",
                         -big)
    check()
    rank_of = np.asarray(units.rank, dtype=np.int64)
    us, vs = np.nonzero(~related & (rank_of[:, None] < rank_of[None, :]))
    same = of[us] == of[vs]
    # two members of a group that the DAG leaves unordered: along the topological order
    for u, v in zip(us[same].tolist(), vs[same].tolist()):
        a = allowed[units.of[u]]
        rows.add([int(Sx[v]), int(Sx[u])] + X[units.of[u], a].tolist(), [1.0, -1.0] + (-pv[u, a]).tolist(), ">", 0.0)
    us, vs = us[~same], vs[~same]
    ku, kv = of[us], of[vs]
    # non-overlap on the devices without parallelism, for the pairs whose windows can meet on a
    # device both can use (when u on d ends by v's earliest start, or the other way round, in
    # every schedule of makespan at most U, the pair needs no row)
    cand = []
    for d in np.flatnonzero(~problem.parallel).tolist():
        both = ok[ku, d] & ok[kv, d]
        apart = late[us] + pv[us, d] <= head[vs]   # u before v in every such schedule: the row holds
        if order == "free":   # (with a fixed topological order the other way round is a restriction)
            apart |= late[vs] + pv[vs, d] <= head[us]
        cand.append((d, np.flatnonzero(both & ~apart)))
        check()
    used = np.unique(np.concatenate([c for _, c in cand])) if cand else np.zeros(0, dtype=np.int64)
    y: dict[tuple[int, int], Any] = {}
    Y = np.full(len(us), -1, dtype=np.int64)
    if order == "free" and len(used):
        yv = m.vars.add_vars(len(used), name="y", var_type=mip.BINARY)
        Y[used] = [var.idx for var in yv]
        y = {(int(us[i]), int(vs[i])): var for i, var in zip(used.tolist(), yv)}
    for d, pick in cand:
        u, v = us[pick], vs[pick]
        pu, pvd = pv[u, d], pv[v, d]
        # void unless active: S[u] <= U - tail[u] and S[v] >= head[v]
        muv = np.maximum(0.0, U - tail[u] + pu - head[v])
        one = np.ones_like(pu)
        if order == "free":
            mvu = np.maximum(0.0, U - tail[v] + pvd - head[u])
            pair = np.stack([Sx[v], Sx[u], Y[pick], X[ku[pick], d], X[kv[pick], d]], axis=1)
            # S[v] >= S[u] + p[u, d] - muv (3 - y - x[ku, d] - x[kv, d])
            rows.add_block(pair, np.stack([one, -one, -muv, -muv, -muv], axis=1), ">", pu - 3 * muv)
            # S[u] >= S[v] + p[v, d] - mvu (2 + y - x[ku, d] - x[kv, d])
            rows.add_block(pair, np.stack([-one, one, mvu, -mvu, -mvu], axis=1), ">", pvd - 2 * mvu)
        else:
            pair = np.stack([Sx[v], Sx[u], X[ku[pick], d], X[kv[pick], d]], axis=1)
            # S[v] >= S[u] + p[u, d] - muv (2 - x[ku, d] - x[kv, d])
            rows.add_block(pair, np.stack([one, -one, -muv, -muv], axis=1), ">", pu - 2 * muv)
        check()
    check()
    rows.flush(m, check)
    return BuiltIP(model=m, upper=upper, scale=scale, U=U, allowed=allowed, ok=ok, pv=pv, head=head, late=late,
                   x=x, S=S, C=C, y=y, running=running, classes=classes, pairs=len(used))
