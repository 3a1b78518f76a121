//! SliceGraph for MTPP (max-throughput pipeline partitioning; Archer, Fahrbach, Liu, Prabhu,
//! "Practical Performance Guarantees for Pipelined DNN Inference", Sections 2 and 4).
//!
//! An [`Instance`] is a DAG of *units* (nodes, or groups of nodes that must share a block) with
//! a work and a parameter size each, and a list of *tensors*: one per producing node, with a
//! transfer cost, the unit producing it and the distinct other units consuming it. A block
//! `S` (a set of units) costs
//!
//! ```text
//! f(S) = sum of tensor costs entering S  +  work(S)  +  sum of tensor costs leaving S
//!        + (params(S) + reserved - fast_memory)^+ / bandwidth
//! ```
//!
//! each tensor counted once however many consumers it has on the other side. With no
//! bandwidth the memory is a hard limit (a block over it costs `INF`). The blocks of a
//! partition must form an acyclic quotient graph; the objective is the largest block cost.
//!
//! Modules: [`fenwick`] (segment costs of Lemma 4.1 and the naive oracle), [`kahn`]
//! (Algorithm 3), [`dp`] (Algorithm 1, the SliceGraph DP over one order), [`search`]
//! (random-T, BRKGA over priorities with the Kahn + SliceGraph decoder, MLA orders), and
//! [`exact`] (the MTPP block cost for the generic ideal DP).

pub mod dp;
pub mod exact;
pub mod fenwick;
pub mod kahn;
pub mod rng;
pub mod search;

use crate::dag::Dag;
use crate::error::{check_values, CoreError, CoreResult};

pub const INF: f64 = f64::INFINITY;

/// The memory model: `fast` bytes of fast memory, `reserved` of them kept for activations;
/// parameters over the rest are streamed at `bandwidth` (bytes per time unit), or, with no
/// bandwidth, make the block infeasible.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    pub fast: f64,
    pub reserved: f64,
    pub bandwidth: Option<f64>,
}

impl Default for Memory {
    fn default() -> Self {
        Memory {
            fast: INF,
            reserved: 0.0,
            bandwidth: None,
        }
    }
}

impl Memory {
    /// The overflow term for a block holding `params` bytes of parameters (monotone).
    #[inline]
    pub fn overflow(&self, params: f64) -> f64 {
        let x = params + self.reserved - self.fast;
        if x.is_nan() || x <= 0.0 {
            0.0
        } else {
            match self.bandwidth {
                Some(b) => x / b,
                None => INF,
            }
        }
    }
}

/// One producing node's output: cost, producing unit, distinct consuming units.
#[derive(Debug, Clone)]
pub struct Tensor {
    pub cost: f64,
    pub producer: u32,
    pub consumers: Vec<u32>,
}

#[derive(Debug, Clone)]
pub struct Instance {
    pub n: usize,
    pub work: Vec<f64>,
    pub params: Vec<f64>,
    pub memory: Memory,
    pub dag: Dag,
    pub t_cost: Vec<f64>,
    pub t_prod: Vec<u32>,
    pub t_cons_off: Vec<usize>,
    pub t_cons: Vec<u32>,
    /// Tensors produced by each unit (CSR).
    pub prod_off: Vec<usize>,
    pub prod: Vec<u32>,
    /// Tensors consumed by each unit (CSR).
    pub cons_off: Vec<usize>,
    pub cons: Vec<u32>,
}


fn csr(n: usize, pairs: &[(usize, u32)]) -> (Vec<usize>, Vec<u32>) {
    let mut off = vec![0usize; n + 1];
    for &(a, _) in pairs {
        off[a + 1] += 1;
    }
    for i in 0..n {
        off[i + 1] += off[i];
    }
    let mut fill = off.clone();
    let mut out = vec![0u32; pairs.len()];
    for &(a, b) in pairs {
        out[fill[a]] = b;
        fill[a] += 1;
    }
    (off, out)
}

impl Instance {
    /// Validate and build. Consumers equal to the producer are dropped (internal edges);
    /// duplicates are merged. Errors: bad lengths/values/indices, a cycle among units.
    pub fn new(
        work: Vec<f64>,
        params: Vec<f64>,
        tensors: &[Tensor],
        memory: Memory,
    ) -> CoreResult<Instance> {
        let n = work.len();
        check_values("work", &work, n)?;
        check_values("params", &params, n)?;
        if memory.fast.is_nan() || memory.fast < 0.0 {
            return Err(CoreError::InvalidInput(format!(
                "fast_memory = {} is invalid",
                memory.fast
            )));
        }
        if !(memory.reserved.is_finite() && memory.reserved >= 0.0) {
            return Err(CoreError::InvalidInput(format!(
                "reserved memory = {} is invalid",
                memory.reserved
            )));
        }
        if let Some(b) = memory.bandwidth {
            if b.is_nan() || b <= 0.0 {
                return Err(CoreError::InvalidInput(format!(
                    "bandwidth = {b} must be positive"
                )));
            }
        }
        let mut t_cost = Vec::with_capacity(tensors.len());
        let mut t_prod = Vec::with_capacity(tensors.len());
        let mut t_cons_off = vec![0usize];
        let mut t_cons = Vec::new();
        let mut edges = Vec::new();
        let mut prod_pairs = Vec::new();
        let mut cons_pairs = Vec::new();
        for (i, t) in tensors.iter().enumerate() {
            if !(t.cost.is_finite() && t.cost >= 0.0) {
                return Err(CoreError::InvalidInput(format!(
                    "tensor {i}: cost {} is not a finite non-negative number",
                    t.cost
                )));
            }
            if t.producer as usize >= n {
                return Err(CoreError::InvalidInput(format!(
                    "tensor {i}: producer {} out of range",
                    t.producer
                )));
            }
            let mut cs: Vec<u32> = Vec::with_capacity(t.consumers.len());
            for &c in &t.consumers {
                if c as usize >= n {
                    return Err(CoreError::InvalidInput(format!(
                        "tensor {i}: consumer {c} out of range"
                    )));
                }
                if c != t.producer {
                    cs.push(c);
                }
            }
            cs.sort_unstable();
            cs.dedup();
            if cs.is_empty() {
                continue;
            }
            let id = t_cost.len() as u32;
            t_cost.push(t.cost);
            t_prod.push(t.producer);
            prod_pairs.push((t.producer as usize, id));
            for &c in &cs {
                edges.push((t.producer, c));
                cons_pairs.push((c as usize, id));
            }
            t_cons.extend_from_slice(&cs);
            t_cons_off.push(t_cons.len());
        }
        let dag = Dag::from_edges(n, &edges)?;
        let (prod_off, prod) = csr(n, &prod_pairs);
        let (cons_off, cons) = csr(n, &cons_pairs);
        Ok(Instance {
            n,
            work,
            params,
            memory,
            dag,
            t_cost,
            t_prod,
            t_cons_off,
            t_cons,
            prod_off,
            prod,
            cons_off,
            cons,
        })
    }

    pub fn num_tensors(&self) -> usize {
        self.t_cost.len()
    }

    #[inline]
    pub fn consumers(&self, t: usize) -> &[u32] {
        &self.t_cons[self.t_cons_off[t]..self.t_cons_off[t + 1]]
    }

    #[inline]
    pub fn produced(&self, u: usize) -> &[u32] {
        &self.prod[self.prod_off[u]..self.prod_off[u + 1]]
    }

    #[inline]
    pub fn consumed(&self, u: usize) -> &[u32] {
        &self.cons[self.cons_off[u]..self.cons_off[u + 1]]
    }

    /// Cost of one block, straight from the definition (reference; O(n + tensors)).
    pub fn block_cost(&self, in_block: &[bool]) -> f64 {
        let mut work = 0.0;
        let mut params = 0.0;
        for (u, _) in in_block.iter().enumerate().filter(|(_, &b)| b) {
            work += self.work[u];
            params += self.params[u];
        }
        let mut io = 0.0;
        for t in 0..self.num_tensors() {
            let p = in_block[self.t_prod[t] as usize];
            let cross = self.consumers(t).iter().any(|&c| in_block[c as usize] != p);
            if cross {
                io += self.t_cost[t];
            }
        }
        work + self.memory.overflow(params) + io
    }

    /// Simple lower bound on the optimum with at most `k` blocks: the largest single-unit
    /// work + overflow, and for every block count `j <= k` the average
    /// `(W + (P + j (reserved - fast))^+ / bandwidth) / j` (the overflow is superadditive),
    /// minimised over `j`.
    pub fn lower_bound(&self, k: usize) -> f64 {
        let mut lb: f64 = 0.0;
        for u in 0..self.n {
            lb = lb.max(self.work[u] + self.memory.overflow(self.params[u]));
        }
        let w: f64 = self.work.iter().sum();
        let p: f64 = self.params.iter().sum();
        let mut avg = INF;
        for j in 1..=k.max(1).min(self.n.max(1)) {
            let over = p + j as f64 * (self.memory.reserved - self.memory.fast);
            let o = if over.is_nan() || over <= 0.0 {
                0.0
            } else {
                match self.memory.bandwidth {
                    Some(b) => over / b,
                    None => INF,
                }
            };
            avg = avg.min((w + o) / j as f64);
        }
        lb.max(avg)
    }

    /// Check that `order` is a topological order of the units.
    pub fn check_order(&self, order: &[usize]) -> CoreResult<Vec<u32>> {
        if order.len() != self.n {
            return Err(CoreError::InvalidInput(format!(
                "order: expected {} units, got {}",
                self.n,
                order.len()
            )));
        }
        let mut pos = vec![u32::MAX; self.n];
        for (i, &u) in order.iter().enumerate() {
            if u >= self.n || pos[u] != u32::MAX {
                return Err(CoreError::InvalidInput(format!(
                    "order: {u} is out of range or repeated"
                )));
            }
            pos[u] = i as u32;
        }
        for u in 0..self.n {
            for &v in self.dag.succs(u) {
                if pos[v as usize] < pos[u] {
                    return Err(CoreError::InvalidInput(format!(
                        "order: unit {v} comes before its predecessor {u}"
                    )));
                }
            }
        }
        Ok(pos)
    }
}

/// Per-order data shared by the segment-cost providers and the DP.
#[derive(Debug, Clone)]
pub struct OrderCtx<'a> {
    pub inst: &'a Instance,
    pub order: Vec<usize>,
    pub pos: Vec<u32>,
    /// Prefix sums of work and params along the order (`n + 1` entries).
    pub pw: Vec<f64>,
    pub pp: Vec<f64>,
    /// Largest consumer position per tensor.
    pub qmax: Vec<u32>,
}

impl<'a> OrderCtx<'a> {
    /// `order` must be a topological order (checked by the callers that take user input).
    pub fn new(inst: &'a Instance, order: Vec<usize>) -> OrderCtx<'a> {
        let n = inst.n;
        let mut pos = vec![0u32; n];
        for (i, &u) in order.iter().enumerate() {
            pos[u] = i as u32;
        }
        let mut pw = vec![0.0; n + 1];
        let mut pp = vec![0.0; n + 1];
        for (i, &u) in order.iter().enumerate() {
            pw[i + 1] = pw[i] + inst.work[u];
            pp[i + 1] = pp[i] + inst.params[u];
        }
        let qmax = (0..inst.num_tensors())
            .map(|t| {
                inst.consumers(t)
                    .iter()
                    .map(|&c| pos[c as usize])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        OrderCtx {
            inst,
            order,
            pos,
            pw,
            pp,
            qmax,
        }
    }

    pub fn n(&self) -> usize {
        self.order.len()
    }

    /// Work + overflow of the segment `[l, r]` of the order: monotone lower bound of its cost.
    #[inline]
    pub fn seg_lb(&self, l: usize, r: usize) -> f64 {
        (self.pw[r + 1] - self.pw[l]) + self.inst.memory.overflow(self.pp[r + 1] - self.pp[l])
    }
}

#[cfg(test)]
pub(crate) mod tests_common {
    use super::rng::Rng;
    use super::*;

    /// A random DAG of `n` units with integer costs (so float sums are exact); each node's
    /// tensor goes to its out-neighbours. With `overflow`, a small fast memory and a
    /// bandwidth that divides exactly.
    pub fn random_instance(rng: &mut Rng, n: usize, p: f64, overflow: bool) -> Instance {
        let mut succ: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (a, sa) in succ.iter_mut().enumerate() {
            for b in a + 1..n {
                if rng.unit() < p {
                    sa.push(b as u32);
                }
            }
        }
        // relabel by a random permutation so index order is not topological
        let mut perm: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = rng.below(i + 1);
            perm.swap(i, j);
        }
        let mut tensors = Vec::new();
        for a in 0..n {
            if !succ[a].is_empty() {
                tensors.push(Tensor {
                    cost: rng.below(6) as f64,
                    producer: perm[a] as u32,
                    consumers: succ[a].iter().map(|&b| perm[b as usize] as u32).collect(),
                });
            }
        }
        let mut work = vec![0.0; n];
        let mut params = vec![0.0; n];
        for a in 0..n {
            work[perm[a]] = rng.below(10) as f64;
            params[perm[a]] = rng.below(5) as f64;
        }
        let memory = if overflow {
            Memory {
                fast: 6.0,
                reserved: 1.0,
                bandwidth: Some(0.5),
            }
        } else {
            Memory::default()
        };
        Instance::new(work, params, &tensors, memory).unwrap()
    }
}
