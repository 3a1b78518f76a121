//! Cooperative cancellation: a [`Cancel`] token carries an "interrupted" flag (set by the
//! Python bindings when a signal such as Ctrl-C arrives) and an optional deadline (a solver's
//! time limit). Every long loop of the core polls it cheaply through a [`Ticker`] and stops at
//! its next poll, either with an error ([`Stop`] converts into [`CoreError`]) or, for a search
//! that has an incumbent, by returning its best-so-far marked as stopped.
//!
//! A token is shared by all the threads working for one call; once it reports a stop it keeps
//! reporting the same one. It also carries the call's [`Progress`] counters, which the same
//! loops update (see [`crate::progress`]).

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crate::error::CoreError;
use crate::progress::Progress;

/// Why a computation stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The caller asked to stop (a signal in Python): the answer is thrown away.
    Interrupted,
    /// The time limit passed: a search returns its best so far, an exact DP has no answer.
    Deadline,
}

impl From<Stop> for CoreError {
    fn from(s: Stop) -> CoreError {
        match s {
            Stop::Interrupted => CoreError::Interrupted,
            Stop::Deadline => CoreError::DeadlineReached,
        }
    }
}

const RUNNING: u8 = 0;
const INTERRUPTED: u8 = 1;
const DEADLINE: u8 = 2;

/// The cancellation token of one call (see the module docs).
#[derive(Debug)]
pub struct Cancel {
    state: AtomicU8,
    deadline: Option<Instant>,
    progress: Progress,
}

impl Default for Cancel {
    fn default() -> Self {
        Cancel::never()
    }
}

impl Cancel {
    /// A token that stops only when [`Cancel::interrupt`] is called.
    pub fn never() -> Cancel {
        Cancel {
            state: AtomicU8::new(RUNNING),
            deadline: None,
            progress: Progress::default(),
        }
    }

    /// A token whose deadline is `limit` from now (`None`: no deadline). A limit too large to
    /// represent is no limit.
    pub fn with_limit(limit: Option<Duration>) -> Cancel {
        Cancel {
            state: AtomicU8::new(RUNNING),
            deadline: limit.and_then(|d| Instant::now().checked_add(d)),
            progress: Progress::default(),
        }
    }

    /// Ask every poller to stop (idempotent; a deadline already reported stays reported).
    pub fn interrupt(&self) {
        let _ =
            self.state
                .compare_exchange(RUNNING, INTERRUPTED, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// The stop already recorded, without reading the clock.
    #[inline]
    pub fn stopped(&self) -> Option<Stop> {
        match self.state.load(Ordering::Relaxed) {
            RUNNING => None,
            INTERRUPTED => Some(Stop::Interrupted),
            _ => Some(Stop::Deadline),
        }
    }

    /// `Err` once interrupted or past the deadline (reads the clock when there is a deadline:
    /// call it every few thousand cheap iterations, or use a [`Ticker`]).
    #[inline]
    pub fn check(&self) -> Result<(), Stop> {
        if let Some(s) = self.stopped() {
            return Err(s);
        }
        if let Some(d) = self.deadline {
            if Instant::now() >= d {
                let _ = self.state.compare_exchange(
                    RUNNING,
                    DEADLINE,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                return Err(self.stopped().unwrap_or(Stop::Deadline));
            }
        }
        Ok(())
    }

    /// The call's progress counters.
    #[inline]
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// A poller that calls [`Cancel::check`] on its first tick and then every `every` ticks
    /// (rounded up to a power of two).
    pub fn ticker(&self, every: u32) -> Ticker<'_> {
        let mask = every.clamp(1, 1 << 30).next_power_of_two() - 1;
        Ticker {
            cancel: self,
            mask,
            n: mask,
        }
    }
}

/// Free `x` on a short-lived thread of its own: a computation that stops with millions of small
/// allocations (ideal sets, per-upset tables) returns at once instead of spending up to a second
/// in `free`. Dropped in place if no thread can be started.
pub fn drop_in_background<T: Send + 'static>(x: T) {
    // on failure, `spawn` drops the closure (and `x`) right here
    let _ = std::thread::Builder::new()
        .name("stagecut-free".into())
        .spawn(move || drop(x));
}

/// Counts iterations of a hot loop and polls its [`Cancel`] every `2^j` of them.
#[derive(Debug)]
pub struct Ticker<'c> {
    cancel: &'c Cancel,
    mask: u32,
    n: u32,
}

impl Ticker<'_> {
    /// One iteration; `Err` when a poll finds the token stopped.
    #[inline]
    pub fn tick(&mut self) -> Result<(), Stop> {
        self.n = self.n.wrapping_add(1);
        if self.n & self.mask == 0 {
            self.cancel.check()
        } else {
            Ok(())
        }
    }

    /// [`Ticker::tick`] that also records `done()` as the progress of the current phase when
    /// it polls (so a hot loop pays for its progress only every `2^j` iterations).
    #[inline]
    pub fn tick_at(&mut self, done: impl FnOnce() -> u64) -> Result<(), Stop> {
        self.n = self.n.wrapping_add(1);
        if self.n & self.mask == 0 {
            self.cancel.progress.reach(done());
            self.cancel.check()
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupt_and_deadline_are_reported_and_sticky() {
        let c = Cancel::never();
        assert_eq!(c.check(), Ok(()));
        c.interrupt();
        assert_eq!(c.check(), Err(Stop::Interrupted));
        assert_eq!(c.stopped(), Some(Stop::Interrupted));
        let d = Cancel::with_limit(Some(Duration::ZERO));
        assert_eq!(d.check(), Err(Stop::Deadline));
        d.interrupt(); // the deadline came first and stays the reason
        assert_eq!(d.check(), Err(Stop::Deadline));
        let far = Cancel::with_limit(Some(Duration::from_secs(3600)));
        assert_eq!(far.check(), Ok(()));
        assert_eq!(
            Cancel::with_limit(Some(Duration::MAX)).check(),
            Ok(()),
            "an unrepresentable deadline is no deadline"
        );
        assert_eq!(CoreError::from(Stop::Deadline), CoreError::DeadlineReached);
    }

    #[test]
    fn ticker_polls_every_power_of_two() {
        let c = Cancel::never();
        let mut t = c.ticker(1000); // every 1024
        for _ in 0..5000 {
            assert!(t.tick().is_ok());
        }
        c.interrupt();
        let stopped_after = (1..=1024).find(|_| t.tick().is_err());
        assert!(stopped_after.is_some());
    }

    #[test]
    fn tick_at_records_progress_when_it_polls() {
        let c = Cancel::never();
        c.progress().begin(crate::progress::Phase::Ideals, 0);
        let mut t = c.ticker(4);
        let mut calls = 0;
        for i in 0..10u64 {
            assert!(t
                .tick_at(|| {
                    calls += 1;
                    i
                })
                .is_ok());
        }
        // polls at the 1st, 5th and 9th ticks
        assert_eq!((calls, c.progress().snapshot().done), (3, 8));
    }
}
