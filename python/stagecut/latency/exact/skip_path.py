"""The ``"skip-path"`` bound (see :mod:`stagecut.latency.exact.bounds`, which combines it with the
others): a run programme over a path's splits into runs on devices, where a skip edge or a detour
through nodes off the path that crosses a run boundary delays the run it reaches.

Each path's programme looks at the deadline (:func:`stagecut._deadline.deadline`) as it goes, inside
its loops: past it, the stretch gives no bound (0, which is one), so that a caller's time limit holds
without a watchdog.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np

from stagecut._deadline import expired
from stagecut.errors import InvalidArgumentError
from stagecut.latency.exact.paths import _runnable, _transfers, long_paths
from stagecut.latency.model.problem import LatencyProblem
from stagecut.validate import shown

__all__ = ["skip_path_bound", "SKIP_WORK", "EXCURSION", "REGION_WORK"]

#: The most steps (path length cubed over six, times the devices squared) :func:`skip_path_bound`
#: takes on one stretch of a path; a longer path is cut into stretches bounded alone.
SKIP_WORK = 4e7


def _kept_devices(problem: LatencyProblem) -> list[int]:
    """The devices the run programmes need: of each group of interchangeable devices the first two
    (consecutive runs need two different ones; which two does not change a bound)."""
    from stagecut.latency.exact.brute import symmetry_groups

    drop = {d for g in symmetry_groups(problem) for d in g[2:]}
    return [d for d in range(problem.num_devices) if d not in drop]


#: The longest run on a parallel device (the CPU pool) that :func:`skip_path_bound` accounts for
#: with the run before it (a skip edge over it crosses unless the runs on either side share a
#: device, and then their memory adds up).
EXCURSION = 3

#: The most nodes off the path that :func:`skip_path_bound` visits, per stretch of a path, to find
#: detours and windows (past it, the rest are left out: the bound only gets weaker).
REGION_WORK = 20000


def _region(problem: LatencyProblem, starts: Sequence[int], pos: dict[int, int], rank: dict[int, int],
            span: tuple[int, int], forward: bool, budget: list[int]) -> list[int] | None:
    """The nodes off the path reached from ``starts`` through nodes off the path (forward along
    edges, or backward), only those whose topological rank lies in ``span`` (the stretch's; no
    other can lie between two of its nodes), sorted in the direction of travel; ``None`` once
    ``budget`` (nodes visited, shared by the calls) is spent."""
    lo, hi = span
    seen = {x for x in starts if lo <= rank[x] <= hi}
    stack = list(seen)
    while stack:
        x = stack.pop()
        for w in problem.succ[x] if forward else problem.pred[x]:
            if w not in pos and w not in seen and lo <= rank[w] <= hi:
                seen.add(w)
                stack.append(w)
    budget[0] -= len(seen)
    if budget[0] < 0:
        return None
    return sorted(seen, key=rank.__getitem__, reverse=not forward)


def _regions(problem: LatencyProblem, path: Sequence[int], pos: dict[int, int], budget: list[int],
             forward: bool) -> Iterator[tuple[int, list[int]]]:
    """For each path position ``a`` (first to last going ``forward``, else last to first) whose
    node has neighbours off the path that way, ``(a, region)``: the :func:`_region` reached from
    them, within the stretch's ranks; stops once ``budget`` is spent."""
    rank = {v: i for i, v in enumerate(problem.order)}
    stretch = (rank[path[0]], rank[path[-1]])
    for a in range(len(path)) if forward else range(len(path) - 1, -1, -1):
        v = path[a]
        off = [w for w in (problem.succ[v] if forward else problem.pred[v]) if w not in pos]
        if not off:
            continue
        region = _region(problem, off, pos, rank, stretch, forward, budget)
        if region is None:
            return
        yield a, region


def _finish_from(problem: LatencyProblem, region: Sequence[int], v: int, dc: int, tr: np.ndarray,
                 t: np.ndarray) -> dict[int, np.ndarray]:
    """Per node ``x`` of ``region`` (in topological order, reached from ``v``), the least finish of
    ``x`` on each device when ``v`` finishes at 0 on device ``dc``: its inputs from ``v`` and from
    the region's nodes before it, each on its best device, the transfers paid."""
    nd = problem.num_devices
    src = np.full(nd, math.inf)
    src[dc] = 0.0
    fin: dict[int, np.ndarray] = {}
    for x in region:
        ready = np.full(nd, -math.inf)
        for u in problem.pred[x]:
            f = src if u == v else fin.get(u)
            if f is not None:
                ready = np.maximum(ready, (f[:, None] + tr[u]).min(axis=0))
        fin[x] = ready + t[x]
    return fin


def _detours(problem: LatencyProblem, path: Sequence[int], pos: dict[int, int], tr: np.ndarray, ok: np.ndarray,
             keep: np.ndarray) -> list[tuple[int, int, np.ndarray]]:
    """The detours of ``path``: for path positions ``a < b`` joined through nodes off the path,
    ``delay[c, e]``, the least time from ``a``'s finish on device ``keep[c]`` to when the detour's
    outputs can have reached ``b`` on ``keep[e]`` (the detour's nodes on any devices, each at its
    time there, the transfers paid, memory and device sharing ignored: a lower bound). A detour
    between two runs on different devices must cross somewhere."""
    t = np.where(ok, problem.times, math.inf)
    out: list[tuple[int, int, np.ndarray]] = []
    # the nodes off the path reached from each path node through nodes off the path
    for a, region in _regions(problem, path, pos, [REGION_WORK], True):
        ends = {pos[w] for x in region for w in problem.succ[x] if pos.get(w, -1) > a}
        if not ends:
            continue
        delays = {b: np.full((len(keep), len(keep)), -math.inf) for b in ends}
        for c, dc in enumerate(keep):
            fin = _finish_from(problem, region, path[a], int(dc), tr, t)
            for x in region:
                for w in problem.succ[x]:
                    b = pos.get(w, -1)
                    if b > a:
                        arrive = (fin[x][:, None] + tr[x][:, keep]).min(axis=0)
                        delays[b][c] = np.maximum(delays[b][c], arrive)
        for b, delay in delays.items():
            delay[np.arange(len(keep)), np.arange(len(keep))] = math.inf  # (never between consecutive runs)
            out.append((a, b, delay))
    return out


def _window_work(problem: LatencyProblem, path: Sequence[int], pos: dict[int, int], tr: np.ndarray, ok: np.ndarray,
                 keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The nodes off ``path`` that lie between two path nodes: for each such node ``x``, ``a``
    (the latest path position it descends from through nodes off the path), ``b`` (the earliest
    it leads to), ``off[x, c]`` (a lower bound on the time from ``path[a]``'s finish to
    ``path[b]``'s start when both run on ``keep[c]`` and ``x`` does not: the route through ``x``
    with its transfers, every other node on its best device) and ``work[x, c]`` (its time on
    ``keep[c]``, ``inf`` where it cannot run)."""
    nd = problem.num_devices
    t = np.where(ok, problem.times, math.inf)
    budget = [REGION_WORK]  # (shared by the two walks)
    head: dict[int, tuple[int, list[np.ndarray]]] = {}  # x -> (a, per kept c: finish of x on each device)
    for a, region in _regions(problem, path, pos, budget, True):
        fins = [_finish_from(problem, region, path[a], int(dc), tr, t) for dc in keep]
        for x in region:  # (the latest path ancestor wins: positions grow)
            head[x] = (a, [fin[x] for fin in fins])
    tail: dict[int, tuple[int, list[np.ndarray]]] = {}  # x -> (b, per kept c: least time from its finish)
    for b, region in _regions(problem, path, pos, budget, False):
        w0 = path[b]
        tails: list[dict[int, np.ndarray]] = []
        for dc in keep:
            rest: dict[int, np.ndarray] = {}
            for x in region:
                need = np.full(nd, -math.inf)
                for w in problem.succ[x]:
                    if w == w0:
                        need = np.maximum(need, tr[x][:, dc])
                    elif w in rest:
                        need = np.maximum(need, (tr[x] + (t[w] + rest[w])[None, :]).min(axis=1))
                rest[x] = need
            tails.append(rest)
        for x in region:  # (the earliest path descendant wins: positions fall)
            tail[x] = (b, [r[x] for r in tails])
    xs = [x for x in problem.order if x in head and x in tail and head[x][0] < tail[x][0]]
    a_of = np.array([head[x][0] for x in xs], dtype=np.int64)
    b_of = np.array([tail[x][0] for x in xs], dtype=np.int64)
    route = np.full((len(xs), len(keep)), math.inf)
    for i, x in enumerate(xs):
        for c, dc in enumerate(keep):
            via = head[x][1][c] + tail[x][1][c]
            via[dc] = math.inf  # (x is not on the window's device)
            route[i, c] = max(0.0, float(np.nanmin(np.where(np.isnan(via), math.inf, via))))
    work: np.ndarray = t[np.asarray(xs, dtype=np.int64)][:, keep] if xs else np.zeros((0, len(keep)))
    return a_of, b_of, route, work


def _skip_runs(problem: LatencyProblem, path: Sequence[int], tr: np.ndarray, ok: np.ndarray,
               devs: Sequence[int]) -> float:
    """The ``"skip-path"`` bound of one path (see the module docs) over the devices ``devs``.

    A run's finish is never taken below its start plus its nodes' times: ``last[h, j, c] >=
    first[h, c] + P[j + 1, c] - P[h, c]``. Sound: both are lower bounds over the same schedules
    (those with the run ``path[h..j]`` on ``c``), and ``path[h..j]`` is a chain of dependences on
    ``c``, so ``path[j]`` finishes at least those times after ``path[h]`` starts, on any device.
    It is what charging the path's own edges (``path[a] -> path[a + 1]``) as skip edges would add
    (``first`` can exceed the arrival a short run on the CPU pool is ended from, which the run's
    finish is otherwise computed from), and more, without spending :data:`SKIP_WORK` on them (on
    a stretch of full length the ``m - 1`` path edges alone would cost that whole budget and push
    the real skip edges out)."""
    m = len(path)
    if not m or expired():  # (past a deadline: no bound from this stretch, 0 is one)
        return 0.0
    idx = np.asarray(path, dtype=np.int64)
    keep = np.asarray(devs, dtype=np.int64)
    nd = len(keep)
    can = ok[idx][:, keep]
    t = np.where(can, problem.times[idx][:, keep], 0.0)
    P = np.vstack([np.zeros(nd), np.cumsum(t, axis=0)])  # P[j, c]: time of path[:j] on device c
    M = np.concatenate([[0.0], np.cumsum(problem.memory[idx])])
    bad = np.vstack([np.zeros(nd), np.cumsum(~can, axis=0)])
    cap = problem.capacity[keep] * (1 + 1e-12)
    trc = tr[idx][:, keep][:, :, keep]  # trc[k, c, e]: path[k]'s output from c to e
    trc[:, np.arange(nd), np.arange(nd)] = math.inf  # consecutive runs sit on different devices
    pos = {v: k for k, v in enumerate(path)}
    skips = [(a, pos[w], trc[a]) for a, v in enumerate(path) for w in problem.succ[v] if pos.get(w, -1) > a + 1]
    skips += _detours(problem, path, pos, tr, ok, keep)
    # each skip costs work at every boundary it crosses: the shortest first, within SKIP_WORK
    hs = np.arange(m + 1, dtype=float)
    at = np.concatenate([[0.0], np.cumsum(hs[1:m] * (m - hs[1:m]))]) * nd * nd  # at[h]: boundaries 1..h
    spent, kept = 0.0, []
    for a, b, delay in sorted(skips, key=lambda x: x[1] - x[0]):
        spent += float(at[b] - at[a])
        if spent > SKIP_WORK:
            break
        kept.append((a, b, delay))
    skips = kept
    # first[h, c]: a lower bound on when a run starting at path[h] on c starts;
    # last[h, j, c]: one on when the run path[h..j] on c finishes (inf: it does not fit)
    first = np.full((m, nd), math.inf)
    last = np.full((m, m, nd), math.inf)

    def fits(h: int) -> np.ndarray:  # (runs path[h..j] for j >= h, devices)
        j = np.arange(h, m)
        out: np.ndarray = ((M[j + 1] - M[h])[:, None] <= cap[None, :]) & (bad[j + 1] == bad[h][None, :])
        return out

    first[0] = 0.0
    own = problem.memory[idx]
    xa, xb, xoff, xwork = _window_work(problem, path, pos, tr, ok, keep)
    serial = ~problem.parallel[keep]

    def span(h: int) -> np.ndarray:
        """(this device, J): a lower bound on a run's span from its first node's start to its
        last node's finish: its path nodes, and each node off the path whose window lies inside
        the run, either on the run's device (its work added: the device runs one node at a
        time) or not (its route must leave the device and come back)."""
        J = np.arange(h, m)
        base = (P[J + 1] - P[h]).T  # (c, J)
        out: np.ndarray = base.copy()
        inside = xa >= h
        if not inside.any():
            return out
        a, b, off, work = xa[inside], xb[inside], xoff[inside], xwork[inside]
        for c in np.flatnonzero(serial):
            r = P[a + 1, c] - P[h, c] + off[:, c] - P[b, c]  # q = r + P[J + 1, c]
            k = np.argsort(-r, kind="stable")
            r, bk, wk = r[k], b[k], work[k, c]
            valid = bk[:, None] <= J[None, :]  # (x, J): the window ends in the run
            w = np.where(valid, wk[:, None], 0.0)
            before = np.vstack([np.zeros(len(J)), np.cumsum(w, axis=0)[:-1]])  # work of those above
            q = r[:, None] + P[J + 1, c][None, :]
            cand = np.where(valid, np.maximum(q, base[c][None, :] + before), math.inf)
            every = base[c] + w.sum(axis=0)  # (all on the device)
            out[c] = np.maximum(base[c], np.minimum(cand.min(axis=0), every))
        return out

    par = problem.parallel[keep]

    def excursions(h: int, end: np.ndarray, sp: np.ndarray) -> np.ndarray:
        """(this device, J): the least end of a run path[h..j] whose run before, path[g..h - 1]
        (``g >= 1``, at most :data:`EXCURSION` nodes), sits on a parallel device: with the run
        before that one, path[f..g - 1] on its device, known, a skip edge from it crosses unless
        that run is on this run's device, and then the two runs' memory must fit on it together.
        Those entries of ``end`` are set to inf (this replaces them)."""
        out = np.full((nd, m - h), math.inf)
        if h < 2 or not par.any():
            return out
        ok_run = fits(h)  # (runs that fit somewhere: a prefix, memory only grows)
        reach = int(ok_run[:, ~par].any(axis=1).sum()) if (~par).any() else 0
        J = np.arange(h, h + reach)
        sp = sp[:, :reach]
        for g in range(max(1, h - EXCURSION), h):
            for c1 in np.flatnonzero(par):
                end[g, c1] = math.inf
                f = np.arange(g)
                into = last[f, g - 1] + trc[g - 1][:, c1][None, :]  # (f, device 2 before): path[g] starts
                arrive = (into + P[h, c1] - P[g, c1])[:, :, None] + trc[h - 1][c1][None, None, :]  # (f, c2, c)
                ends = arrive[:, :, :, None] + sp[None, None, :, :]  # (f, c2, c, J)
                for a, b, delay in skips:
                    if not a < h <= b:
                        continue
                    later = (P[J + 1] - P[b][None, :]).T  # (c, J)
                    if a >= g:  # from the parallel run
                        sent = into[:, :, None] + P[a + 1, c1] - P[g, c1] + delay[c1][None, None, :]
                    else:  # from the run before it, or earlier (then as before)
                        sent = first[f][:, :, None] + (P[a + 1][None, :] - P[f])[:, :, None] + delay[None, :, :]
                        sent[:, np.arange(nd), np.arange(nd)] = -math.inf  # (one device: no crossing)
                        sent = np.where((f <= a)[:, None, None], sent, -math.inf)
                        far = done[a] + delay.min(axis=0)
                        apart = (M[J + 1] - M[h])[:, None] + own[a] > cap[None, :]
                        far_end = np.where((J >= b)[:, None] & apart, far[None, :] + later.T, -math.inf).T
                        ends = np.maximum(ends, np.where((f > a)[:, None, None, None], far_end[None, None], -math.inf))
                    term = sent[:, :, :, None] + later[None, None, :, :]
                    ends = np.maximum(ends, np.where(J >= b, term, -math.inf))
                # the runs on either side on one device: their memory together
                both = (M[g] - M[f])[:, None] + (M[J + 1] - M[h])[None, :]  # (f, J)
                for c in range(nd):
                    ends[:, c, c] = np.where(both > cap[c], math.inf, ends[:, c, c])
                out[:, :reach] = np.minimum(out[:, :reach], ends.min(axis=(0, 1)))
        return out

    last[0] = np.where(fits(0), span(0).T, math.inf)
    done = last[0].min(axis=1)  # done[k]: a lower bound on when path[k] finishes (any runs)
    for h in range(1, m):
        if expired():  # (past a deadline: no bound from this stretch, 0 is one)
            return 0.0
        g = np.arange(h)  # the run before starts at path[g] and ends at path[h - 1]
        J = np.arange(h, m)  # this run ends at path[j]
        arrive = last[g, h - 1][:, :, None] + trc[h - 1][None, :, :]  # (g, its device, this device)
        start = arrive
        sp = span(h)
        end = arrive[:, :, :, None] + sp[None, None, :, :]
        for a, b, delay in skips:
            if not a < h <= b:
                continue
            # b cannot start before a (in the run before, started no earlier than first) has sent its output
            near = first[g][:, :, None] + (P[a + 1][None, :] - P[g])[:, :, None] + delay[None, :, :]
            sent = np.where((g <= a)[:, None, None], near, -math.inf)
            # a in an earlier run: on another device than this run (it crosses) when the two do not
            # fit together
            far = done[a] + delay.min(axis=0)  # (this device)
            apart = (M[J + 1] - M[h])[:, None] + own[a] > cap[None, :]  # (J, this device)
            far_end = np.where((J >= b)[:, None] & apart, far[None, :] + P[J + 1] - P[b][None, :], -math.inf)
            end = np.maximum(end, np.where((g > a)[:, None, None, None], far_end.T[None, None, :, :], -math.inf))
            if b == h:
                start = np.maximum(start, sent)
                start = np.maximum(start, np.where((g > a)[:, None, None] & apart[0][None, None, :], far[None, None, :],
                                                   -math.inf))
            term = sent[:, :, :, None] + (P[J + 1] - P[b][None, :]).T[None, None, :, :]
            end = np.maximum(end, np.where(J >= b, term, -math.inf))  # (only runs that reach b)
        first[h] = start.min(axis=(0, 1))
        best = excursions(h, end, sp)  # (short runs on a parallel device in between: their own account)
        flat = end.reshape(h * nd, nd, m - h)
        last[h, h:] = np.where(fits(h), np.minimum(flat.min(axis=0), best).T, math.inf)
        last[h, h:] = np.maximum(last[h, h:], first[h][None, :] + P[h + 1:] - P[h])  # (see the docs)
        done[h:] = np.minimum(done[h:], last[h, h:].min(axis=1))
    return float(last[:, m - 1].min())


def skip_path_bound(problem: LatencyProblem, paths: Sequence[Sequence[int]] | None = None,
                    tr: np.ndarray | None = None, *, whole_only: bool = False) -> float:
    """The ``"skip-path"`` bound of the module docs over ``paths`` (default :func:`long_paths`): a
    path too long for :data:`SKIP_WORK` is cut into stretches bounded alone (their sum), or left
    out with ``whole_only`` (0 when every path is).

    >>> import stagecut as sc
    >>> from stagecut.latency import Devices, LatencyProblem
    >>> from stagecut.latency.exact.bounds import memory_path_bound
    >>> # a -> b -> c with a skip a -> c; accelerators hold two nodes, a's output is large
    >>> nodes = [sc.Node(v, {"accelerator": 1.0, "cpu": 10.0}, memory=1.0, comm=c)
    ...          for v, c in zip("abc", (8.0, 1.0, 1.0))]
    >>> p = LatencyProblem(sc.Graph(nodes, [("a", "b"), ("b", "c"), ("a", "c")]), Devices.pcie_star(2, memory=2.0))
    >>> memory_path_bound(p), skip_path_bound(p)   # a cut after b waits for a's output (1 + 8 / 0.5 + 1)
    (5.0, 18.0)

    Raises
    ------
    InvalidArgumentError
        A path that is not one.
    """

    tr = _transfers(problem) if tr is None else tr
    ok = _runnable(problem)
    devs = _kept_devices(problem)
    step = max(2, int((6 * SKIP_WORK / max(1, len(devs)) ** 2) ** (1 / 3)))
    best = 0.0
    for path in long_paths(problem) if paths is None else paths:
        path = list(path)
        for a, b in zip(path, path[1:]):
            if not (0 <= a < len(problem)) or b not in problem.succ[a]:
                raise InvalidArgumentError(f"paths: {shown(a)} -> {shown(b)} is not an edge")
        if whole_only and len(path) > step:
            continue
        value = 0.0
        for k in range(0, len(path), step):  # (stretches of a long path, each bounded alone)
            if k and expired():
                break
            value += _skip_runs(problem, path[k:k + step], tr, ok, devs)
        best = max(best, value)
    return best
