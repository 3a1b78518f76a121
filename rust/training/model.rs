//! The validated Piper problem and everything the DP precomputes from it: the usable
//! tensor-parallel degrees, each node's TMPC options per degree and their summaries
//! ([`NodeT`]), whether the incremental fast knapsack path applies, the data-parallel degrees,
//! and the stage TPS formula ([`Model::stage_value`]).

use std::collections::HashSet;

use super::{bad, Knapsack, Problem};
use crate::error::{CoreError, CoreResult};
use crate::numeric::{is_finite_nonneg, EPS, INF};

/// Per (node, t) summary used by the incremental state and the fast knapsack path.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct NodeT {
    /// The node has a TMPC for this `t` (a stage holding a node without one cannot use `t`).
    pub(super) has: bool,
    /// Fastest TMPC (first minimum of time) and the other one, on the fast path.
    pub(super) fast: usize,
    pub(super) other: Option<usize>,
    /// Time, memory coefficients `a` (per sample in flight) and `b` (fixed), and parameter
    /// bytes of the fastest TMPC.
    pub(super) time_f: f64,
    pub(super) a_f: f64,
    pub(super) b_f: f64,
    pub(super) w_f: f64,
    /// `min_l a_l + b_l` (memory at y = 1 of the lowest-memory TMPC).
    pub(super) low1: f64,
}

/// The problem with its precomputed tables. Index conventions: `ti` indexes [`Model::ts`],
/// `di` indexes [`Model::divs`], `y = ceil(s / d)` is the number of samples in flight.
pub(super) struct Model<'a> {
    pub(super) p: &'a Problem,
    pub(super) n: usize,
    /// 64-bit words of a node bitset.
    pub(super) words: usize,
    /// The usable tensor-parallel degrees, ascending.
    pub(super) ts: Vec<u32>,
    /// per node: incoming `(edge index, source)` and outgoing `(edge index, target)`, edge order.
    pub(super) inc: Vec<Vec<(usize, usize)>>,
    pub(super) out: Vec<Vec<(usize, usize)>>,
    /// per (node, ti): TMPC ids.
    opts: Vec<Vec<usize>>,
    nodet: Vec<NodeT>,
    /// per ti: whether the incremental fast path applies.
    pub(super) fast_ok: Vec<bool>,
    /// per (ti, e): sbw of the source's fast TMPC and sfw of the target's fast TMPC on edge e.
    pub(super) e_sbw: Vec<f64>,
    pub(super) e_sfw: Vec<f64>,
    /// per (ti, y): nodes with a memory-saving swap at y, by (ratio, node).
    order: Vec<Vec<u32>>,
    /// `min(batch, devices)`: the largest useful sum of data-parallel degrees.
    pub(super) smax: usize,
    /// The allowed data-parallel degrees (divisors of the batch up to `smax`), ascending.
    pub(super) divs: Vec<usize>,
}

/// Per node, its incoming and outgoing edges, and each edge's position in those lists.
struct EdgeLists {
    inc: Vec<Vec<(usize, usize)>>,
    out: Vec<Vec<(usize, usize)>>,
    pos_in_inc: Vec<usize>,
    pos_in_out: Vec<usize>,
}

impl<'a> Model<'a> {
    pub(super) fn nt(&self) -> usize {
        self.ts.len()
    }

    pub(super) fn nodet(&self, v: usize, ti: usize) -> &NodeT {
        &self.nodet[v * self.ts.len() + ti]
    }

    pub(super) fn opts(&self, v: usize, ti: usize) -> &[usize] {
        &self.opts[v * self.ts.len() + ti]
    }

    /// Stage TPS from its sums: compute time, boundary bytes (edge part, sync part), params.
    pub(super) fn stage_value(
        &self,
        ti: usize,
        d: usize,
        time: f64,
        e_c: f64,
        e_s: f64,
        w: f64,
    ) -> f64 {
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

    /// Nodes with a memory-saving swap to their other TMPC at `(ti, y)`, cheapest per byte
    /// saved first (fast path only).
    pub(super) fn order(&self, ti: usize, y: usize) -> &[u32] {
        &self.order[ti * (self.smax + 1) + y]
    }

    /// Validate `p` and precompute the tables.
    pub(super) fn build(p: &'a Problem) -> CoreResult<Model<'a>> {
        let n = p.n;
        let smax = check_scalars(p)?;
        let edges = EdgeLists::build(p)?;
        if let Some((g, bw)) = p.server {
            if g == 0 || !(bw.is_finite() && bw > 0.0) {
                return Err(bad(format!(
                    "server size must be >= 1 and intra-server bandwidth positive, got {g}, {bw}"
                )));
            }
        }
        let ts = usable_degrees(p);
        let nt = ts.len();
        let opts = tmpc_options(p, &ts, &edges)?;
        let (nodet, fast_ok) = node_summaries(p, &opts, nt);
        let (e_sbw, e_sfw) = fast_sync(p, &nodet, nt, &edges);
        let divs: Vec<usize> = (1..=smax)
            .filter(|&d| p.batch.is_multiple_of(d) && (p.allow_dp || d == 1))
            .collect();
        let order = swap_orders(p, &nodet, &fast_ok, smax);
        Ok(Model {
            p,
            n,
            words: n.div_ceil(64).max(1),
            ts,
            inc: edges.inc,
            out: edges.out,
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

/// Check the problem's scalars; returns `smax = min(batch, devices)`.
fn check_scalars(p: &Problem) -> CoreResult<usize> {
    if p.n == 0 {
        return Err(bad("the problem has no nodes".into()));
    }
    if p.n > u32::MAX as usize {
        return Err(bad(format!(
            "{} nodes: at most {} are supported",
            p.n,
            u32::MAX
        )));
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
    if p.n >= p.max_ideals {
        // n + 1 upsets at least: refuse before allocating anything per node
        return Err(CoreError::TooManyIdeals {
            limit: p.max_ideals,
        });
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
    Ok(smax)
}

impl EdgeLists {
    /// Errors: an endpoint out of range, a bad communication cost, a duplicate edge.
    fn build(p: &Problem) -> CoreResult<EdgeLists> {
        let n = p.n;
        let mut lists = EdgeLists {
            inc: vec![Vec::new(); n],
            out: vec![Vec::new(); n],
            pos_in_inc: vec![0; p.edges.len()],
            pos_in_out: vec![0; p.edges.len()],
        };
        let mut seen = HashSet::new();
        for (e, &(a, b, c)) in p.edges.iter().enumerate() {
            let (a, b) = (a as usize, b as usize);
            if a >= n || b >= n {
                return Err(bad(format!(
                    "edge {e} ({a} -> {b}) has an endpoint outside 0..{n}"
                )));
            }
            if !is_finite_nonneg(c) {
                return Err(bad(format!(
                    "edge {e} ({a} -> {b}): communication cost {c} is negative or not finite"
                )));
            }
            if !seen.insert((a, b)) {
                return Err(bad(format!("duplicate edge {a} -> {b}")));
            }
            lists.pos_in_out[e] = lists.out[a].len();
            lists.out[a].push((e, b));
            lists.pos_in_inc[e] = lists.inc[b].len();
            lists.inc[b].push((e, a));
        }
        Ok(lists)
    }
}

/// The distinct TMPC degrees `t` with `1 <= t <= devices` (dividing the server size on a
/// two-level network), ascending.
fn usable_degrees(p: &Problem) -> Vec<u32> {
    let mut ts: Vec<u32> = p
        .tmpcs
        .iter()
        .map(|x| x.t)
        .filter(|&t| t >= 1 && (t as usize) <= p.devices)
        .filter(|&t| p.server.is_none_or(|(g, _)| g.is_multiple_of(t as usize)))
        .collect();
    ts.sort_unstable();
    ts.dedup();
    ts
}

/// Validate every TMPC; returns the TMPC ids per `(node, ti)` (TMPCs of unusable degrees are
/// validated, then dropped).
fn tmpc_options(p: &Problem, ts: &[u32], edges: &EdgeLists) -> CoreResult<Vec<Vec<usize>>> {
    let (n, nt) = (p.n, ts.len());
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
            if !is_finite_nonneg(val) {
                return Err(bad(format!(
                    "node {}, t={}: {what} = {val} is negative or not finite",
                    x.node, x.t
                )));
            }
        }
        if x.sfw.len() != edges.inc[x.node].len() || x.sbw.len() != edges.out[x.node].len() {
            return Err(bad(format!(
                "node {}, t={}: sync arrays do not match the node's edges",
                x.node, x.t
            )));
        }
        if x.sfw
            .iter()
            .chain(x.sbw.iter())
            .any(|&s| !is_finite_nonneg(s))
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
    Ok(opts)
}

/// The [`NodeT`] of every `(node, ti)`, and per `ti` whether the fast path applies: the
/// [`Knapsack::Heuristic`] mode, at most two TMPCs per node, and the two differing only in
/// time and memory (same parameters and sync bytes).
fn node_summaries(p: &Problem, opts: &[Vec<usize>], nt: usize) -> (Vec<NodeT>, Vec<bool>) {
    let generic_only = !matches!(p.knapsack, Knapsack::Heuristic);
    let mut nodet = vec![NodeT::default(); p.n * nt];
    let mut fast_ok = vec![!generic_only; nt];
    for v in 0..p.n {
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
    (nodet, fast_ok)
}

/// Per `(ti, e)`: the sync bytes of edge `e` on the source side (its fast TMPC's `sbw`) and
/// on the target side (`sfw`); zero where the node has no TMPC for `ti`.
fn fast_sync(p: &Problem, nodet: &[NodeT], nt: usize, edges: &EdgeLists) -> (Vec<f64>, Vec<f64>) {
    let ne = p.edges.len();
    let mut e_sbw = vec![0.0; nt * ne];
    let mut e_sfw = vec![0.0; nt * ne];
    for ti in 0..nt {
        for (e, &(a, b, _)) in p.edges.iter().enumerate() {
            let (a, b) = (a as usize, b as usize);
            let na = &nodet[a * nt + ti];
            if na.has {
                e_sbw[ti * ne + e] = p.tmpcs[na.fast].sbw[edges.pos_in_out[e]];
            }
            let nb = &nodet[b * nt + ti];
            if nb.has {
                e_sfw[ti * ne + e] = p.tmpcs[nb.fast].sfw[edges.pos_in_inc[e]];
            }
        }
    }
    (e_sbw, e_sfw)
}

/// Per `(ti, y)` on the fast path: the nodes whose other TMPC saves memory at `y` samples in
/// flight, by increasing time added per byte saved (ties by node).
fn swap_orders(p: &Problem, nodet: &[NodeT], fast_ok: &[bool], smax: usize) -> Vec<Vec<u32>> {
    let nt = fast_ok.len();
    let mut order = vec![Vec::new(); nt * (smax + 1)];
    for ti in 0..nt {
        if !fast_ok[ti] {
            continue;
        }
        for y in 1..=smax {
            let mut list: Vec<(f64, u32)> = Vec::new();
            for v in 0..p.n {
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
    order
}
