"""Operator fusion (QuickP's Algorithm 1): contract a large operator graph before placing it.

:func:`fuse` shrinks a graph (or a :class:`~stagecut.latency.LatencyProblem`) by contracting
edges; each node of the fused graph is a *group* of original operators that will run on one
device, one after the other. The rules, with ``out(i)`` and ``in(j)`` the numbers of distinct
successors and predecessors in the *current* (partly fused) graph and ``p`` a node's time:

* ``alpha`` is the 90th percentile (``numpy.percentile``, linear interpolation) of the non-zero
  node times, computed once, *before* any contraction. A node's time is its mean over the
  devices (or, for a :class:`~stagecut.Graph`, the device kinds) that can run it;
* an edge ``(i, j)`` with ``out(i) >= 2`` and ``in(j) >= 2`` is never contracted;
* it is contracted when ``out(i) = 1`` and ``in(j) = 1`` (a chain), or ``p_i <= alpha`` and
  ``out(i) = 1`` (a small producer whose only consumer is ``j``), or ``p_j <= alpha`` and
  ``in(j) = 1`` (a small consumer whose only producer is ``i``);
* a contraction adds the times per device (per kind), the memory, and keeps every other edge
  (parallel edges become one). The sweeps go over the nodes in topological order, each node's
  outgoing edges in turn, and repeat until a sweep contracts nothing.

Safety checks (not assumptions): an edge is contracted only if no other path leads from ``i``
to ``j`` (the contraction would close a cycle; the check is O(1) when ``out(i) = 1`` or
``in(j) = 1``, which every edge the rules allow satisfies, and a search otherwise), only if some
device can still run the whole group and hold its memory, and never across two different
:attr:`~stagecut.Node.colocation` classes. Those refusals are counted in ``stats["refused"]``.

What a fused node is
--------------------
Its time on a device is the sum of its members' times (``inf`` if one cannot run there), its
memory the sum, and its output (``comm``, and the size in the fused problem) the sum of the
outputs of the members that have a consumer *outside* the group: each such tensor is sent once
(tensor-once per producer), distinct tensors add, tensors consumed only inside are free.

Fused plans and the original graph
----------------------------------
Every plan is reported and evaluated on the original graph: :meth:`Fusion.expand` maps a
placement of the fused nodes back to the operators, :meth:`Fusion.expand_order` a per-device
order (each group's members contiguous, in the original graph's topological order), and
:meth:`Fusion.expand_schedule` re-scores a fused schedule on the original problem.

The ASAP makespan of a fused plan is an *upper bound* on the makespan of its expansion (same
devices, the expanded order): in the fused model a group starts when *all* its inputs arrived
and every output leaves when the *whole* group is done, carrying the sum of its tensors, while
in the expansion each member starts when its own inputs arrived, and each output leaves when
its producer is done, with its own size. So mapping back never makes a plan slower. The two
are *equal* when every group is a chain contracted by the first rule (``alpha=-inf`` keeps
only that rule: a group is then a path entered at its first member and left at its last), and
when all nodes end up in one group on one device (the sum of the times). The tests check both
and the bound on random graphs.

>>> import stagecut as sc
>>> g = sc.Graph.chain([5.0, 1.0, 1.0, 5.0], comm=1.0)
>>> f = fuse(g)
>>> f.groups, f.graph.nodes[0].compute, f.stats["nodes_after"]
({0: (0, 1, 2, 3)}, {'accelerator': 12.0}, 1)
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from stagecut.errors import InvalidArgumentError, internal_error
from stagecut.graph import Graph, Node, NodeId
from stagecut.graph_check import check_graph
from stagecut.latency.model.evaluate import TOL, schedule_from
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.validate import check_number, shown

__all__ = ["Fusion", "fuse", "node_times", "threshold"]


def node_times(times: np.ndarray) -> np.ndarray:
    """Each row's mean over its finite entries (0 for a row without one): a node's time for the
    fusion and co-location rules (the mean over the devices that can run it)."""
    fin = np.isfinite(times)
    count = fin.sum(axis=1)
    total = np.where(fin, times, 0.0).sum(axis=1)
    out: np.ndarray = np.divide(total, count, out=np.zeros(len(times)), where=count > 0)
    return out


def threshold(times: np.ndarray, percentile: float = 90.0) -> float:
    """``alpha``: the ``percentile``-th percentile (linear interpolation) of the non-zero entries
    of ``times`` (one per node); 0 when every time is zero.

    Raises
    ------
    InvalidArgumentError
        ``percentile`` outside [0, 100].
    """
    q = check_number(percentile, "percentile", error=InvalidArgumentError)
    if q > 100:
        raise InvalidArgumentError(f"percentile: {q:g} must be at most 100")
    nz = np.sort(times[times > 0])
    if not nz.size:
        return 0.0
    h = (nz.size - 1) * q / 100.0   # numpy.percentile's default ("linear") interpolation
    lo = min(int(math.floor(h)), nz.size - 1)
    hi = min(lo + 1, nz.size - 1)
    return float(nz[lo] + (h - lo) * (nz[hi] - nz[lo]))


class _State:
    """The partly fused graph: union-find over node positions, and for each root its distinct
    successors and predecessors (roots), times per column, memory, mean time, colocation class.
    """

    def __init__(self, succ: Sequence[Sequence[int]], pred: Sequence[Sequence[int]], times: np.ndarray,
                 memory: np.ndarray, classes: Sequence[Hashable | None], capacity: np.ndarray | None) -> None:
        n = len(succ)
        self.parent = list(range(n))
        self.succ = [set(s) for s in succ]
        self.pred = [set(p) for p in pred]
        self.rows: list[list[float]] = np.asarray(times, dtype=float).tolist()
        self.memory: list[float] = np.asarray(memory, dtype=float).tolist()
        self.p: list[float] = node_times(np.asarray(times, dtype=float)).tolist()
        fin = np.isfinite(np.asarray(times, dtype=float)).reshape(n, -1)
        if fin.shape[1] <= 62:
            self.mask: list[int] = (fin * (1 << np.arange(fin.shape[1], dtype=np.int64))).sum(axis=1).tolist()
        else:
            self.mask = [sum(1 << d for d, f in enumerate(row) if f) for row in fin.tolist()]
        self.cls = list(classes)
        self.capacity = capacity if capacity is not None and np.isfinite(capacity).any() else None
        self._cap_of_mask: dict[int, float] = {}
        self.refused = 0

    def find(self, i: int) -> int:
        parent = self.parent
        root = i
        while parent[root] != root:
            root = parent[root]
        while parent[i] != root:
            parent[i], i = root, parent[i]
        return root

    def creates_cycle(self, i: int, j: int) -> bool:
        """Would contracting the edge ``(i, j)`` (roots) close a cycle, i.e. is there another
        path from ``i`` to ``j``? O(1) when ``i`` has one successor or ``j`` one predecessor
        (the edge is then the only path), else a search from ``i``'s other successors."""
        succ = self.succ
        if j not in succ[i]:
            raise internal_error(f"fusion: ({i}, {j}) is not an edge of the fused graph")
        if len(succ[i]) == 1 or len(self.pred[j]) == 1:
            return False
        stack = [k for k in succ[i] if k != j]
        seen = set(stack)
        while stack:
            for y in succ[stack.pop()]:
                if y == j:
                    return True
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        return False

    def _max_capacity(self, mask: int) -> float:
        got = self._cap_of_mask.get(mask)
        if got is None:
            assert self.capacity is not None
            got = max((float(c) for d, c in enumerate(self.capacity) if mask >> d & 1), default=-math.inf)
            self._cap_of_mask[mask] = got
        return got

    def allowed(self, i: int, j: int) -> bool:
        """May roots ``i`` and ``j`` share a group: some device runs and holds both, and they do
        not carry two different colocation classes."""
        mask = self.mask[i] & self.mask[j]
        ci, cj = self.cls[i], self.cls[j]
        ok = mask != 0 and (ci is None or cj is None or ci == cj)
        if ok and self.capacity is not None:
            ok = self.memory[i] + self.memory[j] <= self._max_capacity(mask)
        return ok

    def merge(self, i: int, j: int) -> int:
        """Contract the edge ``(i, j)`` (roots); returns the new root."""
        succ, pred = self.succ, self.pred
        r, a = (i, j) if len(succ[i]) + len(pred[i]) >= len(succ[j]) + len(pred[j]) else (j, i)
        self.parent[a] = r
        for x in succ[a]:
            px = pred[x]
            px.discard(a)
            if x != r:
                px.add(r)
        for x in pred[a]:
            sx = succ[x]
            sx.discard(a)
            if x != r:
                sx.add(r)
        succ[r] |= succ[a]
        pred[r] |= pred[a]
        for s in (succ[r], pred[r]):
            s.discard(r)
            s.discard(a)
        succ[a], pred[a] = set(), set()
        ma, mr = self.mask[a], self.mask[r]
        row = self.rows[r] = [x + y for x, y in zip(self.rows[r], self.rows[a])]
        if ma == mr:
            self.p[r] += self.p[a]
        else:
            fin = [x for x in row if x < math.inf]
            self.p[r] = sum(fin) / len(fin) if fin else 0.0
        self.mask[r] = ma & mr
        self.memory[r] += self.memory[a]
        if self.cls[r] is None:
            self.cls[r] = self.cls[a]
        return r

    def rule(self, i: int, j: int, alpha: float) -> bool:
        """QuickP's contraction rule for the edge ``(i, j)`` (roots)."""
        oi, ij = len(self.succ[i]), len(self.pred[j])
        if oi >= 2 and ij >= 2:
            return False
        return (oi == 1 and ij == 1) or (oi == 1 and self.p[i] <= alpha) or (ij == 1 and self.p[j] <= alpha)

    def sweep(self, order: Sequence[int], alpha: float) -> int:
        """One pass over the roots in ``order``; returns the number of contractions."""
        merges = 0
        done: set[int] = set()
        for v in order:
            r = self.find(v)
            if r in done:
                continue
            changed = True
            while changed:
                changed = False
                for s in list(self.succ[r]):
                    if s not in self.succ[r] or not self.rule(r, s, alpha):
                        continue
                    if self.creates_cycle(r, s) or not self.allowed(r, s):
                        self.refused += 1
                        continue
                    r = self.merge(r, s)
                    merges += 1
                    changed = True
            done.add(r)
        return merges


def _sizes(graph: Graph, output_bytes: Mapping[Hashable, float] | str | None) -> np.ndarray | None:
    if output_bytes is None or output_bytes == "comm":
        return None
    if not isinstance(output_bytes, Mapping):
        raise InvalidArgumentError(f"output_bytes: expected a mapping of node id to bytes, got {shown(output_bytes)}")
    extra = [k for k in output_bytes if k not in graph.index]
    if extra:
        raise InvalidArgumentError(f"output_bytes: unknown node {shown(extra[0])}")
    out = np.zeros(len(graph))
    for i, v in enumerate(graph.nodes):
        if v.id not in output_bytes:
            raise InvalidArgumentError(f"output_bytes: node {shown(v.id)} is missing")
        out[i] = check_number(output_bytes[v.id], f"output_bytes of node {shown(v.id)}", error=InvalidArgumentError)
    return out


def fuse(source: Graph | LatencyProblem, *, output_bytes: Mapping[Hashable, float] | str | None = None,
         alpha: float | None = None, percentile: float = 90.0) -> Fusion:
    """Fuse operators (QuickP's Algorithm 1; see the module docs for the rules).

    Parameters
    ----------
    source : Graph or LatencyProblem
        A graph (times per device kind from each node's ``compute``) or a problem (times per
        device, memory limits; the fused problem is built on the same devices).
    output_bytes : mapping of node id to float, or "comm", optional
        With a graph only: output sizes to fuse alongside (:attr:`Fusion.output_bytes`). A
        problem carries its own sizes.
    alpha : float, optional
        The threshold of the small-node rules; default: the ``percentile``-th percentile of the
        non-zero node times (before fusion). ``-inf`` keeps only the chain rule.
    percentile : float
        See ``alpha`` (default 90).

    Returns
    -------
    Fusion
        The fused graph (and problem), the groups and the statistics.

    Raises
    ------
    InvalidArgumentError
        ``source`` of the wrong type, a NaN ``alpha``, a ``percentile`` outside [0, 100], bad
        ``output_bytes`` (naming the node); device names that clash with device kinds, so that a
        fused node's times cannot be given per device.
    """
    t0 = time.perf_counter()
    check_graph(source, "source", accept=(LatencyProblem,))
    problem = source if isinstance(source, LatencyProblem) else None
    graph = problem.graph if problem is not None else source
    assert isinstance(graph, Graph)
    if problem is not None:
        if output_bytes is not None:
            raise InvalidArgumentError("output_bytes: a LatencyProblem carries its own sizes (pass None)")
        size: np.ndarray | None
        columns = list(problem.devices.names)
        times = problem.times
        memory, size, capacity = problem.memory, problem.size, problem.capacity
        order = problem.order
    else:
        columns = sorted({k for v in graph.nodes for k in v.compute})
        times = np.array([[v.time(k) for k in columns] for v in graph.nodes], dtype=float).reshape(
            len(graph), len(columns))
        memory = np.array([v.memory for v in graph.nodes], dtype=float)
        size, capacity = _sizes(graph, output_bytes), None
        order = graph.topological_order()
    if alpha is None:
        a = threshold(node_times(times), percentile)
    else:
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or math.isnan(alpha):
            raise InvalidArgumentError(f"alpha: expected a number, got {shown(alpha)}")
        a = float(alpha)
    state = _State(graph.succ, graph.pred, times, memory, [v.colocation for v in graph.nodes], capacity)
    passes = 0
    while True:
        passes += 1
        if not state.sweep(order, a):
            break
    fusion = Fusion._build(graph, problem, state, order, columns, size if problem is None else None)
    fusion.stats.update(alpha=a, percentile=float(percentile), passes=passes, refused=state.refused,
                        time_s=time.perf_counter() - t0)
    return fusion


class Fusion:
    """The result of :func:`fuse`.

    Attributes
    ----------
    graph : Graph
        The fused graph. A fused node's id is the id of its first member (in the original
        graph's topological order); its ``compute`` holds its times per device name (fused from a
        problem) or per kind (from a graph), its ``comm`` its output (the fused problem's size).
    problem : LatencyProblem or None
        The fused problem on the original problem's devices (``None`` when fused from a graph).
    groups : dict
        Fused node id -> the original node ids it holds, in topological order. Every original
        node is in exactly one group.
    group_of : dict
        Original node id -> its fused node id.
    original : Graph
        The original graph; ``original_problem`` the original problem (or ``None``).
    output_bytes : dict or None
        Fused output sizes, when a graph was fused with an ``output_bytes`` mapping.
    stats : dict
        ``nodes_before``, ``nodes_after``, ``edges_before``, ``edges_after``, ``largest_group``,
        ``alpha``, ``percentile``, ``passes`` (sweeps), ``refused`` (contractions the rules
        allowed but the cycle, device or colocation checks refused), ``time_s``.
    """

    def __init__(self, graph: Graph, problem: LatencyProblem | None, original: Graph,
                 original_problem: LatencyProblem | None, members: list[list[int]], fused_of: np.ndarray,
                 output_bytes: dict[NodeId, float] | None, stats: dict[str, Any]) -> None:
        self.graph, self.problem = graph, problem
        self.original, self.original_problem = original, original_problem
        self.output_bytes = output_bytes
        self.stats = stats
        self._members = members
        self._fused_of = fused_of
        self._groups: dict[NodeId, tuple[NodeId, ...]] | None = None
        self._group_of: dict[NodeId, NodeId] | None = None

    @property
    def groups(self) -> dict[NodeId, tuple[NodeId, ...]]:
        """Fused node id -> the original node ids it holds, in topological order."""
        if self._groups is None:
            oid, fid = self.original.ids, self.graph.ids
            self._groups = {fid[f]: tuple(oid[i] for i in m) for f, m in enumerate(self._members)}
        return self._groups

    @property
    def group_of(self) -> dict[NodeId, NodeId]:
        """Original node id -> its fused node id."""
        if self._group_of is None:
            oid, fid = self.original.ids, self.graph.ids
            self._group_of = {oid[i]: fid[f] for i, f in enumerate(self._fused_of.tolist())}
        return self._group_of

    @classmethod
    def _build(cls, graph: Graph, problem: LatencyProblem | None, state: _State, order: Sequence[int],
               columns: list[str], size: np.ndarray | None) -> Fusion:
        n = len(graph)
        find = state.find
        roots = [find(i) for i in range(n)]
        rank = [0] * n
        for k, i in enumerate(order):
            rank[i] = k
        members: dict[int, list[int]] = {}
        for i in order:
            members.setdefault(roots[i], []).append(i)
        root_list = list(members)  # by each group's first member in topological order
        fpos = {r: f for f, r in enumerate(root_list)}
        fused_of = np.array([fpos[r] for r in roots], dtype=np.int64)
        src = np.repeat(np.arange(n), [len(s) for s in graph.succ])
        dst = np.fromiter((v for vs in graph.succ for v in vs), dtype=np.int64, count=len(src))
        ext = np.zeros(n, dtype=bool)
        ext[src[fused_of[src] != fused_of[dst]]] = True
        k = len(root_list)
        # a fused node's output: the tensors of its members read outside the group, each once
        comm = problem.size if problem is not None else np.array([v.comm for v in graph.nodes], dtype=float)
        fcomm = np.bincount(fused_of, weights=np.where(ext, comm, 0.0), minlength=k).tolist()
        fsize = None if size is None else np.bincount(fused_of, weights=np.where(ext, size, 0.0), minlength=k)
        orig = graph.nodes
        fnodes = []
        inf = math.inf
        for f, r in enumerate(root_list):
            group = members[r]
            first = orig[group[0]]
            compute = {c: x for c, x in zip(columns, state.rows[r]) if x < inf}
            backward = first.backward and all(orig[i].backward for i in group)
            fnodes.append(Node(first.id, compute, memory=state.memory[r], comm=fcomm[f],
                               colocation=state.cls[r], backward=backward, name=first.name))
        fid = [v.id for v in fnodes]
        fedges = [(fid[f], fid[fpos[s]]) for f, r in enumerate(root_list)
                  for s in sorted(state.succ[r], key=rank.__getitem__)]
        fgraph = Graph(fnodes, fedges, graph.defaults)
        fproblem = None
        if problem is not None:
            fproblem = LatencyProblem(fgraph, problem.devices,
                                      output_bytes="comm" if problem.devices.unit == "bytes" else None)
            want = np.array([state.rows[r] for r in root_list], dtype=float).reshape(k, len(columns))
            if not np.array_equal(fproblem.times, want):
                raise InvalidArgumentError("devices: a device's name is another device's kind, so a fused node's "
                                           "times cannot be given per device; rename the devices")
        out_bytes = None
        if fsize is not None:
            out_bytes = {fid[f]: float(fsize[f]) for f in range(k)}
        stats: dict[str, Any] = {
            "nodes_before": n, "nodes_after": k, "edges_before": len(graph.edges), "edges_after": len(fedges),
            "largest_group": max(len(m) for m in members.values()),
        }
        return cls(fgraph, fproblem, graph, problem, [members[r] for r in root_list], fused_of, out_bytes, stats)

    def __len__(self) -> int:
        return len(self._members)

    def __repr__(self) -> str:
        s = self.stats
        return f"Fusion({s['nodes_before']} -> {s['nodes_after']} nodes, alpha={s.get('alpha', 0.0):g})"

    def members(self, fused: int) -> list[int]:
        """Original node positions in the fused node at position ``fused`` (topological order)."""
        return list(self._members[fused])

    @property
    def fused_of(self) -> np.ndarray:
        """The fused node position of each original node position."""
        out: np.ndarray = self._fused_of.copy()
        return out

    def expand(self, placement: Mapping[Hashable, Any] | Sequence[Any] | np.ndarray
               ) -> dict[NodeId, Any] | list[Any]:
        """A placement of the fused nodes as a placement of the original nodes.

        Parameters
        ----------
        placement : mapping or sequence
            Fused node id -> device (name or position): gives original node id -> device; or a
            device per fused node position: gives a list, a device per original node position.

        Returns
        -------
        dict or list
            As described above.

        Raises
        ------
        InvalidArgumentError
            A fused node missing, an unknown one, or a sequence of the wrong length.
        """
        if isinstance(placement, Mapping):
            missing = [f for f in self.groups if f not in placement]
            if missing:
                raise InvalidArgumentError(f"placement: fused node {shown(missing[0])} has no device")
            extra = [f for f in placement if f not in self.groups]
            if extra:
                raise InvalidArgumentError(f"placement: {shown(extra[0])} is not a fused node")
            return {v: placement[f] for f, group in self.groups.items() for v in group}
        if isinstance(placement, str) or not isinstance(placement, (Sequence, np.ndarray)):
            raise InvalidArgumentError(f"placement: expected a mapping or a sequence, got {shown(placement)}")
        if len(placement) != len(self):
            raise InvalidArgumentError(f"placement: expected {len(self)} entries (one per fused node), "
                                       f"got {len(placement)}")
        seq = list(placement.tolist() if isinstance(placement, np.ndarray) else placement)
        return [seq[f] for f in self._fused_of.tolist()]

    def expand_order(self, order: Mapping[str, Sequence[Hashable]] | Sequence[Sequence[int]]
                     ) -> dict[str, tuple[NodeId, ...]] | list[list[int]]:
        """A per-device order of fused nodes as one of original nodes: each fused node replaced by
        its members in the original graph's topological order.

        Parameters
        ----------
        order : mapping or sequence
            Device name -> fused node ids (gives device name -> original ids), or per device
            position the fused node positions (gives per device the original positions).

        Returns
        -------
        dict or list
            As described above.

        Raises
        ------
        InvalidArgumentError
            An unknown fused node id or position.
        """
        if isinstance(order, Mapping):
            out: dict[str, tuple[NodeId, ...]] = {}
            for name, seq in order.items():
                for f in seq:
                    if f not in self.groups:
                        raise InvalidArgumentError(f"order: {shown(f)} on {name} is not a fused node")
                out[name] = tuple(v for f in seq for v in self.groups[f])
            return out
        k = len(self)
        res: list[list[int]] = []
        for seq in order:
            row: list[int] = []
            for f in seq:
                if not isinstance(f, (int, np.integer)) or isinstance(f, bool) or not 0 <= f < k:
                    raise InvalidArgumentError(f"order: {shown(f)} is not a fused node position (0..{k - 1})")
                row.extend(self._members[int(f)])
            res.append(row)
        return res

    def expand_schedule(self, schedule: Schedule, problem: LatencyProblem | None = None) -> Schedule:
        """A schedule of the fused problem re-scored on the original problem: the expanded
        placement and order (:meth:`expand_order`), timed by the ASAP evaluator. Its makespan is
        at most the fused one (see the module docs); ``stats["fused_makespan"]`` keeps the latter.
        The status is ``"feasible"`` (an optimum of the fused problem need not be one of the
        original), the lower bound the original problem's.

        Parameters
        ----------
        schedule : Schedule
            On the fused problem (fused node ids).
        problem : LatencyProblem, optional
            The original problem; needed when the fusion was made from a graph.

        Returns
        -------
        Schedule
            On the original graph (a schedule without a placement is passed through).

        Raises
        ------
        InvalidArgumentError
            No original problem, one for another graph, or a schedule that is not of the fused
            problem.
        """
        base = problem if problem is not None else self.original_problem
        if base is None:
            raise InvalidArgumentError("problem: the fusion was made from a graph; pass the original LatencyProblem")
        if base.graph is not self.original and base.graph != self.original:
            raise InvalidArgumentError("problem: it is not a problem of the fused graph's original")
        if not isinstance(schedule, Schedule):
            raise InvalidArgumentError(f"schedule: expected a Schedule, got {shown(schedule)}")
        if schedule.objective is None:
            return schedule
        placement = self.expand(schedule.placement)
        assert isinstance(placement, dict)
        names = base.devices.names
        dev = [names.index(placement[v]) if isinstance(placement[v], str) else placement[v] for v in base.ids]
        order_ids = self.expand_order(schedule.order)
        assert isinstance(order_ids, dict)
        seq: list[list[int]] = [[] for _ in names]
        for name, ids in order_ids.items():
            seq[base.devices.index(name)] = [base.index[v] for v in ids]
        stats = {**schedule.stats, "fused_makespan": schedule.objective, "fused_nodes": len(self)}
        out = schedule_from(base, dev, seq, method=schedule.method, lower_bound=base.lower_bound(),
                            seed=schedule.seed, runtime_s=schedule.runtime_s, stats=stats,
                            notes=(*schedule.notes, f"planned on {len(self)} fused nodes; re-scored on the "
                                   f"{len(base)} original ones"))
        if schedule.semantics == "asap" and out.objective is not None and \
                out.objective > schedule.objective * (1 + TOL) + TOL:
            raise internal_error(f"fusion: the expanded plan ({out.objective:g}) is slower than the fused one "
                                 f"({schedule.objective:g})")
        return out
