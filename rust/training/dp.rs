//! Piper's DP over upsets (Section 4 of the paper): the tables of all upsets, level by level
//! (by size), each from the candidates of its pairs `(I, J)`, then the optimum of the full set
//! and its plan. The DP polls a [`Cancel`] token (per chunk of upsets and every few hundred
//! pairs of a descent), and its dense scratch is checked against the memory budget first.

use std::sync::Mutex;

use rayon::prelude::*;

use super::model::Model;
use super::reconstruct::reconstruct;
use super::table::{fill_extract, Table};
use super::work::Work;
use super::{bad, PlanOut, Problem};
use crate::cancel::{self, Cancel};
use crate::dag::Dag;
use crate::error::CoreResult;
use crate::ideals::Ideals;
use crate::memory;
use crate::numeric::INF;
use crate::progress::Phase;

/// Budget (bytes) for the dense per-task scratch tables held at once.
const SCRATCH_BUDGET: usize = 768 << 20;

/// Run the DP; returns the plan, the table for the full node set and statistics.
pub fn plan(p: &Problem) -> CoreResult<PlanOut> {
    plan_with(p, &Cancel::never())
}

/// [`plan`], stopping (`Interrupted` / `DeadlineReached`) when `cancel` fires.
pub fn plan_with(p: &Problem, cancel: &Cancel) -> CoreResult<PlanOut> {
    let m = Model::build(p)?;
    // the DP runs over upsets: ideals of the reversed graph
    let rev: Vec<(u32, u32)> = p.edges.iter().map(|&(a, b, _)| (b, a)).collect();
    let dag = Dag::from_edges(p.n, &rev)?;
    let ids = Ideals::enumerate_with(&dag, p.max_ideals, cancel)?;
    let cols = m.smax + 1;
    let cells = p
        .devices
        .checked_add(1)
        .and_then(|k| k.checked_mul(cols))
        .unwrap_or(usize::MAX);
    if cells > 200_000_000 {
        return Err(bad(format!(
            "the DP table has {cells} cells per node set (devices x batch too large)"
        )));
    }
    check_memory(&ids, cells)?;
    let mut run = Run::new(&m, &ids, cells);
    cancel.progress().begin(Phase::Piper, ids.len() as u64);
    cancel.progress().reach(1); // the empty upset's table
    for level in ids.levels().into_iter().skip(1) {
        let mut start = level.start;
        while start < level.end {
            run.check(cancel)?;
            cancel.progress().reach(start as u64);
            let end = chunk_end(&ids, start, level.end, cells);
            run.chunk(start, end, cancel);
            start = end;
        }
    }
    run.check(cancel)?;
    cancel.progress().reach(ids.len() as u64);
    let Run {
        tables,
        mut final_dense,
        pairs,
        ..
    } = run;
    if final_dense.is_empty() {
        final_dense = vec![INF; cells];
    }
    let (objective, k_at, s_at) = optimum(&m, &final_dense);
    let mut stages = Vec::new();
    if objective.is_finite() {
        stages = reconstruct(&m, &ids, &tables, ids.full(), k_at, s_at, objective)?;
    }
    Ok(PlanOut {
        objective,
        stages,
        table: final_dense,
        cols,
        num_ideals: ids.len(),
        pairs_visited: pairs,
    })
}

/// Refuse (`MemoryLimit`) a DP whose dense tables would not fit: the scratch of one chunk
/// (see [`chunk_end`]: at least one dense table per immediate sub of one upset, up to
/// [`SCRATCH_BUDGET`]) and the final table, `cells` values each.
fn check_memory(ids: &Ideals, cells: usize) -> CoreResult<()> {
    let table = cells as f64 * 8.0;
    let widest = (0..ids.len())
        .map(|i| ids.immediate_subs(i).len())
        .max()
        .unwrap_or(1)
        .max(1);
    let all: usize = (0..ids.len()).map(|i| ids.immediate_subs(i).len()).sum();
    let scratch = (widest as f64 * table).max((all as f64 * table).min(SCRATCH_BUDGET as f64));
    let what = format!(
        "the Piper DP ({} upsets, tables of {cells} cells, up to {widest} at once)",
        ids.len()
    );
    memory::check(
        scratch + table,
        &what,
        "use fewer devices or a smaller batch (the tables have (devices + 1) x (min(batch, devices) + 1) cells)",
    )
}

/// The end of the chunk of ideals from `start` whose per-task scratch (one dense table per
/// immediate sub) fits [`SCRATCH_BUDGET`] (at least one ideal).
fn chunk_end(ids: &Ideals, start: usize, level_end: usize, cells: usize) -> usize {
    let mut end = start;
    let mut ntasks = 0usize;
    while end < level_end {
        let b = ids.immediate_subs(end).len();
        if ntasks > 0 && (ntasks + b) * cells * 8 > SCRATCH_BUDGET {
            break;
        }
        ntasks += b;
        end += 1;
    }
    end
}

/// The optimum of the full set and the Pareto-minimal `(k, s)` reaching it.
fn optimum(m: &Model<'_>, final_dense: &[f64]) -> (f64, usize, usize) {
    let p = m.p;
    let (kmax, cols) = (p.devices, m.smax + 1);
    if p.exact_batch {
        if p.batch <= m.smax {
            let s = p.batch;
            let v = final_dense[kmax * cols + s];
            let k = (0..=kmax)
                .find(|&k| final_dense[k * cols + s] == v)
                .unwrap_or(kmax);
            (v, k, s)
        } else {
            (INF, kmax, m.smax)
        }
    } else {
        let v = final_dense[kmax * cols + m.smax];
        let k = (0..=kmax)
            .find(|&k| final_dense[k * cols + m.smax] == v)
            .unwrap_or(kmax);
        let s = (0..cols)
            .find(|&s| final_dense[k * cols + s] == v)
            .unwrap_or(m.smax);
        (v, k, s)
    }
}

/// The DP in progress: the tables of the upsets done so far (by id), and scratch.
struct Run<'r, 'a> {
    m: &'r Model<'a>,
    ids: &'r Ideals,
    /// Cells of one dense table: `(devices + 1) * (smax + 1)`.
    cells: usize,
    tables: Vec<Table>,
    /// Fewest devices any plan of each upset needs (its first corner), in a compact array.
    kmin: Vec<u32>,
    /// The dense table of the full set, once computed.
    final_dense: Vec<f64>,
    pairs: u64,
    /// Dense buffers are reused: fresh allocations of this size cost page faults.
    pool: Mutex<Vec<Vec<f64>>>,
}

impl<'r, 'a> Run<'r, 'a> {
    fn new(m: &'r Model<'a>, ids: &'r Ideals, cells: usize) -> Self {
        Run {
            m,
            ids,
            cells,
            tables: vec![Table::empty_set()],
            kmin: vec![0],
            final_dense: Vec::new(),
            pairs: 0,
            pool: Mutex::new(Vec::new()),
        }
    }

    /// `Err` once `cancel` fires; the tables (one allocation per upset) are then freed in the
    /// background, so the stop is not delayed by them.
    fn check(&mut self, cancel: &Cancel) -> CoreResult<()> {
        cancel.check().map_err(|stop| {
            cancel::drop_in_background(std::mem::take(&mut self.tables));
            stop.into()
        })
    }

    /// A dense table of `INF`s, from the pool if possible.
    fn fresh_dense(&self) -> Vec<f64> {
        let reused = self.pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match reused {
            Some(mut d) => {
                d.fill(INF);
                d
            }
            None => vec![INF; self.cells],
        }
    }

    fn recycle(&self, dense: Vec<f64>) {
        self.pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(dense);
    }

    /// The tables of ideals `start..end` (all of one level, whose subs are all done); when
    /// `cancel` fires the tables are incomplete (the caller checks it before using them).
    fn chunk(&mut self, start: usize, end: usize, cancel: &Cancel) {
        let results = self.candidates(start, end, cancel);
        // reduce per ideal (min is exact, so grouping does not matter)
        let mut per: Vec<Vec<f64>> = Vec::with_capacity(end - start);
        for _ in start..end {
            per.push(Vec::new());
        }
        for (i, dense, pc) in results {
            self.pairs += pc;
            let slot = &mut per[i - start];
            if slot.is_empty() {
                *slot = dense;
            } else {
                slot.iter_mut()
                    .zip(dense.iter())
                    .for_each(|(a, &b)| *a = a.min(b));
                self.recycle(dense);
            }
        }
        let (kmax, cols, exact) = (self.m.p.devices, self.m.smax + 1, self.m.p.exact_batch);
        let cells = self.cells;
        let built: Vec<(Table, Vec<f64>)> = per
            .into_par_iter()
            .map(|mut dense| {
                if dense.is_empty() {
                    dense = vec![INF; cells];
                }
                let t = fill_extract(&mut dense, kmax, cols, exact);
                (t, dense)
            })
            .collect();
        let full = self.ids.full();
        for (off, (t, dense)) in built.into_iter().enumerate() {
            self.kmin.push(t.corners.first().map_or(u32::MAX, |c| c.0));
            self.tables.push(t);
            if start + off == full {
                self.final_dense = dense;
            } else {
                self.recycle(dense);
            }
        }
    }

    /// One task per (ideal, immediate sub): the dense candidates of the pairs below that
    /// branch of the descent, with the number of pairs visited.
    fn candidates(&self, start: usize, end: usize, cancel: &Cancel) -> Vec<(usize, Vec<f64>, u64)> {
        let (m, ids) = (self.m, self.ids);
        let kmax = m.p.devices;
        let tasks: Vec<(usize, usize)> = (start..end)
            .flat_map(|i| (0..ids.immediate_subs(i).len()).map(move |b| (i, b)))
            .collect();
        tasks
            .par_iter()
            .map_init(
                || Work::new(m),
                |w, &(i, b)| {
                    let mut dense = self.fresh_dense();
                    w.pairs = 0;
                    let mut tick = cancel.ticker(64);
                    w.descend(m, ids, i, Some(b), &mut |w, j, dep| {
                        // J needs all K devices already: no room for another stage
                        if (self.kmin[j] as usize) < kmax {
                            combine(m, w, dep, &self.tables[j], &mut dense);
                        }
                        tick.tick().is_err()
                    });
                    (i, dense, w.pairs)
                },
            )
            .collect()
    }
}

/// Add the candidates of pair (I, J) (J's table `tj`, stage state at `dep`) into `dense`.
fn combine(m: &Model<'_>, w: &mut Work, dep: usize, tj: &Table, dense: &mut [f64]) {
    let kmax = m.p.devices;
    let cols = m.smax + 1;
    for ti in 0..m.nt() {
        if !w.usable(m, dep, ti) {
            continue;
        }
        let t = m.ts[ti] as usize;
        for di in 0..m.divs.len() {
            let d = m.divs[di];
            let td = t * d;
            if td > kmax {
                break;
            }
            // Once a corner (k0, f) gives the stage's own cost T(y) (v <= T), a later corner at
            // (k0' >= k0, f' >= f) gives T(y') >= T(y) at a cell above: skip those.
            let mut sat_f = u32::MAX;
            for &(k0, f, v) in &tj.corners {
                let k = k0 as usize + td;
                if k > kmax {
                    break;
                }
                let s = f as usize + d;
                if s > m.smax || (f >= sat_f && !m.p.exact_batch) {
                    continue;
                }
                let cell = &mut dense[k * cols + s];
                if v >= *cell {
                    continue;
                }
                let tv = w.stage_tps(m, dep, ti, di, s.div_ceil(d));
                if v <= tv {
                    sat_f = sat_f.min(f);
                }
                let c = v.max(tv);
                if c < *cell {
                    *cell = c;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::CoreError;
    use crate::training::{Knapsack, Problem, Tmpc};

    fn chain(n: usize, times: &[f64], k: usize, mem: f64) -> Problem {
        let edges: Vec<(u32, u32, f64)> =
            (0..n - 1).map(|i| (i as u32, i as u32 + 1, 1e6)).collect();
        let mut tmpcs = Vec::new();
        for (v, &time) in times.iter().enumerate().take(n) {
            let indeg = usize::from(v > 0);
            let outdeg = usize::from(v + 1 < n);
            tmpcs.push(Tmpc {
                node: v,
                t: 1,
                time,
                param: 1e6,
                a: 1.0,
                b: 1.0,
                sfw: vec![0.0; indeg],
                sbw: vec![0.0; outdeg],
            });
            tmpcs.push(Tmpc {
                node: v,
                t: 1,
                time: times[v] * 1.5,
                param: 1e6,
                a: 0.2,
                b: 1.0,
                sfw: vec![0.0; indeg],
                sbw: vec![0.0; outdeg],
            });
        }
        Problem {
            n,
            edges,
            tmpcs,
            devices: k,
            memory: mem,
            bandwidth: 1e9,
            batch: 4,
            exact_batch: false,
            allow_dp: true,
            knapsack: Knapsack::Heuristic,
            max_ideals: 1 << 20,
            server: None,
        }
    }

    #[test]
    fn single_device_is_sum_and_more_devices_help() {
        let p = chain(4, &[1.0, 2.0, 3.0, 4.0], 1, 1e9);
        let r = plan(&p).unwrap();
        let comm = 0.0; // one stage, no boundary edges; d = 1: no all-reduce
        assert!(
            (r.objective - (10.0 + comm)).abs() < 1e-9,
            "{}",
            r.objective
        );
        assert_eq!(r.stages.len(), 1);
        let p4 = chain(4, &[1.0, 2.0, 3.0, 4.0], 4, 1e9);
        let r4 = plan(&p4).unwrap();
        assert!(r4.objective < r.objective);
        // table is monotone in k and s
        for k in 1..=4 {
            for s in 1..r4.cols {
                assert!(r4.table[k * r4.cols + s] <= r4.table[(k - 1) * r4.cols + s]);
                assert!(r4.table[k * r4.cols + s] <= r4.table[k * r4.cols + s - 1]);
            }
        }
        let used: usize = r4.stages.iter().map(|s| (s.t * s.d) as usize).sum();
        assert!(used <= 4);
    }

    #[test]
    fn fast_and_generic_paths_agree() {
        for mem in [2.5, 3.0, 4.0, 6.0, 100.0] {
            for k in 1..=4 {
                let mut p = chain(5, &[1.0, 3.0, 2.0, 5.0, 1.5], k, mem);
                let a = plan(&p).unwrap();
                p.knapsack = Knapsack::GenericHeuristic;
                let b = plan(&p).unwrap();
                assert_eq!(a.objective.is_finite(), b.objective.is_finite());
                if a.objective.is_finite() {
                    assert!(
                        (a.objective - b.objective).abs() <= 1e-9 * a.objective,
                        "{mem} {k}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_stopped_plan_reports_why() {
        let p = chain(6, &[1.0, 3.0, 2.0, 5.0, 1.5, 2.0], 4, 100.0);
        let c = Cancel::never();
        c.interrupt();
        assert_eq!(plan_with(&p, &c).unwrap_err(), CoreError::Interrupted);
        let d = Cancel::with_limit(Some(std::time::Duration::ZERO));
        assert_eq!(plan_with(&p, &d).unwrap_err(), CoreError::DeadlineReached);
        // a limit that is not reached changes nothing
        let far = Cancel::with_limit(Some(std::time::Duration::from_secs(3600)));
        assert_eq!(
            plan_with(&p, &far).unwrap().objective,
            plan(&p).unwrap().objective
        );
    }

    #[test]
    fn tables_past_the_memory_budget_are_refused() {
        // (14000 + 1)^2 cells: about 1.5 GiB per dense table, two at least
        let mut p = chain(3, &[1.0, 2.0, 3.0], 14_000, 1e12);
        p.batch = 14_000;
        let err = plan(&p).unwrap_err();
        assert!(matches!(err, CoreError::MemoryLimit(_)), "{err:?}");
        assert!(err.to_string().contains("fewer devices"), "{err}");
    }

    #[test]
    fn bad_inputs_are_errors() {
        let mut p = chain(3, &[1.0, 1.0, 1.0], 2, 10.0);
        p.tmpcs[0].a = -1.0;
        assert!(matches!(plan(&p), Err(CoreError::InvalidInput(_))));
        let mut p = chain(3, &[1.0, 1.0, 1.0], 2, 10.0);
        p.edges.push((2, 0, 0.0));
        for x in p.tmpcs.iter_mut() {
            if x.node == 2 {
                x.sbw.push(0.0);
            }
            if x.node == 0 {
                x.sfw.push(0.0);
            }
        }
        assert!(matches!(plan(&p), Err(CoreError::Cycle { .. })));
        // 3 nodes have at least 4 upsets
        let mut p = chain(3, &[1.0, 1.0, 1.0], 2, 10.0);
        p.max_ideals = 3;
        assert_eq!(plan(&p).unwrap_err(), CoreError::TooManyIdeals { limit: 3 });
        p.max_ideals = 4;
        assert!(plan(&p).is_ok());
        p.knapsack = Knapsack::Exact { max_nodes: 2 };
        assert!(plan(&p).is_ok());
    }
}
