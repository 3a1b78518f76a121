"""Improve an MTPP plan by moving one forced group at a time to another block (a local search over
the nodes, the finer step after :mod:`~stagecut.mtpp.improve`'s re-splits of two blocks).

The blocks are kept in a pipeline order, so that every edge runs from a block to the same block or
a later one. A group may move to any block between the latest block of its producers and the
earliest block of its consumers: the quotient stays acyclic and every block keeps whole groups.
A move changes the costs of two blocks only (its old block and its new one), and the change is
computed from the tensors the group produces and consumes, as the evaluator charges them (a
tensor is paid by its producer's block when a consumer is elsewhere, and by every other block
holding a consumer). A move is taken when it makes the pair's larger cost smaller, or keeps it and
makes the smaller one smaller: each move makes the sorted block costs smaller, so the descent ends.

Local optima are left by *kicks* (an iterated local search): a few groups moved to random blocks of
their range, then moves from the kicked groups outwards (a moved group's neighbours are tried next,
so a kick costs time near it only, not a pass over the graph); the result is kept when its largest
block cost is no larger than the best so far (the search may walk along a plateau), undone
otherwise. The kicks are drawn from a seeded generator, so a run capped by ``kicks`` (not by time)
gives the same plan on any machine.

The costs are kept by sums and differences; the caller re-scores the plan with the evaluator.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence

from stagecut.errors import InvalidArgumentError
from stagecut.mtpp.model import MtppProblem, forced_groups

__all__ = ["MoveSearch"]

#: Relative tolerance of "smaller" between block costs.
_TOL = 1e-9
#: Groups moved by one kick.
KICK_SIZE = 5
#: Groups tried between two looks at the clock.
CHECK_EVERY = 64
#: Most passes over the groups in one descent (a safeguard against rounding; a descent ends far sooner).
MAX_PASSES = 10_000


class MoveSearch:
    """An ordered partition of ``problem`` (``blocks``: node positions, in pipeline order) and its
    block costs, with single-group moves (module docs)."""

    def __init__(self, problem: MtppProblem, blocks: Sequence[Sequence[int]]) -> None:
        g = problem.graph
        n = len(g.nodes)
        self.problem = problem
        grp = forced_groups(problem)
        members: dict[int, list[int]] = {}
        for i, r in enumerate(grp):
            members.setdefault(r, []).append(i)
        self.groups = list(members.values())
        group_of = [0] * n
        for x, ms in enumerate(self.groups):
            for i in ms:
                group_of[i] = x
        self.k = len(blocks)
        self.block = [0] * len(self.groups)  # block of each group
        for b, nodes in enumerate(blocks):
            for i in nodes:
                self.block[group_of[i]] = b
        self.work = [math.fsum(problem.work(i) for i in ms) for ms in self.groups]
        self.node_params = [float(nd.memory) for nd in g.nodes]
        self.params = [math.fsum(self.node_params[i] for i in ms) for ms in self.groups]
        # the tensors that can be paid: producer -> (comm, consumer positions); consumers by group
        self.comm = [float(g.nodes[i].comm) if g.nodes[i].comm > 0 and g.succ[i] else 0.0 for i in range(n)]
        self.consumers = [sorted(set(g.succ[i])) if self.comm[i] > 0 else [] for i in range(n)]
        self.group_of = group_of
        # per group: its tensors (produced) and the tensors it consumes, with how many of its nodes consume each
        # (produced: tensor -> how many of its consumers are in the group too, and move with it)
        self.produced = [{i: sum(1 for v in self.consumers[i] if v in inside) for i in ms if self.comm[i] > 0}
                         for ms, inside in ((ms, set(ms)) for ms in self.groups)]
        self.consumed: list[dict[int, int]] = []
        for ms in self.groups:
            inside = set(ms)
            use: dict[int, int] = {}
            for v in ms:
                for u in set(g.pred[v]):
                    if self.comm[u] > 0 and u not in inside:
                        use[u] = use.get(u, 0) + 1
            self.consumed.append(use)
        # neighbouring groups (for the range of blocks a group may move to)
        self.before = [sorted({group_of[u] for v in ms for u in g.pred[v]} - {x}) for x, ms in enumerate(self.groups)]
        self.after = [sorted({group_of[w] for v in ms for w in g.succ[v]} - {x}) for x, ms in enumerate(self.groups)]
        # counts[u][b]: consumers of tensor u in block b
        self.counts: list[dict[int, int]] = [{} for _ in range(n)]
        for u in range(n):
            for v in self.consumers[u]:
                b = self.block[group_of[v]]
                self.counts[u][b] = self.counts[u].get(b, 0) + 1
        self.size = [0] * self.k  # groups per block (an empty block costs nothing)
        self.block_work = [0.0] * self.k
        self.block_params = [0.0] * self.k
        for x, b in enumerate(self.block):
            self.block_work[b] += self.work[x]
            self.block_params[b] += self.params[x]
            self.size[b] += 1
        self.io = [0.0] * self.k
        for u in range(n):
            if self.comm[u] > 0:
                for b in self._payers(u):
                    self.io[b] += self.comm[u]
        self.cost = [self._cost(self.size[b], self.block_work[b], self.io[b], self.block_params[b], self._in(b))
                     for b in range(self.k)]

    def _cost(self, size: int, work: float, io: float, params: float, members: Callable[[], list[int]]) -> float:
        """A block's cost from its sums; ``members()``: its groups, whose parameters are summed again
        exactly (as the evaluator sums them) when the running sum is at a hard memory limit."""
        if not size:
            return 0.0
        p = self.problem
        if (p.bandwidth is None and math.isfinite(p.memory)
                and abs(params + p.reserved_memory - p.memory) <= _TOL * max(1.0, abs(p.memory))):
            params = math.fsum(self.node_params[i] for x in members() for i in self.groups[x])
        return work + io + p.overflow(params)

    def _in(self, b: int, plus: int = -1, minus: int = -1) -> Callable[[], list[int]]:
        """The groups of block ``b``, with group ``plus`` added and ``minus`` taken out (lazily)."""
        return lambda: [x for x, c in enumerate(self.block) if (c == b and x != minus) or x == plus]

    def _payers(self, u: int) -> list[int]:
        home = self.block[self.group_of[u]]
        others = [b for b, c in self.counts[u].items() if c > 0 and b != home]
        return [*others, home] if others else []

    def span(self, x: int) -> tuple[int, int]:
        """The blocks group ``x`` may move to: from its producers' latest to its consumers' earliest."""
        lo = max((self.block[y] for y in self.before[x]), default=0)
        hi = min((self.block[y] for y in self.after[x]), default=self.k - 1)
        return lo, hi

    def _io_change(self, x: int, a: int, b: int) -> tuple[float, float]:
        """The change of blocks ``a`` and ``b``'s tensor costs when group ``x`` moves from ``a`` to ``b``."""
        da = db = 0.0
        for u, moving, own in [*((u, m, True) for u, m in self.produced[x].items()),
                               *((u, m, False) for u, m in self.consumed[x].items())]:
            deg = len(self.consumers[u])
            cnt = self.counts[u]
            # the group's own tensor: its producer moves, with the consumers inside the group
            home_old, home_new = (a, b) if own else (self.block[self.group_of[u]],) * 2
            ca_old, cb_old = cnt.get(a, 0), cnt.get(b, 0)
            ca_new, cb_new = ca_old - moving, cb_old + moving
            c = self.comm[u]
            da += c * (_pays(a, home_new, ca_new, deg) - _pays(a, home_old, ca_old, deg))
            db += c * (_pays(b, home_new, cb_new, deg) - _pays(b, home_old, cb_old, deg))
        return da, db

    def trial(self, x: int, b: int) -> tuple[float, float]:
        """The new costs of ``x``'s block and of block ``b`` if group ``x`` moved to ``b``."""
        a = self.block[x]
        da, db = self._io_change(x, a, b)
        w, m = self.work[x], self.params[x]
        return (self._cost(self.size[a] - 1, self.block_work[a] - w, self.io[a] + da, self.block_params[a] - m,
                           self._in(a, minus=x)),
                self._cost(self.size[b] + 1, self.block_work[b] + w, self.io[b] + db, self.block_params[b] + m,
                           self._in(b, plus=x)))

    def move(self, x: int, b: int) -> None:
        """Move group ``x`` to block ``b`` (within :meth:`span`)."""
        a = self.block[x]
        da, db = self._io_change(x, a, b)
        w, m = self.work[x], self.params[x]
        self.block_work[a] -= w
        self.block_work[b] += w
        self.block_params[a] -= m
        self.block_params[b] += m
        self.io[a] += da
        self.io[b] += db
        for u, moving in [*self.consumed[x].items(), *self.produced[x].items()]:
            if moving:
                cnt = self.counts[u]
                cnt[a] -= moving
                cnt[b] = cnt.get(b, 0) + moving
        self.block[x] = b
        self.size[a] -= 1
        self.size[b] += 1
        self.cost[a] = self._cost(self.size[a], self.block_work[a], self.io[a], self.block_params[a], self._in(a))
        self.cost[b] = self._cost(self.size[b], self.block_work[b], self.io[b], self.block_params[b], self._in(b))

    def best_move(self, x: int) -> int | None:
        """The block that improves the pair most when group ``x`` moves there (module docs), or ``None``."""
        a = self.block[x]
        lo, hi = self.span(x)
        best: tuple[float, float] | None = None
        where = None
        for b in range(lo, hi + 1):
            if b == a:
                continue
            na, nb = self.trial(x, b)
            old = (max(self.cost[a], self.cost[b]), min(self.cost[a], self.cost[b]))
            new = (max(na, nb), min(na, nb))
            if _smaller(new, old) and (best is None or new < best):
                best, where = new, b
        return where

    def descend(self, rng: random.Random, deadline: float = math.inf,
                undo: list[tuple[int, int]] | None = None) -> tuple[int, bool]:
        """Moves until none improves the plan (or the deadline): ``(moves, stopped by the deadline)``;
        each move is logged in ``undo`` as ``(group, block it left)``."""
        moves = 0
        todo = list(range(len(self.groups)))
        for _ in range(MAX_PASSES):
            rng.shuffle(todo)
            moved = False
            for j, x in enumerate(todo):
                if j % CHECK_EVERY == CHECK_EVERY - 1 and time.monotonic() >= deadline:
                    return moves, True
                b = self.best_move(x)
                if b is not None:
                    if undo is not None:
                        undo.append((x, self.block[x]))
                    self.move(x, b)
                    moves += 1
                    moved = True
            if not moved:
                return moves, False
            if time.monotonic() >= deadline:
                return moves, True
        return moves, False  # (a safeguard: each pass makes the sorted costs smaller, so passes end)

    def settle(self, seeds: list[int], deadline: float, undo: list[tuple[int, int]]) -> tuple[int, bool]:
        """Moves from the groups ``seeds`` outwards (a moved group's neighbours are tried next), until
        none of the groups tried moves: the quick descent after a kick (module docs)."""
        todo = list(dict.fromkeys(seeds))
        queued = set(todo)
        moves = tried = 0
        while todo:
            tried += 1
            if tried % CHECK_EVERY == 0 and time.monotonic() >= deadline:
                return moves, True
            x = todo.pop()
            queued.discard(x)
            b = self.best_move(x)
            if b is None:
                continue
            undo.append((x, self.block[x]))
            self.move(x, b)
            moves += 1
            for y in (x, *self.before[x], *self.after[x]):
                if y not in queued:
                    queued.add(y)
                    todo.append(y)
        return moves, False

    def blocks(self) -> list[list[int]]:
        """The nonempty blocks (node positions), in pipeline order."""
        out: list[list[int]] = [[] for _ in range(self.k)]
        for x, b in enumerate(self.block):
            out[b].extend(self.groups[x])
        return [sorted(b) for b in out if b]

    def search(self, *, seed: int, kicks: int | None, deadline: float = math.inf,
               floor: float = 0.0) -> dict[str, int | bool]:
        """The descent, then up to ``kicks`` kicks (``None``: until ``deadline``, which must then be
        finite), ending at the cheapest plan found (module docs); none once the plan's cost is down
        to ``floor`` (a lower bound) or no group can move. Returns counts for the plan's stats."""
        if kicks is None and math.isinf(deadline):
            raise InvalidArgumentError("kicks: None (kick until the deadline) needs a finite deadline")
        rng = random.Random(seed)
        moves, timed_out = self.descend(rng, deadline)
        best = max(self.cost)
        done = kept = 0
        while not timed_out and (kicks is None or done < kicks) and best > floor * (1 + 1e-12):
            if time.monotonic() >= deadline:
                timed_out = True
                break
            done += 1
            undo: list[tuple[int, int]] = []
            for _ in range(KICK_SIZE):
                x = rng.randrange(len(self.groups))
                lo, hi = self.span(x)
                if hi > lo:
                    b = rng.randint(lo, hi)
                    if b != self.block[x]:
                        undo.append((x, self.block[x]))
                        self.move(x, b)
            if not undo and not any(self.span(x)[1] > self.span(x)[0] for x in range(len(self.groups))):
                break  # no group can move: no kick can change the plan
            before = len(undo)
            kicked = [x for x, _ in undo]
            made, timed_out = self.settle([y for x in kicked for y in (x, *self.before[x], *self.after[x])],
                                          deadline, undo)
            now = max(self.cost)
            if now <= best:  # (a plateau too: the search may walk along it)
                best = now
                kept += 1
                moves += made + before
            else:
                for x, b in reversed(undo):
                    self.move(x, b)
        return {"moves": moves, "kicks": done, "kicks_kept": kept, "time_limit_reached": timed_out}


def _pays(block: int, home: int, consumers_there: int, consumers: int) -> bool:
    """Does ``block`` pay a tensor produced in ``home`` with ``consumers_there`` of its ``consumers`` in it?"""
    if block == home:
        return consumers_there < consumers
    return consumers_there > 0


def _smaller(new: tuple[float, float], old: tuple[float, float]) -> bool:
    if new[0] < old[0] * (1 - _TOL):
        return True
    return new[0] <= old[0] and new[1] < old[1] * (1 - _TOL)
