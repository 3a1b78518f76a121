"""Pipeline partitioning for throughput (Tarnawski et al., NeurIPS 2020, Table 1).

* :mod:`~stagecut.throughput.problem`: :class:`ThroughputProblem` (graph, device counts,
  memory; defaults from the graph) and the exact graph hygiene;
* :mod:`~stagecut.throughput.evaluate`: the max-load evaluator (the one cost of a split);
* :mod:`~stagecut.throughput.dp`: the exact DP over ideals and DPL;
* :mod:`~stagecut.throughput.ip`: the contiguous and non-contiguous integer programs;
* :mod:`~stagecut.throughput.solve`: :func:`partition`, which picks among them;
* :mod:`~stagecut.throughput.gpipe`: the training objectives (1F1B, GPipe) and the exact GPipe DP;
* :mod:`~stagecut.throughput.schedules`: 1F1B, GPipe and Section 5.2 pipelines as timelines;
* :mod:`~stagecut.throughput.rescore`: every plan is built there, re-scored by the evaluator;
* :mod:`~stagecut.throughput.replication`: replicated stages and a hierarchical topology
  (PipeDream's extensions), each with its evaluator and exact DP.
"""

from stagecut.throughput.dp import DEFAULT_MAX_IDEALS
from stagecut.throughput.evaluate import evaluate, is_contiguous
from stagecut.throughput.gpipe import gpipe_objective, partition_gpipe, training_loads
from stagecut.throughput.ip import partition_ip
from stagecut.throughput.problem import ThroughputProblem
from stagecut.throughput.replication import (
    evaluate_hierarchical,
    evaluate_replicated,
    partition_hierarchical,
    partition_replicated,
)
from stagecut.throughput.solve import METHODS, partition

__all__ = ["DEFAULT_MAX_IDEALS", "METHODS", "ThroughputProblem", "evaluate", "evaluate_hierarchical",
           "evaluate_replicated", "gpipe_objective", "is_contiguous", "partition", "partition_gpipe",
           "partition_hierarchical", "partition_ip", "partition_replicated", "training_loads"]
