//! The canonical descent below one upset `I`, with the incremental state of the stage
//! `I \ J`: per depth of the descent, the stage's node set and its [`StageSums`] per
//! tensor-parallel degree, recomputed from the parent depth (so every value is a function of
//! the stage alone, whatever the traversal or thread split). On top of it, the stage's TPS for
//! a `(t, d, y)` ([`Work::stage_tps`], memoized per visited pair) and the TMPC choice behind it
//! ([`Work::witness`]).

use super::knapsack::{knapsack_exact, knapsack_greedy, Items};
use super::model::Model;
use super::Knapsack;
use crate::ideals::Ideals;
use crate::numeric::{EPS, INF};

/// Sums over the nodes of the current stage for one tensor-parallel degree, each node taking
/// its fastest TMPC (the [`super::model::NodeT`] fields). The boundary sums are kept on the fast
/// path only (the generic path recomputes them per TMPC).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct StageSums {
    /// Compute time per sample.
    pub(super) time_f: f64,
    /// Communication bytes of the edges crossing the stage boundary, `2 c(u, v)` each.
    pub(super) e_c: f64,
    /// Parameter bytes.
    pub(super) w: f64,
    /// Memory per sample in flight (`a`) of the fastest TMPCs.
    pub(super) a_f: f64,
    /// Fixed memory (`b`) of the fastest TMPCs.
    pub(super) b_f: f64,
    /// Sum of each node's `min_l a_l + b_l`: a lower bound on the stage's memory; the degree is
    /// unusable (for this stage and every larger one) once it passes the device memory.
    pub(super) low1: f64,
    /// Tensor-parallel sync bytes of the crossing edges, `2 sync` each, on the stage side.
    pub(super) e_s: f64,
}

/// A pending step of the descent: go to sub-ideal `j` by adding node `u` to the stage at depth
/// `dep`; later removals must have rank below `r`.
#[derive(Debug, Clone, Copy)]
struct Step {
    j: u32,
    r: u32,
    dep: u32,
    u: u32,
}

/// Per-thread scratch of the descent (one per rayon task chain).
pub(super) struct Work {
    /// Stage node set per depth (`words` words each).
    bits: Vec<u64>,
    /// Stage sums per (depth, ti).
    st: Vec<StageSums>,
    /// Per (depth, ti): how many stage nodes have no TMPC for `ts[ti]`.
    lack: Vec<u32>,
    /// Generation of the current pair, for the memo tables below.
    gen: u32,
    /// Per (ti, y): `(gen, fast-path time)` of the knapsack choice.
    memo_sel: Vec<(u32, f64)>,
    /// Per (ti, di, y): `(gen, stage TPS)`.
    memo_t: Vec<(u32, f64)>,
    stack: Vec<Step>,
    /// Pairs `(I, J)` visited (statistics).
    pub(super) pairs: u64,
}

impl Work {
    pub(super) fn new(m: &Model<'_>) -> Work {
        let nt = m.nt();
        let depth = m.n + 1;
        Work {
            bits: vec![0; depth * m.words],
            st: vec![StageSums::default(); depth * nt],
            lack: vec![0; depth * nt],
            gen: 0,
            memo_sel: vec![(0, 0.0); nt * (m.smax + 1)],
            memo_t: vec![(0, 0.0); nt * m.divs.len() * (m.smax + 1)],
            stack: Vec::new(),
            pairs: 0,
        }
    }

    fn in_s(&self, m: &Model<'_>, dep: usize, v: usize) -> bool {
        self.bits[dep * m.words + v / 64] >> (v % 64) & 1 == 1
    }

    fn sums(&self, m: &Model<'_>, dep: usize, ti: usize) -> &StageSums {
        &self.st[dep * m.nt() + ti]
    }

    /// `state[dep] = state[dep - 1] + u` (`u` not in the stage at `dep - 1`).
    fn push_node(&mut self, m: &Model<'_>, dep: usize, u: usize) {
        let w = m.words;
        let (lo, hi) = self.bits.split_at_mut(dep * w);
        hi[..w].copy_from_slice(&lo[(dep - 1) * w..]);
        hi[u / 64] |= 1 << (u % 64);
        let nt = m.nt();
        for ti in 0..nt {
            let nd = m.nodet(u, ti);
            let prev = (dep - 1) * nt + ti;
            let cur = dep * nt + ti;
            self.lack[cur] = self.lack[prev] + (!nd.has) as u32;
            let mut s = self.st[prev];
            if nd.has {
                s.time_f += nd.time_f;
                s.w += nd.w_f;
                s.a_f += nd.a_f;
                s.b_f += nd.b_f;
                s.low1 += nd.low1;
                if m.fast_ok[ti] {
                    (s.e_c, s.e_s) = self.boundary_after(m, dep, ti, u, s.e_c, s.e_s);
                }
            }
            self.st[cur] = s;
        }
    }

    /// The boundary sums `(e_c, e_s)` of the stage at `dep - 1` after adding `u`: each edge of
    /// `u` to a stage node stops crossing, each other edge starts (fast path).
    fn boundary_after(
        &self,
        m: &Model<'_>,
        dep: usize,
        ti: usize,
        u: usize,
        e_c: f64,
        e_s: f64,
    ) -> (f64, f64) {
        let ne = m.p.edges.len();
        let (mut ec, mut es) = (e_c, e_s);
        for &(ei, src) in &m.inc[u] {
            let c = m.p.edges[ei].2;
            if self.in_s(m, dep - 1, src) {
                ec -= 2.0 * c;
                es -= 2.0 * m.e_sbw[ti * ne + ei];
            } else {
                ec += 2.0 * c;
                es += 2.0 * m.e_sfw[ti * ne + ei];
            }
        }
        for &(ei, dst) in &m.out[u] {
            let c = m.p.edges[ei].2;
            if self.in_s(m, dep - 1, dst) {
                ec -= 2.0 * c;
                es -= 2.0 * m.e_sfw[ti * ne + ei];
            } else {
                ec += 2.0 * c;
                es += 2.0 * m.e_sbw[ti * ne + ei];
            }
        }
        (ec, es)
    }

    /// Can the stage at `dep` run with degree `ts[ti]` (every node has a TMPC for it, and the
    /// lowest-memory choice fits)?
    pub(super) fn usable(&self, m: &Model<'_>, dep: usize, ti: usize) -> bool {
        let i = dep * m.nt() + ti;
        self.lack[i] == 0 && self.st[i].low1 <= m.p.memory
    }

    fn members(&self, m: &Model<'_>, dep: usize) -> Vec<usize> {
        (0..m.n).filter(|&v| self.in_s(m, dep, v)).collect()
    }

    /// Fast path: total time of the greedy's choice at (ti, y), or INF; and the swapped nodes.
    fn fast_select(
        &self,
        m: &Model<'_>,
        dep: usize,
        ti: usize,
        y: usize,
        witness: Option<&mut Vec<usize>>,
    ) -> f64 {
        let st = self.sums(m, dep, ti);
        let yf = y as f64;
        let mem_fast = st.a_f * yf + st.b_f;
        let cap = m.p.memory;
        if mem_fast <= cap {
            return st.time_f;
        }
        let mut shave = mem_fast - cap;
        let mut dt = 0.0;
        let mut wit = witness;
        for &v in m.order(ti, y) {
            let v = v as usize;
            if !self.in_s(m, dep, v) {
                continue;
            }
            let nd = m.nodet(v, ti);
            // the swap order lists only nodes with another TMPC
            let Some(other) = nd.other else { continue };
            let o = &m.p.tmpcs[other];
            shave -= (nd.a_f * yf + nd.b_f) - (o.a * yf + o.b);
            dt += o.time - nd.time_f;
            if let Some(w) = wit.as_mut() {
                w.push(v);
            }
            if shave < EPS {
                return st.time_f + dt;
            }
        }
        INF
    }

    /// Generic path: knapsack items of the stage for (ti, d, y), nodes ascending.
    fn items(
        &self,
        m: &Model<'_>,
        dep: usize,
        ti: usize,
        d: usize,
        y: usize,
    ) -> (Vec<usize>, Items) {
        let p = m.p;
        let nodes = self.members(m, dep);
        let yf = y as f64;
        let mut items = Vec::with_capacity(nodes.len());
        for &v in &nodes {
            let mut it = Vec::new();
            for &l in m.opts(v, ti) {
                let x = &p.tmpcs[l];
                let (mut ec, mut es) = (0.0, 0.0);
                for (j, &(ei, src)) in m.inc[v].iter().enumerate() {
                    if !self.in_s(m, dep, src) {
                        ec += 2.0 * p.edges[ei].2;
                        es += 2.0 * x.sfw[j];
                    }
                }
                for (j, &(ei, dst)) in m.out[v].iter().enumerate() {
                    if !self.in_s(m, dep, dst) {
                        ec += 2.0 * p.edges[ei].2;
                        es += 2.0 * x.sbw[j];
                    }
                }
                let val = m.stage_value(ti, d, x.time, ec, es, x.param);
                it.push((val, x.a * yf + x.b, l));
            }
            items.push(it);
        }
        (nodes, items)
    }

    /// Generic path: `(stage TPS, nodes ascending, TMPC ids)`, or `None` if nothing fits.
    fn generic_solve(
        &self,
        m: &Model<'_>,
        dep: usize,
        ti: usize,
        d: usize,
        y: usize,
    ) -> Option<(f64, Vec<usize>, Vec<usize>)> {
        let (nodes, items) = self.items(m, dep, ti, d, y);
        let res = match m.p.knapsack {
            Knapsack::Exact { max_nodes } if nodes.len() <= max_nodes => {
                knapsack_exact(&items, m.p.memory)
            }
            _ => knapsack_greedy(&items, m.p.memory),
        };
        res.map(|(v, pick)| (v, nodes, pick))
    }

    fn fast_tps(&self, m: &Model<'_>, dep: usize, ti: usize, d: usize, sel: f64) -> f64 {
        let st = self.sums(m, dep, ti);
        m.stage_value(ti, d, sel, st.e_c, st.e_s, st.w)
    }

    /// Stage TPS for (ti, di, y), memoized per visited pair.
    pub(super) fn stage_tps(
        &mut self,
        m: &Model<'_>,
        dep: usize,
        ti: usize,
        di: usize,
        y: usize,
    ) -> f64 {
        let cols = m.smax + 1;
        let key = (ti * m.divs.len() + di) * cols + y;
        if self.memo_t[key].0 == self.gen {
            return self.memo_t[key].1;
        }
        let d = m.divs[di];
        let v = if m.fast_ok[ti] {
            let ks = ti * cols + y;
            let sel = if self.memo_sel[ks].0 == self.gen {
                self.memo_sel[ks].1
            } else {
                let s = self.fast_select(m, dep, ti, y, None);
                self.memo_sel[ks] = (self.gen, s);
                s
            };
            if sel.is_finite() {
                self.fast_tps(m, dep, ti, d, sel)
            } else {
                INF
            }
        } else {
            self.generic_solve(m, dep, ti, d, y).map_or(INF, |x| x.0)
        };
        self.memo_t[key] = (self.gen, v);
        v
    }

    /// The stage's TMPC choice behind `stage_tps(ti, di, y)`: (nodes ascending, tmpc ids);
    /// `None` if the generic path finds no choice (impossible for a feasible stage).
    pub(super) fn witness(
        &self,
        m: &Model<'_>,
        dep: usize,
        ti: usize,
        di: usize,
        y: usize,
    ) -> Option<(Vec<usize>, Vec<usize>)> {
        let d = m.divs[di];
        if m.fast_ok[ti] {
            let mut sw = Vec::new();
            self.fast_select(m, dep, ti, y, Some(&mut sw));
            let nodes = self.members(m, dep);
            let picks = nodes
                .iter()
                .map(|&v| {
                    let nd = m.nodet(v, ti);
                    match nd.other {
                        Some(other) if sw.contains(&v) => other,
                        _ => nd.fast,
                    }
                })
                .collect();
            Some((nodes, picks))
        } else {
            let (_, nodes, picks) = self.generic_solve(m, dep, ti, d, y)?;
            Some((nodes, picks))
        }
    }

    /// Canonical descent below ideal `i`, starting with its immediate sub `branch` (or all
    /// branches if None). `visit(work, J, dep)` is called for every visited pair whose stage is
    /// usable for some t; returns true to stop.
    pub(super) fn descend(
        &mut self,
        m: &Model<'_>,
        ids: &Ideals,
        i: usize,
        branch: Option<usize>,
        visit: &mut dyn FnMut(&mut Work, usize, usize) -> bool,
    ) -> bool {
        self.stack.clear();
        let subs = ids.immediate_subs(i);
        let range = match branch {
            Some(b) => b..b + 1,
            None => 0..subs.len(),
        };
        for b in range.rev() {
            let (v, j) = subs[b];
            self.stack.push(Step {
                j,
                r: ids.rank(v as usize),
                dep: 1,
                u: v,
            });
        }
        let nt = m.nt();
        while let Some(Step { j, r, dep, u }) = self.stack.pop() {
            let dep = dep as usize;
            self.push_node(m, dep, u as usize);
            if !(0..nt).any(|ti| self.usable(m, dep, ti)) {
                continue; // every superset of this stage is infeasible too
            }
            self.next_generation();
            self.pairs += 1;
            if visit(self, j as usize, dep) {
                return true;
            }
            for &(v, j2) in ids.immediate_subs(j as usize).iter().rev() {
                let rv = ids.rank(v as usize);
                if rv < r {
                    self.stack.push(Step {
                        j: j2,
                        r: rv,
                        dep: dep as u32 + 1,
                        u: v,
                    });
                }
            }
        }
        false
    }

    /// A new pair: invalidate the memo tables (clearing them only when the counter wraps).
    fn next_generation(&mut self) {
        self.gen = self.gen.wrapping_add(1);
        if self.gen == 0 {
            self.memo_sel.iter_mut().for_each(|x| x.0 = 0);
            self.memo_t.iter_mut().for_each(|x| x.0 = 0);
            self.gen = 1;
        }
    }
}
