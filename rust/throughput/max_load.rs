//! The max-load cost model of Table 1 (Tarnawski et al., NeurIPS 2020), as a [`BlockCost`]
//! for the generic ideal DP: the block costs `MaxLoadCost` keeps incrementally.

use crate::dag::csr;
use crate::error::{CoreError, CoreResult};
use crate::ideal_dp::{BlockCost, Costs};
use crate::numeric::{check_values, CompensatedSum, INF};

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

/// Per-unit sums of the original nodes' fields, and the members in CSR form.
struct UnitSums {
    acc: Vec<f64>,
    cpu: Vec<f64>,
    size: Vec<f64>,
    bad_acc: Vec<u32>,
    bad_cpu: Vec<u32>,
    members_off: Vec<usize>,
    members: Vec<u32>,
}

impl UnitSums {
    /// Errors: a member out of range, or a node in two units.
    fn new(orig: &OriginalNodes, members: &[Vec<u32>]) -> CoreResult<UnitSums> {
        let n = orig.acc_time.len();
        let mut owner = vec![u32::MAX; n];
        let mut out = UnitSums {
            acc: vec![],
            cpu: vec![],
            size: vec![],
            bad_acc: vec![],
            bad_cpu: vec![],
            members_off: vec![0usize],
            members: Vec::new(),
        };
        for (u, ms) in members.iter().enumerate() {
            let (mut a, mut c, mut s, mut xa, mut xc) = (0.0, 0.0, 0.0, 0u32, 0u32);
            for &o in ms {
                let oi = o as usize;
                if oi >= n {
                    return Err(CoreError::InvalidInput(format!(
                        "unit {u}: member {o} out of range"
                    )));
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
                out.members.push(o);
            }
            out.members_off.push(out.members.len());
            out.acc.push(a);
            out.cpu.push(c);
            out.size.push(s);
            out.bad_acc.push(xa);
            out.bad_cpu.push(xc);
        }
        Ok(out)
    }
}

/// Out-degree of every original node and its predecessors (CSR, ascending), duplicate edges
/// merged. Errors: an endpoint out of range or a self-loop.
fn original_preds(edges: &[(u32, u32)], n: usize) -> CoreResult<(Vec<u32>, Vec<usize>, Vec<u32>)> {
    let mut e: Vec<(u32, u32)> = edges.to_vec();
    for &(a, b) in &e {
        if a as usize >= n || b as usize >= n || a == b {
            return Err(CoreError::InvalidInput(format!(
                "bad original edge ({a}, {b})"
            )));
        }
    }
    e.sort_unstable();
    e.dedup();
    let mut outdeg = vec![0u32; n];
    for &(a, _) in &e {
        outdeg[a as usize] += 1;
    }
    let (opred_off, opred) = csr(n, e.iter().map(|&(a, b)| (b as usize, a)));
    Ok((outdeg, opred_off, opred))
}

/// The block being grown: which original nodes are in it, how many consumers of each original
/// node are in it, the running sums, and a stack of saved sums for `pop`.
///
/// The communication sum both grows and shrinks (a tensor stops crossing once its producer and
/// consumers are all inside), so it is compensated ([`CompensatedSum`]): with costs spanning
/// 1e16 and 1, a plain sum would lose the 1 and the DP would pick a split by a wrong cost. The
/// compute and memory sums only grow (each `pop` restores the saved value), so a plain sum is
/// accurate to the last bits there.
#[derive(Debug, Clone, Default)]
pub struct MaxLoadState {
    in_block: Vec<bool>,
    cnt: Vec<u32>,
    acc: f64,
    cpu: f64,
    size: f64,
    bad_acc: u32,
    bad_cpu: u32,
    comm: CompensatedSum,
    saved: Vec<(f64, f64, f64, u32, u32, CompensatedSum)>,
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
            return Err(CoreError::InvalidInput(
                "acc_ok/cpu_ok: wrong length".into(),
            ));
        }
        if acc_memory.is_nan() || cpu_memory.is_nan() {
            return Err(CoreError::InvalidInput("memory limit is NaN".into()));
        }
        let units = UnitSums::new(orig, members)?;
        let (outdeg, opred_off, opred) = original_preds(&orig.edges, n)?;
        Ok(MaxLoadCost {
            unit_acc: units.acc,
            unit_cpu: units.cpu,
            unit_size: units.size,
            unit_bad_acc: units.bad_acc,
            unit_bad_cpu: units.bad_cpu,
            members_off: units.members_off,
            members: units.members,
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
        let crossing = if st.in_block[u] {
            st.cnt[u] < self.outdeg[u]
        } else {
            st.cnt[u] > 0
        };
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
        MaxLoadState {
            in_block: vec![false; n],
            cnt: vec![0; n],
            ..Default::default()
        }
    }

    fn push(&self, st: &mut MaxLoadState, v: usize) {
        st.saved
            .push((st.acc, st.cpu, st.size, st.bad_acc, st.bad_cpu, st.comm));
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
            comm.add(self.contrib(st, o) - before); // (exact: one side is 0 or both equal)
        }
        for &o in self.unit_members(v) {
            let o = o as usize;
            for &u in &self.opred[self.opred_off[o]..self.opred_off[o + 1]] {
                let u = u as usize;
                let before = self.contrib(st, u);
                st.cnt[u] += 1;
                comm.add(self.contrib(st, u) - before);
            }
        }
        st.comm = comm;
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
        let mut load = st.comm;
        load.add(st.acc);
        Costs {
            acc: if acc_ok {
                load.value().max(st.acc)
            } else {
                INF
            },
            cpu: if cpu_ok { st.cpu } else { INF },
            acc_lb: if acc_ok { st.acc } else { INF },
            cpu_lb: if cpu_ok { st.cpu } else { INF },
        }
    }

    /// A unit's compute time on each kind (`INF` when it alone breaks the memory limit or holds
    /// an unsupported node): `acc_lb` and `cpu_lb` are the sums of these over the block.
    fn node_lb(&self, v: usize) -> (f64, f64) {
        let acc_ok = self.unit_bad_acc[v] == 0 && self.unit_size[v] <= self.acc_memory;
        let cpu_ok = self.unit_bad_cpu[v] == 0 && self.unit_size[v] <= self.cpu_memory;
        (
            if acc_ok { self.unit_acc[v] } else { INF },
            if cpu_ok { self.unit_cpu[v] } else { INF },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dag::Dag;
    use crate::ideal_dp::solve;
    use crate::ideals::Ideals;

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
        fn rec(ideals: &Ideals, cost: &MaxLoadCost, id: usize, k: usize, l: usize) -> f64 {
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
                let block: Vec<usize> = (0..n)
                    .filter(|&v| ideals.contains(id, v) && !ideals.contains(j, v))
                    .collect();
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
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
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
                    assert!(
                        low.objective > want * 0.7 || want == 0.0,
                        "trial {trial} low bound"
                    );
                }
                if want.is_finite() {
                    let mut all: Vec<usize> =
                        sol.blocks.iter().flat_map(|b| b.nodes.clone()).collect();
                    all.sort();
                    assert_eq!(all, (0..n).collect::<Vec<_>>());
                    let accs = sol.blocks.iter().filter(|b| b.accelerator).count();
                    assert!(accs <= k && sol.blocks.len() - accs <= l);
                }
            }
        }
    }

    /// The load of a block from the definition (compensated sums), for the tests below.
    fn reference_load(orig: &OriginalNodes, in_block: &[bool]) -> f64 {
        let mut load = CompensatedSum::default();
        for (u, _) in in_block.iter().enumerate().filter(|(_, &b)| b) {
            load.add(orig.acc_time[u]);
        }
        for u in 0..in_block.len() {
            let crosses = orig
                .edges
                .iter()
                .any(|&(a, b)| a as usize == u && in_block[b as usize] != in_block[u]);
            if crosses {
                load.add(orig.comm[u]);
            }
        }
        load.value()
    }

    /// Communication costs spanning 1e16 and 1 (issue 10): a 4-node chain with comm
    /// `[0, 1e16, 1, 0]` gets the right optimum, and every block's incremental cost is the
    /// reference one on random graphs with such costs.
    #[test]
    fn wide_cost_ranges_get_the_right_answer() {
        let chain = OriginalNodes {
            acc_time: vec![1.0; 4],
            cpu_time: vec![1.0; 4],
            size: vec![0.0; 4],
            comm: vec![0.0, 1e16, 1.0, 0.0],
            acc_ok: vec![true; 4],
            cpu_ok: vec![true; 4],
            edges: vec![(0, 1), (1, 2), (2, 3)],
        };
        let dag = Dag::from_edges(4, &chain.edges).unwrap();
        let ideals = Ideals::enumerate(&dag, 100).unwrap();
        let members: Vec<Vec<u32>> = (0..4u32).map(|v| vec![v]).collect();
        let cost = MaxLoadCost::new(&chain, &members, INF, INF).unwrap();
        // k = 2: {0} | {1, 2, 3} costs max(1, 3) (the 1e16 tensor stays inside)
        for (k, want) in [(1, 4.0), (2, 3.0), (3, 3.0), (4, 3.0)] {
            for prune in [false, true] {
                let sol = solve(&ideals, &cost, k, 0, prune, INF).unwrap();
                assert_eq!(sol.objective, want, "k {k} prune {prune}");
                assert_eq!(brute(4, &chain.edges, &chain, k, 0, INF), want);
            }
        }
        let mut seed = 11u64;
        for trial in 0..80 {
            let n = 2 + trial % 6;
            let mut edges = vec![];
            for a in 0..n {
                for b in a + 1..n {
                    if lcg(&mut seed) < 0.5 {
                        edges.push((a as u32, b as u32));
                    }
                }
            }
            let scale = |x: f64| if x > 0.6 { 1e16 } else { 1.0 };
            let orig = OriginalNodes {
                acc_time: (0..n).map(|_| (lcg(&mut seed) * 4.0).round()).collect(),
                cpu_time: vec![0.0; n],
                size: vec![0.0; n],
                comm: (0..n)
                    .map(|_| (lcg(&mut seed) * 3.0).round() * scale(lcg(&mut seed)))
                    .collect(),
                acc_ok: vec![true; n],
                cpu_ok: vec![true; n],
                edges: edges.clone(),
            };
            let members: Vec<Vec<u32>> = (0..n as u32).map(|v| vec![v]).collect();
            let cost = MaxLoadCost::new(&orig, &members, INF, INF).unwrap();
            let mut st = cost.new_state();
            let mut in_block = vec![false; n];
            for v in (0..n).rev() {
                cost.push(&mut st, v);
                in_block[v] = true;
                assert_eq!(
                    cost.eval(&st).acc,
                    reference_load(&orig, &in_block),
                    "trial {trial}"
                );
            }
        }
    }
}
