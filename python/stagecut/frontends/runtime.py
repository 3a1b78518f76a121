"""Making a split program runnable by ``torch.distributed.pipelining``, and building the pipe.

A plan may cut a program anywhere; the runtime then sends each tensor that crosses a stage
boundary with gloo/NCCL point-to-point calls and hands it to the next stage as a fresh leaf
that requires grad. Two kinds of cut fail there although the unsplit program is fine:

* a **non-contiguous** tensor crossing the boundary (the output of ``transpose``, ``permute``,
  ``expand``, a strided slice): ``RuntimeError: input tensor has to be contiguous`` in both
  ranks. :func:`make_runnable` makes a contiguous copy at the end of the producing stage
  (``aten.clone`` with ``memory_format=torch.contiguous_format``) and sends that; a tensor
  already contiguous is sent as it is (the decision uses the shapes and strides that
  ``torch.export`` records; a node without them is copied, which is always correct).
* a tensor read **beyond the next stage** (a model input read by a later stage, a skip
  connection): ``PipelineStage`` receives only from the stage before it (``expected non-root
  _RecvInfo but got root arg``). :func:`make_runnable` passes it through every stage between
  (a contiguous copy at the end of each).
* an **in-place operator** (``relu_``, ``add_``...) writing to a tensor received from an earlier
  stage: ``a leaf Variable that requires grad is being used in an in-place operation`` in
  forward+backward. :func:`make_runnable` clones the received tensor at the start of the
  stage and makes the in-place operator and every later user read the clone (the same values
  the unsplit program sees).

:func:`pipeline` is ``torch.distributed.pipelining.pipeline`` with that pass applied, for a
``split_spec`` or a ``split_policy``, and each stage module then stripped of the parameters and
buffers its program never reads (:func:`drop_unused_weights`: ``torch.distributed.pipelining``
gives a stage a copy of a tied weight under each of its names, also the names of modules the
stage does not run); :func:`stagecut.frontends.split.split_policy` applies it
itself. The copies cost one memory pass over the tensors they copy; ``notes(gm)`` is not kept:
the pass records what it did in ``gm.meta["stagecut_runtime"]``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from stagecut.errors import InvalidArgumentError
from stagecut.frontends._common import require
from stagecut.results import Plan

__all__ = ["make_runnable", "pipeline", "drop_unused_weights", "as_plan", "plan_once", "tied_parameters",
           "allreduce_tied", "allreduce_data_parallel", "pipeline_grid"]


def as_plan(plan: Plan | str | os.PathLike[str] | Mapping[str, Any]) -> Plan:
    """A plan, or one saved with ``plan.to_json()``: a path to a JSON file, a JSON string or the
    parsed mapping (so every rank can run the plan computed once on rank 0 or ahead of time).

    Raises
    ------
    InvalidArgumentError
        Not a plan, a readable file or JSON a plan was saved as (naming the file or field).
    """
    if isinstance(plan, Plan):
        return plan
    if isinstance(plan, os.PathLike) or (isinstance(plan, str) and not plan.lstrip().startswith("{")):
        path = Path(plan)
        try:
            text = path.read_text()
        except OSError as e:
            raise InvalidArgumentError(f"plan: cannot read {str(path)!r} ({e.strerror or e})") from e
        return _from_json(text, f"plan file {str(path)!r}")
    if isinstance(plan, (str, Mapping)):
        return _from_json(plan, "plan")
    raise InvalidArgumentError(f"plan must be a stagecut.Plan, a path to a saved plan or its JSON, got "
                               f"{type(plan).__name__}")


def _from_json(data: str | Mapping[str, Any], what: str) -> Plan:
    import json

    try:
        return Plan.from_json(data)
    except (InvalidArgumentError, ValueError, KeyError, TypeError, json.JSONDecodeError) as e:
        raise InvalidArgumentError(f"{what} is not a saved stagecut plan: {type(e).__name__}: "
                                   f"{str(e).splitlines()[0][:200] if str(e) else ''}") from e


def _is_split(n: Any, pipe_split: Any) -> bool:
    return bool(n.op == "call_function" and n.target is pipe_split)


def _mutated_args(n: Any) -> list[Any]:
    """The fx nodes an in-place operator writes to (its schema's mutable arguments)."""
    schema = getattr(n.target, "_schema", None)
    if n.op != "call_function" or schema is None or not getattr(schema, "is_mutable", False):
        return []
    out = []
    for i, arg in enumerate(schema.arguments):
        info = arg.alias_info
        if info is None or not info.is_write:
            continue
        value = n.args[i] if i < len(n.args) else n.kwargs.get(arg.name)
        if hasattr(value, "op"):
            out.append(value)
    return out


def _alias_root(x: Any) -> Any:
    """The node whose storage ``x`` views (``x`` itself when it is no view): follows operators
    whose schema says the result aliases their first argument (``view``, ``transpose``...)."""
    seen = 0
    while x.op == "call_function" and seen < 10_000:
        schema = getattr(x.target, "_schema", None)
        if schema is None or not schema.returns or schema.returns[0].alias_info is None or not schema.arguments:
            break
        first = schema.arguments[0].alias_info
        if first is None or first.is_write or not x.args or not hasattr(x.args[0], "op"):
            break
        x, seen = x.args[0], seen + 1
    return x


def _contiguous(n: Any) -> bool | None:
    """Whether the tensor a node makes is contiguous (``None``: unknown, or not a tensor)."""
    val = n.meta.get("val")
    if val is None or not hasattr(val, "is_contiguous"):
        return None
    try:
        return bool(val.is_contiguous())
    except Exception:  # a symbolic shape that cannot decide
        return None


def _send_copy(graph: Any, x: Any, end: Any, users: list[Any], root: Mapping[str, Any], torch: Any) -> Any:
    """Insert a contiguous copy of ``x`` just before ``end`` (the ``pipe_split`` closing a stage)
    and make ``users`` (in later stages) read it: what the stage sends instead of ``x``. Both
    rewrites that send a tensor on use it: the pass-through of a tensor read beyond the next
    stage (``x`` the previous copy, ``end`` each stage's split in turn) and the copy of a
    non-contiguous tensor leaving its own stage. Returns the copy.

    The copy sits at the stage's top level (``root``'s module stack), after the body: with
    ``x``'s module stack it would open a second run of that module after the body, and the
    runtime outlines one module per name (the second call's graph would replace the first's:
    Llama's k = 4 plan).
    """
    with graph.inserting_before(end):
        copy = graph.call_function(torch.ops.aten.clone.default, (x,), {"memory_format": torch.contiguous_format})
    copy.meta = {"nn_module_stack": dict(root)}
    val = x.meta.get("val")
    if val is not None:
        try:
            copy.meta["val"] = val.clone(memory_format=torch.contiguous_format)
        except Exception:  # fake tensors that cannot be cloned: leave the meta out
            pass
    for u in users:
        u.replace_input_with(x, copy)
    return copy


def make_runnable(gm: Any) -> Any:
    """Make the stages of a program split by ``pipe_split()`` calls runnable (module docstring):
    non-contiguous tensors crossing a boundary copied contiguous, tensors received from an
    earlier stage cloned before an in-place operator writes to them.

    Parameters
    ----------
    gm : torch.fx.GraphModule
        The program with its ``pipe_split`` calls (what a ``split_policy`` returns), changed in
        place.

    Returns
    -------
    torch.fx.GraphModule
        ``gm``; ``gm.meta["stagecut_runtime"]`` lists what was added.

    Raises
    ------
    BackendUnavailableError
        torch is not installed.
    """
    require("torch.distributed.pipelining", "torch")
    torch = require("torch", "torch")
    pipe_split = torch.ops.pippy._pipe_split.default
    from torch.distributed.pipelining import _IR

    splits = (pipe_split, _IR.pipe_split)
    graph = gm.graph
    done: list[str] = []

    def stages() -> dict[Any, int]:
        out: dict[Any, int] = {}
        s = 0
        for n in graph.nodes:
            if n.op == "call_function" and n.target in splits:
                s += 1
            elif n.op not in ("placeholder", "get_attr", "output"):
                out[n] = s
        return out

    where = stages()
    if not any(where.values()):
        return gm
    boundary = [n for n in graph.nodes if n.op == "call_function" and n.target in splits]
    # 0. a tensor used beyond the next stage (a model input read by stage 1 or later, a skip
    # connection) is passed through every stage between: PipelineStage receives only from the
    # stage before it, and a stage after the first cannot take a model input
    root = next(({k: v} for n in graph.nodes for k, v in (n.meta.get("nn_module_stack") or {}).items()), {})
    for x in list(graph.nodes):
        if not hasattr(x.meta.get("val"), "shape"):  # a tuple result: its getitem picks are passed instead
            continue
        if x.op == "placeholder":
            start = 0
        elif x in where:
            start = where[x] + 1
        else:
            continue
        cur = x
        for j in range(start, len(boundary)):
            later = [u for u in cur.users if u in where and where[u] > j]
            if not later:
                break
            cur = _send_copy(graph, cur, boundary[j], later, root, torch)
            where[cur] = j
            done.append(f"{x.name} passed through stage {j}")
    where = stages()
    # 1. in-place writes to a tensor from an earlier stage (or a model input read by a later stage)
    for n in list(graph.nodes):
        if n not in where:
            continue
        for x in (_alias_root(m) for m in _mutated_args(n)):
            if x.op == "get_attr" or (x in where and where[x] >= where[n]) or (x.op == "placeholder"
                                                                                and where[n] == 0):
                continue
            split_node = boundary[where[n] - 1]
            with graph.inserting_after(split_node):
                copy = graph.call_function(torch.ops.aten.clone.default, (x,))
            # the stage's top level (the runtime outlines submodules by module stack: inside n's module, a
            # clone placed at the stage start would be a call of its own, and n's call would get a leaf)
            copy.meta = {"nn_module_stack": dict(root), "val": x.meta.get("val")}
            stage_now = stages()
            for user in list(x.users):
                if user is not copy and user in stage_now and stage_now[user] >= where[n]:
                    user.replace_input_with(x, copy)
            where = stage_now
            where[copy] = where[n]
            done.append(f"{x.name} cloned at the start of stage {where[n]} before {n.name} writes to it")
    # 2. non-contiguous tensors crossing a boundary
    where = stages()
    for x in list(graph.nodes):
        if x not in where or _contiguous(x) is not False:
            continue
        later = [u for u in x.users if u in where and where[u] > where[x]]
        if not later:
            continue
        _send_copy(graph, x, boundary[where[x]], later, root, torch)  # at the pipe_split closing x's stage
        done.append(f"{x.name} made contiguous before it leaves stage {where[x]}")
    graph.lint()
    gm.recompile()
    gm.meta["stagecut_runtime"] = tuple(done)
    return gm


def pipeline(model: Any, mb_args: tuple[Any, ...], mb_kwargs: Mapping[str, Any] | None = None, *,
             split_spec: Mapping[str, Any] | None = None,
             split_policy: Callable[[Any], Any] | None = None) -> Any:
    """``torch.distributed.pipelining.pipeline`` with the stages made runnable
    (:func:`make_runnable`): same arguments, exactly one of ``split_spec`` and ``split_policy``.
    A Hugging Face model gets ``config.use_cache=False`` first, as the trace does.

    Returns
    -------
    torch.distributed.pipelining.Pipe

    Raises
    ------
    InvalidArgumentError
        Neither or both of ``split_spec`` and ``split_policy``.
    BackendUnavailableError
        torch is not installed.
    """
    require("torch.distributed.pipelining", "torch")
    from torch.distributed.pipelining import _IR

    if (split_spec is None) == (split_policy is None):
        raise InvalidArgumentError("pass exactly one of split_spec and split_policy")
    from stagecut.frontends.model_prep import prepare

    prepare(model)  # Hugging Face models: use_cache=False, as the trace does (a model loaded here may not be traced)
    if split_spec is not None:
        _IR.annotate_split_points(model, dict(split_spec))
        policy: Callable[[Any], Any] = make_runnable
    else:
        user = split_policy
        assert user is not None

        def policy(gm: Any) -> Any:
            return make_runnable(user(gm))
    pipe = _IR.Pipe.from_tracing(mod=model, example_args=tuple(mb_args),
                                 example_kwargs=dict(mb_kwargs) if mb_kwargs else None, split_policy=policy)
    for i in range(pipe.num_stages):
        drop_unused_weights(pipe.get_stage_module(i))
    return pipe


def _weights_read(module: Any, torch: Any) -> tuple[set[int], set[int]]:
    """The tensors (by ``id``) that the program of a stage module reads, and the submodules (by
    ``id``) its programs call: ``get_attr`` nodes of its graph and of the graphs of the
    submodules it calls, every parameter and buffer of a called module that has no graph."""
    used: set[int] = set()
    called: set[int] = set()

    def visit(mod: Any) -> None:
        if id(mod) in called:
            return
        called.add(id(mod))
        graph = getattr(mod, "graph", None)
        if not isinstance(graph, torch.fx.Graph):  # an ordinary module: it may read all it holds
            used.update(id(t) for t in (*mod.parameters(), *mod.buffers()))
            called.update(id(m) for m in mod.modules())
            return
        for n in graph.nodes:
            if n.op == "get_attr":
                obj: Any = mod
                for part in str(n.target).split("."):
                    obj = getattr(obj, part)
                if isinstance(obj, torch.nn.Module):
                    visit(obj)
                elif isinstance(obj, torch.Tensor):
                    used.add(id(obj))
            elif n.op == "call_module":
                visit(mod.get_submodule(str(n.target)))

    visit(module)
    return used, called


def drop_unused_weights(module: Any) -> list[str]:
    """Remove from a stage module the parameters and buffers its program never reads, and the
    submodules left empty and never called; returns the names removed.

    ``torch.distributed.pipelining`` gives a stage that uses a tied weight (an embedding whose
    weight the output projection shares) a copy under every name of the weight, also the names
    of modules the stage does not run: the stage would hold, and the optimizer step, a copy no
    operator reads. A stage then holds only what its operators use; a tied weight used on
    several stages keeps one copy on each (:func:`allreduce_tied` sums their gradients).
    """
    torch = require("torch", "torch")
    used, called = _weights_read(module, torch)
    removed: list[str] = []
    for owner_name, owner in list(module.named_modules()):
        for kind in ("_parameters", "_buffers"):
            table = getattr(owner, kind)
            for name in [n for n, t in table.items() if t is not None and id(t) not in used]:
                del table[name]
                if kind == "_buffers":
                    owner._non_persistent_buffers_set.discard(name)
                removed.append(f"{owner_name}.{name}" if owner_name else name)
    for _, owner in sorted(module.named_modules(), key=lambda x: -x[0].count(".")):
        for child_name, child in list(owner.named_children()):
            if id(child) in called or any(True for _ in child.children()):
                continue
            if not child._parameters and not child._buffers:
                delattr(owner, child_name)
    return removed


def plan_once(make_plan: Callable[[], Plan] | Plan | str | os.PathLike[str], *, src: int = 0,
              group: Any = None) -> Plan:
    """One plan for every rank: computed (or loaded) on rank ``src`` only and broadcast as JSON,
    so that ranks whose own traces and timings differ still build the same pipeline.

    Parameters
    ----------
    make_plan : callable, Plan, or saved plan
        A function returning the plan (called on rank ``src`` only: trace and partition there),
        or a plan / a saved plan's path or JSON (read on rank ``src`` only).
    src : int
        The rank that plans.
    group : ProcessGroup, optional
        ``torch.distributed`` group (default: the world).

    Returns
    -------
    Plan
        The same plan on every rank. Without an initialised ``torch.distributed``, the plan
        computed here.

    Raises
    ------
    InvalidArgumentError
        A saved plan that cannot be read (on rank ``src``; the others then fail in the broadcast).
    """
    import json

    torch = require("torch", "torch")
    dist = torch.distributed

    def make() -> Plan:
        return as_plan(make_plan() if callable(make_plan) else make_plan)

    if not (dist.is_available() and dist.is_initialized()):
        return make()
    box: list[Any] = [None]
    if dist.get_rank() == src:
        box[0] = json.dumps(make().to_json())
    dist.broadcast_object_list(box, src=src, group=group)
    return as_plan(str(box[0]))


def tied_parameters(model: Any) -> list[tuple[str, ...]]:
    """The names of each parameter the model reaches by several names (a tied weight: GPT-2's
    ``("transformer.wte.weight", "lm_head.weight")``), in ``named_parameters`` order."""
    names: dict[int, list[str]] = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(n)
    return [tuple(ns) for ns in names.values() if len(ns) > 1]


def allreduce_tied(model: Any, modules: Any, *, group: Any = None) -> int:
    """After backward, before the optimizer step: give every copy of each tied parameter the sum
    of the copies' gradients, over the stage modules of every rank of the pipeline.

    A plan that replicates a tied weight (its users on several stages) gives each stage holding a
    user its own copy; each copy's gradient is only its stage's part. Summing them (what the
    unsplit model's single weight gets) and handing every copy the sum keeps the copies equal
    after the optimizer step. Every rank of ``group`` must call this with the same model (every
    tied parameter is all-reduced in the same order; a rank holding no copy sends zeros). The
    planner charges a ring all-reduce over the ranks holding a copy; ranks of ``group`` that hold
    none add traffic to that, so pass a group of the holders when the pipeline has many ranks.

    Parameters
    ----------
    model : torch.nn.Module
        The model the pipeline was built from (its tied parameters and their shapes).
    modules : torch.nn.Module or sequence of them
        The stage modules this rank runs (``pipe.get_stage_module(i)`` or ``stage.submod``).
    group : ProcessGroup, optional
        The pipeline's ``torch.distributed`` group (default: the world). Without an initialised
        ``torch.distributed``, the copies in ``modules`` are summed locally.

    Returns
    -------
    int
        The number of tied parameters reduced.
    """
    torch = require("torch", "torch")
    dist = torch.distributed
    mods = [modules] if isinstance(modules, torch.nn.Module) else list(modules)
    shapes = dict(model.named_parameters(remove_duplicate=False))
    distributed = dist.is_available() and dist.is_initialized()
    count = 0
    for names in tied_parameters(model):
        alias = set(names)
        copies: dict[int, Any] = {}
        for m in mods:
            for n, p in m.named_parameters():
                if n in alias:
                    copies.setdefault(id(p), p)
        like = next(iter(copies.values()), shapes[names[0]])
        total = torch.zeros(like.shape, dtype=like.dtype, device=like.device)
        for p in copies.values():
            if p.grad is not None:
                total += p.grad
        if distributed:
            dist.all_reduce(total, group=group)
        for p in copies.values():
            p.grad = total.clone()
        count += 1
    return count


def allreduce_data_parallel(modules: Any, *, group: Any = None) -> int:
    """After backward (and :func:`allreduce_tied`), average each parameter's gradient over the
    data-parallel replicas of a stage (DDP's averaging): every rank of ``group`` runs the same
    stage(s) on its own share of the batch. Returns the number of gradients averaged.

    A gradient that is ``None`` on this rank counts as zeros (the replicas must agree on the
    parameters, in the order the modules list them).
    """
    torch = require("torch", "torch")
    dist = torch.distributed
    mods = [modules] if isinstance(modules, torch.nn.Module) else list(modules)
    if not (dist.is_available() and dist.is_initialized()):
        return 0
    size = dist.get_world_size(group)
    count = 0
    for m in mods:
        for p in m.parameters():
            if not p.requires_grad:
                continue
            g = p.grad if p.grad is not None else torch.zeros_like(p)
            dist.all_reduce(g, group=group)
            p.grad = g / size
            count += 1
    return count


def pipeline_grid(stages: int, replicas: int) -> tuple[int, int, Any, Any]:
    """This rank's place in a pipeline x data-parallel grid over the ``torch.distributed`` world
    (a training plan's stages, each replicated ``replicas`` times: see
    ``stagecut.training.io.trace_plan_pipeline``): rank ``replica * stages + stage``. Every rank
    must call it (it creates one pipeline group per replica and one data-parallel group per
    stage, in the same order everywhere).

    Returns
    -------
    (int, int, ProcessGroup, ProcessGroup)
        The stage this rank runs, its replica, its pipeline group (give it to ``build_stage`` /
        ``PipelineStage`` and :func:`allreduce_tied`) and its data-parallel group (give it to
        :func:`allreduce_data_parallel`).

    Raises
    ------
    InvalidArgumentError
        ``stages * replicas`` is not the world size, or either is below 1, or
        ``torch.distributed`` is not initialised.
    """
    from stagecut.validate import check_int

    torch = require("torch", "torch")
    dist = torch.distributed
    stages = check_int(stages, "stages", minimum=1, error=InvalidArgumentError)
    replicas = check_int(replicas, "replicas", minimum=1, error=InvalidArgumentError)
    if not (dist.is_available() and dist.is_initialized()):
        raise InvalidArgumentError("pipeline_grid needs an initialised torch.distributed (init_process_group)")
    world = dist.get_world_size()
    if stages * replicas != world:
        raise InvalidArgumentError(f"{stages} stages x {replicas} replicas = {stages * replicas} ranks, but the world "
                                   f"has {world}")
    rank = dist.get_rank()
    stage, replica = rank % stages, rank // stages
    pipe_group = dp_group = None
    for r in range(replicas):
        g = dist.new_group([r * stages + s for s in range(stages)])
        if r == replica:
            pipe_group = g
    for s in range(stages):
        g = dist.new_group([r * stages + s for r in range(replicas)])
        if s == stage:
            dp_group = g
    return stage, replica, pipe_group, dp_group
