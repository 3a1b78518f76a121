"""Latency placement: the makespan of one request of a DAG on heterogeneous devices.

The model (:mod:`~stagecut.latency.devices`, :mod:`~stagecut.latency.problem`), the result
(:class:`Schedule`), the evaluators (:mod:`~stagecut.latency.evaluate`: ASAP with a per-device
order, rank round-robin; :mod:`~stagecut.latency.pieces`: the PCIe-star semantics of the
throughput workloads' authors), the list-scheduling baselines, the exact MILPs and brute force,
and :func:`place`, the one entry point.
"""

from stagecut.latency.devices import Device, Devices
from stagecut.latency.evaluate import asap, evaluate_schedule, rank_round_robin, schedule_from
from stagecut.latency.problem import LatencyProblem
from stagecut.latency.schedule import Schedule, Transfer
from stagecut.latency.solve import METHODS, place

__all__ = [
    "Device", "Devices", "LatencyProblem", "Schedule", "Transfer",
    "asap", "evaluate_schedule", "rank_round_robin", "schedule_from", "place", "METHODS",
]
