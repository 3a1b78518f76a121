"""The DP machinery of :mod:`stagecut.throughput.replication`: the unit DAG, its ideals, the
stages' loads and the chain of stages inside a block.

The hierarchical DP asks for the best chain of stages from ideal ``lo`` to ideal ``hi`` for
every pair; a stage's load depends on its block only through the crossings that leave the
block. :meth:`_Model.chain` therefore takes the *open* chain from ``lo`` (block: everything
after ``lo``) as a base and recomputes only the ideals ``J`` whose stages could see the
difference: those with a neighbour of ``J \\ lo`` outside ``lo`` and ``hi``. Every other row
and choice is the base's, bit for bit (same candidates, same order, same floats), so the plan
is the one the plain DP finds. Stage loads are cached by the stage and the part of the block
they depend on.
"""

from __future__ import annotations

import math
from collections import ChainMap
from collections.abc import MutableMapping

import networkx as nx

from stagecut.colocation import ColocationClasses, Units, _class_edges
from stagecut.errors import InvalidArgumentError, TooManyIdealsError
from stagecut.graph import ACCELERATOR, Graph

#: The chains of ideals the DPs search: every one of the class DAG, or PipeDream's path's prefixes.
ALONG = ("ideals", "pipedream")

#: A chain's tables: ideal -> best bottleneck per budget, and (ideal, budget) -> (previous ideal, replicas).
Rows = dict[int, list[float]]
Choices = MutableMapping[tuple[int, int], tuple[int, int]]


def _class_units(graph: Graph) -> tuple[list[list[int]], list[tuple[int, int]]]:
    """The forward class DAG without folding (a free leaf's parameters matter to the sync):
    colocation classes contracted, cycles of classes fused; units numbered by first node."""
    classes = ColocationClasses(graph)
    cg: nx.DiGraph = nx.DiGraph()
    cg.add_nodes_from(classes.key)
    cedges = _class_edges(graph, classes.key)
    cg.add_edges_from(cedges)
    comp = {x: c for c, scc in enumerate(nx.strongly_connected_components(cg)) for x in scc}
    first: dict[int, int] = {}
    for i in range(len(graph)):
        first.setdefault(comp[classes.key[i]], len(first))
    members: list[list[int]] = [[] for _ in first]
    for i in range(len(graph)):
        members[first[comp[classes.key[i]]]].append(i)
    edges = sorted({(first[comp[a]], first[comp[b]]) for a, b in cedges if comp[a] != comp[b]})
    return members, edges


def _units(graph: Graph, along: str, memory: float) -> tuple[list[list[int]], list[tuple[int, int]]]:
    if along == "ideals":
        return _class_units(graph)
    if along == "pipedream":
        from stagecut.throughput.pipedream import path_groups

        units = Units(graph, memory)  # as pipedream() builds it
        groups = [sorted(i for u in grp for i in units.members[u]) for grp in path_groups(units)]
        return groups, [(k, k + 1) for k in range(len(groups) - 1)]
    raise InvalidArgumentError(f"along must be one of {ALONG}, got {along!r}")


class _Model:
    """The graph as bitmasks over node positions, and the ideals of its unit DAG (by size)."""

    def __init__(self, graph: Graph, along: str, weights: list[float], max_ideals: int, memory: float) -> None:
        members, edges = _units(graph, along, memory)
        self.time = [nd.time(ACCELERATOR) if nd.supports(ACCELERATOR) else math.inf for nd in graph.nodes]
        self.mem = [nd.memory for nd in graph.nodes]
        self.w = weights
        self.producers = [(1 << i, sum(1 << c for c in graph.succ[i]), nd.comm)
                          for i, nd in enumerate(graph.nodes) if nd.comm and graph.succ[i]]
        umask = [sum(1 << i for i in m) for m in members]
        need = [0] * len(members)
        for a, b in edges:
            need[b] |= umask[a]
        seen, frontier = {0}, [0]
        while frontier:
            nxt = []
            for ideal in frontier:
                for u, m in enumerate(umask):
                    if not ideal & m and need[u] & ~ideal == 0 and (ideal | m) not in seen:
                        seen.add(ideal | m)
                        nxt.append(ideal | m)
                        if len(seen) > max_ideals:
                            raise TooManyIdealsError(
                                f"the graph has more than max_ideals={max_ideals} ideals; raise max_ideals "
                                "or use along='pipedream' (PipeDream's path: one ideal per path node)")
            frontier = nxt
        self.ideals = sorted(seen, key=lambda x: (x.bit_count(), x))
        self.full = (1 << len(graph)) - 1
        self._parts: dict[int, tuple[bool, list[float], float, float, list[tuple[int, float]],
                                     list[tuple[int, float]], int]] = {}
        self._loads: dict[tuple[int, int, float, float], tuple[float, float, float] | None] = {}
        self.adjacent = [sum(1 << c for c in graph.succ[i]) | sum(1 << p for p in graph.pred[i])
                         for i in range(len(graph))]
        self._near: dict[int, int] = {}
        self._per_r: dict[tuple[float, float, int, int, float, float], list[float]] = {}
        self._compute: dict[int, float] = {}

    def near(self, x: int) -> int:
        """The nodes adjacent to a node of ``x`` (a bitmask)."""
        got = self._near.get(x)
        if got is None:
            got, rest = 0, x
            while rest:
                low = rest & -rest
                got |= self.adjacent[low.bit_length() - 1]
                rest ^= low
            self._near[x] = got
        return got

    def stage(self, s: int, u: int, ratio: float, cap: float) -> tuple[float, float, float] | None:
        """(compute + comm at the link's cost, parameters) of the stage ``s`` in block ``u``
        (bitmasks), and its memory; ``None`` when it does not fit or an accelerator cannot run it."""
        if s not in self._parts:
            pos = [i for i in range(s.bit_length()) if s >> i & 1]
            mem = math.fsum(self.mem[i] for i in pos)
            work = [self.time[i] for i in pos]
            sends = [(succ, comm) for bit, succ, comm in self.producers if s & bit and succ & ~s]
            gets = [(bit, comm) for bit, succ, comm in self.producers if not s & bit and succ & s]
            fits = mem <= cap and math.inf not in work
            seen = 0  # the nodes whose place (in the block or not) the load depends on
            for succ, _ in sends:
                seen |= succ
            for bit, _ in gets:
                seen |= bit
            self._parts[s] = (fits, work, math.fsum(self.w[i] for i in pos), mem, sends, gets, seen)
        fits, work, par, mem, sends, gets, seen = self._parts[s]
        if not fits:
            return None
        key = (s, u & seen, ratio, cap)
        if key not in self._loads:
            terms = work + [comm * ratio if succ & ~u else comm for succ, comm in sends]
            terms += [comm if u & bit else comm * ratio for bit, comm in gets]
            self._loads[key] = (math.fsum(terms), par, mem)
        return self._loads[key]

    def loads(self, got: tuple[float, float, float], budget: int, m: int, b_in: float,
              b_out: float) -> list[float]:
        """A stage's load on ``1..budget`` replicas in each of ``m`` servers (``got``: :meth:`stage`'s)."""
        key = (got[0], got[1], budget, m, b_in, b_out)
        out = self._per_r.get(key)
        if out is None:
            work, par = got[0], got[1]
            out = [work / (r * m) + 4 * (r - 1) * par / (r * b_in) + 4 * (m - 1) * par / (m * b_out)
                   for r in range(1, budget + 1)]
            self._per_r[key] = out
        return out

    def compute(self, x: int) -> float:
        """The accelerator time of the nodes of ``x`` (a bitmask)."""
        got = self._compute.get(x)
        if got is None:
            got = self._compute[x] = math.fsum(self.time[i] for i in range(x.bit_length()) if x >> i & 1)
        return got

    def chain(self, lo: int, hi: int, budget: int, ratio: float, cap: float, m: int, b_in: float,
              b_out: float, base: tuple[Rows, Choices] | None = None) -> tuple[Rows, Choices]:
        """The best chains of stages from ideal ``lo`` to every ideal up to ``hi`` within block
        ``hi & ~lo`` replicated on ``m`` servers, for every budget ``0..budget`` of accelerators:
        the best bottlenecks (ideals with none finite left out) and the choices ((ideal, budget)
        -> (previous ideal, replicas)). ``base``: this method's answer for ``lo`` to ``self.full``
        with the same other arguments, whose rows are reused where the block makes no difference."""
        inside = [x for x in self.ideals if x & lo == lo and x & ~hi == 0]
        best: Rows = {lo: [0.0] * (budget + 1)}
        arg: dict[tuple[int, int], tuple[int, int]] = {}
        u = hi & ~lo
        for j in inside[1:]:
            if base is not None and self.near(j & ~lo) & ~(lo | hi) == 0:
                if j in base[0]:  # no stage inside j sees a node outside lo and hi: the open chain's row
                    best[j] = base[0][j]
                continue
            row = [math.inf] * (budget + 1)
            for i in inside:
                if i == j or i & ~j or i not in best:
                    continue
                got = self.stage(j & ~i, u, ratio, cap)
                if got is None:
                    continue
                before = best[i]
                for r, load in enumerate(self.loads(got, budget, m, b_in, b_out), 1):
                    for d in range(r, budget + 1):
                        val = before[d - r] if before[d - r] > load else load  # max(), without the call
                        if val < row[d]:
                            row[d], arg[(j, d)] = val, (i, r)
            if row[budget] < math.inf:
                best[j] = row
        return best, (arg if base is None else ChainMap(arg, base[1]))

    def unwind(self, arg: Choices, lo: int, hi: int,
               budget: int) -> list[tuple[int, int]]:
        """The stages (bitmask, replicas) of a chain found by :meth:`chain`, in pipeline order."""
        out = []
        while hi != lo:
            i, r = arg[(hi, budget)]
            out.append((hi & ~i, r))
            hi, budget = i, budget - r
        return out[::-1]
