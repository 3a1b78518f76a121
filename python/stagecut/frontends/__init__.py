"""Front ends: build a :class:`~stagecut.Graph` from a real model, and export a plan back to the
tools that run pipelines.

Each front end is an optional extra and imports its framework lazily, inside the functions, so
``import stagecut`` (and ``import stagecut.frontends``) never imports torch or onnx. The short
names are :func:`stagecut.torch.trace` and :func:`stagecut.onnx.load`, whose traces carry every
export of a plan as a method (``t.split_policy(plan)``, ``t.split_spec(plan)``,
``t.module_fqns(plan)``, ``t.balance(plan)``, ``t.split_callback(plan)``,
``t.extract_onnx(plan, directory)``); they call the functions below:

* :mod:`stagecut.frontends.torch` (``pip install 'stagecut[torch]'``): an ``nn.Module`` and
  example inputs -> a graph (:func:`~stagecut.frontends.torch.from_torch`,
  :func:`~stagecut.frontends.torch.trace_torch`);
* :mod:`stagecut.frontends.onnx` (``pip install 'stagecut[onnx]'``): an ONNX model or file ->
  a graph (:func:`~stagecut.frontends.onnx.from_onnx`), times from a FLOP model or from
  onnxruntime's profiler (``profile="onnxruntime"``), and one ONNX file per stage
  (:func:`~stagecut.frontends.onnx.extract_stages`);
* :mod:`stagecut.frontends.split`: a plan -> the ``split_policy`` of
  ``torch.distributed.pipelining.pipeline`` (any plan whose stages form a pipeline: the
  exported program is reordered to the plan's stage order), a ``torch.fx`` ``split_module``
  callback, and torchtitan's per-stage module names
  (:func:`~stagecut.frontends.split.split_policy`, :func:`~stagecut.frontends.split.split_callback`,
  :func:`~stagecut.frontends.split.module_fqns`);
* :mod:`stagecut.frontends.export`: a plan -> the split points of
  ``torch.distributed.pipelining.pipeline`` (:func:`~stagecut.frontends.export.plan_to_pipelining`),
  the ``balance=`` list of torchgpipe and the ``parts`` boundaries of DeepSpeed's
  ``PipelineModule`` (:func:`~stagecut.frontends.export.plan_to_balance`,
  :func:`~stagecut.frontends.export.balance_to_parts`);
* :mod:`stagecut.frontends.baselines`: what the partitioners of DeepSpeed and torchgpipe compute,
  re-implemented from their documented behaviour, to compare against.

Units, the same in every front end
----------------------------------
* time: **seconds** (a node's ``compute["accelerator"]``, its ``comm``, a plan's objective);
* sizes: **bytes** (a node's ``memory``: the parameters and buffers it holds; output sizes);
* bandwidth: **bytes per second**; a node's ``comm`` is ``output bytes / bandwidth``. The
  ``bandwidth`` argument is required: a number (bytes/s) or a string with units
  (``"25GB/s"``, ``"16GiB/s"``, read by :func:`stagecut.units.parse_bandwidth`).
"""

from stagecut.frontends._common import NotExpressibleError

__all__ = ["NotExpressibleError"]
