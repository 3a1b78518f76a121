"""The fast evaluator every latency heuristic uses as its fitness (:class:`Evaluator`).

It computes exactly what :func:`stagecut.latency.evaluate.asap` and
:func:`stagecut.latency.evaluate.rank_round_robin` compute (the tests hold them equal), but
on a problem prepared once, so that re-evaluating a placement costs one sweep of the graph.

Pure-Python stand-in for now: it delegates to the reference evaluator (same API as the Rust one
that replaces it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stagecut.errors import InvalidArgumentError
from stagecut.latency import evaluate
from stagecut.latency.problem import LatencyProblem
from stagecut.validate import shown

__all__ = ["Evaluator"]


class Evaluator:
    """ASAP makespans of placements of one :class:`LatencyProblem`.

    Parameters
    ----------
    problem : LatencyProblem
        The graph on its devices.

    Attributes
    ----------
    problem : LatencyProblem
    evaluations : int
        How many schedules were computed (each :meth:`makespan` / :meth:`times` call counts one,
        :meth:`makespans` one per row).

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

    def rank_round_robin(self, dev: evaluate.Placement) -> list[list[int]]:
        """Per device, its nodes in the rank round-robin order (as
        :func:`stagecut.latency.evaluate.rank_round_robin`).

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
        return evaluate.rank_round_robin(self.problem, dev)

    def times(self, dev: evaluate.Placement, order: Sequence[Sequence[int]] | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
        """The ASAP ``(start, finish)`` arrays (by node position).

        Parameters
        ----------
        dev : sequence of int
            Device position of each node position.
        order : sequence of sequences of int, optional
            Per device, its node positions in run order (``None``: :meth:`rank_round_robin`).

        Returns
        -------
        (numpy.ndarray, numpy.ndarray)
            Start and finish time of each node.

        Raises
        ------
        InvalidArgumentError
            A bad placement, or an order that misses or repeats a node or contradicts the DAG.
        """
        out = evaluate.asap(self.problem, dev, order)
        self.evaluations += 1
        return out

    def makespan(self, dev: evaluate.Placement, order: Sequence[Sequence[int]] | None = None) -> float:
        """The ASAP makespan (largest finish time; 0 for an empty graph).

        Parameters
        ----------
        dev : sequence of int
            Device position of each node position.
        order : sequence of sequences of int, optional
            Per device, its node positions in run order (``None``: :meth:`rank_round_robin`).

        Returns
        -------
        float

        Raises
        ------
        InvalidArgumentError
            See :meth:`times`.
        """
        _, finish = self.times(dev, order)
        return float(finish.max()) if finish.size else 0.0

    def makespans(self, devs: np.ndarray) -> np.ndarray:
        """Makespans of many placements, each in its rank round-robin order.

        Parameters
        ----------
        devs : numpy.ndarray
            Shape ``(m, n)``: one placement per row.

        Returns
        -------
        numpy.ndarray
            Shape ``(m,)``.

        Raises
        ------
        InvalidArgumentError
            Not a 2-d array with one column per node, or a bad placement in some row.
        """
        a = np.asarray(devs)
        if a.ndim != 2 or a.shape[1] != len(self.problem):
            raise InvalidArgumentError(f"placements: expected an (m, {len(self.problem)}) array, "
                                       f"got shape {a.shape}")
        return np.array([self.makespan(row) for row in a], dtype=float)
