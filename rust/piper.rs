//! Piper: the training planner (Tarnawski, Narayanan, Phanishayee, NeurIPS 2021).
//!
//! A plan splits the layer DAG into a sequence of stages (each stage is `I \ J` for two upsets
//! `J ⊂ I`: a contiguous set), and gives each stage a data-parallel degree `d` (dividing the
//! number of microbatches `N`), a tensor-parallel degree `t`, and one TMPC per node. The stage
//! runs on `t * d` devices; its time per sample is
//!
//! ```text
//!   TPS = compute / d + (edges / d + 4 (d - 1) / d * params / N) / B
//! ```
//!
//! where `compute` sums the chosen TMPCs' times, `edges` sums `2 (c(u,v) + sync)` over the edges
//! that cross the stage boundary (the sync part of the TMPC on the stage side), `params` sums the
//! TMPCs' parameter sizes, and `B` is the bandwidth. Its memory per device is
//! `sum(a) * ceil(s / d) + sum(b)` where `s` sums the data-parallel degrees of this and all later
//! stages. The objective is the largest stage TPS, subject to `sum t d <= K`, `sum d <= N` (or
//! `= N`), and memory `<= M` on every device.
//!
//! The DP (Section 4 of the paper) runs over upsets (suffixes of the pipeline): `dp[I][k][s]` is
//! the best max-TPS for the upset `I` on at most `k` devices with the sum of data-parallel degrees
//! at most `s` (exactly `s` in exact-batch mode). Sub-upsets `J` of `I` are visited by the
//! canonical descent of [`Ideals`]; the stage `I \ J` grows one node at a time, its sums are kept
//! incrementally (recomputed from the parent state along the canonical path, so every value is a
//! function of the stage alone, whatever the traversal or thread split), and the per-stage
//! knapsack (one TMPC per node under the memory limit) is solved lazily, only for the `(t, d, y)`
//! that the combine step asks for.

use rayon::prelude::*;

use crate::dag::Dag;
use crate::error::{CoreError, CoreResult};
use crate::ideals::Ideals;
use crate::numeric::{EPS, INF};

/// How the per-stage TMPC choice (a multiple-choice knapsack) is solved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knapsack {
    /// The paper's bang-per-buck greedy (the authors' fast heuristic), with the incremental fast
    /// path where it applies.
    Heuristic,
    /// The same greedy, always through the generic (from scratch) path. For cross-checks.
    GenericHeuristic,
    /// Exact branch and bound for stages of at most `max_nodes` nodes, the greedy above that.
    Exact { max_nodes: usize },
}

/// One TMPC (tensor-parallel execution configuration) of a node for a degree `t`.
#[derive(Debug, Clone)]
pub struct Tmpc {
    pub node: usize,
    pub t: u32,
    pub time: f64,
    pub param: f64,
    pub a: f64,
    pub b: f64,
    /// Sync bytes per incoming edge of `node`, in the order of the problem's edge list.
    pub sfw: Vec<f64>,
    /// Sync bytes per outgoing edge of `node`, in the order of the problem's edge list.
    pub sbw: Vec<f64>,
}

#[derive(Debug, Clone)]
pub struct Problem {
    pub n: usize,
    /// `(source, target, communication bytes)`.
    pub edges: Vec<(u32, u32, f64)>,
    pub tmpcs: Vec<Tmpc>,
    pub devices: usize,
    pub memory: f64,
    pub bandwidth: f64,
    pub batch: usize,
    pub exact_batch: bool,
    pub allow_dp: bool,
    pub knapsack: Knapsack,
    pub max_ideals: usize,
    /// Two-level network: `(devices per server g, intra-server bandwidth)`. Tensor parallelism
    /// stays inside a server (t divides g), the t-way sync bytes move at the intra-server
    /// bandwidth, and so does a stage's data-parallel all-reduce when its `t * d` devices fit in
    /// one server (`t * d <= g`); everything else uses `bandwidth`.
    pub server: Option<(usize, f64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StageOut {
    pub nodes: Vec<usize>,
    pub t: u32,
    pub d: u32,
    /// Chosen TMPC (index into `Problem::tmpcs`) for each node of `nodes`.
    pub tmpcs: Vec<usize>,
    /// The stage's TPS as the DP computed it.
    pub tps: f64,
}

#[derive(Debug, Clone)]
pub struct PlanOut {
    /// Best time per sample; `INFINITY` when no plan fits in memory.
    pub objective: f64,
    /// Stages in pipeline order (first stage holds the sources).
    pub stages: Vec<StageOut>,
    /// `table[k * cols + s]`: best TPS on at most `k` devices with sum of d at most `s`
    /// (exactly `s` in exact-batch mode); `cols = min(N, K) + 1`.
    pub table: Vec<f64>,
    pub cols: usize,
    pub num_ideals: usize,
    pub pairs_visited: u64,
}


fn bad(msg: String) -> CoreError {
    CoreError::InvalidInput(msg)
}

// ---------------------------------------------------------------------------------------------
// Model
// ---------------------------------------------------------------------------------------------

/// Per (node, t) summary used by the incremental state and the fast knapsack path.
#[derive(Debug, Clone, Copy, Default)]
struct NodeT {
    has: bool,
    /// Fastest TMPC (first minimum of time) and the other one, on the fast path.
    fast: usize,
    other: Option<usize>,
    time_f: f64,
    a_f: f64,
    b_f: f64,
    w_f: f64,
    /// `min_l a_l + b_l` (memory at y = 1 of the lowest-memory TMPC).
    low1: f64,
}

struct Model<'a> {
    p: &'a Problem,
    n: usize,
    words: usize,
    ts: Vec<u32>,
    /// per node: incoming `(edge index, source)` and outgoing `(edge index, target)`, edge order.
    inc: Vec<Vec<(usize, usize)>>,
    out: Vec<Vec<(usize, usize)>>,
    /// per (node, ti): TMPC ids.
    opts: Vec<Vec<usize>>,
    nodet: Vec<NodeT>,
    /// per ti: whether the incremental fast path applies.
    fast_ok: Vec<bool>,
    /// per (ti, e): sbw of the source's fast TMPC and sfw of the target's fast TMPC on edge e.
    e_sbw: Vec<f64>,
    e_sfw: Vec<f64>,
    /// per (ti, y): nodes with a memory-saving swap at y, by (ratio, node).
    order: Vec<Vec<u32>>,
    smax: usize,
    divs: Vec<usize>,
}

impl<'a> Model<'a> {
    fn nt(&self) -> usize {
        self.ts.len()
    }

    fn nodet(&self, v: usize, ti: usize) -> &NodeT {
        &self.nodet[v * self.ts.len() + ti]
    }

    fn opts(&self, v: usize, ti: usize) -> &[usize] {
        &self.opts[v * self.ts.len() + ti]
    }

    /// Stage TPS from its sums: compute time, boundary bytes (edge part, sync part), params.
    fn stage_value(&self, ti: usize, d: usize, time: f64, e_c: f64, e_s: f64, w: f64) -> f64 {
        let p = self.p;
        let df = d as f64;
        let ar = 4.0 * (df - 1.0) * w / df / p.batch as f64;
        match p.server {
            None => ((e_c + e_s) / df + ar) / p.bandwidth + time / df,
            Some((g, intra)) => {
                let t = self.ts[ti] as usize;
                let b_ar = if t * d <= g { intra } else { p.bandwidth };
                (e_c / df) / p.bandwidth + (e_s / df) / intra + ar / b_ar + time / df
            }
        }
    }

    fn order(&self, ti: usize, y: usize) -> &[u32] {
        &self.order[ti * (self.smax + 1) + y]
    }

    fn build(p: &'a Problem) -> CoreResult<Model<'a>> {
        let n = p.n;
        if n == 0 {
            return Err(bad("the problem has no nodes".into()));
        }
        if p.devices == 0 {
            return Err(bad("devices must be at least 1".into()));
        }
        if p.batch == 0 {
            return Err(bad("batch (mbsInBatch) must be at least 1".into()));
        }
        if !(p.memory.is_finite() && p.memory > 0.0) {
            return Err(bad(format!(
                "memory must be positive and finite, got {}",
                p.memory
            )));
        }
        if !(p.bandwidth.is_finite() && p.bandwidth > 0.0) {
            return Err(bad(format!(
                "bandwidth must be positive and finite, got {}",
                p.bandwidth
            )));
        }
        let smax = p.batch.min(p.devices);
        let cells = p
            .devices
            .checked_add(1)
            .and_then(|k| k.checked_mul(smax + 1))
            .unwrap_or(usize::MAX);
        if cells > 200_000_000 {
            return Err(bad(format!(
                "devices ({}) x min(batch, devices) ({smax}) is too large for the DP table",
                p.devices
            )));
        }
        let mut inc = vec![Vec::new(); n];
        let mut out = vec![Vec::new(); n];
        let mut pos_in_inc = vec![0; p.edges.len()];
        let mut pos_in_out = vec![0; p.edges.len()];
        let mut seen = std::collections::HashSet::new();
        for (e, &(a, b, c)) in p.edges.iter().enumerate() {
            let (a, b) = (a as usize, b as usize);
            if a >= n || b >= n {
                return Err(bad(format!(
                    "edge {e} ({a} -> {b}) has an endpoint outside 0..{n}"
                )));
            }
            if !(c.is_finite() && c >= 0.0) {
                return Err(bad(format!(
                    "edge {e} ({a} -> {b}): communication cost {c} is negative or not finite"
                )));
            }
            if !seen.insert((a, b)) {
                return Err(bad(format!("duplicate edge {a} -> {b}")));
            }
            pos_in_out[e] = out[a].len();
            out[a].push((e, b));
            pos_in_inc[e] = inc[b].len();
            inc[b].push((e, a));
        }
        if let Some((g, bw)) = p.server {
            if g == 0 || !(bw.is_finite() && bw > 0.0) {
                return Err(bad(format!(
                    "server size must be >= 1 and intra-server bandwidth positive, got {g}, {bw}"
                )));
            }
        }
        let mut ts: Vec<u32> = p
            .tmpcs
            .iter()
            .map(|x| x.t)
            .filter(|&t| t >= 1 && (t as usize) <= p.devices)
            .filter(|&t| p.server.is_none_or(|(g, _)| g.is_multiple_of(t as usize)))
            .collect();
        ts.sort_unstable();
        ts.dedup();
        let nt = ts.len();
        let mut opts = vec![Vec::new(); n * nt];
        for (i, x) in p.tmpcs.iter().enumerate() {
            if x.node >= n {
                return Err(bad(format!(
                    "TMPC {i} refers to node {} outside 0..{n}",
                    x.node
                )));
            }
            if x.t == 0 {
                return Err(bad(format!("node {}: tensor-parallel degree 0", x.node)));
            }
            for (what, val) in [
                ("timePerSample", x.time),
                ("parameterSize", x.param),
                ("memoryUsageA", x.a),
                ("memoryUsageB", x.b),
            ] {
                if !(val.is_finite() && val >= 0.0) {
                    return Err(bad(format!(
                        "node {}, t={}: {what} = {val} is negative or not finite",
                        x.node, x.t
                    )));
                }
            }
            if x.sfw.len() != inc[x.node].len() || x.sbw.len() != out[x.node].len() {
                return Err(bad(format!(
                    "node {}, t={}: sync arrays do not match the node's edges",
                    x.node, x.t
                )));
            }
            if x.sfw
                .iter()
                .chain(x.sbw.iter())
                .any(|s| !(s.is_finite() && *s >= 0.0))
            {
                return Err(bad(format!(
                    "node {}, t={}: a sync cost is negative or not finite",
                    x.node, x.t
                )));
            }
            if let Ok(ti) = ts.binary_search(&x.t) {
                opts[x.node * nt + ti].push(i);
            }
        }
        let generic_only = !matches!(p.knapsack, Knapsack::Heuristic);
        let mut nodet = vec![NodeT::default(); n * nt];
        let mut fast_ok = vec![!generic_only; nt];
        for v in 0..n {
            for ti in 0..nt {
                let o = &opts[v * nt + ti];
                if o.is_empty() {
                    continue;
                }
                let mut f = o[0];
                for &l in &o[1..] {
                    if p.tmpcs[l].time < p.tmpcs[f].time {
                        f = l;
                    }
                }
                let tf = &p.tmpcs[f];
                let low1 = o
                    .iter()
                    .map(|&l| p.tmpcs[l].a + p.tmpcs[l].b)
                    .fold(INF, f64::min);
                let other = o.iter().copied().find(|&l| l != f);
                if o.len() > 2 {
                    fast_ok[ti] = false;
                }
                if let Some(l) = other {
                    let to = &p.tmpcs[l];
                    if to.param != tf.param || to.sfw != tf.sfw || to.sbw != tf.sbw {
                        fast_ok[ti] = false;
                    }
                }
                nodet[v * nt + ti] = NodeT {
                    has: true,
                    fast: f,
                    other,
                    time_f: tf.time,
                    a_f: tf.a,
                    b_f: tf.b,
                    w_f: tf.param,
                    low1,
                };
            }
        }
        let ne = p.edges.len();
        let mut e_sbw = vec![0.0; nt * ne];
        let mut e_sfw = vec![0.0; nt * ne];
        for ti in 0..nt {
            for (e, &(a, b, _)) in p.edges.iter().enumerate() {
                let (a, b) = (a as usize, b as usize);
                let na = &nodet[a * nt + ti];
                if na.has {
                    e_sbw[ti * ne + e] = p.tmpcs[na.fast].sbw[pos_in_out[e]];
                }
                let nb = &nodet[b * nt + ti];
                if nb.has {
                    e_sfw[ti * ne + e] = p.tmpcs[nb.fast].sfw[pos_in_inc[e]];
                }
            }
        }
        let divs: Vec<usize> = (1..=smax)
            .filter(|&d| p.batch.is_multiple_of(d) && (p.allow_dp || d == 1))
            .collect();
        let mut order = vec![Vec::new(); nt * (smax + 1)];
        for ti in 0..nt {
            if !fast_ok[ti] {
                continue;
            }
            for y in 1..=smax {
                let mut list: Vec<(f64, u32)> = Vec::new();
                for v in 0..n {
                    let nd = &nodet[v * nt + ti];
                    if let (true, Some(l)) = (nd.has, nd.other) {
                        let o = &p.tmpcs[l];
                        let yf = y as f64;
                        let sav = (nd.a_f * yf + nd.b_f) - (o.a * yf + o.b);
                        if sav > EPS {
                            list.push(((o.time - nd.time_f) / sav, v as u32));
                        }
                    }
                }
                list.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
                order[ti * (smax + 1) + y] = list.into_iter().map(|x| x.1).collect();
            }
        }
        Ok(Model {
            p,
            n,
            words: n.div_ceil(64).max(1),
            ts,
            inc,
            out,
            opts,
            nodet,
            fast_ok,
            e_sbw,
            e_sfw,
            order,
            smax,
            divs,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Knapsack solvers (generic path): items[i] = list of (value, memory, tmpc id)
// ---------------------------------------------------------------------------------------------

/// The authors' fast greedy, generalized to any number of TMPCs per node by walking each node's
/// lower convex hull from its fastest TMPC: start from the fastest TMPC everywhere; if that fits,
/// done; if even the lowest-memory choice does not fit, infeasible; else apply memory-saving
/// steps by increasing cost per byte saved (ties by node) until the memory fits.
pub fn knapsack_greedy(items: &[Vec<(f64, f64, usize)>], cap: f64) -> Option<(f64, Vec<usize>)> {
    let n = items.len();
    let mut h: Vec<usize> = vec![0; n];
    for (i, it) in items.iter().enumerate() {
        for l in 1..it.len() {
            if it[h[i]].0 > it[l].0 {
                h[i] = l;
            }
        }
    }
    let mem_fast: f64 = (0..n).map(|i| items[i][h[i]].1).sum();
    if mem_fast <= cap {
        let v = (0..n).map(|i| items[i][h[i]].0).sum();
        return Some((v, (0..n).map(|i| items[i][h[i]].2).collect()));
    }
    let low: f64 = items
        .iter()
        .map(|it| it.iter().map(|x| x.1).fold(INF, f64::min))
        .sum();
    if low > cap {
        return None;
    }
    // hull steps: (ratio, node, step index, target option)
    let mut steps: Vec<(f64, usize, usize, usize)> = Vec::new();
    for (i, it) in items.iter().enumerate() {
        let mut cur = h[i];
        let mut k = 0;
        loop {
            // next hull point: among options with less memory, the least cost per byte saved
            let mut best: Option<(f64, usize)> = None;
            for (l, x) in it.iter().enumerate() {
                let sav = it[cur].1 - x.1;
                if sav > EPS {
                    let r = (x.0 - it[cur].0) / sav;
                    if best.is_none_or(|(br, bl)| r < br || (r == br && x.1 < it[bl].1)) {
                        best = Some((r, l));
                    }
                }
            }
            match best {
                Some((r, l)) => {
                    steps.push((r, i, k, l));
                    cur = l;
                    k += 1;
                }
                None => break,
            }
        }
    }
    steps.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut shave = mem_fast - cap;
    for &(_, i, _, l) in &steps {
        shave -= items[i][h[i]].1 - items[i][l].1;
        h[i] = l;
        if shave < EPS {
            break;
        }
    }
    let v = (0..n).map(|i| items[i][h[i]].0).sum();
    Some((v, (0..n).map(|i| items[i][h[i]].2).collect()))
}

/// Exact multiple-choice knapsack by depth-first branch and bound (small stages only).
pub fn knapsack_exact(items: &[Vec<(f64, f64, usize)>], cap: f64) -> Option<(f64, Vec<usize>)> {
    let n = items.len();
    // suffix minima of value and memory
    let mut min_v = vec![0.0; n + 1];
    let mut min_m = vec![0.0; n + 1];
    for i in (0..n).rev() {
        min_v[i] = min_v[i + 1] + items[i].iter().map(|x| x.0).fold(INF, f64::min);
        min_m[i] = min_m[i + 1] + items[i].iter().map(|x| x.1).fold(INF, f64::min);
    }
    if min_m[0] > cap {
        return None;
    }
    struct S<'b> {
        items: &'b [Vec<(f64, f64, usize)>],
        min_v: Vec<f64>,
        min_m: Vec<f64>,
        cap: f64,
        best: f64,
        best_pick: Vec<usize>,
        pick: Vec<usize>,
    }
    fn rec(s: &mut S<'_>, i: usize, val: f64, mem: f64) {
        if i == s.items.len() {
            if val < s.best {
                s.best = val;
                s.best_pick.clone_from(&s.pick);
            }
            return;
        }
        let mut idx: Vec<usize> = (0..s.items[i].len()).collect();
        idx.sort_by(|&a, &b| s.items[i][a].0.total_cmp(&s.items[i][b].0).then(a.cmp(&b)));
        for l in idx {
            let (v, m, _) = s.items[i][l];
            if val + v + s.min_v[i + 1] >= s.best || mem + m + s.min_m[i + 1] > s.cap {
                continue;
            }
            s.pick[i] = l;
            rec(s, i + 1, val + v, mem + m);
        }
    }
    let mut s = S {
        items,
        min_v,
        min_m,
        cap,
        best: INF,
        best_pick: vec![0; n],
        pick: vec![0; n],
    };
    rec(&mut s, 0, 0.0, 0.0);
    if s.best == INF {
        return None;
    }
    // report the value as a plain sum in node order (the evaluator's order)
    let v = (0..n).map(|i| items[i][s.best_pick[i]].0).sum();
    Some((v, (0..n).map(|i| items[i][s.best_pick[i]].2).collect()))
}

// ---------------------------------------------------------------------------------------------
// Sparse DP tables
// ---------------------------------------------------------------------------------------------

/// `dp[I][·][·]` stored by its corners: the cells `(k, s, v)` whose value is below both the
/// cell with one device less and (at-most mode) the cell with one less in s. Every cell's value
/// is the least corner value at or below it (same `s` in exact-batch mode), and with stage costs
/// nondecreasing in `s`, candidates built from corners alone give the same DP (any other cell's
/// candidate is matched by a corner's at a cell below it). Sorted by (k, s).
#[derive(Debug, Clone, Default)]
struct Table {
    corners: Vec<(u32, u32, f64)>,
}

impl Table {
    fn empty_set() -> Table {
        Table {
            corners: vec![(0, 0, 0.0)],
        }
    }

    fn get(&self, k: usize, s: usize, exact: bool) -> f64 {
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

// ---------------------------------------------------------------------------------------------
// The descent with incremental stage state
// ---------------------------------------------------------------------------------------------

/// Knapsack items of a stage: per node, `(value, memory, TMPC id)` per option.
type Items = Vec<Vec<(f64, f64, usize)>>;

const NF: usize = 7; // time_f, e_c, w, a_f, b_f, low1, e_s

struct Work {
    bits: Vec<u64>,
    st: Vec<f64>,
    lack: Vec<u32>,
    cnt: Vec<u32>,
    gen: u32,
    memo_sel: Vec<(u32, f64)>,
    memo_t: Vec<(u32, f64)>,
    stack: Vec<(u32, u32, u32, u32)>,
    pairs: u64,
}

impl Work {
    fn new(m: &Model<'_>) -> Work {
        let nt = m.nt();
        let depth = m.n + 1;
        Work {
            bits: vec![0; depth * m.words],
            st: vec![0.0; depth * nt * NF],
            lack: vec![0; depth * nt],
            cnt: vec![0; depth],
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

    /// state[dep] = state[dep - 1] + node u (u not in the stage at dep - 1).
    fn push_node(&mut self, m: &Model<'_>, dep: usize, u: usize) {
        let w = m.words;
        let (lo, hi) = self.bits.split_at_mut(dep * w);
        hi[..w].copy_from_slice(&lo[(dep - 1) * w..]);
        hi[u / 64] |= 1 << (u % 64);
        self.cnt[dep] = self.cnt[dep - 1] + 1;
        let nt = m.nt();
        let ne = m.p.edges.len();
        for ti in 0..nt {
            let nd = m.nodet(u, ti);
            let prev = (dep - 1) * nt + ti;
            let cur = dep * nt + ti;
            self.lack[cur] = self.lack[prev] + (!nd.has) as u32;
            let mut s: [f64; NF] = [0.0; NF];
            s.copy_from_slice(&self.st[prev * NF..prev * NF + NF]);
            if nd.has {
                s[0] += nd.time_f;
                s[2] += nd.w_f;
                s[3] += nd.a_f;
                s[4] += nd.b_f;
                s[5] += nd.low1;
                if m.fast_ok[ti] {
                    let (mut ec, mut es) = (s[1], s[6]);
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
                    s[1] = ec;
                    s[6] = es;
                }
            }
            self.st[cur * NF..cur * NF + NF].copy_from_slice(&s);
        }
    }

    fn usable(&self, m: &Model<'_>, dep: usize, ti: usize) -> bool {
        let i = dep * m.nt() + ti;
        self.lack[i] == 0 && self.st[i * NF + 5] <= m.p.memory
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
        let i = (dep * m.nt() + ti) * NF;
        let st = &self.st[i..i + NF];
        let yf = y as f64;
        let mem_fast = st[3] * yf + st[4];
        let cap = m.p.memory;
        if mem_fast <= cap {
            return st[0];
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
            let o = &m.p.tmpcs[nd.other.unwrap()];
            shave -= (nd.a_f * yf + nd.b_f) - (o.a * yf + o.b);
            dt += o.time - nd.time_f;
            if let Some(w) = wit.as_mut() {
                w.push(v);
            }
            if shave < EPS {
                return st[0] + dt;
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
        let i = (dep * m.nt() + ti) * NF;
        let st = &self.st[i..i + NF];
        m.stage_value(ti, d, sel, st[1], st[6], st[2])
    }

    /// Stage TPS for (ti, di, y), memoized per visited pair.
    fn stage_tps(&mut self, m: &Model<'_>, dep: usize, ti: usize, di: usize, y: usize) -> f64 {
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

    /// The stage's TMPC choice behind `stage_tps(ti, di, y)`: (nodes ascending, tmpc ids).
    fn witness(
        &self,
        m: &Model<'_>,
        dep: usize,
        ti: usize,
        di: usize,
        y: usize,
    ) -> (Vec<usize>, Vec<usize>) {
        let d = m.divs[di];
        if m.fast_ok[ti] {
            let mut sw = Vec::new();
            self.fast_select(m, dep, ti, y, Some(&mut sw));
            let nodes = self.members(m, dep);
            let picks = nodes
                .iter()
                .map(|&v| {
                    let nd = m.nodet(v, ti);
                    if sw.contains(&v) {
                        nd.other.unwrap()
                    } else {
                        nd.fast
                    }
                })
                .collect();
            (nodes, picks)
        } else {
            let (_, nodes, picks) = self
                .generic_solve(m, dep, ti, d, y)
                .expect("witness of a feasible stage");
            (nodes, picks)
        }
    }

    /// Canonical descent below ideal `i`, starting with its immediate sub `branch` (or all
    /// branches if None). `visit(work, J, dep)` is called for every visited pair whose stage is
    /// usable for some t; returns true to stop.
    fn descend(
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
            self.stack.push((j, ids.rank(v as usize), 1, v));
        }
        let nt = m.nt();
        while let Some((j, r, dep, u)) = self.stack.pop() {
            let dep = dep as usize;
            self.push_node(m, dep, u as usize);
            if !(0..nt).any(|ti| self.usable(m, dep, ti)) {
                continue; // every superset of this stage is infeasible too
            }
            self.gen = self.gen.wrapping_add(1);
            if self.gen == 0 {
                self.memo_sel.iter_mut().for_each(|x| x.0 = 0);
                self.memo_t.iter_mut().for_each(|x| x.0 = 0);
                self.gen = 1;
            }
            self.pairs += 1;
            if visit(self, j as usize, dep) {
                return true;
            }
            for &(v, j2) in ids.immediate_subs(j as usize).iter().rev() {
                let rv = ids.rank(v as usize);
                if rv < r {
                    self.stack.push((j2, rv, dep as u32 + 1, v));
                }
            }
        }
        false
    }
}

// ---------------------------------------------------------------------------------------------
// The DP
// ---------------------------------------------------------------------------------------------

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

/// Turn the candidates into the DP table in place, one row at a time: 2D prefix minimum
/// (at-most mode) or prefix minimum over k (exact mode), and collect the corners.
fn fill_extract(dense: &mut [f64], kmax: usize, cols: usize, exact: bool) -> Table {
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

/// Budget (bytes) for the dense per-task scratch tables held at once.
const SCRATCH_BUDGET: usize = 768 << 20;

/// Run the DP; returns the plan, the table for the full node set and statistics.
pub fn plan(p: &Problem) -> CoreResult<PlanOut> {
    let m = Model::build(p)?;
    let rev: Vec<(u32, u32)> = p.edges.iter().map(|&(a, b, _)| (b, a)).collect();
    let dag = Dag::from_edges(p.n, &rev)?;
    let ids = Ideals::enumerate(&dag, p.max_ideals)?;
    let kmax = p.devices;
    let cols = m.smax + 1;
    let exact = p.exact_batch;
    let cells = kmax
        .checked_add(1)
        .and_then(|k| k.checked_mul(cols))
        .unwrap_or(usize::MAX);
    if cells > 200_000_000 {
        return Err(bad(format!(
            "the DP table has {cells} cells per node set (devices x batch too large)"
        )));
    }
    let mut tables: Vec<Table> = vec![Table::empty_set()];
    // fewest devices any plan of each upset needs (first corner), in a compact array
    let mut kmin: Vec<u32> = vec![0];
    let mut final_dense: Vec<f64> = Vec::new();
    let mut pairs = 0u64;
    // dense buffers are reused: fresh allocations of this size cost page faults
    let pool: std::sync::Mutex<Vec<Vec<f64>>> = std::sync::Mutex::new(Vec::new());
    let levels = ids.levels();
    for level in levels.into_iter().skip(1) {
        let mut start = level.start;
        while start < level.end {
            // chunk of ideals whose per-task scratch fits the budget
            let mut end = start;
            let mut ntasks = 0usize;
            while end < level.end {
                let b = ids.immediate_subs(end).len();
                if ntasks > 0 && (ntasks + b) * cells * 8 > SCRATCH_BUDGET {
                    break;
                }
                ntasks += b;
                end += 1;
            }
            let tasks: Vec<(usize, usize)> = (start..end)
                .flat_map(|i| (0..ids.immediate_subs(i).len()).map(move |b| (i, b)))
                .collect();
            let tabs = &tables;
            let kmin_ref = &kmin;
            let pool_ref = &pool;
            let results: Vec<(usize, Vec<f64>, u64)> = tasks
                .par_iter()
                .map_init(
                    || Work::new(&m),
                    |w, &(i, b)| {
                        let reused = pool_ref.lock().unwrap().pop();
                        let mut dense = match reused {
                            Some(mut d) => {
                                d.fill(INF);
                                d
                            }
                            None => vec![INF; cells],
                        };
                        w.pairs = 0;
                        w.descend(&m, &ids, i, Some(b), &mut |w, j, dep| {
                            // J needs all K devices already: no room for another stage
                            if (kmin_ref[j] as usize) < kmax {
                                combine(&m, w, dep, &tabs[j], &mut dense);
                            }
                            false
                        });
                        (i, dense, w.pairs)
                    },
                )
                .collect();
            // reduce per ideal (min is exact, so grouping does not matter)
            let mut per: Vec<Vec<f64>> = Vec::with_capacity(end - start);
            for _ in start..end {
                per.push(Vec::new());
            }
            for (i, dense, pc) in results {
                pairs += pc;
                let slot = &mut per[i - start];
                if slot.is_empty() {
                    *slot = dense;
                } else {
                    slot.iter_mut()
                        .zip(dense.iter())
                        .for_each(|(a, &b)| *a = a.min(b));
                    pool.lock().unwrap().push(dense);
                }
            }
            let full = ids.full();
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
            for (off, (t, dense)) in built.into_iter().enumerate() {
                kmin.push(t.corners.first().map_or(u32::MAX, |c| c.0));
                tables.push(t);
                if start + off == full {
                    final_dense = dense;
                } else {
                    pool.lock().unwrap().push(dense);
                }
            }
            start = end;
        }
    }
    let full = ids.full();
    if final_dense.is_empty() {
        final_dense = vec![INF; cells];
    }
    // optimum and the Pareto-minimal (k, s) reaching it
    let (objective, k_at, s_at) = if exact {
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
    };
    let mut stages = Vec::new();
    if objective.is_finite() {
        stages = reconstruct(&m, &ids, &tables, full, k_at, s_at, objective)?;
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

fn reconstruct(
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
        let mut found: Option<(usize, StageOut)> = None;
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
                        let (nodes, tmpcs) = w.witness(m, dep, ti, di, y);
                        found = Some((
                            j,
                            StageOut {
                                nodes,
                                t: t as u32,
                                d: d as u32,
                                tmpcs,
                                tps: tv,
                            },
                        ));
                        return true;
                    }
                }
            }
            false
        });
        let Some((j, st)) = found else {
            return Err(bad(
                "internal error: Piper plan reconstruction failed".into()
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn greedy_and_exact_agree_on_easy_cases() {
        let items = vec![
            vec![(1.0, 10.0, 0), (2.0, 4.0, 1)],
            vec![(1.0, 10.0, 2), (1.5, 5.0, 3)],
        ];
        assert_eq!(knapsack_greedy(&items, 100.0).unwrap().0, 2.0);
        assert_eq!(knapsack_exact(&items, 100.0).unwrap().0, 2.0);
        // must save 6: node 1 (0.1 per byte) first, saving 5, then node 0
        assert_eq!(knapsack_greedy(&items, 14.0).unwrap().0, 3.5);
        assert_eq!(knapsack_exact(&items, 14.0).unwrap().0, 3.0); // node 0 alone saves 6
        assert_eq!(knapsack_greedy(&items, 15.0).unwrap().0, 2.5);
        assert!(knapsack_greedy(&items, 8.0).is_none());
        assert!(knapsack_exact(&items, 8.0).is_none());
    }

    #[test]
    fn greedy_gap_example() {
        // greedy takes the cheapest per byte (node 0), overshooting; exact takes node 1 only
        let items = vec![
            vec![(0.0, 10.0, 0), (1.0, 0.0, 1)],
            vec![(0.0, 3.0, 2), (0.5, 0.0, 3)],
        ];
        assert_eq!(knapsack_exact(&items, 10.0).unwrap().0, 0.5);
        assert_eq!(knapsack_greedy(&items, 10.0).unwrap().0, 1.0);
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
    }
}
