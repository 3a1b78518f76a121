"""What the partitioners people use today compute, on a list of per-layer costs, to compare
stagecut's exact split against (re-implemented here from their documented behaviour; neither
DeepSpeed nor torchgpipe is needed).

A split of ``n`` layers into ``k`` stages is written as DeepSpeed writes it, ``parts``: ``k + 1``
boundaries ``[0, ..., n]``, stage ``i`` holding layers ``parts[i]`` to ``parts[i + 1] - 1``;
torchgpipe's ``balance`` (layers per stage) is its differences (:func:`parts_to_balance`).

* :func:`uniform_parts`: DeepSpeed's ``partition_method="uniform"``: ``n // k`` layers per stage,
  the first ``n % k`` stages one more.
* :func:`spread_parts`: DeepSpeed's ``partition_balanced``: a dynamic program over (layers,
  stages) that keeps, for each state, the predecessor minimising the *spread* (largest stage sum
  minus smallest along the chosen path; the last such predecessor on ties), not the largest
  stage sum, so it can miss the min-max optimum. DeepSpeed's default
  ``partition_method="parameters"`` runs it on the layers' parameter counts, not their times.
* :func:`block_balance`: torchgpipe's ``balance_by_time`` / ``balance_by_size`` partitioner
  (``blockpartition.solve``): the block-moving procedure of Bárány and Grinberg ("Block
  partitions of sequences") on the costs rescaled to [0, 1]: start from ``n // k`` layers per
  stage (the last takes the rest); take a largest block; while it exceeds a smallest block by
  more than 1 (in rescaled units), move one layer into the smallest block from its neighbour on
  the side of the largest one; start over when that neighbour was the largest block. A
  heuristic with a guarantee on the spread, not an optimiser of the largest stage.
* :func:`optimal_parts`: the exact min-max split (stagecut's DP on the chain).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from stagecut.errors import InvalidArgumentError
from stagecut.validate import check_int, check_number

__all__ = ["uniform_parts", "spread_parts", "block_balance", "optimal_parts", "max_load", "parts_to_balance",
           "compare"]


def _costs(costs: Sequence[float], k: int) -> tuple[list[float], int]:
    if isinstance(costs, (str, bytes)) or not hasattr(costs, "__len__"):
        raise InvalidArgumentError(f"costs: expected a sequence of per-layer costs, got {type(costs).__name__}")
    values = [check_number(c, f"costs[{i}]", error=InvalidArgumentError) for i, c in enumerate(costs)]
    if not values:
        raise InvalidArgumentError("costs: no layers")
    return values, check_int(k, "k (stages)", minimum=1, error=InvalidArgumentError)


def parts_to_balance(parts: Sequence[int]) -> list[int]:
    """Layers per stage from boundaries (``[0, 2, 5] -> [2, 3]``).

    Parameters
    ----------
    parts : sequence of int

    Returns
    -------
    list of int

    Raises
    ------
    InvalidArgumentError
        Boundaries that do not start at 0 or go backwards.
    """
    if not parts or parts[0] != 0 or any(b < a for a, b in zip(parts, parts[1:])):
        raise InvalidArgumentError(f"parts must start at 0 and never decrease, got {list(parts)}")
    return [b - a for a, b in zip(parts, parts[1:])]


def max_load(costs: Sequence[float], parts: Sequence[int]) -> float:
    """The largest stage sum of the split ``parts`` of ``costs`` (the pipeline's time per sample).

    Parameters
    ----------
    costs : sequence of float
    parts : sequence of int

    Returns
    -------
    float

    Raises
    ------
    InvalidArgumentError
        ``parts`` that do not cover ``costs`` (``parts[-1] != len(costs)``).
    """
    parts_to_balance(parts)
    if parts[-1] != len(costs):
        raise InvalidArgumentError(f"parts end at {parts[-1]}, not at the {len(costs)} layers")
    return max(math.fsum(costs[a:b]) for a, b in zip(parts, parts[1:]))


def uniform_parts(n_layers: int, k: int) -> list[int]:
    """DeepSpeed's ``"uniform"`` split: ``n // k`` layers per stage, the first ``n % k`` one more
    (with fewer layers than stages, one layer each and empty stages at the end).

    Parameters
    ----------
    n_layers, k : int

    Returns
    -------
    list of int
        ``k + 1`` boundaries.

    Raises
    ------
    InvalidArgumentError
        A count that is not a positive integer.

    Examples
    --------
    >>> uniform_parts(38, 8)
    [0, 5, 10, 15, 20, 25, 30, 34, 38]
    """
    n = check_int(n_layers, "n_layers", minimum=1, error=InvalidArgumentError)
    k = check_int(k, "k (stages)", minimum=1, error=InvalidArgumentError)
    if n <= k:
        return [min(p, n) for p in range(k + 1)]
    size, extra = divmod(n, k)
    parts = [0]
    for i in range(k):
        parts.append(parts[-1] + size + (1 if i < extra else 0))
    return parts


def spread_parts(weights: Sequence[float], k: int) -> list[int]:
    """DeepSpeed's ``partition_balanced``: the min-spread dynamic program (see the module docs).

    Parameters
    ----------
    weights : sequence of float
        Per-layer weights (times, or parameter counts for ``partition_method="parameters"``).
    k : int
        Stages.

    Returns
    -------
    list of int
        ``k + 1`` boundaries (:func:`uniform_parts` when there are no more layers than stages).

    Raises
    ------
    InvalidArgumentError
        Empty or non-numeric weights, a bad ``k``.

    Examples
    --------
    >>> spread_parts([1, 1, 1, 1, 1], 4)
    [0, 2, 3, 4, 5]
    """
    w, k = _costs(weights, k)
    n = len(w)
    if n <= k:
        return uniform_parts(n, k)
    prefix = [0.0]
    for x in w:
        prefix.append(prefix[-1] + x)
    inf = math.inf
    # state (i, j): the first i layers in j stages -> (spread, largest, smallest, predecessor)
    state: dict[tuple[int, int], tuple[float, float, float, int]] = {(0, 0): (0.0, 0.0, inf, 0)}
    for i in range(1, n + 1):
        for j in range(1, min(i, k) + 1):
            best = None
            for s in range(j - 1, i):
                prev = state.get((s, j - 1))
                if prev is None:
                    continue
                seg = prefix[i] - prefix[s]
                hi, lo = max(prev[1], seg), min(prev[2], seg)
                if best is None or hi - lo <= best[0]:  # ties: the later predecessor
                    best = (hi - lo, hi, lo, s)
            if best is not None:
                state[(i, j)] = best
    parts = [n]
    i = n
    for j in range(k, 0, -1):
        i = state[(i, j)][3]
        parts.append(i)
    return parts[::-1]


def block_balance(costs: Sequence[float], k: int, *, max_moves: int | None = None) -> list[int]:
    """torchgpipe's partitioner (``balance_by_time`` on measured times): layers per stage by
    the Bárány–Grinberg block moves (see the module docs).

    Parameters
    ----------
    costs : sequence of float
        Per-layer costs (at least ``k``).
    k : int
        Stages.
    max_moves : int, optional
        A guard on the number of single-layer moves (default ``n * n * k + 100``); the procedure
        ends well before it.

    Returns
    -------
    list of int
        ``balance``: layers per stage.

    Raises
    ------
    InvalidArgumentError
        Fewer layers than stages, empty or non-numeric costs, a bad ``k``.

    Examples
    --------
    >>> block_balance([1, 2, 3, 4, 5, 6], 2)
    [4, 2]
    """
    c, k = _costs(costs, k)
    n = len(c)
    if n < k:
        raise InvalidArgumentError(f"costs: {n} layers cannot fill {k} stages")
    low, span = min(c), max(c) - min(c)
    x = [(v - low) / span if span > 0 else 0.0 for v in c]
    prefix = [0.0]
    for v in x:
        prefix.append(prefix[-1] + v)
    ends = [n // k * (i + 1) for i in range(k - 1)] + [n]

    def size(i: int) -> float:
        return prefix[ends[i]] - prefix[ends[i - 1] if i > 0 else 0]

    moves = 0
    limit = max_moves if max_moves is not None else n * n * k + 100
    while moves < limit:
        p = max(range(k), key=lambda i: (size(i), i))  # a largest block (the last of equals)
        while moves < limit:
            q = min(range(k), key=lambda i: (size(i), i))  # a smallest block (the first of equals)
            if size(p) <= size(q) + 1:
                return parts_to_balance([0, *ends])
            moves += 1
            if p < q:  # the neighbour towards p gives its last layer to q
                h = q - 1
                ends[h] -= 1
            else:  # the neighbour towards p gives its first layer to q
                h = q + 1
                ends[q] += 1
            if h == p:
                break
    return parts_to_balance([0, *ends])


def optimal_parts(costs: Sequence[float], k: int) -> list[int]:
    """The exact min-max split of the chain (stagecut's DP), as ``k + 1`` boundaries (a plan
    using fewer stages is padded with empty ones at the end).

    Parameters
    ----------
    costs : sequence of float
    k : int

    Returns
    -------
    list of int

    Raises
    ------
    InvalidArgumentError
        Empty or non-numeric costs, a bad ``k``.

    Examples
    --------
    >>> optimal_parts([4, 1, 1, 2, 4], 3)
    [0, 1, 4, 5]
    """
    from stagecut.graph import Graph
    from stagecut.throughput import partition

    c, k = _costs(costs, k)
    plan = partition(Graph.chain(c), devices=k)
    parts = [0]
    for stage in plan.stages:
        parts.append(parts[-1] + len(stage.nodes))
    return parts + [len(c)] * (k + 1 - len(parts))


def compare(costs: Sequence[float], k: int, params: Sequence[float] | None = None) -> dict[str, float]:
    """The time per sample (largest stage sum of ``costs``) of each method's split.

    Parameters
    ----------
    costs : sequence of float
        Per-layer times.
    k : int
        Stages.
    params : sequence of float, optional
        Per-layer parameter counts (or bytes), for DeepSpeed's default ``"parameters"``.

    Returns
    -------
    dict of str to float
        ``optimal``, ``deepspeed_balanced`` (times), ``torchgpipe`` (times), ``uniform``, and
        ``deepspeed_parameters`` when ``params`` is given.

    Raises
    ------
    InvalidArgumentError
        Bad costs or ``k``, ``params`` of another length.
    """
    c, k = _costs(costs, k)
    out = {
        "optimal": max_load(c, optimal_parts(c, k)),
        "deepspeed_balanced": max_load(c, spread_parts(c, k)),
        "uniform": max_load(c, uniform_parts(len(c), k)),
    }
    if len(c) >= k:
        b = block_balance(c, k)
        out["torchgpipe"] = max_load(c, [sum(b[:i]) for i in range(len(b) + 1)])
    if params is not None:
        p, _ = _costs(params, k)
        if len(p) != len(c):
            raise InvalidArgumentError(f"params: {len(p)} values for {len(c)} layers")
        out["deepspeed_parameters"] = max_load(c, spread_parts(p, k))
    return out
