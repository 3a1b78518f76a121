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
the greedy is no longer exact. Each probe then tracks the set of first layers reachable with
``1, 2, ..`` stages (a running maximum over prefix sums, ``O(k n)`` numpy work; with memory, window
maxima from a sparse table, ``O(k n log n)``). The optimum is one of the loads of a block
``a..b``: the threshold is bisected until the interval holds a few thousand such candidates at
most, which are then listed (from the sorted block starts) and bisected: about 10-20 probes for
100 to 10,000 layers, ``O(k n log n)`` in all on these inputs (on any input at most 64 bisection
probes plus 12 over the list, twice that if rounding defeats the margin of the lower bound).
"""

from __future__ import annotations

import bisect
import math
import struct
import sys
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from stagecut import validate
from stagecut.errors import InvalidArgumentError, MemoryLimitError
from stagecut.validate import check_int, check_number

__all__ = ["balance"]

def _values(x: object, what: str, n: int | None) -> list[float]:
    if isinstance(x, (str, bytes)) or not hasattr(x, "__len__") or not hasattr(x, "__iter__"):
        raise InvalidArgumentError(f"{what}: expected a sequence of per-layer numbers, got {type(x).__name__}")
    values = _fast_values(x)
    if values is None:  # a value to refuse, or of another type: check each, naming the first bad one
        values = [check_number(v, f"{what}[{i}]", error=InvalidArgumentError) for i, v in enumerate(x)]
    if n is not None and len(values) != n:
        raise InvalidArgumentError(f"{what}: expected {n} values (one per layer), got {len(values)}")
    return values


def _fast_values(x: object) -> list[float] | None:
    """The values as floats when they are plain ints and floats (or a numeric array), all finite
    and non-negative: what ``check_number`` accepts, checked at once; None otherwise."""
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "iuf":
            return None
    elif not set(map(type, x)) <= {int, float}:  # type: ignore[call-overload]  # x: a sized iterable
        return None
    try:
        a = np.asarray(x, dtype=np.float64)
    except (OverflowError, TypeError, ValueError):
        return None
    if a.ndim != 1 or not bool(np.isfinite(a).all()) or bool((a < 0).any()):
        return None
    values: list[float] = a.tolist()
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
        e = bisect.bisect_right(p, t, lo=a, key=lambda x: x - pa) - 1
        if mp is not None:
            ma = mp[a]
            e = min(e, bisect.bisect_right(mp, cap, lo=a, key=lambda x: x - ma) - 1)
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
    ends = _greedy(p, mp, cap, math.inf, k)  # (the same as at p[-1], the first hi)
    if ends is None:
        raise InvalidArgumentError(f"capacity: no split of the {n} layers into at most {k} stages fits "
                                   f"{cap} per stage (a layer's memory, or the total over {k} stages, exceeds it)")
    lo, hi = -1, _bits(max(p[-1], 0.0))  # probe(lo) infeasible (sentinel), probe(hi) feasible: ends
    while hi - lo > 1:
        mid = (lo + hi) // 2
        e = _greedy(p, mp, cap, _float(mid), k)
        if e is None:
            lo = mid
        else:
            hi, ends = mid, e
    return _fill(ends, min(k, n)) if fill else ends


class _Reach:
    """Threshold probes of the chain with ``comm``: is there a split with every load <= ``t``?

    The load of the stage ``a..b`` is ``R[b] - L[a]`` with ``R[b] = p[b + 1] + send[b]`` and
    ``L[a] = p[a] - recv[a]``. The positions (first layers of a stage) reachable with ``j``
    stages give those reachable with ``j + 1``: ``b + 1`` is when the largest ``L[a]`` over the
    reachable ``a <= b`` (and, with memory, ``a`` at least the first start whose memory sum up
    to ``b`` fits) is at least ``R[b] - t``; a running maximum (with memory: a sparse table of
    window maxima), so one probe is ``O(m n)`` numpy work (``O(m n log n)`` with memory).
    """

    def __init__(self, p: npt.NDArray[np.float64], comm: list[float], mp: list[float] | None, cap: float,
                 m: int, exact: bool) -> None:
        n = len(p) - 1
        send = np.asarray(comm, dtype=np.float64)
        send[-1] = 0.0  # the last stage sends nothing
        self.n, self.m, self.exact = n, m, exact
        self.left = p[:-1] - np.concatenate(([0.0], send[:-1]))  # L[a]; the first stage receives nothing
        self.right = p[1:] + send  # R[b]
        self.window: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64],
                           npt.NDArray[np.bool_], int] | None = None
        if mp is not None:
            self.window = self._window(np.asarray(mp), cap)  # (mp: floats, so float64)

    def _window(self, mp: npt.NDArray[np.float64], cap: float) -> tuple[
            npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_], int]:
        n = self.n
        b = np.arange(n)
        # first[b]: the first a with mp[b + 1] - mp[a] <= cap (the test the loads use; monotone in a)
        first = np.searchsorted(mp, mp[1:] - cap, side="left").astype(np.int64)
        # (first <= b + 1 throughout: mp[b + 1] - mp[b + 1] = 0 <= cap, and ``up`` stops there)
        while True:  # rounding: move each first start until the test itself agrees
            up = (first <= b) & (mp[1:] - mp[first] > cap)
            down = (first > 0) & (mp[1:] - mp[np.maximum(first - 1, 0)] <= cap)
            if not (up.any() or down.any()):
                break
            first = first + up - down
        length = np.maximum(b - first + 1, 1)
        level = np.zeros(n, dtype=np.int64)
        while bool(((2 << level) <= length).any()):
            level += (2 << level) <= length
        return np.minimum(first, n - 1), b - (1 << level) + 1, level, first > b, int(level.max()) + 1

    def _max(self, w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """``out[b]``: the largest ``w[a]`` over the starts ``a`` a stage ending at ``b`` may have."""
        if self.window is None:
            running: npt.NDArray[np.float64] = np.empty_like(w)
            np.maximum.accumulate(w, out=running)
            return running
        i1, i2, level, empty, levels = self.window
        table = np.full((levels, self.n), -np.inf)
        table[0] = w
        for j in range(1, levels):
            s = 1 << (j - 1)
            np.maximum(table[j - 1, :-s], table[j - 1, s:], out=table[j, :-s])
        out: npt.NDArray[np.float64] = np.where(empty, -np.inf, np.maximum(table[level, i1], table[level, i2]))
        return out

    def probe(self, t: float) -> list[npt.NDArray[np.bool_]] | None:
        """The reachable starts after ``0 .. j - 1`` stages for the ``j`` of a split with loads <=
        ``t`` (exactly ``m`` stages, else the fewest up to ``m``); None if there is none."""
        n, left, exact = self.n, self.left, self.exact
        target = self.right - t
        reach = np.zeros(n, dtype=bool)
        reach[0] = True
        masks = [reach]
        for _ in range(self.m - 1):  # splits of len(masks) < m stages
            hit = self._max(np.where(reach, left, -np.inf)) >= target
            if hit[-1] and not exact:
                return masks
            nxt = np.empty(n, dtype=bool)
            nxt[0] = not exact  # at most m: what fewer stages reach stays reachable
            nxt[1:] = hit[:-1]
            if not exact:
                nxt |= reach
            reach = nxt
            masks.append(reach)
        return masks if self._max(np.where(reach, left, -np.inf))[-1] >= target[-1] else None  # m stages

    def ends(self, t: float) -> list[int]:
        """Stage ends (exclusive) of a split with loads <= ``t`` (which must exist): each last
        stage as short as possible, going backwards."""
        masks = self.probe(t)
        assert masks is not None
        ends, e = [self.n], self.n
        for reach in masks[::-1]:
            ok = reach[:e] & (self.left[:e] >= self.right[e - 1] - t)
            e = int(np.flatnonzero(ok)[-1])  # the shortest stage: in the memory window if any start is
            if e == 0:
                break
            ends.append(e)
        return ends[::-1]


_ENUMERATE = 4096  # candidate loads listed once the threshold interval holds at most this many


def _with_comm(c: list[float], comm: list[float], k: int, mp: list[float] | None, cap: float,
               fill: bool) -> list[int]:
    n = len(c)
    m = min(k, n)
    if m * n > validate.MEMORY_BUDGET:  # a probe keeps one reachability row (n bytes) per stage
        raise MemoryLimitError(f"k: {m} stages of {n} layers with comm need about {validate.size_text(m * n)} for "
                               f"the threshold search, more than the {validate.size_text(validate.MEMORY_BUDGET)} "
                               f"budget; ask for fewer stages, or merge layers first")
    p = np.concatenate(([0.0], np.cumsum(c)))  # (c: floats, so float64)
    reach = _Reach(p, comm, mp, cap, m, fill)
    total = float(p[-1])
    top = min(2.0 * (total + 2.0 * max(comm)) + 1.0, sys.float_info.max)  # above every load
    if mp is not None and reach.probe(top) is None:
        raise InvalidArgumentError(f"capacity: no split of the {n} layers into {'exactly' if fill else 'at most'} "
                                   f"{m if fill else k} stages fits {cap} per stage")
    # lo: no split (a lower bound on every split's largest load, less a margin: checked at the
    # end), hi: a split. A guess from the classic bound (average + largest layer + two transfers).
    bound = max(total / m, max(c))
    lo, hi, lo_checked = (bound * (1 - 1e-9), top, False) if bound > 0 else (-1.0, top, True)
    guess = bound + max(c) + 2.0 * max(comm)
    if lo < guess < hi:
        if reach.probe(guess) is None:
            lo, lo_checked = guess, True
        else:
            hi = guess
    while True:
        t = _search(reach, lo, hi, total)
        if lo_checked or reach.probe(lo) is None:
            return reach.ends(t)
        # rounding made the margin too small: search below it too (a guard: the loads' rounding
        # reaches 1e-9 only beyond 9e6 stages, and the memory budget above allows 65,536)
        lo, lo_checked = -1.0, True


def _search(reach: _Reach, lo: float, hi: float, total: float) -> float:
    """The least threshold with a split, given ``probe(lo)`` None and ``probe(hi)`` not: the
    largest load of an optimal split is one of the candidates ``R[b] - L[a]``. Bisect the
    threshold (on the float bit patterns) until the interval holds few candidates (about
    ``n**2 / total`` of them per unit of load), list them, and bisect over them. When no window
    is ever small enough to list (every cost 0, so ``width`` is 0, or very many equal loads), the
    bisection ends on two adjacent floats and ``hi`` is the answer."""
    n = reach.n
    ls = np.sort(reach.left)
    width = 32.0 * total / (n * n)
    while True:
        lo_b, hi_b = (_bits(lo) if lo >= 0 else -1), _bits(hi)
        if hi_b - lo_b <= 1:  # hi is the only float left
            return hi
        if hi - lo <= width:
            i0 = np.searchsorted(ls, reach.right - hi - 1e-12 * abs(hi))
            i1 = np.searchsorted(ls, reach.right - lo + 1e-12 * abs(lo), side="right")
            count = np.maximum(i1 - i0, 0)
            listed = int(count.sum())
            if listed <= _ENUMERATE:
                rows = np.repeat(np.arange(n), count)
                offset = np.arange(listed) - np.repeat(np.cumsum(count) - count, count)
                vals = reach.right[rows] - ls[i0[rows] + offset]
                return _least(reach, np.unique(vals[(vals > lo) & (vals < hi)]), hi)
            width /= 16.0
        mid = _float((max(lo_b, 0) + hi_b) // 2)
        if reach.probe(mid) is None:
            lo = mid
        else:
            hi = mid


def _least(reach: _Reach, vals: npt.NDArray[np.float64], hi: float) -> float:
    """The least of the sorted candidates ``vals`` (all strictly between two probed thresholds,
    so none is probed twice) with a split, else ``hi`` (which has one)."""
    below, above = -1, len(vals)  # probe(vals[above]) (hi when above == len(vals)) has a split
    while above - below > 1:
        mid_i = (below + above) // 2
        if reach.probe(float(vals[mid_i])) is None:
            below = mid_i
        else:
            above = mid_i
    return float(vals[above]) if above < len(vals) else hi


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
    MemoryLimitError
        With ``comm``, ``min(k, len(costs)) * len(costs)`` above the 4 GiB budget (the threshold
        search keeps one byte per stage and layer): a request for tens of thousands of stages.

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
    k = check_int(k, "k (stages)", minimum=1)  # (InvalidArgumentError, its default)
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
