//! Numeric constants and input checks shared by every solver.

use crate::error::{CoreError, CoreResult};

/// The cost of an infeasible block, stage or split (and the "no answer yet" value).
pub const INF: f64 = f64::INFINITY;

/// Tolerance for "this memory saving is positive" / "the memory now fits" in Piper's knapsack
/// greedy (sums of byte counts in `f64`).
pub const EPS: f64 = 1e-9;

/// `x` is a finite number `>= 0` (false for NaN).
#[inline]
pub fn is_finite_nonneg(x: f64) -> bool {
    x.is_finite() && x >= 0.0
}

/// `xs` has `n` entries, each finite and non-negative; otherwise an error naming `name[i]`.
pub fn check_values(name: &str, xs: &[f64], n: usize) -> CoreResult<()> {
    if xs.len() != n {
        return Err(CoreError::InvalidInput(format!(
            "{name}: expected {n} values, got {}",
            xs.len()
        )));
    }
    if let Some(i) = xs.iter().position(|&x| !is_finite_nonneg(x)) {
        return Err(CoreError::InvalidInput(format!(
            "{name}[{i}] = {} is not a finite non-negative number",
            xs[i]
        )));
    }
    Ok(())
}
