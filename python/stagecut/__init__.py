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

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:  # the names below are imported on first use (see _LAZY): numpy, the core and the solvers
    # take most of a second to import, and the command line's --help and --version need none of them
    from stagecut.balance import balance
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
        partition,
        partition_hierarchical,
        partition_ip,
        partition_replicated,
    )
    from stagecut.throughput.evaluate import evaluate, is_contiguous  # (mypy: not through the package)
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

    __version__: str

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

#: public name -> (module, name in it): imported on first access by :func:`__getattr__`
_LAZY: dict[str, tuple[str, str]] = {
    "balance": ("stagecut.balance", "balance"),
    **{n: ("stagecut.examples", n) for n in ("random_dag", "regal_graph", "transformer_like")},
    **{n: ("stagecut.formats", n) for n in ("read_split", "read_workload", "split_from_dict", "split_to_dict",
                                            "workload_from_dict", "workload_to_dict", "write_split",
                                            "write_workload")},
    **{n: ("stagecut.graph", n) for n in ("ACCELERATOR", "CPU", "Graph", "Node")},
    **{n: ("stagecut.latency", n) for n in ("Device", "Devices", "LatencyProblem", "Schedule", "evaluate_schedule",
                                            "place")},
    "BOUND_LEVELS": ("stagecut.mtpp.bounds", "LEVELS"),
    "BoundResult": ("stagecut.mtpp.bounds", "BoundResult"),
    "mtpp_bound": ("stagecut.mtpp.bounds", "mtpp_bound"),
    "Certificate": ("stagecut.mtpp.certify", "Certificate"),
    "certify": ("stagecut.mtpp.certify", "certify"),
    "MtppEvaluation": ("stagecut.mtpp.model", "MtppEvaluation"),
    "MtppProblem": ("stagecut.mtpp.model", "MtppProblem"),
    "mtpp_block_cost": ("stagecut.mtpp.model", "block_cost"),
    "evaluate_mtpp": ("stagecut.mtpp.model", "evaluate"),
    "mtpp_lower_bound": ("stagecut.mtpp.model", "lower_bound"),
    "SlicePlan": ("stagecut.mtpp.slicegraph", "SlicePlan"),
    "slice_graph": ("stagecut.mtpp.slicegraph", "slice_graph"),
    **{n: ("stagecut.results", n) for n in ("STATUSES", "DeviceLoad", "Evaluation", "Plan", "Result", "Stage")},
    **{n: ("stagecut.throughput", n) for n in ("DEFAULT_MAX_IDEALS", "ThroughputProblem", "evaluate",
                                               "is_contiguous", "partition", "partition_hierarchical",
                                               "partition_ip", "partition_replicated")},
    **{n: ("stagecut.training", n) for n in ("TMPC", "PiperEdge", "PiperNode", "PiperProblem", "PiperStage",
                                             "TrainingEvaluation", "TrainingPlan", "chain_problem",
                                             "evaluate_training", "insert_layer_copies", "piper_from_dict",
                                             "plan_baselines", "plan_equi", "plan_training", "read_piper")},
}


def __getattr__(name: str) -> Any:
    """A public name of :data:`__all__` (or a subpackage such as ``stagecut.latency``), imported
    on first use and kept."""
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
    elif name == "__version__":
        from importlib import metadata

        value = metadata.version("stagecut")
    elif not name.startswith("__"):
        try:
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | {"__version__"})


class _Package(types.ModuleType):
    """The package's module type: ``stagecut.balance`` stays the function when the submodule of
    the same name is imported (the import system binds a submodule on its package)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "balance" and isinstance(value, types.ModuleType):
            return  # ``from stagecut.balance import X`` still works: it reads sys.modules
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
