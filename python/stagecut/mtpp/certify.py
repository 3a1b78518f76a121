"""Optimality certificates for MTPP partitions: climb the ladder of lower bounds.

:func:`certify` scores a plan with the independent MTPP evaluator, then runs the requested
bounds in order (``simple``, ``bottleneck``, ``bottleneck-guess``, ``exact`` by default) within
one time budget, and reports the best proven lower bound and the per-instance approximation
ratio ``objective / lower_bound``. Every MIP bound is the solver's dual bound, with its status.

Examples
--------
>>> import stagecut as sc
>>> from stagecut.mtpp.certify import certify
>>> g = sc.Graph.chain([4.0, 1.0, 1.0, 4.0], comm=0.5)
>>> cert = certify(g, [[0, 1], [2, 3]], stages=2, levels=("simple", "exact"))
>>> cert.objective, cert.lower_bound, cert.ratio
(5.5, 5.5, 1.0)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from stagecut.errors import InvalidGraphError
from stagecut.graph import Graph, kahn_order
from stagecut.mtpp.bounds import LEVELS, BoundResult, mtpp_bound
from stagecut.mtpp.model import MtppProblem, evaluate

__all__ = ["Certificate", "certify", "plan_blocks"]


def _num(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


@dataclass(frozen=True)
class Certificate:
    """The outcome of :func:`certify`.

    Attributes
    ----------
    objective : float
        The plan's MTPP cost (evaluator).
    lower_bound : float
        The best proven lower bound over the levels run (``-inf`` if none).
    ratio : float
        ``objective / lower_bound`` (``inf`` when the bound is 0 or unknown).
    table : tuple of BoundResult
        One row per level: bound, status, seconds.
    """

    objective: float
    lower_bound: float
    ratio: float
    table: tuple
    stages: int
    runtime_s: float
    best_blocks: "tuple | None" = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "objective": _num(self.objective),
            "lower_bound": _num(self.lower_bound),
            "ratio": _num(self.ratio),
            "stages": self.stages,
            "runtime_s": self.runtime_s,
            "levels": [
                {"level": r.level, "bound": _num(r.bound), "status": r.status, "seconds": r.seconds,
                 "objective": _num(r.objective)}
                for r in self.table
            ],
            "best_blocks": None if self.best_blocks is None else [list(b) for b in self.best_blocks],
        }


def plan_blocks(graph: Graph, plan: Any) -> list:
    """Blocks (lists of node ids, in pipeline order) from a SlicePlan, a Plan, a list of blocks,
    a ``{node: stage}`` mapping or a ``{node: (kind, index)}`` mapping."""
    if hasattr(plan, "blocks") and not isinstance(plan, Mapping):
        return [list(b) for b in plan.blocks]
    if hasattr(plan, "devices") and not isinstance(plan, Mapping):
        return [list(d.nodes) for d in plan.devices]
    if isinstance(plan, Mapping):
        if "blocks" in plan and isinstance(plan["blocks"], (list, tuple)):
            return [list(b) for b in plan["blocks"]]
        groups: dict = {}
        for v, s in plan.items():
            groups.setdefault(tuple(s) if isinstance(s, (list, tuple)) else s, []).append(v)
        # order the groups along the quotient DAG
        where = {v: s for s, vs in groups.items() for v in vs}
        keys = list(groups)
        succ = {s: set() for s in keys}
        for a, b in graph.edges:
            if a in where and b in where and where[a] != where[b]:
                succ[where[a]].add(where[b])
        order = kahn_order(keys, succ)
        if len(order) != len(keys):
            raise InvalidGraphError("the plan's stages form a cycle: it is not a pipeline")
        return [groups[s] for s in order]
    if isinstance(plan, (list, tuple)):
        return [list(b) for b in plan]
    raise InvalidGraphError(f"plan: cannot read blocks from a {type(plan).__name__}")


def certify(
    graph: "Graph | MtppProblem",
    plan: Any,
    *,
    stages: "int | None" = None,
    levels: Sequence[str] = LEVELS,
    time_limit: "float | None" = 600.0,
    fast_memory: "float | None" = None,
    bandwidth: "float | None" = None,
    reserved_memory: float = 0.0,
    colocate: bool = True,
    solver: str = "cbc",
    threads: "int | None" = None,
    workers: "int | None" = None,
    gap: "float | None" = None,
    seed: int = 0,
    verbose: bool = False,
    stop_when_proven: bool = True,
    on_level: "Callable[[BoundResult, float], None] | None" = None,
) -> Certificate:
    """Certify an MTPP plan: its cost, the ladder of lower bounds and the ratio.

    Parameters
    ----------
    graph : Graph or MtppProblem
        With a Graph, ``stages`` (default: the graph's ``accelerators``, else the plan's block
        count) and the memory model (``fast_memory``, ``bandwidth``, ``reserved_memory``) make
        the :class:`~stagecut.mtpp.MtppProblem`; ``colocate=False`` ignores colocation classes
        (as for a plan made with ``slice_graph(..., colocate=False)``). With a problem, all of
        these come from it.
    plan : SlicePlan, Plan, list of blocks or mapping
        The partition to certify (see :func:`plan_blocks`).
    levels : sequence of {"simple", "bottleneck", "bottleneck-guess", "exact"}
        Run in this order.
    time_limit : float, optional
        Budget in seconds for the whole ladder; each level gets what is left; a level with no
        time left is ``"skipped"``.
    stop_when_proven : bool
        Skip the remaining levels once a bound reaches the plan's cost (default).
    on_level : callable, optional
        Called as ``on_level(result, best_bound_so_far)`` after each level (the CLI prints the
        ladder as it climbs).
    """
    for lv in levels:
        if lv not in LEVELS:
            raise InvalidGraphError(f"level {lv!r} is not one of {LEVELS}")
    t0 = time.perf_counter()
    if isinstance(graph, MtppProblem):
        problem = graph
        blocks = plan_blocks(problem.graph, plan)
    elif isinstance(graph, Graph):
        blocks = plan_blocks(graph, plan)
        if stages is None:
            stages = graph.defaults.get("accelerators") or len(blocks)
            stages = max(int(stages), len(blocks))
        problem = MtppProblem(graph, stages, fast_memory, bandwidth, reserved_memory, colocate=colocate)
    else:
        raise InvalidGraphError(f"graph: expected a Graph or MtppProblem, got {type(graph).__name__}")
    ev = evaluate(problem, blocks)
    objective = ev.objective
    best = -math.inf
    table = []
    best_blocks = None
    for lv in levels:
        left = None if time_limit is None else float(time_limit) - (time.perf_counter() - t0)
        if stop_when_proven and math.isfinite(best) and best >= objective * (1 - 1e-9):
            r = BoundResult(lv, -math.inf, "skipped", 0.0, details={"reason": "plan already proven optimal"})
        elif left is not None and left <= 0.05:
            r = BoundResult(lv, -math.inf, "skipped", 0.0, details={"reason": "no time left"})
        else:
            r = mtpp_bound(problem, lv, time_limit=left, gap=gap, threads=threads, seed=seed, solver=solver,
                           workers=workers, verbose=verbose)
            if r.status in ("optimal", "time_limit", "feasible", "no_solution", "infeasible"):
                best = max(best, r.bound)
            if lv == "exact" and r.blocks is not None and r.objective is not None and r.objective < objective:
                best_blocks = r.blocks
        table.append(r)
        if on_level is not None:
            on_level(r, best)
    lb = min(best, objective) if math.isfinite(objective) else best
    ratio = objective / lb if lb > 0 and math.isfinite(lb) else (1.0 if objective == 0 else math.inf)
    return Certificate(objective=objective, lower_bound=lb, ratio=ratio, table=tuple(table), stages=problem.stages,
                       runtime_s=time.perf_counter() - t0, best_blocks=best_blocks)
