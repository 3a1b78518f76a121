"""stagecut: split DNN computation graphs across devices, optimally where tractable.

Quick start
-----------
>>> import stagecut as sc
>>> g = sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0])
>>> sc.partition(g, devices=3).objective
4.0
"""

from stagecut.errors import (
    CycleError,
    InvalidGraphError,
    SolverError,
    StagecutError,
    StagecutWarning,
    TooManyIdealsError,
)
from stagecut.throughput import evaluate, is_contiguous
from stagecut.examples import random_dag, regal_graph, transformer_like
from stagecut.formats import (
    read_split,
    read_workload,
    split_from_dict,
    split_to_dict,
    workload_from_dict,
    workload_to_dict,
    write_split,
    write_workload,
)
from stagecut.graph import ACCELERATOR, CPU, Graph, Node
from stagecut.throughput import DEFAULT_MAX_IDEALS, partition, partition_ip
from stagecut.throughput import ThroughputProblem
from stagecut.results import DeviceLoad, Evaluation, Plan
from stagecut.mtpp.model import MtppEvaluation, MtppProblem
from stagecut.mtpp.model import block_cost as mtpp_block_cost
from stagecut.mtpp.model import evaluate as evaluate_mtpp
from stagecut.mtpp.model import lower_bound as mtpp_lower_bound
from stagecut.mtpp.slicegraph import SlicePlan, slice_graph
from stagecut.mtpp.certify import Certificate, certify
from stagecut.mtpp.bounds import LEVELS as BOUND_LEVELS
from stagecut.mtpp.bounds import BoundResult, mtpp_bound
from stagecut.training import (
    TMPC,
    PiperEdge,
    PiperNode,
    PiperProblem,
    PiperStage,
    TrainingEvaluation,
    TrainingPlan,
    chain_problem,
    evaluate_training,
    insert_layer_copies,
    piper_from_dict,
    plan_baselines,
    plan_equi,
    plan_training,
    read_piper,
)

__version__ = "0.1.0"

__all__ = [
    "ACCELERATOR", "CPU", "CycleError", "DEFAULT_MAX_IDEALS", "DeviceLoad", "Evaluation", "Graph",
    "InvalidGraphError", "Node", "Plan", "SolverError", "ThroughputProblem", "StagecutError", "StagecutWarning", "TooManyIdealsError",
    "evaluate", "is_contiguous", "partition", "random_dag", "read_split", "read_workload",
    "split_from_dict", "split_to_dict", "transformer_like", "workload_from_dict", "workload_to_dict",
    "write_split", "write_workload",
    # SliceGraph (MTPP objective)
    "MtppEvaluation", "MtppProblem", "SlicePlan", "evaluate_mtpp", "mtpp_block_cost", "mtpp_lower_bound",
    "regal_graph", "slice_graph",
    # MIP formulations and certificates
    "BOUND_LEVELS", "BoundResult", "Certificate", "certify", "mtpp_bound", "partition_ip",
    # Piper training planner
    "TMPC", "PiperEdge", "PiperNode", "PiperProblem", "PiperStage", "TrainingEvaluation", "TrainingPlan",
    "chain_problem", "evaluate_training", "insert_layer_copies", "piper_from_dict", "plan_baselines", "plan_equi", "plan_training", "read_piper",
]
