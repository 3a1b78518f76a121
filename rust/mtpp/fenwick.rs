//! Segment costs of one topological order (Lemma 4.1).
//!
//! For the segment `[l, r]` of the order, the work and the overflow come from prefix sums; the
//! tensor (input + output) part `io(l, r)` is a sum of rectangles in the `(l, r)` plane. For a
//! tensor produced at position `p` whose consumers sit at positions `q_1 < ... < q_d`:
//!
//! * it leaves the segment iff `l <= p <= r < q_d`: the rectangle `[0, p] x [p, q_d - 1]`;
//! * it enters the segment iff `p < l` and some `q_i` lies in `[l, r]`; for `l` in
//!   `(q_{i-1}, q_i]` (with `q_0 = p`) the first consumer at or after `l` is `q_i`, so this is
//!   the union of the disjoint rectangles `(q_{i-1}, q_i] x [q_i, n - 1]`.
//!
//! So `O(n + m)` rectangle additions, each `O(log^2 n)` in a two-dimensional Fenwick tree over
//! the difference array, then an `O(n^2)` materialization into a dense table of prefix sums:
//! `O(n^2 + m log^2 n)` in all and `O(1)` per query.

use super::{Instance, OrderCtx};

/// Two-dimensional Fenwick tree over a difference array: rectangle updates, point queries.
///
/// A difference array cancels: a tensor of cost `1e16` is added and later subtracted, and a
/// cost of `1` added in between is lost. A *compensated* tree keeps, per cell, the rounding
/// error of every addition (`two_sum`) in a second array, so each cell is a double-double and
/// the table is correct to about `1e-32` of the largest cost; [`build_fenwick`] uses it when
/// the costs span more than [`SPAN_FOR_COMPENSATION`].
#[derive(Debug, Clone)]
pub struct Fenwick2D {
    /// Side (indices `0..side` in both dimensions).
    side: usize,
    /// `(side + 1)^2` cells, 1-based inside.
    tree: Vec<f64>,
    /// The low parts of the cells (same shape as `tree`), or empty for a plain tree.
    lo: Vec<f64>,
}

/// Largest ratio of the largest to the smallest nonzero tensor cost summed without compensation.
pub const SPAN_FOR_COMPENSATION: f64 = 1e4;

/// `a + b` as the rounded sum and its exact rounding error (Knuth's TwoSum).
#[inline]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

impl Fenwick2D {
    pub fn new(side: usize) -> Fenwick2D {
        Fenwick2D {
            side,
            tree: vec![0.0; (side + 1) * (side + 1)],
            lo: Vec::new(),
        }
    }

    /// A tree whose cells are double-doubles (see the type's documentation).
    pub fn compensated(side: usize) -> Fenwick2D {
        Fenwick2D {
            lo: vec![0.0; (side + 1) * (side + 1)],
            ..Fenwick2D::new(side)
        }
    }

    /// `cell[k] += x` (with the rounding error kept when compensated).
    #[inline]
    fn bump(&mut self, k: usize, x: f64) {
        if self.lo.is_empty() {
            self.tree[k] += x;
        } else {
            let (s, e) = two_sum(self.tree[k], x);
            self.tree[k] = s;
            self.lo[k] += e;
        }
    }

    #[inline]
    fn point_add(&mut self, i: usize, j: usize, x: f64) {
        let w = self.side + 1;
        let mut a = i + 1;
        while a <= self.side {
            let mut b = j + 1;
            while b <= self.side {
                self.bump(a * w + b, x);
                b += b & b.wrapping_neg();
            }
            a += a & a.wrapping_neg();
        }
    }

    /// Add `x` to every cell `(i, j)` with `i0 <= i <= i1`, `j0 <= j <= j1`.
    pub fn add_rect(&mut self, i0: usize, i1: usize, j0: usize, j1: usize, x: f64) {
        if i0 > i1 || j0 > j1 || i0 >= self.side || j0 >= self.side {
            return;
        }
        let (i1, j1) = (i1.min(self.side - 1), j1.min(self.side - 1));
        self.point_add(i0, j0, x);
        if j1 + 1 < self.side {
            self.point_add(i0, j1 + 1, -x);
        }
        if i1 + 1 < self.side {
            self.point_add(i1 + 1, j0, -x);
            if j1 + 1 < self.side {
                self.point_add(i1 + 1, j1 + 1, x);
            }
        }
    }

    /// Value of cell `(i, j)` (`O(log^2 n)`).
    pub fn get(&self, i: usize, j: usize) -> f64 {
        let w = self.side + 1;
        let (mut hi, mut lo) = (0.0, 0.0);
        let mut a = i + 1;
        while a > 0 {
            let mut b = j + 1;
            while b > 0 {
                let (s, e) = two_sum(hi, self.tree[a * w + b]);
                hi = s;
                lo += e + self.lo.get(a * w + b).copied().unwrap_or(0.0);
                b &= b - 1;
            }
            a &= a - 1;
        }
        hi + lo
    }

    /// `cell[dst] += cell[src]` (double-double when compensated).
    #[inline]
    fn fold(&mut self, dst: usize, src: usize) {
        if self.lo.is_empty() {
            self.tree[dst] += self.tree[src];
        } else {
            let (s, e) = two_sum(self.tree[dst], self.tree[src]);
            self.tree[dst] = s;
            self.lo[dst] += self.lo[src] + e;
        }
    }

    /// All cell values as a dense row-major `side x side` table, in `O(side^2)`: the Fenwick
    /// array is turned into 2D prefix sums in place (`P[i] = F[i] + P[i - lowbit(i)]` along
    /// each dimension in turn).
    pub fn materialize(mut self) -> Vec<f64> {
        let s = self.side;
        let w = s + 1;
        if self.lo.is_empty() {
            return self.materialize_plain();
        }
        for a in 1..=s {
            for b in 1..=s {
                let lb = b & b.wrapping_neg();
                if b > lb {
                    self.fold(a * w + b, a * w + b - lb);
                }
            }
        }
        for a in 1..=s {
            let lb = a & a.wrapping_neg();
            if a > lb {
                for b in 0..w {
                    self.fold(a * w + b, (a - lb) * w + b);
                }
            }
        }
        let mut out = vec![0.0; s * s];
        for a in 0..s {
            for b in 0..s {
                let k = (a + 1) * w + b + 1;
                out[a * s + b] = self.tree[k] + self.lo[k];
            }
        }
        out
    }

    fn materialize_plain(mut self) -> Vec<f64> {
        let s = self.side;
        let w = s + 1;
        for a in 1..=s {
            let row = &mut self.tree[a * w..(a + 1) * w];
            for b in 1..=s {
                let lb = b & b.wrapping_neg();
                if b > lb {
                    row[b] += row[b - lb];
                }
            }
        }
        for a in 1..=s {
            let lb = a & a.wrapping_neg();
            if a > lb {
                let (lo, hi) = self.tree.split_at_mut(a * w);
                let src = &lo[(a - lb) * w..(a - lb + 1) * w];
                for (d, x) in hi[..w].iter_mut().zip(src) {
                    *d += *x;
                }
            }
        }
        let mut out = vec![0.0; s * s];
        for a in 0..s {
            out[a * s..(a + 1) * s].copy_from_slice(&self.tree[(a + 1) * w + 1..(a + 2) * w]);
        }
        out
    }
}

/// Dense table of `io(l, r)` for one order (row `l`, column `r`; only `l <= r` is meaningful).
#[derive(Debug, Clone)]
pub struct SegTable {
    pub n: usize,
    pub io: Vec<f64>,
}

impl SegTable {
    #[inline]
    pub fn io(&self, l: usize, r: usize) -> f64 {
        self.io[l * self.n + r]
    }
}

/// Consumer positions of tensor `t`, sorted.
fn consumer_positions(ctx: &OrderCtx<'_>, t: usize, buf: &mut Vec<usize>) {
    buf.clear();
    buf.extend(
        ctx.inst
            .consumers(t)
            .iter()
            .map(|&c| ctx.pos[c as usize] as usize),
    );
    buf.sort_unstable();
}

/// Lemma 4.1: rectangle updates in a 2D Fenwick tree, then materialization.
pub fn build_fenwick(ctx: &OrderCtx<'_>) -> SegTable {
    let inst: &Instance = ctx.inst;
    let n = ctx.n();
    let mut fw = if needs_compensation(inst) {
        Fenwick2D::compensated(n)
    } else {
        Fenwick2D::new(n)
    };
    let mut qs = Vec::new();
    for t in 0..inst.num_tensors() {
        let c = inst.t_cost[t];
        if c == 0.0 {
            continue;
        }
        let p = ctx.pos[inst.t_prod[t] as usize] as usize;
        consumer_positions(ctx, t, &mut qs);
        let qd = *qs.last().expect("tensor without consumers");
        // leaves: l <= p <= r < q_d
        fw.add_rect(0, p, p, qd - 1, c);
        // enters: l in (q_{i-1}, q_i], r >= q_i
        let mut prev = p;
        for &q in qs.iter() {
            fw.add_rect(prev + 1, q, q, n - 1, c);
            prev = q;
        }
    }
    SegTable {
        n,
        io: fw.materialize(),
    }
}

/// Whether the nonzero tensor costs span more than [`SPAN_FOR_COMPENSATION`] (the Fenwick
/// table then needs double-double cells, twice the memory).
pub fn needs_compensation(inst: &Instance) -> bool {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for &c in inst.t_cost.iter().filter(|c| **c != 0.0) {
        lo = lo.min(c.abs());
        hi = hi.max(c.abs());
    }
    hi > lo * SPAN_FOR_COMPENSATION
}

/// Naive oracle: every segment from scratch, `O(n^2 (n + m))`.
pub fn build_naive(ctx: &OrderCtx<'_>) -> SegTable {
    let inst = ctx.inst;
    let n = ctx.n();
    let mut io = vec![0.0; n * n];
    for l in 0..n {
        for r in l..n {
            let inside = |u: usize| {
                let p = ctx.pos[u] as usize;
                l <= p && p <= r
            };
            let mut s = 0.0;
            for t in 0..inst.num_tensors() {
                let pin = inside(inst.t_prod[t] as usize);
                if inst.consumers(t).iter().any(|&c| inside(c as usize) != pin) {
                    s += inst.t_cost[t];
                }
            }
            io[l * n + r] = s;
        }
    }
    SegTable { n, io }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mtpp::kahn::kahn;
    use crate::mtpp::rng::Rng;
    use crate::mtpp::tests_common::random_instance;

    #[test]
    fn fenwick_point_and_materialize() {
        let mut rng = Rng::new(3);
        for side in 1..12 {
            let mut fw = Fenwick2D::new(side);
            let mut dense = vec![0.0; side * side];
            for _ in 0..20 {
                let (a, b) = (rng.below(side), rng.below(side));
                let (c, d) = (rng.below(side), rng.below(side));
                let (i0, i1) = (a.min(b), a.max(b));
                let (j0, j1) = (c.min(d), c.max(d));
                let x = rng.below(10) as f64;
                fw.add_rect(i0, i1, j0, j1, x);
                for i in i0..=i1 {
                    for j in j0..=j1 {
                        dense[i * side + j] += x;
                    }
                }
            }
            for i in 0..side {
                for j in 0..side {
                    assert_eq!(fw.get(i, j), dense[i * side + j]);
                }
            }
            assert_eq!(fw.materialize(), dense);
        }
    }

    #[test]
    fn fenwick_equals_naive_on_random_graphs_and_orders() {
        let mut rng = Rng::new(11);
        for trial in 0..80 {
            let inst = random_instance(&mut rng, 1 + trial % 25, 0.25, false);
            for _ in 0..3 {
                let keys: Vec<f64> = (0..inst.n).map(|_| rng.unit()).collect();
                let ctx = OrderCtx::new(&inst, kahn(&inst, &keys));
                let a = build_fenwick(&ctx);
                let b = build_naive(&ctx);
                for l in 0..inst.n {
                    for r in l..inst.n {
                        // integer costs: exact
                        assert_eq!(a.io(l, r), b.io(l, r), "trial {trial} ({l}, {r})");
                    }
                }
            }
        }
    }

    #[test]
    fn compensated_fenwick_is_correctly_rounded_when_costs_span_1e16() {
        // a plain difference array loses a cost of 1 next to 1e16 (1e16 + 1 - 1e16 = 0)
        let mut rng = Rng::new(5);
        for trial in 0..60 {
            let mut inst = random_instance(&mut rng, 2 + trial % 20, 0.3, false);
            let exact: Vec<i128> = inst
                .t_cost
                .iter()
                .map(|&c| c as i128 * if rng.below(2) == 0 { 10i128.pow(16) } else { 1 })
                .collect();
            for (c, &e) in inst.t_cost.iter_mut().zip(&exact) {
                *c = e as f64;
            }
            let ctx = OrderCtx::new(&inst, kahn(&inst, &vec![0.5; inst.n]));
            let table = build_fenwick(&ctx);
            for l in 0..inst.n {
                for r in l..inst.n {
                    let inside = |u: u32| (l..=r).contains(&(ctx.pos[u as usize] as usize));
                    let want: i128 = (0..inst.num_tensors())
                        .filter(|&t| {
                            let pin = inside(inst.t_prod[t]);
                            inst.consumers(t).iter().any(|&c| inside(c) != pin)
                        })
                        .map(|t| exact[t])
                        .sum();
                    assert_eq!(table.io(l, r), want as f64, "trial {trial} ({l}, {r})");
                }
            }
        }
    }

    #[test]
    fn only_costs_far_apart_get_the_compensated_tree() {
        let mut rng = Rng::new(2);
        let mut inst = random_instance(&mut rng, 12, 0.4, false);
        inst.t_cost
            .iter_mut()
            .enumerate()
            .for_each(|(t, c)| *c = 1.0 + t as f64);
        assert!(!needs_compensation(&inst));
        inst.t_cost[0] = 1e16;
        assert!(needs_compensation(&inst));
    }
}
