"""Latency placement: the makespan of one request of a DAG on heterogeneous devices.

:func:`place` is the one entry point (:mod:`~stagecut.latency.solve`: every method by name, and
``auto``). The code is grouped by what it is:

* :mod:`stagecut.latency.model`: the one model and its evaluators (devices, the problem, the
  :class:`Schedule` result, the ``asap`` evaluator and rank round-robin order, and the same
  evaluator in the Rust core);
* :mod:`stagecut.latency.heuristics`: constructive list schedulers (best device, MET, DiviML's
  greedy, HEFT, the memory-aware ones), searches (SA, EA, local search, LNS) and the Metis and
  MCMC baselines;
* :mod:`stagecut.latency.exact`: the MILP, brute force and the lower bounds;
* :mod:`stagecut.latency.diviml`: DiviML's MILP-SPLIT (one and several channels) and its batched
  throughput MILP;
* :mod:`stagecut.latency.quickp`: QuickP's fusion, co-location and reduced IPs, and the
  operator graphs of its format;
* :mod:`stagecut.latency.pcie`: the PCIe star of the throughput workloads' authors (Tarnawski et
  al. 2020): their ``pieces`` semantics, greedy and latency IP.

The names below are the public API; the sub-packages' modules are importable for the rest.
"""

from stagecut.latency.exact.brute import solve_brute
from stagecut.latency.exact.milp import solve_milp
from stagecut.latency.heuristics.constructive import best_device, greedy, heft, met
from stagecut.latency.heuristics.partition_baselines import mcmc, metis
from stagecut.latency.heuristics.search import evolutionary, local_search, simulated_annealing
from stagecut.latency.model.devices import Device, Devices
from stagecut.latency.model.evaluate import asap, evaluate_schedule, rank_round_robin, schedule_from
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule, Transfer
from stagecut.latency.pcie.greedy import pcie_greedy
from stagecut.latency.pcie.ip import solve_pcie_ip
from stagecut.latency.pcie.pieces import evaluate_pieces
from stagecut.latency.quickp.colocate import Colocation, colocation_groups, with_colocation
from stagecut.latency.quickp.fusion import Fusion, fuse
from stagecut.latency.quickp.ip import quickp
from stagecut.latency.quickp.opgraph import operator_devices, read_operator_graph, synthetic_operator_graph
from stagecut.latency.solve import METHODS, place

__all__ = [
    "Device", "Devices", "LatencyProblem", "Schedule", "Transfer",
    "asap", "evaluate_schedule", "rank_round_robin", "schedule_from", "place", "METHODS",
    "fuse", "Fusion", "colocation_groups", "Colocation", "with_colocation",
    "read_operator_graph", "operator_devices", "synthetic_operator_graph", "quickp",
    "best_device", "met", "greedy", "heft", "simulated_annealing", "evolutionary", "local_search",
    "metis", "mcmc", "solve_milp", "solve_brute", "pcie_greedy", "solve_pcie_ip", "evaluate_pieces",
]
