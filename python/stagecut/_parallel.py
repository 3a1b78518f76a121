"""Independent sub-solves in parallel: on a Dask cluster when one is at hand, else in processes.

:func:`parallel_map` runs ``fn`` over ``items`` and returns the results in order, on the first
of these that applies:

1. ``workers == 1``: in this process (the caller asked for no parallelism);
2. a Dask client: the one given, else the active one (``distributed.get_client()``; looked up
   only when ``distributed`` is already imported, so Dask is never imported for nothing), unless
   this process is itself a Dask worker running a task (a nested map would wait on its own
   cluster's slots: it runs in this process instead);
3. ``workers > 1``: a ``ProcessPoolExecutor`` of that many spawned processes;
4. otherwise in this process.

``fn`` and the items must be picklable (by reference: a module-level function). Items that carry
a ``time.monotonic()`` deadline at position ``deadline_at`` of a tuple are rebased on the host
that runs them (through wall-clock time), so a deadline set on one machine means the same
moment on another.

Examples
--------
>>> parallel_map(abs, [-2, 3, -4], workers=1)
[2, 3, 4]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from stagecut.errors import InvalidArgumentError

__all__ = ["parallel_map", "active_client", "parallel_width"]

T = TypeVar("T")
R = TypeVar("R")


def _in_dask_task() -> bool:
    if "distributed" not in sys.modules:
        return False
    from distributed import get_worker

    try:
        get_worker()
    except ValueError:
        return False
    return True


def active_client(client: Any = None) -> Any:
    """The Dask client :func:`parallel_map` would use: ``client`` when given, else the active one
    when ``distributed`` is imported and this process is not a Dask worker, else ``None``.

    Examples
    --------
    >>> active_client() is None  # no Dask client in this process
    True
    """
    if client is not None:
        return client
    if "distributed" not in sys.modules or _in_dask_task():
        return None
    from distributed import get_client

    try:
        return get_client()
    except ValueError:
        return None


def parallel_width(workers: int | None, client: Any = None) -> int:
    """How many items :func:`parallel_map` runs at once with these arguments: the cluster's
    worker threads with a client, else ``workers`` (``None``: 1).

    Examples
    --------
    >>> parallel_width(None), parallel_width(3)
    (1, 3)
    """
    if workers == 1:
        return 1
    c = active_client(client)
    if c is not None:
        return max(1, sum(int(n) for n in c.nthreads().values()))
    return max(1, workers or 1)


def _wall(deadline: float) -> float:
    return time.time() + (deadline - time.monotonic())


def _rebased(fn: Callable[[Any], R], deadline_at: int, item: tuple[Any, ...]) -> R:
    """Run ``fn`` on ``item`` whose wall-clock deadline at ``deadline_at`` is turned back into this
    host's ``time.monotonic()``."""
    wall = item[deadline_at]
    if wall is not None:
        item = (*item[:deadline_at], time.monotonic() + (wall - time.time()), *item[deadline_at + 1:])
    return fn(item)


def parallel_map(fn: Callable[[T], R], items: Iterable[T], workers: int | None = None, *, client: Any = None,
                 deadline_at: int | None = None) -> list[R]:
    """``[fn(x) for x in items]``, run in parallel where that is possible (see the module docs).

    Parameters
    ----------
    fn : callable
        A picklable (module-level) function of one item.
    items : iterable
        The inputs (picklable).
    workers : int, optional
        ``1``: in this process. Otherwise the size of the local process pool when no Dask client
        is given or active (``None``: in this process).
    client : distributed.Client, optional
        Run on this cluster (default: the active client, if any).
    deadline_at : int, optional
        Each item is a tuple holding a ``time.monotonic()`` deadline (or ``None``) at this
        position: it is rebased to the clock of the process that runs the item.

    Returns
    -------
    list
        ``fn``'s results in the order of ``items``.

    Raises
    ------
    InvalidArgumentError
        ``workers`` is not a positive integer.
    Exception
        The first exception ``fn`` raised (the other items are cancelled or discarded).

    Examples
    --------
    >>> import math
    >>> parallel_map(math.sqrt, [1.0, 4.0, 9.0])
    [1.0, 2.0, 3.0]
    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InvalidArgumentError(f"workers: expected a positive integer, got {workers!r}")
    todo: list[Any] = list(items)
    call: Callable[[Any], R] = fn
    if deadline_at is not None:
        import functools

        todo = [(*x[:deadline_at], None if x[deadline_at] is None else _wall(x[deadline_at]), *x[deadline_at + 1:])
                for x in todo]
        call = functools.partial(_rebased, fn, deadline_at)
    if not todo or workers == 1:
        return [call(x) for x in todo]
    c = active_client(client)
    if c is not None:
        futures = c.map(call, todo, pure=False)
        try:
            out: list[R] = c.gather(futures)
        except BaseException:
            c.cancel(futures)
            raise
        return out
    if workers is not None and workers > 1 and len(todo) > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=mp.get_context("spawn")) as ex:
            return list(ex.map(call, todo))
    return [call(x) for x in todo]
