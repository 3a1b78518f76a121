//! Piper's sparse DP tables: `dp[I][k][s]` for one upset `I`, stored by its corners, and the
//! step that turns a dense table of candidates into one.

use crate::numeric::INF;

/// `dp[I][·][·]` stored by its corners: the cells `(k, s, v)` whose value is below both the
/// cell with one device less and (at-most mode) the cell with one less in s. Every cell's value
/// is the least corner value at or below it (same `s` in exact-batch mode), and with stage costs
/// nondecreasing in `s`, candidates built from corners alone give the same DP (any other cell's
/// candidate is matched by a corner's at a cell below it). Sorted by (k, s).
#[derive(Debug, Clone, Default)]
pub(super) struct Table {
    /// `(k, s, value)`.
    pub(super) corners: Vec<(u32, u32, f64)>,
}

impl Table {
    /// The table of the empty set: value 0 with no device.
    pub(super) fn empty_set() -> Table {
        Table {
            corners: vec![(0, 0, 0.0)],
        }
    }

    /// The value of cell `(k, s)`: the least corner at or below it (same `s` when `exact`).
    pub(super) fn get(&self, k: usize, s: usize, exact: bool) -> f64 {
        let mut best = INF;
        for &(ck, cs, v) in &self.corners {
            if ck as usize > k {
                break;
            }
            if (exact && cs as usize == s) || (!exact && cs as usize <= s) {
                best = best.min(v);
            }
        }
        best
    }
}

/// Turn the candidates into the DP table in place, one row at a time: 2D prefix minimum
/// (at-most mode) or prefix minimum over k (exact mode), and collect the corners.
pub(super) fn fill_extract(dense: &mut [f64], kmax: usize, cols: usize, exact: bool) -> Table {
    let mut corners = Vec::new();
    for k in 0..=kmax {
        let (lo, hi) = dense.split_at_mut(k * cols);
        let row = &mut hi[..cols];
        if !exact {
            for s in 1..cols {
                if row[s - 1] < row[s] {
                    row[s] = row[s - 1];
                }
            }
        }
        if k > 0 {
            let prev = &lo[(k - 1) * cols..];
            for s in 0..cols {
                let v = row[s];
                if v < prev[s] {
                    if v.is_finite() && (exact || s == 0 || v < row[s - 1]) {
                        corners.push((k as u32, s as u32, v));
                    }
                } else {
                    row[s] = prev[s];
                }
            }
        } else {
            for s in 0..cols {
                let v = row[s];
                if v.is_finite() && (exact || s == 0 || v < row[s - 1]) {
                    corners.push((0, s as u32, v));
                }
            }
        }
    }
    Table { corners }
}
