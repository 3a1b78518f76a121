"""MIPs for MTPP (Archer, Fahrbach, Liu, Prabhu, "Practical Performance Guarantees for
Pipelined DNN Inference", Section 3) and the simple bound, built with python-mip.

All formulations use *completed-by* variables ``z[v, b]`` (node ``v`` sits in one of the
blocks ``0..b``), monotone in ``b`` and closed under predecessors, so every prefix of blocks is
an ideal and the quotient graph is acyclic; ``x[v, b] = z[v, b] - z[v, b-1]``. For every
producing node ``u`` and (super)block ``b`` a variable ``c[u, b] >= |x[v, b] - x[u, b]|`` over
its consumers ``v`` charges ``comm(u)`` once when the tensor crosses the block boundary
(in or out); ``o[b] >= (params(b) + R - M) / B`` is the overflow (a hard limit
``params(b) <= M - R`` without a bandwidth).

``exact`` (Figure 3)
    ``k`` ordered blocks, every block cost ``<= T``; the optimum is the MTPP optimum.
``bottleneck`` (three superblocks)
    A prefix ``P``, the bottleneck block ``N`` and a suffix ``S`` of the ``k`` blocks; ``N``
    keeps its exact cost ``<= T``; ``P`` and ``S`` together hold ``k - 1`` blocks and their
    costs (work, tensors crossing their boundary, and the superadditive overflow
    ``(params + k_P (R - M))^+ / B`` with ``k_P`` an integer variable) sum to at most
    ``(k - 1) T``. Every optimal partition is feasible with ``T = OPT`` (take its bottleneck
    as ``N``), so the optimum is a lower bound.
``bottleneck-guess``
    One small MIP per guessed position ``i`` of the bottleneck block: ``k_P = i`` blocks
    before, ``k - 1 - i`` after, and ``cost(P) <= k_P T``, ``cost(S) <= k_S T``. The bound is
    the smallest of the ``k`` dual bounds (the true position gives at most ``OPT``); the MIPs
    are independent and run in worker processes.
``simple`` (Lemma 3.3)
    :func:`stagecut.mtpp.lower_bound`: the heaviest single node and the average bound.

The MIP levels also carry ``T >= simple`` (a valid cut), so each is at least the simple bound.
Every bound returned is the solver's proven dual bound, never a primal value.

Examples
--------
>>> from stagecut.graph import Graph
>>> from stagecut.mtpp.model import MtppProblem
>>> g = Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5)
>>> r = mtpp_bound(MtppProblem(g, stages=2), "exact")
>>> r.bound, r.status, r.blocks
(5.5, 'optimal', ((0, 1), (2, 3)))
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from stagecut._mip import add, check_options, new_model, solve
from stagecut.errors import InvalidGraphError
from stagecut.mtpp.model import MtppProblem, forced_groups
from stagecut.mtpp.model import lower_bound as _simple

__all__ = ["LEVELS", "BoundResult", "mtpp_bound", "simple_bound", "mtpp_data"]

LEVELS = ("simple", "bottleneck", "bottleneck-guess", "exact")


@dataclass(frozen=True)
class BoundResult:
    """One rung of the ladder: a proven lower bound and how it was obtained.

    ``bound`` is a dual bound (``inf`` when the formulation is infeasible: no partition
    exists); ``objective`` the best primal value of the MIP (for ``exact``: an MTPP partition,
    whose blocks are in ``blocks``; for relaxations not a partition cost); ``status`` one of
    ``"optimal"``, ``"time_limit"``, ``"feasible"``, ``"infeasible"``, ``"no_solution"``,
    ``"skipped"``.
    """

    level: str
    bound: float
    status: str
    seconds: float
    objective: "float | None" = None
    blocks: "tuple | None" = None
    details: "dict | None" = None


def simple_bound(problem: MtppProblem) -> float:
    """The simple bound of Lemma 3.3 (:func:`stagecut.mtpp.lower_bound`)."""
    return _simple(problem)


def mtpp_data(problem: MtppProblem) -> dict:
    """Plain arrays of the instance (picklable, for worker processes)."""
    g = problem.graph
    n = len(g.nodes)
    work = np.array([problem.work(i) for i in range(n)], dtype=float)
    params = np.array([nd.memory for nd in g.nodes], dtype=float)
    prod, comm, pair_prod, pair_cons = [], [], [], []
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
    return dict(n=n, same=same, k=problem.stages, work=work, params=params, prod=np.array(prod, dtype=np.int64),
                comm=np.array(comm), pair_prod=np.array(pair_prod, dtype=np.int64),
                pair_cons=np.array(pair_cons, dtype=np.int64), edges=edges,
                M=problem.fast_memory, R=problem.reserved_memory, B=problem.bandwidth,
                simple=_simple(problem), ids=[nd.id for nd in g.nodes])


def _blocks_model(m, d: dict, nblocks: int):
    """z (completed-by), x (membership), c (crossing) and the per-block cost expressions."""
    import mip

    n = d["n"]
    z = m.add_var_tensor((n, nblocks), "z", var_type=mip.BINARY)
    for v in z[:, nblocks - 1]:
        v.lb = 1.0
    if nblocks > 1:
        add(m, z[:, :-1] - z[:, 1:] <= 0)
    e = d["edges"]
    if len(e):
        add(m, z[e[:, 1], :] - z[e[:, 0], :] <= 0)
    same = d.get("same", ())
    if len(same):
        add(m, z[same[:, 0], :] - z[same[:, 1], :] == 0)
    if nblocks > 1:
        x = np.concatenate([z[:, :1], z[:, 1:] - z[:, :-1]], axis=1).view(type(z))
    else:
        x = z
    cost = d["work"] @ x
    if len(d["prod"]):
        c = m.add_var_tensor((len(d["prod"]), nblocks), "c", lb=0.0, ub=1.0)
        pp, pc = d["pair_prod"], d["pair_cons"]
        pu = d["prod"][pp]
        diff = x[pc, :] - x[pu, :]
        add(m, c[pp, :] - diff >= 0)
        add(m, c[pp, :] + diff >= 0)
        cost = cost + d["comm"] @ c
    params_b = d["params"] @ x
    return z, x, cost, params_b


def _memory_terms(m, d: dict, params_b, blocks_in) -> Any:
    """Overflow of each (super)block holding ``blocks_in[b]`` blocks (constants or exprs)."""
    M, R, B = d["M"], d["R"], d["B"]
    nb = len(params_b)
    if not math.isfinite(M) or d["params"].sum() + R <= M:
        return None
    scale = max(1.0, float(d["params"].sum()))
    if B is None:
        for b in range(nb):
            add(m, params_b[b] * (1 / scale) - blocks_in[b] * ((M - R) / scale) <= 0)
        return None
    o = m.add_var_tensor((nb,), "o", lb=0.0)
    for b in range(nb):
        add(m, o[b] - params_b[b] * (1 / B) - blocks_in[b] * ((R - M) / B) >= 0)
    return o


def _build(d: dict, level: str, guess: "int | None", solver, gap, threads, seed, verbose):
    import mip

    k = d["k"]
    m = new_model(f"mtpp_{level}", solver=solver, gap=gap, threads=threads, seed=seed, verbose=verbose)
    T = m.add_var("T", lb=float(d["simple"]) if math.isfinite(d["simple"]) else 0.0)
    if level == "exact":
        z, x, cost, params_b = _blocks_model(m, d, k)
        o = _memory_terms(m, d, params_b, [1] * k)
        load = cost + o if o is not None else cost
        add(m, load - T <= 0)
    else:
        z, x, cost, params_b = _blocks_model(m, d, 3)  # P, N, S
        if level == "bottleneck":
            kp = m.add_var("kP", var_type=mip.INTEGER, lb=0, ub=k - 1)
            blocks_in = [kp, 1, (k - 1) - kp]
        else:
            kp = guess
            blocks_in = [guess, 1, k - 1 - guess]
            for b, nbk in ((0, blocks_in[0]), (2, blocks_in[2])):
                if nbk == 0:  # an empty superblock
                    for v in (z[:, 0] if b == 0 else z[:, 1]):
                        if b == 0:
                            v.ub = 0.0
                        else:
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
    m.objective = mip.minimize(T)
    return m, z


def _solve_one(d, level, guess, time_limit, solver, gap, threads, seed, verbose):
    t0 = time.perf_counter()
    m, z = _build(d, level, guess, solver, gap, threads, seed, verbose)
    build = time.perf_counter() - t0
    out = solve(m, time_limit=time_limit)
    blocks = None
    if level == "exact" and out.objective is not None:
        zz = np.rint(np.array([[v.x for v in row] for row in z]))
        blk = (zz < 0.5).sum(axis=1)
        used = sorted(set(blk.tolist()))
        blocks = tuple(tuple(d["ids"][i] for i in range(d["n"]) if blk[i] == b) for b in used)
    return dict(bound=out.bound, status=out.status, objective=out.objective, seconds=time.perf_counter() - t0,
                build_s=build, rows=out.rows, cols=out.cols, blocks=blocks, guess=guess)


def mtpp_bound(
    problem: MtppProblem,
    level: str = "exact",
    *,
    time_limit: "float | None" = None,
    gap: "float | None" = None,
    threads: "int | None" = None,
    seed: int = 0,
    solver: str = "cbc",
    workers: "int | None" = None,
    verbose: bool = False,
) -> BoundResult:
    """Solve one rung of the ladder and return its proven lower bound.

    Parameters
    ----------
    problem : MtppProblem
    level : {"simple", "bottleneck", "bottleneck-guess", "exact"}
    time_limit : float, optional
        Seconds (for ``bottleneck-guess``: the whole level). On expiry the dual bound found so
        far is returned with status ``"time_limit"``.
    gap, threads, seed, solver, verbose
        Solver options (see :func:`stagecut.mip_pipeline.partition_ip`).
    workers : int, optional
        Worker processes for ``bottleneck-guess`` (default 1: in this process).
    """
    if not isinstance(problem, MtppProblem):
        raise InvalidGraphError(f"problem: expected an MtppProblem, got {type(problem).__name__}")
    if level not in LEVELS:
        raise InvalidGraphError(f"level must be one of {LEVELS}, got {level!r}")
    check_options(time_limit, gap, threads, seed, solver)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InvalidGraphError(f"workers must be a positive integer, got {workers!r}")
    t0 = time.perf_counter()
    if level == "simple":
        b = simple_bound(problem)
        return BoundResult("simple", b, "optimal", time.perf_counter() - t0)
    d = mtpp_data(problem)
    k = problem.stages
    if level in ("exact", "bottleneck") or k == 1:
        lvl = "exact" if k == 1 else level
        r = _solve_one(d, lvl, None, time_limit, solver, gap, threads, seed, verbose)
        return BoundResult(level, r["bound"], r["status"], time.perf_counter() - t0, r["objective"],
                           r["blocks"] if level == "exact" else None,
                           dict(rows=r["rows"], cols=r["cols"], build_s=r["build_s"]))
    # bottleneck-guess: k independent MIPs
    guesses = list(range(k))
    per = None if time_limit is None else max(0.5, float(time_limit) / math.ceil(k / (workers or 1)))
    args = [(d, "bottleneck-guess", i, per, solver, gap, threads, seed, False) for i in guesses]
    if workers and workers > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
            results = list(ex.map(_solve_star, args))
    else:
        results = [_solve_star(a) for a in args]
    bound = min(r["bound"] for r in results)
    statuses = {r["status"] for r in results}
    if statuses == {"optimal"}:
        status = "optimal"
    elif statuses <= {"optimal", "infeasible"}:
        status = "optimal" if "optimal" in statuses else "infeasible"
    elif "time_limit" in statuses:
        status = "time_limit"
    else:
        status = "feasible"
    per_guess = [dict(guess=r["guess"], bound=r["bound"], status=r["status"], seconds=r["seconds"]) for r in results]
    return BoundResult(level, bound, status, time.perf_counter() - t0, None, None, dict(guesses=per_guess))


def _solve_star(a):
    return _solve_one(*a)
