"""Progress of long calls: a ``progress=`` callback, or a tqdm bar on stderr.

The entry points (:func:`stagecut.partition`, :func:`stagecut.slice_graph`,
:func:`stagecut.certify`, :func:`stagecut.plan_training`, :func:`stagecut.place`) take
``progress=``:

* ``None`` (default): no reports (a call made inside another one reports to the outer
  call's ``progress``);
* ``True``: a `tqdm <https://tqdm.github.io>`_ bar on stderr, shown only once the call has
  run :data:`BAR_DELAY` seconds and only when stderr is a terminal;
* a callable: called with a :class:`ProgressEvent` about four times a second while the core
  works or a MIP solves, and once more (``final=True``) when each run of a phase ends, short
  runs too; an exception it raises stops the computation and propagates (a way to cancel a
  call);
* ``False``: no reports, not even to an outer call's ``progress``.

What is reported (the :attr:`ProgressEvent.phase` names, :data:`PHASES`): the ideals
enumerated so far; the rows of the ideal DP (throughput, MTPP ``dp``) and of Piper's DP done
out of the ideals; the decodes of BRKGA, random-T and MLA done out of their budget, with the
best cost decoded so far; the evaluations of the latency searches (``sa``, ``ea``, ``local``,
``mcmc``) out of ``max_evaluations``, and the runs of the throughput ``local-search`` out of its
restarts, with the best cost so far; the seconds a MIP solve has run out of its time limit. A
phase may run several times in one call (``done`` starts again from 0); within one run ``done``
never decreases and ``best`` never increases (except a final ``best``, re-scored, by round-off).

What a MIP (phase ``"mip"``) shows besides its seconds, per solver (see :mod:`stagecut._mip`;
the latency ``milp`` and the throughput ``ip`` give their costs in the problem's units, the
other MIPs seconds only):

* **HiGHS**: the incumbent's cost as ``best`` and the proven dual bound as ``bound``, live,
  through HiGHS's MIP callbacks (HiGHS 1.15 to 1.x; another version shows what CBC shows);
* **CBC**: the cost of the MIP start the solve began from, if any, as ``best`` until the solve
  ends, and no bound: python-mip 2.0 gives no live view of CBC (``mip.IncumbentUpdater`` is
  never called by it, and the search-progress log crashes the bundled CBC);
* both: the final report (``final=True``) has the solve's best cost and proven bound.

Examples
--------
>>> import stagecut as sc
>>> events = []
>>> plan = sc.slice_graph(sc.regal_graph(40, seed=1), devices=4, decodes=300, progress=events.append)
>>> last = events[-1]
>>> last.phase, last.final, last.done, last.total, last.best == plan.history[-1]
('brkga', True, 300, 300, True)
"""

from __future__ import annotations

import functools
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeAlias, TypeVar

from stagecut import _core
from stagecut.errors import InvalidArgumentError

__all__ = ["BAR_DELAY", "PHASES", "Progress", "ProgressEvent", "Ticker", "report", "reporting", "reports"]

#: Seconds a call runs before its ``progress=True`` bar appears.
BAR_DELAY = 2.0
#: Seconds between two reports of a phase run in Python (MIP solves); the core reports every 0.25 s.
REPORT_EVERY = 0.25

#: The phases: name -> (what the bar says, unit of ``done`` and ``total``).
PHASES: dict[str, tuple[str, str]] = {
    "ideals": ("enumerating ideals", "ideals"),
    "ideal links": ("linking ideals", "ideals"),
    "dp": ("ideal DP", "ideals"),
    "brkga": ("BRKGA", "decodes"),
    "random": ("random-T", "decodes"),
    "mla": ("MLA search", "evaluations"),
    "piper dp": ("Piper's DP", "upsets"),
    "sa": ("simulated annealing", "evaluations"),
    "ea": ("(1+1) EA", "evaluations"),
    "local": ("local search", "evaluations"),
    "mcmc": ("MCMC", "evaluations"),
    "local-search": ("local search", "runs"),
    "mip": ("MIP", "s"),
}


@dataclass(frozen=True)
class ProgressEvent:
    """One progress report.

    Attributes
    ----------
    phase : str
        What is running (a key of :data:`PHASES`).
    done : float
        How much of it is done (an int, except the seconds of ``"mip"``).
    total : float or None
        Out of how much (``None``: unknown, e.g. while enumerating ideals, or a MIP without a
        time limit).
    best : float or None
        The best cost found so far by a search (``None``: none yet, or not a search).
    elapsed : float
        Seconds since the call started.
    unit : str
        The unit of ``done`` and ``total``.
    final : bool
        This run of the phase has ended: ``done`` (``total`` if it ran to completion) and
        ``best`` are its last values.
    bound : float or None
        A proven lower bound on the cost (``None``: none known; only a MIP solved by HiGHS
        reports one, see the module docs).
    """

    phase: str
    done: float
    total: float | None
    best: float | None
    elapsed: float
    unit: str
    final: bool = False
    bound: float | None = None

    @property
    def fraction(self) -> float | None:
        """``done / total`` (``None`` when the total is unknown).

        >>> ProgressEvent("dp", 30, 120, None, 1.5, "ideals").fraction
        0.25
        """
        return None if not self.total else self.done / self.total


#: What ``progress=`` accepts.
Progress: TypeAlias = bool | Callable[[ProgressEvent], object] | None


class _Sink:
    """Where the events of one ``progress=`` go (only in the process that made it)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.pid = os.getpid()
        self.last: dict[str, float] = {}

    def event(self, phase: str, done: float, total: float | None, best: float | None, final: bool,
              bound: float | None = None) -> None:
        if os.getpid() != self.pid:  # a forked worker: its parent reports
            return
        unit = PHASES.get(phase, (phase, ""))[1]
        self.emit(ProgressEvent(phase, done, total, best, time.perf_counter() - self.t0, unit, final, bound))

    def core(self, phase: str, done: int, total: int, best: float, final: bool) -> None:
        """The hook the core calls (``total`` 0: unknown; ``best`` NaN: none)."""
        self.event(phase, done, total or None, None if math.isnan(best) else best, final)

    def emit(self, ev: ProgressEvent) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def close(self) -> None:
        pass


class _Callback(_Sink):
    def __init__(self, fn: Callable[[ProgressEvent], object]) -> None:
        super().__init__()
        self.fn = fn

    def emit(self, ev: ProgressEvent) -> None:
        self.fn(ev)


class _Bar(_Sink):
    """A tqdm bar on stderr per phase run, once the call has run :data:`BAR_DELAY` seconds, and
    only when stderr is a terminal."""

    def __init__(self) -> None:
        super().__init__()
        self.file = sys.stderr
        self.bar: Any = None
        self.phase = ""

    def emit(self, ev: ProgressEvent) -> None:
        if ev.final:  # gone once the run ends: the next output starts on a clean line
            self.close()
            return
        if ev.elapsed < BAR_DELAY or not _is_tty(self.file):
            return
        if self.bar is None or ev.phase != self.phase or ev.done < self.bar.n:
            self.close()
            try:
                from tqdm import tqdm
            except ImportError:  # pragma: no cover - tqdm is a dependency; a bar is not worth failing for
                return
            what, unit = PHASES.get(ev.phase, (ev.phase, ev.unit))
            # starting at the work done before the bar showed, so that its rate is the current one
            self.bar = tqdm(total=ev.total, initial=ev.done, desc=what, unit=unit, file=self.file, leave=False,
                            dynamic_ncols=True, mininterval=0.2, miniters=1, unit_scale=unit == "s")
            self.phase = ev.phase
        if ev.best is not None or ev.bound is not None:
            shown = [f"{name} {x:.6g}" for name, x in (("best", ev.best), ("bound", ev.bound)) if x is not None]
            self.bar.set_postfix_str(", ".join(shown), refresh=False)
        self.bar.update(ev.done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _is_tty(file: Any) -> bool:
    try:
        return bool(file.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


_SINK: ContextVar[_Sink | None] = ContextVar("stagecut_progress", default=None)


def _sink_of(progress: Progress) -> _Sink | None:
    if progress is True:
        return _Bar()
    if progress is False:
        return None
    if callable(progress):
        return _Callback(progress)
    raise InvalidArgumentError(f"progress must be None, True, False or a callable, got {progress!r}")


@contextmanager
def reporting(progress: Progress) -> Iterator[None]:
    """Send the progress of the core calls and MIP solves inside the block to ``progress``.

    Parameters
    ----------
    progress : bool, callable or None
        See the module docs; ``None`` leaves an enclosing block's ``progress`` in force.

    Yields
    ------
    None

    Raises
    ------
    InvalidArgumentError
        ``progress`` is none of these.

    Examples
    --------
    >>> import stagecut as sc
    >>> seen = []
    >>> with reporting(seen.append):
    ...     _ = sc.partition(sc.regal_graph(12, seed=0), devices=3, method="dp")
    >>> sorted({e.phase for e in seen})
    ['dp', 'ideal links', 'ideals']
    >>> [e.done == e.total for e in seen if e.phase == "dp"][-1]
    True
    """
    if progress is None:
        yield
        return
    sink = _sink_of(progress)
    token = _SINK.set(sink)
    previous = _core.set_progress_hook(sink.core if sink is not None else None)
    try:
        yield
    finally:
        _core.set_progress_hook(previous)
        _SINK.reset(token)
        if sink is not None:
            sink.close()


def report(phase: str, done: float, total: float | None, best: float | None = None, final: bool = False,
           bound: float | None = None) -> None:
    """Report progress from Python code (the core reports by itself) to the enclosing
    :func:`reporting` block, if any.

    Parameters
    ----------
    phase : str
        A key of :data:`PHASES`.
    done, total, best, final, bound
        See :class:`ProgressEvent` (``total`` ``None``: unknown).

    Examples
    --------
    >>> seen = []
    >>> with reporting(seen.append):
    ...     report("mip", 1.0, 10.0)
    >>> seen[0].phase, seen[0].fraction, seen[0].unit, seen[0].final
    ('mip', 0.1, 's', False)
    >>> report("mip", 2.0, 10.0)  # no block: nothing happens
    """
    sink = _SINK.get()
    if sink is not None:
        sink.event(phase, done, total, best, final, bound)


class Ticker:
    """Rate-limit :func:`report` in a polling loop: :meth:`__call__` reports at most every
    :data:`REPORT_EVERY` seconds; :meth:`final` always reports. Outside a :func:`reporting`
    block both do nothing (one attribute test: cheap enough for every evaluation of a search).

    >>> seen = []
    >>> with reporting(seen.append):
    ...     tick = Ticker("mip", 5.0)
    ...     tick(0.1); tick(0.2); tick.final(0.3)
    >>> [(e.done, e.final) for e in seen]
    [(0.1, False), (0.3, True)]
    """

    def __init__(self, phase: str, total: float | None) -> None:
        self.phase, self.total = phase, total
        self.active = _SINK.get() is not None
        self.at = -math.inf

    def __call__(self, done: float, best: float | None = None, bound: float | None = None) -> None:
        """Report ``done`` (and the best cost and bound so far) unless a report went out less than
        :data:`REPORT_EVERY` seconds ago."""
        if self.active:
            now = time.perf_counter()
            if now - self.at >= REPORT_EVERY:
                self.at = now
                report(self.phase, done, self.total, best, bound=bound)

    def final(self, done: float, best: float | None = None, bound: float | None = None) -> None:
        """Report the end of the run: ``done`` and the final best cost and bound."""
        if self.active:
            report(self.phase, done, self.total, best, final=True, bound=bound)


P = ParamSpec("P")
R = TypeVar("R")


def reports(func: Callable[P, R]) -> Callable[P, R]:
    """Decorate an entry point with a keyword-only ``progress`` parameter: its body runs in a
    :func:`reporting` block for that ``progress``.

    >>> @reports
    ... def work(*, progress=None):
    ...     report("mip", 1.0, 2.0)
    >>> seen = []
    >>> work(progress=seen.append)
    >>> len(seen)
    1
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with reporting(kwargs.get("progress")):  # type: ignore[arg-type] # checked by reporting
            return func(*args, **kwargs)

    return wrapper
