"""Every throughput :class:`~stagecut.results.Plan` is built here, from a solver's split re-scored
by :func:`~stagecut.throughput.evaluate.evaluate` (the solvers never report their own cost)."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence

from stagecut.errors import internal_error
from stagecut.results import DeviceLoad, Plan, Stat, Status
from stagecut.throughput.evaluate import evaluate
from stagecut.throughput.problem import ThroughputProblem

__all__ = ["plan_from_split", "no_plan"]


def plan_from_split(
    problem: ThroughputProblem,
    assignment: Mapping[Hashable, tuple[str, int]],
    order: Sequence[tuple[str, int]],
    *,
    solver: str,
    claimed: float,
    exact: bool,
    status: Status,
    lower_bound: float | None,
    method: str,
    stats: Mapping[str, Stat],
    notes: Sequence[str] = (),
    seed: int | None = None,
    runtime_s: float = 0.0,
    slack: float = 0.0,
) -> Plan:
    """The plan of a solver's split, scored by the evaluator.

    ``order`` lists the devices in pipeline order; ``claimed`` is what the solver says the split
    costs: the evaluator must agree (``exact``) or find no more (an IP's objective bounds the
    true load from above, up to ``slack``: the solver's round-off). ``lower_bound`` ``None``
    with status ``"optimal"`` means the objective itself. The problem's notes come first.

    Raises
    ------
    SolverError
        (internal error) the evaluator disagrees with the solver, or finds the split infeasible.
    """
    ev = evaluate(problem.graph, assignment, devices=problem.devices, cpus=problem.cpus, memory=problem.memory)
    tol = max(1e-6 * max(1.0, abs(claimed)), slack)
    if not ev.feasible or ev.objective > claimed + tol or (exact and ev.objective < claimed - tol):
        raise internal_error(f"the {solver}'s split scores {ev.objective} (issues: {list(ev.issues)}) "
                             f"but the {solver} computed {claimed}")
    by_device = {(s.kind, s.kind_index): s for s in ev.stages}
    if set(order) != set(by_device):
        raise internal_error(f"the {solver}'s device order {list(order)} does not list the devices it uses")
    stages: tuple[DeviceLoad, ...] = tuple(dataclasses.replace(by_device[d], index=i) for i, d in enumerate(order))
    if lower_bound is None and status == "optimal":
        lower_bound = ev.objective
    elif lower_bound is not None:
        lower_bound = min(lower_bound, ev.objective)
    return Plan(objective=ev.objective, status=status, lower_bound=lower_bound, method=method, seed=seed,
                runtime_s=runtime_s, stats=dict(stats), stages=stages, notes=(*problem.notes, *notes),
                devices=problem.devices, cpus=problem.cpus, memory=problem.memory,
                contiguous=ev.acyclic_quotient)


def no_plan(problem: ThroughputProblem, *, status: Status, method: str, stats: Mapping[str, Stat],
            notes: Sequence[str] = (), lower_bound: float | None = None, seed: int | None = None,
            contiguous: bool = True, runtime_s: float = 0.0) -> Plan:
    """A plan without a split (``objective=None``): infeasible, or a time limit with nothing found."""
    return Plan(objective=None, status=status, lower_bound=lower_bound, method=method, seed=seed,
                runtime_s=runtime_s, stats=dict(stats), notes=(*problem.notes, *notes),
                devices=problem.devices, cpus=problem.cpus, memory=problem.memory, contiguous=contiguous)
