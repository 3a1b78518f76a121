"""Summaries of a sweep's results table: what the papers tabulate, per device count.

An *instance* is one (objective, graph, device count, memory, seed); its *best* is the least
objective any method found for it and its *bound* the largest proven lower bound any method gave
(the best, when a method proved its answer optimal). Per device count, :func:`summarize` gives
one row over all methods (``method = "all"``: the best of each instance) and one row per method
(that method's answers):

``bound_best``
    Geometric mean over instances of ``bound / answer``: 1 means proven optimal everywhere.
``answer_baseline``
    Geometric mean of ``answer / baseline``, ``baseline`` being the answer of the baseline
    method (default: the first method in the table): below 1 is better than the baseline.
``optimal``
    Share of instances whose answer is proven optimal (``bound >= answer`` within 1e-9, the bound
    from any method: a heuristic's answer that meets the exact DP's optimum counts).
``runtime_p50``, ``runtime_p90``, ``runtime_max``
    Quantiles of the tasks' wall-clock seconds.

Ratios skip instances where a term is missing or not positive; ``n_ratio`` says how many counted.

In a certify sweep (``problem`` ``"certify"``) each method is a level of the MTPP lower-bound
ladder and each answer the plan its task certified: a level's ``bound_best`` and ``optimal`` use
that level's own bound against the instance's best plan (the paper's table: bound / best per level
and device count), and the ``all`` row the best bound of any level. A cheaper partition a level
found (the ``subgraph`` level's optimum of the whole graph, the ``exact`` MIP's; the
``best_objective`` of the row's ``detail`` column) counts as a plan of the instance.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import astuple, dataclass, fields
from typing import Any

from stagecut.errors import InvalidArgumentError
from stagecut.sweep.table import ERROR, read_results

__all__ = ["SummaryRow", "summarize", "format_report", "FORMATS"]

#: output formats of :func:`format_report`
FORMATS = ("markdown", "csv")
_TOL = 1e-9


@dataclass(frozen=True, kw_only=True)
class SummaryRow:
    """One line of a sweep summary (see the module docs for the columns)."""

    devices: int
    method: str
    instances: int
    solved: int
    errors: int
    n_ratio: int
    bound_best: float | None
    answer_baseline: float | None
    optimal: float
    runtime_p50: float | None
    runtime_p90: float | None
    runtime_max: float | None


def _gmean(values: Iterable[float]) -> tuple[float | None, int]:
    logs = [math.log(v) for v in values if v > 0 and math.isfinite(v)]
    return (math.exp(sum(logs) / len(logs)) if logs else None), len(logs)


def _quantile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between order statistics (numpy's default)."""
    if not values:
        return None
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _label(row: Mapping[str, Any]) -> str:
    opts = row.get("options") or "{}"
    return str(row["method"]) if opts == "{}" else f"{row['method']} {opts}"


def _ok(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _costs(row: Mapping[str, Any]) -> list[float]:
    """The partitions a task found: its answer, and for a certificate the cheaper partition a
    level of the ladder found (``best_objective`` in its ``detail`` column), when there is one."""
    out = [float(row["objective"])] if row["status"] != ERROR and _ok(row["objective"]) else []
    if row.get("problem") == "certify" and row.get("detail"):
        best = json.loads(row["detail"]).get("best_objective")
        if _ok(best):
            out.append(float(best))
    return out


def summarize(rows: Sequence[Mapping[str, Any]] | str | os.PathLike[str],
              baseline: str | None = None) -> tuple[SummaryRow, ...]:
    """Per device count: one row over all methods, then one per method.

    Parameters
    ----------
    rows : sequence of mapping, or a path
        The table's rows (:func:`~stagecut.sweep.table.read_results`), or the table's path.
    baseline : str, optional
        The method the answers are compared with (a method name, or a name with its options as
        the summary labels it); default the first method of the table.

    Returns
    -------
    tuple of SummaryRow

    Raises
    ------
    InvalidArgumentError
        ``baseline`` is not a method of the table.

    Examples
    --------
    >>> rows = [{"graph": g, "devices": 2, "method": m, "objective": obj, "lower_bound": lb,
    ...          "status": st, "runtime_s": 1.0}
    ...         for g, m, obj, lb, st in [("a", "dp", 4.0, 4.0, "optimal"), ("a", "dpl", 5.0, 2.0, "feasible"),
    ...                                   ("b", "dp", 9.0, 9.0, "optimal"), ("b", "dpl", 9.0, 3.0, "feasible")]]
    >>> [(r.method, round(r.bound_best, 3), round(r.answer_baseline, 3), r.optimal)
    ...  for r in summarize(rows, baseline="dpl")]
    [('all', 1.0, 0.894, 1.0), ('dp', 1.0, 0.894, 1.0), ('dpl', 0.894, 1.0, 0.5)]
    """
    if isinstance(rows, (str, os.PathLike)):
        rows = read_results(rows)
    labels: list[str] = []
    for r in rows:
        if _label(r) not in labels:
            labels.append(_label(r))
    if baseline is not None and baseline not in labels:
        named = [lab for lab in labels if lab.split(" ", 1)[0] == baseline]
        if not named:
            raise InvalidArgumentError(f"baseline: {baseline!r} is not a method of the table ({', '.join(labels)})")
        baseline = named[0]
    base = baseline if baseline is not None else (labels[0] if labels else None)
    # instance -> label -> row
    inst: dict[tuple[Any, ...], dict[str, Mapping[str, Any]]] = {}
    for r in rows:
        key = (r.get("problem"), r["graph"], r["devices"], r.get("memory"), r.get("seed"))
        inst.setdefault(key, {})[_label(r)] = r
    out: list[SummaryRow] = []
    for k in sorted({key[2] for key in inst}):
        group = {key: by for key, by in inst.items() if key[2] == k}
        best: dict[tuple[Any, ...], float | None] = {}
        bound: dict[tuple[Any, ...], float | None] = {}
        for key, by in group.items():
            answers = [c for r in by.values() for c in _costs(r)]
            best[key] = min(answers) if answers else None
            bounds = [r["lower_bound"] for r in by.values() if r["status"] != ERROR and _ok(r["lower_bound"])]
            bounds += [r["objective"] for r in by.values() if r["status"] == "optimal" and _ok(r["objective"])]
            bound[key] = max(bounds) if bounds else None
        for label in ["all", *labels]:
            answer: dict[tuple[Any, ...], float | None] = {}
            task_rows: list[Mapping[str, Any]] = []
            for key, by in group.items():
                if label == "all":
                    answer[key] = best[key]
                    task_rows += list(by.values())
                elif label in by:
                    r = by[label]
                    answer[key] = r["objective"] if r["status"] != ERROR and _ok(r["objective"]) else None
                    task_rows.append(r)
            if not task_rows:
                continue
            proved = {key: b for key, b in bound.items() if b is not None}
            if label != "all" and all(r.get("problem") == "certify" for r in task_rows):
                # a level of the ladder: its own bound against the instance's best plan
                answer = {key: best[key] if answer[key] is not None else None for key in answer}
                proved = {key: float(by[label]["lower_bound"]) for key, by in group.items()
                          if label in by and by[label]["status"] != ERROR and _ok(by[label]["lower_bound"])}
            solved = {key: a for key, a in answer.items() if a is not None}
            bb, n_ratio = _gmean(proved[key] / a for key, a in solved.items() if key in proved and a != 0)
            base_of = {key: min(_costs(by[base])) for key, by in group.items() if base in by and _costs(by[base])}
            ab, _ = _gmean(a / base_of[key] for key, a in solved.items() if key in base_of and base_of[key] != 0)
            proven = sum(1 for key, a in solved.items() if key in proved and proved[key] >= a * (1 - _TOL) - _TOL)
            times = [float(r["runtime_s"]) for r in task_rows if r["status"] != ERROR and _ok(r.get("runtime_s"))]
            out.append(SummaryRow(
                devices=int(k), method=label, instances=len(answer), solved=len(solved),
                errors=sum(1 for r in task_rows if r["status"] == ERROR), n_ratio=n_ratio, bound_best=bb,
                answer_baseline=ab, optimal=proven / len(answer) if answer else 0.0,
                runtime_p50=_quantile(times, 0.5), runtime_p90=_quantile(times, 0.9),
                runtime_max=max(times) if times else None))
    return tuple(out)


def _cell(v: float | None, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}g}"


def format_report(summary: Sequence[SummaryRow], fmt: str = "markdown", baseline: str | None = None) -> str:
    """The summary as a Markdown table (4 significant digits) or CSV (full precision).

    Parameters
    ----------
    summary : sequence of SummaryRow
        :func:`summarize`'s rows.
    fmt : {"markdown", "csv"}
    baseline : str, optional
        Named in the Markdown header of the ``answer/baseline`` column.

    Returns
    -------
    str

    Raises
    ------
    InvalidArgumentError
        An unknown ``fmt``.

    Examples
    --------
    >>> row = SummaryRow(devices=2, method="all", instances=2, solved=2, errors=0, n_ratio=2, bound_best=1.0,
    ...                  answer_baseline=0.8944, optimal=1.0, runtime_p50=0.5, runtime_p90=0.9, runtime_max=1.0)
    >>> print(format_report([row], "csv"), end="")
    devices,method,instances,solved,errors,n_ratio,bound_best,answer_baseline,optimal,runtime_p50,runtime_p90,runtime_max
    2,all,2,2,0,2,1.0,0.8944,1.0,0.5,0.9,1.0
    """
    names = [f.name for f in fields(SummaryRow)]
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(names)
        for r in summary:
            w.writerow(["" if v is None else repr(v) if isinstance(v, float) else str(v) for v in astuple(r)])
        return buf.getvalue()
    if fmt != "markdown":
        raise InvalidArgumentError(f"format: expected one of {FORMATS}, got {fmt!r}")
    head = ["k", "method", "instances", "solved", "errors", "bound/answer (gmean)",
            f"answer/{baseline or 'baseline'} (gmean)", "proven optimal", "time p50 (s)", "time p90 (s)",
            "time max (s)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    for r in summary:
        cells = [str(r.devices), r.method, str(r.instances), str(r.solved), str(r.errors), _cell(r.bound_best),
                 _cell(r.answer_baseline), f"{100 * r.optimal:.0f}%", _cell(r.runtime_p50, 3),
                 _cell(r.runtime_p90, 3), _cell(r.runtime_max, 3)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
