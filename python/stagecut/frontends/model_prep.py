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
  failure into one line naming the source line and the operator that reads the value, with the
  ways around it: ``torch.cond(pred, true_fn, false_fn, operands)`` (both branches traced), or a
  branch that does not depend on the data (decided from the configuration, or from shapes).
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


def data_dependent(error: BaseException) -> str | None:
    """One line explaining a ``torch.export`` failure on data-dependent control flow, or
    ``None`` when ``error`` is something else."""
    text = str(error)
    names = {type(e).__name__ for e in (error, error.__cause__, error.__context__) if e is not None}
    if not (names & {"GuardOnDataDependentSymNode", "DataDependentOutputException"}
            or "data-dependent" in text or "data dependent" in text):
        return None
    calls = _CALL.findall(text)
    where = ""
    if calls:
        path, line, func, code = calls[-1]
        where = f" at {path}:{line} in {func}" + (f" (`{code.strip()[:80]}`)" if code else "")
    ops = _OP.findall(text)
    op = f" reads a tensor's value with aten.{ops[-1]}" if ops else " branches on a tensor's value"
    return (f"the model has data-dependent control flow{where}: the code{op}, which torch.export cannot trace; "
            "write the branch with torch.cond(pred, true_fn, false_fn, operands), or decide it from the "
            "configuration or from shapes instead of tensor values")
