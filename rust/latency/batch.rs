//! [`makespans`]: many placements evaluated in parallel, one [`Workspace`] per worker.

use rayon::prelude::*;

use super::{Order, Problem, Workspace};
use crate::cancel::Cancel;
use crate::error::{CoreError, CoreResult};

/// Makespans of `m` placements (`devs`: `m` rows of `n` device positions, row-major), each in
/// its rank round-robin order, or in the order of its row of `seqs` (a sequence per row, see
/// [`Order::Sequence`]). Rows run in parallel on the current rayon pool, one [`Workspace`] per
/// worker; `cancel` is polled before every row.
///
/// Errors: arrays of the wrong length (`InvalidArgument`); the first bad row, as its error
/// prefixed with `row <r>: `; a stop of `cancel`.
pub fn makespans(
    p: &Problem,
    m: usize,
    devs: &[i64],
    seqs: Option<&[i64]>,
    cancel: &Cancel,
) -> CoreResult<Vec<f64>> {
    let n = p.len();
    let want = m.checked_mul(n);
    if want != Some(devs.len()) || seqs.is_some_and(|s| Some(s.len()) != want) {
        return Err(CoreError::InvalidArgument(format!(
            "placements: expected {m} rows of {n} device positions (and orders)"
        )));
    }
    let row = |ws: &mut Workspace, r: usize| -> CoreResult<f64> {
        cancel.check()?;
        let dev = &devs[r * n..(r + 1) * n];
        let order = match seqs {
            Some(s) => Order::Sequence(&s[r * n..(r + 1) * n]),
            None => Order::RankRoundRobin,
        };
        ws.evaluate(p, dev, order).map_err(|e| match e {
            CoreError::InvalidArgument(msg) => {
                CoreError::InvalidArgument(format!("row {r}: {msg}"))
            }
            other => other,
        })
    };
    let out: Vec<CoreResult<f64>> = (0..m)
        .into_par_iter()
        .map_init(|| Workspace::new(p), row)
        .collect();
    if let Some(stop) = cancel.stopped() {
        return Err(stop.into());
    }
    out.into_iter().collect()
}
