"""The units every MTPP solver of the core works on, and the flat arrays it takes.

A *unit* is a set of nodes that share a block in some optimal partition: a
:func:`~stagecut.mtpp.model.forced_groups` group (colocation classes, and classes on a cycle),
plus the work-free leaves folded into it (exact):

- a group with no work and no parameters whose external edges all come from one group (a
  sink) or all go to one group (a source) joins that group: moving it into its neighbour's
  block never raises a block cost (its tensors stop crossing, or cross where they already
  did) and never closes a cycle;
- a group with no edges at all, no work and no parameters (e.g. the ``num_batches_tracked``
  buffers of a ``torch.export`` graph) joins any group: it changes no cost and no quotient
  edge, and would otherwise double the number of ideals;
- parameters may move along when memory cannot bind (all parameters plus the reserved memory
  fit in fast memory: no block ever overflows or breaks the limit).

With ``relax_leaf_params``, work-free leaves that hold parameters fold as well and their
parameters are dropped (a relaxation: costs only fall), recorded in :attr:`Units.relaxed` for
the repair of :mod:`stagecut.mtpp.exact`.

Examples
--------
>>> from stagecut.graph import Graph, Node
>>> from stagecut.mtpp.model import MtppProblem
>>> g = Graph([Node("a", {"accelerator": 1.0}), Node("b", {"accelerator": 2.0}),
...            Node("leaf", {"accelerator": 0.0}), Node("lone", {"accelerator": 0.0})],
...           [("a", "b"), ("b", "leaf")])
>>> u = Units(MtppProblem(g, devices=2), fold_leaves=True)
>>> u.unit_of, u.members
([0, 1, 1, 0], [[0, 3], [1, 2]])
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import networkx as nx
import numpy as np
import numpy.typing as npt
from networkx.utils import UnionFind

from stagecut import _core
from stagecut._deadline import remaining
from stagecut.errors import StagecutWarning, user_stacklevel
from stagecut.mtpp.model import MtppProblem, forced_groups

__all__ = ["Units", "RelaxedLeaf", "CoreArrays", "components", "warn_cycle_groups"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
#: ``(work, params, t_cost, t_prod, t_cons_off, t_cons)``: per unit, then per tensor (its cost,
#: producing unit, and its consumers' units in CSR form).
CoreArrays = tuple[F64, F64, F64, I64, I64, I64]


@dataclass(frozen=True)
class RelaxedLeaf:
    """A work-free leaf group whose parameters the relaxation dropped: its representative,
    its nodes (positions), the neighbour group it hangs off and which side it is on."""

    group: int
    nodes: list[int]
    neighbour: int
    side: Literal["sink", "source"]


class _Folds:
    """The leaf folds decided on the groups before any fold (so one pass is exact)."""

    def __init__(self, problem: MtppProblem, groups: list[int], relax: bool, keep: Iterable[int]) -> None:
        g = problem.graph
        n = len(g.nodes)
        memory_free = math.fsum(nd.memory for nd in g.nodes) + problem.reserved_memory <= problem.memory
        self.holding = {groups[i] for i in range(n) if g.nodes[i].memory != 0 and not memory_free}
        heavy = {groups[i] for i in range(n) if problem.work(i) != 0}
        heavy |= self.holding if not relax else self.holding & set(keep)
        ins: dict[int, set[int]] = {}
        outs: dict[int, set[int]] = {}
        for u in range(n):
            for v in g.succ[u]:
                a, b = groups[u], groups[v]
                if a != b:
                    outs.setdefault(a, set()).add(b)
                    ins.setdefault(b, set()).add(a)
        #: leaf group -> (its one neighbour group, side)
        self.leaves: dict[int, tuple[int, Literal["sink", "source"]]] = {}
        #: isolated work-free, parameter-free groups
        self.isolated: list[int] = []
        for r in sorted(set(groups)):
            if r in heavy:
                continue
            i_r, o_r = ins.get(r, set()), outs.get(r, set())
            if not o_r and len(i_r) == 1:
                self.leaves[r] = (next(iter(i_r)), "sink")
            elif not i_r and len(o_r) == 1:
                self.leaves[r] = (next(iter(o_r)), "source")
            elif not i_r and not o_r and r not in self.holding:
                self.isolated.append(r)


class Units:
    """Nodes grouped into units (forced groups, exact leaf folding) and the flat arrays of the core.

    Parameters
    ----------
    problem : MtppProblem
    fold_leaves : bool
        Fold the free leaves and isolated free groups (exact); ``False``: one unit per group.
    relax_leaf_params : bool
        Also fold work-free leaves holding parameters, dropping their parameters (a relaxation),
        except the groups in ``keep``.
    keep : iterable of int
        Groups (representatives) never relaxed.
    groups : list of int, optional
        :func:`~stagecut.mtpp.model.forced_groups` of ``problem`` when already computed.

    Attributes
    ----------
    groups : list of int
        The forced group of each node position.
    relaxed : list of RelaxedLeaf
        The leaves whose parameters were dropped.
    unit_of : list of int
        The unit of each node position; units are numbered by their representative group.
    members : list of list of int
        Each unit's node positions in a topological order of the graph.
    rank : dict of int to int
        Each node position's rank in that topological order.
    arrays : CoreArrays
        What the core takes (see :data:`CoreArrays`).
    memory : tuple of (float, float, float or None)
        ``(fast memory, reserved memory, bandwidth)`` for the core.
    """

    def __init__(self, problem: MtppProblem, fold_leaves: bool, relax_leaf_params: bool = False,
                 keep: Iterable[int] = frozenset(), groups: Sequence[int] | None = None) -> None:
        g = problem.graph
        n = len(g.nodes)
        self.groups = list(groups) if groups is not None else forced_groups(problem)
        self.relaxed: list[RelaxedLeaf] = []
        sets = UnionFind(range(n))
        for i in range(n):
            sets.union(i, self.groups[i])
        folded: set[int] = set()
        if fold_leaves:
            folded = self._fold(problem, sets, relax_leaf_params, keep)
        # every unit holds exactly one group that did not move: it names the unit
        rep = {sets[grp]: grp for grp in set(self.groups) if grp not in folded}
        roots = sorted(rep.values())
        uid = {r: u for u, r in enumerate(roots)}
        self.unit_of = [uid[rep[sets[i]]] for i in range(n)]
        topo = g.topological_order()
        self.rank = {v: r for r, v in enumerate(topo)}
        self.members: list[list[int]] = [[] for _ in roots]
        for i in topo:
            self.members[self.unit_of[i]].append(i)
        self.arrays = self._arrays(problem)
        self.memory = (float(problem.memory), float(problem.reserved_memory),
                       None if problem.bandwidth is None else float(problem.bandwidth))
        self._instance: _core.MtppInstance | None = None

    def _fold(self, problem: MtppProblem, sets: UnionFind[int], relax: bool, keep: Iterable[int]) -> set[int]:
        """Merge the foldable groups into their neighbours; the groups that moved."""
        folds = _Folds(problem, self.groups, relax, keep)
        members: dict[int, list[int]] = {}
        for i, grp in enumerate(self.groups):
            members.setdefault(grp, []).append(i)
        moved: set[int] = set()
        for r, (nb, side) in folds.leaves.items():
            if r in folds.holding and nb in folds.leaves:
                continue  # two leaves of each other: relax neither (the repair needs nb placed)
            if nb in moved and sets[nb] == sets[r]:
                continue  # nb already moved into r: the pair is one unit, named by r
            sets.union(r, nb)
            moved.add(r)
            if r in folds.holding:
                self.relaxed.append(RelaxedLeaf(r, members[r], nb, side))
        if folds.isolated:
            anchors = [grp for grp in sorted(members) if grp not in folds.isolated and grp not in moved]
            anchor = anchors[0] if anchors else folds.isolated[0]
            for r in folds.isolated:
                if r != anchor:
                    sets.union(r, anchor)
                    moved.add(r)
        return moved

    def _arrays(self, problem: MtppProblem) -> CoreArrays:
        g = problem.graph
        dropped = {i for leaf in self.relaxed for i in leaf.nodes}
        work = np.zeros(len(self.members))
        params = np.zeros(len(self.members))
        for i, node in enumerate(g.nodes):
            work[self.unit_of[i]] += problem.work(i)
            if i not in dropped:
                params[self.unit_of[i]] += node.memory
        t_cost: list[float] = []
        t_prod: list[int] = []
        off, cons = [0], list[int]()
        for i, node in enumerate(g.nodes):
            if not g.succ[i]:
                continue
            t_cost.append(node.comm)
            t_prod.append(self.unit_of[i])
            cons.extend(self.unit_of[j] for j in g.succ[i])
            off.append(len(cons))
        return (work, params, np.asarray(t_cost, dtype=np.float64), np.asarray(t_prod, dtype=np.int64),
                np.asarray(off, dtype=np.int64), np.asarray(cons, dtype=np.int64))

    @property
    def instance(self) -> _core.MtppInstance:
        """The core's ``MtppInstance`` of these units (built and validated once, on first use,
        then shared by every call)."""
        if self._instance is None:
            self._instance = _core.MtppInstance(*self.arrays, *self.memory)
        return self._instance

    # The calls into the core (every ``_core.mtpp_*`` call of the package is one of these three, with
    # count_ideals);
    # inside a ``stagecut._deadline.deadline`` scope they stop at its deadline.
    def slice(self, k: int, method: str, **options: Any) -> dict[str, Any]:
        """``_core.mtpp_slice``: SliceGraph on one order or a search over orders (``options``:
        ``seed``, ``population``... see the core's stub)."""
        return dict(_core.mtpp_slice(self.instance, k, method, time_limit=remaining(), **options))

    def exact(self, k: int, max_ideals: int, upper_bound: float | None = None) -> dict[str, Any]:
        """``_core.mtpp_exact``: the ideal DP (``objective``, ``blocks`` of units, ``ideals``)."""
        return dict(_core.mtpp_exact(self.instance, k, max_ideals, upper_bound=upper_bound, time_limit=remaining()))

    def count_ideals(self, max_ideals: int) -> int:
        """``_core.count_ideals`` of the unit graph: its ideals, or
        :class:`~stagecut.errors.TooManyIdealsError` past ``max_ideals`` (at once when there are
        as many units)."""
        _, _, _, prod, off, cons = self.arrays
        src = np.repeat(prod, np.diff(off))
        keep = src != cons
        return int(_core.count_ideals(len(self.members), src[keep], cons[keep], max_ideals, time_limit=remaining()))

    def segment_io(self, order: I64, builder: str) -> F64:
        """``_core.mtpp_segment_io``: the flat ``n x n`` table of segment tensor costs of ``order``."""
        return _core.mtpp_segment_io(self.instance, order, builder)

    def expand(self, units: Iterable[int]) -> list[int]:
        """Original node positions of the units, each unit's members in topological order."""
        return [i for u in units for i in self.members[u]]


def components(units: Units) -> int:
    """Weakly connected parts of the unit graph (their ideals multiply).

    >>> from stagecut.graph import Graph
    >>> from stagecut.mtpp.model import MtppProblem
    >>> components(Units(MtppProblem(Graph.chain([1.0, 1.0]), devices=2), fold_leaves=False))
    1
    """
    _, _, _, t_prod, off, cons = units.arrays
    ug: nx.Graph[int] = nx.Graph()
    ug.add_nodes_from(range(len(units.members)))
    for t, p in enumerate(t_prod):
        ug.add_edges_from((int(p), int(c)) for c in cons[off[t]:off[t + 1]])
    return int(nx.number_connected_components(ug))


def warn_cycle_groups(problem: MtppProblem, groups: list[int]) -> None:
    """Warn (:class:`~stagecut.errors.StagecutWarning`) when colocation classes on a directed cycle
    were merged into one group (``groups``: :func:`forced_groups`)."""
    g = problem.graph
    classes = {nd.colocation if nd.colocation is not None else ("node", i) for i, nd in enumerate(g.nodes)}
    if len(set(groups)) < len(classes):
        sizes: dict[int, int] = {}
        for grp in groups:
            sizes[grp] = sizes.get(grp, 0) + 1
        big = max(sizes, key=sizes.__getitem__)
        warnings.warn(
            f"colocation classes on a directed cycle must share one block (acyclic quotient): "
            f"{len(classes)} classes make {len(set(groups))} groups, the largest holds {sizes[big]} nodes "
            f"(with node {g.nodes[big].id!r}); a backward pass wired in reverse does this. "
            "colocate=False treats the graph as a plain DAG",
            StagecutWarning,
            stacklevel=user_stacklevel(),
        )
