"""``stagecut.onnx`` (``pip install 'stagecut[onnx]'``): an ONNX file -> a traced graph, and one
ONNX file per plan stage one method away.

>>> import numpy as np, onnx, onnx.helper as oh, onnx.numpy_helper as nh, stagecut as sc, stagecut.onnx
>>> w = [nh.from_array(np.ones((4, 4), np.float32), name) for name in ("w0", "w1")]
>>> io = [oh.make_tensor_value_info(name, onnx.TensorProto.FLOAT, ["batch", 4]) for name in ("x", "y")]
>>> mm = [oh.make_node("MatMul", ["x", "w0"], ["h"]), oh.make_node("MatMul", ["h", "w1"], ["y"])]
>>> onnx.save(oh.make_model(oh.make_graph(mm, "mlp", io[:1], io[1:], w)), "model.onnx")
>>> t = stagecut.onnx.load("model.onnx", bandwidth="10GB/s", flops_per_s=1e6, dims={"batch": 8})
>>> [f.name for f in t.extract_onnx(sc.partition(t.graph, devices=2), "stages/")]
['stage_0.onnx', 'stage_1.onnx']

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
    >>> import numpy as np, onnx, onnx.helper as oh, onnx.numpy_helper as nh, stagecut as sc
    >>> w = [nh.from_array(np.ones((4, 4), np.float32), name) for name in ("w0", "w1")]
    >>> io = [oh.make_tensor_value_info(name, onnx.TensorProto.FLOAT, ["batch", 4]) for name in ("x", "y")]
    >>> mm = [oh.make_node("MatMul", ["x", "w0"], ["h"]), oh.make_node("MatMul", ["h", "w1"], ["y"])]
    >>> model = oh.make_model(oh.make_graph(mm, "mlp", io[:1], io[1:], w))  # a ModelProto, or a file's path
    >>> t = load(model, bandwidth="10GB/s", flops_per_s=1e6, dims={"batch": 8})
    >>> [f.name for f in t.extract_onnx(sc.partition(t.graph, devices=2), "stages")]
    ['stage_0.onnx', 'stage_1.onnx']
    """
    return trace_onnx(path, bandwidth=bandwidth, profile=profile, flops_per_s=flops_per_s, dims=dims, inputs=inputs,
                      warmup=warmup, repeat=repeat)
