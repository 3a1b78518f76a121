//! Bounds that let the ideal DP ([`crate::ideal_dp`]) skip most of its work when an upper
//! bound `U` on the optimum is known, keeping the answer exact:
//!
//! * [`CellFilter`]: a DP cell `(c CPUs, f accelerators)` of ideal `I` can lie on the path of a
//!   solution of cost `<= U` only if the nodes of `I` fit on `c` CPU and `f` accelerator blocks
//!   and the nodes outside `I` fit on the devices left, each block costing `<= U`. With
//!   per-node additive lower bounds ([`BlockCost::node_lb`]) that is a sum test per cell. On a
//!   chain only a few ideals around each `j * total / k` pass it, so the DP visits `O(k)`
//!   ideals' descents instead of `n`.
//! * [`greedy_upper`]: a split along the topological order (blocks of consecutive ranks, taken
//!   from the end, each as long as it fits a target; the target bisected), so the DP has a
//!   bound `U` even when the caller knows none.
//!
//! [`solve_bounded`] combines them: the DP with `min(caller's bound, greedy bound)`, run again
//! with the caller's bound alone in the (unexpected) case that the greedy bound was too low.

use crate::cancel::Cancel;
use crate::error::CoreResult;
use crate::ideal_dp::{solve_with, BlockCost, DpSolution};
use crate::ideals::Ideals;
use crate::numeric::INF;

/// Per ideal, the sums of the node lower bounds on an accelerator, on a CPU and on the cheaper
/// of the two (finite parts, and the number of infinite terms), for the cell test.
#[derive(Debug, Clone)]
pub struct CellFilter {
    sums: Vec<[f64; 3]>,
    infs: Vec<[u32; 3]>,
    total: [f64; 3],
    total_inf: [u32; 3],
    n: usize,
    accelerators: usize,
    cpus: usize,
    upper: f64,
    /// Slack for the rounding of the sums (a larger slack only keeps more cells).
    tol: f64,
}

/// Bytes per ideal of a [`CellFilter`].
pub const FILTER_BYTES_PER_IDEAL: usize = 36;

impl CellFilter {
    /// The filter for a DP with these (capped) device counts and bound `upper` (finite).
    pub fn new<C: BlockCost>(
        ideals: &Ideals,
        cost: &C,
        accelerators: usize,
        cpus: usize,
        upper: f64,
    ) -> CellFilter {
        let m = ideals.len();
        let mut sums = vec![[0.0; 3]; m];
        let mut infs = vec![[0u32; 3]; m];
        for id in 1..m {
            let (p, v) = (ideals.parent(id), ideals.top(id));
            let (p, v) = (p.expect("non-empty"), v.expect("non-empty"));
            let (a, c) = cost.node_lb(v);
            let (mut s, mut k) = (sums[p], infs[p]);
            for (i, x) in [a, c, a.min(c)].into_iter().enumerate() {
                if x.is_finite() {
                    s[i] += x;
                } else {
                    k[i] += 1;
                }
            }
            sums[id] = s;
            infs[id] = k;
        }
        let full = ideals.full();
        let (total, total_inf) = (sums[full], infs[full]);
        let n = ideals.num_nodes();
        let scale = total.iter().fold(0.0f64, |a, &b| a.max(b.abs()))
            + (accelerators + cpus + 1) as f64 * upper.abs();
        let tol = (1e-9 + 8.0 * n as f64 * f64::EPSILON) * scale;
        CellFilter {
            sums,
            infs,
            total,
            total_inf,
            n,
            accelerators,
            cpus,
            upper,
            tol,
        }
    }

    /// Can `card` nodes with lower-bound sums `s` (infinite terms `k`) fit on `c` CPU blocks
    /// and `f` accelerator blocks of cost `<= upper` each?
    fn covers(&self, s: [f64; 3], k: [u32; 3], card: usize, c: usize, f: usize) -> bool {
        if card == 0 {
            return true;
        }
        let (i, devices) = match (c, f) {
            (0, 0) => return false,
            (0, f) => (0, f),
            (c, 0) => (1, c),
            (c, f) => (2, c + f),
        };
        k[i] == 0 && s[i] <= devices as f64 * self.upper + self.tol
    }

    /// Whether cell `(c, f)` of ideal `id` can be on the path of a solution of cost `<= upper`.
    pub fn useful(&self, ideals: &Ideals, id: usize, c: usize, f: usize) -> bool {
        let card = ideals.cardinality(id);
        let (s, k) = (self.sums[id], self.infs[id]);
        let rest = [
            self.total[0] - s[0],
            self.total[1] - s[1],
            self.total[2] - s[2],
        ];
        let rest_k = [
            self.total_inf[0] - k[0],
            self.total_inf[1] - k[1],
            self.total_inf[2] - k[2],
        ];
        self.covers(s, k, card, c, f)
            && self.covers(
                rest,
                rest_k,
                self.n - card,
                self.cpus - c,
                self.accelerators - f,
            )
    }
}

/// Place nodes `order[..]` from the end in blocks of consecutive ranks, each as long as it fits
/// `target` on a device kind still free (the longer of the two kinds' blocks, an accelerator on
/// a tie); a block stops growing once both lower bounds pass `target` or it has grown well past
/// its last fitting length. The worst block cost, or `None` if the devices run out.
fn greedy<C: BlockCost>(
    cost: &C,
    st: &mut C::State,
    order: &[usize],
    accelerators: usize,
    cpus: usize,
    target: f64,
) -> Option<f64> {
    let (mut fa, mut fc) = (accelerators, cpus);
    let mut end = order.len();
    let mut worst = 0.0f64;
    while end > 0 {
        if fa == 0 && fc == 0 {
            return None;
        }
        let (mut best_a, mut cost_a, mut best_c, mut cost_c) = (0, INF, 0, INF);
        let mut len = 0;
        while len < end {
            cost.push(st, order[end - 1 - len]);
            len += 1;
            let cs = cost.eval(st);
            if fa > 0 && cs.acc <= target && cs.acc < INF {
                (best_a, cost_a) = (len, cs.acc);
            }
            if fc > 0 && cs.cpu <= target && cs.cpu < INF {
                (best_c, cost_c) = (len, cs.cpu);
            }
            let best = best_a.max(best_c);
            let acc_done = fa == 0 || cs.acc_lb > target;
            let cpu_done = fc == 0 || cs.cpu_lb > target;
            if (acc_done && cpu_done) || len - best > best.max(16) {
                break;
            }
        }
        for i in (0..len).rev() {
            cost.pop(st, order[end - 1 - i]);
        }
        let (take, c) = if best_a > 0 && best_a >= best_c {
            fa -= 1;
            (best_a, cost_a)
        } else if best_c > 0 {
            fc -= 1;
            (best_c, cost_c)
        } else {
            return None;
        };
        end -= take;
        worst = worst.max(c);
    }
    Some(worst)
}

/// The cost of a split of the DAG into blocks of consecutive topological ranks (so a chain of
/// prefix ideals: a split the DP also considers, with the very same block costs), the target
/// bisected to a relative `1e-4`; `INF` when none is found. `O(n)` pushes per probe.
pub fn greedy_upper<C: BlockCost>(
    ideals: &Ideals,
    cost: &C,
    accelerators: usize,
    cpus: usize,
    cancel: &Cancel,
) -> CoreResult<f64> {
    let n = ideals.num_nodes();
    let (accelerators, cpus) = (accelerators.min(n), cpus.min(n));
    let mut order = vec![0usize; n];
    for v in 0..n {
        order[ideals.rank(v) as usize] = v;
    }
    let mut st = cost.new_state();
    cancel.check()?;
    let Some(mut hi) = greedy(cost, &mut st, &order, accelerators, cpus, INF) else {
        return Ok(INF);
    };
    let mut lo = 0.0f64;
    for _ in 0..60 {
        if hi - lo <= 1e-4 * hi {
            break;
        }
        cancel.check()?;
        let mid = 0.5 * (lo + hi);
        match greedy(cost, &mut st, &order, accelerators, cpus, mid) {
            Some(v) => hi = v.min(mid),
            None => lo = mid,
        }
    }
    Ok(hi)
}

/// The DP with pruning, its bound the smaller of `upper` (the caller's, `INF` for none) and
/// [`greedy_upper`] (slightly inflated against rounding). Should the result pass the greedy
/// bound (it cannot in exact arithmetic: the greedy split is among the DP's), the DP runs again
/// with `upper` alone; the pairs of both runs are counted. As with [`solve_with`], a result
/// above `upper` means `upper` was below the optimum.
pub fn solve_bounded<C: BlockCost>(
    ideals: &Ideals,
    cost: &C,
    accelerators: usize,
    cpus: usize,
    upper: f64,
    cancel: &Cancel,
) -> CoreResult<DpSolution> {
    let g = greedy_upper(ideals, cost, accelerators, cpus, cancel)?;
    let g = g + g.abs() * 1e-9 + f64::MIN_POSITIVE;
    if g >= upper {
        return solve_with(ideals, cost, accelerators, cpus, true, upper, cancel);
    }
    let sol = solve_with(ideals, cost, accelerators, cpus, true, g, cancel)?;
    if sol.objective <= g {
        return Ok(sol);
    }
    let mut again = solve_with(ideals, cost, accelerators, cpus, true, upper, cancel)?;
    again.pairs += sol.pairs;
    Ok(again)
}
