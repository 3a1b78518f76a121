"""The Piper model: TMPCs, layers, edges and the validated :class:`PiperProblem`.

A layer (:class:`PiperNode`) can run in several ways, its TMPCs (:class:`TMPC`), grouped by
the tensor-parallel degree ``t`` they use. A :class:`PiperProblem` is the layer DAG plus the
settings: ``devices`` (K), ``memory`` per device (M, bytes), ``bandwidth`` (B, bytes/s) and
``batch`` (N, microbatches per batch), optionally a two-level network. It is validated once, on
creation; errors name the node or field at fault.

Examples
--------
>>> from stagecut.training import TMPC, PiperEdge, PiperNode, PiperProblem
>>> a = PiperNode(0, {1: (TMPC("vanilla", 2.0, 0.0, 1.0, 0.0, {}, {1: 0.0}),)})
>>> b = PiperNode(1, {1: (TMPC("vanilla", 1.0, 0.0, 1.0, 0.0, {0: 0.0}, {}),)})
>>> prob = PiperProblem((a, b), (PiperEdge(0, 1, 4.0),), devices=2, memory=1e9, bandwidth=1.0, batch=2)
>>> prob.index
{0: 0, 1: 1}
>>> prob.replace(devices=0)
Traceback (most recent call last):
...
stagecut.errors.InvalidGraphError: devices (maxDevices) must be an integer >= 1, got 0
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from stagecut.errors import CycleError, InvalidArgumentError, InvalidGraphError
from stagecut.graph import cycle_among, kahn_order
from stagecut.results import NodeId
from stagecut.validate import check_int, check_number

__all__ = ["RECOMPUTE_ID", "VANILLA_ID", "TMPC", "PiperNode", "PiperEdge", "PiperProblem", "apply_settings"]

#: TMPC id the published inputs use for activation recomputation.
RECOMPUTE_ID = "activation recomp"
#: TMPC id the published inputs use for no recomputation.
VANILLA_ID = "vanilla"

#: ``{node id: [(neighbour id, communication cost), ...]}``
Links = dict[NodeId, list[tuple[NodeId, float]]]


@dataclass(frozen=True)
class TMPC:
    """One way to run a node on ``t`` devices (tensor parallelism).

    Parameters
    ----------
    id : str
        Its name (unique among the node's TMPCs of one ``t``).
    time : float
        Forward + backward time per sample (the t-way communication included).
    params : float
        Weight bytes per device.
    mem_a, mem_b : float
        Memory per device is ``mem_a * y + mem_b`` with ``y`` the microbatches in flight.
    sync_fw : Mapping[node id, float]
        Bytes to spread the input from each predecessor among the t devices (one per incoming
        edge). Keys are typed ``Any``: ``Mapping`` is invariant in its key, and ``{0: 1.0}`` must pass.
    sync_bw : Mapping[NodeId, float]
        Likewise for each outgoing edge.
    recompute : bool or None
        Whether this is activation recomputation (default: ``id == RECOMPUTE_ID``).

    Examples
    --------
    >>> TMPC("activation recomp", 1.5, 0.0, 1.0, 0.0).is_recompute
    True
    """

    id: str
    time: float
    params: float
    mem_a: float
    mem_b: float
    sync_fw: Mapping[Any, float] = field(default_factory=dict)
    sync_bw: Mapping[Any, float] = field(default_factory=dict)
    recompute: bool | None = None

    @property
    def is_recompute(self) -> bool:
        """Whether the TMPC recomputes activations (dropped by ``plan_training(recompute=False)``)."""
        return self.id == RECOMPUTE_ID if self.recompute is None else bool(self.recompute)


@dataclass(frozen=True)
class PiperNode:
    """A layer: its id, its TMPCs per tensor-parallel degree ``t`` and an optional name.

    Examples
    --------
    >>> PiperNode(3, {1: (TMPC("vanilla", 1.0, 0.0, 0.0, 0.0),)}, "Linear").name
    'Linear'
    """

    id: NodeId
    tmpcs: Mapping[int, Sequence[TMPC]]
    name: str = ""


@dataclass(frozen=True)
class PiperEdge:
    """An edge ``source -> target`` and the bytes moved along it (``communicationCost``).

    Examples
    --------
    >>> PiperEdge(0, 1, 4.0).comm
    4.0
    """

    source: NodeId
    target: NodeId
    comm: float


@dataclass(frozen=True)
class PiperProblem:
    """A Piper input: the layer DAG with its TMPCs and the settings to plan for.

    Parameters
    ----------
    nodes : tuple of PiperNode
        The layers (any order; node ids unique).
    edges : tuple of PiperEdge
        The data dependencies (a DAG).
    devices : int
        K, the number of devices (>= 1).
    memory : float
        M, memory per device (bytes, > 0).
    bandwidth : float
        B, bandwidth between devices (bytes/s, > 0); between servers on a two-level network.
    batch : int
        N, microbatches per batch (>= 1): data-parallel degrees divide it and sum to at most N.
    server_size, intra_bandwidth : int and float, optional
        A two-level network: ``server_size`` devices per server linked at ``intra_bandwidth``.
        Tensor parallelism stays inside a server (``t`` divides ``server_size``), the t-way sync
        bytes move at ``intra_bandwidth``, and so does a stage's data-parallel all-reduce when its
        ``t * d`` devices fit in one server. Both or neither.

    Raises
    ------
    InvalidGraphError
        A setting out of range, a duplicate node or edge, an edge to an unknown node, a node
        without a TMPC for ``t = 1``, a negative or non-finite number, sync keys that do not
        match the node's edges.
    CycleError
        The layer graph has a directed cycle (listed in the message and in ``.cycle``).

    Examples
    --------
    >>> from stagecut.training import chain_problem
    >>> prob = chain_problem([1.0, 2.0], devices=2, memory=10.0, bandwidth=1.0, batch=2)
    >>> prob.replace(memory=20).memory
    20.0
    """

    nodes: tuple[PiperNode, ...]
    edges: tuple[PiperEdge, ...]
    devices: int
    memory: float
    bandwidth: float
    batch: int
    server_size: int | None = None
    intra_bandwidth: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "edges", tuple(self.edges))
        _check_settings(self)
        preds, succs = _check_edges(self)
        _check_acyclic(preds, succs)
        for nd in self.nodes:
            _check_node(nd, preds[nd.id], succs[nd.id])

    def replace(self, **changes: Any) -> PiperProblem:
        """A copy with some fields changed (validated again).

        Parameters
        ----------
        **changes
            New values for ``devices``, ``memory``, ``bandwidth``, ``batch``, ``server_size``,
            ``intra_bandwidth`` (or ``nodes``, ``edges``).

        Returns
        -------
        PiperProblem

        Raises
        ------
        InvalidGraphError
            A new value is out of range.
        """
        return dataclasses.replace(self, **changes)

    @cached_property
    def index(self) -> dict[NodeId, int]:
        """``{node id: position in nodes}``."""
        return {nd.id: i for i, nd in enumerate(self.nodes)}

    @cached_property
    def links(self) -> tuple[Links, Links]:
        """``(preds, succs)``: ``{node id: [(neighbour, communication cost), ...]}`` in edge order."""
        preds: Links = {nd.id: [] for nd in self.nodes}
        succs: Links = {nd.id: [] for nd in self.nodes}
        for e in self.edges:
            preds[e.target].append((e.source, float(e.comm)))
            succs[e.source].append((e.target, float(e.comm)))
        return preds, succs

    @cached_property
    def tmpc_by_key(self) -> dict[tuple[NodeId, int, str], TMPC]:
        """``{(node id, t, TMPC id): TMPC}``."""
        return {(nd.id, t, c.id): c for nd in self.nodes for t, lst in nd.tmpcs.items() for c in lst}


# ------------------------------------------------------------------------------ validation
def _check_settings(p: PiperProblem) -> None:
    """Check and normalise the settings (ints as int, amounts as float)."""
    norm: dict[str, Any] = {
        "devices": check_int(p.devices, "devices (maxDevices)", minimum=1, error=InvalidGraphError),
        "batch": check_int(p.batch, "batch (mbsInBatch)", minimum=1, error=InvalidGraphError),
        "memory": check_number(p.memory, "memory (maxMemoryPerDevice)", positive=True),
        "bandwidth": check_number(p.bandwidth, "bandwidth", positive=True),
    }
    if (p.server_size is None) != (p.intra_bandwidth is None):
        raise InvalidGraphError("server_size and intra_bandwidth go together (a two-level network)")
    if p.server_size is not None:
        norm["server_size"] = check_int(p.server_size, "server_size (serverSize)", minimum=1, error=InvalidGraphError)
        norm["intra_bandwidth"] = check_number(p.intra_bandwidth, "intra_bandwidth (intraServerBandwidth)",
                                               positive=True)
    for name, value in norm.items():
        object.__setattr__(p, name, value)


def _check_edges(p: PiperProblem) -> tuple[dict[NodeId, list[NodeId]], dict[NodeId, list[NodeId]]]:
    """Check node ids and edges; return ``(preds, succs)`` by node id."""
    if not p.nodes:
        raise InvalidGraphError("the problem has no nodes")
    preds: dict[NodeId, list[NodeId]] = {}
    for nd in p.nodes:
        if nd.id in preds:
            raise InvalidGraphError(f"duplicate node id {nd.id!r}")
        preds[nd.id] = []
    succs: dict[NodeId, list[NodeId]] = {v: [] for v in preds}
    seen: set[tuple[NodeId, NodeId]] = set()
    for e in p.edges:
        if e.source not in preds or e.target not in preds:
            raise InvalidGraphError(f"edge {e.source!r} -> {e.target!r}: endpoint is not a node")
        if e.source == e.target:
            raise CycleError(f"self-loop on node {e.source!r}", [e.source])
        if (e.source, e.target) in seen:
            raise InvalidGraphError(f"duplicate edge {e.source!r} -> {e.target!r}")
        seen.add((e.source, e.target))
        check_number(e.comm, f"edge {e.source!r} -> {e.target!r}: communicationCost")
        succs[e.source].append(e.target)
        preds[e.target].append(e.source)
    return preds, succs


def _check_acyclic(preds: Mapping[NodeId, list[NodeId]], succs: Mapping[NodeId, list[NodeId]]) -> None:
    keys = list(preds)
    order = kahn_order(keys, succs)
    if len(order) == len(keys):
        return
    done = set(order)
    cycle = cycle_among([v for v in keys if v not in done], preds)
    raise CycleError(f"the layer graph has a cycle through nodes {cycle}", cycle)


def _check_node(nd: PiperNode, preds: list[NodeId], succs: list[NodeId]) -> None:
    if not isinstance(nd.tmpcs, Mapping):
        raise InvalidGraphError(f"node {nd.id!r}: TMPCs must map t to a list")
    if not nd.tmpcs.get(1):
        raise InvalidGraphError(f"node {nd.id!r}: no TMPC for t=1 (running without tensor parallelism)")
    for t, lst in nd.tmpcs.items():
        check_int(t, f"node {nd.id!r}: TMPC key (a device count)", minimum=1, error=InvalidGraphError)
        ids: set[str] = set()
        for c in lst:
            if not c.id:
                raise InvalidGraphError(f"node {nd.id!r}, t={t}: empty TMPC id")
            if c.id in ids:
                raise InvalidGraphError(f"node {nd.id!r}, t={t}: duplicate TMPC id {c.id!r}")
            ids.add(c.id)
            _check_tmpc(c, f"node {nd.id!r}, t={t}, TMPC {c.id!r}", preds, succs)


def _check_tmpc(c: TMPC, where: str, preds: list[NodeId], succs: list[NodeId]) -> None:
    for name, value in (("timePerSample", c.time), ("parameterSize", c.params), ("memoryUsageA", c.mem_a),
                        ("memoryUsageB", c.mem_b)):
        check_number(value, f"{where}: {name}")
    for name, sync, ends, what in (("syncTimeFw", c.sync_fw, preds, "incoming edges from"),
                                   ("syncTimeBw", c.sync_bw, succs, "outgoing edges to")):
        if set(sync) != set(ends):
            raise InvalidGraphError(f"{where}: {name} keys {sorted(map(str, sync))} do not match the "
                                    f"{what} {sorted(map(str, ends))}")
        for k, v in sync.items():
            check_number(v, f"{where}: {name}[{k!r}]")


# ------------------------------------------------------------------------------ settings
def apply_settings(
    problem: PiperProblem,
    *,
    devices: int | None = None,
    memory: float | None = None,
    bandwidth: float | None = None,
    batch: int | None = None,
    server_size: int | None = None,
    intra_bandwidth: float | None = None,
) -> PiperProblem:
    """``problem`` with the given settings in place of its own (``None``: keep the problem's).

    Parameters
    ----------
    problem : PiperProblem
    devices, memory, bandwidth, batch : optional
        K, M (bytes per device), B (bytes/s) and N (microbatches per batch).
    server_size, intra_bandwidth : optional
        A two-level network; one of them alone replaces that field of the problem's network.

    Returns
    -------
    PiperProblem
        ``problem`` itself when nothing changes (its caches kept).

    Raises
    ------
    InvalidArgumentError
        A value out of range, or a network with only one of ``server_size``/``intra_bandwidth``.

    Examples
    --------
    >>> from stagecut.training import chain_problem
    >>> prob = chain_problem([1.0], devices=1, memory=1.0, bandwidth=1.0, batch=1)
    >>> apply_settings(prob, devices=4, server_size=2, intra_bandwidth=8).server_size
    2
    >>> apply_settings(prob, devices=0)
    Traceback (most recent call last):
    ...
    stagecut.errors.InvalidArgumentError: devices must be an integer >= 1, got 0
    """
    changes: dict[str, Any] = {}
    if devices is not None:
        changes["devices"] = check_int(devices, "devices", minimum=1)
    if batch is not None:
        changes["batch"] = check_int(batch, "batch", minimum=1)
    for name, value in (("memory", memory), ("bandwidth", bandwidth), ("intra_bandwidth", intra_bandwidth)):
        if value is not None:
            changes[name] = check_number(value, name, positive=True, error=InvalidArgumentError)
    if server_size is not None:
        changes["server_size"] = check_int(server_size, "server_size", minimum=1)
    if ("server_size" in changes) != ("intra_bandwidth" in changes):
        size = changes.get("server_size", problem.server_size)
        intra = changes.get("intra_bandwidth", problem.intra_bandwidth)
        if size is None or intra is None:
            raise InvalidArgumentError("server_size and intra_bandwidth go together (a two-level network)")
    changes = {k: v for k, v in changes.items() if getattr(problem, k) != v}
    return dataclasses.replace(problem, **changes) if changes else problem
