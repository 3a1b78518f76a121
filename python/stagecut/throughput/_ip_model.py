"""The throughput IP's model: variables and constraints, MIP starts, and reading a split back.

See :mod:`stagecut.throughput.ip` for the formulations. One function builds one part of the
model; :class:`IpModel` holds the handles the rest needs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from stagecut._mip import DEFAULT_GAP, add, data_gap, import_mip, new_model, reference_scale
from stagecut.colocation import ColocationClasses, Units, fold_free_leaves
from stagecut.errors import internal_error
from stagecut.graph import ACCELERATOR, CPU, Graph, NodeId, kahn_order
from stagecut.throughput.problem import ThroughputProblem

__all__ = ["IpModel", "UnitData", "build_throughput_ip", "scale_times", "start_values", "read_split"]

Device = tuple[str, int]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


class ClassUnits:
    """Colour classes contracted (no cycle fusion: the non-contiguous IP needs none), with the
    exact free-leaf folding of :mod:`stagecut.colocation`."""

    def __init__(self, graph: Graph, memory: float) -> None:
        classes = ColocationClasses(graph)
        fold_free_leaves(graph, classes, memory)
        uid: dict[Any, int] = {}
        unit_of = np.empty(len(graph), dtype=np.int64)
        for i in graph.topological_order():
            unit_of[i] = uid.setdefault(classes.find(classes.key[i]), len(uid))
        self.n_units: int = len(uid)
        self.members: list[list[int]] = [[] for _ in range(self.n_units)]
        for i in range(len(graph)):
            self.members[int(unit_of[i])].append(i)
        self.edges: list[tuple[int, int]] = []


@dataclass
class UnitData:
    """Per-unit times, memory and kinds allowed; producers whose tensor can cross a unit boundary
    and their consumers' units (``pair_prod[k]`` is an index into ``prod_unit``). Times (``tacc``,
    ``tcpu``, ``prod_comm``) are in units of ``scale`` (see :func:`scale_times`)."""

    tacc: F64
    tcpu: F64
    mem: F64
    ok_acc: npt.NDArray[np.bool_]
    ok_cpu: npt.NDArray[np.bool_]
    prod_unit: I64
    prod_comm: F64
    pair_prod: I64
    pair_cons: I64
    scale: float = 1.0


@dataclass
class IpModel:
    """A built model and its handles (numpy arrays of python-mip variables)."""

    model: Any
    units: Units | ClassUnits
    data: UnitData
    contiguous: bool
    scale: float = 1.0
    gap: float = DEFAULT_GAP
    T: Any = None
    z: Any = None
    y: Any = None
    B: int = 0
    xa: Any = None
    xc: Any = None
    c: Any = None
    xa_vars: Any = None
    xc_vars: Any = None
    Da: int = 0
    Dc: int = 0
    fixed: dict[str, bool] = field(default_factory=dict)


def _unit_data(graph: Graph, units: Units | ClassUnits, memory: float) -> UnitData:
    U = units.n_units
    unit_of = np.empty(len(graph), dtype=np.int64)
    for u, ms in enumerate(units.members):
        unit_of[ms] = u
    tacc, tcpu, mem = np.zeros(U), np.zeros(U), np.zeros(U)
    ok_acc, ok_cpu = np.ones(U, dtype=bool), np.ones(U, dtype=bool)
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
    prod_unit: list[int] = []
    prod_comm: list[float] = []
    pair_prod: list[int] = []
    pair_cons: list[int] = []
    for p, nd in enumerate(graph.nodes):
        cons = sorted({int(unit_of[v]) for v in graph.succ[p]} - {int(unit_of[p])})
        if nd.comm <= 0 or not cons:
            continue
        pair_prod.extend([len(prod_unit)] * len(cons))
        pair_cons.extend(cons)
        prod_unit.append(int(unit_of[p]))
        prod_comm.append(nd.comm)
    return UnitData(tacc=tacc, tcpu=tcpu, mem=mem, ok_acc=ok_acc, ok_cpu=ok_cpu,
                    prod_unit=np.array(prod_unit, dtype=np.int64), prod_comm=np.array(prod_comm),
                    pair_prod=np.array(pair_prod, dtype=np.int64), pair_cons=np.array(pair_cons, dtype=np.int64))


def scale_times(data: UnitData, upper: float | None) -> UnitData:
    """The data with times in model units (:func:`~stagecut._mip.reference_scale`: the reference
    value is 1000 units), so that the model's coefficients are of one order whatever the
    input's time unit (CBC's tolerances are absolute, about 1e-6).

    With ``upper``, the cost of a known split (so the optimum is at most ``upper``), the
    reference is ``upper``, a unit whose time on a kind exceeds it may not use that kind, and a
    communication cost above it is capped at twice it: no split of cost ``<= upper`` changes
    cost, and every other costs more than ``upper`` still, so the optimum and every proven bound
    are unchanged (exact), while coefficients far larger than the answer no longer swamp the
    small ones. Without it, the reference is the largest time.
    """
    times = np.concatenate([data.tacc[data.ok_acc], data.tcpu[data.ok_cpu], data.prod_comm])
    scale = reference_scale(times.tolist(), upper)
    ok_acc, ok_cpu, comm = data.ok_acc, data.ok_cpu, data.prod_comm
    if upper is not None and math.isfinite(upper) and upper > 0:
        cut = upper * (1 + 1e-9)
        ok_acc, ok_cpu = ok_acc & (data.tacc <= cut), ok_cpu & (data.tcpu <= cut)
        comm = np.minimum(comm, 2 * upper)
    return dataclasses.replace(data, tacc=data.tacc / scale, tcpu=data.tcpu / scale, prod_comm=comm / scale,
                               ok_acc=ok_acc, ok_cpu=ok_cpu, scale=scale)


def _fix_zero(var_rows: Any) -> None:
    for v in np.asarray(var_rows).flat:
        v.ub = 0.0


def _comm_constraints(m: Any, x: Any, y: Any, data: UnitData) -> Any:
    """c[p, d] >= +-(x[cons, d] - x[prod, d]) (- y[d] on CPU-capable blocks); returns c."""
    P, D = len(data.prod_unit), x.shape[1]
    if P == 0 or D == 0:
        return None
    c = m.add_var_tensor((P, D), "c", lb=0.0, ub=1.0)
    pp, pc = data.pair_prod, data.pair_cons
    diff = x[pc, :] - x[data.prod_unit[pp], :]
    yy = 0 if y is None else np.tile(y, (len(pp), 1))
    add(m, c[pp, :] - diff + yy >= 0)
    add(m, c[pp, :] + diff + yy >= 0)
    return c


def _contiguous_vars(h: IpModel, devices: int, cpus: int) -> None:
    """Ordered blocks: z (completed by block b), the block kinds y, and xa / xc."""
    mip = import_mip()
    m, U = h.model, h.units.n_units
    B = h.B = min(devices + cpus, U)
    z = h.z = m.add_var_tensor((U, B), "z", var_type=mip.BINARY)
    for v in z[:, B - 1]:
        v.lb = 1.0
    if B > 1:
        add(m, z[:, :-1] - z[:, 1:] <= 0)
    ue = np.asarray(h.units.edges, dtype=np.int64).reshape(-1, 2)
    if len(ue):
        add(m, z[ue[:, 1], :] - z[ue[:, 0], :] <= 0)
    x = np.concatenate([z[:, :1], z[:, 1:] - z[:, :-1]], axis=1) if B > 1 else z
    x = x.view(type(z)) if not isinstance(x, type(z)) else x
    if cpus and devices:
        y = h.y = m.add_var_tensor((B,), "y", var_type=mip.BINARY)
        add(m, mip.xsum(y) <= cpus)
        add(m, mip.xsum(y) >= B - devices)
        h.xa = m.add_var_tensor((U, B), "xa", lb=0.0, ub=1.0)
        h.xc = m.add_var_tensor((U, B), "xc", lb=0.0, ub=1.0)
        add(m, h.xa + h.xc - x == 0)
        ones = np.ones((U, 1))
        add(m, h.xa + ones * y[None, :] <= 1)
        add(m, h.xc - ones * y[None, :] <= 0)
        h.fixed = {"a": True, "c": True}
    else:
        h.xa, h.xc = (None, x) if cpus else (x, None)
        h.fixed = {"a": B == 1, "c": B == 1}
    h.c = _comm_constraints(m, x, h.y, h.data) if devices else None


def _free_vars(h: IpModel, devices: int, cpus: int) -> None:
    """Any split: xa[u, d] / xc[u, d], symmetry broken by topological position."""
    mip = import_mip()
    m, U = h.model, h.units.n_units
    h.Da, h.Dc = min(devices, U), min(cpus, U)
    h.xa = h.xa_vars = m.add_var_tensor((U, h.Da), "xa", var_type=mip.BINARY) if h.Da else None
    h.xc = h.xc_vars = m.add_var_tensor((U, h.Dc), "xc", var_type=mip.BINARY) if h.Dc else None
    add(m, sum(xx.sum(axis=1) for xx in (h.xa, h.xc) if xx is not None) == 1)
    for xx, D in ((h.xa, h.Da), (h.xc, h.Dc)):
        if xx is not None:
            for u in range(min(U, D)):  # unit u (topological position) only on the devices 0..u
                _fix_zero(xx[u, u + 1:])
    h.fixed = {"a": True, "c": True}
    h.c = _comm_constraints(m, h.xa, None, h.data) if h.Da else None


def _loads(h: IpModel, memory: float) -> None:
    """Kinds a unit cannot use; the load of every device at most T; memory."""
    mip = import_mip()
    m, data = h.model, h.data
    for xx, ok, key in ((h.xa, data.ok_acc, "a"), (h.xc, data.ok_cpu, "c")):
        bad = np.flatnonzero(~ok)
        if xx is not None and len(bad):
            _fix_zero(xx[bad, :]) if h.fixed[key] else add(m, xx[bad, :] == 0)
    if h.xa is not None:
        load = data.tacc @ h.xa
        if h.c is not None:
            load = load + data.prod_comm @ h.c
        add(m, load - h.T <= 0)
        if 0 < memory < data.mem.sum():  # (memory 0: ok_acc already keeps every unit with memory off)
            add(m, (data.mem / memory) @ h.xa <= 1.0 + 1e-9)
    if h.xc is not None:
        add(m, data.tcpu @ h.xc - h.T <= 0)
    m.objective = mip.minimize(h.T)


def build_throughput_ip(problem: ThroughputProblem, *, contiguous: bool = True, solver: str = "cbc",
                        gap: float | None = None, threads: int | None = None, seed: int = 0,
                        verbose: bool = False, upper: float | None = None) -> IpModel:
    """Build the throughput IP of ``problem`` (see :mod:`stagecut.throughput.ip`), its times
    divided by :attr:`IpModel.scale` (``T`` too; see :func:`scale_times`: ``upper`` is the cost
    of a known split, or ``None``); ``gap=None`` stops at :func:`~stagecut._mip.data_gap`.

    Raises
    ------
    InvalidArgumentError
        A bad solver option.
    BackendUnavailableError
        ``solver="highs"`` without HiGHS installed.
    InvalidGraphError
        An edge from a backward node to a forward node.
    """
    graph, memory = problem.graph, problem.memory
    units = Units(graph, memory) if contiguous else ClassUnits(graph, memory)
    data = scale_times(_unit_data(graph, units, memory), upper)
    if gap is None:
        gap = data_gap(np.concatenate([data.tacc, data.tcpu, data.prod_comm]).tolist(), 1.0)  # (model units)
    m = new_model("throughput_ip", solver=solver, gap=gap, threads=threads, seed=seed, verbose=verbose)
    h = IpModel(model=m, units=units, data=data, contiguous=contiguous, scale=data.scale, gap=gap,
                T=m.add_var("T", lb=0.0))
    if contiguous:
        _contiguous_vars(h, problem.devices, problem.cpus)
    else:
        _free_vars(h, problem.devices, problem.cpus)
    _loads(h, memory)
    return h


def _unit_devices(graph: Graph, units: Units | ClassUnits,
                  assign: Mapping[NodeId, tuple[str, int]]) -> dict[int, Device] | None:
    """``{unit: (kind, index)}`` of a split (``None`` if it splits a unit or leaves one out)."""
    out: dict[int, Device] = {}
    for u, ms in enumerate(units.members):
        devs = {assign.get(graph.nodes[i].id) for i in ms}
        if len(devs) != 1 or None in devs:
            return None
        d = devs.pop()
        assert d is not None
        out[u] = (d[0], d[1])
    return out


def _contiguous_start(h: IpModel, ud: dict[int, Device], cpus: int) -> list[tuple[Any, float]]:
    """z (and y) of a split whose devices can be ordered along the unit DAG, else nothing."""
    devs = sorted(set(ud.values()), key=str)
    succ: dict[Device, set[Device]] = {d: set() for d in devs}
    for a, b in h.units.edges:
        if ud[a] != ud[b]:
            succ[ud[a]].add(ud[b])
    order = kahn_order(devs, succ)
    if len(order) != len(devs) or len(order) > h.B:
        return []
    block = {d: b for b, d in enumerate(order)}
    start = [(h.z[u, b], 1.0 if b >= block[ud[u]] else 0.0) for u in range(h.units.n_units) for b in range(h.B)]
    if h.y is not None:
        kinds = [d[0] == CPU for d in order]
        free_cpu = cpus - sum(kinds)
        for _ in range(len(order), h.B):
            kinds.append(free_cpu > 0)
            free_cpu -= kinds[-1]
        start.extend((h.y[b], 1.0 if kinds[b] else 0.0) for b in range(h.B))
    return start


def _free_start(h: IpModel, ud: dict[int, Device]) -> list[tuple[Any, float]]:
    """xa / xc of a split, devices of each kind relabelled by their first unit (symmetry breaking)."""
    start: list[tuple[Any, float]] = []
    U = h.units.n_units
    for kind, xx, D in ((ACCELERATOR, h.xa_vars, h.Da), (CPU, h.xc_vars, h.Dc)):
        if xx is None:
            if any(d[0] == kind for d in ud.values()):
                return []
            continue
        label: dict[Device, int] = {}
        for u in range(U):
            if ud[u][0] == kind:
                label.setdefault(ud[u], len(label))
        if len(label) > D:
            return []
        start.extend((xx[u, d], 1.0 if ud[u][0] == kind and label[ud[u]] == d else 0.0)
                     for u in range(U) for d in range(D))
    return start


def start_values(graph: Graph, h: IpModel, warm: Mapping[NodeId, tuple[str, int]],
                 cpus: int) -> list[tuple[Any, float]]:
    """A MIP start ``[(variable, value)]`` from a split (empty when it does not fit the model)."""
    ud = _unit_devices(graph, h.units, warm)
    if ud is None:
        return []
    return _contiguous_start(h, ud, cpus) if h.contiguous else _free_start(h, ud)


def _contiguous_devices(h: IpModel) -> tuple[list[Device], list[Device]]:
    z = np.rint(np.array([[v.x for v in row] for row in h.z]))
    blk = (z < 0.5).sum(axis=1)  # first block b with z[u, b] = 1
    counters = {ACCELERATOR: 0, CPU: 0}
    kind_of_block: dict[int, Device] = {}
    order: list[Device] = []
    for b in sorted(set(blk.tolist())):
        if h.y is not None:
            kind = CPU if h.y[b].x > 0.5 else ACCELERATOR
        else:
            kind = ACCELERATOR if h.xa is not None else CPU
        kind_of_block[b] = (kind, counters[kind])
        counters[kind] += 1
        order.append(kind_of_block[b])
    return [kind_of_block[int(blk[u])] for u in range(h.units.n_units)], order


def _free_devices(h: IpModel) -> tuple[list[Device], list[Device]]:
    unit_dev: list[Device | None] = [None] * h.units.n_units
    for kind, xx in ((ACCELERATOR, h.xa_vars), (CPU, h.xc_vars)):
        if xx is None:
            continue
        vals = np.array([[v.x for v in row] for row in xx])
        for u in range(h.units.n_units):
            best = int(np.argmax(vals[u]))
            if vals[u, best] > 0.5:
                unit_dev[u] = (kind, best)
    devs = [d for d in unit_dev if d is not None]
    if len(devs) != len(unit_dev):
        raise internal_error("the IP solution leaves a unit unassigned")
    used = sorted(set(devs), key=lambda d: (d[0] != ACCELERATOR, d[1]))
    relabel: dict[Device, Device] = {}
    for d in used:
        relabel[d] = (d[0], sum(1 for e in relabel if e[0] == d[0]))
    return [relabel[d] for d in devs], [relabel[d] for d in used]


def read_split(graph: Graph, h: IpModel) -> tuple[dict[NodeId, Device], list[Device]]:
    """``({node id: (kind, index)}, devices in pipeline order)`` of the solved model."""
    unit_dev, order = _contiguous_devices(h) if h.contiguous else _free_devices(h)
    assignment: dict[NodeId, Device] = {}
    for u, ms in enumerate(h.units.members):
        for i in ms:
            assignment[graph.nodes[i].id] = unit_dev[u]
    return assignment, order
