"""Result types: frozen dataclasses with ``to_json``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["DeviceLoad", "Evaluation", "Plan"]


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


@dataclass(frozen=True)
class DeviceLoad:
    """One device of a split and what the evaluator says of it."""

    kind: str
    index: int
    nodes: tuple
    load: float
    compute: float
    comm: float
    memory: float
    feasible: bool
    issues: tuple = ()

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "index": self.index,
            "nodes": list(self.nodes),
            "load": _num(self.load),
            "compute": _num(self.compute),
            "comm": self.comm,
            "memory": self.memory,
            "feasible": self.feasible,
            "issues": list(self.issues),
        }


@dataclass(frozen=True)
class Evaluation:
    """The max-load evaluator's verdict on a split (see :func:`stagecut.evaluate`)."""

    objective: float
    devices: tuple
    feasible: bool
    contiguous: bool
    issues: tuple = ()

    def to_json(self) -> dict:
        return {
            "objective": _num(self.objective) if self.feasible else None,
            "max_load": _num(self.objective),
            "feasible": self.feasible,
            "contiguous": self.contiguous,
            "issues": list(self.issues),
            "devices": [d.to_json() for d in self.devices],
        }


@dataclass(frozen=True)
class Plan:
    """A placement for the pipeline (max-load) objective.

    Attributes
    ----------
    objective : float or None
        Time per sample (the largest device load), as re-scored by the evaluator; ``None``
        when infeasible.
    status : str
        ``"optimal"`` (exact DP), ``"feasible"`` (heuristic, e.g. DPL) or ``"infeasible"``.
    method : str
        The solver that ran (``"dp"`` or ``"dpl"``).
    devices : tuple of DeviceLoad
        The used devices in pipeline order, with nodes as the input's ids.
    lower_bound : float or None
        A proven lower bound on the optimum (equal to ``objective`` when optimal).
    """

    objective: float | None
    status: str
    method: str
    devices: tuple
    lower_bound: float | None
    runtime_s: float
    accelerators: int
    cpus: int
    memory: float
    ideals: int | None = None
    ideal_pairs: int | None = None
    contiguous: bool = True
    notes: tuple = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def gap(self) -> float | None:
        """Relative gap ``(objective - lower_bound) / objective`` where both are known."""
        if self.objective is None or self.lower_bound is None or self.objective == 0:
            return None if self.objective is None else 0.0
        return (self.objective - self.lower_bound) / self.objective

    @property
    def assignment(self) -> dict:
        """``{node id: (kind, index)}``."""
        return {n: (d.kind, d.index) for d in self.devices for n in d.nodes}

    def stage_of(self) -> dict:
        """``{node id: stage number}`` in pipeline order."""
        return {n: s for s, d in enumerate(self.devices) for n in d.nodes}

    def to_split(self) -> dict:
        """The split JSON object (``fpgas`` / ``cpus`` lists of ``{"nodes", "load"}``)."""
        out: dict = {"maxLoad": self.objective, "fpgas": [], "cpus": []}
        for d in self.devices:
            key = "fpgas" if d.kind == "accelerator" else "cpus"
            out[key].append({"nodes": list(d.nodes), "load": _num(d.load)})
        return out

    def to_json(self) -> dict:
        return {
            "objective": self.objective,
            "status": self.status,
            "method": self.method,
            "lower_bound": self.lower_bound,
            "gap": self.gap,
            "runtime_s": self.runtime_s,
            "ideals": self.ideals,
            "ideal_pairs": self.ideal_pairs,
            "accelerators": self.accelerators,
            "cpus": self.cpus,
            "memory": _num(self.memory),
            "contiguous": self.contiguous,
            "notes": list(self.notes),
            "devices": [d.to_json() for d in self.devices],
        }
