"""``stagecut.onnx`` (``pip install 'stagecut[onnx]'``): an ONNX file -> a traced graph, and one
ONNX file per plan stage one method away.

>>> import stagecut as sc, stagecut.onnx  # doctest: +SKIP
>>> t = stagecut.onnx.load("model.onnx", bandwidth="10GB/s", dims={"batch": 8})  # doctest: +SKIP
>>> files = t.extract_onnx(sc.partition(t.graph, devices=4), "stages/")  # doctest: +SKIP

A thin facade: :func:`load` is :func:`stagecut.frontends.onnx.trace_onnx`, and the trace it
returns is an :class:`~stagecut.frontends.onnx.OnnxTrace`, whose ``extract_onnx(plan, directory)``
calls :func:`~stagecut.frontends.onnx.extract_stages`. onnx is imported inside those functions
only, so importing this module does not import it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from stagecut.frontends.onnx import OnnxTrace, trace_onnx

__all__ = ["load", "OnnxTrace"]


def load(
    path: str | os.PathLike[str] | Any,
    *,
    profile: str = "flops",
    inputs: Mapping[str, Any] | None = None,
    bandwidth: float | str,
    flops_per_s: float = 1e12,
    dims: Mapping[str, int] | None = None,
    warmup: int = 2,
    repeat: int = 5,
) -> OnnxTrace:
    """Read an ONNX model: :func:`~stagecut.frontends.onnx.trace_onnx` (same arguments, same result).

    Parameters
    ----------
    path : path or onnx.ModelProto
        The model file (or a model already loaded).
    profile : {"flops", "onnxruntime"}
        Where the times (seconds) come from. The default is ``"flops"``, as for ``trace_onnx``:
        FLOPs / ``flops_per_s``. ``"onnxruntime"``: onnxruntime's profiler on the CPU, median
        kernel time of ``repeat`` runs after ``warmup``.
    inputs : mapping of str to numpy.ndarray, optional
        Inputs to profile on (``profile="onnxruntime"``); random ones of the declared shapes
        otherwise.
    bandwidth : float or str
        Bytes per second between stages, or a string with units (``"10GB/s"``).
    flops_per_s : float
        Sustained FLOP rate (default a nominal 1e12).
    dims : mapping of str to int, optional
        Values of symbolic dimensions (``{"batch": 8}``).
    warmup, repeat : int
        Profiled runs left out, and runs whose median is taken.

    Returns
    -------
    OnnxTrace
        ``graph`` (seconds, bytes), ``order``, ``notes``..., and ``extract_onnx(plan, directory)``:
        the stage files in pipeline order.

    Raises
    ------
    BackendUnavailableError
        onnx (or, for ``profile="onnxruntime"``, onnxruntime) is not installed.
    InvalidArgumentError
        A model that is neither a ``ModelProto`` nor a readable file, a bad ``bandwidth``,
        ``flops_per_s``, ``profile``, ``warmup`` or ``repeat``, or inputs onnxruntime refuses.
    InvalidGraphError
        The model has no operator, or its node list is not a DAG.

    Examples
    --------
    >>> t = load("model.onnx", bandwidth="10GB/s", profile="onnxruntime")  # doctest: +SKIP
    >>> t.extract_onnx(sc.partition(t.graph, devices=2), "stages")  # doctest: +SKIP
    [PosixPath('stages/stage_0.onnx'), PosixPath('stages/stage_1.onnx')]
    """
    return trace_onnx(path, bandwidth=bandwidth, profile=profile, flops_per_s=flops_per_s, dims=dims, inputs=inputs,
                      warmup=warmup, repeat=repeat)
