"""Per-node times of an ONNX model from onnxruntime's profiler (``SessionOptions.enable_profiling``).

The model runs in an ``onnxruntime.InferenceSession`` with graph optimisations off
(``ORT_DISABLE_ALL``: no fusion, so each ONNX operator runs as its own kernel and gets its own
time), ``warmup + repeat`` times on the given inputs (or random ones of the inputs' shapes). The
profiler writes a JSON trace (Chrome trace format) with one ``"cat": "Node"`` event named
``<node name>_kernel_time`` per operator and run, its ``dur`` in **microseconds**; a node's time
is the median of its last ``repeat`` durations, in **seconds**.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from stagecut.errors import InvalidArgumentError
from stagecut.frontends._common import require

__all__ = ["profile_onnxruntime", "example_inputs"]

_SUFFIX = "_kernel_time"


def example_inputs(proto: Any, inputs: Mapping[str, Any] | None, dims: Mapping[str, int]) -> dict[str, Any]:
    """Arrays for every graph input that is not an initializer: those in ``inputs``, random ones
    (standard normal floats, zero integers, ``False`` booleans) of the declared shape for the rest.

    Raises
    ------
    InvalidArgumentError
        An input with a dimension that has no value (give it in ``dims`` or ``inputs``), or one
        of a type other than a tensor of numbers or booleans.
    """
    import numpy as np

    onnx = require("onnx", "onnx")
    given = dict(inputs or {})
    initializers = {i.name for i in proto.graph.initializer}
    out: dict[str, Any] = {}
    rng = np.random.default_rng(0)
    for vi in proto.graph.input:
        if vi.name in initializers:
            continue
        if vi.name in given:
            out[vi.name] = np.asarray(given.pop(vi.name))
            continue
        tt = vi.type.tensor_type
        shape = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                shape.append(int(d.dim_value))
            elif d.HasField("dim_param") and d.dim_param in dims:
                shape.append(int(dims[d.dim_param]))
            else:
                raise InvalidArgumentError(
                    f"input {vi.name!r} has a dimension with no value ({d.dim_param or '?'}): give it in dims= or "
                    "the input itself in inputs= to profile with onnxruntime")
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidArgumentError(f"input {vi.name!r}: element type {tt.elem_type} is not a numeric tensor; "
                                       "give it in inputs=") from e
        if dtype.kind == "f":
            out[vi.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iub":
            out[vi.name] = np.zeros(shape, dtype=dtype)
        else:
            raise InvalidArgumentError(f"input {vi.name!r} of type {dtype}: give it in inputs=")
    if given:
        raise InvalidArgumentError(f"inputs= names {sorted(given)[0]!r}, which is not an input of the model")
    return out


def profile_onnxruntime(proto: Any, feeds: Mapping[str, Any], warmup: int, repeat: int) -> dict[str, float]:
    """``{node name: seconds}``: the median kernel time of each named node over ``repeat`` runs
    after ``warmup`` runs, from onnxruntime's profiler JSON (``dur`` in microseconds).

    Parameters
    ----------
    proto : onnx.ModelProto
        The model; every node must have a unique name (the profiler names its events after them).
    feeds : mapping of str to numpy.ndarray
        One array per graph input.
    warmup, repeat : int
        Runs before and while timing.

    Returns
    -------
    dict of str to float
        A node absent from the profile (run inside a subgraph, or removed by onnxruntime) is
        absent here.

    Raises
    ------
    BackendUnavailableError
        onnxruntime is not installed (``pip install 'stagecut[onnx]'``).
    InvalidArgumentError
        onnxruntime refuses the model or the inputs.
    """
    ort = require("onnxruntime", "onnx")
    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tmp, "stagecut_profile")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            session = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
            for _ in range(warmup + repeat):
                session.run(None, dict(feeds))
        except Exception as e:  # onnxruntime's own errors (invalid graph, wrong input shape...)
            raise InvalidArgumentError(f"onnxruntime could not run the model: {type(e).__name__}: "
                                       f"{str(e).splitlines()[0] if str(e) else ''}") from e
        path = session.end_profiling()
        with open(path, encoding="utf-8") as f:
            events = json.load(f)
    return kernel_times(events, warmup)


def kernel_times(events: Sequence[Mapping[str, Any]], warmup: int = 0) -> dict[str, float]:
    """Median seconds per node of a profiler trace's ``Node`` events, the first ``warmup`` of
    each node left out (``dur`` is in microseconds).

    Parameters
    ----------
    events : sequence of mapping
        The profiler JSON (a list of Chrome trace events).
    warmup : int
        Events per node to skip (the warm-up runs).

    Returns
    -------
    dict of str to float

    Raises
    ------
    InvalidArgumentError
        An event with a negative or non-numeric ``dur``.

    Examples
    --------
    >>> kernel_times([{"cat": "Node", "name": "fc_kernel_time", "dur": 90},
    ...               {"cat": "Node", "name": "fc_kernel_time", "dur": 10},
    ...               {"cat": "Node", "name": "fc_kernel_time", "dur": 30}], warmup=1)
    {'fc': 2e-05}
    """
    durations: dict[str, list[float]] = {}
    for e in events:
        name = str(e.get("name", ""))
        if e.get("cat") != "Node" or not name.endswith(_SUFFIX):
            continue
        dur = e.get("dur")
        if not isinstance(dur, (int, float)) or isinstance(dur, bool) or not 0 <= dur < math.inf:
            raise InvalidArgumentError(f"profiler event {name!r} has duration {dur!r}")
        durations.setdefault(name[:-len(_SUFFIX)], []).append(float(dur))
    return {v: float(statistics.median(d[warmup:] or d)) / 1e6 for v, d in durations.items()}
