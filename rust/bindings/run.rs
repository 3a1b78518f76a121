//! How every long call runs: on the crate's thread pool ([`crate::pool`], rebuilt in a forked
//! child), with the GIL released, while the calling thread watches for Python signals.
//!
//! The work is spawned on the pool; the calling thread waits for it in ticks of [`TICK`] and,
//! every tick, takes the GIL briefly to run `PyErr_CheckSignals` (the pattern of polars and
//! pydantic-core). When a signal handler raises (Ctrl-C: `KeyboardInterrupt`), the call's
//! [`Cancel`] token is interrupted, the workers stop at their next poll, and the handler's
//! exception is raised once they have: no computation outlives its call. The token also carries
//! the call's deadline (`time_limit` seconds), which the workers check in the same polls.
//!
//! Progress: when the calling thread has a progress hook ([`set_progress_hook`], installed by
//! `stagecut.progress`), the waiting thread also passes the token's [`Snapshot`] to it every
//! [`REPORT`], as `hook(phase, done, total, best, last)` (`total` 0: unknown; `best` NaN:
//! none; `last`: the final report of that run of the phase). Every phase run that ends gets a
//! final report (at the next report, or when the call ends), short runs too. A hook that raises
//! stops the work like a signal does, and its exception is raised.

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

use crate::cancel::Cancel;
use crate::error::{CoreError, CoreResult};
use crate::pool;
use crate::progress::{Phase, Progress, Snapshot};

/// How often the waiting thread checks for signals.
pub(crate) const TICK: Duration = Duration::from_millis(50);

/// How often the waiting thread reports progress to the hook.
pub(crate) const REPORT: Duration = Duration::from_millis(250);

thread_local! {
    /// The progress hook of this (Python) thread's calls into the core.
    static HOOK: RefCell<Option<Py<PyAny>>> = const { RefCell::new(None) };
}

/// Install `hook` as this thread's progress hook (`None`: none); returns the previous one.
#[pyfunction]
#[pyo3(signature = (hook=None))]
pub(crate) fn set_progress_hook(hook: Option<Py<PyAny>>) -> Option<Py<PyAny>> {
    HOOK.with(|h| h.replace(hook))
}

/// Pass `snap` to `hook` (nothing for a call that reports no phase).
fn report(py: Python<'_>, hook: &Py<PyAny>, snap: Snapshot, last: bool) -> PyResult<()> {
    if snap.phase == Phase::Idle {
        return Ok(());
    }
    let best = snap.best.unwrap_or(f64::NAN);
    hook.call1(py, (snap.phase.name(), snap.done, snap.total, best, last))?;
    Ok(())
}

/// Report to `hook` the final state of the phase runs that ended since the last call (those
/// begun after the `finals`-th, which it then advances), then the current state, also as a
/// final one when `last`.
fn report_all(
    py: Python<'_>,
    hook: &Py<PyAny>,
    progress: &Progress,
    finals: &mut u64,
    last: bool,
) -> PyResult<()> {
    let (ended, now) = progress.state_after(*finals);
    for snap in ended {
        report(py, hook, snap, true)?;
        *finals = snap.started;
    }
    report(py, hook, now, last)?;
    if last {
        *finals = now.started;
    }
    Ok(())
}

/// A one-shot slot the worker fills and the caller waits on.
struct Slot<R> {
    value: Mutex<Option<R>>,
    ready: Condvar,
}

impl<R> Slot<R> {
    fn new() -> Self {
        Slot {
            value: Mutex::new(None),
            ready: Condvar::new(),
        }
    }

    fn put(&self, r: R) {
        *self.value.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        self.ready.notify_all();
    }

    /// The value, if it arrives within `timeout`.
    fn take_within(&self, timeout: Duration) -> Option<R> {
        let guard = self.value.lock().unwrap_or_else(|e| e.into_inner());
        let (mut guard, _) = self
            .ready
            .wait_timeout_while(guard, timeout, |v| v.is_none())
            .unwrap_or_else(|e| e.into_inner());
        guard.take()
    }
}

/// A `time_limit` argument as a duration: `None` or `inf` is no limit; NaN or a negative
/// number is an `InvalidArgument` error.
pub(crate) fn limit(time_limit: Option<f64>) -> CoreResult<Option<Duration>> {
    match time_limit {
        None => Ok(None),
        Some(t) if t.is_nan() || t < 0.0 => Err(CoreError::InvalidArgument(format!(
            "time_limit must be a non-negative number of seconds, got {t}"
        ))),
        Some(t) => Ok(Duration::try_from_secs_f64(t).ok()),
    }
}

type Outcome<T> = std::thread::Result<CoreResult<T>>;

/// Run `work` on the pool with the GIL released, interruptible by Python signals and limited
/// to `time_limit` seconds (see the module docs). A signal's exception wins over the result;
/// a panic in `work` is re-raised here (PyO3 turns it into a `PanicException`).
pub(crate) fn run<T, F>(py: Python<'_>, time_limit: Option<f64>, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce(&Cancel) -> CoreResult<T> + Send,
{
    let cancel = Cancel::with_limit(limit(time_limit)?);
    let pool = pool::get()?;
    let hook = HOOK.with(|h| h.borrow().as_ref().map(|x| x.clone_ref(py)));
    let (outcome, signal, mut finals) = py.allow_threads(|| {
        let slot: Slot<Outcome<T>> = Slot::new();
        let mut signal: Option<PyErr> = None;
        let mut reported = Instant::now();
        let mut finals = 0u64;
        let outcome = pool.in_place_scope(|s| {
            let (slot, cancel) = (&slot, &cancel);
            s.spawn(move |_| {
                slot.put(panic::catch_unwind(AssertUnwindSafe(|| work(cancel))));
            });
            loop {
                if let Some(r) = slot.take_within(TICK) {
                    break r;
                }
                if signal.is_some() {
                    continue;
                }
                let due = hook.as_ref().filter(|_| reported.elapsed() >= REPORT);
                let checked = Python::with_gil(|py| {
                    py.check_signals()?;
                    if let Some(h) = due {
                        report_all(py, h, cancel.progress(), &mut finals, false)?;
                    }
                    Ok::<(), PyErr>(())
                });
                if due.is_some() {
                    reported = Instant::now();
                }
                if let Err(e) = checked {
                    cancel.interrupt();
                    signal = Some(e);
                }
            }
        });
        (outcome, signal, finals)
    });
    if let Some(e) = signal {
        return Err(e);
    }
    match outcome {
        Ok(Ok(r)) => {
            if let Some(h) = &hook {
                report_all(py, h, cancel.progress(), &mut finals, true)?;
            }
            Ok(r)
        }
        Ok(Err(e)) => Err(e.into()),
        Err(payload) => panic::resume_unwind(payload),
    }
}
