"""Latency placement: the makespan of one request of a DAG on heterogeneous devices.

The model (:mod:`~stagecut.latency.devices`, :mod:`~stagecut.latency.problem`), the result
(:class:`Schedule`), the evaluators (:mod:`~stagecut.latency.evaluate`: ASAP with a per-device
order, rank round-robin; :mod:`~stagecut.latency.pieces`: the PCIe-star semantics of the
throughput workloads' authors), the list-scheduling baselines and searches
(:mod:`~stagecut.latency.heuristics`, :mod:`~stagecut.latency.search`), QuickP (operator
fusion, critical-path co-location, the reduced IPs: :mod:`~stagecut.latency.fusion`,
:mod:`~stagecut.latency.colocate`, :mod:`~stagecut.latency.quickp`) with the operator-graph
reader (:mod:`~stagecut.latency.opgraph`) and its baselines (Metis, MCMC:
:mod:`~stagecut.latency.partition_baselines`), the exact MILPs and brute force, and
:func:`place`, the one entry point.
"""

from stagecut.latency.brute import solve_brute
from stagecut.latency.colocate import Colocation, colocation_groups, with_colocation
from stagecut.latency.devices import Device, Devices
from stagecut.latency.evaluate import asap, evaluate_schedule, rank_round_robin, schedule_from
from stagecut.latency.fusion import Fusion, fuse
from stagecut.latency.heuristics import best_device, greedy, heft, met
from stagecut.latency.milp import solve_milp
from stagecut.latency.opgraph import operator_devices, read_operator_graph, synthetic_operator_graph
from stagecut.latency.partition_baselines import mcmc, metis
from stagecut.latency.pcie import pcie_greedy
from stagecut.latency.pcie_ip import solve_pcie_ip
from stagecut.latency.pieces import evaluate_pieces
from stagecut.latency.problem import LatencyProblem
from stagecut.latency.quickp import quickp
from stagecut.latency.schedule import Schedule, Transfer
from stagecut.latency.search import evolutionary, local_search, simulated_annealing
from stagecut.latency.solve import METHODS, place

__all__ = [
    "Device", "Devices", "LatencyProblem", "Schedule", "Transfer",
    "asap", "evaluate_schedule", "rank_round_robin", "schedule_from", "place", "METHODS",
    "fuse", "Fusion", "colocation_groups", "Colocation", "with_colocation",
    "read_operator_graph", "operator_devices", "synthetic_operator_graph", "quickp",
    "best_device", "met", "greedy", "heft", "simulated_annealing", "evolutionary", "local_search",
    "metis", "mcmc", "solve_milp", "solve_brute", "pcie_greedy", "solve_pcie_ip", "evaluate_pieces",
]
