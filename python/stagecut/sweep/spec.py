"""The sweep file (TOML) and its expansion into tasks.

A sweep file names what to run; every combination of its lists is one task (one planner call)::

    objective = "throughput"          # or "slice" (MTPP, SliceGraph), "latency" or "certify"
    graphs = ["models/*.json", "example:transformer", "regal:30:erdos_renyi:1"]
    devices = [2, 4, 6, 8]
    memory = ["file"]                 # "file" (the graph's own), "none", or sizes such as "16GiB"
    seeds = [0]
    time_limit = 60                   # seconds per task (a method may set its own)
    results = "sweep.results"         # the results directory (default: <sweep file stem>.results)
    workers = 2                       # LocalCluster worker processes (default: the cores)
    task_memory = "4GiB"              # memory per task (default: none beyond Dask's worker limit)

    [[methods]]
    name = "dp"

    [[methods]]
    name = "ip"
    time_limit = 60
    options = { solver = "cbc" }      # passed to the planner as keyword arguments

    [report]
    baseline = "dp"                   # default: the first method

With ``objective = "certify"`` each method is a level of the MTPP lower-bound ladder
(:func:`stagecut.certify` with that one level), or ``"ladder"`` (the whole ladder within the
task's time limit; its ``levels`` option picks the levels), and each task first makes the plan
it certifies with :func:`stagecut.slice_graph` (seeded by the task's seed; its options in a
top-level ``plan`` table, such as ``plan = { decodes = 10000, improve = 10 }``)::

    objective = "certify"
    graphs = ["regal:100:erdos_renyi:0"]
    devices = [8, 16]
    time_limit = 600                  # per task, the plan's search and the bound together
    methods = ["cover", "block", "exact"]

Files and globs are relative to the sweep file; ``example:``, ``regal:`` and ``rwnn:`` specs are
read as the command line reads a GRAPH (:func:`stagecut.cli._common.load_graph`).

Examples
--------
>>> spec = sweep_from_dict({"graphs": ["regal:8"], "devices": [2, 3],
...                         "methods": [{"name": "dp"}, {"name": "dpl"}]})
>>> [(t.method, t.devices) for t in expand(spec)]
[('dp', 2), ('dp', 3), ('dpl', 2), ('dpl', 3)]
"""

from __future__ import annotations

import glob
import hashlib
import itertools
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stagecut.errors import InvalidArgumentError
from stagecut.units import parse_bytes
from stagecut.validate import check_int, check_number

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["check_spec", "MAX_TASKS",
           "OBJECTIVES", "GRAPH_PREFIXES", "MethodSpec", "SweepSpec", "Task", "read_sweep", "sweep_from_dict",
           "expand"]

#: the planners a sweep can call: objective -> the function's name in :mod:`stagecut`
OBJECTIVES = {"throughput": "partition", "slice": "slice_graph", "latency": "place", "certify": "certify"}
#: graph specs that are not files
GRAPH_PREFIXES = ("example:", "regal:", "rwnn:")
_KEYS = {"objective", "graphs", "devices", "memory", "seeds", "time_limit", "results", "workers", "task_memory",
         "methods", "report", "plan"}
_METHOD_KEYS = {"name", "options", "time_limit"}
#: options a method may not set (the sweep's own axes)
_AXES = {"devices", "memory", "seed", "time_limit", "graph"}
#: the options of a certify sweep's ``plan`` table that the sweep sets itself
_PLAN_AXES = {"devices", "memory", "seed", "graph", "progress", "stages", "fast_memory"}
#: the certify method that runs the whole ladder (``certify``'s default levels, or its ``levels`` option)
LADDER = "ladder"
#: the share of a certify task's time limit its plan's search gets when ``plan`` sets no ``time_limit``
PLAN_SHARE = 0.2


@dataclass(frozen=True, kw_only=True)
class MethodSpec:
    """One method of a sweep: its name, its options (JSON text, keys sorted) and time limit."""

    name: str
    options: str = "{}"
    time_limit: float | None = None


@dataclass(frozen=True, kw_only=True)
class SweepSpec:
    """A parsed sweep file (see the module docs): every list is one axis of the product.

    ``graphs`` are ``(label, spec)`` pairs: the label as the table shows it (a file relative to
    the sweep file), the spec as :func:`~stagecut.cli._common.load_graph` reads it (an absolute
    path for a file). ``plan`` (JSON text, keys sorted): a certify sweep's options of
    :func:`~stagecut.slice_graph` for the plan each task certifies.
    """

    objective: str
    graphs: tuple[tuple[str, str], ...]
    methods: tuple[MethodSpec, ...]
    devices: tuple[int, ...]
    memory: tuple[str, ...] = ("file",)
    seeds: tuple[int, ...] = (0,)
    time_limit: float | None = None
    results: str = "sweep.results"
    workers: int | None = None
    baseline: str | None = None
    task_memory: str | None = None
    plan: str = "{}"


@dataclass(frozen=True, kw_only=True)
class Task:
    """One planner call of a sweep; ``key`` is a hash of everything that decides its answer."""

    key: str
    objective: str
    graph: str
    graph_spec: str
    method: str
    options: str
    devices: int
    memory: str
    seed: int
    time_limit: float | None
    task_memory: str | None = None  # a resource limit, not part of the key
    plan: str = "{}"  # a certify task's slice_graph options (part of its key)


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message (its type's name when the message is empty)."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _bad(field: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"{field}: {message}")


def _list(data: Mapping[str, Any], key: str, default: Sequence[Any] | None) -> list[Any]:
    value = data.get(key, default)
    if value is None:
        raise _bad(key, "missing (a list)")
    if not isinstance(value, list):
        value = [value]
    if not value:
        raise _bad(key, "is empty")
    return list(value)


def _time_limit(value: Any, field: str) -> float | None:
    if value is None:
        return None
    return check_number(value, field, positive=True, error=InvalidArgumentError)


def _memory(value: Any) -> str:
    if isinstance(value, str) and value.strip().lower() == "file":
        return "file"
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _bad("memory", f"expected 'file', 'none' or a size such as '16GiB', got {value!r}")
    parse_bytes(value, flag="memory")
    return str(value)


def _graphs(values: list[Any], base: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for v in values:
        if not isinstance(v, str) or not v:
            raise _bad("graphs", f"expected a file, a glob or a spec such as example:NAME, got {v!r}")
        if v.startswith(GRAPH_PREFIXES):
            out.append((v, v))
            continue
        pattern = v if os.path.isabs(v) else os.path.join(base, v)
        matches = sorted(glob.glob(pattern)) if glob.has_magic(v) else [pattern]
        if not matches:
            raise _bad("graphs", f"{v!r} matches no file (relative to {base or '.'})")
        for m in matches:
            if not os.path.isfile(m):
                raise _bad("graphs", f"{m}: no such file")
            label = v if not glob.has_magic(v) else os.path.relpath(m, base or ".")
            out.append((label, os.path.abspath(m)))
    if len({label for label, _ in out}) != len(out):
        raise _bad("graphs", "a graph is named twice")
    return tuple(out)


def _methods(values: list[Any]) -> tuple[MethodSpec, ...]:
    out: list[MethodSpec] = []
    for i, m in enumerate(values):
        where = f"methods[{i}]"
        if isinstance(m, str):
            m = {"name": m}
        if not isinstance(m, Mapping):
            raise _bad(where, f"expected a table with name and options, got {m!r}")
        unknown = sorted(set(m) - _METHOD_KEYS)
        if unknown:
            raise _bad(f"{where}.{unknown[0]}", f"unknown key; expected one of {sorted(_METHOD_KEYS)}")
        name = m.get("name")
        if not isinstance(name, str) or not name:
            raise _bad(f"{where}.name", f"expected a method name, got {name!r}")
        options = m.get("options", {})
        if not isinstance(options, Mapping):
            raise _bad(f"{where}.options", "expected a table of keyword arguments")
        clash = sorted(set(options) & (_AXES | {"method"}))
        if clash:
            raise _bad(f"{where}.options.{clash[0]}", "is an axis of the sweep (set it at the top level)")
        out.append(MethodSpec(name=name, options=json.dumps(dict(options), sort_keys=True),
                              time_limit=_time_limit(m.get("time_limit"), f"{where}.time_limit")))
    if len({(x.name, x.options) for x in out}) != len(out):
        raise _bad("methods", "a method with the same options is named twice")
    return tuple(out)


def sweep_from_dict(data: Mapping[str, Any], base: str = "", name: str = "sweep") -> SweepSpec:
    """A :class:`SweepSpec` from the parsed TOML ``data``.

    Parameters
    ----------
    data : mapping
        The sweep file's content (see the module docs).
    base : str
        The directory files, globs and ``results`` are relative to.
    name : str
        The sweep's name (the default results directory is ``<name>.results``).

    Returns
    -------
    SweepSpec

    Raises
    ------
    InvalidArgumentError
        An unknown key, a missing or empty list, a bad value; the message names the field.

    Examples
    --------
    >>> s = sweep_from_dict({"graphs": "regal:8", "devices": [2], "methods": ["dpl"], "memory": ["1GB"]})
    >>> s.objective, s.graphs, s.methods[0].name, s.memory
    ('throughput', (('regal:8', 'regal:8'),), 'dpl', ('1GB',))
    """
    if not isinstance(data, Mapping):
        raise _bad("sweep", "expected a table")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise _bad(unknown[0], f"unknown key; expected one of {sorted(_KEYS)}")
    objective = data.get("objective", "throughput")
    if objective not in OBJECTIVES:
        raise _bad("objective", f"expected one of {list(OBJECTIVES)}, got {objective!r}")
    devices = tuple(check_int(v, "devices", minimum=1) for v in _list(data, "devices", None))
    seeds = tuple(check_int(v, "seeds") for v in _list(data, "seeds", [0]))
    memory = tuple(_memory(v) for v in _list(data, "memory", ["file"]))
    if objective == "latency" and memory != ("file",):
        raise _bad("memory", "the latency objective reads memory from the graph and the method's options")
    for axis, values in (("devices", devices), ("seeds", seeds), ("memory", memory)):
        if len(set(values)) != len(values):
            raise _bad(axis, "a value is given twice")
    results = data.get("results", f"{name}.results")
    if not isinstance(results, str) or not results:
        raise _bad("results", f"expected a directory, got {results!r}")
    workers = data.get("workers")
    task_memory = data.get("task_memory")
    if task_memory is not None:
        if isinstance(task_memory, bool) or not isinstance(task_memory, (str, int, float)) or \
                parse_bytes(task_memory, flag="task_memory") <= 0:
            raise _bad("task_memory", f"expected a size such as '4GiB', got {task_memory!r}")
        task_memory = str(task_memory)
    report = data.get("report", {})
    if not isinstance(report, Mapping) or set(report) - {"baseline"}:
        raise _bad("report", "expected a table with the key baseline")
    plan = data.get("plan")
    if plan is not None and objective != "certify":
        raise _bad("plan", f"only a certify sweep makes plans (objective is {objective!r})")
    if plan is None:
        plan = {}
    if not isinstance(plan, Mapping):
        raise _bad("plan", f"expected a table of slice_graph options, got {plan!r}")
    clash = sorted(set(plan) & _PLAN_AXES)
    if clash:
        raise _bad(f"plan.{clash[0]}", "is an axis of the sweep (set it at the top level)")
    if "time_limit" in plan:
        _time_limit(plan["time_limit"], "plan.time_limit")
    methods = _methods(_list(data, "methods", None))
    baseline = report.get("baseline")
    if baseline is not None and baseline not in {m.name for m in methods}:
        raise _bad("report.baseline", f"{baseline!r} is not one of the methods")
    return SweepSpec(objective=objective, graphs=_graphs(_list(data, "graphs", None), base), methods=methods,
                     devices=devices, memory=memory, seeds=seeds,
                     time_limit=_time_limit(data.get("time_limit"), "time_limit"),
                     results=results if os.path.isabs(results) else os.path.join(base, results),
                     workers=None if workers is None else check_int(workers, "workers", minimum=1),
                     baseline=baseline, task_memory=task_memory, plan=json.dumps(dict(plan), sort_keys=True))


def read_sweep(path: str | os.PathLike[str]) -> SweepSpec:
    """Read a sweep file (TOML, see the module docs).

    Parameters
    ----------
    path : str or path-like
        The sweep file; its graphs and results directory are relative to it.

    Returns
    -------
    SweepSpec

    Raises
    ------
    InvalidArgumentError
        Bad TOML (with its line) or a bad field (named).
    OSError
        The file cannot be read.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "s.toml").write_text('graphs = ["regal:8"]\\ndevices = [2]\\nmethods = ["dp"]\\n')
    >>> spec = read_sweep(d / "s.toml")
    >>> spec.results == str(d / "s.results"), len(expand(spec))
    (True, 1)
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        try:
            data = tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            raise InvalidArgumentError(f"{path}: not valid TOML: {e}") from None
    stem = os.path.splitext(os.path.basename(path))[0]
    return sweep_from_dict(data, base=os.path.dirname(os.path.abspath(path)), name=stem)


#: The most tasks a sweep may have (methods x graphs x devices x memory x seeds): each is a row
#: and a Dask task, held in memory while the sweep runs.
MAX_TASKS = 100_000


def check_spec(spec: SweepSpec) -> None:
    """Check what can be checked before a cluster starts, each problem one error naming the field:
    the number of tasks (:data:`MAX_TASKS`, a :class:`~stagecut.errors.MemoryLimitError`), each
    method's name and option names for the objective, and every graph given as a spec
    (``regal:``, ``rwnn:``, ``example:``), built once (an :class:`InvalidArgumentError`).
    """
    import inspect

    import stagecut as sc

    counts = {"methods": len(spec.methods), "graphs": len(spec.graphs), "devices": len(spec.devices),
              "memory": len(spec.memory), "seeds": len(spec.seeds)}
    total = math.prod(counts.values())
    if total > MAX_TASKS:
        from stagecut.errors import MemoryLimitError

        raise MemoryLimitError(f"sweep: {' x '.join(f'{v} {k}' for k, v in counts.items())} = {total} tasks; at "
                               f"most {MAX_TASKS} are supported (split the sweep into several files)")
    if spec.objective == "latency":
        from stagecut.latency.solve import METHODS as LATENCY_METHODS
        from stagecut.latency.solve import _kwargs

        methods: tuple[str, ...] = LATENCY_METHODS
        func: Any = None
    elif spec.objective == "slice":
        from stagecut.mtpp.slicegraph import METHODS as SLICE_METHODS

        methods, func = SLICE_METHODS, sc.slice_graph
    elif spec.objective == "certify":
        from stagecut.mtpp.bounds import EXTRA_LEVELS, LEVELS

        methods, func = (LADDER, *LEVELS, *EXTRA_LEVELS), sc.certify
        known = set(inspect.signature(sc.slice_graph).parameters) - _PLAN_AXES
        plan = json.loads(spec.plan)
        unknown = sorted(set(plan) - known)
        if unknown:
            raise _bad(f"plan.{unknown[0]}", "not an option of slice_graph")
        if plan:  # the values too, on the 4-node chain
            try:
                certify_plan(_chain(), min(spec.devices), 1e9, 0, plan, 1.0)
            except (ValueError, TypeError) as e:
                raise _bad("plan", f"slice_graph refuses {json.dumps(plan)}: {first_line(e)[:160]}") from None
    else:
        from stagecut.throughput.solve import METHODS as THROUGHPUT_METHODS

        methods, func = THROUGHPUT_METHODS, sc.partition
    for i, m in enumerate(spec.methods):
        where = f"methods[{i}]"
        if m.name not in methods:
            raise _bad(f"{where}.name", f"{m.name!r} is not a {spec.objective} method; expected one of "
                                        f"{', '.join(methods)}")
        options = json.loads(m.options)
        if func is None:
            try:
                _kwargs(m.name, None, 0, "cbc", None, options)
            except InvalidArgumentError as e:
                raise _bad(f"{where}.options", str(e)) from None
        else:
            known = set(inspect.signature(func).parameters) - {"graph", "progress"}
            if spec.objective == "certify":  # (the level is the method; the plan is the task's own)
                known -= {"plan", "on_level", "stages", "fast_memory"} | ({"levels"} if m.name != LADDER else set())
            unknown = sorted(set(options) - known)
            if unknown:
                raise _bad(f"{where}.options.{unknown[0]}", f"not an option of {spec.objective} methods")
        if options:  # the values too: the method with these options on a 4-node chain
            _dry_run(spec, m, where, options)
    for label, gspec in spec.graphs:
        if gspec.startswith(GRAPH_PREFIXES):
            from stagecut.cli._common import load_graph

            try:
                load_graph(gspec)
            except (ValueError, MemoryError) as e:  # stagecut's InvalidGraphError, MemoryLimitError
                raise _bad("graphs", f"{label}: {e}") from None


def certify_levels(method: str) -> dict[str, Any]:
    """The ``levels`` argument of :func:`~stagecut.certify` for a certify sweep's ``method``: the
    one level it names, or nothing for :data:`LADDER` (the default ladder, or the method's own
    ``levels`` option)."""
    return {} if method == LADDER else {"levels": (method,)}


def _chain() -> Any:
    from stagecut.graph import ACCELERATOR, CPU, Graph, Node

    return Graph([Node(i, {ACCELERATOR: 1.0 + i, CPU: 2.0 + i}, memory=1.0, comm=1.0) for i in range(4)],
                 [(i, i + 1) for i in range(3)])


def certify_plan(graph: Any, devices: int, memory: float | None, seed: int, options: Mapping[str, Any],
                 task_limit: float | None, progress: Any = None) -> Any:
    """The plan a certify task certifies: :func:`~stagecut.slice_graph` with the sweep's ``plan``
    options, within the plan's own ``time_limit`` (at most the task's ``task_limit``), else
    :data:`PLAN_SHARE` of ``task_limit``."""
    import stagecut as sc

    opts = dict(options)
    own = opts.pop("time_limit", None)
    if task_limit is None:
        limit = own
    else:
        limit = PLAN_SHARE * task_limit if own is None else min(float(own), task_limit)
    return sc.slice_graph(graph, devices=devices, memory=memory, seed=seed, time_limit=limit, progress=progress,
                          **opts)


def _dry_run(spec: SweepSpec, m: MethodSpec, where: str, options: Mapping[str, Any]) -> None:
    """Run method ``m`` with its ``options`` on a 4-node chain (a second at most): an option value
    the method refuses is an :class:`InvalidArgumentError` naming the method, before any cluster."""
    import stagecut as sc

    chain = _chain()
    k = min(spec.devices)
    try:
        if spec.objective == "latency":
            sc.place(chain, k, method=m.name, time_limit=1.0, seed=0, **options)
        elif spec.objective == "slice":
            sc.slice_graph(chain, devices=k, memory=1e9, method=m.name, seed=0, time_limit=1.0, **options)
        elif spec.objective == "certify":
            plan = certify_plan(chain, k, 1e9, 0, {}, 1.0)
            sc.certify(chain, plan, devices=k, memory=1e9, seed=0, time_limit=1.0, **certify_levels(m.name),
                       **options)
        else:
            sc.partition(chain, devices=k, memory=1e9, method=m.name, time_limit=1.0, seed=0, **options)
    except (ValueError, TypeError) as e:  # stagecut's InvalidArgumentError, a keyword the method lacks
        raise _bad(f"{where}.options", f"{m.name} refuses {json.dumps(dict(options))}: {first_line(e)[:160]}") from None


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def expand(spec: SweepSpec) -> tuple[Task, ...]:
    """The tasks of ``spec``: the product of methods, graphs, device counts, memory sizes and
    seeds, in that order (a seed matters only to seeded methods, but each is its own task).

    Parameters
    ----------
    spec : SweepSpec

    Returns
    -------
    tuple of Task
        Keys are unique: a hash of the objective, the graph's label, the method, its options
        and time limit, the device count, the memory and the seed (and a certify sweep's ``plan``).

    Examples
    --------
    >>> s = sweep_from_dict({"graphs": ["regal:8"], "devices": [2], "methods": ["dp"], "seeds": [0, 1]})
    >>> [t.seed for t in expand(s)], len({t.key for t in expand(s)})
    ([0, 1], 2)
    """
    out = []
    for m, (label, gspec), k, mem, seed in itertools.product(spec.methods, spec.graphs, spec.devices, spec.memory,
                                                             spec.seeds):
        tl = m.time_limit if m.time_limit is not None else spec.time_limit
        parts: tuple[Any, ...] = (spec.objective, label, m.name, m.options,
                                  tl if tl is None or math.isfinite(tl) else None, k, mem, seed)
        if spec.objective == "certify":  # (the other objectives' keys stay as they were)
            parts += (spec.plan,)
        out.append(Task(key=_key(*parts), objective=spec.objective, graph=label, graph_spec=gspec, method=m.name,
                        options=m.options, devices=k, memory=mem, seed=seed, time_limit=tl,
                        task_memory=spec.task_memory, plan=spec.plan))
    return tuple(out)
