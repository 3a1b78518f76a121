//! Progress counters of one call: which phase of the work is running, how much of it is done
//! out of how much, and the best value found so far. The long loops of the core update them
//! with relaxed atomics (a store or an add per level, chunk, decode or ticker poll); the
//! Python bindings read a [`Snapshot`] from the waiting thread and pass it to the progress hook
//! the caller installed (`stagecut.progress`).
//!
//! A [`Progress`] lives in the call's [`crate::Cancel`] token, so every loop that polls the token
//! can report through it. [`Progress::begin`] starts a phase (its `done` back at 0, no best);
//! within a phase `done` never decreases and the best never increases.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

/// How many ended phase runs a [`Progress`] remembers (a call runs a handful).
const ENDED: usize = 64;

/// What the core is doing (the name the Python side shows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Nothing reported (a call without progress, or before its first phase).
    Idle = 0,
    /// Enumerating the ideals of a DAG (`done`: ideals found; the total is unknown).
    Ideals = 1,
    /// Linking each ideal to its immediate sub-ideals (`done` of `total` ideals).
    IdealLinks = 2,
    /// The DP over ideals (`done` of `total` ideals whose table row is computed).
    Dp = 3,
    /// BRKGA over node priorities (`done` of `total` decodes; best: the best decoded cost).
    Brkga = 4,
    /// Random-T (`done` of `total` samples; best: the best decoded cost).
    Random = 5,
    /// BRKGA on the linear-arrangement cost (`done` of `total` evaluations; no best reported:
    /// the arrangement cost is not the objective).
    Mla = 6,
    /// Piper's training DP (`done` of `total` upsets whose table is computed).
    Piper = 7,
}

impl Phase {
    const ALL: [Phase; 8] = [
        Phase::Idle,
        Phase::Ideals,
        Phase::IdealLinks,
        Phase::Dp,
        Phase::Brkga,
        Phase::Random,
        Phase::Mla,
        Phase::Piper,
    ];

    /// The name the Python side receives.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Idle => "",
            Phase::Ideals => "ideals",
            Phase::IdealLinks => "ideal links",
            Phase::Dp => "dp",
            Phase::Brkga => "brkga",
            Phase::Random => "random",
            Phase::Mla => "mla",
            Phase::Piper => "piper dp",
        }
    }

    fn from_code(code: u8) -> Phase {
        Phase::ALL
            .get(usize::from(code))
            .copied()
            .unwrap_or(Phase::Idle)
    }
}

/// One consistent reading of a [`Progress`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Snapshot {
    pub phase: Phase,
    /// How many phases have begun so far (tells a restarted phase from a continued one).
    pub started: u64,
    pub done: u64,
    /// 0: unknown.
    pub total: u64,
    /// The best value so far (`None`: none yet, or the phase reports none).
    pub best: Option<f64>,
}

/// The counters (see the module docs).
#[derive(Debug)]
pub struct Progress {
    /// Twice the phases begun, plus one while [`Progress::begin`] is writing (a sequence lock:
    /// a reader retries when it changed under it).
    seq: AtomicU64,
    phase: AtomicU8,
    done: AtomicU64,
    total: AtomicU64,
    /// `f64` bits; NaN: none.
    best: AtomicU64,
    /// The final state of the phase runs that have ended (the latest [`ENDED`]).
    ended: Mutex<Vec<Snapshot>>,
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            seq: AtomicU64::new(0),
            phase: AtomicU8::new(Phase::Idle as u8),
            done: AtomicU64::new(0),
            total: AtomicU64::new(0),
            best: AtomicU64::new(f64::NAN.to_bits()),
            ended: Mutex::new(Vec::new()),
        }
    }
}

impl Progress {
    /// Start `phase` with `total` steps (0: unknown): `done` back at 0, no best yet. The run
    /// that was going on ends (see [`Progress::ended_after`]).
    pub fn begin(&self, phase: Phase, total: u64) {
        // under the lock, so that `state_after` sees the run either going on or ended
        let mut ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
        let last = self.snapshot();
        if last.phase != Phase::Idle {
            if ended.len() == ENDED {
                ended.remove(0);
            }
            ended.push(last);
        }
        self.seq.fetch_add(1, Ordering::AcqRel);
        self.done.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
        self.best.store(f64::NAN.to_bits(), Ordering::Relaxed);
        self.phase.store(phase as u8, Ordering::Relaxed);
        self.seq.fetch_add(1, Ordering::AcqRel);
    }

    /// `done` is at least `done` (it never decreases within a phase).
    #[inline]
    pub fn reach(&self, done: u64) {
        self.done.fetch_max(done, Ordering::Relaxed);
    }

    /// `by` more steps done.
    #[inline]
    pub fn advance(&self, by: u64) {
        self.done.fetch_add(by, Ordering::Relaxed);
    }

    /// Record `value` as the best if it is finite and below the best so far.
    pub fn offer_best(&self, value: f64) {
        if !value.is_finite() {
            return;
        }
        let mut cur = self.best.load(Ordering::Relaxed);
        loop {
            let b = f64::from_bits(cur);
            if !b.is_nan() && b <= value {
                return;
            }
            match self.best.compare_exchange_weak(
                cur,
                value.to_bits(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }

    /// The final state of the phase runs that have ended, of those begun after the
    /// `started`-th, oldest first.
    pub fn ended_after(&self, started: u64) -> Vec<Snapshot> {
        self.state_after(started).0
    }

    /// [`Progress::ended_after`] and [`Progress::snapshot`] at the same instant (no run ends
    /// between the two).
    pub fn state_after(&self, started: u64) -> (Vec<Snapshot>, Snapshot) {
        let ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
        let runs = ended
            .iter()
            .filter(|s| s.started > started)
            .copied()
            .collect();
        (runs, self.snapshot())
    }

    /// The counters as of now, all from the same phase.
    pub fn snapshot(&self) -> Snapshot {
        loop {
            let before = self.seq.load(Ordering::Acquire);
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let phase = Phase::from_code(self.phase.load(Ordering::Relaxed));
            let done = self.done.load(Ordering::Relaxed);
            let total = self.total.load(Ordering::Relaxed);
            let best = f64::from_bits(self.best.load(Ordering::Relaxed));
            if self.seq.load(Ordering::Acquire) == before {
                return Snapshot {
                    phase,
                    started: before / 2,
                    done,
                    total,
                    best: (!best.is_nan()).then_some(best),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_counts_up_and_keeps_the_least_best() {
        let p = Progress::default();
        assert_eq!(p.snapshot().phase, Phase::Idle);
        p.begin(Phase::Brkga, 10);
        p.advance(3);
        p.reach(2); // never backwards
        p.offer_best(5.0);
        p.offer_best(7.0);
        p.offer_best(f64::INFINITY);
        p.offer_best(f64::NAN);
        let s = p.snapshot();
        assert_eq!(
            (s.phase, s.started, s.done, s.total),
            (Phase::Brkga, 1, 3, 10)
        );
        assert_eq!(s.best, Some(5.0));
        p.offer_best(4.0);
        p.reach(10);
        assert_eq!(p.snapshot().best, Some(4.0));
        assert_eq!(p.snapshot().done, 10);
        p.begin(Phase::Dp, 0);
        let s = p.snapshot();
        assert_eq!(
            (s.phase, s.started, s.done, s.total, s.best),
            (Phase::Dp, 2, 0, 0, None)
        );
        p.reach(7);
        p.begin(Phase::Dp, 9);
        let ended = p.ended_after(0);
        let got: Vec<_> = ended.iter().map(|e| (e.phase, e.started, e.done)).collect();
        assert_eq!(got, [(Phase::Brkga, 1, 10), (Phase::Dp, 2, 7)]);
        assert_eq!(ended[0].best, Some(4.0));
        assert_eq!(p.ended_after(1).len(), 1);
        assert!(p.ended_after(2).is_empty());
    }

    #[test]
    fn only_the_latest_ended_runs_are_kept() {
        let p = Progress::default();
        for i in 0..(ENDED as u64 + 10) {
            p.begin(Phase::Ideals, 0);
            p.reach(i);
        }
        let ended = p.ended_after(0);
        assert_eq!(ended.len(), ENDED);
        assert_eq!(ended.last().map(|e| e.done), Some(ENDED as u64 + 8));
    }

    #[test]
    fn names_round_trip_through_codes() {
        for ph in Phase::ALL {
            assert_eq!(Phase::from_code(ph as u8), ph);
        }
        assert_eq!(Phase::from_code(200), Phase::Idle);
        assert_eq!(Phase::Piper.name(), "piper dp");
    }

    #[test]
    fn the_best_is_the_minimum_over_threads() {
        let p = Progress::default();
        p.begin(Phase::Random, 4000);
        std::thread::scope(|s| {
            for t in 0..4 {
                let p = &p;
                s.spawn(move || {
                    for i in 0..1000 {
                        p.offer_best(f64::from(1000 * t + i) + 0.5);
                        p.advance(1);
                    }
                });
            }
        });
        let s = p.snapshot();
        assert_eq!((s.done, s.best), (4000, Some(0.5)));
    }
}
