"""Lower bounds on the latency optimum that see memory and communication.

Every bound here holds for every schedule the evaluator (:func:`~stagecut.latency.model.evaluate.asap`)
accepts: each node on a device that can run it, no device over its memory, a node starting after
its predecessors' outputs have arrived (a predecessor's finish plus the transfer when it ran
elsewhere). The tests hold each one below brute force (:mod:`stagecut.latency.exact.brute`) on thousands
of small random problems, memory-tight ones included.

* ``"simple"``: :meth:`LatencyProblem.lower_bound <stagecut.latency.LatencyProblem.lower_bound>`,
  the longest path at the fastest times and the work that only devices without parallelism can
  run, spread over them.
* ``"device-path"``: the longest path with each node's device chosen freely but the transfers
  paid: ``arrive(v, d) = min over d' of finish(u, d') + transfer(u, d', d)`` for each predecessor
  ``u``, ``finish(v, d) = max_u arrive(u -> v, d) + time(v, d)``; the bound is the least finish
  of the last node over its devices (a node that can only run on a slow device, or whose inputs
  must cross, pays it).
* ``"memory-path"``: along one path ``v_1 -> ... -> v_m`` of the DAG, the makespan is at least
  the sum of the path's node times on their devices plus the transfers where consecutive path
  nodes sit apart. Split the path into *runs*, maximal stretches on one device: two consecutive
  runs are on different devices (so a transfer separates them), and a run's nodes all sit on its
  device, so their memory fits in it. The least such sum over every split of the path into runs
  (a dynamic programme over the run ends, ``O(m^2 D + m D^2)``) is a lower bound: what cannot
  fit on one accelerator must cross to another or run somewhere slower, and either costs time.
  It is taken over a few long paths (the longest at the fastest times, the heaviest in memory,
  and one weighing both).
* ``"skip-path"``: the memory-path bound with the path's own skip edges paid too (an edge from a
  path node to a later, not adjacent, one: a residual connection, say). When such an edge joins
  two consecutive runs, its ends sit on different devices, so the later node cannot start before
  the earlier one's output has crossed; cutting a residual block in two pays for the block's
  input as well as for the tensor at the cut. The programme's state is a run (its first and last
  node and its device), with a lower bound on when the run's first node starts and one on when
  its last node finishes (``O(m^3 D^2)`` over a path of ``m`` nodes; devices that swap without
  changing the problem count twice at most). Skip edges that jump over a whole run are not
  charged (the runs on either side could share a device). *Detours* count as skip edges too: two
  path nodes joined through nodes off the path (the other branches of an inception module, a
  residual block's projection) delay the later one by at least the detour's own longest route
  with its devices chosen freely and its transfers paid, and between runs on different devices
  that route must cross somewhere. Inside a run on a device that runs one node at a time, each
  node off the path whose window (its latest path ancestor to its earliest path descendant) lies
  in the run either runs on that device too, its time added to the run's (the device does one
  thing at a time), or elsewhere, and then its route out and back must fit between its window's
  ends; the run takes at least the least over these choices (a threshold over the nodes sorted
  by the time their route out takes). This is what a module of parallel branches costs when it
  stays on one accelerator. Last, a short run (at most
  :data:`~stagecut.latency.exact.skip_path.EXCURSION` nodes) on a parallel device (the CPU pool)
  between two runs is taken with the run before it: a skip edge from that run over the short one
  crosses unless the runs on either side share a device, and then their
  memory must fit on it together (otherwise a node or two moved to the CPU would let the bound
  count one accelerator's memory twice).

:func:`latency_bound` returns the largest with its source.

Examples
--------
>>> import stagecut as sc
>>> from stagecut.latency import Devices, LatencyProblem
>>> g = sc.Graph.chain([1.0, 1.0, 1.0], comm=2.0, memory=[3.0, 3.0, 3.0], cpu_costs=[10.0, 10.0, 10.0])
>>> p = LatencyProblem(g, Devices.pcie_star(2, memory=6.0))
>>> p.lower_bound()   # three nodes at their accelerator time
3.0
>>> b = latency_bound(p)   # two fit on one accelerator; the third crosses (2 / 0.5) or runs on the CPU
>>> b.value, b.source
(7.0, 'memory-path')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from stagecut._deadline import expired
from stagecut.errors import InvalidArgumentError
from stagecut.latency.exact.paths import _runnable, _transfers, long_paths
from stagecut.latency.exact.skip_path import skip_path_bound
from stagecut.latency.model.problem import LatencyProblem
from stagecut.validate import shown

__all__ = ["LatencyBound", "latency_bound", "best_bound", "path_placement", "memory_binds", "device_path_bound",
           "memory_path_bound", "skip_path_bound", "long_paths"]

#: The longest path :func:`memory_path_bound` takes whole; a longer one is cut into stretches of this
#: many nodes, each bounded alone (their sum is still a bound), which keeps the programme quadratic
#: in this length only.
MAX_PATH = 2000


#: The run programme of :func:`memory_path_bound` looks at the deadline every this many path nodes
#: (on problems of more than :data:`SMALL` nodes).
_LOOK = 32

#: Problems of at most this many nodes get every bound even past a deadline (tens of milliseconds).
SMALL = 2000


@dataclass(frozen=True)
class LatencyBound:
    """A lower bound, where it came from (``source``, a key of ``parts``) and every part's value."""

    value: float
    source: str
    parts: dict[str, float] = field(default_factory=dict)


def device_path_bound(problem: LatencyProblem, tr: np.ndarray | None = None) -> float:
    """The ``"device-path"`` bound of the module docs.

    >>> import stagecut as sc
    >>> from stagecut.latency import Devices, LatencyProblem
    >>> g = sc.Graph([sc.Node("a", {"cpu": 1.0}, comm=4.0), sc.Node("b", {"accelerator": 1.0})], [("a", "b")])
    >>> device_path_bound(LatencyProblem(g, Devices.pcie_star(1)))   # a on the CPU, b on the accelerator
    6.0
    """
    tr = _transfers(problem) if tr is None else tr
    ok = _runnable(problem)
    t = np.where(ok, problem.times, math.inf)
    fin = np.full(t.shape, math.inf)
    for v in problem.order:
        ready = np.zeros(problem.num_devices)
        for u in problem.pred[v]:
            ready = np.maximum(ready, (fin[u][:, None] + tr[u]).min(axis=0))
        fin[v] = ready + t[v]
    sinks = [v for v in range(len(problem)) if not problem.succ[v]]
    return float(max((fin[v].min() for v in sinks), default=0.0))


def _path_runs(problem: LatencyProblem, path: Sequence[int], tr: np.ndarray, ok: np.ndarray,
               stop: Callable[[], bool] | None = None) -> float:
    """The least time of ``path`` over its splits into runs (see the module docs; 0 once ``stop()``)."""
    return _runs(problem, path, tr, ok, stop)[0]


def _runs(problem: LatencyProblem, path: Sequence[int], tr: np.ndarray, ok: np.ndarray,
          stop: Callable[[], bool] | None = None) -> tuple[float, list[tuple[int, int, int]]]:
    """:func:`_path_runs` and the runs that reach it: ``(first, last, device)`` positions in ``path``;
    ``(0.0, [])`` (0 is a bound) when ``stop()`` says the time is up (looked at every
    :data:`_LOOK` nodes)."""
    m, nd = len(path), problem.num_devices
    idx = np.asarray(path, dtype=np.int64)
    can = ok[idx]
    t = np.where(can, problem.times[idx], 0.0)
    P = np.vstack([np.zeros(nd), np.cumsum(t, axis=0)])  # P[j, d]: time of path[:j] on d
    M = np.concatenate([[0.0], np.cumsum(problem.memory[idx])])
    bad = np.vstack([np.zeros(nd), np.cumsum(~can, axis=0)])  # nodes of path[:j] that d cannot take
    cap = problem.capacity * (1 + 1e-12)
    arrive = np.full((m, nd), math.inf)  # the least time a run starting at path[i] on d can begin
    arrive[0] = 0.0
    came = np.zeros((m, nd), dtype=np.int64)  # the device of the run before
    first = np.zeros((m, nd), dtype=np.int64)  # the first node of the best run ending at path[j] on d
    end = np.full(nd, math.inf)
    for j in range(m):
        if stop is not None and j % _LOOK == _LOOK - 1 and stop():
            return 0.0, []
        i = np.arange(j + 1)
        fits = ((M[j + 1] - M[i])[:, None] <= cap[None, :]) & (bad[j + 1][None, :] == bad[i])
        cost = np.where(fits, arrive[:j + 1] + P[j + 1][None, :] - P[i], math.inf)
        end, first[j] = cost.min(axis=0), cost.argmin(axis=0)
        if j + 1 < m:
            step = end[:, None] + tr[idx[j]]
            np.fill_diagonal(step, math.inf)  # the next run is on another device
            arrive[j + 1], came[j + 1] = step.min(axis=0), step.argmin(axis=0)
    value = float(end.min())
    runs: list[tuple[int, int, int]] = []
    if math.isfinite(value):
        d, hi = int(np.argmin(end)), m - 1
        while hi >= 0:
            lo = int(first[hi, d])
            runs.append((lo, hi, d))
            d, hi = int(came[lo, d]), lo - 1
    return value, runs[::-1]


def memory_binds(problem: LatencyProblem) -> bool:
    """Whether some device with a memory limit cannot hold every node (the memory-path bound and
    :func:`path_placement` can only add something then)."""
    finite = problem.capacity[np.isfinite(problem.capacity)]
    return bool(finite.size) and float(problem.memory.sum()) > float(finite.min())


def path_placement(problem: LatencyProblem) -> list[int] | None:
    """A placement built from the ``"memory-path"`` bound's best split of its path into runs (a
    start for the solvers: on some graphs it meets the bound): each run on a device of its kind
    (accelerator runs on the devices interchangeable with the run's, the least used first), every
    other node on a neighbour's device where it fits, else on a parallel device, else where it
    fits; ``None`` when that fails (a run or a node that fits nowhere left). Device positions by node position."""
    from stagecut.latency.exact.brute import symmetry_groups

    tr, ok = _transfers(problem), _runnable(problem)
    best: tuple[float, list[int], list[tuple[int, int, int]]] | None = None
    for path in long_paths(problem):
        if len(path) > MAX_PATH:
            continue
        value, runs = _runs(problem, path, tr, ok)
        if runs and (best is None or value > best[0]):
            best = (value, path, runs)
    if best is None:
        return None
    _, path, runs = best
    twins = {d: g for g in symmetry_groups(problem) for d in g}
    used = np.zeros(problem.num_devices)
    dev = [-1] * len(problem)
    for i, j, d in runs:
        nodes = path[i:j + 1]
        need = float(problem.memory[nodes].sum())
        group = twins.get(d, [d])
        fits = [e for e in group if used[e] + need <= problem.capacity[e] and ok[nodes, e].all()]
        if not fits:
            return None
        e = min(fits, key=lambda x: (used[x], x))
        for v in nodes:
            dev[v] = e
        used[e] += need
    spare = [d for d in range(problem.num_devices) if problem.parallel[d]] + list(range(problem.num_devices))
    for v in problem.order:
        if dev[v] >= 0:
            continue
        near = [dev[u] for u in problem.pred[v] if dev[u] >= 0] + [dev[w] for w in problem.succ[v] if dev[w] >= 0]
        for d in near + spare:
            if ok[v, d] and used[d] + problem.memory[v] <= problem.capacity[d]:
                dev[v] = d
                used[d] += problem.memory[v]
                break
        else:
            return None
    return dev


def memory_path_bound(problem: LatencyProblem, paths: Sequence[Sequence[int]] | None = None,
                      tr: np.ndarray | None = None) -> float:
    """The ``"memory-path"`` bound of the module docs over ``paths`` (default :func:`long_paths`).
    On a problem of more than :data:`SMALL` nodes, the programme stops when a
    :func:`stagecut._deadline.deadline` passes (a stretch cut short adds nothing: a weaker bound).

    Raises
    ------
    InvalidArgumentError
        A path that is not one (consecutive nodes not joined by an edge, or a position out of range).
    """
    tr = _transfers(problem) if tr is None else tr
    ok = _runnable(problem)
    stop = None if len(problem) <= SMALL else expired  # (past a deadline: a stretch cut short gives 0)
    best = 0.0
    for path in long_paths(problem) if paths is None else paths:
        path = list(path)
        for a, b in zip(path, path[1:]):
            if not (0 <= a < len(problem)) or b not in problem.succ[a]:
                raise InvalidArgumentError(f"paths: {shown(a)} -> {shown(b)} is not an edge")
        value = 0.0
        for k in range(0, len(path), MAX_PATH):  # (stretches of a long path, each a path of its own)
            if k and expired():
                break
            value += _path_runs(problem, path[k:k + MAX_PATH], tr, ok, stop)
        best = max(best, value)
    return best


def latency_bound(problem: LatencyProblem) -> LatencyBound:
    """The largest of the bounds of the module docs, with its source and every part.

    Parameters
    ----------
    problem : LatencyProblem

    Returns
    -------
    LatencyBound
        ``value`` (``inf`` when some node fits on no device that can run it), ``source`` and
        ``parts``; on a problem of more than :data:`SMALL` nodes, a bound skipped because a
        :func:`stagecut._deadline.deadline` passed is left out of ``parts``; ``"skip-path"`` is
        left out past a deadline whatever the size, and when every path is too long for
        :data:`~stagecut.latency.exact.skip_path.SKIP_WORK` in one piece.

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a LatencyProblem.
    """
    if not isinstance(problem, LatencyProblem):
        raise InvalidArgumentError(f"problem: expected a LatencyProblem, got {shown(problem)}")
    parts = {"simple": float(problem.lower_bound())}
    if problem.fits_anywhere() is not None:
        return LatencyBound(math.inf, "memory", {"memory": math.inf, **parts})
    tr = _transfers(problem)
    small = len(problem) <= SMALL  # (cheap enough to finish even past a deadline)
    if small or not expired():
        parts["device-path"] = device_path_bound(problem, tr)
    if small or not expired():
        parts["memory-path"] = memory_path_bound(problem, tr=tr)
    if not expired():  # (a second or so on a few hundred nodes: never past a deadline, only whole paths)
        skip = skip_path_bound(problem, tr=tr, whole_only=True)
        mem = parts.get("memory-path", 0.0)
        if skip > 0:  # (the same runs found twice: no new source for a rounding difference)
            parts["skip-path"] = mem if abs(skip - mem) <= 1e-9 * max(1.0, mem) else skip
    source = max(parts, key=lambda k: parts[k])
    return LatencyBound(parts[source], source, parts)


def best_bound(problem: LatencyProblem) -> LatencyBound:
    """:func:`latency_bound` of ``problem``, computed once per problem object (the solvers ask for
    it several times). A bound computed after a deadline passed (with parts left out) is not kept."""
    cached = problem.__dict__.get("_stagecut_latency_bound")
    if isinstance(cached, LatencyBound):
        return cached
    b = latency_bound(problem)
    if len(problem) <= SMALL or not expired():
        problem.__dict__["_stagecut_latency_bound"] = b
    return b
