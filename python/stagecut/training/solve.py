"""Piper's DP (in Rust, ``_core.piper_plan``): the problem flattened to arrays, the plan rebuilt
and re-scored by the evaluator.

The DP runs over the upsets of the layer DAG (suffixes of the pipeline): ``dp[I][k][s]`` is the
best TPS of the nodes of ``I`` on at most ``k`` devices with the data-parallel degrees summing
to at most ``s``; per stage and ``(t, d)`` the TMPC choice is a knapsack (the authors' greedy,
or exact by branch and bound). Every returned plan is re-scored by
:func:`~stagecut.training.evaluate_training`, which must agree with the DP's value.

Examples
--------
>>> from stagecut.training import chain_problem, plan_training
>>> prob = chain_problem([3.0, 1.0, 2.0], devices=2, memory=1e9, bandwidth=1.0, batch=2, params=1.0)
>>> plan = plan_training(prob, knapsack="exact")
>>> plan.objective, plan.status, [st.nodes for st in plan.stages]
(3.0, 'optimal', [(0,), (1, 2)])
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from stagecut import _core
from stagecut._deadline import DeadlineReached, check_time_limit
from stagecut.errors import InvalidArgumentError, internal_error
from stagecut.progress import Progress, reports
from stagecut.results import NodeId, Status
from stagecut.throughput import DEFAULT_MAX_IDEALS
from stagecut.training._args import check_flag, renamed_kwargs
from stagecut.training.evaluate import StageSpec, evaluate_training
from stagecut.training.model import PiperProblem, apply_settings
from stagecut.training.plan import PiperStage, TrainingPlan
from stagecut.validate import check_int

__all__ = ["KNAPSACKS", "FlatProblem", "flatten", "plan_training"]

KNAPSACKS = ("heuristic", "exact", "generic")

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
#: TMPC row of the flat arrays -> ``(node id, t, TMPC id)``
Back = list[tuple[NodeId, int, str]]


class FlatProblem(NamedTuple):
    """The arrays ``_core.piper_plan`` takes (in its argument order): edges by node position,
    and one row per TMPC kept; TMPC ``i``'s sync bytes are ``sfw[sfw_off[i]:sfw_off[i + 1]]``
    (one per incoming edge of its node, in edge order) and likewise ``sbw``."""

    n: int
    edge_src: I64
    edge_dst: I64
    edge_comm: F64
    tm_node: I64
    tm_t: I64
    tm_time: F64
    tm_param: F64
    tm_a: F64
    tm_b: F64
    sfw_off: I64
    sfw: F64
    sbw_off: I64
    sbw: F64


def flatten(problem: PiperProblem, *, tensor_parallel: bool = True, recompute: bool = True) -> tuple[FlatProblem, Back]:
    """The problem as the arrays of the Rust DP, and the map back from TMPC rows to TMPCs.

    Parameters
    ----------
    problem : PiperProblem
    tensor_parallel, recompute : bool
        Keep the TMPCs with ``t > 1`` / the recomputation TMPCs. TMPCs whose ``t`` does not
        divide the server size are always dropped.

    Returns
    -------
    tuple of FlatProblem and list
        The arrays, and ``back[row] = (node id, t, TMPC id)``.

    Examples
    --------
    >>> from stagecut.training import chain_problem
    >>> flat, back = flatten(chain_problem([1.0, 2.0], devices=1, memory=1.0, bandwidth=1.0, batch=1))
    >>> flat.n, flat.edge_src.tolist(), flat.tm_time.tolist(), back
    (2, [0], [1.0, 2.0], [(0, 1, 'vanilla'), (1, 1, 'vanilla')])
    """
    idx = problem.index
    preds, succs = problem.links
    cols: dict[str, list[float]] = {k: [] for k in ("node", "t", "time", "param", "a", "b")}
    sfw: list[float] = []
    sbw: list[float] = []
    sfo, sbo = [0], [0]
    back: Back = []
    for i, nd in enumerate(problem.nodes):
        for t in sorted(nd.tmpcs):
            if (t > 1 and not tensor_parallel) or (problem.server_size is not None and problem.server_size % t):
                continue
            for c in nd.tmpcs[t]:
                if c.is_recompute and not recompute:
                    continue
                for key, value in zip(cols, (i, t, c.time, c.params, c.mem_a, c.mem_b)):
                    cols[key].append(float(value))
                sfw.extend(float(c.sync_fw[u]) for u, _ in preds[nd.id])
                sbw.extend(float(c.sync_bw[w]) for w, _ in succs[nd.id])
                sfo.append(len(sfw))
                sbo.append(len(sbw))
                back.append((nd.id, int(t), c.id))
    ints = {k: np.array(cols[k], dtype=np.int64) for k in ("node", "t")}
    flts = {k: np.array(cols[k], dtype=np.float64) for k in ("time", "param", "a", "b")}
    flat = FlatProblem(
        n=len(problem.nodes),
        edge_src=np.array([idx[e.source] for e in problem.edges], dtype=np.int64),
        edge_dst=np.array([idx[e.target] for e in problem.edges], dtype=np.int64),
        edge_comm=np.array([float(e.comm) for e in problem.edges], dtype=np.float64),
        tm_node=ints["node"], tm_t=ints["t"], tm_time=flts["time"], tm_param=flts["param"], tm_a=flts["a"],
        tm_b=flts["b"], sfw_off=np.array(sfo, dtype=np.int64), sfw=np.array(sfw, dtype=np.float64),
        sbw_off=np.array(sbo, dtype=np.int64), sbw=np.array(sbw, dtype=np.float64))
    return flat, back


class _Options(NamedTuple):
    exact_batch: bool
    data_parallel: bool
    tensor_parallel: bool
    recompute: bool
    knapsack: str
    exact_max_nodes: int
    max_ideals: int


@renamed_kwargs(prob="problem", max_batch="batch")
@reports
def plan_training(
    problem: PiperProblem,
    *,
    devices: int | None = None,
    memory: float | None = None,
    bandwidth: float | None = None,
    batch: int | None = None,
    exact_batch: bool = False,
    data_parallel: bool = True,
    tensor_parallel: bool = True,
    recompute: bool = True,
    knapsack: str = "heuristic",
    exact_max_nodes: int = 20,
    max_ideals: int = DEFAULT_MAX_IDEALS,
    server_size: int | None = None,
    intra_bandwidth: float | None = None,
    time_limit: float | None = None,
    progress: Progress = None,
) -> TrainingPlan:
    """Piper's DP: the best training plan, and the table (``tps_table``) of the best TPS for every ``k <= K``, ``s``.

    Parameters
    ----------
    problem : PiperProblem
        The layer DAG, its TMPCs and the default settings.
    devices, memory, bandwidth, batch : optional
        K, M (bytes per device), B (bytes/s) and N (microbatches per batch) in place of the
        problem's (``batch`` was ``max_batch``, still accepted with a DeprecationWarning).
    exact_batch : bool
        Require the data-parallel degrees to sum to exactly N (default: at most N).
    data_parallel, tensor_parallel, recompute : bool
        Turn off data parallelism (d = 1), tensor parallelism (t = 1) or activation
        recomputation (drop the TMPCs marked ``recompute``): the paper's ablation baselines.
    knapsack : {"heuristic", "exact", "generic"}
        Per-stage TMPC choice: the authors' bang-per-buck greedy; an exact branch and bound for
        stages of at most ``exact_max_nodes`` nodes (the greedy above); or the greedy computed
        from scratch on every stage (a cross-check of the incremental fast path).
    exact_max_nodes : int
        See ``knapsack="exact"``.
    max_ideals : int
        Refuse a layer DAG with more upsets than this (the DP's memory grows with them).
    server_size, intra_bandwidth : optional
        A two-level network (see :class:`PiperProblem`), e.g. ``server_size=8,
        intra_bandwidth=300e9`` with ``bandwidth=25e9``.
    time_limit : float, optional
        Seconds (``None``: no limit). The DP has no plan until it finishes: stopped by the
        limit, the result has ``objective=None``, no stages and status ``"time_limit"``.
    progress : bool or callable, optional
        Progress reports (:mod:`stagecut.progress`): a callable receives a
        :class:`~stagecut.progress.ProgressEvent` about four times a second while the core works
        (an exception it raises stops the call); ``True`` shows a tqdm bar on stderr once the call
        has run 2 s, if stderr is a terminal; ``None`` (default): none.

    Returns
    -------
    TrainingPlan
        Scored by :func:`evaluate_training` with these settings (the DP's own value must
        agree). ``status`` is ``"optimal"`` with ``knapsack="exact"`` and ``exact_max_nodes``
        at least the number of nodes (over the plans the ablation flags allow), ``"feasible"``
        otherwise, ``"infeasible"`` (``objective=None``) when no plan fits in memory (the
        greedy reaches the lowest-memory TMPCs, so this is proven either way).

    Raises
    ------
    InvalidArgumentError
        A bad argument: an unknown ``knapsack``, a setting out of range, a flag that is not a bool.
    InvalidGraphError
        The problem is malformed, or the table would be too large.
    TooManyIdealsError
        The layer DAG has more than ``max_ideals`` upsets.
    MemoryLimitError
        The DP's tables would pass the memory budget (the message says how much and what to
        change).
    SolverError
        The DP and the evaluator disagree (an internal error: please report it).
    KeyboardInterrupt
        On Ctrl-C (SIGINT), within a fraction of a second, even inside the Rust core.

    Examples
    --------
    >>> from stagecut.training import chain_problem
    >>> prob = chain_problem([3.0, 1.0, 2.0], devices=2, memory=1e9, bandwidth=1.0, batch=2, params=1.0, mem_b=1.0)
    >>> plan = plan_training(prob)
    >>> plan.objective, [(st.nodes, st.d, st.t) for st in plan.stages], plan.tps(1)
    (3.0, [((0,), 1, 1), ((1, 2), 1, 1)], 6.0)
    >>> infeasible = plan_training(prob, memory=0.5)
    >>> infeasible.objective, infeasible.status, infeasible.stages
    (None, 'infeasible', ())
    """
    t0 = time.perf_counter()
    opts = _options(exact_batch, data_parallel, tensor_parallel, recompute, knapsack, exact_max_nodes, max_ideals)
    limit = check_time_limit(time_limit)
    if not isinstance(problem, PiperProblem):
        raise InvalidArgumentError(f"problem must be a PiperProblem, got {type(problem).__name__}")
    problem = apply_settings(problem, devices=devices, memory=memory, bandwidth=bandwidth, batch=batch,
                             server_size=server_size, intra_bandwidth=intra_bandwidth)
    flat, back = flatten(problem, tensor_parallel=opts.tensor_parallel, recompute=opts.recompute)
    try:
        res = _core.piper_plan(*flat, problem.devices, problem.memory, problem.bandwidth, problem.batch,
                               opts.exact_batch, opts.data_parallel, opts.knapsack, opts.exact_max_nodes,
                               opts.max_ideals, problem.server_size, problem.intra_bandwidth, time_limit=limit)
    except DeadlineReached:
        return _timed_out(problem, opts, limit, t0)
    return _plan_from_dp(problem, res, back, opts, t0)


def _timed_out(problem: PiperProblem, opts: _Options, limit: float | None, t0: float) -> TrainingPlan:
    """The plan of a DP stopped by its time limit: none."""
    return TrainingPlan(
        objective=None, status="time_limit", lower_bound=None, method="piper-dp", runtime_s=time.perf_counter() - t0,
        notes=(f"time limit ({limit:g} s) reached before the DP finished: no plan",),
        devices=problem.devices, memory=problem.memory, bandwidth=problem.bandwidth, batch=problem.batch,
        exact_batch=opts.exact_batch, server_size=problem.server_size, intra_bandwidth=problem.intra_bandwidth)


def _options(exact_batch: bool, data_parallel: bool, tensor_parallel: bool, recompute: bool, knapsack: str,
             exact_max_nodes: int, max_ideals: int) -> _Options:
    if knapsack not in KNAPSACKS:
        raise InvalidArgumentError(f"knapsack must be 'heuristic', 'exact' or 'generic', not {knapsack!r}")
    return _Options(
        exact_batch=check_flag(exact_batch, "exact_batch"), data_parallel=check_flag(data_parallel, "data_parallel"),
        tensor_parallel=check_flag(tensor_parallel, "tensor_parallel"), recompute=check_flag(recompute, "recompute"),
        knapsack=knapsack, exact_max_nodes=check_int(exact_max_nodes, "exact_max_nodes"),
        max_ideals=check_int(max_ideals, "max_ideals", minimum=1))


def _notes(problem: PiperProblem, opts: _Options, feasible: bool) -> tuple[str, ...]:
    notes = []
    if not feasible:
        notes.append("no plan fits in memory")
    elif opts.knapsack != "exact":
        notes.append("TMPCs per stage by the authors' greedy: optimality not proven (knapsack='exact' proves it)")
    elif opts.exact_max_nodes < len(problem.nodes):
        notes.append(f"stages over {opts.exact_max_nodes} nodes used the greedy: optimality not proven")
    for flag, what in ((opts.data_parallel, "no data parallelism (d = 1)"),
                       (opts.tensor_parallel, "no tensor parallelism (t = 1)"),
                       (opts.recompute, "no activation recomputation")):
        if not flag:
            notes.append(f"ablation: {what}")
    return tuple(notes)


def _stage_spec(problem: PiperProblem, st: Mapping[str, Any], back: Back) -> StageSpec:
    """A stage of the DP's answer as ``(node ids, d, t, {node id: TMPC id})``."""
    choice = {}
    for row in st["tmpcs"]:
        nid, _, cid = back[row]
        choice[nid] = cid
    return tuple(problem.nodes[v].id for v in st["nodes"]), int(st["d"]), int(st["t"]), choice


def _plan_from_dp(problem: PiperProblem, res: Mapping[str, Any], back: Back, opts: _Options,
                  t0: float) -> TrainingPlan:
    """The DP's answer re-scored by the evaluator, as a :class:`TrainingPlan`."""
    table = np.asarray(res["table"], dtype=np.float64).reshape(problem.devices + 1, int(res["cols"]))
    table.setflags(write=False)
    dp_obj = float(res["objective"])
    proven = opts.knapsack == "exact" and opts.exact_max_nodes >= len(problem.nodes)
    objective: float | None = None
    stages: tuple[PiperStage, ...] = ()
    status: Status = "infeasible"
    if math.isfinite(dp_obj):
        specs = [_stage_spec(problem, st, back) for st in res["stages"]]
        ev = evaluate_training(problem, specs, exact_batch=opts.exact_batch)
        if not ev.feasible or abs(ev.tps - dp_obj) > 1e-9 * max(1.0, abs(dp_obj)):
            raise internal_error(f"the Piper DP says {dp_obj!r}, the evaluator {ev.tps!r} {list(ev.issues)}")
        objective, stages, status = ev.tps, ev.stages, "optimal" if proven else "feasible"
    return TrainingPlan(
        objective=objective, status=status, lower_bound=objective if status == "optimal" else None,
        method="piper-dp", runtime_s=time.perf_counter() - t0,
        stats={"ideals": int(res["num_ideals"]), "pairs": int(res["pairs_visited"])}, stages=stages,
        notes=_notes(problem, opts, objective is not None), devices=problem.devices, memory=problem.memory,
        bandwidth=problem.bandwidth, batch=problem.batch, exact_batch=opts.exact_batch, server_size=problem.server_size,
        intra_bandwidth=problem.intra_bandwidth, dp_objective=dp_obj, tps_table=table)
