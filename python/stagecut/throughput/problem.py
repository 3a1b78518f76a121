"""The throughput problem's device counts and memory, resolved from a graph's defaults."""

from __future__ import annotations

import math

import numpy as np

from stagecut.errors import InvalidGraphError
from stagecut.graph import Graph, check_number

__all__ = ["resolve_devices"]


def resolve_devices(graph: Graph, accelerators, cpus, memory):
    d = graph.defaults
    accelerators = d.get("accelerators", 1) if accelerators is None else accelerators
    cpus = d.get("cpus", 0) if cpus is None else cpus
    memory = d.get("memory", math.inf) if memory is None else memory
    for name, v in (("accelerators", accelerators), ("cpus", cpus)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise InvalidGraphError(f"{name} must be a non-negative integer, got {v!r}")
    memory = check_number(memory, "memory", allow_inf=True)
    if accelerators + cpus == 0:
        raise InvalidGraphError("no devices: accelerators + cpus must be at least 1")
    return int(accelerators), int(cpus), memory
