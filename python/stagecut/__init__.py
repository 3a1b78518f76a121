"""stagecut: split DNN computation graphs across devices, optimally where tractable.

One graph model (:class:`Graph`), one problem object and one evaluator per objective, and one
result protocol (:class:`Result`) for every solver:

* throughput (pipeline, Tarnawski et al. 2020): :func:`partition`, :func:`partition_ip`, :func:`evaluate`;
* MTPP / SliceGraph (Archer et al.): :func:`slice_graph`, :func:`certify`, :func:`mtpp_bound`;
* training plans (Piper, Tarnawski et al. 2021): :func:`plan_training`, :func:`evaluate_training`;
* latency (one request's makespan on heterogeneous devices): :func:`place`, :func:`evaluate_schedule`.

Quick start
-----------
>>> import stagecut as sc
>>> g = sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0])
>>> plan = sc.partition(g, devices=3)
>>> plan.objective, plan.status, plan.assignment()
(4.0, 'optimal', {0: 0, 1: 1, 2: 1, 3: 1, 4: 2})
"""

# first: a Ctrl-C while the command starts is one line and exit 130
from stagecut import _startup  # noqa: F401, I001
from importlib import metadata as _metadata

from stagecut.balance import balance  # the function shadows its module: import helpers from stagecut.balance
from stagecut.errors import (
    BackendUnavailableError,
    CycleError,
    InvalidArgumentError,
    InvalidGraphError,
    MemoryLimitError,
    SolverError,
    StagecutError,
    StagecutWarning,
    TooManyIdealsError,
)
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
from stagecut.latency import Device, Devices, LatencyProblem, Schedule, evaluate_schedule, place
from stagecut.mtpp.bounds import LEVELS as BOUND_LEVELS
from stagecut.mtpp.bounds import BoundResult, mtpp_bound
from stagecut.mtpp.certify import Certificate, certify
from stagecut.mtpp.model import MtppEvaluation, MtppProblem
from stagecut.mtpp.model import block_cost as mtpp_block_cost
from stagecut.mtpp.model import evaluate as evaluate_mtpp
from stagecut.mtpp.model import lower_bound as mtpp_lower_bound
from stagecut.mtpp.slicegraph import SlicePlan, slice_graph
from stagecut.results import STATUSES, DeviceLoad, Evaluation, Plan, Result, Stage
from stagecut.throughput import (
    DEFAULT_MAX_IDEALS,
    ThroughputProblem,
    evaluate,
    is_contiguous,
    partition,
    partition_hierarchical,
    partition_ip,
    partition_replicated,
)
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

__version__: str = _metadata.version("stagecut")

__all__ = [
    # errors
    "BackendUnavailableError", "CycleError", "InvalidArgumentError", "InvalidGraphError", "SolverError",
    "MemoryLimitError", "StagecutError", "StagecutWarning", "TooManyIdealsError",
    # graph model, readers and writers, synthetic graphs
    "ACCELERATOR", "CPU", "Graph", "Node", "random_dag", "read_split", "read_workload", "regal_graph",
    "split_from_dict", "split_to_dict", "transformer_like", "workload_from_dict", "workload_to_dict",
    "write_split", "write_workload",
    # the result protocol
    "STATUSES", "Result", "Stage",
    # throughput (pipeline partitioning)
    "DEFAULT_MAX_IDEALS", "DeviceLoad", "Evaluation", "Plan", "ThroughputProblem", "evaluate", "is_contiguous",
    "partition", "partition_hierarchical", "partition_ip", "partition_replicated", "balance",
    # SliceGraph (MTPP objective), bounds and certificates
    "BOUND_LEVELS", "BoundResult", "Certificate", "MtppEvaluation", "MtppProblem", "SlicePlan", "certify",
    "evaluate_mtpp", "mtpp_block_cost", "mtpp_bound", "mtpp_lower_bound", "slice_graph",
    # Piper training planner
    "TMPC", "PiperEdge", "PiperNode", "PiperProblem", "PiperStage", "TrainingEvaluation", "TrainingPlan",
    "chain_problem", "evaluate_training", "insert_layer_copies", "piper_from_dict", "plan_baselines",
    "plan_equi", "plan_training", "read_piper",
    # latency placement (one request's makespan)
    "Device", "Devices", "LatencyProblem", "Schedule", "evaluate_schedule", "place",
]
