//! The exact MTPP optimum: every partition with an acyclic quotient is a chain of ideals
//! (take its blocks in a topological order of the quotient), so the generic ideal DP of
//! [`crate::ideal_dp`] with the MTPP block cost (accelerators only) is optimal.

use super::Instance;
use crate::dag::Dag;
use crate::error::CoreResult;
use crate::ideal_dp::{self, BlockCost, Costs};
use crate::ideals::Ideals;
use crate::numeric::{CompensatedSum, INF};

/// MTPP block cost kept incrementally (tensor-once counters, like `MaxLoadCost`).
pub struct MtppBlockCost<'a> {
    inst: &'a Instance,
    ncons: Vec<u32>,
}

/// The block being grown. The tensor sum `io` grows and shrinks, so it is compensated
/// ([`CompensatedSum`]: tensor costs of 1e16 next to 1 keep the 1); work and parameters only
/// grow (`pop` restores the saved values).
#[derive(Debug, Clone, Default)]
pub struct MtppState {
    in_block: Vec<bool>,
    cnt: Vec<u32>,
    work: f64,
    params: f64,
    io: CompensatedSum,
    saved: Vec<(f64, f64, CompensatedSum)>,
}

impl<'a> MtppBlockCost<'a> {
    pub fn new(inst: &'a Instance) -> Self {
        let ncons = (0..inst.num_tensors())
            .map(|t| inst.consumers(t).len() as u32)
            .collect();
        MtppBlockCost { inst, ncons }
    }

    #[inline]
    fn contrib(&self, st: &MtppState, t: usize) -> f64 {
        let crossing = if st.in_block[self.inst.t_prod[t] as usize] {
            st.cnt[t] < self.ncons[t]
        } else {
            st.cnt[t] > 0
        };
        if crossing {
            self.inst.t_cost[t]
        } else {
            0.0
        }
    }
}

impl BlockCost for MtppBlockCost<'_> {
    type State = MtppState;

    fn new_state(&self) -> MtppState {
        MtppState {
            in_block: vec![false; self.inst.n],
            cnt: vec![0; self.inst.num_tensors()],
            ..Default::default()
        }
    }

    fn push(&self, st: &mut MtppState, v: usize) {
        st.saved.push((st.work, st.params, st.io));
        st.work += self.inst.work[v];
        st.params += self.inst.params[v];
        let mut io = st.io;
        for &t in self.inst.produced(v) {
            io.add(-self.contrib(st, t as usize));
        }
        st.in_block[v] = true;
        for &t in self.inst.produced(v) {
            io.add(self.contrib(st, t as usize));
        }
        for &t in self.inst.consumed(v) {
            let t = t as usize;
            let before = self.contrib(st, t);
            st.cnt[t] += 1;
            io.add(self.contrib(st, t) - before); // (exact: one side is 0 or both equal)
        }
        st.io = io;
    }

    fn pop(&self, st: &mut MtppState, v: usize) {
        for &t in self.inst.consumed(v) {
            st.cnt[t as usize] -= 1;
        }
        st.in_block[v] = false;
        let s = st.saved.pop().expect("pop without push");
        (st.work, st.params, st.io) = s;
    }

    fn eval(&self, st: &MtppState) -> Costs {
        let lb = st.work + self.inst.memory.overflow(st.params);
        let mut cost = st.io;
        cost.add(lb);
        Costs {
            acc: cost.value().max(lb),
            cpu: INF,
            acc_lb: lb,
            cpu_lb: INF,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ExactSolution {
    pub objective: f64,
    /// Blocks in pipeline order (units).
    pub blocks: Vec<Vec<usize>>,
    pub ideals: usize,
}

/// The optimum over all partitions into at most `k` blocks with an acyclic quotient.
/// `upper`: the cost of a known partition (or `INF`), for pruning; a result above it is not
/// trustworthy (see [`ideal_dp::solve`]).
pub fn solve(
    inst: &Instance,
    k: usize,
    max_ideals: usize,
    prune: bool,
    upper: f64,
) -> CoreResult<ExactSolution> {
    let ideals = Ideals::enumerate(&inst.dag, max_ideals)?;
    let cost = MtppBlockCost::new(inst);
    let sol = ideal_dp::solve(&ideals, &cost, k, 0, prune, upper)?;
    Ok(ExactSolution {
        objective: sol.objective,
        blocks: sol.blocks.into_iter().map(|b| b.nodes).collect(),
        ideals: sol.ideals,
    })
}

/// Does the partition (unit -> block) have an acyclic quotient graph?
pub fn quotient_is_acyclic(inst: &Instance, block_of: &[usize], nblocks: usize) -> bool {
    let mut edges = Vec::new();
    for u in 0..inst.n {
        for &v in inst.dag.succs(u) {
            let (a, b) = (block_of[u], block_of[v as usize]);
            if a != b {
                edges.push((a as u32, b as u32));
            }
        }
    }
    Dag::from_edges(nblocks, &edges).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mtpp::kahn::kahn;
    use crate::mtpp::rng::Rng;
    use crate::mtpp::slicegraph::{self, ScanCosts};
    use crate::mtpp::tests_common::random_instance;
    use crate::mtpp::{Memory, OrderCtx};

    /// Every assignment of units to at most k blocks with an acyclic quotient.
    fn brute(inst: &Instance, k: usize) -> f64 {
        let n = inst.n;
        let mut best = INF;
        let mut a = vec![0usize; n];
        // restricted growth strings: set partitions
        fn rec(
            inst: &Instance,
            k: usize,
            a: &mut Vec<usize>,
            i: usize,
            used: usize,
            best: &mut f64,
        ) {
            let n = inst.n;
            if i == n {
                if !quotient_is_acyclic(inst, a, used) {
                    return;
                }
                let mut worst: f64 = 0.0;
                for b in 0..used {
                    let inb: Vec<bool> = a.iter().map(|&x| x == b).collect();
                    worst = worst.max(inst.block_cost(&inb));
                }
                *best = best.min(worst);
                return;
            }
            for b in 0..(used + 1).min(k) {
                a[i] = b;
                rec(inst, k, a, i + 1, used.max(b + 1), best);
            }
        }
        rec(inst, k, &mut a, 0, 0, &mut best);
        best
    }

    #[test]
    fn exact_equals_brute_force_and_theorem_4_3() {
        let mut rng = Rng::new(99);
        for trial in 0..120 {
            let n = 1 + trial % 7;
            let mut inst = random_instance(&mut rng, n, 0.35, trial % 3 == 0);
            if trial % 5 == 2 {
                inst.memory = Memory {
                    fast: 7.0,
                    reserved: 0.0,
                    bandwidth: None,
                };
            }
            for k in 1..=3 {
                let want = brute(&inst, k);
                for prune in [false, true] {
                    let sol = solve(&inst, k, 1 << 20, prune, INF).unwrap();
                    assert_eq!(sol.objective, want, "trial {trial} k {k} prune {prune}");
                    if want.is_finite() {
                        let tight = solve(&inst, k, 1 << 20, prune, want).unwrap();
                        assert_eq!(tight.objective, want, "trial {trial} k {k} upper");
                        let low = solve(&inst, k, 1 << 20, prune, want * 0.7).unwrap();
                        assert!(
                            low.objective > want * 0.7 || want == 0.0,
                            "trial {trial} k {k} low"
                        );
                    }
                }
                let sol = solve(&inst, k, 1 << 20, true, INF).unwrap();
                if want == INF {
                    continue;
                }
                // re-score the blocks
                let mut worst: f64 = 0.0;
                let mut block_of = vec![usize::MAX; n];
                for (b, blk) in sol.blocks.iter().enumerate() {
                    let inb: Vec<bool> = (0..n).map(|u| blk.contains(&u)).collect();
                    worst = worst.max(inst.block_cost(&inb));
                    for &u in blk {
                        block_of[u] = b;
                    }
                }
                assert_eq!(worst, want);
                assert!(quotient_is_acyclic(&inst, &block_of, sol.blocks.len()));
                // Theorem 4.3: priorities = block index (blocks in pipeline order) make
                // Kahn + SliceGraph reach the optimum
                let prio: Vec<f64> = (0..n).map(|u| block_of[u] as f64).collect();
                let ctx = OrderCtx::new(&inst, kahn(&inst, &prio));
                let s = slicegraph::solve(&ctx, &mut ScanCosts::new(&ctx), k);
                assert_eq!(s.objective, want, "theorem 4.3 trial {trial} k {k}");
                // and the simple lower bound holds
                assert!(inst.lower_bound(k) <= want);
            }
        }
    }

    /// Tensor costs spanning 1e16 and 1 (issue 10): the incremental costs keep the small
    /// terms, so the DP gets the brute-force optimum, and every block it evaluates costs what
    /// the reference says.
    #[test]
    fn wide_cost_ranges_get_the_brute_force_answer() {
        use crate::mtpp::Tensor;
        let chain: Vec<Tensor> = [0.0, 1e16, 1.0]
            .iter()
            .enumerate()
            .map(|(i, &cost)| Tensor {
                cost,
                producer: i as u32,
                consumers: vec![i as u32 + 1],
            })
            .collect();
        let inst = Instance::new(vec![1.0; 4], vec![0.0; 4], &chain, Memory::default()).unwrap();
        for (k, want) in [(1, 4.0), (2, 3.0), (3, 3.0), (4, 3.0)] {
            assert_eq!(brute(&inst, k), want);
            for prune in [false, true] {
                let sol = solve(&inst, k, 1 << 20, prune, INF).unwrap();
                assert_eq!(sol.objective, want, "k {k} prune {prune}");
            }
        }
        let mut rng = Rng::new(5);
        for trial in 0..60 {
            let mut inst = random_instance(&mut rng, 2 + trial % 6, 0.5, false);
            for (t, c) in inst.t_cost.iter_mut().enumerate() {
                if (t + trial) % 3 == 0 {
                    *c *= 1e16;
                }
            }
            // every block reached by pushing units in a topological order
            let cost = MtppBlockCost::new(&inst);
            let order = crate::mtpp::kahn::kahn(&inst, &vec![0.0; inst.n]);
            let mut st = cost.new_state();
            let mut in_block = vec![false; inst.n];
            for &u in order.iter().rev() {
                cost.push(&mut st, u);
                in_block[u] = true;
                assert_eq!(
                    cost.eval(&st).acc,
                    inst.block_cost(&in_block),
                    "trial {trial}"
                );
            }
            for k in 1..=3 {
                let want = brute(&inst, k);
                assert_eq!(solve(&inst, k, 1 << 20, true, INF).unwrap().objective, want);
            }
        }
    }
}
