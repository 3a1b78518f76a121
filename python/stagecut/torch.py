"""``stagecut.torch`` (``pip install 'stagecut[torch]'``): a PyTorch model -> a traced graph, and
every export of a plan one method away.

>>> import stagecut as sc, stagecut.torch  # doctest: +SKIP
>>> t = stagecut.torch.trace(model, (x,), bandwidth="10GB/s", flops_per_s=1e11)  # doctest: +SKIP
>>> plan = sc.partition(t.graph, devices=4)  # doctest: +SKIP
>>> pipe = torch.distributed.pipelining.pipeline(model, (x,), split_policy=t.split_policy(plan))  # doctest: +SKIP

A thin facade: :func:`trace` is :func:`stagecut.frontends.torch.trace_torch` with its arguments
named ``example_args`` and ``cost`` (``timing`` there), and the trace it returns is a
:class:`~stagecut.frontends.torch.TorchTrace`, whose methods ``split_spec``, ``split_policy``,
``split_callback``, ``module_fqns`` and ``balance`` call :mod:`stagecut.frontends.export` and
:mod:`stagecut.frontends.split`. torch is imported inside those functions only, so importing this
module does not import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stagecut.frontends._common import NotExpressibleError
from stagecut.frontends.torch import TorchTrace, trace_torch

__all__ = ["trace", "TorchTrace", "NotExpressibleError"]


def trace(
    model: Any,
    example_args: Sequence[Any] | Any,
    example_kwargs: Mapping[str, Any] | None = None,
    *,
    cost: str = "flops",
    warmup: int = 2,
    repeat: int = 5,
    flops_per_s: float = 1e12,
    bandwidth: float | str,
    training: bool = False,
    tracer: str = "auto",
    backward_factor: float = 2.0,
) -> TorchTrace:
    """Trace ``model`` on example inputs: :func:`~stagecut.frontends.torch.trace_torch` with
    ``timing=cost`` (same defaults, same result).

    Parameters
    ----------
    model : torch.nn.Module
        The model, in the mode (train/eval) and on the device to plan for.
    example_args : tuple or tensor
        Positional inputs of one (micro)batch; a single tensor is taken as ``(tensor,)``.
    example_kwargs : mapping, optional
        Keyword inputs.
    cost : {"flops", "measure"}
        ``"flops"`` (the default, as ``trace_torch``'s ``timing``): seconds = FLOPs /
        ``flops_per_s``; ``"measure"``: median wall time of ``repeat`` runs after ``warmup``, on
        the device the model and inputs are on (there is no ``device=`` argument: move them
        first). A callable cost is not supported.
    warmup, repeat : int
        Runs per node before and while timing (``cost="measure"``).
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
        An unknown ``cost`` or ``tracer``, a bad ``bandwidth``, ``flops_per_s``, ``warmup`` or
        ``repeat``, or a model no tracer can trace (as ``trace_torch``, which names ``timing``).
    InvalidGraphError
        The traced program has no operator left to place.

    Examples
    --------
    >>> t = trace(torch.nn.Linear(4, 2), torch.randn(8, 4), bandwidth="10GB/s")  # doctest: +SKIP
    >>> t.graph.nodes[0].memory  # doctest: +SKIP
    40.0
    """
    return trace_torch(model, example_args, example_kwargs, bandwidth=bandwidth, timing=cost,
                       flops_per_s=flops_per_s, warmup=warmup, repeat=repeat, tracer=tracer, training=training,
                       backward_factor=backward_factor)
