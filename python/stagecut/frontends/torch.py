"""PyTorch front end (``pip install 'stagecut[torch]'``): an ``nn.Module`` and example inputs ->
a :class:`~stagecut.Graph` whose nodes are the operators of the traced program.

The model is traced with ``torch.export`` (ATen operators; node ids are the exported graph's node
names), or with ``torch.fx.symbolic_trace`` when export fails (module calls and functions; the
trace's ``notes`` say so and why). The traced program is then run once on the example inputs,
node by node, which gives every node's real output (its size in bytes: ``numel *
element_size`` summed over the tensors it returns), its FLOPs (``torch.utils.flop_counter``;
an operator with no FLOP formula that makes a new tensor counts one FLOP per output element, a
view counts none) and, with ``timing="measure"``, its run time (the median of ``repeat`` runs
after ``warmup`` runs, on the device the model and inputs are on).

Units: times in **seconds**, sizes in **bytes**, ``bandwidth`` in **bytes per second**; a node's
``comm`` is its output bytes divided by ``bandwidth``. ``timing="flops"`` turns FLOPs into
seconds with ``flops_per_s`` (the device's sustained FLOP rate).

What the graph keeps, and what it drops (each counted in the trace's ``notes``):

* parameters, buffers and lifted constants are not nodes: ``torch.export`` lifts them to
  placeholder nodes that have no producer, and such isolated nodes would multiply the ideals
  the exact DP enumerates (each one doubles them) and push ``method="auto"`` to DPL. Their bytes
  become the ``memory`` of the operator that uses them. One used by several operators
  (:mod:`stagecut.frontends.shared`): a parameter whose users are in one module is counted once
  and its users colocated; a *tied* parameter (users in different modules, GPT-2's embedding and
  output projection) is replicated (listed in ``TorchTrace.tied``; in training its gradient
  all-reduce is charged); a shared buffer is replicated and counted once;
* the model's inputs and the output node are dropped (the inputs are there before any stage
  runs); so are nodes whose result nobody uses;
* ``getitem`` nodes that pick a tensor out of an operator's tuple result are merged into that
  operator, whose output bytes are then those of the picked tensors;
* a module that holds parameters or buffers and is called several times (a shared block) has
  all the nodes of all its calls in one colocation class.

A node whose output size cannot be known (it returns something that is neither a tensor nor a
number) gets 0 bytes with a :class:`~stagecut.errors.StagecutWarning` naming it; never silently.
"""

from __future__ import annotations

import dataclasses
import operator
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stagecut.errors import InvalidArgumentError, StagecutWarning
from stagecut.frontends import export, shared, split
from stagecut.frontends import memory as mem_pred
from stagecut.frontends._common import UnionFind, bandwidth_bytes_per_s, check_sizes, require, trace_with_backward
from stagecut.frontends._torch_program import (
    SCALAR_BYTES,
    _capture,
    _count_calls,
    _fetch_attr,
    _module_stack,
    _Program,
    _run,
    _target,
    _tensor_bytes,
    output_bytes,
)
from stagecut.graph import ACCELERATOR, Graph, Node
from stagecut.results import Plan
from stagecut.validate import check_int, check_number

__all__ = ["TorchTrace", "trace_torch", "from_torch", "output_bytes", "SCALAR_BYTES"]


@dataclass(frozen=True)
class TorchTrace:
    """A traced model: the graph, and what the exports need to map a plan back to the model.

    Attributes
    ----------
    graph : Graph
        Node ids are the traced program's node names; ``compute={"accelerator": seconds}``,
        ``memory`` = bytes of the parameters and buffers a node holds, ``comm`` = output bytes /
        bandwidth (seconds).
    order : tuple of str
        The graph's node ids in program order (the order the model runs them).
    modules : mapping of str to tuple of str
        For each node, the fully qualified names of the modules whose call it is part of,
        outermost first (``("layer1", "layer1.0", "layer1.0.conv1")``; ``()`` for a node of the
        top-level ``forward``).
    children : tuple of str
        The names of the model's direct submodules, in definition order (the layers of an
        ``nn.Sequential``).
    calls : mapping of str to int
        How many times each submodule (by fully qualified name) was called in one forward pass.
    flops, output_bytes, memory : mapping of str to float
        Per node: FLOPs, output bytes, parameter and buffer bytes.
    targets : mapping of str to str
        Per node, the operator or module it runs (``"aten.linear.default"``, ``"fc1"``...).
    method : {"export", "fx"}
        The tracer that produced the program.
    timing : {"flops", "measure"}
        How the times were obtained.
    notes : tuple of str
        What was dropped, merged, colocated or warned about.
    tied : mapping of str to TiedWeight
        The tied parameters (used by operators of different modules), replicated on their
        users' stages (:mod:`stagecut.frontends.shared`); :meth:`colocate_tied` keeps each with
        one stage instead, :meth:`partition` plans both ways.
    bandwidth : float
        Bytes per second between stages (what ``comm`` was divided by).
    """

    graph: Graph
    order: tuple[str, ...]
    modules: Mapping[str, tuple[str, ...]]
    children: tuple[str, ...]
    calls: Mapping[str, int]
    flops: Mapping[str, float]
    output_bytes: Mapping[str, float]
    memory: Mapping[str, float]
    targets: Mapping[str, str]
    method: str
    timing: str
    tied: Mapping[str, Any] = field(default_factory=dict)
    bandwidth: float = 0.0
    notes: tuple[str, ...] = field(default=())
    #: the traced model and its example ``(args, kwargs)`` (for :meth:`measure` and calibration)
    model: Any = field(default=None, compare=False, repr=False)
    example: tuple[tuple[Any, ...], dict[str, Any]] = field(default=((), {}), compare=False, repr=False)
    #: the :class:`~stagecut.frontends.measure.Calibration` behind ``timing="calibrated"``
    calibration: Any = field(default=None, compare=False, repr=False)
    #: ``timing="measure"``: how far the node times vary over the ``repeat`` runs (the sum over
    #: nodes of half the interquartile range of their runs, over the sum of their medians);
    #: ``None`` for other timings
    timing_spread: float | None = field(default=None, compare=False)
    #: what autograd saves for backward per node, and the weights each node uses
    #: (:class:`~stagecut.frontends.memory.MemoryRecord`, for :meth:`training_memory`); ``None``
    #: when that run failed (a note says why)
    memory_record: mem_pred.MemoryRecord | None = field(default=None, compare=False, repr=False)

    def split_spec(self, plan: Plan, *, mode: str = "error") -> dict[str, Any]:
        """:func:`~stagecut.frontends.export.plan_to_pipelining` ``(plan, self, mode=mode).split_spec()``.

        Raises
        ------
        NotExpressibleError, InvalidArgumentError, BackendUnavailableError
        """
        return export.plan_to_pipelining(plan, self, mode=mode).split_spec()

    def split_policy(self, plan: Plan) -> Callable[[Any], Any]:
        """:func:`~stagecut.frontends.split.split_policy` ``(plan, self)``, for ``pipeline(split_policy=)``.

        Raises
        ------
        NotExpressibleError
        """
        return split.split_policy(plan, self)

    def split_callback(self, plan: Plan) -> Callable[[Any], int]:
        """:func:`~stagecut.frontends.split.split_callback` ``(plan, self)``, for ``torch.fx`` ``split_module``.

        Raises
        ------
        NotExpressibleError
        """
        return split.split_callback(plan, self)

    def module_fqns(self, plan: Plan) -> list[list[str]]:
        """:func:`~stagecut.frontends.split.module_fqns` ``(plan, self)``: torchtitan's per-stage modules.

        Raises
        ------
        NotExpressibleError
        """
        return split.module_fqns(plan, self)

    def measure(self, plan: Plan, **options: Any) -> Any:
        """:func:`~stagecut.frontends.measure.measure` ``(self, plan)``: each stage built and timed,
        predicted against measured.

        Raises
        ------
        InvalidArgumentError, NotExpressibleError
        """
        from stagecut.frontends.measure import measure

        return measure(self, plan, **options)

    def refine(self, plan: Plan, devices: int, **options: Any) -> Any:
        """:func:`~stagecut.frontends.measure.refine` ``(self, plan, devices)``: re-plan on measured
        stage times until the measured bottleneck stops moving; ``(plan, measurement, trace)``.

        Raises
        ------
        InvalidArgumentError, NotExpressibleError
        """
        from stagecut.frontends.measure import refine

        return refine(self, plan, devices, **options)

    def calibrated(self, **options: Any) -> TorchTrace:
        """:func:`~stagecut.frontends.measure.calibrated_trace` ``(self)``: node times from
        measured segments.

        Raises
        ------
        InvalidArgumentError, NotExpressibleError
        """
        from stagecut.frontends.measure import calibrated_trace

        out: TorchTrace = calibrated_trace(self, **options)
        return out

    def training_memory(self, plan: Plan, **options: Any) -> mem_pred.TrainingMemory:
        """:func:`~stagecut.frontends.memory.training_memory` ``(self, plan, **options)``: memory per
        stage in training (parameters, gradients, optimizer state, saved activations; bytes).

        Raises
        ------
        InvalidArgumentError, NotExpressibleError
        """
        return mem_pred.training_memory(self, plan, **options)

    def balance(self, plan: Plan, *, mode: str = "error") -> list[int]:
        """:func:`~stagecut.frontends.export.plan_to_balance` ``(plan, self, mode=mode)``: torchgpipe's ``balance=``.

        Raises
        ------
        NotExpressibleError, InvalidArgumentError
        """
        return export.plan_to_balance(plan, self, mode=mode)

    def display(self) -> Any:
        """How to print this trace's plans (``plan.table(display=t.display())``,
        ``plan.summary(t.display())``): times in seconds, sizes in bytes, each stage's first and
        last node named with the module it runs in.

        Returns
        -------
        stagecut.units.Display
        """
        from stagecut.units import Display

        names = {v: f"{v} ({self.modules[v][-1]})" if self.modules.get(v) else str(v) for v in self.order}
        return Display(time="s", names=names)

    def colocate_tied(self) -> TorchTrace:
        """:func:`~stagecut.frontends.shared.colocate_tied` ``(self)``: each tied parameter kept
        with one stage instead of replicated."""
        out: TorchTrace = shared.colocate_tied(self)
        return out

    def partition(self, devices: int, **options: Any) -> Plan:
        """:func:`~stagecut.frontends.shared.partition_shared` ``(self, devices, **options)``:
        :func:`stagecut.partition` with tied parameters replicated or kept with one stage,
        whichever plan is cheaper.

        Raises
        ------
        InvalidArgumentError
        """
        out: Plan = shared.partition_shared(self, devices, **options)
        return out


def trace_torch(
    model: Any,
    example_inputs: Sequence[Any] | Any,
    example_kwargs: Mapping[str, Any] | None = None,
    *,
    bandwidth: float | str,
    timing: str = "flops",
    flops_per_s: float = 1e12,
    warmup: int = 2,
    repeat: int = 5,
    tracer: str = "auto",
    training: bool = False,
    backward_factor: float = 2.0,
    seed: int | None = None,
) -> TorchTrace:
    """Trace ``model`` on example inputs into a :class:`TorchTrace` (its ``graph`` is what
    :func:`from_torch` returns).

    Parameters
    ----------
    model : torch.nn.Module
        The model, in the mode (train/eval) and on the device to plan for. Its parameters and
        buffers are restored after the runs tracing and timing make.
    example_inputs : tuple or tensor
        Positional inputs of one (micro)batch; a single tensor is taken as ``(tensor,)``.
    example_kwargs : mapping, optional
        Keyword inputs.
    bandwidth : float or str
        The link between stages: bytes per second (``25e9``) or a string with units
        (``"25GB/s"``). Every node's ``comm`` is its output bytes divided by it.
    timing : {"flops", "measure", "calibrated"}
        ``"flops"``: seconds = FLOPs / ``flops_per_s``. ``"measure"``: the median time of
        ``repeat`` runs of each node after ``warmup`` runs, on the inputs' device (each node
        alone: per-call overhead included; thread CPU time on the CPU, wall time elsewhere).
        ``"calibrated"``: whole segments of the program timed as built, a per-operator-kind
        model fitted on them and scaled to them (:func:`stagecut.frontends.measure.calibrate`;
        CPU thread time: call ``torch.set_num_threads(1)`` first).
    flops_per_s : float
        Sustained FLOP rate of a device, for ``timing="flops"`` (default 1e12, a nominal
        1 TFLOP/s: set your device's).
    warmup, repeat : int
        Runs per node before and while timing (``timing="measure"``). The trace's
        ``timing_spread`` (and a note) says how much the node times varied over the ``repeat``
        runs: plans made on two such traces of one model may differ where stage times are
        closer than that.
    seed : int, optional
        Seeds torch's random number generator for the runs (random operators such as dropout
        then draw the same values on every trace); the caller's generator state is restored.
    training, backward_factor
        ``training=True`` adds a backward node per node (``<id>_bwd``, ``backward_factor`` times
        the forward time, colocated with its forward node; see
        :func:`stagecut.frontends._common.with_backward`); ``order`` stays the forward nodes'.
    tracer : {"auto", "export", "fx"}
        ``"auto"``: ``torch.export``, then ``torch.fx.symbolic_trace`` if export fails (said in
        the notes); ``"export"``/``"fx"``: only that one.

    Returns
    -------
    TorchTrace

    Raises
    ------
    BackendUnavailableError
        torch is not installed (``pip install 'stagecut[torch]'``).
    InvalidArgumentError
        An unknown ``timing`` or ``tracer``, a bad ``bandwidth``, ``flops_per_s``, ``warmup`` or
        ``repeat``, a model that is not an ``nn.Module``, or one that no tracer asked for can
        trace.
    InvalidGraphError
        The traced program has no operator left to place.

    Examples
    --------
    >>> import torch
    >>> t = trace_torch(torch.nn.Linear(4, 2), torch.randn(8, 4), bandwidth="10GB/s")
    >>> t.graph.nodes[0].memory
    40.0
    """
    torch = require("torch", "torch")
    if timing not in ("flops", "measure", "calibrated"):
        raise InvalidArgumentError(f"timing must be 'flops', 'measure' or 'calibrated', got {timing!r}")
    if tracer not in ("auto", "export", "fx"):
        raise InvalidArgumentError(f"tracer must be 'auto', 'export' or 'fx', got {tracer!r}")
    if not isinstance(model, torch.nn.Module):
        raise InvalidArgumentError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    bw = bandwidth_bytes_per_s(bandwidth)
    rate = check_number(flops_per_s, "flops_per_s", positive=True, error=InvalidArgumentError)
    warmup = check_int(warmup, "warmup", error=InvalidArgumentError)
    repeat = check_int(repeat, "repeat", minimum=1, error=InvalidArgumentError)
    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    kwargs = dict(example_kwargs or {})

    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    try:  # the runs below may update buffers (BatchNorm's statistics in train mode): put them back
        calls = _count_calls(model, args, kwargs)
        program = _capture(model, args, kwargs, tracer)
        runs: dict[str, list[float]] = {}
        with torch.random.fork_rng(devices=[]):
            if seed is not None:
                torch.manual_seed(check_int(seed, "seed", minimum=0, error=InvalidArgumentError))
            outputs, flops, seconds = _run(program, timing, warmup, repeat, runs)
            raw = _record_saved(program)
    finally:
        model.load_state_dict(saved)
    base = "flops" if timing == "calibrated" else timing
    trace = _build(program, model, calls, outputs, flops, seconds, bw, rate, base, raw)
    trace = dataclasses.replace(trace, model=model, example=(args, kwargs))
    if runs:
        import numpy as np

        total = sum(seconds.values())
        spread = float(sum((np.percentile(r, 75) - np.percentile(r, 25)) / 2 for r in runs.values()) / total
                       if total > 0 else 0.0)
        trace = dataclasses.replace(trace, timing_spread=spread, notes=(
            *trace.notes, f"measured node times vary by +-{100 * spread:.1f}% over {repeat} runs (time-weighted "
            "half interquartile range): plans whose bottlenecks differ by less may swap between traces"))
    if timing == "calibrated":
        from stagecut.frontends.measure import calibrated_trace

        trace = calibrated_trace(trace, warmup=warmup, repeat=repeat)
    if not training:
        return trace
    return trace_with_backward(trace, backward_factor)


def from_torch(model: Any, example_inputs: Sequence[Any] | Any, example_kwargs: Mapping[str, Any] | None = None,
               *, bandwidth: float | str, **options: Any) -> Graph:
    """The :class:`~stagecut.Graph` of ``model`` (:func:`trace_torch`'s ``graph``; same arguments).

    Parameters
    ----------
    model, example_inputs, example_kwargs, bandwidth, **options
        As for :func:`trace_torch` (``timing``, ``flops_per_s``, ``warmup``, ``repeat``,
        ``tracer``).

    Returns
    -------
    Graph
        Times in seconds, memory in bytes, ``comm`` in seconds (output bytes / bandwidth).

    Raises
    ------
    BackendUnavailableError
        torch is not installed (``pip install 'stagecut[torch]'``).
    InvalidArgumentError
        As for :func:`trace_torch`.
    InvalidGraphError
        As for :func:`trace_torch`.
    """
    return trace_torch(model, example_inputs, example_kwargs, bandwidth=bandwidth, **options).graph


def _record_saved(program: _Program) -> mem_pred.RawSaved | str:
    """:func:`stagecut.frontends.memory.record_saved` on the program, or why it failed."""
    names = [n.name for n in program.gm.graph.nodes if n.op == "placeholder"]
    weights = [i for i, name in enumerate(names) if name in program.weights]
    try:
        return mem_pred.record_saved(program.gm, program.inputs, weights)
    except Exception as e:  # a model that cannot run with autograd on (in-place on a leaf...)
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def _memory_record(raw: mem_pred.RawSaved | str, nodes: list[Any], keep: list[Any], source: Callable[[Any], Any],
                   uses: Mapping[str, list[str]], wsize: Mapping[str, float], trainable: set[str],
                   aliases: Mapping[str, tuple[str, ...]], notes: list[str]) -> mem_pred.MemoryRecord | None:
    """The trace's :class:`~stagecut.frontends.memory.MemoryRecord`: each program node's saved
    tensors go to the kept node it was merged into (a pick to its source; an unused node to its
    latest kept input, else the first kept node)."""
    if isinstance(raw, str):
        notes.append(f"the forward pass with autograd on failed ({raw}): no training memory prediction")
        return None
    kept = {n.name for n in keep}
    position = {n.name: i for i, n in enumerate(keep)}
    owner: dict[str, str] = {}
    for n in nodes:
        if n.op not in ("call_function", "call_method", "call_module"):
            continue
        s = source(n).name
        if s in kept:
            owner[n.name] = s
            continue
        ins = [owner[a.name] for a in n.all_input_nodes if a.name in owner]
        owner[n.name] = max(ins, key=position.__getitem__) if ins else keep[0].name
    canon = {fqn: aliases.get(fqn, (fqn,))[0] for fqn in uses}
    weights: dict[str, list[str]] = {}
    for fqn, users in uses.items():
        for u in users:
            if u in kept:
                weights.setdefault(u, []).append(canon[fqn])
    return mem_pred.make_record(raw, owner, weights, {canon[f]: b for f, b in wsize.items()},
                              {canon[f] for f in trainable if f in canon})


def _build(program: _Program, model: Any, calls: Mapping[str, int], outputs: Mapping[str, Any],
           flops: Mapping[str, float], seconds: Mapping[str, float], bw: float, rate: float,
           timing: str, raw: mem_pred.RawSaved | str = "not recorded") -> TorchTrace:
    notes = list(program.notes)
    nodes = list(program.gm.graph.nodes)
    by_name = {n.name: n for n in nodes}
    weight_values = dict(zip([n.name for n in nodes if n.op == "placeholder"], program.inputs))
    for n in nodes:
        if n.op == "get_attr":
            weight_values[n.name] = _fetch_attr(program.gm, str(n.target))

    def is_pick(n: Any) -> bool:  # getitem on a tuple/list result: merged into its producer
        return bool(n.op == "call_function" and n.target is operator.getitem and n.args
                    and hasattr(n.args[0], "name") and isinstance(outputs.get(n.args[0].name), (tuple, list)))

    def source(n: Any) -> Any:
        while is_pick(n):
            n = n.args[0]
        return n

    ops = [n for n in nodes if n.op in ("call_function", "call_method", "call_module")]
    keep = [n for n in ops if not is_pick(n)]
    picks = [n for n in ops if is_pick(n)]
    picked: dict[str, list[Any]] = {}
    for p in picks:
        picked.setdefault(p.args[0].name, []).append(p)
    used = {source(u).name for n in nodes for u in n.all_input_nodes if n.op != "placeholder"}
    dead = [n.name for n in keep if n.name not in used]
    keep = [n for n in keep if n.name in used]
    if not keep:
        from stagecut.errors import InvalidGraphError
        raise InvalidGraphError("the traced model has no operator to place (it returns its inputs or constants)")
    kept = {n.name for n in keep}

    out_bytes: dict[str, float] = {}
    unknown: list[str] = []
    for n in keep:
        value = outputs[n.name]
        if isinstance(value, (tuple, list)) and n.name in picked:
            taken = [p for p in picked[n.name] if p.users]
            sizes = [output_bytes(outputs[p.name]) for p in taken]
        else:
            sizes = [output_bytes(value)]
        if any(s is None for s in sizes):
            unknown.append(n.name)
        out_bytes[n.name] = float(sum(s for s in sizes if s is not None))
    if unknown:
        msg = (f"{len(unknown)} node(s) return something whose size is unknown (neither tensors nor numbers); "
               f"their output counts as 0 bytes: {', '.join(unknown[:10])}")
        notes.append(msg)
        warnings.warn(msg, StagecutWarning, stacklevel=3)

    # parameters and buffers: memory of their first user, users colocated
    position = {n.name: i for i, n in enumerate(keep)}
    uses: dict[str, list[str]] = {}
    wsize: dict[str, float] = {}
    grad: set[str] = set()  # the weights that require grad
    for name, fqn in program.weights.items():  # lifted placeholders (export) or get_attr nodes (fx)
        uses.setdefault(fqn, []).extend(source(u).name for u in by_name[name].users)
        wsize[fqn] = _tensor_bytes(weight_values[name])
        if getattr(weight_values[name], "requires_grad", False):
            grad.add(fqn)
    for n in keep:  # fx: a call_module node holds its module's parameters and buffers
        if n.op == "call_module":
            mod = program.gm.get_submodule(str(n.target))
            for pname, p in [*mod.named_parameters(), *mod.named_buffers()]:
                fqn = f"{n.target}.{pname}"
                uses.setdefault(fqn, []).append(n.name)
                wsize[fqn] = _tensor_bytes(p)
                if any(p is q for q in mod.parameters()):
                    program.params.add(fqn)
                if p.requires_grad:
                    grad.add(fqn)
    classes = UnionFind()
    memory = {n.name: 0.0 for n in keep}
    modules = {n.name: _module_stack(n, program.method) for n in keep}
    by_tensor: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        by_tensor.setdefault(id(p), []).append(name)
    aliases = {name: tuple(names) for names in by_tensor.values() for name in names}
    record = _memory_record(raw, nodes, keep, source, uses, wsize, program.params & grad, aliases, notes)
    tied, unused_weights = shared.place_weights(uses, wsize, program.params, modules, position, classes, memory,
                                                aliases, notes)
    if unused_weights:
        notes.append(f"{len(unused_weights)} parameter(s)/buffer(s) used by no operator were dropped "
                     f"(not counted in memory): {', '.join(unused_weights[:10])}")
    placeholders = [n.name for n in nodes if n.op == "placeholder" and n.name not in program.weights]
    if placeholders:
        notes.append(f"{len(placeholders)} model input(s) dropped: {', '.join(placeholders[:10])}")
    if dead:
        notes.append(f"{len(dead)} node(s) whose result nobody uses dropped: {', '.join(dead[:10])}")
    if picks:
        notes.append(f"{len(picks)} getitem node(s) merged into the operator whose tuple result they pick from")

    shared_modules = sorted(name for name, m in model.named_modules() if name and calls.get(name, 0) > 1
                    and (any(True for _ in m.parameters()) or any(True for _ in m.buffers())))
    for m in shared_modules:
        for n in keep:
            if m in modules[n.name]:
                classes.union("module:" + m, n.name)
    if shared_modules:
        notes.append("module(s) called several times, with all their calls' nodes colocated: "
                     f"{', '.join(shared_modules)}")

    members: dict[str, list[str]] = {}
    for n in keep:
        members.setdefault(classes.find(n.name), []).append(n.name)
    colocation = {v: (min(ms) if len(ms) > 1 else None) for ms in members.values() for v in ms}

    graph_nodes = []
    for n in keep:
        t = seconds[n.name] if timing == "measure" else flops[n.name] / rate
        where = modules[n.name][-1] if modules[n.name] else "forward"
        graph_nodes.append(Node(id=n.name, compute={ACCELERATOR: t}, memory=memory[n.name],
                                comm=out_bytes[n.name] / bw, colocation=colocation[n.name],
                                name=f"{_target(n)} [{where}]"))
    edges = list(dict.fromkeys((source(u).name, n.name) for n in keep for u in n.all_input_nodes
                               if source(u).name in kept))
    graph = Graph(graph_nodes, edges)
    check_sizes(out_bytes.values(), sum(x.comm for x in graph.nodes),
                sum(x.compute[ACCELERATOR] for x in graph.nodes), notes)
    return TorchTrace(
        graph=graph, order=tuple(n.name for n in keep), modules=modules,
        children=tuple(name for name, _ in model.named_children()), calls=dict(calls),
        flops={n.name: flops[n.name] for n in keep}, output_bytes=out_bytes, memory=memory,
        targets={n.name: _target(n) for n in keep}, method=program.method, timing=timing, notes=tuple(notes),
        tied=tied, bandwidth=bw, memory_record=record)
