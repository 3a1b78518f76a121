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

/// A running sum with its rounding error kept aside (Neumaier's compensated summation, with
/// Knuth's TwoSum), for block costs kept incrementally: adding then removing a large term
/// (`1e16 + 1 - 1e16`) gives back the small one exactly, where a plain `f64` sum loses it.
/// The value is accurate to about `2^-100` of the largest partial sum. Once the sum overflows
/// to `inf` it stays `inf` (no NaN from the compensation).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CompensatedSum {
    hi: f64,
    lo: f64,
}

impl CompensatedSum {
    /// Add `x` (a finite number, or `+-inf`).
    #[inline]
    pub fn add(&mut self, x: f64) {
        let s = self.hi + x;
        if s.is_finite() {
            let bp = s - self.hi;
            self.lo += (self.hi - (s - bp)) + (x - bp);
        } else {
            self.lo = 0.0;
        }
        self.hi = s;
    }

    /// The sum, rounded once.
    #[inline]
    pub fn value(&self) -> f64 {
        self.hi + self.lo
    }

    /// Add `x` without compensation (a plain `f64` sum), for callers that know their terms
    /// cannot cancel much (see [`spans_widely`]).
    #[inline]
    pub fn add_plain(&mut self, x: f64) {
        self.hi += x;
    }

    /// The running sum and its pending rounding error (`value() == hi + lo`).
    #[inline]
    pub fn parts(&self) -> (f64, f64) {
        (self.hi, self.lo)
    }
}

/// Do the positive values of `xs` span more than a factor `2^20` (about 1e6)? Sums that add and
/// remove such values need compensation ([`CompensatedSum::add`]) to keep the small ones; below
/// that, a plain sum's round-off stays under `2^-30` of the smallest term for any realistic
/// number of steps.
pub fn spans_widely(xs: impl IntoIterator<Item = f64>) -> bool {
    let (mut lo, mut hi) = (INF, 0.0f64);
    for x in xs {
        if x > 0.0 {
            lo = lo.min(x);
            hi = hi.max(x);
        }
    }
    hi > lo * (1u64 << 20) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compensated_sum_keeps_small_terms_next_to_large_ones() {
        let mut s = CompensatedSum::default();
        for x in [1.0, 1e16, -1e16] {
            s.add(x);
        }
        assert_eq!(s.value(), 1.0);
        let mut plain = 0.0;
        for x in [1.0, 1e16, -1e16] {
            plain += x;
        }
        assert_eq!(plain, 0.0); // what the plain sum gives
        let mut t = CompensatedSum::default();
        for x in [1e300, 1e300, 1e308, 1e308] {
            t.add(x);
        }
        assert_eq!(t.value(), INF);
        t.add(-1e308);
        assert_eq!(t.value(), INF);
        assert!(spans_widely([0.0, 1.0, 1e16]) && !spans_widely([0.0, 1.0, 1e5]));
    }
}
