//! A tabu search for heavy feasible blocks: the quick pricing of the `partition-lp` bound's
//! column generation (Python: `stagecut.mtpp.pricing.BlockLocal`). It proves nothing: it finds
//! blocks of weight at least a floor, which the master LP then takes as columns; the exact
//! search ([`super::pricing`]) or the pricing MIP proves that there are none.
//!
//! A block is a set of positions (the forced groups in a topological order) closed under the
//! groups' reachability: with two groups it holds every group on a path between them (convex
//! at the group level, hence at the node level). Its cost is its work, each tensor it splits
//! (holding the producer's group or a consumer's, not all of them) once, and its overflow; a
//! hard memory limit makes a block over it infeasible. From each start the search moves to the
//! best feasible neighbour not tabu: add a group of positive weight or one that shares a tensor
//! with the block (with the groups its closure brings), or drop a group that is not between two others. Each group
//! moved is tabu for a few moves.

use crate::cancel::{Cancel, Stop};
use crate::error::{CoreError, CoreResult};
use crate::mtpp::pricing::{BlockCosts, Bits};
use crate::mtpp::rng::Rng;

/// The most groups an add may drop to stay within `T`.
const REPAIR: usize = 3;

/// The local search at a fixed `T`.
#[derive(Debug)]
pub struct BlockLocal {
    pub c: BlockCosts,
    /// Per position: the positions it reaches and that reach it (itself included).
    pub desc: Vec<Bits>,
    pub anc: Vec<Bits>,
    /// Derived: per position, the producers whose tensor it touches; per producer, its groups.
    touch: Vec<Vec<usize>>,
    total: Vec<u32>,
}

/// A block being moved: its positions, counts per producer of its groups held, and sums.
#[derive(Clone)]
struct Block {
    inside: Bits,
    count: Vec<u32>,
    work: f64,
    params: f64,
    io: f64,
    weight: f64,
}

impl BlockLocal {
    pub fn new(c: BlockCosts, desc: Vec<Bits>, anc: Vec<Bits>) -> CoreResult<BlockLocal> {
        c.check()?;
        let m = c.m();
        if desc.len() != m || anc.len() != m || desc.iter().chain(&anc).any(|b| b.words() != m.div_ceil(64)) {
            return Err(CoreError::InvalidInput("block local search: reachability of the wrong shape".into()));
        }
        let mut touch = vec![Vec::new(); m];
        let mut total = Vec::with_capacity(c.pcomm.len());
        for (r, cs) in c.cons.iter().enumerate() {
            touch[c.ppos[r]].push(r);
            for &h in cs {
                touch[h].push(r);
            }
            total.push(1 + cs.len() as u32);
        }
        Ok(BlockLocal { c, desc, anc, touch, total })
    }

    fn m(&self) -> usize {
        self.c.m()
    }

    fn cost(&self, b: &Block) -> f64 {
        if !self.c.fits(b.params) {
            return f64::INFINITY;
        }
        b.work + b.io + self.c.over(b.params)
    }

    fn empty(&self) -> Block {
        Block {
            inside: Bits::zeros(self.m()),
            count: vec![0; self.c.pcomm.len()],
            work: 0.0,
            params: 0.0,
            io: 0.0,
            weight: 0.0,
        }
    }

    fn paid(&self, r: usize, c: u32) -> f64 {
        if c > 0 && c < self.total[r] {
            self.c.pcomm[r]
        } else {
            0.0
        }
    }

    fn toggle(&self, b: &mut Block, g: usize, pv: &[f64]) {
        let add = !b.inside.get(g);
        let s = if add { 1.0 } else { -1.0 };
        for &r in &self.touch[g] {
            let old = self.paid(r, b.count[r]);
            if add {
                b.count[r] += 1;
            } else {
                b.count[r] -= 1;
            }
            b.io += self.paid(r, b.count[r]) - old;
        }
        if add {
            b.inside.set(g);
        } else {
            b.inside.clear(g);
        }
        b.work += s * self.c.work[g];
        b.params += s * self.c.params[g];
        b.weight += s * pv[g];
    }

    /// The groups the closure of `b` with `g` adds (`g` included).
    fn closure_adds(&self, b: &Block, d: &Bits, a: &Bits, g: usize) -> Vec<usize> {
        let mut dd = d.clone();
        dd.or_with(&self.desc[g]);
        let mut aa = a.clone();
        aa.or_with(&self.anc[g]);
        (0..self.m()).filter(|&h| dd.get(h) && aa.get(h) && !b.inside.get(h)).collect()
    }

    fn reach(&self, b: &Block) -> (Bits, Bits) {
        let (mut d, mut a) = (Bits::zeros(self.m()), Bits::zeros(self.m()));
        for g in b.inside.ones() {
            d.or_with(&self.desc[g]);
            a.or_with(&self.anc[g]);
        }
        (d, a)
    }

    /// Whether `g` can leave `b` with the block staying convex and nonempty.
    fn droppable(&self, b: &Block, g: usize) -> bool {
        if !b.inside.get(g) || b.inside.count() <= 1 {
            return false;
        }
        let mut above = self.anc[g].clone();
        above.clear(g);
        let mut below = self.desc[g].clone();
        below.clear(g);
        !(above.meets(&b.inside) && below.meets(&b.inside))
    }

    /// The group of `b` (not in `keep`) whose drop loses least weight per unit of cost saved.
    fn best_drop(&self, b: &Block, keep: &[usize], pv: &[f64]) -> Option<usize> {
        let base = self.cost(b);
        let mut best: Option<(f64, usize)> = None;
        for g in b.inside.ones() {
            if keep.contains(&g) || !self.droppable(b, g) {
                continue;
            }
            let mut nb = b.clone();
            self.toggle(&mut nb, g, pv);
            let saved = base - self.cost(&nb);
            if saved <= 0.0 {
                continue;
            }
            let loss = (b.weight - nb.weight) / saved;
            if best.is_none_or(|(l, _)| loss < l) {
                best = Some((loss, g));
            }
        }
        best.map(|(_, g)| g)
    }

    /// Blocks of weight at least `floor` (at most `want`, the heaviest first, as positions)
    /// found from each of `starts` in `moves` moves, tabu for `tenure` moves; stopped by
    /// `cancel`'s deadline with what it found (an interrupt is an error).
    #[allow(clippy::too_many_arguments)]
    pub fn search(&self, pv: &[f64], starts: &[usize], floor: f64, moves: usize, tenure: usize, want: usize,
                  seed: u64, cancel: &Cancel) -> CoreResult<Vec<(f64, Vec<usize>)>> {
        let m = self.m();
        if pv.len() != m || pv.iter().any(|x| !x.is_finite()) || floor.is_nan() {
            return Err(CoreError::InvalidInput("block local search: bad weights or floor".into()));
        }
        if starts.iter().any(|&g| g >= m) {
            return Err(CoreError::InvalidInput("block local search: a start out of range".into()));
        }
        let mut rng = Rng::new(seed);
        let mut found: Vec<(f64, Bits)> = Vec::new();
        let mut ticker = cancel.ticker(16);
        let mut positive = Bits::zeros(m);
        for (g, &p) in pv.iter().enumerate() {
            if p > 0.0 {
                positive.set(g);
            }
        }
        'starts: for &g0 in starts {
            let mut b = self.empty();
            let (d0, a0) = (Bits::zeros(m), Bits::zeros(m));
            for h in self.closure_adds(&b, &d0, &a0, g0) {
                self.toggle(&mut b, h, pv);
            }
            if self.cost(&b) > self.c.t {
                continue;
            }
            if b.weight >= floor && !found.iter().any(|(_, x)| *x == b.inside) {
                found.push((b.weight, b.inside.clone()));
            }
            let mut tabu = vec![0usize; m];
            for step in 1..=moves {
                match ticker.tick() {
                    Ok(()) => {}
                    Err(Stop::Deadline) => break 'starts,
                    Err(Stop::Interrupted) => return Err(CoreError::Interrupted),
                }
                let (d, a) = self.reach(&b);
                // candidates: groups of positive weight or sharing a tensor with the block (adds),
                // the block's own (drops)
                let mut near = positive.clone();
                for g in b.inside.ones() {
                    for &r in &self.touch[g] {
                        near.set(self.c.ppos[r]);
                        for &h in &self.c.cons[r] {
                            near.set(h);
                        }
                    }
                }
                let mut best: Option<(f64, f64, Vec<usize>)> = None;
                for g in near.ones() {
                    let drop = b.inside.get(g);
                    if tabu[g] >= step {
                        continue;
                    }
                    let changed = if drop {
                        if !self.droppable(&b, g) {
                            continue;
                        }
                        vec![g]
                    } else {
                        self.closure_adds(&b, &d, &a, g)
                    };
                    let mut nb = b.clone();
                    for &h in &changed {
                        self.toggle(&mut nb, h, pv);
                    }
                    let mut changed = changed;
                    if !drop && self.cost(&nb) > self.c.t {
                        // repair: drop the groups that lose least weight per cost saved
                        for _ in 0..REPAIR {
                            let Some(h) = self.best_drop(&nb, &changed, pv) else { break };
                            self.toggle(&mut nb, h, pv);
                            changed.push(h);
                            if self.cost(&nb) <= self.c.t {
                                break;
                            }
                        }
                    }
                    let c = self.cost(&nb);
                    if c > self.c.t {
                        continue;
                    }
                    // the heaviest, then the cheapest; ties broken at random
                    let key = nb.weight + 1e-12 * rng.unit();
                    if best.as_ref().is_none_or(|(w, bc, _)| key > *w || (key == *w && c < *bc)) {
                        best = Some((key, c, changed));
                    }
                }
                let Some((_, _, changed)) = best else { break };
                for &h in &changed {
                    self.toggle(&mut b, h, pv);
                    tabu[h] = step + tenure;
                }
                if b.weight >= floor && !found.iter().any(|(_, x)| *x == b.inside) {
                    found.push((b.weight, b.inside.clone()));
                }
            }
        }
        found.sort_by(|x, y| y.0.total_cmp(&x.0));
        found.truncate(want);
        Ok(found.into_iter().map(|(w, s)| (w, s.ones().collect())).collect())
    }
}
