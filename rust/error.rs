//! The core's error type. Every failure a user can cause is one of these, never a panic; the
//! bindings map each variant to an exception class of `stagecut.errors`.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum CoreError {
    /// Malformed input (bad array lengths, out-of-range indices, NaN or negative values...).
    InvalidInput(String),
    /// The graph has a directed cycle; `cycle` lists node indices along one.
    Cycle { cycle: Vec<usize> },
    /// Downset enumeration passed the caller's explicit limit.
    TooManyIdeals { limit: usize },
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreError::InvalidInput(msg) => write!(f, "{msg}"),
            CoreError::Cycle { cycle } => write!(f, "graph has a cycle through nodes {cycle:?}"),
            CoreError::TooManyIdeals { limit } => {
                write!(f, "the graph has more than {limit} ideals (downsets)")
            }
        }
    }
}

impl std::error::Error for CoreError {}

pub type CoreResult<T> = Result<T, CoreError>;

/// `xs` has `n` entries, each finite and non-negative; otherwise an error naming `name[i]`.
pub fn check_values(name: &str, xs: &[f64], n: usize) -> CoreResult<()> {
    if xs.len() != n {
        return Err(CoreError::InvalidInput(format!("{name}: expected {n} values, got {}", xs.len())));
    }
    if let Some(i) = xs.iter().position(|x| !(x.is_finite() && *x >= 0.0)) {
        return Err(CoreError::InvalidInput(format!(
            "{name}[{i}] = {} is not a finite non-negative number",
            xs[i]
        )));
    }
    Ok(())
}
