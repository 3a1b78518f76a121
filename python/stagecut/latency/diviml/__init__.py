"""DiviML's module-based methods: MILP-SPLIT and the batched throughput MILP.

Implements DiviML, "A Module-based Heuristic for Mapping Neural Networks onto Heterogeneous
Platforms": a graph is cut at its narrow points into
modules (:mod:`~stagecut.latency.diviml.modules`), each module is solved exactly with the MILP of
:mod:`stagecut.latency.exact` and the pieces are combined (:mod:`~stagecut.latency.diviml.split`
for single-channel graphs, :mod:`~stagecut.latency.diviml.split_multi` for modules joined by
several channels, with a sound lower bound); :mod:`~stagecut.latency.diviml.batched` is the
paper's MILP for ``L`` inputs of one DAG in batches. The paper's greedy is
:func:`stagecut.latency.greedy`.
"""
