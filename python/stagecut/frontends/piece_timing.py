"""Building and timing pieces of a traced program, for :mod:`stagecut.frontends.measure` and
:mod:`stagecut.frontends.calibrate`.

The ``torch.export`` program of a trace is cut with ``torch.fx.passes.split_module`` into pieces
(each node's piece given by the caller: a calibration segment or a plan's stage), each piece's
inputs are recorded from one run of the whole, and the pieces are timed on them in passes in
program order: the thread CPU time of each call (``time.thread_time``), the median over the passes
after ``warmup``, less the time of calling an empty piece; with ``backward``, the backward pass of
each piece from its outputs is timed apart.

On a GPU (``device="cuda"`` or ``"cuda:N"``, checked by :func:`check_device`) the model and its
example inputs are copied to the device and each call is timed with CUDA events recorded on the
current stream around it (the device's time from the start of the call to its end, synchronised
after each call), in place of the thread CPU time. That path is written for GPUs but has not
been run on one by this project's tests (no GPU on the machines they run on): a machine without
CUDA gets :class:`~stagecut.errors.BackendUnavailableError`.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stagecut.errors import BackendUnavailableError, InvalidArgumentError
from stagecut.frontends._common import NotExpressibleError, require


def check_device(device: Any) -> str:
    """The device to time on, as ``"cpu"`` or ``"cuda:N"``.

    Raises
    ------
    InvalidArgumentError
        Not ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    BackendUnavailableError
        A CUDA device on a machine without CUDA (or without that device).
    """
    d = device.strip().lower() if isinstance(device, str) else None
    if d == "cpu":
        return "cpu"
    m = re.fullmatch(r"cuda(?::(\d+))?", d or "")
    if m is None:
        raise InvalidArgumentError(f"device must be 'cpu', 'cuda' or 'cuda:N', not {device!r}")
    torch = require("torch", "torch")
    index = int(m.group(1) or 0)
    if not torch.cuda.is_available():
        raise BackendUnavailableError(f"device={device!r}: CUDA is not available on this machine "
                                      f"(torch {torch.__version__}, torch.cuda.is_available() is False); "
                                      "time on device='cpu'")
    if index >= torch.cuda.device_count():
        raise BackendUnavailableError(f"device={device!r}: this machine has {torch.cuda.device_count()} CUDA "
                                      "device(s)")
    return f"cuda:{index}"


def _source(trace: Any, device: str = "cpu") -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """The trace's model and example inputs (on a GPU: copies on ``device``, the user's model
    left where it is)."""
    model = getattr(trace, "model", None)
    if model is None:
        raise InvalidArgumentError("the trace does not hold its model: trace it with stagecut.torch.trace (or "
                                   "trace_torch) to measure or calibrate")
    args, kwargs = trace.example
    if device == "cpu":
        return model, tuple(args), dict(kwargs)
    torch = require("torch", "torch")
    target = torch.device(device)
    on = {p.device for p in (*model.parameters(), *model.buffers())}
    if on != {target}:
        model = copy.deepcopy(model).to(target)

    def to(x: Any) -> Any:
        return x.to(target) if isinstance(x, torch.Tensor) else x

    tree_map = torch.utils._pytree.tree_map
    return model, tuple(tree_map(to, tuple(args))), dict(tree_map(to, dict(kwargs)))


def _pieces(trace: Any, piece_of: Mapping[str, int], device: str = "cpu"
            ) -> tuple[list[Any], list[tuple[Any, ...]], Any]:
    """The traced program cut into pieces (``piece_of``: node id -> piece, non-decreasing along
    every edge), each piece's inputs from one run of the whole (on ``device``), and the split
    module."""
    torch = require("torch", "torch")
    split_module = require("torch.fx.passes.split_module", "torch").split_module
    model, args, kwargs = _source(trace, device)
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


class _Clock:
    """Marks in one call: thread CPU seconds on the CPU; on a GPU, CUDA events recorded on the
    current stream, read after synchronising on the last one."""

    def __init__(self, device: str, marks: int) -> None:
        self.cuda = device != "cpu"
        self.t = [0.0] * marks
        if self.cuda:
            torch = require("torch", "torch")
            self.events = [torch.cuda.Event(enable_timing=True) for _ in range(marks)]

    def mark(self, i: int) -> None:
        if self.cuda:
            self.events[i].record()
        else:
            self.t[i] = time.thread_time()

    def seconds(self, a: int, b: int) -> float:
        """Seconds from mark ``a`` to mark ``b`` (on a GPU: after mark ``b`` completes)."""
        if self.cuda:
            self.events[b].synchronize()
            return float(self.events[a].elapsed_time(self.events[b])) / 1e3
        return self.t[b] - self.t[a]


def _caller(sub: Any, args: tuple[Any, ...], backward: bool, device: str = "cpu"
            ) -> Callable[[], tuple[float, float]]:
    """A call of ``sub`` on ``args`` that returns its (forward, backward) seconds (thread CPU
    time; on a GPU, CUDA event time).
    With ``backward``, the floating-point tensor inputs are fresh leaves that require grad (as a
    pipeline stage receives them), the forward runs with autograd on, and the backward pass
    from every output that requires grad (gradient of ones) is timed apart; parameter gradients
    accumulate across calls, as over the micro-batches of a step. A piece that writes in place
    to an input gets a copy of it (timed), as the pipeline runtime makes one."""
    if not backward:
        args = tuple(x.tensor if isinstance(x, _State) else x for x in args)
        clock = _Clock(device, 2)

        def fwd() -> tuple[float, float]:
            clock.mark(0)
            sub(*args)
            clock.mark(1)
            return clock.seconds(0, 1), 0.0
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
    clock = _Clock(device, 4)

    def fwd_bwd() -> tuple[float, float]:
        with torch.enable_grad():
            clock.mark(0)
            if copy:
                ins = list(leaves)
                for j in grad_leaves:
                    ins[j] = leaves[j].clone()
                out = sub(*ins)
            else:
                out = sub(*leaves)
            clock.mark(1)
            outs = [o for o in torch.utils._pytree.tree_leaves(out)
                    if isinstance(o, torch.Tensor) and o.requires_grad]
            if len(grads) != len(outs):
                grads[:] = [torch.ones_like(o) for o in outs]
            clock.mark(2)
            if outs:
                torch.autograd.backward(outs, grads)
            clock.mark(3)
        for x in leaves:
            if isinstance(x, torch.Tensor) and not isinstance(x, torch.nn.Parameter):
                x.grad = None
        return clock.seconds(0, 1), clock.seconds(2, 3)
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
                 rounds: int = 3, device: str = "cpu") -> tuple[list[float], float]:
    """Each piece's seconds (call overhead subtracted) and the overhead: after ``warmup`` calls
    of each, ``rounds * repeat`` passes over the pieces in program order (each pass a forward
    pass of the whole program, so every piece runs with the caches a real pass leaves it, and
    a burst of load on the machine hits every piece alike); each piece's median thread CPU
    time (medians add up: the segments of a pass sum to the whole; least times would not)."""
    timed = _time_groups([(subs, inputs)], warmup, repeat, rounds, device=device)
    return timed.forward[0], timed.overhead


def _time_groups(groups: Sequence[tuple[Sequence[Any], Sequence[tuple[Any, ...]]]], warmup: int, repeat: int,
                 rounds: int = 3, backward: bool = False, device: str = "cpu") -> _Timed:
    """:func:`_time_pieces` for several programs at once: each pass runs every group's pieces in
    order, the groups taken in turn, so that all are timed under the same load. With
    ``backward``, each piece's forward (autograd on) and backward are timed (:func:`_caller`);
    ``device``: where the pieces' inputs are (``"cpu"`` or ``"cuda:N"``)."""
    import contextlib

    torch = require("torch", "torch")
    empty = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())
    x = empty.graph.placeholder("x")
    empty.graph.output(x)  # backward: the gradient accumulated into the leaf, the overhead of a call
    empty.recompile()
    zero = torch.zeros(1, device=device)
    calls: list[list[Callable[[], tuple[float, float]]]] = [[_caller(empty, (zero,), backward, device)]]
    calls += [[_caller(sub, a, backward, device) for sub, a in zip(subs, inputs)] for subs, inputs in groups]
    runs: list[list[list[tuple[float, float]]]] = [[[] for _ in g] for g in calls]
    on_device = torch.cuda.device(device) if device != "cpu" else contextlib.nullcontext()
    with torch.no_grad(), on_device:
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
