"""Capturing a PyTorch model as a program and running it node by node (the first half of
:func:`stagecut.frontends.torch.trace_torch`): ``torch.export``, else ``torch.fx``; each node's
output, output bytes, FLOPs and (``timing="measure"``) run time. Units: bytes and seconds.
"""

from __future__ import annotations

import operator
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from stagecut.errors import InvalidArgumentError
from stagecut.frontends import model_prep
from stagecut.frontends._common import require

__all__ = ["SCALAR_BYTES", "output_bytes"]

#: bytes charged for an output that is a Python number (a symbolic size, a scalar)
SCALAR_BYTES = 8

def output_bytes(value: Any) -> float | None:
    """Bytes of a node's output: ``numel * element_size`` summed over the tensors in ``value``
    (nested tuples, lists and dicts included), :data:`SCALAR_BYTES` for a Python number, ``0``
    for ``None``; ``None`` when the size cannot be known (some other object).

    Parameters
    ----------
    value : object
        What a node returned.

    Returns
    -------
    float or None

    Raises
    ------
    BackendUnavailableError
        torch is not installed.
    """
    torch = require("torch", "torch")
    if isinstance(value, torch.Tensor):
        return float(value.numel() * value.element_size())
    if value is None:
        return 0.0
    if isinstance(value, (bool, int, float)) or isinstance(value, (torch.SymInt, torch.SymFloat)):
        return float(SCALAR_BYTES)
    if isinstance(value, (tuple, list)):
        parts = [output_bytes(v) for v in value]
        return None if any(p is None for p in parts) else float(sum(p for p in parts if p is not None))
    if isinstance(value, dict):
        return output_bytes(list(value.values()))
    return None


# ----------------------------------------------------------------------------- tracing
@dataclass
class _Program:
    gm: Any  # torch.fx.GraphModule
    inputs: list[Any]  # the values of its placeholders, in order
    weights: dict[str, str]  # placeholder or get_attr node name -> parameter / buffer name
    method: str
    notes: list[str]
    params: set[str] = field(default_factory=set)  # the weights that are trainable parameters


def _export(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Program:
    torch = require("torch", "torch")
    InputKind = require("torch.export.graph_signature", "torch").InputKind

    ep = torch.export.export(model, args, kwargs)
    state = dict(ep.state_dict)
    consts = dict(getattr(ep, "constants", {}) or {})
    user = iter(torch.utils._pytree.tree_leaves((args, kwargs)))
    inputs: list[Any] = []
    weights: dict[str, str] = {}
    params: set[str] = set()
    for spec in ep.graph_signature.input_specs:
        name = spec.arg.name
        if spec.kind == InputKind.USER_INPUT:
            inputs.append(next(user))
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            target = spec.target
            inputs.append(state[target] if target in state else consts[target])
            weights[name] = target
            if spec.kind == InputKind.PARAMETER:
                params.add(target)
        else:
            raise InvalidArgumentError(f"torch.export gave an input of kind {spec.kind.name} ({name}), "
                                       "which this front end does not handle")
    return _Program(ep.graph_module, inputs, weights, "export", [], params)


def _fx(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], why: str) -> _Program:
    torch = require("torch", "torch")
    try:
        gm = torch.fx.symbolic_trace(model)
    except Exception as e:  # data-dependent control flow, untraceable Python...
        first = str(e).splitlines()[0] if str(e) else ""
        raise InvalidArgumentError(f"the model cannot be traced ({why}; torch.fx.symbolic_trace failed too: "
                                   f"{type(e).__name__}: {first[:200]})") from e
    values = list(args) + list(kwargs.values())
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    inputs = values[:len(placeholders)]
    weights = {n.name: str(n.target) for n in gm.graph.nodes if n.op == "get_attr"}
    trainable = {name for name, _ in gm.named_parameters(remove_duplicate=False)}
    note = (f"traced with torch.fx.symbolic_trace ({why}): nodes are module calls and functions, not ATen "
            "operators")
    return _Program(gm, inputs, weights, "fx", [note], {t for t in weights.values() if t in trainable})


def _capture(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], tracer: str) -> _Program:
    prepared = model_prep.prepare(model)  # Hugging Face models: use_cache=False
    program = _capture_program(model, args, kwargs, tracer)
    program.notes[:0] = prepared
    return program


def _capture_program(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], tracer: str) -> _Program:
    if tracer == "fx":
        return _fx(model, args, kwargs, "tracer='fx'")
    try:
        return _export(model, args, kwargs)
    except Exception as e:  # export refuses data-dependent control flow, unsupported ops...
        hint = model_prep.data_dependent(e)
        if hint is not None:  # torch.fx cannot branch on data either: say where and what to do
            raise InvalidArgumentError(hint) from e
        if tracer == "export":
            raise InvalidArgumentError(f"torch.export could not trace the model: {type(e).__name__}: "
                                       f"{str(e).splitlines()[0] if str(e) else ''}") from e
        first = str(e).splitlines()[0] if str(e) else ""
        return _fx(model, args, kwargs, f"torch.export failed: {type(e).__name__}: {first[:200]}")


def _count_calls(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, int]:
    """Forward calls of each submodule in one run of the model (forward pre-hooks)."""
    torch = require("torch", "torch")
    calls: dict[str, int] = {}
    handles = []
    for name, mod in model.named_modules():
        if name:
            def hook(_m: Any, _a: Any, name: str = name) -> None:
                calls[name] = calls.get(name, 0) + 1
            handles.append(mod.register_forward_pre_hook(hook))
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return calls


def _module_path(path: str) -> str:
    """A module path of ``nn_module_stack`` as a fully qualified name: ``"layer1.0.conv"`` stays,
    dynamo's ``"L['self'].layer1[0].conv"`` / ``"L__self___layer1_0"`` spellings are rewritten."""
    if path.startswith("L['self']"):
        path = path[len("L['self']"):].lstrip(".")
        return path.replace("[", ".").replace("]", "").replace("'", "").replace("..", ".")
    return path


def _module_stack(node: Any, method: str) -> tuple[str, ...]:
    stack = node.meta.get("nn_module_stack") or {}
    paths = [_module_path(str(v[0])) for v in stack.values()]
    paths = [p for p in paths if p]
    if method == "fx" and node.op == "call_module":
        target = str(node.target)
        parts = target.split(".")
        paths = paths + [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    out: list[str] = []
    for p in paths:  # outermost first, each once
        if p not in out:
            out.append(p)
    return tuple(out)


def _target(node: Any) -> str:
    t = node.target
    if isinstance(t, str):
        return t
    return str(getattr(t, "__name__", None) if node.op == "call_function" and not hasattr(t, "_schema") else t)


# --------------------------------------------------------------------------- running
def _run(program: _Program, timing: str, warmup: int, repeat: int, runs_out: dict[str, list[float]] | None = None
         ) -> tuple[dict[str, Any], dict[str, float], dict[str, float]]:
    """Run the program node by node: outputs, FLOPs and (``timing="measure"``) median seconds
    (each node's ``repeat`` run times go to ``runs_out`` when given). On the CPU the clock is
    the thread's CPU time (other processes' load does not count; with one torch thread the
    operators run on this thread); with inputs on another device, wall time."""
    torch = require("torch", "torch")
    on_cpu = all(x.device.type == "cpu" for x in torch.utils._pytree.tree_leaves(program.inputs)
                 if isinstance(x, torch.Tensor))
    clock = time.thread_time if on_cpu else time.perf_counter
    FlopCounterMode = require("torch.utils.flop_counter", "torch").FlopCounterMode
    Interpreter: Any = torch.fx.Interpreter

    outputs: dict[str, Any] = {}
    flops: dict[str, float] = {}
    seconds: dict[str, float] = {}

    def storages(value: Any) -> set[int]:
        leaves = torch.utils._pytree.tree_leaves(value)
        return {t.untyped_storage().data_ptr() for t in leaves if isinstance(t, torch.Tensor)}

    class Runner(Interpreter):  # type: ignore[misc]
        def run_node(self, n: Any) -> Any:
            if n.op not in ("call_function", "call_method", "call_module"):
                return super().run_node(n)
            with FlopCounterMode(display=False) as counter:
                out = super().run_node(n)
            f = float(counter.get_total_flops())
            if f == 0 and isinstance(out, torch.Tensor) and n.target is not operator.getitem:
                args, kwargs = self.fetch_args_kwargs_from_env(n)
                if out.untyped_storage().data_ptr() not in storages((args, kwargs)):
                    f = float(out.numel())  # a new tensor with no FLOP formula: one per element
            flops[n.name] = f
            outputs[n.name] = out
            if timing == "measure":
                for _ in range(warmup):
                    super().run_node(n)
                runs = []
                for _ in range(repeat):
                    t0 = clock()
                    super().run_node(n)
                    runs.append(clock() - t0)
                seconds[n.name] = float(statistics.median(runs))
                if runs_out is not None:
                    runs_out[n.name] = runs
            return out

    with torch.no_grad():
        Runner(program.gm).run(*program.inputs)
    return outputs, flops, seconds


# --------------------------------------------------------------------------- building
def _tensor_bytes(value: Any) -> float:
    return float(value.numel() * value.element_size()) if hasattr(value, "numel") else float(SCALAR_BYTES)


def _fetch_attr(gm: Any, target: str) -> Any:
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj

