"""The result of the latency planner: a :class:`Schedule` (on the shared result protocol).

A schedule says where every node runs, in which order each device runs its nodes, and when
every node and every transfer starts and finishes: the data of a Gantt chart. ``objective`` is
the makespan (the finish of the last node, in the graph's time unit), re-scored by the
evaluator of the schedule's ``semantics``:

``"asap"``
    the general model of :mod:`stagecut.latency.model.problem` (each node as soon as its device is
    free and its inputs have arrived; a transfer is a delay on a link);
``"pieces"``
    the PCIe-star semantics of the throughput workloads' authors: an accelerator's nodes run
    as contiguous pieces that wait for all their inputs, then pay in-communication, compute
    and out-communication inside the accelerator's busy time; the CPU pool runs every node as
    soon as its inputs are ready.

``stages`` has one :class:`~stagecut.results.Stage` per device that runs a node, in device
order: its nodes in run order, ``load`` its busy time, ``memory`` what it holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from stagecut.results import NodeId, Result, Stage, _fmt
from stagecut.units import Display

__all__ = ["Schedule", "Transfer", "Semantics"]

Semantics = Literal["asap", "pieces"]


@dataclass(frozen=True, kw_only=True)
class Transfer:
    """The output of ``node`` moving from device ``source`` to device ``target`` (once per target
    device, however many consumers it has there), from ``start`` to ``finish``."""

    node: NodeId
    source: str
    target: str
    start: float
    finish: float


@dataclass(frozen=True, kw_only=True, repr=False)
class Schedule(Result):
    """A placement of one request with its timetable.

    Fields beyond the shared ones (see :mod:`stagecut.results`): ``placement`` (node id ->
    device name), ``order`` (device name -> its nodes in run order), ``start``/``finish`` (node
    id -> time), ``transfers``, ``critical_path`` (node ids, first to last, whose chain of
    device and data dependences sets the makespan), ``busy`` and ``memory_used`` (device name
    -> busy time / bytes held), ``devices`` (every device name, in order), ``semantics`` (see
    the module docs) and ``violations`` (limits the placement breaks, e.g. a device over its
    memory: only :func:`~stagecut.latency.evaluate_schedule` returns such a schedule, with
    status ``"feasible"`` meaning *evaluated*; solvers never do). An infeasible result has
    ``objective=None`` and empty fields.

    Examples
    --------
    >>> import stagecut as sc
    >>> from stagecut.latency import Devices, evaluate_schedule
    >>> g = sc.Graph.chain([1.0, 2.0], comm=0.5)
    >>> s = evaluate_schedule(g, Devices.pcie_star(2, cpu=False), {0: "accelerator:0", 1: "accelerator:1"})
    >>> s.objective, s.start[1], [(t.source, t.target, t.finish) for t in s.transfers]
    (4.0, 2.0, [('accelerator:0', 'accelerator:1', 2.0)])
    >>> type(s).from_json(s.to_json()) == s
    True
    """

    objective_name: ClassVar[str] = "makespan"

    placement: Mapping[NodeId, str] = field(default_factory=dict)
    order: Mapping[str, tuple[NodeId, ...]] = field(default_factory=dict)
    start: Mapping[NodeId, float] = field(default_factory=dict)
    finish: Mapping[NodeId, float] = field(default_factory=dict)
    transfers: tuple[Transfer, ...] = ()
    critical_path: tuple[NodeId, ...] = ()
    busy: Mapping[str, float] = field(default_factory=dict)
    memory_used: Mapping[str, float] = field(default_factory=dict)
    devices: tuple[str, ...] = ()
    semantics: Semantics = "asap"
    violations: tuple[str, ...] = ()

    @property
    def makespan(self) -> float | None:
        """The same as :attr:`objective`."""
        return self.objective

    def device_of(self, node: NodeId) -> str:
        """The device running ``node``."""
        return self.placement[node]

    def gantt(self) -> list[dict[str, Any]]:
        """One row per node and per transfer (``what``, ``device``, ``start``, ``finish``), by
        start time: the data of a Gantt chart."""
        rows: list[dict[str, Any]] = [
            {"what": "node", "node": v, "device": self.placement[v], "start": self.start[v],
             "finish": self.finish[v]} for v in self.placement]
        rows += [{"what": "transfer", "node": t.node, "device": f"{t.source}->{t.target}",
                  "start": t.start, "finish": t.finish} for t in self.transfers]
        rows.sort(key=lambda r: (r["start"], r["finish"], r["what"] != "node"))
        return rows

    def summary(self, display: Display | None = None) -> str:
        """The shared summary block plus the critical path's length and any violation
        (``display``: the input's units, :class:`~stagecut.units.Display`)."""
        out = super().summary(display)
        if self.critical_path:
            length = _fmt(self.objective) if display is None else display.with_unit(self.objective)
            out += f"\ncritical   {len(self.critical_path)} nodes, {length}"
        out += "".join(f"\nviolation  {v}" for v in self.violations)
        return out

    @classmethod
    def infeasible(cls, method: str, reason: str, *, devices: tuple[str, ...] = (), runtime_s: float = 0.0,
                   semantics: Semantics = "asap", status: Literal["infeasible", "unknown", "time_limit"] = "infeasible",
                   lower_bound: float | None = None, stats: Mapping[str, Any] | None = None) -> Schedule:
        """A result without a schedule (``objective=None``), ``reason`` in its notes."""
        return cls(objective=None, status=status, method=method, runtime_s=runtime_s, notes=(reason,),
                   devices=devices, semantics=semantics, lower_bound=lower_bound, stats=dict(stats or {}))


def stages_of(devices: tuple[str, ...], order: Mapping[str, tuple[NodeId, ...]], busy: Mapping[str, float],
              memory_used: Mapping[str, float]) -> tuple[Stage, ...]:
    """One stage per device that runs a node, in device order; ``busy`` and ``memory_used`` hold
    every such device (a missing entry is a caller's bug: ``KeyError``)."""
    out: list[Stage] = []
    for name in devices:
        if order.get(name):
            out.append(Stage(index=len(out), device=name, nodes=tuple(order[name]), load=busy[name],
                             memory=memory_used[name]))
    return tuple(out)
