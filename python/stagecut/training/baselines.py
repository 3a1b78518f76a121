"""The paper's baselines (Section 5): "equi" (PipeDream-2BW-like) and the ablations of Piper.

The equi planner splits the layers into equal groups, gives every stage the same ``d`` and
``t``, and uses activation recomputation everywhere or nowhere; it keeps the best of these.
Layers are taken in the order the authors' code computes (a stack-based Kahn over the nodes and
edges in input order), since the groups depend on it.

Examples
--------
>>> from stagecut.training import chain_problem, plan_equi
>>> prob = chain_problem([1.0, 1.0, 4.0], devices=2, memory=1e9, bandwidth=1.0, batch=2, params=1.0)
>>> eq = plan_equi(prob)
>>> eq.objective, eq.method, [(st.nodes, st.d) for st in eq.stages]
(5.0, 'equi', [((0,), 1), ((1, 2), 1)])
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from stagecut.errors import InvalidArgumentError, InvalidGraphError
from stagecut.results import NodeId
from stagecut.training._args import check_flag, renamed_kwargs
from stagecut.training.evaluate import StageSpec, TrainingEvaluation, evaluate_training
from stagecut.training.model import PiperProblem, apply_settings
from stagecut.training.plan import TrainingPlan
from stagecut.training.solve import plan_training

__all__ = ["plan_equi", "plan_baselines"]

Layout = list[list[int]]  # stages as lists of node positions


def _kahn_stack_order(problem: PiperProblem) -> list[int]:
    """Topological order of node positions as the authors' code computes it (a stack-based Kahn
    over nodes in input order and edges in input order)."""
    idx = problem.index
    n = len(problem.nodes)
    indeg = [0] * n
    out: list[list[int]] = [[] for _ in range(n)]
    for e in problem.edges:
        indeg[idx[e.target]] += 1
        out[idx[e.source]].append(idx[e.target])
    stack = [v for v in range(n) if indeg[v] == 0]
    order = []
    while stack:
        v = stack.pop()
        order.append(v)
        for w in out[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                stack.append(w)
    return order


def _choice(problem: PiperProblem, t: int, ar: bool) -> dict[NodeId, str] | None:
    """Every node on its first TMPC with (``ar``) or without activation recomputation at ``t``."""
    ch = {}
    for nd in problem.nodes:
        c = next((c for c in nd.tmpcs.get(t, ()) if c.is_recompute == ar), None)
        if c is None:
            return None
        ch[nd.id] = c.id
    return ch


def _even_layouts(order: list[int], max_stages: int) -> Iterator[Layout]:
    """All nodes in ``order`` split evenly into 1..max_stages stages (the later stages larger)."""
    n = len(order)
    for stages in range(1, min(max_stages, n) + 1):
        per, larger = divmod(n, stages)
        out, nxt = [], 0
        for st in range(stages):
            size = per + (st >= stages - larger)
            out.append(order[nxt:nxt + size])
            nxt += size
        yield out


def _around(problem: PiperProblem, layers: list[int], layer_name: str) -> tuple[list[int], list[int]]:
    """The nodes before the ``layer_name`` layers (``initial``) and after them (``final``)."""
    idx = problem.index
    lset = set(layers)
    initial: list[int] = []
    final: list[int] = []
    ini: set[int] = set()
    fin: set[int] = set()
    edges = [(idx[e.source], idx[e.target]) for e in problem.edges]
    while len(layers) + len(initial) + len(final) < len(problem.nodes):
        before = len(initial) + len(final)
        for u, v in edges:
            if u not in ini and u not in lset and u not in fin and (v in ini or v in lset):
                initial.append(u)
                ini.add(u)
            if v not in ini and v not in lset and v not in fin and (u in lset or u in fin):
                final.append(v)
                fin.add(v)
        if len(initial) + len(final) == before:
            raise InvalidGraphError(f"some nodes are neither before nor after the {layer_name!r} layers")
    return initial, final


def _layer_layouts(problem: PiperProblem, order: list[int], layer_name: str, separate: bool) -> Iterator[Layout]:
    """The ``layer_name`` layers split evenly, the other nodes joining the first/last stage (and,
    with ``separate``, also as stages of their own)."""
    layers = [v for v in order if problem.nodes[v].name == layer_name]
    initial, final = _around(problem, layers, layer_name)
    for sep in ((0, 1) if separate else (0,)):
        for stages in range(1 + 2 * sep, min(problem.devices, len(layers) + 2 * sep) + 1):
            out: Layout = [[] for _ in range(stages)]
            ts = stages - 2 * sep
            per, larger = divmod(len(layers), ts)
            nxt = 0
            for st in range(sep, stages - sep):
                size = per + (st >= stages - sep - larger)
                out[st].extend(layers[nxt:nxt + size])
                nxt += size
            out[0].extend(initial)
            out[-1].extend(final)
            yield out


def _candidates(problem: PiperProblem, layouts: Iterator[Layout], tensor_parallel: bool) -> Iterator[list[StageSpec]]:
    """Every equi plan: each layout with every (d, t) that fits and recomputation on or off."""
    K, N = problem.devices, problem.batch
    ts = sorted({t for nd in problem.nodes for t in nd.tmpcs})
    ts = [t for t in ts if all(t in nd.tmpcs for nd in problem.nodes)
          and (problem.server_size is None or problem.server_size % t == 0)]
    if not tensor_parallel:
        ts = [t for t in ts if t == 1]
    choices = {(t, ar): _choice(problem, t, ar) for t in ts for ar in (False, True)}
    ids = [nd.id for nd in problem.nodes]
    for layout in layouts:
        ns = len(layout)
        for d in range(1, min(K, N) // ns + 1):
            if N % d:
                continue
            for t in ts:
                if ns * d * t > K:
                    break
                for ar in (False, True):
                    ch = choices[(t, ar)]
                    if ch is not None:
                        yield [([ids[v] for v in grp], d, t, {ids[v]: ch[ids[v]] for v in grp}) for grp in layout]


@renamed_kwargs(prob="problem", max_batch="batch")
def plan_equi(
    problem: PiperProblem,
    *,
    tensor_parallel: bool = True,
    layer_name: str | None = None,
    separate: bool = True,
    devices: int | None = None,
    memory: float | None = None,
    bandwidth: float | None = None,
    batch: int | None = None,
    server_size: int | None = None,
    intra_bandwidth: float | None = None,
) -> TrainingPlan:
    """The "equi" baseline (PipeDream-2BW-like, Section 5 of the paper).

    Equal groups of layers, the same ``d`` and ``t`` on every stage, activation recomputation
    everywhere or nowhere; the best of all of them.

    Parameters
    ----------
    problem : PiperProblem
    tensor_parallel : bool
        ``False`` is "equi-no-TP" (``t = 1``).
    layer_name : str, optional
        Split only the layers of this name (e.g. ``"ParallelTransformerLayer"``) evenly; the
        nodes before them join the first stage and those after the last. Without it, all nodes
        are split evenly in topological order (the paper's GNMT / ResNet runs).
    separate : bool
        With ``layer_name``, also try the nodes before and after the layers as stages of their own.
    devices, memory, bandwidth, batch, server_size, intra_bandwidth : optional
        Settings in place of the problem's, as in :func:`plan_training`.

    Returns
    -------
    TrainingPlan
        ``status`` ``"feasible"`` (the best equi plan, not optimal over all plans) or
        ``"infeasible"`` (no equi plan fits in memory; Piper may still find one); no table.

    Raises
    ------
    InvalidArgumentError
        A setting out of range or a flag that is not a bool.
    InvalidGraphError
        With ``layer_name``: some nodes are neither before nor after those layers.

    Examples
    --------
    >>> from stagecut.training import chain_problem
    >>> prob = chain_problem([2.0, 2.0], devices=2, memory=1e9, bandwidth=1.0, batch=2, mem_b=1.0)
    >>> plan_equi(prob).objective, plan_equi(prob, memory=0.5).status
    (2.0, 'infeasible')
    """
    t0 = time.perf_counter()
    tensor_parallel = check_flag(tensor_parallel, "tensor_parallel")
    separate = check_flag(separate, "separate")
    if layer_name is not None and not isinstance(layer_name, str):
        raise InvalidArgumentError(f"layer_name must be a string, got {layer_name!r}")
    problem = apply_settings(problem, devices=devices, memory=memory, bandwidth=bandwidth, batch=batch,
                             server_size=server_size, intra_bandwidth=intra_bandwidth)
    order = _kahn_stack_order(problem)
    layouts = (_even_layouts(order, problem.devices) if layer_name is None
               else _layer_layouts(problem, order, layer_name, separate))
    best: TrainingEvaluation | None = None
    count = 0
    for stages in _candidates(problem, layouts, tensor_parallel):
        count += 1
        ev = evaluate_training(problem, stages)
        if ev.feasible and (best is None or ev.tps < best.tps):
            best = ev
    return TrainingPlan(
        objective=None if best is None else best.tps, status="infeasible" if best is None else "feasible",
        method="equi" if tensor_parallel else "equi-no-tp", runtime_s=time.perf_counter() - t0,
        stats={"candidates": count}, stages=() if best is None else best.stages,
        notes=("the best plan of the equi family (equal groups, one d and t), not optimal over all plans",),
        devices=problem.devices, memory=problem.memory, bandwidth=problem.bandwidth, batch=problem.batch,
        server_size=problem.server_size, intra_bandwidth=problem.intra_bandwidth)


_SETTINGS = ("devices", "memory", "bandwidth", "batch", "server_size", "intra_bandwidth")


@renamed_kwargs(prob="problem", max_batch="batch")
def plan_baselines(problem: PiperProblem, *, layer_name: str | None = None, **settings: Any) -> dict[str, TrainingPlan]:
    """Piper and the paper's baselines on one problem.

    Parameters
    ----------
    problem : PiperProblem
    layer_name : str, optional
        For the equi baselines (see :func:`plan_equi`).
    **settings
        Keyword arguments of :func:`plan_training` (``devices``, ``memory``, ``bandwidth``,
        ``batch``, ``knapsack``...); the settings among them also go to :func:`plan_equi`.

    Returns
    -------
    dict of str to TrainingPlan
        ``"piper"``, ``"no-dp"``, ``"no-tp"``, ``"no-ar"``, ``"equi"``, ``"equi-no-tp"``.

    Raises
    ------
    InvalidArgumentError, InvalidGraphError, TooManyIdealsError
        As :func:`plan_training` and :func:`plan_equi`.

    Examples
    --------
    >>> from stagecut.training import chain_problem
    >>> prob = chain_problem([1.0, 1.0, 4.0], devices=2, memory=1e9, bandwidth=1.0, batch=2, params=1.0)
    >>> {k: p.objective for k, p in plan_baselines(prob).items()}
    {'piper': 4.0, 'no-dp': 4.0, 'no-tp': 4.0, 'no-ar': 4.0, 'equi': 5.0, 'equi-no-tp': 5.0}
    """
    keys = {k: settings[k] for k in _SETTINGS if k in settings}
    return {
        "piper": plan_training(problem, **settings),
        "no-dp": plan_training(problem, data_parallel=False, **settings),
        "no-tp": plan_training(problem, tensor_parallel=False, **settings),
        "no-ar": plan_training(problem, recompute=False, **settings),
        "equi": plan_equi(problem, layer_name=layer_name, **keys),
        "equi-no-tp": plan_equi(problem, layer_name=layer_name, tensor_parallel=False, **keys),
    }

