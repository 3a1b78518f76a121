//! One topological order of an MTPP instance, with the prefix sums the segment costs need.

use super::Instance;

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
