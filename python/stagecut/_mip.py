"""Shared python-mip handling: model creation, solver options, status and bound extraction.

Every MIP of stagecut is built through :func:`new_model` and solved through :func:`solve`,
which returns a :class:`MipOutcome`: the status in stagecut's vocabulary (``"optimal"``,
``"time_limit"``, ``"infeasible"``, ``"feasible"``, ``"no_solution"``), the best objective
found (``None`` when there is none) and the proven dual bound (never a primal value). A time
limit is not an error: the best solution and bound found so far come back with status
``"time_limit"``. python-mip is imported lazily so that ``import stagecut`` works without it.

Progress (phase ``"mip"`` of :mod:`stagecut.progress`): inside a ``progress=`` call a solve
reports the seconds it has run out of its time limit about four times a second, and what it
knows of the solution, in the caller's units when the caller gives ``scale=`` to :func:`solve`
(the best cost as ``best``, the dual bound as ``bound``):

* **HiGHS**: the incumbent's cost and the dual bound while it solves, read through HiGHS's MIP
  callbacks (for HiGHS 1.15 to 1.x, whose callback data layout is known; another version reports
  as CBC does);
* **CBC**: only the cost of the MIP start (if one was given with every variable of the
  objective) until the solve ends: python-mip 2.0 exposes no way to watch CBC's incumbent (its
  ``IncumbentUpdater`` is never called, and its search-progress log makes the bundled CBC
  crash), so an improvement CBC finds shows only in the final report;
* both: the final report carries the solve's best cost and proven bound.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stagecut._sigint import (
    INTERRUPTS,
    SIGINT_LOCK,
    SIGINT_STATE,
    Fd1Silenced,
    sigint_enter,
    sigint_exit,
)
from stagecut._sigint import handler_address as _handler_address
from stagecut._sigint import sigaction as _sigaction
from stagecut.errors import BackendUnavailableError, InvalidArgumentError, SolverError
from stagecut.progress import Ticker
from stagecut.validate import check_number

__all__ = ["SOLVERS", "DEFAULT_GAP", "MODEL_TOL", "import_mip", "new_model", "solve", "MipOutcome", "add",
           "MIN_GAP", "MODEL_UNITS", "data_gap", "reference_scale", "stated_tolerance"]

#: Solver names accepted by ``solver=``.
SOLVERS = ("cbc", "highs")
#: The relative optimality gap the MIPs stop at unless told otherwise (see :func:`data_gap`).
DEFAULT_GAP = 1e-6
#: The tightest default gap :func:`data_gap` sets.
MIN_GAP = 1e-9
#: The models measure times in units of ``reference / MODEL_UNITS`` (:func:`reference_scale`):
#: the reference value of the data (the cost of a known solution, else the largest time) is
#: 1000 model units, so that the solvers' absolute tolerances are small next to the answer.
MODEL_UNITS = 1000.0
#: The solvers' absolute tolerances, in model units: integrality and feasibility 1e-6, and CBC
#: proves optimality only up to its cutoff increment, about 1e-5.
MODEL_TOL = 2e-5


def reference_scale(values: Sequence[float], upper: float | None = None) -> float:
    """The value of one model unit, which a MIP divides its times by: ``upper`` (the cost of a
    known solution) when it is positive and finite, else the largest finite magnitude of
    ``values`` (1 when all are 0), over :data:`MODEL_UNITS`.

    >>> reference_scale([7.0, 1e7, 0.0]), reference_scale([7.0, 1e7], upper=20.0), reference_scale([])
    (10000.0, 0.02, 0.001)
    """
    if upper is not None and math.isfinite(upper) and upper > 0:
        return float(upper) / MODEL_UNITS
    finite = [abs(float(v)) for v in values if math.isfinite(v)]
    largest = max(finite, default=0.0)
    return (largest if largest > 0 else 1.0) / MODEL_UNITS


def data_gap(values: Sequence[float], scale: float) -> float:
    """The relative gap a MIP stops at when not told: :data:`DEFAULT_GAP`, tightened (down to
    :data:`MIN_GAP`) so that a tenth of the smallest positive time of the data is not lost next
    to the reference value (``scale * MODEL_UNITS``). A solver that stops within the gap may
    report its incumbent as its bound; with this gap, no two answers the data can tell apart
    are that close.

    >>> data_gap([1.0, 2.0, 5.0], 0.005), data_gap([1.0, 3e7], 3e4)
    (1e-06, 3.3333333333333334e-09)
    """
    positive = [abs(float(v)) for v in values if math.isfinite(v) and v > 0]
    if not positive:
        return DEFAULT_GAP
    return min(DEFAULT_GAP, max(MIN_GAP, min(positive) / (10 * scale * MODEL_UNITS)))


def stated_tolerance(value: float, scale: float, gap: float | None = None) -> float:
    """How close a MIP's proven bound must be to the evaluator's value of its answer for the
    answer to count as optimal (and how far above that value a bound may be before it counts as
    wrong): the relative gap the MIP stopped at (``None``: :data:`DEFAULT_GAP`) of the value, or
    the solvers' tolerance :data:`MODEL_TOL` in model units of ``scale`` (:func:`reference_scale`), whichever
    is larger.

    >>> stated_tolerance(1e7, 1.0), round(stated_tolerance(20.0, 0.02), 12)  # the gap asked (1e-6 of 20)
    (10.0, 2e-05)
    """
    rel = DEFAULT_GAP if gap is None else float(gap)
    return max(rel * abs(value), MODEL_TOL * scale)


def import_mip() -> Any:
    """``import mip`` (a core dependency), or a :class:`BackendUnavailableError` saying how to install it."""
    try:
        import mip  # noqa: F401
    except ImportError as exc:  # pragma: no cover - only in a broken install
        raise BackendUnavailableError(
            "the MIP solvers need python-mip, which did not import; reinstall stagecut (pip install stagecut)"
        ) from exc
    return mip


def check_options(time_limit: float | None = None, gap: float | None = None, threads: int | None = None,
                  seed: int | None = 0, solver: str = "cbc") -> None:
    """Validate the common solver options (bad input is a ValueError)."""
    if solver is None or str(solver).lower() not in SOLVERS:
        raise InvalidArgumentError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if time_limit is not None:
        check_number(time_limit, "time_limit (seconds)", allow_inf=True, positive=True, error=InvalidArgumentError)
    if gap is not None:
        check_number(gap, "gap", allow_inf=True, error=InvalidArgumentError)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise InvalidArgumentError(f"threads must be a positive integer, got {threads!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise InvalidArgumentError(f"seed must be a non-negative integer, got {seed!r}")


def new_model(name: str, *, solver: str = "cbc", gap: float | None = None, threads: int | None = None,
              seed: int | None = 0, verbose: bool = False) -> Any:
    """A minimisation model with the options set and the solver output silenced unless asked."""
    check_options(None, gap, threads, seed, solver)
    mip = import_mip()
    sname = {"cbc": mip.CBC, "highs": mip.HIGHS}[str(solver).lower()]
    try:
        m = mip.Model(name=name, sense=mip.MINIMIZE, solver_name=sname)
    except Exception as exc:  # HiGHS library missing, CBC failing to load, ...
        if sname == mip.HIGHS:
            raise BackendUnavailableError(
                "the HiGHS solver is not installed: pip install 'stagecut[highs]' (or use solver='cbc')"
            ) from exc
        raise SolverError(f"cannot start the {solver} solver through python-mip: {exc}") from exc
    m.verbose = 1 if verbose else 0
    m.max_mip_gap = float(gap) if gap is not None else DEFAULT_GAP
    m.max_mip_gap_abs = 1e-9
    m.integer_tol = min(1e-6, max(1e-9, m.max_mip_gap))  # (a gap tighter than 1e-6 needs integrality to match)
    if sname == mip.CBC:
        _cbc_increment(m)
    m.threads = int(threads) if threads is not None else 1
    if seed is not None:
        m.seed = int(seed)
    return m


#: CBC's cutoff increment, in model units: it looks for no solution less than this better than
#: its incumbent. Its own choice can be a whole unit (when it deems the objective integral),
#: which would hide answers 1e-4 of the reference value apart.
CBC_INCREMENT = 1e-7


def _cbc_increment(model: Any) -> None:
    try:
        from mip.cbc import cbc_set_parameter

        cbc_set_parameter(model.solver, "increment", repr(CBC_INCREMENT))
    except Exception:  # pragma: no cover - a python-mip without this entry point
        pass


def add(model: Any, constraints: Any) -> None:
    """Add a constraint tensor (or one constraint) unless it is empty."""
    if getattr(constraints, "size", 1) == 0:
        return
    model += constraints


@dataclass(frozen=True)
class MipOutcome:
    """What one solve gave."""

    status: str
    objective: float | None
    bound: float
    seconds: float
    solver: str
    rows: int
    cols: int

    @property
    def gap(self) -> float | None:
        if self.objective is None:
            return None
        if self.objective == 0:
            return 0.0
        return max(0.0, (self.objective - self.bound) / abs(self.objective))


#: A dual bound this large from a solve that proved nothing (stopped by its limit) is the
#: solver's "infinity", not a bound: it is read as no bound at all.
UNPROVEN_BOUND = 1e300


def solve(model: Any, *, time_limit: float | None = None, start: Sequence[tuple[Any, float]] | None = None,
          relax: bool = False, scale: float | None = None) -> MipOutcome:
    """Optimise; map the status; read the dual bound.

    ``start`` is a list of ``(var, value)`` pairs (a MIP start). With a time limit the best
    solution and bound are returned with status ``"time_limit"``; the limit covers the whole solve:
    the solver is asked to stop :func:`solver_limit` seconds in, and a solver that has not
    stopped :data:`GIVE_UP_AFTER` past ``time_limit`` is no longer waited for (status
    ``"time_limit"``, no solution, no bound). ``scale``: the caller's value
    of one unit of the objective (see :func:`reference_scale`), which the progress reports
    multiply the best cost and bound by; ``None``: they report neither (see the module docs).
    """
    mip = import_mip()
    S = mip.OptimizationStatus
    if start:
        model.start = [(v, float(x)) for v, x in start]
    limit = math.inf if time_limit is None else float(time_limit)
    if math.isfinite(limit) and str(model.solver_name).lower() == "cbc":
        # CBC can crash the process (a segfault in CglPreProcess::postProcess) when a time limit
        # stops it inside its preprocessing: about 1 run in 15 on a 12-node latency MILP at 0.5 s;
        # with preprocessing off, 120 time-limited solves ran clean
        model.preprocess = 0
    t0 = time.perf_counter()
    rows, cols, name = model.num_rows, model.num_cols, str(model.solver_name).lower()
    watch = _Watch(model, start, scale)
    try:
        st = _optimize(model, limit, relax, watch)
    except Exception as exc:
        watch.final(time.perf_counter() - t0, None, None)
        raise SolverError(f"the {model.solver_name} solver failed: {exc}") from exc
    seconds = time.perf_counter() - t0
    if st is _OVERRAN:  # the solver is still running (see _optimize): its model is not touched again
        watch.final(seconds, None, None)
        return MipOutcome(status="time_limit", objective=None, bound=-math.inf, seconds=seconds, solver=name,
                          rows=rows, cols=cols)
    has_sol = model.num_solutions > 0 and model.objective_value is not None
    obj = _solution_value(model) if has_sol else None
    try:
        bound = float(model.objective_bound)
    except (TypeError, ValueError):
        bound = -math.inf
    if math.isnan(bound):
        bound = -math.inf
    if st == S.OPTIMAL:
        status = "optimal"
        if relax:
            bound = obj if obj is not None else bound
    elif st in (S.INFEASIBLE, S.INT_INFEASIBLE):
        status, obj, bound = "infeasible", None, math.inf
    elif st == S.FEASIBLE:
        status = "time_limit" if seconds >= 0.95 * solver_limit(limit) else "feasible"
    elif st == S.NO_SOLUTION_FOUND:
        status = "time_limit" if seconds >= 0.95 * solver_limit(limit) else "no_solution"
        obj = None
    elif st == S.UNBOUNDED:
        raise SolverError("internal error: the MIP is unbounded; please report this with the input")
    else:
        status = "feasible" if obj is not None else "no_solution"
    if status not in ("optimal", "infeasible") and abs(bound) >= UNPROVEN_BOUND:
        bound = -math.inf  # (stopped before it had a bound: CBC then reports +inf or its 1.8e308 "infinity")
    if obj is not None and bound > obj:
        bound = obj  # the bound is at most the best primal value (round-off)
    watch.final(seconds, obj, bound if math.isfinite(bound) else None)
    return MipOutcome(status=status, objective=obj, bound=bound, seconds=seconds,
                      solver=str(model.solver_name).lower(), rows=model.num_rows, cols=model.num_cols)


#: Seconds before a solve's time limit (or 5% of the limit, if more; at most half of it) at
#: which the solver is asked to stop (:func:`solver_limit`). CBC checks its clock late in some long
#: phases of large models (root cuts, strong branching: 82 s for a 60 s limit on a large training
#: graph), and the caller's time limit is a promise: :func:`solve` stops waiting
#: :data:`GIVE_UP_AFTER` past the limit and answers "time_limit" with no solution. The solver
#: thread is left to end on its own (a daemon: it never keeps the process alive).
OVERRUN_GRACE = 2.0
#: Seconds past a solve's time limit after which :func:`solve` stops waiting for the solver (the
#: solvers' own start and wind-down take tens of milliseconds, which a short limit must allow).
GIVE_UP_AFTER = 0.25


def solver_limit(limit: float) -> float:
    """The time limit the solver itself is given for a solve limited to ``limit`` seconds: the
    limit less :data:`OVERRUN_GRACE` (or 5% of the limit, if more; at most half of it), so that
    a solver which checks its clock a little late still ends inside ``limit``.

    >>> solver_limit(600.0), solver_limit(10.0), solver_limit(1.0), solver_limit(float("inf"))
    (570.0, 8.0, 0.5, inf)
    """
    if not math.isfinite(limit):
        return limit
    return limit - max(min(OVERRUN_GRACE, 0.5 * limit), 0.05 * limit)


_OVERRAN = object()


def _optimize(model: Any, limit: float, relax: bool, watch: _Watch) -> Any:
    """``model.optimize`` on a helper thread, the calling thread waiting in 50 ms steps, so that
    Ctrl-C raises ``KeyboardInterrupt`` within a second even though the solver's C code never
    returns to Python until it ends (and reporting the seconds spent out of ``limit`` as the
    progress of phase ``"mip"``, :mod:`stagecut.progress`).

    Ctrl-C during a solve always ends the call with ``KeyboardInterrupt``, never with an answer:
    some CBC builds (cbcbox's generic one, not its AVX2 one) install their own SIGINT handler while
    they solve (it stops the search and reports the incumbent as if the search had ended), so the
    main thread puts the caller's handler back while it waits, and a CBC solve that nevertheless
    stopped on that event (the signal came before the handler was put back, or the solve ran on
    another thread) raises ``KeyboardInterrupt`` too. An interrupted, overrunning or abandoned solve is asked to stop
    (CBC through its own handler where it has one, HiGHS through its interrupt callback; a CBC
    build without a handler cannot be stopped from outside and runs on to its own time limit); its
    model is not used again, and its thread is a daemon that never keeps the process alive."""
    import threading

    out: dict[str, Any] = {}
    interrupt = _Interrupt(model, watch.seen if watch.watching else None)
    generation = INTERRUPTS[0]

    def work() -> None:
        sigint_enter()
        try:
            # CBC's LP path (relax=True) prints Clp's log whatever the log level: the only output
            # silenced by redirecting file descriptor 1 (shared by all threads, restored by the last)
            with Fd1Silenced(relax and interrupt.cbc and model.verbose == 0):
                out["status"] = model.optimize(max_seconds=solver_limit(limit), relax=relax)
        except BaseException as exc:  # re-raised on the calling thread
            out["error"] = exc
        finally:
            sigint_exit()

    watch.start(limit)
    t0 = time.perf_counter()
    give_up = limit + GIVE_UP_AFTER  # (the solver was asked to stop earlier: solver_limit)
    main = threading.current_thread() is threading.main_thread()
    worker = threading.Thread(target=work, name="stagecut-mip", daemon=True)
    try:
        worker.start()
        while worker.is_alive():
            worker.join(0.05)
            if main:
                interrupt.reclaim()
            if INTERRUPTS[0] != generation:  # a solve on another thread was interrupted
                raise KeyboardInterrupt
            watch(time.perf_counter() - t0)
            if time.perf_counter() - t0 > give_up:
                interrupt.stop(worker)
                return _OVERRAN  # CBC stuck in a phase that does not look at its clock: stop waiting
    except BaseException:  # Ctrl-C, a progress callback's exception: the solve is abandoned
        interrupt.stop(worker)
        raise
    if "error" in out:
        raise out["error"]
    status = out["status"]
    if not relax and interrupt.stopped_by_signal(status):
        INTERRUPTS[0] += 1
        raise KeyboardInterrupt
    return status


class _Interrupt:
    """Ctrl-C for one solve: the solver's own SIGINT handler replaced by the caller's while the
    main thread waits (:meth:`reclaim`), the solve asked to stop (:meth:`stop`), and whether it
    stopped on a signal (:meth:`stopped_by_signal`)."""

    def __init__(self, model: Any, seen: dict[str, float] | None) -> None:
        self.model = model
        self.cbc = str(model.solver_name).lower() == "cbc"
        self.foreign: int | None = None  # the address of the solver's own SIGINT handler
        self.flags: dict[str, bool] = {}
        if not self.cbc:
            _highs_callback(model, self.flags, seen)

    def reclaim(self) -> None:
        with SIGINT_LOCK:
            saved = SIGINT_STATE[1]
            if saved is None:
                return
            now = _sigaction()
            address = _handler_address(now)
            if address is not None and address != _handler_address(saved):
                if address > 1:  # not SIG_DFL (0) or SIG_IGN (1)
                    self.foreign = address
                _sigaction(saved)

    def stop(self, worker: Any) -> None:
        """Ask the solver to end its search (its answer is not used)."""
        self.flags["stop"] = True  # HiGHS: read by its interrupt callback
        if self.cbc and self.foreign is not None and worker.is_alive():
            try:
                import ctypes
                import signal

                ctypes.CFUNCTYPE(None, ctypes.c_int)(self.foreign)(int(signal.SIGINT))
            except Exception:  # pragma: no cover - the solve then ends at its own time limit
                pass

    def stopped_by_signal(self, status: Any) -> bool:
        """Whether CBC ended a MIP search on a signal: python-mip says ``FEASIBLE`` or
        ``NO_SOLUTION_FOUND`` (a search cut short) and CBC says "stopped" (status 1) with a
        secondary status of 3 or 5 (a stop on an event; stagecut sets no node limit, which is the
        other cause of 3). CBC answers these questions only after a MIP search (it aborts the
        process otherwise), hence the first test."""
        if not self.cbc:
            return False
        mip = import_mip()
        if status not in (mip.OptimizationStatus.FEASIBLE, mip.OptimizationStatus.NO_SOLUTION_FOUND):
            return False
        try:
            lib = _cbc_status_lib()
            if lib is None:
                return False
            from mip.cbc import ffi

            pointer = int(ffi.cast("uintptr_t", self.model.solver._model))
            return bool(lib.Cbc_status(pointer) == 1 and lib.Cbc_secondaryStatus(pointer) in (3, 5))
        except Exception:  # pragma: no cover - a python-mip whose CBC model is not reachable so
            return False


_CBC_LIB: list[Any] = []


def _cbc_status_lib() -> Any:
    """CBC's C library with ``Cbc_status``/``Cbc_secondaryStatus`` (python-mip declares neither)."""
    if not _CBC_LIB:
        try:
            import ctypes

            import mip.cbc

            lib = ctypes.CDLL(mip.cbc.libfile)
            for name in ("Cbc_status", "Cbc_secondaryStatus"):
                getattr(lib, name).argtypes = [ctypes.c_void_p]
                getattr(lib, name).restype = ctypes.c_int
            _CBC_LIB.append(lib)
        except Exception:  # pragma: no cover - a python-mip without ``libfile``
            _CBC_LIB.append(None)
    return _CBC_LIB[0]


class _Watch:
    """The progress of one solve (phase ``"mip"``): its seconds, and the best cost and dual bound
    known so far (kept in model units; reported times ``scale``, only when ``scale`` is given)."""

    def __init__(self, model: Any, start: Sequence[tuple[Any, float]] | None, scale: float | None) -> None:
        self.tick = Ticker("mip", None)
        self.scale = float(scale) if scale is not None and math.isfinite(scale) and scale > 0 else None
        self.best: float | None = None
        self.bound: float | None = None
        self.seen: dict[str, float] = {}  # written by the HiGHS callbacks, on the solver's thread
        self.watching = False  # whether the HiGHS callback is to fill ``seen``
        if not self.tick.active or self.scale is None:
            return
        if start:
            self.best = _start_value(model, start)
        self.watching = True

    def start(self, limit: float) -> None:
        self.tick.total = limit if math.isfinite(limit) else None

    def _user(self, x: float | None) -> float | None:
        return None if x is None or self.scale is None or not math.isfinite(x) else x * self.scale

    def __call__(self, seconds: float) -> None:
        if not self.tick.active:
            return
        primal, dual = self.seen.get("primal", math.inf), self.seen.get("dual", -math.inf)
        if math.isfinite(primal) and (self.best is None or primal < self.best):
            self.best = primal
        if math.isfinite(dual) and (self.bound is None or dual > self.bound):
            self.bound = dual
        bound = self.bound if self.bound is None or self.best is None else min(self.bound, self.best)
        self.tick(seconds, self._user(self.best), self._user(bound))

    def final(self, seconds: float, objective: float | None, bound: float | None) -> None:
        self.tick.final(seconds, self._user(objective), self._user(bound))


def _start_value(model: Any, start: Sequence[tuple[Any, float]]) -> float | None:
    """The objective at a MIP start (``None`` when it leaves a variable of the objective out)."""
    try:
        values = {v.idx: float(x) for v, x in start}
        expr = model.objective
        total = float(expr.const)
        for var, coef in expr.expr.items():
            if coef:
                if var.idx not in values:
                    return None
                total += float(coef) * values[var.idx]
    except Exception:  # pragma: no cover - an objective python-mip does not expose this way
        return None
    return total if math.isfinite(total) else None


#: The head of HiGHS's ``HighsCallbackDataOut`` (``lp_data/HighsCallbackStruct.h``) in HiGHS 1.15,
#: with 32-bit ``HighsInt``: python-mip 2.0 declares an older layout, whose bounds read garbage.
_HIGHS_OUT = """typedef struct {
    void* cbdata; int log_type; double running_time; int simplex_iteration_count; int ipm_iteration_count;
    int pdlp_iteration_count; double objective_function_value; int64_t mip_node_count;
    int64_t mip_total_lp_iterations; double mip_primal_bound; double mip_dual_bound; double mip_gap;
} stagecut_highs_out;"""
_HIGHS_FFI: list[Any] = []


def _highs_callback(model: Any, flags: dict[str, bool], seen: dict[str, float] | None) -> None:
    """HiGHS's MIP callback: it stops the search once ``flags["stop"]`` is set (on every check for
    an interrupt), and, when ``seen`` is given, writes there the incumbent's cost and the dual
    bound (keys ``"primal"``, ``"dual"``, model units) on every improving solution and every
    check for an interrupt; the bounds are read only with a HiGHS whose callback data layout is
    the one known here (1.15 to 1.x)."""
    try:
        from mip import highs

        solver = model.solver
        lib, hffi = solver._lib, highs.ffi
        layout_known = lib.Highs_versionMajor() == 1 and lib.Highs_versionMinor() >= 15
        own = None
        if seen is not None and layout_known:
            if not _HIGHS_FFI:
                import cffi  # type: ignore[import-untyped]  # a dependency of python-mip

                ffi = cffi.FFI()
                ffi.cdef(_HIGHS_OUT)
                _HIGHS_FFI.append(ffi)
            own = _HIGHS_FFI[0]

        def read(kind: int, message: Any, out: Any, data_in: Any, user: Any) -> None:
            try:
                if flags.get("stop") and data_in != hffi.NULL:
                    data_in.user_interrupt = 1
                if own is not None and seen is not None:
                    data = own.cast("stagecut_highs_out *", int(hffi.cast("uintptr_t", out)))
                    seen["primal"], seen["dual"] = float(data.mip_primal_bound), float(data.mip_dual_bound)
            except Exception:  # pragma: no cover - nothing may propagate into the C solver
                pass

        callback = hffi.callback("void(int, const char*, const HighsCallbackDataOut*, HighsCallbackDataIn*, void*)",
                                 read)
        if lib.Highs_setCallback(solver._model, callback, hffi.NULL) != 0:
            return
        kinds = [lib.kHighsCallbackMipInterrupt]
        if own is not None:
            kinds.append(lib.kHighsCallbackMipImprovingSolution)
        for kind in kinds:
            lib.Highs_startCallback(solver._model, kind)
        # kept alive while the solver may call it (under another name when it only stops the search)
        setattr(model, "_stagecut_progress_callback" if own is not None else "_stagecut_stop_callback", callback)
    except Exception:  # a python-mip or HiGHS without these entry points: no early stop, seconds only
        return


def _solution_value(model: Any) -> float:
    """The objective at the solution's variable values (CBC's reported objective can sit up to
    about 1e-5 below it after its preprocessing); the reported value when that cannot be read."""
    try:
        value = model.objective.x
    except Exception:  # pragma: no cover - a solver without the expression's value
        value = None
    if value is None or not math.isfinite(float(value)):
        return float(model.objective_value)
    return float(value)
