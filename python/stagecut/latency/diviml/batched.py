"""The batched throughput MILP (DiviML): ``L`` inputs of one DAG on heterogeneous devices.

**Model.** Every node ``v`` must process ``L`` inputs (:attr:`BatchSpec.inputs`). On each
device ``d`` it runs **at most one batch**, of a size ``b`` in the device's supported set ``B_d``
(:attr:`BatchSpec.sizes`), and the batch sizes of a node add up to ``L``. A batch of ``b`` inputs
of ``v`` on ``d`` takes ``t(v, d, b) = t(v, d) * b ** alpha_d`` (``t(v, d)`` the node's time for
one input, :attr:`LatencyProblem.times`). **Defaults** (:func:`batch_spec`): ``B_d`` is
``{1, 2, 4, ...} | {L}`` up to ``L`` on every device; ``alpha_d`` is :data:`CPU_ALPHA` = 1 on a
device of kind ``"cpu"`` (no gain from batching) and :data:`ALPHA` = 0.5 on any other (a GPU
runs a batch of 4 in twice the time of one input). Both can be given per device name.

**Memory** counts a node's weights once per device that runs a batch of it and its
activations per input: ``sum_v memory[v] [n(v, d) > 0] + act[v] n(v, d) <= capacity[d]``,
``act[v]`` the activation bytes per input (default: the node's output bytes,
:attr:`LatencyProblem.size`, when the devices' bandwidths are in bytes, else 0).

**Precedence.** As in the DiviML paper, *every batch of a consumer waits for every batch of its
producer*: a batch of ``v`` on ``b`` starts after each batch of a predecessor ``u`` on ``a`` has
finished and, when ``a != b``, its whole output (``n(u, a)`` inputs' worth,
``n(u, a) * transfer(u, a, b)``) has crossed to ``b``. Batches on one device without parallelism
do not overlap. The makespan ``C`` is the last batch's finish; the **throughput** is ``L / C``.

**MILP.** Binary ``y[v, d, b]`` (``v`` runs a batch of ``b`` on ``d``); the batch size is the
exact linear expression ``n(v, d) = sum_b b y[v, d, b]`` with ``sum_b y[v, d, b] <= 1`` and
``sum_d n(v, d) = L`` (no big-M: ``n`` is never a variable of its own); ``z(v, d) = sum_b
y[v, d, b]`` says whether the batch exists and ``P(v, d) = sum_b t(v, d, b) y[v, d, b]`` is its
time. One start ``S[v, d]`` per batch. For an edge ``u -> v`` and devices ``a, b``:
``S[v, b] >= S[u, a] + P(u, a) + transfer(u, a, b) n(u, a) - M (1 - z(v, b))``; binary order
variables per device for the pairs the DAG leaves unordered (as in
:mod:`stagecut.latency.exact.milp`); ``C >= S[v, d] + P(v, d) + tail(v) - fastest(v)`` and ``C >=``
each device's busy time. The big-M's come from an upper bound ``U`` (a greedy batched schedule):
``S[v, d] <= U - tail(v)`` holds in every schedule of makespan ``U`` or less. With ``L = 1`` the
model is the latency MILP's (one batch of size 1 per node), and the tests hold it equal to
:func:`~stagecut.latency.exact.milp.solve_milp` on random DAGs. Optional release times
``S[v, d] >= r(v, d) z(v, d)`` serve the module solves of :mod:`stagecut.latency.diviml.split_multi`.

**Re-scoring.** The MILP's batch sizes and per-device orders are timed by
:func:`evaluate_batched` (each batch as soon as its device is free and its inputs have
arrived); ``"optimal"`` only when that makespan and the proven bound agree within the stated
tolerance.

Examples
--------
>>> import stagecut as sc
>>> from stagecut.latency import Devices, LatencyProblem
>>> p = LatencyProblem(sc.Graph.chain([2.0, 2.0]), Devices.pcie_star(2, cpu=False))
>>> r = solve_batched(p, 4, threads=1)   # both accelerators run a batch of 2: 2 * 2 ** 0.5 per node
>>> round(r.objective, 6), r.status, r.batches[0]
(5.656854, 'optimal', {'accelerator:0': 2, 'accelerator:1': 2})
>>> round(r.throughput, 6)
0.707107
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from stagecut._deadline import deadline, expired, remaining
from stagecut._mip import MODEL_TOL, add, import_mip, new_model, reference_scale, solve, stated_tolerance
from stagecut.errors import InvalidArgumentError
from stagecut.latency._args import check_solver_call
from stagecut.latency.exact.milp import transitive_closure
from stagecut.latency.model.problem import LatencyProblem
from stagecut.results import NodeId, Result, Stage, Stat, Status
from stagecut.validate import check_int, check_number, shown

__all__ = ["BatchSpec", "BatchedSchedule", "batch_spec", "evaluate_batched", "solve_batched", "ALPHA",
           "CPU_ALPHA", "simple_bound"]

ALPHA = 0.5  #: default batch exponent of a device that is not a CPU: t(v, d, b) = t(v, d) * b ** ALPHA
CPU_ALPHA = 1.0  #: default batch exponent of a device of kind "cpu"


@dataclass(frozen=True)
class BatchSpec:
    """The batch model: ``inputs`` (``L``), each device's supported sizes (``sizes[d]``,
    ascending) and its exponent (``alpha[d]``); see the module docs and :func:`batch_spec`."""

    inputs: int
    sizes: tuple[tuple[int, ...], ...]
    alpha: tuple[float, ...]
    activation: tuple[float, ...]

    def time(self, problem: LatencyProblem, v: int, d: int, b: int) -> float:
        """``t(v, d, b)``: a batch of ``b`` inputs of node ``v`` on device ``d`` (0 for ``b = 0``)."""
        return 0.0 if b == 0 else float(problem.times[v, d]) * b ** self.alpha[d]


def batch_spec(problem: LatencyProblem, inputs: int, *, batch_sizes: Sequence[int] | Mapping[str, Sequence[int]]
               | None = None, alpha: float | Mapping[str, float] | None = None,
               activation_bytes: Mapping[NodeId, float] | None = None) -> BatchSpec:
    """The batch model of ``problem`` for ``inputs`` inputs (defaults in the module docs).

    Parameters
    ----------
    problem : LatencyProblem
    inputs : int
        ``L`` >= 1.
    batch_sizes : sequence of int, or mapping of device name to sequence of int, optional
        The supported batch sizes (every device, or per device; sizes above ``L`` are dropped).
    alpha : float or mapping of device name to float, optional
        The exponent of ``t(v, d, b) = t(v, d) * b ** alpha`` (>= 0).
    activation_bytes : mapping of node id to float, optional
        Bytes per input a node holds on its device besides its weights.

    Returns
    -------
    BatchSpec

    Raises
    ------
    InvalidArgumentError
        A bad ``inputs``, size, exponent or activation (the message names the argument), or no
        way to split ``L`` into supported sizes.

    Examples
    --------
    >>> import stagecut as sc
    >>> from stagecut.latency import Devices, LatencyProblem
    >>> p = LatencyProblem(sc.Graph.chain([1.0], cpu_costs=[3.0]), Devices.pcie_star(1))
    >>> s = batch_spec(p, 6)
    >>> s.sizes, s.alpha
    (((1, 2, 4, 6), (1, 2, 4, 6)), (1.0, 0.5))
    """
    if not isinstance(problem, LatencyProblem):
        raise InvalidArgumentError(f"problem: expected a LatencyProblem, got {shown(problem)}")
    L = check_int(inputs, "inputs", minimum=1)
    names = problem.devices.names
    default = sorted({1 << k for k in range(L.bit_length()) if 1 << k <= L} | {L})
    sizes: list[tuple[int, ...]] = []
    for name in names:
        raw: Any = default if batch_sizes is None else \
            batch_sizes.get(name, default) if isinstance(batch_sizes, Mapping) else batch_sizes
        if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
            raise InvalidArgumentError(f"batch_sizes: expected a sequence of sizes for {name}, got {shown(raw)}")
        got = sorted({check_int(b, f"batch_sizes of {name}", minimum=1) for b in raw})
        sizes.append(tuple(b for b in got if b <= L))
    if isinstance(batch_sizes, Mapping):
        extra = [k for k in batch_sizes if k not in names]
        if extra:
            raise InvalidArgumentError(f"batch_sizes: {shown(extra[0])} is not a device")
    if not _splittable(L, sizes):
        raise InvalidArgumentError(f"batch_sizes: {L} inputs cannot be split into one supported batch per device")
    alphas = []
    for name, dev in zip(names, problem.devices.devices):
        a: Any = (CPU_ALPHA if dev.kind == "cpu" else ALPHA) if alpha is None else \
            alpha.get(name, CPU_ALPHA if dev.kind == "cpu" else ALPHA) if isinstance(alpha, Mapping) else alpha
        alphas.append(check_number(a, f"alpha of {name}", error=InvalidArgumentError))
    if activation_bytes is None:
        act = problem.size if problem.devices.unit == "bytes" else np.zeros(len(problem))
    else:
        if not isinstance(activation_bytes, Mapping):
            raise InvalidArgumentError(f"activation_bytes: expected a mapping, got {shown(activation_bytes)}")
        act = np.array([check_number(activation_bytes.get(v, 0.0), f"activation_bytes of {shown(v)}",
                                     error=InvalidArgumentError) for v in problem.ids])
    return BatchSpec(L, tuple(sizes), tuple(alphas), tuple(float(x) for x in act))


def _splittable(L: int, sizes: Sequence[Sequence[int]]) -> bool:
    reach = {0}
    for s in sizes:
        reach = reach | {r + b for r in reach for b in s if r + b <= L}
    return L in reach


@dataclass(frozen=True, kw_only=True, repr=False)
class BatchedSchedule(Result):
    """A batched placement with its timetable (on the shared result protocol).

    Fields beyond the shared ones: ``inputs`` (``L``), ``batches`` (node id -> device name ->
    batch size, sizes adding up to ``L``), ``order`` (device name -> its nodes' batches in run
    order), ``start``/``finish`` (device name -> node id -> time of the batch), ``devices``.
    ``objective`` is the makespan of all ``L`` inputs; :attr:`throughput` is ``L`` over it.
    """

    objective_name: ClassVar[str] = "makespan of the batch"

    inputs: int = 1
    batches: Mapping[NodeId, Mapping[str, int]] = field(default_factory=dict)
    order: Mapping[str, tuple[NodeId, ...]] = field(default_factory=dict)
    start: Mapping[str, Mapping[NodeId, float]] = field(default_factory=dict)
    finish: Mapping[str, Mapping[NodeId, float]] = field(default_factory=dict)
    devices: tuple[str, ...] = ()

    @property
    def throughput(self) -> float | None:
        """Inputs per time unit, ``inputs / objective`` (``None`` without a schedule)."""
        return None if not self.objective else self.inputs / self.objective


def evaluate_batched(problem: LatencyProblem, spec: BatchSpec, counts: np.ndarray,
                     order: Sequence[Sequence[int]] | None = None,
                     release: np.ndarray | None = None) -> tuple[float, np.ndarray, np.ndarray, list[list[int]]]:
    """Time a batched placement: each batch as soon as its device is free and every batch of
    every predecessor has finished and crossed (see the module docs).

    Parameters
    ----------
    problem : LatencyProblem
    spec : BatchSpec
    counts : numpy.ndarray
        ``(n, devices)`` batch sizes (0: no batch), rows adding up to ``spec.inputs``, each size
        supported.
    order : sequence of sequence of int, optional
        Each device's batches in run order (node positions); default: a topological order.
    release : numpy.ndarray, optional
        ``(n, devices)`` earliest starts (default 0).

    Returns
    -------
    tuple
        The makespan, the ``(n, devices)`` starts and finishes (``nan`` where no batch), and
        the orders used.

    Raises
    ------
    InvalidArgumentError
        Counts of the wrong shape, not adding up to ``L``, an unsupported size, a batch on a
        device that cannot run the node, or orders that miss a batch or contradict the DAG.

    Examples
    --------
    >>> import stagecut as sc
    >>> from stagecut.latency import Devices, LatencyProblem
    >>> p = LatencyProblem(sc.Graph.chain([1.0, 1.0], comm=1.0), Devices.pcie_star(2, cpu=False))
    >>> spec = batch_spec(p, 2)
    >>> evaluate_batched(p, spec, np.array([[2, 0], [1, 1]]))[0]   # 2 ** 0.5, 2 inputs cross (2 each), 1
    6.414213562373095
    """
    n, nd = len(problem), problem.num_devices
    counts = np.asarray(counts)
    if counts.shape != (n, nd):
        raise InvalidArgumentError(f"counts: expected shape {(n, nd)}, got {counts.shape}")
    for v in range(n):
        if int(counts[v].sum()) != spec.inputs:
            raise InvalidArgumentError(f"counts: node {shown(problem.ids[v])} gets {int(counts[v].sum())} "
                                       f"inputs, not {spec.inputs}")
        for d in range(nd):
            b = int(counts[v, d])
            if b and (b not in spec.sizes[d] or not math.isfinite(problem.times[v, d])):
                raise InvalidArgumentError(f"counts: node {shown(problem.ids[v])} cannot run a batch of {b} on "
                                           f"{problem.devices.names[d]}")
    if order is None:
        order = [[v for v in problem.order if counts[v, d]] for d in range(nd)]
    seqs = [list(s) for s in order]
    if sorted((v, d) for d in range(nd) for v in seqs[d]) != [(v, d) for v in range(n) for d in range(nd)
                                                              if counts[v, d]]:
        raise InvalidArgumentError("order: it must list each batch once, on its device")
    start = np.full((n, nd), math.nan)
    fin = np.full((n, nd), math.nan)
    left = [len(problem.pred[v]) for v in range(n)]  # predecessors not yet fully finished
    batches_left = [int((counts[v] > 0).sum()) for v in range(n)]
    head = [0] * nd
    free = [0.0] * nd
    done = 0
    total = sum(len(s) for s in seqs)
    while done < total:
        moved = False
        for d in range(nd):
            while head[d] < len(seqs[d]) and left[seqs[d][head[d]]] == 0:
                v = seqs[d][head[d]]
                s = free[d] if not problem.parallel[d] else 0.0
                if release is not None:
                    s = max(s, float(release[v, d]))
                for u in problem.pred[v]:
                    for a in range(nd):
                        if counts[u, a]:
                            s = max(s, fin[u, a] + (problem.transfer(u, a, d) * counts[u, a] if a != d else 0.0))
                start[v, d] = s
                fin[v, d] = s + spec.time(problem, v, d, int(counts[v, d]))
                free[d] = max(free[d], fin[v, d])
                head[d] += 1
                done += 1
                moved = True
                batches_left[v] -= 1
                if batches_left[v] == 0:
                    for w in problem.succ[v]:
                        left[w] -= 1
        if not moved:
            raise InvalidArgumentError("order: the device orders contradict the DAG (a batch waits for itself)")
    return float(np.nanmax(fin)) if total else 0.0, start, fin, seqs


def _greedy(problem: LatencyProblem, spec: BatchSpec, release: np.ndarray | None) -> np.ndarray | None:
    """Each node in topological order as one batch of ``L`` where it finishes first (memory
    permitting); ``None`` when that fails."""
    n, nd = len(problem), problem.num_devices
    L = spec.inputs
    counts = np.zeros((n, nd), dtype=np.int64)
    fin = np.zeros(n)
    free = np.zeros(nd)
    used = np.zeros(nd)
    for v in problem.order:
        best: tuple[float, int] | None = None
        for d in range(nd):
            need = problem.memory[v] + spec.activation[v] * L
            if L not in spec.sizes[d] or not math.isfinite(problem.times[v, d]) or used[d] + need > problem.capacity[d]:
                continue
            s = 0.0 if problem.parallel[d] else float(free[d])
            if release is not None:
                s = max(s, float(release[v, d]))
            for u in problem.pred[v]:
                a = int(np.argmax(counts[u]))
                s = max(s, fin[u] + (problem.transfer(u, a, d) * L if a != d else 0.0))
            f = s + spec.time(problem, v, d, L)
            if best is None or f < best[0]:
                best = (f, d)
        if best is None:
            return None
        fin[v], d = best
        counts[v, d] = L
        used[d] += problem.memory[v] + spec.activation[v] * L
        if not problem.parallel[d]:
            free[d] = fin[v]
    return counts


def _result(problem: LatencyProblem, spec: BatchSpec, counts: np.ndarray, orders: list[list[int]],
            release: np.ndarray | None, **kw: Any) -> BatchedSchedule:
    mk, start, fin, seqs = evaluate_batched(problem, spec, counts, orders, release)
    names = problem.devices.names
    ids = problem.ids
    stages: list[Stage] = []
    for d, name in enumerate(names):
        if seqs[d]:
            busy = sum(float(fin[v, d] - start[v, d]) for v in seqs[d])
            mem = sum(float(problem.memory[v] + spec.activation[v] * counts[v, d]) for v in seqs[d])
            stages.append(Stage(index=len(stages), device=name, nodes=tuple(ids[v] for v in seqs[d]), load=busy,
                                memory=mem))
    return BatchedSchedule(
        objective=mk, inputs=spec.inputs, devices=names, stages=tuple(stages),
        batches={ids[v]: {names[d]: int(counts[v, d]) for d in range(len(names)) if counts[v, d]}
                 for v in range(len(problem))},
        order={names[d]: tuple(ids[v] for v in seqs[d]) for d in range(len(names))},
        start={names[d]: {ids[v]: float(start[v, d]) for v in seqs[d]} for d in range(len(names))},
        finish={names[d]: {ids[v]: float(fin[v, d]) for v in seqs[d]} for d in range(len(names))}, **kw)


def simple_bound(problem: LatencyProblem, spec: BatchSpec) -> float:
    """The longest path with every node at its shortest batch time (a lower bound on the
    makespan of every batched schedule: each node runs at least one batch).

    Parameters
    ----------
    problem : LatencyProblem
    spec : BatchSpec

    Returns
    -------
    float

    Raises
    ------
    IndexError
        ``spec`` is not of this problem (fewer devices or nodes).

    Examples
    --------
    >>> import stagecut as sc
    >>> from stagecut.latency import Devices, LatencyProblem
    >>> p = LatencyProblem(sc.Graph.chain([1.0, 2.0]), Devices.pcie_star(1, cpu=False))
    >>> simple_bound(p, batch_spec(p, 4))
    3.0
    """
    quick = [min((spec.time(problem, v, d, b) for d in range(problem.num_devices) if math.isfinite(problem.times[v, d])
                  for b in spec.sizes[d]), default=math.inf) for v in range(len(problem))]
    head = [0.0] * len(problem)
    for v in problem.order:
        head[v] = quick[v] + max((head[u] for u in problem.pred[v]), default=0.0)
    return max(head, default=0.0)


def solve_batched(problem: LatencyProblem, inputs: int = 1, *, spec: BatchSpec | None = None,
                  batch_sizes: Sequence[int] | Mapping[str, Sequence[int]] | None = None,
                  alpha: float | Mapping[str, float] | None = None, release: np.ndarray | None = None,
                  time_limit: float | None = None, solver: str = "cbc", threads: int | None = None,
                  seed: int = 0) -> BatchedSchedule:
    """Solve the batched throughput MILP (see the module docs): the least makespan of ``inputs``
    inputs and its bound.

    Parameters
    ----------
    problem : LatencyProblem
    inputs : int
        ``L`` (ignored when ``spec`` is given).
    spec : BatchSpec, optional
        The batch model (default :func:`batch_spec` with ``batch_sizes`` and ``alpha``).
    batch_sizes, alpha
        See :func:`batch_spec`.
    release : numpy.ndarray, optional
        ``(n, devices)`` earliest start of a batch of each node on each device (default 0).
    time_limit : float, optional
        Seconds; on expiry the best schedule and the proven bound, status ``"time_limit"``.
    solver : {"cbc", "highs"}
    threads : int, optional
        Solver threads (default 1).
    seed : int
        The solver's seed.

    Returns
    -------
    BatchedSchedule
        ``method="batched"``; ``lower_bound`` the larger of the MILP's dual bound and the
        longest path at the shortest batch times; ``stats``: ``mip_vars``, ``mip_constraints``,
        ``mip_status``, ``solve_s``, ``greedy`` (the start's makespan).

    Raises
    ------
    InvalidArgumentError
        Not a LatencyProblem, bad batch options, a ``release`` of the wrong shape, a bad solver
        option.
    BackendUnavailableError
        ``solver="highs"`` without HiGHS.
    SolverError
        The solver failed.
    """
    t0 = time.perf_counter()
    problem = check_solver_call(problem, time_limit=time_limit, solver=solver, threads=threads, seed=seed)
    sp = spec if spec is not None else batch_spec(problem, inputs, batch_sizes=batch_sizes, alpha=alpha)
    n, nd = len(problem), problem.num_devices
    if release is not None:
        release = np.asarray(release, dtype=float)
        if release.shape != (n, nd) or not np.isfinite(release).all():
            raise InvalidArgumentError(f"release: expected finite times of shape {(n, nd)}")
    names = problem.devices.names
    with deadline(time_limit):
        start_counts = _greedy(problem, sp, release)
        if start_counts is None:
            return BatchedSchedule(objective=None, status="unknown", method="batched", inputs=sp.inputs,
                                   devices=names, notes=("no greedy batched schedule fits in memory",),
                                   runtime_s=time.perf_counter() - t0)
        known = _result(problem, sp, start_counts, [[v for v in problem.order if start_counts[v, d]]
                                                    for d in range(nd)], release, status="feasible", method="batched")
        assert known.objective is not None
        try:
            if expired():
                raise _BuildExpired
            h = _Built(problem, sp, release, known.objective, solver, threads, seed)
        except _BuildExpired:  # out of time before the model is built: the greedy schedule
            bound = min(simple_bound(problem, sp) if release is None else 0.0, known.objective)
            return dataclasses.replace(known, status="time_limit", lower_bound=bound, seed=seed,
                                       notes=("the time limit passed while the MILP was being built: the greedy "
                                              "schedule is returned",), runtime_s=time.perf_counter() - t0)
        left = remaining()
        out = solve(h.m, time_limit=None if left is None else max(0.05, left), start=h.start_values(start_counts))
    found = known
    if out.objective is not None and out.status != "infeasible":
        counts, orders = h.read()
        cand = _result(problem, sp, counts, orders, release, status="feasible", method="batched")
        if cand.objective is not None and cand.objective < known.objective:
            found = cand
    assert found.objective is not None
    simple = simple_bound(problem, sp) if release is None else 0.0
    lb = out.bound * h.scale if math.isfinite(out.bound) and out.status != "infeasible" else -math.inf
    tol = stated_tolerance(found.objective, h.scale)
    if lb > found.objective + tol:
        lb = -math.inf  # numerical trouble: the bound proves nothing
    bound = min(max(lb, simple), found.objective)
    status: Status = "time_limit" if out.status == "time_limit" else "feasible"
    if found.objective - bound <= tol and out.status in ("optimal", "time_limit", "feasible"):
        status = "optimal"
    stats: dict[str, Stat] = {"mip_vars": out.cols, "mip_constraints": out.rows, "mip_status": out.status,
                              "solve_s": out.seconds, "greedy": known.objective, "mip_scale": h.scale}
    return dataclasses.replace(found, status=status, lower_bound=bound, stats=stats, seed=seed,
                               runtime_s=time.perf_counter() - t0)


class _BuildExpired(Exception):
    """The time limit passed while the model was being built."""


class _Built:
    """The batched MILP of a problem, in model units (see the module docs)."""

    def __init__(self, problem: LatencyProblem, spec: BatchSpec, release: np.ndarray | None, upper: float,
                 solver: str, threads: int | None, seed: int) -> None:
        mip = import_mip()
        self.problem, self.spec, self.release = problem, spec, release
        n, nd, L = len(problem), problem.num_devices, spec.inputs
        scale = self.scale = reference_scale([upper], upper)
        U = upper / scale * (1 + 1e-6) + MODEL_TOL
        rel = np.zeros((n, nd)) if release is None else release / scale
        t = {(v, d, b): spec.time(problem, v, d, b) / scale for v in range(n) for d in range(nd)
             if math.isfinite(problem.times[v, d]) for b in spec.sizes[d]
             if problem.memory[v] + spec.activation[v] * b <= problem.capacity[d]}
        m = self.m = new_model("batched_milp", solver=solver, threads=threads, seed=seed)
        if str(solver).lower() == "cbc":
            m.preprocess = 0  # (as in the latency MILP: CBC's preprocessing crashed under time limits)
        quick = [min((t[k] for k in t if k[0] == v), default=math.inf) for v in range(n)]
        head, tail = [0.0] * n, [0.0] * n
        for v in problem.order:
            head[v] = max((head[u] + quick[u] for u in problem.pred[v]), default=float(rel[v].min()))
        for v in reversed(problem.order):
            tail[v] = quick[v] + max((tail[s] for s in problem.succ[v]), default=0.0)
        self.y = {k: m.add_var(f"y_{k[0]}_{k[1]}_{k[2]}", var_type=mip.BINARY) for k in t}
        devs = [[d for d in range(nd) if any((v, d, b) in t for b in spec.sizes[d])] for v in range(n)]
        self.devs = devs
        y = self.y
        self.S = {(v, d): m.add_var(f"S_{v}_{d}", lb=head[v], ub=max(head[v], U - tail[v]))
                  for v in range(n) for d in devs[v]}
        S = self.S
        C = self.C = m.add_var("C", lb=0.0, ub=U)
        m.objective = mip.minimize(C)

        def z(v: int, d: int) -> Any:
            return mip.xsum(y[v, d, b] for b in spec.sizes[d] if (v, d, b) in y)

        def cnt(v: int, d: int) -> Any:
            return mip.xsum(b * y[v, d, b] for b in spec.sizes[d] if (v, d, b) in y)

        def P(v: int, d: int) -> Any:
            return mip.xsum(t[v, d, b] * y[v, d, b] for b in spec.sizes[d] if (v, d, b) in y)

        pmax = {(v, d): max(t[v, d, b] for b in spec.sizes[d] if (v, d, b) in t) for v in range(n) for d in devs[v]}
        for v in range(n):
            add(m, mip.xsum(cnt(v, d) for d in devs[v]) == L)
            for d in devs[v]:
                add(m, z(v, d) <= 1)
                add(m, C >= S[v, d] + P(v, d) + (tail[v] - quick[v]))
                if rel[v, d] > head[v]:
                    add(m, S[v, d] >= float(rel[v, d]) * z(v, d))
        for d in range(nd):
            on = [v for v in range(n) if d in devs[v]]
            if not problem.parallel[d] and on:
                add(m, C >= mip.xsum(P(v, d) for v in on))
            if math.isfinite(problem.capacity[d]) and on:
                cap = float(problem.capacity[d])
                add(m, mip.xsum(float(problem.memory[v]) / cap * z(v, d) + float(spec.activation[v]) / cap * cnt(v, d)
                                for v in on) <= 1)
        for v in range(n):
            if expired():
                raise _BuildExpired
            for u in problem.pred[v]:
                for b in devs[v]:
                    for a in devs[u]:
                        tr = problem.transfer(u, a, b) / scale if a != b else 0.0
                        big = max(0.0, U - tail[u] + pmax[u, a] + tr * L - head[v])
                        add(m, S[v, b] >= S[u, a] + P(u, a) + (tr * cnt(u, a) if tr else 0.0) - big * (1 - z(v, b)))
        reach = transitive_closure(problem)
        self.o: dict[tuple[int, int, int], Any] = {}
        for u in range(n):
            if expired():
                raise _BuildExpired
            for v in range(u + 1, n):
                if (reach[u] >> v) & 1 or (reach[v] >> u) & 1:
                    continue
                for d in devs[u]:
                    if problem.parallel[d] or d not in devs[v]:
                        continue
                    o = self.o[u, v, d] = m.add_var(f"o_{u}_{v}_{d}", var_type=mip.BINARY)
                    m_uv = max(0.0, U - tail[u] + pmax[u, d] - head[v])
                    m_vu = max(0.0, U - tail[v] + pmax[v, d] - head[u])
                    add(m, S[v, d] >= S[u, d] + P(u, d) - m_uv * (3 - o - z(u, d) - z(v, d)))
                    add(m, S[u, d] >= S[v, d] + P(v, d) - m_vu * (2 + o - z(u, d) - z(v, d)))

    def start_values(self, counts: np.ndarray) -> list[tuple[Any, float]]:
        """The MIP start of a batched placement timed by the evaluator (topological orders)."""
        problem = self.problem
        nd = problem.num_devices
        orders = [[v for v in problem.order if counts[v, d]] for d in range(nd)]
        mk, start, _, _ = evaluate_batched(problem, self.spec, counts, orders, self.release)
        out = [(var, float(counts[v, d] == b)) for (v, d, b), var in self.y.items()]
        out += [(var, float(start[v, d]) / self.scale if counts[v, d] else float(var.lb))
                for (v, d), var in self.S.items()]
        pos = {(v, d): k for d in range(nd) for k, v in enumerate(orders[d])}
        out += [(var, float(pos.get((u, d), 0) < pos.get((v, d), 1))) for (u, v, d), var in self.o.items()]
        out.append((self.C, mk / self.scale))
        return out

    def read(self) -> tuple[np.ndarray, list[list[int]]]:
        """The MILP's batch sizes and per-device orders (by start, ties and DAG by topological rank)."""
        problem, spec = self.problem, self.spec
        n, nd = len(problem), problem.num_devices
        counts = np.zeros((n, nd), dtype=np.int64)
        for (v, d, b), var in self.y.items():
            if (var.x or 0.0) > 0.5:
                counts[v, d] += b
        for v in range(n):  # (a solver's rounding: keep the sizes adding up)
            if counts[v].sum() != spec.inputs:
                counts[v] = 0
                counts[v, max(self.devs[v], key=lambda d: self.S[v, d].x or 0.0)] = spec.inputs
        rank = {v: r for r, v in enumerate(problem.order)}
        orders = []
        for d in range(nd):
            on = [v for v in range(n) if counts[v, d]]
            orders.append(sorted(on, key=lambda v: (round(float(self.S[v, d].x or 0.0), 7), rank[v])))
        try:
            evaluate_batched(problem, spec, counts, orders, self.release)
        except InvalidArgumentError:
            orders = [sorted(s, key=lambda v: rank[v]) for s in orders]
        return counts, orders
