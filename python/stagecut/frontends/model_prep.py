"""What real model code needs before it can be traced and pipelined, and what to say when it
cannot be.

* Hugging Face ``transformers`` models (GPT-2, BERT, Llama...): with ``config.use_cache=True``
  their forward returns a key/value cache object (``DynamicCache``) that ``torch.export`` and
  ``torch.distributed.pipelining`` cannot carry. :func:`prepare` sets ``use_cache=False`` on the
  model's config (the model keeps that setting, so the pipeline built later from it traces the
  same program) and says so in the trace's notes. Give such a model random weights from a
  config (``GPT2LMHeadModel(GPT2Config(...))``) or loaded ones, and token ids as input.
* Data-dependent control flow (``if x.sum() > 0:`` in ``forward``): ``torch.export`` refuses to
  branch on a tensor's value, and ``torch.fx`` cannot either. :func:`data_dependent` turns that
  failure into one line naming the source line and the ATen operator that reads the value
  (``aten.item`` of ``aten.gt``: from the partial graph ``torch.export`` attaches to its error),
  with the ways around it: ``torch.cond(pred, true_fn, false_fn, operands)`` (both branches
  traced), the branch kept out of what is traced (trace and pipeline the submodule that has no
  such branch), or a branch that does not depend on the data (decided from the configuration, or
  from shapes).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["prepare", "data_dependent"]


def prepare(model: Any) -> list[str]:
    """Make ``model`` traceable where a known setting stops it (``config.use_cache``); the notes
    saying what was changed."""
    notes: list[str] = []
    config = getattr(model, "config", None)
    if config is not None and getattr(config, "use_cache", False) is True:
        config.use_cache = False
        notes.append("model.config.use_cache set to False (the model keeps it): a key/value cache in the output "
                     "cannot be traced or sent between pipeline stages")
    return notes


_CALL = re.compile(r'File "([^"]+)", line (\d+), in (\w+)\n(?:[ \t]+(\S[^\n]*))?')
_OP = re.compile(r"torch\.ops\.aten\.([A-Za-z0-9_]+)\.")
_LINE = re.compile(r"^\s*(\w+)(?:: [^=]*)? = torch\.ops\.aten\.([A-Za-z0-9_]+)\.\w+\(([^)]*)\)", re.M)
_SOURCE = re.compile(r"# File: (\S+):(\d+) in (\w+), code: ([^\n]*)")
_READS = ("item", "_local_scalar_dense", "nonzero", "masked_select", "unique", "is_nonzero")
_CONVERSIONS = ("ne", "to", "_to_copy", "alias", "clone", "view", "squeeze")


def _read_op(graph: str) -> tuple[str, str, tuple[str, str, str, str] | None] | None:
    """From the partial graph ``torch.export`` attaches to the error: the ATen operator that
    reads a tensor's value (``aten.item``), the operator that made the tensor it reads, and the
    source line of the read (file, line, function, code)."""
    made: dict[str, tuple[str, str]] = {}  # variable -> (operator, its first argument)
    found = None
    source = None
    for line in graph.splitlines():
        src = _SOURCE.search(line)
        if src:
            source = (src.group(1), src.group(2), src.group(3), src.group(4))
            continue
        m = _LINE.match(line)
        if not m:
            continue
        var, op, args = m.groups()
        made[var] = (op, args.split(",")[0].strip())
        if op in _READS:
            prod = made.get(made[var][1])
            seen = 0  # skip the conversions Python's bool()/int() adds (``ne(x, 0)``, ``to``)
            while prod is not None and prod[0] in _CONVERSIONS and prod[1] in made and seen < 100:
                prod, seen = made[prod[1]], seen + 1
            found = (op, prod[0] if prod else "", source)
    return found


def data_dependent(error: BaseException) -> str | None:
    """One line explaining a ``torch.export`` failure on data-dependent control flow, or
    ``None`` when ``error`` is something else: the ATen operator that reads a tensor's value
    (``aten.item`` of ``aten.gt``...), the source line, and the ways around it."""
    text = str(error)
    chain = [e for e in (error, error.__cause__, error.__context__) if e is not None]
    names = {type(e).__name__ for e in chain}
    if not (names & {"GuardOnDataDependentSymNode", "DataDependentOutputException"}
            or "data-dependent" in text or "data dependent" in text):
        return None
    graph = next((g for e in chain if isinstance(g := getattr(e, "partial_fx_graph", None), str)), "")
    read = _read_op(graph) if graph else None
    calls = _CALL.findall(text)
    where = ""
    if calls:
        path, line, func, code = calls[-1]
        where = f" at {path}:{line} in {func}" + (f" (`{code.strip()[:80]}`)" if code else "")
    elif read is not None and read[2] is not None:
        path, line, func, code = read[2]
        where = f" at {path}:{line} in {func} (`{code.strip()[:80]}`)"
    if read is not None:
        op = f" reads a tensor's value with aten.{read[0]}" + (f" (of aten.{read[1]})" if read[1] else "")
    else:
        ops = _OP.findall(text)
        op = f" reads a tensor's value with aten.{ops[-1]}" if ops else " branches on a tensor's value"
    return (f"the model has data-dependent control flow{where}: the code{op}, which torch.export cannot trace; "
            "write the branch with torch.cond(pred, true_fn, false_fn, operands), or keep it out of what is "
            "traced (trace and pipeline the submodule without it), or decide it from the configuration or from "
            "shapes instead of tensor values")
