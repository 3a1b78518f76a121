"""The fast evaluator every latency heuristic uses as its fitness (:class:`Evaluator`).

It computes exactly what :func:`stagecut.latency.model.evaluate.asap` and
:func:`stagecut.latency.model.evaluate.rank_round_robin` compute (the tests hold the arrays equal bit
for bit, and the error messages word for word), in the Rust core (``_core.LatencyEvaluator``):
the problem is laid out once, and re-evaluating a placement is one sweep of the graph that
allocates nothing.

Orders come in two forms:

* per device, its node positions in run order (a sequence of sequences, as the reference takes);
* a 1-d integer numpy array of all ``n`` node positions (a *sequence*): each device runs its
  nodes in the order they appear in it. This is the cheap form for searches (no Python list to
  convert); a sequence that is a linear extension of the DAG is timed in a single sweep.

>>> import stagecut as sc
>>> from stagecut.latency import Devices, LatencyProblem
>>> g = sc.Graph(
...     [sc.Node(v, {"gpu": t}, comm=1.0) for v, t in [("s", 1.0), ("a", 2.0), ("b", 2.0), ("t", 1.0)]],
...     [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")])
>>> p = LatencyProblem(g, Devices.servers(1, 2, intra_bandwidth=1.0, inter_bandwidth=1.0), output_bytes="comm")
>>> ev = Evaluator(p)
>>> ev.makespan([0, 0, 1, 0]), ev.makespan([0, 0, 0, 0], [[0, 2, 1, 3], []])
(6.0, 6.0)
>>> ev.rank_round_robin([0, 0, 1, 0]), ev.makespans(np.array([[0, 0, 1, 1], [1, 1, 1, 1]])).tolist()
([[0, 1, 3], [2]], [5.0, 6.0])
>>> ev.evaluations
4
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stagecut import _core
from stagecut.errors import InvalidArgumentError
from stagecut.latency.model.evaluate import Placement
from stagecut.latency.model.problem import LatencyProblem
from stagecut.validate import shown

__all__ = ["Evaluator", "Order"]

#: Per device, its node positions in run order; or a 1-d int array of all node positions.
Order = Sequence[Sequence[int]] | np.ndarray


_I64 = np.dtype(np.int64)


def _is_int_array(a: np.ndarray) -> bool:
    return a.size == 0 or np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_


class Evaluator:
    """ASAP makespans of placements of one :class:`LatencyProblem` (see the module docs).

    Parameters
    ----------
    problem : LatencyProblem
        The graph on its devices.

    Attributes
    ----------
    problem : LatencyProblem
    evaluations : int
        How many schedules were computed (each :meth:`makespan` / :meth:`times` call counts one,
        :meth:`makespans` one per row; failed calls count none).

    Raises
    ------
    InvalidArgumentError
        ``problem`` is not a :class:`LatencyProblem`.
    """

    def __init__(self, problem: LatencyProblem) -> None:
        if not isinstance(problem, LatencyProblem):
            raise InvalidArgumentError(f"problem: expected a LatencyProblem, got {shown(problem)}")
        self.problem = problem
        self.evaluations = 0
        self._shape = (len(problem),)
        src = [i for i, ss in enumerate(problem.succ) for _ in ss]
        dst = [j for ss in problem.succ for j in ss]
        self._core = _core.LatencyEvaluator(
            np.ascontiguousarray(problem.times, dtype=np.float64).reshape(len(problem), problem.num_devices),
            np.ascontiguousarray(problem.size, dtype=np.float64),
            np.ascontiguousarray(problem.bandwidth, dtype=np.float64),
            np.ascontiguousarray(problem.parallel, dtype=np.bool_),
            np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64),
            [shown(v) for v in problem.ids], list(problem.devices.names))

    # -- argument conversion
    def _dev(self, dev: Placement) -> np.ndarray:
        if (type(dev) is np.ndarray and dev.dtype is _I64 and dev.shape == self._shape
                and dev.flags.c_contiguous):
            return dev  # the fast path
        a = np.asarray(dev)
        n = len(self.problem)
        if a.shape != (n,) or (a.size and not np.issubdtype(a.dtype, np.integer)):
            raise InvalidArgumentError(f"placement: expected {n} device positions, got {shown(dev)}")
        return np.ascontiguousarray(a, dtype=np.int64)

    def _order(self, order: Order | None) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``(flat, offsets)``: ``(None, None)`` for rank round-robin, ``(sequence, None)``."""
        if order is None:
            return None, None
        if type(order) is np.ndarray and order.dtype is _I64 and order.ndim == 1 and order.flags.c_contiguous:
            return order, None
        if isinstance(order, np.ndarray) and order.ndim == 1:
            if not _is_int_array(order):
                raise InvalidArgumentError(f"order: expected node positions, got an array of {order.dtype}")
            return np.ascontiguousarray(order, dtype=np.int64), None
        raw: object = order
        if isinstance(raw, (str, bytes)) or not isinstance(raw, (Sequence, np.ndarray)):
            raise InvalidArgumentError(f"order: expected one list of node positions per device, got {shown(order)}")
        names = self.problem.devices.names
        parts = []
        for d, seq in enumerate(order):
            a = np.asarray(seq)
            if a.ndim != 1 or not _is_int_array(a):
                bad = next((x for x in (seq if isinstance(seq, Sequence) else [seq])
                            if not isinstance(x, (int, np.integer))), seq)
                where = names[d] if d < len(names) else str(d)
                raise InvalidArgumentError(f"order: device {where} lists {shown(bad)}, which is not one of its "
                                           "nodes or is listed twice")
            parts.append(a.astype(np.int64, copy=False))
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([p.size for p in parts], out=offsets[1:])
        flat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        return flat, offsets

    # -- evaluations
    def rank_round_robin(self, dev: Placement) -> list[list[int]]:
        """Per device, its nodes in the rank round-robin order (as
        :func:`stagecut.latency.model.evaluate.rank_round_robin`).

        Parameters
        ----------
        dev : sequence of int
            Device position of each node position.

        Returns
        -------
        list of list of int
            Per device, node positions in run order.

        Raises
        ------
        InvalidArgumentError
            A bad placement (wrong length, device out of range, a node its device cannot run).
        """
        return self._core.rank_round_robin(self._dev(dev))

    def times(self, dev: Placement, order: Order | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ASAP ``(start, finish)`` arrays (by node position), as
        :func:`stagecut.latency.model.evaluate.asap`.

        Parameters
        ----------
        dev : sequence of int
            Device position of each node position.
        order : sequence of sequences of int, or 1-d int array, optional
            Per device, its node positions in run order, or a sequence of all node positions
            (see the module docs); ``None``: :meth:`rank_round_robin`.

        Returns
        -------
        (numpy.ndarray, numpy.ndarray)
            Start and finish time of each node.

        Raises
        ------
        InvalidArgumentError
            A bad placement, or an order that misses or repeats a node or contradicts the DAG.
        """
        flat, off = self._order(order)
        out = self._core.times(self._dev(dev), flat, off)
        self.evaluations += 1
        return out

    def makespan(self, dev: Placement, order: Order | None = None) -> float:
        """The ASAP makespan (largest finish time; 0 for an empty graph).

        Parameters
        ----------
        dev : sequence of int
            Device position of each node position.
        order : sequence of sequences of int, or 1-d int array, optional
            As for :meth:`times` (``None``: :meth:`rank_round_robin`).

        Returns
        -------
        float

        Raises
        ------
        InvalidArgumentError
            See :meth:`times`.
        """
        flat, off = self._order(order)
        m = self._core.makespan(self._dev(dev), flat, off)
        self.evaluations += 1
        return m

    def makespans(self, devs: np.ndarray, orders: np.ndarray | None = None) -> np.ndarray:
        """Makespans of many placements, in parallel (the GIL released; Ctrl-C stops it).

        Parameters
        ----------
        devs : numpy.ndarray
            Shape ``(m, n)``: one placement per row.
        orders : numpy.ndarray, optional
            Shape ``(m, n)``: a sequence of all node positions per row (see the module docs);
            ``None``: each row in its rank round-robin order.

        Returns
        -------
        numpy.ndarray
            Shape ``(m,)``.

        Raises
        ------
        InvalidArgumentError
            Not an integer array with one column per node (or ``orders`` of another shape), or
            a bad placement or order in some row (the message names the first such row).
        """
        n = len(self.problem)
        a = np.asarray(devs)
        if a.ndim != 2 or a.shape[1] != n or (a.size and not np.issubdtype(a.dtype, np.integer)):
            raise InvalidArgumentError(f"placements: expected an integer (m, {n}) array, got shape {a.shape}")
        seqs = None
        if orders is not None:
            o = np.asarray(orders)
            if o.shape != a.shape or not _is_int_array(o):
                raise InvalidArgumentError(f"orders: expected an integer array of shape {a.shape}, got {o.shape}")
            seqs = np.ascontiguousarray(o, dtype=np.int64)
        out = self._core.makespans(np.ascontiguousarray(a, dtype=np.int64), seqs)
        self.evaluations += a.shape[0]
        return out
