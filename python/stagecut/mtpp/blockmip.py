"""The ``block`` bound for MTPP: the block that pays the fewest tensors must still be nearly full.

Take a partition of cost ``T`` into ``j <= k`` blocks, and ``B*`` the block whose tensors cost
least (``io(B*) = i*``). Every block costs at least its work plus its tensors (the overflow is
not negative), so every other block holds work at most ``T - i*``, and

- ``w(B*) >= W - (k - 1) (T - i*)`` (the rest of the work is in the other ``j - 1 <= k - 1``
  blocks),
- ``w(B*) + i* <= T``, and ``i* <= T - W / k`` (the tensors of the ``j`` blocks sum to at least
  ``j i*``, and ``j T >= W + j i*``).

So some node set ``S`` (whole forced groups) has ``w(S) - (k - 1) io(S) >= W - (k - 1) T`` with
``w(S) + io(S) <= T`` and ``io(S) <= T - W / k``, ``io`` its tensors in and out (each once,
as the evaluator counts them). A ``T`` for which a MIP proves that no such set exists (the
dual bound of ``min (k - 1) io(S) - w(S)`` above ``(k - 1) T - W``) is below every partition's
cost; for ``T`` at least the optimum the optimal partition's ``B*`` is such a set. The tests
only get harder as ``T`` falls, so one solve at ``hi`` refutes every ``T`` up to
``(W + L) / (k - 1)`` (``L`` its dual bound), and a bisection between the best bound known and
``hi`` refines it; the answer is the largest ``T`` refuted (rounded down). The set is not
empty (a block is not); where ``W - (k - 1) T <= 0`` it need hold little work, but still pay few
tensors against it. The bound helps when the optimum is near the average ``W / k``, as at
``k = 8`` on 100-node graphs.

The MIP: a binary per node (equal within a forced group), a continuous ``y[u] >= |x[v] -
x[u]|`` per producer ``u`` and consumer ``v`` (its tensor paid once when it crosses ``S``'s
boundary).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from stagecut._mip import add, import_mip, new_model, solve
from stagecut.mtpp.model import MtppProblem, forced_groups

__all__ = ["BlockBound", "block_bound"]

#: Relative margin (of the total work and tensors) a dual bound must clear to refute a ``T``.
_MARGIN = 1e-7


@dataclass(frozen=True)
class BlockBound:
    """``bound`` (at least ``lo``), ``complete`` (every MIP solved to its end), ``solves``, and
    ``rows``/``cols`` of the last MIP."""

    bound: float
    complete: bool
    solves: int
    rows: int = 0
    cols: int = 0


class _Test:
    """The MIP of one ``T`` (built anew each time: two right-hand sides change)."""

    def __init__(self, problem: MtppProblem, solver: str, threads: int | None, seed: int | None) -> None:
        self.problem = problem
        self.solver, self.threads, self.seed = solver, threads, seed
        g = problem.graph
        self.work = [problem.work(i) for i in range(len(g.nodes))]
        self.total = math.fsum(self.work)
        self.prods = [u for u in range(len(g.nodes)) if g.succ[u] and g.nodes[u].comm > 0]
        self.scale = self.total + (problem.devices - 1) * math.fsum(g.nodes[u].comm for u in self.prods)
        self.rows = self.cols = 0

    def least(self, t: float, time_limit: float | None) -> tuple[float, bool]:
        """``(dual bound of min (k - 1) io(S) - w(S), solved to its end)`` at ``T = t``."""
        p, g, k = self.problem, self.problem.graph, self.problem.devices
        mip = import_mip()
        m = new_model("mtpp-block", solver=self.solver, threads=self.threads, seed=self.seed)
        x = [m.add_var(var_type=mip.BINARY) for _ in g.nodes]
        y = {u: m.add_var(lb=0.0, ub=1.0) for u in self.prods}
        grp = forced_groups(p)
        first: dict[int, int] = {}
        for i, r in enumerate(grp):
            if first.setdefault(r, i) != i:
                add(m, x[i] == x[first[r]])
        for u in self.prods:
            for v in g.succ[u]:
                add(m, y[u] >= x[v] - x[u])
                add(m, y[u] >= x[u] - x[v])
        io = mip.xsum(g.nodes[u].comm * y[u] for u in self.prods)
        w = mip.xsum(self.work[i] * x[i] for i in range(len(x)))
        add(m, w + io <= t)
        add(m, io <= t - self.total / k)
        add(m, mip.xsum(x) >= 1)  # (a block is not empty)
        m.objective = (k - 1) * io - w
        out = solve(m, time_limit=time_limit)
        self.rows, self.cols = out.rows, out.cols
        return out.bound, out.status in ("optimal", "infeasible")

    def cap(self, bound: float) -> float:
        """The largest ``T`` a dual bound ``bound`` at ``hi`` refutes (every ``T`` below it)."""
        k = self.problem.devices
        return (self.total + bound - _MARGIN * self.scale) / (k - 1)


def block_bound(problem: MtppProblem, *, lo: float, hi: float | None = None, time_limit: float | None = None,
                solver: str = "cbc", threads: int | None = None, seed: int | None = 0, steps: int = 8) -> BlockBound:
    """The ``block`` bound (module docs): at least ``lo`` (a bound already proven), searched up to
    ``hi`` (a partition's cost; default the total work) with at most ``1 + steps`` MIPs within
    ``time_limit`` seconds (each MIP stopped early gives its dual bound: still sound,
    ``complete=False``).

    >>> from stagecut.graph import Graph
    >>> from stagecut.mtpp.model import MtppProblem
    >>> p = MtppProblem(Graph.chain([4.0, 4.0, 4.0, 4.0], comm=1.0), devices=2)
    >>> r = block_bound(p, lo=8.0)     # the optimum is 9: two blocks of work 8, one tensor each
    >>> 8.9 < r.bound <= 9.0, r.complete
    (True, True)
    """
    k = problem.devices
    test = _Test(problem, solver, threads, seed)
    if k <= 1 or not math.isfinite(lo):
        return BlockBound(bound=lo, complete=True, solves=0)
    hi = test.total if hi is None else hi  # (the search's upper end: any value is sound)
    if hi <= lo:
        return BlockBound(bound=lo, complete=True, solves=0)
    deadline = None if time_limit is None or math.isinf(time_limit) else time.monotonic() + float(time_limit)
    complete, solves = True, 0

    def left(share: float) -> float | None:
        return None if deadline is None else max(0.05, (deadline - time.monotonic()) * share)

    # the first solve at the average over k - 1 blocks (below it a block must hold work: the
    # tests are easier to decide) unless the search starts above it; it gives most of the bound
    first = min(hi, test.total / (k - 1)) if lo < test.total / (k - 1) else hi
    bound, done = test.least(first, left(0.8))
    solves += 1
    complete &= done
    best = lo
    if bound > -math.inf:
        best = max(best, min(first, test.cap(bound)))
    upper = hi if best >= first else first
    for i in range(steps):
        if deadline is not None and time.monotonic() >= deadline:
            complete = False
            break
        t = 0.5 * (best + upper)
        if not best < t < upper or upper - best <= 1e-4 * max(1.0, abs(upper)):
            break
        bound, done = test.least(t, left(1 / (steps - i)))
        solves += 1
        complete &= done
        if bound > (k - 1) * t - test.total + _MARGIN * test.scale:
            best = t  # refuted: every partition costs more than t
        else:
            upper = t
    return BlockBound(bound=best, complete=complete, solves=solves, rows=test.rows, cols=test.cols)
