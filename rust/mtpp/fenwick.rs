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
#[derive(Debug, Clone)]
pub struct Fenwick2D {
    /// Side (indices `0..side` in both dimensions).
    side: usize,
    /// `(side + 1)^2` cells, 1-based inside.
    tree: Vec<f64>,
}

impl Fenwick2D {
    pub fn new(side: usize) -> Fenwick2D {
        Fenwick2D {
            side,
            tree: vec![0.0; (side + 1) * (side + 1)],
        }
    }

    #[inline]
    fn point_add(&mut self, i: usize, j: usize, x: f64) {
        let w = self.side + 1;
        let mut a = i + 1;
        while a <= self.side {
            let mut b = j + 1;
            while b <= self.side {
                self.tree[a * w + b] += x;
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
        let mut s = 0.0;
        let mut a = i + 1;
        while a > 0 {
            let mut b = j + 1;
            while b > 0 {
                s += self.tree[a * w + b];
                b &= b - 1;
            }
            a &= a - 1;
        }
        s
    }

    /// All cell values as a dense row-major `side x side` table, in `O(side^2)`: the Fenwick
    /// array is turned into 2D prefix sums in place (`P[i] = F[i] + P[i - lowbit(i)]` along
    /// each dimension in turn).
    pub fn materialize(mut self) -> Vec<f64> {
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
    let mut fw = Fenwick2D::new(n);
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
}
