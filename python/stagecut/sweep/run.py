"""Running a sweep on Dask: one task per planner call, rows saved as they finish.

:func:`run_sweep` expands a sweep file (:mod:`stagecut.sweep.spec`), drops the tasks whose row
is already in the results table with a status other than ``"error"``, and sends the rest to a
Dask cluster: an in-process ``LocalCluster`` of worker processes (one thread each) by default,
or an existing scheduler (``scheduler="tcp://HOST:PORT"``) or client. Each worker sizes the
Rust core's thread pool (``RAYON_NUM_THREADS``) to its share of its machine's cores. Each row is
written (:mod:`stagecut.sweep.table`) as soon as its task finishes, so an interrupted sweep
keeps what it finished and a re-run does only the rest. A worker that dies is replaced and its
tasks are run again elsewhere (Dask's own retry); a task that keeps killing workers is recorded
as an ``"error"`` row (re-run on the next run).

**Memory per task** (``task_memory = "4GiB"`` in the sweep file): while the task runs, the core's
budget for refusing big requests before allocating (``STAGECUT_MEMORY_BUDGET``, see
:class:`~stagecut.errors.MemoryLimitError`) is that size, and the planner's progress events
(about four a second, :mod:`stagecut.progress`) check that the worker process has not grown by
more than it; either stops the task with a ``MemoryLimitError`` row. The check runs only where
the planner reports progress, so a single allocation between two events can pass it: a hard
cap is the Dask worker's own ``memory_limit`` (a worker over it is restarted and its task
retried elsewhere).

The graphs are loaded by the workers from the sweep's specs: on a cluster spanning machines,
graph files must be readable at the same absolute path on every worker.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import os
import resource
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from stagecut.errors import BackendUnavailableError, InvalidArgumentError, MemoryLimitError
from stagecut.graph import Graph
from stagecut.sweep.spec import (
    SweepSpec,
    Task,
    certify_levels,
    certify_plan,
    check_spec,
    expand,
    first_line,
    read_sweep,
)
from stagecut.sweep.table import ERROR, read_results, write_row

__all__ = ["SweepRun", "run_sweep", "run_task", "pending"]

#: the core's memory budget variable (see :class:`~stagecut.errors.MemoryLimitError`)
BUDGET_VAR = "STAGECUT_MEMORY_BUDGET"


@dataclass(frozen=True, kw_only=True)
class SweepRun:
    """What one :func:`run_sweep` call did.

    Attributes
    ----------
    results : str
        The results directory.
    tasks : int
        Tasks in the sweep.
    skipped : int
        Tasks already in the table with a non-error status (not run again).
    ran : tuple of str
        Keys of the tasks run by this call (each row saved as it finished).
    errors : int
        Of those, how many ended with status ``"error"``.
    """

    results: str
    tasks: int
    skipped: int
    ran: tuple[str, ...]
    errors: int


# ------------------------------------------------------------------------------------ one task
@functools.lru_cache(maxsize=8)
def _graph(spec: str) -> Graph:
    from stagecut.cli._common import load_graph

    return load_graph(spec)


def _reset_peak_rss() -> None:
    try:  # Linux: "5" resets the peak resident set size (VmHWM) of this process
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_rss_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kB on Linux: the process's life


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return f"local:{os.getpid()}"


def _rss_bytes() -> int:
    """This process's resident set size now (bytes; 0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


class _MemoryWatch:
    """The progress callback of a task with ``task_memory``: stops the call (MemoryLimitError) once
    the process has grown by more than ``limit`` bytes since the task began."""

    def __init__(self, limit: float, rss: Callable[[], int] | None = None) -> None:
        self.limit = limit
        self.rss = rss if rss is not None else _rss_bytes
        self.base = self.rss()

    def __call__(self, event: Any) -> None:
        grown = self.rss() - self.base
        if grown > self.limit:
            raise MemoryLimitError(f"task_memory: the task grew by {grown / 2**20:.0f} MiB, over its "
                                   f"{self.limit / 2**20:.0f} MiB (during {getattr(event, 'phase', '?')})")


@contextlib.contextmanager
def _task_memory(limit: str | None) -> Iterator[Callable[[Any], None] | None]:
    """For a task with ``task_memory``: the core's budget for refusing big requests before
    allocating (``STAGECUT_MEMORY_BUDGET``) set to it, and a :class:`_MemoryWatch`."""
    if limit is None:
        yield None
        return
    from stagecut.units import parse_bytes

    nbytes = parse_bytes(limit, flag="task_memory")
    before = os.environ.get(BUDGET_VAR)
    os.environ[BUDGET_VAR] = str(int(nbytes))
    try:
        yield _MemoryWatch(nbytes)
    finally:
        if before is None:
            os.environ.pop(BUDGET_VAR, None)
        else:
            os.environ[BUDGET_VAR] = before


def _call(task: Task, graph: Graph, progress: Callable[[Any], None] | None = None) -> Any:
    import stagecut as sc
    from stagecut.units import parse_bytes

    options = json.loads(task.options)
    if progress is not None:
        options["progress"] = progress
    memory = None if task.memory == "file" else parse_bytes(task.memory, flag="memory")
    if task.objective == "throughput":  # memory None: the planner takes the graph's own
        return sc.partition(graph, devices=task.devices, memory=memory, method=task.method,
                            time_limit=task.time_limit, seed=task.seed, **options)
    if memory is None and task.objective in ("slice", "certify"):  # (MTPP: the graph's own, else none)
        value = graph.defaults.get("memory")
        memory = None if value is None else float(value)
    if task.objective == "slice":
        return sc.slice_graph(graph, devices=task.devices, memory=memory, method=task.method, seed=task.seed,
                              time_limit=task.time_limit, **options)
    if task.objective == "certify":  # the plan (slice_graph), then its certificate: one level, or the ladder
        start = time.monotonic()
        plan = certify_plan(graph, task.devices, memory, task.seed, json.loads(task.plan), task.time_limit, progress)
        if plan.status == "infeasible":  # (proven: no partition to certify; the row says so, not an error)
            return plan
        # (with no time left certify skips its levels and says so: a row with the plan and no bound)
        left = None if task.time_limit is None else max(1e-6, task.time_limit - (time.monotonic() - start))
        return sc.certify(graph, plan, devices=task.devices, memory=memory, time_limit=left, seed=task.seed,
                          **certify_levels(task.method), **options)
    if task.objective == "latency":
        return sc.place(graph, task.devices, method=task.method, time_limit=task.time_limit, seed=task.seed,
                        **options)
    raise InvalidArgumentError(f"objective: unknown {task.objective!r}")


def run_task(task: Task) -> dict[str, Any]:
    """Run one task in this process and return its row (a raised error becomes an ``"error"`` row).

    Parameters
    ----------
    task : Task

    Returns
    -------
    dict
        The columns of :data:`stagecut.sweep.table.COLUMNS`.

    Examples
    --------
    >>> from stagecut.sweep.spec import expand, sweep_from_dict
    >>> task = expand(sweep_from_dict({"graphs": ["regal:8"], "devices": [2], "methods": ["dp"]}))[0]
    >>> row = run_task(task)
    >>> row["status"], row["objective"] is not None, row["error"]
    ('optimal', True, None)
    """
    _reset_peak_rss()
    row: dict[str, Any] = {"key": task.key, "problem": task.objective, "graph": task.graph, "method": task.method,
                           "options": task.options, "devices": task.devices, "memory": task.memory,
                           "seed": task.seed, "time_limit": task.time_limit, "worker": _worker_name(),
                           "objective": None, "lower_bound": None, "gap": None, "error": None}
    t0 = time.perf_counter()
    try:
        with _task_memory(task.task_memory) as watch:
            result = _call(task, _graph(task.graph_spec), watch)
    except Exception as e:  # recorded, not raised: one bad task must not stop the sweep
        text = str(e).strip().splitlines()
        row.update(status=ERROR, error=f"{type(e).__name__}: {text[0] if text else ''}".strip())
    else:
        row.update(objective=result.objective, lower_bound=result.lower_bound, gap=result.gap,
                   status=result.status, detail=_detail(result))
    row.update(runtime_s=time.perf_counter() - t0, peak_rss_mb=_peak_rss_mb(), finished_at=time.time())
    return row


def _detail(result: Any) -> str | None:
    """The ``detail`` column: a certificate's ladder, level by level, and the cost of a cheaper
    partition a level found (``best_objective``, ``null`` when none) (JSON); ``None`` otherwise."""
    levels = getattr(result, "levels", None)
    if result.method != "certify" or not isinstance(levels, tuple):
        return None

    def bound(x: float | None) -> float | str | None:  # (strict JSON: no Infinity; "inf" for a proven infeasibility)
        return x if x is None or math.isfinite(x) else str(x)

    best = getattr(result, "best_objective", None)
    return json.dumps({"bound_source": result.bound_source,
                       "levels": [[r.level, bound(r.bound), r.status, round(r.seconds, 3)] for r in levels],
                       "best_objective": best if best is not None and math.isfinite(best) else None},
                      allow_nan=False)


def _failed_row(task: Task, error: BaseException) -> dict[str, Any]:
    text = str(error).strip().splitlines()
    return {"key": task.key, "problem": task.objective, "graph": task.graph, "method": task.method,
            "options": task.options, "devices": task.devices, "memory": task.memory, "seed": task.seed,
            "time_limit": task.time_limit, "status": ERROR, "worker": None, "finished_at": time.time(),
            "error": f"{type(error).__name__}: {text[0] if text else ''}".strip()}


# ------------------------------------------------------------------------------------ the sweep
def pending(spec: SweepSpec, results: str | None = None) -> tuple[tuple[Task, ...], int]:
    """The tasks of ``spec`` not yet in the results table with a non-error status, and how many are.

    Examples
    --------
    >>> import tempfile
    >>> from stagecut.sweep.spec import sweep_from_dict
    >>> spec = sweep_from_dict({"graphs": ["regal:8"], "devices": [2, 3], "methods": ["dp"]})
    >>> todo, done = pending(spec, tempfile.mkdtemp())
    >>> len(todo), done
    (2, 0)
    """
    tasks = expand(spec)
    rows = read_results(results or spec.results)
    done = {r["key"] for r in rows if r["status"] != ERROR}
    todo = tuple(t for t in tasks if t.key not in done)
    return todo, len(tasks) - len(todo)


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise BackendUnavailableError("sweeps run on Dask: pip install 'stagecut[sweep]' "
                                      "(dask[distributed] and pyarrow)") from None
    return distributed


def _rayon_plugin(distributed: Any, client: Any) -> None:
    """Tell every worker (and any that joins later) to size the Rust core's pool to its share of
    its host's cores: cores // (worker threads on that host)."""
    from distributed.diagnostics.plugin import WorkerPlugin

    per_host: dict[str, int] = {}
    for w in client.scheduler_info(n_workers=-1)["workers"].values():
        per_host[w["host"]] = per_host.get(w["host"], 0) + int(w.get("nthreads", 1))

    class RayonThreads(WorkerPlugin):
        name = "stagecut-rayon-threads"

        def setup(self, worker: Any) -> None:
            share = max(1, (os.cpu_count() or 1) // max(1, per_host.get(worker.ip, worker.state.nthreads)))
            os.environ["RAYON_NUM_THREADS"] = str(share)

    client.register_plugin(RayonThreads(), name=RayonThreads.name)


def _local_cluster(distributed: Any, workers: int) -> Any:
    """A LocalCluster of ``workers`` processes whose workers ignore SIGINT: a terminal's Ctrl-C
    reaches the whole process group, and only this process should act on it (cancel, save, exit
    130); a worker process started with SIGINT ignored keeps ignoring it (Python does not install
    its handler then)."""
    share = max(1, (os.cpu_count() or 1) // workers)
    main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        return distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                        dashboard_address=":0", silence_logs=logging.CRITICAL,
                                        env={"RAYON_NUM_THREADS": str(share)})
    finally:
        if main:
            signal.signal(signal.SIGINT, old)


def run_sweep(sweep: str | os.PathLike[str] | SweepSpec, *, results: str | None = None, workers: int | None = None,
              scheduler: str | None = None, client: Any = None,
              on_row: Callable[[dict[str, Any]], None] | None = None) -> SweepRun:
    """Run the tasks of a sweep that are not yet in its results table, on Dask.

    Parameters
    ----------
    sweep : str, path-like or SweepSpec
        A sweep file (TOML, :mod:`stagecut.sweep.spec`) or a parsed one.
    results : str, optional
        The results directory (default: the sweep's ``results``).
    workers : int, optional
        Worker processes of the in-process ``LocalCluster`` (default: the sweep's ``workers``,
        else the cores; never more than the tasks to run). Not with ``scheduler`` or ``client``.
    scheduler : str, optional
        The address of a running Dask scheduler (``tcp://HOST:PORT``) to connect to.
    client : distributed.Client, optional
        A client to use (left open).
    on_row : callable, optional
        Called with each row as it is saved (progress).

    Returns
    -------
    SweepRun

    Raises
    ------
    InvalidArgumentError
        A bad sweep file or field; ``workers`` with ``scheduler``/``client``; both of those.
    BackendUnavailableError
        dask[distributed] or pyarrow is not installed.
    KeyboardInterrupt
        On Ctrl-C, after cancelling the tasks still running (every saved row stays).

    Examples
    --------
    >>> import tempfile
    >>> from stagecut.sweep.spec import sweep_from_dict
    >>> spec = sweep_from_dict({"graphs": ["regal:8"], "devices": [2], "methods": ["dp"]})
    >>> d = tempfile.mkdtemp()
    >>> _ = write_row(d, run_task(expand(spec)[0]))  # already done: nothing to run, no cluster started
    >>> r = run_sweep(spec, results=d)
    >>> r.tasks, r.skipped, r.ran
    (1, 1, ())
    """
    spec = sweep if isinstance(sweep, SweepSpec) else read_sweep(sweep)
    check_spec(spec)  # before any cluster starts
    if scheduler is not None and client is not None:
        raise InvalidArgumentError("scheduler: give a scheduler address or a client, not both")
    if workers is not None and (scheduler is not None or client is not None):
        raise InvalidArgumentError("workers: sets the size of the local cluster; not with a scheduler or client")
    results = results or spec.results
    todo, skipped = pending(spec, results)
    total = skipped + len(todo)
    if not todo:
        return SweepRun(results=results, tasks=total, skipped=skipped, ran=(), errors=0)
    distributed = _distributed()
    cluster = own_client = None
    try:
        if client is None:
            if scheduler is not None:
                own_client = client = _connect(distributed, scheduler)
            else:
                n = workers or spec.workers or os.cpu_count() or 1
                cluster = _local_cluster(distributed, min(n, len(todo)))
                own_client = client = distributed.Client(cluster)
        os.makedirs(results, exist_ok=True)  # only once there is a cluster to fill it
        _rayon_plugin(distributed, client)
        return _gather(distributed, client, todo, results, skipped, total, on_row)
    finally:
        if own_client is not None:
            own_client.close()
        if cluster is not None:
            cluster.close()


#: Seconds to wait for a Dask scheduler given by its address.
CONNECT_TIMEOUT = 3.0


def _connect(distributed: Any, scheduler: str) -> Any:
    """A client of the scheduler at ``scheduler``; an address that does not parse or a scheduler
    that does not answer within :data:`CONNECT_TIMEOUT` seconds is an ``InvalidArgumentError``."""
    text = str(scheduler)
    host, _, port = text.split("://", 1)[-1].rpartition(":")  # (HOST:PORT after an optional scheme)
    if not host or "/" in host or not port.isdecimal() or not 0 < int(port) < 65536:
        raise InvalidArgumentError(f"scheduler: expected tcp://HOST:PORT with a port 1..65535, got {text!r}")
    try:
        return distributed.Client(text, timeout=f"{CONNECT_TIMEOUT}s")
    except (OSError, TimeoutError, ValueError) as e:
        raise InvalidArgumentError(f"scheduler: cannot reach {text} within {CONNECT_TIMEOUT:g} s "
                                   f"({first_line(e)[:120]})") from None


def _gather(distributed: Any, client: Any, todo: Sequence[Task], results: str, skipped: int, total: int,
            on_row: Callable[[dict[str, Any]], None] | None) -> SweepRun:
    by_key = {f"stagecut-sweep-{t.key}": t for t in todo}
    futures = client.map(run_task, list(todo), key=list(by_key), pure=False)
    ran: list[str] = []
    errors = 0
    try:
        for fut in distributed.as_completed(futures, loop=client.loop):
            task = by_key[fut.key]
            try:
                row = fut.result()
            except Exception as e:  # KilledWorker (a task that killed its workers), a lost connection
                row = _failed_row(task, e)
            write_row(results, row)
            ran.append(task.key)
            errors += row["status"] == ERROR
            if on_row is not None:
                on_row(row)
    except BaseException:
        client.cancel(futures)
        raise
    return SweepRun(results=results, tasks=total, skipped=skipped, ran=tuple(ran), errors=errors)
