"""SliceGraph: pipeline partitioning under the MTPP model (Archer et al., arXiv 2311.03703).

* :mod:`~stagecut.mtpp.model`: :class:`MtppProblem`, the evaluator, block costs, the simple bound;
* :mod:`~stagecut.mtpp.slicegraph`: :func:`slice_graph`: orders + optimal slicing, BRKGA, exact DP;
* :mod:`~stagecut.mtpp.bounds`: the MIP lower-bound ladder;
* :mod:`~stagecut.mtpp.certify`: :func:`certify`: a plan's cost against the best bound.
"""

from stagecut.mtpp.bounds import LEVELS, BoundResult, mtpp_bound
from stagecut.mtpp.certify import Certificate, certify
from stagecut.mtpp.model import MtppEvaluation, MtppProblem, block_cost, evaluate, forced_groups, lower_bound
from stagecut.mtpp.slicegraph import METHODS, SlicePlan, slice_graph

__all__ = [
    "LEVELS", "METHODS", "BoundResult", "Certificate", "MtppEvaluation", "MtppProblem", "SlicePlan",
    "block_cost", "certify", "evaluate", "forced_groups", "lower_bound", "mtpp_bound", "slice_graph",
]
