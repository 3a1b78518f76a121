//! The SliceGraph DP (Algorithm 1): the best split of one topological order into at most `k`
//! contiguous segments (every segment of a topological order is a block, and consecutive
//! segments form an acyclic quotient).
//!
//! `best[j][i]` = least max segment cost of the first `i` units in exactly `j` segments:
//! `best[j][i] = min_l max(best[j-1][l], cost(l, i-1))`. [`reference()`] is the plain
//! `O(n^2 k)` recurrence over any cost function. [`solve`] computes the same optimum faster:
//! it guesses a threshold `T`, drops every segment whose monotone lower bound (work +
//! overflow) exceeds `T` (so each column is scanned only as far back as a segment can still
//! fit under `T`), keeps for each prefix only the segment counts `j` compatible with
//! covering the prefix and the suffix within `k` segments under `T`, and raises `T`
//! geometrically until a split of cost `<= T` exists. Every split of cost `<= T` survives the
//! pruning, so the first success is optimal; `T` is capped by the cost of a feasible greedy
//! split, so it terminates.
//!
//! The `*_with` variants poll a [`Cancel`] token once per column of the DP and return the
//! [`Stop`] when it fires; the plain ones never stop.

use super::fenwick::SegTable;
use super::OrderCtx;
use crate::cancel::{Cancel, Stop};
use crate::numeric::{CompensatedSum, INF};

/// Tensor costs `io(l, r)` of the segments ending at one `r`, for `l = r, r - 1, ...` in turn.
pub trait SegCosts {
    fn begin(&mut self, r: usize);
    /// `io(l, r)` for the next `l` (callers go down one step at a time from `l = r`).
    fn io(&mut self, l: usize) -> f64;
}

/// Lookups in a materialized table (Lemma 4.1).
pub struct TableCosts<'t> {
    table: &'t SegTable,
    r: usize,
}

impl<'t> TableCosts<'t> {
    pub fn new(table: &'t SegTable) -> Self {
        TableCosts { table, r: 0 }
    }
}

impl SegCosts for TableCosts<'_> {
    fn begin(&mut self, r: usize) {
        self.r = r;
    }
    #[inline]
    fn io(&mut self, l: usize) -> f64 {
        self.table.io(l, self.r)
    }
}

/// No table: `io(l, r)` kept incrementally while `l` goes down (`O(deg)` per step), so only
/// the segments the DP actually looks at are ever computed. Memory `O(n + m)`. The tensors
/// each position produces and consumes are packed by position first (one pass), so the
/// steps, repeated for every column, read contiguous memory.
pub struct ScanCosts<'c, 'a> {
    ctx: &'c OrderCtx<'a>,
    p_off: Vec<u32>,
    /// (tensor, largest consumer position, cost) per produced tensor, by producer position.
    p_data: Vec<(u32, u32, f64)>,
    c_off: Vec<u32>,
    /// (tensor, cost) per consumed tensor, by consumer position.
    c_data: Vec<(u32, f64)>,
    stamp: Vec<u32>,
    gen: u32,
    r: u32,
    /// Tensors enter and leave the sum: compensated (1e16 + 1 - 1e16 keeps the 1) when a cost
    /// dwarfs the answer (`wide`, see [`tensor_costs_dwarf_the_work`]), plain otherwise.
    io: CompensatedSum,
    wide: bool,
}

impl<'c, 'a> ScanCosts<'c, 'a> {
    pub fn new(ctx: &'c OrderCtx<'a>) -> Self {
        let inst = ctx.inst;
        let n = ctx.n();
        let mut p_off = Vec::with_capacity(n + 1);
        let mut c_off = Vec::with_capacity(n + 1);
        let mut p_data = Vec::with_capacity(inst.num_tensors());
        let mut c_data = Vec::with_capacity(inst.cons.len());
        p_off.push(0);
        c_off.push(0);
        for &u in &ctx.order {
            for &t in inst.produced(u) {
                p_data.push((t, ctx.qmax[t as usize], inst.t_cost[t as usize]));
            }
            for &t in inst.consumed(u) {
                c_data.push((t, inst.t_cost[t as usize]));
            }
            p_off.push(p_data.len() as u32);
            c_off.push(c_data.len() as u32);
        }
        ScanCosts {
            ctx,
            p_off,
            p_data,
            c_off,
            c_data,
            stamp: vec![0; inst.num_tensors()],
            gen: 0,
            r: 0,
            io: CompensatedSum::default(),
            wide: tensor_costs_dwarf_the_work(inst),
        }
    }
}

/// Does some tensor cost exceed `2^20` times both the largest unit work (a lower bound on
/// the answer) and the smallest positive tensor cost? A plain running sum of tensor costs
/// loses about `2^-52` of the largest cost it has held at each step: harmless next to the
/// answer unless such a cost dwarfs it, as in a chain with costs `[0, 1e16, 1, 0]`.
fn tensor_costs_dwarf_the_work(inst: &super::Instance) -> bool {
    let work = inst.work.iter().copied().fold(0.0, f64::max);
    let smallest = inst
        .t_cost
        .iter()
        .copied()
        .filter(|&c| c > 0.0)
        .fold(INF, f64::min);
    let largest = inst.t_cost.iter().copied().fold(0.0, f64::max);
    largest > work.max(smallest.min(largest)) * (1u64 << 20) as f64
}

impl ScanCosts<'_, '_> {
    #[inline]
    fn bump(&self, io: &mut CompensatedSum, x: f64) {
        if self.wide {
            io.add(x);
        } else {
            io.add_plain(x);
        }
    }
}

impl SegCosts for ScanCosts<'_, '_> {
    fn begin(&mut self, r: usize) {
        let _ = self.ctx;
        self.r = r as u32;
        self.io = CompensatedSum::default();
        self.gen = self.gen.wrapping_add(1);
        if self.gen == 0 {
            self.stamp.iter_mut().for_each(|s| *s = u32::MAX);
            self.gen = 1;
        }
    }

    #[inline]
    fn io(&mut self, l: usize) -> f64 {
        let mut io = self.io;
        let (pa, pb) = (self.p_off[l] as usize, self.p_off[l + 1] as usize);
        for &(t, q, c) in &self.p_data[pa..pb] {
            if self.stamp[t as usize] == self.gen {
                self.bump(&mut io, -c); // was entering; its producer is now inside
            }
            if q > self.r {
                self.bump(&mut io, c); // leaves
            }
        }
        let (ca, cb) = (self.c_off[l] as usize, self.c_off[l + 1] as usize);
        for &(t, c) in &self.c_data[ca..cb] {
            let st = &mut self.stamp[t as usize];
            if *st != self.gen {
                *st = self.gen;
                if self.wide {
                    io.add(c);
                } else {
                    io.add_plain(c);
                }
            }
        }
        self.io = io;
        io.value().max(0.0)
    }
}

/// An optimal split of one order.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// Max segment cost (`INF` if no split into at most `k` feasible segments exists).
    pub objective: f64,
    /// Start position of each segment (the first is 0); empty when infeasible.
    pub starts: Vec<usize>,
    /// Threshold rounds used by [`solve`].
    pub rounds: u32,
}

impl Split {
    /// A split with no segments: the empty order (`objective = 0`) or no feasible split (`INF`).
    fn trivial(objective: f64) -> Split {
        Split {
            objective,
            starts: vec![],
            rounds: 0,
        }
    }

    /// The segments as lists of units.
    pub fn blocks(&self, order: &[usize]) -> Vec<Vec<usize>> {
        let mut out = Vec::with_capacity(self.starts.len());
        for (i, &s) in self.starts.iter().enumerate() {
            let e = self.starts.get(i + 1).copied().unwrap_or(order.len());
            out.push(order[s..e].to_vec());
        }
        out
    }
}

fn backtrack(par: &[u32], n: usize, mut j: usize) -> Vec<usize> {
    let mut starts = Vec::with_capacity(j);
    let mut i = n;
    while j > 0 {
        let l = par[j * (n + 1) + i] as usize;
        starts.push(l);
        i = l;
        j -= 1;
    }
    starts.reverse();
    starts
}

/// Plain `O(n^2 k)` DP over a cost function (test oracle and reference).
pub fn reference(n: usize, k: usize, cost: impl Fn(usize, usize) -> f64) -> Split {
    reference_with(n, k, cost, &Cancel::never()).unwrap_or_else(|_| Split::trivial(INF))
}

/// [`reference`], polling `cancel` once per cell row.
pub fn reference_with(
    n: usize,
    k: usize,
    cost: impl Fn(usize, usize) -> f64,
    cancel: &Cancel,
) -> Result<Split, Stop> {
    if n == 0 {
        return Ok(Split::trivial(0.0));
    }
    let mut tick = cancel.ticker(1024 / n.clamp(1, 1024) as u32);
    let w = n + 1;
    let mut best = vec![INF; (k + 1) * w];
    let mut par = vec![0u32; (k + 1) * w];
    best[0] = 0.0;
    for j in 1..=k {
        for i in 1..=n {
            tick.tick()?;
            for l in 0..i {
                let b = best[(j - 1) * w + l];
                if b == INF {
                    continue;
                }
                let cand = b.max(cost(l, i - 1));
                if cand < best[j * w + i] {
                    best[j * w + i] = cand;
                    par[j * w + i] = l as u32;
                }
            }
        }
    }
    let mut bj = 0;
    let mut bv = INF;
    for j in 1..=k {
        if best[j * w + n] < bv {
            bv = best[j * w + n];
            bj = j;
        }
    }
    if bv == INF {
        return Ok(Split::trivial(INF));
    }
    Ok(Split {
        objective: bv,
        starts: backtrack(&par, n, bj),
        rounds: 0,
    })
}

/// Exact cost of segment `[l, r]` through a provider (walks `l` down from `r`).
fn segment_cost<S: SegCosts>(ctx: &OrderCtx<'_>, seg: &mut S, l: usize, r: usize) -> f64 {
    seg.begin(r);
    let mut io = 0.0;
    for x in (l..=r).rev() {
        io = seg.io(x);
    }
    ctx.seg_lb(l, r) + io
}

/// A feasible split: maximal segments `(l, r)` of finite lower bound (only a hard memory limit
/// makes a bound infinite); `None` if a single unit is already infeasible.
fn greedy_split(ctx: &OrderCtx<'_>) -> Option<Vec<(usize, usize)>> {
    let n = ctx.n();
    let mut greedy = Vec::new();
    let mut l = 0;
    while l < n {
        if ctx.seg_lb(l, l) == INF {
            return None;
        }
        let mut r = l;
        while r + 1 < n && ctx.seg_lb(l, r + 1) < INF {
            r += 1;
        }
        greedy.push((l, r));
        l = r + 1;
    }
    Some(greedy)
}

/// The optimal split of `ctx`'s order into at most `k` segments (see the module docs).
pub fn solve<S: SegCosts>(ctx: &OrderCtx<'_>, seg: &mut S, k: usize) -> Split {
    solve_with(ctx, seg, k, &Cancel::never()).unwrap_or_else(|_| Split::trivial(INF))
}

/// [`solve`], stopping when `cancel` fires.
pub fn solve_with<S: SegCosts>(
    ctx: &OrderCtx<'_>,
    seg: &mut S,
    k: usize,
    cancel: &Cancel,
) -> Result<Split, Stop> {
    let n = ctx.n();
    if n == 0 {
        return Ok(Split::trivial(0.0));
    }
    if k == 0 {
        return Ok(Split::trivial(INF));
    }
    let greedy = match greedy_split(ctx) {
        Some(g) if g.len() <= k => g,
        _ => return Ok(Split::trivial(INF)),
    };
    let tmax = greedy
        .iter()
        .map(|&(l, r)| segment_cost(ctx, seg, l, r))
        .fold(0.0, f64::max);
    let mut t = (0..n)
        .map(|i| ctx.seg_lb(i, i))
        .fold(ctx.pw[n] / k as f64, f64::max);
    let mut rounds = 0;
    loop {
        rounds += 1;
        let cap = t >= tmax;
        let tt = if cap { tmax } else { t };
        if let Some(mut s) = banded(ctx, seg, k, tt, cancel)? {
            s.rounds = rounds;
            return Ok(s);
        }
        if cap {
            // cannot happen (the greedy split has cost <= tmax); be safe anyway
            let starts = greedy.iter().map(|&(l, _)| l).collect();
            return Ok(Split {
                objective: tmax,
                starts,
                rounds,
            });
        }
        t = if t > 0.0 { t * 1.25 } else { tmax / 64.0 };
    }
}

/// The optimum if it is at most `cap` (one banded round at `T = cap`), else `None`. Used by
/// the searches: a chromosome that cannot beat the current elites needs no exact value.
pub fn solve_capped<S: SegCosts>(
    ctx: &OrderCtx<'_>,
    seg: &mut S,
    k: usize,
    cap: f64,
) -> Option<Split> {
    solve_capped_with(ctx, seg, k, cap, &Cancel::never()).unwrap_or(None)
}

/// [`solve_capped`], stopping when `cancel` fires.
pub fn solve_capped_with<S: SegCosts>(
    ctx: &OrderCtx<'_>,
    seg: &mut S,
    k: usize,
    cap: f64,
    cancel: &Cancel,
) -> Result<Option<Split>, Stop> {
    if !cap.is_finite() {
        let s = solve_with(ctx, seg, k, cancel)?;
        return Ok(if s.objective <= cap { Some(s) } else { None });
    }
    if ctx.n() == 0 {
        return Ok(Some(Split::trivial(0.0)));
    }
    if k == 0 {
        return Ok(None);
    }
    Ok(banded(ctx, seg, k, cap, cancel)?.map(|mut s| {
        s.rounds = 1;
        s
    }))
}

/// What the lower bounds alone say at threshold `t`, per prefix length `i`: `reach[i]`, the
/// smallest `l` with `lb(l, i - 1) <= t` (nondecreasing in `i`); `f[i]`, the fewest segments
/// with bounds `<= t` covering `[0, i)`; `h[i]`, likewise for `[i, n)`.
struct Band {
    reach: Vec<usize>,
    f: Vec<usize>,
    h: Vec<usize>,
    k: usize,
}

impl Band {
    /// `None` if no split into at most `k` segments has every bound `<= t`.
    fn new(ctx: &OrderCtx<'_>, k: usize, t: f64) -> Option<Band> {
        let n = ctx.n();
        let mut f = vec![0usize; n + 1];
        let mut reach = vec![0usize; n + 1];
        let mut lo = 0;
        for i in 1..=n {
            if ctx.seg_lb(i - 1, i - 1) > t {
                return None;
            }
            while ctx.seg_lb(lo, i - 1) > t {
                lo += 1;
            }
            reach[i] = lo;
            f[i] = 1 + f[lo];
        }
        if f[n] > k {
            return None;
        }
        let mut h = vec![0usize; n + 1];
        let mut hi = n - 1;
        for i in (0..n).rev() {
            while ctx.seg_lb(i, hi) > t {
                hi -= 1;
            }
            h[i] = 1 + h[hi + 1];
        }
        Some(Band { reach, f, h, k })
    }

    /// The segment counts `j` that can matter for prefix `i`: `[f[i], min(i, k - h[i])]`
    /// (empty when `a > b`).
    #[inline]
    fn range(&self, i: usize) -> (usize, usize) {
        if self.h[i] > self.k {
            (1, 0)
        } else {
            (self.f[i], (self.k - self.h[i]).min(i))
        }
    }
}

/// One round at threshold `t`: the optimum if it is `<= t`, else `None`.
///
/// `best[i][j]` (row per prefix length, `k + 1` wide so the inner loop over `j` is a
/// contiguous min/max the compiler vectorizes); no parent pointers: the cuts are recovered
/// afterwards by re-scanning only the columns on the optimal path.
fn banded<S: SegCosts>(
    ctx: &OrderCtx<'_>,
    seg: &mut S,
    k: usize,
    t: f64,
    cancel: &Cancel,
) -> Result<Option<Split>, Stop> {
    let n = ctx.n();
    let w = k + 1;
    let Some(band) = Band::new(ctx, k, t) else {
        return Ok(None);
    };
    let Some(best) = band_table(ctx, seg, &band, t, cancel)? else {
        return Ok(None);
    };
    let mut bj = 0;
    let mut bv = INF;
    for j in 1..=k {
        if best[n * w + j] < bv {
            bv = best[n * w + j];
            bj = j;
        }
    }
    if bv > t || bv == INF {
        return Ok(None);
    }
    Ok(recover_cuts(ctx, seg, &best, w, bj, t).map(|starts| Split {
        objective: bv,
        starts,
        rounds: 0,
    }))
}

/// The table `best[i * (k + 1) + j]` of one round (entries above `t` stay `INF`); `None` once
/// some prefix can no longer be reached (the round fails).
fn band_table<S: SegCosts>(
    ctx: &OrderCtx<'_>,
    seg: &mut S,
    band: &Band,
    t: f64,
    cancel: &Cancel,
) -> Result<Option<Vec<f64>>, Stop> {
    let n = ctx.n();
    let w = band.k + 1;
    let mut best = vec![INF; (n + 1) * w];
    best[0] = 0.0;
    // last prefix length with a finite entry: once no segment ending at r can start at or
    // before it, no later one can either (reach is nondecreasing), so the round fails here
    let mut last_finite = 0usize;
    let mut tick = cancel.ticker(8);
    for r in 0..n {
        let i = r + 1;
        tick.tick()?;
        if band.reach[i] > last_finite {
            return Ok(None);
        }
        let (ja, jb) = band.range(i);
        if ja > jb {
            continue;
        }
        seg.begin(r);
        let (lo_rows, hi_rows) = best.split_at_mut(i * w);
        let row = &mut hi_rows[..w];
        for l in (0..=r).rev() {
            let lb = ctx.seg_lb(l, r);
            if lb > t {
                break;
            }
            let c = lb + seg.io(l);
            if c > t {
                continue;
            }
            let (pa, pb) = band.range(l);
            // j - 1 in [pa, pb] and j in [ja, jb]
            let a = ja.max(pa + 1);
            let b = jb.min(pb + 1);
            if a > b {
                continue;
            }
            let prev = &lo_rows[l * w + a - 1..l * w + b];
            for (cell, &p) in row[a..=b].iter_mut().zip(prev) {
                let cand = if p > c { p } else { c };
                if cand < *cell {
                    *cell = cand;
                }
            }
        }
        if row.iter().any(|&x| x < INF) {
            last_finite = i;
        }
    }
    Ok(Some(best))
}

/// The cut positions of the optimum `best[n][bj]`: for each `(i, j)` on the path, some `l`
/// gives `max(best[l][j - 1], cost(l, i - 1)) == best[i][j]` (found by re-scanning column
/// `i - 1`). `None` cannot happen (exact float recomputation); it counts as a failed round.
fn recover_cuts<S: SegCosts>(
    ctx: &OrderCtx<'_>,
    seg: &mut S,
    best: &[f64],
    w: usize,
    bj: usize,
    t: f64,
) -> Option<Vec<usize>> {
    let mut starts = Vec::with_capacity(bj);
    let (mut i, mut j) = (ctx.n(), bj);
    while j > 0 {
        let target = best[i * w + j];
        let r = i - 1;
        seg.begin(r);
        let mut found = None;
        for l in (0..=r).rev() {
            let lb = ctx.seg_lb(l, r);
            if lb > t {
                break;
            }
            let c = lb + seg.io(l);
            let p = best[l * w + j - 1];
            if c <= t && p != INF && (if p > c { p } else { c }) == target {
                found = Some(l);
                break;
            }
        }
        let l = found?;
        starts.push(l);
        i = l;
        j -= 1;
    }
    debug_assert_eq!(i, 0);
    starts.reverse();
    Some(starts)
}

#[cfg(test)]
#[path = "slicegraph_tests.rs"]
mod tests;
