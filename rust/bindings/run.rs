//! How every long call runs: on the crate's thread pool ([`crate::pool`], rebuilt in a forked
//! child), with the GIL released, while the calling thread watches for Python signals.
//!
//! The work is spawned on the pool; the calling thread waits for it in ticks of [`TICK`] and,
//! every tick, takes the GIL briefly to run `PyErr_CheckSignals` (the pattern of polars and
//! pydantic-core). When a signal handler raises (Ctrl-C: `KeyboardInterrupt`), the call's
//! [`Cancel`] token is interrupted, the workers stop at their next poll, and the handler's
//! exception is raised once they have: no computation outlives its call. The token also carries
//! the call's deadline (`time_limit` seconds), which the workers check in the same polls.

use std::panic::{self, AssertUnwindSafe};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use pyo3::prelude::*;

use crate::cancel::Cancel;
use crate::error::{CoreError, CoreResult};
use crate::pool;

/// How often the waiting thread checks for signals.
pub(crate) const TICK: Duration = Duration::from_millis(50);

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
    let (outcome, signal) = py.allow_threads(|| {
        let slot: Slot<Outcome<T>> = Slot::new();
        let mut signal: Option<PyErr> = None;
        let outcome = pool.in_place_scope(|s| {
            let (slot, cancel) = (&slot, &cancel);
            s.spawn(move |_| {
                slot.put(panic::catch_unwind(AssertUnwindSafe(|| work(cancel))));
            });
            loop {
                if let Some(r) = slot.take_within(TICK) {
                    break r;
                }
                if signal.is_none() {
                    if let Err(e) = Python::with_gil(|py| py.check_signals()) {
                        cancel.interrupt();
                        signal = Some(e);
                    }
                }
            }
        });
        (outcome, signal)
    });
    if let Some(e) = signal {
        return Err(e);
    }
    match outcome {
        Ok(r) => Ok(r?),
        Err(payload) => panic::resume_unwind(payload),
    }
}
