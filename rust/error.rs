//! The core's error type. Every failure a user can cause is one of these, never a panic; the
//! bindings map each variant to an exception class of `stagecut.errors` (see
//! `bindings/errors.rs`).

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum CoreError {
    /// Malformed input data: bad array lengths, out-of-range indices, NaN or negative values,
    /// an impossible problem (`InvalidGraphError`).
    InvalidInput(String),
    /// A bad function argument rather than bad data: an unknown method or mode string,
    /// BRKGA parameters out of range, a NaN bound (`InvalidArgumentError`).
    InvalidArgument(String),
    /// The graph has a directed cycle; `cycle` lists node indices along one (`CycleError`).
    Cycle { cycle: Vec<usize> },
    /// Downset enumeration passed the caller's explicit limit (`TooManyIdealsError`).
    TooManyIdeals { limit: usize },
    /// A broken internal invariant: a bug in stagecut, not the caller's fault (`SolverError`).
    Internal(String),
    /// The request would allocate more than the memory budget (see [`crate::memory`]); the
    /// message says how much, and what to change (`MemoryLimitError`).
    MemoryLimit(String),
    /// Stopped by the caller (Ctrl-C in Python: `KeyboardInterrupt`).
    Interrupted,
    /// The time limit passed before there was an answer to return (the Python wrappers turn it
    /// into a result with status `"time_limit"`).
    DeadlineReached,
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreError::InvalidInput(msg)
            | CoreError::InvalidArgument(msg)
            | CoreError::MemoryLimit(msg) => write!(f, "{msg}"),
            CoreError::Interrupted => write!(f, "interrupted"),
            CoreError::DeadlineReached => write!(f, "the time limit was reached"),
            CoreError::Cycle { cycle } => write!(f, "graph has a cycle through nodes {cycle:?}"),
            CoreError::TooManyIdeals { limit } => {
                write!(f, "the graph has more than {limit} ideals (downsets)")
            }
            CoreError::Internal(msg) => {
                write!(
                    f,
                    "internal error: {msg}; please report this with the input"
                )
            }
        }
    }
}

impl std::error::Error for CoreError {}

pub type CoreResult<T> = Result<T, CoreError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_errors_ask_for_a_report() {
        let e = CoreError::Internal("plan reconstruction failed".into());
        assert_eq!(
            e.to_string(),
            "internal error: plan reconstruction failed; please report this with the input"
        );
    }
}
