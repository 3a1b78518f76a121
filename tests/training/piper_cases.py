"""Shared pieces of the Piper tests: random problems (hypothesis), a brute force over every
plan, and float comparison with infinities (``None`` objectives count as ``inf``)."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import strategies as st

from stagecut import training as sp


def value(x: float | None) -> float:
    """An objective as a float (``None``, infeasible, is ``inf``)."""
    return math.inf if x is None else x




@st.composite
def problems(draw, max_nodes=5, max_opts=2, fast_path=False, max_t=2, hierarchical=True):
    n = draw(st.integers(1, max_nodes))
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if draw(st.booleans())]
    perm = draw(st.permutations(range(n)))  # node ids not in topological order
    preds = {v: [u for u, w in edges if w == v] for v in range(n)}
    succs = {v: [w for u, w in edges if u == v] for v in range(n)}
    num = st.sampled_from([0.0, 1.0, 2.0, 3.0, 5.0, 8.0])
    nodes = []
    for v in range(n):
        tmpcs = {}
        for t in range(1, max_t + 1):
            if t > 1 and not draw(st.booleans()):
                continue
            k = draw(st.integers(1, max_opts))
            base_fw = {perm[u]: draw(num) for u in preds[v]}
            base_bw = {perm[w]: draw(num) for w in succs[v]}
            params = draw(num)
            lst = []
            for i in range(k):
                fw = base_fw if fast_path else {u: draw(num) for u in base_fw}
                bw = base_bw if fast_path else {w: draw(num) for w in base_bw}
                lst.append(sp.TMPC(
                    id=f"c{i}", time=draw(num) + 1.0, params=params if fast_path else draw(num),
                    mem_a=draw(num), mem_b=draw(num), sync_fw=fw, sync_bw=bw))
            tmpcs[t] = tuple(lst)
        nodes.append(sp.PiperNode(perm[v], tmpcs))
    pedges = [sp.PiperEdge(perm[u], perm[w], draw(num)) for u, w in edges]
    server = draw(st.sampled_from([None, None, 1, 2, 3])) if hierarchical else None
    return sp.PiperProblem(
        nodes=tuple(nodes), edges=tuple(pedges), devices=draw(st.integers(1, 4)),
        memory=draw(st.sampled_from([6.0, 10.0, 16.0, 30.0, 100.0])), bandwidth=draw(st.sampled_from([1.0, 4.0])),
        batch=draw(st.sampled_from([1, 2, 3, 4, 6])), server_size=server,
        intra_bandwidth=None if server is None else draw(st.sampled_from([2.0, 10.0])))


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


