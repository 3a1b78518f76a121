"""A per-operator cost model calibrated on measured segments of a traced program.

:func:`calibrate` cuts the program into ``segments`` runs of program order of about equal FLOPs,
times each in situ (:mod:`stagecut.frontends.piece_timing`: passes over the pieces in program
order; thread CPU time on CPU, the median of ``3 * repeat`` passes after ``warmup``), subtracts
the cost of calling an empty piece, and fits a per-operator model by non-negative least squares
over the segments: ``time = a_k + b_k * flops + c_k * output bytes`` for each operator kind ``k``
(convolution, matrix product, other; views cost ``a``). Each node's time is then the model's,
scaled so that every segment's nodes sum to that segment's measured time: exact at the segment
boundaries, the model's shape inside them. :func:`calibrated_trace` is the trace with those times.

Both are importable from :mod:`stagecut.frontends.measure` too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stagecut.errors import InvalidArgumentError
from stagecut.frontends._common import NotExpressibleError
from stagecut.frontends.piece_timing import _pieces, _time_groups, check_device
from stagecut.validate import check_int

__all__ = ["Calibration", "calibrate", "calibrated_trace"]

_KINDS = ("conv", "matmul", "other", "view")
_MATMUL = ("linear", "addmm", ".mm.", "bmm", "matmul", "baddbmm", "scaled_dot_product")


def _kind(target: str, flops: float, out_bytes: float) -> str:
    t = target.lower()
    if "conv" in t:
        return "conv"
    if any(m in t for m in _MATMUL) or t.endswith(".mm"):
        return "matmul"
    if flops == 0:
        return "view"
    return "other"


@dataclass(frozen=True)
class Calibration:
    """A per-operator cost model fitted on measured segments (see the module docs).

    Attributes
    ----------
    params : mapping of str to tuple of float
        Per kind ``(seconds per call, seconds per FLOP, seconds per output byte)``.
    segments : tuple of tuple of str
        The node ids of each timed segment, in program order.
    measured : tuple of float
        Each segment's measured seconds (call overhead subtracted); the forward pass with
        autograd on when the backward was calibrated too.
    modelled : tuple of float
        Each segment's time by the fitted model alone.
    overhead : float
        Seconds of one call of an empty piece (subtracted from every measurement).
    node_seconds : mapping of str to float
        The calibrated time of each node (the model scaled to its segment's measurement).
    backward_factors : mapping of str to float, optional
        Per operator kind, backward seconds per forward second (``None``: the backward was not
        calibrated).
    backward_measured : tuple of float
        Each segment's measured backward seconds (empty when not calibrated).
    backward_seconds : mapping of str to float
        The calibrated backward time of each node (its kind's factor times its forward time,
        scaled to its segment's measured backward).
    device : str
        Where the segments were timed (``"cpu"``, or ``"cuda:N"``: CUDA event time).
    """

    params: Mapping[str, tuple[float, float, float]]
    segments: tuple[tuple[str, ...], ...]
    measured: tuple[float, ...]
    modelled: tuple[float, ...]
    overhead: float
    node_seconds: Mapping[str, float] = field(repr=False)
    backward_factors: Mapping[str, float] | None = None
    backward_measured: tuple[float, ...] = ()
    backward_seconds: Mapping[str, float] = field(default_factory=dict, repr=False)
    device: str = "cpu"

    @property
    def fit_error(self) -> float:
        """The largest ``|modelled / measured - 1|`` over the segments (how well the model alone
        predicts; the node times are scaled to the measurements, so stages made of whole
        segments are predicted exactly)."""
        return max((abs(m / x - 1) for m, x in zip(self.modelled, self.measured) if x > 0), default=0.0)


def _segments(trace: Any, count: int) -> list[list[str]]:
    """Program order cut into about ``count`` runs of about equal FLOPs (and nodes)."""
    order = list(trace.order)
    w = [trace.flops[v] for v in order]
    total = math.fsum(w) or 1.0
    weight = [0.5 * x / total + 0.5 / len(order) for x in w]  # FLOPs and node count alike
    segs: list[list[str]] = [[]]
    acc = 0.0
    for v, x in zip(order, weight):
        if segs[-1] and acc + x / 2 > len(segs) / count and len(segs) < count:
            segs.append([])
        segs[-1].append(v)
        acc += x
    return segs


def _features(trace: Any, v: str) -> np.ndarray:
    f, b = float(trace.flops[v]), float(trace.output_bytes[v])
    k = _kind(str(trace.targets[v]), f, b)
    row = np.zeros(3 * len(_KINDS))
    j = 3 * _KINDS.index(k)
    row[j] = 1.0
    if k != "view":
        row[j + 1] = f * 1e-9  # scaled: GFLOPs and MB, so the columns are comparable
        row[j + 2] = b * 1e-6
    return row


def _nnls(a: np.ndarray, b: np.ndarray, iterations: int = 500) -> np.ndarray:
    """Non-negative least squares (Lawson and Hanson's active-set method)."""
    m, n = a.shape
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    scale = np.maximum(np.abs(a).max(axis=0), 1e-300)
    a = a / scale
    for _ in range(iterations):
        w = a.T @ (b - a @ x)
        if passive.all() or (w[~passive] <= 1e-12 * max(1.0, float(np.abs(w).max()))).all():
            break
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            bad = passive & (z <= 0)
            alpha = float(np.min(x[bad] / (x[bad] - z[bad])))
            x = x + alpha * (z - x)
            passive &= x > 1e-15
    out: np.ndarray = x / scale
    return out


def calibrate(trace: Any, *, segments: int = 32, warmup: int = 2, repeat: int = 5,
              backward: bool = False, device: str = "cpu") -> Calibration:
    """Fit the per-operator model on measured segments of the traced program (module docs).

    Parameters
    ----------
    trace : stagecut.frontends.torch.TorchTrace
        A ``torch.export`` trace that holds its model and example inputs.
    segments : int
        How many runs of program order to time (at least 2).
    warmup, repeat : int
        Runs of each segment before and while timing.
    backward : bool
        Also time each segment's backward pass (the forward then runs with autograd on, as in
        training) and fit a backward factor per operator kind: backward seconds = the kind's
        factor times the node's forward seconds, non-negative least squares over the segments,
        then scaled so that each segment's nodes sum to its measured backward time.
    device : str
        ``"cpu"`` (thread CPU time; set ``torch.set_num_threads(1)``), or ``"cuda"`` /
        ``"cuda:N"``: the model and inputs copied there, each segment timed with CUDA events
        (written for GPUs, not run by this project's tests: they have none).

    Returns
    -------
    Calibration

    Raises
    ------
    InvalidArgumentError
        A trace without its model, bad counts, a malformed ``device``.
    BackendUnavailableError
        ``device="cuda"`` on a machine without CUDA.
    NotExpressibleError
        A ``tracer="fx"`` trace.
    """
    segments = check_int(segments, "segments", minimum=2, error=InvalidArgumentError)
    warmup = check_int(warmup, "warmup", error=InvalidArgumentError)
    repeat = check_int(repeat, "repeat", minimum=1, error=InvalidArgumentError)
    device = check_device(device)
    segs = [s for s in _segments(trace, min(segments, len(trace.order))) if s]
    piece_of = {v: i for i, s in enumerate(segs) for v in s}
    subs, inputs, _ = _pieces(trace, piece_of, device)
    timed = _time_groups([(subs, inputs)], warmup, repeat, backward=bool(backward), device=device)
    measured, overhead = timed.forward[0], timed.overhead
    if len(measured) != len(segs):  # a segment with no operator of its own (cannot happen with
        raise NotExpressibleError("the program did not split into the segments asked for")  # the trace's nodes)
    feats = {v: _features(trace, v) for v in trace.order}
    a = np.array([np.sum([feats[v] for v in s], axis=0) for s in segs])
    x = _nnls(a, np.array(measured))
    modelled = a @ x
    node = _scaled({v: float(feats[v] @ x) for v in trace.order}, segs, measured)
    params = {k: (float(x[3 * j]), float(x[3 * j + 1]) * 1e-9, float(x[3 * j + 2]) * 1e-6)
              for j, k in enumerate(_KINDS)}
    cal = Calibration(params=params, segments=tuple(tuple(s) for s in segs), measured=tuple(measured),
                      modelled=tuple(float(v) for v in modelled), overhead=overhead, node_seconds=node,
                      device=device)
    if not backward:
        return cal
    kind = {v: _KINDS.index(_kind(str(trace.targets[v]), float(trace.flops[v]), 0.0)) for v in trace.order}
    per_kind = np.zeros((len(segs), len(_KINDS)))
    for i, s in enumerate(segs):
        for v in s:
            per_kind[i, kind[v]] += node[v]
    f = _nnls(per_kind, np.array(timed.backward[0]))
    bwd = _scaled({v: float(f[kind[v]]) * node[v] for v in trace.order}, segs, timed.backward[0])
    return dataclasses.replace(cal, backward_factors={k: float(f[j]) for j, k in enumerate(_KINDS)},
                               backward_measured=tuple(timed.backward[0]), backward_seconds=bwd)


def _scaled(model: Mapping[str, float], segs: Sequence[Sequence[str]], measured: Sequence[float]) -> dict[str, float]:
    """Each node's modelled time scaled so that every segment's nodes sum to its measurement
    (by node count where the model gives a segment nothing)."""
    out: dict[str, float] = {}
    for s, m in zip(segs, measured):
        total = math.fsum(model[v] for v in s)
        if total > 0:
            out.update({v: model[v] * m / total for v in s})
        else:
            out.update({v: m / len(s) for v in s})
    return out


def calibrated_trace(trace: Any, calibration: Calibration | None = None, *, training: bool = False,
                     **options: Any) -> Any:
    """``trace`` with each node's compute time the calibrated one (:func:`calibrate` runs when
    ``calibration`` is not given; ``options`` go to it); ``timing`` becomes ``"calibrated"``.

    With ``training=True`` the backward is calibrated too (``backward=True``) and a backward
    node is added per node (as ``training=True`` of the trace does) with its calibrated backward
    time instead of a fixed multiple of the forward.

    Raises
    ------
    InvalidArgumentError, NotExpressibleError
        As :func:`calibrate`; a training trace (calibrate the forward trace with
        ``training=True``); ``training=True`` with a calibration made without the backward.
    """
    if trace.graph.is_training:
        raise InvalidArgumentError("calibrate the forward trace, with training=True to add the backward nodes")
    if calibration is None:
        cal = calibrate(trace, backward=training, **options)
    else:
        cal = calibration
    if training and cal.backward_factors is None:
        raise InvalidArgumentError("training=True needs a calibration of the backward: calibrate(trace, "
                                   "backward=True)")
    seconds = cal.node_seconds
    graph = trace.graph.map_nodes(lambda n: dataclasses.replace(
        n, compute={k: float(seconds.get(str(n.id), 0.0)) for k in n.compute}))
    note = (f"times calibrated on {len(cal.segments)} measured segments (per-kind model, largest segment misfit "
            f"{100 * cal.fit_error:.1f}% before scaling to the measurements)")
    out = dataclasses.replace(trace, graph=graph, timing="calibrated", notes=(*trace.notes, note), calibration=cal)
    if not training:
        return out
    from stagecut.frontends._common import trace_with_backward

    out = trace_with_backward(out, 1.0)  # then each backward node's own time (any tied all-reduce charge kept)
    bwd = cal.backward_seconds

    def timed(n: Any) -> Any:
        if not n.backward:
            return n
        fid = str(n.id)[:-4]
        fwd, b = float(seconds.get(fid, 0.0)), float(bwd.get(fid, 0.0))
        return dataclasses.replace(n, compute={k: t - fwd + b for k, t in n.compute.items()})

    factors = ", ".join(f"{k} {v:.2f}" for k, v in (cal.backward_factors or {}).items() if k != "view")
    return dataclasses.replace(out, graph=out.graph.map_nodes(timed), notes=(
        *out.notes, f"training: backward times calibrated on the same segments (backward/forward by kind: {factors})"))
