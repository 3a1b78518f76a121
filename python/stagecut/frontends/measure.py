"""Stage times that match measurement: time whole pieces of the traced program as they are built,
calibrate a per-operator cost model on them, and check a plan's stages against it.

Timing an operator alone (``timing="measure"``) charges it the interpreter's per-call overhead
and runs it with cold caches, which over-predicts whole stages several times over and unevenly.
Here the traced program is cut with ``torch.fx.passes.split_module`` into pieces that run as
generated Python code, as a pipeline stage does, and each piece is timed on its real inputs:

* :func:`calibrate` cuts the program into ``segments`` runs of program order of about equal
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

Runs are made under ``torch.no_grad()`` on the device the model is on (CUDA: ``torch.cuda``
events would be needed; only the CPU is timed here, with ``time.thread_time``, which counts the
calling thread's CPU time and so is robust to other processes: set ``torch.set_num_threads(1)``
so that the operators run on that thread).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stagecut.errors import InvalidArgumentError
from stagecut.frontends._common import NotExpressibleError, require
from stagecut.graph import ACCELERATOR
from stagecut.results import Plan
from stagecut.validate import check_int

__all__ = ["Calibration", "StageTiming", "Measurement", "calibrate", "calibrated_trace", "measure", "measure_many",
           "refine"]

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

    @property
    def fit_error(self) -> float:
        """The largest ``|modelled / measured - 1|`` over the segments (how well the model alone
        predicts; the node times are scaled to the measurements, so stages made of whole
        segments are predicted exactly)."""
        return max((abs(m / x - 1) for m, x in zip(self.modelled, self.measured) if x > 0), default=0.0)


@dataclass(frozen=True)
class StageTiming:
    """One stage: predicted compute (seconds, the trace's node times) and measured seconds.

    ``predicted_now``: the prediction with each calibration segment's node times rescaled to
    that segment's time measured in the same passes as the stages (the median over the passes;
    ``None`` without a calibration): what the calibrated model predicts at the machine's speed
    of the moment. ``ratio_now``: the median over the passes of the stage's measured time over
    that pass's ``predicted_now`` (a burst of load that slows one pass cancels out).
    ``backward``: the measured seconds of the backward pass (included in ``measured``).
    """

    index: int
    nodes: int
    predicted: float
    measured: float
    predicted_now: float | None = None
    backward: float = 0.0
    ratio_now: float | None = None

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
        if now:
            rows.append(f"machine speed against the calibration: the calibration's segments took {self.drift:.3f}x "
                        "their calibrated time in the same passes")
        return "\n".join(rows)


# ----------------------------------------------------------------------------- building pieces
def _source(trace: Any) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    model = getattr(trace, "model", None)
    if model is None:
        raise InvalidArgumentError("the trace does not hold its model: trace it with stagecut.torch.trace (or "
                                   "trace_torch) to measure or calibrate")
    args, kwargs = trace.example
    return model, tuple(args), dict(kwargs)


def _pieces(trace: Any, piece_of: Mapping[str, int]) -> tuple[list[Any], list[tuple[Any, ...]], Any]:
    """The traced program cut into pieces (``piece_of``: node id -> piece, non-decreasing along
    every edge), each piece's inputs from one run of the whole, and the split module."""
    torch = require("torch", "torch")
    split_module = require("torch.fx.passes.split_module", "torch").split_module
    model, args, kwargs = _source(trace)
    if trace.method != "export":
        raise NotExpressibleError("measuring needs a torch.export trace (tracer='export')")
    gm = torch.export.export(model, args, kwargs).module()
    seen: dict[Any, int] = {}

    def callback(node: Any) -> int:
        if node not in seen:
            ins = [seen[a] for a in node.all_input_nodes if a in seen]
            seen[node] = piece_of.get(node.name, max(ins, default=0))
        return seen[node]

    for n in gm.graph.nodes:  # placeholders first: their piece is that of their first user
        if n.op in ("call_function", "call_method", "call_module"):
            callback(n)
    parts = split_module(gm, model, callback)
    names = sorted((name for name, _ in parts.named_children() if name.startswith("submod_")),
                   key=lambda s: int(s.split("_")[1]))
    subs = [getattr(parts, name) for name in names]
    inputs: list[tuple[Any, ...]] = [() for _ in subs]
    handles = []
    state = {id(x) for x in (*parts.parameters(), *parts.buffers())}  # passed to a piece as an input:
    # kept as they are (a buffer must not become a leaf that requires grad, a parameter gets its .grad)

    for i, sub in enumerate(subs):
        def hook(_m: Any, a: tuple[Any, ...], i: int = i) -> None:
            inputs[i] = tuple(_State(x) if id(x) in state else x.detach().clone() if isinstance(x, torch.Tensor)
                              else x for x in a)
        handles.append(sub.register_forward_pre_hook(hook))
    try:
        with torch.no_grad():
            parts(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return subs, inputs, parts


@dataclass(frozen=True)
class _State:
    """A parameter or buffer of the split program that a piece takes as an input."""

    tensor: Any


def _caller(sub: Any, args: tuple[Any, ...], backward: bool) -> Callable[[], tuple[float, float]]:
    """A call of ``sub`` on ``args`` that returns its (forward, backward) thread CPU seconds.
    With ``backward``, the floating-point tensor inputs are fresh leaves that require grad (as a
    pipeline stage receives them), the forward runs with autograd on, and the backward pass
    from every output that requires grad (gradient of ones) is timed apart; parameter gradients
    accumulate across calls, as over the micro-batches of a step. A piece that writes in place
    to an input gets a copy of it (timed), as the pipeline runtime makes one."""
    if not backward:
        args = tuple(x.tensor if isinstance(x, _State) else x for x in args)

        def fwd() -> tuple[float, float]:
            t0 = time.thread_time()
            sub(*args)
            return time.thread_time() - t0, 0.0
        return fwd
    torch = require("torch", "torch")
    leaves = tuple(x.tensor if isinstance(x, _State) else
                   x.detach().clone().requires_grad_(True) if isinstance(x, torch.Tensor) and x.is_floating_point()
                   else x for x in args)
    grads: list[Any] = []
    try:  # an in-place operator on an input: give it a copy, as the pipeline runtime does
        with torch.enable_grad():
            sub(*leaves)
        copy = False
    except RuntimeError as e:
        if "in-place" not in str(e):
            raise
        copy = True
    grad_leaves = [j for j, x in enumerate(leaves) if isinstance(x, torch.Tensor) and x.requires_grad
                   and not isinstance(x, torch.nn.Parameter)]

    def fwd_bwd() -> tuple[float, float]:
        with torch.enable_grad():
            t0 = time.thread_time()
            if copy:
                ins = list(leaves)
                for j in grad_leaves:
                    ins[j] = leaves[j].clone()
                out = sub(*ins)
            else:
                out = sub(*leaves)
            t1 = time.thread_time()
            outs = [o for o in torch.utils._pytree.tree_leaves(out)
                    if isinstance(o, torch.Tensor) and o.requires_grad]
            if len(grads) != len(outs):
                grads[:] = [torch.ones_like(o) for o in outs]
            t2 = time.thread_time()
            if outs:
                torch.autograd.backward(outs, grads)
            t3 = time.thread_time()
        for x in leaves:
            if isinstance(x, torch.Tensor) and not isinstance(x, torch.nn.Parameter):
                x.grad = None
        return t1 - t0, t3 - t2
    return fwd_bwd


@dataclass(frozen=True)
class _Timed:
    """Medians of timed pieces: per group, per piece, forward and backward seconds (overhead
    subtracted), and the overheads."""

    forward: list[list[float]]
    backward: list[list[float]]
    overhead: float
    backward_overhead: float
    #: per group, per piece, each pass's (forward, backward) seconds, overheads subtracted
    passes: list[list[list[tuple[float, float]]]] = field(default_factory=list, repr=False)


def _time_pieces(subs: Sequence[Any], inputs: Sequence[tuple[Any, ...]], warmup: int, repeat: int,
                 rounds: int = 3) -> tuple[list[float], float]:
    """Each piece's seconds (call overhead subtracted) and the overhead: after ``warmup`` calls
    of each, ``rounds * repeat`` passes over the pieces in program order (each pass a forward
    pass of the whole program, so every piece runs with the caches a real pass leaves it, and
    a burst of load on the machine hits every piece alike); each piece's median thread CPU
    time (medians add up: the segments of a pass sum to the whole; least times would not)."""
    timed = _time_groups([(subs, inputs)], warmup, repeat, rounds)
    return timed.forward[0], timed.overhead


def _time_groups(groups: Sequence[tuple[Sequence[Any], Sequence[tuple[Any, ...]]]], warmup: int, repeat: int,
                 rounds: int = 3, backward: bool = False) -> _Timed:
    """:func:`_time_pieces` for several programs at once: each pass runs every group's pieces in
    order, the groups taken in turn, so that all are timed under the same load. With
    ``backward``, each piece's forward (autograd on) and backward are timed (:func:`_caller`)."""
    torch = require("torch", "torch")
    empty = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())
    x = empty.graph.placeholder("x")
    empty.graph.output(x)  # backward: the gradient accumulated into the leaf, the overhead of a call
    empty.recompile()
    calls: list[list[Callable[[], tuple[float, float]]]] = [[_caller(empty, (torch.zeros(1),), backward)]]
    calls += [[_caller(sub, a, backward) for sub, a in zip(subs, inputs)] for subs, inputs in groups]
    runs: list[list[list[tuple[float, float]]]] = [[[] for _ in g] for g in calls]
    with torch.no_grad():
        for g in calls:
            for fn in g:
                for _ in range(warmup):
                    fn()
        for r in range(rounds * repeat):
            for j in range(len(calls)):
                gi = (j + r) % len(calls)  # rotate which group goes first
                for i, fn in enumerate(calls[gi]):
                    runs[gi][i].append(fn())
    fwd = [[float(np.median([t[0] for t in x])) for x in g] for g in runs]
    bwd = [[float(np.median([t[1] for t in x])) for x in g] for g in runs]
    overhead, b_overhead = fwd[0][0], bwd[0][0]
    return _Timed(forward=[[max(0.0, t - overhead) for t in g] for g in fwd[1:]],
                  backward=[[max(0.0, t - b_overhead) for t in g] for g in bwd[1:]],
                  overhead=overhead, backward_overhead=b_overhead,
                  passes=[[[(max(0.0, f - overhead), max(0.0, b - b_overhead)) for f, b in x] for x in g]
                          for g in runs[1:]])


# ----------------------------------------------------------------------------- calibration
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
              backward: bool = False) -> Calibration:
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

    Returns
    -------
    Calibration

    Raises
    ------
    InvalidArgumentError
        A trace without its model, bad counts.
    NotExpressibleError
        A ``tracer="fx"`` trace.
    """
    segments = check_int(segments, "segments", minimum=2, error=InvalidArgumentError)
    warmup = check_int(warmup, "warmup", error=InvalidArgumentError)
    repeat = check_int(repeat, "repeat", minimum=1, error=InvalidArgumentError)
    segs = [s for s in _segments(trace, min(segments, len(trace.order))) if s]
    piece_of = {v: i for i, s in enumerate(segs) for v in s}
    subs, inputs, _ = _pieces(trace, piece_of)
    timed = _time_groups([(subs, inputs)], warmup, repeat, backward=bool(backward))
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
                      modelled=tuple(float(v) for v in modelled), overhead=overhead, node_seconds=node)
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


# ----------------------------------------------------------------------------- plans
def _stage_map(plan: Plan, trace: Any) -> dict[str, int]:
    from stagecut.frontends.split import stage_of_nodes

    return stage_of_nodes(plan, trace)


def _groups(trace: Any, stage_maps: Sequence[Mapping[str, int]], reference: bool
            ) -> tuple[list[tuple[list[Any], list[tuple[Any, ...]]]], Calibration | None]:
    """The built pieces of each stage map, and (``reference`` and a calibrated trace) the
    calibration's segments as a last group, to be timed in the same passes."""
    built = [_pieces(trace, st)[:2] for st in stage_maps]
    cal = getattr(trace, "calibration", None) if reference else None
    if cal is not None:
        built.append(_pieces(trace, {v: i for i, s in enumerate(cal.segments) for v in s})[:2])
    return built, cal


def measure(trace: Any, plan: Plan, *, warmup: int = 2, repeat: int = 5, backward: bool | None = None,
            reference: bool = True) -> Measurement:
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

    Returns
    -------
    Measurement

    Raises
    ------
    InvalidArgumentError
        A trace without its model.
    NotExpressibleError
        A plan not over this trace, or stages out of pipeline order; a ``tracer="fx"`` trace.
    """
    return measure_many(trace, {"plan": plan}, warmup=warmup, repeat=repeat, backward=backward,
                        reference=reference)["plan"]


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
                               predicted_now=pred_now[i], backward=bwd[i], ratio_now=ratio_now[i])
                   for i in range(k))
    return Measurement(stages=stages, predicted_bottleneck=int(np.argmax(predicted)),
                       measured_bottleneck=int(np.argmax(measured)), overhead=overhead, drift=drift,
                       backward=backward)


def measure_many(trace: Any, plans: Mapping[str, Plan], *, warmup: int = 2, repeat: int = 5,
                 backward: bool | None = None, reference: bool = True) -> dict[str, Measurement]:
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

    Returns
    -------
    dict of str to Measurement

    Raises
    ------
    InvalidArgumentError, NotExpressibleError
        As :func:`measure`.
    """
    warmup = check_int(warmup, "warmup", error=InvalidArgumentError)
    repeat = check_int(repeat, "repeat", minimum=1, error=InvalidArgumentError)
    back = bool(trace.graph.is_training) if backward is None else bool(backward)
    names = list(plans)
    stages = [_stage_map(plans[n], trace) for n in names]
    built, cal = _groups(trace, stages, reference)
    timed = _time_groups(built, warmup, repeat, backward=back)
    now = (cal, timed.passes[-1]) if cal is not None else None
    return {n: _report(trace, st, ps, back, timed.overhead, now) for n, st, ps in zip(names, stages, timed.passes)}


def refine(trace: Any, plan: Plan, devices: int, *, rounds: int = 3, warmup: int = 2, repeat: int = 5,
           partition: Callable[[Any, int], Plan] | None = None) -> tuple[Plan, Measurement, Any]:
    """Re-plan on measured stage times until the measured bottleneck stage stops moving.

    Each round measures the current plan, scales the compute of each stage's nodes by its
    measured/predicted ratio (the trace then predicts that plan's stages exactly), and plans
    again on the scaled trace; it stops when the new plan equals the old one, when the measured
    bottleneck stays on the same stage, or after ``rounds``. The plan with the smallest measured
    bottleneck is returned.

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

    Returns
    -------
    (Plan, Measurement, TorchTrace)
        The best plan by measurement, its measurement, and the scaled trace it was planned on.

    Raises
    ------
    InvalidArgumentError, NotExpressibleError
        As :func:`measure`.
    """
    from stagecut.frontends.program_order import partition_trace

    rounds = check_int(rounds, "rounds", minimum=0, error=InvalidArgumentError)
    plan_fn = partition if partition is not None else partition_trace
    current, cur_trace = plan, trace
    m = measure(cur_trace, current, warmup=warmup, repeat=repeat, reference=False)
    best = (m.measured_max, current, m, cur_trace)
    for _ in range(rounds):
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
        m2 = measure(cur_trace, nxt, warmup=warmup, repeat=repeat, reference=False)
        moved = m2.measured_bottleneck != m.measured_bottleneck
        current, m = nxt, m2
        if m.measured_max < best[0]:
            best = (m.measured_max, current, m, cur_trace)
        if not moved:
            break
    return best[1], best[2], best[3]
