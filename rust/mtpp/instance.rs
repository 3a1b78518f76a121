//! An MTPP instance: units with work and parameter sizes, the tensors between them, the memory
//! model, and the reference block cost of the definition.

use crate::dag::{csr, Dag};
use crate::error::{CoreError, CoreResult};
use crate::numeric::{check_values, is_finite_nonneg, CompensatedSum, INF};

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
    /// `fast >= 0` (may be infinite), `reserved` finite `>= 0`, `bandwidth > 0` if given.
    pub fn check(&self) -> CoreResult<()> {
        if self.fast.is_nan() || self.fast < 0.0 {
            return Err(CoreError::InvalidInput(format!(
                "fast_memory = {} is invalid",
                self.fast
            )));
        }
        if !is_finite_nonneg(self.reserved) {
            return Err(CoreError::InvalidInput(format!(
                "reserved memory = {} is invalid",
                self.reserved
            )));
        }
        if let Some(b) = self.bandwidth {
            if b.is_nan() || b <= 0.0 {
                return Err(CoreError::InvalidInput(format!(
                    "bandwidth = {b} must be positive"
                )));
            }
        }
        Ok(())
    }

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

/// The validated tensors in flat form, and the pairs the unit DAG and the per-unit CSR lists
/// are built from.
struct TensorLists {
    t_cost: Vec<f64>,
    t_prod: Vec<u32>,
    t_cons_off: Vec<usize>,
    t_cons: Vec<u32>,
    /// `(producer, consumer)` unit edges.
    edges: Vec<(u32, u32)>,
    /// `(producer unit, tensor)` and `(consumer unit, tensor)`, tensors ascending.
    prod_pairs: Vec<(usize, u32)>,
    cons_pairs: Vec<(usize, u32)>,
}

impl TensorLists {
    fn build(tensors: &[Tensor], n: usize) -> CoreResult<TensorLists> {
        let mut out = TensorLists {
            t_cost: Vec::with_capacity(tensors.len()),
            t_prod: Vec::with_capacity(tensors.len()),
            t_cons_off: vec![0usize],
            t_cons: Vec::new(),
            edges: Vec::new(),
            prod_pairs: Vec::new(),
            cons_pairs: Vec::new(),
        };
        for (i, t) in tensors.iter().enumerate() {
            let cs = checked_consumers(i, t, n)?;
            if cs.is_empty() {
                continue;
            }
            let id = out.t_cost.len() as u32;
            out.t_cost.push(t.cost);
            out.t_prod.push(t.producer);
            out.prod_pairs.push((t.producer as usize, id));
            for &c in &cs {
                out.edges.push((t.producer, c));
                out.cons_pairs.push((c as usize, id));
            }
            out.t_cons.extend_from_slice(&cs);
            out.t_cons_off.push(out.t_cons.len());
        }
        Ok(out)
    }
}

/// Tensor `i`'s distinct consumers other than its producer, ascending, after checking its
/// cost and indices.
fn checked_consumers(i: usize, t: &Tensor, n: usize) -> CoreResult<Vec<u32>> {
    if !is_finite_nonneg(t.cost) {
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
    Ok(cs)
}

/// A validated MTPP instance over units `0..n` (see the [module docs](crate::mtpp)).
#[derive(Debug, Clone)]
pub struct Instance {
    pub n: usize,
    /// Work and parameter bytes per unit.
    pub work: Vec<f64>,
    pub params: Vec<f64>,
    pub memory: Memory,
    /// The unit DAG (an edge per producer and consumer of a tensor).
    pub dag: Dag,
    /// Per tensor (only those with a consumer outside their producer): cost, producing unit,
    /// and the distinct consuming units (CSR, ascending).
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

impl Instance {
    /// Validate and build. Consumers equal to the producer are dropped (internal edges);
    /// duplicates are merged; tensors left without consumers are dropped. Errors: bad
    /// lengths/values/indices, a cycle among units.
    pub fn new(
        work: Vec<f64>,
        params: Vec<f64>,
        tensors: &[Tensor],
        memory: Memory,
    ) -> CoreResult<Instance> {
        let n = work.len();
        check_values("work", &work, n)?;
        check_values("params", &params, n)?;
        memory.check()?;
        let lists = TensorLists::build(tensors, n)?;
        let dag = Dag::from_edges(n, &lists.edges)?;
        let (prod_off, prod) = csr(n, lists.prod_pairs.iter().copied());
        let (cons_off, cons) = csr(n, lists.cons_pairs.iter().copied());
        Ok(Instance {
            n,
            work,
            params,
            memory,
            dag,
            t_cost: lists.t_cost,
            t_prod: lists.t_prod,
            t_cons_off: lists.t_cons_off,
            t_cons: lists.t_cons,
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

    /// Cost of one block, straight from the definition (reference; O(n + tensors)), summed
    /// with compensation ([`CompensatedSum`]) so that it is correctly rounded up to the last
    /// bits whatever the spread of the costs.
    pub fn block_cost(&self, in_block: &[bool]) -> f64 {
        let mut work = CompensatedSum::default();
        let mut params = CompensatedSum::default();
        for (u, _) in in_block.iter().enumerate().filter(|(_, &b)| b) {
            work.add(self.work[u]);
            params.add(self.params[u]);
        }
        for t in 0..self.num_tensors() {
            let p = in_block[self.t_prod[t] as usize];
            let cross = self.consumers(t).iter().any(|&c| in_block[c as usize] != p);
            if cross {
                work.add(self.t_cost[t]);
            }
        }
        work.add(self.memory.overflow(params.value()));
        work.value()
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
