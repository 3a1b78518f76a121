"""Pipeline partitioning for throughput (Tarnawski et al., NeurIPS 2020, Table 1).

* :mod:`~stagecut.throughput.problem`: device counts and memory from a graph's defaults;
* :mod:`~stagecut.throughput.evaluate`: the max-load evaluator (the one cost of a split);
* :mod:`~stagecut.throughput.dp`: :func:`partition`: the exact DP over ideals, DPL, ``auto``;
* :mod:`~stagecut.throughput.ip`: the contiguous and non-contiguous integer programs.
"""

from stagecut.throughput.dp import DEFAULT_MAX_IDEALS, METHODS, partition
from stagecut.throughput.evaluate import evaluate, is_contiguous
from stagecut.throughput.ip import partition_ip

__all__ = ["DEFAULT_MAX_IDEALS", "METHODS", "evaluate", "is_contiguous", "partition", "partition_ip"]
