"""Result types of the training planner: :class:`PiperStage` and :class:`TrainingPlan`.

Both follow the shared protocol of :mod:`stagecut.results`: a plan's ``objective`` is its time
per sample as :func:`~stagecut.training.evaluate_training` scores it (``None`` when nothing
fits), ``stages`` are in pipeline order, and ``TrainingPlan.from_json(p.to_json()) == p``.

The DP table (``TrainingPlan.tps_table``, a numpy array) is left out of equality by design
(``field(compare=False)``) and out of :meth:`TrainingPlan.to_json` unless asked for
(``to_json(include_table=True)``); :meth:`TrainingPlan.from_json` restores it when present.
(``plan.table()`` is the shared human-readable stage table of every result.)

Examples
--------
>>> from stagecut.training import chain_problem, plan_training, TrainingPlan
>>> plan = plan_training(chain_problem([3.0, 1.0, 2.0], devices=2, memory=1e9, bandwidth=1.0, batch=2))
>>> plan
TrainingPlan(objective=3, status='feasible', lower_bound=-, method='piper-dp', stages=2)
>>> plan.assignment()
{0: 0, 1: 1, 2: 1}
>>> TrainingPlan.from_json(plan.to_json()) == plan
True
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from stagecut.errors import InvalidArgumentError, InvalidGraphError, user_stacklevel
from stagecut.results import NodeId, Result, Stage
from stagecut.training.model import RECOMPUTE_ID
from stagecut.units import Display, format_bytes

__all__ = ["PiperStage", "TrainingPlan", "stage_label"]

#: The DP table: ``table[k, s]`` (floats, ``inf`` where nothing fits).
Table = npt.NDArray[np.float64]


def stage_label(d: int, t: int) -> str:
    """The ``device`` label of a stage on ``t * d`` devices: ``"d=2,t=4"``.

    >>> stage_label(2, 4)
    'd=2,t=4'
    """
    return f"d={d},t={t}"


@dataclass(frozen=True, kw_only=True)
class PiperStage(Stage):
    """One stage of a training plan (a :class:`~stagecut.results.Stage`).

    Attributes
    ----------
    index, nodes : int, tuple of node ids
        Position in the pipeline; the stage's nodes (input ids, in input order).
    device : str
        ``"d=<d>,t=<t>"`` (see :func:`stage_label`): the stage runs on ``d * t`` devices.
    load : float
        The stage's time per sample as the evaluator scores it (also :attr:`tps`).
    parts : Mapping[str, float]
        The terms of ``load``: ``compute`` (``time / d``), ``comm`` (activations crossing the
        stage boundary), ``sync`` (the t-way sync of those) and ``allreduce`` (the data-parallel
        weight all-reduce). Their sum is ``load`` up to rounding.
    memory : float
        Bytes per device.
    d, t : int
        Data- and tensor-parallel degrees.
    tmpcs : Mapping[node id, str]
        The TMPC chosen for each node.

    Examples
    --------
    >>> st = PiperStage(index=0, device=stage_label(2, 1), nodes=(0,), load=1.5, d=2, t=1, tmpcs={0: "vanilla"})
    >>> st.devices, st.tps
    (2, 1.5)
    """

    d: int
    t: int
    tmpcs: Mapping[Any, str] = field(default_factory=dict)  # Any: Mapping is invariant in its key

    @property
    def tps(self) -> float:
        """Time per sample of the stage (``load``)."""
        return self.load

    @property
    def devices(self) -> int:
        """Devices the stage runs on: ``d * t``."""
        return self.d * self.t

    @property
    def recomputed(self) -> int:
        """How many of the stage's nodes use activation recomputation (TMPC id ``RECOMPUTE_ID``)."""
        return sum(cid == RECOMPUTE_ID for cid in self.tmpcs.values())


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"TrainingPlan.{old} is deprecated: use {new}", DeprecationWarning, stacklevel=user_stacklevel())


@dataclass(frozen=True, kw_only=True)
class TrainingPlan(Result):
    """A training plan and how it was found (a :class:`~stagecut.results.Result`).

    Attributes
    ----------
    objective : float or None
        Time per sample of the plan as :func:`~stagecut.training.evaluate_training` scores it
        with the settings below; ``None`` when no plan fits (``status == "infeasible"``).
    status : str
        ``"optimal"`` when proven (the DP with the exact knapsack on every stage),
        ``"feasible"`` (the knapsack heuristic, or a baseline) or ``"infeasible"`` (proven:
        no plan of the solver's family fits in memory).
    lower_bound : float or None
        The objective when optimal, else ``None``.
    method : str
        ``"piper-dp"``, ``"equi"`` or ``"equi-no-tp"``.
    stats : Mapping[str, int]
        ``ideals`` (upsets enumerated) and ``pairs`` (upset pairs visited) for the DP.
    stages : tuple of PiperStage
        In pipeline order (empty when infeasible).
    devices, memory, bandwidth, batch : int, float, float, int
        The settings the plan was solved for: K, M (bytes per device), B (bytes/s), N.
    exact_batch : bool
        Whether the data-parallel degrees had to sum to exactly N.
    server_size, intra_bandwidth : int and float, or None
        The two-level network it was solved for, if any.
    dp_objective : float or None
        The DP's own value (``inf`` when infeasible); ``None`` for the baselines.
    tps_table : numpy.ndarray or None
        ``tps_table[k, s]``: the best TPS on at most ``k`` devices with the data-parallel degrees
        summing to at most ``s`` (exactly ``s`` with ``exact_batch``), for ``k <= K`` and
        ``s <= min(N, K)``; ``inf`` where nothing fits. ``None`` for the baselines. Not part of
        equality; in JSON only with ``to_json(include_table=True)``.
    """

    stages: tuple[PiperStage, ...] = ()
    devices: int
    memory: float
    bandwidth: float
    batch: int
    exact_batch: bool = False
    server_size: int | None = None
    intra_bandwidth: float | None = None
    dp_objective: float | None = None
    tps_table: Table | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        # no plan: proven infeasible, or a time limit reached before the DP had one
        if (self.objective is None) != (self.status in ("infeasible", "time_limit")):
            raise InvalidGraphError(f"objective must be None exactly when infeasible or out of time "
                                    f"(objective={self.objective!r}, status={self.status!r})")

    @property
    def devices_used(self) -> int:
        """Devices the plan runs on: the sum of ``d * t`` over its stages."""
        return sum(s.d * s.t for s in self.stages)

    @property
    def batch_used(self) -> int:
        """The sum of the data-parallel degrees (at most ``batch``)."""
        return sum(s.d for s in self.stages)

    def tps(self, k: int, s: int | None = None) -> float:
        """Best TPS on at most ``k`` devices with the degrees summing to at most ``s``, from the table.

        Parameters
        ----------
        k : int
            Devices, ``0 <= k <= devices``.
        s : int, optional
            Sum of the data-parallel degrees (default: ``batch``); exactly ``s`` with ``exact_batch``.

        Returns
        -------
        float
            ``inf`` when nothing fits.

        Raises
        ------
        InvalidArgumentError
            The plan has no table (a baseline), or ``k`` is out of range.

        Examples
        --------
        >>> from stagecut.training import chain_problem, plan_training
        >>> prob = chain_problem([3.0, 1.0, 2.0], devices=2, memory=1e9, bandwidth=1.0, batch=2, params=1.0)
        >>> plan = plan_training(prob)
        >>> plan.tps(1), plan.tps(2)
        (6.0, 3.0)
        """
        table = self.tps_table
        if table is None:
            raise InvalidArgumentError("this plan has no tps_table (the baselines do not compute one)")
        if not 0 <= k < table.shape[0]:
            raise InvalidArgumentError(f"k must be in 0..{table.shape[0] - 1}, got {k!r}")
        if s is None:
            s = self.batch
        if self.exact_batch and s >= table.shape[1]:
            return math.inf
        return float(table[k, min(s, table.shape[1] - 1)])

    # -- JSON
    def to_json(self, *, include_table: bool = False) -> dict[str, Any]:
        """A JSON-serialisable dict (see :meth:`stagecut.results.Result.to_json`).

        Parameters
        ----------
        include_table : bool
            Add the DP table (``"tps_table"``, a list of rows; ``"inf"`` where nothing fits).

        Returns
        -------
        dict
            The shared fields, the settings, ``devices_used`` and ``batch_used`` (derived), the stages.
        """
        out = Result.to_json(replace(self, tps_table=None))
        del out["tps_table"]
        out["devices_used"] = self.devices_used
        out["batch_used"] = self.batch_used
        if include_table and self.tps_table is not None:
            out["tps_table"] = [[x if math.isfinite(x) else str(x) for x in row] for row in self.tps_table.tolist()]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> TrainingPlan:
        """Rebuild a plan from :meth:`to_json` (the ``tps_table`` too when it was included).

        Parameters
        ----------
        data : Mapping or str
            :meth:`to_json`'s dict, or its JSON text.

        Returns
        -------
        TrainingPlan
            Equal to the plan that wrote it (``from_json(p.to_json()) == p``).

        Raises
        ------
        InvalidGraphError
            A field is missing or malformed, or the JSON is of another result kind.

        Examples
        --------
        >>> from stagecut.training import chain_problem, plan_training
        >>> plan = plan_training(chain_problem([1.0, 2.0], devices=2, memory=1.0, bandwidth=1.0, batch=1))
        >>> back = TrainingPlan.from_json(plan.to_json(include_table=True))
        >>> back == plan, back.tps_table.tolist() == plan.tps_table.tolist()
        (True, True)
        """
        from stagecut.results import _load

        doc = _load(data, "TrainingPlan")  # JSON text or a mapping, else one clear error
        plan = super().from_json({k: v for k, v in doc.items() if k != "tps_table"})
        if doc.get("tps_table") is not None:
            try:
                table = np.array([[float(x) for x in row] for row in doc["tps_table"]], dtype=np.float64)
            except (TypeError, ValueError):
                raise InvalidGraphError("TrainingPlan.tps_table: expected rows of numbers") from None
            table.setflags(write=False)
            object.__setattr__(plan, "tps_table", table)
        return plan

    # -- human-readable
    def summary(self, display: Display | None = None) -> str:
        """The shared summary block (:meth:`stagecut.results.Result.summary`), then the settings
        and the devices the plan uses.

        Parameters
        ----------
        display : Display, optional
            The input's units (:class:`~stagecut.units.Display`).

        Returns
        -------
        str
        """
        net = "" if self.server_size is None else (
            f", {self.server_size} devices per server at {format_bytes(self.intra_bandwidth)}/s")
        lines = [super().summary(display),
                 f"settings   K={self.devices} devices, M={format_bytes(self.memory)} per device, "
                 f"B={format_bytes(self.bandwidth)}/s, N={self.batch}{' (exact)' if self.exact_batch else ''}{net}"]
        if self.stages:
            lines.append(f"uses       {self.devices_used} devices, sum of d {self.batch_used}")
        return "\n".join(lines)

    # -- old names (one release)
    @property
    def solver(self) -> str:
        """Deprecated: :attr:`method`."""
        _deprecated("solver", "method")
        return self.method

    @property
    def runtime(self) -> float:
        """Deprecated: :attr:`runtime_s`."""
        _deprecated("runtime", "runtime_s")
        return self.runtime_s

    @property
    def num_ideals(self) -> int:
        """Deprecated: ``stats["ideals"]``."""
        _deprecated("num_ideals", 'stats["ideals"]')
        return int(self.stats.get("ideals") or 0)

    @property
    def pairs_visited(self) -> int:
        """Deprecated: ``stats["pairs"]``."""
        _deprecated("pairs_visited", 'stats["pairs"]')
        return int(self.stats.get("pairs") or 0)

    def node_stage(self) -> dict[NodeId, int]:
        """Deprecated: :meth:`assignment`."""
        _deprecated("node_stage()", "assignment()")
        return self.assignment()
