"""Exact min-max split of a list of per-layer costs into contiguous pipeline stages.

:func:`balance` returns torchgpipe's ``balance=`` (layers per stage); DeepSpeed's ``parts`` are
its prefix sums (:func:`stagecut.frontends.export.balance_to_parts`).

The load model is stagecut's chain model (what ``stagecut.partition(Graph.chain(costs,
comm=comm), devices=k)`` computes for a block of consecutive layers ``a..b`` of ``n``):

* the sum of the block's costs, plus
* ``comm[b]`` unless the block is the last one (``b == n - 1``): the tensor it sends, plus
* ``comm[a - 1]`` unless the block is the first one (``a == 0``): the tensor it receives.

``comm[n - 1]`` (the model's output) is never counted. Sums are taken as differences of prefix
sums, so with integer-valued costs the loads are exact.

Without ``comm``, an optimal split is found by bisecting the threshold over the bit patterns of
the non-negative floats (at most 64 probes), each probe a greedy that fills every stage as far
as the threshold (and the memory capacity) allows, with a binary search on the prefix sums:
``O(64 k log n)`` in all. With ``comm``, splitting a stage adds communication to both sides, so
the greedy is no longer exact; a dynamic program over (stages, last layer) is used instead.
Its stages are limited to those whose compute sum is at most the load of the optimal split
without ``comm`` re-scored with it (an upper bound on the optimum, so no optimal stage is
lost): about ``n / k`` lengths per last layer, done as numpy operations on a (length x last
layer) matrix, ``O(n^2)`` work in all; above ``2**22`` matrix entries, the same DP runs in
plain loops pruned the same way.
"""

from __future__ import annotations

import bisect
import math
import struct
from collections.abc import Sequence

import numpy as np

from stagecut.errors import InvalidArgumentError
from stagecut.validate import check_int, check_number

__all__ = ["balance"]

_MATRIX_LIMIT = 1 << 22  # entries of the (stage length x last layer) load matrix; above: plain loops


def _values(x: object, what: str, n: int | None) -> list[float]:
    if isinstance(x, (str, bytes)) or not hasattr(x, "__len__") or not hasattr(x, "__iter__"):
        raise InvalidArgumentError(f"{what}: expected a sequence of per-layer numbers, got {type(x).__name__}")
    values = [check_number(v, f"{what}[{i}]", error=InvalidArgumentError) for i, v in enumerate(x)]
    if n is not None and len(values) != n:
        raise InvalidArgumentError(f"{what}: expected {n} values (one per layer), got {len(values)}")
    return values


def _prefix(values: Sequence[float]) -> list[float]:
    p = [0.0]
    for v in values:
        p.append(p[-1] + v)
    return p


def _bits(x: float) -> int:
    return int(struct.unpack("<q", struct.pack("<d", x))[0])


def _float(i: int) -> float:
    return float(struct.unpack("<d", struct.pack("<q", i))[0])


def _greedy(p: list[float], mp: list[float] | None, cap: float, t: float, k: int) -> list[int] | None:
    """Stage ends (exclusive) of the greedy split with loads <= ``t``; None if it needs > k stages."""
    n = len(p) - 1
    ends: list[int] = []
    a = 0
    while a < n:
        if len(ends) == k:
            return None
        pa = p[a]
        e = bisect.bisect_right(p, t, lo=a, hi=n + 1, key=lambda x: x - pa) - 1
        if mp is not None:
            ma = mp[a]
            e = min(e, bisect.bisect_right(mp, cap, lo=a, hi=n + 1, key=lambda x: x - ma) - 1)
        if e <= a:
            return None
        ends.append(e)
        a = e
    return ends


def _fill(ends: list[int], m: int) -> list[int]:
    """Split stages (peeling off their last layer) until there are ``m``: never raises a load
    when costs and memory are non-negative and there is no communication."""
    ends = list(ends)
    while len(ends) < m:
        start = 0
        for i, e in enumerate(ends):
            if e - start >= 2:
                ends.insert(i, e - 1)
                break
            start = e
    return ends


def _no_comm(c: list[float], k: int, mp: list[float] | None, cap: float, fill: bool) -> list[int]:
    p = _prefix(c)
    n = len(c)
    if _greedy(p, mp, cap, math.inf, k) is None:
        raise InvalidArgumentError(f"capacity: no split of the {n} layers into at most {k} stages fits "
                                   f"{cap} per stage (a layer's memory, or the total over {k} stages, exceeds it)")
    lo, hi = -1, _bits(max(p[-1], 0.0))  # probe(lo) infeasible (sentinel), probe(hi) feasible
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _greedy(p, mp, cap, _float(mid), k) is None:
            lo = mid
        else:
            hi = mid
    ends = _greedy(p, mp, cap, _float(hi), k)
    assert ends is not None
    return _fill(ends, min(k, n)) if fill else ends


def _comm_load(c: list[float], comm: list[float], ends: list[int]) -> float:
    p = _prefix(c)
    n, worst, a = len(c), 0.0, 0
    for e in ends:
        x = (p[e] - p[a]) + (comm[e - 1] if e < n else 0.0) + (comm[a - 1] if a > 0 else 0.0)
        worst = max(worst, x)
        a = e
    return worst


def _with_comm_loops(c: list[float], comm: list[float], k: int, mp: list[float] | None, cap: float,
               fill: bool) -> list[int]:
    """The same DP in plain loops, pruned by the compute sum (when the matrix would be too large)."""
    n = len(c)
    p = _prefix(c)
    m = min(k, n)
    inf = math.inf
    # d[j][b]: best max load of layers 0..b in exactly j stages; arg[j][b]: first layer of stage j
    d = [[inf] * n for _ in range(m + 1)]
    arg = [[-1] * n for _ in range(m + 1)]
    for b in range(n):
        if mp is not None and mp[b + 1] > cap:
            break
        d[1][b] = p[b + 1] + (comm[b] if b < n - 1 else 0.0)
        arg[1][b] = 0
    for j in range(2, m + 1):
        prev, row, arow = d[j - 1], d[j], arg[j]
        for b in range(j - 1, n):
            send = comm[b] if b < n - 1 else 0.0
            end = p[b + 1]
            best, where = inf, -1
            for a in range(b, j - 2, -1):
                compute = end - p[a]
                if compute >= best or (mp is not None and mp[b + 1] - mp[a] > cap):
                    break
                q = prev[a - 1]
                if q >= best:
                    continue
                load = compute + send + comm[a - 1]
                v = load if load > q else q
                if v < best:
                    best, where = v, a
            row[b], arow[b] = best, where
    if fill:
        j = m
    else:
        j = min(range(1, m + 1), key=lambda s: (d[s][n - 1], s))  # ties: the fewest stages
    if d[j][n - 1] == inf:
        raise InvalidArgumentError(f"capacity: no split of the {n} layers into {'exactly' if fill else 'at most'} "
                                   f"{j if fill else k} stages fits {cap} per stage")
    ends = []
    b = n - 1
    while j > 0:
        ends.append(b + 1)
        b = arg[j][b] - 1
        j -= 1
    return ends[::-1]


def _with_comm(c: list[float], comm: list[float], k: int, mp: list[float] | None, cap: float,
               fill: bool) -> list[int]:
    n = len(c)
    m = min(k, n)
    # An upper bound: the optimal split without comm (exactly m stages, memory respected), with
    # comm. No stage of an optimal split has a compute sum above it, which bounds the stage
    # lengths the DP has to try (``w``: about n / k, not n).
    ub = _comm_load(c, comm, _no_comm(c, k, mp, cap, True))
    p = np.asarray(_prefix(c))
    first = np.searchsorted(p, p[1:] - ub, side="left")  # first start a with p[b+1] - p[a] <= ub
    w = min(n - 1, int(np.max(np.arange(n) - first)) + 2)  # +2: slack against rounding
    if (w + 1) * n > _MATRIX_LIMIT:
        return _with_comm_loops(c, comm, k, mp, cap, fill)
    send = np.asarray([*comm[:-1], 0.0])  # send[b]: stage ending at layer b (the last sends nothing)
    recv = np.asarray([0.0, *comm[:-1]])  # recv[a]: stage starting at layer a (the first receives nothing)
    b = np.arange(n)
    d = np.arange(w + 1)[:, None]
    a = b[None, :] - d  # load[d, b]: the stage a = b - d .. b
    ok = a >= 0
    a0 = np.where(ok, a, 0)
    load = (p[b + 1][None, :] - p[a0]) + send[None, :] + recv[a0]
    if mp is not None:
        mpa = np.asarray(mp)
        ok &= (mpa[b + 1][None, :] - mpa[a0]) <= cap
    load[~ok] = np.inf
    # best[j - 1][b]: the least largest load of layers 0..b in exactly j stages (inf: none <= ub)
    row = np.full(n, np.inf)
    row[: w + 1] = load[b[: w + 1], b[: w + 1]]  # one stage 0..b
    rows, args = [row], [np.full(n, -1)]
    for _ in range(2, m + 1):
        prev = np.concatenate(([np.inf], rows[-1]))  # prev[a]: the earlier stages cover 0..a-1
        cand = np.maximum(prev[a0], load)  # a = 0 or invalid: prev[0] = inf
        cand[~ok] = np.inf
        arg = np.argmin(cand, axis=0)  # the first minimum: the shortest last stage
        rows.append(cand[arg, b])
        args.append(arg)
    if fill:
        j = m
    else:
        j = min(range(1, m + 1), key=lambda s: (float(rows[s - 1][n - 1]), s))  # ties: the fewest stages
    if not np.isfinite(rows[j - 1][n - 1]):
        raise InvalidArgumentError(f"capacity: no split of the {n} layers into {'exactly' if fill else 'at most'} "
                                   f"{j if fill else k} stages fits {cap} per stage")
    ends = []
    e = n - 1
    while j > 1:
        ends.append(e + 1)
        e -= int(args[j - 1][e]) + 1
        j -= 1
    ends.append(e + 1)
    return ends[::-1]


def balance(costs: Sequence[float], k: int, *, comm: Sequence[float] | None = None,
            memory: Sequence[float] | None = None, capacity: float | None = None,
            fill: bool = True) -> list[int]:
    """Layers per stage of a split of ``costs`` into contiguous stages minimising the largest
    stage load (exact min-max, not DeepSpeed's min-spread).

    The load of a stage is the sum of its layers' costs, plus, with ``comm``, the transfer of
    the tensor it sends (``comm`` of its last layer, except for the last stage) and of the one
    it receives (``comm`` of the layer before its first, except for the first stage): the load
    of a block in ``stagecut.partition(Graph.chain(costs, comm=comm), devices=k)``.

    Parameters
    ----------
    costs : sequence of float
        Per-layer times (non-negative, at least one layer).
    k : int
        Stages (devices), at least 1.
    comm : sequence of float, optional
        Per-layer time to transfer the layer's output to the next stage (``len(costs)`` values).
    memory : sequence of float, optional
        Per-layer memory (bytes); needs ``capacity``.
    capacity : float, optional
        Memory per stage; every stage's memory sum must be at most this. Needs ``memory``.
    fill : bool
        ``True`` (default): exactly ``min(k, len(costs))`` stages, each with at least one layer
        (torchgpipe and DeepSpeed want one entry per device). Without ``comm`` this never costs
        anything (an optimal split with fewer stages is refined by splitting stages). With
        ``comm`` a split into more stages adds transfers and may raise the largest load: the
        result is then the optimum over exactly ``min(k, n)`` stages, which can exceed
        ``stagecut.partition``'s objective. ``False``: at most ``k`` stages (the fewest among
        the optimal ones with ``comm``), the optimum of ``stagecut.partition`` on the chain.

    Returns
    -------
    list of int
        Layers per stage, each >= 1, summing to ``len(costs)``.

    Raises
    ------
    InvalidArgumentError
        Empty, negative or non-numeric ``costs``, ``comm`` or ``memory`` (or of another length
        than ``costs``); ``k`` not an integer >= 1; ``memory`` without ``capacity`` or the
        reverse; ``capacity`` that no split fits (a layer larger than it, or too few stages).

    Examples
    --------
    >>> balance([4, 1, 1, 2, 4], 3)
    [1, 3, 1]
    >>> balance([1, 1, 1, 1], 2, comm=[10, 20, 30, 40], fill=False)
    [4]
    >>> balance([1, 2, 3], 2, memory=[2, 2, 2], capacity=4)
    [2, 1]
    """
    c = _values(costs, "costs", None)
    if not c:
        raise InvalidArgumentError("costs: no layers")
    n = len(c)
    k = check_int(k, "k (stages)", minimum=1, error=InvalidArgumentError)
    if not isinstance(fill, bool):
        raise InvalidArgumentError(f"fill: expected True or False, got {fill!r}")
    com = _values(comm, "comm", n) if comm is not None else None
    if (memory is None) != (capacity is None):
        raise InvalidArgumentError("memory and capacity: give both (per-layer memory and memory per stage) or neither")
    mp: list[float] | None = None
    cap = math.inf
    if memory is not None:
        mp = _prefix(_values(memory, "memory", n))
        cap = check_number(capacity, "capacity", error=InvalidArgumentError)
    if com is None:
        ends = _no_comm(c, k, mp, cap, fill)
    else:
        ends = _with_comm(c, com, k, mp, cap, fill)
    return [b - a for a, b in zip([0, *ends], ends)]
