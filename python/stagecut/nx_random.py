"""Two of networkx's random graph generators, drawn exactly as networkx 3 draws them.

:func:`barabasi_albert` and :func:`watts_strogatz` give, for the same ``random.Random`` state,
the edges of ``networkx.barabasi_albert_graph`` and ``networkx.watts_strogatz_graph`` (the
tests hold them equal), as an ``(m, 2)`` integer array and without building a networkx graph.
The generated examples (:mod:`stagecut.examples`) and the RWNN module bodies
(:mod:`stagecut.rwnn`) both draw from them.
"""

from __future__ import annotations

import random

import numpy as np

__all__ = ["barabasi_albert", "watts_strogatz", "edge_array"]


def edge_array(pairs: list[tuple[int, int]]) -> np.ndarray:
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


def barabasi_albert(n: int, m: int, py: random.Random) -> np.ndarray:
    """networkx's ``barabasi_albert_graph(n, m)``: a star on m + 1 nodes, then each new node
    attaches to m distinct nodes drawn in proportion to their degree."""
    if m >= n:
        return edge_array([])
    pairs = [(0, i) for i in range(1, m + 1)]
    repeated = [0] * m + list(range(1, m + 1))  # each node once per edge end
    bits = py.getrandbits
    for source in range(m + 1, n):
        targets: set[int] = set()
        size = len(repeated)
        k = size.bit_length()
        while len(targets) < m:
            r = bits(k)  # py.choice(repeated), inlined: the same draws
            while r >= size:
                r = bits(k)
            targets.add(repeated[r])
        pairs.extend((source, t) for t in targets)
        repeated.extend(targets)  # the set's own order, as networkx
        repeated.extend([source] * m)
    return edge_array(pairs)


def watts_strogatz(n: int, k: int, p: float, py: random.Random) -> np.ndarray:
    """networkx's ``watts_strogatz_graph(n, k, p)``: a ring lattice of k nearest neighbours,
    each edge ``(u, u + j)`` rewired to a random free node with probability p."""
    adj: list[set[int]] = [set() for _ in range(n)]
    half = k // 2
    for j in range(1, half + 1):
        for u in range(n):
            v = (u + j) % n
            adj[u].add(v)
            adj[v].add(u)
    rand, bits, k = py.random, py.getrandbits, n.bit_length()

    def choice() -> int:  # py.choice(range(n)), inlined: the same draws
        r = bits(k)
        while r >= n:
            r = bits(k)
        return r

    for j in range(1, half + 1):
        for u in range(n):
            if rand() < p:
                w = choice()
                while w == u or w in adj[u]:
                    w = choice()
                    if len(adj[u]) >= n - 1:
                        break  # no free node: skip this rewiring
                else:
                    v = (u + j) % n
                    adj[u].discard(v)
                    adj[v].discard(u)
                    adj[u].add(w)
                    adj[w].add(u)
    return edge_array([(u, v) for u in range(n) for v in adj[u] if u < v])
