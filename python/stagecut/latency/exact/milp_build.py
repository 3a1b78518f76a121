"""Parts of the DiviML MILP (:mod:`stagecut.latency.exact.milp`) that other models share: the greedy
start, the transitive closure, the transfer table, the schedule-to-positions helpers, the model's
handles and the bulk row sink that hands rows to CBC or HiGHS as arrays."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stagecut.errors import InvalidArgumentError, SolverError
from stagecut.latency.exact.brute import colocated
from stagecut.latency.model.problem import LatencyProblem
from stagecut.latency.model.schedule import Schedule
from stagecut.validate import shown

__all__ = ["RowSink", "greedy_schedule", "transfer_table", "transitive_closure"]



# ---------------------------------------------------------------------------- helpers
def greedy_schedule(problem: LatencyProblem) -> tuple[list[int], list[list[int]]] | None:
    """A quick schedule to start from: nodes in topological order, each appended to the device
    (with memory left) where it finishes first; a colocation class goes where its first node
    goes, and reserves its whole memory there.

    Parameters
    ----------
    problem : LatencyProblem

    Returns
    -------
    tuple of (list of int, list of list of int), or None
        The device of each node position and each device's order; ``None`` when memory runs
        out on the way.

    Raises
    ------
    None

    >>> import stagecut as sc
    >>> from stagecut.latency import Devices, LatencyProblem
    >>> greedy_schedule(LatencyProblem(sc.Graph.chain([1.0, 1.0], comm=0.5), Devices.pcie_star(2, cpu=False)))
    ([0, 0], [[0, 1], []])
    """
    n, nd = len(problem), problem.num_devices
    dev = [-1] * n
    fin = [0.0] * n
    avail = [0.0] * nd
    used = [0.0] * nd
    orders: list[list[int]] = [[] for _ in range(nd)]
    mates = {v: c for c in colocated(problem) for v in c}  # a class reserves its memory at once
    for v in problem.order:
        best: tuple[float, int] | None = None
        group = mates.get(v, [v])
        placed = [dev[u] for u in group if dev[u] >= 0]
        need = 0.0 if placed else float(problem.memory[group].sum())
        for d in placed[:1] or range(nd):
            p = float(problem.times[v, d])
            if not math.isfinite(p) or not np.isfinite(problem.times[group, d]).all() \
                    or used[d] + need > problem.capacity[d]:
                continue
            s = 0.0 if problem.parallel[d] else avail[d]
            for u in problem.pred[v]:
                s = max(s, fin[u] + problem.transfer(u, dev[u], d))
            if best is None or s + p < best[0]:
                best = (s + p, d)
        if best is None:
            return None
        fin[v], d = best
        dev[v] = d
        used[d] += need
        if not problem.parallel[d]:
            avail[d] = fin[v]
        orders[d].append(v)
    return dev, orders


def _class_fits_nowhere(problem: LatencyProblem) -> str | None:
    """Why a colocation class has no device (none can run all its nodes and hold them), or ``None``."""
    for members in colocated(problem):
        ok = np.isfinite(problem.times[members]).all(axis=0) & (problem.memory[members].sum() <= problem.capacity)
        if not ok.any():
            return (f"the colocation class of node {shown(problem.ids[members[0]])} ({len(members)} nodes) "
                    "fits on no device that can run all its nodes")
    return None


def transitive_closure(problem: LatencyProblem) -> list[int]:
    """Transitive closure: bit ``v`` of ``reach[u]`` is set when a path leads from ``u`` to ``v``
    (the MILPs keep disjunctive pairs only for nodes it leaves unordered).

    Parameters
    ----------
    problem : LatencyProblem

    Returns
    -------
    list of int
        One bit set per node position.

    Raises
    ------
    IndexError
        Never for a valid problem (its ``order`` and ``succ`` cover the same positions).
    """
    reach = [0] * len(problem)
    for u in reversed(problem.order):
        r = 0
        for s in problem.succ[u]:
            r |= reach[s] | (1 << s)
        reach[u] = r
    return reach


def _from_start(problem: LatencyProblem, start: Schedule) -> tuple[list[int], list[list[int]] | None]:
    """The placement and orders of a given schedule, as positions."""
    names = problem.devices.names
    if set(start.placement) != set(problem.ids):
        raise InvalidArgumentError("start: its nodes are not the problem's nodes")
    dev = []
    for v in problem.ids:
        d = start.placement[v]
        if d not in names:
            raise InvalidArgumentError(f"start: node {shown(v)} is on {shown(d)}, which is not a device")
        dev.append(names.index(d))
    order: list[list[int]] | None = [[] for _ in names]
    assert order is not None
    for name, ids in start.order.items():
        if name not in names or any(v not in problem.index for v in ids):
            return dev, None
        order[names.index(name)] = [problem.index[v] for v in ids]
    return dev, order


def _canonical(problem: LatencyProblem, groups: list[list[int]], dev: list[int],
               order: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Relabel the devices of each symmetry group by their first node in topological order (the
    MILP's symmetry rows hold then); the times are unchanged."""
    rank = {v: r for r, v in enumerate(problem.order)}
    perm = list(range(problem.num_devices))
    for g in groups:
        first = {d: min((rank[v] for v in order[d]), default=math.inf) for d in g}
        for new, old in zip(g, sorted(g, key=lambda d: (first[d], d))):
            perm[old] = new
    new_order: list[list[int]] = [[] for _ in order]
    for d, seq in enumerate(order):
        new_order[perm[d]] = list(seq)
    return [perm[d] for d in dev], new_order


# ---------------------------------------------------------------------------- the model
@dataclass
class _Model:
    """A built MILP and its handles."""

    model: Any
    scale: float
    gap: float
    upper: float
    x: dict[tuple[int, int], Any] = field(default_factory=dict)
    S: list[Any] = field(default_factory=list)
    y: dict[tuple[int, int], Any] = field(default_factory=dict)
    C: Any = None
    pairs: int = 0
    pruned_pairs: int = 0
    groups: list[list[int]] = field(default_factory=list)


def transfer_table(problem: LatencyProblem, scale: float = 1.0, cap: float = math.inf) -> np.ndarray:
    """``tr[u, a, b]``: :meth:`~stagecut.latency.LatencyProblem.transfer` of every node and device pair,
    divided by ``scale`` and capped at ``cap`` (0 on one device and for a node without output).

    >>> import stagecut as sc
    >>> from stagecut.latency import Devices, LatencyProblem
    >>> transfer_table(LatencyProblem(sc.Graph.chain([1.0], comm=2.0), Devices.pcie_star(1)))[0].tolist()
    [[0.0, 2.0], [2.0, 0.0]]
    """
    n, nd = len(problem), problem.num_devices
    size = np.asarray(problem.size, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        tr = size[:, None, None] / problem.bandwidth[None, :, :]
    tr[:, np.arange(nd), np.arange(nd)] = 0.0
    tr[size == 0] = 0.0
    tr = np.where(np.isnan(tr), 0.0, tr)
    return np.minimum(tr / scale, cap).reshape(n, nd, nd)


def _trivial_upper(problem: LatencyProblem) -> float:
    """The makespan of no ASAP schedule exceeds every node's largest time plus every edge's
    largest transfer (a critical path uses each node and each edge at most once)."""
    t = np.where(np.isfinite(problem.times), problem.times, 0.0)
    total = float(t.max(axis=1).sum())
    for u in range(len(problem)):
        if problem.size[u] > 0 and problem.succ[u]:
            worst = max(problem.transfer(u, a, b) for a in range(problem.num_devices)
                        for b in range(problem.num_devices))
            total += worst * len(problem.succ[u])
    return total


class _BuildExpired(Exception):
    """The time limit passed while the model was being built."""


class RowSink:
    """Linear rows gathered as plain arrays and handed to the solver in bulk (python-mip builds a
    ``LinExpr`` per row, which costs tens of microseconds each: minutes for the pair rows of a
    large graph). A row is ``sum coef * var  sense  rhs`` over variable indices (``var.idx``),
    ``sense`` one of ``">"``, ``"<"``, ``"="``; no index twice in a row."""

    def __init__(self) -> None:
        self.blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # idx, val, sense, rhs
        self.rows: list[tuple[list[int], list[float], str, float]] = []

    def add(self, idx: list[int], val: list[float], sense: str, rhs: float) -> None:
        """One row."""
        self.rows.append((idx, val, sense, float(rhs)))

    def add_block(self, idx: np.ndarray, val: np.ndarray, sense: str, rhs: np.ndarray) -> None:
        """Rows of equal length: ``idx`` and ``val`` of shape ``(rows, width)``, ``rhs`` of ``(rows,)``."""
        if len(rhs):
            self.blocks.append((np.asarray(idx, dtype=np.int64), np.asarray(val, dtype=float),
                                np.full(len(rhs), sense), np.asarray(rhs, dtype=float)))

    def __len__(self) -> int:
        return len(self.rows) + sum(len(b[3]) for b in self.blocks)

    def _csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], np.ndarray]:
        counts = [len(r[0]) for r in self.rows]
        idx = [np.fromiter((i for r in self.rows for i in r[0]), dtype=np.int64, count=sum(counts))]
        val = [np.fromiter((c for r in self.rows for c in r[1]), dtype=float, count=sum(counts))]
        sense = [r[2] for r in self.rows]
        rhs = [np.array([r[3] for r in self.rows], dtype=float)]
        lengths = [np.array(counts, dtype=np.int64)]
        for bi, bv, bs, br in self.blocks:
            idx.append(bi.ravel())
            val.append(bv.ravel())
            sense += bs.tolist()
            rhs.append(br)
            lengths.append(np.full(len(br), bi.shape[1], dtype=np.int64))
        starts = np.concatenate([[0], np.cumsum(np.concatenate(lengths))])
        return starts, np.concatenate(idx), np.concatenate(val), sense, np.concatenate(rhs)

    def flush(self, model: Any, check: Callable[[], None] | None = None) -> None:
        """Add every row to ``model`` (CBC or HiGHS through python-mip) and forget them.
        ``check`` is called every few thousand rows (CBC takes them one by one): an exception it
        raises stops the flush, and the model is then incomplete (to be dropped)."""
        if not len(self):
            return
        starts, idx, val, sense, rhs = self._csr()
        self.rows, self.blocks = [], []
        name = str(model.solver_name).lower()
        if name == "cbc":
            from mip.cbc import cbclib, ffi

            ia = ffi.from_buffer("int[]", idx.astype(np.intc))
            va = ffi.from_buffer("double[]", val)
            mp = model.solver._model
            code = {">": b">", "<": b"<", "=": b"="}
            st = starts.tolist()
            for r, (s, rr) in enumerate(zip(sense, rhs.tolist())):
                if check is not None and not r % 4096:
                    check()
                cbclib.Cbc_addRow(mp, b"", st[r + 1] - st[r], ia + st[r], va + st[r], code[s], rr)
            if check is not None:
                check()
            model.constrs.update_constrs(model.solver.num_rows())
            return
        from mip import highs

        solver = model.solver
        solver._flush()
        hffi = highs.ffi
        kind = np.array(sense)
        lower = np.where(kind == "<", -np.inf, rhs)
        upper = np.where(kind == ">", np.inf, rhs)
        hint = np.int32 if hffi.sizeof("HighsInt") == 4 else np.int64
        st, ix = starts[:-1].astype(hint), idx.astype(hint)
        code = solver._lib.Highs_addRows(solver._model, len(rhs), hffi.from_buffer("double[]", lower),
                                         hffi.from_buffer("double[]", upper), len(idx),
                                         hffi.from_buffer("HighsInt[]", st), hffi.from_buffer("HighsInt[]", ix),
                                         hffi.from_buffer("double[]", val))
        if code < 0:
            raise SolverError("HiGHS refused the model's rows")
        solver._row_committed += len(rhs)
        model.constrs.update_constrs(solver._row_committed)


def _closure_rows(problem: LatencyProblem) -> np.ndarray:
    """The transitive closure as packed bit rows: bit ``v`` of row ``u`` set when a path leads
    from ``u`` to ``v`` or from ``v`` to ``u`` (``numpy.packbits`` layout)."""
    n = len(problem)
    reach = np.zeros((n, (n + 7) // 8), dtype=np.uint8)
    for u in reversed(problem.order):
        for s in problem.succ[u]:
            reach[u] |= reach[s]
            reach[u, s >> 3] |= np.uint8(0x80 >> (s & 7))
    both = np.unpackbits(reach, axis=1, count=n).astype(bool)
    both |= both.T
    return both
