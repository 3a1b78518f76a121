"""The latency problem: one request of a DAG on a set of devices (:class:`LatencyProblem`).

Every latency solver and evaluator takes a :class:`LatencyProblem`: the graph and the devices
turned into dense arrays once (node ``i`` is the node at position ``i`` of ``graph.nodes``;
device ``d`` is ``devices.devices[d]``):

* ``times[i, d]``: node ``i``'s time on device ``d`` (``inf``: it cannot run there): the node's
  ``compute[device name]`` if it gives one, else ``compute[device kind] / speed``;
* ``memory[i]``: bytes the node takes on the device that runs it;
* ``size[i]``: its output, in the devices' bandwidth unit: the node's ``comm`` when the
  bandwidths are relative (the PCIe star), else ``output_bytes`` (bytes);
* ``transfer(i, a, b) = size[i] / bandwidth[a][b]`` for ``a != b``, 0 on one device.

The model: devices run in parallel; a device that is not ``parallel`` runs one node at a time;
a node starts when its device is free and every predecessor's output has arrived (the
predecessor's finish plus the transfer when it ran elsewhere; a tensor crossing to a device is
sent once however many consumers it has there, and links do not contend).

>>> import stagecut as sc
>>> from stagecut.latency import Devices, LatencyProblem
>>> g = sc.Graph.chain([2.0, 3.0], comm=1.0, cpu_costs=[4.0, 6.0])
>>> p = LatencyProblem(g, Devices.pcie_star(1))
>>> p.times.tolist(), p.transfer(0, 1, 0)
([[4.0, 2.0], [6.0, 3.0]], 1.0)
>>> p.lower_bound()
5.0
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from stagecut.errors import InvalidArgumentError, InvalidGraphError
from stagecut.graph import Graph, NodeId
from stagecut.graph_check import check_graph
from stagecut.latency.model.devices import Devices
from stagecut.validate import check_number, shown

__all__ = ["LatencyProblem"]


class LatencyProblem:
    """A graph on devices, as arrays (see the module docs).

    Parameters
    ----------
    graph : Graph
        The DAG; each node's ``compute`` must give a time for the kind (or the name) of at least
        one device that can hold it.
    devices : Devices
        The devices and links.
    output_bytes : mapping of node id to float, or "comm", optional
        Output size of each node in bytes, needed when the bandwidths are in bytes per time unit
        and some node has a non-zero ``comm``; ``"comm"`` reads each node's ``comm`` as bytes.
        Ignored (the ``comm`` times are used) with relative bandwidths (the PCIe star).

    Attributes
    ----------
    ids : list
        Node ids by position. ``index`` maps an id to its position.
    times, memory, size : numpy.ndarray
        See the module docs. ``pred``, ``succ``: positions of each node's neighbours;
        ``order``: a topological order of positions.

    Raises
    ------
    InvalidGraphError
        A node that no device can run (naming it), or one too big for every device that can run
        it is *not* an error here: solvers report such a problem as infeasible.
    InvalidArgumentError
        Bandwidths in bytes and nodes with ``comm`` but no ``output_bytes``; a bad or missing
        ``output_bytes`` entry (naming the node).
    """

    def __init__(self, graph: Graph, devices: Devices,
                 output_bytes: Mapping[Hashable, float] | str | None = None) -> None:
        check_graph(graph)
        if not isinstance(devices, Devices):
            raise InvalidArgumentError(f"devices: expected a stagecut.latency.Devices, got {shown(devices)}")
        self.graph = graph
        self.devices = devices
        nodes = graph.nodes
        n, nd = len(nodes), len(devices)
        self.ids: list[NodeId] = [v.id for v in nodes]
        self.index: Mapping[NodeId, int] = graph.index
        self.pred = graph.pred
        self.succ = graph.succ
        self.order: list[int] = graph.topological_order()
        times = np.full((n, nd), math.inf)
        for i, v in enumerate(nodes):
            for d, dev in enumerate(devices.devices):
                if v.supports(dev.name):
                    times[i, d] = v.compute[dev.name]
                elif v.supports(dev.kind):
                    times[i, d] = v.compute[dev.kind] / dev.speed
            if not np.isfinite(times[i]).any():
                kinds = sorted({d.kind for d in devices.devices})
                raise InvalidGraphError(f"node {shown(v.id)}: no device can run it (it gives times for "
                                        f"{sorted(v.compute)}; the devices are of kind {kinds})")
        self.times = times
        self.memory = np.array([v.memory for v in nodes], dtype=float)
        self.size = self._sizes(output_bytes)
        self.bandwidth = np.array(devices.bandwidth, dtype=float)
        self.capacity = np.array([d.memory for d in devices.devices], dtype=float)
        self.parallel = np.array([d.parallel for d in devices.devices], dtype=bool)

    def _sizes(self, output_bytes: Mapping[Hashable, float] | str | None) -> np.ndarray:
        nodes = self.graph.nodes
        comm = np.array([v.comm for v in nodes], dtype=float)
        if self.devices.unit == "relative" or output_bytes == "comm":
            return comm
        if output_bytes is None:
            if comm.any():
                raise InvalidArgumentError(
                    "output_bytes: the devices' bandwidths are in bytes per time unit, but the nodes "
                    "give their output as a time (comm): pass output_bytes={node: bytes} (or "
                    "output_bytes='comm' if comm holds bytes)")
            return comm
        if not isinstance(output_bytes, Mapping):
            raise InvalidArgumentError(f"output_bytes: expected a mapping of node id to bytes, got "
                                       f"{shown(output_bytes)}")
        extra = [k for k in output_bytes if k not in self.index]
        if extra:
            raise InvalidArgumentError(f"output_bytes: unknown node {shown(extra[0])}")
        out = np.zeros(len(nodes))
        for i, v in enumerate(nodes):
            if v.id not in output_bytes:
                raise InvalidArgumentError(f"output_bytes: node {shown(v.id)} is missing")
            out[i] = check_number(output_bytes[v.id], f"output_bytes of node {shown(v.id)}",
                                  error=InvalidArgumentError)
        return out

    # -- queries
    def __len__(self) -> int:
        return len(self.ids)

    @property
    def num_devices(self) -> int:
        """Number of devices."""
        return len(self.devices)

    def transfer(self, i: int, a: int, b: int) -> float:
        """Time to move node ``i``'s output from device ``a`` to device ``b`` (0 when ``a == b``)."""
        if a == b or self.size[i] == 0:
            return 0.0
        return float(self.size[i] / self.bandwidth[a, b])

    def fits_anywhere(self) -> str | None:
        """``None``, or why no placement can fit in memory (a node too big for every device that
        can run it); solvers then return status ``"infeasible"``."""
        for i, node in enumerate(self.graph.nodes):
            ok = np.isfinite(self.times[i]) & (self.memory[i] <= self.capacity)
            if not ok.any():
                return f"node {shown(node.id)} ({self.memory[i]:g} bytes) fits on no device that can run it"
        return None

    def lower_bound(self) -> float:
        """A lower bound on the makespan of every placement: the larger of the longest path with
        each node at its fastest time and no transfers, and the work that must run on devices
        without parallelism (each node at its fastest such time; 0 for a node a parallel device
        can run) spread evenly over them."""
        fastest = self.times.min(axis=1)
        finish = np.zeros(len(self))
        for i in self.order:
            finish[i] = fastest[i] + max((finish[u] for u in self.pred[i]), default=0.0)
        path = float(finish.max())
        seq = ~self.parallel
        if not seq.any():
            return path
        on_parallel = np.isfinite(self.times[:, self.parallel]).any(axis=1) if self.parallel.any() else \
            np.zeros(len(self), dtype=bool)
        work = float(np.where(on_parallel, 0.0, self.times[:, seq].min(axis=1)).sum())
        return max(path, work / int(seq.sum()))

    @classmethod
    def from_workload(cls, graph: Graph, accelerators: int | None = None, memory: float | None = None,
                      cpu: bool = True) -> LatencyProblem:
        """The PCIe star of a workload file (``maxFPGAs`` accelerators of ``maxSizePerFPGA`` bytes,
        and a CPU pool) unless given.

        Raises
        ------
        InvalidArgumentError
            No accelerator count given or in the file.

        >>> import stagecut as sc
        >>> g = sc.Graph.chain([1.0, 1.0], cpu_costs=[2.0, 2.0])
        >>> LatencyProblem.from_workload(g, accelerators=2).devices.names
        ('cpu', 'accelerator:0', 'accelerator:1')
        """
        k = accelerators if accelerators is not None else graph.defaults.get("accelerators")
        if k is None:
            raise InvalidArgumentError("accelerators: not given and not in the file (maxFPGAs)")
        mem = memory if memory is not None else graph.defaults.get("memory", math.inf)
        return cls(graph, Devices.pcie_star(k, memory=mem, cpu=cpu))

    def describe(self) -> dict[str, Any]:
        """A short description for reports: node, edge and device counts, topology."""
        return {"nodes": len(self), "edges": len(self.graph.edges), "devices": self.num_devices,
                "topology": self.devices.topology}
