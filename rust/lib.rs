//! stagecut core: the heavy combinatorics behind the `stagecut` Python package.
//!
//! The algorithm modules are plain Rust (testable with `cargo test`); the PyO3 glue lives in
//! `bindings/` and is compiled only with the `python` feature (maturin turns it on).

pub mod dag;
pub mod error;
pub mod ideals;
pub mod pipeline;
pub mod piper;
pub mod slicegraph;

#[cfg(feature = "python")]
mod bindings;

pub use error::CoreError;
