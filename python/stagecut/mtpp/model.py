"""MTPP: max-throughput pipeline partitioning with parameter overflow.

The cost model of Archer, Fahrbach, Liu and Prabhu, "Practical Performance Guarantees for
Pipelined DNN Inference" (Section 2.2, eq. 1-4), on the one :class:`~stagecut.graph.Graph`:

- ``work(v)`` = ``node.compute["accelerator"]`` (time);
- the tensor a node produces costs ``node.comm`` (time) to move between stages;
- ``params(v)`` = ``node.memory`` (bytes).

A *block* ``S`` (the nodes of one pipeline stage) costs

.. math::

    f(S) = \\sum_{u \\notin S,\\ u \\to S} c(u) + \\sum_{v \\in S} w(v)
           + \\sum_{v \\in S,\\ v \\to V \\setminus S} c(v)
           + \\frac{(\\mathrm{params}(S) + R - M)^+}{B}

each producing node's tensor counted once however many consumers it has on the other side;
``M`` is the fast memory (bytes), ``R`` the fast memory reserved for activations (bytes), ``B``
the bandwidth at which overflowing parameters are streamed (bytes per time unit: bytes/ms for
the workload files, whose times are in ms). With ``bandwidth=None`` the memory is a hard
limit: a block whose parameters exceed ``M - R`` is infeasible (cost ``inf``). With
``memory=None`` there is no memory term. A partition into at most ``k`` blocks is valid
if its quotient graph is acyclic (the stages can be pipelined); its objective is the largest
block cost (the reciprocal of throughput).

Colocation: nodes sharing a ``colocation`` class (a forward node and its backward node in a
training workload) must share a block (``colocate=True``, the default). With an acyclic
quotient this forces more: classes on a directed cycle of the class graph must share a block
too. :func:`forced_groups` computes these groups; every solver works on them.

This module holds the problem object and the evaluator, written from the definition alone and
independent of every solver: tests hold the solvers to it.

Examples
--------
>>> from stagecut.graph import Graph
>>> g = Graph.chain([3.0, 1.0, 2.0], comm=0.5, memory=[4.0, 4.0, 4.0])
>>> p = MtppProblem(g, devices=2, memory=6.0, bandwidth=2.0)
>>> block_cost(p, [0, 1])          # work 4 + output 0.5 + overflow (8 - 6) / 2
5.5
>>> ev = evaluate(p, [[0, 1], [2]])
>>> ev.objective, ev.stages[0].parts
(5.5, {'work': 4.0, 'io': 0.5, 'overflow': 1.0})
"""

from __future__ import annotations

import math
import sys
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx

from stagecut.errors import InvalidArgumentError, InvalidGraphError
from stagecut.graph import ACCELERATOR, Graph, kahn_order
from stagecut.mtpp._args import positional, renamed
from stagecut.results import NodeId, Stage
from stagecut.validate import check_int, check_number

__all__ = [
    "MtppProblem", "MtppEvaluation", "as_problem", "block_cost", "block_parts", "evaluate", "forced_groups",
    "least_total_overflow", "lower_bound",
]

#: The old positional order of ``MtppProblem(graph, ...)`` (accepted for one release).
_OLD_POSITIONAL = ("devices", "memory", "bandwidth", "reserved_memory", "kind", "colocate")


@dataclass(frozen=True, init=False)
class MtppProblem:
    """An MTPP instance: a graph, the number of devices (pipeline stages) and the memory model.

    Parameters
    ----------
    graph : Graph
    devices : int, optional
        Most blocks allowed (``k``, one device per stage). ``None`` takes the graph's
        ``defaults["accelerators"]``.
    memory : float, optional
        Fast memory per device, bytes (``None``: unlimited, no memory term).
    bandwidth : float, optional
        Bytes per time unit at which overflowing parameters are streamed; ``None`` makes the
        fast memory a hard limit.
    reserved_memory : float
        Fast memory kept for activations, bytes.
    kind : str
        The device kind whose compute time is the work (``"accelerator"``).
    colocate : bool
        Nodes of one colocation class must share a block (default). ``False`` treats the graph
        as a plain DAG (a training graph's forward and backward nodes may then be split).
    stages, fast_memory
        The old names of ``devices`` and ``memory`` (deprecated; one more release).

    Raises
    ------
    InvalidArgumentError
        ``devices`` not a positive integer, a negative or NaN memory, a bandwidth that is not
        positive (or so small that a block's cost would overflow past the largest float: the
        message says "overflow"), ``colocate`` not a bool.
    InvalidGraphError
        ``graph`` is not a :class:`~stagecut.graph.Graph`, a node cannot run on ``kind``, or the
        graph's ``accelerators`` default is missing (with ``devices=None``) or invalid.

    Examples
    --------
    >>> from stagecut.graph import Graph
    >>> p = MtppProblem(Graph.chain([1.0, 2.0]), devices=2, memory=1e9)
    >>> p.devices, p.memory, p.bandwidth
    (2, 1000000000.0, None)
    """

    graph: Graph
    devices: int
    memory: float = math.inf
    bandwidth: float | None = None
    reserved_memory: float = 0.0
    kind: str = ACCELERATOR
    colocate: bool = True

    def __init__(
        self,
        graph: Graph,
        *args: Any,
        devices: int | None = None,
        memory: float | None = None,
        bandwidth: float | None = None,
        reserved_memory: float = 0.0,
        kind: str = ACCELERATOR,
        colocate: bool = True,
        stages: int | None = None,
        fast_memory: float | None = None,
    ) -> None:
        if not isinstance(graph, Graph):
            raise InvalidGraphError(f"graph: expected a stagecut Graph, got {type(graph).__name__}")
        old = positional("MtppProblem", args, _OLD_POSITIONAL, {"devices": devices, "memory": memory})
        devices = renamed("MtppProblem", "devices", old.get("devices", devices), "stages", stages)
        memory = renamed("MtppProblem", "memory", old.get("memory", memory), "fast_memory", fast_memory)
        bandwidth = old.get("bandwidth", bandwidth)
        reserved_memory = old.get("reserved_memory", reserved_memory)
        kind = old.get("kind", kind)
        colocate = old.get("colocate", colocate)
        k = _resolve_devices(graph, devices)
        fm = math.inf if memory is None else check_number(memory, "memory", allow_inf=True, error=InvalidArgumentError)
        bw = None
        if bandwidth is not None:
            bw = check_number(bandwidth, "bandwidth (use None for a hard memory limit)", allow_inf=True,
                              positive=True, error=InvalidArgumentError)
        rv = check_number(reserved_memory, "reserved_memory", error=InvalidArgumentError)
        if not isinstance(kind, str):
            raise InvalidArgumentError(f"kind: {kind!r} is not a device kind name")
        for n in graph.nodes:
            if not n.supports(kind):
                raise InvalidGraphError(f"node {n.id!r}: cannot run on a {kind!r} device (no compute[{kind!r}])")
        if not isinstance(colocate, bool):
            raise InvalidArgumentError(f"colocate: {colocate!r} is not True or False")
        _check_no_overflow(graph, kind, fm, bw, rv)
        for name, value in (("graph", graph), ("devices", k), ("memory", fm), ("bandwidth", bw),
                            ("reserved_memory", rv), ("kind", kind), ("colocate", colocate)):
            object.__setattr__(self, name, value)

    @property
    def stages(self) -> int:
        """Deprecated name of :attr:`devices`."""
        return self.devices

    @property
    def fast_memory(self) -> float:
        """Deprecated name of :attr:`memory`."""
        return self.memory

    def work(self, i: int) -> float:
        """Work of the node at position ``i``."""
        return self.graph.nodes[i].time(self.kind)

    def overflow(self, params: float) -> float:
        """The memory term of a block holding ``params`` bytes of parameters."""
        x = params + self.reserved_memory - self.memory
        if math.isnan(x) or x <= 0:
            return 0.0
        if self.bandwidth is None:
            return math.inf
        return x / self.bandwidth


def _check_no_overflow(graph: Graph, kind: str, memory: float, bandwidth: float | None, reserved: float) -> None:
    """Every block cost must be a finite float, so that ``inf`` always means a hard memory limit
    broken (infeasible), never an overflow: the largest possible cost (all the work, every tensor
    in and out, the overflow of all the parameters) is checked once here."""
    if bandwidth is None:
        return
    params = math.fsum(n.memory for n in graph.nodes)  # (finite: the graph checks its totals)
    excess = params + reserved - memory
    overflow = excess / bandwidth if excess > 0 else 0.0
    work = math.fsum(n.time(kind) for n in graph.nodes)
    comm = math.fsum(n.comm for n in graph.nodes)
    if not math.isfinite(overflow) or not math.isfinite(work + 2 * comm + overflow):
        raise InvalidArgumentError(
            f"bandwidth={bandwidth:g}: streaming the parameters over the memory takes past the largest float "
            "(1.8e308, an overflow); rescale the inputs (e.g. memory in MB, bandwidth in MB per time unit)")


def _resolve_devices(graph: Graph, devices: Any) -> int:
    if devices is not None:
        return check_int(devices, "devices", minimum=1)
    default = graph.defaults.get("accelerators")
    if default is None:
        raise InvalidGraphError("devices: not given and the graph has no 'accelerators' default")
    return check_int(default, "the graph's 'accelerators' default", minimum=1, error=InvalidGraphError)


def as_problem(
    graph: Graph | MtppProblem,
    *,
    devices: int | None = None,
    memory: float | None = None,
    bandwidth: float | None = None,
    reserved_memory: float | None = None,
    kind: str | None = None,
    colocate: bool | None = None,
    where: str = "problem",
) -> MtppProblem:
    """The one way every MTPP solver builds its problem: ``graph`` itself when it is an
    :class:`MtppProblem` (then no setting may be given), else ``MtppProblem(graph, **settings)``.

    Raises
    ------
    InvalidArgumentError
        A setting given together with an :class:`MtppProblem` (it holds its own), or a bad setting.
    InvalidGraphError
        ``graph`` is neither a Graph nor an MtppProblem.

    Examples
    --------
    >>> from stagecut.graph import Graph
    >>> p = as_problem(Graph.chain([1.0, 2.0]), devices=2)
    >>> as_problem(p) is p
    True
    """
    settings = {"devices": devices, "memory": memory, "bandwidth": bandwidth, "reserved_memory": reserved_memory,
                "kind": kind, "colocate": colocate}
    if isinstance(graph, MtppProblem):
        given = [name for name, value in settings.items() if value is not None]
        if given:
            raise InvalidArgumentError(
                f"{where}: {', '.join(given)} given with an MtppProblem, which holds its own settings; "
                "pass the graph instead, or build the problem with them")
        return graph
    if not isinstance(graph, Graph):
        raise InvalidGraphError(f"graph: expected a Graph or an MtppProblem, got {type(graph).__name__}")
    return MtppProblem(graph, devices=devices, memory=memory, bandwidth=bandwidth,
                       reserved_memory=0.0 if reserved_memory is None else reserved_memory,
                       kind=ACCELERATOR if kind is None else kind, colocate=True if colocate is None else colocate)


def forced_groups(problem: MtppProblem) -> list[int]:
    """``group[i]`` for every node position ``i``: nodes with the same group share a block in
    every valid partition.

    Without colocation every node is its own group. With it, a group is a strongly connected
    component of the graph whose nodes are the colocation classes (a block holds whole classes,
    and classes on a directed cycle cannot be in different blocks of an acyclic quotient).
    Groups are numbered by their first node position.

    Parameters
    ----------
    problem : MtppProblem

    Returns
    -------
    list of int

    Raises
    ------
    AttributeError
        ``problem`` is not an :class:`MtppProblem` (it is validated when built; nothing else can fail).

    Examples
    --------
    >>> from stagecut.graph import Graph, Node
    >>> g = Graph([Node("f", {"accelerator": 1.0}, colocation=0), Node("x", {"accelerator": 1.0}),
    ...            Node("b", {"accelerator": 1.0}, colocation=0)], [("f", "x"), ("x", "b")])
    >>> forced_groups(MtppProblem(g, devices=2))    # f and b share a class; x lies between them
    [0, 0, 0]
    """
    g = problem.graph
    n = len(g.nodes)
    if not problem.colocate:
        return list(range(n))
    first: dict[Hashable, int] = {}
    klass = [first.setdefault(nd.colocation, i) if nd.colocation is not None else i for i, nd in enumerate(g.nodes)]
    if all(klass[i] == i for i in range(n)):
        return klass
    cg: nx.DiGraph[int] = nx.DiGraph()
    cg.add_nodes_from(set(klass))
    cg.add_edges_from((klass[u], klass[v]) for u in range(n) for v in g.succ[u] if klass[u] != klass[v])
    comp_of: dict[int, int] = {}
    for comp in nx.strongly_connected_components(cg):
        rep = min(comp)
        for c in comp:
            comp_of[c] = rep
    return [comp_of[klass[i]] for i in range(n)]


def _positions(problem: MtppProblem, nodes: Iterable[NodeId], where: str) -> list[int]:
    g = problem.graph
    out = []
    for v in nodes:
        if v not in g.index:
            raise InvalidGraphError(f"{where}: unknown node {v!r}")
        out.append(g.index[v])
    return out


def block_parts(problem: MtppProblem, nodes: Iterable[NodeId]) -> tuple[float, float, float, float]:
    """``(work, io, overflow, params)`` of one block (node ids), from the definition (eq. 1-4):
    its cost is ``work + io + overflow``; ``params`` is the memory its nodes hold.

    Raises
    ------
    InvalidGraphError
        An unknown node id.

    Examples
    --------
    >>> from stagecut.graph import Graph
    >>> p = MtppProblem(Graph.chain([3.0, 1.0], comm=0.5, memory=[4.0, 4.0]), devices=2, memory=6.0, bandwidth=2.0)
    >>> block_parts(p, [0])
    (3.0, 0.5, 0.0, 4.0)
    """
    g = problem.graph
    members = set(_positions(problem, nodes, "block"))
    work = sum(problem.work(i) for i in members)
    params = math.fsum(g.nodes[i].memory for i in members)  # (exactly rounded: the same in any order)
    io = 0.0
    for u in range(len(g.nodes)):
        if not g.succ[u]:
            continue
        inside = u in members
        if any((v in members) != inside for v in g.succ[u]):
            io += g.nodes[u].comm
    return work, io, problem.overflow(params), params


def block_cost(problem: MtppProblem, nodes: Iterable[NodeId]) -> float:
    """Cost of one block (node ids): work + tensors in and out (each once) + overflow.

    Raises
    ------
    InvalidGraphError
        An unknown node id.

    Examples
    --------
    >>> from stagecut.graph import Graph
    >>> block_cost(MtppProblem(Graph.chain([3.0, 1.0], comm=0.5), devices=2), [1])
    1.5
    """
    work, io, overflow, _ = block_parts(problem, nodes)
    return work + io + overflow


@dataclass(frozen=True, kw_only=True)
class MtppEvaluation:
    """The evaluator's verdict on a partition (see :func:`evaluate`).

    ``stages`` are the blocks as :class:`~stagecut.results.Stage` (device ``"accelerator:i"``,
    load = block cost, parts ``work``/``io``/``overflow``, memory = parameters held);
    ``block_costs`` their loads; ``objective`` the largest (``inf`` when a block breaks a hard
    memory limit: then ``feasible`` is ``False``).
    """

    objective: float
    block_costs: tuple[float, ...]
    feasible: bool
    stages: tuple[Stage, ...] = ()


def _block_lists(blocks: Sequence[Iterable[NodeId] | Stage]) -> list[list[NodeId]]:
    return [list(b.nodes) if isinstance(b, Stage) else list(b) for b in blocks]


def _check_cover(problem: MtppProblem, blocks: list[list[NodeId]]) -> dict[int, int]:
    g = problem.graph
    block_of: dict[int, int] = {}
    for b, nodes in enumerate(blocks):
        if not nodes:
            raise InvalidGraphError(f"block {b} is empty")
        for i in _positions(problem, nodes, f"block {b}"):
            if i in block_of:
                raise InvalidGraphError(f"node {g.nodes[i].id!r} is in blocks {block_of[i]} and {b}")
            block_of[i] = b
    missing = [g.nodes[i].id for i in range(len(g.nodes)) if i not in block_of]
    if missing:
        raise InvalidGraphError(f"node {missing[0]!r} is in no block ({len(missing)} missing)")
    if len(blocks) > problem.devices:
        raise InvalidGraphError(f"{len(blocks)} blocks for {problem.devices} devices")
    return block_of


def _check_colocation(problem: MtppProblem, block_of: dict[int, int]) -> None:
    g = problem.graph
    where: dict[Hashable, int] = {}
    for i, nd in enumerate(g.nodes):
        if nd.colocation is None:
            continue
        j = where.setdefault(nd.colocation, i)
        if block_of[j] != block_of[i]:
            raise InvalidGraphError(
                f"colocation class {nd.colocation!r} is split: node {g.nodes[j].id!r} is in block "
                f"{block_of[j]}, node {nd.id!r} in block {block_of[i]} (colocate=False ignores classes)"
            )


def _check_quotient(problem: MtppProblem, block_of: dict[int, int], nblocks: int) -> None:
    g = problem.graph
    succ: dict[int, set[int]] = {b: set() for b in range(nblocks)}
    for u, v in g.edges:
        a, c = block_of[g.index[u]], block_of[g.index[v]]
        if a != c:
            succ[a].add(c)
    order = kahn_order(range(nblocks), succ)
    if len(order) != nblocks:
        cyc = sorted(set(range(nblocks)) - set(order))
        raise InvalidGraphError(f"the quotient graph of the blocks has a cycle (among blocks {cyc})")


def evaluate(problem: MtppProblem, blocks: Sequence[Iterable[NodeId] | Stage]) -> MtppEvaluation:
    """Check a partition and score it, from the definition alone (independent of every solver).

    Parameters
    ----------
    problem : MtppProblem
    blocks : sequence of node-id collections or of Stage
        The blocks in pipeline order (a result's ``stages`` work as they are).

    Returns
    -------
    MtppEvaluation

    Raises
    ------
    InvalidGraphError
        A node missing, repeated or unknown; an empty block; more blocks than devices; a split
        colocation class (with ``colocate``); a cyclic quotient graph (the message names the blocks).

    Examples
    --------
    >>> from stagecut.graph import Graph
    >>> p = MtppProblem(Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5), devices=2)
    >>> ev = evaluate(p, [[0, 1], [2, 3]])
    >>> ev.objective, ev.block_costs, ev.stages[1].device
    (5.5, (5.5, 5.5), 'accelerator:1')
    """
    lists = _block_lists(blocks)
    block_of = _check_cover(problem, lists)
    if problem.colocate:
        _check_colocation(problem, block_of)
    _check_quotient(problem, block_of, len(lists))
    stages = []
    for b, nodes in enumerate(lists):
        work, io, overflow, params = block_parts(problem, nodes)
        stages.append(Stage(index=b, device=f"{problem.kind}:{b}", nodes=tuple(nodes), load=work + io + overflow,
                            parts={"work": work, "io": io, "overflow": overflow}, memory=params))
    costs = tuple(s.load for s in stages)
    obj = max(costs) if costs else 0.0
    return MtppEvaluation(objective=obj, block_costs=costs, feasible=math.isfinite(obj), stages=tuple(stages))


def tensor_costs_dwarf_the_answer(problem: MtppProblem) -> bool:
    """Does some tensor cost exceed a million times the simple lower bound on the optimum?

    Then a table of segment costs built from sums and differences of tensor costs (the 2D
    Fenwick construction of Lemma 4.1) would round away parts of the answer; the incremental
    scan, which keeps its sums compensated, does not.

    >>> from stagecut.graph import Graph
    >>> tensor_costs_dwarf_the_answer(MtppProblem(Graph.chain([1.0, 1.0, 1.0], comm=[0.0, 1e16, 1.0]), devices=2))
    True
    """
    largest = max((n.comm for n in problem.graph.nodes), default=0.0)
    return largest > 1e6 * max(lower_bound(problem), 1e-300)


#: The float rounding unit (the round-off allowances of the memory tests are a few of it).
_EPS = sys.float_info.epsilon


def least_total_overflow(problem: MtppProblem, params: float, blocks: int) -> float:
    """The least total overflow of ``blocks`` blocks holding ``params`` (superadditive). A hard
    limit is refuted (``inf``) only beyond a few units in the last place of ``max(M, R)`` per
    block: the evaluator's test of each block (``params + R - M <= 0``, in floats) can accept that
    much beyond it."""
    x = params + blocks * (problem.reserved_memory - problem.memory)
    if math.isnan(x) or x <= 0:
        return 0.0
    if problem.bandwidth is None:
        slack = 4 * _EPS * (abs(params) + blocks * (abs(problem.reserved_memory) + abs(problem.memory)))
        return math.inf if x > slack else 0.0
    return x / problem.bandwidth


def lower_bound(problem: MtppProblem) -> float:
    """The simple lower bound on the optimum (Lemma 3.3).

    The largest ``work + overflow(params)`` of a single :func:`forced_groups` group (the block
    holding it costs at least that; work and overflow only grow with the block), and the
    average bound: with ``j <= k`` blocks the costs sum to at least the total work plus
    ``(P + j (R - M))^+ / B`` (the overflow is superadditive), so the largest is at least that
    over ``j``; minimised over ``j``.

    Parameters
    ----------
    problem : MtppProblem

    Returns
    -------
    float
        ``inf`` when no partition can exist (a hard memory limit too small).

    Raises
    ------
    AttributeError
        ``problem`` is not an :class:`MtppProblem` (it is validated when built; nothing else can fail).

    Examples
    --------
    >>> from stagecut.graph import Graph
    >>> lower_bound(MtppProblem(Graph.chain([3.0, 1.0, 2.0, 2.0]), devices=2))
    4.0
    """
    g = problem.graph
    gw: dict[int, float] = {}
    gp: dict[int, list[float]] = {}
    for i, grp in enumerate(forced_groups(problem)):
        gw[grp] = gw.get(grp, 0.0) + problem.work(i)
        gp.setdefault(grp, []).append(g.nodes[i].memory)
    single = max(gw[grp] + problem.overflow(math.fsum(gp[grp])) for grp in gw)  # (as the evaluator sums a block)
    w = sum(problem.work(i) for i in range(len(g.nodes)))
    p = math.fsum(n.memory for n in g.nodes)
    avg = math.inf
    for j in range(1, min(problem.devices, len(gw)) + 1):
        avg = min(avg, (w + least_total_overflow(problem, p, j)) / j)
    return max(single, avg)
