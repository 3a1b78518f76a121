"""The evaluator of the Piper cost model, written independently of the DP.

For a stage ``S`` with data-parallel degree ``d``, tensor-parallel degree ``t`` and one chosen
TMPC per node (the cost model of the authors' code, ``msr-fiddle/piper``, ``algo.cpp``)::

    TPS(S)    = compute / d + (edges / d + sum 4 (d - 1) / d * params / N) / B
    memory(S) = sum a * ceil(s / d) + sum b          (must be <= M on every device)

``compute`` sums the TMPCs' ``time``, ``edges`` sums ``2 (c(u, v) + sync)`` over the edges
crossing the stage boundary (``sync`` from the TMPC of the endpoint inside the stage),
``params`` the TMPCs' parameter bytes, and ``s`` the data-parallel degrees of this and the later
stages. On a two-level network the sync bytes move at the intra-server bandwidth, and so does
the all-reduce when the stage's ``t * d`` devices fit in one server. The plan's TPS is the
largest stage TPS.

Examples
--------
>>> from stagecut.training import chain_problem, evaluate_training, stage_cost
>>> prob = chain_problem([3.0, 1.0, 2.0], devices=2, memory=1e9, bandwidth=1.0, batch=2, params=1.0)
>>> stage_cost(prob, [1, 2], d=2, t=1, tmpcs={1: "vanilla", 2: "vanilla"}, y=1).tps
3.5
>>> ev = evaluate_training(prob, [((0,), 1, 1, {0: "vanilla"}), ((1, 2), 1, 1, {1: "vanilla", 2: "vanilla"})])
>>> ev.tps, ev.feasible, [st.load for st in ev.stages]
(3.0, True, [3.0, 3.0])
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from stagecut.errors import InvalidGraphError
from stagecut.results import NodeId
from stagecut.training._args import check_flag, renamed_kwargs
from stagecut.training.model import PiperProblem, apply_settings
from stagecut.training.plan import PiperStage, TrainingPlan, stage_label
from stagecut.units import bytes_text
from stagecut.validate import check_int

__all__ = ["StageCost", "StageSpec", "TrainingEvaluation", "stage_cost", "evaluate_training"]

#: A stage given by hand: ``(nodes, d, t, {node id: TMPC id})`` (keys ``Any``: ``Mapping`` is
#: invariant in its key type, and a ``dict[int, str]`` must pass).
StageSpec = tuple[Iterable[NodeId], int, int, Mapping[Any, str]]
_Norm = tuple[tuple[NodeId, ...], int, int, dict[NodeId, str]]


class StageCost(NamedTuple):
    """What :func:`stage_cost` returns: the stage's ``tps``, its ``memory`` per device and the
    terms of the TPS (``compute``, ``comm``, ``sync``, ``allreduce``)."""

    tps: float
    memory: float
    parts: dict[str, float]


@dataclass(frozen=True, kw_only=True)
class TrainingEvaluation:
    """The evaluator's verdict on a plan.

    Attributes
    ----------
    tps : float
        The plan's time per sample (the largest stage TPS); ``inf`` when a stage does not fit
        in memory.
    feasible : bool
        Whether every stage fits in memory.
    stages : tuple of PiperStage
        The stages, each with its TPS (``load``), its parts and its memory.
    devices, batch : int
        Devices used (sum of ``d * t``) and the sum of the data-parallel degrees.
    issues : tuple of str
        What is wrong (a stage over the memory).
    """

    tps: float
    feasible: bool
    stages: tuple[PiperStage, ...]
    devices: int
    batch: int
    issues: tuple[str, ...] = ()

    @property
    def objective(self) -> float | None:
        """``tps`` when feasible, else ``None`` (the convention of :class:`~stagecut.results.Result`)."""
        return self.tps if self.feasible else None


def stage_cost(problem: PiperProblem, nodes: Iterable[NodeId], d: int, t: int, tmpcs: Mapping[Any, str],
               y: int) -> StageCost:
    """The cost of one stage in the Piper cost model (the building block of :func:`evaluate_training`).

    Parameters
    ----------
    problem : PiperProblem
    nodes : iterable of node ids
        The stage's nodes.
    d, t : int
        Data- and tensor-parallel degrees (>= 1).
    tmpcs : Mapping[node id, str]
        The TMPC id chosen for each node (among its TMPCs for ``t``).
    y : int
        Microbatches in flight: ``ceil(s / d)`` with ``s`` the degrees of this and the later stages.

    Returns
    -------
    StageCost
        ``(tps, memory, parts)``; the memory is per device (not compared with ``problem.memory``).

    Raises
    ------
    InvalidGraphError
        An unknown node, or a node without the named TMPC for ``t``.
    InvalidArgumentError
        ``d``, ``t`` or ``y`` is not a positive integer.

    Examples
    --------
    >>> from stagecut.training import chain_problem
    >>> prob = chain_problem([4.0], devices=2, memory=10.0, bandwidth=1.0, batch=2, params=2.0, mem_a=1.0)
    >>> stage_cost(prob, [0], 2, 1, {0: "vanilla"}, y=1)
    StageCost(tps=4.0, memory=1.0, parts={'compute': 2.0, 'comm': 0.0, 'sync': 0.0, 'allreduce': 2.0})
    """
    d, t = check_int(d, "d", minimum=1), check_int(t, "t", minimum=1)
    y = check_int(y, "y", minimum=1)
    preds, succs = problem.links
    idx = problem.index
    members = set(nodes)
    unknown = [v for v in members if v not in idx]
    if unknown:
        raise InvalidGraphError(f"unknown node {unknown[0]!r}")
    compute = edge_bytes = sync_bytes = dp_bytes = memory = 0.0
    for v in sorted(members, key=idx.__getitem__):
        key = (v, t, tmpcs.get(v) if isinstance(tmpcs, Mapping) else None)
        c = problem.tmpc_by_key.get(key)  # type: ignore[arg-type]
        if c is None:
            raise InvalidGraphError(f"node {v!r}: no TMPC {key[2]!r} for t={t}")
        compute += c.time
        for u, cost in preds[v]:
            if u not in members:
                edge_bytes += 2 * cost
                sync_bytes += 2 * c.sync_fw[u]
        for w, cost in succs[v]:
            if w not in members:
                edge_bytes += 2 * cost
                sync_bytes += 2 * c.sync_bw[w]
        dp_bytes += 4 * (d - 1) * c.params / d / problem.batch
        memory += c.mem_a * y + c.mem_b
    b, b_sync, b_ar = problem.bandwidth, problem.bandwidth, problem.bandwidth
    if problem.server_size is None:  # one expression, as the DP computes it
        tps = ((edge_bytes + sync_bytes) / d + dp_bytes) / b + compute / d
    else:
        assert problem.intra_bandwidth is not None
        b_sync = problem.intra_bandwidth
        b_ar = b_sync if t * d <= problem.server_size else b
        tps = (edge_bytes / d) / b + (sync_bytes / d) / b_sync + dp_bytes / b_ar + compute / d
    parts = {"compute": compute / d, "comm": edge_bytes / d / b, "sync": sync_bytes / d / b_sync,
             "allreduce": dp_bytes / b_ar}
    return StageCost(tps, memory, parts)


@renamed_kwargs(prob="problem")
def evaluate_training(
    problem: PiperProblem,
    plan: TrainingPlan | Sequence[PiperStage | StageSpec],
    *,
    exact_batch: bool | None = None,
    devices: int | None = None,
    memory: float | None = None,
    bandwidth: float | None = None,
    batch: int | None = None,
    server_size: int | None = None,
    intra_bandwidth: float | None = None,
) -> TrainingEvaluation:
    """Score a plan in the Piper cost model.

    Parameters
    ----------
    problem : PiperProblem
        The layer DAG and its TMPCs (and the default settings).
    plan : TrainingPlan or sequence of stages
        A :class:`TrainingPlan`: scored with the settings it was solved for (its ``devices``,
        ``memory``, ``bandwidth``, ``batch``, ``exact_batch`` and network), so the result
        reproduces ``plan.objective``. Or stages in pipeline order, each a :class:`PiperStage`
        or a tuple ``(nodes, d, t, {node id: TMPC id})``: scored with the problem's settings.
    exact_batch : bool, optional
        Require the degrees to sum to exactly N (default: the plan's, or ``False``).
    devices, memory, bandwidth, batch, server_size, intra_bandwidth : optional
        Settings in place of the plan's (or the problem's); see :func:`plan_training`.

    Returns
    -------
    TrainingEvaluation
        ``tps`` is ``inf`` and ``feasible`` ``False`` when a stage does not fit in memory.

    Raises
    ------
    InvalidGraphError
        A malformed plan: no stage, a node missing, repeated or unknown, a stage before one it
        depends on, ``d`` not dividing N, ``t`` not dividing the server size, an unknown TMPC,
        more than K devices, the degrees summing over N (or not to N with ``exact_batch``).
    InvalidArgumentError
        A setting out of range.

    Examples
    --------
    >>> from stagecut.training import chain_problem, plan_training
    >>> prob = chain_problem([2.0, 2.0, 2.0], devices=2, memory=1e9, bandwidth=1.0, batch=2, params=1.0)
    >>> plan = plan_training(prob, bandwidth=100.0)   # d = 2 on one stage: the all-reduce is cheap
    >>> plan.objective, evaluate_training(prob, plan).tps
    (3.03, 3.03)
    >>> evaluate_training(prob, plan.stages).tps   # the problem's bandwidth (1.0), not the plan's
    6.0
    """
    settings: dict[str, Any] = {}
    exact = False
    stages: Sequence[PiperStage | StageSpec]
    if isinstance(plan, TrainingPlan):
        settings = dict(devices=plan.devices, memory=plan.memory, bandwidth=plan.bandwidth, batch=plan.batch,
                        server_size=plan.server_size, intra_bandwidth=plan.intra_bandwidth)
        exact, stages = plan.exact_batch, plan.stages
    else:
        stages = plan
    given = dict(devices=devices, memory=memory, bandwidth=bandwidth, batch=batch, server_size=server_size,
                 intra_bandwidth=intra_bandwidth)
    settings.update({k: v for k, v in given.items() if v is not None})
    if exact_batch is not None:
        exact = check_flag(exact_batch, "exact_batch")
    problem = apply_settings(problem, **settings)
    norm = _normalize(stages)
    total_dev, total_d = _check_plan(problem, norm, exact)
    return _score(problem, norm, total_dev, total_d)


def _normalize(stages: Sequence[PiperStage | StageSpec]) -> list[_Norm]:
    try:
        items = list(stages)
    except TypeError:
        raise InvalidGraphError("a plan is a TrainingPlan or a sequence of stages") from None
    norm: list[_Norm] = []
    for i, st in enumerate(items):
        if isinstance(st, PiperStage):
            norm.append((tuple(st.nodes), int(st.d), int(st.t), dict(st.tmpcs)))
            continue
        try:
            nodes, d, t, ch = st
            norm.append((tuple(nodes), check_int(d, "d", error=InvalidGraphError),
                         check_int(t, "t", error=InvalidGraphError), dict(ch)))
        except (TypeError, ValueError) as e:
            raise InvalidGraphError(f"stage {i}: expected a PiperStage or (nodes, d, t, {{node: TMPC id}}) "
                                    f"({e})") from None
    if not norm:
        raise InvalidGraphError("a plan needs at least one stage (an infeasible plan has none)")
    return norm


def _check_stage(problem: PiperProblem, i: int, stage: _Norm, where: dict[NodeId, int]) -> None:
    nodes, d, t, ch = stage
    for v in nodes:
        if v not in problem.index:
            raise InvalidGraphError(f"stage {i}: unknown node {v!r}")
        if v in where:
            raise InvalidGraphError(f"node {v!r} is in stages {where[v]} and {i}")
        where[v] = i
    if d < 1 or problem.batch % d:
        raise InvalidGraphError(f"stage {i}: data-parallel degree {d} does not divide the batch {problem.batch}")
    if t < 1:
        raise InvalidGraphError(f"stage {i}: tensor-parallel degree {t} < 1")
    if problem.server_size is not None and problem.server_size % t:
        raise InvalidGraphError(f"stage {i}: tensor-parallel degree {t} does not divide the server size "
                                f"{problem.server_size} (tensor parallelism stays inside a server)")
    if set(ch) != set(nodes):
        raise InvalidGraphError(f"stage {i}: the TMPC choice must name exactly the stage's nodes")


def _check_plan(problem: PiperProblem, norm: list[_Norm], exact_batch: bool) -> tuple[int, int]:
    """Check the plan's structure; return ``(devices used, sum of d)``."""
    where: dict[NodeId, int] = {}
    for i, stage in enumerate(norm):
        _check_stage(problem, i, stage, where)
    missing = [nd.id for nd in problem.nodes if nd.id not in where]
    if missing:
        raise InvalidGraphError(f"nodes {missing[:5]} are in no stage")
    for e in problem.edges:
        if where[e.source] > where[e.target]:
            raise InvalidGraphError(f"edge {e.source!r} -> {e.target!r} goes from stage {where[e.source]} "
                                    f"back to stage {where[e.target]}")
    total_dev = sum(d * t for _, d, t, _ in norm)
    total_d = sum(d for _, d, _, _ in norm)
    if total_dev > problem.devices:
        raise InvalidGraphError(f"the plan uses {total_dev} devices, more than {problem.devices}")
    if total_d > problem.batch or (exact_batch and total_d != problem.batch):
        raise InvalidGraphError(f"the data-parallel degrees sum to {total_d}; the batch is {problem.batch}")
    return total_dev, total_d


def _score(problem: PiperProblem, norm: list[_Norm], total_dev: int, total_d: int) -> TrainingEvaluation:
    suffix = total_d
    out: list[PiperStage] = []
    worst = 0.0
    issues: list[str] = []
    for i, (nodes, d, t, ch) in enumerate(norm):
        y = -(-suffix // d)
        suffix -= d
        cost = stage_cost(problem, nodes, d, t, ch, y)
        if cost.memory > problem.memory:
            issues.append(f"stage {i} needs {bytes_text(cost.memory)} per device, over {bytes_text(problem.memory)}")
        worst = max(worst, cost.tps)
        ordered = tuple(sorted(nodes, key=problem.index.__getitem__))
        out.append(PiperStage(index=i, device=stage_label(d, t), nodes=ordered, load=cost.tps, parts=cost.parts,
                              memory=cost.memory, d=d, t=t, tmpcs=ch))
    feasible = not issues
    return TrainingEvaluation(tps=worst if feasible else math.inf, feasible=feasible, stages=tuple(out),
                              devices=total_dev, batch=total_d, issues=tuple(issues))

