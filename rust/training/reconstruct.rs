//! The plan behind Piper's optimum: walk back from the full set, at each upset finding a
//! stage `I \ J` and degrees `(t, d)` whose candidate gives the table value.

use super::model::Model;
use super::table::Table;
use super::work::Work;
use super::StageOut;
use crate::error::{CoreError, CoreResult};
use crate::ideals::Ideals;

/// The stages (first stage first) of a plan of value `v0` on `k0` devices with `s0` the sum of
/// data-parallel degrees. Failing to find one is a bug ([`CoreError::Internal`]).
pub(super) fn reconstruct(
    m: &Model<'_>,
    ids: &Ideals,
    tables: &[Table],
    full: usize,
    k0: usize,
    s0: usize,
    v0: f64,
) -> CoreResult<Vec<StageOut>> {
    let exact = m.p.exact_batch;
    let mut w = Work::new(m);
    let (mut i, mut k, mut s, mut v) = (full, k0, s0, v0);
    let mut out = Vec::new();
    while i != 0 {
        // move to the Pareto-minimal point holding v, where a candidate was placed directly
        let tab = &tables[i];
        if !exact {
            while s > 0 && tab.get(k, s - 1, false) == v {
                s -= 1;
            }
        }
        while k > 0 && tab.get(k - 1, s, exact) == v {
            k -= 1;
        }
        let Some((j, st)) = last_stage(m, ids, tables, &mut w, i, k, s, v)? else {
            return Err(CoreError::Internal(
                "Piper plan reconstruction failed".into(),
            ));
        };
        k -= st.t as usize * st.d as usize;
        s -= st.d as usize;
        v = tables[j].get(k, s, exact);
        i = j;
        out.push(st);
    }
    Ok(out)
}

/// A sub-upset `J` of `i` and the stage `i \ J` whose candidate gives value `v` at cell
/// `(k, s)`, if any.
#[allow(clippy::too_many_arguments)]
fn last_stage(
    m: &Model<'_>,
    ids: &Ideals,
    tables: &[Table],
    w: &mut Work,
    i: usize,
    k: usize,
    s: usize,
    v: f64,
) -> CoreResult<Option<(usize, StageOut)>> {
    let exact = m.p.exact_batch;
    let mut found: Option<(usize, StageOut)> = None;
    let mut no_witness = false;
    w.descend(m, ids, i, None, &mut |w, j, dep| {
        for ti in 0..m.nt() {
            if !w.usable(m, dep, ti) {
                continue;
            }
            let t = m.ts[ti] as usize;
            for di in 0..m.divs.len() {
                let d = m.divs[di];
                if t * d > k || d > s {
                    continue;
                }
                let prev = tables[j].get(k - t * d, s - d, exact);
                if !prev.is_finite() {
                    continue;
                }
                let y = s.div_ceil(d);
                let tv = w.stage_tps(m, dep, ti, di, y);
                if prev.max(tv) == v {
                    let Some((nodes, tmpcs)) = w.witness(m, dep, ti, di, y) else {
                        no_witness = true;
                        return true;
                    };
                    let stage = StageOut {
                        nodes,
                        t: t as u32,
                        d: d as u32,
                        tmpcs,
                        tps: tv,
                    };
                    found = Some((j, stage));
                    return true;
                }
            }
        }
        false
    });
    if no_witness {
        return Err(CoreError::Internal(
            "no TMPC choice behind a feasible Piper stage".into(),
        ));
    }
    Ok(found)
}
