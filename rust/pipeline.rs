//! Exact pipeline DP over ideals (Tarnawski et al., NeurIPS 2020, Section 5.1.1).
//!
//! `dp[c][f][I]` is the least possible max load when the nodes of ideal `I` are split into
//! contiguous blocks on at most `c` CPUs and `f` accelerators. A block is `I \ J` for a
//! sub-ideal `J` of `I`; the recurrence takes
//! `min over J of max(dp[c-1][f][J], cpu_cost(I \ J))` and likewise for accelerators, plus
//! "leave a device unused". The block cost is abstract ([`BlockCost`]); it is kept
//! incrementally while the sub-ideals of `I` are visited by canonical descent (see
//! [`crate::ideals`]), so no table of ideal pairs is ever stored: memory is
//! `O(ideals * (k + 1) * (l + 1))` plus the ideals themselves.
//!
//! Pruning: a block's *lower bound* (e.g. its compute time) never decreases as the block
//! grows, so once the bound reaches the worst current value of `I`'s row, no larger block can
//! improve it and that branch of the descent is cut. The answer is unaffected.

use rayon::prelude::*;

use crate::error::{check_values, CoreError, CoreResult};
use crate::ideals::Ideals;

pub const INF: f64 = f64::INFINITY;

/// Costs of the current block on each device kind, with monotone lower bounds.
#[derive(Debug, Clone, Copy)]
pub struct Costs {
    pub acc: f64,
    pub cpu: f64,
    /// Lower bound on `acc` for this block and every superset the descent can reach.
    pub acc_lb: f64,
    /// Likewise for `cpu`.
    pub cpu_lb: f64,
}

/// A block cost kept incrementally as the block grows and shrinks one node at a time.
pub trait BlockCost: Sync {
    type State: Send;
    fn new_state(&self) -> Self::State;
    /// Add node `v` (of the DAG the ideals were enumerated on) to the block.
    fn push(&self, st: &mut Self::State, v: usize);
    /// Undo the last `push(v)`.
    fn pop(&self, st: &mut Self::State, v: usize);
    fn eval(&self, st: &Self::State) -> Costs;
}

/// One block of the optimal split, on a device of the given kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub accelerator: bool,
    pub nodes: Vec<usize>,
}

#[derive(Debug, Clone)]
pub struct DpSolution {
    /// Optimal max load; `INF` when no split fits.
    pub objective: f64,
    /// Blocks in pipeline order (the first holds the sources).
    pub blocks: Vec<Block>,
    pub ideals: usize,
    /// Ideal pairs `(I, J)` whose block cost was evaluated (all of them when `prune` is off).
    pub pairs: u64,
}

const ACC_SKIP: u8 = 0;
const CPU_SKIP: u8 = 1;
const ACC_BLOCK: u8 = 2;
const CPU_BLOCK: u8 = 3;

struct Frame {
    k: u32,
    r: u32,
    next: usize,
    added: u32,
}

/// One ideal's DP row, its back-pointers and the number of sub-ideal pairs visited.
type Row = (Vec<f64>, Vec<(u32, u8)>, u64);

/// Run the DP with `accelerators` accelerators and `cpus` CPUs.
///
/// With `prune`, a block stops growing once its monotone lower bound can no longer improve
/// the row, or exceeds `upper` (the cost of some known solution, or `INF`): no solution of
/// cost `<= upper` uses such a block, so the optimum is unchanged whenever `upper` is at
/// least the optimum. A result `<= upper` is always the optimum; a larger one (or `INF`)
/// means `upper` was below the optimum, and the DP must run again without it.
pub fn solve<C: BlockCost>(
    ideals: &Ideals,
    cost: &C,
    accelerators: usize,
    cpus: usize,
    prune: bool,
    upper: f64,
) -> CoreResult<DpSolution> {
    let kf = accelerators + 1;
    let width = (cpus + 1) * kf;
    if width > 1 << 20 {
        return Err(CoreError::InvalidInput(format!(
            "too many devices: {accelerators} accelerators x {cpus} CPUs"
        )));
    }
    let n_ideals = ideals.len();
    let mut dp = vec![INF; n_ideals * width];
    let mut back: Vec<(u32, u8)> = vec![(0, ACC_SKIP); n_ideals * width];
    for x in dp[..width].iter_mut() {
        *x = 0.0;
    }
    let mut pairs_total = 0u64;
    for level in ideals.levels().into_iter().skip(1) {
        let start = level.start;
        let dp_ref = &dp;
        let rows: Vec<Row> = level
            .into_par_iter()
            .map_init(
                || cost.new_state(),
                |st, id| row_for(ideals, cost, st, dp_ref, id, accelerators, cpus, prune, upper),
            )
            .collect();
        for (i, (row, brow, pairs)) in rows.into_iter().enumerate() {
            let id = start + i;
            dp[id * width..(id + 1) * width].copy_from_slice(&row);
            back[id * width..(id + 1) * width].copy_from_slice(&brow);
            pairs_total += pairs;
        }
    }
    let full = ideals.full();
    let objective = dp[full * width + cpus * kf + accelerators];
    let mut blocks = Vec::new();
    if objective.is_finite() {
        let (mut id, mut c, mut f) = (full, cpus, accelerators);
        while id != 0 {
            let (sub, kind) = back[id * width + c * kf + f];
            match kind {
                ACC_SKIP => f -= 1,
                CPU_SKIP => c -= 1,
                _ => {
                    let sub = sub as usize;
                    let nodes: Vec<usize> = (0..ideals.num_nodes())
                        .filter(|&v| ideals.contains(id, v) && !ideals.contains(sub, v))
                        .collect();
                    let accelerator = kind == ACC_BLOCK;
                    blocks.push(Block { accelerator, nodes });
                    if accelerator {
                        f -= 1
                    } else {
                        c -= 1
                    }
                    id = sub;
                }
            }
        }
        blocks.reverse();
    }
    Ok(DpSolution { objective, blocks, ideals: n_ideals, pairs: pairs_total })
}

#[allow(clippy::too_many_arguments)]
fn row_for<C: BlockCost>(
    ideals: &Ideals,
    cost: &C,
    st: &mut C::State,
    dp: &[f64],
    id: usize,
    accelerators: usize,
    cpus: usize,
    prune: bool,
    upper: f64,
) -> Row {
    let kf = accelerators + 1;
    let width = (cpus + 1) * kf;
    let mut row = vec![INF; width];
    let mut brow = vec![(id as u32, ACC_SKIP); width];
    let mut pairs = 0u64;
    let thresholds = |row: &[f64]| -> (f64, f64) {
        let mut t_acc = -INF;
        let mut t_cpu = -INF;
        for c in 0..=cpus {
            for f in 0..=accelerators {
                let x = row[c * kf + f];
                if f > 0 && x > t_acc {
                    t_acc = x;
                }
                if c > 0 && x > t_cpu {
                    t_cpu = x;
                }
            }
        }
        (t_acc, t_cpu)
    };
    let (mut t_acc, mut t_cpu) = (INF, INF);
    let mut stack = vec![Frame { k: id as u32, r: u32::MAX, next: 0, added: u32::MAX }];
    while let Some(top) = stack.last_mut() {
        let subs = ideals.immediate_subs(top.k as usize);
        while top.next < subs.len() && ideals.rank(subs[top.next].0 as usize) >= top.r {
            top.next += 1;
        }
        if top.next == subs.len() {
            let added = top.added;
            stack.pop();
            if added != u32::MAX {
                cost.pop(st, added as usize);
            }
            continue;
        }
        let (v, sub) = subs[top.next];
        top.next += 1;
        cost.push(st, v as usize);
        pairs += 1;
        let cs = cost.eval(st);
        let prev = &dp[sub as usize * width..(sub as usize + 1) * width];
        let mut changed = false;
        for c in 0..=cpus {
            for f in 0..=accelerators {
                let j = c * kf + f;
                if f > 0 && cs.acc < row[j] {
                    let cand = prev[j - 1].max(cs.acc);
                    if cand < row[j] {
                        row[j] = cand;
                        brow[j] = (sub, ACC_BLOCK);
                        changed = true;
                    }
                }
                if c > 0 && cs.cpu < row[j] {
                    let cand = prev[j - kf].max(cs.cpu);
                    if cand < row[j] {
                        row[j] = cand;
                        brow[j] = (sub, CPU_BLOCK);
                        changed = true;
                    }
                }
            }
        }
        if changed {
            (t_acc, t_cpu) = thresholds(&row);
        }
        if prune && (cs.acc_lb >= t_acc || cs.acc_lb > upper) && (cs.cpu_lb >= t_cpu || cs.cpu_lb > upper) {
            cost.pop(st, v as usize);
            continue;
        }
        stack.push(Frame { k: sub, r: ideals.rank(v as usize), next: 0, added: v });
    }
    // "leave a device unused"
    for c in 0..=cpus {
        for f in 0..=accelerators {
            let j = c * kf + f;
            if f > 0 && row[j - 1] < row[j] {
                row[j] = row[j - 1];
                brow[j] = (id as u32, ACC_SKIP);
            }
            if c > 0 && row[j - kf] < row[j] {
                row[j] = row[j - kf];
                brow[j] = (id as u32, CPU_SKIP);
            }
        }
    }
    (row, brow, pairs)
}

/// The cost model of Table 1: a block on an accelerator pays its accelerator compute time plus
/// the communication cost of every producing node with an edge across the block boundary
/// (counted once per producer, in or out), and is infeasible over the memory limit or with an
/// unsupported node; a block on a CPU pays its CPU compute time only.
///
/// Blocks are sets of *units* (the DAG the ideals are built on, e.g. contracted colour
/// classes); each unit stands for a set of *original* nodes, on which the communication is
/// counted.
#[derive(Debug, Clone)]
pub struct MaxLoadCost {
    unit_acc: Vec<f64>,
    unit_cpu: Vec<f64>,
    unit_size: Vec<f64>,
    unit_bad_acc: Vec<u32>,
    unit_bad_cpu: Vec<u32>,
    members_off: Vec<usize>,
    members: Vec<u32>,
    comm: Vec<f64>,
    outdeg: Vec<u32>,
    opred_off: Vec<usize>,
    opred: Vec<u32>,
    acc_memory: f64,
    cpu_memory: f64,
}

/// Per-original-node inputs of [`MaxLoadCost`].
#[derive(Debug, Clone, Default)]
pub struct OriginalNodes {
    pub acc_time: Vec<f64>,
    pub cpu_time: Vec<f64>,
    pub size: Vec<f64>,
    pub comm: Vec<f64>,
    pub acc_ok: Vec<bool>,
    pub cpu_ok: Vec<bool>,
    /// Original edges (producer, consumer).
    pub edges: Vec<(u32, u32)>,
}

#[derive(Debug, Clone, Default)]
pub struct MaxLoadState {
    in_block: Vec<bool>,
    cnt: Vec<u32>,
    acc: f64,
    cpu: f64,
    size: f64,
    bad_acc: u32,
    bad_cpu: u32,
    comm: f64,
    saved: Vec<(f64, f64, f64, u32, u32, f64)>,
}


impl MaxLoadCost {
    /// `members[u]` lists the original nodes of unit `u`; every original node belongs to at
    /// most one unit (nodes in no unit are outside every block, e.g. never placed).
    pub fn new(
        orig: &OriginalNodes,
        members: &[Vec<u32>],
        acc_memory: f64,
        cpu_memory: f64,
    ) -> CoreResult<MaxLoadCost> {
        let n = orig.acc_time.len();
        check_values("acc_time", &orig.acc_time, n)?;
        check_values("cpu_time", &orig.cpu_time, n)?;
        check_values("size", &orig.size, n)?;
        check_values("comm", &orig.comm, n)?;
        if orig.acc_ok.len() != n || orig.cpu_ok.len() != n {
            return Err(CoreError::InvalidInput("acc_ok/cpu_ok: wrong length".into()));
        }
        if acc_memory.is_nan() || cpu_memory.is_nan() {
            return Err(CoreError::InvalidInput("memory limit is NaN".into()));
        }
        let mut owner = vec![u32::MAX; n];
        let mut members_off = vec![0usize];
        let mut flat = Vec::new();
        let (mut ua, mut uc, mut us, mut ba, mut bc) = (vec![], vec![], vec![], vec![], vec![]);
        for (u, ms) in members.iter().enumerate() {
            let (mut a, mut c, mut s, mut xa, mut xc) = (0.0, 0.0, 0.0, 0u32, 0u32);
            for &o in ms {
                let oi = o as usize;
                if oi >= n {
                    return Err(CoreError::InvalidInput(format!("unit {u}: member {o} out of range")));
                }
                if owner[oi] != u32::MAX {
                    return Err(CoreError::InvalidInput(format!("node {o} is in two units")));
                }
                owner[oi] = u as u32;
                a += orig.acc_time[oi];
                c += orig.cpu_time[oi];
                s += orig.size[oi];
                xa += u32::from(!orig.acc_ok[oi]);
                xc += u32::from(!orig.cpu_ok[oi]);
                flat.push(o);
            }
            members_off.push(flat.len());
            ua.push(a);
            uc.push(c);
            us.push(s);
            ba.push(xa);
            bc.push(xc);
        }
        let mut e: Vec<(u32, u32)> = orig.edges.clone();
        for &(a, b) in &e {
            if a as usize >= n || b as usize >= n || a == b {
                return Err(CoreError::InvalidInput(format!("bad original edge ({a}, {b})")));
            }
        }
        e.sort_unstable();
        e.dedup();
        let mut outdeg = vec![0u32; n];
        let mut opred_off = vec![0usize; n + 1];
        for &(a, b) in &e {
            outdeg[a as usize] += 1;
            opred_off[b as usize + 1] += 1;
        }
        for i in 0..n {
            opred_off[i + 1] += opred_off[i];
        }
        let mut fill = opred_off.clone();
        let mut opred = vec![0u32; e.len()];
        for &(a, b) in &e {
            opred[fill[b as usize]] = a;
            fill[b as usize] += 1;
        }
        Ok(MaxLoadCost {
            unit_acc: ua,
            unit_cpu: uc,
            unit_size: us,
            unit_bad_acc: ba,
            unit_bad_cpu: bc,
            members_off,
            members: flat,
            comm: orig.comm.clone(),
            outdeg,
            opred_off,
            opred,
            acc_memory,
            cpu_memory,
        })
    }

    pub fn num_units(&self) -> usize {
        self.unit_acc.len()
    }

    #[inline]
    fn contrib(&self, st: &MaxLoadState, u: usize) -> f64 {
        let crossing = if st.in_block[u] { st.cnt[u] < self.outdeg[u] } else { st.cnt[u] > 0 };
        if crossing {
            self.comm[u]
        } else {
            0.0
        }
    }

    fn unit_members(&self, v: usize) -> &[u32] {
        &self.members[self.members_off[v]..self.members_off[v + 1]]
    }
}

impl BlockCost for MaxLoadCost {
    type State = MaxLoadState;

    fn new_state(&self) -> MaxLoadState {
        let n = self.comm.len();
        MaxLoadState { in_block: vec![false; n], cnt: vec![0; n], ..Default::default() }
    }

    fn push(&self, st: &mut MaxLoadState, v: usize) {
        st.saved.push((st.acc, st.cpu, st.size, st.bad_acc, st.bad_cpu, st.comm));
        st.acc += self.unit_acc[v];
        st.cpu += self.unit_cpu[v];
        st.size += self.unit_size[v];
        st.bad_acc += self.unit_bad_acc[v];
        st.bad_cpu += self.unit_bad_cpu[v];
        let mut comm = st.comm;
        for &o in self.unit_members(v) {
            let o = o as usize;
            let before = self.contrib(st, o);
            st.in_block[o] = true;
            comm += self.contrib(st, o) - before;
        }
        for &o in self.unit_members(v) {
            let o = o as usize;
            for &u in &self.opred[self.opred_off[o]..self.opred_off[o + 1]] {
                let u = u as usize;
                let before = self.contrib(st, u);
                st.cnt[u] += 1;
                comm += self.contrib(st, u) - before;
            }
        }
        st.comm = comm.max(0.0);
    }

    fn pop(&self, st: &mut MaxLoadState, v: usize) {
        for &o in self.unit_members(v) {
            let o = o as usize;
            for &u in &self.opred[self.opred_off[o]..self.opred_off[o + 1]] {
                st.cnt[u as usize] -= 1;
            }
        }
        for &o in self.unit_members(v) {
            st.in_block[o as usize] = false;
        }
        let s = st.saved.pop().expect("pop without push");
        (st.acc, st.cpu, st.size, st.bad_acc, st.bad_cpu, st.comm) = s;
    }

    fn eval(&self, st: &MaxLoadState) -> Costs {
        let acc_ok = st.bad_acc == 0 && st.size <= self.acc_memory;
        let cpu_ok = st.bad_cpu == 0 && st.size <= self.cpu_memory;
        Costs {
            acc: if acc_ok { st.acc + st.comm } else { INF },
            cpu: if cpu_ok { st.cpu } else { INF },
            acc_lb: if acc_ok { st.acc } else { INF },
            cpu_lb: if cpu_ok { st.cpu } else { INF },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dag::Dag;

    /// Brute force over all assignments of units to devices, checking contiguity by requiring
    /// the blocks to form a chain of ideals in some order (tiny inputs only).
    fn brute(
        n: usize,
        edges: &[(u32, u32)],
        orig: &OriginalNodes,
        k: usize,
        l: usize,
        mem: f64,
    ) -> f64 {
        let dag = Dag::from_edges(n, edges).unwrap();
        let ideals = Ideals::enumerate(&dag, 1 << 20).unwrap();
        let members: Vec<Vec<u32>> = (0..n as u32).map(|v| vec![v]).collect();
        let cost = MaxLoadCost::new(orig, &members, mem, INF).unwrap();
        // all chains of ideals: recursive over (ideal, accs left, cpus left)
        fn rec(
            ideals: &Ideals,
            cost: &MaxLoadCost,
            id: usize,
            k: usize,
            l: usize,
        ) -> f64 {
            if id == 0 {
                return 0.0;
            }
            let mut best = INF;
            let n = ideals.num_nodes();
            for j in 0..ideals.len() {
                if j == id || !(0..n).all(|v| !ideals.contains(j, v) || ideals.contains(id, v)) {
                    continue;
                }
                let mut st = cost.new_state();
                let block: Vec<usize> =
                    (0..n).filter(|&v| ideals.contains(id, v) && !ideals.contains(j, v)).collect();
                for &v in &block {
                    cost.push(&mut st, v);
                }
                let cs = cost.eval(&st);
                if k > 0 {
                    best = best.min(rec(ideals, cost, j, k - 1, l).max(cs.acc));
                }
                if l > 0 {
                    best = best.min(rec(ideals, cost, j, k, l - 1).max(cs.cpu));
                }
            }
            best
        }
        rec(&ideals, &cost, ideals.full(), k, l)
    }

    fn lcg(seed: &mut u64) -> f64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 33) as f64) / (1u64 << 31) as f64
    }

    #[test]
    fn dp_equals_brute_force_on_random_dags() {
        let mut seed = 7u64;
        for trial in 0..60 {
            let n = 2 + trial % 6;
            let mut edges = vec![];
            for a in 0..n {
                for b in a + 1..n {
                    if lcg(&mut seed) < 0.35 {
                        edges.push((a as u32, b as u32));
                    }
                }
            }
            let orig = OriginalNodes {
                acc_time: (0..n).map(|_| (lcg(&mut seed) * 10.0).round()).collect(),
                cpu_time: (0..n).map(|_| (lcg(&mut seed) * 30.0).round()).collect(),
                size: (0..n).map(|_| (lcg(&mut seed) * 5.0).round()).collect(),
                comm: (0..n).map(|_| (lcg(&mut seed) * 4.0).round()).collect(),
                acc_ok: (0..n).map(|_| lcg(&mut seed) < 0.9).collect(),
                cpu_ok: vec![true; n],
                edges: edges.clone(),
            };
            let k = 1 + trial % 3;
            let l = trial % 2;
            let mem = if trial % 3 == 0 { INF } else { 8.0 };
            let dag = Dag::from_edges(n, &edges).unwrap();
            let ideals = Ideals::enumerate(&dag, 1 << 20).unwrap();
            let members: Vec<Vec<u32>> = (0..n as u32).map(|v| vec![v]).collect();
            let cost = MaxLoadCost::new(&orig, &members, mem, INF).unwrap();
            let want = brute(n, &edges, &orig, k, l, mem);
            for prune in [false, true] {
                let sol = solve(&ideals, &cost, k, l, prune, INF).unwrap();
                assert_eq!(sol.objective, want, "trial {trial} prune {prune}");
                if want.is_finite() {
                    // an upper bound equal to the optimum keeps it
                    let tight = solve(&ideals, &cost, k, l, prune, want).unwrap();
                    assert_eq!(tight.objective, want, "trial {trial} prune {prune} upper");
                    // a bound below the optimum never yields a result at or below it
                    let low = solve(&ideals, &cost, k, l, prune, want * 0.7).unwrap();
                    assert!(low.objective > want * 0.7 || want == 0.0, "trial {trial} low bound");
                }
                if want.is_finite() {
                    let mut all: Vec<usize> = sol.blocks.iter().flat_map(|b| b.nodes.clone()).collect();
                    all.sort();
                    assert_eq!(all, (0..n).collect::<Vec<_>>());
                    let accs = sol.blocks.iter().filter(|b| b.accelerator).count();
                    assert!(accs <= k && sol.blocks.len() - accs <= l);
                }
            }
        }
    }
}
