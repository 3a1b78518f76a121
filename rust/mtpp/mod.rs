//! MTPP, max-throughput pipeline partitioning for inference, and SliceGraph (Archer, Fahrbach,
//! Liu, Prabhu, "Practical Performance Guarantees for Pipelined DNN Inference",
//! arXiv:2311.03703, Sections 2 and 4).
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
//! Where each piece of the paper lives:
//!
//! * [`instance`]: the [`Instance`] (units, tensors, [`Memory`]) and the block cost `f(S)`
//!   from its definition;
//! * [`order`]: one topological order with its prefix sums ([`OrderCtx`]);
//! * [`fenwick`]: the segment costs of one order (Lemma 4.1, a 2D Fenwick tree) and the naive
//!   oracle;
//! * [`kahn`]: Kahn's algorithm with priorities (Algorithm 3);
//! * [`slicegraph`]: SliceGraph, the optimal split of one order (Algorithm 1);
//! * [`search`]: the searches over orders (Algorithm 2: random-T, BRKGA with the Kahn +
//!   SliceGraph decoder, MLA orders), with the seeded PRNG of [`rng`];
//! * [`exact`]: the exact optimum, the generic ideal DP of [`crate::ideal_dp`] with the MTPP
//!   block cost (Theorem 4.3 ties it to the searches).
//!
//! Python: `stagecut.mtpp` (`_core.mtpp_slice`, `_core.mtpp_exact`, `_core.mtpp_segment_io`).

pub mod exact;
pub mod fenwick;
pub mod instance;
pub mod kahn;
pub mod order;
pub mod pricing;
pub mod pricing_local;
pub mod rng;
pub mod search;
pub mod slicegraph;

pub use instance::{Instance, Memory, Tensor};
pub use order::OrderCtx;

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
