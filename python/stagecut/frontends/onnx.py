"""ONNX front end (``pip install 'stagecut[onnx]'``): an ONNX model (a ``ModelProto`` or a file)
-> a :class:`~stagecut.Graph` with one node per ONNX operator.

* node ids are the ONNX node names (an operator without a name, or with a name already taken,
  is called ``"<op_type>_<position>"``, and the notes say so);
* output bytes come from ONNX shape inference (``onnx.shape_inference.infer_shapes``):
  ``prod(shape) * itemsize`` summed over the outputs some operator or the graph output uses.
  A symbolic dimension (``"batch"``) needs a value in ``dims``; an output whose size stays
  unknown counts as 0 bytes, with a :class:`~stagecut.errors.StagecutWarning` naming it;
* initializers (weights) and ``Constant`` operators are not nodes: their bytes are the
  ``memory`` of the first operator that uses them, and all their users are colocated;
* times (``profile="onnxruntime"``) come from onnxruntime's profiler: the model runs in an
  ``InferenceSession`` with profiling on and graph optimisations off (each operator its own
  kernel), on ``inputs`` (or random arrays of the inputs' shapes), and a node's time is the
  median of its kernel times over ``repeat`` runs after ``warmup`` runs, in seconds (the
  profiler's JSON gives microseconds; see :mod:`stagecut.frontends._ort`);
* or (``profile="flops"``, the default) from a FLOP model, in seconds (FLOPs /
  ``flops_per_s``): ``MatMul`` ``2 * numel(out) * k``; ``Gemm`` ``2 * m * n * k`` (plus
  ``m * n`` with a bias); ``Conv`` ``2 * numel(out) * (C_in / group) * prod(kernel)`` (plus
  ``numel(out)`` with a bias); shape-only operators
  (``Reshape``, ``Flatten``, ``Squeeze``, ``Unsqueeze``, ``Identity``, ``Shape``) none; any other
  operator one FLOP per output element;
* ``comm`` is output bytes / ``bandwidth`` (bytes per second), in seconds.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stagecut.errors import InvalidArgumentError, InvalidGraphError, StagecutWarning
from stagecut.frontends._common import UnionFind, bandwidth_bytes_per_s, check_sizes, require
from stagecut.graph import ACCELERATOR, Graph, Node
from stagecut.results import Plan
from stagecut.validate import check_int, check_number

__all__ = ["OnnxTrace", "trace_onnx", "from_onnx", "extract_stages"]

_SHAPE_ONLY = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Shape", "Size"}


@dataclass(frozen=True)
class OnnxTrace:
    """An ONNX model as a graph, with what was computed on the way.

    Attributes
    ----------
    graph : Graph
        Times in seconds, memory and sizes in bytes, ``comm`` in seconds.
    order : tuple of str
        Node ids in the model's node order (a topological order).
    flops, output_bytes, memory : mapping of str to float
        Per node.
    notes : tuple of str
        What was renamed, folded, colocated or left unknown.
    timing : {"flops", "onnxruntime"}
        Where the times come from.
    """

    graph: Graph
    order: tuple[str, ...]
    flops: Mapping[str, float]
    output_bytes: Mapping[str, float]
    memory: Mapping[str, float]
    notes: tuple[str, ...] = field(default=())
    #: per node, the names of the tensors it reads and writes (for :func:`extract_stages`)
    reads: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    writes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: the model's output tensors, and the tensors that are weights or constants
    model_outputs: tuple[str, ...] = ()
    constants: frozenset[str] = frozenset()
    timing: str = "flops"
    #: the model (``ModelProto`` or path) the trace was read from: :meth:`extract_onnx`'s default
    source: Any = field(default=None, compare=False, repr=False)

    def extract_onnx(self, plan: Plan, directory: str | os.PathLike[str], model: Any = None) -> list[Any]:
        """:func:`extract_stages` ``(plan, self, model, directory)``: one ONNX file per stage, in
        pipeline order; ``model`` defaults to :attr:`source`, the model this trace was read from.

        Raises
        ------
        InvalidArgumentError
            As :func:`extract_stages` (and no ``model`` when :attr:`source` is ``None``).
        BackendUnavailableError
            onnx is not installed.
        """
        return extract_stages(plan, self, self.source if model is None else model, directory)


def _shape(value_info: Any, dims: Mapping[str, int]) -> tuple[list[int] | None, int | None]:
    """(shape, element type) of a ValueInfoProto; shape ``None`` when a dimension is unknown."""
    t = value_info.type
    if not t.HasField("tensor_type"):
        return None, None
    tt = t.tensor_type
    if not tt.HasField("shape"):
        return None, tt.elem_type
    shape: list[int] = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            shape.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param in dims:
            shape.append(int(dims[d.dim_param]))
        else:
            return None, tt.elem_type
    return shape, tt.elem_type


def _itemsize(elem_type: int | None) -> int | None:
    onnx = require("onnx", "onnx")
    if not elem_type:
        return None
    try:
        import numpy as np

        dt = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return None
    return None if dt.kind in "OSU" else int(dt.itemsize)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    line = text[0] if text else type(e).__name__
    return line if len(line) <= 200 else line[:197] + "..."


def _load(model: Any) -> Any:
    """The model (a path or a ``ModelProto``), read and checked: ``onnx.checker``'s full check
    (types and shapes included), then the structure stagecut relies on (:func:`_check_structure`).
    A file that is not an ONNX model, a model that refers to data outside its folder, or one the
    checker refuses is one :class:`~stagecut.errors.InvalidGraphError` (an unreadable path: an
    :class:`~stagecut.errors.InvalidArgumentError`)."""
    onnx = require("onnx", "onnx")
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise InvalidArgumentError(f"cannot read the ONNX model {path!r}: no such file")
        try:
            proto = onnx.load(path)
        except OSError as e:
            raise InvalidArgumentError(f"cannot read the ONNX model {path!r}: {_first_line(e)}") from None
        except Exception as e:  # protobuf's DecodeError, onnx's ValidationError (unsafe external data)...
            raise InvalidGraphError(f"{path!r} is not a readable ONNX model: {_first_line(e)}") from None
    elif isinstance(model, onnx.ModelProto):
        proto = model
    else:
        raise InvalidArgumentError(f"model must be an onnx.ModelProto or a path, got {type(model).__name__}")
    _check_structure(proto)
    checked, full = proto, True
    g = proto.graph
    if any(vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape")
           for vi in (*g.input, *g.output)):
        # a graph input or output declared without a shape (unknown rank: exporters write them, the
        # checker wants the field): checked with the field present, without the full check's shape
        # inference (which would hold the placeholder against the inferred shape)
        checked, full = onnx.ModelProto.FromString(proto.SerializeToString()), False
        for vi in (*checked.graph.input, *checked.graph.output):
            if vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape"):
                vi.type.tensor_type.shape.SetInParent()
    try:
        onnx.checker.check_model(checked, full_check=full)
    except Exception as e:  # onnx.checker.ValidationError, shape inference errors
        raise InvalidGraphError(f"the ONNX model fails onnx.checker: {_first_line(e)}") from None
    return proto


def _check_structure(proto: Any) -> None:
    """Every tensor has one producer (a node, a graph input or an initializer); no node reads its
    own output; every node input is defined somewhere (:class:`~stagecut.errors.InvalidGraphError`
    naming the node and the tensor)."""
    g = proto.graph
    produced: dict[str, str] = {}
    for vi in g.input:
        produced[vi.name] = "a graph input"
    for init in g.initializer:
        produced.setdefault(init.name, "an initializer")
    for i, node in enumerate(g.node):
        name = node.name or f"{node.op_type}_{i}"
        for out in node.output:
            if not out:
                continue
            if out in node.input:
                raise InvalidGraphError(f"ONNX node {name!r} reads its own output {out!r} (a cycle)")
            if out in produced:
                raise InvalidGraphError(f"ONNX tensor {out!r} has two producers: {produced[out]} and node {name!r}")
            produced[out] = f"node {name!r}"
    for i, node in enumerate(g.node):
        name = node.name or f"{node.op_type}_{i}"
        for t in node.input:
            if t and t not in produced:
                raise InvalidGraphError(f"ONNX node {name!r} reads {t!r}, which no node, graph input or "
                                        "initializer defines")


def _flops(op: str, node: Any, shapes: Mapping[str, list[int] | None]) -> float | None:
    """FLOPs of one operator from its shapes (``None`` when a shape it needs is unknown)."""
    outs = [shapes.get(o) for o in node.output if o]
    if any(s is None for s in outs):
        return None
    numel = sum(math.prod(s) for s in outs if s is not None)
    if op in _SHAPE_ONLY:
        return 0.0
    ins = [shapes.get(i) if i else None for i in node.input]
    if op == "MatMul":
        if ins[0] is None:
            return None
        return 2.0 * numel * ins[0][-1]
    if op == "Gemm":
        a = ins[0]
        if a is None:
            return None
        trans_a = next((x.i for x in node.attribute if x.name == "transA"), 0)
        k = a[0] if trans_a else a[-1]
        return 2.0 * numel * k + (numel if len(node.input) > 2 and node.input[2] else 0)
    if op == "Conv":
        w = ins[1] if len(ins) > 1 else None
        if w is None:
            return None
        return 2.0 * numel * w[1] * math.prod(w[2:]) + (numel if len(node.input) > 2 and node.input[2] else 0)
    return float(numel)


def trace_onnx(model: Any, *, bandwidth: float | str, profile: str = "flops", flops_per_s: float = 1e12,
               dims: Mapping[str, int] | None = None, inputs: Mapping[str, Any] | None = None, warmup: int = 2,
               repeat: int = 5) -> OnnxTrace:
    """Read an ONNX model into an :class:`OnnxTrace` (its ``graph`` is what :func:`from_onnx` returns).

    Parameters
    ----------
    model : onnx.ModelProto or path
    bandwidth : float or str
        Bytes per second between stages (or ``"25GB/s"``); ``comm`` = output bytes / bandwidth.
    profile : {"flops", "onnxruntime"}
        Where the times (seconds) come from: the FLOP model (FLOPs / ``flops_per_s``), or
        onnxruntime's profiler on the CPU execution provider (needs ``onnxruntime``, in the
        ``onnx`` extra). A node the profiler does not report keeps its FLOP time (said in the
        notes, with a :class:`~stagecut.errors.StagecutWarning`).
    flops_per_s : float
        Sustained FLOP rate of a device (default a nominal 1e12): seconds = FLOPs / it.
    dims : mapping of str to int, optional
        Values of symbolic dimensions (``{"batch": 8}``).
    inputs : mapping of str to numpy.ndarray, optional
        Inputs to profile on (``profile="onnxruntime"``); an input not given is random (standard
        normal floats, zero integers) of its declared shape, symbolic dimensions from ``dims``.
    warmup, repeat : int
        Profiled runs left out, and runs whose median is taken (``profile="onnxruntime"``).

    Returns
    -------
    OnnxTrace

    Raises
    ------
    BackendUnavailableError
        onnx is not installed (``pip install 'stagecut[onnx]'``).
    InvalidArgumentError
        A model that is neither a ``ModelProto`` nor a readable file, a bad ``bandwidth``,
        ``flops_per_s``, ``profile``, ``warmup`` or ``repeat``, inputs that are missing a
        dimension or that onnxruntime refuses.
    InvalidGraphError
        The model has no operator, or its node list is not a DAG.

    Examples
    --------
    >>> import numpy as np, onnx, onnx.helper as oh, onnx.numpy_helper as nh
    >>> w = [nh.from_array(np.ones((4, 4), np.float32), name) for name in ("w0", "w1")]
    >>> io = [oh.make_tensor_value_info(name, onnx.TensorProto.FLOAT, ["batch", 4]) for name in ("x", "y")]
    >>> mm = [oh.make_node("MatMul", ["x", "w0"], ["h"]), oh.make_node("MatMul", ["h", "w1"], ["y"])]
    >>> onnx.save(oh.make_model(oh.make_graph(mm, "mlp", io[:1], io[1:], w)), "model.onnx")
    >>> t = trace_onnx("model.onnx", bandwidth="10GB/s", flops_per_s=1e6, dims={"batch": 8})
    >>> t.order, t.graph.node(t.order[0]).compute["accelerator"]  # 2*8*4*4 FLOPs at 1e6 FLOP/s
    (('MatMul_0', 'MatMul_1'), 0.000256)
    """
    onnx = require("onnx", "onnx")
    if profile not in ("flops", "onnxruntime"):
        raise InvalidArgumentError(f"profile must be 'flops' or 'onnxruntime', got {profile!r}")
    warmup = check_int(warmup, "warmup", error=InvalidArgumentError)
    repeat = check_int(repeat, "repeat", minimum=1, error=InvalidArgumentError)
    bw = bandwidth_bytes_per_s(bandwidth)
    rate = check_number(flops_per_s, "flops_per_s", positive=True, error=InvalidArgumentError)
    dims = dict(dims or {})
    proto = _load(model)
    source = proto
    if dims:  # give the inputs' symbolic dimensions their values first, so that inference propagates them
        proto = onnx.ModelProto.FromString(proto.SerializeToString())
        source = proto
        for vi in proto.graph.input:
            for d in vi.type.tensor_type.shape.dim:
                if d.HasField("dim_param") and d.dim_param in dims:
                    d.dim_value = int(dims[d.dim_param])
    try:
        proto = onnx.shape_inference.infer_shapes(proto)
    except Exception as e:  # a model shape inference rejects: keep the shapes the file has
        warnings.warn(f"ONNX shape inference failed ({e}); using the shapes stored in the model", StagecutWarning,
                      stacklevel=2)
    g = proto.graph
    notes: list[str] = []
    shapes: dict[str, list[int] | None] = {}
    nbytes: dict[str, float | None] = {}
    for vi in [*g.input, *g.value_info, *g.output]:
        shape, elem = _shape(vi, dims)
        size = _itemsize(elem)
        shapes[vi.name] = shape
        nbytes[vi.name] = None if shape is None or size is None else float(math.prod(shape) * size)
    weights: dict[str, float] = {}
    for init in g.initializer:
        size = _itemsize(init.data_type)
        shapes[init.name] = list(init.dims)
        weights[init.name] = float(math.prod(init.dims) * (size or 0))
    ops = []
    for node in g.node:
        if node.op_type == "Constant" and not node.input:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            for out in node.output:
                weights[out] = float(math.prod(value.dims) * (_itemsize(value.data_type) or 0)) if value else 0.0
                shapes.setdefault(out, list(value.dims) if value is not None else None)
        else:
            ops.append(node)
    if len(ops) < len(g.node):
        notes.append(f"{len(g.node) - len(ops)} Constant operator(s) folded into their users' memory")
    if not ops:
        raise InvalidGraphError("the ONNX model has no operator to place")

    ids: list[str] = []
    renamed = 0
    for i, node in enumerate(ops):
        name = node.name
        if not name or name in ids:
            name, renamed = f"{node.op_type}_{i}", renamed + 1
        ids.append(name)
    if renamed:
        notes.append(f"{renamed} operator(s) without a unique name called <op_type>_<position>")
    producer = {out: ids[i] for i, node in enumerate(ops) for out in node.output if out}
    consumers: dict[str, list[str]] = {}
    for i, node in enumerate(ops):
        for t in node.input:
            if t:
                consumers.setdefault(t, []).append(ids[i])
    graph_outputs = {o.name for o in g.output}

    classes = UnionFind()
    memory = dict.fromkeys(ids, 0.0)
    for w, wbytes in weights.items():
        users = list(dict.fromkeys(consumers.get(w, [])))
        if users:
            memory[users[0]] += wbytes
            for u in users:
                classes.union("weight:" + w, u)
    unused = [w for w in weights if w not in consumers]
    if unused:
        notes.append(f"{len(unused)} initializer(s) used by no operator dropped: {', '.join(unused[:10])}")

    flops: dict[str, float] = {}
    out_bytes: dict[str, float] = {}
    unknown: list[str] = []
    for i, node in enumerate(ops):
        used = [o for o in node.output if o and (o in consumers or o in graph_outputs)]
        sizes = [nbytes.get(o) for o in used]
        if any(s is None for s in sizes):
            unknown.append(ids[i])
        out_bytes[ids[i]] = float(sum(s for s in sizes if s is not None))
        f = _flops(node.op_type, node, shapes)
        flops[ids[i]] = 0.0 if f is None else f
        if f is None and ids[i] not in unknown:
            unknown.append(ids[i])
    if unknown:
        msg = (f"{len(unknown)} operator(s) with an output shape unknown after shape inference (give symbolic "
               f"dimensions in dims=): their output bytes or FLOPs count as 0: {', '.join(unknown[:10])}")
        notes.append(msg)
        warnings.warn(msg, StagecutWarning, stacklevel=2)

    seconds = {v: flops[v] / rate for v in ids}
    if profile == "onnxruntime":
        seconds.update(_profiled(source, ids, inputs, dims, warmup, repeat, notes))

    members: dict[str, list[str]] = {}
    for v in ids:
        members.setdefault(classes.find(v), []).append(v)
    colocation = {v: (ms[0] if len(ms) > 1 else None) for ms in members.values() for v in ms}
    nodes = [Node(id=v, compute={ACCELERATOR: seconds[v]}, memory=memory[v], comm=out_bytes[v] / bw,
                  colocation=colocation[v], name=ops[i].op_type) for i, v in enumerate(ids)]
    edges = list(dict.fromkeys((producer[t], ids[i]) for i, node in enumerate(ops) for t in node.input
                               if t in producer and producer[t] != ids[i]))
    graph = Graph(nodes, edges)
    check_sizes(out_bytes.values(), sum(n.comm for n in nodes), sum(n.compute[ACCELERATOR] for n in nodes), notes)
    return OnnxTrace(graph=graph, order=tuple(ids), flops=flops, output_bytes=out_bytes, memory=memory,
                     notes=tuple(notes), reads={v: tuple(t for t in ops[i].input if t) for i, v in enumerate(ids)},
                     writes={v: tuple(t for t in ops[i].output if t) for i, v in enumerate(ids)},
                     model_outputs=tuple(o.name for o in g.output), constants=frozenset(weights), timing=profile,
                     source=model)


def _profiled(source: Any, ids: list[str], inputs: Mapping[str, Any] | None,
              dims: Mapping[str, int], warmup: int, repeat: int, notes: list[str]) -> dict[str, float]:
    """onnxruntime's median kernel seconds per operator (named by ``ids`` for the run)."""
    onnx = require("onnx", "onnx")
    from stagecut.frontends._ort import example_inputs, profile_onnxruntime

    named = onnx.ModelProto.FromString(source.SerializeToString())
    next_id = iter(ids)  # the operators are the nodes that are not Constants without inputs, in order
    for j, node in enumerate(named.graph.node):
        node.name = f"__stagecut_constant_{j}" if node.op_type == "Constant" and not node.input else next(next_id)
    times = profile_onnxruntime(named, example_inputs(named, inputs, dims), warmup, repeat)
    missing = [v for v in ids if v not in times]
    if missing:
        msg = (f"{len(missing)} operator(s) not in onnxruntime's profile keep their FLOP time: "
               f"{', '.join(missing[:10])}")
        notes.append(msg)
        warnings.warn(msg, StagecutWarning, stacklevel=3)
    notes.append(f"times: onnxruntime profiler (CPU, optimisations off), median of {repeat} runs after {warmup}")
    return {v: times[v] for v in ids if v in times}


def from_onnx(model: Any, *, bandwidth: float | str, flops_per_s: float = 1e12,
              dims: Mapping[str, int] | None = None, **options: Any) -> Graph:
    """The :class:`~stagecut.Graph` of an ONNX model (:func:`trace_onnx`'s ``graph``).

    Parameters
    ----------
    model, bandwidth, flops_per_s, dims, **options
        As for :func:`trace_onnx` (``profile``, ``inputs``, ``warmup``, ``repeat``).

    Returns
    -------
    Graph

    Raises
    ------
    BackendUnavailableError
        onnx is not installed (``pip install 'stagecut[onnx]'``).
    InvalidArgumentError
        As for :func:`trace_onnx`.
    InvalidGraphError
        As for :func:`trace_onnx`.
    """
    return trace_onnx(model, bandwidth=bandwidth, flops_per_s=flops_per_s, dims=dims, **options).graph


def extract_stages(plan: Any, trace: OnnxTrace, model: Any, directory: str | os.PathLike[str]) -> list[Any]:
    """One ONNX file per stage of ``plan``, in pipeline order (``onnx.utils.extract_model``).

    Stage ``i`` reads the tensors its operators use that earlier stages (or the model's inputs)
    produce, and writes those that later stages or the model's outputs use; weights and
    constants go with the operators that use them. Running the files in order, each fed from
    the tensors computed so far, gives the model's outputs. The files are not passed through
    ``onnx.checker`` (an output declared without a shape in the source model fails it; they run
    all the same).

    Parameters
    ----------
    plan : Plan
        A plan over ``trace.graph``.
    trace : OnnxTrace
        The trace of ``model``.
    model : onnx.ModelProto or path
        The model the trace was read from.
    directory : path
        Where to write ``stage_0.onnx``, ``stage_1.onnx``... (created if missing).

    Returns
    -------
    list of pathlib.Path
        The files, in pipeline order.

    Raises
    ------
    BackendUnavailableError
        onnx is not installed.
    InvalidArgumentError
        A plan that is not over this trace's graph, or a stage the extractor refuses.
    """
    import pathlib
    import tempfile

    onnx = require("onnx", "onnx")
    where = plan.assignment()
    if set(where) != set(trace.order):
        missing = sorted(str(v) for v in set(trace.order) ^ set(where))
        raise InvalidArgumentError(f"the plan is not over this trace's graph (node {missing[0]!r})")
    out_dir = pathlib.Path(directory)
    out_dir.mkdir(parents=True, exist_ok=True)
    produced_in = {t: where[v] for v in trace.order for t in trace.writes[v]}
    stages = sorted({where[v] for v in trace.order})
    with tempfile.TemporaryDirectory() as tmp:
        source = pathlib.Path(tmp) / "model.onnx"
        onnx.save(_load(model), str(source))
        files = []
        for i, s in enumerate(stages):
            nodes = [v for v in trace.order if where[v] == s]
            inputs = list(dict.fromkeys(t for v in nodes for t in trace.reads[v]
                                        if produced_in.get(t, -1) != s and t not in trace.constants))
            later = {t for v in trace.order if where[v] != s for t in trace.reads[v]}
            outputs = list(dict.fromkeys(t for v in nodes for t in trace.writes[v]
                                         if t in later or t in trace.model_outputs))
            path = out_dir / f"stage_{i}.onnx"
            try:
                onnx.utils.extract_model(str(source), str(path), inputs, outputs, check_model=False)
            except Exception as e:  # the extractor's own errors (unknown tensor, unreachable output...)
                raise InvalidArgumentError(f"stage {i}: onnx.utils.extract_model failed: {e}") from e
            files.append(path)
    return files
