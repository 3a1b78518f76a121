"""The one result protocol shared by every solver.

Every solver returns a frozen dataclass derived from :class:`Result` (the pipeline planner's
:class:`Plan`, SliceGraph's ``SlicePlan``, ``certify``'s ``Certificate``, Piper's
``TrainingPlan``...). The shared fields mean the same everywhere:

``objective``
    The cost of the answer as re-scored by the objective's evaluator, in the unit of the input's
    costs (time per sample for throughput objectives); ``None`` when no answer exists
    (``status == "infeasible"``).
``status``
    One of :data:`STATUSES`: ``"optimal"`` (proven optimal over the set the solver's docs state),
    ``"feasible"`` (a valid answer, optimality not proven), ``"time_limit"`` (stopped by the time
    limit: the best answer so far, possibly none), ``"infeasible"`` (proven: no answer exists),
    ``"unknown"`` (a heuristic found no answer and nothing proves that none exists).
``lower_bound``
    A proven lower bound on the optimum (``None`` when none is known); never above it.
``gap``
    ``(objective - lower_bound) / objective`` (``0.0`` when both are 0; ``None`` when unknown).
``method``, ``seed``, ``runtime_s``
    The solver that ran, its seed (``None`` when deterministic) and the wall-clock seconds.
``stats``
    Counters under one naming: ``ideals``, ``pairs`` (ideal pairs visited), ``decodes``,
    ``mip_nodes``, ``mip_vars``, ``mip_constraints``, ``build_s``, ``solve_s``... A front end
    may add ``time_unit`` and ``objective_name`` (strings: ``"s"``, ``"time per traced batch"``):
    :meth:`Result.summary` then prints them instead of its defaults.
``stages``
    The stages in pipeline order (:class:`Stage` or a subclass), each with its nodes, its load
    and the parts of the load, and its memory.
``notes``
    Plain-language remarks (a fallback taken, a setting added from the file...).

and every result has ``assignment() -> {node id: stage index}``, ``to_json()``, a ``from_json()``
that round-trips (``type(r).from_json(r.to_json()) == r``), :meth:`Result.summary` and
:meth:`Result.table` (the human-readable block the CLI prints), and a short ``repr``.

Examples
--------
>>> import stagecut as sc
>>> plan = sc.partition(sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0]), devices=3)
>>> plan.objective, plan.status, plan.gap, plan.assignment()
(4.0, 'optimal', 0.0, {0: 0, 1: 1, 2: 1, 3: 1, 4: 2})
>>> sc.Plan.from_json(plan.to_json()) == plan
True
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

from stagecut.errors import InvalidGraphError
from stagecut.results_json import _encode, _from_dict, _short
from stagecut.units import Display, format_number

__all__ = [
    "STATUSES", "Status", "NodeId", "Stat", "Stage", "DeviceLoad", "Result", "Evaluation", "Plan",
    "format_ranges", "node_list_notes",
]

#: A node id as given by the input (ints and strings round-trip through JSON; tuples become lists
#: in JSON and come back as tuples).
NodeId = Hashable
#: The value of a counter in ``stats``.
Stat = int | float | str | None
Status = Literal["optimal", "feasible", "time_limit", "infeasible", "unknown"]
STATUSES: tuple[Status, ...] = ("optimal", "feasible", "time_limit", "infeasible", "unknown")

R = TypeVar("R", bound="Result")


def _sorted_ids(ids: typing.Sequence[NodeId]) -> list[NodeId]:
    """``ids`` in increasing order when they are all integers (a set shown as ranges), else as given."""
    ids = list(ids)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in ids):
        return sorted(ids)  # type: ignore[type-var]
    return ids


def _runs(ids: typing.Sequence[NodeId]) -> list[str]:
    parts: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        if isinstance(ids[i], int) and not isinstance(ids[i], bool):
            while j + 1 < len(ids) and isinstance(ids[j + 1], int) and ids[j + 1] == ids[j] + 1:  # type: ignore[operator]
                j += 1
        parts.append(str(ids[i]) if j == i else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return parts


def format_ranges(ids: typing.Sequence[NodeId], limit: int | None = None) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"``: integer ids in increasing order, runs of
    consecutive ids as ``a-b``; cut after ``limit`` characters with how many entries are left.

    >>> format_ranges([5, 0, 1, 2, 8, 7]), format_ranges(["a", "b"])
    ('0-2, 5, 7-8', 'a, b')
    >>> format_ranges(list(range(0, 40, 2)), limit=20)
    '0, 2, 4, 6, 8, 10, ... and 14 more'
    """
    parts = _runs(_sorted_ids(ids))
    text = ", ".join(parts)
    if limit is not None and len(text) > limit:
        cut = text[:limit].rsplit(",", 1)[0]
        shown = cut.count(",") + 1
        text = f"{cut}, ... and {len(parts) - shown} more"
    return text


def node_list_notes(stages: typing.Sequence[Stage], width: int | None = 60) -> list[str]:
    """What the stage table's node lists need said about them, and only that: that ``a-b`` is
    a range of ids (when one is shown) and that lists were cut (when one was)."""
    ranges = cut = False
    for s in stages:
        runs = _runs(_sorted_ids(s.nodes))
        ranges = ranges or any(len(r.split("-")) == 2 and all(x.isdigit() for x in r.split("-")) for r in runs)
        text = ", ".join(runs)
        cut = cut or (width is not None and len(text) > width)
    out = []
    if ranges:
        out.append("ids a-b: every id from a to b")
    if cut:
        out.append("lists cut short: the full lists are in --json and -o FILE")
    return out


def _fmt(x: float | None, digits: int = 6) -> str:
    return format_number(x, digits)


# ------------------------------------------------------------------------------ stages
@dataclass(frozen=True, kw_only=True)
class Stage:
    """One stage of a pipeline, in pipeline order.

    ``load`` is the stage's cost under the objective (the pipeline's time per sample is the
    largest), ``parts`` splits it (e.g. ``{"compute": ..., "comm": ...}``), ``memory`` is what
    the stage holds (bytes, or the input's unit).
    """

    index: int
    device: str
    nodes: tuple[NodeId, ...]
    load: float
    parts: Mapping[str, float] = field(default_factory=dict)
    memory: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = _encode(self)
        return out


@dataclass(frozen=True, kw_only=True)
class DeviceLoad(Stage):
    """A stage of the throughput planner: the device it runs on and what the evaluator says of it.

    ``device`` is ``"accelerator:0"``, ``"cpu:0"``...; ``kind`` and ``kind_index`` are its two
    parts. ``load = compute + comm`` in the input's time unit (``parts`` holds the two terms; a
    CPU pays no communication); ``memory`` is the sum of its nodes' memory (the input's unit,
    typically bytes). ``feasible`` is ``False``, with ``issues`` saying why, when the device
    breaks a limit (memory, a node it cannot run).
    """

    kind: str
    kind_index: int
    feasible: bool = True
    issues: tuple[str, ...] = ()

    @property
    def compute(self) -> float:
        """The compute part of :attr:`load` (sum of the nodes' times on this kind)."""
        return self.parts.get("compute", 0.0)

    @property
    def comm(self) -> float:
        """The communication part of :attr:`load` (0 on a CPU)."""
        return self.parts.get("comm", 0.0)


# ------------------------------------------------------------------------------ results
@dataclass(frozen=True, kw_only=True, repr=False)
class Result:
    """Base of every solver result (see the module docs for what each field means)."""

    #: what :attr:`objective` measures, for the human-readable output
    objective_name: ClassVar[str] = "time per sample"

    objective: float | None
    status: Status
    lower_bound: float | None = None
    method: str
    seed: int | None = None
    runtime_s: float = 0.0
    stats: Mapping[str, Stat] = field(default_factory=dict)
    stages: tuple[Stage, ...] = ()
    notes: tuple[str, ...] = ()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if "__repr__" not in cls.__dict__:  # keep the short repr (dataclass() only adds a missing one)
            cls.__repr__ = Result.__repr__  # type: ignore[method-assign]

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    @property
    def gap(self) -> float | None:
        """``(objective - lower_bound) / objective``; 0 when both are 0; ``None`` when unknown."""
        if self.objective is None or self.lower_bound is None or not math.isfinite(self.lower_bound):
            return None
        if self.objective == 0:
            return 0.0
        return max(0.0, (self.objective - self.lower_bound) / self.objective)

    @property
    def feasible(self) -> bool:
        """Whether the result holds an answer (``objective`` is not ``None``)."""
        return self.objective is not None

    def assignment(self) -> dict[NodeId, int]:
        """``{node id: stage index}`` (stages in pipeline order)."""
        return {v: s.index for s in self.stages for v in s.nodes}

    # -- JSON
    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict: the shared fields first, then the result's own; ``gap`` is
        included (derived); non-finite numbers are the strings ``"inf"``/``"-inf"``."""
        out: dict[str, Any] = {"kind": type(self).__name__, "gap": self.gap}
        out.update(_encode(self))
        return out

    def dumps(self, **kw: Any) -> str:
        """``json.dumps(self.to_json())``."""
        return json.dumps(self.to_json(), **kw)

    @classmethod
    def from_json(cls: type[R], data: Mapping[str, Any] | str) -> R:
        """Rebuild a result from :meth:`to_json`'s dict (or its JSON text).

        The data is checked as a whole, each problem one :class:`~stagecut.errors.InvalidGraphError`
        naming the field: the types of the fields, finite numbers (an objective, loads, times), a
        status of :data:`STATUSES` that agrees with the objective, a lower bound not above the
        objective, the ``gap`` field agreeing with the two, and stages that number the stages.
        """
        data = _load(data, cls.__name__)
        kind = data.get("kind")
        if kind is not None and kind != cls.__name__:
            raise InvalidGraphError(f"kind: this is a {_short(kind)} result, not a {cls.__name__}")
        try:
            out: R = _from_dict(cls, data, cls.__name__)
        except InvalidGraphError:
            raise
        except (TypeError, ValueError, AttributeError, OverflowError) as exc:  # a constructor's own check
            raise InvalidGraphError(f"{cls.__name__}: {exc}") from None
        _check_result(out, data)
        return out

    # -- human-readable
    def summary(self, display: Display | None = None) -> str:
        """The summary block every CLI subcommand prints (objective, status, bound/gap, method,
        time, notes); ``display`` gives the input's units (:class:`~stagecut.units.Display`)."""
        unit, name = self.stats.get("time_unit"), self.stats.get("objective_name")  # set by the front ends
        d = display or Display(time=unit if isinstance(unit, str) else None)
        gap = self.gap
        bound = "none known" if self.lower_bound is None else d.with_unit(self.lower_bound)
        if gap is not None:
            bound += f" (gap {100 * gap:.2f}%)"
        objective = "none" if self.objective is None else d.with_unit(self.objective)
        lines = [
            f"objective  {objective} ({name if isinstance(name, str) else self.objective_name})",
            f"status     {self.status}",
            f"bound      {bound}",
            f"method     {self.method}" + (f" (seed {self.seed})" if self.seed is not None else ""),
            f"time       {self.runtime_s:.3f} s",
        ]
        lines += [f"note       {n}" for n in self.notes]
        return "\n".join(lines)

    def table(self, width: int | None = 60, display: Display | None = None) -> str:
        """The stage table: one row per stage (index, device, load and its parts, memory, the
        number of nodes and their ids; with ``display.names``, the first and last node's name).

        Node ids are shown in increasing order with runs as ranges (:func:`format_ranges`), cut
        at ``width`` characters (``None``: never); the full lists are in :meth:`to_json` (the
        CLI's ``--json`` and ``-o``). ``display`` gives the units of the headers
        (:class:`~stagecut.units.Display`).
        """
        d = display or Display()
        parts = sorted({p for s in self.stages for p in s.parts})
        memory = [s.memory for s in self.stages]
        sized = display is not None
        head = ["stage", "device", d.time_label("load"), *(d.time_label(p) for p in parts),
                d.size_label(memory) if sized else "memory", "nodes"]
        names = _first_last(self.stages, d.names)
        if names:
            head += ["first node", "last node"]
        head.append("ids")
        rows = [head]
        for i, s in enumerate(self.stages):
            row = [str(s.index), s.device, _fmt(s.load), *(_fmt(s.parts.get(p)) for p in parts),
                   d.size(s.memory, memory) if sized else _fmt(s.memory), str(len(s.nodes))]
            if names:
                row += names[i]
            rows.append([*row, format_ranges(s.nodes, width)])
        widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
        return "\n".join(("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1]).rstrip() for r in rows)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(objective={_fmt(self.objective)}, status={self.status!r}, "
                f"lower_bound={_fmt(self.lower_bound)}, method={self.method!r}, stages={len(self.stages)})")


def _first_last(stages: typing.Sequence[Stage], names: Mapping[NodeId, str] | None,
                cut: int = 28) -> list[tuple[str, str]]:
    """Each stage's first and last node by name, in the order of ``names`` (topological); ``[]``
    when there are no names."""
    if not names:
        return []
    pos = {v: i for i, v in enumerate(names)}

    def short(v: NodeId) -> str:
        text = str(names.get(v, v))
        return text if len(text) <= cut else text[:cut - 3] + "..."

    out = []
    for s in stages:
        known = sorted((v for v in s.nodes if v in pos), key=pos.__getitem__)
        out.append((short(known[0]), short(known[-1])) if known else ("-", "-"))
    return out


def _load(data: Any, what: str) -> Mapping[str, Any]:
    """The JSON object of a saved result, from a mapping or JSON text (one clear error otherwise)."""
    if isinstance(data, (str, bytes, bytearray)):
        try:
            data = json.loads(data)
        except RecursionError:
            raise InvalidGraphError(f"{what}: the JSON is nested too deeply to read") from None
        except ValueError as exc:
            raise InvalidGraphError(f"{what}: not valid JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, Mapping):
        raise InvalidGraphError(f"{what}: expected a JSON object (a saved result), got {_short(data)}")
    return data


#: relative slack of the consistency checks of :func:`_check_result` (round-off of the solvers)
_CHECK_TOL = 1e-6


def _check_result(r: Result, data: Mapping[str, Any]) -> None:
    """The consistency of a result read from a file (see :meth:`Result.from_json`)."""
    name = type(r).__name__
    obj, lb = r.objective, r.lower_bound
    if obj is not None and not math.isfinite(obj):
        raise InvalidGraphError(f"{name}.objective: {obj} is not a finite number")
    if lb is not None and (math.isnan(lb) or (lb == math.inf and r.status != "infeasible")):
        raise InvalidGraphError(f"{name}.lower_bound: {lb} is not a lower bound (only an infeasible answer has inf)")
    if obj is None and r.status in ("optimal", "feasible"):
        raise InvalidGraphError(f"{name}.status: {r.status!r} with no objective")
    if obj is not None and r.status == "infeasible":
        raise InvalidGraphError(f"{name}.status: 'infeasible' with an objective ({obj})")
    if obj is not None and lb is not None and lb > obj + _CHECK_TOL * max(1.0, abs(obj)):
        raise InvalidGraphError(f"{name}.lower_bound: {lb} is above the objective {obj}")
    if not math.isfinite(r.runtime_s) or r.runtime_s < 0:
        raise InvalidGraphError(f"{name}.runtime_s: {r.runtime_s} is not a number of seconds")
    if r.seed is not None and (r.seed < 0):
        raise InvalidGraphError(f"{name}.seed: {r.seed} is negative")
    gap = data.get("gap")
    if gap is not None:
        if not isinstance(gap, (int, float)) or isinstance(gap, bool) or not math.isfinite(gap) or gap < 0:
            raise InvalidGraphError(f"{name}.gap: expected a non-negative number, got {_short(gap)}")
        if r.gap is None or abs(gap - r.gap) > _CHECK_TOL * max(1.0, abs(gap)):
            raise InvalidGraphError(f"{name}.gap: {gap} does not agree with the objective and lower bound "
                                    f"(gap {r.gap})")
    if obj is not None and not r.stages and "stages" in {f.name for f in dataclasses.fields(r)}:
        raise InvalidGraphError(f"{name}.stages: an answer (objective {obj}) with no stages")
    for i, st in enumerate(r.stages):
        if st.index != i:
            raise InvalidGraphError(f"{name}.stages[{i}].index: {_short(st.index)}, expected {i} (pipeline order)")
        for x, what in ((st.load, "load"), (st.memory, "memory"), *((v, f"parts[{k!r}]") for k, v in st.parts.items())):
            if isinstance(x, float) and not math.isfinite(x) and not (r.status == "infeasible" and x == math.inf):
                # (an infeasible plan's block past a hard memory limit costs inf: MTPP certificates keep it)
                raise InvalidGraphError(f"{name}.stages[{i}].{what}: {x} is not a finite number")
    for attr in ("devices", "cpus"):
        value = getattr(r, attr, None)
        if isinstance(value, int) and value < 0:
            raise InvalidGraphError(f"{name}.{attr}: {value} is negative")


@dataclass(frozen=True, kw_only=True)
class Plan(Result):
    """A placement for the pipeline throughput (max-load) objective.

    ``stages`` are :class:`DeviceLoad` in pipeline order (empty when infeasible);
    ``devices``/``cpus``/``memory`` are the settings it was solved for (``devices``: the number
    of accelerators; ``memory``: per accelerator, in the input's unit); ``contiguous`` says
    whether the split's quotient graph is acyclic (its devices form a pipeline, a chain of
    ideals: see :func:`stagecut.is_contiguous`; ``False`` only from the non-contiguous IP).

    Examples
    --------
    >>> import stagecut as sc
    >>> g = sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0])
    >>> plan = sc.partition(g, devices=3)
    >>> [(s.device, s.nodes, s.load) for s in plan.stages]
    [('accelerator:0', (0,), 4.0), ('accelerator:1', (1, 2, 3), 4.0), ('accelerator:2', (4,), 4.0)]
    >>> plan.device_of()[2]
    ('accelerator', 1)
    >>> sc.evaluate(g, plan.device_of()).objective
    4.0
    """

    stages: tuple[DeviceLoad, ...] = ()
    devices: int
    cpus: int
    memory: float
    contiguous: bool = True

    def device_of(self) -> dict[NodeId, tuple[str, int]]:
        """``{node id: (device kind, index of that kind)}``, the form :func:`stagecut.evaluate` takes."""
        return {v: (s.kind, s.kind_index) for s in self.stages for v in s.nodes}

    def to_split(self) -> dict[str, Any]:
        """The split JSON object of the workload format (``fpgas`` / ``cpus`` lists of
        ``{"nodes", "load"}``, in pipeline order, and ``maxLoad``); ``stagecut.read_split``
        reads it back."""
        out: dict[str, Any] = {"maxLoad": self.objective, "fpgas": [], "cpus": []}
        for d in sorted(self.stages, key=lambda s: (s.kind != "accelerator", s.kind, s.kind_index)):
            key = "fpgas" if d.kind == "accelerator" else "cpus"
            out[key].append({"nodes": _encode(d.nodes), "load": _encode(d.load)})
        return out


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    """The max-load evaluator's verdict on a split (see :func:`stagecut.evaluate`).

    ``objective`` is the largest device load, in the input's time unit (finite: a split that
    breaks a limit has ``feasible=False`` and its ``issues`` listed). ``stages`` are the
    devices used, accelerators first, each kind by index (the evaluator does not know the
    pipeline order a solver chose; ``index`` is the position in this tuple). ``convex``: every
    block is convex; ``acyclic_quotient``: the blocks can be ordered as a pipeline (a chain of
    ideals, the set the DPs and the contiguous IP optimise over; implies ``convex``), also
    available as ``contiguous``.
    """

    objective: float
    stages: tuple[DeviceLoad, ...]
    feasible: bool
    convex: bool
    acyclic_quotient: bool
    issues: tuple[str, ...] = ()

    @property
    def contiguous(self) -> bool:
        """The split has an acyclic quotient (``acyclic_quotient``)."""
        return self.acyclic_quotient

    def load_of(self) -> dict[tuple[str, int], float]:
        """``{(kind, index of that kind): load}``."""
        return {(s.kind, s.kind_index): s.load for s in self.stages}

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (:meth:`from_json` reads it back)."""
        out: dict[str, Any] = {"kind": "Evaluation"}
        out.update(_encode(self))
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> Evaluation:
        """Rebuild an evaluation from :meth:`to_json`'s dict (or its JSON text)."""
        data = _load(data, "Evaluation")
        out: Evaluation = _from_dict(cls, {k: v for k, v in data.items() if k != "kind"}, cls.__name__)
        return out
