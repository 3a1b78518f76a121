"""Shared pieces of the Piper tests: random problems (hypothesis), a brute force over every
plan, and float comparison with infinities (``None`` objectives count as ``inf``)."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random

import numpy as np
from hypothesis import strategies as st

from stagecut import training as sp


def value(x: float | None) -> float:
    """An objective as a float (``None``, infeasible, is ``inf``)."""
    return math.inf if x is None else x


class _Draws:
    """Where a problem's random choices come from: hypothesis (``draw``) or a seeded
    ``random.Random`` (fixed problems, independent of hypothesis's draws)."""

    def __init__(self, draw=None, rng=None):
        self.draw, self.rng = draw, rng

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi)) if self.draw else self.rng.randint(lo, hi)

    def boolean(self) -> bool:
        return self.draw(st.booleans()) if self.draw else self.rng.random() < 0.5

    def pick(self, options):
        return self.draw(st.sampled_from(options)) if self.draw else self.rng.choice(options)

    def permutation(self, n: int) -> list:
        if self.draw:
            return list(self.draw(st.permutations(range(n))))
        perm = list(range(n))
        self.rng.shuffle(perm)
        return perm


def _problem(d: _Draws, max_nodes=5, max_opts=2, fast_path=False, max_t=2, hierarchical=True) -> sp.PiperProblem:
    n = d.integer(1, max_nodes)
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if d.boolean()]
    perm = d.permutation(n)  # node ids not in topological order
    preds = {v: [u for u, w in edges if w == v] for v in range(n)}
    succs = {v: [w for u, w in edges if u == v] for v in range(n)}
    num = [0.0, 1.0, 2.0, 3.0, 5.0, 8.0]
    nodes = []
    for v in range(n):
        tmpcs = {}
        for t in range(1, max_t + 1):
            if t > 1 and not d.boolean():
                continue
            k = d.integer(1, max_opts)
            base_fw = {perm[u]: d.pick(num) for u in preds[v]}
            base_bw = {perm[w]: d.pick(num) for w in succs[v]}
            params = d.pick(num)
            lst = []
            for i in range(k):
                fw = base_fw if fast_path else {u: d.pick(num) for u in base_fw}
                bw = base_bw if fast_path else {w: d.pick(num) for w in base_bw}
                # the first TMPC of a degree never recomputes (so recompute=False keeps one)
                lst.append(sp.TMPC(
                    id=f"c{i}", time=d.pick(num) + 1.0, params=params if fast_path else d.pick(num),
                    mem_a=d.pick(num), mem_b=d.pick(num), sync_fw=fw, sync_bw=bw,
                    recompute=i > 0 and d.boolean()))
            tmpcs[t] = tuple(lst)
        nodes.append(sp.PiperNode(perm[v], tmpcs))
    pedges = [sp.PiperEdge(perm[u], perm[w], d.pick(num)) for u, w in edges]
    server = d.pick([None, None, 1, 2, 3]) if hierarchical else None
    return sp.PiperProblem(
        nodes=tuple(nodes), edges=tuple(pedges), devices=d.integer(1, 4),
        memory=d.pick([6.0, 10.0, 16.0, 30.0, 100.0]), bandwidth=d.pick([1.0, 4.0]),
        batch=d.pick([1, 2, 3, 4, 6]), server_size=server,
        intra_bandwidth=None if server is None else d.pick([2.0, 10.0]))


@st.composite
def problems(draw, **kw):
    """Random Piper problems (see :func:`seeded_problem` for the options)."""
    return _problem(_Draws(draw=draw), **kw)


def seeded_problem(seed: int, **kw) -> sp.PiperProblem:
    """The same random problems from ``random.Random(seed)``: fixed cases that do not depend on
    hypothesis. ``max_nodes``, ``max_opts`` (TMPCs per node and degree), ``fast_path`` (equal
    parameters and sync bytes across a node's TMPCs: the incremental knapsack path), ``max_t``,
    ``hierarchical`` (draw a two-level network)."""
    return _problem(_Draws(rng=random.Random(seed)), **kw)


def without_recompute(prob: sp.PiperProblem) -> sp.PiperProblem:
    """The problem with every recomputation TMPC removed (what ``recompute=False`` must solve)."""
    nodes = tuple(dataclasses.replace(nd, tmpcs={t: tuple(c for c in cs if not c.is_recompute)
                                                 for t, cs in nd.tmpcs.items()})
                  for nd in prob.nodes)
    return prob.replace(nodes=nodes)


def brute_force(prob: sp.PiperProblem) -> dict:
    """``{(devices used, sum of d): best TPS}`` over every plan (all stage sequences, all d, t,
    all TMPC choices), each stage scored by the evaluator's stage cost."""
    ids = [nd.id for nd in prob.nodes]
    preds = {v: {e.source for e in prob.edges if e.target == v} for v in ids}
    node = {nd.id: nd for nd in prob.nodes}
    divs = [d for d in range(1, prob.batch + 1) if prob.batch % d == 0]
    memo: dict = {}

    def stage_best(S, t, d, y):
        key = (S, t, d, y)
        if key not in memo:
            best = math.inf
            lists = [[c.id for c in node[v].tmpcs[t]] for v in S]
            for pick in itertools.product(*lists):
                tps, mem, _ = sp.stage_cost(prob, S, d, t, dict(zip(S, pick)), y)
                if mem <= prob.memory and tps < best:
                    best = tps
            memo[key] = best
        return memo[key]

    out: dict = {}

    def rec(placed, stages):
        if len(placed) == len(ids):
            # assign (t, d) to every stage
            opts = []
            for S in stages:
                ts = [t for t in node[S[0]].tmpcs if all(t in node[v].tmpcs for v in S)
                      and (prob.server_size is None or prob.server_size % t == 0)]
                opts.append([(t, d) for t in ts for d in divs])
            for combo in itertools.product(*opts):
                dev = sum(t * d for t, d in combo)
                tot = sum(d for _, d in combo)
                if dev > prob.devices or tot > prob.batch:
                    continue
                worst, suffix = 0.0, tot
                for S, (t, d) in zip(stages, combo):
                    y = -(-suffix // d)
                    suffix -= d
                    worst = max(worst, stage_best(S, t, d, y))
                key = (dev, tot)
                out[key] = min(out.get(key, math.inf), worst)
            return
        rest = [v for v in ids if v not in placed]
        for r in range(1, len(rest) + 1):
            for S in itertools.combinations(rest, r):
                if all(preds[v] <= placed | set(S) for v in S):
                    rec(placed | set(S), stages + [S])

    rec(set(), [])
    return out


def bf_table(bf: dict, K: int, cols: int, exact: bool) -> np.ndarray:
    tab = np.full((K + 1, cols), math.inf)
    for k in range(K + 1):
        for s in range(cols):
            vals = [v for (dev, tot), v in bf.items() if dev <= k and (tot == s if exact else tot <= s)]
            tab[k, s] = min(vals, default=math.inf)
    return tab


def close(a: float | None, b: float | None) -> bool:
    a, b = value(a), value(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


