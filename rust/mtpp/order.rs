//! One topological order of an MTPP instance, with the prefix sums the segment costs need.

use super::Instance;
use crate::numeric::{spans_widely, CompensatedSum};

/// Per-order data shared by the segment-cost providers and the DP.
#[derive(Debug, Clone)]
pub struct OrderCtx<'a> {
    pub inst: &'a Instance,
    pub order: Vec<usize>,
    pub pos: Vec<u32>,
    /// Prefix sums of work and params along the order (`n + 1` entries); the params' carry the
    /// rounding error of their compensated sum in `pp_lo` when the values span widely (else
    /// 0), so that a segment's parameters (a difference of two prefixes) keep their small terms
    /// next to large ones (1 next to 1e16).
    pub pw: Vec<f64>,
    pub pp: Vec<f64>,
    pp_lo: Vec<f64>,
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
        let (mut pp, mut pp_lo) = (vec![0.0; n + 1], vec![0.0; n + 1]);
        let mut p = CompensatedSum::default();
        // a segment's parameters decide a hard memory limit, so they keep their small terms
        // when the values span widely; its work is compared with the answer, which is at least
        // the total work over the block count: a plain prefix sum is accurate enough there
        let wide_p = spans_widely(inst.params.iter().copied());
        for (i, &u) in order.iter().enumerate() {
            pw[i + 1] = pw[i] + inst.work[u];
            if wide_p {
                p.add(inst.params[u]);
            } else {
                p.add_plain(inst.params[u]);
            }
            (pp[i + 1], pp_lo[i + 1]) = p.parts();
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
            pp_lo,
            qmax,
        }
    }

    pub fn n(&self) -> usize {
        self.order.len()
    }

    /// Work + overflow of the segment `[l, r]` of the order: monotone lower bound of its cost.
    #[inline]
    pub fn seg_lb(&self, l: usize, r: usize) -> f64 {
        let work = self.pw[r + 1] - self.pw[l];
        work + self
            .inst
            .memory
            .overflow(segment_sum(&self.pp, &self.pp_lo, l, r))
    }
}

/// `prefix[r + 1] - prefix[l]` of compensated prefix sums (`hi`, `lo`), rounded once.
#[inline]
fn segment_sum(hi: &[f64], lo: &[f64], l: usize, r: usize) -> f64 {
    if lo[r + 1] == 0.0 && lo[l] == 0.0 {
        return (hi[r + 1] - hi[l]).max(0.0); // no pending rounding error: one subtraction
    }
    let mut s = CompensatedSum::default();
    s.add(hi[r + 1]);
    s.add(-hi[l]);
    s.add(lo[r + 1] - lo[l]);
    s.value().max(0.0)
}
