"""The ``partition-lp`` bound for MTPP: every block's tensors at once, through the LP relaxation
of the set-partitioning form of the problem (column generation, Farley's bound).

Fix ``T``. A *feasible block* is a node set ``S`` that is nonempty, holds whole forced groups,
is convex (with two nodes it holds every node on a path between them: a block of a partition
with an acyclic quotient is) and costs ``f(S) <= T`` (work, every tensor in and out once, the
overflow, as the evaluator counts them). A partition of cost at most ``T`` is ``j <= k`` feasible
blocks covering every group once. For any weights ``pi`` (one per forced group, of any sign),
sum ``pi`` over the blocks of such a partition:

    ``sum_g pi_g = sum_blocks pi(S) <= j M`` with ``M >= max { pi(S) : S a feasible block }``,

so if ``sum_g pi_g > k M`` (``M > 0``), or ``sum_g pi_g > M`` (``M <= 0``), no partition of cost
at most ``T`` exists: the optimum is above ``T``. Feasible blocks at ``T' < T`` are feasible at
``T``, so the same ``pi`` and ``M`` refute every ``T' <= T``. This is the dual of the LP
relaxation of "cover the groups with the fewest feasible blocks" (Farley's bound for
column generation): the LP sees every block's own tensors, slack and convexity together,
which the per-tensor bounds (``crossing``, ``cover``) and the one-block bound (``block``) do not.

Soundness rests on ``M`` alone. With at most :data:`ENUMERATE_GROUPS` forced groups it is
exact: every feasible block is enumerated. Otherwise it comes from a MIP over a relaxation of
the feasible blocks (a binary per node, equal within a forced group; a continuous ``y[u] >=
|x[v] - x[u]|`` per producer ``u`` and consumer ``v``; reach variables ``p`` (down) and ``q``
(up) with ``x[v] >= p[v] + q[v] - 1`` for convexity; the overflow ``o >= (params + R - M) / B``,
or ``params <= M - R`` for a hard limit; ``w + io + o <= T``; ``sum x >= 1``) that looks only
for blocks of weight at least ``sum pi / k`` (less a margin): when it proves there is none,
``M`` is below that and ``T`` is refuted (a solver stopped early refutes it when its dual
bound, raised by the margin, is below ``sum pi / k``; else ``T`` stays undecided). Before
each MIP (up to :data:`SEARCH_GROUPS` groups) a tabu search looks for blocks above the floor
(columns, no proof), then an exact branch and bound runs for :data:`SEARCH_SECONDS`: it finds
a block or proves there is none, else the MIP runs (:mod:`stagecut.mtpp.pricing`, in Rust). The
weights ``pi`` come from a restricted master LP over the blocks found so far (by a local
search and by the MIP's solutions); wrong or missing blocks there only make ``pi`` worse,
never the bound wrong.

The bound is the largest ``T`` refuted by a search between a proven bound ``lo`` and a
partition's cost ``hi``: the first ``T`` a quarter of the way up (:data:`CLIMB`; the column
generation converges slowest near the LP's own limit, which is near ``hi`` when the plan is
good), the step doubled after each refutation up to a bisection. At a ``T`` where the
restricted master's value is at most ``k`` (a fractional cover by at most ``k`` feasible blocks
found), the LP cannot refute ``T`` and the search moves down at once; a ``T`` left undecided
by its share of the time limit (three quarters of the time left for the first ``T``, half for
the next, all of it for the last) counts as not refuted.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stagecut._mip import add, import_mip, new_model, solve
from stagecut.mtpp.cover import _bits, _Convex
from stagecut.mtpp.model import MtppProblem, forced_groups
from stagecut.mtpp.pricing import BlockSearch, SearchFirst

__all__ = ["PartitionBound", "partition_lp_bound"]

_log = logging.getLogger(__name__)

#: Relative margin (of the sum of the |weights|) added to the pricing MIP's bound ``M``.
_MARGIN = 1e-6
#: The share of the time left a tested ``T`` may use (but the first and the last).
_SHARE = 0.5
#: The first tested ``T``'s share: on the 100-node Barabasi-Albert graph at ``k = 8`` (seed 0) its
#: refutation took 291 s of the level's 540 s, and lower ``T`` are decided little sooner (on the
#: Erdos-Renyi graph, one 1% above the bound the level starts from was undecided after 150 s).
_FIRST_SHARE = 0.75
#: The smoothing of the weights the local search prices at (0: the master's own weights).
_SMOOTH = 0.5
#: The pricing MIP is tried early on the best weights when their estimated bound passes ``k (1 + _EARLY)``.
_EARLY = 1e-3


@dataclass(frozen=True)
class PartitionBound:
    """``bound`` (at least ``lo``), ``complete`` (no ``T`` tested was left undecided by the time
    limit), ``mips`` (pricing MIPs solved), ``lps`` (master LPs), ``columns`` (blocks found) and
    ``tested`` (the ``T`` values tried, with ``True`` where refuted)."""

    bound: float
    complete: bool
    mips: int = 0
    lps: int = 0
    columns: int = 0
    tested: tuple[tuple[float, bool], ...] = ()


class _Blocks:
    """Node sets as bit masks: their cost (as the evaluator counts it), convex closure, groups."""

    def __init__(self, problem: MtppProblem) -> None:
        g = problem.graph
        self.problem = problem
        self.n = n = len(g.nodes)
        grp = forced_groups(problem)
        reps = sorted(set(grp))
        self.index = {r: j for j, r in enumerate(reps)}
        self.group_of = [self.index[grp[i]] for i in range(n)]
        self.members: list[int] = [0] * len(reps)
        for i in range(n):
            self.members[self.group_of[i]] |= 1 << i
        self.work = [problem.work(i) for i in range(n)]
        self.params = [nd.memory for nd in g.nodes]
        self.comm = [nd.comm for nd in g.nodes]
        self.cons = [sum(1 << v for v in g.succ[u]) for u in range(n)]
        self.prods = [u for u in range(n) if g.succ[u] and self.comm[u] > 0]
        self.touch = [0] * n  # producers whose tensor a change of node i may make cross
        for u in self.prods:
            self.touch[u] |= 1 << u
            for v in g.succ[u]:
                self.touch[v] |= 1 << u
        self.nbr = [0] * n
        for u in range(n):
            for v in g.succ[u]:
                self.nbr[u] |= 1 << v
                self.nbr[v] |= 1 << u
        self.convex = _Convex(problem)
        # the same as arrays, for the searches (many candidate blocks at once)
        self.ngroups = len(reps)
        self.gmat = np.zeros((len(reps), n), dtype=bool)  # group x node
        self.gmat[self.group_of, np.arange(n)] = True
        # (0/1 matrices as float32: the products below go through BLAS, exact for counts below 2^24)
        self.same = self.gmat[self.group_of].astype(np.float32)  # node x node: same group
        desc = np.array([[self.convex.desc[v] >> j & 1 for j in range(n)] for v in range(n)], dtype=np.float32)
        self.desc, self.anc = desc, np.ascontiguousarray(desc.T)
        self.adj = np.array([[self.nbr[v] >> j & 1 for j in range(n)] for v in range(n)], dtype=np.float32)
        self.wvec = np.array(self.work)
        self.pvec = np.array(self.params)
        self.cmat = np.zeros((len(self.prods), n), dtype=np.float32)  # producer x consumer
        for r, u in enumerate(self.prods):
            self.cmat[r, list(g.succ[u])] = 1
        self.deg = self.cmat.sum(axis=1)
        self.pidx = np.array(self.prods, dtype=np.int64)
        self.cvec = np.array([self.comm[u] for u in self.prods])

    def mask_of(self, row: npt.NDArray[np.bool_]) -> int:
        return int.from_bytes(np.packbits(row, bitorder="little").tobytes(), "little")

    def row_of(self, mask: int) -> npt.NDArray[np.bool_]:
        return np.array([mask >> j & 1 for j in range(self.n)], dtype=bool)

    def close_rows(self, rows: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """The convex, group-closed closure of each row."""
        ri = rows.astype(np.float32)
        while True:
            below = (ri @ self.desc) > 0.5
            above = (ri @ self.anc) > 0.5
            new = rows | (below & above)
            new = (new.astype(np.float32) @ self.same) > 0.5
            if (new == rows).all():
                return rows
            rows, ri = new, new.astype(np.float32)

    def cost_rows(self, rows: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
        """The block cost of each row (work, tensors, overflow)."""
        work = rows @ self.wvec
        if len(self.prods):
            inside = rows.astype(np.float32) @ self.cmat.T
            own = rows[:, self.pidx]
            cross = np.where(own, inside < self.deg - 0.5, inside > 0.5)
            work = work + cross @ self.cvec
        p = self.problem
        if math.isfinite(p.memory):
            excess = rows @ self.pvec + p.reserved_memory - p.memory
            over = np.where(excess > 0, np.inf if p.bandwidth is None else excess / (p.bandwidth or 1.0), 0.0)
            work = work + over
        return np.asarray(work, dtype=float)

    def cost(self, mask: int) -> float:
        p = self.problem
        work = math.fsum(self.work[i] for i in _bits(mask))
        params = math.fsum(self.params[i] for i in _bits(mask))
        touched = 0
        for i in _bits(mask):
            touched |= self.touch[i]
        io = 0.0
        for u in _bits(touched):
            inside = bool(mask >> u & 1)
            c = self.cons[u]
            if (inside and c & ~mask) or (not inside and c & mask):
                io += self.comm[u]
        return work + io + p.overflow(params)

    def groups(self, mask: int) -> frozenset[int]:
        return frozenset(self.group_of[i] for i in _bits(mask))


class _Pricer:
    """The pricing MIP at one ``T``: ``max pi(S)`` over a relaxation of the feasible blocks."""

    def __init__(self, problem: MtppProblem, blocks: _Blocks, t: float, solver: str, threads: int | None,
                 seed: int | None, first: bool = False) -> None:
        self.problem, self.blocks, self.t = problem, blocks, t
        self.solver, self.threads, self.seed, self.first = solver, threads, seed, first

    def solve(self, pi: list[float], time_limit: float | None, gap: float | None = None,
              floor: float | None = None) -> tuple[float, list[int], bool]:
        """``(M, masks, solved to its end)``: ``M`` at least ``max pi(S)`` over the feasible blocks
        (``-inf`` when there is none), ``masks`` the node sets of the solutions found."""
        p, b, g = self.problem, self.blocks, self.problem.graph
        mip = import_mip()
        m = new_model("mtpp-partition-lp", solver=self.solver, gap=gap, threads=self.threads, seed=self.seed)
        n = b.n
        x = [m.add_var(var_type=mip.BINARY) for _ in range(n)]
        first: dict[int, int] = {}
        for i in range(n):
            j = first.setdefault(b.group_of[i], i)
            if j != i:
                add(m, x[i] == x[j])
        scale = self.t if self.t > 0 else 1.0
        y = {u: m.add_var(lb=0.0, ub=1.0) for u in b.prods}
        for u in b.prods:
            for v in g.succ[u]:
                add(m, y[u] >= x[v] - x[u])
                add(m, y[u] >= x[u] - x[v])
        pv = [m.add_var(lb=0.0, ub=1.0) for _ in range(n)]
        qv = [m.add_var(lb=0.0, ub=1.0) for _ in range(n)]
        for i in range(n):
            add(m, pv[i] >= x[i])
            add(m, qv[i] >= x[i])
            add(m, x[i] >= pv[i] + qv[i] - 1)
            for v in g.succ[i]:
                add(m, pv[v] >= pv[i])  # reached from the set
                add(m, qv[i] >= qv[v])  # reaching the set
        load = mip.xsum((b.work[i] / scale) * x[i] for i in range(n) if b.work[i]) + \
            mip.xsum((b.comm[u] / scale) * y[u] for u in b.prods)
        total_params = math.fsum(b.params)
        if math.isfinite(p.memory) and total_params + p.reserved_memory > p.memory:
            pscale = max(1.0, total_params)
            params = mip.xsum((b.params[i] / pscale) * x[i] for i in range(n) if b.params[i])
            if p.bandwidth is None:
                add(m, params <= (p.memory - p.reserved_memory) / pscale)
            else:
                o = m.add_var(lb=0.0)  # overflow over T
                add(m, o >= params * (pscale / (p.bandwidth * scale))
                    + (p.reserved_memory - p.memory) / (p.bandwidth * scale))
                load = load + o
        add(m, load <= self.t / scale)
        add(m, mip.xsum(x) >= 1)
        firsts = [int(i) for i in b.gmat.argmax(axis=1)]
        if floor is not None:  # (only blocks of weight at least floor: none proves M < floor)
            add(m, mip.xsum(pi[j] * x[i] for j, i in enumerate(firsts) if pi[j]) >= floor)
            if self.first:  # (any such block is a column: stop at the first, or prove there is none)
                m.max_solutions = 1
        m.objective = mip.xsum(-pi[j] * x[i] for j, i in enumerate(firsts) if pi[j])  # (a group's weight once)
        out = solve(m, time_limit=time_limit)
        masks = []
        if out.objective is not None:
            for s in range(max(1, m.num_solutions)):
                try:
                    vals = [v.xi(s) for v in x]
                except Exception:  # (a solver keeping one solution)
                    break
                if any(val is None for val in vals):
                    break
                masks.append(sum(1 << i for i, val in enumerate(vals) if val > 0.5))
            if not masks and all(v.x is not None for v in x):
                masks.append(sum(1 << i for i, v in enumerate(x) if v.x > 0.5))
        if out.status == "infeasible":
            return -math.inf, masks, True
        upper = -out.bound
        if upper == -math.inf:  # (a bound of +inf: the solver proved nothing)
            upper = math.inf
        return upper, masks, out.status == "optimal"


class _Enumerated:
    """The pricing problem solved by enumerating every feasible block (few groups): the same
    answer as :class:`_Pricer`, exactly, without a solver."""

    def __init__(self, blocks: _Blocks, t: float) -> None:
        self.blocks = blocks
        g = blocks.ngroups
        pick = ((np.arange(1, 2 ** g)[:, None] >> np.arange(g)) & 1).astype(bool)  # nonempty group sets
        rows = (pick.astype(np.int32) @ blocks.gmat) > 0
        rows = rows[(blocks.close_rows(rows) == rows).all(axis=1)]  # convex
        self.rows = rows[blocks.cost_rows(rows) <= t]
        self.firsts = blocks.gmat.argmax(axis=1)

    def solve(self, pi: list[float], time_limit: float | None = None, gap: float | None = None,
              floor: float | None = None) -> tuple[float, list[int], bool]:
        if not len(self.rows):
            return -math.inf, [], True
        pv = np.zeros(self.blocks.n)
        pv[self.firsts] = pi
        vals = self.rows @ pv
        order = np.argsort(-vals)[:10]
        masks = [self.blocks.mask_of(self.rows[i]) for i in order if vals[i] > 1 + 1e-9]
        return float(vals.max()), masks, True


#: Most forced groups for which the pricing enumerates every block instead of solving a MIP.
ENUMERATE_GROUPS = 12
#: Most forced groups for which the branch and bound over blocks (:mod:`stagecut.mtpp.pricing`)
#: may run before the pricing MIP.
SEARCH_GROUPS = 400
#: Seconds of that branch and bound before each pricing MIP (0: the MIP alone).
SEARCH_SECONDS = 0.5
#: Where the first ``T`` is tried, as a share of the way from ``lo`` to ``hi`` (0.5: a bisection).
#: On the 100-node Barabasi-Albert graph at ``k = 8`` (seed 0), from ``sdp``'s bound, a quarter of
#: the way was refuted in 291 s with HiGHS; with CBC the midpoint was still undecided after 150 s.
CLIMB = 0.25


class _Master:
    """The restricted master LP in its dual form: ``max sum pi`` with ``pi(S) <= 1`` for the
    blocks found, ``-cap <= pi <= cap``; built once per tested ``T``, a row added per new block
    (the solver re-optimises from its last basis)."""

    def __init__(self, ngroups: int, cap: float) -> None:
        self.ngroups, self.cap = ngroups, cap
        self.model: Any = None
        self.rows: set[frozenset[int]] = set()

    def reset(self, columns: list[frozenset[int]]) -> None:
        mip = import_mip()
        m = new_model("mtpp-partition-master", solver="cbc")
        m.sense = mip.MAXIMIZE
        self.pi = [m.add_var(lb=-self.cap, ub=self.cap) for _ in range(self.ngroups)]
        m.objective = mip.xsum(self.pi)
        self.model, self.rows = m, set()
        for col in columns:
            self.add(col)

    def add(self, col: frozenset[int]) -> bool:
        """Add ``pi(col) <= 1`` (``False``: it was there)."""
        if col in self.rows:
            return False
        mip = import_mip()
        self.rows.add(col)
        add(self.model, mip.xsum(self.pi[g] for g in col) <= 1.0)
        return True

    def solve(self, time_limit: float | None = None) -> tuple[float, list[float]] | None:
        out = solve(self.model, relax=True, time_limit=time_limit)
        if out.status != "optimal":
            return None
        return math.fsum(v.x for v in self.pi), [float(v.x) for v in self.pi]


def _search(blocks: _Blocks, pv: npt.NDArray[np.float64], t: float, start: npt.NDArray[np.bool_],
            patience: int = 1, moves: int = 40, far: bool = False) -> tuple[npt.NDArray[np.bool_], float]:
    """A local search from ``start`` for a block of largest weight (``pv`` per node) with
    ``f(S) <= t``: add a neighbouring group (any group with ``far``; with the
    convex closure: a block need not be connected) or drop one (when the rest stays convex),
    the move of most weight first (the cheaper of equal ones), up to ``patience`` moves in a
    row that gain nothing; the best block seen."""
    row = start
    val = float(row @ pv)
    best_row, best_val, lost = row, val, 0
    seen = {blocks.mask_of(row)}
    for _ in range(moves):
        near = ~row if far else (row.astype(np.float32) @ blocks.adj > 0.5) & ~row
        gs = np.unique(np.array(blocks.group_of)[near])
        ins = np.unique(np.array(blocks.group_of)[row])
        adds = blocks.close_rows(row[None] | blocks.gmat[gs]) if len(gs) else np.zeros((0, blocks.n), dtype=bool)
        drops = row[None] & ~blocks.gmat[ins] if len(ins) > 1 else np.zeros((0, blocks.n), dtype=bool)
        if len(drops):
            drops = drops[(blocks.close_rows(drops) == drops).all(axis=1)]
        cands = np.concatenate([adds, drops])
        if not len(cands):
            break
        vals = cands @ pv
        costs = blocks.cost_rows(cands)
        ok = costs <= t  # (a move of no gain too: the way to heavier groups may cross groups of weight 0)
        if not ok.any():
            break
        order = np.lexsort((costs, -vals))
        pick = -1
        for i in order:
            if ok[i] and blocks.mask_of(cands[i]) not in seen:
                pick = int(i)
                break
        if pick < 0:
            break
        lost = 0 if vals[pick] > val + 1e-12 else lost + 1
        if lost > patience:
            break
        row, val = cands[pick], float(vals[pick])
        seen.add(blocks.mask_of(row))
        if val > best_val + 1e-12:
            best_row, best_val = row, val
    return best_row, best_val


def _greedy(blocks: _Blocks, pi: list[float], t: float, starts: list[int], seeds: int = 8,
            patience: int = 1) -> list[int]:
    """Blocks with ``pi(S) > 1`` found by :func:`_search` from the groups of largest weight and
    from ``starts`` (blocks found before)."""
    gw = np.array(pi)
    pv = np.zeros(blocks.n)
    firsts = blocks.gmat.argmax(axis=1)
    pv[firsts] = gw  # (the group's weight on its first node)
    tops = [j for j in np.argsort(-gw)[:seeds] if gw[j] > 0]
    rows = [blocks.close_rows(blocks.gmat[[j]])[0] for j in tops] + [blocks.row_of(mk) for mk in starts]
    found = []
    for row in rows:
        if blocks.cost_rows(row[None])[0] > t:
            continue
        best, val = _search(blocks, pv, t, row, patience=patience)
        if val > 1 + 1e-9:
            found.append(blocks.mask_of(best))
    return found


def partition_lp_bound(problem: MtppProblem, *, lo: float, hi: float | None = None, time_limit: float | None = None,
                       solver: str = "cbc", threads: int | None = None, seed: int | None = 0, steps: int = 6,
                       start: list[list[int]] | None = None,
                       enumerate_up_to: int = ENUMERATE_GROUPS, search: float = SEARCH_SECONDS,
                       climb: float = CLIMB) -> PartitionBound:
    """The ``partition-lp`` bound (module docs): at least ``lo`` (a bound already proven),
    searched up to ``hi`` (a partition's cost; default the total cost of one block) with at most
    ``steps`` values of ``T`` within ``time_limit`` seconds; ``start``: node-position blocks (a
    plan's) to seed the columns; ``enumerate_up_to``: the most forced groups for which the
    pricing enumerates the blocks (above it: the MIP); ``search``: seconds of the branch and
    bound over blocks before each pricing MIP (0: the MIP alone); ``climb``: where the next
    ``T`` is tried, as a share of the interval between the best bound and the lowest ``T`` not
    refuted (0.5: a bisection; smaller, as the default :data:`CLIMB`: up from ``lo``, the share
    doubled after each refutation, at most a half).

    >>> from stagecut.graph import Graph
    >>> p = MtppProblem(Graph.chain([4.0, 4.0, 4.0, 4.0], comm=1.0), devices=2)
    >>> r = partition_lp_bound(p, lo=8.0, hi=9.0)    # the optimum is 9: no block of two costs < 9
    >>> 8.9 < r.bound <= 9.0
    True
    """
    k = problem.devices
    blocks = _Blocks(problem)
    ngroups = len(blocks.members)
    if k <= 0 or not math.isfinite(lo) or ngroups <= k:
        return PartitionBound(bound=lo, complete=True)
    if hi is None or not math.isfinite(hi):  # (only the search's upper end: any value is sound)
        total = blocks.cost((1 << blocks.n) - 1)
        hi = total if math.isfinite(total) else math.fsum(blocks.work) + 2 * math.fsum(blocks.comm)
    if not hi > lo:
        return PartitionBound(bound=lo, complete=True)
    deadline = None if time_limit is None or math.isinf(time_limit) else time.monotonic() + float(time_limit)
    pool: dict[int, float] = {}  # node mask -> cost

    def keep(mask: int) -> None:
        if mask and mask not in pool:
            pool[mask] = blocks.cost(mask)

    for j in range(ngroups):
        keep(blocks.convex.close(blocks.members[j]))
    for blk in start or []:
        keep(blocks.convex.close(sum(1 << i for i in blk)))
    master = _Master(ngroups, float(k))
    best, upper, complete = lo, hi, True
    mips = lps = 0
    tested: list[tuple[float, bool]] = []
    for step in range(steps):
        if deadline is not None and time.monotonic() >= deadline:
            complete = False
            break
        t = best + min(0.5, climb) * (upper - best)
        if not best < t < upper or upper - best <= 1e-4 * max(1.0, abs(upper)):
            break
        # (the first T gets three quarters of the time left, the next half, the last the rest: one
        # left undecided leaves time for lower ones)
        until = deadline
        if deadline is not None and step < steps - 1:
            until = time.monotonic() + (_FIRST_SHARE if step == 0 else _SHARE) * (deadline - time.monotonic())
        verdict, used_mips, used_lps = _test(problem, blocks, pool, master, t, until, solver, threads, seed, keep,
                                             blocks.ngroups <= enumerate_up_to, search)
        mips += used_mips
        lps += used_lps
        _log.debug("T %.6g: %s", t, {None: "undecided", True: "refuted", False: "not refuted"}[verdict])
        if verdict is None:
            complete = False
            upper = t  # (undecided: look lower)
        elif verdict:
            best, climb = t, 2 * climb  # (refuted: a longer step up)
        else:
            upper = t
        tested.append((t, bool(verdict)))
    return PartitionBound(bound=best, complete=complete, mips=mips, lps=lps, columns=len(pool), tested=tuple(tested))


def _test(problem: MtppProblem, blocks: _Blocks, pool: dict[int, float], master: _Master, t: float,
          deadline: float | None, solver: str, threads: int | None, seed: int | None,
          keep: Any, small: bool, search: float = 0.0) -> tuple[bool | None, int, int]:
    """Is ``T = t`` refuted? ``(True/False/None undecided, MIPs, LPs)``.

    Column generation on the master LP (built once, a row per block found): the blocks come
    from the local search, priced at the master's weights smoothed towards the best weights so
    far (Wentges: ``a center + (1 - a) pi``, the center being the weights of largest estimated
    Farley bound ``sum pi / max pi(S)``, the maximum over the blocks known); the pricing MIP runs
    when the search finds no block the master violates, or early, on the center, when its
    estimate passes ``k``. Only the pricing (the MIP, the search before it, or the enumeration)
    proves anything: a refutation is
    ``sum w > k M`` for the weights ``w`` it was given and its bound ``M``."""
    k = problem.devices
    pricer: _Pricer | _Enumerated | SearchFirst
    if small:
        pricer = _Enumerated(blocks, t)
    else:
        pricer = _Pricer(problem, blocks, t, solver, threads, seed, first=True)
        if search > 0 and blocks.ngroups <= SEARCH_GROUPS:
            pricer = SearchFirst(BlockSearch(problem, blocks.members, t), pricer, search)
    mips = lps = 0
    master.reset([blocks.groups(mk) for mk, c in pool.items() if c <= t])
    alpha = 0.0 if small else _SMOOTH
    center: npt.NDArray[np.float64] | None = None
    center_est, center_tried = -math.inf, True
    firsts = blocks.gmat.argmax(axis=1)

    def add_masks(masks: list[int]) -> int:
        fresh = 0
        for mk in masks:
            keep(mk)
            if pool[mk] <= t and master.add(blocks.groups(mk)):
                fresh += 1
        return fresh

    def heaviest(w: npt.NDArray[np.float64], masks: list[int]) -> float:
        """The largest ``w(S)`` over the known blocks of cost <= t and ``masks``."""
        pv = np.zeros(blocks.n)
        pv[firsts] = w
        vals = [float(blocks.row_of(mk) @ pv) for mk in masks]
        return max([*vals, *(math.fsum(w[g] for g in col) for col in master.rows)], default=-math.inf)

    def prove(w: npt.NDArray[np.float64], share: float = 1.0) -> tuple[bool | None, list[int]]:
        """The pricing MIP on ``w`` (``share`` of the time left): ``(True refuted / False not /
        None stopped early, masks)``."""
        nonlocal mips
        z = math.fsum(w)
        left = None if deadline is None else max(0.05, share * (deadline - time.monotonic()))
        # the MIP looks only for blocks of weight at least z / k (less a margin): when there is
        # none, T is refuted; a relative gap of a third of z / k - 1 is enough to find one
        mass = _MARGIN * math.fsum(abs(v) for v in w)
        wl = [float(v) for v in w]
        upper, masks, done = pricer.solve(wl, left, gap=min(0.05, max(1e-6, (z / k - 1) / 3)), floor=z / k - mass)
        mips += 1
        if upper == -math.inf and done:
            upper = z / k - mass  # no block reaches the floor: M is below it
        else:
            upper += mass  # (the solver's tolerances)
        if z > (k * upper if upper > 0 else upper):
            return True, masks
        return (False if done else None), [blocks.convex.close(mk) for mk in masks]

    while True:
        if deadline is not None and time.monotonic() >= deadline:
            return None, mips, lps
        sol = master.solve(None if deadline is None else max(0.05, deadline - time.monotonic()))
        lps += 1
        if sol is None:
            return None, mips, lps
        z, pil = sol
        if z <= k * (1 + 1e-9):
            return False, mips, lps  # a fractional cover by at most k feasible blocks
        pi = np.array(pil)
        _log.debug("T %.6g: LP %d value %.4f, %d blocks, %d MIPs, center estimate %.4f", t, lps, z,
                   len(master.rows), mips, center_est)

        def violated(mk: int, pi: npt.NDArray[np.float64] = pi) -> bool:
            col = blocks.groups(mk)  # (a row of the master may be violated within its tolerance)
            return col not in master.rows and math.fsum(pi[g] for g in col) > 1 + 1e-9

        new: list[int] = []
        fresh = 0
        if not small:
            tops = sorted((mk for mk, c in pool.items() if c <= t),
                          key=lambda mk: -math.fsum(pi[g] for g in blocks.groups(mk)))[:4]
            w = pi if center is None else alpha * center + (1 - alpha) * pi
            found = _greedy(blocks, list(w), t, tops)
            if center is not None:  # (its estimate with the blocks found since)
                center_est = math.fsum(center) / max(heaviest(center, []), 1e-12)
            est = math.fsum(w) / max(heaviest(w, found), 1e-12)  # (the Farley bound if the search were exact)
            if est > center_est:
                center, center_est, center_tried = w, est, False
            new = [mk for mk in found if violated(mk)]
            if not new and center is not None and w is not pi:  # (a mispricing: price pi itself)
                found = _greedy(blocks, pil, t, tops)
                new = [mk for mk in found if violated(mk)]
            if not new:  # (before a MIP: the search from every group, more patient)
                found = _greedy(blocks, pil, t, tops, seeds=blocks.ngroups, patience=3)
                new = [mk for mk in found if violated(mk)]
            if new and center is not None and not center_tried and center_est > k * (1 + _EARLY):
                center_tried = True  # the center may refute T already: one MIP on it
                verdict, masks = prove(center, share=0.1)
                if verdict:
                    return True, mips, lps
                fresh = add_masks(masks + [mk for mk in _greedy(blocks, list(center), t, masks) if violated(mk)])
        if (new and add_masks(new)) or fresh:  # (the center's blocks too: pi is stale once they are in)
            continue
        verdict, masks = prove(pi)
        if verdict:
            return True, mips, lps
        if not small:  # (the MIP's blocks improved by the search)
            masks = masks + _greedy(blocks, pil, t, masks, seeds=0)
        if not add_masks([mk for mk in masks if violated(mk)]):
            return None, mips, lps  # (the MIP stopped before it found a block or proved none)
