//! The exact pricing of the `partition-lp` bound: a branch and bound over feasible blocks
//! (Python: `stagecut.mtpp.pricing.BlockSearch`, whose module docs state the problem, the order
//! of the decisions and the bound; this is its search loop).
//!
//! The groups are decided in a topological order of the group graph (*positions*), in or out.
//! A branch carries the positions taken, the nodes taken, the positions barred by convexity,
//! the producers whose tensor is already paid and those decided in, and the cost, weight and
//! parameters so far. The bound of a branch is the LP relaxation of a knapsack over the
//! undecided positions it may still take (`bound`); the search is depth first, the child of
//! larger bound first.

use crate::cancel::{Cancel, Stop};
use crate::error::{CoreError, CoreResult};

/// A fixed-size bitset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bits(Vec<u64>);

impl Bits {
    pub fn zeros(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }
    /// From 64-bit words (least significant first), padded or checked to `n` bits.
    pub fn from_words(words: &[u64], n: usize) -> CoreResult<Bits> {
        let mut b = Bits::zeros(n);
        for (j, &w) in words.iter().enumerate() {
            if w == 0 {
                continue;
            }
            if j >= b.0.len() || (j == b.0.len() - 1 && !n.is_multiple_of(64) && w >> (n % 64) != 0) {
                return Err(CoreError::InvalidInput(format!("a bitset has a bit past {n}")));
            }
            b.0[j] = w;
        }
        Ok(b)
    }
    pub fn from_indices(ix: &[usize], n: usize) -> CoreResult<Bits> {
        let mut b = Bits::zeros(n);
        for &i in ix {
            if i >= n {
                return Err(CoreError::InvalidInput(format!("index {i} out of range 0..{n}")));
            }
            b.set(i);
        }
        Ok(b)
    }
    #[inline]
    pub fn get(&self, i: usize) -> bool {
        self.0[i >> 6] >> (i & 63) & 1 == 1
    }
    #[inline]
    pub fn set(&mut self, i: usize) {
        self.0[i >> 6] |= 1 << (i & 63);
    }
    #[inline]
    pub fn clear(&mut self, i: usize) {
        self.0[i >> 6] &= !(1 << (i & 63));
    }
    pub fn words(&self) -> usize {
        self.0.len()
    }
    pub fn count(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }
    /// The indices of the bits set, ascending.
    pub fn ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(j, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(64 * j + b)
            })
        })
    }
    #[inline]
    pub fn or_with(&mut self, o: &Bits) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a |= b;
        }
    }
    #[inline]
    pub fn meets(&self, o: &Bits) -> bool {
        self.0.iter().zip(&o.0).any(|(a, b)| a & b != 0)
    }
    #[inline]
    fn any(&self) -> bool {
        self.0.iter().any(|&w| w != 0)
    }
}

/// What both pricings need at a fixed `T`: positions are the groups in topological order,
/// producers the nodes whose tensor reaches another group; a block costs its work, each tensor
/// it splits once, and its overflow (or is infeasible past a hard memory limit).
#[derive(Debug, Clone)]
pub struct BlockCosts {
    pub t: f64,
    /// Work and parameters of each position.
    pub work: Vec<f64>,
    pub params: Vec<f64>,
    /// Per producer: its cost, its position, its consumers' other positions (distinct, ascending).
    pub pcomm: Vec<f64>,
    pub ppos: Vec<usize>,
    pub cons: Vec<Vec<usize>>,
    /// Memory: a hard limit (`hard`), or an overflow of `slope` per unit past `limit`.
    pub hard: bool,
    pub slope: f64,
    pub limit: f64,
}

impl BlockCosts {
    /// Check the arrays' shapes and ranges.
    pub fn check(&self) -> CoreResult<()> {
        let m = self.work.len();
        let bad = |what: &str| Err(CoreError::InvalidInput(format!("block pricing: {what}")));
        if self.params.len() != m {
            return bad("per-position arrays of different lengths");
        }
        if self.ppos.len() != self.pcomm.len() || self.cons.len() != self.pcomm.len() {
            return bad("per-producer arrays of different lengths");
        }
        if self.t.is_nan() {
            return bad("T is NaN");
        }
        if self.ppos.iter().chain(self.cons.iter().flatten()).any(|&p| p >= m) {
            return bad("a position out of range");
        }
        let odd = |(cs, p): (&Vec<usize>, &usize)| {
            cs.is_empty() || cs.windows(2).any(|w| w[0] >= w[1]) || cs.contains(p)
        };
        if self.cons.iter().zip(&self.ppos).any(odd) {
            return bad("a producer's consumer positions not distinct, ascending and other than its own");
        }
        Ok(())
    }

    pub fn m(&self) -> usize {
        self.work.len()
    }

    /// The overflow of a block holding `params`.
    pub fn over(&self, params: f64) -> f64 {
        let x = params - self.limit;
        if x > 0.0 {
            x * self.slope
        } else {
            0.0
        }
    }

    /// Whether a block holding `params` is within a hard memory limit.
    pub fn fits(&self, params: f64) -> bool {
        !(self.hard && params > self.limit * (1.0 + 1e-12))
    }
}

/// The branch and bound at a fixed `T`.
#[derive(Debug)]
pub struct BlockSearch {
    pub c: BlockCosts,
    /// The nodes of each position (node bitsets).
    pub gmask: Vec<Bits>,
    /// Per position, per node of it: (its ancestors, the positions of its descendants' groups).
    pub rules: Vec<Vec<(Bits, Bits)>>,
    /// Nodes (the width of the node bitsets).
    pub nodes: usize,
    /// Derived: per position, the producers it consumes from and those it holds;
    /// `left[r * (m + 1) + i]`, the consumer positions of `r` at `i` or after; the parameters
    /// of the positions from `i` on.
    incoming: Vec<Vec<usize>>,
    out_of: Vec<Vec<usize>>,
    left: Vec<u32>,
    params_after: Vec<f64>,
}

/// The answer of [`BlockSearch::solve`]: the bound `M`, the positions of the best block found
/// (or of the first above the floor), whether the search ran to its end, and its node count.
#[derive(Debug, Clone, PartialEq)]
pub struct Priced {
    pub upper: f64,
    pub inside: Vec<usize>,
    pub solved: bool,
    pub count: u64,
}

struct State {
    i: usize,
    inside: Vec<usize>,
    imask: Bits,
    barred: Bits,
    paid: Bits,
    pin: Bits,
    cost: f64,
    weight: f64,
    params: f64,
    bound: f64,
}

/// Nodes of the search between two polls of the clock.
const CHECK: u32 = 256;

impl BlockSearch {
    /// Check the data and derive the tables the search uses.
    pub fn new(c: BlockCosts, gmask: Vec<Bits>, rules: Vec<Vec<(Bits, Bits)>>, nodes: usize) -> CoreResult<BlockSearch> {
        c.check()?;
        let (m, np) = (c.m(), c.pcomm.len());
        let bad = |what: &str| Err(CoreError::InvalidInput(format!("block search: {what}")));
        if gmask.len() != m || rules.len() != m {
            return bad("per-position arrays of different lengths");
        }
        let (words_n, words_m) = (nodes.div_ceil(64), m.div_ceil(64));
        for (g, rules) in gmask.iter().zip(&rules) {
            if g.0.len() != words_n || rules.iter().any(|(a, b)| a.0.len() != words_n || b.0.len() != words_m) {
                return bad("a bitset of the wrong width");
            }
        }
        let mut incoming = vec![Vec::new(); m];
        let mut out_of = vec![Vec::new(); m];
        let mut left = vec![0u32; np * (m + 1)];
        for (r, cs) in c.cons.iter().enumerate() {
            out_of[c.ppos[r]].push(r);
            for &h in cs {
                incoming[h].push(r);
                for x in &mut left[r * (m + 1)..=r * (m + 1) + h] {
                    *x += 1;
                }
            }
        }
        let mut params_after = vec![0.0; m + 1];
        for i in (0..m).rev() {
            params_after[i] = params_after[i + 1] + c.params[i];
        }
        Ok(BlockSearch { c, gmask, rules, nodes, incoming, out_of, left, params_after })
    }

    fn m(&self) -> usize {
        self.c.m()
    }

    #[inline]
    fn left(&self, r: usize, i: usize) -> u32 {
        self.left[r * (self.m() + 1) + i]
    }

    /// An upper bound on the weight of every block completing a branch at position `i`
    /// (`-inf`: none can); the knapsack LP of the Python module docs.
    #[allow(clippy::too_many_arguments)]
    fn bound(&self, i: usize, pv: &[f64], barred: &Bits, paid: &Bits, pin: &Bits, cost: f64, weight: f64,
             params: f64) -> f64 {
        let m = self.m();
        if i >= m {
            return weight;
        }
        let mut a: Vec<f64> = self.c.work[i..].to_vec();
        if self.c.slope != 0.0 && params + self.params_after[i] > self.c.limit && params >= self.c.limit {
            for (x, p) in a.iter_mut().zip(&self.c.params[i..]) {
                *x += self.c.slope * p;
            }
        }
        let mut budget = self.c.t - cost;
        for r in 0..self.c.pcomm.len() {
            let l = self.left(r, i);
            if l == 0 || paid.get(r) || self.c.ppos[r] >= i {
                continue;
            }
            let share = self.c.pcomm[r] / l as f64;
            let signed = if pin.get(r) { -share } else { share };
            for &h in self.c.cons[r].iter().filter(|&&h| h >= i) {
                a[h - i] += signed;
            }
            if pin.get(r) {
                budget -= self.c.pcomm[r];
            }
        }
        let mut items: Vec<(f64, f64)> = Vec::with_capacity(m - i);
        let mut give_back = 0.0;
        for (j, &aj) in a.iter().enumerate() {
            let pos = i + j;
            let p = pv[pos];
            if barred.get(pos) || !self.c.fits(params + self.c.params[pos]) || !(p > 0.0 || aj < 0.0) {
                continue;
            }
            if aj < 0.0 {
                give_back -= aj;
            }
            items.push((p, aj));
        }
        if items.is_empty() {
            return if budget >= 0.0 { weight } else { f64::NEG_INFINITY };
        }
        if budget + give_back < 0.0 {
            return f64::NEG_INFINITY;
        }
        let mut best = f64::INFINITY;
        let lams = std::iter::once(0.0).chain(
            items.iter().filter(|(_, a)| *a != 0.0).map(|(p, a)| p / a).filter(|l| *l > 0.0),
        );
        for lam in lams {
            let v = lam * budget + items.iter().map(|(p, a)| (p - lam * a).max(0.0)).sum::<f64>();
            best = best.min(v);
        }
        weight + best
    }

    /// The search (Python: `BlockSearch.solve`): with `floor`, the first block of weight at
    /// least `floor` or a proof that there is none; without, the heaviest block. Stopped by
    /// `cancel`'s deadline or after `max_nodes` nodes, the bound is the largest of the
    /// branches left. An interrupt is an error.
    pub fn solve(&self, pv: &[f64], floor: Option<f64>, max_nodes: Option<u64>, cancel: &Cancel)
                 -> CoreResult<Priced> {
        let m = self.m();
        if pv.len() != m {
            return Err(CoreError::InvalidInput(format!("block search: {} weights for {m} groups", pv.len())));
        }
        if pv.iter().any(|x| !x.is_finite()) || floor.is_some_and(|f| f.is_nan()) {
            return Err(CoreError::InvalidInput("block search: a weight or the floor is not finite".into()));
        }
        let t = self.c.t;
        let scale = pv.iter().map(|x| x.abs()).sum::<f64>().max(1.0);
        let tol = 1e-9 * scale;
        let target = floor.unwrap_or(f64::NEG_INFINITY);
        let (mut best, mut best_in) = (f64::NEG_INFINITY, Vec::new());
        let mut cut_by_floor = false;
        let mut stopped = false;
        let mut open: Vec<f64> = Vec::new();
        let np = self.c.pcomm.len();
        let zeros_p = Bits::zeros(np);
        let root_bar = Bits::zeros(m);
        let root = self.bound(0, pv, &root_bar, &zeros_p, &zeros_p, 0.0, 0.0, 0.0);
        let mut stack = vec![State {
            i: 0, inside: Vec::new(), imask: Bits::zeros(self.nodes), barred: root_bar, paid: zeros_p.clone(),
            pin: zeros_p, cost: 0.0, weight: 0.0, params: 0.0, bound: root,
        }];
        let mut ticker = cancel.ticker(CHECK);
        let mut count: u64 = 0;
        while let Some(s) = stack.pop() {
            if s.bound == f64::NEG_INFINITY {
                continue;
            }
            if s.bound < best.max(target) - tol {
                if best < target {
                    cut_by_floor = true;
                }
                continue;
            }
            count += 1;
            let over_nodes = max_nodes.is_some_and(|x| count > x);
            let late = match ticker.tick() {
                Ok(()) => false,
                Err(Stop::Deadline) => true,
                Err(Stop::Interrupted) => return Err(CoreError::Interrupted),
            };
            if over_nodes || late {
                stopped = true;
                open = std::iter::once(s.bound).chain(stack.iter().map(|x| x.bound)).collect();
                break;
            }
            // this block closed here (every later group out): pays the tensors still open
            if !s.inside.is_empty() {
                let stop_cost = s.cost
                    + (0..np)
                        .filter(|&r| s.pin.get(r) && !s.paid.get(r) && self.left(r, s.i) > 0)
                        .map(|r| self.c.pcomm[r])
                        .sum::<f64>();
                if stop_cost <= t && s.weight > best {
                    best = s.weight;
                    best_in = s.inside.clone();
                    if floor.is_some() && best >= target - tol {
                        open = std::iter::once(s.bound).chain(stack.iter().map(|x| x.bound)).collect();
                        break;
                    }
                }
            }
            if s.i == m {
                continue;
            }
            let i = s.i;
            let mut children: Vec<State> = Vec::with_capacity(2);
            // out: tensors of in-producers feeding it are paid; nodes reached from the block bar what they reach
            let feeds = &self.incoming[i];
            let mut paid_o = s.paid.clone();
            let mut cost_o = s.cost;
            for &r in feeds {
                if s.pin.get(r) && !s.paid.get(r) {
                    paid_o.set(r);
                    cost_o += self.c.pcomm[r];
                }
            }
            let mut bar_o = s.barred.clone();
            if s.imask.any() {
                for (anc, below) in &self.rules[i] {
                    if anc.meets(&s.imask) {
                        bar_o.or_with(below);
                    }
                }
            }
            if cost_o <= t {
                let b = self.bound(i + 1, pv, &bar_o, &paid_o, &s.pin, cost_o, s.weight, s.params);
                children.push(State {
                    i: i + 1, inside: s.inside.clone(), imask: s.imask.clone(), barred: bar_o, paid: paid_o,
                    pin: s.pin.clone(), cost: cost_o, weight: s.weight, params: s.params, bound: b,
                });
            }
            // in: not barred, tensors of out-producers feeding it paid, its own work and parameters
            let new_params = s.params + self.c.params[i];
            if !s.barred.get(i) && self.c.fits(new_params) {
                let mut paid_i = s.paid.clone();
                let mut cost_i = s.cost + self.c.work[i];
                for &r in feeds {
                    if !s.pin.get(r) && !s.paid.get(r) {
                        paid_i.set(r);
                        cost_i += self.c.pcomm[r];
                    }
                }
                if self.c.slope != 0.0 {
                    cost_i += self.c.over(new_params) - self.c.over(s.params);
                }
                let mut pin_i = s.pin.clone();
                for &r in &self.out_of[i] {
                    pin_i.set(r);
                }
                if cost_i <= t {
                    let w_i = s.weight + pv[i];
                    let b = self.bound(i + 1, pv, &s.barred, &paid_i, &pin_i, cost_i, w_i, new_params);
                    let mut inside = s.inside.clone();
                    inside.push(i);
                    let mut imask = s.imask.clone();
                    imask.or_with(&self.gmask[i]);
                    children.push(State {
                        i: i + 1, inside, imask, barred: s.barred.clone(), paid: paid_i, pin: pin_i,
                        cost: cost_i, weight: w_i, params: new_params, bound: b,
                    });
                }
            }
            // the larger bound popped first (on a tie, the child taking the group)
            children.sort_by(|x, y| x.bound.total_cmp(&y.bound));
            stack.extend(children);
        }
        let top = |best: f64, open: &[f64]| open.iter().fold(best, |a, &b| a.max(b));
        if stopped {
            let mut up = top(best, &open);
            if cut_by_floor {
                up = up.max(target);
            }
            let inside = if floor.is_none() { best_in } else { Vec::new() };
            return Ok(Priced { upper: up, inside, solved: false, count });
        }
        if floor.is_some() {
            if best >= target - tol {
                return Ok(Priced { upper: top(best, &open), inside: best_in, solved: false, count });
            }
            return Ok(Priced { upper: f64::NEG_INFINITY, inside: Vec::new(), solved: true, count });
        }
        Ok(Priced { upper: best, inside: best_in, solved: true, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain of `n` groups of work `w`, each passing a tensor of cost `c` to the next.
    fn chain(n: usize, w: f64, c: f64, t: f64) -> BlockSearch {
        let bits = |i: usize| Bits::from_indices(&[i], n).unwrap();
        let below = |i: usize| Bits::from_indices(&(i..n).collect::<Vec<_>>(), n).unwrap();
        let above = |i: usize| Bits::from_indices(&(0..=i).collect::<Vec<_>>(), n).unwrap();
        let c = BlockCosts {
            t, work: vec![w; n], params: vec![0.0; n], pcomm: vec![c; n - 1], ppos: (0..n - 1).collect(),
            cons: (1..n).map(|h| vec![h]).collect(), hard: false, slope: 0.0, limit: f64::INFINITY,
        };
        BlockSearch::new(c, (0..n).map(bits).collect(), (0..n).map(|i| vec![(above(i), below(i))]).collect(), n)
        .unwrap()
    }

    #[test]
    fn the_heaviest_block_of_a_chain_is_the_longest_run_that_fits() {
        // work 4, tensors 1: a run of j inner groups costs 4 j + 2; T = 14 holds 3 inner ones
        let s = chain(6, 4.0, 1.0, 14.0);
        let r = s.solve(&[1.0; 6], None, None, &Cancel::never()).unwrap();
        assert!(r.solved);
        assert_eq!(r.upper, 3.0);
        assert_eq!(r.inside.len(), 3);
        // an end group pays one tensor: 3 groups from the start cost 13; 4 would cost 17
        let r = s.solve(&[2.0, 1.0, 1.0, 1.0, 1.0, 1.0], None, None, &Cancel::never()).unwrap();
        assert_eq!((r.upper, r.inside.clone()), (4.0, vec![0, 1, 2]));
        // a floor above the heaviest block: proven empty
        let r = s.solve(&[1.0; 6], Some(3.5), None, &Cancel::never()).unwrap();
        assert_eq!((r.upper, r.solved), (f64::NEG_INFINITY, true));
    }

    #[test]
    fn a_stopped_search_bounds_what_it_did_not_see() {
        let s = chain(8, 1.0, 0.5, 5.0);
        let full = s.solve(&[1.0; 8], None, None, &Cancel::never()).unwrap();
        let cut = s.solve(&[1.0; 8], None, Some(2), &Cancel::never()).unwrap();
        assert!(!cut.solved && cut.upper >= full.upper);
        let late = s.solve(&[1.0; 8], None, None, &Cancel::with_limit(Some(std::time::Duration::ZERO))).unwrap();
        assert!(!late.solved && late.upper >= full.upper);
        let c = Cancel::never();
        c.interrupt();
        assert_eq!(s.solve(&[1.0; 8], None, None, &c), Err(CoreError::Interrupted));
    }
}
