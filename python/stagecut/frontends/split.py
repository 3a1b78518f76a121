"""Graph-level exports: a plan over a traced model -> the callables and lists that split the
model's program at the plan's own stage boundaries, whatever order the program runs its nodes in.

* :func:`split_policy`: the ``split_policy=`` of ``torch.distributed.pipelining.pipeline(module,
  mb_args, split_policy=...)``. ``pipeline`` exports the model with ``torch.export`` and hands the
  policy the exported program as a ``torch.fx.GraphModule``; the policy reorders its nodes to
  the plan's stage order (stage 0's nodes first, each stage's in program order) and puts a
  ``pipe_split()`` between stages, where ``pipeline`` then cuts. Unlike
  :func:`~stagecut.frontends.export.plan_to_pipelining`'s ``split_spec``, this works for every
  plan whose stages form a pipeline: stages need not start at a module call, nor be contiguous
  in program order (an exact plan may interleave independent branches).
* :func:`split_callback`: the ``split_callback`` of ``torch.fx.passes.split_module.split_module(m,
  root_m, split_callback)``: node -> stage index (in pipeline order).
* :func:`module_fqns`: torchtitan's ``module_names_per_stage``: per stage, the fully qualified
  names of the modules it holds, for a model whose top-level forward calls its layers (direct
  children, or the items of a top-level ``nn.ModuleList``/``nn.ModuleDict``: ``"layers.0"``).

Nodes of the program that the trace does not list (a ``getitem`` picking from a tuple result, an
unused result) go with the latest stage among their inputs. The stage indices are the plan's
pipeline order: every edge of the traced graph must go from a stage to itself or a later one
(:class:`~stagecut.frontends.NotExpressibleError` otherwise, naming the edge).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from stagecut.frontends._common import NotExpressibleError, require
from stagecut.frontends.export import _stage_sequence, _where
from stagecut.results import Plan

__all__ = ["stage_of_nodes", "split_policy", "split_callback", "module_fqns"]

_NOT_CALLS = ("placeholder", "get_attr", "output")


def stage_of_nodes(plan: Plan, trace: Any) -> dict[str, int]:
    """``{node id: stage}`` for the forward nodes of ``trace``, stages numbered 0, 1, ... in the
    plan's pipeline order (a backward node goes with its forward node).

    Parameters
    ----------
    plan : Plan
        A plan over ``trace.graph``, its stages in pipeline order.
    trace : stagecut.frontends.torch.TorchTrace
        The trace the graph came from.

    Returns
    -------
    dict of str to int

    Raises
    ------
    NotExpressibleError
        ``plan`` is not a :class:`~stagecut.Plan` over this trace's graph, or an edge of the
        graph goes from a stage to an earlier one (the stages are not in pipeline order).

    Examples
    --------
    >>> import torch, stagecut as sc
    >>> from stagecut.frontends.torch import trace_torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    >>> t = trace_torch(model, torch.randn(3, 4), bandwidth="10GB/s", flops_per_s=1e6)
    >>> stage_of_nodes(sc.partition(t.graph, devices=2), t)
    {'linear': 0, 'relu': 1, 'linear_1': 1}
    """
    order = list(trace.order)
    seq = _stage_sequence(plan, order, trace.graph)
    ordinal = {s: i for i, s in enumerate(sorted(set(seq)))}
    stage = {v: ordinal[s] for v, s in zip(order, seq)}
    for u, v in trace.graph.edges:
        if u in stage and v in stage and stage[u] > stage[v]:
            raise NotExpressibleError(
                f"stage {stage[v]} holds node {v!r} ({_where(trace, v)}), which uses the output of node {u!r} of the "
                f"later stage {stage[u]}: the plan's stages are not in pipeline order (every edge must go from a "
                "stage to itself or a later one)")
    return stage


def _node_stages(nodes: list[Any], stage: dict[str, int], known: dict[Any, int] | None = None) -> dict[Any, int]:
    """The stage of each call node of an fx graph (given in graph order, after ``known``): the
    trace's for its nodes, the latest of their inputs' for the others (0 with none)."""
    out: dict[Any, int] = dict(known or {})
    for n in nodes:
        if n.op in _NOT_CALLS:
            continue
        ins = [a for a in n.all_input_nodes if a in out]
        s = stage.get(n.name, max((out[a] for a in ins), default=0))
        late = [a for a in ins if out[a] > s]
        if late:
            raise NotExpressibleError(
                f"node {n.name!r} of stage {s} uses {late[0].name!r}, which is in the later stage {out[late[0]]}: "
                "the graph module does not match the trace (trace the same model with the same inputs)")
        out[n] = s
    return out


def split_policy(plan: Plan, trace: Any) -> Callable[[Any], Any]:
    """A ``split_policy`` for ``torch.distributed.pipelining.pipeline`` that cuts the model at the
    plan's stages.

    The policy reorders the nodes of the exported program to the plan's stage order (stage 0's
    nodes first, each stage's in program order: a topological order, since every edge goes
    from a stage to itself or a later one) and inserts ``pipe_split()`` between stages, so that
    ``pipeline`` builds one stage module per plan stage: ``pipe.get_stage_module(i)`` runs the
    plan's stage ``i``. Any plan whose stages form a pipeline works, also one that is not
    contiguous in program order or starts a stage inside a module.

    Parameters
    ----------
    plan : Plan
        A plan over ``trace.graph`` (:func:`stagecut.partition`), its stages in pipeline order.
    trace : stagecut.frontends.torch.TorchTrace
        The ``torch.export`` trace of the model (:func:`~stagecut.frontends.torch.trace_torch`
        with the example inputs later given to ``pipeline``); its node ids are the exported
        program's node names.

    Returns
    -------
    callable
        ``policy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule`` (the same module, changed
        in place). It raises :class:`~stagecut.frontends.NotExpressibleError` when ``gm`` lacks
        a node of the trace (a different model or inputs, or a ``tracer="fx"`` trace).

    Raises
    ------
    NotExpressibleError
        ``plan`` is not over ``trace``'s graph, or its stages are not in pipeline order.
    BackendUnavailableError
        torch is not installed.

    Examples
    --------
    >>> import torch, stagecut as sc
    >>> from torch.distributed.pipelining import pipeline
    >>> from stagecut.frontends.torch import trace_torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    >>> x = torch.randn(3, 4)
    >>> t = trace_torch(model, (x,), bandwidth="10GB/s", flops_per_s=1e6)
    >>> pipeline(model, (x,), split_policy=split_policy(sc.partition(t.graph, devices=2), t)).num_stages
    2
    """
    require("torch.distributed.pipelining", "torch")  # registers torch.ops.pippy._pipe_split
    torch = require("torch", "torch")
    pipe_split_op = torch.ops.pippy._pipe_split.default
    stage = stage_of_nodes(plan, trace)

    def policy(gm: Any) -> Any:
        graph = gm.graph
        nodes = list(graph.nodes)
        where = _node_stages(nodes, stage)
        names = {n.name for n in where}
        missing = [v for v in stage if v not in names]
        if missing:
            raise NotExpressibleError(
                f"node {missing[0]!r} of the trace is not in the graph module handed to the policy "
                f"({len(missing)} missing): the policy needs the program torch.export makes of the same model and "
                "inputs (trace with trace_torch(..., tracer='export'))")
        position = {n: i for i, n in enumerate(nodes)}
        output = next(n for n in reversed(nodes) if n.op == "output")
        head = [n for n in nodes if n.op in ("placeholder", "get_attr")]
        calls = sorted((n for n in nodes if n in where), key=lambda n: (where[n], position[n]))
        for n in head:  # inputs and weights first, in their order
            output.prepend(n)
        previous = None
        for n in calls:
            if previous is not None and where[n] != previous:
                with graph.inserting_before(output):
                    graph.call_function(pipe_split_op, ())
            output.prepend(n)
            previous = where[n]
        graph.lint()
        gm.recompile()
        from stagecut.frontends.runtime import make_runnable  # contiguous sends, no in-place op on a received leaf

        return make_runnable(gm)

    return policy


def split_callback(plan: Plan, trace: Any) -> Callable[[Any], int]:
    """A ``split_callback`` for ``torch.fx.passes.split_module.split_module``: node -> the index
    (in pipeline order) of the plan stage that runs it.

    ``split_module(gm, model, split_callback(plan, trace))`` then makes one submodule
    ``submod_<i>`` per stage ``i``. ``gm`` is the program the trace was made from:
    ``torch.export.export(model, args).module()`` for an export trace, or
    ``torch.fx.symbolic_trace(model)`` for a ``tracer="fx"`` one. A node the trace does not list
    goes with the latest stage among its inputs.

    Parameters
    ----------
    plan : Plan
        A plan over ``trace.graph``, its stages in pipeline order.
    trace : stagecut.frontends.torch.TorchTrace

    Returns
    -------
    callable
        ``callback(node: torch.fx.Node) -> int``.

    Raises
    ------
    NotExpressibleError
        ``plan`` is not over ``trace``'s graph, or its stages are not in pipeline order. The
        callback raises it for a node whose input comes from a later stage (a graph module that
        does not match the trace).

    Examples
    --------
    >>> import torch, stagecut as sc, stagecut.torch
    >>> from torch.fx.passes.split_module import split_module
    >>> model, x = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)), torch.randn(3, 4)
    >>> t = stagecut.torch.trace(model, (x,), bandwidth="10GB/s", flops_per_s=1e6)
    >>> gm = torch.export.export(model, (x,)).module()
    >>> parts = split_module(gm, model, split_callback(sc.partition(t.graph, devices=2), t))
    >>> [name for name, _ in parts.named_children() if name.startswith("submod")], torch.equal(parts(x)[0], model(x))
    (['submod_0', 'submod_1'], True)
    """
    stage = stage_of_nodes(plan, trace)
    seen: dict[Any, int] = {}

    def callback(node: Any) -> int:
        if node not in seen:  # split_module asks in graph order: a node's inputs come first
            seen.update(_node_stages([node], stage, seen))
        return seen[node]

    return callback


def _unit(trace: Any, v: Hashable) -> str | None:
    """The layer (torchtitan's unit) a node runs in: its outermost module."""
    mods = trace.modules[v]
    return str(mods[0]) if mods else None


def module_fqns(plan: Plan, trace: Any) -> list[list[str]]:
    """torchtitan's ``module_names_per_stage``: for each stage, in pipeline order, the fully
    qualified names of the layers it holds.

    A layer is a module the model's top-level ``forward`` calls: a direct child (``"norm"``),
    or an item of a top-level ``nn.ModuleList``/``nn.ModuleDict`` (``"layers.3"``), the names
    ``torchtitan``'s ``pipeline_module_split`` keeps on a stage (it deletes the others, and the
    model's forward skips what is deleted). A direct child that runs no operator (dropout in
    eval mode, ``nn.Identity``) goes with the layer before it (the first stage if it is first).
    Operators of the top-level ``forward`` itself belong to no layer and are not listed: each
    stage's copy of the forward runs those around its layers.

    Parameters
    ----------
    plan : Plan
        A plan over ``trace.graph``, its stages in pipeline order.
    trace : stagecut.frontends.torch.TorchTrace

    Returns
    -------
    list of list of str
        One list per stage, the layers in program order.

    Raises
    ------
    NotExpressibleError
        A layer whose nodes span stages (the message names the layer, the stages and a node),
        a module nested deeper than torchtitan splits, layers whose stages go backwards in
        program order, a stage with no layer, or a plan not over this trace's graph.

    Examples
    --------
    >>> import torch, stagecut as sc
    >>> from stagecut.frontends.torch import trace_torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    >>> t = trace_torch(model, torch.randn(3, 4), bandwidth="10GB/s", flops_per_s=1e6)
    >>> module_fqns(sc.partition(t.graph, devices=2), t)  # the Sequential's layers are named '0', '1', '2'
    [['0'], ['1', '2']]
    """
    stage = stage_of_nodes(plan, trace)
    layer_stage: dict[str, int] = {}
    first_node: dict[str, str] = {}
    for v in trace.order:
        unit = _unit(trace, v)
        if unit is None:
            continue
        parts = unit.split(".")
        if len(parts) > 2 or (len(parts) == 2 and parts[0] not in trace.children):
            raise NotExpressibleError(
                f"node {v!r} runs in module {unit!r}, which the top-level forward does not call as a layer (a direct "
                "child, or an item of a top-level ModuleList/ModuleDict): torchtitan splits only at those")
        if unit in layer_stage and layer_stage[unit] != stage[v]:
            raise NotExpressibleError(
                f"module {unit!r} spans stages {layer_stage[unit]} and {stage[v]} (node {first_node[unit]!r} is in "
                f"stage {layer_stage[unit]}, node {v!r} in stage {stage[v]}): torchtitan gives whole modules to "
                "stages; partition with the module's nodes colocated, or use split_policy")
        layer_stage.setdefault(unit, stage[v])
        first_node.setdefault(unit, v)
    # layers in program order; a top-level child that runs nothing follows the layers defined before it
    ordered = list(layer_stage)
    for j, child in enumerate(trace.children):
        if any(u.split(".")[0] == child for u in ordered):
            continue
        earlier = set(trace.children[:j])
        prev = max((i for i, u in enumerate(ordered) if u.split(".")[0] in earlier), default=-1)
        layer_stage[child] = layer_stage[ordered[prev]] if prev >= 0 else 0
        ordered.insert(prev + 1, child)
    k = max(stage.values(), default=-1) + 1
    out: list[list[str]] = [[] for _ in range(k)]
    last = 0
    for u in ordered:
        s = layer_stage[u]
        if s < last:
            raise NotExpressibleError(
                f"module {u!r} is in stage {s} but runs after a module of stage {last}: torchtitan runs each stage's "
                "layers in the model's forward order, so stages must be contiguous in program order; partition "
                "program_order_graph(trace), or use split_policy")
        last = s
        out[s].append(u)
    empty = [i for i, fqns in enumerate(out) if not fqns]
    if empty:
        raise NotExpressibleError(f"stage {empty[0]} holds no layer, only operators of the top-level forward: "
                                  "torchtitan needs at least one module per stage")
    return out
