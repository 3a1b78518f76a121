"""Stage times that match measurement: time whole pieces of the traced program as they are built,
calibrate a per-operator cost model on them, and check a plan's stages against it.

Timing an operator alone (``timing="measure"``) charges it the interpreter's per-call overhead
and runs it with cold caches, which over-predicts whole stages several times over and unevenly.
Here the traced program is cut with ``torch.fx.passes.split_module`` into pieces that run as
generated Python code, as a pipeline stage does, and each piece is timed on its real inputs:

* :func:`calibrate` (:mod:`stagecut.frontends.calibrate`, building and timing the pieces in
  :mod:`stagecut.frontends.piece_timing`) cuts the program into ``segments`` runs of program order of about equal
  FLOPs, times each in situ (passes over the pieces in program order; thread CPU time on CPU,
  the median of ``3 * repeat`` passes after ``warmup``),
  subtracts the cost of calling an empty piece, and fits a per-operator model by non-negative
  least squares over the segments: ``time = a_k + b_k * flops + c_k * output bytes`` for each
  operator kind ``k`` (convolution, matrix product, other; views cost ``a``). Each node's time
  is then the model's, scaled so that every segment's nodes sum to that segment's measured
  time: exact at the segment boundaries, the model's shape inside them.
* :func:`measure` builds the stages of a plan the same way and reports, per stage, the
  predicted compute (the trace's node times) against the measured time, and which stage is the
  bottleneck by each.
* :func:`refine` re-plans on measured stage times: each stage's nodes are scaled by its
  measured/predicted ratio, the graph re-planned, and the new plan measured, until the
  measured bottleneck stage stops moving (or ``rounds`` run out); the best measured plan wins.

Runs are made under ``torch.no_grad()``. On the CPU (``device="cpu"``, the default) each call is
timed with ``time.thread_time``, which counts the calling thread's CPU time and so is robust to
other processes: set ``torch.set_num_threads(1)`` so that the operators run on that thread. With
``device="cuda"`` (or ``"cuda:N"``) the model and inputs are copied to the GPU and each call is
timed with CUDA events; that path has not been run by this project's tests (no GPU where they
run), and a machine without CUDA refuses it with
:class:`~stagecut.errors.BackendUnavailableError`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stagecut.errors import InvalidArgumentError
from stagecut.frontends._common import NotExpressibleError
from stagecut.frontends.calibrate import Calibration, calibrate, calibrated_trace
from stagecut.frontends.piece_timing import _pieces, _time_groups, check_device
from stagecut.graph import ACCELERATOR
from stagecut.results import Plan
from stagecut.validate import check_int

__all__ = ["Calibration", "StageTiming", "Measurement", "calibrate", "calibrated_trace", "measure", "measure_many",
           "refine", "slowest_within_noise"]


def slowest_within_noise(passes: Sequence[Sequence[float]], *, confidence: float = 0.95, resamples: int = 2000,
                         seed: int = 0) -> tuple[int, ...]:
    """The stages that the passes cannot tell apart from the slowest one.

    ``passes[i][p]`` is stage ``i``'s time in pass ``p`` (every stage timed in the same passes).
    The slowest stage ``m`` has the largest median. Stage ``i`` is *within noise* of it unless
    ``m`` is slower in a paired sense: over ``resamples`` bootstrap resamplings of the passes
    (seeded), the median of ``passes[m][p] - passes[i][p]`` is positive in more than
    ``confidence`` of them (a one-sided test at that level; the machine's speed of each pass
    cancels out in the difference). With fewer than 2 passes nothing can be told apart: every
    stage is returned.

    Returns
    -------
    tuple of int
        The stage indices, in order; ``m`` is always one of them.

    Examples
    --------
    >>> slowest_within_noise([[10.0, 11.0, 10.5, 10.2], [10.1, 11.2, 10.4, 10.3], [5.0, 5.1, 5.2, 5.0]])
    (0, 1)
    """
    if not 0.0 < confidence < 1.0:
        raise InvalidArgumentError(f"confidence must be in (0, 1), got {confidence!r}")
    resamples = check_int(resamples, "resamples", minimum=1, error=InvalidArgumentError)
    try:
        a = np.asarray(passes, dtype=float)
    except (TypeError, ValueError):
        a = np.zeros(0)
    if a.ndim != 2 or a.shape[0] == 0:
        raise InvalidArgumentError("passes must be one non-empty row of times per stage, all of one length")
    if a.shape[1] < 2:
        return tuple(range(a.shape[0]))
    m = int(np.argmax(np.median(a, axis=1)))
    idx = np.random.default_rng(seed).integers(0, a.shape[1], size=(resamples, a.shape[1]))
    boot = np.median((a[m] - a)[:, idx], axis=2)  # stages x resamples: the median paired difference
    slower = (boot > 0).mean(axis=1) > confidence
    return tuple(i for i in range(a.shape[0]) if i == m or not slower[i])


@dataclass(frozen=True)
class StageTiming:
    """One stage: predicted compute (seconds, the trace's node times) and measured seconds.

    ``predicted_now``: the prediction with each calibration segment's node times rescaled to
    that segment's time measured in the same passes as the stages (the median over the passes;
    ``None`` without a calibration): what the calibrated model predicts at the machine's speed
    of the moment. ``ratio_now``: the median over the passes of the stage's measured time over
    that pass's ``predicted_now`` (a burst of load that slows one pass cancels out).
    ``backward``: the measured seconds of the backward pass (included in ``measured``).
    ``spread``: half the interquartile range of the stage's measured seconds over the passes,
    the noise band of ``measured`` (``0.0`` with fewer than 2 passes). ``passes``: the stage's
    measured seconds in each pass, in order (for paired comparisons between plans timed in the
    same passes).
    """

    index: int
    nodes: int
    predicted: float
    measured: float
    predicted_now: float | None = None
    backward: float = 0.0
    ratio_now: float | None = None
    spread: float = 0.0
    passes: tuple[float, ...] = dataclasses.field(default=(), repr=False)

    @property
    def ratio(self) -> float:
        """``measured / predicted`` (``inf`` when nothing was predicted)."""
        return self.measured / self.predicted if self.predicted > 0 else math.inf


@dataclass(frozen=True)
class Measurement:
    """:func:`measure`'s report: per-stage predicted and measured times.

    Attributes
    ----------
    stages : tuple of StageTiming
    predicted_bottleneck, measured_bottleneck : int
        The stage with the largest predicted / measured time.
    overhead : float
        Seconds of one call of an empty piece, subtracted from each measurement.
    drift : float, optional
        The calibration segments' total time measured in the same passes, over their total at
        calibration (``None`` without a calibration): how much faster (< 1) or slower (> 1)
        the machine ran than when it was calibrated.
    backward : bool
        Whether the backward pass was timed (training).
    """

    stages: tuple[StageTiming, ...]
    predicted_bottleneck: int
    measured_bottleneck: int
    overhead: float
    drift: float | None = None
    backward: bool = False

    @property
    def measured_max(self) -> float:
        """The bottleneck stage's measured seconds."""
        return max(s.measured for s in self.stages)

    @property
    def bottleneck_ties(self) -> tuple[int, ...]:
        """The stages the passes cannot tell apart from the measured bottleneck
        (:func:`slowest_within_noise` at 95%): when the predicted bottleneck is one of them, the
        prediction named the bottleneck as well as this measurement can. Stages recorded
        without their passes: the measured bottleneck alone."""
        n = len(self.stages[0].passes)
        if n == 0 or any(len(s.passes) != n for s in self.stages):  # no passes recorded: nothing to pair
            return (self.measured_bottleneck,)
        return tuple(sorted({self.measured_bottleneck, *slowest_within_noise([s.passes for s in self.stages])}))

    @property
    def predicted_now_bottleneck(self) -> int | None:
        """The stage with the largest ``predicted_now`` (``None`` without a calibration)."""
        now = [s.predicted_now for s in self.stages]
        if any(x is None for x in now):
            return None
        return int(np.argmax(np.array(now, dtype=float)))

    def table(self) -> str:
        """A text table: stage, nodes, predicted ms, measured ms, ratio (and, with a
        calibration, the prediction at the speed of the moment and its ratio)."""
        now = self.drift is not None
        rows = ["stage  nodes  predicted ms  measured ms  measured/predicted" +
                ("  predicted now ms  measured/now" if now else "")]
        for s in self.stages:
            mark = (" <- bottleneck (measured)" if s.index == self.measured_bottleneck else "") + \
                (" <- bottleneck (predicted)" if s.index == self.predicted_bottleneck else "")
            extra = (f"  {1e3 * (s.predicted_now or 0.0):16.3f}  {s.ratio_now or 0.0:12.3f}" if now else "")
            rows.append(f"{s.index:5d}  {s.nodes:5d}  {1e3 * s.predicted:12.3f}  {1e3 * s.measured:11.3f}  "
                        f"{s.ratio:18.3f}{extra}{mark}")
        ties = self.bottleneck_ties
        if len(ties) > 1:
            rows.append("stages " + ", ".join(map(str, ties)) + " are within the measurement's noise of the slowest "
                        f"(paired over {len(self.stages[0].passes)} passes, 95%)")
        if now:
            rows.append(f"machine speed against the calibration: the calibration's segments took {self.drift:.3f}x "
                        "their calibrated time in the same passes")
        return "\n".join(rows)


# ----------------------------------------------------------------------------- plans
def _stage_map(plan: Plan, trace: Any) -> dict[str, int]:
    from stagecut.frontends.split import stage_of_nodes

    return stage_of_nodes(plan, trace)


def _groups(trace: Any, stage_maps: Sequence[Mapping[str, int]], reference: bool, device: str
            ) -> tuple[list[tuple[list[Any], list[tuple[Any, ...]]]], Calibration | None]:
    """The built pieces of each stage map, and (``reference`` and a calibrated trace) the
    calibration's segments as a last group, to be timed in the same passes."""
    built = [_pieces(trace, st, device)[:2] for st in stage_maps]
    cal = getattr(trace, "calibration", None) if reference else None
    if cal is not None:
        built.append(_pieces(trace, {v: i for i, s in enumerate(cal.segments) for v in s}, device)[:2])
    return built, cal


def _device(trace: Any, device: str | None) -> str:
    """The device to time on: ``device``, else the calibration's, else the CPU; a calibrated
    trace is measured where it was calibrated (times on two devices do not compare)."""
    cal = getattr(trace, "calibration", None)
    at = cal.device if cal is not None else "cpu"
    d = check_device(at if device is None else device)
    if cal is not None and d != at:
        raise InvalidArgumentError(f"device={device!r}: this trace was calibrated on {at!r}; measure it there, or "
                                   f"calibrate it on {d!r}")
    return d


def measure(trace: Any, plan: Plan, *, warmup: int = 2, repeat: int = 5, backward: bool | None = None,
            reference: bool = True, device: str | None = None) -> Measurement:
    """Build each stage of ``plan`` (``split_module`` of the exported program) and time it on
    its real inputs: predicted (the trace's compute) against measured, per stage.

    Parameters
    ----------
    trace : stagecut.frontends.torch.TorchTrace
        The trace ``plan`` was made on (holding its model).
    plan : Plan
    warmup, repeat : int
    backward : bool, optional
        Time each stage's forward (autograd on) and backward pass, against the forward and
        backward nodes' compute. Default: whether the trace is a training trace.
    reference : bool
        With a calibrated trace, also time the calibration's segments in the same passes, and
        report the prediction at the speed of the moment (``StageTiming.predicted_now``) and
        the machine's drift since the calibration (``Measurement.drift``).
    device : str, optional
        ``"cpu"`` (thread CPU time) or ``"cuda"`` / ``"cuda:N"`` (CUDA events; untested here,
        see the module docs). Default: where the trace was calibrated, else the CPU.

    Returns
    -------
    Measurement

    Raises
    ------
    InvalidArgumentError
        A trace without its model; a malformed ``device``, or not the calibration's.
    BackendUnavailableError
        ``device="cuda"`` on a machine without CUDA.
    NotExpressibleError
        A plan not over this trace, or stages out of pipeline order; a ``tracer="fx"`` trace.
    """
    return measure_many(trace, {"plan": plan}, warmup=warmup, repeat=repeat, backward=backward,
                        reference=reference, device=device)["plan"]


def _report(trace: Any, stage: Mapping[str, int], passes: Sequence[Sequence[tuple[float, float]]], backward: bool,
            overhead: float, now: tuple[Calibration, Sequence[Sequence[tuple[float, float]]]] | None
            ) -> Measurement:
    """The measurement of one plan from its stages' timed passes (and the calibration's
    segments timed in the same passes)."""
    k = max(stage.values()) + 1
    if len(passes) != k:
        raise NotExpressibleError(f"the program split into {len(passes)} pieces, not the plan's {k} stages")
    seg_of = {v: j for j, seg in enumerate(now[0].segments) for v in seg} if now is not None else {}
    n_seg = len(now[0].segments) if now is not None else 0
    coef_f = np.zeros((k, n_seg))  # stage i's prediction per second of segment j's time, forward / backward
    coef_b = np.zeros((k, n_seg))
    predicted = [0.0] * k
    count = [0] * k
    for n in trace.graph.nodes:
        v = str(n.id)
        back = bool(n.backward)
        fid = v[:-4] if back and v.endswith("_bwd") else v
        if fid not in stage or (back and not backward):
            continue
        i = stage[fid]
        t = n.compute.get(ACCELERATOR, 0.0)
        predicted[i] += t
        count[i] += 1
        if now is not None and fid in seg_of:
            j = seg_of[fid]
            cal = now[0]
            if back and cal.backward_measured:
                coef_b[i, j] += t / cal.backward_measured[j] if cal.backward_measured[j] > 0 else 0.0
            else:  # no backward calibration: the backward scales as the forward of its segment
                coef_f[i, j] += t / cal.measured[j] if cal.measured[j] > 0 else 0.0
    f = np.array([[p[0] for p in x] for x in passes])  # stage x pass
    b = np.array([[p[1] for p in x] for x in passes]) if backward else np.zeros_like(f)
    total = f + b
    measured = [float(np.median(x)) for x in total]
    bwd = [float(np.median(x)) for x in b]
    spread = [float(np.subtract(*np.percentile(x, [75, 25]))) / 2 if len(x) > 1 else 0.0 for x in total]
    drift = None
    pred_now: list[float | None] = [None] * k
    ratio_now: list[float | None] = [None] * k
    if now is not None:
        cal, seg_passes = now
        sf = np.array([[p[0] for p in x] for x in seg_passes])  # segment x pass
        sb = np.array([[p[1] for p in x] for x in seg_passes])
        per_pass = coef_f @ sf + coef_b @ sb  # stage x pass: the prediction at each pass's speed
        then = math.fsum(cal.measured) + (math.fsum(cal.backward_measured) if backward else 0.0)
        drift = float(np.median(sf.sum(axis=0) + (sb.sum(axis=0) if backward else 0.0))) / then if then > 0 else None
        for i in range(k):
            pred_now[i] = float(np.median(per_pass[i]))
            ok = per_pass[i] > 0
            ratio_now[i] = float(np.median(total[i][ok] / per_pass[i][ok])) if ok.any() else math.inf
    stages = tuple(StageTiming(index=i, nodes=count[i], predicted=predicted[i], measured=measured[i],
                               predicted_now=pred_now[i], backward=bwd[i], ratio_now=ratio_now[i],
                               spread=spread[i], passes=tuple(float(x) for x in total[i]))
                   for i in range(k))
    return Measurement(stages=stages, predicted_bottleneck=int(np.argmax(predicted)),
                       measured_bottleneck=int(np.argmax(measured)), overhead=overhead, drift=drift,
                       backward=backward)


def measure_many(trace: Any, plans: Mapping[str, Plan], *, warmup: int = 2, repeat: int = 5,
                 backward: bool | None = None, reference: bool = True, device: str | None = None
                 ) -> dict[str, Measurement]:
    """:func:`measure` for several plans of one trace, timed in the same passes (each pass runs
    every plan's stages, the plans taken in turn), so that a change in the machine's load
    between plans does not decide which one measures faster.

    Parameters
    ----------
    trace : TorchTrace
    plans : mapping of str to Plan
    warmup, repeat : int
    backward, reference : bool
        As for :func:`measure`.
    device : str, optional
        As for :func:`measure`.

    Returns
    -------
    dict of str to Measurement

    Raises
    ------
    InvalidArgumentError, BackendUnavailableError, NotExpressibleError
        As :func:`measure`.
    """
    warmup = check_int(warmup, "warmup", error=InvalidArgumentError)
    repeat = check_int(repeat, "repeat", minimum=1, error=InvalidArgumentError)
    dev = _device(trace, device)
    back = bool(trace.graph.is_training) if backward is None else bool(backward)
    names = list(plans)
    stages = [_stage_map(plans[n], trace) for n in names]
    built, cal = _groups(trace, stages, reference, dev)
    timed = _time_groups(built, warmup, repeat, backward=back, device=dev)
    now = (cal, timed.passes[-1]) if cal is not None else None
    return {n: _report(trace, st, ps, back, timed.overhead, now) for n, st, ps in zip(names, stages, timed.passes)}


def refine(trace: Any, plan: Plan, devices: int, *, rounds: int = 3, warmup: int = 2, repeat: int = 5,
           partition: Callable[[Any, int], Plan] | None = None, device: str | None = None,
           candidates: Sequence[Plan] = ()) -> tuple[Plan, Measurement, Any]:
    """Re-plan on measured stage times until the measured bottleneck stage stops moving, then
    keep the plan that measures fastest against the others in the same passes.

    Each round measures the current plan, scales the compute of each stage's nodes by its
    measured/predicted ratio (the trace then predicts that plan's stages exactly), and plans
    again on the scaled trace; it stops when the new plan equals the old one, when the measured
    bottleneck stays on the same stage, or after ``rounds``. Then every distinct plan met (the
    start, each re-plan, and ``candidates``) is timed in the same passes (:func:`measure_many`),
    so that the machine's speed, which can move by tens of percent between measurements, does
    not decide which wins, and the one with the smallest measured bottleneck is returned (the
    earliest of equal ones: the start first).

    Parameters
    ----------
    trace : TorchTrace
        The trace ``plan`` was made on (holding its model).
    plan : Plan
    devices : int
        Stages for the re-planning.
    rounds : int
        At most this many re-plans.
    warmup, repeat : int
        For :func:`measure`.
    partition : callable, optional
        ``partition(trace, devices) -> Plan`` (default
        :func:`stagecut.frontends.program_order.partition_trace`).
    device : str, optional
        As for :func:`measure`.
    candidates : sequence of Plan
        More plans of the same trace for the final comparison: for instance the best split
        between top-level layers (``partition_trace(trace, devices, family="layer")``), which
        the cost model may rank within its error of the start.

    Returns
    -------
    (Plan, Measurement, TorchTrace)
        The plan that measured fastest in the final comparison, its measurement there (predicted
        times from ``trace``), and the trace it was planned on (``trace`` for the start and the
        candidates, a scaled trace for a re-plan).

    Raises
    ------
    InvalidArgumentError, NotExpressibleError
        As :func:`measure`; a candidate that is not a :class:`~stagecut.results.Plan`.
    """
    from stagecut.frontends.program_order import partition_trace

    rounds = check_int(rounds, "rounds", minimum=0, error=InvalidArgumentError)
    candidates = list(candidates)
    for i, c in enumerate(candidates):
        if not isinstance(c, Plan):
            raise InvalidArgumentError(f"candidates[{i}] must be a Plan, got {type(c).__name__}")
    _device(trace, device)  # refused before any timing
    plan_fn = partition if partition is not None else partition_trace
    current, cur_trace = plan, trace
    pool: dict[Any, tuple[Plan, Any]] = {_key(plan): (plan, trace)}
    for c in candidates:
        pool.setdefault(_key(c), (c, trace))
    m = measure(cur_trace, current, warmup=warmup, repeat=repeat, reference=False, device=device) if rounds else None
    for _ in range(rounds):
        assert m is not None
        stage = _stage_map(current, cur_trace)
        scale = [s.ratio if math.isfinite(s.ratio) and s.predicted > 0 else 1.0 for s in m.stages]
        fwd_of = {v: scale[s] for v, s in stage.items()}

        def scaled(n: Any, fwd_of: Mapping[str, float] = fwd_of) -> Any:
            key = str(n.id)[:-4] if n.backward and str(n.id).endswith("_bwd") else str(n.id)
            f = fwd_of.get(key, 1.0)
            return dataclasses.replace(n, compute={k: t * f for k, t in n.compute.items()})

        cur_trace = dataclasses.replace(cur_trace, graph=cur_trace.graph.map_nodes(scaled),
                                        notes=(*cur_trace.notes, "stage times scaled to a measurement"))
        nxt = plan_fn(cur_trace, devices)
        if nxt.assignment() == current.assignment():
            break
        pool.setdefault(_key(nxt), (nxt, cur_trace))
        m2 = measure(cur_trace, nxt, warmup=warmup, repeat=repeat, reference=False, device=device)
        moved = m2.measured_bottleneck != m.measured_bottleneck
        current, m = nxt, m2
        if not moved:
            break
    entries = list(pool.values())
    timed = measure_many(trace, {str(i): p for i, (p, _) in enumerate(entries)}, warmup=warmup, repeat=repeat,
                         reference=False, device=device)
    best = min(range(len(entries)), key=lambda i: (timed[str(i)].measured_max, i))
    return entries[best][0], timed[str(best)], entries[best][1]


def _key(plan: Plan) -> Any:
    """A plan's identity for :func:`refine`'s pool: which stage each node is on."""
    return frozenset(plan.assignment().items())
