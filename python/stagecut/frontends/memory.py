"""Memory per pipeline stage in training, predicted from a trace: parameters, gradients,
optimizer state and the activations autograd saves for backward. Units: **bytes**.

How the saved activations are known
-----------------------------------
:func:`~stagecut.frontends.torch.trace_torch` runs the traced program once more, node by node,
with autograd on and ``torch.autograd.graph.saved_tensors_hooks`` installed (:func:`record_saved`).
Every tensor autograd packs for backward is attributed to the operator running when it was packed,
and identified by its *storage*: a view, an in-place result or a tensor two operators save shares
its storage with the tensor it came from, and a storage is counted once per stage (its
``nbytes``). Storages of parameters and buffers are not activations (they are counted as
parameters) and are left out. The trace's :class:`MemoryRecord` keeps, per operator, the storages
it saves, each storage's bytes and the operator whose output first held it.

A stage of a pipeline does not share storages with the stage before it: it *receives* the tensors
that cross the boundary, each as its own contiguous tensor (``torch.distributed.pipelining``
sends contiguous tensors). So a storage a stage saves but did not make counts as the received
tensors that carry it (the values made by earlier stages that this stage's operators read and
that live in that storage), not as the whole storage of the sender: receiving only ``q`` of a
fused ``qkv`` costs ``q``'s bytes.

What the pipeline runtime holds besides (``torch.distributed.pipelining``'s ``PipelineStage``,
:func:`boundary_per_group`): every tensor a stage receives, kept until that microbatch's
backward (counted where ``saved`` does not already count its storage; a tensor read two or more
stages later is received, and held, by every stage between, which passes it on); on the last
stage, the model's outputs, kept for every microbatch of the step (returned when it ends); and
one microbatch's gradients of the boundary activations (received for what the stage sent,
computed for what it received; none for a tensor that requires no grad). A stage's sent outputs
are not counted: the runtime releases them once sent (it keeps their autograd edges), unless the
stage saves them. What this does not count: the first stage's inputs (the user's batch and its
microbatch views), the buffers of sends and receives in flight, temporaries during an operator's
forward or backward (the gradients between the operators of a stage included), and allocator
fragmentation; mixed precision and recomputation are not modelled.

Per stage :func:`training_memory` adds:

* ``parameters``: bytes of the trainable parameters the stage's operators use (each counted once
  per stage; a tied parameter used on two stages is held by both), ``buffers``: the same for
  buffers and constants (BatchNorm statistics, masks; a buffer no operator reads, such as
  BatchNorm's ``num_batches_tracked`` counter, is not counted);
* ``gradients``: one gradient per trainable parameter, of its size;
* ``optimizer``: ``states`` tensors of a parameter's size per trainable parameter, plus, for
  ``"adam"`` (``torch.optim.Adam``/``AdamW``), a 4-byte ``step`` tensor per parameter tensor;
* ``saved`` and ``received`` bytes per microbatch times ``in_flight``, the microbatches whose
  activations a stage holds at its peak: under 1F1B, stage ``i`` of ``s`` holds
  ``min(s - i, microbatches)``; under GPipe every microbatch of the batch;
* on the last stage, ``outputs`` bytes per microbatch times ``outputs_in_flight`` (every
  microbatch of the step: ``microbatches``, or ``in_flight`` when that is not given);
* ``activation_grads``: one microbatch's boundary gradients.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stagecut.errors import InvalidArgumentError
from stagecut.frontends._common import require
from stagecut.validate import check_int

__all__ = ["OPTIMIZER_STATES", "Boundary", "MemoryRecord", "boundary_per_group", "StageMemory",
           "TrainingMemory", "record_saved", "saved_per_group", "training_memory"]

#: parameter-sized state tensors per trainable parameter of each named optimizer
OPTIMIZER_STATES = {"adam": 2, "sgd": 0, "sgd-momentum": 1}

#: bytes of ``torch.optim.Adam``'s per-parameter ``step`` tensor (a float32 scalar)
ADAM_STEP_BYTES = 4.0


@dataclass(frozen=True)
class MemoryRecord:
    """What a trace recorded for training memory (the forward pass run once with autograd on).

    Attributes
    ----------
    saved : mapping of str to tuple of int
        Per node, the storages (indices into ``storage_bytes``) of the activations autograd saved
        while it ran (parameters and buffers left out).
    storage_bytes : tuple of float
        Bytes of each storage (``untyped_storage().nbytes()``).
    producer : tuple of (str or None)
        The node whose output first held each storage; ``None`` for a model input.
    inputs : mapping of str to tuple of (str or None, str, int, float)
        Per node, each tensor it reads: ``(producer, value, storage, bytes)``, the producer the
        node that made the value (``None``: a model input), ``value`` the program value's name
        (a ``getitem`` picking one tensor of a tuple is its own value), then the value's storage
        and its own bytes (what a stage receiving it holds).
    weights : mapping of str to tuple of str
        Per node, the parameters and buffers it uses (one name per tensor: tied aliases merged).
    weight_bytes : mapping of str to float
        Bytes of each parameter and buffer.
    trainable : frozenset of str
        The names in ``weight_bytes`` that are parameters with ``requires_grad``.
    notes : tuple of str
    outputs : tuple of (str or None, str, int, float)
        The model's output tensors, as ``inputs`` gives a node's.
    grad_values : frozenset of str
        The program values (as in ``inputs``) that require grad in training.
    weight_storages : frozenset of int
        The storages of parameters, buffers and constants.
    """

    saved: Mapping[str, tuple[int, ...]]
    storage_bytes: tuple[float, ...]
    producer: tuple[str | None, ...]
    inputs: Mapping[str, tuple[tuple[str | None, str, int, float], ...]]
    weights: Mapping[str, tuple[str, ...]]
    weight_bytes: Mapping[str, float]
    trainable: frozenset[str]
    notes: tuple[str, ...] = field(default=())
    outputs: tuple[tuple[str | None, str, int, float], ...] = field(default=())
    grad_values: frozenset[str] = field(default=frozenset())
    weight_storages: frozenset[int] = field(default=frozenset())

    @property
    def saved_bytes(self) -> dict[str, float]:
        """Per node, the bytes of the storages it saves that no earlier node saved (the whole
        program as one stage: their sum is the forward pass's saved activations)."""
        seen: set[int] = set()
        out: dict[str, float] = {}
        for v, ids in self.saved.items():
            new = [i for i in ids if i not in seen]
            seen.update(new)
            out[v] = float(sum(self.storage_bytes[i] for i in new))
        return out


@dataclass
class RawSaved:
    """:func:`record_saved`'s result, by program node name (before the trace drops and merges
    nodes): storages saved and output storages, each storage's bytes and first holder."""

    saved: dict[str, list[int]]
    inputs: dict[str, list[tuple[str, int, float]]]  # node -> (value read, its storage, its bytes)
    storage_bytes: list[float]
    holder: list[str | None]  # node name, "" for a weight, None for a model input
    notes: list[str]
    outputs: list[tuple[str, int, float]] = field(default_factory=list)  # the model's outputs: value, storage, bytes
    grad_values: set[str] = field(default_factory=set)  # the values (node names) that require grad


def record_saved(gm: Any, inputs: Sequence[Any], weights: Sequence[int]) -> RawSaved:
    """Run the program ``gm`` on ``inputs`` once with autograd on, recording the tensors autograd
    saves for backward per node (``saved_tensors_hooks``) and the storages of each node's output.

    ``weights``: positions in ``inputs`` of the parameters, buffers and constants (their storages
    are not activations). Parameters of ``gm`` itself (``torch.fx`` traces) are weights too.
    """
    torch = require("torch", "torch")
    leaves = torch.utils._pytree.tree_leaves
    ptr: dict[int, int] = {}
    storage_bytes: list[float] = []
    holder: list[str | None] = []
    keep: list[Any] = []  # every tensor seen stays alive, so that no storage address is reused

    def key(t: Any, who: str | None) -> int | None:
        try:
            st = t.untyped_storage()
            nbytes, address = float(st.nbytes()), int(st.data_ptr())
        except (RuntimeError, NotImplementedError, AttributeError):  # no plain storage (sparse, nested...)
            nbytes, address = float(t.numel() * t.element_size()), -id(t)
        if nbytes <= 0:
            return None
        keep.append(t)
        if address not in ptr:
            ptr[address] = len(storage_bytes)
            storage_bytes.append(nbytes)
            holder.append(who)
        return ptr[address]

    weight_set = set(weights)
    for i, x in enumerate(inputs):
        for t in leaves(x):
            if isinstance(t, torch.Tensor):
                key(t, "" if i in weight_set else None)
    for t in [*gm.parameters(), *gm.buffers()]:
        key(t, "")

    saved: dict[str, list[int]] = {}
    reads: dict[str, list[tuple[str, int, float]]] = {}
    current: list[str] = [""]
    packed: list[tuple[str, Any]] = []

    def pack(t: Any) -> Any:
        packed.append((current[0], t))
        return t

    Interpreter: Any = torch.fx.Interpreter

    outputs: list[tuple[str, int, float]] = []
    grad_values: set[str] = set()

    class Recorder(Interpreter):  # type: ignore[misc]
        def run_node(self, n: Any) -> Any:
            current[0] = n.name
            if n.op == "output":
                outputs.extend((a.name, k, float(t.numel() * t.element_size())) for a in n.all_input_nodes
                               for t in leaves(self.env[a]) if isinstance(t, torch.Tensor)
                               and (k := key(t, None)) is not None)
            out = super().run_node(n)
            if n.op in ("call_function", "call_method", "call_module"):
                for t in leaves(out):
                    if isinstance(t, torch.Tensor):
                        key(t, n.name)  # the first node whose output holds a storage made it
                        if t.requires_grad:
                            grad_values.add(n.name)
                reads[n.name] = [(a.name, k, float(t.numel() * t.element_size())) for a in n.all_input_nodes
                                  for t in leaves(self.env[a]) if isinstance(t, torch.Tensor)
                                  and (k := key(t, None)) is not None]
            return out

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        Recorder(gm).run(*inputs)
    for name, t in packed:
        k = key(t, name)
        if k is not None and holder[k] != "":
            saved.setdefault(name, []).append(k)
    notes: list[str] = []
    if not packed:
        notes.append("autograd saved no tensor in the traced forward (no parameter requires grad, or the model "
                     "ran under no_grad): saved activations are 0")
    return RawSaved(saved=saved, inputs=reads, storage_bytes=storage_bytes, holder=holder, notes=notes,
                    outputs=outputs, grad_values=grad_values)


def make_record(raw: RawSaved, owner: Mapping[str, str], weights: Mapping[str, Sequence[str]],
                weight_bytes: Mapping[str, float], trainable: set[str]) -> MemoryRecord:
    """The :class:`MemoryRecord` of a trace from :func:`record_saved`'s raw result: each program
    node's saved storages and the values it reads go to the trace node that ``owner`` names (a ``getitem``
    to the operator it picks from, an unused node to its latest input's)."""
    saved: dict[str, list[int]] = {}
    for name, ks in raw.saved.items():
        if name in owner:
            bucket = saved.setdefault(owner[name], [])
            bucket.extend(k for k in ks if k not in bucket)
    producer = [owner.get(h) if h else None for h in raw.holder]
    inputs: dict[str, list[tuple[str | None, str, int, float]]] = {}
    for name, ins in raw.inputs.items():
        if name in owner:
            inputs.setdefault(owner[name], []).extend((owner.get(a), a, k, b) for a, k, b in ins)
    return MemoryRecord(saved={v: tuple(ks) for v, ks in saved.items()}, storage_bytes=tuple(raw.storage_bytes),
                        producer=tuple(producer), inputs={v: tuple(ins) for v, ins in inputs.items()},
                        weights={v: tuple(dict.fromkeys(ws)) for v, ws in weights.items()},
                        weight_bytes=dict(weight_bytes), trainable=frozenset(trainable), notes=tuple(raw.notes),
                        outputs=tuple((owner.get(a), a, k, b) for a, k, b in raw.outputs),
                        grad_values=frozenset(raw.grad_values),
                        weight_storages=frozenset(i for i, h in enumerate(raw.holder) if h == ""))


# ----------------------------------------------------------------------------- prediction
@dataclass(frozen=True)
class StageMemory:
    """One stage's training memory, in bytes.

    Attributes
    ----------
    index : int
        The stage, in pipeline order.
    nodes : int
        Forward operators on it.
    parameters, buffers : float
        Trainable parameters; buffers, constants and frozen parameters.
    gradients, optimizer : float
        Gradients of the trainable parameters; the optimizer's state.
    saved : float
        Activations autograd saves for backward, per microbatch.
    in_flight : int
        Microbatches whose saved activations the stage holds at its peak.
    received : float
        Per microbatch, the tensors received from earlier stages that the runtime keeps until
        the microbatch's backward (those ``saved`` does not already count).
    outputs : float
        Per microbatch, on the last stage, the model outputs the runtime keeps to return at the
        end of the step (not already in ``saved``); 0 elsewhere.
    outputs_in_flight : int
        Microbatches whose outputs the last stage holds at its peak (0 elsewhere).
    activation_grads : float
        One microbatch's gradients of the activations crossing the stage's boundaries
        (received for what it sent, computed for what it received).
    """

    index: int
    nodes: int
    parameters: float
    buffers: float
    gradients: float
    optimizer: float
    saved: float
    in_flight: int
    received: float = 0.0
    outputs: float = 0.0
    outputs_in_flight: int = 0
    activation_grads: float = 0.0

    @property
    def activations(self) -> float:
        """``(saved + received) * in_flight + outputs * outputs_in_flight + activation_grads``:
        the activations the stage holds at its peak."""
        return ((self.saved + self.received) * self.in_flight + self.outputs * self.outputs_in_flight
                + self.activation_grads)

    @property
    def total(self) -> float:
        """Everything the stage holds at its peak (bytes)."""
        return self.parameters + self.buffers + self.gradients + self.optimizer + self.activations


@dataclass(frozen=True)
class TrainingMemory:
    """:func:`training_memory`'s prediction: per stage, in bytes.

    Attributes
    ----------
    stages : tuple of StageMemory
    optimizer : str
        ``"adam"``, ``"sgd"``, ``"sgd-momentum"``, or ``"<n> states"``.
    schedule : str
        ``"1f1b"``, ``"gpipe"`` or ``"given"`` (``microbatches_in_flight`` given).
    microbatches : int or None
    notes : tuple of str
    """

    stages: tuple[StageMemory, ...]
    optimizer: str
    schedule: str
    microbatches: int | None
    notes: tuple[str, ...] = field(default=())

    @property
    def peak(self) -> float:
        """The largest stage total (bytes): what each device must hold."""
        return max((s.total for s in self.stages), default=0.0)

    @property
    def peak_stage(self) -> int:
        """The stage with the largest total."""
        return max(range(len(self.stages)), key=lambda i: self.stages[i].total) if self.stages else 0

    def summary(self) -> str:
        """A text table, one row per stage, sizes in binary units (KiB, MiB, GiB)."""
        from stagecut.units import bytes_text

        head = ("stage", "nodes", "params", "grads", "optimizer", "saved/mb", "received/mb", "in flight",
                "outputs/mb", "act. grads", "activations", "total")
        rows = [head]
        for s in self.stages:
            rows.append((str(s.index), str(s.nodes), bytes_text(s.parameters + s.buffers), bytes_text(s.gradients),
                         bytes_text(s.optimizer), bytes_text(s.saved), bytes_text(s.received), str(s.in_flight),
                         f"{bytes_text(s.outputs)} x{s.outputs_in_flight}" if s.outputs_in_flight else "-",
                         bytes_text(s.activation_grads), bytes_text(s.activations), bytes_text(s.total)))
        widths = [max(len(r[j]) for r in rows) for j in range(len(head))]
        lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
        mb = f", {self.microbatches} microbatches" if self.microbatches is not None else ""
        lines.append(f"optimizer {self.optimizer}, schedule {self.schedule}{mb}; peak {bytes_text(self.peak)} "
                     f"on stage {self.peak_stage}")
        return "\n".join(lines)


def saved_per_group(record: MemoryRecord, groups: Sequence[Sequence[str]]) -> list[float]:
    """Saved activation bytes per microbatch of each group of nodes (a stage, a layer), each
    group holding its own storages: a storage counted once per group, at its full size when a
    node of the group (or, for the first group, the model input) made it, else as the values
    the group receives in it (the values other groups made that its nodes read, each once, at
    its own size)."""
    group = {v: i for i, vs in enumerate(groups) for v in vs}
    received: list[dict[tuple[str, int], float]] = [{} for _ in groups]  # (value, storage) -> bytes
    for v, g in group.items():
        for producer, value, key, nbytes in record.inputs.get(v, ()):
            if (group.get(producer, 0) if producer is not None else 0) != g:
                received[g][(value, key)] = nbytes
    out = []
    for i, vs in enumerate(groups):
        by_storage: dict[int, float] = {}
        for (_, key), nbytes in received[i].items():
            by_storage[key] = by_storage.get(key, 0.0) + nbytes
        total = 0.0
        for key in dict.fromkeys(key for v in vs for key in record.saved.get(v, ())):
            p = record.producer[key]
            home = group.get(p, 0) if p is not None else 0
            total += record.storage_bytes[key] if home == i or key not in by_storage else by_storage[key]
        out.append(total)
    return out


@dataclass(frozen=True)
class Boundary:
    """What a pipeline runtime holds at one stage's boundaries (bytes; :func:`boundary_per_group`).

    ``received``: per microbatch, the tensors received from earlier stages (each its own
    buffer, kept until that microbatch's backward), less those whose storage ``saved`` already
    counts. ``outputs``: per microbatch, the model outputs the last stage returns (kept for
    every microbatch of the step), less those ``saved`` counts; 0 on the other stages.
    ``activation_grads``: one microbatch's gradients of the activations crossing the stage's
    boundaries: those received for the tensors it sent, and those it computes for the tensors it
    received (to send back).
    """

    received: float
    outputs: float
    activation_grads: float


def boundary_per_group(record: MemoryRecord, groups: Sequence[Sequence[str]]) -> list[Boundary]:
    """Per group of nodes in pipeline order (the stages), what the pipeline runtime holds at its
    boundaries (:class:`Boundary`).

    A value made by group ``p`` (a model input: by the first group) and read by group ``q > p``
    is received by every group from ``p + 1`` to ``q`` (a group between passes it on), each
    copy a contiguous tensor of the value's own size; the first group's inputs are the user's
    batch and are not counted. Gradients are counted for the received values that require grad.
    """
    group = {v: i for i, vs in enumerate(groups) for v in vs}
    k = len(groups)
    first: dict[str, int] = {}  # value -> the group that makes it
    last: dict[str, int] = {}   # value -> the last group that reads it
    size: dict[str, tuple[int, float]] = {}
    for v, g in group.items():
        for producer, value, key, nbytes in record.inputs.get(v, ()):
            p = group.get(producer, 0) if producer is not None else 0
            if p < g and key not in record.weight_storages:
                first[value] = p
                last[value] = max(last.get(value, g), g)
                size[value] = (key, nbytes)
    received: list[dict[str, tuple[int, float]]] = [{} for _ in groups]
    for value, p in first.items():
        for g in range(p + 1, last[value] + 1):
            received[g][value] = size[value]
    saved_keys = [{key for v in vs for key in record.saved.get(v, ())} for vs in groups]
    out = []
    for i in range(k):
        kept = math.fsum(b for key, b in received[i].values() if key not in saved_keys[i])
        outs = 0.0
        if i == k - 1:
            keys = dict.fromkeys(key for producer, _, key, _ in record.outputs
                                 if (group.get(producer, 0) if producer is not None else 0) == i)
            outs = math.fsum(record.storage_bytes[key] for key in keys if key not in saved_keys[i])
        grads = math.fsum(b for value, (_, b) in received[i].items() if value in record.grad_values)
        if i + 1 < k:
            grads += math.fsum(b for value, (_, b) in received[i + 1].items() if value in record.grad_values)
        out.append(Boundary(received=kept, outputs=outs, activation_grads=grads))
    return out


def _states(optimizer: Any) -> tuple[int, float, str]:
    """(parameter-sized states, extra bytes per parameter tensor, name) of ``optimizer``."""
    if isinstance(optimizer, str):
        name = optimizer.lower()
        if name == "adamw":
            name = "adam"
        if name not in OPTIMIZER_STATES:
            raise InvalidArgumentError(f"optimizer must be 'adam', 'sgd', 'sgd-momentum' or a number of states "
                                       f"(an int >= 0), got {optimizer!r}")
        return OPTIMIZER_STATES[name], (ADAM_STEP_BYTES if name == "adam" else 0.0), name
    if isinstance(optimizer, bool) or not isinstance(optimizer, int) or optimizer < 0:
        raise InvalidArgumentError(f"optimizer must be 'adam', 'sgd', 'sgd-momentum' or a number of states "
                                   f"(an int >= 0), got {optimizer!r}")
    return int(optimizer), 0.0, f"{optimizer} states"


def _in_flight(k: int, schedule: str, microbatches: Any, given: Any) -> tuple[list[int], int | None, str]:
    if schedule not in ("1f1b", "gpipe"):
        raise InvalidArgumentError(f"schedule must be '1f1b' or 'gpipe', got {schedule!r}")
    mb = None if microbatches is None else check_int(microbatches, "microbatches", minimum=1,
                                                      error=InvalidArgumentError)
    if given is not None:
        if isinstance(given, (list, tuple)):
            if len(given) != k:
                raise InvalidArgumentError(f"microbatches_in_flight: {len(given)} values for {k} stages")
            flights = [check_int(g, f"microbatches_in_flight[{i}]", minimum=1, error=InvalidArgumentError)
                       for i, g in enumerate(given)]
        else:
            flights = [check_int(given, "microbatches_in_flight", minimum=1, error=InvalidArgumentError)] * k
        return flights, mb, "given"
    if schedule == "gpipe":
        if mb is None:
            raise InvalidArgumentError("microbatches: GPipe holds every microbatch of the batch; pass microbatches= "
                                       "(or microbatches_in_flight=)")
        return [mb] * k, mb, schedule
    return [k - i if mb is None else min(k - i, mb) for i in range(k)], mb, schedule


def training_memory(trace: Any, plan: Any, *, optimizer: str | int = "adam", schedule: str = "1f1b",
                    microbatches: int | None = None,
                    microbatches_in_flight: int | Sequence[int] | None = None) -> TrainingMemory:
    """Memory per stage of ``plan`` in training, predicted from ``trace`` (see the module docs).

    Parameters
    ----------
    trace : stagecut.frontends.torch.TorchTrace
        A trace made by :func:`~stagecut.frontends.torch.trace_torch` (forward or training) on
        one microbatch, with the model in the mode it trains in.
    plan : Plan, or a saved plan
        A plan over ``trace.graph``, its stages in pipeline order.
    optimizer : {"adam", "sgd", "sgd-momentum"} or int
        ``"adam"`` (also ``"adamw"``): 2 states and a 4-byte step per parameter tensor;
        ``"sgd"``: none; ``"sgd-momentum"``: 1; an int: that many parameter-sized states.
    schedule : {"1f1b", "gpipe"}
        Microbatches in flight on stage ``i`` of ``s``: ``min(s - i, microbatches)`` (1F1B;
        ``s - i`` when ``microbatches`` is not given), or ``microbatches`` (GPipe).
    microbatches : int, optional
        Microbatches per batch (required for GPipe).
    microbatches_in_flight : int or sequence of int, optional
        Overrides the schedule: the same count for every stage, or one per stage.

    Returns
    -------
    TrainingMemory

    Raises
    ------
    InvalidArgumentError
        A trace without a record of saved tensors, an unknown optimizer or schedule, a bad
        microbatch count.
    NotExpressibleError
        ``plan`` is not over the trace's graph, or its stages are not in pipeline order.

    Examples
    --------
    >>> import torch, stagecut as sc, stagecut.torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    >>> t = stagecut.torch.trace(model, torch.randn(32, 64), bandwidth="10GB/s", flops_per_s=1e9)
    >>> m = training_memory(t, sc.partition(t.graph, devices=2), optimizer="adam")
    >>> [(s.parameters, s.gradients, s.saved, s.in_flight) for s in m.stages]
    [(16640.0, 16640.0, 8192.0, 2), (2080.0, 2080.0, 8192.0, 1)]
    """
    from stagecut.frontends.split import stage_of_nodes

    record: MemoryRecord | None = getattr(trace, "memory_record", None)
    if record is None:
        raise InvalidArgumentError("the trace has no record of the tensors autograd saves (it was not made by "
                                   "trace_torch, or that run failed: see its notes)")
    states, per_tensor, name = _states(optimizer)
    stage = stage_of_nodes(plan, trace)
    k = max(stage.values(), default=-1) + 1
    flights, mb, sched = _in_flight(k, schedule, microbatches, microbatches_in_flight)
    members: list[list[str]] = [[] for _ in range(k)]
    for v in trace.order:
        members[stage[v]].append(v)
    saved = saved_per_group(record, members)
    edges = boundary_per_group(record, members)
    out = []
    for i, vs in enumerate(members):
        ws = dict.fromkeys(w for v in vs for w in record.weights.get(v, ()))
        params = [w for w in ws if w in record.trainable]
        pbytes = math.fsum(record.weight_bytes[w] for w in params)
        out.append(StageMemory(index=i, nodes=len(vs), parameters=pbytes,
                               buffers=math.fsum(record.weight_bytes[w] for w in ws) - pbytes, gradients=pbytes,
                               optimizer=states * pbytes + per_tensor * len(params), saved=saved[i],
                               in_flight=flights[i], received=edges[i].received, outputs=edges[i].outputs,
                               outputs_in_flight=(mb if mb is not None else flights[i]) if i == k - 1 else 0,
                               activation_grads=edges[i].activation_grads))
    notes = ("saved activations: the storages autograd packs for backward in one traced forward, counted once per "
             "stage (tensors received from an earlier stage at their own size); also held: the received tensors "
             "until their backward, the last stage's outputs until the step ends, one microbatch's boundary "
             "gradients; not counted: the first stage's inputs, communication buffers in flight, temporaries within "
             "an operator or a stage's backward, allocator fragmentation", *record.notes)
    return TrainingMemory(stages=tuple(out), optimizer=name, schedule=sched, microbatches=mb, notes=notes)
