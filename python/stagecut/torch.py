"""``stagecut.torch`` (``pip install 'stagecut[torch]'``): a PyTorch model -> a traced graph, and
every export of a plan one method away.

>>> import torch, torch.distributed.pipelining, stagecut as sc, stagecut.torch
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
>>> x = torch.randn(3, 4)
>>> t = stagecut.torch.trace(model, (x,), bandwidth="10GB/s", flops_per_s=1e6)
>>> plan = sc.partition(t.graph, devices=2)
>>> pipe = torch.distributed.pipelining.pipeline(model, (x,), split_policy=t.split_policy(plan))
>>> pipe.num_stages
2

A thin facade: :func:`trace` is :func:`stagecut.frontends.torch.trace_torch` with its arguments
named ``example_args`` and ``cost`` (``timing`` there), plus ``device=`` (move the model and the
inputs first) and a callable ``cost`` (your own time per operator, from an :class:`OpRecord`).
The trace it returns is a :class:`~stagecut.frontends.torch.TorchTrace`, whose methods
``split_spec``, ``split_policy``, ``split_callback``, ``module_fqns`` and ``balance`` call
:mod:`stagecut.frontends.export` and :mod:`stagecut.frontends.split`. torch is imported inside
those functions only, so importing this module does not import it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stagecut.errors import InvalidArgumentError
from stagecut.frontends._common import NotExpressibleError, check_sizes, require, trace_with_backward
from stagecut.frontends.memory import StageMemory, TrainingMemory
from stagecut.frontends.torch import TorchTrace, trace_torch
from stagecut.validate import check_number

__all__ = ["trace", "OpRecord", "TorchTrace", "TrainingMemory", "StageMemory", "NotExpressibleError"]


@dataclass(frozen=True)
class OpRecord:
    """What a trace knows about one placed operator: the argument of a callable ``cost``.

    Read-only (a frozen dataclass); the values are those of the returned trace's tables.

    Attributes
    ----------
    id : str
        The node id (the traced program's node name, e.g. ``"linear_1"``).
    target : str
        The operator or module it runs (``"aten.linear.default"``; ``"fc1"`` when traced with
        ``torch.fx``): ``TorchTrace.targets[id]``.
    modules : tuple of str
        The modules whose call it is part of, outermost first (``TorchTrace.modules[id]``).
    flops : float
        FLOPs of one run (``TorchTrace.flops[id]``).
    output_bytes : float
        Bytes of its output (``TorchTrace.output_bytes[id]``).
    param_bytes : float
        Bytes of the parameters and buffers the node holds (``TorchTrace.memory[id]``, the
        graph node's ``memory``).
    position : int
        Its index in program order (``TorchTrace.order``).
    """

    id: str
    target: str
    modules: tuple[str, ...]
    flops: float
    output_bytes: float
    param_bytes: float
    position: int

    @property
    def module(self) -> str:
        """The innermost module path (``""`` for a node of the top-level ``forward``)."""
        return self.modules[-1] if self.modules else ""


def _to_device(value: Any, device: Any) -> Any:
    """``value`` with every tensor in it (nested tuples, named tuples, lists and dicts) replaced by
    ``tensor.to(device)``; anything else is kept as is. The containers are new; the caller's
    tensors are not changed."""
    torch = require("torch", "torch")
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple):
        items = [_to_device(v, device) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [_to_device(v, device) for v in value]
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    return value


def _device(device: Any) -> Any:
    """``device`` as a ``torch.device``, or :class:`InvalidArgumentError` naming ``device``."""
    torch = require("torch", "torch")
    if isinstance(device, torch.device):
        return device
    if not isinstance(device, str):
        raise InvalidArgumentError(f"device must be a string or a torch.device, got {type(device).__name__} "
                                   f"{device!r}")
    try:
        return torch.device(device)
    except (RuntimeError, ValueError) as e:
        raise InvalidArgumentError(f"device: {device!r} is not a torch device ({str(e).splitlines()[0][:200]})") \
            from e


def _costed(t: TorchTrace, cost: Callable[[OpRecord], Any], name: str) -> TorchTrace:
    """``t`` (forward only) with each node's compute time replaced by ``cost(record)``."""
    seconds: dict[str, float] = {}
    for i, v in enumerate(t.order):
        record = OpRecord(id=v, target=t.targets[v], modules=tuple(t.modules[v]), flops=float(t.flops[v]),
                          output_bytes=float(t.output_bytes[v]), param_bytes=float(t.memory[v]), position=i)
        seconds[v] = check_number(cost(record), f"cost returned for node {v!r}", error=InvalidArgumentError)
    graph = t.graph.map_nodes(lambda n: dataclasses.replace(n, compute={k: seconds[str(n.id)] for k in n.compute}))
    notes = [*t.notes, f"times from the cost callable {name} (seconds per node); flops_per_s unused"]
    check_sizes((), sum(n.comm for n in graph.nodes), sum(seconds.values()), notes)  # units: comm vs these times
    return dataclasses.replace(t, graph=graph, timing="callable", notes=tuple(notes))


def trace(
    model: Any,
    example_args: Sequence[Any] | Any,
    example_kwargs: Mapping[str, Any] | None = None,
    *,
    cost: str | Callable[[OpRecord], float] = "flops",
    device: Any = None,
    warmup: int = 2,
    repeat: int = 5,
    flops_per_s: float = 1e12,
    bandwidth: float | str,
    training: bool = False,
    tracer: str = "auto",
    backward_factor: float = 2.0,
    seed: int | None = None,
) -> TorchTrace:
    """Trace ``model`` on example inputs: :func:`~stagecut.frontends.torch.trace_torch` with
    ``timing=cost`` (same defaults, same result), on ``device`` if given, or with your own time
    per operator when ``cost`` is a callable.

    Parameters
    ----------
    model : torch.nn.Module
        The model, in the mode (train/eval) to plan for.
    example_args : tuple or tensor
        Positional inputs of one (micro)batch; a single tensor is taken as ``(tensor,)``.
    example_kwargs : mapping, optional
        Keyword inputs.
    cost : {"flops", "measure"} or callable
        ``"flops"`` (the default, as ``trace_torch``'s ``timing``): seconds = FLOPs /
        ``flops_per_s``. ``"measure"``: median time (thread CPU time on the CPU, wall time
        elsewhere) of ``repeat`` runs after ``warmup``, on ``device`` (or, without it, on the
        device the model and inputs are on). A callable:
        called once per placed operator, in program order, with an :class:`OpRecord` (node id,
        target, module paths, FLOPs, output bytes, parameter bytes), it returns that node's time
        in seconds (a finite number >= 0); the trace's ``timing`` is then ``"callable"``.
        ``flops_per_s`` is not used, and the check that communication does not exceed compute
        by orders of magnitude is made on the callable's times. With ``training=True`` each
        backward node takes ``backward_factor`` times its forward node's callable time (the same
        rule as the other costs: the backward nodes are added after the times are set).
    device : str or torch.device, optional
        Where to trace and time (``"cpu"``, ``"cuda:0"``). The model is moved there **in
        place** (``nn.Module.to``) and stays there after the call; every tensor in
        ``example_args`` / ``example_kwargs`` (nested tuples, lists and dicts included) is
        copied there (the caller's tensors are not changed). ``None`` (the default): nothing is
        moved.
    warmup, repeat : int
        Runs per node before and while timing (``cost="measure"``); the trace's
        ``timing_spread`` says how much the node times varied over the runs.
    seed : int, optional
        Seeds torch's generator for the runs (random operators draw the same values on every
        trace; the caller's generator state is restored).
    flops_per_s : float
        Sustained FLOP rate for ``cost="flops"`` (default a nominal 1e12: set your device's).
    bandwidth : float or str
        Bytes per second between stages, or a string with units (``"10GB/s"``).
    training, backward_factor, tracer
        As for :func:`~stagecut.frontends.torch.trace_torch`.

    Returns
    -------
    TorchTrace
        ``graph`` (seconds, bytes), ``order``, ``notes``..., and the plan exports as methods:
        ``split_spec(plan)``, ``split_policy(plan)``, ``split_callback(plan)``,
        ``module_fqns(plan)``, ``balance(plan)``.

    Raises
    ------
    BackendUnavailableError
        torch is not installed (``pip install 'stagecut[torch]'``).
    InvalidArgumentError
        An unknown ``cost`` (named as ``timing``, as ``trace_torch`` does) or ``tracer``; a
        callable ``cost`` that returns something other than a finite number >= 0 (the message
        names the node id and ``cost``); a ``device`` that is not a device name or one the model
        cannot be moved to (naming ``device``); a bad ``bandwidth``, ``flops_per_s``, ``warmup``,
        ``repeat`` or ``backward_factor``; a model no tracer can trace.
    InvalidGraphError
        The traced program has no operator left to place.

    Examples
    --------
    >>> import torch
    >>> t = trace(torch.nn.Linear(4, 2), torch.randn(8, 4), bandwidth="10GB/s")
    >>> t.graph.nodes[0].memory
    40.0
    >>> t = trace(torch.nn.Linear(4, 2), torch.randn(8, 4), bandwidth=25e9, device="cpu",
    ...           cost=lambda r: 5e-6 + r.flops / 50e12 + r.output_bytes / 1.5e12)
    >>> t.timing, len(t.graph.nodes)
    ('callable', 1)
    """
    if callable(cost):  # the FLOP model's trace at 1 FLOP/s (its times are replaced; at that rate
        # its communication check does not fire on a realistic bandwidth), then the callable's times
        fn: Callable[[OpRecord], Any] | None = cost
        timing, rate = "flops", 1.0
        check_number(flops_per_s, "flops_per_s", positive=True, error=InvalidArgumentError)
    else:
        fn, timing, rate = None, cost, flops_per_s
    if device is not None:
        dev = _device(device)
        torch = require("torch", "torch")
        if isinstance(model, torch.nn.Module):  # else trace_torch says what model must be
            try:
                model.to(dev)  # in place (said in the docstring)
            except (RuntimeError, AssertionError) as e:  # no driver, torch built without that backend
                first = str(e).splitlines()[0][:200] if str(e) else ""
                raise InvalidArgumentError(f"device: cannot move the model to {dev}: {type(e).__name__}: "
                                           f"{first}") from e
        example_args = _to_device(example_args, dev)
        example_kwargs = None if example_kwargs is None else _to_device(dict(example_kwargs), dev)
    t = trace_torch(model, example_args, example_kwargs, bandwidth=bandwidth, timing=timing, flops_per_s=rate,
                    warmup=warmup, repeat=repeat, tracer=tracer, training=training and fn is None,
                    backward_factor=backward_factor, seed=seed)
    if fn is None:
        return t
    t = _costed(t, fn, getattr(fn, "__name__", type(fn).__name__))
    if not training:
        return t
    return trace_with_backward(t, backward_factor)
