"""The MIP formulations of MTPP's lower bounds (``exact``, ``bottleneck``, ``bottleneck-guess``):
the plain arrays of an instance and one function per formulation, built with python-mip.
:mod:`stagecut.mtpp.bounds` describes the formulations and solves them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stagecut._mip import add, data_gap, new_model, reference_scale
from stagecut.mtpp.model import MtppProblem, forced_groups
from stagecut.mtpp.model import lower_bound as _simple
from stagecut.results import NodeId

__all__ = ["MtppData", "mtpp_data", "build", "relative_gap"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class MtppData:
    """Plain arrays of an instance (picklable, for worker processes): per node ``work`` and
    ``params``; per producing node with a tensor cost ``prod`` (its position) and ``comm``;
    the (producer index, consumer position) pairs; the edges; the forced-group ties ``same``
    (``(group, node)`` pairs); the memory model ``M``, ``R``, ``B``; ``simple``, the bound the MIPs start
    from (the simple bound, or a stronger proven one); ``scale``,
    the value of one model unit (:func:`~stagecut._mip.reference_scale`: the MIPs divide every
    time by it), and ``upper``, the cost of a known partition (or ``None``); tensor costs above
    twice ``upper`` are capped there (exact: see :func:`mtpp_data`)."""

    n: int
    k: int
    ids: list[NodeId]
    work: F64
    params: F64
    prod: I64
    comm: F64
    pair_prod: I64
    pair_cons: I64
    edges: I64
    same: I64
    M: float
    R: float
    B: float | None
    simple: float
    scale: float = 1.0
    upper: float | None = None


def mtpp_data(problem: MtppProblem, upper: float | None = None, floor: float | None = None) -> MtppData:
    """The plain arrays of ``problem`` (see :class:`MtppData`), ``upper`` the cost of a known
    partition (``None``: none known), ``floor`` a proven lower bound the MIPs start from (their
    ``T >= floor``; at least the simple bound, which is used when ``floor`` is ``None``).

    Times go into the MIPs in model units (:func:`~stagecut._mip.reference_scale`: ``upper`` is
    1000 units, else the largest time is), so that 1e7 next to 7 stays within the solvers'
    tolerances. With ``upper``, a tensor cost above ``2 upper`` is capped at ``2 upper``: a
    partition of cost at most ``upper`` pays none of them, and any other still costs more than
    ``upper``, so the optimum is unchanged, and the relaxations' constraints only get looser
    (their bounds stay valid).

    >>> from stagecut.graph import Graph
    >>> d = mtpp_data(MtppProblem(Graph.chain([3.0, 1.0], comm=0.5), devices=2))
    >>> d.work.tolist(), d.prod.tolist(), d.pair_cons.tolist()
    ([3.0, 1.0], [0], [1])
    """
    g = problem.graph
    n = len(g.nodes)
    prod: list[int] = []
    comm: list[float] = []
    pair_prod: list[int] = []
    pair_cons: list[int] = []
    for u, nd in enumerate(g.nodes):
        if nd.comm > 0 and g.succ[u]:
            k = len(prod)
            prod.append(u)
            comm.append(nd.comm)
            cons = sorted(set(g.succ[u]))
            pair_prod.extend([k] * len(cons))
            pair_cons.extend(cons)
    edges = np.array([(g.index[a], g.index[b]) for a, b in g.edges], dtype=np.int64).reshape(-1, 2)
    # forced groups (colocation classes, and classes on a cycle): one block for each group
    grp = forced_groups(problem)
    same = np.array([(grp[i], i) for i in range(n) if grp[i] != i], dtype=np.int64).reshape(-1, 2)
    work = [problem.work(i) for i in range(n)]
    if upper is not None and not (math.isfinite(upper) and upper > 0):
        upper = None
    if upper is not None:
        comm = [min(c, 2 * upper) for c in comm]
    return MtppData(
        n=n, k=problem.devices, ids=[nd.id for nd in g.nodes], work=np.array(work, dtype=float),
        params=np.array([nd.memory for nd in g.nodes], dtype=float),
        prod=np.array(prod, dtype=np.int64), comm=np.array(comm), pair_prod=np.array(pair_prod, dtype=np.int64),
        pair_cons=np.array(pair_cons, dtype=np.int64), edges=edges, same=same,
        M=problem.memory, R=problem.reserved_memory, B=problem.bandwidth, simple=_start_bound(problem, floor),
        scale=reference_scale(work + comm, upper), upper=upper,
    )


def _start_bound(problem: MtppProblem, floor: float | None) -> float:
    return _simple(problem) if floor is None else max(_simple(problem), floor)


def _blocks_model(m: Any, d: MtppData, nblocks: int) -> tuple[Any, Any, Any]:
    """z (completed-by) and the per-block cost and parameter expressions."""
    import mip

    n = d.n
    z = m.add_var_tensor((n, nblocks), "z", var_type=mip.BINARY)
    for v in z[:, nblocks - 1]:
        v.lb = 1.0
    if nblocks > 1:
        add(m, z[:, :-1] - z[:, 1:] <= 0)
    e = d.edges
    if len(e):
        add(m, z[e[:, 1], :] - z[e[:, 0], :] <= 0)
    if len(d.same):
        add(m, z[d.same[:, 0], :] - z[d.same[:, 1], :] == 0)
    if nblocks > 1:
        x = np.concatenate([z[:, :1], z[:, 1:] - z[:, :-1]], axis=1).view(type(z))
    else:
        x = z
    cost = (d.work / d.scale) @ x
    if len(d.prod):
        c = m.add_var_tensor((len(d.prod), nblocks), "c", lb=0.0, ub=1.0)
        pp, pc = d.pair_prod, d.pair_cons
        pu = d.prod[pp]
        diff = x[pc, :] - x[pu, :]
        add(m, c[pp, :] - diff >= 0)
        add(m, c[pp, :] + diff >= 0)
        cost = cost + (d.comm / d.scale) @ c
    params_b = d.params @ x
    return z, cost, params_b


def _memory_terms(m: Any, d: MtppData, params_b: Any, blocks_in: list[Any]) -> Any:
    """Overflow of each (super)block holding ``blocks_in[b]`` blocks (constants or exprs)."""
    M, R, B = d.M, d.R, d.B
    nb = len(params_b)
    if not math.isfinite(M) or d.params.sum() + R <= M:
        return None
    scale = max(1.0, float(d.params.sum()))
    if B is None:
        for b in range(nb):
            add(m, params_b[b] * (1 / scale) - blocks_in[b] * ((M - R) / scale) <= 0)
        return None
    o = m.add_var_tensor((nb,), "o", lb=0.0)  # in model units: bytes / (B * scale)
    bs = B * d.scale
    for b in range(nb):
        add(m, o[b] - params_b[b] * (1 / bs) - blocks_in[b] * ((R - M) / bs) >= 0)
    return o


def _superblocks(m: Any, d: MtppData, level: str, guess: int | None, T: Any) -> Any:
    """``bottleneck`` / ``bottleneck-guess``: prefix P, bottleneck N, suffix S; returns z."""
    import mip

    k = d.k
    z, cost, params_b = _blocks_model(m, d, 3)  # P, N, S
    if level == "bottleneck":
        kp = m.add_var("kP", var_type=mip.INTEGER, lb=0, ub=k - 1)
        blocks_in: list[Any] = [kp, 1, (k - 1) - kp]
    else:
        assert guess is not None
        blocks_in = [guess, 1, k - 1 - guess]
        if blocks_in[0] == 0:  # an empty prefix
            for v in z[:, 0]:
                v.ub = 0.0
        if blocks_in[2] == 0:  # an empty suffix
            for v in z[:, 1]:
                v.lb = 1.0
    o = _memory_terms(m, d, params_b, blocks_in)
    load = cost + o if o is not None else cost
    add(m, load[1] - T <= 0)
    if level == "bottleneck":
        add(m, load[0] + load[2] - (k - 1) * T <= 0)
    else:
        if blocks_in[0]:
            add(m, load[0] - blocks_in[0] * T <= 0)
        if blocks_in[2]:
            add(m, load[2] - blocks_in[2] * T <= 0)
    return z


def relative_gap(d: MtppData, gap: float | None) -> float:
    """The relative gap asked, else the data's (:func:`~stagecut._mip.data_gap`)."""
    return gap if gap is not None else data_gap([*d.work.tolist(), *d.comm.tolist()], d.scale)


def build(d: MtppData, level: str, guess: int | None, solver: str, gap: float | None, threads: int | None,
           seed: int, verbose: bool) -> tuple[Any, Any]:
    import mip

    m = new_model(f"mtpp_{level}", solver=solver, gap=relative_gap(d, gap), threads=threads, seed=seed, verbose=verbose)
    T = m.add_var("T", lb=float(d.simple) / d.scale if math.isfinite(d.simple) else 0.0)
    if level == "exact":
        z, cost, params_b = _blocks_model(m, d, d.k)
        o = _memory_terms(m, d, params_b, [1] * d.k)
        load = cost + o if o is not None else cost
        add(m, load - T <= 0)
    else:
        z = _superblocks(m, d, level, guess, T)
    m.objective = mip.minimize(T)
    return m, z
