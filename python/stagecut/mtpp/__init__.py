"""SliceGraph: pipeline partitioning under the MTPP model (Archer et al., arXiv 2311.03703).

* :mod:`~stagecut.mtpp.model`: :class:`MtppProblem`, the evaluator, block costs, the simple bound;
* :mod:`~stagecut.mtpp.slicegraph`: :func:`slice_graph`: orders + optimal slicing, BRKGA, exact DP;
* :mod:`~stagecut.mtpp.units`, :mod:`~stagecut.mtpp.exact`: the units the core works on, and the
  exact DP with the leaf relaxation and its repair;
* :mod:`~stagecut.mtpp.bounds`: the lower-bound ladder (the MIPs, and the combinatorial bounds of
  :mod:`~stagecut.mtpp.combinatorial`: minimum cuts around each node, tensors forced to cross,
  exact optima of subgraphs; :mod:`~stagecut.mtpp.cover`: the tensors convex blocks must pay;
  :mod:`~stagecut.mtpp.blockmip`: the block paying the fewest tensors; :mod:`~stagecut.mtpp.spectral`:
  the cuts a balanced partition pays, from eigenvalues; :mod:`~stagecut.mtpp.sdp`: the same cuts from a
  semidefinite relaxation with nonnegative entries);
* :mod:`~stagecut.mtpp.plan`: :class:`SlicePlan` (what the searches return) and :func:`plan_blocks`;
* :mod:`~stagecut.mtpp.improve`: :func:`improve_plan`: exact re-splits of two blocks at a time,
  then the moves of single groups of :mod:`~stagecut.mtpp.moves`;
* :mod:`~stagecut.mtpp.spectral_order`: orders from the graph's spectral embedding
  (``method="spectral-order"``);
* :mod:`~stagecut.mtpp.multilevel`: plans by coarsening the graph, planning the coarsest level and
  refining on the way back (``method="multilevel"``);
* :mod:`~stagecut.mtpp.restarts`: ``slice_graph``'s restarts from more seeds and its ``"auto"``
  portfolio of searches;
* :mod:`~stagecut.mtpp.certify`: :func:`certify`: a plan's cost against the best bound.

Examples
--------
>>> import stagecut as sc
>>> g = sc.Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5)
>>> plan = sc.slice_graph(g, devices=2, method="dp")
>>> problem = MtppProblem(g, devices=2)
>>> evaluate(problem, plan.stages).objective == plan.objective
True
"""

from stagecut.mtpp.bounds import LEVELS, BoundResult, GuessBound, mtpp_bound
from stagecut.mtpp.certify import Certificate, certify, plan_blocks
from stagecut.mtpp.exact import Relaxation
from stagecut.mtpp.improve import improve_plan
from stagecut.mtpp.model import (
    MtppEvaluation,
    MtppProblem,
    as_problem,
    block_cost,
    block_parts,
    evaluate,
    forced_groups,
    lower_bound,
)
from stagecut.mtpp.slicegraph import METHODS, SlicePlan, slice_graph

__all__ = [
    "LEVELS", "METHODS", "BoundResult", "Certificate", "GuessBound", "MtppEvaluation", "MtppProblem", "Relaxation",
    "SlicePlan", "as_problem", "block_cost", "block_parts", "certify", "evaluate", "forced_groups", "improve_plan",
    "lower_bound", "mtpp_bound", "plan_blocks", "slice_graph",
]
