"""The throughput IP (Tarnawski et al., NeurIPS 2020, Sections 5.1.3, 5.2, 5.3) with python-mip.

The cost model is the one of :mod:`stagecut.pipeline` and :mod:`stagecut.evaluate` (Table 1):
``accelerators`` accelerators and ``cpus`` CPUs, a memory limit per accelerator, nodes that some
kind cannot run, tensor-once communication paid by accelerators, and the largest device load as
the objective. Two formulations, both over *units* (colour classes contracted, so that a
forward node and its backward node share a device):

``contiguous=True`` (ordered blocks)
    ``z[u, b] = 1`` when unit ``u`` is *completed by block* ``b`` (it sits in one of the blocks
    ``0..b``), monotone in ``b`` and closed under predecessors of the forward unit DAG (the one
    the DP uses: orphan backward classes mirrored, classes on a forward cycle fused), so every
    prefix of blocks is an ideal and the blocks form a pipeline with an acyclic quotient, exactly
    the splits the ideal DP enumerates. ``y[b] = 1`` makes block ``b`` a CPU
    (``sum y <= cpus``, ``sum (1 - y) <= accelerators``); ``xa + xc = z[:, b] - z[:, b-1]``
    split the membership by kind. Contiguity is enforced on the forward unit DAG; backward
    nodes follow their colour class (Section 5.3).
``contiguous=False``
    ``xa[u, d]`` / ``xc[u, d]``: unit ``u`` on accelerator / CPU ``d``; symmetry between
    identical devices is broken by allowing unit ``u`` (in topological order) only on the
    devices ``0..u`` of each kind.

Communication: for every producing node ``p`` and accelerator (block) ``d``, a variable
``c[p, d] >= |x[unit(v), d] - x[unit(p), d]|`` for every consumer ``v`` in another unit, paid
``comm(p)`` once (tensor-once) by the device. The IP objective is therefore an upper bound on
the true load; the returned plan is re-scored by :func:`stagecut.evaluate`.

Examples
--------
>>> import stagecut as sc
>>> from stagecut.throughput.ip import partition_ip
>>> g = sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0])
>>> plan = partition_ip(g, accelerators=3)
>>> plan.objective, plan.status, [list(d.nodes) for d in plan.devices]
(4.0, 'optimal', [[0], [1, 2, 3], [4]])
"""

from __future__ import annotations

import math
import time
from typing import Mapping

import numpy as np

from stagecut._mip import add, check_options, new_model, solve
from stagecut.errors import InvalidGraphError, SolverError
from stagecut.throughput.evaluate import evaluate
from stagecut.graph import ACCELERATOR, CPU, Graph, kahn_order
from stagecut.colocation import ColocationClasses, Units, fold_free_leaves
from stagecut.results import Plan
from stagecut.throughput.problem import resolve_devices

__all__ = ["partition_ip", "build_throughput_ip"]


class _ClassUnits:
    """Colour classes contracted (no cycle fusion: the non-contiguous IP needs none), with the
    exact free-leaf folding of :mod:`stagecut.pipeline`."""

    def __init__(self, graph: Graph, memory: float) -> None:
        classes = ColocationClasses(graph)
        fold_free_leaves(graph, classes, memory)
        key, find = classes.key, classes.find
        uid: dict = {}
        unit_of = np.empty(len(graph), dtype=np.int64)
        for i in graph.topological_order():
            unit_of[i] = uid.setdefault(find(key[i]), len(uid))
        self.unit_of_node = unit_of
        self.n_units = len(uid)
        self.members = [[] for _ in range(self.n_units)]
        for i in range(len(graph)):
            self.members[unit_of[i]].append(i)
        self.edges = []


def _unit_data(graph: Graph, units, memory: float):
    U = units.n_units
    unit_of = np.empty(len(graph), dtype=np.int64)
    for u, ms in enumerate(units.members):
        unit_of[ms] = u
    tacc = np.zeros(U)
    tcpu = np.zeros(U)
    mem = np.zeros(U)
    ok_acc = np.ones(U, dtype=bool)
    ok_cpu = np.ones(U, dtype=bool)
    for u, ms in enumerate(units.members):
        for i in ms:
            nd = graph.nodes[i]
            mem[u] += nd.memory
            if nd.supports(ACCELERATOR):
                tacc[u] += nd.compute[ACCELERATOR]
            else:
                ok_acc[u] = False
            if nd.supports(CPU):
                tcpu[u] += nd.compute[CPU]
            else:
                ok_cpu[u] = False
    if math.isfinite(memory):
        ok_acc &= mem <= memory * (1 + 1e-12)
    # producers whose tensor can cross a unit boundary
    prod_unit, prod_comm, pair_prod, pair_cons = [], [], [], []
    for p, nd in enumerate(graph.nodes):
        if nd.comm <= 0:
            continue
        cons = sorted({int(unit_of[v]) for v in graph.succ[p]} - {int(unit_of[p])})
        if not cons:
            continue
        k = len(prod_unit)
        prod_unit.append(int(unit_of[p]))
        prod_comm.append(nd.comm)
        pair_prod.extend([k] * len(cons))
        pair_cons.extend(cons)
    return dict(unit_of=unit_of, tacc=tacc, tcpu=tcpu, mem=mem, ok_acc=ok_acc, ok_cpu=ok_cpu,
                prod_unit=np.array(prod_unit, dtype=np.int64), prod_comm=np.array(prod_comm),
                pair_prod=np.array(pair_prod, dtype=np.int64), pair_cons=np.array(pair_cons, dtype=np.int64))


def _fix_zero(var_rows) -> None:
    for v in np.asarray(var_rows).flat:
        v.ub = 0.0


def _comm_constraints(m, mip, x, y, data, name):
    """c[p, d] >= +-(x[cons, d] - x[prod, d]) (- y[d] on CPU-capable blocks); returns c."""
    P = len(data["prod_unit"])
    D = x.shape[1]
    if P == 0 or D == 0:
        return None
    c = m.add_var_tensor((P, D), name, lb=0.0, ub=1.0)
    pp, pc = data["pair_prod"], data["pair_cons"]
    pu = data["prod_unit"][pp]
    diff = x[pc, :] - x[pu, :]
    if y is None:
        add(m, c[pp, :] - diff >= 0)
        add(m, c[pp, :] + diff >= 0)
    else:
        yy = np.tile(y, (len(pp), 1))
        add(m, c[pp, :] - diff + yy >= 0)
        add(m, c[pp, :] + diff + yy >= 0)
    return c


def build_throughput_ip(graph: Graph, accelerators: int, cpus: int, memory: float, *, contiguous: bool = True,
                        solver: str = "cbc", gap=None, threads=None, seed=0, verbose=False):
    """Build the throughput IP; returns ``(model, handles)`` (handles: units, variables, data)."""
    import mip

    units = Units(graph, memory) if contiguous else _ClassUnits(graph, memory)
    data = _unit_data(graph, units, memory)
    U = units.n_units
    m = new_model("throughput_ip", solver=solver, gap=gap, threads=threads, seed=seed, verbose=verbose)
    T = m.add_var("T", lb=0.0)
    mem_scaled = data["mem"] / memory if math.isfinite(memory) and memory > 0 else None
    bind_memory = math.isfinite(memory) and data["mem"].sum() > memory
    h: dict = dict(units=units, data=data, T=T, contiguous=contiguous)
    if contiguous:
        B = min(accelerators + cpus, U)
        z = m.add_var_tensor((U, B), "z", var_type=mip.BINARY)
        for v in z[:, B - 1]:
            v.lb = 1.0
        if B > 1:
            add(m, z[:, :-1] - z[:, 1:] <= 0)
        ue = np.asarray(units.edges, dtype=np.int64).reshape(-1, 2)
        if len(ue):
            add(m, z[ue[:, 1], :] - z[ue[:, 0], :] <= 0)
        x = np.concatenate([z[:, :1], z[:, 1:] - z[:, :-1]], axis=1) if B > 1 else z
        x = x.view(type(z)) if not isinstance(x, type(z)) else x
        if cpus and accelerators:
            y = m.add_var_tensor((B,), "y", var_type=mip.BINARY)
            add(m, mip.xsum(y) <= cpus)
            add(m, mip.xsum(y) >= B - accelerators)
            xa = m.add_var_tensor((U, B), "xa", lb=0.0, ub=1.0)
            xc = m.add_var_tensor((U, B), "xc", lb=0.0, ub=1.0)
            add(m, xa + xc - x == 0)
            ones = np.ones((U, 1))
            add(m, xa + ones * y[None, :] <= 1)
            add(m, xc - ones * y[None, :] <= 0)
            vars_a = vars_c = True
        elif cpus:
            y, xa, xc = None, None, x
            vars_a = vars_c = B == 1
        else:
            y, xa, xc = None, x, None
            vars_a = vars_c = B == 1
        h.update(z=z, y=y, B=B)
        c = _comm_constraints(m, mip, x, y, data, "c") if accelerators else None
    else:
        Da, Dc = min(accelerators, U), min(cpus, U)
        xa = m.add_var_tensor((U, Da), "xa", var_type=mip.BINARY) if Da else None
        xc = m.add_var_tensor((U, Dc), "xc", var_type=mip.BINARY) if Dc else None
        total = 0
        if Da:
            total = total + xa.sum(axis=1)
        if Dc:
            total = total + xc.sum(axis=1)
        add(m, total == 1)
        # symmetry: unit u (topological position) only on the devices 0..u of each kind
        for xx, D in ((xa, Da), (xc, Dc)):
            if xx is not None:
                for u in range(min(U, D)):
                    _fix_zero(xx[u, u + 1:])
        y = None
        vars_a = vars_c = True
        c = _comm_constraints(m, mip, xa, None, data, "c") if Da else None
        h.update(xa_vars=xa, xc_vars=xc, Da=Da, Dc=Dc)
    # kinds a unit cannot use
    if xa is not None:
        bad = np.flatnonzero(~data["ok_acc"])
        if len(bad):
            _fix_zero(xa[bad, :]) if vars_a else add(m, xa[bad, :] == 0)
    if xc is not None:
        bad = np.flatnonzero(~data["ok_cpu"])
        if len(bad):
            _fix_zero(xc[bad, :]) if vars_c else add(m, xc[bad, :] == 0)
    # loads
    if xa is not None:
        load = data["tacc"] @ xa
        if c is not None:
            load = load + data["prod_comm"] @ c
        add(m, load - T <= 0)
        if bind_memory:
            add(m, mem_scaled @ xa <= 1.0 + 1e-9)
    if xc is not None:
        add(m, data["tcpu"] @ xc - T <= 0)
    m.objective = mip.minimize(T)
    h.update(xa=xa, xc=xc, c=c)
    return m, h


def _unit_devices_from(graph: Graph, units, warm) -> "dict | None":
    """``{unit: (kind, index)}`` from a Plan or an assignment mapping (None if it splits a unit)."""
    assign = warm.assignment if isinstance(warm, Plan) else warm
    if not isinstance(assign, Mapping) or not assign:
        return None
    out = {}
    for u, ms in enumerate(units.members):
        devs = {tuple(assign.get(graph.nodes[i].id, (None, None))) for i in ms}
        if len(devs) != 1 or (None, None) in devs:
            return None
        out[u] = devs.pop()
    return out


def _start_values(graph, h, warm, accelerators, cpus) -> list:
    ud = _unit_devices_from(graph, h["units"], warm)
    if ud is None:
        return []
    units = h["units"]
    U = units.n_units
    if h["contiguous"]:
        B = h["B"]
        # order the devices along the quotient DAG
        devs = sorted(set(ud.values()), key=str)
        succ = {d: set() for d in devs}
        for a, b in units.edges:
            if ud[a] != ud[b]:
                succ[ud[a]].add(ud[b])
        order = kahn_order(devs, succ)
        if len(order) != len(devs) or len(order) > B:
            return []
        block = {d: b for b, d in enumerate(order)}
        start = []
        z = h["z"]
        for u in range(U):
            bu = block[ud[u]]
            for b in range(B):
                start.append((z[u, b], 1.0 if b >= bu else 0.0))
        if h["y"] is not None:
            kinds = [d[0] == CPU for d in order]
            free_cpu = cpus - sum(kinds)
            for b in range(len(order), B):
                kinds.append(free_cpu > 0)
                free_cpu -= kinds[-1]
            start.extend((h["y"][b], 1.0 if kinds[b] else 0.0) for b in range(B))
        return start
    # non-contiguous: relabel devices of each kind by their first unit (symmetry breaking)
    start = []
    for kind, xx, D in ((ACCELERATOR, h["xa_vars"], h["Da"]), (CPU, h["xc_vars"], h["Dc"])):
        if xx is None:
            if any(d[0] == kind for d in ud.values()):
                return []
            continue
        label: dict = {}
        for u in range(U):
            if ud[u][0] == kind:
                label.setdefault(ud[u], len(label))
        if len(label) > D:
            return []
        for u in range(U):
            for d in range(D):
                on = ud[u][0] == kind and label[ud[u]] == d
                start.append((xx[u, d], 1.0 if on else 0.0))
    return start


def _read_assignment(graph, h) -> "tuple[dict, list]":
    units = h["units"]
    U = units.n_units
    unit_dev: list = [None] * U
    order: list = []
    if h["contiguous"]:
        z = np.array([[v.x for v in row] for row in h["z"]])
        z = np.rint(z)
        blk = (z < 0.5).sum(axis=1)  # first block b with z[u, b] = 1
        y = h["y"]
        counters = {ACCELERATOR: 0, CPU: 0}
        kind_of_block = {}
        for b in sorted(set(blk.tolist())):
            if y is not None:
                kind = CPU if y[b].x > 0.5 else ACCELERATOR
            else:
                kind = ACCELERATOR if h["xa"] is not None else CPU
            kind_of_block[b] = (kind, counters[kind])
            counters[kind] += 1
            order.append(kind_of_block[b])
        for u in range(U):
            unit_dev[u] = kind_of_block[int(blk[u])]
    else:
        for kind, xx, D in ((ACCELERATOR, h["xa_vars"], h["Da"]), (CPU, h["xc_vars"], h["Dc"])):
            if xx is None:
                continue
            vals = np.array([[v.x for v in row] for row in xx])
            for u in range(U):
                d = int(np.argmax(vals[u]))
                if vals[u, d] > 0.5:
                    unit_dev[u] = (kind, d)
        if any(d is None for d in unit_dev):
            raise SolverError("internal error: the IP solution leaves a unit unassigned")
        used = sorted(set(unit_dev), key=lambda d: (d[0] != ACCELERATOR, d[1]))
        relabel: dict = {}
        for d in used:
            relabel[d] = (d[0], sum(1 for e in relabel if e[0] == d[0]))
        unit_dev = [relabel[d] for d in unit_dev]
        order = [relabel[d] for d in used]
    assignment = {}
    for u, ms in enumerate(units.members):
        for i in ms:
            assignment[graph.nodes[i].id] = unit_dev[u]
    return assignment, order


def partition_ip(
    graph: Graph,
    accelerators: "int | None" = None,
    cpus: "int | None" = None,
    memory: "float | None" = None,
    *,
    contiguous: bool = True,
    time_limit: "float | None" = None,
    gap: "float | None" = None,
    threads: "int | None" = None,
    seed: int = 0,
    solver: str = "cbc",
    warm_start=None,
    verbose: bool = False,
) -> Plan:
    """Solve the throughput IP: best split found and its proven lower bound.

    Parameters
    ----------
    graph : Graph
    accelerators, cpus, memory
        As in :func:`stagecut.partition` (defaults from the workload).
    contiguous : bool
        Ordered contiguous blocks (the DP's search space) or any split.
    time_limit : float, optional
        Seconds; on expiry the best split and bound found are returned with status
        ``"time_limit"`` (no exception).
    gap : float, optional
        Relative optimality gap at which to stop (default: the solver's).
    threads, seed : int
        Solver threads (default 1) and random seed.
    solver : {"cbc", "highs"}
        HiGHS needs the ``highs`` extra (``pip install 'stagecut[highs]'``).
    warm_start : Plan or mapping node id -> (kind, index), optional
        A split (e.g. the DP's or DPL's) given to the solver as a MIP start.
    verbose : bool
        Show the solver's log.

    Returns
    -------
    Plan
        ``method="ip"``; ``objective`` as re-scored by :func:`stagecut.evaluate`;
        ``lower_bound`` the solver's proven dual bound; ``status`` ``"optimal"``,
        ``"time_limit"``, ``"feasible"`` or ``"infeasible"``; ``extra`` holds the solver
        name, model size and build/solve seconds.
    """
    check_options(time_limit, gap, threads, seed, solver)
    accelerators, cpus, memory = resolve_devices(graph, accelerators, cpus, memory)
    if warm_start is not None and not isinstance(warm_start, (Plan, Mapping)):
        raise InvalidGraphError(f"warm_start must be a Plan or a node -> (kind, index) mapping, got {type(warm_start).__name__}")
    t0 = time.perf_counter()
    m, h = build_throughput_ip(graph, accelerators, cpus, memory, contiguous=contiguous, solver=solver,
                               gap=gap, threads=threads, seed=seed, verbose=verbose)
    build_s = time.perf_counter() - t0
    start = _start_values(graph, h, warm_start, accelerators, cpus) if warm_start is not None else []
    out = solve(m, time_limit=time_limit, start=start)
    runtime = time.perf_counter() - t0
    extra = dict(solver=out.solver, rows=out.rows, cols=out.cols, build_s=build_s, solve_s=out.seconds,
                 mip_objective=out.objective, units=h["units"].n_units, warm_start=bool(start),
                 mip_status=out.status, seed=seed)
    common = dict(method="ip", runtime_s=runtime, accelerators=accelerators, cpus=cpus, memory=memory,
                  extra=extra)
    lb = out.bound if math.isfinite(out.bound) or out.bound == math.inf else None
    if out.status == "infeasible":
        return Plan(objective=None, status="infeasible", devices=(), lower_bound=None,
                    contiguous=contiguous, **common)
    if out.objective is None:
        return Plan(objective=None, status="time_limit" if out.status == "time_limit" else "feasible",
                    devices=(), lower_bound=lb, contiguous=contiguous,
                    notes=("no feasible split found within the limits",), **common)
    assignment, order = _read_assignment(graph, h)
    ev = evaluate(graph, assignment, memory=memory, accelerators=accelerators, cpus=cpus)
    if not ev.feasible or ev.objective > out.objective * (1 + 1e-6) + 1e-9:
        raise SolverError(
            f"internal error: the IP's split scores {ev.objective} (issues: {list(ev.issues)}) "
            f"but the IP computed {out.objective}; please report this with the input"
        )
    by_dev = {(d.kind, d.index): d for d in ev.devices}
    devices = tuple(by_dev[d] for d in order if d in by_dev)
    if lb is not None:
        lb = min(lb, ev.objective)
    status = out.status
    return Plan(objective=ev.objective, status=status, devices=devices, lower_bound=lb,
                contiguous=ev.contiguous, **common)
