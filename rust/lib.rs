//! stagecut core: the heavy combinatorics behind the `stagecut` Python package.
//!
//! The layout mirrors the Python package; each paper's algorithm lives in one place:
//!
//! * [`throughput`]: the max-load cost model of the pipeline DP of Tarnawski et al. (NeurIPS
//!   2020); the DP itself is the generic [`ideal_dp`];
//! * [`mtpp`]: MTPP and SliceGraph of Archer et al. (arXiv:2311.03703): the SliceGraph DP, its
//!   Fenwick segment costs, Kahn orders, the BRKGA / random-T / MLA searches, and the exact
//!   optimum through [`ideal_dp`];
//! * [`training`]: the Piper training planner of Tarnawski et al. (NeurIPS 2021).
//!
//! Shared pieces: [`dag`] (CSR graphs, the one CSR builder), [`ideals`] (downset enumeration),
//! [`ideal_dp`] (the DP over ideals with an abstract block cost), [`error`] (the error type)
//! and [`numeric`] (`INF`, `EPS`, input checks).
//!
//! Reliability: long loops poll a [`cancel::Cancel`] token (Ctrl-C from Python, time limits);
//! allocations that scale with the input are checked against the [`memory`] budget first; the
//! parallel work runs on the crate's own thread pool ([`pool`]), rebuilt in a forked child.
//!
//! The algorithm modules are plain Rust (testable with `cargo test`); the PyO3 glue lives in
//! `bindings/` (one file per objective, plus the error mapping) and is compiled only with the
//! `python` feature (maturin turns it on).

pub mod cancel;
pub mod dag;
pub mod error;
pub mod ideal_bounds;
pub mod ideal_dp;
pub mod ideals;
pub mod latency;
pub mod memory;
pub mod mtpp;
pub mod numeric;
pub mod pool;
pub mod progress;
pub mod throughput;
pub mod training;

#[cfg(feature = "python")]
mod bindings;

pub use cancel::{Cancel, Stop};
pub use error::CoreError;
